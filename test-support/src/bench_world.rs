//! A benchmark world of `zones` delegations on loopback, on the `127.0.B.0/24` block:
//!
//! ```text
//!  .        127.0.B.1  knotd   signed (manual CSK); its DS is the trust anchor
//!  test.    127.0.B.1  knotd   signed, every delegation, a DS for every other zone
//!           127.0.B.2  knotd   the same zone, its own key (an independent server)
//!  z*.test. 127.0.B.3/.4       the lab's in-process servers, signing with the simulator's keys
//! ```
//! The provider simulator holds every zone, DNSSEC on for the even ones (the ones with a
//! DS at the TLD).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dnssec_warden_lab::DigestType;
use dnssec_warden_lab::dns::{KeySource, World, ZoneData, server};
use dnssec_warden_lab::{ProviderSim, SimOptions};

pub use crate::dns_limiter::LimiterStats;
use crate::dns_limiter::SourceLimiter;
use crate::knot::{self, Knot, Signing, ZoneConf};

pub type Res<T> = Result<T, String>;

/// A benchmark's `main`: installs `packages` when missing, runs `bench` on a two-thread
/// runtime, and exits 1 with the failure said. (`cargo bench` passes `--bench`; there is
/// nothing to filter.)
pub fn run_bench<F: std::future::Future<Output = Res<()>>>(
    name: &str,
    packages: &[&str],
    bench: impl FnOnce() -> F,
) {
    let result = knot::ensure_packages(packages).and_then(|()| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("no runtime: {e}"))?
            .block_on(bench())
    });
    if let Err(e) = result {
        eprintln!("{name} bench failed: {e}");
        std::process::exit(1);
    }
}

pub const API_KEY: &str = "bench-key";

pub struct BenchWorld {
    pub sim: ProviderSim,
    pub tld: [Ipv4Addr; 2],
    pub port: u16,
    pub anchor: PathBuf,
    /// The per-source limiter in front of the TLD's last address, with `TldShape::limit`.
    pub limiter: Option<SourceLimiter>,
    /// The TLD servers and the child zones' servers, stopped when the world is dropped.
    servers: (Knot, Knot, Vec<server::Running>),
    /// What the child zones' servers serve (and how many queries they read).
    children: Arc<Mutex<World>>,
}

/// `z00000.test.` … (five digits up to 99,999; six beyond).
pub fn zone(i: usize, zones: usize) -> String {
    if zones > 100_000 {
        format!("z{i:06}.test.")
    } else {
        format!("z{i:05}.test.")
    }
}

fn soa(ns: &str) -> String {
    format!("@ 3600 SOA {ns} hostmaster.test. $SERIAL 3600 600 86400 60\n")
}

/// The TLD's shape: how many addresses its servers answer on (at least two; `.com` has
/// 13 servers), and Knot's response rate limiting on every one (rate, slip).
#[derive(Debug, Clone)]
pub struct TldShape {
    pub addresses: usize,
    pub rrl: Option<(u32, u32)>,
    /// A per-source query limit (a second) in front of the last address, as dnsdist in
    /// front of a TLD server: that address is a [`SourceLimiter`] forwarding to the
    /// first TLD server, which counts the highest rate one source reached.
    pub limit: Option<u64>,
    /// The DS TTL at the TLD and the child zones' DNSKEY TTL (3600 and 300 when `None`):
    /// short, a disable's wait (rule 2) fits in a benchmark.
    pub ttl: Option<u32>,
}

impl Default for TldShape {
    fn default() -> Self {
        Self {
            addresses: 2,
            rrl: None,
            limit: None,
            ttl: None,
        }
    }
}

impl BenchWorld {
    pub async fn start(block: u8, zones: usize, dir: &Path) -> Res<Self> {
        Self::start_shaped(block, zones, dir, &TldShape::default()).await
    }

