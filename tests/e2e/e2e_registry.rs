//! The parent loop, for real: `dnssec-warden run` (the real binary) with a zone at a real
//! PowerDNS, under the lab's Knot TLD whose registry (dnssec_warden_lab::registry) scans
//! the children's CDS, takes NOTIFY(CDS) at the target `*._dsync.test.` names (RFC 9859)
//! and publishes or removes the DS by dynamic UPDATE; Unbound validates throughout. No
//! person and no registrar hook: the daemon publishes the CDS (rule 14), sends the NOTIFY,
//! and waits on the registry. Each test has its own 127.0.B.x block (77-78); see
//! test-support/src/world.rs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dnssec_warden_test_support::world::{
    Daemon, Probe, RealWorld, RegistryOptions, Tld, WorldOptions, alert_kinds, cli, status,
    wait_state,
};

const LONG: Duration = Duration::from_secs(90);

async fn world(block: u8, zone: &str, registry: RegistryOptions) -> RealWorld {
    RealWorld::start_with(
        block,
        &[zone],
        WorldOptions {
            at_powerdns: vec![zone.to_string()],
            registry: Some(registry),
            ..WorldOptions::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("the world starts: {e}"))
}

/// Appends a registrar hook that writes each call to a file, then `extra`; the file.
fn with_hook(w: &RealWorld, extra: &str) -> PathBuf {
    w.registrar_hook(extra)
        .unwrap_or_else(|e| panic!("the hook: {e}"))
}

fn history(config: &Path, zone: &str) -> String {
    cli(config, &["history", zone]).1
}

fn hook_calls(calls: &Path) -> String {
    std::fs::read_to_string(calls).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enable_and_disable_with_no_human_step_through_the_registry() {
    let zone = "loop.test.";
    // The registry scans rarely: what makes it scan in time is the daemon's NOTIFY. A
    // first DS once the CDS was seen unchanged for two seconds.
    let w = world(
        77,
        zone,
        RegistryOptions {
            bootstrap_period: Duration::from_secs(2),
            scan_interval: Duration::from_secs(4),
            notify: true,
            children: Vec::new(),
        },
    )
    .await;
    let calls = with_hook(&w, "");
    let daemon = Daemon::start(&w.config, &w.dir.path().join("daemon.log")).unwrap();
    wait_state(&w.config, zone, "disabled", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let (ok, _, err) = cli(&w.config, &["enable", zone]);
    assert!(ok, "{err}");
    wait_state(&w.config, zone, "awaiting_ds", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let waiting = status(&w.config, zone);
    assert_eq!(
        waiting["parent_path"]["path"]["kind"], "notify",
        "the DSYNC record's way: {waiting}"
    );
    let registry = w.registry.as_ref().unwrap();
    let seen = wait_state(&w.config, zone, "active", LONG)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{e}\n{}\n{}\n{}",
                history(&w.config, zone),
                registry.story(zone),
                daemon.log()
            )
        });
    // The DS was seen at the registry before the zone went active: the audit trail says
    // so (the states `status` showed are polled, and `ds_observed` may pass between two).
    let story = history(&w.config, zone);
    assert!(
        story.contains("awaiting_ds -> ds_observed") && story.contains("ds_observed -> active"),
        "{seen:?}\n{story}"
    );
    assert!(
        story.contains("the DS goes to the registry of test. by the CDS"),
        "{story}"
    );
    assert!(
        story.contains("NOTIFY(CDS) for the key") && story.contains("acknowledged"),
        "{story}"
    );
    assert!(registry.notifies() >= 1, "{}", registry.story(zone));
    // While it waited, status named the registry, not the registrar.
    assert!(
        waiting["waiting_on"] == "registry" || waiting["state"] != "awaiting_ds",
        "{waiting}"
    );
    let (rcode, ad) = w.resolve_fresh(zone).await.unwrap();
    assert_eq!((rcode.as_str(), ad), ("No Error", true), "validated");

    // Off again, a resolver probing all the way: the CDS delete request, the registry
    // removes the DS, its TTL waited out, then signing off. Never SERVFAIL.
    let probe = Probe::start(&w, zone);
    let (ok, _, err) = cli(&w.config, &["disable", zone]);
    assert!(ok, "{err}");
    let seen = wait_state(&w.config, zone, "disabled", LONG)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{e}\n{}\n{}\n{}",
                history(&w.config, zone),
                registry.story(zone),
                daemon.log()
            )
        });
    assert!(seen.contains(&"ttl_wait".to_string()), "{seen:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (bogus, answers) = probe.finish().await;
    assert_eq!(
        bogus,
        0,
        "validation failures: {answers:?}\n{}",
        history(&w.config, zone)
    );
    let story = history(&w.config, zone);
    assert!(
        story.contains("the DS removal goes to the registry of test. by the CDS delete request"),
        "{story}"
    );
    assert!(
        registry.story(zone).contains("removed the DS"),
        "{}",
        registry.story(zone)
    );
    let (rcode, ad) = w.resolve_fresh(zone).await.unwrap();
    assert_eq!((rcode.as_str(), ad), ("No Error", false), "insecure again");

    // Nobody was asked at the registrar, and nothing was alerted.
    assert_eq!(hook_calls(&calls), "", "the registrar hook never ran");
    assert!(!story.contains("ACTION NEEDED"), "{story}");
    assert!(alert_kinds(&w.config, zone).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_that_does_not_act_is_said_and_the_registrar_asked() {
    let zone = "late.test.";
    let mut w = world(78, zone, RegistryOptions::default()).await;
    // The registry is down: its DSYNC record still names it, its scans never come.
    drop(w.registry.take());
    let calls = with_hook(&w, "[parents.\"test.\"]\nscan_period = \"3s\"\n");
    let daemon = Daemon::start(&w.config, &w.dir.path().join("daemon.log")).unwrap();
    wait_state(&w.config, zone, "disabled", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let (ok, _, err) = cli(&w.config, &["enable", zone]);
    assert!(ok, "{err}");
    wait_state(&w.config, zone, "awaiting_ds", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    // Past the registry's period (3 s + the 1 s margin): said, and the hook runs.
    let start = Instant::now();
    let mut alerted = false;
    while start.elapsed() < LONG {
        if alert_kinds(&w.config, zone).contains(&"ds_scan_overdue".to_string())
            && hook_calls(&calls).contains("publish")
        {
            alerted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let story = history(&w.config, zone);
    assert!(
        alerted,
        "{}\n{story}\n{}",
        status(&w.config, zone),
        daemon.log()
    );
    assert!(
        story.contains("has not acted on the child's CDS"),
        "{story}"
    );
    assert!(
        story.contains("NOTIFY(CDS)") && !story.contains(": acknowledged"),
        "a NOTIFY to a registry that is down is not acknowledged: {story}"
    );
    assert_eq!(status(&w.config, zone)["waiting_on"], "registrar");
    // The registrar (the test) enters the DS the hook was given: active, alert resolved.
    let ds = w.pdns_ds(zone).unwrap();
    assert!(
        hook_calls(&calls)
            .to_ascii_uppercase()
            .contains(&ds.to_ascii_uppercase()),
        "{} {ds}",
        hook_calls(&calls)
    );
    w.publish_ds(zone, Tld::Both, &ds).unwrap();
    wait_state(&w.config, zone, "active", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    assert!(alert_kinds(&w.config, zone).is_empty());
}
