//! The database file under faults: write transactions that leave no connection behind in
//! a broken state and that carry the database's generation (`integrity`), and a
//! write-health flag that logs once per episode.
//!
//! Why connections are checked on release: when SQLite rolls a transaction back by itself
//! (SQLITE_FULL, an I/O error, `RAISE(ROLLBACK)`), also when the failing statement is the
//! `COMMIT`, sqlx 0.8 still counts the transaction as open; its `ROLLBACK` on drop then
//! fails ("no transaction is active"), the count stays at 1, and the connection goes back
//! to the pool where every later `BEGIN IMMEDIATE` fails with "attempted to call
//! begin_with at non-zero transaction depth", forever. The pool now discards such a
//! connection (`discard_if_in_transaction`) and opens a fresh one when needed.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use sqlx::pool::PoolConnectionMetadata;
use sqlx::{Connection, Sqlite, SqliteConnection};

use super::StoreError;
use super::sqlite::SqliteStore;
use crate::lifecycle::{Clock, SystemClock, Timestamp};

/// An episode of failing writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteFailure {
    pub since: Timestamp,
    /// The first error of the episode.
    pub cause: String,
}

/// Whether writes to the database currently fail (disk full, I/O error, read-only file
/// system). Shared by every clone of a `Store`.
#[derive(Debug, Default)]
pub(super) struct Health {
    failing: AtomicBool,
    episode: Mutex<Option<WriteFailure>>,
}

impl Health {
    pub(super) fn failure(&self) -> Option<WriteFailure> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        self.episode.lock().ok().and_then(|e| e.clone())
    }

    fn write_failed(&self, database: &str, error: &sqlx::Error) {
        if self.failing.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut episode) = self.episode.lock() else {
            return;
        };
        if episode.is_none() {
            tracing::error!(
                database,
                "database cannot be written: {error}; retrying, the daemon goes on once it can write"
            );
            *episode = Some(WriteFailure {
                since: SystemClock.now(),
                cause: error.to_string(),
            });
        }
        self.failing.store(true, Ordering::Release);
    }

    fn write_succeeded(&self, database: &str) {
        if !self.failing.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut episode) = self.episode.lock() else {
            return;
        };
        if let Some(ended) = episode.take() {
            let lasted = SystemClock.now().since(ended.since);
            tracing::warn!(
                database,
                "database writable again after {}s (writes failed since {}: {})",
                lasted.as_secs(),
                ended.since,
                ended.cause
            );
        }
        self.failing.store(false, Ordering::Release);
    }
}

/// Errors that say the database cannot be written at all, as opposed to a conflict or a
/// bad statement: SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY, SQLITE_CANTOPEN, or an OS
/// error; on PostgreSQL, the SQLSTATE classes 53 (disk full, out of memory) and 58 (I/O),
/// and a read-only transaction (a standby).
pub(super) fn is_unwritable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(e)
            if e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .is_some() =>
        {
            e.code().is_some_and(|code| {
                code.starts_with("53") || code.starts_with("58") || code == "25006"
            })
        }
        sqlx::Error::Database(e) => e
            .code()
            .and_then(|c| c.parse::<i32>().ok())
            .is_some_and(|code| matches!(code & 0xff, 8 | 10 | 13 | 14)),
        _ => false,
    }
}

impl StoreError {
    /// The database cannot be written now (disk full, I/O error); it may recover by itself.
    pub fn is_unwritable(&self) -> bool {
        match self {
            StoreError::Sql(e) => is_unwritable(e),
            StoreError::Shared(e) => e.is_unwritable(),
            _ => false,
        }
    }

