//! A zone in a signed move (DESIGN.md section 2, "Signed moves", rule 15), as the
//! engine looks at it: both accounts asked by name, one look (`move_look`) at every
//! address of both, mapped to `lifecycle::moving::MoveSeen`; the decision is
//! `lifecycle::moving::decide`'s, committed by the one step of `engine`. Here too: the
//! move's provider calls and registrar requests performed from the outbox, and the
//! source's "DNSSEC off" behind `source_may_go_off` on a look taken right before the
//! call, as the disable guard does for rule 1.

use crate::dns::Observer;
use crate::lifecycle::hold::Party;
use crate::lifecycle::moving::{self, MoveSeen, Stands};
use crate::lifecycle::signed_move::{self, Move, MoveLook, Phase};
use crate::lifecycle::{Decision, Effect, MoveCall, MoveRequest, Timestamp};
use crate::provider::{HostedZone, Provider, ProviderError};
use crate::store::{ObservationText, OutboxItem, OutboxStatus, StoreError};

use super::{Engine, EngineError, Notification};

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
    /// What a step of a zone in a signed move sees: a look at both accounts, the target's
    /// key once the move is done and the source no longer lists the zone, or why no look
    /// could be made (and on whom).
    pub(super) async fn see_move(&self, name: &str, mv: &Move) -> MoveSeen {
        match self.move_accounts(name, mv).await {
            Err((why, on, account)) => MoveSeen::Held { why, on, account },
            Ok(Found::SourceGone { target }) => MoveSeen::SourceGone {
                target_key: target.dnssec_key(name).await.map_err(|e| e.to_string()),
            },
            Ok(Found::Both(a)) => MoveSeen::Looked {
                look: self.look_at(name, &a).await,
                target_ns: a.target_ns,
            },
        }
    }

    /// One step's decision for a zone whose facts hold `mv`: what it saw, decided by
    /// `lifecycle::moving::decide`, and the summary `status` shows.
    pub(super) async fn decide_move(
        &self,
        read: &crate::store::StepRow,
        mv: &Move,
    ) -> Result<(Decision, ObservationText, Timestamp), EngineError> {
        let name = read.row.zone.name.as_str();
        let seen = self.see_move(name, mv).await;
        if read.unknown_calls
            && let MoveSeen::Looked { look, .. } = &seen
        {
            self.settle_unknown_move_calls(name, mv, look).await?;
        }
        #[cfg(any(test, feature = "test-hooks"))]
        self.crash_point(super::CrashPoint::Observed, name).await?;
        let at = self.clock.now();
        let decision = moving::decide(
            &read.row.zone,
            mv,
            &seen,
            at,
            &self.policy,
            &self.policy.move_policy(),
        );
        let summary = move_text(&seen, mv, &decision, at);
        Ok((decision, summary, at))
    }

    /// One look at the move through both accounts (`engine::move_look`).
    async fn look_at(&self, zone: &str, a: &Accounts<'_, P::Account>) -> MoveLook {
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

    /// The move's accounts by their configured names, each asked for the zone; `Err`:
    /// why not, on whom, and the account it is about.
    async fn move_accounts(
        &self,
        zone: &str,
        mv: &Move,
    ) -> Result<Found<'_, P::Account>, (String, Party, Option<String>)> {
        let account = |name: &str| {
            self.provider.account_named(name).ok_or_else(|| {
                (
                    format!(
                        "provider {name} of the signed move is not configured any more: put its [providers.{name}] back"
                    ),
                    Party::Operator,
                    Some(name.to_string()),
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
                    Some(name.clone()),
                ));
            }
        }
        let on = |name: &str, e: String| (e, Party::Provider, Some(name.to_string()));
        let source_ns = listed_ns(&mv.source, s).map_err(|e| on(&mv.source, e))?;
        let target_ns = listed_ns(&mv.target, t).map_err(|e| on(&mv.target, e))?;
        Ok(Found::Both(Accounts {
            source,
            target,
            source_ns,
            target_ns,
        }))
    }

    /// Move calls of unknown outcome, settled by what the look saw (rule 11); a call of
    /// the zone's own lifecycle from before the move (its CDS, say), by the account its
    /// row names, asked by name (a row naming none cannot be told during the move).
    async fn settle_unknown_move_calls(
        &self,
        zone: &str,
        mv: &Move,
        look: &MoveLook,
    ) -> Result<(), EngineError> {
        for item in self.store.unknown_calls(zone).await? {
            let Effect::MoveCall { account, call } = &item.effect else {
                if let Some(account) = &item.account {
                    self.settle_at_account(zone, &item, account).await?;
                }
                continue;
            };
            let Some(took) = moving::call_took(mv, account, call, look) else {
                continue;
            };
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

    /// Whether an owed request still stands on the move as the last step committed it
    /// (`lifecycle::moving::request_stands`), checked right before it is sent.
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
        let facts = &row.zone.facts;
        Ok(moving::request_stands(
            facts.signed_move.as_ref(),
            facts.wait.held_by.as_ref(),
            request,
        ))
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
            Err((why, ..)) => return refused(why),
        };
        let look = self.look_at(zone, &accounts).await;
        match signed_move::source_may_go_off(&mv, &look, &self.policy.move_policy()) {
            Ok(()) => Ok(None),
            Err(why) => refused(why),
        }
    }
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

/// What a moving zone's step saw, for `status` and the history: the move's phase and wait
/// as the decision leaves them, and each address's answer where a look was made.
fn move_text(seen: &MoveSeen, mv: &Move, decision: &Decision, at: Timestamp) -> ObservationText {
    let (next, waiting) = match &decision.facts.signed_move {
        Some(next) => (
            next,
            decision
                .facts
                .wait
                .held_by
                .as_ref()
                .map_or("", |h| h.what.as_str()),
        ),
        None => (mv, "nothing: the move ended"),
    };
    let brief = brief(next);
    let whole = match seen {
        MoveSeen::Looked { look, .. } => looked(look, next, waiting),
        _ => serde_json::json!({
            "at": at.to_string(),
            "provider": serving(next),
            "signed_move": {"phase": next.phase.name(), "waiting": waiting},
        }),
    };
    ObservationText {
        whole: whole.to_string(),
        brief,
    }
}

/// The account that serves the zone to resolvers (`lifecycle::moving::serving_account`).
fn serving(mv: &Move) -> serde_json::Value {
    serde_json::json!({ "account": moving::serving_account(mv) })
}

fn brief(mv: &Move) -> String {
    serde_json::json!({"provider": serving(mv), "signed_move": mv.phase.name()}).to_string()
}

/// A look's answers, an address a line.
fn looked(look: &MoveLook, next: &Move, waiting: &str) -> serde_json::Value {
    let answers = |a: &[signed_move::Answer<signed_move::ChildSeen>]| -> Vec<serde_json::Value> {
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
    serde_json::json!({
        "at": look.at.to_string(),
        "provider": serving(next),
        "signed_move": {
            "phase": next.phase.name(),
            "waiting": waiting,
            "source": answers(&look.source_children),
            "target": answers(&look.target_children),
            "parent": parents,
        },
    })
}
