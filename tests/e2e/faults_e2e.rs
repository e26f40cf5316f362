//! Faults through the real binary: `dnssec-warden run` against the provider simulator
//! behind a fault-injecting proxy, the lab DNS hierarchy for the name servers. Each test is
//! one fault class; the daemon must keep running, keep its word true, and say what is
//! wrong.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dnssec_warden_lab::dns::KeySource;
use dnssec_warden_test_support::daemon::{
    Daemon, KEY, LabWorld, bin, cli, status, try_status, wait_state, wait_status,
};
use dnssec_warden_test_support::fault_proxy::{Fault, FaultProxy, Rule, flip_dnssec};

const LONG: Duration = Duration::from_secs(40);

/// A world whose daemon talks to the provider through a fault proxy.
async fn behind_proxy(zone: &str) -> (LabWorld, FaultProxy) {
    let w = LabWorld::start(zone).await;
    let proxy = FaultProxy::start(w.sim.base_url()).await.unwrap();
    w.write_config(proxy.url().as_str());
    (w, proxy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enable_of_a_zone_the_provider_does_not_have_is_refused_at_once() {
    let w = LabWorld::start("here.test.").await;
    let (ok, out, err) = cli(&w.config, &["enable", "elsewhere.test"]);
    assert!(!ok, "{out}");
    assert!(
        err.contains("the provider has no zone elsewhere.test."),
        "{err}"
    );
    assert!(
        try_status(&w.config, "elsewhere.test").is_none(),
        "nothing recorded"
    );
    let (ok, out, err) = cli(&w.config, &["enable", "here.test"]);
    assert!(ok, "{err}");
    assert!(out.contains("intent enabled"), "{out}");
}

/// Safety rule 8 end to end: DNSSEC switched off at the provider while the operator is
/// told to enter the DS: the instruction is withdrawn at once, and (the recorded intent
/// being "enabled") DNSSEC is switched on again and a new, true instruction given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dnssec_switched_off_behind_the_daemons_back_withdraws_the_ds_instruction() {
    let zone = "drift.test.";
    let w = LabWorld::start(zone).await;
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    assert!(cli(&w.config, &["enable", zone]).0);
    let first = wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["state"] == "awaiting_ds" && s["ds_to_enter"].is_string()
    })
    .await;
    let told = first["ds_to_enter"].as_str().unwrap().to_string();

    assert_eq!(
        flip_dnssec(&w.sim.base_url(), KEY, zone, false).await,
        Ok(200)
    );
    let withdrawn = wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["state"] != "awaiting_ds"
    })
    .await;
    assert_eq!(withdrawn["state"], "enabling", "{withdrawn}");
    let (_, story, _) = cli(&w.config, &["history", zone]);
    assert!(story.contains("withdrawn: do not enter"), "{story}");
    // Never shown again while it is stale.
    let now = status(&w.config, zone);
    assert_ne!(now["ds_to_enter"].as_str(), Some(told.as_str()), "{now}");
    assert!(
        !now["waiting_for"]
            .as_str()
            .unwrap_or_default()
            .contains(&told)
    );

    // Switched on again (intent enabled); the new instruction is the key now served.
    let again = wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["state"] == "awaiting_ds" && s["ds_to_enter"].is_string()
    })
    .await;
    let key = w.sim.handle().dnskey(zone).expect("on again");
    let line = again["ds_to_enter"].as_str().unwrap();
    assert!(line.contains(&format!(" DS {} ", key.key_tag())), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_holds_every_call_and_is_said_once() {
    let zone = "busy.test.";
    let (w, proxy) = behind_proxy(zone).await;
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    proxy.set_fault(Fault::retry_after("30"));
    assert!(
        daemon.wait_log("rate limited", 1, LONG).await,
        "{}",
        daemon.log()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let said = |log: String| {
        log.matches("the provider cannot be asked about this zone")
            .count()
    };
    let said_before = said(daemon.log());
    let held = proxy.total_calls();
    // Polls every 300 ms; held, none reaches the provider for the next few seconds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        proxy.total_calls(),
        held,
        "calls made while Retry-After holds"
    );
    // Said by the zone's next full look: a settled zone's sample may still have used the
    // listing in hand while its refresh was held (a poll is 2 s here).
    wait_status(&w.config, zone, Duration::from_secs(6), &daemon, |s| {
        s["provider_error"]
            .as_str()
            .unwrap_or_default()
            .contains("rate limited")
    })
    .await;
    assert_eq!(
        proxy.total_calls(),
        held,
        "calls made while Retry-After holds"
    );
    // Said when it starts (the 429, then the hold), not at every poll.
    assert!(said_before <= 2, "{}", daemon.log());
    assert_eq!(said(daemon.log()), said_before, "{}", daemon.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_chain_never_carries_the_key_to_another_host() {
    let zone = "moved.test.";
    let (w, proxy) = behind_proxy(zone).await;
    let elsewhere = FaultProxy::start_on("127.0.0.2:0".parse().unwrap(), w.sim.base_url())
        .await
        .unwrap();
    // A chain: first hop to 127.0.0.2, which would send it back again.
    elsewhere.set_fault(Fault::Redirect {
        status: 302,
        to: proxy.url(),
    });
    proxy.set_fault(Fault::Redirect {
        status: 307,
        to: elsewhere.url(),
    });
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    assert!(
        daemon.wait_log("redirect", 1, LONG).await,
        "{}",
        daemon.log()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        elsewhere.requests().iter().all(|r| !r.carries(KEY)),
        "the API key reached another host"
    );
    assert_eq!(
        elsewhere.total_calls(),
        0,
        "redirects are not followed at all"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_answers_are_capped_and_malformed_ones_said() {
    let zone = "big.test.";
    let (w, proxy) = behind_proxy(zone).await;
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    proxy.set_fault(Fault::Huge(512 << 20));
    assert!(
        daemon.wait_log("byte cap", 1, LONG).await,
        "{}",
        daemon.log()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let peak = daemon.peak_rss_kb().unwrap_or(0);
    assert!(peak < 128 * 1024, "peak RSS {peak} kB with 512 MiB answers");
    assert!(proxy.streamed_bytes() < 256 << 20, "read far past the cap");

    proxy.clear_faults();
    proxy.set_fault(Fault::Malformed);
    let s = wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["provider_error"]
            .as_str()
            .is_some_and(|e| e.contains("decode"))
    })
    .await;
    assert_eq!(s["state"], "disabled", "an unreadable answer moves nothing");
    proxy.clear_faults();
    assert!(daemon.wait_log("the provider answers again", 1, LONG).await);
}

/// A provider that hangs: the daemon stays responsive, and SIGTERM ends it after the step
/// in flight (bounded by the provider timeout), not never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_provider_neither_kills_nor_blocks_the_daemon() {
    let zone = "slow.test.";
    let (w, proxy) = behind_proxy(zone).await;
    let mut daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    proxy.add_fault(Rule::new(Fault::Hang(Duration::from_secs(30))).on("/dns/"));
    assert!(cli(&w.config, &["enable", zone]).0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(daemon.alive(), "{}", daemon.log());
    assert!(
        try_status(&w.config, zone).is_some(),
        "status works meanwhile"
    );
    let asked = Instant::now();
    daemon.signal("TERM");
    let exit = daemon
        .wait_exit(Duration::from_secs(20))
        .expect("SIGTERM ends the daemon within the step bound");
    assert!(exit.success(), "{}", daemon.log());
    assert!(asked.elapsed() < Duration::from_secs(20));
}

/// Safety rule 4 through the binary: the provider's name servers serve
/// its key, but every signature over the DNSKEY set has expired. The key is not "served":
/// no hold, no DS announced, the wait names what is wrong; once the signatures are good
/// again, the DS is announced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_whose_signatures_expired_is_never_announced() {
    let zone = "stale.test.";
    let w = LabWorld::start(zone).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    w.lab
        .set_signature_window(zone, Some((now - 20 * 86_400, now - 86_400)))
        .unwrap();
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    assert!(cli(&w.config, &["enable", zone]).0);
    let held = wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["state"] == "enabling"
            && s["waiting_for"]
                .as_str()
                .is_some_and(|w| w.contains("no valid signature by it"))
    })
    .await;
    assert!(held["ds_to_enter"].is_null(), "{held}");
    // Several more looks (the lab's polls are a second): still never announced.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let now = status(&w.config, zone);
    assert_eq!(now["state"], "enabling", "{now}");
    let (_, story, _) = cli(&w.config, &["history", zone]);
    assert!(!story.contains("DS announced"), "{story}");
    assert!(!story.contains("every name server serves key"), "{story}");

    w.lab.set_signature_window(zone, None).unwrap();
    let told = wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["state"] == "awaiting_ds" && s["ds_to_enter"].is_string()
    })
    .await;
    let (_, story, _) = cli(&w.config, &["history", zone]);
    assert!(story.contains("DS announced"), "{story}\n{told}");
}

