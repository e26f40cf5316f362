//! The engine over the fake world: whole lifecycles with 24-hour waits in milliseconds,
//! crashes, operator intents, failures, and the guard refusing a premature "off".

use std::time::Duration;

use dnssec_warden::engine::CrashPoint;
use dnssec_warden::lifecycle::{AlertKind, Clock, Intent, State};
use dnssec_warden_test_support::fake::Delegation;
use dnssec_warden_test_support::on_both_backends;
use dnssec_warden_test_support::rig::{self, Rig, ZONE};

const HOUR: Duration = Duration::from_secs(3600);

async fn intent(rig: &Rig, intent: Intent) {
    rig.store
        .set_intent(
            ZONE,
            intent,
            false,
            &format!("operator asked: {intent}"),
            rig.world.clock.now(),
        )
        .await
        .unwrap();
}

async fn full_lifecycle_on_and_off_in_milliseconds() {
    let mut rig = Rig::new(2, 2).await;
    let started = std::time::Instant::now();
    rig.run_for(2).await;
    assert_eq!(rig.state().await, Some(State::Disabled), "adopted");

    intent(&rig, Intent::Enabled).await;
    rig.run_for(2).await;
    assert_eq!(rig.state().await, Some(State::Enabling));
    assert!(rig.world.dnssec_on());
    let hold_started = rig.world.clock.now();
    assert!(rig.run_until(State::AwaitingDs, 30).await, "after the hold");
    assert!(
        rig.world.clock.now().since(hold_started) >= HOUR,
        "not before the margin"
    );

    // The registrar is slow: 30 hours. The overdue alert fires at 24 h.
    for _ in 0..30 {
        rig.advance(HOUR);
        rig.tick().await;
    }
    let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
    assert!(
        open.iter()
            .any(|a| a.kind == AlertKind::DsUnpublishedOverdue),
        "{open:?}"
    );

    rig.world.publish_ds(0, 86_400);
    rig.world.publish_ds(1, 86_400);
    assert!(rig.run_until(State::Active, 10).await);
    assert!(
        rig.store.open_alerts(Some(ZONE)).await.unwrap().is_empty(),
        "resolved"
    );

    intent(&rig, Intent::Disabled).await;
    rig.run_for(2).await;
    assert_eq!(rig.state().await, Some(State::AwaitingDsRemoval));
    assert!(
        rig.world.dnssec_on(),
        "DNSSEC stays on while the DS is published"
    );
    rig.world.withdraw_ds(0);
    rig.world.withdraw_ds(1);
    rig.run_for(2).await;
    assert_eq!(rig.state().await, Some(State::TtlWait));
    let gone_at = rig.world.lock().ds_gone_at.expect("withdrawn");
    assert!(rig.run_until(State::Disabled, 400).await);
    assert!(!rig.world.dnssec_on());
    let off_at = rig.world.switches()[1].0;
    assert!(
        off_at.since(gone_at) >= Duration::from_secs(86_400 + 300) + HOUR,
        "TTL + margin waited"
    );

    let switches = rig.world.switches();
    assert_eq!(
        switches.iter().map(|s| s.1).collect::<Vec<_>>(),
        vec![true, false]
    );
    let gone = rig.store.events(ZONE).await.unwrap();
    assert!(
        gone.iter()
            .any(|e| e.kind == "effect" && e.reason.contains("switched off"))
    );
    assert!(
        rig.world.violations().is_empty(),
        "{:?}",
        rig.world.violations()
    );
    rig.assert_audit_chain().await;
    // A day and more of waiting took seconds of real time, not a day: the waits are
    // persisted deadlines on the engine's clock (loose bound: the machine may be busy).
    assert!(started.elapsed() < Duration::from_secs(60));
}

async fn to_active(rig: &mut Rig, ttl: u32) {
    rig.run_for(1).await;
    intent(rig, Intent::Enabled).await;
    assert!(rig.run_until(State::AwaitingDs, 30).await);
    rig.world.publish_ds(0, ttl);
    rig.world.publish_ds(1, ttl);
    assert!(rig.run_until(State::Active, 10).await);
}

