//! Two engines on one PostgreSQL database, in one process, over the fake world: the zone
//! is stepped by its lease's holder only; an engine stopped right after a commit (its
//! lease runs out meanwhile) is fenced when it resumes: its step writes nothing, its effect
//! is not performed, and the taker performs the decision once. Leases are real time (the
//! database's clock); the world's clock is manual. The process-level tests are
//! `ha_fencing.rs` and `ha_chaos.rs`.

mod common;

use std::time::Duration;

use common::fake::FakeWorld;
use common::{CrashSwitch, T0, ZONE, engine};
use dnssec_warden::config::{ClusterSettings, DatabaseSettings, PostgresSettings};
use dnssec_warden::engine::{CrashPoint, EngineError};
use dnssec_warden::lifecycle::{Clock, Intent, ManualClock, State};
use dnssec_warden::store::{Store, StoreError};

const LEASE: Duration = Duration::from_millis(3_000);

async fn daemon(settings: &DatabaseSettings, node: &str) -> Store {
    let mut store = Store::connect(settings).await.expect("PostgreSQL store");
    store
        .join_cluster(&ClusterSettings {
            node: node.into(),
            lease: LEASE,
        })
        .expect("joined");
    store
}

#[tokio::test]
async fn a_daemon_resuming_after_its_lease_ran_out_is_fenced_and_the_taker_acts_once() {
    let cluster = common::postgres::Cluster::shared();
    let settings = DatabaseSettings::Postgres(PostgresSettings {
        url: cluster.database().await.parse().expect("URL"),
        password: None,
    });
    let world = FakeWorld::new(ZONE, 2, 2, ManualClock::starting_at(T0));
    let policy = common::policy();
    let a_store = daemon(&settings, "a").await;
    let b_store = daemon(&settings, "b").await;
    let a_crash = CrashSwitch::default();
    let a = engine(&world, &a_store, &a_crash, &policy);
    let b = engine(&world, &b_store, &CrashSwitch::default(), &policy);
    let now = world.clock.now();
    a_store.ensure_zone(ZONE, now).await.unwrap();

    // A takes the zone; B, joining, finds nothing free: one holder.
    assert_eq!(a_store.lease_round(now).await.unwrap().held, 1);
    assert_eq!(b_store.lease_round(now).await.unwrap().held, 0);
    assert_eq!(
        b.tick().await.unwrap(),
        0,
        "B steps nothing it does not hold"
    );
    assert_eq!(a.tick().await.unwrap(), 1);
    let row = a_store.zone(ZONE).await.unwrap().unwrap();
    assert_eq!(row.zone.state, Some(State::Disabled));
    let lease = row.lease.expect("held");
    assert_eq!(Some(lease.holder.as_str()), a_store.holder());

    // The operator enables; A commits "enabling" with its call pending, then stops dead
    // (a pause, a partition) before performing it.
    a_store
        .set_intent(ZONE, Intent::Enabled, false, "operator asked", now)
        .await
        .unwrap();
    a_crash.arm(CrashPoint::Committed);
    let crashed = a.step_zone(ZONE).await;
    assert!(
        matches!(crashed, Err(EngineError::Crashed(CrashPoint::Committed))),
        "{crashed:?}"
    );
    assert!(!world.dnssec_on(), "nothing performed yet");

    // A's lease runs out; B takes the zone one epoch up, looks again, decides and acts.
    tokio::time::sleep(LEASE + Duration::from_millis(300)).await;
    let round = b_store.lease_round(world.clock.now()).await.unwrap();
    assert_eq!(round.held, 1, "{round:?}");
    assert_eq!(
        round.acquired[0],
        (
            ZONE.to_string(),
            lease.epoch + 1,
            a_store.holder().map(str::to_string)
        )
    );
    assert_eq!(b.tick().await.unwrap(), 1);
    assert!(world.dnssec_on(), "B switched DNSSEC on");
    assert_eq!(world.switches().len(), 1);

    // A resumes the step it was in (it still believes it holds the zone): every write is
    // refused, and it performs nothing.
    assert!(a_store.holds(ZONE));
    let resumed = a.step_zone(ZONE).await;
    assert!(
        matches!(resumed, Err(EngineError::Store(StoreError::LeaseLost(ref z))) if z == ZONE),
        "{resumed:?}"
    );
    assert!(!a_store.holds(ZONE), "the refusal ends A's belief");
    assert_eq!(a.tick().await.unwrap(), 0, "nothing is due for A");
    assert_eq!(world.switches().len(), 1, "one call for one decision");
    let events = b_store.events(ZONE).await.unwrap();
    let stale = events
        .iter()
        .filter(|e| e.holder.as_deref() == a_store.holder() && e.epoch != Some(lease.epoch))
        .count();
    assert_eq!(stale, 0, "A wrote only under its own epoch: {events:?}");
    assert!(
        events
            .iter()
            .any(|e| e.holder.as_deref() == b_store.holder()
                && e.epoch == Some(lease.epoch + 1)
                && e.reason.contains("switched on")),
        "{events:?}"
    );
    // A's next round finds its lease gone and takes nothing back (B holds it).
    let round = a_store.lease_round(world.clock.now()).await.unwrap();
    assert_eq!(round.held, 0, "{round:?}");
    drop(cluster);
}
