//! Property tests: random sequences of registrar actions, silent servers, lagging child
//! servers, provider failures, operator intents, clock jumps and crashes (the engine is
//! dropped between two operations and restarted from the database). After every sequence:
//! - the provider never received "DNSSEC off" while a parent server published a DS, nor
//!   before the DS's TTL plus the margin had passed since it was gone (checked by the fake
//!   provider at the moment of the call, against the ground truth: a DS counts once a
//!   look saw it or it stayed published for two polls), nor while DNSSEC was
//!   off already, unless someone switched it off behind the daemon's back since its own
//!   last switch (an enable overtaken by a disable before it was sent needs no "off");
//! - a DS is shown "to enter" (status, the overdue and hook alerts) only while the provider
//!   signs with that key and every child server serves it (safety rule 8), checked against
//!   the ground truth after every step that observed the zone, with DNSSEC switched off and
//!   on and the key rolled behind the daemon's back at any point;
//! - the zone is still there, and its audit trail is an unbroken chain of transitions;
//! - with a cooperative world afterwards, the zone reaches what the last intent asked for.
//!
//! The second property adds the delegation (DESIGN.md "Moving in", "Moving out", safety
//! rule 9): worlds that start delegated to the provider or moving in (delegated to an old
//! provider, with or without its DS), and full and partial re-delegations, old-DS
//! publications and removals at random moments. After every step, against the ground
//! truth of the fake world:
//! - no DS for the provider's key is announced (an "enter this DS" delivered) or shown
//!   "to enter" (facts, status, alerts) while any parent server delegates elsewhere, nor
//!   before `T_delegated + old NS TTL + propagation_margin`;
//! - DNSSEC is never switched off while a parent server publishes a DS (as above), and
//!   the engine never asks for "DNSSEC off" while the zone moves in;
//! - the NS change is asked for (a "change the NS" delivered) only while no parent server
//!   publishes a DS and the last DS a look saw has been gone for its TTL (rule 9: the old
//!   DS removed and waited out first). A parent server may answer the DS question and
//!   time out on the NS question (`SilenceParentNs`).
//!
//! `PROPTEST_CASES` overrides the number of sequences (default 1200, and 400 for the
//! delegation property; the defaults keep the README's test command within its time on
//! two cores, and a deeper search is `PROPTEST_CASES=20000 cargo test --test
//! engine engine_props::`). Both properties also run on PostgreSQL, on fewer sequences (a
//! database each): `POSTGRES_PROPTEST_CASES` (default 40 and 20).
//! Sequences are drawn by proptest's XorShift generator (`PROPTEST_RNG_SEED` replays one):
//! its default, ChaCha, runs its vector code unoptimised in a test build.

use std::time::Duration;

use dnssec_warden::dnssec::CdsPublication;
use dnssec_warden::engine::CrashPoint;
use dnssec_warden::lifecycle::{Clock, Effect, Intent, ManualClock, Policy, State, Timestamp};
use dnssec_warden::store::{EventRow, ZoneRow};
use dnssec_warden_test_support::fake::{Delegation, FakeWorld};
use dnssec_warden_test_support::postgres;
use dnssec_warden_test_support::rig::{self, Backend, Rig, T0, ZONE};
use proptest::prelude::*;
use proptest::test_runner::RngAlgorithm;

#[derive(Debug, Clone)]
enum Op {
    Intent(Intent, bool),
    Publish(usize),
    PublishWrong(usize),
    Withdraw(usize),
    SilenceParent(usize, bool),
    /// A parent server answers the DS question but times out on the NS question.
    SilenceParentNs(usize, bool),
    LagChild(usize, bool),
    SilenceChild(usize, bool),
    /// A child server serves the key without a valid signature by it (or again with one).
    StripSignatures(usize, bool),
    ProviderFails(u32),
    /// DNSSEC switched at the provider outside the daemon.
    Flip(bool),
    Rekey,
    Advance(u64),
    Tick,
    Crash(CrashPoint),
    /// The registrar re-delegates one parent server (a partial re-delegation).
    Delegate(usize, Delegation),
    /// ... or every parent server at once.
    DelegateAll(Delegation),
    /// The old provider's DS published at, or removed from, one parent server.
    PublishOld(usize),
    RemoveOld(usize),
    /// The next switch takes effect and is answered 502, and the client's retry is then
    /// held by another zone's `Retry-After` (safety rule 11).
    SentThenHeld,
    /// The parent's registry scans the child's CDS and acts on it (`FakeWorld::registry_scan`).
    RegistryScan,
    /// The next CDS setting writes its first half only and answers a 502 (an answer lost
    /// between its two writes, rules 11 and 14): it must be made whole again.
    CdsHalfApplied,
}

/// How a sequence's world starts.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// Delegated to the provider everywhere (the first property's world).
    Provider,
    /// Moving in: delegated to the old provider everywhere, with its DS or without.
    MovingIn { old_ds: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let intent = prop_oneof![
        Just(Intent::Enabled),
        Just(Intent::Disabled),
        Just(Intent::None)
    ];
    let crash = prop_oneof![
        Just(CrashPoint::Observed),
        Just(CrashPoint::Committed),
        Just(CrashPoint::EffectPerformed)
    ];
    prop_oneof![
        2 => (intent, any::<bool>()).prop_map(|(i, n)| Op::Intent(i, n)),
        2 => (0..2usize).prop_map(Op::Publish),
        1 => (0..2usize).prop_map(Op::PublishWrong),
        2 => (0..2usize).prop_map(Op::Withdraw),
        1 => (0..2usize, any::<bool>()).prop_map(|(i, b)| Op::SilenceParent(i, b)),
        1 => (0..2usize, any::<bool>()).prop_map(|(i, b)| Op::LagChild(i, b)),
        1 => (0..2usize, any::<bool>()).prop_map(|(i, b)| Op::SilenceChild(i, b)),
        1 => (0..2usize, any::<bool>()).prop_map(|(i, b)| Op::StripSignatures(i, b)),
        1 => (0..4u32).prop_map(Op::ProviderFails),
        1 => Just(Op::SentThenHeld),
        1 => Just(Op::CdsHalfApplied),
        1 => any::<bool>().prop_map(Op::Flip),
        1 => Just(Op::Rekey),
        3 => prop_oneof![Just(1u64), Just(60), Just(300), Just(3600), Just(6 * 3600), Just(30 * 3600)]
            .prop_map(Op::Advance),
        6 => Just(Op::Tick),
        2 => crash.prop_map(Op::Crash),
    ]
}

