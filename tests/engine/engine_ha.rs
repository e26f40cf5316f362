//! Two engines on one PostgreSQL database, in one process, over the fake world: the zone
//! is stepped by its lease's holder only; an engine stopped right after a commit (its
//! lease runs out meanwhile) is fenced when it resumes: its step writes nothing, its effect
//! is not performed, and the taker performs the decision once. Leases are real time (the
//! database's clock); the world's clock is manual. The process-level tests are
//! `tests/e2e/ha_fencing.rs` and `ha_chaos.rs`.

use std::time::Duration;

use dnssec_warden::engine::{CrashPoint, EngineError};
use dnssec_warden::lifecycle::{Clock, Intent, ManualClock, State};
use dnssec_warden::store::{
    ClusterSettings, DatabaseSettings, Fenced, PostgresSettings, Store, StoreError,
};
use dnssec_warden_test_support::fake::FakeWorld;
use dnssec_warden_test_support::logs;
use dnssec_warden_test_support::postgres;
use dnssec_warden_test_support::rig::{self, CrashSwitch, T0, ZONE, engine};

const LEASE: Duration = Duration::from_millis(3_000);

async fn daemon(settings: &DatabaseSettings, node: &str) -> Store {
    let mut store = Store::connect(settings).await.expect("PostgreSQL store");
    store
        .join_cluster(&ClusterSettings {
            lease: LEASE,
            ..ClusterSettings::new(node)
        })
        .expect("joined");
    store
}

#[tokio::test]
async fn a_daemon_resuming_after_its_lease_ran_out_is_fenced_and_the_taker_acts_once() {
    let cluster = postgres::Cluster::shared();
    let settings = DatabaseSettings::Postgres(PostgresSettings::new(
        cluster.database().await.parse().expect("URL"),
    ));
    let world = FakeWorld::new(ZONE, 2, 2, ManualClock::starting_at(T0));
    let policy = rig::policy();
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
    // refused, and it performs nothing. The refusal is said (one warning naming the zone,
    // the stale epoch and what was refused) and counted, so that an operator sees a fenced
    // daemon.
    assert!(a_store.holds(ZONE));
    let (resumed, lines) = {
        let lines = logs::capture();
        (a.step_zone(ZONE).await, lines.text())
    };
    assert!(
        matches!(resumed, Err(EngineError::Store(StoreError::LeaseLost(ref z))) if z == ZONE),
        "{resumed:?}"
    );
    assert!(!a_store.holds(ZONE), "the refusal ends A's belief");
    let said: Vec<String> = lines
        .lines()
        .filter(|l| l.contains("fenced"))
        .map(str::to_string)
        .collect();
    assert_eq!(said.len(), 1, "one line for the refusal: {said:?}");
    for field in [
        " WARN ".to_string(),
        format!("zone=\"{ZONE}\""),
        format!("epoch={}", lease.epoch),
        "what=\"step\"".to_string(),
    ] {
        assert!(said[0].contains(&field), "{field} in {}", said[0]);
    }
    let counted = a_store.fenced().expect("A is one of several daemons");
    let step = counted.iter().find(|(w, _)| *w == Fenced::Step).unwrap().1;
    assert_eq!(step, 1, "{counted:?}");
    let metrics = dnssec_warden::metrics::render(&a_store, &world.clock)
        .await
        .unwrap();
    assert!(
        metrics.contains("# TYPE dnssec_warden_fenced_total counter")
            && metrics.contains("dnssec_warden_fenced_total{what=\"step\"} 1")
            && metrics.contains("dnssec_warden_fenced_total{what=\"provider_call\"} 0"),
        "{metrics}"
    );
    let metrics_b = dnssec_warden::metrics::render(&b_store, &world.clock)
        .await
        .unwrap();
    assert!(
        metrics_b.contains("dnssec_warden_fenced_total{what=\"step\"} 0"),
        "B was never fenced: {metrics_b}"
    );
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

/// A daemon that loses its leases while its sink's worker works through the queue (its
/// first send stalls past the lease) sends none of the other zones' queued notifications:
/// their new holder's worker sends them, once each. The one in hand at the disruption is
/// sent once, by the daemon that claimed it.
#[tokio::test]
async fn a_round_of_alerts_stops_sending_for_zones_whose_lease_ran_out() {
    use dnssec_warden::alert::{AlertSettings, ExecSettings};
    use dnssec_warden::engine::Notifier;
    const OTHER: &str = "other.test.";
    let cluster = postgres::Cluster::shared();
    let url = cluster.database().await;
    let settings = DatabaseSettings::Postgres(PostgresSettings::new(url.parse().expect("URL")));
    let clock = ManualClock::starting_at(T0);
    let a_store = daemon(&settings, "a").await;
    let b_store = daemon(&settings, "b").await;
    let now = clock.now();
    let db = sqlx::PgPool::connect(&url).await.expect("database");
    for zone in [ZONE, OTHER] {
        a_store.ensure_zone(zone, now).await.unwrap();
        sqlx::query(
            "INSERT INTO alerts (zone, kind, severity, message, opened_at) \
             VALUES ($1, 'ds_unpublished_overdue', 'warning', 'enter the DS', $2)",
        )
        .bind(zone)
        .bind(now.0)
        .execute(&db)
        .await
        .expect("an open alert");
    }
    assert_eq!(a_store.lease_round(now).await.unwrap().held, 2);
    assert_eq!(b_store.lease_round(now).await.unwrap().held, 0);
    // The sink writes each event's zone down; for the first zone it then stalls past the
    // lease (A's pause), as B takes both zones.
    let dir = tempfile::tempdir().unwrap();
    let sent = dir.path().join("sent");
    let stall = (LEASE + Duration::from_millis(1_500)).as_secs_f64();
    let alerts = AlertSettings {
        execs: vec![ExecSettings::new(
            "alerts.exec[0]",
            vec![
                "sh".into(),
                "-c".into(),
                format!(
                    "echo \"$DNSSEC_WARDEN_ALERT_ZONE\" >> '{}'; \
                         if [ \"$DNSSEC_WARDEN_ALERT_ZONE\" = '{ZONE}' ] && [ ! -e '{}.stalled' ]; \
                         then touch '{}.stalled'; sleep {stall}; fi",
                    sent.display(),
                    sent.display(),
                    sent.display()
                ),
            ],
        )],
        ..AlertSettings::default()
    };
    let notifier = |store: &Store| {
        let n = Notifier::new(&alerts, None)
            .expect("notifier")
            .with_clock(std::sync::Arc::new(clock.clone()));
        let workers = n.start(store);
        (n, workers)
    };
    let sent_to = |path: &std::path::Path| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    };
    let (a_notifier, _a_workers) = notifier(&a_store);
    // Queued at once for both zones; A's worker starts on the first.
    a_notifier.deliver_alerts(&a_store, &clock).await.unwrap();
    tokio::time::sleep(LEASE + Duration::from_millis(300)).await;
    assert_eq!(
        b_store.lease_round(now).await.unwrap().held,
        2,
        "B took both"
    );
    let (b_notifier, _b_workers) = notifier(&b_store);
    b_notifier.deliver_alerts(&b_store, &clock).await.unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while sent_to(&sent).len() < 2 && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A's stalled send has ended, and both workers had time for more.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut all = sent_to(&sent);
    all.sort();
    assert_eq!(all, [ZONE, OTHER], "each zone's notification once");
    drop(cluster);
}
