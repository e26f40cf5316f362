//! The store's mapping between SQLite and the lifecycle's types: one place per concept,
//! corrupt data named, the facts migration.

use std::path::Path;

use sqlx::SqlitePool;
use sqlx::sqlite::SqliteConnectOptions;
use strum::VariantArray;

use super::rows::parse_facts;
use super::*;
use crate::lifecycle::facts::{
    DelegationFacts, HealthFacts, LifecycleFacts, MoveInFacts, ParentWayFacts, RoutineLookFacts,
    WaitFacts,
};
use crate::lifecycle::{AlertKind, AuditNote, Decision, Effect, EffectKind, Facts};

const ZONE: &str = "example.com.";

fn facts() -> Facts {
    Facts {
        lifecycle: LifecycleFacts {
            ds_line: Some("example.com. 3600 IN DS 1 13 2 AB".into()),
            ds_to_enter: Some("example.com. 3600 IN DS 1 13 2 AB".into()),
            ds_announced_at: Some(Timestamp(5_000)),
            max_ds_ttl: Some(3600),
            ..LifecycleFacts::default()
        },
        health: HealthFacts {
            failing_since: Some(Timestamp(7_000)),
            failures: 3,
            ..HealthFacts::default()
        },
        ..Facts::default()
    }
}

async fn stepped(store: &Store, facts: Facts, effects: Vec<Effect>) -> ZoneRow {
    store.ensure_zone(ZONE, Timestamp(1_000)).await.unwrap();
    let row = store.zone_for_step(ZONE).await.unwrap().unwrap();
    let decision = Decision {
        state: Some(State::AwaitingDs),
        facts,
        effects,
        alerts: Vec::new(),
        notes: vec![AuditNote {
            from: None,
            to: Some(State::AwaitingDs),
            reason: "test".into(),
        }],
        wake_at: Timestamp(9_000),
    };
    let json = serde_json::json!({});
    assert!(
        store
            .commit_step(
                &row,
                &decision,
                &ObservationText::from_whole(json.to_string()),
                Timestamp(2_000)
            )
            .await
            .unwrap()
    );
    store.zone(ZONE).await.unwrap().unwrap()
}

#[test]
fn string_forms_round_trip_and_agree_with_serde() {
    for &k in EventKind::VARIANTS {
        assert_eq!(k.as_str().parse::<EventKind>(), Ok(k));
        assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
    }
    assert_eq!(EventKind::Transition, "transition");
    for &s in OutboxStatus::VARIANTS {
        assert_eq!(s.as_str().parse::<OutboxStatus>(), Ok(s));
    }
    // The schema's CHECK lists exactly these (migrations/0003).
    let names: Vec<_> = OutboxStatus::VARIANTS.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        names,
        [
            "pending",
            "done",
            "failed",
            "refused",
            "superseded",
            "unknown"
        ]
    );
    let effects = [
        Effect::EnableDnssec,
        Effect::DisableDnssec,
        Effect::SetCds {
            to: crate::dnssec::CdsPublication::Delete,
        },
        Effect::AnnounceDs {
            ds_line: "x".into(),
        },
        Effect::RequestDsRemoval { ds_line: None },
        Effect::RequestDelegation {
            name_servers: vec!["ns1.example.net.".into()],
        },
        Effect::MoveCall {
            account: "b".into(),
            call: crate::lifecycle::MoveCall::DnssecOn,
        },
        Effect::MoveRequest {
            request: crate::lifecycle::MoveRequest::ChangeNs {
                name_servers: vec!["ns1.example.org.".into()],
            },
        },
        Effect::NotifyCds(notify_plan()),
        Effect::AddKey {
            kind: crate::lifecycle::rollover::KeyKind::Zsk,
            algorithm: 13,
            active: false,
            published: true,
        },
        Effect::SetKeyState {
            id: "1".into(),
            active: true,
            published: true,
        },
        Effect::DeleteKey { id: "1".into() },
        Effect::RollRequest {
            request: crate::lifecycle::RollRequest::AddDs {
                ds_line: "x".into(),
                keep: "y".into(),
            },
        },
    ];
    assert_eq!(effects.len(), EffectKind::VARIANTS.len());
    for effect in effects {
        let json = serde_json::to_value(&effect).unwrap();
        assert_eq!(json["effect"], effect.kind().as_str(), "{effect:?}");
    }
    for &k in AlertKind::ALL {
        assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        assert_eq!(
            serde_json::to_value(k.severity()).unwrap(),
            k.severity().as_str()
        );
    }
}

/// Facts at their defaults are left out of the stored JSON, and every fact set reads
/// back as written.
#[test]
fn facts_are_stored_without_their_defaults_and_read_back_whole() {
    assert_eq!(serde_json::to_string(&Facts::default()).unwrap(), "{}");
    let t = |ms| Some(Timestamp(ms));
    let every = Facts { lifecycle: LifecycleFacts { ds_line: Some("DS A".into()), ds_to_enter: Some("DS A".into()), dnskey_to_enter: Some("DNSKEY A".into()), provider_off_since: t(1), dnskey_everywhere_at: t(2), hold_until: t(3), ds_announced_at: t(4), ds_first_seen_at: t(5), t_gone: t(6), gone_confirmed_at: t(61), max_ds_ttl: Some(7), max_dnskey_ttl: Some(8), ds_seen_at: t(62) }, health: HealthFacts { partial_since: t(9), failing_since: t(10), failures: 11 }, delegation: DelegationFacts { provider_ns: Some(vec!["ns1.".into()]), verdict: Some(crate::dns::delegation::DelegationVerdict::Mixed), seen_at_provider: true, old_ns: vec!["old.".into()], old_ns_ttl: Some(12), delegated_at: t(13), elsewhere_seen: true }, move_in: MoveInFacts { moving_in: true, ds_to_remove: vec!["DS B".into()], delegation_requested: true }, routine: RoutineLookFacts { served_keys_when_asked: Some("257/13/1".into()), settled_view: Some(crate::lifecycle::sample::SettledView {
            parent_ds: "none".into(),
            child_keys: "none".into(),
        }) }, wait: WaitFacts { held_by: Some(crate::lifecycle::hold::Hold::new(
            "the provider",
            crate::lifecycle::hold::Party::Provider,
        )), held_since: t(14) }, parent_way: ParentWayFacts { ds_path: Some(crate::lifecycle::parent_way::resolve(
            "ch.",
            &Default::default(),
            &crate::lifecycle::parent_way::DsyncHint::None,
        )), ds_path_at: t(15), registry_since: t(16), registry_missed_at: t(17), cds_notified: Some(crate::lifecycle::registry::CdsNotified {
            at: Timestamp(18),
            target: "scanner.ch.".into(),
            addr: Some("127.0.0.9".into()),
            port: 53,
            signal: "delete".into(),
            acknowledged: true,
            outcome: "acknowledged".into(),
        }) }, signed_move: Some(
            crate::lifecycle::signed_move::Move::new(
                "example.com.",
                crate::dnssec::Dnskey::parse_text(
                    "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
                )
                .unwrap(),
            )
            .between("a", "b"),
        ), key_roll: Some(
            crate::lifecycle::rollover::Roll::plan(
                &[crate::lifecycle::rollover::ListedKey {
                    id: "1".into(),
                    dnskey: crate::dnssec::Dnskey::parse_text(
                        "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
                    )
                    .unwrap(),
                    active: true,
                    published: true,
                }],
                crate::lifecycle::rollover::KeyKind::Csk,
                None,
                Timestamp(5),
            )
            .unwrap(),
        ), key_ages: Some(crate::lifecycle::keys::KeyAges::default()) ,
        provider_roll: Some(crate::lifecycle::own_roll::ProviderRoll {
            old: "DS A".into(),
            new_key: crate::dnssec::Dnskey::parse_text(
                "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
            )
            .unwrap(),
            new: "DS B".into(),
            seen_at: Timestamp(19),
            add_asked_at: None,
            old_gone_at: None,
            old_gone_confirmed_at: None,
            remove_asked_at: None,
            swapped_at: None,
            gone_back_at: None,
            stale: Vec::new(),
        }) };
    let text = serde_json::to_string(&every).unwrap();
    assert_eq!(parse_facts(ZONE, &text).unwrap(), every);
    // Every field is written when set (the literal above names them all).
    let written = serde_json::from_str::<serde_json::Value>(&text).unwrap();
    assert_eq!(written.as_object().map(|o| o.len()), Some(39), "{text}");
}

