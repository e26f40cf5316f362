//! The Prometheus endpoint, scraped over loopback HTTP while the engine walks a zone.

use std::sync::Arc;
use std::time::Duration;

use dnssec_warden::dns::{ValidationProbe, ValidationVerdict};
use dnssec_warden::lifecycle::{Clock, Intent, State};
use dnssec_warden::metrics;
use dnssec_warden_test_support::on_both_backends;
use dnssec_warden_test_support::rig::{Rig, ZONE};

async fn scrape(addr: std::net::SocketAddr) -> String {
    let response = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .unwrap();
    assert!(response.status().is_success());
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    response.text().await.unwrap()
}

/// The value of the sample `name{labels}` (labels exactly as rendered).
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{series} missing in:\n{text}"))
        .parse()
        .unwrap()
}

/// No series names a zone (a label per zone is a series per zone: a million of them for
/// a million zones): neither a `zone` label nor a zone's name anywhere in a sample.
fn no_zone_in(text: &str) {
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(
            !line.contains("zone=") && !line.contains(ZONE) && !line.contains("other.test."),
            "a series per zone: {line}"
        );
    }
}

async fn metrics_show_states_alerts_failures_and_ages() {
    let mut rig = Rig::new(2, 1).await;
    // A second zone, not due for a year: it stays unobserved.
    let later = rig
        .world
        .clock
        .now()
        .plus(Duration::from_secs(365 * 86_400));
    rig.store.ensure_zone("other.test.", later).await.unwrap();
    let server = metrics::serve(
        "127.0.0.1:0".parse().unwrap(),
        rig.store.clone(),
        Arc::new(rig.world.clock.clone()),
    )
    .await
    .unwrap();

    let text = scrape(server.addr).await;
    assert_eq!(
        value(&text, "dnssec_warden_zones{state=\"unobserved\"}"),
        2.0
    );
    assert_eq!(value(&text, "dnssec_warden_zones{state=\"active\"}"), 0.0);
    for kind in dnssec_warden::lifecycle::AlertKind::ALL {
        let series = format!(
            "dnssec_warden_alerts_open{{kind=\"{kind}\",severity=\"{}\"}}",
            kind.severity().as_str()
        );
        assert_eq!(value(&text, &series), 0.0);
    }
    assert!(text.contains("# TYPE dnssec_warden_zones gauge"));
    no_zone_in(&text);

    // Walk the zone to active.
    rig.run_for(1).await;
    let now = rig.world.clock.now();
    rig.store
        .set_intent(ZONE, Intent::Enabled, false, "enable", now)
        .await
        .unwrap();
    assert!(rig.run_until(State::AwaitingDs, 30).await);
    rig.world.publish_ds(0, 3600);
    rig.world.publish_ds(1, 3600);
    assert!(rig.run_until(State::Active, 10).await);
    rig.run_for(1).await;
    let observed = rig
        .store
        .zone(ZONE)
        .await
        .unwrap()
        .unwrap()
        .last_observed_at
        .unwrap();
    rig.world.clock.set(observed.plus(Duration::from_secs(90)));

    let text = scrape(server.addr).await;
    assert_eq!(value(&text, "dnssec_warden_zones{state=\"active\"}"), 1.0);
    assert_eq!(
        value(&text, "dnssec_warden_zones{state=\"unobserved\"}"),
        1.0
    );
    no_zone_in(&text);
    // The one observed zone is the oldest; the one never observed is aside.
    let age = "dnssec_warden_zones_last_observation_age_seconds_max";
    assert_eq!(value(&text, age), 90.0);
    let complete = "dnssec_warden_zones_last_complete_observation_age_seconds_max";
    assert_eq!(value(&text, complete), 90.0);
    assert_eq!(value(&text, "dnssec_warden_zones_observation_failing"), 0.0);

    // A bogus validation opens an alert; the provider failing shows as observation errors.
    rig.world.lock().validation = vec![ValidationProbe {
        source: "127.0.0.53".into(),
        verdict: ValidationVerdict::Bogus,
        detail: "test".into(),
    }];
    rig.run_for(1).await;
    rig.world.lock().provider_failures = 1_000;
    // Past the zone listing's freshness (poll_active / 4): a settled zone then asks the
    // failing provider itself, at its next look and at every retry after it.
    let now = rig.world.clock.now();
    rig.world.clock.set(now.plus(Duration::from_secs(20 * 60)));
    rig.run_for(3).await;
    let text = scrape(server.addr).await;
    let open = "dnssec_warden_alerts_open{kind=\"validation_failed\",severity=\"critical\"}";
    assert_eq!(value(&text, open), 1.0);
    assert_eq!(value(&text, "dnssec_warden_zones_observation_failing"), 1.0);
    let failures = "dnssec_warden_zones_observation_failures_max";
    assert!(value(&text, failures) >= 2.0, "{text}");
    let failing = "dnssec_warden_zones_observation_failing_seconds_max";
    assert!(value(&text, failing) > 0.0, "{text}");
    no_zone_in(&text);
    // No sinks configured: the log took every notification.
    assert_eq!(
        value(&text, "dnssec_warden_alert_notifications_undelivered"),
        0.0
    );

    server.stop();
}

