//! PowerDNS Authoritative through its HTTP API (4.7, `/api/v1/servers/{server}`, the
//! `X-API-Key` header): [`PowerDnsClient`] behind the [`Provider`](super::Provider) trait,
//! the API's JSON shapes, and the client's settings.
//!
//! What the API changes reaches DNS answers only after the server's caches expire (the
//! packet cache, the zone metadata cache): the lifecycle waits for what the name servers
//! answer, never for the API's word, exactly as with any other provider.

mod client;
mod types;

pub use client::{PowerDnsClient, PowerDnsSettings};
pub use types::{Cryptokey, PdnsRrset, PdnsZone, ZoneEntry};