#[test]
fn facts_missing_from_the_json_read_as_defaults_and_unknown_ones_are_ignored() {
    assert_eq!(parse_facts(ZONE, "{}").unwrap(), Facts::default());
    let f = parse_facts(ZONE, r#"{"t_gone": 12, "retired_fact": true}"#).unwrap();
    assert_eq!(f.lifecycle.t_gone, Some(Timestamp(12)));
    match parse_facts(ZONE, r#"{"failures": -1}"#) {
        Err(StoreError::Corrupt(what)) => assert!(what.contains("example.com.: facts"), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn facts_are_one_json_column_read_back_whole() {
    let store = Store::open_in_memory().await.unwrap();
    let row = stepped(&store, facts(), vec![Effect::EnableDnssec]).await;
    assert_eq!(row.zone.facts, facts());
    assert_eq!(row.zone.state, Some(State::AwaitingDs));
    let (t,): (Option<i64>,) =
        sqlx::query_as("SELECT json_extract(facts, '$.ds_announced_at') FROM zones")
            .fetch_one(store.sqlite_pool())
            .await
            .unwrap();
    assert_eq!(t, Some(5_000));
    let (kind,): (String,) = sqlx::query_as("SELECT kind FROM outbox")
        .fetch_one(store.sqlite_pool())
        .await
        .unwrap();
    assert_eq!(kind, "enable_dnssec");
    let events = store.events(ZONE).await.unwrap();
    assert_eq!(events[0].kind, EventKind::Transition);
}

/// A tick's read walks the due index in its order and stops at the limit: a sort would read
/// every zone due at the same moment (after an import, all of them) at every tick.
#[tokio::test]
async fn the_due_read_walks_the_index_without_a_sort() {
    let store = Store::open_in_memory().await.unwrap();
    let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(&format!(
        "EXPLAIN QUERY PLAN {} {}",
        super::sqlite::STEP_READ,
        super::sqlite::DUE_ORDER
    ))
    .bind("announce_ds")
    .bind("request_ds_removal")
    .bind(0_i64)
    .bind(10_i64)
    .fetch_all(store.sqlite_pool())
    .await
    .unwrap();
    let plan: Vec<&str> = plan.iter().map(|r| r.3.as_str()).collect();
    assert!(
        plan.iter().any(|l| l.contains("USING INDEX zones_due")),
        "{plan:#?}"
    );
    assert!(!plan.iter().any(|l| l.contains("TEMP B-TREE")), "{plan:#?}");
}

#[tokio::test]
async fn corrupt_names_are_named() {
    let store = Store::open_in_memory().await.unwrap();
    stepped(&store, facts(), Vec::new()).await;
    sqlx::query("UPDATE zones SET facts = '{\"hold_until\": \"soon\"}'")
        .execute(store.sqlite_pool())
        .await
        .unwrap();
    let err = store.zone(ZONE).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt(w) if w.contains("facts.hold_until")),
        "{err}"
    );
    sqlx::query("INSERT INTO events (zone, at, kind, reason) VALUES (?, 1, 'gossip', 'x')")
        .bind(ZONE)
        .execute(store.sqlite_pool())
        .await
        .unwrap();
    let err = store.events(ZONE).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt(w) if w == "unknown event kind \"gossip\""),
        "{err}"
    );
    sqlx::query(
        "INSERT INTO alerts (zone, kind, severity, message, opened_at) \
         VALUES (?, 'gremlins', 'warning', 'x', 1)",
    )
    .bind(ZONE)
    .execute(store.sqlite_pool())
    .await
    .unwrap();
    let err = store.alerts(ZONE).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt(w) if w == "unknown alert kind \"gremlins\""),
        "{err}"
    );
}

#[tokio::test]
async fn a_zone_name_not_in_canonical_form_is_corrupt_data_named() {
    let store = Store::open_in_memory().await.unwrap();
    // Only canonical names are ever written; one that is not was written by something else.
    for name in ["Example.COM.", "example.com", "bad..example."] {
        store
            .set_intent(name, Intent::Enabled, false, "test", Timestamp(1))
            .await
            .unwrap();
        let err = store.zone(name).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Corrupt(w) if w.contains(&format!("{name:?}"))),
            "{name}: {err}"
        );
    }
}

/// sqlx's migrator over one of the crate's migration directories, as sqlx reads it.
async fn migrator_of(dir: &str) -> sqlx::migrate::Migrator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    sqlx::migrate::Migrator::new(path.as_path()).await.unwrap()
}

/// A new SQLite file at `path` with the first `n` migrations applied.
async fn sqlite_at_schema(path: &Path, n: usize) -> SqlitePool {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true);
    let pool = SqlitePool::connect_with(options).await.unwrap();
    let mut migrator = migrator_of("migrations").await;
    migrator.migrations = migrator.migrations[..n].to_vec().into();
    migrator.run(&pool).await.unwrap();
    pool
}

/// A database of schema 3 (facts in columns) keeps its facts, its pending calls' kinds and
/// its documented views through migration 4.
#[tokio::test]
async fn migration_4_moves_the_fact_columns_into_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let pool = sqlite_at_schema(&path, 3).await;
        sqlx::query(
            "INSERT INTO zones (name, intent, state, state_since, ds_line, ds_to_enter, \
             ds_announced_at, max_ds_ttl, max_dnskey_ttl, failures, failing_since, next_check_at) \
             VALUES (?, 'enabled', 'awaiting_ds', 1000, 'DS A', 'DS A', 5000, 3600, 300, 2, 7000, 9000)",
        )
        .bind(ZONE)
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO outbox (zone, created_at, effect) \
             VALUES (?, 1000, '{\"effect\":\"announce_ds\",\"ds_line\":\"DS A\"}')",
        )
        .bind(ZONE)
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
    }
    // A reader newer than the file says what to do, rather than failing on a column.
    let behind = Store::open_read_only(Path::new(&path)).await.err();
    let latest = super::migrations::SQLITE.latest();
    assert!(
        matches!(
            behind,
            Some(StoreError::SchemaBehind {
                applied: 3,
                wanted,
                ..
            }) if wanted == latest
        ),
        "{behind:?}"
    );
    let store = Store::open(Path::new(&path)).await.unwrap();
    let row = store.zone(ZONE).await.unwrap().unwrap();
    assert_eq!(
        row.zone.facts,
        Facts {
            lifecycle: LifecycleFacts {
                ds_line: Some("DS A".into()),
                ds_to_enter: Some("DS A".into()),
                ds_announced_at: Some(Timestamp(5_000)),
                max_ds_ttl: Some(3600),
                max_dnskey_ttl: Some(300),
                ..LifecycleFacts::default()
            },
            health: HealthFacts {
                failures: 2,
                failing_since: Some(Timestamp(7_000)),
                ..HealthFacts::default()
            },
            ..Facts::default()
        }
    );
    assert_eq!(row.zone.intent, Intent::Enabled);
    let status: (String, String, String, Option<String>, Option<String>, i64) =
        sqlx::query_as("SELECT zone, state, intent, ds, ds_to_enter, open_alerts FROM status")
            .fetch_one(store.sqlite_pool())
            .await
            .unwrap();
    assert_eq!(
        status,
        (
            ZONE.into(),
            "awaiting_ds".into(),
            "enabled".into(),
            Some("DS A".into()),
            Some("DS A".into()),
            0
        )
    );
    // The pending announcement keeps its kind: the registrar-hook query finds it.
    store.retry_effect(1, "hook exited with 1").await.unwrap();
    assert_eq!(
        store
            .zone_for_step(ZONE)
            .await
            .unwrap()
            .and_then(|r| r.registrar_hook_failed),
        Some("hook exited with 1".into())
    );
    // Migration 5 rebuilt `zones` under the rows that reference it: the new state is
    // accepted, an unknown one still refused, and the references still enforced.
    sqlx::query("UPDATE zones SET state = 'awaiting_delegation'")
        .execute(store.sqlite_pool())
        .await
        .unwrap();
    assert!(
        sqlx::query("UPDATE zones SET state = 'adopting'")
            .execute(store.sqlite_pool())
            .await
            .is_err()
    );
    assert!(
        sqlx::query(
            "INSERT INTO outbox (zone, created_at, effect, kind) VALUES ('nowhere.', 1, '{}', 'x')"
        )
        .execute(store.sqlite_pool())
        .await
        .is_err(),
        "foreign keys are enforced after the rebuild"
    );
    store.close().await;
}

/// Last observations as a database before migration 8 (SQLite) or 5 (PostgreSQL) holds
/// them, and the brief each must have after it: the provider's answer or failure and the
/// parent's evidence (none when the parent could not be asked), or none at all.
fn observations_before_the_brief() -> Vec<(
    &'static str,
    Option<&'static str>,
    Option<serde_json::Value>,
)> {
    vec![
        (
            "a.example.",
            Some(
                r#"{"at":"t","child":[],"parent":{"answers":[],"evidence":{"kind":"insecure","detail":"unsigned"}},"provider":{"dnssec":"on","ds":"DS A"}}"#,
            ),
            Some(serde_json::json!({
                "provider": {"dnssec": "on"},
                "parent": {"evidence": {"kind": "insecure", "detail": "unsigned"}}
            })),
        ),
        (
            "b.example.",
            Some(
                r#"{"at":"t","parent":{"error":"no parent server answered"},"provider":{"dnssec":"unknown","error":"timed out"}}"#,
            ),
            Some(serde_json::json!({
                "provider": {"dnssec": "unknown", "error": "timed out"},
                "parent": {}
            })),
        ),
        ("c.example.", None, None),
    ]
}

/// Each zone's brief as `status` lists it, checked against the expected one and against
/// the brief cut out of the whole in Rust (`ObservationText::from_whole`).
async fn assert_briefs_after_migration(store: &Store) {
    let mut listed = Vec::new();
    store
        .each_zone_brief::<StoreError>(&mut |row| {
            listed.push((row.zone.name.to_string(), row.last_observation));
            Ok(())
        })
        .await
        .unwrap();
    let expected: Vec<_> = observations_before_the_brief()
        .into_iter()
        .map(|(name, whole, brief)| {
            if let (Some(whole), Some(brief)) = (whole, &brief) {
                let cut = ObservationText::from_whole(whole).brief;
                assert_eq!(
                    &serde_json::from_str::<serde_json::Value>(&cut).unwrap(),
                    brief
                );
            }
            (name.to_string(), brief)
        })
        .collect();
    assert_eq!(listed, expected);
    // A step reads the same brief.
    let read = store.zone_for_step("a.example.").await.unwrap().unwrap();
    assert_eq!(read.row.last_observation, expected[0].1);
}

/// Migration 8 gives every zone's last observation its brief, so `status` and the steps
/// read after the upgrade what they read before it; an observation that is not JSON
/// gets none (and fails nothing).
#[tokio::test]
async fn migration_8_gives_each_last_observation_its_brief() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let pool = sqlite_at_schema(&path, 7).await;
        let mut zones = observations_before_the_brief();
        zones.push(("d.example.", Some("not json {"), None));
        for (name, whole, _) in zones {
            sqlx::query(
                "INSERT INTO zones (name, state_since, next_check_at, last_observation) \
                 VALUES (?, 0, 0, ?)",
            )
            .bind(name)
            .bind(whole)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;
    }
    let store = Store::open(Path::new(&path)).await.unwrap();
    let (unreadable,): (Option<String>,) =
        sqlx::query_as("SELECT last_brief FROM zones WHERE name = 'd.example.'")
            .fetch_one(store.sqlite_pool())
            .await
            .unwrap();
    assert_eq!(
        unreadable, None,
        "an observation that is not JSON gets no brief"
    );
    sqlx::query("DELETE FROM zones WHERE name = 'd.example.'")
        .execute(store.sqlite_pool())
        .await
        .unwrap();
    assert_briefs_after_migration(&store).await;
    store.close().await;
}

