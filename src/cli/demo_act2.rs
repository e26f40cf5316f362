//! The demo's second act, on the same simulated world and the same engine as the first:
//! two PowerDNS accounts (`west` and `east`, the lab's PowerDNS API simulator, each with
//! its own name servers in the lab DNS) and a registry for `test.` that reads its
//! children's CDS (the lab registry: DS written into both TLD servers by dynamic UPDATE,
//! NOTIFY taken at the target the parent's DSYNC record names).
//!
//! `delta.test.` at `west` goes on with no registrar step: the daemon has the provider
//! publish CDS/CDNSKEY, sends NOTIFY(CDS) to the DSYNC target, the registry publishes the
//! DS, the daemon sees it at every TLD server. `echo.test.`, active at `west`, moves to
//! `east` by a signed move (both providers serve both keys for a while; the registrar,
//! simulated here, adds the new DS before the NS change and removes the old one after),
//! and the daemon's own validator, from the lab's root key down, is asked at every phase
//! and twice a second in between: it must say "secure" every time.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use super::demo::DemoError;
use crate::config::Settings;
use crate::dns::{DnsObserver, Observer, ValidationVerdict, combine_validation};
use crate::dnssec::DsLine;
use crate::lifecycle::{Clock, Intent, State};
use crate::store::{EventKind, Store};
use dnssec_warden_lab::dns::{
    ACCOUNTS, ApexSource, KeySource, LabDns, REGISTRY, REGISTRY_NAME, TldServers,
};
use dnssec_warden_lab::pdns_sim::{PdnsOptions, PdnsSim};
use dnssec_warden_lab::registry::{Registry, RegistryConfig, What};

/// Enabled through the registry: the parent scans CDS, no registrar step.
pub const CDS_ZONE: &str = "delta.test.";
/// Moved from `west` to `east` without going insecure.
pub const MOVING: &str = "echo.test.";
pub const ZONES: [&str; 2] = [CDS_ZONE, MOVING];
const SOURCE: &str = "west";
const TARGET: &str = "east";
/// The second act alone ends well within this.
const DEADLINE: Duration = Duration::from_secs(45);
/// The validating resolver is asked this often during the move, besides at each phase.
const PROBE_EVERY: Duration = Duration::from_millis(500);

/// The second act's part of the world: the two PowerDNS accounts and the registry.
pub struct Act2 {
    west: PdnsSim,
    east: PdnsSim,
    registry: Registry,
    api_key: String,
}

fn account_ns(account: &str) -> Vec<String> {
    ACCOUNTS
        .iter()
        .filter(|(a, _)| *a == account)
        .flat_map(|(_, hosts)| hosts.iter().map(|(h, _)| h.to_string()))
        .collect()
}

