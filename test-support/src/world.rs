//! A whole real-world DNS on loopback for one test, on its own `127.0.B.x` block:
//!
//! ```text
//!  .          127.0.B.1   knotd   signed (keymgr CSK; its DS is the trust anchor)
//!  test.      127.0.B.2   knotd   signed, its own key     a.nic.test.
//!             127.0.B.3   knotd   signed, its own key     b.nic.test.  (independent
//!                                 signers, each publishing both keys: RFC 8901)
//!  <child>    127.0.B.4   knotd   primary; signing driven by the provider simulator
//!             127.0.B.5   knotd   secondary, by NOTIFY and zone transfer
//!  <child>    127.0.B.6   knotd   the old provider's signing primary, ns1.old.test.,
//!   (moving   127.0.B.7   knotd   its secondary, ns2.old.test.  its own keys; only
//!    in)                          with zones moving in
//!  <child>    127.0.B.8   pdns_server  PowerDNS with sqlite3, ns1.pdns.test. and
//!             127.0.B.9                ns2.pdns.test.: a second provider, through its
//!                                      own API; only with zones at PowerDNS (or in a
//!                                      signed move: its source, `direct-dnskey=yes`)
//!  <child>    127.0.B.10  pdns_server  a second PowerDNS, ns1.pdns2.test. and
//!   (signed   127.0.B.11               ns2.pdns2.test. (glue in test., delegated by
//!    move)                             nobody at first), `direct-dnskey=yes`: the
//!                                      target of a signed move; only with
//!                                      [`WorldOptions::signed_move`]
//!  registry   127.0.B.20  the lab registry of test. (dnssec_warden_lab::registry): scans
//!                         the children's CDS, writes the DS into both TLD servers by
//!                         UPDATE, takes NOTIFYs; only with [`WorldOptions::registry`]
//!  resolver   127.0.B.53  unbound validating, the lab anchor
//!  chain      127.0.B.54  a caching unbound and a validating one forwarding to it
//!             127.0.B.55  (crate::chain), where a test starts one
//! ```
//! All on one port: 53 when it is free on every address, else one the kernel picks. On
//! port 53 Unbound knows only the root server and follows the referrals from there (so it
//! follows a re-delegation as any resolver would); on another port it cannot follow
//! referrals (they carry no port) and every zone is a stub zone, pinned to the servers it
//! starts delegated to ([`RealWorld::follows_referrals`]).
//! The provider simulator's DNSSEC switch drives the primary's signing ([`KnotSigner`]);
//! the test is the registrar, editing `test.` on one TLD server or both: the DS
//! ([`RealWorld::publish_ds`], [`RealWorld::remove_ds`]) and the NS RRset
//! ([`RealWorld::delegate`]). A zone named in [`WorldOptions::at_old_provider`] starts
//! hosted and signed (Knot, its own key) at the old provider, delegated to
//! `ns1.old.test.`/`ns2.old.test.` with the old key's DS at both TLD servers, and unsigned
//! at the provider: a zone about to move in. A zone named in [`WorldOptions::signed_move`]
//! starts at PowerDNS (`[providers.pdns]`) as one in [`WorldOptions::at_powerdns`] does,
//! and the target PowerDNS (`[providers.pdns2]`) takes it with
//! [`RealWorld::create_at_target`]: the registrar edits add a DS beside another
//! ([`RealWorld::add_ds`]), remove one of several ([`RealWorld::remove_one_ds`]), and may
//! lag one TLD server behind the other ([`RealWorld::registrar`]).

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dnssec_warden_lab::{ProviderSim, Signer, SimOptions};
use serde_json::Value;

use crate::knot::{Knot, Proc, Result, Signing, Unbound, UnboundOptions, ZoneConf, wait_for_zone};

pub const API_KEY: &str = "e2e-knot-api-key";

/// The provider's name servers (the simulator's apex NS for every zone).
pub const PROVIDER_NS: [&str; 2] = ["ns1.dns.test.", "ns2.dns.test."];
/// The old provider's name servers, a zone moving in starts delegated to.
pub const OLD_NS: [&str; 2] = ["ns1.old.test.", "ns2.old.test."];
/// PowerDNS's name servers (one server on two addresses).
pub const PDNS_NS: [&str; 2] = ["ns1.pdns.test.", "ns2.pdns.test."];
pub const PDNS_API_KEY: &str = "e2e-pdns-api-key";
/// The account names the configuration gives the two PowerDNS servers.
pub const PDNS_ACCOUNT: &str = "pdns";
pub const PDNS2_ACCOUNT: &str = "pdns2";
/// The second PowerDNS's name servers, a signed move's target (`127.0.B.10`, `.11`).
pub const PDNS2_NS: [&str; 2] = ["ns1.pdns2.test.", "ns2.pdns2.test."];
/// The second PowerDNS's addresses in a world's block.
pub const PDNS2_HOSTS: [u8; 2] = [10, 11];