// ---- PostgreSQL: the same API, compared call for call with SQLite --------------------

use dnssec_warden_test_support::postgres as pg_support;

use super::{DatabaseSettings, PostgresSettings};
use crate::lifecycle::AlertCheck;
use crate::secret::SecretSource;

async fn postgres_settings(cluster: &pg_support::Cluster) -> DatabaseSettings {
    let url = cluster.database().await;
    DatabaseSettings::Postgres(PostgresSettings::new(url.parse().unwrap()))
}

async fn postgres_store(cluster: &pg_support::Cluster) -> Store {
    Store::connect(&postgres_settings(cluster).await)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.log()))
}

fn decision(
    state: State,
    from: Option<State>,
    facts: Facts,
    effects: Vec<Effect>,
    alerts: Vec<AlertCheck>,
    wake_at: i64,
) -> Decision {
    Decision {
        state: Some(state),
        facts,
        effects,
        alerts,
        notes: vec![
            AuditNote {
                from,
                to: Some(state),
                reason: format!("to {state}"),
            },
            AuditNote {
                from: Some(state),
                to: Some(state),
                reason: "seen again".into(),
            },
        ],
        wake_at: Timestamp(wake_at),
    }
}

/// Every write and read of the public API on one store, each read's answer written down:
/// the two backends must write down the same lines.
async fn exercise(store: &Store) -> Vec<String> {
    let mut log = Vec::new();
    macro_rules! say {
        ($e:expr) => {
            log.push(format!("{} = {:?}", stringify!($e), $e))
        };
    }
    // Names that sort differently byte-wise and in a natural-language collation.
    for name in ["b.test.", "a-b.test.", "ab.test.", ZONE] {
        say!(store.ensure_zone(name, Timestamp(1_000)).await.unwrap());
    }
    say!(store.ensure_zone(ZONE, Timestamp(1_500)).await.unwrap());
    say!(store.state_counts().await.unwrap());
    store
        .set_intent(
            ZONE,
            Intent::Enabled,
            false,
            "operator: enable",
            Timestamp(1_100),
        )
        .await
        .unwrap();
    store
        .set_intent(
            "new.test.",
            Intent::Disabled,
            true,
            "operator: disable",
            Timestamp(1_200),
        )
        .await
        .unwrap();
    say!(due_names(store, 1_150, 10).await);
    say!(due_names(store, 5_000, 2).await);
    say!(store.next_due().await.unwrap());
    let row = store.zone_for_step(ZONE).await.unwrap().unwrap();
    let first = decision(
        State::AwaitingDs,
        None,
        facts(),
        vec![
            Effect::EnableDnssec,
            Effect::AnnounceDs {
                ds_line: "example.com. 3600 IN DS 1 13 2 AB".into(),
            },
        ],
        vec![
            AlertCheck::new(AlertKind::DsMismatch, Some("DS matches no key".into())),
            AlertCheck::new(AlertKind::DnssecOffWithDs, None),
        ],
        9_000,
    );
    let obs = serde_json::json!({"parent": "all_absent"});
    say!(
        store
            .commit_step(
                &row,
                &first,
                &ObservationText::from_whole(obs.to_string()),
                Timestamp(2_000)
            )
            .await
            .unwrap()
    );
    // A step decided on the row before it: refused, nothing written.
    say!(
        store
            .commit_step(
                &row,
                &first,
                &ObservationText::from_whole(obs.to_string()),
                Timestamp(2_100)
            )
            .await
            .unwrap()
    );
    let row = store.zone(ZONE).await.unwrap().unwrap();
    let read = store.zone_for_step(ZONE).await.unwrap().unwrap();
    say!(row);
    say!(store.pending_effects(ZONE).await.unwrap());
    // The same notes again: counted as repeats; the alert's message updated.
    let mut again = first.clone();
    again.effects = vec![Effect::EnableDnssec];
    again.alerts = vec![AlertCheck::new(
        AlertKind::DsMismatch,
        Some("DS still matches no key".into()),
    )];
    say!(
        store
            .commit_step(
                &read,
                &again,
                &ObservationText::from_whole(obs.to_string()),
                Timestamp(3_000)
            )
            .await
            .unwrap()
    );
    say!(store.pending_effects(ZONE).await.unwrap());
    let pending = store.pending_effects(ZONE).await.unwrap();
    store
        .start_effect(pending[0].id, Timestamp(3_100))
        .await
        .unwrap();
    say!(
        store
            .unknown_in_flight(Timestamp(3_200), Some("b.test."))
            .await
            .unwrap()
    );
    say!(
        store
            .unknown_in_flight(Timestamp(3_200), None)
            .await
            .unwrap()
    );
    say!(store.unknown_calls(ZONE).await.unwrap());
    store
        .settle_unknown_call(pending[0].id, ZONE, true, "took effect", Timestamp(3_300))
        .await
        .unwrap();
    say!(store.unknown_calls(ZONE).await.unwrap());
    store
        .retry_effect(pending[1].id, "hook exited with 1")
        .await
        .unwrap();
    say!(store.zone_for_step(ZONE).await.unwrap().map(|r| (
        r.registrar_hook_failed,
        r.unknown_calls,
        r.pending_effects
    )));
    store
        .finish_effect(
            pending[1].id,
            OutboxStatus::Done,
            None,
            None,
            Timestamp(3_400),
        )
        .await
        .unwrap();
    say!(store.pending_effects(ZONE).await.unwrap());
    say!(store.recheck_pending(Timestamp(3_500)).await.unwrap());
    store.check_by(ZONE, Timestamp(4_000)).await.unwrap();
    store.check_by("ab.test.", Timestamp(500)).await.unwrap();
    store.defer("b.test.", Timestamp(8_000)).await.unwrap();
    store
        .record(ZONE, EventKind::Guard, "guard: DS seen", Timestamp(3_600))
        .await
        .unwrap();
    store
        .record(ZONE, EventKind::Guard, "guard: DS seen", Timestamp(3_700))
        .await
        .unwrap();
    say!(
        store
            .record("nowhere.", EventKind::Note, "x", Timestamp(1))
            .await
            .err()
    );
    // Resolve the alert, then leave the state: the announcement is void.
    let row = store.zone_for_step(ZONE).await.unwrap().unwrap();
    let mut resolved = decision(
        State::Enabling,
        Some(State::AwaitingDs),
        Facts::default(),
        vec![Effect::AnnounceDs {
            ds_line: "other".into(),
        }],
        vec![AlertCheck::new(AlertKind::DsMismatch, None)],
        12_000,
    );
    say!(
        store
            .commit_step(
                &row,
                &resolved,
                &ObservationText::from_whole(obs.to_string()),
                Timestamp(4_000)
            )
            .await
            .unwrap()
    );
    let row = store.zone_for_step(ZONE).await.unwrap().unwrap();
    resolved.effects.clear();
    resolved.alerts.clear();
    say!(
        store
            .commit_step(
                &row,
                &resolved,
                &ObservationText::from_whole(obs.to_string()),
                Timestamp(4_500)
            )
            .await
            .unwrap()
    );
    say!(store.pending_effects(ZONE).await.unwrap());
    say!(store.zone_for_step(ZONE).await.unwrap());
    say!(store.zone_for_step("nowhere.").await.unwrap());
    say!(store.zones().await.unwrap());
    say!(store.events(ZONE).await.unwrap());
    say!(store.events("new.test.").await.unwrap());
    say!(store.alerts(ZONE).await.unwrap());
    say!(store.open_alerts(None).await.unwrap());
    say!(store.open_alerts(Some(ZONE)).await.unwrap());
    let owed = store
        .alerts_to_notify(Timestamp(5_000), Duration::from_secs(1))
        .await
        .unwrap();
    say!(owed);
    say!(store.undelivered_alert_notifications().await.unwrap());
    store
        .alert_notified(owed[0].id, Timestamp(5_100))
        .await
        .unwrap();
    store
        .alert_resolution_notified(owed[0].id, Timestamp(5_200))
        .await
        .unwrap();
    say!(
        store
            .alerts_to_notify(Timestamp(5_300), Duration::MAX)
            .await
            .unwrap()
    );
    say!(store.undelivered_alert_notifications().await.unwrap());
    say!(store.open_alert_counts().await.unwrap());
    say!(store.zone_health().await.unwrap());
    say!(store.state_counts().await.unwrap());
    say!(store.next_due().await.unwrap());
    say!(due_names(store, 100_000, 10).await);
    say!(store.probe_writable().await.unwrap());
    say!(store.write_failure());
    say!(store.verify_identity().await.unwrap());
    log
}

/// The same sequence of calls answers the same on PostgreSQL as on SQLite, read for read.
#[tokio::test]
async fn postgres_answers_every_call_as_sqlite_does() {
    let cluster = pg_support::Cluster::shared();
    let sqlite = Store::open_in_memory().await.unwrap();
    let postgres = postgres_store(&cluster).await;
    let expected = exercise(&sqlite).await;
    let got = exercise(&postgres).await;
    for (e, g) in expected.iter().zip(&got) {
        assert_eq!(e, g);
    }
    assert_eq!(expected.len(), got.len());
    postgres.close().await;
}

