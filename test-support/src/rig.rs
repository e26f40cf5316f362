//! Shared set-up for engine tests: a fake world, a manual clock, an in-memory SQLite
//! store, or a PostgreSQL database of its own in a throwaway cluster for a scenario run
//! with [`on`] `(Backend::Postgres, …)` (`on_both_backends!` runs each scenario on both).
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use dnssec_warden::alert::{AlertSettings, RegistrarSettings};
use dnssec_warden::engine::{CrashPoint, Engine, Notifier, SinkWorkers};
use dnssec_warden::lifecycle::{
    AlertKind, Clock, Intent, ManualClock, Policy, State, Timestamp, disable_deadline,
};
use dnssec_warden::store::{
    AlertRow, DatabaseSettings, EventRow, PostgresSettings, Store, ZoneRow,
};

use crate::fake::FakeWorld;
use crate::postgres;

pub const ZONE: &str = "child.test.";
pub const T0: Timestamp = Timestamp(1_800_000_000_000);

pub fn policy() -> Policy {
    Policy::default()
}

/// Crash on the next visit of a chosen point (0 = never).
#[derive(Clone, Default)]
pub struct CrashSwitch(Arc<AtomicU8>);

impl CrashSwitch {
    pub fn arm(&self, point: CrashPoint) {
        let code = match point {
            CrashPoint::Observed => 1,
            CrashPoint::Committed => 2,
            CrashPoint::EffectPerformed => 3,
        };
        self.0.store(code, Ordering::SeqCst);
    }

    pub fn arm_none(&self) {
        self.0.store(0, Ordering::SeqCst);
    }

    /// The point armed and not yet reached, if any.
    pub fn armed(&self) -> Option<CrashPoint> {
        match self.0.load(Ordering::SeqCst) {
            1 => Some(CrashPoint::Observed),
            2 => Some(CrashPoint::Committed),
            3 => Some(CrashPoint::EffectPerformed),
            _ => None,
        }
    }

    /// Whether the step dies at `point` (it is armed): disarms it (the engine's crash
    /// hook).
    pub fn fire(&self, point: CrashPoint) -> bool {
        let code = match point {
            CrashPoint::Observed => 1,
            CrashPoint::Committed => 2,
            CrashPoint::EffectPerformed => 3,
        };
        self.0
            .compare_exchange(code, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

/// Which store a [`Rig`] is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

tokio::task_local! {
    static BACKEND: Backend;
}

/// Runs a scenario with every `Rig` it builds on `backend` (SQLite without this).
pub async fn on<F: std::future::Future>(backend: Backend, scenario: F) -> F::Output {
    BACKEND.scope(backend, scenario).await
}

/// Each named scenario (an `async fn` without arguments) as two tests, `sqlite::name` and
/// `postgres::name`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    $crate::rig::on($crate::rig::Backend::Sqlite, super::$name()).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    $crate::rig::on($crate::rig::Backend::Postgres, super::$name()).await
                }
            )*
        }
    };
}

/// A new store on the backend the scenario runs on; a PostgreSQL one keeps its cluster.
pub async fn new_store() -> (Store, Option<Arc<postgres::Cluster>>) {
    match BACKEND.try_with(|b| *b).unwrap_or(Backend::Sqlite) {
        Backend::Sqlite => (
            Store::open_in_memory().await.expect("in-memory store"),
            None,
        ),
        Backend::Postgres => {
            let cluster = postgres::Cluster::shared();
            let settings = DatabaseSettings::Postgres(PostgresSettings::new(
                cluster.database().await.parse().expect("the cluster's URL"),
            ));
            let store = Store::connect(&settings)
                .await
                .unwrap_or_else(|e| panic!("PostgreSQL store: {e}\n{}", cluster.log()));
            (store, Some(cluster))
        }
    }
}

/// The effect events of a DS announced ([`Rig::ds_announcements`]) and of the NS change
/// asked for ([`Rig::delegation_requests`]) begin so.
pub const DS_ANNOUNCED: &str = "ACTION NEEDED: enter this DS";
pub const NS_CHANGE_ASKED: &str = "ACTION NEEDED: change the NS of";

/// How many of `events` are effects beginning with `prefix`, counting repeats.
pub fn effect_events(events: &[EventRow], prefix: &str) -> i64 {
    events
        .iter()
        .filter(|e| e.kind == "effect" && e.reason.starts_with(prefix))
        .map(|e| 1 + e.repeats)
        .sum()
}

