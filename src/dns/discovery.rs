//! Parent discovery: where the zone cuts are, and who serves each side of them.
//!
//! Iterative from `dns.root_hints`, one label at a time (as QNAME minimisation does), so
//! that a server hosting both a parent and its child still shows where the cut is. Every
//! cut found is cached for its NS TTL and shared: 10,000 zones under one TLD share one
//! lookup of the TLD. Only delegations are cached, never the DS or DNSKEY answers the
//! verdicts are drawn from.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use crate::config::AddressFamilies;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, join_all};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{Name, RData, RecordType};
use tokio::time::Instant;

use super::query::{self, Querier};
use super::wire;

/// Longest a delegation is believed, whatever its TTL says.
const MAX_CACHE_TTL: Duration = Duration::from_secs(3600);
/// Entries kept before expired ones are swept.
const CACHE_SWEEP_AT: usize = 50_000;
/// How deep name server address lookups may nest (a name server whose name lies in a zone
/// whose name servers need a lookup, …). Breaks glueless loops.
const MAX_DEPTH: u8 = 4;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    #[error("{0} is not a valid domain name")]
    BadName(String),
    #[error("no root server answered the priming query: {0}")]
    NoRoot(String),
    #[error("no server of {zone} answered about {name}: {detail}")]
    NoAnswer {
        zone: String,
        name: String,
        detail: String,
    },
    #[error("{0} does not exist (NXDOMAIN from its parent)")]
    NxDomain(String),
    #[error("{name} is not delegated: it lies inside the zone {zone}")]
    NotACut { name: String, zone: String },
    #[error("name server lookups nest too deep at {0}")]
    TooDeep(String),
}

/// One name server of a zone, with the addresses learnt for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameServer {
    pub host: String,
    pub addrs: Vec<IpAddr>,
    /// Why no address could be learnt, when none could.
    pub problem: Option<String>,
}

/// A zone cut: the zone, the servers its parent delegates it to, and the cut above it.
#[derive(Debug)]
pub struct ZoneCut {
    pub zone: String,
    /// `zone` as a DNS name, for the queries about it.
    pub name: Name,
    pub servers: Vec<NameServer>,
    pub parent: Option<Arc<ZoneCut>>,
    expires: Instant,
}

impl ZoneCut {
    /// The cuts from the root down to this one.
    pub fn chain(self: &Arc<Self>) -> Vec<Arc<ZoneCut>> {
        let mut chain = vec![self.clone()];
        let mut at = self.parent.clone();
        // Bounded by the depth of the DNS tree (at most 127 labels).
        while let Some(cut) = at {
            at = cut.parent.clone();
            chain.push(cut);
            if chain.len() > 128 {
                break;
            }
        }
        chain.reverse();
        chain
    }

    /// Every (server name, address) pair.
    pub fn addresses(&self) -> Vec<(String, IpAddr)> {
        self.servers
            .iter()
            .flat_map(|s| s.addrs.iter().map(|a| (s.host.clone(), *a)))
            .collect()
    }
}

pub struct Discovery {
    querier: Arc<Querier>,
    port: u16,
    root_hints: Vec<IpAddr>,
    families: AddressFamilies,
    cache: Mutex<HashMap<String, Arc<ZoneCut>>>,
}

enum Probe {
    Cut(Arc<ZoneCut>),
    NotCut,
    NoSuchName,
}

impl Discovery {
    pub fn new(
        querier: Arc<Querier>,
        port: u16,
        root_hints: Vec<IpAddr>,
        families: AddressFamilies,
    ) -> Self {
        Self {
            querier,
            port,
            root_hints: root_hints
                .into_iter()
                .filter(|a| families.allows(a))
                .collect(),
            families,
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, zone: &str) -> Option<Arc<ZoneCut>> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(zone)
            .filter(|c| c.expires > Instant::now())
            .cloned()
    }

