//! PowerDNS Authoritative through its HTTP API (4.7, `/api/v1/servers/{server}`, the
//! `X-API-Key` header): [`PowerDnsClient`] behind the [`Provider`](super::Provider) trait,
//! the API's JSON shapes, the client's settings and its block.
//!
//! What the API changes reaches DNS answers only after the server's caches expire (the
//! packet cache, the zone metadata cache): the lifecycle waits for what the name servers
//! answer, never for the API's word, exactly as with any other provider.

mod client;
mod settings;
mod types;

pub use client::PowerDnsClient;
pub use settings::{DEFAULT_SERVER_ID, PowerDnsAccount, PowerDnsSettings};
pub use types::{Cryptokey, PdnsRrset, PdnsZone, ZoneEntry};
