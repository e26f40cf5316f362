//! dnssec-warden against DNS software nobody here wrote: `dnssec-warden run` (the real
//! binary) over Knot DNS authoritative servers and an Unbound validating resolver on
//! loopback, with the provider simulator's DNSSEC switch driving Knot's signing. The test
//! is the registrar (knotc zone edits of `test.` on one TLD server or both). Each test has
//! its own 127.0.B.x block, so they run in parallel. See test-support/src/world.rs.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use dnssec_warden_lab::CallRecord;
use dnssec_warden_test_support::world::{
    Daemon, RealWorld, Tld, alert_kinds, cli, state, wait_state,
};

const LONG: Duration = Duration::from_secs(40);

fn switches(calls: &[CallRecord], zone: &str) -> Vec<bool> {
    calls
        .iter()
        .filter_map(|c| {
            if c.is_dnssec_on(zone) {
                Some(true)
            } else if c.is_dnssec_off(zone) {
                Some(false)
            } else {
                None
            }
        })
        .collect()
}

/// Asks Unbound for the zone every 300 ms (no flush: what a user's resolver would see)
/// until stopped; counts SERVFAILs.
fn probe(
    w: &RealWorld,
    zone: &str,
) -> (
    Arc<AtomicBool>,
    Arc<AtomicUsize>,
    tokio::task::JoinHandle<Vec<String>>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let servfails = Arc::new(AtomicUsize::new(0));
    let addr = w.unbound.addr;
    let name = format!("www.{zone}");
    let (s, f) = (stop.clone(), servfails.clone());
    let task = tokio::spawn(async move {
        let transport = dnssec_warden::dns::NetTransport::new(Duration::from_secs(2));
        let query_name = dnssec_warden::dns::wire::parse_name(&name).expect("name");
        let mut seen = Vec::new();
        // Bounded: at most ten minutes of probes.
        for _ in 0..2000 {
            if s.load(Ordering::SeqCst) {
                break;
            }
            let q = dnssec_warden::dns::wire::build_query(
                &query_name,
                hickory_proto::rr::RecordType::A,
                true,
            );
            use dnssec_warden::dns::Transport;
            let rcode = match transport.exchange(addr, &q).await {
                Ok(m) => m.metadata.response_code.to_string(),
                Err(e) => format!("error {e}"),
            };
            if rcode.contains("SERVFAIL") || rcode.contains("Server Failure") {
                // Tell a validation failure (the outage this suite guards against) from an
                // unreachable server on a loaded machine: ask again with checking disabled.
                // An answer with CD=1 means the data is there and only validation failed.
                let mut cd = q.clone();
                cd.metadata.checking_disabled = true;
                let bogus = matches!(
                    transport.exchange(addr, &cd).await,
                    Ok(m) if m.metadata.response_code == hickory_proto::op::ResponseCode::NoError
                );
                if bogus {
                    f.fetch_add(1, Ordering::SeqCst);
                }
                let rcode = format!(
                    "{rcode} ({}) at {}",
                    if bogus { "validation" } else { "unreachable" },
                    dnssec_warden::time::format::rfc3339_ms(std::time::SystemTime::now())
                );
                if seen.last() != Some(&rcode) {
                    seen.push(rcode);
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
                continue;
            }
            if seen.last() != Some(&rcode) {
                seen.push(rcode);
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        seen
    });
    (stop, servfails, task)
}

/// Stops the probe and asserts it never saw a validation SERVFAIL; on failure it shows
/// when the provider was switched and the zone's history, to put the SERVFAILs in time.
async fn assert_probe_clean(
    w: &RealWorld,
    zone: &str,
    stop: Arc<AtomicBool>,
    servfails: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<Vec<String>>,
) {
    stop.store(true, Ordering::SeqCst);
    let rcodes = task.await.unwrap();
    let calls: Vec<String> = w
        .sim
        .handle()
        .calls()
        .iter()
        .map(|c| {
            format!(
                "{} {} {}",
                dnssec_warden::time::format::rfc3339_ms(c.at),
                c.path,
                c.body
            )
        })
        .collect();
    assert_eq!(
        servfails.load(Ordering::SeqCst),
        0,
        "probe saw {rcodes:?}\nprovider calls: {calls:?}\nhistory: {}",
        cli(&w.config, &["history", zone]).1
    );
}

async fn enable_to_awaiting_ds(w: &RealWorld, config: &Path, zone: &str) -> String {
    let log = || std::fs::read_to_string(w.dir.path().join("daemon.log")).unwrap_or_default();
    wait_state(config, zone, "disabled", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", log()));
    let (ok, _, err) = cli(config, &["enable", zone]);
    assert!(ok, "{err}");
    let seen = wait_state(config, zone, "awaiting_ds", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", w.logs()));
    assert!(seen.contains(&"enabling".to_string()), "{seen:?}");
    // The DS the operator is told is the one of the key Knot signs with.
    let told = dnssec_warden_test_support::world::status(config, zone)["ds"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let knot = w.knot_ds(zone).unwrap();
    assert!(
        told.to_ascii_uppercase()
            .contains(&knot.to_ascii_uppercase()),
        "told {told}, Knot's {knot}"
    );
    knot
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enable_and_disable_through_knot_and_unbound() {
    let zone = "shop.test.";
    let w = RealWorld::start(62, &[zone]).await.unwrap();
    let log = w.dir.path().join("daemon.log");
    let daemon = Daemon::start(&w.config, &log).unwrap();

    let ds = enable_to_awaiting_ds(&w, &w.config, zone).await;
    // The secondary serves Knot's key too (the daemon waited for every child server).
    assert!(
        w.resolve_fresh(zone).await.unwrap().0 == "No Error",
        "insecure but resolving before the DS"
    );

    // The DS on one TLD server only: awaiting_ds stays, poll after poll.
    w.publish_ds(zone, Tld::A, &ds).unwrap();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(state(&w.config, zone), "awaiting_ds", "{}", daemon.log());
    }
    w.publish_ds(zone, Tld::B, &ds).unwrap();
    wait_state(&w.config, zone, "active", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let (rcode, ad) = w.resolve_fresh(zone).await.unwrap();
    assert_eq!(
        (rcode.as_str(), ad),
        ("No Error", true),
        "Unbound validates"
    );
    assert!(alert_kinds(&w.config, zone).is_empty());

    // Disable, with a resolver probe all the way: never SERVFAIL.
    let (stop, servfails, task) = probe(&w, zone);
    let (ok, _, err) = cli(&w.config, &["disable", zone]);
    assert!(ok, "{err}");
    wait_state(&w.config, zone, "awaiting_ds_removal", LONG)
        .await
        .unwrap();
    assert!(w.sim.handle().dnssec_enabled(zone), "on while the DS is up");
    // Removed from one TLD server only: no ttl_wait yet.
    w.remove_ds(zone, Tld::A).unwrap();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(state(&w.config, zone), "awaiting_ds_removal");
    }
    w.remove_ds(zone, Tld::B).unwrap();
    let seen = wait_state(&w.config, zone, "disabled", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    assert!(seen.contains(&"ttl_wait".to_string()), "{seen:?}");
    // A few more probes after the switch-off, then stop.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_probe_clean(&w, zone, stop, servfails, task).await;
    let (rcode, ad) = w.resolve_fresh(zone).await.unwrap();
    assert_eq!((rcode.as_str(), ad), ("No Error", false), "insecure again");

    // The provider saw exactly one on and one off, the off after the DS was gone.
    let calls = w.sim.handle().calls();
    assert_eq!(switches(&calls, zone), vec![true, false], "{calls:?}");
    assert!(
        w.primary.dnskey(zone).unwrap().is_some(),
        "keys stay in the KASP"
    );
    assert!(alert_kinds(&w.config, zone).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_ds_and_dnssec_off_behind_the_back() {
    let wrong = "wrong.test.";
    let off = "off.test.";
    let w = RealWorld::start(63, &[wrong, off]).await.unwrap();
    let log = w.dir.path().join("daemon.log");
    let daemon = Daemon::start(&w.config, &log).unwrap();

    // A wrong DS at the parent (a typo at the registrar): ds_mismatch and nothing else.
    let good = enable_to_awaiting_ds(&w, &w.config, wrong).await;
    let mut fields: Vec<String> = good.split_whitespace().map(str::to_string).collect();
    let tag: u16 = fields[0].parse().unwrap();
    fields[0] = tag.wrapping_add(1).to_string();
    let digest = fields[3].clone();
    fields[3] = format!("{}{}", &digest[..digest.len() - 4], "0000");
    w.publish_ds(wrong, Tld::Both, &fields.join(" ")).unwrap();
    let calls_before = w.sim.handle().calls().len();
    let mut raised = false;
    for _ in 0..100 {
        if alert_kinds(&w.config, wrong).contains(&"ds_mismatch".to_string()) {
            raised = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(raised, "ds_mismatch raised\n{}", daemon.log());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = state(&w.config, wrong);
    assert!(
        s == "awaiting_ds",
        "a wrong DS moves nothing, the zone is in {s}"
    );
    // Unbound fails the zone too, so validation_failed may join; nothing else may.
    let kinds = alert_kinds(&w.config, wrong);
    assert!(
        kinds
            .iter()
            .all(|k| k == "ds_mismatch" || k == "validation_failed"),
        "{kinds:?}"
    );
    assert_eq!(
        w.sim.handle().calls().len(),
        calls_before,
        "no provider call after the wrong DS"
    );
    assert!(w.sim.handle().dnssec_enabled(wrong));

    // DNSSEC switched off behind the daemon's back while the DS is published.
    let ds = enable_to_awaiting_ds(&w, &w.config, off).await;
    w.publish_ds(off, Tld::Both, &ds).unwrap();
    wait_state(&w.config, off, "active", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    w.signer.force_off(off).unwrap();
    // Within one poll (1 s for an active zone) the outage is paged, the zone is no longer
    // called active, and, the operator's recorded intent being "enabled", DNSSEC is
    // switched on again (DESIGN.md, rules 7 and 8): Knot signs with its key again, the
    // published DS matches it, and the zone walks back to active.
    let mut seen = false;
    for _ in 0..100 {
        let (_, story, _) = cli(&w.config, &["history", off]);
        if story.contains("switched off outside dnssec-warden") {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen, "the drift seen within a few polls\n{}", daemon.log());
    wait_state(&w.config, off, "active", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let (_, story, _) = cli(&w.config, &["history", off]);
    for line in [
        "alert dnssec_off_with_ds",
        "active -> enabling: DNSSEC is off at the provider (switched off outside dnssec-warden); switching it on again",
        "ds_observed -> active",
    ] {
        assert!(story.contains(line), "history lacks {line:?}:\n{story}");
    }
    assert!(
        !alert_kinds(&w.config, off).contains(&"dnssec_off_with_ds".to_string()),
        "resolved once signed again"
    );
    let (rcode, _) = w.resolve_fresh(off).await.unwrap();
    assert_eq!(rcode, "No Error", "Unbound validates the zone again");
    assert_eq!(
        switches(&w.sim.handle().calls(), off),
        vec![true, true],
        "switched on once by the operator's enable, once to restore it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_random_moments_converges() {
    let zone = "kill.test.";
    let w = RealWorld::start(64, &[zone]).await.unwrap();
    let log = w.dir.path().join("daemon.log");
    let mut daemon = Daemon::start(&w.config, &log).unwrap();
    let mut rng = fastrand::Rng::with_seed(
        std::env::var("E2E_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| fastrand::u64(..)),
    );
    eprintln!("seed {}", rng.get_seed());
    // Kills the daemon after a random moment, restarts it; bounded rounds.
    async fn chaos(
        daemon: &mut Daemon,
        rng: &mut fastrand::Rng,
        config: &Path,
        log: &Path,
        rounds: usize,
    ) {
        for _ in 0..rounds {
            tokio::time::sleep(Duration::from_millis(rng.u64(50..900))).await;
            daemon.kill();
            *daemon = Daemon::start(config, log).unwrap();
        }
    }

    wait_state(&w.config, zone, "disabled", LONG).await.unwrap();
    let (ok, _, err) = cli(&w.config, &["enable", zone]);
    assert!(ok, "{err}");
    chaos(&mut daemon, &mut rng, &w.config, &log, 6).await;
    wait_state(&w.config, zone, "awaiting_ds", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let ds = w.knot_ds(zone).unwrap();
    w.publish_ds(zone, Tld::Both, &ds).unwrap();
    chaos(&mut daemon, &mut rng, &w.config, &log, 4).await;
    wait_state(&w.config, zone, "active", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    assert_eq!(
        w.resolve_fresh(zone).await.unwrap(),
        ("No Error".to_string(), true)
    );

    let (stop, servfails, task) = probe(&w, zone);
    let (ok, _, err) = cli(&w.config, &["disable", zone]);
    assert!(ok, "{err}");
    chaos(&mut daemon, &mut rng, &w.config, &log, 4).await;
    wait_state(&w.config, zone, "awaiting_ds_removal", LONG)
        .await
        .unwrap();
    w.remove_ds(zone, Tld::Both).unwrap();
    // Kills through ttl_wait and disabling.
    chaos(&mut daemon, &mut rng, &w.config, &log, 8).await;
    wait_state(&w.config, zone, "disabled", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_probe_clean(&w, zone, stop, servfails, task).await;
    // The invariants: never off with a DS up (the probe), and the switch-off came after
    // the switch-on and only once it was due; repeated "on" calls are idempotent.
    let calls = w.sim.handle().calls();
    let sw = switches(&calls, zone);
    assert_eq!(sw.last(), Some(&false), "{sw:?}");
    assert_eq!(
        sw.iter().filter(|on| !**on).count(),
        1,
        "one switch-off: {sw:?}"
    );
    assert!(!w.sim.handle().dnssec_enabled(zone));
    assert!(alert_kinds(&w.config, zone).is_empty());
}
