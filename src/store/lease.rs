//! Leases: which daemon steps which zone when several share one PostgreSQL database
//! (DESIGN.md, "Several daemons"). A zone is stepped only by the daemon holding its lease;
//! each acquisition bumps the zone's epoch, and every write of a step and every effect is
//! fenced: refused once the writer's epoch is no longer current, or its lease has run out.
//! Lease times are the database's clock, never a daemon's.
//!
//! This module is the daemon's side: who it is and what it holds. The SQL is the backend's
//! (`postgres.rs`); SQLite has one daemon per file (a lock file) and no leases.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use crate::config::ClusterSettings;
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
        let lost = held
            .keys()
            .filter(|z| !renewed.contains_key(*z))
            .cloned()
            .collect();
        *held = renewed;
        lost
    }

    pub(super) fn acquired(&self, zone: &str, epoch: i64) {
        if let Ok(mut held) = self.held.lock() {
            held.insert(zone.to_string(), epoch);
        }
    }

    /// A fenced write found the lease gone: stop believing it.
    pub(super) fn forget(&self, zone: &str) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(zone);
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