/// What a world starts with beyond [`RealWorld::start`]'s zones at the provider.
#[derive(Debug, Clone, Default)]
pub struct WorldOptions {
    /// Zones (also in `zones`) that start at the old provider: hosted and signed there,
    /// delegated to [`OLD_NS`] with the old key's DS at both TLD servers.
    pub at_old_provider: Vec<String>,
    /// The TTL of the old delegation's NS RRset, at the TLD servers and at the old
    /// servers' apex (2 s when `None`, as everything else in the lab); Unbound caches up
    /// to it, so it may follow the old delegation that long after it changed (what safety
    /// rule 9 waits out). Unbound prefers the apex NS it learns from the old servers to
    /// the TLD's, so both must be long for it to stay.
    pub old_ns_ttl: Option<u32>,
    /// Zones (also in `zones`) hosted at a real PowerDNS instead of the simulated
    /// provider, delegated to [`PDNS_NS`]; the configuration names it `[providers.pdns]`.
    pub at_powerdns: Vec<String>,
    /// Zones (also in `zones`) about to make a signed move (RFC 8901 model 2) between two
    /// PowerDNS accounts: each starts as in `at_powerdns` (unsigned at `[providers.pdns]`,
    /// delegated to [`PDNS_NS`]), both servers run with `direct-dnskey=yes`, and a second
    /// PowerDNS, `[providers.pdns2]` at [`PDNS2_HOSTS`] with [`PDNS2_NS`] (glue in
    /// `test.`, delegated by nobody), is the target. The zone is created there (unsigned)
    /// by [`RealWorld::create_at_target`], not at the start: the daemon sends nothing to
    /// a zone two accounts hold (safety rule 13), so `enable` at the source comes first.
    pub signed_move: Vec<String>,
    /// Unbound's `val-max-restart` (its default 5 when `None`): 0 makes it fail a bogus
    /// answer at once instead of asking other servers and the parent again.
    pub val_max_restart: Option<u32>,
    /// A registry for `test.` beside the TLD servers ([`RegistryOptions`]); none when
    /// `None`, and the TLD servers then take no UPDATE.
    pub registry: Option<RegistryOptions>,
    /// The algorithm of the key PowerDNS makes when DNSSEC is switched on through its API
    /// (its `default-ksk-algorithm`: `rsasha256`, `ecdsa256`, `ed25519`); PowerDNS's own
    /// default, `ecdsa256`, when `None`.
    pub pdns_algorithm: Option<&'static str>,
    /// PowerDNS makes a ZSK of this algorithm beside the KSK when DNSSEC is switched on
    /// (its `default-zsk-algorithm`); one key, a CSK, when `None`.
    pub pdns_zsk_algorithm: Option<&'static str>,
}

/// The registry's address in a world's block (`127.0.B.20`), its name in `test.`.
pub const REGISTRY_HOST: u8 = 20;
pub const REGISTRY_NAME: &str = "registry.nic.test.";

/// The lab registry of `test.` ([`dnssec_warden_lab::registry`]): it scans the children's
/// CDS and writes their DS into both TLD servers by dynamic UPDATE (both allow it from
/// `127.0.B.20`), DS TTL 2 s.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// How long a first DS's CDS must be seen unchanged.
    pub bootstrap_period: Duration,
    pub scan_interval: Duration,
    /// Takes NOTIFYs on `127.0.B.20` at the world's port, and `test.` publishes
    /// `*._dsync.test. DSYNC CDS 1 <port> registry.nic.test.` (RFC 9859) saying so.
    pub notify: bool,
    /// The delegations it manages; empty: every zone of the world.
    pub children: Vec<String>,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        Self {
            bootstrap_period: Duration::from_secs(3),
            scan_interval: Duration::from_secs(1),
            notify: true,
            children: Vec::new(),
        }
    }
}

/// The old provider: a signing primary and its secondary, each zone with its own CSK.
pub struct OldProvider {
    pub primary: Knot,
    pub secondary: Knot,
    /// The DS (`tag 13 2 HEX`) of each zone's old key.
    ds: HashMap<String, String>,
}

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
    /// The old provider, when some zone starts there.
    pub old: Option<OldProvider>,
    /// PowerDNS, when some zone is hosted there.
    pub pdns: Option<crate::pdns::Pdns>,
    /// The second PowerDNS, a signed move's target, with [`WorldOptions::signed_move`].
    pub pdns2: Option<crate::pdns::Pdns>,
    /// The registry of `test.`, with [`WorldOptions::registry`].
    pub registry: Option<dnssec_warden_lab::registry::Registry>,
    /// Unbound follows the referrals from the root (port 53); false: it has stub zones.
    pub follows_referrals: bool,
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

/// The zone as a provider serves it: the same `www` everywhere, and `who TXT` naming the
/// provider that answered (so a test can tell which delegation a resolver followed).
fn child_body(zone: &str, ns: &[&str; 2], ns_ttl: u32, who: &str) -> String {
    format!(
        "$ORIGIN {zone}\n{}@ {ns_ttl} NS {}\n@ {ns_ttl} NS {}\nwww 2 A 192.0.2.1\nwho 2 TXT \"{who}\"\n",
        soa(ns[0]),
        ns[0],
        ns[1]
    )
}

impl RealWorld {
    /// Starts everything for `zones` (names below `test.`, with the trailing dot), every
    /// zone delegated to the provider.
    pub async fn start(block: u8, zones: &[&str]) -> Result<Self> {
        Self::start_with(block, zones, WorldOptions::default()).await
    }

