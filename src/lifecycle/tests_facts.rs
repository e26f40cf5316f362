//! The stored form of the facts (`zones.facts`): one flat JSON object, whatever the shape
//! of `Facts` in memory. Today's rows must read back, and a step must write what the rows
//! of older builds hold, to the byte: no migration.

use super::facts::{
    DelegationFacts, Facts, HealthFacts, LifecycleFacts, MoveInFacts, ParentWayFacts,
    RoutineLookFacts, WaitFacts,
};
use super::hold::{Hold, Party};
use super::keys::{KeyAge, KeyAges, NextRoll};
use super::own_roll::ProviderRoll;
use super::parent_way::{CdsNotified, DsyncHint, resolve};
use super::rollover::{KeyKind, Method, Phase, Roll, RollKey, RollTtls};
use super::sample::SettledView;
use super::signed_move::Move;
use crate::dns::DelegationVerdict;
use crate::dnssec::Dnskey;
use crate::time::Timestamp;

/// Every fact set, each to a value of its own (a fact read into another's place shows).
fn every() -> Facts {
    let t = |ms| Some(Timestamp(ms));
    Facts {
lifecycle: LifecycleFacts {
ds_line: Some("DS A".into()),
ds_to_enter: Some("DS B".into()),
dnskey_to_enter: Some("DNSKEY A".into()),
provider_off_since: t(1),
dnskey_everywhere_at: t(2),
hold_until: t(3),
ds_announced_at: t(4),
ds_first_seen_at: t(5),
t_gone: t(6),
gone_confirmed_at: t(7),
max_ds_ttl: Some(8),
max_dnskey_ttl: Some(9),
ds_seen_at: t(10)
},
health: HealthFacts {
partial_since: t(11),
failing_since: t(12),
failures: 13
},
delegation: DelegationFacts {
provider_ns: Some(vec!["ns1.".into(), "ns2.".into()]),
verdict: Some(DelegationVerdict::Mixed),
seen_at_provider: true,
old_ns: vec!["old.".into()],
old_ns_ttl: Some(14),
delegated_at: t(15),
elsewhere_seen: true
},
move_in: MoveInFacts {
moving_in: true,
ds_to_remove: vec!["DS C".into()],
delegation_requested: true
},
routine: RoutineLookFacts {
served_keys_when_asked: Some("257/13/1".into()),
settled_view: Some(SettledView {
            parent_ds: "ds".into(),
            child_keys: "keys".into(),
        })
},
wait: WaitFacts {
held_by: Some(Hold::new("the provider", Party::Provider).at(Some("a".into()))),
held_since: t(16)
},
parent_way: ParentWayFacts {
ds_path: Some(resolve("ch.", &Default::default(), &DsyncHint::None)),
ds_path_at: t(17),
registry_since: t(18),
registry_missed_at: t(19),
cds_notified: Some(CdsNotified {
            at: Timestamp(20),
            target: "scanner.ch.".into(),
            addr: Some("127.0.0.9".into()),
            port: 53,
            signal: "delete".into(),
            acknowledged: true,
            outcome: "acknowledged".into(),
        })
},
signed_move: Some(
            Move::new(
                "example.com.",
                Dnskey::parse_text(
                    "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
                )
                .expect("a DNSKEY"),
            )
            .between("a", "b"),
        ),
key_roll: Some(Roll {
            method: Method::DoubleDs,
            algorithm: 13,
            phase: Phase::Publishing,
            old: vec![RollKey {
                kind: KeyKind::Ksk,
                id: Some("1".into()),
                dnskey: Some(
                    Dnskey::parse_text(
                        "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
                    )
                    .expect("a DNSKEY"),
                ),
            }],
            new: vec![RollKey {
                kind: KeyKind::Ksk,
                id: None,
                dnskey: None,
            }],
            others: Vec::new(),
            aborted: false,
            confirmed_at: None,
            last_confirmed: None,
            phase_since: Timestamp(21),
            ttls: RollTtls {
                dnskey: 22,
                ds: 23,
                zone: 24,
            },
            abort_asked: false,
            via: crate::lifecycle::rollover::DsVia::Registrar,
            cds_notified: None,
        }),
key_ages: Some(KeyAges {
            keys: vec![KeyAge {
                kind: KeyKind::Csk,
                tag: 25,
                algorithm: 13,
                since: Timestamp(26),
            }],
            next_roll: Some(NextRoll {
                kind: KeyKind::Csk,
                at: Timestamp(27),
            }),
            waiting: Some("the cap".into()),
        }),
provider_roll: Some(ProviderRoll {
            old: "DS A".into(),
            new_key: Dnskey::parse_text(
                "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
            )
            .expect("a DNSKEY"),
            new: "DS D".into(),
            seen_at: Timestamp(25),
            add_asked_at: t(26),
            old_gone_at: None,
            old_gone_confirmed_at: None,
            remove_asked_at: None,
            swapped_at: t(27),
            gone_back_at: None,
            stale: Vec::new(),
        })
}
}

