//! The engine's test hooks, only in test builds (feature `test-hooks`, which the
//! integration tests enable): a crash at a named point of a step, and a stop there by
//! SIGSTOP for tests of several daemons. A release build has neither.

use std::sync::Arc;

use super::{Engine, EngineError};
use crate::dns::Observer;
use crate::provider::Provider;

/// Points where a test can make the engine stop dead, as a crash would. Only in test
/// builds (feature `test-hooks`, which the integration tests enable): a release build has
/// no crash points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Observed, nothing written.
    Observed,
    /// The step is committed, no effect performed.
    Committed,
    /// An effect was performed but not yet marked done.
    EffectPerformed,
}

pub type CrashHook = Arc<dyn Fn(CrashPoint) -> bool + Send + Sync>;

impl CrashPoint {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "observed" => Some(Self::Observed),
            "committed" => Some(Self::Committed),
            "effect_performed" => Some(Self::EffectPerformed),
            _ => None,
        }
    }
}

/// Test builds only: `DNSSEC_WARDEN_TEST_STOP_AT=<point>[:<zone>]` makes the process send
/// itself SIGSTOP the first time a step (of that zone) reaches the point, so that a test
/// of several daemons can pause one at an exact place (the fencing test).
#[derive(Debug)]
pub(super) struct StopAt {
    point: CrashPoint,
    zone: Option<String>,
    done: std::sync::atomic::AtomicBool,
}

impl StopAt {
    pub(super) fn from_env() -> Option<Self> {
        let text = std::env::var("DNSSEC_WARDEN_TEST_STOP_AT").ok()?;
        let (point, zone) = match text.split_once(':') {
            Some((p, z)) => (p, Some(z.to_string())),
            None => (text.as_str(), None),
        };
        Some(Self {
            point: CrashPoint::parse(point)?,
            zone,
            done: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Stops the process here, and returns only once it has been continued. A stop sent
    /// with kill(2) reaches the other threads a moment after the call returns, long enough
    /// for this task to begin its next transaction and be stopped inside it; so the task
    /// waits for the SIGCONT that ends the stop (listened for before stopping).
    async fn reached(&self, point: CrashPoint, zone: &str) {
        if point != self.point || self.zone.as_deref().is_some_and(|z| z != zone) {
            return;
        }
        if self.done.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        use rustix::process::{Signal, getpid, kill_process};
        use tokio::signal::unix::{SignalKind, signal};
        let mut continued = match signal(SignalKind::from_raw(Signal::CONT.as_raw())) {
            Ok(continued) => continued,
            Err(error) => {
                tracing::error!(%error, "test hook: cannot listen for SIGCONT; not stopping");
                return;
            }
        };
        tracing::warn!(zone, ?point, "test hook: stopping this process (SIGSTOP)");
        if let Err(error) = kill_process(getpid(), Signal::STOP) {
            tracing::error!(%error, "test hook: SIGSTOP not sent");
            return;
        }
        continued.recv().await;
        tracing::warn!(zone, ?point, "test hook: continued (SIGCONT)");
    }
}

/// Test builds only: `DNSSEC_WARDEN_TEST_MUTANT_EARLY_REMOVAL` set (to anything) makes a
/// ZSK or CSK roll delete the old key one DNSKEY TTL too early
/// (`RollPolicy::mutant_early_removal`), for tests that must fail on it.
pub(super) fn mutant_early_removal() -> bool {
    std::env::var_os("DNSSEC_WARDEN_TEST_MUTANT_EARLY_REMOVAL").is_some()
}

impl<P: Provider + 'static, O: Observer + 'static> Engine<P, O> {
    /// Stops here when the environment's stop point or the test's crash hook says so.
    pub(super) async fn crash_point(
        &self,
        point: CrashPoint,
        zone: &str,
    ) -> Result<(), EngineError> {
        if let Some(stop) = &self.stop_at {
            stop.reached(point, zone).await;
        }
        match &self.crash {
            Some(hook) if hook(point) => Err(EngineError::Crashed(point)),
            _ => Ok(()),
        }
    }
}