/// A look may outlast a short poll (slow parent servers, a busy daemon): confirming looks
/// then come more than two polls apart though none was missed, and rule 2's gap counts
/// the longest a look may take (the step timeout). Before, `T_gone` restarted at every
/// look and the disable wait never ended.
async fn a_disable_whose_looks_outlast_a_poll_still_ends() {
    let mut rig = Rig::new(2, 2).await;
    to_active(&mut rig, 3600).await;
    intent(&rig, Intent::Disabled).await;
    assert!(rig.run_until(State::AwaitingDsRemoval, 3).await);
    rig.world.withdraw_ds(0);
    rig.world.withdraw_ds(1);
    assert!(rig.run_until(State::TtlWait, 3).await);
    // Each look ends a poll and a minute after it began (the step timeout is longer).
    let look = rig.engine.policy().poll_waiting + Duration::from_secs(60);
    for _ in 0..200 {
        if rig.state().await == Some(State::Disabled) {
            break;
        }
        let next = rig.store.zone(ZONE).await.unwrap().unwrap().next_check_at;
        if next > rig.world.clock.now() {
            rig.world.clock.set(next);
        }
        rig.advance(look);
        rig.tick().await;
    }
    let events = rig.store.events(ZONE).await.unwrap();
    assert_eq!(
        rig.state().await,
        Some(State::Disabled),
        "{:#?}",
        events.iter().rev().take(4).collect::<Vec<_>>()
    );
    assert!(
        !events
            .iter()
            .any(|e| e.reason.contains("no look confirmed")),
        "no restart of the wait"
    );
    assert!(rig.world.violations().is_empty());
}

async fn the_guard_refuses_when_the_ds_reappears_just_before_the_call() {
    let mut rig = Rig::new(2, 1).await;
    to_active(&mut rig, 3600).await;
    intent(&rig, Intent::Disabled).await;
    assert!(rig.run_until(State::AwaitingDsRemoval, 3).await);
    rig.world.withdraw_ds(0);
    rig.world.withdraw_ds(1);
    assert!(rig.run_until(State::TtlWait, 3).await);
    rig.poll_to_disable_deadline().await;
    // The step's observation still sees no DS; the guard's, a moment later, does.
    rig.world.lock().ds_reappears_after = Some(1);
    rig.tick().await;
    assert_eq!(
        rig.state().await,
        Some(State::Disabling),
        "step decided to switch off"
    );
    assert!(rig.world.dnssec_on(), "the guard stopped the call");
    let events = rig.store.events(ZONE).await.unwrap();
    let refusal = events
        .iter()
        .find(|e| e.kind == "guard")
        .expect("a guard event");
    assert!(
        refusal.reason.contains("still publishes a DS"),
        "{}",
        refusal.reason
    );
    // Next look: back to waiting for the removal; never an outage.
    rig.run_for(2).await;
    assert_eq!(rig.state().await, Some(State::AwaitingDsRemoval));
    assert!(rig.world.violations().is_empty());
}

async fn the_guard_refuses_before_the_ttl_has_passed() {
    let mut rig = Rig::new(1, 1).await;
    to_active(&mut rig, 86_400).await;
    rig.world.withdraw_ds(0);
    intent(&rig, Intent::Disabled).await;
    // Jump the row straight to `disabling` with T_gone = now: a corrupted or buggy state.
    let row = rig.store.zone_for_step(ZONE).await.unwrap().unwrap();
    let mut facts = row.row.zone.facts.clone();
    facts.lifecycle.t_gone = Some(rig.world.clock.now());
    let decision = dnssec_warden::lifecycle::Decision {
        state: Some(State::Disabling),
        facts,
        effects: vec![],
        alerts: vec![],
        notes: vec![],
        wake_at: rig.world.clock.now(),
    };
    assert!(
        rig.store
            .commit_step(
                &row,
                &decision,
                &dnssec_warden::store::ObservationText::from_whole("{}"),
                rig.world.clock.now()
            )
            .await
            .unwrap()
    );
    rig.engine.step_zone(ZONE).await.unwrap();
    assert!(rig.world.dnssec_on());
    let events = rig.store.events(ZONE).await.unwrap();
    let refusal = events
        .iter()
        .find(|e| e.kind == "guard")
        .expect("a guard event");
    assert!(refusal.reason.contains("TTL"), "{}", refusal.reason);
}

