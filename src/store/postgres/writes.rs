//! PostgreSQL's writes outside a step: zones added and their checks pulled in, the
//! operator's intent, audit lines, the outbox's effects begun, ended, retried and settled,
//! and alert notifications noted; each fenced by the zone's lease.

use sqlx::PgConnection;

use super::{PgStore, insert_note, state_of, step};
use crate::lifecycle::{Intent, Timestamp};
use crate::store::faults::Noted;
use crate::store::lease::{Fenced, Writer};
use crate::store::plan::{self, Event};
use crate::store::rows::RawOutbox;
use crate::store::{EventKind, OutboxItem, OutboxStatus, StoreError};

impl PgStore {
    pub(in crate::store) async fn ensure_zone(
        &self,
        name: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO zones (name, state_since, next_check_at) VALUES ($1, $2, $2) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(now.0)
        .execute(&self.pool)
        .await
        .noted(self)?;
        Ok(done.rows_affected() == 1)
    }

    pub(in crate::store) async fn check_by(
        &self,
        name: &str,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        self.fence(&mut tx, name, Fenced::Schedule).await?;
        sqlx::query("UPDATE zones SET next_check_at = LEAST(next_check_at, $1) WHERE name = $2")
            .bind(at.0)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await.noted(self)
    }

    /// A sampled look that agreed (DESIGN.md section 4), fenced like a schedule: false
    /// if the row changed since it was read.
    pub(in crate::store) async fn sampled(
        &self,
        read: &crate::store::StepRow,
        at: Timestamp,
        next: Timestamp,
    ) -> Result<bool, StoreError> {
        let name = read.row.zone.name.as_str();
        let mut tx = self.write().await?;
        self.fence(&mut tx, name, Fenced::Schedule).await?;
        let done = sqlx::query(
            "UPDATE zones SET next_check_at = $1, sampled_at = $2 WHERE name = $3 AND version = $4",
        )
        .bind(next.0)
        .bind(at.0)
        .bind(name)
        .bind(read.row.version)
        .execute(&mut *tx)
        .await?;
        tx.commit().await.noted(self)?;
        Ok(done.rows_affected() == 1)
    }

