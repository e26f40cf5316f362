//! A resolver chain that keeps what safety rule 16's caches keep, for the key rollovers'
//! end-to-end tests: a caching Unbound that does not validate (`module-config:
//! "iterator"`, the lab's root and stubs as the world's Unbound has them) holds every
//! RRset with its RRSIGs for the RRset's own TTL, the DNSKEY set for its TTL; a
//! validating Unbound forwards to it and forgets the zone before every round of
//! questions, so each answer is validated afresh from what the cache holds. A cached
//! signature of a key that the fresh DNSKEY set no longer holds is then a SERVFAIL, as
//! at any resolver whose data outlived its DNSKEY set.
//!
//! ```text
//!  cache      127.0.B.54  unbound, iterator only, TTLs as served
//!  validator  127.0.B.55  unbound, validating (the lab anchor), forwards to the cache
//! ```
//!
//! [`ChainProbe`] asks the validator for a set of names, the first at once and each
//! next `stagger` later (the cache then holds copies fetched at instants spread over
//! the TTL, whatever moment a roll changes the signing), and watches the DNSKEY set the
//! zone's servers serve: when it loses a key, the cache's DNSKEY set is dropped (a
//! resolver whose DNSKEY set expires at that instant, the least favourable one; any
//! resolver's does at some instant), so that what the cache holds meets the new set.
//! Both Unbounds are stopped by their PIDs when the chain is dropped.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dnssec_warden::dns::wire::{build_query, parse_name};
use dnssec_warden::dns::{NetTransport, Transport};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;

use crate::knot::{Proc, Result, pick_port};
use crate::world::{ProbeReport, RealWorld, ip};

/// The cache's address in a world's block.
pub const CACHE_HOST: u8 = 54;
/// The validator's address in a world's block.
pub const VALIDATOR_HOST: u8 = 55;

/// The two Unbounds of the chain.
pub struct ResolverChain {
    /// The caching, non-validating Unbound.
    pub cache: SocketAddr,
    /// The validating Unbound the probe asks.
    pub validator: SocketAddr,
    cache_conf: PathBuf,
    validator_conf: PathBuf,
    validator_log: PathBuf,
    cache_proc: Proc,
    validator_proc: Proc,
}

/// What both Unbounds' configurations share: loopback only, no chroot, `test.` not a
/// local zone, a control socket without certificates.
fn common(dir: &Path, addr: SocketAddr) -> String {
    format!(
        "server:\n  interface: {}\n  port: {}\n  do-ip6: no\n\
         \x20 do-not-query-localhost: no\n  username: \"\"\n  chroot: \"\"\n\
         \x20 directory: \"{dir}\"\n  pidfile: \"\"\n  use-syslog: no\n\
         \x20 logfile: \"{dir}/unbound.log\"\n  verbosity: 0\n\
         \x20 local-zone: \"test.\" nodefault\n  access-control: 127.0.0.0/8 allow\n\
         \x20 cache-max-negative-ttl: 2\n  infra-host-ttl: 2\n",
        addr.ip(),
        addr.port(),
        dir = dir.display(),
    )
}

fn control_section(dir: &Path) -> String {
    format!(
        "remote-control:\n  control-enable: yes\n  control-use-cert: no\n\
         \x20 control-interface: \"{}/unbound.ctl\"\n",
        dir.display()
    )
}

/// `unbound-control -c CONF ARGS`.
fn control(conf: &Path, args: &[&str]) -> Result<()> {
    crate::knot::unbound_control(conf, args).map(drop)
}

fn spawn(dir: &Path, conf: &str) -> Result<(PathBuf, Proc)> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("unbound.conf");
    std::fs::write(&path, conf).map_err(|e| e.to_string())?;
    let proc = Proc::spawn(
        "unbound",
        Command::new("unbound")
            .arg("-d")
            .arg("-c")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )?;
    Ok((path, proc))
}

async fn answers(proc: &mut Proc, addr: SocketAddr) -> Result<()> {
    let transport = NetTransport::new(Duration::from_millis(500));
    let query = build_query(&hickory_proto::rr::Name::root(), RecordType::SOA, true);
    for _ in 0..50 {
        if !proc.alive() {
            return Err(format!("unbound at {addr} exited at start"));
        }
        if transport.exchange(addr, &query).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("unbound at {addr} never answered"))
}

