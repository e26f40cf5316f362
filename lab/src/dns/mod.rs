//! A signed DNS hierarchy on loopback for tests and the demo.
//!
//! ```text
//!  .               a.root-servers.test.  127.0.53.1        signed, the lab trust anchor
//!  test.           a.nic.test.           127.0.53.2        signed; two independent servers,
//!                  b.nic.test.           127.0.53.3        each with its own DS per child
//!  provider.test.  ns1.provider.test.    127.0.53.4        the "managed DNS provider":
//!  <child>.test.   ns2.provider.test.    127.0.53.5        hosts every child zone
//!  <moving>.test.  ns1.old.test.         127.0.53.6        the "old provider": its own copy
//!                  ns2.old.test.         127.0.53.7        of a zone moving in (own key, NS)
//!  <child>.test.   ns1.west.test.        127.0.53.8        two PowerDNS-like accounts
//!                  ns2.west.test.        127.0.53.9        (`pdns_sim`), "west" and "east",
//!                  ns1.east.test.        127.0.53.10       each serving its own copy of the
//!                  ns2.east.test.        127.0.53.11       zones it holds (own key, own NS)
//!  (registry)      registry.nic.test.    127.0.53.12       the registry's address: its
//!                                                          UPDATEs, its NOTIFY sockets
//! ```
//! Every server listens on the same port (chosen free at start, UDP and TCP), so the
//! observer reaches all of them with `dns.port`. A child zone's key comes from a
//! [`KeySource`] consulted per query: [`KeySource::provider`] makes the child zones follow
//! the provider simulator (DNSSEC switched on there: the DNSKEY is served here).
//!
//! Levers for tests: publish or remove a DS on one TLD server or both, change TTLs, sign
//! or unsign a child, publish the RFC 8078 delete CDS, fix the signature window, stop or
//! restart a server, make one answer SERVFAIL, REFUSED or nothing. A zone moving in
//! ([`LabDns::add_moving_child`]) starts delegated to the old provider's servers with the
//! old key's DS; [`LabDns::delegate`] re-delegates it at one TLD server or both.

pub mod resolver;
pub mod server;
pub mod zone;

#[cfg(test)]
mod pdns_signing_tests;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use resolver::{LabResolver, RESOLVER};
pub use zone::{
    ApexSource, Delegation, Fault, KeyFn, KeySource, Signing, SigningFn, Signs, World, ZoneData,
};

use crate::dnssec::{DigestType, Dnskey, Ds};
use crate::keys::LabKey;

pub const ROOT: Ipv4Addr = Ipv4Addr::new(127, 0, 53, 1);
pub const TLD_A: Ipv4Addr = Ipv4Addr::new(127, 0, 53, 2);
pub const TLD_B: Ipv4Addr = Ipv4Addr::new(127, 0, 53, 3);
pub const PROVIDER_1: Ipv4Addr = Ipv4Addr::new(127, 0, 53, 4);
pub const PROVIDER_2: Ipv4Addr = Ipv4Addr::new(127, 0, 53, 5);
/// The old provider's servers, serving the old copies of zones moving in.
pub const OLD_1: Ipv4Addr = Ipv4Addr::new(127, 0, 53, 6);
pub const OLD_2: Ipv4Addr = Ipv4Addr::new(127, 0, 53, 7);
pub const TLD: &str = "test.";
pub const PROVIDER_ZONE: &str = "provider.test.";
/// The provider's name servers in the lab: every child zone is delegated to them, and the
/// provider simulator must list them as the zone's apex NS (`SimOptions::name_servers`).
pub const NAME_SERVERS: [&str; 2] = ["ns1.provider.test.", "ns2.provider.test."];

/// The old provider's name servers: a zone moving in starts delegated to them.
pub const OLD_NAME_SERVERS: [&str; 2] = ["ns1.old.test.", "ns2.old.test."];

/// The PowerDNS-like accounts and their name servers (see [`LabDns::add_account_child`]).
pub const ACCOUNTS: [(&str, [(&str, Ipv4Addr); 2]); 2] = [
    (
        "west",
        [
            ("ns1.west.test.", Ipv4Addr::new(127, 0, 53, 8)),
            ("ns2.west.test.", Ipv4Addr::new(127, 0, 53, 9)),
        ],
    ),
    (
        "east",
        [
            ("ns1.east.test.", Ipv4Addr::new(127, 0, 53, 10)),
            ("ns2.east.test.", Ipv4Addr::new(127, 0, 53, 11)),
        ],
    ),
];

/// The registry's address and name in `test.` ([`crate::registry`]; no lab server).
pub const REGISTRY: Ipv4Addr = Ipv4Addr::new(127, 0, 53, 12);
pub const REGISTRY_NAME: &str = "registry.nic.test.";

/// Bound from the start (answering REFUSED while they host nothing); their addresses are
/// records of `test.` only once a zone moving in names them.
const OLD_HOSTS: &[(&str, Ipv4Addr)] = &[("ns1.old.test.", OLD_1), ("ns2.old.test.", OLD_2)];

const HOSTS: &[(&str, Ipv4Addr)] = &[
    ("a.root-servers.test.", ROOT),
    ("a.nic.test.", TLD_A),
    ("b.nic.test.", TLD_B),
    ("ns1.provider.test.", PROVIDER_1),
    ("ns2.provider.test.", PROVIDER_2),
];

/// Which TLD servers a DS or delegation lever applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TldServers {
    A,
    B,
    Both,
}

