//! The SQLite file set under an adversarial operator. An older copy restored in
//! place, another database copied over it, the write-ahead log or its index removed, a
//! damaged file, the lock file removed: each is noticed before the next write, the daemon
//! stops with one message naming the file, and nothing recorded is lost (DESIGN.md, "The
//! store's integrity").

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dnssec_warden::lifecycle::{Intent, Timestamp};
use dnssec_warden::store::{Store, StoreError};
use dnssec_warden_test_support::daemon::{Daemon, run};
use sqlx::{ConnectOptions as _, Connection as _};

const ZONE: &str = "example.test.";
const T0: Timestamp = Timestamp(1_800_000_000_000);

/// Another process's connection to the file, as an operator's `sqlite3` would have.
async fn other_process(path: &Path) -> sqlx::SqliteConnection {
    sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .unwrap()
}

/// A copy of the database as `cp` makes it after a checkpoint (a WAL-mode file).
async fn back_up(path: &Path, to: &Path) {
    checkpoint(path).await;
    std::fs::copy(path, to).unwrap();
}

/// A copy as `VACUUM INTO` (or a backup tool) makes it: not in WAL mode.
async fn vacuum_into(path: &Path, to: &Path) {
    let mut conn = other_process(path).await;
    sqlx::query(&format!("VACUUM INTO '{}'", to.display()))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
}

async fn checkpoint(path: &Path) {
    let mut conn = other_process(path).await;
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
}

/// The copy written over the database in place, after a checkpoint (so that the log
/// holds nothing the copy would be read through): `cp backup state.db`, inode kept.
async fn restore_in_place(backup: &Path, path: &Path) {
    checkpoint(path).await;
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap());
    std::fs::write(path, std::fs::read(backup).unwrap()).unwrap();
    let after = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap());
    assert_eq!(ino, after, "the copy kept the inode, as cp does");
}

async fn intent_of(path: &Path) -> Option<String> {
    let store = Store::open_read_only(path).await.unwrap();
    let intent = store
        .zone(ZONE)
        .await
        .unwrap()
        .map(|row| row.zone.intent.as_str().to_string());
    store.close().await;
    intent
}

#[tokio::test]
async fn an_older_copy_restored_in_place_is_noticed_and_never_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let backup = dir.path().join("backup.db");
    let store = Store::open(&path).await.unwrap();
    store
        .set_intent(ZONE, Intent::Disabled, false, "disable", T0)
        .await
        .unwrap();
    back_up(&path, &backup).await;
    store
        .set_intent(ZONE, Intent::Enabled, false, "enable", T0)
        .await
        .unwrap();
    restore_in_place(&backup, &path).await;

    let err = store
        .ensure_zone("other.test.", T0)
        .await
        .expect_err("a write to an older copy fails");
    assert!(matches!(err, StoreError::Restored { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("older copy"), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(store.verify_identity().await.is_err());
    drop(store);
    // Nothing was written into the copy: it says what the backup said.
    assert_eq!(intent_of(&path).await.as_deref(), Some("disabled"));
    let reopened = Store::open(&path).await.unwrap();
    assert!(reopened.zone("other.test.").await.unwrap().is_none());
    reopened.close().await;
}

#[tokio::test]
async fn another_database_copied_over_is_noticed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let other = dir.path().join("other.db");
    let store = Store::open(&path).await.unwrap();
    store
        .set_intent(ZONE, Intent::Enabled, false, "enable", T0)
        .await
        .unwrap();
    let stranger = Store::open(&other).await.unwrap();
    for _ in 0..5 {
        stranger
            .set_intent(ZONE, Intent::Disabled, false, "disable", T0)
            .await
            .unwrap();
    }
    stranger.close().await;
    // A whole database, as `cp` of a closed one gives: closing may leave the last
    // writes in the other file's log for a moment.
    checkpoint(&other).await;
    restore_in_place(&other, &path).await;

    let err = store.verify_identity().await.expect_err("another database");
    assert!(matches!(err, StoreError::Swapped { .. }), "{err}");
    assert!(err.to_string().contains("another database"), "{err}");
}

#[tokio::test]
async fn a_copy_not_in_wal_mode_written_over_is_another_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let backup = dir.path().join("backup.db");
    let store = Store::open(&path).await.unwrap();
    store
        .set_intent(ZONE, Intent::Enabled, false, "enable", T0)
        .await
        .unwrap();
    vacuum_into(&path, &backup).await;
    restore_in_place(&backup, &path).await;
    let err = store.verify_identity().await.expect_err("another file");
    assert!(
        err.to_string().contains("not in write-ahead-log mode"),
        "{err}"
    );
    // The log was not removed by a look at the new file.
    assert!(dir.path().join("state.db-wal").exists());
}

