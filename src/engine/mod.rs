//! The engine: which zone is due, observe it, `step` it, commit the decision, then perform
//! the decided effects. Thin on purpose; the rules live in `lifecycle`.
//!
//! - Deadlines are persisted (`zones.next_check_at`); nothing sleeps per zone.
//! - A zone is never stepped twice at once (an in-process claim, the row's version, and a
//!   lock file against a second daemon).
//! - Effects run only after the commit, and only right after a fresh observation of their
//!   zone, so a restart re-observes before acting again (safety rule 6).
//! - "DNSSEC off" passes the guard with a parent observation taken just before the call.
//! - NOTIFY(CDS) to the parent's notification target is an effect like the others: a step
//!   decides it (`lifecycle::registry::notify_due`), it is sent after the commit, its
//!   outcome is kept on its outbox row, and the next step reads it back
//!   (`Observation::cds_notify`), as it reads a registrar hook's failure.

mod listing;
pub mod move_look;
mod moving;
mod notify;
mod observe;
pub mod registry;
mod sinks;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tracing::Instrument;

pub use listing::{Listed, ZoneListing};
pub use notify::{Notification, Notifier};
pub use observe::summarize;
pub use sinks::{SinkQueue, SinkWorkers};

use crate::dns::Observer;
use crate::dnssec::{CdsHalves, CdsPublication};
use crate::lifecycle::{
    CdsSetting, Clock, Decision, Effect, Policy, ProviderView, State, Timestamp, may_disable,
    sample, step,
};
use crate::provider::{ErrorClass, Provider, ProviderError};
use crate::store::{EventKind, ObservationText, OutboxStatus, Store, StoreError};

/// Points where a test can make the engine stop dead, as a crash would. Only in test
/// builds (feature `test-hooks`, which the integration tests enable): a release build has
/// no crash points.
#[cfg(any(test, feature = "test-hooks"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Observed, nothing written.
    Observed,
    /// The step is committed, no effect performed.
    Committed,
    /// An effect was performed but not yet marked done.
    EffectPerformed,
}

#[cfg(any(test, feature = "test-hooks"))]
pub type CrashHook = Arc<dyn Fn(CrashPoint) -> bool + Send + Sync>;

#[cfg(any(test, feature = "test-hooks"))]
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
#[cfg(any(test, feature = "test-hooks"))]
#[derive(Debug)]
struct StopAt {
    point: CrashPoint,
    zone: Option<String>,
    done: std::sync::atomic::AtomicBool,
}

#[cfg(any(test, feature = "test-hooks"))]
impl StopAt {
    fn from_env() -> Option<Self> {
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

/// How long after a start settled zones wait for the first zone listing rather than
/// each asking the provider for itself; a listing slower than that (or failing) costs
/// per-zone calls, never a look.
const FIRST_LISTING_WAIT: Duration = Duration::from_secs(60);

/// Zones stepped at once, each step a task of its own. The observer caps queries in
/// flight (64 in all) and the provider client its requests
/// (`provider::PROVIDER_REQUESTS_IN_FLIGHT`), whatever this is. Enough steps to keep every
/// core busy while the others wait on the network or the database (docs/benchmarks.md).
const WORKERS: usize = 64;

/// How often a DS request is tried when the registrar hook fails.
const NOTIFICATION_ATTEMPTS: i64 = 5;

/// The longest one zone's step may take; a step still running then is abandoned (as a
/// crash would end it, which every step survives) and the zone is tried again later.
/// Far above a slow provider's retries (3 x 30 s) and an observation's DNS budget, far
/// below the unit's 5-minute watchdog.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(120);

/// At a stop, registrar hooks still running get this long to end before they are killed
/// (a request killed mid-way is owed again, with the same number, after the restart).
const HOOK_GRACE: Duration = Duration::from_secs(10);

/// A tick starts no new step after this long; the zones left are still due and are
/// taken by the next tick, after the loop has looked at intents and signals again.
const TICK_BUDGET: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[cfg(any(test, feature = "test-hooks"))]
    #[error("stopped at {0:?} (test crash)")]
    Crashed(CrashPoint),
    #[error("the step took longer than {}s and was abandoned", .0.as_secs())]
    StepTimedOut(Duration),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    Stepped {
        from: Option<State>,
        to: Option<State>,
    },
    /// Another worker holds the zone.
    Busy,
    /// The row changed while observing (an operator intent): decided again next tick.
    Conflict,
    /// A settled zone's sampled look agreed with its last full look: nothing to decide
    /// (DESIGN.md section 4).
    Sampled,
}

pub struct Engine<P, O> {
    store: Store,
    provider: Arc<P>,
    observer: Arc<O>,
    clock: Arc<dyn Clock>,
    /// When this engine was made: the first listing is waited for until
    /// [`FIRST_LISTING_WAIT`] after it.
    started: crate::lifecycle::Timestamp,
    policy: Policy,
    workers: usize,
    notifier: Notifier,
    claimed: Arc<Mutex<HashSet<String>>>,
    /// Registrar hooks running, by zone: one at a time per zone, none inside a step.
    hooks: Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>>,
    #[cfg(any(test, feature = "test-hooks"))]
    crash: Option<CrashHook>,
    #[cfg(any(test, feature = "test-hooks"))]
    stop_at: Option<Arc<StopAt>>,
    heartbeat: Heartbeat,
    step_timeout: Duration,
    /// The provider's paged zone listing, for settled zones (see [`Engine::listed`]).
    listing: Arc<ZoneListing>,
}

/// A committed step in the log: a state change at info, any other note at debug; a
/// signed move's phase change and its end at info.
fn log_decision(row: &crate::store::ZoneRow, decision: &Decision) {
    let name = row.zone.name.as_str();
    let state = decision.state.map(State::as_str).unwrap_or("unobserved");
    for note in &decision.notes {
        if note.from != note.to {
            tracing::info!(
                zone = name,
                state,
                from = note.from.map(State::as_str).unwrap_or("unobserved"),
                "{}",
                note.reason
            );
        } else {
            tracing::debug!(zone = name, state, "{}", note.reason);
        }
    }
    let Some(before) = &row.zone.facts.signed_move else {
        return;
    };
    match &decision.facts.signed_move {
        None => tracing::info!(zone = name, "signed move ended"),
        Some(after) if after.phase != before.phase => tracing::info!(
            zone = name,
            from = before.phase.name(),
            to = after.phase.name(),
            "signed move: {}",
            decision
                .facts
                .wait
                .held_by
                .as_ref()
                .map_or("", |h| h.what.as_str())
        ),
        Some(_) => {}
    }
}

/// A provider failure is logged at warn the first time it is seen for a zone, and again
/// only when it changes (a revoked key, an unreadable answer: said at once, not an hour
/// later as `observation_failing`, and not at every poll); recovery is logged once.
fn log_provider_change(row: &crate::store::ZoneRow, now: &ProviderView) {
    let before = row
        .last_observation
        .as_ref()
        .and_then(|o| o.pointer("/provider/error"))
        .and_then(serde_json::Value::as_str);
    let zone = row.zone.name.as_str();
    match (now, before) {
        // Daemon-wide: said once by `provider_auth_failing` or
        // `provider_account_misconfigured`, not once per zone.
        (ProviderView::Unknown(error), _)
            if error.starts_with(crate::provider::ACCOUNT_REFUSED)
                || error.starts_with(crate::provider::ACCOUNT_MISCONFIGURED) =>
        {
            tracing::debug!(
                zone,
                error = error.as_str(),
                "the provider cannot be asked about this zone"
            );
        }
        (ProviderView::Unknown(error), before) if before != Some(error.as_str()) => {
            tracing::warn!(
                zone,
                error = error.as_str(),
                "the provider cannot be asked about this zone (logged again only when the error changes)"
            );
        }
        (ProviderView::Unknown(_), _) => {}
        (_, Some(_)) => tracing::info!(zone, "the provider answers again"),
        (_, None) => {}
    }
}

/// What became of a provider call of unknown outcome, as a later look tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Took,
    DidNot,
    /// A call of two writes (the CDS setting's halves) whose first took effect alone.
    HalfApplied,
}

