//! Chaos on several daemons sharing one PostgreSQL database (DESIGN.md rule 12, section
//! 9): three `dnssec-warden run` processes on 300 zones over the lab world (provider
//! simulator, lab DNS, a webhook receiver that is the registrar). Every zone is enabled;
//! part way through, half are disabled. Meanwhile random daemons are killed (SIGKILL,
//! restarted a little later) or paused (SIGSTOP, continued after up to 2.5 leases), for a
//! bounded time. Then, from the simulator's call log, the registrar's record and the
//! database:
//! - never "DNSSEC off" while the parent published the DS or within its TTL after, nor for
//!   a zone never disabled (ground truth, not what any daemon saw);
//! - never two provider calls for one decision: DNSSEC switched on at most once per zone
//!   and off at most once, but for a call that arrives within [`LATE`] of a paused daemon's
//!   SIGCONT (DESIGN.md section 9, Limits: a daemon stopped between its last fenced check
//!   and the request's write sends that request late); those are counted and printed;
//! - no lost zone: every zone converges to what its intent asks, held by a live daemon;
//! - no lost or doubled notification: every DS request decided was delivered, one id per
//!   zone and request, and a repeat of an id (delivery is at least once) only as often as
//!   a daemon was disrupted;
//! - epochs never go backwards in any zone's audit trail, and no critical alert opened.
//!
//! `HA_CHAOS_SEED` replays a run's random choices (printed at the start); `HA_CHAOS_SECS`
//! sets the chaos time (default 40 s).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use dnssec_warden::lifecycle::Intent;
use dnssec_warden_test_support::ha::{HaWorld, off_was_safe};
use sqlx::Row;

const ZONES: usize = 300;
const DAEMONS: usize = 3;
const LEASE: Duration = Duration::from_secs(3);
const POLL_WAITING: Duration = Duration::from_secs(4);
/// How soon after a SIGCONT a call counts as one the continued daemon sent late.
const LATE: Duration = Duration::from_secs(1);

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// The state each zone must end in: every other zone is disabled part way through.
fn target(zone: &str) -> &'static str {
    let i: usize = zone[1..4].parse().expect("z000.test.");
    if i % 2 == 1 { "disabled" } else { "active" }
}

