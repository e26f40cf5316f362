//! The one mapping between SQLite rows and the lifecycle's types: the rows the store
//! returns, the kinds and statuses it writes, and how a stored text becomes a typed value
//! (anything else is `StoreError::Corrupt`, naming what).

use std::str::FromStr;

use serde::Serialize;
use strum::{Display, EnumString, IntoStaticStr, VariantArray};

use super::{DaemonAlertRow, StoreError};
use crate::lifecycle::waiting::{Waiting, describe};
use crate::lifecycle::{AlertKind, Effect, Facts, Policy, Severity, State, Timestamp, Zone};
use crate::zone_name::ZoneName;

/// A zone row: the lifecycle's view plus the engine's bookkeeping.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneRow {
    pub zone: Zone,
    pub next_check_at: Timestamp,
    /// The last full look (every address asked).
    pub last_observed_at: Option<Timestamp>,
    /// The last sampled look that agreed with it (DESIGN.md section 4), if later.
    pub sampled_at: Option<Timestamp>,
    pub last_observation: Option<serde_json::Value>,
    pub version: i64,
    /// The daemon holding the zone (PostgreSQL with several daemons), if its lease is
    /// set; whether it is still current is `until` against the time.
    pub lease: Option<super::LeaseInfo>,
}

/// What `status`, the web console and the metrics read of a zone's row, written once.
impl ZoneRow {
    /// What the zone waits for; a provider that answered "no such zone" at the last look is
    /// said plainly, whatever the state (a definite answer, not an unknown).
    /// A zone waiting on observations while this host cannot reach IPv6 (`ipv6`, the
    /// daemon-wide condition's message) waits on the host: its IPv6 parent addresses are
    /// unknown however long it waits.
    pub fn waiting(&self, policy: &Policy, ipv6: Option<&str>) -> Waiting {
        if let Some(why) = ipv6
            && !self.zone.state.is_some_and(State::is_steady)
        {
            return Waiting {
                what: format!("this host's IPv6: {why}"),
                on: "host",
                accounts: Vec::new(),
                until: None,
            };
        }
        let missing = self
            .last_observation
            .as_ref()
            .and_then(|o| o.pointer("/provider/dnssec"))
            .is_some_and(|v| v == "not_found");
        if missing {
            return Waiting {
                what: format!(
                    "the zone to exist at the provider: it answers that it has no zone {}",
                    self.zone.name
                ),
                on: "operator",
                accounts: self.account().map(str::to_string).into_iter().collect(),
                until: None,
            };
        }
        let mut waiting = describe(&self.zone, policy);
        // A provider's wait that names no account is the zone's one account's (a zone in a
        // signed move names its own: never the serving account by default).
        if waiting.on == "provider"
            && waiting.accounts.is_empty()
            && self.zone.facts.signed_move.is_none()
        {
            waiting.accounts.extend(self.account().map(str::to_string));
        }
        waiting
    }

    /// How the parent's answers at the last look could be trusted (safety rule 10):
    /// `validated`, `insecure` (the parent zone is unsigned: unvalidated), `unchecked` (a
    /// routine look), with the reason for `insecure`.
    pub fn evidence(&self) -> (Option<&str>, Option<&str>) {
        let at = self
            .last_observation
            .as_ref()
            .and_then(|o| o.pointer("/parent/evidence"));
        (
            at.and_then(|e| e.get("kind"))
                .and_then(serde_json::Value::as_str),
            at.and_then(|e| e.get("detail"))
                .and_then(serde_json::Value::as_str),
        )
    }

    /// The configured provider account that held the zone at the last observation.
    pub fn account(&self) -> Option<&str> {
        self.last_observation
            .as_ref()
            .and_then(|o| o.pointer("/provider/account"))
            .and_then(serde_json::Value::as_str)
    }

    /// The provider's failure at the last observation, if it could not be asked.
    pub fn provider_error(&self) -> Option<&str> {
        self.last_observation
            .as_ref()
            .and_then(|o| o.pointer("/provider/error"))
            .and_then(serde_json::Value::as_str)
    }

    /// The daemon holding the zone (several daemons on PostgreSQL), while its lease lasts.
    pub fn current_lease(&self, now: Timestamp) -> Option<&super::LeaseInfo> {
        self.lease.as_ref().filter(|l| l.until > now)
    }
}

/// The message of an open `host_ipv6_unreachable`, if any.
pub fn host_ipv6(open: &[DaemonAlertRow]) -> Option<&str> {
    open.iter()
        .find(|a| a.kind == AlertKind::HostIpv6Unreachable)
        .map(|a| a.message.as_str())
}

/// An observation as the store keeps it: the whole summary (`last_observation`, the
/// audit trail's), and its brief (`last_brief`), all that `status` and a step read of it:
/// `{"provider": {"dnssec": …, "error": …}, "parent": {"evidence": …}}`, a member without
/// a value left out. Neither read then has SQLite parse kilobytes of JSON a zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservationText {
    pub whole: String,
    pub brief: String,
}

