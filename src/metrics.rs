//! `[metrics] listen`: a Prometheus text endpoint at `/metrics`, read from the database
//! at every scrape (so it is never stale and holds no state of its own).
//!
//! - `dnssec_warden_zones{state}`: zones per lifecycle state, `unobserved` included;
//! - `dnssec_warden_provider_zones{provider}`: zones per provider account, as their last
//!   look found them (with several accounts; a zone whose holder was not known is in
//!   none);
//! - `dnssec_warden_alerts_open{kind,severity}`: open alerts per kind (daemon-wide ones
//!   once they alert);
//! - `dnssec_warden_daemon_condition{kind}`: daemon-wide conditions holding now
//!   (`daemon_alerts`), from their first moment;
//! - `dnssec_warden_alert_notifications_undelivered`: notifications a sink still owes;
//! - `dnssec_warden_zones_observation_failing`: zones whose last observation was incomplete;
//! - the worst zone of the fleet, never a series per zone (a million zones would be a
//!   million series; `status` names the zones): `dnssec_warden_zones_observation_failures_max`
//!   (incomplete observations in a row), `dnssec_warden_zones_observation_failing_seconds_max`
//!   (for how long), `dnssec_warden_zones_last_observation_age_seconds_max` (the oldest
//!   last look, complete or not: a daemon that stopped looking shows here), and
//!   `dnssec_warden_zones_last_complete_observation_age_seconds_max` (the oldest last
//!   successful observation; while a zone's observations fail, the time since its first
//!   failure, a lower bound: the database keeps no earlier time);
//! - `dnssec_warden_store_write_failing`: 1 while writes to the database fail (disk full,
//!   I/O error), from this process's own writes: the database cannot say so itself;
//! - this process's DNS queries: `dnssec_warden_dns_queries_total` (sent, retries
//!   included), `dnssec_warden_dns_queries_paced_total` and
//!   `dnssec_warden_dns_pace_wait_seconds_total` (those that waited for a server
//!   address's pace, `dns.max_qps_per_server`, and how long in all: a fleet whose looks
//!   outrun the pace shows here first), and `dnssec_warden_dns_server_backoffs_total`
//!   (a server address that dropped or slipped queries while answering others, asked
//!   more slowly for it);
//! - this process's looks: `dnssec_warden_looks_total{kind}` (`full`: every address;
//!   `sampled`: one parent and one child address of a settled zone) and
//!   `dnssec_warden_samples_disagreed_total` (samples that brought a full look);
//! - several daemons on PostgreSQL: `dnssec_warden_leases_held{holder,self}`,
//!   `dnssec_warden_zones_unheld`, and `dnssec_warden_fenced_total{what}` (a counter of
//!   this process: what its fence refused, `what` one of `step`, `schedule`, `event`,
//!   `effect`, `provider_call`, `notification`);
//! - key rollovers: `dnssec_warden_key_rolls{phase}` (in progress per phase),
//!   `dnssec_warden_key_rolls_ended_total{outcome}` (a counter of this process:
//!   `completed`, `aborted`), `dnssec_warden_key_rolls_due_within_7d` (zones whose next
//!   `[rollover]` roll falls due within a week: a count, not a date per zone), and
//!   `dnssec_warden_key_roll_overdue_seconds` (the longest a roll has been held past the
//!   end of its phase's TTL hold).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::lifecycle::{AlertKind, Clock, State};
use crate::store::{DaemonAlertRow, Fenced, Store, StoreError, ZoneHealth};
use crate::time::Timestamp;

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("metrics: cannot listen on {addr}: {error}")]
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
}

/// The running endpoint.
#[derive(Debug)]
pub struct MetricsServer {
    /// The bound address (the port the system chose if `listen` had port 0).
    pub addr: SocketAddr,
    pub task: JoinHandle<()>,
}

impl MetricsServer {
    /// Stops serving.
    pub fn stop(&self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Ctx {
    store: Store,
    clock: Arc<dyn Clock>,
}

/// What one scraper, or a flood of half-open connections, may hold. A scrape is one short
/// request; anything slower is dropped, so the daemon's file descriptors (which its DNS
/// observations need) cannot be exhausted through this port.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; more are closed as soon as they are accepted.
    pub max_connections: usize,
    /// Time for a client to send its request headers.
    pub header_timeout: std::time::Duration,
    /// Time a connection may live in all.
    pub connection_timeout: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 16,
            header_timeout: std::time::Duration::from_secs(5),
            connection_timeout: std::time::Duration::from_secs(30),
        }
    }
}

