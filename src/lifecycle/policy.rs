//! The timings every decision uses, from the `[timing]` section of the configuration.

use std::time::Duration;

use crate::config::TimingSettings;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Observation interval of zones in a waiting state.
    pub poll_waiting: Duration,
    /// Observation interval of `active` and `disabled` zones.
    pub poll_active: Duration,
    /// Added to every TTL-based wait (RFC 7583 section 3.3.1's propagation delay).
    pub propagation_margin: Duration,
    pub ds_overdue_after: Duration,
    pub ds_removal_overdue_after: Duration,
    /// Parent servers disagreeing this long: `partial_propagation_stuck`.
    pub partial_stuck_after: Duration,
    /// An RRSIG over the DNSKEY set expiring within this: `signatures_expiring`.
    pub signatures_expiring_within: Duration,
    /// No complete observation for this long: `observation_failing`.
    pub observation_failing_after: Duration,
    /// First retry after an incomplete observation; doubles up to `poll_waiting`.
    pub retry_base: Duration,
    /// The DS TTL assumed when a DS was announced but never seen at the parent (it may
    /// have come and gone unseen): a day, the longest DS TTL in common use.
    pub assumed_ds_ttl: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            poll_waiting: Duration::from_secs(300),
            poll_active: Duration::from_secs(3600),
            propagation_margin: Duration::from_secs(3600),
            ds_overdue_after: Duration::from_secs(86_400),
            ds_removal_overdue_after: Duration::from_secs(86_400),
            partial_stuck_after: Duration::from_secs(6 * 3600),
            signatures_expiring_within: Duration::from_secs(3 * 86_400),
            observation_failing_after: Duration::from_secs(3600),
            retry_base: Duration::from_secs(5),
            assumed_ds_ttl: Duration::from_secs(86_400),
        }
    }
}

impl From<&TimingSettings> for Policy {
    fn from(t: &TimingSettings) -> Self {
        Self {
            poll_waiting: t.poll_waiting,
            poll_active: t.poll_active,
            propagation_margin: t.propagation_margin,
            ds_overdue_after: t.ds_overdue_after,
            ds_removal_overdue_after: t.ds_removal_overdue_after,
            partial_stuck_after: t.partial_stuck_after,
            signatures_expiring_within: t.signatures_expiring_within,
            observation_failing_after: t.observation_failing_after,
            retry_base: t.retry_base,
            assumed_ds_ttl: t.assumed_ds_ttl,
        }
    }
}

impl Policy {
    /// The wait before re-observing after `failures` incomplete observations in a row.
    pub fn backoff(&self, failures: u32) -> Duration {
        let factor = 1u32 << failures.saturating_sub(1).min(16);
        self.retry_base
            .saturating_mul(factor)
            .min(self.poll_waiting)
    }
}
