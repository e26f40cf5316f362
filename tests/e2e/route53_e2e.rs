//! The whole lifecycle through the real binary at the Route 53 simulator, every request
//! SigV4-signed and checked: the lab's name servers sign the zone with its `ACTIVE`
//! key-signing key once Route 53's change is `INSYNC`, the lab's Unbound validates the
//! chain from the lab root, the test plays the registrar, timings compressed. Its port is
//! its own.

use std::time::{Duration, SystemTime};

use dnssec_warden::dns::wire::{build_query, parse_name};
use dnssec_warden::dns::{NetTransport, Transport};
use dnssec_warden_lab::dns::{KeySource, LabDns, LabResolver, NAME_SERVERS, TldServers};
use dnssec_warden_lab::route53_sim::{Route53Options, Route53Sim};
use dnssec_warden_test_support::daemon::{Daemon, cli, status, wait_state};
use hickory_proto::rr::RecordType;

const KEY_ID: &str = "AKIAE2EROUTE53000001";
const SECRET: &str = "e2e/route53/secret/access/key/0123456789";
const ARN: &str = "arn:aws:kms:us-east-1:111122223333:key/e2e-route53";

/// Unbound's `(rcode, AD)` for the zone's SOA (`No Error`: answered, not bogus).
async fn validated(resolver: std::net::SocketAddr, zone: &str) -> (String, bool) {
    let transport = NetTransport::new(Duration::from_secs(2));
    let query = build_query(&parse_name(zone).unwrap(), RecordType::SOA, true);
    match transport.exchange(resolver, &query).await {
        Ok(m) => (
            m.metadata.response_code.to_string(),
            m.metadata.authentic_data,
        ),
        Err(e) => (format!("no answer: {e}"), false),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enable_to_active_then_disable_at_route53_validated_by_unbound() {
    let zone = "r53.test.";
    let sim = Route53Sim::start(
        "127.0.0.1:0".parse().unwrap(),
        Route53Options {
            credentials: vec![(KEY_ID.into(), SECRET.into())],
            change_delay: Duration::from_secs(1),
            // Route 53's own limit: the daemon keeps below it.
            rate_limit: Some(5),
            name_servers: NAME_SERVERS.map(String::from).to_vec(),
            record_ttl: 2,
            ..Route53Options::default()
        },
    )
    .await
    .unwrap();
    let h = sim.handle();
    h.add_zone(zone);
    h.add_kms_key(ARN);
    let lab = LabDns::start().await.unwrap();
    lab.add_child(zone, KeySource::route53(h.clone())).unwrap();
    lab.set_ds_ttl(zone, 2).unwrap();
    lab.set_zone_ttl(zone, 1).unwrap();
    lab.set_dnskey_ttl(zone, 1).unwrap();
    let resolver = LabResolver::start(&lab).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("r53-secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let config = dir.path().join("config.toml");
    let dns = lab.config_section().replace(
        "validating_resolvers = []",
        &format!("validating_resolvers = [\"{}\"]", resolver.addr()),
    );
    std::fs::write(
        &config,
        format!(
            "[providers.r53]\nkind = \"route53\"\nbase_url = \"{}\"\naccess_key_id = \"{KEY_ID}\"\n\
             secret_access_key_file = {:?}\nkms_key_arn = \"{ARN}\"\nchange_timeout = \"20s\"\n\
             request_timeout = \"2s\"\nmax_attempts = 3\nretry_budget = \"6s\"\n\
             [database]\npath = {:?}\n{dns}\
             [timing]\npoll_waiting = \"300ms\"\npoll_active = \"2s\"\npropagation_margin = \"1s\"\n\
             ds_overdue_after = \"1h\"\nds_removal_overdue_after = \"1h\"\nretry_base = \"200ms\"\nassumed_ds_ttl = \"2s\"\n\
             [zones]\nnames = [\"{zone}\"]\n",
            sim.base_url(),
            secret_file,
            dir.path().join("state.db"),
        ),
    )
    .unwrap();
    let (ok, out, err) = cli(&config, &["check-config"]);
    assert!(ok, "{out}\n{err}");
    let daemon = Daemon::start(&config, dir.path().join("daemon.log"));
    let long = Duration::from_secs(60);

    wait_state(&config, zone, "disabled", long, &daemon).await;
    assert_eq!(
        validated(resolver.addr(), zone).await,
        ("No Error".into(), false)
    );
    let (ok, out, err) = cli(&config, &["enable", zone]);
    assert!(ok, "{err}");
    assert!(out.contains("intent enabled"), "{out}");
    wait_state(&config, zone, "awaiting_ds", long, &daemon).await;
    let key = h.dnskey(zone).expect("the key-signing key Route 53 made");
    let told = status(&config, zone)["ds"].as_str().unwrap().to_string();
    assert!(
        told.contains(&format!(" DS {} 13 2 ", key.key_tag())),
        "{told}"
    );
    lab.publish_ds(zone, TldServers::Both, &key).unwrap();
    wait_state(&config, zone, "active", long, &daemon).await;
    assert_eq!(
        validated(resolver.addr(), zone).await,
        ("No Error".into(), true),
        "Unbound validates the chain"
    );

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
    assert_eq!(
        h.dnssec(zone).unwrap(),
        ("NOT_SIGNING".to_string(), vec![]),
        "the key-signing key deleted"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (rcode, _) = validated(resolver.addr(), zone).await;
    assert_eq!(rcode, "No Error", "never bogus");

    // On once; off as Disable, Deactivate, Delete, only after the DS TTL had passed.
    let calls: Vec<_> = h
        .calls()
        .into_iter()
        .filter(|c| (200..300).contains(&c.status))
        .collect();
    let what: Vec<(String, String)> = calls
        .iter()
        .map(|c| {
            let tail = c.path.rsplit('/').next().unwrap_or_default().to_string();
            (c.method.clone(), tail)
        })
        .collect();
    assert_eq!(
        what,
        vec![
            ("POST".into(), "keysigningkey".into()),
            ("POST".into(), "enable-dnssec".into()),
            ("POST".into(), "disable-dnssec".into()),
            ("POST".into(), "deactivate".into()),
            ("DELETE".into(), "dnssec_warden_ksk".into()),
        ],
        "{}",
        daemon.log()
    );
    for off in &calls[2..] {
        let waited = off.at.duration_since(removed_at).unwrap_or_default();
        assert!(
            waited >= Duration::from_secs(2),
            "{} {waited:?} after the removal",
            off.path
        );
    }
    assert_eq!(h.throttled(), 0, "the daemon keeps below the rate");
    assert!(h.auth_refusals().is_empty(), "{:?}", h.auth_refusals());
    assert!(!daemon.log().contains(SECRET), "the secret is never logged");
    let (ok, story, _) = cli(&config, &["history", zone]);
    assert!(ok);
    assert!(story.contains("disabling -> disabled"), "{story}");
}
