//! What the picture is drawn from, read once from the rows: the state lane's stretches,
//! the marks under it, the DS marks, the parent's answers at the last look, the waits, and
//! the axis's span.

use serde_json::Value;

use super::layout::Scale;
use super::{HOUR, MAX_ADDRESSES, MAX_EVENTS, MAX_MS, MIN_MS, MINUTE, TimelineInput, ms};
use crate::lifecycle::model::Zone;
use crate::lifecycle::rules::{
    delegation_hold_until, disable_deadline, ds_request_at, removal_request_at,
};
use crate::lifecycle::waiting::Waiting;
use crate::lifecycle::{Policy, State};
use crate::store::{EventKind, EventRow};

/// One stretch of the state lane: `state` from `start` to `end` (`None`: before the zone's
/// first observation).
#[derive(Debug)]
pub(super) struct Segment<'a> {
    pub(super) state: Option<&'a str>,
    pub(super) start: i64,
    pub(super) end: i64,
    /// The reason of the transition that entered it, if drawn.
    pub(super) reason: Option<&'a str>,
    /// The state the zone is in now: it runs to now.
    pub(super) current: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MarkKind {
    /// Every parent address published the DS.
    Everywhere,
    /// Every parent address answered "no DS" (T_gone).
    Gone,
    /// The last look at which some parent address published a DS.
    LastSeen,
}

#[derive(Debug)]
pub(super) struct Mark {
    pub(super) at: i64,
    pub(super) kind: MarkKind,
    /// Where it comes from, for the tooltip.
    pub(super) source: &'static str,
}

#[derive(Debug)]
pub(super) enum Said {
    Present { ttl: Option<u64>, records: usize },
    Absent,
    Unknown(String),
}

#[derive(Debug)]
pub(super) struct Address {
    pub(super) server: String,
    pub(super) addr: String,
    pub(super) said: Said,
}

/// The parent's answers at the zone's last full look.
#[derive(Debug)]
pub(super) enum ParentLook {
    Never,
    Failed(String),
    Seen {
        parent: String,
        evidence: String,
        addresses: Vec<Address>,
        more: usize,
    },
}

/// A wait drawn as a bar: from its start to its end (or to now when it has none).
#[derive(Debug)]
pub(super) struct Bar {
    pub(super) start: i64,
    pub(super) end: Option<i64>,
    pub(super) label: String,
    pub(super) class: &'static str,
}

#[derive(Debug)]
pub(super) struct Model<'a> {
    pub(super) input: &'a TimelineInput<'a>,
    pub(super) now: i64,
    pub(super) scale: Scale,
    pub(super) segments: Vec<Segment<'a>>,
    /// Intents and guard refusals among the events drawn.
    pub(super) marks_events: Vec<&'a EventRow>,
    pub(super) folded: usize,
    pub(super) ds_marks: Vec<Mark>,
    pub(super) parent: ParentLook,
    pub(super) look_at: Option<i64>,
    pub(super) waiting: Waiting,
    pub(super) wait: Option<Bar>,
    pub(super) hold: Option<Bar>,
    pub(super) ttl_waits: Vec<Bar>,
}

impl<'a> Model<'a> {
    pub(super) fn build(input: &'a TimelineInput<'a>) -> Self {
        let now = ms(input.now);
        let zone = &input.zone.zone;
        let kept = &input.events[input.events.len().saturating_sub(MAX_EVENTS)..];
        let folded = input.events.len() - kept.len();
        let segments = segments(zone, kept, now);
        let marks_events = kept
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Intent | EventKind::Guard))
            .collect();
        let ds_marks = ds_marks(zone, kept);
        let parent = parent_look(input.zone.last_observation.as_ref());
        let look_at = input.zone.last_observed_at.map(ms);
        let waiting = input.zone.waiting(input.policy, None);
        let wait = current_wait(zone, input.policy, &waiting, now);
        let hold = zone.facts.wait.held_by.as_ref().map(|hold| Bar {
            start: ms(zone.facts.wait.held_since.unwrap_or(zone.since)).min(now),
            end: None,
            label: format!("held: {} (on {})", hold.what, hold.on.as_str()),
            class: "tl-hold",
        });
        let ttl_waits = ttl_waits(zone, input.policy);

        // The axis: from the first thing drawn to now (or the latest event, a clock
        // ahead), and on to the deadlines ahead, but no further ahead than it reaches back
        // (at least an hour): a deadline a century away squashes nothing.
        let mut t0 = now;
        let mut past_end = now;
        for s in &segments {
            t0 = t0.min(s.start);
            past_end = past_end.max(s.end);
        }
        for e in kept {
            past_end = past_end.max(ms(e.at));
        }
        if let Some(at) = look_at {
            past_end = past_end.max(at);
        }
        let horizon = past_end
            .saturating_add((past_end - t0).max(HOUR))
            .min(MAX_MS);
        let mut t1 = past_end;
        let ends = wait
            .iter()
            .chain(&ttl_waits)
            .filter_map(|b| b.end)
            .chain(ds_marks.iter().map(|m| m.at));
        for end in ends {
            if end > t1 {
                t1 = end.min(horizon);
            }
        }
        // A history within one instant still gets a minute of axis.
        if t1 - t0 < MINUTE {
            let mid = t0 + (t1 - t0) / 2;
            t0 = (mid - MINUTE / 2).clamp(MIN_MS, MAX_MS - MINUTE);
            t1 = t0 + MINUTE;
        }
        Model {
            input,
            now,
            scale: Scale { t0, t1 },
            segments,
            marks_events,
            folded,
            ds_marks,
            parent,
            look_at,
            waiting,
            wait,
            hold,
            ttl_waits,
        }
    }
}