    pub(in crate::store) async fn recheck_pending(
        &self,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE zones SET next_check_at = LEAST(next_check_at, $1) \
             WHERE name IN (SELECT zone FROM outbox WHERE status IN ($2, $3)) \
             AND ($4::text IS NULL OR lease_holder = $4)",
        )
        .bind(now.0)
        .bind(plan::RECHECKED[0].as_str())
        .bind(plan::RECHECKED[1].as_str())
        .bind(self.holder())
        .execute(&self.pool)
        .await
        .noted(self)?;
        Ok(done.rows_affected())
    }

    /// As SQLite's: at the row's `version` as read (`None`: this write makes the row);
    /// false (nothing written) if the row changed since.
    pub(in crate::store) async fn set_intent(
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
                "INSERT INTO zones (name, state_since, next_check_at) VALUES ($1, $2, $2) \
                 ON CONFLICT (name) DO NOTHING",
            )
            .bind(name)
            .bind(now.0)
            .execute(&mut *tx)
            .await?;
            if made.rows_affected() != 1 {
                return Ok(false);
            }
        }
        let updated = sqlx::query(
            "UPDATE zones SET intent = $1, ds_never_submitted = $2, \
             next_check_at = LEAST(next_check_at, $3), version = version + 1 \
             WHERE name = $4 AND ($5::BIGINT IS NULL OR version = $5)",
        )
        .bind(intent.as_str())
        .bind(ds_never_submitted)
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
        step::insert_event(&mut tx, name, now, &event, None).await?;
        tx.commit().await.noted(self)?;
        Ok(true)
    }

    /// As SQLite's: not fenced, like `set_intent` (the operator's write is no daemon's
    /// step); the version bump refuses the commit of any step that read the row before.
    pub(in crate::store) async fn write_facts_at(
        &self,
        name: &str,
        version: i64,
        facts: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write().await?;
        let updated = sqlx::query(
            "UPDATE zones SET facts = $1, next_check_at = LEAST(next_check_at, $2), \
             version = version + 1 WHERE name = $3 AND version = $4",
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
        step::insert_event(&mut tx, name, now, &event, None).await?;
        tx.commit().await.noted(self)?;
        Ok(true)
    }

    pub(in crate::store) async fn defer(
        &self,
        name: &str,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        self.fence(&mut tx, name, Fenced::Schedule).await?;
        sqlx::query("UPDATE zones SET next_check_at = $1 WHERE name = $2")
            .bind(at.0)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await.noted(self)
    }

    pub(in crate::store) async fn record(
        &self,
        zone: &str,
        kind: EventKind,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let by = self.fence(&mut tx, zone, Fenced::Event).await?;
        insert_note(&mut tx, zone, now, kind, reason, by.as_ref()).await?;
        tx.commit().await.noted(self)?;
        Ok(())
    }

    pub(in crate::store) async fn finish_effect(
        &self,
        id: i64,
        status: OutboxStatus,
        error: Option<&str>,
        outcome: Option<&str>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let zone = Self::outbox_zone(&mut tx, id).await?;
        self.fence(&mut tx, &zone, Fenced::Effect).await?;
        sqlx::query(
            "UPDATE outbox SET status = $1, attempts = attempts + 1, finished_at = $2, \
             last_error = $3, outcome = $6 WHERE id = $4 AND status = $5",
        )
        .bind(status.as_str())
        .bind(now.0)
        .bind(error)
        .bind(id)
        .bind(OutboxStatus::Pending.as_str())
        .bind(outcome)
        .execute(&mut *tx)
        .await?;
        tx.commit().await.noted(self)
    }

    pub(in crate::store) async fn start_effect(
        &self,
        id: i64,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write().await?;
        let zone = Self::outbox_zone(&mut tx, id).await?;
        let by = self.fence(&mut tx, &zone, Fenced::Effect).await?;
        // Stamped with the performer: a later holder performing an effect a dead one
        // decided performs it under its own, current epoch.
        let claimed = sqlx::query(
            "UPDATE outbox SET started_at = CASE WHEN kind IN ($4, $5, $6, $7, $8, $9, $10) THEN $1 END, \
             holder = coalesce($11, holder), epoch = coalesce($12, epoch) \
             WHERE id = $2 AND status = $3",
        )
        .bind(now.0)
        .bind(id)
        .bind(OutboxStatus::Pending.as_str())
        .bind(plan::PROVIDER_CALLS[0].as_str())
        .bind(plan::PROVIDER_CALLS[1].as_str())
        .bind(plan::PROVIDER_CALLS[2].as_str())
        .bind(plan::PROVIDER_CALLS[3].as_str())
        .bind(plan::PROVIDER_CALLS[4].as_str())
        .bind(plan::PROVIDER_CALLS[5].as_str())
        .bind(plan::PROVIDER_CALLS[6].as_str())
        .bind(by.as_ref().map(|(h, _)| h.as_str()))
        .bind(by.as_ref().map(|(_, e)| *e))
        .execute(&mut *tx)
        .await?;
        tx.commit().await.noted(self)?;
        Ok(claimed.rows_affected() == 1)
    }

    pub(in crate::store) async fn unknown_in_flight(
        &self,
        now: Timestamp,
        zone: Option<&str>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.write().await?;
        let by = match zone {
            Some(zone) => self.fence(&mut tx, zone, Fenced::Effect).await?,
            None => None,
        };
        // With leases, only the zones this daemon holds (taking a zone does the same).
        let rows: Vec<RawOutbox> = sqlx::query_as(
            "SELECT id, coalesce(seq, id) AS seq, zone, effect, attempts, account FROM outbox \
             WHERE status = $1 AND started_at IS NOT NULL \
             AND ($2::text IS NULL OR zone = $2) \
             AND ($3::text IS NULL OR zone IN (SELECT name FROM zones WHERE lease_holder = $3)) \
             ORDER BY id",
        )
        .bind(OutboxStatus::Pending.as_str())
        .bind(zone)
        .bind(self.holder())
        .fetch_all(&mut *tx)
        .await?;
        let rows = rows
            .into_iter()
            .map(OutboxItem::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        for row in &rows {
            self.mark_unknown(&mut tx, row, now, by.as_ref()).await?;
        }
        tx.commit().await.noted(self)?;
        Ok(rows.len() as u64)
    }

    /// A provider call begun and never finished becomes one of unknown outcome.
    pub(super) async fn mark_unknown(
        &self,
        tx: &mut PgConnection,
        row: &OutboxItem,
        now: Timestamp,
        by: Option<&Writer>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE outbox SET status = $1, finished_at = $2, last_error = $3 WHERE id = $4",
        )
        .bind(OutboxStatus::Unknown.as_str())
        .bind(now.0)
        .bind(plan::IN_FLIGHT_ERROR)
        .bind(row.id)
        .execute(&mut *tx)
        .await?;
        let state = state_of(&mut *tx, &row.zone).await?;
        let event = plan::outcome_unknown(&row.effect, state);
        step::insert_event(tx, &row.zone, now, &event, by).await
    }

    pub(in crate::store) async fn settle_unknown_call(
        &self,
        id: i64,
        zone: &str,
        took_effect: bool,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let by = self.fence(&mut tx, zone, Fenced::Effect).await?;
        let settled = sqlx::query(
            "UPDATE outbox SET status = $1, finished_at = $2 WHERE id = $3 AND status = $4",
        )
        .bind(plan::settled(took_effect).as_str())
        .bind(now.0)
        .bind(id)
        .bind(OutboxStatus::Unknown.as_str())
        .execute(&mut *tx)
        .await?;
        if settled.rows_affected() == 1 {
            insert_note(&mut tx, zone, now, EventKind::Effect, reason, by.as_ref()).await?;
        }
        tx.commit().await.noted(self)?;
        Ok(())
    }

    pub(in crate::store) async fn retry_effect(
        &self,
        id: i64,
        error: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let zone = Self::outbox_zone(&mut tx, id).await?;
        self.fence(&mut tx, &zone, Fenced::Effect).await?;
        sqlx::query("UPDATE outbox SET attempts = attempts + 1, last_error = $1 WHERE id = $2")
            .bind(error)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await.noted(self)
    }

    pub(in crate::store) async fn alert_notified(
        &self,
        id: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        self.fence_alert(&mut tx, id).await?;
        sqlx::query(
            "UPDATE alerts SET last_notified_at = $1, notifications = notifications + 1 \
             WHERE id = $2",
        )
        .bind(now.0)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await.noted(self)
    }

    pub(in crate::store) async fn alert_resolution_notified(
        &self,
        id: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        self.fence_alert(&mut tx, id).await?;
        sqlx::query("UPDATE alerts SET resolved_notified_at = $1 WHERE id = $2")
            .bind(now.0)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await.noted(self)
    }
}
