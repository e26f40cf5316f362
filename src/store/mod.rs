//! The store: zones, the append-only audit trail, alerts and the outbox, in SQLite (one
//! file, the default) or PostgreSQL (`database.url`). One public type, [`Store`], whose
//! methods are the same on both backends; each backend has its own SQL and its own
//! migrations (`migrations/` and `migrations/postgres/`).
//!
//! Every step is one transaction (safety rule 6): the new state, its audit events, its
//! outbox rows and its alert changes are written together or not at all. Writes carry the
//! row's version, so a step decided on a stale row (an operator intent arrived meanwhile)
//! is refused and decided again.
//!
//! The rules sit above the SQL, written once: what a step writes and in which order
//! (`plan`), the settings the store is opened with (`settings`). Each backend, in its own
//! folder (`sqlite/`, `postgres/`), only runs them in its dialect.

// The SQL these run is the same on both backends (`$n` placeholders, which SQLite reads
// too): `daemon_alerts`, `deliveries` and `counts`.
/// `sqlx::FromRow` for a row struct, by column name, on either backend: what sqlx's
/// derive writes, without its proc macro (which builds sqlx and SQLite's C a second time,
/// for the host: a large part of a fresh release build). Columns under `or_default` may
/// be missing from the row (a backend without them); `flatten` fields read the same row.
/// Field types are `i64`, `bool`, `String` or an `Option` of one.
macro_rules! from_row {
    (
        $ty:ident { $($field:ident),* $(,)? }
        $(or_default { $($opt:ident),* $(,)? })?
        $(flatten { $($flat:ident: $flat_ty:ty),* $(,)? })?
    ) => {
        impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for $ty
        where
            &'r str: sqlx::ColumnIndex<R>,
            i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
            bool: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
            String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
        {
            fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
                Ok(Self {
                    $($field: row.try_get(stringify!($field))?,)*
                    $($($opt: match row.try_get(stringify!($opt)) {
                        Err(sqlx::Error::ColumnNotFound(_)) => Default::default(),
                        other => other?,
                    },)*)?
                    $($($flat: <$flat_ty as sqlx::FromRow<'r, R>>::from_row(row)?,)*)?
                })
            }
        }
    };
}

/// The same call on whichever backend the store has: each backend answers it with its
/// own SQL behind a method of the same name.
macro_rules! on_backend {
    ($store:expr, |$b:ident| $body:expr) => {
        match &$store.backend {
            Backend::Sqlite($b) => $body,
            Backend::Postgres($b) => $body,
        }
    };
}

/// A read on whichever pool the store has.
macro_rules! shared_read {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.backend {
            Backend::Sqlite(s) => {
                let $pool = &s.pool;
                $body
            }
            Backend::Postgres(p) => {
                let $pool = &p.pool;
                $body
            }
        }
    };
}

/// A write (SQLite: a write transaction of its own, which moves the generation on), its
/// outcome noted in the store's health; the rows it changed.
macro_rules! shared_write {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.backend {
            Backend::Sqlite(s) => {
                let mut tx = s.write().await?;
                let $pool = &mut *tx;
                let rows = $body.noted(s)?.rows_affected();
                tx.commit().await?;
                rows
            }
            Backend::Postgres(p) => {
                let $pool = &p.pool;
                $body.noted(p)?.rows_affected()
            }
        }
    };
}

mod counts;
mod daemon_alerts;
mod deliveries;
mod faults;
mod group;
mod integrity;
mod lease;
mod migrations;
mod plan;
mod postgres;
mod rows;
mod settings;
mod sqlite;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::time::Duration;

use crate::lifecycle::{Decision, Intent, State, Timestamp};
pub use counts::{ZoneHealth, rolls_ended};
pub use daemon_alerts::DaemonAlertRow;
pub use deliveries::{DeliveryRecord, DeliveryRow};
pub use faults::WriteFailure;
pub use integrity::{daemon_holds, lock_database};
pub use lease::{Fenced, LeaseInfo, LeaseRound};
pub use postgres::SchemaCheck;
pub use rows::{
    AlertRow, EventKind, EventRow, ObservationText, OpenAlert, OutboxItem, OutboxStatus, StepRow,
    ZoneRow, host_ipv6,
};
pub use settings::{
    ClusterSettings, DEFAULT_DATABASE_PATH, DEFAULT_LEASE, DatabaseSettings, PostgresSettings,
};

