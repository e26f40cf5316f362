//! A roll the provider makes on its own, through `step` (rule 17): a model world whose
//! provider rolls its KSK at random moments (pre-publishing, double-signing, swapping,
//! retiring, going back, or swapping at once), its two name servers each applying the
//! provider's keys after a lag of their own, and a registrar and three parent addresses
//! each publishing the DS set after a lag of their own (one lagging the others). After
//! every operation, where every action of the provider was one a careful provider could
//! take at that moment (it stops the old key signing only once every DS set a resolver
//! may hold names the new key), every DS set and DNSKEY set a resolver may hold within
//! their TTLs must validate together; and at every look that shows a name server serving
//! the new key without the old while a parent address publishes no DS for it, the
//! critical `provider_key_swapped` alert must fire, naming the DS to add. Then each part
//! on its own, with the waits' instants.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::RngAlgorithm;

use super::alerts::AlertKind;
use super::facts::Facts;
use super::model::{CdsSetting, Decision, Effect, Observation, ProviderView, RollRequest, Zone};
use super::policy::Policy;
use super::state::{Intent, State};
use super::step;
use crate::dns::{
    ChildKeys, ChildView, DnskeyAnswer, DsAnswer, Evidence, NsAnswer, ParentView, ServerAnswer,
    SignatureWindow, UnknownReason, ValidationVerdict,
};
use crate::dnssec::{DigestType, Dnskey, DnssecKey, Ds, DsLine, usable_ds};
use crate::time::Timestamp;
use crate::zone_name::ZoneName;

const ZONE: &str = "own.test.";
const NS: &str = "ns1.own.test.";
const T0: Timestamp = Timestamp(1_800_000_000_000);
const MARGIN: u32 = 60;
/// The parent address that lags the others.
const LAGGING: usize = 2;

fn policy() -> Policy {
    Policy {
        poll_waiting: Duration::from_secs(600),
        propagation_margin: Duration::from_secs(u64::from(MARGIN)),
        ..Policy::default()
    }
}

fn make_key(n: u16) -> Dnskey {
    let [hi, lo] = n.to_be_bytes();
    let mut public_key = vec![0u8; 64];
    public_key[0] = lo;
    public_key[2] = hi;
    public_key[4] = 13;
    Dnskey {
        flags: 257,
        protocol: 3,
        algorithm: 13,
        public_key,
    }
}

fn ds(k: &Dnskey) -> Ds {
    k.to_ds(ZONE, DigestType::Sha256)
        .expect("a DS of a test key")
}

fn line(k: &Dnskey) -> String {
    DsLine {
        owner: ZONE.into(),
        ttl: 3600,
        ds: ds(k),
    }
    .to_string()
}

#[derive(Debug, Clone, PartialEq)]
struct PKey {
    dnskey: Dnskey,
    signs: bool,
}

/// What a child address serves: the DNSKEY set and the keys that sign it.
#[derive(Debug, Clone, PartialEq)]
struct Served {
    keys: Vec<Dnskey>,
    signers: Vec<Dnskey>,
}

#[derive(Debug, Clone)]
struct Addr<T> {
    history: Vec<(Timestamp, T)>,
    unknown: bool,
}

impl<T> Addr<T> {
    fn now(&self) -> &T {
        &self.history.last().expect("a history").1
    }
}

/// How the provider's API names its key while it has several.
#[derive(Debug, Clone, Copy)]
enum Api {
    /// PowerDNS: the one active entry point, or an error naming several.
    OneOrError,
    /// A DNSSEC object with one key: the newest that signs.
    Newest,
}

#[derive(Debug, Clone)]
struct World {
    now: Timestamp,
    ds_ttl: u32,
    dnskey_ttl: u32,
    api: Api,
    keys: Vec<PKey>,
    next_key: u16,
    children: Vec<Addr<Served>>,
    registry: Vec<Ds>,
    parents: Vec<Addr<Vec<Ds>>>,
    pending: Vec<RollRequest>,
    unvalidated: bool,
    /// Every action of the provider was one a careful provider could take.
    careful: bool,
}

