//! The timings every decision uses: the lifecycle's own struct, deserialized as the
//! `[timing]` section of the configuration (the defaults below are the documented ones,
//! every duration longer than zero, unknown keys refused).

use std::time::Duration;

use serde::Deserialize;

use super::Timestamp;
use super::keys::KeyKind;

use crate::time::format::positive_duration as duration;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// Observation interval of zones in a waiting state.
    #[serde(deserialize_with = "duration")]
    pub poll_waiting: Duration,
    /// Observation interval of `active` and `disabled` zones.
    #[serde(deserialize_with = "duration")]
    pub poll_active: Duration,
    /// Added to every TTL-based wait (RFC 7583 section 3.3.1's propagation delay).
    #[serde(deserialize_with = "duration")]
    pub propagation_margin: Duration,
    #[serde(deserialize_with = "duration")]
    pub ds_overdue_after: Duration,
    #[serde(deserialize_with = "duration")]
    pub ds_removal_overdue_after: Duration,
    /// Parent servers disagreeing this long: `partial_propagation_stuck`.
    #[serde(deserialize_with = "duration")]
    pub partial_stuck_after: Duration,
    /// An RRSIG over the DNSKEY set expiring within this: `signatures_expiring`.
    #[serde(deserialize_with = "duration")]
    pub signatures_expiring_within: Duration,
    /// No complete observation for this long: `observation_failing`.
    #[serde(deserialize_with = "duration")]
    pub observation_failing_after: Duration,
    /// First retry after an incomplete observation; doubles up to `poll_waiting`.
    #[serde(deserialize_with = "duration")]
    pub retry_base: Duration,
    /// The DS TTL assumed when a DS was announced but never seen at the parent (it may
    /// have come and gone unseen): a day, the longest DS TTL in common use.
    #[serde(deserialize_with = "duration")]
    pub assumed_ds_ttl: Duration,
    /// The NS TTL assumed for an old delegation whose TTL was never seen (safety rule 9):
    /// two days, the NS TTL of the largest TLDs' delegations.
    #[serde(deserialize_with = "duration")]
    pub assumed_ns_ttl: Duration,
    /// The longest a settled zone goes on sampled looks (one parent and one child address,
    /// DESIGN.md section 4) without a full look at every address. At most `poll_active`:
    /// every look is full.
    #[serde(deserialize_with = "duration")]
    pub full_look_every: Duration,
    /// `dns.require_validated_evidence` (safety rule 10): set from the `[dns]` section,
    /// never read from `[timing]`.
    #[serde(skip)]
    pub require_validated_evidence: bool,
    /// `[parents."NAME"]`: set from that section, never read from `[timing]`.
    #[serde(skip)]
    pub parents: super::parent_way::ParentWays,
    /// The longest one look may take (the engine's step timeout), set by the engine,
    /// never read from `[timing]`: part of rule 2's confirmation gap.
    #[serde(skip)]
    pub look_allowance: Duration,
    /// `[rollover]`: key lifetimes and how rolls are scheduled; set from that section,
    /// never read from `[timing]`.
    #[serde(skip)]
    pub rollover: RolloverPolicy,
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
            assumed_ns_ttl: Duration::from_secs(172_800),
            full_look_every: Duration::from_secs(86_400),
            require_validated_evidence: false,
            parents: Default::default(),
            look_allowance: Duration::ZERO,
            rollover: Default::default(),
        }
    }
}

impl Policy {
    /// Rule 2: the longest stretch without a look confirming the DS gone that `T_gone`
    /// survives (and a move's or a roll's hold, alike). Two polls and the longest a look
    /// may take: the next look is scheduled a poll after the last one's commit, so one
    /// missed look is lag; more is a daemon that was down or a parent it could not see,
    /// in which a DS may have come and gone unseen.
    pub fn gone_confirmation_gap(&self) -> Duration {
        self.poll_waiting
            .saturating_mul(2)
            .saturating_add(self.look_allowance)
    }

    /// A signed move's timings: this policy's margin, assumptions and rule 2's gap.
    pub fn move_policy(&self) -> super::signed_move::MovePolicy {
        super::signed_move::MovePolicy {
            propagation_margin: self.propagation_margin,
            assumed_ns_ttl: self.assumed_ns_ttl,
            assumed_ds_ttl: self.assumed_ds_ttl,
            confirmation_gap: self.gone_confirmation_gap(),
        }
    }

    /// The wait before re-observing after `failures` incomplete observations in a row.
    pub fn backoff(&self, failures: u32) -> Duration {
        let factor = 1u32 << failures.saturating_sub(1).min(16);
        self.retry_base
            .saturating_mul(factor)
            .min(self.poll_waiting)
    }
}