/// A port free on loopback a moment ago, for the daemon's metrics endpoint.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

async fn scrape(port: u16) -> String {
    let response = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap();
    response.text().await.unwrap()
}

/// The configuration with `[zones] all = true` (if `all`), alerts after `failing_after`,
/// a metrics endpoint and an exec sink writing each notification's id and kind to
/// `alerts.txt`.
fn daemon_wide_config(
    w: &mut LabWorld,
    zone: &str,
    all: bool,
    failing_after: &str,
    port: u16,
) -> PathBuf {
    let hooks = w.dir.path().join("alerts.txt");
    if all {
        w.rest = w.rest.replace(
            &format!("[zones]\nnames = [\"{zone}\"]\n"),
            "[zones]\nall = true\n",
        );
    }
    w.rest = w.rest.replace(
        "[timing]\n",
        &format!("[timing]\nobservation_failing_after = \"{failing_after}\"\n"),
    );
    w.rest.push_str(&format!(
        "[metrics]\nlisten = \"127.0.0.1:{port}\"\n\
         [[alerts.exec]]\ncommand = [\"/bin/sh\", \"-c\", \"echo \\\"$DNSSEC_WARDEN_ALERT_ID $DNSSEC_WARDEN_ALERT_KIND\\\" >> {}\"]\n",
        hooks.display()
    ));
    hooks
}