/// The schema's contract on PostgreSQL: the documented views, the CHECKs, the references,
/// the append-only audit trail, JSON refused when it is not JSON, corrupt values named.
#[tokio::test]
async fn postgres_schema_keeps_the_views_constraints_and_the_append_only_trail() {
    let cluster = pg_support::Cluster::shared();
    let store = postgres_store(&cluster).await;
    stepped(&store, facts(), vec![Effect::EnableDnssec]).await;
    let pool = store.pg_pool();
    let status: (
        String,
        String,
        String,
        String,
        String,
        Option<String>,
        Option<String>,
        i64,
    ) = sqlx::query_as(
        "SELECT zone, state, intent, since, next_check, ds, ds_to_enter, open_alerts FROM status",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(
        status,
        (
            ZONE.into(),
            "awaiting_ds".into(),
            "none".into(),
            "1970-01-01 00:00:02".into(),
            "1970-01-01 00:00:09".into(),
            Some("example.com. 3600 IN DS 1 13 2 AB".into()),
            Some("example.com. 3600 IN DS 1 13 2 AB".into()),
            0
        )
    );
    let history: (String, String, String, String, String, i64, Option<String>) =
        sqlx::query_as("SELECT zone, at, kind, states, reason, repeats, last_seen FROM history")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(
        history,
        (
            ZONE.into(),
            "1970-01-01 00:00:02".into(),
            "transition".into(),
            "- -> awaiting_ds".into(),
            "test".into(),
            0,
            None
        )
    );
    let (t,): (Option<String>,) =
        sqlx::query_as("SELECT (facts::jsonb) ->> 'ds_announced_at' FROM zones")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(t.as_deref(), Some("5000"));
    for (sql, says) in [
        ("UPDATE events SET reason = 'x'", "append-only"),
        ("DELETE FROM events", "append-only"),
        ("TRUNCATE events CASCADE", "append-only"),
        ("UPDATE zones SET state = 'adopting'", "zones_state_check"),
        ("UPDATE zones SET intent = 'maybe'", "zones_intent_check"),
        ("UPDATE zones SET facts = 'not json'", "json"),
        (
            "INSERT INTO outbox (zone, created_at, effect, kind) VALUES ('nowhere.', 1, '{}', 'x')",
            "foreign key",
        ),
        ("UPDATE outbox SET status = 'lost'", "outbox_status_check"),
        (
            "INSERT INTO alerts (zone, kind, severity, message, opened_at) \
             VALUES ('example.com.', 'k', 'info', 'x', 1)",
            "alerts_severity_check",
        ),
    ] {
        let err = sqlx::query(sql)
            .execute(pool)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{sql}: {err}");
    }
    // One open episode per zone and kind.
    let open = "INSERT INTO alerts (zone, kind, severity, message, opened_at) \
                VALUES ('example.com.', 'k', 'warning', 'x', 1)";
    sqlx::query(open).execute(pool).await.unwrap();
    assert!(sqlx::query(open).execute(pool).await.is_err());
    // Corrupt values are named, as on SQLite.
    sqlx::query("DELETE FROM alerts")
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("UPDATE zones SET facts = '{\"hold_until\": \"soon\"}'")
        .execute(pool)
        .await
        .unwrap();
    let err = store.zone(ZONE).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt(w) if w.contains("facts.hold_until")),
        "{err}"
    );
    sqlx::query("INSERT INTO events (zone, at, kind, reason) VALUES ($1, 1, 'gossip', 'x')")
        .bind(ZONE)
        .execute(pool)
        .await
        .unwrap();
    let err = store.events(ZONE).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt(w) if w == "unknown event kind \"gossip\""),
        "{err}"
    );
    store.close().await;
}

/// `status` never migrates (a database the daemon has not migrated is refused, as SQLite's
/// file is), `check-config`'s comparison, the read-only store never writes, and a password
/// that cannot be read is said without the URL failing.
#[tokio::test]
async fn postgres_migrates_only_when_asked() {
    let cluster = pg_support::Cluster::shared();
    let settings = postgres_settings(&cluster).await;
    let DatabaseSettings::Postgres(pg) = &settings else {
        unreachable!()
    };
    let latest = super::migrations::POSTGRES.latest();
    assert_eq!(
        check_postgres(pg).await.unwrap(),
        SchemaCheck {
            applied: 0,
            wanted: latest
        }
    );
    let behind = Store::connect_read_only(&settings).await.err();
    assert!(
        matches!(
            behind,
            Some(StoreError::SchemaBehind {
                applied: 0,
                wanted,
                ..
            }) if wanted == latest
        ),
        "{behind:?}"
    );
    let store = Store::connect(&settings).await.unwrap();
    store.ensure_zone(ZONE, Timestamp(1)).await.unwrap();
    assert_eq!(
        check_postgres(pg).await.unwrap(),
        SchemaCheck {
            applied: latest,
            wanted: latest
        }
    );
    // Opening again is idempotent (the daemon restarting).
    Store::connect(&settings).await.unwrap().close().await;
    let reader = Store::connect_read_only(&settings).await.unwrap();
    assert_eq!(reader.zones().await.unwrap().len(), 1);
    let err = reader
        .ensure_zone("other.", Timestamp(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");

    let missing = PostgresSettings {
        password: Some(SecretSource::File("/nonexistent/pg-password".into())),
        ..PostgresSettings::new(pg.url.clone())
    };
    let err = Store::connect(&DatabaseSettings::Postgres(missing))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&err, StoreError::Password { .. }) && err.to_string().contains("pg-password"),
        "{err}"
    );
    reader.close().await;
    store.close().await;
}

