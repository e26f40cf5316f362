//! A moving zone's step, decided without I/O: the wait and its party, the alert, the
//! lateness (rule 11), the effects' rows, the move's end, and whether an owed request
//! still stands.

use std::time::Duration;

use super::facts::LifecycleFacts;
use super::hold::{Hold, Party};
use super::moving::{MoveSeen, Stands, decide, request_stands, serving_account};
use super::signed_move::{Move, Phase, Ttls};
use super::*;
use crate::dnssec::{DigestType, Dnskey, DnssecKey};
use crate::zone_name::ZoneName;

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

fn provider_key(k: &Dnskey) -> DnssecKey {
    DnssecKey {
        zone: ZONE.into(),
        dnskey: k.clone(),
        ds: k.to_ds(ZONE, DigestType::Sha256).expect("a test key's DS"),
        ds_ttl: 3600,
        uuid: None,
    }
}

fn moving(phase: Phase) -> Move {
    let mut mv = Move::new(ZONE, key(1)).between("src", "tgt").seeded(Ttls {
        dnskey: 300,
        ds: 7200,
        parent_ns: 86_400,
        apex_ns: 3600,
    });
    mv.phase = phase;
    mv.target_key = Some(key(2));
    mv
}

fn zone_in(mv: &Move) -> Zone {
    let facts = Facts {
        lifecycle: LifecycleFacts {
            max_dnskey_ttl: Some(60),
            max_ds_ttl: Some(60),
            ..LifecycleFacts::default()
        },
        signed_move: Some(mv.clone()),
        ..Facts::default()
    };
    Zone {
        name: ZoneName::parse(ZONE).expect("a test zone name"),
        intent: Intent::Enabled,
        ds_never_submitted: false,
        state: Some(State::Active),
        since: T0,
        facts,
    }
}

fn firing(d: &Decision, kind: AlertKind) -> Option<&str> {
    d.alerts
        .iter()
        .find(|a| a.kind == kind)
        .and_then(|a| a.firing.as_deref())
}

fn run(zone: &Zone, seen: &MoveSeen, at: Timestamp) -> Decision {
    let policy = Policy::default();
    let mv = zone.facts.signed_move.clone().expect("a zone in a move");
    decide(zone, &mv, seen, at, &policy, &policy.move_policy())
}

#[test]
fn a_move_held_on_a_person_is_alerted_and_waits_on_them() {
    let mv = moving(Phase::ExchangingKeys);
    let zone = zone_in(&mv);
    let seen = MoveSeen::Held {
        why: "provider tgt of the signed move is not configured any more".into(),
        on: Party::Operator,
        account: Some("tgt".into()),
    };
    let d = run(&zone, &seen, T0);
    assert_eq!(
        d.state,
        Some(State::Active),
        "a move never changes the state"
    );
    assert_eq!(
        d.facts.signed_move.as_ref(),
        Some(&mv),
        "held: no phase change"
    );
    let hold = d
        .facts
        .wait
        .held_by
        .as_ref()
        .expect("a move is always held");
    assert_eq!(hold.on, Party::Operator);
    assert!(hold.what.contains("not configured"), "{hold:?}");
    let alert = firing(&d, AlertKind::SignedMoveHeld).expect("signed_move_held fires");
    assert!(alert.starts_with(ZONE), "{alert}");
    assert!(d.effects.is_empty() && d.notes.is_empty());
    assert_eq!(d.wake_at, T0.plus(Policy::default().poll_waiting));
}

#[test]
fn an_account_that_cannot_be_asked_holds_without_an_alert() {
    let zone = zone_in(&moving(Phase::AwaitingBothDs));
    let seen = MoveSeen::Held {
        why: "provider tgt: 503".into(),
        on: Party::Provider,
        account: Some("tgt".into()),
    };
    let d = run(&zone, &seen, T0);
    assert_eq!(
        d.facts.wait.held_by.as_ref().map(|h| h.on),
        Some(Party::Provider)
    );
    assert_eq!(firing(&d, AlertKind::SignedMoveHeld), None);
}