impl Act2 {
    /// The accounts and the registry, with `delta.test.` at `west` (DNSSEC off) and
    /// `echo.test.` at `west`, signed there, its DS at both TLD servers.
    pub async fn start(lab: &LabDns) -> Result<Self, DemoError> {
        let api_key = format!("demo-pdns-{:016x}", fastrand::u64(..));
        let loopback: SocketAddr = "127.0.0.1:0"
            .parse()
            .map_err(|_| DemoError::Config("address".into()))?;
        let options = |account: &str| PdnsOptions {
            api_key: api_key.clone(),
            name_servers: account_ns(account),
            ttl: 1,
            direct_dnskey: true,
            ..PdnsOptions::default()
        };
        let west = PdnsSim::start(loopback, options(SOURCE)).await?;
        let east = PdnsSim::start(loopback, options(TARGET)).await?;

        // The registry scans on every NOTIFY and every 3 s; a new zone's CDS must be seen
        // unchanged for a second before its first DS (at a real registry: days).
        let mut config = RegistryConfig::new(
            "test.",
            lab.tld_addrs().to_vec(),
            IpAddr::from(REGISTRY),
            lab.port(),
        );
        config.notify_port = Some(0);
        config.children = vec![CDS_ZONE.to_string()];
        config.bootstrap_period = Duration::from_secs(1);
        config.scan_interval = Duration::from_secs(3);
        config.ds_ttl = 2;
        config.limits.query_timeout = Duration::from_secs(1);
        let registry = Registry::start(config).await?;
        let notify_port = registry
            .notify_addr()
            .map(|a| a.port())
            .ok_or_else(|| DemoError::Config("the registry has no NOTIFY socket".into()))?;
        lab.allow_updates_from(IpAddr::from(REGISTRY));

        west.handle().add_zone(CDS_ZONE);
        lab.add_account_child(
            SOURCE,
            CDS_ZONE,
            KeySource::pdns(west.handle()),
            ApexSource::pdns(west.handle()),
        )?;
        lab.publish_dsync(CDS_ZONE, REGISTRY_NAME, REGISTRY, notify_port)?;

        west.handle().add_zone(MOVING);
        west.handle()
            .secure_zone(MOVING)
            .map_err(DemoError::Config)?;
        lab.add_account_child(
            SOURCE,
            MOVING,
            KeySource::pdns(west.handle()),
            ApexSource::pdns(west.handle()),
        )?;
        let key = west
            .handle()
            .signing_key(MOVING)
            .ok_or_else(|| DemoError::Config(format!("{MOVING} is not signed at {SOURCE}")))?;
        lab.publish_ds(MOVING, TldServers::Both, &key.dnskey())?;
        // The moving zone's DS TTL is 1 s: each phase that waits on the registrar, its
        // DS hold included, then ends within the 4 s 'overdue' of the first act.
        lab.set_ds_ttl(CDS_ZONE, 2)?;
        lab.set_ds_ttl(MOVING, 1)?;
        for zone in ZONES {
            lab.set_ns_ttl(zone, 2)?;
            lab.set_account_zone_ttl(SOURCE, zone, 1)?;
            lab.set_account_dnskey_ttl(SOURCE, zone, 1)?;
        }
        Ok(Self {
            west,
            east,
            registry,
            api_key,
        })
    }

    /// The `[providers.west]` and `[providers.east]` blocks, their API key written into
    /// `dir`.
    pub fn config_section(&self, dir: &Path) -> Result<String, DemoError> {
        let key_file = dir.join("pdns-api-key");
        std::fs::write(&key_file, format!("{}\n", self.api_key))?;
        let block = |name: &str, sim: &PdnsSim| {
            format!(
                "[providers.{name}]\nkind = \"powerdns\"\nbase_url = \"{}\"\napi_key_file = {key_file:?}\nrequest_timeout = \"2s\"\nmax_attempts = 2\nretry_budget = \"4s\"\n",
                sim.base_url()
            )
        };
        Ok(format!(
            "{}{}",
            block(SOURCE, &self.west),
            block(TARGET, &self.east)
        ))
    }

    /// The world's lines for the accounts, as the demo's first lines show them.
    pub fn describe(&self) -> String {
        format!(
            "  accounts       {SOURCE} (PowerDNS API {}, name servers {}), {TARGET} (PowerDNS API {}, name servers {})\n  \
             registry       {REGISTRY_NAME} ({REGISTRY}): reads the CDS of {CDS_ZONE}, takes NOTIFY at port {}\n",
            self.west.base_url(),
            account_ns(SOURCE).join(" "),
            self.east.base_url(),
            account_ns(TARGET).join(" "),
            self.registry.notify_addr().map_or(0, |a| a.port()),
        )
    }
}

/// A request of the daemon to the registrar during the signed move, from the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MoveRequest {
    /// Add this DS line beside the ones there.
    Add(String),
    /// Change the NS to these.
    Delegate(Vec<String>),
    /// Remove this DS line, keeping the others.
    Remove(String),
}

impl MoveRequest {
    fn parse(text: &str) -> Option<Self> {
        let rest = text.strip_prefix("ACTION NEEDED: ")?;
        if rest.starts_with(&format!("add this DS for {MOVING} at the registrar")) {
            return rest
                .rsplit_once("): ")
                .map(|(_, ds)| Self::Add(ds.trim().to_string()));
        }
        if rest.starts_with(&format!("remove this DS for {MOVING} at the registrar")) {
            return rest
                .rsplit_once(": ")
                .map(|(_, ds)| Self::Remove(ds.trim().to_string()));
        }
        let ns = rest.strip_prefix(&format!("change the NS of {MOVING} at the registrar to: "))?;
        let ns: Vec<String> = ns
            .split(',')
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect();
        (!ns.is_empty()).then_some(Self::Delegate(ns))
    }
}

