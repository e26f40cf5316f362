//! The key rollover's machine against rule 16 itself: a model world (a provider's keys,
//! its name servers each serving the keys' configuration after a lag of its own, a
//! registrar and three parent addresses each publishing the DS set after a lag of its
//! own) keeps the history of what every address served, and after every operation every
//! combination of a DS set, a DNSKEY set and the data's signatures a resolver may hold
//! within their TTLs is checked to validate as validators check it. The phases are not
//! consulted: the oracle is the caches. Then each method's happy path with the waits'
//! instants, the unknowns that hold, and the aborts.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::RngAlgorithm;

use super::hold::Party;
use super::rollover::{
    Answer, ChildRollSeen, DsRequest, DsVia, KeyKind, ListedKey, Method, ParentRollSeen, Phase,
    Roll, RollDecision, RollEffect, RollPolicy, RollSeen, decide, may_abort,
};
use crate::dnssec::{CdsPublication, DigestType, Dnskey, Ds, usable_ds};
use crate::time::Timestamp;

const ZONE: &str = "rolling.test.";
const T0: Timestamp = Timestamp(1_800_000_000_000);
const MARGIN: u32 = 60;
/// The parent address that lags the others (propagated by its own operation only).
const LAGGING: usize = 2;

fn policy() -> RollPolicy {
    RollPolicy {
        propagation_margin: Duration::from_secs(u64::from(MARGIN)),
        assumed_ds_ttl: Duration::from_secs(86_400),
        // Two polls of 10 minutes, as the engine would use.
        confirmation_gap: Duration::from_secs(1200),
        mutant_early_removal: false,
    }
}

fn ds(k: &Dnskey) -> Ds {
    k.to_ds(ZONE, DigestType::Sha256)
        .expect("a DS of a test key")
}

#[derive(Debug, Clone)]
struct PKey {
    id: String,
    dnskey: Dnskey,
    active: bool,
    published: bool,
}

/// What a child address serves: the DNSKEY set, the keys whose RRSIG is over it, the
/// keys whose RRSIG is over the zone's data, the keys its CDS names (signed as the
/// DNSKEY set is, as PowerDNS signs it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Served {
    keys: Vec<Dnskey>,
    dnskey_signers: Vec<Dnskey>,
    data_signers: Vec<Dnskey>,
    cds: Vec<Dnskey>,
}

/// (since, what) in time order.
type History<T> = Vec<(Timestamp, T)>;
/// A DNSKEY set and the keys whose RRSIG is over it.
type KeySet = (Vec<Dnskey>, Vec<Dnskey>);

#[derive(Debug, Clone)]
struct Addr<T> {
    /// (since, what), in time order; the last is what it serves now.
    history: Vec<(Timestamp, T)>,
    unknown: bool,
}

#[derive(Debug, Clone, Copy)]
struct Ttls {
    ds: u32,
    dnskey: u32,
    zone: u32,
}

/// The start: a KSK and a ZSK, or a CSK, of an algorithm.
#[derive(Debug, Clone, Copy)]
enum Layout {
    Split(u8),
    Csk(u8),
}

#[derive(Debug, Clone)]
struct World {
    now: Timestamp,
    ttl: Ttls,
    keys: Vec<PKey>,
    next_key: u16,
    children: Vec<Addr<Served>>,
    registry: Vec<Ds>,
    parents: Vec<Addr<Vec<Ds>>>,
    /// Requests given to the registrar, acted on in order.
    pending: Vec<DsRequest>,
    api_unknown: bool,
    zone_ttl_unknown: bool,
    /// The parent address whose copy of the DS set lags the others.
    unvalidated: Option<usize>,
    /// How the parent takes the DS: the registrar acts on requests, or a registry scans
    /// the child's CDS (at `RegistrarActs`, on a NOTIFY, and when all catch up).
    via: DsVia,
    /// The provider's CDS setting: `Key` publishes the CDS of its published SEP keys.
    cds: CdsPublication,
    /// Registrar requests decided for a zone whose DS goes by the CDS (none may be).
    registrar_calls: Vec<String>,
    /// The roll's own way (`Roll::via`): where it sets the CDS the daemon reads the
    /// setting; where it goes by the CDS no registrar request may be made. An algorithm
    /// roll goes by the registrar while the parent's registry scans.
    roll_via: DsVia,
    /// The NOTIFY(CDS) signals sent, in order.
    notified: Vec<String>,
}

fn make_key(n: u16, sep: bool, algorithm: u8) -> Dnskey {
    // In the high bytes of the checksum's words only, so that no two test keys share a
    // tag (a KSK's flags differ from a ZSK's in a low byte).
    let [hi, lo] = n.to_be_bytes();
    let mut public_key = vec![0u8; 64];
    public_key[0] = lo;
    public_key[2] = hi;
    public_key[4] = algorithm;
    Dnskey {
        flags: if sep { 257 } else { 256 },
        protocol: 3,
        algorithm,
        public_key,
    }
}

impl World {
    fn new(layout: Layout, ttl: Ttls) -> World {
        let long_ago = Timestamp(T0.0 - 30 * 86_400_000);
        let mut w = World {
            now: T0,
            ttl,
            keys: vec![],
            next_key: 1,
            children: vec![],
            registry: vec![],
            parents: vec![],
            pending: vec![],
            api_unknown: false,
            zone_ttl_unknown: false,
            unvalidated: None,
            via: DsVia::Registrar,
            cds: CdsPublication::Nothing,
            registrar_calls: vec![],
            roll_via: DsVia::Registrar,
            notified: vec![],
        };
        match layout {
            Layout::Split(a) => {
                w.add_key(true, a, true, true);
                w.add_key(false, a, true, true);
            }
            Layout::Csk(a) => {
                w.add_key(true, a, true, true);
            }
        }
        w.registry = vec![ds(&w.keys[0].dnskey)];
        let served = w.config();
        w.children = (0..2)
            .map(|_| Addr {
                history: vec![(long_ago, served.clone())],
                unknown: false,
            })
            .collect();
        w.parents = (0..3)
            .map(|_| Addr {
                history: vec![(long_ago, w.registry.clone())],
                unknown: false,
            })
            .collect();
        w
    }

    fn add_key(&mut self, sep: bool, algorithm: u8, active: bool, published: bool) -> String {
        let id = format!("id{}", self.next_key);
        let dnskey = make_key(self.next_key, sep, algorithm);
        self.next_key += 1;
        self.keys.push(PKey {
            id: id.clone(),
            dnskey,
            active,
            published,
        });
        id
    }