/// Binds `listen` and serves `/metrics` in a background task. Binding errors are
/// returned at once, so a taken port fails start-up rather than a scrape.
pub async fn serve(
    listen: SocketAddr,
    store: Store,
    clock: Arc<dyn Clock>,
) -> Result<MetricsServer, MetricsError> {
    serve_with(listen, store, clock, Limits::default()).await
}

/// [`serve`] with explicit limits.
pub async fn serve_with(
    listen: SocketAddr,
    store: Store,
    clock: Arc<dyn Clock>,
    limits: Limits,
) -> Result<MetricsServer, MetricsError> {
    let bind_error = |error| MetricsError::Bind {
        addr: listen,
        error,
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let ctx = Arc::new(Ctx { store, clock });
    let task = tokio::spawn(accept_loop(listener, ctx, limits));
    tracing::info!(%addr, "metrics at http://{addr}/metrics");
    Ok(MetricsServer { addr, task })
}

async fn accept_loop(listener: tokio::net::TcpListener, ctx: Arc<Ctx>, limits: Limits) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut refused: u64 = 0;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors, most likely: wait instead of spinning.
                tracing::warn!(%error, "metrics endpoint cannot accept");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(
                    refused,
                    max = limits.max_connections,
                    "metrics endpoint at its connection cap; closing new connections"
                );
            }
            drop(stream);
            continue;
        };
        let ctx = ctx.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let ctx = ctx.clone();
            async move { Ok::<_, std::convert::Infallible>(respond(&ctx, &request).await) }
        });
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(limits.connection_timeout, connection).await;
            drop(permit);
        });
    }
}

/// `GET /metrics` (and `HEAD`); 404 for any other path, 405 for any other method.
async fn respond(ctx: &Ctx, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response
    };
    if request.uri().path() != "/metrics" {
        return plain(StatusCode::NOT_FOUND, String::new());
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, String::new());
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET,HEAD"));
        return response;
    }
    match render(&ctx.store, ctx.clock.as_ref()).await {
        Ok(body) => {
            let mut response = plain(StatusCode::OK, body);
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        Err(error) => {
            tracing::warn!(%error, "metrics scrape failed");
            plain(StatusCode::INTERNAL_SERVER_ERROR, error.to_string())
        }
    }
}

/// This process's DNS queries, and their waits for a server address's pace.
fn dns_totals(out: &mut String, totals: crate::dns::net::query::ProcessTotals) {
    let counters = [
        (
            "dnssec_warden_dns_queries_total",
            "DNS queries this daemon sent since it started, retries included.",
            totals.exchanges as f64,
        ),
        (
            "dnssec_warden_dns_queries_paced_total",
            "DNS queries that waited for their turn at a server address (dns.max_qps_per_server).",
            totals.paced as f64,
        ),
        (
            "dnssec_warden_dns_pace_wait_seconds_total",
            "Time those queries waited for their turn, in all.",
            totals.paced_wait.as_secs_f64(),
        ),
        (
            "dnssec_warden_dns_server_backoffs_total",
            "Times a server address that dropped or slipped queries while answering others was asked more slowly.",
            totals.backoffs as f64,
        ),
    ];
    for (name, help, value) in counters {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        sample(out, name, &[], value);
    }
}

/// This process's looks at the parent by kind (DESIGN.md section 4, "Sampled looks").
fn look_totals(out: &mut String, totals: crate::dns::observe::tally::LookTotals) {
    let name = "dnssec_warden_looks_total";
    let _ = writeln!(
        out,
        "# HELP {name} Looks at a zone's parent this daemon made since it started: full (every address) or sampled (one address of a settled zone)."
    );
    let _ = writeln!(out, "# TYPE {name} counter");
    sample(out, name, &[("kind", "full")], totals.full as f64);
    sample(out, name, &[("kind", "sampled")], totals.sampled as f64);
    let name = "dnssec_warden_samples_disagreed_total";
    let _ = writeln!(
        out,
        "# HELP {name} Sampled looks that differed from the zone's last full look (or could not be compared), each followed by a full look."
    );
    let _ = writeln!(out, "# TYPE {name} counter");
    sample(out, name, &[], totals.disagreed as f64);
}

