//! The Gcore-style DNS API v2 (docs/gcore-api.md: what the client sends and accepts):
//! [`GcoreClient`] behind the [`Provider`](super::Provider) trait, the API's
//! JSON shapes, the client's settings and its block.

mod auth;
mod client;
mod settings;
mod types;

pub use auth::LOGINS_PER_SECOND;
// The backoff on refused credentials, which the Cloudflare client keeps too.
pub(in crate::provider) use auth::AuthBackoff;
pub use client::{DNSSEC_DISABLED_MESSAGE, GcoreClient, PAGE_LIMIT};
pub use settings::{CredentialSource, Credentials, DEFAULT_BASE_URL, ProviderSettings};
pub use types::{
    CreatedZone, DnssecStatus, NewZone, ParentDsHint, ProviderZone, RawDnssec, ResourceRecord,
    Rrset, RrsetBody, ZoneRecordSummary,
};