#[test]
fn a_phase_that_lasts_past_its_bound_is_said_and_not_before() {
    let policy = Policy::default();
    // A registrar's phase: late after `ds_overdue_after` from the phase's start.
    let mv = moving(Phase::AwaitingBothDs);
    let mut zone = zone_in(&mv);
    zone.facts.wait.held_by = Some(Hold::new("the registrar", Party::Registrar));
    zone.facts.wait.held_since = Some(T0);
    let seen = MoveSeen::Held {
        why: "provider tgt: 503".into(),
        on: Party::Provider,
        account: Some("tgt".into()),
    };
    let early = run(&zone, &seen, T0.plus(policy.ds_overdue_after));
    assert_eq!(firing(&early, AlertKind::WaitStalled), None);
    assert_eq!(
        early.facts.wait.held_since,
        Some(T0),
        "the phase's start is kept"
    );
    let late = run(
        &zone,
        &seen,
        T0.plus(policy.ds_overdue_after + Duration::from_secs(1)),
    );
    let said = firing(&late, AlertKind::WaitStalled).expect("wait_stalled fires");
    assert!(said.contains("awaiting_both_ds"), "{said}");
    // A phase of the daemon's own: late after its hold and `observation_failing_after`.
    let mv = moving(Phase::RetiringOldKey);
    let mut zone = zone_in(&mv);
    zone.facts.wait.held_by = Some(Hold::new("resolvers", Party::Ttl));
    zone.facts.wait.held_since = Some(T0);
    let bound = super::signed_move::phase_hold(&mv, &policy.move_policy())
        + policy.observation_failing_after;
    assert_eq!(
        firing(&run(&zone, &seen, T0.plus(bound)), AlertKind::WaitStalled),
        None
    );
    assert!(
        firing(
            &run(&zone, &seen, T0.plus(bound + Duration::from_secs(1))),
            AlertKind::WaitStalled
        )
        .is_some()
    );
}

/// A registrar that acted in time is not said late while the daemon waits out the DS TTL
/// after it: once the parent confirmed the change, the phase is late only after its own
/// hold and `observation_failing_after` from the confirmation (found by the demo: a move
/// whose DS TTL outlasted `ds_overdue_after` was alerted as stalled on the registrar).
#[test]
fn a_registrar_phase_confirmed_in_time_is_not_late_during_its_hold() {
    let policy = Policy::default();
    let move_policy = policy.move_policy();
    for phase in [Phase::AwaitingBothDs, Phase::AwaitingOldDsRemoval] {
        let mut mv = moving(phase);
        mv.ttls.ds = 2 * 86_400;
        let confirmed = T0.plus(policy.ds_overdue_after - Duration::from_secs(3600));
        mv.confirmed_at = Some(confirmed);
        mv.last_confirmed = Some(confirmed);
        let mut zone = zone_in(&mv);
        zone.facts.wait.held_by = Some(Hold::new("resolvers", Party::Ttl));
        zone.facts.wait.held_since = Some(T0);
        let seen = MoveSeen::Held {
            why: "provider tgt: 503".into(),
            on: Party::Provider,
            account: Some("tgt".into()),
        };
        let past_overdue = T0.plus(policy.ds_overdue_after + Duration::from_secs(1));
        assert_eq!(
            firing(&run(&zone, &seen, past_overdue), AlertKind::WaitStalled),
            None,
            "{phase:?}: the registrar acted in time"
        );
        let bound =
            super::signed_move::phase_hold(&mv, &move_policy) + policy.observation_failing_after;
        assert_eq!(
            firing(
                &run(&zone, &seen, confirmed.plus(bound)),
                AlertKind::WaitStalled
            ),
            None
        );
        let said = run(&zone, &seen, confirmed.plus(bound + Duration::from_secs(1)));
        assert!(
            firing(&said, AlertKind::WaitStalled).is_some(),
            "{phase:?}: a hold that outlasts itself is said"
        );
    }
}

