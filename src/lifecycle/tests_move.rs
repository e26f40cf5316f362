//! Moving a zone between providers (DESIGN.md section 2, safety rule 9): the move in's
//! safe order, the delegation hold, and the alerts of a move done in the wrong order.

use std::time::Duration;

use super::rules::delegation_hold_until;
use super::tests::{C, D, HOUR, OLD, OURS, P, T0, World, ZONE, firing, judged, provider_key, zone};
use super::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

impl World {
    /// An observation with each parent address's delegation given.
    fn obs_delegating(
        &self,
        at: Timestamp,
        on: Option<bool>,
        parent: &[P],
        deleg: &[D],
        child: &[C],
    ) -> Observation {
        let mut obs = self.obs(at, on, parent, child);
        obs.parent = Ok(self.parent_delegating(parent, deleg));
        obs.assessed()
    }
}

fn critical_alerts(d: &Decision) -> Vec<AlertKind> {
    d.alerts
        .iter()
        .filter(|c| c.firing.is_some() && c.kind.severity() == Severity::Critical)
        .map(|c| c.kind)
        .collect()
}

fn any_firing(d: &Decision) -> Vec<AlertKind> {
    d.alerts
        .iter()
        .filter(|c| c.firing.is_some())
        .map(|c| c.kind)
        .collect()
}