/// The exposition text (format 0.0.4): what the database holds read first, then one
/// family (or a few of one concern) at a time, in the order a scrape has always seen them.
pub async fn render(store: &Store, clock: &dyn Clock) -> Result<String, StoreError> {
    let now = clock.now();
    let zones = store.zone_health().await?;
    let alerts = store.open_alert_counts().await?;
    let daemon = store.daemon_alerts_open().await?;
    let undelivered = store.undelivered_alert_notifications().await?;
    let mut out = String::new();
    store_write_failing(&mut out, store);
    dns_totals(&mut out, crate::dns::net::query::process_totals());
    look_totals(&mut out, crate::dns::observe::tally::look_totals());
    zones_per_state(&mut out, &zones);
    zones_per_account(&mut out, &zones);
    // Several daemons on PostgreSQL: who steps how many zones, and how many wait for a
    // holder (non-zero for longer than a lease: no daemon is taking them).
    if let Some(me) = store.holder() {
        let leases = store.lease_counts().await?;
        leases_held(&mut out, me, &leases, zones.len());
    }
    if let Some(fenced) = store.fenced() {
        fenced_total(&mut out, fenced);
    }
    alerts_open(&mut out, &alerts, &daemon, now);
    daemon_conditions(&mut out, &daemon);
    notifications_undelivered(&mut out, undelivered);
    observation_failing(&mut out, &zones, now);
    observation_ages(&mut out, &zones, now);
    key_rolls(&mut out, &zones, now);
    Ok(out)
}

/// The horizon of `dnssec_warden_key_rolls_due_within_7d`: a week to see the registrar's
/// work coming.
const ROLLS_DUE_WITHIN: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// Key rollovers: in progress per phase, ended by this process, due within a week, and
/// the longest a roll has been held past the end of its TTL hold.
fn key_rolls(out: &mut String, zones: &[ZoneHealth], now: Timestamp) {
    use crate::lifecycle::rollover::Phase;
    use strum::VariantArray;
    family(
        out,
        "dnssec_warden_key_rolls",
        "Key rollovers in progress per phase.",
    );
    for phase in Phase::VARIANTS.iter().filter(|p| **p != Phase::Done) {
        let n = zones
            .iter()
            .filter(|z| z.roll_phase == Some(phase.name()))
            .count();
        sample(
            out,
            "dnssec_warden_key_rolls",
            &[("phase", phase.name())],
            n as f64,
        );
    }
    let name = "dnssec_warden_key_rolls_ended_total";
    let _ = writeln!(
        out,
        "# HELP {name} Key rollovers this daemon ended since it started: completed, or aborted (undone by `roll --abort`)."
    );
    let _ = writeln!(out, "# TYPE {name} counter");
    let (completed, aborted) = crate::store::rolls_ended();
    sample(out, name, &[("outcome", "completed")], completed as f64);
    sample(out, name, &[("outcome", "aborted")], aborted as f64);
    family(
        out,
        "dnssec_warden_key_rolls_due_within_7d",
        "Zones whose next [rollover] roll falls due within 7 days (overdue ones included).",
    );
    let due = zones
        .iter()
        .filter(|z| {
            z.next_roll
                .is_some_and(|at| at <= now.plus(ROLLS_DUE_WITHIN))
        })
        .count();
    sample(
        out,
        "dnssec_warden_key_rolls_due_within_7d",
        &[],
        due as f64,
    );
    family(
        out,
        "dnssec_warden_key_roll_overdue_seconds",
        "The longest any key rollover has been held past the end of the TTL hold its phase waits out (0: none).",
    );
    let overdue = zones
        .iter()
        .filter_map(|z| z.roll_hold_until)
        .filter(|until| *until < now)
        .map(|until| now.since(until).as_secs_f64())
        .fold(0.0, f64::max);
    sample(out, "dnssec_warden_key_roll_overdue_seconds", &[], overdue);
}