    /// Starts everything for `zones`; those in `options.at_old_provider` start at the old
    /// provider (signed there, its DS at both TLD servers), the others at the provider.
    pub async fn start_with(block: u8, zones: &[&str], options: WorldOptions) -> Result<Self> {
        crate::knot::ensure_packages(&["knot", "knot-dnsutils", "unbound"])?;
        for z in options
            .at_old_provider
            .iter()
            .chain(&options.at_powerdns)
            .chain(&options.signed_move)
        {
            if !zones.contains(&z.as_str()) {
                return Err(format!(
                    "{z} is at the old provider or PowerDNS but not among {zones:?}"
                ));
            }
        }
        let at_pdns: Vec<&str> = options
            .at_powerdns
            .iter()
            .chain(&options.signed_move)
            .map(String::as_str)
            .collect();
        let two_pdns = !options.signed_move.is_empty();
        // The zones at the simulated provider.
        let sim_zones: Vec<&str> = zones
            .iter()
            .copied()
            .filter(|z| !at_pdns.contains(z))
            .collect();
        let moving: Vec<&str> = options.at_old_provider.iter().map(String::as_str).collect();
        let old_ns_ttl = options.old_ns_ttl.unwrap_or(2).max(1);
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let at = |h| ip(block, h);
        let mut addresses = vec![
            at(1),
            at(2),
            at(3),
            at(4),
            at(5),
            at(6),
            at(7),
            at(8),
            at(9),
            at(53),
        ];
        if options.registry.is_some() {
            addresses.push(at(REGISTRY_HOST));
        }
        if two_pdns {
            addresses.extend(PDNS2_HOSTS.map(at));
        }
        let port = crate::knot::pick_port(&addresses)?;
        let follows_referrals = port == 53;
        if !follows_referrals {
            eprintln!(
                "NOTE: port 53 is not free on every address of 127.0.{block}.x (it takes root \
                 and no other server there): the lab runs on port {port}, where Unbound cannot \
                 follow referrals, so every zone is a stub zone pinned to the servers it starts \
                 delegated to and Unbound does NOT follow a re-delegation"
            );
        }

        let mut tld = format!(
            "$ORIGIN test.\n{}@ 3600 NS a.nic.test.\n@ 3600 NS b.nic.test.\n\
             a.nic 3600 A {}\nb.nic 3600 A {}\nns1.dns 3600 A {}\nns2.dns 3600 A {}\n\
             ns1.old 3600 A {}\nns2.old 3600 A {}\nns1.pdns 3600 A {}\nns2.pdns 3600 A {}\n",
            soa("a.nic.test."),
            at(2),
            at(3),
            at(4),
            at(5),
            at(6),
            at(7),
            at(8),
            at(9)
        );
        if two_pdns {
            tld.push_str(&format!(
                "ns1.pdns2 3600 A {}\nns2.pdns2 3600 A {}\n",
                at(PDNS2_HOSTS[0]),
                at(PDNS2_HOSTS[1])
            ));
        }
        let mut tld_options = crate::knot::KnotOptions::default();
        if let Some(r) = &options.registry {
            tld.push_str(&format!("registry.nic 3600 A {}\n", at(REGISTRY_HOST)));
            if r.notify {
                let dsync =
                    dnssec_warden_lab::registry::dsync_record("test.", 2, port, REGISTRY_NAME)
                        .map_err(|e| e.to_string())?;
                tld.push_str(&dsync);
                tld.push('\n');
            }
            tld_options.update_from.push(at(REGISTRY_HOST));
        }
        // The old provider signs with keys made up front, so their DS goes into `test.`.
        let mut old = if moving.is_empty() {
            None
        } else {
            let mut old_primary_zones = Vec::new();
            let mut old_secondary_zones = Vec::new();
            for z in &moving {
                let mut conf = ZoneConf::new(
                    z,
                    child_body(z, &OLD_NS, old_ns_ttl, "old"),
                    Signing::Manual,
                );
                conf.secondaries = vec![at(7)];
                old_primary_zones.push(conf);
                old_secondary_zones.push(ZoneConf::secondary(z, at(6)));
            }
            let primary = Knot::new(
                &dir.path().join("old-primary"),
                at(6),
                port,
                &old_primary_zones,
            )?;
            let secondary = Knot::new(
                &dir.path().join("old-secondary"),
                at(7),
                port,
                &old_secondary_zones,
            )?;
            let mut ds = HashMap::new();
            for z in &moving {
                ds.insert(z.to_string(), primary.generate_csk(z)?);
            }
            Some(OldProvider {
                primary,
                secondary,
                ds,
            })
        };
        let mut bodies = HashMap::new();
        let mut primary_zones = Vec::new();
        let mut secondary_zones = Vec::new();
        for z in &at_pdns {
            tld.push_str(&format!(
                "{z} 2 NS {}\n{z} 2 NS {}\n",
                PDNS_NS[0], PDNS_NS[1]
            ));
        }
        for z in &sim_zones {
            match old.as_ref().and_then(|o| o.ds.get(*z)) {
                Some(ds) => tld.push_str(&format!(
                    "{z} {old_ns_ttl} NS {}\n{z} {old_ns_ttl} NS {}\n{z} 2 DS {ds}\n",
                    OLD_NS[0], OLD_NS[1]
                )),
                None => tld.push_str(&format!(
                    "{z} 2 NS {}\n{z} 2 NS {}\n",
                    PROVIDER_NS[0], PROVIDER_NS[1]
                )),
            }
            let body = child_body(z, &PROVIDER_NS, 2, "new");
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
        let mut tld_a = Knot::with_options(
            &dir.path().join("tld-a"),
            at(2),
            port,
            &[ZoneConf::new("test.", tld.clone(), Signing::Manual)],
            &tld_options,
        )?;
        let mut tld_b = Knot::with_options(
            &dir.path().join("tld-b"),
            at(3),
            port,
            &[ZoneConf::new("test.", tld, Signing::Manual)],
            &tld_options,
        )?;
        let mut primary = Knot::new(&dir.path().join("primary"), at(4), port, &primary_zones)?;
        let mut secondary =
            Knot::new(&dir.path().join("secondary"), at(5), port, &secondary_zones)?;
        let root_ds = root.generate_csk(".")?;
        let ds_a = tld_a.generate_csk("test.")?;
        let ds_b = tld_b.generate_csk("test.")?;
        // Each TLD server signs with its own key and publishes the other's too (RFC 8901's
        // multi-signer model): a resolver that took the DNSKEY set from one server
        // validates the other's signatures, even without retrying elsewhere.
        let keys_a = tld_a.dnskey_text("test.")?;
        let keys_b = tld_b.dnskey_text("test.")?;
        tld_a.import_public_keys("test.", &keys_b)?;
        tld_b.import_public_keys("test.", &keys_a)?;
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
        if let Some(o) = old.as_mut() {
            o.primary.start()?;
            o.secondary.start()?;
        }
        let limit = Duration::from_secs(20);
        let mut waits = vec![
            (root.socket(), ".".to_string()),
            (tld_a.socket(), "test.".to_string()),
            (tld_b.socket(), "test.".to_string()),
        ];
        for z in &sim_zones {
            waits.push((primary.socket(), z.to_string()));
            waits.push((secondary.socket(), z.to_string()));
        }
        let pdns = if at_pdns.is_empty() {
            None
        } else {
            let pdns = crate::pdns::Pdns::start_with(
                &dir.path().join("pdns"),
                &[at(8), at(9)],
                port,
                PDNS_API_KEY,
                crate::pdns::PdnsOptions {
                    direct_dnskey: two_pdns,
                    default_algorithm: options.pdns_algorithm,
                    zsk_algorithm: options.pdns_zsk_algorithm,
                },
            )?;
            for z in &at_pdns {
                let body = child_body(z, &PDNS_NS, 2, "pdns").replace("$SERIAL", "1");
                pdns.load_zone(z, &body)?;
                for h in [8, 9] {
                    waits.push((std::net::SocketAddr::from((at(h), port)), z.to_string()));
                }
            }
            Some(pdns)
        };
        // The target of a signed move: running, holding no zone until one is created.
        let pdns2 = if two_pdns {
            Some(crate::pdns::Pdns::start_with(
                &dir.path().join("pdns2"),
                &PDNS2_HOSTS.map(at),
                port,
                PDNS_API_KEY,
                crate::pdns::PdnsOptions {
                    direct_dnskey: true,
                    default_algorithm: None,
                    zsk_algorithm: None,
                },
            )?)
        } else {
            None
        };
        if let Some(o) = &old {
            for z in &moving {
                waits.push((o.primary.socket(), z.to_string()));
                waits.push((o.secondary.socket(), z.to_string()));
            }
        }
        for (server, z) in waits {
            wait_for_zone(server, &z, limit).await.map_err(|e| {
                format!(
                    "{e}\n{}{}{}{}{}{}",
                    root.log(),
                    tld_a.log(),
                    tld_b.log(),
                    primary.log(),
                    secondary.log(),
                    old.as_ref()
                        .map(|o| format!("{}{}", o.primary.log(), o.secondary.log()))
                        .unwrap_or_default()
                )
            })?;
        }

        let registry = match &options.registry {
            None => None,
            Some(r) => {
                let mut config = dnssec_warden_lab::registry::RegistryConfig::new(
                    "test.",
                    vec![tld_a.socket(), tld_b.socket()],
                    at(REGISTRY_HOST).into(),
                    port,
                );
                config.notify_port = r.notify.then_some(port);
                config.children = if r.children.is_empty() {
                    zones.iter().map(|z| z.to_string()).collect()
                } else {
                    r.children.clone()
                };
                config.bootstrap_period = r.bootstrap_period;
                config.scan_interval = r.scan_interval;
                config.ds_ttl = 2;
                Some(
                    dnssec_warden_lab::registry::Registry::start(config)
                        .await
                        .map_err(|e| format!("the registry: {e}"))?,
                )
            }
        };

        // Port 53: the root alone, and Unbound iterates from there like any resolver. Else
        // stubs, which pin each zone to the servers it starts delegated to.
        let mut stubs: Vec<(&str, Vec<Ipv4Addr>)> = vec![(".", vec![at(1)])];
        if !follows_referrals {
            stubs.push(("test.", vec![at(2), at(3)]));
            for z in zones {
                if at_pdns.contains(z) {
                    stubs.push((z, vec![at(8), at(9)]));
                } else if moving.contains(z) {
                    stubs.push((z, vec![at(6), at(7)]));
                } else {
                    stubs.push((z, vec![at(4), at(5)]));
                }
            }
        }
        let unbound = Unbound::start_with(
            &dir.path().join("unbound"),
            at(53),
            port,
            &anchor,
            &stubs,
            &UnboundOptions {
                cache_max_ttl: old_ns_ttl.max(2),
                val_max_restart: options.val_max_restart.unwrap_or(5),
            },
        )
        .await?;

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
        for z in &sim_zones {
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
                 observation_failing_after = \"1h\"\nretry_base = \"200ms\"\nassumed_ds_ttl = \"2s\"\nassumed_ns_ttl = \"3s\"\n\
                 [zones]\nnames = [{}]\n{}",
                sim.base_url(),
                dir.path().join("state.db"),
                at(1),
                unbound.addr,
                names.join(", "),
                [(PDNS_ACCOUNT, &pdns), (PDNS2_ACCOUNT, &pdns2)]
                    .into_iter()
                    .filter_map(|(account, p)| {
                        let p = p.as_ref()?;
                        let key = dir.path().join("pdns-api-key");
                        if let Err(e) = std::fs::write(&key, format!("{PDNS_API_KEY}\n")) {
                            eprintln!("cannot write {}: {e}", key.display());
                        }
                        Some(format!(
                            "[providers.{account}]\nkind = \"powerdns\"\nbase_url = \"{}\"\napi_key_file = {key:?}\n\
                             request_timeout = \"5s\"\nmax_attempts = 2\nretry_budget = \"5s\"\n",
                            p.base_url()
                        ))
                    })
                    .collect::<String>()
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
            old,
            pdns,
            pdns2,
            registry,
            follows_referrals,
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

    /// The registrar adds `ds` (rdata `tag alg type HEX`) beside the DS records the zone
    /// has, TTL 2 (a signed move's "add DS(Kt), keep DS(Ks)").
    pub fn add_ds(&self, zone: &str, on: Tld, ds: &str) -> Result<()> {
        let rr = format!("2 DS {ds}");
        for k in self.tlds(on) {
            k.edit("test.", &[(zone, &rr)], &[])?;
        }
        Ok(())
    }

    /// The registrar makes the zone's DS set exactly `set` (each `tag alg type HEX`), TTL
    /// 2; an empty set removes every DS.
    pub fn publish_ds_set(&self, zone: &str, on: Tld, set: &[&str]) -> Result<()> {
        let rrs: Vec<String> = set.iter().map(|ds| format!("2 DS {ds}")).collect();
        let records: Vec<(&str, &str)> = rrs.iter().map(|rr| (zone, rr.as_str())).collect();
        for k in self.tlds(on) {
            k.edit("test.", &records, &[(zone, "DS")])?;
        }
        Ok(())
    }

    /// The registrar removes the one DS `ds` (`tag alg type HEX`), keeping the others (a
    /// signed move's "remove DS(Ks), keep DS(Kt)"); an error if it is not there.
    pub fn remove_one_ds(&self, zone: &str, on: Tld, ds: &str) -> Result<()> {
        for k in self.tlds(on) {
            k.knotc(&["zone-begin", "test."])?;
            let mut args = vec!["zone-unset", "test.", zone, "DS"];
            args.extend(ds.split_whitespace());
            let edit = k
                .knotc(&args)
                .and_then(|_| k.knotc(&["zone-commit", "test."]));
            if let Err(e) = edit {
                let _ = k.knotc(&["zone-abort", "test."]);
                return Err(format!("removing DS {ds} of {zone}: {e}"));
            }
        }
        Ok(())
    }

    /// What one TLD server publishes for `zone` now, asked directly (no cache): its DS
    /// records (`tag alg type HEX`, the digest in upper case, sorted) and the names of
    /// its NS records (lower case, sorted). `on` must name one server.
    pub async fn parent_view(&self, zone: &str, on: Tld) -> Result<(Vec<String>, Vec<String>)> {
        use dnssec_warden::dns::Transport;
        use hickory_proto::rr::{RData, RecordType};
        let server = match on {
            Tld::A => self.tld_a.socket(),
            Tld::B => self.tld_b.socket(),
            Tld::Both => return Err("parent_view asks one TLD server".into()),
        };
        let transport = dnssec_warden::dns::NetTransport::new(Duration::from_secs(2));
        let name =
            dnssec_warden::dns::wire::parse_name(zone).ok_or_else(|| format!("bad name {zone}"))?;
        let ask = |rtype| {
            let q = dnssec_warden::dns::wire::build_query(&name, rtype, false);
            let transport = &transport;
            async move {
                transport
                    .exchange(server, &q)
                    .await
                    .map_err(|e| format!("{server} {zone} {rtype}: {e}"))
            }
        };
        let ds_answer = ask(RecordType::DS).await?;
        let mut ds: Vec<String> = ds_answer
            .answers
            .iter()
            .filter(|r| r.record_type() == RecordType::DS)
            .map(|r| {
                let f: Vec<String> = r
                    .data
                    .to_string()
                    .split_whitespace()
                    .map(str::to_string)
                    .collect();
                let (head, digest) = f.split_at(f.len().min(3));
                format!(
                    "{} {}",
                    head.join(" "),
                    digest.concat().to_ascii_uppercase()
                )
            })
            .collect();
        ds.sort();
        let ns_answer = ask(RecordType::NS).await?;
        let mut ns: Vec<String> = ns_answer
            .authorities
            .iter()
            .chain(&ns_answer.answers)
            .filter_map(|r| match &r.data {
                RData::NS(n) if r.name.to_string().eq_ignore_ascii_case(zone) => {
                    Some(n.0.to_string().to_ascii_lowercase())
                }
                _ => None,
            })
            .collect();
        ns.sort();
        ns.dedup();
        Ok((ds, ns))
    }

    /// The registrar replaces the zone's NS RRset with `hosts` (TTL 2, glue already in
    /// `test.` for [`PROVIDER_NS`], [`OLD_NS`], [`PDNS_NS`] and [`PDNS2_NS`]); the DS
    /// stays as it is.
    pub fn delegate(&self, zone: &str, on: Tld, hosts: &[&str]) -> Result<()> {
        if hosts.is_empty() {
            return Err(format!("a delegation of {zone} to no server"));
        }
        let rrs: Vec<String> = hosts.iter().map(|h| format!("2 NS {h}")).collect();
        let set: Vec<(&str, &str)> = rrs.iter().map(|rr| (zone, rr.as_str())).collect();
        for k in self.tlds(on) {
            k.edit("test.", &set, &[(zone, "NS")])?;
        }
        Ok(())
    }

    /// The DS of the old provider's key for `zone` (`tag 13 2 HEX`).
    pub fn old_ds(&self, zone: &str) -> Result<String> {
        self.old
            .as_ref()
            .and_then(|o| o.ds.get(zone).cloned())
            .ok_or_else(|| format!("{zone} is not at the old provider"))
    }

    /// Unbound's answer to `who.<zone> TXT` (checking disabled, so it comes even when the
    /// zone is bogus): which provider's servers Unbound followed, `"old"` or `"new"`.
    pub async fn who_answers(&self, zone: &str) -> Result<String> {
        let m = self
            .unbound
            .query(
                &format!("who.{zone}"),
                hickory_proto::rr::RecordType::TXT,
                true,
            )
            .await?;
        m.answers
            .iter()
            .find_map(|r| match &r.data {
                hickory_proto::rr::RData::TXT(t) => t
                    .txt_data
                    .first()
                    .map(|d| String::from_utf8_lossy(d).into_owned()),
                _ => None,
            })
            .ok_or_else(|| format!("no TXT for who.{zone}: {}", m.metadata.response_code))
    }

    /// The DS of Knot's key for `zone`, as `keymgr ds` prints it.
    pub fn knot_ds(&self, zone: &str) -> Result<String> {
        self.primary
            .ds(zone)?
            .ok_or_else(|| format!("Knot has no key for {zone}"))
    }

    /// The DS of the key PowerDNS signs `zone` with, as PowerDNS computes it.
    pub fn pdns_ds(&self, zone: &str) -> Result<String> {
        self.pdns
            .as_ref()
            .ok_or_else(|| "no PowerDNS in this world".to_string())?
            .ds(zone)
    }

    /// The DS of the key the second PowerDNS (a signed move's target) signs `zone` with.
    pub fn pdns2_ds(&self, zone: &str) -> Result<String> {
        self.target()?.ds(zone)
    }

    fn target(&self) -> Result<&crate::pdns::Pdns> {
        self.pdns2
            .as_ref()
            .ok_or_else(|| "no second PowerDNS in this world (WorldOptions::signed_move)".into())
    }

    /// The operator creates `zone` at the second PowerDNS (a signed move's target),
    /// unsigned, with the same records as at the first, its apex NS [`PDNS2_NS`] and
    /// `who TXT "pdns2"`; returns once both its addresses serve it.
    pub async fn create_at_target(&self, zone: &str) -> Result<()> {
        let target = self.target()?;
        let body = child_body(zone, &PDNS2_NS, 2, "pdns2").replace("$SERIAL", "1");
        target.load_zone(zone, &body)?;
        for h in PDNS2_HOSTS {
            let server = std::net::SocketAddr::from((ip(self.block, h), self.port));
            wait_for_zone(server, zone, Duration::from_secs(20)).await?;
        }
        Ok(())
    }

    /// The operator deletes `zone` at the first PowerDNS (a signed move's source, once
    /// the move asks for it).
    pub fn delete_at_source(&self, zone: &str) -> Result<()> {
        self.pdns
            .as_ref()
            .ok_or_else(|| "no PowerDNS in this world".to_string())?
            .pdnsutil(&["delete-zone", zone])
            .map(drop)
    }

    /// Unbound's `(rcode, AD)` for `www.<zone> A`, after a flush of what it knew.
    pub async fn resolve_fresh(&self, zone: &str) -> Result<(String, bool)> {
        self.unbound.flush(zone)?;
        self.unbound
            .ask(&format!("www.{zone}"), hickory_proto::rr::RecordType::A)
            .await
    }

    pub fn logs(&self) -> String {
        let old = self
            .old
            .as_ref()
            .map(|o| {
                format!(
                    "--- old primary ---\n{}--- old secondary ---\n{}",
                    o.primary.log(),
                    o.secondary.log()
                )
            })
            .unwrap_or_default();
        let pdns = self
            .pdns
            .as_ref()
            .map(|p| format!("--- pdns ---\n{}", p.log()))
            .unwrap_or_default();
        let pdns2 = self
            .pdns2
            .as_ref()
            .map(|p| format!("--- pdns2 ---\n{}", p.log()))
            .unwrap_or_default();
        format!(
            "--- primary ---\n{}--- secondary ---\n{}--- tld a ---\n{}--- tld b ---\n{}{old}{pdns}{pdns2}",
            self.primary.log(),
            self.secondary.log(),
            self.tld_a.log(),
            self.tld_b.log()
        )
    }
}

pub use crate::daemon::{bin, cli};

/// One call of the registrar hook [`RealWorld::registrar_hook`] installs, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCall {
    /// `DNSSEC_WARDEN_SEQ`.
    pub seq: String,
    /// `DNSSEC_WARDEN_ACTION`: `publish`, `withdraw`, `add`, `remove`.
    pub action: String,
    pub zone: String,
    /// `DNSSEC_WARDEN_DS`: DS lines (`owner TTL IN DS tag alg type HEX`), `;` between.
    pub ds: String,
    /// `DNSSEC_WARDEN_DS_KEEP`: the DS that must stay (`add`, `remove`), else empty.
    pub keep: String,
}

impl HookCall {
    /// The DS records the call names (`tag alg type HEX`, [`ds_key`]'s form).
    pub fn ds_records(&self) -> Vec<String> {
        ds_records(&self.ds)
    }

    /// The DS records the call says must stay.
    pub fn keep_records(&self) -> Vec<String> {
        ds_records(&self.keep)
    }
}

fn ds_records(lines: &str) -> Vec<String> {
    lines
        .split(';')
        .filter_map(|line| line.split_once(" DS ").map(|(_, rdata)| ds_key(rdata)))
        .collect()
}

/// `tag alg type HEX` in one form for comparing: the digest in upper case, unsplit.
pub fn ds_key(ds: &str) -> String {
    let f: Vec<&str> = ds.split_whitespace().collect();
    let (head, digest) = f.split_at(f.len().min(3));
    format!(
        "{} {}",
        head.join(" "),
        digest.concat().to_ascii_uppercase()
    )
}

/// The calls the hook of [`RealWorld::registrar_hook`] recorded in `file` so far, in
/// order (none before the first).
pub fn hook_calls(file: &Path) -> Vec<HookCall> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut f = line.split('\t').map(str::to_string);
            Some(HookCall {
                seq: f.next()?,
                action: f.next()?,
                zone: f.next()?,
                ds: f.next().unwrap_or_default(),
                keep: f.next().unwrap_or_default(),
            })
        })
        .collect()
}

