//! Telling people: the DS to publish or withdraw (log and the optional registrar hook),
//! and alerts (log; further sinks plug in here). Alert bookkeeping is in SQLite, so a
//! restart neither repeats nor loses a notification.

use std::time::Duration;

use tokio::io::AsyncWriteExt;

use crate::lifecycle::{Clock, Severity};
use crate::store::{AlertRow, Store, StoreError};

/// A request to the operator (or their registrar automation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    PublishDs {
        zone: String,
        ds_line: String,
    },
    WithdrawDs {
        zone: String,
        ds_line: Option<String>,
    },
}

impl Notification {
    pub fn summary(&self) -> String {
        match self {
            Self::PublishDs { zone, ds_line } => {
                format!("ACTION NEEDED: enter this DS for {zone} at the registrar: {ds_line}")
            }
            Self::WithdrawDs { zone, ds_line } => format!(
                "ACTION NEEDED: remove the DS for {zone} at the registrar{}",
                ds_line
                    .as_deref()
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default()
            ),
        }
    }

    fn action(&self) -> &'static str {
        match self {
            Self::PublishDs { .. } => "publish",
            Self::WithdrawDs { .. } => "withdraw",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("cannot start {command}: {error}")]
    Spawn {
        command: String,
        error: std::io::Error,
    },
    #[error("{command} did not finish within {timeout:?}")]
    Timeout { command: String, timeout: Duration },
    #[error("{command} exited with {status}")]
    Failed { command: String, status: String },
}

#[derive(Debug, Clone)]
pub struct Notifier {
    /// `[registrar] command`: run with the zone and DS when a DS should be published or
    /// withdrawn.
    pub registrar_command: Option<Vec<String>>,
    pub hook_timeout: Duration,
    /// An open alert is notified again after this long.
    pub renotify_after: Duration,
}

impl Default for Notifier {
    fn default() -> Self {
        Self {
            registrar_command: None,
            hook_timeout: Duration::from_secs(60),
            renotify_after: Duration::from_secs(86_400),
        }
    }
}

impl Notifier {
    /// Logs the request and runs the registrar hook, if configured.
    pub async fn deliver(&self, n: &Notification) -> Result<(), HookError> {
        let (zone, ds) = match n {
            Notification::PublishDs { zone, ds_line } => (zone, Some(ds_line.as_str())),
            Notification::WithdrawDs { zone, ds_line } => (zone, ds_line.as_deref()),
        };
        tracing::warn!(zone = zone.as_str(), action = n.action(), "{}", n.summary());
        let Some(argv) = self.registrar_command.as_ref().filter(|a| !a.is_empty()) else {
            return Ok(());
        };
        let command = argv.join(" ");
        let mut child = tokio::process::Command::new(&argv[0])
            .args(&argv[1..])
            .env("DNSSEC_WARDEN_ACTION", n.action())
            .env("DNSSEC_WARDEN_ZONE", zone)
            .env("DNSSEC_WARDEN_DS", ds.unwrap_or(""))
            .stdin(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| HookError::Spawn {
                command: command.clone(),
                error,
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            let body = serde_json::json!({"action": n.action(), "zone": zone, "ds": ds});
            // A hook that does not read its input is not an error.
            let _ = stdin.write_all(body.to_string().as_bytes()).await;
        }
        match tokio::time::timeout(self.hook_timeout, child.wait()).await {
            Err(_) => Err(HookError::Timeout {
                command,
                timeout: self.hook_timeout,
            }),
            Ok(Err(error)) => Err(HookError::Spawn { command, error }),
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(HookError::Failed {
                command,
                status: status.to_string(),
            }),
        }
    }

    /// Sends every owed alert notification: new episodes, re-notifications, resolutions.
    pub async fn deliver_alerts(&self, store: &Store, clock: &dyn Clock) -> Result<(), StoreError> {
        let now = clock.now();
        for alert in store.alerts_to_notify(now, self.renotify_after).await? {
            let owes_open = alert.last_notified_at.is_none()
                || (alert.resolved_at.is_none()
                    && alert
                        .last_notified_at
                        .is_some_and(|at| now.since(at) >= self.renotify_after));
            if owes_open {
                log_alert(&alert, alert.notifications > 0);
                store.alert_notified(alert.id, now).await?;
            }
            if alert.resolved_at.is_some() && alert.resolved_notified_at.is_none() {
                tracing::info!(
                    zone = alert.zone.as_str(),
                    alert = alert.kind.as_str(),
                    "RESOLVED {}: {}",
                    alert.kind,
                    alert.zone
                );
                store.alert_resolution_notified(alert.id, now).await?;
            }
        }
        Ok(())
    }
}

fn log_alert(alert: &AlertRow, again: bool) {
    let prefix = if again { "STILL " } else { "" };
    match alert.kind.severity() {
        Severity::Critical => tracing::error!(
            zone = alert.zone.as_str(),
            alert = alert.kind.as_str(),
            severity = "critical",
            "{prefix}ALERT {}: {}",
            alert.kind,
            alert.message
        ),
        Severity::Warning => tracing::warn!(
            zone = alert.zone.as_str(),
            alert = alert.kind.as_str(),
            severity = "warning",
            "{prefix}ALERT {}: {}",
            alert.kind,
            alert.message
        ),
    }
}
