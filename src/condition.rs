//! Conditions of the whole daemon, not of one zone: the provider refusing the account, a
//! zone listing that fails, a host without IPv6, an alert sink failing. The part that sees one keeps its
//! [`Condition`] and says what it sees; each episode is logged once here (WARN when it
//! starts, INFO when it ends). `cli::daemon` writes them to the store (`daemon_alerts`),
//! which `status`, the metrics and the alert sinks read: one row for the daemon, never
//! one per zone.

use std::sync::Mutex;

use crate::alert_kind::AlertKind;
use crate::time::{Clock, SystemClock, Timestamp};

/// One episode: since when it holds, and what it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Episode {
    pub since: Timestamp,
    pub message: String,
}

/// What is known of a condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Not judged yet (nothing resolves on it: a restart must not end an episode).
    Unjudged,
    Clear,
    Holds(Episode),
}

/// A daemon-wide condition as the part that sees it knows it.
#[derive(Debug)]
pub struct Condition {
    kind: AlertKind,
    seen: Mutex<Seen>,
}

impl Condition {
    pub fn new(kind: AlertKind) -> Self {
        Self {
            kind,
            seen: Mutex::new(Seen::Unjudged),
        }
    }

    pub fn kind(&self) -> AlertKind {
        self.kind
    }

    /// The condition holds: a new episode is logged (WARN); within one, only the
    /// message is kept current.
    pub fn holds(&self, message: impl Into<String>) {
        let message = message.into();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *seen {
            Seen::Holds(episode) => episode.message = message,
            _ => {
                tracing::warn!(condition = self.kind.as_str(), "{message}");
                *seen = Seen::Holds(Episode {
                    since: SystemClock.now(),
                    message,
                });
            }
        }
    }

    /// The condition is clear: an episode that ends is logged (INFO).
    pub fn clear(&self) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Seen::Holds(episode) = &*seen {
            tracing::info!(
                condition = self.kind.as_str(),
                since = %episode.since,
                "{} has cleared",
                self.kind
            );
        }
        *seen = Seen::Clear;
    }

    pub fn seen(&self) -> Seen {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether it holds now.
    pub fn holding(&self) -> bool {
        matches!(self.seen(), Seen::Holds(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_keeps_its_start_and_a_restart_judges_nothing() {
        let c = Condition::new(AlertKind::ZoneListingFailing);
        assert_eq!(c.seen(), Seen::Unjudged);
        c.holds("first");
        let Seen::Holds(first) = c.seen() else {
            panic!("holds")
        };
        c.holds("second");
        let Seen::Holds(second) = c.seen() else {
            panic!("holds")
        };
        assert_eq!(second.since, first.since);
        assert_eq!(second.message, "second");
        c.clear();
        assert_eq!(c.seen(), Seen::Clear);
        assert!(!c.holding());
    }
}
