//! A database a newer dnssec-warden migrated. Every command that
//! opens it says so with the path and both schema numbers, instead of reading it
//! silently (`status`, `history`), failing on sqlx's "migration N was previously applied
//! but is missing" (`run`, `enable`), or saying OK (`check-config`).

use dnssec_warden_test_support::daemon::{LabWorld, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_a_newer_version_is_said_everywhere_with_its_path() {
    let zone = "newer.test.";
    let w = LabWorld::start(zone).await;
    let (code, _, err) = run(&w.config, &["enable", zone]);
    assert_eq!(code, 0, "{err}");
    let db = w.dir.path().join("state.db");
    assert!(db.exists(), "enable made the database");
    {
        use sqlx::ConnectOptions as _;
        let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&db)
            .connect()
            .await
            .unwrap();
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (999, 'from the future', 1, x'00', 0)",
        )
        .execute(&mut conn)
        .await
        .unwrap();
    }
    let said = |err: &str| {
        err.contains("written by a newer dnssec-warden")
            && err.contains("schema 999 >")
            && err.contains(&db.display().to_string())
    };
    for args in [
        &["status"][..],
        &["status", zone],
        &["history", zone],
        &["enable", zone],
        &["disable", zone],
        &["check-config"],
    ] {
        let (code, out, err) = run(&w.config, args);
        assert_ne!(code, 0, "{args:?}: {out}");
        assert!(said(&err), "{args:?}: {err}");
        assert_eq!(
            err.matches("newer dnssec-warden").count(),
            1,
            "said once: {args:?}: {err}"
        );
    }
    let (code, _, err) = run(&w.config, &["run"]);
    assert_ne!(code, 0);
    assert!(said(&err), "run: {err}");
}
