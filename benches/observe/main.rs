//! `cargo bench --bench observe`: one observation pass over 10,000 zones under a real
//! two-server Knot DNS TLD on loopback, against the machine's floor (`dnsperf` sending the
//! same DS and NS queries to the same servers), then a full engine pass with the provider
//! simulator in the loop, then the idle CPU of `dnssec-warden run` between polls.
//! It prints figures; it asserts nothing about time. The last line is, for scripts:
//! `observe_ratio_to_floor=<ratio> observe_cold_ratio_to_floor=<ratio> peak_rss_mib=<n> zones=<n>`.
//! `observe_ratio_to_floor` is the warm pass over the floor: like for like, the same
//! 40,000 DS and NS queries (each parent address is asked both, safety rule 9) to the
//! same two servers (the floor sends no discovery queries).
//! `observe_cold_ratio_to_floor` is the cold pass over the same floor: 10,002 discovery
//! queries more, less the 10,000 NS questions whose answers the discovery already heard
//! (the address that showed a cut is not asked its NS again in the same observation).
//! Before this split, `observe_ratio_to_floor` was that cold ratio.
//! Each routine pass runs three rounds (`cold`, `warm`, `cold2`, `warm2`, …) and dnsperf
//! runs three times; both ratios are the best round over the best floor run, since the
//! machine's speed drifts between minutes (docs/benchmarks.md) and one run of each side is
//! no stable ratio. The first round over the first floor run (the figure before 2026-11-26) is
//! printed beside them.
//!
//! Profiling: `BENCH_CHILD_PERF=<file>` records the observation child with `perf record
//! -g` (`BENCH_CHILD_PERF_DWARF=1`: DWARF call graphs, for a build with
//! `CARGO_PROFILE_BENCH_DEBUG=line-tables-only`); `BENCH_PASSES=cold,warm,warm` runs only
//! those passes in the child (each cold pass forgets the delegations first).
//!
//! ```text
//!  .      127.0.61.1  knotd   signed (manual CSK)
//!  test.  127.0.61.1  knotd   signed, 10,000 delegations, half with a DS
//!         127.0.61.2  knotd   the same zone, its own key (an independent server)
//!  z*.test. 127.0.61.3/.4     the lab's in-process servers, signing with the simulator's keys
//! ```
//! The observation pass runs in a child process (this binary again) so that its peak RSS
//! is the observer's own, not the simulator's or the set-up's.

mod engine_pg;

use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dnssec_warden::dns::DnsSettings;
use dnssec_warden::dns::{DnsObserver, DsAnswer, Observer};
use dnssec_warden_lab::ProviderSim;
use dnssec_warden_test_support::bench_world::{self, BenchWorld};
use dnssec_warden_test_support::knot;

/// The daemon's allocator (src/main.rs), so that the observation pass is measured as the
/// daemon runs it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ZONES: usize = 10_000;
const TLD_A: Ipv4Addr = Ipv4Addr::new(127, 0, 61, 1);
const TLD_B: Ipv4Addr = Ipv4Addr::new(127, 0, 61, 2);
const CHILD_ENV: &str = "DNSSEC_WARDEN_BENCH_OBSERVE";
/// The main run's passes: three rounds of the routine ones (this machine's speed drifts
/// between seconds, so the figures are the best of three on each side, the floor's too),
/// then the fully validated one.
const MAIN_PASSES: &[&str] = &[
    "cold",
    "warm",
    "cold2",
    "warm2",
    "cold3",
    "warm3",
    "validated",
];

/// The suffixes of a routine pass's rounds in `MAIN_PASSES` (`warm`, `warm2`, `warm3`).
const ROUNDS: [&str; 3] = ["", "2", "3"];

type Res<T> = Result<T, String>;

fn zone(i: usize) -> String {
    format!("z{i:05}.test.")
}

/// The trust anchor file (the bench root's DS), passed to the observation child.
const ANCHOR_ENV: &str = "DNSSEC_WARDEN_BENCH_ANCHOR";

fn settings(port: u16) -> DnsSettings {
    DnsSettings {
        root_hints: vec![IpAddr::V4(TLD_A)],
        port,
        trust_anchor_file: std::env::var_os(ANCHOR_ENV).map(std::path::PathBuf::from),
        validating_resolvers: Vec::new(),
        query_timeout: Duration::from_secs(2),
        query_attempts: 3,
        // The pass against dnsperf's floor measures the observer's own cost, unpaced: at
        // the default pace, 10,000 zones at one TLD address take minutes by design.
        max_qps_per_server: dnssec_warden::dns::net::query::MAX_QPS_PER_SERVER,
        ..DnsSettings::default()
    }
}