fn delegation() -> impl Strategy<Value = Delegation> {
    prop_oneof![Just(Delegation::Provider), Just(Delegation::Old)]
}

/// The first property's operations plus re-delegations and the old DS.
fn delegation_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => op(),
        2 => (0..2usize, delegation()).prop_map(|(i, d)| Op::Delegate(i, d)),
        1 => delegation().prop_map(Op::DelegateAll),
        1 => (0..2usize).prop_map(Op::PublishOld),
        2 => (0..2usize).prop_map(Op::RemoveOld),
        1 => (0..2usize, any::<bool>()).prop_map(|(i, b)| Op::SilenceParentNs(i, b)),
    ]
}

/// The first property's operations plus the registry's scans.
fn registry_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => op(),
        3 => Just(Op::RegistryScan),
    ]
}

/// Who takes the DS to the parent in a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParentKind {
    /// A person at the registrar (the ops publish and withdraw; settling plays them).
    Registrar,
    /// `test.`'s registry scans the child's CDS (`[parents."test."] ds_path = "cds-scan"`):
    /// it alone moves the DS while settling, with nobody at the registrar.
    Registry,
}

/// A registry publishes every DS with its one TTL (a TLD's policy), chosen per sequence.
async fn apply(rig: &mut Rig, op: &Op, ttl: u32) {
    match op {
        Op::Intent(intent, never) => {
            let now = rig.world.clock.now();
            rig.store
                .set_intent(ZONE, *intent, *never, "operator (proptest)", now)
                .await
                .unwrap();
        }
        Op::Publish(i) => rig.world.publish_ds(*i, ttl),
        Op::PublishWrong(i) => rig.world.publish_wrong_ds(*i, ttl),
        Op::Withdraw(i) => rig.world.withdraw_ds(*i),
        Op::SilenceParent(i, b) => rig.world.lock().parents[*i].silent = *b,
        Op::SilenceParentNs(i, b) => rig.world.lock().parents[*i].ns_silent = *b,
        Op::LagChild(i, b) => rig.world.lock().children[*i].lagging = *b,
        Op::SilenceChild(i, b) => rig.world.lock().children[*i].silent = *b,
        Op::StripSignatures(i, b) => rig.world.lock().children[*i].unsigned = *b,
        Op::ProviderFails(n) => rig.world.lock().provider_failures = *n,
        Op::SentThenHeld => rig.world.lock().switches_sent_then_held = 1,
        Op::CdsHalfApplied => rig.world.lock().cds_half_applied = 1,
        Op::Flip(on) => rig.world.flip_dnssec(*on),
        Op::Rekey => rig.world.rekey(),
        Op::Advance(secs) => rig.advance(Duration::from_secs(*secs)),
        Op::Tick => tick(rig).await,
        Op::Crash(point) => {
            rig.crash.arm(*point);
            tick(rig).await;
        }
        Op::Delegate(i, d) => rig.world.delegate(*i, *d),
        Op::DelegateAll(d) => rig.world.delegate_all(*d),
        Op::PublishOld(i) => rig.world.publish_old_ds(*i, ttl),
        Op::RemoveOld(i) => rig.world.remove_old_ds(*i),
        Op::RegistryScan => {
            rig.world.registry_scan(ttl);
        }
    }
}

/// A tick. A crash point armed stays armed until a step reaches it, perhaps ticks later
/// (a zone not due is not stepped): when the engine dies at `Observed`, what it saw of
/// the delegation and of a DS died with it and is no evidence the restarted engine could
/// have (the ground truth stays sound). A DS only that look saw is as one published
/// between two looks, unless it stayed published for two polls: the oracle counts that
/// one, seen or not (rule 2's `gone_confirmation_gap`).
async fn tick(rig: &mut Rig) {
    let seen_before = {
        let w = rig.world.lock();
        (w.old_delegation_seen, w.provider_ns_known, w.ds_seen)
    };
    let armed = rig.crash.armed();
    rig.tick().await;
    if armed == Some(CrashPoint::Observed) && rig.crash.armed().is_none() {
        let mut w = rig.world.lock();
        w.old_delegation_seen &= seen_before.0;
        w.provider_ns_known &= seen_before.1;
        w.ds_seen &= seen_before.2;
    }
}

/// What the last check saw, to tell what a tick changed.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    observed: Option<dnssec_warden::lifecycle::Timestamp>,
    announcements: i64,
    /// NS changes asked for.
    delegation_requests: i64,
    cds_sets: usize,
    /// Reads of the provider's CDS setting.
    cds_reads: usize,
    /// Provider calls that will fail next (a withdrawal may not get through).
    failures: u32,
    /// CDS settings that will be half applied next.
    halves_armed: u32,
}

async fn seen(rig: &Rig) -> Seen {
    seen_now(rig).await.0
}

/// What a check reads of the store, once for all its questions: nothing writes between
/// them (these sequences run no sinks or hooks beside the engine, and the engine only
/// within a tick).
struct Read {
    /// The zone's row.
    row: ZoneRow,
    /// [`said_not_sent`] of the audit trail.
    said_not_sent: Option<String>,
}

