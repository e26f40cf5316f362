//! Property test of several daemons on one PostgreSQL database (DESIGN.md rule 12 and
//! section 9): two engines, each with its own store joined as a daemon, over one fake
//! world, in random sequences of registrar actions, silent servers, operator intents,
//! clock jumps, lease rounds, ticks of either daemon, crashes (the daemon restarts as a
//! new holder), a daemon's leases running out as if it were paused (`Expire`), and a
//! paused daemon resuming the step it was in (`Resume`). After every operation:
//! - the provider never received "DNSSEC off" while a parent server published a DS, nor
//!   before the DS's TTL plus the margin (the fake provider checks at the call);
//! - the audit trail's epochs never go backwards (a write under a stale epoch after the
//!   taker's is exactly what fencing forbids), and every event a daemon wrote carries a
//!   (holder, epoch) that daemon acquired;
//! - at most one daemon holds the zone;
//! - a daemon without a current lease (by the database) writes nothing of the zone when
//!   it ticks, resumes or crashes: its state, events, outbox and alerts are unchanged.
//!
//! Afterwards, with a cooperative world and both daemons keeping their leases, the zone
//! reaches what the last intent asked for.
//!
//! `HA_PROPTEST_CASES` overrides the number of sequences (default 16; a database each).

use std::collections::HashSet;
use std::time::Duration;

use dnssec_warden::engine::{CrashPoint, Engine};
use dnssec_warden::lifecycle::{Clock, Intent, ManualClock, Policy, State};
use dnssec_warden::store::{ClusterSettings, DatabaseSettings, PostgresSettings, Store};
use dnssec_warden_test_support::fake::FakeWorld;
use dnssec_warden_test_support::postgres;
use dnssec_warden_test_support::rig::{CrashSwitch, T0, ZONE, engine};
use proptest::prelude::*;
use proptest::test_runner::RngAlgorithm;
use sqlx::Connection;

#[derive(Debug, Clone)]
enum Op {
    Intent(Intent),
    Publish(usize),
    Withdraw(usize),
    SilenceParent(usize, bool),
    Flip(bool),
    Advance(u64),
    /// Daemon `d`'s lease round (alive, renew, take its share, hand back the excess).
    Round(usize),
    Tick(usize),
    /// Daemon `d` dies at the point; it restarts as a new holder.
    Crash(usize, CrashPoint),
    /// Daemon `d`'s leases run out (it is paused); the others' go on.
    Expire(usize),
    /// Daemon `d` resumes a step it was in, believing it still holds the zone.
    Resume(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let d = 0..2usize;
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
        2 => intent.prop_map(Op::Intent),
        2 => (0..2usize).prop_map(Op::Publish),
        2 => (0..2usize).prop_map(Op::Withdraw),
        1 => (0..2usize, any::<bool>()).prop_map(|(i, b)| Op::SilenceParent(i, b)),
        1 => any::<bool>().prop_map(Op::Flip),
        3 => prop_oneof![Just(60u64), Just(3600), Just(6 * 3600), Just(30 * 3600)].prop_map(Op::Advance),
        3 => d.clone().prop_map(Op::Round),
        6 => d.clone().prop_map(Op::Tick),
        2 => (d.clone(), crash).prop_map(|(d, p)| Op::Crash(d, p)),
        2 => d.clone().prop_map(Op::Expire),
        2 => d.prop_map(Op::Resume),
    ]
}

struct Daemon {
    store: Store,
    engine: Engine<FakeWorld, FakeWorld>,
    crash: CrashSwitch,
}

struct Cluster {
    world: FakeWorld,
    policy: Policy,
    settings: DatabaseSettings,
    daemons: Vec<Daemon>,
    /// Every (holder, epoch) a lease round handed out.
    acquired: HashSet<(String, i64)>,
    /// Daemons started so far (each restart is a new node name).
    started: usize,
    /// The test's own connection: what the database says, and leases run out.
    admin: sqlx::PgConnection,
}

impl Cluster {
    async fn daemon(&mut self) -> Daemon {
        self.started += 1;
        let mut store = Store::connect(&self.settings).await.expect("store");
        store
            .join_cluster(&ClusterSettings {
                // Never runs out by itself within a case: only `Expire` ends a lease.
                lease: Duration::from_secs(600),
                ..ClusterSettings::new(format!("d{}", self.started))
            })
            .expect("joined");
        let crash = CrashSwitch::default();
        let engine = engine(&self.world, &store, &crash, &self.policy);
        Daemon {
            store,
            engine,
            crash,
        }
    }