/// The pool options every store's pool starts from: no background maintenance task
/// (no idle timeout, no maximum lifetime). sqlx's sweep of idle connections can miscount
/// them and then spin on a core for good, which also holds the process at its exit
/// (transact-rs/sqlx#3645; a `status --json` was seen spinning so under load). Nothing
/// here needs the sweep: SQLite's connections are to a local file, and PostgreSQL's are
/// pinged before each use (a connection the server ended is replaced then).
fn pool_options<DB: sqlx::Database>() -> sqlx::pool::PoolOptions<DB> {
    sqlx::pool::PoolOptions::new()
        .idle_timeout(None)
        .max_lifetime(None)
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}: {error}")]
    Open { path: String, error: sqlx::Error },
    #[error("database schema migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("database {url}: password: {error}")]
    Password {
        url: String,
        error: crate::secret::SecretError,
    },
    #[error("database {url}: {message}")]
    Url { url: String, message: String },
    #[error(
        "database {url} was written by a newer dnssec-warden (schema {version} > {known}, \
         which this one knows): use that version, or a database of its own"
    )]
    SchemaAhead {
        url: String,
        version: i64,
        known: i64,
    },
    #[error("database holds an invalid value: {0}")]
    Corrupt(String),
    #[error("zone {0} is not in the database")]
    UnknownZone(String),
    #[error(
        "the lease on zone {0} is no longer this daemon's (it ran out, or another daemon \
         took the zone): the write was refused"
    )]
    LeaseLost(String),
    #[error(
        "database {path} was removed while in use: stopping, as nothing written now would \
         last; the {path}-wal and {path}-shm beside it belong to the removed file: remove \
         them, then restore a copy of the database or start afresh without one"
    )]
    Gone { path: String },
    #[error(
        "database {path} was replaced by another file while in use: stopping; the \
         {path}-wal and {path}-shm beside it belong to the old file: remove them before \
         starting again, or SQLite replays the old log into the new file"
    )]
    Replaced { path: String },
    #[error(
        "database {path}: {file} was removed while in use: stopping before the next write \
         (what was written is kept; a write now and another process's would overwrite each \
         other); start the daemon again"
    )]
    CompanionGone { path: String, file: String },
    #[error(
        "database {path}: {file} was replaced by another file while in use: stopping before \
         the next write; start the daemon again"
    )]
    CompanionReplaced { path: String, file: String },
    #[error(
        "database {path} went back to an older copy while in use (generation {found}, this \
         daemon had already seen {seen}): was a backup restored over it? Stopping, as acting \
         on it would undo what was done since; if the restore was meant, start the daemon \
         again, and it takes the copy as it is"
    )]
    Restored { path: String, found: i64, seen: i64 },
    #[error(
        "database {path} is now another database ({found}; it was opened as identity \
         {opened}): was a file copied over it? Stopping; if that database is the one to use, \
         start the daemon again"
    )]
    Swapped {
        path: String,
        opened: String,
        found: String,
    },
    #[error(
        "database {path} is damaged ({cause}): stopping, as nothing read from it can be \
         trusted; restore a copy, or move it aside to start afresh"
    )]
    Damaged { path: String, cause: String },
    #[error("database {url}: {what}")]
    Busy { url: String, what: &'static str },
    #[error(
        "database {path} cannot be written ({cause}): the daemon needs to write it; check \
         the owner and mode of the file, its -wal and -shm beside it and their directory \
         (the package runs the daemon as user dnssec-warden)"
    )]
    NotWritable { path: String, cause: String },
    #[error(
        "database {path}: its write-ahead log index {path}-shm is missing while the daemon \
         runs (removed under it?): nothing was written, as the running daemon would not see \
         it; the daemon stops by itself on this, try again once it runs again"
    )]
    IndexMissing { path: String },
    #[error(
        "database {path} is missing or empty but its write-ahead log {path}-wal is there \
         (the database was removed while in use?): restore the database, or remove \
         {path}-wal and {path}-shm to start with a new, empty one"
    )]
    OrphanedLog { path: String },
    #[error(
        "database {path} is an empty file (0 bytes): not initialising it, as it may have \
         replaced a real database; remove it to start with a new, empty database"
    )]
    EmptyFile { path: String },
    #[error("no database at {path} (has the daemon run yet?)")]
    Missing { path: String },
    #[error(
        "database {path}: another write of this daemon has not finished after {}s (a \
         stalled disk?); this write was given up",
        .waited.as_secs()
    )]
    WriteStalled {
        path: String,
        waited: std::time::Duration,
    },
    /// The failure of a write that carried several decisions (a group commit), as each of
    /// them sees it.
    #[error("{0}")]
    Shared(std::sync::Arc<StoreError>),
    #[error(
        "database {path} is at schema {applied}, this dnssec-warden needs {wanted}: restart the \
         daemon (it migrates the database when it starts), then try again"
    )]
    SchemaBehind {
        path: String,
        applied: i64,
        wanted: i64,
    },
    #[error(
        "{zone}: a signed move from provider {from} to provider {to} is declared \
         already (phase {phase}): `dnssec-warden status {zone}` shows where it stands \
         (nothing was recorded)"
    )]
    MoveDeclared {
        zone: String,
        from: String,
        to: String,
        phase: &'static str,
    },
    #[error(
        "{zone}: a signed move starts from state active with intent enabled; the zone is \
         now {state} with intent {intent} (nothing was recorded)"
    )]
    MoveFromNotActive {
        zone: String,
        state: String,
        intent: String,
    },
    #[error(
        "{zone}: `disable` is refused during a signed move (from provider {from} to \
         provider {to}, phase {phase}): switched off at either provider now, the zone would \
         fail validation wherever resolvers are sent, and a safe abort of a move is not \
         built. Let the move finish (`dnssec-warden status {zone}` shows what it waits \
         for), then disable it at provider {to} (nothing was recorded)"
    )]
    DisableDuringMove {
        zone: String,
        from: String,
        to: String,
        phase: &'static str,
    },
    #[error(
        "{zone}: a key rollover ({method}, phase {phase}) is under way: {what} \
         (nothing was recorded)"
    )]
    RollUnderWay {
        zone: String,
        method: &'static str,
        phase: &'static str,
        what: &'static str,
    },
    #[error(
        "{zone}: the provider is rolling its key on its own (key {old_tag} to key \
         {new_tag}, {phase}): {what} (nothing was recorded)"
    )]
    ProviderRollUnderWay {
        zone: String,
        old_tag: u16,
        new_tag: u16,
        phase: &'static str,
        what: &'static str,
    },
    #[error(
        "{zone}: a key rollover starts from state active with intent enabled; the zone is \
         now {state} with intent {intent} (nothing was recorded)"
    )]
    RollFromNotActive {
        zone: String,
        state: String,
        intent: String,
    },
    #[error(
        "{zone}: no key rollover is under way: there is nothing to abort (nothing was recorded)"
    )]
    NoRoll { zone: String },
    #[error("{zone}: {why} (nothing was recorded)")]
    AbortRefused { zone: String, why: String },
    #[error(
        "{zone} changed under each of {attempts} attempts to record its {what} (the \
         daemon steps it meanwhile): nothing was recorded, try again"
    )]
    Contended {
        zone: String,
        what: &'static str,
        attempts: u32,
    },
}

