//! Each alert sink's own queue (`deliveries`): one row per notification and sink, made
//! when the notification is made and delivered by the sink's worker (`engine::sinks`),
//! never inside a zone's step. The same SQL on both backends.
//!
//! Several daemons on PostgreSQL: a zone's rows are delivered by the zone's holder (the
//! worker checks the lease), a daemon-wide one by whichever daemon claims it; every row is
//! claimed (`claimed_until`) before it is sent, so that one daemon sends it.

use std::time::Duration;

use super::daemon_alerts::ms;
use super::faults::Noted;
use super::rows::ts;
use super::{Backend, Store, StoreError};
use crate::lifecycle::Timestamp;

/// A notification one sink owes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    pub id: i64,
    pub sink: String,
    pub event_id: String,
    /// `""` for a daemon-wide alert.
    pub zone: String,
    /// The notification as sent (JSON).
    pub event: String,
    pub attempts: i64,
    pub last_error: Option<String>,
}

from_row!(DeliveryRow {
    id,
    sink,
    event_id,
    zone,
    event,
    attempts,
    last_error
});

/// One sink's record, for `status` and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    pub event_id: String,
    pub seq: i64,
    pub attempts: i64,
    pub delivered_at: Option<Timestamp>,
}

const COLUMNS: &str = "id, sink, event_id, zone, event, attempts, last_error";

impl Store {
    /// Puts a notification in the queue of every sink named (once: a notification already
    /// queued for a sink, same id and number, is not queued again).
    pub async fn enqueue_delivery(
        &self,
        sinks: &[&str],
        event_id: &str,
        seq: i64,
        zone: &str,
        event: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let sql = "INSERT INTO deliveries (sink, event_id, seq, zone, event, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (sink, event_id, seq) DO NOTHING";
        for sink in sinks {
            shared_write!(self, |pool| sqlx::query(sql)
                .bind(*sink)
                .bind(event_id)
                .bind(seq)
                .bind(zone)
                .bind(event)
                .bind(now.0)
                .execute(pool)
                .await);
            if seq > 0 && !zone.is_empty() {
                self.supersede(sink, zone, seq, now).await?;
            }
        }
        Ok(())
    }

    /// A zone's DS or NS request that a later one replaced, not yet sent by `sink`, is
    /// never sent: a publish delivered after its withdrawal was queued would put a DS
    /// at the registrar for a zone about to be unsigned. One being sent now cannot be
    /// called back: "DNSSEC off" waits for it (`ds_publish_in_flight`).
    async fn supersede(
        &self,
        sink: &str,
        zone: &str,
        seq: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let sql = "UPDATE deliveries SET delivered_at = $4, \
             last_error = 'superseded by a later request' \
             WHERE sink = $1 AND zone = $2 AND seq > 0 AND seq < $3 \
             AND delivered_at IS NULL AND (claimed_until IS NULL OR claimed_until <= $4)";
        shared_write!(self, |pool| sqlx::query(sql)
            .bind(sink)
            .bind(zone)
            .bind(seq)
            .bind(now.0)
            .execute(pool)
            .await);
        Ok(())
    }

    /// Whether a request to publish the zone's DS is being sent to a sink right now
    /// (claimed, not yet delivered): "DNSSEC off" waits for it to end.
    pub async fn ds_publish_in_flight(
        &self,
        zone: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let sql = "SELECT count(*) FROM deliveries WHERE zone = $1 AND seq > 0 \
             AND delivered_at IS NULL AND claimed_until > $2 AND event_id LIKE 'ds_publish-%'";
        let (n,): (i64,) = shared_read!(self, |pool| sqlx::query_as(sql)
            .bind(zone)
            .bind(now.0)
            .fetch_one(pool)
            .await?);
        Ok(n > 0)
    }

