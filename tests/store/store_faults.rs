//! The database under faults: a transaction SQLite rolled back by itself, a
//! full disk and the space freed again, the file removed or replaced under a running
//! store, an empty file at start, and read-only openers that never create a database.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use dnssec_warden::lifecycle::{Intent, ManualClock, Timestamp};
use dnssec_warden::metrics;
use dnssec_warden::store::Store;
use dnssec_warden_test_support::{logs, rig};
use sqlx::Connection;

const ZONE: &str = "example.test.";
const T0: Timestamp = Timestamp(1_800_000_000_000);

/// A trigger that makes SQLite itself roll back the whole transaction (as it does on
/// SQLITE_FULL or an I/O error) when an audit event with this reason is inserted.
async fn install_rollback_trigger(path: &Path) {
    let url = format!("sqlite://{}", path.display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query(
        "CREATE TRIGGER test_rollback BEFORE INSERT ON events WHEN NEW.reason = 'boom' \
         BEGIN SELECT RAISE(ROLLBACK, 'rolled back by the test trigger'); END",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
}

/// A write transaction that SQLite rolled back on its own must not leave the pooled
/// connection believing it is still inside it ("attempted to call begin_with at non-zero
/// transaction depth" on every later write).
#[tokio::test]
async fn a_transaction_sqlite_rolled_back_leaves_the_store_usable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    let store = Store::open(&path).await.unwrap();
    store.ensure_zone(ZONE, T0).await.unwrap();
    install_rollback_trigger(&path).await;

    let failed = store
        .set_intent(ZONE, Intent::Enabled, false, "boom", T0)
        .await
        .expect_err("the trigger rolls the transaction back");
    assert!(
        failed
            .to_string()
            .contains("rolled back by the test trigger"),
        "{failed}"
    );

    for i in 0..10 {
        let reason = format!("operator asked, attempt {i}");
        if let Err(e) = store
            .set_intent(ZONE, Intent::Enabled, false, &reason, T0)
            .await
        {
            panic!("write {i} after the rolled-back transaction failed: {e}");
        }
    }
    let events = store.events(ZONE).await.unwrap();
    assert_eq!(
        events.len(),
        10,
        "the rolled-back write left nothing: {events:?}"
    );
    // Not a failing disk: the write-health gauge stays at 0.
    assert_eq!(store.write_failure(), None);
    assert!(
        write_failing_gauge(&store)
            .await
            .contains("dnssec_warden_store_write_failing 0\n")
    );
}

async fn write_failing_gauge(store: &Store) -> String {
    metrics::render(store, &ManualClock::starting_at(T0))
        .await
        .unwrap()
}

/// Whether this process may mount a tmpfs (root in CI).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|uids| uids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// A small tmpfs, unmounted when dropped, however the test ends.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` (with the reason printed) where no tmpfs can be mounted.
    fn mount(size: &str) -> Option<Self> {
        if !is_root() {
            eprintln!("SKIPPED: mounting a tmpfs needs root");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output();
        match out {
            Ok(out) if out.status.success() => Some(Self { dir }),
            Ok(out) => {
                eprintln!(
                    "SKIPPED: cannot mount a tmpfs: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED: cannot run mount: {e}");
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a connection still closing must not keep the mount behind.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the file system with one file until it refuses more.
fn fill(filler: &Path) {
    let mut file = std::fs::File::create(filler).unwrap();
    let chunk = vec![0u8; 16 * 1024];
    while file.write_all(&chunk).is_ok() {}
    // The last pages, smaller than a chunk.
    while file.write_all(&[0u8; 512]).is_ok() {}
    let _ = file.sync_all();
}

/// A full disk makes writes fail; once space is freed, the same store (same pool) writes
/// again, and no error ever says a connection was left inside a transaction.
#[tokio::test]
async fn a_full_disk_fails_writes_and_the_store_recovers_when_space_is_freed() {
    let Some(fs) = Tmpfs::mount("3m") else {
        return;
    };
    let log = logs::capture();
    let path: PathBuf = fs.path().join("state.db");
    let store = Store::open(&path).await.unwrap();
    store.ensure_zone(ZONE, T0).await.unwrap();
    store
        .set_intent(ZONE, Intent::Enabled, false, "before the disk filled", T0)
        .await
        .unwrap();

    let filler = fs.path().join("filler");
    fill(&filler);
    let big = "x".repeat(8 * 1024);
    let mut errors = Vec::new();
    for i in 0..40 {
        let reason = format!("{i} {big}");
        if let Err(e) = store
            .set_intent(ZONE, Intent::Enabled, false, &reason, T0)
            .await
        {
            errors.push(e.to_string());
        }
    }
    assert!(
        errors.iter().any(|e| e.contains("full")),
        "a full disk fails writes: {errors:?}"
    );
    let failure = store.write_failure().expect("the store knows writes fail");
    assert!(failure.cause.contains("full"), "{failure:?}");
    let text = write_failing_gauge(&store).await;
    assert!(
        text.contains("dnssec_warden_store_write_failing 1\n"),
        "{text}"
    );

    std::fs::remove_file(&filler).unwrap();
    for i in 0..10 {
        let reason = format!("after the space was freed {i}");
        if let Err(e) = store
            .set_intent(ZONE, Intent::Enabled, false, &reason, T0)
            .await
        {
            errors.push(e.to_string());
            panic!("write {i} after freeing space failed: {e}\nerrors so far: {errors:#?}");
        }
    }
    assert!(
        !errors.iter().any(|e| e.contains("transaction depth")),
        "{errors:#?}"
    );
    let events = store.events(ZONE).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.reason == "after the space was freed 9")
    );
    assert_eq!(store.write_failure(), None, "the episode ended");
    let text = write_failing_gauge(&store).await;
    assert!(
        text.contains("dnssec_warden_store_write_failing 0\n"),
        "{text}"
    );
    store.close().await;

    // One error line for the episode, one line when it ended; not one per failed write.
    let text = log.text();
    assert_eq!(
        text.matches("database cannot be written").count(),
        1,
        "{text}"
    );
    assert_eq!(text.matches("database writable again").count(), 1, "{text}");
}

/// The engine loop over a full disk: it goes on (probing, not observing every zone at
/// once per poll), and once space is freed it steps the zone again by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_waits_out_a_full_disk_and_carries_on() {
    use dnssec_warden::lifecycle::Clock;
    use dnssec_warden_test_support::fake::FakeWorld;

    let Some(fs) = Tmpfs::mount("3m") else {
        return;
    };
    let path = fs.path().join("state.db");
    let store = Store::open(&path).await.unwrap();
    let clock = ManualClock::starting_at(T0);
    let world = FakeWorld::new(ZONE, 2, 1, clock.clone());
    store.ensure_zone(ZONE, T0).await.unwrap();
    let engine = rig::engine(&world, &store, &rig::CrashSwitch::default(), &rig::policy());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let running = tokio::spawn(async move { engine.run(stopped, Duration::from_millis(20)).await });
    let version = || async { store.zone(ZONE).await.unwrap().unwrap().version };
    let wait_for = |what: &'static str, until: Duration| {
        let deadline = Instant::now() + until;
        move || {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
        }
    };
    let check = wait_for("the first step", Duration::from_secs(10));
    while version().await == 0 {
        check();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let filler = fs.path().join("filler");
    fill(&filler);
    let before = version().await;
    // The zone is due again: its step cannot be recorded.
    clock.advance(Duration::from_secs(86_400));
    let check = wait_for("writes to fail", Duration::from_secs(10));
    while store.write_failure().is_none() {
        check();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !running.is_finished(),
        "the engine loop stopped on a full disk"
    );
    assert_eq!(
        version().await,
        before,
        "nothing was written on a full disk"
    );

    std::fs::remove_file(&filler).unwrap();
    clock.advance(Duration::from_secs(86_400));
    let check = wait_for("a step after space was freed", Duration::from_secs(10));
    while version().await == before {
        check();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(store.write_failure(), None);
    assert!(world.clock.now() > T0);
    stop.send(true).unwrap();
    running.await.unwrap().unwrap();
    store.close().await;
}