/// [`Seen`] now, and the store as read for it.
async fn seen_now(rig: &Rig) -> (Seen, Read) {
    let sent = rig.world.lock().sent_unanswered.clone();
    let (announcements, delegation_requests, said_not_sent) = rig
        .with_events(|events| {
            (
                rig::effect_events(events, rig::DS_ANNOUNCED),
                rig::effect_events(events, rig::NS_CHANGE_ASKED),
                said_not_sent(&sent, events),
            )
        })
        .await;
    let row = rig.store.zone(ZONE).await.unwrap().expect("the zone");
    // One lock, released before anything else takes it.
    let (cds_sets, cds_reads, failures, halves_armed) = {
        let w = rig.world.lock();
        (
            w.cds_sets.len(),
            w.cds_reads,
            w.provider_failures,
            w.cds_half_applied,
        )
    };
    let seen = Seen {
        observed: row.last_observed_at,
        announcements,
        delegation_requests,
        cds_sets,
        cds_reads,
        failures,
        halves_armed,
    };
    let read = Read { row, said_not_sent };
    (seen, read)
}

/// The audit trail and the world's delegation log, for a failure's message.
async fn trail(rig: &Rig) -> String {
    let events: Vec<String> = rig
        .store
        .events(ZONE)
        .await
        .unwrap()
        .into_iter()
        .map(|e| format!("{} {} {:?}->{:?}: {}", e.at, e.kind, e.from, e.to, e.reason))
        .collect();
    let w = rig.world.lock();
    format!(
        "delegations {:?}, T_delegated {:?}; audit trail:\n{}",
        w.delegation_log,
        w.delegated_at,
        events.join("\n")
    )
}

/// The invariants checked after every operation (`before`: what was seen before it).
async fn check_invariants(rig: &Rig, before: Seen, what: &str) -> Result<Seen, TestCaseError> {
    let (now, read) = seen_now(rig).await;
    let row = &read.row;
    let margin = rig.policy.propagation_margin;
    if now.announcements > before.announcements {
        // Safety rule 9: an "enter this DS" delivered now.
        if let Err(why) = rig.world.ds_announce_allowed(margin) {
            let trail = trail(rig).await;
            prop_assert!(false, "after {what}: a DS was announced {why}; {trail}");
        }
        // Safety rule 4: only for a key every child server serves, signed by it.
        if !rig.world.key_served_signed() {
            let trail = trail(rig).await;
            prop_assert!(
                false,
                "after {what}: a DS was announced while not every child server serves the provider's key, validly signed; {trail}"
            );
        }
    }
    if now.delegation_requests > before.delegation_requests {
        // Safety rule 9: the old DS removed and its TTL waited out before the NS change
        // is asked for.
        if let Err(why) = rig.world.ns_change_allowed() {
            let trail = trail(rig).await;
            prop_assert!(
                false,
                "after {what}: the NS change was asked for {why}; {trail}"
            );
        }
    }
    if now.observed != before.observed {
        let alerts = rig.store.open_alerts(Some(ZONE)).await.unwrap();
        let shown = rig.ds_shown_in(row.clone(), alerts);
        if !shown.is_empty()
            && let Err(why) = rig.world.ds_announce_allowed(margin)
        {
            let trail = trail(rig).await;
            prop_assert!(
                false,
                "after {what}: {shown:?} shown to enter {why}; {trail}"
            );
        }
        let truth = rig.world.enterable_ds();
        for line in shown {
            prop_assert!(
                truth.as_deref() == Some(line.as_str()),
                "after {what}: {line} shown to enter, but the world allows {truth:?}"
            );
        }
    }
    // Safety rule 14: a CDS is an announcement. The key's only while the ground truth
    // allows its DS to be shown to enter (rules 4, 8, 9), never on the intent `disabled`;
    // the delete request only on it.
    let sets: Vec<_> = rig.world.lock().cds_sets[before.cds_sets..].to_vec();
    for (at, to) in sets {
        let intent = Some(row.zone.intent);
        match to {
            CdsPublication::Key => {
                let allowed = rig.world.ds_announce_allowed(margin);
                if rig.world.enterable_ds().is_none() || allowed.is_err() {
                    let trail = trail(rig).await;
                    prop_assert!(
                        false,
                        "after {what}: the CDS of the key was published at {at} while its DS may not be announced ({allowed:?}); {trail}"
                    );
                }
                prop_assert!(
                    intent != Some(Intent::Disabled),
                    "the CDS of the key published at {} with the intent disabled",
                    at
                );
            }
            CdsPublication::Delete => {
                prop_assert_eq!(intent, Some(Intent::Disabled), "CDS delete at {}", at);
            }
            CdsPublication::Nothing => {}
        }
    }
    // ... and it stays so: a step that read the setting (not a settled zone's routine
    // look: the fake counts the reads) withdraws what is no longer allowed, unless the
    // call failed (an injected provider failure) or is still owed (behind a notification
    // ahead of it, or the engine died before performing it).
    let state = row.zone.state;
    let cds_read = now.cds_reads != before.cds_reads;
    if now.observed != before.observed && cds_read && before.failures == 0 && what == "Tick" {
        let (cds, cdnskey) = {
            let w = rig.world.lock();
            (w.cds, w.cdnskey)
        };
        // Rules 11 and 14: a setting half applied (its answer lost between the two
        // writes) is whole again after the next step that read it, and as the zone
        // wants it now, unless this very step's setting was half applied again.
        let pending = rig.store.pending_effects(ZONE).await.unwrap();
        let owed_cds = pending
            .iter()
            .any(|e| matches!(e.effect, Effect::SetCds { .. }));
        if before.halves_armed == 0 && !owed_cds {
            let wanted = dnssec_warden::lifecycle::rules::cds_wanted(
                row.zone.intent,
                row.zone.state,
                &row.zone.facts.lifecycle,
            );
            if (cds, cdnskey) != (wanted, wanted) {
                let trail = trail(rig).await;
                prop_assert!(
                    false,
                    "after {what}: the provider's CDS setting is CDS {cds:?}, CDNSKEY {cdnskey:?} in {state:?}, not whole as wanted ({wanted:?}); {trail}"
                );
            }
        }
        let intent = Some(row.zone.intent);
        let allowed = rig.world.ds_announce_allowed(margin);
        let owed = pending
            .iter()
            .any(|e| matches!(e.effect, Effect::SetCds { to } if to != cds));
        if cds == CdsPublication::Key
            && !owed
            && (rig.world.enterable_ds().is_none() || allowed.is_err())
        {
            let trail = trail(rig).await;
            prop_assert!(
                false,
                "after {what}: the CDS of the key is still published in {state:?} though its DS may not be announced ({allowed:?}); {trail}"
            );
        }
        if cds == CdsPublication::Delete && !owed && intent != Some(Intent::Disabled) {
            let trail = trail(rig).await;
            prop_assert!(
                false,
                "after {what}: the CDS delete request still published in {state:?} with the intent {intent:?}; {trail}"
            );
        }
    }
    let violations = rig.world.violations();
    if !violations.is_empty() {
        let trail = trail(rig).await;
        prop_assert!(false, "after {what}: {violations:?}; {trail}");
    }
    if let Some(said) = read.said_not_sent {
        let trail = trail(rig).await;
        prop_assert!(false, "after {what}: {said}; {trail}");
    }
    Ok(now)
}

