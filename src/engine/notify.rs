//! Telling people: the DS to publish or withdraw (log, alert sinks and the optional
//! registrar hook), and alerts (log and sinks: one notification per episode, a reminder
//! every `alerts.renotify_after`, a `resolved` when the condition clears).
//!
//! Nothing here waits for a sink: a notification is written to the log and to every
//! sink's own queue in the database (`deliveries`), and each sink's worker
//! (`engine::sinks`) delivers it, outside any zone's step. An alert is marked notified
//! once it is in every sink's queue: what a failing sink still owes is its queue's, kept
//! across restarts, and delivered in order when it recovers, while the other sinks have
//! it already. The registrar hook is no sink: the engine runs it beside the zone's step
//! (never behind a sink), and its outcome is the DS request's (the outbox row's).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::sinks::{Backoff, FIRST_WAIT, SinkQueue, SinkWorkers};
use crate::alert::{self, AlertEvent, EventKind, Sink};
use crate::alert::{AlertSettings, RegistrarSettings};
use crate::condition::Condition;
use crate::lifecycle::{AlertKind, Clock, State, SystemClock};
use crate::store::{AlertRow, Store, StoreError};

pub use crate::alert::CommandError as HookError;
pub use crate::alert::WebhookError;

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
    /// Change the zone's NS at the registrar (moving in, safety rule 9; a signed move).
    Delegate {
        zone: String,
        name_servers: Vec<String>,
    },
    /// A signed move: add `ds_line` beside `keep`, which must stay (the hook's `add`: a
    /// hook that only knows `publish` fails on it rather than replace the DS set).
    AddDs {
        zone: String,
        ds_line: String,
        keep: String,
    },
    /// A signed move: remove `ds_line`, keeping `keep` (the hook's `remove`).
    RemoveDs {
        zone: String,
        ds_line: String,
        keep: String,
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
                    .map(|l| format!(" ({})", l.replace('\n', "; ")))
                    .unwrap_or_default()
            ),
            Self::AddDs {
                zone,
                ds_line,
                keep,
            } => format!(
                "ACTION NEEDED: add this DS for {zone} at the registrar, keeping the DS there ({keep}): {ds_line}"
            ),
            Self::RemoveDs {
                zone,
                ds_line,
                keep,
            } => format!(
                "ACTION NEEDED: remove this DS for {zone} at the registrar, keeping {keep}: {ds_line}"
            ),
            Self::Delegate { zone, name_servers } => format!(
                "ACTION NEEDED: change the NS of {zone} at the registrar to: {}",
                name_servers.join(", ")
            ),
        }
    }

    fn action(&self) -> &'static str {
        match self {
            Self::PublishDs { .. } => "publish",
            Self::WithdrawDs { .. } => "withdraw",
            Self::Delegate { .. } => "delegate",
            Self::AddDs { .. } => "add",
            Self::RemoveDs { .. } => "remove",
        }
    }

    pub fn zone(&self) -> &str {
        match self {
            Self::PublishDs { zone, .. }
            | Self::WithdrawDs { zone, .. }
            | Self::Delegate { zone, .. }
            | Self::AddDs { zone, .. }
            | Self::RemoveDs { zone, .. } => zone,
        }
    }

    fn ds(&self) -> Option<&str> {
        match self {
            Self::PublishDs { ds_line, .. }
            | Self::AddDs { ds_line, .. }
            | Self::RemoveDs { ds_line, .. } => Some(ds_line),
            Self::WithdrawDs { ds_line, .. } => ds_line.as_deref(),
            Self::Delegate { .. } => None,
        }
    }

    /// The DS that must stay at the registrar (a signed move's requests).
    fn keep(&self) -> Option<&str> {
        match self {
            Self::AddDs { keep, .. } | Self::RemoveDs { keep, .. } => Some(keep),
            _ => None,
        }
    }
}