/// Waits until the file holds `n` lines containing `needle`; false after `within`.
async fn wait_file(path: &Path, needle: &str, n: usize, within: Duration) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.matches(needle).count() >= n {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A zone listing that answers the same full page forever
/// (`total_amount` 1e9) froze every settled zone and was said nowhere. The listing is cut
/// where its page repeats; the zones already known keep being stepped; it is said once in
/// the log, in `status`, in the metrics, and is one alert once it has lasted
/// `observation_failing_after`; and it resolves when the listing works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_that_never_ends_is_cut_and_known_zones_keep_stepping() {
    let zone = "listed.test.";
    let (mut w, proxy) = behind_proxy(zone).await;
    let port = free_port();
    let hooks = daemon_wide_config(&mut w, zone, true, "2s", port);
    w.write_config(proxy.url().as_str());
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    proxy.set_fault(Fault::EndlessListing(vec![
        zone.trim_end_matches('.').into(),
    ]));
    let faulted = Instant::now();
    let listings_before = proxy.calls("/dns/v2/zones");

    // The known zone is still stepped: its last look moves on, twice (every 2 s).
    let mut seen = status(&w.config, zone)["last_observed"].clone();
    for _ in 0..3 {
        let later = wait_status(&w.config, zone, Duration::from_secs(15), &daemon, |s| {
            s["last_observed"] != seen
        })
        .await;
        seen = later["last_observed"].clone();
    }

    let said = "the provider's zone listing fails";
    assert!(daemon.wait_log(said, 1, LONG).await, "{}", daemon.log());
    let s = wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["daemon"].as_array().is_some_and(|d| {
            d.iter()
                .any(|c| c["kind"] == "zone_listing_failing" && c["alerting"] == true)
        })
    })
    .await;
    assert!(
        s["daemon"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("the listing cannot be followed to its end"),
        "{s}"
    );
    let (_, table, _) = cli(&w.config, &["status"]);
    assert!(
        table.contains("DAEMON: zone_listing_failing (warning, alerting)"),
        "{table}"
    );
    assert!(
        wait_file(&hooks, "zone_listing_failing", 1, LONG).await,
        "{}",
        daemon.log()
    );
    let metrics = scrape(port).await;
    assert!(
        metrics.contains("dnssec_warden_daemon_condition{kind=\"zone_listing_failing\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "dnssec_warden_alerts_open{kind=\"zone_listing_failing\",severity=\"warning\"} 1"
        ),
        "{metrics}"
    );

    // Bounded: no page beyond the second (offset 100; `total_amount` beyond the cap ends
    // it at the first), each try two pages at most (tried again every `retry_base`).
    assert!(proxy.max_offset("/dns/v2/zones") <= Some(100));
    let tries = (faulted.elapsed().as_millis() / 200 + 2) as usize;
    let listings = proxy.calls("/dns/v2/zones") - listings_before;
    assert!(
        listings <= 2 * tries,
        "{listings} listing pages in {tries} tries"
    );

    // Said once: one log line, one notification, however often the listing is tried.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let log = daemon.log();
    assert_eq!(log.matches(said).count(), 1, "{log}");
    let sent = std::fs::read_to_string(&hooks).unwrap_or_default();
    assert_eq!(
        sent.lines()
            .filter(|l| l.ends_with("zone_listing_failing"))
            .count(),
        1,
        "{sent}"
    );
    assert!(sent.contains("daemon-alert-"), "{sent}");

    // Over when the listing works again.
    proxy.clear_faults();
    assert!(
        daemon
            .wait_log("zone_listing_failing has cleared", 1, LONG)
            .await,
        "{}",
        daemon.log()
    );
    wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["daemon"].as_array().is_some_and(Vec::is_empty)
    })
    .await;
    assert!(wait_file(&hooks, "-resolved zone_listing_failing", 1, LONG).await);
}

