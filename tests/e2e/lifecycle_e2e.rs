//! The whole lifecycle through the real binary: `dnssec-warden run` against the provider
//! simulator and the lab DNS hierarchy, the test playing the registrar, with compressed
//! timings. Also: a second daemon is refused; SIGHUP with a broken file keeps running;
//! SIGTERM exits cleanly.

use std::time::{Duration, Instant, SystemTime};

use dnssec_warden_lab::dns::TldServers;
use dnssec_warden_test_support::daemon::{Daemon, LabWorld, bin, cli, status, wait_state};
use serde_json::Value;

async fn world(zone: &str) -> LabWorld {
    LabWorld::start(zone).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enable_to_active_then_disable_to_disabled() {
    let zone = "shop.test.";
    let w = world(zone).await;
    let mut daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    let long = Duration::from_secs(40);

    wait_state(&w.config, zone, "disabled", long, &daemon).await;
    let (ok, out, err) = cli(&w.config, &["enable", zone]);
    assert!(ok, "{err}");
    assert!(out.contains("intent enabled"), "{out}");

    wait_state(&w.config, zone, "awaiting_ds", long, &daemon).await;
    // The DS the operator is told is the one of the key the name servers serve.
    let key = w
        .sim
        .handle()
        .dnskey(zone)
        .expect("DNSSEC on at the provider");
    let told = status(&w.config, zone)["ds"].as_str().unwrap().to_string();
    assert!(
        told.contains(&format!(" DS {} 13 2 ", key.key_tag())),
        "{told}"
    );
    // The registrar publishes on one TLD server, later on the other.
    w.lab.publish_ds(zone, TldServers::A, &key).unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        status(&w.config, zone)["state"],
        "awaiting_ds",
        "one server is not enough"
    );
    w.lab.publish_ds(zone, TldServers::Both, &key).unwrap();
    wait_state(&w.config, zone, "active", long, &daemon).await;

    let (ok, out, err) = cli(&w.config, &["disable", zone]);
    assert!(ok, "{err}");
    assert!(out.contains("intent disabled"), "{out}");
    wait_state(&w.config, zone, "awaiting_ds_removal", long, &daemon).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        w.sim.handle().dnssec_enabled(zone),
        "still signed while the DS is published"
    );
    w.lab.remove_ds(zone, TldServers::Both).unwrap();
    let removed_at = SystemTime::now();
    wait_state(&w.config, zone, "disabled", long, &daemon).await;

    // The provider's log: on once, off once, and off only after the DS TTL (2 s) had passed.
    let switches: Vec<_> = w
        .sim
        .handle()
        .calls()
        .into_iter()
        .filter(|c| c.path.ends_with("/dnssec") && c.status == 200)
        .collect();
    assert_eq!(switches.len(), 2, "{switches:?}");
    assert!(switches[0].is_dnssec_on(zone));
    assert!(switches[1].is_dnssec_off(zone));
    let waited = switches[1]
        .at
        .duration_since(removed_at)
        .unwrap_or_default();
    assert!(
        waited >= Duration::from_secs(2),
        "switched off {waited:?} after the removal"
    );

    // The audit trail reads as a story.
    let (ok, story, _) = cli(&w.config, &["history", zone]);
    assert!(ok);
    for line in [
        "operator: operator asked to enable DNSSEC",
        "disabled -> enabling",
        "enabling -> awaiting_ds",
        "awaiting_ds -> ds_observed",
        "ds_observed -> active",
        "active -> awaiting_ds_removal",
        "awaiting_ds_removal -> ttl_wait",
        "ttl_wait -> disabling",
        "disabling -> disabled",
        "DNSSEC switched off",
    ] {
        assert!(story.contains(line), "history lacks {line:?}:\n{story}");
    }
    let (ok, json, _) = cli(&w.config, &["history", zone, "--json"]);
    assert!(ok);
    let events: Value = serde_json::from_str(&json).unwrap();
    assert!(events["events"].as_array().unwrap().len() >= 10);

    daemon.signal("TERM");
    let status = daemon
        .wait_exit(Duration::from_secs(10))
        .expect("exits on SIGTERM");
    assert!(status.success(), "{}", daemon.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_daemon_per_database_and_reload_keeps_a_good_config() {
    let zone = "lock.test.";
    let w = world(zone).await;
    let mut first = Daemon::start(&w.config, w.dir.path().join("first.log"));
    wait_state(&w.config, zone, "disabled", Duration::from_secs(30), &first).await;

    let second = bin()
        .args(["run", "--config"])
        .arg(&w.config)
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("already running"),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );

    // A broken file on SIGHUP: reported, the daemon keeps going with what it had.
    let good = std::fs::read_to_string(&w.config).unwrap();
    std::fs::write(
        &w.config,
        format!("{good}\n[timing]\npoll_wating = \"1s\"\n"),
    )
    .unwrap();
    first.signal("HUP");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(first.child.try_wait().unwrap().is_none(), "still running");
    assert!(first.log().contains("reload failed"), "{}", first.log());
    std::fs::write(&w.config, &good).unwrap();
    first.signal("HUP");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        first.log().contains("configuration reloaded"),
        "{}",
        first.log()
    );
    // And it still acts on intents.
    cli(&w.config, &["enable", zone]);
    wait_state(
        &w.config,
        zone,
        "awaiting_ds",
        Duration::from_secs(40),
        &first,
    )
    .await;

    first.signal("TERM");
    let status = first.wait_exit(Duration::from_secs(10)).expect("exits");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_hears_ready_status_watchdog_and_stopping() {
    let zone = "unit.test.";
    let w = world(zone).await;
    let socket_path = w.dir.path().join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut daemon = Daemon::start_with_env(
        &w.config,
        w.dir.path().join("daemon.log"),
        &[
            ("NOTIFY_SOCKET", socket_path.display().to_string()),
            ("WATCHDOG_USEC", "2000000".to_string()),
        ],
    );
    let mut heard: Vec<String> = Vec::new();
    let read = |heard: &mut Vec<String>| {
        let mut buf = [0u8; 512];
        if let Ok(n) = socket.recv(&mut buf) {
            heard.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    };
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until
        && !(heard.iter().any(|m| m == "READY=1")
            && heard.iter().any(|m| m == "WATCHDOG=1")
            && heard
                .iter()
                .any(|m| m.starts_with("STATUS=1 zone: 1 disabled")))
    {
        read(&mut heard);
    }
    assert!(
        heard.iter().any(|m| m == "READY=1"),
        "{heard:?}\n{}",
        daemon.log()
    );
    assert!(heard.iter().any(|m| m == "WATCHDOG=1"), "{heard:?}");
    assert!(
        heard
            .iter()
            .any(|m| m.starts_with("STATUS=1 zone: 1 disabled")),
        "{heard:?}"
    );
    daemon.signal("TERM");
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until && !heard.iter().any(|m| m == "STOPPING=1") {
        read(&mut heard);
    }
    assert!(heard.iter().any(|m| m == "STOPPING=1"), "{heard:?}");
    assert!(daemon.wait_exit(Duration::from_secs(10)).is_some());
}

/// The open alert of `kind` on the zone, its message.
fn alert_message(config: &std::path::Path, zone: &str, kind: &str) -> Option<String> {
    status(config, zone)["alerts"].as_array().and_then(|a| {
        a.iter()
            .find(|x| x["kind"] == kind)
            .and_then(|x| x["message"].as_str().map(str::to_string))
    })
}

async fn wait_alert(
    config: &std::path::Path,
    zone: &str,
    kind: &str,
    open: bool,
    daemon: &Daemon,
) -> Option<String> {
    let start = Instant::now();
    loop {
        let said = alert_message(config, zone, kind);
        if said.is_some() == open {
            return said;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "{kind} never {}\n{}\n{}",
            if open { "opened" } else { "resolved" },
            cli(config, &["history", zone]).1,
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Behind the daemon's back the zone's name servers publish a CDS for a key nobody serves
/// (a registry acting on it would break validation), then a different one at each
/// server (a registry acts on neither, RFC 9975): each is said, naming the key or the
/// server, nothing moves, and both clear once the records go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_cds_and_a_cds_that_differs_between_servers_are_said() {
    use dnssec_warden_lab::dns::{PROVIDER_1, PROVIDER_2};
    let zone = "cds.test.";
    let mut w = world(zone).await;
    // Every look a full one (the signals are read at full looks only).
    w.rest = w.rest.replacen(
        "poll_active = \"2s\"\n",
        "poll_active = \"2s\"\nfull_look_every = \"2s\"\n",
        1,
    );
    w.write_config(w.sim.base_url().as_str());
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    let long = Duration::from_secs(40);
    wait_state(&w.config, zone, "disabled", long, &daemon).await;
    assert!(cli(&w.config, &["enable", zone]).0);
    wait_state(&w.config, zone, "awaiting_ds", long, &daemon).await;
    let key = w
        .sim
        .handle()
        .dnskey(zone)
        .expect("DNSSEC on at the provider");
    w.lab.publish_ds(zone, TldServers::Both, &key).unwrap();
    wait_state(&w.config, zone, "active", long, &daemon).await;
    let ds_before = w.lab.ds(zone);
    let stranger = |tag: u16| {
        let mut ds = ds_before[0].1[0].clone();
        ds.key_tag = tag;
        ds.digest = vec![0x42; 32];
        vec![ds]
    };

    for server in [PROVIDER_1, PROVIDER_2] {
        w.lab
            .set_cds_at(zone, server.into(), stranger(4242))
            .unwrap();
    }
    let said = wait_alert(&w.config, zone, "cds_unexpected", true, &daemon)
        .await
        .unwrap_or_default();
    assert!(said.contains("4242"), "{said}");

    w.lab
        .set_cds_at(zone, PROVIDER_2.into(), stranger(4343))
        .unwrap();
    let said = wait_alert(&w.config, zone, "cds_inconsistent", true, &daemon)
        .await
        .unwrap_or_default();
    assert!(
        said.contains(&PROVIDER_1.to_string()) || said.contains(&PROVIDER_2.to_string()),
        "names a server: {said}"
    );
    assert_eq!(status(&w.config, zone)["state"], "active", "nothing moves");
    assert_eq!(w.lab.ds(zone), ds_before, "the DS stays");

    for server in [PROVIDER_1, PROVIDER_2] {
        w.lab.set_cds_at(zone, server.into(), Vec::new()).unwrap();
    }
    wait_alert(&w.config, zone, "cds_inconsistent", false, &daemon).await;
    wait_alert(&w.config, zone, "cds_unexpected", false, &daemon).await;
    assert_eq!(status(&w.config, zone)["state"], "active");
}