/// Rule 11 for the CDS setting: every setting left half applied (its answer lost) is
/// settled by a later look, never left unsaid.
async fn half_applied_settled(rig: &Rig) -> Result<(), TestCaseError> {
    let left = rig.world.lock().cds_halves_left.clone();
    let events = rig.store.events(rig::ZONE).await.unwrap();
    for (at, _) in left {
        let found = events.iter().any(|e| {
            e.at >= at
                && e.reason.contains("its CDS publication is")
                && (e.reason.contains("was half applied")
                    || e.reason.contains(" took effect")
                    || e.reason.contains("did not take effect"))
        });
        if !found {
            let trail = trail(rig).await;
            prop_assert!(
                false,
                "the CDS setting half applied at {at} was never settled; {trail}"
            );
        }
    }
    Ok(())
}

/// The action of a switch, as the audit trail names it.
fn switch_action(enabled: bool) -> String {
    format!("switch DNSSEC {}", if enabled { "on" } else { "off" })
}

/// Safety rule 11 against the ground truth: a switch that left the host (the fake
/// performed it, `sent`) recorded in `events` as not performed or refused by the call at
/// that moment.
fn said_not_sent(sent: &[(Timestamp, bool)], events: &[EventRow]) -> Option<String> {
    sent.iter().find_map(|(at, enabled)| {
        let action = switch_action(*enabled);
        let untrue = [
            format!("the call to {action} was not performed"),
            format!("provider refused to {action}"),
        ];
        events
            .iter()
            .find(|e| e.at == *at && untrue.iter().any(|u| e.reason.contains(u.as_str())))
            .map(|e| {
                format!(
                    "a call that left the host at {at} is recorded as: {}",
                    e.reason
                )
            })
    })
}

/// Every switch that left the host without a readable answer is settled by a later
/// observation ("took effect" or "did not take effect"), never left unsaid.
async fn sent_calls_settled(rig: &Rig) -> Result<(), TestCaseError> {
    let sent = rig.world.lock().sent_unanswered.clone();
    let events = rig.store.events(rig::ZONE).await.unwrap();
    for (at, enabled) in sent {
        let settled = format!("the call to {}", switch_action(enabled));
        let found = events.iter().any(|e| {
            e.at >= at
                && e.reason.contains(&settled)
                && (e.reason.contains(" took effect") || e.reason.contains("did not take effect"))
        });
        if !found {
            let trail = trail(rig).await;
            prop_assert!(false, "the switch sent at {at} was never settled; {trail}");
        }
    }
    Ok(())
}

/// The world turns helpful: servers answer, the registrar does what it is told (the
/// NS changed once asked for; after a while, a move in is finished bluntly).
async fn settle(
    rig: &mut Rig,
    ttl: u32,
    goal: Option<State>,
    parent: ParentKind,
) -> Result<(), TestCaseError> {
    {
        let mut w = rig.world.lock();
        w.provider_failures = 0;
        for p in &mut w.parents {
            p.silent = false;
            p.ns_silent = false;
        }
        for c in &mut w.children {
            c.silent = false;
            c.lagging = false;
            c.unsigned = false;
        }
    }
    rig.crash.arm_none();
    let mut steady = 0;
    let mut stuck_on_registry = 0;
    let mut before = seen(rig).await;
    for round in 0..200 {
        // One read of the zone serves the round's questions (nothing writes before the tick).
        let row = rig.store.zone(ZONE).await.unwrap().expect("the zone");
        let state = row.zone.state;
        // Done once the goal (or, with no intent, any steady state) held for a few looks,
        // at the provider's delegation (the goal's meaning).
        let settled = match goal {
            Some(goal) => state == Some(goal),
            None => state.is_some_and(State::is_steady),
        } && rig.world.delegated_to_provider();
        steady = if settled { steady + 1 } else { 0 };
        if steady > 3 {
            break;
        }
        // The engine had a few looks to ask for the NS change itself.
        if round == 10 {
            rig.world.remove_old_ds_everywhere();
            rig.world.delegate_all(Delegation::Provider);
        }
        // With a registry, the registrar acts only where the daemon asked it (the
        // request did not go to the registry, or the registry was late); while the daemon
        // waits on the registry, the registry must be able to act.
        let on_registry =
            parent == ParentKind::Registry && row.zone.facts.parent_way.registry_since.is_some();
        if parent == ParentKind::Registry {
            let acted = rig.world.registry_scan(ttl);
            stuck_on_registry = if on_registry && !acted {
                stuck_on_registry + 1
            } else {
                0
            };
            prop_assert!(
                stuck_on_registry < 4,
                "waits on a registry that cannot act (the child publishes no signal it takes)\n{}",
                trail(rig).await
            );
        }
        match state {
            _ if on_registry => {}
            Some(State::AwaitingDs) | Some(State::DsObserved) => {
                rig.world.publish_ds(0, ttl);
                rig.world.publish_ds(1, ttl);
            }
            Some(State::AwaitingDsRemoval) => {
                rig.world.withdraw_ds(0);
                rig.world.withdraw_ds(1);
            }
            Some(State::AwaitingDelegation) => rig.world.delegate_all(Delegation::Provider),
            _ => {}
        }
        rig.run_for(1).await;
        before = check_invariants(rig, before, &format!("settling, round {round}")).await?;
    }
    Ok(())
}