    /// What the provider's configuration serves: the published keys; per algorithm, its
    /// active SEP keys sign the DNSKEY set and its active other keys the data, one kind
    /// doing both where the other is missing (as PowerDNS signs).
    fn config(&self) -> Served {
        let mut served = Served {
            keys: self
                .keys
                .iter()
                .filter(|k| k.published)
                .map(|k| k.dnskey.clone())
                .collect(),
            dnskey_signers: vec![],
            data_signers: vec![],
            cds: if self.cds == CdsPublication::Key {
                self.keys
                    .iter()
                    .filter(|k| k.published && k.dnskey.is_sep())
                    .map(|k| k.dnskey.clone())
                    .collect()
            } else {
                vec![]
            },
        };
        let mut algorithms: Vec<u8> = self.keys.iter().map(|k| k.dnskey.algorithm).collect();
        algorithms.sort_unstable();
        algorithms.dedup();
        for a in algorithms {
            let active = |sep: bool| -> Vec<Dnskey> {
                self.keys
                    .iter()
                    .filter(|k| k.active && k.dnskey.algorithm == a && k.dnskey.is_sep() == sep)
                    .map(|k| k.dnskey.clone())
                    .collect()
            };
            let (seps, zsks) = (active(true), active(false));
            let (dnskey, data) = match (seps.is_empty(), zsks.is_empty()) {
                (false, false) => (seps, zsks),
                (false, true) => (seps.clone(), seps),
                (true, false) => (zsks.clone(), zsks),
                (true, true) => (vec![], vec![]),
            };
            served.dnskey_signers.extend(dnskey);
            served.data_signers.extend(data);
        }
        served
    }

    fn propagate_child(&mut self, i: usize) {
        let (now, config) = (self.now, self.config());
        let a = &mut self.children[i % 2];
        if a.history.last().is_some_and(|(_, s)| *s != config) {
            a.history.push((now, config));
        }
    }

    fn propagate_parent(&mut self, i: usize) {
        let (now, ds) = (self.now, self.registry.clone());
        let p = &mut self.parents[i % 3];
        if p.history.last().is_some_and(|(_, d)| *d != ds) {
            p.history.push((now, ds));
        }
    }

    fn registrar_acts(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        match self.pending.remove(0) {
            DsRequest::AddDs { add, .. } => {
                if !self.registry.contains(&add) {
                    self.registry.push(add);
                }
            }
            DsRequest::RemoveDs { remove, .. } => self.registry.retain(|d| *d != remove),
        }
    }

    /// The registry's scan of the child's CDS (RFC 7344, RFC 9975), as the lab's: every
    /// child address serves the same CDS set, not empty; it differs from the DS set; a
    /// key that signs it (the DNSKEY set) at every address is one the current DS names.
    /// Then the DS set becomes the CDS set's DS.
    fn registry_scans(&mut self) {
        let now: Vec<&Served> = self
            .children
            .iter()
            .filter_map(|a| a.history.last().map(|(_, s)| s))
            .collect();
        let Some(first) = now.first() else { return };
        if first.cds.is_empty() || now.iter().any(|s| s.cds != first.cds) {
            return;
        }
        let wanted: Vec<Ds> = first.cds.iter().map(ds).collect();
        if wanted.len() == self.registry.len() && wanted.iter().all(|d| self.registry.contains(d)) {
            return;
        }
        let trusted = first.dnskey_signers.iter().any(|k| {
            now.iter().all(|s| s.dnskey_signers.contains(k))
                && self.registry.iter().any(|d| k.matches_ds(ZONE, d))
        });
        if trusted {
            self.registry = wanted;
        }
    }

    /// The parent's way acts: the registrar on its requests, or the registry's scan.
    fn parent_acts(&mut self) {
        if self.via.by_cds() {
            self.registry_scans();
        } else {
            self.registrar_acts();
        }
    }

    fn catch_up(&mut self) {
        self.catch_up_but(usize::MAX);
    }

    /// The registrar acts and every server catches up, but parent address `lagging`.
    fn catch_up_but(&mut self, lagging: usize) {
        while !self.pending.is_empty() {
            self.registrar_acts();
        }
        if self.via.by_cds() {
            for i in 0..2 {
                self.propagate_child(i);
            }
            self.registry_scans();
        }
        for i in (0..3).filter(|i| *i != lagging) {
            self.propagate_parent(i);
        }
        for i in 0..2 {
            self.propagate_child(i);
        }
    }

    fn seen(&self) -> RollSeen {
        RollSeen {
            keys: if self.api_unknown {
                Err("the API timed out".into())
            } else {
                Ok(self
                    .keys
                    .iter()
                    .map(|k| ListedKey {
                        id: k.id.clone(),
                        dnskey: k.dnskey.clone(),
                        active: k.active,
                        published: k.published,
                    })
                    .collect())
            },
            add_key_unsettled: false,
            children: self
                .children
                .iter()
                .enumerate()
                .map(|(i, a)| Answer {
                    address: format!("child-{i}"),
                    answer: match (a.unknown, a.history.last()) {
                        (false, Some((_, s))) => Ok(ChildRollSeen {
                            dnskey: s.keys.clone(),
                            dnskey_ttl: self.ttl.dnskey,
                            dnskey_signed_by: s
                                .dnskey_signers
                                .iter()
                                .map(Dnskey::key_tag)
                                .collect(),
                            data_signed_by: s.data_signers.iter().map(Dnskey::key_tag).collect(),
                            cds: Some(s.cds.iter().map(Dnskey::key_tag).collect()),
                        }),
                        _ => Err("timeout".into()),
                    },
                })
                .collect(),
            parents: self
                .parents
                .iter()
                .enumerate()
                .map(|(i, p)| Answer {
                    address: format!("parent-{i}"),
                    answer: match (p.unknown, p.history.last()) {
                        (false, Some((_, d))) => Ok(ParentRollSeen {
                            ds: d.clone(),
                            ds_ttl: Some(self.ttl.ds),
                            validated: self.unvalidated != Some(i),
                        }),
                        _ => Err("timeout".into()),
                    },
                })
                .collect(),
            zone_max_ttl: if self.zone_ttl_unknown {
                Err("the RRset listing failed".into())
            } else {
                Ok(self.ttl.zone)
            },
            cds: (self.roll_via.sets_cds() && !self.api_unknown).then_some(self.cds),
        }
    }