/// What the second act has seen and done so far.
#[derive(Default)]
struct Progress {
    seen_event: HashMap<&'static str, i64>,
    registry_events: usize,
    notifies: u64,
    last_registry: Option<What>,
    requests: VecDeque<(Instant, MoveRequest)>,
    move_declared: bool,
    phase: Option<String>,
    move_ended: bool,
    /// The moving zone's last observation when the move ended: the end waits for a
    /// newer one (a look just after the delete may still find the source's listing).
    observation_at_end: Option<serde_json::Value>,
    source_deleted: bool,
    last_probe: Option<Instant>,
    /// The validating resolver's verdicts on the moving zone: (secure, other).
    verdicts: (u32, u32),
    not_secure: Vec<String>,
    /// The last verdict other than "secure" printed (the same one is not printed again).
    last_not_secure: Option<String>,
}

/// The second act: the operator's steps, the story from the audit trail, the registry's
/// and the registrar's doings, the resolver's verdicts; `Ok(Err)` when it did not end
/// well (stuck past its deadline, or a verdict other than "secure" during the move).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    store: &Store,
    lab: &LabDns,
    act: &Act2,
    settings: &Settings,
    clock: &dyn Clock,
) -> Result<Result<(), DemoError>, DemoError> {
    let started = Instant::now();
    let _ = writeln!(
        out,
        "\nAct two: two PowerDNS accounts, {SOURCE} and {TARGET}, and a registry for test. that reads its children's CDS records.\n\
         - {CDS_ZONE} is at {SOURCE}, and test. publishes a DSYNC record naming the registry. Watch: nobody goes to the registrar.\n  \
         The daemon has {SOURCE} publish CDS/CDNSKEY, sends the registry a NOTIFY, the registry checks the CDS and publishes the DS,\n  \
         and the daemon sees the DS at every TLD server: enabled.\n\
         - {MOVING} is signed at {SOURCE}, its DS at the parent. It moves to {TARGET} without a moment unsigned: a signed move.\n  \
         Both providers serve both keys for a while; the registrar adds the new DS before the NS change and removes the old one after.\n  \
         Watch the phases: at each one a validating resolver (the daemon's own validator, from the lab's root key down) must say \"secure\".\n"
    );
    let _ = out.flush();
    let resolver = DnsObserver::new(&settings.dns).map_err(|e| DemoError::Config(e.to_string()))?;
    for zone in ZONES {
        store.ensure_zone(zone, clock.now()).await?;
    }
    store
        .set_intent(
            MOVING,
            Intent::Enabled,
            false,
            "enabled before the demo (signed at west, its DS at the parent)",
            clock.now(),
        )
        .await?;
    say(out, &format!("operator: dnssec-warden enable {CDS_ZONE}"));
    store
        .set_intent(
            CDS_ZONE,
            Intent::Enabled,
            false,
            "operator asked to enable DNSSEC (demo)",
            clock.now(),
        )
        .await?;

    let mut p = Progress::default();
    let outcome = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if started.elapsed() > DEADLINE {
            break Err(DemoError::Stuck(format!(
                "the second act did not finish within {}s",
                DEADLINE.as_secs()
            )));
        }
        for zone in ZONES {
            print_events(out, say, store, zone, &mut p).await?;
        }
        registry_news(out, say, act, &mut p);
        let delta = store.zone(CDS_ZONE).await?.and_then(|r| r.zone.state);
        let echo = store.zone(MOVING).await?;
        let echo_state = echo.as_ref().and_then(|r| r.zone.state);
        let phase = echo
            .as_ref()
            .and_then(|r| r.zone.facts.signed_move.as_ref())
            .map(|m| m.phase.name().to_string());
        if !p.move_declared && echo_state == Some(State::Active) {
            declare_move(out, say, store, lab, act, settings, clock).await?;
            p.move_declared = true;
        }
        if p.move_declared && phase.is_none() && p.phase.is_some() {
            p.move_ended = true;
            p.observation_at_end = echo.as_ref().and_then(|r| r.last_observation.clone());
        }
        if phase != p.phase {
            p.phase = phase.clone();
            if phase.is_some() {
                probe(out, say, &resolver, &mut p, true).await;
            }
        } else if phase.is_some() && p.last_probe.is_none_or(|t| t.elapsed() >= PROBE_EVERY) {
            probe(out, say, &resolver, &mut p, false).await;
        }
        if phase.as_deref() == Some("done") && !p.source_deleted {
            act.west.handle().delete_zone(MOVING);
            lab.remove_account_child(SOURCE, MOVING)?;
            say(
                out,
                &format!(
                    "operator: the move says it is done: {MOVING} deleted at {SOURCE} (the source's copy is the operator's to delete)"
                ),
            );
            p.source_deleted = true;
        }
        registrar_step(out, say, lab, &mut p)?;
        // The end: the moving zone active at the target alone, looked at since (the
        // provider view of a look while the source still listed it is not the last word).
        let settled = echo.as_ref().is_some_and(|r| {
            r.zone.state == Some(State::Active)
                && r.last_observation != p.observation_at_end
                && r.account() == Some(TARGET)
                && r.provider_error().is_none()
        });
        if delta == Some(State::Active) && p.move_ended && settled {
            break Ok(());
        }
    };
    probe(out, say, &resolver, &mut p, true).await;
    let verdict = combine_validation(&resolver.validation(CDS_ZONE).await);
    say(out, &format!("resolver: {CDS_ZONE} is {verdict}"));
    let (secure, other) = p.verdicts;
    let _ = writeln!(
        out,
        "\n{CDS_ZONE} went on through the registry alone: CDS published at {SOURCE}, NOTIFY to the DSYNC target, the DS published by the registry; no request to the registrar.\n\
         {MOVING} moved from {SOURCE} to {TARGET} in the signed order: the validating resolver was asked {} times during the move and said \"secure\" {secure} times{}. Act two took {:.1}s.",
        secure + other,
        if other == 0 {
            ", never anything else".to_string()
        } else {
            format!(
                ", something else {other} times: {}",
                p.not_secure.join("; ")
            )
        },
        started.elapsed().as_secs_f64()
    );
    let outcome = match outcome {
        Ok(()) if other > 0 => Err(DemoError::Stuck(format!(
            "the moving zone did not validate as secure throughout: {}",
            p.not_secure.join("; ")
        ))),
        other => other,
    };
    Ok(outcome)
}

