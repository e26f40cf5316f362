//! The signed move (DESIGN.md section 2 "Signed moves", rule 15) through the engine, over
//! the two accounts of `test_support::move_world`: a zone `active` at account `a` with a
//! declared move to `b` is stepped by ticks of a real `Engine` on an in-memory store,
//! over random interleavings of clock jumps, API failures (refused and of unknown
//! outcome), silent parent and child addresses, crashes at the engine's crash points,
//! restarts (a new `Engine` on the same store) and rolls at the target while no resolver
//! can be sent to it. Every address lags on its own (the child addresses, one parent
//! address), and the test is the registrar: it acts on every request the engine delivers
//! (the audit trail's effects), each after a delay of the sequence's, some a day or
//! more, in the order given.
//!
//! After every operation, rule 15's oracle (`MoveWorld::check_rule15`): at every moment
//! an address's answer changed, every resolver that may have cached a delegation, a DS
//! set or a DNSKEY set validates what every address it may reach serves. The phases are
//! not consulted. At the end the world turns helpful: the move must reach `done` with
//! only the target's DS at every parent address, the delegation at the target and the
//! source's DNSSEC off; then the operator deletes the zone at the source and the move
//! ends, the zone `active` at the target.
//!
//! `PROPTEST_CASES` overrides the number of sequences (default 64).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use dnssec_warden::dnssec::DsLine;
use dnssec_warden::engine::{CrashPoint, Engine, Notifier};
use dnssec_warden::lifecycle::alerts::Severity;
use dnssec_warden::lifecycle::signed_move::{Move, Phase, Ttls};
use dnssec_warden::lifecycle::{Clock, Decision, Intent, ManualClock, Policy, State, Timestamp};
use dnssec_warden::store::{ObservationText, Store};
use dnssec_warden_test_support::move_world::{
    ACCOUNTS, MoveProviders, MoveSetup, MoveWorld, RegistrarAction, SOURCE, TARGET, ZONE,
};
use dnssec_warden_test_support::rig::CrashSwitch;
use proptest::prelude::*;
use proptest::test_runner::RngAlgorithm;

const T0: Timestamp = Timestamp(1_800_000_000_000);

#[derive(Debug, Clone)]
enum Op {
    Tick,
    /// The daemon polls as it runs: a tick at each of the zone's next checks, `n` times.
    Polls(u8),
    Advance(u32),
    /// A tick with the engine dying at the point (when a step reaches it).
    Crash(CrashPoint),
    /// The daemon restarted: a new engine on the same store.
    Restart,
    /// The account's next calls fail with a 503 (no effect).
    ApiFails(usize, u32),
    /// The account's next change takes effect and its answer is lost.
    LoseAnswer(usize),
    SilenceParent(usize, bool),
    SilenceParentNs(usize, bool),
    SilenceChild(usize, bool),
    /// The account publishes CDS/CDNSKEY of its key, set outside the daemon (a
    /// provider's default); the move withdraws it.
    CdsBehind(usize),
    /// The target rolls its key behind the daemon's back, only while no resolver can
    /// have been sent to it (a roll at a reachable signer breaks rule 15 by itself).
    RollTarget,
}

fn op() -> impl Strategy<Value = Op> {
    let crash = prop_oneof![
        Just(CrashPoint::Observed),
        Just(CrashPoint::Committed),
        Just(CrashPoint::EffectPerformed)
    ];
    let account = prop_oneof![Just(SOURCE), Just(TARGET)];
    prop_oneof![
        3 => Just(Op::Tick),
        8 => (1..8u8).prop_map(Op::Polls),
        3 => prop_oneof![Just(60u32), Just(600), Just(3600), Just(6 * 3600), Just(86_400)]
            .prop_map(Op::Advance),
        2 => crash.prop_map(Op::Crash),
        1 => Just(Op::Restart),
        1 => (account.clone(), 1..4u32).prop_map(|(a, n)| Op::ApiFails(a, n)),
        1 => account.prop_map(Op::LoseAnswer),
        1 => (0..3usize, any::<bool>()).prop_map(|(i, b)| Op::SilenceParent(i, b)),
        1 => (0..3usize, any::<bool>()).prop_map(|(i, b)| Op::SilenceParentNs(i, b)),
        1 => (0..4usize, any::<bool>()).prop_map(|(j, b)| Op::SilenceChild(j, b)),
        1 => Just(Op::RollTarget),
        1 => prop_oneof![Just(SOURCE), Just(TARGET)].prop_map(Op::CdsBehind),
    ]
}

