//! `dnssec-warden demo`: the whole lifecycle in a simulated world on loopback, no setup.
//!
//! The provider simulator, the lab DNS hierarchy and a simulated registrar run in this
//! process; the real engine (real API client, real DNS observer, SQLite in a temporary
//! directory) drives two zones through enable, an overdue DS (one registrar "forgets"),
//! `active`, then disable through the TTL wait to `disabled`; a third zone moves in from
//! an old provider that signs it (its DS at the parent): the old DS removed and waited
//! out, the NS changed at one TLD server then the other, the new DS announced only after
//! the old delegation expired, `active`. The simulated registrar does what the daemon
//! asks, reading its requests from the audit trail. Timings are compressed: a day of
//! waiting takes seconds. The story is printed from the audit trail as it happens. The
//! second act (`demo_act2`) follows on the same world and engine: a zone enabled through a
//! registry that reads CDS, and a signed move between two PowerDNS accounts.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::cli::demo_act2::{self, Act2};
use crate::config::Settings;
use crate::dns::DnsObserver;
use crate::dnssec::DsLine;
use crate::engine::{Engine, Notifier};
use crate::lifecycle::{AlertKind, Clock, Facts, Intent, Policy, State, SystemClock, Timestamp};
use crate::provider::ProviderError;
use crate::provider::fleet::Providers;
use crate::secret::Secret;
use crate::store::{Store, StoreError};
use dnssec_warden_lab::dns::{KeySource, LabDns, LabDnsError, TldServers};
use dnssec_warden_lab::keys::LabKey;
use dnssec_warden_lab::{ProviderSim, SimOptions};

