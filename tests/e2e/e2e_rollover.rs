//! Key rollovers (DESIGN.md section 2, "Key rollovers", safety rule 16) through the real
//! binary, on DNS software nobody here wrote: a zone secured at a real PowerDNS
//! Authoritative (Debian's `pdns-server`, its HTTP API the daemon's `[providers.pdns]`)
//! under the lab's signed Knot root and two Knot servers of `test.`, then
//! `dnssec-warden roll ZONE` driven to its end. The test is the registrar: a `[registrar]`
//! hook records each request (`add` with the DS to keep, `remove`) and the test makes that
//! edit at both TLD servers. Unbound, validating from the lab's root anchor and never
//! flushed, is asked all along, from before the roll to after it: every answer must be
//! SECURE (no SERVFAIL, no INSECURE). So is a resolver chain (test-support/src/chain.rs)
//! whose cache holds every RRset with its RRSIGs for its own TTL and whose validator
//! validates afresh at every question: where the zone's data outlives its DNSKEY set by
//! far ([`CACHED`]), a key removed while a signature of it may still be cached fails
//! there, as the mutant test shows. At the end PowerDNS holds and serves the new key
//! alone, and both TLD servers publish its DS alone. Two rolls have the lab registry of
//! `test.` (dnssec_warden_lab::registry) as parent, which scans the child's CDS and is
//! told by NOTIFY(CDS): a CSK roll asks it through PowerDNS's CDS with no registrar at all
//! (section 2, "By the CDS"), an algorithm roll withdraws the CDS and asks the registrar.
//! Each test has its own 127.0.B.x block (96-102, 105-106); see test-support/src/world.rs.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dnssec_warden_test_support::chain::ResolverChain;
use dnssec_warden_test_support::world::{
    Daemon, HookCall, PDNS_API_KEY, Probe, ProbeReport, RealWorld, RegistryOptions, Tld,
    WorldOptions, cli, ds_key, hook_calls, ip, status, wait_state,
};
use serde_json::Value;

/// One wait for the daemon outside the roll (enabling, the first DS).
const LONG: Duration = Duration::from_secs(60);
/// A whole roll, from `roll` to its end.
const ROLL_LIMIT: Duration = Duration::from_secs(120);

/// The zone's TTLs at PowerDNS during a roll: the DNSKEY set's (PowerDNS serves it with
/// the SOA's negative TTL: the SOA's TTL and minimum are set to it) and that of the
/// names the resolver chain asks.
#[derive(Debug, Clone, Copy)]
struct Ttls {
    dnskey: u32,
    data: u32,
}

/// The lab's: everything 2 s (the chain then holds nothing long).
const LAB: Ttls = Ttls { dnskey: 2, data: 2 };
/// Data cached far longer than the DNSKEY set: a key removed one DNSKEY TTL early (less
/// the margin of 1 s and the daemon's confirmation lag) leaves a window of seconds in
/// which a cached signature of it meets a fresh DNSKEY set without it.
const CACHED: Ttls = Ttls {
    dnskey: 8,
    data: 20,
};
/// The names the chain asks (`cN.ZONE A`), one more every `data / CHAIN_NAMES`: the
/// cache then holds a copy fetched less than that long before any instant.
const CHAIN_NAMES: u32 = 20;

/// The mutant the daemon runs with in [`a_zsk_roll_removing_the_old_key_early_fails_the_chain`].
const MUTANT: &str = "DNSSEC_WARDEN_TEST_MUTANT_EARLY_REMOVAL";

/// The double-DS method's phases (a KSK or a CSK), in order.
const DOUBLE_DS: [&str; 6] = [
    "publishing",
    "awaiting_new_ds",
    "swapping",
    "removing_old_ds",
    "removing_old_key",
    "done",
];
/// An algorithm rollover's phases (RFC 6781 4.1.4), in order.
const ALGORITHM: [&str; 7] = [
    "signing_unpublished",
    "publishing_new_algorithm",
    "awaiting_new_ds",
    "removing_old_ds",
    "unpublishing_old_algorithm",
    "removing_old_signatures",
    "done",
];

/// A world whose `zone` PowerDNS signs (with `pdns`'s key algorithms), the daemon
/// running with the registrar hook recorded, and the zone `active` there with its DS at
/// both TLD servers.
struct Secured {
    w: RealWorld,
    calls: PathBuf,
    log: PathBuf,
    daemon: Daemon,
}

/// [`secure_at_powerdns`] with the daemon's environment (a mutant's switch).
async fn secure_at_powerdns_with(
    block: u8,
    zone: &str,
    pdns: WorldOptions,
    env: &[(&str, String)],
) -> Secured {
    let w = RealWorld::start_with(
        block,
        &[zone],
        WorldOptions {
            at_powerdns: vec![zone.to_string()],
            // Unbound fails at the first bogus answer instead of asking other servers
            // and the parent again (which could hide one).
            val_max_restart: Some(0),
            ..pdns
        },
    )
    .await
    .unwrap_or_else(|e| panic!("the world starts: {e}"));
    let calls = w.registrar_hook("").unwrap();
    let log = w.dir.path().join("daemon.log");
    let daemon = Daemon::start_with_env(&w.config, &log, env).unwrap();
    w.enable_at_powerdns(zone, &daemon, LONG)
        .await
        .unwrap_or_else(|e| panic!("secure at PowerDNS: {e}"));
    Secured {
        w,
        calls,
        log,
        daemon,
    }
}

async fn secure_at_powerdns(block: u8, zone: &str, pdns: WorldOptions) -> Secured {
    secure_at_powerdns_with(block, zone, pdns, &[]).await
}

