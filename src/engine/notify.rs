//! Telling people: the DS to publish or withdraw (log, alert sinks and the optional
//! registrar hook), and alerts (log and sinks: one notification per episode, a reminder
//! every `alerts.renotify_after`, a `resolved` when the condition clears).
//!
//! Alert bookkeeping is in SQLite: an alert is marked notified only once every sink has
//! taken the notification, so a sink that fails keeps it owed, and the next tick tries
//! again; a restart neither repeats a delivered notification nor loses an owed one.
//! While one sink keeps failing, the sinks that already took the notification are
//! remembered in memory and not sent it again (a per-sink column would survive restarts
//! too, but costs a schema change for a case that is rare twice over: a sink failing and a
//! restart before it recovers; events carry a stable `id` for receivers to drop that repeat).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::alert::{self, AlertEvent, EventKind, Sink};
use crate::config::{AlertSettings, RegistrarSettings, Settings};
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
    /// Change the zone's NS at the registrar (moving in, safety rule 9).
    Delegate {
        zone: String,
        name_servers: Vec<String>,
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
        }
    }

    fn zone(&self) -> &str {
        match self {
            Self::PublishDs { zone, .. }
            | Self::WithdrawDs { zone, .. }
            | Self::Delegate { zone, .. } => zone,
        }
    }

    fn ds(&self) -> Option<&str> {
        match self {
            Self::PublishDs { ds_line, .. } => Some(ds_line),
            Self::WithdrawDs { ds_line, .. } => ds_line.as_deref(),
            Self::Delegate { .. } => None,
        }
    }
}

/// The name the log takes in the delivery memo.
const LOG: &str = "log";

#[derive(Clone)]
pub struct Notifier {
    /// `[registrar] command`: run with the zone and DS when a DS should be published or
    /// withdrawn.
    pub registrar_command: Option<Vec<String>>,
    pub hook_timeout: Duration,
    /// An open alert is notified again after this long.
    pub renotify_after: Duration,
    /// `[[alerts.webhook]]` and `[[alerts.exec]]`; the log is always written besides.
    pub sinks: Vec<Sink>,
    /// Time stamps of DS requests (alerts are stamped with the engine's clock).
    clock: Arc<dyn Clock>,
    /// (sink, event id) already delivered while another sink still owes the event.
    delivered: Arc<Mutex<HashSet<(String, String)>>>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("registrar_command", &self.registrar_command)
            .field("hook_timeout", &self.hook_timeout)
            .field("renotify_after", &self.renotify_after)
            .field("sinks", &self.sinks)
            .finish_non_exhaustive()
    }
}

impl Default for Notifier {
    fn default() -> Self {
        Self {
            registrar_command: None,
            hook_timeout: Duration::from_secs(60),
            renotify_after: Duration::from_secs(86_400),
            sinks: Vec::new(),
            clock: Arc::new(SystemClock),
            delivered: Arc::default(),
        }
    }
}

impl Notifier {
    /// The notifier `[alerts]` and `[registrar]` describe.
    pub fn from_settings(settings: &Settings) -> Result<Self, WebhookError> {
        Self::new(&settings.alerts, settings.registrar.as_ref())
    }