/// A zone's audit trail as [`Store::events`] reads it, kept in memory: each read fetches
/// only the last event known and those after it, and the earlier ones whose repeat count
/// may have grown ([`Store::events_from`]), and reads the whole trail again should the
/// copy miss one (an event committed late, below one already read). Property tests read
/// the trail after every step.
#[derive(Debug, Default)]
pub struct History {
    events: Vec<EventRow>,
}

impl History {
    /// The zone's events, oldest first, as they are now.
    pub async fn read(&mut self, store: &Store, zone: &str) -> &[EventRow] {
        let from = self.events.last().map_or(i64::MIN, |e| e.id);
        let (rows, count) = store.events_from(zone, from).await.expect("the events");
        if !self.merge(rows, count) {
            self.events = store.events(zone).await.expect("the events");
        }
        &self.events
    }

    /// Takes the rows in; false if the copy is not the whole trail then.
    fn merge(&mut self, rows: Vec<EventRow>, count: i64) -> bool {
        for row in rows {
            match self.events.binary_search_by_key(&row.id, |e| e.id) {
                Ok(i) => self.events[i] = row,
                Err(i) if i == self.events.len() => self.events.push(row),
                Err(_) => return false,
            }
        }
        i64::try_from(self.events.len()).is_ok_and(|n| n == count)
    }
}

pub struct Rig {
    pub world: FakeWorld,
    pub store: Store,
    pub engine: Engine<FakeWorld, FakeWorld>,
    pub crash: CrashSwitch,
    pub policy: Policy,
    /// `[alerts]` and `[registrar]` for the notifier; a restart builds a new one from it.
    pub notify: Option<(AlertSettings, Option<RegistrarSettings>)>,
    /// The sinks' workers (delivery is theirs, outside the steps); a restart ends them.
    pub workers: SinkWorkers,
    /// The zone's audit trail as last read ([`Rig::with_events`]).
    history: tokio::sync::Mutex<History>,
    /// The PostgreSQL cluster of the store, if it is one (last: dropped after the store).
    pub cluster: Option<Arc<postgres::Cluster>>,
}

pub fn engine(
    world: &FakeWorld,
    store: &Store,
    crash: &CrashSwitch,
    policy: &Policy,
) -> Engine<FakeWorld, FakeWorld> {
    engine_with(world, store, crash, policy, Notifier::default())
}

/// A notifier as `run` builds it from the configuration, on the world's clock.
pub fn notifier(
    world: &FakeWorld,
    notify: &Option<(AlertSettings, Option<RegistrarSettings>)>,
) -> Notifier {
    match notify {
        // A failing sink waits 50 ms before its next try, not 5 s: ticks are fast here.
        Some((alerts, registrar)) => Notifier::new(alerts, registrar.as_ref())
            .expect("notifier")
            .with_clock(Arc::new(world.clock.clone()))
            .with_first_wait(Duration::from_millis(50)),
        None => Notifier::default(),
    }
}

pub fn engine_with(
    world: &FakeWorld,
    store: &Store,
    crash: &CrashSwitch,
    policy: &Policy,
    notifier: Notifier,
) -> Engine<FakeWorld, FakeWorld> {
    let switch = crash.clone();
    Engine::new(
        store.clone(),
        Arc::new(world.clone()),
        Arc::new(world.clone()),
        Arc::new(world.clock.clone()),
        policy.clone(),
        notifier,
    )
    .with_crash_hook(Arc::new(move |p| switch.fire(p)))
}

impl Rig {
    pub async fn new(parents: usize, children: usize) -> Self {
        Self::with_policy(parents, children, policy()).await
    }

    pub async fn with_policy(parents: usize, children: usize, policy: Policy) -> Self {
        Self::with_notify(parents, children, policy, None).await
    }

    /// With alert sinks and a registrar hook, as configured in `[alerts]`, `[registrar]`.
    pub async fn with_notify(
        parents: usize,
        children: usize,
        policy: Policy,
        notify: Option<(AlertSettings, Option<RegistrarSettings>)>,
    ) -> Self {
        let world = FakeWorld::new(ZONE, parents, children, ManualClock::starting_at(T0));
        Self::with_world(world, policy, notify).await
    }