/// `every()` as the store writes it: the fields in this order, flat, none nested.
const EVERY: &str = concat!(
    "{",
    "\"ds_line\":\"DS A\",\"ds_to_enter\":\"DS B\",\"dnskey_to_enter\":\"DNSKEY A\",",
    "\"provider_off_since\":1,\"dnskey_everywhere_at\":2,\"hold_until\":3,",
    "\"ds_announced_at\":4,\"ds_first_seen_at\":5,\"t_gone\":6,\"gone_confirmed_at\":7,",
    "\"max_ds_ttl\":8,\"max_dnskey_ttl\":9,\"ds_seen_at\":10,",
    "\"partial_since\":11,\"failing_since\":12,\"failures\":13,",
    "\"provider_ns\":[\"ns1.\",\"ns2.\"],\"delegation\":\"mixed\",\"seen_at_provider\":true,",
    "\"old_ns\":[\"old.\"],\"old_ns_ttl\":14,\"delegated_at\":15,\"elsewhere_seen\":true,",
    "\"moving_in\":true,\"ds_to_remove\":[\"DS C\"],\"delegation_requested\":true,",
    "\"served_keys_when_asked\":\"257/13/1\",",
    "\"held_by\":{\"what\":\"the provider\",\"on\":\"provider\",\"account\":\"a\"},\"held_since\":16,",
    "\"settled_view\":{\"parent_ds\":\"ds\",\"child_keys\":\"keys\"},",
    "\"ds_path\":{\"parent\":\"ch.\",\"path\":{\"kind\":\"cds_scan\"},",
    "\"reason\":{\"kind\":\"built_in\",\"operator\":\"SWITCH\",\"source\":\"https://www.nic.ch/security/cds/\"},",
    "\"scan_period\":86400,\"accepts_first_ds\":true,\"first_ds_after\":259200,\"signal\":\"CDS\",",
    "\"call_registrar_hook\":false,\"note\":null},",
    "\"ds_path_at\":17,\"registry_since\":18,\"registry_missed_at\":19,",
    "\"cds_notified\":{\"at\":20,\"target\":\"scanner.ch.\",\"addr\":\"127.0.0.9\",\"port\":53,",
    "\"signal\":\"delete\",\"acknowledged\":true,\"outcome\":\"acknowledged\"},",
    "\"signed_move\":{\"zone\":\"example.com.\",\"source\":\"a\",\"target\":\"b\",\"phase\":\"signing_at_target\",",
    "\"source_key\":\"257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==\",",
    "\"target_key\":null,\"confirmed_at\":null,\"last_confirmed\":null,\"delegated_at\":null,\"ds_asked_for\":null,",
    "\"ttls\":{\"dnskey\":0,\"ds\":0,\"parent_ns\":0,\"apex_ns\":0}},",
    "\"key_roll\":{\"method\":\"double_ds\",\"algorithm\":13,\"phase\":\"publishing\",",
    "\"old\":[{\"kind\":\"ksk\",\"id\":\"1\",",
    "\"dnskey\":\"257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==\"}],",
    "\"new\":[{\"kind\":\"ksk\",\"id\":null,\"dnskey\":null}],\"others\":[],\"aborted\":false,",
    "\"confirmed_at\":null,\"last_confirmed\":null,\"phase_since\":21,",
    "\"ttls\":{\"dnskey\":22,\"ds\":23,\"zone\":24}},",
    "\"key_ages\":{\"keys\":[{\"kind\":\"csk\",\"tag\":25,\"algorithm\":13,\"since\":26}],",
    "\"next_roll\":{\"kind\":\"csk\",\"at\":27},\"waiting\":\"the cap\"},",
    "\"provider_roll\":{\"old\":\"DS A\",",
    "\"new_key\":\"257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==\",",
    "\"new\":\"DS D\",\"seen_at\":25,\"add_asked_at\":26,\"swapped_at\":27}",
    "}"
);

#[test]
fn facts_at_their_defaults_are_stored_as_an_empty_object() {
    assert_eq!(serde_json::to_string(&Facts::default()).unwrap(), "{}");
    assert_eq!(
        serde_json::from_str::<Facts>("{}").unwrap(),
        Facts::default()
    );
}

#[test]
fn every_fact_is_stored_flat_as_before() {
    assert_eq!(serde_json::to_string(&every()).unwrap(), EVERY);
    assert_eq!(serde_json::from_str::<Facts>(EVERY).unwrap(), every());
}