/// One sequence; `old_ns_ttls`: the parent's NS TTL for the old delegation and the old
/// servers' apex NS TTL.
fn check(
    ops: Vec<Op>,
    ttl: u32,
    start: Start,
    old_ns_ttls: (u32, u32),
    backend: Backend,
) -> Result<(), TestCaseError> {
    check_with(ops, ttl, start, old_ns_ttls, backend, ParentKind::Registrar)
}

/// As [`check`], with the DS taken to the parent by `parent`.
fn check_with(
    ops: Vec<Op>,
    ttl: u32,
    start: Start,
    old_ns_ttls: (u32, u32),
    backend: Backend,
    parent: ParentKind,
) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(rig::on(backend, async {
        // Coarse polls keep a day of waiting to a few dozen ticks.
        let mut policy = Policy {
            poll_waiting: Duration::from_secs(3600),
            poll_active: Duration::from_secs(6 * 3600),
            ..Policy::default()
        };
        if parent == ParentKind::Registry {
            use dnssec_warden::lifecycle::parent_way::{DsPathSetting, ParentWay};
            policy.parents.parents.insert(
                "test.".into(),
                ParentWay {
                    ds_path: DsPathSetting::CdsScan,
                    scan_period: Some(Duration::from_secs(86_400)),
                    ..ParentWay::default()
                },
            );
        }
        let mut rig = match start {
            Start::Provider => Rig::with_policy(2, 2, policy).await,
            Start::MovingIn { old_ds } => {
                let clock = ManualClock::starting_at(T0);
                let world = FakeWorld::moving_in(ZONE, 2, 2, clock, old_ds.then_some(ttl));
                Rig::with_world(world, policy, None).await
            }
        };
        {
            let mut w = rig.world.lock();
            (w.old_parent_ns_ttl, w.old_apex_ns_ttl) = old_ns_ttls;
            // A provider whose API controls the CDS (rule 14's oracle above).
            w.cds_control = true;
        }
        let mut last_intent = Intent::None;
        let mut before = seen(&rig).await;
        for op in &ops {
            apply(&mut rig, op, ttl).await;
            if let Op::Intent(i, _) = op {
                last_intent = *i;
            }
            before = check_invariants(&rig, before, &format!("{op:?}")).await?;
        }
        let goal = match last_intent {
            Intent::Enabled => Some(State::Active),
            Intent::Disabled => Some(State::Disabled),
            Intent::None => None,
        };
        settle(&mut rig, ttl, goal, parent).await?;
        let violations = rig.world.violations();
        prop_assert!(violations.is_empty(), "while settling: {violations:?}");
        sent_calls_settled(&rig).await?;
        half_applied_settled(&rig).await?;
        prop_assert!(rig.store.zone(ZONE).await.unwrap().is_some(), "zone lost");
        rig.assert_audit_chain().await;
        let state = rig.state().await;
        match last_intent {
            // (An active zone's CDS may stay as it was: its routine looks do not read the
            // setting, and no CDS asks a registry for nothing.)
            Intent::Enabled => prop_assert_eq!(state, Some(State::Active)),
            Intent::Disabled => {
                prop_assert_eq!(state, Some(State::Disabled));
                prop_assert!(!rig.world.dnssec_on());
                prop_assert_eq!(rig.world.lock().cds, CdsPublication::Nothing);
                prop_assert_eq!(rig.world.lock().cdnskey, CdsPublication::Nothing);
            }
            Intent::None => prop_assert!(state.is_some(), "never adopted"),
        }
        Ok(())
    }))
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1200)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    #[test]
    fn safety_holds_under_any_sequence(
        ops in prop::collection::vec(op(), 1..40),
        ttl in prop_oneof![Just(300u32), Just(3600), Just(86_400)],
    ) {
        check(ops, ttl, Start::Provider, (86_400, 3600), Backend::Sqlite)?;
    }

    /// With a registry that scans the CDS the daemon publishes (rule 14, DESIGN.md's "who
    /// a DS request waits on"): safety as ever, and every sequence settles on the intent
    /// with the registry alone moving the DS.
    #[test]
    fn a_registry_that_scans_closes_the_loop_safely(
        ops in prop::collection::vec(registry_op(), 1..40),
        ttl in prop_oneof![Just(300u32), Just(3600), Just(86_400)],
    ) {
        check_with(ops, ttl, Start::Provider, (86_400, 3600), Backend::Sqlite, ParentKind::Registry)?;
    }
}

