//! `cargo bench --bench fleet`: 100,000 zones on one host (`BENCH_FLEET_ZONES` changes
//! the count). A Knot DNS TLD with every delegation (a DS for half of them) and the
//! provider simulator holding every zone, on loopback; then the real daemon, `dnssec-warden
//! run` over a SQLite file with `zones.all = true`:
//! 1. its first engine pass over every zone (listed, added, observed, adopted);
//! 2. two steady passes of the running daemon (every settled zone made due: what it does at
//!    every poll; the first a full look at every address, the second from samples, DESIGN.md
//!    section 4), with the queries a zone cost the parent's and the child's servers, and one
//!    after a restart (every cache empty), with the provider requests it made per zone;
//! 3. its CPU between passes (each settled zone looked at once an hour in a slot of its
//!    own, so a steady trickle), its peak RSS, the size of the SQLite file;
//! 4. `status` and `status --json` over every zone;
//! 5. with `BENCH_FLEET_DECIDE`, a decision-heavy pass.
//!
//! `BENCH_FLEET_PERF=<file>` records a profile of the running daemon's steady pass;
//! `BENCH_FLEET_EXE=<binary>` runs an earlier build of `dnssec-warden` (A/B comparisons on
//! one machine, whose speed drifts between half hours; its config has no `[dns]
//! max_qps_per_server`, which builds before it did not know and which this build sets to
//! its bound: the passes, every zone due at once, measure the engine unpaced).
//!
//! `BENCH_FLEET_TLD_ADDRESSES=<n>` serves the TLD on n addresses (2 by default; `.com`
//! has 13 servers), `BENCH_FLEET_RRL=<rate>` has each rate-limit its responses (Knot's
//! mod-rrl, slip 2) and runs the daemon at its default pace instead of unpaced;
//! `BENCH_FLEET_LIMIT=<qps>` puts a per-source limiter (as dnsdist) in front of the last
//! address, which prints, pass by pass, the highest rate this host reached there and what
//! it dropped; `BENCH_FLEET_DECIDE=<n>` ends with a decision-heavy pass (5.): n active
//! zones disabled at once, their DS removed at every TLD server (DS and DNSKEY TTLs of 10 s
//! in this world, `timing.propagation_margin` 10 s for the pass), until every one is
//! `disabled`, with the queries and provider requests a zone took (waiting zones polled
//! every minute).
//!
//! It prints figures with their goals beside them and asserts nothing about time. The last
//! line is, for scripts: `fleet zones=<n> first_pass_steps_per_sec=<n> …`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use dnssec_warden_test_support::bench_world::{self, BenchWorld, Res};
use dnssec_warden_test_support::knot;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};

const BLOCK: u8 = 62;
/// The daemon under test: this build's, or `BENCH_FLEET_EXE`.
fn exe() -> std::ffi::OsString {
    std::env::var_os("BENCH_FLEET_EXE")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_dnssec-warden").into())
}

fn main() {
    bench_world::run_bench("fleet", &["knot", "knot-dnsutils"], bench);
}

/// utime + stime of a process so far (seconds; USER_HZ is 100 on Linux).
fn cpu_secs(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some((f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / 100.0)
        })
        .unwrap_or(0.0)
}

/// Context switches of every thread of a process so far (voluntary and not), from /proc:
/// a thread that waited for another (the SQLite connections' threads, the DNS sockets'
/// tasks) or was pushed off a core.
fn context_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Peak resident set of a process (MiB), from /proc.
fn peak_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// `BENCH_FLEET_PERF=<file>`: `perf record` of the daemon during its warm steady pass, to
/// find what bounds the engine pass (`perf report -i <file>`; DWARF call graphs, so build
/// with `CARGO_PROFILE_BENCH_DEBUG=line-tables-only` for them to resolve).
fn perf_record(pid: u32) -> Res<Option<knot::Proc>> {
    let Some(out) = std::env::var_os("BENCH_FLEET_PERF") else {
        return Ok(None);
    };
    let perf = knot::Proc::spawn(
        "perf record",
        Command::new("perf")
            .args([
                "record",
                "-F",
                "999",
                "--call-graph",
                "dwarf,16384",
                "-p",
                // `BENCH_FLEET_PERF_LAB=1`: the benchmark's own process instead (the lab's
                // child servers and the simulator), which shares the cores with the daemon.
                &if std::env::var_os("BENCH_FLEET_PERF_LAB").is_some() {
                    std::process::id()
                } else {
                    pid
                }
                .to_string(),
                "-o",
            ])
            .arg(out)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )?;
    Ok(Some(perf))
}