    fn perform(&mut self, effects: &[RollEffect]) {
        for effect in effects {
            match effect {
                RollEffect::AddKey {
                    kind,
                    algorithm,
                    active,
                    published,
                } => {
                    self.add_key(kind.sep(), *algorithm, *active, *published);
                }
                RollEffect::SetKey {
                    id,
                    active,
                    published,
                } => {
                    if let Some(k) = self.keys.iter_mut().find(|k| k.id == *id) {
                        k.active = *active;
                        k.published = *published;
                    }
                }
                RollEffect::DeleteKey { id } => self.keys.retain(|k| k.id != *id),
                RollEffect::Registrar(r) => {
                    if self.roll_via.by_cds() {
                        self.registrar_calls.push(format!("{r:?}"));
                    }
                    self.pending.push(r.clone());
                }
                RollEffect::SetCds(to) => self.cds = *to,
                // The registry scans at once on a NOTIFY.
                RollEffect::NotifyCds { signal } => {
                    self.notified.push(signal.clone());
                    self.registry_scans();
                }
            }
        }
    }

    /// The end of each history entry: the next entry's start, or past `now`.
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

    /// What a resolver may hold at `now`: every value some address served at an instant
    /// within its TTL before now.
    fn cached<T: Clone + PartialEq>(&self, histories: &[&[(Timestamp, T)]], ttl: u32) -> Vec<T> {
        let now = self.now.0;
        let mut out: Vec<T> = vec![];
        for h in histories {
            for (from, to, v) in self.intervals(h) {
                if to > now - i64::from(ttl) * 1000 && from <= now && !out.contains(&v) {
                    out.push(v);
                }
            }
        }
        out
    }

    /// Rule 16 at `now`, from the caches alone: every DS set, DNSKEY set (with its
    /// signatures) and data signature set a resolver may hold together validates.
    fn violations(&self) -> Vec<String> {
        let parents: Vec<&[(Timestamp, Vec<Ds>)]> =
            self.parents.iter().map(|p| p.history.as_slice()).collect();
        let children: Vec<History<KeySet>> = self
            .children
            .iter()
            .map(|a| {
                a.history
                    .iter()
                    .map(|(t, s)| (*t, (s.keys.clone(), s.dnskey_signers.clone())))
                    .collect()
            })
            .collect();
        let data: Vec<History<Vec<Dnskey>>> = self
            .children
            .iter()
            .map(|a| {
                a.history
                    .iter()
                    .map(|(t, s)| (*t, s.data_signers.clone()))
                    .collect()
            })
            .collect();
        let ds_sets = self.cached(&parents, self.ttl.ds);
        let key_sets = self.cached(
            &children.iter().map(Vec::as_slice).collect::<Vec<_>>(),
            self.ttl.dnskey,
        );
        let sig_sets = self.cached(
            &data.iter().map(Vec::as_slice).collect::<Vec<_>>(),
            self.ttl.zone,
        );
        let mut out = self.cds_violations();
        for d in &ds_sets {
            for (keys, signers) in &key_sets {
                for sigs in &sig_sets {
                    if let Err(why) = validates(d, keys, signers, sigs) {
                        out.push(format!(
                            "DS {:?} + DNSKEY {:?} signed by {:?} + data signed by {:?}: {why}",
                            d.iter().map(|d| d.key_tag).collect::<Vec<_>>(),
                            tags(keys),
                            tags(signers),
                            tags(sigs)
                        ));
                    }
                }
            }
        }
        out
    }
}

impl World {
    /// Rule 14 in a roll by the CDS, at this instant: no child address's CDS names a key
    /// some child address does not serve (a registry acting on it breaks validation,
    /// `cds_unexpected`'s `Unserved`); a CDS set every address agrees on and that would
    /// change the DS is signed by a key the current DS names (else the registry refuses
    /// it, and the roll waits for ever); no registrar request for such a zone.
    fn cds_violations(&self) -> Vec<String> {
        let mut out = self.registrar_calls.clone();
        let now: Vec<&Served> = self
            .children
            .iter()
            .filter_map(|a| a.history.last().map(|(_, s)| s))
            .collect();
        for (i, s) in now.iter().enumerate() {
            for k in &s.cds {
                if let Some(j) = now.iter().position(|o| !o.keys.contains(k)) {
                    out.push(format!(
                        "child-{i} publishes CDS for key {} which child-{j} does not serve",
                        k.key_tag()
                    ));
                }
            }
        }
        if !self.via.by_cds() {
            return out;
        }
        if let Some(first) = now.first()
            && !first.cds.is_empty()
            && now.iter().all(|s| s.cds == first.cds)
        {
            let wanted: Vec<Ds> = first.cds.iter().map(ds).collect();
            let changes = wanted.len() != self.registry.len()
                || !wanted.iter().all(|d| self.registry.contains(d));
            let trusted = first.dnskey_signers.iter().any(|k| {
                now.iter().all(|s| s.dnskey_signers.contains(k))
                    && self.registry.iter().any(|d| k.matches_ds(ZONE, d))
            });
            if changes && !trusted {
                out.push(format!(
                    "the CDS {:?} would change DS {:?} but is signed by {:?}, which the DS does not name: the registry refuses it",
                    tags(&first.cds),
                    self.registry.iter().map(|d| d.key_tag).collect::<Vec<_>>(),
                    tags(&first.dnskey_signers)
                ));
            }
        }
        out
    }
}

fn tags(keys: &[Dnskey]) -> Vec<u16> {
    keys.iter().map(Dnskey::key_tag).collect()
}

/// As validators check a chain (RFC 4035 5, RFC 6840 5.11, RFC 4035 2.2 held strictly):
/// some usable DS matches a key of the DNSKEY set that signs it; every algorithm of the
/// DS set and every algorithm of the DNSKEY set signs the DNSKEY set and the data with a
/// key of the set.
fn validates(
    ds: &[Ds],
    keys: &[Dnskey],
    signers: &[Dnskey],
    sigs: &[Dnskey],
) -> Result<(), String> {
    let usable = usable_ds(ds);
    if usable.is_empty() {
        return Err("no usable DS (insecure)".into());
    }
    let signing: Vec<&Dnskey> = keys.iter().filter(|k| signers.contains(k)).collect();
    if !usable
        .iter()
        .any(|d| signing.iter().any(|k| k.matches_ds(ZONE, d)))
    {
        return Err("no DS matches a key that signs the DNSKEY set".into());
    }
    let mut algorithms: Vec<u8> = usable.iter().map(|d| d.algorithm).collect();
    algorithms.extend(keys.iter().map(|k| k.algorithm));
    for a in algorithms {
        if !signing.iter().any(|k| k.algorithm == a) {
            return Err(format!("algorithm {a} does not sign the DNSKEY set"));
        }
        if !sigs.iter().any(|k| k.algorithm == a && keys.contains(k)) {
            return Err(format!(
                "algorithm {a} does not sign the data with a key of the set"
            ));
        }
    }
    Ok(())
}