/// A world whose `zone` PowerDNS signs and whose parent is the lab registry of `test.`
/// (`registry`): the zone enabled through the daemon with no registrar step (the daemon
/// publishes the CDS, the registry the first DS), `active` and validated. The registrar
/// hook is recorded all the same, so that a test can say it never ran.
async fn secure_through_registry(
    block: u8,
    zone: &str,
    pdns: WorldOptions,
    registry: RegistryOptions,
) -> Secured {
    let w = RealWorld::start_with(
        block,
        &[zone],
        WorldOptions {
            at_powerdns: vec![zone.to_string()],
            registry: Some(registry),
            val_max_restart: Some(0),
            ..pdns
        },
    )
    .await
    .unwrap_or_else(|e| panic!("the world starts: {e}"));
    let calls = w.registrar_hook("").unwrap();
    let log = w.dir.path().join("daemon.log");
    let daemon = Daemon::start(&w.config, &log).unwrap();
    let story = |w: &RealWorld| {
        format!(
            "{}\n--- registry ---\n{}\n--- daemon log ---\n{}",
            history(&w.config, zone),
            w.registry
                .as_ref()
                .map(|r| r.story(zone))
                .unwrap_or_default(),
            tail(&daemon.log(), 60)
        )
    };
    wait_state(&w.config, zone, "disabled", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", story(&w)));
    let (ok, _, err) = cli(&w.config, &["enable", zone]);
    assert!(ok, "{err}");
    wait_state(&w.config, zone, "active", LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", story(&w)));
    let (rcode, ad) = w.resolve_fresh(zone).await.unwrap();
    assert_eq!((rcode.as_str(), ad), ("No Error", true), "{}", story(&w));
    assert!(
        hook_calls(&calls).is_empty(),
        "the first DS came from the registry, the registrar was never asked: {:?}",
        hook_calls(&calls)
    );
    Secured {
        w,
        calls,
        log,
        daemon,
    }
}

/// Sets the zone's TTLs at PowerDNS through its API (the SOA's TTL and minimum, the
/// chain's names with `ttls.data`), and checks what PowerDNS then serves.
async fn set_ttls(w: &RealWorld, zone: &str, ttls: Ttls) {
    let pdns = w.pdns.as_ref().expect("a PowerDNS in this world");
    let url = format!("{}api/v1/servers/localhost/zones/{zone}", pdns.base_url());
    let client = reqwest::Client::new();
    let got: Value = client
        .get(&url)
        .header("X-API-Key", PDNS_API_KEY)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .json()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let soa = got["rrsets"]
        .as_array()
        .and_then(|sets| sets.iter().find(|r| r["type"] == "SOA"))
        .and_then(|r| r["records"][0]["content"].as_str())
        .unwrap_or_else(|| panic!("no SOA in {got}"));
    let mut fields: Vec<String> = soa.split_whitespace().map(str::to_string).collect();
    assert_eq!(fields.len(), 7, "{soa}");
    fields[6] = ttls.dnskey.to_string();
    let record = |content: String| serde_json::json!([{"content": content, "disabled": false}]);
    let mut rrsets = vec![serde_json::json!({
        "name": zone, "type": "SOA", "ttl": ttls.dnskey, "changetype": "REPLACE",
        "records": record(fields.join(" ")),
    })];
    for i in 0..CHAIN_NAMES {
        rrsets.push(serde_json::json!({
            "name": format!("c{i}.{zone}"), "type": "A", "ttl": ttls.data,
            "changetype": "REPLACE", "records": record("192.0.2.1".into()),
        }));
    }
    let answer = client
        .patch(&url)
        .header("X-API-Key", PDNS_API_KEY)
        .timeout(Duration::from_secs(10))
        .json(&serde_json::json!({ "rrsets": rrsets }))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    assert!(
        answer.status().is_success(),
        "PATCH {url}: {}",
        answer.text().await.unwrap_or_default()
    );
    // Both TTLs as served, at both addresses.
    use dnssec_warden::dns::Transport;
    use hickory_proto::rr::RecordType;
    let transport = dnssec_warden::dns::NetTransport::new(Duration::from_secs(2));
    for host in [8, 9] {
        let server = std::net::SocketAddr::from((ip(w.block, host), w.port));
        for (name, rtype, want) in [
            (zone.to_string(), RecordType::DNSKEY, ttls.dnskey),
            (format!("c0.{zone}"), RecordType::A, ttls.data),
        ] {
            let qname = dnssec_warden::dns::wire::parse_name(&name).expect("a name");
            let q = dnssec_warden::dns::wire::build_query(&qname, rtype, false);
            let m = transport
                .exchange(server, &q)
                .await
                .unwrap_or_else(|e| panic!("{server} {name} {rtype}: {e}"));
            let ttl = m
                .answers
                .iter()
                .find(|r| r.record_type() == rtype)
                .map(|r| r.ttl);
            assert_eq!(ttl, Some(want), "{server} {name} {rtype}: {m:?}");
        }
    }
}

/// PowerDNS's key listing for the zone, through its API (`GET .../cryptokeys`).
async fn cryptokeys(w: &RealWorld, zone: &str) -> Vec<Value> {
    let pdns = w.pdns.as_ref().expect("a PowerDNS in this world");
    let url = format!(
        "{}api/v1/servers/localhost/zones/{zone}/cryptokeys",
        pdns.base_url()
    );
    let answer = reqwest::Client::new()
        .get(&url)
        .header("X-API-Key", PDNS_API_KEY)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let keys: Value = answer.json().await.unwrap_or_else(|e| panic!("{url}: {e}"));
    keys.as_array().cloned().unwrap_or_default()
}

/// A key's id in the listing.
fn key_id(key: &Value) -> String {
    key["id"].to_string()
}

/// The public key (base64) of a `flags 3 alg KEY` DNSKEY text.
fn public_key(dnskey: &str) -> String {
    dnskey.split_whitespace().skip(3).collect::<String>()
}

/// The DNSKEY set each PowerDNS address serves, asked directly: each key's public key,
/// sorted.
async fn served_keys(w: &RealWorld, zone: &str) -> Vec<Vec<String>> {
    use dnssec_warden::dns::Transport;
    use hickory_proto::rr::RecordType;
    let transport = dnssec_warden::dns::NetTransport::new(Duration::from_secs(2));
    let name = dnssec_warden::dns::wire::parse_name(zone).expect("a zone name");
    let mut each = Vec::new();
    for host in [8, 9] {
        let server = std::net::SocketAddr::from((ip(w.block, host), w.port));
        let q = dnssec_warden::dns::wire::build_query(&name, RecordType::DNSKEY, false);
        let m = transport
            .exchange(server, &q)
            .await
            .unwrap_or_else(|e| panic!("{server} {zone} DNSKEY: {e}"));
        let mut keys: Vec<String> = m
            .answers
            .iter()
            .filter(|r| r.record_type() == RecordType::DNSKEY)
            .map(|r| public_key(&r.data.to_string()))
            .collect();
        keys.sort();
        each.push(keys);
    }
    each
}

fn history(config: &Path, zone: &str) -> String {
    cli(config, &["history", zone]).1
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// One roll, watched and driven.
struct Run<'a> {
    w: &'a RealWorld,
    zone: &'a str,
    log: PathBuf,
    daemon: Daemon,
    /// The hook's file of calls, and how many of them the test acted on.
    calls: PathBuf,
    acted: usize,
    /// The largest `DNSSEC_WARDEN_SEQ` acted on: as the hook's contract asks of
    /// automation, a request at or below it (one delivered again after a SIGKILL) is
    /// not acted on twice.
    last_seq: u64,
    started: Instant,
    /// Each phase when first seen, with what it waited for.
    phases: Vec<String>,
    /// What the test saw and did, with when.
    acts: Vec<String>,
    /// What the roll waited for at the last look.
    waiting: Option<String>,
    /// Every key id PowerDNS listed during the roll.
    key_ids: BTreeSet<String>,
    /// The phase in which the roll is aborted, once the registrar added the new DS.
    abort_in: Option<&'static str>,
    /// The phases in which the daemon is SIGKILLed (once each, once PowerDNS lists more
    /// keys than the roll began with) and restarted on the same database.
    kill_in: Vec<&'static str>,
    keys_before: usize,
    kills: Vec<String>,
    /// Instants (from the declaration) at which the daemon is SIGKILLed, each with the
    /// pause before it is restarted on the same database; in order.
    kill_at: Vec<(Duration, Duration)>,
    /// The daemon's environment, at every restart.
    env: &'a [(&'a str, String)],
    /// The parent takes the DS from the child's CDS: any call of the registrar hook is a
    /// failure.
    by_cds: bool,
}

