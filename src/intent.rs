//! The operator's intent, recorded: what `enable`/`disable` and the web console's switch
//! both do, written once. Nothing else: the running daemon acts on the intent.

use crate::lifecycle::{Intent, State, Timestamp};
use crate::provider::fleet::{ProviderConfig, Providers};
use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum IntentError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("--ds-never-submitted only applies to a zone in awaiting_ds; {zone} is in {state}")]
    NotAwaitingDs { zone: String, state: String },
    #[error("the provider has no zone {zone}: create it there first (nothing was recorded)")]
    NotAtProvider { zone: String },
    #[error(
        "{zone} is at more than one provider ({providers}): delete it from all but one first; a move between two managed providers is not supported (nothing was recorded)"
    )]
    AtSeveralProviders { zone: String, providers: String },
}

/// Who asked: the command line (the audit trail says "operator"), or a named user of
/// the web console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator<'a> {
    CommandLine,
    Web(&'a str),
}

impl Operator<'_> {
    fn who(self) -> String {
        match self {
            Self::CommandLine => "operator".to_string(),
            Self::Web(user) => format!("operator {user} (web console)"),
        }
    }
}

/// What was recorded, for the operator's line or page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// The zone's state when the intent was recorded (`None`: not observed yet).
    pub state: Option<State>,
    /// A provider that could not be asked now (the daemon retries), if any.
    pub note: Option<String>,
}

/// Asks every configured provider whether it has the zone: `Err` for a definite "no such
/// zone" anywhere, or for a zone at more than one provider; a provider that cannot be
/// asked now is the daemon's to retry, said in the returned note.
async fn provider_knows(
    providers: &[ProviderConfig],
    zone: &str,
) -> Result<Option<String>, IntentError> {
    if providers.is_empty() {
        return Ok(None);
    }
    let providers = match Providers::build(providers) {
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

/// Records the intent for `zone` (a normalised name) with its audit event. An enable is
/// refused when no provider has the zone, or several do; `ds_never_submitted` only from
/// `awaiting_ds`.
pub async fn record(
    store: &Store,
    providers: &[ProviderConfig],
    zone: &str,
    intent: Intent,
    ds_never_submitted: bool,
    by: Operator<'_>,
    now: Timestamp,
) -> Result<Recorded, IntentError> {
    let note = if intent == Intent::Enabled {
        provider_knows(providers, zone).await?
    } else {
        None
    };
    let said = |e| IntentError::Store(store.explain(e));
    let state = store
        .zone(zone)
        .await
        .map_err(said)?
        .and_then(|row| row.zone.state);
    if ds_never_submitted && state != Some(State::AwaitingDs) {
        return Err(IntentError::NotAwaitingDs {
            zone: zone.to_string(),
            state: state.map_or("no state yet".to_string(), |s| s.to_string()),
        });
    }
    let who = by.who();
    let reason = match (intent, ds_never_submitted) {
        (Intent::Enabled, _) => format!("{who} asked to enable DNSSEC"),
        (Intent::Disabled, true) => {
            format!("{who} asked to disable DNSSEC, stating the DS was never submitted")
        }
        (Intent::Disabled, false) => format!("{who} asked to disable DNSSEC"),
        (Intent::None, _) => format!("{who} cleared the intent (watch only)"),
    };
    store
        .set_intent(zone, intent, ds_never_submitted, &reason, now)
        .await
        .map_err(said)?;
    Ok(Recorded { state, note })
}