/// Found by the property: in `ttl_wait`, a DS republished that only a look dying before
/// its commit saw, then 30 hours without a look, then withdrawn. The old `T_gone` must not
/// let DNSSEC off at the next look (rule 2: the wait restarts after a gap in looks).
#[test]
fn a_gap_in_looks_restarts_the_disable_wait() {
    use Op::*;
    let seen_by_a_dying_look = vec![
        Intent(dnssec_warden::lifecycle::Intent::Disabled, false),
        Flip(true),
        Tick,
        Tick,
        Tick,
        Withdraw(0),
        Publish(0),
        Crash(CrashPoint::Observed),
        Advance(108_000),
        Withdraw(0),
    ];
    check(
        seen_by_a_dying_look,
        300,
        Start::Provider,
        (86_400, 3600),
        Backend::Sqlite,
    )
    .unwrap();
    let never_seen = vec![
        Intent(dnssec_warden::lifecycle::Intent::Disabled, false),
        Flip(true),
        Tick,
        Tick,
        Tick,
        Withdraw(0),
        Publish(0),
        Advance(108_000),
        Withdraw(0),
        Tick,
    ];
    check(
        never_seen,
        300,
        Start::Provider,
        (86_400, 3600),
        Backend::Sqlite,
    )
    .unwrap();
}

/// Rules 11 and 14: the announcement's CDS setting loses its answer between its two
/// writes (the key's CDS set, its CDNSKEY not): the next look that reads it makes it
/// whole, as the zone wants it then (the oracle of every tick), and settles the call.
#[test]
fn a_cds_setting_half_applied_is_made_whole_at_the_next_look() {
    use Op::*;
    let mut ops = vec![
        CdsHalfApplied,
        Intent(dnssec_warden::lifecycle::Intent::Enabled, false),
    ];
    for _ in 0..6 {
        ops.extend([Tick, Advance(3600)]);
    }
    ops.extend([
        Tick,
        Tick,
        Publish(0),
        Publish(1),
        Tick,
        Advance(3600),
        Tick,
    ]);
    check(ops, 300, Start::Provider, (86_400, 3600), Backend::Sqlite).unwrap();
}

fn delegation_cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400)
}

