//! The SVG text as it is written: the elements the lanes are drawn with, each with its
//! class, and the picture's frame around them.

use std::fmt::Write as _;

use super::draw::state_name;
use super::model::Model;
use super::{FONT, GRID, MAX_TEXT, WIDTH, esc, ms};
use crate::lifecycle::State;
use crate::time::Timestamp;

/// The SVG text as it is written, with the running height.
#[derive(Default)]
pub(super) struct Svg {
    pub(super) body: String,
    pub(super) y: f64,
    pub(super) reasons_left: usize,
}

impl Svg {
    pub(super) fn text(
        &mut self,
        class: &str,
        x: f64,
        y: f64,
        anchor: &str,
        fill: &str,
        text: &str,
    ) {
        let _ = write!(
            self.body,
            r#"<text class="{class}" x="{x:.1}" y="{y:.1}" text-anchor="{anchor}" fill="{fill}">{text}</text>"#
        );
    }

    /// A rectangle with its tooltip; `extra` holds further attributes, already safe.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rect(
        &mut self,
        class: &str,
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        extra: &str,
        title: &str,
    ) {
        let _ = write!(
            self.body,
            r#"<rect class="{class}" x="{x:.2}" y="{y:.1}" width="{w:.2}" height="{h:.1}" {extra}><title>{title}</title></rect>"#
        );
    }

    pub(super) fn line(&mut self, class: &str, x1: f64, y1: f64, x2: f64, y2: f64, extra: &str) {
        let _ = write!(
            self.body,
            r#"<line class="{class}" x1="{x1:.2}" y1="{y1:.1}" x2="{x2:.2}" y2="{y2:.1}" {extra}/>"#
        );
    }

    pub(super) fn path(&mut self, class: &str, d: &str, extra: &str, title: &str) {
        let _ = write!(
            self.body,
            r#"<path class="{class}" d="{d}" {extra}><title>{title}</title></path>"#
        );
    }

    /// An event's reason for a tooltip, while the budget lasts.
    pub(super) fn reason(&mut self, reason: &str) -> String {
        let text = esc(reason, MAX_TEXT);
        if text.len() <= self.reasons_left {
            self.reasons_left -= text.len();
            text
        } else {
            "(see the history)".to_string()
        }
    }

    /// A lane's name at the left, and a rule above it.
    pub(super) fn lane(&mut self, name: &str) {
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

    pub(super) fn finish(self, model: &Model<'_>) -> String {
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