    /// What `sink` owes and no daemon is delivering now, oldest first.
    pub async fn owed_deliveries(
        &self,
        sink: &str,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<DeliveryRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM deliveries WHERE sink = $1 AND delivered_at IS NULL \
             AND (claimed_until IS NULL OR claimed_until <= $2) ORDER BY id LIMIT $3"
        );
        Ok(shared_read!(self, |pool| sqlx::query_as(&sql)
            .bind(sink)
            .bind(now.0)
            .bind(limit)
            .fetch_all(pool)
            .await?))
    }

    /// Claims a row for `hold` before it is sent; false if another daemon has it or it
    /// was delivered meanwhile.
    pub async fn claim_delivery(
        &self,
        id: i64,
        now: Timestamp,
        hold: Duration,
    ) -> Result<bool, StoreError> {
        // Replaced by a later request meanwhile (queued after this row was read): never
        // sent, and so no longer owed.
        let superseded = "UPDATE deliveries SET delivered_at = $2, \
             last_error = 'superseded by a later request' \
             WHERE id = $1 AND seq > 0 AND delivered_at IS NULL AND EXISTS \
             (SELECT 1 FROM deliveries l WHERE l.sink = deliveries.sink \
              AND l.zone = deliveries.zone AND l.seq > deliveries.seq)";
        shared_write!(self, |pool| sqlx::query(superseded)
            .bind(id)
            .bind(now.0)
            .execute(pool)
            .await);
        let sql = "UPDATE deliveries SET claimed_until = $3 WHERE id = $1 \
             AND delivered_at IS NULL AND (claimed_until IS NULL OR claimed_until <= $2)";
        let done = shared_write!(self, |pool| sqlx::query(sql)
            .bind(id)
            .bind(now.0)
            .bind(now.0.saturating_add(ms(hold)))
            .execute(pool)
            .await);
        Ok(done == 1)
    }

    /// Gives back every claim on a sink's rows: at start, with one daemon on the database
    /// (SQLite), the claims are a dead process's.
    pub async fn release_delivery_claims(&self, sink: &str) -> Result<(), StoreError> {
        let sql = "UPDATE deliveries SET claimed_until = NULL \
             WHERE sink = $1 AND claimed_until IS NOT NULL";
        shared_write!(self, |pool| sqlx::query(sql).bind(sink).execute(pool).await);
        Ok(())
    }

    /// The sink took it.
    pub async fn delivered(&self, id: i64, now: Timestamp) -> Result<(), StoreError> {
        let sql = "UPDATE deliveries SET delivered_at = $2, attempts = attempts + 1, \
             last_error = NULL, claimed_until = NULL WHERE id = $1";
        shared_write!(self, |pool| sqlx::query(sql)
            .bind(id)
            .bind(now.0)
            .execute(pool)
            .await);
        Ok(())
    }

    /// The sink failed it: still owed, the claim given back.
    pub async fn delivery_failed(&self, id: i64, error: &str) -> Result<(), StoreError> {
        let sql = "UPDATE deliveries SET attempts = attempts + 1, last_error = $2, \
             claimed_until = NULL WHERE id = $1";
        shared_write!(self, |pool| sqlx::query(sql)
            .bind(id)
            .bind(error)
            .execute(pool)
            .await);
        Ok(())
    }

    /// Forgets a sink's deliveries made before `before`; returns how many.
    pub async fn prune_deliveries(&self, sink: &str, before: Timestamp) -> Result<u64, StoreError> {
        let sql = "DELETE FROM deliveries WHERE sink = $1 AND delivered_at < $2";
        Ok(shared_write!(self, |pool| sqlx::query(sql)
            .bind(sink)
            .bind(before.0)
            .execute(pool)
            .await))
    }

    /// Every row of one sink, oldest first (tests and operators' questions).
    pub async fn deliveries(&self, sink: &str) -> Result<Vec<DeliveryRecord>, StoreError> {
        let sql = "SELECT event_id, seq, attempts, delivered_at FROM deliveries \
             WHERE sink = $1 ORDER BY id";
        let raw: Vec<(String, i64, i64, Option<i64>)> =
            shared_read!(self, |pool| sqlx::query_as(sql)
                .bind(sink)
                .fetch_all(pool)
                .await?);
        Ok(raw
            .into_iter()
            .map(|(event_id, seq, attempts, at)| DeliveryRecord {
                event_id,
                seq,
                attempts,
                delivered_at: ts(at),
            })
            .collect())
    }
}
