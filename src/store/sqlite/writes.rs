//! SQLite's writes outside a step: zones added and their checks pulled in, the
//! operator's intent, audit lines, the outbox's effects begun, ended, retried and settled,
//! and alert notifications noted. Each in a write transaction of its own.

use super::{SqliteStore, state_of, step};
use crate::lifecycle::{Intent, Timestamp};
use crate::store::plan::{self, Event};
use crate::store::rows::RawOutbox;
use crate::store::{EventKind, OutboxItem, OutboxStatus, StoreError};

impl SqliteStore {
    /// Adds a zone to watch; false if it was there already.
    pub async fn ensure_zone(&self, name: &str, now: Timestamp) -> Result<bool, StoreError> {
        let done = self.write_one(sqlx::query(
            "INSERT OR IGNORE INTO zones (name, state_since, next_check_at) VALUES (?, ?, ?)",
        )
        .bind(name)
        .bind(now.0)
        .bind(now.0)
        ).await?;
        Ok(done.rows_affected() == 1)
    }

    /// Pulls a zone's next check to `at` if that is earlier.
    pub async fn check_by(&self, name: &str, at: Timestamp) -> Result<(), StoreError> {
        self.write_one(
            sqlx::query("UPDATE zones SET next_check_at = min(next_check_at, ?) WHERE name = ?")
                .bind(at.0)
                .bind(name),
        )
        .await?;
        Ok(())
    }

    /// Every zone with a side effect still pending is checked now: after a restart, the
    /// daemon re-observes before performing it.
    pub async fn recheck_pending(&self, now: Timestamp) -> Result<u64, StoreError> {
        let done = self
            .write_one(
                sqlx::query(
                    "UPDATE zones SET next_check_at = min(next_check_at, ?) \
             WHERE name IN (SELECT zone FROM outbox WHERE status IN (?, ?))",
                )
                .bind(now.0)
                .bind(plan::RECHECKED[0].as_str())
                .bind(plan::RECHECKED[1].as_str()),
            )
            .await?;
        Ok(done.rows_affected())
    }

