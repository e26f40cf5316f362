//! What the store counts, read only, for whoever reports on the daemon (the Prometheus
//! endpoint reads them; the store knows nothing of it): the same SQL on both backends (no
//! placeholders, no dialect).

use std::sync::atomic::{AtomicU64, Ordering};

use super::{Backend, Store, StoreError};
use crate::lifecycle::{AlertKind, State, Timestamp};

/// One zone's state and observation health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneHealth {
    pub name: String,
    /// `None`: not yet observed.
    pub state: Option<State>,
    /// The last look: the last committed step's observation, complete or not, or a later
    /// sampled look that agreed with it (DESIGN.md section 4).
    pub last_observed_at: Option<Timestamp>,
    /// Incomplete observations in a row, and since when.
    pub failures: i64,
    pub failing_since: Option<Timestamp>,
    /// The provider account that held the zone at the last look, where it was known.
    pub account: Option<String>,
    /// The phase of the key rollover in progress, if any.
    pub roll_phase: Option<&'static str>,
    /// The end of the TTL hold the roll waits out, where it waits on one.
    pub roll_hold_until: Option<Timestamp>,
    /// The next roll `[rollover]` makes, as the zone's last full look computed it.
    pub next_roll: Option<Timestamp>,
}

/// Key rollovers this process's steps ended, completed or undone (`roll --abort`).
static ROLLS_COMPLETED: AtomicU64 = AtomicU64::new(0);
static ROLLS_ABORTED: AtomicU64 = AtomicU64::new(0);

/// The rolls this process's committed steps ended since it started: (completed, aborted).
pub fn rolls_ended() -> (u64, u64) {
    (
        ROLLS_COMPLETED.load(Ordering::Relaxed),
        ROLLS_ABORTED.load(Ordering::Relaxed),
    )
}

/// A committed step ended the roll `before` held.
pub(super) fn roll_ended(before: &crate::lifecycle::rollover::Roll) {
    let counter = if before.aborted || before.abort_asked {
        &ROLLS_ABORTED
    } else {
        &ROLLS_COMPLETED
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

struct RawHealth {
    name: String,
    state: Option<String>,
    last_observed_at: Option<i64>,
    facts: String,
    last_brief: Option<String>,
}

from_row!(RawHealth {
    name,
    state,
    last_observed_at,
    facts,
    last_brief
});

/// The account in an observation's brief (`{"provider":{"account":…}}`); only that is
/// read of it.
fn brief_account(brief: Option<&str>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Brief {
        provider: Option<Part>,
    }
    #[derive(serde::Deserialize)]
    struct Part {
        account: Option<String>,
    }
    serde_json::from_str::<Brief>(brief?)
        .ok()?
        .provider?
        .account
}

impl Store {
    /// Every zone's state and observation health, by name.
    pub async fn zone_health(&self) -> Result<Vec<ZoneHealth>, StoreError> {
        let rows: Vec<RawHealth> = shared_read!(self, |pool| {
            sqlx::query_as(
                "SELECT name, state, CASE WHEN sampled_at > last_observed_at THEN sampled_at \
                 ELSE last_observed_at END AS last_observed_at, facts, last_brief FROM zones ORDER BY name",
            )
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(|r| {
                let facts = super::rows::parse_facts(&r.name, &r.facts)?;
                Ok(ZoneHealth {
                    state: super::rows::parse_state(r.state.as_deref())?,
                    name: r.name,
                    last_observed_at: r.last_observed_at.map(Timestamp),
                    failures: i64::from(facts.health.failures),
                    failing_since: facts.health.failing_since,
                    account: brief_account(r.last_brief.as_deref()),
                    roll_phase: facts.key_roll.as_ref().map(|r| r.phase.name()),
                    roll_hold_until: facts
                        .key_roll
                        .as_ref()
                        .and(facts.wait.held_by.as_ref())
                        .filter(|h| h.on == crate::lifecycle::hold::Party::Ttl)
                        .and_then(|h| h.until),
                    next_roll: facts
                        .key_ages
                        .as_ref()
                        .and_then(|a| a.next_roll)
                        .map(|n| n.at)
                        .filter(|_| facts.key_roll.is_none()),
                })
            })
            .collect()
    }

    /// The zones in a key rollover, each with the provider account of its last look
    /// (`[rollover]`'s cap counts them per account). Only rows whose facts name a roll
    /// are read whole.
    pub async fn rolling_zones(&self) -> Result<Vec<(String, Option<String>)>, StoreError> {
        let rows: Vec<(String, String, Option<String>)> = shared_read!(self, |pool| {
            sqlx::query_as(
                "SELECT name, facts, last_brief FROM zones \
                 WHERE facts LIKE '%\"key_roll\":%' ORDER BY name",
            )
            .fetch_all(pool)
            .await?
        });
        let mut out = Vec::new();
        for (name, facts, brief) in rows {
            if super::rows::parse_facts(&name, &facts)?.key_roll.is_some() {
                out.push((name, brief_account(brief.as_deref())));
            }
        }
        Ok(out)
    }

    /// Open alerts per kind (kinds with none are absent).
    pub async fn open_alert_counts(&self) -> Result<Vec<(AlertKind, i64)>, StoreError> {
        let rows: Vec<(String, i64)> = shared_read!(self, |pool| {
            sqlx::query_as(
                "SELECT kind, count(*) FROM alerts WHERE resolved_at IS NULL \
                 GROUP BY kind ORDER BY kind",
            )
            .fetch_all(pool)
            .await?
        });
        rows.into_iter()
            .map(|(k, n)| Ok((super::rows::parse("alert kind", &k)?, n)))
            .collect()
    }

    /// Notifications not yet taken by every sink (alerts not yet queued, and what each
    /// sink's queue still owes): above zero for long means a sink is failing.
    pub async fn undelivered_alert_notifications(&self) -> Result<i64, StoreError> {
        let (n,): (i64,) = shared_read!(self, |pool| {
            sqlx::query_as(
                "SELECT (SELECT count(*) FROM alerts WHERE last_notified_at IS NULL \
                 OR (resolved_at IS NOT NULL AND resolved_notified_at IS NULL)) \
                 + (SELECT count(*) FROM deliveries WHERE delivered_at IS NULL)",
            )
            .fetch_one(pool)
            .await?
        });
        Ok(n)
    }
}
