//! Every transition of `step`, the unhappy ones included, and the guard.

use std::time::Duration;

use super::facts::{DelegationFacts, LifecycleFacts};
use super::*;
use crate::dns::{
    ChildKeys, ChildView, DnskeyAnswer, DsAnswer, NsAnswer, ParentView, Published, ServerAnswer,
    Signals, SignatureWindow, UnknownReason, ValidationVerdict,
};
use crate::dnssec::DnssecKey;
use crate::dnssec::{DigestType, Dnskey, Ds};
use crate::zone_name::ZoneName;

pub(super) const ZONE: &str = "child.test.";
pub(super) const T0: Timestamp = Timestamp(1_800_000_000_000);
pub(super) const HOUR: Duration = Duration::from_secs(3600);

pub(super) fn provider_key(key: &Dnskey) -> DnssecKey {
    DnssecKey {
        zone: ZONE.into(),
        dnskey: key.clone(),
        ds: key.to_ds(ZONE, DigestType::Sha256).unwrap(),
        ds_ttl: 3600,
        uuid: None,
    }
}

/// Per-server answers, built tersely.
#[derive(Clone)]
pub(super) enum P {
    Ds(u32),
    WrongDs,
    /// The right key, under a digest type no validator implements.
    UnsupportedDs,
    No,
    Timeout,
}

/// Who a parent address delegates to: the provider's name servers, an old provider's,
/// or no answer. Unlisted addresses delegate to the provider (unknown where their DS
/// answer timed out).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum D {
    Ours,
    Old,
    Lost,
}

pub(super) const OURS: &str = "ns1.child.test.";
pub(super) const OLD: &str = "ns1.old.test.";

#[derive(Clone, Debug)]
pub(super) enum C {
    Serves,
    /// The provider's key in the set, but no valid signature by it over the set.
    ServesUnsigned,
    /// The old provider's key (the world's `other`).
    OldKey,
    Unsigned,
    Refused,
}

pub(super) struct World {
    pub(super) key: Dnskey,
    pub(super) other: Dnskey,
    pub(super) policy: Policy,
}

impl World {
    pub(super) fn new() -> Self {
        Self {
            key: crate::dnssec::test_key(),
            other: crate::dnssec::test_key(),
            policy: Policy::default(),
        }
    }

    pub(super) fn parent(&self, answers: &[P]) -> ParentView {
        self.parent_delegating(answers, &[])
    }

    pub(super) fn parent_delegating(&self, answers: &[P], deleg: &[D]) -> ParentView {
        ParentView {
            zone: ZONE.into(),
            parent: "test.".into(),
            evidence: crate::dns::Evidence::Validated,
            delegations: answers
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let d = deleg.get(i).copied().unwrap_or(match p {
                        P::Timeout => D::Lost,
                        _ => D::Ours,
                    });
                    ServerAnswer {
                        server: format!("ns{}.test.", i + 1).into(),
                        addr: format!("127.0.0.{}", i + 1).parse().unwrap(),
                        answer: match d {
                            D::Ours => NsAnswer::Servers {
                                hosts: [OURS.to_string()].into(),
                                ttl: 3600,
                            },
                            D::Old => NsAnswer::Servers {
                                hosts: [OLD.to_string()].into(),
                                ttl: 7200,
                            },
                            D::Lost => NsAnswer::Unknown(UnknownReason::Timeout),
                        },
                    }
                })
                .collect(),
            answers: answers
                .iter()
                .enumerate()
                .map(|(i, p)| ServerAnswer {
                    server: format!("ns{}.test.", i + 1).into(),
                    addr: format!("127.0.0.{}", i + 1).parse().unwrap(),
                    answer: match p {
                        P::Ds(ttl) => DsAnswer::Present {
                            ds: vec![self.key.to_ds(ZONE, DigestType::Sha256).unwrap()],
                            ttl: *ttl,
                        },
                        P::WrongDs => DsAnswer::Present {
                            ds: vec![self.other.to_ds(ZONE, DigestType::Sha256).unwrap()],
                            ttl: 3600,
                        },
                        P::UnsupportedDs => DsAnswer::Present {
                            ds: vec![crate::dnssec::Ds {
                                digest_type: 99,
                                ..self.key.to_ds(ZONE, DigestType::Sha256).unwrap()
                            }],
                            ttl: 3600,
                        },
                        P::No => DsAnswer::Absent,
                        P::Timeout => DsAnswer::Unknown(UnknownReason::Timeout),
                    },
                })
                .collect(),
        }
    }

    pub(super) fn child(&self, answers: &[C]) -> ChildView {
        ChildView {
            zone: ZONE.into(),
            apex_ns: vec![],
            answers: answers
                .iter()
                .map(|c| ServerAnswer {
                    server: "ns1.child.test.".into(),
                    addr: "127.0.0.20".parse().unwrap(),
                    answer: match c {
                        C::Serves => DnskeyAnswer::Keys(ChildKeys {
                            keys: vec![self.key.clone()],
                            ttl: 300,
                            signed: true,
                            self_signers: vec![0],
                            signatures: vec![SignatureWindow {
                                key_tag: self.key.key_tag(),
                                inception: 0,
                                expiration: u32::MAX,
                            }],
                            signals: Default::default(),
                        }),
                        C::ServesUnsigned => DnskeyAnswer::Keys(ChildKeys {
                            keys: vec![self.key.clone()],
                            ttl: 300,
                            signed: false,
                            self_signers: vec![],
                            signatures: vec![],
                            signals: Default::default(),
                        }),
                        C::OldKey => DnskeyAnswer::Keys(ChildKeys {
                            keys: vec![self.other.clone()],
                            ttl: 900,
                            signed: true,
                            self_signers: vec![0],
                            signatures: vec![],
                            signals: Default::default(),
                        }),
                        C::Unsigned => DnskeyAnswer::Absent,
                        C::Refused => DnskeyAnswer::Unknown(UnknownReason::Refused),
                    },
                })
                .collect(),
        }
    }

    pub(super) fn obs(
        &self,
        at: Timestamp,
        on: Option<bool>,
        parent: &[P],
        child: &[C],
    ) -> Observation {
        Observation {
            at,
            provider: match on {
                Some(true) => ProviderView::On(Box::new(provider_key(&self.key))),
                Some(false) => ProviderView::Off,
                None => ProviderView::Unknown("HTTP 503".into()),
            },
            zone_max_ttl: Some(600),
            zone_ttl_error: None,
            parent: Ok(self.parent(parent)),
            child: Ok(self.child(child)),
            validation: ValidationVerdict::Unknown,
            registrar_hook_failed: None,
            ds_path: None,
            cds_notify: None,
            cds: CdsSetting::NotAsked,
            provider_ns: Some(vec![OURS.into()]),
            provider_asked: true,
            delegation: Default::default(),
        }
        .assessed()
    }

    /// Steps and applies the decision as the engine would.
    pub(super) fn run(&self, zone: &mut Zone, obs: &Observation) -> Decision {
        let d = step(zone, obs, &self.policy);
        if d.state != zone.state {
            zone.since = obs.at;
        }
        zone.state = d.state;
        zone.facts = d.facts.clone();
        d
    }

    /// Looks every `poll_waiting` after `from` and before `until`, as a daemon keeping its
    /// polls does: what keeps `T_gone` standing through `ttl_wait` (rule 2).
    pub(super) fn poll_until(
        &self,
        zone: &mut Zone,
        from: Timestamp,
        until: Timestamp,
        obs: impl Fn(Timestamp) -> Observation,
    ) {
        let mut at = from.plus(self.policy.poll_waiting);
        while at < until {
            let before = zone.state;
            let d = self.run(zone, &obs(at));
            assert_eq!(d.state, before, "a poll at {at} moved the zone");
            at = at.plus(self.policy.poll_waiting);
        }
    }
}

/// `child` with every address publishing `signals` (its keys' indices as signers).
pub(super) fn with_signals(obs: &mut Observation, signals: &[Signals]) {
    let Ok(child) = &mut obs.child else {
        panic!("a child view")
    };
    for (a, s) in child.answers.iter_mut().zip(signals) {
        if let DnskeyAnswer::Keys(k) = &mut a.answer {
            k.signals = s.clone();
        }
    }
}

pub(super) fn cds(keys: &[&Dnskey], signed: bool) -> Signals {
    Signals::Answered(Published {
        cds: keys
            .iter()
            .map(|k| k.to_ds(ZONE, DigestType::Sha256).unwrap())
            .collect(),
        cdnskey: vec![],
        signers: if signed { vec![0] } else { vec![] },
    })
}

