//! `[dns]`: what the observer asks, whom, and how much one observation may spend. The
//! configuration file's form of it lives in `config` (`DnsFile`), which builds this.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::dns::net::budget::ObservationBudget;
use crate::dns::net::discovery::AddressFamilies;
use crate::dns::net::query::{
    DEFAULT_MAX_QPS_PER_SERVER, DEFAULT_QUERIES_PER_SERVER, DEFAULT_QUERY_ATTEMPTS,
};

/// The IANA root servers (root-servers.org), where iterative discovery starts by default.
pub const IANA_ROOT_HINTS: &[&str] = &[
    "198.41.0.4",
    "2001:503:ba3e::2:30",
    "170.247.170.2",
    "2801:1b8:10::b",
    "192.33.4.12",
    "2001:500:2::c",
    "199.7.91.13",
    "2001:500:2d::d",
    "192.203.230.10",
    "2001:500:a8::e",
    "192.5.5.241",
    "2001:500:2f::f",
    "192.112.36.4",
    "2001:500:12::d0d",
    "198.97.190.53",
    "2001:500:1::53",
    "192.36.148.17",
    "2001:7fe::53",
    "192.58.128.30",
    "2001:503:c27::2:30",
    "193.0.14.129",
    "2001:7fd::1",
    "199.7.83.42",
    "2001:500:9f::42",
    "202.12.27.33",
    "2001:dc3::35",
];

/// Default of `dns.validating_resolvers`.
pub const DEFAULT_VALIDATING_RESOLVERS: &[&str] = &["1.1.1.1:53", "9.9.9.9:53"];
/// Default of `dns.query_timeout`.
pub const DEFAULT_QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// `[dns]`. The file writes the observation budget's keys beside the others
/// (`dns.max_host_lookups`); here they are grouped in [`ObservationBudget`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSettings {
    pub root_hints: Vec<IpAddr>,
    pub port: u16,
    /// None: the IANA root trust anchor built into the validator.
    pub trust_anchor_file: Option<PathBuf>,
    pub validating_resolvers: Vec<SocketAddr>,
    pub query_timeout: Duration,
    pub query_attempts: u32,
    /// Queries in flight at once to one name server address (politeness; see
    /// [`crate::dns::net::query::MAX_QUERIES_PER_SERVER`]).
    pub queries_per_server: usize,
    /// Queries a second to one name server address, evenly spaced (politeness: TLD
    /// operators limit queries per source; see
    /// [`crate::dns::net::query::DEFAULT_MAX_QPS_PER_SERVER`]).
    pub max_qps_per_server: u32,
    /// Which name server addresses are asked. Both by default; a host without IPv6 sets
    /// `["ipv4"]`, or every IPv6 address would answer "unknown" and block every decision.
    pub address_families: AddressFamilies,
    /// What one observation may spend (`dns.observation_timeout`, `dns.max_*`).
    pub budget: ObservationBudget,
    /// Decisions that can take a domain down wait for validated evidence even where the
    /// parent zone is unsigned (safety rule 10); by default such a parent's authoritative
    /// answers are used, and said to be unvalidated.
    pub require_validated_evidence: bool,
}

impl Default for DnsSettings {
    fn default() -> Self {
        Self {
            root_hints: IANA_ROOT_HINTS
                .iter()
                .filter_map(|s| s.parse().ok())
                .collect(),
            port: 53,
            trust_anchor_file: None,
            validating_resolvers: DEFAULT_VALIDATING_RESOLVERS
                .iter()
                .filter_map(|s| s.parse().ok())
                .collect(),
            query_timeout: DEFAULT_QUERY_TIMEOUT,
            query_attempts: DEFAULT_QUERY_ATTEMPTS,
            queries_per_server: DEFAULT_QUERIES_PER_SERVER,
            max_qps_per_server: DEFAULT_MAX_QPS_PER_SERVER,
            address_families: AddressFamilies::default(),
            budget: ObservationBudget::default(),
            require_validated_evidence: false,
        }
    }
}
