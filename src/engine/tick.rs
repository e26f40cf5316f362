//! The engine's loop: a tick steps every due zone, each step a task of its own and
//! `workers` at once, bounded by the step timeout; the loop sleeps until the next deadline
//! and feeds the heartbeat the watchdog reads.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{Engine, EngineError, StepOutcome};
use crate::dns::Observer;
use crate::lifecycle::Clock;
use crate::provider::Provider;
use crate::store::StoreError;

/// At a stop, registrar hooks still running get this long to end before they are killed
/// (a request killed mid-way is owed again, with the same number, after the restart).
const HOOK_GRACE: Duration = Duration::from_secs(10);

/// A tick starts no new step after this long; the zones left are still due and are
/// taken by the next tick, after the loop has looked at intents and signals again.
const TICK_BUDGET: Duration = Duration::from_secs(30);

/// When the engine last made progress (a step ended, however it ended, or the loop came
/// round): system time, for liveness only. The systemd watchdog is fed only while this
/// moves, so it measures the engine, not the provider's speed: steps are bounded.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat(Arc<std::sync::atomic::AtomicI64>);

impl Heartbeat {
    fn beat(&self) {
        let now = crate::lifecycle::SystemClock.now();
        self.0.store(now.0, std::sync::atomic::Ordering::Relaxed);
    }

    /// How long ago the last tick finished (`None` before the first one).
    pub fn age(&self) -> Option<Duration> {
        let last = self.0.load(std::sync::atomic::Ordering::Relaxed);
        (last > 0).then(|| {
            crate::lifecycle::SystemClock
                .now()
                .since(crate::lifecycle::Timestamp(last))
        })
    }
}

impl<P: Provider + 'static, O: Observer + 'static> Engine<P, O> {
    /// Start-up: zones with an effect pending are observed again before anything else.
    pub async fn start(&self) -> Result<(), EngineError> {
        let unknown = self.store.unknown_in_flight(self.clock.now(), None).await?;
        if unknown > 0 {
            tracing::warn!(
                calls = unknown,
                "provider calls were in flight when the daemon stopped; their outcome is settled by the next observation"
            );
        }
        let n = self.store.recheck_pending(self.clock.now()).await?;
        if n > 0 {
            tracing::info!(
                zones = n,
                "re-observing zones with unfinished effects before acting"
            );
        }
        Ok(())
    }

    /// Steps every zone due now, `workers` at a time, then sends owed notifications.
    /// Returns how many zones were stepped.
    pub async fn tick(&self) -> Result<usize, EngineError> {
        let (_keep, never) = watch::channel(false);
        self.tick_until(&never).await
    }

    /// A tick that starts no new step once `shutdown` is true or the tick budget is spent
    /// (the steps in flight finish; each is bounded by the step timeout).
    async fn tick_until(&self, shutdown: &watch::Receiver<bool>) -> Result<usize, EngineError> {
        let now = self.clock.now();
        // 64 rounds of steps a tick: a tick ends waiting for its slowest step, and then
        // delivers owed alerts and looks for the next deadline.
        let limit = u32::try_from(self.workers.saturating_mul(64)).unwrap_or(u32::MAX);
        // Every due zone read at once: a step then visits the database only to commit.
        let due = self.store.due_for_step(now, limit).await?;
        let started = std::time::Instant::now();
        let mut count = 0;
        // Each step a task of its own, `workers` at once: a step's own work (classifying
        // answers, deciding, summarizing) then runs on every thread of the runtime, not
        // only on the one polling the tick.
        let mut due = due.into_iter();
        let mut running = tokio::task::JoinSet::new();
        let mut zones = std::collections::HashMap::new();
        #[cfg(any(test, feature = "test-hooks"))]
        let mut crashed = None;
        let mut fatal = None;
        loop {
            while running.len() < self.workers
                && fatal.is_none()
                && !*shutdown.borrow()
                && started.elapsed() < TICK_BUDGET
                && let Some(read) = due.next()
            {
                let engine = self.clone();
                let name = read.row.zone.name.to_string();
                let task = running.spawn(async move { engine.run_step(read).await });
                zones.insert(task.id(), name);
            }
            let Some(joined) = running.join_next_with_id().await else {
                break;
            };
            count += 1;
            match joined {
                Ok((id, outcome)) => {
                    zones.remove(&id);
                    // The database cannot be trusted: no further step, and the tick ends
                    // with the error (the daemon stops on it).
                    match outcome {
                        Err(EngineError::Store(e)) if e.is_fatal() => {
                            fatal.get_or_insert(e);
                        }
                        #[cfg(any(test, feature = "test-hooks"))]
                        Err(EngineError::Crashed(point)) => {
                            crashed.get_or_insert(point);
                        }
                        _ => {}
                    }
                }
                // A bug in one zone's step (a panic) stops that step only; the zone is
                // looked at again after the retry time, not at once and forever.
                Err(e) => {
                    let zone = zones.remove(&e.id()).unwrap_or_default();
                    tracing::error!(zone, error = %e, "the step ended abnormally");
                    let retry = self.clock.now().plus(self.policy.retry_base);
                    let _ = self.store.defer(&zone, retry).await;
                }
            }
        }
        if let Some(e) = fatal {
            return Err(EngineError::Store(e));
        }
        #[cfg(any(test, feature = "test-hooks"))]
        if let Some(point) = crashed {
            return Err(EngineError::Crashed(point));
        }
        self.notifier
            .deliver_alerts(&self.store, self.clock.as_ref())
            .await?;
        Ok(count)
    }