/// Every call answered 401 (a revoked API key) made the daemon ask
/// again at every step and log a line per 401. Calls back off (1 s, 2 s, 4 s, … up to
/// 10 min), failing at once unsent meanwhile; it is one alert (`provider_auth_failing`),
/// one WARN line, status says the account is refused; an accepted answer ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_credential_backs_off_and_is_one_alert() {
    let zone = "revoked.test.";
    let (mut w, proxy) = behind_proxy(zone).await;
    let port = free_port();
    let hooks = daemon_wide_config(&mut w, zone, false, "1h", port);
    w.write_config(proxy.url().as_str());
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    proxy.add_fault(Rule::new(Fault::UnauthorizedAfter(0)).on("/dns/"));
    let said = "the provider refuses this account's credentials";
    assert!(daemon.wait_log(said, 1, LONG).await, "{}", daemon.log());
    let refused_at = Instant::now();
    let calls_then = proxy.total_calls();

    let s = wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["daemon"].as_array().is_some_and(|d| {
            d.iter()
                .any(|c| c["kind"] == "provider_auth_failing" && c["alerting"] == true)
        }) && s["provider_error"]
            .as_str()
            .is_some_and(|e| e.contains("refuses this account"))
    })
    .await;
    assert_eq!(s["state"], "disabled", "{s}");
    let (_, table, _) = cli(&w.config, &["status"]);
    assert!(
        table.contains("DAEMON: provider_auth_failing (warning, alerting)"),
        "{table}"
    );
    assert!(wait_file(&hooks, "provider_auth_failing", 1, LONG).await);
    let metrics = scrape(port).await;
    assert!(
        metrics.contains("dnssec_warden_daemon_condition{kind=\"provider_auth_failing\"} 1"),
        "{metrics}"
    );

    // Bounded: the zone is polled every 2 s, yet in 6 s the provider is tried again only
    // as the backoff allows (after 1 s, then 2 s), by at most the two callers (the zone's
    // step, the listing) that pass the gate together when it opens. Was: hundreds.
    tokio::time::sleep(Duration::from_secs(6).saturating_sub(refused_at.elapsed())).await;
    let calls = proxy.total_calls() - calls_then;
    assert!(calls <= 6, "{calls} requests in 6 s of refusals");
    let log = daemon.log();
    assert_eq!(log.matches(said).count(), 1, "{log}");
    assert_eq!(log.matches("answered 401").count(), 0, "{log}");
    let sent = std::fs::read_to_string(&hooks).unwrap_or_default();
    assert_eq!(
        sent.lines()
            .filter(|l| l.ends_with("provider_auth_failing"))
            .count(),
        1,
        "{sent}"
    );

    // The key accepted again: over at the next try.
    proxy.clear_faults();
    assert!(
        daemon
            .wait_log("provider_auth_failing has cleared", 1, LONG)
            .await,
        "{}",
        daemon.log()
    );
    assert!(wait_file(&hooks, "-resolved provider_auth_failing", 1, LONG).await);
    wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["daemon"].as_array().is_some_and(Vec::is_empty) && s["provider_error"].is_null()
    })
    .await;
}