/// `dnssec_warden_store_write_failing`, from this process's own writes.
fn store_write_failing(out: &mut String, store: &Store) {
    family(
        out,
        "dnssec_warden_store_write_failing",
        "1 while writes to the database fail (disk full, I/O error); the daemon retries.",
    );
    let failing = store.write_failure().is_some();
    sample(
        out,
        "dnssec_warden_store_write_failing",
        &[],
        if failing { 1.0 } else { 0.0 },
    );
}

/// `dnssec_warden_zones{state}`: every state, `unobserved` last.
fn zones_per_state(out: &mut String, zones: &[ZoneHealth]) {
    family(
        out,
        "dnssec_warden_zones",
        "Zones per lifecycle state (unobserved: not yet adopted).",
    );
    for state in State::ALL.iter().map(|s| Some(*s)).chain([None]) {
        let n = zones.iter().filter(|z| z.state == state).count();
        let label = state.map(State::as_str).unwrap_or("unobserved");
        sample(out, "dnssec_warden_zones", &[("state", label)], n as f64);
    }
}

/// `dnssec_warden_provider_zones{provider}`, by account name.
fn zones_per_account(out: &mut String, zones: &[ZoneHealth]) {
    let mut accounts: std::collections::BTreeMap<&str, usize> = Default::default();
    for account in zones.iter().filter_map(|z| z.account.as_deref()) {
        *accounts.entry(account).or_default() += 1;
    }
    family(
        out,
        "dnssec_warden_provider_zones",
        "Zones per provider account, as their last look found them.",
    );
    for (account, n) in accounts {
        sample(
            out,
            "dnssec_warden_provider_zones",
            &[("provider", account)],
            n as f64,
        );
    }
}

/// `dnssec_warden_leases_held{holder,self}` (this daemon always, at 0 when it holds
/// none) and `dnssec_warden_zones_unheld`.
fn leases_held(out: &mut String, me: &str, leases: &[(String, i64)], zones: usize) {
    family(
        out,
        "dnssec_warden_leases_held",
        "Zones each daemon holds a current lease on (holder: node/pid; this daemon: self=\"1\").",
    );
    for (holder, n) in leases {
        let this = if holder == me { "1" } else { "0" };
        sample(
            out,
            "dnssec_warden_leases_held",
            &[("holder", holder), ("self", this)],
            *n as f64,
        );
    }
    if !leases.iter().any(|(h, _)| h == me) {
        sample(
            out,
            "dnssec_warden_leases_held",
            &[("holder", me), ("self", "1")],
            0.0,
        );
    }
    family(
        out,
        "dnssec_warden_zones_unheld",
        "Zones no daemon holds a current lease on.",
    );
    let held: i64 = leases.iter().map(|(_, n)| n).sum();
    sample(
        out,
        "dnssec_warden_zones_unheld",
        &[],
        (zones as i64 - held).max(0) as f64,
    );
}

/// `dnssec_warden_fenced_total{what}`: a counter of this process.
fn fenced_total(out: &mut String, fenced: Vec<(Fenced, u64)>) {
    let _ = writeln!(
        out,
        "# HELP dnssec_warden_fenced_total What this daemon's fence refused since it started: \
         writes, provider calls and notifications of zones whose lease was no longer its own."
    );
    let _ = writeln!(out, "# TYPE dnssec_warden_fenced_total counter");
    for (what, n) in fenced {
        sample(
            out,
            "dnssec_warden_fenced_total",
            &[("what", what.as_str())],
            n as f64,
        );
    }
}

/// `dnssec_warden_alerts_open{kind,severity}`: every kind; a daemon-wide one once it
/// alerts.
fn alerts_open(
    out: &mut String,
    alerts: &[(AlertKind, i64)],
    daemon: &[DaemonAlertRow],
    now: Timestamp,
) {
    family(out, "dnssec_warden_alerts_open", "Open alerts per kind.");
    for kind in AlertKind::ALL {
        let alerting = daemon
            .iter()
            .filter(|a| a.kind == *kind && a.alert_at <= now)
            .count() as i64;
        let n = alerts
            .iter()
            .find(|(k, _)| *k == *kind)
            .map_or(0, |(_, n)| *n)
            + alerting;
        let labels = [
            ("kind", kind.as_str()),
            ("severity", kind.severity().as_str()),
        ];
        sample(out, "dnssec_warden_alerts_open", &labels, n as f64);
    }
}

