//! Amazon Route 53's API (docs/providers/route53.md: what the client sends and accepts):
//! [`Route53Client`] behind the [`Provider`](super::Provider) trait, signed with SigV4,
//! the API's XML answers and what each DNSSEC status lets the daemon conclude
//! ([`Reading`]), the client's settings and its block.

mod client;
mod settings;
mod types;

pub use client::{MAX_ITEMS, MAX_PAGES, Route53Client};
pub use settings::{
    DEFAULT_BASE_URL, DEFAULT_CHANGE_TIMEOUT, DEFAULT_KSK_NAME, DEFAULT_REGION,
    DEFAULT_REQUESTS_PER_SECOND, KeyId, Route53Settings, check_kms_arn, signing_region_of,
};
pub use types::{
    ApiError, ChangeInfo, Dnssec, HostedZone, Ksk, Reading, RecordSet, SHOWN_DS_TTL,
    ServeSignature, XMLNS,
};