/// A host without IPv6, with IPv6 in `dns.address_families` (the
/// default), stalls every zone that needs every parent address, and only the config
/// comment said so. It is said once at start (WARN, naming the key to set), in `status`
/// (the daemon's conditions, and "this host's IPv6" as what a waiting zone waits on), in
/// the metrics, and as one alert for the host. The test host may have IPv6 and the lab is
/// IPv4 only, so the missing route is forced with the test builds'
/// `DNSSEC_WARDEN_TEST_NO_IPV6_ROUTE`; detection by the exchanges themselves is
/// `dns::query`'s unit test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_without_ipv6_is_said_once_for_the_host() {
    let zone = "v4only.test.";
    let mut w = LabWorld::start(zone).await;
    let port = free_port();
    let hooks = daemon_wide_config(&mut w, zone, false, "1h", port);
    w.write_config(w.sim.base_url().as_str());
    let daemon = Daemon::start_with_env(
        &w.config,
        w.dir.path().join("daemon.log"),
        &[("DNSSEC_WARDEN_TEST_NO_IPV6_ROUTE", "1".into())],
    );
    let said = "this host has no IPv6 route";
    assert!(daemon.wait_log(said, 1, LONG).await, "{}", daemon.log());
    // Naming the key to set.
    assert!(
        daemon.log().contains("dns.address_families = [\"ipv4\"]"),
        "{}",
        daemon.log()
    );
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    assert!(cli(&w.config, &["enable", zone]).0);
    let s = wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["state"] != "disabled" && s["waiting_on"] == "host"
    })
    .await;
    assert!(
        s["waiting_for"]
            .as_str()
            .unwrap_or_default()
            .starts_with("this host's IPv6"),
        "{s}"
    );
    assert!(
        s["daemon"].as_array().is_some_and(|d| d
            .iter()
            .any(|c| c["kind"] == "host_ipv6_unreachable" && c["alerting"] == true)),
        "{s}"
    );
    let (_, table, _) = cli(&w.config, &["status"]);
    assert!(
        table.contains("DAEMON: host_ipv6_unreachable (warning, alerting)"),
        "{table}"
    );
    assert!(table.contains("[on: host]"), "{table}");
    assert!(wait_file(&hooks, "host_ipv6_unreachable", 1, LONG).await);
    let metrics = scrape(port).await;
    assert!(
        metrics.contains("dnssec_warden_daemon_condition{kind=\"host_ipv6_unreachable\"} 1"),
        "{metrics}"
    );
    // Once, however many zones and looks.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(daemon.log().matches(said).count(), 1, "{}", daemon.log());
    let sent = std::fs::read_to_string(&hooks).unwrap_or_default();
    assert_eq!(
        sent.lines()
            .filter(|l| l.ends_with("host_ipv6_unreachable"))
            .count(),
        1,
        "{sent}"
    );
}

