//! `dnssec-warden demo`: the whole lifecycle in a simulated world on loopback, no setup.
//!
//! The provider simulator, the lab DNS hierarchy and a simulated registrar run in this
//! process; the real engine (real API client, real DNS observer, SQLite in a temporary
//! directory) drives two zones through enable, an overdue DS (one registrar "forgets"),
//! `active`, then disable through the TTL wait to `disabled`. Timings are compressed: a
//! day of waiting takes seconds. The story is printed from the audit trail as it happens.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::config::{Credentials, Settings};
use crate::dns::DnsObserver;
use crate::dnssec::DsLine;
use crate::engine::{Engine, Notifier};
use crate::lifecycle::{AlertKind, Clock, Intent, Policy, State, SystemClock};
use crate::provider::{GcoreClient, ProviderError, RetryPolicy};
use crate::secret::Secret;
use crate::store::{Store, StoreError};
use dnssec_warden_lab::dns::{KeySource, LabDns, LabDnsError, TldServers};
use dnssec_warden_lab::{ProviderSim, SimOptions};

/// The prompt registrar publishes on one TLD server first, then on both; the forgetful
/// one does nothing until the overdue alert makes the operator chase it.
const PROMPT: &str = "alpha.test.";
const FORGETFUL: &str = "beta.test.";
/// The whole demo must end well within a minute.
const DEADLINE: Duration = Duration::from_secs(55);

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot start the simulated world: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Lab(#[from] LabDnsError),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("configuration: {0}")]
    Config(String),
    #[error("the demo did not finish: {0}")]
    Stuck(String),
    /// The lock on the demo's database, as `run` takes it.
    #[error(transparent)]
    Lock(#[from] crate::cli::daemon::DaemonError),
}

/// What the simulated registrar has done for a zone.
#[derive(Default)]
struct RegistrarState {
    submitted_at: Option<Instant>,
    published_a: bool,
    published_both: bool,
    removal_asked_at: Option<Instant>,
    removed: bool,
}

pub async fn run(out: &mut impl Write, keep: bool) -> Result<(), DemoError> {
    let started = Instant::now();
    let api_key = format!("demo-{:016x}", fastrand::u64(..));
    let sim = ProviderSim::start(
        "127.0.0.1:0"
            .parse()
            .map_err(|_| DemoError::Config("address".into()))?,
        SimOptions {
            api_keys: vec![api_key.clone()],
            ds_ttl: 2,
            name_server_ttl: 1,
            name_servers: dnssec_warden_lab::dns::NAME_SERVERS
                .map(String::from)
                .to_vec(),
            ..SimOptions::default()
        },
    )
    .await?;
    let lab = LabDns::start().await?;
    for zone in [PROMPT, FORGETFUL] {
        sim.handle().add_zone(zone);
        lab.add_child(zone, KeySource::provider(sim.handle()))?;
        lab.set_ds_ttl(zone, 2)?;
        lab.set_zone_ttl(zone, 1)?;
        lab.set_dnskey_ttl(zone, 1)?;
    }

    // A real configuration file, so that `status` and `check` work on it with --keep.
    let dir = tempfile::Builder::new()
        .prefix("dnssec-warden-demo-")
        .tempdir()?;
    let key_file = dir.path().join("api-key");
    std::fs::write(&key_file, format!("{api_key}\n"))?;
    let config_path = dir.path().join("config.toml");
    let config = format!(
        "# Written by `dnssec-warden demo`: the simulated world on loopback.\n\
         [provider]\nbase_url = \"{}\"\napi_key_file = {:?}\nrequest_timeout = \"2s\"\nmax_attempts = 2\nretry_budget = \"4s\"\n\
         [database]\npath = {:?}\n\
         {}\
         [timing]\npoll_waiting = \"250ms\"\npoll_active = \"1s\"\npropagation_margin = \"1s\"\n\
         ds_overdue_after = \"4s\"\nds_removal_overdue_after = \"20s\"\nretry_base = \"250ms\"\nassumed_ds_ttl = \"2s\"\n\
         [zones]\nnames = [\"{PROMPT}\", \"{FORGETFUL}\"]\n",
        sim.base_url(),
        key_file,
        dir.path().join("state.db"),
        lab.config_section(),
    );
    std::fs::write(&config_path, &config)?;
    let settings = Settings::load(&config_path).map_err(|e| DemoError::Config(e.to_string()))?;
    // The demo's engine is a daemon on this database as long as it runs (with --keep,
    // until Ctrl-C): a `run` on the same config must find it taken.
    let _lock = crate::cli::daemon::lock(&settings.database.path)?;

    let store = Store::open(&settings.database.path).await?;
    let clock = SystemClock;
    for zone in [PROMPT, FORGETFUL] {
        store.ensure_zone(zone, clock.now()).await?;
    }
    let provider = Arc::new(GcoreClient::with_policy(
        sim.base_url(),
        Credentials::ApiKey(Secret::new(api_key)),
        RetryPolicy {
            max_attempts: 2,
            budget: Duration::from_secs(4),
            ..RetryPolicy::default()
        },
        Duration::from_secs(2),
    )?);
    let observer =
        Arc::new(DnsObserver::new(&settings.dns).map_err(|e| DemoError::Config(e.to_string()))?);
    let policy: Policy = settings.timing.clone();
    let engine = Arc::new(Engine::new(
        store.clone(),
        provider,
        observer,
        Arc::new(SystemClock),
        policy.clone(),
        Notifier::default(),
    ));
    let (stop, stopped) = watch::channel(false);
    let running = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.run(stopped, Duration::from_millis(100)).await })
    };

    let say = |out: &mut dyn Write, text: &str| {
        let _ = writeln!(out, "[{:>5.1}s] {text}", started.elapsed().as_secs_f64());
        let _ = out.flush();
    };
    let _ = writeln!(
        out,
        "dnssec-warden demo: a provider, a DNS hierarchy and a registrar, simulated on loopback.\n\
         Timings are compressed: the DS TTL is 2 s, the margin 1 s, 'overdue' is 4 s.\n  \
         provider API   {}\n  DNS            root {}, TLD test. on two servers, provider name servers (port {})\n  \
         zones          {PROMPT} (a prompt registrar), {FORGETFUL} (a registrar that forgets)\n  \
         database       {}\n",
        sim.base_url(),
        dnssec_warden_lab::dns::ROOT,
        lab.provider_addrs()[0].port(),
        settings.database.path.display(),
    );

    say(
        out,
        &format!("operator: dnssec-warden enable {PROMPT}; dnssec-warden enable {FORGETFUL}"),
    );
    for zone in [PROMPT, FORGETFUL] {
        store
            .set_intent(
                zone,
                Intent::Enabled,
                false,
                "operator asked to enable DNSSEC (demo)",
                clock.now(),
            )
            .await?;
    }

    let mut registrar: HashMap<&str, RegistrarState> = HashMap::new();
    let mut seen_event: HashMap<&str, i64> = HashMap::new();
    let mut disabling = false;
    let outcome = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if started.elapsed() > DEADLINE {
            break Err(DemoError::Stuck(format!(
                "not finished after {}s",
                DEADLINE.as_secs()
            )));
        }
        let mut states = Vec::new();
        for zone in [PROMPT, FORGETFUL] {
            // Print every new line of the audit trail.
            for e in store.events(zone).await? {
                let last = seen_event.entry(zone).or_insert(0);
                if e.id <= *last {
                    continue;
                }
                *last = e.id;
                let line = match (e.kind.as_str(), &e.from, &e.to) {
                    ("transition", from, Some(to)) => format!(
                        "{zone:<12} {} -> {to}: {}",
                        from.as_deref().unwrap_or("(new)"),
                        e.reason
                    ),
                    ("intent", _, _) => continue,
                    (kind, _, _) => format!("{zone:<12} [{kind}] {}", e.reason),
                };
                say(out, &line);
            }
            let row = store.zone(zone).await?;
            let state = row.as_ref().and_then(|r| r.zone.state);
            let ds_line = row.and_then(|r| r.zone.facts.ds_line);
            states.push(state);
            let reg = registrar.entry(zone).or_default();
            registrar_step(
                out,
                &say,
                &store,
                &lab,
                zone,
                state,
                ds_line.as_deref(),
                reg,
            )
            .await?;
        }
        if !disabling && states.iter().all(|s| *s == Some(State::Active)) {
            disabling = true;
            say(
                out,
                &format!(
                    "operator: dnssec-warden disable {PROMPT}; dnssec-warden disable {FORGETFUL}"
                ),
            );
            for zone in [PROMPT, FORGETFUL] {
                store
                    .set_intent(
                        zone,
                        Intent::Disabled,
                        false,
                        "operator asked to disable DNSSEC (demo)",
                        clock.now(),
                    )
                    .await?;
            }
        }
        if disabling && states.iter().all(|s| *s == Some(State::Disabled)) {
            break Ok(());
        }
    };

    if outcome.is_ok() {
        let _ = writeln!(out, "\nFinal status:");
        if let Some(text) = crate::cli::status::status_text(&store, None, &policy).await? {
            let _ = write!(out, "{text}");
        }
        let _ = writeln!(out, "\nHistory of {FORGETFUL}:");
        let _ = write!(
            out,
            "{}",
            crate::cli::status::history_text(&store, FORGETFUL).await?
        );
        let calls: Vec<String> = sim
            .handle()
            .calls()
            .iter()
            .filter(|c| c.path.ends_with("/dnssec"))
            .map(|c| format!("  {} {} {} -> {}", c.method, c.path, c.body, c.status))
            .collect();
        let _ = writeln!(
            out,
            "\nDNSSEC switches the provider received:\n{}",
            calls.join("\n")
        );
        let _ = writeln!(
            out,
            "\nBoth zones went on and off without a moment of failed validation: DNSSEC was switched off only after every parent server had dropped the DS and its TTL had passed. Finished in {:.1}s.",
            started.elapsed().as_secs_f64()
        );
    }

    if keep && outcome.is_ok() {
        let dir_path: PathBuf = dir.keep();
        let _ = writeln!(
            out,
            "\n--keep: the world stays up until Ctrl-C. Try:\n  \
             dnssec-warden status --config {0}\n  \
             dnssec-warden history {PROMPT} --config {0}\n  \
             dnssec-warden check {PROMPT} --config {0}\n  \
             dnssec-warden enable {PROMPT} --config {0}   (the engine here acts on it)",
            dir_path.join("config.toml").display()
        );
        let _ = out.flush();
        let _ = tokio::signal::ctrl_c().await;
    }
    let _ = stop.send(true);
    let _ = running.await;
    store.close().await;
    outcome
}

