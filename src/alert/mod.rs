//! Alert sinks: where notifications go besides the log (which always gets them).
//!
//! - `[[alerts.webhook]]`: JSON POST, Slack-compatible `text` plus structured fields,
//!   retried with bounded exponential backoff;
//! - `[[alerts.exec]]`: a command with the event in `DNSSEC_WARDEN_ALERT_*` environment
//!   variables and as JSON on stdin, killed when it overruns its timeout.
//!
//! Delivery is at least once. What each sink owes lives in the database (its queue,
//! `deliveries`, delivered by the sink's own worker: `engine::sinks`), so a restart
//! neither repeats a delivered one nor loses an owed one; every event carries a stable
//! `id` so a receiver can drop the rare repeat (a crash between the POST and the database
//! write).

pub mod exec;
pub mod webhook;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use exec::CommandError;
pub use webhook::{Webhook, WebhookError};

use crate::lifecycle::{AlertKind, Severity, Timestamp};
use crate::store::{AlertRow, DaemonAlertRow};

/// `[alerts]`: where alerts go besides the log, and how often an open one is repeated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertSettings {
    pub renotify_after: Duration,
    /// The longest wait between two tries of a failing sink (the wait doubles from 5 s).
    pub sink_retry_max: Duration,
    /// A sink failing every delivery this long raises `alert_sink_failing`.
    pub sink_failing_after: Duration,
    pub webhooks: Vec<WebhookSettings>,
    pub execs: Vec<ExecSettings>,
}

impl Default for AlertSettings {
    fn default() -> Self {
        Self {
            renotify_after: Duration::from_secs(86_400),
            sink_retry_max: Duration::from_secs(600),
            sink_failing_after: Duration::from_secs(900),
            webhooks: Vec::new(),
            execs: Vec::new(),
        }
    }
}

/// One webhook sink: a JSON POST with a Slack-compatible `text`.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// The key it came from (`alerts.webhook[0]`), to name it in logs without its URL.
    pub name: String,
    pub url: url::Url,
    /// Extra request headers (an `Authorization` token, say), sorted by name.
    pub headers: Vec<(String, String)>,
    /// Time limit of one attempt.
    pub timeout: Duration,
    /// Attempts per notification and tick, the first included.
    pub max_attempts: u32,
    /// Wait before the first retry; doubled for each further one.
    pub backoff: Duration,
}

/// Default of a webhook's `timeout`.
pub const DEFAULT_WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of a webhook's `max_attempts`.
pub const DEFAULT_WEBHOOK_ATTEMPTS: u32 = 3;
/// Default of a webhook's `backoff`.
pub const DEFAULT_WEBHOOK_BACKOFF: Duration = Duration::from_secs(1);
/// Default of an exec sink's `timeout`.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(30);

impl WebhookSettings {
    /// A webhook to `url` without headers, every other key at its default.
    pub fn new(name: impl Into<String>, url: url::Url) -> Self {
        Self {
            name: name.into(),
            url,
            headers: Vec::new(),
            timeout: DEFAULT_WEBHOOK_TIMEOUT,
            max_attempts: DEFAULT_WEBHOOK_ATTEMPTS,
            backoff: DEFAULT_WEBHOOK_BACKOFF,
        }
    }
}

// Webhook URLs and headers often carry tokens (Slack's URL is the secret): never printed.
impl std::fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("name", &self.name)
            .field("host", &self.url.host_str())
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .finish()
    }
}

/// One exec sink: a command run with the alert in its environment and on stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSettings {
    /// The key it came from (`alerts.exec[0]`).
    pub name: String,
    pub command: Vec<String>,
    pub timeout: Duration,
}

impl ExecSettings {
    /// `command` as a sink, its timeout the default.
    pub fn new(name: impl Into<String>, command: Vec<String>) -> Self {
        Self {
            name: name.into(),
            command,
            timeout: DEFAULT_EXEC_TIMEOUT,
        }
    }
}

/// The registrar hook: run when a DS should be published or withdrawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrarSettings {
    pub command: Vec<String>,
    pub timeout: Duration,
}