#[derive(Debug, Clone)]
enum Op {
    Step,
    /// The operator asks for the roll to be aborted, taken at the next step.
    Abort,
    /// The engine died after deciding, before committing: nothing of it stands.
    CrashBeforeCommit,
    /// The engine died after committing, before performing: the registrar's request
    /// stands (the outbox), the provider calls are lost (answered 5xx before applying).
    CrashAfterCommit,
    Advance(u32),
    RegistrarActs,
    PropagateParent(usize),
    PropagateChild(usize),
    UnknownParent(usize),
    UnknownChild(usize),
    UnvalidatedParent(usize),
    ApiUnknown,
    ZoneTtlUnknown,
    /// The registrar acts and every server catches up but the lagging parent address.
    CatchUp,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => Just(Op::Step),
        1 => Just(Op::Abort),
        1 => Just(Op::CrashBeforeCommit),
        1 => Just(Op::CrashAfterCommit),
        5 => prop_oneof![Just(60u32), Just(600), Just(3600), Just(21_600), Just(86_400)].prop_map(Op::Advance),
        2 => Just(Op::RegistrarActs),
        // The lagging parent address is propagated to a third as often as the others.
        3 => prop_oneof![3 => Just(0usize), 3 => Just(1), 1 => Just(LAGGING)].prop_map(Op::PropagateParent),
        3 => (0..2usize).prop_map(Op::PropagateChild),
        1 => (0..3usize).prop_map(Op::UnknownParent),
        1 => (0..2usize).prop_map(Op::UnknownChild),
        1 => (0..3usize).prop_map(Op::UnvalidatedParent),
        1 => Just(Op::ApiUnknown),
        1 => Just(Op::ZoneTtlUnknown),
        2 => Just(Op::CatchUp),
    ]
}

fn clear_unknowns(w: &mut World) {
    w.api_unknown = false;
    w.zone_ttl_unknown = false;
    w.unvalidated = None;
    for p in &mut w.parents {
        p.unknown = false;
    }
    for c in &mut w.children {
        c.unknown = false;
    }
}

/// One daemon step: look, decide, commit, perform; the unknowns last one look.
fn daemon_step(
    w: &mut World,
    roll: &mut Roll,
    abort: bool,
    commit: bool,
    perform: bool,
) -> RollDecision {
    let decision = decide(ZONE, roll, &w.seen(), w.now, &policy(), abort);
    clear_unknowns(w);
    if commit {
        *roll = decision.next.clone();
        let effects: Vec<RollEffect> = decision
            .effects
            .iter()
            .filter(|e| {
                perform || matches!(e, RollEffect::Registrar(_) | RollEffect::NotifyCds { .. })
            })
            .cloned()
            .collect();
        w.perform(&effects);
    }
    decision
}

#[derive(Debug, Clone, Copy)]
enum Case {
    Zsk,
    Ksk,
    Csk,
    AlgorithmSplit,
    AlgorithmCsk,
}

impl Case {
    fn start(self) -> (Layout, KeyKind, Option<u8>) {
        match self {
            Case::Zsk => (Layout::Split(13), KeyKind::Zsk, None),
            Case::Ksk => (Layout::Split(13), KeyKind::Ksk, None),
            Case::Csk => (Layout::Csk(13), KeyKind::Csk, None),
            Case::AlgorithmSplit => (Layout::Split(8), KeyKind::Ksk, Some(13)),
            Case::AlgorithmCsk => (Layout::Csk(8), KeyKind::Csk, Some(15)),
        }
    }
}

fn planned(w: &World, kind: KeyKind, algorithm: Option<u8>) -> Roll {
    let keys = match w.seen().keys {
        Ok(keys) => keys,
        Err(e) => panic!("{e}"),
    };
    Roll::plan(&keys, kind, algorithm, w.now).expect("a roll can be planned")
}

fn run(ops: &[Op], case: Case, ttl: Ttls, via: DsVia) -> Result<(), TestCaseError> {
    let (layout, kind, algorithm) = case.start();
    let mut w = World::new(layout, ttl);
    let original: Vec<Dnskey> = w.keys.iter().map(|k| k.dnskey.clone()).collect();
    let mut roll = planned(&w, kind, algorithm);
    by_parent_way(&mut w, &mut roll, via);
    let mut trail = vec![];
    let mut abort = false;
    let check = |w: &World, trail: &[String], what: &str| -> Result<(), TestCaseError> {
        let v = w.violations();
        prop_assert!(
            v.is_empty(),
            "after {what}: {}\ntrail:\n{}",
            v.join("\n"),
            trail.join("\n")
        );
        Ok(())
    };
    for op in ops {
        match op {
            Op::Step => {
                let d = daemon_step(&mut w, &mut roll, abort, true, true);
                abort = false;
                trail.extend(d.notes);
            }
            Op::Abort => abort = true,
            Op::CrashBeforeCommit => {
                daemon_step(&mut w, &mut roll, abort, false, false);
            }
            Op::CrashAfterCommit => {
                let d = daemon_step(&mut w, &mut roll, abort, true, false);
                abort = false;
                trail.extend(d.notes);
            }
            Op::Advance(s) => w.now = w.now.plus_secs(*s),
            Op::RegistrarActs => w.parent_acts(),
            Op::PropagateParent(i) => w.propagate_parent(*i),
            Op::PropagateChild(i) => w.propagate_child(*i),
            Op::UnknownParent(i) => w.parents[*i % 3].unknown = true,
            Op::UnknownChild(i) => w.children[*i % 2].unknown = true,
            Op::UnvalidatedParent(i) => w.unvalidated = Some(*i % 3),
            Op::ApiUnknown => w.api_unknown = true,
            Op::ZoneTtlUnknown => w.zone_ttl_unknown = true,
            Op::CatchUp => {
                w.catch_up_but(LAGGING);
            }
        }
        trail.push(format!("{} {op:?} -> {}", w.now, roll.phase.name()));
        check(&w, &trail, &format!("{op:?}"))?;
    }
    // Then a registrar that acts and servers that catch up, looks ten minutes apart:
    // every roll ends, still safe.
    for round in 0..3000 {
        if roll.phase == Phase::Done {
            break;
        }
        w.catch_up();
        check(&w, &trail, &format!("settling round {round}"))?;
        let d = daemon_step(&mut w, &mut roll, false, true, true);
        trail.extend(d.notes);
        trail.push(format!("{} settle -> {}", w.now, roll.phase.name()));
        check(&w, &trail, &format!("settling step {round}"))?;
        w.now = w.now.plus_secs(600);
    }
    prop_assert_eq!(
        roll.phase,
        Phase::Done,
        "the roll never ended:\n{}",
        trail.join("\n")
    );
    w.catch_up();
    let now: Vec<Dnskey> = w.keys.iter().map(|k| k.dnskey.clone()).collect();
    prop_assert!(
        w.keys.iter().all(|k| k.active && k.published),
        "{:?}",
        w.keys
    );
    prop_assert_eq!(now.len(), original.len(), "{:?}", w.keys);
    if roll.aborted {
        prop_assert_eq!(&now, &original);
    } else {
        prop_assert!(
            now.iter().all(|k| !original.contains(k)
                || roll.others.iter().any(|o| o.dnskey.as_ref() == Some(k)))
        );
    }
    let sep: Vec<&Dnskey> = now.iter().filter(|k| k.is_sep()).collect();
    prop_assert_eq!(w.registry.clone(), vec![ds(sep[0])]);
    Ok(())
}

