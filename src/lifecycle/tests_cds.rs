//! The child's CDS and CDNSKEY read against the zone: what `cds_unexpected` and
//! `cds_inconsistent` say, and that an unknown never resolves them.

use super::tests::*;
use super::*;
use crate::dns::Signals;
use crate::dnssec::CdsPublication;

fn judged(zone: &Zone, obs: &Observation, kind: AlertKind) -> Option<Option<String>> {
    cds::judge(zone, zone.state, &zone.facts, obs)
        .into_iter()
        .find(|c| c.kind == kind)
        .map(|c| c.firing)
}

fn judged_all(zone: &Zone, obs: &Observation) -> Vec<AlertCheck> {
    cds::judge(zone, zone.state, &zone.facts, obs)
}

#[test]
fn the_ds_we_would_announce_published_as_cds_is_what_an_enabled_zone_expects() {
    let w = World::new();
    let z = zone(Some(State::AwaitingDs), Intent::Enabled);
    let mut obs = w.obs(T0, Some(true), &[P::No, P::No], &[C::Serves, C::Serves]);
    let ours = cds(&[&w.key], true);
    with_signals(&mut obs, &[ours.clone(), ours]);
    assert_eq!(
        cds::read(ZONE, &obs),
        cds::CdsReading::Served {
            ours: true,
            keys: vec![w.key.key_tag()],
            trust: cds::Trust::ByZoneKey
        }
    );
    assert_eq!(judged(&z, &obs, AlertKind::CdsUnexpected), Some(None));
    assert_eq!(judged(&z, &obs, AlertKind::CdsInconsistent), Some(None));
    // Once the DS is published, the same signature is by a key the DS names.
    let mut obs = w.obs(
        T0,
        Some(true),
        &[P::Ds(60), P::Ds(60)],
        &[C::Serves, C::Serves],
    );
    let ours = cds(&[&w.key], true);
    with_signals(&mut obs, &[ours.clone(), ours]);
    assert!(matches!(
        cds::read(ZONE, &obs),
        cds::CdsReading::Served {
            trust: cds::Trust::ByParentDs,
            ..
        }
    ));
}

#[test]
fn a_stranger_key_a_delete_while_enabled_and_a_ds_while_disabled_are_unexpected() {
    let w = World::new();
    let enabled = zone(Some(State::Active), Intent::Enabled);
    let disabled = zone(Some(State::AwaitingDsRemoval), Intent::Disabled);
    let served = [C::Serves, C::Serves];

    let mut obs = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &served);
    let stranger = cds(&[&w.other], true);
    with_signals(&mut obs, &[stranger.clone(), stranger]);
    let said = judged(&enabled, &obs, AlertKind::CdsUnexpected).flatten();
    let tag = w.other.key_tag().to_string();
    assert!(
        said.as_deref()
            .is_some_and(|m| m.contains(&tag) && m.contains("not every name server serves")),
        "{said:?}"
    );
    // The same stranger is unexpected whatever the intent.
    let said = judged(&disabled, &obs, AlertKind::CdsUnexpected).flatten();
    assert!(said.is_some_and(|m| m.contains(&tag)));

    let mut obs = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &served);
    with_signals(&mut obs, &[delete(), delete()]);
    let said = judged(&enabled, &obs, AlertKind::CdsUnexpected).flatten();
    assert!(
        said.as_deref()
            .is_some_and(|m| m.contains("delete request") && m.contains("intent is enabled")),
        "{said:?}"
    );
    assert_eq!(
        judged(&disabled, &obs, AlertKind::CdsUnexpected),
        Some(None)
    );

    let mut obs = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &served);
    let ours = cds(&[&w.key], true);
    with_signals(&mut obs, &[ours.clone(), ours]);
    let said = judged(&disabled, &obs, AlertKind::CdsUnexpected).flatten();
    assert!(
        said.as_deref().is_some_and(
            |m| m.contains("intent is disabled") && m.contains("publishes the DS again")
        ),
        "{said:?}"
    );
    assert_eq!(judged(&enabled, &obs, AlertKind::CdsUnexpected), Some(None));

    // Nothing published: clear for both intents.
    let mut obs = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &served);
    with_signals(&mut obs, &[none(), none()]);
    assert_eq!(judged(&enabled, &obs, AlertKind::CdsUnexpected), Some(None));
    assert_eq!(
        judged(&disabled, &obs, AlertKind::CdsUnexpected),
        Some(None)
    );
    // An unmanaged zone is not judged.
    assert!(judged_all(&zone(Some(State::Active), Intent::None), &obs).is_empty());
}

