//! A zone in a signed move (DESIGN.md section 2, "Signed moves", rule 15): looked at
//! through both of its accounts (`move_look`), decided by `signed_move::step`, committed
//! as any step (the zone stays `active`; the move lives in its facts), its effects
//! performed from the outbox. The source's "DNSSEC off" passes `source_may_go_off` on a
//! look taken right before the call, as the disable guard does for rule 1.

use crate::alert_kind::AlertKind;
use crate::dns::Observer;
use crate::lifecycle::facts::{Hold, Party};
use crate::lifecycle::signed_move::{
    self, Instruction, Look, Move, MoveDecision, MoveEffect, Phase, Side,
};
use crate::lifecycle::{AlertCheck, AuditNote, Decision, Effect, MoveCall, MoveRequest, Timestamp};
use crate::provider::{HostedZone, Provider, ProviderError};
use crate::store::{ObservationText, OutboxItem, OutboxStatus, StepRow, StoreError};

use super::{Engine, EngineError, Notification, StepOutcome};

/// The two accounts of a move and their apex NS, or why a look cannot be made.
struct Accounts<'a, A> {
    source: &'a A,
    target: &'a A,
    source_ns: Vec<String>,
    target_ns: Vec<String>,
}

/// The NS names an account lists for the zone; a look classifies every parent address
/// by them, so an unknown list holds the move rather than read as "delegates elsewhere".
fn listed_ns(
    account: &str,
    read: Result<HostedZone, ProviderError>,
) -> Result<Vec<String>, String> {
    match read {
        Ok(HostedZone {
            name_servers: Some(ns),
            ..
        }) if !ns.is_empty() => Ok(ns),
        Ok(_) => Err(format!(
            "provider {account} lists no name servers for the zone"
        )),
        Err(e) => Err(format!("provider {account}: {e}")),
    }
}

impl<P: Provider + 'static, O: Observer + 'static> Engine<P, O> {
    /// The move's timings. A look confirming a hold is missed (the hold restarts) only
    /// when the next comes later than two polls plus the longest a step may take: the
    /// next look is scheduled a poll after the last one's commit, and a move's look
    /// (both accounts, every address of both, the parent validated) may take longer than
    /// a short poll.
    fn move_policy(&self) -> signed_move::MovePolicy {
        let mut policy = self.policy.move_policy();
        policy.confirmation_gap += self.step_timeout;
        policy
    }

    /// One step of a zone whose facts hold a signed move.
    pub(super) async fn step_move(
        &self,
        read: &StepRow,
        mv: &Move,
    ) -> Result<StepOutcome, EngineError> {
        let row = &read.row;
        let name = row.zone.name.as_str();
        let policy = self.move_policy();
        let (planned, on, summary, look) = match self.move_accounts(name, mv).await {
            Err((why, on)) => {
                let planned = held(mv, why, on);
                let summary = held_summary(self.clock.now(), &planned);
                (planned, on, summary, None)
            }
            // The move is done and the source no longer lists the zone: it ends.
            Ok(Found::SourceGone { target }) => return self.end_move(read, mv, target).await,
            Ok(Found::Both(a)) => {
                let look = self.look_at(name, &a).await;
                let mut planned = signed_move::step(mv, &look, &policy);
                if planned.next.phase == Phase::Done {
                    planned.waiting = format!(
                        "the operator to delete the zone at provider {} (DNSSEC is off there and nothing delegates to it); the move ends once only provider {} lists it",
                        mv.source, mv.target
                    );
                }
                let summary = move_summary(&look, &planned);
                let on = planned.on();
                (planned, on, summary, Some((look, a.target_ns)))
            }
        };
        if read.unknown_calls
            && let Some((look, _)) = &look
        {
            self.settle_unknown_move_calls(name, mv, look).await?;
        }
        #[cfg(any(test, feature = "test-hooks"))]
        self.crash_point(super::CrashPoint::Observed, name)?;
        let target_ns = look.map(|(_, ns)| ns).unwrap_or_default();
        let now = self.clock.now();
        let decision = self.move_decision(read, mv, &planned, on, &target_ns, now);
        if !self
            .store
            .commit_step(read, &decision, &summary, now)
            .await?
        {
            self.store.check_by(name, self.clock.now()).await?;
            return Ok(StepOutcome::Conflict);
        }
        if planned.next.phase != mv.phase {
            tracing::info!(
                zone = name,
                from = mv.phase.name(),
                to = planned.next.phase.name(),
                "signed move: {}",
                planned.waiting
            );
        }
        #[cfg(any(test, feature = "test-hooks"))]
        self.crash_point(super::CrashPoint::Committed, name)?;
        if read.pending_effects || !decision.effects.is_empty() {
            self.perform_effects(name).await?;
        }
        Ok(StepOutcome::Stepped {
            from: row.zone.state,
            to: decision.state,
        })
    }

