//! Cloudflare's API v4 (docs/cloudflare-api.md: what the client sends and accepts):
//! [`CloudflareClient`] behind the [`Provider`](super::Provider) trait, the API's JSON
//! shapes and what each DNSSEC status lets the daemon conclude ([`Reading`]), the
//! client's settings and its block.

mod client;
mod settings;
mod types;

pub use client::{CloudflareClient, MAX_PAGES, PER_PAGE};
pub use settings::{CloudflareSettings, DEFAULT_BASE_URL};
pub use types::{
    AUTOMATIC_TTL_SECS, ApiMessage, DnssecStatus, RawDnssec, Reading, Record, ResultInfo, Zone,
};