#[tokio::test]
async fn a_taken_port_fails_at_once() {
    let rig = Rig::new(1, 1).await;
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = metrics::serve(
        taken.local_addr().unwrap(),
        rig.store.clone(),
        Arc::new(rig.world.clock.clone()),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("cannot listen"), "{err}");
}

/// Connections the server side holds open on `port`: this process's socket descriptors
/// that are established TCP connections with that local port (counted from /proc, so
/// that descriptors other tests of this binary open meanwhile do not count).
fn server_connections(port: u16) -> usize {
    let ours: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is HEXIP:HEXPORT, st 01 is ESTABLISHED, the inode is field 9.
            let local_port = f
                .get(1)
                .and_then(|a| a.rsplit_once(':'))
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            local_port == Some(port)
                && f.get(3) == Some(&"01")
                && f.get(9).is_some_and(|inode| ours.contains(*inode))
        })
        .count()
}

/// Half-open connections (connected, nothing sent) are capped and timed out: they cannot
/// exhaust the daemon's file descriptors, and scrapes work again once they are gone.
#[tokio::test]
async fn half_open_connections_are_capped_and_timed_out() {
    let rig = Rig::new(1, 1).await;
    let limits = metrics::Limits {
        max_connections: 8,
        header_timeout: Duration::from_millis(300),
        connection_timeout: Duration::from_secs(2),
    };
    let server = metrics::serve_with(
        "127.0.0.1:0".parse().unwrap(),
        rig.store.clone(),
        Arc::new(rig.world.clock.clone()),
        limits,
    )
    .await
    .unwrap();
    let mut idle = Vec::new();
    for _ in 0..200 {
        idle.push(tokio::net::TcpStream::connect(server.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // What the server kept of the 200 idle clients: at most its cap.
    let held = server_connections(server.addr.port());
    assert!(
        (1..=8).contains(&held),
        "the server holds {held} connections for idle clients"
    );
    // The idle ones are dropped after the header timeout; a real scrape then works.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let text = scrape(server.addr).await;
    assert!(text.contains("dnssec_warden_zones"));
    drop(idle);
}

/// The rolls `[rollover]`'s cap counts: only zones whose facts hold a roll, each with the
/// account of its last look, on both backends (the rows are found by a text match on the
/// facts first).
async fn rolling_zones_are_the_zones_in_a_roll() {
    use dnssec_warden::lifecycle::rollover::{KeyKind, ListedKey, Roll};
    use dnssec_warden::lifecycle::{Decision, Facts, Timestamp};
    use dnssec_warden::store::ObservationText;
    let (store, _cluster) = dnssec_warden_test_support::rig::new_store().await;
    let t = Timestamp(1_000);
    for zone in ["a.test.", "b.test."] {
        store.ensure_zone(zone, t).await.unwrap();
        let read = store.zone_for_step(zone).await.unwrap().unwrap();
        let active = Decision {
            state: Some(State::Active),
            facts: Facts::default(),
            effects: vec![],
            alerts: vec![],
            notes: vec![],
            wake_at: t,
        };
        let brief = ObservationText::from_whole(r#"{"provider":{"account":"pdns"}}"#);
        assert!(store.commit_step(&read, &active, &brief, t).await.unwrap());
        store
            .set_intent(zone, Intent::Enabled, false, "test", t)
            .await
            .unwrap();
    }
    assert_eq!(store.rolling_zones().await.unwrap(), vec![]);
    let listed = [ListedKey {
        id: "1".into(),
        dnskey: dnssec_warden::dnssec::Dnskey::parse_text(
            "257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==",
        )
        .unwrap(),
        active: true,
        published: true,
    }];
    let roll = Roll::plan(&listed, KeyKind::Csk, None, t).unwrap();
    store
        .declare_roll("b.test.", Some(&roll), "test", t)
        .await
        .unwrap();
    let rolling = store.rolling_zones().await.unwrap();
    assert_eq!(rolling.len(), 1, "{rolling:?}");
    assert_eq!(
        rolling[0],
        ("b.test.".to_string(), Some("pdns".to_string()))
    );
}

on_both_backends!(
    metrics_show_states_alerts_failures_and_ages,
    rolling_zones_are_the_zones_in_a_roll,
);