/// CPU time (user + system) this process has used, from /proc/self/stat (clock ticks of
/// 10 ms, the Linux default).
fn cpu_secs() -> f64 {
    process_cpu_secs("self")
}

/// CPU time (user + system) of process `pid` ("self", or a number) so far.
fn process_cpu_secs(pid: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The fields after the command name (which may hold spaces): utime is field
            // 14, stime 15.
            let rest = s.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let utime: f64 = fields.get(11)?.parse().ok()?;
            let stime: f64 = fields.get(12)?.parse().ok()?;
            Some((utime + stime) / 100.0)
        })
        .unwrap_or(0.0)
}

/// Peak resident set of this process, from /proc/self/status.
fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    if let Ok(port) = std::env::var(CHILD_ENV) {
        observe_child(&port);
        return;
    }
    bench_world::run_bench("observe", &["knot", "knot-dnsutils", "dnsperf"], bench);
}

/// The child: cold pass (discovery included) then warm pass (delegations cached, as the
/// daemon's polls mostly are), over the code the daemon uses; prints one line of figures.
fn observe_child(port: &str) {
    let port: u16 = port.parse().unwrap_or(53);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        // The daemon's observer (`DnsObserver::new`), with `dns.queries_per_server` set
        // when the parent asks, to show what the per-server cap costs.
        let mut settings = settings(port);
        if let Some(cap) = std::env::var("BENCH_PER_SERVER")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            settings.queries_per_server = cap;
        }
        let observer = DnsObserver::new(&settings).expect("observer");
        let names: Arc<[String]> = (0..ZONES).map(zone).collect();
        let mut line = String::new();
        // The routine passes, then (the main run only) a fully validated pass over the
        // same zones: every DS answer's RRSIG or NSEC denial checked with the TLD keys.
        let custom = std::env::var("BENCH_PASSES").ok();
        let custom: Option<Vec<&str>> = custom.as_deref().map(|v| v.split(',').collect());
        let extras = std::env::var_os("BENCH_PER_SERVER").is_none() && custom.is_none();
        let passes: &[&str] = if let Some(c) = &custom {
            c
        } else if extras {
            MAIN_PASSES
        } else {
            &["cold", "warm"]
        };
        for pass in passes {
            line.push_str(&timed_pass(&observer, &names, pass).await);
        }
        let keys = observer.key_cache_stats();
        line.push_str(&format!(
            "peak_in_flight={} vm_hwm_kib={} key_fetches={} ",
            observer.stats().peak_in_flight,
            vm_hwm_kib(),
            keys.fetches
        ));
        if extras {
            // The cost of 0x20: the same routine passes on an observer without it.
            let transport = Arc::new(
                dnssec_warden::dns::NetTransport::new(settings.query_timeout)
                    .with_case_randomization(false),
            );
            let options = dnssec_warden::dns::ObserverOptions {
                per_server: settings.queries_per_server,
                ..Default::default()
            };
            let plain =
                DnsObserver::with_transport(&settings, options, transport).expect("observer");
            for pass in ["cold_no0x20", "warm_no0x20"] {
                line.push_str(&timed_pass(&plain, &names, pass).await);
            }
        }
        println!("{line}");
    });
}

