//! Through the real binary: alert sinks that never answer or
//! fail forever hold up neither the registrar hook, another sink, a zone's transition,
//! nor the shutdown; a failing sink backs off, says so once, alerts
//! (`alert_sink_failing`) to the other sinks, and catches up when it recovers.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use dnssec_warden_test_support::daemon::{Daemon, LabWorld, cli, wait_state};

const LONG: Duration = Duration::from_secs(40);

/// Waits until the file holds `n` lines containing `needle`; false after `within`.
async fn wait_file(path: &Path, needle: &str, n: usize, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.matches(needle).count() >= n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A receiver on loopback that accepts connections and never answers; counts them.
async fn silent_receiver() -> (
    std::net::SocketAddr,
    Arc<AtomicU32>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU32::new(0));
    let count = accepted.clone();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        // Bounded: a daemon under test opens a handful.
        for _ in 0..64 {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            held.push(socket);
        }
        std::future::pending::<()>().await;
    });
    (addr, accepted, task)
}

/// An exec sink writing `<id> <kind>` of each notification to `path`.
fn exec_sink(path: &Path) -> String {
    format!(
        "[[alerts.exec]]\ncommand = [\"/bin/sh\", \"-c\", \"echo \\\"$DNSSEC_WARDEN_ALERT_ID $DNSSEC_WARDEN_ALERT_KIND\\\" >> {}\"]\n",
        path.display()
    )
}

/// A webhook that never answers (60 s a try, 3 tries) is first among the sinks. The
/// registrar hook, the other sink, the zone's transitions and an alert due after 2 s all
/// come as if it were not there, and SIGTERM stops the daemon at once; what the webhook
/// owes stays in its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_never_answers_holds_up_nothing() {
    let zone = "slowsink.test.";
    let mut w = LabWorld::start(zone).await;
    let (addr, accepted, receiver) = silent_receiver().await;
    let sinks = w.dir.path().join("sinks.txt");
    let registrar = w.dir.path().join("registrar.txt");
    w.rest = w
        .rest
        .replace("ds_overdue_after = \"1h\"", "ds_overdue_after = \"2s\"");
    w.rest.push_str(&format!(
        "[[alerts.webhook]]\nurl = \"http://{addr}/hook\"\ntimeout = \"60s\"\nmax_attempts = 3\n{}\
         [registrar]\ncommand = [\"/bin/sh\", \"-c\", \"echo \\\"$DNSSEC_WARDEN_ACTION $DNSSEC_WARDEN_SEQ\\\" >> {}\"]\n",
        exec_sink(&sinks),
        registrar.display()
    ));
    w.write_config(w.sim.base_url().as_str());
    let mut daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    let (ok, _, err) = cli(&w.config, &["enable", zone]);
    assert!(ok, "{err}");
    let asked = Instant::now();
    // The zone moves on, the hook runs, the other sink has the request and the alert.
    wait_state(&w.config, zone, "awaiting_ds", LONG, &daemon).await;
    assert!(
        wait_file(&registrar, "publish", 1, Duration::from_secs(15)).await,
        "no registrar hook\n{}",
        daemon.log()
    );
    assert!(
        wait_file(&sinks, "ds_publish", 1, Duration::from_secs(5)).await,
        "the exec sink never had the request\n{}",
        daemon.log()
    );
    assert!(
        wait_file(&sinks, "ds_unpublished_overdue", 1, Duration::from_secs(15)).await,
        "the overdue alert never came\n{}",
        daemon.log()
    );
    assert!(
        asked.elapsed() < Duration::from_secs(30),
        "{:?}",
        asked.elapsed()
    );
    assert!(
        accepted.load(Ordering::SeqCst) >= 1,
        "the webhook was tried"
    );
    // Stopped at once, within systemd's stop timeout by far.
    let stopping = Instant::now();
    daemon.signal("TERM");
    let status = daemon
        .wait_exit(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("still running 20 s after SIGTERM\n{}", daemon.log()));
    assert!(status.success(), "{status}\n{}", daemon.log());
    assert!(stopping.elapsed() < Duration::from_secs(20));
    receiver.abort();
    // What the webhook owes is still in its queue, for the next start.
    use sqlx::ConnectOptions as _;
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(w.dir.path().join("state.db"))
        .connect()
        .await
        .unwrap();
    let (owed,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM deliveries WHERE sink = 'alerts.webhook[0]' AND delivered_at IS NULL",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(owed >= 2, "{owed} owed");
}

