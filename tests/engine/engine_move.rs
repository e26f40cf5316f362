//! Moving a zone between providers (DESIGN.md section 2 "Delegation", "Moving in",
//! "Moving out"; safety rules 1, 2, 8 and 9) with the engine over the fake world: the old
//! DS removed and waited out before the NS change is asked for, no DS announced before the
//! old delegation has expired everywhere, no "DNSSEC off" during a move in, foreign zones
//! only watched, and the alerts of a move done in the wrong order.

use std::time::Duration;

use dnssec_warden::dnssec::{DigestType, Ds};
use dnssec_warden::engine::CrashPoint;
use dnssec_warden::lifecycle::{AlertKind, Clock, Intent, Policy, Severity, State, Timestamp};
use dnssec_warden_test_support::fake::{Delegation, OLD_DNSKEY_TTL, PROVIDER_NS};
use dnssec_warden_test_support::on_both_backends;
use dnssec_warden_test_support::rig::{Rig, ZONE};

const HOUR: Duration = Duration::from_secs(3600);

/// Hourly polls keep days of waiting to a few dozen ticks.
fn policy() -> Policy {
    Policy {
        poll_waiting: HOUR,
        poll_active: HOUR * 6,
        ..Policy::default()
    }
}

/// Whether `text` names the DS record `ds` (its key tag, algorithm, digest type and
/// digest, in any case).
fn names(text: &str, ds: &Ds) -> bool {
    text.to_ascii_uppercase()
        .contains(&ds.to_string().to_ascii_uppercase())
}

/// The provider's DS now (it signs).
fn provider_ds(rig: &Rig) -> Ds {
    let w = rig.world.lock();
    w.key
        .as_ref()
        .expect("the provider signs")
        .to_ds(ZONE, DigestType::Sha256)
        .unwrap()
}

/// Every alert ever opened for the zone (open or resolved), by kind.
async fn alerts_ever(rig: &Rig) -> Vec<AlertKind> {
    rig.store
        .alerts(ZONE)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.kind)
        .collect()
}

/// When the DS was first announced ("enter this DS" delivered).
async fn first_announcement(rig: &Rig) -> Option<Timestamp> {
    rig.store
        .events(ZONE)
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.kind == "effect" && e.reason.starts_with("ACTION NEEDED: enter this DS"))
        .map(|e| e.at)
}

async fn removal_requests(rig: &Rig) -> Vec<String> {
    rig.reasons()
        .await
        .into_iter()
        .filter(|r| r.starts_with("ACTION NEEDED: remove the DS"))
        .collect()
}

fn assert_no_violations(rig: &Rig) {
    let v = rig.world.violations();
    assert!(v.is_empty(), "{v:?}");
}

/// No "DNSSEC off" was ever asked for: none reached the provider, and none was refused
/// by the guard either.
async fn assert_never_switched_off(rig: &Rig) {
    assert!(
        rig.world.switches().iter().all(|(_, on)| *on),
        "{:?}",
        rig.world.switches()
    );
    let reasons = rig.reasons().await;
    assert!(
        !reasons.iter().any(|r| r.contains("switch DNSSEC off")
            || r.contains("switched off")
            || r.contains("guard refused")),
        "{reasons:#?}"
    );
}

/// Enabled the usual way at the provider's delegation, with its DS at both parents.
async fn to_active(rig: &mut Rig, ttl: u32) {
    rig.run_for(1).await;
    rig.intent(Intent::Enabled).await;
    assert!(rig.run_until(State::AwaitingDs, 30).await);
    rig.world.publish_ds(0, ttl);
    rig.world.publish_ds(1, ttl);
    assert!(rig.run_until(State::Active, 10).await);
}

