//! The signed move's planner against rule 15 itself: a model world (a registry and its
//! parent servers, two providers and their name servers, each address lagging on its
//! own) keeps the history of what every address served, and after every operation every
//! cache a resolver may hold is checked to validate what every reachable name server
//! answers now (DESIGN.md rule 15). The phases are not consulted: the oracle is the
//! caches.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::RngAlgorithm;

use super::signed_move::{
    Answer, ChildSeen, Delegation, Instruction, Move, MoveEffect, MoveLook, MovePolicy, ParentSeen,
    Phase, Side, source_may_go_off, step,
};
use crate::dnssec::{DigestType, Dnskey, Ds};
use crate::time::Timestamp;

const ZONE: &str = "moving.test.";
const T0: Timestamp = Timestamp(1_800_000_000_000);

fn key(n: u8) -> Dnskey {
    Dnskey {
        flags: 257,
        protocol: 3,
        algorithm: 13,
        public_key: vec![n; 64],
    }
}

fn ds(k: &Dnskey) -> Ds {
    k.to_ds(ZONE, DigestType::Sha256)
        .expect("a DS of a test key")
}

/// What one child address serves: the DNSKEY set and the key signing it; `None`
/// unsigned.
type Served = Option<(Vec<Dnskey>, Dnskey)>;

#[derive(Debug, Clone)]
struct ChildAddr {
    /// (since, what), in time order; the last is what it serves now.
    history: Vec<(Timestamp, Served)>,
    unknown: bool,
}

#[derive(Debug, Clone)]
struct Prov {
    key: Option<Dnskey>,
    foreign: Vec<Dnskey>,
    addrs: Vec<ChildAddr>,
}

impl Prov {
    fn config(&self) -> Served {
        self.key.clone().map(|k| {
            let mut keys = vec![k.clone()];
            keys.extend(self.foreign.iter().filter(|f| **f != k).cloned());
            (keys, k)
        })
    }
}

#[derive(Debug, Clone)]
struct ParentAddr {
    history: Vec<(Timestamp, Vec<Ds>, Delegation)>,
    unknown: bool,
}

#[derive(Debug, Clone, Copy)]
struct ModelTtls {
    ds: u32,
    dnskey: u32,
    parent_ns: u32,
    apex_ns: u32,
}

#[derive(Debug, Clone)]
struct World {
    now: Timestamp,
    ttl: ModelTtls,
    src: Prov,
    tgt: Prov,
    registry_ds: Vec<Ds>,
    registry_deleg: Delegation,
    parents: Vec<ParentAddr>,
    /// Instructions given to the registrar, acted on in order.
    pending: Vec<Instruction>,
    api_unknown: bool,
    next_key: u8,
}

impl World {
    fn new(ttl: ModelTtls, target_signs: bool) -> World {
        let long_ago = Timestamp(T0.0 - 30 * 86_400_000);
        let ks = key(1);
        let kt = key(2);
        let addr = |served: Served| ChildAddr {
            history: vec![(long_ago, served)],
            unknown: false,
        };
        let src = Prov {
            key: Some(ks.clone()),
            foreign: vec![],
            addrs: vec![
                addr(Some((vec![ks.clone()], ks.clone()))),
                addr(Some((vec![ks.clone()], ks.clone()))),
            ],
        };
        let tgt_served = target_signs.then(|| (vec![kt.clone()], kt.clone()));
        let tgt = Prov {
            key: target_signs.then(|| kt.clone()),
            foreign: vec![],
            addrs: vec![addr(tgt_served.clone()), addr(tgt_served)],
        };
        let parent = || ParentAddr {
            history: vec![(long_ago, vec![ds(&ks)], Delegation::Source)],
            unknown: false,
        };
        World {
            now: T0,
            ttl,
            src,
            tgt,
            registry_ds: vec![ds(&ks)],
            registry_deleg: Delegation::Source,
            parents: vec![parent(), parent(), parent()],
            pending: vec![],
            api_unknown: false,
            next_key: 3,
        }
    }

    fn prov(&mut self, side: Side) -> &mut Prov {
        match side {
            Side::Source => &mut self.src,
            Side::Target => &mut self.tgt,
        }
    }

    fn propagate_child(&mut self, side: Side, i: usize) {
        let now = self.now;
        let prov = self.prov(side);
        let config = prov.config();
        let i = i % prov.addrs.len();
        let addr = &mut prov.addrs[i];
        if addr.history.last().is_some_and(|(_, s)| *s != config) {
            addr.history.push((now, config));
        }
    }

    fn propagate_parent(&mut self, i: usize) {
        let (now, ds, deleg) = (self.now, self.registry_ds.clone(), self.registry_deleg);
        let i = i % self.parents.len();
        let p = &mut self.parents[i];
        if p.history
            .last()
            .is_some_and(|(_, d, g)| *d != ds || *g != deleg)
        {
            p.history.push((now, ds, deleg));
        }
    }