impl Run<'_> {
    fn note(&mut self, what: String) {
        let line = format!(
            "[127.0.{}.x {:>5.1}s] {what}",
            self.w.block,
            self.started.elapsed().as_secs_f64()
        );
        eprintln!("{line}");
        self.acts.push(line);
    }

    fn report(&self) -> String {
        format!(
            "--- the test saw and did ---\n{}\n--- status ---\n{}\n--- history ---\n{}\n--- daemon log (tail) ---\n{}",
            self.acts.join("\n"),
            status(&self.w.config, self.zone),
            history(&self.w.config, self.zone),
            tail(&self.daemon.log(), 60)
        )
    }

    /// The status now; a phase seen for the first time is noted, and the phases never go
    /// back.
    async fn look(&mut self, order: &[&str]) -> Value {
        let s = status(&self.w.config, self.zone);
        if let Some(phase) = s["key_roll"]["phase"].as_str()
            && self.phases.last().is_none_or(|p| p != phase)
        {
            let at = order.iter().position(|p| *p == phase);
            let last = self
                .phases
                .last()
                .and_then(|p| order.iter().position(|q| q == p));
            assert!(
                at.is_some() && at >= last,
                "the roll went from {:?} to {phase}\n{}",
                self.phases.last(),
                self.report()
            );
            self.note(format!(
                "phase {phase}: waiting for {} (on {})",
                s["waiting_for"].as_str().unwrap_or_default(),
                s["waiting_on"].as_str().unwrap_or_default()
            ));
            self.phases.push(phase.to_string());
        } else if let Some(waiting) = s["waiting_for"].as_str()
            && self.waiting.as_deref() != Some(waiting)
        {
            let until = s["until"]
                .as_str()
                .map(|t| format!(" (until {t})"))
                .unwrap_or_default();
            self.note(format!("waiting for {waiting}{until}"));
        }
        self.waiting = s["waiting_for"].as_str().map(str::to_string);
        let keys = cryptokeys(self.w, self.zone).await;
        for k in &keys {
            if self.key_ids.insert(key_id(k)) {
                let what = format!(
                    "PowerDNS lists key {} ({}, algorithm {}, active {}, published {})",
                    key_id(k),
                    k["keytype"].as_str().unwrap_or_default(),
                    k["algorithm"].as_str().unwrap_or_default(),
                    k["active"],
                    k["published"]
                );
                self.note(what);
            }
        }
        if let Some(phase) = self.phases.last().cloned()
            && let Some(at) = self.kill_in.iter().position(|p| *p == phase)
            && keys.len() > self.keys_before
        {
            self.kill_in.remove(at);
            self.daemon.kill();
            self.note(format!("daemon SIGKILLed in {phase}"));
            self.kills.push(phase);
            tokio::time::sleep(Duration::from_millis(700)).await;
            self.restart();
        }
        s
    }

    fn restart(&mut self) {
        self.daemon = Daemon::start_with_env(&self.w.config, &self.log, self.env).unwrap();
        self.note("daemon restarted on the same database".into());
    }

    /// SIGKILLs the daemon if the schedule's next instant has come, and restarts it
    /// after the schedule's pause.
    async fn kill_on_schedule(&mut self) {
        let Some(&(at, pause)) = self.kill_at.first() else {
            return;
        };
        if self.started.elapsed() < at {
            return;
        }
        self.kill_at.remove(0);
        self.daemon.kill();
        let phase = self.phases.last().cloned().unwrap_or_default();
        self.note(format!(
            "daemon SIGKILLed (scheduled at {:.1}s, in {phase}); restarted in {} ms",
            at.as_secs_f64(),
            pause.as_millis()
        ));
        self.kills.push(phase);
        tokio::time::sleep(pause).await;
        self.restart();
    }

    /// Acts on the hook's calls not yet acted on, at both TLD servers.
    async fn registrar(&mut self) {
        let calls = hook_calls(&self.calls);
        let fresh: Vec<HookCall> = calls.into_iter().skip(self.acted).collect();
        for call in fresh {
            self.acted += 1;
            assert!(
                !self.by_cds,
                "a roll whose parent reads the CDS called the registrar hook: {call:?}\n{}",
                self.report()
            );
            assert_eq!(call.zone, self.zone, "{call:?}");
            let seq: u64 = call.seq.parse().expect("DNSSEC_WARDEN_SEQ is a number");
            if seq <= self.last_seq {
                self.note(format!(
                    "registrar ({} {seq}): delivered again, already acted on",
                    call.action
                ));
                continue;
            }
            self.last_seq = seq;
            let before = self.w.parent_view(self.zone, Tld::A).await.unwrap().0;
            match call.action.as_str() {
                "add" => {
                    // The DS to keep is the one the parent publishes.
                    assert_eq!(
                        call.keep_records(),
                        before,
                        "add keeps what the parent has: {call:?}\n{}",
                        self.report()
                    );
                    for ds in call.ds_records() {
                        self.w.add_ds(self.zone, Tld::Both, &ds).unwrap();
                    }
                }
                "remove" => {
                    for ds in call.keep_records() {
                        assert!(
                            before.contains(&ds),
                            "remove keeps a DS the parent has: {call:?} {before:?}"
                        );
                    }
                    for ds in call.ds_records() {
                        self.w.remove_one_ds(self.zone, Tld::Both, &ds).unwrap();
                    }
                }
                other => panic!(
                    "a roll asked the registrar to {other}: {call:?}\n{}",
                    self.report()
                ),
            }
            self.note(format!(
                "registrar ({} {}): {} {:?} keeping {:?} at both TLD servers",
                call.action,
                call.seq,
                call.action,
                call.ds_records(),
                call.keep_records()
            ));
        }
    }
}