fn start() -> impl Strategy<Value = Start> {
    prop_oneof![
        Just(Start::Provider),
        any::<bool>().prop_map(|old_ds| Start::MovingIn { old_ds }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: delegation_cases(),
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_ds_before_the_old_delegation_expired_everywhere(
        start in start(),
        ops in prop::collection::vec(delegation_op(), 1..30),
        ttl in prop_oneof![Just(300u32), Just(3600), Just(86_400)],
        old_ns_ttls in (prop_oneof![Just(300u32), Just(86_400), Just(172_800)], prop_oneof![Just(300u32), Just(3600), Just(86_400)]),
    ) {
        check(ops, ttl, start, old_ns_ttls, Backend::Sqlite)?;
    }
}

fn postgres_cases(default: u32) -> u32 {
    std::env::var("POSTGRES_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Both properties with the store on PostgreSQL: the same sequences and checks, each on a
/// database of its own in one cluster that lives as long as this test.
#[test]
fn both_properties_hold_on_postgres() {
    let _cluster = postgres::Cluster::shared();
    let config = |cases| ProptestConfig {
        cases,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    };
    let ttl = || prop_oneof![Just(300u32), Just(3600), Just(86_400)];
    let mut runner = proptest::test_runner::TestRunner::new(config(postgres_cases(40)));
    let safety = runner.run(
        &(prop::collection::vec(op(), 1..40), ttl()),
        |(ops, ttl)| check(ops, ttl, Start::Provider, (86_400, 3600), Backend::Postgres),
    );
    if let Err(e) = safety {
        panic!("safety on PostgreSQL: {e}");
    }
    let mut runner = proptest::test_runner::TestRunner::new(config(postgres_cases(20)));
    let delegation = runner.run(
        &(
            start(),
            prop::collection::vec(delegation_op(), 1..30),
            ttl(),
            (
                prop_oneof![Just(300u32), Just(86_400), Just(172_800)],
                prop_oneof![Just(300u32), Just(3600), Just(86_400)],
            ),
        ),
        |(start, ops, ttl, old_ns_ttls)| check(ops, ttl, start, old_ns_ttls, Backend::Postgres),
    );
    if let Err(e) = delegation {
        panic!("the delegation property on PostgreSQL: {e}");
    }
}

/// Sequences the properties once found failing, replayed on every run.
#[test]
fn found_sequences_stay_safe() {
    use Op::*;
    // DNSSEC switched on behind the daemon's back while it is `disabled` with intent
    // disabled: seen, and switched off again the safe way.
    let ops = vec![
        Tick,
        SilenceParent(0, true),
        Intent(dnssec_warden::lifecycle::Intent::Disabled, false),
        Tick,
        Flip(true),
    ];
    if let Err(e) = check(ops, 300, Start::Provider, (86_400, 3600), Backend::Sqlite) {
        panic!("{e}");
    }
    let disabled = dnssec_warden::lifecycle::Intent::Disabled;
    // A DS published at one parent while the other was silent, after the wait for its
    // absence had begun; withdrawn again after hours.
    let ops = vec![
        Flip(true),
        Intent(disabled, false),
        Tick,
        Tick,
        Tick,
        SilenceParent(0, true),
        Publish(1),
        Advance(21600),
        Tick,
        Withdraw(1),
    ];
    if let Err(e) = check(ops, 300, Start::Provider, (86_400, 3600), Backend::Sqlite) {
        panic!("{e}");
    }
    // A crash armed at a tick where the zone was not due, reached at a later look that
    // saw one parent server delegate to the old provider: the look died with the engine,
    // so the ground truth must not hold the engine to it.
    let enabled = dnssec_warden::lifecycle::Intent::Enabled;
    let ops = vec![
        Tick,
        Tick,
        Crash(CrashPoint::Observed),
        Delegate(0, Delegation::Old),
        Intent(enabled, false),
        Tick,
        DelegateAll(Delegation::Provider),
    ];
    if let Err(e) = check(ops, 300, Start::Provider, (300, 3600), Backend::Sqlite) {
        panic!("{e}");
    }
    // "On" decided and committed, the engine dead before the call, then "disable": the
    // switch-on was never sent, and the end of the TTL wait must not switch off a zone
    // the provider never signed.
    let ops = vec![
        Tick,
        Intent(enabled, false),
        Crash(CrashPoint::Committed),
        Intent(disabled, false),
    ];
    if let Err(e) = check(ops, 300, Start::Provider, (300, 3600), Backend::Sqlite) {
        panic!("{e}");
    }
}

/// Drift a settled zone may meet (DESIGN.md section 4, "Sampled looks").
#[derive(Debug, Clone, Copy)]
enum Drift {
    /// `active`: the DS removed at every parent server.
    DsGoneEverywhere,
    /// DNSSEC switched at the provider behind the daemon's back.
    ProviderFlipped,
    /// Every parent server delegates to other name servers.
    Redelegated,
    /// `active`: the DS removed at one parent server only.
    DsGoneAt(usize),
}

fn drift() -> impl Strategy<Value = Drift> {
    prop_oneof![
        Just(Drift::DsGoneEverywhere),
        Just(Drift::ProviderFlipped),
        Just(Drift::Redelegated),
        (0usize..4).prop_map(Drift::DsGoneAt),
    ]
}

/// The oracle of sampled looks, against the fake world's ground truth: a settled zone is
/// looked at from samples (no full look while nothing changes), drift at every address
/// is seen by a full look at the next poll, drift at one parent address within as many
/// polls as there are parent addresses.
fn check_drift(
    parents: usize,
    children: usize,
    active: bool,
    quiet_polls: usize,
    drift: Drift,
) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut rig = Rig::new(parents, children).await;
        rig.run_for(2).await;
        if active {
            rig.store
                .set_intent(
                    ZONE,
                    Intent::Enabled,
                    false,
                    "enable",
                    rig.world.clock.now(),
                )
                .await
                .unwrap();
            prop_assert!(rig.run_until(State::AwaitingDs, 30).await);
            (0..parents).for_each(|i| rig.world.publish_ds(i, 3600));
            prop_assert!(rig.run_until(State::Active, 10).await);
        }
        let settled = if active {
            State::Active
        } else {
            State::Disabled
        };
        // The first look in the state may ask the provider; the next is routine.
        rig.run_for(2).await;
        let full = rig.last_observed().await;
        rig.run_for(quiet_polls).await;
        let row = rig.store.zone(ZONE).await.unwrap().unwrap();
        prop_assert_eq!(row.zone.state, Some(settled));
        prop_assert_eq!(
            row.last_observed_at,
            full,
            "samples only while nothing changes"
        );

        let (polls, everywhere) = match (drift, active) {
            (Drift::DsGoneEverywhere, true) => {
                (0..parents).for_each(|i| rig.world.withdraw_ds(i));
                (1, true)
            }
            (Drift::DsGoneAt(i), true) => {
                rig.world.withdraw_ds(i % parents);
                (parents, parents == 1)
            }
            (Drift::Redelegated, _) => {
                rig.world.delegate_all(Delegation::Old);
                (1, true)
            }
            _ => {
                rig.world.flip_dnssec(!active);
                (1, true)
            }
        };
        let at = rig.world.clock.now();
        rig.run_for(polls).await;
        let row = rig.store.zone(ZONE).await.unwrap().unwrap();
        prop_assert!(
            row.last_observed_at.is_some_and(|t| t >= at),
            "{drift:?} not looked at in full within {polls} poll(s)"
        );
        if everywhere {
            let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
            // A state, an alert, or (a zone that decides nothing on it) the delegation.
            let moved_away = row.zone.facts.delegation.verdict
                != Some(dnssec_warden::dns::DelegationVerdict::Provider);
            prop_assert!(
                row.zone.state != Some(settled) || !open.is_empty() || moved_away,
                "{drift:?}: seen, but the zone's word did not change"
            );
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: delegation_cases().min(64),
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    #[test]
    fn drift_is_seen_within_a_poll_or_a_rotation(
        parents in 1usize..=4,
        children in 1usize..=3,
        active in any::<bool>(),
        quiet_polls in 0usize..6,
        drift in drift(),
    ) {
        check_drift(parents, children, active, quiet_polls, drift)?;
    }
}

/// Found by the registry's property: DNSSEC switched on and off behind the daemon's back,
/// then `disable` with a wrong DS at one parent server. An unsigned zone publishes no
/// delete request a registry would take: the removal goes to the registrar at once, not
/// to a registry that cannot act for a day.
#[test]
fn an_unsigned_zones_removal_goes_to_the_registrar_not_the_registry() {
    use Op::*;
    let ops = vec![
        Flip(true),
        Tick,
        Flip(false),
        Intent(dnssec_warden::lifecycle::Intent::Disabled, false),
        PublishWrong(0),
    ];
    found_with_a_registry(ops);
}

/// Found by the registry's property: the removal went to the registry, then DNSSEC was
/// switched off behind the daemon's back with the DS still published. The registry can
/// no longer act (no signed delete request): the registrar is asked at once, not a day
/// later.
#[test]
fn a_removal_the_registry_can_no_longer_act_on_goes_to_the_registrar() {
    use Op::*;
    let ops = vec![
        Intent(dnssec_warden::lifecycle::Intent::Disabled, false),
        Flip(true),
        Tick,
        Publish(0),
        Intent(dnssec_warden::lifecycle::Intent::Disabled, false),
        Tick,
        Flip(false),
    ];
    found_with_a_registry(ops);
}

/// Found by the delegation property: a zone moving in whose one parent server that still
/// delegates to the old provider is silent, so the daemon sees only the other one (already
/// re-delegated to the provider) and walks the enable path, then `disable`'s. When the
/// silent server answers (the old delegation), the zone has never been delegated to the
/// provider everywhere: a move in, not a move out, and DNSSEC is not switched off before
/// the move is done (DESIGN.md "Moving in"); with the intent cleared, the zone is only
/// watched.
#[test]
fn a_disable_that_finds_a_move_in_switches_nothing_off() {
    use Op::*;
    use dnssec_warden::lifecycle::Intent as I;
    for last in [I::Disabled, I::None] {
        let mut ops = vec![
            SilenceParent(1, true),
            Intent(I::Enabled, false),
            Delegate(0, Delegation::Provider),
            Tick,
            Tick,
            Publish(0),
            Intent(I::Disabled, false),
            Tick,
        ];
        if last == I::None {
            ops.push(Intent(I::None, false));
        }
        let start = Start::MovingIn { old_ds: false };
        if let Err(e) = check(ops, 300, start, (300, 300), Backend::Sqlite) {
            panic!("{last:?}: {e}");
        }
    }
}

/// Found by the registry's property: the removal went to the registry by the CDS delete
/// request, then the intent was cleared, so rule 14 withdrew the request. The registry
/// can no longer act on it: the registrar is asked.
#[test]
fn a_removal_whose_delete_request_is_withdrawn_goes_to_the_registrar() {
    use Op::*;
    use dnssec_warden::lifecycle::Intent as I;
    let ops = vec![
        Flip(true),
        Intent(I::Disabled, false),
        Tick,
        Publish(0),
        Tick,
        Intent(I::None, false),
        Tick,
    ];
    found_with_a_registry(ops);
}

/// Safety rule 9: a zone moving in is told to change the NS only once the old DS is gone
/// and its TTL waited out. Here the daemon saw the old provider's DS (while the parent's
/// NS answers timed out, on the enable path; or while it only watched the foreign zone),
/// then the DS was removed: the move in starts on a look at which no DS is published,
/// and the NS change must still wait out the DS's TTL (resolvers holding the old DS would
/// follow the new delegation to servers that do not serve the old key).
#[test]
fn a_move_in_asks_for_the_ns_change_only_once_a_ds_seen_is_waited_out() {
    use Op::*;
    use dnssec_warden::lifecycle::Intent as I;
    let start = Start::MovingIn { old_ds: true };
    // On the enable path: the delegation unknown at every parent server, the DS seen.
    let enabling = vec![
        SilenceParentNs(0, true),
        SilenceParentNs(1, true),
        Intent(I::Enabled, false),
        Tick,
        Tick,
        Tick,
        RemoveOld(0),
        RemoveOld(1),
        SilenceParentNs(0, false),
        SilenceParentNs(1, false),
        Advance(3600),
        Tick,
        Tick,
        Tick,
    ];
    // A watched foreign zone: the operator removes the old DS, then says `enable`.
    let watched = vec![
        Tick,
        Tick,
        RemoveOld(0),
        RemoveOld(1),
        Intent(I::Enabled, false),
        Tick,
        Tick,
    ];
    for (name, ops) in [("enabling", enabling), ("watched", watched)] {
        if let Err(e) = check(ops, 86_400, start, (300, 300), Backend::Sqlite) {
            panic!("{name}: {e}");
        }
    }
}

/// DESIGN.md "Moving in": a zone never delegated to the provider's name servers at every
/// parent address is not switched off while a parent server may delegate elsewhere. Here
/// one parent server answers the DS question but never the NS question (the observer asks
/// them apart), and it still delegates to the old provider: its delegation is unknown,
/// which never counts (rule 3), so the disable path must not end in "DNSSEC off".
#[test]
fn a_disable_with_a_parent_delegation_unknown_switches_nothing_off() {
    use Op::*;
    use dnssec_warden::lifecycle::Intent as I;
    let mut ops = vec![
        SilenceParentNs(1, true),
        Delegate(0, Delegation::Provider),
        Intent(I::Enabled, false),
        Tick,
        Tick,
        Tick,
        Intent(I::Disabled, false),
        Tick,
        Tick,
    ];
    // Past the disable wait (a DS never seen: the assumed DS TTL), looking every hour.
    for _ in 0..60 {
        ops.push(Advance(3600));
        ops.push(Tick);
    }
    let start = Start::MovingIn { old_ds: false };
    if let Err(e) = check(ops, 300, start, (300, 300), Backend::Sqlite) {
        panic!("{e}");
    }
}

/// A sequence the registry's property found, with its settings (300 s TTLs, SQLite).
fn found_with_a_registry(ops: Vec<Op>) {
    if let Err(e) = check_with(
        ops,
        300,
        Start::Provider,
        (86_400, 3600),
        Backend::Sqlite,
        ParentKind::Registry,
    ) {
        panic!("{e}");
    }
}

/// Found by the property: a zone active through a scanning registry, then DNSSEC switched
/// off at the provider behind the daemon's back. The CDS of the key must be withdrawn at
/// the next look that reads the setting: a provider that signs again with a new key would
/// otherwise hand the registry a DS nobody decided to announce.
#[test]
fn dnssec_switched_off_behind_the_daemon_withdraws_the_cds() {
    use Op::*;
    let ops = vec![
        Flip(true),
        Tick,
        RegistryScan,
        Tick,
        Tick,
        Advance(1),
        Flip(false),
        Tick,
    ];
    found_with_a_registry(ops);
}

/// Found by the delegation property: moving in with the old DS at both parent servers,
/// it is withdrawn at one; the first look (the provider failing, so nothing adopted) sees
/// it at the other; it is removed there; the next look adopts the zone as `disabled`;
/// then `enable`. The DS that first look saw must be waited out before the NS change
/// (rule 9): adoption into `disabled` must not forget it.
#[test]
fn a_ds_seen_before_the_zone_was_adopted_is_waited_out_before_the_ns_change() {
    use Op::*;
    use dnssec_warden::lifecycle::Intent as I;
    let ops = vec![
        Withdraw(0),
        ProviderFails(1),
        Tick,
        RemoveOld(1),
        Intent(I::None, false),
        Tick,
        Intent(I::Enabled, false),
    ];
    let start = Start::MovingIn { old_ds: true };
    if let Err(e) = check(ops, 300, start, (300, 300), Backend::Sqlite) {
        panic!("{e}");
    }
}
