//! A step's commit on SQLite: a routine decision joins a group commit (`group`), any
//! other runs its [`StepPlan`] in SQLite's SQL inside a write transaction; the audit
//! events of the other writes go through [`insert_event`] too.

use sqlx::SqliteConnection;

use super::{SqliteStore, WRITE_TURN_WAIT};
use crate::lifecycle::{Decision, Timestamp};
use crate::store::faults::Noted;
use crate::store::group;
use crate::store::plan::{AlertChange, Event, LastEvent, StepPlan};
use crate::store::{ObservationText, StepRow, StoreError};

impl SqliteStore {
    /// A routine decision, written by whoever holds the write turn next together with
    /// every other one queued by then (one statement, its own transaction). False if the
    /// row changed since it was read.
    async fn commit_routine(&self, update: group::RoutineUpdate) -> Result<bool, StoreError> {
        let (id, written) = self.routine.push(update);
        // The first writer to hold the turn after the push writes this decision: it is
        // this one, or one before it that found it queued.
        let turn = match self.turn(WRITE_TURN_WAIT).await {
            Ok(turn) => turn,
            Err(stalled) if self.routine.withdraw(id) => return Err(stalled),
            // Taken meanwhile: its outcome is on the way.
            Err(_) => return Self::outcome(written).await,
        };
        // On a task of its own: the other writers' decisions are written even if this
        // step is abandoned meanwhile.
        let store = self.clone();
        let writing = tokio::spawn(async move {
            for batch in store.routine.take() {
                let outcome = store.write_batch(&batch).await;
                batch.answer(outcome);
            }
            drop(turn);
        });
        let _ = writing.await;
        Self::outcome(written).await
    }

    async fn outcome(
        written: tokio::sync::oneshot::Receiver<group::Written>,
    ) -> Result<bool, StoreError> {
        match written.await {
            Ok(Ok(done)) => Ok(done),
            Ok(Err(e)) => Err(StoreError::Shared(e)),
            // The task that took it ended without a word (it panicked): said to be not
            // written, so the zone is looked at again at once (a routine decision writes
            // its own row only; nothing else rests on it).
            Err(_) => Ok(false),
        }
    }

    /// One statement for the batch, under the write turn held by the caller: the names of
    /// the zones written.
    async fn write_batch(
        &self,
        batch: &group::Batch,
    ) -> Result<std::collections::HashSet<String>, StoreError> {
        // One statement, its own transaction, without moving the generation on: a
        // routine look changes nothing but the zone's own observation, which a restored
        // copy may lack at no cost (the zone is looked at again); the round trips of a
        // transaction around it are what a settled zone's look costs (`group`).
        self.verify_identity().await?;
        let sql = batch.statement();
        let mut query = sqlx::query_as::<_, (String,)>(&sql);
        for u in batch.updates() {
            query = query.bind(&u.name).bind(u.version);
            query = match &u.write {
                group::Routine::Step {
                    state,
                    since,
                    facts,
                    observed_at,
                    observation,
                } => query
                    .bind(*state)
                    .bind(*since)
                    .bind(facts)
                    .bind(u.wake_at)
                    .bind(*observed_at)
                    .bind(&observation.whole)
                    .bind(&observation.brief),
                group::Routine::Sample { at } => query.bind(u.wake_at).bind(*at),
            };
        }
        let written = query.fetch_all(&self.pool).await.noted(self)?;
        Ok(written.into_iter().map(|(name,)| name).collect())
    }

    /// Writes one step ([`StepPlan`]): state, facts, audit events, outbox rows and alert
    /// changes, in one transaction. False (and nothing written) if the row changed since
    /// it was read.
    pub async fn commit_step(
        &self,
        read: &StepRow,
        decision: &Decision,
        observation: &ObservationText,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let plan = StepPlan::new(read, decision, observation, now)?;
        // A routine decision joins a group commit.
        if plan.is_routine() {
            let zone = plan.zone;
            return self
                .commit_routine(group::RoutineUpdate {
                    name: zone.name.to_string(),
                    version: zone.version,
                    wake_at: zone.wake_at.0,
                    write: group::Routine::Step {
                        state: zone.state,
                        since: zone.since.0,
                        facts: zone.facts,
                        observed_at: zone.observed_at.0,
                        observation: zone.observation.clone(),
                    },
                })
                .await;
        }
        let mut tx = self.write().await?;
        if !write(&mut tx, &plan).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    /// A sampled look that agreed (DESIGN.md section 4): when it was and when the zone is
    /// looked at next, joining the group commit. False if the row changed since it was
    /// read (an operator's intent: the zone is due now anyway).
    pub async fn sampled(
        &self,
        read: &StepRow,
        at: Timestamp,
        next: Timestamp,
    ) -> Result<bool, StoreError> {
        self.commit_routine(group::RoutineUpdate {
            name: read.row.zone.name.to_string(),
            version: read.row.version,
            wake_at: next.0,
            write: group::Routine::Sample { at: at.0 },
        })
        .await
    }
}

/// Writes the plan in its order; false (the caller rolls back) if the zone's row changed
/// since it was read.
async fn write(tx: &mut SqliteConnection, plan: &StepPlan<'_>) -> Result<bool, StoreError> {
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
             AND (kind IN (?, ?, ?, ?, ?, ?, ?) \
               OR (kind = ? AND NOT (? AND json_extract(effect, '$.ds_line') IS ?)) \
               OR (kind = ? AND NOT ?) \
               OR kind = ?)",
        )
        .bind(s.status)
        .bind(s.at.0)
        .bind(zone.name)
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
        let (seq,): (i64,) = sqlx::query_as(
            "UPDATE database_meta SET last_seq = max(last_seq + 1, ?) WHERE single = 1 \
             RETURNING last_seq",
        )
        .bind(now.0)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO outbox (zone, created_at, kind, effect, seq, account) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(zone.name)
        .bind(now.0)
        .bind(effect.kind)
        .bind(&effect.effect)
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
