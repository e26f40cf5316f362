//! `dnssec-warden run`: the daemon. SIGTERM and SIGINT finish the step in flight and exit;
//! SIGHUP re-reads the configuration (a bad file is reported and the running one kept);
//! a lock file beside the database keeps a second daemon away from the same state.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::cli::intent::{IntentError, open_store};
use crate::config::{ConfigError, SecretError, Settings, ZoneSelection};
use crate::dns::DnsObserver;
use crate::engine::{Engine, EngineError, Heartbeat, Notifier};
use crate::lifecycle::{Clock, Policy, SystemClock};
use crate::provider::{GcoreClient, Provider, ProviderError};
use crate::store::Store;
use crate::systemd;

/// How often the database is looked at for operator intents, at the least.
const INTENT_POLL: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("provider credentials: {0}")]
    Secret(#[from] SecretError),
    #[error("`run` needs a [provider] section in {0}")]
    NoProvider(PathBuf),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error("DNS observer: {0}")]
    Observer(String),
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
    #[error("alert sinks: {0}")]
    Alerts(#[from] crate::alert::WebhookError),
    #[error(transparent)]
    Metrics(#[from] crate::metrics::MetricsError),
}

enum Next {
    Stop,
    Reload,
}

/// Holds the daemon's exclusive lock on the database for as long as it lives.
pub struct DaemonLock {
    _file: File,
}

/// Takes `<database>.lock`, or says who has it.
pub fn lock(database: &Path) -> Result<DaemonLock, DaemonError> {
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
        Ok(()) => Ok(DaemonLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(DaemonError::AlreadyRunning(database.display().to_string()))
        }
        Err(std::fs::TryLockError::Error(error)) => Err(DaemonError::Lock { path: shown, error }),
    }
}

pub async fn run(config: &Path) -> Result<(), DaemonError> {
    let mut settings = Settings::load(config)?;
    let _lock = lock(&settings.database.path)?;
    let store = open_store(&settings).await?;
    let mut term = signal(SignalKind::terminate()).map_err(DaemonError::Signal)?;
    let mut int = signal(SignalKind::interrupt()).map_err(DaemonError::Signal)?;
    let mut hup = signal(SignalKind::hangup()).map_err(DaemonError::Signal)?;
    tracing::info!(config = %config.display(), database = %settings.database.path.display(), "dnssec-warden starting");
    // Outside the reload loop: a new [metrics] address takes a restart.
    let _metrics = match &settings.metrics {
        Some(m) => {
            Some(crate::metrics::serve(m.listen, store.clone(), Arc::new(SystemClock)).await?)
        }
        None => None,
    };
    let mut ready = false;
    loop {
        let provider_settings = settings
            .provider
            .as_ref()
            .ok_or_else(|| DaemonError::NoProvider(config.to_path_buf()))?;
        let provider = Arc::new(GcoreClient::new(
            provider_settings,
            provider_settings.credentials.load()?,
        )?);
        let observer = Arc::new(
            DnsObserver::new(&settings.dns).map_err(|e| DaemonError::Observer(e.to_string()))?,
        );
        let policy = Policy::from(&settings.timing);
        let engine = Engine::new(
            store.clone(),
            provider.clone(),
            observer,
            Arc::new(SystemClock),
            policy.clone(),
            Notifier::from_settings(&settings)?,
        );
        let supervisor = tokio::spawn(supervise(engine.heartbeat(), store.clone()));
        if !ready {
            systemd::ready();
            ready = true;
        }
        let zones = tokio::spawn(keep_zones(
            settings.zones.clone(),
            store.clone(),
            provider,
            policy.poll_active,
        ));
        let (stop, stopped) = watch::channel(false);
        let running = engine.run(stopped, INTENT_POLL);
        tokio::pin!(running);
        let next = tokio::select! {
            result = &mut running => {
                zones.abort();
                supervisor.abort();
                return result.map_err(DaemonError::from);
            }
            _ = term.recv() => Next::Stop,
            _ = int.recv() => Next::Stop,
            _ = hup.recv() => Next::Reload,
        };
        // Let the step in flight finish; no new one starts.
        if matches!(next, Next::Stop) {
            systemd::stopping();
        }
        let _ = stop.send(true);
        let finished = running.await;
        zones.abort();
        supervisor.abort();
        finished?;
        match next {
            Next::Stop => {
                tracing::info!("stopping: the step in flight is finished");
                store.close().await;
                return Ok(());
            }
            Next::Reload => match Settings::load(config) {
                Ok(new) => {
                    if new.database.path != settings.database.path {
                        tracing::warn!(
                            "database.path changed; that takes a restart, keeping {}",
                            settings.database.path.display()
                        );
                    }
                    let database = settings.database.clone();
                    settings = new;
                    settings.database = database;
                    tracing::info!("configuration reloaded");
                }
                Err(e) => {
                    tracing::error!(error = %e, "configuration reload failed; keeping the running configuration");
                }
            },
        }
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
/// account, refreshed at the slow poll interval. Zones no longer listed stay watched.
async fn keep_zones<P: Provider>(
    selection: ZoneSelection,
    store: Store,
    provider: Arc<P>,
    every: Duration,
) {
    loop {
        let now = SystemClock.now();
        match &selection {
            ZoneSelection::Names(names) => {
                for name in names {
                    if let Err(e) = store.ensure_zone(name, now).await {
                        tracing::error!(zone = name.as_str(), error = %e, "cannot add zone");
                    }
                }
                return;
            }
            ZoneSelection::All => match provider.list_zones().await {
                Ok(zones) => {
                    for zone in zones {
                        let Ok(name) = crate::dnssec::fqdn(&zone.name) else {
                            tracing::warn!(
                                zone = zone.name.as_str(),
                                "skipping a zone with an invalid name"
                            );
                            continue;
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
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list the account's zones; trying again later")
                }
            },
        }
        tokio::time::sleep(every).await;
    }
}
