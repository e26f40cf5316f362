//! `cargo bench --bench web_fleet`: the web console's fleet page over 100,000 zones
//! (`BENCH_WEB_ZONES` changes the count), against the goal of docs/benchmarks.md for the
//! fleet page.
//!
//! A SQLite store is filled with the zones in every state (a tenth waiting on the
//! operator, one in fifty with an open alert), the console is served on loopback from it
//! as the daemon serves it, a user logs in, and the pages are fetched over HTTP:
//! the first page (its snapshot read from the store: once, then served from memory for
//! `web::fleet::FRESH_FOR`), then warm: the first page, a state filter, "waiting on me",
//! a search, a page far in, and a zone's page. The floor, measured in the same run: a
//! static file over the same connection (HTTP and the session check, no fleet work).
//! Each figure is the median and the worst of its requests. It asserts nothing about time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dnssec_warden::lifecycle::{Policy, SystemClock};
use dnssec_warden::store::Store;
use dnssec_warden::web::WebSettings;
use dnssec_warden::web::auth::{SESSION_COOKIE, hash_password};
use dnssec_warden::web::server::serve;
use sqlx::Connection;

const PASSWORD: &str = "a bench password";
const STATES: [&str; 9] = [
    "disabled",
    "awaiting_delegation",
    "enabling",
    "awaiting_ds",
    "ds_observed",
    "active",
    "awaiting_ds_removal",
    "ttl_wait",
    "disabling",
];

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    if let Err(e) = runtime.block_on(bench()) {
        eprintln!("web_fleet bench failed: {e}");
        std::process::exit(1);
    }
}

fn zone(i: usize) -> String {
    format!("z{i:06}.test.")
}

