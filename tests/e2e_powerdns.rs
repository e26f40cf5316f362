//! A second provider, for real: `dnssec-warden run` (the real binary) with two provider
//! accounts, the simulated Gcore API and a real PowerDNS Authoritative (Debian's
//! `pdns-server`, sqlite3 backend) through its HTTP API, under the lab's Knot TLD and a
//! validating Unbound. The test is the registrar. Each test has its own 127.0.B.x block;
//! see test-support/src/world.rs.

use std::path::Path;
use std::time::Duration;

use dnssec_warden_test_support::world::{
    Daemon, Probe, RealWorld, Tld, WorldOptions, alert_kinds, cli, state, status, wait_state,
};

const LONG: Duration = Duration::from_secs(60);

async fn world(block: u8, zones: &[&str], at_powerdns: &[&str]) -> RealWorld {
    RealWorld::start_with(
        block,
        zones,
        WorldOptions {
            at_powerdns: at_powerdns.iter().map(|z| z.to_string()).collect(),
            ..WorldOptions::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("the world starts: {e}"))
}

/// Enables the zone and waits for the DS to enter; returns what status tells.
async fn enable_to_awaiting_ds(w: &RealWorld, daemon: &Daemon, zone: &str) -> String {
    wait_state(&w.config, zone, "disabled", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let (ok, _, err) = cli(&w.config, &["enable", zone]);
    assert!(ok, "{err}");
    wait_state(&w.config, zone, "awaiting_ds", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}\n{}", daemon.log(), w.logs()));
    status(&w.config, zone)["ds"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_uppercase()
}

fn history(config: &Path, zone: &str) -> String {
    cli(config, &["history", zone]).1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gcore_zone_and_a_powerdns_zone_side_by_side_through_knot_and_unbound() {
    let (gc, pd) = ("gc.test.", "pd.test.");
    let w = world(68, &[gc, pd], &[pd]).await;
    let daemon = Daemon::start(&w.config, &w.dir.path().join("daemon.log")).unwrap();

    // Each zone is told at the account that holds it, and named so.
    let told_pd = enable_to_awaiting_ds(&w, &daemon, pd).await;
    let told_gc = enable_to_awaiting_ds(&w, &daemon, gc).await;
    let pdns_ds = w.pdns_ds(pd).unwrap();
    assert!(
        told_pd.contains(&pdns_ds.to_ascii_uppercase()),
        "told {told_pd}, PowerDNS's {pdns_ds}"
    );
    let knot_ds = w.knot_ds(gc).unwrap();
    assert!(
        told_gc.contains(&knot_ds.to_ascii_uppercase()),
        "told {told_gc}, Knot's {knot_ds}"
    );
    assert_eq!(status(&w.config, pd)["provider"], "pdns");
    assert_eq!(status(&w.config, gc)["provider"], "gcore");
    assert!(
        w.sim.handle().calls().iter().all(|c| !c.is_dnssec_on(pd)),
        "the PowerDNS zone never reached the simulated provider"
    );

    for (zone, ds) in [(pd, &pdns_ds), (gc, &knot_ds)] {
        w.publish_ds(zone, Tld::Both, ds).unwrap();
    }
    for zone in [pd, gc] {
        wait_state(&w.config, zone, "active", LONG)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    }
    let (rcode, ad) = w.resolve_fresh(pd).await.unwrap();
    assert_eq!(
        (rcode.as_str(), ad),
        ("No Error", true),
        "Unbound validates the PowerDNS zone"
    );

    // Disable the PowerDNS zone with a resolver probe all the way: never SERVFAIL, and
    // PowerDNS keeps its key until the DS is gone everywhere and its TTL has passed.
    let probe = Probe::start(&w, pd);
    let (ok, _, err) = cli(&w.config, &["disable", pd]);
    assert!(ok, "{err}");
    wait_state(&w.config, pd, "awaiting_ds_removal", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    w.remove_ds(pd, Tld::A).unwrap();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(state(&w.config, pd), "awaiting_ds_removal");
        assert!(
            w.pdns_ds(pd).is_ok(),
            "signed while a TLD server has the DS"
        );
    }
    w.remove_ds(pd, Tld::B).unwrap();
    let seen = wait_state(&w.config, pd, "disabled", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    assert!(seen.contains(&"ttl_wait".to_string()), "{seen:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (bogus, answers) = probe.finish().await;
    assert_eq!(
        bogus,
        0,
        "validation failures: {answers:?}\n{}",
        history(&w.config, pd)
    );
    assert!(w.pdns_ds(pd).is_err(), "PowerDNS's keys are gone");
    let (rcode, ad) = w.resolve_fresh(pd).await.unwrap();
    assert_eq!((rcode.as_str(), ad), ("No Error", false), "insecure again");

    // The Gcore zone never moved, and no alert was raised on either.
    assert_eq!(state(&w.config, gc), "active");
    for zone in [gc, pd] {
        assert!(alert_kinds(&w.config, zone).is_empty(), "{zone}");
    }
    let on_off: Vec<bool> = w
        .sim
        .handle()
        .calls()
        .iter()
        .filter(|c| c.is_dnssec_on(gc) || c.is_dnssec_off(gc))
        .map(|c| c.is_dnssec_on(gc))
        .collect();
    assert_eq!(on_off, vec![true], "the Gcore zone was switched on once");
}
