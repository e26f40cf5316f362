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

/// The zone's CDS records as a validating resolver gets them now (flushed first), each
/// as its fields run together in upper case: `00000` is the delete request.
async fn served_cds(w: &RealWorld, zone: &str) -> Vec<String> {
    w.unbound.flush(zone).unwrap();
    let m = w
        .unbound
        .query(zone, hickory_proto::rr::RecordType::CDS, false)
        .await
        .unwrap();
    m.answers
        .iter()
        .filter(|r| r.record_type() == hickory_proto::rr::RecordType::CDS)
        .map(|r| r.data.to_string().replace(' ', "").to_ascii_uppercase())
        .collect()
}

fn history(config: &Path, zone: &str) -> String {
    cli(config, &["history", zone]).1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gcore_zone_and_a_powerdns_zone_side_by_side_through_knot_and_unbound() {
    let (gc, pd, both) = ("gc.test.", "pd.test.", "both.test.");
    let w = world(68, &[gc, pd, both], &[pd]).await;
    // Also created at PowerDNS behind the daemon's back: at two accounts.
    w.pdns
        .as_ref()
        .unwrap()
        .load_zone(
            both,
            "$ORIGIN both.test.\n@ 2 SOA ns1.pdns.test. h.test. 1 3600 600 86400 2\n@ 2 NS ns1.pdns.test.\n",
        )
        .unwrap();
    let metrics = dnssec_warden_test_support::pdns::free_port().unwrap();
    let mut config = std::fs::read_to_string(&w.config).unwrap();
    config.push_str(&format!("[metrics]\nlisten = \"127.0.0.1:{metrics}\"\n"));
    std::fs::write(&w.config, config).unwrap();
    let daemon = Daemon::start(&w.config, &w.dir.path().join("daemon.log")).unwrap();

    // A zone at two accounts: enable refused naming both, nothing recorded; the daemon
    // sends it nothing and says why.
    let (ok, _, err) = cli(&w.config, &["enable", both]);
    assert!(!ok, "refused");
    assert!(
        err.contains("more than one provider (gcore and pdns)"),
        "{err}"
    );
    let mut said = false;
    for _ in 0..100 {
        if status(&w.config, both)["provider_error"]
            .as_str()
            .is_some_and(|e| e.contains("more than one provider (gcore and pdns)"))
        {
            said = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(said, "{}", status(&w.config, both));

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
    let scraped = reqwest::get(format!("http://127.0.0.1:{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "dnssec_warden_provider_zones{provider=\"gcore\"} 1",
        "dnssec_warden_provider_zones{provider=\"pdns\"} 1",
    ] {
        assert!(scraped.contains(line), "{line} in\n{scraped}");
    }
    assert!(
        w.sim.handle().calls().iter().all(|c| !c.is_dnssec_on(pd)),
        "the PowerDNS zone never reached the simulated provider"
    );
    assert!(
        w.sim
            .handle()
            .calls()
            .iter()
            .all(|c| !c.is_dnssec_on(both) && !c.is_dnssec_off(both)),
        "the zone at two accounts is switched at neither"
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
    // Rule 14 through the binary and the real server: PowerDNS publishes the CDS of the
    // DS the daemon announced, validated by Unbound. (The Gcore simulator's signer, Knot,
    // publishes CDS by itself, as a provider may: the daemon only reads it there.)
    let cds = served_cds(&w, pd).await;
    assert_eq!(cds.len(), 1, "{cds:?}\n{}", history(&w.config, pd));
    assert!(
        pdns_ds
            .to_ascii_uppercase()
            .replace(' ', "")
            .contains(&cds[0]),
        "CDS {cds:?}, the DS {pdns_ds}"
    );
    assert!(
        history(&w.config, pd).contains("publishes the CDS and CDNSKEY of the key"),
        "{}",
        history(&w.config, pd)
    );

    // Disable the PowerDNS zone with a resolver probe all the way: never SERVFAIL, and
    // PowerDNS keeps its key until the DS is gone everywhere and its TTL has passed.
    let probe = Probe::start(&w, pd);
    let (ok, _, err) = cli(&w.config, &["disable", pd]);
    assert!(ok, "{err}");
    wait_state(&w.config, pd, "awaiting_ds_removal", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    // The delete request (RFC 8078) while the DS is still published: a registry that
    // scans removes the DS; DNSSEC stays on until it is gone and its TTL has passed.
    let mut delete = Vec::new();
    for _ in 0..20 {
        delete = served_cds(&w, pd).await;
        if delete == ["00000"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(delete, ["00000"], "{}", history(&w.config, pd));
    assert!(
        !history(&w.config, pd).contains("cds_unexpected"),
        "the daemon's own setting, corrected in the same step, is not an alert: {}",
        history(&w.config, pd)
    );
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

    // The history names the account each call went to.
    for (zone, said) in [
        (pd, "provider pdns: DNSSEC switched on"),
        (pd, "provider pdns: DNSSEC switched off"),
        (gc, "provider gcore: DNSSEC switched on"),
    ] {
        let story = history(&w.config, zone);
        assert!(story.contains(said), "{said:?} in\n{story}");
    }

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

/// Behind the daemon's back at PowerDNS: a second entry-point key (which DS to enter is
/// then not the daemon's guess: rule 8), and DNSSEC switched off while the DS is
/// published (the same decision as for the Gcore API: alert, and switched on again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_changed_and_dnssec_off_behind_the_back_at_powerdns() {
    let pd = "pd.test.";
    let w = world(69, &[pd], &[pd]).await;
    let daemon = Daemon::start(&w.config, &w.dir.path().join("daemon.log")).unwrap();
    let pdns = w.pdns.as_ref().unwrap();
    let told = enable_to_awaiting_ds(&w, &daemon, pd).await;
    let ds = w.pdns_ds(pd).unwrap();
    assert!(told.contains(&ds.to_ascii_uppercase()), "told {told}, {ds}");

    // A second active entry point: no DS is told while it is there.
    let added = pdns
        .pdnsutil(&["add-zone-key", pd, "ksk", "active", "published", "ecdsa256"])
        .unwrap();
    let id = added
        .split_whitespace()
        .rev()
        .find(|t| t.parse::<u32>().is_ok())
        .unwrap_or_else(|| panic!("no key id in {added:?}"))
        .to_string();
    let mut withheld = false;
    for _ in 0..100 {
        let s = status(&w.config, pd);
        if s["ds_to_enter"].is_null()
            && s["provider_error"]
                .as_str()
                .is_some_and(|e| e.contains("several active entry-point keys"))
        {
            withheld = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        withheld,
        "the DS withheld while two keys stand\n{}",
        status(&w.config, pd)
    );
    pdns.pdnsutil(&["remove-zone-key", pd, &id]).unwrap();
    let mut told_again = false;
    for _ in 0..100 {
        if status(&w.config, pd)["ds_to_enter"]
            .as_str()
            .is_some_and(|d| d.to_ascii_uppercase().contains(&ds.to_ascii_uppercase()))
        {
            told_again = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(told_again, "{}", status(&w.config, pd));

    w.publish_ds(pd, Tld::Both, &ds).unwrap();
    wait_state(&w.config, pd, "active", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));

    // Switched off at PowerDNS while the DS is published: every key deleted at once.
    pdns.pdnsutil(&["disable-dnssec", pd]).unwrap();
    let mut seen = false;
    for _ in 0..100 {
        if history(&w.config, pd).contains("switched off outside dnssec-warden") {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let story = history(&w.config, pd);
    assert!(seen, "the drift seen within a few polls\n{story}");
    assert!(story.contains("alert dnssec_off_with_ds"), "{story}");
    // Switched on again (the intent is "enabled"): PowerDNS makes a new key, whose DS
    // is not the one published; the zone is not called active on the old one.
    let mut new_ds = None;
    for _ in 0..100 {
        if let Ok(d) = w.pdns_ds(pd)
            && d != ds
        {
            new_ds = Some(d);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let new_ds = new_ds.unwrap_or_else(|| panic!("signed again\n{}", history(&w.config, pd)));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_ne!(state(&w.config, pd), "active", "{}", history(&w.config, pd));
    // The registrar enters the new DS: active again, the alert resolved. Active needs the
    // validating resolver to say secure, and a resolver that validated the zone while its
    // DS matched no key may hold that verdict for a while (a bad key stays in Unbound's
    // key cache beyond val-bogus-ttl; seen under load): the daemon waits for it, as the
    // resolver's users would.
    w.publish_ds(pd, Tld::Both, &new_ds).unwrap();
    wait_state(&w.config, pd, "active", LONG * 3)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", history(&w.config, pd)));
    let kinds = alert_kinds(&w.config, pd);
    assert!(
        !kinds.contains(&"dnssec_off_with_ds".to_string()),
        "{kinds:?}"
    );
    let (rcode, ad) = w.resolve_fresh(pd).await.unwrap();
    assert_eq!((rcode.as_str(), ad), ("No Error", true));
}

/// The PowerDNS API failing mid-flow and the daemon killed at random moments: a switch
/// whose answer was lost (500 after it took effect) is settled by looking, never taken
/// as refused; a switch-off the API cannot take waits, signed, until it can; the zone
/// ends disabled with no validation failure on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_powerdns_api_failing_and_sigkill_mid_flow_converge() {
    use dnssec_warden_test_support::fault_proxy::{Fault, FaultProxy, Rule};

    let pd = "pd.test.";
    let w = world(70, &[pd], &[pd]).await;
    let pdns = w.pdns.as_ref().unwrap();
    let upstream: url::Url = pdns.base_url().parse().unwrap();
    let proxy = FaultProxy::start(upstream.clone()).await.unwrap();
    let config = std::fs::read_to_string(&w.config).unwrap();
    std::fs::write(
        &w.config,
        config.replace(&pdns.base_url(), proxy.url().as_str()),
    )
    .unwrap();
    let log = w.dir.path().join("daemon.log");
    let mut daemon = Daemon::start(&w.config, &log).unwrap();
    let mut rng = fastrand::Rng::with_seed(
        std::env::var("E2E_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| fastrand::u64(..)),
    );
    eprintln!("seed {}", rng.get_seed());
    async fn chaos(daemon: &mut Daemon, rng: &mut fastrand::Rng, config: &Path, log: &Path) {
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(rng.u64(50..900))).await;
            daemon.kill();
            *daemon = Daemon::start(config, log).unwrap();
        }
    }

    // Both attempts of the switch-on reach PowerDNS and take effect; both answers are
    // lost (500).
    wait_state(&w.config, pd, "disabled", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    proxy.add_fault(
        Rule::new(Fault::AfterForward {
            status: 500,
            delay: Duration::ZERO,
        })
        .method("PUT")
        .times(2),
    );
    let (ok, _, err) = cli(&w.config, &["enable", pd]);
    assert!(ok, "{err}");
    wait_state(&w.config, pd, "awaiting_ds", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let story = history(&w.config, pd);
    for said in [
        "the call to switch DNSSEC on may or may not have taken effect",
        "the call to switch DNSSEC on took effect",
    ] {
        assert!(story.contains(said), "{said:?}\n{story}");
    }
    let ds = w.pdns_ds(pd).unwrap();
    assert!(
        status(&w.config, pd)["ds_to_enter"]
            .as_str()
            .is_some_and(|d| d.to_ascii_uppercase().contains(&ds.to_ascii_uppercase())),
        "{}",
        status(&w.config, pd)
    );
    w.publish_ds(pd, Tld::Both, &ds).unwrap();
    chaos(&mut daemon, &mut rng, &w.config, &log).await;
    wait_state(&w.config, pd, "active", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));

    // The API gone while the DS is removed: the switch-off waits, the zone stays signed.
    let probe = Probe::start(&w, pd);
    let (ok, _, err) = cli(&w.config, &["disable", pd]);
    assert!(ok, "{err}");
    wait_state(&w.config, pd, "awaiting_ds_removal", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let addr = proxy.addr();
    drop(proxy);
    w.remove_ds(pd, Tld::Both).unwrap();
    chaos(&mut daemon, &mut rng, &w.config, &log).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_ne!(
        state(&w.config, pd),
        "disabled",
        "{}",
        history(&w.config, pd)
    );
    assert!(
        w.pdns_ds(pd).is_ok(),
        "signed while the API cannot be asked"
    );
    let proxy = FaultProxy::start_on(addr, upstream).await.unwrap();
    chaos(&mut daemon, &mut rng, &w.config, &log).await;
    wait_state(&w.config, pd, "disabled", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", history(&w.config, pd)));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (bogus, answers) = probe.finish().await;
    assert_eq!(bogus, 0, "{answers:?}\n{}", history(&w.config, pd));
    assert!(w.pdns_ds(pd).is_err(), "PowerDNS's keys are gone");
    assert!(
        proxy
            .requests()
            .iter()
            .any(|r| r.method == "PUT" && r.carries("false")),
        "switched off through the API once it was back"
    );
    assert!(alert_kinds(&w.config, pd).is_empty());
}