impl ObservationText {
    /// The brief of the provider's account, its answer (`dnssec`) or failure (`error`) and the parent's
    /// evidence (none when the parent could not be asked); a null is no value.
    pub fn brief(
        account: Option<serde_json::Value>,
        dnssec: Option<serde_json::Value>,
        error: Option<serde_json::Value>,
        evidence: Option<serde_json::Value>,
    ) -> String {
        let object = |members: Vec<(&str, Option<serde_json::Value>)>| {
            members
                .into_iter()
                .filter_map(|(key, value)| Some((key.to_string(), value.filter(|v| !v.is_null())?)))
                .collect::<serde_json::Map<_, _>>()
        };
        let provider = object(vec![
            ("account", account),
            ("dnssec", dnssec),
            ("error", error),
        ]);
        let parent = object(vec![("evidence", evidence)]);
        serde_json::json!({ "provider": provider, "parent": parent }).to_string()
    }

    /// The provider account the look was made at, as the brief names it: where a step's
    /// provider calls go (`store::plan`).
    pub fn account(&self) -> Option<String> {
        let brief: serde_json::Value = serde_json::from_str(&self.brief).ok()?;
        brief
            .pointer("/provider/account")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    }

    /// A whole summary with its brief cut out of it (JSON that is not an object gives an
    /// empty brief). The engine writes both parts directly; this is for other writers.
    pub fn from_whole(whole: impl Into<String>) -> Self {
        let whole = whole.into();
        let value: serde_json::Value = serde_json::from_str(&whole).unwrap_or_default();
        let at = |pointer: &str| value.pointer(pointer).cloned();
        let brief = Self::brief(
            at("/provider/account"),
            at("/provider/dnssec"),
            at("/provider/error"),
            at("/parent/evidence"),
        );
        Self { whole, brief }
    }
}

/// A zone as a step reads it (`Store::zone_for_step`): the row, and what the step needs
/// of its outbox, from one consistent read.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRow {
    pub row: ZoneRow,
    /// The error of the last DS request (or withdrawal) of this state, if its hook failed.
    pub registrar_hook_failed: Option<String>,
    /// The last NOTIFY(CDS) performed in this state, and what came of it (its row's
    /// outcome).
    pub cds_notified: Option<crate::lifecycle::registry::CdsNotified>,
    /// Provider calls of unknown outcome wait to be settled.
    pub unknown_calls: bool,
    /// Effects are owed (decided by an earlier step, not yet performed or retried).
    pub pending_effects: bool,
    /// The zone's open alerts. Only steps open, reword or resolve alerts, and each of
    /// them moves the row's version, so the commit's version check keeps this current.
    pub open_alerts: Vec<OpenAlert>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    pub id: i64,
    pub zone: String,
    pub at: Timestamp,
    pub kind: EventKind,
    pub from: Option<String>,
    pub to: Option<String>,
    pub reason: String,
    /// How many more times the same event was seen right after it, and when last.
    pub repeats: i64,
    pub last_seen: Option<Timestamp>,
    /// The daemon that wrote it and its lease's epoch (PostgreSQL with several daemons;
    /// `None` for the CLI's writes and SQLite's).
    pub holder: Option<String>,
    pub epoch: Option<i64>,
}

