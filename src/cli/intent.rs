//! `enable ZONE` and `disable ZONE`: the operator's intent, written to the database (with an
//! audit event) for the running daemon to pick up; `move ZONE --to ACCOUNT`: a signed move
//! declared the same way. Safe while the daemon runs.

use std::path::Path;

use crate::config::Settings;
use crate::intent::Operator;
use crate::lifecycle::{Clock, Intent, SystemClock};
use crate::store::{Store, StoreError};
use crate::zone_name::ZoneName;

#[derive(Debug, thiserror::Error)]
pub enum IntentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot create the database directory {path}: {error}")]
    Directory { path: String, error: std::io::Error },
    #[error(transparent)]
    Refused(#[from] crate::intent::IntentError),
}

/// Opens the database named by the settings, creating its directory if needed.
pub async fn open_store(settings: &Settings) -> Result<Store, IntentError> {
    if let Some(dir) = settings.database.sqlite_path().and_then(Path::parent)
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(|error| IntentError::Directory {
            path: dir.display().to_string(),
            error,
        })?;
    }
    Ok(Store::connect(&settings.database).await?)
}

/// Records the intent; returns a line for the operator.
pub async fn set(
    settings: &Settings,
    zone: &ZoneName,
    intent: Intent,
    ds_never_submitted: bool,
) -> Result<String, IntentError> {
    let zone = zone.as_str();
    let store = open_store(settings).await?;
    let recorded = crate::intent::record(
        &store,
        &settings.providers,
        zone,
        intent,
        ds_never_submitted,
        Operator::CommandLine,
        SystemClock.now(),
    )
    .await;
    store.close().await;
    let recorded = recorded?;
    if let Some(why) = recorded.unchanged {
        return Ok(format!("{zone}: intent {intent} already: {why}"));
    }
    Ok(format!(
        "{zone}: intent {intent} recorded (state: {}); the running daemon acts on it within seconds{}",
        recorded
            .state
            .map_or("not yet observed".to_string(), |s| s.to_string()),
        recorded
            .note
            .map(|note| format!(" ({note})"))
            .unwrap_or_default()
    ))
}

/// Declares a signed move of `zone` to the account `to`; returns a line for the operator.
pub async fn declare_move(
    settings: &Settings,
    zone: &ZoneName,
    to: &str,
) -> Result<String, IntentError> {
    let zone = zone.as_str();
    let store = open_store(settings).await?;
    let declared = crate::intent::declare_move(
        &store,
        &settings.providers,
        zone,
        to,
        Operator::CommandLine,
        SystemClock.now(),
    )
    .await;
    store.close().await;
    let declared = declared?;
    Ok(format!(
        "{zone}: signed move from {} to {} declared; the running daemon takes it from here: \
         `dnssec-warden status {zone}` shows its phase and what it waits for",
        declared.source, declared.target
    ))
}

/// Declares a key rollover of `zone` (or asks the one under way to be aborted); returns
/// a line for the operator.
pub async fn declare_roll(
    settings: &Settings,
    zone: &ZoneName,
    ask: crate::intent::RollAsk,
) -> Result<String, IntentError> {
    let zone = zone.as_str();
    let store = open_store(settings).await?;
    let line = crate::intent::declare_roll(
        &store,
        &settings.providers,
        zone,
        ask,
        Operator::CommandLine,
        SystemClock.now(),
    )
    .await;
    store.close().await;
    Ok(line?)
}