async fn a_provider_failure_changes_no_state_and_backs_off() {
    let mut rig = Rig::new(2, 1).await;
    rig.run_for(1).await;
    intent(&rig, Intent::Enabled).await;
    assert!(rig.run_until(State::AwaitingDs, 30).await);
    // The DS is published everywhere, but the provider cannot be asked for its key.
    rig.world.publish_ds(0, 3600);
    rig.world.publish_ds(1, 3600);
    rig.world.lock().provider_failures = 1000;
    for _ in 0..5 {
        rig.tick().await;
        rig.advance(Duration::from_secs(1));
    }
    assert_eq!(rig.state().await, Some(State::AwaitingDs));
    let row = rig.store.zone(ZONE).await.unwrap().unwrap();
    assert!(row.zone.facts.health.failures >= 1);
    assert!(
        row.next_check_at < rig.world.clock.now().plus(Duration::from_secs(300)),
        "retried sooner than the poll interval"
    );
    rig.world.lock().provider_failures = 0;
    assert!(rig.run_until(State::Active, 5).await);
}

async fn a_crash_between_commit_and_effect_re_observes_then_acts() {
    let mut rig = Rig::new(1, 1).await;
    rig.run_for(1).await;
    intent(&rig, Intent::Enabled).await;
    rig.crash.arm(CrashPoint::Committed);
    rig.tick().await; // commits `enabling` + EnableDnssec, then "crashes"
    assert_eq!(rig.state().await, Some(State::Enabling));
    assert!(
        !rig.world.dnssec_on(),
        "the effect did not run before the crash"
    );
    rig.tick().await; // restarted: observes again, then performs
    assert!(rig.world.dnssec_on());

    // Crash after the provider call but before it was marked done: calling again is harmless.
    let mut rig = Rig::new(1, 1).await;
    rig.run_for(1).await;
    intent(&rig, Intent::Enabled).await;
    rig.crash.arm(CrashPoint::EffectPerformed);
    rig.tick().await;
    assert!(rig.world.dnssec_on());
    rig.run_for(3).await;
    assert_eq!(
        rig.world.switches().len(),
        1,
        "the restarted step saw DNSSEC on: no second call"
    );
    rig.assert_audit_chain().await;
}

async fn an_intent_during_a_step_is_never_lost() {
    let mut rig = Rig::new(1, 1).await;
    rig.run_for(1).await;
    // Read the row, then the operator writes an intent, then the stale step commits: refused.
    let row = rig.store.zone_for_step(ZONE).await.unwrap().unwrap();
    intent(&rig, Intent::Enabled).await;
    let decision = dnssec_warden::lifecycle::Decision {
        state: row.row.zone.state,
        facts: row.row.zone.facts.clone(),
        effects: vec![],
        alerts: vec![],
        notes: vec![],
        wake_at: rig.world.clock.now().plus(HOUR),
    };
    assert!(
        !rig.store
            .commit_step(
                &row,
                &decision,
                &dnssec_warden::store::ObservationText::from_whole("{}"),
                rig.world.clock.now()
            )
            .await
            .unwrap(),
        "a step decided on a stale row is refused"
    );
    rig.run_for(2).await;
    assert_eq!(rig.state().await, Some(State::Enabling));
}

async fn dnssec_switched_off_behind_our_back_alerts_within_one_poll() {
    let mut rig = Rig::new(2, 1).await;
    to_active(&mut rig, 3600).await;
    {
        let mut w = rig.world.lock();
        w.dnssec_on = false;
        w.key = None;
    }
    rig.run_for(1).await;
    let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
    assert!(
        open.iter().any(|a| a.kind == AlertKind::DnssecOffWithDs),
        "{open:?}"
    );
    assert_eq!(
        rig.state().await,
        Some(State::Enabling),
        "the state says what is true: the zone is not active"
    );
    assert_eq!(
        rig.world.switches().len(),
        1,
        "no provider call in the step that saw the drift"
    );
    // The operator's recorded intent is "enabled": that, not a guess, switches it on again.
    rig.run_for(1).await;
    assert_eq!(rig.world.switches().len(), 2);
    assert!(rig.world.dnssec_on());
}

async fn one_zone_is_never_stepped_twice_at_once() {
    let rig = Rig::new(1, 1).await;
    let (a, b) = tokio::join!(rig.engine.step_zone(ZONE), rig.engine.step_zone(ZONE));
    let outcomes = [a.unwrap(), b.unwrap()];
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == dnssec_warden::engine::StepOutcome::Busy)
            .count(),
        1,
        "{outcomes:?}"
    );
}

