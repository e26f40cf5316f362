//! The store's mapping between SQLite and the lifecycle's types: one place per concept,
//! corrupt data named, the facts migration.

use std::path::Path;

use strum::VariantArray;

use super::rows::parse_facts;
use super::*;
use crate::lifecycle::{AlertKind, AuditNote, Decision, Effect, Facts};

const ZONE: &str = "example.com.";

fn facts() -> Facts {
    Facts {
        ds_line: Some("example.com. 3600 IN DS 1 13 2 AB".into()),
        ds_to_enter: Some("example.com. 3600 IN DS 1 13 2 AB".into()),
        ds_announced_at: Some(Timestamp(5_000)),
        max_ds_ttl: Some(3600),
        failing_since: Some(Timestamp(7_000)),
        failures: 3,
        ..Facts::default()
    }
}

async fn stepped(store: &Store, facts: Facts, effects: Vec<Effect>) -> ZoneRow {
    store.ensure_zone(ZONE, Timestamp(1_000)).await.unwrap();
    let row = store.zone(ZONE).await.unwrap().unwrap();
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
            .commit_step(&row, &decision, &json, Timestamp(2_000))
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
        Effect::AnnounceDs {
            ds_line: "x".into(),
        },
        Effect::RequestDsRemoval { ds_line: None },
        Effect::RequestDelegation {
            name_servers: vec!["ns1.example.net.".into()],
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

#[test]
fn facts_missing_from_the_json_read_as_defaults_and_unknown_ones_are_ignored() {
    assert_eq!(parse_facts(ZONE, "{}").unwrap(), Facts::default());
    let f = parse_facts(ZONE, r#"{"t_gone": 12, "retired_fact": true}"#).unwrap();
    assert_eq!(f.t_gone, Some(Timestamp(12)));
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
            .fetch_one(&store.pool)
            .await
            .unwrap();
    assert_eq!(t, Some(5_000));
    let (kind,): (String,) = sqlx::query_as("SELECT kind FROM outbox")
        .fetch_one(&store.pool)
        .await
        .unwrap();
    assert_eq!(kind, "enable_dnssec");
    let events = store.events(ZONE).await.unwrap();
    assert_eq!(events[0].kind, EventKind::Transition);
}

#[tokio::test]
async fn corrupt_names_are_named() {
    let store = Store::open_in_memory().await.unwrap();
    stepped(&store, facts(), Vec::new()).await;
    sqlx::query("UPDATE zones SET facts = '{\"hold_until\": \"soon\"}'")
        .execute(&store.pool)
        .await
        .unwrap();
    let err = store.zone(ZONE).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt(w) if w.contains("facts.hold_until")),
        "{err}"
    );
    sqlx::query("INSERT INTO events (zone, at, kind, reason) VALUES (?, 1, 'gossip', 'x')")
        .bind(ZONE)
        .execute(&store.pool)
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
    .execute(&store.pool)
    .await
    .unwrap();
    let err = store.alerts(ZONE).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt(w) if w == "unknown alert kind \"gremlins\""),
        "{err}"
    );
}

/// A database of schema 3 (facts in columns) keeps its facts, its pending calls' kinds and
/// its documented views through migration 4.
#[tokio::test]
async fn migration_4_moves_the_fact_columns_into_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true);
        let pool = SqlitePool::connect_with(options).await.unwrap();
        let mut schema_3 = sqlx::migrate!("./migrations");
        schema_3.migrations = schema_3.migrations[..3].to_vec().into();
        schema_3.run(&pool).await.unwrap();
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
    assert!(
        matches!(
            behind,
            Some(StoreError::SchemaBehind {
                applied: 3,
                wanted: 5,
                ..
            })
        ),
        "{behind:?}"
    );
    let store = Store::open(Path::new(&path)).await.unwrap();
    let row = store.zone(ZONE).await.unwrap().unwrap();
    assert_eq!(
        row.zone.facts,
        Facts {
            ds_line: Some("DS A".into()),
            ds_to_enter: Some("DS A".into()),
            ds_announced_at: Some(Timestamp(5_000)),
            max_ds_ttl: Some(3600),
            max_dnskey_ttl: Some(300),
            failures: 2,
            failing_since: Some(Timestamp(7_000)),
            ..Facts::default()
        }
    );
    assert_eq!(row.zone.intent, Intent::Enabled);
    let status: (String, String, String, Option<String>, Option<String>, i64) =
        sqlx::query_as("SELECT zone, state, intent, ds, ds_to_enter, open_alerts FROM status")
            .fetch_one(&store.pool)
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
            .registrar_hook_failure(ZONE, Timestamp(0))
            .await
            .unwrap(),
        Some("hook exited with 1".into())
    );
    // Migration 5 rebuilt `zones` under the rows that reference it: the new state is
    // accepted, an unknown one still refused, and the references still enforced.
    sqlx::query("UPDATE zones SET state = 'awaiting_delegation'")
        .execute(&store.pool)
        .await
        .unwrap();
    assert!(
        sqlx::query("UPDATE zones SET state = 'adopting'")
            .execute(&store.pool)
            .await
            .is_err()
    );
    assert!(
        sqlx::query(
            "INSERT INTO outbox (zone, created_at, effect, kind) VALUES ('nowhere.', 1, '{}', 'x')"
        )
        .execute(&store.pool)
        .await
        .is_err(),
        "foreign keys are enforced after the rebuild"
    );
    store.close().await;
}