/// Which zones a listing reads (`status`'s filters the database applies), always in
/// name order. The default admits every zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneFilter {
    /// Only zones in one of these states (`None`: not observed yet); any state if empty.
    pub states: Vec<Option<State>>,
    /// Only zones whose last look found them at this provider account.
    pub account: Option<String>,
    /// Only zones whose name sorts after this one: the next page after its last zone.
    pub after: Option<String>,
    /// At most this many zones.
    pub limit: Option<u32>,
}

impl ZoneFilter {
    /// The states to bind, in order (`not observed yet` is `IS NULL`, not a value).
    fn named_states(&self) -> Vec<&'static str> {
        let mut named: Vec<&'static str> =
            self.states.iter().flatten().map(|s| s.as_str()).collect();
        named.sort_unstable();
        named.dedup();
        named
    }

    /// The clauses after `FROM zones`: `WHERE`, `ORDER BY name` and `LIMIT`, with `$n`
    /// placeholders (both backends read them) bound by [`ZoneFilter::bind`]; `account`
    /// is the backend's expression for the account a zone's last look found.
    fn sql(&self, account: &str) -> String {
        let mut n = 0;
        let mut mark = || {
            n += 1;
            format!("${n}")
        };
        let mut conditions = Vec::new();
        if !self.states.is_empty() {
            let named = self.named_states();
            let mut either = Vec::new();
            if !named.is_empty() {
                let marks: Vec<String> = named.iter().map(|_| mark()).collect();
                either.push(format!("state IN ({})", marks.join(", ")));
            }
            if self.states.contains(&None) {
                either.push("state IS NULL".to_string());
            }
            conditions.push(format!("({})", either.join(" OR ")));
        }
        if self.account.is_some() {
            conditions.push(format!("{account} = {}", mark()));
        }
        if self.after.is_some() {
            conditions.push(format!("name > {}", mark()));
        }
        let mut sql = String::new();
        if !conditions.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conditions.join(" AND "));
        }
        sql.push_str(" ORDER BY name");
        if self.limit.is_some() {
            sql.push_str(&format!(" LIMIT {}", mark()));
        }
        sql
    }

    /// Binds the values of [`ZoneFilter::sql`]'s placeholders, in their order.
    fn bind<'q, DB, O>(
        &'q self,
        mut query: sqlx::query::QueryAs<'q, DB, O, <DB as sqlx::Database>::Arguments<'q>>,
    ) -> sqlx::query::QueryAs<'q, DB, O, <DB as sqlx::Database>::Arguments<'q>>
    where
        DB: sqlx::Database,
        &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
        i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    {
        for state in self.named_states() {
            query = query.bind::<&'q str>(state);
        }
        if let Some(account) = &self.account {
            query = query.bind::<&'q str>(account.as_str());
        }
        if let Some(after) = &self.after {
            query = query.bind::<&'q str>(after.as_str());
        }
        if let Some(limit) = self.limit {
            query = query.bind(i64::from(limit));
        }
        query
    }
}

/// Why a signed move cannot be declared for the zone as `row` has it, if it cannot: one
/// is declared already, or the zone is not `active` with intent `enabled` (where the move
/// starts, DESIGN.md section 2). What `Store::declare_move` checks at its write, and its
/// callers before they ask the providers.
pub fn move_refused(row: &ZoneRow) -> Option<StoreError> {
    let zone = &row.zone;
    if let Some(declared) = &zone.facts.signed_move {
        return Some(StoreError::MoveDeclared {
            zone: zone.name.to_string(),
            from: declared.source.clone(),
            to: declared.target.clone(),
            phase: declared.phase.name(),
        });
    }
    if let Some(roll) = &zone.facts.key_roll {
        return Some(roll_under_way(
            row,
            roll,
            "a signed move waits until it is done",
        ));
    }
    if let Some(own) = &zone.facts.provider_roll {
        return Some(provider_roll_under_way(
            row,
            own,
            "a signed move waits until its roll is done",
        ));
    }
    if zone.state != Some(State::Active) || zone.intent != Intent::Enabled {
        return Some(StoreError::MoveFromNotActive {
            zone: zone.name.to_string(),
            state: zone
                .state
                .map_or("not observed yet".to_string(), |s| s.to_string()),
            intent: zone.intent.to_string(),
        });
    }
    None
}

/// Why `intent` cannot be recorded for the zone as `row` has it, if it cannot: anything
/// but `enabled` while a signed move is declared (DESIGN.md section 2, "Signed moves": no
/// safe abort is built, and the move's every phase needs both accounts signing). What
/// `Store::set_intent` checks at its write, and `intent::record` before it.
pub fn intent_refused(row: &ZoneRow, intent: Intent) -> Option<StoreError> {
    if let Some(roll) = &row.zone.facts.key_roll
        && intent != Intent::Enabled
    {
        return Some(roll_under_way(
            row,
            roll,
            "`disable` waits until it is done or aborted (`dnssec-warden roll ZONE --abort`)",
        ));
    }
    let mv = row.zone.facts.signed_move.as_ref()?;
    (intent != Intent::Enabled).then(|| StoreError::DisableDuringMove {
        zone: row.zone.name.to_string(),
        from: mv.source.clone(),
        to: mv.target.clone(),
        phase: mv.phase.name(),
    })
}