    /// The database's files are not the ones opened, or it is damaged: nothing written now
    /// would last, nothing read can be trusted. The daemon stops.
    pub fn is_fatal(&self) -> bool {
        match self {
            StoreError::Gone { .. }
            | StoreError::Replaced { .. }
            | StoreError::CompanionGone { .. }
            | StoreError::CompanionReplaced { .. }
            | StoreError::Restored { .. }
            | StoreError::Swapped { .. }
            | StoreError::Damaged { .. } => true,
            StoreError::Sql(e) => super::integrity::is_damage(e),
            StoreError::Shared(e) => e.is_fatal(),
            _ => false,
        }
    }
}

/// A backend whose writes are watched: its health, and the name its log lines give.
pub(super) trait Watched {
    fn health(&self) -> &Health;
    fn label(&self) -> &str;
}

/// Notes the outcome of a write in the store's health.
pub(super) trait Noted<T> {
    /// A write's outcome: success ends an episode of failing writes.
    fn noted(self, store: &impl Watched) -> Result<T, StoreError>;
    /// A step towards a write (`BEGIN`): only its failure counts.
    fn noted_if_failed(self, store: &impl Watched) -> Result<T, StoreError>;
}

impl<T> Noted<T> for Result<T, sqlx::Error> {
    fn noted(self, store: &impl Watched) -> Result<T, StoreError> {
        if self.is_ok() {
            store.health().write_succeeded(store.label());
        }
        self.noted_if_failed(store)
    }

    fn noted_if_failed(self, store: &impl Watched) -> Result<T, StoreError> {
        if let Err(e) = &self
            && is_unwritable(e)
        {
            store.health().write_failed(store.label(), e);
        }
        Ok(self?)
    }
}

/// A write transaction (`BEGIN IMMEDIATE`): used like `sqlx::Transaction`; its commit
/// first checks that the file is still the one opened, and notes the outcome.
pub(super) struct WriteTx<'s> {
    pub(super) tx: sqlx::Transaction<'static, Sqlite>,
    pub(super) store: &'s SqliteStore,
    /// The database's generation this transaction reached (`None`: a store without a
    /// file, in memory).
    pub(super) generation: Option<i64>,
    /// The store's write turn, released after the transaction (fields drop in order);
    /// `None` when the caller holds it.
    pub(super) _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl WriteTx<'_> {
    pub(super) async fn commit(self) -> Result<(), StoreError> {
        // Dropping `tx` here rolls back: a write to a removed file would be lost.
        self.store.verify_identity().await?;
        self.tx.commit().await.noted(self.store)?;
        if let Some(generation) = self.generation {
            self.store.wrote(generation);
        }
        Ok(())
    }

    pub(super) async fn rollback(self) -> Result<(), StoreError> {
        Ok(self.tx.rollback().await?)
    }
}

impl Deref for WriteTx<'_> {
    type Target = SqliteConnection;
    fn deref(&self) -> &SqliteConnection {
        &self.tx
    }
}

impl DerefMut for WriteTx<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.tx
    }
}

/// `after_release` of the file pools: a connection that sqlx still counts inside a
/// transaction once its queued rollback has run is closed, never handed out again.
pub(super) fn discard_if_in_transaction(
    conn: &mut SqliteConnection,
    _meta: PoolConnectionMetadata,
) -> BoxFuture<'_, Result<bool, sqlx::Error>> {
    Box::pin(async move {
        if !conn.is_in_transaction() {
            return Ok(true);
        }
        // A dropped transaction queues its rollback on the connection; a ping runs after it.
        conn.ping().await?;
        if conn.is_in_transaction() {
            tracing::debug!(
                "closing a database connection left inside a transaction SQLite had already ended"
            );
            return Ok(false);
        }
        Ok(true)
    })
}

impl SqliteStore {
    /// One small real write (the header's `user_version`, set to the value it has): while
    /// writes fail, the daemon probes with it instead of observing zones whose steps
    /// could not be recorded; its success ends the episode.
    pub async fn probe_writable(&self) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let (version,): (i64,) = sqlx::query_as("PRAGMA user_version")
            .fetch_one(&mut *tx)
            .await?;
        sqlx::query(&format!("PRAGMA user_version = {version}"))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }
}
