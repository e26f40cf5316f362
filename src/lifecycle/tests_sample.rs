//! Sampled looks (DESIGN.md section 4): which zones may be sampled, the standard a full
//! look leaves for them, and every difference a sample must not let through.

use super::sample::{Sample, SettledView, disagreement, may_sample};
use super::tests::{C, D, HOUR, P, T0, World, zone};
use super::*;
use crate::dns::{DnskeyAnswer, ValidationVerdict};

/// A routine look: the provider's word from its listing, not asked now.
fn routine(mut obs: Observation) -> Observation {
    obs.provider_asked = false;
    obs
}

/// An `active` zone after a routine full look at which three parent addresses and two
/// name server addresses all said the same.
fn settled_active(w: &World) -> Zone {
    let mut z = zone(Some(State::Active), Intent::Enabled);
    let mut obs = routine(w.obs(
        T0,
        Some(true),
        &[P::Ds(3600), P::Ds(3600), P::Ds(3600)],
        &[C::Serves, C::Serves],
    ));
    obs.validation = ValidationVerdict::Secure;
    w.run(&mut z, &obs);
    assert_eq!(z.state, Some(State::Active));
    z
}

fn settled_disabled(w: &World) -> Zone {
    let mut z = zone(Some(State::Disabled), Intent::Disabled);
    w.run(
        &mut z,
        &routine(w.obs(
            T0,
            Some(false),
            &[P::No, P::No, P::No],
            &[C::Unsigned, C::Unsigned],
        )),
    );
    assert_eq!(z.state, Some(State::Disabled));
    z
}

fn sample(w: &World, listed: Option<bool>, parent: &[P], deleg: &[D], child: &[C]) -> Sample {
    Sample {
        at: T0.plus(HOUR),
        listed,
        parent: Ok(w.parent_delegating(parent, deleg)),
        child: Ok(w.child(child)),
    }
}

