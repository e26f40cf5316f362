//! Alerts end to end: every kind raised and resolved through the engine on a manual clock,
//! delivered to a webhook receiver on loopback (with failures, retries and a restart) and
//! to exec sinks (with a timeout); the registrar hook called with the right DS.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::Value;

use dnssec_warden::alert::{AlertSettings, RegistrarSettings};
use dnssec_warden::config::Settings;
use dnssec_warden::dns::{ValidationProbe, ValidationVerdict};
use dnssec_warden::lifecycle::{AlertKind, Clock, Intent, Policy, State};
use dnssec_warden_test_support::on_both_backends;
use dnssec_warden_test_support::rig::{Rig, ZONE};

const HOUR: Duration = Duration::from_secs(3600);

// ---- a webhook receiver on loopback ---------------------------------------------------

#[derive(Default)]
struct Inbox {
    /// Answer 500 to this many more requests.
    fail_next: u32,
    requests: u32,
    accepted: Vec<Value>,
    authorization: Vec<Option<String>>,
}

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Inbox>>);

impl Receiver {
    async fn start() -> (Self, SocketAddr) {
        let receiver = Self::default();
        let app = axum::Router::new()
            .route("/hook", post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, addr)
    }

    fn inbox(&self) -> std::sync::MutexGuard<'_, Inbox> {
        self.0.lock().unwrap()
    }

    fn fail_next(&self, n: u32) {
        self.inbox().fail_next = n;
    }

    /// Accepted notifications for an alert kind (or a DS event) and event name.
    fn got(&self, kind: &str, event: &str) -> Vec<Value> {
        self.inbox()
            .accepted
            .iter()
            .filter(|v| v["event"] == event && (v["kind"] == kind || event.starts_with("ds_")))
            .cloned()
            .collect()
    }
}

