//! DNS servers that stop answering, said once an episode: a WARN when a server address
//! first fails a query after every attempt (what failed, and since when), each later
//! failure and each attempt at DEBUG, one INFO when it answers again. A parent server
//! down must not write a line for every query of every zone at every poll, and must not
//! go unsaid either (the per-zone alerts come only after `observation_failing_after`).
//!
//! Bounded: at most [`MAX_TRACKED`] addresses are in an episode at once; beyond them a
//! failing address is said at DEBUG only, with one WARN that the cap was reached
//! (`super::episodes`).

use std::net::{IpAddr, SocketAddr};

use super::episodes::{Episodes, Failure};
use super::transport::ExchangeError;

pub use super::episodes::MAX_TRACKED;

/// The words of the episode's WARN, its INFO and the cap's WARN (tests count them).
pub const NOT_ANSWERING: &str = "DNS server not answering";
pub const ANSWERS_AGAIN: &str = "DNS server answers again";
pub const TOO_MANY: &str = "DNS servers not answering";

/// The addresses in an episode now.
#[derive(Default)]
pub struct Silence(Episodes<IpAddr>);

impl Silence {
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
        match self.0.failed(server.ip()) {
            Failure::Began(since) => tracing::warn!(
                %server,
                question,
                %since,
                "{NOT_ANSWERING} ({error}) since {since}; said again when it answers"
            ),
            Failure::Again(since) => {
                tracing::debug!(%server, question, %since, "DNS query failed: {error}")
            }
            Failure::Capped { say_cap } => {
                tracing::debug!(%server, question, "DNS query failed: {error}");
                if say_cap {
                    tracing::warn!(
                        "{TOO_MANY} at once: more than {MAX_TRACKED}; further ones are logged at debug only until some answer again"
                    );
                }
            }
        }
    }

    /// An answer came from `server`: its episode, if any, is over.
    pub fn answered(&self, server: SocketAddr) {
        if let Some(e) = self.0.succeeded(&server.ip()) {
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
}
