//! Where a time is drawn: time to x over the plot, and the axis's ticks.

use super::{DAY, HOUR, MINUTE, PLOT_X0, PLOT_X1, stamp};

/// Time to x: linear over `t0..t1` (never empty), clamped to the plot.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scale {
    pub(super) t0: i64,
    pub(super) t1: i64,
}

impl Scale {
    pub(super) fn x(&self, t: i64) -> f64 {
        let t = t.clamp(self.t0, self.t1);
        PLOT_X0 + (t - self.t0) as f64 * (PLOT_X1 - PLOT_X0) / (self.t1 - self.t0) as f64
    }

    pub(super) fn shows(&self, t: i64) -> bool {
        (self.t0..=self.t1).contains(&t)
    }
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
pub(super) fn ticks(scale: Scale) -> Vec<(i64, String)> {
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