#[derive(Debug, Default, Clone, Copy)]
enum Daemon {
    #[default]
    Running,
    /// SIGSTOPped until then.
    Stopped(Instant),
    /// SIGKILLed; a new process from then.
    Dead(Instant),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_daemons_under_kills_and_pauses_keep_every_rule() {
    let seed = env_u64("HA_CHAOS_SEED").unwrap_or_else(|| fastrand::u64(..));
    let chaos = Duration::from_secs(env_u64("HA_CHAOS_SECS").unwrap_or(40));
    println!("ha_chaos: seed {seed} (HA_CHAOS_SEED={seed} replays the choices), chaos {chaos:?}");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut world = HaWorld::start(ZONES, LEASE, POLL_WAITING).await;
    let db = world.db().await;
    for _ in 0..DAEMONS {
        world.start_daemon(&[]);
    }
    let zones = world.zones.clone();
    world.intend(&zones, Intent::Enabled).await;
    let to_disable: Vec<String> = zones
        .iter()
        .filter(|z| target(z) == "disabled")
        .cloned()
        .collect();

    let started = Instant::now();
    let mut daemons = [Daemon::Running; DAEMONS];
    let (mut kills, mut stops, mut disabled) = (0u32, 0u32, false);
    // When each paused daemon was continued (the simulator's clock is the wall clock).
    let mut continued: Vec<std::time::SystemTime> = Vec::new();
    while started.elapsed() < chaos {
        tokio::time::sleep(Duration::from_millis(rng.u64(200..1500))).await;
        let now = Instant::now();
        for (i, d) in daemons.iter_mut().enumerate() {
            match *d {
                Daemon::Stopped(until) if until <= now => {
                    world.daemons[i].signal("CONT");
                    continued.push(std::time::SystemTime::now());
                    *d = Daemon::Running;
                }
                Daemon::Dead(from) if from <= now => {
                    world.restart_daemon(i);
                    *d = Daemon::Running;
                }
                _ => {}
            }
        }
        if !disabled && started.elapsed() > chaos * 2 / 5 {
            world.intend(&to_disable, Intent::Disabled).await;
            disabled = true;
        }
        let i = rng.usize(..DAEMONS);
        if !matches!(daemons[i], Daemon::Running) {
            continue;
        }
        let lease_ms = LEASE.as_millis() as u64;
        match rng.u8(..10) {
            0..=3 => {
                let _ = world.daemons[i].child.kill();
                let _ = world.daemons[i].child.wait();
                daemons[i] = Daemon::Dead(now + Duration::from_millis(rng.u64(0..2 * lease_ms)));
                kills += 1;
            }
            4..=7 => {
                world.daemons[i].signal("STOP");
                daemons[i] = Daemon::Stopped(
                    now + Duration::from_millis(rng.u64(lease_ms / 4..lease_ms * 5 / 2)),
                );
                stops += 1;
            }
            _ => {}
        }
    }
    if !disabled {
        world.intend(&to_disable, Intent::Disabled).await;
    }
    for (i, d) in daemons.iter().enumerate() {
        match d {
            Daemon::Stopped(_) => {
                world.daemons[i].signal("CONT");
                continued.push(std::time::SystemTime::now());
            }
            Daemon::Dead(_) => world.restart_daemon(i),
            Daemon::Running => {}
        }
    }
    println!(
        "ha_chaos: {kills} kills, {stops} pauses in {:?}",
        started.elapsed()
    );

    // No lost zone: each converges to its intent.
    let converged = world.converge(&db, Duration::from_secs(240), target).await;
    if let Err(off) = converged {
        panic!(
            "{} zones did not converge (seed {seed}), e.g. {:?}\n{}",
            off.len(),
            &off[..off.len().min(10)],
            world.logs(30)
        );
    }
    println!("ha_chaos: converged after {:?}", started.elapsed());
    // Owed notifications go out after the commit: let every daemon's tick send them.
    tokio::time::sleep(LEASE).await;

    let mut failures = Vec::new();
    let switches = world.switches();
    let takeovers: usize = world
        .daemons
        .iter()
        .map(|d| d.log().matches("took over the zone").count())
        .sum();
    println!(
        "ha_chaos: {} switches on, {} off; {takeovers} zones taken over by the current daemons",
        switches.values().map(|s| s.0.len()).sum::<usize>(),
        switches.values().map(|s| s.1.len()).sum::<usize>()
    );
    let registrar = world.registrar.snapshot();
    // A call after the zone's first of its kind, arriving right after a SIGCONT: the
    // continued daemon's request sent late, the fence's documented limit.
    let late = |calls: &[std::time::SystemTime]| -> usize {
        let mut calls = calls.to_vec();
        calls.sort();
        calls
            .iter()
            .skip(1)
            .filter(|at| {
                continued
                    .iter()
                    .any(|c| at.duration_since(*c).is_ok_and(|d| d <= LATE))
            })
            .count()
    };
    let mut late_calls = 0;
    for zone in &zones {
        let (on, off) = switches.get(zone).cloned().unwrap_or_default();
        let (late_on, late_off) = (late(&on), late(&off));
        late_calls += late_on + late_off;
        let (on_n, off_n) = (on.len() - late_on, off.len() - late_off);
        let truth = registrar.zones.get(zone).cloned().unwrap_or_default();
        let want_on = target(zone) == "active";
        if on_n > 1 || off_n > 1 {
            failures.push(format!(
                "{zone}: DNSSEC switched on {} and off {} times (one call per decision; {} of them late after a SIGCONT)",
                on.len(),
                off.len(),
                late_on + late_off
            ));
        }
        if want_on && (on_n != 1 || off_n != 0) {
            failures.push(format!("{zone}: enabled, yet on {on:?} off {off:?}"));
        }
        if !want_on && off_n != on_n {
            failures.push(format!("{zone}: disabled, yet on {on:?} off {off:?}"));
        }
        for at in &off {
            if let Err(why) = off_was_safe(&truth, *at) {
                failures.push(format!("{zone}: DNSSEC switched off at {at:?}: {why}"));
            }
        }
        if world.sim.handle().dnssec_enabled(zone) != want_on || truth.present != want_on {
            failures.push(format!(
                "{zone}: ends with DNSSEC {} and the DS {}published (want {})",
                world.sim.handle().dnssec_enabled(zone),
                if truth.present { "" } else { "not " },
                target(zone)
            ));
        }
    }
    println!(
        "ha_chaos: {late_calls} provider calls beyond one per decision arrived within {LATE:?} of a paused daemon's SIGCONT (sent late, DESIGN.md section 9)"
    );
    failures.extend(registrar.wrong_ds.iter().cloned());
    let stale: Vec<&serde_json::Value> = registrar.zones.values().flat_map(|z| &z.stale).collect();
    println!(
        "ha_chaos: {} outdated DS requests delivered late and dropped by the registrar{}",
        stale.len(),
        stale
            .first()
            .map(|b| format!(", e.g. {b}"))
            .unwrap_or_default()
    );

    // Notifications: one id per zone and request, none lost, repeats only around
    // disruptions (at least once).
    let mut deliveries: HashMap<String, u32> = HashMap::new();
    let mut ids: HashMap<(String, String), Vec<String>> = HashMap::new();
    for body in &registrar.received {
        let id = body["id"].as_str().unwrap_or_default().to_string();
        let key = (
            body["zone"].as_str().unwrap_or_default().to_string(),
            body["event"].as_str().unwrap_or_default().to_string(),
        );
        let n = deliveries.entry(id.clone()).or_default();
        *n += 1;
        if *n == 1 {
            ids.entry(key).or_default().push(id);
        }
    }
    for ((zone, event), ids) in &ids {
        if ids.len() > 1 {
            failures.push(format!(
                "{zone}: {event} notified under {} ids: {ids:?}",
                ids.len()
            ));
        }
    }
    let repeats: u32 = deliveries.values().map(|n| n - 1).sum();
    println!(
        "ha_chaos: {} notifications delivered, {} distinct ids, {repeats} repeated deliveries",
        registrar.received.len(),
        deliveries.len()
    );
    if repeats > kills + stops {
        failures.push(format!(
            "{repeats} repeated deliveries, more than the {} disruptions",
            kills + stops
        ));
    }
    let owed = sqlx::query(
        "SELECT zone, kind, status FROM outbox \
         WHERE kind IN ('announce_ds', 'request_ds_removal') AND status NOT IN ('done', 'superseded')",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    for r in owed {
        failures.push(format!(
            "{}: a {} request left {}",
            r.get::<String, _>(0),
            r.get::<String, _>(1),
            r.get::<String, _>(2)
        ));
    }
    let delivered: Vec<(String, String, i64)> = sqlx::query(
        "SELECT zone, kind, coalesce(seq, id) FROM outbox \
         WHERE kind IN ('announce_ds', 'request_ds_removal') AND status = 'done'",
    )
    .fetch_all(&db)
    .await
    .unwrap()
    .into_iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect();
    for (zone, kind, seq) in delivered {
        let event = if kind == "announce_ds" {
            "ds_publish"
        } else {
            "ds_withdraw"
        };
        // Received, or replaced before a sink sent it by a later request that was
        // (DESIGN.md section 9: a superseded request is never sent).
        if !registrar.received.iter().any(|b| {
            b["zone"] == zone.as_str()
                && (b["event"] == event || b["seq"].as_i64().is_some_and(|s| s > seq))
        }) {
            failures.push(format!("{zone}: {kind} marked done, never received"));
        }
    }

    // The audit trail: epochs never backwards per zone.
    for (zone, writers) in world.writers(&db).await {
        let epochs: Vec<i64> = writers.iter().filter_map(|w| w.1).collect();
        if !epochs.windows(2).all(|w| w[0] <= w[1]) {
            failures.push(format!(
                "{zone}: epochs backwards in the audit trail: {epochs:?}"
            ));
        }
    }
    // No critical alert: nothing was ever broken.
    for r in sqlx::query("SELECT zone, kind, message FROM alerts WHERE severity = 'critical'")
        .fetch_all(&db)
        .await
        .unwrap()
    {
        failures.push(format!(
            "{}: critical alert {}: {}",
            r.get::<String, _>(0),
            r.get::<String, _>(1),
            r.get::<String, _>(2)
        ));
    }
    // Every zone held by one of the live daemons.
    let live: Vec<String> = world
        .daemons
        .iter()
        .map(|d| format!("/{}", d.child.id()))
        .collect();
    tokio::time::sleep(LEASE).await;
    let unheld: Vec<String> = sqlx::query(
        "SELECT name, lease_holder FROM zones WHERE lease_until IS NULL OR lease_until < warden_now_ms() \
         OR lease_holder IS NULL",
    )
    .fetch_all(&db)
    .await
    .unwrap()
    .into_iter()
    .map(|r| r.get::<String, _>(0))
    .collect();
    if !unheld.is_empty() {
        failures.push(format!(
            "{} zones held by nobody: {:?}",
            unheld.len(),
            &unheld[..unheld.len().min(5)]
        ));
    }
    for r in sqlx::query("SELECT name, lease_holder FROM zones")
        .fetch_all(&db)
        .await
        .unwrap()
    {
        let holder: Option<String> = r.get(1);
        if let Some(h) = holder.filter(|h| !live.iter().any(|l| h.ends_with(l.as_str()))) {
            failures.push(format!(
                "{}: held by {h}, not a live daemon",
                r.get::<String, _>(0)
            ));
        }
    }
    // The first failing zone's audit trail, to read what the daemons decided.
    let mut trail = String::new();
    if let Some(zone) = failures
        .first()
        .and_then(|f| f.split(':').next())
        .filter(|z| zones.iter().any(|x| x == z))
    {
        for r in sqlx::query(
            "SELECT at, kind, from_state, to_state, reason, holder, epoch FROM events \
             WHERE zone = $1 ORDER BY id",
        )
        .bind(zone)
        .fetch_all(&db)
        .await
        .unwrap()
        {
            trail.push_str(&format!(
                "  {} {} {:?}->{:?} [{:?} epoch {:?}] {}\n",
                r.get::<i64, _>(0),
                r.get::<String, _>(1),
                r.get::<Option<String>, _>(2),
                r.get::<Option<String>, _>(3),
                r.get::<Option<String>, _>(5),
                r.get::<Option<i64>, _>(6),
                r.get::<String, _>(4),
            ));
        }
        trail = format!("audit trail of {zone}:\n{trail}");
    }
    assert!(
        failures.is_empty(),
        "seed {seed}: {} failures:\n{}\n{trail}\n{}",
        failures.len(),
        failures[..failures.len().min(40)].join("\n"),
        world.logs(20)
    );
}
