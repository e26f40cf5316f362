//! Leases: which daemon steps which zone when several share one PostgreSQL database
//! (DESIGN.md, "Several daemons"). A zone is stepped only by the daemon holding its lease;
//! each acquisition bumps the zone's epoch, and every write of a step and every effect is
//! fenced: refused once the writer's epoch is no longer current, or its lease has run out.
//! Lease times are the database's clock, never a daemon's.
//!
//! This module is the daemon's side: who it is and what it holds. The SQL is the backend's
//! (`postgres/cluster.rs`); SQLite has one daemon per file (a lock file) and no leases.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use strum::{Display, IntoStaticStr, VariantArray};

use super::ClusterSettings;
use crate::lifecycle::Timestamp;

/// This daemon among those sharing the database, and the zones it holds (zone → epoch).
#[derive(Debug)]
pub(super) struct Lessee {
    /// `<node>/<pid>`: unique while the process lives; a restarted daemon is a new holder.
    pub(super) holder: String,
    pub(super) node: String,
    pub(super) pid: u32,
    pub(super) lease: Duration,
    held: Mutex<HashMap<String, i64>>,
    /// The epoch of each zone this daemon held last and holds no more: what a refusal
    /// names once the belief is gone.
    stale: Mutex<HashMap<String, i64>>,
    /// Fenced refusals so far, by [`Fenced`] (indexed by its discriminant).
    fenced: [AtomicU64; Fenced::VARIANTS.len()],
}

/// What a fenced refusal refused: the `what` label of `dnssec_warden_fenced_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Display, IntoStaticStr, VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Fenced {
    /// The write of a step: its state, events, outbox rows, alert bookkeeping.
    Step,
    /// The zone's next look rescheduled.
    Schedule,
    /// An audit event.
    Event,
    /// An effect's bookkeeping: claimed, finished, retried, settled.
    Effect,
    /// A provider call, asked right before it leaves.
    ProviderCall,
    /// An alert notification, sent or recorded as sent.
    Notification,
    /// A NOTIFY(CDS) to the parent's registry, asked right before it leaves.
    ParentNotify,
}

impl Fenced {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    fn describe(self) -> &'static str {
        match self {
            Self::Step => "the write of a step",
            Self::Schedule => "rescheduling the zone's next look",
            Self::Event => "an audit event",
            Self::Effect => "an effect's bookkeeping",
            Self::ProviderCall => "a provider call",
            Self::Notification => "an alert notification",
            Self::ParentNotify => "a NOTIFY(CDS) to the parent's registry",
        }
    }
}

impl Lessee {
    pub(super) fn new(settings: &ClusterSettings) -> Self {
        let pid = std::process::id();
        Self {
            holder: format!("{}/{pid}", settings.node),
            node: settings.node.clone(),
            pid,
            lease: settings.lease,
            held: Mutex::new(HashMap::new()),
            stale: Mutex::new(HashMap::new()),
            fenced: Default::default(),
        }
    }

    /// The fence refused `what` of `zone`: one warning, naming the epoch this daemon
    /// held it at, and one more in the count.
    pub(super) fn refused(&self, zone: &str, what: Fenced) {
        let epoch = self.epoch(zone).or_else(|| {
            self.stale
                .lock()
                .ok()
                .and_then(|stale| stale.get(zone).copied())
        });
        self.fenced[what as usize].fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            zone,
            epoch,
            holder = self.holder.as_str(),
            what = what.as_str(),
            "fenced: {} refused, this daemon's lease on the zone (epoch {}) is no longer current; the zone's holder decides",
            what.describe(),
            epoch.map_or_else(|| "unknown".to_string(), |e| e.to_string()),
        );
    }

    /// Fenced refusals so far, by what was refused.
    pub(super) fn fenced(&self) -> Vec<(Fenced, u64)> {
        Fenced::VARIANTS
            .iter()
            .map(|w| (*w, self.fenced[*w as usize].load(Ordering::Relaxed)))
            .collect()
    }

    /// No longer held: remembered as stale at `epoch`.
    fn went_stale(&self, zone: String, epoch: i64) {
        if let Ok(mut stale) = self.stale.lock() {
            stale.insert(zone, epoch);
        }
    }

    pub(super) fn lease_ms(&self) -> i64 {
        i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX)
    }

    /// The epoch this daemon holds the zone at, if it believes it holds it.
    pub(super) fn epoch(&self, zone: &str) -> Option<i64> {
        self.held.lock().ok()?.get(zone).copied()
    }

    pub(super) fn count(&self) -> usize {
        self.held.lock().map(|h| h.len()).unwrap_or(0)
    }

    /// The zones renewed are exactly what is held now; returns the ones lost.
    pub(super) fn renewed(&self, renewed: HashMap<String, i64>) -> Vec<String> {
        let Ok(mut held) = self.held.lock() else {
            return Vec::new();
        };
        let lost: Vec<(String, i64)> = held
            .iter()
            .filter(|(z, _)| !renewed.contains_key(*z))
            .map(|(z, e)| (z.clone(), *e))
            .collect();
        // Remembered as stale before they leave `held`: a refusal in between still names
        // the epoch this daemon held them at (never "epoch unknown").
        for (zone, epoch) in &lost {
            self.went_stale(zone.clone(), *epoch);
        }
        *held = renewed;
        drop(held);
        lost.into_iter().map(|(zone, _)| zone).collect()
    }

    pub(super) fn acquired(&self, zone: &str, epoch: i64) {
        if let Ok(mut held) = self.held.lock() {
            held.insert(zone.to_string(), epoch);
        }
        if let Ok(mut stale) = self.stale.lock() {
            stale.remove(zone);
        }
    }

    /// A fenced write found the lease gone: stop believing it.
    pub(super) fn forget(&self, zone: &str) {
        let epoch = self.held.lock().ok().and_then(|mut held| held.remove(zone));
        if let Some(epoch) = epoch {
            self.went_stale(zone.to_string(), epoch);
        }
    }

    pub(super) fn forget_all(&self) {
        if let Ok(mut held) = self.held.lock() {
            held.clear();
        }
    }
}

/// Who wrote a row, under which epoch (the `holder` and `epoch` columns).
pub(super) type Writer = (String, i64);

/// Who holds a zone, as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseInfo {
    pub holder: String,
    pub epoch: i64,
    pub since: Timestamp,
    pub until: Timestamp,
}

/// What one round of lease keeping did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseRound {
    /// Zones held after the round.
    pub held: usize,
    /// This daemon's fair share: all zones over the live daemons, rounded up.
    pub target: usize,
    /// Daemons seen within a lease, this one included.
    pub live: usize,
    /// Zones taken this round: (zone, epoch, the previous holder if its lease ran out).
    pub acquired: Vec<(String, i64, Option<String>)>,
    /// Zones whose renewal failed: their lease ran out (a pause, a slow database) and
    /// another daemon may hold them now.
    pub lost: Vec<String>,
    /// Zones handed back because this daemon held more than its share.
    pub released: usize,
}
