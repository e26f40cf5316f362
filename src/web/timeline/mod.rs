//! A zone's timeline as an SVG picture, rendered on the server: its states over time, the
//! DS at each parent address, and the waits with their deadlines, so that an operator sees
//! at a glance where the time went. Pure: rows in, text out; no clock, no store, no script.
//!
//! Drawn only from what the store keeps, and the legend says which is which:
//! - the history's events: transitions (the state lane), the operator's intents and the
//!   guard's refusals (marks under it);
//! - the zone's facts: this lifecycle's DS marks and TTL waits (entering `disabled`
//!   clears them, so an earlier lifecycle shows only its states);
//! - the last full look: each parent address's DS answer then (earlier looks are not
//!   kept, so there is no per-address history to draw).
//!
//! Bounded whatever the rows hold: the last [`MAX_EVENTS`] events, [`MAX_ADDRESSES`] parent
//! addresses, every text cut to a length and escaped, the reasons in tooltips within a
//! budget, times clamped to years 1970..=9999; the output stays under [`MAX_OUTPUT`].

use std::fmt::Write as _;

use serde_json::Value;

use crate::lifecycle::model::Zone;
use crate::lifecycle::rules::{
    delegation_hold_until, disable_deadline, ds_request_at, removal_request_at,
};
use crate::lifecycle::waiting::Waiting;
use crate::lifecycle::{Policy, State};
use crate::store::{EventKind, EventRow, ZoneRow};
use crate::time::Timestamp;

/// The picture's width in SVG units; its height follows from the lanes.
pub const WIDTH: u32 = 960;
/// The most recent events drawn; older ones are folded into "earlier" (said in the header).
pub const MAX_EVENTS: usize = 2_000;
/// Parent addresses drawn as rows; more are counted in one line.
pub const MAX_ADDRESSES: usize = 24;
/// What the picture's text can add up to at most (checked by a test with hostile rows).
pub const MAX_OUTPUT: usize = 1 << 20;

/// The characters kept of any text from the rows (reasons, names, answers).
const MAX_TEXT: usize = 160;
/// The bytes of escaped event reasons the tooltips may carry in all: past it a tooltip
/// points to the history instead (2,000 reasons at their longest would be megabytes).
const REASON_BUDGET: usize = 128 * 1024;
/// The earliest and latest instants drawn: 1970-01-01 and 9999-12-31T23:59:59.999Z.
const MIN_MS: i64 = 0;
const MAX_MS: i64 = 253_402_300_799_999;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

const PLOT_X0: f64 = 190.0;
const PLOT_X1: f64 = 840.0;
const RIGHT_X: f64 = 848.0;
const ROW: f64 = 18.0;
const FONT: &str = "system-ui, -apple-system, 'Segoe UI', sans-serif";
/// Average advance of a character at the picture's font size, to decide what fits.
const CHAR_W: f64 = 6.2;

const OVERDUE: &str = "#C00000";
const WAIT_FILL: &str = "#D6EAF8";
const WAIT_STROKE: &str = "#0072B2";
const HOLD_FILL: &str = "#FCE8B2";
const HOLD_STROKE: &str = "#9A6B00";
const GRID: &str = "#DDDDDD";
const MUTED: &str = "#555555";

/// What the picture is drawn from: the zone's row and its history as the store reads them
/// (`Store::zone`, `Store::events`, oldest first), the policy the waits are computed
/// with, and the time of the request (pure code never reads the clock).
#[derive(Debug, Clone, Copy)]
pub struct TimelineInput<'a> {
    pub zone: &'a ZoneRow,
    pub events: &'a [EventRow],
    pub policy: &'a Policy,
    pub now: Timestamp,
}

/// The zone's timeline: one self-contained `<svg>` element (with its `<title>`), fixed
/// width, presentation attributes inline and a `tl-…` class on every part for the page's
/// stylesheet.
pub fn render(input: &TimelineInput<'_>) -> String {
    let model = Model::build(input);
    let mut svg = Svg::default();
    model.draw(&mut svg);
    svg.finish(&model)
}

/// A time as drawn: milliseconds within 1970..=9999 (absurd stored times pinned there).
fn ms(t: Timestamp) -> i64 {
    t.0.clamp(MIN_MS, MAX_MS)
}

fn stamp(ms: i64) -> String {
    Timestamp(ms).to_string()
}

/// `3d 4h`, `2h 5m`, `12m`, `45s`: a duration as the operator reads it, two units at most.
fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    let (d, h, m) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, 0) => format!("{h}h"),
        (0, h, m) => format!("{h}h {m}m"),
        (d, 0, _) => format!("{d}d"),
        (d, h, _) => format!("{d}d {h}h"),
    }
}

/// Text from the rows made safe for XML: cut to `max` characters, characters XML 1.0
/// cannot carry replaced (an escaped control character is still ill-formed), the five
/// markup characters escaped.
fn esc(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 2));
    for (i, c) in text.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// The fill and text colour of a state: the Okabe-Ito palette (distinguishable with the
/// common colour-vision deficiencies), text at 4.5:1 or better; the name is written too.
fn state_colours(state: Option<&str>) -> (&'static str, &'static str) {
    match state.and_then(|s| s.parse::<State>().ok()) {
        Some(State::Disabled) => ("#BBBBBB", "#000000"),
        Some(State::AwaitingDelegation) => ("#CC79A7", "#000000"),
        Some(State::Enabling) => ("#56B4E9", "#000000"),
        Some(State::AwaitingDs) => ("#E69F00", "#000000"),
        Some(State::DsObserved) => ("#F0E442", "#000000"),
        Some(State::Active) => ("#009E73", "#000000"),
        Some(State::AwaitingDsRemoval) => ("#D55E00", "#000000"),
        Some(State::TtlWait) => ("#0072B2", "#FFFFFF"),
        Some(State::Disabling) => ("#6A3D9A", "#FFFFFF"),
        None if state.is_none() => ("#F2F2F2", "#000000"),
        None => ("#888888", "#000000"),
    }
}

fn state_name(state: Option<&str>) -> &str {
    state.unwrap_or("not yet observed")
}

/// Time to x: linear over `t0..t1` (never empty), clamped to the plot.
#[derive(Debug, Clone, Copy)]
struct Scale {
    t0: i64,
    t1: i64,
}

impl Scale {
    fn x(&self, t: i64) -> f64 {
        let t = t.clamp(self.t0, self.t1);
        PLOT_X0 + (t - self.t0) as f64 * (PLOT_X1 - PLOT_X0) / (self.t1 - self.t0) as f64
    }

    fn shows(&self, t: i64) -> bool {
        (self.t0..=self.t1).contains(&t)
    }
}

/// One stretch of the state lane: `state` from `start` to `end` (`None`: before the zone's
/// first observation).
#[derive(Debug)]
struct Segment<'a> {
    state: Option<&'a str>,
    start: i64,
    end: i64,
    /// The reason of the transition that entered it, if drawn.
    reason: Option<&'a str>,
    /// The state the zone is in now: it runs to now.
    current: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MarkKind {
    /// Every parent address published the DS.
    Everywhere,
    /// Every parent address answered "no DS" (T_gone).
    Gone,
    /// The last look at which some parent address published a DS.
    LastSeen,
}

#[derive(Debug)]
struct Mark {
    at: i64,
    kind: MarkKind,
    /// Where it comes from, for the tooltip.
    source: &'static str,
}

#[derive(Debug)]
enum Said {
    Present { ttl: Option<u64>, records: usize },
    Absent,
    Unknown(String),
}

#[derive(Debug)]
struct Address {
    server: String,
    addr: String,
    said: Said,
}