/// The operator creates the zone at the target (DNSSEC off there) and declares the move,
/// as `dnssec-warden move` does.
async fn declare_move(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    store: &Store,
    lab: &LabDns,
    act: &Act2,
    settings: &Settings,
    clock: &dyn Clock,
) -> Result<(), DemoError> {
    act.east.handle().add_zone(MOVING);
    lab.add_account_child(
        TARGET,
        MOVING,
        KeySource::pdns(act.east.handle()),
        ApexSource::pdns(act.east.handle()),
    )?;
    lab.set_account_zone_ttl(TARGET, MOVING, 1)?;
    lab.set_account_dnskey_ttl(TARGET, MOVING, 1)?;
    say(
        out,
        &format!(
            "operator: created {MOVING} at {TARGET} (DNSSEC off there); dnssec-warden move {MOVING} --to {TARGET}"
        ),
    );
    let declared = crate::intent::declare_move(
        store,
        &settings.providers,
        MOVING,
        TARGET,
        crate::intent::Operator::CommandLine,
        clock.now(),
    )
    .await
    .map_err(|e| DemoError::Stuck(format!("the move was refused: {e}")))?;
    say(
        out,
        &format!(
            "{MOVING:<12} signed move from {} to {} declared",
            declared.source, declared.target
        ),
    );
    Ok(())
}

/// The zone's new audit lines, as the first act prints them; the registrar's requests of
/// the moving zone queued.
async fn print_events(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    store: &Store,
    zone: &'static str,
    p: &mut Progress,
) -> Result<(), DemoError> {
    for e in store.events(zone).await? {
        let last = p.seen_event.entry(zone).or_insert(0);
        if e.id <= *last {
            continue;
        }
        *last = e.id;
        let line = match (e.kind.as_str(), &e.from, &e.to) {
            ("intent", _, _) => continue,
            ("transition", from, Some(to)) => format!(
                "{zone:<12} {} -> {to}: {}",
                from.as_deref().unwrap_or("(new)"),
                e.reason
            ),
            (kind, _, _) => format!("{zone:<12} [{kind}] {}", e.reason),
        };
        say(out, &line);
        if zone == MOVING
            && e.kind == EventKind::Effect
            && let Some(request) = MoveRequest::parse(&e.reason)
        {
            p.requests.push_back((Instant::now(), request));
        }
    }
    Ok(())
}