    async fn round(&mut self, d: usize) {
        let now = self.world.clock.now();
        if let Ok(round) = self.daemons[d].store.lease_round(now).await
            && let Some(holder) = self.daemons[d].store.holder()
        {
            for (_, epoch, _) in round.acquired {
                self.acquired.insert((holder.to_string(), epoch));
            }
        }
    }

    /// Daemon `d`'s leases run out (as a lease after it stopped renewing them).
    async fn expire(&mut self, d: usize) {
        let holder = self.daemons[d].store.holder().map(str::to_string);
        sqlx::query("UPDATE zones SET lease_until = 0 WHERE lease_holder = $1")
            .bind(holder)
            .execute(&mut self.admin)
            .await
            .unwrap();
    }

    async fn tick(&mut self, d: usize) {
        if self.daemons[d].engine.tick().await.is_err() {
            // A crash (or a refused write): the process is gone; a new one starts.
            self.restart(d).await;
        }
    }

    /// The daemon died; its leases run out a lease later (the compressed wait), then a
    /// new process starts in its place as a new holder.
    async fn restart(&mut self, d: usize) {
        self.expire(d).await;
        let new = self.daemon().await;
        let old = std::mem::replace(&mut self.daemons[d], new);
        old.store.close().await;
        self.round(d).await;
    }

    async fn apply(&mut self, op: &Op, ttl: u32) {
        match op {
            Op::Intent(intent) => {
                let now = self.world.clock.now();
                self.daemons[0]
                    .store
                    .set_intent(ZONE, *intent, false, "operator (proptest)", now)
                    .await
                    .unwrap();
            }
            Op::Publish(i) => self.world.publish_ds(*i, ttl),
            Op::Withdraw(i) => self.world.withdraw_ds(*i),
            Op::SilenceParent(i, b) => self.world.lock().parents[*i].silent = *b,
            Op::Flip(on) => self.world.flip_dnssec(*on),
            Op::Advance(secs) => self.world.clock.advance(Duration::from_secs(*secs)),
            Op::Round(d) => self.round(*d).await,
            Op::Tick(d) => self.tick(*d).await,
            Op::Crash(d, point) => {
                self.daemons[*d].crash.arm(*point);
                self.tick(*d).await;
                self.daemons[*d].crash.arm_none();
            }
            Op::Expire(d) => self.expire(*d).await,
            Op::Resume(d) => {
                let _ = self.daemons[*d].engine.step_zone(ZONE).await;
            }
        }
    }

    async fn state(&self) -> Option<State> {
        self.daemons[0]
            .store
            .zone(ZONE)
            .await
            .unwrap()
            .and_then(|r| r.zone.state)
    }

    /// Whether daemon `d` holds a current lease on the zone, by the database.
    async fn holds_now(&mut self, d: usize) -> bool {
        let holder = self.daemons[d].store.holder().map(str::to_string);
        let (n,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM zones WHERE lease_holder = $1 AND lease_until > warden_now_ms()",
        )
        .bind(holder)
        .fetch_one(&mut self.admin)
        .await
        .unwrap();
        n > 0
    }

    /// What a step can write: the zone row's version, the events, the outbox rows and
    /// their statuses, the alerts.
    async fn footprint(&mut self) -> (i64, i64, String, i64) {
        sqlx::query_as(
            "SELECT (SELECT version FROM zones WHERE name = $1), \
                    ((SELECT count(*) FROM events) + (SELECT coalesce(sum(count), 0) FROM event_repeats))::bigint, \
                    (SELECT coalesce(string_agg(id || status || coalesce(started_at, 0), ',' ORDER BY id), '') FROM outbox), \
                    (SELECT count(*) FROM alerts)",
        )
        .bind(ZONE)
        .fetch_one(&mut self.admin)
        .await
        .unwrap()
    }

    /// The invariants after an operation.
    async fn check(&mut self, what: &str) -> Result<(), TestCaseError> {
        let violations = self.world.violations();
        prop_assert!(violations.is_empty(), "after {what}: {violations:?}");
        let events = self.daemons[0].store.events(ZONE).await.unwrap();
        let mut last = 0;
        for e in &events {
            let (Some(holder), Some(epoch)) = (&e.holder, e.epoch) else {
                continue;
            };
            prop_assert!(
                epoch >= last,
                "after {what}: {holder} wrote under epoch {epoch} after epoch {last} was written: {:?}",
                e.reason
            );
            last = epoch;
            prop_assert!(
                self.acquired.contains(&(holder.clone(), epoch)),
                "after {what}: {holder} wrote under epoch {epoch}, which it never acquired"
            );
        }
        let (holders,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM zones WHERE lease_holder IS NOT NULL \
             AND lease_until > warden_now_ms()",
        )
        .fetch_one(&mut self.admin)
        .await
        .unwrap();
        prop_assert!(holders <= 1, "after {what}: {holders} holders");
        Ok(())
    }