impl World {
    fn new(ds_ttl: u32, dnskey_ttl: u32, api: Api) -> World {
        let long_ago = Timestamp(T0.0 - 30 * 86_400_000);
        let old = make_key(1);
        let mut w = World {
            now: T0,
            ds_ttl,
            dnskey_ttl,
            api,
            keys: vec![PKey {
                dnskey: old.clone(),
                signs: true,
            }],
            next_key: 2,
            children: vec![],
            registry: vec![ds(&old)],
            parents: vec![],
            pending: vec![],
            unvalidated: false,
            careful: true,
        };
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

    fn config(&self) -> Served {
        Served {
            keys: self.keys.iter().map(|k| k.dnskey.clone()).collect(),
            signers: self
                .keys
                .iter()
                .filter(|k| k.signs)
                .map(|k| k.dnskey.clone())
                .collect(),
        }
    }

    /// Every DS set a resolver may hold now names `key`.
    fn every_cached_ds_names(&self, key: &Dnskey) -> bool {
        self.cached_ds()
            .iter()
            .all(|set| usable_ds(set).iter().any(|d| key.matches_ds(ZONE, d)))
    }

    // The provider's own moves.

    fn publish_new(&mut self, signs: bool) {
        if self.keys.len() > 1 {
            return;
        }
        let key = make_key(self.next_key);
        self.next_key += 1;
        self.keys.push(PKey { dnskey: key, signs });
    }

    fn new_signs(&mut self) {
        if let Some(k) = self.keys.get_mut(1) {
            k.signs = true;
        }
    }

    /// The old key stops signing (the KSK swap), the new one signing.
    fn old_stops(&mut self) {
        if self.keys.len() < 2 || !self.keys[1].signs || !self.keys[0].signs {
            return;
        }
        let new = self.keys[1].dnskey.clone();
        self.careful &= self.every_cached_ds_names(&new);
        self.keys[0].signs = false;
    }

    fn retire_old(&mut self) {
        if self.keys.len() < 2 || !self.keys[1].signs {
            return;
        }
        let new = self.keys[1].dnskey.clone();
        if self.keys[0].signs {
            self.careful &= self.every_cached_ds_names(&new);
        }
        self.keys.remove(0);
    }

    /// The new key withdrawn while the old one still signs.
    fn go_back(&mut self) {
        if self.keys.len() == 2 && self.keys[0].signs {
            self.keys.truncate(1);
        }
    }

    /// A new key replaces the old one at once.
    fn swap_at_once(&mut self) {
        if self.keys.len() > 1 {
            return;
        }
        let key = make_key(self.next_key);
        self.next_key += 1;
        self.careful &= self.every_cached_ds_names(&key);
        self.keys = vec![PKey {
            dnskey: key,
            signs: true,
        }];
    }

    fn propagate_child(&mut self, i: usize) {
        let (now, config) = (self.now, self.config());
        let a = &mut self.children[i % 2];
        if *a.now() != config {
            a.history.push((now, config));
        }
    }

    fn propagate_parent(&mut self, i: usize) {
        let (now, set) = (self.now, self.registry.clone());
        let p = &mut self.parents[i % 3];
        if *p.now() != set {
            p.history.push((now, set));
        }
    }

    fn registrar_acts(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        match self.pending.remove(0) {
            RollRequest::AddDs { ds_line, .. } => {
                let add = DsLine::parse(&ds_line).expect("a DS line").ds;
                if !self.registry.contains(&add) {
                    self.registry.push(add);
                }
            }
            RollRequest::RemoveDs { ds_line, .. } => {
                let remove = DsLine::parse(&ds_line).expect("a DS line").ds;
                self.registry.retain(|d| *d != remove);
            }
        }
    }

    fn catch_up_but(&mut self, lagging: usize) {
        while !self.pending.is_empty() {
            self.registrar_acts();
        }
        for i in (0..3).filter(|i| *i != lagging) {
            self.propagate_parent(i);
        }
        for i in 0..2 {
            self.propagate_child(i);
        }
    }

    fn provider_view(&self) -> ProviderView {
        let signing: Vec<&PKey> = self.keys.iter().filter(|k| k.signs).collect();
        let named = match (self.api, signing.as_slice()) {
            (_, []) => return ProviderView::Off,
            (Api::OneOrError, [one]) | (Api::Newest, [.., one]) => one,
            (Api::OneOrError, _) => {
                return ProviderView::Unknown(
                    "zone own.test. has several active entry-point keys".into(),
                );
            }
        };
        ProviderView::On(Box::new(DnssecKey {
            zone: ZONE.into(),
            dnskey: named.dnskey.clone(),
            ds: ds(&named.dnskey),
            ds_ttl: 3600,
            uuid: None,
        }))
    }

    fn observation(&self) -> Observation {
        let parent = ParentView {
            zone: ZONE.into(),
            parent: "test.".into(),
            evidence: if self.unvalidated {
                Evidence::Unchecked
            } else {
                Evidence::Validated
            },
            delegations: (0..3)
                .map(|i| ServerAnswer {
                    server: format!("p{i}.test.").into(),
                    addr: format!("127.0.0.{}", i + 1).parse().expect("an address"),
                    answer: NsAnswer::Servers {
                        hosts: [NS.to_string()].into(),
                        ttl: 3600,
                    },
                })
                .collect(),
            answers: self
                .parents
                .iter()
                .enumerate()
                .map(|(i, p)| ServerAnswer {
                    server: format!("p{i}.test.").into(),
                    addr: format!("127.0.0.{}", i + 1).parse().expect("an address"),
                    answer: match (p.unknown, p.now().as_slice()) {
                        (true, _) => DsAnswer::Unknown(UnknownReason::Timeout),
                        (false, []) => DsAnswer::Absent,
                        (false, set) => DsAnswer::Present {
                            ds: set.to_vec(),
                            ttl: self.ds_ttl,
                        },
                    },
                })
                .collect(),
        };
        let child = ChildView {
            zone: ZONE.into(),
            apex_ns: vec![],
            answers: self
                .children
                .iter()
                .enumerate()
                .map(|(i, c)| ServerAnswer {
                    server: NS.into(),
                    addr: format!("127.0.1.{}", i + 1).parse().expect("an address"),
                    answer: if c.unknown {
                        DnskeyAnswer::Unknown(UnknownReason::Timeout)
                    } else {
                        let s = c.now();
                        DnskeyAnswer::Keys(ChildKeys {
                            keys: s.keys.clone(),
                            ttl: self.dnskey_ttl,
                            signed: !s.signers.is_empty(),
                            self_signers: s
                                .keys
                                .iter()
                                .enumerate()
                                .filter(|(_, k)| s.signers.contains(k))
                                .map(|(i, _)| i)
                                .collect(),
                            signatures: s
                                .signers
                                .iter()
                                .map(|k| SignatureWindow {
                                    key_tag: k.key_tag(),
                                    inception: 0,
                                    expiration: u32::MAX,
                                })
                                .collect(),
                            signals: Default::default(),
                        })
                    },
                })
                .collect(),
        };
        Observation {
            at: self.now,
            provider: self.provider_view(),
            zone_max_ttl: Some(3600),
            zone_ttl_error: None,
            provider_ns: Some(vec![NS.into()]),
            provider_asked: true,
            parent: Ok(parent),
            child: Ok(child),
            validation: ValidationVerdict::Secure,
            registrar_hook_failed: None,
            cds: CdsSetting::NotAsked,
            ds_path: None,
            cds_notify: None,
            delegation: Default::default(),
        }
        .assessed()
    }

    fn clear_unknowns(&mut self) {
        self.unvalidated = false;
        for p in &mut self.parents {
            p.unknown = false;
        }
        for c in &mut self.children {
            c.unknown = false;
        }
    }

    /// Every value an address served within `ttl` before now.
    fn cached<T: Clone + PartialEq>(&self, histories: &[&[(Timestamp, T)]], ttl: u32) -> Vec<T> {
        let now = self.now.0;
        let mut out: Vec<T> = vec![];
        for h in histories {
            for (i, (from, v)) in h.iter().enumerate() {
                let to = h.get(i + 1).map_or(now + 1, |(t, _)| t.0);
                if to > now - i64::from(ttl) * 1000 && from.0 <= now && !out.contains(v) {
                    out.push(v.clone());
                }
            }
        }
        out
    }

    fn cached_ds(&self) -> Vec<Vec<Ds>> {
        let h: Vec<&[(Timestamp, Vec<Ds>)]> =
            self.parents.iter().map(|p| p.history.as_slice()).collect();
        self.cached(&h, self.ds_ttl)
    }

    /// Every DS set and DNSKEY set a resolver may hold together validates: some usable DS
    /// names a key of the set that signs it (one algorithm throughout, so RFC 6840 5.11
    /// asks nothing more; the data is signed by a ZSK the roll leaves alone).
    fn violations(&self) -> Vec<String> {
        let h: Vec<&[(Timestamp, Served)]> =
            self.children.iter().map(|c| c.history.as_slice()).collect();
        let key_sets = self.cached(&h, self.dnskey_ttl);
        let mut out = vec![];
        for d in self.cached_ds() {
            for s in &key_sets {
                let usable = usable_ds(&d);
                let ok = usable.iter().any(|ds| {
                    s.keys
                        .iter()
                        .any(|k| s.signers.contains(k) && k.matches_ds(ZONE, ds))
                });
                if !ok {
                    out.push(format!(
                        "DS {:?} + DNSKEY {:?} signed by {:?}: no DS names a key that signs the set",
                        d.iter().map(|d| d.key_tag).collect::<Vec<_>>(),
                        s.keys.iter().map(Dnskey::key_tag).collect::<Vec<_>>(),
                        s.signers.iter().map(Dnskey::key_tag).collect::<Vec<_>>()
                    ));
                }
            }
        }
        out
    }

    /// The look shows the provider swapped at once: a known child address's set, not
    /// signed by the old key, is signed by keys none of which a known parent address's
    /// DS set names. The keys signing there (the alert names the DS of one of them).
    fn shows_swap(&self, old: &Dnskey) -> Option<Vec<Dnskey>> {
        for c in self.children.iter().filter(|c| !c.unknown) {
            let s = c.now();
            if s.signers.contains(old) || s.signers.is_empty() {
                continue;
            }
            let lacking = self.parents.iter().filter(|p| !p.unknown).any(|p| {
                !p.now().is_empty()
                    && !usable_ds(p.now())
                        .iter()
                        .any(|d| s.signers.iter().any(|k| k.matches_ds(ZONE, d)))
            });
            if lacking {
                return Some(s.signers.clone());
            }
        }
        None
    }
}

fn active_zone(old: &Dnskey) -> Zone {
    let mut facts = Facts::default();
    facts.lifecycle.ds_line = Some(line(old));
    facts.lifecycle.max_ds_ttl = Some(3600);
    facts.lifecycle.max_dnskey_ttl = Some(300);
    facts.delegation.verdict = Some(crate::dns::DelegationVerdict::Provider);
    facts.delegation.provider_ns = Some(vec![NS.into()]);
    facts.delegation.seen_at_provider = true;
    Zone {
        name: ZoneName::parse(ZONE).expect("a zone name"),
        intent: Intent::Enabled,
        ds_never_submitted: false,
        state: Some(State::Active),
        since: Timestamp(T0.0 - 86_400_000),
        facts,
    }
}

fn firing(d: &Decision, kind: AlertKind) -> Option<&str> {
    d.alerts
        .iter()
        .find(|c| c.kind == kind)
        .and_then(|c| c.firing.as_deref())
}

/// One daemon look: decide, and (unless it crashed before the commit) keep the decision
/// and hand its registrar requests over (the outbox delivers them).
fn daemon_step(w: &mut World, zone: &mut Zone, commit: bool) -> Decision {
    let d = step(zone, &w.observation(), &policy());
    w.clear_unknowns();
    if commit {
        zone.state = d.state;
        zone.facts = d.facts.clone();
        for e in &d.effects {
            match e {
                Effect::RollRequest { request } => w.pending.push(request.clone()),
                Effect::SetCds { .. } => {}
                other => panic!("an unexpected effect in a provider's roll: {other:?}"),
            }
        }
    }
    d
}

#[derive(Debug, Clone)]
enum Op {
    Step,
    CrashBeforeCommit,
    Advance(u32),
    RegistrarActs,
    PropagateParent(usize),
    PropagateChild(usize),
    UnknownParent(usize),
    UnknownChild(usize),
    Unvalidated,
    CatchUp,
    /// The provider's moves.
    PublishNew,
    PublishNewSigning,
    NewSigns,
    OldStops,
    RetireOld,
    GoBack,
    SwapAtOnce,
}

fn op(swaps: bool) -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => Just(Op::Step),
        1 => Just(Op::CrashBeforeCommit),
        5 => prop_oneof![Just(60u32), Just(600), Just(3600), Just(21_600), Just(86_400)].prop_map(Op::Advance),
        2 => Just(Op::RegistrarActs),
        3 => prop_oneof![3 => Just(0usize), 3 => Just(1), 1 => Just(LAGGING)].prop_map(Op::PropagateParent),
        3 => (0..2usize).prop_map(Op::PropagateChild),
        1 => (0..3usize).prop_map(Op::UnknownParent),
        1 => (0..2usize).prop_map(Op::UnknownChild),
        1 => Just(Op::Unvalidated),
        2 => Just(Op::CatchUp),
        1 => Just(Op::PublishNew),
        1 => Just(Op::PublishNewSigning),
        1 => Just(Op::NewSigns),
        1 => Just(Op::OldStops),
        1 => Just(Op::RetireOld),
        1 => Just(Op::GoBack),
        1 => Just(Op::SwapAtOnce),
    ]
    .prop_map(move |o| match o {
        Op::SwapAtOnce if !swaps => Op::PublishNewSigning,
        o => o,
    })
}