/// PostgreSQL's migration 5 gives every zone's last observation its brief, as SQLite's 8.
#[tokio::test]
async fn postgres_migration_5_gives_each_last_observation_its_brief() {
    let cluster = pg_support::Cluster::shared();
    let url = cluster.database().await;
    {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        let mut schema_4 = migrator_of("migrations/postgres").await;
        schema_4.migrations = schema_4.migrations[..4].to_vec().into();
        schema_4.run(&pool).await.unwrap();
        for (name, whole, _) in observations_before_the_brief() {
            sqlx::query(
                "INSERT INTO zones (name, state_since, next_check_at, last_observation) \
                 VALUES ($1, 0, 0, $2)",
            )
            .bind(name)
            .bind(whole)
            .execute(&pool)
            .await
            .unwrap();
        }
        pool.close().await;
    }
    let store = Store::connect(&DatabaseSettings::Postgres(PostgresSettings::new(
        url.parse().unwrap(),
    )))
    .await
    .unwrap();
    assert_briefs_after_migration(&store).await;
    // A daemon of the previous version (still running beside upgraded ones) writes the
    // whole only: the brief follows the whole, and a write of both keeps what it wrote.
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let brief_of = async |name: &str| -> Option<serde_json::Value> {
        let (brief,): (Option<String>,) =
            sqlx::query_as("SELECT last_brief FROM zones WHERE name = $1")
                .bind(name)
                .fetch_one(&pool)
                .await
                .unwrap();
        brief.map(|b| serde_json::from_str(&b).unwrap())
    };
    for (name, whole) in [
        (
            "a.example.",
            Some(r#"{"parent":{"error":"timed out"},"provider":{"dnssec":"not_found"}}"#),
        ),
        ("c.example.", Some(r#"{"provider":{"dnssec":"off"}}"#)),
        ("b.example.", None),
    ] {
        sqlx::query("UPDATE zones SET last_observation = $1 WHERE name = $2")
            .bind(whole)
            .bind(name)
            .execute(&pool)
            .await
            .unwrap();
        let cut = whole.map(|w| {
            serde_json::from_str::<serde_json::Value>(&ObservationText::from_whole(w).brief)
                .unwrap()
        });
        assert_eq!(brief_of(name).await, cut, "{name}");
    }
    sqlx::query("UPDATE zones SET last_observation = '{}', last_brief = '{\"mine\":1}' WHERE name = 'a.example.'")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        brief_of("a.example.").await,
        Some(serde_json::json!({"mine": 1}))
    );
    pool.close().await;
    store.close().await;
}

// ---- leases: several daemons on one PostgreSQL database ---------------------------------

async fn daemon_store(settings: &DatabaseSettings, node: &str, lease_ms: u64) -> Store {
    let mut store = Store::connect(settings).await.unwrap();
    store
        .join_cluster(&super::ClusterSettings {
            lease: Duration::from_millis(lease_ms),
            ..super::ClusterSettings::new(node)
        })
        .unwrap();
    store
}

fn held_by(store: &Store, zones: &[String]) -> Vec<String> {
    zones.iter().filter(|z| store.holds(z)).cloned().collect()
}

#[tokio::test]
async fn postgres_leases_rebalance_three_zones_over_two_daemons() {
    // After a stall one daemon held all three zones and the other none, for
    // good (zones went back only above share + 1).
    let cluster = pg_support::Cluster::shared();
    let settings = postgres_settings(&cluster).await;
    let a = daemon_store(&settings, "a", 2_500).await;
    let b = daemon_store(&settings, "b", 2_500).await;
    let zones: Vec<String> = (0..3).map(|i| format!("r{i}.example.")).collect();
    for z in &zones {
        a.ensure_zone(z, Timestamp(1_000)).await.unwrap();
    }
    let round = a.lease_round(Timestamp(1_000)).await.unwrap();
    assert_eq!(round.held, 3, "{round:?}");
    b.lease_round(Timestamp(1_000)).await.unwrap();
    let round = a.lease_round(Timestamp(1_000)).await.unwrap();
    assert_eq!(
        (round.held, round.released, round.target),
        (2, 1, 2),
        "{round:?}"
    );
    let round = b.lease_round(Timestamp(1_000)).await.unwrap();
    assert_eq!(round.held, 1, "{round:?}");
    // And it stays so: neither hands back nor takes more.
    for _ in 0..3 {
        assert_eq!(a.lease_round(Timestamp(1_000)).await.unwrap().held, 2);
        assert_eq!(b.lease_round(Timestamp(1_000)).await.unwrap().held, 1);
    }
}

/// Two daemons share the zones fairly; a daemon whose lease ran out can write nothing of
/// a zone another took (its step, its events, its effects, its alert bookkeeping), the
/// taker's epoch is higher, and a call the first had in flight becomes of unknown outcome.
#[tokio::test]
async fn postgres_leases_share_the_zones_and_fence_a_daemon_whose_lease_ran_out() {
    let cluster = pg_support::Cluster::shared();
    let settings = postgres_settings(&cluster).await;
    let a = daemon_store(&settings, "a", 2_500).await;
    let b = daemon_store(&settings, "b", 2_500).await;
    let zones: Vec<String> = (0..6).map(|i| format!("z{i}.example.")).collect();
    for z in &zones {
        a.ensure_zone(z, Timestamp(1_000)).await.unwrap();
    }
    // A alone takes everything; B joins and A hands back what is above its share.
    let round = a.lease_round(Timestamp(1_000)).await.unwrap();
    assert_eq!(
        (round.held, round.target, round.live),
        (6, 6, 1),
        "{round:?}"
    );
    let round = b.lease_round(Timestamp(1_000)).await.unwrap();
    assert_eq!(
        (round.held, round.target, round.live),
        (0, 3, 2),
        "{round:?}"
    );
    let round = a.lease_round(Timestamp(1_000)).await.unwrap();
    assert_eq!((round.held, round.released), (3, 3), "{round:?}");
    let round = b.lease_round(Timestamp(1_000)).await.unwrap();
    assert_eq!(round.held, 3, "{round:?}");
    let mine = held_by(&a, &zones);
    let theirs = held_by(&b, &zones);
    assert_eq!((mine.len(), theirs.len()), (3, 3));
    assert!(
        mine.iter().all(|z| !theirs.contains(z)),
        "one holder per zone"
    );
    let counts = a.lease_counts().await.unwrap();
    assert_eq!(counts.iter().map(|(_, n)| n).sum::<i64>(), 6, "{counts:?}");
    // Only held zones are due, and only the holder may write one.
    assert_eq!(due_names(&a, 10_000, 100).await, mine);
    let zone = mine[0].clone();
    let row = a.zone_for_step(&zone).await.unwrap().unwrap();
    let lease = row.row.lease.clone().expect("a lease shown");
    assert_eq!(lease.holder, a.holder().unwrap());
    let enable = decision(
        State::Enabling,
        None,
        Facts::default(),
        vec![Effect::EnableDnssec],
        Vec::new(),
        2_000,
    );
    let err = b
        .commit_step(
            &row,
            &enable,
            &ObservationText::from_whole("{}"),
            Timestamp(2_000),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::LeaseLost(ref z) if *z == zone),
        "{err}"
    );
    assert!(
        a.commit_step(
            &row,
            &enable,
            &ObservationText::from_whole("{}"),
            Timestamp(2_000)
        )
        .await
        .unwrap()
    );
    let events = a.events(&zone).await.unwrap();
    assert!(
        events
            .iter()
            .all(|e| e.holder.as_deref() == a.holder() && e.epoch == Some(lease.epoch)),
        "{events:?}"
    );
    let call = a.pending_effects(&zone).await.unwrap().remove(0);
    assert!(
        a.start_effect(call.id, Timestamp(2_100)).await.unwrap(),
        "claimed under the lease"
    );
    // A stops renewing (paused past its lease): B takes its zones, one epoch up.
    tokio::time::sleep(Duration::from_millis(2_700)).await;
    let round = b.lease_round(Timestamp(3_000)).await.unwrap();
    assert_eq!((round.held, round.live), (6, 1), "{round:?}");
    assert!(
        round.acquired.iter().any(|(z, e, from)| *z == zone
            && *e == lease.epoch + 1
            && from.as_deref() == a.holder()),
        "{round:?}"
    );
    // The call A had in flight is now of unknown outcome, said by B under its epoch.
    assert_eq!(b.unknown_calls(&zone).await.unwrap().len(), 1);
    let last = b.events(&zone).await.unwrap().pop().unwrap();
    assert!(
        last.reason.contains("unknown")
            && last.holder.as_deref() == b.holder()
            && last.epoch == Some(lease.epoch + 1),
        "{last:?}"
    );
    // A, resumed, believes it holds the zone until it renews, and every write is refused.
    assert!(
        a.holds(&zone),
        "A has not renewed yet: it still believes it holds the zone"
    );
    let row = a.zone_for_step(&zone).await.unwrap().unwrap();
    let again = decision(
        State::AwaitingDs,
        Some(State::Enabling),
        Facts::default(),
        vec![Effect::EnableDnssec],
        Vec::new(),
        3_000,
    );
    for result in [
        a.commit_step(
            &row,
            &again,
            &ObservationText::from_whole("{}"),
            Timestamp(3_100),
        )
        .await
        .map(|_| ()),
        a.record(&zone, EventKind::Note, "stale", Timestamp(3_100))
            .await,
        a.defer(&zone, Timestamp(3_100)).await,
        a.check_by(&zone, Timestamp(3_100)).await,
    ] {
        assert!(
            matches!(result, Err(StoreError::LeaseLost(_))),
            "{result:?}"
        );
    }
    assert!(!a.holds(&zone), "a refused write ends the belief");
    assert!(!a.lease_current(&zone, Fenced::ProviderCall).await.unwrap());
    // Every refusal counted by what it refused.
    let counted = a.fenced().expect("leases");
    let count = |what| {
        counted
            .iter()
            .find(|(w, _)| *w == what)
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(
        [
            Fenced::Step,
            Fenced::Event,
            Fenced::Schedule,
            Fenced::ProviderCall
        ]
        .map(count),
        [1, 1, 2, 1],
        "{counted:?}"
    );
    b.lease_round(Timestamp(3_100)).await.unwrap();
    assert!(b.lease_current(&zone, Fenced::ProviderCall).await.unwrap());
    let round = a.lease_round(Timestamp(3_200)).await.unwrap();
    assert!(round.lost.len() + round.held <= 6);
    let events = a.events(&zone).await.unwrap();
    assert!(!events.iter().any(|e| e.reason == "stale"), "{events:?}");
    assert!(
        events
            .iter()
            .filter(|e| e.holder.as_deref() == a.holder())
            .all(|e| e.epoch == Some(lease.epoch)),
        "{events:?}"
    );
    // A clean stop hands everything back at once.
    let n = b.leave_cluster().await.unwrap();
    assert!(n >= 3, "{n}");
    assert!(
        b.lease_counts()
            .await
            .unwrap()
            .iter()
            .all(|(h, _)| Some(h.as_str()) != b.holder())
    );
    a.close().await;
    b.close().await;
}

/// `zones_brief` (what `status` lists) keeps exactly the parts of the last observation
/// `status` shows, on both stores, and the rest of the row as `zones` has it.
async fn brief_rows_keep_what_status_shows(store: &Store) {
    for (name, observation) in [
        (
            "a.test.",
            serde_json::json!({
                "provider": {"dnssec": "not_found", "error": null, "zone": {"big": [1, 2, 3]}},
                "parent": {"evidence": {"kind": "insecure", "detail": "the TLD is unsigned"},
                           "answers": [{"server": "192.0.2.1", "ds": ["x"]}]},
                "child": {"answers": ["y"]},
            }),
        ),
        (
            "b.test.",
            serde_json::json!({
                "provider": {"dnssec": {"enabled": true, "key_tag": 7}, "error": "503 from the API"},
                "parent": {},
            }),
        ),
        ("c.test.", serde_json::json!({})),
    ] {
        store.ensure_zone(name, Timestamp(1_000)).await.unwrap();
        let row = store.zone_for_step(name).await.unwrap().unwrap();
        let decision = Decision {
            state: Some(State::Disabled),
            facts: Facts::default(),
            effects: Vec::new(),
            alerts: Vec::new(),
            notes: Vec::new(),
            wake_at: Timestamp(9_000),
        };
        assert!(
            store
                .commit_step(
                    &row,
                    &decision,
                    &ObservationText::from_whole(observation.to_string()),
                    Timestamp(2_000)
                )
                .await
                .unwrap()
        );
    }
    store
        .ensure_zone("d.test.", Timestamp(1_000))
        .await
        .unwrap();
    let full = store.zones().await.unwrap();
    let brief = store.zones_brief().await.unwrap();
    assert_eq!(full.len(), brief.len());
    for (f, b) in full.iter().zip(&brief) {
        assert_eq!(f.zone, b.zone);
        assert_eq!(
            (f.next_check_at, f.last_observed_at, f.version),
            (b.next_check_at, b.last_observed_at, b.version)
        );
        let (Some(fo), Some(bo)) = (&f.last_observation, &b.last_observation) else {
            assert_eq!(f.last_observation.is_none(), b.last_observation.is_none());
            continue;
        };
        for pointer in ["/provider/dnssec", "/provider/error", "/parent/evidence"] {
            let missing_is_null = |v: Option<&serde_json::Value>| v.cloned().unwrap_or_default();
            assert_eq!(
                missing_is_null(fo.pointer(pointer)),
                missing_is_null(bo.pointer(pointer)),
                "{} {pointer}",
                f.zone.name
            );
        }
        assert!(bo.pointer("/parent/answers").is_none(), "cut down: {bo}");
    }
}

#[tokio::test]
async fn brief_rows_keep_what_status_shows_on_sqlite() {
    brief_rows_keep_what_status_shows(&Store::open_in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn brief_rows_keep_what_status_shows_on_postgres() {
    let cluster = pg_support::Cluster::shared();
    let store = postgres_store(&cluster).await;
    brief_rows_keep_what_status_shows(&store).await;
    store.close().await;
}

/// The daemon's SQLite writes take turns: a write waits for the one before it, and one
/// that never ends holds the others only so long, then they are given up with a reason.
#[tokio::test]
async fn sqlite_writes_take_turns_and_a_stalled_one_is_given_up() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state.db")).await.unwrap();
    let Backend::Sqlite(sqlite) = &store.backend else {
        panic!("a SQLite store");
    };
    let held = sqlite.turn(Duration::from_millis(50)).await.unwrap();
    let stalled = sqlite.turn(Duration::from_millis(50)).await.unwrap_err();
    assert!(
        matches!(stalled, StoreError::WriteStalled { .. }),
        "{stalled}"
    );
    assert!(
        stalled.to_string().contains("has not finished"),
        "{stalled}"
    );
    // A write waits for the turn held, and goes through once it is released.
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(held);
    });
    let started = std::time::Instant::now();
    assert!(
        store
            .ensure_zone("example.com.", Timestamp(1_000))
            .await
            .unwrap()
    );
    assert!(started.elapsed() >= Duration::from_millis(150));
    release.await.unwrap();
    assert!(sqlite.turn(Duration::from_millis(50)).await.is_ok());
}

/// The SQLite backend writes these statuses out in its hot statements.
#[test]
fn outbox_statuses_are_the_literals_in_sql() {
    assert_eq!(OutboxStatus::Pending.as_str(), "pending");
    assert_eq!(OutboxStatus::Unknown.as_str(), "unknown");
}

/// The names of the zones a tick would step at `at`, in its order.
async fn due_names(store: &Store, at: i64, limit: u32) -> Vec<String> {
    store
        .due_for_step(Timestamp(at), limit)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.row.zone.name.into_string())
        .collect()
}

