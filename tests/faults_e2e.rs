//! Issue 11 through the real binary: `dnssec-warden run` against the provider simulator
//! behind a fault-injecting proxy, the lab DNS hierarchy for the name servers. Each test is
//! one fault class; the daemon must keep running, keep its word true, and say what is wrong.

mod support;

use std::time::{Duration, Instant};

use dnssec_warden_lab::dns::KeySource;
use support::daemon::{
    Daemon, KEY, LabWorld, bin, cli, status, try_status, wait_state, wait_status,
};
use support::fault_proxy::{Fault, FaultProxy, Rule, flip_dnssec};

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
    let s = status(&w.config, zone);
    assert!(
        s["provider_error"]
            .as_str()
            .unwrap_or_default()
            .contains("rate limited"),
        "{s}"
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

/// Issue 31, item 2 (safety rule 11): "DNSSEC on" forwarded to the provider (it took
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

/// Issue 31, item 4: a registrar hook that prints lines looking like the daemon's, and
/// 3 MB on each stream. The daemon's log (`--log-format json`) stays the daemon's: every
/// line is one JSON object, the hook's output one escaped field of one of them, bounded.
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