/// A row as a build that wrote every fact wrote it (the defaults too), beside a fact no
/// build knows any more: it reads as the defaults it holds, the stranger ignored.
#[test]
fn a_row_with_every_default_written_and_a_retired_fact_reads_as_the_defaults() {
    let old = concat!(
        "{\"ds_line\":null,\"ds_to_enter\":null,\"dnskey_to_enter\":null,",
        "\"provider_off_since\":null,\"dnskey_everywhere_at\":null,\"hold_until\":null,",
        "\"ds_announced_at\":null,\"ds_first_seen_at\":null,\"t_gone\":null,",
        "\"gone_confirmed_at\":null,\"max_ds_ttl\":null,\"max_dnskey_ttl\":null,",
        "\"ds_seen_at\":null,\"partial_since\":null,\"failing_since\":null,\"failures\":0,",
        "\"provider_ns\":null,\"delegation\":null,\"seen_at_provider\":false,\"old_ns\":[],",
        "\"old_ns_ttl\":null,\"delegated_at\":null,\"elsewhere_seen\":false,",
        "\"moving_in\":false,\"ds_to_remove\":[],\"delegation_requested\":false,",
        "\"served_keys_when_asked\":null,\"held_by\":null,\"held_since\":null,",
        "\"settled_view\":null,\"ds_path\":null,\"ds_path_at\":null,",
        "\"registry_since\":null,\"registry_missed_at\":null,\"cds_notified\":null,",
        "\"signed_move\":null,\"key_roll\":null,\"retired_fact\":{\"any\":[1,2]}}"
    );
    assert_eq!(
        serde_json::from_str::<Facts>(old).unwrap(),
        Facts::default()
    );
}

/// A row of a few facts, in another order, one of them a fact no build knows any more, a
/// hold stored before it named its account: the facts it holds, each in its place.
#[test]
fn a_row_of_a_few_facts_reads_each_into_its_place() {
    let row = concat!(
        "{\"registry_since\":18,\"retired_fact\":true,\"t_gone\":6,\"failures\":13,",
        "\"held_by\":{\"what\":\"the provider\",\"on\":\"provider\"},",
        "\"old_ns\":[\"old.\"],\"moving_in\":true,\"max_ds_ttl\":8,",
        "\"settled_view\":{\"parent_ds\":\"ds\",\"child_keys\":\"keys\"}}"
    );
    let every = every();
    let expected = Facts {
        lifecycle: LifecycleFacts {
            t_gone: every.lifecycle.t_gone,
            max_ds_ttl: every.lifecycle.max_ds_ttl,
            ..LifecycleFacts::default()
        },
        health: HealthFacts {
            failures: every.health.failures,
            ..HealthFacts::default()
        },
        delegation: DelegationFacts {
            old_ns: every.delegation.old_ns,
            ..DelegationFacts::default()
        },
        move_in: MoveInFacts {
            moving_in: every.move_in.moving_in,
            ..MoveInFacts::default()
        },
        routine: RoutineLookFacts {
            settled_view: every.routine.settled_view,
            ..RoutineLookFacts::default()
        },
        wait: WaitFacts {
            held_by: Some(Hold::new("the provider", Party::Provider)),
            ..WaitFacts::default()
        },
        parent_way: ParentWayFacts {
            registry_since: every.parent_way.registry_since,
            ..ParentWayFacts::default()
        },
        ..Facts::default()
    };
    let read = serde_json::from_str::<Facts>(row).unwrap();
    assert_eq!(read, expected);
    // And written back in the one order, without the stranger.
    assert_eq!(
        serde_json::to_string(&read).unwrap(),
        concat!(
            "{\"t_gone\":6,\"max_ds_ttl\":8,\"failures\":13,\"old_ns\":[\"old.\"],",
            "\"moving_in\":true,",
            "\"held_by\":{\"what\":\"the provider\",\"on\":\"provider\"},",
            "\"settled_view\":{\"parent_ds\":\"ds\",\"child_keys\":\"keys\"},",
            "\"registry_since\":18}"
        )
    );
}

/// A fact of the wrong type is named by its flat name (`parse_facts` tells the operator
/// which `json_extract(facts, '$.NAME')` to look at).
#[test]
fn a_fact_of_the_wrong_type_is_named_by_its_stored_name() {
    for (row, name) in [
        ("{\"failures\":-1}", "failures"),
        ("{\"hold_until\":\"soon\"}", "hold_until"),
        ("{\"ds_path_at\":\"soon\"}", "ds_path_at"),
        ("{\"moving_in\":1}", "moving_in"),
    ] {
        let mut json = serde_json::Deserializer::from_str(row);
        let err = serde_path_to_error::deserialize::<_, Facts>(&mut json).unwrap_err();
        assert_eq!(err.path().to_string(), name, "{row}");
    }
}
