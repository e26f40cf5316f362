//! The store's rules, written once for both backends: what a step writes (the zone's row,
//! its audit events, the outbox rows it voids and adds, its alert changes and their audit
//! events), what an event seen again is, which calls can be in flight, how a call of
//! unknown outcome is marked and settled. Each backend only runs a plan in its own SQL,
//! in the plan's order, in one transaction.

use std::borrow::Cow;

use super::rows::{OpenAlert, StepRow, corrupt};
use super::{EventKind, ObservationText, OutboxStatus, StoreError};
use crate::lifecycle::{AlertCheck, AlertKind, Decision, Effect, EffectKind, State, Timestamp};

/// Provider calls: the only effects that can be in flight with an unknown outcome (a
/// notification not marked done is simply owed again), and the ones every step derives
/// afresh.
pub(super) const PROVIDER_CALLS: [EffectKind; 7] = [
    EffectKind::EnableDnssec,
    EffectKind::DisableDnssec,
    EffectKind::SetCds,
    EffectKind::MoveCall,
    EffectKind::AddKey,
    EffectKind::SetKeyState,
    EffectKind::DeleteKey,
];

/// The DS requests to the operator (an announcement, a withdrawal) whose hook failure of
/// the zone's current state a step reads.
pub(super) const DS_REQUESTS: [EffectKind; 2] =
    [EffectKind::AnnounceDs, EffectKind::RequestDsRemoval];

/// The outbox statuses that have a zone observed again before anything is performed
/// (after a restart, or when a daemon takes a zone): effects owed, calls of unknown
/// outcome.
pub(super) const RECHECKED: [OutboxStatus; 2] = [OutboxStatus::Pending, OutboxStatus::Unknown];

/// Why a call begun and never finished has an unknown outcome (`outbox.last_error`).
pub(super) const IN_FLIGHT_ERROR: &str = "in flight when the daemon stopped";

/// A step's writes, in the order they are written.
pub(super) struct StepPlan<'a> {
    pub zone: ZoneWrite<'a>,
    /// The decision's audit notes.
    pub events: Vec<Event<'a>>,
    /// Owed effects the decision voids; `None` when none was owed at the read (only this
    /// zone's steps add them), which spares the statement.
    pub supersede: Option<Supersede<'a>>,
    /// New outbox rows, each numbered from the database's sequence.
    pub effects: Vec<NewEffect>,
    /// Alert changes, each with the audit event it leaves (a reword leaves none).
    pub alerts: Vec<(AlertChange<'a>, Option<Event<'a>>)>,
}

/// The zone's row as the step leaves it, written only at the version it was read at.
pub(super) struct ZoneWrite<'a> {
    pub name: &'a str,
    pub version: i64,
    pub state: Option<&'static str>,
    pub since: Timestamp,
    pub facts: String,
    pub wake_at: Timestamp,
    pub observed_at: Timestamp,
    pub observation: &'a ObservationText,
}

/// One line of the zone's audit trail.
pub(super) struct Event<'a> {
    pub kind: EventKind,
    pub from: Option<State>,
    pub to: Option<State>,
    pub reason: Cow<'a, str>,
    /// The observation a transition was decided on.
    pub observation: Option<&'a str>,
}

/// The owed effects a step voids. Provider calls and NOTIFY(CDS) are re-derived by every
/// step from a fresh observation: one still needed is in this decision, so older
/// unperformed ones are void (a NOTIFY owed since a crash is not sent stale). A request to the operator that a crash (or a failing hook) left undelivered is
/// void once it is no longer true (safety rules 8 and 9): a DS announcement once the zone
/// left `awaiting_ds` or follows another key, an NS change once the zone left
/// `awaiting_delegation`. Withdrawals stay owed.
pub(super) struct Supersede<'a> {
    /// `superseded`; only owed (`pending`) rows are voided.
    pub status: &'static str,
    pub at: Timestamp,
    /// Voided whatever they are.
    pub calls: [&'static str; 7],
    /// NOTIFY(CDS), voided whatever it is too.
    pub notify: &'static str,
    pub announce: &'static str,
    /// An announcement of this DS line (`ds_line`, as JSON's) stays owed when set.
    pub announce_kept: bool,
    pub ds_line: Option<&'a str>,
    pub delegation: &'static str,
    pub delegation_kept: bool,
}

/// An outbox row a step adds.
pub(super) struct NewEffect {
    pub kind: &'static str,
    /// The effect as JSON.
    pub effect: String,
    /// The account a provider call goes to (rule 13): the one it names (a signed move's),
    /// else the one the step's look was made at. Its outcome, if unknown, is settled there.
    pub account: Option<String>,
}

