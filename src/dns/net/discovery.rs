//! Parent discovery: where the zone cuts are, and who serves each side of them.
//!
//! Iterative from `dns.root_hints`, one label at a time (as QNAME minimisation does), so
//! that a server hosting both a parent and its child still shows where the cut is. Every
//! cut found is cached for its NS TTL and shared: 10,000 zones under one TLD share one
//! lookup of the TLD. Only delegations are cached, never the DS or DNSKEY answers the
//! verdicts are drawn from.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::time::Instant;

use super::budget::{Budget, Exhausted, ObservationBudget};
use super::query::{self, Outcome, Querier};
use super::transport::{NetTransport, Transport};
use super::wire;

/// Which address families are asked (`dns.address_families`). Both by default; a host
/// without IPv6 sets `["ipv4"]`, or every IPv6 address would answer "unknown".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressFamilies {
    pub ipv4: bool,
    pub ipv6: bool,
}

impl Default for AddressFamilies {
    fn default() -> Self {
        Self {
            ipv4: true,
            ipv6: true,
        }
    }
}

impl AddressFamilies {
    pub fn allows(&self, addr: &IpAddr) -> bool {
        match addr {
            IpAddr::V4(_) => self.ipv4,
            IpAddr::V6(_) => self.ipv6,
        }
    }
}

/// Longest a delegation is believed, whatever its TTL says.
const MAX_CACHE_TTL: Duration = Duration::from_secs(3600);
/// Entries kept before expired ones are swept.
const CACHE_SWEEP_AT: usize = 50_000;
/// How deep name server address lookups may nest (a name server whose name lies in a zone
/// whose name servers need a lookup, …). Breaks glueless loops.
const MAX_DEPTH: u8 = 4;
/// Where one answer from any of a zone's addresses will do, the next address is asked
/// when the last one failed, or when this long passed without an answer (a silent
/// address costs `query_timeout` x `query_attempts`): silent addresses are waited out
/// side by side, not one after another.
const NEXT_ADDRESS_AFTER: Duration = Duration::from_millis(250);
/// Addresses asked at once for one such answer, and glueless name servers looked up at
/// once for one delegation. The querier's caps (in flight, per server) apply beneath.
const PARALLEL: usize = 8;
/// Problems quoted in one error; the rest are counted.
const PROBLEMS_QUOTED: usize = 4;

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
    #[error(
        "{zone} is delegated to {count} name servers, more than dns.max_ns_per_delegation ({max})"
    )]
    TooManyServers {
        zone: String,
        count: usize,
        max: usize,
    },
    #[error(transparent)]
    Budget(#[from] Exhausted),
}

/// One name server of a zone, with the addresses learnt for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NameServer {
    pub host: std::sync::Arc<str>,
    pub addrs: Vec<IpAddr>,
    /// Why no address could be learnt, when none could.
    pub problem: Option<String>,
}

/// A name server whose glue at one parent address is not the addresses the cut holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlueDifference {
    pub host: Arc<str>,
    /// The addresses the cut holds (learnt from another parent address, or looked up).
    pub held: Vec<IpAddr>,
    /// The addresses this parent address's glue gives.
    pub given: Vec<IpAddr>,
}

/// The servers a cut is delegated to, one copy for every cut that names them.
type ServerSet = Arc<[NameServer]>;

/// A zone cut: the zone, the servers its parent delegates it to, and the cut above it.
#[derive(Debug)]
pub struct ZoneCut {
    pub zone: String,
    /// `zone` as a DNS name, for the queries about it.
    pub name: Name,
    /// Shared by every cut delegated to the same servers (100,000 zones at one provider
    /// hold one copy of its name servers, not 100,000).
    pub servers: Arc<[NameServer]>,
    /// The servers' host names as an NS set ([`wire::ns_set`]), shared as
    /// `servers` is: the NS answers that name the same set share it too.
    pub ns_set: Arc<[String]>,
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
            .flat_map(|s| s.addrs.iter().map(|a| (s.host.to_string(), *a)))
            .collect()
    }
}