pub(super) fn delete() -> Signals {
    Signals::Answered(Published {
        cds: vec![Ds {
            key_tag: 0,
            algorithm: 0,
            digest_type: 0,
            digest: vec![0],
        }],
        cdnskey: vec![],
        signers: vec![0],
    })
}

pub(super) fn none() -> Signals {
    Signals::Answered(Published::default())
}

pub(super) fn zone(state: Option<State>, intent: Intent) -> Zone {
    Zone {
        name: ZoneName::parse(ZONE).expect("a zone name"),
        intent,
        ds_never_submitted: false,
        state,
        since: T0,
        facts: Facts::default(),
    }
}

pub(super) fn firing(d: &Decision, kind: AlertKind) -> Option<&str> {
    d.alerts
        .iter()
        .find(|c| c.kind == kind)
        .and_then(|c| c.firing.as_deref())
}

pub(super) fn judged(d: &Decision, kind: AlertKind) -> bool {
    d.alerts.iter().any(|c| c.kind == kind)
}

#[test]
fn enable_path_end_to_end() {
    let w = World::new();
    let mut z = zone(Some(State::Disabled), Intent::Enabled);
    let both_no = [P::No, P::No];

    let d = w.run(
        &mut z,
        &w.obs(T0, Some(false), &both_no, &[C::Unsigned, C::Unsigned]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    assert_eq!(d.effects, vec![Effect::EnableDnssec]);
    assert_eq!(d.wake_at, T0, "a new state is judged at once");

    // Switched on, one child server lags: no hold, no announcement.
    let t = T0.plus(Duration::from_secs(60));
    let d = w.run(
        &mut z,
        &w.obs(t, Some(true), &both_no, &[C::Serves, C::Unsigned]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    assert!(d.effects.is_empty());
    assert_eq!(z.facts.lifecycle.hold_until, None);

    // Everywhere: the hold is max(DNSKEY TTL 300, zone TTL 600) + 1 h margin.
    let d = w.run(
        &mut z,
        &w.obs(t, Some(true), &both_no, &[C::Serves, C::Serves]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    let hold = t.plus(Duration::from_secs(600)).plus(HOUR);
    assert_eq!(z.facts.lifecycle.hold_until, Some(hold));
    assert_eq!(d.wake_at, hold.min(t.plus(w.policy.poll_waiting)));

    // Just before the hold ends: still nothing.
    let before = hold.plus(Duration::ZERO);
    let d = w.run(
        &mut z,
        &w.obs(
            Timestamp(before.0 - 1),
            Some(true),
            &both_no,
            &[C::Serves, C::Serves],
        ),
    );
    assert!(d.effects.is_empty());
    let d = w.run(
        &mut z,
        &w.obs(hold, Some(true), &both_no, &[C::Serves, C::Serves]),
    );
    assert_eq!(d.state, Some(State::AwaitingDs));
    let line = provider_key(&w.key).ds_line().to_string();
    assert_eq!(d.effects, vec![Effect::AnnounceDs { ds_line: line }]);

    // One TLD server publishes: still waiting.
    let t = hold.plus(HOUR);
    let d = w.run(
        &mut z,
        &w.obs(
            t,
            Some(true),
            &[P::Ds(3600), P::No],
            &[C::Serves, C::Serves],
        ),
    );
    assert_eq!(d.state, Some(State::AwaitingDs));
    let d = w.run(
        &mut z,
        &w.obs(
            t,
            Some(true),
            &[P::Ds(3600), P::Timeout],
            &[C::Serves, C::Serves],
        ),
    );
    assert_eq!(d.state, Some(State::AwaitingDs), "unknown is not published");
    let d = w.run(
        &mut z,
        &w.obs(
            t,
            Some(true),
            &[P::Ds(3600), P::Ds(3600)],
            &[C::Serves, C::Serves],
        ),
    );
    assert_eq!(d.state, Some(State::DsObserved));

    let mut o = w.obs(
        t,
        Some(true),
        &[P::Ds(3600), P::Ds(3600)],
        &[C::Serves, C::Serves],
    );
    o.validation = ValidationVerdict::Bogus;
    let d = w.run(&mut z, &o);
    assert_eq!(
        d.state,
        Some(State::DsObserved),
        "bogus holds the zone back"
    );
    assert!(firing(&d, AlertKind::ValidationFailed).is_some());
    o.validation = ValidationVerdict::Secure;
    let d = w.run(&mut z, &o);
    assert_eq!(d.state, Some(State::Active));
    assert_eq!(firing(&d, AlertKind::ValidationFailed), None);
    assert!(judged(&d, AlertKind::ValidationFailed), "and it resolves");
}

#[test]
fn the_ds_is_never_announced_before_every_child_serves_the_key() {
    let w = World::new();
    let children: [&[C]; 4] = [
        &[C::Serves, C::Unsigned],
        &[C::Serves, C::Refused],
        &[C::Refused, C::Refused],
        &[],
    ];
    for child in children {
        let mut z = zone(Some(State::Enabling), Intent::Enabled);
        for hours in 0..100 {
            let at = T0.plus(HOUR * hours);
            let d = w.run(&mut z, &w.obs(at, Some(true), &[P::No, P::No], child));
            assert!(
                !d.effects
                    .iter()
                    .any(|e| matches!(e, Effect::AnnounceDs { .. })),
                "announced with children {}",
                child.len()
            );
            assert_eq!(z.state, Some(State::Enabling));
        }
    }
    // Child view lost entirely: same.
    let mut z = zone(Some(State::Enabling), Intent::Enabled);
    let mut o = w.obs(T0, Some(true), &[P::No], &[C::Serves]);
    o.child = Err("no delegation".into());
    let d = w.run(&mut z, &o);
    assert!(d.effects.is_empty());
}

#[test]
fn a_lagging_child_restarts_the_hold() {
    let w = World::new();
    let mut z = zone(Some(State::Enabling), Intent::Enabled);
    w.run(
        &mut z,
        &w.obs(T0, Some(true), &[P::No], &[C::Serves, C::Serves]),
    );
    let first = z.facts.lifecycle.hold_until.unwrap();
    w.run(
        &mut z,
        &w.obs(
            T0.plus(HOUR),
            Some(true),
            &[P::No],
            &[C::Serves, C::Refused],
        ),
    );
    assert_eq!(z.facts.lifecycle.hold_until, None);
    let t = T0.plus(HOUR * 2);
    w.run(
        &mut z,
        &w.obs(t, Some(true), &[P::No], &[C::Serves, C::Serves]),
    );
    assert!(z.facts.lifecycle.hold_until.unwrap() > first);
}

#[test]
fn a_lost_enable_call_is_asked_again() {
    let w = World::new();
    let mut z = zone(Some(State::Enabling), Intent::Enabled);
    let d = w.run(&mut z, &w.obs(T0, Some(false), &[P::No], &[C::Unsigned]));
    assert_eq!(d.effects, vec![Effect::EnableDnssec]);
}

#[test]
fn disable_path_end_to_end_with_the_ds_reappearing() {
    let w = World::new();
    let mut z = zone(Some(State::Active), Intent::Disabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    let serve = [C::Serves, C::Serves];

    let d = w.run(
        &mut z,
        &w.obs(T0, Some(true), &[P::Ds(3600), P::Ds(7200)], &serve),
    );
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert!(matches!(
        d.effects[..],
        [Effect::RequestDsRemoval { ds_line: Some(_) }]
    ));
    assert_eq!(z.facts.lifecycle.max_ds_ttl, Some(7200));

    // Removed at one server only; then one server silent: no progress either way.
    let t = T0.plus(HOUR);
    let d = w.run(&mut z, &w.obs(t, Some(true), &[P::No, P::Ds(7200)], &serve));
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    let d = w.run(&mut z, &w.obs(t, Some(true), &[P::No, P::Timeout], &serve));
    assert_eq!(
        d.state,
        Some(State::AwaitingDsRemoval),
        "a timeout is not 'gone'"
    );

    let d = w.run(&mut z, &w.obs(t, Some(true), &[P::No, P::No], &serve));
    assert_eq!(d.state, Some(State::TtlWait));
    assert_eq!(z.facts.lifecycle.t_gone, Some(t));
    assert_eq!(z.facts.lifecycle.max_dnskey_ttl, Some(300));
    let deadline = t.plus(Duration::from_secs(7200 + 300)).plus(HOUR);
    assert_eq!(
        disable_deadline(&z.facts.lifecycle, &w.policy),
        Some(deadline)
    );

    // The DS comes back: back to waiting for its removal, and T_gone is forgotten.
    let t2 = t.plus(HOUR);
    let d = w.run(&mut z, &w.obs(t2, Some(true), &[P::No, P::Ds(300)], &serve));
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert_eq!(z.facts.lifecycle.t_gone, None);
    assert_eq!(
        z.facts.lifecycle.max_ds_ttl,
        Some(7200),
        "the largest TTL seen is kept"
    );

    // ... even when seen at one server while the other cannot be asked: the wait must
    // count from when the DS was last published, not from the first "gone".
    let t2b = t2.plus(HOUR);
    w.run(&mut z, &w.obs(t2b, Some(true), &[P::No, P::No], &serve));
    assert_eq!(z.state, Some(State::TtlWait));
    let d = w.run(
        &mut z,
        &w.obs(
            t2b.plus(HOUR),
            Some(true),
            &[P::Timeout, P::Ds(300)],
            &serve,
        ),
    );
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert_eq!(z.facts.lifecycle.t_gone, None);

    let t3 = t2b.plus(HOUR * 2);
    w.run(&mut z, &w.obs(t3, Some(true), &[P::No, P::No], &serve));
    assert_eq!(z.state, Some(State::TtlWait));
    let deadline = t3.plus(Duration::from_secs(7200 + 300)).plus(HOUR);
    let minute_before = Timestamp(deadline.0 - 60_000);
    w.poll_until(&mut z, t3, minute_before, |t| {
        w.obs(t, Some(true), &[P::No, P::No], &serve)
    });
    // Unknown during the wait: no move; a minute before the deadline: no move.
    let d = w.run(
        &mut z,
        &w.obs(deadline, Some(true), &[P::No, P::Timeout], &serve),
    );
    assert_eq!(d.state, Some(State::TtlWait));
    let d = w.run(
        &mut z,
        &w.obs(minute_before, Some(true), &[P::No, P::No], &serve),
    );
    assert_eq!(d.state, Some(State::TtlWait));
    assert!(d.effects.is_empty());
    assert_eq!(d.wake_at, deadline);

    let d = w.run(
        &mut z,
        &w.obs(deadline, Some(true), &[P::No, P::No], &serve),
    );
    assert_eq!(d.state, Some(State::Disabling));
    assert_eq!(d.effects, vec![Effect::DisableDnssec]);

    // The provider has not switched yet: ask again; then it confirms.
    let d = w.run(
        &mut z,
        &w.obs(deadline, Some(true), &[P::No, P::No], &serve),
    );
    assert_eq!(d.effects, vec![Effect::DisableDnssec]);
    let d = w.run(
        &mut z,
        &w.obs(deadline, Some(false), &[P::No, P::No], &[C::Unsigned]),
    );
    assert_eq!(d.state, Some(State::Disabled));
    assert_eq!(
        z.facts.lifecycle.max_ds_ttl, None,
        "a new lifecycle starts clean"
    );
}

/// A switch-on overtaken by a disable before it was sent (its daemon paused, the intent
/// flipped): the provider never signed, so the end of the wait switches nothing off.
#[test]
fn an_enable_never_sent_ends_disabled_without_a_call() {
    let w = World::new();
    let mut z = zone(Some(State::Enabling), Intent::Disabled);
    let unsigned = [C::Unsigned];
    let d = w.run(&mut z, &w.obs(T0, Some(false), &[P::No, P::No], &unsigned));
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert!(d.effects.is_empty());
    let d = w.run(&mut z, &w.obs(T0, Some(false), &[P::No, P::No], &unsigned));
    assert_eq!(d.state, Some(State::TtlWait));
    let deadline = disable_deadline(&z.facts.lifecycle, &w.policy).expect("a deadline once gone");
    w.poll_until(&mut z, T0, deadline, |t| {
        w.obs(t, Some(false), &[P::No, P::No], &unsigned)
    });
    let d = w.run(
        &mut z,
        &w.obs(deadline, Some(false), &[P::No, P::No], &unsigned),
    );
    assert_eq!(d.state, Some(State::Disabled));
    assert!(d.effects.is_empty(), "{:?}", d.effects);

    // The provider cannot be asked at the deadline: the wait is over, the call waits
    // for an answer saying the zone is signed.
    let mut z = zone(Some(State::TtlWait), Intent::Disabled);
    z.facts.lifecycle.t_gone = Some(T0);
    let look = |t| w.obs(t, Some(true), &[P::No, P::No], &[C::Serves]);
    w.run(&mut z, &look(T0));
    let deadline = disable_deadline(&z.facts.lifecycle, &w.policy).expect("a deadline once gone");
    w.poll_until(&mut z, T0, deadline, look);
    let d = w.run(
        &mut z,
        &w.obs(deadline, None, &[P::No, P::No], &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::Disabling));
    assert!(d.effects.is_empty(), "{:?}", d.effects);
    let d = w.run(
        &mut z,
        &w.obs(deadline, Some(true), &[P::No, P::No], &[C::Serves]),
    );
    assert_eq!(d.effects, vec![Effect::DisableDnssec]);
}

#[test]
fn a_ds_reappearing_during_disabling_goes_back() {
    let w = World::new();
    let mut z = zone(Some(State::Disabling), Intent::Disabled);
    let d = w.run(
        &mut z,
        &w.obs(T0, Some(true), &[P::No, P::Ds(60)], &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert!(!d.effects.contains(&Effect::DisableDnssec));
}

/// Rule 2: `T_gone` stands only while looks keep confirming the DS gone. After longer
/// than `gone_confirmation_gap` without one (the daemon down, a parent server silent) a
/// DS may have come and gone unseen: the wait counts from the next confirming look, and
/// the history says why.
#[test]
fn a_gap_in_confirming_looks_restarts_the_disable_wait() {
    let w = World::new();
    let gap = w.policy.gone_confirmation_gap();
    let serve = [C::Serves];
    let look = |t| w.obs(t, Some(true), &[P::No, P::No], &serve);

    // Looks within the gap keep T_gone.
    let mut z = zone(Some(State::TtlWait), Intent::Disabled);
    z.facts.lifecycle.t_gone = Some(T0);
    w.run(&mut z, &look(T0));
    let deadline = disable_deadline(&z.facts.lifecycle, &w.policy).unwrap();
    w.poll_until(&mut z, T0, deadline, look);
    assert_eq!(z.facts.lifecycle.t_gone, Some(T0));
    let d = w.run(&mut z, &look(deadline));
    assert_eq!(d.state, Some(State::Disabling));

    // The daemon was down past the deadline: no switch-off, the wait starts again.
    let mut z = zone(Some(State::TtlWait), Intent::Disabled);
    z.facts.lifecycle.t_gone = Some(T0);
    w.run(&mut z, &look(T0));
    let deadline = disable_deadline(&z.facts.lifecycle, &w.policy).unwrap();
    let d = w.run(&mut z, &look(deadline));
    assert_eq!(d.state, Some(State::TtlWait));
    assert!(d.effects.is_empty(), "{:?}", d.effects);
    assert_eq!(z.facts.lifecycle.t_gone, Some(deadline));
    assert!(
        d.notes
            .iter()
            .any(|n| n.reason.contains("may have come and gone unseen")),
        "{:?}",
        d.notes
    );
    assert!(disable_deadline(&z.facts.lifecycle, &w.policy).unwrap() > deadline);

    // A silent parent server confirms nothing: the gap runs from the last look that did.
    let mut z = zone(Some(State::TtlWait), Intent::Disabled);
    z.facts.lifecycle.t_gone = Some(T0);
    w.run(&mut z, &look(T0));
    let silent = |t| w.obs(t, Some(true), &[P::No, P::Timeout], &serve);
    let mut at = T0;
    while at < T0.plus(gap) {
        at = at.plus(w.policy.poll_waiting);
        w.run(&mut z, &silent(at));
    }
    assert_eq!(z.facts.lifecycle.t_gone, Some(T0));
    w.run(&mut z, &look(at));
    assert_eq!(z.facts.lifecycle.t_gone, Some(at));

    // In `disabling`, before the provider said off: back to the wait, no call.
    let mut z = zone(Some(State::Disabling), Intent::Disabled);
    z.facts.lifecycle.t_gone = Some(T0);
    z.facts.lifecycle.gone_confirmed_at = Some(T0);
    let d = w.run(&mut z, &look(T0.plus(gap)));
    assert_eq!(d.state, Some(State::TtlWait));
    assert!(
        !d.effects.contains(&Effect::DisableDnssec),
        "{:?}",
        d.effects
    );
    // ... but a provider that says off is off: the zone is disabled.
    let mut z = zone(Some(State::Disabling), Intent::Disabled);
    z.facts.lifecycle.t_gone = Some(T0);
    z.facts.lifecycle.gone_confirmed_at = Some(T0);
    let d = w.run(
        &mut z,
        &w.obs(T0.plus(gap), Some(false), &[P::No, P::No], &[C::Unsigned]),
    );
    assert_eq!(d.state, Some(State::Disabled));
}

/// Rule 11 for rule 2's gap: looks that always come later than the gap restart the TTL
/// wait every time, so it never ends; the zone is held, and `wait_stalled` says why once
/// it lasts. Looks on time again end the wait and the alert.
#[test]
fn a_ttl_wait_restarted_at_every_look_is_said_and_ends_once_looks_are_on_time() {
    let w = World::new();
    let gap = w.policy.gone_confirmation_gap();
    let look = |t| w.obs(t, Some(true), &[P::No, P::No], &[C::Serves]);
    let mut z = zone(Some(State::TtlWait), Intent::Disabled);
    z.facts.lifecycle.t_gone = Some(T0);
    w.run(&mut z, &look(T0));
    let late = gap.saturating_add(w.policy.poll_waiting);
    let mut at = T0;
    let mut stalled = None;
    while at
        < T0.plus(
            w.policy
                .observation_failing_after
                .saturating_add(late.saturating_mul(2)),
        )
    {
        at = at.plus(late);
        let d = w.run(&mut z, &look(at));
        assert_eq!(
            d.state,
            Some(State::TtlWait),
            "never switched off on unconfirmed time"
        );
        assert!(d.effects.is_empty(), "{:?}", d.effects);
        stalled = stalled.or_else(|| firing(&d, AlertKind::WaitStalled).map(str::to_string));
    }
    let message = stalled.expect("wait_stalled fires while every look restarts the wait");
    assert!(message.contains("timing.poll_waiting"), "{message}");
    // Looks on time: the wait ends at its deadline, and the alert with the hold.
    let deadline = disable_deadline(&z.facts.lifecycle, &w.policy).unwrap();
    w.poll_until(&mut z, at, deadline, look);
    let d = w.run(&mut z, &look(deadline));
    assert_eq!(d.state, Some(State::Disabling));
    assert_eq!(firing(&d, AlertKind::WaitStalled), None);
}

#[test]
fn a_mismatching_ds_while_awaiting_is_alerted_and_nothing_else() {
    let w = World::new();
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    z.facts.lifecycle.ds_announced_at = Some(T0);
    let d = w.run(
        &mut z,
        &w.obs(T0, Some(true), &[P::WrongDs, P::WrongDs], &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::AwaitingDs));
    assert!(d.effects.is_empty());
    let message = firing(&d, AlertKind::DsMismatch).expect("ds_mismatch fires");
    assert!(
        message.contains(&provider_key(&w.key).ds_line().to_string()),
        "{message}"
    );
    // Corrected at the registrar: resolved, and the zone moves on.
    let d = w.run(
        &mut z,
        &w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &[C::Serves]),
    );
    assert_eq!(firing(&d, AlertKind::DsMismatch), None);
    assert!(judged(&d, AlertKind::DsMismatch));
    assert_eq!(d.state, Some(State::DsObserved));
}

#[test]
fn dnssec_off_behind_our_back_with_a_ds_is_critical_and_not_fixed_by_guessing() {
    let w = World::new();
    for intent in [Intent::None, Intent::Enabled] {
        for state in [State::Active, State::AwaitingDs, State::DsObserved] {
            let mut z = zone(Some(state), intent);
            z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
            let d = w.run(
                &mut z,
                &w.obs(T0, Some(false), &[P::Ds(60), P::No], &[C::Unsigned]),
            );
            // The state says what is true: the zone is back on the enable path.
            assert_eq!(d.state, Some(State::Enabling), "{state}, {intent}");
            let withdraw = state == State::AwaitingDs;
            assert_eq!(
                d.effects,
                if withdraw {
                    vec![Effect::RequestDsRemoval {
                        ds_line: z.facts.lifecycle.ds_line.clone(),
                    }]
                } else {
                    vec![]
                },
                "{state}: only a DS told 'to enter' is withdrawn at the registrar"
            );
            assert!(firing(&d, AlertKind::DnssecOffWithDs).is_some());
            assert_eq!(
                firing(&d, AlertKind::DsMismatch),
                None,
                "the specific alert, not both"
            );
            assert_eq!(AlertKind::DnssecOffWithDs.severity(), Severity::Critical);
            // Switched on again only on the operator's recorded word (rule 7).
            let d = w.run(
                &mut z,
                &w.obs(
                    T0.plus(HOUR),
                    Some(false),
                    &[P::Ds(60), P::No],
                    &[C::Unsigned],
                ),
            );
            assert_eq!(d.state, Some(State::Enabling));
            let expected = match intent {
                Intent::Enabled => vec![Effect::EnableDnssec],
                _ => vec![],
            };
            assert_eq!(d.effects, expected, "{state}, {intent}");
            let waiting = super::waiting::describe(&z, &w.policy);
            assert_eq!(
                waiting.on,
                if intent == Intent::Enabled {
                    "provider"
                } else {
                    "operator"
                }
            );
        }
    }
    // Off with the parent partly unknown and no DS seen: not cleared, not raised.
    let mut z = zone(Some(State::Disabled), Intent::None);
    let d = w.run(
        &mut z,
        &w.obs(T0, Some(false), &[P::No, P::Timeout], &[C::Unsigned]),
    );
    assert!(!judged(&d, AlertKind::DnssecOffWithDs));
}

/// Safety rule 8: a DS is shown, repeated or announced as "to enter" only while the
/// provider signs with that key and every child address serves it.
#[test]
fn a_ds_instruction_is_never_stale() {
    let w = World::new();
    let line = provider_key(&w.key).ds_line().to_string();
    let awaiting = || {
        let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
        z.facts.lifecycle.ds_line = Some(line.clone());
        z.facts.lifecycle.ds_announced_at = Some(T0);
        z
    };
    let late = T0.plus(HOUR * 25);
    let shows_ds = |z: &Zone, d: &Decision| {
        let waiting = super::waiting::describe(z, &w.policy).what;
        let alert = firing(d, AlertKind::DsUnpublishedOverdue).unwrap_or_default();
        z.facts.lifecycle.ds_to_enter.is_some() || waiting.contains(&line) || alert.contains(&line)
    };

    // Every child serves the key: the instruction stands, in status and in the alert.
    let mut z = awaiting();
    let d = w.run(
        &mut z,
        &w.obs(late, Some(true), &[P::No], &[C::Serves, C::Serves]),
    );
    assert_eq!(
        z.facts.lifecycle.ds_to_enter.as_deref(),
        Some(line.as_str())
    );
    let dnskey = z
        .facts
        .lifecycle
        .dnskey_to_enter
        .clone()
        .unwrap_or_default();
    assert!(
        dnskey.starts_with(&format!("{ZONE} IN DNSKEY 257 3 13 ")),
        "{dnskey}"
    );
    assert!(firing(&d, AlertKind::DsUnpublishedOverdue).is_some_and(|m| m.contains(&line)));

    // DNSSEC switched off at the provider: withdrawn at once, everywhere.
    let d = w.run(
        &mut z,
        &w.obs(late, Some(false), &[P::No], &[C::Unsigned, C::Unsigned]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    assert!(!shows_ds(&z, &d));
    assert_eq!(
        z.facts.lifecycle.dnskey_to_enter, None,
        "withdrawn with the DS"
    );
    assert_eq!(firing(&d, AlertKind::DsUnpublishedOverdue), None);
    assert!(
        judged(&d, AlertKind::DsUnpublishedOverdue),
        "the open alert is resolved"
    );
    assert!(d.notes.iter().any(|n| n.reason.contains("withdrawn")));
    assert_eq!(
        d.effects,
        vec![Effect::RequestDsRemoval {
            ds_line: Some(line.clone())
        }]
    );

    // A child server that stops serving the key: withdrawn too (back to the hold).
    let mut z = awaiting();
    let d = w.run(
        &mut z,
        &w.obs(late, Some(true), &[P::No], &[C::Serves, C::Unsigned]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    assert!(!shows_ds(&z, &d));

    // A child server that cannot be asked: not shown (nobody knows it serves the key),
    // but nothing is withdrawn on an unknown, and the overdue alert stays open.
    let mut z = awaiting();
    let d = w.run(
        &mut z,
        &w.obs(late, Some(true), &[P::No], &[C::Serves, C::Refused]),
    );
    assert_eq!(d.state, Some(State::AwaitingDs));
    assert!(d.effects.is_empty());
    assert!(!shows_ds(&z, &d));
    assert!(firing(&d, AlertKind::DsUnpublishedOverdue).is_some());

    // The provider re-keyed: the old DS is withdrawn.
    let mut z = awaiting();
    z.facts.lifecycle.ds_line = Some(provider_key(&w.other).ds_line().to_string());
    let d = w.run(&mut z, &w.obs(late, Some(true), &[P::No], &[C::Serves]));
    assert_eq!(d.state, Some(State::Enabling));
    assert!(matches!(
        d.effects.as_slice(),
        [Effect::RequestDsRemoval { .. }]
    ));

    // Active, the DS vanished, a child no longer serves the key: no announcement.
    let mut z = zone(Some(State::Active), Intent::None);
    z.facts.lifecycle.ds_line = Some(line.clone());
    let d = w.run(
        &mut z,
        &w.obs(T0, Some(true), &[P::No], &[C::Serves, C::Unsigned]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    assert!(d.effects.is_empty());
}

#[test]
fn dnssec_on_behind_our_back_follows_the_recorded_intent() {
    let w = World::new();
    // The operator asked for off: back off, the safe way (the DS check first).
    let mut z = zone(Some(State::Disabled), Intent::Disabled);
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::No], &[C::Serves]));
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert!(d.effects.is_empty());
    // No intent recorded: the zone is adopted as it now is.
    let mut z = zone(Some(State::Disabled), Intent::None);
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::No], &[C::Serves]));
    assert_eq!(d.state, Some(State::AwaitingDs));
    // ... but not on incomplete evidence, and without a note at every look.
    let mut z = zone(Some(State::Disabled), Intent::None);
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::Timeout], &[C::Serves]));
    assert_eq!(d.state, Some(State::Disabled));
    assert!(d.notes.is_empty());
}

#[test]
fn intent_flips_mid_way_are_explicit_transitions() {
    let w = World::new();
    let serve = [C::Serves];

    // Disable while awaiting the DS: it may be on its way, so wait for its removal.
    let mut z = zone(Some(State::AwaitingDs), Intent::Disabled);
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::No, P::No], &serve));
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert!(matches!(d.effects[..], [Effect::RequestDsRemoval { .. }]));

    // ... unless the operator states it was never submitted.
    let mut z = zone(Some(State::AwaitingDs), Intent::Disabled);
    z.ds_never_submitted = true;
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::No, P::No], &serve));
    assert_eq!(d.state, Some(State::TtlWait));
    assert_eq!(z.facts.lifecycle.t_gone, Some(T0));
    // ... and the parent does not contradict it.
    let mut z = zone(Some(State::AwaitingDs), Intent::Disabled);
    z.ds_never_submitted = true;
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::No, P::Ds(60)], &serve));
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    let mut z = zone(Some(State::AwaitingDs), Intent::Disabled);
    z.ds_never_submitted = true;
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::No, P::Timeout], &serve));
    assert_eq!(d.state, Some(State::AwaitingDs), "unknown: no shortcut");

    // Disable during enabling: the DS was never announced, so no removal request.
    let mut z = zone(Some(State::Enabling), Intent::Disabled);
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::No], &serve));
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert!(d.effects.is_empty());

    // Enable during the TTL wait: DNSSEC is still on; back through enabling.
    for state in [State::AwaitingDsRemoval, State::TtlWait, State::Disabling] {
        let mut z = zone(Some(state), Intent::Enabled);
        let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::No], &serve));
        assert_eq!(d.state, Some(State::Enabling), "{state}");
        assert_eq!(
            d.effects.contains(&Effect::EnableDnssec),
            state == State::Disabling
        );
    }
}

