//! The simulated world dnssec-warden runs against in the demo and in tests: a provider API
//! simulator, a PowerDNS API simulator, a signed DNS hierarchy on loopback, a registry that
//! scans CDS and a lab Unbound. Nothing here touches a real provider or a real registry;
//! everything listens on loopback.
//!
//! This crate depends on no product code. Its wire types (the provider API's JSON), its
//! DNSSEC records ([`dnssec::Dnskey`], [`dnssec::Ds`]) and their arithmetic are its own, so
//! a mistake on the client's side is not mirrored on the simulated side.

pub mod cloudflare_sim;
pub mod dns;
pub mod dnssec;
pub mod exchange_log;
pub mod keys;
pub mod pdns_sim;
pub mod provider_sim;
pub mod registry;
pub mod route53_sim;
mod timefmt;
pub mod wire;

pub use dnssec::{DigestType, Dnskey, Ds};
pub use provider_sim::{
    CallRecord, Fault, FaultCount, FaultKind, ProviderSim, Signer, SimHandle, SimOptions,
};