impl Outcome {
    fn took(took: bool) -> Self {
        if took { Self::Took } else { Self::DidNot }
    }
}

/// What became of a call of unknown outcome, by what its account says now (DNSSEC on or
/// off, the CDS publication half by half), and those words; `None` when that does not
/// tell.
fn judged(effect: &Effect, on: Option<bool>, cds: Option<CdsHalves>) -> Option<(Outcome, String)> {
    let dnssec = |on: bool| format!("DNSSEC is {}", if on { "on" } else { "off" });
    match (effect, on, cds) {
        (Effect::EnableDnssec, Some(on), _) => Some((Outcome::took(on), dnssec(on))),
        (Effect::DisableDnssec, Some(on), _) => Some((Outcome::took(!on), dnssec(on))),
        (Effect::SetCds { to }, _, Some(now)) => {
            let outcome = match now.as_whole() {
                Some(whole) => Outcome::took(whole == *to),
                // One half as asked, the other not: its answer was lost between the two
                // writes.
                None if now.cds == *to || now.cdnskey == *to => Outcome::HalfApplied,
                None => Outcome::took(false),
            };
            let said = match now.as_whole() {
                Some(whole) => whole.describe().to_string(),
                None => format!("half set ({now})"),
            };
            Some((outcome, format!("its CDS publication is {said}")))
        }
        _ => None,
    }
}

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

/// Releases a zone claim when the step ends, however it ends.
struct Claim<'a> {
    set: &'a Mutex<HashSet<String>>,
    name: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if let Ok(mut set) = self.set.lock() {
            set.remove(&self.name);
        }
    }
}

/// A handle on the same engine (its claims, caches and heartbeat shared): each step runs
/// as a task of its own, on any of the runtime's threads.
impl<P, O> Clone for Engine<P, O> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            provider: self.provider.clone(),
            observer: self.observer.clone(),
            clock: self.clock.clone(),
            started: self.started,
            policy: self.policy.clone(),
            workers: self.workers,
            notifier: self.notifier.clone(),
            claimed: self.claimed.clone(),
            hooks: self.hooks.clone(),
            #[cfg(any(test, feature = "test-hooks"))]
            crash: self.crash.clone(),
            #[cfg(any(test, feature = "test-hooks"))]
            stop_at: self.stop_at.clone(),
            heartbeat: self.heartbeat.clone(),
            step_timeout: self.step_timeout,
            listing: self.listing.clone(),
        }
    }
}

