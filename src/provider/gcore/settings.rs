//! What the Gcore client needs to be built: where the API is, how it authenticates, and
//! how patient it is. `config` builds these from the file's `[provider]` section.

use std::time::Duration;

use url::Url;

use crate::secret::{Secret, SecretError, SecretSource};

/// `[provider]`
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    pub base_url: Url,
    pub credentials: CredentialSource,
    /// Time limit of one HTTP attempt.
    pub request_timeout: Duration,
    /// Attempts per call, the first one included.
    pub max_attempts: u32,
    /// Total time one call may spend on retries.
    pub retry_budget: Duration,
}

/// Where the provider credentials live. Reading them is a separate step so that this
/// value can be logged and cloned freely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSource {
    ApiKey(SecretSource),
    Login {
        username: String,
        password: SecretSource,
    },
}

/// Credentials read from their source.
#[derive(Debug, Clone)]
pub enum Credentials {
    ApiKey(Secret),
    Login { username: String, password: Secret },
}

impl CredentialSource {
    /// Reads the secrets from their files, environment or systemd credentials.
    pub fn load(&self) -> Result<Credentials, SecretError> {
        Ok(match self {
            Self::ApiKey(source) => Credentials::ApiKey(source.load()?),
            Self::Login { username, password } => Credentials::Login {
                username: username.clone(),
                password: password.load()?,
            },
        })
    }
}

impl CredentialSource {
    /// Secret files any user of the machine can read, one message each (naming the file
    /// and its mode, never the secret). A warning, not an error: the file still works.
    pub fn exposure_warnings(&self) -> Vec<String> {
        let sources = match self {
            Self::ApiKey(source) => vec![source],
            Self::Login { password, .. } => vec![password],
        };
        sources
            .into_iter()
            .filter_map(SecretSource::exposure_warning)
            .collect()
    }
}
