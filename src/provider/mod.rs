//! The managed DNS provider: a typed client for its DNS API v2 ([`GcoreClient`]) behind
//! the [`Provider`] trait, which the engine depends on so that it can be tested with fakes.

mod client;
mod error;
mod types;

pub use crate::retry::{
    MAX_RETRY_AFTER, RetryPolicy, is_retryable_status, parse_retry_after, parse_retry_after_at,
};
pub use client::{
    DNSSEC_DISABLED_MESSAGE, GcoreClient, LOGINS_PER_SECOND, MAX_BODY_BYTES, PAGE_LIMIT,
    PROVIDER_REQUESTS_IN_FLIGHT,
};
pub use error::{ACCOUNT_REFUSED, Attempts, ErrorClass, ProviderError};
pub use types::{
    CreatedZone, DnssecKey, DnssecStatus, ListedZone, NewZone, ParentDsHint, ProviderZone,
    RawDnssec, ResourceRecord, Rrset, RrsetBody, ZoneRecordSummary,
};

/// The answer to `PATCH …/dnssec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnssecSwitched {
    pub message: Option<String>,
    /// The key the provider now signs with; only when switching on.
    pub key: Option<DnssecKey>,
}

/// Asked right before each attempt of a request leaves; false: do not send it (the last
/// failure stands, or [`ProviderError::NotSent`]).
pub type SendPermit<'a> = &'a (dyn Fn() -> PermitAnswer<'a> + Send + Sync);

/// The answer of a [`SendPermit`], once it has asked (a database, say).
pub type PermitAnswer<'a> = std::pin::Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// What the daemon needs from the provider. Zone names may carry the trailing dot.
pub trait Provider: Send + Sync {
    fn get_zone(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<ProviderZone, ProviderError>> + Send;
    fn list_zones(&self) -> impl Future<Output = Result<Vec<ProviderZone>, ProviderError>> + Send;
    /// The same listing, each zone's name and `dnssec_enabled` only (what the engine and
    /// the zone keeper need: far less memory for a large account).
    fn list_zone_flags(
        &self,
    ) -> impl Future<Output = Result<Vec<ListedZone>, ProviderError>> + Send {
        async move {
            self.list_zones()
                .await
                .map(|zones| zones.into_iter().map(ListedZone::from).collect())
        }
    }
    /// Switches DNSSEC on or off. `may_send` is asked right before every attempt leaves
    /// (the first, once its turn among the requests in flight has come; a retry after a
    /// timeout or a 5xx; after a token renewal): with several daemons, whether this one's
    /// lease on the zone is still current, so that a request whose lease ran out while it
    /// waited is not sent, nor repeated (DESIGN.md rule 12).
    fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        may_send: SendPermit<'_>,
    ) -> impl Future<Output = Result<DnssecSwitched, ProviderError>> + Send;
    /// The signing key, checked against its own DS (safety rule 5);
    /// [`ProviderError::DnssecDisabled`] when DNSSEC is off.
    fn get_dnssec(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<DnssecKey, ProviderError>> + Send;
    /// Every RRset of the zone (for its largest TTL, which bounds the enabling hold).
    fn list_rrsets(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<Vec<Rrset>, ProviderError>> + Send;
    /// The provider's own scan of the parent: a hint for reports, never a decision input.
    fn get_parent_ds(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<ParentDsHint, ProviderError>> + Send;
}