#[test]
fn disagreeing_addresses_are_inconsistent_and_an_unknown_resolves_nothing() {
    let w = World::new();
    let z = zone(Some(State::Active), Intent::Enabled);
    let served = [C::Serves, C::Serves];
    let mut obs = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &served);
    with_signals(&mut obs, &[cds(&[&w.key], true), none()]);
    let said = judged(&z, &obs, AlertKind::CdsInconsistent).flatten();
    assert!(said.is_some_and(|m| m.contains("RFC 9975")));
    // Which set a registry would act on is not known: `cds_unexpected` is not judged.
    assert_eq!(judged(&z, &obs, AlertKind::CdsUnexpected), None);

    let mut obs = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &served);
    with_signals(
        &mut obs,
        &[
            cds(&[&w.other], true),
            Signals::Unknown(crate::dns::UnknownReason::Timeout),
        ],
    );
    assert!(judged_all(&z, &obs).is_empty());
    // Not asked (a sample, or a fake observer): nothing judged either.
    let obs = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &served);
    assert!(judged_all(&z, &obs).is_empty());
}

#[test]
fn a_key_served_by_only_some_addresses_is_not_served() {
    let w = World::new();
    let z = zone(Some(State::AwaitingDs), Intent::Enabled);
    let mut obs = w.obs(T0, Some(true), &[P::No, P::No], &[C::Serves, C::OldKey]);
    // Both publish a CDS for the provider's key; one address does not serve it.
    let ours = cds(&[&w.key], false);
    with_signals(&mut obs, &[ours.clone(), ours]);
    assert!(matches!(
        cds::read(ZONE, &obs),
        cds::CdsReading::Unserved { .. }
    ));
    assert!(
        judged(&z, &obs, AlertKind::CdsUnexpected)
            .flatten()
            .is_some()
    );
}

#[test]
fn the_daemons_own_setting_being_corrected_is_not_unexpected() {
    let w = World::new();
    // Disabling: the look still sees the key's CDS the daemon set, and this very step
    // asks for the delete request instead.
    let z = zone(Some(State::Active), Intent::Disabled);
    let mut obs = w.obs(
        T0,
        Some(true),
        &[P::Ds(60), P::Ds(60)],
        &[C::Serves, C::Serves],
    );
    let ours = cds(&[&w.key], true);
    with_signals(&mut obs, &[ours.clone(), ours]);
    obs.cds = CdsSetting::Set(CdsPublication::Key);
    let d = w.run(&mut z.clone(), &obs);
    assert_eq!(cds_effect(&d), Some(CdsPublication::Delete));
    assert!(d.alerts.iter().all(|c| c.kind != AlertKind::CdsUnexpected));
    // A settled look (the setting not read) that moves the zone: the next look reads it.
    obs.cds = CdsSetting::NotAsked;
    let d = w.run(&mut z.clone(), &obs);
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert!(d.alerts.iter().all(|c| c.kind != AlertKind::CdsUnexpected));
    // Set as it should be, yet served otherwise (a provider, a secondary): said.
    let z = zone(Some(State::AwaitingDsRemoval), Intent::Disabled);
    obs.cds = CdsSetting::Set(CdsPublication::Delete);
    let d = w.run(&mut z.clone(), &obs);
    assert!(firing(&d, AlertKind::CdsUnexpected).is_some());
}

