//! SQLite's reads: a step's read of its zone (one statement, due zones in index order),
//! the zones, the outbox, the audit trail and the alerts.

use std::time::Duration;

use futures::TryStreamExt;

use super::SqliteStore;
use crate::lifecycle::{State, Timestamp};
use crate::store::plan;
use crate::store::rows::{
    ALERT_COLUMNS, RawAlert, RawCountedEvent, RawEvent, RawStepRow, RawZone, StepRow, parse_state,
};
use crate::store::{AlertRow, EventRow, StoreError, ZoneFilter, ZoneRow};

/// A step's read of its zone (`StepRow`), to be completed by a `WHERE`: the row with its
/// last observation's brief (all a step reads of it: the whole one is kilobytes of JSON),
/// the last DS request's hook failure of its state, the last NOTIFY(CDS)'s outcome of its
/// state (where the state can have one) (binds: the two DS request kinds),
/// whether calls of unknown outcome or owed effects wait, and the open alerts.
pub(in crate::store) const STEP_READ: &str = "SELECT z.name, z.intent, z.ds_never_submitted, z.state, z.state_since, \
     z.facts, z.next_check_at, z.last_observed_at, z.version, \
     z.last_brief AS last_observation, \
     (SELECT o.last_error FROM outbox o WHERE o.zone = z.name \
      AND o.created_at >= z.state_since AND o.kind IN (?, ?) \
      ORDER BY o.id DESC LIMIT 1) AS hook_error, \
     CASE WHEN z.state IN ('awaiting_ds', 'awaiting_ds_removal') THEN \
      (SELECT o.outcome FROM outbox o WHERE o.zone = z.name \
       AND o.created_at >= z.state_since AND o.kind = 'notify_cds' AND o.outcome IS NOT NULL \
       ORDER BY o.id DESC LIMIT 1) END AS notify_outcome, \
     EXISTS (SELECT 1 FROM outbox o WHERE o.zone = z.name AND o.status = 'unknown') AS has_unknown, \
     EXISTS (SELECT 1 FROM outbox o WHERE o.zone = z.name AND o.status = 'pending') AS has_pending, \
     (SELECT json_group_array(json_object('kind', a.kind, 'id', a.id, 'message', a.message)) \
      FROM alerts a WHERE a.zone = z.name AND a.resolved_at IS NULL) AS open_alerts \
     FROM zones z";

/// The due zones of a tick, in the order of the `zones_due` index, so the read stops at the
/// limit instead of reading and sorting every zone due at the same moment.
pub(in crate::store) const DUE_ORDER: &str =
    "WHERE z.next_check_at <= ? ORDER BY z.next_check_at, z.name LIMIT ?";

impl SqliteStore {
    /// Statuses in the hot statements are written out, not bound: SQLite prepares a
    /// statement again at every run when a bound value decides whether a partial index
    /// (`outbox_pending`) applies. `outbox_statuses_are_the_literals_in_sql` holds them.
    pub async fn zone_for_step(&self, name: &str) -> Result<Option<StepRow>, StoreError> {
        let raw: Option<RawStepRow> = sqlx::query_as(&format!("{STEP_READ} WHERE z.name = ?"))
            .bind(plan::DS_REQUESTS[0].as_str())
            .bind(plan::DS_REQUESTS[1].as_str())
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        raw.map(StepRow::try_from).transpose()
    }

