//! `cargo bench --bench parent_loop`: how long the parent loop takes in the lab, with
//! NOTIFY(CDS) and with the registry's periodic scan only. The real daemon, a zone at the
//! real PowerDNS under the lab's Knot TLD, and the lab registry of `test.` (a first DS at
//! its first scan; a scan every `BENCH_LOOP_SCAN_SECS`, 20 by default). Measured from the
//! moment every child name server serves the key's CDS to the moment both TLD servers
//! serve the DS, `BENCH_LOOP_RUNS` times (3 by default) each way, alternating. Prints:
//!
//! ```text
//! parent_loop way=<notify|scan> run=<n> cds_to_ds_secs=<s> notifies=<n> scans=<n>
//! ```

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use dnssec_warden_lab::dnssec::name_to_wire;
use dnssec_warden_lab::registry::msg;
use dnssec_warden_test_support::world::{
    Daemon, RealWorld, RegistryOptions, WorldOptions, cli, ip, wait_state,
};

const ZONE: &str = "loop.test.";
const LIMIT: Duration = Duration::from_secs(180);

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether the server at `to` answers `rrtype` for the zone with at least one record.
async fn serves(to: SocketAddr, rrtype: u16) -> bool {
    let Ok(name) = name_to_wire(ZONE) else {
        return false;
    };
    let asker = IpAddr::from([127, 0, 0, 1]);
    match msg::ask(asker, to, &name, rrtype, Duration::from_millis(500)).await {
        Ok(m) => !m.rrset(&name, rrtype).is_empty(),
        Err(_) => false,
    }
}

async fn all_serve(addrs: &[SocketAddr], rrtype: u16) -> bool {
    for a in addrs {
        if !serves(*a, rrtype).await {
            return false;
        }
    }
    true
}

/// One run: seconds from the CDS served everywhere to the DS at both TLD servers.
async fn run(block: u8, notify: bool, scan: Duration) -> Result<(f64, u64, u64), String> {
    let w = RealWorld::start_with(
        block,
        &[ZONE],
        WorldOptions {
            at_powerdns: vec![ZONE.to_string()],
            registry: Some(RegistryOptions {
                bootstrap_period: Duration::ZERO,
                scan_interval: scan,
                notify,
                children: Vec::new(),
            }),
            ..WorldOptions::default()
        },
    )
    .await?;
    // Without a DSYNC record the daemon is told the registry scans.
    let mut config = std::fs::read_to_string(&w.config).map_err(|e| e.to_string())?;
    config.push_str(&format!(
        "\n[parents.\"test.\"]\nscan_period = \"{}s\"\n{}",
        scan.as_secs().max(1),
        if notify {
            ""
        } else {
            "ds_path = \"cds-scan\"\n"
        }
    ));
    std::fs::write(&w.config, config).map_err(|e| e.to_string())?;
    let daemon = Daemon::start(&w.config, &w.dir.path().join("daemon.log"))?;
    wait_state(&w.config, ZONE, "disabled", LIMIT).await?;
    let (ok, _, err) = cli(&w.config, &["enable", ZONE]);
    if !ok {
        return Err(err);
    }
    let children = [
        SocketAddr::new(ip(block, 8).into(), w.port),
        SocketAddr::new(ip(block, 9).into(), w.port),
    ];
    let tlds = [w.tld_a.socket(), w.tld_b.socket()];
    let start = Instant::now();
    let served = loop {
        if all_serve(&children, msg::TYPE_CDS).await {
            break Instant::now();
        }
        if start.elapsed() > LIMIT {
            return Err(format!("no CDS served\n{}", daemon.log()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let published = loop {
        if all_serve(&tlds, msg::TYPE_DS).await {
            break Instant::now();
        }
        if start.elapsed() > LIMIT {
            return Err(format!("no DS published\n{}", daemon.log()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let registry = w.registry.as_ref().ok_or("no registry")?;
    Ok((
        published.duration_since(served).as_secs_f64(),
        registry.notifies(),
        registry.scans(),
    ))
}

fn main() {
    let runs = env_u64("BENCH_LOOP_RUNS", 3);
    let scan = Duration::from_secs(env_u64("BENCH_LOOP_SCAN_SECS", 20));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    for i in 1..=runs {
        for (way, notify, block) in [("notify", true, 79u8), ("scan", false, 80u8)] {
            match rt.block_on(run(block, notify, scan)) {
                Ok((secs, notifies, scans)) => println!(
                    "parent_loop way={way} run={i} cds_to_ds_secs={secs:.2} notifies={notifies} scans={scans}"
                ),
                Err(e) => {
                    eprintln!("parent_loop way={way} run={i} failed: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
}
