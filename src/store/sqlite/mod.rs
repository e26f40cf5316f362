//! The SQLite backend: one file in WAL mode, its identity checked before every write,
//! opened read-only for `status` and `history`, full-disk episodes noted.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::{SqliteConnection, SqlitePool};

use super::StoreError;
use super::faults::{self, Health, Noted, WriteFailure, WriteTx};
use super::group;
use super::integrity::Integrity;
use super::rows::parse_state;
use crate::lifecycle::State;

mod open;
mod reads;
mod step;
mod writes;

#[cfg(test)]
pub(super) use reads::{DUE_ORDER, STEP_READ};

#[derive(Clone)]
pub struct SqliteStore {
    pub(super) pool: SqlitePool,
    /// The file set opened (`None` in memory and read-only): checked before every write.
    integrity: Option<Arc<Integrity>>,
    pub(super) health: Arc<Health>,
    /// The path, for log lines.
    label: Arc<str>,
    /// Held by every write (a transaction from `BEGIN IMMEDIATE` to its end, or one
    /// statement): the daemon's writers queue here instead of in SQLite's busy handler,
    /// which sleeps 1 to 100 ms between tries while another connection writes.
    serial: Arc<tokio::sync::Mutex<()>>,
    /// Routine decisions waiting for the write turn (`group`: a group commit).
    routine: Arc<group::Queue>,
    /// A database in memory's identity (a file's is its `integrity`'s).
    memory_id: Option<Arc<str>>,
}

/// How long a write waits for its turn behind the daemon's other writes: as long as
/// SQLite's busy timeout would have let it wait for another connection's write lock.
const WRITE_TURN_WAIT: Duration = Duration::from_secs(10);

impl SqliteStore {
    fn new(pool: SqlitePool, integrity: Option<Integrity>, path: &Path) -> Self {
        Self {
            pool,
            integrity: integrity.map(Arc::new),
            health: Arc::default(),
            label: path.display().to_string().into(),
            serial: Arc::default(),
            routine: Arc::default(),
            memory_id: None,
        }
    }

    /// Checks that the database's files are still the ones opened and the database this
    /// one, at this generation or a later one (`integrity`). Every write checks it first;
    /// the daemon also calls it once per engine tick and stops on error.
    pub async fn verify_identity(&self) -> Result<(), StoreError> {
        match &self.integrity {
            Some(integrity) => integrity.verify().await,
            None => Ok(()),
        }
    }

    /// Lets the file set go without a checkpoint: the daemon stops on a fault, and its
    /// view of the log must not be written into the file (`integrity`).
    pub(super) fn let_go(&self) {
        if let Some(integrity) = &self.integrity {
            integrity.let_go();
        }
    }

    /// The path, as log lines and errors say it.
    pub(super) fn path(&self) -> &str {
        &self.label
    }

    /// The database's identity, drawn when it was made (`None` for a read-only store).
    pub fn database_id(&self) -> Option<&str> {
        self.integrity
            .as_deref()
            .map(Integrity::id)
            .or(self.memory_id.as_deref())
    }

    /// A write transaction that reached `generation` was committed.
    pub(super) fn wrote(&self, generation: i64) {
        if let Some(integrity) = &self.integrity {
            integrity.wrote(generation);
        }
    }

    /// The current episode of failing writes (disk full, I/O errors), if any: for
    /// metrics and the systemd status line. It ends at the next successful write.
    pub fn write_failure(&self) -> Option<WriteFailure> {
        self.health.failure()
    }

    /// One write statement, in a write transaction of its own (which adds to the
    /// generation, as every write does); its outcome noted.
    pub(super) async fn write_one<'q>(
        &self,
        query: sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    ) -> Result<sqlx::sqlite::SqliteQueryResult, StoreError> {
        let mut tx = self.write().await?;
        let done = query.execute(&mut *tx).await.noted(self)?;
        tx.commit().await?;
        Ok(done)
    }

    /// This store's write turn, once the write before it has finished; given up after
    /// `wait` (a write that never ends must not hold every other one for good).
    pub(super) async fn turn(
        &self,
        wait: Duration,
    ) -> Result<tokio::sync::OwnedMutexGuard<()>, StoreError> {
        tokio::time::timeout(wait, self.serial.clone().lock_owned())
            .await
            .map_err(|_| StoreError::WriteStalled {
                path: self.label.to_string(),
                waited: wait,
            })
    }

    /// A write transaction that takes the write lock at once (`BEGIN IMMEDIATE`): a
    /// deferred one that reads first can fail to upgrade when another writer got in
    /// between, and SQLite then answers "database is locked" without waiting.
    pub(super) async fn write(&self) -> Result<WriteTx<'_>, StoreError> {
        self.verify_identity().await?;
        let turn = self.turn(WRITE_TURN_WAIT).await?;
        self.begin(Some(turn)).await
    }

    /// A write transaction in the write turn: `turn`, or one the caller holds (`None`).
    async fn begin(
        &self,
        turn: Option<tokio::sync::OwnedMutexGuard<()>>,
    ) -> Result<WriteTx<'_>, StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .noted_if_failed(self)?;
        let generation = match &self.integrity {
            Some(integrity) => {
                let (id, generation): (String, i64) = sqlx::query_as(
                    "UPDATE database_meta SET generation = generation + 1 WHERE single = 1 \
                     RETURNING id, generation",
                )
                .fetch_one(&mut *tx)
                .await
                .noted_if_failed(self)?;
                integrity.judge(&id, generation)?;
                Some(generation)
            }
            None => None,
        };
        Ok(WriteTx {
            tx,
            store: self,
            generation,
            _turn: turn,
        })
    }

    pub async fn close(&self) {
        self.pool.close().await;
        if let Some(integrity) = &self.integrity {
            integrity.close().await;
        }
    }
}

/// The zone's state, inside a write transaction.
async fn state_of(tx: &mut SqliteConnection, zone: &str) -> Result<Option<State>, StoreError> {
    let row: Option<(Option<String>,)> = sqlx::query_as("SELECT state FROM zones WHERE name = ?")
        .bind(zone)
        .fetch_optional(&mut *tx)
        .await?;
    let (state,) = row.ok_or_else(|| StoreError::UnknownZone(zone.to_string()))?;
    parse_state(state.as_deref())
}

impl faults::Watched for SqliteStore {
    fn health(&self) -> &Health {
        &self.health
    }
    fn label(&self) -> &str {
        &self.label
    }
}