    /// The world turns helpful and both daemons keep their leases and tick.
    async fn settle(&mut self, ttl: u32, goal: Option<State>) -> Result<(), TestCaseError> {
        {
            let mut w = self.world.lock();
            for p in &mut w.parents {
                p.silent = false;
            }
        }
        let mut steady = 0;
        for round in 0..200 {
            let state = self.state().await;
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
                    self.world.publish_ds(0, ttl);
                    self.world.publish_ds(1, ttl);
                }
                Some(State::AwaitingDsRemoval) => {
                    self.world.withdraw_ds(0);
                    self.world.withdraw_ds(1);
                }
                _ => {}
            }
            for d in 0..self.daemons.len() {
                self.round(d).await;
                self.tick(d).await;
            }
            let next = self.daemons[0]
                .store
                .zone(ZONE)
                .await
                .unwrap()
                .map(|r| r.next_check_at);
            if let Some(next) = next
                && next > self.world.clock.now()
            {
                self.world.clock.set(next);
            }
            self.check(&format!("settling, round {round}")).await?;
        }
        Ok(())
    }
}

fn check(ops: Vec<Op>, ttl: u32) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let pg = postgres::Cluster::shared();
        let url = pg.database().await;
        let settings = DatabaseSettings::Postgres(PostgresSettings::new(url.parse().unwrap()));
        let world = FakeWorld::new(ZONE, 2, 2, ManualClock::starting_at(T0));
        // Coarse polls keep a day of waiting to a few dozen ticks.
        let policy = Policy {
            poll_waiting: Duration::from_secs(3600),
            poll_active: Duration::from_secs(6 * 3600),
            ..Policy::default()
        };
        // The schema first (the daemons' stores migrate it too; one at a time is tidier).
        Store::connect(&settings).await.unwrap().close().await;
        let admin = sqlx::PgConnection::connect(&url).await.unwrap();
        let mut c = Cluster {
            world,
            policy,
            settings,
            daemons: Vec::new(),
            acquired: HashSet::new(),
            started: 0,
            admin,
        };
        for _ in 0..2 {
            let d = c.daemon().await;
            c.daemons.push(d);
        }
        let now = c.world.clock.now();
        c.daemons[0].store.ensure_zone(ZONE, now).await.unwrap();
        c.round(0).await;
        let mut last_intent = Intent::None;
        for op in &ops {
            // A daemon that does not hold a current lease (in the database's truth) writes
            // nothing of the zone: not its state, not an event, not an outbox row.
            let stale = match op {
                Op::Tick(d) | Op::Resume(d) | Op::Crash(d, _) => !c.holds_now(*d).await,
                _ => false,
            };
            let before = c.footprint().await;
            c.apply(op, ttl).await;
            if stale {
                let after = c.footprint().await;
                prop_assert_eq!(
                    before,
                    after,
                    "{:?} by a daemon without a current lease wrote",
                    op
                );
            }
            if let Op::Intent(i) = op {
                last_intent = *i;
            }
            c.check(&format!("{op:?}")).await?;
        }
        let goal = match last_intent {
            Intent::Enabled => Some(State::Active),
            Intent::Disabled => Some(State::Disabled),
            Intent::None => None,
        };
        c.settle(ttl, goal).await?;
        let state = c.state().await;
        match last_intent {
            Intent::Enabled => prop_assert_eq!(state, Some(State::Active)),
            Intent::Disabled => {
                prop_assert_eq!(state, Some(State::Disabled));
                prop_assert!(!c.world.dnssec_on());
            }
            Intent::None => prop_assert!(state.is_some(), "never adopted"),
        }
        for d in c.daemons {
            d.store.close().await;
        }
        Ok(())
    })
}

fn cases() -> u32 {
    std::env::var("HA_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

#[test]
fn two_daemons_never_act_on_a_stale_lease() {
    let _cluster = postgres::Cluster::shared();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    });
    let result = runner.run(
        &(
            prop::collection::vec(op(), 1..32),
            prop_oneof![Just(300u32), Just(3600), Just(86_400)],
        ),
        |(ops, ttl)| check(ops, ttl),
    );
    if let Err(e) = result {
        panic!("two daemons on PostgreSQL: {e}");
    }
}
