//! The simulated world dnssec-warden runs against in the demo and in tests. Nothing here
//! touches a real provider or a real registry; everything listens on loopback.

pub mod demo;
pub mod dns;
pub mod fake;
pub mod keys;
pub mod provider_sim;

pub use provider_sim::{
    CallRecord, Fault, FaultCount, FaultKind, ProviderSim, Signer, SimHandle, SimOptions,
};