fn run(ops: &[Op], ds_ttl: u32, dnskey_ttl: u32, api: Api) -> Result<(), TestCaseError> {
    let mut w = World::new(ds_ttl, dnskey_ttl, api);
    let mut zone = active_zone(&w.keys[0].dnskey);
    let mut trail: Vec<String> = vec![];
    let look = |w: &mut World, zone: &mut Zone, commit: bool, trail: &mut Vec<String>| {
        let old = DsLine::parse(zone.facts.lifecycle.ds_line.as_deref().expect("a key"))
            .expect("a DS line")
            .ds;
        let old_key = w
            .children
            .iter()
            .flat_map(|c| c.history.iter().flat_map(|(_, s)| s.keys.clone()))
            .find(|k| k.matches_ds(ZONE, &old))
            .expect("the followed key was served");
        let swap = w.shows_swap(&old_key);
        let d = daemon_step(w, zone, commit);
        trail.extend(d.notes.iter().map(|n| n.reason.clone()));
        if let Some(keys) = swap {
            let said = firing(&d, AlertKind::ProviderKeySwapped);
            prop_assert!(
                said.is_some_and(|m| keys.iter().any(|k| m.contains(&line(k)))),
                "a look shows the provider swapped to keys {:?} none of whose DS a parent address publishes, and provider_key_swapped says {said:?}\ntrail:\n{}",
                keys.iter().map(Dnskey::key_tag).collect::<Vec<_>>(),
                trail.join("\n")
            );
        }
        Ok(())
    };
    for op in ops {
        match op {
            Op::Step => look(&mut w, &mut zone, true, &mut trail)?,
            Op::CrashBeforeCommit => look(&mut w, &mut zone, false, &mut trail)?,
            Op::Advance(s) => w.now = w.now.plus_secs(*s),
            Op::RegistrarActs => w.registrar_acts(),
            Op::PropagateParent(i) => w.propagate_parent(*i),
            Op::PropagateChild(i) => w.propagate_child(*i),
            Op::UnknownParent(i) => w.parents[*i % 3].unknown = true,
            Op::UnknownChild(i) => w.children[*i % 2].unknown = true,
            Op::Unvalidated => w.unvalidated = true,
            Op::CatchUp => w.catch_up_but(LAGGING),
            Op::PublishNew => w.publish_new(false),
            Op::PublishNewSigning => w.publish_new(true),
            Op::NewSigns => w.new_signs(),
            Op::OldStops => w.old_stops(),
            Op::RetireOld => w.retire_old(),
            Op::GoBack => w.go_back(),
            Op::SwapAtOnce => w.swap_at_once(),
        }
        trail.push(format!(
            "{} {op:?} -> {}",
            w.now,
            zone.facts
                .provider_roll
                .as_ref()
                .map_or("no roll", |r| r.phase())
        ));
        if w.careful {
            let v = w.violations();
            prop_assert!(
                v.is_empty(),
                "after {op:?}: {}\ntrail:\n{}",
                v.join("\n"),
                trail.join("\n")
            );
        }
    }
    // Then a provider that finishes its roll carefully, a registrar that acts and
    // servers that catch up, looks ten minutes apart: the roll ends, the zone follows
    // the provider's one key, whose DS alone is at the parent.
    for round in 0..3000 {
        let one_key = w.keys.len() == 1;
        let settled = zone.facts.provider_roll.is_none()
            && zone.facts.lifecycle.ds_line.as_deref() == Some(line(&w.keys[0].dnskey).as_str())
            && w.registry == vec![ds(&w.keys[0].dnskey)];
        if one_key && settled && round > 0 {
            break;
        }
        if w.keys.len() == 1 && w.keys[0].dnskey == make_key(1) && round == 0 {
            w.publish_new(true);
        }
        if w.keys.len() == 2 {
            let new = w.keys[1].dnskey.clone();
            w.new_signs();
            if w.every_cached_ds_names(&new) {
                w.retire_old();
            }
        }
        w.catch_up_but(usize::MAX);
        look(&mut w, &mut zone, true, &mut trail)?;
        trail.push(format!(
            "{} settle -> {}",
            w.now,
            zone.facts
                .provider_roll
                .as_ref()
                .map_or("no roll", |r| r.phase())
        ));
        if w.careful {
            let v = w.violations();
            prop_assert!(
                v.is_empty(),
                "settling round {round}: {}\ntrail:\n{}",
                v.join("\n"),
                trail.join("\n")
            );
        }
        w.now = w.now.plus_secs(600);
    }
    prop_assert!(
        zone.facts.provider_roll.is_none(),
        "the roll never ended:\n{}",
        trail.join("\n")
    );
    prop_assert_eq!(w.keys.len(), 1);
    prop_assert_eq!(
        zone.facts.lifecycle.ds_line.clone(),
        Some(line(&w.keys[0].dnskey)),
        "{}",
        trail.join("\n")
    );
    prop_assert_eq!(w.registry.clone(), vec![ds(&w.keys[0].dnskey)]);
    Ok(())
}