async fn receive(
    AxumState(receiver): AxumState<Receiver>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> StatusCode {
    let mut inbox = receiver.inbox();
    inbox.requests += 1;
    if inbox.fail_next > 0 {
        inbox.fail_next -= 1;
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    inbox.authorization.push(auth);
    inbox.accepted.push(body);
    StatusCode::OK
}

// ---- set-up -----------------------------------------------------------------------------

/// `[alerts]` and `[registrar]` as an operator writes them, through the real parser.
fn settings(toml: &str) -> (AlertSettings, Option<RegistrarSettings>) {
    let s = Settings::parse(toml, Path::new("/test/config.toml")).expect("valid config");
    (s.alerts, s.registrar)
}

fn webhook_toml(addr: SocketAddr) -> String {
    format!(
        "[[alerts.webhook]]\nurl = \"http://{addr}/hook\"\ntimeout = \"2s\"\n\
         max_attempts = 3\nbackoff = \"10ms\"\nheaders = {{ Authorization = \"Bearer t0k\" }}\n"
    )
}

async fn rig_with(toml: &str) -> Rig {
    Rig::with_notify(2, 2, Policy::default(), Some(settings(toml))).await
}

async fn intent(rig: &Rig, intent: Intent) {
    let now = rig.world.clock.now();
    rig.store
        .set_intent(
            ZONE,
            intent,
            false,
            &format!("operator asked: {intent}"),
            now,
        )
        .await
        .unwrap();
}

async fn to_awaiting_ds(rig: &mut Rig) {
    rig.run_for(1).await;
    intent(rig, Intent::Enabled).await;
    assert!(rig.run_until(State::AwaitingDs, 30).await);
}

async fn to_active(rig: &mut Rig) {
    to_awaiting_ds(rig).await;
    rig.world.publish_ds(0, 3600);
    rig.world.publish_ds(1, 3600);
    assert!(rig.run_until(State::Active, 10).await);
}

/// Advances the clock by `step` and ticks, `n` times.
async fn hours(rig: &mut Rig, n: usize, step: Duration) {
    for _ in 0..n {
        rig.advance(step);
        rig.tick().await;
    }
}

async fn ds_line(rig: &Rig) -> String {
    let row = rig.store.zone(ZONE).await.unwrap().unwrap();
    row.zone.facts.lifecycle.ds_line.expect("a DS line")
}

async fn open(rig: &Rig, kind: AlertKind) -> bool {
    let alerts = rig.store.open_alerts(Some(ZONE)).await.unwrap();
    alerts.iter().any(|a| a.kind == kind)
}

/// One firing notification for `kind`, well formed; returns it.
fn fired(receiver: &Receiver, kind: AlertKind) -> Value {
    let firing = receiver.got(kind.as_str(), "firing");
    assert_eq!(
        firing.len(),
        1,
        "one firing notification for {kind}: {firing:#?}"
    );
    let event = firing[0].clone();
    assert_eq!(event["zone"], ZONE);
    assert_eq!(event["severity"], kind.severity().as_str());
    assert!(event["message"].as_str().unwrap().contains(ZONE), "{event}");
    assert!(
        event["text"].as_str().unwrap().contains(kind.as_str()),
        "{event}"
    );
    assert!(
        event["opened_at"].as_str().unwrap().ends_with('Z'),
        "{event}"
    );
    assert!(event["state"].is_string(), "{event}");
    assert!(
        event["id"].as_str().unwrap().ends_with("-firing"),
        "{event}"
    );
    event
}

/// One resolved notification for `kind`, and the alert is closed and fully notified.
async fn resolved(rig: &Rig, receiver: &Receiver, kind: AlertKind) {
    assert!(!open(rig, kind).await, "{kind} still open");
    let done = receiver.got(kind.as_str(), "resolved");
    assert_eq!(
        done.len(),
        1,
        "one resolved notification for {kind}: {done:#?}"
    );
    assert!(done[0]["resolved_at"].is_string());
    assert!(done[0]["text"].as_str().unwrap().starts_with("RESOLVED"));
    let rows = rig.store.alerts(ZONE).await.unwrap();
    let row = rows.iter().find(|a| a.kind == kind).unwrap();
    assert!(row.last_notified_at.is_some() && row.resolved_notified_at.is_some());
    assert_eq!(receiver.got(kind.as_str(), "firing").len(), 1, "no repeat");
}

// ---- every kind, raised and resolved ---------------------------------------------------

async fn ds_unpublished_overdue_is_raised_and_resolved() {
    let (receiver, addr) = Receiver::start().await;
    let mut rig = rig_with(&webhook_toml(addr)).await;
    to_awaiting_ds(&mut rig).await;
    hours(&mut rig, 23, HOUR).await;
    assert!(receiver.got("ds_unpublished_overdue", "firing").is_empty());
    hours(&mut rig, 2, HOUR).await;
    let event = fired(&receiver, AlertKind::DsUnpublishedOverdue);
    // The operator is told the exact DS to enter.
    assert_eq!(event["ds"], ds_line(&rig).await.as_str());
    assert_eq!(event["state"], "awaiting_ds");

    rig.world.publish_ds(0, 3600);
    rig.world.publish_ds(1, 3600);
    assert!(rig.run_until(State::Active, 10).await);
    resolved(&rig, &receiver, AlertKind::DsUnpublishedOverdue).await;
}

async fn ds_removal_overdue_is_raised_and_resolved() {
    let (receiver, addr) = Receiver::start().await;
    let mut rig = rig_with(&webhook_toml(addr)).await;
    to_active(&mut rig).await;
    intent(&rig, Intent::Disabled).await;
    assert!(rig.run_until(State::AwaitingDsRemoval, 5).await);
    hours(&mut rig, 25, HOUR).await;
    let event = fired(&receiver, AlertKind::DsRemovalOverdue);
    assert_eq!(event["ds"], ds_line(&rig).await.as_str());
    assert_eq!(event["state"], "awaiting_ds_removal");

    rig.world.withdraw_ds(0);
    rig.world.withdraw_ds(1);
    assert!(rig.run_until(State::TtlWait, 5).await);
    resolved(&rig, &receiver, AlertKind::DsRemovalOverdue).await;
}

async fn ds_mismatch_is_raised_and_resolved() {
    let (receiver, addr) = Receiver::start().await;
    let mut rig = rig_with(&webhook_toml(addr)).await;
    to_active(&mut rig).await;
    rig.world.publish_wrong_ds(0, 3600);
    rig.world.publish_wrong_ds(1, 3600);
    rig.run_for(2).await;
    assert!(open(&rig, AlertKind::DsMismatch).await);
    let event = fired(&receiver, AlertKind::DsMismatch);
    assert_eq!(event["severity"], "critical");
    // The remedy: the DS the zone's key needs.
    assert_eq!(event["ds"], ds_line(&rig).await.as_str());

    rig.world.publish_ds(0, 3600);
    rig.world.publish_ds(1, 3600);
    rig.run_for(3).await;
    resolved(&rig, &receiver, AlertKind::DsMismatch).await;
}

async fn dnssec_off_with_ds_is_raised_and_resolved() {
    let (receiver, addr) = Receiver::start().await;
    let mut rig = rig_with(&webhook_toml(addr)).await;
    to_active(&mut rig).await;
    // Someone switches DNSSEC off in the provider's control panel.
    rig.world.lock().dnssec_on = false;
    rig.run_for(2).await;
    let event = fired(&receiver, AlertKind::DnssecOffWithDs);
    assert_eq!(event["severity"], "critical");
    // ... and back on.
    rig.world.lock().dnssec_on = true;
    rig.run_for(2).await;
    resolved(&rig, &receiver, AlertKind::DnssecOffWithDs).await;
}

async fn partial_propagation_stuck_is_raised_and_resolved() {
    let (receiver, addr) = Receiver::start().await;
    let mut rig = rig_with(&webhook_toml(addr)).await;
    to_awaiting_ds(&mut rig).await;
    rig.world.publish_ds(0, 3600);
    hours(&mut rig, 5, HOUR).await;
    assert!(
        receiver
            .got("partial_propagation_stuck", "firing")
            .is_empty()
    );
    hours(&mut rig, 2, HOUR).await;
    fired(&receiver, AlertKind::PartialPropagationStuck);

    rig.world.publish_ds(1, 3600);
    assert!(rig.run_until(State::Active, 10).await);
    resolved(&rig, &receiver, AlertKind::PartialPropagationStuck).await;
}

fn probe(verdict: ValidationVerdict) -> ValidationProbe {
    ValidationProbe {
        source: "127.0.0.53".into(),
        verdict,
        detail: "test".into(),
    }
}

async fn validation_failed_is_raised_and_resolved() {
    let (receiver, addr) = Receiver::start().await;
    let mut rig = rig_with(&webhook_toml(addr)).await;
    to_active(&mut rig).await;
    rig.world.lock().validation = vec![probe(ValidationVerdict::Bogus)];
    rig.run_for(2).await;
    let event = fired(&receiver, AlertKind::ValidationFailed);
    assert_eq!(event["severity"], "critical");
    assert_eq!(event["state"], "active");
    rig.world.lock().validation = vec![probe(ValidationVerdict::Secure)];
    rig.run_for(2).await;
    resolved(&rig, &receiver, AlertKind::ValidationFailed).await;
}

async fn signatures_expiring_is_raised_and_resolved() {
    let (receiver, addr) = Receiver::start().await;
    let mut rig = rig_with(&webhook_toml(addr)).await;
    to_active(&mut rig).await;
    let soon = rig.world.clock.now().unix_secs() + 86_400;
    rig.world.lock().signature_expiration = u32::try_from(soon).unwrap();
    rig.run_for(2).await;
    fired(&receiver, AlertKind::SignaturesExpiring);
    // The provider re-signs.
    rig.world.lock().signature_expiration = u32::MAX;
    rig.run_for(2).await;
    resolved(&rig, &receiver, AlertKind::SignaturesExpiring).await;
}

async fn observation_failing_is_raised_and_resolved() {
    let (receiver, addr) = Receiver::start().await;
    let mut rig = rig_with(&webhook_toml(addr)).await;
    to_active(&mut rig).await;
    rig.world.lock().provider_failures = 100_000;
    // The first incomplete observation, within the hour.
    hours(&mut rig, 1, HOUR).await;
    hours(&mut rig, 5, Duration::from_secs(600)).await;
    assert!(receiver.got("observation_failing", "firing").is_empty());
    hours(&mut rig, 3, Duration::from_secs(600)).await;
    let event = fired(&receiver, AlertKind::ObservationFailing);
    assert!(
        event["message"].as_str().unwrap().contains("provider"),
        "{event}"
    );
    rig.world.lock().provider_failures = 0;
    rig.run_for(2).await;
    resolved(&rig, &receiver, AlertKind::ObservationFailing).await;
}

// ---- delivery ---------------------------------------------------------------------------

/// Opens a `validation_failed` episode on an active zone; its first notification is
/// attempted in the same tick.
async fn raise(rig: &mut Rig) {
    rig.world.lock().validation = vec![probe(ValidationVerdict::Bogus)];
    for _ in 0..5 {
        if open(rig, AlertKind::ValidationFailed).await {
            return;
        }
        rig.run_for(1).await;
    }
    assert!(open(rig, AlertKind::ValidationFailed).await);
}

fn requests(receiver: &Receiver) -> u32 {
    receiver.inbox().requests
}

async fn a_failed_post_is_retried_with_backoff_within_the_tick() {
    let (receiver, addr) = Receiver::start().await;
    let mut rig = rig_with(&webhook_toml(addr)).await;
    receiver.fail_next(2);
    // The DS request goes first: two 500s, then accepted.
    to_active(&mut rig).await;
    assert_eq!(requests(&receiver), 3);
    assert_eq!(receiver.got("", "ds_publish").len(), 1);
    receiver.fail_next(2);
    raise(&mut rig).await;
    fired(&receiver, AlertKind::ValidationFailed);
    let inbox = receiver.inbox();
    // Two 500s, then success: three requests within max_attempts = 3.
    assert_eq!(inbox.requests, 6);
    assert!(
        inbox
            .authorization
            .iter()
            .all(|a| a.as_deref() == Some("Bearer t0k"))
    );
}

/// The webhook's queue row for `id`: (attempts, delivered).
async fn webhook_row(rig: &Rig, id: &str) -> Option<(i64, bool)> {
    rig.store
        .deliveries("alerts.webhook[0]")
        .await
        .unwrap()
        .into_iter()
        .find(|d| d.event_id == id)
        .map(|d| (d.attempts, d.delivered_at.is_some()))
}

async fn an_undelivered_alert_stays_owed_and_is_never_repeated_after_a_restart() {
    let (receiver, addr) = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("exec.log");
    // A second sink that works: it must get the notification once, not once per retry.
    let toml = format!(
        "{}[[alerts.exec]]\ncommand = [\"/bin/sh\", \"-c\", \"echo $DNSSEC_WARDEN_ALERT_ID >> \\\"$1\\\"\", \"sh\", {:?}]\n",
        webhook_toml(addr),
        log.to_str().unwrap()
    );
    let mut rig = rig_with(&toml).await;
    to_active(&mut rig).await;
    receiver.fail_next(1_000);
    raise(&mut rig).await;
    rig.tick().await;
    rig.tick().await;
    assert!(receiver.got("validation_failed", "firing").is_empty());
    // In every sink's queue: the alert is notified, the webhook's row still owed.
    let row = rig.store.open_alerts(Some(ZONE)).await.unwrap()[0].clone();
    assert!(row.last_notified_at.is_some(), "queued for every sink");
    let id = episode_id(&rig, &row, "firing");
    let (attempts, delivered) = webhook_row(&rig, &id).await.expect("queued");
    assert!(attempts >= 1 && !delivered, "{attempts} {delivered}");
    let alert_lines = |log: &Path| {
        let text = std::fs::read_to_string(log).unwrap();
        text.lines().filter(|l| l.starts_with("alert-")).count()
    };
    assert_eq!(alert_lines(&log), 1, "the exec sink got it once");

    // The receiver recovers: delivered once, and a restart repeats nothing. The worker
    // is asleep in its doubling wait, which grows as long as the failing has lasted: on
    // a busy machine, seconds.
    receiver.fail_next(0);
    let until = Instant::now() + Duration::from_secs(60);
    while !webhook_row(&rig, &id).await.is_some_and(|(_, d)| d) && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fired(&receiver, AlertKind::ValidationFailed);
    rig.restart().await;
    for _ in 0..3 {
        rig.run_for(1).await;
    }
    fired(&receiver, AlertKind::ValidationFailed);
    assert_eq!(alert_lines(&log), 1);

    // Owed across a restart, too: the resolution fails, the daemon restarts, it arrives.
    receiver.fail_next(1_000);
    rig.world.lock().validation = vec![probe(ValidationVerdict::Secure)];
    rig.run_for(2).await;
    assert!(!open(&rig, AlertKind::ValidationFailed).await);
    assert!(receiver.got("validation_failed", "resolved").is_empty());
    rig.restart().await;
    receiver.fail_next(0);
    rig.run_for(1).await;
    resolved(&rig, &receiver, AlertKind::ValidationFailed).await;
}

async fn an_open_alert_is_notified_again_after_renotify_after() {
    let (receiver, addr) = Receiver::start().await;
    let toml = format!("[alerts]\nrenotify_after = \"2h\"\n{}", webhook_toml(addr));
    let mut rig = rig_with(&toml).await;
    to_active(&mut rig).await;
    raise(&mut rig).await;
    fired(&receiver, AlertKind::ValidationFailed);
    let first = rig.store.open_alerts(Some(ZONE)).await.unwrap()[0]
        .last_notified_at
        .unwrap();
    let half_hour = Duration::from_secs(1800);
    while rig.world.clock.now() < first.plus(HOUR * 5) {
        if rig.world.clock.now() < first.plus(HOUR * 2) {
            assert!(receiver.got("validation_failed", "renotify").is_empty());
        }
        rig.advance(half_hour);
        rig.tick().await;
    }
    let again = receiver.got("validation_failed", "renotify");
    assert_eq!(again.len(), 2, "every 2 h: {again:#?}");
    assert_ne!(again[0]["id"], again[1]["id"]);
    assert!(again[0]["text"].as_str().unwrap().contains("STILL OPEN"));
}

async fn an_exec_sink_gets_env_and_json_and_is_killed_on_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap().to_string();
    let pidfile = dir.path().join("pid");
    let script = "env | grep '^DNSSEC_WARDEN_ALERT_' | sort > \"$1/$DNSSEC_WARDEN_ALERT_ID.env\"; \
                  cat > \"$1/$DNSSEC_WARDEN_ALERT_ID.json\"";
    let toml = format!(
        "[[alerts.exec]]\ncommand = [\"/bin/sh\", \"-c\", {script:?}, \"sh\", {out:?}]\n\
         [[alerts.exec]]\ncommand = [\"/bin/sh\", \"-c\", \"echo $$ > \\\"$1\\\"; exec sleep 30\", \"sh\", {:?}]\n\
         timeout = \"300ms\"\n",
        pidfile.to_str().unwrap()
    );
    let mut rig = rig_with(&toml).await;
    let started = Instant::now();
    to_active(&mut rig).await;
    raise(&mut rig).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the timeouts held"
    );
    // The overrunning command was killed and reaped (by the sink's worker, which runs
    // beside the tick: within its timeout and a little).
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let pid = pid.trim();
    assert!(!pid.is_empty());
    let until = Instant::now() + Duration::from_secs(60);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "process {pid} still there"
    );
    // So the notification is still owed to it (in its queue) ...
    let row = rig.store.open_alerts(Some(ZONE)).await.unwrap()[0].clone();
    let id = episode_id(&rig, &row, "firing");
    let owed = rig.store.deliveries("alerts.exec[1]").await.unwrap();
    let owed = owed.iter().find(|d| d.event_id == id).expect("queued");
    assert!(owed.delivered_at.is_none(), "{owed:?}");

    // ... while the first sink got the alert in its environment and as JSON.
    let env = std::fs::read_to_string(dir.path().join(format!("{id}.env"))).unwrap();
    for line in [
        format!("DNSSEC_WARDEN_ALERT_ID={id}"),
        "DNSSEC_WARDEN_ALERT_EVENT=firing".into(),
        format!("DNSSEC_WARDEN_ALERT_ZONE={ZONE}"),
        "DNSSEC_WARDEN_ALERT_KIND=validation_failed".into(),
        "DNSSEC_WARDEN_ALERT_SEVERITY=critical".into(),
        "DNSSEC_WARDEN_ALERT_STATE=active".into(),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} missing in:\n{env}");
    }
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join(format!("{id}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(json["kind"], "validation_failed");
    assert_eq!(json["event"], "firing");
    assert_eq!(json["zone"], ZONE);
    let runs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("alert-") && name.ends_with(".env")
        })
        .count();
    assert_eq!(runs, 1, "one run of the first sink");
}

