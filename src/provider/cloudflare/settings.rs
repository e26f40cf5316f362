//! What the Cloudflare client needs to be built, its block as the file writes it
//! (`[providers.NAME]` with `kind = "cloudflare"`), and its line of the provider list's
//! needs ([`Kind`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::CloudflareClient;
use crate::condition::Condition;
use crate::de::{FileDir, KeyError};
use crate::provider::ProviderError;
use crate::provider::registry::{self, Kind, SetupError};
use crate::secret::SecretSource;
use crate::time::format::positive_duration as duration;

/// Cloudflare's API v4, "the stable base URL for all Version 4 HTTPS endpoints".
pub const DEFAULT_BASE_URL: &str = "https://api.cloudflare.com/client/v4";

/// A Cloudflare block as written: an API token from exactly one source.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// Cloudflare's own API when absent.
    #[serde(default, deserialize_with = "crate::de::some_http_url")]
    base_url: Option<Url>,
    #[serde(default, deserialize_with = "crate::de::secret_file")]
    api_token_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "crate::de::env_name")]
    api_token_env: Option<String>,
    #[serde(default, deserialize_with = "crate::de::credential_name")]
    api_token_credential: Option<String>,
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

/// `[providers.NAME]` of kind `cloudflare`: what its client is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudflareSettings {
    /// `https://api.cloudflare.com/client/v4`; paths are added to it.
    pub base_url: Url,
    /// The API token (`Authorization: Bearer`), by source.
    pub api_token: SecretSource,
    /// Time limit of one HTTP attempt.
    pub request_timeout: Duration,
    /// Attempts per call, the first one included.
    pub max_attempts: u32,
    /// Total time one call may spend on retries.
    pub retry_budget: Duration,
}

impl Kind for CloudflareClient {
    const KIND: &'static str = "cloudflare";
    const FOREIGN_DNSKEYS_WHY: &'static str =
        "this version does not yet add DNSKEY records at Cloudflare (its multi-signer DNSSEC)";
    type Block = Block;
    type Settings = CloudflareSettings;

    fn settings(block: Block, dir: FileDir<'_>) -> Result<CloudflareSettings, KeyError> {
        let api_token = dir
            .one_secret(
                "api_token",
                block.api_token_file,
                block.api_token_env,
                block.api_token_credential,
            )?
            .ok_or_else(|| {
                KeyError::new(
                    "api_token_file",
                    "no API token: set api_token_file, api_token_env or api_token_credential",
                )
            })?;
        Ok(CloudflareSettings {
            base_url: block.base_url.unwrap_or_else(default_base_url),
            api_token,
            request_timeout: block.request_timeout,
            max_attempts: block.max_attempts,
            retry_budget: block.retry_budget,
        })
    }

    fn secret_sources(settings: &CloudflareSettings) -> Vec<&SecretSource> {
        vec![&settings.api_token]
    }

    fn build(settings: &CloudflareSettings) -> Result<Self, SetupError> {
        let token = settings.api_token.load()?;
        Ok(CloudflareClient::new(settings, token)?)
    }

    fn account_conditions(&self) -> Vec<Arc<Condition>> {
        vec![self.auth_condition()]
    }

    /// The token tried read-only: one page of the zone list.
    async fn check_account(&self) -> Result<(), ProviderError> {
        self.first_zones().await.map(drop)
    }
}

fn default_base_url() -> Url {
    Url::parse(DEFAULT_BASE_URL).expect("a constant URL")
}
