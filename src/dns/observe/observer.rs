//! [`DnsObserver`]: the real [`Observer`], over the public DNS (or the lab's).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::future::join_all;
use hickory_proto::rr::RecordType;
use tokio::sync::Semaphore;

use super::classify;
use super::delegation::NsAnswer;
use super::model::{
    ChildView, DnskeyAnswer, DsAnswer, DsyncAnswer, DsyncView, Evidence, NotifyTarget, ParentView,
    ServerAnswer, UnknownReason,
};
use super::settings::DnsSettings;
use super::{ObserveError, Observer, resolvers};
use crate::dns::net::budget::{Budget, ObservationBudget};
use crate::dns::net::discovery::{
    CutAnswer, Discovery, DiscoveryError, GlueDifference, Located, NameServer, ZoneCut,
};
use crate::dns::net::episodes::{Episodes, Failure, MAX_TRACKED};
use crate::dns::net::query::{
    DEFAULT_QUERIES_PER_SERVER, Limits, QUERIES_IN_FLIGHT, Querier, QueryStats,
};
use crate::dns::net::transport::{NetTransport, Transport};
use crate::dns::net::wire;
use crate::dns::validate::anchor::{AnchorError, TrustAnchors};
use crate::dns::validate::proof;
use crate::dns::validate::validator::{Validator, ZoneKeys};
use crate::dns::validate::{ValidationProbe, ValidationVerdict};
use crate::dnssec::Dnskey;

/// Tuning beyond the configuration file; the defaults suit a daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserverOptions {
    /// Zones observed at once; further calls wait their turn.
    pub zones_in_flight: usize,
    /// Queries in flight at once, all servers together.
    pub queries_in_flight: usize,
    /// Queries in flight at once to one server address (politeness).
    pub per_server: usize,
}