// ---- the registrar hook -----------------------------------------------------------------

async fn the_registrar_hook_gets_the_ds_to_publish_and_to_withdraw() {
    let (receiver, addr) = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap().to_string();
    let script = "env | grep '^DNSSEC_WARDEN_' | sort > \"$1/$DNSSEC_WARDEN_ACTION.env\"; \
                  cat > \"$1/$DNSSEC_WARDEN_ACTION.json\"";
    let toml = format!(
        "{}[registrar]\ncommand = [\"/bin/sh\", \"-c\", {script:?}, \"sh\", {out:?}]\ntimeout = \"10s\"\n",
        webhook_toml(addr)
    );
    let mut rig = rig_with(&toml).await;
    to_awaiting_ds(&mut rig).await;
    let ds = ds_line(&rig).await;
    let env = std::fs::read_to_string(dir.path().join("publish.env")).unwrap();
    assert!(
        env.lines().any(|l| l == format!("DNSSEC_WARDEN_DS={ds}")),
        "{env}"
    );
    assert!(
        env.lines()
            .any(|l| l == format!("DNSSEC_WARDEN_ZONE={ZONE}")),
        "{env}"
    );
    assert!(
        env.lines().any(|l| l == "DNSSEC_WARDEN_ACTION=publish"),
        "{env}"
    );
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("publish.json")).unwrap())
            .unwrap();
    assert_eq!(json["ds"], ds.as_str());
    assert_eq!(json["zone"], ZONE);
    // The sinks were told too.
    let told = receiver.got("", "ds_publish");
    assert_eq!(told.len(), 1);
    assert_eq!(told[0]["ds"], ds.as_str());
    assert!(told[0]["text"].as_str().unwrap().contains(&ds));

    rig.world.publish_ds(0, 3600);
    rig.world.publish_ds(1, 3600);
    assert!(rig.run_until(State::Active, 10).await);
    intent(&rig, Intent::Disabled).await;
    assert!(rig.run_until(State::AwaitingDsRemoval, 5).await);
    let env = std::fs::read_to_string(dir.path().join("withdraw.env")).unwrap();
    assert!(
        env.lines().any(|l| l == format!("DNSSEC_WARDEN_DS={ds}")),
        "{env}"
    );
    assert!(
        env.lines().any(|l| l == "DNSSEC_WARDEN_ACTION=withdraw"),
        "{env}"
    );
    assert_eq!(receiver.got("", "ds_withdraw")[0]["ds"], ds.as_str());
    // Each request is numbered, the later one higher, the same number in the hook's
    // environment and input and at the sinks: a receiver drops one delivered late.
    let seq_of = |action: &str| -> i64 {
        let env = std::fs::read_to_string(dir.path().join(format!("{action}.env"))).unwrap();
        let from_env: i64 = env
            .lines()
            .find_map(|l| l.strip_prefix("DNSSEC_WARDEN_SEQ="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no DNSSEC_WARDEN_SEQ in {env}"));
        let json: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("{action}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(json["seq"], from_env, "{json}");
        let event = if action == "publish" {
            "ds_publish"
        } else {
            "ds_withdraw"
        };
        assert_eq!(receiver.got("", event)[0]["seq"], from_env);
        from_env
    };
    assert!(seq_of("withdraw") > seq_of("publish"));
}

async fn a_failing_registrar_hook_is_recorded_and_never_fatal() {
    let mut rig = rig_with("[registrar]\ncommand = [\"/bin/sh\", \"-c\", \"exit 3\"]\n").await;
    to_awaiting_ds(&mut rig).await;
    let events = rig.store.events(ZONE).await.unwrap();
    let failed = events
        .iter()
        .find(|e| e.kind == "effect" && e.reason.contains("registrar hook failed"))
        .expect("the failure is in the audit trail");
    // The operator still has the DS, in the same line.
    assert!(
        failed.reason.contains(&ds_line(&rig).await),
        "{}",
        failed.reason
    );
    assert!(
        failed.reason.contains("exit status: 3"),
        "{}",
        failed.reason
    );
    // The next look raises an alert carrying the DS to enter by hand, and the hook is
    // tried again, a bounded number of times.
    rig.run_for(6).await;
    let open = rig.store.open_alerts(Some(ZONE)).await.unwrap();
    let alert = open
        .iter()
        .find(|a| a.kind == AlertKind::RegistrarHookFailed)
        .expect("registrar_hook_failed is open");
    assert!(
        alert.message.contains(&ds_line(&rig).await),
        "{}",
        alert.message
    );
    let attempts = rig
        .store
        .events(ZONE)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.kind == "effect" && e.reason.contains("registrar hook failed"))
        .map(|e| 1 + e.repeats)
        .sum::<i64>();
    assert_eq!(attempts, 5, "tried five times, then given up");
    // The zone goes on waiting for the DS as usual; once it is there, the alert resolves.
    rig.world.publish_ds(0, 3600);
    rig.world.publish_ds(1, 3600);
    assert!(rig.run_until(State::Active, 10).await);
    assert!(
        !rig.store
            .open_alerts(Some(ZONE))
            .await
            .unwrap()
            .iter()
            .any(|a| a.kind == AlertKind::RegistrarHookFailed)
    );
}

on_both_backends!(
    ds_unpublished_overdue_is_raised_and_resolved,
    ds_removal_overdue_is_raised_and_resolved,
    ds_mismatch_is_raised_and_resolved,
    dnssec_off_with_ds_is_raised_and_resolved,
    partial_propagation_stuck_is_raised_and_resolved,
    validation_failed_is_raised_and_resolved,
    signatures_expiring_is_raised_and_resolved,
    observation_failing_is_raised_and_resolved,
    a_failed_post_is_retried_with_backoff_within_the_tick,
    an_undelivered_alert_stays_owed_and_is_never_repeated_after_a_restart,
    an_open_alert_is_notified_again_after_renotify_after,
    an_exec_sink_gets_env_and_json_and_is_killed_on_timeout,
    the_registrar_hook_gets_the_ds_to_publish_and_to_withdraw,
    a_failing_registrar_hook_is_recorded_and_never_fatal,
);

/// An alert episode's notification id: the database's identity, the row, when it opened.
fn episode_id(rig: &Rig, row: &dnssec_warden::store::AlertRow, event: &str) -> String {
    let db = rig.store.database_id().expect("a database identity");
    format!("alert-{}-{}.{}-{event}", &db[..12], row.id, row.opened_at.0)
}