#[test]
fn adoption_by_observation() {
    let w = World::new();
    type Case = (Option<bool>, Vec<P>, Vec<C>, Option<State>);
    let cases: Vec<Case> = vec![
        (
            Some(true),
            vec![P::Ds(60), P::Ds(60)],
            vec![C::Serves],
            Some(State::Active),
        ),
        (
            Some(true),
            vec![P::No, P::No],
            vec![C::Serves],
            Some(State::AwaitingDs),
        ),
        (
            Some(true),
            vec![P::No, P::No],
            vec![C::Refused],
            Some(State::Enabling),
        ),
        (Some(true), vec![P::No, P::Timeout], vec![C::Serves], None),
        (
            Some(false),
            vec![P::No, P::No],
            vec![C::Unsigned],
            Some(State::Disabled),
        ),
        (
            Some(false),
            vec![P::Ds(60), P::No],
            vec![C::Unsigned],
            Some(State::Disabled),
        ),
        (None, vec![P::No], vec![C::Unsigned], None),
    ];
    for (on, parent, child, expected) in cases {
        let mut z = zone(None, Intent::None);
        let d = w.run(&mut z, &w.obs(T0, on, &parent, &child));
        assert_eq!(d.state, expected);
        if expected == Some(State::AwaitingDs) {
            assert!(matches!(d.effects[..], [Effect::AnnounceDs { .. }]));
        }
        if on == Some(false) && matches!(parent[0], P::Ds(_)) {
            assert!(
                firing(&d, AlertKind::DnssecOffWithDs).is_some(),
                "outage alert at once"
            );
        }
    }
}