impl TldServers {
    fn addrs(self) -> Vec<IpAddr> {
        match self {
            Self::A => vec![TLD_A.into()],
            Self::B => vec![TLD_B.into()],
            Self::Both => vec![TLD_A.into(), TLD_B.into()],
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LabDnsError {
    #[error("no port is free on every lab address after {0} tries")]
    NoFreePort(u32),
    #[error("lab DNS: {0}")]
    Io(#[from] std::io::Error),
    #[error("lab DNS: {0}")]
    Key(#[from] crate::keys::KeyError),
    #[error("lab DNS: {0} is not a zone of the lab")]
    NoSuchZone(String),
    #[error("lab DNS: {0} must be a name below test.")]
    BadChild(String),
}

/// The running hierarchy. Dropping it stops every server and deletes the anchor file.
pub struct LabDns {
    world: Arc<Mutex<World>>,
    port: u16,
    running: Mutex<HashMap<IpAddr, server::Running>>,
    anchor_dir: tempfile::TempDir,
    root_key: LabKey,
    tld_key: LabKey,
}

impl std::fmt::Debug for LabDns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabDns").field("port", &self.port).finish()
    }
}

impl LabDns {
    /// Starts the root, the TLD and the provider servers; no child zone yet.
    pub async fn start() -> Result<Self, LabDnsError> {
        let root_key = LabKey::generate(257)?;
        let tld_key = LabKey::generate(257)?;
        let mut world = World::default();
        for (host, ip) in HOSTS.iter().chain(OLD_HOSTS) {
            world.hosts.insert(host.to_string(), *ip);
        }
        world.old_servers = [OLD_1, OLD_2].map(IpAddr::from).into();
        for (account, hosts) in ACCOUNTS {
            for (_, ip) in hosts {
                world.account_servers.insert(ip.into(), account.to_string());
            }
        }
        let mut root = ZoneData::new(
            ".",
            &["a.root-servers.test."],
            KeySource::Static(root_key.clone()),
        );
        root.ttl = 3600;
        root.delegations.insert(
            TLD.into(),
            Delegation {
                ns: vec!["a.nic.test.".into(), "b.nic.test.".into()],
                ns_ttl: 3600,
                ds: HashMap::from([(
                    IpAddr::from(ROOT),
                    vec![
                        tld_key
                            .dnskey()
                            .to_ds(TLD, DigestType::Sha256)
                            .map_err(|e| std::io::Error::other(e.to_string()))?,
                    ],
                )]),
                ds_ttl: 3600,
            },
        );
        root.add_a("a.root-servers.test.", ROOT);
        root.add_a("a.nic.test.", TLD_A);
        root.add_a("b.nic.test.", TLD_B);
        let mut tld = ZoneData::new(
            TLD,
            &["a.nic.test.", "b.nic.test."],
            KeySource::Static(tld_key.clone()),
        );
        for (host, ip) in HOSTS {
            tld.add_a(host, *ip);
        }
        tld.delegations.insert(
            PROVIDER_ZONE.into(),
            Delegation {
                ns: vec!["ns1.provider.test.".into(), "ns2.provider.test.".into()],
                ns_ttl: 300,
                ds: HashMap::new(),
                ds_ttl: 300,
            },
        );
        let mut provider = ZoneData::new(
            PROVIDER_ZONE,
            &["ns1.provider.test.", "ns2.provider.test."],
            KeySource::Unsigned,
        );
        provider.add_a("ns1.provider.test.", PROVIDER_1);
        provider.add_a("ns2.provider.test.", PROVIDER_2);
        world.zones.insert(".".into(), root);
        world.zones.insert(TLD.into(), tld);
        world.zones.insert(PROVIDER_ZONE.into(), provider);
        world.hosting.insert(ROOT.into(), [".".into()].into());
        world.hosting.insert(TLD_A.into(), [TLD.into()].into());
        world.hosting.insert(TLD_B.into(), [TLD.into()].into());
        world
            .hosting
            .insert(PROVIDER_1.into(), [PROVIDER_ZONE.into()].into());
        world
            .hosting
            .insert(PROVIDER_2.into(), [PROVIDER_ZONE.into()].into());

        let anchor_dir = tempfile::tempdir()?;
        let root_ds = root_key
            .dnskey()
            .to_ds(".", DigestType::Sha256)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        std::fs::write(
            anchor_dir.path().join("lab-root.ds"),
            format!("; the lab root's key\n. 3600 IN DS {root_ds}\n"),
        )?;

        let world = Arc::new(Mutex::new(world));
        let (port, running) = bind_all(&world).await?;
        Ok(Self {
            world,
            port,
            running: Mutex::new(running),
            anchor_dir,
            root_key,
            tld_key,
        })
    }

    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn root_addr(&self) -> SocketAddr {
        SocketAddr::new(ROOT.into(), self.port)
    }

    pub fn tld_addrs(&self) -> [SocketAddr; 2] {
        [
            SocketAddr::new(TLD_A.into(), self.port),
            SocketAddr::new(TLD_B.into(), self.port),
        ]
    }

    pub fn provider_addrs(&self) -> [SocketAddr; 2] {
        [
            SocketAddr::new(PROVIDER_1.into(), self.port),
            SocketAddr::new(PROVIDER_2.into(), self.port),
        ]
    }

    /// The old provider's servers (see [`LabDns::add_moving_child`]).
    pub fn old_addrs(&self) -> [SocketAddr; 2] {
        [
            SocketAddr::new(OLD_1.into(), self.port),
            SocketAddr::new(OLD_2.into(), self.port),
        ]
    }

    /// The servers of the account `account` ([`ACCOUNTS`]); none for another name.
    pub fn account_addrs(&self, account: &str) -> Vec<SocketAddr> {
        ACCOUNTS
            .iter()
            .filter(|(a, _)| *a == account)
            .flat_map(|(_, hosts)| hosts.iter())
            .map(|(_, ip)| SocketAddr::new((*ip).into(), self.port))
            .collect()
    }

    /// The lab root's DS, in a file in zone-file form.
    pub fn trust_anchor_path(&self) -> PathBuf {
        self.anchor_dir.path().join("lab-root.ds")
    }

    pub fn root_key(&self) -> &LabKey {
        &self.root_key
    }

    pub fn tld_key(&self) -> &LabKey {
        &self.tld_key
    }

    /// The `[dns]` section of a config file for the same settings.
    pub fn config_section(&self) -> String {
        format!(
            "[dns]\nroot_hints = [\"{ROOT}\"]\nport = {}\ntrust_anchor_file = \"{}\"\nvalidating_resolvers = []\nquery_timeout = \"400ms\"\nquery_attempts = 2\n",
            self.port,
            self.trust_anchor_path().display()
        )
    }

    /// Adds the child zone `zone` (below `test.`), served by the provider's two servers and
    /// delegated from both TLD servers without a DS.
    pub fn add_child(&self, zone: &str, key: KeySource) -> Result<(), LabDnsError> {
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::BadChild(zone.into()))?;
        if !crate::wire::is_subdomain(&name, TLD) || name == TLD || name == PROVIDER_ZONE {
            return Err(LabDnsError::BadChild(zone.into()));
        }
        let mut world = self.world();
        let mut data = ZoneData::new(&name, &NAME_SERVERS, key);
        data.add_a(&format!("www.{name}"), Ipv4Addr::new(192, 0, 2, 1));
        world.zones.insert(name.clone(), data);
        for ip in [PROVIDER_1, PROVIDER_2] {
            let hosted = world.hosting.entry(ip.into()).or_default();
            if !hosted.contains(&name) {
                hosted.insert(name.clone());
            }
        }
        if let Some(tld) = world.zones.get_mut(TLD) {
            tld.delegation_ns.remove(&name);
            tld.delegations.insert(
                name,
                Delegation {
                    ns: NAME_SERVERS.map(String::from).to_vec(),
                    ns_ttl: 300,
                    ds: HashMap::new(),
                    ds_ttl: 3600,
                },
            );
        }
        Ok(())
    }

    /// Adds `zone` as a zone moving in: the provider hosts it as [`LabDns::add_child`]
    /// does (signed by `key`, e.g. [`KeySource::provider`]), while the old provider's
    /// servers ([`OLD_NAME_SERVERS`]) serve their own copy, signed with `old_key`, whose
    /// apex NS names them. Both TLD servers delegate it to the old servers and publish
    /// the old key's DS. The old copy's TTLs are the lab defaults (see
    /// [`LabDns::set_old_zone_ttl`], [`LabDns::set_old_dnskey_ttl`]).
    pub fn add_moving_child(
        &self,
        zone: &str,
        old_key: &LabKey,
        key: KeySource,
    ) -> Result<(), LabDnsError> {
        self.add_child(zone, key)?;
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::BadChild(zone.into()))?;
        let ds = old_key
            .dnskey()
            .to_ds(&name, DigestType::Sha256)
            .map_err(|_| LabDnsError::BadChild(zone.into()))?;
        let mut world = self.world();
        let mut old = ZoneData::new(&name, &OLD_NAME_SERVERS, KeySource::Static(old_key.clone()));
        old.add_a(&format!("www.{name}"), Ipv4Addr::new(192, 0, 2, 1));
        world.old_zones.insert(name.clone(), old);
        let tld = world
            .zones
            .get_mut(TLD)
            .ok_or_else(|| LabDnsError::NoSuchZone(TLD.into()))?;
        for (host, ip) in OLD_HOSTS {
            let key = (host.to_string(), hickory_proto::rr::RecordType::A);
            if !tld.records.contains_key(&key) {
                tld.add_a(host, *ip);
            }
        }
        tld.delegation_ns.remove(&name);
        let delegation = tld
            .delegations
            .get_mut(&name)
            .ok_or(LabDnsError::NoSuchZone(name))?;
        delegation.ns = OLD_NAME_SERVERS.map(String::from).to_vec();
        for ip in TldServers::Both.addrs() {
            delegation.ds.insert(ip, vec![ds.clone()]);
        }
        Ok(())
    }

    /// Adds `zone` (below `test.`) at the PowerDNS-like account `account` ([`ACCOUNTS`]):
    /// its servers serve their own copy, whose apex NS names them, signed by `key`, with
    /// what `apex` publishes besides (stored DNSKEYs, CDS/CDNSKEY). Where `test.` has no
    /// delegation for it yet, both TLD servers delegate it to the account without a DS;
    /// a delegation already there (the zone held by another account) is left as it is.
    pub fn add_account_child(
        &self,
        account: &str,
        zone: &str,
        key: KeySource,
        apex: ApexSource,
    ) -> Result<(), LabDnsError> {
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::BadChild(zone.into()))?;
        if !crate::wire::is_subdomain(&name, TLD) || name == TLD || name == PROVIDER_ZONE {
            return Err(LabDnsError::BadChild(zone.into()));
        }
        let Some((_, hosts)) = ACCOUNTS.iter().find(|(a, _)| *a == account) else {
            return Err(LabDnsError::NoSuchZone(format!("account {account}")));
        };
        let ns: Vec<&str> = hosts.iter().map(|(h, _)| *h).collect();
        let mut data = ZoneData::new(&name, &ns, key);
        data.add_a(&format!("www.{name}"), Ipv4Addr::new(192, 0, 2, 1));
        data.apex = Some(apex);
        data.set_soa_minimum(data.dnskey_ttl);
        let mut world = self.world();
        world
            .account_zones
            .entry(account.to_string())
            .or_default()
            .insert(name.clone(), data);
        let tld = world
            .zones
            .get_mut(TLD)
            .ok_or_else(|| LabDnsError::NoSuchZone(TLD.into()))?;
        for (host, ip) in hosts {
            let key = (host.to_string(), hickory_proto::rr::RecordType::A);
            if !tld.records.contains_key(&key) {
                tld.add_a(host, *ip);
            }
        }
        tld.delegations.entry(name).or_insert_with(|| Delegation {
            ns: ns.iter().map(|h| h.to_string()).collect(),
            ns_ttl: 300,
            ds: HashMap::new(),
            ds_ttl: 3600,
        });
        Ok(())
    }

