//! Safety rule 10: decisions that can take a domain down rest on validated evidence.

use std::time::Duration;

use super::facts::{DelegationFacts, LifecycleFacts};
use super::tests::{C, HOUR, P, T0, World, firing, provider_key, zone};
use super::*;
use crate::dns::{DsAnswer, Evidence, UnknownReason};

fn with_evidence(mut obs: Observation, evidence: Evidence) -> Observation {
    if let Ok(parent) = &mut obs.parent {
        parent.evidence = evidence;
    }
    obs
}

fn removing() -> Zone {
    let mut z = zone(Some(State::AwaitingDsRemoval), Intent::Disabled);
    z.facts.lifecycle.ds_line = Some("child.test. 3600 IN DS 1 13 2 AA".into());
    z.facts.lifecycle.max_ds_ttl = Some(3600);
    z
}

/// "Gone" sets T_gone only on validated evidence; an unchecked look, or an unsigned
/// parent when the operator requires validation, decides nothing.
#[test]
fn t_gone_needs_validated_evidence() {
    let w = World::new();
    let absent = w.obs(T0, Some(true), &[P::No, P::No], &[C::Serves]);

    let mut z = removing();
    let d = w.run(&mut z, &with_evidence(absent.clone(), Evidence::Unchecked));
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert_eq!(z.facts.lifecycle.t_gone, None);

    let mut z = removing();
    let d = w.run(&mut z, &absent);
    assert_eq!(d.state, Some(State::TtlWait), "validated");

    // An unsigned parent: today's authoritative rule, unless validation is required.
    let insecure = with_evidence(absent.clone(), Evidence::Insecure("no DS for test.".into()));
    let mut z = removing();
    let d = w.run(&mut z, &insecure);
    assert_eq!(d.state, Some(State::TtlWait));
    assert_eq!(firing(&d, AlertKind::EvidenceUnvalidated), None);

    let strict = World {
        policy: Policy {
            require_validated_evidence: true,
            ..Policy::default()
        },
        ..World::new()
    };
    let mut z = removing();
    let d = strict.run(&mut z, &insecure);
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert!(
        firing(&d, AlertKind::EvidenceUnvalidated).is_some_and(|m| m.contains("test.")),
        "{:?}",
        d.alerts
    );
    let d = strict.run(&mut z, &absent);
    assert_eq!(d.state, Some(State::TtlWait));
    assert!(
        d.alerts
            .iter()
            .any(|c| c.kind == AlertKind::EvidenceUnvalidated && c.firing.is_none()),
        "resolved once validated"
    );
}

/// A forged "no DS" at one address fails validation: unknown, so never unanimous.
#[test]
fn a_bogus_proof_is_unknown_and_never_gone() {
    let w = World::new();
    let mut obs = w.obs(T0, Some(true), &[P::No, P::No], &[C::Serves]);
    if let Ok(parent) = &mut obs.parent {
        parent.answers[1].answer = DsAnswer::Unknown(UnknownReason::BogusProof(
            "NODATA without a signed NSEC or NSEC3".into(),
        ));
    }
    let mut z = removing();
    let d = w.run(&mut z, &obs);
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert_eq!(z.facts.lifecycle.t_gone, None);
}

/// The DS counts as published everywhere only on validated answers.
#[test]
fn ds_observed_needs_validated_evidence() {
    let w = World::new();
    let awaiting = || {
        let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
        z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
        z.facts.lifecycle.ds_announced_at = Some(T0);
        z
    };
    let published = w.obs(T0, Some(true), &[P::Ds(3600), P::Ds(3600)], &[C::Serves]);
    let mut z = awaiting();
    let d = w.run(
        &mut z,
        &with_evidence(published.clone(), Evidence::Unchecked),
    );
    assert_eq!(d.state, Some(State::AwaitingDs));
    let mut z = awaiting();
    let d = w.run(&mut z, &published);
    assert_eq!(d.state, Some(State::DsObserved));
}

/// The last look before "DNSSEC off": the guard refuses unvalidated evidence, and
/// accepts an unsigned parent's only when validation is not required.
#[test]
fn the_guard_needs_validated_evidence() {
    let w = World::new();
    let mut facts = Facts {
        lifecycle: LifecycleFacts {
            t_gone: Some(T0),
            max_ds_ttl: Some(60),
            max_dnskey_ttl: Some(60),
            ..LifecycleFacts::default()
        },
        delegation: DelegationFacts {
            // Once delegated to the provider everywhere: no delegation to prove.
            seen_at_provider: true,
            ..DelegationFacts::default()
        },
        ..Facts::default()
    };
    facts.health.failures = 0;
    let later = T0.plus(HOUR * 3).plus(Duration::from_secs(1));
    let view = |e: Evidence| {
        let mut p = w.parent(&[P::No, P::No]);
        p.evidence = e;
        Ok(p)
    };
    assert_eq!(
        may_disable(&view(Evidence::Validated), &facts, later, &w.policy),
        Ok(())
    );
    assert!(matches!(
        may_disable(&view(Evidence::Unchecked), &facts, later, &w.policy),
        Err(GuardRefusal::Unvalidated(_))
    ));
    let insecure = || view(Evidence::Insecure("no DS for test.".into()));
    assert_eq!(may_disable(&insecure(), &facts, later, &w.policy), Ok(()));
    let strict = Policy {
        require_validated_evidence: true,
        ..Policy::default()
    };
    assert!(matches!(
        may_disable(&insecure(), &facts, later, &strict),
        Err(GuardRefusal::Unvalidated(_))
    ));
}