    /// A zone moving in (`FakeWorld::moving_in`): at the provider, DNSSEC off, delegated
    /// to the old provider at every parent server, with its DS there if `old_ds_ttl`.
    pub async fn moving_in(
        parents: usize,
        children: usize,
        policy: Policy,
        old_ds_ttl: Option<u32>,
    ) -> Self {
        let clock = ManualClock::starting_at(T0);
        let world = FakeWorld::moving_in(ZONE, parents, children, clock, old_ds_ttl);
        Self::with_world(world, policy, None).await
    }

    /// Over a world built by the caller (on a clock at `T0`).
    pub async fn with_world(
        world: FakeWorld,
        policy: Policy,
        notify: Option<(AlertSettings, Option<RegistrarSettings>)>,
    ) -> Self {
        world.lock().ds_counts_after = policy.gone_confirmation_gap();
        let (store, cluster) = new_store().await;
        store.ensure_zone(ZONE, T0).await.expect("zone row");
        let crash = CrashSwitch::default();
        let engine = engine_with(&world, &store, &crash, &policy, notifier(&world, &notify));
        let workers = engine.notifier().start(&store);
        Self {
            world,
            store,
            engine,
            crash,
            policy,
            notify,
            workers,
            history: tokio::sync::Mutex::default(),
            cluster,
        }
    }

    /// Drops the engine (as a crash would) and starts a new one on the same database.
    pub async fn restart(&mut self) {
        self.workers = SinkWorkers::default();
        let notifier = notifier(&self.world, &self.notify);
        self.engine = engine_with(
            &self.world,
            &self.store,
            &self.crash,
            &self.policy,
            notifier,
        );
        self.workers = self.engine.notifier().start(&self.store);
        self.engine.start().await.expect("engine starts");
    }

    /// One tick, then the registrar hooks and sinks it set going have done what they can
    /// (delivery is outside the step); a test crash restarts the engine.
    pub async fn tick(&mut self) {
        if self.engine.tick().await.is_err() {
            self.restart().await;
        }
        self.settle().await;
    }

    /// Waits (at most 30 s) until no registrar hook runs and every sink has sent what
    /// it may send now.
    pub async fn settle(&self) {
        assert!(
            self.engine.settle(Duration::from_secs(30)).await,
            "the hooks and sinks never settled"
        );
    }

    pub async fn state(&self) -> Option<State> {
        self.store.zone(ZONE).await.unwrap().unwrap().zone.state
    }

    pub fn advance(&self, d: Duration) {
        self.world.clock.advance(d);
    }

    /// Ticks and advances the clock to the zone's next check, `n` times.
    pub async fn run_for(&mut self, n: usize) {
        for _ in 0..n {
            self.tick().await;
            let next = self.store.zone(ZONE).await.unwrap().unwrap().next_check_at;
            let now = self.world.clock.now();
            if next > now {
                self.world.clock.set(next);
            }
        }
    }

    /// Like `run_for`, stopping as soon as the zone is in `state`; false if it never got
    /// there within `n` ticks.
    pub async fn run_until(&mut self, state: State, n: usize) -> bool {
        for _ in 0..n {
            if self.state().await == Some(state) {
                return true;
            }
            self.run_for(1).await;
        }
        self.state().await == Some(state)
    }

    /// Polls the zone as a running daemon does (a tick at each next check) up to its
    /// disable deadline, and stops the clock there without a tick: the waits of rule 2
    /// stand only while looks keep confirming the DS gone.
    pub async fn poll_to_disable_deadline(&mut self) -> Timestamp {
        loop {
            let zone = self.store.zone(ZONE).await.unwrap().unwrap();
            let deadline =
                disable_deadline(&zone.zone.facts.lifecycle, &self.policy).expect("a T_gone");
            if zone.next_check_at >= deadline {
                self.world.clock.set(deadline);
                return deadline;
            }
            if zone.next_check_at > self.world.clock.now() {
                self.world.clock.set(zone.next_check_at);
            }
            self.tick().await;
        }
    }

    pub async fn last_observed(&self) -> Option<Timestamp> {
        self.store
            .zone(ZONE)
            .await
            .unwrap()
            .unwrap()
            .last_observed_at
    }

    /// Every DS line the daemon now tells the operator to enter: the zone's instruction,
    /// its `status` text, and its open alerts.
    pub async fn ds_shown_to_enter(&self) -> Vec<String> {
        let row = self.store.zone(ZONE).await.unwrap().unwrap();
        let alerts = self.store.open_alerts(Some(ZONE)).await.unwrap();
        self.ds_shown_in(row, alerts)
    }