#[derive(Clone)]
pub struct Notifier {
    /// `[registrar] command`: run with the zone and DS when a DS should be published or
    /// withdrawn.
    pub registrar_command: Option<Vec<String>>,
    pub hook_timeout: Duration,
    /// An open alert is notified again after this long.
    pub renotify_after: Duration,
    /// `[[alerts.webhook]]` and `[[alerts.exec]]`, each with its queue; the log is always
    /// written besides.
    queues: Arc<Vec<Arc<SinkQueue>>>,
    /// The waits of a failing sink, and when it alerts.
    backoff: Backoff,
    /// Time stamps of DS requests (alerts are stamped with the engine's clock).
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("registrar_command", &self.registrar_command)
            .field("hook_timeout", &self.hook_timeout)
            .field("renotify_after", &self.renotify_after)
            .field("sinks", &self.queues)
            .finish_non_exhaustive()
    }
}

impl Default for Notifier {
    fn default() -> Self {
        Self {
            registrar_command: None,
            hook_timeout: Duration::from_secs(60),
            renotify_after: Duration::from_secs(86_400),
            queues: Arc::default(),
            backoff: Backoff {
                first: FIRST_WAIT,
                max: Duration::from_secs(600),
                failing_after: Duration::from_secs(900),
            },
            clock: Arc::new(SystemClock),
        }
    }
}

impl Notifier {
    pub fn new(
        alerts: &AlertSettings,
        registrar: Option<&RegistrarSettings>,
    ) -> Result<Self, WebhookError> {
        let queues = alert::sinks(alerts)?
            .into_iter()
            .map(|sink| Arc::new(SinkQueue::new(sink)))
            .collect();
        let mut notifier = Self {
            renotify_after: alerts.renotify_after,
            queues: Arc::new(queues),
            backoff: Backoff {
                first: FIRST_WAIT.min(alerts.sink_retry_max),
                max: alerts.sink_retry_max,
                failing_after: alerts.sink_failing_after,
            },
            ..Self::default()
        };
        if let Some(r) = registrar {
            notifier.registrar_command = Some(r.command.clone());
            notifier.hook_timeout = r.timeout;
        }
        Ok(notifier)
    }

    /// Stamps DS requests with this clock (the engine's, in tests a manual one).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The first wait after a sink's failed try (default [`FIRST_WAIT`]; tests).
    pub fn with_first_wait(mut self, first: Duration) -> Self {
        self.backoff.first = first;
        self
    }

    /// The configured sinks, in order.
    pub fn sinks(&self) -> impl Iterator<Item = &Sink> {
        self.queues.iter().map(|q| &q.sink)
    }

    /// Each sink's name and its `alert_sink_failing` condition (`cli::daemon` writes them
    /// to the daemon-wide alerts).
    pub fn sink_conditions(&self) -> Vec<(String, Arc<Condition>)> {
        self.queues
            .iter()
            .map(|q| (q.name().to_string(), q.condition.clone()))
            .collect()
    }

    /// Starts every sink's worker on `store`; they end when the returned value is dropped.
    pub fn start(&self, store: &Store) -> SinkWorkers {
        SinkWorkers::start(&self.queues, store, self.clock.clone(), self.backoff)
    }

    /// Whether every sink's worker has sent what it may send now, or waits after a failure
    /// (tests wait for it after a tick).
    pub fn settled(&self) -> bool {
        self.queues.iter().all(|q| q.settled())
    }

    /// Tells the operator to publish or withdraw a DS (or change the NS): the log
    /// (warning level), and every sink's queue (event `ds_publish` / `ds_withdraw` /
    /// `ns_change` with the DS line). Waits for no sink. A sink's failure is its worker's
    /// to say; the `ds_unpublished_overdue` alert repeats the DS line in any case.
    ///
    /// `seq` numbers the request (the outbox row's id): later requests for a zone carry
    /// larger numbers, so a receiver can drop one a paused daemon delivers late. The same
    /// request queued again (a hook retried) is not queued twice.
    pub async fn announce(
        &self,
        store: &Store,
        n: &Notification,
        seq: i64,
    ) -> Result<(), StoreError> {
        let event_kind = match n {
            Notification::PublishDs { .. } | Notification::AddDs { .. } => EventKind::DsPublish,
            Notification::WithdrawDs { .. } | Notification::RemoveDs { .. } => {
                EventKind::DsWithdraw
            }
            Notification::Delegate { .. } => EventKind::NsChange,
        };
        let event = AlertEvent::ds_request(
            event_kind,
            seq,
            n.zone(),
            n.ds(),
            n.summary(),
            self.clock.now(),
        );
        event.log();
        self.enqueue(store, &event, seq, n.zone()).await
    }