fn ttls() -> impl Strategy<Value = Ttls> {
    (
        prop_oneof![Just(300u32), Just(3600), Just(86_400)],
        prop_oneof![Just(300u32), Just(3600)],
        prop_oneof![Just(300u32), Just(3600), Just(86_400)],
    )
        .prop_map(|(ds, dnskey, zone)| Ttls { ds, dnskey, zone })
}

/// The parent's way: the registrar, or a registry that scans the CDS (told by NOTIFY or
/// not).
fn via() -> impl Strategy<Value = DsVia> {
    prop_oneof![
        Just(DsVia::Registrar),
        Just(DsVia::CdsScan),
        Just(DsVia::CdsNotify),
    ]
}

/// A parent whose registry scans the CDS, and the CDS of the zone published (rule 14's
/// steady state, `active`), whatever the roll, which takes the way
/// `rolling::with_parent_way` fixes: a double-DS roll goes by the CDS, an algorithm roll
/// by the registrar with the CDS withdrawn, a ZSK roll as if no registry scanned (its
/// CDS names the KSK it keeps) while the registry goes on scanning.
fn by_parent_way(w: &mut World, roll: &mut Roll, via: DsVia) {
    if !via.by_cds() {
        return;
    }
    match roll.method {
        Method::DoubleDs => roll.via = via,
        Method::Algorithm => roll.via = DsVia::RegistrarCdsWithdrawn,
        Method::ZskPrePublish => {}
    }
    w.roll_via = roll.via;
    w.via = via;
    w.cds = CdsPublication::Key;
    let served = w.config();
    for a in &mut w.children {
        for (_, s) in &mut a.history {
            *s = served.clone();
        }
    }
}

fn case() -> impl Strategy<Value = Case> {
    prop_oneof![
        Just(Case::Zsk),
        Just(Case::Ksk),
        Just(Case::Csk),
        Just(Case::AlgorithmSplit),
        Just(Case::AlgorithmCsk),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, rng_algorithm: RngAlgorithm::XorShift, ..ProptestConfig::default() })]

    /// DESIGN.md rule 16 over random interleavings, aborts included.
    #[test]
    fn a_roll_keeps_every_resolver_validating(
        ops in prop::collection::vec(op(), 0..120),
        case in case(),
        ttl in ttls(),
        via in via(),
    ) {
        run(&ops, case, ttl, via)?;
    }
}

// The happy paths, phase by phase, with each wait's instant against its formula.

const TTLS: Ttls = Ttls {
    ds: 7200,
    dnskey: 3600,
    zone: 86_400,
};

struct Drive {
    w: World,
    roll: Roll,
}

impl Drive {
    fn new(case: Case) -> Drive {
        let (layout, kind, algorithm) = case.start();
        let w = World::new(layout, TTLS);
        let roll = planned(&w, kind, algorithm);
        Drive { w, roll }
    }

    fn step(&mut self) -> RollDecision {
        daemon_step(&mut self.w, &mut self.roll, false, true, true)
    }

    /// Steps (every server catching up first) until the roll leaves `phase` or a TTL
    /// holds it; a minute between looks. Returns the holding decision, if one.
    fn until_held_or_past(&mut self, phase: Phase) -> Option<RollDecision> {
        let mut last = String::new();
        for _ in 0..20 {
            self.w.catch_up();
            let d = self.step();
            last = format!(
                "{} {:?} {:?} {:?} {:?}",
                d.wait.what,
                d.effects,
                d.alerts,
                self.w.seen().children,
                self.roll
            );
            if self.roll.phase != phase {
                return None;
            }
            if d.wait.on == Party::Ttl {
                return Some(d);
            }
            self.w.now = self.w.now.plus_secs(60);
        }
        panic!("stuck in {}: {last}", phase.name());
    }

    /// The phase holds on a TTL until exactly `confirmed + ttl + margin`: a look a
    /// millisecond before stays, the look at it moves on.
    fn held_for(&mut self, phase: Phase, ttl: u32) {
        let d = self
            .until_held_or_past(phase)
            .unwrap_or_else(|| panic!("{} held on no TTL", phase.name()));
        let confirmed = self.roll.confirmed_at.expect("confirmed");
        let until = confirmed.plus_secs(ttl + MARGIN);
        assert_eq!(
            d.wait.until,
            Some(until),
            "{}: {}",
            phase.name(),
            d.wait.what
        );
        self.w.now = Timestamp(until.0 - 1);
        // Looks within the confirmation gap keep the hold.
        self.roll.last_confirmed = Some(Timestamp(until.0 - 1000));
        self.step();
        assert_eq!(self.roll.phase, phase, "left {} early", phase.name());
        self.w.now = until;
        self.step();
        assert_ne!(
            self.roll.phase,
            phase,
            "{} did not end at its hold",
            phase.name()
        );
    }

    fn finish(&mut self, phase: Phase) {
        assert!(
            self.until_held_or_past(phase).is_none(),
            "{} held on a TTL",
            phase.name()
        );
    }
}

#[test]
fn a_zsk_rolls_by_pre_publication() {
    let mut d = Drive::new(Case::Zsk);
    assert_eq!(d.roll.method, Method::ZskPrePublish);
    let first = d.step();
    assert!(
        matches!(
            first.effects.as_slice(),
            [RollEffect::AddKey {
                kind: KeyKind::Zsk,
                algorithm: 13,
                active: false,
                published: true
            }]
        ),
        "{:?}",
        first.effects
    );
    // Ipub = Dprp + TTLkey.
    d.held_for(Phase::Publishing, TTLS.dnskey);
    assert_eq!(d.roll.phase, Phase::Swapping);
    // Iret = Dsgn + Dprp + TTLsig (the zone's largest TTL).
    d.held_for(Phase::Swapping, TTLS.zone);
    assert_eq!(d.roll.phase, Phase::RemovingOldKey);
    d.finish(Phase::RemovingOldKey);
    assert_eq!(d.roll.phase, Phase::Done);
    assert_eq!(d.w.keys.len(), 2);
    assert!(d.w.violations().is_empty());
}