/// The parent's answers at the zone's last full look.
#[derive(Debug)]
enum ParentLook {
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
struct Bar {
    start: i64,
    end: Option<i64>,
    label: String,
    class: &'static str,
}

#[derive(Debug)]
struct Model<'a> {
    input: &'a TimelineInput<'a>,
    now: i64,
    scale: Scale,
    segments: Vec<Segment<'a>>,
    /// Intents and guard refusals among the events drawn.
    marks_events: Vec<&'a EventRow>,
    folded: usize,
    ds_marks: Vec<Mark>,
    parent: ParentLook,
    look_at: Option<i64>,
    waiting: Waiting,
    wait: Option<Bar>,
    hold: Option<Bar>,
    ttl_waits: Vec<Bar>,
}

impl<'a> Model<'a> {
    fn build(input: &'a TimelineInput<'a>) -> Self {
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
        let hold = zone.facts.held_by.as_ref().map(|hold| Bar {
            start: ms(zone.facts.held_since.unwrap_or(zone.since)).min(now),
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
        (f.ds_first_seen_at, MarkKind::Everywhere),
        (f.t_gone, MarkKind::Gone),
        (f.ds_seen_at, MarkKind::LastSeen),
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
        Some(State::TtlWait) => f.t_gone,
        Some(State::Enabling) if until.is_some() && until == f.hold_until => f.dnskey_everywhere_at,
        Some(State::Enabling) if until.is_some() && until == delegation_hold_until(f, policy) => {
            f.delegated_at
        }
        Some(State::AwaitingDs) => f.registry_since.or_else(|| ds_request_at(f)),
        Some(State::AwaitingDsRemoval) if f.registry_since.is_some() && !f.moving_in => {
            f.registry_since
        }
        Some(State::AwaitingDsRemoval) if !f.moving_in => Some(removal_request_at(f, zone.since)),
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
            f.dnskey_everywhere_at,
            f.hold_until,
            "propagation hold (rule 4): every name server serves the key",
            "tl-ttl tl-ttl-propagation",
        ),
        (
            f.delegated_at,
            delegation_hold_until(f, policy),
            "delegation hold (rule 9): the old NS TTL and margin",
            "tl-ttl tl-ttl-delegation",
        ),
        (
            f.t_gone,
            disable_deadline(f, policy),
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

/// Nice tick steps, from ten seconds to a millennium.
const STEPS: &[i64] = &[
    10_000,
    30_000,
    MINUTE,
    5 * MINUTE,
    15 * MINUTE,
    30 * MINUTE,
    HOUR,
    3 * HOUR,
    6 * HOUR,
    12 * HOUR,
    DAY,
    2 * DAY,
    7 * DAY,
    14 * DAY,
    30 * DAY,
    90 * DAY,
    180 * DAY,
    365 * DAY,
    5 * 365 * DAY,
    10 * 365 * DAY,
    100 * 365 * DAY,
    1000 * 365 * DAY,
];

/// At most eight ticks on whole steps of UTC time, labelled as fits the step.
fn ticks(scale: Scale) -> Vec<(i64, String)> {
    let span = scale.t1 - scale.t0;
    let step = STEPS
        .iter()
        .copied()
        .find(|s| span / s <= 7)
        .unwrap_or(span / 7 + 1);
    let mut at = scale.t0.div_euclid(step) * step;
    if at < scale.t0 {
        at += step;
    }
    let mut out = Vec::new();
    while at <= scale.t1 && out.len() < 8 {
        let text = stamp(at);
        let label = if step >= 365 * DAY {
            text[..4].to_string()
        } else if step >= DAY {
            text[..10].to_string()
        } else if step >= MINUTE {
            format!("{} {}", &text[5..10], &text[11..16])
        } else {
            text[11..19].to_string()
        };
        out.push((at, label));
        at += step;
    }
    out
}

/// The SVG text as it is written, with the running height.
#[derive(Default)]
struct Svg {
    body: String,
    y: f64,
    reasons_left: usize,
}

impl Svg {
    fn text(&mut self, class: &str, x: f64, y: f64, anchor: &str, fill: &str, text: &str) {
        let _ = write!(
            self.body,
            r#"<text class="{class}" x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" fill="{fill}">{text}</text>"#
        );
    }

    /// A rectangle with its tooltip; `extra` holds further attributes, already safe.
    #[allow(clippy::too_many_arguments)]
    fn rect(&mut self, class: &str, x: f64, y: f64, w: f64, h: f64, extra: &str, title: &str) {
        let _ = write!(
            self.body,
            r#"<rect class="{class}" x="{x:.2}" y="{y:.1}" width="{w:.2}" height="{h:.1}" {extra}><title>{title}</title></rect>"#
        );
    }

    fn line(&mut self, class: &str, x1: f64, y1: f64, x2: f64, y2: f64, extra: &str) {
        let _ = write!(
            self.body,
            r#"<line class="{class}" x1="{x1:.2}" y1="{y1:.1}" x2="{x2:.2}" y2="{y2:.1}" {extra}/>"#
        );
    }

    fn path(&mut self, class: &str, d: &str, extra: &str, title: &str) {
        let _ = write!(
            self.body,
            r#"<path class="{class}" d="{d}" {extra}><title>{title}</title></path>"#
        );
    }

    /// An event's reason for a tooltip, while the budget lasts.
    fn reason(&mut self, reason: &str) -> String {
        let text = esc(reason, MAX_TEXT);
        if text.len() <= self.reasons_left {
            self.reasons_left -= text.len();
            text
        } else {
            "(see the history)".to_string()
        }
    }

    /// A lane's name at the left, and a rule above it.
    fn lane(&mut self, name: &str) {
        self.y += 10.0;
        self.line(
            "tl-lane-rule",
            8.0,
            self.y,
            f64::from(WIDTH) - 8.0,
            self.y,
            &format!(r#"stroke="{GRID}""#),
        );
        self.y += 14.0;
        self.text("tl-lane-name", 8.0, self.y, "start", "#000000", name);
        self.y += 4.0;
    }

    fn finish(self, model: &Model<'_>) -> String {
        let zone = &model.input.zone.zone;
        let height = self.y.ceil() as u32 + 8;
        let state = state_name(zone.state.map(State::as_str));
        let label = esc(
            &format!(
                "Timeline of {}: {state} since {}; waits on {}: {}",
                zone.name.as_str(),
                Timestamp(ms(zone.since)),
                model.waiting.on,
                model.waiting.what
            ),
            2 * MAX_TEXT,
        );
        let mut out = String::with_capacity(self.body.len() + 1024);
        let _ = write!(
            out,
            r##"<svg xmlns="http://www.w3.org/2000/svg" class="tl" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{label}" font-family="{FONT}" font-size="11"><title>{label}</title><rect class="tl-background" x="0" y="0" width="{WIDTH}" height="{height}" fill="#FFFFFF"/>"##
        );
        out.push_str(&self.body);
        out.push_str("</svg>");
        out
    }
}

impl Model<'_> {
    fn draw(&self, svg: &mut Svg) {
        svg.reasons_left = REASON_BUDGET;
        self.header(svg);
        let top = svg.y;
        self.state_lane(svg);
        self.ds_lane(svg);
        self.wait_lane(svg);
        let bottom = svg.y + 6.0;
        self.now_line(svg, top, bottom);
        self.axis(svg);
        self.legend(svg);
    }

    fn header(&self, svg: &mut Svg) {
        let zone = &self.input.zone.zone;
        svg.y = 20.0;
        let name = esc(zone.name.as_str(), MAX_TEXT);
        let _ = write!(
            svg.body,
            r##"<text class="tl-zone" x="8" y="20" font-size="15" font-weight="bold" fill="#000000">{name}</text>"##
        );
        let state = state_name(zone.state.map(State::as_str));
        let mut line = format!(
            "{state} since {} · intent {} · now {}",
            Timestamp(ms(zone.since)),
            zone.intent.as_str(),
            Timestamp(self.now)
        );
        if self.folded > 0 {
            let _ = write!(
                line,
                " · {} earlier events not drawn (see the history)",
                self.folded
            );
        }
        svg.y += 16.0;
        svg.text(
            "tl-summary",
            8.0,
            svg.y,
            "start",
            MUTED,
            &esc(&line, 2 * MAX_TEXT),
        );
    }

    fn state_lane(&self, svg: &mut Svg) {
        svg.lane("State");
        let y = svg.y + 2.0;
        let h = 26.0;
        if self.segments.is_empty() {
            svg.text(
                "tl-empty",
                PLOT_X0,
                y + 17.0,
                "start",
                MUTED,
                "no history yet: the zone was never observed",
            );
        }
        for s in &self.segments {
            let (fill, ink) = state_colours(s.state);
            let x = self.scale.x(s.start);
            // Widths are in proportion to durations; a stretch too short to see is drawn
            // as a hairline so that it can still be found and hovered.
            let w = (self.scale.x(s.end) - x).max(0.5);
            let name = state_name(s.state);
            let to = if s.current {
                format!("now ({})", stamp(s.end))
            } else {
                stamp(s.end)
            };
            let mut title = format!(
                "{}: {} → {to} ({})",
                esc(name, MAX_TEXT),
                stamp(s.start),
                duration(s.end - s.start)
            );
            if let Some(reason) = s.reason {
                let _ = write!(title, "; entered: {}", svg.reason(reason));
            }
            let class = format!("tl-state tl-state-{}", esc(name, 40).replace(' ', "-"));
            let extra = if s.state.is_none() {
                format!(r##"fill="{fill}" stroke="#888888" stroke-dasharray="3 2""##)
            } else {
                format!(r##"fill="{fill}" stroke="#FFFFFF" stroke-width="0.5""##)
            };
            svg.rect(&class, x, y, w, h, &extra, &title);
            let label = esc(name, 40);
            if w >= label.chars().count() as f64 * CHAR_W + 8.0 {
                svg.text("tl-state-label", x + 4.0, y + 17.0, "start", ink, &label);
            }
        }
        svg.y = y + h + 4.0;
        // The operator's intents and the guard's refusals, under the states.
        let y = svg.y + 8.0;
        for e in &self.marks_events {
            let x = self.scale.x(ms(e.at));
            let title = format!(
                "{} {}: {}",
                stamp(ms(e.at)),
                if e.kind == EventKind::Guard {
                    "safety guard"
                } else {
                    "operator"
                },
                svg.reason(&e.reason)
            );
            if e.kind == EventKind::Guard {
                svg.path(
                    "tl-guard",
                    &format!("M{:.2} {:.1}l-4 -7h8z", x, y + 1.0),
                    &format!(r#"fill="{OVERDUE}""#),
                    &title,
                );
            } else {
                svg.path(
                    "tl-intent",
                    &format!("M{:.2} {:.1}l-4 -7h8z", x, y + 1.0),
                    r##"fill="#000000""##,
                    &title,
                );
            }
        }
        svg.y = y + 4.0;
    }

    fn ds_lane(&self, svg: &mut Svg) {
        svg.lane("DS at the parent");
        // Every address together: the marks from the facts and the transitions.
        svg.y += ROW;
        let y = svg.y;
        svg.text(
            "tl-row-name",
            16.0,
            y - 4.0,
            "start",
            MUTED,
            "every address",
        );
        svg.line(
            "tl-row-rule",
            PLOT_X0,
            y - 8.0,
            PLOT_X1,
            y - 8.0,
            &format!(r#"stroke="{GRID}""#),
        );
        for m in self.ds_marks.iter().filter(|m| self.scale.shows(m.at)) {
            let x = self.scale.x(m.at);
            let (class, what, d, fill) = match m.kind {
                MarkKind::Everywhere => (
                    "tl-mark tl-mark-everywhere",
                    "DS published at every parent address",
                    format!("M{x:.2} {:.1}l5 5l-5 5l-5 -5z", y - 13.0),
                    "#009E73",
                ),
                MarkKind::Gone => (
                    "tl-mark tl-mark-gone",
                    "T_gone: every parent address answered no DS",
                    format!("M{:.2} {:.1}h10l-5 9z", x - 5.0, y - 13.0),
                    "#0072B2",
                ),
                MarkKind::LastSeen => (
                    "tl-mark tl-mark-last-seen",
                    "the last look at which some parent address published a DS",
                    format!("M{:.2} {:.1}h6v6h-6z", x - 3.0, y - 11.0),
                    "#777777",
                ),
            };
            let title = format!("{} {what} (from {})", stamp(m.at), m.source);
            svg.path(class, &d, &format!(r#"fill="{fill}""#), &title);
        }
        let look = self
            .look_at
            .map(|at| format!("the last full look, {}", stamp(at)))
            .unwrap_or_else(|| "the last full look".to_string());
        match &self.parent {
            ParentLook::Never => {
                svg.y += ROW;
                svg.text(
                    "tl-row-name",
                    16.0,
                    svg.y - 4.0,
                    "start",
                    MUTED,
                    "no look at the parent yet",
                );
            }
            ParentLook::Failed(error) => {
                svg.y += ROW;
                let text = esc(
                    &format!("the parent could not be asked at {look}: {error}"),
                    MAX_TEXT,
                );
                svg.text(
                    "tl-row-name tl-ds-failed",
                    16.0,
                    svg.y - 4.0,
                    "start",
                    MUTED,
                    &text,
                );
            }
            ParentLook::Seen {
                parent,
                evidence,
                addresses,
                more,
            } => {
                for a in addresses {
                    svg.y += ROW;
                    self.address_row(svg, a, parent, evidence, &look);
                }
                if *more > 0 {
                    svg.y += ROW;
                    let text = format!("and {more} more addresses (see status)");
                    svg.text("tl-row-name", 16.0, svg.y - 4.0, "start", MUTED, &text);
                }
            }
        }
    }

    fn address_row(&self, svg: &mut Svg, a: &Address, parent: &str, evidence: &str, look: &str) {
        let y = svg.y;
        // The address first: it is what tells two rows of one server apart.
        let name = format!("{} {}", a.addr, a.server);
        svg.text(
            "tl-row-name",
            16.0,
            y - 4.0,
            "start",
            "#000000",
            &esc(&name, 28),
        );
        svg.line(
            "tl-row-rule",
            PLOT_X0,
            y - 8.0,
            PLOT_X1,
            y - 8.0,
            &format!(r#"stroke="{GRID}""#),
        );
        let (class, word, detail, extra) = match &a.said {
            Said::Present { ttl, records } => (
                "tl-ds tl-ds-present",
                "present".to_string(),
                format!(
                    "{records} DS record{}{}",
                    if *records == 1 { "" } else { "s" },
                    ttl.map(|t| format!(", TTL {t}s")).unwrap_or_default()
                ),
                r##"fill="#009E73" stroke="#004D38""##,
            ),
            Said::Absent => (
                "tl-ds tl-ds-absent",
                "absent".to_string(),
                "no DS".to_string(),
                r##"fill="#FFFFFF" stroke="#555555""##,
            ),
            Said::Unknown(why) => (
                "tl-ds tl-ds-unknown",
                "unknown".to_string(),
                why.clone(),
                r##"fill="#E69F00" stroke="#7A5400" stroke-dasharray="2 1""##,
            ),
        };
        let title = esc(
            &format!(
                "{} ({}) for the parent {parent}, at {look}: {word}: {detail}; evidence {evidence}",
                a.server, a.addr
            ),
            2 * MAX_TEXT,
        );
        // At the time of the look, and in words at the right end.
        if let Some(at) = self.look_at.filter(|at| self.scale.shows(*at)) {
            svg.rect(
                class,
                self.scale.x(at) - 4.0,
                y - 12.0,
                8.0,
                8.0,
                extra,
                &title,
            );
        }
        svg.rect(class, RIGHT_X, y - 12.0, 8.0, 8.0, extra, &title);
        let text = match &a.said {
            Said::Present { ttl: Some(t), .. } => format!("present, TTL {t}s"),
            _ => word,
        };
        svg.text(
            "tl-ds-word",
            RIGHT_X + 12.0,
            y - 4.0,
            "start",
            "#000000",
            &esc(&text, 20),
        );
    }

    fn wait_lane(&self, svg: &mut Svg) {
        svg.lane("Waits");
        svg.y += ROW + 6.0;
        match &self.wait {
            Some(bar) => self.bar(svg, "now", bar, WAIT_FILL, WAIT_STROKE, true),
            None => {
                let text = esc(&format!("now: {}", self.waiting.what), MAX_TEXT);
                svg.text(
                    "tl-row-name tl-wait-none",
                    16.0,
                    svg.y - 6.0,
                    "start",
                    MUTED,
                    &text,
                );
            }
        }
        if let Some(hold) = &self.hold {
            svg.y += ROW + 6.0;
            self.bar(svg, "held", hold, HOLD_FILL, HOLD_STROKE, false);
        }
        for ttl in &self.ttl_waits {
            svg.y += ROW + 6.0;
            self.bar(svg, "TTL wait", ttl, "#E8F3E8", "#2E7D32", false);
        }
    }

    /// One wait: its bar from start to end (or open to now), with its deadline; past it
    /// (`overdue`), the stretch from the deadline to now in red, marked.
    fn bar(&self, svg: &mut Svg, row: &str, bar: &Bar, fill: &str, stroke: &str, overdue: bool) {
        let y = svg.y;
        svg.text("tl-row-name", 16.0, y - 6.0, "start", MUTED, row);
        let x0 = self.scale.x(bar.start);
        let end = bar.end.unwrap_or(self.now.max(bar.start));
        let x1 = self.scale.x(end);
        let label = esc(&bar.label, MAX_TEXT);
        let title = match bar.end {
            Some(until) => format!(
                "{label}: {} → {} ({})",
                stamp(bar.start),
                stamp(until),
                duration(until - bar.start)
            ),
            None => format!(
                "{label}: since {} ({} so far), no deadline",
                stamp(bar.start),
                duration(self.now - bar.start)
            ),
        };
        let dash = if bar.end.is_none() {
            r#" stroke-dasharray="4 2""#
        } else {
            ""
        };
        svg.rect(
            bar.class,
            x0,
            y - 14.0,
            (x1 - x0).max(0.5),
            12.0,
            &format!(r#"fill="{fill}" stroke="{stroke}"{dash}"#),
            &title,
        );
        // The bar's words after it, else before it, else over it.
        let words = esc(&bar.label, 60);
        let width = bar.label.chars().count().min(61) as f64 * CHAR_W;
        let (tx, anchor) = if x1 + 4.0 + width <= f64::from(WIDTH) - 8.0 {
            (x1 + 4.0, "start")
        } else if x0 - 4.0 - width >= PLOT_X0 {
            (x0 - 4.0, "end")
        } else {
            (x0 + 4.0, "start")
        };
        svg.text("tl-bar-label", tx, y - 4.0, anchor, "#000000", &words);
        if let Some(until) = bar.end {
            if until > self.scale.t1 {
                svg.text("tl-beyond", PLOT_X1 + 2.0, y - 4.0, "start", stroke, "▸");
            }
            if overdue && self.now > until {
                let xo = self.scale.x(until);
                let xn = self.scale.x(self.now);
                let title = format!(
                    "overdue by {}: the deadline was {}",
                    duration(self.now - until),
                    stamp(until)
                );
                svg.rect(
                    "tl-overdue",
                    xo,
                    y - 14.0,
                    (xn - xo).max(0.5),
                    12.0,
                    &format!(r#"fill="{OVERDUE}" fill-opacity="0.35" stroke="{OVERDUE}""#),
                    &title,
                );
                svg.path(
                    "tl-overdue-mark",
                    &format!("M{xo:.2} {:.1}l5 -8h-10z", y - 14.0),
                    &format!(r#"fill="{OVERDUE}""#),
                    &title,
                );
                svg.text(
                    "tl-overdue-label",
                    xo,
                    y + 8.0,
                    "middle",
                    OVERDUE,
                    &format!("overdue {}", duration(self.now - until)),
                );
            }
        }
    }

    fn now_line(&self, svg: &mut Svg, top: f64, bottom: f64) {
        let x = self.scale.x(self.now);
        svg.line(
            "tl-now",
            x,
            top,
            x,
            bottom,
            r##"stroke="#000000" stroke-dasharray="2 2""##,
        );
        svg.text("tl-now-label", x, top - 2.0, "middle", "#000000", "now");
    }

    fn axis(&self, svg: &mut Svg) {
        let y = svg.y + 8.0;
        svg.line("tl-axis", PLOT_X0, y, PLOT_X1, y, r##"stroke="#000000""##);
        for (at, label) in ticks(self.scale) {
            let x = self.scale.x(at);
            svg.line("tl-tick", x, y, x, y + 4.0, r##"stroke="#000000""##);
            svg.text("tl-tick-label", x, y + 15.0, "middle", "#000000", &label);
        }
        svg.text(
            "tl-axis-name",
            PLOT_X1 + 8.0,
            y + 4.0,
            "start",
            MUTED,
            "UTC",
        );
        svg.y = y + 20.0;
    }

    fn legend(&self, svg: &mut Svg) {
        let lines = [
            "State: one stretch per state, from the transitions in the history (▼ black: the operator's intent, ▼ red: the safety guard refused).",
            "DS at the parent: each parent address's answer at the last full look (earlier answers are not kept); ◆ DS at every address, ▼ gone everywhere (T_gone), ■ last seen.",
            "Waits: what the zone waits for now, to its deadline (red past it: overdue); a hold; this lifecycle's TTL waits by the lifecycle's rules.",
        ];
        for line in lines {
            svg.y += 14.0;
            svg.text(
                "tl-legend",
                8.0,
                svg.y,
                "start",
                MUTED,
                &esc(line, 2 * MAX_TEXT),
            );
        }
        // The colours of the states drawn, each named.
        svg.y += 10.0;
        let mut x = 8.0;
        let mut seen: Vec<Option<&str>> = Vec::new();
        for s in &self.segments {
            if seen.contains(&s.state) || seen.len() >= 12 {
                continue;
            }
            seen.push(s.state);
            let name = esc(state_name(s.state), 40);
            let w = name.chars().count() as f64 * CHAR_W + 18.0;
            if x + w > f64::from(WIDTH) - 8.0 {
                x = 8.0;
                svg.y += 14.0;
            }
            let (fill, _) = state_colours(s.state);
            let _ = write!(
                svg.body,
                r##"<rect class="tl-legend-swatch" x="{x:.1}" y="{:.1}" width="10" height="10" fill="{fill}" stroke="#888888"/>"##,
                svg.y
            );
            svg.text(
                "tl-legend",
                x + 14.0,
                svg.y + 9.0,
                "start",
                "#000000",
                &name,
            );
            x += w + 8.0;
        }
        svg.y += 12.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::{DsAnswer, Evidence, ParentView, ServerAnswer, UnknownReason};
    use crate::dnssec::DsLine;
    use crate::lifecycle::facts::{Hold, Party};
    use crate::lifecycle::{Facts, Intent};
    use crate::zone_name::ZoneName;

    /// 2026-06-25T09:14:02Z.
    const T0: i64 = 1_782_378_842_000;
    const DS: &str = "example.com. 3600 IN DS 26191 13 2 135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07";

    fn row(state: Option<State>, since: i64, facts: Facts) -> ZoneRow {
        ZoneRow {
            zone: Zone {
                name: ZoneName::from_canonical("example.com.".to_string()).unwrap(),
                intent: Intent::Enabled,
                ds_never_submitted: false,
                state,
                since: Timestamp(since),
                facts,
            },
            next_check_at: Timestamp(since),
            last_observed_at: None,
            sampled_at: None,
            last_observation: None,
            version: 1,
            lease: None,
        }
    }

    fn event(
        at: i64,
        kind: EventKind,
        from: Option<&str>,
        to: Option<&str>,
        reason: &str,
    ) -> EventRow {
        EventRow {
            id: 0,
            zone: "example.com.".to_string(),
            at: Timestamp(at),
            kind,
            from: from.map(str::to_string),
            to: to.map(str::to_string),
            reason: reason.to_string(),
            repeats: 0,
            last_seen: None,
            holder: None,
            epoch: None,
        }
    }

    fn go(at: i64, from: Option<&str>, to: &str) -> EventRow {
        event(at, EventKind::Transition, from, Some(to), "because")
    }

    fn draw(zone: &ZoneRow, events: &[EventRow], now: i64) -> String {
        let policy = Policy::default();
        render(&TimelineInput {
            zone,
            events,
            policy: &policy,
            now: Timestamp(now),
        })
    }

    /// The picture parsed as XML, its root checked: an accessible, self-contained SVG
    /// whose every coordinate is a finite number inside it.
    fn parse(svg: &str) -> roxmltree::Document<'_> {
        let doc = roxmltree::Document::parse(svg)
            .unwrap_or_else(|e| panic!("not well-formed XML: {e}\n{svg}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        assert_eq!(
            root.tag_name().namespace(),
            Some("http://www.w3.org/2000/svg")
        );
        assert_eq!(root.attribute("role"), Some("img"));
        assert!(root.attribute("aria-label").is_some_and(|l| !l.is_empty()));
        assert_eq!(root.attribute("width"), Some("960"));
        let height: f64 = root.attribute("height").unwrap().parse().unwrap();
        assert!(
            root.first_element_child()
                .is_some_and(|t| t.has_tag_name("title") && !t.text().unwrap_or("").is_empty())
        );
        assert!(!svg.contains("<script"), "no script, ever");
        for node in doc.descendants().filter(|n| n.is_element()) {
            for attr in ["x", "y", "x1", "x2", "y1", "y2", "width", "height"] {
                if let Some(v) = node.attribute(attr) {
                    let v: f64 = v.parse().unwrap_or_else(|_| panic!("{attr}={v:?}"));
                    assert!(v.is_finite() && v >= -10.0, "{attr}={v} in {node:?}");
                    let limit = if attr.starts_with('y') || attr == "height" {
                        height
                    } else {
                        f64::from(WIDTH)
                    };
                    assert!(v <= limit + 1.0, "{attr}={v} beyond {limit} in {node:?}");
                }
            }
        }
        doc
    }

    fn with_class<'a, 'i>(
        doc: &'a roxmltree::Document<'i>,
        class: &str,
    ) -> Vec<roxmltree::Node<'a, 'i>> {
        doc.descendants()
            .filter(|n| {
                n.attribute("class")
                    .is_some_and(|c| c.split_whitespace().any(|c| c == class))
            })
            .collect()
    }

    fn num(node: &roxmltree::Node<'_, '_>, attr: &str) -> f64 {
        node.attribute(attr).unwrap().parse().unwrap()
    }

    fn title(node: &roxmltree::Node<'_, '_>) -> String {
        node.children()
            .find(|c| c.has_tag_name("title"))
            .and_then(|t| t.text())
            .unwrap_or_default()
            .to_string()
    }

    #[test]
    fn state_widths_are_in_proportion_to_durations() {
        let events = [
            go(T0, None, "disabled"),
            go(T0 + HOUR, Some("disabled"), "enabling"),
            go(T0 + 3 * HOUR, Some("enabling"), "awaiting_ds"),
        ];
        let zone = row(Some(State::AwaitingDs), T0 + 3 * HOUR, Facts::default());
        let svg = draw(&zone, &events, T0 + 6 * HOUR);
        let doc = parse(&svg);
        let segments = with_class(&doc, "tl-state");
        let names: Vec<_> = segments
            .iter()
            .map(|s| s.attribute("class").unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "tl-state tl-state-disabled",
                "tl-state tl-state-enabling",
                "tl-state tl-state-awaiting_ds"
            ]
        );
        let widths: Vec<f64> = segments.iter().map(|s| num(s, "width")).collect();
        let total = PLOT_X1 - PLOT_X0;
        for (w, hours) in widths.iter().zip([1.0, 2.0, 3.0]) {
            assert!((w / total - hours / 6.0).abs() < 0.001, "{widths:?}");
        }
        // Side by side, from the first event to now.
        assert!((num(&segments[0], "x") - PLOT_X0).abs() < 0.01);
        for pair in segments.windows(2) {
            let end = num(&pair[0], "x") + num(&pair[0], "width");
            assert!((end - num(&pair[1], "x")).abs() < 0.02);
        }
        assert!(
            title(&segments[1]).contains("(2h)"),
            "{}",
            title(&segments[1])
        );
        assert!(title(&segments[2]).contains("now"));
        // The name is written where it fits.
        assert!(
            with_class(&doc, "tl-state-label")
                .iter()
                .any(|t| t.text() == Some("awaiting_ds"))
        );
    }

    /// A zone in `ttl_wait` since an hour before `T0`, its wait restarted at `T0` by a gap
    /// in looks (rule 2): `T_gone` at `T0`, both TTLs an hour, the default margin an hour.
    fn in_ttl_wait() -> (ZoneRow, Vec<EventRow>, Timestamp) {
        let facts = Facts {
            t_gone: Some(Timestamp(T0)),
            gone_confirmed_at: Some(Timestamp(T0)),
            max_ds_ttl: Some(3600),
            max_dnskey_ttl: Some(3600),
            ..Facts::default()
        };
        let until = disable_deadline(&facts, &Policy::default()).unwrap();
        assert_eq!(until, Timestamp(T0 + 3 * HOUR));
        let events = vec![
            go(T0 - 2 * DAY, None, "active"),
            go(T0 - DAY, Some("active"), "awaiting_ds_removal"),
            go(T0 - HOUR, Some("awaiting_ds_removal"), "ttl_wait"),
        ];
        (row(Some(State::TtlWait), T0 - HOUR, facts), events, until)
    }

    #[test]
    fn overdue_is_marked_exactly_past_the_deadline() {
        let (zone, events, until) = in_ttl_wait();
        for (now, overdue) in [
            (until.0 - 1, false),
            (until.0, false),
            (until.0 + 1, true),
            (until.0 + DAY, true),
        ] {
            let svg = draw(&zone, &events, now);
            let doc = parse(&svg);
            assert_eq!(
                !with_class(&doc, "tl-overdue").is_empty(),
                overdue,
                "now {now}"
            );
            assert_eq!(!with_class(&doc, "tl-overdue-mark").is_empty(), overdue);
            // The wait itself, from T_gone to its deadline, is there either way.
            let wait = &with_class(&doc, "tl-wait")[0];
            assert!(title(wait).contains(&format!("{} → {until}", Timestamp(T0))));
        }
    }

    #[test]
    fn the_disable_wait_is_the_lifecycles_rule() {
        let (zone, events, until) = in_ttl_wait();
        let svg = draw(&zone, &events, T0 + HOUR);
        let doc = parse(&svg);
        let bar = &with_class(&doc, "tl-ttl-disable")[0];
        assert!(title(bar).contains(&format!("{} → {until} (3h)", Timestamp(T0))));
        // Drawn to scale: the axis runs from the first event to the deadline (the future
        // part no longer than the past).
        let x = |t: i64| {
            PLOT_X0
                + (t - (T0 - 2 * DAY)) as f64 * (PLOT_X1 - PLOT_X0)
                    / (until.0 - (T0 - 2 * DAY)) as f64
        };
        assert!((num(bar, "x") - x(T0)).abs() < 0.01);
        assert!((num(bar, "x") + num(bar, "width") - x(until.0)).abs() < 0.02);
        assert!(with_class(&doc, "tl-overdue").is_empty());
    }

    #[test]
    fn text_from_the_rows_is_escaped() {
        let evil = "<script>alert(\"x\")</script> & 'q' \u{1}";
        let events = [
            event(T0, EventKind::Intent, None, None, evil),
            event(T0 + 1, EventKind::Transition, None, Some("active"), evil),
            event(
                T0 + 2,
                EventKind::Guard,
                Some("active"),
                Some("active"),
                evil,
            ),
            // A state name the code does not know (a newer daemon, a damaged row).
            event(
                T0 + 3,
                EventKind::Transition,
                Some("active"),
                Some("<b>\"odd\"</b>"),
                evil,
            ),
        ];
        let mut zone = row(
            Some(State::Active),
            T0,
            Facts {
                held_by: Some(Hold::new(evil, Party::Provider)),
                ..Facts::default()
            },
        );
        zone.last_observed_at = Some(Timestamp(T0));
        zone.last_observation = Some(serde_json::json!({"parent": {"parent": "com.", "answers": [
            {"server": "<ns>&\"1\"", "addr": "192.0.2.1", "answer": {"kind": "unknown", "reason": "malformed", "detail": evil}}
        ]}}));
        let svg = draw(&zone, &events, T0 + HOUR);
        let doc = parse(&svg);
        assert!(!svg.contains("<script>") && !svg.contains("<b>") && !svg.contains("<ns>"));
        assert!(!svg.contains('\u{1}'));
        // What the reader sees is the text as it was, not markup.
        let texts: Vec<String> = doc
            .descendants()
            .filter_map(|n| n.text())
            .map(str::to_string)
            .collect();
        assert!(
            texts
                .iter()
                .any(|t| t.contains("<script>alert(\"x\")</script> & 'q'"))
        );
        assert!(texts.iter().any(|t| t.contains("<ns>&\"1\"")));
        assert!(texts.iter().any(|t| t.contains("held: <script>")));
        assert!(texts.iter().any(|t| t.contains("<b>\"odd\"</b>")));
    }

    #[test]
    fn escaping_cuts_and_replaces() {
        assert_eq!(esc("a<b>&\"c\"'", 100), "a&lt;b&gt;&amp;&quot;c&quot;&#39;");
        assert_eq!(esc("abcdef", 3), "abc…");
        assert_eq!(esc("a\u{0}b\u{FFFF}\nc", 100), "a\u{FFFD}b\u{FFFD} c");
    }

    #[test]
    fn degenerate_histories_render() {
        let cases: Vec<(&str, ZoneRow, Vec<EventRow>, i64)> = vec![
            (
                "never observed, no events",
                row(None, T0, Facts::default()),
                vec![],
                T0,
            ),
            (
                "an intent before the first observation",
                row(None, T0, Facts::default()),
                vec![event(
                    T0,
                    EventKind::Intent,
                    None,
                    None,
                    "operator asked to enable DNSSEC",
                )],
                T0 + HOUR,
            ),
            (
                "a state without events",
                row(Some(State::Active), T0, Facts::default()),
                vec![],
                T0 + DAY,
            ),
            (
                "one event",
                row(Some(State::Disabled), T0, Facts::default()),
                vec![go(T0, None, "disabled")],
                T0 + 5,
            ),
            (
                "all at one millisecond, now too",
                row(Some(State::Active), T0, Facts::default()),
                vec![
                    go(T0, None, "disabled"),
                    go(T0, Some("disabled"), "enabling"),
                    go(T0, Some("enabling"), "active"),
                ],
                T0,
            ),
            (
                "a clock ahead: events after now, and out of order",
                row(Some(State::Active), T0 + DAY, Facts::default()),
                vec![
                    go(T0 + DAY, None, "enabling"),
                    go(T0, Some("enabling"), "active"),
                ],
                T0,
            ),
            (
                "absurd times",
                row(
                    Some(State::TtlWait),
                    i64::MAX,
                    Facts {
                        t_gone: Some(Timestamp(i64::MIN)),
                        max_ds_ttl: Some(u32::MAX),
                        hold_until: Some(Timestamp(i64::MAX)),
                        dnskey_everywhere_at: Some(Timestamp(-1)),
                        held_by: Some(Hold::new("x", Party::Ttl)),
                        held_since: Some(Timestamp(i64::MAX)),
                        ds_seen_at: Some(Timestamp(i64::MIN)),
                        ..Facts::default()
                    },
                ),
                vec![
                    go(i64::MIN, None, "active"),
                    go(-5, Some("active"), "ttl_wait"),
                    go(i64::MAX, Some("ttl_wait"), "ttl_wait"),
                ],
                i64::MIN,
            ),
            (
                "now at the end of time",
                row(
                    Some(State::AwaitingDs),
                    0,
                    Facts {
                        ds_announced_at: Some(Timestamp(MAX_MS)),
                        ..Facts::default()
                    },
                ),
                vec![go(0, None, "awaiting_ds")],
                i64::MAX,
            ),
        ];
        for (case, zone, events, now) in cases {
            let svg = std::panic::catch_unwind(|| draw(&zone, &events, now))
                .unwrap_or_else(|_| panic!("{case}: panicked"));
            let doc = parse(&svg);
            let segments = with_class(&doc, "tl-state");
            for s in &segments {
                assert!(num(s, "width") >= 0.5, "{case}");
            }
            // Time only goes forward, whatever the clocks said.
            for pair in segments.windows(2) {
                assert!(num(&pair[0], "x") <= num(&pair[1], "x"), "{case}");
            }
            assert!(svg.len() < 64 * 1024, "{case}");
        }
        let svg = draw(&row(None, T0, Facts::default()), &[], T0);
        assert!(svg.contains("never observed"));
        assert!(svg.contains("no look at the parent yet"));
    }

    #[test]
    fn only_the_last_events_are_drawn_and_the_output_is_bounded() {
        // A hostile history: more events than drawn, each with the longest reason that
        // escapes the most.
        let reason = "\"<&".repeat(10_000);
        let mut events = Vec::new();
        let states = ["active", "awaiting_ds_removal"];
        for i in 0..(MAX_EVENTS + 3_000) {
            let kind = if i % 10 == 0 {
                EventKind::Intent
            } else {
                EventKind::Transition
            };
            events.push(event(
                T0 + i as i64 * MINUTE,
                kind,
                Some(states[i % 2]),
                Some(states[(i + 1) % 2]),
                &reason,
            ));
        }
        let now = T0 + (events.len() as i64 + 1) * MINUTE;
        let mut zone = row(Some(State::Active), T0, Facts::default());
        let answers: Vec<_> = (0..500)
            .map(|i| serde_json::json!({"server": reason, "addr": i, "answer": {"kind": "unknown", "reason": reason}}))
            .collect();
        zone.last_observation = Some(serde_json::json!({"parent": {"answers": answers}}));
        zone.last_observed_at = Some(Timestamp(now));
        let svg = draw(&zone, &events, now);
        assert!(svg.len() < MAX_OUTPUT, "{} bytes", svg.len());
        let doc = parse(&svg);
        let drawn = events.len() - MAX_EVENTS;
        let transitions = events[drawn..]
            .iter()
            .filter(|e| e.kind == EventKind::Transition)
            .count();
        // One stretch before the first transition drawn, one after each.
        assert_eq!(with_class(&doc, "tl-state").len(), transitions + 1);
        assert_eq!(with_class(&doc, "tl-intent").len(), MAX_EVENTS / 10);
        assert!(svg.contains("3000 earlier events not drawn"));
        // The axis starts at the first event drawn (an intent), in the state the first
        // transition drawn leaves.
        assert_eq!(events[drawn].kind, EventKind::Intent);
        let first = &with_class(&doc, "tl-state")[0];
        assert!(title(first).starts_with(&format!(
            "{}: {} → ",
            events[drawn + 1].from.as_deref().unwrap(),
            Timestamp(events[drawn].at.0)
        )));
        assert!((num(first, "x") - PLOT_X0).abs() < 0.01);
        assert_eq!(with_class(&doc, "tl-ds-unknown").len(), 2 * MAX_ADDRESSES);
        assert!(svg.contains(&format!("and {} more addresses", 500 - MAX_ADDRESSES)));
    }

    #[test]
    fn the_parent_rows_read_the_stored_observation() {
        let ds = DsLine::parse(DS).unwrap().ds;
        let answer = |server: &str, addr: &str, answer: DsAnswer| ServerAnswer {
            server: server.into(),
            addr: addr.parse().unwrap(),
            answer,
        };
        // As the engine stores it: `dns::ParentView` serialized.
        let view = ParentView {
            zone: "example.com.".to_string(),
            parent: "com.".to_string(),
            answers: vec![
                answer(
                    "a.gtld-servers.net.",
                    "192.5.6.30",
                    DsAnswer::Present {
                        ds: vec![ds],
                        ttl: 86_400,
                    },
                ),
                answer(
                    "a.gtld-servers.net.",
                    "2001:503:a83e::2:30",
                    DsAnswer::Absent,
                ),
                answer(
                    "b.gtld-servers.net.",
                    "192.33.14.30",
                    DsAnswer::Unknown(UnknownReason::Malformed("a CNAME at the apex".to_string())),
                ),
                answer(
                    "c.gtld-servers.net.",
                    "192.26.92.30",
                    DsAnswer::Unknown(UnknownReason::Timeout),
                ),
            ],
            delegations: vec![],
            evidence: Evidence::Validated,
        };
        let mut zone = row(Some(State::AwaitingDs), T0, Facts::default());
        zone.last_observed_at = Some(Timestamp(T0 + HOUR));
        zone.last_observation = Some(serde_json::json!({ "parent": view }));
        let events = [go(T0, Some("enabling"), "awaiting_ds")];
        let svg = draw(&zone, &events, T0 + 2 * HOUR);
        let doc = parse(&svg);
        // Each answer twice: at the time of the look, and at the right end.
        let present = with_class(&doc, "tl-ds-present");
        assert_eq!(present.len(), 2);
        assert!(
            title(&present[0]).contains("present: 1 DS record, TTL 86400s; evidence validated")
        );
        assert_eq!(with_class(&doc, "tl-ds-absent").len(), 2);
        let unknown = with_class(&doc, "tl-ds-unknown");
        assert_eq!(unknown.len(), 4);
        assert!(title(&unknown[0]).contains("unknown: malformed: a CNAME at the apex"));
        assert!(title(&unknown[2]).contains("unknown: timeout"));
        let at_look = PLOT_X0 + (PLOT_X1 - PLOT_X0) / 2.0;
        assert!((num(&present[0], "x") + 4.0 - at_look).abs() < 0.01);
        assert_eq!(num(&present[1], "x"), RIGHT_X);

        zone.last_observation =
            Some(serde_json::json!({"parent": {"error": "no parent server answered"}}));
        let svg = draw(&zone, &events, T0 + 2 * HOUR);
        let doc = parse(&svg);
        let failed = with_class(&doc, "tl-ds-failed");
        assert!(failed[0].text().unwrap().contains("could not be asked"));
        assert!(
            failed[0]
                .text()
                .unwrap()
                .contains("no parent server answered")
        );
    }

    #[test]
    fn ds_marks_come_from_the_facts_and_the_transitions_that_mean_them() {
        let facts = Facts {
            t_gone: Some(Timestamp(T0 + 5 * HOUR)),
            ds_seen_at: Some(Timestamp(T0 + 4 * HOUR)),
            ..Facts::default()
        };
        let events = [
            go(T0, Some("awaiting_ds"), "ds_observed"),
            go(T0 + HOUR, Some("ds_observed"), "active"),
            go(T0 + 2 * HOUR, Some("awaiting_ds_removal"), "ttl_wait"),
            // A move in found in `disabling`: `T_gone` is not set again by it.
            go(T0 + 3 * HOUR, Some("disabling"), "ttl_wait"),
            // The same instant as the fact: one mark.
            go(T0 + 5 * HOUR, Some("awaiting_ds_removal"), "ttl_wait"),
        ];
        let zone = row(Some(State::TtlWait), T0 + 5 * HOUR, facts);
        let svg = draw(&zone, &events, T0 + 6 * HOUR);
        let doc = parse(&svg);
        assert_eq!(with_class(&doc, "tl-mark-everywhere").len(), 1);
        let gone: Vec<String> = with_class(&doc, "tl-mark-gone").iter().map(title).collect();
        assert_eq!(gone.len(), 2, "{gone:?}");
        assert!(gone[0].starts_with(&Timestamp(T0 + 5 * HOUR).to_string()));
        assert!(gone[0].ends_with("(from the zone's facts)"));
        assert!(gone[1].starts_with(&Timestamp(T0 + 2 * HOUR).to_string()));
        assert!(gone[1].ends_with("(from the transition in the history)"));
        assert_eq!(with_class(&doc, "tl-mark-last-seen").len(), 1);
    }

    #[test]
    fn a_hold_and_an_open_wait_run_to_now() {
        let facts = Facts {
            held_by: Some(Hold::new(
                "the provider's RRset listing fails",
                Party::Provider,
            )),
            held_since: Some(Timestamp(T0 + HOUR)),
            ..Facts::default()
        };
        let zone = row(Some(State::Enabling), T0, facts);
        let svg = draw(
            &zone,
            &[go(T0, Some("disabled"), "enabling")],
            T0 + 2 * HOUR,
        );
        let doc = parse(&svg);
        let hold = &with_class(&doc, "tl-hold")[0];
        assert!((num(hold, "x") - (PLOT_X0 + PLOT_X1) / 2.0).abs() < 0.01);
        assert!((num(hold, "x") + num(hold, "width") - PLOT_X1).abs() < 0.02);
        assert!(
            title(hold).contains("held: the provider's RRset listing fails (on provider): since")
        );
        // No deadline: no overdue, however long.
        let wait = &with_class(&doc, "tl-wait")[0];
        assert!(title(wait).contains("no deadline"));
        assert!(with_class(&doc, "tl-overdue").is_empty());
    }

    #[test]
    fn ticks_stay_few_and_on_whole_steps() {
        for span in [MINUTE, HOUR, 7 * HOUR, DAY, 40 * DAY, 3 * 365 * DAY, MAX_MS] {
            let scale = Scale {
                t0: 0.max(T0.min(MAX_MS - span)),
                t1: (T0 + span).min(MAX_MS),
            };
            let scale = if span == MAX_MS {
                Scale { t0: 0, t1: MAX_MS }
            } else {
                scale
            };
            let ticks = ticks(scale);
            assert!((2..=8).contains(&ticks.len()), "{span}: {ticks:?}");
            assert!(ticks.iter().all(|(at, _)| scale.shows(*at)));
        }
        let labels: Vec<String> = ticks(Scale {
            t0: T0,
            t1: T0 + 6 * HOUR,
        })
        .into_iter()
        .map(|t| t.1)
        .collect();
        assert_eq!(labels[0], "06-25 10:00");
        assert_eq!(duration(DAY + 3 * HOUR + 5), "1d 3h");
        assert_eq!(duration(2 * HOUR + 5 * MINUTE), "2h 5m");
        assert_eq!(duration(-5), "0s");
    }

    /// A realistic history for the lead to look at: `target/timeline-example.svg` (the
    /// whole round trip, ending `disabled`) and `target/timeline-example-ttl-wait.svg`
    /// (mid-disable, overdue); `rsvg-convert` turns them into PNG.
    #[test]
    fn renders_a_realistic_history() {
        let m = |t: i64| T0 + t * MINUTE;
        let ev = |at: i64, from: &str, to: &str, reason: &str| {
            event(at, EventKind::Transition, Some(from), Some(to), reason)
        };
        let mut events = vec![
            event(
                m(0),
                EventKind::Transition,
                None,
                Some("disabled"),
                "adopted: DNSSEC is off at the provider",
            ),
            event(
                m(10),
                EventKind::Intent,
                Some("disabled"),
                Some("disabled"),
                "operator asked to enable DNSSEC",
            ),
            ev(
                m(11),
                "disabled",
                "enabling",
                "the operator's intent is enabled: switching DNSSEC on",
            ),
            ev(
                m(11 + 2 * 60 + 5),
                "enabling",
                "awaiting_ds",
                &format!("the propagation hold has passed; DS announced: {DS}"),
            ),
            ev(
                m(11 + 30 * 60),
                "awaiting_ds",
                "ds_observed",
                "every parent server publishes a DS matching the key",
            ),
            ev(
                m(11 + 30 * 60 + 5),
                "ds_observed",
                "active",
                "chain of trust complete: every parent server publishes the DS, and validation from the trust anchor says secure",
            ),
        ];
        let disable = m(11 + 30 * 60 + 5) + 9 * DAY;
        events.push(event(
            disable,
            EventKind::Intent,
            Some("active"),
            Some("active"),
            "operator asked to disable DNSSEC",
        ));
        events.push(ev(
            disable + MINUTE,
            "active",
            "awaiting_ds_removal",
            "the operator's intent is disabled: the DS must be removed at the registrar",
        ));
        let gone = disable + 26 * HOUR;
        let mut ttl_wait_events = events.clone();
        events.push(ev(gone, "awaiting_ds_removal", "ttl_wait", "every parent server answers that the DS is gone; waiting out its TTL (86400s, the largest seen) plus margin"));
        ttl_wait_events.push(events.last().unwrap().clone());
        let waited = gone + DAY + HOUR + 2 * HOUR;
        events.push(event(
            waited + 5 * MINUTE,
            EventKind::Guard,
            Some("ttl_wait"),
            Some("ttl_wait"),
            "refused: a parent server could not be asked",
        ));
        events.push(ev(waited + 10 * MINUTE, "ttl_wait", "disabling", "the DS TTL and margin have passed since the DS was gone everywhere: switching DNSSEC off"));
        events.push(ev(
            waited + 12 * MINUTE,
            "disabling",
            "disabled",
            "the provider confirms DNSSEC is off",
        ));
        let now = waited + 2 * DAY;

        let ds = DsLine::parse(DS).unwrap().ds;
        let observation = |present: bool| {
            let answer = |server: &str, addr: &str| ServerAnswer {
                server: server.into(),
                addr: addr.parse().unwrap(),
                answer: if present {
                    DsAnswer::Present {
                        ds: vec![ds.clone()],
                        ttl: 86_400,
                    }
                } else {
                    DsAnswer::Absent
                },
            };
            let mut answers = vec![
                answer("a.gtld-servers.net.", "192.5.6.30"),
                answer("a.gtld-servers.net.", "2001:503:a83e::2:30"),
                answer("b.gtld-servers.net.", "192.33.14.30"),
            ];
            answers.push(ServerAnswer {
                server: "c.gtld-servers.net.".into(),
                addr: "2001:503:83eb::30".parse().unwrap(),
                answer: DsAnswer::Unknown(UnknownReason::Timeout),
            });
            serde_json::json!({ "parent": ParentView {
                zone: "example.com.".to_string(),
                parent: "com.".to_string(),
                answers,
                delegations: vec![],
                evidence: Evidence::Validated,
            }})
        };
        let mut zone = row(
            Some(State::Disabled),
            waited + 12 * MINUTE,
            Facts::default(),
        );
        zone.zone.intent = Intent::Disabled;
        zone.last_observed_at = Some(Timestamp(now - 20 * MINUTE));
        zone.last_observation = Some(observation(false));
        let svg = draw(&zone, &events, now);
        let doc = parse(&svg);
        assert_eq!(with_class(&doc, "tl-state").len(), 9);
        assert_eq!(with_class(&doc, "tl-mark-everywhere").len(), 1);
        assert_eq!(with_class(&doc, "tl-mark-gone").len(), 1);

        // Mid-disable: in `ttl_wait` past its deadline (the daemon was down).
        let facts = Facts {
            t_gone: Some(Timestamp(gone)),
            gone_confirmed_at: Some(Timestamp(gone + 3 * HOUR)),
            max_ds_ttl: Some(86_400),
            max_dnskey_ttl: Some(3600),
            ds_first_seen_at: Some(Timestamp(m(11 + 30 * 60))),
            ds_announced_at: Some(Timestamp(m(11 + 2 * 60 + 5))),
            ds_seen_at: Some(Timestamp(gone - 5 * MINUTE)),
            dnskey_everywhere_at: Some(Timestamp(m(11 + 5))),
            hold_until: Some(Timestamp(m(11 + 2 * 60 + 5))),
            ..Facts::default()
        };
        let mut mid = row(Some(State::TtlWait), gone, facts);
        mid.zone.intent = Intent::Disabled;
        mid.last_observed_at = Some(Timestamp(gone + 3 * HOUR));
        mid.last_observation = Some(observation(false));
        let mid_now = waited + 7 * HOUR;
        let mid_svg = draw(&mid, &ttl_wait_events, mid_now);
        let mid_doc = parse(&mid_svg);
        assert_eq!(with_class(&mid_doc, "tl-overdue").len(), 1);

        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("timeline-example.svg"), &svg).unwrap();
        std::fs::write(dir.join("timeline-example-ttl-wait.svg"), &mid_svg).unwrap();
    }
}