fn api() -> impl Strategy<Value = Api> {
    prop_oneof![Just(Api::OneOrError), Just(Api::Newest)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, rng_algorithm: RngAlgorithm::XorShift, ..ProptestConfig::default() })]

    /// Rule 17 over random interleavings of a provider's own roll: every cache validates
    /// where the provider overlapped, the critical alert at the first look that shows a
    /// swap where it did not, and every roll ends with the new DS alone.
    #[test]
    fn a_providers_own_roll_keeps_every_resolver_validating(
        ops in prop::collection::vec(op(true), 0..120),
        ds_ttl in prop_oneof![Just(300u32), Just(3600), Just(86_400)],
        dnskey_ttl in prop_oneof![Just(300u32), Just(3600)],
        api in api(),
    ) {
        run(&ops, ds_ttl, dnskey_ttl, api)?;
    }

    /// The same with a provider that always overlaps (no swap at once): the caches are
    /// checked throughout in more of the cases.
    #[test]
    fn a_careful_providers_own_roll_keeps_every_resolver_validating(
        ops in prop::collection::vec(op(false), 0..120),
        ds_ttl in prop_oneof![Just(300u32), Just(3600), Just(86_400)],
        dnskey_ttl in prop_oneof![Just(300u32), Just(3600)],
        api in api(),
    ) {
        run(&ops, ds_ttl, dnskey_ttl, api)?;
    }
}