    /// One look at the move through both accounts (`engine::move_look`).
    async fn look_at(&self, zone: &str, a: &Accounts<'_, P::Account>) -> Look {
        super::move_look::look(
            a.source,
            a.target,
            self.observer.as_ref(),
            zone,
            &a.source_ns,
            &a.target_ns,
            self.clock.as_ref(),
        )
        .await
    }

    /// The move's accounts by their configured names, each asked for the zone.
    async fn move_accounts(
        &self,
        zone: &str,
        mv: &Move,
    ) -> Result<Found<'_, P::Account>, (String, Party)> {
        let account = |name: &str| {
            self.provider.account_named(name).ok_or_else(|| {
                (
                    format!(
                        "provider {name} of the signed move is not configured any more: put its [providers.{name}] back"
                    ),
                    Party::Operator,
                )
            })
        };
        let (source, target) = (account(&mv.source)?, account(&mv.target)?);
        let (s, t) = tokio::join!(source.zone(zone), target.zone(zone));
        if mv.phase == Phase::Done && matches!(s, Err(ProviderError::NotFound(_))) {
            return Ok(Found::SourceGone { target });
        }
        // A zone deleted at either account before the move is done is a person's to
        // repair (resolvers may still be sent there); anything else is the provider's.
        for (name, read) in [(&mv.source, &s), (&mv.target, &t)] {
            if let Err(ProviderError::NotFound(e)) = read {
                return Err((
                    format!(
                        "provider {name} no longer has the zone during the signed move ({e}): create it there again as it was, or resolvers sent there fail"
                    ),
                    Party::Operator,
                ));
            }
        }
        let on = |e: String| (e, Party::Provider);
        let source_ns = listed_ns(&mv.source, s).map_err(on)?;
        let target_ns = listed_ns(&mv.target, t).map_err(on)?;
        Ok(Found::Both(Accounts {
            source,
            target,
            source_ns,
            target_ns,
        }))
    }

    /// The lifecycle decision a move's step commits: the zone's state unchanged, the
    /// move in its facts, its wait in `held_by`, a note per phase, its alert folded into
    /// one (`signed_move_held`), its effects as outbox rows.
    fn move_decision(
        &self,
        read: &StepRow,
        mv: &Move,
        decision: &MoveDecision,
        on: Party,
        target_ns: &[String],
        now: Timestamp,
    ) -> Decision {
        let zone = &read.row.zone;
        let mut facts = zone.facts.clone();
        facts.signed_move = Some(decision.next.clone());
        // Something holds a move until it ends; `held_since` counts from its phase's
        // start, so that a phase that lasts is said.
        if decision.next.phase != mv.phase || facts.held_by.is_none() {
            facts.held_since = Some(now);
        }
        let since = *facts.held_since.get_or_insert(now);
        facts.held_by = Some(Hold::new(decision.waiting.clone(), on));
        let mut notes = Vec::new();
        if decision.next.phase != mv.phase {
            notes.push(AuditNote {
                from: zone.state,
                to: zone.state,
                reason: format!(
                    "signed move from provider {} to {}: {} -> {}; waiting for {}",
                    mv.source,
                    mv.target,
                    mv.phase.name(),
                    decision.next.phase.name(),
                    decision.waiting
                ),
            });
        }
        let alert = if decision.alerts.is_empty() {
            AlertCheck::clear(AlertKind::SignedMoveHeld)
        } else {
            AlertCheck::firing(AlertKind::SignedMoveHeld, decision.alerts.join("; "))
        };
        // Rule 11: a wait that does not end by itself is said. A phase waiting on the
        // registrar or the operator is late after `ds_overdue_after`; any other after its
        // own hold and `observation_failing_after` (a hold that keeps restarting).
        let phase = decision.next.phase;
        let late_after = match phase {
            Phase::AwaitingBothDs
            | Phase::AwaitingDelegation
            | Phase::AwaitingOldDsRemoval
            | Phase::Done => self.policy.ds_overdue_after,
            _ => {
                signed_move::phase_hold(&decision.next, &self.move_policy())
                    + self.policy.observation_failing_after
            }
        };
        let stalled = if now.since(since) > late_after {
            AlertCheck::firing(
                AlertKind::WaitStalled,
                format!(
                    "{}: the signed move has been in {} since {since}, waiting for {}",
                    mv.zone,
                    phase.name(),
                    decision.waiting
                ),
            )
        } else {
            AlertCheck::clear(AlertKind::WaitStalled)
        };
        let effects = decision
            .effects
            .iter()
            .filter_map(|e| self.move_effect(&decision.next, e, target_ns))
            .collect();
        Decision {
            state: zone.state,
            facts,
            effects,
            alerts: vec![alert, stalled],
            notes,
            wake_at: now.plus(self.policy.poll_waiting),
        }
    }

    /// A planner's effect as an outbox row.
    fn move_effect(&self, mv: &Move, effect: &MoveEffect, target_ns: &[String]) -> Option<Effect> {
        let account = |side: Side| match side {
            Side::Source => mv.source.clone(),
            Side::Target => mv.target.clone(),
        };
        let line = |ds: &crate::dnssec::Ds| {
            crate::dnssec::DsLine {
                owner: mv.zone.clone(),
                ttl: mv.ttls.ds.max(1),
                ds: ds.clone(),
            }
            .to_string()
        };
        Some(match effect {
            MoveEffect::TargetDnssecOn => Effect::MoveCall {
                account: account(Side::Target),
                call: MoveCall::DnssecOn,
            },
            MoveEffect::SourceDnssecOff => Effect::MoveCall {
                account: account(Side::Source),
                call: MoveCall::DnssecOff,
            },
            MoveEffect::CdsOff { side } => Effect::MoveCall {
                account: account(*side),
                call: MoveCall::CdsOff,
            },
            MoveEffect::SetForeign { side, keys } => Effect::MoveCall {
                account: account(*side),
                call: MoveCall::ForeignKeys {
                    keys: keys.clone(),
                    ttl: mv.ttls.dnskey.max(1),
                },
            },
            MoveEffect::Registrar(Instruction::AddDs { add, keep }) => Effect::MoveRequest {
                request: MoveRequest::AddDs {
                    ds_line: line(add),
                    keep: line(keep),
                },
            },
            MoveEffect::Registrar(Instruction::RemoveDs { remove, keep }) => Effect::MoveRequest {
                request: MoveRequest::RemoveDs {
                    ds_line: line(remove),
                    keep: line(keep),
                },
            },
            MoveEffect::Registrar(Instruction::ChangeNs) => {
                if target_ns.is_empty() {
                    return None;
                }
                Effect::MoveRequest {
                    request: MoveRequest::ChangeNs {
                        name_servers: target_ns.to_vec(),
                    },
                }
            }
        })
    }

    /// The move is over: the zone is the target's alone. Its facts are those of an
    /// `active` zone at the target (the next step's look reads the rest afresh).
    async fn end_move(
        &self,
        read: &StepRow,
        mv: &Move,
        target: &P::Account,
    ) -> Result<StepOutcome, EngineError> {
        let zone = &read.row.zone;
        // The target's key as the lifecycle follows it: the DS line of the key the move
        // had the parent publish, in the form `step` computes (so a key the target rolled
        // to since is a key change to `step`, announced in the safe order, and the
        // parent's DS no longer matching it is `step`'s alert to raise).
        let key = match target.dnssec_key(zone.name.as_str()).await {
            Ok(key) => key,
            Err(e) => {
                let why = format!("provider {}: {e}", mv.target);
                let planned = held(mv, format!("the move's end: {why}"), Party::Provider);
                let now = self.clock.now();
                let decision = self.move_decision(read, mv, &planned, Party::Provider, &[], now);
                let summary = held_summary(now, &planned);
                if !self
                    .store
                    .commit_step(read, &decision, &summary, now)
                    .await?
                {
                    self.store.check_by(zone.name.as_str(), now).await?;
                    return Ok(StepOutcome::Conflict);
                }
                return Ok(StepOutcome::Stepped {
                    from: zone.state,
                    to: zone.state,
                });
            }
        };
        let now = self.clock.now();
        let mut facts = zone.facts.clone();
        facts.signed_move = None;
        facts.held_by = None;
        facts.held_since = None;
        facts.settled_view = None;
        facts.served_keys_when_asked = None;
        facts.provider_ns = None;
        facts.delegated_at = mv.delegated_at;
        let moved = mv.target_key.as_ref().filter(|k| **k != key.dnskey);
        let ds = match moved {
            // Rolled since: the moved key's DS, in the provider's digest.
            Some(k) => crate::dnssec::DigestType::from_code(key.ds.digest_type)
                .ok()
                .and_then(|d| k.to_ds(&key.zone, d).ok())
                .unwrap_or_else(|| key.ds.clone()),
            None => key.ds.clone(),
        };
        facts.ds_line = Some(
            crate::dnssec::DsLine {
                owner: key.zone.clone(),
                ttl: key.ds_ttl,
                ds,
            }
            .to_string(),
        );
        // The largest TTLs seen bound later waits (rule 2): the move's count too.
        let larger = |known: Option<u32>, seen: u32| known.max(Some(seen).filter(|t| *t > 0));
        facts.max_dnskey_ttl = larger(facts.max_dnskey_ttl, mv.ttls.dnskey);
        facts.max_ds_ttl = larger(facts.max_ds_ttl, mv.ttls.ds);
        facts.ds_to_enter = None;
        facts.dnskey_to_enter = None;
        let decision = Decision {
            state: zone.state,
            facts,
            effects: Vec::new(),
            alerts: vec![
                AlertCheck::clear(AlertKind::SignedMoveHeld),
                AlertCheck::clear(AlertKind::WaitStalled),
            ],
            notes: vec![AuditNote {
                from: zone.state,
                to: zone.state,
                reason: format!(
                    "signed move from provider {} to {} ended: the zone is at provider {} only",
                    mv.source, mv.target, mv.target
                ),
            }],
            wake_at: now,
        };
        let summary = held_summary(
            now,
            &held(mv, "nothing: the move ended".into(), Party::Nobody),
        );
        if !self
            .store
            .commit_step(read, &decision, &summary, now)
            .await?
        {
            self.store.check_by(zone.name.as_str(), now).await?;
            return Ok(StepOutcome::Conflict);
        }
        tracing::info!(zone = zone.name.as_str(), "signed move ended");
        Ok(StepOutcome::Stepped {
            from: zone.state,
            to: zone.state,
        })
    }

    /// Move calls of unknown outcome, settled by what the look saw (rule 11).
    async fn settle_unknown_move_calls(
        &self,
        zone: &str,
        mv: &Move,
        look: &Look,
    ) -> Result<(), EngineError> {
        for item in self.store.unknown_calls(zone).await? {
            let Effect::MoveCall { account, call } = &item.effect else {
                continue;
            };
            let side = if *account == mv.source {
                Side::Source
            } else {
                Side::Target
            };
            let (key, foreign) = match side {
                Side::Source => (&look.source_key, &look.source_foreign),
                Side::Target => (&look.target_key, &look.target_foreign),
            };
            let took = match call {
                MoveCall::DnssecOn => key.as_ref().ok().map(Option::is_some),
                MoveCall::DnssecOff => key.as_ref().ok().map(Option::is_none),
                MoveCall::ForeignKeys { keys, .. } => foreign
                    .as_ref()
                    .ok()
                    .map(|now| now.len() == keys.len() && keys.iter().all(|k| now.contains(k))),
                MoveCall::CdsOff => look
                    .cds_published
                    .as_ref()
                    .ok()
                    .map(|sides| !sides.contains(&side)),
            };
            let Some(took) = took else { continue };
            self.settle_call(zone, &item, took, format!("provider {account}"))
                .await?;
        }
        Ok(())
    }

    /// Performs one of a move's outbox rows; `None` when it is not performed here (the
    /// lease is gone, or a registrar hook took it over).
    pub(super) async fn perform_move_effect(
        &self,
        zone: &str,
        item: &OutboxItem,
    ) -> Result<Option<(OutboxStatus, String)>, EngineError> {
        match &item.effect {
            Effect::MoveCall { account, call } => self.move_call(zone, item, account, call).await,
            Effect::MoveRequest { request } => {
                let n = match request {
                    MoveRequest::AddDs { ds_line, keep } => Notification::AddDs {
                        zone: zone.to_string(),
                        ds_line: ds_line.clone(),
                        keep: keep.clone(),
                    },
                    MoveRequest::RemoveDs { ds_line, keep } => Notification::RemoveDs {
                        zone: zone.to_string(),
                        ds_line: ds_line.clone(),
                        keep: keep.clone(),
                    },
                    MoveRequest::ChangeNs { name_servers } => Notification::Delegate {
                        zone: zone.to_string(),
                        name_servers: name_servers.clone(),
                    },
                };
                self.notify(n, item).await
            }
            _ => Ok(Some((
                OutboxStatus::Refused,
                "not a signed move's effect".to_string(),
            ))),
        }
    }

    /// Whether an owed request still stands on the move as it stands now (a crash or a
    /// failing hook left it owed while the move went on): a request sent late could break
    /// what the move now waits on (an NS change after a roll at the target, the source's
    /// DS removed while a parent delegates to the source again). Checked right before it
    /// is sent, on the move as the last step committed it.
    pub(super) async fn request_stands(
        &self,
        zone: &str,
        request: &MoveRequest,
    ) -> Result<Stands, EngineError> {
        let row = self
            .store
            .zone(zone)
            .await?
            .ok_or_else(|| StoreError::UnknownZone(zone.to_string()))?;
        let Some(mv) = row.zone.facts.signed_move else {
            return Ok(Stands::No(
                "the zone is not in a signed move any more".into(),
            ));
        };
        // Held on what only a person can repair: sent once it is repaired, if the phase
        // still wants it.
        if row.zone.facts.held_by.as_ref().map(|h| h.on) == Some(Party::Operator) {
            return Ok(Stands::Later);
        }
        let line_of = |key: Option<&crate::dnssec::Dnskey>| {
            key.and_then(|k| k.to_ds(&mv.zone, crate::dnssec::DigestType::Sha256).ok())
                .map(|ds| ds.to_string())
        };
        let names = |ds_line: &str, key: Option<&crate::dnssec::Dnskey>| {
            line_of(key).is_some_and(|ds| ds_line.ends_with(&ds))
        };
        let (phase, wanted) = match request {
            MoveRequest::AddDs { ds_line, .. } => {
                if !names(ds_line, mv.target_key.as_ref()) {
                    return Ok(Stands::No(
                        "it names a key the target no longer signs with".into(),
                    ));
                }
                (Phase::AwaitingBothDs, mv.phase == Phase::AwaitingBothDs)
            }
            MoveRequest::ChangeNs { .. } => (
                Phase::AwaitingDelegation,
                mv.phase == Phase::AwaitingDelegation,
            ),
            // The removal of a DS the target no longer signs with stands in any phase
            // before the NS change (nothing signs with that key); the source's only in
            // its own phase.
            MoveRequest::RemoveDs { ds_line, .. } => {
                if names(ds_line, Some(&mv.source_key)) {
                    (
                        Phase::AwaitingOldDsRemoval,
                        mv.phase == Phase::AwaitingOldDsRemoval,
                    )
                } else if names(ds_line, mv.target_key.as_ref()) {
                    return Ok(Stands::No("it names the key the target signs with".into()));
                } else {
                    (Phase::ExchangingKeys, true)
                }
            }
        };
        Ok(if wanted {
            Stands::Yes
        } else {
            Stands::No(format!(
                "the move is in {}, and the request belongs to {}",
                mv.phase.name(),
                phase.name()
            ))
        })
    }

    async fn move_call(
        &self,
        zone: &str,
        item: &OutboxItem,
        account: &str,
        call: &MoveCall,
    ) -> Result<Option<(OutboxStatus, String)>, EngineError> {
        let Some(client) = self.provider.account_named(account) else {
            return Ok(Some((
                OutboxStatus::Refused,
                format!(
                    "provider {account} is not configured: {} not performed",
                    item.effect.describe()
                ),
            )));
        };
        if *call == MoveCall::DnssecOff
            && let Some(refused) = self.source_off_refused(zone).await?
        {
            return Ok(Some((OutboxStatus::Refused, refused)));
        }
        if !self.claim_effect(zone, item).await? {
            return Ok(None);
        }
        let may_send = || self.lease_permit(zone);
        let result = match call {
            MoveCall::DnssecOn => client.set_dnssec(zone, true, &may_send).await.map(|_| ()),
            MoveCall::DnssecOff => client.set_dnssec(zone, false, &may_send).await.map(|_| ()),
            MoveCall::ForeignKeys { keys, ttl } => {
                client
                    .set_foreign_dnskeys(zone, keys, *ttl, &may_send)
                    .await
            }
            MoveCall::CdsOff => {
                client
                    .set_cds_publication(zone, crate::dnssec::CdsPublication::Nothing, &may_send)
                    .await
            }
        };
        let who = format!("provider {account}");
        Ok(Some(match result {
            Ok(()) => (
                OutboxStatus::Done,
                format!("{who}: {} (signed move)", done_words(call)),
            ),
            Err(e) => Self::call_failed(&who, item.effect.describe(), &e),
        }))
    }

    /// Rule 15 at the source's "DNSSEC off": the move as stored now, in the phase that
    /// switches it off, and a look taken now that `source_may_go_off` allows. `Some`: why
    /// it is refused.
    async fn source_off_refused(&self, zone: &str) -> Result<Option<String>, EngineError> {
        let row = self
            .store
            .zone(zone)
            .await?
            .ok_or_else(|| StoreError::UnknownZone(zone.to_string()))?;
        let refused = |why: String| {
            Ok(Some(format!(
                "guard refused switching DNSSEC off at the source: {why}"
            )))
        };
        let Some(mv) = row.zone.facts.signed_move else {
            return refused("the zone is not in a signed move".into());
        };
        if mv.phase != Phase::OldSigningOff {
            return refused(format!(
                "the move is in {}, not old_signing_off",
                mv.phase.name()
            ));
        }
        let accounts = match self.move_accounts(zone, &mv).await {
            Ok(Found::Both(a)) => a,
            Ok(Found::SourceGone { .. }) => {
                return refused("the source no longer lists the zone".into());
            }
            Err((why, _)) => return refused(why),
        };
        let look = self.look_at(zone, &accounts).await;
        match signed_move::source_may_go_off(&mv, &look, &self.move_policy()) {
            Ok(()) => Ok(None),
            Err(why) => refused(why),
        }
    }
}