/// Why a notification is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A new alert episode.
    Firing,
    /// Still open after `alerts.renotify_after`.
    Renotify,
    /// The condition cleared.
    Resolved,
    /// The operator must enter this DS at the registrar.
    DsPublish,
    /// The operator must remove the DS at the registrar.
    DsWithdraw,
    /// The operator must change the zone's NS at the registrar (moving in).
    NsChange,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Firing => "firing",
            Self::Renotify => "renotify",
            Self::Resolved => "resolved",
            Self::DsPublish => "ds_publish",
            Self::DsWithdraw => "ds_withdraw",
            Self::NsChange => "ns_change",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One notification, as webhooks receive it (JSON) and exec sinks see it (environment
/// and stdin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlertEvent {
    /// One line for chat (Slack's `text`).
    pub text: String,
    /// Stable for one notification, and never the same for two: `alert-<db>-42.<ms>-firing`,
    /// `…-renotify-3`, `…-resolved` (`<db>`: the database's identity, its first 12 hex
    /// digits; `<ms>`: when the episode opened, so that a copy of the database restored
    /// from a backup names a new episode anew), `ds_publish-example.com.-<digest>` (the
    /// same request, the same id). Receivers may dedupe on it.
    pub id: String,
    pub event: EventKind,
    /// Empty for a daemon-wide alert (`daemon-alert-…` ids).
    pub zone: String,
    /// The alert kind (`ds_mismatch`, ...); absent for DS publish/withdraw requests.
    pub kind: Option<AlertKind>,
    /// `critical`, `warning`, or `info` for DS publish/withdraw requests.
    pub severity: String,
    pub message: String,
    /// The zone's lifecycle state when the notification was made.
    pub state: Option<String>,
    /// RFC 3339, UTC.
    pub opened_at: Option<String>,
    pub resolved_at: Option<String>,
    /// The DS line to enter or remove at the registrar, where there is one.
    pub ds: Option<String>,
    /// RFC 3339, UTC: when this notification was made.
    pub at: String,
    /// DS and NS requests only: the request's number, larger for every later request
    /// any daemon sharing the database decides (the outbox row's id). A receiver that acts
    /// on requests by itself acts only on one numbered above the last it acted on for the
    /// zone: a daemon paused mid-delivery can deliver an outdated request late.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    /// The provider account holding the zone at its last look, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// An alert episode's notification id (see [`AlertEvent::id`]).
fn episode_id(
    prefix: &str,
    database: Option<&str>,
    id: i64,
    opened: Timestamp,
    event: EventKind,
    notifications: i64,
) -> String {
    let database = database.map(|d| d.get(..12).unwrap_or(d)).unwrap_or("mem");
    let episode = format!("{prefix}-{database}-{id}.{}", opened.0);
    match event {
        EventKind::Renotify => format!("{episode}-renotify-{notifications}"),
        other => format!("{episode}-{other}"),
    }
}

impl AlertEvent {
    /// The notification owed for an alert row: `Firing`, `Renotify` or `Resolved`.
    /// `state` and `ds` are the zone's now; the DS is kept only for the kinds whose remedy
    /// is entering or removing it at the registrar.
    pub fn for_alert(
        alert: &AlertRow,
        event: EventKind,
        state: Option<&str>,
        ds: Option<&str>,
        now: Timestamp,
        database: Option<&str>,
    ) -> Self {
        let ds = ds.filter(|_| {
            matches!(
                alert.kind,
                AlertKind::DsUnpublishedOverdue
                    | AlertKind::DsRemovalOverdue
                    | AlertKind::DsMismatch
            )
        });
        let id = episode_id(
            "alert",
            database,
            alert.id,
            alert.opened_at,
            event,
            alert.notifications,
        );
        let severity = alert.severity.as_str();
        let text = match event {
            EventKind::Resolved => format!(
                "RESOLVED {} {}: the condition open since {} has cleared",
                alert.kind, alert.zone, alert.opened_at
            ),
            EventKind::Renotify => format!(
                "[{severity}] STILL OPEN since {}: {} {}: {}",
                alert.opened_at, alert.kind, alert.zone, alert.message
            ),
            _ => format!(
                "[{severity}] {} {}: {}",
                alert.kind, alert.zone, alert.message
            ),
        };
        Self {
            text,
            id,
            event,
            zone: alert.zone.clone(),
            kind: Some(alert.kind),
            severity: severity.to_string(),
            message: alert.message.clone(),
            state: state.map(str::to_string),
            opened_at: Some(alert.opened_at.to_string()),
            resolved_at: alert.resolved_at.map(|t| t.to_string()),
            ds: ds.map(str::to_string),
            at: now.to_string(),
            seq: None,
            provider: None,
        }
    }

    /// The notification owed for a daemon-wide alert: no zone, ids `daemon-alert-<db>-7.<ms>-firing`.
    pub fn for_daemon_alert(
        alert: &DaemonAlertRow,
        event: EventKind,
        now: Timestamp,
        database: Option<&str>,
    ) -> Self {
        let id = episode_id(
            "daemon-alert",
            database,
            alert.id,
            alert.opened_at,
            event,
            alert.notifications,
        );
        let severity = alert.severity.as_str();
        let text = match event {
            EventKind::Resolved => format!(
                "RESOLVED {} (the whole daemon): the condition open since {} has cleared",
                alert.kind, alert.opened_at
            ),
            EventKind::Renotify => format!(
                "[{severity}] STILL OPEN since {}: {} (the whole daemon): {}",
                alert.opened_at, alert.kind, alert.message
            ),
            _ => format!(
                "[{severity}] {} (the whole daemon): {}",
                alert.kind, alert.message
            ),
        };
        Self {
            text,
            id,
            event,
            zone: String::new(),
            kind: Some(alert.kind),
            severity: severity.to_string(),
            message: alert.message.clone(),
            state: None,
            opened_at: Some(alert.opened_at.to_string()),
            resolved_at: alert.resolved_at.map(|t| t.to_string()),
            ds: None,
            at: now.to_string(),
            seq: None,
            provider: None,
        }
    }

    /// A request to publish (`DsPublish`) or withdraw (`DsWithdraw`) a DS at the registrar.
    pub fn ds_request(
        event: EventKind,
        seq: i64,
        zone: &str,
        ds: Option<&str>,
        summary: String,
        now: Timestamp,
    ) -> Self {
        // The same request for the same DS keeps its id across a retry or a restart.
        let id = format!(
            "{event}-{zone}-{}",
            ds.and_then(|l| l.split_whitespace().last())
                .unwrap_or("any")
        );
        Self {
            text: summary.clone(),
            id,
            event,
            zone: zone.to_string(),
            kind: None,
            severity: "info".to_string(),
            message: summary,
            state: None,
            opened_at: None,
            resolved_at: None,
            ds: ds.map(str::to_string),
            at: now.to_string(),
            seq: Some(seq),
            provider: None,
        }
    }

    /// The event naming the provider account that holds its zone.
    pub fn with_provider(mut self, provider: Option<&str>) -> Self {
        self.provider = provider.map(str::to_string);
        self
    }

    /// The `DNSSEC_WARDEN_ALERT_*` variables an exec sink gets (empty when absent).
    pub fn env(&self) -> Vec<(String, String)> {
        let opt = |v: &Option<String>| v.clone().unwrap_or_default();
        [
            ("ID", self.id.clone()),
            ("EVENT", self.event.to_string()),
            ("ZONE", self.zone.clone()),
            ("KIND", self.kind.map(|k| k.to_string()).unwrap_or_default()),
            ("SEVERITY", self.severity.clone()),
            ("MESSAGE", self.message.clone()),
            ("STATE", opt(&self.state)),
            ("OPENED_AT", opt(&self.opened_at)),
            ("RESOLVED_AT", opt(&self.resolved_at)),
            ("DS", opt(&self.ds)),
            ("TEXT", self.text.clone()),
            ("AT", self.at.clone()),
            ("SEQ", self.seq.map(|n| n.to_string()).unwrap_or_default()),
            ("PROVIDER", opt(&self.provider)),
        ]
        .into_iter()
        .map(|(k, v)| (format!("DNSSEC_WARDEN_ALERT_{k}"), v))
        .collect()
    }

    /// Critical alerts are errors in the log, warnings warnings, the rest information.
    pub fn log(&self) {
        let zone = self.zone.as_str();
        let event = self.event.as_str();
        let kind = self.kind.map(AlertKind::as_str).unwrap_or("");
        let state = self.state.as_deref().unwrap_or("");
        match (self.event, self.kind.map(AlertKind::severity)) {
            (EventKind::Firing | EventKind::Renotify, Some(Severity::Critical)) => {
                tracing::error!(
                    zone,
                    state,
                    alert = kind,
                    event,
                    severity = "critical",
                    "{}",
                    self.text
                )
            }
            (EventKind::Firing | EventKind::Renotify, Some(Severity::Warning)) => {
                tracing::warn!(
                    zone,
                    state,
                    alert = kind,
                    event,
                    severity = "warning",
                    "{}",
                    self.text
                )
            }
            // The operator has to act on these: warn, so they stand out from routine lines.
            (EventKind::DsPublish | EventKind::DsWithdraw, _) => {
                tracing::warn!(zone, event, "{}", self.text)
            }
            _ => tracing::info!(zone, state, alert = kind, event, "{}", self.text),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    #[error("{sink}: {error}")]
    Exec { sink: String, error: CommandError },
}

/// An `[[alerts.exec]]` sink.
#[derive(Debug, Clone)]
pub struct Exec {
    name: String,
    command: Vec<String>,
    timeout: std::time::Duration,
}

impl Exec {
    pub fn new(settings: &ExecSettings) -> Self {
        Self {
            name: settings.name.clone(),
            command: settings.command.clone(),
            timeout: settings.timeout,
        }
    }

    pub async fn send(&self, event: &AlertEvent) -> Result<(), SinkError> {
        let body = serde_json::to_vec(event).unwrap_or_default();
        exec::run(&self.command, &event.env(), &body, self.timeout)
            .await
            .map_err(|error| SinkError::Exec {
                sink: self.name.clone(),
                error,
            })
    }
}

#[derive(Debug, Clone)]
pub enum Sink {
    Webhook(Webhook),
    Exec(Exec),
}

impl Sink {
    /// The configuration key it came from: `alerts.webhook[0]`, `alerts.exec[1]`.
    pub fn name(&self) -> &str {
        match self {
            Self::Webhook(w) => w.name(),
            Self::Exec(e) => &e.name,
        }
    }

    pub async fn send(&self, event: &AlertEvent) -> Result<(), SinkError> {
        match self {
            Self::Webhook(w) => Ok(w.send(event).await?),
            Self::Exec(e) => e.send(event).await,
        }
    }

    /// The longest one [`Sink::send`] can take (its own timeouts and retries).
    pub fn longest(&self) -> std::time::Duration {
        match self {
            Self::Webhook(w) => w.longest(),
            // The command's time, then a moment to read what it left in its pipes.
            Self::Exec(e) => e.timeout + std::time::Duration::from_secs(1),
        }
    }
}

/// Every configured sink, webhooks first, in file order.
pub fn sinks(settings: &AlertSettings) -> Result<Vec<Sink>, WebhookError> {
    let mut out = Vec::with_capacity(settings.webhooks.len() + settings.execs.len());
    for w in &settings.webhooks {
        out.push(Sink::Webhook(Webhook::new(w)?));
    }
    out.extend(settings.execs.iter().map(|e| Sink::Exec(Exec::new(e))));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_have_stable_ids_and_env() {
        let row = AlertRow {
            id: 7,
            zone: "child.test.".into(),
            kind: AlertKind::DsMismatch,
            severity: Severity::Critical,
            message: "m".into(),
            opened_at: Timestamp(0),
            last_notified_at: None,
            notifications: 0,
            resolved_at: None,
            resolved_notified_at: None,
        };
        let e = AlertEvent::for_alert(
            &row,
            EventKind::Firing,
            Some("active"),
            Some("child.test. 3600 IN DS 1 13 2 AB"),
            Timestamp(1000),
            Some("0123456789abcdef0123456789abcdef"),
        );
        assert_eq!(e.id, "alert-0123456789ab-7.0-firing");
        assert_eq!(e.severity, "critical");
        assert!(e.text.contains("ds_mismatch") && e.text.contains("child.test."));
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["event"], "firing");
        assert_eq!(json["kind"], "ds_mismatch");
        assert_eq!(json["opened_at"], "1970-01-01T00:00:00Z");
        assert_eq!(json["ds"], "child.test. 3600 IN DS 1 13 2 AB");
        assert!(
            json.get("seq").is_none(),
            "only DS and NS requests are numbered"
        );
        let env = e.env();
        assert!(env.contains(&("DNSSEC_WARDEN_ALERT_KIND".into(), "ds_mismatch".into())));
        assert!(env.contains(&("DNSSEC_WARDEN_ALERT_STATE".into(), "active".into())));
        assert!(
            json.get("provider").is_none(),
            "no account known: none said"
        );
        let named = e.clone().with_provider(Some("pdns"));
        assert_eq!(serde_json::to_value(&named).unwrap()["provider"], "pdns");
        assert!(
            named
                .env()
                .contains(&("DNSSEC_WARDEN_ALERT_PROVIDER".into(), "pdns".into()))
        );
        let r = AlertEvent::for_alert(&row, EventKind::Renotify, None, None, Timestamp(0), None);
        assert_eq!(r.id, "alert-mem-7.0-renotify-0");
        // Another database, or the same episode number opened at another time (a copy
        // restored from a backup): another id.
        let other = AlertEvent::for_alert(
            &row,
            EventKind::Firing,
            None,
            None,
            Timestamp(0),
            Some("fedcba9876543210fedcba9876543210"),
        );
        assert_ne!(other.id, e.id);
        let reopened = AlertRow {
            opened_at: Timestamp(5_000),
            ..row.clone()
        };
        let again = AlertEvent::for_alert(
            &reopened,
            EventKind::Firing,
            None,
            None,
            Timestamp(0),
            Some("0123456789abcdef0123456789abcdef"),
        );
        assert_ne!(again.id, e.id);
    }
}