/// A sequence's world and registrar.
#[derive(Debug, Clone)]
struct Shape {
    ds_ttl: u32,
    ns_ttl: u32,
    dnskey_ttl: [u32; 2],
    apex_ns_ttl: [u32; 2],
    target_signs: bool,
    /// The zone's facts hold its DNSKEY and DS TTLs when the move is declared, which
    /// seeds the move with them (else it learns them, assuming the DS TTL meanwhile).
    seeded: bool,
    /// Each child address's propagation lag (seconds).
    child_lags: [u32; 4],
    /// The one lagging parent address and its lag.
    lagging_parent: (usize, u32),
    /// The registrar's delays, taken in turn for each request.
    registrar_delays: Vec<u32>,
}

fn shape() -> impl Strategy<Value = Shape> {
    let ttl = || prop_oneof![Just(300u32), Just(3600), Just(86_400)];
    let short = || prop_oneof![Just(300u32), Just(3600)];
    let lag = || prop_oneof![Just(0u32), Just(0), Just(60), Just(600), Just(3600)];
    (
        (ttl(), ttl(), [short(), short()], [short(), short()]),
        (any::<bool>(), prop::bool::weighted(0.8)),
        [lag(), lag(), lag(), lag()],
        (
            0..3usize,
            prop_oneof![Just(0u32), Just(600), Just(3600), Just(6 * 3600)],
        ),
        prop::collection::vec(
            prop_oneof![
                Just(0u32),
                Just(300),
                Just(3600),
                Just(86_400),
                Just(3 * 86_400)
            ],
            1..4,
        ),
    )
        .prop_map(
            |(
                (ds_ttl, ns_ttl, dnskey_ttl, apex_ns_ttl),
                (target_signs, seeded),
                child_lags,
                lagging_parent,
                registrar_delays,
            )| Shape {
                ds_ttl,
                ns_ttl,
                dnskey_ttl,
                apex_ns_ttl,
                target_signs,
                seeded,
                child_lags,
                lagging_parent,
                registrar_delays,
            },
        )
}

/// Hourly polls keep days of holds to a few dozen ticks.
fn policy() -> Policy {
    Policy {
        poll_waiting: Duration::from_secs(3600),
        poll_active: Duration::from_secs(6 * 3600),
        ..Policy::default()
    }
}

struct MoveRig {
    world: MoveWorld,
    store: Store,
    engine: Engine<MoveProviders, MoveWorld>,
    crash: CrashSwitch,
    policy: Policy,
    delays: Vec<u32>,
    /// Requests acted on: audit event id -> times seen (an event repeated is one
    /// request delivered again).
    acted: HashMap<i64, i64>,
    /// When the registrar's last action reaches the registry: it works in order.
    registrar_busy_until: Timestamp,
    requests: usize,
}

fn engine(
    world: &MoveWorld,
    store: &Store,
    crash: &CrashSwitch,
    policy: &Policy,
) -> Engine<MoveProviders, MoveWorld> {
    let switch = crash.clone();
    Engine::new(
        store.clone(),
        Arc::new(world.providers()),
        Arc::new(world.clone()),
        Arc::new(world.clock.clone()),
        policy.clone(),
        Notifier::default(),
    )
    .with_crash_hook(Arc::new(move |p| switch.fire(p)))
}