    fn registrar_acts(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        match self.pending.remove(0) {
            Instruction::AddDs { add, .. } => {
                if !self.registry_ds.contains(&add) {
                    self.registry_ds.push(add);
                }
            }
            Instruction::RemoveDs { remove, .. } => self.registry_ds.retain(|d| *d != remove),
            Instruction::ChangeNs => self.registry_deleg = Delegation::Target,
        }
    }

    /// A roll at the target behind the daemon's back, only while no resolver can have
    /// been sent to it and no NS change is under way (a roll at a reachable provider
    /// breaks rule 15 by itself, whatever the daemon does).
    fn roll_target(&mut self) {
        let ever_delegated = self.registry_deleg == Delegation::Target
            || self.pending.contains(&Instruction::ChangeNs)
            || self
                .parents
                .iter()
                .any(|p| p.history.iter().any(|(_, _, g)| *g == Delegation::Target));
        if ever_delegated || self.tgt.key.is_none() {
            return;
        }
        self.tgt.key = Some(key(self.next_key));
        self.next_key += 1;
    }

    fn catch_up(&mut self) {
        self.registrar_acts();
        for i in 0..3 {
            self.propagate_parent(i);
        }
        for side in [Side::Source, Side::Target] {
            for i in 0..2 {
                self.propagate_child(side, i);
            }
        }
    }

    fn look(&self) -> MoveLook {
        let api = |v: Option<Dnskey>| {
            if self.api_unknown {
                Err("the API timed out".to_string())
            } else {
                Ok(v)
            }
        };
        let foreign = |p: &Prov| {
            if self.api_unknown {
                Err("the API timed out".to_string())
            } else {
                Ok(p.foreign.clone())
            }
        };
        let children = |p: &Prov, side: &str| {
            p.addrs
                .iter()
                .enumerate()
                .map(|(i, a)| Answer {
                    address: format!("{side}-{i}"),
                    answer: if a.unknown {
                        Err("timeout".into())
                    } else {
                        let served = a.history.last().and_then(|(_, s)| s.clone());
                        Ok(match served {
                            Some((keys, signer)) => ChildSeen {
                                keys,
                                signed_by: vec![signer],
                                ttl: self.ttl.dnskey,
                            },
                            None => ChildSeen {
                                keys: vec![],
                                signed_by: vec![],
                                ttl: self.ttl.dnskey,
                            },
                        })
                    },
                })
                .collect()
        };
        MoveLook {
            at: self.now,
            source_key: api(self.src.key.clone()),
            target_key: api(self.tgt.key.clone()),
            source_foreign: foreign(&self.src),
            target_foreign: foreign(&self.tgt),
            source_children: children(&self.src, "source"),
            target_children: children(&self.tgt, "target"),
            parents: self
                .parents
                .iter()
                .enumerate()
                .map(|(i, p)| Answer {
                    address: format!("parent-{i}"),
                    answer: match (p.unknown, p.history.last()) {
                        (false, Some((_, ds, deleg))) => Ok(ParentSeen {
                            ds: ds.clone(),
                            ds_ttl: (!ds.is_empty()).then_some(self.ttl.ds),
                            delegation: *deleg,
                            ns_ttl: Some(self.ttl.parent_ns),
                            validated: true,
                        }),
                        _ => Err("timeout".into()),
                    },
                })
                .collect(),
            source_apex_ns_ttl: Some(self.ttl.apex_ns),
            cds_published: Ok(Vec::new()),
        }
    }

    /// The end of each history entry: the next entry's start, or `now` (still served).
    fn intervals<T: Clone>(&self, history: &[(Timestamp, T)]) -> Vec<(i64, i64, T)> {
        history
            .iter()
            .enumerate()
            .map(|(i, (from, v))| {
                let to = history.get(i + 1).map_or(self.now.0 + 1, |(t, _)| t.0);
                (from.0, to, v.clone())
            })
            .collect()
    }

    /// When resolvers may be sent to `side`: each stretch a parent address delegated to
    /// it, lengthened by what a resolver may cache of that delegation.
    fn reach(&self, side: Delegation) -> Vec<(i64, i64)> {
        let ttl = match side {
            Delegation::Source => self.ttl.parent_ns.max(self.ttl.apex_ns),
            _ => self.ttl.parent_ns,
        };
        let mut out = vec![];
        for p in &self.parents {
            let h: Vec<_> = p.history.iter().map(|(t, _, g)| (*t, *g)).collect();
            for (from, to, g) in self.intervals(&h) {
                if g == side {
                    out.push((from, to + i64::from(ttl) * 1000));
                }
            }
        }
        out
    }

