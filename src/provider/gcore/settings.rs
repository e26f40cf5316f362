//! What the Gcore client needs to be built: where the API is, how it authenticates, and
//! how patient it is; its block as the file writes it (`[provider]`, or
//! `[providers.NAME]` with `kind = "gcore"` or none), and its line of the provider list's
//! needs ([`Kind`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::GcoreClient;
use crate::condition::Condition;
use crate::de::{FileDir, KeyError};
use crate::provider::registry::{self, Kind, SetupError};
use crate::secret::{Secret, SecretError, SecretSource};
use crate::time::format::positive_duration as duration;

/// Where the API is when the block does not say.
pub const DEFAULT_BASE_URL: &str = "https://api.gcore.com";

/// A Gcore block as written: exactly one credential source, an API key or a username
/// with a password (a check across keys, [`Kind::settings`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// Gcore's own API when absent.
    #[serde(default, deserialize_with = "crate::de::some_http_url")]
    base_url: Option<Url>,
    #[serde(default, deserialize_with = "crate::de::secret_file")]
    api_key_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "crate::de::env_name")]
    api_key_env: Option<String>,
    #[serde(default, deserialize_with = "crate::de::credential_name")]
    api_key_credential: Option<String>,
    #[serde(default, deserialize_with = "crate::de::username")]
    username: Option<String>,
    #[serde(default, deserialize_with = "crate::de::secret_file")]
    password_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "crate::de::env_name")]
    password_env: Option<String>,
    #[serde(default, deserialize_with = "crate::de::credential_name")]
    password_credential: Option<String>,
    #[serde(
        default = "registry::default_request_timeout",
        deserialize_with = "duration"
    )]
    request_timeout: Duration,
    #[serde(
        default = "registry::default_max_attempts",
        deserialize_with = "crate::de::in_range::<1, {u64::MAX}, _, _>"
    )]
    max_attempts: u32,
    #[serde(
        default = "registry::default_retry_budget",
        deserialize_with = "duration"
    )]
    retry_budget: Duration,
}

impl Kind for GcoreClient {
    const KIND: &'static str = "gcore";
    const FOREIGN_DNSKEYS_WHY: &'static str = "the Gcore API cannot at all";
    type Block = Block;
    type Settings = ProviderSettings;

    fn settings(block: Block, dir: FileDir<'_>) -> Result<ProviderSettings, KeyError> {
        let api_key = dir.one_secret(
            "api_key",
            block.api_key_file,
            block.api_key_env,
            block.api_key_credential,
        )?;
        let password = dir.one_secret(
            "password",
            block.password_file,
            block.password_env,
            block.password_credential,
        )?;
        let credentials = match (api_key, block.username, password) {
            (Some(key), None, None) => CredentialSource::ApiKey(key),
            (None, Some(username), Some(password)) => {
                CredentialSource::Login { username, password }
            }
            (None, Some(_), None) => {
                return Err(KeyError::new(
                    "username",
                    "needs password_file, password_env or password_credential",
                ));
            }
            (None, None, Some(_)) => {
                return Err(KeyError::new("username", "is missing (a password is set)"));
            }
            (Some(_), _, _) => {
                return Err(KeyError::new(
                    "api_key_file",
                    "give either an API key or username + password, not both",
                ));
            }
            (None, None, None) => {
                return Err(KeyError::new(
                    "api_key_file",
                    "no credentials: set api_key_file, api_key_env, api_key_credential, or username with a password source",
                ));
            }
        };
        Ok(ProviderSettings {
            base_url: block.base_url.unwrap_or_else(default_base_url),
            credentials,
            request_timeout: block.request_timeout,
            max_attempts: block.max_attempts,
            retry_budget: block.retry_budget,
        })
    }

    fn secret_sources(settings: &ProviderSettings) -> Vec<&SecretSource> {
        settings.credentials.sources()
    }

    fn build(settings: &ProviderSettings) -> Result<Self, SetupError> {
        let credentials = settings.credentials.load()?;
        Ok(GcoreClient::new(settings, credentials)?)
    }

    fn account_conditions(&self) -> Vec<Arc<Condition>> {
        vec![self.auth_condition()]
    }
}

fn default_base_url() -> Url {
    Url::parse(DEFAULT_BASE_URL).expect("a constant URL")
}

/// `[provider]` of kind `gcore`: what its client is built from.
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
    /// Where its secrets live.
    pub fn sources(&self) -> Vec<&SecretSource> {
        match self {
            Self::ApiKey(source) => vec![source],
            Self::Login { password, .. } => vec![password],
        }
    }

    /// Secret files any user of the machine can read, one message each (naming the file
    /// and its mode, never the secret). A warning, not an error: the file still works.
    pub fn exposure_warnings(&self) -> Vec<String> {
        self.sources()
            .into_iter()
            .filter_map(SecretSource::exposure_warning)
            .collect()
    }
}