// Each part on its own.

fn requests(d: &Decision) -> Vec<RollRequest> {
    d.effects
        .iter()
        .filter_map(|e| match e {
            Effect::RollRequest { request } => Some(request.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_new_key_served_everywhere_is_asked_as_an_addition_then_the_old_ds_removed_after_its_hold() {
    let mut w = World::new(3600, 300, Api::OneOrError);
    let old = w.keys[0].dnskey.clone();
    let mut zone = active_zone(&old);
    // A settled zone: nothing to say.
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(d.effects.is_empty());
    assert_eq!(zone.facts.provider_roll, None);
    assert_eq!(firing(&d, AlertKind::ProviderKeyRolled), None);

    // The provider adds a signing KSK; one name server has it.
    w.publish_new(true);
    let new = w.keys[1].dnskey.clone();
    w.propagate_child(0);
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(requests(&d).is_empty(), "not every name server serves it");
    let roll = zone.facts.provider_roll.clone().expect("a roll followed");
    assert_eq!(roll.new_key, new);
    assert!(
        firing(&d, AlertKind::ProviderKeyRolled).is_some(),
        "{:?}",
        d.alerts
    );
    assert_eq!(
        zone.facts.wait.held_by.as_ref().map(|h| h.on),
        Some(super::hold::Party::Provider)
    );
    assert!(
        d.wake_at <= w.now.plus(policy().poll_waiting),
        "a roll is looked at every poll_waiting"
    );

    // Everywhere: the addition, the old DS kept.
    w.propagate_child(1);
    let d = daemon_step(&mut w, &mut zone, true);
    assert_eq!(
        requests(&d),
        vec![RollRequest::AddDs {
            ds_line: line(&new),
            keep: line(&old),
        }]
    );
    assert!(
        d.notes.iter().any(|n| n.reason.contains(&format!(
            "the provider rolled its key: DS for tag {} asked as an addition",
            new.key_tag()
        ))),
        "{:?}",
        d.notes
    );
    let said = firing(&d, AlertKind::ProviderKeyRolled).expect("said");
    assert!(said.contains(&line(&new)), "{said}");
    assert_eq!(firing(&d, AlertKind::ProviderKeySwapped), None);
    // Asked once.
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(requests(&d).is_empty());

    // The new DS at every parent address; the old key still served: nothing removed.
    w.catch_up_but(usize::MAX);
    w.now = w.now.plus_secs(600);
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(requests(&d).is_empty());

    // The provider retires the old key; one name server still serves it.
    w.now = w.now.plus_secs(86_400);
    w.retire_old();
    w.propagate_child(0);
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(requests(&d).is_empty());
    assert_eq!(zone.facts.provider_roll.as_ref().unwrap().old_gone_at, None);

    // Gone everywhere: held for the DNSKEY TTL and the margin from this look.
    w.propagate_child(1);
    let gone = w.now;
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(requests(&d).is_empty());
    let until = gone.plus_secs(300 + MARGIN);
    assert_eq!(zone.facts.wait.held_by.as_ref().unwrap().until, Some(until));
    assert!(d.wake_at <= until);
    w.now = Timestamp(until.0 - 1000);
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(requests(&d).is_empty(), "one second before the hold's end");
    w.now = until;
    let d = daemon_step(&mut w, &mut zone, true);
    assert_eq!(
        requests(&d),
        vec![RollRequest::RemoveDs {
            ds_line: line(&old),
            keep: line(&new),
        }]
    );
    // The old DS gone everywhere: the zone follows the new key.
    w.catch_up_but(usize::MAX);
    w.now = w.now.plus_secs(600);
    let d = daemon_step(&mut w, &mut zone, true);
    assert_eq!(zone.facts.provider_roll, None);
    assert_eq!(zone.facts.lifecycle.ds_line, Some(line(&new)));
    assert_eq!(zone.state, Some(State::Active));
    assert!(
        d.alerts
            .iter()
            .any(|c| c.kind == AlertKind::ProviderKeyRolled && c.firing.is_none())
    );
    assert!(
        d.notes
            .iter()
            .any(|n| n.reason.contains("the provider's roll is done"))
    );
    assert!(d.effects.is_empty(), "{:?}", d.effects);
}

#[test]
fn the_old_ds_is_not_asked_removed_before_the_new_is_at_every_parent_address_validated() {
    let mut w = World::new(3600, 300, Api::Newest);
    let old = w.keys[0].dnskey.clone();
    let mut zone = active_zone(&old);
    w.publish_new(true);
    w.catch_up_but(usize::MAX);
    daemon_step(&mut w, &mut zone, true);
    // The registrar added it; the lagging parent address has not got it yet; the
    // provider retires the old key at once.
    w.catch_up_but(LAGGING);
    w.retire_old();
    w.catch_up_but(LAGGING);
    for _ in 0..20 {
        w.now = w.now.plus_secs(600);
        let d = daemon_step(&mut w, &mut zone, true);
        assert!(requests(&d).is_empty(), "{:?}", d.effects);
        // The lagging address publishes only the old DS: resolvers sent there fail.
        let said = firing(&d, AlertKind::ProviderKeySwapped).expect("alerted");
        assert!(said.contains("127.0.0.3"), "{said}");
    }
    // Every parent address publishes it, but this look is not validated.
    w.propagate_parent(LAGGING);
    w.unvalidated = true;
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(requests(&d).is_empty());
    assert!(
        d.alerts
            .iter()
            .any(|c| c.kind == AlertKind::ProviderKeySwapped && c.firing.is_none())
    );
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(matches!(
        requests(&d).as_slice(),
        [RollRequest::RemoveDs { .. }]
    ));
}

#[test]
fn a_provider_that_swaps_at_once_is_a_critical_alert_at_the_first_look_naming_the_ds_to_add() {
    let mut w = World::new(3600, 300, Api::OneOrError);
    let old = w.keys[0].dnskey.clone();
    let mut zone = active_zone(&old);
    w.swap_at_once();
    let new = w.keys[0].dnskey.clone();
    // One name server has swapped.
    w.propagate_child(0);
    let d = daemon_step(&mut w, &mut zone, true);
    let said = firing(&d, AlertKind::ProviderKeySwapped).expect("alerted at the first look");
    assert!(said.contains(&line(&new)), "{said}");
    assert_eq!(
        AlertKind::ProviderKeySwapped.severity(),
        super::alerts::Severity::Critical
    );
    // Its DS is asked for at once, the old kept; nothing removes the old DS.
    assert_eq!(
        requests(&d),
        vec![RollRequest::AddDs {
            ds_line: line(&new),
            keep: line(&old),
        }]
    );
    w.propagate_child(1);
    for _ in 0..10 {
        w.now = w.now.plus_secs(600);
        let d = daemon_step(&mut w, &mut zone, true);
        assert!(requests(&d).is_empty(), "{:?}", d.effects);
        assert!(firing(&d, AlertKind::ProviderKeySwapped).is_some());
    }
    // The registrar adds it: the alert clears; the old DS goes after the hold.
    w.catch_up_but(usize::MAX);
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(
        d.alerts
            .iter()
            .any(|c| c.kind == AlertKind::ProviderKeySwapped && c.firing.is_none())
    );
    assert!(matches!(
        requests(&d).as_slice(),
        [RollRequest::RemoveDs { .. }]
    ));
}

#[test]
fn a_provider_that_goes_back_has_the_added_ds_removed() {
    let mut w = World::new(3600, 300, Api::OneOrError);
    let old = w.keys[0].dnskey.clone();
    let mut zone = active_zone(&old);
    w.publish_new(true);
    let new = w.keys[1].dnskey.clone();
    w.catch_up_but(usize::MAX);
    let d = daemon_step(&mut w, &mut zone, true);
    assert_eq!(requests(&d).len(), 1);
    w.catch_up_but(usize::MAX);
    w.go_back();
    w.catch_up_but(usize::MAX);
    let d = daemon_step(&mut w, &mut zone, true);
    assert_eq!(
        requests(&d),
        vec![RollRequest::RemoveDs {
            ds_line: line(&new),
            keep: line(&old),
        }]
    );
    let roll = zone
        .facts
        .provider_roll
        .clone()
        .expect("until the DS is gone");
    assert!(roll.request_stands(false, &line(&new)).is_ok());
    w.catch_up_but(usize::MAX);
    daemon_step(&mut w, &mut zone, true);
    assert_eq!(zone.facts.provider_roll, None);
    assert_eq!(zone.facts.lifecycle.ds_line, Some(line(&old)));
}

#[test]
fn a_published_key_that_does_not_sign_is_not_asked_for() {
    let mut w = World::new(3600, 300, Api::OneOrError);
    let mut zone = active_zone(&w.keys[0].dnskey.clone());
    w.publish_new(false);
    w.catch_up_but(usize::MAX);
    let d = daemon_step(&mut w, &mut zone, true);
    assert!(requests(&d).is_empty());
    let held = zone.facts.wait.held_by.clone().expect("held");
    assert!(held.what.contains("no valid signature"), "{}", held.what);
}

#[test]
fn a_provider_roll_makes_the_look_validated_and_its_facts_round_trip() {
    let mut w = World::new(3600, 300, Api::OneOrError);
    let mut zone = active_zone(&w.keys[0].dnskey.clone());
    assert!(!super::rules::Look::at(&zone, w.now).validated_parent);
    w.publish_new(true);
    w.catch_up_but(usize::MAX);
    daemon_step(&mut w, &mut zone, true);
    assert!(super::rules::Look::at(&zone, w.now).validated_parent);
    let text = serde_json::to_string(&zone.facts).expect("facts as JSON");
    let back: Facts = serde_json::from_str(&text).expect("read back");
    assert_eq!(back, zone.facts);
}

/// A signed move that ends with the target swapped to a new key since (the parent has only
/// the moved key's DS) hands its critical alert to the provider's roll: at every commit a
/// critical alert is open while a name server serves a key no parent DS names, the move's
/// cleared only in the judgement that raises `provider_key_swapped`; then the roll repairs
/// the zone.
#[test]
fn a_move_ending_with_the_target_swapped_hands_its_critical_alert_to_the_providers_roll() {
    use super::moving::{MoveSeen, decide};
    use super::signed_move::{Move, Phase, Ttls};

    fn apply(open: &mut Vec<AlertKind>, d: &Decision) {
        for c in &d.alerts {
            open.retain(|k| *k != c.kind);
            if c.firing.is_some() {
                open.push(c.kind);
            }
        }
    }
    let critical = |open: &[AlertKind]| {
        open.iter()
            .any(|k| k.severity() == super::alerts::Severity::Critical)
    };

    let mut w = World::new(3600, 300, Api::OneOrError);
    let moved = w.keys[0].dnskey.clone();
    let mut zone = active_zone(&make_key(900));
    let mut mv = Move::new(ZONE, make_key(900))
        .between("src", "tgt")
        .seeded(Ttls {
            dnskey: 300,
            ds: 3600,
            parent_ns: 3600,
            apex_ns: 3600,
        });
    mv.phase = Phase::Done;
    mv.target_key = Some(moved.clone());
    zone.facts.signed_move = Some(mv.clone());
    // The move saw the target roll and alerted; then the source's copy is deleted.
    let mut open = vec![AlertKind::SignedMoveHeld];
    w.swap_at_once();
    w.propagate_child(0);
    w.propagate_child(1);
    let new = w.keys[0].dnskey.clone();
    let ProviderView::On(key) = w.provider_view() else {
        panic!("the target signs")
    };
    let policy = policy();
    let seen = MoveSeen::SourceGone {
        target_key: Ok(*key),
    };
    let d = decide(&zone, &mv, &seen, w.now, &policy, &policy.move_policy());
    apply(&mut open, &d);
    assert!(
        critical(&open),
        "the move's end resolved its alert while the target signs with key {} the parent has no DS for: {open:?}",
        new.key_tag()
    );
    zone.state = d.state;
    zone.facts = d.facts;
    assert_eq!(zone.facts.signed_move, None);
    assert_eq!(zone.facts.lifecycle.ds_line, Some(line(&moved)));

    // The zone's own look: the provider's roll speaks, the move's alert is handed over.
    let d = daemon_step(&mut w, &mut zone, true);
    apply(&mut open, &d);
    let said = firing(&d, AlertKind::ProviderKeySwapped).expect("the swap is alerted");
    assert!(said.contains(&line(&new)), "{said}");
    assert!(!open.contains(&AlertKind::SignedMoveHeld), "{open:?}");
    assert!(critical(&open), "{open:?}");

    // The registrar adds the DS: the zone follows the new key, nothing left open.
    for _ in 0..20 {
        w.registrar_acts();
        w.catch_up_but(usize::MAX);
        w.now = w.now.plus_secs(600);
        let swapped = w.shows_swap(&moved).is_some();
        let d = daemon_step(&mut w, &mut zone, true);
        apply(&mut open, &d);
        assert!(!swapped || critical(&open), "{open:?}");
        if zone.facts.provider_roll.is_none() {
            break;
        }
    }
    assert_eq!(zone.facts.provider_roll, None);
    assert_eq!(zone.facts.lifecycle.ds_line, Some(line(&new)));
    assert_eq!(w.registry, vec![ds(&new)]);
    assert!(open.is_empty(), "{open:?}");
}
