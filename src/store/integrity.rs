//! The SQLite file set as the store opened it (DESIGN.md, "The store's integrity"): the
//! database, its write-ahead log (`-wal`) and the log's index (`-shm`), and the database's
//! identity and generation (`database_meta`). Checked before every write and once per
//! engine tick; a file removed, replaced, emptied, restored from an older copy or swapped
//! for another database stops the daemon instead of being acted on.
//!
//! Why each piece:
//! - Device and inode catch a file removed or renamed over; `cp` keeps the inode, so a
//!   copy restored in place is caught by the generation instead: every write transaction
//!   adds one to it, so an older copy has a smaller one. SQLite keeps pages cached while
//!   its log index is unchanged, which a copy written over the file does not change, so
//!   the generation is read on a fresh connection, whenever the file's size or times
//!   differ from the last genuine look (a checkpoint changes them too; then it matches).
//! - The log and its index must stay the files opened: a connection that opens them anew
//!   (a CLI after `rm state.db-shm`) writes where this store's cached index does not
//!   look, and this store would then write over it. A connection of the store's own keeps
//!   them open, so SQLite never removes them while the store is open (it does at the last
//!   close), and their inodes can be held to.
//! - Once a fault is found, that connection is let go without closing it: a clean close
//!   of the last connection checkpoints this store's stale view of the log into the file
//!   and removes the log, which would lose what another process wrote there.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions as _, Connection as _, SqliteConnection};

use super::StoreError;

/// A file's device and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

/// The database file's size and times: what any write to it changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Which file of the set.
#[derive(Debug, Clone, Copy)]
enum Part {
    Database,
    Log,
    Index,
}

impl Part {
    fn path(self, database: &Path) -> PathBuf {
        let suffix = match self {
            Part::Database => return database.to_path_buf(),
            Part::Log => "-wal",
            Part::Index => "-shm",
        };
        let mut path = database.as_os_str().to_owned();
        path.push(suffix);
        path.into()
    }
}

/// `state.db-wal` for `state.db`.
pub(super) fn log_of(database: &Path) -> PathBuf {
    Part::Log.path(database)
}

/// `state.db-shm` for `state.db`.
pub(super) fn index_of(database: &Path) -> PathBuf {
    Part::Index.path(database)
}

/// The open file set of one store.
pub(super) struct Integrity {
    path: PathBuf,
    database: FileId,
    log: FileId,
    index: FileId,
    /// The database file at the last look that found it genuine.
    stamp: Mutex<Stamp>,
    /// `database_meta.id`.
    id: String,
    /// The highest generation this store wrote or read.
    seen: AtomicI64,
    /// Keeps the log and its index open (see the module's comment); `None` once closed or
    /// let go.
    keeper: Mutex<Option<SqliteConnection>>,
    /// A fresh, read-only connection's options: reads past every cached page.
    fresh: SqliteConnectOptions,
    /// The database file, open for reading its header. Held, not opened per look: closing
    /// any descriptor of a file drops every POSIX lock the process holds on it, SQLite's
    /// included.
    file: std::fs::File,
}

impl std::fmt::Debug for Integrity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Integrity")
            .field("path", &self.path)
            .field("id", &self.id)
            .field("seen", &self.seen)
            .finish_non_exhaustive()
    }
}

