//! What the PowerDNS client needs to be built, its block as the file writes it
//! (`[providers.NAME]` with `kind = "powerdns"`), and its line of the provider list's
//! needs ([`Kind`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::de::Error;
use serde::{Deserialize, Deserializer};
use url::Url;

use super::PowerDnsClient;
use crate::condition::Condition;
use crate::de::{FileDir, KeyError};
use crate::provider::ProviderError;
use crate::provider::registry::{self, Kind, SetupError};
use crate::secret::SecretSource;
use crate::time::format::positive_duration as duration;

/// The server id when the block names none: a single server's.
pub const DEFAULT_SERVER_ID: &str = "localhost";

/// Where the API is and how patient the client is. The API key is read separately (a
/// secret source), as for every provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerDnsSettings {
    /// The webserver's base URL, `http://127.0.0.1:8081/`.
    pub base_url: Url,
    /// The server id in `/api/v1/servers/{server_id}`: `localhost` for a single server.
    pub server_id: String,
    /// Time limit of one HTTP attempt.
    pub request_timeout: Duration,
    /// Attempts per call, the first one included.
    pub max_attempts: u32,
    /// Total time one call may spend on retries.
    pub retry_budget: Duration,
}

impl PowerDnsSettings {
    /// The API at `base_url` with every other setting at the file's default.
    pub fn new(base_url: Url) -> Self {
        Self {
            base_url,
            server_id: DEFAULT_SERVER_ID.to_string(),
            request_timeout: registry::DEFAULT_REQUEST_TIMEOUT,
            max_attempts: registry::DEFAULT_MAX_ATTEMPTS,
            retry_budget: registry::DEFAULT_RETRY_BUDGET,
        }
    }
}

/// A PowerDNS account: its client's settings and where its API key lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerDnsAccount {
    pub settings: PowerDnsSettings,
    pub api_key: SecretSource,
}

/// A PowerDNS block as written: `base_url` and one source of the API key are needed (a
/// check across keys, [`Kind::settings`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// No default: PowerDNS's webserver is wherever it was configured.
    #[serde(default, deserialize_with = "crate::de::some_http_url")]
    base_url: Option<Url>,
    /// The `{server_id}` of `/api/v1/servers/{server_id}`.
    #[serde(default, deserialize_with = "server_id")]
    server_id: Option<String>,
    #[serde(default, deserialize_with = "crate::de::secret_file")]
    api_key_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "crate::de::env_name")]
    api_key_env: Option<String>,
    #[serde(default, deserialize_with = "crate::de::credential_name")]
    api_key_credential: Option<String>,
    /// Not a key PowerDNS takes: read to say so (it takes an API key).
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

/// `server_id`: one path segment.
fn server_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let text = String::deserialize(d)?;
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(D::Error::custom(
            "must be a server id such as \"localhost\" (letters, digits, '-', '_', '.')",
        ));
    }
    Ok(Some(text))
}

impl Kind for PowerDnsClient {
    const KIND: &'static str = "powerdns";
    const FOREIGN_DNSKEYS_WHY: &'static str =
        "the PowerDNS server needs direct-dnskey=yes in its pdns.conf";
    type Block = Block;
    type Settings = PowerDnsAccount;

    fn settings(block: Block, dir: FileDir<'_>) -> Result<PowerDnsAccount, KeyError> {
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
        if block.username.is_some() || password.is_some() {
            return Err(KeyError::new(
                "username",
                "PowerDNS takes an API key (api_key_file, api_key_env or api_key_credential), not a login",
            ));
        }
        let Some(api_key) = api_key else {
            return Err(KeyError::new(
                "api_key_file",
                "no credentials: set api_key_file, api_key_env or api_key_credential (the api-key of pdns.conf)",
            ));
        };
        let Some(base_url) = block.base_url else {
            return Err(KeyError::new(
                "base_url",
                "is missing: PowerDNS's webserver, e.g. \"http://127.0.0.1:8081/\"",
            ));
        };
        Ok(PowerDnsAccount {
            settings: PowerDnsSettings {
                base_url,
                server_id: block
                    .server_id
                    .unwrap_or_else(|| DEFAULT_SERVER_ID.to_string()),
                request_timeout: block.request_timeout,
                max_attempts: block.max_attempts,
                retry_budget: block.retry_budget,
            },
            api_key,
        })
    }

    fn secret_sources(account: &PowerDnsAccount) -> Vec<&SecretSource> {
        vec![&account.api_key]
    }

    fn build(account: &PowerDnsAccount) -> Result<Self, SetupError> {
        let key = account.api_key.load()?;
        Ok(PowerDnsClient::new(&account.settings, key)?)
    }

    /// A PowerDNS key refused is a 401 on each call, said by the zones' observations;
    /// its configuration naming what the provider does not have (a `server_id` the API
    /// does not know) is the account's.
    fn account_conditions(&self) -> Vec<Arc<Condition>> {
        vec![self.account_condition()]
    }

    async fn check_account(&self) -> Result<(), ProviderError> {
        self.check_server().await
    }
}