    /// [`Rig::ds_shown_to_enter`] of the zone's row and open alerts read by the caller.
    pub fn ds_shown_in(&self, row: ZoneRow, alerts: Vec<AlertRow>) -> Vec<String> {
        let mut texts =
            vec![dnssec_warden::lifecycle::waiting::describe(&row.zone, &self.policy).what];
        for alert in alerts {
            if alert.kind != dnssec_warden::lifecycle::AlertKind::DsRemovalOverdue {
                texts.push(alert.message);
            }
        }
        // The DNSKEY form is the same instruction: shown exactly when the DS is.
        assert_eq!(
            row.zone.facts.lifecycle.dnskey_to_enter.is_some(),
            row.zone.facts.lifecycle.ds_to_enter.is_some(),
            "the DNSKEY form shown without its DS, or the DS without it: {:?}",
            row.zone.facts
        );
        let mut shown: Vec<String> = row.zone.facts.lifecycle.ds_to_enter.into_iter().collect();
        // A DS told "to enter" follows one of these phrases (status, alerts); the DS
        // records named for removal, or as what the parent publishes, are not.
        const TO_ENTER: [&str; 3] = [
            "Enter it at the registrar: ",
            "Enter the DS by hand: ",
            "the DS at every parent server: ",
        ];
        for text in texts {
            for marker in TO_ENTER {
                for (at, _) in text.match_indices(marker) {
                    // "<zone> <ttl> IN DS <tag> <alg> <digest type> <digest>".
                    let rest = &text[at + marker.len()..];
                    let words: Vec<&str> = rest.split_whitespace().take(8).collect();
                    if words.len() == 8 && words[0] == ZONE && words[2] == "IN" && words[3] == "DS"
                    {
                        shown.push(words.join(" "));
                    }
                }
            }
        }
        shown
    }

    /// The operator records an intent now.
    pub async fn intent(&self, intent: Intent) {
        let now = self.world.clock.now();
        self.store
            .set_intent(
                ZONE,
                intent,
                false,
                &format!("operator asked: {intent}"),
                now,
            )
            .await
            .unwrap();
    }

    /// The states the audit trail's transitions went through, in order.
    pub async fn states_seen(&self) -> Vec<String> {
        self.store
            .events(ZONE)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == "transition")
            .filter_map(|e| e.to)
            .collect()
    }

    /// How many times a DS was announced ("enter this DS" delivered), counting repeats.
    pub async fn ds_announcements(&self) -> i64 {
        self.effect_events(DS_ANNOUNCED).await
    }

    /// How many times the NS change was asked for (a delivered "change the NS").
    pub async fn delegation_requests(&self) -> i64 {
        self.effect_events(NS_CHANGE_ASKED).await
    }

    /// How many effect events begin with `prefix`, counting repeats.
    pub async fn effect_events(&self, prefix: &str) -> i64 {
        self.with_events(|events| effect_events(events, prefix))
            .await
    }

    /// `f` of the zone's audit trail as it is now, oldest first ([`History`]).
    pub async fn with_events<R>(&self, f: impl FnOnce(&[EventRow]) -> R) -> R {
        let mut history = self.history.lock().await;
        f(history.read(&self.store, ZONE).await)
    }

    /// Every audit event's reason (all kinds), oldest first.
    pub async fn reasons(&self) -> Vec<String> {
        self.store
            .events(ZONE)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.reason)
            .collect()
    }

    /// The zone's open alert of `kind`, if any.
    pub async fn open_alert(&self, kind: AlertKind) -> Option<AlertRow> {
        self.store
            .open_alerts(Some(ZONE))
            .await
            .unwrap()
            .into_iter()
            .find(|a| a.kind == kind)
    }

    /// What the zone waits for, as `status` says it.
    pub async fn waiting_for(&self) -> String {
        let row = self.store.zone(ZONE).await.unwrap().unwrap();
        dnssec_warden::lifecycle::waiting::describe(&row.zone, &self.policy).what
    }

    /// Transitions recorded in the audit trail form an unbroken chain to the current state.
    pub async fn assert_audit_chain(&self) {
        let events = self.store.events(ZONE).await.unwrap();
        let mut at: Option<String> = None;
        for e in events.iter().filter(|e| e.kind == "transition") {
            assert_eq!(
                e.from, at,
                "transition {e:?} does not start where the last ended"
            );
            at = e.to.clone();
        }
        assert_eq!(
            at.as_deref(),
            self.state().await.map(|s| s.as_str()),
            "the audit trail ends in the current state"
        );
    }
}