    /// [`BenchWorld::start`] under a TLD of that shape: its first two addresses are two
    /// knotd, the others split between them (one knotd answers on several).
    pub async fn start_shaped(block: u8, zones: usize, dir: &Path, shape: &TldShape) -> Res<Self> {
        let at = |h| Ipv4Addr::new(127, 0, block, h);
        let (tld_a, tld_b, child_1, child_2) = (at(1), at(2), at(3), at(4));
        let extra: Vec<Ipv4Addr> = (0..shape.addresses.saturating_sub(2).min(40))
            .map(|i| at(10 + u8::try_from(i).unwrap_or(0)))
            .collect();
        let mut all = vec![tld_a, tld_b, child_1, child_2];
        all.extend(&extra);
        let port = knot::pick_port(&all)?;
        let started = Instant::now();
        let sim = ProviderSim::start(
            "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?,
            SimOptions {
                api_keys: vec![API_KEY.into()],
                max_page_limit: 1000,
                name_servers: vec!["ns1.dns.test".into(), "ns2.dns.test".into()],
                ..SimOptions::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
        let handle = sim.handle();
        let mut ds_lines = HashMap::new();
        for i in 0..zones {
            let name = zone(i, zones);
            handle.add_zone(&name);
            if i % 2 == 0 {
                handle.enable_dnssec(&name);
                let key = handle.dnskey(&name).ok_or("no key")?;
                let ds = key
                    .to_ds(&name, DigestType::Sha256)
                    .map_err(|e| e.to_string())?;
                ds_lines.insert(i, ds.to_string());
            }
        }

        let mut world = World::default();
        for i in 0..zones {
            let name = zone(i, zones);
            let mut data = ZoneData::new(
                &name,
                &["ns1.dns.test.", "ns2.dns.test."],
                KeySource::provider(handle.clone()),
            );
            data.add_a(&format!("www.{name}"), Ipv4Addr::new(192, 0, 2, 1));
            if let Some(ttl) = shape.ttl {
                data.dnskey_ttl = ttl;
            }
            world.zones.insert(name, data);
        }
        let hosted: std::collections::BTreeSet<String> =
            (0..zones).map(|i| zone(i, zones)).collect();
        world.hosting.insert(child_1.into(), hosted.clone());
        world.hosting.insert(child_2.into(), hosted);
        let world = Arc::new(Mutex::new(world));
        let mut child_servers = Vec::new();
        for ip in [child_1, child_2] {
            child_servers.push(
                server::start(SocketAddr::new(ip.into(), port), world.clone())
                    .await
                    .map_err(|e| e.to_string())?,
            );
        }

        // Every TLD address a server name of its own, as `.com`'s a to m.
        let servers: Vec<(String, Ipv4Addr)> = [tld_a, tld_b]
            .iter()
            .chain(&extra)
            .enumerate()
            .map(|(i, ip)| {
                let letter = char::from(b'a' + u8::try_from(i % 26).unwrap_or(0));
                (format!("{letter}.nic.test."), *ip)
            })
            .collect();
        let mut tld = format!("$ORIGIN test.\n{}", soa("a.nic.test."));
        let mut referral = String::new();
        for (host, ip) in &servers {
            tld.push_str(&format!("@ 3600 NS {host}\n{host} 3600 A {ip}\n"));
            referral.push_str(&format!("test. 3600 NS {host}\n{host} 3600 A {ip}\n"));
        }
        tld.push_str(&format!(
            "ns1.dns 3600 A {child_1}\nns2.dns 3600 A {child_2}\n"
        ));
        for i in 0..zones {
            let name = zone(i, zones);
            let label = name.trim_end_matches(".test.");
            tld.push_str(&format!(
                "{label} 3600 NS ns1.dns.test.\n{label} 3600 NS ns2.dns.test.\n"
            ));
            if let Some(ds) = ds_lines.get(&i) {
                tld.push_str(&format!("{label} {} DS {ds}\n", shape.ttl.unwrap_or(3600)));
            }
        }
        // The limited address is the limiter's, not a Knot's.
        let limited = shape.limit.and_then(|_| extra.last().copied());
        let options = |parity: usize| knot::KnotOptions {
            also_listen: extra
                .iter()
                .enumerate()
                .filter(|(i, ip)| i % 2 == parity && Some(**ip) != limited)
                .map(|(_, ip)| *ip)
                .collect(),
            rrl: shape.rrl,
            ..knot::KnotOptions::default()
        };
        let mut a = Knot::with_options(
            &dir.join("a"),
            tld_a,
            port,
            &[
                ZoneConf::new(".", String::new(), Signing::Manual),
                ZoneConf::new("test.", tld.clone(), Signing::Manual),
            ],
            &options(0),
        )?;
        let mut b = Knot::with_options(
            &dir.join("b"),
            tld_b,
            port,
            &[ZoneConf::new("test.", tld, Signing::Manual)],
            &options(1),
        )?;
        let root_ds = a.generate_csk(".")?;
        let anchor = dir.join("root.ds");
        std::fs::write(&anchor, format!(". 3600 IN DS {root_ds}\n")).map_err(|e| e.to_string())?;
        let ds_a = a.generate_csk("test.")?;
        let ds_b = b.generate_csk("test.")?;
        a.write_zone(
            ".",
            &format!(
                "$ORIGIN .\n{}@ 3600 NS a.nic.test.\n{referral}\
                 test. 3600 DS {ds_a}\ntest. 3600 DS {ds_b}\n",
                soa("a.nic.test.")
            ),
        )?;
        a.start()?;
        b.start()?;
        for (server, z) in [
            (a.socket(), "."),
            (a.socket(), "test."),
            (b.socket(), "test."),
        ] {
            knot::wait_for_zone(server, z, Duration::from_secs(300))
                .await
                .map_err(|e| format!("{e}\n{}{}", a.log(), b.log()))?;
        }
        let limiter = match (limited, shape.limit) {
            (Some(ip), Some(cap)) => Some(
                SourceLimiter::start(
                    SocketAddr::new(ip.into(), port),
                    SocketAddr::new(tld_a.into(), port),
                    cap,
                )
                .await
                .map_err(|e| format!("the limiter on {ip}: {e}"))?,
            ),
            _ => None,
        };
        println!(
            "set-up: {zones} zones at the simulator and under a Knot DNS TLD signed and serving on {} addresses from {tld_a} (response rate limiting: {}; a per-source limit: {}) port {port} after {:.1}s",
            servers.len(),
            shape.rrl.map_or("off".to_string(), |(rate, slip)| format!(
                "{rate} a second, slip {slip}"
            )),
            match (limited, shape.limit) {
                (Some(ip), Some(cap)) => format!("{cap} queries a second at {ip}"),
                _ => "none".to_string(),
            },
            started.elapsed().as_secs_f64()
        );
        Ok(Self {
            sim,
            tld: [tld_a, tld_b],
            port,
            anchor,
            limiter,
            servers: (a, b, child_servers),
            children: world,
        })
    }

    /// The registrar removes these zones' DS at every TLD server (one transaction each).
    pub fn remove_ds(&self, zones: &[String]) -> Res<()> {
        let owners: Vec<String> = zones
            .iter()
            .map(|z| z.trim_end_matches(".test.").to_string())
            .collect();
        let unset: Vec<(&str, &str)> = owners.iter().map(|o| (o.as_str(), "DS")).collect();
        for knot in [&self.servers.0, &self.servers.1] {
            knot.edit("test.", &[], &unset)?;
        }
        Ok(())
    }

    /// Queries the child zones' servers have read so far.
    pub fn child_queries(&self) -> u64 {
        self.children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .queries
    }

    /// The two knotd processes serving the TLD (their CPU is part of the race).
    pub fn knotd_pids(&self) -> Vec<u32> {
        [self.servers.0.pid(), self.servers.1.pid()]
            .into_iter()
            .flatten()
            .collect()
    }

    /// A daemon's configuration for this world: SQLite at `db`, every zone of the account;
    /// `timing` and `dns` lines added to their sections.
    pub fn config(&self, dir: &Path, db: &Path, timing: &str, dns: &str) -> Res<PathBuf> {
        std::fs::write(dir.join("api-key"), format!("{API_KEY}\n")).map_err(|e| e.to_string())?;
        let conf = dir.join("config.toml");
        std::fs::write(
            &conf,
            format!(
                "[provider]\nbase_url = \"{}\"\napi_key_file = \"{}\"\nrequest_timeout = \"10s\"\n\
                 [database]\npath = \"{}\"\n\
                 [dns]\nroot_hints = [\"{}\"]\nport = {}\nvalidating_resolvers = []\n\
                 trust_anchor_file = \"{}\"\naddress_families = [\"ipv4\"]\n\
                 query_timeout = \"2s\"\nquery_attempts = 3\n{dns}\n\
                 [timing]\n{timing}\n\
                 [zones]\nall = true\n",
                self.sim.base_url(),
                dir.join("api-key").display(),
                db.display(),
                self.tld[0],
                self.port,
                self.anchor.display(),
            ),
        )
        .map_err(|e| e.to_string())?;
        Ok(conf)
    }
}