impl Integrity {
    /// Takes hold of the file set of a database just opened and migrated (`options`: the
    /// pool's, which never create the file).
    pub(super) async fn hold(
        path: &Path,
        options: &SqliteConnectOptions,
    ) -> Result<Self, StoreError> {
        let shown = || path.display().to_string();
        let mut keeper = options.connect().await.map_err(|error| StoreError::Open {
            path: shown(),
            error,
        })?;
        // A read: the keeper now has the log and its index open, and holds SQLite's shared
        // lock on the file, so that no other connection of this process is the last one.
        let (id, generation) = match read_meta(&mut keeper).await {
            Ok(meta) => meta,
            Err(error) => {
                let _ = keeper.close().await;
                return Err(damaged_or_open(path, error));
            }
        };
        let files = || -> Result<_, StoreError> {
            let file = std::fs::File::open(path).map_err(|e| io_error(path, e))?;
            let meta = file.metadata().map_err(|e| io_error(path, e))?;
            let log = file_id(Part::Log, path)?;
            let index = file_id(Part::Index, path)?;
            Ok((file, meta, log, index))
        };
        let (file, meta, log, index) = match files() {
            Ok(files) => files,
            Err(e) => {
                let _ = keeper.close().await;
                return Err(e);
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            database: FileId {
                dev: meta.dev(),
                ino: meta.ino(),
            },
            log,
            index,
            stamp: Mutex::new(Stamp::of(&meta)),
            id,
            seen: AtomicI64::new(generation),
            keeper: Mutex::new(Some(keeper)),
            fresh: options.clone().read_only(true),
            file,
        })
    }

    /// The database's identity (`database_meta.id`).
    pub(super) fn id(&self) -> &str {
        &self.id
    }

    /// The file set is still the one opened, and the database still this one at this
    /// generation or a later one: `stat` of the three files, and a fresh read of the
    /// generation when the database file changed since the last look. A fault lets the
    /// keeper go (see the module's comment).
    pub(super) async fn verify(&self) -> Result<(), StoreError> {
        let result = self.check().await;
        if result.as_ref().is_err_and(StoreError::is_fatal) {
            if matches!(&result, Err(StoreError::CompanionGone { .. }))
                && !Part::Log.path(&self.path).exists()
            {
                self.rescue_log().await;
            }
            self.let_go();
        }
        result
    }

    /// The log was removed: what it holds since the last checkpoint is only in the file
    /// this store still has open. Copied into the database now (a passive checkpoint: the
    /// database file is still the one opened, and this store's index of the log is
    /// sound), or it would be lost when the daemon exits.
    async fn rescue_log(&self) {
        let mut keeper = self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(conn) = keeper.as_mut() {
            let done: Result<(i64, i64, i64), _> = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
                .fetch_one(&mut *conn)
                .await;
            match done {
                Ok((_, logged, copied)) => tracing::warn!(
                    database = %self.path.display(),
                    logged,
                    copied,
                    "the write-ahead log was removed: copied what it held into the database"
                ),
                Err(e) => tracing::error!(
                    database = %self.path.display(),
                    "the write-ahead log was removed and what it held could not be copied into the database: {e}"
                ),
            }
        }
        *self.keeper.lock().unwrap_or_else(|p| p.into_inner()) = keeper;
    }

    async fn check(&self) -> Result<(), StoreError> {
        let meta = self.same_files()?;
        let stamp = Stamp::of(&meta);
        if *self.stamp.lock().unwrap_or_else(|p| p.into_inner()) == stamp {
            return Ok(());
        }
        let path = || self.path.display().to_string();
        if meta.len() == 0 {
            return Err(StoreError::Damaged {
                path: path(),
                cause: "the file was emptied (0 bytes)".into(),
            });
        }
        // Only a file in WAL mode is read through this store's log: one that is not (a
        // copy made by `VACUUM INTO` or `.backup` written over it) is another database,
        // and a connection opening it would try to remove the log.
        match header(&self.file).map_err(|e| io_error(&self.path, e))? {
            Header::Wal => {}
            Header::Rollback => {
                return Err(StoreError::Swapped {
                    path: path(),
                    opened: self.id.clone(),
                    found: "a file not in write-ahead-log mode".into(),
                });
            }
            Header::NotSqlite => {
                return Err(StoreError::Damaged {
                    path: path(),
                    cause: "its header is no longer SQLite's".into(),
                });
            }
        }
        // What this store had seen before the read: every write it counted was committed
        // before it counted it, so the read (begun after) sees it. Loaded after the read,
        // a write committed meanwhile would look like the file going back.
        let seen = self.seen.load(Ordering::Acquire);
        let (id, generation) = self.read_fresh().await?;
        self.judge_against(&id, generation, seen)?;
        self.seen.fetch_max(generation, Ordering::AcqRel);
        *self.stamp.lock().unwrap_or_else(|p| p.into_inner()) = stamp;
        Ok(())
    }

