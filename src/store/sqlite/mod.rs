//! The SQLite backend: one file in WAL mode, its identity checked before every write,
//! opened read-only for `status` and `history`, full-disk episodes noted.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{SqliteConnection, SqlitePool};

use futures::TryStreamExt;

use super::faults::{self, Health, Noted, WriteFailure, WriteTx};
use super::group;
use super::integrity::{self, Integrity};
use super::plan::{self, Event, StepPlan};
use super::rows::{
    ALERT_COLUMNS, RawAlert, RawEvent, RawOutbox, RawStepRow, RawZone, StepRow, parse_state,
};
use super::{
    AlertRow, EventKind, EventRow, ObservationText, OutboxItem, OutboxStatus, StoreError, ZoneRow,
};
use crate::lifecycle::{Decision, Intent, State, Timestamp};

mod step;

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

/// A step's read of its zone (`StepRow`), to be completed by a `WHERE`: the row with its
/// last observation's brief (all a step reads of it: the whole one is kilobytes of JSON),
/// the last DS request's hook failure of its state (binds: the two DS request kinds),
/// whether calls of unknown outcome or owed effects wait, and the open alerts.
pub(super) const STEP_READ: &str = "SELECT z.name, z.intent, z.ds_never_submitted, z.state, z.state_since, \
     z.facts, z.next_check_at, z.last_observed_at, z.version, \
     z.last_brief AS last_observation, \
     (SELECT o.last_error FROM outbox o WHERE o.zone = z.name \
      AND o.created_at >= z.state_since AND o.kind IN (?, ?) \
      ORDER BY o.id DESC LIMIT 1) AS hook_error, \
     EXISTS (SELECT 1 FROM outbox o WHERE o.zone = z.name AND o.status = 'unknown') AS has_unknown, \
     EXISTS (SELECT 1 FROM outbox o WHERE o.zone = z.name AND o.status = 'pending') AS has_pending, \
     (SELECT json_group_array(json_object('kind', a.kind, 'id', a.id, 'message', a.message)) \
      FROM alerts a WHERE a.zone = z.name AND a.resolved_at IS NULL) AS open_alerts \
     FROM zones z";

/// The due zones of a tick, in the order of the `zones_due` index, so the read stops at the
/// limit instead of reading and sorting every zone due at the same moment.
pub(super) const DUE_ORDER: &str =
    "WHERE z.next_check_at <= ? ORDER BY z.next_check_at, z.name LIMIT ?";

