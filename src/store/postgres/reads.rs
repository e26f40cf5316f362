//! PostgreSQL's reads: a step's read of its zone (with leases, only the zones this daemon
//! holds), the zones, the outbox, the audit trail and the alerts.

use std::time::Duration;

use futures::TryStreamExt;

use super::PgStore;
use crate::lifecycle::{State, Timestamp};
use crate::store::plan;
use crate::store::rows::{
    ALERT_COLUMNS, RawAlert, RawCountedEvent, RawEvent, RawStepRow, RawZone, StepRow, parse_state,
};
use crate::store::{AlertRow, EventRow, OutboxStatus, StoreError, ZoneFilter, ZoneRow};

/// A step's read of its zone (`StepRow`), to be completed by a `WHERE` from `$5`: as in
/// the SQLite backend (the last observation's brief; binds: the two DS request kinds, the
/// statuses `unknown` and `pending`).
const STEP_READ: &str = "SELECT z.name, z.intent, z.ds_never_submitted, z.state, z.state_since, \
     z.facts, z.next_check_at, z.last_observed_at, z.version, \
     z.lease_holder, z.lease_epoch, z.lease_since, z.lease_until, \
     z.last_brief AS last_observation, \
     (SELECT o.last_error FROM outbox o WHERE o.zone = z.name \
      AND o.created_at >= z.state_since AND o.kind IN ($1, $2) \
      ORDER BY o.id DESC LIMIT 1) AS hook_error, \
     CASE WHEN z.state IN ('awaiting_ds', 'awaiting_ds_removal') THEN \
      (SELECT o.outcome FROM outbox o WHERE o.zone = z.name \
       AND o.created_at >= z.state_since AND o.kind = 'notify_cds' AND o.outcome IS NOT NULL \
       ORDER BY o.id DESC LIMIT 1) END AS notify_outcome, \
     EXISTS (SELECT 1 FROM outbox o WHERE o.zone = z.name AND o.status = $3) AS has_unknown, \
     EXISTS (SELECT 1 FROM outbox o WHERE o.zone = z.name AND o.status = $4) AS has_pending, \
     COALESCE((SELECT json_agg(json_build_object('kind', a.kind, 'id', a.id, 'message', a.message)) \
      FROM alerts a WHERE a.zone = z.name AND a.resolved_at IS NULL), '[]')::text AS open_alerts \
     FROM zones z";

impl PgStore {
    pub(in crate::store) async fn zone_for_step(
        &self,
        name: &str,
    ) -> Result<Option<StepRow>, StoreError> {
        let raw: Option<RawStepRow> = sqlx::query_as(&format!("{STEP_READ} WHERE z.name = $5"))
            .bind(plan::DS_REQUESTS[0].as_str())
            .bind(plan::DS_REQUESTS[1].as_str())
            .bind(OutboxStatus::Unknown.as_str())
            .bind(OutboxStatus::Pending.as_str())
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        raw.map(StepRow::try_from).transpose()
    }