/// What a roll ended with.
struct Rolled {
    calls: Vec<HookCall>,
    key_ids: BTreeSet<String>,
    log: String,
    took: Duration,
    /// What the resolver chain answered, and its validator's logged failures.
    chain: ProbeReport,
    chain_failures: Vec<String>,
}

/// What the resolver chain is to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// SECURE at every question.
    Secure,
    /// A validation failure at least once (a mutant's roll).
    ValidationFailure,
}

/// How a roll is to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The entry point replaced: one key, new, its DS alone at the parent; the registrar
    /// asked to add the new DS, then to remove the old.
    NewSep,
    /// The ZSK replaced: the KSK kept beside a new ZSK, the DS unchanged, the registrar
    /// never asked.
    NewZsk,
    /// Aborted once the new DS was added: the old key alone again, its DS alone; the
    /// registrar asked to add the new DS, then to remove it again.
    Old,
    /// As [`End::NewSep`], the parent's DS changed by the registry from the child's CDS:
    /// the registrar never asked.
    NewSepByCds,
}

/// A roll to drive.
struct Plan<'a> {
    /// `roll ZONE` and these.
    args: &'a [&'a str],
    /// The phases it goes through, in order, ending with `done`.
    order: &'a [&'a str],
    /// The daemon SIGKILLed in each of these phases, once PowerDNS lists the new key.
    kill_in: &'a [&'static str],
    /// `roll ZONE --abort` in this phase, once the registrar acted on the new DS.
    abort_in: Option<&'static str>,
    end: End,
    /// The zone's TTLs from the declaration on.
    ttls: Ttls,
    /// The daemon SIGKILLed at these instants (from the declaration), each restarted
    /// after its pause.
    kill_at: &'a [(Duration, Duration)],
    /// The daemon's environment (it was started with), at every restart.
    env: &'a [(&'a str, String)],
    expect: Expect,
}