/// DESIGN.md "Moving in", intent enabled, the old provider's DS at the parent: the DS is
/// removed (the request names it) and waited out without any provider call, then the NS
/// change is asked for until every parent address delegates to the provider, then the
/// enable path, whose DS is announced only after `T_delegated + old NS TTL + margin`.
async fn moving_in_with_an_old_ds_ends_active_in_the_safe_order() {
    let mut rig = Rig::moving_in(2, 2, policy(), Some(3600)).await;
    let old = rig.world.old_ds();
    rig.run_for(1).await;
    assert_eq!(
        rig.state().await,
        Some(State::Disabled),
        "a foreign zone the provider does not sign, no intent: only watched"
    );

    rig.intent(Intent::Enabled).await;
    rig.run_for(1).await;
    assert_eq!(rig.state().await, Some(State::AwaitingDsRemoval));
    let requests = removal_requests(&rig).await;
    assert!(
        requests.iter().any(|r| names(r, &old)),
        "the removal request names the old DS {old}: {requests:#?}"
    );
    // The registrar removes it at one parent server only: still waiting.
    rig.world.remove_old_ds(0);
    rig.run_for(3).await;
    assert_eq!(rig.state().await, Some(State::AwaitingDsRemoval));
    rig.world.remove_old_ds(1);
    let gone = rig.world.clock.now();
    assert!(rig.run_until(State::TtlWait, 3).await);
    assert!(rig.world.switches().is_empty(), "no provider call");
    assert!(rig.run_until(State::AwaitingDelegation, 60).await);
    let asked_at = rig.world.clock.now();
    let margin = rig.policy.propagation_margin;
    assert!(
        asked_at >= gone.plus_secs(3600 + OLD_DNSKEY_TTL).plus(margin),
        "the NS change is asked for only after the old DS TTL, the old DNSKEY TTL and the margin: gone {gone}, asked {asked_at}"
    );
    assert!(
        rig.world.switches().is_empty(),
        "the old DS removal and its wait made no provider call"
    );
    let what = rig.waiting_for().await;
    for ns in PROVIDER_NS {
        assert!(
            what.contains(ns.trim_end_matches('.')),
            "status names the provider's name servers: {what}"
        );
    }
    assert!(rig.ds_shown_to_enter().await.is_empty());

    // A partial re-delegation, then a complete one an address of which cannot be asked:
    // neither counts (safety rule 9, the unanimity of rule 3).
    rig.world.delegate(0, Delegation::Provider);
    rig.run_for(3).await;
    assert_eq!(rig.state().await, Some(State::AwaitingDelegation), "mixed");
    rig.world.lock().parents[1].silent = true;
    rig.world.delegate(1, Delegation::Provider);
    rig.run_for(3).await;
    assert_eq!(
        rig.state().await,
        Some(State::AwaitingDelegation),
        "unknown never counts"
    );
    assert!(rig.world.switches().is_empty());
    rig.world.lock().parents[1].silent = false;
    let delegated = rig.world.clock.now();

    assert!(rig.run_until(State::Enabling, 3).await);
    // The enable path switches DNSSEC on (in this step or the next).
    rig.run_for(2).await;
    assert_eq!(rig.state().await, Some(State::Enabling));
    assert!(rig.world.dnssec_on(), "the enable path switches DNSSEC on");
    assert!(rig.world.switches()[0].0 >= delegated);
    assert!(rig.run_until(State::AwaitingDs, 200).await);
    let hold_end = delegated
        .plus_secs(rig.world.old_ns_ttl())
        .plus(rig.policy.propagation_margin);
    let announced = first_announcement(&rig).await.expect("the DS announced");
    assert!(
        announced >= hold_end,
        "DS announced at {announced}, before T_delegated {delegated} + old NS TTL + margin = {hold_end}"
    );
    rig.world.publish_ds(0, 3600);
    rig.world.publish_ds(1, 3600);
    assert!(rig.run_until(State::Active, 10).await);

    let seen = rig.states_seen().await;
    assert_eq!(
        seen[..6],
        [
            "disabled",
            "awaiting_ds_removal",
            "ttl_wait",
            "awaiting_delegation",
            "enabling",
            "awaiting_ds"
        ],
        "{seen:?}"
    );
    assert_eq!(seen.last().map(String::as_str), Some("active"), "{seen:?}");
    assert_never_switched_off(&rig).await;
    let ever = alerts_ever(&rig).await;
    assert!(
        !ever.iter().any(|k| matches!(
            k,
            AlertKind::DnssecOffWithDs | AlertKind::DelegationChangedWithDs | AlertKind::DsMismatch
        )),
        "{ever:?}"
    );
    assert_no_violations(&rig);
    rig.assert_audit_chain().await;
}