#[test]
fn a_ksk_rolls_by_double_ds_through_the_registrar() {
    let mut d = Drive::new(Case::Ksk);
    assert_eq!(d.roll.method, Method::DoubleDs);
    d.step();
    d.held_for(Phase::Publishing, TTLS.dnskey);
    assert_eq!(d.roll.phase, Phase::AwaitingNewDs);
    let old = d.roll.old[0].dnskey.clone().expect("old key");
    let new = d.roll.new[0].dnskey.clone().expect("new key");
    // The DS request went with the phase's entry: add the new, keep the old.
    assert_eq!(
        d.w.pending,
        vec![DsRequest::AddDs {
            add: ds(&new),
            keep: ds(&old)
        }]
    );
    // IpubP = DprpP + TTLds.
    d.held_for(Phase::AwaitingNewDs, TTLS.ds);
    assert_eq!(d.roll.phase, Phase::Swapping);
    // A KSK signs only the DNSKEY set: Iret = DprpC + TTLkey.
    d.held_for(Phase::Swapping, TTLS.dnskey);
    assert_eq!(d.roll.phase, Phase::RemovingOldDs);
    assert_eq!(
        d.w.pending,
        vec![DsRequest::RemoveDs {
            remove: ds(&old),
            keep: ds(&new)
        }]
    );
    d.held_for(Phase::RemovingOldDs, TTLS.ds);
    assert_eq!(d.roll.phase, Phase::RemovingOldKey);
    d.finish(Phase::RemovingOldKey);
    assert_eq!(d.roll.phase, Phase::Done);
    assert_eq!(d.w.registry, vec![ds(&new)]);
    assert!(d.w.violations().is_empty());
}
/// RFC 7344 appendix B where the registry scans the CDS: the CDS withdrawn before the new
/// key is added, naming both keys from `awaiting_new_ds`, the new alone from
/// `removing_old_ds` (the old key unpublished), NOTIFY(CDS) once per signal; no
/// registrar request; the waits those of the registrar's roll.
#[test]
fn a_csk_rolls_by_the_cds_where_the_registry_scans() {
    let mut d = Drive::new(Case::Csk);
    by_parent_way(&mut d.w, &mut d.roll, DsVia::CdsNotify);
    let old = d.roll.old[0].dnskey.clone().expect("old key");
    let first = d.step();
    assert_eq!(
        first.effects,
        vec![RollEffect::SetCds(CdsPublication::Nothing)],
        "{}",
        first.wait.what
    );
    let second = d.step();
    assert!(
        matches!(
            second.effects.as_slice(),
            [RollEffect::AddKey {
                kind: KeyKind::Csk,
                active: false,
                published: true,
                ..
            }]
        ),
        "{:?}",
        second.effects
    );
    d.held_for(Phase::Publishing, TTLS.dnskey);
    assert_eq!(d.roll.phase, Phase::AwaitingNewDs);
    let new = d.roll.new[0].dnskey.clone().expect("new key");
    assert_eq!(d.w.cds, CdsPublication::Key);
    assert!(d.w.pending.is_empty());
    // Before the registry acted, the roll waits on it, not on a registrar.
    let waiting = d.step();
    assert_eq!(d.roll.phase, Phase::AwaitingNewDs);
    assert_eq!(waiting.wait.on, Party::Registry, "{}", waiting.wait.what);
    d.held_for(Phase::AwaitingNewDs, TTLS.ds);
    assert_eq!(d.w.registry.len(), 2);
    d.held_for(Phase::Swapping, TTLS.zone.max(TTLS.dnskey));
    assert_eq!(d.roll.phase, Phase::RemovingOldDs);
    d.held_for(Phase::RemovingOldDs, TTLS.ds);
    d.finish(Phase::RemovingOldKey);
    assert_eq!(d.roll.phase, Phase::Done);
    assert_eq!(d.w.registry, vec![ds(&new)]);
    let signal = |keys: &[&Dnskey]| {
        let mut t: Vec<u16> = keys.iter().map(|k| k.key_tag()).collect();
        t.sort_unstable();
        format!(
            "key {}",
            t.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        )
    };
    assert_eq!(d.w.notified, vec![signal(&[&old, &new]), signal(&[&new])]);
    assert!(d.w.registrar_calls.is_empty() && d.w.pending.is_empty());
    assert!(d.w.violations().is_empty(), "{:?}", d.w.violations());
}

#[test]
fn a_csk_swap_waits_for_the_data_signatures_too() {
    let mut d = Drive::new(Case::Csk);
    d.step();
    d.held_for(Phase::Publishing, TTLS.dnskey);
    d.held_for(Phase::AwaitingNewDs, TTLS.ds);
    // A CSK signs both: Iret = Dprp + max(TTLkey, TTLsig).
    d.held_for(Phase::Swapping, TTLS.zone.max(TTLS.dnskey));
    d.held_for(Phase::RemovingOldDs, TTLS.ds);
    d.finish(Phase::RemovingOldKey);
    assert_eq!(d.roll.phase, Phase::Done);
}

#[test]
fn an_algorithm_rolls_in_the_conservative_order() {
    let mut d = Drive::new(Case::AlgorithmSplit);
    assert_eq!(d.roll.method, Method::Algorithm);
    let first = d.step();
    // Both new keys, signing, unpublished.
    assert_eq!(
        first
            .effects
            .iter()
            .filter(|e| matches!(
                e,
                RollEffect::AddKey {
                    algorithm: 13,
                    active: true,
                    published: false,
                    ..
                }
            ))
            .count(),
        2,
        "{:?}",
        first.effects
    );
    // RFC 6781 4.1.4: signatures first, the zone's largest TTL waited.
    d.held_for(Phase::SigningUnpublished, TTLS.zone);
    // The DNSKEYs published, the DNSKEY TTL waited.
    d.held_for(Phase::PublishingNewAlgorithm, TTLS.dnskey);
    assert_eq!(d.roll.phase, Phase::AwaitingNewDs);
    // The new DS everywhere: no hold (nothing leaves before the old DS is waited out).
    d.finish(Phase::AwaitingNewDs);
    assert_eq!(d.roll.phase, Phase::RemovingOldDs);
    d.held_for(Phase::RemovingOldDs, TTLS.ds);
    d.held_for(Phase::UnpublishingOldAlgorithm, TTLS.dnskey);
    d.finish(Phase::RemovingOldSignatures);
    assert_eq!(d.roll.phase, Phase::Done);
    assert!(d.w.keys.iter().all(|k| k.dnskey.algorithm == 13));
    assert!(d.w.violations().is_empty());
}