/// `dnssec-warden run`; under heaptrack (its data file in that directory, named after
/// the log) when `BENCH_FLEET_HEAPTRACK=<dir>` is set, to find where the memory goes.
fn start_daemon(conf: &Path, log: &Path) -> Res<knot::Proc> {
    let mut command = match std::env::var_os("BENCH_FLEET_HEAPTRACK") {
        Some(dir) => {
            let mut c = Command::new("heaptrack");
            let name = log.file_stem().unwrap_or_default();
            c.arg("-o").arg(Path::new(&dir).join(name)).arg(exe());
            c
        }
        None => Command::new(exe()),
    };
    let log = std::fs::File::create(log).map_err(|e| e.to_string())?;
    knot::Proc::spawn(
        "dnssec-warden run",
        command
            .arg("--config")
            .arg(conf)
            .arg("run")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log),
    )
}

/// Until `count` zones were observed at or after `since` (Unix ms) and none is due within
/// the next minute (a zone's first looks may take more than one step); the time it took.
/// The time from the first zone's observation at or after `since` (ms) to the last one.
async fn observed_span(db: &Path, since: i64) -> Res<Duration> {
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", db.display()))
        .map_err(|e| e.to_string())?
        .read_only(true);
    let mut conn = options.connect().await.map_err(|e| e.to_string())?;
    let (first, last): (Option<i64>, Option<i64>) = sqlx::query_as(&format!(
        "SELECT min(looked), max(looked) FROM (SELECT {} AS looked FROM zones) \
             WHERE looked >= ?",
        looked(&mut conn).await
    ))
    .bind(since)
    .fetch_one(&mut conn)
    .await
    .map_err(|e| e.to_string())?;
    let _ = conn.close().await;
    let ms = last.unwrap_or(0) - first.unwrap_or(0);
    Ok(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

/// The SQL for when a zone was last looked at: its last full look or a later sample (a
/// build before samples has no `sampled_at`).
async fn looked(conn: &mut sqlx::SqliteConnection) -> &'static str {
    let sampled: Result<Option<i64>, _> =
        sqlx::query_scalar("SELECT 1 FROM pragma_table_info('zones') WHERE name = 'sampled_at'")
            .fetch_optional(conn)
            .await;
    match sampled {
        Ok(Some(_)) => "max(last_observed_at, coalesce(sampled_at, 0))",
        _ => "last_observed_at",
    }
}

/// The daemon's counters from its metrics endpoint (`name{labels}` to value); empty if it
/// cannot be read.
fn scrape(addr: std::net::SocketAddr) -> std::collections::HashMap<String, f64> {
    use std::io::{Read, Write};
    let mut text = String::new();
    if let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let _ = stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n");
        let _ = stream.read_to_string(&mut text);
    }
    text.lines()
        .filter(|l| l.starts_with("dnssec_warden_") && !l.contains("zone=\""))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// The samples one scrape of the metrics endpoint carries (every series, whatever its
/// labels), and how long the scrape took.
fn series_count(addr: std::net::SocketAddr) -> (usize, Duration) {
    use std::io::{Read, Write};
    let started = Instant::now();
    let mut text = String::new();
    if let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
        let _ = stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n");
        let _ = stream.read_to_string(&mut text);
    }
    let took = started.elapsed();
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let series = body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    (series, took)
}

/// Every zone's standard for samples taken away: its next look is a full one (a build
/// before samples has none to take).
async fn without_samples(db: &Path) -> Res<()> {
    write_every_zone(
        db,
        "UPDATE zones SET facts = json_remove(facts, '$.settled_view')",
    )
    .await
}

/// Every zone due now (the daemon, running or not, takes them at its next look).
async fn make_all_due(db: &Path) -> Res<()> {
    write_every_zone(db, "UPDATE zones SET next_check_at = 0").await
}