impl MoveRig {
    async fn new(shape: &Shape) -> MoveRig {
        let setup = MoveSetup {
            parents: 3,
            children: 2,
            ds_ttl: shape.ds_ttl,
            ns_ttl: shape.ns_ttl,
            apex_ns_ttl: shape.apex_ns_ttl,
            dnskey_ttl: shape.dnskey_ttl,
            target_signs: shape.target_signs,
        };
        let world = MoveWorld::new(&setup, ManualClock::starting_at(T0));
        {
            let mut s = world.lock();
            for (c, lag) in s.children.iter_mut().zip(shape.child_lags) {
                c.lag = Duration::from_secs(lag.into());
            }
            let (i, lag) = shape.lagging_parent;
            s.parents[i].lag = Duration::from_secs(lag.into());
        }
        let store = Store::open_in_memory().await.expect("in-memory store");
        store.ensure_zone(ZONE, T0).await.expect("zone row");
        // The zone active at the source, with the TTLs its looks saw (unless `seeded` is
        // off: a zone whose facts hold none), then the move declared as `dnssec-warden
        // move` declares it (`intent::declare_move`: the TTLs seeded from the facts).
        let read = store.zone_for_step(ZONE).await.unwrap().unwrap();
        let mut facts = read.row.zone.facts.clone();
        if shape.seeded {
            facts.lifecycle.max_dnskey_ttl = Some(shape.dnskey_ttl[SOURCE]);
            facts.lifecycle.max_ds_ttl = Some(shape.ds_ttl);
        }
        let decision = Decision {
            state: Some(State::Active),
            facts,
            effects: vec![],
            alerts: vec![],
            notes: vec![],
            wake_at: T0,
        };
        assert!(
            store
                .commit_step(&read, &decision, &ObservationText::from_whole("{}"), T0)
                .await
                .unwrap()
        );
        store
            .set_intent(ZONE, Intent::Enabled, false, "operator (proptest)", T0)
            .await
            .unwrap();
        let ks = world.key(SOURCE).expect("the source signs");
        let mv = Move::new(ZONE, ks)
            .between(ACCOUNTS[SOURCE], ACCOUNTS[TARGET])
            .seeded(Ttls::default());
        store
            .declare_move(ZONE, &mv, "operator (proptest)", T0)
            .await
            .unwrap();
        let crash = CrashSwitch::default();
        let policy = policy();
        let engine = engine(&world, &store, &crash, &policy);
        MoveRig {
            world,
            store,
            engine,
            crash,
            policy,
            delays: shape.registrar_delays.clone(),
            acted: HashMap::new(),
            registrar_busy_until: T0,
            requests: 0,
        }
    }

    async fn restart(&mut self) {
        self.engine = engine(&self.world, &self.store, &self.crash, &self.policy);
        self.engine.start().await.expect("engine starts");
    }

    /// One tick (a test crash restarts the engine), then the registrar acts on what
    /// it was told.
    async fn tick(&mut self) -> Result<(), TestCaseError> {
        if self.engine.tick().await.is_err() {
            self.restart().await;
        }
        assert!(self.engine.settle(Duration::from_secs(30)).await);
        self.registrar_acts().await
    }

    /// The registrar acts on every request delivered since it last looked, in order,
    /// each after the sequence's next delay (never before the one given before it).
    async fn registrar_acts(&mut self) -> Result<(), TestCaseError> {
        let events = self.store.events(ZONE).await.unwrap();
        for e in events {
            if e.kind != "effect" || !e.reason.starts_with("ACTION NEEDED") {
                continue;
            }
            let seen = self.acted.get(&e.id).copied();
            if seen.is_some_and(|r| r >= e.repeats) {
                continue;
            }
            self.acted.insert(e.id, e.repeats);
            let Some(action) = parse_request(&e.reason) else {
                return Err(TestCaseError::fail(format!(
                    "a request a signed move never makes: {}\n{}",
                    e.reason,
                    self.trail().await
                )));
            };
            let delay = self.delays[self.requests % self.delays.len()];
            self.requests += 1;
            let now = self.world.clock.now();
            let at = now.plus_secs(delay).max(self.registrar_busy_until);
            self.registrar_busy_until = at;
            self.world.registrar(
                action,
                Duration::from_millis(u64::try_from(at.0 - now.0).unwrap_or(0)),
            );
        }
        Ok(())
    }