/// Moving in with intent disabled, the provider not signing: the old DS removed and
/// waited out, the NS change asked for, then `disabled`; the provider never called.
async fn moving_in_with_intent_disabled_ends_disabled() {
    let mut rig = Rig::moving_in(2, 2, policy(), Some(3600)).await;
    rig.run_for(1).await;
    rig.intent(Intent::Disabled).await;
    rig.run_for(1).await;
    assert_eq!(rig.state().await, Some(State::AwaitingDsRemoval));
    rig.world.remove_old_ds_everywhere();
    assert!(rig.run_until(State::AwaitingDelegation, 60).await);
    rig.run_for(2).await;
    assert_eq!(rig.state().await, Some(State::AwaitingDelegation));
    rig.world.delegate_all(Delegation::Provider);
    assert!(rig.run_until(State::Disabled, 10).await);
    rig.run_for(3).await;
    assert_eq!(rig.state().await, Some(State::Disabled));
    assert_eq!(
        rig.states_seen().await,
        [
            "disabled",
            "awaiting_ds_removal",
            "ttl_wait",
            "awaiting_delegation",
            "disabled"
        ]
    );
    assert!(
        rig.world.switches().is_empty(),
        "{:?}",
        rig.world.switches()
    );
    assert_never_switched_off(&rig).await;
    assert_no_violations(&rig);
    rig.assert_audit_chain().await;
}

/// Moving in with intent disabled while the provider signs (no old DS): nothing is
/// switched off while the zone is delegated elsewhere; after the NS change, the disable
/// path switches the provider off and ends `disabled`.
async fn moving_in_with_intent_disabled_switches_a_signing_provider_off_only_after_the_move() {
    let mut rig = Rig::moving_in(2, 2, policy(), None).await;
    rig.world.flip_dnssec(true);
    rig.run_for(1).await;
    assert_eq!(
        rig.state().await,
        Some(State::AwaitingDelegation),
        "a foreign zone the provider signs, no intent"
    );
    rig.intent(Intent::Disabled).await;
    rig.run_for(5).await;
    assert_eq!(rig.state().await, Some(State::AwaitingDelegation));
    assert!(rig.world.switches().is_empty());
    rig.world.delegate_all(Delegation::Provider);
    let delegated = rig.world.clock.now();
    assert!(rig.run_until(State::Disabled, 100).await);
    assert!(!rig.world.dnssec_on());
    let switches = rig.world.switches();
    assert_eq!(switches.len(), 1, "{switches:?}");
    assert!(!switches[0].1 && switches[0].0 >= delegated, "{switches:?}");
    assert_no_violations(&rig);
    rig.assert_audit_chain().await;
}

/// A foreign, healthy zone (signed at the old provider with its DS at the parent) with no
/// intent is only watched: no alert, nothing asked, no provider call; whether the
/// provider signs or not.
async fn a_foreign_healthy_zone_with_no_intent_raises_nothing() {
    for provider_signs in [false, true] {
        let mut rig = Rig::moving_in(2, 2, policy(), Some(3600)).await;
        if provider_signs {
            rig.world.flip_dnssec(true);
        }
        rig.run_for(12).await;
        let expected = if provider_signs {
            State::AwaitingDelegation
        } else {
            State::Disabled
        };
        assert_eq!(rig.state().await, Some(expected), "signs: {provider_signs}");
        let ever = alerts_ever(&rig).await;
        assert!(ever.is_empty(), "signs: {provider_signs}: {ever:?}");
        let asked: Vec<String> = rig
            .reasons()
            .await
            .into_iter()
            .filter(|r| r.starts_with("ACTION NEEDED"))
            .collect();
        assert!(asked.is_empty(), "signs: {provider_signs}: {asked:#?}");
        assert!(rig.world.switches().is_empty());
        assert!(rig.ds_shown_to_enter().await.is_empty());
        assert_no_violations(&rig);
    }
}

/// Moving in: DNSSEC off at the provider plus the old DS at the parent is no
/// `dnssec_off_with_ds` while the zone is delegated elsewhere (the old provider signs
/// and the chain validates), with no intent and during a move in alike.
async fn the_provider_off_under_the_old_ds_of_a_foreign_zone_is_no_dnssec_off_with_ds() {
    let mut rig = Rig::moving_in(2, 2, policy(), Some(86_400)).await;
    rig.run_for(5).await;
    rig.intent(Intent::Enabled).await;
    rig.run_for(5).await;
    assert_eq!(rig.state().await, Some(State::AwaitingDsRemoval));
    // Half removed: still no outage, and none said.
    rig.world.remove_old_ds(0);
    rig.run_for(5).await;
    let ever = alerts_ever(&rig).await;
    assert!(!ever.contains(&AlertKind::DnssecOffWithDs), "{ever:?}");
    assert!(!ever.contains(&AlertKind::DsMismatch), "{ever:?}");
    assert!(rig.world.switches().is_empty());
}