fn roll_under_way(
    row: &ZoneRow,
    roll: &crate::lifecycle::rollover::Roll,
    what: &'static str,
) -> StoreError {
    StoreError::RollUnderWay {
        zone: row.zone.name.to_string(),
        method: roll.method.name(),
        phase: roll.phase.name(),
        what,
    }
}

fn provider_roll_under_way(
    row: &ZoneRow,
    own: &crate::lifecycle::own_roll::ProviderRoll,
    what: &'static str,
) -> StoreError {
    StoreError::ProviderRollUnderWay {
        zone: row.zone.name.to_string(),
        old_tag: own.old_tag(),
        new_tag: own.new_tag(),
        phase: own.phase(),
        what,
    }
}

/// Why a key rollover cannot be declared for the zone as `row` has it, if it cannot: one
/// is under way already, a signed move is, the provider rolls its key on its own, or the
/// zone is not `active` with intent `enabled`. What `Store::declare_roll` checks at its
/// write, and its callers before they ask the provider.
pub fn roll_refused(row: &ZoneRow) -> Option<StoreError> {
    let zone = &row.zone;
    if let Some(roll) = &zone.facts.key_roll {
        return Some(roll_under_way(row, roll, "roll again once it is done"));
    }
    if let Some(mv) = &zone.facts.signed_move {
        return Some(StoreError::MoveDeclared {
            zone: zone.name.to_string(),
            from: mv.source.clone(),
            to: mv.target.clone(),
            phase: mv.phase.name(),
        });
    }
    if let Some(own) = &zone.facts.provider_roll {
        return Some(provider_roll_under_way(
            row,
            own,
            "roll once its roll is done",
        ));
    }
    if zone.state != Some(State::Active) || zone.intent != Intent::Enabled {
        return Some(StoreError::RollFromNotActive {
            zone: zone.name.to_string(),
            state: zone
                .state
                .map_or("not observed yet".to_string(), |s| s.to_string()),
            intent: zone.intent.to_string(),
        });
    }
    None
}

/// How often `declare_move` and `set_intent` read the row again after a step committed
/// under them: a zone is stepped at most every few seconds, so a handful of tries meets a
/// quiet moment.
const MOVE_ATTEMPTS: u32 = 5;

/// The store over one backend; clones share the pool.
#[derive(Clone)]
pub struct Store {
    backend: Backend,
}

#[derive(Clone)]
enum Backend {
    Sqlite(sqlite::SqliteStore),
    Postgres(postgres::PgStore),
}

