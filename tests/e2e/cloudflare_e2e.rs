//! The whole lifecycle through the real binary at the Cloudflare simulator: the lab's
//! name servers sign the zone with Cloudflare's one key while the simulator says it is
//! signed, the test plays the registrar, timings compressed. Its port is its own.

use std::time::{Duration, SystemTime};

use dnssec_warden_lab::cloudflare_sim::{CloudflareOptions, CloudflareSim};
use dnssec_warden_lab::dns::{KeySource, LabDns, NAME_SERVERS, TldServers};
use dnssec_warden_test_support::daemon::{Daemon, cli, status, wait_state};

const TOKEN: &str = "e2e-cloudflare-token-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enable_to_active_then_disable_to_disabled_at_cloudflare() {
    let zone = "cf.test.";
    let sim = CloudflareSim::start(
        "127.0.0.1:0".parse().unwrap(),
        CloudflareOptions {
            tokens: vec![TOKEN.into()],
            status_delay: Duration::from_secs(1),
            rate_limit: None,
            name_servers: NAME_SERVERS.map(String::from).to_vec(),
            ds_ttl: 2,
            // 1 would be Cloudflare's automatic 300 s, and the enabling hold as long.
            record_ttl: 2,
            ..CloudflareOptions::default()
        },
    )
    .await
    .unwrap();
    let h = sim.handle();
    h.add_zone(zone).unwrap();
    let lab = LabDns::start().await.unwrap();
    lab.add_child(zone, KeySource::cloudflare(h.clone()))
        .unwrap();
    lab.set_ds_ttl(zone, 2).unwrap();
    lab.set_zone_ttl(zone, 1).unwrap();
    lab.set_dnskey_ttl(zone, 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("cf-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[providers.cf]\nkind = \"cloudflare\"\nbase_url = \"{}\"\napi_token_file = {:?}\n\
             request_timeout = \"2s\"\nmax_attempts = 2\nretry_budget = \"4s\"\n\
             [database]\npath = {:?}\n{}\
             [timing]\npoll_waiting = \"300ms\"\npoll_active = \"2s\"\npropagation_margin = \"1s\"\n\
             ds_overdue_after = \"1h\"\nds_removal_overdue_after = \"1h\"\nretry_base = \"200ms\"\nassumed_ds_ttl = \"2s\"\n\
             [zones]\nnames = [\"{zone}\"]\n",
            sim.base_url(),
            token_file,
            dir.path().join("state.db"),
            lab.config_section(),
        ),
    )
    .unwrap();
    let daemon = Daemon::start(&config, dir.path().join("daemon.log"));
    let long = Duration::from_secs(40);

    wait_state(&config, zone, "disabled", long, &daemon).await;
    let (ok, out, err) = cli(&config, &["enable", zone]);
    assert!(ok, "{err}");
    assert!(out.contains("intent enabled"), "{out}");
    wait_state(&config, zone, "awaiting_ds", long, &daemon).await;
    let key = h.dnskey();
    let told = status(&config, zone)["ds"].as_str().unwrap().to_string();
    assert!(
        told.contains(&format!(" DS {} 13 2 ", key.key_tag())),
        "{told}"
    );
    lab.publish_ds(zone, TldServers::Both, &key).unwrap();
    wait_state(&config, zone, "active", long, &daemon).await;

    let (ok, out, err) = cli(&config, &["disable", zone]);
    assert!(ok, "{err}");
    assert!(out.contains("intent disabled"), "{out}");
    wait_state(&config, zone, "awaiting_ds_removal", long, &daemon).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        h.signing_key(zone).is_some(),
        "still signed while the DS is published"
    );
    lab.remove_ds(zone, TldServers::Both).unwrap();
    let removed_at = SystemTime::now();
    wait_state(&config, zone, "disabled", long, &daemon).await;
    assert!(h.signing_key(zone).is_none(), "unsigned at the end");

    // On once; off as PATCH disabled, then DELETE, only after the DS TTL had passed.
    let calls: Vec<_> = h
        .calls()
        .into_iter()
        .filter(|c| (200..300).contains(&c.status))
        .collect();
    let what: Vec<(String, String)> = calls
        .iter()
        .map(|c| (c.method.clone(), c.body.to_string()))
        .collect();
    assert_eq!(
        what,
        vec![
            ("PATCH".into(), r#"{"status":"active"}"#.into()),
            ("PATCH".into(), r#"{"status":"disabled"}"#.into()),
            ("DELETE".into(), r#""""#.into()),
        ],
        "{}",
        daemon.log()
    );
    for off in &calls[1..] {
        let waited = off.at.duration_since(removed_at).unwrap_or_default();
        assert!(
            waited >= Duration::from_secs(2),
            "{} {waited:?} after the removal",
            off.method
        );
    }
    let (ok, story, _) = cli(&config, &["history", zone]);
    assert!(ok);
    assert!(story.contains("ttl_wait -> disabling"), "{story}");
    assert!(story.contains("disabling -> disabled"), "{story}");
}