impl Default for ObserverOptions {
    fn default() -> Self {
        Self {
            // The engine's steps at once (`engine::WORKERS`, 64), each a parent and a child
            // view, never wait for a turn. More only queues more work in memory, and the
            // bench's pass was slower for it (docs/benchmarks.md).
            zones_in_flight: 128,
            queries_in_flight: QUERIES_IN_FLIGHT,
            per_server: DEFAULT_QUERIES_PER_SERVER,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ObserverSetupError {
    #[error(transparent)]
    Anchor(#[from] AnchorError),
}

/// The words of a bogus DS answer's episode: its WARN and its INFO (tests count them).
pub const DS_FAILS_VALIDATION: &str = "DS answer fails validation";
pub const DS_VALIDATES_AGAIN: &str = "DS answer validates again";

struct Inner<T> {
    querier: Arc<Querier<T>>,
    discovery: Discovery<T>,
    anchors: TrustAnchors,
    port: u16,
    resolvers: Vec<SocketAddr>,
    zones: Semaphore,
    budget: ObservationBudget,
    /// The validated DNSKEY sets of parent zones, shared by every zone below each.
    keys: KeyCache,
    /// The daemon-wide `trust_anchor_mismatch`, as `check_trust_anchors` last saw it.
    anchors_served: Arc<crate::condition::Condition>,
    /// Parent addresses whose DS answer for a zone fails validation, said once an
    /// episode (a hostile or broken server answers so at every look).
    bogus_ds: Episodes<(String, IpAddr)>,
}

/// Observes zones by asking every server directly. Cheap to clone; clones share the
/// delegation cache and the limits. Generic over its transport, so that the real
/// network's exchanges are called statically, their futures unboxed.
pub struct DnsObserver<T = NetTransport>(Arc<Inner<T>>);

impl<T> Clone for DnsObserver<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> std::fmt::Debug for DnsObserver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsObserver")
            .field("port", &self.0.port)
            .field("resolvers", &self.0.resolvers)
            .finish()
    }
}

impl DnsObserver {
    /// Over the network, as configured. Reads the trust anchor file.
    pub fn new(settings: &DnsSettings) -> Result<Self, ObserverSetupError> {
        let transport = Arc::new(NetTransport::new(settings.query_timeout));
        let options = ObserverOptions {
            per_server: settings.queries_per_server,
            ..ObserverOptions::default()
        };
        Self::with_transport(settings, options, transport)
    }
}

impl<T: Transport> DnsObserver<T> {
    /// Over any transport: the tests' scripted servers, for one.
    pub fn with_transport(
        settings: &DnsSettings,
        options: ObserverOptions,
        transport: Arc<T>,
    ) -> Result<Self, ObserverSetupError> {
        let anchors = TrustAnchors::load(settings.trust_anchor_file.as_deref())?;
        let querier = Arc::new(Querier::new(
            transport,
            Limits {
                in_flight: options.queries_in_flight,
                per_server: options.per_server,
                attempts: settings.query_attempts,
                qps_per_server: settings.max_qps_per_server,
            },
        ));
        Ok(Self(Arc::new(Inner {
            discovery: Discovery::new(
                querier.clone(),
                settings.port,
                settings.root_hints.clone(),
                settings.address_families,
                settings.budget,
            ),
            querier,
            anchors,
            port: settings.port,
            resolvers: settings.validating_resolvers.clone(),
            zones: Semaphore::new(options.zones_in_flight.max(1)),
            budget: settings.budget,
            keys: KeyCache::default(),
            bogus_ds: Episodes::default(),
            anchors_served: Arc::new(crate::condition::Condition::new(
                crate::alert_kind::AlertKind::TrustAnchorMismatch,
            )),
        })))
    }

    pub fn stats(&self) -> QueryStats {
        self.0.querier.stats()
    }

    /// The server addresses asked more slowly now because they dropped or slipped
    /// queries, each with its slow-down (2: half the pace).
    pub fn slowed_servers(&self) -> Vec<(IpAddr, u32)> {
        self.0.querier.slowed()
    }

    /// This host's IPv6 as the exchanges and the start-up probe see it (the daemon-wide
    /// `host_ipv6_unreachable`).
    pub fn ipv6(&self) -> &crate::dns::net::ipv6::Ipv6Health {
        self.0.querier.ipv6()
    }

    /// Sends NOTIFY(`rrtype`) for `zone` to a parent's notification target (a DSYNC
    /// target's address and port), each attempt at the address's pace in this observer's
    /// querier (`dns::net::notify`).
    pub async fn notify(
        &self,
        to: SocketAddr,
        zone: &str,
        rrtype: RecordType,
        options: &crate::dns::net::notify::NotifyOptions,
    ) -> crate::dns::net::notify::NotifyReport {
        use crate::dns::net::notify::{NotifyOutcome, NotifyReport, notify_paced};
        let Some(name) = wire::parse_name(zone) else {
            return NotifyReport {
                outcome: NotifyOutcome::Failed {
                    detail: format!("{zone} is not a domain name"),
                },
                attempts: 0,
                ignored: 0,
            };
        };
        notify_paced(&self.0.querier, to, &name, rrtype, options).await
    }

    /// Forgets every cached delegation (and the parents' validated keys with them).
    pub fn forget_delegations(&self) {
        self.0.discovery.forget();
        self.0.keys.forget();
    }

    /// How often the parents' keys were established from the anchor, and how often a
    /// validated view found them cached.
    pub fn key_cache_stats(&self) -> KeyCacheStats {
        self.0.keys.stats()
    }

    /// `observe` within one observation's budget (`dns.observation_timeout`, the
    /// `dns.max_*` keys), the wait for its turn included: a budget run out anywhere is
    /// the observation's result, unknown, whatever was heard meanwhile.
    async fn within_budget<R>(
        &self,
        zone: &str,
        observe: impl AsyncFnOnce(&Budget) -> Result<R, ObserveError>,
    ) -> Result<R, ObserveError> {
        let budget = Budget::new(self.0.budget);
        let result = match tokio::time::timeout_at(budget.deadline(), observe(&budget)).await {
            Ok(result) => result,
            Err(_elapsed) => Err(ObserveError {
                zone: zone.to_string(),
                reason: budget.time_is_up().to_string(),
            }),
        };
        match budget.exhausted() {
            Some(e) => Err(ObserveError {
                zone: zone.to_string(),
                reason: e.to_string(),
            }),
            None => result,
        }
    }

    /// The cut of `zone`, with the parent's NS answer that showed it when it was looked up
    /// just now.
    async fn delegation(&self, zone: &str, budget: &Budget) -> Result<Located, ObserveError> {
        let observe_error = |reason: String| ObserveError {
            zone: zone.to_string(),
            reason,
        };
        let name = crate::dnssec::fqdn(zone).map_err(|e| observe_error(e.to_string()))?;
        if name == "." {
            return Err(observe_error("the root has no parent".into()));
        }
        self.0
            .discovery
            .delegation_within(&name, budget)
            .await
            .map_err(|e: DiscoveryError| observe_error(e.to_string()))
    }

    async fn parent_view(&self, zone: &str) -> Result<ParentView, ObserveError> {
        self.within_budget(zone, async |budget| {
            let _turn = self.0.zones.acquire().await;
            let (cut, parent, heard) = self.cut_and_parent(zone, budget).await?;
            self.ask_parent(&cut, &parent, heard.as_ref(), budget, None, None)
                .await
        })
        .await
    }

    /// As `parent_view`, every DS answer proven with the parent's keys (safety rule 10);
    /// with `pick`, only the address of that turn (a sampled look) is asked.
    async fn parent_validated_view(
        &self,
        zone: &str,
        pick: Option<u64>,
    ) -> Result<ParentView, ObserveError> {
        self.within_budget(zone, async |budget| {
            let _turn = self.0.zones.acquire().await;
            let (cut, parent, heard) = self.cut_and_parent(zone, budget).await?;
            let heard = heard.as_ref();
            match self.parent_keys(&parent).await {
                ParentKeys::Trusted(keys) => {
                    // Signature windows at the time of this look, not of the keys' fetch.
                    let now = unix_now();
                    let mut view = self
                        .ask_parent(&cut, &parent, heard, budget, Some((&keys, now)), pick)
                        .await?;
                    view.evidence = Evidence::Validated;
                    Ok(view)
                }
                ParentKeys::Insecure(why) => {
                    // Nothing to validate with: the answers stand as authoritative ones.
                    let mut view = self
                        .ask_parent(&cut, &parent, heard, budget, None, pick)
                        .await?;
                    view.evidence = Evidence::Insecure(why);
                    Ok(view)
                }
                ParentKeys::Failed(why) => Err(ObserveError {
                    zone: cut.zone.clone(),
                    reason: format!(
                        "the keys of the parent zone {} cannot be established: {why}",
                        parent.zone
                    ),
                }),
            }
        })
        .await
    }

    async fn cut_and_parent(
        &self,
        zone: &str,
        budget: &Budget,
    ) -> Result<(Arc<ZoneCut>, Arc<ZoneCut>, Option<CutAnswer>), ObserveError> {
        let (cut, heard) = self.delegation(zone, budget).await?;
        let Some(parent) = cut.parent.clone() else {
            return Err(ObserveError {
                zone: zone.into(),
                reason: "no parent zone found".into(),
            });
        };
        Ok((cut, parent, heard))
    }

    /// The parent zone's keys, from the cache or established from the trust anchor once
    /// for every zone that asks meanwhile.
    async fn parent_keys(&self, parent: &Arc<ZoneCut>) -> ParentKeys {
        let entry = self.0.keys.entry(&parent.zone);
        entry
            .cell
            .get_or_init(|| async {
                self.0.keys.fetches.fetch_add(1, Ordering::Relaxed);
                let now = unix_now();
                let budget = Budget::new(self.0.budget);
                let validator = self.validator(now, &budget);
                let keys = validator.zone_keys(parent).await;
                let keep = match (&keys, validator.freshness()) {
                    (ZoneKeys::Failed(_), _) | (_, None) => KEYS_FAILURE_KEPT,
                    (_, Some(f)) => {
                        Duration::from_secs(u64::from(f.keep_for(now))).min(KEYS_KEPT_AT_MOST)
                    }
                };
                let keys = match keys {
                    ZoneKeys::Trusted(k) => ParentKeys::Trusted(Arc::new(k)),
                    ZoneKeys::Insecure(d) => ParentKeys::Insecure(d),
                    ZoneKeys::Failed(d) => ParentKeys::Failed(d),
                };
                (keys, Instant::now() + keep)
            })
            .await
            .0
            .clone()
    }

    /// A parent address's DS answer for `zone` failed validation: said at WARN when an
    /// episode begins, at DEBUG while it lasts.
    fn ds_fails_validation(&self, zone: &str, server: SocketAddr, e: &proof::ProofError) {
        match self.0.bogus_ds.failed((zone.to_string(), server.ip())) {
            Failure::Began(since) => tracing::warn!(
                zone,
                %server,
                %since,
                "{DS_FAILS_VALIDATION}: {e}; said again when it validates"
            ),
            Failure::Again(since) => {
                tracing::debug!(zone, %server, %since, "{DS_FAILS_VALIDATION}: {e}")
            }
            Failure::Capped { say_cap } => {
                tracing::debug!(zone, %server, "{DS_FAILS_VALIDATION}: {e}");
                if say_cap {
                    tracing::warn!(
                        "{DS_FAILS_VALIDATION} for more than {MAX_TRACKED} zones and addresses at once; further ones are logged at debug only until some validate again"
                    );
                }
            }
        }
    }

    /// A parent address's DS answer for `zone` validated: its episode, if any, is over.
    fn ds_validates(&self, zone: &str, server: SocketAddr) {
        if !self.0.bogus_ds.any() {
            return;
        }
        if let Some(e) = self.0.bogus_ds.succeeded(&(zone.to_string(), server.ip())) {
            tracing::info!(
                zone,
                %server,
                since = %e.since,
                failed = e.failed,
                "{DS_VALIDATES_AGAIN} (failing since {}, {} answers)",
                e.since,
                e.failed
            );
        }
    }

    /// The DS and NS answers of every address of the parent's servers; with `validate`
    /// (the parent's keys, the time of the look), each DS answer proven with them. The
    /// address whose NS answer showed the cut moments ago (`heard`, the cut looked up by
    /// this observation) is not asked that question again: that answer is its NS answer.
    /// With `pick`, only the address of that turn is asked.
    async fn ask_parent(
        &self,
        cut: &ZoneCut,
        parent: &ZoneCut,
        heard: Option<&CutAnswer>,
        budget: &Budget,
        validate: Option<(&[Dnskey], u32)>,
        pick: Option<u64>,
    ) -> Result<ParentView, ObserveError> {
        let (qname, known) = (&cut.name, &cut.ns_set);
        let port = self.0.port;
        let querier = &self.0.querier;
        let parent_zone = &parent.zone;
        // DS and NS side by side at every address: the NS answer tells whom the
        // parent sends resolvers to and also settles an NXDOMAIN for the DS (a
        // server that refers the zone and denies it contradicts itself), so it is
        // asked once.
        let discovery = &self.0.discovery;
        let both = ask_addresses(
            &parent.servers,
            pick,
            |reason| {
                (
                    DsAnswer::Unknown(reason.clone()),
                    (NsAnswer::Unknown(reason), Vec::new()),
                )
            },
            |addr| async move {
                let budget_spent = |e: crate::dns::net::budget::Exhausted| {
                    let reason = UnknownReason::Network(e.to_string());
                    (
                        DsAnswer::Unknown(reason.clone()),
                        (NsAnswer::Unknown(reason), Vec::new()),
                    )
                };
                let heard_ns = heard.filter(|h| h.addr == addr).map(|h| h.message.clone());
                let spent = match heard_ns {
                    Some(_) => budget.query(),
                    None => budget.query().and_then(|()| budget.query()),
                };
                if let Err(e) = spent {
                    return budget_spent(e);
                }
                let to = SocketAddr::new(addr, port);
                let (ds, ns) = match heard_ns {
                    Some(ns) => (querier.ask(to, qname, RecordType::DS).await, Ok(ns)),
                    None => {
                        futures::join!(
                            querier.ask(to, qname, RecordType::DS),
                            querier.ask(to, qname, RecordType::NS),
                        )
                    }
                };
                let mut answer = classify::classify_ds(qname, parent_zone, &ds);
                if let (Some((keys, now)), Ok(message)) = (validate, &ds)
                    && matches!(answer, DsAnswer::Present { .. } | DsAnswer::Absent)
                {
                    match proof::prove_ds(message, qname, parent_zone, keys, now, budget) {
                        Ok(_) => self.ds_validates(&cut.zone, to),
                        Err(e) => {
                            self.ds_fails_validation(&cut.zone, to, &e);
                            answer = DsAnswer::Unknown(match e {
                                proof::ProofError::WithoutEdns => UnknownReason::WithoutEdns,
                                e => UnknownReason::BogusProof(e.to_string()),
                            });
                        }
                    }
                }
                if classify::is_nxdomain(&ds) {
                    answer = classify::contradicted_by_referral(qname, answer, &ns);
                }
                let delegation = classify::ns_contradicted_by_ds(
                    qname,
                    classify::classify_ns_at_parent(qname, parent_zone, &ns, known),
                    &ds,
                );
                // The addresses this parent hands out for the cut's servers, where they
                // are not those the cut holds (glue differing between parent
                // servers sends some resolvers elsewhere).
                let glue = match (&delegation, &ns) {
                    (NsAnswer::Servers { .. }, Ok(m)) if !m.metadata.authoritative => {
                        discovery.glue_differs(cut, parent_zone, &m.additionals)
                    }
                    _ => Vec::new(),
                };
                (answer, (delegation, glue))
            },
        )
        .await;
        let (answers, delegations) = split(both);
        let delegations = self.judge_glue(cut, delegations);
        // A parent address delegating elsewhere than the cached cut: the cache is
        // stale (a re-delegation), so the next child view follows the new one. Both are
        // NS sets; one shared with the cut compares by pointer.
        if delegations
            .iter()
            .any(|d| matches!(&d.answer, NsAnswer::Servers { hosts, .. } if *hosts != cut.ns_set))
        {
            self.0.discovery.forget_zone(&cut.zone);
        }
        Ok(ParentView {
            zone: cut.zone.clone(),
            parent: parent.zone.clone(),
            answers,
            delegations,
            evidence: Evidence::Unchecked,
        })
    }

    /// Glue that differs between parent addresses: where every address that
    /// gives glue gives the same other addresses, the cached cut is stale and forgotten;
    /// otherwise the addresses whose glue differs from the cut's are unknown for the
    /// delegation (the rules that need it wait: no DS announced while a parent may send
    /// resolvers to servers never asked), and the cut is widened so that the next child
    /// view asks every address any parent hands out.
    fn judge_glue(
        &self,
        cut: &ZoneCut,
        delegations: Vec<ServerAnswer<(NsAnswer, Vec<GlueDifference>)>>,
    ) -> Vec<ServerAnswer<NsAnswer>> {
        let referring = delegations
            .iter()
            .filter(|d| matches!(d.answer.0, NsAnswer::Servers { .. }))
            .count();
        let differing: Vec<&Vec<GlueDifference>> = delegations
            .iter()
            .map(|d| &d.answer.1)
            .filter(|g| !g.is_empty())
            .collect();
        let stale = !differing.is_empty()
            && differing.len() == referring
            && differing.iter().all(|g| *g == differing[0]);
        if stale {
            self.0.discovery.forget_zone(&cut.zone);
        } else if !differing.is_empty() {
            let extra: Vec<GlueDifference> =
                differing.iter().flat_map(|g| g.iter().cloned()).collect();
            self.0.discovery.widen(cut, &extra);
        }
        delegations
            .into_iter()
            .map(|d| {
                let (ns, glue) = d.answer;
                let answer = if glue.is_empty() || stale {
                    ns
                } else {
                    let said: Vec<String> = glue
                        .iter()
                        .map(|g| {
                            format!(
                                "{} at {} (the others: {})",
                                g.host,
                                addresses(&g.given),
                                addresses(&g.held)
                            )
                        })
                        .collect();
                    NsAnswer::Unknown(UnknownReason::GlueDiffers(format!(
                        "{}; resolvers this parent server refers go to other addresses",
                        said.join("; ")
                    )))
                };
                ServerAnswer {
                    server: d.server,
                    addr: d.addr,
                    answer,
                }
            })
            .collect()
    }

    /// Every child address's DNSKEY and apex NS answers; with `signals`, its CDS and
    /// CDNSKEY answers too (RFC 7344, RFC 8078: every full look and `check` ask them; a
    /// sample does not). With `pick`, only the address of that turn is asked.
    async fn child_view(
        &self,
        zone: &str,
        signals: bool,
        pick: Option<u64>,
    ) -> Result<ChildView, ObserveError> {
        self.within_budget(zone, async |budget| {
            let _turn = self.0.zones.acquire().await;
            let (cut, _) = self.delegation(zone, budget).await?;
            let at = ChildServers {
                zone: &cut.zone,
                qname: &cut.name,
                servers: &cut.servers,
                known: &cut.ns_set,
            };
            Ok(self.ask_children(at, signals, pick, budget).await)
        })
        .await
    }

    /// As `child_view` without signals, at the servers `name_servers` name instead of
    /// those the parent delegates to (a signed move's target, not delegated yet), their
    /// addresses looked up as a glueless delegation's.
    async fn child_at_view(
        &self,
        zone: &str,
        name_servers: &[String],
    ) -> Result<ChildView, ObserveError> {
        self.within_budget(zone, async |budget| {
            let _turn = self.0.zones.acquire().await;
            let observe_error = |reason: String| ObserveError {
                zone: zone.to_string(),
                reason,
            };
            let name = crate::dnssec::fqdn(zone).map_err(|e| observe_error(e.to_string()))?;
            let qname = wire::parse_name(&name)
                .ok_or_else(|| observe_error(format!("{name} is not a domain name")))?;
            let known: Arc<[String]> = super::delegation::ns_set(name_servers).into();
            // No servers would make every answer-wide question vacuously true.
            if known.is_empty() {
                return Err(observe_error("no name servers to ask".into()));
            }
            let servers = self
                .0
                .discovery
                .servers_named(&name, &known, budget)
                .await
                .map_err(|e| observe_error(e.to_string()))?;
            let at = ChildServers {
                zone: &name,
                qname: &qname,
                servers: &servers,
                known: &known,
            };
            Ok(self.ask_children(at, false, None, budget).await)
        })
        .await
    }

    /// The per-address work of a child view: DNSKEY and apex NS (and with `signals`, CDS
    /// and CDNSKEY) at every address of `at`'s servers.
    async fn ask_children(
        &self,
        at: ChildServers<'_>,
        signals: bool,
        pick: Option<u64>,
        budget: &Budget,
    ) -> ChildView {
        let ChildServers {
            zone,
            qname,
            servers,
            known,
        } = at;
        let port = self.0.port;
        let querier = &self.0.querier;
        let both = ask_addresses(
            servers,
            pick,
            |reason| {
                (
                    DnskeyAnswer::Unknown(reason.clone()),
                    NsAnswer::Unknown(reason),
                )
            },
            |addr| async move {
                let to = SocketAddr::new(addr, port);
                for _ in 0..if signals { 4 } else { 2 } {
                    if let Err(e) = budget.query() {
                        let reason = UnknownReason::Network(e.to_string());
                        return (
                            DnskeyAnswer::Unknown(reason.clone()),
                            NsAnswer::Unknown(reason),
                        );
                    }
                }
                let signal = |qtype| async move {
                    if signals {
                        Some(querier.ask(to, qname, qtype).await)
                    } else {
                        None
                    }
                };
                let (keys, cds, cdnskey, ns) = futures::join!(
                    querier.ask(to, qname, RecordType::DNSKEY),
                    signal(RecordType::CDS),
                    signal(RecordType::CDNSKEY),
                    querier.ask(to, qname, RecordType::NS),
                );
                (
                    classify::classify_dnskey(
                        qname,
                        &keys,
                        cds.as_ref(),
                        cdnskey.as_ref(),
                        unix_now(),
                        budget,
                    ),
                    classify::classify_apex_ns(qname, &ns, known),
                )
            },
        )
        .await;
        let (answers, apex_ns) = split(both);
        ChildView {
            zone: zone.to_string(),
            answers,
            apex_ns,
        }
    }

    /// A key rollover's question (`Observer::soa_signers`): the apex SOA at each address,
    /// each key of the set that address served whose RRSIG over it names its tag checked
    /// (through the signature cache, charged to the budget, rule 4's "at the time of the
    /// look"). An answer without authority, a failure or a budget run out is unknown.
    async fn soa_signers_view(
        &self,
        zone: &str,
        at: &[(IpAddr, Vec<Dnskey>)],
    ) -> Vec<Result<Vec<u16>, String>> {
        let unknown = |why: String| at.iter().map(|_| Err(why.clone())).collect::<Vec<_>>();
        let Some(name) = crate::dnssec::fqdn(zone).ok() else {
            return unknown(format!("{zone} is not a domain name"));
        };
        let Some(qname) = wire::parse_name(&name) else {
            return unknown(format!("{name} is not a domain name"));
        };
        let (port, querier, qname) = (self.0.port, &self.0.querier, &qname);
        let asked = self
            .within_budget(zone, async |budget| {
                let each = at.iter().map(|(addr, keys)| async move {
                    budget.query().map_err(|e| e.to_string())?;
                    let outcome = querier
                        .ask(SocketAddr::new(*addr, port), qname, RecordType::SOA)
                        .await;
                    let message = outcome.map_err(|e| classify::failure_reason(&e).to_string())?;
                    let rcode = message.metadata.response_code;
                    if rcode != hickory_proto::op::ResponseCode::NoError {
                        return Err(format!("the zone's SOA answered {rcode}"));
                    }
                    if !message.metadata.authoritative {
                        return Err("the answer for the zone's SOA has no authority".to_string());
                    }
                    let tags: Vec<u16> = wire::rrsigs(&message.answers, qname, RecordType::SOA)
                        .map(|s| s.input().key_tag)
                        .collect();
                    let signer = wire::name_text(qname);
                    let mut signers = Vec::new();
                    // Bounded as the DNSKEY set's self-signers are: a few keys a look.
                    for key in keys.iter().filter(|k| k.is_zone_key()).take(8) {
                        if !tags.contains(&key.key_tag()) {
                            continue;
                        }
                        match crate::dns::validate::validator::verify_rrset(
                            &message.answers,
                            qname,
                            RecordType::SOA,
                            &signer,
                            std::slice::from_ref(key),
                            unix_now(),
                            budget,
                        ) {
                            Ok(_) => signers.push(key.key_tag()),
                            Err(crate::dns::validate::validator::VerifyError::Failed(_)) => {}
                            Err(e) => return Err(e.to_string()),
                        }
                    }
                    Ok(signers)
                });
                Ok(join_all(each).await)
            })
            .await;
        asked.unwrap_or_else(|e| unknown(e.to_string()))
    }

    /// The DSYNC lookup at every address of the parent's servers (the cut's parent, as
    /// the DS is asked), then the NOTIFY targets of an agreed set resolved: at most
    /// [`MAX_NOTIFY_TARGETS`] distinct host names, each one host lookup of the same
    /// budget.
    async fn parent_dsync_view(&self, zone: &str) -> Result<DsyncView, ObserveError> {
        self.within_budget(zone, async |budget| {
            let _turn = self.0.zones.acquire().await;
            let (cut, parent, _) = self.cut_and_parent(zone, budget).await?;
            let observe_error = |reason: String| ObserveError {
                zone: cut.zone.clone(),
                reason,
            };
            let qtext = wire::dsync_lookup_name(&cut.zone, &parent.zone).ok_or_else(|| {
                observe_error(format!(
                    "no DSYNC lookup name for {} under {}",
                    cut.zone, parent.zone
                ))
            })?;
            let qname = wire::parse_name(&qtext)
                .ok_or_else(|| observe_error(format!("{qtext} is not a domain name")))?;
            let (port, querier, parent_zone) = (self.0.port, &self.0.querier, &parent.zone);
            let qname = &qname;
            let answers = ask_addresses(
                &parent.servers,
                None,
                DsyncAnswer::Unknown,
                |addr| async move {
                    if let Err(e) = budget.query() {
                        return DsyncAnswer::Unknown(UnknownReason::Network(e.to_string()));
                    }
                    let to = SocketAddr::new(addr, port);
                    let outcome = querier.ask(to, qname, RecordType::from(wire::DSYNC)).await;
                    classify::classify_dsync(qname, parent_zone, &outcome)
                },
            )
            .await;
            let mut view = DsyncView {
                zone: cut.zone.clone(),
                parent: parent.zone.clone(),
                qname: qtext,
                answers,
                targets: Vec::new(),
            };
            let records = view.notify_records();
            let mut hosts: Vec<&str> = records.iter().map(|r| r.target.as_str()).collect();
            hosts.sort_unstable();
            hosts.dedup();
            let discovery = &self.0.discovery;
            let looked_up: Vec<(String, Result<Vec<IpAddr>, String>)> = join_all(
                hosts
                    .iter()
                    .take(MAX_NOTIFY_TARGETS)
                    .map(|host| async move {
                        (host.to_string(), discovery.addresses_of(host, budget).await)
                    }),
            )
            .await;
            view.targets = records
                .iter()
                .map(|r| {
                    let found = looked_up.iter().find(|(h, _)| *h == r.target);
                    let (addrs, problem) = match found {
                        Some((_, Ok(addrs))) => (addrs.clone(), None),
                        Some((_, Err(problem))) => (Vec::new(), Some(problem.clone())),
                        None => (
                            Vec::new(),
                            Some(format!(
                                "not looked up: more than {MAX_NOTIFY_TARGETS} distinct targets"
                            )),
                        ),
                    };
                    NotifyTarget {
                        rrtype: r.rrtype,
                        target: r.target.clone(),
                        port: r.port,
                        addrs,
                        problem,
                    }
                })
                .collect();
            Ok(view)
        })
        .await
    }

    /// `host`'s addresses, within one observation's budget.
    async fn host_addresses_view(&self, host: &str) -> Result<Vec<IpAddr>, ObserveError> {
        self.within_budget(host, async |budget| {
            let name = crate::dnssec::fqdn(host).map_err(|e| ObserveError {
                zone: host.to_string(),
                reason: e.to_string(),
            })?;
            self.0
                .discovery
                .addresses_of(&name, budget)
                .await
                .map_err(|reason| ObserveError {
                    zone: name.clone(),
                    reason,
                })
        })
        .await
    }

    /// Our validator's and the resolvers' probes, within `dns.observation_timeout`. (The
    /// validator looks delegations up with a budget of its own per zone cut.)
    async fn validation_probes(&self, zone: &str) -> Vec<ValidationProbe> {
        let budget = Budget::new(self.0.budget);
        match tokio::time::timeout_at(budget.deadline(), self.validation_probes_now(zone, &budget))
            .await
        {
            Ok(probes) => probes,
            Err(_elapsed) => vec![ValidationProbe {
                source: "validator".into(),
                verdict: ValidationVerdict::Unknown,
                detail: budget.time_is_up().to_string(),
            }],
        }
    }

    /// Our validator over this observer's querier, delegations and anchors.
    fn validator<'a>(&'a self, now: u32, budget: &'a Budget) -> Validator<'a, T> {
        Validator::new(
            &self.0.querier,
            &self.0.discovery,
            &self.0.anchors,
            self.0.port,
            now,
            budget,
        )
    }

    /// The daemon-wide `trust_anchor_mismatch` condition ([`Self::check_trust_anchors`]).
    pub fn trust_anchor_condition(&self) -> Arc<crate::condition::Condition> {
        self.0.anchors_served.clone()
    }

    /// Whether the configured trust anchors name keys their zones serve now (a stale
    /// anchor is the operator's fault, said once, not an outage of every zone): the
    /// daemon-wide condition follows what is seen; unknown leaves it as it was.
    pub async fn check_trust_anchors(&self) -> crate::dns::validate::validator::AnchorCheck {
        use crate::dns::validate::validator::AnchorCheck;
        let check = self.check_trust_anchors_now().await;
        match &check {
            AnchorCheck::Served => self.0.anchors_served.clear(),
            AnchorCheck::Mismatch(d) => self.0.anchors_served.holds(format!(
                "{d}: no answer can be validated from it, so every decision that needs validated evidence waits (a configuration fault, not an outage of the zones)"
            )),
            AnchorCheck::Unknown(_) => {}
        }
        check
    }

    async fn check_trust_anchors_now(&self) -> crate::dns::validate::validator::AnchorCheck {
        let budget = Budget::new(self.0.budget);
        let validator = self.validator(unix_now(), &budget);
        match tokio::time::timeout_at(budget.deadline(), validator.check_anchors()).await {
            Ok(check) => check,
            Err(_elapsed) => crate::dns::validate::validator::AnchorCheck::Unknown(
                budget.time_is_up().to_string(),
            ),
        }
    }

    async fn validation_probes_now(&self, zone: &str, budget: &Budget) -> Vec<ValidationProbe> {
        let _turn = self.0.zones.acquire().await;
        let name = match crate::dnssec::fqdn(zone) {
            Ok(n) => n,
            Err(e) => {
                return vec![ValidationProbe {
                    source: "validator".into(),
                    verdict: ValidationVerdict::Unknown,
                    detail: e.to_string(),
                }];
            }
        };
        let validator = self.validator(unix_now(), budget);
        let ours = self.our_probe(&validator, zone, &name);
        let theirs = join_all(
            self.0
                .resolvers
                .iter()
                .map(|r| resolvers::probe(&self.0.querier, *r, &name)),
        );
        let (ours, theirs) = futures::join!(ours, theirs);
        let mut probes = vec![ours];
        probes.extend(theirs);
        probes
    }
}

impl<T: Transport> DnsObserver<T> {
    /// Our validator's probe: from the parent zone's keys in the cache (as the validated
    /// parent views use them) when they are trusted and no trust anchor sits at the zone
    /// itself; else the whole walk from the trust anchor. A probe per active zone walked
    /// the chain above its parent again each time: at a TLD, its DNSKEY at every address
    /// for every zone.
    async fn our_probe(
        &self,
        validator: &Validator<'_, T>,
        zone: &str,
        name: &str,
    ) -> ValidationProbe {
        let budget = Budget::new(self.0.budget);
        if let Ok((cut, parent, _)) = self.cut_and_parent(zone, &budget).await
            && !self.0.anchors.covers(&cut.zone)
            && let ParentKeys::Trusted(keys) = self.parent_keys(&parent).await
        {
            return validator.probe_below(&cut, &parent, &keys).await;
        }
        validator.probe(name).await
    }
}

fn unix_now() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or_default()
}

/// Distinct NOTIFY target names one DSYNC lookup resolves at most: a parent names one
/// or two; more is a parent's mistake or a way to make us ask a lot.
pub const MAX_NOTIFY_TARGETS: usize = 4;

/// The servers a child view asks: the delegation's, or those a signed move's target names.
#[derive(Clone, Copy)]
struct ChildServers<'a> {
    zone: &'a str,
    qname: &'a hickory_proto::rr::Name,
    servers: &'a [NameServer],
    /// Their host names as an NS set: the apex NS set they should serve.
    known: &'a Arc<[String]>,
}

