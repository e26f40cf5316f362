//! The observer and its vocabulary: what every parent and child server said, the
//! verdicts drawn from it, and the [`Observer`] the lifecycle asks. Uses validation and
//! networking below it.

pub mod check;
pub mod classify;
pub mod delegation;
pub mod dsync;
pub mod model;
pub mod observer;
pub mod resolvers;
pub mod settings;
pub mod signals;
pub mod split;
pub mod tally;

use self::model::{ChildView, DsyncView, ParentView};
use super::net::notify::{NotifyOutcome, NotifyReport};
use super::validate::ValidationProbe;

/// Discovery failed before any server could be asked: the parent or the delegation could
/// not be found. To the lifecycle this is the same as every answer being unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot observe {zone}: {reason}")]
pub struct ObserveError {
    pub zone: String,
    pub reason: String,
}

/// What the lifecycle needs from the DNS. Zone names are lower case with the trailing dot.
/// Implementations ask every address of every server directly (RD=0), never a cache.
pub trait Observer: Send + Sync {
    /// The DS answer and the delegation (NS) of every address of every parent name server.
    fn parent(&self, zone: &str) -> impl Future<Output = Result<ParentView, ObserveError>> + Send;
    /// The same answers as `parent`, each validated from the trust anchor (safety rule
    /// 10): a DS present needs a valid RRSIG by the parent's zone key, a DS absent a
    /// valid NSEC or NSEC3 denial, signatures valid at the time of the look. An answer
    /// that fails is `unknown` (`bogus_proof`); `evidence` is `validated`, or `insecure`
    /// when the parent zone is provably insecure.
    fn parent_validated(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<ParentView, ObserveError>> + Send;
    /// The DNSKEY (and apex NS) answer of every address of every name server the parent
    /// delegates to.
    fn child(&self, zone: &str) -> impl Future<Output = Result<ChildView, ObserveError>> + Send;
    /// As `child`, at the addresses of `name_servers` (host names) instead of the servers
    /// the parent delegates to: a signed move's target before the NS change. Their
    /// addresses are looked up as a glueless delegation's, within the same budget and
    /// caps (`dns.max_ns_per_delegation`, `dns.max_addresses_per_server`).
    fn child_at(
        &self,
        zone: &str,
        name_servers: &[String],
    ) -> impl Future<Output = Result<ChildView, ObserveError>> + Send;
    /// As `child`, with each address's CDS and CDNSKEY answers too (RFC 7344, RFC 8078:
    /// the signals a registry that scans acts on), each checked for signatures by the
    /// address's served keys.
    fn child_with_signals(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<ChildView, ObserveError>> + Send {
        self.child(zone)
    }
    /// A key rollover's look (DESIGN.md "Key rollovers"): at each address of `at`, given
    /// the keys to check against (the DNSKEY set it served, and the keys the provider
    /// lists, which may sign unpublished), the key tags whose RRSIG over the zone's apex
    /// SOA verified at the time of the look (which keys sign the zone's data), in the order
    /// of `at`. The default knows none: every address unknown (rule 3), so no phase that
    /// needs the data's signers moves on.
    fn soa_signers(
        &self,
        zone: &str,
        at: &[(std::net::IpAddr, Vec<crate::dnssec::Dnskey>)],
    ) -> impl Future<Output = Vec<Result<Vec<u16>, String>>> + Send {
        let _ = zone;
        let unknown = at
            .iter()
            .map(|_| Err("this observer does not check the zone's data signatures".to_string()))
            .collect();
        async move { unknown }
    }
    /// A settled zone's sampled look at the parent (DESIGN.md section 4): as
    /// `parent_validated`, but only one address is asked, the `turn`-th counted round all
    /// of them. The default asks them all and keeps that one (for fakes).
    fn parent_sample(
        &self,
        zone: &str,
        turn: u64,
    ) -> impl Future<Output = Result<ParentView, ObserveError>> + Send {
        async move { Ok(self.parent_validated(zone).await?.sampled(turn)) }
    }
    /// As `child`, from the one address of the `turn`.
    fn child_sample(
        &self,
        zone: &str,
        turn: u64,
    ) -> impl Future<Output = Result<ChildView, ObserveError>> + Send {
        async move { Ok(self.child(zone).await?.sampled(turn)) }
    }
    /// The DSYNC records (RFC 9859) for `zone` at every address of its parent's servers,
    /// with the house's unanimity ([`DsyncView::verdict`]) and the NOTIFY targets of an
    /// agreed set resolved. Hints, not evidence: not validated (RFC 9859 does not ask
    /// it; the registry checks the CDS itself). The default (for fakes) knows nothing.
    fn parent_dsync(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<DsyncView, ObserveError>> + Send {
        let zone = zone.to_string();
        async move {
            Err(ObserveError {
                zone,
                reason: "this observer does not look up DSYNC records".into(),
            })
        }
    }
    /// The addresses (A and AAAA) of `host`, asked of its zone's servers: a NOTIFY
    /// target's, say. The default (for fakes) knows none.
    fn addresses_of(
        &self,
        host: &str,
    ) -> impl Future<Output = Result<Vec<std::net::IpAddr>, ObserveError>> + Send {
        let host = host.to_string();
        async move {
            Err(ObserveError {
                zone: host,
                reason: "this observer does not look up addresses".into(),
            })
        }
    }
    /// Sends NOTIFY(CDS) for `zone` to a parent's notification target (RFC 9859), at the
    /// address's pace, with the daemon's attempts (`NotifyOptions::DAEMON`). The default
    /// (for fakes) sends nothing and says so.
    fn notify_cds(
        &self,
        zone: &str,
        to: std::net::SocketAddr,
    ) -> impl Future<Output = NotifyReport> + Send {
        let _ = (zone, to);
        async move {
            NotifyReport {
                outcome: NotifyOutcome::Failed {
                    detail: "this observer sends no NOTIFY".into(),
                },
                attempts: 0,
                ignored: 0,
            }
        }
    }
    /// Our validator's and each configured validating resolver's view of the zone.
    fn validation(&self, zone: &str) -> impl Future<Output = Vec<ValidationProbe>> + Send;
}