impl Policy {
    /// The next routine look at a settled zone after `now`: the zone's own slot in each
    /// `poll_active` period (its phase, from its name), so that a fleet's looks arrive at
    /// an even rate instead of together, across restarts and across daemons alike. At
    /// most `poll_active` away, so drift is still seen within one poll.
    pub fn next_settled_look(&self, zone: &str, now: Timestamp) -> Timestamp {
        let period = i64::try_from(self.poll_active.as_millis())
            .unwrap_or(i64::MAX)
            .max(1);
        let phase = i64::try_from(name_hash(zone) % period.unsigned_abs()).unwrap_or(0);
        // The first instant after `now` at the zone's phase.
        let into = (now.0 - phase).rem_euclid(period);
        Timestamp(now.0 + (period - into))
    }

    /// Which of a zone's addresses a sampled look at `now` asks: one more with each
    /// `poll_active` period, so every one of `n` addresses is asked within `n` polls, and
    /// zones due together start at different addresses.
    pub fn sample_turn(&self, zone: &str, now: Timestamp) -> u64 {
        let period = i64::try_from(self.poll_active.as_millis())
            .unwrap_or(i64::MAX)
            .max(1);
        let polls = u64::try_from(now.0.div_euclid(period)).unwrap_or(0);
        polls.wrapping_add(name_hash(zone))
    }
}

/// FNV-1a over the zone's name, lower-cased: stable across versions and hosts (std's
/// hasher is not promised to be), and spread enough for a phase.
pub(super) fn name_hash(zone: &str) -> u64 {
    zone.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b.to_ascii_lowercase())).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The rolls' cap per account where `[rollover]` does not say.
pub const DEFAULT_MAX_CONCURRENT_PER_ACCOUNT: u32 = 10;

/// `[rollover]`: a lifetime per kind of key (none: never rolled by policy), the window
/// rolls due together are spread over, and the cap on rolls in progress per account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloverPolicy {
    pub ksk: Option<Duration>,
    pub zsk: Option<Duration>,
    pub csk: Option<Duration>,
    /// Each zone's roll falls due this much later at most, by a hash of its name (the
    /// same on every start and every host).
    pub spread: Duration,
    pub max_concurrent_per_account: u32,
}

impl Default for RolloverPolicy {
    fn default() -> Self {
        Self {
            ksk: None,
            zsk: None,
            csk: None,
            spread: Duration::ZERO,
            max_concurrent_per_account: DEFAULT_MAX_CONCURRENT_PER_ACCOUNT,
        }
    }
}

impl RolloverPolicy {
    /// Some lifetime is set: the daemon keeps key ages and schedules rolls.
    pub fn on(&self) -> bool {
        self.ksk.is_some() || self.zsk.is_some() || self.csk.is_some()
    }

    pub fn lifetime(&self, kind: KeyKind) -> Option<Duration> {
        match kind {
            KeyKind::Ksk => self.ksk,
            KeyKind::Zsk => self.zsk,
            KeyKind::Csk => self.csk,
        }
    }

    /// The zone's place in `spread`: stable for a name, whatever the clock or the host.
    pub fn offset(&self, zone: &str) -> Duration {
        let window = u64::try_from(self.spread.as_millis()).unwrap_or(u64::MAX);
        if window == 0 {
            return Duration::ZERO;
        }
        Duration::from_millis(name_hash(zone) % window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_asks_the_next_address_at_each_poll() {
        let policy = Policy::default();
        let zone = "zone.example.";
        let mut at = policy.next_settled_look(zone, Timestamp(1_800_000_123_456));
        let first = policy.sample_turn(zone, at);
        for polls in 1..30u64 {
            at = policy.next_settled_look(zone, at);
            assert_eq!(policy.sample_turn(zone, at), first.wrapping_add(polls));
        }
        // Zones due together start at different addresses.
        let turns: std::collections::HashSet<u64> = (0..20)
            .map(|i| policy.sample_turn(&format!("z{i}.example."), at) % 13)
            .collect();
        assert!(turns.len() > 5, "{turns:?}");
    }

    #[test]
    fn settled_looks_are_spread_over_the_period_and_never_further_than_one_poll() {
        let policy = Policy::default();
        let period = 3_600_000;
        let now = Timestamp(1_800_000_123_456);
        let mut buckets = [0u32; 10];
        for i in 0..10_000 {
            let zone = format!("zone{i}.example.");
            let next = policy.next_settled_look(&zone, now);
            let gap = next.0 - now.0;
            assert!(gap > 0 && gap <= period, "{zone}: {gap}");
            // The same slot whenever it is asked, and one period later after that look.
            assert_eq!(policy.next_settled_look(&zone, now), next);
            assert_eq!(
                policy.next_settled_look(&zone, next),
                Timestamp(next.0 + period)
            );
            let bucket = usize::try_from(gap * 10 / (period + 1)).unwrap_or(9);
            buckets[bucket] += 1;
        }
        // Even: each tenth of the hour gets about a tenth of the zones.
        for n in buckets {
            assert!((850..=1150).contains(&n), "{buckets:?}");
        }
    }
}