#[test]
fn no_intent_starts_nothing() {
    let w = World::new();
    let mut z = zone(Some(State::Disabled), Intent::None);
    let d = w.run(&mut z, &w.obs(T0, Some(false), &[P::No], &[C::Unsigned]));
    assert_eq!(d.state, Some(State::Disabled));
    assert!(d.effects.is_empty());
    let mut z = zone(Some(State::Active), Intent::None);
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::Ds(60)], &[C::Serves]));
    assert_eq!(d.state, Some(State::Active));
    assert!(d.effects.is_empty());
    assert_eq!(d.wake_at, w.policy.next_settled_look(z.name.as_str(), T0));
    assert!(d.wake_at > T0 && d.wake_at <= T0.plus(w.policy.poll_active));
}

#[test]
fn overdue_alerts_fire_after_their_thresholds_and_resolve() {
    let w = World::new();
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    let line = provider_key(&w.key).ds_line().to_string();
    z.facts.lifecycle.ds_line = Some(line.clone());
    z.facts.lifecycle.ds_announced_at = Some(T0);
    let d = w.run(
        &mut z,
        &w.obs(T0.plus(HOUR * 23), Some(true), &[P::No], &[C::Serves]),
    );
    assert_eq!(firing(&d, AlertKind::DsUnpublishedOverdue), None);
    assert_eq!(d.wake_at, T0.plus(HOUR * 23).plus(w.policy.poll_waiting));
    let d = w.run(
        &mut z,
        &w.obs(T0.plus(HOUR * 24), Some(true), &[P::No], &[C::Serves]),
    );
    let message = firing(&d, AlertKind::DsUnpublishedOverdue).expect("overdue");
    assert!(message.contains(&line), "carries the DS line: {message}");
    let d = w.run(
        &mut z,
        &w.obs(T0.plus(HOUR * 25), Some(true), &[P::Ds(60)], &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::DsObserved));
    assert_eq!(firing(&d, AlertKind::DsUnpublishedOverdue), None);

    let mut z = zone(Some(State::AwaitingDsRemoval), Intent::Disabled);
    let d = w.run(
        &mut z,
        &w.obs(T0.plus(HOUR * 24), Some(true), &[P::Ds(60)], &[C::Serves]),
    );
    assert!(firing(&d, AlertKind::DsRemovalOverdue).is_some());
    let d = w.run(
        &mut z,
        &w.obs(T0.plus(HOUR * 25), Some(true), &[P::No], &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::TtlWait));
    assert_eq!(firing(&d, AlertKind::DsRemovalOverdue), None);
}