/// One change a step's alert checks make to the zone's open alerts.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum AlertChange<'a> {
    Open { kind: AlertKind, message: &'a str },
    Reword { id: i64, message: &'a str },
    Resolve { id: i64, kind: AlertKind },
}

impl<'a> StepPlan<'a> {
    /// The writes of `decision`, made on `read`, observed at `now`.
    pub fn new(
        read: &'a StepRow,
        decision: &'a Decision,
        observation: &'a ObservationText,
        now: Timestamp,
    ) -> Result<Self, StoreError> {
        let zone = &read.row.zone;
        let since = if decision.state != zone.state {
            now
        } else {
            zone.since
        };
        let events = decision
            .notes
            .iter()
            .map(|note| {
                let (kind, observation) = if note.from != note.to {
                    (EventKind::Transition, Some(observation.whole.as_str()))
                } else {
                    (EventKind::Note, None)
                };
                Event {
                    kind,
                    from: note.from,
                    to: note.to,
                    reason: Cow::Borrowed(&note.reason),
                    observation,
                }
            })
            .collect();
        let supersede = read.pending_effects.then(|| Supersede {
            status: OutboxStatus::Superseded.as_str(),
            at: now,
            calls: PROVIDER_CALLS.map(EffectKind::as_str),
            notify: EffectKind::NotifyCds.as_str(),
            announce: EffectKind::AnnounceDs.as_str(),
            announce_kept: decision.state == Some(State::AwaitingDs),
            ds_line: decision.facts.lifecycle.ds_line.as_deref(),
            delegation: EffectKind::RequestDelegation.as_str(),
            delegation_kept: decision.state == Some(State::AwaitingDelegation),
        });
        let looked_at = decision
            .effects
            .iter()
            .any(Effect::is_provider_call)
            .then(|| observation.account())
            .flatten();
        let effects = decision
            .effects
            .iter()
            .map(|effect| {
                let account = match effect {
                    Effect::MoveCall { account, .. } => Some(account.clone()),
                    e if e.is_provider_call() => looked_at.clone(),
                    _ => None,
                };
                Ok(NewEffect {
                    kind: effect.kind().as_str(),
                    effect: serde_json::to_string(effect).map_err(corrupt)?,
                    account,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        let alerts = alert_changes(&read.open_alerts, &decision.alerts)
            .into_iter()
            .map(|change| {
                let audit = change
                    .audit()
                    .map(|reason| Event::note(EventKind::Alert, decision.state, reason));
                (change, audit)
            })
            .collect();
        Ok(Self {
            zone: ZoneWrite {
                name: zone.name.as_str(),
                version: read.row.version,
                state: decision.state.map(State::as_str),
                since,
                facts: serde_json::to_string(&decision.facts).map_err(corrupt)?,
                wake_at: decision.wake_at,
                observed_at: now,
                observation,
            },
            events,
            supersede,
            effects,
            alerts,
        })
    }

    /// A decision that changes nothing but the zone's row (a settled zone's routine look:
    /// no note, no effect owed or decided, no alert change).
    pub fn is_routine(&self) -> bool {
        self.events.is_empty()
            && self.effects.is_empty()
            && self.supersede.is_none()
            && self.alerts.is_empty()
    }
}

impl<'a> Event<'a> {
    /// An event that moves nothing: the zone's state on both sides.
    pub fn note(kind: EventKind, state: Option<State>, reason: impl Into<Cow<'a, str>>) -> Self {
        Self {
            kind,
            from: state,
            to: state,
            reason: reason.into(),
            observation: None,
        }
    }

    /// The kinds whose last event decides whether this one is a repeat: its own, and
    /// those that end a repeat (a transition, an intent).
    pub fn repeat_kinds(&self) -> [&'static str; 3] {
        [
            self.kind.as_str(),
            EventKind::Transition.as_str(),
            EventKind::Intent.as_str(),
        ]
    }

    /// An event identical to the zone's `last` one of [`Event::repeat_kinds`] (no
    /// transition or intent since) is that condition seen again: counted on `last`, not
    /// written again. The id to count on, if so.
    pub fn repeats(&self, last: Option<LastEvent>) -> Option<i64> {
        if !self.kind.counts_repeats() {
            return None;
        }
        let (id, kind, from, to, reason) = last?;
        (kind == self.kind.as_str()
            && from.as_deref() == self.from.map(State::as_str)
            && to.as_deref() == self.to.map(State::as_str)
            && reason == self.reason)
            .then_some(id)
    }
}

/// The zone's last event of the kinds a repeat is judged on: id, kind, from, to, reason.
pub(super) type LastEvent = (i64, String, Option<String>, Option<String>, String);

impl AlertChange<'_> {
    /// The audit line the change leaves; a reword leaves none.
    fn audit(&self) -> Option<String> {
        match self {
            AlertChange::Open { kind, message } => Some(audit::alert_opened(*kind, message)),
            AlertChange::Reword { .. } => None,
            AlertChange::Resolve { kind, .. } => Some(audit::alert_resolved(*kind)),
        }
    }
}

/// What `checks` change, given the zone's `open` alerts (read once per step, not once
/// per check): a firing check opens its alert or rewords the open one, a clear check
/// resolves it; an unchanged message writes nothing.
pub(super) fn alert_changes<'a>(
    open: &[OpenAlert],
    checks: &'a [AlertCheck],
) -> Vec<AlertChange<'a>> {
    checks
        .iter()
        .filter_map(|check| {
            let open = open.iter().find(|a| a.kind == check.kind.as_str());
            match (&check.firing, open) {
                (Some(message), None) => Some(AlertChange::Open {
                    kind: check.kind,
                    message,
                }),
                (Some(message), Some(a)) if a.message != *message => {
                    Some(AlertChange::Reword { id: a.id, message })
                }
                (None, Some(a)) => Some(AlertChange::Resolve {
                    id: a.id,
                    kind: check.kind,
                }),
                _ => None,
            }
        })
        .collect()
}

/// How a call of unknown outcome is settled by what the provider now says.
pub(super) fn settled(took_effect: bool) -> OutboxStatus {
    if took_effect {
        OutboxStatus::Done
    } else {
        OutboxStatus::Failed
    }
}

/// The audit event a call begun and never finished leaves, at the zone's `state`.
pub(super) fn outcome_unknown(effect: &Effect, state: Option<State>) -> Event<'static> {
    Event::note(EventKind::Effect, state, audit::outcome_unknown(effect))
}

/// The audit texts both stores write, kept in one place so that `history` reads the same
/// on SQLite and PostgreSQL.
mod audit {
    use crate::lifecycle::{AlertKind, Effect};

    pub fn alert_opened(kind: AlertKind, message: &str) -> String {
        format!("alert {kind} ({}): {message}", kind.severity().as_str())
    }

    pub fn alert_resolved(kind: AlertKind) -> String {
        format!("alert {kind} resolved")
    }

    pub fn outcome_unknown(effect: &Effect) -> String {
        format!(
            "provider: the call to {} was in flight when the daemon or the step stopped; whether it took effect is unknown until the next observation",
            effect.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last(kind: &str, state: Option<&str>, reason: &str) -> Option<LastEvent> {
        let state = state.map(str::to_string);
        Some((7, kind.into(), state.clone(), state, reason.into()))
    }

    #[test]
    fn an_event_repeats_only_the_same_last_one_of_its_kind() {
        let seen = Event::note(EventKind::Note, Some(State::AwaitingDs), "waiting");
        let waiting = Some("awaiting_ds");
        assert_eq!(seen.repeats(last("note", waiting, "waiting")), Some(7));
        assert_eq!(seen.repeats(last("note", waiting, "other")), None);
        assert_eq!(seen.repeats(last("transition", waiting, "waiting")), None);
        assert_eq!(seen.repeats(None), None);
        // An intent is always written, whatever came before it.
        let intent = Event::note(EventKind::Intent, Some(State::AwaitingDs), "waiting");
        assert_eq!(intent.repeats(last("intent", waiting, "waiting")), None);
    }

    #[test]
    fn alert_changes_leave_an_audit_line_but_a_reword() {
        let open = [OpenAlert {
            kind: AlertKind::DsMismatch.as_str().into(),
            id: 3,
            message: "old".into(),
        }];
        let checks = [
            AlertCheck::new(AlertKind::DsMismatch, Some("new".into())),
            AlertCheck::new(AlertKind::ValidationFailed, Some("down".into())),
        ];
        let changes = alert_changes(&open, &checks);
        assert_eq!(
            changes,
            [
                AlertChange::Reword {
                    id: 3,
                    message: "new"
                },
                AlertChange::Open {
                    kind: AlertKind::ValidationFailed,
                    message: "down"
                },
            ]
        );
        assert_eq!(changes[0].audit(), None);
        assert!(changes[1].audit().is_some_and(|a| a.ends_with(": down")));
        let clear = [AlertCheck::new(AlertKind::DsMismatch, None)];
        let resolved = alert_changes(&open, &clear);
        assert_eq!(
            resolved[0].audit().as_deref(),
            Some("alert ds_mismatch resolved")
        );
    }
}