impl ResolverChain {
    /// Starts the chain in `w`'s block, the cache knowing the root and, where the world
    /// pins zones to stubs, `test.` and `zone` at `zone_servers` (as the world's Unbound).
    pub async fn start(w: &RealWorld, zone: &str, zone_servers: &[Ipv4Addr]) -> Result<Self> {
        let at = |h| ip(w.block, h);
        let dir = w.dir.path().join("chain");
        let cache_dir = dir.join("cache");
        let validator_dir = dir.join("validator");
        let cache = SocketAddr::new(IpAddr::V4(at(CACHE_HOST)), pick_port(&[at(CACHE_HOST)])?);
        let validator = SocketAddr::new(
            IpAddr::V4(at(VALIDATOR_HOST)),
            pick_port(&[at(VALIDATOR_HOST)])?,
        );

        let mut stubs: Vec<(&str, Vec<Ipv4Addr>)> = vec![(".", vec![at(1)])];
        if !w.follows_referrals {
            stubs.push(("test.", vec![at(2), at(3)]));
            stubs.push((zone, zone_servers.to_vec()));
        }
        // No validation, and the TTLs as served (no cap): the data and its RRSIGs
        // stay as long as their TTL allows; the iterator asks with DO.
        let mut conf = common(&cache_dir, cache);
        conf.push_str("  module-config: \"iterator\"\n  cache-max-ttl: 86400\n");
        conf.push_str(&control_section(&cache_dir));
        for (name, addrs) in &stubs {
            let _ = writeln!(conf, "stub-zone:\n  name: \"{name}\"");
            for a in addrs {
                let _ = writeln!(conf, "  stub-addr: {a}@{}", w.port);
            }
        }
        let (cache_conf, mut cache_proc) = spawn(&cache_dir, &conf)?;
        answers(&mut cache_proc, cache).await?;

        // Validating, every question forwarded to the cache; the zone forgotten before
        // each round (`forget`), and a failed validation never retried elsewhere.
        let mut conf = common(&validator_dir, validator);
        let _ = write!(
            conf,
            "  module-config: \"validator iterator\"\n  trust-anchor-file: \"{}\"\n\
             \x20 val-log-level: 2\n  val-max-restart: 0\n  val-bogus-ttl: 2\n\
             \x20 cache-max-ttl: 2\n  ede: yes\n",
            w.anchor.display()
        );
        conf.push_str(&control_section(&validator_dir));
        let _ = writeln!(
            conf,
            "forward-zone:\n  name: \".\"\n  forward-addr: {}@{}",
            cache.ip(),
            cache.port()
        );
        let (validator_conf, mut validator_proc) = spawn(&validator_dir, &conf)?;
        answers(&mut validator_proc, validator).await?;
        Ok(Self {
            cache,
            validator,
            cache_conf,
            validator_conf,
            validator_log: validator_dir.join("unbound.log"),
            cache_proc,
            validator_proc,
        })
    }

    /// The validator's logged validation failures (`val-log-level: 2`).
    pub fn validation_failures(&self) -> Vec<String> {
        std::fs::read_to_string(&self.validator_log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("validation failure"))
            .map(str::to_string)
            .collect()
    }

    /// Both Unbounds still running (neither exited).
    pub fn alive(&mut self) -> bool {
        self.cache_proc.alive() && self.validator_proc.alive()
    }

    /// Starts a probe of `names` (type A) through the validator, watching the DNSKEY set
    /// `zone`'s servers at `watch` serve.
    pub fn probe(
        &self,
        zone: &str,
        names: Vec<String>,
        stagger: Duration,
        watch: Vec<SocketAddr>,
    ) -> ChainProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let ctx = Round {
            zone: zone.to_string(),
            names,
            stagger,
            watch,
            validator: self.validator,
            validator_conf: self.validator_conf.clone(),
            cache_conf: self.cache_conf.clone(),
        };
        let task = tokio::spawn(ctx.run(stop.clone()));
        ChainProbe { stop, task }
    }
}

/// A running probe of a [`ResolverChain`].
pub struct ChainProbe {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<ProbeReport>,
}

impl ChainProbe {
    /// Stops the probe: every answer it got, by kind; `runs` holds the rounds (runs of
    /// the same outcome folded) and the DNSKEY set's changes.
    pub async fn report(self) -> ProbeReport {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap_or_else(|e| ProbeReport {
            answers: 0,
            secure: 0,
            insecure: 0,
            servfail: 0,
            bogus: 0,
            runs: vec![format!("the chain's probe task failed: {e}")],
        })
    }
}

struct Round {
    zone: String,
    names: Vec<String>,
    stagger: Duration,
    watch: Vec<SocketAddr>,
    validator: SocketAddr,
    validator_conf: PathBuf,
    cache_conf: PathBuf,
}