/// Brings a roll to `phase` with everything caught up.
fn at_phase(case: Case, phase: Phase) -> Drive {
    let mut d = Drive::new(case);
    for _ in 0..400 {
        // The first phase once the new keys are at the provider.
        if d.roll.phase == phase && d.roll.new.iter().all(|k| k.id.is_some()) {
            return d;
        }
        d.w.catch_up();
        d.step();
        d.w.now = d.w.now.plus_secs(600);
    }
    panic!("never reached {}", phase.name());
}

/// A look that cannot confirm the phase's condition holds it and restarts its hold;
/// `spoil` makes one such look.
fn holds_on(case: Case, phase: Phase, spoil: impl Fn(&mut World), names: &str) {
    let mut d = at_phase(case, phase);
    d.w.catch_up();
    for _ in 0..3 {
        spoil(&mut d.w);
        let before = d.roll.confirmed_at;
        let decision = d.step();
        assert_eq!(
            d.roll.phase,
            phase,
            "{}: {}",
            phase.name(),
            decision.wait.what
        );
        assert!(
            decision.wait.what.contains(names),
            "{}: {:?} does not name {names}",
            phase.name(),
            decision.wait.what
        );
        assert!(d.roll.confirmed_at.is_none() || d.roll.confirmed_at == before);
        d.w.now = d.w.now.plus_secs(86_400 * 3);
    }
}

#[test]
fn a_silent_child_address_holds_every_phase_that_reads_the_children() {
    for (case, phase) in [
        (Case::Zsk, Phase::Publishing),
        (Case::Zsk, Phase::Swapping),
        (Case::Ksk, Phase::Swapping),
        (Case::Zsk, Phase::RemovingOldKey),
        (Case::AlgorithmSplit, Phase::SigningUnpublished),
        (Case::AlgorithmSplit, Phase::PublishingNewAlgorithm),
        (Case::AlgorithmCsk, Phase::UnpublishingOldAlgorithm),
    ] {
        holds_on(
            case,
            phase,
            |w| w.children[1].unknown = true,
            "child-1 (unknown",
        );
    }
}

#[test]
fn a_silent_or_unvalidated_parent_address_holds_the_ds_phases() {
    for (case, phase) in [
        (Case::Ksk, Phase::AwaitingNewDs),
        (Case::Csk, Phase::RemovingOldDs),
        (Case::AlgorithmSplit, Phase::AwaitingNewDs),
    ] {
        holds_on(
            case,
            phase,
            |w| w.parents[2].unknown = true,
            "parent-2 (unknown",
        );
        holds_on(case, phase, |w| w.unvalidated = Some(0), "parent-0");
    }
}

#[test]
fn a_lagging_address_holds() {
    // A parent address that has not published the new DS yet.
    let mut d = at_phase(Case::Ksk, Phase::AwaitingNewDs);
    d.w.registrar_acts();
    d.w.propagate_parent(0);
    d.w.propagate_parent(1);
    for _ in 0..3 {
        let decision = d.step();
        assert_eq!(d.roll.phase, Phase::AwaitingNewDs);
        assert!(
            decision.wait.what.contains("parent-2"),
            "{}",
            decision.wait.what
        );
        assert_eq!(decision.wait.on, Party::Registrar);
        d.w.now = d.w.now.plus_secs(86_400);
    }
    // A child address that still serves the old signatures.
    let mut d = at_phase(Case::Zsk, Phase::Swapping);
    // The new key signs, then the old stops: child-1 serves neither change.
    d.step();
    d.step();
    d.w.propagate_child(0);
    for _ in 0..3 {
        let decision = d.step();
        assert_eq!(d.roll.phase, Phase::Swapping);
        assert!(
            decision.wait.what.contains("child-1"),
            "{}",
            decision.wait.what
        );
        d.w.now = d.w.now.plus_secs(86_400 * 3);
    }
}

#[test]
fn an_unknown_zone_ttl_or_key_listing_holds() {
    holds_on(
        Case::Zsk,
        Phase::Swapping,
        |w| w.zone_ttl_unknown = true,
        "largest TTL",
    );
    holds_on(
        Case::AlgorithmSplit,
        Phase::SigningUnpublished,
        |w| w.zone_ttl_unknown = true,
        "largest TTL",
    );
    let mut d = at_phase(Case::Zsk, Phase::Swapping);
    for _ in 0..10 {
        d.w.catch_up();
        d.w.api_unknown = true;
        let decision = d.step();
        assert_eq!(d.roll.phase, Phase::Swapping, "{}", decision.wait.what);
        assert!(decision.effects.is_empty(), "{:?}", decision.effects);
        d.w.now = d.w.now.plus_secs(86_400);
    }
}

#[test]
fn an_abort_goes_back_where_it_can_and_says_why_not_where_it_cannot() {
    let back = [
        (Case::Zsk, Phase::Publishing, Some(Phase::RemovingOldKey)),
        (Case::Zsk, Phase::Swapping, Some(Phase::Swapping)),
        (Case::Zsk, Phase::RemovingOldKey, None),
        (Case::Ksk, Phase::AwaitingNewDs, Some(Phase::RemovingOldDs)),
        (Case::Csk, Phase::Swapping, Some(Phase::Swapping)),
        (Case::Csk, Phase::RemovingOldDs, None),
        (
            Case::AlgorithmSplit,
            Phase::SigningUnpublished,
            Some(Phase::RemovingOldSignatures),
        ),
        (
            Case::AlgorithmSplit,
            Phase::PublishingNewAlgorithm,
            Some(Phase::UnpublishingOldAlgorithm),
        ),
        (
            Case::AlgorithmCsk,
            Phase::AwaitingNewDs,
            Some(Phase::RemovingOldDs),
        ),
        (Case::AlgorithmCsk, Phase::UnpublishingOldAlgorithm, None),
    ];
    for (case, phase, to) in back {
        let mut d = at_phase(case, phase);
        let mut original: Vec<Dnskey> = d
            .roll
            .old
            .iter()
            .chain(&d.roll.others)
            .filter_map(|k| k.dnskey.clone())
            .collect();
        original.sort_by_key(Dnskey::key_tag);
        assert_eq!(may_abort(&d.roll).ok(), to, "{case:?} {}", phase.name());
        let decision = daemon_step(&mut d.w, &mut d.roll, true, true, true);
        match to {
            None => {
                assert!(!d.roll.aborted);
                assert!(
                    decision.notes.iter().any(|n| n.contains("abort refused")),
                    "{:?}",
                    decision.notes
                );
            }
            Some(_) => {
                assert!(d.roll.aborted);
                for _ in 0..600 {
                    if d.roll.phase == Phase::Done {
                        break;
                    }
                    d.w.catch_up();
                    d.step();
                    assert!(d.w.violations().is_empty(), "{:?}", d.w.violations());
                    d.w.now = d.w.now.plus_secs(600);
                }
                assert_eq!(d.roll.phase, Phase::Done, "{case:?} {}", phase.name());
                let mut now: Vec<Dnskey> = d.w.keys.iter().map(|k| k.dnskey.clone()).collect();
                now.sort_by_key(Dnskey::key_tag);
                assert_eq!(now, original, "{case:?} {}", phase.name());
                let sep: Vec<&Dnskey> = now.iter().filter(|k| k.is_sep()).collect();
                assert_eq!(d.w.registry, vec![ds(sep[0])]);
            }
        }
    }
}

