//! `status` and `history` read the database and never create one: before the daemon's
//! first run they say so and exit 1.

use std::path::{Path, PathBuf};

use dnssec_warden::lifecycle::{Intent, Timestamp};
use dnssec_warden::store::Store;
use dnssec_warden_test_support::daemon::run as cli;

const ZONE: &str = "example.test.";
const T0: Timestamp = Timestamp(1_800_000_000_000);

fn config(dir: &Path) -> PathBuf {
    let path = dir.join("config.toml");
    let text = format!(
        "[database]\npath = \"{}\"\n",
        dir.join("state.db").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn status_and_history_never_create_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let db = dir.path().join("state.db");
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["history", "example.test"],
    ] {
        let (code, _, stderr) = cli(&config, args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        let expected = format!("no database at {} (has the daemon run yet?)", db.display());
        assert!(stderr.contains(&expected), "{args:?}: {stderr}");
        assert!(!db.exists(), "{args:?} created the database");
    }
    // An empty file is reported, not read as an empty database.
    std::fs::File::create(&db).unwrap();
    let (code, _, stderr) = cli(&config, &["status"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("empty file"), "{stderr}");
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0);
}

#[test]
fn status_reads_a_database_the_daemon_made() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let db = dir.path().join("state.db");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let store = runtime.block_on(async {
        let store = Store::open(&db).await.unwrap();
        store
            .set_intent(ZONE, Intent::Enabled, false, "enable", T0)
            .await
            .unwrap();
        store
    });
    // While the writer has it open (WAL and shared memory beside it) ...
    let (code, stdout, stderr) = cli(&config, &["status"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(ZONE), "{stdout}");
    // ... and once it is closed (SQLite removed them).
    runtime.block_on(store.close());
    let (code, stdout, stderr) = cli(&config, &["history", ZONE]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("operator: enable"), "{stdout}");
}

#[tokio::test]
async fn a_read_only_store_does_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let err = match Store::open_read_only(&db).await {
        Ok(_) => panic!("opened a database that is not there"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("no database at"), "{err}");
    assert!(!db.exists());

    Store::open(&db).await.unwrap().close().await;
    let reader = Store::open_read_only(&db).await.unwrap();
    assert!(reader.zones().await.unwrap().is_empty());
    assert!(
        reader
            .set_intent(ZONE, Intent::Enabled, false, "enable", T0)
            .await
            .is_err()
    );
    reader.close().await;
    let store = Store::open(&db).await.unwrap();
    assert!(store.zones().await.unwrap().is_empty());
}
