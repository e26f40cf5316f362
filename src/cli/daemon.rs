//! `dnssec-warden run`: the daemon. SIGTERM and SIGINT finish the step in flight and exit;
//! SIGHUP re-reads the configuration and runs every start-up check on it before anything
//! changes (a file that could not run is reported and the running one kept);
//! a lock file beside the database keeps a second daemon away from the same state.
//!
//! [`Prepared`] is everything `run` needs from a configuration file, built and checked in
//! one place: at start, on every reload, and by `check-config`, so that a file
//! `check-config` accepts is a file `run` starts with.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::cli::intent::{IntentError, open_store};
use crate::condition::{Condition, Seen};
use crate::config::{ConfigError, Settings, ZoneSelection};
use crate::dns::{DnsObserver, ObserverSetupError};
use crate::engine::{Engine, EngineError, Heartbeat, Notifier, ZoneListing};
use crate::lifecycle::{Clock, Policy, SystemClock};
use crate::provider::Provider;
use crate::provider::fleet::{ProviderConfig, ProviderSetupError, Providers};
use crate::store::DatabaseSettings;
use crate::store::Store;
use crate::systemd;
use crate::zone_name::ZoneName;

/// How often the database is looked at for operator intents, at the least.
const INTENT_POLL: Duration = Duration::from_secs(1);

