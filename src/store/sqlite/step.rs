//! A step's writes ([`StepPlan`]) and audit events in SQLite's SQL, inside the caller's
//! write transaction.

use sqlx::SqliteConnection;

use super::super::StoreError;
use super::super::plan::{AlertChange, Event, LastEvent, StepPlan};
use crate::lifecycle::Timestamp;

/// Writes the plan in its order; false (the caller rolls back) if the zone's row changed
/// since it was read.
pub(super) async fn write(
    tx: &mut SqliteConnection,
    plan: &StepPlan<'_>,
) -> Result<bool, StoreError> {
    let zone = &plan.zone;
    let updated = sqlx::query(
        "UPDATE zones SET state = ?, state_since = ?, facts = ?, next_check_at = ?, \
         last_observed_at = ?, last_observation = ?, last_brief = ?, version = version + 1 \
         WHERE name = ? AND version = ?",
    )
    .bind(zone.state)
    .bind(zone.since.0)
    .bind(&zone.facts)
    .bind(zone.wake_at.0)
    .bind(zone.observed_at.0)
    .bind(&zone.observation.whole)
    .bind(&zone.observation.brief)
    .bind(zone.name)
    .bind(zone.version)
    .execute(&mut *tx)
    .await?;
    if updated.rows_affected() != 1 {
        return Ok(false);
    }
    let now = zone.observed_at;
    for event in &plan.events {
        insert_event(tx, zone.name, now, event).await?;
    }
    // One statement: one round trip. `pending` written out, not bound: the partial index
    // `outbox_pending` applies without the statement being prepared again.
    if let Some(s) = &plan.supersede {
        sqlx::query(
            "UPDATE outbox SET status = ?, finished_at = ? WHERE zone = ? AND status = 'pending' \
             AND (kind IN (?, ?) \
               OR (kind = ? AND NOT (? AND json_extract(effect, '$.ds_line') IS ?)) \
               OR (kind = ? AND NOT ?))",
        )
        .bind(s.status)
        .bind(s.at.0)
        .bind(zone.name)
        .bind(s.calls[0])
        .bind(s.calls[1])
        .bind(s.announce)
        .bind(s.announce_kept)
        .bind(s.ds_line)
        .bind(s.delegation)
        .bind(s.delegation_kept)
        .execute(&mut *tx)
        .await?;
    }
    for effect in &plan.effects {
        let (seq,): (i64,) = sqlx::query_as(
            "UPDATE database_meta SET last_seq = max(last_seq + 1, ?) WHERE single = 1 \
             RETURNING last_seq",
        )
        .bind(now.0)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO outbox (zone, created_at, kind, effect, seq) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(zone.name)
        .bind(now.0)
        .bind(effect.kind)
        .bind(&effect.effect)
        .bind(seq)
        .execute(&mut *tx)
        .await?;
    }
    for (change, audit) in &plan.alerts {
        match *change {
            AlertChange::Open { kind, message } => {
                sqlx::query(
                    "INSERT INTO alerts (zone, kind, severity, message, opened_at) \
                     VALUES (?, ?, ?, ?, ?)",
                )
                .bind(zone.name)
                .bind(kind.as_str())
                .bind(kind.severity().as_str())
                .bind(message)
                .bind(now.0)
                .execute(&mut *tx)
                .await?;
            }
            AlertChange::Reword { id, message } => {
                sqlx::query("UPDATE alerts SET message = ? WHERE id = ?")
                    .bind(message)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            AlertChange::Resolve { id, .. } => {
                sqlx::query("UPDATE alerts SET resolved_at = ? WHERE id = ?")
                    .bind(now.0)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        if let Some(audit) = audit {
            insert_event(tx, zone.name, now, audit).await?;
        }
    }
    Ok(true)
}

/// Adds an event to the zone's audit trail, or counts it on the last one it repeats.
pub(super) async fn insert_event(
    tx: &mut SqliteConnection,
    zone: &str,
    at: Timestamp,
    event: &Event<'_>,
) -> Result<(), StoreError> {
    if event.kind.counts_repeats() {
        let [kind, transition, intent] = event.repeat_kinds();
        let last: Option<LastEvent> = sqlx::query_as(
            "SELECT id, kind, from_state, to_state, reason FROM events \
             WHERE zone = ? AND kind IN (?, ?, ?) ORDER BY id DESC LIMIT 1",
        )
        .bind(zone)
        .bind(kind)
        .bind(transition)
        .bind(intent)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(id) = event.repeats(last) {
            sqlx::query(
                "INSERT INTO event_repeats (event_id, count, last_at) VALUES (?, 1, ?) \
                 ON CONFLICT (event_id) DO UPDATE SET count = count + 1, last_at = excluded.last_at",
            )
            .bind(id)
            .bind(at.0)
            .execute(&mut *tx)
            .await?;
            return Ok(());
        }
    }
    sqlx::query(
        "INSERT INTO events (zone, at, kind, from_state, to_state, reason, observation) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(zone)
    .bind(at.0)
    .bind(event.kind.as_str())
    .bind(event.from.map(|s| s.as_str()))
    .bind(event.to.map(|s| s.as_str()))
    .bind(event.reason.as_ref())
    .bind(event.observation)
    .execute(tx)
    .await?;
    Ok(())
}
