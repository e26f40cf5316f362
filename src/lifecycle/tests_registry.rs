//! A DS request that goes to the registry through the child's CDS (`lifecycle::registry`):
//! nothing asked of the registrar while the registry has its time, the registrar asked and
//! `ds_scan_overdue` said once it is late, and the NOTIFY(CDS) decided when it is due.

use std::net::IpAddr;
use std::time::Duration;

use super::parent_way::{DsPathSetting, DsyncHint, ParentPath, ParentWay, ParentWays, resolve};
use super::registry::{CdsNotified, NotifyPlan};
use super::rules::Look;
use super::tests::*;
use super::*;
use crate::dns::Signals;
use crate::dnssec::CdsPublication;

const DAY: Duration = Duration::from_secs(86_400);

fn path(way: ParentWay, dsync: &DsyncHint) -> ParentPath {
    let ways = ParentWays {
        parents: [("test.".to_string(), way)].into(),
    };
    resolve("test.", &ways, dsync)
}

/// The registry of `test.` scans every two days and takes a first DS after one more.
fn scanning() -> ParentPath {
    path(
        ParentWay {
            ds_path: DsPathSetting::CdsScan,
            scan_period: Some(2 * DAY),
            first_ds_after: Some(DAY),
            ..Default::default()
        },
        &DsyncHint::None,
    )
}

fn notified() -> ParentPath {
    path(
        ParentWay::default(),
        &DsyncHint::Notify {
            owner: "_dsync.test.".into(),
            target: "scanner.test.".into(),
            port: 5300,
            addrs: vec![IpAddr::from([127, 0, 0, 9])],
        },
    )
}

/// A zone at the end of its propagation hold, the provider's CDS at `cds`, the parent's
/// path `path` resolved at this look.
fn ready_to_announce(w: &World, path: ParentPath, cds: CdsSetting) -> (Zone, Observation) {
    let mut z = zone(Some(State::Enabling), Intent::Enabled);
    z.facts.lifecycle.hold_until = Some(T0);
    z.facts.lifecycle.dnskey_everywhere_at = Some(T0);
    let mut obs = w.obs(T0, Some(true), &[P::No, P::No], &[C::Serves, C::Serves]);
    obs.cds = cds;
    obs.ds_path = Some(path);
    (z, obs)
}

fn announced(d: &Decision) -> bool {
    d.effects
        .iter()
        .any(|e| matches!(e, Effect::AnnounceDs { .. }))
}