pub struct Discovery<T = NetTransport> {
    querier: Arc<Querier<T>>,
    port: u16,
    root_hints: Vec<IpAddr>,
    families: AddressFamilies,
    limits: ObservationBudget,
    cache: Mutex<super::FastMap<String, Arc<ZoneCut>>>,
    /// The distinct server sets of the cached cuts (see [`ZoneCut::servers`]), each with
    /// its NS set.
    server_sets: Mutex<super::FastMap<ServerSet, Arc<[String]>>>,
}

enum Probe {
    Cut(Arc<ZoneCut>, CutAnswer),
    NotCut,
    NoSuchName,
}

/// What one server said to a probe, before its name servers are looked up.
enum Heard {
    NotCut,
    NoSuchName,
    /// Name servers, their TTL, the glue and the bailiwick it is believed in.
    Referral {
        hosts: Vec<String>,
        ttl: u32,
        addr: IpAddr,
        message: Arc<Message>,
        authoritative: bool,
    },
}

/// The answer that showed a cut: `zone NS` as [`Querier::ask`] sends it, asked of one
/// address of the parent's servers while the cut was looked up. An observation that found
/// the cut just now takes it as that address's NS answer instead of asking again.
#[derive(Debug, Clone)]
pub struct CutAnswer {
    pub addr: IpAddr,
    pub message: Arc<Message>,
}

/// A cut, and the answer that showed it when it was looked up by this very call (none
/// when it came from the cache).
pub type Located = (Arc<ZoneCut>, Option<CutAnswer>);

impl<T: Transport> Discovery<T> {
    pub fn new(
        querier: Arc<Querier<T>>,
        port: u16,
        root_hints: Vec<IpAddr>,
        families: AddressFamilies,
        limits: ObservationBudget,
    ) -> Self {
        Self {
            querier,
            port,
            limits,
            root_hints: root_hints
                .into_iter()
                .filter(|a| families.allows(a))
                .collect(),
            families,
            cache: Mutex::default(),
            server_sets: Mutex::default(),
        }
    }

