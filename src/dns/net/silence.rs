//! DNS servers that stop answering, said once an episode: a WARN when a server address
//! first fails a query after every attempt (what failed, and since when), each later
//! failure and each attempt at DEBUG, one INFO when it answers again. A parent server
//! down must not write a line for every query of every zone at every poll, and must not
//! go unsaid either (the per-zone alerts come only after `observation_failing_after`).
//!
//! Bounded: at most [`MAX_TRACKED`] addresses are in an episode at once; beyond them a
//! failing address is said at DEBUG only, with one WARN that the cap was reached.

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::transport::ExchangeError;

/// Server addresses tracked in an episode at once (a few bytes each).
pub const MAX_TRACKED: usize = 256;

/// The words of the episode's WARN, its INFO and the cap's WARN (tests count them).
pub const NOT_ANSWERING: &str = "DNS server not answering";
pub const ANSWERS_AGAIN: &str = "DNS server answers again";
pub const TOO_MANY: &str = "DNS servers not answering";

/// One address's episode.
struct Episode {
    since: crate::time::Timestamp,
    /// Queries that failed after every attempt within it.
    failed: u64,
}

/// The addresses in an episode now.
#[derive(Default)]
pub struct Silence {
    episodes: Mutex<super::FastMap<IpAddr, Episode>>,
    /// `episodes.len()`, read without the lock on every answer.
    tracked: AtomicUsize,
    /// The cap's WARN was said, and no address has left since.
    capped: AtomicBool,
}

impl Silence {
    fn episodes(&self) -> std::sync::MutexGuard<'_, super::FastMap<IpAddr, Episode>> {
        self.episodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One attempt at `server` failed (more may follow).
    pub fn attempt_failed(&self, server: SocketAddr, attempt: u32, error: &ExchangeError) {
        tracing::debug!(%server, attempt, "DNS query attempt failed: {error}");
    }

    /// A query to `server` failed after every attempt. An IPv6 address the host cannot
    /// reach is said once for the host (`host_ipv6_unreachable`), not per address.
    pub fn failed(&self, server: SocketAddr, question: &str, error: &ExchangeError) {
        if server.is_ipv6() && matches!(error, ExchangeError::Unreachable(_)) {
            return;
        }
        let mut episodes = self.episodes();
        if let Some(e) = episodes.get_mut(&server.ip()) {
            e.failed += 1;
            tracing::debug!(%server, question, since = %e.since, "DNS query failed: {error}");
            return;
        }
        if episodes.len() >= MAX_TRACKED {
            drop(episodes);
            tracing::debug!(%server, question, "DNS query failed: {error}");
            if !self.capped.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "{TOO_MANY} at once: more than {MAX_TRACKED}; further ones are logged at debug only until some answer again"
                );
            }
            return;
        }
        let since = crate::time::Clock::now(&crate::time::SystemClock);
        episodes.insert(server.ip(), Episode { since, failed: 1 });
        self.tracked.store(episodes.len(), Ordering::Relaxed);
        drop(episodes);
        tracing::warn!(
            %server,
            question,
            %since,
            "{NOT_ANSWERING} ({error}) since {since}; said again when it answers"
        );
    }

    /// An answer came from `server`: its episode, if any, is over.
    pub fn answered(&self, server: SocketAddr) {
        if self.tracked.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut episodes = self.episodes();
        let Some(e) = episodes.remove(&server.ip()) else {
            return;
        };
        self.tracked.store(episodes.len(), Ordering::Relaxed);
        drop(episodes);
        self.capped.store(false, Ordering::Relaxed);
        tracing::info!(
            %server,
            since = %e.since,
            failed = e.failed,
            "{ANSWERS_AGAIN} (not answering since {}, {} queries failed)",
            e.since,
            e.failed
        );
    }
}