#[test]
fn the_ds_goes_by_the_registry_and_the_registrar_is_asked_only_once_it_is_late() {
    let w = World::new();
    let (mut z, obs) = ready_to_announce(&w, scanning(), CdsSetting::Set(CdsPublication::Nothing));
    let d = w.run(&mut z, &obs);
    assert_eq!(d.state, Some(State::AwaitingDs));
    assert_eq!(
        d.effects,
        vec![Effect::SetCds {
            to: CdsPublication::Key
        }],
        "the CDS announces it; nobody at the registrar is asked"
    );
    assert_eq!(z.facts.parent_way.registry_since, Some(T0));
    let margin = w.policy.propagation_margin;
    let due = T0.plus(3 * DAY + margin);
    let waiting = waiting::describe(&z, &w.policy);
    assert_eq!(waiting.on, "registry");
    assert_eq!(waiting.until, Some(due));
    assert!(
        waiting.what.contains("the registry of test."),
        "{}",
        waiting.what
    );

    // Past the registrar's own overdue period, still within the registry's: nothing said.
    let ours = cds(&[&w.key], true);
    let look = |at: Timestamp| {
        let mut obs = w.obs(at, Some(true), &[P::No, P::No], &[C::Serves, C::Serves]);
        obs.cds = CdsSetting::Set(CdsPublication::Key);
        with_signals(&mut obs, &[ours.clone(), ours.clone()]);
        obs
    };
    let d = w.run(&mut z, &look(T0.plus(2 * DAY)));
    assert!(d.effects.is_empty(), "{:?}", d.effects);
    assert_eq!(firing(&d, AlertKind::DsUnpublishedOverdue), None);
    assert_eq!(firing(&d, AlertKind::DsScanOverdue), None);
    assert!(d.wake_at <= due);

    // The registry is late: the registrar is asked, and that is said.
    let d = w.run(&mut z, &look(due));
    assert!(announced(&d), "{:?}", d.effects);
    assert!(
        firing(&d, AlertKind::DsScanOverdue).is_some_and(|m| m.contains("the registry of test.")),
        "{:?}",
        d.alerts
    );
    assert_eq!(z.facts.parent_way.registry_since, None);
    assert_eq!(waiting::describe(&z, &w.policy).on, "registrar");
    // The registrar's overdue period counts from that ask, not from the CDS.
    let d = w.run(&mut z, &look(due.plus(Duration::from_secs(60))));
    assert!(!announced(&d), "asked once");
    assert_eq!(firing(&d, AlertKind::DsUnpublishedOverdue), None);
    let d = w.run(&mut z, &look(due.plus(w.policy.ds_overdue_after)));
    assert!(firing(&d, AlertKind::DsUnpublishedOverdue).is_some());

    // The DS arrives: the registry's alert clears with the state.
    let mut obs = look(due.plus(w.policy.ds_overdue_after).plus(HOUR));
    obs.parent = Ok(w.parent(&[P::Ds(60), P::Ds(60)]));
    obs.parent.as_mut().unwrap().evidence = crate::dns::Evidence::Validated;
    let d = w.run(&mut z, &obs.assessed());
    assert_eq!(d.state, Some(State::DsObserved));
    assert_eq!(firing(&d, AlertKind::DsScanOverdue), None);
    assert!(judged(&d, AlertKind::DsScanOverdue));
}

#[test]
fn the_registrar_is_asked_where_the_registry_cannot_act_or_is_asked_besides() {
    let w = World::new();
    // The parent's path is the registrar's.
    let registrar = path(ParentWay::default(), &DsyncHint::None);
    let (mut z, obs) = ready_to_announce(&w, registrar, CdsSetting::Set(CdsPublication::Nothing));
    let d = w.run(&mut z, &obs);
    assert!(announced(&d));
    assert_eq!(z.facts.parent_way.registry_since, None);

    // A registry that scans, but the provider's CDS is not controlled and none is served.
    let (mut z, obs) = ready_to_announce(&w, scanning(), CdsSetting::Uncontrolled);
    let d = w.run(&mut z, &obs);
    assert!(announced(&d));
    assert_eq!(waiting::describe(&z, &w.policy).on, "registrar");

    // ... but one the provider publishes by itself is one the registry acts on.
    let (mut z, mut obs) = ready_to_announce(&w, scanning(), CdsSetting::Uncontrolled);
    let ours = cds(&[&w.key], true);
    with_signals(&mut obs, &[ours.clone(), ours]);
    let d = w.run(&mut z, &obs);
    assert!(!announced(&d));
    assert_eq!(z.facts.parent_way.registry_since, Some(T0));

    // A registry that takes no first DS from the CDS.
    let no_first = path(
        ParentWay {
            ds_path: DsPathSetting::CdsScan,
            accepts_first_ds: Some(false),
            ..Default::default()
        },
        &DsyncHint::None,
    );
    let (mut z, obs) = ready_to_announce(&w, no_first, CdsSetting::Set(CdsPublication::Nothing));
    let d = w.run(&mut z, &obs);
    assert!(announced(&d));

    // The operator wants the registrar hook besides.
    let besides = path(
        ParentWay {
            ds_path: DsPathSetting::CdsScan,
            call_registrar_hook: true,
            ..Default::default()
        },
        &DsyncHint::None,
    );
    let (mut z, obs) = ready_to_announce(&w, besides, CdsSetting::Set(CdsPublication::Nothing));
    let d = w.run(&mut z, &obs);
    assert!(announced(&d));
    assert_eq!(
        z.facts.parent_way.registry_since,
        Some(T0),
        "still the registry's to act"
    );
}

