//! The decisions' golden replay: a fixed set of worlds, drawn from the property tests'
//! generators (engine_props, engine_signed_move) at fixed seeds over their worlds in
//! test-support (`fake`, `move_world`), run through the engine on the world's manual
//! clock, every step written as canonical text (`test_support::decisions`: the state
//! before and after, the facts as stored, the next check, the effects queued, the
//! history's events, the alerts), and compared with the record kept in
//! `tests/engine/golden/decisions.txt`. A refactoring moves no decision: the test fails
//! naming the first step that differs, with that step's text as recorded and as now.
//!
//! A change that moves a decision on purpose records the worlds again:
//! `DECISIONS_RECORD=1 cargo test --test engine decisions::` (then read the golden file's
//! diff: every changed step must be the change meant).
//!
//! The generators are copied here, not shared with the property tests, so that tuning
//! those (their weights, their operations) does not redraw these worlds; an operation the
//! engine did not have when the record began (a CDS setting half applied) is left out,
//! so that the same worlds ran on the build before the facts' split and the signed
//! move's pure core, for the comparison the record started from.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use dnssec_warden::engine::CrashPoint;
use dnssec_warden::lifecycle::{Clock, Intent, ManualClock, Policy, State};
use dnssec_warden_test_support::decisions::{Recorder, first_difference, fnv64};
use dnssec_warden_test_support::fake::{Delegation, FakeWorld};
use dnssec_warden_test_support::rig::{Rig, T0, ZONE};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

const GOLDEN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/engine/golden/decisions.txt"
);

/// How many worlds of each family: together every state and every phase of a signed move
/// (the test checks it), in a record of a few hundred KB.
const PROVIDER_WORLDS: u32 = 16;
const REGISTRY_WORLDS: u32 = 8;
const DELEGATION_WORLDS: u32 = 16;
const MOVE_WORLDS: u32 = 4;

/// `DECISIONS_SCALE=n` draws n times as many worlds of each family (a wider comparison of
/// two builds, with `DECISIONS_OUT=FILE` to write the record there instead of comparing).
fn scale() -> u32 {
    std::env::var("DECISIONS_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// The value `strategy` draws for world `i` of `family`: a fixed seed each.
fn draw<S: Strategy>(strategy: &S, family: &str, i: u32) -> S::Value {
    let mut seed = [0u8; 32];
    let h = fnv64(&format!("{family} {i}"));
    for (k, chunk) in seed.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&h.rotate_left(16 * k as u32).to_le_bytes());
    }
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    strategy
        .new_tree(&mut runner)
        .expect("a world drawn")
        .current()
}

// The first three properties' worlds (engine_props).

#[derive(Debug, Clone)]
enum Op {
    Intent(Intent, bool),
    Publish(usize),
    PublishWrong(usize),
    Withdraw(usize),
    SilenceParent(usize, bool),
    SilenceParentNs(usize, bool),
    LagChild(usize, bool),
    SilenceChild(usize, bool),
    StripSignatures(usize, bool),
    ProviderFails(u32),
    Flip(bool),
    Rekey,
    Advance(u64),
    Tick,
    Crash(CrashPoint),
    Delegate(usize, Delegation),
    DelegateAll(Delegation),
    PublishOld(usize),
    RemoveOld(usize),
    SentThenHeld,
    RegistryScan,
}