/// A zone the provider does not know is a definite answer: said in status, and one audit
/// event with a count however often it is seen (not one row per poll).
async fn a_zone_unknown_to_the_provider_is_one_counted_event_and_said_in_status() {
    let mut rig = Rig::new(1, 1).await;
    rig.world.lock().zone_missing = true;
    rig.run_for(50).await;
    let events = rig.store.events(ZONE).await.unwrap();
    let notes: Vec<_> = events.iter().filter(|e| e.kind == "note").collect();
    assert_eq!(notes.len(), 1, "{events:?}");
    assert!(notes[0].reason.contains("has no zone"), "{events:?}");
    assert_eq!(notes[0].repeats, 49);
    assert_eq!(notes[0].last_seen, Some(rig.last_observed().await.unwrap()));
    // The only other event: the alert that no decision can be taken, once.
    assert!(
        events
            .iter()
            .all(|e| e.kind == "note" || e.reason.contains("observation_failing")),
        "{events:?}"
    );
    let before = events.len();
    let status = dnssec_warden::cli::status::status_json(&rig.store, Some(ZONE), &rig.policy)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status["waiting_on"], "operator");
    assert!(
        status["waiting_for"]
            .as_str()
            .unwrap()
            .contains("has no zone"),
        "{status}"
    );
    let history = dnssec_warden::cli::status::history_text(&rig.store, ZONE)
        .await
        .unwrap();
    assert!(history.contains("seen 49 more times"), "{history}");
    // Once the zone exists, it is adopted; the transition is its own event.
    rig.world.lock().zone_missing = false;
    rig.run_for(1).await;
    assert_eq!(rig.state().await, Some(State::Disabled));
    let after = rig.store.events(ZONE).await.unwrap();
    assert!(
        after[before..].iter().any(|e| e.kind == "transition"),
        "{after:?}"
    );
}

/// Safety rule 11: a provider call whose answer was lost is recorded as of unknown
/// outcome, never as "refused", and the next observation writes what happened.
async fn a_call_whose_answer_was_lost_is_unknown_then_settled() {
    let mut rig = Rig::new(1, 1).await;
    rig.run_for(1).await;
    intent(&rig, Intent::Enabled).await;
    rig.world.lock().switches_lose_answer = 1;
    rig.tick().await;
    assert!(rig.world.dnssec_on(), "the call took effect");
    rig.run_for(2).await;
    let reasons: Vec<String> = rig
        .store
        .events(ZONE)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.reason)
        .collect();
    assert!(
        !reasons.iter().any(|r| r.contains("refused")),
        "{reasons:#?}"
    );
    let unknown = reasons
        .iter()
        .position(|r| r.contains("may or may not have taken effect"))
        .expect("recorded as unknown");
    let settled = reasons
        .iter()
        .position(|r| r.contains("DNSSEC is on: the call to switch DNSSEC on took effect"))
        .expect("settled by the observation");
    assert!(unknown < settled, "{reasons:#?}");
    assert_eq!(rig.world.switches().len(), 1, "not switched twice");
}

/// A crash while "DNSSEC on" is in flight: after the restart the call is of unknown
/// outcome (not "superseded", as if never made), and the observation settles it.
async fn a_call_in_flight_at_a_crash_is_settled_by_the_next_observation() {
    let mut rig = Rig::new(1, 1).await;
    rig.run_for(1).await;
    intent(&rig, Intent::Enabled).await;
    rig.crash.arm(CrashPoint::EffectPerformed);
    rig.tick().await; // switched on, then "killed" before the row was finished
    assert!(rig.world.dnssec_on());
    rig.run_for(3).await;
    let reasons: Vec<String> = rig
        .store
        .events(ZONE)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.reason)
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("in flight when the daemon or the step stopped")),
        "{reasons:#?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("the call to switch DNSSEC on took effect")),
        "{reasons:#?}"
    );
    rig.assert_audit_chain().await;
}

async fn forty_more_zones(rig: &Rig) {
    for i in 0..40 {
        rig.store
            .ensure_zone(&format!("z{i}.test."), rig.world.clock.now())
            .await
            .unwrap();
    }
}