    /// What a write transaction read as it added one to the generation: the same
    /// database, not older than what this store saw.
    pub(super) fn judge(&self, id: &str, generation: i64) -> Result<(), StoreError> {
        self.judge_against(id, generation, self.seen.load(Ordering::Acquire))
    }

    /// [`Integrity::judge`] against what this store had seen before the read.
    fn judge_against(&self, id: &str, generation: i64, seen: i64) -> Result<(), StoreError> {
        let path = || self.path.display().to_string();
        if id != self.id {
            self.let_go();
            return Err(StoreError::Swapped {
                path: path(),
                opened: self.id.clone(),
                found: format!("identity {id}"),
            });
        }
        if generation < seen {
            self.let_go();
            return Err(StoreError::Restored {
                path: path(),
                found: generation,
                seen,
            });
        }
        Ok(())
    }

    /// A write transaction that reached `generation` was committed.
    pub(super) fn wrote(&self, generation: i64) {
        self.seen.fetch_max(generation, Ordering::AcqRel);
    }

    /// `stat` of the three files: each still the one opened. The database's metadata.
    fn same_files(&self) -> Result<std::fs::Metadata, StoreError> {
        let path = || self.path.display().to_string();
        let mut database = None;
        for (part, opened) in [
            (Part::Database, self.database),
            (Part::Log, self.log),
            (Part::Index, self.index),
        ] {
            let file = part.path(&self.path);
            let meta = match std::fs::metadata(&file) {
                Ok(meta) => meta,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(match part {
                        Part::Database => StoreError::Gone { path: path() },
                        _ => StoreError::CompanionGone {
                            path: path(),
                            file: file.display().to_string(),
                        },
                    });
                }
                Err(e) => return Err(io_error(&file, e)),
            };
            if (FileId {
                dev: meta.dev(),
                ino: meta.ino(),
            }) != opened
            {
                return Err(match part {
                    Part::Database => StoreError::Replaced { path: path() },
                    _ => StoreError::CompanionReplaced {
                        path: path(),
                        file: file.display().to_string(),
                    },
                });
            }
            if matches!(part, Part::Database) {
                database = Some(meta);
            }
        }
        database.ok_or_else(|| StoreError::Gone { path: path() })
    }

    /// The identity and generation as a new connection reads them.
    async fn read_fresh(&self) -> Result<(String, i64), StoreError> {
        let mut conn = self
            .fresh
            .connect()
            .await
            .map_err(|e| damaged_or_open(&self.path, e))?;
        let meta = read_meta(&mut conn).await;
        let _ = conn.close().await;
        meta.map_err(|e| damaged_or_open(&self.path, e))
    }

    /// Lets the keeper go without closing it (see the module's comment).
    pub(super) fn let_go(&self) {
        let keeper = self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(keeper) = keeper {
            std::mem::forget(keeper);
        }
    }

    /// Closes the keeper: the last connection of the store (the pool closed first), so
    /// SQLite checkpoints the log into the file and removes the log and its index.
    pub(super) async fn close(&self) {
        let keeper = self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(keeper) = keeper {
            let _ = keeper.close().await;
        }
    }
}

enum Header {
    Wal,
    Rollback,
    NotSqlite,
}

/// What the file's header says: SQLite's magic string, then in bytes 18 and 19 (the read
/// and write format versions) 2 for WAL mode.
fn header(file: &std::fs::File) -> std::io::Result<Header> {
    use std::os::unix::fs::FileExt as _;
    let mut header = [0u8; 20];
    match file.read_exact_at(&mut header, 0) {
        Ok(()) if !header.starts_with(b"SQLite format 3\0") => Ok(Header::NotSqlite),
        Ok(()) if header[18..20] == [2, 2] => Ok(Header::Wal),
        Ok(()) => Ok(Header::Rollback),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(Header::NotSqlite),
        Err(e) => Err(e),
    }
}