impl SqliteStore {
    /// Opens (creating if needed) the database and brings its schema up to date. An
    /// existing empty (0-byte) file is refused, not initialised: it may have replaced a
    /// real database. Connections opened later never create the file again.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        Self::open_file(path)
            .await
            .map_err(|e| integrity::said_damaged(path, e))
    }

    async fn open_file(path: &Path) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        // Two processes opening a new file at once (the daemon starting, `status` run
        // beside it) would both switch it to WAL and create the tables: that part runs
        // under a file lock.
        let lock = migration_lock(path).await?;
        refuse_empty_file(path)?;
        refuse_missing_index(path)?;
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            // A local file: a ping before every use is one more round trip to the
            // connection's thread per statement, and finds nothing a statement would not.
            .test_before_acquire(false)
            .after_release(faults::discard_if_in_transaction)
            .connect_with(options.clone())
            .await
            .map_err(|error| StoreError::Open {
                path: path.display().to_string(),
                error,
            })?;
        // A file removed under the daemon is reported, not silently created anew.
        pool.set_connect_options(options.clone().create_if_missing(false));
        // A newer version's file is said as such, before sqlx's "migration N was
        // previously applied but is missing".
        if let Err(e) = refuse_newer(&options, path).await {
            drop(lock);
            pool.close().await;
            return Err(e);
        }
        let migrated = sqlx::migrate!("./migrations").run(&pool).await;
        let integrity = match migrated {
            Ok(()) => Integrity::hold(path, &options.clone().create_if_missing(false)).await,
            Err(e) => Err(e.into()),
        };
        drop(lock);
        match integrity {
            Ok(integrity) => Ok(Self::new(pool, Some(integrity), path)),
            Err(e) => {
                pool.close().await;
                Err(e)
            }
        }
    }

    /// Opens an existing database for reading only (`status`, `history`): never creates
    /// one, never migrates, never writes.
    pub async fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        Self::open_file_read_only(path)
            .await
            .map_err(|e| integrity::said_damaged(path, e))
    }

    async fn open_file_read_only(path: &Path) -> Result<Self, StoreError> {
        let shown = || path.display().to_string();
        match std::fs::metadata(path) {
            Ok(meta) if meta.len() == 0 => {
                return Err(StoreError::EmptyFile { path: shown() });
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::Missing { path: shown() });
            }
            Err(error) => {
                return Err(StoreError::Open {
                    path: shown(),
                    error: sqlx::Error::Io(error),
                });
            }
        }
        let options = SqliteConnectOptions::new()
            .filename(path)
            .read_only(true)
            .create_if_missing(false)
            .busy_timeout(Duration::from_secs(10));
        let connect = |options: SqliteConnectOptions| async move {
            SqlitePoolOptions::new()
                .max_connections(2)
                .connect_with(options)
                .await
                .map_err(|error| StoreError::Open {
                    path: shown(),
                    error,
                })
        };
        let mut pool = connect(options.clone()).await?;
        // Only the daemon migrates: a reader newer than the file says so plainly instead
        // of failing on a missing column.
        let wanted = known_schema();
        let mut applied = schema_version(&pool).await;
        if applied.as_ref().is_err_and(cannot_open_wal_index) && !integrity::log_of(path).exists() {
            // No `-wal` beside the file: no connection has it open (the daemon is stopped,
            // and its last connection wrote everything into the file), but SQLite still
            // creates the `-shm` index to read a WAL-mode file, in a directory a reader
            // such as a member of the daemon's group may not write to (the package's state
            // directory is 0750). Read the file as it is instead (were the daemon to start
            // during this read and write the file, the read fails or is stale: run it again).
            pool.close().await;
            pool = connect(options.immutable(true)).await?;
            applied = schema_version(&pool).await;
        }
        let applied = match applied {
            Ok(applied) => applied.unwrap_or(0),
            Err(e) if integrity::is_damage(&e) => {
                pool.close().await;
                return Err(StoreError::Damaged {
                    path: shown(),
                    cause: e.to_string(),
                });
            }
            // No migrations table: a file no dnssec-warden migrated yet.
            Err(_) => 0,
        };
        if applied > wanted {
            return Err(StoreError::SchemaAhead {
                url: shown(),
                version: applied,
                known: wanted,
            });
        }
        if applied < wanted {
            return Err(StoreError::SchemaBehind {
                path: shown(),
                applied,
                wanted,
            });
        }
        Ok(Self::new(pool, None, path))
    }

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

    /// SQLite's `quick_check` of the whole file, at the daemon's start: a file damaged
    /// while the daemon was stopped (or a database copied in beside another's log) is
    /// refused before anything is read from it.
    pub async fn check_at_start(&self) -> Result<(), StoreError> {
        let damaged = |cause: String| StoreError::Damaged {
            path: self.label.to_string(),
            cause,
        };
        let found: Vec<(String,)> = match sqlx::query_as("PRAGMA quick_check(5)")
            .fetch_all(&self.pool)
            .await
        {
            Ok(found) => found,
            Err(e) if integrity::is_damage(&e) => return Err(damaged(e.to_string())),
            Err(e) => return Err(e.into()),
        };
        if !matches!(found.as_slice(), [(ok,)] if ok == "ok") {
            return Err(damaged(format!(
                "quick_check: {}",
                found
                    .iter()
                    .map(|(line,)| line.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        // A write that is rolled back: a connection that may not write the file fails
        // at once (SQLITE_READONLY), before any page is written.
        let tried = async {
            let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
            sqlx::query("UPDATE database_meta SET generation = generation WHERE single = 1")
                .execute(&mut *tx)
                .await?;
            tx.rollback().await
        };
        match tried.await {
            Ok(()) => Ok(()),
            Err(e) if cannot_open_wal_index(&e) || cannot_open(&e) => {
                Err(StoreError::NotWritable {
                    path: self.label.to_string(),
                    cause: e.to_string(),
                })
            }
            Err(e) => Err(e.into()),
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

    /// A private in-memory database (one connection, so it lives as long as the store):
    /// for tests that restart the engine many times over the same state. Its connection
    /// is never discarded on release (that would lose the database): no full-disk cover.
    pub async fn open_in_memory() -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new()
            .in_memory(true)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(|error| StoreError::Open {
                path: ":memory:".into(),
                error,
            })?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        let (id,): (String,) = sqlx::query_as("SELECT id FROM database_meta WHERE single = 1")
            .fetch_one(&pool)
            .await?;
        Ok(Self {
            memory_id: Some(id.into()),
            ..Self::new(pool, None, Path::new(":memory:"))
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

    /// Adds a zone to watch; false if it was there already.
    pub async fn ensure_zone(&self, name: &str, now: Timestamp) -> Result<bool, StoreError> {
        let done = self.write_one(sqlx::query(
            "INSERT OR IGNORE INTO zones (name, state_since, next_check_at) VALUES (?, ?, ?)",
        )
        .bind(name)
        .bind(now.0)
        .bind(now.0)
        ).await?;
        Ok(done.rows_affected() == 1)
    }

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

    /// Every zone in name order, handed to `each` one row at a time, with its last
    /// observation's brief: the whole observations of 100,000 zones are a hundred
    /// megabytes of JSON, and 100,000 rows at once a large resident set.
    pub async fn each_zone_brief<E: From<StoreError>>(
        &self,
        each: &mut dyn FnMut(ZoneRow) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut rows = sqlx::query_as::<_, RawZone>(
            "SELECT name, intent, ds_never_submitted, state, state_since, facts, next_check_at, \
             last_observed_at, version, last_brief AS last_observation \
             FROM zones ORDER BY name",
        )
        .fetch(&self.pool);
        while let Some(raw) = rows.try_next().await.map_err(StoreError::from)? {
            each(ZoneRow::try_from(raw)?)?;
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

    /// Pulls a zone's next check to `at` if that is earlier.
    pub async fn check_by(&self, name: &str, at: Timestamp) -> Result<(), StoreError> {
        self.write_one(
            sqlx::query("UPDATE zones SET next_check_at = min(next_check_at, ?) WHERE name = ?")
                .bind(at.0)
                .bind(name),
        )
        .await?;
        Ok(())
    }

    /// Every zone with a side effect still pending is checked now: after a restart, the
    /// daemon re-observes before performing it.
    pub async fn recheck_pending(&self, now: Timestamp) -> Result<u64, StoreError> {
        let done = self
            .write_one(
                sqlx::query(
                    "UPDATE zones SET next_check_at = min(next_check_at, ?) \
             WHERE name IN (SELECT zone FROM outbox WHERE status IN (?, ?))",
                )
                .bind(now.0)
                .bind(OutboxStatus::Pending.as_str())
                .bind(OutboxStatus::Unknown.as_str()),
            )
            .await?;
        Ok(done.rows_affected())
    }

    /// Records the operator's intent, creating the zone row if needed (audited).
    pub async fn set_intent(
        &self,
        name: &str,
        intent: Intent,
        ds_never_submitted: bool,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT OR IGNORE INTO zones (name, state_since, next_check_at) VALUES (?, ?, ?)",
        )
        .bind(name)
        .bind(now.0)
        .bind(now.0)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE zones SET intent = ?, ds_never_submitted = ?, \
             next_check_at = min(next_check_at, ?), version = version + 1 WHERE name = ?",
        )
        .bind(intent.as_str())
        .bind(ds_never_submitted)
        .bind(now.0)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        let state = state_of(&mut tx, name).await?;
        let event = Event::note(EventKind::Intent, state, reason);
        step::insert_event(&mut tx, name, now, &event).await?;
        tx.commit().await?;
        Ok(())
    }

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
        let sql = group::statement(batch.len());
        let mut query = sqlx::query_as::<_, (String,)>(&sql);
        for u in batch.updates() {
            query = query
                .bind(&u.name)
                .bind(u.version)
                .bind(u.state)
                .bind(u.since)
                .bind(&u.facts)
                .bind(u.wake_at)
                .bind(u.observed_at)
                .bind(&u.observation.whole)
                .bind(&u.observation.brief);
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
                    state: zone.state,
                    since: zone.since.0,
                    facts: zone.facts,
                    wake_at: zone.wake_at.0,
                    observed_at: zone.observed_at.0,
                    observation: zone.observation.clone(),
                })
                .await;
        }
        let mut tx = self.write().await?;
        if !step::write(&mut tx, &plan).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Notes a step that could not be decided (an error), pulling the next check in.
    pub async fn defer(&self, name: &str, at: Timestamp) -> Result<(), StoreError> {
        self.write_one(
            sqlx::query("UPDATE zones SET next_check_at = ? WHERE name = ?")
                .bind(at.0)
                .bind(name),
        )
        .await?;
        Ok(())
    }

    /// Adds a line to a zone's audit trail outside a step (effect results, guard refusals).
    pub async fn record(
        &self,
        zone: &str,
        kind: EventKind,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let state = state_of(&mut tx, zone).await?;
        step::insert_event(&mut tx, zone, now, &Event::note(kind, state, reason)).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn pending_effects(&self, zone: &str) -> Result<Vec<OutboxItem>, StoreError> {
        self.outbox(zone, OutboxStatus::Pending).await
    }

    /// The zone's outbox rows in `status`, oldest first.
    async fn outbox(
        &self,
        zone: &str,
        status: OutboxStatus,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        let raw: Vec<RawOutbox> = sqlx::query_as(
            "SELECT id, coalesce(seq, id) AS seq, zone, effect, attempts FROM outbox \
             WHERE zone = ? AND status = ? ORDER BY id",
        )
        .bind(zone)
        .bind(status.as_str())
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(OutboxItem::try_from).collect()
    }

    /// Ends an outbox row; a failed notification stays pending for the next attempt.
    pub async fn finish_effect(
        &self,
        id: i64,
        status: OutboxStatus,
        error: Option<&str>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.write_one(sqlx::query(
            "UPDATE outbox SET status = ?, attempts = attempts + 1, finished_at = ?, last_error = ? \
             WHERE id = ? AND status = ?",
        )
        .bind(status.as_str())
        .bind(now.0)
        .bind(error)
        .bind(id)
        .bind(OutboxStatus::Pending.as_str())
        ).await?;
        Ok(())
    }

    /// Marks a provider call as begun, before the request leaves: a crash from here on
    /// leaves a call whose outcome is unknown, never one that looks unperformed.
    pub async fn start_effect(&self, id: i64, now: Timestamp) -> Result<bool, StoreError> {
        // Only a provider call can be in flight with an unknown outcome; a notification
        // not marked done is simply owed again.
        let claimed = sqlx::query(
            "UPDATE outbox SET started_at = CASE WHEN kind IN (?, ?) THEN ? END \
             WHERE id = ? AND status = ?",
        )
        .bind(plan::PROVIDER_CALLS[0].as_str())
        .bind(plan::PROVIDER_CALLS[1].as_str())
        .bind(now.0)
        .bind(id)
        .bind(OutboxStatus::Pending.as_str())
        .execute(&self.pool)
        .await?;
        Ok(claimed.rows_affected() == 1)
    }

    /// Provider calls begun but never finished (the daemon stopped, or the step was
    /// abandoned, during the request), of one zone or all, become calls of unknown
    /// outcome, with an audit event each. Returns how many.
    pub async fn unknown_in_flight(
        &self,
        now: Timestamp,
        zone: Option<&str>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.write().await?;
        let rows: Vec<RawOutbox> = sqlx::query_as(
            "SELECT id, coalesce(seq, id) AS seq, zone, effect, attempts FROM outbox \
             WHERE status = ? AND started_at IS NOT NULL \
             AND (? IS NULL OR zone = ?) ORDER BY id",
        )
        .bind(OutboxStatus::Pending.as_str())
        .bind(zone)
        .bind(zone)
        .fetch_all(&mut *tx)
        .await?;
        let rows = rows
            .into_iter()
            .map(OutboxItem::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        for row in &rows {
            sqlx::query(
                "UPDATE outbox SET status = ?, finished_at = ?, last_error = ? WHERE id = ?",
            )
            .bind(OutboxStatus::Unknown.as_str())
            .bind(now.0)
            .bind(plan::IN_FLIGHT_ERROR)
            .bind(row.id)
            .execute(&mut *tx)
            .await?;
            let state = state_of(&mut tx, &row.zone).await?;
            let event = plan::outcome_unknown(&row.effect, state);
            step::insert_event(&mut tx, &row.zone, now, &event).await?;
        }
        tx.commit().await?;
        Ok(rows.len() as u64)
    }

    /// Provider calls of this zone whose outcome is unknown, oldest first.
    pub async fn unknown_calls(&self, zone: &str) -> Result<Vec<OutboxItem>, StoreError> {
        self.outbox(zone, OutboxStatus::Unknown).await
    }

    /// Settles a call of unknown outcome by what the provider now says: `took_effect`
    /// ends it `done`, otherwise `failed`; one audit event says which.
    pub async fn settle_unknown_call(
        &self,
        id: i64,
        zone: &str,
        took_effect: bool,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let settled = sqlx::query(
            "UPDATE outbox SET status = ?, finished_at = ? WHERE id = ? AND status = ?",
        )
        .bind(plan::settled(took_effect).as_str())
        .bind(now.0)
        .bind(id)
        .bind(OutboxStatus::Unknown.as_str())
        .execute(&mut *tx)
        .await?;
        if settled.rows_affected() == 1 {
            let state = state_of(&mut tx, zone).await?;
            let event = Event::note(EventKind::Effect, state, reason);
            step::insert_event(&mut tx, zone, now, &event).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Counts a failed attempt of a row that stays pending.
    pub async fn retry_effect(&self, id: i64, error: &str) -> Result<(), StoreError> {
        self.write_one(
            sqlx::query("UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE id = ?")
                .bind(error)
                .bind(id),
        )
        .await?;
        Ok(())
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

    /// Every alert episode of a zone, oldest first.
    pub async fn alerts(&self, zone: &str) -> Result<Vec<AlertRow>, StoreError> {
        let raw: Vec<RawAlert> = sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE zone = ? ORDER BY id"
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

    /// Marks the opening (or re-) notification of an alert as sent.
    pub async fn alert_notified(&self, id: i64, now: Timestamp) -> Result<(), StoreError> {
        self.write_one(sqlx::query(
            "UPDATE alerts SET last_notified_at = ?, notifications = notifications + 1 WHERE id = ?",
        )
        .bind(now.0)
        .bind(id)
        ).await?;
        Ok(())
    }

    pub async fn alert_resolution_notified(
        &self,
        id: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        self.write_one(
            sqlx::query("UPDATE alerts SET resolved_notified_at = ? WHERE id = ?")
                .bind(now.0)
                .bind(id),
        )
        .await?;
        Ok(())
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

    pub async fn close(&self) {
        self.pool.close().await;
        if let Some(integrity) = &self.integrity {
            integrity.close().await;
        }
    }
}

/// A database the daemon made is never an empty file (SQLite writes its header at once in
/// WAL mode), and a write-ahead log never outlives its database: either means the file
/// was removed or replaced, and initialising a new database would lose the old one
/// silently (or replay the old log into it).
fn refuse_empty_file(path: &Path) -> Result<(), StoreError> {
    let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
    let shown = || path.display().to_string();
    match (len(path), len(&integrity::log_of(path))) {
        (None | Some(0), Some(1..)) => Err(StoreError::OrphanedLog { path: shown() }),
        (Some(0), _) => Err(StoreError::EmptyFile { path: shown() }),
        _ => Ok(()),
    }
}

/// A log without its index while a daemon runs: the index was removed under the daemon.
/// A connection opened now would make a new index the daemon does not read, and its write
/// could be overwritten (without a daemon, SQLite rebuilds the index from the log).
fn refuse_missing_index(path: &Path) -> Result<(), StoreError> {
    if integrity::log_of(path).exists()
        && !integrity::index_of(path).exists()
        && integrity::daemon_holds(path)
    {
        return Err(StoreError::IndexMissing {
            path: path.display().to_string(),
        });
    }
    Ok(())
}

/// Holds `<database>.migrate-lock` exclusively (waiting for another holder) until dropped.
async fn migration_lock(database: &Path) -> Result<std::fs::File, StoreError> {
    let path = database.with_extension("migrate-lock");
    let open_error = |error: std::io::Error| StoreError::Open {
        path: path.display().to_string(),
        error: sqlx::Error::Io(error),
    };
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(open_error)?;
    tokio::task::spawn_blocking(move || file.lock().map(|()| file))
        .await
        .map_err(|e| open_error(std::io::Error::other(e)))?
        .map_err(open_error)
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

/// The newest migration this binary knows.
fn known_schema() -> i64 {
    sqlx::migrate!("./migrations")
        .migrations
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0)
}

/// A file a newer dnssec-warden migrated past this binary's schema is refused, naming it.
/// Asked on a connection of its own, closed before the pool migrates (a pool connection
/// that read the old schema kept stale column lists through the migration).
async fn refuse_newer(options: &SqliteConnectOptions, path: &Path) -> Result<(), StoreError> {
    use sqlx::{ConnectOptions as _, Connection as _};
    let open_error = |error| StoreError::Open {
        path: path.display().to_string(),
        error,
    };
    let mut conn = options.connect().await.map_err(open_error)?;
    let exists: Option<(String,)> = sqlx::query_as(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_optional(&mut conn)
    .await
    .map_err(open_error)?;
    let applied: Option<(Option<i64>,)> = match exists {
        None => None,
        Some(_) => sqlx::query_as("SELECT max(version) FROM _sqlx_migrations WHERE success")
            .fetch_optional(&mut conn)
            .await
            .map_err(open_error)?,
    };
    conn.close().await.map_err(open_error)?;
    let applied = applied.and_then(|(v,)| v).unwrap_or(0);
    let known = known_schema();
    if applied > known {
        return Err(StoreError::SchemaAhead {
            url: path.display().to_string(),
            version: applied,
            known,
        });
    }
    Ok(())
}

/// The schema version the file's migrations reached; `None` before the first.
async fn schema_version(pool: &SqlitePool) -> Result<Option<i64>, sqlx::Error> {
    let applied: Option<(Option<i64>,)> =
        sqlx::query_as("SELECT max(version) FROM _sqlx_migrations WHERE success")
            .fetch_optional(pool)
            .await?;
    Ok(applied.and_then(|(v,)| v))
}

/// SQLITE_CANTOPEN and its extended codes: a file (or its log) that cannot be opened for
/// writing.
fn cannot_open(error: &sqlx::Error) -> bool {
    const SQLITE_CANTOPEN: i64 = 14;
    matches!(error, sqlx::Error::Database(e)
        if e.code().and_then(|c| c.parse::<i64>().ok()).is_some_and(|c| c & 0xff == SQLITE_CANTOPEN))
}

/// SQLITE_READONLY and its extended codes (READONLY_CANTINIT, READONLY_DIRECTORY): a
/// read-only connection that could not create or open the WAL index (`-shm`).
fn cannot_open_wal_index(error: &sqlx::Error) -> bool {
    const SQLITE_READONLY: i64 = 8;
    matches!(error, sqlx::Error::Database(e)
        if e.code().and_then(|c| c.parse::<i64>().ok()).is_some_and(|c| c & 0xff == SQLITE_READONLY))
}