/// A parent zone's keys as a validated view uses them.
#[derive(Debug, Clone)]
enum ParentKeys {
    Trusted(Arc<Vec<Dnskey>>),
    Insecure(String),
    Failed(String),
}

/// The longest a parent's keys are kept, whatever their TTL: a key roll at the parent is
/// seen within this.
const KEYS_KEPT_AT_MOST: Duration = Duration::from_secs(3600);
/// How long a failure to establish a parent's keys is kept: long enough that 10,000 zones
/// under a broken parent do not each walk the chain again, short enough that a repaired
/// parent is seen at the next poll.
const KEYS_FAILURE_KEPT: Duration = Duration::from_secs(5);

/// Counters of the parents' key cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyCacheStats {
    /// Chain walks from the trust anchor to a parent zone's DNSKEY set.
    pub fetches: u64,
    /// Validated views served from a cached (or in-flight) key set.
    pub hits: u64,
}

/// One parent zone's keys: filled once, by the first view that needs them, for every
/// view waiting meanwhile (one DNSKEY fetch serves 10,000 zones).
#[derive(Default)]
struct KeyEntry {
    cell: tokio::sync::OnceCell<(ParentKeys, Instant)>,
}

#[derive(Default)]
struct KeyCache {
    entries: Mutex<HashMap<String, Arc<KeyEntry>>>,
    fetches: AtomicU64,
    hits: AtomicU64,
}