/// Why a configuration file cannot run. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("config {file}: `run` needs a [provider] section (or [providers.NAME] sections)")]
    NoProvider { file: PathBuf },
    #[error("config {file}: {error}")]
    Provider {
        file: PathBuf,
        error: ProviderSetupError,
    },
    #[error("config {file}: DNS observer: {error}")]
    Observer {
        file: PathBuf,
        error: ObserverSetupError,
    },
    #[error("config {file}: alert sinks: {error}")]
    Alerts {
        file: PathBuf,
        error: crate::alert::WebhookError,
    },
    #[error("config {file}: {error}")]
    Web {
        file: PathBuf,
        error: crate::web::server::WebError,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The configuration cannot run; nothing was started.
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    #[error(transparent)]
    Store(#[from] IntentError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("cannot use the lock file {path}: {error}")]
    Lock { path: String, error: std::io::Error },
    #[error("another dnssec-warden is already running on {0}")]
    AlreadyRunning(String),
    #[error("cannot install a signal handler: {0}")]
    Signal(std::io::Error),
    #[error(transparent)]
    Metrics(#[from] crate::metrics::MetricsError),
    #[error(transparent)]
    Web(#[from] crate::web::server::WebError),
}

impl DaemonError {
    /// The configuration is at fault (exit status 2), not the world (1).
    pub fn is_config(&self) -> bool {
        matches!(self, Self::Prepare(_))
    }
}

/// Everything `run` builds from a configuration: the settings, the provider client with
/// its credentials read, the DNS observer with its trust anchors parsed, the alert sinks,
/// the policy. Built before anything changes, so a file that fails never replaces one
/// that works.
pub struct Prepared {
    pub settings: Settings,
    pub provider: Arc<Providers>,
    pub observer: Arc<DnsObserver>,
    pub notifier: Notifier,
    pub policy: Policy,
    /// Worth telling the operator, not worth refusing the file for (a world-readable
    /// secret file).
    pub warnings: Vec<String>,
    /// With IPv6 in `dns.address_families`: whether this host has an IPv6 route
    /// (`dns::net::ipv6::route`); `None` when IPv6 is not used.
    pub ipv6_route: Option<Result<(), String>>,
}

impl Prepared {
    /// Reads the file at `path` and runs every start-up check on it.
    pub fn load(path: &Path) -> Result<Self, PrepareError> {
        Self::from_settings(Settings::load(path)?)
    }

    /// Every start-up check `run` makes, in the order it needs them.
    pub fn from_settings(settings: Settings) -> Result<Self, PrepareError> {
        let file = settings.source.clone();
        if settings.providers.is_empty() {
            return Err(PrepareError::NoProvider { file });
        }
        let mut warnings: Vec<String> = settings
            .providers
            .iter()
            .flat_map(ProviderConfig::exposure_warnings)
            .collect();
        // The users file's hashes are slow to crack by design, not impossible.
        if let Some(path) = settings.web.as_ref().and_then(|w| w.users.as_ref())
            && let Some(mode) = crate::secret::world_readable_mode(path)
        {
            warnings.push(format!(
                "web users file {} is readable by every user (mode {mode:04o}); restrict it: chmod o-r (0640 with the daemon's group)",
                path.display()
            ));
        }
        let provider =
            Providers::build(&settings.providers).map_err(|error| PrepareError::Provider {
                file: file.clone(),
                error,
            })?;
        let observer = DnsObserver::new(&settings.dns).map_err(|error| PrepareError::Observer {
            file: file.clone(),
            error,
        })?;
        let notifier =
            Notifier::new(&settings.alerts, settings.registrar.as_ref()).map_err(|error| {
                PrepareError::Alerts {
                    file: file.clone(),
                    error,
                }
            })?;
        // The console's users file and certificate load, or nothing starts.
        if let Some(web) = &settings.web {
            crate::web::server::check(web).map_err(|error| PrepareError::Web { file, error })?;
        }
        let ipv6_route = settings
            .dns
            .address_families
            .ipv6
            .then(crate::dns::net::ipv6::route);
        Ok(Self {
            policy: settings.timing.clone(),
            provider: Arc::new(provider),
            observer: Arc::new(observer),
            notifier,
            warnings,
            ipv6_route,
            settings,
        })
    }

    /// An engine on these parts.
    pub fn engine(&self, store: Store) -> Engine<Providers, DnsObserver> {
        Engine::new(
            store,
            self.provider.clone(),
            self.observer.clone(),
            Arc::new(SystemClock),
            self.policy.clone(),
            self.notifier.clone(),
        )
    }

    /// Logs the warnings, and says (once, WARN) a host without the IPv6 route the
    /// configuration needs.
    fn log_warnings(&self) {
        for warning in &self.warnings {
            tracing::warn!(config = %self.settings.source.display(), "{warning}");
        }
        if let Some(route) = &self.ipv6_route {
            self.observer.ipv6().probed(route.clone());
        }
    }
}

/// What ended one configuration's run.
enum Next {
    Stop,
    Reload(Box<Prepared>),
    /// The engine's loop returned by itself.
    Ended,
}

/// A SQLite file has one daemon: an exclusive lock on the database file itself, held for
/// the daemon's life (`store::lock_database`), and one beside it for the moments before
/// the file exists. A PostgreSQL database is shared by any number of daemons, by per-zone
/// leases.
pub enum DaemonLock {
    File {
        beside: File,
        database: Option<File>,
    },
    Shared,
}

/// Takes the daemon's lock on a SQLite database, or says who has it.
pub async fn lock(database: &DatabaseSettings) -> Result<DaemonLock, DaemonError> {
    match database {
        DatabaseSettings::Sqlite { path } => {
            let mut lock = DaemonLock::File {
                beside: lock_file(path)?,
                database: None,
            };
            if path.exists() {
                lock.hold_database(path)?;
            }
            Ok(lock)
        }
        DatabaseSettings::Postgres(_) => Ok(DaemonLock::Shared),
    }
}

impl DaemonLock {
    /// Locks the database file itself, once it exists: the lock file beside it can be
    /// removed, and a second daemon would then take a new one.
    pub fn hold_database(&mut self, path: &Path) -> Result<(), DaemonError> {
        let DaemonLock::File { database, .. } = self else {
            return Ok(());
        };
        if database.is_some() {
            return Ok(());
        }
        match crate::store::lock_database(path) {
            Ok(Some(file)) => {
                *database = Some(file);
                Ok(())
            }
            Ok(None) => Err(DaemonError::AlreadyRunning(path.display().to_string())),
            Err(error) => Err(DaemonError::Lock {
                path: path.display().to_string(),
                error,
            }),
        }
    }
}

/// Keeps this daemon's leases (several daemons on PostgreSQL): a round every lease/3,
/// said in the log when it takes, loses or hands back zones.
async fn keep_leases(store: Store, lease: Duration) {
    let every = lease / 3;
    let mut failing = false;
    loop {
        match store.lease_round(SystemClock.now()).await {
            Ok(round) => {
                if failing {
                    tracing::info!("lease keeping works again");
                    failing = false;
                }
                for (zone, epoch, from) in &round.acquired {
                    match from {
                        Some(from) => tracing::warn!(
                            zone = zone.as_str(),
                            epoch,
                            from = from.as_str(),
                            "took over the zone: its holder's lease ran out (stopped, paused or cut off); looking at it again before acting"
                        ),
                        None => tracing::debug!(zone = zone.as_str(), epoch, "took the zone"),
                    }
                }
                if !round.acquired.is_empty() || round.released > 0 {
                    tracing::info!(
                        held = round.held,
                        share = round.target,
                        daemons = round.live,
                        taken = round.acquired.len(),
                        handed_back = round.released,
                        "zone leases"
                    );
                }
                if !round.lost.is_empty() {
                    tracing::warn!(
                        zones = round.lost.len(),
                        first = round.lost[0].as_str(),
                        "leases ran out before they were renewed (was this daemon paused or cut off from the database?); those zones are no longer stepped here"
                    );
                }
            }
            Err(e) => {
                if !failing {
                    tracing::error!(error = %e, "cannot keep the zone leases; the zones go to other daemons when the leases run out");
                    failing = true;
                }
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// Takes `<database>.lock`, or says who has it.
fn lock_file(database: &Path) -> Result<File, DaemonError> {
    let path = database.with_extension("lock");
    let shown = path.display().to_string();
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(|error| DaemonError::Lock {
            path: shown.clone(),
            error,
        })?;
    }
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|error| DaemonError::Lock {
            path: shown.clone(),
            error,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(DaemonError::AlreadyRunning(database.display().to_string()))
        }
        Err(std::fs::TryLockError::Error(error)) => Err(DaemonError::Lock { path: shown, error }),
    }
}

/// The file at `config` again, for a reload: every start-up check, nothing swapped yet.
/// What takes a restart (`[database]`, `[metrics]`) keeps its running value, with a
/// warning.
fn reload(config: &Path, running: &Settings) -> Result<Prepared, PrepareError> {
    let mut settings = Settings::load(config)?;
    if settings.database != running.database {
        tracing::warn!(
            "[database] changed; that takes a restart, keeping {}",
            running.database.describe()
        );
        settings.database = running.database.clone();
    }
    if settings.metrics != running.metrics {
        tracing::warn!("[metrics] changed; that takes a restart, keeping the running endpoint");
        settings.metrics = running.metrics.clone();
    }
    // The console's address takes a restart; its files and the rest are reloaded.
    match (&mut settings.web, &running.web) {
        (Some(new), Some(old)) if new.listen != old.listen => {
            tracing::warn!("web.listen changed; that takes a restart, keeping the running address");
            new.listen = old.listen;
        }
        (new, old) if new.is_some() != old.is_some() => {
            tracing::warn!("[web] turned on or off; that takes a restart");
            settings.web = running.web.clone();
        }
        _ => {}
    }
    Prepared::from_settings(settings)
}

pub async fn run(config: &Path) -> Result<(), DaemonError> {
    let mut prepared = Prepared::load(config)?;
    let (_lock, store, leases) = open_database(&prepared).await?;
    let mut signals = Signals::install()?;
    tracing::info!(config = %config.display(), database = %prepared.settings.database.describe(), "dnssec-warden starting");
    prepared.log_warnings();
    // Outside the reload loop: a new [metrics] address takes a restart.
    let _metrics = match &prepared.settings.metrics {
        Some(m) => {
            Some(crate::metrics::serve(m.listen, store.clone(), Arc::new(SystemClock)).await?)
        }
        None => None,
    };
    // Outside the reload loop too: a reload re-reads its users file and certificate.
    let web = match &prepared.settings.web {
        Some(w) => Some(
            crate::web::server::serve(
                w,
                store.clone(),
                Arc::new(SystemClock),
                &prepared.policy,
                &prepared.settings.providers,
            )
            .await?,
        ),
        None => None,
    };
    let mut ready = false;
    loop {
        match run_configuration(config, &prepared, &store, &mut signals, &mut ready).await? {
            Next::Ended => return Ok(()),
            Next::Stop => {
                tracing::info!("stopping: the step in flight is finished");
                if let Some(keeper) = leases {
                    keeper.abort();
                    match store.leave_cluster().await {
                        Ok(n) => tracing::info!(zones = n, "handed the zone leases back"),
                        Err(e) => {
                            tracing::warn!(error = %e, "could not hand the leases back; they run out by themselves")
                        }
                    }
                }
                store.close().await;
                return Ok(());
            }
            Next::Reload(new) => {
                prepared = *new;
                if let (Some(server), Some(settings)) = (&web, &prepared.settings.web)
                    && let Err(error) =
                        server.reload(settings, &prepared.policy, &prepared.settings.providers)
                {
                    tracing::error!(%error, "web console: reload failed; keeping its running users and certificate");
                }
                tracing::info!("configuration reloaded");
                prepared.log_warnings();
            }
        }
    }
}

/// The daemon's lock, its store checked at start, and (several daemons on PostgreSQL)
/// the task keeping its zone leases, the first round taken before the first tick.
async fn open_database(
    prepared: &Prepared,
) -> Result<(DaemonLock, Store, Option<tokio::task::JoinHandle<()>>), DaemonError> {
    let mut lock = lock(&prepared.settings.database).await?;
    let mut store = open_store(&prepared.settings).await?;
    if let Some(path) = prepared.settings.database.sqlite_path() {
        lock.hold_database(path)?;
    }
    store
        .check_at_start()
        .await
        .map_err(|e| DaemonError::Store(IntentError::Store(e)))?;
    let leases = match &prepared.settings.cluster {
        Some(cluster) => {
            let holder = store
                .join_cluster(cluster)
                .map_err(|e| DaemonError::Store(IntentError::Store(e)))?;
            tracing::info!(
                holder = holder.as_str(),
                lease_s = cluster.lease.as_secs_f64(),
                "sharing the database with any other daemons: zones by lease"
            );
            // The first round before the first tick, so that the zones are held at once.
            let round = store.lease_round(SystemClock.now()).await;
            if let Err(e) = round {
                tracing::error!(error = %e, "cannot take zone leases yet");
            }
            Some(tokio::spawn(keep_leases(store.clone(), cluster.lease)))
        }
        None => None,
    };
    Ok((lock, store, leases))
}

/// The signals the daemon answers: SIGTERM and SIGINT stop it, SIGHUP reloads its file.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Self, DaemonError> {
        Ok(Self {
            term: signal(SignalKind::terminate()).map_err(DaemonError::Signal)?,
            int: signal(SignalKind::interrupt()).map_err(DaemonError::Signal)?,
            hup: signal(SignalKind::hangup()).map_err(DaemonError::Signal)?,
        })
    }
}

/// One configuration's run: the engine and what runs beside it (the sinks' workers, the
/// watchdog's supervisor, the daemon-wide conditions, the zone keeper), until a stop, a
/// reload, or the engine's own end. `ready` is told to systemd once, at the first
/// configuration.
async fn run_configuration(
    config: &Path,
    prepared: &Prepared,
    store: &Store,
    signals: &mut Signals,
    ready: &mut bool,
) -> Result<Next, DaemonError> {
    // One zone listing for the engine and the zone keeper (per configuration: a
    // reload may name another provider).
    let listing = Arc::new(match prepared.settings.zones {
        ZoneSelection::All => ZoneListing::watched(),
        ZoneSelection::Names(_) => ZoneListing::default(),
    });
    let engine = prepared.engine(store.clone()).with_listing(listing.clone());
    // Each sink's worker, for this configuration: a reload or a stop ends them.
    let sink_workers = prepared.notifier.start(store);
    let supervisor = tokio::spawn(supervise(engine.heartbeat(), store.clone()));
    if !*ready {
        systemd::ready();
        *ready = true;
    }
    let alerts = keep_daemon_alerts(
        store.clone(),
        prepared.notifier.clone(),
        daemon_conditions(prepared, &listing, store),
    );
    let anchors = keep_trust_anchors_checked(prepared.observer.clone());
    let conditions = tokio::spawn(async move {
        tokio::join!(alerts, anchors);
    });
    let zones = tokio::spawn(keep_zones(
        prepared.settings.zones.clone(),
        store.clone(),
        prepared.provider.clone(),
        listing,
        prepared.policy.clone(),
    ));
    let (stop, stopped) = watch::channel(false);
    let running = engine.run(stopped, INTENT_POLL);
    tokio::pin!(running);
    // Until a stop, or a reload whose file passed every start-up check: a file that
    // fails leaves the engine running undisturbed on what it had.
    let next = loop {
        tokio::select! {
            result = &mut running => {
                zones.abort();
                conditions.abort();
                supervisor.abort();
                result?;
                return Ok(Next::Ended);
            }
            _ = signals.term.recv() => break Next::Stop,
            _ = signals.int.recv() => break Next::Stop,
            Some(()) = signals.hup.recv() => match reload(config, &prepared.settings) {
                Ok(new) => break Next::Reload(Box::new(new)),
                Err(e) => tracing::error!(
                    error = %e,
                    "configuration reload failed; keeping the running configuration"
                ),
            },
        }
    };
    // Let the step in flight finish; no new one starts.
    if matches!(next, Next::Stop) {
        systemd::stopping();
    }
    let _ = stop.send(true);
    let finished = running.await;
    zones.abort();
    conditions.abort();
    supervisor.abort();
    // What a sink was sending stays owed in its queue.
    drop(sink_workers);
    finished?;
    Ok(next)
}

/// A daemon-wide condition as `keep_daemon_alerts` writes it.
struct DaemonCondition {
    condition: Arc<Condition>,
    /// `""` for the provider account, this node for a condition of the host.
    scope: String,
    /// How long it holds before it alerts.
    after: Duration,
}

/// Every daemon-wide condition of this configuration.
fn daemon_conditions(
    prepared: &Prepared,
    listing: &ZoneListing,
    store: &Store,
) -> Vec<DaemonCondition> {
    // Refused credentials or a wrong account alert at once: nothing the daemon does for
    // any zone works. One account keeps the scope it always had; several are told apart
    // by name.
    let auth = prepared.provider.account_conditions();
    let several = prepared.provider.names().count() > 1;
    let mut all: Vec<DaemonCondition> = auth
        .into_iter()
        .map(|(name, condition)| DaemonCondition {
            condition,
            scope: if several {
                format!("provider:{name}")
            } else {
                String::new()
            },
            after: Duration::ZERO,
        })
        .collect();
    if matches!(prepared.settings.zones, ZoneSelection::All) {
        all.push(DaemonCondition {
            condition: listing.condition(),
            scope: String::new(),
            after: prepared.policy.observation_failing_after,
        });
    }
    // The anchors: the same file on every daemon, so one episode for them all.
    all.push(DaemonCondition {
        condition: prepared.observer.trust_anchor_condition(),
        scope: String::new(),
        after: Duration::ZERO,
    });
    let node = store
        .holder()
        .and_then(|h| h.rsplit_once('/'))
        .map_or("", |(node, _)| node);
    // Each sink's own (its worker judges how long it has failed), per host: another
    // host's daemon may reach it.
    for (sink, condition) in prepared.notifier.sink_conditions() {
        all.push(DaemonCondition {
            condition,
            scope: if node.is_empty() {
                sink
            } else {
                format!("{node} {sink}")
            },
            after: Duration::ZERO,
        });
    }
    // This host's own: with several daemons, one episode per host (its node).
    if prepared.settings.dns.address_families.ipv6 {
        all.push(DaemonCondition {
            condition: prepared.observer.ipv6().condition(),
            scope: node.to_string(),
            after: Duration::ZERO,
        });
    }
    all
}

/// Checks the trust anchors against the keys their zones serve at start and every ten
/// minutes (`trust_anchor_mismatch`): a stale anchor is said once, as the configuration's
/// fault, instead of as every zone's validation failing.
async fn keep_trust_anchors_checked(observer: Arc<DnsObserver>) {
    const EVERY: Duration = Duration::from_secs(600);
    loop {
        observer.check_trust_anchors().await;
        tokio::time::sleep(EVERY).await;
    }
}

/// Writes the daemon-wide conditions to the store when they change (`daemon_alerts`,
/// read by `status` and the metrics) and sends their owed notifications. Every minute a
/// condition that holds is written again: with several daemons, another may have ended
/// the episode this one still sees. An end is written only when this daemon sees it end
/// (or first judges it clear), so that daemons seeing it differently do not take turns.
async fn keep_daemon_alerts(store: Store, notifier: Notifier, conditions: Vec<DaemonCondition>) {
    const EVERY: Duration = Duration::from_secs(1);
    const AGAIN: u32 = 60;
    let clock = SystemClock;
    let mut written: Vec<Option<Seen>> = vec![None; conditions.len()];
    for round in 0u32.. {
        if round % AGAIN == 0 {
            for w in written.iter_mut() {
                if matches!(w, Some(Seen::Holds(_))) {
                    *w = None;
                }
            }
        }
        for (c, written) in conditions.iter().zip(written.iter_mut()) {
            let seen = c.condition.seen();
            if written.as_ref() == Some(&seen) {
                continue;
            }
            let kind = c.condition.kind();
            let result = match &seen {
                Seen::Unjudged => Ok(()),
                Seen::Clear => {
                    store
                        .resolve_daemon_alert(kind, &c.scope, clock.now())
                        .await
                }
                Seen::Holds(episode) => {
                    store
                        .raise_daemon_alert(
                            kind,
                            &c.scope,
                            &episode.message,
                            episode.since,
                            episode.since.plus(c.after),
                        )
                        .await
                }
            };
            match result {
                Ok(()) => *written = Some(seen),
                Err(e) => {
                    tracing::debug!(condition = kind.as_str(), error = %e, "cannot record a daemon-wide condition yet")
                }
            }
        }
        if let Err(e) = notifier.deliver_daemon_alerts(&store, &clock).await {
            tracing::debug!(error = %e, "cannot deliver daemon-wide alerts yet");
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// Feeds the systemd watchdog while the engine loop makes progress, and keeps the STATUS
/// line current ("12 zones: 10 active, 1 awaiting_ds, 1 ttl_wait").
async fn supervise(heartbeat: Heartbeat, store: Store) {
    let interval = systemd::watchdog_interval();
    let every = interval.map_or(Duration::from_secs(10), |w| {
        (w / 2).min(Duration::from_secs(10))
    });
    loop {
        if let Some(failure) = store.write_failure() {
            systemd::status(&format!(
                "database cannot be written since {}: {}",
                failure.since, failure.cause
            ));
        } else if let Ok(counts) = store.state_counts().await {
            systemd::status(&systemd::status_line(&counts));
        }
        if let Some(limit) = interval
            && heartbeat.age().is_some_and(|age| age < limit)
        {
            systemd::watchdog();
        }
        tokio::time::sleep(every).await;
    }
}

/// Keeps the zone list in the database: the configured names once, or every zone of the
/// account, looked for at the slow poll interval in the listing the engine shares (paged
/// through again only when that copy is older than the engine's own refresh).
/// Zones no longer listed stay watched.
async fn keep_zones<P: Provider>(
    selection: ZoneSelection,
    store: Store,
    provider: Arc<P>,
    listing: Arc<ZoneListing>,
    policy: Policy,
) {
    loop {
        let now = SystemClock.now();
        match &selection {
            ZoneSelection::Names(names) => {
                for name in names {
                    if let Err(e) = store.ensure_zone(name.as_str(), now).await {
                        tracing::error!(zone = name.as_str(), error = %e, "cannot add zone");
                    }
                }
                return;
            }
            // A failure is said once per episode by the listing's condition
            // (`zone_listing_failing`).
            ZoneSelection::All => {
                if let Ok(listed) = listing
                    .get(
                        provider.as_ref(),
                        now,
                        policy.poll_active / 4,
                        policy.retry_base,
                    )
                    .await
                {
                    let unreadable = listed.unreadable.iter();
                    for name in listed.zones.keys().chain(unreadable) {
                        let name = match ZoneName::parse(name) {
                            Ok(name) => name.into_string(),
                            Err(e) => {
                                tracing::warn!(
                                    zone = name.as_str(),
                                    error = %e,
                                    "skipping a zone of the account whose name is not a zone name"
                                );
                                continue;
                            }
                        };
                        match store.ensure_zone(&name, now).await {
                            Ok(true) => tracing::info!(
                                zone = name.as_str(),
                                "watching a new zone of the account"
                            ),
                            Ok(false) => {}
                            Err(e) => {
                                tracing::error!(zone = name.as_str(), error = %e, "cannot add zone")
                            }
                        }
                    }
                }
            }
        }
        tokio::time::sleep(policy.poll_active).await;
    }
}