#[test]
fn partial_propagation_stuck_and_observation_failing() {
    let w = World::new();
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    let d = w.run(
        &mut z,
        &w.obs(T0, Some(true), &[P::Ds(60), P::No], &[C::Serves]),
    );
    assert_eq!(firing(&d, AlertKind::PartialPropagationStuck), None);
    let d = w.run(
        &mut z,
        &w.obs(
            T0.plus(HOUR * 6),
            Some(true),
            &[P::Ds(60), P::No],
            &[C::Serves],
        ),
    );
    assert!(firing(&d, AlertKind::PartialPropagationStuck).is_some());
    let d = w.run(
        &mut z,
        &w.obs(
            T0.plus(HOUR * 7),
            Some(true),
            &[P::Ds(60), P::Ds(60)],
            &[C::Serves],
        ),
    );
    assert_eq!(firing(&d, AlertKind::PartialPropagationStuck), None);

    let mut z = zone(Some(State::TtlWait), Intent::Disabled);
    z.facts.lifecycle.t_gone = Some(T0);
    let d = w.run(&mut z, &w.obs(T0, None, &[P::No], &[C::Serves]));
    assert_eq!(z.facts.health.failures, 1);
    assert_eq!(
        d.wake_at,
        T0.plus(w.policy.retry_base),
        "backoff after a failure"
    );
    assert_eq!(d.state, Some(State::TtlWait));
    w.run(
        &mut z,
        &w.obs(T0.plus(HOUR / 2), Some(true), &[P::Timeout], &[C::Serves]),
    );
    let d = w.run(
        &mut z,
        &w.obs(T0.plus(HOUR), Some(true), &[P::Timeout], &[C::Serves]),
    );
    assert!(firing(&d, AlertKind::ObservationFailing).is_some());
    let d = w.run(
        &mut z,
        &w.obs(T0.plus(HOUR), Some(true), &[P::No], &[C::Serves]),
    );
    assert_eq!(firing(&d, AlertKind::ObservationFailing), None);
    assert_eq!(z.facts.health.failures, 0);
}