    /// Rule 15 at `now`, from the caches alone.
    fn violations(&self) -> Vec<String> {
        let now = self.now.0;
        let within = |from: i64, to: i64, ttl: u32| to > now - i64::from(ttl) * 1000 && from <= now;
        let overlaps = |spans: &[(i64, i64)], from: i64, to: i64| {
            spans.iter().any(|(a, b)| *a < to && *b > from)
        };
        let ds_sets: Vec<Vec<Ds>> = self
            .parents
            .iter()
            .flat_map(|p| {
                let h: Vec<_> = p.history.iter().map(|(t, d, _)| (*t, d.clone())).collect();
                self.intervals(&h)
            })
            .filter(|(from, to, _)| within(*from, *to, self.ttl.ds))
            .map(|(_, _, d)| d)
            .collect();
        let mut key_sets: Vec<Vec<Dnskey>> = vec![];
        for (prov, side) in [
            (&self.src, Delegation::Source),
            (&self.tgt, Delegation::Target),
        ] {
            let spans = self.reach(side);
            for a in &prov.addrs {
                for (from, to, served) in self.intervals(&a.history) {
                    let window_from = from.max(now - i64::from(self.ttl.dnskey) * 1000);
                    if within(from, to, self.ttl.dnskey)
                        && overlaps(&spans, window_from, to)
                        && let Some((keys, _)) = served
                    {
                        key_sets.push(keys);
                    }
                }
            }
        }
        let mut out = vec![];
        for (prov, side) in [
            (&self.src, Delegation::Source),
            (&self.tgt, Delegation::Target),
        ] {
            if !overlaps(&self.reach(side), now, now + 1) {
                continue;
            }
            for (i, a) in prov.addrs.iter().enumerate() {
                let current = a.history.last().and_then(|(_, s)| s.clone());
                match current {
                    None => {
                        if ds_sets.iter().any(|d| !d.is_empty()) {
                            out.push(format!("{side:?}-{i} answers unsigned under a cached DS"));
                        }
                    }
                    Some((_, signer)) => {
                        let want = ds(&signer);
                        if let Some(d) = ds_sets.iter().find(|d| !d.contains(&want)) {
                            out.push(format!(
                                "{side:?}-{i} signs with {} but a cached DS set lacks its DS: {d:?}",
                                signer.key_tag()
                            ));
                        }
                        if let Some(k) = key_sets.iter().find(|k| !k.contains(&signer)) {
                            out.push(format!(
                                "{side:?}-{i} signs with {} but a cached DNSKEY set lacks it: {k:?}",
                                signer.key_tag()
                            ));
                        }
                    }
                }
            }
        }
        out
    }