    /// Records the operator's intent, creating the zone row if needed (audited).
    /// The intent written at the row's `version` as it was read (`None`: there was no
    /// row, and this write makes it); false (nothing written) if the row changed since.
    pub async fn set_intent(
        &self,
        name: &str,
        version: Option<i64>,
        intent: Intent,
        ds_never_submitted: bool,
        reason: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write().await?;
        if version.is_none() {
            let made = sqlx::query(
                "INSERT OR IGNORE INTO zones (name, state_since, next_check_at) VALUES (?, ?, ?)",
            )
            .bind(name)
            .bind(now.0)
            .bind(now.0)
            .execute(&mut *tx)
            .await?;
            if made.rows_affected() != 1 {
                return Ok(false);
            }
        }
        let updated = sqlx::query(
            "UPDATE zones SET intent = ?, ds_never_submitted = ?, \
             next_check_at = min(next_check_at, ?), version = version + 1 \
             WHERE name = ? AND (? IS NULL OR version = ?)",
        )
        .bind(intent.as_str())
        .bind(ds_never_submitted)
        .bind(now.0)
        .bind(name)
        .bind(version)
        .bind(version)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            return Ok(false);
        }
        let state = state_of(&mut tx, name).await?;
        let event = Event::note(EventKind::Intent, state, reason);
        step::insert_event(&mut tx, name, now, &event).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// A zone's facts as written outside a step (a declared signed move), with its audit
    /// event and the zone due now; false (nothing written) if the row is no longer at
    /// `version`.
    pub async fn write_facts_at(
        &self,
        name: &str,
        version: i64,
        facts: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write().await?;
        let updated = sqlx::query(
            "UPDATE zones SET facts = ?, next_check_at = min(next_check_at, ?), \
             version = version + 1 WHERE name = ? AND version = ?",
        )
        .bind(facts)
        .bind(now.0)
        .bind(name)
        .bind(version)
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() != 1 {
            return Ok(false);
        }
        let state = state_of(&mut tx, name).await?;
        let event = Event::note(EventKind::Intent, state, reason);
        step::insert_event(&mut tx, name, now, &event).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Notes a step that could not be decided (an error), pulling the next check in.
    pub async fn defer(&self, name: &str, at: Timestamp) -> Result<(), StoreError> {
        self.write_one(
            sqlx::query("UPDATE zones SET next_check_at = ? WHERE name = ?")
                .bind(at.0)
                .bind(name),
        )
        .await?;
        Ok(())
    }

    /// Adds a line to a zone's audit trail outside a step (effect results, guard refusals).
    pub async fn record(
        &self,
        zone: &str,
        kind: EventKind,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let state = state_of(&mut tx, zone).await?;
        step::insert_event(&mut tx, zone, now, &Event::note(kind, state, reason)).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Ends an outbox row; a failed notification stays pending for the next attempt.
    pub async fn finish_effect(
        &self,
        id: i64,
        status: OutboxStatus,
        error: Option<&str>,
        outcome: Option<&str>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.write_one(sqlx::query(
            "UPDATE outbox SET status = ?, attempts = attempts + 1, finished_at = ?, last_error = ?, \
             outcome = ? WHERE id = ? AND status = ?",
        )
        .bind(status.as_str())
        .bind(now.0)
        .bind(error)
        .bind(outcome)
        .bind(id)
        .bind(OutboxStatus::Pending.as_str())
        ).await?;
        Ok(())
    }

    /// Marks a provider call as begun, before the request leaves: a crash from here on
    /// leaves a call whose outcome is unknown, never one that looks unperformed.
    pub async fn start_effect(&self, id: i64, now: Timestamp) -> Result<bool, StoreError> {
        // Only a provider call can be in flight with an unknown outcome; a notification
        // not marked done is simply owed again.
        let claimed = sqlx::query(
            "UPDATE outbox SET started_at = CASE WHEN kind IN (?, ?, ?, ?, ?, ?, ?) THEN ? END \
             WHERE id = ? AND status = ?",
        )
        .bind(plan::PROVIDER_CALLS[0].as_str())
        .bind(plan::PROVIDER_CALLS[1].as_str())
        .bind(plan::PROVIDER_CALLS[2].as_str())
        .bind(plan::PROVIDER_CALLS[3].as_str())
        .bind(plan::PROVIDER_CALLS[4].as_str())
        .bind(plan::PROVIDER_CALLS[5].as_str())
        .bind(plan::PROVIDER_CALLS[6].as_str())
        .bind(now.0)
        .bind(id)
        .bind(OutboxStatus::Pending.as_str())
        .execute(&self.pool)
        .await?;
        Ok(claimed.rows_affected() == 1)
    }

    /// Provider calls begun but never finished (the daemon stopped, or the step was
    /// abandoned, during the request), of one zone or all, become calls of unknown
    /// outcome, with an audit event each. Returns how many.
    pub async fn unknown_in_flight(
        &self,
        now: Timestamp,
        zone: Option<&str>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.write().await?;
        let rows: Vec<RawOutbox> = sqlx::query_as(
            "SELECT id, coalesce(seq, id) AS seq, zone, effect, attempts, account FROM outbox \
             WHERE status = ? AND started_at IS NOT NULL \
             AND (? IS NULL OR zone = ?) ORDER BY id",
        )
        .bind(OutboxStatus::Pending.as_str())
        .bind(zone)
        .bind(zone)
        .fetch_all(&mut *tx)
        .await?;
        let rows = rows
            .into_iter()
            .map(OutboxItem::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        for row in &rows {
            sqlx::query(
                "UPDATE outbox SET status = ?, finished_at = ?, last_error = ? WHERE id = ?",
            )
            .bind(OutboxStatus::Unknown.as_str())
            .bind(now.0)
            .bind(plan::IN_FLIGHT_ERROR)
            .bind(row.id)
            .execute(&mut *tx)
            .await?;
            let state = state_of(&mut tx, &row.zone).await?;
            let event = plan::outcome_unknown(&row.effect, state);
            step::insert_event(&mut tx, &row.zone, now, &event).await?;
        }
        tx.commit().await?;
        Ok(rows.len() as u64)
    }

    /// Settles a call of unknown outcome by what the provider now says: `took_effect`
    /// ends it `done`, otherwise `failed`; one audit event says which.
    pub async fn settle_unknown_call(
        &self,
        id: i64,
        zone: &str,
        took_effect: bool,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let settled = sqlx::query(
            "UPDATE outbox SET status = ?, finished_at = ? WHERE id = ? AND status = ?",
        )
        .bind(plan::settled(took_effect).as_str())
        .bind(now.0)
        .bind(id)
        .bind(OutboxStatus::Unknown.as_str())
        .execute(&mut *tx)
        .await?;
        if settled.rows_affected() == 1 {
            let state = state_of(&mut tx, zone).await?;
            let event = Event::note(EventKind::Effect, state, reason);
            step::insert_event(&mut tx, zone, now, &event).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Counts a failed attempt of a row that stays pending.
    pub async fn retry_effect(&self, id: i64, error: &str) -> Result<(), StoreError> {
        self.write_one(
            sqlx::query("UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?")
                .bind(error)
                .bind(id),
        )
        .await?;
        Ok(())
    }

    /// Marks the opening (or re-) notification of an alert as sent.
    pub async fn alert_notified(&self, id: i64, now: Timestamp) -> Result<(), StoreError> {
        self.write_one(sqlx::query(
            "UPDATE alerts SET last_notified_at = ?, notifications = notifications + 1 WHERE id = ?",
        )
        .bind(now.0)
        .bind(id)
        ).await?;
        Ok(())
    }

    pub async fn alert_resolution_notified(
        &self,
        id: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.write_one(
            sqlx::query("UPDATE alerts SET resolved_notified_at = ? WHERE id = ?")
                .bind(now.0)
                .bind(id),
        )
        .await?;
        Ok(())
    }
}