#[test]
fn signatures_near_expiry_are_reported() {
    let w = World::new();
    let mut z = zone(Some(State::Active), Intent::None);
    let mut o = w.obs(T0, Some(true), &[P::Ds(60)], &[C::Serves]);
    if let Ok(child) = &mut o.child
        && let DnskeyAnswer::Keys(k) = &mut child.answers[0].answer
    {
        k.signatures[0].expiration = u32::try_from(T0.unix_secs() + 86_400).unwrap();
    }
    let d = w.run(&mut z, &o);
    assert!(firing(&d, AlertKind::SignaturesExpiring).is_some());
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::Ds(60)], &[C::Serves]));
    assert_eq!(firing(&d, AlertKind::SignaturesExpiring), None);
}

#[test]
fn a_provider_rekey_restarts_the_announcement() {
    let w = World::new();
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.other).ds_line().to_string());
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::No], &[C::Serves]));
    assert_eq!(d.state, Some(State::Enabling));
}

#[test]
fn the_guard_refuses_unless_every_address_says_gone_and_the_ttl_passed() {
    let w = World::new();
    let policy = Policy::default();
    let facts = Facts {
        lifecycle: LifecycleFacts {
            t_gone: Some(T0),
            max_ds_ttl: Some(7200),
            max_dnskey_ttl: Some(300),
            ..LifecycleFacts::default()
        },
        delegation: DelegationFacts {
            // Once delegated to the provider everywhere: no delegation to prove.
            seen_at_provider: true,
            ..DelegationFacts::default()
        },
        ..Facts::default()
    };
    // A resolver may hold the DS for its TTL, then the DNSKEY it validated for its own.
    let after = T0.plus(Duration::from_secs(7200 + 300)).plus(HOUR);
    let ok = Ok(w.parent(&[P::No, P::No]));
    assert_eq!(may_disable(&ok, &facts, after, &policy), Ok(()));
    assert!(matches!(
        may_disable(&ok, &facts, Timestamp(after.0 - 1), &policy),
        Err(GuardRefusal::TooEarly { .. })
    ));
    assert!(matches!(
        may_disable(&Ok(w.parent(&[P::No, P::Ds(60)])), &facts, after, &policy),
        Err(GuardRefusal::DsPresent { .. })
    ));
    assert!(matches!(
        may_disable(&Ok(w.parent(&[P::No, P::Timeout])), &facts, after, &policy),
        Err(GuardRefusal::ParentUnknown { .. })
    ));
    assert!(matches!(
        may_disable(&Ok(w.parent(&[])), &facts, after, &policy),
        Err(GuardRefusal::NoParentServers)
    ));
    assert!(matches!(
        may_disable(&Err("no parent".into()), &facts, after, &policy),
        Err(GuardRefusal::ParentUnobservable(_))
    ));
    assert_eq!(
        may_disable(&ok, &Facts::default(), after, &policy),
        Err(GuardRefusal::NoTGone)
    );
}

/// DESIGN.md "Moving in": a zone never delegated to the provider's name servers at every
/// parent address is switched off only if every address delegates to them at the guard's
/// look. A parent server can answer the DS and not the NS (asked apart): its delegation
/// is unknown, and unknown never counts (rule 3).
#[test]
fn the_guard_refuses_a_zone_never_delegated_to_the_provider_unless_every_address_is() {
    let w = World::new();
    let policy = Policy::default();
    let facts = Facts {
        lifecycle: LifecycleFacts {
            t_gone: Some(T0),
            max_ds_ttl: Some(7200),
            max_dnskey_ttl: Some(300),
            ..LifecycleFacts::default()
        },
        delegation: DelegationFacts {
            provider_ns: Some(vec![OURS.into()]),
            seen_at_provider: false,
            ..DelegationFacts::default()
        },
        ..Facts::default()
    };
    let after = T0.plus(Duration::from_secs(7200 + 300)).plus(HOUR);
    let no = [P::No, P::No];
    let look = |deleg: &[D]| Ok(w.parent_delegating(&no, deleg));
    for (i, deleg) in [[D::Ours, D::Lost], [D::Ours, D::Old], [D::Old, D::Old]]
        .iter()
        .enumerate()
    {
        assert!(
            matches!(
                may_disable(&look(deleg), &facts, after, &policy),
                Err(GuardRefusal::NotDelegatedHere(_))
            ),
            "delegation case {i}"
        );
    }
    let unknown = may_disable(&look(&[D::Ours, D::Lost]), &facts, after, &policy)
        .unwrap_err()
        .to_string();
    assert!(unknown.contains("ns2.test."), "{unknown}");
    assert_eq!(
        may_disable(&look(&[D::Ours, D::Ours]), &facts, after, &policy),
        Ok(())
    );
    // The provider's name servers not known: nothing is the provider's.
    let mut unlisted = facts.clone();
    unlisted.delegation.provider_ns = None;
    assert!(matches!(
        may_disable(&look(&[D::Ours, D::Ours]), &unlisted, after, &policy),
        Err(GuardRefusal::NotDelegatedHere(_))
    ));
}

#[test]
fn a_failed_registrar_hook_alerts_while_the_registrar_is_awaited() {
    let w = World::new();
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    let mut o = w.obs(T0, Some(true), &[P::No], &[C::Serves]);
    o.registrar_hook_failed = Some("exit status: 3".into());
    let d = w.run(&mut z, &o);
    let message = firing(&d, AlertKind::RegistrarHookFailed).expect("fires");
    assert!(
        message.contains("exit status: 3") && message.contains(" IN DS "),
        "{message}"
    );
    // The DS got there anyway (by hand): the zone moves on and the alert resolves.
    o.parent = Ok(w.parent(&[P::Ds(60)]));
    let d = w.run(&mut z, &o);
    assert_eq!(d.state, Some(State::DsObserved));
    assert_eq!(firing(&d, AlertKind::RegistrarHookFailed), None);
    assert!(judged(&d, AlertKind::RegistrarHookFailed));
}

#[test]
fn no_hold_starts_while_the_zones_largest_ttl_is_unknown() {
    let w = World::new();
    let mut z = zone(Some(State::Enabling), Intent::Enabled);
    let mut obs = w.obs(T0, Some(true), &[P::No], &[C::Serves]);
    obs.zone_max_ttl = None;
    let d = w.run(&mut z, &obs);
    assert_eq!(
        d.facts.lifecycle.hold_until, None,
        "a hold too short for the zone's TTLs"
    );
    let d = w.run(&mut z, &w.obs(T0, Some(true), &[P::No], &[C::Serves]));
    assert!(d.facts.lifecycle.hold_until.is_some());
}