/// The wrong order of a move: the NS changed to the provider while the old DS stays at
/// the parent. Resolvers that follow the new delegation fail validation: critical
/// `delegation_changed_with_ds` within one step, naming the DS to remove.
async fn ns_changed_while_the_old_ds_stays_is_critical_within_one_step() {
    let mut rig = Rig::moving_in(2, 2, policy(), Some(3600)).await;
    let old = rig.world.old_ds();
    rig.run_for(1).await;
    rig.intent(Intent::Enabled).await;
    assert!(rig.run_until(State::AwaitingDsRemoval, 3).await);
    rig.run_for(2).await;
    assert!(
        rig.open_alert(AlertKind::DelegationChangedWithDs)
            .await
            .is_none()
    );
    rig.world.delegate_all(Delegation::Provider);
    rig.run_for(1).await;
    let alert = rig
        .open_alert(AlertKind::DelegationChangedWithDs)
        .await
        .expect("delegation_changed_with_ds after one step");
    assert_eq!(alert.severity, Severity::Critical);
    assert!(
        names(&alert.message, &old),
        "names the DS {old}: {}",
        alert.message
    );
    assert_never_switched_off(&rig).await;
    assert_no_violations(&rig);
}

/// Moving out while the provider's DS is published (DESIGN.md "Moving out"): critical
/// `delegation_changed_with_ds` within one step.
async fn moving_out_while_the_providers_ds_is_published_is_critical() {
    let mut rig = Rig::with_policy(2, 2, policy()).await;
    to_active(&mut rig, 3600).await;
    let ds = provider_ds(&rig);
    assert!(
        rig.open_alert(AlertKind::DelegationChangedWithDs)
            .await
            .is_none()
    );
    rig.world.delegate_all(Delegation::Old);
    rig.run_for(1).await;
    let alert = rig
        .open_alert(AlertKind::DelegationChangedWithDs)
        .await
        .expect("delegation_changed_with_ds after one step");
    assert_eq!(alert.severity, Severity::Critical);
    assert!(
        names(&alert.message, &ds),
        "names the DS {ds}: {}",
        alert.message
    );
    assert!(rig.ds_shown_to_enter().await.is_empty());
    assert_no_violations(&rig);
}

/// A delegation that leaves after the disable completed: a note in the history, no
/// alert, the zone stays `disabled`, the provider is not called.
async fn a_delegation_change_after_a_completed_disable_is_only_noted() {
    let mut rig = Rig::with_policy(2, 2, policy()).await;
    to_active(&mut rig, 3600).await;
    rig.intent(Intent::Disabled).await;
    assert!(rig.run_until(State::AwaitingDsRemoval, 3).await);
    rig.world.withdraw_ds(0);
    rig.world.withdraw_ds(1);
    assert!(rig.run_until(State::Disabled, 100).await);
    assert!(!rig.world.dnssec_on());
    let before = rig.store.events(ZONE).await.unwrap().len();
    let calls = rig.world.switches().len();

    rig.world.delegate_all(Delegation::Old);
    rig.run_for(5).await;
    assert_eq!(rig.state().await, Some(State::Disabled));
    let after = rig.store.events(ZONE).await.unwrap();
    let notes: Vec<&str> = after[before..]
        .iter()
        .filter(|e| e.kind == "note")
        .map(|e| e.reason.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|r| r.to_ascii_lowercase().contains("delegat")),
        "a history note about the delegation: {:#?}",
        &after[before..]
    );
    let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
    assert!(open.is_empty(), "{open:?}");
    assert_eq!(rig.world.switches().len(), calls, "no provider call");
    assert_no_violations(&rig);
    rig.assert_audit_chain().await;
}