/// `dnssec_warden_daemon_condition{kind}`: the daemon-wide conditions holding now.
fn daemon_conditions(out: &mut String, daemon: &[DaemonAlertRow]) {
    family(
        out,
        "dnssec_warden_daemon_condition",
        "Daemon-wide conditions holding now (1 per host for a host's own), alerting or not yet.",
    );
    for kind in AlertKind::DAEMON_WIDE {
        let n = daemon.iter().filter(|a| a.kind == *kind).count();
        sample(
            out,
            "dnssec_warden_daemon_condition",
            &[("kind", kind.as_str())],
            n as f64,
        );
    }
}

/// `dnssec_warden_alert_notifications_undelivered`.
fn notifications_undelivered(out: &mut String, undelivered: i64) {
    family(
        out,
        "dnssec_warden_alert_notifications_undelivered",
        "Alert notifications (opening or resolved) some sink has not yet taken.",
    );
    sample(
        out,
        "dnssec_warden_alert_notifications_undelivered",
        &[],
        undelivered as f64,
    );
}

/// The incomplete observations: how many zones have one, and the worst zone's run of
/// them and its length.
fn observation_failing(out: &mut String, zones: &[ZoneHealth], now: Timestamp) {
    family(
        out,
        "dnssec_warden_zones_observation_failing",
        "Zones whose last observation was incomplete (provider or a parent server unknown).",
    );
    let failing = zones.iter().filter(|z| z.failures > 0).count();
    sample(
        out,
        "dnssec_warden_zones_observation_failing",
        &[],
        failing as f64,
    );

    family(
        out,
        "dnssec_warden_zones_observation_failures_max",
        "The most incomplete observations in a row of any zone (0: every last one was complete).",
    );
    let most = zones.iter().map(|z| z.failures).max().unwrap_or(0);
    sample(
        out,
        "dnssec_warden_zones_observation_failures_max",
        &[],
        most as f64,
    );

    family(
        out,
        "dnssec_warden_zones_observation_failing_seconds_max",
        "The longest any zone's observations have been incomplete (0: none is).",
    );
    let longest = zones
        .iter()
        .filter(|z| z.failures > 0)
        .filter_map(|z| z.failing_since)
        .map(|at| now.since(at).as_secs_f64())
        .fold(0.0, f64::max);
    sample(
        out,
        "dnssec_warden_zones_observation_failing_seconds_max",
        &[],
        longest,
    );
}

/// The oldest last look of any zone, and the oldest last complete one (absent while no
/// zone was ever observed).
fn observation_ages(out: &mut String, zones: &[ZoneHealth], now: Timestamp) {
    family(
        out,
        "dnssec_warden_zones_last_observation_age_seconds_max",
        "Seconds since the zone looked at longest ago was last observed, completely or not \
         (zones never observed aside).",
    );
    let oldest = zones
        .iter()
        .filter_map(|z| z.last_observed_at)
        .map(|at| now.since(at).as_secs_f64())
        .reduce(f64::max);
    if let Some(age) = oldest {
        sample(
            out,
            "dnssec_warden_zones_last_observation_age_seconds_max",
            &[],
            age,
        );
    }

    family(
        out,
        "dnssec_warden_zones_last_complete_observation_age_seconds_max",
        "Seconds since the oldest last complete observation of any zone; while a zone's \
         observations fail, at least the time they have been failing (zones never observed aside).",
    );
    let oldest = zones
        .iter()
        .filter_map(|z| {
            if z.failures > 0 {
                z.failing_since
            } else {
                z.last_observed_at
            }
        })
        .map(|at| now.since(at).as_secs_f64())
        .reduce(f64::max);
    if let Some(age) = oldest {
        sample(
            out,
            "dnssec_warden_zones_last_complete_observation_age_seconds_max",
            &[],
            age,
        );
    }
}