/// Whether an owed request of a move is sent now.
pub(super) enum Stands {
    Yes,
    /// Not now: the move holds on what a person must repair.
    Later,
    /// Never: the move went on without it (why).
    No(String),
}

/// What `move_accounts` found: the source gone after the move (it ends), or both
/// accounts with their name servers.
enum Found<'a, A> {
    SourceGone { target: &'a A },
    Both(Accounts<'a, A>),
}

fn done_words(call: &MoveCall) -> String {
    match call {
        MoveCall::DnssecOn => "DNSSEC switched on".into(),
        MoveCall::DnssecOff => {
            "DNSSEC switched off (every parent server confirmed the target's delegation without the source's DS just before)".into()
        }
        MoveCall::ForeignKeys { keys, .. } if keys.is_empty() => {
            "publishes no other signer's DNSKEY".into()
        }
        MoveCall::ForeignKeys { keys, .. } => format!(
            "publishes the other signer's DNSKEY {}",
            keys.iter()
                .map(|k| k.key_tag().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        MoveCall::CdsOff => "publishes no CDS or CDNSKEY".into(),
    }
}

/// A decision that only says what holds the move (no look could be made); the caller
/// names the party (`on`), which the planner's phase alone would not tell.
fn held(mv: &Move, why: String, on: Party) -> MoveDecision {
    let alerts = if on == Party::Operator {
        vec![format!("{}: {why}", mv.zone)]
    } else {
        Vec::new()
    };
    MoveDecision {
        next: mv.clone(),
        effects: Vec::new(),
        waiting: why,
        alerts,
    }
}

/// A step without a look: the move's phase and wait only.
fn held_summary(at: Timestamp, planned: &MoveDecision) -> ObservationText {
    let whole = serde_json::json!({
        "at": at.to_string(),
        "provider": serving(&planned.next),
        "signed_move": {"phase": planned.next.phase.name(), "waiting": planned.waiting},
    });
    ObservationText {
        whole: whole.to_string(),
        brief: brief(&planned.next),
    }
}

/// The account that serves the zone to resolvers, as `status`, the console and the
/// alerts name it: the source until the delegation to the target is confirmed.
fn serving(mv: &Move) -> serde_json::Value {
    let account = if mv.phase >= Phase::OldDelegationWait {
        &mv.target
    } else {
        &mv.source
    };
    serde_json::json!({ "account": account })
}

fn brief(mv: &Move) -> String {
    serde_json::json!({"provider": serving(mv), "signed_move": mv.phase.name()}).to_string()
}

/// What the look saw, for `status` and the history: the move's phase and wait, each
/// address's answer in a line.
fn move_summary(look: &Look, decision: &MoveDecision) -> ObservationText {
    let answers = |a: &[signed_move::Answer<signed_move::ServedKeys>]| -> Vec<serde_json::Value> {
        a.iter()
            .map(|a| {
                serde_json::json!({
                    "addr": a.address,
                    "answer": match &a.answer {
                        Ok(s) => serde_json::json!({
                            "keys": s.keys.iter().map(|k| k.key_tag()).collect::<Vec<_>>(),
                            "signed_by": s.signed_by.iter().map(|k| k.key_tag()).collect::<Vec<_>>(),
                            "ttl": s.ttl,
                        }),
                        Err(e) => serde_json::json!(format!("unknown: {e}")),
                    },
                })
            })
            .collect()
    };
    let parents: Vec<serde_json::Value> = look
        .parents
        .iter()
        .map(|a| {
            serde_json::json!({
                "addr": a.address,
                "answer": match &a.answer {
                    Ok(p) => serde_json::json!({
                        "ds": p.ds.iter().map(|d| d.key_tag).collect::<Vec<_>>(),
                        "delegation": format!("{:?}", p.delegation).to_lowercase(),
                        "validated": p.validated,
                    }),
                    Err(e) => serde_json::json!(format!("unknown: {e}")),
                },
            })
        })
        .collect();
    let whole = serde_json::json!({
        "at": look.at.to_string(),
        "provider": serving(&decision.next),
        "signed_move": {
            "phase": decision.next.phase.name(),
            "waiting": decision.waiting,
            "source": answers(&look.source_children),
            "target": answers(&look.target_children),
            "parent": parents,
        },
    });
    ObservationText {
        whole: whole.to_string(),
        brief: brief(&decision.next),
    }
}