/// The simulated registrar: reads the DS the operator was told from the database and
/// publishes or removes it at the lab TLD servers, prompt or forgetful.
#[allow(clippy::too_many_arguments)]
async fn registrar_step(
    out: &mut impl Write,
    say: &impl Fn(&mut dyn Write, &str),
    store: &Store,
    lab: &LabDns,
    zone: &'static str,
    state: Option<State>,
    ds_line: Option<&str>,
    reg: &mut RegistrarState,
) -> Result<(), DemoError> {
    match state {
        Some(State::AwaitingDs) => {
            let submitted = *reg.submitted_at.get_or_insert_with(Instant::now);
            let Some(ds) = ds_line.and_then(|l| DsLine::parse(l).ok()) else {
                return Ok(());
            };
            if zone == FORGETFUL {
                let overdue = store
                    .open_alerts(Some(zone))
                    .await?
                    .iter()
                    .any(|a| a.kind == AlertKind::DsUnpublishedOverdue);
                if overdue && !reg.published_both {
                    say(
                        out,
                        &format!(
                            "{zone:<12} [registrar] the operator saw the overdue alert and chased the registrar: DS published on both TLD servers"
                        ),
                    );
                    lab.set_ds(zone, TldServers::Both, vec![ds.ds.into()])?;
                    reg.published_both = true;
                }
            } else if !reg.published_a && submitted.elapsed() > Duration::from_millis(500) {
                say(
                    out,
                    &format!("{zone:<12} [registrar] DS published on TLD server A only (B lags)"),
                );
                lab.set_ds(zone, TldServers::A, vec![ds.ds.into()])?;
                reg.published_a = true;
            } else if reg.published_a
                && !reg.published_both
                && submitted.elapsed() > Duration::from_millis(2000)
            {
                say(
                    out,
                    &format!("{zone:<12} [registrar] DS now on TLD server B as well"),
                );
                lab.set_ds(zone, TldServers::Both, vec![ds.ds.into()])?;
                reg.published_both = true;
            }
        }
        Some(State::AwaitingDsRemoval) => {
            let asked = *reg.removal_asked_at.get_or_insert_with(Instant::now);
            if !reg.removed && asked.elapsed() > Duration::from_millis(500) {
                say(
                    out,
                    &format!("{zone:<12} [registrar] DS removed from both TLD servers"),
                );
                lab.remove_ds(zone, TldServers::Both)?;
                reg.removed = true;
            }
        }
        _ => {}
    }
    Ok(())
}