    pub(in crate::store) async fn due_for_step(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<StepRow>, StoreError> {
        // With leases: only the zones this daemon holds (`$7` NULL: every zone), as `due`.
        let raw: Vec<RawStepRow> = sqlx::query_as(&format!(
            "{STEP_READ} WHERE z.next_check_at <= $5 \
             AND ($7::text IS NULL OR (z.lease_holder = $7 AND z.lease_until > warden_now_ms())) \
             ORDER BY z.next_check_at, z.name LIMIT $6"
        ))
        .bind(plan::DS_REQUESTS[0].as_str())
        .bind(plan::DS_REQUESTS[1].as_str())
        .bind(OutboxStatus::Unknown.as_str())
        .bind(OutboxStatus::Pending.as_str())
        .bind(now.0)
        .bind(i64::from(limit))
        .bind(self.holder())
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(StepRow::try_from).collect()
    }

    pub(in crate::store) async fn zone(&self, name: &str) -> Result<Option<ZoneRow>, StoreError> {
        let raw: Option<RawZone> = sqlx::query_as("SELECT * FROM zones WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        raw.map(ZoneRow::try_from).transpose()
    }

    pub(in crate::store) async fn zones(&self) -> Result<Vec<ZoneRow>, StoreError> {
        let raw: Vec<RawZone> = sqlx::query_as("SELECT * FROM zones ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        raw.into_iter().map(ZoneRow::try_from).collect()
    }

    /// The zones `filter` admits in name order, one row at a time (until `each` answers
    /// false), with the last observation's brief.
    pub(in crate::store) async fn each_zone_listed<E: From<StoreError>>(
        &self,
        filter: &ZoneFilter,
        each: &mut impl FnMut(ZoneRow) -> Result<bool, E>,
    ) -> Result<(), E> {
        let sql = format!(
            "SELECT name, intent, ds_never_submitted, state, state_since, facts, next_check_at, \
             last_observed_at, sampled_at, version, lease_holder, lease_epoch, lease_since, \
             lease_until, last_brief AS last_observation \
             FROM zones{}",
            filter.sql("((last_brief::jsonb) -> 'provider' ->> 'account')")
        );
        let mut rows = filter
            .bind(sqlx::query_as::<_, RawZone>(&sql))
            .fetch(&self.pool);
        while let Some(raw) = rows.try_next().await.map_err(StoreError::from)? {
            if !each(ZoneRow::try_from(raw)?)? {
                break;
            }
        }
        Ok(())
    }

    pub(in crate::store) async fn next_due(&self) -> Result<Option<Timestamp>, StoreError> {
        let (at,): (Option<i64>,) = sqlx::query_as(
            "SELECT min(next_check_at) FROM zones \
             WHERE $1::text IS NULL OR (lease_holder = $1 AND lease_until > warden_now_ms())",
        )
        .bind(self.holder())
        .fetch_one(&self.pool)
        .await?;
        Ok(at.map(Timestamp))
    }

    pub(in crate::store) async fn events(&self, zone: &str) -> Result<Vec<EventRow>, StoreError> {
        let raw: Vec<RawEvent> = sqlx::query_as(
            "SELECT e.id, e.zone, e.at, e.kind, e.from_state, e.to_state, e.reason, \
             coalesce(r.count, 0) AS repeats, r.last_at, e.holder, e.epoch FROM events e \
             LEFT JOIN event_repeats r ON r.event_id = e.id WHERE e.zone = $1 ORDER BY e.id",
        )
        .bind(zone)
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(EventRow::try_from).collect()
    }

    pub(in crate::store) async fn events_from(
        &self,
        zone: &str,
        from: i64,
    ) -> Result<(Vec<EventRow>, i64), StoreError> {
        let raw: Vec<RawCountedEvent> = sqlx::query_as(
            "SELECT e.id, e.zone, e.at, e.kind, e.from_state, e.to_state, e.reason, \
             coalesce(r.count, 0) AS repeats, r.last_at, e.holder, e.epoch, \
             (SELECT count(*) FROM events WHERE zone = $1) AS total FROM events e \
             LEFT JOIN event_repeats r ON r.event_id = e.id \
             WHERE e.zone = $1 AND (e.id >= $2 OR r.event_id IS NOT NULL) ORDER BY e.id",
        )
        .bind(zone)
        .bind(from)
        .fetch_all(&self.pool)
        .await?;
        let total = raw.first().map_or(0, |r| r.total);
        let events = raw
            .into_iter()
            .map(|r| EventRow::try_from(r.event))
            .collect::<Result<_, _>>()?;
        Ok((events, total))
    }

    pub(in crate::store) async fn open_alerts(
        &self,
        zone: Option<&str>,
    ) -> Result<Vec<AlertRow>, StoreError> {
        let raw: Vec<RawAlert> = sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE resolved_at IS NULL \
             AND ($1::text IS NULL OR zone = $1) ORDER BY zone, kind"
        ))
        .bind(zone)
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(AlertRow::try_from).collect()
    }

    pub(in crate::store) async fn alerts_to_notify(
        &self,
        now: Timestamp,
        renotify_after: Duration,
    ) -> Result<Vec<AlertRow>, StoreError> {
        let renotify_ms = i64::try_from(renotify_after.as_millis()).unwrap_or(i64::MAX);
        // `now - renotify` computed here: a huge interval must not overflow in SQL.
        let due_before = now.0.saturating_sub(renotify_ms);
        let raw: Vec<RawAlert> = sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE \
             (last_notified_at IS NULL \
             OR (resolved_at IS NULL AND last_notified_at <= $1) \
             OR (resolved_at IS NOT NULL AND resolved_notified_at IS NULL)) \
             AND ($2::text IS NULL OR zone IN (SELECT name FROM zones \
                  WHERE lease_holder = $2 AND lease_until > warden_now_ms())) \
             ORDER BY id"
        ))
        .bind(due_before)
        .bind(self.holder())
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(AlertRow::try_from).collect()
    }

    pub(in crate::store) async fn state_counts(
        &self,
    ) -> Result<Vec<(Option<State>, i64)>, StoreError> {
        // NULLS FIRST: SQLite's order, "not yet observed" first.
        let rows: Vec<(Option<String>, i64)> = sqlx::query_as(
            "SELECT state, count(*) FROM zones GROUP BY state ORDER BY state NULLS FIRST",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(s, n)| Ok((parse_state(s.as_deref())?, n)))
            .collect()
    }
}
