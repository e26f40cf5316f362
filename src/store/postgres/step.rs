//! A step's writes ([`StepPlan`]) and audit events in PostgreSQL's SQL, inside the
//! caller's write transaction, fenced by then; `by` is the writer (holder and epoch)
//! every row it adds carries.

use sqlx::PgConnection;

use super::PgStore;
use crate::lifecycle::{Decision, Timestamp};
use crate::store::faults::Noted;
use crate::store::lease::{Fenced, Writer};
use crate::store::plan::{AlertChange, Event, LastEvent, StepPlan};
use crate::store::{ObservationText, OutboxStatus, StepRow, StoreError};

impl PgStore {
    /// Writes one step ([`StepPlan`]), fenced by the zone's lease.
    pub(in crate::store) async fn commit_step(
        &self,
        read: &StepRow,
        decision: &Decision,
        observation: &ObservationText,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let plan = StepPlan::new(read, decision, observation, now)?;
        let mut tx = self.write().await?;
        let by = self.fence(&mut tx, plan.zone.name, Fenced::Step).await?;
        if !write(&mut tx, &plan, by.as_ref()).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await.noted(self)?;
        Ok(true)
    }
}

/// Writes the plan in its order; false (the caller rolls back) if the zone's row changed
/// since it was read.
async fn write(
    tx: &mut PgConnection,
    plan: &StepPlan<'_>,
    by: Option<&Writer>,
) -> Result<bool, StoreError> {
    let zone = &plan.zone;
    let updated = sqlx::query(
        "UPDATE zones SET state = $1, state_since = $2, facts = $3, next_check_at = $4, \
         last_observed_at = $5, last_observation = $6, last_brief = $7, \
         version = version + 1 WHERE name = $8 AND version = $9",
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
        insert_event(tx, zone.name, now, event, by).await?;
    }
    // One statement: one round trip.
    if let Some(s) = &plan.supersede {
        sqlx::query(
            "UPDATE outbox SET status = $1, finished_at = $2 WHERE zone = $3 AND status = $4 \
             AND (kind IN ($5, $6, $7, $8, $9, $10, $11) \
               OR (kind = $12 AND NOT ($13 AND \
                   ((effect::jsonb) ->> 'ds_line') IS NOT DISTINCT FROM $14)) \
               OR (kind = $15 AND NOT $16) \
               OR kind = $17)",
        )
        .bind(s.status)
        .bind(s.at.0)
        .bind(zone.name)
        .bind(OutboxStatus::Pending.as_str())
        .bind(s.calls[0])
        .bind(s.calls[1])
        .bind(s.calls[2])
        .bind(s.calls[3])
        .bind(s.calls[4])
        .bind(s.calls[5])
        .bind(s.calls[6])
        .bind(s.announce)
        .bind(s.announce_kept)
        .bind(s.ds_line)
        .bind(s.delegation)
        .bind(s.delegation_kept)
        .bind(s.notify)
        .execute(&mut *tx)
        .await?;
    }
    for effect in &plan.effects {
        // One row: the daemons' DS requests are numbered one after another.
        let (seq,): (i64,) = sqlx::query_as(
            "UPDATE database_meta SET last_seq = GREATEST(last_seq + 1, $1) \
             WHERE single = 1 RETURNING last_seq",
        )
        .bind(now.0)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO outbox (zone, created_at, kind, effect, holder, epoch, seq, account) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(zone.name)
        .bind(now.0)
        .bind(effect.kind)
        .bind(&effect.effect)
        .bind(by.map(|(h, _)| h.as_str()))
        .bind(by.map(|(_, e)| *e))
        .bind(seq)
        .bind(effect.account.as_deref())
        .execute(&mut *tx)
        .await?;
    }
    for (change, audit) in &plan.alerts {
        match *change {
            AlertChange::Open { kind, message } => {
                sqlx::query(
                    "INSERT INTO alerts (zone, kind, severity, message, opened_at) \
                     VALUES ($1, $2, $3, $4, $5)",
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
                sqlx::query("UPDATE alerts SET message = $1 WHERE id = $2")
                    .bind(message)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            AlertChange::Resolve { id, .. } => {
                sqlx::query("UPDATE alerts SET resolved_at = $1 WHERE id = $2")
                    .bind(now.0)
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        if let Some(audit) = audit {
            insert_event(tx, zone.name, now, audit, by).await?;
        }
    }
    Ok(true)
}

/// Adds an event to the zone's audit trail, or counts it on the last one it repeats.
pub(super) async fn insert_event(
    tx: &mut PgConnection,
    zone: &str,
    at: Timestamp,
    event: &Event<'_>,
    by: Option<&Writer>,
) -> Result<(), StoreError> {
    if event.kind.counts_repeats() {
        let [kind, transition, intent] = event.repeat_kinds();
        let last: Option<LastEvent> = sqlx::query_as(
            "SELECT id, kind, from_state, to_state, reason FROM events \
             WHERE zone = $1 AND kind IN ($2, $3, $4) ORDER BY id DESC LIMIT 1",
        )
        .bind(zone)
        .bind(kind)
        .bind(transition)
        .bind(intent)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(id) = event.repeats(last) {
            sqlx::query(
                "INSERT INTO event_repeats (event_id, count, last_at) VALUES ($1, 1, $2) \
                 ON CONFLICT (event_id) DO UPDATE \
                 SET count = event_repeats.count + 1, last_at = excluded.last_at",
            )
            .bind(id)
            .bind(at.0)
            .execute(&mut *tx)
            .await?;
            return Ok(());
        }
    }
    sqlx::query(
        "INSERT INTO events (zone, at, kind, from_state, to_state, reason, observation, \
         holder, epoch) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(zone)
    .bind(at.0)
    .bind(event.kind.as_str())
    .bind(event.from.map(|s| s.as_str()))
    .bind(event.to.map(|s| s.as_str()))
    .bind(event.reason.as_ref())
    .bind(event.observation)
    .bind(by.map(|(h, _)| h.as_str()))
    .bind(by.map(|(_, e)| *e))
    .execute(tx)
    .await?;
    Ok(())
}