    /// Whether the registrar hook runs for this request: configured, and for a DS only (a
    /// wrong NS set takes the domain down, so that change stays with a person).
    pub fn has_hook(&self, n: &Notification) -> bool {
        !matches!(n, Notification::Delegate { .. })
            && self
                .registrar_command
                .as_ref()
                .is_some_and(|argv| !argv.is_empty())
    }

    /// Runs the registrar hook for a DS request (nothing when [`Notifier::has_hook`] is
    /// false). Its failure is returned: the engine records it as a failed effect in the
    /// outbox and the audit trail.
    pub async fn run_hook(&self, n: &Notification, seq: i64) -> Result<(), HookError> {
        if !self.has_hook(n) {
            return Ok(());
        }
        let Some(argv) = self.registrar_command.as_ref() else {
            return Ok(());
        };
        let seq_text = seq.to_string();
        let env = [
            ("DNSSEC_WARDEN_ACTION", n.action()),
            ("DNSSEC_WARDEN_ZONE", n.zone()),
            ("DNSSEC_WARDEN_DS", n.ds().unwrap_or("")),
            ("DNSSEC_WARDEN_SEQ", seq_text.as_str()),
            ("DNSSEC_WARDEN_DS_KEEP", n.keep().unwrap_or("")),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let body = serde_json::json!({
            "action": n.action(), "zone": n.zone(), "ds": n.ds(), "keep": n.keep(), "seq": seq,
        });
        let result =
            alert::exec::run(argv, &env, body.to_string().as_bytes(), self.hook_timeout).await;
        match &result {
            Ok(()) => tracing::info!(
                zone = n.zone(),
                action = n.action(),
                "registrar hook succeeded"
            ),
            Err(e) => tracing::error!(
                zone = n.zone(),
                action = n.action(),
                "registrar hook failed (the DS request stands; act at the registrar by hand): {e}"
            ),
        }
        result
    }

    /// Queues every owed alert notification (new episodes, re-notifications,
    /// resolutions) for every sink, logs it, and marks it notified. Waits for no sink.
    pub async fn deliver_alerts(&self, store: &Store, clock: &dyn Clock) -> Result<(), StoreError> {
        let now = clock.now();
        let owed = store.alerts_to_notify(now, self.renotify_after).await?;
        type ZoneInfo = (
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
        );
        let mut zones: HashMap<String, ZoneInfo> = HashMap::new();
        for alert in owed {
            // Several daemons: a zone taken by another daemon since the list was read is
            // its new holder's to notify.
            if !store
                .lease_current(&alert.zone, crate::store::Fenced::Notification)
                .await?
            {
                continue;
            }
            if !zones.contains_key(&alert.zone) {
                let row = store.zone(&alert.zone).await?;
                let info = row.map_or((None, None, None, None), |r| {
                    let account = r
                        .last_observation
                        .as_ref()
                        .and_then(|o| o.pointer("/provider/account"))
                        .and_then(|a| a.as_str())
                        .map(str::to_string);
                    (
                        r.zone.state.map(|s| State::as_str(s).to_string()),
                        r.zone.facts.lifecycle.ds_line,
                        r.zone.facts.lifecycle.ds_to_enter,
                        account,
                    )
                });
                zones.insert(alert.zone.clone(), info);
            }
            let (state, followed, to_enter, account) =
                zones.get(&alert.zone).cloned().unwrap_or_default();
            // A DS to remove is the followed one; a DS to enter only while rule 8 holds.
            let ds = match alert.kind {
                AlertKind::DsRemovalOverdue => followed,
                _ => to_enter,
            };
            let database = store.database_id();
            let event = |kind| {
                AlertEvent::for_alert(&alert, kind, state.as_deref(), ds.as_deref(), now, database)
                    .with_provider(account.as_deref())
            };
            if owes_open(&alert, now, self.renotify_after) {
                let kind = if alert.notifications > 0 {
                    EventKind::Renotify
                } else {
                    EventKind::Firing
                };
                let event = event(kind);
                event.log();
                self.enqueue(store, &event, 0, &alert.zone).await?;
                if lease_lost(store.alert_notified(alert.id, now).await)? {
                    continue;
                }
            }
            if alert.resolved_at.is_some() && alert.resolved_notified_at.is_none() {
                let event = event(EventKind::Resolved);
                event.log();
                self.enqueue(store, &event, 0, &alert.zone).await?;
                lease_lost(store.alert_resolution_notified(alert.id, now).await)?;
            }
        }
        Ok(())
    }

    /// Queues every owed daemon-wide notification (`daemon_alerts`) for every sink, each
    /// claimed first so that of several daemons on one database one queues it. The log
    /// has it already (the condition's own line, once per episode).
    pub async fn deliver_daemon_alerts(
        &self,
        store: &Store,
        clock: &dyn Clock,
    ) -> Result<(), StoreError> {
        /// Longer than queueing takes; a daemon that dies meanwhile leaves it to the
        /// others after this.
        const CLAIM: Duration = Duration::from_secs(60);
        let now = clock.now();
        let owed = store
            .daemon_alerts_to_notify(now, self.renotify_after)
            .await?;
        for alert in owed {
            if !store.claim_daemon_alert(alert.id, now, CLAIM).await? {
                continue;
            }
            let kind = if alert.resolved_at.is_some() {
                EventKind::Resolved
            } else if alert.notifications > 0 {
                EventKind::Renotify
            } else {
                EventKind::Firing
            };
            let event = AlertEvent::for_daemon_alert(&alert, kind, now, store.database_id());
            if let Err(e) = self.enqueue(store, &event, 0, "").await {
                store.unclaim_daemon_alert(alert.id).await?;
                return Err(e);
            }
            if kind == EventKind::Resolved {
                store
                    .daemon_alert_resolution_notified(alert.id, now)
                    .await?;
            } else {
                store.daemon_alert_notified(alert.id, now).await?;
            }
        }
        Ok(())
    }

    /// Puts the event in every sink's queue (`seq`: a DS or NS request's number, else 0)
    /// and wakes the workers.
    async fn enqueue(
        &self,
        store: &Store,
        event: &AlertEvent,
        seq: i64,
        zone: &str,
    ) -> Result<(), StoreError> {
        if self.queues.is_empty() {
            return Ok(());
        }
        let json = serde_json::to_string(event)
            .map_err(|e| StoreError::Corrupt(format!("a notification as JSON: {e}")))?;
        let names: Vec<&str> = self.queues.iter().map(|q| q.name()).collect();
        store
            .enqueue_delivery(&names, &event.id, seq, zone, &json, self.clock.now())
            .await?;
        for queue in self.queues.iter() {
            queue.wake();
        }
        Ok(())
    }
}

/// Several daemons: the alert's zone was taken by another daemon between the listing and
/// the bookkeeping (true); that daemon owes the notification now, and may repeat it with
/// the same `id`.
fn lease_lost(result: Result<(), StoreError>) -> Result<bool, StoreError> {
    match result {
        Ok(()) => Ok(false),
        Err(StoreError::LeaseLost(zone)) => {
            tracing::warn!(
                zone = zone.as_str(),
                "an alert notification was sent, but the zone's lease was lost before it was recorded: its new holder may send it again (same id)"
            );
            Ok(true)
        }
        Err(e) => Err(e),
    }
}

/// The opening notification is owed (never sent), or a reminder is due for an open alert.
fn owes_open(alert: &AlertRow, now: crate::lifecycle::Timestamp, renotify_after: Duration) -> bool {
    match alert.last_notified_at {
        None => true,
        Some(at) => alert.resolved_at.is_none() && now.since(at) >= renotify_after,
    }
}