    /// One step of a tick: bounded by the step timeout, the heartbeat moved however it
    /// ends, a failure logged and the zone tried again soon.
    async fn run_step(&self, read: crate::store::StepRow) -> Result<StepOutcome, EngineError> {
        let name = read.row.zone.name.to_string();
        let outcome = match tokio::time::timeout(self.step_timeout, self.step_read(read)).await {
            Ok(outcome) => outcome,
            Err(_) => self.abandoned(&name).await,
        };
        self.heartbeat.beat();
        match &outcome {
            Ok(_) => {}
            #[cfg(any(test, feature = "test-hooks"))]
            Err(EngineError::Crashed(_)) => {}
            // The store logs a failing disk once per episode, not once per zone.
            Err(EngineError::Store(e)) if e.is_unwritable() => {
                tracing::debug!(zone = %name, error = %e, "step not recorded");
            }
            // The tick ends on it and the daemon stops, saying it once.
            Err(EngineError::Store(e)) if e.is_fatal() => {
                tracing::debug!(zone = %name, error = %e, "step not recorded");
            }
            // Fenced: another daemon holds the zone now and decides afresh.
            // The fence said it (one warning, with the epoch and what it refused).
            Err(EngineError::Store(StoreError::LeaseLost(_))) => {
                tracing::debug!(
                    zone = %name,
                    "the zone's lease was lost during the step (this daemon paused or slow?): nothing of it was written or performed after that; the zone's holder steps it"
                );
            }
            Err(err) => {
                tracing::error!(zone = %name, error = %err, "step failed");
                // Try again soon rather than at the old deadline.
                let retry = self.clock.now().plus(self.policy.retry_base);
                let _ = self.store.defer(&name, retry).await;
            }
        }
        outcome
    }

    /// A step that ran past the step timeout was dropped where it stood, as a crash would
    /// have stopped it: a provider call it had begun is of unknown outcome from now on.
    async fn abandoned(&self, zone: &str) -> Result<StepOutcome, EngineError> {
        let now = self.clock.now();
        let calls = self.store.unknown_in_flight(now, Some(zone)).await?;
        tracing::warn!(
            zone,
            calls,
            "the step took longer than {}s and was abandoned; the zone is tried again later",
            self.step_timeout.as_secs()
        );
        Err(EngineError::StepTimedOut(self.step_timeout))
    }

    /// The daemon's loop: tick, then sleep until the next deadline, looking at the database
    /// at least every `intent_poll` for operator intents. Returns when `shutdown` turns true,
    /// after the step in flight.
    pub async fn run(
        &self,
        mut shutdown: watch::Receiver<bool>,
        intent_poll: Duration,
    ) -> Result<(), EngineError> {
        self.start().await?;
        while !*shutdown.borrow() {
            self.heartbeat.beat();
            // The database's files removed or replaced under the daemon, an older copy
            // restored, another database or a damaged one: nothing written now would last,
            // nothing read can be trusted, so stop (the error names the file).
            if let Err(e) = self.store.verify_identity().await {
                return Err(EngineError::Store(self.store.stopping_on(e)));
            }
            // While the database takes no writes (disk full), steps could not be recorded:
            // no zone is observed, a small write probes once per poll instead.
            let writable =
                self.store.write_failure().is_none() || self.store.probe_writable().await.is_ok();
            if writable {
                match self.tick_until(&shutdown).await {
                    Ok(_) => self.heartbeat.beat(),
                    Err(EngineError::Store(e)) if e.is_unwritable() => self.heartbeat.beat(),
                    Err(EngineError::Store(e)) if e.is_fatal() => {
                        return Err(EngineError::Store(self.store.stopping_on(e)));
                    }
                    Err(e) => tracing::error!(error = %e, "engine tick failed"),
                }
            } else {
                // The loop is alive; the STATUS line and the metrics say what is wrong.
                self.heartbeat.beat();
            }
            let now = self.clock.now();
            let next = self.store.next_due().await.ok().flatten();
            let wait = next
                .map(|at| at.since(now))
                .unwrap_or(intent_poll)
                .min(intent_poll);
            let wait = if self.store.write_failure().is_some() {
                intent_poll
            } else {
                wait
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => {}
            }
        }
        self.end_hooks(HOOK_GRACE).await;
        Ok(())
    }
}
