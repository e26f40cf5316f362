//! The managed DNS provider: the [`Provider`] trait the engine depends on (so that it can
//! be tested with fakes, and a second provider added), its errors and their classes, and
//! one implementation per provider API in its own folder ([`gcore`], [`powerdns`]), and
//! [`fleet`]: several accounts in one daemon, each zone's calls at the account holding it.
//!
//! The trait speaks the daemon's terms ([`HostedZone`], [`ListedZone`], the signing key
//! [`DnssecKey`] checked against its own public key by whoever implements it); each API's
//! own shapes stay in its folder.

mod error;
pub mod fleet;
pub mod gcore;
mod http;
pub mod powerdns;

use serde::Deserialize;

pub use crate::dnssec::CdsPublication;
use crate::dnssec::DnssecKey;

pub use crate::retry::{
    MAX_RETRY_AFTER, RetryPolicy, is_retryable_status, parse_retry_after, parse_retry_after_at,
};
pub use error::{ACCOUNT_REFUSED, Attempts, ErrorClass, ProviderError};
pub use http::{MAX_BODY_BYTES, PROVIDER_REQUESTS_IN_FLIGHT};

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

/// A zone as the provider hosts it, in the terms the daemon decides on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedZone {
    pub name: String,
    /// `None` when the provider did not say: unknown, never "off". Decisions use the
    /// signing key ([`Provider::dnssec_key`]), not this flag.
    pub dnssec_enabled: Option<bool>,
    /// The provider's name servers for the zone, as a comparable set
    /// (`dns::delegation::ns_set`); `None` when it lists none (unknown, never "no name
    /// servers").
    pub name_servers: Option<Vec<String>>,
}

/// What the daemon needs from a provider, whichever its API. Zone names may carry the
/// trailing dot.
pub trait Provider: Send + Sync {
    fn zone(&self, zone: &str) -> impl Future<Output = Result<HostedZone, ProviderError>> + Send;
    /// Every zone of the account, each its name and DNSSEC flag only (what the engine and
    /// the zone keeper need: little memory for a large account).
    fn zone_flags(&self) -> impl Future<Output = Result<Vec<ListedZone>, ProviderError>> + Send;
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
    fn dnssec_key(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<DnssecKey, ProviderError>> + Send;
    /// The largest TTL of the zone's records (it bounds the enabling hold); `Ok(None)`
    /// when a record set has no known TTL (a wait bounded by a guess would be too short).
    fn largest_ttl(
        &self,
        zone: &str,
    ) -> impl Future<Output = Result<Option<u32>, ProviderError>> + Send;
    /// What the zone's CDS/CDNSKEY publication is set to, where the API controls it;
    /// `Ok(None)` where it does not (the Gcore API shows none), asking nothing.
    fn cds_publication(
        &self,
        _zone: &str,
    ) -> impl Future<Output = Result<Option<CdsPublication>, ProviderError>> + Send {
        async { Ok(None) }
    }
    /// Sets the zone's CDS/CDNSKEY publication (DESIGN.md rule 14), with `may_send` as
    /// for [`Provider::set_dnssec`]. A provider whose API cannot is refused before any
    /// request.
    fn set_cds_publication(
        &self,
        zone: &str,
        _to: CdsPublication,
        _may_send: SendPermit<'_>,
    ) -> impl Future<Output = Result<(), ProviderError>> + Send {
        let zone = zone.to_string();
        async move {
            Err(ProviderError::Invalid(format!(
                "the provider's API does not control the CDS of {zone}"
            )))
        }
    }
    /// The name of the configured account that holds the zone, as far as known without
    /// asking (`fleet::Providers`); `None` for a lone client.
    fn account(&self, _zone: &str) -> Option<String> {
        None
    }
    /// How many accounts stand behind this provider (1 for a lone client).
    fn accounts(&self) -> usize {
        1
    }
}