/// A DS set that matches the served key but also holds a DS for a key
/// nobody serves is `ds_stale` (a warning) naming the stale record; no mismatch.
async fn a_stale_ds_beside_the_matching_one_is_a_warning_naming_it() {
    let mut rig = Rig::with_policy(2, 2, policy()).await;
    to_active(&mut rig, 3600).await;
    assert!(rig.open_alert(AlertKind::DsStale).await.is_none());
    let stale = rig.world.publish_stale_ds(0, 3600);
    rig.world.add_ds(1, stale.clone(), 3600);
    rig.run_for(1).await;
    let alert = rig
        .open_alert(AlertKind::DsStale)
        .await
        .expect("ds_stale after one step");
    assert_eq!(alert.severity, Severity::Warning);
    assert!(
        names(&alert.message, &stale),
        "names the stale DS {stale}: {}",
        alert.message
    );
    assert!(rig.open_alert(AlertKind::DsMismatch).await.is_none());
    assert_eq!(rig.state().await, Some(State::Active));
}

/// Safety rules 8 and 9 across a crash: an "enter this DS" committed just before the
/// daemon died is not delivered after the restart once a parent server delegates
/// elsewhere (the restarted engine observes first; the instruction is stale by then).
async fn an_announcement_left_pending_by_a_crash_is_not_delivered_once_the_delegation_left() {
    let mut rig = Rig::with_policy(2, 2, policy()).await;
    rig.world.flip_dnssec(true);
    rig.crash.arm(CrashPoint::Committed);
    rig.tick().await; // adopted in awaiting_ds, the DS announcement committed, then the crash
    assert_eq!(rig.state().await, Some(State::AwaitingDs));
    assert_eq!(
        rig.ds_announcements().await,
        0,
        "not delivered before the crash"
    );
    rig.world.delegate(0, Delegation::Old);
    rig.run_for(1).await; // restarted: observes, steps, performs what is pending
    assert!(rig.ds_shown_to_enter().await.is_empty());
    assert_eq!(
        rig.ds_announcements().await,
        0,
        "a DS announced while parent server 0 delegates to the old provider: {:#?}",
        rig.reasons().await
    );
}

/// Safety rule 9 beside an address that cannot be asked: a parent server answering with
/// the old delegation is certain evidence that resolvers were sent there, even while
/// another parent server is silent (the verdict is `unknown`, the old delegation is
/// not). Once every address delegates to the provider, no DS before `T_delegated + old
/// NS TTL + margin`.
async fn an_old_delegation_answered_beside_a_silent_parent_is_waited_out() {
    let mut rig = Rig::with_policy(2, 2, policy()).await;
    rig.run_for(1).await;
    assert_eq!(rig.state().await, Some(State::Disabled));
    rig.world.lock().parents[0].silent = true;
    rig.world.delegate(1, Delegation::Old);
    rig.run_for(1).await; // parent server 1 answers: the old provider's name servers
    rig.world.lock().parents[0].silent = false;
    rig.world.delegate(1, Delegation::Provider);
    let delegated = rig.world.clock.now();
    rig.intent(Intent::Enabled).await;
    assert!(rig.run_until(State::AwaitingDs, 100).await);
    let hold_end = delegated
        .plus_secs(rig.world.old_ns_ttl())
        .plus(rig.policy.propagation_margin);
    let announced = first_announcement(&rig).await.expect("the DS announced");
    assert!(
        announced >= hold_end,
        "DS announced at {announced}, before every parent delegating to the provider ({delegated}) + old NS TTL + margin = {hold_end}: {:#?}",
        rig.reasons().await
    );
    assert_no_violations(&rig);
}

on_both_backends!(
    moving_in_with_an_old_ds_ends_active_in_the_safe_order,
    moving_in_with_intent_disabled_ends_disabled,
    moving_in_with_intent_disabled_switches_a_signing_provider_off_only_after_the_move,
    a_foreign_healthy_zone_with_no_intent_raises_nothing,
    the_provider_off_under_the_old_ds_of_a_foreign_zone_is_no_dnssec_off_with_ds,
    ns_changed_while_the_old_ds_stays_is_critical_within_one_step,
    moving_out_while_the_providers_ds_is_published_is_critical,
    a_delegation_change_after_a_completed_disable_is_only_noted,
    a_stale_ds_beside_the_matching_one_is_a_warning_naming_it,
    an_announcement_left_pending_by_a_crash_is_not_delivered_once_the_delegation_left,
    an_old_delegation_answered_beside_a_silent_parent_is_waited_out,
);