/// What the registry did since last asked: the NOTIFYs it took, and each scan whose
/// outcome differs from the one before.
fn registry_news(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    act: &Act2,
    p: &mut Progress,
) {
    let notifies = act.registry.notifies();
    if notifies > p.notifies {
        say(
            out,
            &format!("{CDS_ZONE:<12} [registry] NOTIFY(CDS) received: scanning the child now"),
        );
        p.notifies = notifies;
    }
    let events = act.registry.events();
    for e in events.iter().skip(p.registry_events) {
        if p.last_registry.as_ref() == Some(&e.what) {
            continue;
        }
        p.last_registry = Some(e.what.clone());
        say(out, &format!("{:<12} [registry] {}", e.child, e.what));
    }
    p.registry_events = events.len();
}

/// The validating resolver's verdict on the moving zone, printed at a phase (`shown`) or
/// when it is not "secure".
async fn probe(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    resolver: &DnsObserver,
    p: &mut Progress,
    shown: bool,
) {
    p.last_probe = Some(Instant::now());
    let probes = resolver.validation(MOVING).await;
    let verdict = combine_validation(&probes);
    let detail: Vec<&str> = probes.iter().map(|x| x.detail.as_str()).collect();
    let mut repeated = false;
    if verdict == ValidationVerdict::Secure {
        p.verdicts.0 += 1;
        p.last_not_secure = None;
    } else {
        p.verdicts.1 += 1;
        let seen = format!(
            "{verdict} in {} ({})",
            p.phase.as_deref().unwrap_or("-"),
            detail.join("; ")
        );
        repeated = p.last_not_secure.as_ref() == Some(&seen);
        if !repeated {
            p.not_secure.push(seen.clone());
        }
        p.last_not_secure = Some(seen);
    }
    if shown || (verdict != ValidationVerdict::Secure && !repeated) {
        let phase = p
            .phase
            .as_deref()
            .map_or("after the move".to_string(), |ph| format!("in phase {ph}"));
        say(
            out,
            &format!(
                "resolver: {MOVING} {phase}: {verdict} ({})",
                detail.join("; ")
            ),
        );
    }
}

/// The registrar of the moving zone: does what the daemon asked, in order, each request
/// a few tenths of a second after it was made, at both TLD servers.
fn registrar_step(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    lab: &LabDns,
    p: &mut Progress,
) -> Result<(), DemoError> {
    let zone = MOVING;
    if p.requests
        .front()
        .is_none_or(|(asked, _)| asked.elapsed() < Duration::from_millis(300))
    {
        return Ok(());
    }
    let Some((_, request)) = p.requests.pop_front() else {
        return Ok(());
    };
    let parse = |line: &str| {
        DsLine::parse(line).map_err(|e| {
            DemoError::Stuck(format!(
                "the daemon named a DS that does not parse ({e}): {line}"
            ))
        })
    };
    let current: Vec<dnssec_warden_lab::Ds> = lab
        .ds(zone)
        .into_iter()
        .next()
        .map(|(_, ds)| ds)
        .unwrap_or_default();
    match request {
        MoveRequest::Add(line) => {
            let added: dnssec_warden_lab::Ds = parse(&line)?.ds.into();
            let mut set = current;
            if !set.contains(&added) {
                set.push(added);
            }
            lab.set_ds(zone, TldServers::Both, set)?;
            say(
                out,
                &format!(
                    "{zone:<12} [registrar] DS added on both TLD servers, beside the old one: {line}"
                ),
            );
        }
        MoveRequest::Delegate(ns) => {
            let names: Vec<&str> = ns.iter().map(String::as_str).collect();
            lab.delegate(zone, TldServers::Both, &names)?;
            say(
                out,
                &format!(
                    "{zone:<12} [registrar] NS changed on both TLD servers to: {}",
                    ns.join(" ")
                ),
            );
        }
        MoveRequest::Remove(line) => {
            let removed: dnssec_warden_lab::Ds = parse(&line)?.ds.into();
            let set: Vec<_> = current.into_iter().filter(|d| *d != removed).collect();
            lab.set_ds(zone, TldServers::Both, set)?;
            say(
                out,
                &format!("{zone:<12} [registrar] old DS removed from both TLD servers: {line}"),
            );
        }
    }
    Ok(())
}