impl RealWorld {
    /// Appends a `[registrar]` hook to the configuration that records each call in a file
    /// of the world's folder (one line a call: seq, action, zone, DS, DS to keep, tab
    /// between; read with [`hook_calls`]), then `extra`; the file. The test is the
    /// registrar: it acts on what the file says.
    pub fn registrar_hook(&self, extra: &str) -> Result<PathBuf> {
        let calls = self.dir.path().join("hook-calls");
        let script = "printf '%s\\t%s\\t%s\\t%s\\t%s\\n' \"$DNSSEC_WARDEN_SEQ\" \"$DNSSEC_WARDEN_ACTION\" \
             \"$DNSSEC_WARDEN_ZONE\" \"$(printf '%s' \"$DNSSEC_WARDEN_DS\" | tr '\\n' ';')\" \
             \"$DNSSEC_WARDEN_DS_KEEP\" >> \"$1\"";
        let mut config = std::fs::read_to_string(&self.config).map_err(|e| e.to_string())?;
        config.push_str(&format!(
            "\n[registrar]\ncommand = [\"/bin/sh\", \"-c\", {script:?}, \"sh\", {:?}]\ntimeout = \"10s\"\n{extra}",
            calls.display().to_string()
        ));
        std::fs::write(&self.config, config).map_err(|e| e.to_string())?;
        Ok(calls)
    }

