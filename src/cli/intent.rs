//! `enable ZONE` and `disable ZONE`: the operator's intent, written to the database (with an
//! audit event) for the running daemon to pick up. Safe while the daemon runs.

use std::path::Path;

use crate::config::Settings;
use crate::lifecycle::{Clock, Intent, State, SystemClock};
use crate::provider::fleet::Providers;
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
    #[error("the provider has no zone {zone}: create it there first (nothing was recorded)")]
    NotAtProvider { zone: String },
    #[error(
        "{zone} is at more than one provider ({providers}): delete it from all but one first; a move between two managed providers is not supported (nothing was recorded)"
    )]
    AtSeveralProviders { zone: String, providers: String },
}

/// Asks every configured provider whether it has the zone: `Err` for a definite "no such
/// zone" anywhere, or for a zone at more than one provider; a provider that cannot be
/// asked now is the daemon's to retry, said in the returned note.
async fn provider_knows(settings: &Settings, zone: &str) -> Result<Option<String>, IntentError> {
    if settings.providers.is_empty() {
        return Ok(None);
    }
    let providers = match Providers::build(&settings.providers) {
        Ok(providers) => providers,
        Err(e) => return Ok(Some(format!("the provider was not asked: {e}"))),
    };
    let asked = providers.ask_every_account(zone).await;
    let names = |found: &[usize]| {
        found
            .iter()
            .map(|&i| providers.name(i))
            .collect::<Vec<_>>()
            .join(" and ")
    };
    match (asked.found.as_slice(), asked.unknown.is_empty()) {
        ([_, _, ..], _) => Err(IntentError::AtSeveralProviders {
            zone: zone.to_string(),
            providers: names(&asked.found),
        }),
        ([], true) => Err(IntentError::NotAtProvider {
            zone: zone.to_string(),
        }),
        (_, false) => Ok(Some(format!(
            "the provider could not be asked now: {}",
            asked.unknown.join("; ")
        ))),
        ([_], true) => Ok(None),
    }
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
    let zone = zone.as_str().to_string();
    let asked = if intent == Intent::Enabled {
        provider_knows(settings, &zone).await?
    } else {
        None
    };
    let store = open_store(settings).await?;
    let said = |e| IntentError::Store(store.explain(e));
    let state = store
        .zone(&zone)
        .await
        .map_err(said)?
        .and_then(|row| row.zone.state);
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
        .await
        .map_err(said)?;
    store.close().await;
    Ok(format!(
        "{zone}: intent {intent} recorded (state: {}); the running daemon acts on it within seconds{}",
        state.map_or("not yet observed".to_string(), |s| s.to_string()),
        asked.map(|note| format!(" ({note})")).unwrap_or_default()
    ))
}
