//! A whole real-world DNS on loopback for one test, on its own `127.0.B.x` block:
//!
//! ```text
//!  .          127.0.B.1   knotd   signed (keymgr CSK; its DS is the trust anchor)
//!  test.      127.0.B.2   knotd   signed, its own key     a.nic.test.
//!             127.0.B.3   knotd   signed, its own key     b.nic.test.  (independent)
//!  <child>    127.0.B.4   knotd   primary; signing driven by the provider simulator
//!             127.0.B.5   knotd   secondary, by NOTIFY and zone transfer
//!  resolver   127.0.B.53  unbound validating, the lab anchor, every zone a stub zone
//! ```
//! All on one port: 53 when it is free on every address, else one the kernel picks.
//! The provider simulator's DNSSEC switch drives the primary's signing ([`KnotSigner`]);
//! the test is the registrar, editing `test.` on one TLD server or both.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dnssec_warden_lab::{ProviderSim, Signer, SimOptions};
use serde_json::Value;

use super::knot::{Knot, Proc, Result, Signing, Unbound, ZoneConf, wait_for_zone};

pub const API_KEY: &str = "e2e-knot-api-key";

/// Which TLD servers a registrar edit goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tld {
    A,
    B,
    Both,
}

/// The provider's signer: Knot on the child primary, switched with `knotc`.
#[derive(Debug)]
pub struct KnotSigner {
    primary: Arc<Knot>,
    bodies: HashMap<String, String>,
}

impl KnotSigner {
    fn body(&self, zone: &str) -> std::result::Result<&str, String> {
        self.bodies
            .get(zone)
            .map(String::as_str)
            .ok_or_else(|| format!("the signer does not host {zone}"))
    }

    fn signing(&self, zone: &str) -> std::result::Result<bool, String> {
        let out = self
            .primary
            .knotc(&["conf-read", &format!("zone[{zone}].dnssec-signing")])?;
        Ok(out.contains("= on"))
    }

    /// Switches signing off behind the provider's back (a person at the signer).
    pub fn force_off(&self, zone: &str) -> Result<()> {
        self.primary.set_signing(zone, self.body(zone)?, false)
    }
}

