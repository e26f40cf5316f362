//! Daemon-wide alerts (`daemon_alerts`; `crate::condition`): one open episode per kind
//! and scope, whichever daemons raise it. The same SQL on both backends (`$n`
//! placeholders, which SQLite reads too).
//!
//! Several daemons on PostgreSQL: each raises into the same open episode (an insert that
//! meets it updates nothing but the message), and a notification is sent by the daemon
//! that claims it (`claimed_until`, a short hold that a daemon dying mid-delivery lets
//! run out), so it is sent once, not once per daemon.

use std::time::Duration;

use super::faults::Noted;
use super::rows::{parse, ts};
use super::{Backend, Store, StoreError};
use crate::lifecycle::{AlertKind, Severity, Timestamp};

/// One episode of a daemon-wide condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonAlertRow {
    pub id: i64,
    pub kind: AlertKind,
    /// `""` for the provider account, a node's name for one host's condition.
    pub scope: String,
    pub severity: Severity,
    pub message: String,
    pub opened_at: Timestamp,
    /// Notified from then on (a condition may have to last before it alerts).
    pub alert_at: Timestamp,
    pub last_notified_at: Option<Timestamp>,
    pub notifications: i64,
    pub resolved_at: Option<Timestamp>,
    pub resolved_notified_at: Option<Timestamp>,
}

struct Raw {
    id: i64,
    kind: String,
    scope: String,
    severity: String,
    message: String,
    opened_at: i64,
    alert_at: i64,
    last_notified_at: Option<i64>,
    notifications: i64,
    resolved_at: Option<i64>,
    resolved_notified_at: Option<i64>,
}

from_row!(Raw {
    id,
    kind,
    scope,
    severity,
    message,
    opened_at,
    alert_at,
    last_notified_at,
    notifications,
    resolved_at,
    resolved_notified_at,
});

impl TryFrom<Raw> for DaemonAlertRow {
    type Error = StoreError;
    fn try_from(r: Raw) -> Result<Self, StoreError> {
        Ok(Self {
            id: r.id,
            kind: parse("alert kind", &r.kind)?,
            scope: r.scope,
            severity: parse("severity", &r.severity)?,
            message: r.message,
            opened_at: Timestamp(r.opened_at),
            alert_at: Timestamp(r.alert_at),
            last_notified_at: ts(r.last_notified_at),
            notifications: r.notifications,
            resolved_at: ts(r.resolved_at),
            resolved_notified_at: ts(r.resolved_notified_at),
        })
    }
}

const COLUMNS: &str = "id, kind, scope, severity, message, opened_at, alert_at, \
    last_notified_at, notifications, resolved_at, resolved_notified_at";

