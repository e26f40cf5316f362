//! Several daemons on one database: joining, the lease rounds, and the fence every write
//! of a zone passes (the zone's lease is this daemon's, at its epoch).

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgConnection;

use super::PgStore;
use crate::lifecycle::Timestamp;
use crate::store::faults::Noted;
use crate::store::lease::{Fenced, LeaseRound, Lessee, Writer};
use crate::store::plan;
use crate::store::rows::RawOutbox;
use crate::store::{ClusterSettings, OutboxItem, OutboxStatus, StoreError};

impl PgStore {
    /// From now on this store is a daemon among several: it steps only zones it holds,
    /// and each write of a zone is fenced by that zone's lease.
    pub(in crate::store) fn join(&mut self, settings: &ClusterSettings) -> String {
        let lessee = Lessee::new(settings);
        let holder = lessee.holder.clone();
        self.lessee = Some(Arc::new(lessee));
        let options = (*self.pool.connect_options()).clone();
        self.lease_pool = crate::store::pool_options::<sqlx::Postgres>()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(options);
        holder
    }

    /// Fenced refusals so far, by what was refused (`None` without leases).
    pub(in crate::store) fn fenced(&self) -> Option<Vec<(Fenced, u64)>> {
        self.lessee.as_deref().map(Lessee::fenced)
    }

    pub(in crate::store) fn holder(&self) -> Option<&str> {
        self.lessee.as_deref().map(|l| l.holder.as_str())
    }

    /// This daemon believes it holds the zone (no leases: always).
    pub(in crate::store) fn holds(&self, zone: &str) -> bool {
        self.lessee
            .as_deref()
            .is_none_or(|l| l.epoch(zone).is_some())
    }

    /// Inside a write transaction: the zone's lease is this daemon's, at the epoch it
    /// acquired, and not run out. The zone's row stays locked until the commit, so no
    /// other daemon takes the lease meanwhile (its acquisition waits or skips the row).
    /// Returns who writes (`None` without leases); `LeaseLost` refuses the write.
    /// A refusal is said once (a warning naming the epoch) and counted, by `what`.
    pub(super) async fn fence(
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
    pub(super) async fn outbox_zone(tx: &mut PgConnection, id: i64) -> Result<String, StoreError> {
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
    pub(in crate::store) async fn lease_current(
        &self,
        zone: &str,
        what: Fenced,
    ) -> Result<bool, StoreError> {
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
    pub(in crate::store) async fn lease_round(
        &self,
        now: Timestamp,
    ) -> Result<LeaseRound, StoreError> {
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
                "SELECT id, coalesce(seq, id) AS seq, zone, effect, attempts, account FROM outbox \
                 WHERE zone = $1 AND status = $2 AND started_at IS NOT NULL \
                 AND kind IN ($3, $4, $5, $6, $7, $8, $9) ORDER BY id",
            )
            .bind(zone)
            .bind(OutboxStatus::Pending.as_str())
            .bind(plan::PROVIDER_CALLS[0].as_str())
            .bind(plan::PROVIDER_CALLS[1].as_str())
            .bind(plan::PROVIDER_CALLS[2].as_str())
            .bind(plan::PROVIDER_CALLS[3].as_str())
            .bind(plan::PROVIDER_CALLS[4].as_str())
            .bind(plan::PROVIDER_CALLS[5].as_str())
            .bind(plan::PROVIDER_CALLS[6].as_str())
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
            .bind(plan::RECHECKED[0].as_str())
            .bind(plan::RECHECKED[1].as_str())
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
    pub(in crate::store) async fn leave(&self) -> Result<usize, StoreError> {
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
    pub(in crate::store) async fn lease_counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT lease_holder, count(*) FROM zones \
             WHERE lease_holder IS NOT NULL AND lease_until > warden_now_ms() \
             GROUP BY lease_holder ORDER BY lease_holder",
        )
        .fetch_all(&self.lease_pool)
        .await?)
    }

    /// Alert bookkeeping is the alert's zone's holder's: fenced like the zone's writes.
    pub(super) async fn fence_alert(
        &self,
        tx: &mut PgConnection,
        id: i64,
    ) -> Result<(), StoreError> {
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
}