#[test]
fn a_roll_is_refused_where_the_zone_has_not_the_keys_it_names() {
    let w = World::new(Layout::Csk(13), TTLS);
    let keys = w.seen().keys.expect("keys");
    assert!(Roll::plan(&keys, KeyKind::Zsk, None, T0).is_err());
    assert!(Roll::plan(&keys, KeyKind::Ksk, None, T0).is_err());
    assert!(Roll::plan(&keys, KeyKind::Csk, Some(3), T0).is_err());
    let w = World::new(Layout::Split(13), TTLS);
    let keys = w.seen().keys.expect("keys");
    assert!(Roll::plan(&keys, KeyKind::Csk, None, T0).is_err());
    assert_eq!(
        Roll::plan(&keys, KeyKind::Ksk, Some(13), T0).map(|r| r.method),
        Ok(Method::DoubleDs)
    );
}

#[test]
fn the_roll_is_stored_as_json() {
    let d = at_phase(Case::AlgorithmSplit, Phase::PublishingNewAlgorithm);
    let text = serde_json::to_string(&d.roll).expect("serialises");
    let back: Roll = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, d.roll);
    assert!(text.contains("\"publishing_new_algorithm\""), "{text}");
    // A roll by the CDS keeps its way and the signal it told the parent of; a roll by
    // the registrar is stored as before.
    assert!(!text.contains("\"via\""), "{text}");
    let mut roll = d.roll.clone();
    roll.via = DsVia::CdsNotify;
    roll.cds_notified = Some("key 1 2".into());
    let text = serde_json::to_string(&roll).expect("serialises");
    assert!(text.contains("\"via\":\"cds_notify\""), "{text}");
    let back: Roll = serde_json::from_str(&text).expect("reads back");
    assert_eq!(back, roll);
}

/// The parent's way is read from the zone's path while a double-DS roll is in
/// `publishing` (no DS change asked yet), and kept after; an algorithm roll goes by the
/// registrar.
#[test]
fn the_parent_way_is_fixed_before_the_first_ds_change() {
    use super::parent_way::{DsyncHint, ParentWays, resolve};
    use super::rolling::with_parent_way;
    use std::net::IpAddr;
    let scan = resolve("ch.", &ParentWays::default(), &DsyncHint::None);
    let notify = resolve(
        "ch.",
        &ParentWays::default(),
        &DsyncHint::Notify {
            owner: "_dsync.ch.".into(),
            target: "scanner.ch.".into(),
            port: 53,
            addrs: vec![IpAddr::from([127, 0, 0, 9])],
        },
    );
    let registrar = resolve("test.", &ParentWays::default(), &DsyncHint::None);
    let d = Drive::new(Case::Csk);
    assert_eq!(with_parent_way(&d.roll, Some(&scan)).via, DsVia::CdsScan);
    assert_eq!(
        with_parent_way(&d.roll, Some(&notify)).via,
        DsVia::CdsNotify
    );
    assert_eq!(
        with_parent_way(&d.roll, Some(&registrar)).via,
        DsVia::Registrar
    );
    assert_eq!(with_parent_way(&d.roll, None).via, DsVia::Registrar);
    let mut later = with_parent_way(&d.roll, Some(&scan));
    later.phase = Phase::AwaitingNewDs;
    assert_eq!(
        with_parent_way(&later, Some(&registrar)).via,
        DsVia::CdsScan
    );
    let algorithm = Drive::new(Case::AlgorithmCsk);
    assert_eq!(
        with_parent_way(&algorithm.roll, Some(&scan)).via,
        DsVia::RegistrarCdsWithdrawn
    );
    assert_eq!(
        with_parent_way(&algorithm.roll, Some(&notify)).via,
        DsVia::RegistrarCdsWithdrawn
    );
    assert_eq!(
        with_parent_way(&algorithm.roll, Some(&registrar)).via,
        DsVia::Registrar
    );
}

/// An algorithm roll where a registry scans the CDS goes by the registrar with the CDS
/// withdrawn: no key is added before the withdrawal is read, the CDS names nothing while
/// the new algorithm's keys are published (the registry would publish their DS before
/// the DNSKEY TTL is waited) nor while the old DS goes (it would publish it again), and
/// the registry changes nothing.
#[test]
fn an_algorithm_roll_withdraws_the_cds_a_registry_scans() {
    let mut d = Drive::new(Case::AlgorithmSplit);
    by_parent_way(&mut d.w, &mut d.roll, DsVia::CdsScan);
    assert_eq!(d.w.cds, CdsPublication::Key);
    let first = d.step();
    assert_eq!(
        first.effects,
        vec![RollEffect::SetCds(CdsPublication::Nothing)],
        "{}",
        first.wait.what
    );
    let second = d.step();
    assert!(
        second
            .effects
            .iter()
            .all(|e| matches!(e, RollEffect::AddKey { .. })),
        "{:?}",
        second.effects
    );
    // Looks ten minutes apart (within the confirmation gap), as the property settles.
    for _ in 0..3000 {
        if d.roll.phase == Phase::Done {
            break;
        }
        d.w.catch_up();
        d.w.registry_scans();
        let v = d.w.violations();
        assert!(v.is_empty(), "in {}: {v:?}", d.roll.phase.name());
        assert_eq!(d.w.cds, CdsPublication::Nothing, "{}", d.roll.phase.name());
        d.step();
        d.w.now = d.w.now.plus_secs(600);
    }
    assert_eq!(d.roll.phase, Phase::Done);
    let sep: Vec<&Dnskey> =
        d.w.keys
            .iter()
            .filter(|k| k.dnskey.is_sep())
            .map(|k| &k.dnskey)
            .collect();
    assert_eq!(d.w.registry, vec![ds(sep[0])]);
    assert_eq!(sep[0].algorithm, 13);
}
