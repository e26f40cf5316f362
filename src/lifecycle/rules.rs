//! The timing and evidence rules that `step`, the guard, the alert judge and the waits
//! all apply, each written once here (DESIGN.md's safety rules 2, 9 and 10), and which
//! looks must be validated.

use super::facts::{DelegationFacts, Facts, LifecycleFacts, ParentWayFacts};
use super::model::Zone;
use super::policy::Policy;
use super::state::{Intent, State};
use crate::dns::{DelegationVerdict, Evidence};
use crate::dnssec::CdsPublication;
use crate::time::Timestamp;

/// `T_gone + max DS TTL + max DNSKEY TTL + margin` (safety rule 2), or `None` before the
/// DS was gone. A resolver may validate the DNSKEY with a DS cached until its last second,
/// then trust the key for the DNSKEY TTL and fail unsigned answers until then (seen with
/// Unbound in the end-to-end suite). A TTL never seen gets the assumed one: a DS may have
/// been published and withdrawn while a parent server could not be observed.
pub fn disable_deadline(facts: &LifecycleFacts, policy: &Policy) -> Option<Timestamp> {
    let secs = |ttl: Option<u32>| {
        ttl.map_or(policy.assumed_ds_ttl, |t| {
            std::time::Duration::from_secs(u64::from(t))
        })
    };
    facts.t_gone.map(|gone| {
        gone.plus(secs(facts.max_ds_ttl))
            .plus(secs(facts.max_dnskey_ttl))
            .plus(policy.propagation_margin)
    })
}

/// `T_delegated + old NS TTL + margin` (safety rule 9), or `None` when the delegation was
/// not seen coming to the provider. An old NS TTL never seen gets the assumed one.
pub fn delegation_hold_until(facts: &DelegationFacts, policy: &Policy) -> Option<Timestamp> {
    facts.delegated_at.map(|at| {
        let ttl = facts.old_ns_ttl.map_or(policy.assumed_ns_ttl, |t| {
            std::time::Duration::from_secs(u64::from(t))
        });
        at.plus(ttl).plus(policy.propagation_margin)
    })
}

/// Safety rule 14: what the provider is to publish as the zone's CDS/CDNSKEY after a
/// step that leaves the zone in `state` with `facts`. A CDS is an announcement: the key's
/// exactly while its DS may be announced (`ds_to_enter`, rules 4, 8 and 9) on the way to
/// `active` and in it, unless the intent is `disabled`; the delete request only with the
/// intent `disabled`, from `awaiting_ds_removal` until DNSSEC is off; nothing otherwise.
pub fn cds_wanted(intent: Intent, state: Option<State>, facts: &LifecycleFacts) -> CdsPublication {
    match (intent, state) {
        (Intent::Disabled, Some(State::AwaitingDsRemoval | State::TtlWait | State::Disabling)) => {
            CdsPublication::Delete
        }
        (Intent::Disabled, _) => CdsPublication::Nothing,
        (_, Some(State::AwaitingDs | State::DsObserved | State::Active))
            if facts.ds_to_enter.is_some() =>
        {
            CdsPublication::Key
        }
        _ => CdsPublication::Nothing,
    }
}

/// Safety rule 10: validated evidence, or a provably insecure parent unless the operator
/// requires validated evidence everywhere. Unchecked (a routine look) never decides.
pub fn evidence_acceptable(evidence: &Evidence, policy: &Policy) -> bool {
    match evidence {
        Evidence::Validated => true,
        Evidence::Insecure(_) => !policy.require_validated_evidence,
        Evidence::Unchecked => false,
    }
}

/// When the DS was asked for at the registrar: at its announcement, or once the registry
/// was late to act on the child's CDS. What `ds_unpublished_overdue` counts from.
pub fn ds_request_at(facts: &Facts) -> Option<Timestamp> {
    match (
        facts.lifecycle.ds_announced_at,
        facts.parent_way.registry_missed_at,
    ) {
        (Some(a), Some(m)) => Some(a.max(m)),
        (a, m) => a.or(m),
    }
}

/// When the DS removal was asked for at the registrar: on entering the state (`since`),
/// or once the registry was late to act on the CDS delete request.
pub fn removal_request_at(facts: &ParentWayFacts, since: Timestamp) -> Timestamp {
    facts.registry_missed_at.unwrap_or(since)
}

/// What one look at a zone asks beyond the parent's DS and NS and the child's DNSKEY:
/// decided here, by the zone's state and facts, and asked by the engine as said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// The parent's answers validated from the trust anchor (safety rule 10).
    pub validated_parent: bool,
    /// Our validator's and the validating resolvers' view of the zone.
    pub validation: bool,
    /// The zone's largest TTL from the provider's RRsets (for the enabling hold).
    pub zone_ttl: bool,
    /// A settled zone delegated to the provider's name servers, whose set is known: the
    /// set remembered is used, and the provider asked again only when the parent
    /// disagrees with it; the paged listing may stand in for its DNSSEC answer.
    pub settled: bool,
    /// The zone is where a DS request may be made (its announcement, its removal) or
    /// waits.
    pub ds_request: bool,
    /// The parent's way for a DS (its DSYNC, `parent_way::resolve`): where a DS request
    /// may be made or waits, when the one remembered is older than
    /// `parent_way::PATH_REFRESH`.
    pub ds_path: bool,
}

impl Look {
    pub fn at(zone: &Zone, now: Timestamp) -> Self {
        // Safety rule 10: the looks that can lead to a decision that takes a domain down
        // (T_gone, the DS seen, leaving `awaiting_delegation`, the move in's first step)
        // are validated; routine looks at settled zones are not.
        let validated_parent = match zone.state {
            Some(
                State::AwaitingDsRemoval
                | State::TtlWait
                | State::Disabling
                | State::AwaitingDs
                | State::DsObserved
                | State::AwaitingDelegation,
            ) => true,
            None => zone.intent != Intent::None,
            // A roll the provider makes on its own asks the old DS removed on what
            // every parent address says.
            Some(_) if zone.facts.provider_roll.is_some() => true,
            Some(_) => matches!(
                zone.facts.delegation.verdict,
                Some(DelegationVerdict::Foreign | DelegationVerdict::Mixed)
            ),
        };
        let settled = zone.state.is_some_and(State::is_steady)
            && zone.facts.delegation.verdict == Some(DelegationVerdict::Provider)
            && zone.facts.delegation.provider_ns.is_some();
        Self {
            validated_parent,
            validation: matches!(
                zone.state,
                Some(State::AwaitingDs | State::DsObserved | State::Active)
            ),
            zone_ttl: zone.state == Some(State::Enabling),
            settled,
            ds_request: may_request_ds(zone),
            ds_path: may_request_ds(zone)
                && zone
                    .facts
                    .parent_way
                    .ds_path_at
                    .is_none_or(|at| now >= at.plus(super::parent_way::PATH_REFRESH)),
        }
    }

    /// The provider's CDS setting (rule 14): asked where a step may change it, at every
    /// look but a settled zone's, and where a DS request may go by the CDS.
    pub fn cds(&self) -> bool {
        !self.settled || self.ds_request
    }
}

/// The zone is where a DS request may be made (its announcement, its removal) or waits.
fn may_request_ds(zone: &Zone) -> bool {
    match zone.state {
        Some(State::Enabling | State::AwaitingDs | State::AwaitingDsRemoval) => true,
        Some(State::DsObserved | State::Active) => zone.intent == Intent::Disabled,
        _ => false,
    }
}
