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
//!
//! - `model`: what is drawn, read from the rows (the state lane's stretches, the DS marks,
//!   the parent's answers, the waits);
//! - `layout`: time to x, and the axis's ticks;
//! - `svg`: the SVG text as it is written;
//! - `draw`: the lanes, the axis and the legend drawn from the model.

mod draw;
mod layout;
mod model;
mod svg;
#[cfg(test)]
mod tests;

use crate::lifecycle::Policy;
use crate::store::{EventRow, ZoneRow};
use crate::time::Timestamp;
use model::Model;
use svg::Svg;

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