impl Round {
    /// The DNSKEY records the watched servers serve (their union), `None` when none
    /// answered.
    async fn served(&self, transport: &NetTransport) -> Option<BTreeSet<String>> {
        let name = parse_name(&self.zone)?;
        let mut keys = BTreeSet::new();
        let mut answered = false;
        for server in &self.watch {
            let q = build_query(&name, RecordType::DNSKEY, false);
            if let Ok(m) = transport.exchange(*server, &q).await
                && m.metadata.response_code == ResponseCode::NoError
            {
                answered = true;
                keys.extend(
                    m.answers
                        .iter()
                        .filter(|r| r.record_type() == RecordType::DNSKEY)
                        .map(|r| r.data.to_string()),
                );
            }
        }
        answered.then_some(keys)
    }

    async fn run(self, stop: Arc<AtomicBool>) -> ProbeReport {
        let transport = NetTransport::new(Duration::from_secs(2));
        let started = Instant::now();
        let mut report = ProbeReport {
            answers: 0,
            secure: 0,
            insecure: 0,
            servfail: 0,
            bogus: 0,
            runs: Vec::new(),
        };
        // Runs of the same round outcome: (outcome, first seen, how many rounds).
        let mut runs: Vec<(String, String, usize)> = Vec::new();
        let now = || dnssec_warden::time::format::rfc3339_ms(std::time::SystemTime::now());
        let mut keys: Option<BTreeSet<String>> = None;
        let qnames: Vec<_> = self.names.iter().map(|n| parse_name(n)).collect();
        // Bounded: at most ten minutes of rounds.
        for _ in 0..2000 {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            if let Some(served) = self.served(&transport).await {
                if let Some(before) = &keys
                    && before.iter().any(|k| !served.contains(k))
                {
                    let flushed = control(&self.cache_conf, &["flush_type", &self.zone, "DNSKEY"]);
                    runs.push((
                        format!(
                            "the served DNSKEY set lost a key ({} -> {} keys): the cache's DNSKEY set dropped{}",
                            before.len(),
                            served.len(),
                            flushed.err().map(|e| format!(" FAILED: {e}")).unwrap_or_default()
                        ),
                        now(),
                        1,
                    ));
                }
                keys = Some(served);
            }
            let forgot = [
                vec!["flush_zone", self.zone.as_str()],
                vec!["flush_bogus"],
                vec!["flush_negative"],
            ]
            .iter()
            .try_for_each(|args| control(&self.validator_conf, args));
            if let Err(e) = forgot {
                runs.push((format!("the validator did not forget: {e}"), now(), 1));
            }
            let mut outcome: Vec<String> = Vec::new();
            let (mut secure, mut asked) = (0, 0);
            for (i, (name, qname)) in self.names.iter().zip(&qnames).enumerate() {
                if started.elapsed() < self.stagger * i as u32 {
                    break;
                }
                let Some(qname) = qname else {
                    outcome.push(format!("{name}: bad name"));
                    continue;
                };
                asked += 1;
                report.answers += 1;
                let q = build_query(qname, RecordType::A, true);
                match transport.exchange(self.validator, &q).await {
                    Ok(m) if m.metadata.response_code == ResponseCode::NoError => {
                        if m.metadata.authentic_data {
                            report.secure += 1;
                            secure += 1;
                        } else {
                            report.insecure += 1;
                            outcome.push(format!("{name} INSECURE"));
                        }
                    }
                    Ok(m) if m.metadata.response_code == ResponseCode::ServFail => {
                        report.servfail += 1;
                        let mut cd = q.clone();
                        cd.metadata.checking_disabled = true;
                        let validation = matches!(
                            transport.exchange(self.validator, &cd).await,
                            Ok(m) if m.metadata.response_code == ResponseCode::NoError
                        );
                        if validation {
                            report.bogus += 1;
                        }
                        outcome.push(format!(
                            "{name} SERVFAIL ({})",
                            if validation {
                                "validation"
                            } else {
                                "unreachable"
                            }
                        ));
                    }
                    Ok(m) => outcome.push(format!("{name} {}", m.metadata.response_code)),
                    Err(e) => outcome.push(format!("{name} error {e}")),
                }
            }
            let text = if outcome.is_empty() {
                format!("{asked} names SECURE")
            } else {
                format!("{secure} of {asked} SECURE; {}", outcome.join(", "))
            };
            match runs.last_mut() {
                Some(run) if run.0 == text => run.2 += 1,
                _ => runs.push((text, now(), 1)),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        report.runs = runs
            .into_iter()
            .map(|(what, from, n)| format!("{what} from {from}, {n} times"))
            .collect();
        report
    }
}