#[test]
fn the_judge_carries_the_signals_checks() {
    let w = World::new();
    let z = zone(Some(State::Active), Intent::Enabled);
    let mut obs = w.obs(
        T0,
        Some(true),
        &[P::Ds(60), P::Ds(60)],
        &[C::Serves, C::Serves],
    );
    with_signals(&mut obs, &[delete(), delete()]);
    let d = w.run(&mut z.clone(), &obs);
    assert!(firing(&d, AlertKind::CdsUnexpected).is_some());
}

/// Rules 11 and 14: a setting of the daemon's found half applied (an answer lost between
/// its two writes) is set whole again at the step that reads it, to what the zone wants
/// now, whichever half that is (or neither), and the history says so; what the name
/// servers serve meanwhile is no contradiction, and the registry still takes requests
/// from a setting the daemon controls.
#[test]
fn a_half_applied_cds_setting_is_made_whole_to_what_is_wanted() {
    use crate::dnssec::CdsHalves;
    let w = World::new();
    let half = |cds, cdnskey| CdsSetting::HalfApplied(CdsHalves { cds, cdnskey });
    let mut obs = w.obs(T0, Some(true), &[P::No, P::No], &[C::Serves, C::Serves]);
    let ours = cds(&[&w.key], true);
    with_signals(&mut obs, &[ours.clone(), ours]);
    // Enabling, no DS to enter yet: no CDS wanted. The key's CDS half set (an
    // announcement whose second write was lost, or a withdrawal whose first was) goes.
    let z = zone(Some(State::Enabling), Intent::Enabled);
    obs.cds = half(CdsPublication::Key, CdsPublication::Nothing);
    let d = w.run(&mut z.clone(), &obs);
    assert_eq!(cds_effect(&d), Some(CdsPublication::Nothing));
    let said: Vec<&str> = d.notes.iter().map(|n| n.reason.as_str()).collect();
    assert!(
        said.iter().any(|r| r.contains(
            "the provider's CDS setting is half applied (CDS the key's, CDNSKEY none), a setting of the daemon's whose answer was lost between its two writes: rolled back, set whole to no CDS or CDNSKEY"
        )),
        "{said:#?}"
    );
    assert!(d.alerts.iter().all(|c| c.kind != AlertKind::CdsUnexpected));
    // The delete request half set while the intent is disabled and the DS is to go:
    // completed.
    let z = zone(Some(State::AwaitingDsRemoval), Intent::Disabled);
    obs.cds = half(CdsPublication::Delete, CdsPublication::Key);
    let d = w.run(&mut z.clone(), &obs);
    assert_eq!(cds_effect(&d), Some(CdsPublication::Delete));
    assert!(d.notes.iter().any(|n| n.reason.contains("completed")));
    // Neither half what is wanted: replaced.
    obs.cds = half(CdsPublication::Key, CdsPublication::Nothing);
    let d = w.run(&mut z.clone(), &obs);
    assert_eq!(cds_effect(&d), Some(CdsPublication::Delete));
    assert!(d.notes.iter().any(|n| n.reason.contains("replaced")));
    // The setting is one the daemon controls: a registry that scans is still the way.
    assert!(obs.cds.controlled());
    assert!(!CdsSetting::Unknown("x".into()).controlled());
    assert_eq!(
        CdsSetting::read(Some(CdsHalves {
            cds: CdsPublication::Delete,
            cdnskey: CdsPublication::Nothing
        })),
        half(CdsPublication::Delete, CdsPublication::Nothing)
    );
    assert_eq!(
        CdsSetting::read(Some(CdsHalves::whole(CdsPublication::Key))),
        CdsSetting::Set(CdsPublication::Key)
    );
    assert_eq!(CdsSetting::read(None), CdsSetting::Uncontrolled);
}

/// The effect a step asks of the provider's CDS setting, if any.
fn cds_effect(d: &Decision) -> Option<CdsPublication> {
    d.effects.iter().find_map(|e| match e {
        Effect::SetCds { to } => Some(*to),
        _ => None,
    })
}

