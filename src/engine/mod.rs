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
//!
//! Here: one zone's step (observe, decide, commit). Beside it: the loop (`tick`), the
//! effects' performer (`perform`), calls of unknown outcome settled (`settle`), the test
//! builds' crash and stop points (`test_hooks`).

mod listing;
pub mod move_look;
mod moving;
mod notify;
mod observe;
mod perform;
pub mod registry;
mod roll_schedule;
mod rollover;
mod settle;
mod sinks;
#[cfg(any(test, feature = "test-hooks"))]
mod test_hooks;
mod tick;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::Instrument;

pub use listing::{Listed, ZoneListing};
pub use notify::{Notification, Notifier};
pub use observe::summarize;
pub use sinks::{SinkQueue, SinkWorkers};
#[cfg(any(test, feature = "test-hooks"))]
use test_hooks::StopAt;
#[cfg(any(test, feature = "test-hooks"))]
pub use test_hooks::{CrashHook, CrashPoint};
pub use tick::Heartbeat;

use crate::dns::Observer;
use crate::lifecycle::{Clock, Decision, Policy, ProviderView, State, Timestamp, sample, step};
use crate::provider::Provider;
use crate::store::{ObservationText, Store, StoreError};

/// How long after a start settled zones wait for the first zone listing rather than
/// each asking the provider for itself; a listing slower than that (or failing) costs
/// per-zone calls, never a look.
const FIRST_LISTING_WAIT: Duration = Duration::from_secs(60);

/// Zones stepped at once, each step a task of its own. The observer caps queries in
/// flight (64 in all) and the provider client its requests
/// (`provider::PROVIDER_REQUESTS_IN_FLIGHT`), whatever this is. Enough steps to keep every
/// core busy while the others wait on the network or the database (docs/benchmarks.md).
const WORKERS: usize = 64;

/// The longest one zone's step may take; a step still running then is abandoned (as a
/// crash would end it, which every step survives) and the zone is tried again later.
/// Far above a slow provider's retries (3 x 30 s) and an observation's DNS budget, far
/// below the unit's 5-minute watchdog.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(120);

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
/// signed move's or a key rollover's phase change and its end at info.
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
    log_roll(row, decision);
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

/// A key rollover's phase change and its end, at info.
fn log_roll(row: &crate::store::ZoneRow, decision: &Decision) {
    let name = row.zone.name.as_str();
    let Some(before) = &row.zone.facts.key_roll else {
        return;
    };
    match &decision.facts.key_roll {
        None => tracing::info!(
            zone = name,
            method = before.method.name(),
            "key rollover ended"
        ),
        Some(after) if after.phase != before.phase => tracing::info!(
            zone = name,
            from = before.phase.name(),
            to = after.phase.name(),
            "key rollover: {}",
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
        mut policy: Policy,
        notifier: Notifier,
    ) -> Self {
        policy.look_allowance = STEP_TIMEOUT;
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
        self.policy.look_allowance = timeout;
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
    /// is in (`lifecycle::step`, `lifecycle::moving::decide` for a signed move, or
    /// `lifecycle::rolling::decide` for a key rollover; a move's look wins: `roll` is
    /// refused during a move),
    /// commit once, then perform the decided effects from the outbox.
    async fn step_row(&self, read: &crate::store::StepRow) -> Result<StepOutcome, EngineError> {
        let row = &read.row;
        let name = row.zone.name.as_str();
        let facts = &row.zone.facts;
        let (decision, summary, at) = match (&facts.signed_move, &facts.key_roll) {
            (Some(mv), _) => self.decide_move(read, mv).await?,
            (None, Some(roll)) => self.decide_roll(read, roll).await?,
            (None, None) => match self.decide_zone(read).await? {
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
        let decision = self
            .roll_policy(&row.zone, decision, observation.at)
            .await?;
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
        // A roll the policy makes due needs the full look that asks for the keys.
        if !sample::may_sample(&row.zone, quiet, row.last_observed_at, now, &self.policy)
            || crate::lifecycle::roll_policy::due(&row.zone, now, &self.policy)
        {
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
}