/// One statement on the database beside the running daemon (waiting for its writes).
async fn write_every_zone(db: &Path, sql: &str) -> Res<()> {
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", db.display()))
        .map_err(|e| e.to_string())?
        .busy_timeout(Duration::from_secs(30));
    let mut conn = options.connect().await.map_err(|e| e.to_string())?;
    sqlx::query(sql)
        .execute(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    let _ = conn.close().await;
    Ok(())
}

/// The watch itself must not compete with the daemon for the two cores: while zones are
/// due it asks only whether any still is (one probe of the `zones_due` index), and counts
/// the observed zones (a scan of every row, the whole table) only once none is.
async fn wait_observed(db: &Path, zones: usize, since: i64, limit: Duration) -> Res<Duration> {
    let started = Instant::now();
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", db.display()))
        .map_err(|e| e.to_string())?
        .read_only(true);
    loop {
        if started.elapsed() > limit {
            return Err(format!("not every zone was observed within {limit:?}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        // The daemon creates the file; until then there is nothing to count.
        let Ok(mut conn) = options.connect().await else {
            continue;
        };
        // Nothing due now: settled zones' next looks are spread over `poll_active` (each in
        // its own slot), so some are always due within a minute.
        let due: Result<bool, _> =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM zones WHERE next_check_at < ?)")
                .bind(now_ms())
                .fetch_one(&mut conn)
                .await;
        let observed: Result<i64, _> = match due {
            Ok(false) => {
                let looked = looked(&mut conn).await;
                sqlx::query_scalar(&format!("SELECT count(*) FROM zones WHERE {looked} >= ?"))
                    .bind(since)
                    .fetch_one(&mut conn)
                    .await
            }
            _ => Ok(0),
        };
        let _ = conn.close().await;
        if observed.is_ok_and(|n| n as usize >= zones) {
            return Ok(started.elapsed());
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// "active=5000 disabled=5000", and how many zones are due within the next minute.
async fn states(db: &Path) -> Res<String> {
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", db.display()))
        .map_err(|e| e.to_string())?
        .read_only(true);
    let mut conn = options.connect().await.map_err(|e| e.to_string())?;
    let counts: Vec<(Option<String>, i64)> =
        sqlx::query_as("SELECT state, count(*) FROM zones GROUP BY state ORDER BY state")
            .fetch_all(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
    let due: i64 = sqlx::query_scalar("SELECT count(*) FROM zones WHERE next_check_at < ?")
        .bind(now_ms() + 60_000)
        .fetch_one(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    let _ = conn.close().await;
    let counts: Vec<String> = counts
        .into_iter()
        .map(|(s, n)| format!("{}={n}", s.as_deref().unwrap_or("unobserved")))
        .collect();
    Ok(format!("{}; {due} due within a minute", counts.join(" ")))
}

/// Of the zones in `list` (SQL literals), how many are not `disabled` yet.
async fn not_disabled(db: &Path, list: &str) -> Res<usize> {
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", db.display()))
        .map_err(|e| e.to_string())?
        .read_only(true);
    let mut conn = options.connect().await.map_err(|e| e.to_string())?;
    let n: i64 = sqlx::query_scalar(&format!(
        "SELECT count(*) FROM zones WHERE name IN ({list}) AND state IS NOT 'disabled'"
    ))
    .fetch_one(&mut conn)
    .await
    .map_err(|e| e.to_string())?;
    let _ = conn.close().await;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// What the per-source limiter in front of one TLD address saw since `before` (with
/// `BENCH_FLEET_LIMIT`): the highest rate one source reached there, and what it dropped.
fn limiter_line(world: &BenchWorld, before: &mut bench_world::LimiterStats) {
    let Some(limiter) = world.limiter.as_ref() else {
        return;
    };
    let now = limiter.take();
    println!(
        "  at the rate-limited TLD address {} (a per-source limit, as dnsdist): {} queries, the highest rate from this host {} a second, {} dropped",
        limiter.listen,
        now.queries - before.queries,
        now.peak_qps,
        now.dropped - before.dropped
    );
    *before = now;
}

/// The fastest and the median of `runs` runs of `dnssec-warden <args>` (wall seconds), and
/// the output size of the last.
fn time_command(conf: &Path, args: &[&str], runs: usize) -> Res<(f64, f64, usize)> {
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let out = Command::new(exe())
            .args(args)
            .arg("--config")
            .arg(conf)
            .output()
            .map_err(|e| e.to_string())?;
        times.push(started.elapsed().as_secs_f64());
        if !out.status.success() {
            return Err(format!(
                "{args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        size = out.stdout.len();
    }
    times.sort_by(f64::total_cmp);
    Ok((times[0], times[times.len() / 2], size))
}

/// The peak resident set of one `dnssec-warden <args>` (MiB), as GNU time reports it
/// (0 where /usr/bin/time is missing).
fn status_peak_rss_mib(conf: &Path, args: &[&str]) -> Res<f64> {
    let report = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    let ran = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(report.path())
        .arg(exe())
        .args(args)
        .arg("--config")
        .arg(conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !ran.is_ok_and(|s| s.success()) {
        return Ok(0.0);
    }
    let kib: f64 = std::fs::read_to_string(report.path())
        .ok()
        .and_then(|t| t.trim().lines().last()?.trim().parse().ok())
        .unwrap_or(0.0);
    Ok(kib / 1024.0)
}

async fn bench() -> Res<()> {
    let zones: usize = std::env::var("BENCH_FLEET_ZONES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let total = Instant::now();
    // `BENCH_FLEET_DECIDE=<n>`: after the steady passes, n active zones disabled at once.
    let decide: usize = std::env::var("BENCH_FLEET_DECIDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        .min(zones.div_ceil(2));
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    // `BENCH_FLEET_TLD_ADDRESSES=13 BENCH_FLEET_RRL=20`: a TLD shaped like `.com`, each
    // address rate-limiting responses (Knot's mod-rrl, slip 2), the daemon at its default
    // pace: what a fleet costs the DNS, and whether it is slipped.
    let shape = bench_world::TldShape {
        addresses: std::env::var("BENCH_FLEET_TLD_ADDRESSES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2),
        rrl: std::env::var("BENCH_FLEET_RRL")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(|rate| (rate, 2)),
        limit: std::env::var("BENCH_FLEET_LIMIT")
            .ok()
            .and_then(|v| v.parse().ok()),
        // A disable's wait (the DS TTL, then the DNSKEY TTL) fits in the bench.
        ttl: (decide > 0).then_some(10),
    };
    let world = BenchWorld::start_shaped(BLOCK, zones, dir.path(), &shape).await?;
    let db = dir.path().join("state.db");
    // Hourly polls: after the first pass each zone is next due in its own slot of the hour.
    // Unpaced: the passes, every zone due at once, measure the engine; at the default
    // pace (`dns.max_qps_per_server`) one TLD address would take minutes a pass by design.
    // An earlier build (`BENCH_FLEET_EXE`) knows no such key, and was unpaced.
    let dns = match (std::env::var_os("BENCH_FLEET_EXE"), shape.rrl) {
        (None, None) => "max_qps_per_server = 100000",
        _ => "",
    };
    let conf = world.config(
        dir.path(),
        &db,
        "poll_active = \"1h\"\npoll_waiting = \"5m\"",
        dns,
    )?;
    // The metrics endpoint: the daemon's own count of the queries it sent.
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?;
    let mut text = std::fs::read_to_string(&conf).map_err(|e| e.to_string())?;
    text.push_str(&format!("[metrics]\nlisten = \"{metrics}\"\n"));
    std::fs::write(&conf, text).map_err(|e| e.to_string())?;
    let sim = world.sim.handle();

    // 1. The first pass: the account listed, every zone added, observed and adopted.
    let since = now_ms();
    let mut daemon = start_daemon(&conf, &dir.path().join("first.log"))?;
    let pid = daemon.pid();
    let knotd_cpu = || -> f64 { world.knotd_pids().into_iter().map(cpu_secs).sum() };
    let (cpu_before, knotd_before) = (cpu_secs(pid), knotd_cpu());
    let first = wait_observed(&db, zones, since, Duration::from_secs(1800)).await?;
    let first_cpu = cpu_secs(pid) - cpu_before;
    let first_rss = peak_rss_mib(pid);
    println!(
        "first engine pass (list the account, add, observe, adopt, until nothing is due): {zones} zones in {:.1}s ({:.0} zone steps/s), {first_cpu:.1}s daemon CPU ({:.2} ms a zone; the TLD's knotd {:.1}s), peak RSS {first_rss:.1} MiB",
        first.as_secs_f64(),
        zones as f64 / first.as_secs_f64().max(1e-6),
        first_cpu * 1000.0 / zones as f64,
        knotd_cpu() - knotd_before
    );

    let mut limited_before = bench_world::LimiterStats::default();
    limiter_line(&world, &mut limited_before);
    println!("states after the first pass: {}", states(&db).await?);

    // 3a. Between passes: the zones' hourly looks arrive spread over the hour.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let window = Duration::from_secs(15);
    let before = cpu_secs(pid);
    tokio::time::sleep(window).await;
    let idle = cpu_secs(pid) - before;
    let idle_pct = 100.0 * idle / window.as_secs_f64();
    println!(
        "CPU between passes (the hourly looks spread over the hour): {idle:.2}s over {}s ({idle_pct:.2}%)",
        window.as_secs()
    );
    println!("states after the idle window: {}", states(&db).await?);
    // The metrics endpoint at this size: how many series a scrape carries, and its time.
    let (series, scrape_took) = series_count(metrics);
    println!(
        "metrics: {series} series in one scrape of {zones} zones ({:.2}s)",
        scrape_took.as_secs_f64()
    );
    // `BENCH_FLEET_PERF_IDLE=<file>`: a profile of the idle daemon, taken after the window
    // above so that perf's own cost is not in its figure.
    if let Some(out) = std::env::var_os("BENCH_FLEET_PERF_IDLE") {
        let mut perf = knot::Proc::spawn(
            "perf record",
            Command::new("perf")
                .args(["record", "-F", "999", "--call-graph", "dwarf,16384", "-p"])
                .arg(pid.to_string())
                .arg("-o")
                .arg(out)
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        )?;
        tokio::time::sleep(window).await;
        perf.terminate(Duration::from_secs(60));
    }

    // 2a. Two steady passes of the running daemon (what it does at every poll): every
    // zone made due at once; its caches (the delegations, the parents' keys, the
    // signatures verified) are as the pass before left them. The first is a full look at
    // every address (each zone's standard for samples, `settled_view`, taken away first:
    // what every look was before samples); the second from a sample (one parent and one
    // child address), as a settled zone's looks are.
    let mut warm = Duration::ZERO;
    let (mut parent_q, mut child_q) = (0.0, 0.0);

    for kind in ["full looks", "sampled looks"] {
        let since = now_ms();
        let perf = if kind == "sampled looks" {
            perf_record(pid)?
        } else {
            None
        };
        if kind == "full looks" {
            without_samples(&db).await?;
        }
        make_all_due(&db).await?;
        let (cpu_before, switches_before) = (cpu_secs(pid), context_switches(pid));
        let (knotd_before, world_before, asked_before, counted_before) = (
            knotd_cpu(),
            cpu_secs(std::process::id()),
            world.child_queries(),
            scrape(metrics),
        );
        wait_observed(&db, zones, since, Duration::from_secs(1800)).await?;
        if let Some(mut perf) = perf {
            perf.terminate(Duration::from_secs(60));
        }
        let warm_cpu = cpu_secs(pid) - cpu_before;
        let warm_switches = context_switches(pid) - switches_before;
        let (knotd_warm, world_warm, asked) = (
            knotd_cpu() - knotd_before,
            cpu_secs(std::process::id()) - world_before,
            world.child_queries() - asked_before,
        );
        let counted = scrape(metrics);
        let delta = |name: &str| {
            counted.get(name).copied().unwrap_or(0.0)
                - counted_before.get(name).copied().unwrap_or(0.0)
        };
        let sent = delta("dnssec_warden_dns_queries_total");
        child_q = asked as f64 / zones as f64;
        parent_q = (sent - asked as f64).max(0.0) / zones as f64;
        // From the first zone's look to the last one's (the daemon notices the zones due
        // within its intent poll, a second; this bench looks every quarter of a second).
        warm = observed_span(&db, since).await?;
        println!(
            "steady pass of the running daemon, {kind} (every zone settled, all due at once): {zones} zones in {:.1}s from the first look to the last ({:.0} zone steps/s; goal at least 5,000 at 10,000 zones), {warm_cpu:.1}s daemon CPU ({:.2} ms a zone), {:.1} context switches a zone",
            warm.as_secs_f64(),
            zones as f64 / warm.as_secs_f64().max(1e-6),
            warm_cpu * 1000.0 / zones as f64,
            warm_switches as f64 / zones as f64
        );
        println!(
            "  its footprint, per zone: {parent_q:.2} queries to the parent's servers and validation (goal at most 2 when sampled), {child_q:.2} to the child's (goal at most 2 when sampled); looks full {:.0}, sampled {:.0}, samples that disagreed {:.0}; queries that waited for a server's pace {:.0}, servers slowed for dropping or slipping {:.0}",
            delta("dnssec_warden_looks_total{kind=\"full\"}"),
            delta("dnssec_warden_looks_total{kind=\"sampled\"}"),
            delta("dnssec_warden_samples_disagreed_total"),
            delta("dnssec_warden_dns_queries_paced_total"),
            delta("dnssec_warden_dns_server_backoffs_total"),
        );
        println!(
            "  the other side of that pass: the TLD's knotd {knotd_warm:.1}s CPU; the child zones' servers and the simulator (this process) {world_warm:.1}s CPU"
        );
        limiter_line(&world, &mut limited_before);
    }
    daemon.terminate(Duration::from_secs(30));

    // 2b. A steady pass after a restart: every zone due at once, the daemon started again
    // (its first listing included, as at every start; every cache empty), until each was
    // looked at and is settled.
    make_all_due(&db).await?;
    sim.reset_requests();
    let since = now_ms();
    let mut daemon = start_daemon(&conf, &dir.path().join("steady.log"))?;
    let pid = daemon.pid();
    let switches_before = context_switches(pid);
    let steady = wait_observed(&db, zones, since, Duration::from_secs(1800)).await?;
    let switches = context_switches(pid) - switches_before;
    let steady_cpu = cpu_secs(pid);
    let steady_rss = peak_rss_mib(pid);
    let steady_ms = steady_cpu * 1000.0 / zones as f64;
    let requests = sim.requests();
    let total_requests: u64 = requests.values().sum();
    let per_zone = total_requests as f64 / zones as f64;
    println!(
        "steady pass after a restart (every zone settled, all due at once, every cache empty): {zones} zones in {:.1}s ({:.0} zone steps/s), {steady_cpu:.1}s daemon CPU ({steady_ms:.2} ms a zone), peak RSS {steady_rss:.1} MiB",
        steady.as_secs_f64(),
        zones as f64 / steady.as_secs_f64().max(1e-6)
    );
    println!(
        "context switches in the steady pass: {:.1} a zone",
        switches as f64 / zones as f64
    );
    println!(
        "provider requests in the steady pass: {total_requests} ({per_zone:.4} per zone; goal at most 0.05): {requests:?}"
    );

    // 3b. The SQLite file.
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let wal = db.with_extension("db-wal");
    let db_mib = (size(&db) + size(&wal)) as f64 / 1024.0 / 1024.0;
    println!(
        "SQLite file: {:.1} MiB ({:.1} MiB + WAL {:.1} MiB), {:.0} bytes a zone",
        db_mib,
        size(&db) as f64 / 1048576.0,
        size(&wal) as f64 / 1048576.0,
        (size(&db) + size(&wal)) as f64 / zones as f64
    );

    // 4. `status` and `status --json` over every zone, while the daemon runs.
    let (status_min, status_median, status_bytes) = time_command(&conf, &["status"], 3)?;
    let (json_min, json_median, json_bytes) = time_command(&conf, &["status", "--json"], 3)?;
    println!(
        "status over {zones} zones: {status_median:.2}s median of 3 ({status_min:.2}s fastest, {:.1} MiB out; goal under 1 s)",
        status_bytes as f64 / 1048576.0
    );
    println!(
        "status --json over {zones} zones: {json_median:.2}s median of 3 ({json_min:.2}s fastest, {:.1} MiB out; goal under 1 s)",
        json_bytes as f64 / 1048576.0
    );
    let status_rss = status_peak_rss_mib(&conf, &["status", "--json"])?;
    println!(
        "status --json over {zones} zones: peak RSS {status_rss:.1} MiB (the status process, from /usr/bin/time)"
    );
    let peak = first_rss.max(steady_rss);
    println!("daemon peak RSS {peak:.1} MiB (goal at most 128 MiB)");
    daemon.terminate(Duration::from_secs(30));

    // 5. A decision-heavy pass: `decide` active zones disabled at once, their DS removed
    // at every TLD server by the registrar, waiting polls every minute; every one must reach
    // `disabled` (none stuck on unknown answers) at the pace, slipped or not.
    if decide > 0 {
        let chosen: Vec<String> = (0..zones)
            .step_by(2)
            .take(decide)
            .map(|i| bench_world::zone(i, zones))
            .collect();
        let list = chosen
            .iter()
            .map(|z| format!("'{z}'"))
            .collect::<Vec<_>>()
            .join(",");
        write_every_zone(
            &db,
            &format!(
                "UPDATE zones SET intent = 'disabled', next_check_at = 0 WHERE name IN ({list})"
            ),
        )
        .await?;
        let text = std::fs::read_to_string(&conf).map_err(|e| e.to_string())?;
        std::fs::write(
            &conf,
            // Waiting zones polled every minute, and a margin of 10 s on the TTL waits (an
            // hour by default): the pass measures the looks, not the wait. A poll shorter
            // than a round of these zones' full looks takes at the pace (1,000 zones of 26
            // parent queries at 13 addresses of 50 a second: 40 s) never ends a TTL wait:
            // every look comes after a longer gap than rule 2 lets `T_gone` stand.
            text.replace(
                "poll_waiting = \"5m\"",
                "poll_waiting = \"1m\"\npropagation_margin = \"10s\"",
            ),
        )
        .map_err(|e| e.to_string())?;
        let removed = Instant::now();
        world.remove_ds(&chosen)?;
        println!(
            "decision-heavy pass: {decide} active zones disabled at once, their DS removed at every TLD server in {:.1}s",
            removed.elapsed().as_secs_f64()
        );
        sim.reset_requests();
        let mut limited_before = world.limiter.as_ref().map(|l| l.take()).unwrap_or_default();
        let started = Instant::now();
        let mut daemon = start_daemon(&conf, &dir.path().join("decide.log"))?;
        let mut left = decide;
        while left > 0 && started.elapsed() < Duration::from_secs(1800) {
            tokio::time::sleep(Duration::from_secs(2)).await;
            left = not_disabled(&db, &list).await?;
        }
        let took = started.elapsed();
        let counted = scrape(metrics);
        let got = |name: &str| counted.get(name).copied().unwrap_or(0.0);
        let requests: u64 = sim.requests().values().sum();
        println!(
            "  {} of {decide} zones disabled in {:.1}s ({left} not; states: {}); {:.1} queries a zone ({:.0} in all, {:.0} waited for a server's pace, {:.0} servers slowed); {:.2} provider requests a zone",
            decide - left,
            took.as_secs_f64(),
            states(&db).await?,
            got("dnssec_warden_dns_queries_total") / decide as f64,
            got("dnssec_warden_dns_queries_total"),
            got("dnssec_warden_dns_queries_paced_total"),
            got("dnssec_warden_dns_server_backoffs_total"),
            requests as f64 / decide as f64,
        );
        limiter_line(&world, &mut limited_before);
        daemon.terminate(Duration::from_secs(30));
        if left > 0 {
            return Err(format!(
                "{left} of {decide} zones were not disabled within 30 minutes"
            ));
        }
    }
    // `BENCH_FLEET_KEEP=<file>`: the database kept, to profile `status` on it.
    if let Some(keep) = std::env::var_os("BENCH_FLEET_KEEP") {
        std::fs::copy(&db, &keep).map_err(|e| e.to_string())?;
        println!("database kept at {}", Path::new(&keep).display());
    }
    println!("total bench time {:.1}s", total.elapsed().as_secs_f64());
    println!(
        "fleet zones={zones} first_pass_steps_per_sec={:.0} warm_pass_steps_per_sec={:.0} steady_pass_steps_per_sec={:.0} steady_provider_requests_per_zone={per_zone:.4} sampled_parent_queries_per_zone={parent_q:.2} sampled_child_queries_per_zone={child_q:.2} peak_rss_mib={peak:.1} idle_cpu_pct={idle_pct:.2} sqlite_mib={db_mib:.1} status_secs={status_median:.2} status_json_secs={json_median:.2}",
        zones as f64 / first.as_secs_f64().max(1e-6),
        zones as f64 / warm.as_secs_f64().max(1e-6),
        zones as f64 / steady.as_secs_f64().max(1e-6),
    );
    drop(world);
    Ok(())
}