impl KeyCache {
    /// The live entry for `zone`: the cached one unless it has expired.
    fn entry(&self, zone: &str) -> Arc<KeyEntry> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = entries.get(zone)
            && e.cell
                .get()
                .is_none_or(|(_, until)| Instant::now() < *until)
        {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return e.clone();
        }
        let fresh = Arc::new(KeyEntry::default());
        entries.insert(zone.to_string(), fresh.clone());
        fresh
    }

    fn forget(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn stats(&self) -> KeyCacheStats {
        KeyCacheStats {
            fetches: self.fetches.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
        }
    }
}

/// Asks every address of every server at once (`ask`); a server without any address is
/// answered `unknown(NoAddress)` instead, so that it still counts, as unknown, in every
/// unanimous decision. With `pick`, only the entry of that turn, counted round them all.
async fn ask_addresses<A, Fut>(
    servers: &[NameServer],
    pick: Option<u64>,
    unknown: impl Fn(UnknownReason) -> A,
    ask: impl Fn(IpAddr) -> Fut,
) -> Vec<ServerAnswer<A>>
where
    Fut: Future<Output = A>,
{
    let ask = &ask;
    let asks = servers.iter().flat_map(|server| {
        let unaddressed = server.addrs.is_empty().then(|| {
            let answer = ServerAnswer {
                server: server.host.clone(),
                addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                answer: unknown(UnknownReason::NoAddress(
                    server
                        .problem
                        .clone()
                        .unwrap_or_else(|| format!("no address learnt for {}", server.host)),
                )),
            };
            futures::future::Either::Left(async move { answer })
        });
        server
            .addrs
            .iter()
            .map(move |addr| {
                futures::future::Either::Right(async move {
                    ServerAnswer {
                        server: server.host.clone(),
                        addr: *addr,
                        answer: ask(*addr).await,
                    }
                })
            })
            .chain(unaddressed)
    });
    // Collected first: with its length known, `join_all` polls a handful of futures in
    // place instead of building a `FuturesOrdered` (an allocation per future). Nothing is
    // asked before it is polled, so a sample drops the others unasked.
    let mut asks: Vec<_> = asks.collect();
    if let Some(at) = pick.and_then(|turn| super::model::sample_index(asks.len(), turn)) {
        asks = vec![asks.swap_remove(at)];
    }
    join_all(asks).await
}

