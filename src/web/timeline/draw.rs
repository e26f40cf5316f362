//! The lanes drawn from the model: the header, the states with the operator's and the
//! guard's marks, the DS at each parent address, the waits, the axis and the legend.

use std::fmt::Write as _;

use super::layout::ticks;
use super::model::{Address, Bar, MarkKind, Model, ParentLook, Said};
use super::svg::Svg;
use super::{
    CHAR_W, GRID, HOLD_FILL, HOLD_STROKE, MAX_TEXT, MUTED, OVERDUE, PLOT_X0, PLOT_X1,
    REASON_BUDGET, RIGHT_X, ROW, WAIT_FILL, WAIT_STROKE, WIDTH, duration, esc, ms, stamp,
};
use crate::lifecycle::State;
use crate::store::EventKind;
use crate::time::Timestamp;

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

pub(super) fn state_name(state: Option<&str>) -> &str {
    state.unwrap_or("not yet observed")
}

impl Model<'_> {
    pub(super) fn draw(&self, svg: &mut Svg) {
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