impl Store {
    /// Opens (creating if needed) the SQLite file and brings its schema up to date. An
    /// existing empty (0-byte) file is refused, not initialised: it may have replaced a
    /// real database. Connections opened later never create the file again.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        Ok(Self::sqlite(sqlite::SqliteStore::open(path).await?))
    }

    /// Opens an existing SQLite file for reading only (`status`, `history`): never creates
    /// one, never migrates, never writes.
    pub async fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        Ok(Self::sqlite(
            sqlite::SqliteStore::open_read_only(path).await?,
        ))
    }

    /// A private in-memory SQLite database (one connection, so it lives as long as the
    /// store): for tests that restart the engine many times over the same state.
    pub async fn open_in_memory() -> Result<Self, StoreError> {
        Ok(Self::sqlite(sqlite::SqliteStore::open_in_memory().await?))
    }

    /// The database the settings name, brought up to date (the daemon, `enable`,
    /// `disable`). The PostgreSQL password is read from its source here.
    pub async fn connect(settings: &DatabaseSettings) -> Result<Self, StoreError> {
        match settings {
            DatabaseSettings::Sqlite { path } => Self::open(path).await,
            DatabaseSettings::Postgres(pg) => Ok(Self {
                backend: Backend::Postgres(postgres::PgStore::open(pg, false).await?),
            }),
        }
    }

    /// The database the settings name, for reading only (`status`, `history`): never
    /// migrated, a schema behind this binary refused.
    pub async fn connect_read_only(settings: &DatabaseSettings) -> Result<Self, StoreError> {
        match settings {
            DatabaseSettings::Sqlite { path } => Self::open_read_only(path).await,
            DatabaseSettings::Postgres(pg) => Ok(Self {
                backend: Backend::Postgres(postgres::PgStore::open(pg, true).await?),
            }),
        }
    }

    /// The daemon joins the others sharing this PostgreSQL database: from now on it steps
    /// only zones it holds a lease on, and every write of a zone is fenced by that lease
    /// ([`lease`](self::lease)). Returns its holder id (`<node>/<pid>`). A SQLite file has
    /// one daemon (its lock file): nothing to join.
    pub fn join_cluster(&mut self, settings: &ClusterSettings) -> Result<String, StoreError> {
        match &mut self.backend {
            Backend::Postgres(p) => Ok(p.join(settings)),
            Backend::Sqlite(_) => Err(StoreError::Corrupt(
                "several daemons need database.url (PostgreSQL)".to_string(),
            )),
        }
    }

    /// This daemon's holder id, when it shares the database with others.
    pub fn holder(&self) -> Option<&str> {
        match &self.backend {
            Backend::Postgres(p) => p.holder(),
            Backend::Sqlite(_) => None,
        }
    }

    /// Whether this daemon believes it holds the zone's lease (always, without leases).
    pub fn holds(&self, zone: &str) -> bool {
        match &self.backend {
            Backend::Postgres(p) => p.holds(zone),
            Backend::Sqlite(_) => true,
        }
    }

    /// Asked of the database right before a provider call (or a notification, `what`):
    /// the zone's lease is this daemon's, at its epoch, with at least half its time left
    /// (always, without leases). False is a fenced refusal: said and counted.
    pub async fn lease_current(&self, zone: &str, what: Fenced) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Postgres(p) => p.lease_current(zone, what).await,
            Backend::Sqlite(_) => Ok(true),
        }
    }

    /// Fenced refusals of this process so far, by what was refused (`None` without
    /// leases): writes, provider calls and notifications the fence kept from happening.
    pub fn fenced(&self) -> Option<Vec<(Fenced, u64)>> {
        match &self.backend {
            Backend::Postgres(p) => p.fenced(),
            Backend::Sqlite(_) => None,
        }
    }

    /// One round of lease keeping: alive, renew, take a fair share, hand back the excess.
    pub async fn lease_round(&self, now: Timestamp) -> Result<LeaseRound, StoreError> {
        match &self.backend {
            Backend::Postgres(p) => p.lease_round(now).await,
            Backend::Sqlite(_) => Ok(LeaseRound::default()),
        }
    }

    /// A clean stop hands every lease back; returns how many.
    pub async fn leave_cluster(&self) -> Result<usize, StoreError> {
        match &self.backend {
            Backend::Postgres(p) => p.leave().await,
            Backend::Sqlite(_) => Ok(0),
        }
    }

    /// Zones held per daemon, current leases only (empty without leases).
    pub async fn lease_counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        match &self.backend {
            Backend::Postgres(p) => p.lease_counts().await,
            Backend::Sqlite(_) => Ok(Vec::new()),
        }
    }

    fn sqlite(store: sqlite::SqliteStore) -> Self {
        Self {
            backend: Backend::Sqlite(store),
        }
    }

    /// SQLite: checks that the database's files are still the ones opened and the
    /// database the same one, not an older copy of it (`integrity`). Every write checks
    /// it first; the daemon also calls it once per engine tick and stops on error.
    /// PostgreSQL has no file to lose: always fine.
    pub async fn verify_identity(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(s) => s.verify_identity().await,
            Backend::Postgres(_) => Ok(()),
        }
    }

    /// The database's identity, drawn when it was made: notification ids carry it, so
    /// that two databases never send the same one. `None` for a database in memory.
    pub fn database_id(&self) -> Option<&str> {
        match &self.backend {
            Backend::Sqlite(s) => s.database_id(),
            Backend::Postgres(p) => Some(&p.database_id),
        }
    }

    /// A fatal failure the daemon stops on, said with what it means (SQLite's "malformed"
    /// or "not a database" as the named database being damaged); the file set is let go
    /// without a checkpoint (`integrity`).
    pub fn stopping_on(&self, error: StoreError) -> StoreError {
        if let Backend::Sqlite(s) = &self.backend
            && error.is_fatal()
        {
            s.let_go();
        }
        self.explain(error)
    }

    /// A failure said with what it means: SQLite's "malformed" or "not a database" as the
    /// named database being damaged.
    pub fn explain(&self, error: StoreError) -> StoreError {
        let s = match &self.backend {
            Backend::Sqlite(s) => s,
            Backend::Postgres(p) => return p.explain(error),
        };
        match error {
            StoreError::Sql(e) if integrity::is_damage(&e) => StoreError::Damaged {
                path: s.path().to_string(),
                cause: e.to_string(),
            },
            // Said with the file it is about ("disk I/O error" alone names nothing).
            StoreError::Sql(error) => StoreError::Open {
                path: s.path().to_string(),
                error,
            },
            error => error,
        }
    }

    /// The clock leases are kept in: PostgreSQL's (`warden_now_ms()`), so that `status`
    /// judges a lease by the clock that wrote it; `None` for SQLite (no leases).
    pub async fn database_now(&self) -> Result<Option<Timestamp>, StoreError> {
        match &self.backend {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(p) => {
                let (now,): (i64,) = sqlx::query_as("SELECT warden_now_ms()")
                    .fetch_one(&p.pool)
                    .await?;
                Ok(Some(Timestamp(now)))
            }
        }
    }

    /// SQLite, at the daemon's start: the whole file checked (`quick_check`), and that it
    /// can be written at all (a file the daemon may not write is said as such, not as a
    /// passing episode it waits out).
    pub async fn check_at_start(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Sqlite(s) => s.check_at_start().await,
            Backend::Postgres(_) => Ok(()),
        }
    }

    /// The current episode of failing writes (disk full, I/O errors), if any: for
    /// metrics and the systemd status line. It ends at the next successful write.
    pub fn write_failure(&self) -> Option<WriteFailure> {
        on_backend!(self, |b| b.write_failure())
    }

    pub async fn ensure_zone(&self, name: &str, now: Timestamp) -> Result<bool, StoreError> {
        on_backend!(self, |b| b.ensure_zone(name, now).await)
    }
    pub async fn zone(&self, name: &str) -> Result<Option<ZoneRow>, StoreError> {
        on_backend!(self, |b| b.zone(name).await)
    }
    /// A zone as a step reads it: the row, the last DS request's hook failure of its
    /// state, and whether calls of unknown outcome or owed effects wait, in one read.
    pub async fn zone_for_step(&self, name: &str) -> Result<Option<StepRow>, StoreError> {
        on_backend!(self, |b| b.zone_for_step(name).await)
    }
    /// The zones due now (at most `limit`, earliest first), each as its step reads it,
    /// in one read: a tick's steps then visit the database only to commit. A row read here
    /// may change before its step commits (an operator's intent); the commit's version
    /// check then refuses it and the zone is decided again.
    pub async fn due_for_step(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<StepRow>, StoreError> {
        on_backend!(self, |b| b.due_for_step(now, limit).await)
    }
    pub async fn zones(&self) -> Result<Vec<ZoneRow>, StoreError> {
        on_backend!(self, |b| b.zones().await)
    }
    /// Every zone as `status` shows it, in name order, handed to `each` one row at a time
    /// (100,000 zones are never all in memory), with its last observation's brief (the
    /// provider's answer or failure, the parent's evidence: [`ObservationText`]) in place
    /// of the whole. An error of `each` ends the listing.
    pub async fn each_zone_brief<E: From<StoreError>>(
        &self,
        each: &mut impl FnMut(ZoneRow) -> Result<(), E>,
    ) -> Result<(), E> {
        self.each_zone_listed(&ZoneFilter::default(), &mut |row| {
            each(row)?;
            Ok(true)
        })
        .await
    }
    /// [`Store::each_zone_brief`] of the zones `filter` admits, filtered and paged in the
    /// database's query; `each` ends the listing early by answering false.
    pub async fn each_zone_listed<E: From<StoreError>>(
        &self,
        filter: &ZoneFilter,
        each: &mut impl FnMut(ZoneRow) -> Result<bool, E>,
    ) -> Result<(), E> {
        on_backend!(self, |b| b.each_zone_listed(filter, each).await)
    }
    /// [`Store::each_zone_brief`], collected.
    pub async fn zones_brief(&self) -> Result<Vec<ZoneRow>, StoreError> {
        let mut rows = Vec::new();
        self.each_zone_brief::<StoreError>(&mut |row| {
            rows.push(row);
            Ok(())
        })
        .await?;
        Ok(rows)
    }
    /// The earliest next check of any zone.
    pub async fn next_due(&self) -> Result<Option<Timestamp>, StoreError> {
        on_backend!(self, |b| b.next_due().await)
    }
    /// Pulls a zone's next check to `at` if that is earlier.
    pub async fn check_by(&self, name: &str, at: Timestamp) -> Result<(), StoreError> {
        on_backend!(self, |b| b.check_by(name, at).await)
    }
    /// Every zone with a side effect still pending is checked now: after a restart, the
    /// daemon re-observes before performing it.
    pub async fn recheck_pending(&self, now: Timestamp) -> Result<u64, StoreError> {
        on_backend!(self, |b| b.recheck_pending(now).await)
    }
    /// Records the operator's intent, creating the zone row if needed (audited). Written
    /// at the version of the row it was decided on, and read again and retried when a
    /// step (or a move's declaration) committed in between, as `declare_move` is: refused
    /// when the row as written says so (`intent_refused`: a disable during a signed move),
    /// so that a move declared after the caller read the row and a disable cannot both
    /// get in.
    pub async fn set_intent(
        &self,
        name: &str,
        intent: Intent,
        ds_never_submitted: bool,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        for _ in 0..MOVE_ATTEMPTS {
            let version = match self.zone(name).await? {
                Some(row) => {
                    if let Some(refused) = intent_refused(&row, intent) {
                        return Err(refused);
                    }
                    Some(row.version)
                }
                None => None,
            };
            let written = on_backend!(self, |b| b
                .set_intent(name, version, intent, ds_never_submitted, reason, now)
                .await?);
            if written {
                return Ok(());
            }
        }
        Err(StoreError::Contended {
            zone: name.to_string(),
            what: "intent",
            attempts: MOVE_ATTEMPTS,
        })
    }
    /// Declares a signed move of `zone` (DESIGN.md section 2, "Signed moves"): its
    /// `facts.signed_move` set, the zone due now, and an audit event of kind `Intent`
    /// naming `who`. The one fact written outside a step, so it is written as a step
    /// writes: at the version of the row it was decided on, and read again and retried
    /// when a step committed in between (a step that read the row before is refused by
    /// this write's version bump, as after `set_intent`, and decides again with the move).
    /// Refused when the zone is not in the database, not `active` with intent `enabled`
    /// (read again here: the caller's read may be stale by the time the providers were
    /// asked), or has a move declared already. The move's TTLs are raised to the largest
    /// the facts hold at the write (a TTL only ever bounds from above).
    pub async fn declare_move(
        &self,
        zone: &str,
        mv: &crate::lifecycle::signed_move::Move,
        who: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let reason = format!(
            "{who} declared a signed move from provider {} to provider {} (RFC 8901)",
            mv.source, mv.target
        );
        for _ in 0..MOVE_ATTEMPTS {
            let row = self
                .zone(zone)
                .await?
                .ok_or_else(|| StoreError::UnknownZone(zone.to_string()))?;
            if let Some(refused) = move_refused(&row) {
                return Err(refused);
            }
            let mut facts = row.zone.facts;
            let mut mv = mv.clone();
            mv.ttls.dnskey = mv
                .ttls
                .dnskey
                .max(facts.lifecycle.max_dnskey_ttl.unwrap_or(0));
            mv.ttls.ds = mv.ttls.ds.max(facts.lifecycle.max_ds_ttl.unwrap_or(0));
            facts.signed_move = Some(mv);
            // Until the daemon's first look at the move, `status` says what it waits for.
            facts.wait.held_by = Some(crate::lifecycle::hold::Hold::new(
                "the daemon's first look at the signed move",
                crate::lifecycle::hold::Party::Daemon,
            ));
            facts.wait.held_since = Some(now);
            let facts = serde_json::to_string(&facts)
                .map_err(|e| StoreError::Corrupt(format!("zone {zone}: facts: {e}")))?;
            let written = on_backend!(self, |b| b
                .write_facts_at(zone, row.version, &facts, &reason, now)
                .await?);
            if written {
                return Ok(());
            }
        }
        Err(StoreError::Contended {
            zone: zone.to_string(),
            what: "signed move",
            attempts: MOVE_ATTEMPTS,
        })
    }
    /// Declares a key rollover of `zone` (DESIGN.md section 2, "Key rollovers"), or, with
    /// `roll` `None`, asks the one under way to be aborted: written as `declare_move`
    /// writes (at the row's version, read again and retried when a step committed in
    /// between), the zone due now, an audit event of kind `Intent` naming `who`. A roll is
    /// refused as [`roll_refused`] says; an abort where none is under way, or where
    /// `rollover::may_abort` refuses it (its reason). The roll's TTLs are raised to the
    /// largest the facts hold at the write.
    pub async fn declare_roll(
        &self,
        zone: &str,
        roll: Option<&crate::lifecycle::rollover::Roll>,
        who: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        use crate::lifecycle::hold::{Hold, Party};
        for _ in 0..MOVE_ATTEMPTS {
            let row = self
                .zone(zone)
                .await?
                .ok_or_else(|| StoreError::UnknownZone(zone.to_string()))?;
            let mut facts = row.zone.facts.clone();
            let reason = match roll {
                Some(roll) => {
                    if let Some(refused) = roll_refused(&row) {
                        return Err(refused);
                    }
                    let mut roll = roll.clone();
                    roll.ttls.dnskey = roll
                        .ttls
                        .dnskey
                        .max(facts.lifecycle.max_dnskey_ttl.unwrap_or(0));
                    roll.ttls.ds = roll.ttls.ds.max(facts.lifecycle.max_ds_ttl.unwrap_or(0));
                    let reason = format!(
                        "{who} declared a key rollover ({}, algorithm {}, retiring key {})",
                        roll.method.name(),
                        roll.algorithm,
                        roll.old
                            .iter()
                            .filter_map(|k| k.dnskey.as_ref())
                            .map(|k| k.key_tag().to_string())
                            .collect::<Vec<_>>()
                            .join(" and ")
                    );
                    facts.key_roll = Some(roll);
                    facts.wait.held_by = Some(Hold::new(
                        "the daemon's first look at the key rollover",
                        Party::Daemon,
                    ));
                    facts.wait.held_since = Some(now);
                    reason
                }
                None => {
                    let Some(current) = facts.key_roll.as_mut() else {
                        return Err(StoreError::NoRoll {
                            zone: zone.to_string(),
                        });
                    };
                    if let Err(why) = crate::lifecycle::rollover::may_abort(current) {
                        return Err(StoreError::AbortRefused {
                            zone: zone.to_string(),
                            why,
                        });
                    }
                    current.abort_asked = true;
                    format!(
                        "{who} asked the {} roll to be aborted in {}",
                        current.method.name(),
                        current.phase.name()
                    )
                }
            };
            let facts = serde_json::to_string(&facts)
                .map_err(|e| StoreError::Corrupt(format!("zone {zone}: facts: {e}")))?;
            let written = on_backend!(self, |b| b
                .write_facts_at(zone, row.version, &facts, &reason, now)
                .await?);
            if written {
                return Ok(());
            }
        }
        Err(StoreError::Contended {
            zone: zone.to_string(),
            what: "key rollover",
            attempts: MOVE_ATTEMPTS,
        })
    }
    /// Writes one step: state, facts, audit events, outbox rows and alert changes, in one
    /// transaction. False (and nothing written) if the row changed since it was read.
    /// `read` is the step's read of the zone (`zone_for_step`, `due_for_step`): its
    /// version, open alerts and owed effects are what the decision was made on;
    /// `observation` is its summary and brief as JSON text (`engine::summarize`).
    pub async fn commit_step(
        &self,
        read: &StepRow,
        decision: &Decision,
        observation: &ObservationText,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let committed = on_backend!(self, |b| b
            .commit_step(read, decision, observation, now)
            .await)?;
        if committed
            && decision.facts.key_roll.is_none()
            && let Some(roll) = &read.row.zone.facts.key_roll
        {
            counts::roll_ended(roll);
        }
        Ok(committed)
    }
    /// A settled zone's sampled look agreed with its last full look (DESIGN.md section
    /// 8): when it was, and the next look; nothing else of the zone changes. False if the
    /// row changed since it was read.
    pub async fn sampled(
        &self,
        read: &StepRow,
        at: Timestamp,
        next: Timestamp,
    ) -> Result<bool, StoreError> {
        on_backend!(self, |b| b.sampled(read, at, next).await)
    }
    /// Notes a step that could not be decided (an error), pulling the next check in.
    pub async fn defer(&self, name: &str, at: Timestamp) -> Result<(), StoreError> {
        on_backend!(self, |b| b.defer(name, at).await)
    }
    /// Adds a line to a zone's audit trail outside a step (effect results, guard refusals).
    pub async fn record(
        &self,
        zone: &str,
        kind: EventKind,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        on_backend!(self, |b| b.record(zone, kind, reason, now).await)
    }
    pub async fn pending_effects(&self, zone: &str) -> Result<Vec<OutboxItem>, StoreError> {
        self.outbox(zone, OutboxStatus::Pending).await
    }
    /// The zone's outbox rows in `status`, oldest first (the same SQL on both backends).
    async fn outbox(
        &self,
        zone: &str,
        status: OutboxStatus,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        let raw: Vec<rows::RawOutbox> = shared_read!(self, |pool| {
            sqlx::query_as(
                "SELECT id, coalesce(seq, id) AS seq, zone, effect, attempts, account FROM outbox \
                 WHERE zone = $1 AND status = $2 ORDER BY id",
            )
            .bind(zone)
            .bind(status.as_str())
            .fetch_all(pool)
            .await?
        });
        raw.into_iter().map(OutboxItem::try_from).collect()
    }
    /// Ends an outbox row; a failed notification stays pending for the next attempt.
    /// `outcome`: what came of it that a later step reads, as JSON (a NOTIFY(CDS)'s
    /// answer, `StepRow::cds_notified`).
    pub async fn finish_effect(
        &self,
        id: i64,
        status: OutboxStatus,
        error: Option<&str>,
        outcome: Option<&str>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        on_backend!(self, |b| b
            .finish_effect(id, status, error, outcome, now)
            .await)
    }
    /// Marks a provider call as begun, before the request leaves: a crash from here on
    /// leaves a call whose outcome is unknown, never one that looks unperformed.
    /// Returns whether this daemon may perform it: false when it is no longer pending,
    /// or (several daemons) the zone's lease is no longer this daemon's.
    pub async fn start_effect(&self, id: i64, now: Timestamp) -> Result<bool, StoreError> {
        on_backend!(self, |b| b.start_effect(id, now).await)
    }
    /// Provider calls begun but never finished (the daemon stopped, or the step was
    /// abandoned, during the request), of one zone or all, become calls of unknown
    /// outcome, with an audit event each. Returns how many.
    pub async fn unknown_in_flight(
        &self,
        now: Timestamp,
        zone: Option<&str>,
    ) -> Result<u64, StoreError> {
        on_backend!(self, |b| b.unknown_in_flight(now, zone).await)
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
        on_backend!(self, |b| b
            .settle_unknown_call(id, zone, took_effect, reason, now)
            .await)
    }
    /// Counts a failed attempt of a row that stays pending.
    pub async fn retry_effect(&self, id: i64, error: &str) -> Result<(), StoreError> {
        on_backend!(self, |b| b.retry_effect(id, error).await)
    }
    pub async fn events(&self, zone: &str) -> Result<Vec<EventRow>, StoreError> {
        on_backend!(self, |b| b.events(zone).await)
    }
    /// For a test's copy of the audit trail, kept up to date without reading it whole:
    /// the zone's events from the event `from` on (by id) and every earlier one that
    /// repeated, with how many events the zone has, in one read (a copy holding that
    /// many holds them all: events are never removed). No event from `from` on (a zone
    /// without events) reads as a count of 0.
    pub async fn events_from(
        &self,
        zone: &str,
        from: i64,
    ) -> Result<(Vec<EventRow>, i64), StoreError> {
        on_backend!(self, |b| b.events_from(zone, from).await)
    }
    /// Open alerts, of one zone or of all.
    pub async fn open_alerts(&self, zone: Option<&str>) -> Result<Vec<AlertRow>, StoreError> {
        on_backend!(self, |b| b.open_alerts(zone).await)
    }
    /// Every alert episode of a zone, oldest first.
    pub async fn alerts(&self, zone: &str) -> Result<Vec<AlertRow>, StoreError> {
        let raw: Vec<rows::RawAlert> = shared_read!(self, |pool| {
            sqlx::query_as(&format!(
                "SELECT {} FROM alerts WHERE zone = $1 ORDER BY id",
                rows::ALERT_COLUMNS
            ))
            .bind(zone)
            .fetch_all(pool)
            .await?
        });
        raw.into_iter().map(AlertRow::try_from).collect()
    }
    /// Alerts owing a notification: new, due for a re-notification, or resolved.
    pub async fn alerts_to_notify(
        &self,
        now: Timestamp,
        renotify_after: Duration,
    ) -> Result<Vec<AlertRow>, StoreError> {
        on_backend!(self, |b| b.alerts_to_notify(now, renotify_after).await)
    }
    /// Marks the opening (or re-) notification of an alert as sent.
    pub async fn alert_notified(&self, id: i64, now: Timestamp) -> Result<(), StoreError> {
        on_backend!(self, |b| b.alert_notified(id, now).await)
    }
    pub async fn alert_resolution_notified(
        &self,
        id: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        on_backend!(self, |b| b.alert_resolution_notified(id, now).await)
    }
    /// Counts of zones per state (`None`: not yet observed), for STATUS and metrics.
    pub async fn state_counts(&self) -> Result<Vec<(Option<State>, i64)>, StoreError> {
        on_backend!(self, |b| b.state_counts().await)
    }
    /// One small real write: while writes fail, the daemon probes with it instead of
    /// observing zones whose steps could not be recorded; its success ends the episode.
    pub async fn probe_writable(&self) -> Result<(), StoreError> {
        on_backend!(self, |b| b.probe_writable().await)
    }
    pub async fn close(&self) {
        on_backend!(self, |b| b.close().await)
    }

    #[cfg(test)]
    fn sqlite_pool(&self) -> &sqlx::SqlitePool {
        match &self.backend {
            Backend::Sqlite(s) => &s.pool,
            Backend::Postgres(_) => panic!("a SQLite store was expected"),
        }
    }
}

/// Connects to the PostgreSQL database and compares its migrations with this binary's,
/// changing nothing (`check-config`): `applied < wanted` is a database `run` will migrate.
pub async fn check_postgres(settings: &PostgresSettings) -> Result<SchemaCheck, StoreError> {
    postgres::PgStore::check(settings).await
}

#[cfg(test)]
impl Store {
    fn pg_pool(&self) -> &sqlx::PgPool {
        match &self.backend {
            Backend::Postgres(p) => &p.pool,
            Backend::Sqlite(_) => panic!("a PostgreSQL store was expected"),
        }
    }
}
