//! What one observation may spend: questions, host lookups and wall time
//! ([`ObservationBudget`], the `[dns]` keys). Spent from every task of the observation
//! at once; once one part runs out, everything after it fails fast with the same reason,
//! and the observation ends as unknown, "budget exhausted: <which>".

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// The budget of one observation (one zone's parent view, child view or validation):
/// what discovery and the queries behind it may spend before the observation ends as
/// unknown, "budget exhausted: …". Depth alone bounds nothing: a glueless fan-out of F
/// names per zone costs F^depth lookups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObservationBudget {
    /// Wall time of one observation (`dns.observation_timeout`), well under the engine's
    /// step timeout of 120 s.
    pub timeout: Duration,
    /// Questions asked (each with up to `dns.query_attempts` tries),
    /// `dns.max_queries_per_observation`.
    pub max_queries: u32,
    /// Addresses of name servers looked up because no glue came with them,
    /// `dns.max_host_lookups`.
    pub max_host_lookups: u32,
    /// Name servers one delegation may have (`dns.max_ns_per_delegation`); beyond it the
    /// zone is unknown, never asked in part.
    pub max_ns_per_delegation: usize,
    /// Addresses one name server may have (`dns.max_addresses_per_server`); beyond it the
    /// server is unknown.
    pub max_addresses_per_server: usize,
}

/// Default of `dns.observation_timeout`.
pub const DEFAULT_OBSERVATION_TIMEOUT: Duration = Duration::from_secs(60);
/// Upper bound of `dns.observation_timeout`: the engine abandons a step after 120 s, and
/// a step may observe and then call the provider.
pub const MAX_OBSERVATION_TIMEOUT: Duration = Duration::from_secs(90);
/// Default of `dns.max_queries_per_observation` (the parent view and the child view each
/// have their own): a zone under a TLD of 13 dual-stack servers asks 52 DS and NS
/// questions; its 13 dual-stack servers 104 DNSKEY/CDS/CDNSKEY/NS ones; glueless name
/// servers a few more each.
pub const DEFAULT_MAX_QUERIES_PER_OBSERVATION: u32 = 500;
/// Default of `dns.max_host_lookups` (Unbound stops at 64 target lookups per query).
pub const DEFAULT_MAX_HOST_LOOKUPS: u32 = 64;
/// Default of `dns.max_ns_per_delegation`: 13 is the most seen in practice.
pub const DEFAULT_MAX_NS_PER_DELEGATION: usize = 20;
/// Default of `dns.max_addresses_per_server`: one IPv4 and one IPv6 address is usual.
pub const DEFAULT_MAX_ADDRESSES_PER_SERVER: usize = 8;

impl Default for ObservationBudget {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_OBSERVATION_TIMEOUT,
            max_queries: DEFAULT_MAX_QUERIES_PER_OBSERVATION,
            max_host_lookups: DEFAULT_MAX_HOST_LOOKUPS,
            max_ns_per_delegation: DEFAULT_MAX_NS_PER_DELEGATION,
            max_addresses_per_server: DEFAULT_MAX_ADDRESSES_PER_SERVER,
        }
    }
}

/// Which part of the budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Exhausted {
    #[error("budget exhausted: queries ({0} per observation, dns.max_queries_per_observation)")]
    Queries(u32),
    #[error("budget exhausted: host lookups ({0} per observation, dns.max_host_lookups)")]
    HostLookups(u32),
    #[error("budget exhausted: time ({}s per observation, dns.observation_timeout)", .0.as_secs_f64())]
    Time(Duration),
    #[error("validation budget exhausted: {0} signature checks per observation")]
    SignatureChecks(u32),
}

/// Signature verifications one observation (or one validation probe) may make. Unbound
/// and BIND after KeyTrap (CVE-2023-50387) cap the work per answer and per query; this
/// is that cap for a whole look, on top of the per-RRset caps of `validator`.
pub const MAX_SIGNATURE_CHECKS: u32 = 256;

/// One observation's budget, being spent.
#[derive(Debug)]
pub struct Budget {
    limits: ObservationBudget,
    deadline: Instant,
    queries: AtomicU32,
    host_lookups: AtomicU32,
    signature_checks: AtomicU32,
    exhausted: OnceLock<Exhausted>,
}