/// Every child address unknown (silent, REFUSED, lame, no address) is
/// no evidence against the parent's DS: `ds_mismatch` is neither fired nor cleared.
#[test]
fn a_child_outage_neither_fires_nor_clears_ds_mismatch() {
    let w = World::new();
    for parent in [[P::Ds(60), P::Ds(60)], [P::WrongDs, P::WrongDs]] {
        for state in [State::Active, State::AwaitingDs, State::DsObserved] {
            let mut z = zone(Some(state), Intent::Enabled);
            z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
            let d = w.run(
                &mut z,
                &w.obs(T0, Some(true), &parent, &[C::Refused, C::Refused]),
            );
            assert!(
                !judged(&d, AlertKind::DsMismatch),
                "{state}: judged on no child evidence: {:?}",
                d.alerts
            );
        }
    }
    // The child view could not be built at all: the same.
    let mut z = zone(Some(State::Active), Intent::Enabled);
    let mut o = w.obs(T0, Some(true), &[P::WrongDs, P::WrongDs], &[]);
    o.child = Err("cannot observe child.test.: timeout".into());
    let d = w.run(&mut z, &o);
    assert!(!judged(&d, AlertKind::DsMismatch), "{:?}", d.alerts);
    // One child address answers with its key: a wrong DS is certain, and fires.
    let mut z = zone(Some(State::Active), Intent::Enabled);
    let d = w.run(
        &mut z,
        &w.obs(
            T0,
            Some(true),
            &[P::WrongDs, P::WrongDs],
            &[C::Serves, C::Refused],
        ),
    );
    assert!(
        firing(&d, AlertKind::DsMismatch).is_some(),
        "{:?}",
        d.alerts
    );
}

/// A DS set of only unsupported digest types or algorithms makes the
/// zone insecure to validators: a warning (`ds_unsupported`), never the critical
/// `ds_mismatch`; cleared once the DS is usable.
#[test]
fn a_ds_nothing_supports_is_a_warning_not_a_mismatch() {
    let w = World::new();
    let mut z = zone(Some(State::Active), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    let d = w.run(
        &mut z,
        &w.obs(
            T0,
            Some(true),
            &[P::UnsupportedDs, P::UnsupportedDs],
            &[C::Serves],
        ),
    );
    assert_eq!(firing(&d, AlertKind::DsMismatch), None, "{:?}", d.alerts);
    let message = firing(&d, AlertKind::DsUnsupported).expect("ds_unsupported fires");
    assert!(message.contains("insecure"), "{message}");
    assert_eq!(AlertKind::DsUnsupported.severity(), Severity::Warning);
    let d = w.run(
        &mut z,
        &w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &[C::Serves]),
    );
    assert!(judged(&d, AlertKind::DsUnsupported));
    assert_eq!(firing(&d, AlertKind::DsUnsupported), None);
}

#[test]
fn alert_judgement_is_pure_and_step_applies_it() {
    let w = World::new();
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    let obs = w.obs(T0, Some(true), &[P::Ds(60), P::No], &[C::Serves]);
    let facts = z.facts.clone();
    let j = judge(&z, z.state, &facts, &obs, &w.policy);
    // Parent servers disagree: the episode starts now, stuck after the threshold.
    assert_eq!(j.partial_since, Some(T0));
    assert!(j.deadlines.contains(&T0.plus(w.policy.partial_stuck_after)));
    assert!(
        j.checks
            .contains(&AlertCheck::clear(AlertKind::PartialPropagationStuck))
    );
    assert_eq!(facts, z.facts, "judge reads the facts, never writes them");
    let d = step(&z, &obs, &w.policy);
    assert_eq!(d.facts.health.partial_since, j.partial_since);
    assert_eq!(d.alerts, j.checks);
    assert!(d.wake_at <= T0.plus(w.policy.partial_stuck_after));

    // Agreement ends the episode; an unknown parent keeps it.
    let mut z2 = z.clone();
    z2.facts.health.partial_since = Some(T0);
    let agreed = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &[C::Serves]);
    assert_eq!(
        judge(&z2, z2.state, &z2.facts, &agreed, &w.policy).partial_since,
        None
    );
    let unknown = w.obs(T0, Some(true), &[P::Ds(60), P::Timeout], &[C::Serves]);
    assert_eq!(
        judge(&z2, z2.state, &z2.facts, &unknown, &w.policy).partial_since,
        Some(T0)
    );
}

/// The summary kept of each observation (`engine::summarize`, written straight to text)
/// says what the JSON tree it replaced said, for every kind of answer.
#[test]
fn the_observation_summary_says_what_the_tree_said() {
    use serde_json::json;
    fn tree(obs: &Observation) -> serde_json::Value {
        let provider = match &obs.provider {
            ProviderView::On(key) => json!({"dnssec": "on", "ds": key.ds_line().to_string()}),
            ProviderView::Off => json!({"dnssec": "off"}),
            ProviderView::Missing => json!({"dnssec": "not_found"}),
            ProviderView::Unknown(e) => json!({"dnssec": "unknown", "error": e}),
        };
        let parent = match &obs.parent {
            Ok(view) => serde_json::to_value(view).unwrap(),
            Err(e) => json!({"error": e}),
        };
        let child = match &obs.child {
            Ok(view) => json!(view.answers.iter().map(|a| json!({
                "server": a.server,
                "addr": a.addr.to_string(),
                "answer": match &a.answer {
                    DnskeyAnswer::Keys(k) => json!({
                        "keys": k.keys.iter().map(|key| format!("{} {} tag {}", key.flags, key.algorithm, key.key_tag())).collect::<Vec<_>>(),
                        "ttl": k.ttl,
                        "signed": k.signed,
                        "signed_by": k.self_signers.iter().map(|i| k.keys[*i].key_tag()).collect::<Vec<_>>(),
                    }),
                    DnskeyAnswer::Absent => json!("no DNSKEY"),
                    DnskeyAnswer::Unknown(r) => json!(format!("unknown: {r}")),
                },
            })).collect::<Vec<_>>()),
            Err(e) => json!({"error": e}),
        };
        json!({
            "at": obs.at.to_string(),
            "provider": provider,
            "delegation": &obs.delegation,
            "parent": parent,
            "child": child,
            "validation": obs.validation.to_string(),
        })
    }
    let w = World::new();
    let mut cases = vec![
        w.obs(
            T0,
            Some(true),
            &[P::Ds(3600), P::No],
            &[C::Serves, C::OldKey],
        ),
        w.obs(
            T0,
            Some(false),
            &[P::Timeout, P::WrongDs],
            &[C::Unsigned, C::Refused],
        ),
        w.obs(T0, None, &[P::UnsupportedDs], &[]),
    ];
    let mut failed = w.obs(T0, None, &[], &[]);
    failed.provider = ProviderView::Missing;
    failed.parent = Err("no parent server answered".into());
    failed.child = Err("the child's servers \"quoted\"".into());
    failed.validation = ValidationVerdict::Secure;
    cases.push(failed);
    for obs in &cases {
        let text = crate::engine::summarize(obs, None);
        let read: serde_json::Value = serde_json::from_str(&text.whole).unwrap();
        assert_eq!(read, tree(obs), "{}", text.whole);
        // The brief `status` and the steps read is the whole's provider part and parent
        // evidence, as cut out of the whole.
        let brief: serde_json::Value = serde_json::from_str(&text.brief).unwrap();
        let cut = crate::store::ObservationText::from_whole(text.whole.clone()).brief;
        let cut: serde_json::Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(brief, cut, "{}", text.brief);
        assert_eq!(brief["provider"]["dnssec"], read["provider"]["dnssec"]);
        assert_eq!(brief["provider"]["error"], read["provider"]["error"]);
        assert_eq!(brief["parent"]["evidence"], read["parent"]["evidence"]);
    }
}

/// Safety rule 4: a key in every child's DNSKEY set but without a
/// valid signature by it over the set is not "served": no hold, no DS announced, and
/// the wait names the server and what is wrong with it.
#[test]
fn a_key_served_without_a_valid_self_signature_is_never_announced() {
    let w = World::new();
    let mut z = zone(Some(State::Enabling), Intent::Enabled);
    for children in [
        &[C::ServesUnsigned, C::ServesUnsigned][..],
        &[C::Serves, C::ServesUnsigned][..],
    ] {
        for hours in [0, 48] {
            let at = T0.plus(std::time::Duration::from_secs(hours * 3600));
            let d = w.run(&mut z, &w.obs(at, Some(true), &[P::No, P::No], children));
            assert_eq!(d.state, Some(State::Enabling));
            assert_eq!(
                d.facts.lifecycle.hold_until, None,
                "no hold on an unsigned key"
            );
            assert!(d.effects.is_empty(), "{:?}", d.effects);
            assert!(
                d.notes.iter().all(|n| !n.reason.contains("serves key")),
                "{:?}",
                d.notes
            );
            let waiting = super::waiting::describe(&z, &w.policy);
            assert!(
                waiting.what.contains("without any signature"),
                "{}",
                waiting.what
            );
            assert_eq!(waiting.on, "provider");
            let stalled = firing(&d, AlertKind::WaitStalled);
            if hours == 0 {
                assert_eq!(stalled, None);
            } else {
                let message = stalled.expect("a wait that lasts is alerted");
                assert!(message.contains("without any signature"), "{message}");
            }
        }
    }
    // Announced, then the signatures go: the instruction is withdrawn (rule 8).
    let mut z = zone(Some(State::Enabling), Intent::Enabled);
    let serves = [C::Serves, C::Serves];
    w.run(&mut z, &w.obs(T0, Some(true), &[P::No, P::No], &serves));
    let later = T0.plus(std::time::Duration::from_secs(3 * 3600));
    let d = w.run(&mut z, &w.obs(later, Some(true), &[P::No, P::No], &serves));
    assert_eq!(d.state, Some(State::AwaitingDs));
    let d = w.run(
        &mut z,
        &w.obs(
            later,
            Some(true),
            &[P::No, P::No],
            &[C::Serves, C::ServesUnsigned],
        ),
    );
    assert_eq!(d.state, Some(State::Enabling), "{:?}", d.notes);
    assert!(d.notes[0].reason.contains("withdrawn"), "{:?}", d.notes);
    assert_eq!(d.facts.lifecycle.ds_to_enter, None);
}