/// The prompt registrar publishes on one TLD server first, then on both; the forgetful
/// one does nothing until the overdue alert makes the operator chase it.
const PROMPT: &str = "alpha.test.";
const FORGETFUL: &str = "beta.test.";
/// Moving in from an old provider (DNSSEC on there, its DS at the parent); the registrar
/// follows the daemon's requests in order.
const MOVING: &str = "gamma.test.";
const ZONES: [&str; 3] = [PROMPT, FORGETFUL, MOVING];
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
    #[error(transparent)]
    Status(#[from] crate::cli::status::StatusError),
    #[error("configuration: {0}")]
    Config(String),
    #[error("the demo did not finish: {0}")]
    Stuck(String),
    /// The lock on the demo's database, as `run` takes it.
    #[error(transparent)]
    Lock(#[from] crate::cli::daemon::DaemonError),
    /// The console of `--keep`: its one-time user, or serving it.
    #[error("the web console: {0}")]
    ConsoleUser(#[from] crate::web::auth::AuthError),
    #[error(transparent)]
    Console(#[from] crate::web::server::WebError),
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

/// A request the daemon made of the operator, in its own words from the audit trail
/// (`Notification::summary`), for the registrar of the zone moving in.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Request {
    /// Remove these DS records (zone-file lines) at the registrar.
    RemoveDs(Vec<String>),
    /// Change the NS at the registrar to these name servers.
    Delegate(Vec<String>),
    /// Enter this DS at the registrar.
    EnterDs(String),
}

impl Request {
    /// Reads a request from an audit line; `None` for anything else.
    fn parse(zone: &str, text: &str) -> Option<Self> {
        let rest = text.strip_prefix("ACTION NEEDED: ")?;
        if let Some(r) = rest.strip_prefix(&format!("remove the DS for {zone} at the registrar")) {
            let lines = r
                .trim()
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .map(|l| l.split("; ").map(|x| x.trim().to_string()).collect())
                .unwrap_or_default();
            return Some(Self::RemoveDs(lines));
        }
        if let Some(r) =
            rest.strip_prefix(&format!("change the NS of {zone} at the registrar to: "))
        {
            let ns: Vec<String> = r
                .split(',')
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty())
                .collect();
            return (!ns.is_empty()).then_some(Self::Delegate(ns));
        }
        rest.strip_prefix(&format!("enter this DS for {zone} at the registrar: "))
            .map(|r| Self::EnterDs(r.trim().to_string()))
    }
}

/// What the registrar of the zone moving in is doing: the daemon's requests in order,
/// each taken up half a second after it was made.
#[derive(Default)]
struct Mover {
    queue: std::collections::VecDeque<(Instant, Request)>,
    /// Re-delegated at TLD server A (at this moment, to these servers); B follows.
    delegated_a: Option<(Instant, Vec<String>)>,
}

/// The demo, step by step: the simulated world and its configuration, the engine on it,
/// the operator's enables, the story told from the audit trail until every zone is where
/// it should be, the ending; with `keep`, the world stays up, its console served (on
/// `console_port`, else a free port), until Ctrl-C.
pub async fn run(
    out: &mut dyn Write,
    keep: bool,
    console_port: Option<u16>,
) -> Result<(), DemoError> {
    let started = Instant::now();
    // The same moment on the daemon's clock, to show its facts in the demo's seconds.
    let started_at = SystemClock.now();
    let api_key = format!("demo-{:016x}", fastrand::u64(..));
    let (sim, lab, old_key) = start_world(&api_key).await?;
    let act2 = Act2::start(&lab).await?;
    let (dir, settings) = write_config(&sim, &lab, &act2, &api_key)?;
    // The demo's engine is a daemon on this database as long as it runs (with --keep,
    // until Ctrl-C): a `run` on the same config must find it taken.
    let mut lock = crate::cli::daemon::lock(&settings.database).await?;

    let store = Store::connect(&settings.database).await?;
    if let Some(path) = settings.database.sqlite_path() {
        lock.hold_database(path)?;
    }
    let clock = SystemClock;
    for zone in ZONES {
        store.ensure_zone(zone, clock.now()).await?;
    }
    let policy: Policy = settings.timing.clone();
    let engine = start_engine(&settings, &store, &policy)?;

    let say = |out: &mut dyn Write, text: &str| {
        let _ = writeln!(out, "[{:>5.1}s] {text}", started.elapsed().as_secs_f64());
        let _ = out.flush();
    };
    print_world(out, &sim, &lab, &old_key, &act2, &settings);
    enable_zones(out, &say, &store, &clock).await?;

    // The engine starts after the intents are in: a zone it met first without one would
    // be adopted as found and only then set on its path, and the story would vary by run.
    let (stop, stopped) = watch::channel(false);
    let running = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.run(stopped, Duration::from_millis(100)).await })
    };

    let mut outcome = tell_the_story(
        out, &say, &store, &lab, &clock, &policy, started, started_at,
    )
    .await?;
    if outcome.is_ok() {
        outcome = demo_act2::run(out, &say, &store, &lab, &act2, &settings, &clock).await?;
    }

    if outcome.is_ok() {
        print_ending(out, &store, &sim, &policy, started).await?;
    }

    let kept = if keep && outcome.is_ok() {
        keep_the_world(out, dir, &store, console_port).await
    } else {
        Ok(())
    };
    let _ = stop.send(true);
    let _ = running.await;
    store.close().await;
    outcome.and(kept)
}