#[test]
fn the_removal_goes_by_the_cds_delete_request_and_to_the_registrar_once_late() {
    let w = World::new();
    let mut z = zone(Some(State::Active), Intent::Disabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    z.facts.lifecycle.ds_first_seen_at = Some(T0);
    let look = |at: Timestamp, cds: CdsPublication| {
        let mut obs = w.obs(
            at,
            Some(true),
            &[P::Ds(60), P::Ds(60)],
            &[C::Serves, C::Serves],
        );
        obs.cds = CdsSetting::Set(cds);
        obs.ds_path = Some(scanning());
        obs
    };
    let d = w.run(&mut z, &look(T0, CdsPublication::Key));
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert_eq!(
        d.effects,
        vec![Effect::SetCds {
            to: CdsPublication::Delete
        }]
    );
    assert_eq!(waiting::describe(&z, &w.policy).on, "registry");
    // No first-DS period for a removal.
    let due = T0.plus(2 * DAY + w.policy.propagation_margin);
    let d = w.run(&mut z, &look(T0.plus(DAY + HOUR), CdsPublication::Delete));
    assert!(d.effects.is_empty());
    assert_eq!(firing(&d, AlertKind::DsRemovalOverdue), None);
    let d = w.run(&mut z, &look(due, CdsPublication::Delete));
    assert!(
        d.effects
            .iter()
            .any(|e| matches!(e, Effect::RequestDsRemoval { .. })),
        "{:?}",
        d.effects
    );
    assert!(firing(&d, AlertKind::DsScanOverdue).is_some());
    assert_eq!(firing(&d, AlertKind::DsRemovalOverdue), None);
    let d = w.run(
        &mut z,
        &look(
            due.plus(w.policy.ds_removal_overdue_after),
            CdsPublication::Delete,
        ),
    );
    assert!(firing(&d, AlertKind::DsRemovalOverdue).is_some());
}

/// The NOTIFY(CDS) effects of a decision.
fn notifies(d: &Decision) -> Vec<&NotifyPlan> {
    d.effects
        .iter()
        .filter_map(|e| match e {
            Effect::NotifyCds(plan) => Some(plan),
            _ => None,
        })
        .collect()
}

/// A step decides the NOTIFY (the engine sends it after the commit): exactly when every
/// child address serves the signal the registry's request needs, and again only when
/// due by what the outbox says came of the last one.
#[test]
fn a_notify_is_decided_once_the_child_serves_the_signal_and_again_only_when_due() {
    let w = World::new();
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    z.facts.parent_way.registry_since = Some(T0);
    z.facts.parent_way.ds_path = Some(notified());
    let ours = cds(&[&w.key], true);
    let both = [ours.clone(), ours.clone()];
    let look = |at: Timestamp, signals: &[Signals], last: Option<&CdsNotified>| {
        let mut obs = w.obs(at, Some(true), &[P::No, P::No], &[C::Serves, C::Serves]);
        with_signals(&mut obs, signals);
        obs.cds_notify = last.cloned();
        obs
    };
    // Not yet served everywhere: a registry would find nothing to act on.
    let d = step(&z, &look(T0, &[ours.clone(), none()], None), &w.policy);
    assert!(notifies(&d).is_empty(), "{:?}", d.effects);
    let d = step(&z, &look(T0, &both, None), &w.policy);
    let plan = NotifyPlan {
        target: "scanner.test.".into(),
        port: 5300,
        addrs: vec![IpAddr::from([127, 0, 0, 9])],
        signal: format!("key {}", w.key.key_tag()),
    };
    assert_eq!(
        d.effects,
        vec![Effect::NotifyCds(plan.clone())],
        "due once every address serves the key's CDS: the decision's one effect"
    );
    assert_eq!(
        d.facts.parent_way.cds_notified, None,
        "decided, not sent: nothing is known of it yet"
    );
    assert!(
        !d.notes.iter().any(|n| n.reason.contains("NOTIFY")),
        "the history says it when it is performed: {:?}",
        d.notes
    );
    // A delete request is no signal for a DS to publish.
    let d = step(&z, &look(T0, &[delete(), delete()], None), &w.policy);
    assert!(notifies(&d).is_empty());

    // What the outbox says of the last one: acknowledged, not again within a scan
    // period (a day, none stated); not acknowledged, again at the next look.
    let sent = |acknowledged| CdsNotified {
        at: T0,
        target: plan.target.clone(),
        addr: Some("127.0.0.9".into()),
        port: 5300,
        signal: plan.signal.clone(),
        acknowledged,
        outcome: if acknowledged {
            "acknowledged".into()
        } else {
            "no answer to 3 attempts".into()
        },
    };
    let acked = sent(true);
    let d = w.run(&mut z, &look(T0.plus(HOUR), &both, Some(&acked)));
    assert!(notifies(&d).is_empty(), "{:?}", d.effects);
    assert_eq!(
        z.facts.parent_way.cds_notified,
        Some(acked.clone()),
        "kept in the facts"
    );
    let waiting = waiting::describe(&z, &w.policy);
    assert!(
        waiting.what.contains("NOTIFY(CDS) sent at") && waiting.what.contains(": acknowledged"),
        "{}",
        waiting.what
    );
    // Later looks read the same row: the facts keep it, and nothing is due.
    let d = step(&z, &look(T0.plus(2 * HOUR), &both, Some(&acked)), &w.policy);
    assert!(notifies(&d).is_empty());
    let d = step(&z, &look(T0.plus(DAY), &both, Some(&acked)), &w.policy);
    assert_eq!(notifies(&d), [&plan], "again after a scan period");
    // Another signal is notified at once, whatever came of the last one.
    let mut roll = sent(true);
    roll.signal = "key 1".into();
    let d = step(&z, &look(T0.plus(HOUR), &both, Some(&roll)), &w.policy);
    assert_eq!(notifies(&d), [&plan]);

    let unanswered = sent(false);
    z.facts.parent_way.cds_notified = None;
    let d = w.run(
        &mut z,
        &look(T0.plus(Duration::from_secs(1)), &both, Some(&unanswered)),
    );
    assert!(notifies(&d).is_empty(), "not within the retry time");
    assert_eq!(z.facts.parent_way.cds_notified, Some(unanswered.clone()));
    let waiting = waiting::describe(&z, &w.policy);
    assert!(
        waiting.what.contains("no answer to 3 attempts"),
        "what really happened: {}",
        waiting.what
    );
    let d = step(
        &z,
        &look(T0.plus(w.policy.retry_base), &both, Some(&unanswered)),
        &w.policy,
    );
    assert_eq!(notifies(&d), [&plan], "again at the next look");

    // Nothing while the request is not the registry's.
    let mut registrar = z.clone();
    registrar.facts.parent_way.registry_since = None;
    let d = step(&registrar, &look(T0.plus(DAY), &both, None), &w.policy);
    assert!(notifies(&d).is_empty());
    // Nothing at a look that leaves the state: the DS arrived.
    let mut arrived = look(T0.plus(DAY), &both, None);
    arrived.parent = Ok(w.parent(&[P::Ds(60), P::Ds(60)]));
    arrived.parent.as_mut().unwrap().evidence = crate::dns::Evidence::Validated;
    let d = step(&z, &arrived.assessed(), &w.policy);
    assert_eq!(d.state, Some(State::DsObserved));
    assert!(notifies(&d).is_empty(), "{:?}", d.effects);
    assert_eq!(
        d.facts.parent_way.cds_notified, None,
        "the state's NOTIFY forgotten with it"
    );
}

/// The removal's NOTIFY is about the delete request, and only once every address
/// serves it.
#[test]
fn the_removal_is_notified_once_the_delete_request_is_served() {
    let w = World::new();
    let mut z = zone(Some(State::AwaitingDsRemoval), Intent::Disabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    z.facts.lifecycle.ds_first_seen_at = Some(T0);
    z.facts.parent_way.registry_since = Some(T0);
    z.facts.parent_way.ds_path = Some(notified());
    let look = |signals: &[Signals]| {
        let mut obs = w.obs(
            T0.plus(HOUR),
            Some(true),
            &[P::Ds(60), P::Ds(60)],
            &[C::Serves, C::Serves],
        );
        with_signals(&mut obs, signals);
        obs
    };
    let ours = cds(&[&w.key], true);
    let d = step(&z, &look(&[ours.clone(), ours]), &w.policy);
    assert!(notifies(&d).is_empty(), "the key's CDS asks for no removal");
    let d = step(&z, &look(&[delete(), none()]), &w.policy);
    assert!(notifies(&d).is_empty(), "not served everywhere");
    let d = step(&z, &look(&[delete(), delete()]), &w.policy);
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
    assert_eq!(
        notifies(&d)
            .iter()
            .map(|p| p.signal.as_str())
            .collect::<Vec<_>>(),
        ["delete"]
    );
}

#[test]
fn the_parents_path_is_looked_up_where_a_ds_request_may_go_at_most_hourly() {
    let mut z = zone(Some(State::Enabling), Intent::Enabled);
    assert!(Look::at(&z, T0).ds_path);
    z.facts.parent_way.ds_path_at = Some(T0);
    assert!(!Look::at(&z, T0.plus(Duration::from_secs(600))).ds_path);
    assert!(Look::at(&z, T0.plus(HOUR)).ds_path);
    let active = zone(Some(State::Active), Intent::Enabled);
    assert!(
        !Look::at(&active, T0).ds_path,
        "nothing to ask of the parent"
    );
    let leaving = zone(Some(State::Active), Intent::Disabled);
    assert!(Look::at(&leaving, T0).ds_path);
    // Settled, yet about to ask for the DS's removal: the provider's CDS setting is read,
    // so the request can go by the CDS delete request.
    let mut settled = leaving.clone();
    settled.facts.delegation.verdict = Some(crate::dns::DelegationVerdict::Provider);
    settled.facts.delegation.provider_ns = Some(vec!["ns1.test.".into()]);
    settled.facts.parent_way.ds_path_at = Some(T0);
    let look = Look::at(&settled, T0);
    assert!(look.settled && !look.ds_path && look.cds());
    let mut quiet = settled.clone();
    quiet.intent = Intent::Enabled;
    assert!(!Look::at(&quiet, T0).cds());
}

#[test]
fn an_instruction_withheld_for_a_while_leaves_the_request_with_the_registry() {
    let w = World::new();
    let mut z = zone(Some(State::AwaitingDs), Intent::Enabled);
    z.facts.lifecycle.ds_line = Some(provider_key(&w.key).ds_line().to_string());
    z.facts.lifecycle.ds_announced_at = Some(T0);
    z.facts.parent_way.registry_since = Some(T0);
    z.facts.parent_way.ds_path = Some(scanning());
    // A child server lagged at the last look: the instruction was withheld and rule 14
    // withdrew the key's CDS. Now every server serves the key again.
    let mut obs = w.obs(
        T0.plus(HOUR),
        Some(true),
        &[P::No, P::No],
        &[C::Serves, C::Serves],
    );
    obs.cds = CdsSetting::Set(CdsPublication::Nothing);
    let d = w.run(&mut z, &obs);
    assert_eq!(
        d.effects,
        vec![Effect::SetCds {
            to: CdsPublication::Key
        }],
        "the CDS is published again; nobody at the registrar is asked"
    );
    assert_eq!(z.facts.parent_way.registry_since, Some(T0));
    // The intent turned: the registry is no longer counted on.
    z.intent = Intent::Disabled;
    let d = w.run(&mut z, &obs);
    assert_eq!(d.state, Some(State::AwaitingDsRemoval));
}