/// A wrong trust anchor through the binary: `dns.trust_anchor_file` holds a key the root
/// does not serve (the IANA root's DS in the lab). It is the operator's anchor that is
/// wrong, not the domains: one critical daemon-wide `trust_anchor_mismatch` naming the
/// file, said once; the zone's validation is unknown, never `validation_failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_trust_anchor_is_one_configuration_alert_not_a_zone_outage() {
    let zone = "anchored.test.";
    let w = LabWorld::start(zone).await;
    std::fs::write(
        w.lab.trust_anchor_path(),
        dnssec_warden::dns::anchor::IANA_ROOT_DS.join("\n") + "\n",
    )
    .unwrap();
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    assert!(cli(&w.config, &["enable", zone]).0);
    let s = wait_status(&w.config, zone, LONG, &daemon, |s| {
        s["state"] == "awaiting_ds"
            && s["daemon"].as_array().is_some_and(|d| {
                d.iter()
                    .any(|c| c["kind"] == "trust_anchor_mismatch" && c["alerting"] == true)
            })
    })
    .await;
    let said = "trust anchor matches no key served";
    assert!(
        daemon.log().contains("dns.trust_anchor_file"),
        "{}",
        daemon.log()
    );
    // Several looks at the zone, whose validation is asked in `awaiting_ds`.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let now = status(&w.config, zone);
    let alerts = now["alerts"].as_array().cloned().unwrap_or_default();
    assert!(
        alerts.iter().all(|a| a["kind"] != "validation_failed"),
        "no outage page for the zone: {now}\n{s}"
    );
    assert_eq!(daemon.log().matches(said).count(), 1, "{}", daemon.log());
}

/// Safety rule 11: "DNSSEC on" forwarded to the provider (it took
/// effect) and answered 502; before the retry, another zone's 429 arms the shared
/// `Retry-After` hold beyond the call's budget. The history must never say the call was
/// not sent or not performed, and once the hold has passed, that it took effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_sent_then_held_by_another_zones_retry_after_is_settled_as_taken_effect() {
    let (zone, other) = ("sent.test.", "other.test.");
    let (w, proxy) = behind_proxy(zone).await;
    assert!(w.sim.handle().add_zone(other));
    w.lab
        .add_child(other, KeySource::provider(w.sim.handle()))
        .unwrap();
    let names = |z: &[&str]| format!("names = {z:?}");
    let rest = w.rest.replace(&names(&[zone]), &names(&[zone, other]));
    let text = format!("{}{rest}", w.provider_section(proxy.url().as_str()));
    std::fs::write(&w.config, text).unwrap();
    // Both intents before the daemon starts: both zones are adopted at its first pass and
    // switched on together at the next, so that their calls are in flight at once.
    for z in [zone, other] {
        assert!(cli(&w.config, &["enable", z]).0);
    }
    let patch = "/dns/v2/zones/sent.test/dnssec";
    proxy.add_fault(
        Rule::new(Fault::AfterForward {
            status: 502,
            delay: Duration::from_millis(1500),
        })
        .on(patch)
        .method("PATCH")
        .times(1),
    );
    // Retry-After 8 s: beyond the 4 s retry budget, so the retry is not even tried.
    proxy.add_fault(
        Rule::new(Fault::retry_after("8"))
            .on("/dns/v2/zones/other.test/dnssec")
            .method("PATCH")
            .once_seen(patch, Duration::from_millis(200))
            .times(1),
    );
    let daemon = Daemon::start(&w.config, w.dir.path().join("daemon.log"));
    assert!(
        daemon
            .wait_log("may or may not have taken effect", 1, LONG)
            .await,
        "{}",
        daemon.log()
    );
    assert!(w.sim.handle().dnssec_enabled(zone), "the PATCH took effect");
    let patches = || {
        proxy
            .requests()
            .iter()
            .filter(|r| r.method == "PATCH" && r.path == patch)
            .count()
    };
    assert_eq!(patches(), 1, "the retry was held, not sent");
    let settled = daemon.wait_log("took effect", 1, LONG).await;
    let (_, story, _) = cli(&w.config, &["history", zone]);
    assert!(settled, "{story}\n{}", daemon.log());
    assert!(
        story.contains("the call to switch DNSSEC on took effect"),
        "{story}"
    );
    for untrue in ["not sent", "not performed"] {
        assert!(!story.contains(untrue), "{untrue:?} in\n{story}");
    }
    assert_eq!(patches(), 1, "it took effect: never asked again");
}