/// The state lane from the transitions, in the order written (their times made monotonic:
/// a clock that stepped back shortens a stretch to nothing, never to less). Before the
/// first transition the zone was in its `from` state since the first event drawn; with
/// no transition at all it is in its state as the row says, since `since`.
fn segments<'a>(zone: &Zone, kept: &'a [EventRow], now: i64) -> Vec<Segment<'a>> {
    let mut transitions = kept
        .iter()
        .filter(|e| e.kind == EventKind::Transition && e.to.is_some())
        .peekable();
    let first_from = transitions.peek().map(|t| t.from.as_deref());
    let (mut state, mut start) = match (first_from, kept.first(), zone.state) {
        (Some(from), Some(first), _) => (from, ms(first.at)),
        (_, first, Some(s)) => (
            Some(s.as_str()),
            first.map_or(ms(zone.since), |e| ms(e.at).min(ms(zone.since))),
        ),
        // Events (an intent) before the first observation.
        (_, Some(first), None) => (None, ms(first.at)),
        (_, None, None) => return Vec::new(),
    };
    let mut reason = None;
    let mut out = Vec::new();
    for t in transitions {
        let at = ms(t.at).max(start);
        // Nothing was in the state before the first event: no stretch of zero length
        // for it.
        if !(out.is_empty() && reason.is_none() && at == start) {
            out.push(Segment {
                state,
                start,
                end: at,
                reason,
                current: false,
            });
        }
        state = t.to.as_deref();
        start = at;
        reason = Some(t.reason.as_str());
    }
    out.push(Segment {
        state,
        start,
        end: now.max(start),
        reason,
        current: true,
    });
    out
}

/// When the DS was at every parent address, and gone from every one. This lifecycle's from
/// the facts (exact); earlier ones from the transitions whose meaning the step fixes:
/// entering `ds_observed` needs every parent address to publish the DS, and entering
/// `ttl_wait` from any state but `disabling` is `T_gone` (from `disabling` it may only be
/// a move in discovered, with `T_gone` unchanged).
fn ds_marks(zone: &Zone, kept: &[EventRow]) -> Vec<Mark> {
    let f = &zone.facts;
    let mut marks: Vec<Mark> = [
        (f.lifecycle.ds_first_seen_at, MarkKind::Everywhere),
        (f.lifecycle.t_gone, MarkKind::Gone),
        (f.lifecycle.ds_seen_at, MarkKind::LastSeen),
    ]
    .into_iter()
    .filter_map(|(at, kind)| {
        at.map(|at| Mark {
            at: ms(at),
            kind,
            source: "the zone's facts",
        })
    })
    .collect();
    for e in kept.iter().filter(|e| e.kind == EventKind::Transition) {
        let kind = match (e.from.as_deref(), e.to.as_deref()) {
            (_, Some("ds_observed")) => MarkKind::Everywhere,
            (from, Some("ttl_wait")) if from != Some("disabling") => MarkKind::Gone,
            _ => continue,
        };
        let at = ms(e.at);
        if !marks.iter().any(|m| m.kind == kind && m.at == at) {
            marks.push(Mark {
                at,
                kind,
                source: "the transition in the history",
            });
        }
    }
    marks
}

