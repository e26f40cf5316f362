//! The PostgreSQL backend (`database.url`): the same rows and the same transactions as the
//! SQLite one, in PostgreSQL's dialect, with its own migrations (`migrations/postgres/`).
//!
//! What is SQLite's only stays there: no file identity to check, no read-only file, no
//! connection left in a transaction SQLite ended by itself. Writes that fail because the
//! server cannot write (disk full, I/O, a standby) are noted like a full disk.

use std::sync::Arc;

use sqlx::{PgConnection, PgPool, Postgres};

use super::faults::{Health, Noted, Watched, WriteFailure};
use super::lease::{Lessee, Writer};
use super::plan::Event;
use super::rows::parse_state;
use super::{EventKind, StoreError};
use crate::lifecycle::{State, Timestamp};

mod cluster;
mod open;
mod reads;
mod step;
mod writes;

#[derive(Clone)]
pub(super) struct PgStore {
    pub(super) pool: PgPool,
    health: Arc<Health>,
    /// The URL (never with a password), for log lines and errors.
    label: Arc<str>,
    /// Set by the daemon (`[cluster]`): its writes are fenced by its leases. `None` for
    /// the CLI and tests, whose writes are not a daemon's step.
    lessee: Option<Arc<Lessee>>,
    /// The lease rounds' and checks' own connections: renewals must not queue behind the
    /// steps' writes, or a busy daemon loses its leases (`pool` without leases).
    lease_pool: PgPool,
    /// `database_meta.id` (empty for `check-config`'s look).
    pub(super) database_id: Arc<str>,
}

/// What `check-config` found in a PostgreSQL database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaCheck {
    /// The newest migration applied, 0 for none.
    pub applied: i64,
    /// The newest migration this binary has.
    pub wanted: i64,
}

impl Watched for PgStore {
    fn health(&self) -> &Health {
        &self.health
    }
    fn label(&self) -> &str {
        &self.label
    }
}

impl PgStore {
    /// A failure said with what is happening: no connection came free in time, or a lock
    /// held by another session outlasted the wait (SQLSTATE 55P03).
    pub(super) fn explain(&self, error: StoreError) -> StoreError {
        let url = || self.label.to_string();
        match error {
            StoreError::Sql(sqlx::Error::PoolTimedOut) => StoreError::Busy {
                url: url(),
                what: "no connection came free within 10 s: the server refuses new ones \
                       (max_connections reached?) or every one waits on a lock another \
                       session holds (a long transaction, LOCK TABLE?)",
            },
            StoreError::Sql(sqlx::Error::Database(e)) if e.code().as_deref() == Some("55P03") => {
                StoreError::Busy {
                    url: url(),
                    what: "a lock another session holds (a long transaction, LOCK TABLE?) \
                           kept this command waiting over 10 s; try again",
                }
            }
            error => error,
        }
    }

    pub(super) fn write_failure(&self) -> Option<WriteFailure> {
        self.health.failure()
    }

    async fn write(&self) -> Result<sqlx::Transaction<'static, Postgres>, StoreError> {
        self.pool.begin().await.noted_if_failed(self)
    }

    /// A read-write statement that changes nothing: fails while the server takes no
    /// writes (a standby after a failover, a read-only transaction mode) or cannot be
    /// reached; its success ends an episode of failing writes.
    pub(super) async fn probe_writable(&self) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        sqlx::query("UPDATE zones SET version = version WHERE false")
            .execute(&mut *tx)
            .await
            .noted_if_failed(self)?;
        tx.commit().await.noted(self)
    }

    pub(super) async fn close(&self) {
        self.lease_pool.close().await;
        self.pool.close().await;
    }
}

/// The zone's state, inside a write transaction.
async fn state_of(tx: &mut PgConnection, zone: &str) -> Result<Option<State>, StoreError> {
    let row: Option<(Option<String>,)> = sqlx::query_as("SELECT state FROM zones WHERE name = $1")
        .bind(zone)
        .fetch_optional(&mut *tx)
        .await?;
    let (state,) = row.ok_or_else(|| StoreError::UnknownZone(zone.to_string()))?;
    parse_state(state.as_deref())
}

/// An event that moves nothing, at the zone's state.
async fn insert_note(
    tx: &mut PgConnection,
    zone: &str,
    at: Timestamp,
    kind: EventKind,
    reason: &str,
    by: Option<&Writer>,
) -> Result<(), StoreError> {
    let state = state_of(&mut *tx, zone).await?;
    step::insert_event(tx, zone, at, &Event::note(kind, state, reason), by).await
}