/// The zones, written in one transaction: states in proportion to a real fleet (most
/// settled), the facts of a DS to enter where one is, briefs and open alerts.
async fn fill(path: &std::path::Path, zones: usize) -> Result<(), String> {
    let store = Store::open(path).await.map_err(|e| e.to_string())?;
    store.close().await;
    let mut db = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .map_err(|e| e.to_string())?;
    let mut tx = db.begin().await.map_err(|e| e.to_string())?;
    let now = dnssec_warden::lifecycle::Clock::now(&SystemClock).0;
    for i in 0..zones {
        // Most zones settle: active or disabled; a tenth wait for the DS at the registrar.
        let state = match i % 20 {
            0 | 1 => "awaiting_ds",
            2 => STATES[(i / 20) % STATES.len()],
            3..=11 => "active",
            _ => "disabled",
        };
        let intent = if state == "disabled" {
            "none"
        } else {
            "enabled"
        };
        let facts = if state == "awaiting_ds" {
            format!(
                r#"{{"ds_line":"{z} 3600 IN DS 12345 13 2 {d}","ds_to_enter":"{z} 3600 IN DS 12345 13 2 {d}","ds_announced_at":{t},"delegation":"provider","provider_ns":["ns1.provider.test.","ns2.provider.test."]}}"#,
                z = zone(i),
                d = "AB".repeat(32),
                t = now - 3_600_000
            )
        } else {
            r#"{"delegation":"provider","provider_ns":["ns1.provider.test.","ns2.provider.test."]}"#
                .to_string()
        };
        sqlx::query(
            "INSERT INTO zones (name, intent, state, state_since, next_check_at, last_observed_at, \
             facts, last_brief) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(zone(i))
        .bind(intent)
        .bind(state)
        .bind(now - (i as i64 % 1000) * 60_000)
        .bind(now + 3_600_000)
        .bind(now - 60_000)
        .bind(facts)
        .bind(r#"{"provider":{"dnssec":"on"},"parent":{"evidence":{"kind":"validated"}}}"#)
        .execute(&mut *tx)
        .await
        .map_err(|e| e.to_string())?;
        if i % 50 == 7 {
            sqlx::query(
                "INSERT INTO alerts (zone, kind, severity, message, opened_at) VALUES (?, 'ds_mismatch', 'critical', 'the parent publishes a DS no served key matches', ?)",
            )
            .bind(zone(i))
            .bind(now - 600_000)
            .execute(&mut *tx)
            .await
            .map_err(|e| e.to_string())?;
        }
    }
    tx.commit().await.map_err(|e| e.to_string())?;
    Ok(())
}

/// Median and worst of `n` fetches of `path`.
async fn timed(
    http: &reqwest::Client,
    base: &str,
    cookie: &str,
    path: &str,
    n: usize,
) -> Result<(Duration, Duration, usize), String> {
    let mut times = Vec::with_capacity(n);
    let mut bytes = 0;
    for _ in 0..n {
        let started = Instant::now();
        let response = http
            .get(format!("{base}{path}"))
            .header("cookie", cookie)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("{path}: {}", response.status()));
        }
        bytes = response.bytes().await.map_err(|e| e.to_string())?.len();
        times.push(started.elapsed());
    }
    times.sort();
    Ok((times[n / 2], times[n - 1], bytes))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

async fn bench() -> Result<(), String> {
    let zones: usize = std::env::var("BENCH_WEB_ZONES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let db = dir.path().join("state.db");
    let started = Instant::now();
    fill(&db, zones).await?;
    println!(
        "web_fleet: {zones} zones written in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let users = dir.path().join("web-users");
    let hash = hash_password(PASSWORD).map_err(|e| e.to_string())?;
    std::fs::write(&users, format!("bench:viewer:{hash}\n")).map_err(|e| e.to_string())?;
    let settings = WebSettings {
        listen: "127.0.0.1:0".parse().map_err(|_| "an address")?,
        users: Some(users),
        session_lifetime: Duration::from_secs(3600),
        ..WebSettings::default()
    };
    let store = Store::open(&db).await.map_err(|e| e.to_string())?;
    let server = serve(
        &settings,
        store,
        Arc::new(SystemClock),
        &Policy::default(),
        &[],
    )
    .await
    .map_err(|e| e.to_string())?;
    let base = format!("http://{}", server.addr);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let login = http
        .post(format!("{base}/login"))
        .form(&[("user", "bench"), ("password", PASSWORD)])
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let cookie = login
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with(SESSION_COOKIE))
        .and_then(|c| c.split(';').next())
        .ok_or("no session cookie")?
        .to_string();

    let (cold, _, _) = timed(&http, &base, &cookie, "/zones", 1).await?;
    println!(
        "web_fleet: first page, its snapshot read from the store: {}",
        ms(cold)
    );
    let (floor, floor_worst, _) = timed(&http, &base, &cookie, "/static/style.css", 50).await?;
    println!(
        "web_fleet: floor (a static file, same session): median {} worst {}",
        ms(floor),
        ms(floor_worst)
    );
    let far = format!("/zones?page={}", zones / 50 / 2);
    let mut worst_page = Duration::ZERO;
    for (label, path) in [
        ("fleet, first page", "/zones"),
        ("state=active", "/zones?state=active"),
        ("waiting on me", "/zones?on=me"),
        ("with alerts", "/zones?alert=open"),
        ("search \"z0421\"", "/zones?q=z0421"),
        ("a page far in", far.as_str()),
        ("a zone's page", "/zones/z000002.test."),
    ] {
        let (median, worst, bytes) = timed(&http, &base, &cookie, path, 30).await?;
        if path.starts_with("/zones?") || path == "/zones" {
            worst_page = worst_page.max(worst);
        }
        println!(
            "web_fleet: {label:<20} median {:>9} worst {:>9} ({} KiB) [goal: at most 100 ms]",
            ms(median),
            ms(worst),
            bytes / 1024
        );
    }
    println!(
        "web_fleet zones={zones} cold_ms={:.1} floor_ms={:.2} worst_fleet_page_ms={:.1}",
        cold.as_secs_f64() * 1000.0,
        floor.as_secs_f64() * 1000.0,
        worst_page.as_secs_f64() * 1000.0
    );
    server.stop();
    Ok(())
}