/// Declares `roll ZONE args` on a zone `active` at PowerDNS with its DS at both TLD
/// servers, and drives it to its end as the registrar, a probe asking Unbound all along;
/// checks the phases came in the plan's order, every answer was SECURE, and the end:
/// every PowerDNS address serves the keys PowerDNS lists, those the plan's `end` says,
/// and both TLD servers publish the DS it says alone.
async fn roll(
    w: &RealWorld,
    zone: &str,
    daemon: Daemon,
    log: PathBuf,
    calls: PathBuf,
    plan: Plan<'_>,
) -> Rolled {
    let Plan {
        args,
        order,
        kill_in,
        abort_in,
        end,
        ttls,
        kill_at,
        env,
        expect,
    } = plan;
    let old_ds = ds_key(&w.pdns_ds(zone).unwrap());
    let before = cryptokeys(w, zone).await;
    let old_ids: BTreeSet<String> = before.iter().map(key_id).collect();
    // The hook's calls before the roll (the first DS's `publish`) are the enabling's.
    let earlier = hook_calls(&calls).len();
    set_ttls(w, zone, ttls).await;
    let servers = [ip(w.block, 8), ip(w.block, 9)];
    let mut chain = ResolverChain::start(w, zone, &servers)
        .await
        .unwrap_or_else(|e| panic!("the resolver chain starts: {e}"));
    let chain_probe = chain.probe(
        zone,
        (0..CHAIN_NAMES).map(|i| format!("c{i}.{zone}")).collect(),
        Duration::from_secs(ttls.data.into()) / CHAIN_NAMES,
        servers
            .iter()
            .map(|a| std::net::SocketAddr::from((*a, w.port)))
            .collect(),
    );
    let probe = Probe::start(w, zone);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut cmd = vec!["roll", zone];
    cmd.extend_from_slice(args);
    let (ok, out, err) = cli(&w.config, &cmd);
    assert!(ok, "roll refused: {out}{err}\n{}", daemon.log());
    let mut run = Run {
        w,
        zone,
        log,
        daemon,
        calls,
        acted: earlier,
        last_seq: 0,
        started: Instant::now(),
        phases: Vec::new(),
        acts: Vec::new(),
        waiting: None,
        key_ids: old_ids.clone(),
        kill_in: kill_in.to_vec(),
        abort_in,
        keys_before: before.len(),
        kills: Vec::new(),
        kill_at: kill_at.to_vec(),
        env,
        by_cds: end == End::NewSepByCds,
    };
    run.note(format!(
        "roll declared: {} (DNSKEY TTL {} s, the chain's names' {} s)",
        out.trim(),
        ttls.dnskey,
        ttls.data
    ));
    let mut ended = false;
    for _ in 0..5_000 {
        assert!(
            run.started.elapsed() < ROLL_LIMIT,
            "the roll did not end within {ROLL_LIMIT:?}\n{}",
            run.report()
        );
        run.kill_on_schedule().await;
        let s = run.look(order).await;
        run.registrar().await;
        if let Some(phase) = run.abort_in
            && run.phases.last().is_some_and(|p| p == phase)
            && run.acted > earlier
        {
            let (ok, out, err) = cli(&w.config, &["roll", zone, "--abort"]);
            assert!(ok, "abort refused: {out}{err}\n{}", run.report());
            run.abort_in = None;
            run.note(format!("roll aborted: {}", out.trim()));
        }
        if !run.phases.is_empty() && s["key_roll"].is_null() && s["state"] == "active" {
            run.note("the roll ended: no key_roll, active".into());
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ended, "never ended\n{}", run.report());
    let took = run.started.elapsed();
    assert!(
        run.kill_in.is_empty() && run.kill_at.is_empty(),
        "the daemon was to be killed in {:?} and at {:?} too\n{}",
        run.kill_in,
        run.kill_at,
        run.report()
    );
    // A few more answers from the new key alone, then the probe stops.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let report = probe.report().await;
    run.note(format!(
        "probe: {} answers, {} secure, {} insecure, {} SERVFAIL ({} validation failures): {:?}",
        report.answers, report.secure, report.insecure, report.servfail, report.bogus, report.runs
    ));
    let chained = chain_probe.report().await;
    let chain_failures = chain.validation_failures();
    run.note(format!(
        "chain: {} answers, {} secure, {} insecure, {} SERVFAIL ({} validation failures):\n  {}\n  validator's log: {chain_failures:?}",
        chained.answers,
        chained.secure,
        chained.insecure,
        chained.servfail,
        chained.bogus,
        chained.runs.join("\n  ")
    ));
    assert!(chain.alive(), "the chain's Unbounds ran throughout");
    match expect {
        Expect::Secure => {
            assert!(
                report.answers > 20
                    && report.secure == report.answers
                    && report.insecure == 0
                    && report.servfail == 0,
                "every answer SECURE all along: {report:?}\n{}",
                run.report()
            );
            assert!(
                chained.answers > 100
                    && chained.secure == chained.answers
                    && chained.insecure == 0
                    && chained.servfail == 0,
                "every answer of the chain SECURE all along: {chained:?}\n{}",
                run.report()
            );
        }
        Expect::ValidationFailure => assert!(
            chained.bogus > 0,
            "the chain saw no validation failure: {chained:?}\n{}",
            run.report()
        ),
    }

    // Every address serves the keys PowerDNS lists, all active and published.
    let after = cryptokeys(w, zone).await;
    let mut listed: Vec<String> = after
        .iter()
        .map(|k| public_key(k["dnskey"].as_str().unwrap_or_default()))
        .collect();
    listed.sort();
    for served in served_keys(w, zone).await {
        assert_eq!(
            served, listed,
            "every address serves the listed keys: {after:?}"
        );
    }
    for k in &after {
        assert_eq!(
            (k["active"].as_bool(), k["published"].as_bool()),
            (Some(true), Some(true)),
            "{k}"
        );
    }
    let ids: BTreeSet<String> = after.iter().map(key_id).collect();
    let new_ds = ds_key(&w.pdns_ds(zone).unwrap());
    match end {
        End::NewSep | End::NewSepByCds => {
            assert_eq!(after.len(), 1, "one key at the end: {after:?}");
            assert!(
                ids.is_disjoint(&old_ids),
                "a new key: {ids:?} (before {old_ids:?})"
            );
            assert_ne!(new_ds, old_ds);
        }
        End::NewZsk => {
            assert_eq!(after.len(), 2, "a KSK and a ZSK: {after:?}");
            assert_eq!(
                ids.intersection(&old_ids).count(),
                1,
                "the KSK kept: {ids:?}"
            );
            let zsk = after.iter().find(|k| k["keytype"] == "zsk");
            assert!(
                zsk.is_some_and(|k| !old_ids.contains(&key_id(k))),
                "a new ZSK: {after:?} (before {old_ids:?})"
            );
            assert_eq!(new_ds, old_ds);
        }
        End::Old => {
            assert_eq!(ids, old_ids, "the old key alone again: {after:?}");
            assert_eq!(new_ds, old_ds);
        }
    }
    // Both TLD servers publish that key's DS alone.
    for tld in [Tld::A, Tld::B] {
        let (ds, _) = w.parent_view(zone, tld).await.unwrap();
        assert_eq!(ds, std::slice::from_ref(&new_ds), "{tld:?}: its DS alone");
    }
    let (rcode, ad) = w.resolve_fresh(zone).await.unwrap();
    assert_eq!((rcode.as_str(), ad), ("No Error", true), "secure after it");

    // What the registrar was asked, in order: a request delivered again (the daemon
    // killed after the hook ran, before it recorded the run) is the same request, by its
    // `DNSSEC_WARDEN_SEQ`, as the hook's contract has it.
    let calls: Vec<HookCall> = hook_calls(&run.calls).into_iter().skip(earlier).collect();
    let mut delivered = BTreeSet::new();
    let asked: Vec<(String, Vec<String>, Vec<String>)> = calls
        .iter()
        .filter(|c| delivered.insert(c.seq.clone()))
        .map(|c| (c.action.clone(), c.ds_records(), c.keep_records()))
        .collect();
    let (add, remove) = ("add".to_string(), "remove".to_string());
    let want = match end {
        End::NewSep => vec![
            (add, vec![new_ds.clone()], vec![old_ds.clone()]),
            (remove, vec![old_ds.clone()], vec![new_ds.clone()]),
        ],
        End::NewZsk | End::NewSepByCds => Vec::new(),
        End::Old => {
            let added = asked
                .first()
                .and_then(|a| a.1.first())
                .cloned()
                .unwrap_or_default();
            vec![
                (add, vec![added.clone()], vec![old_ds.clone()]),
                (remove, vec![added], vec![old_ds.clone()]),
            ]
        }
    };
    assert_eq!(asked, want, "{}", run.report());

    // The history names every phase, in order (an abort names the phase it goes back
    // by), and no alert was raised.
    let story = history(&w.config, zone);
    let mut from = 0;
    for pair in order.windows(2) {
        let said = format!("{} -> {}", pair[0], pair[1]);
        let back = format!("aborted in {}: going back by {}", pair[0], pair[1]);
        let at = story[from..]
            .find(&said)
            .or_else(|| story[from..].find(&back))
            .unwrap_or_else(|| panic!("{said:?} in order in the history\n{}", run.report()));
        from += at;
    }
    let s = status(&w.config, zone);
    assert!(
        s["alerts"].as_array().is_some_and(Vec::is_empty),
        "{s}\n{}",
        run.report()
    );
    eprintln!(
        "[127.0.{}.x] the roll took {:.1}s: {}",
        w.block,
        took.as_secs_f64(),
        run.phases.join(" -> ")
    );
    Rolled {
        calls,
        key_ids: run.key_ids.clone(),
        log: run.daemon.log(),
        took,
        chain: chained,
        chain_failures,
    }
}

/// (1) A CSK, PowerDNS's default key shape (one ECDSA P-256 key, flags 257), rolled by
/// double DS through the registrar hook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csk_roll_at_powerdns_stays_secure() {
    let zone = "roll.test.";
    let Secured {
        w,
        calls,
        log,
        daemon,
    } = secure_at_powerdns(96, zone, WorldOptions::default()).await;
    let keys = cryptokeys(&w, zone).await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(keys[0]["keytype"], "csk", "{keys:?}");
    let rolled = roll(
        &w,
        zone,
        daemon,
        log,
        calls,
        Plan {
            args: &[],
            order: &DOUBLE_DS,
            kill_in: &[],
            abort_in: None,
            end: End::NewSep,
            ttls: LAB,
            kill_at: &[],
            env: &[],
            expect: Expect::Secure,
        },
    )
    .await;
    assert_eq!(
        rolled.key_ids.len(),
        2,
        "one key added: {:?}",
        rolled.key_ids
    );
    assert_eq!(rolled.calls.len(), 2);
    assert!(rolled.took < ROLL_LIMIT);
    assert_eq!(
        rolled.log.matches("for the roll").count(),
        1,
        "one addition"
    );
}