    fn perform(&mut self, mv: &Move, effects: Vec<MoveEffect>, policy: &MovePolicy) {
        for effect in effects {
            match effect {
                MoveEffect::TargetDnssecOn => {
                    if self.tgt.key.is_none() {
                        self.tgt.key = Some(key(self.next_key));
                        self.next_key += 1;
                    }
                }
                MoveEffect::SetForeign { side, keys } => self.prov(side).foreign = keys,
                // The model's accounts publish no CDS (the look says none).
                MoveEffect::CdsOff { .. } => {}
                MoveEffect::Registrar(i) => self.pending.push(i),
                MoveEffect::SourceDnssecOff => {
                    // The guard on a look of its own, right before the call.
                    let mut fresh = self.clone();
                    fresh.api_unknown = false;
                    if source_may_go_off(mv, &fresh.look(), policy).is_ok() {
                        self.src.key = None;
                    }
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Step,
    /// The engine died after deciding, before committing: nothing of it stands.
    CrashBeforeCommit,
    /// The engine died after committing, before performing: the registrar's instruction
    /// stands (the outbox), the calls are lost.
    CrashAfterCommit,
    Advance(u32),
    RegistrarActs,
    PropagateParent(usize),
    PropagateChild(Side, usize),
    UnknownParent(usize),
    UnknownChild(Side, usize),
    ApiUnknown,
    RollTarget,
    /// The registrar acts and every server catches up (reaches the deep phases often).
    CatchUp,
}

fn op() -> impl Strategy<Value = Op> {
    let side = prop_oneof![Just(Side::Source), Just(Side::Target)];
    prop_oneof![
        6 => Just(Op::Step),
        1 => Just(Op::CrashBeforeCommit),
        1 => Just(Op::CrashAfterCommit),
        4 => prop_oneof![Just(60u32), Just(600), Just(3600), Just(21_600), Just(86_400)].prop_map(Op::Advance),
        2 => Just(Op::RegistrarActs),
        3 => (0..3usize).prop_map(Op::PropagateParent),
        3 => (side.clone(), 0..2usize).prop_map(|(s, i)| Op::PropagateChild(s, i)),
        1 => (0..3usize).prop_map(Op::UnknownParent),
        1 => (side, 0..2usize).prop_map(|(s, i)| Op::UnknownChild(s, i)),
        1 => Just(Op::ApiUnknown),
        1 => Just(Op::RollTarget),
        2 => Just(Op::CatchUp),
    ]
}

fn policy() -> MovePolicy {
    MovePolicy {
        propagation_margin: Duration::from_secs(60),
        assumed_ns_ttl: Duration::from_secs(172_800),
        assumed_ds_ttl: Duration::from_secs(86_400),
        // Two polls of 10 minutes, as the engine would use.
        confirmation_gap: Duration::from_secs(1200),
    }
}

fn clear_unknowns(w: &mut World) {
    w.api_unknown = false;
    for p in &mut w.parents {
        p.unknown = false;
    }
    for a in w.src.addrs.iter_mut().chain(w.tgt.addrs.iter_mut()) {
        a.unknown = false;
    }
}

/// One daemon step: look, decide, commit, perform; the unknowns last one look.
fn daemon_step(w: &mut World, mv: &mut Move, commit: bool, perform: bool) -> Vec<String> {
    let decision = step(mv, &w.look(), &policy());
    clear_unknowns(w);
    if !commit {
        return vec![];
    }
    let effects = if perform {
        decision.effects
    } else {
        decision
            .effects
            .into_iter()
            .filter(|e| matches!(e, MoveEffect::Registrar(_)))
            .collect()
    };
    *mv = decision.next;
    w.perform(mv, effects, &policy());
    decision.alerts
}

fn run(ops: &[Op], ttl: ModelTtls, target_signs: bool) -> Result<(), TestCaseError> {
    let mut w = World::new(ttl, target_signs);
    let mut mv = Move::new(ZONE, key(1));
    let mut trail = vec![];
    let check = |w: &World, trail: &[String], what: &str| -> Result<(), TestCaseError> {
        let v = w.violations();
        prop_assert!(
            v.is_empty(),
            "after {what}: {v:?}\ntrail:\n{}",
            trail.join("\n")
        );
        Ok(())
    };
    for op in ops {
        match op {
            Op::Step => {
                daemon_step(&mut w, &mut mv, true, true);
            }
            Op::CrashBeforeCommit => {
                daemon_step(&mut w, &mut mv, false, false);
            }
            Op::CrashAfterCommit => {
                daemon_step(&mut w, &mut mv, true, false);
            }
            Op::Advance(s) => w.now = w.now.plus_secs(*s),
            Op::RegistrarActs => w.registrar_acts(),
            Op::PropagateParent(i) => w.propagate_parent(*i),
            Op::PropagateChild(s, i) => w.propagate_child(*s, *i),
            Op::UnknownParent(i) => w.parents[*i % 3].unknown = true,
            Op::UnknownChild(s, i) => w.prov(*s).addrs[*i % 2].unknown = true,
            Op::ApiUnknown => w.api_unknown = true,
            Op::RollTarget => w.roll_target(),
            Op::CatchUp => w.catch_up(),
        }
        trail.push(format!("{} {op:?} -> {}", w.now, mv.phase.name()));
        check(&w, &trail, &format!("{op:?}"))?;
    }
    // Then a registrar that acts and servers that catch up: every move ends, still safe.
    // Looks ten minutes apart: within the confirmation gap, as the engine's polls are.
    for round in 0..800 {
        if mv.phase == Phase::Done {
            break;
        }
        w.catch_up();
        check(&w, &trail, &format!("settling round {round}"))?;
        daemon_step(&mut w, &mut mv, true, true);
        trail.push(format!("{} settle -> {}", w.now, mv.phase.name()));
        check(&w, &trail, &format!("settling step {round}"))?;
        // (Time passing alone only lets cached sets expire: nothing to check.)
        w.now = w.now.plus_secs(600);
    }
    prop_assert_eq!(
        mv.phase,
        Phase::Done,
        "the move never ended:\n{}",
        trail.join("\n")
    );
    let kt = w.tgt.key.clone().expect("the target signs");
    prop_assert!(w.src.key.is_none(), "the source still signs");
    prop_assert_eq!(&w.registry_ds, &vec![ds(&kt)]);
    prop_assert_eq!(w.registry_deleg, Delegation::Target);
    prop_assert!(w.tgt.foreign.is_empty() && w.src.foreign.is_empty());
    Ok(())
}

fn ttls() -> impl Strategy<Value = ModelTtls> {
    (
        prop_oneof![Just(300u32), Just(3600), Just(86_400)],
        prop_oneof![Just(300u32), Just(3600)],
        prop_oneof![Just(3600u32), Just(172_800)],
        prop_oneof![Just(300u32), Just(86_400)],
    )
        .prop_map(|(ds, dnskey, parent_ns, apex_ns)| ModelTtls {
            ds,
            dnskey,
            parent_ns,
            apex_ns,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, rng_algorithm: RngAlgorithm::XorShift, ..ProptestConfig::default() })]

    /// DESIGN.md rule 15 over random interleavings.
    #[test]
    fn a_signed_move_keeps_every_resolver_validating(
        ops in prop::collection::vec(op(), 0..80),
        ttl in ttls(),
        target_signs in any::<bool>(),
    ) {
        run(&ops, ttl, target_signs)?;
    }
}

/// The oracle can fail: a planner that asks for the NS change as soon as both DS are
/// seen (no DS hold) is caught.
#[test]
fn the_oracle_catches_an_early_ns_change() {
    let ttl = ModelTtls {
        ds: 86_400,
        dnskey: 300,
        parent_ns: 3600,
        apex_ns: 300,
    };
    let mut w = World::new(ttl, true);
    let ks = key(1);
    let kt = key(2);
    w.src.foreign = vec![kt.clone()];
    w.tgt.foreign = vec![ks.clone()];
    for side in [Side::Source, Side::Target] {
        for i in 0..2 {
            w.propagate_child(side, i);
        }
    }
    w.now = w.now.plus_secs(3600);
    w.registry_ds.push(ds(&kt));
    for i in 0..3 {
        w.propagate_parent(i);
    }
    assert!(w.violations().is_empty());
    // The NS changed at once: a resolver holding the old DS set is sent to the target.
    w.registry_deleg = Delegation::Target;
    w.propagate_parent(0);
    let v = w.violations();
    assert!(v.iter().any(|m| m.contains("cached DS set lacks")), "{v:?}");
}

/// A roll at the target after the NS change is alerted and holds the move.
#[test]
fn a_key_changed_after_the_ns_change_holds_the_move() {
    let mut mv = Move::new(ZONE, key(1));
    mv.phase = Phase::OldDelegationWait;
    mv.target_key = Some(key(2));
    mv.delegated_at = Some(T0);
    let mut w = World::new(
        ModelTtls {
            ds: 300,
            dnskey: 300,
            parent_ns: 300,
            apex_ns: 300,
        },
        true,
    );
    w.tgt.key = Some(key(9));
    let d = step(&mv, &w.look(), &policy());
    assert_eq!(d.next.phase, Phase::OldDelegationWait);
    assert!(
        d.alerts
            .iter()
            .any(|a| a.contains("the target now signs with key")),
        "{:?}",
        d.alerts
    );
    assert!(
        d.effects
            .iter()
            .all(|e| !matches!(e, MoveEffect::Registrar(_) | MoveEffect::SourceDnssecOff))
    );
}

/// Rule 9's old NS TTL: an apex NS TTL the source never answered is assumed, as the
/// parent's is.
#[test]
fn an_apex_ns_ttl_never_answered_is_assumed() {
    let p = policy();
    let mut mv = Move::new(ZONE, key(1));
    mv.phase = Phase::OldDelegationWait;
    mv.ttls.parent_ns = 300;
    let assumed = p.assumed_ns_ttl + p.propagation_margin;
    assert_eq!(super::signed_move::phase_hold(&mv, &p), assumed);
    mv.ttls.apex_ns = 600;
    assert_eq!(
        super::signed_move::phase_hold(&mv, &p),
        Duration::from_secs(600) + p.propagation_margin
    );
}

/// The guard in front of the source's "DNSSEC off" stands on its own (a bug in `step`
/// cannot switch it off early): refused before the old delegation's hold has passed,
/// while a parent server still publishes DS(`Ks`) or delegates to the source.
#[test]
fn the_source_goes_off_only_unreachable_and_without_its_ds() {
    let ttl = ModelTtls {
        ds: 300,
        dnskey: 300,
        parent_ns: 3600,
        apex_ns: 300,
    };
    let mut w = World::new(ttl, true);
    let mut mv = Move::new(ZONE, key(1));
    mv.phase = Phase::OldSigningOff;
    mv.target_key = Some(key(2));
    mv.delegated_at = Some(T0);
    mv.ttls.parent_ns = 3600;
    mv.ttls.apex_ns = 300;
    w.registry_deleg = Delegation::Target;
    w.registry_ds = vec![ds(&key(2))];
    w.propagate_parent(0);
    w.propagate_parent(1);
    let p = policy();
    w.now = T0.plus_secs(3600);
    let why = source_may_go_off(&mv, &w.look(), &p).unwrap_err();
    assert!(why.contains("old delegation may be cached"), "{why}");
    w.now = T0.plus_secs(3600 + 61);
    let why = source_may_go_off(&mv, &w.look(), &p).unwrap_err();
    assert!(why.contains("parent-2"), "{why}");
    w.propagate_parent(2);
    assert_eq!(source_may_go_off(&mv, &w.look(), &p), Ok(()));
    w.parents[1].unknown = true;
    assert!(source_may_go_off(&mv, &w.look(), &p).is_err());
}

/// A move is stored with the zone's facts as JSON: every field comes back, the phase by
/// its contract name.
#[test]
fn a_move_is_stored_and_read_back() {
    let mut mv = Move::new(ZONE, key(1)).between("pdns-a", "pdns-b");
    mv.phase = Phase::AwaitingOldDsRemoval;
    mv.target_key = Some(key(2));
    mv.ds_asked_for = Some(key(2));
    mv.delegated_at = Some(T0);
    mv.confirmed_at = Some(T0.plus_secs(5));
    mv.ttls.parent_ns = 172_800;
    let json = serde_json::to_string(&mv).unwrap();
    assert!(
        json.contains("\"phase\":\"awaiting_old_ds_removal\""),
        "{json}"
    );
    assert!(json.contains("\"source\":\"pdns-a\""), "{json}");
    assert_eq!(serde_json::from_str::<Move>(&json).unwrap(), mv);
    for phase in <Phase as strum::VariantArray>::VARIANTS.iter().copied() {
        let json = serde_json::to_string(&phase).unwrap();
        assert_eq!(json, format!("\"{}\"", phase.name()));
    }
}

// Sequences found by an adversarial review of the planner (each failed before its fix).

fn ttl() -> ModelTtls {
    ModelTtls {
        ds: 300,
        dnskey: 300,
        parent_ns: 3600,
        apex_ns: 300,
    }
}

/// (Found by review; each sentence below says what the planner did before its fix.) only the model's own ops. The target rolls while no resolver can reach it (the
/// model allows it), the next look cannot read the target account (ApiUnknown), its
/// servers still serve the old key: the planner asks for the NS change on that look.
#[test]
fn ns_change_asked_on_a_look_that_could_not_read_the_target_key() {
    use Op::*;
    let ops = vec![
        Step, // SigningAtTarget -> ExchangingKeys, SetForeign both sides
        PropagateChild(Side::Source, 0),
        PropagateChild(Side::Source, 1),
        PropagateChild(Side::Target, 0),
        PropagateChild(Side::Target, 1),
        Step, // T_keys
        Advance(600),
        Step, // -> AwaitingBothDs, AddDs
        RegistrarActs,
        PropagateParent(0),
        PropagateParent(1),
        PropagateParent(2),
        Step, // T_both
        Advance(600),
        RollTarget, // allowed by the model: the target is unreachable, no ChangeNs pending
        ApiUnknown,
        Step, // the roll unseen (API unknown), the servers still serve Kt: ChangeNs
        RegistrarActs,
        PropagateParent(0),
        PropagateParent(1),
        PropagateParent(2),
        PropagateChild(Side::Target, 0), // the target's servers catch up with the roll
    ];
    run(&ops, ttl(), true).unwrap();
}

/// Steps the model's daemon until `until` holds (at most `n` looks, `secs` apart),
/// with the registrar acting and every server catching up before each look.
fn drive(w: &mut World, mv: &mut Move, n: usize, secs: u32, until: impl Fn(&Move) -> bool) {
    for _ in 0..n {
        if until(mv) {
            return;
        }
        w.catch_up();
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        daemon_step(w, mv, true, true);
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        w.now = w.now.plus_secs(secs);
    }
    assert!(until(mv), "stuck in {}", mv.phase.name());
}

/// (Found by review; each sentence below says what the planner did before its fix.) the delegation goes back to the source after the old-delegation hold (a registrar
/// undo, a registry restoring an old NS set). In awaiting_old_ds_removal the planner
/// neither alerts nor withdraws RemoveDs(Ks): the registrar removes it, resolvers sent
/// to the source (it still signs with Ks alone) fail.
#[test]
fn delegation_back_to_source_after_the_hold_is_not_noticed() {
    let mut w = World::new(ttl(), true);
    let mut mv = Move::new(ZONE, key(1));
    drive(&mut w, &mut mv, 40, 600, |m| {
        m.phase == Phase::AwaitingDelegation
    });
    drive(&mut w, &mut mv, 40, 600, |m| {
        m.phase == Phase::AwaitingOldDsRemoval
    });
    // RemoveDs is pending; the NS change is undone at the registry and reaches parent 0.
    assert!(matches!(
        w.pending.first(),
        Some(Instruction::RemoveDs { .. })
    ));
    w.registry_deleg = Delegation::Source;
    w.propagate_parent(0);
    w.registry_deleg = Delegation::Target; // only parent 0 lags on the old data: an anycast node
    assert!(w.violations().is_empty());
    let d = step(&mv, &w.look(), &policy());
    println!(
        "alerts: {:?}\nwaiting: {}\neffects: {:?}",
        d.alerts, d.waiting, d.effects
    );
    assert!(!d.alerts.is_empty(), "no alert: {}", d.waiting);
    assert!(
        d.waiting
            .contains("delegate to the target's name servers again"),
        "{}",
        d.waiting
    );
}

/// Steps with everything catching up; returns the first violation seen, if any.
fn run_until_violation(
    w: &mut World,
    mv: &mut Move,
    n: usize,
    secs: u32,
    mut world_hook: impl FnMut(&mut World, &Move),
    mut look_hook: impl FnMut(&mut MoveLook),
) -> Option<(String, Vec<String>)> {
    for _ in 0..n {
        w.catch_up();
        world_hook(w, mv);
        for i in 0..3 {
            w.propagate_parent(i);
        }
        let v = w.violations();
        if !v.is_empty() {
            return Some((mv.phase.name().to_string(), v));
        }
        let mut look = w.look();
        look_hook(&mut look);
        let d = step(mv, &look, &policy());
        *mv = d.next;
        w.perform(mv, d.effects, &policy());
        let v = w.violations();
        if !v.is_empty() {
            return Some((mv.phase.name().to_string(), v));
        }
        if mv.phase == Phase::Done {
            return None;
        }
        w.now = w.now.plus_secs(secs);
    }
    None
}

/// (Found by review; each sentence below says what the planner did before its fix.) the operator lowered the DNSKEY TTL (86400 -> 300) just before `move` (the
/// usual preparation): caches hold the source's {Ks} set for a day, the move learns
/// 300 only (Move::new starts its TTLs at 0, nothing carries the zone's facts).
#[test]
fn a_dnskey_ttl_lowered_before_the_move() {
    let mut ttl = ttl();
    ttl.dnskey = 86_400; // what a {Ks} set cached just before T0 lives for
    let mut w = World::new(ttl, true);
    // The engine seeds the move with the zone's largest DNSKEY TTL seen (its facts).
    let mut mv = Move::new(ZONE, key(1)).seeded(super::signed_move::Ttls {
        dnskey: 86_400,
        ..Default::default()
    });
    // The servers answer TTL 300 from T0 on. (The oracle's single TTL overstates the
    // life of the sets served after T0, but those hold both keys and do not matter.)
    let hit = run_until_violation(
        &mut w,
        &mut mv,
        200,
        600,
        |_, _| {},
        |look| {
            for a in look
                .source_children
                .iter_mut()
                .chain(look.target_children.iter_mut())
            {
                if let Ok(s) = &mut a.answer {
                    s.ttl = 300;
                }
            }
        },
    );
    assert!(hit.is_none(), "{hit:?}");
}

/// (Found by review; each sentence below says what the planner did before its fix.) the parent's NS TTL for the source's delegation never answered (ns_ttl None),
/// the source's apex NS TTL 300: the old-delegation hold is 300 s + margin, not the
/// assumed 2 days, although the parent's TTL may be 2 days.
#[test]
fn the_assumed_ns_ttl_is_lost_when_only_the_apex_ttl_is_known() {
    let mut ttl = ttl();
    ttl.parent_ns = 172_800; // the truth the daemon never reads
    let mut w = World::new(ttl, true);
    let mut mv = Move::new(ZONE, key(1));
    let hit = run_until_violation(
        &mut w,
        &mut mv,
        200,
        600,
        |_, _| {},
        |look| {
            for p in &mut look.parents {
                if let Ok(v) = &mut p.answer {
                    v.ns_ttl = None;
                }
            }
        },
    );
    assert!(hit.is_none(), "{hit:?}");
}

/// (Found by review; each sentence below says what the planner did before its fix.) the source re-keys after it became unreachable (retiring_old_key): harmless to
/// resolvers, but the move holds forever and alerts "resolvers still sent to the source
/// may fail" at every look.
#[test]
fn a_source_roll_after_it_is_unreachable_stalls_the_move() {
    let mut w = World::new(ttl(), true);
    let mut mv = Move::new(ZONE, key(1));
    drive(&mut w, &mut mv, 60, 600, |m| {
        m.phase == Phase::RetiringOldKey
    });
    w.src.key = Some(key(88));
    let mut alerts = 0;
    for _ in 0..120 {
        for side in [Side::Source, Side::Target] {
            for i in 0..2 {
                w.propagate_child(side, i);
            }
        }
        let d = step(&mv, &w.look(), &policy());
        alerts += d.alerts.len();
        mv = d.next;
        w.perform(&mv, d.effects, &policy());
        w.now = w.now.plus_secs(600);
    }
    assert!(w.violations().is_empty());
    assert_eq!(alerts, 0, "a roll at an unreachable source alerted");
    assert_eq!(
        mv.phase,
        Phase::Done,
        "stuck in {} after {alerts} alerts",
        mv.phase.name()
    );
}

/// (Found by review; each sentence below says what the planner did before its fix.) the daemon is down (or every look fails) for a while in awaiting_both_ds; meanwhile
/// the DS set at a parent lost DS(Kt) and got it back (a registry replacing the DS set,
/// e.g. from the source's CDS, then the operator entering it again). The first look after
/// the gap sees both DS, the hold since T_both has passed: ChangeNs at once, although a
/// {Ks} set is cached for another DS TTL. Rule 2 restarts T_gone after a gap of two polls;
/// confirm() has no such rule.
#[test]
fn a_gap_in_looks_hides_a_ds_flap() {
    let mut ttl = ttl();
    ttl.ds = 3600;
    let mut w = World::new(ttl, true);
    let mut mv = Move::new(ZONE, key(1));
    drive(&mut w, &mut mv, 60, 300, |m| {
        m.phase == Phase::AwaitingBothDs
    });
    drive(&mut w, &mut mv, 3, 300, |m| m.confirmed_at.is_some());
    // Daemon down from here. 50 minutes in, parent 0 loses DS(Kt) for 10 minutes.
    let both = w.registry_ds.clone();
    w.now = w.now.plus_secs(3000);
    w.registry_ds = vec![ds(&key(1))];
    w.propagate_parent(0);
    w.now = w.now.plus_secs(600);
    w.registry_ds = both;
    w.propagate_parent(0);
    w.now = w.now.plus_secs(600);
    // The daemon is back: one look, the registrar acts at once.
    let d = step(&mv, &w.look(), &policy());
    mv = d.next;
    w.perform(&mv, d.effects, &policy());
    w.registrar_acts();
    w.propagate_parent(1);
    assert!(
        mv.phase < Phase::AwaitingDelegation || w.violations().is_empty(),
        "{:?}",
        w.violations()
    );
}

/// (Found by review; each sentence below says what the planner did before its fix.) awaiting_both_ds, both holds passed. The source's foreign Kt is deleted outside the
/// daemon (a zone-sync tool such as octoDNS/dnscontrol removing a DNSKEY it does not know,
/// a re-import); source-0 serves {Ks} and does not answer the next look. The look reads
/// source_foreign = [] from the API, yet the planner asks for the NS change in the same
/// look as it re-publishes Kt: an unknown child answer and an API saying "Kt is not
/// published" both count as "fine".
#[test]
fn ns_change_asked_while_the_api_says_the_source_lacks_kt() {
    let mut w = World::new(ttl(), true);
    let mut mv = Move::new(ZONE, key(1));
    drive(&mut w, &mut mv, 60, 600, |m| {
        m.phase == Phase::AwaitingBothDs
    });
    drive(&mut w, &mut mv, 3, 600, |m| m.confirmed_at.is_some());
    w.now = w.now.plus_secs(3600);
    w.src.foreign.clear();
    w.propagate_child(Side::Source, 0);
    w.src.addrs[0].unknown = true;
    let look = w.look();
    assert_eq!(look.source_foreign, Ok(vec![]));
    let d = step(&mv, &look, &policy());
    println!("effects: {:?}", d.effects);
    mv = d.next;
    w.perform(&mv, d.effects, &policy());
    clear_unknowns(&mut w);
    w.registrar_acts();
    w.propagate_parent(0);
    assert!(
        w.violations().is_empty(),
        "{} : {:?}",
        mv.phase.name(),
        w.violations()
    );
}

/// (Found by review; each sentence below says what the planner did before its fix.) the source re-keys (Ks -> Ks2) before the NS change. The planner says "the keys are
/// exchanged again" and later asks AddDs { add: DS(Kt), keep: DS(Ks2) }: DS(Ks2) is at no
/// parent (the parent has DS(Ks)); "keep" tells the registrar it is there. Nothing asks for
/// DS(Ks2) to be added nor DS(Ks) removed; the zone is bogus now (the source is the
/// reachable provider) and the alert does not say so.
#[test]
fn a_source_roll_before_the_ns_change_gives_a_false_keep() {
    let mut w = World::new(ttl(), true);
    let mut mv = Move::new(ZONE, key(1));
    drive(&mut w, &mut mv, 60, 600, |m| {
        m.phase == Phase::ExchangingKeys && m.confirmed_at.is_some()
    });
    w.src.key = Some(key(66));
    let mut instructions = vec![];
    let mut alerts = vec![];
    for _ in 0..30 {
        w.catch_up();
        let d = step(&mv, &w.look(), &policy());
        alerts.extend(d.alerts.clone());
        for e in &d.effects {
            if let MoveEffect::Registrar(i) = e {
                instructions.push(i.clone());
            }
        }
        mv = d.next;
        w.perform(&mv, d.effects, &policy());
        w.now = w.now.plus_secs(3600);
    }
    println!(
        "alerts: {alerts:?}\ninstructions: {instructions:?}\nphase: {}",
        mv.phase.name()
    );
    let keep_ok = instructions.iter().all(|i| match i {
        Instruction::AddDs { keep, .. } => w.registry_ds.contains(keep),
        _ => true,
    });
    assert!(
        keep_ok,
        "an AddDs says keep a DS the parent does not have; stuck in {}",
        mv.phase.name()
    );
}

/// (Found by review; each sentence below says what the planner did before its fix.) old_delegation_wait, its hold passed; parent-0 does not answer this look. The
/// planner asks for RemoveDs(Ks) anyway: only a *known* parent delegating elsewhere
/// holds it (`every(..) == Some(false)`), so rule 3 (every address agreeing) is not met
/// by the decision that makes the source fail for whoever is still sent to it.
#[test]
fn remove_ds_asked_on_a_look_missing_a_parent() {
    let mut w = World::new(ttl(), true);
    let mut mv = Move::new(ZONE, key(1));
    drive(&mut w, &mut mv, 60, 600, |m| {
        m.phase == Phase::OldDelegationWait
    });
    w.now = w.now.plus_secs(10 * 3600);
    w.parents[0].unknown = true;
    let d = step(&mv, &w.look(), &policy());
    let asked = d
        .effects
        .iter()
        .any(|e| matches!(e, MoveEffect::Registrar(Instruction::RemoveDs { .. })));
    assert!(
        !asked,
        "RemoveDs on a look where parent-0 was unknown; waiting: {}",
        d.waiting
    );
}