/// `active` means validated `secure` where the parent is signed;
/// unknown or insecure keep the zone in `ds_observed` (named, alerted when it lasts);
/// an unsigned parent settles, said as such, never as "chain of trust complete".
#[test]
fn active_needs_secure_under_a_signed_parent() {
    let w = World::new();
    let ds = [P::Ds(3600), P::Ds(3600)];
    let serves = [C::Serves, C::Serves];
    for verdict in [ValidationVerdict::Unknown, ValidationVerdict::Insecure] {
        let mut z = zone(Some(State::DsObserved), Intent::Enabled);
        z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
        let mut o = w.obs(T0, Some(true), &ds, &serves);
        o.validation = verdict;
        let d = w.run(&mut z, &o);
        assert_eq!(d.state, Some(State::DsObserved), "{verdict}: {:?}", d.notes);
        assert_eq!(firing(&d, AlertKind::WaitStalled), None);
        let waiting = super::waiting::describe(&z, &w.policy);
        assert!(
            waiting.what.contains(&format!("validation says {verdict}")),
            "{}",
            waiting.what
        );
        // Lasting past `observation_failing_after`: alerted.
        o.at = T0.plus(w.policy.observation_failing_after);
        let d = w.run(&mut z, &o);
        assert_eq!(d.state, Some(State::DsObserved));
        assert!(firing(&d, AlertKind::WaitStalled).is_some());
        o.validation = ValidationVerdict::Secure;
        let d = w.run(&mut z, &o);
        assert_eq!(d.state, Some(State::Active));
        assert!(d.notes[0].reason.starts_with("chain of trust complete"));
        assert!(!d.notes[0].reason.contains("insecure"));
        assert!(judged(&d, AlertKind::WaitStalled));
        assert_eq!(firing(&d, AlertKind::WaitStalled), None);
    }
    // An unsigned parent: settled without a chain, and said so.
    let mut z = zone(Some(State::DsObserved), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    let mut o = w.obs(T0, Some(true), &ds, &serves);
    o.validation = ValidationVerdict::Insecure;
    if let Ok(p) = &mut o.parent {
        p.evidence = crate::dns::Evidence::Insecure("test. has no DS at its parent".into());
    }
    let d = w.run(&mut z, &o);
    assert_eq!(d.state, Some(State::Active));
    assert!(!d.notes[0].reason.contains("chain of trust complete"));
    assert!(d.notes[0].reason.contains("is not signed"), "{:?}", d.notes);
    // A key no longer signed holds the zone in `ds_observed` whatever validation says.
    let mut z = zone(Some(State::DsObserved), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    let mut o = w.obs(T0, Some(true), &ds, &[C::Serves, C::ServesUnsigned]);
    o.validation = ValidationVerdict::Secure;
    let d = w.run(&mut z, &o);
    assert_eq!(d.state, Some(State::DsObserved));
}

/// The provider deleted the zone while the parent delegates to its
/// name servers: critical, named as what it is, and the wait says so.
#[test]
fn a_zone_missing_at_the_provider_under_its_delegation_is_critical() {
    let w = World::new();
    let mut z = zone(Some(State::Active), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    let mut o = w.obs(
        T0,
        Some(true),
        &[P::Ds(3600), P::Ds(3600)],
        &[C::Refused, C::Refused],
    );
    o.provider = ProviderView::Missing;
    let d = w.run(&mut z, &o);
    let message = firing(&d, AlertKind::ZoneMissingAtProvider).expect("fires at once");
    assert!(message.contains("does not resolve at all"), "{message}");
    assert!(message.contains("also publishes DS"), "{message}");
    assert_eq!(
        AlertKind::ZoneMissingAtProvider.severity(),
        super::alerts::Severity::Critical
    );
    let waiting = super::waiting::describe(&z, &w.policy);
    assert!(waiting.what.contains("has no zone"), "{}", waiting.what);
    assert_eq!(waiting.on, "provider");
    // Back at the provider: resolved.
    let d = w.run(
        &mut z,
        &w.obs(
            T0,
            Some(true),
            &[P::Ds(3600), P::Ds(3600)],
            &[C::Serves, C::Serves],
        ),
    );
    assert!(judged(&d, AlertKind::ZoneMissingAtProvider));
    assert_eq!(firing(&d, AlertKind::ZoneMissingAtProvider), None);
    assert_eq!(d.facts.wait.held_by, None);
}

/// Every wait names what really holds it: the failing RRset listing
/// (and the observation counts as incomplete, so `observation_failing` follows), and a
/// provider whose DS does not match its own key.
#[test]
fn a_wait_names_the_call_that_holds_it() {
    let w = World::new();
    let mut z = zone(Some(State::Enabling), Intent::Enabled);
    let mut obs = w.obs(T0, Some(true), &[P::No], &[C::Serves]);
    obs.zone_max_ttl = None;
    obs.zone_ttl_error = Some("the provider's RRset listing failed: HTTP 404".into());
    let d = w.run(&mut z, &obs);
    assert_eq!(d.facts.lifecycle.hold_until, None);
    assert_eq!(d.facts.health.failures, 1, "an incomplete observation");
    let waiting = super::waiting::describe(&z, &w.policy);
    assert!(
        waiting.what.contains("RRset listing failed: HTTP 404"),
        "{}",
        waiting.what
    );
    assert_eq!(waiting.on, "provider");
    obs.at = T0.plus(w.policy.observation_failing_after);
    let d = w.run(&mut z, &obs);
    let message = firing(&d, AlertKind::ObservationFailing).expect("alerted when it lasts");
    assert!(message.contains("RRset listing failed"), "{message}");

    // `awaiting_ds` with the provider's DS failing its own key (rule 5): named.
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    let mut obs = w.obs(T0, None, &[P::No, P::No], &[C::Serves, C::Serves]);
    obs.provider = ProviderView::Unknown(
        "the provider's DS does not match its own key (safety rule 5)".into(),
    );
    w.run(&mut z, &obs);
    let waiting = super::waiting::describe(&z, &w.policy);
    assert!(
        waiting.what.contains("does not match its own key"),
        "{}",
        waiting.what
    );
    assert_eq!(waiting.on, "provider");
    assert!(
        !waiting.what.contains("can be seen serving"),
        "{}",
        waiting.what
    );
}

/// A DS told "to enter" (or still owed after a crash) while the provider cannot be asked:
/// a name server that answers without the announced key, validly signed, withdraws it
/// (safety rules 4 and 8); one that only cannot be asked does not.
#[test]
fn an_announced_key_not_served_is_withdrawn_while_the_provider_cannot_be_asked() {
    let w = World::new();
    let announced = || {
        let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
        z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
        z
    };
    let mut z = announced();
    let d = w.run(
        &mut z,
        &w.obs(T0, None, &[P::No, P::No], &[C::Serves, C::Refused]),
    );
    assert_eq!(d.state, Some(State::AwaitingDs), "unknown is no evidence");
    for lacking in [C::Unsigned, C::ServesUnsigned, C::OldKey] {
        let mut z = announced();
        let what = format!("{lacking:?}");
        let d = w.run(
            &mut z,
            &w.obs(T0, None, &[P::No, P::No], &[C::Serves, lacking]),
        );
        assert_eq!(d.state, Some(State::Enabling), "{what}: {:?}", d.notes);
        assert!(d.notes[0].reason.contains("withdrawn"), "{:?}", d.notes);
        assert!(
            d.effects
                .iter()
                .any(|e| matches!(e, Effect::RequestDsRemoval { .. })),
            "{:?}",
            d.effects
        );
    }
}