    /// The zones due now as their steps read them, earliest first, in one statement.
    pub async fn due_for_step(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<StepRow>, StoreError> {
        let raw: Vec<RawStepRow> = sqlx::query_as(&format!("{STEP_READ} {DUE_ORDER}"))
            .bind(plan::DS_REQUESTS[0].as_str())
            .bind(plan::DS_REQUESTS[1].as_str())
            .bind(now.0)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        raw.into_iter().map(StepRow::try_from).collect()
    }

    pub async fn zone(&self, name: &str) -> Result<Option<ZoneRow>, StoreError> {
        let raw: Option<RawZone> = sqlx::query_as("SELECT * FROM zones WHERE name = ?")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        raw.map(ZoneRow::try_from).transpose()
    }

    pub async fn zones(&self) -> Result<Vec<ZoneRow>, StoreError> {
        let raw: Vec<RawZone> = sqlx::query_as("SELECT * FROM zones ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        raw.into_iter().map(ZoneRow::try_from).collect()
    }

    /// The zones `filter` admits in name order, handed to `each` one row at a time (until
    /// it answers false), with the last observation's brief: the whole observations of
    /// 100,000 zones are a hundred megabytes of JSON, and 100,000 rows at once a large
    /// resident set.
    pub async fn each_zone_listed<E: From<StoreError>>(
        &self,
        filter: &ZoneFilter,
        each: &mut impl FnMut(ZoneRow) -> Result<bool, E>,
    ) -> Result<(), E> {
        let sql = format!(
            "SELECT name, intent, ds_never_submitted, state, state_since, facts, next_check_at, \
             last_observed_at, sampled_at, version, last_brief AS last_observation \
             FROM zones{}",
            filter.sql("json_extract(last_brief, '$.provider.account')")
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

    /// The earliest next check of any zone.
    pub async fn next_due(&self) -> Result<Option<Timestamp>, StoreError> {
        let (at,): (Option<i64>,) = sqlx::query_as("SELECT min(next_check_at) FROM zones")
            .fetch_one(&self.pool)
            .await?;
        Ok(at.map(Timestamp))
    }

    pub async fn events(&self, zone: &str) -> Result<Vec<EventRow>, StoreError> {
        let raw: Vec<RawEvent> = sqlx::query_as(
            "SELECT e.id, e.zone, e.at, e.kind, e.from_state, e.to_state, e.reason, \
             coalesce(r.count, 0) AS repeats, r.last_at FROM events e \
             LEFT JOIN event_repeats r ON r.event_id = e.id WHERE e.zone = ? ORDER BY e.id",
        )
        .bind(zone)
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(EventRow::try_from).collect()
    }

    /// For a test's copy of the audit trail: the zone's events from the event `from` on
    /// (by id) and every earlier one that repeated, with how many events the zone has, in
    /// one statement.
    pub async fn events_from(
        &self,
        zone: &str,
        from: i64,
    ) -> Result<(Vec<EventRow>, i64), StoreError> {
        let raw: Vec<RawCountedEvent> = sqlx::query_as(
            "SELECT e.id, e.zone, e.at, e.kind, e.from_state, e.to_state, e.reason, \
             coalesce(r.count, 0) AS repeats, r.last_at, \
             (SELECT count(*) FROM events WHERE zone = ?1) AS total FROM events e \
             LEFT JOIN event_repeats r ON r.event_id = e.id \
             WHERE e.zone = ?1 AND (e.id >= ?2 OR r.event_id IS NOT NULL) ORDER BY e.id",
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

    /// Open alerts, of one zone or of all.
    pub async fn open_alerts(&self, zone: Option<&str>) -> Result<Vec<AlertRow>, StoreError> {
        let raw: Vec<RawAlert> = sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE resolved_at IS NULL \
             AND (?1 IS NULL OR zone = ?1) ORDER BY zone, kind"
        ))
        .bind(zone)
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(AlertRow::try_from).collect()
    }

    /// Alerts owing a notification: new, due for a re-notification, or resolved.
    pub async fn alerts_to_notify(
        &self,
        now: Timestamp,
        renotify_after: Duration,
    ) -> Result<Vec<AlertRow>, StoreError> {
        let renotify_ms = i64::try_from(renotify_after.as_millis()).unwrap_or(i64::MAX);
        let raw: Vec<RawAlert> = sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE \
             last_notified_at IS NULL \
             OR (resolved_at IS NULL AND last_notified_at <= ? - ?) \
             OR (resolved_at IS NOT NULL AND resolved_notified_at IS NULL) \
             ORDER BY id"
        ))
        .bind(now.0)
        .bind(renotify_ms)
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(AlertRow::try_from).collect()
    }

    /// Counts of zones per state (`None`: not yet observed), for STATUS and metrics.
    pub async fn state_counts(&self) -> Result<Vec<(Option<State>, i64)>, StoreError> {
        let rows: Vec<(Option<String>, i64)> =
            sqlx::query_as("SELECT state, count(*) FROM zones GROUP BY state ORDER BY state")
                .fetch_all(&self.pool)
                .await?;
        rows.into_iter()
            .map(|(s, n)| Ok((parse_state(s.as_deref())?, n)))
            .collect()
    }
}