/// Many zones on a provider that hangs: the engine's heartbeat (what feeds the systemd
/// watchdog) keeps moving, because every step is bounded and each one that ends, however
/// it ends, is progress.
async fn a_hanging_provider_does_not_stop_the_heartbeat() {
    let rig = Rig::new(1, 1).await;
    forty_more_zones(&rig).await;
    rig.world.lock().provider_delay = Duration::from_secs(3600);
    let engine = rig::engine(&rig.world, &rig.store, &rig.crash, &rig.policy)
        .with_workers(4)
        .with_step_timeout(Duration::from_millis(100));
    let heartbeat = engine.heartbeat();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let sampler = async {
        let mut worst = Duration::ZERO;
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if let Some(age) = heartbeat.age() {
                worst = worst.max(age);
            }
        }
        let _ = stop.send(true);
        worst
    };
    let (result, worst) = tokio::join!(engine.run(stopped, Duration::from_millis(10)), sampler);
    result.unwrap();
    // Whole seconds of slack: this asserts "moves", not a speed. Before, the heartbeat
    // waited for the whole tick, which here never ends.
    assert!(
        worst < Duration::from_secs(1),
        "heartbeat stood still {worst:?}"
    );
}

/// SIGTERM finishes the steps in flight and starts no new one, however many zones are due.
async fn a_stop_ends_after_the_steps_in_flight_not_the_whole_tick() {
    let rig = Rig::new(1, 1).await;
    forty_more_zones(&rig).await;
    rig.world.lock().provider_delay = Duration::from_millis(200);
    let engine = rig::engine(&rig.world, &rig.store, &rig.crash, &rig.policy).with_workers(4);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let stopper = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let _ = stop.send(true);
    };
    let (result, ()) = tokio::join!(engine.run(stopped, Duration::from_millis(10)), stopper);
    result.unwrap();
    let observed = rig
        .store
        .zones()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.last_observed_at.is_some())
        .count();
    assert_eq!(
        observed, 4,
        "only the four steps in flight ran to their end"
    );
}

/// Safety rule 10: a forged unsigned "no DS" at one parent address (the DS is still
/// there) fails validation: the engine never sets T_gone on it, and never switches off.
async fn a_forged_no_ds_never_counts_as_gone() {
    let mut rig = Rig::new(2, 1).await;
    to_active(&mut rig, 3600).await;
    intent(&rig, Intent::Disabled).await;
    assert!(rig.run_until(State::AwaitingDsRemoval, 3).await);
    rig.world.withdraw_ds(1);
    rig.world.lock().parents[0].forged_absent = true;
    for _ in 0..10 {
        rig.advance(HOUR * 6);
        rig.tick().await;
    }
    assert_eq!(rig.state().await, Some(State::AwaitingDsRemoval));
    let row = rig.store.zone(ZONE).await.unwrap().unwrap();
    assert_eq!(row.zone.facts.lifecycle.t_gone, None);
    assert!(rig.world.dnssec_on());
    // The forger gone and the DS really removed: now it counts.
    rig.world.lock().parents[0].forged_absent = false;
    rig.world.withdraw_ds(0);
    assert!(rig.run_until(State::TtlWait, 3).await);
}

/// A fleet must not cost the provider a call a zone: a settled zone is looked at through
/// the paged zone listing; the provider is asked about it only when something changed.
/// Switched off behind the daemon's back, the listing's flag says so and the zone is asked
/// about at its next poll.
async fn a_steady_poll_asks_the_provider_nothing_until_something_changes() {
    let mut rig = Rig::new(2, 2).await;
    to_active(&mut rig, 3600).await;
    // One look in `active` asks (the first after the transition); then nothing.
    rig.advance(HOUR);
    rig.tick().await;
    let before = rig.world.lock().dnssec_gets;
    for _ in 0..8 {
        rig.advance(HOUR);
        rig.tick().await;
    }
    let (gets, listings) = {
        let w = rig.world.lock();
        (w.dnssec_gets - before, w.listings)
    };
    assert_eq!(gets, 0, "no per-zone DNSSEC call in eight steady polls");
    assert!(listings >= 1);
    assert_eq!(rig.state().await, Some(State::Active));
    let row = rig.store.zone(ZONE).await.unwrap().unwrap();
    assert_eq!(
        row.zone.facts.lifecycle.ds_to_enter, None,
        "not confirmed by the provider: not shown"
    );

    // Off behind our back: the listing says so; the zone is asked and follows.
    rig.world.flip_dnssec(false);
    for _ in 0..3 {
        rig.advance(HOUR);
        rig.tick().await;
    }
    assert!(rig.world.lock().dnssec_gets > before);
    assert_ne!(rig.state().await, Some(State::Active));
}

