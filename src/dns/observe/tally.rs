//! This process's looks at the parent, by kind: full (every address) or sampled (one
//! address, DESIGN.md section 4), and the samples that disagreed and brought a full look.
//! Counted by the real observer and the engine; read by the metrics.

use std::sync::atomic::{AtomicU64, Ordering};

static FULL: AtomicU64 = AtomicU64::new(0);
static SAMPLED: AtomicU64 = AtomicU64::new(0);
static DISAGREED: AtomicU64 = AtomicU64::new(0);

/// The counts since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LookTotals {
    pub full: u64,
    pub sampled: u64,
    pub disagreed: u64,
}

pub fn look_totals() -> LookTotals {
    LookTotals {
        full: FULL.load(Ordering::Relaxed),
        sampled: SAMPLED.load(Ordering::Relaxed),
        disagreed: DISAGREED.load(Ordering::Relaxed),
    }
}

pub(super) fn full_look() {
    FULL.fetch_add(1, Ordering::Relaxed);
}

pub(super) fn sampled_look() {
    SAMPLED.fetch_add(1, Ordering::Relaxed);
}

/// A sample differed from the zone's last full look (or could not be compared).
pub fn sample_disagreed() {
    DISAGREED.fetch_add(1, Ordering::Relaxed);
}