/// The whole move in, with the old provider's DS at the parent: the DS goes first (named
/// exactly), its TTL is waited out without any provider call, then the NS; the provider's
/// DS is announced only after `T_delegated + old NS TTL + margin`.
#[test]
fn moving_in_walks_the_safe_order() {
    let w = World::new();
    let old = [D::Old, D::Old];
    let old_ds = [P::WrongDs, P::WrongDs];
    let mut z = zone(Some(State::Disabled), Intent::Enabled);

    let d = w.run(
        &mut z,
        &w.obs_delegating(T0, Some(false), &old_ds, &old, &[C::OldKey]),
    );
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert!(z.facts.move_in.moving_in);
    let old_line = w
        .other
        .to_ds(ZONE, crate::dnssec::DigestType::Sha256)
        .unwrap();
    match &d.effects[..] {
        [Effect::RequestDsRemoval { ds_line: Some(l) }] => {
            assert!(l.contains(&old_line.to_string()), "{l}")
        }
        other => panic!("{other:?}"),
    }
    assert!(
        any_firing(&d).is_empty(),
        "a healthy foreign zone: {:?}",
        any_firing(&d)
    );
    assert_eq!(z.facts.delegation.old_ns, vec![OLD.to_string()]);
    assert_eq!(z.facts.delegation.old_ns_ttl, Some(7200));
    let waiting = super::waiting::describe(&z, &w.policy);
    assert!(
        waiting.what.contains(&old_line.to_string()),
        "status names the DS to remove: {}",
        waiting.what
    );

    // The intent is `enabled`, yet nothing switches on while the DS goes.
    let t1 = T0.plus(HOUR);
    let d = w.run(
        &mut z,
        &w.obs_delegating(t1, Some(false), &[P::No, P::No], &old, &[C::OldKey]),
    );
    assert_eq!(d.state, Some(State::TtlWait));
    assert!(d.effects.is_empty());
    let deadline = disable_deadline(&z.facts.lifecycle, &w.policy).unwrap();
    assert_eq!(deadline, t1.plus(secs(3600 + 900)).plus(HOUR));
    w.poll_until(&mut z, t1, deadline, |t| {
        w.obs_delegating(t, Some(false), &[P::No, P::No], &old, &[C::OldKey])
    });

    let d = w.run(
        &mut z,
        &w.obs_delegating(deadline, Some(false), &[P::No, P::No], &old, &[C::OldKey]),
    );
    assert_eq!(d.state, Some(State::AwaitingDelegation));
    assert_eq!(
        d.effects,
        vec![Effect::RequestDelegation {
            name_servers: vec![OURS.to_string()]
        }]
    );
    let waiting = super::waiting::describe(&z, &w.policy);
    assert!(waiting.what.contains(OURS), "{}", waiting.what);
    assert_eq!(waiting.on, "registrar");

    // One parent server re-delegated: mixed, not complete.
    let t2 = deadline.plus(HOUR);
    let d = w.run(
        &mut z,
        &w.obs_delegating(
            t2,
            Some(false),
            &[P::No, P::No],
            &[D::Ours, D::Old],
            &[C::Unsigned],
        ),
    );
    assert_eq!(d.state, Some(State::AwaitingDelegation));
    assert_eq!(
        z.facts.delegation.verdict,
        Some(crate::dns::DelegationVerdict::Mixed)
    );
    assert_eq!(z.facts.delegation.delegated_at, None);
    // An unknown answer never completes it.
    let d = w.run(
        &mut z,
        &w.obs_delegating(
            t2,
            Some(false),
            &[P::No, P::No],
            &[D::Ours, D::Lost],
            &[C::Unsigned],
        ),
    );
    assert_eq!(d.state, Some(State::AwaitingDelegation));

    // Both: T_delegated, and on to the enable path.
    let t3 = t2.plus(HOUR);
    let ours = [D::Ours, D::Ours];
    let d = w.run(
        &mut z,
        &w.obs_delegating(t3, Some(false), &[P::No, P::No], &ours, &[C::Unsigned]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    assert_eq!(z.facts.delegation.delegated_at, Some(t3));
    assert!(!z.facts.move_in.moving_in);
    let d = w.run(
        &mut z,
        &w.obs_delegating(t3, Some(false), &[P::No, P::No], &ours, &[C::Unsigned]),
    );
    assert_eq!(d.effects, vec![Effect::EnableDnssec]);

    // Served everywhere at once: the usual hold (600 s + margin) ends before the
    // delegation hold (old NS TTL 7200 s + margin): no DS before the latter.
    let d = w.run(
        &mut z,
        &w.obs_delegating(t3, Some(true), &[P::No, P::No], &ours, &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    let usual = z.facts.lifecycle.hold_until.unwrap();
    let rule9 = t3.plus(secs(7200)).plus(HOUR);
    assert!(usual < rule9);
    let d = w.run(
        &mut z,
        &w.obs_delegating(usual, Some(true), &[P::No, P::No], &ours, &[C::Serves]),
    );
    assert_eq!(
        d.state,
        Some(State::Enabling),
        "not before the old delegation expired"
    );
    assert!(d.effects.is_empty());
    assert_eq!(z.facts.lifecycle.ds_to_enter, None);
    assert_eq!(d.wake_at, rule9.min(usual.plus(w.policy.poll_waiting)));
    let waiting = super::waiting::describe(&z, &w.policy);
    assert_eq!(waiting.until, Some(rule9), "{waiting:?}");

    let d = w.run(
        &mut z,
        &w.obs_delegating(rule9, Some(true), &[P::No, P::No], &ours, &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::AwaitingDs));
    assert!(matches!(d.effects[..], [Effect::AnnounceDs { .. }]));
    assert!(z.facts.lifecycle.ds_to_enter.is_some());
}

/// A parent server that goes back to the old delegation while the zone is on the enable
/// path: the move in starts over, and a DS instruction is withdrawn at once.
#[test]
fn a_delegation_that_goes_back_withdraws_the_instruction() {
    let w = World::new();
    let line = provider_key(&w.key).ds_line().to_string();
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(line.clone());
    z.facts.lifecycle.ds_announced_at = Some(T0);
    z.facts.delegation.verdict = Some(crate::dns::DelegationVerdict::Provider);
    let d = w.run(
        &mut z,
        &w.obs_delegating(
            T0,
            Some(true),
            &[P::No, P::No],
            &[D::Ours, D::Old],
            &[C::Serves],
        ),
    );
    assert_eq!(d.state, Some(State::AwaitingDelegation));
    assert!(z.facts.move_in.moving_in);
    assert_eq!(z.facts.lifecycle.ds_to_enter, None);
    assert!(d.effects.contains(&Effect::RequestDsRemoval {
        ds_line: Some(line)
    }));
    assert!(d.notes.iter().any(|n| n.reason.contains("withdrawn")));

    // Back at the provider everywhere: a new T_delegated, a new hold.
    let t = T0.plus(HOUR);
    let d = w.run(
        &mut z,
        &w.obs_delegating(
            t,
            Some(true),
            &[P::No, P::No],
            &[D::Ours, D::Ours],
            &[C::Serves],
        ),
    );
    assert_eq!(d.state, Some(State::Enabling));
    assert_eq!(z.facts.delegation.delegated_at, Some(t));
    let d = w.run(
        &mut z,
        &w.obs_delegating(
            t,
            Some(true),
            &[P::No, P::No],
            &[D::Ours, D::Ours],
            &[C::Serves],
        ),
    );
    assert!(d.effects.is_empty());
    assert_eq!(z.facts.lifecycle.ds_to_enter, None);
}

/// The NS changed to the provider while the old DS stays: critical at once, worded as
/// the delegation change (not as DNSSEC off or a plain mismatch).
#[test]
fn ns_changed_before_the_old_ds_went_is_critical_at_once() {
    let w = World::new();
    for on in [Some(false), Some(true)] {
        let mut z = zone(Some(State::Disabled), Intent::Enabled);
        w.run(
            &mut z,
            &w.obs_delegating(
                T0,
                on,
                &[P::WrongDs, P::WrongDs],
                &[D::Old, D::Old],
                &[C::OldKey],
            ),
        );
        assert_eq!(z.state, Some(State::AwaitingDsRemoval));
        let d = w.run(
            &mut z,
            &w.obs_delegating(
                T0.plus(secs(60)),
                on,
                &[P::WrongDs, P::WrongDs],
                &[D::Ours, D::Old],
                &[C::Serves],
            ),
        );
        assert_eq!(
            critical_alerts(&d),
            vec![AlertKind::DelegationChangedWithDs],
            "provider {on:?}"
        );
        let msg = firing(&d, AlertKind::DelegationChangedWithDs).unwrap();
        assert!(msg.contains("ns1.test.") && msg.contains("IN DS"), "{msg}");
    }
}

/// Moving out while the provider's DS is published: critical; after a completed
/// disable: a history note only, and nothing is asked of the provider.
#[test]
fn moving_out() {
    let w = World::new();
    let mut z = zone(Some(State::Active), Intent::None);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    w.run(
        &mut z,
        &w.obs(T0, Some(true), &[P::Ds(3600), P::Ds(3600)], &[C::Serves]),
    );
    assert!(z.facts.lifecycle.ds_to_enter.is_some());
    let d = w.run(
        &mut z,
        &w.obs_delegating(
            T0.plus(HOUR),
            Some(true),
            &[P::Ds(3600), P::Ds(3600)],
            &[D::Old, D::Old],
            &[C::OldKey],
        ),
    );
    assert_eq!(d.state, Some(State::Active));
    assert!(firing(&d, AlertKind::DelegationChangedWithDs).is_some());
    assert_eq!(
        z.facts.lifecycle.ds_to_enter, None,
        "the DS is not 'to enter' elsewhere"
    );

    // Disabled and moved out afterwards.
    let mut z = zone(Some(State::Disabled), Intent::Disabled);
    w.run(
        &mut z,
        &w.obs(T0, Some(false), &[P::No, P::No], &[C::Unsigned]),
    );
    assert!(z.facts.delegation.seen_at_provider);
    let d = w.run(
        &mut z,
        &w.obs_delegating(
            T0.plus(HOUR),
            Some(true),
            &[P::WrongDs, P::WrongDs],
            &[D::Old, D::Old],
            &[C::OldKey],
        ),
    );
    assert_eq!(d.state, Some(State::Disabled));
    assert!(d.effects.is_empty(), "{:?}", d.effects);
    assert!(any_firing(&d).is_empty(), "{:?}", any_firing(&d));
    assert!(
        d.notes
            .iter()
            .any(|n| n.reason.contains("delegation changed")),
        "{:?}",
        d.notes
    );
}

/// A foreign zone with no intent is only watched; with intent `disabled` the move in
/// ends in `disabled` without any provider call.
#[test]
fn foreign_zones_without_and_with_intent_disabled() {
    let w = World::new();
    let old = [D::Old, D::Old];
    let mut z = zone(None, Intent::None);
    let d = w.run(
        &mut z,
        &w.obs_delegating(
            T0,
            Some(true),
            &[P::WrongDs, P::WrongDs],
            &old,
            &[C::OldKey],
        ),
    );
    assert_eq!(d.state, Some(State::AwaitingDelegation));
    assert!(d.effects.is_empty());
    assert!(any_firing(&d).is_empty(), "{:?}", any_firing(&d));
    assert_eq!(super::waiting::describe(&z, &w.policy).on, "operator");
    let mut off = zone(None, Intent::None);
    let d = w.run(
        &mut off,
        &w.obs_delegating(
            T0,
            Some(false),
            &[P::WrongDs, P::WrongDs],
            &old,
            &[C::OldKey],
        ),
    );
    assert_eq!(d.state, Some(State::Disabled));
    assert!(
        !judged(&d, AlertKind::DnssecOffWithDs) || firing(&d, AlertKind::DnssecOffWithDs).is_none()
    );
    assert!(any_firing(&d).is_empty(), "{:?}", any_firing(&d));

    // `disable` on the foreign zone: the old DS goes, then the NS, then `disabled`.
    let mut z = zone(Some(State::Disabled), Intent::Disabled);
    let d = w.run(
        &mut z,
        &w.obs_delegating(T0, Some(false), &[P::No, P::No], &old, &[C::Unsigned]),
    );
    assert_eq!(d.state, Some(State::AwaitingDelegation));
    let d = w.run(
        &mut z,
        &w.obs_delegating(
            T0.plus(HOUR),
            Some(false),
            &[P::No, P::No],
            &[D::Ours, D::Ours],
            &[C::Unsigned],
        ),
    );
    assert_eq!(d.state, Some(State::Disabled));
    assert!(d.effects.is_empty());
}

/// A DS set that matches the served key and also holds one for a key nobody serves.
#[test]
fn a_stale_ds_beside_the_right_one_is_a_warning_naming_it() {
    let w = World::new();
    let mut z = zone(Some(State::Active), Intent::None);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    let mut obs = w.obs(T0, Some(true), &[P::Ds(3600), P::Ds(3600)], &[C::Serves]);
    let stale = w
        .other
        .to_ds(ZONE, crate::dnssec::DigestType::Sha256)
        .unwrap();
    if let Ok(parent) = &mut obs.parent {
        for a in &mut parent.answers {
            if let crate::dns::DsAnswer::Present { ds, .. } = &mut a.answer {
                ds.push(stale.clone());
            }
        }
    }
    let d = w.run(&mut z, &obs);
    let msg = firing(&d, AlertKind::DsStale).expect("ds_stale");
    assert!(msg.contains(&stale.to_string()), "{msg}");
    assert_eq!(AlertKind::DsStale.severity(), Severity::Warning);
    assert_eq!(firing(&d, AlertKind::DsMismatch), None);
}

/// An old delegation answered beside a silent parent server is certain evidence: the
/// next complete delegation to the provider starts the hold (safety rule 9).
#[test]
fn an_old_delegation_beside_an_unknown_answer_still_starts_the_hold() {
    let w = World::new();
    let mut z = zone(Some(State::Enabling), Intent::Enabled);
    z.facts.delegation.verdict = Some(crate::dns::DelegationVerdict::Provider);
    let d = w.run(
        &mut z,
        &w.obs_delegating(
            T0,
            Some(true),
            &[P::No, P::Timeout],
            &[D::Old, D::Lost],
            &[C::Serves],
        ),
    );
    assert_eq!(z.facts.delegation.old_ns_ttl, Some(7200));
    assert_eq!(d.state, Some(State::AwaitingDelegation), "certain evidence");
    let t = T0.plus(secs(60));
    let ours = [D::Ours, D::Ours];
    let d = w.run(
        &mut z,
        &w.obs_delegating(t, Some(true), &[P::No, P::No], &ours, &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    assert_eq!(z.facts.delegation.delegated_at, Some(t));
    let rule9 = t.plus(secs(7200)).plus(HOUR);
    assert_eq!(
        delegation_hold_until(&z.facts.delegation, &w.policy),
        Some(rule9)
    );
    // The usual hold starts now and ends long before the delegation hold.
    let d = w.run(
        &mut z,
        &w.obs_delegating(t, Some(true), &[P::No, P::No], &ours, &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    let usual = z.facts.lifecycle.hold_until.unwrap();
    assert!(usual < rule9);
    let d = w.run(
        &mut z,
        &w.obs_delegating(usual, Some(true), &[P::No, P::No], &ours, &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::Enabling));
    let d = w.run(
        &mut z,
        &w.obs_delegating(rule9, Some(true), &[P::No, P::No], &ours, &[C::Serves]),
    );
    assert_eq!(d.state, Some(State::AwaitingDs));
}

/// A disable that finds the zone delegated elsewhere, the zone never having been
/// delegated to the provider everywhere (a parent server that could not be asked before),
/// has found a move in, not a move out: DNSSEC is not switched off, and the TTL wait ends
/// in `awaiting_delegation`. A zone once delegated to the provider everywhere is moving
/// out, and its disable carries on (DESIGN.md "Moving in", "Moving out").
#[test]
fn a_disable_that_finds_a_move_in_switches_nothing_off() {
    let w = World::new();
    let mixed = [D::Ours, D::Old];
    let no = [P::No, P::No];
    let child = [C::Serves, C::OldKey];
    let mut z = zone(Some(State::AwaitingDsRemoval), Intent::Disabled);
    let d = w.run(
        &mut z,
        &w.obs_delegating(T0, Some(true), &no, &mixed, &child),
    );
    assert_eq!(d.state, Some(State::TtlWait));
    assert!(z.facts.move_in.moving_in);
    let deadline = disable_deadline(&z.facts.lifecycle, &w.policy).unwrap();
    w.poll_until(&mut z, T0, deadline, |t| {
        w.obs_delegating(t, Some(true), &no, &mixed, &child)
    });
    let d = w.run(
        &mut z,
        &w.obs_delegating(deadline, Some(true), &no, &mixed, &child),
    );
    assert_eq!(d.state, Some(State::AwaitingDelegation));
    assert_eq!(
        d.effects,
        vec![Effect::RequestDelegation {
            name_servers: vec![OURS.to_string()]
        }]
    );

    // Found in `disabling`: back to the wait, nothing switched off.
    let mut z = zone(Some(State::Disabling), Intent::Disabled);
    z.facts.lifecycle.t_gone = Some(T0);
    z.facts.lifecycle.gone_confirmed_at = Some(T0);
    let t = T0.plus(secs(60));
    let d = w.run(
        &mut z,
        &w.obs_delegating(t, Some(true), &no, &mixed, &child),
    );
    assert_eq!(d.state, Some(State::TtlWait));
    assert!(
        !d.effects.contains(&Effect::DisableDnssec),
        "{:?}",
        d.effects
    );
    assert!(z.facts.move_in.moving_in);

    // Moving out: the disable is the safe exit.
    let mut z = zone(Some(State::Disabling), Intent::Disabled);
    z.facts.lifecycle.t_gone = Some(T0);
    z.facts.lifecycle.gone_confirmed_at = Some(T0);
    z.facts.delegation.seen_at_provider = true;
    let d = w.run(
        &mut z,
        &w.obs_delegating(t, Some(true), &no, &mixed, &child),
    );
    assert_eq!(d.state, Some(State::Disabling));
    assert!(
        d.effects.contains(&Effect::DisableDnssec),
        "{:?}",
        d.effects
    );
}

/// Safety rule 9: the NS change is asked for only once the old DS is gone and its TTL
/// waited out. A DS seen at an earlier look (on the enable path, the parent's NS answers
/// lost; or while a foreign zone was only watched) and gone at the look that starts the
/// move in is still waited out (`ttl_wait`) before the NS change.
#[test]
fn a_move_in_waits_out_a_ds_seen_before_it_started() {
    let w = World::new();
    let old = [D::Old, D::Old];
    let lost = [D::Lost, D::Lost];
    let no = [P::No, P::No];
    let old_ds = [P::WrongDs, P::WrongDs];
    let starts: [(State, Intent, [D; 2]); 3] = [
        (State::Enabling, Intent::Enabled, lost),
        (State::Disabled, Intent::None, old),
        (State::Disabled, Intent::Disabled, lost),
    ];
    for (state, intent, before) in starts {
        let case = format!("{state:?}, {intent:?}");
        // Signing on the enable path; off in `disabled`.
        let on = Some(state != State::Disabled);
        let mut z = zone(Some(state), intent);
        z.facts.delegation.seen_at_provider = false;
        let d = w.run(
            &mut z,
            &w.obs_delegating(T0, on, &old_ds, &before, &[C::OldKey]),
        );
        assert_eq!(d.state, Some(state), "{case}: the DS seen, nothing moves");
        assert_eq!(z.facts.lifecycle.ds_seen_at, Some(T0), "{case}");
        // The operator's word, the old DS removed, the delegation seen: a move in, with
        // no DS published at this look.
        z.intent = match intent {
            Intent::None => Intent::Enabled,
            i => i,
        };
        let t1 = T0.plus(HOUR);
        let d = w.run(&mut z, &w.obs_delegating(t1, on, &no, &old, &[C::OldKey]));
        assert_eq!(d.state, Some(State::TtlWait), "{case}: {:?}", d.notes);
        assert!(z.facts.move_in.moving_in, "{case}");
        assert!(
            !d.effects
                .iter()
                .any(|e| matches!(e, Effect::RequestDelegation { .. })),
            "{case}: NS change asked for within the DS's TTL: {:?}",
            d.effects
        );
        let deadline = disable_deadline(&z.facts.lifecycle, &w.policy).unwrap();
        assert!(deadline > t1.plus(secs(3600)), "{case}");
        w.poll_until(&mut z, t1, deadline, |t| {
            w.obs_delegating(t, on, &no, &old, &[C::OldKey])
        });
        let d = w.run(
            &mut z,
            &w.obs_delegating(deadline, on, &no, &old, &[C::OldKey]),
        );
        assert_eq!(d.state, Some(State::AwaitingDelegation), "{case}");
        assert_eq!(
            d.effects
                .iter()
                .filter(|e| matches!(e, Effect::RequestDelegation { .. }))
                .count(),
            1,
            "{case}: {:?}",
            d.effects
        );
    }

    // No DS seen since the zone was disabled: nothing to wait out, the NS change at once.
    let mut z = zone(Some(State::Disabled), Intent::Enabled);
    let d = w.run(
        &mut z,
        &w.obs_delegating(T0, Some(false), &no, &old, &[C::OldKey]),
    );
    assert_eq!(d.state, Some(State::AwaitingDelegation));
    assert_eq!(
        d.effects,
        vec![Effect::RequestDelegation {
            name_servers: vec![OURS.to_string()]
        }]
    );
}

/// Safety rule 9: a DS seen at a look before the zone could be adopted (the provider
/// unknown) counts as one seen at any other look. Adoption into `disabled` starts no new
/// lifecycle (there was none before it to end): it must not forget that DS, and a move
/// in started later waits it out before the NS change.
#[test]
fn a_ds_seen_before_adoption_is_waited_out_before_the_ns_change() {
    let w = World::new();
    let old = [D::Old, D::Old];
    let no = [P::No, P::No];
    let mut z = zone(None, Intent::None);
    // The first look: the provider unknown, one parent server still publishing the old DS.
    let d = w.run(
        &mut z,
        &w.obs_delegating(T0, None, &[P::No, P::WrongDs], &old, &[C::OldKey]),
    );
    assert_eq!(d.state, None, "{:?}", d.notes);
    assert_eq!(z.facts.lifecycle.ds_seen_at, Some(T0));
    // The next look, the old DS gone: adopted as a foreign zone, DNSSEC off.
    let t1 = T0.plus(secs(60));
    let d = w.run(
        &mut z,
        &w.obs_delegating(t1, Some(false), &no, &old, &[C::OldKey]),
    );
    assert_eq!(d.state, Some(State::Disabled), "{:?}", d.notes);
    assert_eq!(
        z.facts.lifecycle.ds_seen_at,
        Some(T0),
        "adoption forgot the DS seen"
    );
    // `enable`, and the move in starts: the DS seen is waited out first.
    z.intent = Intent::Enabled;
    let t2 = t1.plus(secs(60));
    let d = w.run(
        &mut z,
        &w.obs_delegating(t2, Some(false), &no, &old, &[C::OldKey]),
    );
    assert_eq!(d.state, Some(State::TtlWait), "{:?}", d.notes);
    assert!(
        !d.effects
            .iter()
            .any(|e| matches!(e, Effect::RequestDelegation { .. })),
        "NS change asked for within the DS's TTL: {:?}",
        d.effects
    );
    let deadline = disable_deadline(&z.facts.lifecycle, &w.policy).unwrap();
    w.poll_until(&mut z, t2, deadline, |t| {
        w.obs_delegating(t, Some(false), &no, &old, &[C::OldKey])
    });
    let d = w.run(
        &mut z,
        &w.obs_delegating(deadline, Some(false), &no, &old, &[C::OldKey]),
    );
    assert_eq!(d.state, Some(State::AwaitingDelegation), "{:?}", d.notes);
    assert!(
        d.effects
            .iter()
            .any(|e| matches!(e, Effect::RequestDelegation { .. })),
        "{:?}",
        d.effects
    );
}

/// DESIGN.md "Moving in": a zone never delegated to the provider's name servers at every
/// parent address ends its TTL wait in "DNSSEC off" only at a look where every address
/// delegates to them. A parent server that answers the DS but not the NS may still
/// delegate elsewhere: unknown never counts (rule 3).
#[test]
fn a_disable_never_delegated_to_the_provider_waits_for_the_delegation() {
    let w = World::new();
    let no = [P::No, P::No];
    let child = [C::Serves];
    for state in [State::TtlWait, State::Disabling] {
        let mut z = zone(Some(state), Intent::Disabled);
        z.facts.lifecycle.t_gone = Some(T0);
        z.facts.lifecycle.max_ds_ttl = Some(60);
        z.facts.lifecycle.max_dnskey_ttl = Some(60);
        // Well past the wait (the child's DNSKEY TTL counts too), looks having kept
        // confirming the DS gone (rule 2).
        let end = disable_deadline(&z.facts.lifecycle, &w.policy)
            .unwrap()
            .plus(HOUR * 2);
        z.facts.lifecycle.gone_confirmed_at = Some(Timestamp(end.0 - 60_000));
        let d = w.run(
            &mut z,
            &w.obs_delegating(end, Some(true), &no, &[D::Ours, D::Lost], &child),
        );
        assert_eq!(d.state, Some(state));
        assert!(
            !d.effects.contains(&Effect::DisableDnssec),
            "{state:?}: {:?}",
            d.effects
        );
        assert!(!z.facts.delegation.seen_at_provider);
        let held = z.facts.wait.held_by.as_ref().map(|h| h.what.clone());
        assert!(
            held.as_deref().is_some_and(|h| h.contains("moving in")),
            "{state:?}: {held:?} {:?}",
            d.notes
        );
        // Every parent server delegates to the provider: off as ever.
        let t = end.plus(secs(60));
        let d = w.run(
            &mut z,
            &w.obs_delegating(t, Some(true), &no, &[D::Ours, D::Ours], &child),
        );
        assert_eq!(d.state, Some(State::Disabling), "{state:?}");
        assert!(d.effects.contains(&Effect::DisableDnssec), "{state:?}");
    }
}