/// The provider simulator and the lab DNS hierarchy, with the three zones: two at the
/// provider, and one moving in, still signed by the old provider with the returned key.
async fn start_world(api_key: &str) -> Result<(ProviderSim, LabDns, LabKey), DemoError> {
    let sim = ProviderSim::start(
        "127.0.0.1:0"
            .parse()
            .map_err(|_| DemoError::Config("address".into()))?,
        SimOptions {
            api_keys: vec![api_key.to_string()],
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
    // The zone moving in: at the provider (DNSSEC off there), still delegated to the old
    // provider, which signs it with its own key, whose DS the parent publishes.
    let old_key = LabKey::generate(257).map_err(|e| DemoError::Config(e.to_string()))?;
    sim.handle().add_zone(MOVING);
    lab.add_moving_child(MOVING, &old_key, KeySource::provider(sim.handle()))?;
    lab.set_ds_ttl(MOVING, 2)?;
    // The old delegation's NS TTL (at the parent and the old servers' apex) is 2 s, so
    // its hold (rule 9) outlasts the new key's propagation hold.
    lab.set_ns_ttl(MOVING, 2)?;
    lab.set_zone_ttl(MOVING, 1)?;
    lab.set_dnskey_ttl(MOVING, 1)?;
    lab.set_old_zone_ttl(MOVING, 2)?;
    lab.set_old_dnskey_ttl(MOVING, 1)?;
    Ok((sim, lab, old_key))
}

/// A real configuration file, so that `status` and `check` work on it with --keep: in a
/// temporary directory (returned: it goes when dropped), and read back as the daemon reads
/// it.
fn write_config(
    sim: &ProviderSim,
    lab: &LabDns,
    act2: &Act2,
    api_key: &str,
) -> Result<(tempfile::TempDir, Settings), DemoError> {
    let dir = tempfile::Builder::new()
        .prefix("dnssec-warden-demo-")
        .tempdir()?;
    let key_file = dir.path().join("api-key");
    std::fs::write(&key_file, format!("{api_key}\n"))?;
    let config_path = dir.path().join("config.toml");
    let config = format!(
        "# Written by `dnssec-warden demo`: the simulated world on loopback.\n\
         [provider]\nbase_url = \"{}\"\napi_key_file = {:?}\nrequest_timeout = \"2s\"\nmax_attempts = 2\nretry_budget = \"4s\"\n\
         {}\
         [database]\npath = {:?}\n\
         {}\
         [timing]\npoll_waiting = \"250ms\"\npoll_active = \"1s\"\npropagation_margin = \"1s\"\n\
         ds_overdue_after = \"4s\"\nds_removal_overdue_after = \"20s\"\nretry_base = \"250ms\"\nassumed_ds_ttl = \"2s\"\nassumed_ns_ttl = \"2s\"\n\
         [zones]\nnames = [\"{PROMPT}\", \"{FORGETFUL}\", \"{MOVING}\", \"{}\", \"{}\"]\n",
        sim.base_url(),
        key_file,
        act2.config_section(dir.path())?,
        dir.path().join("state.db"),
        lab.config_section(),
        demo_act2::ZONES[0],
        demo_act2::ZONES[1],
    );
    std::fs::write(&config_path, &config)?;
    let settings = Settings::load(&config_path).map_err(|e| DemoError::Config(e.to_string()))?;
    Ok((dir, settings))
}

/// The real engine on the demo's database: the real API clients of every account in the
/// configuration (the Gcore simulator, the two PowerDNS simulators), the real DNS
/// observer on the lab hierarchy.
fn start_engine(
    settings: &Settings,
    store: &Store,
    policy: &Policy,
) -> Result<Arc<Engine<Providers, DnsObserver>>, DemoError> {
    let provider = Arc::new(
        Providers::build(&settings.providers).map_err(|e| DemoError::Config(e.to_string()))?,
    );
    let observer =
        Arc::new(DnsObserver::new(&settings.dns).map_err(|e| DemoError::Config(e.to_string()))?);
    Ok(Arc::new(Engine::new(
        store.clone(),
        provider,
        observer,
        Arc::new(SystemClock),
        policy.clone(),
        Notifier::default(),
    )))
}

/// The world the demo runs in, as the first lines say it.
fn print_world(
    out: &mut dyn Write,
    sim: &ProviderSim,
    lab: &LabDns,
    old_key: &LabKey,
    act2: &Act2,
    settings: &Settings,
) {
    let _ = writeln!(
        out,
        "dnssec-warden demo: provider accounts, a DNS hierarchy, a registrar and a registry, simulated on loopback.\n\
         Timings are compressed: the DS TTL is 2 s, the old delegation's NS TTL 2 s, the margin 1 s, 'overdue' is 4 s.\n  \
         provider API   gcore (Gcore-style API {})\n  DNS            root {}, TLD test. on two servers, provider name servers {}, old provider's {} (port {})\n  \
         zones          {PROMPT} (a prompt registrar), {FORGETFUL} (a registrar that forgets),\n                 \
         {MOVING} (moving in: signed at the old provider, its DS key tag {} at the parent)\n\
         {}  \
         database       {}\n\n\
         Act one: three zones at the gcore account; the registrar is simulated and does what the daemon asks.\n\
         - {PROMPT} and {FORGETFUL} go on, then off. Watch: the DS is asked for only once every name server serves the key,\n  \
         and DNSSEC goes off only after every TLD server dropped the DS and its TTL passed. {FORGETFUL}'s registrar forgets: an alert.\n\
         - {MOVING} moves in from an old provider that signs it. Watch the safe order: the old DS removed and waited out,\n  \
         then the NS change, then the new DS.\n",
        sim.base_url(),
        dnssec_warden_lab::dns::ROOT,
        dnssec_warden_lab::dns::NAME_SERVERS.join(" "),
        dnssec_warden_lab::dns::OLD_NAME_SERVERS.join(" "),
        lab.provider_addrs()[0].port(),
        old_key.dnskey().key_tag(),
        act2.describe(),
        settings.database.describe(),
    );
}

/// The operator enables DNSSEC on the three zones.
async fn enable_zones(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    store: &Store,
    clock: &dyn Clock,
) -> Result<(), DemoError> {
    say(
        out,
        &format!(
            "operator: dnssec-warden enable {PROMPT}; dnssec-warden enable {FORGETFUL}; dnssec-warden enable {MOVING}"
        ),
    );
    for zone in ZONES {
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
    Ok(())
}

/// The story as it happens: every tenth of a second, each zone's new audit lines
/// printed and its registrar's turn; once both zones are active the operator disables
/// them. `Ok(outcome)`: the story ended, with every zone where it should be or stuck past
/// the deadline; `Err`: the database could not be read, and the demo stops at once.
#[allow(clippy::too_many_arguments)]
async fn tell_the_story(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    store: &Store,
    lab: &LabDns,
    clock: &dyn Clock,
    policy: &Policy,
    started: Instant,
    started_at: Timestamp,
) -> Result<Result<(), DemoError>, DemoError> {
    let mut registrar: HashMap<&str, RegistrarState> = HashMap::new();
    let mut mover = Mover::default();
    let mut seen_event: HashMap<&str, i64> = HashMap::new();
    let mut disabling = false;
    let mut moving_state = None;
    let outcome = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if started.elapsed() > DEADLINE {
            break Err(DemoError::Stuck(format!(
                "not finished after {}s",
                DEADLINE.as_secs()
            )));
        }
        let mut states = Vec::new();
        for zone in ZONES {
            print_new_events(out, say, store, zone, &mut seen_event, &mut mover).await?;
            let row = store.zone(zone).await?;
            let state = row.as_ref().and_then(|r| r.zone.state);
            if zone == MOVING {
                if state == Some(State::AwaitingDs)
                    && moving_state != state
                    && let Some(facts) = row.as_ref().map(|r| &r.zone.facts)
                {
                    say(out, &rule_9_check(facts, policy, started_at));
                }
                moving_state = state;
                mover_step(out, say, lab, &mut mover)?;
                continue;
            }
            let ds_line = row.and_then(|r| r.zone.facts.lifecycle.ds_line);
            states.push(state);
            let reg = registrar.entry(zone).or_default();
            registrar_step(out, say, store, lab, zone, state, ds_line.as_deref(), reg).await?;
        }
        if !disabling && states.iter().all(|s| *s == Some(State::Active)) {
            disabling = true;
            disable_zones(out, say, store, clock).await?;
        }
        if disabling
            && states.iter().all(|s| *s == Some(State::Disabled))
            && moving_state == Some(State::Active)
        {
            break Ok(());
        }
    };
    Ok(outcome)
}

/// Prints every new line of `zone`'s audit trail; a request of the daemon for the zone
/// moving in goes to its registrar's queue.
async fn print_new_events(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    store: &Store,
    zone: &'static str,
    seen_event: &mut HashMap<&str, i64>,
    mover: &mut Mover,
) -> Result<(), DemoError> {
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
        if zone == MOVING
            && e.kind == crate::store::EventKind::Effect
            && let Some(request) = Request::parse(zone, &e.reason)
        {
            mover.queue.push_back((Instant::now(), request));
        }
    }
    Ok(())
}

/// The operator disables DNSSEC on the two zones that went on.
async fn disable_zones(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    store: &Store,
    clock: &dyn Clock,
) -> Result<(), DemoError> {
    say(
        out,
        &format!("operator: dnssec-warden disable {PROMPT}; dnssec-warden disable {FORGETFUL}"),
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
    Ok(())
}

/// The end of a story that finished: the final status, two zones' histories, the
/// DNSSEC switches the provider received, and what it showed.
async fn print_ending(
    out: &mut dyn Write,
    store: &Store,
    sim: &ProviderSim,
    policy: &Policy,
    started: Instant,
) -> Result<(), DemoError> {
    let _ = writeln!(out, "\nFinal status:");
    if let Some(text) = crate::cli::status::status_text(store, None, policy).await? {
        let _ = write!(out, "{text}");
    }
    let _ = writeln!(out, "\nHistory of {FORGETFUL}:");
    let _ = write!(
        out,
        "{}",
        crate::cli::status::history_text(store, FORGETFUL).await?
    );
    let _ = writeln!(out, "\nHistory of {MOVING}:");
    let _ = write!(
        out,
        "{}",
        crate::cli::status::history_text(store, MOVING).await?
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
        "\n{PROMPT} and {FORGETFUL} went on and off without a moment of failed validation: DNSSEC was switched off only after every parent server had dropped the DS and its TTL had passed.\n\
         {MOVING} moved in in the safe order (safety rule 9): the old provider's DS went first and its TTL was waited out before the NS change, and the new DS was announced only after every TLD server delegated to the provider and the old delegation's NS TTL had passed. Finished in {:.1}s.",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The one user of the console `--keep` serves.
const CONSOLE_USER: &str = "demo";

/// `--keep`: the demo's directory kept, the world up and the product's web console on
/// it (loopback, a one-time operator) until Ctrl-C or SIGTERM, with commands to try.
async fn keep_the_world(
    out: &mut dyn Write,
    dir: tempfile::TempDir,
    store: &Store,
    console_port: Option<u16>,
) -> Result<(), DemoError> {
    use std::os::unix::fs::PermissionsExt;
    use tokio::signal::unix::{SignalKind, signal};
    // Before anything is served: from here a signal ends the demo through this function,
    // which takes the users file with it.
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let dir_path: PathBuf = dir.keep();
    // The world kept is its user's alone: the console's users file goes in it.
    std::fs::set_permissions(&dir_path, std::fs::Permissions::from_mode(0o700))?;
    let config = dir_path.join("config.toml");
    let users = OneTimeUsers(dir_path.join("web-users"));
    let (console, password) = open_console(&config, &users.0, store, console_port).await?;
    // The one line that holds the password: it is in no log and no file.
    let _ = writeln!(
        out,
        "\n--keep: the world stays up until Ctrl-C. Its web console (the daemon's own, on loopback):\n  \
         console        http://{}/\n  \
         user           {CONSOLE_USER}   (operator: it may press the switch)\n  \
         password       {}   (made for this run: its users file goes at Ctrl-C)\n\
         Or try:\n  \
         dnssec-warden status --config {2}\n  \
         dnssec-warden history {PROMPT} --config {2}\n  \
         dnssec-warden check {PROMPT} --config {2}\n  \
         dnssec-warden enable {PROMPT} --config {2}   (the engine here acts on it)",
        console.addr,
        password.expose(),
        config.display()
    );
    let _ = out.flush();
    drop(password);
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    console.stop();
    drop(users);
    Ok(())
}

/// The users file of `--keep`'s console, removed when dropped (the demo's end, or an
/// error before it): the rest of the demo's directory stays, the one-time user does not.
struct OneTimeUsers(PathBuf);

impl Drop for OneTimeUsers {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Serves the console as `run` does with `[web]`: a fresh operator with a random
/// password in a users file only the user can read, `[web]` added to the demo's config
/// (so `check-config` sees what is served), the settings read back from it.
async fn open_console(
    config: &std::path::Path,
    users: &std::path::Path,
    store: &Store,
    port: Option<u16>,
) -> Result<(crate::web::server::WebServer, Secret), DemoError> {
    use std::os::unix::fs::OpenOptionsExt;
    let password = Secret::new(crate::web::auth::random_password()?);
    let hash = {
        let password = password.clone();
        tokio::task::spawn_blocking(move || crate::web::auth::hash_password(password.expose()))
            .await
            .map_err(|e| DemoError::Config(format!("hashing the console's password: {e}")))??
    };
    // create_new: never through a link or over a file put there before.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(users)?;
    writeln!(file, "{CONSOLE_USER}:operator:{hash}")?;
    drop(file);
    let mut text = std::fs::read_to_string(config)?;
    // Port 0: a free one, which the demo prints.
    text.push_str(&format!(
        "# The console of `demo --keep`, its address printed by the demo.\n\
         [web]\nlisten = \"127.0.0.1:{}\"\nusers = {users:?}\n",
        port.unwrap_or(0)
    ));
    std::fs::write(config, text)?;
    let settings = Settings::load(config).map_err(|e| DemoError::Config(e.to_string()))?;
    let web = settings
        .web
        .as_ref()
        .ok_or_else(|| DemoError::Config("the demo's [web] was not read back".into()))?;
    let console = crate::web::server::serve(
        web,
        store.clone(),
        Arc::new(SystemClock),
        &settings.timing,
        &settings.providers,
    )
    .await?;
    Ok((console, password))
}

/// The moving zone's DS announcement against safety rule 9, from the daemon's facts, in
/// the demo's seconds: when the last TLD server delegated to the provider (T_delegated),
/// the old delegation's NS TTL, and the earliest moment a DS could be announced.
fn rule_9_check(facts: &Facts, policy: &Policy, started_at: Timestamp) -> String {
    let secs = |t: Timestamp| t.since(started_at).as_secs_f64();
    let zone = MOVING;
    let Some(delegated) = facts.delegation.delegated_at else {
        return format!("{zone:<12} [rule 9] the DS was announced, but no T_delegated is recorded");
    };
    let ttl = facts
        .delegation
        .old_ns_ttl
        .map_or(policy.assumed_ns_ttl, |t| Duration::from_secs(u64::from(t)));
    let earliest = delegated.plus(ttl).plus(policy.propagation_margin);
    let announced = facts
        .lifecycle
        .ds_announced_at
        .map_or("(not recorded)".to_string(), |t| format!("{:.1}s", secs(t)));
    format!(
        "{zone:<12} [rule 9] every TLD server delegated to the provider at {:.1}s (T_delegated); old NS TTL {}s + margin {}s: no DS before {:.1}s; announced at {announced}",
        secs(delegated),
        ttl.as_secs(),
        policy.propagation_margin.as_secs(),
        secs(earliest),
    )
}

/// The registrar of the zone moving in: does what the daemon asked, in order, each
/// request half a second after it was made; the NS change reaches TLD server A first and
/// B a second and a half later.
fn mover_step(
    out: &mut dyn Write,
    say: &impl Fn(&mut dyn Write, &str),
    lab: &LabDns,
    mover: &mut Mover,
) -> Result<(), DemoError> {
    let zone = MOVING;
    if let Some((at, ns)) = &mover.delegated_a {
        if at.elapsed() > Duration::from_millis(1500) {
            let names: Vec<&str> = ns.iter().map(String::as_str).collect();
            lab.delegate(zone, TldServers::B, &names)?;
            say(
                out,
                &format!(
                    "{zone:<12} [registrar] NS now changed on TLD server B as well: {}",
                    ns.join(" ")
                ),
            );
            mover.delegated_a = None;
        }
        return Ok(());
    }
    let Some((asked, _)) = mover.queue.front() else {
        return Ok(());
    };
    if asked.elapsed() < Duration::from_millis(500) {
        return Ok(());
    }
    let Some((_, request)) = mover.queue.pop_front() else {
        return Ok(());
    };
    match request {
        Request::RemoveDs(lines) => {
            say(
                out,
                &format!(
                    "{zone:<12} [registrar] removed from both TLD servers the DS the daemon named:"
                ),
            );
            for line in &lines {
                say(out, &format!("{zone:<12}     {line}"));
            }
            lab.remove_ds(zone, TldServers::Both)?;
        }
        Request::Delegate(ns) => {
            let names: Vec<&str> = ns.iter().map(String::as_str).collect();
            lab.delegate(zone, TldServers::A, &names)?;
            say(
                out,
                &format!(
                    "{zone:<12} [registrar] NS changed on TLD server A to what the daemon asked: {} (B lags)",
                    ns.join(" ")
                ),
            );
            mover.delegated_a = Some((Instant::now(), ns));
        }
        Request::EnterDs(line) => {
            let ds = DsLine::parse(&line).map_err(|e| {
                DemoError::Stuck(format!(
                    "the daemon asked for a DS that does not parse ({e}): {line}"
                ))
            })?;
            lab.set_ds(zone, TldServers::Both, vec![ds.ds.into()])?;
            say(
                out,
                &format!("{zone:<12} [registrar] DS published on both TLD servers: {line}"),
            );
        }
    }
    Ok(())
}

/// The simulated registrar: reads the DS the operator was told from the database and
/// publishes or removes it at the lab TLD servers, prompt or forgetful.
#[allow(clippy::too_many_arguments)]
async fn registrar_step(
    out: &mut dyn Write,
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