/// Daemon-wide alerts (`daemon_alerts`) on both backends: one open episode per kind and
/// scope whoever raises it, notified from `alert_at`, claimed by one daemon at a time, a
/// `resolved` owed only for an episode that was notified.
async fn daemon_alerts_on(store: &Store, other: &Store) {
    let kind = AlertKind::ZoneListingFailing;
    let t = Timestamp(1_000_000);
    let day = Duration::from_secs(86_400);
    store
        .raise_daemon_alert(kind, "", "refused", t, t.plus(Duration::from_secs(60)))
        .await
        .unwrap();
    // A second daemon raising it meets the same episode.
    other
        .raise_daemon_alert(kind, "", "refused again", t.plus(Duration::from_secs(5)), t)
        .await
        .unwrap();
    let open = store.daemon_alerts_open().await.unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].message, "refused again");
    assert_eq!(open[0].opened_at, t);
    // Not owed before it alerts.
    assert!(
        store
            .daemon_alerts_to_notify(t, day)
            .await
            .unwrap()
            .is_empty()
    );
    let at = t.plus(Duration::from_secs(60));
    let owed = store.daemon_alerts_to_notify(at, day).await.unwrap();
    assert_eq!(owed.len(), 1);
    let id = owed[0].id;
    assert!(
        store
            .claim_daemon_alert(id, at, Duration::from_secs(600))
            .await
            .unwrap()
    );
    assert!(
        !other
            .claim_daemon_alert(id, at, Duration::from_secs(600))
            .await
            .unwrap()
    );
    assert!(
        other
            .daemon_alerts_to_notify(at, day)
            .await
            .unwrap()
            .is_empty()
    );
    store.daemon_alert_notified(id, at).await.unwrap();
    assert!(
        other
            .daemon_alerts_to_notify(at, day)
            .await
            .unwrap()
            .is_empty()
    );
    other.resolve_daemon_alert(kind, "", at).await.unwrap();
    let owed = store.daemon_alerts_to_notify(at, day).await.unwrap();
    assert_eq!(owed.len(), 1, "the resolved notification");
    assert!(owed[0].resolved_at.is_some());
    store
        .daemon_alert_resolution_notified(id, at)
        .await
        .unwrap();
    assert!(
        store
            .daemon_alerts_to_notify(at, day)
            .await
            .unwrap()
            .is_empty()
    );
    // An episode over before it alerted owes nothing at all.
    store
        .raise_daemon_alert(kind, "", "brief", at, at.plus(day))
        .await
        .unwrap();
    store.resolve_daemon_alert(kind, "", at).await.unwrap();
    assert!(
        store
            .daemon_alerts_to_notify(at.plus(day), day)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.daemon_alerts_open().await.unwrap().is_empty());
    assert_eq!(store.daemon_alerts().await.unwrap().len(), 2);
}

#[tokio::test]
async fn daemon_alerts_sqlite() {
    let store = Store::open_in_memory().await.unwrap();
    daemon_alerts_on(&store, &store.clone()).await;
}

#[tokio::test]
async fn daemon_alerts_postgres() {
    let cluster = pg_support::Cluster::shared();
    let settings = postgres_settings(&cluster).await;
    let one = Store::connect(&settings).await.unwrap();
    let two = Store::connect(&settings).await.unwrap();
    daemon_alerts_on(&one, &two).await;
}

/// DS requests are numbered above every number any database sent before:
/// one more than the last, never below the request's time in milliseconds. Two fresh
/// databases (or a copy restored from a backup) still number a later request higher.
#[tokio::test]
async fn request_numbers_grow_across_databases() {
    let announce = || Effect::AnnounceDs {
        ds_line: "example.test. 3600 IN DS 1 13 2 AA".into(),
    };
    let old = Store::open_in_memory().await.unwrap();
    stepped(&old, Facts::default(), vec![announce(), announce()]).await;
    let old_seqs: Vec<i64> = old
        .pending_effects(ZONE)
        .await
        .unwrap()
        .iter()
        .map(|i| i.seq)
        .collect();
    // Written at Timestamp(2_000): the time is the floor, then one more each.
    assert_eq!(old_seqs, vec![2_000, 2_001]);
    let new = Store::open_in_memory().await.unwrap();
    new.ensure_zone(ZONE, Timestamp(1_000)).await.unwrap();
    let row = new.zone_for_step(ZONE).await.unwrap().unwrap();
    let later = decision(
        State::AwaitingDs,
        None,
        Facts::default(),
        vec![announce()],
        Vec::new(),
        9_000,
    );
    new.commit_step(
        &row,
        &later,
        &ObservationText::from_whole("{}"),
        Timestamp(5_000),
    )
    .await
    .unwrap();
    let seqs: Vec<i64> = new
        .pending_effects(ZONE)
        .await
        .unwrap()
        .iter()
        .map(|i| i.seq)
        .collect();
    assert_eq!(seqs, vec![5_000]);
    assert!(seqs[0] > old_seqs[1]);
}