    /// The zone (hosted at PowerDNS, [`WorldOptions::at_powerdns`]) enabled through the
    /// daemon's CLI, the DS the daemon asks for checked against PowerDNS's and published
    /// at both TLD servers, then `active` and validated by Unbound; PowerDNS's DS
    /// (`tag alg 2 HEX`). `daemon` is the running daemon (its log goes into an error).
    pub async fn enable_at_powerdns(
        &self,
        zone: &str,
        daemon: &Daemon,
        within: Duration,
    ) -> Result<String> {
        let with_log = |e: String| format!("{e}\n{}", daemon.log());
        wait_state(&self.config, zone, "disabled", within)
            .await
            .map_err(with_log)?;
        let (ok, _, err) = cli(&self.config, &["enable", zone]);
        if !ok {
            return Err(format!("enable {zone} refused: {err}"));
        }
        wait_state(&self.config, zone, "awaiting_ds", within)
            .await
            .map_err(|e| format!("{}\n{}", with_log(e), self.logs()))?;
        let ds = self.pdns_ds(zone)?;
        let told = status(&self.config, zone)["ds_to_enter"]
            .as_str()
            .unwrap_or_default()
            .to_ascii_uppercase();
        if !told.contains(&ds.to_ascii_uppercase()) {
            return Err(format!("told {told}, PowerDNS's {ds}"));
        }
        self.publish_ds(zone, Tld::Both, &ds)?;
        wait_state(&self.config, zone, "active", within)
            .await
            .map_err(with_log)?;
        let (rcode, ad) = self.resolve_fresh(zone).await?;
        if (rcode.as_str(), ad) != ("No Error", true) {
            return Err(format!("{zone} active but Unbound says {rcode}, AD {ad}"));
        }
        Ok(ds)
    }
}

