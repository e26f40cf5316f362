//! [`DnsObserver`]: the real [`Observer`], over the public DNS (or the lab's).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::future::join_all;
use hickory_proto::rr::RecordType;
use tokio::sync::Semaphore;

use super::anchor::{AnchorError, TrustAnchors};
use super::budget::Budget;
use super::classify;
use super::delegation::{NsAnswer, ns_set};
use super::discovery::{Discovery, DiscoveryError, NameServer, ZoneCut};
use super::model::{
    ChildView, DnskeyAnswer, DsAnswer, ParentView, ServerAnswer, UnknownReason, ValidationProbe,
};
use super::query::{Limits, Querier, QueryStats};
use super::transport::{NetTransport, Transport};
use super::validator::Validator;
use super::{ObserveError, Observer, resolvers};
use crate::config::{DnsSettings, ObservationBudget};

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
            zones_in_flight: 256,
            queries_in_flight: crate::config::MAX_QUERIES_PER_SERVER,
            per_server: crate::config::DEFAULT_QUERIES_PER_SERVER,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ObserverSetupError {
    #[error(transparent)]
    Anchor(#[from] AnchorError),
}

struct Inner {
    querier: Arc<Querier>,
    discovery: Discovery,
    anchors: TrustAnchors,
    port: u16,
    resolvers: Vec<SocketAddr>,
    zones: Semaphore,
    budget: ObservationBudget,
}

/// Observes zones by asking every server directly. Cheap to clone; clones share the
/// delegation cache and the limits.
#[derive(Clone)]
pub struct DnsObserver(Arc<Inner>);

impl std::fmt::Debug for DnsObserver {
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

    /// Over any transport: the tests' scripted servers, for one.
    pub fn with_transport(
        settings: &DnsSettings,
        options: ObserverOptions,
        transport: Arc<dyn Transport>,
    ) -> Result<Self, ObserverSetupError> {
        let anchors = TrustAnchors::load(settings.trust_anchor_file.as_deref())?;
        let querier = Arc::new(Querier::new(
            transport,
            Limits {
                in_flight: options.queries_in_flight,
                per_server: options.per_server,
                attempts: settings.query_attempts,
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
        })))
    }

    pub fn stats(&self) -> QueryStats {
        self.0.querier.stats()
    }

    /// Forgets every cached delegation.
    pub fn forget_delegations(&self) {
        self.0.discovery.forget();
    }

    /// `observe` within one observation's budget (`dns.observation_timeout`, the
    /// `dns.max_*` keys), the wait for its turn included: a budget run out anywhere is
    /// the observation's result, unknown, whatever was heard meanwhile.
    async fn within_budget<T>(
        &self,
        zone: &str,
        observe: impl AsyncFnOnce(&Budget) -> Result<T, ObserveError>,
    ) -> Result<T, ObserveError> {
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

    async fn delegation(&self, zone: &str, budget: &Budget) -> Result<Arc<ZoneCut>, ObserveError> {
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
            let cut = self.delegation(zone, budget).await?;
            let Some(parent) = cut.parent.clone() else {
                return Err(ObserveError {
                    zone: zone.into(),
                    reason: "no parent zone found".into(),
                });
            };
            let qname = &cut.name;
            let port = self.0.port;
            let querier = &self.0.querier;
            let parent_zone = &parent.zone;
            // DS and NS side by side at every address: the NS answer tells whom the
            // parent sends resolvers to and also settles an NXDOMAIN for the DS (a
            // server that refers the zone and denies it contradicts itself), so it is
            // asked once.
            let both = ask_every_address(
                &parent.servers,
                |reason| (DsAnswer::Unknown(reason.clone()), NsAnswer::Unknown(reason)),
                |addr| async move {
                    let budget_spent = |e: super::Exhausted| {
                        let reason = UnknownReason::Network(e.to_string());
                        (DsAnswer::Unknown(reason.clone()), NsAnswer::Unknown(reason))
                    };
                    if let Err(e) = budget.query().and_then(|()| budget.query()) {
                        return budget_spent(e);
                    }
                    let to = SocketAddr::new(addr, port);
                    let (ds, ns) = futures::join!(
                        querier.ask(to, qname, RecordType::DS),
                        querier.ask(to, qname, RecordType::NS),
                    );
                    let mut answer = classify::classify_ds(qname, parent_zone, &ds);
                    if classify::is_nxdomain(&ds) {
                        answer = classify::contradicted_by_referral(qname, answer, &ns);
                    }
                    let delegation = classify::ns_contradicted_by_ds(
                        qname,
                        classify::classify_ns_at_parent(qname, parent_zone, &ns),
                        &ds,
                    );
                    (answer, delegation)
                },
            )
            .await;
            let (answers, delegations) = split(both);
            // A parent address delegating elsewhere than the cached cut: the cache is
            // stale (a re-delegation), so the next child view follows the new one.
            let cached = ns_set(cut.servers.iter().map(|s| s.host.as_str()));
            if delegations
                .iter()
                .any(|d| matches!(&d.answer, NsAnswer::Servers { hosts, .. } if *hosts != cached))
            {
                self.0.discovery.forget_zone(&cut.zone);
            }
            Ok(ParentView {
                zone: cut.zone.clone(),
                parent: parent.zone.clone(),
                answers,
                delegations,
            })
        })
        .await
    }

    async fn child_view(&self, zone: &str) -> Result<ChildView, ObserveError> {
        self.within_budget(zone, async |budget| {
            let _turn = self.0.zones.acquire().await;
            let cut = self.delegation(zone, budget).await?;
            let qname = &cut.name;
            let port = self.0.port;
            let querier = &self.0.querier;
            let both = ask_every_address(
                &cut.servers,
                |reason| {
                    (
                        DnskeyAnswer::Unknown(reason.clone()),
                        NsAnswer::Unknown(reason),
                    )
                },
                |addr| async move {
                    let to = SocketAddr::new(addr, port);
                    for _ in 0..4 {
                        if let Err(e) = budget.query() {
                            let reason = UnknownReason::Network(e.to_string());
                            return (
                                DnskeyAnswer::Unknown(reason.clone()),
                                NsAnswer::Unknown(reason),
                            );
                        }
                    }
                    let (keys, cds, cdnskey, ns) = futures::join!(
                        querier.ask(to, qname, RecordType::DNSKEY),
                        querier.ask(to, qname, RecordType::CDS),
                        querier.ask(to, qname, RecordType::CDNSKEY),
                        querier.ask(to, qname, RecordType::NS),
                    );
                    (
                        classify::classify_dnskey(qname, &keys, Some(&cds), Some(&cdnskey)),
                        classify::classify_apex_ns(qname, &ns),
                    )
                },
            )
            .await;
            let (answers, apex_ns) = split(both);
            Ok(ChildView {
                zone: cut.zone.clone(),
                answers,
                apex_ns,
            })
        })
        .await
    }

    /// Our validator's and the resolvers' probes, within `dns.observation_timeout`. (The
    /// validator looks delegations up with a budget of its own per zone cut.)
    async fn validation_probes(&self, zone: &str) -> Vec<ValidationProbe> {
        let budget = Budget::new(self.0.budget);
        match tokio::time::timeout_at(budget.deadline(), self.validation_probes_now(zone)).await {
            Ok(probes) => probes,
            Err(_elapsed) => vec![ValidationProbe {
                source: "validator".into(),
                verdict: super::ValidationVerdict::Unknown,
                detail: budget.time_is_up().to_string(),
            }],
        }
    }

    async fn validation_probes_now(&self, zone: &str) -> Vec<ValidationProbe> {
        let _turn = self.0.zones.acquire().await;
        let name = match crate::dnssec::fqdn(zone) {
            Ok(n) => n,
            Err(e) => {
                return vec![ValidationProbe {
                    source: "validator".into(),
                    verdict: super::ValidationVerdict::Unknown,
                    detail: e.to_string(),
                }];
            }
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as u32)
            .unwrap_or_default();
        let validator = Validator {
            querier: &self.0.querier,
            discovery: &self.0.discovery,
            anchors: &self.0.anchors,
            port: self.0.port,
            now,
        };
        let ours = validator.probe(&name);
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

/// Asks every address of every server at once (`ask`); a server without any address is
/// answered `unknown(NoAddress)` instead, so that it still counts, as unknown, in every
/// unanimous decision.
async fn ask_every_address<A, Fut>(
    servers: &[NameServer],
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

impl Observer for DnsObserver {
    fn parent(&self, zone: &str) -> impl Future<Output = Result<ParentView, ObserveError>> + Send {
        self.parent_view(zone)
    }

    fn child(&self, zone: &str) -> impl Future<Output = Result<ChildView, ObserveError>> + Send {
        self.child_view(zone)
    }

    fn validation(&self, zone: &str) -> impl Future<Output = Vec<ValidationProbe>> + Send {
        self.validation_probes(zone)
    }
}