async fn read_meta(conn: &mut SqliteConnection) -> Result<(String, i64), sqlx::Error> {
    sqlx::query_as("SELECT id, generation FROM database_meta WHERE single = 1")
        .fetch_one(conn)
        .await
}

fn file_id(part: Part, database: &Path) -> Result<FileId, StoreError> {
    let file = part.path(database);
    let meta = std::fs::metadata(&file).map_err(|e| io_error(&file, e))?;
    Ok(FileId {
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

fn io_error(file: &Path, error: std::io::Error) -> StoreError {
    StoreError::Open {
        path: file.display().to_string(),
        error: sqlx::Error::Io(error),
    }
}

/// SQLite's own word that the file is not a sound database (SQLITE_CORRUPT,
/// SQLITE_NOTADB).
pub(super) fn is_damage(error: &sqlx::Error) -> bool {
    const SQLITE_CORRUPT: i32 = 11;
    const SQLITE_NOTADB: i32 = 26;
    match error {
        sqlx::Error::Database(e) if e.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() => {
            e.code()
                .and_then(|c| c.parse::<i32>().ok())
                .is_some_and(|code| matches!(code & 0xff, SQLITE_CORRUPT | SQLITE_NOTADB))
        }
        _ => false,
    }
}

/// A failure to open the file, said as damage when SQLite says the file is damaged.
pub(super) fn said_damaged(path: &Path, error: StoreError) -> StoreError {
    let sql = match &error {
        StoreError::Open { error, .. } | StoreError::Sql(error) => Some(error),
        StoreError::Migrate(sqlx::migrate::MigrateError::Execute(error)) => Some(error),
        _ => None,
    };
    match sql {
        Some(e) if is_damage(e) => StoreError::Damaged {
            path: path.display().to_string(),
            cause: e.to_string(),
        },
        _ => error,
    }
}

/// A failure to read the identity: damage, also when there is none where every migrated
/// database has one.
fn damaged_or_open(path: &Path, error: sqlx::Error) -> StoreError {
    let no_identity = match &error {
        sqlx::Error::RowNotFound => true,
        sqlx::Error::Database(e) => e.message().starts_with("no such table"),
        _ => false,
    };
    if no_identity || is_damage(&error) {
        StoreError::Damaged {
            path: path.display().to_string(),
            cause: error.to_string(),
        }
    } else {
        StoreError::Open {
            path: path.display().to_string(),
            error,
        }
    }
}

/// Whether this process holds a database's daemon lock ([`lock_database`]).
static THIS_PROCESS_LOCKED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The one-daemon rule on a SQLite file: an exclusive `flock` on the database file itself
/// (SQLite's own locks are `fcntl` locks, which `flock` does not touch on Linux), held for
/// the daemon's life. A lock file beside it could be removed; the database cannot be
/// without the daemon noticing. `Ok(None)`: another process holds it. The descriptor
/// must stay open as long as the process uses the database (closing one drops SQLite's
/// locks too): drop it only at exit.
pub fn lock_database(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    let file = std::fs::File::open(path)?;
    match file.try_lock() {
        Ok(()) => {
            THIS_PROCESS_LOCKED.store(true, Ordering::Release);
            Ok(Some(file))
        }
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// Whether another process's daemon holds the database ([`lock_database`]). Opens and
/// closes the file: only before this process opens the database.
pub fn daemon_holds(path: &Path) -> bool {
    if THIS_PROCESS_LOCKED.load(Ordering::Acquire) {
        return false;
    }
    std::fs::File::open(path).is_ok_and(|file| {
        matches!(
            file.try_lock_shared(),
            Err(std::fs::TryLockError::WouldBlock)
        )
    })
}