/// `dnssec-warden run`, stopped by PID (SIGKILL) when dropped.
pub struct Daemon {
    proc: Proc,
    log: PathBuf,
}

impl Daemon {
    pub fn start(config: &Path, log: &Path) -> Result<Self> {
        Self::start_with_env(config, log, &[])
    }

    /// [`Daemon::start`] with these environment variables (the test hooks').
    pub fn start_with_env(config: &Path, log: &Path, env: &[(&str, String)]) -> Result<Self> {
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
                .envs(env.iter().map(|(k, v)| (k, v)))
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

/// Asks Unbound for `www.<zone> A` every 300 ms (no flush: what a user's resolver would
/// see) until finished; a SERVFAIL is asked again with checking disabled, and counts as a
/// validation failure only if that one answers (the data is there, only validation
/// failed), not when Unbound could reach no server on a loaded machine.
pub struct Probe {
    stop: Arc<std::sync::atomic::AtomicBool>,
    bogus: Arc<std::sync::atomic::AtomicUsize>,
    counts: Arc<ProbeCounts>,
    task: tokio::task::JoinHandle<Vec<String>>,
}

/// Every answer a [`Probe`] got, by kind.
#[derive(Debug, Default)]
struct ProbeCounts {
    answers: std::sync::atomic::AtomicUsize,
    /// NOERROR with AD: validated.
    secure: std::sync::atomic::AtomicUsize,
    /// NOERROR without AD: the resolver took the zone for unsigned.
    insecure: std::sync::atomic::AtomicUsize,
    /// SERVFAIL, whatever the cause.
    servfail: std::sync::atomic::AtomicUsize,
}

/// What a [`Probe`] saw from start to finish ([`Probe::report`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// Answers (and failures to get one) in all.
    pub answers: usize,
    /// NOERROR with the AD bit: SECURE.
    pub secure: usize,
    /// NOERROR without the AD bit: INSECURE.
    pub insecure: usize,
    /// SERVFAIL, whatever the cause.
    pub servfail: usize,
    /// SERVFAILs whose query with checking disabled answered: validation failures.
    pub bogus: usize,
    /// The answers in order, runs of the same folded (`rcode [AD] from TIME, N times`).
    pub runs: Vec<String>,
}

impl Probe {
    pub fn start(w: &RealWorld, zone: &str) -> Self {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let stop = Arc::new(AtomicBool::new(false));
        let bogus = Arc::new(AtomicUsize::new(0));
        let counts = Arc::new(ProbeCounts::default());
        let addr = w.unbound.addr;
        let name = format!("www.{zone}");
        let (s, b, c) = (stop.clone(), bogus.clone(), counts.clone());
        let task = tokio::spawn(async move {
            use dnssec_warden::dns::Transport;
            let transport = dnssec_warden::dns::NetTransport::new(Duration::from_secs(2));
            let Some(qname) = dnssec_warden::dns::wire::parse_name(&name) else {
                return vec![format!("bad name {name}")];
            };
            // Runs of the same answer: (answer, first seen, how many times).
            let mut runs: Vec<(String, String, usize)> = Vec::new();
            // Bounded: at most ten minutes of probes.
            for _ in 0..2000 {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let q = dnssec_warden::dns::wire::build_query(
                    &qname,
                    hickory_proto::rr::RecordType::A,
                    true,
                );
                let mut rcode = match transport.exchange(addr, &q).await {
                    Ok(m) => {
                        let code = m.metadata.response_code;
                        if code == hickory_proto::op::ResponseCode::NoError {
                            if m.metadata.authentic_data {
                                c.secure.fetch_add(1, Ordering::SeqCst);
                            } else {
                                c.insecure.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        // AD named (the answers of a run share it): a run of
                        // `No Error AD` is SECURE, `No Error` INSECURE.
                        format!(
                            "{code}{}",
                            if m.metadata.authentic_data { " AD" } else { "" }
                        )
                    }
                    Err(e) => format!("error {e}"),
                };
                c.answers.fetch_add(1, Ordering::SeqCst);
                if rcode.contains("SERVFAIL") || rcode.contains("Server Failure") {
                    c.servfail.fetch_add(1, Ordering::SeqCst);
                    let mut cd = q.clone();
                    cd.metadata.checking_disabled = true;
                    let validation = matches!(
                        transport.exchange(addr, &cd).await,
                        Ok(m) if m.metadata.response_code == hickory_proto::op::ResponseCode::NoError
                    );
                    if validation {
                        b.fetch_add(1, Ordering::SeqCst);
                    }
                    rcode = format!(
                        "{rcode} ({})",
                        if validation {
                            "validation"
                        } else {
                            "unreachable"
                        }
                    );
                }
                match runs.last_mut() {
                    Some(run) if run.0 == rcode => run.2 += 1,
                    _ => runs.push((
                        rcode,
                        dnssec_warden::time::format::rfc3339_ms(std::time::SystemTime::now()),
                        1,
                    )),
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            runs.into_iter()
                .map(|(answer, from, n)| format!("{answer} from {from}, {n} times"))
                .collect()
        });
        Self {
            stop,
            bogus,
            counts,
            task,
        }
    }

    /// Stops the probe: every answer it got, by kind.
    pub async fn report(self) -> ProbeReport {
        use std::sync::atomic::Ordering;
        let counts = self.counts.clone();
        let (bogus, runs) = self.finish().await;
        ProbeReport {
            answers: counts.answers.load(Ordering::SeqCst),
            secure: counts.secure.load(Ordering::SeqCst),
            insecure: counts.insecure.load(Ordering::SeqCst),
            servfail: counts.servfail.load(Ordering::SeqCst),
            bogus,
            runs,
        }
    }

    /// Stops the probe: (validation SERVFAILs seen, the answers seen, repeats folded).
    pub async fn finish(self) -> (usize, Vec<String>) {
        use std::sync::atomic::Ordering;
        self.stop.store(true, Ordering::SeqCst);
        let seen = self
            .task
            .await
            .unwrap_or_else(|e| vec![format!("the probe task failed: {e}")]);
        (self.bogus.load(Ordering::SeqCst), seen)
    }
}
