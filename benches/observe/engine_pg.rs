//! The engine pass of `cargo bench --bench observe` on PostgreSQL (several daemons,
//! DESIGN.md section 10): the same zones, the same provider simulator and Knot TLD, stepped
//! by one daemon and then by two sharing the zones by leases (each with its own store
//! connection, provider client and observer, as two hosts would have; here they share the
//! two cores). A throwaway cluster (the test-support crate's `postgres`), stopped by PID at
//! the end. Prints figures only.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dnssec_warden::config::Settings;
use dnssec_warden::dns::DnsObserver;
use dnssec_warden::engine::{Engine, Notifier};
use dnssec_warden::lifecycle::{Clock, Policy, SystemClock};
use dnssec_warden::provider::gcore::GcoreClient;
use dnssec_warden::store::{ClusterSettings, DatabaseSettings, PostgresSettings, Store};
use dnssec_warden_test_support::postgres;

type Res<T> = Result<T, String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// One daemon's engine on the database, joined to the others.
async fn daemon(
    settings: &Settings,
    database: &DatabaseSettings,
    node: &str,
) -> Res<Engine<GcoreClient, DnsObserver>> {
    let provider = settings
        .providers
        .first()
        .and_then(|p| p.gcore().cloned())
        .ok_or("no Gcore provider")?;
    let client =
        GcoreClient::new(&provider, provider.credentials.load().map_err(err)?).map_err(err)?;
    let observer = DnsObserver::new(&settings.dns).map_err(err)?;
    let mut store = Store::connect(database).await.map_err(err)?;
    store
        .join_cluster(&ClusterSettings {
            lease: Duration::from_secs(30),
            ..ClusterSettings::new(node)
        })
        .map_err(err)?;
    Ok(Engine::new(
        store,
        Arc::new(client),
        Arc::new(observer),
        Arc::new(SystemClock),
        Policy::default(),
        Notifier::default(),
    ))
}

/// Steps everything due on this engine, tick after tick (bounded); returns the steps.
async fn drain(engine: &Engine<GcoreClient, DnsObserver>) -> Res<usize> {
    let started = Instant::now();
    let mut stepped = 0;
    for _ in 0..400 {
        let n = engine.tick().await.map_err(err)?;
        stepped += n;
        if n == 0 || started.elapsed() > Duration::from_secs(180) {
            break;
        }
    }
    Ok(stepped)
}

/// Prints the engine pass over `zones` on PostgreSQL with one daemon, then two; returns
/// the two-daemon rate (zone steps a second) for the summary line.
pub async fn engine_pass_postgres(settings: &Settings, zones: &[String]) -> Res<f64> {
    let cluster = postgres::Cluster::start();
    let mut rate = 0.0;
    for daemons in [1usize, 2] {
        let database = DatabaseSettings::Postgres(PostgresSettings::new(
            cluster.database().await.parse().map_err(err)?,
        ));
        let mut engines = Vec::new();
        for i in 0..daemons {
            engines.push(daemon(settings, &database, &format!("bench{i}")).await?);
        }
        let now = SystemClock.now();
        for zone in zones {
            engines[0]
                .store()
                .ensure_zone(zone, now)
                .await
                .map_err(err)?;
        }
        // Three rounds: the first daemon takes all, the second joins, the first hands
        // back the excess, the second takes it.
        for _ in 0..3 {
            for engine in &engines {
                engine.store().lease_round(now).await.map_err(err)?;
            }
        }
        let started = Instant::now();
        let steps = futures::future::join_all(engines.iter().map(drain)).await;
        let took = started.elapsed().as_secs_f64();
        let steps: Vec<usize> = steps.into_iter().collect::<Res<_>>()?;
        let total: usize = steps.iter().sum();
        rate = total as f64 / took.max(1e-6);
        let split: Vec<String> = steps.iter().map(usize::to_string).collect();
        println!(
            "engine pass (PostgreSQL, {daemons} daemon{} sharing the zones by leases): {total} zone steps in {took:.2}s ({rate:.0} zones/s; steps per daemon {})",
            if daemons == 1 { "" } else { "s" },
            split.join(" + ")
        );
        for engine in &engines {
            engine.store().leave_cluster().await.map_err(err)?;
            engine.store().close().await;
        }
    }
    Ok(rate)
}
