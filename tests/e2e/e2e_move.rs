//! Moving a zone in from another provider, on DNS software nobody here wrote (DESIGN.md
//! section 2 "Delegation", "Moving in", "Moving out"; safety rules 1 and 9): the zone
//! starts signed at an old provider (Knot, its own key, `ns1.old.test.`/`ns2.old.test.`)
//! with the old key's DS at both TLD servers; the test is the registrar (DS and NS edits
//! of `test.` on one TLD server or both) and Unbound, following the real referrals from
//! the root, is the user's resolver. See test-support/src/world.rs. Each test has its own
//! 127.0.B.x block, so they run in parallel; they need port 53 (root), as in CI.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use dnssec_warden_lab::{CallRecord, Signer};
use dnssec_warden_test_support::world::{
    Daemon, OLD_NS, PROVIDER_NS, Probe, RealWorld, Tld, WorldOptions, cli, status,
};
use serde_json::Value;

/// One wait for the daemon (every wait below is bounded by it, in rounds and time).
const LONG: Duration = Duration::from_secs(40);
/// `timing.propagation_margin` in the lab's configuration.
const MARGIN: Duration = Duration::from_secs(1);

/// A world with `zone` at the old provider; `old_ns_ttl` the NS TTL of the old delegation
/// at the TLD servers (2 s when `None`), `val_max_restart` Unbound's (5 when `None`).
async fn world(
    block: u8,
    zone: &str,
    old_ns_ttl: Option<u32>,
    val_max_restart: Option<u32>,
) -> RealWorld {
    let w = RealWorld::start_with(
        block,
        &[zone],
        WorldOptions {
            at_old_provider: vec![zone.to_string()],
            old_ns_ttl,
            val_max_restart,
            ..WorldOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(
        w.follows_referrals,
        "the move suite needs the lab on port 53 (run as root, as CI does): on another port \
         Unbound only has stub zones, pinned to the old servers, and cannot follow a move"
    );
    w
}

/// The zone's state changes as `status --json` showed them, with the time and the whole
/// status at each, and the invariant of safety rule 9 checked at every look: no
/// `ds_to_enter` before the delegation was the provider's at both TLD servers for `hold`
/// (the old NS TTL and the margin).
struct Trail {
    config: PathBuf,
    log: PathBuf,
    zone: String,
    started: Instant,
    transitions: Vec<(Duration, String, Value)>,
    /// When the test completed the delegation to the provider at every TLD server.
    delegated_at: Option<Instant>,
    /// When a `ds_to_enter` was first shown.
    first_ds_to_enter: Option<Instant>,
    /// Rule 9's least delegation hold in this world.
    hold: Duration,
}

impl Trail {
    fn new(config: &Path, log: &Path, zone: &str, hold: Duration) -> Self {
        Self {
            config: config.to_path_buf(),
            log: log.to_path_buf(),
            zone: zone.to_string(),
            started: Instant::now(),
            transitions: Vec::new(),
            delegated_at: None,
            first_ds_to_enter: None,
            hold,
        }
    }

    fn look(&mut self) -> Value {
        let s = status(&self.config, &self.zone);
        let state = s["state"].as_str().unwrap_or("(none)").to_string();
        // A change of state or of the delegation verdict.
        if self
            .transitions
            .last()
            .is_none_or(|t| t.1 != state || t.2["delegation"] != s["delegation"])
        {
            self.transitions
                .push((self.started.elapsed(), state, s.clone()));
        }
        if s["ds_to_enter"].is_string() && self.first_ds_to_enter.is_none() {
            let now = Instant::now();
            self.first_ds_to_enter = Some(now);
            let held = self.delegated_at.map(|t| now.duration_since(t));
            assert!(
                held.is_some_and(|h| h >= self.hold),
                "safety rule 9: a DS to enter was shown {} the delegation was the provider's \
                 at both TLD servers (due at least {:?} after)\nstatus: {s}\n{}",
                match held {
                    Some(h) => format!("{h:?} after"),
                    None => "before".to_string(),
                },
                self.hold,
                self.report()
            );
        }
        s
    }

    /// Looks every 100 ms until `done`; fails the test after `within`.
    async fn until(
        &mut self,
        what: &str,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let until = Instant::now() + within;
        for _ in 0..10_000 {
            let s = self.look();
            if done(&s) {
                return s;
            }
            if Instant::now() > until {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "{}: never {what} within {within:?}\n{}",
            self.zone,
            self.report()
        );
    }

    async fn state(&mut self, want: &str) -> Value {
        self.until(&format!("in {want}"), LONG, |s| s["state"] == want)
            .await
    }

    /// Looks every 100 ms for `time`, each look satisfying `ok`.
    async fn stays(&mut self, what: &str, time: Duration, ok: impl Fn(&Value) -> bool) {
        let until = Instant::now() + time;
        for _ in 0..1000 {
            let s = self.look();
            assert!(ok(&s), "{}: not {what}: {s}\n{}", self.zone, self.report());
            if Instant::now() > until {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn states(&self) -> Vec<String> {
        let mut states: Vec<String> = self.transitions.iter().map(|t| t.1.clone()).collect();
        states.dedup();
        states
    }

    fn report(&self) -> String {
        let mut out = String::from("states seen:\n");
        for (at, state, s) in &self.transitions {
            out.push_str(&format!(
                "  {:>7.1}s {state}: waiting_for {} | delegation {} (provider_ns {}) | ds_to_enter {}\n",
                at.as_secs_f64(),
                s["waiting_for"],
                s["delegation"],
                s["provider_ns"],
                s["ds_to_enter"]
            ));
        }
        let (_, history, _) = cli(&self.config, &["history", &self.zone]);
        let (_, check, err) = cli(&self.config, &["check", &self.zone, "--json"]);
        let check = match serde_json::from_str::<Value>(&check) {
            Ok(c) => format!("{} {}", c["delegation"], c["delegation_servers"]),
            Err(_) => format!("{check}{err}"),
        };
        // The last observation's delegation and parent views, as the daemon stored them.
        let db = self.config.with_file_name("state.db");
        let observed = std::process::Command::new("sqlite3")
            .arg("-readonly")
            .arg(&db)
            .arg(format!(
                "select json_extract(last_observation, '$.delegation'), \
                 json_extract(last_observation, '$.parent') from zones where name = '{}'",
                self.zone
            ))
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|e| format!("(sqlite3: {e})"));
        format!(
            "{out}history:\n{history}check now: {check}\nlast observation: {observed}\n--- daemon log (tail) ---\n{}",
            tail(&std::fs::read_to_string(&self.log).unwrap_or_default(), 60)
        )
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// `tag 13 2 HEX` named in `text` (digest compared without case or spaces).
fn names_ds(text: &str, ds: &str) -> bool {
    let fields: Vec<&str> = ds.split_whitespace().collect();
    let flat: String = text
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_uppercase();
    let tag_named = text
        .split(|c: char| !c.is_ascii_digit())
        .any(|w| w == fields[0]);
    tag_named && flat.contains(&fields[3..].concat().to_ascii_uppercase())
}

fn switches(calls: &[CallRecord], zone: &str) -> Vec<(SystemTime, bool)> {
    calls
        .iter()
        .filter_map(|c| {
            if c.is_dnssec_on(zone) {
                Some((c.at, true))
            } else if c.is_dnssec_off(zone) {
                Some((c.at, false))
            } else {
                None
            }
        })
        .collect()
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// (a) The move in the safe order, DNSSEC on at both ends: insecure first (the old DS
/// removed at the registrar and its TTL waited out), then the NS change (at one TLD
/// server, then the other), the old delegation's TTL waited out, and only then the new DS.
/// Unbound, asked all along, never fails validation. It fails at the first bogus answer
/// (`val-max-restart: 0`: by default it asks other servers and the parent again, which
/// hid even a DS published at the moment of the NS change in the lab), and it keeps the
/// old delegation for its NS TTL, 6 s here (at the TLD servers and the old servers'
/// apex): in this world the probe fails a DS entered 2 s after the NS change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_in_with_dnssec_on_at_both_ends() {
    let zone = "move.test.";
    let old_ns_ttl = 6;
    let hold = Duration::from_secs(old_ns_ttl.into()) + MARGIN;
    let t0 = Instant::now();
    let w = world(65, zone, Some(old_ns_ttl), Some(0)).await;
    let config = w.config.clone();
    let old_ds = w.old_ds(zone).unwrap();
    // The starting point: secure, through the old provider.
    assert_eq!(
        w.resolve_fresh(zone).await.unwrap(),
        ("No Error".to_string(), true),
        "signed at the old provider, its DS at the parent\n{}",
        w.logs()
    );
    assert_eq!(w.who_answers(zone).await.unwrap(), "old");
    let world_up = t0.elapsed();

    let probe = Probe::start(&w, zone);
    let log = w.dir.path().join("daemon.log");
    let daemon = Daemon::start(&config, &log).unwrap();
    let mut trail = Trail::new(&config, &log, zone, hold);

    // Foreign, unsigned at the provider, no intent: only watched.
    trail.state("disabled").await;
    let (ok, _, err) = cli(&config, &["enable", zone]);
    assert!(ok, "{err}");
    let t_enable = Instant::now();

    // First the old DS goes, named exactly; nothing is asked of the provider meanwhile.
    let s = trail.state("awaiting_ds_removal").await;
    let waiting = s["waiting_for"].as_str().unwrap_or_default();
    assert!(
        names_ds(waiting, &old_ds),
        "status waiting_for names the DS to remove at the parent ({old_ds}): {s}\nhistory:\n{}",
        cli(&config, &["history", zone]).1
    );
    w.remove_ds(zone, Tld::A).unwrap();
    trail
        .stays(
            "awaiting_ds_removal while TLD B still has the DS",
            Duration::from_secs(2),
            |s| s["state"] == "awaiting_ds_removal",
        )
        .await;
    w.remove_ds(zone, Tld::B).unwrap();
    let t_ds_gone = Instant::now();
    trail.state("ttl_wait").await;
    let s = trail.state("awaiting_delegation").await;
    let t_awaiting_delegation = Instant::now();
    let waiting = s["waiting_for"].as_str().unwrap_or_default();
    for ns in PROVIDER_NS {
        assert!(
            waiting.contains(ns),
            "awaiting_delegation names the provider's name servers: {s}"
        );
    }
    let calls = w.sim.handle().calls();
    assert!(
        switches(&calls, zone).is_empty(),
        "no DNSSEC switch before the delegation: {calls:?}"
    );

    // The NS change at TLD A only: mixed, and the zone waits.
    w.delegate(zone, Tld::A, &PROVIDER_NS).unwrap();
    trail
        .until("delegation mixed", Duration::from_secs(10), |s| {
            s["delegation"] == "mixed"
        })
        .await;
    trail
        .stays(
            "awaiting_delegation, nothing to enter, while TLD B delegates to the old servers",
            Duration::from_secs(2),
            |s| {
                s["state"] == "awaiting_delegation"
                    && s["ds_to_enter"].is_null()
                    && s["dnskey_to_enter"].is_null()
            },
        )
        .await;
    // Then at TLD B: the delegation is the provider's everywhere. The switch may come
    // as soon as knotd serves it, before `knotc` has returned (a loaded machine): its
    // bound is the edit's start; the DS hold's, conservatively, its end.
    let delegated_wall = SystemTime::now();
    w.delegate(zone, Tld::B, &PROVIDER_NS).unwrap();
    let delegated = Instant::now();
    trail.delegated_at = Some(delegated);
    let s = trail
        .until("awaiting_ds with a DS to enter", LONG, |s| {
            s["state"] == "awaiting_ds" && s["ds_to_enter"].is_string()
        })
        .await;
    let t_ds_shown = Instant::now();
    let new_ds = w.knot_ds(zone).unwrap();
    assert!(
        names_ds(s["ds_to_enter"].as_str().unwrap_or_default(), &new_ds),
        "the DS to enter is the one of the key the provider's Knot signs with ({new_ds}): {s}"
    );
    // Its DNSKEY form beside it: the key the DS names.
    let dnskey = s["dnskey_to_enter"]
        .as_str()
        .and_then(|l| l.split_once(" IN DNSKEY "))
        .filter(|(owner, _)| *owner == zone)
        .and_then(|(_, rdata)| dnssec_warden::dnssec::Dnskey::parse_text(rdata))
        .unwrap_or_else(|| panic!("no DNSKEY form of the key to enter: {s}"));
    let ds = dnskey
        .to_ds(zone, dnssec_warden::dnssec::DigestType::Sha256)
        .unwrap();
    let line = format!(
        "{} {} {} {}",
        ds.key_tag,
        ds.algorithm,
        ds.digest_type,
        dnssec_warden::dnssec::hex_upper(&ds.digest)
    );
    assert!(
        names_ds(s["ds_to_enter"].as_str().unwrap_or_default(), &line),
        "{line}: {s}"
    );
    assert!(!names_ds(
        s["ds_to_enter"].as_str().unwrap_or_default(),
        &old_ds
    ));
    w.publish_ds(zone, Tld::Both, &new_ds).unwrap();
    trail.state("active").await;
    let t_active = Instant::now();
    // A few more probes at the new provider, secure, then stop.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (bogus, seen) = probe.finish().await;
    assert_eq!(
        bogus,
        0,
        "Unbound failed validation during the move: {seen:?}\nprovider calls: {:?}\n{}",
        w.sim.handle().calls(),
        trail.report()
    );
    assert_eq!(
        w.resolve_fresh(zone).await.unwrap(),
        ("No Error".to_string(), true),
        "Unbound validates at the new provider"
    );
    assert_eq!(w.who_answers(zone).await.unwrap(), "new");

    // The order of the walk (ds_observed may pass between two looks).
    let states = trail.states();
    let expected = [
        "disabled",
        "awaiting_ds_removal",
        "ttl_wait",
        "awaiting_delegation",
        "enabling",
        "awaiting_ds",
        "active",
    ];
    let walk: Vec<&str> = states
        .iter()
        .map(String::as_str)
        .filter(|s| *s != "(none)" && *s != "ds_observed")
        .collect();
    assert_eq!(walk, expected, "{}", trail.report());

    // The provider: switched on once, after the delegation was complete; never off.
    let calls = w.sim.handle().calls();
    let sw = switches(&calls, zone);
    assert!(sw.iter().all(|(_, on)| *on), "never DNSSEC off: {sw:?}");
    assert!(!sw.is_empty(), "switched on at the provider: {calls:?}");
    assert!(
        sw.iter().all(|(at, _)| *at >= delegated_wall),
        "switched on only once the delegation was the provider's: {sw:?}"
    );
    assert!(w.sim.handle().dnssec_enabled(zone));
    let alerts = status(&config, zone)["alerts"].clone();
    assert_eq!(alerts, Value::Array(vec![]), "no alert open at the end");
    drop(daemon);

    eprintln!(
        "move in: world up {}, enable -> awaiting_delegation {}, old DS gone -> \
         awaiting_delegation {}, delegated -> DS shown {}, DS shown -> active {}, total {}\n{}",
        secs(world_up),
        secs(t_awaiting_delegation - t_enable),
        secs(t_awaiting_delegation - t_ds_gone),
        secs(t_ds_shown - delegated),
        secs(t_active - t_ds_shown),
        secs(t0.elapsed()),
        trail
            .report()
            .lines()
            .take(12)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// (b) The move in the wrong order: the NS changed to the provider (which signs with its
/// own key) while the old provider's DS stays at the parent. Every validator following
/// the new delegation fails; the daemon pages at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrongly_ordered_move_raises_the_delegation_alert() {
    let zone = "hasty.test.";
    let t0 = Instant::now();
    let w = world(66, zone, None, None).await;
    let config = w.config.clone();
    assert_eq!(
        w.resolve_fresh(zone).await.unwrap(),
        ("No Error".to_string(), true),
        "signed at the old provider, its DS at the parent\n{}",
        w.logs()
    );
    // DNSSEC on at the provider, switched on in its control panel (the simulator asks the
    // signer which key it signs with): the provider's servers serve their own key.
    w.signer.enable(zone).unwrap();
    let log = w.dir.path().join("daemon.log");
    let daemon = Daemon::start(&config, &log).unwrap();
    let mut trail = Trail::new(&config, &log, zone, MARGIN);
    // Foreign and signed at the provider, no intent: awaiting_delegation, nothing raised
    // (the old provider's chain validates).
    trail.state("awaiting_delegation").await;
    trail
        .stays("without alerts", Duration::from_secs(2), |s| {
            s["alerts"] == Value::Array(vec![])
        })
        .await;

    w.delegate(zone, Tld::Both, &PROVIDER_NS).unwrap();
    let changed = Instant::now();
    let s = trail
        .until(
            "with a critical delegation alert",
            Duration::from_secs(10),
            |s| {
                s["alerts"].as_array().is_some_and(|a| {
                    a.iter().any(|x| {
                        x["kind"].as_str().is_some_and(|k| k.contains("delegation"))
                            && x["severity"] == "critical"
                    })
                })
            },
        )
        .await;
    let raised = changed.elapsed();
    // One poll of a waiting zone is 300 ms in the lab; an observation asks every server.
    assert!(
        raised < Duration::from_secs(6),
        "raised {raised:?} after the NS change: {s}"
    );

    // The outage is real: Unbound follows the new delegation and fails validation.
    let mut outage = None;
    for _ in 0..50 {
        let rcode = w.resolve_fresh(zone).await.unwrap().0;
        let who = w.who_answers(zone).await.unwrap_or_default();
        if rcode.contains("SERVFAIL") || rcode.contains("Server Failure") {
            outage = Some((rcode, who));
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (rcode, who) = outage.unwrap_or_else(|| panic!("Unbound never failed\n{}", w.logs()));
    assert_eq!(who, "new", "{rcode}: Unbound followed the new delegation");
    let sw = switches(&w.sim.handle().calls(), zone);
    assert!(sw.iter().all(|(_, on)| *on), "never DNSSEC off: {sw:?}");
    drop(daemon);
    eprintln!(
        "wrong order: alert {} after the NS change, total {}\n{}",
        secs(raised),
        secs(t0.elapsed()),
        serde_json::to_string_pretty(&s["alerts"]).unwrap_or_default()
    );
}

/// The lab itself: Unbound follows the referrals, so a re-delegation at the TLD servers
/// changes which servers answer once the NS TTL (2 s) has passed, without a flush.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lab_resolver_follows_a_redelegation() {
    let zone = "lab.test.";
    let t0 = Instant::now();
    let w = world(67, zone, None, None).await;
    assert_eq!(
        w.resolve_fresh(zone).await.unwrap(),
        ("No Error".to_string(), true),
        "secure through the old provider\n{}",
        w.logs()
    );
    assert_eq!(w.who_answers(zone).await.unwrap(), "old");

    // Insecure first (the provider does not sign), then to the provider and back.
    w.remove_ds(zone, Tld::Both).unwrap();
    async fn follows(w: &RealWorld, zone: &str, want: &str) -> Duration {
        let from = Instant::now();
        for _ in 0..100 {
            if w.who_answers(zone).await.unwrap_or_default() == want {
                return from.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("Unbound never followed the delegation to the {want} servers");
    }
    w.delegate(zone, Tld::Both, &PROVIDER_NS).unwrap();
    let to_new = follows(&w, zone, "new").await;
    assert_eq!(
        w.resolve_fresh(zone).await.unwrap(),
        ("No Error".to_string(), false),
        "insecure at the provider, no DS"
    );
    w.delegate(zone, Tld::Both, &OLD_NS).unwrap();
    let to_old = follows(&w, zone, "old").await;
    assert!(
        to_new < Duration::from_secs(10) && to_old < Duration::from_secs(10),
        "followed within the TTLs: {to_new:?}, {to_old:?}"
    );
    eprintln!(
        "lab: followed the move in {}, back in {}, total {}",
        secs(to_new),
        secs(to_old),
        secs(t0.elapsed())
    );
}