/// A start does not send every settled zone due at once to the provider one by one:
/// they wait for the first listing, for at most a minute after the start; past that (a
/// listing that does not come), a zone asks for itself rather than go unlooked at.
async fn after_a_start_settled_zones_wait_for_the_first_listing_a_bounded_time() {
    let mut rig = Rig::new(2, 2).await;
    to_active(&mut rig, 3600).await;
    rig.advance(HOUR);
    rig.tick().await;
    rig.world.lock().listing_delay = Duration::from_millis(300);
    // Due at the start, as every zone is after a long stop.
    rig.advance(HOUR);
    rig.restart().await;
    let before = rig.world.lock().dnssec_gets;
    rig.tick().await;
    assert_eq!(
        rig.world.lock().dnssec_gets - before,
        0,
        "waited for the listing"
    );
    assert_eq!(rig.state().await, Some(State::Active));
    assert!(rig.last_observed().await.is_some());

    // A listing that does not come: after the minute, the zone asks for itself.
    rig.world.lock().listing_delay = Duration::from_secs(3600);
    rig.advance(HOUR);
    rig.restart().await;
    rig.advance(Duration::from_secs(120));
    let before = rig.world.lock().dnssec_gets;
    tokio::time::timeout(Duration::from_secs(30), rig.tick())
        .await
        .expect("no step waits for a listing past its minute");
    assert!(rig.world.lock().dnssec_gets > before, "asked for itself");
    assert_eq!(rig.state().await, Some(State::Active));
}

/// DESIGN.md section 4, "Sampled looks": once a routine full look found every address
/// saying the same, a settled zone's polls are samples (no full look, only `sampled_at`
/// moves); drift at every address (the DS removed at every parent server, DNSSEC off at
/// the provider, a re-delegation) is seen at the very next poll, through the full look
/// the disagreeing sample brings; drift at one parent address of three within three
/// polls, as the sample's rotation reaches it.
async fn a_settled_zone_is_watched_from_samples_and_drift_is_seen_at_the_next_poll() {
    for drift in ["ds removed", "provider off", "re-delegated", "one address"] {
        let mut rig = Rig::new(3, 2).await;
        rig.run_for(1).await;
        intent(&rig, Intent::Enabled).await;
        assert!(rig.run_until(State::AwaitingDs, 30).await);
        for i in 0..3 {
            rig.world.publish_ds(i, 3600);
        }
        assert!(rig.run_until(State::Active, 10).await);
        // The look after the transition asks the provider; the next is routine.
        rig.run_for(2).await;
        let full = rig.last_observed().await;
        rig.run_for(5).await;
        let row = rig.store.zone(ZONE).await.unwrap().unwrap();
        assert_eq!(
            row.last_observed_at, full,
            "{drift}: five polls, all samples"
        );
        assert!(row.sampled_at > full, "{drift}: {:?}", row.sampled_at);
        assert_eq!(rig.state().await, Some(State::Active));

        let at = rig.world.clock.now();
        let polls = match drift {
            "ds removed" => {
                (0..3).for_each(|i| rig.world.withdraw_ds(i));
                1
            }
            "provider off" => {
                rig.world.flip_dnssec(false);
                1
            }
            "re-delegated" => {
                rig.world.delegate_all(Delegation::Old);
                1
            }
            _ => {
                rig.world.withdraw_ds(1);
                3
            }
        };
        rig.run_for(polls).await;
        let row = rig.store.zone(ZONE).await.unwrap().unwrap();
        assert!(
            row.last_observed_at.is_some_and(|t| t >= at),
            "{drift}: a full look within {polls} poll(s)"
        );
        let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
        if polls == 1 {
            assert!(
                row.zone.state != Some(State::Active) || !open.is_empty(),
                "{drift}: the zone's word changed at once: {:?} {open:?}",
                row.zone.state
            );
        } else {
            assert!(row.zone.facts.health.partial_since.is_some(), "{drift}");
        }
    }
}

/// A bug in one zone's step (here a panic at its first crash point) ends that step only:
/// the tick goes on, the zone is looked at again after the retry time (not at once and
/// forever), and a sound engine then steps it.
async fn a_step_that_panics_ends_alone_and_is_tried_again_later() {
    let mut rig = Rig::new(1, 1).await;
    let buggy = rig
        .engine
        .clone()
        .with_crash_hook(std::sync::Arc::new(|_| panic!("a bug in a step")));
    let before = rig.world.clock.now();
    assert_eq!(
        buggy.tick().await.unwrap(),
        1,
        "the step was taken and ended"
    );
    let row = rig.store.zone(ZONE).await.unwrap().unwrap();
    assert_eq!(row.zone.state, None, "nothing of the step was written");
    assert_eq!(
        row.next_check_at,
        before.plus(rig.policy.retry_base),
        "looked at again after the retry time"
    );
    assert_eq!(buggy.tick().await.unwrap(), 0, "not due again at once");
    rig.advance(rig.policy.retry_base);
    rig.tick().await;
    assert_eq!(rig.state().await, Some(State::Disabled));
}