/// (2) An algorithm rollover, RSA/SHA-256 (8) to ECDSA P-256 (13), of a CSK made by
/// PowerDNS with `default-ksk-algorithm=rsasha256`: RFC 6781 4.1.4's conservative order,
/// the DS swapped through the registrar hook, with the daemon SIGKILLed at three random
/// instants of the roll ([`random_kills`]) and restarted on the same database each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_algorithm_roll_8_to_13_at_powerdns_stays_secure_through_sigkills() {
    let zone = "alg.test.";
    let (_seed, kill_at) = random_kills(97, 3, Duration::from_secs(12));
    let Secured {
        w,
        calls,
        log,
        daemon,
    } = secure_at_powerdns(
        97,
        zone,
        WorldOptions {
            pdns_algorithm: Some("rsasha256"),
            ..WorldOptions::default()
        },
    )
    .await;
    let keys = cryptokeys(&w, zone).await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(keys[0]["algorithm"], "RSASHA256", "{keys:?}");
    let rolled = roll(
        &w,
        zone,
        daemon,
        log,
        calls,
        Plan {
            args: &["--algorithm", "13"],
            order: &ALGORITHM,
            kill_in: &[],
            abort_in: None,
            end: End::NewSep,
            ttls: LAB,
            kill_at: &kill_at,
            env: &[],
            expect: Expect::Secure,
        },
    )
    .await;
    let keys = cryptokeys(&w, zone).await;
    assert_eq!(keys[0]["algorithm"], "ECDSAP256SHA256", "{keys:?}");
    assert_eq!(
        rolled.key_ids.len(),
        2,
        "one key added through the kills: {:?}",
        rolled.key_ids
    );
}

/// (3) The daemon SIGKILLed twice after the new key was added and before the DS swap (in
/// `publishing` and in `awaiting_new_ds`), each time restarted on the same database: the
/// roll completes, as secure as without, and PowerDNS was asked for one key only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csk_roll_survives_sigkill_before_the_ds_swap() {
    let zone = "kill.test.";
    let Secured {
        w,
        calls,
        log,
        daemon,
    } = secure_at_powerdns(98, zone, WorldOptions::default()).await;
    let rolled = roll(
        &w,
        zone,
        daemon,
        log,
        calls,
        Plan {
            args: &[],
            order: &DOUBLE_DS,
            kill_in: &["publishing", "awaiting_new_ds"],
            abort_in: None,
            end: End::NewSep,
            ttls: LAB,
            kill_at: &[],
            env: &[],
            expect: Expect::Secure,
        },
    )
    .await;
    assert_eq!(
        rolled.key_ids.len(),
        2,
        "one key added through the kills: {:?}",
        rolled.key_ids
    );
    // The kill may land between PowerDNS's answer to the addition and the daemon's line
    // about it (the test kills once PowerDNS lists the key): none logged then.
    assert!(
        rolled.log.matches("for the roll").count() <= 1,
        "one addition asked of PowerDNS"
    );
}

/// (4a) A ZSK roll (pre-publication) of a zone PowerDNS signs with a KSK and a ZSK
/// (`default-zsk-algorithm`): the KSK and its DS stay, the registrar is never asked; the
/// daemon SIGKILLed at three random instants of the roll ([`random_kills`]) and restarted
/// on the same database each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zsk_roll_of_a_split_zone_at_powerdns_stays_secure_through_sigkills() {
    let zone = "zsk.test.";
    let (_seed, kill_at) = random_kills(99, 3, Duration::from_secs(25));
    let Secured {
        w,
        calls,
        log,
        daemon,
    } = secure_at_powerdns(
        99,
        zone,
        WorldOptions {
            pdns_zsk_algorithm: Some("ecdsa256"),
            ..WorldOptions::default()
        },
    )
    .await;
    let keys = cryptokeys(&w, zone).await;
    let mut kinds: Vec<&str> = keys.iter().filter_map(|k| k["keytype"].as_str()).collect();
    kinds.sort();
    assert_eq!(kinds, ["ksk", "zsk"], "{keys:?}");
    let rolled = roll(
        &w,
        zone,
        daemon,
        log,
        calls,
        Plan {
            args: &["--kind", "zsk"],
            order: &["publishing", "swapping", "removing_old_key", "done"],
            kill_in: &[],
            abort_in: None,
            end: End::NewZsk,
            ttls: CACHED,
            kill_at: &kill_at,
            env: &[],
            expect: Expect::Secure,
        },
    )
    .await;
    assert_eq!(
        rolled.key_ids.len(),
        3,
        "one key added through the kills: {:?}",
        rolled.key_ids
    );
}

