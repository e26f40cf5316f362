//! The commands on PostgreSQL through the real binary (`database.url`): `check-config`
//! connects and compares the migrations, `enable` migrates and writes, `status` and
//! `history` read; the password comes from its file and is never printed, a wrong one
//! or an unreachable server is a run-time failure (exit 1), an unreadable source an
//! unusable file (exit 2). A throwaway cluster (the test-support crate's `postgres`); no network.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dnssec_warden_test_support::daemon::{Daemon, run};
use dnssec_warden_test_support::postgres;

const PASSWORD: &str = "s3cret-pg-Pw";

fn config(dir: &Path, url: &str, password_file: &Path) -> PathBuf {
    let key = dir.join("api-key");
    std::fs::write(&key, "k-123456\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[provider]\nbase_url = \"http://127.0.0.1:9\"\napi_key_file = {key:?}\n\
             [database]\nurl = {url:?}\npassword_file = {password_file:?}\n\
             [dns]\nroot_hints = [\"127.0.0.1\"]\nport = 9\n\
             [zones]\nnames = [\"example.com\"]\n"
        ),
    )
    .unwrap();
    config
}

fn no_password(out: &str) {
    assert!(!out.contains(PASSWORD), "the password was printed: {out}");
}

#[tokio::test]
async fn the_commands_work_on_postgresql_and_never_print_its_password() {
    let cluster = postgres::Cluster::shared();
    let url = cluster.password_role(PASSWORD).await;
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("pg-password");
    std::fs::write(&password, format!("{PASSWORD}\n")).unwrap();
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = config(dir.path(), &url, &password);

    // Reachable, nothing migrated yet: `run` will.
    let (code, out, err) = run(&config, &["check-config"]);
    assert_eq!(code, 0, "{out}{err}");
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres"))
        .unwrap()
        .count();
    assert!(out.contains(&format!("schema 0 of {migrations}:")), "{out}");
    no_password(&(out + &err));
    // A reader never migrates: it says what to do.
    let (code, out, err) = run(&config, &["status"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("restart the daemon"), "{err}");
    // `enable` migrates and records the intent.
    let (code, out, err) = run(&config, &["enable", "example.com"]);
    assert_eq!(code, 0, "{out}{err}");
    no_password(&(out + &err));
    let (code, out, err) = run(&config, &["check-config"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!("schema {migrations} (current)")),
        "{out}"
    );
    let (code, out, err) = run(&config, &["status", "example.com", "--json"]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["intent"], "enabled");
    let (code, out, err) = run(&config, &["history", "example.com"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("operator asked to enable DNSSEC"), "{out}");

    // The daemon runs on it, and a second one beside it (several daemons share one
    // PostgreSQL database by leases): the zone is held by exactly one of them, `status`
    // says which; each stops cleanly on SIGTERM, handing its leases back.
    let mut first = Daemon::start(&config, dir.path().join("daemon.log"));
    assert!(
        first
            .wait_log("sharing the database", 1, Duration::from_secs(30))
            .await,
        "{}",
        first.log()
    );
    let mut second = Daemon::start(&config, dir.path().join("second.log"));
    assert!(
        second
            .wait_log("sharing the database", 1, Duration::from_secs(30))
            .await,
        "{}",
        second.log()
    );
    let (code, out, err) = run(&config, &["status", "example.com", "--json"]);
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let holder = json["lease"]["holder"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let pids = [first.child.id(), second.child.id()];
    assert!(
        pids.iter().any(|pid| holder.ends_with(&format!("/{pid}"))),
        "held by {holder:?}, not one of the daemons {pids:?}: {json}"
    );
    let (code, out, _) = run(&config, &["status", "example.com"]);
    assert_eq!(code, 0);
    assert!(out.contains(&format!("HELD BY: {holder}")), "{out}");
    for daemon in [&mut first, &mut second] {
        daemon.signal("TERM");
        let status = daemon.wait_exit(Duration::from_secs(30));
        assert!(
            status.is_some_and(|s| s.success()),
            "{status:?}\n{}",
            daemon.log()
        );
        no_password(&daemon.log());
    }
    let handed_back = first.log() + &second.log();
    assert!(
        handed_back.contains("handed the zone leases back"),
        "{handed_back}"
    );
    let (_, out, _) = run(&config, &["status", "example.com", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        json["lease"].is_null(),
        "nobody holds it after both stopped: {json}"
    );

    // A wrong password: the server refuses; said without either password.
    std::fs::write(&password, "not-the-password\n").unwrap();
    let (code, out, err) = run(&config, &["check-config"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("password authentication failed"), "{err}");
    assert!(!err.contains("not-the-password"), "{err}");
    // An unreadable password source is the file's fault.
    std::fs::remove_file(&password).unwrap();
    let (code, out, err) = run(&config, &["check-config"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("pg-password"), "{err}");
    // No server there: a run-time failure.
    std::fs::write(&password, format!("{PASSWORD}\n")).unwrap();
    let nowhere = config_at(dir.path(), "postgres:///x?host=/nonexistent", &password);
    let (code, out, err) = run(&nowhere, &["check-config"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("postgres:///x"), "{err}");
}

fn config_at(dir: &Path, url: &str, password: &Path) -> PathBuf {
    let sub = dir.join("nowhere");
    std::fs::create_dir_all(&sub).unwrap();
    config(&sub, url, password)
}

/// A command held up by a lock another session holds says so after
/// 10 s, naming it, instead of "pool timed out while waiting for an open connection".
#[tokio::test]
async fn a_command_behind_a_table_lock_says_what_holds_it() {
    use sqlx::Connection as _;
    let cluster = postgres::Cluster::shared();
    let url = cluster.database().await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("api-key");
    std::fs::write(&key, "k-123456\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[provider]\nbase_url = \"http://127.0.0.1:9\"\napi_key_file = {key:?}\n\
             [database]\nurl = {url:?}\n[zones]\nnames = [\"example.com\"]\n"
        ),
    )
    .unwrap();
    let (code, out, err) = run(&config, &["enable", "example.com"]);
    assert_eq!(code, 0, "{out}{err}");
    let mut locker = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("BEGIN; LOCK TABLE zones IN ACCESS EXCLUSIVE MODE")
        .execute(&mut locker)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let (code, out, err) = run(&config, &["status", "example.com"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("a lock another session holds"), "{err}");
    assert!(!err.contains("pool timed out"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30), "{err}");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut locker)
        .await
        .unwrap();
    let _ = locker.close().await;
}

/// `status` judges a lease by the database's clock, which wrote it. With the
/// database's clock ten minutes behind this host's, a held lease is still shown.
#[tokio::test]
async fn status_shows_a_lease_by_the_database_clock() {
    use dnssec_warden::lifecycle::{Policy, Timestamp};
    use dnssec_warden::store::{ClusterSettings, DatabaseSettings, PostgresSettings, Store};
    use sqlx::Connection as _;
    let cluster = postgres::Cluster::shared();
    let url = cluster.database().await;
    let settings = DatabaseSettings::Postgres(PostgresSettings::new(url.parse().unwrap()));
    let mut a = Store::connect(&settings).await.unwrap();
    a.join_cluster(&ClusterSettings {
        lease: Duration::from_secs(30),
        ..ClusterSettings::new("a")
    })
    .unwrap();
    let zone = "clock.example.";
    a.ensure_zone(zone, Timestamp(1_000)).await.unwrap();
    let mut db = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query(
        "CREATE OR REPLACE FUNCTION warden_now_ms() RETURNS BIGINT LANGUAGE sql VOLATILE AS $$ \
         SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 600000 $$",
    )
    .execute(&mut db)
    .await
    .unwrap();
    let round = a.lease_round(Timestamp(1_000)).await.unwrap();
    assert!(round.held >= 1, "{round:?}");
    let mut out = Vec::new();
    dnssec_warden::cli::status::write_status_json(&a, Some(zone), &Policy::default(), &mut out)
        .await
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(status["lease"]["holder"], a.holder().unwrap(), "{status}");
    let _ = db.close().await;
    a.close().await;
}