    async fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Tick => self.tick().await?,
            Op::Polls(n) => {
                for _ in 0..*n {
                    self.tick().await?;
                    self.check("a poll").await?;
                    self.poll().await;
                }
            }
            Op::Advance(secs) => self
                .world
                .clock
                .advance(Duration::from_secs((*secs).into())),
            Op::Crash(point) => {
                self.crash.arm(*point);
                self.tick().await?;
            }
            Op::Restart => self.restart().await,
            Op::ApiFails(a, n) => self.world.lock().accounts[*a].failures = *n,
            Op::LoseAnswer(a) => self.world.lock().accounts[*a].lose_answers = 1,
            Op::SilenceParent(i, b) => self.world.lock().parents[*i].silent = *b,
            Op::SilenceParentNs(i, b) => self.world.lock().parents[*i].ns_silent = *b,
            Op::SilenceChild(j, b) => self.world.lock().children[*j].silent = *b,
            Op::CdsBehind(a) => self.world.behind_the_daemon(*a, |a| {
                a.cds = dnssec_warden::dnssec::CdsPublication::Key;
            }),
            Op::RollTarget => {
                if self.target_unreachable_for_good().await {
                    self.world.roll(TARGET);
                }
            }
        }
        Ok(())
    }

    /// No resolver can have been sent to the target, nor will be by anything already
    /// asked: the move has not asked for the NS change (not even in a decision whose
    /// request a crash left undelivered) and the registrar was never told to change it.
    async fn target_unreachable_for_good(&self) -> bool {
        let phase = self.phase().await;
        let asked = self
            .store
            .events(ZONE)
            .await
            .unwrap()
            .iter()
            .any(|e| e.reason.contains("change the NS"));
        let told = self
            .world
            .registrar_actions()
            .iter()
            .any(|(_, a)| matches!(a, RegistrarAction::Delegate(_)));
        phase.is_some_and(|p| p < Phase::AwaitingDelegation) && !asked && !told
    }

    async fn phase(&self) -> Option<Phase> {
        let row = self.store.zone(ZONE).await.unwrap()?;
        row.zone.facts.signed_move.map(|m| m.phase)
    }

    /// Rule 15 since the last check.
    async fn check(&self, what: &str) -> Result<(), TestCaseError> {
        let found = self.world.check_rule15();
        if !found.is_empty() {
            prop_assert!(
                false,
                "after {what}: rule 15 broken: {found:#?}\n{}",
                self.trail().await
            );
        }
        Ok(())
    }

    /// The audit trail, what the zone waits for, and what every address served.
    async fn trail(&self) -> String {
        let events: Vec<String> = self
            .store
            .events(ZONE)
            .await
            .unwrap()
            .into_iter()
            .map(|e| format!("{} {} x{}: {}", e.at, e.kind, 1 + e.repeats, e.reason))
            .collect();
        let row = self.store.zone(ZONE).await.unwrap().unwrap();
        format!(
            "audit trail:\n{}\nheld by: {:?}\nworld:\n{}",
            events.join("\n"),
            row.zone.facts.wait.held_by,
            self.world.story()
        )
    }

    /// The world turns helpful: every address answers, no call fails, nothing crashes;
    /// the daemon polls as it would. Ends once the move is `done`.
    async fn settle(&mut self) -> Result<(), TestCaseError> {
        {
            let mut s = self.world.lock();
            for a in &mut s.accounts {
                a.failures = 0;
                a.lose_answers = 0;
            }
            for p in &mut s.parents {
                p.silent = false;
                p.ns_silent = false;
            }
            for c in &mut s.children {
                c.silent = false;
            }
        }
        self.crash.arm_none();
        for round in 0..400 {
            if self.phase().await == Some(Phase::Done) {
                return Ok(());
            }
            self.tick().await?;
            self.check(&format!("settling, round {round}")).await?;
            self.poll().await;
        }
        prop_assert!(
            false,
            "the move never reached done: {:?}\n{}",
            self.phase().await,
            self.trail().await
        );
        Ok(())
    }

    /// The clock to the zone's next check.
    /// `n` looks, each at the zone's next check, the registrar never acting.
    async fn unanswered_looks(&self, n: usize) {
        for _ in 0..n {
            let _ = self.engine.tick().await;
            assert!(self.engine.settle(Duration::from_secs(30)).await);
            self.poll().await;
        }
    }

    async fn poll(&self) {
        let next = self.store.zone(ZONE).await.unwrap().unwrap().next_check_at;
        if next > self.world.clock.now() {
            self.world.clock.set(next);
        }
    }
}

/// The registrar action a delivered request asks for (its audit line); `None` for a
/// request a move never makes.
fn parse_request(reason: &str) -> Option<RegistrarAction> {
    let ds = |text: &str| {
        let line = text.rsplit(": ").next()?;
        DsLine::parse(line).ok().map(|l| l.ds)
    };
    if reason.starts_with("ACTION NEEDED: add this DS") {
        return ds(reason).map(RegistrarAction::AddDs);
    }
    if reason.starts_with("ACTION NEEDED: remove this DS") {
        return ds(reason).map(RegistrarAction::RemoveDs);
    }
    if reason.starts_with("ACTION NEEDED: change the NS of") {
        let (_, names) = reason.split_once(" to: ")?;
        let names: Vec<String> = names.split(", ").map(|n| n.trim().to_string()).collect();
        return Some(RegistrarAction::Delegate(names));
    }
    None
}