impl<P: Provider + 'static, O: Observer + 'static> Engine<P, O> {
    pub fn new(
        store: Store,
        provider: Arc<P>,
        observer: Arc<O>,
        clock: Arc<dyn Clock>,
        policy: Policy,
        notifier: Notifier,
    ) -> Self {
        Self {
            store,
            provider,
            observer,
            policy,
            workers: WORKERS,
            notifier,
            claimed: Arc::default(),
            hooks: Arc::default(),
            #[cfg(any(test, feature = "test-hooks"))]
            crash: None,
            #[cfg(any(test, feature = "test-hooks"))]
            stop_at: StopAt::from_env().map(Arc::new),
            heartbeat: Heartbeat::default(),
            step_timeout: STEP_TIMEOUT,
            listing: Arc::default(),
            started: clock.now(),
            clock,
        }
    }

    /// Shares the provider's zone listing with others (the daemon's zone keeper).
    pub fn with_listing(mut self, listing: Arc<ZoneListing>) -> Self {
        self.listing = listing;
        self
    }

    /// The longest one zone's step may take (default [`STEP_TIMEOUT`]).
    pub fn with_step_timeout(mut self, timeout: Duration) -> Self {
        self.step_timeout = timeout;
        self
    }

    /// How many zones are stepped at once.
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    #[cfg(any(test, feature = "test-hooks"))]
    pub fn with_crash_hook(mut self, hook: CrashHook) -> Self {
        self.crash = Some(hook);
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn heartbeat(&self) -> Heartbeat {
        self.heartbeat.clone()
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    /// Whether no registrar hook runs and every sink's worker has sent what it may send
    /// now (or waits after a failure): delivery is asynchronous, so tests wait for this
    /// after a tick. Gives up after `within`; false then.
    pub async fn settle(&self, within: Duration) -> bool {
        let until = std::time::Instant::now() + within;
        loop {
            let hooks_idle = self.hooks.lock().map(|h| h.is_empty()).unwrap_or(true);
            if hooks_idle && self.notifier.settled() {
                return true;
            }
            if std::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits up to `grace` for the registrar hooks still running, then kills the rest
    /// (their rows stay owed).
    async fn end_hooks(&self, grace: Duration) {
        let until = std::time::Instant::now() + grace;
        while std::time::Instant::now() < until
            && !self.hooks.lock().map(|h| h.is_empty()).unwrap_or(true)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if let Ok(mut hooks) = self.hooks.lock() {
            for (zone, hook) in hooks.drain() {
                tracing::warn!(
                    zone = zone.as_str(),
                    "stopping: the registrar hook still running was killed; the request is owed again after the restart (same seq)"
                );
                hook.abort();
            }
        }
    }

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

    /// A settled zone's entry in the provider's paged zone listing (one listing
    /// serves every settled zone, so a steady poll needs no per-zone call). Fetched again
    /// once it is `poll_active / 4` old (a failure is retried after `retry_base`), in the
    /// background: while there is none, every zone asks for itself; `None` for a zone
    /// that is not settled or not listed.
    async fn listed(&self, zone: &crate::lifecycle::Zone) -> Option<crate::provider::HostedZone> {
        if !zone.state.is_some_and(State::is_steady) {
            return None;
        }
        let (now, max_age, retry) = (
            self.clock.now(),
            self.policy.poll_active / 4,
            self.policy.retry_base,
        );
        let listing = match self.listing.get_now(&self.provider, now, max_age, retry) {
            // The first listing since the start is being fetched: a settled zone waits for
            // it (bounded) rather than asking the provider for itself, as every zone due
            // at a start would otherwise do at once.
            Err(_) if !self.listing.fetched_once() && now < self.started.plus(FIRST_LISTING_WAIT) => {
                let left = self.started.plus(FIRST_LISTING_WAIT).since(now);
                tokio::time::timeout(left, self.listing.get(self.provider.as_ref(), now, max_age, retry))
                    .await
                    .unwrap_or_else(|_| Err("the first zone listing took too long".into()))
            }
            other => other,
        }
        .inspect_err(|e| {
            tracing::debug!(error = %e, "the zone listing failed: settled zones ask the provider one by one meanwhile");
        })
        .ok()?;
        let enabled = *listing.zones.get(zone.name.as_str())?;
        Some(crate::provider::HostedZone {
            name: zone.name.to_string(),
            dnssec_enabled: enabled,
            name_servers: None,
        })
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

    /// Observe, decide, commit, act: one zone, once.
    pub async fn step_zone(&self, name: &str) -> Result<StepOutcome, EngineError> {
        let Some(_claim) = self.claim_held(name) else {
            return Ok(StepOutcome::Busy);
        };
        let read = self
            .store
            .zone_for_step(name)
            .await?
            .ok_or_else(|| StoreError::UnknownZone(name.to_string()))?;
        self.step_claimed(&read).await
    }

    /// `step_zone` on the zone as read already (a tick reads every due zone at once).
    async fn step_read(&self, read: crate::store::StepRow) -> Result<StepOutcome, EngineError> {
        let Some(_claim) = self.claim_held(read.row.zone.name.as_str()) else {
            return Ok(StepOutcome::Busy);
        };
        self.step_claimed(&read).await
    }

    /// This process's claim on a zone it holds (several daemons: another steps the rest);
    /// `None` while another step of it runs here, or it is not this daemon's.
    fn claim_held(&self, name: &str) -> Option<Claim<'_>> {
        if !self.store.holds(name) {
            return None;
        }
        self.claim(name)
    }

    async fn step_claimed(&self, read: &crate::store::StepRow) -> Result<StepOutcome, EngineError> {
        let row = &read.row;
        // Every line logged during the step carries the zone and the state it started in.
        let span = tracing::info_span!(
            "step",
            zone = row.zone.name.as_str(),
            state = row.zone.state.map(State::as_str).unwrap_or("unobserved")
        );
        self.step_row(read).instrument(span).await
    }

    /// One step: look (I/O only), decide with the pure function of the machine the zone
    /// is in (`lifecycle::step`, or `lifecycle::moving::decide` for a signed move),
    /// commit once, then perform the decided effects from the outbox.
    async fn step_row(&self, read: &crate::store::StepRow) -> Result<StepOutcome, EngineError> {
        let row = &read.row;
        let name = row.zone.name.as_str();
        let (decision, summary, at) = match &row.zone.facts.signed_move {
            Some(mv) => self.decide_move(read, mv).await?,
            None => match self.decide_zone(read).await? {
                Ok(decided) => decided,
                Err(sampled) => return Ok(sampled),
            },
        };
        if !self
            .store
            .commit_step(read, &decision, &summary, at)
            .await?
        {
            self.store.check_by(name, self.clock.now()).await?;
            return Ok(StepOutcome::Conflict);
        }
        log_decision(row, &decision);
        #[cfg(any(test, feature = "test-hooks"))]
        self.crash_point(CrashPoint::Committed, name).await?;
        // Effects are added only by steps, and this zone's are not concurrent: with none
        // owed at the read and none decided now, there is nothing to perform.
        if read.pending_effects || !decision.effects.is_empty() {
            self.perform_effects(name).await?;
        }
        Ok(StepOutcome::Stepped {
            from: row.zone.state,
            to: decision.state,
        })
    }

    /// One step's decision for a zone in its lifecycle: a full look decided by `step`,
    /// or (`Err`) the outcome of a sampled look that agreed and decided nothing.
    async fn decide_zone(
        &self,
        read: &crate::store::StepRow,
    ) -> Result<Result<(Decision, ObservationText, Timestamp), StepOutcome>, EngineError> {
        let row = &read.row;
        let name = row.zone.name.as_str();
        let listed = self.listed(&row.zone).await;
        if let Some(outcome) = self.sampled(read, listed.as_ref()).await? {
            return Ok(Err(outcome));
        }
        let mut observation = observe::observe(
            self.provider.as_ref(),
            self.observer.as_ref(),
            &row.zone,
            listed.as_ref(),
            self.clock.as_ref(),
            &self.policy,
            read.unknown_calls,
        )
        .await;
        observation.registrar_hook_failed = read.registrar_hook_failed.clone();
        observation.cds_notify = read.cds_notified.clone();
        if read.unknown_calls {
            self.settle_unknown_calls(name, &observation.provider, &observation.cds)
                .await?;
        }
        log_provider_change(row, &observation.provider);
        #[cfg(any(test, feature = "test-hooks"))]
        self.crash_point(CrashPoint::Observed, name).await?;
        let decision = step(&row.zone, &observation, &self.policy);
        let summary = summarize(&observation, self.provider.account(name).as_deref());
        Ok(Ok((decision, summary, observation.at)))
    }

    /// A settled zone's look from a sample, where it may be one (DESIGN.md section 4):
    /// `Some` when the sample agreed and only the next look was written; `None` when a
    /// full look is due (the zone may not be sampled, or the sample disagreed).
    async fn sampled(
        &self,
        read: &crate::store::StepRow,
        listed: Option<&crate::provider::HostedZone>,
    ) -> Result<Option<StepOutcome>, EngineError> {
        let row = &read.row;
        let name = row.zone.name.as_str();
        let now = self.clock.now();
        // Nothing owed or open, and the provider's listing at hand (without it, the
        // provider is asked at a full look).
        let quiet = read.open_alerts.is_empty()
            && listed.is_some_and(|z| z.dnssec_enabled.is_some())
            && !read.unknown_calls
            && !read.pending_effects
            && read.registrar_hook_failed.is_none();
        if !sample::may_sample(&row.zone, quiet, row.last_observed_at, now, &self.policy) {
            return Ok(None);
        }
        let turn = self.policy.sample_turn(name, now);
        let seen = observe::sample(
            self.observer.as_ref(),
            &row.zone,
            listed,
            turn,
            self.clock.as_ref(),
        )
        .await;
        if let Some(why) = sample::disagreement(&row.zone, &seen, &self.policy) {
            crate::dns::observe::tally::sample_disagreed();
            tracing::debug!(
                zone = name,
                "the sampled look differs ({why}): a full look follows"
            );
            return Ok(None);
        }
        let next = self.policy.next_settled_look(name, seen.at);
        if !self.store.sampled(read, seen.at, next).await? {
            self.store.check_by(name, self.clock.now()).await?;
            return Ok(Some(StepOutcome::Conflict));
        }
        Ok(Some(StepOutcome::Sampled))
    }

    fn claim(&self, name: &str) -> Option<Claim<'_>> {
        let mut set = self.claimed.lock().ok()?;
        set.insert(name.to_string()).then(|| Claim {
            set: &self.claimed,
            name: name.to_string(),
        })
    }

    #[cfg(any(test, feature = "test-hooks"))]
    async fn crash_point(&self, point: CrashPoint, zone: &str) -> Result<(), EngineError> {
        if let Some(stop) = &self.stop_at {
            stop.reached(point, zone).await;
        }
        match &self.crash {
            Some(hook) if hook(point) => Err(EngineError::Crashed(point)),
            _ => Ok(()),
        }
    }

    /// Provider calls whose outcome was unknown are settled by what the provider says now
    /// (safety rule 11): the audit trail then says what actually happened.
    async fn settle_unknown_calls(
        &self,
        zone: &str,
        provider: &ProviderView,
        cds: &CdsSetting,
    ) -> Result<(), EngineError> {
        let on = match provider {
            ProviderView::On(_) => Some(true),
            ProviderView::Off => Some(false),
            ProviderView::Missing | ProviderView::Unknown(_) => None,
        };
        let cds = match cds {
            CdsSetting::Set(now) => Some(CdsHalves::whole(*now)),
            CdsSetting::HalfApplied(halves) => Some(*halves),
            _ => None,
        };
        let here = self.provider.account(zone);
        for item in self.store.unknown_calls(zone).await? {
            // A call sent to another account than this look's (the zone moved since) is
            // settled by what that account says, asked by name (rule 13).
            if let Some(account) = item.account.as_deref()
                && here.as_deref() != Some(account)
            {
                self.settle_at_account(zone, &item, account).await?;
                continue;
            }
            let Some((outcome, said)) = judged(&item.effect, on, cds) else {
                continue;
            };
            let who = self.provider_named(zone);
            // A row from before rows named their account: judged here, as then.
            let old = if item.account.is_none() && self.provider.accounts() > 1 {
                " (the call's row names no account: judged at the one holding the zone now)"
            } else {
                ""
            };
            self.settle_outcome(zone, &item, outcome, format!("{who}: {said}{old}"))
                .await?;
        }
        Ok(())
    }

    /// A call of unknown outcome settled by the account it was sent to, asked by name:
    /// the zone may be at another account now, or at two during a signed move. An account
    /// no longer configured, or without the zone, cannot tell: said, and the call stays of
    /// unknown outcome (never judged by another account's word).
    pub(super) async fn settle_at_account(
        &self,
        zone: &str,
        item: &crate::store::OutboxItem,
        account: &str,
    ) -> Result<(), EngineError> {
        let cannot_tell = |why: String| {
            format!(
                "{why}: whether the call to {} took effect there cannot be told; it stays of unknown outcome",
                item.effect.describe()
            )
        };
        let Some(client) = self.provider.account_named(account) else {
            let why = cannot_tell(format!(
                "provider {account} is not configured any more (put its [providers.{account}] back to settle it)"
            ));
            return self.unsettled(zone, &why).await;
        };
        let on = match client.dnssec_key(zone).await {
            Ok(_) => Some(true),
            Err(ProviderError::DnssecDisabled) => Some(false),
            Err(ProviderError::NotFound(e)) => {
                let why = cannot_tell(format!("provider {account} no longer has the zone ({e})"));
                return self.unsettled(zone, &why).await;
            }
            // Not known now: the next step asks again.
            Err(_) => None,
        };
        let cds = match item.effect {
            Effect::SetCds { .. } => client.cds_publication(zone).await.ok().flatten(),
            _ => None,
        };
        if let Some((outcome, said)) = judged(&item.effect, on, cds) {
            self.settle_outcome(zone, item, outcome, format!("provider {account}: {said}"))
                .await?;
        }
        Ok(())
    }

    /// A call whose outcome stays unknown, said in the history (counted when said again).
    async fn unsettled(&self, zone: &str, why: &str) -> Result<(), EngineError> {
        tracing::info!(zone, "{why}");
        self.store
            .record(zone, EventKind::Effect, why, self.clock.now())
            .await?;
        Ok(())
    }

    /// A call of unknown outcome, settled by what the provider says now (`said`, rule 11):
    /// the audit trail then says what actually happened.
    async fn settle_call(
        &self,
        zone: &str,
        item: &crate::store::OutboxItem,
        took: bool,
        said: String,
    ) -> Result<(), EngineError> {
        self.settle_outcome(zone, item, Outcome::took(took), said)
            .await
    }

    /// [`Self::settle_call`] with every outcome a look can tell.
    async fn settle_outcome(
        &self,
        zone: &str,
        item: &crate::store::OutboxItem,
        outcome: Outcome,
        said: String,
    ) -> Result<(), EngineError> {
        let took = outcome == Outcome::Took;
        let reason = format!(
            "{said}: the call to {} {}",
            item.effect.describe(),
            match outcome {
                Outcome::Took => "took effect",
                Outcome::DidNot => "did not take effect",
                Outcome::HalfApplied =>
                    "was half applied (its first write took effect, its second did not)",
            }
        );
        tracing::info!(zone, "{reason}");
        self.store
            .settle_unknown_call(item.id, zone, took, &reason, self.clock.now())
            .await?;
        Ok(())
    }

    /// The outcome of a failed provider call: refused or not performed (nothing changed),
    /// or unknown (the request may have reached the provider and taken effect).
    fn call_failed(who: &str, action: &str, e: &ProviderError) -> (OutboxStatus, String) {
        let note = match e.class() {
            ErrorClass::Unknown => {
                return (
                    OutboxStatus::Unknown,
                    format!(
                        "{who}: the call to {action} may or may not have taken effect ({e}); the next observation settles it"
                    ),
                );
            }
            ErrorClass::NotPerformed => {
                format!("{who}: the call to {action} was not performed: {e}")
            }
            ErrorClass::Refused | ErrorClass::NotFound => {
                format!("{who} refused to {action}: {e}")
            }
        };
        (OutboxStatus::Failed, note)
    }

    /// How the history names the zone's provider: by its account's name where several
    /// are configured and the holder is known.
    fn provider_named(&self, zone: &str) -> String {
        match self.provider.account(zone) {
            Some(account) if self.provider.accounts() > 1 => format!("provider {account}"),
            _ => "provider".to_string(),
        }
    }

    /// Claims an effect right before it is performed: marked begun (a provider call) and,
    /// with several daemons, only under this daemon's current lease on the zone. False:
    /// not to be performed here (already claimed, or the zone is no longer this daemon's).
    async fn claim_effect(
        &self,
        zone: &str,
        item: &crate::store::OutboxItem,
    ) -> Result<bool, EngineError> {
        if item.effect.is_provider_call()
            && !self
                .store
                .lease_current(zone, crate::store::Fenced::ProviderCall)
                .await?
        {
            // The fence said it (one warning, counted).
            tracing::debug!(
                zone,
                effect = item.effect.describe(),
                "not performed: this daemon's lease on the zone is no longer current"
            );
            return Ok(false);
        }
        Ok(self.store.start_effect(item.id, self.clock.now()).await?)
    }

    /// Performs the zone's pending effects, oldest first.
    async fn perform_effects(&self, zone: &str) -> Result<(), EngineError> {
        for item in self.store.pending_effects(zone).await? {
            // The zone's registrar hook still runs: what follows it waits for its end, in
            // order (the hook's task looks at the zone again then).
            if self.hook_running(zone) {
                break;
            }
            // A move's request sent late only if the move still stands on it.
            if let Effect::MoveRequest { request } = &item.effect {
                match self.request_stands(zone, request).await? {
                    crate::lifecycle::moving::Stands::Yes => {}
                    crate::lifecycle::moving::Stands::Later => continue,
                    crate::lifecycle::moving::Stands::No(why) => {
                        let note = format!("not sent to the registrar: {why}");
                        self.effect_ended(zone, &item, OutboxStatus::Superseded, note)
                            .await?;
                        continue;
                    }
                }
            }
            // "DNSSEC off" is claimed inside the guard, after its fresh look at the parent;
            // a move's calls inside theirs.
            if item.effect != Effect::DisableDnssec
                && !matches!(item.effect, Effect::MoveCall { .. })
                && !self.claim_effect(zone, &item).await?
            {
                continue;
            }
            // What a later step reads of the effect's end (a NOTIFY's answer).
            let mut outcome = None;
            let (status, note) = match &item.effect {
                Effect::EnableDnssec => match self.switch(zone, true).await {
                    Ok(done) => (
                        OutboxStatus::Done,
                        format!(
                            "{}: DNSSEC switched on{}",
                            self.provider_named(zone),
                            done.key
                                .map(|k| format!(" (key tag {})", k.key_tag()))
                                .unwrap_or_default()
                        ),
                    ),
                    Err(e) => Self::call_failed(&self.provider_named(zone), "switch DNSSEC on", &e),
                },
                Effect::SetCds { to } => match self.set_cds(zone, *to).await {
                    Ok(()) => (
                        OutboxStatus::Done,
                        format!("{}: publishes {}", self.provider_named(zone), to.describe()),
                    ),
                    Err(e) => {
                        Self::call_failed(&self.provider_named(zone), item.effect.describe(), &e)
                    }
                },
                Effect::DisableDnssec => match self.disable_guarded(zone, &item).await? {
                    Some(outcome) => outcome,
                    None => continue,
                },
                Effect::AnnounceDs { ds_line } => {
                    let n = Notification::PublishDs {
                        zone: zone.to_string(),
                        ds_line: ds_line.clone(),
                    };
                    match self.notify(n, &item).await? {
                        Some(outcome) => outcome,
                        None => break,
                    }
                }
                Effect::RequestDsRemoval { ds_line } => {
                    let n = Notification::WithdrawDs {
                        zone: zone.to_string(),
                        ds_line: ds_line.clone(),
                    };
                    match self.notify(n, &item).await? {
                        Some(outcome) => outcome,
                        None => break,
                    }
                }
                Effect::RequestDelegation { name_servers } => {
                    let n = Notification::Delegate {
                        zone: zone.to_string(),
                        name_servers: name_servers.clone(),
                    };
                    match self.notify(n, &item).await? {
                        Some(outcome) => outcome,
                        None => break,
                    }
                }
                Effect::NotifyCds(plan) => match self.notify_parent(zone, plan).await {
                    Some((status, note, sent)) => {
                        outcome = sent;
                        (status, note)
                    }
                    // The lease is gone: the zone's holder decides afresh.
                    None => continue,
                },
                Effect::MoveCall { .. } | Effect::MoveRequest { .. } => {
                    match self.perform_move_effect(zone, &item).await? {
                        Some(outcome) => outcome,
                        // A registrar hook took the request over (what follows waits
                        // for it), or the lease is gone.
                        None if matches!(item.effect, Effect::MoveRequest { .. }) => break,
                        None => continue,
                    }
                }
            };
            #[cfg(any(test, feature = "test-hooks"))]
            self.crash_point(CrashPoint::EffectPerformed, zone).await?;
            self.effect_ended_with(zone, &item, status, note, outcome.as_deref())
                .await?;
        }
        Ok(())
    }

    /// Sends a NOTIFY(CDS) a step decided (`lifecycle::registry::notify_due`), each address
    /// only under this daemon's current lease on the zone, asked right before it. The
    /// outcome on the row (for the next step to read), and the row's status and history
    /// line: done once acknowledged, failed otherwise (a later step decides another).
    /// `None`: nothing sent (the lease is gone).
    async fn notify_parent(
        &self,
        zone: &str,
        plan: &crate::lifecycle::registry::NotifyPlan,
    ) -> Option<(OutboxStatus, String, Option<String>)> {
        let may_send = || self.notify_permit(zone);
        let sent = registry::send_notify(
            self.observer.as_ref(),
            zone,
            plan,
            self.clock.now(),
            &may_send,
        )
        .await?;
        let note = format!(
            "NOTIFY(CDS) for the {} sent to {} ({} port {}): {}",
            sent.signal,
            sent.target,
            sent.addr.as_deref().unwrap_or("no address"),
            sent.port,
            sent.outcome
        );
        let status = if sent.acknowledged {
            OutboxStatus::Done
        } else {
            OutboxStatus::Failed
        };
        Some((status, note, serde_json::to_string(&sent).ok()))
    }

    /// An effect's outcome, recorded: the outbox row, the audit trail, the log. A DS
    /// request whose hook failed stays owed for the next steps, a few times.
    async fn effect_ended(
        &self,
        zone: &str,
        item: &crate::store::OutboxItem,
        status: OutboxStatus,
        note: String,
    ) -> Result<(), EngineError> {
        self.effect_ended_with(zone, item, status, note, None).await
    }

    /// `effect_ended`, with what a later step reads of it (`outcome`, JSON) kept on the
    /// row.
    async fn effect_ended_with(
        &self,
        zone: &str,
        item: &crate::store::OutboxItem,
        status: OutboxStatus,
        note: String,
        outcome: Option<&str>,
    ) -> Result<(), EngineError> {
        let now = self.clock.now();
        let kind = item.effect.kind();
        // A DS request whose hook failed is tried again at the next steps, a few times;
        // what every step decides afresh is not (the next step has it again if due).
        if status == OutboxStatus::Failed
            && !kind.is_rederived()
            && item.attempts + 1 < NOTIFICATION_ATTEMPTS
        {
            self.store.retry_effect(item.id, &note).await?;
            self.store
                .record(zone, EventKind::Effect, &note, now)
                .await?;
            tracing::error!(zone, "{note}");
            return Ok(());
        }
        let failed = status != OutboxStatus::Done;
        self.store
            .finish_effect(
                item.id,
                status,
                failed.then_some(note.as_str()),
                outcome,
                now,
            )
            .await?;
        let event = if status == OutboxStatus::Refused {
            EventKind::Guard
        } else {
            EventKind::Effect
        };
        self.store.record(zone, event, &note, now).await?;
        if kind == crate::lifecycle::EffectKind::NotifyCds {
            // A hint: one not acknowledged is sent again at the zone's next look, which
            // comes when it would have come anyway.
            tracing::info!(zone, "{note}");
        } else if failed {
            tracing::warn!(zone, "{note}");
            // The step re-derives the call; look again after a backoff.
            self.store
                .check_by(zone, now.plus(self.policy.retry_base))
                .await?;
        } else {
            tracing::info!(zone, "{note}");
        }
        Ok(())
    }

    /// The provider call, each attempt sent only while this daemon's lease on the zone
    /// still has half its time to run, checked once the attempt's turn among the requests
    /// in flight has come (several daemons: rule 12 reaches every attempt, and a call
    /// claimed under a lease that ran out while it queued is not sent).
    async fn switch(
        &self,
        zone: &str,
        on: bool,
    ) -> Result<crate::provider::DnssecSwitched, ProviderError> {
        let may_send = || self.lease_permit(zone);
        self.provider.set_dnssec(zone, on, &may_send).await
    }

    /// Rule 12's permit for a provider call about `zone`, asked right before every
    /// attempt: this daemon's lease on the zone still current (always, with one daemon).
    fn lease_permit<'a>(&'a self, zone: &'a str) -> crate::provider::PermitAnswer<'a> {
        Box::pin(async move {
            self.store
                .lease_current(zone, crate::store::Fenced::ProviderCall)
                .await
                .unwrap_or(false)
        })
    }

    /// The same permit for a NOTIFY(CDS) to the parent's registry, asked right before
    /// each address.
    fn notify_permit<'a>(&'a self, zone: &'a str) -> crate::provider::PermitAnswer<'a> {
        Box::pin(async move {
            self.store
                .lease_current(zone, crate::store::Fenced::ParentNotify)
                .await
                .unwrap_or(false)
        })
    }

    /// Sets the provider's CDS publication, with the lease asked as for a switch.
    async fn set_cds(&self, zone: &str, to: CdsPublication) -> Result<(), ProviderError> {
        let may_send = || self.lease_permit(zone);
        self.provider.set_cds_publication(zone, to, &may_send).await
    }

    /// Switches DNSSEC off only if the zone is in `disabling` and the guard, given a parent
    /// observation taken now, allows it (safety rules 1 and 2), and, with several daemons,
    /// this daemon's lease on the zone is current right before the call. `None`: not
    /// performed here (the lease is gone; the zone's holder decides afresh).
    async fn disable_guarded(
        &self,
        zone: &str,
        item: &crate::store::OutboxItem,
    ) -> Result<Option<(OutboxStatus, String)>, EngineError> {
        let row = self
            .store
            .zone(zone)
            .await?
            .ok_or_else(|| StoreError::UnknownZone(zone.to_string()))?;
        if row.zone.state != Some(State::Disabling) {
            return Ok(Some((
                OutboxStatus::Refused,
                format!(
                    "guard refused switching DNSSEC off: the zone is in {}, not disabling",
                    row.zone.state.map(State::as_str).unwrap_or("no state")
                ),
            )));
        }
        // A publish request a sink is sending right now could reach the registrar after
        // the switch: its DS would then be published for an unsigned zone.
        if self
            .store
            .ds_publish_in_flight(zone, self.clock.now())
            .await?
        {
            return Ok(Some((
                OutboxStatus::Refused,
                "guard refused switching DNSSEC off: a request to publish the DS is being \
                 sent to an alert sink right now; tried again once it has ended"
                    .to_string(),
            )));
        }
        let fresh = self
            .observer
            .parent_validated(zone)
            .await
            .map_err(|e| e.to_string());
        if let Err(refusal) = may_disable(&fresh, &row.zone.facts, self.clock.now(), &self.policy) {
            return Ok(Some((
                OutboxStatus::Refused,
                format!("guard refused switching DNSSEC off: {refusal}"),
            )));
        }
        if !self.claim_effect(zone, item).await? {
            return Ok(None);
        }
        Ok(Some(match self.switch(zone, false).await {
            Ok(_) => (
                OutboxStatus::Done,
                format!(
                    "{}: DNSSEC switched off (every parent server confirmed no DS just before)",
                    self.provider_named(zone)
                ),
            ),
            Err(e) => Self::call_failed(&self.provider_named(zone), "switch DNSSEC off", &e),
        }))
    }

    fn hook_running(&self, zone: &str) -> bool {
        self.hooks
            .lock()
            .map(|h| h.contains_key(zone))
            .unwrap_or(false)
    }

    /// A request to the operator: to the log and every sink's queue at once (no sink is
    /// waited for). Without a registrar hook for it, that is the whole effect (`Some`);
    /// with one, the hook runs in a task of its own, which records the outcome, and the
    /// zone's later effects wait for it (`None`).
    async fn notify(
        &self,
        n: Notification,
        item: &crate::store::OutboxItem,
    ) -> Result<Option<(OutboxStatus, String)>, EngineError> {
        self.notifier.announce(&self.store, &n, item.seq).await?;
        if !self.notifier.has_hook(&n) {
            return Ok(Some((OutboxStatus::Done, n.summary())));
        }
        let zone = n.zone().to_string();
        let engine = self.clone();
        let item = item.clone();
        let mut hooks = self
            .hooks
            .lock()
            .map_err(|_| StoreError::Corrupt("the registrar hooks' list".into()))?;
        let task = tokio::spawn(async move {
            engine.hook(&n, &item).await;
            if let Ok(mut hooks) = engine.hooks.lock() {
                hooks.remove(n.zone());
            }
            // What waited behind the hook is performed at the zone's next step: now.
            let zone = n.zone().to_string();
            if engine
                .store
                .pending_effects(&zone)
                .await
                .is_ok_and(|rest| !rest.is_empty())
            {
                let _ = engine.store.check_by(&zone, engine.clock.now()).await;
            }
        });
        hooks.insert(zone, task.abort_handle());
        Ok(None)
    }

    /// Runs the registrar hook for a claimed DS request and records its outcome (rule 12:
    /// only under this daemon's current lease, asked right before).
    async fn hook(&self, n: &Notification, item: &crate::store::OutboxItem) {
        let zone = n.zone().to_string();
        match self
            .store
            .lease_current(&zone, crate::store::Fenced::Notification)
            .await
        {
            Ok(true) => {}
            // The fence said it; the zone's holder performs what is owed.
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(zone = zone.as_str(), error = %e, "the registrar hook waits: cannot ask for the zone's lease");
                return;
            }
        }
        let (status, note) = match self.notifier.run_hook(n, item.seq).await {
            Ok(()) => (OutboxStatus::Done, n.summary()),
            // The operator was told through the log in any case; a failed hook is reported.
            Err(e) => (
                OutboxStatus::Failed,
                format!("{}; registrar hook failed: {e}", n.summary()),
            ),
        };
        match self.effect_ended(&zone, item, status, note).await {
            Ok(()) => {}
            Err(EngineError::Store(StoreError::LeaseLost(_))) => {
                tracing::debug!(
                    zone = zone.as_str(),
                    "the registrar hook ran, but the zone's lease was lost before its outcome was recorded"
                );
            }
            Err(e) => {
                tracing::error!(zone = zone.as_str(), error = %e, "the registrar hook's outcome cannot be recorded; the request stays owed");
            }
        }
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