#[tokio::test]
async fn ids_differ_between_databases() {
    let dir = tempfile::tempdir().unwrap();
    let a = Store::open(&dir.path().join("a.db")).await.unwrap();
    let b = Store::open(&dir.path().join("b.db")).await.unwrap();
    let (a_id, b_id) = (a.database_id().unwrap(), b.database_id().unwrap());
    assert_eq!(a_id.len(), 32, "{a_id}");
    assert_ne!(a_id, b_id);
}

/// A write, then `file` (the log or its index) removed under the store: the next write
/// fails naming it, and what was written before is still there once the store is gone
/// without closing (as the daemon stops on it).
async fn companion_removed(file: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = Store::open(&path).await.unwrap();
    store
        .set_intent(ZONE, Intent::Enabled, false, "enable", T0)
        .await
        .unwrap();
    let companion = dir.path().join(file);
    assert!(
        std::fs::metadata(&companion).unwrap().len() > 0,
        "{file} holds the write"
    );
    std::fs::remove_file(&companion).unwrap();
    let err = store
        .set_intent(ZONE, Intent::Disabled, false, "disable", T0)
        .await
        .expect_err("a write after it was removed fails");
    assert!(matches!(err, StoreError::CompanionGone { .. }), "{err}");
    assert!(
        err.to_string().contains(&format!("{file} was removed")),
        "{err}"
    );
    drop(store);
    assert_eq!(intent_of(&path).await.as_deref(), Some("enabled"));
}

#[tokio::test]
async fn a_log_removed_under_the_store_is_noticed_and_what_it_held_kept() {
    companion_removed("state.db-wal").await;
}

#[tokio::test]
async fn an_index_removed_under_the_store_is_noticed_before_the_next_write() {
    companion_removed("state.db-shm").await;
}

/// A config with nothing listening at the provider or DNS addresses: the daemon's loop
/// runs and writes (steps that fail and are deferred) without touching the network.
fn config(dir: &Path) -> PathBuf {
    let key = dir.join("api-key");
    std::fs::write(&key, "test-key\n").unwrap();
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[provider]\nbase_url = \"http://127.0.0.1:9\"\napi_key_file = {:?}\n\
             [database]\npath = {:?}\n[dns]\nroot_hints = [\"127.0.0.1\"]\nport = 9\n\
             [zones]\nnames = [\"{ZONE}\"]\n",
            key.display().to_string(),
            dir.join("state.db").display().to_string()
        ),
    )
    .unwrap();
    config
}