/// A DS request a later one replaced is never sent by a sink that has not sent it yet
/// (the chaos suite found a publish delivered after the zone was switched off); one being
/// sent now holds "DNSSEC off" back.
async fn superseded_requests_are_never_sent(store: &Store) {
    let sink = "alerts.webhook[0]";
    let t = Timestamp(10_000);
    store
        .enqueue_delivery(&[sink], "ds_publish-z.-AB", 10_000, "z.", "{}", t)
        .await
        .unwrap();
    let owed = store.owed_deliveries(sink, t, 10).await.unwrap();
    assert_eq!(owed.len(), 1);
    // Claimed: being sent now.
    assert!(
        store
            .claim_delivery(owed[0].id, t, Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert!(store.ds_publish_in_flight("z.", t).await.unwrap());
    store.delivery_failed(owed[0].id, "refused").await.unwrap();
    assert!(!store.ds_publish_in_flight("z.", t).await.unwrap());
    // The withdrawal is queued: the publish is no longer owed.
    store
        .enqueue_delivery(&[sink], "ds_withdraw-z.-AB", 10_001, "z.", "{}", t)
        .await
        .unwrap();
    let owed = store.owed_deliveries(sink, t, 10).await.unwrap();
    assert_eq!(
        owed.iter().map(|d| d.event_id.as_str()).collect::<Vec<_>>(),
        vec!["ds_withdraw-z.-AB"]
    );
    // A publish read before the withdrawal was queued is not claimed for sending.
    store
        .enqueue_delivery(&[sink], "ds_publish-y.-CD", 10_002, "y.", "{}", t)
        .await
        .unwrap();
    let read = store.owed_deliveries(sink, t, 10).await.unwrap();
    let publish = read.iter().find(|d| d.zone == "y.").expect("owed").id;
    store
        .enqueue_delivery(&[sink], "ds_withdraw-y.-CD", 10_003, "y.", "{}", t)
        .await
        .unwrap();
    assert!(
        !store
            .claim_delivery(publish, t, Duration::from_secs(60))
            .await
            .unwrap()
    );
    // Alerts (seq 0) are never superseded.
    store
        .enqueue_delivery(&[sink], "alert-x-1.0-firing", 0, "y.", "{}", t)
        .await
        .unwrap();
    store
        .enqueue_delivery(&[sink], "alert-x-1.0-resolved", 0, "y.", "{}", t)
        .await
        .unwrap();
    let owed = store.owed_deliveries(sink, t, 10).await.unwrap();
    assert_eq!(
        owed.iter()
            .filter(|d| d.event_id.starts_with("alert-"))
            .count(),
        2
    );
}

#[tokio::test]
async fn superseded_requests_are_never_sent_sqlite() {
    superseded_requests_are_never_sent(&Store::open_in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn superseded_requests_are_never_sent_postgres() {
    let cluster = pg_support::Cluster::shared();
    superseded_requests_are_never_sent(&postgres_store(&cluster).await).await;
}

fn notify_plan() -> crate::lifecycle::registry::NotifyPlan {
    crate::lifecycle::registry::NotifyPlan {
        target: "scanner.test.".into(),
        port: 5300,
        addrs: vec![std::net::IpAddr::from([127, 0, 0, 9])],
        signal: "key 4242".into(),
    }
}

/// A NOTIFY(CDS) a step decided is an outbox row: what came of it (its outcome, kept on
/// the row) is what the next step of the same state reads, whether acknowledged or not;
/// one still owed at a newer commit is voided, not sent stale; a step of another state
/// reads none.
async fn a_notify_outcome_is_read_back_by_the_next_step(store: &Store) {
    use crate::lifecycle::registry::CdsNotified;
    let notify = Effect::NotifyCds(notify_plan());
    stepped(store, Facts::default(), vec![notify.clone()]).await;
    let read = store.zone_for_step(ZONE).await.unwrap().unwrap();
    assert!(read.pending_effects);
    assert_eq!(read.cds_notified, None, "decided, not performed");
    let owed = store.pending_effects(ZONE).await.unwrap();
    assert_eq!(owed.len(), 1);
    assert_eq!(owed[0].effect, notify, "the plan read back whole");
    let first = owed[0].id;
    // A newer commit voids the owed one (the newer decision has it again if due).
    let again = Decision {
        state: Some(State::AwaitingDs),
        facts: Facts::default(),
        effects: vec![notify.clone()],
        alerts: Vec::new(),
        notes: Vec::new(),
        wake_at: Timestamp(9_000),
    };
    assert!(
        store
            .commit_step(
                &read,
                &again,
                &ObservationText::from_whole("{}"),
                Timestamp(2_500)
            )
            .await
            .unwrap()
    );
    let owed = store.pending_effects(ZONE).await.unwrap();
    assert_eq!(owed.len(), 1, "{owed:?}");
    assert!(owed[0].id > first, "the newer row");
    let sent = |acknowledged: bool, at: i64| CdsNotified {
        at: Timestamp(at),
        target: "scanner.test.".into(),
        addr: Some("127.0.0.9".into()),
        port: 5300,
        signal: "key 4242".into(),
        acknowledged,
        outcome: if acknowledged {
            "acknowledged".into()
        } else {
            "no answer to 3 attempts".into()
        },
    };
    let unanswered = sent(false, 2_600);
    store
        .finish_effect(
            owed[0].id,
            OutboxStatus::Failed,
            Some("no answer"),
            Some(&serde_json::to_string(&unanswered).unwrap()),
            Timestamp(2_700),
        )
        .await
        .unwrap();
    let read = store.zone_for_step(ZONE).await.unwrap().unwrap();
    assert!(!read.pending_effects, "the voided one is not owed");
    assert_eq!(read.cds_notified, Some(unanswered));
    assert_eq!(
        read.registrar_hook_failed, None,
        "a NOTIFY is no DS request"
    );
    // The next one acknowledged: the last one is read.
    assert!(
        store
            .commit_step(
                &read,
                &again,
                &ObservationText::from_whole("{}"),
                Timestamp(3_000)
            )
            .await
            .unwrap()
    );
    let owed = store.pending_effects(ZONE).await.unwrap();
    let acked = sent(true, 3_100);
    store
        .finish_effect(
            owed[0].id,
            OutboxStatus::Done,
            None,
            Some(&serde_json::to_string(&acked).unwrap()),
            Timestamp(3_200),
        )
        .await
        .unwrap();
    let read = store.zone_for_step(ZONE).await.unwrap().unwrap();
    assert_eq!(read.cds_notified, Some(acked.clone()));
    assert_eq!(
        store
            .due_for_step(Timestamp(10_000), 10)
            .await
            .unwrap()
            .into_iter()
            .find(|r| r.row.zone.name.as_str() == ZONE)
            .and_then(|r| r.cds_notified),
        Some(acked),
        "the tick's read says the same"
    );
    // Another state: none of the old state's NOTIFYs.
    let on = Decision {
        state: Some(State::DsObserved),
        ..again.clone()
    };
    let on = Decision {
        effects: Vec::new(),
        ..on
    };
    assert!(
        store
            .commit_step(
                &read,
                &on,
                &ObservationText::from_whole("{}"),
                Timestamp(4_000)
            )
            .await
            .unwrap()
    );
    let read = store.zone_for_step(ZONE).await.unwrap().unwrap();
    assert_eq!(read.cds_notified, None);
    // Back in the state: only its own NOTIFYs count, none so far.
    let back = Decision {
        state: Some(State::AwaitingDs),
        ..on
    };
    assert!(
        store
            .commit_step(
                &read,
                &back,
                &ObservationText::from_whole("{}"),
                Timestamp(5_000)
            )
            .await
            .unwrap()
    );
    let read = store.zone_for_step(ZONE).await.unwrap().unwrap();
    assert_eq!(read.row.zone.state, Some(State::AwaitingDs));
    assert_eq!(read.cds_notified, None);
}

#[tokio::test]
async fn a_notify_outcome_is_read_back_by_the_next_step_sqlite() {
    a_notify_outcome_is_read_back_by_the_next_step(&Store::open_in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn a_notify_outcome_is_read_back_by_the_next_step_postgres() {
    let cluster = pg_support::Cluster::shared();
    a_notify_outcome_is_read_back_by_the_next_step(&postgres_store(&cluster).await).await;
}

/// `declare_move`: refused for a zone not in the database, not active with intent
/// enabled, or with a move declared already; otherwise the move is in the facts (its TTLs
/// raised to the facts' largest), the zone due now, an audit event written, and a step
/// that read the row before is refused and decides again.
async fn a_signed_move_is_declared_once_at_the_rows_version(store: &Store) {
    use crate::lifecycle::signed_move::{Move, Phase, Ttls};
    let mv = Move::new(ZONE, crate::dnssec::test_key())
        .between("pdns-a", "pdns-b")
        .seeded(Ttls {
            dnskey: 7200,
            ds: 60,
            parent_ns: 0,
            apex_ns: 0,
        });
    let now = Timestamp(50_000);
    let refused = store
        .declare_move(ZONE, &mv, "operator", now)
        .await
        .unwrap_err();
    assert!(matches!(refused, StoreError::UnknownZone(_)), "{refused}");

    store.ensure_zone(ZONE, Timestamp(1_000)).await.unwrap();
    store
        .set_intent(ZONE, Intent::Enabled, false, "enable", Timestamp(1_100))
        .await
        .unwrap();
    let refused = store
        .declare_move(ZONE, &mv, "operator", now)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, StoreError::MoveFromNotActive { state, intent, .. }
            if state == "not observed yet" && intent == "enabled"),
        "{refused}"
    );

    let read = store.zone_for_step(ZONE).await.unwrap().unwrap();
    let active = decision(State::Active, None, facts(), vec![], vec![], 900_000);
    let text = ObservationText::from_whole("{}");
    assert!(
        store
            .commit_step(&read, &active, &text, Timestamp(2_000))
            .await
            .unwrap()
    );
    let before = store.zone(ZONE).await.unwrap().unwrap();
    assert_eq!(before.next_check_at, Timestamp(900_000));
    let stale_read = store.zone_for_step(ZONE).await.unwrap().unwrap();

    store
        .declare_move(ZONE, &mv, "operator", now)
        .await
        .unwrap();
    let after = store.zone(ZONE).await.unwrap().unwrap();
    let declared = after.zone.facts.signed_move.clone().expect("the move");
    assert_eq!(
        (declared.source.as_str(), declared.target.as_str()),
        ("pdns-a", "pdns-b")
    );
    assert_eq!(declared.phase, Phase::SigningAtTarget);
    assert_eq!(declared.source_key, mv.source_key);
    // The DS TTL the facts hold (3600) bounds it from above; the larger DNSKEY one stays.
    assert_eq!((declared.ttls.dnskey, declared.ttls.ds), (7200, 3600));
    // The wait `status` shows until the daemon's first look, and the rest of the facts
    // as they were.
    assert_eq!(
        after.zone.facts.wait.held_by.as_ref().map(|h| h.on),
        Some(crate::lifecycle::hold::Party::Daemon)
    );
    assert_eq!(after.zone.facts.wait.held_since, Some(now));
    let mut rest = after.zone.facts.clone();
    rest.signed_move = None;
    rest.wait.held_by = None;
    rest.wait.held_since = None;
    assert_eq!(rest, facts());
    assert_eq!(after.zone.state, Some(State::Active));
    assert_eq!(after.next_check_at, now);
    assert!(after.version > before.version);
    let events = store.events(ZONE).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, EventKind::Intent);
    assert_eq!(
        last.reason,
        "operator declared a signed move from provider pdns-a to provider pdns-b (RFC 8901)"
    );

    // A step decided on the row before the move is refused: it would write the facts
    // without it.
    assert!(
        !store
            .commit_step(&stale_read, &active, &text, Timestamp(51_000))
            .await
            .unwrap()
    );
    assert!(
        store
            .zone(ZONE)
            .await
            .unwrap()
            .unwrap()
            .zone
            .facts
            .signed_move
            .is_some()
    );

    let refused = store
        .declare_move(ZONE, &mv, "operator", Timestamp(60_000))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, StoreError::MoveDeclared { from, to, phase, .. }
            if from == "pdns-a" && to == "pdns-b" && *phase == "signing_at_target"),
        "{refused}"
    );
    assert_eq!(store.events(ZONE).await.unwrap().len(), events.len());

    // A disable decided on a read from before the move (the CLI's, the console's) is
    // refused at the write: the store reads the row it writes at, and a move and a
    // disable never both get in. The refusal says the phase, the accounts and what to do.
    let refused = store
        .set_intent(ZONE, Intent::Disabled, false, "disable", Timestamp(61_000))
        .await
        .unwrap_err()
        .to_string();
    for says in [
        "`disable` is refused during a signed move",
        "from provider pdns-a to provider pdns-b, phase signing_at_target",
        "a safe abort of a move is not built",
        "Let the move finish",
        "then disable it at provider pdns-b (nothing was recorded)",
    ] {
        assert!(refused.contains(says), "{says:?} not in {refused}");
    }
    let row = store.zone(ZONE).await.unwrap().unwrap();
    assert_eq!(row.zone.intent, Intent::Enabled);
    assert_eq!(store.events(ZONE).await.unwrap().len(), events.len());
}

#[tokio::test]
async fn a_signed_move_is_declared_once_at_the_rows_version_sqlite() {
    a_signed_move_is_declared_once_at_the_rows_version(&Store::open_in_memory().await.unwrap())
        .await;
}

#[tokio::test]
async fn a_signed_move_is_declared_once_at_the_rows_version_postgres() {
    let cluster = pg_support::Cluster::shared();
    let store = postgres_store(&cluster).await;
    a_signed_move_is_declared_once_at_the_rows_version(&store).await;
    store.close().await;
}

/// No store's pool runs sqlx's background sweep of idle connections (`pool_options`):
/// it can spin on a core for good and hold the process at its exit.
#[tokio::test]
async fn no_pool_runs_the_idle_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let stores = [
        Store::open(&path).await.unwrap(),
        Store::open_read_only(&path).await.unwrap(),
        Store::open_in_memory().await.unwrap(),
    ];
    for store in &stores {
        let options = store.sqlite_pool().options();
        assert_eq!(options.get_idle_timeout(), None);
        assert_eq!(options.get_max_lifetime(), None);
    }
    let options = pool_options::<sqlx::Postgres>();
    assert_eq!(options.get_idle_timeout(), None);
    assert_eq!(options.get_max_lifetime(), None);
}