/// A webhook answering 500 forever is tried after a wait that doubles to its ceiling,
/// not at every tick; its failing is one ERROR line, then `alert_sink_failing` at the
/// other sink; once it answers again it gets what it owed and the alert resolves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_failing_forever_backs_off_and_alerts_once() {
    let zone = "failsink.test.";
    let mut w = LabWorld::start(zone).await;
    let posts = Arc::new(AtomicU32::new(0));
    let healthy = Arc::new(AtomicBool::new(false));
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let app = {
        let (posts, healthy, seen) = (posts.clone(), healthy.clone(), seen.clone());
        axum::Router::new().route(
            "/hook",
            axum::routing::post(move |body: axum::Json<serde_json::Value>| {
                let (posts, healthy, seen) = (posts.clone(), healthy.clone(), seen.clone());
                async move {
                    posts.fetch_add(1, Ordering::SeqCst);
                    if !healthy.load(Ordering::SeqCst) {
                        return axum::http::StatusCode::INTERNAL_SERVER_ERROR;
                    }
                    let id = body["id"].as_str().unwrap_or_default().to_string();
                    seen.lock().unwrap_or_else(|p| p.into_inner()).push(id);
                    axum::http::StatusCode::OK
                }
            }),
        )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let sinks = w.dir.path().join("sinks.txt");
    w.rest = w
        .rest
        .replace("ds_overdue_after = \"1h\"", "ds_overdue_after = \"1s\"");
    w.rest.push_str(&format!(
        "[alerts]\nsink_retry_max = \"4s\"\nsink_failing_after = \"3s\"\n\
         [[alerts.webhook]]\nurl = \"http://{addr}/hook\"\ntimeout = \"2s\"\nmax_attempts = 1\n{}",
        exec_sink(&sinks),
    ));
    w.write_config(w.sim.base_url().as_str());
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    assert!(cli(&w.config, &["enable", zone]).0);
    wait_state(&w.config, zone, "awaiting_ds", LONG, &daemon).await;
    assert!(wait_file(&sinks, "ds_unpublished_overdue", 1, LONG).await);
    // Owed: the DS request and the alert. Over 20 s, waits of 4 s at most between tries.
    let from = posts.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(20)).await;
    let tried = posts.load(Ordering::SeqCst) - from;
    assert!(
        (2..=7).contains(&tried),
        "{tried} POSTs in 20 s\n{}",
        daemon.log()
    );
    let log = daemon.log();
    assert_eq!(
        log.matches("the alert sink fails").count(),
        1,
        "one line for the episode\n{log}"
    );
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("ERROR") && l.contains("alerts.webhook[0]"))
            .count(),
        1,
        "{log}"
    );
    // The other sink has the daemon-wide alert about this one.
    assert!(
        wait_file(&sinks, "-firing alert_sink_failing", 1, LONG).await,
        "{}",
        daemon.log()
    );
    // It recovers: what it owed arrives (in order), said once, and the alert resolves.
    healthy.store(true, Ordering::SeqCst);
    assert!(
        wait_file(&sinks, "-resolved alert_sink_failing", 1, LONG).await,
        "{}",
        daemon.log()
    );
    assert!(
        daemon
            .wait_log("the alert sink delivers again", 1, LONG)
            .await,
        "{}",
        daemon.log()
    );
    let got = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let publish = got.iter().position(|id| id.starts_with("ds_publish-"));
    let firing = got.iter().position(|id| id.ends_with("-firing"));
    assert!(
        publish.is_some() && firing.is_some() && publish < firing,
        "{got:?}"
    );
    assert_eq!(
        daemon
            .log()
            .matches("the alert sink delivers again")
            .count(),
        1
    );
    server.abort();
}