/// (4b) `roll --abort` once the new DS is at the parent (`awaiting_new_ds`): the roll
/// goes back by `removing_old_ds` (the new DS removed, the old kept, its TTL waited),
/// then the new key deleted; Unbound SECURE throughout, the old key and DS alone again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csk_roll_aborted_after_the_new_ds_goes_back_safely() {
    let zone = "back.test.";
    let Secured {
        w,
        calls,
        log,
        daemon,
    } = secure_at_powerdns(100, zone, WorldOptions::default()).await;
    let rolled = roll(
        &w,
        zone,
        daemon,
        log,
        calls,
        Plan {
            args: &[],
            order: &[
                "publishing",
                "awaiting_new_ds",
                "removing_old_ds",
                "removing_old_key",
                "done",
            ],
            kill_in: &[],
            abort_in: Some("awaiting_new_ds"),
            end: End::Old,
            ttls: LAB,
            kill_at: &[],
            env: &[],
            expect: Expect::Secure,
        },
    )
    .await;
    assert_eq!(
        rolled.key_ids.len(),
        2,
        "one key added: {:?}",
        rolled.key_ids
    );
    let story = history(&w.config, zone);
    assert!(
        story.contains("aborted in awaiting_new_ds: going back by removing_old_ds"),
        "{story}"
    );
}

/// (5) The mutant that deletes the old key one DNSKEY TTL too early (the daemon run with
/// `DNSSEC_WARDEN_TEST_MUTANT_EARLY_REMOVAL`), in a ZSK roll whose data is cached far
/// longer than the DNSKEY set ([`CACHED`]): the chain's cache still holds data signed by
/// the old ZSK when PowerDNS stops serving it, and the validator fails it. The suite's
/// own check, every answer SECURE, would fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zsk_roll_removing_the_old_key_early_fails_the_chain() {
    let zone = "mutant.test.";
    let env = [(MUTANT, "1".to_string())];
    let Secured {
        w,
        calls,
        log,
        daemon,
    } = secure_at_powerdns_with(
        101,
        zone,
        WorldOptions {
            pdns_zsk_algorithm: Some("ecdsa256"),
            ..WorldOptions::default()
        },
        &env,
    )
    .await;
    let rolled = roll(
        &w,
        zone,
        daemon,
        log,
        calls,
        Plan {
            args: &["--kind", "zsk"],
            order: &["publishing", "swapping", "removing_old_key", "done"],
            kill_in: &[],
            abort_in: None,
            end: End::NewZsk,
            ttls: CACHED,
            kill_at: &[],
            env: &env,
            expect: Expect::ValidationFailure,
        },
    )
    .await;
    assert!(
        rolled.chain_failures.iter().any(|l| {
            l.to_ascii_lowercase().contains(zone) && l.contains("signatures from unknown keys")
        }),
        "the validator logged signatures of a key gone (its names in 0x20 case): {:?}",
        rolled.chain_failures
    );
    eprintln!(
        "[127.0.101.x] the mutant's roll: the chain answered {} times, {} SERVFAIL ({} validation failures)",
        rolled.chain.answers, rolled.chain.servfail, rolled.chain.bogus
    );
}

/// Prints the seed of a random schedule when the test fails.
struct SeedOnFailure(u64);

impl Drop for SeedOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "the kill schedule's seed was {0}: E2E_SEED={0} repeats it",
                self.0
            );
        }
    }
}

/// `count` SIGKILLs at random instants within `within` of a roll's declaration (less than
/// the roll takes without them: a kill only lengthens it), each
/// with a random pause (under a second) before the restart, in order: a seeded schedule
/// (`E2E_SEED` repeats one), printed now and again by the guard if the test fails.
fn random_kills(
    block: u8,
    count: usize,
    within: Duration,
) -> (SeedOnFailure, Vec<(Duration, Duration)>) {
    let seed = std::env::var("E2E_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let mut rng = fastrand::Rng::with_seed(seed);
    let within = within.as_millis() as u64;
    let mut kill_at: Vec<(Duration, Duration)> = (0..count)
        .map(|_| {
            (
                Duration::from_millis(rng.u64(500..within)),
                Duration::from_millis(rng.u64(0..1000)),
            )
        })
        .collect();
    kill_at.sort();
    eprintln!("[127.0.{block}.x] seed {seed}: the daemon SIGKILLed at {kill_at:?}");
    (SeedOnFailure(seed), kill_at)
}

/// (6) A CSK roll with the daemon SIGKILLed at four random instants (a seeded schedule,
/// `E2E_SEED` to repeat one) within the first 30 s, whatever it is doing then, each
/// time restarted on the same database after a random pause: the roll completes, the
/// chain ([`CACHED`]) and Unbound answer SECURE throughout, and PowerDNS never listed a
/// key beyond the old one and the one the roll added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csk_roll_survives_sigkill_at_random_instants() {
    let zone = "chaos.test.";
    let (_seed, kill_at) = random_kills(102, 4, Duration::from_secs(30));
    let Secured {
        w,
        calls,
        log,
        daemon,
    } = secure_at_powerdns(102, zone, WorldOptions::default()).await;
    let rolled = roll(
        &w,
        zone,
        daemon,
        log,
        calls,
        Plan {
            args: &[],
            order: &DOUBLE_DS,
            kill_in: &[],
            abort_in: None,
            end: End::NewSep,
            ttls: CACHED,
            kill_at: &kill_at,
            env: &[],
            expect: Expect::Secure,
        },
    )
    .await;
    assert_eq!(
        rolled.key_ids.len(),
        2,
        "one key added through the kills: {:?}",
        rolled.key_ids
    );
    assert!(
        rolled.log.matches("for the roll").count() <= 1,
        "one addition asked of PowerDNS"
    );
}