fn started(config: &Path, log: PathBuf) -> Daemon {
    let mut daemon = Daemon::start(config, log);
    let until = Instant::now() + Duration::from_secs(20);
    while !daemon.log().contains("dnssec-warden starting") {
        assert!(Instant::now() < until, "the daemon did not start");
        assert!(daemon.alive(), "{}", daemon.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon
}

fn stopped_saying(daemon: &mut Daemon, said: &str) -> String {
    let status = daemon.wait_exit(Duration::from_secs(15));
    let log = daemon.log();
    let status = status.unwrap_or_else(|| panic!("the daemon kept running:\n{log}"));
    assert!(!status.success(), "{log}");
    assert!(log.contains(said), "wanted {said:?} in:\n{log}");
    log
}

fn cli(config: &Path, args: &[&str]) -> (i32, String) {
    let (code, out, err) = run(config, args);
    (code, format!("{out}{err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_stops_on_an_older_copy_restored_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let path = dir.path().join("state.db");
    let backup = dir.path().join("backup.db");
    let (code, out) = cli(&config, &["disable", ZONE]);
    assert_eq!(code, 0, "{out}");
    let mut daemon = started(&config, dir.path().join("daemon.log"));
    back_up(&path, &backup).await;
    let (code, out) = cli(&config, &["enable", ZONE]);
    assert_eq!(code, 0, "{out}");
    // The daemon reads the intent and steps the zone (its writes move the generation on).
    std::thread::sleep(Duration::from_millis(1500));
    restore_in_place(&backup, &path).await;
    let log = stopped_saying(&mut daemon, "went back to an older copy");
    assert!(log.contains(&path.display().to_string()), "{log}");
    assert_eq!(
        log.matches("older copy").count(),
        1,
        "said once, not per zone or per tick:\n{log}"
    );
    // Nothing was written into the restored copy.
    assert_eq!(intent_of(&path).await.as_deref(), Some("disabled"));

    // Started again on purpose: the copy is taken as it is.
    let mut again = started(&config, dir.path().join("again.log"));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(again.alive(), "{}", again.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intent_written_after_the_index_was_removed_is_never_lost() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let path = dir.path().join("state.db");
    let (code, out) = cli(&config, &["disable", ZONE]);
    assert_eq!(code, 0, "{out}");
    let mut daemon = started(&config, dir.path().join("daemon.log"));
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::remove_file(dir.path().join("state.db-shm")).unwrap();
    // Right away, before the daemon's next look: either refused, saying why, or kept.
    let (code, said) = cli(&config, &["enable", ZONE]);
    if code == 0 {
        assert!(said.contains("recorded"), "{said}");
    } else {
        assert!(said.contains("state.db-shm is missing"), "{said}");
    }
    stopped_saying(&mut daemon, "state.db-shm was removed");
    // The daemon is down: the command works again, and what it says is what the next
    // daemon reads.
    let (code, out) = cli(&config, &["enable", ZONE]);
    assert_eq!(code, 0, "{out}");
    let mut again = started(&config, dir.path().join("again.log"));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(again.alive(), "{}", again.log());
    let (code, out) = cli(&config, &["status", ZONE, "--json"]);
    assert_eq!(code, 0, "{out}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["intent"], "enabled", "{status}");
    drop(again);
    assert_eq!(intent_of(&path).await.as_deref(), Some("enabled"));
}

#[test]
fn the_daemon_stops_when_its_log_is_removed_and_keeps_what_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let mut daemon = started(&config, dir.path().join("daemon.log"));
    let (code, out) = cli(&config, &["enable", ZONE]);
    assert_eq!(code, 0, "{out}");
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::remove_file(dir.path().join("state.db-wal")).unwrap();
    stopped_saying(&mut daemon, "state.db-wal was removed");
    let (code, out) = cli(&config, &["history", ZONE]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("operator asked to enable"), "{out}");
}

#[test]
fn a_second_daemon_is_refused_even_with_the_lock_file_removed() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let mut first = started(&config, dir.path().join("first.log"));
    std::fs::remove_file(dir.path().join("state.lock")).unwrap();
    let mut second = Daemon::start(&config, dir.path().join("second.log"));
    stopped_saying(&mut second, "already running");
    assert!(first.alive(), "{}", first.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_database_stops_the_daemon_with_one_message() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let path = dir.path().join("state.db");
    // A database of some size, checkpointed into the file.
    {
        let store = Store::open(&path).await.unwrap();
        for i in 0..300 {
            store
                .ensure_zone(&format!("z{i}.{ZONE}"), T0)
                .await
                .unwrap();
        }
        store.close().await;
    }
    let mut daemon = started(&config, dir.path().join("daemon.log"));
    std::thread::sleep(Duration::from_millis(1500));
    // Truncated to half in place.
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let log = stopped_saying(&mut daemon, "is damaged");
    assert!(
        log.lines().filter(|l| l.contains("ERROR")).count() <= 2,
        "one message, not one a tick:\n{log}"
    );
    // `status` says so too, not "schema 0, restart the daemon".
    let (code, out) = cli(&config, &["status"]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("damaged"), "{out}");
    assert!(!out.contains("schema 0"), "{out}");
    // And a start refuses it.
    let mut again = Daemon::start(&config, dir.path().join("again.log"));
    stopped_saying(&mut again, "damaged");
}

/// A database file the daemon may not write (0444, the daemon not
/// root) is said as such at start, once, with what to check; not "retrying, the daemon
/// goes on once it can write" and then an exit. Needs root (to run the daemon as
/// `nobody` with `setpriv`); skipped otherwise.
#[test]
fn a_database_the_daemon_may_not_write_is_said_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !root || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: needs root and setpriv");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let (code, out) = cli(&config, &["disable", ZONE]);
    assert_eq!(code, 0, "{out}");
    let bin = dir.path().join("dnssec-warden");
    std::fs::copy(env!("CARGO_BIN_EXE_dnssec-warden"), &bin).unwrap();
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(chown.success());
    for (path, mode) in [
        (dir.path().to_path_buf(), 0o755),
        (bin.clone(), 0o755),
        (dir.path().join("state.db"), 0o444),
    ] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let out = std::process::Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args(["run", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("cannot be written"), "{said}");
    assert!(said.contains("check the owner and mode"), "{said}");
    assert!(!said.contains("retrying"), "{said}");
    assert_eq!(
        said.matches("attempt to write a readonly database").count(),
        1,
        "the cause said once: {said}"
    );
}

/// The fleet bench found it: a look at the file racing the daemon's own writes took a
/// write committed during the look for the file going back ("generation 2706, this
/// daemon had already seen 2707"). Writers and lookers side by side, the file's times
/// touched so that every look reads the generation afresh: never a false alarm.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn looks_racing_writes_never_take_the_file_for_an_older_copy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = Store::open(&path).await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..4 {
        let store = store.clone();
        tasks.spawn(async move {
            for i in 0..150 {
                store
                    .ensure_zone(&format!("z{w}-{i}.test."), T0)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        });
    }
    for _ in 0..2 {
        let store = store.clone();
        let path = path.clone();
        tasks.spawn(async move {
            for i in 0..300u64 {
                let file = std::fs::File::options()
                    .write(true)
                    .open(&path)
                    .map_err(|e| e.to_string())?;
                file.set_modified(
                    std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + i),
                )
                .map_err(|e| e.to_string())?;
                // Kept open: closing a descriptor of the file would drop SQLite's locks
                // in this process (the store is in this process too).
                std::mem::forget(file);
                store.verify_identity().await.map_err(|e| e.to_string())?;
            }
            Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap().unwrap();
    }
}