#[test]
fn only_a_quiet_settled_zone_after_a_unanimous_full_look_is_sampled() {
    let w = World::new();
    let p = &w.policy;
    let z = settled_active(&w);
    let view = z
        .facts
        .routine
        .settled_view
        .clone()
        .expect("a unanimous full look");
    assert_ne!(view.parent_ds, "none");
    let next = T0.plus(HOUR);
    assert!(may_sample(&z, true, Some(T0), next, p));
    // An open alert, a call of unknown outcome or an owed effect: a full look.
    assert!(!may_sample(&z, false, Some(T0), next, p));
    // No full look, or the last one `full_look_every` old.
    assert!(!may_sample(&z, true, None, next, p));
    assert!(!may_sample(
        &z,
        true,
        Some(T0),
        T0.plus(p.full_look_every),
        p
    ));
    // The operator asked for the other way.
    let asked_off = Zone {
        intent: Intent::Disabled,
        ..z.clone()
    };
    assert!(!may_sample(&asked_off, true, Some(T0), next, p));
    let d = settled_disabled(&w);
    assert!(may_sample(&d, true, Some(T0), next, p));
    let asked_on = Zone {
        intent: Intent::Enabled,
        ..d
    };
    assert!(!may_sample(&asked_on, true, Some(T0), next, p));

    // Any address saying otherwise (or nothing) at the full look: no standard, no sample.
    for (i, (parent, child)) in [
        (vec![P::Ds(3600), P::Ds(3600), P::Timeout], vec![C::Serves]),
        (vec![P::Ds(3600), P::WrongDs, P::Ds(3600)], vec![C::Serves]),
        (
            vec![P::Ds(3600), P::Ds(3600), P::Ds(3600)],
            vec![C::Serves, C::Refused],
        ),
        (
            vec![P::Ds(3600), P::Ds(3600), P::Ds(3600)],
            vec![C::Serves, C::OldKey],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let mut z = settled_active(&w);
        let mut obs = routine(w.obs(T0.plus(HOUR), Some(true), &parent, &child));
        obs.validation = ValidationVerdict::Secure;
        w.run(&mut z, &obs);
        assert_eq!(z.facts.routine.settled_view, None, "case {i}");
        assert!(!may_sample(&z, true, Some(T0), next, p));
    }
    // An `active` zone that does not validate as secure, whose provider was not heard, or
    // whose look asked the provider (its DS "to enter" rests on that word: rule 8).
    let mut z = settled_active(&w);
    w.run(
        &mut z,
        &routine(w.obs(
            T0.plus(HOUR),
            Some(true),
            &[P::Ds(3600), P::Ds(3600), P::Ds(3600)],
            &[C::Serves],
        )),
    );
    assert_eq!(z.facts.routine.settled_view, None);
    for on in [None, Some(true)] {
        let mut z = settled_active(&w);
        let mut obs = w.obs(
            T0.plus(HOUR),
            on,
            &[P::Ds(3600), P::Ds(3600), P::Ds(3600)],
            &[C::Serves],
        );
        obs.provider_asked = true;
        obs.validation = ValidationVerdict::Secure;
        w.run(&mut z, &obs);
        assert_eq!(z.facts.routine.settled_view, None, "{on:?}");
    }
}

#[test]
fn a_sample_agrees_only_with_what_every_address_said() {
    let w = World::new();
    let p = &w.policy;
    let z = settled_active(&w);
    let ours = [D::Ours];
    assert_eq!(
        disagreement(
            &z,
            &sample(&w, Some(true), &[P::Ds(3600)], &ours, &[C::Serves]),
            p
        ),
        None
    );
    let differs = [
        (
            "DS gone",
            sample(&w, Some(true), &[P::No], &ours, &[C::Serves]),
        ),
        (
            "another DS",
            sample(&w, Some(true), &[P::WrongDs], &ours, &[C::Serves]),
        ),
        (
            "parent silent",
            sample(&w, Some(true), &[P::Timeout], &ours, &[C::Serves]),
        ),
        (
            "longer DS TTL",
            sample(&w, Some(true), &[P::Ds(7200)], &ours, &[C::Serves]),
        ),
        (
            "re-delegated",
            sample(&w, Some(true), &[P::Ds(3600)], &[D::Old], &[C::Serves]),
        ),
        (
            "delegation unknown",
            sample(&w, Some(true), &[P::Ds(3600)], &[D::Lost], &[C::Serves]),
        ),
        (
            "provider off",
            sample(&w, Some(false), &[P::Ds(3600)], &ours, &[C::Serves]),
        ),
        (
            "not listed",
            sample(&w, None, &[P::Ds(3600)], &ours, &[C::Serves]),
        ),
        (
            "unsigned",
            sample(&w, Some(true), &[P::Ds(3600)], &ours, &[C::Unsigned]),
        ),
        (
            "self-signature gone",
            sample(&w, Some(true), &[P::Ds(3600)], &ours, &[C::ServesUnsigned]),
        ),
        (
            "another key",
            sample(&w, Some(true), &[P::Ds(3600)], &ours, &[C::OldKey]),
        ),
        (
            "child silent",
            sample(&w, Some(true), &[P::Ds(3600)], &ours, &[C::Refused]),
        ),
        (
            "no answer",
            sample(&w, Some(true), &[], &ours, &[C::Serves]),
        ),
        (
            "no child answer",
            sample(&w, Some(true), &[P::Ds(3600)], &ours, &[]),
        ),
    ];
    for (what, s) in &differs {
        assert!(disagreement(&z, s, p).is_some(), "{what}");
    }
    let failed = Sample {
        parent: Err("no parent zone found".into()),
        ..sample(&w, Some(true), &[P::Ds(3600)], &ours, &[C::Serves])
    };
    assert!(disagreement(&z, &failed, p).is_some());

    // A signature over the DNSKEY set that expires within the alert's horizon.
    let mut expiring = sample(&w, Some(true), &[P::Ds(3600)], &ours, &[C::Serves]);
    if let Ok(child) = &mut expiring.child
        && let DnskeyAnswer::Keys(k) = &mut child.answers[0].answer
    {
        let soon = T0.plus(HOUR).plus(p.signatures_expiring_within).unix_secs();
        k.signatures[0].expiration = u32::try_from(soon).unwrap() - 1;
    }
    assert!(
        disagreement(&z, &expiring, p).is_some_and(|why| why.contains("expires")),
        "an expiring signature"
    );

    // A zone with no standard is never taken as agreeing.
    let mut bare = z.clone();
    bare.facts.routine.settled_view = None;
    let agreeing = sample(&w, Some(true), &[P::Ds(3600)], &ours, &[C::Serves]);
    assert!(disagreement(&bare, &agreeing, p).is_some());
    bare.facts.routine.settled_view = Some(SettledView {
        parent_ds: "none".into(),
        child_keys: "none".into(),
    });
    assert!(disagreement(&bare, &agreeing, p).is_some());
}

#[test]
fn a_disabled_zones_sample_notices_a_ds_or_a_key() {
    let w = World::new();
    let p = &w.policy;
    let z = settled_disabled(&w);
    let ours = [D::Ours];
    assert_eq!(
        disagreement(
            &z,
            &sample(&w, Some(false), &[P::No], &ours, &[C::Unsigned]),
            p
        ),
        None
    );
    for (what, s) in [
        (
            "a DS",
            sample(&w, Some(false), &[P::Ds(3600)], &ours, &[C::Unsigned]),
        ),
        (
            "signed",
            sample(&w, Some(false), &[P::No], &ours, &[C::Serves]),
        ),
        (
            "provider on",
            sample(&w, Some(true), &[P::No], &ours, &[C::Unsigned]),
        ),
        (
            "re-delegated",
            sample(&w, Some(false), &[P::No], &[D::Old], &[C::Unsigned]),
        ),
    ] {
        assert!(disagreement(&z, &s, p).is_some(), "{what}");
    }
}