/// One list of paired answers as two lists in the same order.
fn split<A, B>(both: Vec<ServerAnswer<(A, B)>>) -> (Vec<ServerAnswer<A>>, Vec<ServerAnswer<B>>) {
    both.into_iter()
        .map(|a| {
            let (first, second) = a.answer;
            (
                ServerAnswer {
                    server: a.server.clone(),
                    addr: a.addr,
                    answer: first,
                },
                ServerAnswer {
                    server: a.server,
                    addr: a.addr,
                    answer: second,
                },
            )
        })
        .unzip()
}

impl<T: Transport> Observer for DnsObserver<T> {
    fn parent(&self, zone: &str) -> impl Future<Output = Result<ParentView, ObserveError>> + Send {
        super::tally::full_look();
        self.parent_view(zone)
    }

    fn parent_validated(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<ParentView, ObserveError>> + Send {
        super::tally::full_look();
        self.parent_validated_view(zone, None)
    }

    fn parent_sample(
        &self,
        zone: &str,
        turn: u64,
    ) -> impl Future<Output = Result<ParentView, ObserveError>> + Send {
        super::tally::sampled_look();
        self.parent_validated_view(zone, Some(turn))
    }

    fn child_sample(
        &self,
        zone: &str,
        turn: u64,
    ) -> impl Future<Output = Result<ChildView, ObserveError>> + Send {
        self.child_view(zone, false, Some(turn))
    }

    fn child(&self, zone: &str) -> impl Future<Output = Result<ChildView, ObserveError>> + Send {
        self.child_view(zone, false, None)
    }

    fn child_at(
        &self,
        zone: &str,
        name_servers: &[String],
    ) -> impl Future<Output = Result<ChildView, ObserveError>> + Send {
        self.child_at_view(zone, name_servers)
    }

    fn child_with_signals(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<ChildView, ObserveError>> + Send {
        self.child_view(zone, true, None)
    }

    fn soa_signers(
        &self,
        zone: &str,
        at: &[(IpAddr, Vec<Dnskey>)],
    ) -> impl Future<Output = Vec<Result<Vec<u16>, String>>> + Send {
        self.soa_signers_view(zone, at)
    }

    fn validation(&self, zone: &str) -> impl Future<Output = Vec<ValidationProbe>> + Send {
        self.validation_probes(zone)
    }

    fn parent_dsync(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<DsyncView, ObserveError>> + Send {
        self.parent_dsync_view(zone)
    }

    fn addresses_of(
        &self,
        host: &str,
    ) -> impl Future<Output = Result<Vec<IpAddr>, ObserveError>> + Send {
        self.host_addresses_view(host)
    }

    fn notify_cds(
        &self,
        zone: &str,
        to: SocketAddr,
    ) -> impl Future<Output = crate::dns::net::notify::NotifyReport> + Send {
        self.notify(
            to,
            zone,
            RecordType::CDS,
            &crate::dns::net::notify::NotifyOptions::DAEMON,
        )
    }
}

/// Addresses for a message: `127.0.0.1, ::1`.
fn addresses(list: &[IpAddr]) -> String {
    let text: Vec<String> = list.iter().map(ToString::to_string).collect();
    text.join(", ")
}