/// (7) A CSK roll with no registrar at all: the parent is the lab registry of `test.`,
/// which scans the child's CDS and is told by NOTIFY(CDS) (RFC 7344 appendix B, RFC
/// 9859), from the enabling to the end. The daemon sets PowerDNS's CDS phase by phase
/// (nothing in `publishing`, both keys from `awaiting_new_ds`, the new key alone from
/// `removing_old_ds`) and sends one NOTIFY per signal; the registry publishes both DS,
/// then the new one alone; the daemon ends the roll. Unbound and the chain ([`CACHED`])
/// answer SECURE from before the roll to after its last wait, and the registrar hook never
/// ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csk_roll_through_a_scanning_registry_needs_no_registrar() {
    let zone = "cds.test.";
    let Secured {
        w,
        calls,
        log,
        daemon,
    } = secure_through_registry(
        105,
        zone,
        WorldOptions::default(),
        RegistryOptions {
            bootstrap_period: Duration::from_secs(2),
            // Rare scans: what makes the registry act in time is the daemon's NOTIFY.
            scan_interval: Duration::from_secs(4),
            notify: true,
            children: Vec::new(),
        },
    )
    .await;
    let registry = w.registry.as_ref().expect("a registry in this world");
    let old_ds = ds_key(&w.pdns_ds(zone).unwrap());
    let events_before = registry.events().len();
    let notifies_before = registry.notifies();
    let rolled = roll(
        &w,
        zone,
        daemon,
        log,
        calls.clone(),
        Plan {
            args: &[],
            order: &DOUBLE_DS,
            kill_in: &[],
            abort_in: None,
            end: End::NewSepByCds,
            ttls: CACHED,
            kill_at: &[],
            env: &[],
            expect: Expect::Secure,
        },
    )
    .await;
    assert_eq!(
        rolled.key_ids.len(),
        2,
        "one key added: {:?}",
        rolled.key_ids
    );
    assert!(rolled.took < ROLL_LIMIT);
    assert!(
        hook_calls(&calls).is_empty(),
        "the registrar hook never ran: {:?}",
        hook_calls(&calls)
    );

    // The registry, told by NOTIFY(CDS), published both DS, then the new one alone.
    let new_ds = ds_key(&w.pdns_ds(zone).unwrap());
    let story = registry.story(zone);
    let mut published: Vec<Vec<String>> = registry.events()[events_before..]
        .iter()
        .filter(|e| e.child == zone)
        .filter_map(|e| match &e.what {
            dnssec_warden_lab::registry::What::Published(lines) => {
                let mut ds: Vec<String> = lines
                    .iter()
                    .map(|l| ds_key(l.split(" DS ").nth(1).unwrap_or_default()))
                    .collect();
                ds.sort();
                Some(ds)
            }
            _ => None,
        })
        .collect();
    // A set published again (an UPDATE one TLD server missed, done at the next scan) is
    // one change.
    published.dedup();
    let mut both = vec![old_ds.clone(), new_ds.clone()];
    both.sort();
    assert_eq!(
        published,
        vec![both, vec![new_ds.clone()]],
        "the registry's DS changes during the roll\n{story}"
    );
    assert!(
        registry.notifies() >= notifies_before + 2,
        "a NOTIFY(CDS) for each signal\n{story}"
    );
    let tag = |ds: &str| -> u16 {
        ds.split_whitespace()
            .next()
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("a DS's key tag: {ds}"))
    };
    let (old_tag, new_tag) = (tag(&old_ds), tag(&new_ds));
    let history = history(&w.config, zone);
    for signal in [
        format!("key {} {}", old_tag.min(new_tag), old_tag.max(new_tag)),
        format!("key {new_tag}"),
    ] {
        let said = format!("NOTIFY(CDS) for the {signal} sent to");
        assert!(
            history
                .lines()
                .any(|l| l.contains(&said) && l.contains("acknowledged")),
            "{said:?} acknowledged in the history\n{history}"
        );
    }
    assert!(
        history.contains("from the child's CDS"),
        "the roll waited on the registry, not the registrar\n{history}"
    );
}

/// (8) An algorithm rollover, 8 to 13, of a zone whose parent is the lab registry that
/// scans the CDS: it has no CDS variant (PowerDNS's CDS would name the new algorithm's
/// key as soon as it is published, before the DNSKEY TTL is waited, and the old one
/// after the registrar removed its DS), so the daemon withdraws the CDS before adding a
/// key, asks the registrar (the test) as in (2), and publishes the CDS of the new key at
/// the end. The registry changes nothing during the roll; Unbound SECURE throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_algorithm_roll_under_a_scanning_registry_withdraws_the_cds() {
    let zone = "algcds.test.";
    let Secured {
        w,
        calls,
        log,
        daemon,
    } = secure_through_registry(
        106,
        zone,
        WorldOptions {
            pdns_algorithm: Some("rsasha256"),
            ..WorldOptions::default()
        },
        RegistryOptions {
            bootstrap_period: Duration::from_secs(2),
            scan_interval: Duration::from_secs(1),
            notify: true,
            children: Vec::new(),
        },
    )
    .await;
    let registry = w.registry.as_ref().expect("a registry in this world");
    let events_before = registry.events().len();
    roll(
        &w,
        zone,
        daemon,
        log,
        calls,
        Plan {
            args: &["--algorithm", "13"],
            order: &ALGORITHM,
            kill_in: &[],
            abort_in: None,
            end: End::NewSep,
            ttls: LAB,
            kill_at: &[],
            env: &[],
            expect: Expect::Secure,
        },
    )
    .await;
    let changed: Vec<String> = registry.events()[events_before..]
        .iter()
        .filter(|e| e.child == zone)
        .filter(|e| {
            !matches!(
                e.what,
                dnssec_warden_lab::registry::What::Scanned(_)
                    | dnssec_warden_lab::registry::What::Refused(_)
            )
        })
        .map(ToString::to_string)
        .collect();
    assert!(
        changed.is_empty(),
        "the registry changed the DS during the roll: {changed:?}\n{}",
        registry.story(zone)
    );
    // At the end the CDS names the new key again (rule 14's steady zone), which is the
    // DS the registrar left: the registry has nothing to do.
    let pdns = w.pdns.as_ref().expect("a PowerDNS in this world");
    let new_tag = ds_key(&w.pdns_ds(zone).unwrap())
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    use dnssec_warden::dns::Transport;
    use hickory_proto::rr::RecordType;
    let transport = dnssec_warden::dns::NetTransport::new(Duration::from_secs(2));
    let name = dnssec_warden::dns::wire::parse_name(zone).expect("a zone name");
    let server = std::net::SocketAddr::from((ip(w.block, 8), w.port));
    let deadline = Instant::now() + LONG;
    loop {
        let q = dnssec_warden::dns::wire::build_query(&name, RecordType::CDS, false);
        let tags: Vec<String> = match transport.exchange(server, &q).await {
            Ok(m) => m
                .answers
                .iter()
                .filter(|r| r.record_type() == RecordType::CDS)
                .filter_map(|r| {
                    r.data
                        .to_string()
                        .split_whitespace()
                        .next()
                        .map(str::to_string)
                })
                .collect(),
            Err(e) => vec![format!("{e}")],
        };
        if tags == [new_tag.clone()] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the CDS names the new key {new_tag} alone at the end: {tags:?}\n{}\n{}\n{}",
            status(&w.config, zone),
            history(&w.config, zone),
            pdns.log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