    /// Removes the account's copy of `zone` (the zone deleted there): its servers refuse
    /// it from now on. The delegation is left as the registrar left it.
    pub fn remove_account_child(&self, account: &str, zone: &str) -> Result<(), LabDnsError> {
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::NoSuchZone(zone.into()))?;
        let mut world = self.world();
        world
            .account_zones
            .get_mut(account)
            .and_then(|zones| zones.remove(&name))
            .map(drop)
            .ok_or(LabDnsError::NoSuchZone(name))
    }

    fn with_account_zone(
        &self,
        account: &str,
        zone: &str,
        f: impl FnOnce(&mut ZoneData),
    ) -> Result<(), LabDnsError> {
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::NoSuchZone(zone.into()))?;
        let mut world = self.world();
        let data = world
            .account_zones
            .get_mut(account)
            .and_then(|zones| zones.get_mut(&name))
            .ok_or(LabDnsError::NoSuchZone(name))?;
        f(data);
        Ok(())
    }

    /// TTL of an account's copy's own records (SOA, apex NS, A).
    pub fn set_account_zone_ttl(
        &self,
        account: &str,
        zone: &str,
        ttl: u32,
    ) -> Result<(), LabDnsError> {
        self.with_account_zone(account, zone, |z| z.ttl = ttl)
    }

    /// DNSKEY TTL of an account's copy, which is its SOA minimum too (PowerDNS serves its
    /// keys, CDS and CDNSKEY at the SOA minimum).
    pub fn set_account_dnskey_ttl(
        &self,
        account: &str,
        zone: &str,
        ttl: u32,
    ) -> Result<(), LabDnsError> {
        self.with_account_zone(account, zone, |z| {
            z.dnskey_ttl = ttl;
            z.set_soa_minimum(ttl);
        })
    }

    /// Lets the TLD servers take RFC 2136 UPDATEs of their delegations' DS from `source`
    /// (a registry's address, [`REGISTRY`]).
    pub fn allow_updates_from(&self, source: IpAddr) {
        self.world().update_from.insert(source);
    }

    /// Publishes in `test.` the DSYNC record (RFC 9859) of the child `zone`,
    /// `<label>._dsync.test. DSYNC CDS 1 <port> <target>`: NOTIFY its CDS to `target`
    /// (given the address `ip` in `test.`) at `port`. (Per child: the lab synthesises no
    /// wildcard.)
    pub fn publish_dsync(
        &self,
        zone: &str,
        target: &str,
        ip: Ipv4Addr,
        port: u16,
    ) -> Result<(), LabDnsError> {
        use hickory_proto::rr::rdata::NULL;
        use hickory_proto::rr::{RData, RecordType};
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::BadChild(zone.into()))?;
        let target =
            crate::dnssec::fqdn(target).map_err(|_| LabDnsError::BadChild(target.into()))?;
        let Some(label) = name
            .strip_suffix(&format!(".{TLD}"))
            .filter(|l| !l.contains('.'))
        else {
            return Err(LabDnsError::BadChild(zone.into()));
        };
        let mut rdata = crate::registry::msg::TYPE_CDS.to_be_bytes().to_vec();
        rdata.push(crate::registry::DSYNC_SCHEME_NOTIFY);
        rdata.extend_from_slice(&port.to_be_bytes());
        rdata.extend_from_slice(
            &crate::dnssec::name_to_wire(&target)
                .map_err(|_| LabDnsError::BadChild(target.clone()))?,
        );
        let mut world = self.world();
        let tld = world
            .zones
            .get_mut(TLD)
            .ok_or_else(|| LabDnsError::NoSuchZone(TLD.into()))?;
        if !tld.records.contains_key(&(target.clone(), RecordType::A)) {
            tld.add_a(&target, ip);
        }
        let code = RecordType::Unknown(crate::registry::TYPE_DSYNC);
        tld.records.insert(
            (format!("{label}._dsync.{TLD}"), code),
            vec![RData::Unknown {
                code,
                rdata: NULL::with(rdata),
            }],
        );
        Ok(())
    }

    /// Delegates `zone` to the name servers `ns` on the given TLD servers (what a
    /// registrar does on an NS change; one server first is a partial re-delegation).
    /// The DS set is left as it is.
    pub fn delegate(&self, zone: &str, on: TldServers, ns: &[&str]) -> Result<(), LabDnsError> {
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::NoSuchZone(zone.into()))?;
        let mut set = Vec::with_capacity(ns.len());
        for host in ns {
            set.push(crate::dnssec::fqdn(host).map_err(|_| LabDnsError::BadChild((*host).into()))?);
        }
        let mut world = self.world();
        let tld = world
            .zones
            .get_mut(TLD)
            .ok_or_else(|| LabDnsError::NoSuchZone(TLD.into()))?;
        if !tld.delegations.contains_key(&name) {
            return Err(LabDnsError::NoSuchZone(name));
        }
        let per_server = tld.delegation_ns.entry(name).or_default();
        for ip in on.addrs() {
            per_server.insert(ip, set.clone());
        }
        Ok(())
    }

    /// The NS set each TLD server delegates `zone` to (empty if it is no child).
    pub fn delegation(&self, zone: &str) -> Vec<(IpAddr, Vec<String>)> {
        let Ok(name) = crate::dnssec::fqdn(zone) else {
            return Vec::new();
        };
        let world = self.world();
        let Some(tld) = world.zones.get(TLD) else {
            return Vec::new();
        };
        let Some(d) = tld.delegations.get(&name) else {
            return Vec::new();
        };
        [TLD_A, TLD_B]
            .iter()
            .map(|ip| {
                let ip = IpAddr::from(*ip);
                (ip, tld.ns_at(&name, d, ip).to_vec())
            })
            .collect()
    }

    fn with_old_zone(&self, zone: &str, f: impl FnOnce(&mut ZoneData)) -> Result<(), LabDnsError> {
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::NoSuchZone(zone.into()))?;
        let mut world = self.world();
        let data = world
            .old_zones
            .get_mut(&name)
            .ok_or(LabDnsError::NoSuchZone(name))?;
        f(data);
        Ok(())
    }

    /// TTL of the old copy's own records (SOA, the apex NS, A) of a zone moving in.
    pub fn set_old_zone_ttl(&self, zone: &str, ttl: u32) -> Result<(), LabDnsError> {
        self.with_old_zone(zone, |z| z.ttl = ttl)
    }

    /// DNSKEY TTL of the old copy of a zone moving in.
    pub fn set_old_dnskey_ttl(&self, zone: &str, ttl: u32) -> Result<(), LabDnsError> {
        self.with_old_zone(zone, |z| z.dnskey_ttl = ttl)
    }

    /// Signs the old copy with `key` from now on (or unsigns it).
    pub fn set_old_key(&self, zone: &str, key: KeySource) -> Result<(), LabDnsError> {
        self.with_old_zone(zone, |z| z.key = key)
    }

    fn with_delegation(
        &self,
        zone: &str,
        f: impl FnOnce(&mut Delegation),
    ) -> Result<(), LabDnsError> {
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::NoSuchZone(zone.into()))?;
        let mut world = self.world();
        let delegation = world
            .zones
            .get_mut(TLD)
            .and_then(|t| t.delegations.get_mut(&name))
            .ok_or(LabDnsError::NoSuchZone(name))?;
        f(delegation);
        Ok(())
    }

    fn with_zone(&self, zone: &str, f: impl FnOnce(&mut ZoneData)) -> Result<(), LabDnsError> {
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::NoSuchZone(zone.into()))?;
        let mut world = self.world();
        let data = world
            .zones
            .get_mut(&name)
            .ok_or(LabDnsError::NoSuchZone(name))?;
        f(data);
        Ok(())
    }

    /// Replaces the DS set of `zone` on the given TLD servers (what a registrar does).
    pub fn set_ds(&self, zone: &str, on: TldServers, ds: Vec<Ds>) -> Result<(), LabDnsError> {
        self.with_delegation(zone, |d| {
            for ip in on.addrs() {
                d.ds.insert(ip, ds.clone());
            }
        })
    }

    /// Publishes the SHA-256 DS of `key` for `zone` on the given TLD servers.
    pub fn publish_ds(&self, zone: &str, on: TldServers, key: &Dnskey) -> Result<(), LabDnsError> {
        let name = crate::dnssec::fqdn(zone).map_err(|_| LabDnsError::NoSuchZone(zone.into()))?;
        let ds = key
            .to_ds(&name, DigestType::Sha256)
            .map_err(|_| LabDnsError::NoSuchZone(zone.into()))?;
        self.set_ds(&name, on, vec![ds])
    }

    pub fn remove_ds(&self, zone: &str, on: TldServers) -> Result<(), LabDnsError> {
        self.with_delegation(zone, |d| {
            for ip in on.addrs() {
                d.ds.remove(&ip);
            }
        })
    }

    /// The DS set `zone` has on each TLD server.
    pub fn ds(&self, zone: &str) -> Vec<(IpAddr, Vec<Ds>)> {
        let world = self.world();
        let Some(d) = world.zones.get(TLD).and_then(|t| t.delegations.get(zone)) else {
            return Vec::new();
        };
        [TLD_A, TLD_B]
            .iter()
            .map(|ip| {
                (
                    IpAddr::from(*ip),
                    d.ds.get(&IpAddr::from(*ip)).cloned().unwrap_or_default(),
                )
            })
            .collect()
    }

    pub fn set_ds_ttl(&self, zone: &str, ttl: u32) -> Result<(), LabDnsError> {
        self.with_delegation(zone, |d| d.ds_ttl = ttl)
    }

    pub fn set_ns_ttl(&self, zone: &str, ttl: u32) -> Result<(), LabDnsError> {
        self.with_delegation(zone, |d| d.ns_ttl = ttl)
    }

    /// TTL of the zone's own records (SOA, NS, A).
    pub fn set_zone_ttl(&self, zone: &str, ttl: u32) -> Result<(), LabDnsError> {
        self.with_zone(zone, |z| z.ttl = ttl)
    }

    pub fn set_dnskey_ttl(&self, zone: &str, ttl: u32) -> Result<(), LabDnsError> {
        self.with_zone(zone, |z| z.dnskey_ttl = ttl)
    }

    /// Signs the zone with `key` from now on, or unsigns it with [`KeySource::Unsigned`].
    pub fn set_child_key(&self, zone: &str, key: KeySource) -> Result<(), LabDnsError> {
        self.with_zone(zone, |z| z.key = key)
    }

    /// Publishes (or withdraws) the RFC 8078 "delete DS" CDS and CDNSKEY.
    pub fn set_cds_delete(&self, zone: &str, on: bool) -> Result<(), LabDnsError> {
        self.with_zone(zone, |z| z.cds_delete = on)
    }

    /// Makes `server` publish `cds` as the zone's CDS (none: what the zone publishes
    /// everywhere).
    pub fn set_cds_at(&self, zone: &str, server: IpAddr, cds: Vec<Ds>) -> Result<(), LabDnsError> {
        self.with_zone(zone, |z| {
            z.cds_at.insert(server, cds);
        })
    }

    /// Fixes the RRSIG validity window (Unix seconds), or restores the default with `None`.
    pub fn set_signature_window(
        &self,
        zone: &str,
        window: Option<(u32, u32)>,
    ) -> Result<(), LabDnsError> {
        self.with_zone(zone, |z| z.signature_window = window)
    }

    /// Makes `server` answer SERVFAIL, REFUSED or nothing; `None` heals it.
    pub fn set_fault(&self, server: IpAddr, fault: Option<Fault>) {
        let mut world = self.world();
        match fault {
            Some(f) => world.faults.insert(server, f),
            None => world.faults.remove(&server),
        };
    }

    /// Closes `server`'s sockets: queries to it are refused by the kernel (ICMP).
    pub fn stop_server(&self, server: IpAddr) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = running.remove(&server) {
            r.stop();
        }
    }

    /// Starts a stopped server again on the lab port.
    pub async fn restart_server(&self, server: IpAddr) -> Result<(), LabDnsError> {
        let addr = SocketAddr::new(server, self.port);
        let mut last = None;
        // The port was just freed; retry briefly in case the kernel lags.
        for _ in 0..20 {
            match server::start(addr, self.world.clone()).await {
                Ok(r) => {
                    self.running
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(server, r);
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        Err(last.map_or(LabDnsError::NoFreePort(20), LabDnsError::Io))
    }

    /// Every lab zone and the addresses of the servers hosting it; a zone held by a
    /// PowerDNS-like account only, at the servers `test.` delegates it to.
    pub fn zone_servers(&self) -> Vec<(String, Vec<IpAddr>)> {
        let world = self.world();
        let mut out: Vec<(String, Vec<IpAddr>)> = world
            .zones
            .keys()
            .map(|zone| {
                let mut addrs: Vec<IpAddr> = world
                    .hosting
                    .iter()
                    .filter(|(_, zones)| zones.contains(zone))
                    .map(|(ip, _)| *ip)
                    .collect();
                addrs.sort();
                (zone.clone(), addrs)
            })
            .collect();
        let delegations = world.zones.get(TLD).map(|tld| &tld.delegations);
        let mut held: Vec<&String> = world
            .account_zones
            .values()
            .flat_map(|z| z.keys())
            .collect();
        held.sort();
        held.dedup();
        for zone in held {
            if world.zones.contains_key(zone) {
                continue;
            }
            let mut addrs: Vec<IpAddr> = delegations
                .and_then(|d| d.get(zone))
                .map(|d| {
                    d.ns.iter()
                        .filter_map(|host| {
                            ACCOUNTS
                                .iter()
                                .flat_map(|(_, hosts)| hosts)
                                .chain(HOSTS)
                                .chain(OLD_HOSTS)
                                .find(|(h, _)| h == host)
                                .map(|(_, ip)| IpAddr::from(*ip))
                        })
                        .collect()
                })
                .unwrap_or_default();
            addrs.sort();
            addrs.dedup();
            out.push((zone.clone(), addrs));
        }
        out
    }

    /// Where the anchor file lives, for tests that write their own files beside it.
    pub fn dir(&self) -> &Path {
        self.anchor_dir.path()
    }
}

/// A port free on every lab address, UDP and TCP, and the servers bound to it.
async fn bind_all(
    world: &Arc<Mutex<World>>,
) -> Result<(u16, HashMap<IpAddr, server::Running>), LabDnsError> {
    const TRIES: u32 = 50;
    for _ in 0..TRIES {
        // Let the kernel pick a port on the first address, then claim it on the others.
        let probe = std::net::UdpSocket::bind(SocketAddr::new(ROOT.into(), 0))?;
        let port = probe.local_addr()?.port();
        drop(probe);
        let mut running = HashMap::new();
        let mut ok = true;
        let accounts = ACCOUNTS.iter().flat_map(|(_, hosts)| hosts.iter());
        for (_, ip) in HOSTS.iter().chain(OLD_HOSTS).chain(accounts) {
            match server::start(SocketAddr::new((*ip).into(), port), world.clone()).await {
                Ok(r) => {
                    running.insert(IpAddr::from(*ip), r);
                }
                Err(_) => {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            return Ok((port, running));
        }
    }
    Err(LabDnsError::NoFreePort(TRIES))
}

#[cfg(test)]
mod tests {
    use hickory_proto::dnssec::PublicKey;
    use hickory_proto::dnssec::rdata::DNSSECRData;
    use hickory_proto::op::Message;
    use hickory_proto::rr::rdata::{A, NS};
    use hickory_proto::rr::{RData, Record, RecordType};

    use super::*;

    const ZONE: &str = "moving.test.";

    fn ask(lab: &LabDns, server: Ipv4Addr, name: &str, rtype: RecordType) -> Message {
        let qname = crate::wire::parse_name(name).expect("a name");
        let query = crate::wire::build_query(&qname, rtype, false);
        lab.world()
            .respond(server.into(), &query)
            .expect("the lab answers")
    }

    fn ns_of(records: &[Record]) -> Vec<String> {
        let mut names: Vec<String> = records
            .iter()
            .filter_map(|r| match &r.data {
                RData::NS(NS(n)) => Some(crate::wire::name_text(n)),
                _ => None,
            })
            .collect();
        names.sort();
        names
    }

    fn glue(message: &Message) -> Vec<(String, Ipv4Addr)> {
        let mut glue: Vec<(String, Ipv4Addr)> = message
            .additionals
            .iter()
            .filter_map(|r| match &r.data {
                RData::A(A(ip)) => Some((crate::wire::name_text(&r.name), *ip)),
                _ => None,
            })
            .collect();
        glue.sort();
        glue
    }

    fn keys_of(message: &Message) -> Vec<Vec<u8>> {
        message
            .answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::DNSSEC(DNSSECRData::DNSKEY(k)) => {
                    Some(k.public_key().public_bytes().to_vec())
                }
                _ => None,
            })
            .collect()
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn a_child_is_delegated_to_the_provider_at_both_tld_servers() {
        let lab = LabDns::start().await.expect("the lab starts");
        lab.add_child(ZONE, KeySource::Unsigned).expect("a child");
        for (_, ns) in lab.delegation(ZONE) {
            assert_eq!(ns, strings(&NAME_SERVERS));
        }
        for tld in [TLD_A, TLD_B] {
            let referral = ask(&lab, tld, ZONE, RecordType::NS);
            assert_eq!(ns_of(&referral.authorities), strings(&NAME_SERVERS));
        }
        // Nothing of the old provider's shows until a zone moves in.
        let refused = ask(&lab, OLD_1, ZONE, RecordType::SOA);
        assert_eq!(
            refused.metadata.response_code,
            hickory_proto::op::ResponseCode::Refused
        );
        let none = ask(&lab, TLD_A, "ns1.old.test.", RecordType::A);
        assert!(none.answers.is_empty(), "{none:?}");
    }

    #[tokio::test]
    async fn a_moving_child_starts_at_the_old_provider_with_its_ds() {
        let lab = LabDns::start().await.expect("the lab starts");
        let old_key = LabKey::generate(257).expect("a key");
        let new_key = LabKey::generate(257).expect("a key");
        lab.add_moving_child(ZONE, &old_key, KeySource::Static(new_key.clone()))
            .expect("a moving child");
        let old_ds = old_key
            .dnskey()
            .to_ds(ZONE, DigestType::Sha256)
            .expect("a DS");
        for (_, ds) in lab.ds(ZONE) {
            assert_eq!(ds, vec![old_ds.clone()]);
        }
        for tld in [TLD_A, TLD_B] {
            let referral = ask(&lab, tld, ZONE, RecordType::NS);
            assert!(!referral.metadata.authoritative);
            assert_eq!(ns_of(&referral.authorities), strings(&OLD_NAME_SERVERS));
            assert_eq!(
                glue(&referral),
                vec![
                    ("ns1.old.test.".to_string(), OLD_1),
                    ("ns2.old.test.".to_string(), OLD_2)
                ]
            );
            let ds = ask(&lab, tld, ZONE, RecordType::DS);
            assert!(ds.answers.iter().any(|r| r.record_type() == RecordType::DS));
            // The old servers' addresses are data of test. as well (glueless lookups).
            let a = ask(&lab, tld, "ns2.old.test.", RecordType::A);
            assert_eq!(glue_answers(&a), vec![OLD_2]);
        }
        for old in [OLD_1, OLD_2] {
            let dnskey = ask(&lab, old, ZONE, RecordType::DNSKEY);
            assert!(dnskey.metadata.authoritative);
            assert_eq!(keys_of(&dnskey), vec![old_key.dnskey().public_key]);
            assert!(
                dnskey
                    .answers
                    .iter()
                    .any(|r| r.record_type() == RecordType::RRSIG)
            );
            let ns = ask(&lab, old, ZONE, RecordType::NS);
            assert!(ns.metadata.authoritative);
            assert_eq!(ns_of(&ns.answers), strings(&OLD_NAME_SERVERS));
        }
        for provider in [PROVIDER_1, PROVIDER_2] {
            let dnskey = ask(&lab, provider, ZONE, RecordType::DNSKEY);
            assert_eq!(keys_of(&dnskey), vec![new_key.dnskey().public_key]);
            let ns = ask(&lab, provider, ZONE, RecordType::NS);
            assert_eq!(ns_of(&ns.answers), strings(&NAME_SERVERS));
        }
        // The old copy's TTLs are its own.
        lab.set_old_dnskey_ttl(ZONE, 2).expect("old copy");
        lab.set_old_zone_ttl(ZONE, 1).expect("old copy");
        let dnskey = ask(&lab, OLD_1, ZONE, RecordType::DNSKEY);
        assert!(dnskey.answers.iter().all(|r| r.ttl == 2), "{dnskey:?}");
        let ns = ask(&lab, OLD_2, ZONE, RecordType::NS);
        assert!(ns.answers.iter().all(|r| r.ttl == 1), "{ns:?}");
        let dnskey = ask(&lab, PROVIDER_1, ZONE, RecordType::DNSKEY);
        assert!(dnskey.answers.iter().all(|r| r.ttl == 300), "{dnskey:?}");
    }

    fn glue_answers(message: &Message) -> Vec<Ipv4Addr> {
        message
            .answers
            .iter()
            .filter_map(|r| match &r.data {
                RData::A(A(ip)) => Some(*ip),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn delegate_changes_the_ns_set_of_one_tld_server_at_a_time() {
        let lab = LabDns::start().await.expect("the lab starts");
        let old_key = LabKey::generate(257).expect("a key");
        lab.add_moving_child(ZONE, &old_key, KeySource::Unsigned)
            .expect("a moving child");
        lab.delegate(ZONE, TldServers::A, &NAME_SERVERS)
            .expect("re-delegated at A");
        assert_eq!(
            lab.delegation(ZONE),
            vec![
                (IpAddr::from(TLD_A), strings(&NAME_SERVERS)),
                (IpAddr::from(TLD_B), strings(&OLD_NAME_SERVERS)),
            ]
        );
        let at_a = ask(&lab, TLD_A, &format!("www.{ZONE}"), RecordType::A);
        assert_eq!(ns_of(&at_a.authorities), strings(&NAME_SERVERS));
        assert_eq!(
            glue(&at_a),
            vec![
                ("ns1.provider.test.".to_string(), PROVIDER_1),
                ("ns2.provider.test.".to_string(), PROVIDER_2)
            ]
        );
        let at_b = ask(&lab, TLD_B, &format!("www.{ZONE}"), RecordType::A);
        assert_eq!(ns_of(&at_b.authorities), strings(&OLD_NAME_SERVERS));
        // The DS stays as the registrar left it: on both servers.
        assert!(lab.ds(ZONE).iter().all(|(_, ds)| ds.len() == 1));

        lab.delegate(
            ZONE,
            TldServers::B,
            &["ns1.provider.test", "ns2.provider.test."],
        )
        .expect("re-delegated at B");
        for tld in [TLD_A, TLD_B] {
            let referral = ask(&lab, tld, ZONE, RecordType::NS);
            assert_eq!(ns_of(&referral.authorities), strings(&NAME_SERVERS));
        }
        // A mixed set at both, then back to the old provider.
        lab.delegate(
            ZONE,
            TldServers::Both,
            &["ns1.provider.test.", "ns1.old.test."],
        )
        .expect("mixed");
        let mixed = ask(&lab, TLD_B, ZONE, RecordType::NS);
        assert_eq!(
            ns_of(&mixed.authorities),
            strings(&["ns1.old.test.", "ns1.provider.test."])
        );
        assert!(matches!(
            lab.delegate("nowhere.test.", TldServers::A, &NAME_SERVERS),
            Err(LabDnsError::NoSuchZone(_))
        ));
    }

    #[tokio::test]
    async fn the_old_servers_answer_on_the_lab_port() {
        let lab = LabDns::start().await.expect("the lab starts");
        let old_key = LabKey::generate(257).expect("a key");
        lab.add_moving_child(ZONE, &old_key, KeySource::Unsigned)
            .expect("a moving child");
        let qname = crate::wire::parse_name(ZONE).expect("a name");
        let query = crate::wire::build_query(&qname, RecordType::DNSKEY, false)
            .to_vec()
            .expect("wire");
        for addr in lab.old_addrs() {
            let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
                .await
                .expect("a socket");
            socket.send_to(&query, addr).await.expect("sent");
            let mut buf = vec![0u8; 4096];
            let (len, _) = tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
                .await
                .expect("an answer in time")
                .expect("received");
            let answer = Message::from_vec(&buf[..len]).expect("a message");
            assert_eq!(keys_of(&answer), vec![old_key.dnskey().public_key]);
        }
    }

    fn ask_dnssec(lab: &LabDns, server: Ipv4Addr, name: &str, rtype: RecordType) -> Message {
        let qname = crate::wire::parse_name(name).expect("a name");
        let query = crate::wire::build_query(&qname, rtype, true);
        lab.world()
            .respond(server.into(), &query)
            .expect("the lab answers")
    }

    fn account_ip(account: &str, i: usize) -> Ipv4Addr {
        ACCOUNTS
            .iter()
            .find(|(a, _)| *a == account)
            .map(|(_, hosts)| hosts[i].1)
            .expect("an account")
    }

    #[tokio::test]
    async fn an_account_serves_its_own_copy_with_stored_keys_and_its_cds() {
        let lab = LabDns::start().await.expect("the lab starts");
        let own = LabKey::generate(257).expect("a key");
        let other = LabKey::generate(257).expect("a key");
        let stored = other.dnskey();
        let apex = ApexSource(Arc::new(move |_| crate::pdns_sim::Apex {
            stored_dnskeys: vec![stored.clone()],
            cds_digests: vec![DigestType::Sha256],
            cdnskey: true,
            delete: false,
        }));
        lab.add_account_child("west", ZONE, KeySource::Static(own.clone()), apex)
            .expect("a zone at west");
        // Delegated to west's servers, with their addresses in test.
        let referral = ask(&lab, TLD_A, ZONE, RecordType::NS);
        assert_eq!(
            ns_of(&referral.authorities),
            strings(&["ns1.west.test.", "ns2.west.test."])
        );
        let a = ask(&lab, TLD_B, "ns2.west.test.", RecordType::A);
        assert_eq!(glue_answers(&a), vec![account_ip("west", 1)]);
        for i in 0..2 {
            let server = account_ip("west", i);
            let dnskey = ask_dnssec(&lab, server, ZONE, RecordType::DNSKEY);
            let mut keys = keys_of(&dnskey);
            keys.sort();
            let mut want = vec![own.dnskey().public_key, other.dnskey().public_key];
            want.sort();
            assert_eq!(keys, want);
            // One signature over the set: the account's own key's.
            let tags: Vec<u16> = dnskey
                .answers
                .iter()
                .filter_map(|r| match &r.data {
                    RData::DNSSEC(DNSSECRData::RRSIG(sig)) => Some(sig.input().key_tag),
                    _ => None,
                })
                .collect();
            assert_eq!(tags, vec![own.dnskey().key_tag()]);
            let cds = ask(&lab, server, ZONE, RecordType::CDS);
            let ds = own.dnskey().to_ds(ZONE, DigestType::Sha256).expect("a DS");
            let served: Vec<u16> = cds
                .answers
                .iter()
                .filter_map(|r| match &r.data {
                    RData::DNSSEC(DNSSECRData::CDS(c)) => Some(c.key_tag()),
                    _ => None,
                })
                .collect();
            assert_eq!(served, vec![ds.key_tag]);
            let cdnskey = ask(&lab, server, ZONE, RecordType::CDNSKEY);
            let served = cdnskey
                .answers
                .iter()
                .filter(|r| r.record_type() == RecordType::CDNSKEY)
                .count();
            assert_eq!(served, 1, "{cdnskey:?}");
        }
        // The other account's servers do not hold it.
        let refused = ask(&lab, account_ip("east", 0), ZONE, RecordType::SOA);
        assert_eq!(
            refused.metadata.response_code,
            hickory_proto::op::ResponseCode::Refused
        );
        // A second account's copy leaves the delegation as it was; removing the first
        // makes its servers refuse the zone.
        lab.add_account_child(
            "east",
            ZONE,
            KeySource::Unsigned,
            ApexSource(Arc::new(|_| Default::default())),
        )
        .expect("a copy at east");
        let referral = ask(&lab, TLD_B, ZONE, RecordType::NS);
        assert_eq!(
            ns_of(&referral.authorities),
            strings(&["ns1.west.test.", "ns2.west.test."])
        );
        let east = ask(&lab, account_ip("east", 1), ZONE, RecordType::NS);
        assert_eq!(
            ns_of(&east.answers),
            strings(&["ns1.east.test.", "ns2.east.test."])
        );
        lab.remove_account_child("west", ZONE).expect("removed");
        let gone = ask(&lab, account_ip("west", 0), ZONE, RecordType::SOA);
        assert_eq!(
            gone.metadata.response_code,
            hickory_proto::op::ResponseCode::Refused
        );
    }

    #[tokio::test]
    async fn the_tld_servers_take_a_ds_update_from_the_registry_only() {
        use crate::registry::msg;
        let lab = LabDns::start().await.expect("the lab starts");
        lab.add_child(ZONE, KeySource::Unsigned).expect("a child");
        let key = LabKey::generate(257).expect("a key");
        let ds = key.dnskey().to_ds(ZONE, DigestType::Sha256).expect("a DS");
        let tld = crate::dnssec::name_to_wire(TLD).expect("wire");
        let child = crate::dnssec::name_to_wire(ZONE).expect("wire");
        let update = msg::update_ds(7, &tld, &child, 2, &[ds.rdata()]).expect("an UPDATE");
        let registry = IpAddr::from(REGISTRY);
        let rcode = |answer: Option<Vec<u8>>| {
            msg::parse(&answer.expect("an answer"))
                .expect("a message")
                .rcode()
        };
        // Not from the registry: refused, nothing changed.
        lab.allow_updates_from(registry);
        let stranger = IpAddr::from(Ipv4Addr::LOCALHOST);
        let answer = lab.world().update(TLD_A.into(), stranger, &update);
        assert_eq!(rcode(answer), msg::RCODE_REFUSED);
        assert!(lab.ds(ZONE).iter().all(|(_, d)| d.is_empty()));
        // A server that does not host test.: not authoritative.
        let answer = lab.world().update(PROVIDER_1.into(), registry, &update);
        assert_eq!(rcode(answer), msg::RCODE_NOTAUTH);
        // From the registry, at one server: that server's DS set only, at the TTL sent.
        let answer = lab.world().update(TLD_A.into(), registry, &update);
        assert_eq!(rcode(answer), msg::RCODE_NOERROR);
        assert_eq!(
            lab.ds(ZONE),
            vec![
                (IpAddr::from(TLD_A), vec![ds.clone()]),
                (IpAddr::from(TLD_B), vec![])
            ]
        );
        let served = ask(&lab, TLD_A, ZONE, RecordType::DS);
        assert!(served.answers.iter().all(|r| r.ttl == 2), "{served:?}");
        // A delete of the RRset with nothing added removes it.
        let delete = msg::update_ds(8, &tld, &child, 2, &[]).expect("an UPDATE");
        let answer = lab.world().update(TLD_A.into(), registry, &delete);
        assert_eq!(rcode(answer), msg::RCODE_NOERROR);
        assert!(lab.ds(ZONE).iter().all(|(_, d)| d.is_empty()));
    }

    #[tokio::test]
    async fn the_registry_publishes_an_accounts_cds_through_the_lab_tld() {
        use crate::registry::{Registry, RegistryConfig, What};
        let lab = LabDns::start().await.expect("the lab starts");
        let own = LabKey::generate(257).expect("a key");
        let apex = ApexSource(Arc::new(|_| crate::pdns_sim::Apex {
            cds_digests: vec![DigestType::Sha256],
            cdnskey: true,
            ..Default::default()
        }));
        lab.add_account_child("west", ZONE, KeySource::Static(own.clone()), apex)
            .expect("a zone at west");
        lab.allow_updates_from(REGISTRY.into());
        let mut config =
            RegistryConfig::new(TLD, lab.tld_addrs().to_vec(), REGISTRY.into(), lab.port());
        config.children = vec![ZONE.into()];
        config.bootstrap_period = Duration::ZERO;
        config.scan_interval = Duration::from_secs(3600);
        config.notify_port = Some(0);
        let registry = Registry::start(config).await.expect("the registry starts");
        let port = registry.notify_addr().expect("a NOTIFY socket").port();
        lab.publish_dsync(ZONE, REGISTRY_NAME, REGISTRY, port)
            .expect("a DSYNC record");
        let what = registry.scan(ZONE).await;
        assert!(matches!(what, What::Published(_)), "{what}");
        let ds = own.dnskey().to_ds(ZONE, DigestType::Sha256).expect("a DS");
        for (_, set) in lab.ds(ZONE) {
            assert_eq!(set, vec![ds.clone()]);
        }
        // The DSYNC record names the registry's NOTIFY socket.
        let label = ZONE.trim_end_matches(".test.");
        let dsync = ask(
            &lab,
            TLD_B,
            &format!("{label}._dsync.test."),
            RecordType::Unknown(crate::registry::TYPE_DSYNC),
        );
        let rdata = match dsync.answers.first().map(|r| &r.data) {
            Some(RData::Unknown { rdata, .. }) => rdata.anything.to_vec(),
            other => panic!("no DSYNC: {other:?}"),
        };
        let mut want = crate::registry::msg::TYPE_CDS.to_be_bytes().to_vec();
        want.push(crate::registry::DSYNC_SCHEME_NOTIFY);
        want.extend_from_slice(&port.to_be_bytes());
        want.extend_from_slice(&crate::dnssec::name_to_wire(REGISTRY_NAME).expect("wire"));
        assert_eq!(rdata, want);
    }
}