/// One pass over `names` (`parent`, or `parent_validated` for the pass "validated"):
/// its figures as `key=value` pairs. The pass runs as a task on the runtime's worker
/// threads, as the daemon's steps do, not on the thread that called `block_on` (outside
/// the pool: one thread more on the two cores, and every wake-up of the pass a wake-up
/// of that thread).
async fn timed_pass(observer: &DnsObserver, names: &Arc<[String]>, pass: &str) -> String {
    if pass.starts_with("cold") {
        // A no-op on a fresh observer; lets `BENCH_PASSES` repeat the cold pass.
        observer.forget_delegations();
    }
    let before = observer.stats().exchanges;
    let cpu_before = cpu_secs();
    let started = Instant::now();
    let (pool, zones, validated) = (observer.clone(), names.clone(), pass == "validated");
    let views = tokio::spawn(async move {
        if validated {
            futures::future::join_all(zones.iter().map(|z| pool.parent_validated(z))).await
        } else {
            futures::future::join_all(zones.iter().map(|z| pool.parent(z))).await
        }
    })
    .await
    .expect("the pass ended abnormally");
    let took = started.elapsed();
    let cpu = cpu_secs() - cpu_before;
    let (mut present, mut absent, mut unknown, mut validated) = (0, 0, 0, 0);
    for view in &views {
        match view {
            Ok(v) => {
                validated += usize::from(v.evidence == dnssec_warden::dns::Evidence::Validated);
                for a in &v.answers {
                    match a.answer {
                        DsAnswer::Present { .. } => present += 1,
                        DsAnswer::Absent => absent += 1,
                        DsAnswer::Unknown(_) => unknown += 1,
                    }
                }
            }
            Err(_) => unknown += 2,
        }
    }
    let exchanges = observer.stats().exchanges - before;
    format!(
        "{pass}_secs={:.3} {pass}_cpu_secs={cpu:.2} {pass}_exchanges={exchanges} {pass}_present={present} {pass}_absent={absent} {pass}_unknown={unknown} {pass}_validated_views={validated} ",
        took.as_secs_f64()
    )
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

async fn bench() -> Res<()> {
    let total = Instant::now();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    // The world of `test-support/src/bench_world.rs` on 127.0.61.0/24: the TLD at TLD_A
    // and TLD_B.
    let world = BenchWorld::start(61, ZONES, dir.path()).await?;
    let (sim, port, anchor) = (&world.sim, world.port, world.anchor.clone());
    // 1. Our observation pass, in a child process.
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // `BENCH_CHILD_PERF=<file>` records the child with `perf record -g`.
    let mut child = match std::env::var_os("BENCH_CHILD_PERF") {
        Some(file) => {
            let mut c = Command::new("perf");
            match std::env::var("BENCH_CHILD_PERF_DWARF") {
                Ok(_) => c.args(["record", "-F", "1500", "--call-graph", "dwarf,8192", "-o"]),
                Err(_) => c.args(["record", "-g", "-o"]),
            };
            c.arg(file).arg("--").arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    let knotd_cpu = || -> f64 {
        world
            .knotd_pids()
            .into_iter()
            .map(|pid| process_cpu_secs(&pid.to_string()))
            .sum()
    };
    let knotd_before = knotd_cpu();
    let out = child
        .env(CHILD_ENV, port.to_string())
        .env(ANCHOR_ENV, &anchor)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    let ours = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        return Err(format!("observation child failed: {ours}"));
    }
    let num = |k: &str| -> f64 { field(&ours, k).and_then(|v| v.parse().ok()).unwrap_or(0.0) };
    // The best of the rounds the child ran (three in the main run).
    let best = |pass: &str| -> f64 {
        ROUNDS
            .iter()
            .map(|round| num(&format!("{pass}{round}_secs")))
            .filter(|secs| *secs > 0.0)
            .fold(f64::INFINITY, f64::min)
    };
    let (cold_first, warm_first) = (num("cold_secs"), num("warm_secs"));
    let (cold, warm) = (best("cold"), best("warm"));
    // Every round's time and what its answers were, for the lines below.
    let rounds = |pass: &str| -> String {
        let mut times = Vec::new();
        let (mut present, mut absent, mut unknown) = (0.0, 0.0, 0.0);
        for round in ROUNDS {
            let key = format!("{pass}{round}");
            if num(&format!("{key}_secs")) > 0.0 {
                times.push(format!(
                    "{:.3}s ({:.2}s CPU)",
                    num(&format!("{key}_secs")),
                    num(&format!("{key}_cpu_secs"))
                ));
                present += num(&format!("{key}_present"));
                absent += num(&format!("{key}_absent"));
                unknown += num(&format!("{key}_unknown"));
            }
        }
        format!(
            "rounds {}; {} exchanges a round; DS present {present} / absent {absent} / unknown {unknown} over the rounds",
            times.join(", "),
            num(&format!("{pass}_exchanges"))
        )
    };
    let knotd_ours = knotd_cpu() - knotd_before;
    // Every pass of the child (the validated and the 0x20-less ones too) loads knotd.
    let our_queries = MAIN_PASSES
        .iter()
        .chain(&["cold_no0x20", "warm_no0x20"])
        .map(|p| num(&format!("{p}_exchanges")))
        .sum::<f64>();
    let rss_mib = num("vm_hwm_kib") / 1024.0;
    println!(
        "observe pass, cold (discovery + DS and NS at both TLD servers): best {cold:.3}s; {}",
        rounds("cold")
    );
    println!(
        "observe pass, warm (delegations cached; DS and NS at both TLD servers): best {warm:.3}s; {}",
        rounds("warm")
    );
    println!(
        "observe pass, fully validated (parent_validated, delegations cached, the TLD keys established once from the anchor: {} chain walk(s)): {:.3}s ({:.2}s CPU), {} exchanges; DS present {} / absent {} / unknown {}; {} views validated; {:.2}x the warm routine pass",
        num("key_fetches"),
        num("validated_secs"),
        num("validated_cpu_secs"),
        num("validated_exchanges"),
        num("validated_present"),
        num("validated_absent"),
        num("validated_unknown"),
        num("validated_validated_views"),
        num("validated_secs") / warm.max(1e-6)
    );
    println!(
        "0x20 cost: the same passes without 0x20: cold {:.3}s ({:.2}s CPU), warm {:.3}s ({:.2}s CPU); with 0x20 (first rounds) cold {cold_first:.3}s ({:.2}s CPU), warm {warm_first:.3}s ({:.2}s CPU)",
        num("cold_no0x20_secs"),
        num("cold_no0x20_cpu_secs"),
        num("warm_no0x20_secs"),
        num("warm_no0x20_cpu_secs"),
        num("cold_cpu_secs"),
        num("warm_cpu_secs")
    );
    println!(
        "observer peak RSS {rss_mib:.1} MiB (routine and validated passes), peak queries in flight {}",
        num("peak_in_flight")
    );

    // 2. The floor: dnsperf, the same DS and NS queries (DO=1) to the same two servers at
    // once.
    let data = dir.path().join("ds-queries.txt");
    let queries: String = (0..ZONES)
        .map(|i| format!("{0} DS\n{0} NS\n", zone(i)))
        .collect();
    std::fs::write(&data, queries).map_err(|e| e.to_string())?;
    let knotd_before = knotd_cpu();
    // Three runs, as the passes have three rounds; the best is the floor.
    let mut floors = Vec::new();
    for _ in 0..3 {
        floors.push(dnsperf_floor(&data, port, None)?);
    }
    let knotd_floor = knotd_cpu() - knotd_before;
    let floor = floors.iter().map(|f| f.0).fold(f64::INFINITY, f64::min);
    let floor_first = floors.first().map_or(floor, |f| f.0);
    let floor_completed: f64 = floors.iter().map(|f| f.2).sum();
    let runs: Vec<String> = floors
        .iter()
        .map(|(secs, wall, _)| format!("{secs:.3}s ({wall:.3}s wall with process start)"))
        .collect();
    println!(
        "floor: dnsperf -D (DO=1; dnsperf always sets RD=1), {} DS and NS queries completed a run, best {floor:.3}s; runs {} (each the slower of two concurrent runs)",
        floors.first().map_or(0.0, |f| f.2),
        runs.join(", ")
    );
    // Both passes share two cores with knotd, so its CPU per query is part of the race.
    println!(
        "knotd CPU per query (10 ms ticks, both servers): {:.1} us under the observer (all its passes), {:.1} us under dnsperf",
        knotd_ours / our_queries.max(1.0) * 1e6,
        knotd_floor / floor_completed.max(1.0) * 1e6
    );
    // Context, not the headline: dnsperf held to the observer's per-server cap.
    let per_server = dnssec_warden::dns::ObserverOptions::default().per_server;
    let (capped, _, _) = dnsperf_floor(&data, port, Some(per_server))?;
    println!(
        "floor at the observer's per-server cap (dnsperf -q {per_server} per server): {capped:.3}s; warm pass {:.2}x that",
        warm / capped.max(1e-6)
    );
    let cold_ratio = cold / floor.max(1e-6);
    let ratio = warm / floor.max(1e-6);
    // The same pass with half the per-server cap, as an operator may configure it (16
    // was the default before 32, 8 before 16).
    let strict_cap = (per_server / 2).max(1).to_string();
    let knotd_before = knotd_cpu();
    let strict = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .env(CHILD_ENV, port.to_string())
        .env(ANCHOR_ENV, &anchor)
        .env("BENCH_PER_SERVER", &strict_cap)
        .output()
        .map_err(|e| e.to_string())?;
    let strict = String::from_utf8_lossy(&strict.stdout).to_string();
    let snum = |k: &str| -> f64 {
        field(&strict, k)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let knotd_strict = knotd_cpu() - knotd_before;
    println!(
        "same code, dns.queries_per_server = {strict_cap} instead of {per_server}: cold {:.3}s ({:.2}x floor), warm {:.3}s ({:.2}x), peak RSS {:.1} MiB, knotd CPU {:.1} us per query",
        snum("cold_secs"),
        snum("cold_secs") / floor.max(1e-6),
        snum("warm_secs"),
        snum("warm_secs") / floor.max(1e-6),
        snum("vm_hwm_kib") / 1024.0,
        knotd_strict / (snum("cold_exchanges") + snum("warm_exchanges")).max(1.0) * 1e6
    );
    println!(
        "ratio to floor: cold pass {cold_ratio:.2}x, warm pass {ratio:.2}x (like for like; the best of three rounds over the best of three floor runs); first round over first floor run: cold {:.2}x, warm {:.2}x",
        cold_first / floor_first.max(1e-6),
        warm_first / floor_first.max(1e-6)
    );

    // `BENCH_OBSERVE_ONLY=1` stops here (for profiling the observation pass).
    if std::env::var_os("BENCH_OBSERVE_ONLY").is_none() {
        // 3. A full engine pass: every zone observed (provider, parent, child), stepped
        // and committed, over a SQLite store, the real provider client and the simulator.
        engine_pass(sim, port, dir.path()).await?;
        // 3b. The same pass on PostgreSQL: one daemon, then two sharing the zones.
        engine_pass_postgres(dir.path()).await;

        // 4. The idle CPU of `dnssec-warden run` between polls.
        idle_cpu(sim, port, dir.path()).await;
    }

    println!("total bench time {:.1}s", total.elapsed().as_secs_f64());
    println!(
        "observe_ratio_to_floor={ratio:.2} observe_cold_ratio_to_floor={cold_ratio:.2} peak_rss_mib={} zones={ZONES}",
        rss_mib.ceil() as u64
    );
    drop(world);
    Ok(())
}

/// dnsperf sending the DS queries in `data` to both TLD servers at once (`-q`: its
/// queries outstanding, 100 by default). Returns the slower run's time, the wall time with
/// process start, and the queries completed.
fn dnsperf_floor(
    data: &std::path::Path,
    port: u16,
    outstanding: Option<usize>,
) -> Res<(f64, f64, f64)> {
    let started = Instant::now();
    let perfs: Vec<_> = [TLD_A, TLD_B]
        .iter()
        .map(|server| {
            let mut c = Command::new("dnsperf");
            c.args(["-s", &server.to_string(), "-p", &port.to_string(), "-D"])
                .arg("-d")
                .arg(data)
                .args(["-n", "1", "-c", "1", "-t", "5"]);
            if let Some(q) = outstanding {
                c.args(["-q", &q.to_string()]);
            }
            c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("dnsperf: {e}"))?;
    let mut runs = Vec::new();
    let mut completed = 0.0;
    for perf in perfs {
        let out = perf.wait_with_output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        let run_time = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Run time (s):"))
            .and_then(|v| v.trim().parse::<f64>().ok());
        completed += text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Queries completed:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        runs.push(run_time.ok_or_else(|| format!("dnsperf gave no run time: {text}"))?);
    }
    let wall = started.elapsed().as_secs_f64();
    Ok((runs.iter().copied().fold(0.0, f64::max), wall, completed))
}

fn config_text(sim: &ProviderSim, port: u16, dir: &std::path::Path) -> String {
    format!(
        "[provider]\nbase_url = \"{}\"\napi_key_file = \"{}\"\nrequest_timeout = \"10s\"\n\
         [database]\npath = \"{}\"\n\
         [dns]\nroot_hints = [\"{TLD_A}\"]\nport = {port}\nvalidating_resolvers = []\n\
         query_timeout = \"2s\"\nquery_attempts = 3\n\
         [zones]\nall = true\n",
        sim.base_url(),
        dir.join("api-key").display(),
        dir.join("state.db").display()
    )
}

async fn engine_pass(sim: &ProviderSim, port: u16, dir: &std::path::Path) -> Res<()> {
    use dnssec_warden::config::Settings;
    use dnssec_warden::engine::{Engine, Notifier};
    use dnssec_warden::lifecycle::{Clock, Policy, SystemClock};
    use dnssec_warden::provider::gcore::GcoreClient;
    use dnssec_warden::store::Store;

    std::fs::write(dir.join("api-key"), "bench-key\n").map_err(|e| e.to_string())?;
    let conf = dir.join("config.toml");
    std::fs::write(&conf, config_text(sim, port, dir)).map_err(|e| e.to_string())?;
    let settings = Settings::load(&conf).map_err(|e| e.to_string())?;
    let provider = settings
        .providers
        .first()
        .and_then(|p| p.gcore().cloned())
        .ok_or("no Gcore provider")?;
    let credentials = provider.credentials.load().map_err(|e| e.to_string())?;
    let client = GcoreClient::new(&provider, credentials).map_err(|e| e.to_string())?;
    let observer = DnsObserver::new(&settings.dns).map_err(|e| e.to_string())?;
    let store = Store::connect(&settings.database)
        .await
        .map_err(|e| e.to_string())?;
    let clock = SystemClock;
    let now = clock.now();
    for i in 0..ZONES {
        store
            .ensure_zone(&zone(i), now)
            .await
            .map_err(|e| e.to_string())?;
    }
    let engine = Engine::new(
        store.clone(),
        Arc::new(client),
        Arc::new(observer),
        Arc::new(SystemClock),
        Policy::default(),
        Notifier::default(),
    );
    engine.start().await.map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut stepped = 0;
    // Bounded: each tick steps up to workers x 64 zones; 10,000 zones need ~10 ticks.
    for _ in 0..200 {
        let n = engine.tick().await.map_err(|e| e.to_string())?;
        stepped += n;
        if n == 0 || started.elapsed() > Duration::from_secs(120) {
            break;
        }
    }
    let took = started.elapsed().as_secs_f64();
    let counts = store.state_counts().await.map_err(|e| e.to_string())?;
    let counts: Vec<String> = counts
        .iter()
        .map(|(s, n)| format!("{}={n}", s.map(|s| s.as_str()).unwrap_or("unobserved")))
        .collect();
    println!(
        "engine pass (SQLite store, real provider client + simulator, real observer): {stepped} zone steps in {took:.2}s ({:.0} zones/s); states: {}",
        stepped as f64 / took.max(1e-6),
        counts.join(" ")
    );
    store.close().await;
    Ok(())
}

/// The engine pass on PostgreSQL (`benches/observe/engine_pg.rs`), with the settings the
/// SQLite pass wrote; said and skipped when PostgreSQL is not installed.
async fn engine_pass_postgres(dir: &std::path::Path) {
    if !std::path::Path::new("/usr/lib/postgresql").exists() {
        println!("engine pass on PostgreSQL: skipped (install Debian's postgresql package)");
        return;
    }
    let settings = match dnssec_warden::config::Settings::load(&dir.join("config.toml")) {
        Ok(s) => s,
        Err(e) => return println!("engine pass on PostgreSQL: skipped ({e})"),
    };
    let names: Vec<String> = (0..ZONES).map(zone).collect();
    if let Err(e) = engine_pg::engine_pass_postgres(&settings, &names).await {
        println!("engine pass on PostgreSQL: failed: {e}");
    }
}

/// utime + stime of `dnssec-warden run` over 10 s once it is idle, if this build has `run`.
async fn idle_cpu(sim: &ProviderSim, port: u16, dir: &std::path::Path) {
    let exe = env!("CARGO_BIN_EXE_dnssec-warden");
    let has_run = Command::new(exe)
        .args(["run", "--help"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_run {
        println!("idle CPU of `run`: skipped (this build has no `run` subcommand yet)");
        return;
    }
    let conf = dir.join("config.toml");
    let _ = std::fs::write(&conf, config_text(sim, port, dir));
    let Ok(mut proc) = knot::Proc::spawn(
        "dnssec-warden run",
        Command::new(exe)
            .arg("--config")
            .arg(&conf)
            .arg("run")
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    ) else {
        println!("idle CPU of `run`: could not start it");
        return;
    };
    let ticks = |pid: u32| -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name (which may hold spaces): utime is the 12th, stime
        // the 13th after the closing parenthesis.
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
    };
    // Its start-up (zone list, first look at due zones) is not idle time.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pid = proc.pid();
    let (Some(before), true) = (ticks(pid), proc.alive()) else {
        println!("idle CPU of `run`: it exited at start");
        return;
    };
    let window = Duration::from_secs(10);
    tokio::time::sleep(window).await;
    let after = ticks(pid).unwrap_or(before);
    // USER_HZ is 100 on Linux.
    let cpu = (after - before) as f64 / 100.0;
    println!(
        "idle CPU of `run` with {ZONES} zones in steady state ({} active, {} disabled; polls hourly): {cpu:.2}s CPU over {}s ({:.2}%)",
        ZONES / 2,
        ZONES / 2,
        window.as_secs(),
        100.0 * cpu / window.as_secs_f64()
    );
    proc.terminate(Duration::from_secs(5));
}