    fn remember(&self, cut: &Arc<ZoneCut>) {
        if cut.expires <= Instant::now() {
            return;
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= CACHE_SWEEP_AT {
            let now = Instant::now();
            cache.retain(|_, c| c.expires > now);
        }
        cache.insert(cut.zone.clone(), cut.clone());
    }

    /// Forgets every cached delegation (after the lab changed one, for instance).
    pub fn forget(&self) {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// The deepest zone cut at or above `name`.
    pub async fn locate(&self, name: &str) -> Result<Arc<ZoneCut>, DiscoveryError> {
        self.locate_at(name.to_string(), 0).await
    }

    /// The cut of `zone` itself, which must be delegated.
    pub async fn delegation(&self, zone: &str) -> Result<Arc<ZoneCut>, DiscoveryError> {
        // Most calls find the cut itself cached (only valid names are ever cached).
        if let Some(cut) = self.cached(zone) {
            return Ok(cut);
        }
        let cut = self.locate(zone).await?;
        if cut.zone != zone {
            return Err(DiscoveryError::NotACut {
                name: zone.to_string(),
                zone: cut.zone.clone(),
            });
        }
        Ok(cut)
    }

    fn locate_at(
        &self,
        name: String,
        depth: u8,
    ) -> BoxFuture<'_, Result<Arc<ZoneCut>, DiscoveryError>> {
        Box::pin(async move {
            if depth > MAX_DEPTH {
                return Err(DiscoveryError::TooDeep(name));
            }
            if wire::parse_name(&name).is_none() {
                return Err(DiscoveryError::BadName(name));
            }
            // Start from the deepest cut we still know.
            let mut cut = None;
            let mut at = name.clone();
            loop {
                if let Some(c) = self.cached(&at) {
                    cut = Some(c);
                    break;
                }
                if at == "." {
                    break;
                }
                at = wire::parent_name(&at);
            }
            let mut cut = match cut {
                Some(c) => c,
                None => self.prime(depth).await?,
            };
            for below in wire::names_below(&cut.zone, &name) {
                match self.probe(&cut, &below, depth).await? {
                    Probe::Cut(next) => {
                        self.remember(&next);
                        cut = next;
                    }
                    Probe::NotCut => {}
                    Probe::NoSuchName => return Err(DiscoveryError::NxDomain(below)),
                }
            }
            Ok(cut)
        })
    }

    /// The root's name servers, from the hints' own answer to `. NS`.
    async fn prime(&self, depth: u8) -> Result<Arc<ZoneCut>, DiscoveryError> {
        let mut problems = Vec::new();
        let root = Name::root();
        for hint in &self.root_hints {
            let server = SocketAddr::new(*hint, self.port);
            let message = match self.querier.ask(server, &root, RecordType::NS).await {
                Ok(m) => m,
                Err(e) => {
                    problems.push(format!("{hint}: {e}"));
                    continue;
                }
            };
            let hosts = ns_hosts(&message.answers, &root);
            if message.metadata.response_code != ResponseCode::NoError
                || !message.metadata.authoritative
                || hosts.is_empty()
            {
                problems.push(format!(
                    "{hint}: no authoritative root NS set ({})",
                    message.metadata.response_code
                ));
                continue;
            }
            let ttl = ns_ttl(&message.answers, &root);
            let servers = self
                .servers_for(&hosts, &message.additionals, ".", depth)
                .await;
            let cut = Arc::new(ZoneCut {
                zone: ".".into(),
                name: Name::root(),
                servers,
                parent: None,
                expires: expiry(ttl, None),
            });
            self.remember(&cut);
            return Ok(cut);
        }
        Err(DiscoveryError::NoRoot(if problems.is_empty() {
            "no root hints configured".into()
        } else {
            problems.join("; ")
        }))
    }

    /// Asks `cut`'s servers whether `name` (just below it) is a zone cut.
    async fn probe(
        &self,
        cut: &Arc<ZoneCut>,
        name: &str,
        depth: u8,
    ) -> Result<Probe, DiscoveryError> {
        let qname = wire::parse_name(name).ok_or_else(|| DiscoveryError::BadName(name.into()))?;
        let mut problems = Vec::new();
        for (host, addr) in cut.addresses() {
            let server = SocketAddr::new(addr, self.port);
            let message = match self.querier.ask(server, &qname, RecordType::NS).await {
                Ok(m) => m,
                Err(e) => {
                    problems.push(format!("{host} ({addr}): {e}"));
                    continue;
                }
            };
            let meta = &message.metadata;
            match meta.response_code {
                ResponseCode::NoError => {}
                ResponseCode::NXDomain if meta.authoritative => return Ok(Probe::NoSuchName),
                other => {
                    problems.push(format!("{host} ({addr}): {other}"));
                    continue;
                }
            }
            // Authoritative: the server holds `name`'s data, so either `name` is inside
            // `cut`'s zone (no NS there) or the server hosts the child too and answers with
            // its apex NS, whose glue it is authoritative for. Otherwise a referral, whose
            // glue is only believed within the zone that gave it.
            let (section, bailiwick) = if meta.authoritative {
                (&message.answers, name)
            } else {
                (&message.authorities, cut.zone.as_str())
            };
            let hosts = ns_hosts(section, &qname);
            if hosts.is_empty() {
                if meta.authoritative {
                    return Ok(Probe::NotCut);
                }
                problems.push(format!(
                    "{host} ({addr}): not authoritative and no referral (lame)"
                ));
                continue;
            }
            let ttl = ns_ttl(section, &qname);
            let servers = self
                .servers_for(&hosts, &message.additionals, bailiwick, depth)
                .await;
            return Ok(Probe::Cut(Arc::new(ZoneCut {
                zone: name.to_string(),
                name: qname.clone(),
                servers,
                parent: Some(cut.clone()),
                expires: expiry(ttl, Some(cut)),
            })));
        }
        Err(DiscoveryError::NoAnswer {
            zone: cut.zone.clone(),
            name: name.to_string(),
            detail: if problems.is_empty() {
                unaddressed(cut)
            } else {
                problems.join("; ")
            },
        })
    }

    /// Addresses for each host: glue from `additionals` within `bailiwick`, else looked up.
    async fn servers_for(
        &self,
        hosts: &[String],
        additionals: &[hickory_proto::rr::Record],
        bailiwick: &str,
        depth: u8,
    ) -> Vec<NameServer> {
        let lookups = hosts.iter().map(|host| async move {
            let mut addrs: Vec<IpAddr> = Vec::new();
            if wire::is_subdomain(host, bailiwick) {
                for r in additionals {
                    if wire::name_text(&r.name) != *host {
                        continue;
                    }
                    let ip = match &r.data {
                        RData::A(a) => IpAddr::V4(a.0),
                        RData::AAAA(a) => IpAddr::V6(a.0),
                        _ => continue,
                    };
                    if !addrs.contains(&ip) {
                        addrs.push(ip);
                    }
                }
            }
            if !addrs.is_empty() {
                return NameServer {
                    host: host.clone(),
                    addrs,
                    problem: None,
                };
            }
            match self.host_addresses(host, depth + 1).await {
                Ok(addrs) if !addrs.is_empty() => NameServer {
                    host: host.clone(),
                    addrs,
                    problem: None,
                },
                Ok(_) => NameServer {
                    host: host.clone(),
                    addrs: Vec::new(),
                    problem: Some("no A or AAAA record".into()),
                },
                Err(e) => NameServer {
                    host: host.clone(),
                    addrs: Vec::new(),
                    problem: Some(e.to_string()),
                },
            }
        });
        let mut servers = join_all(lookups).await;
        // Addresses of a family this host does not use are left out, not asked and failed.
        for server in &mut servers {
            let before = server.addrs.len();
            server.addrs.retain(|a| self.families.allows(a));
            if before > 0 && server.addrs.is_empty() {
                server.problem = Some("no address of a family in dns.address_families".into());
            }
        }
        servers
    }

    /// A and AAAA of `host`, asked of the servers authoritative for it.
    fn host_addresses(
        &self,
        host: &str,
        depth: u8,
    ) -> BoxFuture<'_, Result<Vec<IpAddr>, DiscoveryError>> {
        let host = host.to_string();
        Box::pin(async move {
            let cut = self.locate_at(host.clone(), depth).await?;
            let qname =
                wire::parse_name(&host).ok_or_else(|| DiscoveryError::BadName(host.clone()))?;
            let mut problems = Vec::new();
            for (ns, addr) in cut.addresses() {
                let server = SocketAddr::new(addr, self.port);
                let (a, aaaa) = futures::join!(
                    self.querier.ask(server, &qname, RecordType::A),
                    self.querier.ask(server, &qname, RecordType::AAAA)
                );
                let mut found = Vec::new();
                let mut answered = false;
                for outcome in [a, aaaa] {
                    match query::authoritative(&outcome, &ns, addr) {
                        Ok(m) => {
                            answered = true;
                            for r in &m.answers {
                                if wire::name_text(&r.name) != host {
                                    continue;
                                }
                                match &r.data {
                                    RData::A(a) => found.push(IpAddr::V4(a.0)),
                                    RData::AAAA(a) => found.push(IpAddr::V6(a.0)),
                                    _ => {}
                                }
                            }
                        }
                        Err(problem) => problems.push(problem),
                    }
                }
                if answered {
                    return Ok(found);
                }
            }
            Err(DiscoveryError::NoAnswer {
                zone: cut.zone.clone(),
                name: host,
                detail: if problems.is_empty() {
                    unaddressed(&cut)
                } else {
                    problems.join("; ")
                },
            })
        })
    }
}

