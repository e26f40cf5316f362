//! A zone in a key rollover (DESIGN.md section 2, "Key rollovers", rule 16), as the engine
//! looks at it: the provider's key listing, every child address's DNSKEY set with its
//! TTL and the keys that sign it and the zone's data, every parent address's DS validated
//! (rule 10), the zone's largest TTL, mapped to `lifecycle::rollover::RollSeen`; asking,
//! never deciding. The decision is `lifecycle::rolling::decide`'s, committed by the one
//! step of `engine`. Here too: the roll's key calls and registrar requests performed from
//! the outbox, and its calls of unknown outcome settled by the listing (rule 11).

use crate::dns::observe::signals::is_delete_ds;
use crate::dns::{
    ChildView, DnskeyAnswer, DsAnswer, Evidence, ObserveError, Observer, ParentView, Signals,
};
use crate::lifecycle::rolling::{self, Stands};
use crate::lifecycle::rollover::{
    Answer, ChildRollSeen, KeyKind, ListedKey, ParentRollSeen, Roll, RollSeen,
};
use crate::lifecycle::{Decision, Effect, EffectKind, RollRequest, Timestamp};
use crate::provider::{KeyAlgorithm, KeyState, NewKey, Provider, ProviderError, ProviderKey};
use crate::store::{ObservationText, OutboxItem, OutboxStatus, StoreError};

use super::move_look::NO_ADDRESS;
use super::{Engine, EngineError, Notification};

/// What an `AddKey` of unknown outcome keeps on its row, for the next steps to read
/// (`RollSeen::add_key_unsettled`) until a listing settles it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct KeyMaybeAdded {
    key_maybe_added: String,
}

