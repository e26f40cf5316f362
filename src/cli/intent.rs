//! `enable ZONE` and `disable ZONE`: the operator's intent, written to the database (with an
//! audit event) for the running daemon to pick up. Safe while the daemon runs.

use crate::config::Settings;
use crate::lifecycle::{Clock, Intent, State, SystemClock};
use crate::store::{Store, StoreError};
use crate::zone_name::ZoneName;

#[derive(Debug, thiserror::Error)]
pub enum IntentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot create the database directory {path}: {error}")]
    Directory { path: String, error: std::io::Error },
    #[error("--ds-never-submitted only applies to a zone in awaiting_ds; {zone} is in {state}")]
    NotAwaitingDs { zone: String, state: String },
}

/// Opens the database named by the settings, creating its directory if needed.
pub async fn open_store(settings: &Settings) -> Result<Store, IntentError> {
    if let Some(dir) = settings.database.path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(|error| IntentError::Directory {
            path: dir.display().to_string(),
            error,
        })?;
    }
    Ok(Store::open(&settings.database.path).await?)
}

/// Records the intent; returns a line for the operator.
pub async fn set(
    settings: &Settings,
    zone: &ZoneName,
    intent: Intent,
    ds_never_submitted: bool,
) -> Result<String, IntentError> {
    let zone = zone.as_str().to_string();
    let store = open_store(settings).await?;
    let state = store.zone(&zone).await?.and_then(|row| row.zone.state);
    if ds_never_submitted && state != Some(State::AwaitingDs) {
        return Err(IntentError::NotAwaitingDs {
            zone,
            state: state.map_or("no state yet".to_string(), |s| s.to_string()),
        });
    }
    let reason = match (intent, ds_never_submitted) {
        (Intent::Enabled, _) => "operator asked to enable DNSSEC".to_string(),
        (Intent::Disabled, true) => {
            "operator asked to disable DNSSEC, stating the DS was never submitted".to_string()
        }
        (Intent::Disabled, false) => "operator asked to disable DNSSEC".to_string(),
        (Intent::None, _) => "operator cleared the intent (watch only)".to_string(),
    };
    store
        .set_intent(
            &zone,
            intent,
            ds_never_submitted,
            &reason,
            SystemClock.now(),
        )
        .await?;
    store.close().await;
    Ok(format!(
        "{zone}: intent {intent} recorded (state: {}); the running daemon acts on it within seconds",
        state.map_or("not yet observed".to_string(), |s| s.to_string())
    ))
}