#[derive(Debug, Clone, Copy)]
enum Start {
    Provider,
    MovingIn { old_ds: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ParentKind {
    Registrar,
    Registry,
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

fn registry_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => op(),
        3 => Just(Op::RegistryScan),
    ]
}

fn ttl() -> impl Strategy<Value = u32> {
    prop_oneof![Just(300u32), Just(3600), Just(86_400)]
}

fn start() -> impl Strategy<Value = Start> {
    prop_oneof![
        Just(Start::Provider),
        any::<bool>().prop_map(|old_ds| Start::MovingIn { old_ds }),
    ]
}

/// One world of the first properties.
struct PropsWorld {
    name: String,
    ops: Vec<Op>,
    ttl: u32,
    start: Start,
    old_ns_ttls: (u32, u32),
    parent: ParentKind,
}

fn props_worlds() -> Vec<PropsWorld> {
    let mut worlds = Vec::new();
    for i in 0..PROVIDER_WORLDS * scale() {
        let (ops, ttl) = draw(&(prop::collection::vec(op(), 1..40), ttl()), "provider", i);
        worlds.push(PropsWorld {
            name: format!("provider-{i}"),
            ops,
            ttl,
            start: Start::Provider,
            old_ns_ttls: (86_400, 3600),
            parent: ParentKind::Registrar,
        });
    }
    for i in 0..REGISTRY_WORLDS * scale() {
        let (ops, ttl) = draw(
            &(prop::collection::vec(registry_op(), 1..40), ttl()),
            "registry",
            i,
        );
        worlds.push(PropsWorld {
            name: format!("registry-{i}"),
            ops,
            ttl,
            start: Start::Provider,
            old_ns_ttls: (86_400, 3600),
            parent: ParentKind::Registry,
        });
    }
    for i in 0..DELEGATION_WORLDS * scale() {
        let (start, ops, ttl, old_ns_ttls) = draw(
            &(
                start(),
                prop::collection::vec(delegation_op(), 1..30),
                ttl(),
                (
                    prop_oneof![Just(300u32), Just(86_400), Just(172_800)],
                    prop_oneof![Just(300u32), Just(3600), Just(86_400)],
                ),
            ),
            "delegation",
            i,
        );
        worlds.push(PropsWorld {
            name: format!("delegation-{i}"),
            ops,
            ttl,
            start,
            old_ns_ttls,
            parent: ParentKind::Registrar,
        });
    }
    worlds
}

async fn apply(rig: &mut Rig, op: &Op, ttl: u32) {
    match op {
        Op::Intent(intent, never) => {
            let now = rig.world.clock.now();
            rig.store
                .set_intent(ZONE, *intent, *never, "operator (replay)", now)
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
        Op::Flip(on) => rig.world.flip_dnssec(*on),
        Op::Rekey => rig.world.rekey(),
        Op::Advance(secs) => rig.advance(Duration::from_secs(*secs)),
        Op::Tick => rig.tick().await,
        Op::Crash(point) => {
            rig.crash.arm(*point);
            rig.tick().await;
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

/// The fake world's keys and the DS records its parent servers publish, in a fixed order.
fn know_keys(world: &FakeWorld, rec: &mut Recorder) {
    let (keys, ds) = {
        let s = world.lock();
        let keys: Vec<_> = s.key.iter().chain([&s.old_key]).cloned().collect();
        let ds: Vec<_> = s
            .parents
            .iter()
            .filter_map(|p| p.ds.as_ref())
            .flat_map(|(set, _)| set.iter().cloned())
            .collect();
        (keys, ds)
    };
    rec.know_keys(&keys, &ds);
}

/// Whether the zone waits on the parent's registry (its stored fact, by its stored name).
async fn waits_on_registry(rig: &Rig) -> bool {
    let row = rig.store.zone(ZONE).await.unwrap();
    row.is_some_and(|r| {
        let facts = serde_json::to_value(&r.zone.facts).expect("facts serialise");
        !facts["registry_since"].is_null()
    })
}

async fn run_props_world(w: &PropsWorld) -> Recorder {
    let mut policy = Policy {
        poll_waiting: Duration::from_secs(3600),
        poll_active: Duration::from_secs(6 * 3600),
        ..Policy::default()
    };
    if w.parent == ParentKind::Registry {
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
    let mut rig = match w.start {
        Start::Provider => Rig::with_policy(2, 2, policy).await,
        Start::MovingIn { old_ds } => {
            let clock = ManualClock::starting_at(T0);
            let world = FakeWorld::moving_in(ZONE, 2, 2, clock, old_ds.then_some(w.ttl));
            Rig::with_world(world, policy, None).await
        }
    };
    {
        let mut s = rig.world.lock();
        (s.old_parent_ns_ttl, s.old_apex_ns_ttl) = w.old_ns_ttls;
        s.cds_control = true;
    }
    let mut rec = Recorder::new(
        ZONE,
        T0,
        &format!(
            "{} ttl {} start {:?} parent {:?} old NS TTLs {:?}",
            w.name, w.ttl, w.start, w.parent, w.old_ns_ttls
        ),
    );
    rec.describe(&format!("ops {:?}", w.ops));
    let mut last_intent = Intent::None;
    for (i, op) in w.ops.iter().enumerate() {
        apply(&mut rig, op, w.ttl).await;
        if let Op::Intent(intent, _) = op {
            last_intent = *intent;
        }
        let now = rig.world.clock.now();
        know_keys(&rig.world, &mut rec);
        rec.snapshot(&rig.store, &format!("op {i} {op:?}"), now)
            .await;
    }
    settle(&mut rig, &mut rec, w, last_intent).await;
    rec
}

/// The world turns helpful (as the property's settling: servers answer, the registrar
/// does what it is told, the move in finished bluntly after a while), each poll a step.
async fn settle(rig: &mut Rig, rec: &mut Recorder, w: &PropsWorld, last_intent: Intent) {
    {
        let mut s = rig.world.lock();
        s.provider_failures = 0;
        for p in &mut s.parents {
            p.silent = false;
            p.ns_silent = false;
        }
        for c in &mut s.children {
            c.silent = false;
            c.lagging = false;
            c.unsigned = false;
        }
    }
    rig.crash.arm_none();
    let goal = match last_intent {
        Intent::Enabled => Some(State::Active),
        Intent::Disabled => Some(State::Disabled),
        Intent::None => None,
    };
    let mut steady = 0;
    for round in 0..200 {
        let state = rig.state().await;
        let settled = match goal {
            Some(goal) => state == Some(goal),
            None => state.is_some_and(State::is_steady),
        } && rig.world.delegated_to_provider();
        steady = if settled { steady + 1 } else { 0 };
        if steady > 3 {
            break;
        }
        if round == 10 {
            rig.world.remove_old_ds_everywhere();
            rig.world.delegate_all(Delegation::Provider);
        }
        let on_registry = w.parent == ParentKind::Registry && waits_on_registry(rig).await;
        if w.parent == ParentKind::Registry {
            rig.world.registry_scan(w.ttl);
        }
        match state {
            _ if on_registry => {}
            Some(State::AwaitingDs) | Some(State::DsObserved) => {
                rig.world.publish_ds(0, w.ttl);
                rig.world.publish_ds(1, w.ttl);
            }
            Some(State::AwaitingDsRemoval) => {
                rig.world.withdraw_ds(0);
                rig.world.withdraw_ds(1);
            }
            Some(State::AwaitingDelegation) => rig.world.delegate_all(Delegation::Provider),
            _ => {}
        }
        let now = rig.world.clock.now();
        rig.run_for(1).await;
        know_keys(&rig.world, rec);
        rec.snapshot(&rig.store, &format!("settling {round}"), now)
            .await;
    }
}

// The signed move's worlds (engine_signed_move).
mod moving {
    use super::*;
    use dnssec_warden::dnssec::DsLine;
    use dnssec_warden::engine::{Engine, Notifier};
    use dnssec_warden::lifecycle::signed_move::{Move, Phase, Ttls};
    use dnssec_warden::lifecycle::{Decision, Facts, Timestamp};
    use dnssec_warden::store::{ObservationText, Store};
    use dnssec_warden_test_support::move_world::{
        ACCOUNTS, MoveProviders, MoveSetup, MoveWorld, RegistrarAction, SOURCE, TARGET,
        ZONE as MOVE_ZONE,
    };
    use dnssec_warden_test_support::rig::CrashSwitch;

    /// The facts a zone's looks left: its DNSKEY and DS TTLs, which seed a move.
    fn seed_ttls(facts: &mut Facts, dnskey: u32, ds: u32) {
        facts.lifecycle.max_dnskey_ttl = Some(dnskey);
        facts.lifecycle.max_ds_ttl = Some(ds);
    }

    #[derive(Debug, Clone)]
    pub enum Op {
        Tick,
        Polls(u8),
        Advance(u32),
        Crash(CrashPoint),
        Restart,
        ApiFails(usize, u32),
        LoseAnswer(usize),
        SilenceParent(usize, bool),
        SilenceParentNs(usize, bool),
        SilenceChild(usize, bool),
        CdsBehind(usize),
        RollTarget,
    }

    pub fn op() -> impl Strategy<Value = Op> {
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

    #[derive(Debug, Clone)]
    pub struct Shape {
        ds_ttl: u32,
        ns_ttl: u32,
        dnskey_ttl: [u32; 2],
        apex_ns_ttl: [u32; 2],
        target_signs: bool,
        seeded: bool,
        child_lags: [u32; 4],
        lagging_parent: (usize, u32),
        registrar_delays: Vec<u32>,
    }

    pub fn shape() -> impl Strategy<Value = Shape> {
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

    fn policy() -> Policy {
        Policy {
            poll_waiting: Duration::from_secs(3600),
            poll_active: Duration::from_secs(6 * 3600),
            ..Policy::default()
        }
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

    struct MoveRig {
        world: MoveWorld,
        store: Store,
        engine: Engine<MoveProviders, MoveWorld>,
        crash: CrashSwitch,
        policy: Policy,
        delays: Vec<u32>,
        acted: HashMap<i64, i64>,
        registrar_busy_until: Timestamp,
        requests: usize,
        rec: Recorder,
    }

    impl MoveRig {
        async fn new(shape: &Shape, header: &str) -> MoveRig {
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
            store.ensure_zone(MOVE_ZONE, T0).await.expect("zone row");
            let read = store.zone_for_step(MOVE_ZONE).await.unwrap().unwrap();
            let mut facts = read.row.zone.facts.clone();
            if shape.seeded {
                seed_ttls(&mut facts, shape.dnskey_ttl[SOURCE], shape.ds_ttl);
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
                .set_intent(MOVE_ZONE, Intent::Enabled, false, "operator (replay)", T0)
                .await
                .unwrap();
            let ks = world.key(SOURCE).expect("the source signs");
            let ks_known = ks.clone();
            let mv = Move::new(MOVE_ZONE, ks)
                .between(ACCOUNTS[SOURCE], ACCOUNTS[TARGET])
                .seeded(Ttls::default());
            store
                .declare_move(MOVE_ZONE, &mv, "operator (replay)", T0)
                .await
                .unwrap();
            let crash = CrashSwitch::default();
            let policy = policy();
            let engine = engine(&world, &store, &crash, &policy);
            let mut rec = Recorder::new(MOVE_ZONE, T0, header);
            rec.know_keys(&[ks_known], &[]);
            rec.snapshot(&store, "declared", T0).await;
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
                rec,
            }
        }

        async fn restart(&mut self) {
            self.engine = engine(&self.world, &self.store, &self.crash, &self.policy);
            self.engine.start().await.expect("engine starts");
        }

        /// One tick (a test crash restarts the engine), the registrar acts on what it was
        /// told, and the step is recorded.
        async fn tick(&mut self, label: &str) {
            let now = self.world.clock.now();
            if self.engine.tick().await.is_err() {
                self.restart().await;
            }
            assert!(self.engine.settle(Duration::from_secs(30)).await);
            self.registrar_acts().await;
            self.know_keys();
            self.rec.snapshot(&self.store, label, now).await;
        }

        async fn registrar_acts(&mut self) {
            let events = self.store.events(MOVE_ZONE).await.unwrap();
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
                    continue;
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
        }

        async fn apply(&mut self, i: usize, op: &Op) {
            let label = format!("op {i} {op:?}");
            match op {
                Op::Tick => self.tick(&label).await,
                Op::Polls(n) => {
                    for k in 0..*n {
                        self.tick(&format!("{label} poll {k}")).await;
                        self.poll().await;
                    }
                }
                Op::Advance(secs) => self
                    .world
                    .clock
                    .advance(Duration::from_secs((*secs).into())),
                Op::Crash(point) => {
                    self.crash.arm(*point);
                    self.tick(&label).await;
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
            let now = self.world.clock.now();
            self.know_keys();
            self.rec.snapshot(&self.store, &label, now).await;
        }

        /// Both accounts' keys and what every parent address publishes now.
        fn know_keys(&mut self) {
            let keys: Vec<_> = [SOURCE, TARGET]
                .iter()
                .filter_map(|&a| self.world.key(a))
                .collect();
            let ds: Vec<_> = (0..3).flat_map(|i| self.world.parent_now(i).ds).collect();
            self.rec.know_keys(&keys, &ds);
        }

        async fn target_unreachable_for_good(&self) -> bool {
            let phase = self.phase().await;
            let asked = self
                .store
                .events(MOVE_ZONE)
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
            let row = self.store.zone(MOVE_ZONE).await.unwrap()?;
            row.zone.facts.signed_move.map(|m| m.phase)
        }

        async fn settle(&mut self) {
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
                    return;
                }
                self.tick(&format!("settling {round}")).await;
                self.poll().await;
            }
        }

        async fn poll(&self) {
            let next = self
                .store
                .zone(MOVE_ZONE)
                .await
                .unwrap()
                .unwrap()
                .next_check_at;
            if next > self.world.clock.now() {
                self.world.clock.set(next);
            }
        }
    }

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

    /// One move world: its operations, the world turned helpful until `done`, then the
    /// source's copy deleted and five more polls.
    pub async fn run(i: u32) -> Recorder {
        let (shape, ops) = draw(&(shape(), prop::collection::vec(op(), 1..40)), "move", i);
        let mut rig = MoveRig::new(&shape, &format!("move-{i} {shape:?}")).await;
        rig.rec.describe(&format!("ops {ops:?}"));
        for (k, op) in ops.iter().enumerate() {
            rig.apply(k, op).await;
        }
        rig.settle().await;
        rig.world.lock().accounts[SOURCE].holds_zone = false;
        for round in 0..5 {
            rig.tick(&format!("source deleted {round}")).await;
            rig.poll().await;
        }
        rig.rec
    }

    pub const PHASES: [&str; 9] = [
        "SigningAtTarget",
        "ExchangingKeys",
        "AwaitingBothDs",
        "AwaitingDelegation",
        "OldDelegationWait",
        "AwaitingOldDsRemoval",
        "RetiringOldKey",
        "OldSigningOff",
        "Done",
    ];
}

/// Every world's record, and what they covered: (text, worlds, steps, states, phases).
fn record_all() -> (String, usize, usize, BTreeSet<String>, BTreeSet<String>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut text = String::new();
        let (mut worlds, mut steps) = (0, 0);
        let (mut states, mut phases) = (BTreeSet::new(), BTreeSet::new());
        let mut add = |rec: Recorder| {
            worlds += 1;
            steps += rec.steps;
            states.extend(rec.states.iter().cloned());
            phases.extend(rec.phases.iter().cloned());
            text.push_str(&rec.finish());
        };
        for w in props_worlds() {
            add(run_props_world(&w).await);
        }
        for i in 0..MOVE_WORLDS * scale() {
            add(moving::run(i).await);
        }
        (text, worlds, steps, states, phases)
    })
}

#[test]
fn no_decision_moved() {
    let (text, worlds, steps, states, phases) = record_all();
    let all_states: BTreeSet<String> = State::ALL.iter().map(|s| s.as_str().to_string()).collect();
    let all_phases: BTreeSet<String> = moving::PHASES.iter().map(|p| p.to_string()).collect();
    assert_eq!(
        states, all_states,
        "the worlds no longer reach every state: draw more"
    );
    assert_eq!(
        phases, all_phases,
        "the worlds no longer reach every phase of a signed move: draw more"
    );
    let header = format!(
        "# The engine's decisions over {worlds} worlds ({steps} steps): see tests/engine/decisions.rs.\n\
         # Re-record on purpose: DECISIONS_RECORD=1 cargo test --test engine decisions::\n"
    );
    let now = format!("{header}{text}");
    if let Some(out) = std::env::var_os("DECISIONS_OUT") {
        std::fs::write(&out, &now).unwrap();
        eprintln!("wrote {worlds} worlds, {steps} steps to {out:?}");
        return;
    }
    if std::env::var_os("DECISIONS_RECORD").is_some() {
        std::fs::create_dir_all(std::path::Path::new(GOLDEN).parent().unwrap()).unwrap();
        std::fs::write(GOLDEN, &now).unwrap();
        eprintln!("recorded {worlds} worlds, {steps} steps in {GOLDEN}");
        return;
    }
    let golden = std::fs::read_to_string(GOLDEN)
        .unwrap_or_else(|e| panic!("{GOLDEN}: {e} (record it: DECISIONS_RECORD=1)"));
    if let Some(diff) = first_difference(&golden, &now) {
        let at = concat!(env!("CARGO_TARGET_TMPDIR"), "/decisions.now.txt");
        let _ = std::fs::write(at, &now);
        panic!(
            "{diff}\n(the whole record now: {at}; if the change is meant: DECISIONS_RECORD=1 cargo test --test engine decisions::)"
        );
    }
}
