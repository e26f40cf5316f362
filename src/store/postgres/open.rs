//! Connecting to PostgreSQL: the options the settings describe (the password read from
//! its source), the schema brought up to date or, read only, checked against this binary's
//! migrations (`check-config`).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;

use super::{PgStore, SchemaCheck};
use crate::store::migrations::POSTGRES;
use crate::store::{PostgresSettings, StoreError};

/// How long a reading command waits on a lock another session holds.
const COMMAND_LOCK_WAIT: &str = "10s";

/// How long a writing session may sit idle inside a transaction before PostgreSQL ends it.
const IDLE_IN_TRANSACTION_LIMIT: &str = "10s";

/// The connection options the settings describe, the password read from its source.
fn options(settings: &PostgresSettings) -> Result<PgConnectOptions, StoreError> {
    let url = settings.url.to_string();
    let mut options = PgConnectOptions::from_str(&url).map_err(|e| StoreError::Url {
        url: url.clone(),
        message: e.to_string(),
    })?;
    if let Some(source) = &settings.password {
        let password = source
            .load()
            .map_err(|error| StoreError::Password { url, error })?;
        options = options.password(password.expose());
    }
    // Names in errors and pg_stat_activity: which program holds the connection.
    Ok(options.application_name("dnssec-warden"))
}

impl PgStore {
    /// Connects, and brings the schema up to date unless `read_only` (then a schema behind
    /// this binary is refused, and every transaction is read-only).
    pub(in crate::store) async fn open(
        settings: &PostgresSettings,
        read_only: bool,
    ) -> Result<Self, StoreError> {
        let label = settings.url.to_string();
        let mut options = options(settings)?;
        if read_only {
            // A command waits on a lock at most this long, then says so (`explain`)
            // instead of hanging behind a long transaction or a `LOCK TABLE`.
            options = options.options([
                ("default_transaction_read_only", "on"),
                ("lock_timeout", COMMAND_LOCK_WAIT),
            ]);
        } else {
            // A daemon's transactions last milliseconds. One left open longer is a daemon
            // paused or hung inside it (SIGSTOP, a frozen VM): PostgreSQL ends its session,
            // so the row locks it holds do not stop the other daemons' and the operator's
            // writes until it resumes (its own writes after that are refused anyway: its
            // lease ran out).
            options = options.options([(
                "idle_in_transaction_session_timeout",
                IDLE_IN_TRANSACTION_LIMIT,
            )]);
        }
        let pool = crate::store::pool_options::<sqlx::Postgres>()
            .max_connections(if read_only { 2 } else { 8 })
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|error| StoreError::Open {
                path: label.clone(),
                error,
            })?;
        let store = Self {
            lease_pool: pool.clone(),
            pool,
            health: Arc::default(),
            label: label.into(),
            lessee: None,
            database_id: "".into(),
        };
        if read_only {
            let schema = store.schema().await?;
            if schema.applied < schema.wanted {
                return Err(StoreError::SchemaBehind {
                    path: store.label.to_string(),
                    applied: schema.applied,
                    wanted: schema.wanted,
                });
            }
        } else {
            // Several daemons starting at once: sqlx's migrator takes an advisory lock.
            POSTGRES.migrator().await?.run(&store.pool).await?;
        }
        let (id,): (String,) = sqlx::query_as("SELECT id FROM database_meta WHERE single = 1")
            .fetch_one(&store.pool)
            .await?;
        Ok(Self {
            database_id: id.into(),
            ..store
        })
    }

    /// Connects and compares the migrations applied with this binary's, changing nothing:
    /// `check-config`.
    pub(in crate::store) async fn check(
        settings: &PostgresSettings,
    ) -> Result<SchemaCheck, StoreError> {
        let label = settings.url.to_string();
        let options = options(settings)?.options([("default_transaction_read_only", "on")]);
        let pool = crate::store::pool_options::<sqlx::Postgres>()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await
            .map_err(|error| StoreError::Open {
                path: label.clone(),
                error,
            })?;
        let store = Self {
            lease_pool: pool.clone(),
            pool,
            health: Arc::default(),
            label: label.into(),
            lessee: None,
            database_id: "".into(),
        };
        let schema = store.schema().await;
        store.close().await;
        schema
    }

    /// The migrations applied against this binary's: one applied that it does not know,
    /// or whose text differs, is an error (another version's database).
    async fn schema(&self) -> Result<SchemaCheck, StoreError> {
        let known = POSTGRES.migrations().map_err(StoreError::Corrupt)?;
        let wanted = known.iter().map(|m| m.version).max().unwrap_or(0);
        let (exists,): (bool,) =
            sqlx::query_as("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
                .fetch_one(&self.pool)
                .await?;
        if !exists {
            return Ok(SchemaCheck { applied: 0, wanted });
        }
        let applied: Vec<(i64, Vec<u8>)> = sqlx::query_as(
            "SELECT version, checksum FROM _sqlx_migrations WHERE success ORDER BY version",
        )
        .fetch_all(&self.pool)
        .await?;
        for (version, checksum) in &applied {
            match known.iter().find(|m| m.version == *version) {
                Some(m) if *m.checksum == **checksum => {}
                Some(_) => {
                    return Err(StoreError::Migrate(
                        sqlx::migrate::MigrateError::VersionMismatch(*version),
                    ));
                }
                None => {
                    return Err(StoreError::SchemaAhead {
                        url: self.label.to_string(),
                        version: applied.last().map_or(*version, |(v, _)| *v),
                        known: wanted,
                    });
                }
            }
        }
        Ok(SchemaCheck {
            applied: applied.last().map_or(0, |(v, _)| *v),
            wanted,
        })
    }
}