#[tokio::test]
async fn a_roll_is_refused_while_the_provider_rolls_its_key_on_its_own() {
    use crate::dnssec::{DigestType, Dnskey, DsLine};
    use crate::lifecycle::own_roll::ProviderRoll;
    let store = Store::open_in_memory().await.unwrap();
    let key = |text: &str| Dnskey::parse_text(text).unwrap();
    let old_key = key(
        "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
    );
    let mut new_key = old_key.clone();
    new_key.public_key[0] ^= 1;
    let old = DsLine {
        owner: ZONE.into(),
        ttl: 3600,
        ds: old_key.to_ds(ZONE, DigestType::Sha256).unwrap(),
    };
    let f = Facts {
        provider_roll: ProviderRoll::start(&old, new_key.clone(), Timestamp(5)),
        ..Facts::default()
    };
    assert!(f.provider_roll.is_some());
    let row = stepped(&store, f, Vec::new()).await;
    let refused = roll_refused(&row).expect("refused");
    assert!(
        matches!(refused, StoreError::ProviderRollUnderWay { old_tag, new_tag, .. }
            if old_tag == old_key.key_tag() && new_tag == new_key.key_tag()),
        "{refused}"
    );
    assert!(refused.to_string().contains("on its own"), "{refused}");
    // Nor a signed move: the provider's roll would change the key the move carries.
    let refused = move_refused(&row).expect("a move refused too");
    assert!(
        matches!(refused, StoreError::ProviderRollUnderWay { what, .. } if what.contains("signed move")),
        "{refused}"
    );
}

/// Zones in `state` at `account` (each its own row), as a step leaves them.
async fn listed_zone(store: &Store, name: &str, state: Option<State>, account: &str) {
    store.ensure_zone(name, Timestamp(1_000)).await.unwrap();
    let Some(state) = state else {
        return;
    };
    let row = store.zone_for_step(name).await.unwrap().unwrap();
    let decision = Decision {
        state: Some(state),
        facts: Facts::default(),
        effects: Vec::new(),
        alerts: Vec::new(),
        notes: Vec::new(),
        wake_at: Timestamp(9_000),
    };
    let whole = serde_json::json!({"provider": {"account": account, "dnssec": "on"}});
    assert!(
        store
            .commit_step(
                &row,
                &decision,
                &ObservationText::from_whole(whole.to_string()),
                Timestamp(2_000)
            )
            .await
            .unwrap()
    );
}

/// The names `filter` lists, in order; with `stop_after`, `each` ends the listing there.
async fn listed(store: &Store, filter: &ZoneFilter, stop_after: Option<usize>) -> Vec<String> {
    let mut names = Vec::new();
    store
        .each_zone_listed::<StoreError>(filter, &mut |row| {
            names.push(row.zone.name.to_string());
            Ok(stop_after.is_none_or(|n| names.len() < n))
        })
        .await
        .unwrap();
    names
}

/// `status`'s filters in the store's query: by state (`None`: not observed yet), by the
/// account of the last look, after a name (keyset paging), at most a limit; every page
/// in name order, and the pages together the whole listing.
async fn zones_are_listed_filtered_and_paged(store: &Store) {
    let zones = [
        ("a.test.", Some(State::Active), "east"),
        ("b.test.", Some(State::AwaitingDs), "west"),
        ("c.test.", None, ""),
        ("d.test.", Some(State::Active), "west"),
        ("e.test.", Some(State::Disabled), "east"),
        ("f.test.", Some(State::AwaitingDs), "east"),
    ];
    // Written out of order: the listing's order is the name's.
    for (name, state, account) in zones.iter().rev() {
        listed_zone(store, name, *state, account).await;
    }
    let all: Vec<String> = zones.iter().map(|(n, _, _)| n.to_string()).collect();
    assert_eq!(listed(store, &ZoneFilter::default(), None).await, all);
    let filter = |states: Vec<Option<State>>, account: Option<&str>| ZoneFilter {
        states,
        account: account.map(str::to_string),
        ..ZoneFilter::default()
    };
    assert_eq!(
        listed(store, &filter(vec![Some(State::Active)], None), None).await,
        ["a.test.", "d.test."]
    );
    assert_eq!(
        listed(
            store,
            &filter(
                vec![Some(State::AwaitingDs), None, Some(State::AwaitingDs)],
                None
            ),
            None
        )
        .await,
        ["b.test.", "c.test.", "f.test."]
    );
    assert_eq!(
        listed(store, &filter(vec![None], None), None).await,
        ["c.test."]
    );
    assert_eq!(
        listed(store, &filter(Vec::new(), Some("east")), None).await,
        ["a.test.", "e.test.", "f.test."]
    );
    assert_eq!(
        listed(
            store,
            &filter(vec![Some(State::AwaitingDs)], Some("west")),
            None
        )
        .await,
        ["b.test."]
    );
    assert!(
        listed(store, &filter(Vec::new(), Some("north")), None)
            .await
            .is_empty()
    );
    // Pages of two, each from after the last zone of the one before.
    let mut pages = Vec::new();
    let mut after = None;
    for _ in 0..zones.len() {
        let page = listed(
            store,
            &ZoneFilter {
                after: after.clone(),
                limit: Some(2),
                ..ZoneFilter::default()
            },
            None,
        )
        .await;
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 2, "{page:?}");
        after = page.last().cloned();
        pages.push(page);
    }
    assert_eq!(pages.concat(), all);
    assert_eq!(pages.len(), 3);
    // A page of a filter, after a name that is no zone.
    assert_eq!(
        listed(
            store,
            &ZoneFilter {
                states: vec![Some(State::Active), Some(State::AwaitingDs)],
                after: Some("b.test.a.".into()),
                limit: Some(2),
                ..ZoneFilter::default()
            },
            None
        )
        .await,
        ["d.test.", "f.test."]
    );
    // `each` ends the listing early.
    assert_eq!(
        listed(store, &ZoneFilter::default(), Some(2)).await,
        ["a.test.", "b.test."]
    );
}

#[tokio::test]
async fn zones_are_listed_filtered_and_paged_sqlite() {
    zones_are_listed_filtered_and_paged(&Store::open_in_memory().await.unwrap()).await;
}

#[tokio::test]
async fn zones_are_listed_filtered_and_paged_postgres() {
    let cluster = pg_support::Cluster::shared();
    zones_are_listed_filtered_and_paged(&postgres_store(&cluster).await).await;
}

/// `--state` reads the zones of its states from the `zones_by_state` index, on both
/// backends, not every row of the table.
#[tokio::test]
async fn a_state_filter_reads_the_state_index() {
    let filter = ZoneFilter {
        states: vec![Some(State::AwaitingDs)],
        ..ZoneFilter::default()
    };
    let store = Store::open_in_memory().await.unwrap();
    for i in 0..50 {
        listed_zone(&store, &format!("z{i}.test."), Some(State::Active), "a").await;
    }
    let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(&format!(
        "EXPLAIN QUERY PLAN SELECT name FROM zones{}",
        filter.sql("json_extract(last_brief, '$.provider.account')")
    ))
    .bind(State::AwaitingDs.as_str())
    .fetch_all(store.sqlite_pool())
    .await
    .unwrap();
    let plan: Vec<&str> = plan.iter().map(|(_, _, _, d)| d.as_str()).collect();
    assert!(
        plan.iter().any(|d| d.contains("zones_by_state")),
        "{plan:?}"
    );
    // The counts per state (the STATUS line every few seconds, the metrics) read the
    // index alone: read from the table, each count was every row of it, facts and all.
    let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(
        "EXPLAIN QUERY PLAN SELECT state, count(*) FROM zones GROUP BY state ORDER BY state",
    )
    .fetch_all(store.sqlite_pool())
    .await
    .unwrap();
    assert!(
        plan.iter()
            .any(|(_, _, _, d)| d.contains("COVERING INDEX zones_by_state")),
        "{plan:?}"
    );

    let cluster = pg_support::Cluster::shared();
    let store = postgres_store(&cluster).await;
    for i in 0..50 {
        listed_zone(&store, &format!("z{i}.test."), Some(State::Active), "a").await;
    }
    let pool = store.pg_pool();
    // A table this small is read whole unless sequential scans are ruled out: whether
    // the index serves the query is the question.
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("SET LOCAL enable_seqscan = off")
        .execute(&mut *tx)
        .await
        .unwrap();
    let sql = filter
        .sql("((last_brief::jsonb) -> 'provider' ->> 'account')")
        .replace("$1", "'awaiting_ds'");
    let plan: Vec<(String,)> = sqlx::query_as(&format!("EXPLAIN SELECT name FROM zones{sql}"))
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    let plan: Vec<&str> = plan.iter().map(|(d,)| d.as_str()).collect();
    assert!(
        plan.iter().any(|d| d.contains("zones_by_state")),
        "{plan:?}"
    );
    tx.rollback().await.unwrap();
    store.close().await;
}
