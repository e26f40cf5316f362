//! The database file removed or replaced under a running store, and an empty file at
//! start: never written on silently, never taken for a new database.

use std::path::Path;

use dnssec_warden::lifecycle::{Intent, Timestamp};
use dnssec_warden::store::Store;

const ZONE: &str = "example.test.";
const T0: Timestamp = Timestamp(1_800_000_000_000);

async fn store_with_a_zone(path: &Path) -> Store {
    let store = Store::open(path).await.unwrap();
    store
        .set_intent(ZONE, Intent::Enabled, false, "enable", T0)
        .await
        .unwrap();
    store
}

#[tokio::test]
async fn a_removed_database_is_reported_and_never_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = store_with_a_zone(&path).await;
    std::fs::remove_file(&path).unwrap();

    let err = store
        .set_intent(ZONE, Intent::Disabled, false, "disable", T0)
        .await
        .expect_err("a write to a removed database fails");
    let text = err.to_string();
    assert!(text.contains("was removed"), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    let err = store
        .ensure_zone("other.test.", T0)
        .await
        .expect_err("a write outside a transaction fails too");
    assert!(err.to_string().contains("was removed"), "{err}");
    assert!(!path.exists(), "the database was created anew");
    store.close().await;
    assert!(!path.exists(), "the database was created anew");

    // The old database's log is still there: a new start refuses rather than replaying
    // it into a new file.
    let err = match Store::open(&path).await {
        Ok(_) => panic!("a new database was created beside the removed one's log"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("write-ahead log"), "{err}");
    assert!(!path.exists(), "the database was created anew");
}

#[tokio::test]
async fn a_replaced_database_is_reported_and_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = store_with_a_zone(&path).await;
    let other = dir.path().join("other.db");
    Store::open(&other).await.unwrap().close().await;
    // The last connection's close checkpoints the log into the file and removes it; a
    // rename before that would move a file without its last pages.
    let log = dir.path().join("other.db-wal");
    for _ in 0..100 {
        if !log.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!log.exists(), "other.db's log outlived its close");
    std::fs::rename(&other, &path).unwrap();

    let err = store
        .set_intent(ZONE, Intent::Disabled, false, "disable", T0)
        .await
        .expect_err("a write to a replaced database fails");
    let text = err.to_string();
    assert!(text.contains("was replaced"), "{text}");
    // SQLite leaves the old database's log at the path; the message says to remove it.
    assert!(text.contains("state.db-wal and"), "{text}");
    store.close().await;
    for log in ["state.db-wal", "state.db-shm"] {
        let _ = std::fs::remove_file(dir.path().join(log));
    }
    let fresh = Store::open(&path).await.unwrap();
    assert!(
        fresh.zones().await.unwrap().is_empty(),
        "nothing was written into the file that replaced the database"
    );
}

#[tokio::test]
async fn an_empty_file_is_not_taken_for_a_new_database() {
    let dir = tempfile::tempdir().unwrap();

    let path = dir.path().join("state.db");
    std::fs::File::create(&path).unwrap();
    let err = match Store::open(&path).await {
        Ok(_) => panic!("an empty file was initialised as a new database"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("empty file"), "{err}");
    assert!(err.contains("remove it"), "{err}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
}

/// The daemon whose database is removed under it stops with an error naming the file,
/// and refuses to start on an empty file.
#[test]
fn the_daemon_stops_when_its_database_is_removed() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let key = dir.path().join("api-key");
    std::fs::write(&key, "test-key\n").unwrap();
    let config = dir.path().join("config.toml");
    // Nothing listens at the provider address and no zone is listed: the engine loop
    // runs without touching the network.
    std::fs::write(
        &config,
        format!(
            "[provider]\nbase_url = \"http://127.0.0.1:9\"\napi_key_file = {:?}\n\
             [database]\npath = {:?}\n[dns]\nroot_hints = [\"127.0.0.1\"]\nport = 9\n",
            key.display().to_string(),
            db.display().to_string()
        ),
    )
    .unwrap();
    let log = dir.path().join("daemon.log");
    let start = || {
        Command::new(env!("CARGO_BIN_EXE_dnssec-warden"))
            .args(["run", "--config"])
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap()
    };
    /// Killed by PID if the test ends first.
    struct Child(std::process::Child);
    impl Drop for Child {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let wait_exit = |child: &mut Child, within: Duration| {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Some(status) = child.0.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    };

    let mut daemon = Child(start());
    let until = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("dnssec-warden starting")
    {
        assert!(Instant::now() < until, "the daemon did not start");
        assert!(
            daemon.0.try_wait().unwrap().is_none(),
            "{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::remove_file(&db).unwrap();
    let status = wait_exit(&mut daemon, Duration::from_secs(10));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let status = status.unwrap_or_else(|| panic!("the daemon kept running:\n{text}"));
    assert!(!status.success(), "{text}");
    assert!(
        text.contains(&format!("database {} was removed", db.display())),
        "{text}"
    );
    assert!(!db.exists(), "the database was created anew");

    // Started again beside the old log: refused, with what to do.
    let mut daemon = Child(start());
    let status = wait_exit(&mut daemon, Duration::from_secs(10)).expect("the daemon exits");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "{text}");
    assert!(text.contains("write-ahead log"), "{text}");

    // An empty file: refused.
    for log in ["state.db-wal", "state.db-shm"] {
        let _ = std::fs::remove_file(dir.path().join(log));
    }
    std::fs::File::create(&db).unwrap();
    let mut daemon = Child(start());
    let status = wait_exit(&mut daemon, Duration::from_secs(10)).expect("the daemon exits");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!status.success(), "{text}");
    assert!(text.contains("empty file"), "{text}");
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0);
}
