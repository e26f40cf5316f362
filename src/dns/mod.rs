//! The public DNS as dnssec-warden sees it: the DS at every parent server, the DNSKEY at
//! every child server, and whether the chain validates.

pub mod anchor;
pub mod budget;
pub mod check;
pub mod classify;
pub mod delegation;
pub mod discovery;
pub mod ipv6;
pub mod model;
pub mod observer;
pub mod proof;
pub mod query;
pub mod resolvers;
pub mod settings;
pub mod sigcache;
pub mod transport;
pub mod validator;
pub mod wire;

pub use anchor::{AnchorError, TrustAnchors};
pub use budget::{Budget, Exhausted, ObservationBudget};
pub use delegation::{
    DelegationAssessment, DelegationDetail, DelegationMatch, DelegationVerdict, NsAnswer,
};
pub use discovery::AddressFamilies;
pub use model::{
    ChildKeys, ChildView, DnskeyAnswer, DsAnswer, Evidence, ParentAssessment, ParentDsVerdict,
    ParentView, ServedKeys, ServerAnswer, SignatureWindow, UnknownReason, ValidationProbe,
    ValidationVerdict, VerdictReason, combine_validation,
};
pub use observer::{DnsObserver, KeyCacheStats, ObserverOptions, ObserverSetupError};
pub use query::QueryStats;
pub use settings::DnsSettings;
pub use transport::{ExchangeError, ExchangeFuture, NetTransport, Transport};

/// The maps every exchange visits (questions in flight, a socket's waiting IDs, the
/// sockets, the delegation cache). Their keys are ours (names we ask, IDs we drew), not
/// an attacker's choice; SipHash's cost shows at tens of thousands of exchanges a second.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

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
    /// As `child`, with each address's CDS and CDNSKEY answers too (RFC 8078 signals:
    /// `check` shows them; the lifecycle decides nothing on them).
    fn child_with_signals(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<ChildView, ObserveError>> + Send {
        self.child(zone)
    }
    /// Our validator's and each configured validating resolver's view of the zone.
    fn validation(&self, zone: &str) -> impl Future<Output = Vec<ValidationProbe>> + Send;
}
