//! Opening the SQLite file: created and migrated under a file lock (the daemon), read
//! only and never migrated (`status`, `history`), or in memory (tests); a file that is
//! empty, lost its log index, or was written by a newer version is refused, naming it.

use std::path::Path;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteOwnedBuf, SqliteSynchronous};

use super::SqliteStore;
use crate::store::StoreError;
use crate::store::faults;
use crate::store::integrity::{self, Integrity};
use crate::store::migrations::SQLITE;

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
        let pool = crate::store::pool_options::<sqlx::Sqlite>()
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
        let migrated = match SQLITE.migrator().await {
            Ok(migrator) => migrator.run(&pool).await.map_err(StoreError::from),
            Err(e) => Err(e),
        };
        let integrity = match migrated {
            Ok(()) => Integrity::hold(path, &options.clone().create_if_missing(false)).await,
            Err(e) => Err(e),
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
            crate::store::pool_options::<sqlx::Sqlite>()
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

    /// A private in-memory database (one connection, so it lives as long as the store):
    /// for tests that restart the engine many times over the same state. Its connection
    /// is never discarded on release (that would lose the database): no full-disk cover.
    /// A copy of one database migrated once per process, with an identity of its own
    /// drawn as the migration draws it: property tests open thousands, and migrating
    /// each anew was most of their set-up.
    pub async fn open_in_memory() -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new()
            .in_memory(true)
            .foreign_keys(true);
        let pool = crate::store::pool_options::<sqlx::Sqlite>()
            .max_connections(1)
            .min_connections(1)
            // The one connection in memory: a ping before every use finds nothing a
            // statement would not.
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .map_err(|error| StoreError::Open {
                path: ":memory:".into(),
                error,
            })?;
        let template = MIGRATED_IN_MEMORY
            .get_or_try_init(migrated_in_memory)
            .await?;
        let mut conn = pool.acquire().await?;
        let copy = SqliteOwnedBuf::try_from(template.as_slice())?;
        conn.deserialize(None, copy, false).await?;
        let (id,): (String,) = sqlx::query_as(
            "UPDATE database_meta SET id = lower(hex(randomblob(16))) WHERE single = 1 \
             RETURNING id",
        )
        .fetch_one(&mut *conn)
        .await?;
        drop(conn);
        Ok(Self {
            memory_id: Some(id.into()),
            ..Self::new(pool, None, Path::new(":memory:"))
        })
    }
}

/// The image of an in-memory database freshly migrated, made once per process.
static MIGRATED_IN_MEMORY: tokio::sync::OnceCell<Vec<u8>> = tokio::sync::OnceCell::const_new();

async fn migrated_in_memory() -> Result<Vec<u8>, StoreError> {
    use sqlx::{ConnectOptions as _, Connection as _};
    let mut conn = SqliteConnectOptions::new()
        .in_memory(true)
        .foreign_keys(true)
        .connect()
        .await
        .map_err(|error| StoreError::Open {
            path: ":memory:".into(),
            error,
        })?;
    SQLITE.migrator().await?.run(&mut conn).await?;
    let image = conn.serialize(None).await?.to_vec();
    conn.close().await?;
    Ok(image)
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

/// The newest migration this binary knows.
fn known_schema() -> i64 {
    SQLITE.newest()
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