fn family(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: f64) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Label values escape `\`, `"` and newlines (exposition format 0.0.4).
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_rolls_are_counted_per_phase_due_and_overdue() {
        let zone = |roll_phase, roll_hold_until, next_roll| ZoneHealth {
            name: "z.".into(),
            state: Some(State::Active),
            last_observed_at: None,
            failures: 0,
            failing_since: None,
            account: None,
            roll_phase,
            roll_hold_until,
            next_roll,
        };
        let now = Timestamp(1_800_000_000_000);
        let day = std::time::Duration::from_secs(86_400);
        let zones = [
            zone(Some("publishing"), Some(now.plus(day)), None),
            zone(Some("publishing"), None, None),
            zone(Some("swapping"), Some(Timestamp(now.0 - 7_200_000)), None),
            zone(None, None, Some(now.plus(6 * day))),
            zone(None, None, Some(Timestamp(now.0 - 1))),
            zone(None, None, Some(now.plus(8 * day))),
        ];
        let mut out = String::new();
        key_rolls(&mut out, &zones, now);
        for line in [
            "dnssec_warden_key_rolls{phase=\"publishing\"} 2\n",
            "dnssec_warden_key_rolls{phase=\"swapping\"} 1\n",
            "dnssec_warden_key_rolls{phase=\"removing_old_key\"} 0\n",
            "dnssec_warden_key_rolls_due_within_7d 2\n",
            "dnssec_warden_key_roll_overdue_seconds 7200\n",
            "# TYPE dnssec_warden_key_rolls_ended_total counter\n",
        ] {
            assert!(out.contains(line), "{line}{out}");
        }
        assert!(!out.contains("phase=\"done\""), "{out}");
    }

    #[test]
    fn samples_are_well_formed() {
        let mut out = String::new();
        sample(&mut out, "m", &[("zone", "a\"b\\c\n")], 1.5);
        sample(&mut out, "n", &[], 0.0);
        assert_eq!(out, "m{zone=\"a\\\"b\\\\c\\n\"} 1.5\nn 0\n");
    }

    /// However many zones, the series are the same few: no label names a zone, and a
    /// thousand zones in every state, each failing, rolling and at an account, give as
    /// many series as one.
    #[test]
    fn no_series_is_per_zone() {
        use crate::lifecycle::rollover::Phase;
        use strum::VariantArray;
        let now = Timestamp(1_800_000_000_000);
        let zone = |i: usize| ZoneHealth {
            name: format!("z{i}.test."),
            state: State::ALL.get(i % (State::ALL.len() + 1)).copied(),
            last_observed_at: Some(Timestamp(now.0 - 1_000 * i as i64)),
            failures: i as i64 % 3,
            failing_since: Some(Timestamp(now.0 - 2_000 * i as i64)),
            account: Some(format!("account{}", i % 2)),
            roll_phase: Some(Phase::VARIANTS[i % Phase::VARIANTS.len()].name()),
            roll_hold_until: Some(Timestamp(now.0 - 500 * i as i64)),
            next_roll: Some(Timestamp(now.0 + 1_000 * i as i64)),
        };
        let series = |n: usize| {
            let zones: Vec<ZoneHealth> = (0..n).map(zone).collect();
            let mut out = String::new();
            zones_per_state(&mut out, &zones);
            zones_per_account(&mut out, &zones);
            leases_held(&mut out, "me", &[("me".into(), n as i64)], n);
            observation_failing(&mut out, &zones, now);
            observation_ages(&mut out, &zones, now);
            key_rolls(&mut out, &zones, now);
            out
        };
        let many = series(1_000);
        for line in many.lines().filter(|l| !l.starts_with('#')) {
            assert!(
                !line.contains("zone=") && !line.contains(".test."),
                "a series per zone: {line}"
            );
        }
        let count = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(count(&many), count(&series(2)), "{many}");
        assert!(
            many.contains("dnssec_warden_zones_observation_failures_max 2\n"),
            "{many}"
        );
        assert!(
            many.contains("dnssec_warden_zones_last_observation_age_seconds_max 999\n"),
            "{many}"
        );
        assert!(
            many.contains("dnssec_warden_zones_observation_failing_seconds_max 1996\n"),
            "{many}"
        );
        assert!(
            many.contains("dnssec_warden_zones_last_complete_observation_age_seconds_max 1996\n"),
            "{many}"
        );
    }
}
