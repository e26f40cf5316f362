//! Property tests: random sequences of registrar actions, silent servers, lagging child
//! servers, provider failures, operator intents, clock jumps and crashes (the engine is
//! dropped between two operations and restarted from the database). After every sequence:
//! - the provider never received "DNSSEC off" while a parent server published a DS, nor
//!   before the DS's TTL plus the margin had passed since it was gone (checked by the fake
//!   provider at the moment of the call, against the ground truth);
//! - a DS is shown "to enter" (status, the overdue and hook alerts) only while the provider
//!   signs with that key and every child server serves it (safety rule 8), checked against
//!   the ground truth after every step that observed the zone, with DNSSEC switched off and
//!   on and the key rolled behind the daemon's back at any point;
//! - the zone is still there, and its audit trail is an unbroken chain of transitions;
//! - with a cooperative world afterwards, the zone reaches what the last intent asked for.
//!
//! `PROPTEST_CASES` overrides the number of sequences (default 2000).

mod common;

use std::time::Duration;

use common::{Rig, ZONE};
use dnssec_warden::engine::CrashPoint;
use dnssec_warden::lifecycle::{Clock, Intent, Policy, State};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Intent(Intent, bool),
    Publish(usize),
    PublishWrong(usize),
    Withdraw(usize),
    SilenceParent(usize, bool),
    LagChild(usize, bool),
    SilenceChild(usize, bool),
    ProviderFails(u32),
    /// DNSSEC switched at the provider outside the daemon.
    Flip(bool),
    Rekey,
    Advance(u64),
    Tick,
    Crash(CrashPoint),
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
        1 => (0..4u32).prop_map(Op::ProviderFails),
        1 => any::<bool>().prop_map(Op::Flip),
        1 => Just(Op::Rekey),
        3 => prop_oneof![Just(1u64), Just(60), Just(300), Just(3600), Just(6 * 3600), Just(30 * 3600)]
            .prop_map(Op::Advance),
        6 => Just(Op::Tick),
        2 => crash.prop_map(Op::Crash),
    ]
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
        Op::LagChild(i, b) => rig.world.lock().children[*i].lagging = *b,
        Op::SilenceChild(i, b) => rig.world.lock().children[*i].silent = *b,
        Op::ProviderFails(n) => rig.world.lock().provider_failures = *n,
        Op::Flip(on) => rig.world.flip_dnssec(*on),
        Op::Rekey => rig.world.rekey(),
        Op::Advance(secs) => rig.advance(Duration::from_secs(*secs)),
        Op::Tick => rig.tick().await,
        Op::Crash(point) => {
            rig.crash.arm(*point);
            rig.tick().await;
        }
    }
}

/// The world turns helpful: servers answer, the registrar does what it is told.
async fn settle(rig: &mut Rig, ttl: u32, goal: Option<State>) {
    {
        let mut w = rig.world.lock();
        w.provider_failures = 0;
        for p in &mut w.parents {
            p.silent = false;
        }
        for c in &mut w.children {
            c.silent = false;
            c.lagging = false;
        }
    }
    rig.crash.arm_none();
    let mut steady = 0;
    for _ in 0..200 {
        let state = rig.state().await;
        // Done once the goal (or, with no intent, any steady state) held for a few looks.
        let settled = match goal {
            Some(goal) => state == Some(goal),
            None => state.is_some_and(State::is_steady),
        };
        steady = if settled { steady + 1 } else { 0 };
        if steady > 3 {
            break;
        }
        match state {
            Some(State::AwaitingDs) | Some(State::DsObserved) => {
                rig.world.publish_ds(0, ttl);
                rig.world.publish_ds(1, ttl);
            }
            Some(State::AwaitingDsRemoval) => {
                rig.world.withdraw_ds(0);
                rig.world.withdraw_ds(1);
            }
            _ => {}
        }
        rig.run_for(1).await;
    }
}

fn check(ops: Vec<Op>, ttl: u32) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        // Coarse polls keep a day of waiting to a few dozen ticks.
        let policy = Policy {
            poll_waiting: Duration::from_secs(3600),
            poll_active: Duration::from_secs(6 * 3600),
            ..Policy::default()
        };
        let mut rig = Rig::with_policy(2, 2, policy).await;
        let mut last_intent = Intent::None;
        for op in &ops {
            let observed_before = rig.last_observed().await;
            apply(&mut rig, op, ttl).await;
            if matches!(op, Op::Tick | Op::Crash(_)) && rig.last_observed().await != observed_before
            {
                let shown = rig.ds_shown_to_enter().await;
                let truth = rig.world.enterable_ds();
                for line in shown {
                    prop_assert!(
                        truth.as_deref() == Some(line.as_str()),
                        "after {op:?}: {line} shown to enter, but the world allows {truth:?}"
                    );
                }
            }
            if let Op::Intent(i, _) = op {
                last_intent = *i;
            }
            let violations = rig.world.violations();
            prop_assert!(violations.is_empty(), "after {op:?}: {violations:?}");
        }
        let goal = match last_intent {
            Intent::Enabled => Some(State::Active),
            Intent::Disabled => Some(State::Disabled),
            Intent::None => None,
        };
        settle(&mut rig, ttl, goal).await;
        let violations = rig.world.violations();
        prop_assert!(violations.is_empty(), "while settling: {violations:?}");
        prop_assert!(rig.store.zone(ZONE).await.unwrap().is_some(), "zone lost");
        rig.assert_audit_chain().await;
        let state = rig.state().await;
        match last_intent {
            Intent::Enabled => prop_assert_eq!(state, Some(State::Active)),
            Intent::Disabled => {
                prop_assert_eq!(state, Some(State::Disabled));
                prop_assert!(!rig.world.dnssec_on());
            }
            Intent::None => prop_assert!(state.is_some(), "never adopted"),
        }
        Ok(())
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn safety_holds_under_any_sequence(
        ops in prop::collection::vec(op(), 1..40),
        ttl in prop_oneof![Just(300u32), Just(3600), Just(86_400)],
    ) {
        check(ops, ttl)?;
    }
}