fn check(shape: Shape, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut rig = MoveRig::new(&shape).await;
        rig.check("the start").await?;
        for op in &ops {
            rig.apply(op).await?;
            rig.check(&format!("{op:?}")).await?;
        }
        if std::env::var("MOVE_STATS").is_ok() {
            eprintln!("STATS phase after ops: {:?}", rig.phase().await);
        }
        rig.settle().await?;
        if let Err(why) = rig.world.moved() {
            prop_assert!(false, "done, but {why}\n{}", rig.trail().await);
        }
        // The operator deletes the zone at the source: the move ends, the zone is the
        // target's, active.
        rig.world.lock().accounts[SOURCE].holds_zone = false;
        for round in 0..5 {
            rig.tick().await?;
            rig.check(&format!(
                "after the source's copy was deleted, round {round}"
            ))
            .await?;
            rig.poll().await;
        }
        let row = rig.store.zone(ZONE).await.unwrap().unwrap();
        prop_assert!(
            row.zone.facts.signed_move.is_none(),
            "the move did not end once only the target lists the zone\n{}",
            rig.trail().await
        );
        prop_assert_eq!(row.zone.state, Some(State::Active));
        prop_assert!(rig.world.violations().is_empty());
        // Nothing is left to repair: what the move alerted is resolved.
        let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
        prop_assert!(
            open.is_empty(),
            "alerts open after the move ended: {:?}\n{}",
            open.iter()
                .map(|a| (a.kind, &a.message))
                .collect::<Vec<_>>(),
            rig.trail().await
        );
        if std::env::var("MOVE_TRAIL").is_ok() {
            println!("{}", rig.trail().await);
        }
        Ok(())
    })
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_signed_move_keeps_every_resolver_validating(
        shape in shape(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        check(shape, ops)?;
    }
}

/// The plain path: nothing fails, the registrar acts at once; the move ends at the
/// target through every phase in order.
#[test]
fn a_cooperative_world_moves_the_zone_through_every_phase() {
    let shape = Shape {
        ds_ttl: 3600,
        ns_ttl: 3600,
        dnskey_ttl: [300, 300],
        apex_ns_ttl: [300, 300],
        target_signs: false,
        seeded: true,
        child_lags: [0; 4],
        lagging_parent: (0, 0),
        registrar_delays: vec![0],
    };
    check(shape, vec![Op::Tick]).unwrap();
}

// An adversarial review's sequences: each failed before its fix.