#[test]
fn the_cds_of_the_key_is_published_exactly_while_its_ds_may_be_announced() {
    let w = World::new();
    let served = [C::Serves, C::Serves];
    // Awaiting the DS, every name server serving the key: the DS may be announced.
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    z.facts.lifecycle.ds_announced_at = Some(T0);
    let mut obs = w.obs(T0, Some(true), &[P::No, P::No], &served);
    obs.cds = CdsSetting::Set(CdsPublication::Nothing);
    let d = step(&z, &obs, &w.policy);
    assert!(d.facts.lifecycle.ds_to_enter.is_some(), "{:?}", d.facts);
    assert_eq!(cds_effect(&d), Some(CdsPublication::Key));
    // Already set: nothing to do.
    obs.cds = CdsSetting::Set(CdsPublication::Key);
    assert_eq!(cds_effect(&step(&z, &obs, &w.policy)), None);
    // One name server without the key: the DS is not shown to enter, and the CDS is
    // withdrawn with it (rule 8's "withdrawn when it would be").
    let mut obs = w.obs(T0, Some(true), &[P::No, P::No], &[C::Serves, C::OldKey]);
    obs.cds = CdsSetting::Set(CdsPublication::Key);
    let d = step(&z, &obs, &w.policy);
    assert!(d.facts.lifecycle.ds_to_enter.is_none());
    assert_eq!(cds_effect(&d), Some(CdsPublication::Nothing));
    // Not read, not controlled, or unreadable: nothing is set on it.
    for cds in [
        CdsSetting::NotAsked,
        CdsSetting::Uncontrolled,
        CdsSetting::Unknown("HTTP 500".into()),
    ] {
        let mut obs = w.obs(T0, Some(true), &[P::No, P::No], &served);
        obs.cds = cds;
        assert_eq!(cds_effect(&step(&z, &obs, &w.policy)), None);
    }
    // A zone without intent is followed as it is: the same rule (the key's CDS while its
    // DS is shown to enter), and never a delete request, which only `disabled` stands on.
    let followed = zone(Some(State::Active), Intent::None);
    let mut obs = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &served);
    obs.cds = CdsSetting::Set(CdsPublication::Key);
    assert_eq!(cds_effect(&step(&followed, &obs, &w.policy)), None);
    obs.cds = CdsSetting::Set(CdsPublication::Delete);
    assert_eq!(
        cds_effect(&step(&followed, &obs, &w.policy)),
        Some(CdsPublication::Key)
    );
}

#[test]
fn the_delete_request_is_published_only_on_the_way_down_and_withdrawn_after() {
    let w = World::new();
    let served = [C::Serves, C::Serves];
    let z = zone(Some(State::Active), Intent::Disabled);
    let mut obs = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &served);
    obs.cds = CdsSetting::Set(CdsPublication::Key);
    let d = step(&z, &obs, &w.policy);
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert_eq!(cds_effect(&d), Some(CdsPublication::Delete));
    // An enabled zone is never told to publish the delete request, in any state.
    for state in State::ALL {
        let z = zone(Some(*state), Intent::Enabled);
        let mut obs = w.obs(T0, Some(true), &[P::Ds(60), P::Ds(60)], &served);
        obs.cds = CdsSetting::Set(CdsPublication::Nothing);
        assert_ne!(
            cds_effect(&step(&z, &obs, &w.policy)),
            Some(CdsPublication::Delete),
            "{state:?}"
        );
    }
    // Once DNSSEC is off, nothing.
    let z = zone(Some(State::Disabled), Intent::Disabled);
    let mut obs = w.obs(
        T0,
        Some(false),
        &[P::No, P::No],
        &[C::Unsigned, C::Unsigned],
    );
    obs.cds = CdsSetting::Set(CdsPublication::Delete);
    assert_eq!(
        cds_effect(&step(&z, &obs, &w.policy)),
        Some(CdsPublication::Nothing)
    );
}