pub(super) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Open episodes (whether alerting yet or not), by kind and scope.
    pub async fn daemon_alerts_open(&self) -> Result<Vec<DaemonAlertRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM daemon_alerts WHERE resolved_at IS NULL ORDER BY kind, scope"
        );
        let raw: Vec<Raw> = shared_read!(self, |pool| sqlx::query_as(&sql).fetch_all(pool).await?);
        raw.into_iter().map(DaemonAlertRow::try_from).collect()
    }

    /// Every episode, oldest first (tests and operators' questions).
    pub async fn daemon_alerts(&self) -> Result<Vec<DaemonAlertRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM daemon_alerts ORDER BY id");
        let raw: Vec<Raw> = shared_read!(self, |pool| sqlx::query_as(&sql).fetch_all(pool).await?);
        raw.into_iter().map(DaemonAlertRow::try_from).collect()
    }

    /// The condition holds: opens its episode (alerting from `alert_at`), or keeps the
    /// open one (of any daemon) with this message.
    pub async fn raise_daemon_alert(
        &self,
        kind: AlertKind,
        scope: &str,
        message: &str,
        opened_at: Timestamp,
        alert_at: Timestamp,
    ) -> Result<(), StoreError> {
        let sql = "INSERT INTO daemon_alerts (kind, scope, severity, message, opened_at, alert_at) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (kind, scope) WHERE resolved_at IS NULL \
             DO UPDATE SET message = excluded.message \
             WHERE daemon_alerts.message <> excluded.message";
        shared_write!(self, |pool| sqlx::query(sql)
            .bind(kind.as_str())
            .bind(scope)
            .bind(kind.severity().as_str())
            .bind(message)
            .bind(opened_at.0)
            .bind(alert_at.0)
            .execute(pool)
            .await);
        Ok(())
    }

    /// The condition was judged clear: ends its open episode, if any. One never notified
    /// owes no `resolved` either.
    pub async fn resolve_daemon_alert(
        &self,
        kind: AlertKind,
        scope: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let sql = "UPDATE daemon_alerts SET resolved_at = $3, \
             resolved_notified_at = CASE WHEN last_notified_at IS NULL THEN $3 END \
             WHERE kind = $1 AND scope = $2 AND resolved_at IS NULL";
        shared_write!(self, |pool| sqlx::query(sql)
            .bind(kind.as_str())
            .bind(scope)
            .bind(now.0)
            .execute(pool)
            .await);
        Ok(())
    }

    /// Episodes owing a notification now and claimed by no daemon: the opening one once
    /// `alert_at` has come, a reminder every `renotify_after`, the `resolved` one.
    pub async fn daemon_alerts_to_notify(
        &self,
        now: Timestamp,
        renotify_after: Duration,
    ) -> Result<Vec<DaemonAlertRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM daemon_alerts WHERE \
             (claimed_until IS NULL OR claimed_until <= $1) AND ( \
             (resolved_at IS NULL AND last_notified_at IS NULL AND alert_at <= $1) \
             OR (resolved_at IS NULL AND last_notified_at <= $1 - $2) \
             OR (resolved_at IS NOT NULL AND resolved_notified_at IS NULL)) \
             ORDER BY id"
        );
        let raw: Vec<Raw> = shared_read!(self, |pool| sqlx::query_as(&sql)
            .bind(now.0)
            .bind(ms(renotify_after))
            .fetch_all(pool)
            .await?);
        raw.into_iter().map(DaemonAlertRow::try_from).collect()
    }

    /// Claims an episode's notification for `hold`; false if another daemon has it.
    pub async fn claim_daemon_alert(
        &self,
        id: i64,
        now: Timestamp,
        hold: Duration,
    ) -> Result<bool, StoreError> {
        let sql = "UPDATE daemon_alerts SET claimed_until = $3 \
             WHERE id = $1 AND (claimed_until IS NULL OR claimed_until <= $2)";
        let done = shared_write!(self, |pool| sqlx::query(sql)
            .bind(id)
            .bind(now.0)
            .bind(now.plus(hold).0)
            .execute(pool)
            .await);
        Ok(done == 1)
    }

    /// Gives a claim back (a sink failed: the notification stays owed).
    pub async fn unclaim_daemon_alert(&self, id: i64) -> Result<(), StoreError> {
        let sql = "UPDATE daemon_alerts SET claimed_until = NULL WHERE id = $1";
        shared_write!(self, |pool| sqlx::query(sql).bind(id).execute(pool).await);
        Ok(())
    }

    /// The opening (or a reminder) notification was sent.
    pub async fn daemon_alert_notified(&self, id: i64, now: Timestamp) -> Result<(), StoreError> {
        let sql = "UPDATE daemon_alerts SET last_notified_at = $2, \
             notifications = notifications + 1, claimed_until = NULL WHERE id = $1";
        shared_write!(self, |pool| sqlx::query(sql)
            .bind(id)
            .bind(now.0)
            .execute(pool)
            .await);
        Ok(())
    }

    /// The `resolved` notification was sent.
    pub async fn daemon_alert_resolution_notified(
        &self,
        id: i64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let sql = "UPDATE daemon_alerts SET resolved_notified_at = $2, claimed_until = NULL \
             WHERE id = $1";
        shared_write!(self, |pool| sqlx::query(sql)
            .bind(id)
            .bind(now.0)
            .execute(pool)
            .await);
        Ok(())
    }
}
