//! A condition said once an episode per key (a server address, a zone at an address): the
//! caller says the first failure at WARN, the later ones at DEBUG, and the end at INFO.
//! A broken or hostile server must not write a line per query of every zone at every
//! poll, nor go unsaid.
//!
//! Bounded: at most [`MAX_TRACKED`] keys are in an episode at once; beyond them a failure
//! is [`Failure::Capped`], to be said at DEBUG, with one WARN until some episode ends.

use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::time::{Clock, SystemClock, Timestamp};

/// Keys in an episode at once (a few bytes each).
pub const MAX_TRACKED: usize = 256;

/// One key's episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Episode {
    pub since: Timestamp,
    /// Failures within it, the first included.
    pub failed: u64,
}

/// What a failure is to its key's episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The first of an episode: say it (WARN), with its time.
    Began(Timestamp),
    /// One more within the episode begun at that time: DEBUG.
    Again(Timestamp),
    /// Past [`MAX_TRACKED`] episodes: DEBUG; `say_cap` the first time since an episode
    /// last ended (one WARN that the cap was reached).
    Capped { say_cap: bool },
}

/// The keys in an episode now.
pub struct Episodes<K> {
    open: Mutex<super::FastMap<K, Episode>>,
    /// `open.len()`, read without the lock on every success.
    tracked: AtomicUsize,
    /// The cap was said, and no episode has ended since.
    capped: AtomicBool,
}

impl<K> Default for Episodes<K> {
    fn default() -> Self {
        Self {
            open: Mutex::default(),
            tracked: AtomicUsize::new(0),
            capped: AtomicBool::new(false),
        }
    }
}

impl<K: Hash + Eq> Episodes<K> {
    fn open(&self) -> std::sync::MutexGuard<'_, super::FastMap<K, Episode>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `key` failed now.
    pub fn failed(&self, key: K) -> Failure {
        let mut open = self.open();
        if let Some(e) = open.get_mut(&key) {
            e.failed += 1;
            return Failure::Again(e.since);
        }
        if open.len() >= MAX_TRACKED {
            return Failure::Capped {
                say_cap: !self.capped.swap(true, Ordering::Relaxed),
            };
        }
        let since = SystemClock.now();
        open.insert(key, Episode { since, failed: 1 });
        self.tracked.store(open.len(), Ordering::Relaxed);
        Failure::Began(since)
    }

    /// Whether any key is in an episode (no lock): a success elsewhere need not build
    /// its key to end one.
    pub fn any(&self) -> bool {
        self.tracked.load(Ordering::Relaxed) > 0
    }

    /// `key` succeeded: its episode, if it had one, is over (say it at INFO).
    pub fn succeeded(&self, key: &K) -> Option<Episode> {
        if !self.any() {
            return None;
        }
        let mut open = self.open();
        let ended = open.remove(key)?;
        self.tracked.store(open.len(), Ordering::Relaxed);
        drop(open);
        self.capped.store(false, Ordering::Relaxed);
        Some(ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_begins_once_counts_its_failures_and_ends_once() {
        let episodes = Episodes::<u32>::default();
        assert_eq!(episodes.succeeded(&1), None);
        let Failure::Began(since) = episodes.failed(1) else {
            panic!("the first failure begins the episode")
        };
        assert_eq!(episodes.failed(1), Failure::Again(since));
        assert!(matches!(episodes.failed(2), Failure::Began(_)));
        assert_eq!(episodes.succeeded(&1), Some(Episode { since, failed: 2 }));
        assert_eq!(episodes.succeeded(&1), None);
        assert!(matches!(episodes.failed(1), Failure::Began(_)));
    }

    #[test]
    fn past_the_cap_failures_are_capped_and_the_cap_said_once_until_one_ends() {
        let episodes = Episodes::<usize>::default();
        for key in 0..MAX_TRACKED {
            assert!(matches!(episodes.failed(key), Failure::Began(_)));
        }
        assert_eq!(
            episodes.failed(MAX_TRACKED),
            Failure::Capped { say_cap: true }
        );
        assert_eq!(
            episodes.failed(MAX_TRACKED + 1),
            Failure::Capped { say_cap: false }
        );
        assert!(episodes.succeeded(&0).is_some());
        assert!(matches!(episodes.failed(MAX_TRACKED), Failure::Began(_)));
        assert_eq!(
            episodes.failed(MAX_TRACKED + 1),
            Failure::Capped { say_cap: true }
        );
    }
}