/// The daemon's log must stay its own: a registrar hook that prints lines looking like the
/// daemon's, and 3 MB on each stream. The daemon's log (`--log-format json`) stays the
/// daemon's: every line is one JSON object, the hook's output one escaped field of one of
/// them, bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_output_is_one_bounded_escaped_field_of_the_daemons_log() {
    let zone = "loud.test.";
    let w = LabWorld::start(zone).await;
    let forged = r#"{"timestamp":"2026-01-01T00:00:00Z","level":"WARN","message":"forged: DNSSEC switched off"}"#;
    let script = format!(
        "printf '%s\\n' '{forged}'; printf '%s\\n' '{forged}' >&2; \
         head -c 3000000 /dev/zero | tr '\\0' x; head -c 3000000 /dev/zero | tr '\\0' y >&2"
    );
    let text = std::fs::read_to_string(&w.config).unwrap();
    let registrar =
        format!("[registrar]\ncommand = [\"/bin/sh\", \"-c\", {script:?}]\ntimeout = \"20s\"\n");
    std::fs::write(&w.config, format!("{text}{registrar}")).unwrap();
    let log = w.dir.path().join("daemon.log");
    let child = bin()
        .args(["run", "--log-format", "json", "--config"])
        .arg(&w.config)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("the daemon starts");
    let daemon = Daemon { child, log };
    wait_state(&w.config, zone, "disabled", LONG, &daemon).await;
    assert!(cli(&w.config, &["enable", zone]).0);
    assert!(
        daemon.wait_log("registrar hook succeeded", 1, LONG).await,
        "{:.4000}",
        daemon.log()
    );
    let text = daemon.log();
    assert!(
        text.len() < 512 * 1024,
        "{} bytes of daemon log",
        text.len()
    );
    let mut output = Vec::new();
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a daemon line ({e}): {line:.300}"));
        assert!(
            !value["message"]
                .as_str()
                .unwrap_or_default()
                .contains("forged"),
            "{line:.300}"
        );
        if value["stdout"].is_string() {
            output.push(value);
        }
    }
    assert_eq!(output.len(), 1, "one line with the hook's output");
    let stdout = output[0]["stdout"].as_str().unwrap();
    // Quoted and escaped (the field's Debug form), newlines as `\n`.
    assert!(stdout.starts_with("\"{\\\"timestamp"), "{stdout:.300}");
    assert!(stdout.contains("switched off\\\"}\\nxxx"), "{stdout:.300}");
    assert_eq!(
        output[0]["stdout_bytes"],
        3_000_000 + forged.len() as u64 + 1
    );
    assert_eq!(
        output[0]["stderr_bytes"],
        3_000_000 + forged.len() as u64 + 1
    );
}