/// The policy of a parent `test.` that is told of a changed CDS by NOTIFY(CDS) to
/// 127.0.0.53 port 5300 (as its DSYNC record would say).
fn notified_parent() -> dnssec_warden::lifecycle::Policy {
    use dnssec_warden::lifecycle::parent_way::{DsPathSetting, ParentWay};
    let mut policy = rig::policy();
    policy.parents.parents.insert(
        "test.".into(),
        ParentWay {
            ds_path: DsPathSetting::Notify,
            notify_target: Some("127.0.0.53".into()),
            notify_port: 5300,
            ..ParentWay::default()
        },
    );
    policy
}

/// A zone whose provider publishes the CDS its API is set to, under that parent, brought
/// to `awaiting_ds` with the DS request the registry's: the CDS of the key is set, and the
/// next look is the one at which every child address serves it.
async fn awaiting_the_registry() -> Rig {
    let mut rig = Rig::with_policy(2, 2, notified_parent()).await;
    {
        let mut w = rig.world.lock();
        w.cds_control = true;
        w.cds_served = true;
    }
    rig.run_for(1).await;
    intent(&rig, Intent::Enabled).await;
    assert!(rig.run_until(State::AwaitingDs, 20).await);
    let waiting = rig.waiting_for().await;
    assert!(waiting.contains("the registry of test."), "{waiting}");
    assert!(
        rig.world.notifies().is_empty(),
        "no child address served the CDS yet: {:?}",
        rig.world.notifies()
    );
    rig
}

/// NOTIFY(CDS) is an effect like the others: nothing is sent by a step that dies before
/// its commit, nor by one that dies right after it (the row is owed); the restarted
/// step's newer commit voids the owed row and sends one NOTIFY, not a stale one besides;
/// the history says it was sent and what came of it, and the next step reads that back
/// (the wait names it), sending no other within the registry's scan period.
async fn a_notify_is_sent_after_the_commit_and_never_before() {
    let mut rig = awaiting_the_registry().await;
    // This look sees the CDS at every child address: the NOTIFY is due, and the step
    // dies before anything is written.
    rig.crash.arm(CrashPoint::Observed);
    rig.tick().await;
    assert_eq!(rig.crash.armed(), None, "the crash point was reached");
    assert!(
        rig.world.notifies().is_empty(),
        "no NOTIFY before the commit: {:?}",
        rig.world.notifies()
    );
    rig.crash.arm(CrashPoint::Committed);
    rig.tick().await;
    assert_eq!(rig.crash.armed(), None);
    assert!(rig.world.notifies().is_empty(), "committed, not sent");
    let owed = rig.store.pending_effects(ZONE).await.unwrap();
    assert!(
        matches!(
            owed.as_slice(),
            [item] if matches!(item.effect, dnssec_warden::lifecycle::Effect::NotifyCds(_))
        ),
        "{owed:?}"
    );
    rig.tick().await;
    let sent = rig.world.notifies();
    assert_eq!(sent.len(), 1, "one NOTIFY, none stale besides: {sent:?}");
    assert_eq!(sent[0].1, ZONE);
    assert_eq!(sent[0].2, "127.0.0.53:5300".parse().unwrap());
    assert!(rig.store.pending_effects(ZONE).await.unwrap().is_empty());
    assert_eq!(
        rig.effect_events("NOTIFY(CDS) for the key").await,
        1,
        "{:#?}",
        rig.reasons().await
    );
    assert!(
        rig.reasons()
            .await
            .iter()
            .any(|r| r.starts_with("NOTIFY(CDS) for the key")
                && r.ends_with("(127.0.0.53 port 5300): acknowledged")),
        "{:#?}",
        rig.reasons().await
    );
    // The next look reads what came of it from the outbox.
    rig.run_for(2).await;
    let facts = rig.store.zone(ZONE).await.unwrap().unwrap().zone.facts;
    let last = facts
        .parent_way
        .cds_notified
        .expect("the last NOTIFY in the facts");
    assert!(last.acknowledged, "{last:?}");
    let waiting = rig.waiting_for().await;
    assert!(
        waiting.contains("NOTIFY(CDS) sent at") && waiting.contains(": acknowledged"),
        "{waiting}"
    );
    rig.run_for(5).await;
    assert_eq!(
        rig.world.notifies().len(),
        1,
        "not again within the scan period"
    );
    // The registry acts on it.
    assert!(rig.world.registry_scan(3600));
    assert!(rig.run_until(State::Active, 20).await);
    rig.assert_audit_chain().await;
}