    /// The one shared copy of `servers`, and of its NS set.
    fn shared(&self, servers: Vec<NameServer>) -> (Arc<[NameServer]>, Arc<[String]>) {
        let mut sets = self.server_sets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((set, hosts)) = sets.get_key_value(servers.as_slice()) {
            return (set.clone(), hosts.clone());
        }
        if sets.len() >= CACHE_SWEEP_AT {
            // Sets no cached cut holds any more.
            sets.retain(|set, _| Arc::strong_count(set) > 1);
        }
        let hosts: Arc<[String]> = wire::ns_set(servers.iter().map(|s| &*s.host)).into();
        let set: Arc<[NameServer]> = servers.into();
        sets.insert(set.clone(), hosts.clone());
        (set, hosts)
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

    /// Where a referral of `cut`'s zone from one parent address gives glue for one of
    /// the cut's hosts (in `parent_zone`'s bailiwick, of the enabled families) other
    /// than the cut holds: each such host, the cut's addresses and the glue's. Glue left
    /// out is no disagreement (resolvers then look the host up).
    pub fn glue_differs(
        &self,
        cut: &ZoneCut,
        parent_zone: &str,
        additionals: &[Record],
    ) -> Vec<GlueDifference> {
        let mut out = Vec::new();
        for server in cut.servers.iter() {
            // A server already unknown (beyond the address cap, say) stays so.
            if server.problem.is_some() || !wire::is_subdomain(&server.host, parent_zone) {
                continue;
            }
            // Compared in place first: every look at every zone passes here, and the
            // glue nearly always is the cut's.
            let given = || {
                additionals.iter().filter_map(|r| {
                    let ip = match &r.data {
                        RData::A(a) => IpAddr::V4(a.0),
                        RData::AAAA(a) => IpAddr::V6(a.0),
                        _ => return None,
                    };
                    (self.families.allows(&ip) && wire::name_is(&r.name, &server.host))
                        .then_some(ip)
                })
            };
            if given().next().is_none()
                || (given().all(|ip| server.addrs.contains(&ip))
                    && server
                        .addrs
                        .iter()
                        .all(|held| given().any(|ip| ip == *held)))
            {
                continue;
            }
            let mut given: Vec<IpAddr> = given().collect();
            given.sort_unstable();
            given.dedup();
            let mut held = server.addrs.clone();
            held.sort_unstable();
            out.push(GlueDifference {
                host: server.host.clone(),
                held,
                given,
            });
        }
        out
    }

    /// Replaces the cached cut of `cut.zone` by one whose servers also have the `extra`
    /// addresses some parent address hands out (the child addresses asked are
    /// the union of every parent address's glue). A server beyond
    /// `dns.max_addresses_per_server` then is unknown, never asked in part.
    pub fn widen(&self, cut: &ZoneCut, extra: &[GlueDifference]) {
        let servers: Vec<NameServer> = cut
            .servers
            .iter()
            .map(|s| {
                let mut addrs = s.addrs.clone();
                for d in extra.iter().filter(|d| d.host == s.host) {
                    for a in &d.given {
                        if !addrs.contains(a) {
                            addrs.push(*a);
                        }
                    }
                }
                if addrs.len() == s.addrs.len() {
                    s.clone()
                } else {
                    self.name_server(&s.host, Ok(addrs))
                }
            })
            .collect();
        let (servers, ns_set) = self.shared(servers);
        let wider = Arc::new(ZoneCut {
            zone: cut.zone.clone(),
            name: cut.name.clone(),
            servers,
            ns_set,
            parent: cut.parent.clone(),
            expires: cut.expires,
        });
        self.remember(&wider);
    }

    /// Forgets every cached delegation (after the lab changed one, for instance).
    pub fn forget(&self) {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Forgets the cached cut of `zone` and every cut below it (they hang from it): the
    /// parent now delegates it elsewhere, and the next lookup follows the new delegation.
    pub fn forget_zone(&self, zone: &str) {
        let zone = zone.to_ascii_lowercase();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.retain(|cached, _| !wire::is_subdomain(cached, &zone));
    }

    /// The deepest zone cut at or above `name`, within a budget of its own.
    pub async fn locate(&self, name: &str) -> Result<Arc<ZoneCut>, DiscoveryError> {
        self.locate_within(name, &Budget::new(self.limits)).await
    }

    /// The deepest zone cut at or above `name`, spending `budget`.
    pub async fn locate_within(
        &self,
        name: &str,
        budget: &Budget,
    ) -> Result<Arc<ZoneCut>, DiscoveryError> {
        Ok(self.locate_answered(name, budget).await?.0)
    }

    /// As [`Self::locate_within`], with the answer that showed the cut if it was looked
    /// up now.
    async fn locate_answered(
        &self,
        name: &str,
        budget: &Budget,
    ) -> Result<Located, DiscoveryError> {
        let cut = self.locate_at(name.to_string(), 0, budget).await;
        // A lookup cut short anywhere below may have left servers without addresses:
        // the budget is the reason, not what those servers said.
        match budget.exhausted() {
            Some(e) => Err(e.into()),
            None => cut,
        }
    }

    /// The cut of `zone` itself, which must be delegated, within a budget of its own.
    pub async fn delegation(&self, zone: &str) -> Result<Arc<ZoneCut>, DiscoveryError> {
        let budget = Budget::new(self.limits);
        Ok(self.delegation_within(zone, &budget).await?.0)
    }

    /// The cut of `zone` itself, which must be delegated, spending `budget`; with the
    /// parent's NS answer that showed it, when it was looked up by this call.
    pub async fn delegation_within(
        &self,
        zone: &str,
        budget: &Budget,
    ) -> Result<Located, DiscoveryError> {
        // Most calls find the cut itself cached (only valid names are ever cached).
        if let Some(cut) = self.cached(zone) {
            return Ok((cut, None));
        }
        let (cut, answer) = self.locate_answered(zone, budget).await?;
        if cut.zone != zone {
            return Err(DiscoveryError::NotACut {
                name: zone.to_string(),
                zone: cut.zone.clone(),
            });
        }
        Ok((cut, answer))
    }

    /// Keeps a cut for later observations, unless the budget ran out while it was built:
    /// its servers may then lack addresses for this observation's reasons only.
    fn remember_within(&self, cut: &Arc<ZoneCut>, budget: &Budget) {
        if budget.exhausted().is_none() {
            self.remember(cut);
        }
    }

    fn locate_at<'a>(
        &'a self,
        name: String,
        depth: u8,
        budget: &'a Budget,
    ) -> BoxFuture<'a, Result<Located, DiscoveryError>> {
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
                None => self.prime(depth, budget).await?,
            };
            // The answer that showed `cut`, while `cut` is one found in this call.
            let mut answer = None;
            for below in wire::names_below(&cut.zone, &name) {
                match self.probe(&cut, &below, depth, budget).await? {
                    Probe::Cut(next, heard) => {
                        self.remember_within(&next, budget);
                        cut = next;
                        answer = Some(heard);
                    }
                    Probe::NotCut => {}
                    Probe::NoSuchName => return Err(DiscoveryError::NxDomain(below)),
                }
            }
            Ok((cut, answer))
        })
    }

    /// One question, paid from `budget`.
    async fn ask(
        &self,
        budget: &Budget,
        addr: IpAddr,
        qname: &Name,
        qtype: RecordType,
    ) -> Result<Outcome, Exhausted> {
        budget.query()?;
        Ok(self
            .querier
            .ask(SocketAddr::new(addr, self.port), qname, qtype)
            .await)
    }

    /// The root's name servers, from the hints' own answer to `. NS`.
    async fn prime(&self, depth: u8, budget: &Budget) -> Result<Arc<ZoneCut>, DiscoveryError> {
        let root = Name::root();
        let targets = self
            .root_hints
            .iter()
            .map(|hint| (String::new(), *hint))
            .collect();
        let heard = first_answer(targets, |_, hint| {
            let root = &root;
            async move {
                let message = match self.ask(budget, hint, root, RecordType::NS).await {
                    Ok(Ok(m)) => m,
                    Ok(Err(e)) => return Err(format!("{hint}: {e}")),
                    Err(e) => return Err(e.to_string()),
                };
                let hosts = ns_hosts(&message.answers, root);
                if message.metadata.response_code != ResponseCode::NoError
                    || !message.metadata.authoritative
                    || hosts.is_empty()
                {
                    return Err(format!(
                        "{hint}: no authoritative root NS set ({})",
                        message.metadata.response_code
                    ));
                }
                Ok((hosts, message))
            }
        })
        .await;
        let (hosts, message) = match heard {
            Ok(heard) => heard,
            Err(problems) => {
                if let Some(e) = budget.exhausted() {
                    return Err(e.into());
                }
                return Err(DiscoveryError::NoRoot(if problems.is_empty() {
                    "no root hints configured".into()
                } else {
                    summarize(problems)
                }));
            }
        };
        self.within_cap(".", &hosts)?;
        let ttl = ns_ttl(&message.answers, &root);
        let servers = self
            .servers_for(&hosts, &message.additionals, ".", depth, budget)
            .await;
        let (servers, ns_set) = self.shared(servers);
        let cut = Arc::new(ZoneCut {
            zone: ".".into(),
            name: Name::root(),
            servers,
            ns_set,
            parent: None,
            expires: expiry(ttl, None),
        });
        self.remember_within(&cut, budget);
        Ok(cut)
    }

    /// The name servers `hosts` (an [`ns_set`](wire::ns_set)) of `zone` with their
    /// addresses looked up as a glueless delegation's are: a zone's servers before any
    /// parent delegates to them (a signed move's target). More than
    /// `dns.max_ns_per_delegation` is refused whole, as a delegation is.
    pub async fn servers_named(
        &self,
        zone: &str,
        hosts: &[String],
        budget: &Budget,
    ) -> Result<Vec<NameServer>, DiscoveryError> {
        self.within_cap(zone, hosts)?;
        // No glue: nothing delegates to them, so every address is looked up.
        Ok(self.servers_for(hosts, &[], ".", 0, budget).await)
    }

    /// A delegation to more name servers than `dns.max_ns_per_delegation` is refused
    /// whole: asking a subset could make "every server agrees" true of a part.
    fn within_cap(&self, zone: &str, hosts: &[String]) -> Result<(), DiscoveryError> {
        let max = self.limits.max_ns_per_delegation;
        if hosts.len() > max {
            return Err(DiscoveryError::TooManyServers {
                zone: zone.to_string(),
                count: hosts.len(),
                max,
            });
        }
        Ok(())
    }

    /// Asks `cut`'s servers whether `name` (just below it) is a zone cut.
    async fn probe(
        &self,
        cut: &Arc<ZoneCut>,
        name: &str,
        depth: u8,
        budget: &Budget,
    ) -> Result<Probe, DiscoveryError> {
        let qname = wire::parse_name(name).ok_or_else(|| DiscoveryError::BadName(name.into()))?;
        let targets = cut.addresses();
        if targets.is_empty() {
            return Err(DiscoveryError::NoAnswer {
                zone: cut.zone.clone(),
                name: name.to_string(),
                detail: unaddressed(cut),
            });
        }
        let heard = first_answer(targets, |host, addr| {
            let qname = &qname;
            async move {
                let message = match self.ask(budget, addr, qname, RecordType::NS).await {
                    Ok(Ok(m)) => m,
                    Ok(Err(e)) => return Err(format!("{host} ({addr}): {e}")),
                    Err(e) => return Err(e.to_string()),
                };
                let meta = &message.metadata;
                match meta.response_code {
                    ResponseCode::NoError => {}
                    ResponseCode::NXDomain if meta.authoritative => return Ok(Heard::NoSuchName),
                    other => return Err(format!("{host} ({addr}): {other}")),
                }
                // Authoritative: the server holds `name`'s data, so either `name` is
                // inside `cut`'s zone (no NS there) or the server hosts the child too and
                // answers with its apex NS, whose glue it is authoritative for.
                // Otherwise a referral, whose glue is only believed within the zone
                // that gave it.
                let authoritative = meta.authoritative;
                let section = if authoritative {
                    &message.answers
                } else {
                    &message.authorities
                };
                let hosts = ns_hosts(section, qname);
                if hosts.is_empty() {
                    if authoritative {
                        return Ok(Heard::NotCut);
                    }
                    return Err(format!(
                        "{host} ({addr}): not authoritative and no referral (lame)"
                    ));
                }
                let ttl = ns_ttl(section, qname);
                Ok(Heard::Referral {
                    hosts,
                    ttl,
                    addr,
                    message,
                    authoritative,
                })
            }
        })
        .await;
        let (hosts, ttl, addr, message, authoritative) = match heard {
            Ok(Heard::NotCut) => return Ok(Probe::NotCut),
            Ok(Heard::NoSuchName) => return Ok(Probe::NoSuchName),
            Ok(Heard::Referral {
                hosts,
                ttl,
                addr,
                message,
                authoritative,
            }) => (hosts, ttl, addr, message, authoritative),
            Err(problems) => {
                if let Some(e) = budget.exhausted() {
                    return Err(e.into());
                }
                return Err(DiscoveryError::NoAnswer {
                    zone: cut.zone.clone(),
                    name: name.to_string(),
                    detail: summarize(problems),
                });
            }
        };
        self.within_cap(name, &hosts)?;
        let bailiwick = if authoritative {
            name
        } else {
            cut.zone.as_str()
        };
        let servers = self
            .servers_for(&hosts, &message.additionals, bailiwick, depth, budget)
            .await;
        let (servers, ns_set) = self.shared(servers);
        let next = Arc::new(ZoneCut {
            zone: name.to_string(),
            name: qname,
            servers,
            ns_set,
            parent: Some(cut.clone()),
            expires: expiry(ttl, Some(cut)),
        });
        Ok(Probe::Cut(next, CutAnswer { addr, message }))
    }

    /// Addresses for each host: glue from `additionals` within `bailiwick`, else looked up
    /// (a few at once, each paid from `budget`).
    async fn servers_for(
        &self,
        hosts: &[String],
        additionals: &[Record],
        bailiwick: &str,
        depth: u8,
        budget: &Budget,
    ) -> Vec<NameServer> {
        // Named futures, boxed: a closure's future here is not `Send` for every lifetime.
        let lookups: Vec<BoxFuture<'_, NameServer>> = hosts
            .iter()
            .map(|host| {
                Box::pin(self.server_for(host, additionals, bailiwick, depth, budget))
                    as BoxFuture<'_, NameServer>
            })
            .collect();
        futures::stream::iter(lookups)
            .buffered(PARALLEL)
            .collect()
            .await
    }

    async fn server_for(
        &self,
        host: &str,
        additionals: &[Record],
        bailiwick: &str,
        depth: u8,
        budget: &Budget,
    ) -> NameServer {
        let glue = if wire::is_subdomain(host, bailiwick) {
            glue(host, additionals)
        } else {
            Vec::new()
        };
        let found = if !glue.is_empty() {
            Ok(glue)
        } else {
            match budget.host_lookup() {
                Ok(()) => self.host_addresses(host, depth + 1, budget).await,
                Err(e) => Err(e.into()),
            }
        };
        self.name_server(host, found)
    }

    /// The addresses of `host` (A and AAAA from the servers authoritative for it, of the
    /// enabled families, at most `dns.max_addresses_per_server`), as a name server's are
    /// learnt: one host lookup paid from `budget`. Why none, when none.
    pub async fn addresses_of(&self, host: &str, budget: &Budget) -> Result<Vec<IpAddr>, String> {
        if let Err(e) = budget.host_lookup() {
            return Err(e.to_string());
        }
        let found = self.host_addresses(host, 0, budget).await;
        let server = self.name_server(host, found);
        match server.problem {
            Some(problem) => Err(problem),
            None => Ok(server.addrs),
        }
    }

    /// A name server from what was learnt of its addresses.
    fn name_server(&self, host: &str, found: Result<Vec<IpAddr>, DiscoveryError>) -> NameServer {
        let usable = found.map_err(|e| e.to_string()).and_then(|addrs| {
            usable_addresses(addrs, self.families, self.limits.max_addresses_per_server)
        });
        match usable {
            Ok(addrs) => NameServer {
                host: host.into(),
                addrs,
                problem: None,
            },
            Err(problem) => NameServer {
                host: host.into(),
                addrs: Vec::new(),
                problem: Some(problem),
            },
        }
    }

    /// A and AAAA of `host`, asked of the servers authoritative for it.
    fn host_addresses<'a>(
        &'a self,
        host: &str,
        depth: u8,
        budget: &'a Budget,
    ) -> BoxFuture<'a, Result<Vec<IpAddr>, DiscoveryError>> {
        let host = host.to_string();
        Box::pin(async move {
            let (cut, _) = self.locate_at(host.clone(), depth, budget).await?;
            let qname =
                wire::parse_name(&host).ok_or_else(|| DiscoveryError::BadName(host.clone()))?;
            let targets = cut.addresses();
            if targets.is_empty() {
                return Err(DiscoveryError::NoAnswer {
                    zone: cut.zone.clone(),
                    name: host,
                    detail: unaddressed(&cut),
                });
            }
            let heard = first_answer(targets, |ns, addr| {
                let (qname, host) = (&qname, &host);
                async move {
                    let (a, aaaa) = futures::join!(
                        self.ask(budget, addr, qname, RecordType::A),
                        self.ask(budget, addr, qname, RecordType::AAAA)
                    );
                    let mut found = Vec::new();
                    let mut answered = false;
                    let mut problems = Vec::new();
                    for outcome in [a, aaaa] {
                        let outcome = match outcome {
                            Ok(outcome) => outcome,
                            Err(e) => {
                                problems.push(e.to_string());
                                continue;
                            }
                        };
                        match query::authoritative(&outcome, &ns, addr) {
                            Ok(m) => {
                                answered = true;
                                for r in &m.answers {
                                    if wire::name_text(&r.name) != *host {
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
                        found.dedup();
                        Ok(found)
                    } else {
                        Err(problems.join("; "))
                    }
                }
            })
            .await;
            heard.map_err(|problems| match budget.exhausted() {
                Some(e) => e.into(),
                None => DiscoveryError::NoAnswer {
                    zone: cut.zone.clone(),
                    name: host,
                    detail: summarize(problems),
                },
            })
        })
    }
}

/// The first `Ok` of `ask` over `targets` (server name, address). The next address is
/// asked as soon as the last one failed, or [`NEXT_ADDRESS_AFTER`] passed without an
/// answer; at most [`PARALLEL`] at once. Answers still outstanding are dropped (their
/// exchanges end). Every problem, when no address answered.
pub(crate) async fn first_answer<T, F, Fut>(
    targets: Vec<(String, IpAddr)>,
    ask: F,
) -> Result<T, Vec<String>>
where
    F: Fn(String, IpAddr) -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let mut targets = targets.into_iter();
    let mut running = FuturesUnordered::new();
    let mut problems = Vec::new();
    // Each turn starts an address or ends one: at most twice as many turns as addresses.
    loop {
        if running.is_empty() {
            match targets.next() {
                Some((host, addr)) => running.push(ask(host, addr)),
                None => return Err(problems),
            }
        }
        let more = running.len() < PARALLEL && targets.len() > 0;
        tokio::select! {
            Some(result) = running.next() => match result {
                Ok(answer) => return Ok(answer),
                Err(problem) => problems.push(problem),
            },
            () = tokio::time::sleep(NEXT_ADDRESS_AFTER), if more => {
                if let Some((host, addr)) = targets.next() {
                    running.push(ask(host, addr));
                }
            }
        }
    }
}

/// The addresses of a name server that are asked: those of a family this host does not
/// use are left out, not asked and failed; more than `max` (`dns.max_addresses_per_server`)
/// make the server unknown, never asked in part.
fn usable_addresses(
    mut addrs: Vec<IpAddr>,
    families: AddressFamilies,
    max: usize,
) -> Result<Vec<IpAddr>, String> {
    if addrs.is_empty() {
        return Err("no A or AAAA record".into());
    }
    addrs.retain(|a| families.allows(a));
    if addrs.is_empty() {
        return Err("no address of a family in dns.address_families".into());
    }
    if addrs.len() > max {
        return Err(format!(
            "{} addresses, more than dns.max_addresses_per_server ({max})",
            addrs.len()
        ));
    }
    Ok(addrs)
}

/// The A and AAAA glue of `host` in `additionals`.
fn glue(host: &str, additionals: &[Record]) -> Vec<IpAddr> {
    let mut addrs: Vec<IpAddr> = Vec::new();
    for r in additionals {
        if wire::name_text(&r.name) != host {
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
    addrs
}

/// Why none of `cut`'s servers has an address: each server's own reason (a lookup that
/// nested too deep, failed, ran out of budget), not just that there is none.
fn unaddressed(cut: &ZoneCut) -> String {
    let problems: Vec<String> = cut
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
    if problems.is_empty() {
        "the zone has no name server".into()
    } else {
        format!("no server has an address ({})", summarize(problems))
    }
}

/// The first few problems, and how many more there were: nested lookups quote their
/// inner problems, which must not grow with the fan-out.
fn summarize(problems: Vec<String>) -> String {
    const MAX_CHARS: usize = 2000;
    let more = problems.len().saturating_sub(PROBLEMS_QUOTED);
    let mut text = problems
        .into_iter()
        .take(PROBLEMS_QUOTED)
        .collect::<Vec<_>>()
        .join("; ");
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    if text.len() > MAX_CHARS {
        let mut end = MAX_CHARS;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_with_more_addresses_than_the_cap_is_unknown_not_cut_down() {
        let addrs: Vec<IpAddr> = (1..=9u8).map(|i| IpAddr::from([192, 0, 2, i])).collect();
        let both = AddressFamilies::default();
        assert_eq!(
            usable_addresses(addrs.clone(), both, 8),
            Err("9 addresses, more than dns.max_addresses_per_server (8)".into())
        );
        assert_eq!(usable_addresses(addrs.clone(), both, 9), Ok(addrs));
        let v6: IpAddr = "2001:db8::1".parse().unwrap_or(IpAddr::from([0u8; 16]));
        let v4_only = AddressFamilies {
            ipv4: true,
            ipv6: false,
        };
        assert!(
            usable_addresses(vec![v6], v4_only, 8)
                .unwrap_err()
                .contains("dns.address_families")
        );
        assert_eq!(
            usable_addresses(Vec::new(), both, 8),
            Err("no A or AAAA record".into())
        );
    }

    /// A discovery that asks nobody (no root hints): for its caches alone.
    fn discovery() -> Discovery {
        let querier = Arc::new(Querier::new(
            Arc::new(super::super::transport::NetTransport::new(
                Duration::from_millis(10),
            )),
            query::Limits::default(),
        ));
        Discovery::new(
            querier,
            53,
            Vec::new(),
            AddressFamilies::default(),
            ObservationBudget::default(),
        )
    }

    #[tokio::test]
    async fn cuts_delegated_to_the_same_servers_share_one_copy_of_them() {
        let discovery = discovery();
        let server = |host: &str, last: u8| NameServer {
            host: host.into(),
            addrs: vec![IpAddr::from([192, 0, 2, last])],
            problem: None,
        };
        let provider = || vec![server("ns1.dns.test.", 1), server("ns2.dns.test.", 2)];
        let (a, a_hosts) = discovery.shared(provider());
        let (b, b_hosts) = discovery.shared(provider());
        assert!(Arc::ptr_eq(&a, &b) && Arc::ptr_eq(&a_hosts, &b_hosts));
        let (other, _) = discovery.shared(vec![server("ns1.dns.test.", 9)]);
        assert!(!Arc::ptr_eq(&a, &other));
        assert_eq!(&*a, provider().as_slice());
        assert_eq!(&*a_hosts, ["ns1.dns.test.", "ns2.dns.test."]);
    }

    /// A re-delegated zone is forgotten with every cut hanging below it, and nothing
    /// else: its parent and its siblings stay cached.
    #[tokio::test]
    async fn forgetting_a_zone_forgets_it_and_what_lies_below() {
        let discovery = discovery();
        let cut = |zone: &str, parent: Option<&Arc<ZoneCut>>| {
            let name = wire::parse_name(zone).unwrap_or_else(Name::root);
            let cut = Arc::new(ZoneCut {
                zone: zone.into(),
                name,
                servers: Vec::new().into(),
                ns_set: Vec::new().into(),
                parent: parent.cloned(),
                expires: Instant::now() + Duration::from_secs(600),
            });
            discovery.remember(&cut);
            cut
        };
        let root = cut(".", None);
        let tld = cut("test.", Some(&root));
        let child = cut("child.test.", Some(&tld));
        cut("sub.child.test.", Some(&child));
        cut("otherchild.test.", Some(&tld));
        discovery.forget_zone("Child.Test.");
        for (zone, kept) in [
            (".", true),
            ("test.", true),
            ("otherchild.test.", true),
            ("child.test.", false),
            ("sub.child.test.", false),
        ] {
            assert_eq!(discovery.cached(zone).is_some(), kept, "{zone}");
        }
    }

    #[test]
    fn problems_are_summarized_not_grown_with_the_fan_out() {
        let problems: Vec<String> = (0..10).map(|i| format!("p{i}")).collect();
        assert_eq!(summarize(problems), "p0; p1; p2; p3; and 6 more");
        let long = summarize(vec!["é".repeat(3000)]);
        assert!(long.len() <= 2000 + '…'.len_utf8(), "{}", long.len());
    }

    /// The next address is asked when the last failed or stays silent; the first answer
    /// wins; silent addresses are waited out side by side.
    #[tokio::test(start_paused = true)]
    async fn the_first_answer_of_addresses_asked_side_by_side() {
        let targets: Vec<(String, IpAddr)> = (1..=12u8)
            .map(|i| (format!("t{i}."), IpAddr::from([127, 0, 0, i])))
            .collect();
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let start = Instant::now();
        // Eleven silent for 6 s (2 s x 3 attempts), the twelfth answers at once.
        let answer = first_answer(targets.clone(), |host, addr| {
            asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move {
                if addr == IpAddr::from([127, 0, 0, 12]) {
                    Ok(host)
                } else {
                    tokio::time::sleep(Duration::from_secs(6)).await;
                    Err(format!("{host}: timeout"))
                }
            }
        })
        .await;
        assert_eq!(answer, Ok("t12.".to_string()));
        assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 12);
        // One after another: 66 s. Side by side, 8 at once: the twelfth starts once the
        // first four silent ones are done.
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );

        // An address that fails at once hands over at once; when none answers, every
        // problem is told.
        let start = Instant::now();
        let problems = first_answer(targets, |host, _| async move {
            Err::<(), _>(format!("{host}: refused"))
        })
        .await
        .unwrap_err();
        assert_eq!(problems.len(), 12);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