fn plain_shape() -> Shape {
    Shape {
        ds_ttl: 3600,
        ns_ttl: 3600,
        dnskey_ttl: [300, 300],
        apex_ns_ttl: [300, 300],
        target_signs: false,
        seeded: true,
        child_lags: [0; 4],
        lagging_parent: (0, 0),
        registrar_delays: vec![0],
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// In `done` the move waits for the operator to delete the zone at the source, forever
/// if they do not: the wait must name the operator, and a wait that cannot end by itself
/// must alert (rule 11).
#[test]
fn done_waits_on_the_operator_and_is_alerted_when_it_lasts() {
    rt().block_on(async {
        let mut rig = MoveRig::new(&plain_shape()).await;
        rig.settle().await.unwrap();
        for _ in 0..5 {
            rig.tick().await.unwrap();
            rig.poll().await;
        }
        rig.world.clock.advance(Duration::from_secs(30 * 86_400));
        for _ in 0..3 {
            rig.tick().await.unwrap();
            rig.poll().await;
        }
        let row = rig.store.zone(ZONE).await.unwrap().unwrap();
        let held = row.zone.facts.wait.held_by.clone().unwrap();
        let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
        eprintln!(
            "held_by: {held:?}\nopen alerts: {:?}",
            open.iter()
                .map(|a| (a.kind, &a.message))
                .collect::<Vec<_>>()
        );
        assert_eq!(
            held.on.as_str(),
            "operator",
            "wait names {:?}: {}",
            held.on,
            held.what
        );
        assert!(!open.is_empty(), "30 days stuck in done, nothing alerted");
    });
}

/// A look that cannot be made (an account failing) holds the move on that account,
/// whatever the phase would say: here the registrar's, while the source answers 503.
#[test]
fn an_account_that_cannot_be_asked_is_what_the_move_waits_on() {
    rt().block_on(async {
        let rig = MoveRig::new(&plain_shape()).await;
        rig.unanswered_looks(40).await;
        assert_eq!(rig.phase().await, Some(Phase::AwaitingBothDs));
        rig.world.lock().accounts[SOURCE].failures = 1_000;
        rig.unanswered_looks(1).await;
        let row = rig.store.zone(ZONE).await.unwrap().unwrap();
        let held = row.zone.facts.wait.held_by.clone().unwrap();
        assert_eq!(held.on.as_str(), "provider", "{held:?}");
        assert!(held.what.contains("provider a"), "{held:?}");
    });
}

/// The registrar never acts on "add DS": the move waits forever in awaiting_both_ds.
/// Rule 11: a wait that cannot end by itself alerts (`wait_stalled`).
#[test]
fn a_registrar_that_never_acts_is_alerted() {
    rt().block_on(async {
        let rig = MoveRig::new(&plain_shape()).await;
        rig.unanswered_looks(40).await;
        rig.world.clock.advance(Duration::from_secs(30 * 86_400));
        rig.unanswered_looks(3).await;
        let row = rig.store.zone(ZONE).await.unwrap().unwrap();
        let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
        eprintln!(
            "phase {:?} held_by {:?}",
            row.zone.facts.signed_move.as_ref().map(|m| m.phase),
            row.zone.facts.wait.held_by
        );
        assert_eq!(rig.phase().await, Some(Phase::AwaitingBothDs));
        assert!(
            !open.is_empty(),
            "30 days waiting on the registrar, nothing alerted"
        );
    });
}

/// The target rolls its key after `done` (the parent has DS(Kt) only: the zone is bogus
/// now); the move alerts. Then the operator deletes the source's copy and the move ends:
/// the zone's own look takes the new key as a roll the provider made on its own, swapped
/// at once (rule 17): the critical `provider_key_swapped` names the DS to add, and the
/// move's alert is resolved only in the look that raises it (never a moment with neither
/// while the zone is bogus). After every look, a critical alert is open while a parent
/// server has no DS for the target's key; the registrar adds it, the zone follows the
/// new key and nothing stays open.
#[test]
fn a_roll_at_the_target_after_done_stays_alerted_once_the_source_is_deleted() {
    rt().block_on(async {
        let mut rig = MoveRig::new(&plain_shape()).await;
        rig.settle().await.unwrap();
        rig.world.roll(TARGET);
        rig.tick().await.unwrap();
        rig.poll().await;
        let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
        eprintln!(
            "after the roll: {:?}",
            open.iter()
                .map(|a| (a.kind, &a.message))
                .collect::<Vec<_>>()
        );
        assert!(!open.is_empty(), "the roll is alerted");
        rig.world.lock().accounts[SOURCE].holds_zone = false;
        let key = rig.world.key(TARGET).expect("the target signs");
        let mut repaired = false;
        for _ in 0..20 {
            rig.tick().await.unwrap();
            rig.poll().await;
            let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
            let bogus = (0..3).any(|i| {
                !rig.world
                    .parent_now(i)
                    .ds
                    .iter()
                    .any(|d| key.matches_ds(ZONE, d))
            });
            let row = rig.store.zone(ZONE).await.unwrap().unwrap();
            eprintln!(
                "move {:?}, held_by {:?}, bogus {bogus}, alerts {:?}",
                row.zone.facts.signed_move.as_ref().map(|m| m.phase),
                row.zone.facts.wait.held_by,
                open.iter()
                    .map(|a| (a.kind, &a.message))
                    .collect::<Vec<_>>()
            );
            assert!(
                !bogus || open.iter().any(|a| a.severity == Severity::Critical),
                "the zone is bogus and no critical alert is open"
            );
            if !bogus && open.is_empty() && row.zone.facts.provider_roll.is_none() {
                repaired = true;
                break;
            }
        }
        assert!(repaired, "the provider's roll never ended");
        let events = rig.store.events(ZONE).await.unwrap();
        let at = |what: &str| events.iter().position(|e| e.reason.starts_with(what));
        let swapped = at("alert provider_key_swapped (critical)").expect("the swap is alerted");
        let move_resolved = at("alert signed_move_held resolved").expect("resolved at last");
        assert!(
            move_resolved > swapped,
            "the move's alert was resolved before the provider's roll raised its own:\n{}",
            events
                .iter()
                .map(|e| e.reason.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    });
}

/// The step entering awaiting_delegation commits the "change the NS" request and the
/// daemon dies before delivering it. While it is down, the target rolls its key (the
/// parent has DS(Ks)+DS(Kt_old), nothing for the new key). At the restart the step sees
/// the roll, alerts and holds: the owed "change the NS" must wait, or the registrar would
/// send resolvers to a target whose key has no DS (rule 15).
#[test]
fn an_ns_change_owed_across_a_crash_waits_while_a_target_roll_holds_the_move() {
    rt().block_on(async {
        let mut rig = MoveRig::new(&plain_shape()).await;
        let mut crashed = false;
        for _ in 0..200 {
            let before = rig.phase().await;
            let both_ds = (0..3).all(|i| rig.world.parent_now(i).ds.len() == 2);
            if before == Some(Phase::AwaitingBothDs) && both_ds {
                rig.crash.arm(CrashPoint::Committed);
            }
            if rig.engine.tick().await.is_err() {
                if rig.phase().await == Some(Phase::AwaitingDelegation) {
                    crashed = true;
                    break;
                }
                rig.restart().await;
            }
            rig.crash.arm_none();
            assert!(rig.engine.settle(Duration::from_secs(30)).await);
            rig.registrar_acts().await.unwrap();
            rig.poll().await;
        }
        assert!(
            crashed,
            "never crashed right after entering awaiting_delegation"
        );
        let asked_before = rig
            .store
            .events(ZONE)
            .await
            .unwrap()
            .iter()
            .any(|e| e.reason.starts_with("ACTION NEEDED: change the NS"));
        assert!(
            !asked_before,
            "the NS change was not delivered before the crash"
        );
        // Down: the target rolls.
        rig.world.roll(TARGET);
        rig.restart().await;
        rig.tick().await.unwrap();
        let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
        let events = rig.store.events(ZONE).await.unwrap();
        let delivered = events
            .iter()
            .any(|e| e.reason.starts_with("ACTION NEEDED: change the NS"));
        eprintln!(
            "alerts: {:?}",
            open.iter()
                .map(|a| (a.kind, &a.message))
                .collect::<Vec<_>>()
        );
        for _ in 0..6 {
            rig.tick().await.unwrap();
            rig.poll().await;
        }
        eprintln!(
            "rule 15 after the registrar acted: {:#?}",
            rig.world.check_rule15()
        );
        assert!(
            !delivered,
            "the stale NS change was delivered after the step saw the roll and alerted"
        );
    });
}

/// Every phase's provider wait names the account that holds it, as `status` says it
/// (`[on: provider NAME]`) and `status --json` (`waiting_on_accounts`): the source's
/// signing off is the source's, not the account that serves the zone by then (found by
/// an adversarial run: `old_signing_off` said the target), the target's signing at the
/// start the target's, not the source's.
#[test]
fn each_phase_names_the_account_its_provider_wait_is_on() {
    rt().block_on(async {
        let mut rig = MoveRig::new(&plain_shape()).await;
        let mut checked: Vec<(Phase, String)> = Vec::new();
        for _ in 0..400 {
            let Some(phase) = rig.phase().await else {
                break;
            };
            if phase == Phase::Done {
                break;
            }
            rig.tick().await.unwrap();
            rig.poll().await;
            let row = rig.store.zone(ZONE).await.unwrap().unwrap();
            let Some(held) = row.zone.facts.wait.held_by.clone() else {
                continue;
            };
            let Some(phase) = row.zone.facts.signed_move.as_ref().map(|m| m.phase) else {
                continue;
            };
            if held.on.as_str() != "provider" {
                continue;
            }
            // Who the wait's own words say must act.
            let words = held.what.as_str();
            let account = if words.starts_with("the source") {
                ACCOUNTS[SOURCE]
            } else if words.starts_with("the target") {
                ACCOUNTS[TARGET]
            } else {
                continue;
            };
            let text = dnssec_warden::cli::status::status_text(&rig.store, Some(ZONE), &rig.policy)
                .await
                .unwrap()
                .unwrap();
            assert!(
                text.contains(&format!("[on: provider {account}]")),
                "in {}, waiting for {words:?}, status names another party:\n{text}",
                phase.name()
            );
            let json = dnssec_warden::cli::status::status_json(&rig.store, Some(ZONE), &rig.policy)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                json["waiting_on_accounts"],
                serde_json::json!([account]),
                "in {}, waiting for {words:?}: {json:#}",
                phase.name()
            );
            checked.push((phase, words.to_string()));
        }
        let phases: Vec<Phase> = checked.iter().map(|(p, _)| *p).collect();
        for must in [
            Phase::SigningAtTarget,
            Phase::RetiringOldKey,
            Phase::OldSigningOff,
        ] {
            assert!(
                phases.contains(&must),
                "no provider wait seen in {must:?}: {checked:?}"
            );
        }
    });
}

/// Commits a step that decided `effect` at the look `brief` describes, and leaves the call
/// in flight when the daemon stops: its outcome unknown. `brief`: the step's summary.
async fn call_of_unknown_outcome(
    store: &Store,
    effect: dnssec_warden::lifecycle::Effect,
    brief: serde_json::Value,
) {
    let read = store.zone_for_step(ZONE).await.unwrap().unwrap();
    let decision = Decision {
        state: Some(State::Active),
        facts: read.row.zone.facts.clone(),
        effects: vec![effect],
        alerts: vec![],
        notes: vec![],
        wake_at: T0,
    };
    let text = ObservationText::from_whole(brief.to_string());
    assert!(
        store
            .commit_step(&read, &decision, &text, T0)
            .await
            .unwrap()
    );
    let item = store.pending_effects(ZONE).await.unwrap().pop().unwrap();
    assert!(store.start_effect(item.id, T0).await.unwrap());
    assert_eq!(store.unknown_in_flight(T0, Some(ZONE)).await.unwrap(), 1);
}

/// A call of unknown outcome is settled by the account it was sent to, even after the
/// zone moved (rule 13): a CDS publication sent to the source before the move, its answer
/// lost, is settled by what the source says, never by the target's word once the zone is
/// the target's (found by an adversarial run: the target's CDS "settled" a call the
/// source took). A row from before rows named their account is judged at the zone's
/// account, as before, and says so.
#[test]
fn a_call_of_unknown_outcome_is_settled_at_the_account_it_was_sent_to() {
    use dnssec_warden::dnssec::CdsPublication;
    use dnssec_warden::lifecycle::Effect;
    rt().block_on(async {
        let mut rig = MoveRig::new(&plain_shape()).await;
        call_of_unknown_outcome(
            &rig.store,
            Effect::SetCds {
                to: CdsPublication::Key,
            },
            serde_json::json!({"provider": {"account": ACCOUNTS[SOURCE], "dnssec": "on"}}),
        )
        .await;
        // It took effect at the source.
        rig.world
            .behind_the_daemon(SOURCE, |a| a.cds = CdsPublication::Key);
        // An older row, naming no account.
        call_of_unknown_outcome(
            &rig.store,
            Effect::DisableDnssec,
            serde_json::json!({"provider": {"dnssec": "on"}}),
        )
        .await;
        rig.settle().await.unwrap();
        rig.world.lock().accounts[SOURCE].holds_zone = false;
        for _ in 0..5 {
            rig.tick().await.unwrap();
            rig.poll().await;
        }
        let row = rig.store.zone(ZONE).await.unwrap().unwrap();
        assert!(row.zone.facts.signed_move.is_none(), "{}", rig.trail().await);
        let settled: Vec<String> = rig
            .store
            .events(ZONE)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.reason.ends_with("took effect") || e.reason.ends_with("take effect"))
            .map(|e| e.reason)
            .collect();
        eprintln!("settled: {settled:#?}");
        let cds: Vec<&String> = settled.iter().filter(|r| r.contains("CDS")).collect();
        assert_eq!(cds.len(), 1, "{settled:#?}\n{}", rig.trail().await);
        assert!(
            cds[0].starts_with("provider a: its CDS publication is the CDS and CDNSKEY of the key: the call to")
                && cds[0].ends_with(" took effect"),
            "{settled:#?}"
        );
        let old: Vec<&String> = settled.iter().filter(|r| r.contains("switch DNSSEC off")).collect();
        assert_eq!(old.len(), 1, "{settled:#?}");
        assert!(
            old[0].starts_with("provider b: DNSSEC is on (the call's row names no account: judged at the one holding the zone now)"),
            "{settled:#?}"
        );
        assert!(rig.store.unknown_calls(ZONE).await.unwrap().is_empty());
    });
}

/// A call of unknown outcome sent to an account no longer configured is said, not
/// guessed: it stays of unknown outcome, and the history says why.
#[test]
fn a_call_to_an_account_no_longer_configured_is_said_not_settled() {
    use dnssec_warden::dnssec::CdsPublication;
    use dnssec_warden::lifecycle::Effect;
    rt().block_on(async {
        let mut rig = MoveRig::new(&plain_shape()).await;
        call_of_unknown_outcome(
            &rig.store,
            Effect::SetCds {
                to: CdsPublication::Key,
            },
            serde_json::json!({"provider": {"account": "gone", "dnssec": "on"}}),
        )
        .await;
        rig.tick().await.unwrap();
        let events = rig.store.events(ZONE).await.unwrap();
        assert!(
            events.iter().any(|e| e.reason.starts_with(
                "provider gone is not configured any more (put its [providers.gone] back to settle it): whether the call to"
            ) && e.reason.ends_with("it stays of unknown outcome")),
            "{}",
            rig.trail().await
        );
        assert!(
            !events
                .iter()
                .any(|e| e.reason.ends_with("took effect") || e.reason.ends_with("take effect"))
        );
        assert_eq!(rig.store.unknown_calls(ZONE).await.unwrap().len(), 1);
    });
}
