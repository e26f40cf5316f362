//! The last line of defence before DNSSEC is switched off at the provider (safety rules
//! 1 and 2). Kept apart from `step` on purpose: a bug in `step` cannot bypass it. The
//! engine calls it with a parent observation taken immediately before the provider call.

use super::facts::Facts;
use super::policy::Policy;
use super::rules::{disable_deadline, evidence_acceptable};
use crate::dns::delegation::{self, DelegationMatch};
use crate::dns::{DelegationVerdict, DsAnswer, Evidence, ParentView};
use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardRefusal {
    #[error("the parent could not be observed: {0}")]
    ParentUnobservable(String),
    #[error("parent server {server} ({addr}) gave no answer: {reason}")]
    ParentUnknown {
        server: String,
        addr: String,
        reason: String,
    },
    #[error("parent server {server} ({addr}) still publishes a DS")]
    DsPresent { server: String, addr: String },
    #[error("no parent server answered at all")]
    NoParentServers,
    #[error("the parent's answers are not validated evidence: {0}")]
    Unvalidated(String),
    #[error("the time the DS was gone everywhere is not recorded")]
    NoTGone,
    #[error(
        "the zone was never delegated to the provider's name servers at every parent server, and {0}: it may be moving in"
    )]
    NotDelegatedHere(String),
    #[error("the DS TTL and margin run until {until}, now is {now}")]
    TooEarly { until: Timestamp, now: Timestamp },
}

/// Allows switching DNSSEC off only if every parent address answers "no DS" now, and
/// `T_gone + max DS TTL + margin` has passed; for a zone never delegated to the provider's
/// name servers at every parent address, only if every one of them does so now (a move
/// in is not switched off before its NS change; an unknown delegation never counts).
pub fn may_disable(
    fresh_parent: &Result<ParentView, String>,
    facts: &Facts,
    now: Timestamp,
    policy: &Policy,
) -> Result<(), GuardRefusal> {
    let parent = fresh_parent
        .as_ref()
        .map_err(|e| GuardRefusal::ParentUnobservable(e.clone()))?;
    if parent.answers.is_empty() {
        return Err(GuardRefusal::NoParentServers);
    }
    if !evidence_acceptable(&parent.evidence, policy) {
        return Err(GuardRefusal::Unvalidated(match &parent.evidence {
            Evidence::Insecure(why) => format!(
                "the parent zone is insecure ({why}) and dns.require_validated_evidence is set"
            ),
            _ => "the answers were not validated".to_string(),
        }));
    }
    for a in &parent.answers {
        match &a.answer {
            DsAnswer::Absent => {}
            DsAnswer::Present { .. } => {
                return Err(GuardRefusal::DsPresent {
                    server: a.server.to_string(),
                    addr: a.addr.to_string(),
                });
            }
            DsAnswer::Unknown(reason) => {
                return Err(GuardRefusal::ParentUnknown {
                    server: a.server.to_string(),
                    addr: a.addr.to_string(),
                    reason: reason.to_string(),
                });
            }
        }
    }
    let until = disable_deadline(&facts.lifecycle, policy).ok_or(GuardRefusal::NoTGone)?;
    if now < until {
        return Err(GuardRefusal::TooEarly { until, now });
    }
    if !facts.delegation.seen_at_provider {
        let judged =
            delegation::assess(&parent.delegations, facts.delegation.provider_ns.as_deref());
        if judged.verdict != DelegationVerdict::Provider {
            let why = match judged
                .servers
                .iter()
                .find(|s| s.matches != DelegationMatch::Provider)
            {
                Some(s) => match &s.unknown {
                    Some(reason) => format!(
                        "parent server {} ({}) gave no delegation: {reason}",
                        s.server, s.addr
                    ),
                    None => format!(
                        "parent server {} ({}) does not delegate to them",
                        s.server, s.addr
                    ),
                },
                None => format!("the delegation is {}", judged.verdict),
            };
            return Err(GuardRefusal::NotDelegatedHere(why));
        }
    }
    Ok(())
}