impl Budget {
    /// A full budget; its clock starts now.
    pub fn new(limits: ObservationBudget) -> Self {
        Self {
            limits,
            deadline: Instant::now() + limits.timeout,
            queries: AtomicU32::new(0),
            host_lookups: AtomicU32::new(0),
            signature_checks: AtomicU32::new(0),
            exhausted: OnceLock::new(),
        }
    }

    pub fn limits(&self) -> &ObservationBudget {
        &self.limits
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The first part that ran out, if one did.
    pub fn exhausted(&self) -> Option<Exhausted> {
        if let Some(e) = self.exhausted.get() {
            return Some(*e);
        }
        (Instant::now() >= self.deadline)
            .then(|| self.run_out(Exhausted::Time(self.limits.timeout)))
    }

    /// Spends one question.
    pub fn query(&self) -> Result<(), Exhausted> {
        self.spend(&self.queries, self.limits.max_queries, Exhausted::Queries)
    }

    /// Spends one host lookup.
    pub fn host_lookup(&self) -> Result<(), Exhausted> {
        self.spend(
            &self.host_lookups,
            self.limits.max_host_lookups,
            Exhausted::HostLookups,
        )
    }

    /// Spends one signature verification (the cryptography, not a remembered result).
    pub fn signature_check(&self) -> Result<(), Exhausted> {
        self.spend(
            &self.signature_checks,
            MAX_SIGNATURE_CHECKS,
            Exhausted::SignatureChecks,
        )
    }

    /// Signature verifications spent so far.
    pub fn signature_checks(&self) -> u32 {
        self.signature_checks
            .load(Ordering::Relaxed)
            .min(MAX_SIGNATURE_CHECKS)
    }

    /// Questions spent so far.
    pub fn queries(&self) -> u32 {
        self.queries
            .load(Ordering::Relaxed)
            .min(self.limits.max_queries)
    }

    /// Host lookups spent so far.
    pub fn host_lookups(&self) -> u32 {
        self.host_lookups
            .load(Ordering::Relaxed)
            .min(self.limits.max_host_lookups)
    }

    /// Marks the wall time as run out (the observation's timeout fired).
    pub fn time_is_up(&self) -> Exhausted {
        self.run_out(Exhausted::Time(self.limits.timeout))
    }

    fn spend(
        &self,
        counter: &AtomicU32,
        max: u32,
        exhausted: fn(u32) -> Exhausted,
    ) -> Result<(), Exhausted> {
        if let Some(e) = self.exhausted() {
            return Err(e);
        }
        // Saturating: a counter past its limit stays there.
        let before = counter
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n <= max).then(|| n + 1)
            })
            .unwrap_or(max.saturating_add(1));
        if before >= max {
            return Err(self.run_out(exhausted(max)));
        }
        Ok(())
    }

    fn run_out(&self, reason: Exhausted) -> Exhausted {
        *self.exhausted.get_or_init(|| reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(queries: u32, lookups: u32) -> ObservationBudget {
        ObservationBudget {
            max_queries: queries,
            max_host_lookups: lookups,
            ..ObservationBudget::default()
        }
    }

    #[tokio::test]
    async fn spends_up_to_the_limit_then_fails_with_the_first_reason() {
        let budget = Budget::new(limits(3, 1));
        for _ in 0..3 {
            assert_eq!(budget.query(), Ok(()));
        }
        assert_eq!(budget.query(), Err(Exhausted::Queries(3)));
        assert_eq!(budget.queries(), 3);
        // Everything else fails fast now, with the reason that came first.
        assert_eq!(budget.host_lookup(), Err(Exhausted::Queries(3)));
        assert_eq!(budget.exhausted(), Some(Exhausted::Queries(3)));
        assert_eq!(
            Exhausted::Queries(3).to_string(),
            "budget exhausted: queries (3 per observation, dns.max_queries_per_observation)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn time_runs_out_at_the_deadline() {
        let budget = Budget::new(ObservationBudget {
            timeout: Duration::from_secs(5),
            ..ObservationBudget::default()
        });
        assert_eq!(budget.exhausted(), None);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(budget.query(), Err(Exhausted::Time(Duration::from_secs(5))));
        assert!(
            budget
                .exhausted()
                .unwrap()
                .to_string()
                .starts_with("budget exhausted: time (5s")
        );
    }
}
