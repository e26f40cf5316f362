//! The effects' performer: a committed step's effects from the outbox, oldest first, each
//! claimed under the zone's lease right before it is performed; "DNSSEC off" behind the
//! guard and its fresh look at the parent; requests to the operator to the sinks and the
//! registrar hook (a task of its own); an effect's end on its row and in the history.

use std::time::Duration;

use super::{Engine, EngineError, Notification, registry};
use crate::dns::Observer;
use crate::dnssec::CdsPublication;
use crate::lifecycle::{Effect, State, may_disable};
use crate::provider::{ErrorClass, Provider, ProviderError};
use crate::store::{EventKind, OutboxStatus, StoreError};

/// How often a DS request is tried when the registrar hook fails.
const NOTIFICATION_ATTEMPTS: i64 = 5;

impl<P: Provider + 'static, O: Observer + 'static> Engine<P, O> {
    /// The outcome of a failed provider call: refused or not performed (nothing changed),
    /// or unknown (the request may have reached the provider and taken effect).
    pub(super) fn call_failed(
        who: &str,
        action: &str,
        e: &ProviderError,
    ) -> (OutboxStatus, String) {
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
    pub(super) fn provider_named(&self, zone: &str) -> String {
        match self.provider.account(zone) {
            Some(account) if self.provider.accounts() > 1 => format!("provider {account}"),
            _ => "provider".to_string(),
        }
    }

    /// Claims an effect right before it is performed: marked begun (a provider call) and,
    /// with several daemons, only under this daemon's current lease on the zone. False:
    /// not to be performed here (already claimed, or the zone is no longer this daemon's).
    pub(super) async fn claim_effect(
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
    pub(super) async fn perform_effects(&self, zone: &str) -> Result<(), EngineError> {
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
            // A roll's request likewise, only if the roll still stands on it.
            if let Effect::RollRequest { request } = &item.effect {
                match self.roll_request_stands(zone, request).await? {
                    crate::lifecycle::rolling::Stands::Yes => {}
                    crate::lifecycle::rolling::Stands::Later => continue,
                    crate::lifecycle::rolling::Stands::No(why) => {
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
                Effect::AddKey { .. }
                | Effect::SetKeyState { .. }
                | Effect::DeleteKey { .. }
                | Effect::RollRequest { .. } => {
                    match self.perform_roll_effect(zone, &item).await? {
                        Some((status, note, kept)) => {
                            outcome = kept;
                            (status, note)
                        }
                        // A registrar hook took the request over: what follows waits.
                        None => break,
                    }
                }
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
            self.crash_point(super::CrashPoint::EffectPerformed, zone)
                .await?;
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
    pub(super) fn lease_permit<'a>(&'a self, zone: &'a str) -> crate::provider::PermitAnswer<'a> {
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
    pub(super) async fn notify(
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

    /// Waits up to `grace` for the registrar hooks still running, then kills the rest
    /// (their rows stay owed).
    pub(super) async fn end_hooks(&self, grace: Duration) {
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
}