impl EventRow {
    /// The event as one line of the story (`history`, the console's history): transitions
    /// marked, the operator's and the guard's named, repeats counted.
    pub fn story(&self) -> String {
        let line = match (self.kind, &self.from, &self.to) {
            (EventKind::Transition, from, Some(to)) => format!(
                "{} -> {to}: {}",
                from.as_deref().unwrap_or("(new)"),
                self.reason
            ),
            (EventKind::Intent, _, _) => format!("operator: {}", self.reason),
            (EventKind::Guard, _, _) => format!("SAFETY GUARD: {}", self.reason),
            (_, _, _) => self.reason.clone(),
        };
        match self.last_seen {
            Some(last) if self.repeats > 0 => {
                format!("{line} (seen {} more times, last at {last})", self.repeats)
            }
            _ => line,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlertRow {
    pub id: i64,
    pub zone: String,
    pub kind: AlertKind,
    pub severity: Severity,
    pub message: String,
    pub opened_at: Timestamp,
    pub last_notified_at: Option<Timestamp>,
    pub notifications: i64,
    pub resolved_at: Option<Timestamp>,
    pub resolved_notified_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OutboxItem {
    pub id: i64,
    /// The provider account a provider call was sent to (`None`: a row from before the
    /// column, or an effect that goes to no account).
    pub account: Option<String>,
    /// The request's number (`database_meta.last_seq`): larger for every later row, and
    /// never below its time in milliseconds, so also across a restored or new database.
    pub seq: i64,
    pub zone: String,
    pub effect: Effect,
    pub attempts: i64,
}

/// What an audit event records (`events.kind`, the `history` view, `history --json`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Display,
    EnumString,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum EventKind {
    /// The zone moved to another state (stored with the observation that moved it).
    Transition,
    /// A step's remark that moved nothing.
    Note,
    /// The operator's `enable` or `disable`.
    Intent,
    /// An effect performed, failed, or settled after an unknown outcome.
    Effect,
    /// The safety guard refused "DNSSEC off".
    Guard,
    /// An alert opened or resolved.
    Alert,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Transitions and intents are each their own fact; any other event identical to the
    /// zone's last one of its kind since is a condition seen again, and counted.
    pub(super) fn counts_repeats(self) -> bool {
        !matches!(self, Self::Transition | Self::Intent)
    }
}

impl PartialEq<&str> for EventKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// An outbox row's status: `pending` until performed, then how it ended.
/// pending → done | failed | refused | superseded | unknown → done | failed (settled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Display, EnumString, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum OutboxStatus {
    Pending,
    Done,
    Failed,
    /// Refused by the safety guard.
    Refused,
    /// A provider call a newer step no longer asked for.
    Superseded,
    /// A provider call that may or may not have taken effect: the next observation
    /// settles it (`settle_unknown_call`).
    Unknown,
}

impl OutboxStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A `zones` row as stored (`SELECT *`): the facts are one JSON column.
pub(super) struct RawZone {
    name: String,
    intent: String,
    ds_never_submitted: bool,
    state: Option<String>,
    state_since: i64,
    facts: String,
    next_check_at: i64,
    last_observed_at: Option<i64>,
    last_observation: Option<String>,
    version: i64,
    /// Left out by the step's read, which does not need it.
    sampled_at: Option<i64>,
    // PostgreSQL's lease columns; absent in SQLite.
    lease_holder: Option<String>,
    lease_epoch: Option<i64>,
    lease_since: Option<i64>,
    lease_until: Option<i64>,
}

from_row!(RawZone {
    name,
    intent,
    ds_never_submitted,
    state,
    state_since,
    facts,
    next_check_at,
    last_observed_at,
    last_observation,
    version,
} or_default { sampled_at, lease_holder, lease_epoch, lease_since, lease_until });

pub(super) struct RawStepRow {
    zone: RawZone,
    hook_error: Option<String>,
    /// JSON (`CdsNotified`).
    notify_outcome: Option<String>,
    has_unknown: bool,
    has_pending: bool,
    /// A JSON array of `{kind, id, message}` objects.
    open_alerts: String,
}

from_row!(RawStepRow { hook_error, notify_outcome, has_unknown, has_pending, open_alerts } flatten { zone: RawZone });

impl TryFrom<RawStepRow> for StepRow {
    type Error = StoreError;
    fn try_from(r: RawStepRow) -> Result<Self, StoreError> {
        let open_alerts = serde_json::from_str(&r.open_alerts).map_err(|e| {
            StoreError::Corrupt(format!("open alerts of zone {}: {e}", r.zone.name))
        })?;
        // A hint's outcome: one that cannot be read is as none (the NOTIFY is sent again),
        // not a zone that can no longer be stepped.
        let cds_notified = r
            .notify_outcome
            .and_then(|text| serde_json::from_str(&text).ok());
        Ok(StepRow {
            row: ZoneRow::try_from(r.zone)?,
            registrar_hook_failed: r.hook_error,
            cds_notified,
            unknown_calls: r.has_unknown,
            pending_effects: r.has_pending,
            open_alerts,
        })
    }
}

pub(super) struct RawEvent {
    id: i64,
    zone: String,
    at: i64,
    kind: String,
    from_state: Option<String>,
    to_state: Option<String>,
    reason: String,
    repeats: i64,
    last_at: Option<i64>,
    holder: Option<String>,
    epoch: Option<i64>,
}

from_row!(RawEvent { id, zone, at, kind, from_state, to_state, reason, repeats, last_at }
    or_default { holder, epoch });

/// An event with how many events its zone has, both read by one statement.
pub(super) struct RawCountedEvent {
    pub(super) total: i64,
    pub(super) event: RawEvent,
}

from_row!(RawCountedEvent { total } flatten { event: RawEvent });

pub(super) struct RawAlert {
    id: i64,
    zone: String,
    kind: String,
    severity: String,
    message: String,
    opened_at: i64,
    last_notified_at: Option<i64>,
    notifications: i64,
    resolved_at: Option<i64>,
    resolved_notified_at: Option<i64>,
}

from_row!(RawAlert {
    id,
    zone,
    kind,
    severity,
    message,
    opened_at,
    last_notified_at,
    notifications,
    resolved_at,
    resolved_notified_at,
});

pub(super) struct RawOutbox {
    id: i64,
    seq: i64,
    zone: String,
    effect: String,
    attempts: i64,
    account: Option<String>,
}

from_row!(RawOutbox {
    id,
    seq,
    zone,
    effect,
    attempts
} or_default { account });

pub(super) fn ts(v: Option<i64>) -> Option<Timestamp> {
    v.map(Timestamp)
}

pub(super) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

/// A text column holding one of an enum's names; anything else is corrupt data, named.
pub(super) fn parse<T: FromStr>(what: &str, text: &str) -> Result<T, StoreError> {
    text.parse()
        .map_err(|_| StoreError::Corrupt(format!("unknown {what} {text:?}")))
}

/// A zone's `state` column: NULL before its first step.
pub(super) fn parse_state(column: Option<&str>) -> Result<Option<State>, StoreError> {
    column.map(|s| parse("state", s)).transpose()
}

/// A zone's `facts` column: `lifecycle::Facts` as JSON. An error names the fact.
pub(super) fn parse_facts(zone: &str, text: &str) -> Result<Facts, StoreError> {
    // Read plainly (every step and every `status` row); only a failure is read again with
    // the path tracked, which costs about as much as the read itself, to name the fact.
    serde_json::from_str(text).or_else(|_| {
        let mut json = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut json)
            .map_err(|e| corrupt(format!("zone {zone}: facts.{}: {}", e.path(), e.inner())))
    })
}

impl TryFrom<RawZone> for ZoneRow {
    type Error = StoreError;
    fn try_from(r: RawZone) -> Result<Self, StoreError> {
        Ok(ZoneRow {
            zone: Zone {
                intent: parse("intent", &r.intent)?,
                ds_never_submitted: r.ds_never_submitted,
                state: parse_state(r.state.as_deref())?,
                since: Timestamp(r.state_since),
                facts: parse_facts(&r.name, &r.facts)?,
                name: ZoneName::from_canonical(r.name).map_err(|e| corrupt(e.to_string()))?,
            },
            next_check_at: Timestamp(r.next_check_at),
            last_observed_at: ts(r.last_observed_at),
            sampled_at: ts(r.sampled_at),
            last_observation: r
                .last_observation
                .as_deref()
                .and_then(|t| serde_json::from_str(t).ok()),
            version: r.version,
            lease: match (r.lease_holder, r.lease_until) {
                (Some(holder), Some(until)) => Some(super::LeaseInfo {
                    holder,
                    epoch: r.lease_epoch.unwrap_or(0),
                    since: Timestamp(r.lease_since.unwrap_or(until)),
                    until: Timestamp(until),
                }),
                _ => None,
            },
        })
    }
}

impl TryFrom<RawAlert> for AlertRow {
    type Error = StoreError;
    fn try_from(r: RawAlert) -> Result<Self, StoreError> {
        Ok(AlertRow {
            id: r.id,
            zone: r.zone,
            kind: parse::<AlertKind>("alert kind", &r.kind)?,
            severity: parse::<Severity>("severity", &r.severity)?,
            message: r.message,
            opened_at: Timestamp(r.opened_at),
            last_notified_at: ts(r.last_notified_at),
            notifications: r.notifications,
            resolved_at: ts(r.resolved_at),
            resolved_notified_at: ts(r.resolved_notified_at),
        })
    }
}

pub(super) const ALERT_COLUMNS: &str = "id, zone, kind, severity, message, opened_at, last_notified_at, \
    notifications, resolved_at, resolved_notified_at";

impl TryFrom<RawEvent> for EventRow {
    type Error = StoreError;
    fn try_from(r: RawEvent) -> Result<Self, StoreError> {
        Ok(EventRow {
            id: r.id,
            zone: r.zone,
            at: Timestamp(r.at),
            kind: parse("event kind", &r.kind)?,
            from: r.from_state,
            to: r.to_state,
            reason: r.reason,
            repeats: r.repeats,
            last_seen: ts(r.last_at),
            holder: r.holder,
            epoch: r.epoch,
        })
    }
}

impl TryFrom<RawOutbox> for OutboxItem {
    type Error = StoreError;
    fn try_from(r: RawOutbox) -> Result<Self, StoreError> {
        Ok(OutboxItem {
            effect: serde_json::from_str(&r.effect)
                .map_err(|e| corrupt(format!("outbox row {}: effect: {e}", r.id)))?,
            id: r.id,
            account: r.account,
            seq: r.seq,
            zone: r.zone,
            attempts: r.attempts,
        })
    }
}

/// A zone's open alert, as a step reads it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct OpenAlert {
    pub kind: String,
    pub id: i64,
    pub message: String,
}

from_row!(OpenAlert { kind, id, message });