/// The parent part of the stored observation summary, read loosely (a field missing or of
/// another shape is unknown, never an error): `{"error": …}` when the parent could not be
/// asked, else `dns::ParentView` as serialized: `answers` of `{server, addr, answer:
/// {kind: present|absent|unknown, ds, ttl, reason, detail}}` and the `evidence`.
fn parent_look(observation: Option<&Value>) -> ParentLook {
    let Some(observation) = observation else {
        return ParentLook::Never;
    };
    let parent = observation.get("parent");
    let Some(answers) = parent
        .and_then(|p| p.get("answers"))
        .and_then(Value::as_array)
    else {
        let error = parent
            .and_then(|p| p.get("error"))
            .and_then(Value::as_str)
            .unwrap_or("the last look holds no parent answers");
        return ParentLook::Failed(error.to_string());
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("?").to_string();
    let addresses = answers
        .iter()
        .take(MAX_ADDRESSES)
        .map(|a| {
            let answer = a.get("answer");
            let said = match answer.and_then(|x| x.get("kind")).and_then(Value::as_str) {
                Some("present") => Said::Present {
                    ttl: answer.and_then(|x| x.get("ttl")).and_then(Value::as_u64),
                    records: answer
                        .and_then(|x| x.get("ds"))
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len),
                },
                Some("absent") => Said::Absent,
                _ => {
                    let reason = answer.and_then(|x| x.get("reason")).and_then(Value::as_str);
                    let detail = answer
                        .and_then(|x| x.get("detail"))
                        .map(|d| d.as_str().map_or_else(|| d.to_string(), str::to_string));
                    Said::Unknown(match (reason, detail) {
                        (Some(r), Some(d)) => format!("{r}: {d}"),
                        (Some(r), None) => r.to_string(),
                        (None, _) => "unreadable answer".to_string(),
                    })
                }
            };
            Address {
                server: text(a.get("server")),
                addr: text(a.get("addr")),
                said,
            }
        })
        .collect();
    let evidence = parent.and_then(|p| p.get("evidence"));
    let evidence = match (
        evidence.and_then(|e| e.get("kind")).and_then(Value::as_str),
        evidence
            .and_then(|e| e.get("detail"))
            .and_then(Value::as_str),
    ) {
        (Some(kind), Some(detail)) => format!("{kind}: {detail}"),
        (Some(kind), None) => kind.to_string(),
        (None, _) => "unchecked".to_string(),
    };
    ParentLook::Seen {
        parent: text(parent.and_then(|p| p.get("parent"))),
        evidence,
        addresses,
        more: answers.len().saturating_sub(MAX_ADDRESSES),
    }
}

/// The wait `status` names (`waiting::describe`) as a bar: from when it began (the fact
/// its deadline counts from, else the state's start) to its deadline, or on to now when
/// it has none. A settled zone waits for nothing: no bar.
fn current_wait(zone: &Zone, policy: &Policy, waiting: &Waiting, now: i64) -> Option<Bar> {
    if waiting.on == "nobody" {
        return None;
    }
    let f = &zone.facts;
    let until = waiting.until;
    let began = match zone.state {
        Some(State::TtlWait) => f.lifecycle.t_gone,
        Some(State::Enabling) if until.is_some() && until == f.lifecycle.hold_until => {
            f.lifecycle.dnskey_everywhere_at
        }
        Some(State::Enabling)
            if until.is_some() && until == delegation_hold_until(&f.delegation, policy) =>
        {
            f.delegation.delegated_at
        }
        Some(State::AwaitingDs) => f.parent_way.registry_since.or_else(|| ds_request_at(f)),
        Some(State::AwaitingDsRemoval)
            if f.parent_way.registry_since.is_some() && !f.move_in.moving_in =>
        {
            f.parent_way.registry_since
        }
        Some(State::AwaitingDsRemoval) if !f.move_in.moving_in => {
            Some(removal_request_at(&f.parent_way, zone.since))
        }
        _ => None,
    };
    let end = until.map(ms);
    let start = ms(began.unwrap_or(zone.since));
    Some(Bar {
        start: start.min(end.unwrap_or(now)),
        end,
        label: format!("waits on {}: {}", waiting.on, waiting.what),
        class: "tl-wait",
    })
}

/// This lifecycle's TTL waits, each from its fact to its end by the rule the lifecycle
/// uses (`lifecycle::rules`): the propagation hold (rule 4), the delegation hold (rule 9),
/// the disable wait from `T_gone` (rule 2).
fn ttl_waits(zone: &Zone, policy: &Policy) -> Vec<Bar> {
    let f = &zone.facts;
    [
        (
            f.lifecycle.dnskey_everywhere_at,
            f.lifecycle.hold_until,
            "propagation hold (rule 4): every name server serves the key",
            "tl-ttl tl-ttl-propagation",
        ),
        (
            f.delegation.delegated_at,
            delegation_hold_until(&f.delegation, policy),
            "delegation hold (rule 9): the old NS TTL and margin",
            "tl-ttl tl-ttl-delegation",
        ),
        (
            f.lifecycle.t_gone,
            disable_deadline(&f.lifecycle, policy),
            "disable wait (rule 2): T_gone + DS TTL + DNSKEY TTL + margin",
            "tl-ttl tl-ttl-disable",
        ),
    ]
    .into_iter()
    .filter_map(|(from, until, label, class)| {
        let (from, until) = (ms(from?), ms(until?));
        Some(Bar {
            start: from.min(until),
            end: Some(until),
            label: label.to_string(),
            class,
        })
    })
    .collect()
}
