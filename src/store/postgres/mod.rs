//! The PostgreSQL backend (`database.url`): the same rows and the same transactions as the
//! SQLite one, in PostgreSQL's dialect, with its own migrations (`migrations/postgres/`).
//!
//! What is SQLite's only stays there: no file identity to check, no read-only file, no
//! connection left in a transaction SQLite ended by itself. Writes that fail because the
//! server cannot write (disk full, I/O, a standby) are noted like a full disk.

use futures::TryStreamExt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Postgres};

use super::faults::{Health, Noted, Watched, WriteFailure};
use super::lease::{Fenced, LeaseRound, Lessee, Writer};
use super::plan::{self, Event, StepPlan};
use super::rows::{
    ALERT_COLUMNS, RawAlert, RawEvent, RawOutbox, RawStepRow, RawZone, StepRow, parse_state,
};
use super::{
    AlertRow, ClusterSettings, EventKind, EventRow, ObservationText, OutboxItem, OutboxStatus,
    PostgresSettings, StoreError, ZoneRow,
};
use crate::lifecycle::{Decision, Intent, State, Timestamp};

mod step;

/// PostgreSQL's migrations, embedded.
pub(super) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// A step's read of its zone (`StepRow`), to be completed by a `WHERE` from `$5`: as in
/// the SQLite backend (the last observation's brief; binds: the two DS request kinds, the
/// statuses `unknown` and `pending`).
const STEP_READ: &str = "SELECT z.name, z.intent, z.ds_never_submitted, z.state, z.state_since, \
     z.facts, z.next_check_at, z.last_observed_at, z.version, \
     z.lease_holder, z.lease_epoch, z.lease_since, z.lease_until, \
     z.last_brief AS last_observation, \
     (SELECT o.last_error FROM outbox o WHERE o.zone = z.name \
      AND o.created_at >= z.state_since AND o.kind IN ($1, $2) \
      ORDER BY o.id DESC LIMIT 1) AS hook_error, \
     EXISTS (SELECT 1 FROM outbox o WHERE o.zone = z.name AND o.status = $3) AS has_unknown, \
     EXISTS (SELECT 1 FROM outbox o WHERE o.zone = z.name AND o.status = $4) AS has_pending, \
     COALESCE((SELECT json_agg(json_build_object('kind', a.kind, 'id', a.id, 'message', a.message)) \
      FROM alerts a WHERE a.zone = z.name AND a.resolved_at IS NULL), '[]')::text AS open_alerts \
     FROM zones z";

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

    /// Connects, and brings the schema up to date unless `read_only` (then a schema behind
    /// this binary is refused, and every transaction is read-only).
    pub(super) async fn open(
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
        let pool = PgPoolOptions::new()
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
            MIGRATOR.run(&store.pool).await?;
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
    pub(super) async fn check(settings: &PostgresSettings) -> Result<SchemaCheck, StoreError> {
        let label = settings.url.to_string();
        let options = options(settings)?.options([("default_transaction_read_only", "on")]);
        let pool = PgPoolOptions::new()
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
        let wanted = MIGRATOR
            .migrations
            .iter()
            .map(|m| m.version)
            .max()
            .unwrap_or(0);
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
            let known = MIGRATOR.migrations.iter().find(|m| m.version == *version);
            match known {
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

    /// From now on this store is a daemon among several: it steps only zones it holds,
    /// and each write of a zone is fenced by that zone's lease.
    pub(super) fn join(&mut self, settings: &ClusterSettings) -> String {
        let lessee = Lessee::new(settings);
        let holder = lessee.holder.clone();
        self.lessee = Some(Arc::new(lessee));
        let options = (*self.pool.connect_options()).clone();
        self.lease_pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(options);
        holder
    }

    /// Fenced refusals so far, by what was refused (`None` without leases).
    pub(super) fn fenced(&self) -> Option<Vec<(Fenced, u64)>> {
        self.lessee.as_deref().map(Lessee::fenced)
    }

    pub(super) fn holder(&self) -> Option<&str> {
        self.lessee.as_deref().map(|l| l.holder.as_str())
    }

    /// This daemon believes it holds the zone (no leases: always).
    pub(super) fn holds(&self, zone: &str) -> bool {
        self.lessee
            .as_deref()
            .is_none_or(|l| l.epoch(zone).is_some())
    }

    /// Inside a write transaction: the zone's lease is this daemon's, at the epoch it
    /// acquired, and not run out. The zone's row stays locked until the commit, so no
    /// other daemon takes the lease meanwhile (its acquisition waits or skips the row).
    /// Returns who writes (`None` without leases); `LeaseLost` refuses the write.
    /// A refusal is said once (a warning naming the epoch) and counted, by `what`.
    async fn fence(
        &self,
        tx: &mut PgConnection,
        zone: &str,
        what: Fenced,
    ) -> Result<Option<Writer>, StoreError> {
        let Some(lessee) = self.lessee.as_deref() else {
            return Ok(None);
        };
        let lost = || StoreError::LeaseLost(zone.to_string());
        let Some(epoch) = lessee.epoch(zone) else {
            lessee.refused(zone, what);
            return Err(lost());
        };
        let current: Option<(i64,)> = sqlx::query_as(
            "SELECT lease_epoch FROM zones WHERE name = $1 AND lease_holder = $2 \
             AND lease_epoch = $3 AND lease_until > warden_now_ms() FOR SHARE",
        )
        .bind(zone)
        .bind(&lessee.holder)
        .bind(epoch)
        .fetch_optional(&mut *tx)
        .await?;
        if current.is_none() {
            lessee.refused(zone, what);
            lessee.forget(zone);
            return Err(lost());
        }
        Ok(Some((lessee.holder.clone(), epoch)))
    }

    /// The zone an outbox row belongs to, inside a transaction.
    async fn outbox_zone(tx: &mut PgConnection, id: i64) -> Result<String, StoreError> {
        let (zone,): (String,) = sqlx::query_as("SELECT zone FROM outbox WHERE id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        Ok(zone)
    }

    /// The lease is this daemon's and has at least half its time left: checked by the
    /// guard right before "DNSSEC off" (and before every effect), so that a daemon whose
    /// lease is about to run out does not start a call another may repeat.
    /// A refusal is said and counted as the fence's, by `what`.
    pub(super) async fn lease_current(&self, zone: &str, what: Fenced) -> Result<bool, StoreError> {
        let Some(lessee) = self.lessee.as_deref() else {
            return Ok(true);
        };
        let Some(epoch) = lessee.epoch(zone) else {
            lessee.refused(zone, what);
            return Ok(false);
        };
        let row: Option<(i64,)> = sqlx::query_as(
            "SELECT lease_epoch FROM zones WHERE name = $1 AND lease_holder = $2 \
             AND lease_epoch = $3 AND lease_until - warden_now_ms() > $4",
        )
        .bind(zone)
        .bind(&lessee.holder)
        .bind(epoch)
        .bind(lessee.lease_ms() / 2)
        .fetch_optional(&self.lease_pool)
        .await?;
        if row.is_none() {
            lessee.refused(zone, what);
            lessee.forget(zone);
        }
        Ok(row.is_some())
    }

    /// One round of lease keeping (every lease/3): say this daemon is alive, renew what it
    /// holds, take free or run-out zones up to its fair share (zones / live daemons), hand
    /// back what is above it. A zone taken from a daemon whose lease ran out gets
    /// that daemon's provider calls in flight marked of unknown outcome and is looked at
    /// again before anything is performed, as after a restart (safety rule 6).
    pub(super) async fn lease_round(&self, now: Timestamp) -> Result<LeaseRound, StoreError> {
        let Some(lessee) = self.lessee.as_deref() else {
            return Ok(LeaseRound::default());
        };
        let lease = lessee.lease_ms();
        sqlx::query(
            "INSERT INTO daemons (holder, node, pid, started_at, seen_at) \
             VALUES ($1, $2, $3, warden_now_ms(), warden_now_ms()) \
             ON CONFLICT (holder) DO UPDATE SET seen_at = warden_now_ms()",
        )
        .bind(&lessee.holder)
        .bind(&lessee.node)
        .bind(i64::from(lessee.pid))
        .execute(&self.lease_pool)
        .await
        .noted(self)?;
        let renewed: Vec<(String, i64)> = sqlx::query_as(
            "UPDATE zones SET lease_until = warden_now_ms() + $2 \
             WHERE lease_holder = $1 AND lease_until > warden_now_ms() \
             RETURNING name, lease_epoch",
        )
        .bind(&lessee.holder)
        .bind(lease)
        .fetch_all(&self.lease_pool)
        .await
        .noted(self)?;
        let lost = lessee.renewed(renewed.into_iter().collect());
        // Daemons gone for ten leases are forgotten (a clean stop deletes its own row).
        let (live, total): (i64, i64) = sqlx::query_as(
            "WITH gone AS (DELETE FROM daemons WHERE seen_at < warden_now_ms() - 10 * $1) \
             SELECT (SELECT count(*) FROM daemons WHERE seen_at > warden_now_ms() - $1), \
                    (SELECT count(*) FROM zones)",
        )
        .bind(lease)
        .fetch_one(&self.lease_pool)
        .await?;
        let live = usize::try_from(live).unwrap_or(1).max(1);
        let total = usize::try_from(total).unwrap_or(0);
        let target = total.div_ceil(live);
        let mut round = LeaseRound {
            target,
            live,
            lost,
            ..LeaseRound::default()
        };
        let held = lessee.count();
        if held < target {
            round.acquired = self.acquire(lessee, target - held, now).await?;
        } else if held > target {
            round.released = self.release(lessee, held - target).await?;
        }
        round.held = lessee.count();
        Ok(round)
    }

    /// Takes up to `n` zones nobody holds (or whose lease ran out), soonest due first;
    /// rows another daemon is taking or writing right now are skipped, not waited for.
    async fn acquire(
        &self,
        lessee: &Lessee,
        n: usize,
        now: Timestamp,
    ) -> Result<Vec<(String, i64, Option<String>)>, StoreError> {
        let mut tx = self.lease_pool.begin().await.noted_if_failed(self)?;
        let taken: Vec<(String, i64, Option<String>)> = sqlx::query_as(
            "WITH picked AS MATERIALIZED ( \
                 SELECT name, CASE WHEN lease_holder <> $1 THEN lease_holder END AS prev \
                 FROM zones WHERE lease_holder IS NULL OR lease_until <= warden_now_ms() \
                 ORDER BY next_check_at, name LIMIT $3 FOR UPDATE SKIP LOCKED) \
             UPDATE zones z SET lease_holder = $1, lease_epoch = z.lease_epoch + 1, \
                 lease_since = warden_now_ms(), lease_until = warden_now_ms() + $2 \
             FROM picked WHERE z.name = picked.name \
             RETURNING z.name, z.lease_epoch, picked.prev",
        )
        .bind(&lessee.holder)
        .bind(lessee.lease_ms())
        .bind(i64::try_from(n).unwrap_or(i64::MAX))
        .fetch_all(&mut *tx)
        .await?;
        for (zone, epoch, _) in &taken {
            let by = (lessee.holder.clone(), *epoch);
            // Whatever the last holder began and never finished: unknown outcome.
            let in_flight: Vec<RawOutbox> = sqlx::query_as(
                "SELECT id, coalesce(seq, id) AS seq, zone, effect, attempts FROM outbox \
                 WHERE zone = $1 AND status = $2 AND started_at IS NOT NULL \
                 AND kind IN ($3, $4) ORDER BY id",
            )
            .bind(zone)
            .bind(OutboxStatus::Pending.as_str())
            .bind(plan::PROVIDER_CALLS[0].as_str())
            .bind(plan::PROVIDER_CALLS[1].as_str())
            .fetch_all(&mut *tx)
            .await?;
            for raw in in_flight {
                let item = OutboxItem::try_from(raw)?;
                self.mark_unknown(&mut tx, &item, now, Some(&by)).await?;
            }
            // Effects owed: looked at now, and performed after a fresh step.
            sqlx::query(
                "UPDATE zones SET next_check_at = LEAST(next_check_at, $1) WHERE name = $2 \
                 AND EXISTS (SELECT 1 FROM outbox WHERE zone = $2 AND status IN ($3, $4))",
            )
            .bind(now.0)
            .bind(zone)
            .bind(OutboxStatus::Pending.as_str())
            .bind(OutboxStatus::Unknown.as_str())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await.noted(self)?;
        for (zone, epoch, _) in &taken {
            lessee.acquired(zone, *epoch);
        }
        Ok(taken)
    }

    /// Hands back `n` zones (those due last), for a daemon that joined to take.
    async fn release(&self, lessee: &Lessee, n: usize) -> Result<usize, StoreError> {
        let released: Vec<(String,)> = sqlx::query_as(
            // MATERIALIZED: the LIMIT is applied once, not again per row updated.
            "WITH picked AS MATERIALIZED (SELECT name FROM zones WHERE lease_holder = $1 \
                 ORDER BY next_check_at DESC, name LIMIT $2 FOR UPDATE SKIP LOCKED) \
             UPDATE zones z SET lease_holder = NULL, lease_until = NULL FROM picked \
             WHERE z.name = picked.name RETURNING z.name",
        )
        .bind(&lessee.holder)
        .bind(i64::try_from(n).unwrap_or(i64::MAX))
        .fetch_all(&self.lease_pool)
        .await
        .noted(self)?;
        for (zone,) in &released {
            lessee.forget(zone);
        }
        Ok(released.len())
    }

    /// A clean stop: every lease handed back (the others take the zones at once, not a
    /// lease later) and this daemon's row removed.
    pub(super) async fn leave(&self) -> Result<usize, StoreError> {
        let Some(lessee) = self.lessee.as_deref() else {
            return Ok(0);
        };
        let released = sqlx::query(
            "UPDATE zones SET lease_holder = NULL, lease_until = NULL WHERE lease_holder = $1",
        )
        .bind(&lessee.holder)
        .execute(&self.lease_pool)
        .await?;
        sqlx::query("DELETE FROM daemons WHERE holder = $1")
            .bind(&lessee.holder)
            .execute(&self.lease_pool)
            .await?;
        lessee.forget_all();
        Ok(usize::try_from(released.rows_affected()).unwrap_or(usize::MAX))
    }

    /// Zones held per daemon (current leases only), for the metrics.
    pub(super) async fn lease_counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT lease_holder, count(*) FROM zones \
             WHERE lease_holder IS NOT NULL AND lease_until > warden_now_ms() \
             GROUP BY lease_holder ORDER BY lease_holder",
        )
        .fetch_all(&self.lease_pool)
        .await?)
    }

    pub(super) fn write_failure(&self) -> Option<WriteFailure> {
        self.health.failure()
    }

    async fn write(&self) -> Result<sqlx::Transaction<'static, Postgres>, StoreError> {
        self.pool.begin().await.noted_if_failed(self)
    }

    pub(super) async fn ensure_zone(&self, name: &str, now: Timestamp) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO zones (name, state_since, next_check_at) VALUES ($1, $2, $2) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(now.0)
        .execute(&self.pool)
        .await
        .noted(self)?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn zone_for_step(&self, name: &str) -> Result<Option<StepRow>, StoreError> {
        let raw: Option<RawStepRow> = sqlx::query_as(&format!("{STEP_READ} WHERE z.name = $5"))
            .bind(plan::DS_REQUESTS[0].as_str())
            .bind(plan::DS_REQUESTS[1].as_str())
            .bind(OutboxStatus::Unknown.as_str())
            .bind(OutboxStatus::Pending.as_str())
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        raw.map(StepRow::try_from).transpose()
    }

    pub(super) async fn due_for_step(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<StepRow>, StoreError> {
        // With leases: only the zones this daemon holds (`$7` NULL: every zone), as `due`.
        let raw: Vec<RawStepRow> = sqlx::query_as(&format!(
            "{STEP_READ} WHERE z.next_check_at <= $5 \
             AND ($7::text IS NULL OR (z.lease_holder = $7 AND z.lease_until > warden_now_ms())) \
             ORDER BY z.next_check_at, z.name LIMIT $6"
        ))
        .bind(plan::DS_REQUESTS[0].as_str())
        .bind(plan::DS_REQUESTS[1].as_str())
        .bind(OutboxStatus::Unknown.as_str())
        .bind(OutboxStatus::Pending.as_str())
        .bind(now.0)
        .bind(i64::from(limit))
        .bind(self.holder())
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(StepRow::try_from).collect()
    }

    pub(super) async fn zone(&self, name: &str) -> Result<Option<ZoneRow>, StoreError> {
        let raw: Option<RawZone> = sqlx::query_as("SELECT * FROM zones WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        raw.map(ZoneRow::try_from).transpose()
    }

    pub(super) async fn zones(&self) -> Result<Vec<ZoneRow>, StoreError> {
        let raw: Vec<RawZone> = sqlx::query_as("SELECT * FROM zones ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        raw.into_iter().map(ZoneRow::try_from).collect()
    }

    /// Every zone in name order, one row at a time, with its last observation's brief.
    pub(super) async fn each_zone_brief<E: From<StoreError>>(
        &self,
        each: &mut dyn FnMut(ZoneRow) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut rows = sqlx::query_as::<_, RawZone>(
            "SELECT name, intent, ds_never_submitted, state, state_since, facts, next_check_at, \
             last_observed_at, version, lease_holder, lease_epoch, lease_since, lease_until, \
             last_brief AS last_observation \
             FROM zones ORDER BY name",
        )
        .fetch(&self.pool);
        while let Some(raw) = rows.try_next().await.map_err(StoreError::from)? {
            each(ZoneRow::try_from(raw)?)?;
        }
        Ok(())
    }

    pub(super) async fn next_due(&self) -> Result<Option<Timestamp>, StoreError> {
        let (at,): (Option<i64>,) = sqlx::query_as(
            "SELECT min(next_check_at) FROM zones \
             WHERE $1::text IS NULL OR (lease_holder = $1 AND lease_until > warden_now_ms())",
        )
        .bind(self.holder())
        .fetch_one(&self.pool)
        .await?;
        Ok(at.map(Timestamp))
    }

    pub(super) async fn check_by(&self, name: &str, at: Timestamp) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        self.fence(&mut tx, name, Fenced::Schedule).await?;
        sqlx::query("UPDATE zones SET next_check_at = LEAST(next_check_at, $1) WHERE name = $2")
            .bind(at.0)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await.noted(self)
    }

    pub(super) async fn recheck_pending(&self, now: Timestamp) -> Result<u64, StoreError> {
        let done = sqlx::query(
            "UPDATE zones SET next_check_at = LEAST(next_check_at, $1) \
             WHERE name IN (SELECT zone FROM outbox WHERE status IN ($2, $3)) \
             AND ($4::text IS NULL OR lease_holder = $4)",
        )
        .bind(now.0)
        .bind(OutboxStatus::Pending.as_str())
        .bind(OutboxStatus::Unknown.as_str())
        .bind(self.holder())
        .execute(&self.pool)
        .await
        .noted(self)?;
        Ok(done.rows_affected())
    }

    pub(super) async fn set_intent(
        &self,
        name: &str,
        intent: Intent,
        ds_never_submitted: bool,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        sqlx::query(
            "INSERT INTO zones (name, state_since, next_check_at) VALUES ($1, $2, $2) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(now.0)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE zones SET intent = $1, ds_never_submitted = $2, \
             next_check_at = LEAST(next_check_at, $3), version = version + 1 WHERE name = $4",
        )
        .bind(intent.as_str())
        .bind(ds_never_submitted)
        .bind(now.0)
        .bind(name)
        .execute(&mut *tx)
        .await?;
        let state = state_of(&mut tx, name).await?;
        let event = Event::note(EventKind::Intent, state, reason);
        step::insert_event(&mut tx, name, now, &event, None).await?;
        tx.commit().await.noted(self)?;
        Ok(())
    }

    /// Writes one step ([`StepPlan`]), fenced by the zone's lease.
    pub(super) async fn commit_step(
        &self,
        read: &StepRow,
        decision: &Decision,
        observation: &ObservationText,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let plan = StepPlan::new(read, decision, observation, now)?;
        let mut tx = self.write().await?;
        let by = self.fence(&mut tx, plan.zone.name, Fenced::Step).await?;
        if !step::write(&mut tx, &plan, by.as_ref()).await? {
            tx.rollback().await?;
            return Ok(false);
        }
        tx.commit().await.noted(self)?;
        Ok(true)
    }

    pub(super) async fn defer(&self, name: &str, at: Timestamp) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        self.fence(&mut tx, name, Fenced::Schedule).await?;
        sqlx::query("UPDATE zones SET next_check_at = $1 WHERE name = $2")
            .bind(at.0)
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await.noted(self)
    }

    pub(super) async fn record(
        &self,
        zone: &str,
        kind: EventKind,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let by = self.fence(&mut tx, zone, Fenced::Event).await?;
        insert_note(&mut tx, zone, now, kind, reason, by.as_ref()).await?;
        tx.commit().await.noted(self)?;
        Ok(())
    }

    pub(super) async fn pending_effects(&self, zone: &str) -> Result<Vec<OutboxItem>, StoreError> {
        self.outbox(zone, OutboxStatus::Pending).await
    }

    async fn outbox(
        &self,
        zone: &str,
        status: OutboxStatus,
    ) -> Result<Vec<OutboxItem>, StoreError> {
        let raw: Vec<RawOutbox> = sqlx::query_as(
            "SELECT id, coalesce(seq, id) AS seq, zone, effect, attempts FROM outbox \
             WHERE zone = $1 AND status = $2 ORDER BY id",
        )
        .bind(zone)
        .bind(status.as_str())
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(OutboxItem::try_from).collect()
    }

    pub(super) async fn finish_effect(
        &self,
        id: i64,
        status: OutboxStatus,
        error: Option<&str>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let zone = Self::outbox_zone(&mut tx, id).await?;
        self.fence(&mut tx, &zone, Fenced::Effect).await?;
        sqlx::query(
            "UPDATE outbox SET status = $1, attempts = attempts + 1, finished_at = $2, \
             last_error = $3 WHERE id = $4 AND status = $5",
        )
        .bind(status.as_str())
        .bind(now.0)
        .bind(error)
        .bind(id)
        .bind(OutboxStatus::Pending.as_str())
        .execute(&mut *tx)
        .await?;
        tx.commit().await.noted(self)
    }

    pub(super) async fn start_effect(&self, id: i64, now: Timestamp) -> Result<bool, StoreError> {
        let mut tx = self.write().await?;
        let zone = Self::outbox_zone(&mut tx, id).await?;
        let by = self.fence(&mut tx, &zone, Fenced::Effect).await?;
        // Stamped with the performer: a later holder performing an effect a dead one
        // decided performs it under its own, current epoch.
        let claimed = sqlx::query(
            "UPDATE outbox SET started_at = CASE WHEN kind IN ($4, $5) THEN $1 END, \
             holder = coalesce($6, holder), epoch = coalesce($7, epoch) \
             WHERE id = $2 AND status = $3",
        )
        .bind(now.0)
        .bind(id)
        .bind(OutboxStatus::Pending.as_str())
        .bind(plan::PROVIDER_CALLS[0].as_str())
        .bind(plan::PROVIDER_CALLS[1].as_str())
        .bind(by.as_ref().map(|(h, _)| h.as_str()))
        .bind(by.as_ref().map(|(_, e)| *e))
        .execute(&mut *tx)
        .await?;
        tx.commit().await.noted(self)?;
        Ok(claimed.rows_affected() == 1)
    }

    pub(super) async fn unknown_in_flight(
        &self,
        now: Timestamp,
        zone: Option<&str>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.write().await?;
        let by = match zone {
            Some(zone) => self.fence(&mut tx, zone, Fenced::Effect).await?,
            None => None,
        };
        // With leases, only the zones this daemon holds (taking a zone does the same).
        let rows: Vec<RawOutbox> = sqlx::query_as(
            "SELECT id, coalesce(seq, id) AS seq, zone, effect, attempts FROM outbox \
             WHERE status = $1 AND started_at IS NOT NULL \
             AND ($2::text IS NULL OR zone = $2) \
             AND ($3::text IS NULL OR zone IN (SELECT name FROM zones WHERE lease_holder = $3)) \
             ORDER BY id",
        )
        .bind(OutboxStatus::Pending.as_str())
        .bind(zone)
        .bind(self.holder())
        .fetch_all(&mut *tx)
        .await?;
        let rows = rows
            .into_iter()
            .map(OutboxItem::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        for row in &rows {
            self.mark_unknown(&mut tx, row, now, by.as_ref()).await?;
        }
        tx.commit().await.noted(self)?;
        Ok(rows.len() as u64)
    }

    /// A provider call begun and never finished becomes one of unknown outcome.
    async fn mark_unknown(
        &self,
        tx: &mut PgConnection,
        row: &OutboxItem,
        now: Timestamp,
        by: Option<&Writer>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE outbox SET status = $1, finished_at = $2, last_error = $3 WHERE id = $4",
        )
        .bind(OutboxStatus::Unknown.as_str())
        .bind(now.0)
        .bind(plan::IN_FLIGHT_ERROR)
        .bind(row.id)
        .execute(&mut *tx)
        .await?;
        let state = state_of(&mut *tx, &row.zone).await?;
        let event = plan::outcome_unknown(&row.effect, state);
        step::insert_event(tx, &row.zone, now, &event, by).await
    }

    pub(super) async fn unknown_calls(&self, zone: &str) -> Result<Vec<OutboxItem>, StoreError> {
        self.outbox(zone, OutboxStatus::Unknown).await
    }

    pub(super) async fn settle_unknown_call(
        &self,
        id: i64,
        zone: &str,
        took_effect: bool,
        reason: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let by = self.fence(&mut tx, zone, Fenced::Effect).await?;
        let settled = sqlx::query(
            "UPDATE outbox SET status = $1, finished_at = $2 WHERE id = $3 AND status = $4",
        )
        .bind(plan::settled(took_effect).as_str())
        .bind(now.0)
        .bind(id)
        .bind(OutboxStatus::Unknown.as_str())
        .execute(&mut *tx)
        .await?;
        if settled.rows_affected() == 1 {
            insert_note(&mut tx, zone, now, EventKind::Effect, reason, by.as_ref()).await?;
        }
        tx.commit().await.noted(self)?;
        Ok(())
    }

    pub(super) async fn retry_effect(&self, id: i64, error: &str) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        let zone = Self::outbox_zone(&mut tx, id).await?;
        self.fence(&mut tx, &zone, Fenced::Effect).await?;
        sqlx::query("UPDATE outbox SET attempts = attempts + 1, last_error = $1 WHERE id = $2")
            .bind(error)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await.noted(self)
    }

    pub(super) async fn events(&self, zone: &str) -> Result<Vec<EventRow>, StoreError> {
        let raw: Vec<RawEvent> = sqlx::query_as(
            "SELECT e.id, e.zone, e.at, e.kind, e.from_state, e.to_state, e.reason, \
             coalesce(r.count, 0) AS repeats, r.last_at, e.holder, e.epoch FROM events e \
             LEFT JOIN event_repeats r ON r.event_id = e.id WHERE e.zone = $1 ORDER BY e.id",
        )
        .bind(zone)
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(EventRow::try_from).collect()
    }

    pub(super) async fn open_alerts(
        &self,
        zone: Option<&str>,
    ) -> Result<Vec<AlertRow>, StoreError> {
        let raw: Vec<RawAlert> = sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE resolved_at IS NULL \
             AND ($1::text IS NULL OR zone = $1) ORDER BY zone, kind"
        ))
        .bind(zone)
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(AlertRow::try_from).collect()
    }

    pub(super) async fn alerts(&self, zone: &str) -> Result<Vec<AlertRow>, StoreError> {
        let raw: Vec<RawAlert> = sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE zone = $1 ORDER BY id"
        ))
        .bind(zone)
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(AlertRow::try_from).collect()
    }

    pub(super) async fn alerts_to_notify(
        &self,
        now: Timestamp,
        renotify_after: Duration,
    ) -> Result<Vec<AlertRow>, StoreError> {
        let renotify_ms = i64::try_from(renotify_after.as_millis()).unwrap_or(i64::MAX);
        // `now - renotify` computed here: a huge interval must not overflow in SQL.
        let due_before = now.0.saturating_sub(renotify_ms);
        let raw: Vec<RawAlert> = sqlx::query_as(&format!(
            "SELECT {ALERT_COLUMNS} FROM alerts WHERE \
             (last_notified_at IS NULL \
             OR (resolved_at IS NULL AND last_notified_at <= $1) \
             OR (resolved_at IS NOT NULL AND resolved_notified_at IS NULL)) \
             AND ($2::text IS NULL OR zone IN (SELECT name FROM zones \
                  WHERE lease_holder = $2 AND lease_until > warden_now_ms())) \
             ORDER BY id"
        ))
        .bind(due_before)
        .bind(self.holder())
        .fetch_all(&self.pool)
        .await?;
        raw.into_iter().map(AlertRow::try_from).collect()
    }

    pub(super) async fn alert_notified(&self, id: i64, now: Timestamp) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        self.fence_alert(&mut tx, id).await?;
        sqlx::query(
            "UPDATE alerts SET last_notified_at = $1, notifications = notifications + 1 \
             WHERE id = $2",
        )
        .bind(now.0)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await.noted(self)
    }

    /// Alert bookkeeping is the alert's zone's holder's: fenced like the zone's writes.
    async fn fence_alert(&self, tx: &mut PgConnection, id: i64) -> Result<(), StoreError> {
        if self.lessee.is_none() {
            return Ok(());
        }
        let (zone,): (String,) = sqlx::query_as("SELECT zone FROM alerts WHERE id = $1")
            .bind(id)
            .fetch_one(&mut *tx)
            .await?;
        self.fence(tx, &zone, Fenced::Notification)
            .await
            .map(|_| ())
    }

    pub(super) async fn alert_resolution_notified(
        &self,
        id: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut tx = self.write().await?;
        self.fence_alert(&mut tx, id).await?;
        sqlx::query("UPDATE alerts SET resolved_notified_at = $1 WHERE id = $2")
            .bind(now.0)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await.noted(self)
    }

    pub(super) async fn state_counts(&self) -> Result<Vec<(Option<State>, i64)>, StoreError> {
        // NULLS FIRST: SQLite's order, "not yet observed" first.
        let rows: Vec<(Option<String>, i64)> = sqlx::query_as(
            "SELECT state, count(*) FROM zones GROUP BY state ORDER BY state NULLS FIRST",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(s, n)| Ok((parse_state(s.as_deref())?, n)))
            .collect()
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