#[test]
fn the_end_makes_the_zone_the_targets_with_the_moved_keys_ds() {
    let mv = moving(Phase::Done);
    let zone = zone_in(&mv);
    let seen = MoveSeen::SourceGone {
        target_key: Ok(provider_key(&key(2))),
    };
    let d = run(&zone, &seen, T0);
    assert_eq!(d.facts.signed_move, None);
    assert_eq!(d.facts.wait.held_by, None);
    let line = d
        .facts
        .lifecycle
        .ds_line
        .as_deref()
        .expect("the followed key's DS line");
    let ds = key(2).to_ds(ZONE, DigestType::Sha256).expect("DS");
    assert!(line.ends_with(&ds.to_string()), "{line}");
    // Rule 2: the move's TTLs bound later waits.
    assert_eq!(d.facts.lifecycle.max_ds_ttl, Some(7200));
    assert_eq!(d.facts.lifecycle.max_dnskey_ttl, Some(300));
    assert!(d.alerts.iter().all(|a| a.firing.is_none()));
    assert_eq!(d.wake_at, T0, "looked at again at once, as an active zone");
    assert!(d.notes[0].reason.contains("ended"), "{:?}", d.notes);
}

#[test]
fn a_target_that_rolled_since_ends_on_the_key_the_parent_was_given() {
    let zone = zone_in(&moving(Phase::Done));
    let seen = MoveSeen::SourceGone {
        target_key: Ok(provider_key(&key(3))),
    };
    let d = run(&zone, &seen, T0);
    let line = d.facts.lifecycle.ds_line.as_deref().expect("a DS line");
    let moved = key(2).to_ds(ZONE, DigestType::Sha256).expect("DS");
    assert!(line.ends_with(&moved.to_string()), "{line}");
}

#[test]
fn an_end_whose_key_cannot_be_read_holds_on_the_target() {
    let zone = zone_in(&moving(Phase::Done));
    let seen = MoveSeen::SourceGone {
        target_key: Err("timed out".into()),
    };
    let d = run(&zone, &seen, T0);
    assert!(d.facts.signed_move.is_some(), "the move has not ended");
    let hold = d.facts.wait.held_by.expect("held");
    assert_eq!(hold.on, Party::Provider);
    assert!(hold.what.contains("provider tgt: timed out"), "{hold:?}");
}

#[test]
fn the_zone_is_served_by_the_source_until_the_target_delegation_is_confirmed() {
    assert_eq!(serving_account(&moving(Phase::AwaitingDelegation)), "src");
    assert_eq!(serving_account(&moving(Phase::OldDelegationWait)), "tgt");
}

#[test]
fn an_owed_request_stands_only_while_the_move_stands_on_it() {
    let line = |k: &Dnskey| {
        format!(
            "{ZONE} 7200 IN DS {}",
            k.to_ds(ZONE, DigestType::Sha256).expect("DS")
        )
    };
    let add = MoveRequest::AddDs {
        ds_line: line(&key(2)),
        keep: line(&key(1)),
    };
    let mv = moving(Phase::AwaitingBothDs);
    assert_eq!(request_stands(Some(&mv), None, &add), Stands::Yes);
    assert!(matches!(request_stands(None, None, &add), Stands::No(_)));
    let on_person = Hold::new("a key changed", Party::Operator);
    assert_eq!(
        request_stands(Some(&mv), Some(&on_person), &add),
        Stands::Later
    );
    let mut rolled = mv.clone();
    rolled.target_key = Some(key(3));
    assert!(matches!(
        request_stands(Some(&rolled), None, &add),
        Stands::No(why) if why.contains("no longer signs")
    ));
    let change = MoveRequest::ChangeNs {
        name_servers: vec!["ns1.tgt.test.".into()],
    };
    assert!(matches!(
        request_stands(Some(&mv), None, &change),
        Stands::No(why) if why.contains("awaiting_delegation")
    ));
    let remove_target = MoveRequest::RemoveDs {
        ds_line: line(&key(2)),
        keep: line(&key(1)),
    };
    assert!(matches!(
        request_stands(Some(&mv), None, &remove_target),
        Stands::No(_)
    ));
}