/// Why no server of `cut` could be asked: each name server with the reason its address
/// is missing (a lookup that nested too deep, say), never an empty detail.
fn unaddressed(cut: &ZoneCut) -> String {
    if cut.servers.is_empty() {
        return "the zone has no name server".into();
    }
    let why: Vec<String> = cut
        .servers
        .iter()
        .map(|s| {
            format!(
                "{}: {}",
                s.host,
                s.problem.as_deref().unwrap_or("no address")
            )
        })
        .collect();
    format!("no server address ({})", why.join("; "))
}

fn ns_hosts(records: &[hickory_proto::rr::Record], owner: &Name) -> Vec<String> {
    let mut hosts: Vec<String> = Vec::new();
    for r in wire::rrset(records, owner, RecordType::NS) {
        if let RData::NS(ns) = &r.data {
            let host = wire::name_text(&ns.0);
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
    }
    hosts
}

fn ns_ttl(records: &[hickory_proto::rr::Record], owner: &Name) -> u32 {
    wire::rrset(records, owner, RecordType::NS)
        .map(|r| r.ttl)
        .min()
        .unwrap_or(0)
}

/// A child cut never outlives the cut above it.
fn expiry(ttl: u32, parent: Option<&Arc<ZoneCut>>) -> Instant {
    let own = Instant::now() + Duration::from_secs(u64::from(ttl)).min(MAX_CACHE_TTL);
    match parent {
        Some(p) => own.min(p.expires),
        None => own,
    }
}