/// A NOTIFY that is not answered is said (its row failed, the history and the wait with
/// the real answer) and sent again at the zone's next look, which comes when it would
/// have come anyway; a step that dies after sending it leaves it owed, and it goes again.
async fn a_notify_not_acknowledged_is_said_and_sent_again_at_the_next_look() {
    let mut rig = awaiting_the_registry().await;
    rig.world.lock().notify_answer = dnssec_warden::dns::notify::NotifyOutcome::NoAnswer;
    rig.tick().await;
    assert_eq!(rig.world.notifies().len(), 1);
    let row = rig.store.zone(ZONE).await.unwrap().unwrap();
    assert!(
        row.next_check_at >= rig.world.clock.now().plus(rig.policy.poll_waiting),
        "the next look not pulled in by the NOTIFY's failure"
    );
    assert!(
        rig.reasons()
            .await
            .iter()
            .any(|r| r.starts_with("NOTIFY(CDS) for the key")
                && r.ends_with(": no answer to 1 attempts")),
        "{:#?}",
        rig.reasons().await
    );
    rig.world.clock.set(row.next_check_at);
    rig.tick().await;
    assert_eq!(rig.world.notifies().len(), 2, "again at the next look");
    let waiting = rig.waiting_for().await;
    assert!(waiting.contains("no answer to 1 attempts"), "{waiting}");
    // Sent, then the step dies before its row is marked: owed, and it goes again.
    rig.world.lock().notify_answer = dnssec_warden::dns::notify::NotifyOutcome::Acknowledged;
    let row = rig.store.zone(ZONE).await.unwrap().unwrap();
    rig.world.clock.set(row.next_check_at);
    rig.crash.arm(CrashPoint::EffectPerformed);
    rig.tick().await;
    assert_eq!(rig.crash.armed(), None);
    assert_eq!(rig.world.notifies().len(), 3);
    rig.tick().await;
    assert_eq!(rig.world.notifies().len(), 4, "owed: sent again");
    rig.run_for(3).await;
    assert_eq!(rig.world.notifies().len(), 4, "acknowledged: not again");
    let facts = rig.store.zone(ZONE).await.unwrap().unwrap().zone.facts;
    assert!(
        facts
            .parent_way
            .cds_notified
            .is_some_and(|n| n.acknowledged)
    );
}

on_both_backends!(
    a_notify_is_sent_after_the_commit_and_never_before,
    a_notify_not_acknowledged_is_said_and_sent_again_at_the_next_look,
    a_step_that_panics_ends_alone_and_is_tried_again_later,
    full_lifecycle_on_and_off_in_milliseconds,
    a_disable_whose_looks_outlast_a_poll_still_ends,
    the_guard_refuses_when_the_ds_reappears_just_before_the_call,
    the_guard_refuses_before_the_ttl_has_passed,
    a_provider_failure_changes_no_state_and_backs_off,
    a_crash_between_commit_and_effect_re_observes_then_acts,
    an_intent_during_a_step_is_never_lost,
    dnssec_switched_off_behind_our_back_alerts_within_one_poll,
    one_zone_is_never_stepped_twice_at_once,
    a_zone_unknown_to_the_provider_is_one_counted_event_and_said_in_status,
    a_call_whose_answer_was_lost_is_unknown_then_settled,
    a_call_in_flight_at_a_crash_is_settled_by_the_next_observation,
    a_hanging_provider_does_not_stop_the_heartbeat,
    a_stop_ends_after_the_steps_in_flight_not_the_whole_tick,
    a_forged_no_ds_never_counts_as_gone,
    a_steady_poll_asks_the_provider_nothing_until_something_changes,
    after_a_start_settled_zones_wait_for_the_first_listing_a_bounded_time,
    a_settled_zone_is_watched_from_samples_and_drift_is_seen_at_the_next_poll,
);