    pub fn new(
        alerts: &AlertSettings,
        registrar: Option<&RegistrarSettings>,
    ) -> Result<Self, WebhookError> {
        let mut notifier = Self {
            renotify_after: alerts.renotify_after,
            sinks: alert::sinks(alerts)?,
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

    /// Tells the operator to publish or withdraw a DS: the log (warning level), every
    /// sink (event `ds_publish` / `ds_withdraw` with the DS line), then the registrar
    /// hook if configured. Only the hook's failure is returned: the engine records it as
    /// a failed effect in the outbox and the audit trail. A sink's failure is logged at
    /// error level; the `ds_unpublished_overdue` alert repeats the DS line in any case.
    ///
    /// `seq` numbers the request (the outbox row's id): later requests for a zone carry
    /// larger numbers, so a receiver can drop one a paused daemon delivers late.
    pub async fn deliver(&self, n: &Notification, seq: i64) -> Result<(), HookError> {
        let event_kind = match n {
            Notification::PublishDs { .. } => EventKind::DsPublish,
            Notification::WithdrawDs { .. } => EventKind::DsWithdraw,
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
        for sink in &self.sinks {
            if let Err(e) = sink.send(&event).await {
                tracing::error!(
                    zone = n.zone(),
                    sink = sink.name(),
                    event = event.event.as_str(),
                    "DS request not delivered: {e}"
                );
            }
        }
        // The registrar hook is for the DS only: a wrong NS set takes the domain down,
        // so that change stays with a person.
        if matches!(n, Notification::Delegate { .. }) {
            return Ok(());
        }
        let Some(argv) = self.registrar_command.as_ref().filter(|a| !a.is_empty()) else {
            return Ok(());
        };
        let seq_text = seq.to_string();
        let env = [
            ("DNSSEC_WARDEN_ACTION", n.action()),
            ("DNSSEC_WARDEN_ZONE", n.zone()),
            ("DNSSEC_WARDEN_DS", n.ds().unwrap_or("")),
            ("DNSSEC_WARDEN_SEQ", seq_text.as_str()),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let body =
            serde_json::json!({"action": n.action(), "zone": n.zone(), "ds": n.ds(), "seq": seq});
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

    /// Sends every owed alert notification: new episodes, re-notifications, resolutions.
    /// A sink that fails is not tried again in this round (the notifications stay owed),
    /// so a dead receiver costs one bounded retry sequence per tick, not one per alert.
    pub async fn deliver_alerts(&self, store: &Store, clock: &dyn Clock) -> Result<(), StoreError> {
        let now = clock.now();
        let owed = store.alerts_to_notify(now, self.renotify_after).await?;
        let mut down: HashSet<String> = HashSet::new();
        type ZoneInfo = (Option<String>, Option<String>, Option<String>);
        let mut zones: HashMap<String, ZoneInfo> = HashMap::new();
        for alert in owed {
            // Several daemons: a zone taken by another daemon since the list was read (a
            // pause, a slow sink) is its new holder's to notify; sending it here too would
            // repeat it for every such zone, not only the one in hand.
            if !store
                .lease_current(&alert.zone, crate::store::Fenced::Notification)
                .await?
            {
                continue;
            }
            if !zones.contains_key(&alert.zone) {
                let row = store.zone(&alert.zone).await?;
                let info = row.map_or((None, None, None), |r| {
                    (
                        r.zone.state.map(|s| State::as_str(s).to_string()),
                        r.zone.facts.ds_line,
                        r.zone.facts.ds_to_enter,
                    )
                });
                zones.insert(alert.zone.clone(), info);
            }
            let (state, followed, to_enter) = zones.get(&alert.zone).cloned().unwrap_or_default();
            // A DS to remove is the followed one; a DS to enter only while rule 8 holds.
            let ds = match alert.kind {
                AlertKind::DsRemovalOverdue => followed,
                _ => to_enter,
            };
            let event =
                |kind| AlertEvent::for_alert(&alert, kind, state.as_deref(), ds.as_deref(), now);
            if owes_open(&alert, now, self.renotify_after) {
                let kind = if alert.notifications > 0 {
                    EventKind::Renotify
                } else {
                    EventKind::Firing
                };
                if !self.send(&event(kind), &mut down).await {
                    continue;
                }
                if lease_lost(store.alert_notified(alert.id, now).await)? {
                    continue;
                }
            }
            if alert.resolved_at.is_some() && alert.resolved_notified_at.is_none() {
                if !self.send(&event(EventKind::Resolved), &mut down).await {
                    continue;
                }
                lease_lost(store.alert_resolution_notified(alert.id, now).await)?;
            }
        }
        Ok(())
    }

    /// Sends every owed daemon-wide notification (`daemon_alerts`), each claimed first so
    /// that of several daemons on one database one sends it; a failed delivery gives the
    /// claim back and stays owed.
    pub async fn deliver_daemon_alerts(
        &self,
        store: &Store,
        clock: &dyn Clock,
    ) -> Result<(), StoreError> {
        /// Longer than a delivery takes (every sink's bounded retries); a daemon that dies
        /// mid-delivery leaves it to the others after this.
        const CLAIM: Duration = Duration::from_secs(600);
        let now = clock.now();
        let owed = store
            .daemon_alerts_to_notify(now, self.renotify_after)
            .await?;
        let mut down: HashSet<String> = HashSet::new();
        for alert in owed {
            if !store.claim_daemon_alert(alert.id, now, CLAIM).await? {
                continue;
            }
            let event = |kind| {
                let event = AlertEvent::for_daemon_alert(&alert, kind, now);
                // The log has it already: the condition's own line, once per episode.
                self.mark(LOG, &event.id);
                event
            };
            if alert.resolved_at.is_none() {
                let kind = if alert.notifications > 0 {
                    EventKind::Renotify
                } else {
                    EventKind::Firing
                };
                if self.send(&event(kind), &mut down).await {
                    store.daemon_alert_notified(alert.id, now).await?;
                } else {
                    store.unclaim_daemon_alert(alert.id).await?;
                }
            } else if self.send(&event(EventKind::Resolved), &mut down).await {
                store
                    .daemon_alert_resolution_notified(alert.id, now)
                    .await?;
            } else {
                store.unclaim_daemon_alert(alert.id).await?;
            }
        }
        Ok(())
    }

    /// Gives the event to the log and every sink that does not have it yet; true once all
    /// have it.
    async fn send(&self, event: &AlertEvent, down: &mut HashSet<String>) -> bool {
        if self.mark(LOG, &event.id) {
            event.log();
        }
        let mut complete = true;
        for sink in &self.sinks {
            if self.has(sink.name(), &event.id) {
                continue;
            }
            if down.contains(sink.name()) {
                complete = false;
                continue;
            }
            match sink.send(event).await {
                Ok(()) => {
                    self.mark(sink.name(), &event.id);
                }
                Err(e) => {
                    tracing::error!(
                        zone = event.zone.as_str(),
                        sink = sink.name(),
                        event = event.event.as_str(),
                        id = event.id.as_str(),
                        "alert notification not delivered, trying again next tick: {e}"
                    );
                    down.insert(sink.name().to_string());
                    complete = false;
                }
            }
        }
        if complete {
            // Owed no more: the database says so from now on.
            if let Ok(mut memo) = self.delivered.lock() {
                memo.retain(|(_, id)| id != &event.id);
            }
        }
        complete
    }

    fn has(&self, sink: &str, id: &str) -> bool {
        self.delivered
            .lock()
            .map(|memo| memo.contains(&(sink.to_string(), id.to_string())))
            .unwrap_or(false)
    }

    /// Remembers a delivery; true if it is new.
    fn mark(&self, sink: &str, id: &str) -> bool {
        self.delivered
            .lock()
            .map(|mut memo| memo.insert((sink.to_string(), id.to_string())))
            .unwrap_or(true)
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