/// The provider's key listing in the machine's terms.
fn listed(read: Result<Option<Vec<ProviderKey>>, ProviderError>) -> Result<Vec<ListedKey>, String> {
    match read {
        Ok(Some(keys)) => Ok(keys
            .into_iter()
            .map(|k| ListedKey {
                id: k.id,
                dnskey: k.dnskey,
                active: k.state.active,
                published: k.state.published,
            })
            .collect()),
        Ok(None) => Err("the provider's API exposes no keys".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Every parent address's DS answer; validated only on [`Evidence::Validated`] (rule 10).
fn parents(view: Result<ParentView, ObserveError>) -> Vec<Answer<ParentRollSeen>> {
    let view = match view {
        Ok(view) => view,
        Err(e) => {
            return vec![Answer {
                address: NO_ADDRESS.into(),
                answer: Err(e.to_string()),
            }];
        }
    };
    let validated = matches!(view.evidence, Evidence::Validated);
    view.answers
        .iter()
        .map(|a| Answer {
            address: a.addr.to_string(),
            answer: match &a.answer {
                DsAnswer::Present { ds, ttl } => Ok(ParentRollSeen {
                    ds: ds.clone(),
                    ds_ttl: Some(*ttl),
                    validated,
                }),
                DsAnswer::Absent => Ok(ParentRollSeen {
                    ds: Vec::new(),
                    ds_ttl: None,
                    validated,
                }),
                DsAnswer::Unknown(reason) => Err(format!("DS unknown: {reason}")),
            },
        })
        .collect()
}

/// Every child address's DNSKEY set, its TTL and the tags that sign it (the observer's
/// self-signers, rule 4), beside `data` (the tags that sign the SOA, per address in the
/// view's order of the addresses that served keys).
fn children(
    view: &Result<ChildView, ObserveError>,
    mut data: impl Iterator<Item = Result<Vec<u16>, String>>,
) -> Vec<Answer<ChildRollSeen>> {
    let view = match view {
        Ok(view) => view,
        Err(e) => {
            return vec![Answer {
                address: NO_ADDRESS.into(),
                answer: Err(e.to_string()),
            }];
        }
    };
    view.answers
        .iter()
        .map(|a| Answer {
            address: a.addr.to_string(),
            answer: match &a.answer {
                DnskeyAnswer::Keys(k) => data
                    .next()
                    .unwrap_or_else(|| Err("no answer for the zone's data".into()))
                    .map(|data_signed_by| ChildRollSeen {
                        cds: match &k.signals {
                            Signals::Answered(p) => Some(
                                p.cds
                                    .iter()
                                    .filter(|d| !is_delete_ds(d))
                                    .map(|d| d.key_tag)
                                    .chain(p.cdnskey.iter().map(|k| k.key_tag()))
                                    .collect(),
                            ),
                            _ => None,
                        },
                        dnskey: k.keys.clone(),
                        dnskey_ttl: k.ttl,
                        dnskey_signed_by: k
                            .self_signers
                            .iter()
                            .filter_map(|&i| k.keys.get(i))
                            .map(|key| key.key_tag())
                            .collect(),
                        data_signed_by,
                    })
                    .map_err(|e| format!("the zone's data signatures unknown: {e}")),
                DnskeyAnswer::Absent => Ok(ChildRollSeen {
                    cds: Some(Vec::new()),
                    dnskey: Vec::new(),
                    dnskey_ttl: 0,
                    dnskey_signed_by: Vec::new(),
                    data_signed_by: Vec::new(),
                }),
                DnskeyAnswer::Unknown(reason) => Err(reason.to_string()),
            },
        })
        .collect()
}

impl<P: Provider + 'static, O: Observer + 'static> Engine<P, O> {
    /// One look at a rolling zone: asks, decides nothing. `add_key_unsettled` is left
    /// false; the step sets it from the outbox. `by_cds`: the roll sets the child's CDS
    /// (the parent takes the DS from it, or it is withdrawn while a registry scans), whose
    /// setting and every address's answers are asked too.
    async fn see_roll(&self, zone: &str, by_cds: bool) -> RollSeen {
        let child_view = async {
            if by_cds {
                self.observer.child_with_signals(zone).await
            } else {
                self.observer.child(zone).await
            }
        };
        let cds = async {
            if by_cds {
                self.provider
                    .cds_publication(zone)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|h| h.as_whole())
            } else {
                None
            }
        };
        let (keys, child, parent, ttl, cds) = tokio::join!(
            self.provider.keys(zone),
            child_view,
            // Every phase's parent question decides (rule 10): validated, always.
            self.observer.parent_validated(zone),
            self.provider.largest_ttl(zone),
            cds,
        );
        // The keys each address's SOA signatures are checked against: those it serves,
        // and those the provider lists, whose DNSKEY an address may not serve while they
        // sign (an algorithm rollover's new keys sign before they are published).
        let listed_keys: Vec<crate::dnssec::Dnskey> = match &keys {
            Ok(Some(keys)) => keys.iter().map(|k| k.dnskey.clone()).collect(),
            _ => Vec::new(),
        };
        let served: Vec<(std::net::IpAddr, Vec<crate::dnssec::Dnskey>)> = match &child {
            Ok(view) => view
                .answers
                .iter()
                .filter_map(|a| match &a.answer {
                    DnskeyAnswer::Keys(k) => {
                        let mut check = k.keys.clone();
                        for key in &listed_keys {
                            if !check.contains(key) {
                                check.push(key.clone());
                            }
                        }
                        Some((a.addr, check))
                    }
                    _ => None,
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let data = if served.is_empty() {
            Vec::new()
        } else {
            self.observer.soa_signers(zone, &served).await
        };
        RollSeen {
            keys: listed(keys),
            add_key_unsettled: false,
            children: children(&child, data.into_iter()),
            parents: parents(parent),
            zone_max_ttl: match ttl {
                Ok(Some(ttl)) => Ok(ttl),
                Ok(None) => Err("a record set has no known TTL".into()),
                Err(e) => Err(e.to_string()),
            },
            cds,
        }
    }

    /// One step's decision for a zone whose facts hold `roll`: the look, the roll's key
    /// calls of unknown outcome settled by its listing, an addition still unsettled
    /// told to the machine, decided by `lifecycle::rolling::decide`.
    pub(super) async fn decide_roll(
        &self,
        read: &crate::store::StepRow,
        roll: &Roll,
    ) -> Result<(Decision, ObservationText, Timestamp), EngineError> {
        let name = read.row.zone.name.as_str();
        let by_cds =
            rolling::with_parent_way(roll, read.row.zone.facts.parent_way.ds_path.as_ref())
                .via
                .sets_cds();
        let mut seen = self.see_roll(name, by_cds).await;
        if read.unknown_calls {
            seen.add_key_unsettled = self.settle_key_calls(name, roll, &seen).await?;
        }
        #[cfg(any(test, feature = "test-hooks"))]
        self.crash_point(super::CrashPoint::Observed, name).await?;
        let at = self.clock.now();
        #[cfg(not(any(test, feature = "test-hooks")))]
        let roll_policy = self.policy.roll_policy();
        #[cfg(any(test, feature = "test-hooks"))]
        let roll_policy = crate::lifecycle::rollover::RollPolicy {
            mutant_early_removal: super::test_hooks::mutant_early_removal(),
            ..self.policy.roll_policy()
        };
        let decision = rolling::decide(&read.row.zone, roll, &seen, at, &self.policy, &roll_policy);
        let account = self.provider.account(name);
        let summary = roll_text(&seen, roll, &decision, at, account.as_deref());
        Ok((decision, summary, at))
    }

    /// The roll's key calls of unknown outcome, settled by the listing where it tells
    /// (rule 11); true while an addition stays unsettled (no key is asked for again
    /// then: a second addition would add a second key).
    async fn settle_key_calls(
        &self,
        zone: &str,
        roll: &Roll,
        seen: &RollSeen,
    ) -> Result<bool, EngineError> {
        let mut unsettled = false;
        for item in self.store.unknown_calls(zone).await? {
            let kind = item.effect.kind();
            if !matches!(
                kind,
                EffectKind::AddKey | EffectKind::SetKeyState | EffectKind::DeleteKey
            ) {
                continue;
            }
            let took = seen
                .keys
                .as_ref()
                .ok()
                .and_then(|keys| rolling::key_call_took(roll, &item.effect, keys));
            match took {
                Some(took) => {
                    let said = format!("{}: the key listing", self.provider_named(zone));
                    self.settle_call(zone, &item, took, said).await?;
                }
                None => unsettled |= kind == EffectKind::AddKey,
            }
        }
        Ok(unsettled)
    }

    /// Performs one of a roll's outbox rows (the key calls claimed already); `None` when
    /// it is not performed here (a registrar hook took the request over).
    pub(super) async fn perform_roll_effect(
        &self,
        zone: &str,
        item: &OutboxItem,
    ) -> Result<Option<(OutboxStatus, String, Option<String>)>, EngineError> {
        let who = self.provider_named(zone);
        let may_send = || self.lease_permit(zone);
        let done = |note: String| Ok(Some((OutboxStatus::Done, note, None)));
        let failed = |e: &ProviderError| {
            let (status, note) = Self::call_failed(&who, item.effect.describe(), e);
            // What the next steps read: an addition that may have taken is not asked
            // for again until a listing settles it.
            let outcome = matches!(e, ProviderError::KeyMaybeAdded { .. }).then(|| {
                serde_json::to_string(&KeyMaybeAdded {
                    key_maybe_added: e.to_string(),
                })
                .unwrap_or_default()
            });
            Ok(Some((status, note, outcome)))
        };
        match &item.effect {
            Effect::AddKey {
                kind,
                algorithm,
                active,
                published,
            } => {
                let Some(alg) = KeyAlgorithm::from_number(*algorithm) else {
                    return Ok(Some((
                        OutboxStatus::Refused,
                        format!("a key of algorithm {algorithm} cannot be added"),
                        None,
                    )));
                };
                let key = NewKey {
                    kind: match kind {
                        KeyKind::Ksk => crate::provider::KeyKind::Ksk,
                        KeyKind::Zsk => crate::provider::KeyKind::Zsk,
                        KeyKind::Csk => crate::provider::KeyKind::Csk,
                    },
                    algorithm: alg,
                    state: KeyState {
                        active: *active,
                        published: *published,
                    },
                };
                match self.provider.add_key(zone, key, &may_send).await {
                    Ok(k) => done(format!(
                        "{who}: added key {} ({}, algorithm {algorithm}) for the roll",
                        k.key_tag(),
                        kind.name()
                    )),
                    Err(e) => failed(&e),
                }
            }
            Effect::SetKeyState {
                id,
                active,
                published,
            } => {
                let state = KeyState {
                    active: *active,
                    published: *published,
                };
                match self
                    .provider
                    .set_key_state(zone, id, state, &may_send)
                    .await
                {
                    Ok(()) => done(format!(
                        "{who}: key {id} {} and {}",
                        if *active { "signs" } else { "does not sign" },
                        if *published {
                            "is published"
                        } else {
                            "is not published"
                        }
                    )),
                    Err(e) => failed(&e),
                }
            }
            Effect::DeleteKey { id } => match self.provider.delete_key(zone, id, &may_send).await {
                Ok(()) => done(format!("{who}: key {id} deleted")),
                // Gone already: what the call wanted.
                Err(ProviderError::NotFound(_)) => {
                    done(format!("{who}: key {id} was gone already"))
                }
                Err(e) => failed(&e),
            },
            Effect::RollRequest { request } => {
                let n = match request {
                    RollRequest::AddDs { ds_line, keep } => Notification::AddDs {
                        zone: zone.to_string(),
                        ds_line: ds_line.clone(),
                        keep: keep.clone(),
                    },
                    RollRequest::RemoveDs { ds_line, keep } => Notification::RemoveDs {
                        zone: zone.to_string(),
                        ds_line: ds_line.clone(),
                        keep: keep.clone(),
                    },
                };
                Ok(self
                    .notify(n, item)
                    .await?
                    .map(|(status, note)| (status, note, None)))
            }
            _ => Ok(Some((
                OutboxStatus::Refused,
                "not a key rollover's effect".to_string(),
                None,
            ))),
        }
    }

    /// Whether an owed request still stands on the roll as the last step committed it
    /// (`lifecycle::rolling::request_stands`), checked right before it is sent.
    pub(super) async fn roll_request_stands(
        &self,
        zone: &str,
        request: &RollRequest,
    ) -> Result<Stands, EngineError> {
        let row = self
            .store
            .zone(zone)
            .await?
            .ok_or_else(|| StoreError::UnknownZone(zone.to_string()))?;
        let facts = &row.zone.facts;
        // A roll the provider makes on its own asks with the same requests.
        if let (None, Some(own)) = (&facts.key_roll, &facts.provider_roll) {
            let (add, ds_line) = match request {
                RollRequest::AddDs { ds_line, .. } => (true, ds_line),
                RollRequest::RemoveDs { ds_line, .. } => (false, ds_line),
            };
            return Ok(match own.request_stands(add, ds_line) {
                Ok(()) => Stands::Yes,
                Err(why) => Stands::No(why),
            });
        }
        Ok(rolling::request_stands(
            facts.key_roll.as_ref(),
            facts.wait.held_by.as_ref(),
            request,
        ))
    }
}

/// What a rolling zone's step saw, for `status` and the history: the roll's phase and
/// wait as the decision leaves them, the listing and each address's answer.
fn roll_text(
    seen: &RollSeen,
    roll: &Roll,
    decision: &Decision,
    at: Timestamp,
    account: Option<&str>,
) -> ObservationText {
    let provider = serde_json::json!({ "account": account });
    let (phase, method) = match &decision.facts.key_roll {
        Some(next) => (next.phase.name(), next.method.name()),
        None => ("done", roll.method.name()),
    };
    let waiting = decision
        .facts
        .wait
        .held_by
        .as_ref()
        .map_or("nothing: the roll ended", |h| h.what.as_str());
    let keys = match &seen.keys {
        Ok(keys) => serde_json::json!(
            keys.iter()
                .map(|k| serde_json::json!({
                    "id": k.id,
                    "tag": k.dnskey.key_tag(),
                    "flags": k.dnskey.flags,
                    "algorithm": k.dnskey.algorithm,
                    "active": k.active,
                    "published": k.published,
                }))
                .collect::<Vec<_>>()
        ),
        Err(e) => serde_json::json!(format!("unknown: {e}")),
    };
    let children: Vec<serde_json::Value> = seen
        .children
        .iter()
        .map(|a| {
            serde_json::json!({
                "addr": a.address,
                "answer": match &a.answer {
                    Ok(c) => serde_json::json!({
                        "keys": c.dnskey.iter().map(|k| k.key_tag()).collect::<Vec<_>>(),
                        "ttl": c.dnskey_ttl,
                        "dnskey_signed_by": c.dnskey_signed_by,
                        "data_signed_by": c.data_signed_by,
                    }),
                    Err(e) => serde_json::json!(format!("unknown: {e}")),
                },
            })
        })
        .collect();
    let parents: Vec<serde_json::Value> = seen
        .parents
        .iter()
        .map(|a| {
            serde_json::json!({
                "addr": a.address,
                "answer": match &a.answer {
                    Ok(p) => serde_json::json!({
                        "ds": p.ds.iter().map(|d| d.key_tag).collect::<Vec<_>>(),
                        "ttl": p.ds_ttl,
                        "validated": p.validated,
                    }),
                    Err(e) => serde_json::json!(format!("unknown: {e}")),
                },
            })
        })
        .collect();
    let whole = serde_json::json!({
        "at": at.to_string(),
        "provider": provider,
        "key_roll": {
            "method": method,
            "phase": phase,
            "waiting": waiting,
            "keys": keys,
            "child": children,
            "parent": parents,
        },
    });
    ObservationText {
        whole: whole.to_string(),
        brief: serde_json::json!({"provider": provider, "key_roll": phase}).to_string(),
    }
}
