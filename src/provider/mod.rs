//! The managed DNS provider: the [`Provider`] trait the engine depends on (so that it can
//! be tested with fakes, and a second provider added), its errors and their classes, and
//! one implementation per provider API in its own folder ([`gcore`]).
//!
//! The trait still speaks some of the Gcore API's shapes ([`ProviderZone`], [`Rrset`],
//! [`ParentDsHint`]); the signing key is provider-neutral ([`DnssecKey`], checked against
//! its own public key by whoever implements the trait).

mod error;
pub mod gcore;

use serde::Deserialize;

use crate::dnssec::DnssecKey;

pub use crate::retry::{
    MAX_RETRY_AFTER, RetryPolicy, is_retryable_status, parse_retry_after, parse_retry_after_at,
};
pub use error::{ACCOUNT_REFUSED, Attempts, ErrorClass, ProviderError};
pub use gcore::{
    CreatedZone, DNSSEC_DISABLED_MESSAGE, DnssecStatus, GcoreClient, LOGINS_PER_SECOND,
    MAX_BODY_BYTES, NewZone, PAGE_LIMIT, PROVIDER_REQUESTS_IN_FLIGHT, ParentDsHint, ProviderZone,
    RawDnssec, ResourceRecord, Rrset, RrsetBody, ZoneRecordSummary,
};

/// What the daemon keeps of an entry of the paged zone listing: its name and its
/// `dnssec_enabled` (missing or `null`: unknown). 100,000 of these are small; 100,000
/// [`ProviderZone`]s with their record summaries are not.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ListedZone {
    pub name: String,
    #[serde(default)]
    pub dnssec_enabled: Option<bool>,
}

/// The answer to switching DNSSEC on or off.
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