impl Signer for KnotSigner {
    fn enable(&self, zone: &str) -> std::result::Result<dnssec_warden_lab::Dnskey, String> {
        if !self.signing(zone)? {
            self.primary.set_signing(zone, self.body(zone)?, true)?;
        }
        // Knot makes the key when it first signs; bounded wait for it.
        for _ in 0..100 {
            if let Some(key) = self.primary.dnskey(zone)? {
                return Ok(key.into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("Knot made no key for {zone}"))
    }

    fn disable(&self, zone: &str) -> std::result::Result<(), String> {
        self.primary.set_signing(zone, self.body(zone)?, false)
    }

    fn key(&self, zone: &str) -> std::result::Result<Option<dnssec_warden_lab::Dnskey>, String> {
        if !self.signing(zone)? {
            return Ok(None);
        }
        Ok(self.primary.dnskey(zone)?.map(Into::into))
    }
}

pub struct RealWorld {
    pub block: u8,
    pub port: u16,
    pub sim: ProviderSim,
    pub signer: Arc<KnotSigner>,
    pub unbound: Unbound,
    pub root: Knot,
    pub tld_a: Knot,
    pub tld_b: Knot,
    pub primary: Arc<Knot>,
    pub secondary: Knot,
    pub anchor: PathBuf,
    pub config: PathBuf,
    pub zones: Vec<String>,
    /// Last: the files go once every process is stopped.
    pub dir: tempfile::TempDir,
}

pub fn ip(block: u8, host: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, block, host)
}

fn soa(ns: &str) -> String {
    format!("@ 2 SOA {ns} hostmaster.test. $SERIAL 3600 600 86400 2\n")
}

fn child_body(zone: &str) -> String {
    format!(
        "$ORIGIN {zone}\n{}@ 2 NS ns1.dns.test.\n@ 2 NS ns2.dns.test.\nwww 2 A 192.0.2.1\n",
        soa("ns1.dns.test.")
    )
}

impl RealWorld {
    /// Starts everything for `zones` (names below `test.`, with the trailing dot).
    pub async fn start(block: u8, zones: &[&str]) -> Result<Self> {
        super::knot::ensure_packages(&["knot", "knot-dnsutils", "unbound"])?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let at = |h| ip(block, h);
        let port = super::knot::pick_port(&[at(1), at(2), at(3), at(4), at(5), at(53)])?;

        let mut tld = format!(
            "$ORIGIN test.\n{}@ 3600 NS a.nic.test.\n@ 3600 NS b.nic.test.\n\
             a.nic 3600 A {}\nb.nic 3600 A {}\nns1.dns 3600 A {}\nns2.dns 3600 A {}\n",
            soa("a.nic.test."),
            at(2),
            at(3),
            at(4),
            at(5)
        );
        let mut bodies = HashMap::new();
        let mut primary_zones = Vec::new();
        let mut secondary_zones = Vec::new();
        for z in zones {
            tld.push_str(&format!("{z} 2 NS ns1.dns.test.\n{z} 2 NS ns2.dns.test.\n"));
            let body = child_body(z);
            let mut conf = ZoneConf::new(z, body.clone(), Signing::Off);
            conf.secondaries = vec![at(5)];
            primary_zones.push(conf);
            secondary_zones.push(ZoneConf::secondary(z, at(4)));
            bodies.insert(z.to_string(), body);
        }
        let mut root = Knot::new(
            &dir.path().join("root"),
            at(1),
            port,
            &[ZoneConf::new(".", String::new(), Signing::Manual)],
        )?;
        let mut tld_a = Knot::new(
            &dir.path().join("tld-a"),
            at(2),
            port,
            &[ZoneConf::new("test.", tld.clone(), Signing::Manual)],
        )?;
        let mut tld_b = Knot::new(
            &dir.path().join("tld-b"),
            at(3),
            port,
            &[ZoneConf::new("test.", tld, Signing::Manual)],
        )?;
        let mut primary = Knot::new(&dir.path().join("primary"), at(4), port, &primary_zones)?;
        let mut secondary =
            Knot::new(&dir.path().join("secondary"), at(5), port, &secondary_zones)?;
        let root_ds = root.generate_csk(".")?;
        let ds_a = tld_a.generate_csk("test.")?;
        let ds_b = tld_b.generate_csk("test.")?;
        root.write_zone(
            ".",
            &format!(
                "$ORIGIN .\n{}@ 3600 NS a.root.test.\ntest. 3600 NS a.nic.test.\ntest. 3600 NS b.nic.test.\n\
                 test. 3600 DS {ds_a}\ntest. 3600 DS {ds_b}\n\
                 a.root.test. 3600 A {}\na.nic.test. 3600 A {}\nb.nic.test. 3600 A {}\n",
                soa("a.root.test."),
                at(1),
                at(2),
                at(3)
            ),
        )?;
        let anchor = dir.path().join("root.ds");
        std::fs::write(&anchor, format!(". 3600 IN DS {root_ds}\n")).map_err(|e| e.to_string())?;

        for k in [
            &mut root,
            &mut tld_a,
            &mut tld_b,
            &mut primary,
            &mut secondary,
        ] {
            k.start()?;
        }
        let limit = Duration::from_secs(20);
        let mut waits = vec![
            (root.socket(), ".".to_string()),
            (tld_a.socket(), "test.".to_string()),
            (tld_b.socket(), "test.".to_string()),
        ];
        for z in zones {
            waits.push((primary.socket(), z.to_string()));
            waits.push((secondary.socket(), z.to_string()));
        }
        for (server, z) in waits {
            wait_for_zone(server, &z, limit).await.map_err(|e| {
                format!(
                    "{e}\n{}{}{}{}{}",
                    root.log(),
                    tld_a.log(),
                    tld_b.log(),
                    primary.log(),
                    secondary.log()
                )
            })?;
        }

        let mut stubs: Vec<(&str, Vec<Ipv4Addr>)> =
            vec![(".", vec![at(1)]), ("test.", vec![at(2), at(3)])];
        for z in zones {
            stubs.push((z, vec![at(4), at(5)]));
        }
        let unbound =
            Unbound::start(&dir.path().join("unbound"), at(53), port, &anchor, &stubs).await?;

        let primary = Arc::new(primary);
        let signer = Arc::new(KnotSigner {
            primary: primary.clone(),
            bodies,
        });
        let sim = ProviderSim::start(
            "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?,
            SimOptions {
                api_keys: vec![API_KEY.into()],
                ds_ttl: 2,
                name_servers: vec!["ns1.dns.test".into(), "ns2.dns.test".into()],
                name_server_ttl: 2,
                signer: Some(signer.clone()),
                ..SimOptions::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
        for z in zones {
            sim.handle().add_zone(z);
        }
        let key = dir.path().join("api-key");
        std::fs::write(&key, format!("{API_KEY}\n")).map_err(|e| e.to_string())?;
        let config = dir.path().join("config.toml");
        let names: Vec<String> = zones.iter().map(|z| format!("\"{z}\"")).collect();
        std::fs::write(
            &config,
            format!(
                "[provider]\nbase_url = \"{}\"\napi_key_file = {key:?}\nrequest_timeout = \"5s\"\nmax_attempts = 2\nretry_budget = \"5s\"\n\
                 [database]\npath = {:?}\n\
                 [dns]\nroot_hints = [\"{}\"]\nport = {port}\ntrust_anchor_file = {anchor:?}\n\
                 validating_resolvers = [\"{}\"]\nquery_timeout = \"1s\"\nquery_attempts = 2\n\
                 [timing]\npoll_waiting = \"300ms\"\npoll_active = \"1s\"\npropagation_margin = \"1s\"\n\
                 ds_overdue_after = \"1h\"\nds_removal_overdue_after = \"1h\"\npartial_stuck_after = \"1h\"\n\
                 observation_failing_after = \"1h\"\nretry_base = \"200ms\"\nassumed_ds_ttl = \"2s\"\n\
                 [zones]\nnames = [{}]\n",
                sim.base_url(),
                dir.path().join("state.db"),
                at(1),
                unbound.addr,
                names.join(", ")
            ),
        )
        .map_err(|e| e.to_string())?;
        // The database is made (migrated) here, before any daemon, as `run` would make it
        // (`status` only reads, and never creates one).
        let store = dnssec_warden::store::Store::open(&dir.path().join("state.db"))
            .await
            .map_err(|e| format!("a fresh database: {e}"))?;
        store.close().await;
        Ok(Self {
            block,
            port,
            sim,
            signer,
            unbound,
            root,
            tld_a,
            tld_b,
            primary,
            secondary,
            anchor,
            config,
            zones: zones.iter().map(|z| z.to_string()).collect(),
            dir,
        })
    }

    fn tlds(&self, on: Tld) -> Vec<&Knot> {
        match on {
            Tld::A => vec![&self.tld_a],
            Tld::B => vec![&self.tld_b],
            Tld::Both => vec![&self.tld_a, &self.tld_b],
        }
    }

    /// The registrar publishes `ds` (rdata `tag alg type HEX`) for `zone`, TTL 2.
    pub fn publish_ds(&self, zone: &str, on: Tld, ds: &str) -> Result<()> {
        let rr = format!("2 DS {ds}");
        for k in self.tlds(on) {
            k.edit("test.", &[(zone, &rr)], &[(zone, "DS")])?;
        }
        Ok(())
    }

    pub fn remove_ds(&self, zone: &str, on: Tld) -> Result<()> {
        for k in self.tlds(on) {
            k.edit("test.", &[], &[(zone, "DS")])?;
        }
        Ok(())
    }

    /// The DS of Knot's key for `zone`, as `keymgr ds` prints it.
    pub fn knot_ds(&self, zone: &str) -> Result<String> {
        self.primary
            .ds(zone)?
            .ok_or_else(|| format!("Knot has no key for {zone}"))
    }

    /// Unbound's `(rcode, AD)` for `www.<zone> A`, after a flush of what it knew.
    pub async fn resolve_fresh(&self, zone: &str) -> Result<(String, bool)> {
        self.unbound.flush(zone)?;
        self.unbound
            .ask(&format!("www.{zone}"), hickory_proto::rr::RecordType::A)
            .await
    }

    pub fn logs(&self) -> String {
        format!(
            "--- primary ---\n{}--- secondary ---\n{}--- tld a ---\n{}--- tld b ---\n{}",
            self.primary.log(),
            self.secondary.log(),
            self.tld_a.log(),
            self.tld_b.log()
        )
    }
}

pub use super::daemon::{bin, cli};

/// `dnssec-warden run`, stopped by PID (SIGKILL) when dropped.
pub struct Daemon {
    proc: Proc,
    log: PathBuf,
}

impl Daemon {
    pub fn start(config: &Path, log: &Path) -> Result<Self> {
        // Appends, so the log of a restarted daemon keeps what the killed one wrote.
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| e.to_string())?;
        let proc = Proc::spawn(
            "dnssec-warden run",
            bin()
                .args(["run", "--config"])
                .arg(config)
                .env("RUST_LOG", "info")
                .stdout(Stdio::null())
                .stderr(file),
        )?;
        Ok(Self {
            proc,
            log: log.to_path_buf(),
        })
    }

    pub fn kill(&mut self) {
        self.proc.kill();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `status ZONE --json`, or `Null` before the daemon has seen the zone.
pub fn status(config: &Path, zone: &str) -> Value {
    let (ok, out, _) = cli(config, &["status", zone, "--json"]);
    if !ok {
        return Value::Null;
    }
    serde_json::from_str(&out).unwrap_or(Value::Null)
}

pub fn state(config: &Path, zone: &str) -> String {
    status(config, zone)["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

pub fn alert_kinds(config: &Path, zone: &str) -> Vec<String> {
    status(config, zone)["alerts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["kind"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (bounded) until the zone is in `want`; the states seen on the way, in order.
pub async fn wait_state(
    config: &Path,
    zone: &str,
    want: &str,
    within: Duration,
) -> Result<Vec<String>> {
    let until = Instant::now() + within;
    let mut seen: Vec<String> = Vec::new();
    for _ in 0..10_000 {
        let s = state(config, zone);
        if seen.last() != Some(&s) {
            seen.push(s.clone());
        }
        if s == want {
            return Ok(seen);
        }
        if Instant::now() > until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "{zone} never reached {want} within {within:?}; seen {seen:?}"
    ))
}
