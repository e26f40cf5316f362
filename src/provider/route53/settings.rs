//! What the Route 53 client needs to be built, its block as the file writes it
//! (`[providers.NAME]` with `kind = "route53"`), and its line of the provider list's
//! needs ([`Kind`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::Route53Client;
use crate::condition::Condition;
use crate::de::{FileDir, KeyError};
use crate::provider::ProviderError;
use crate::provider::registry::{self, Kind, SetupError};
use crate::secret::{Secret, SecretSource};
use crate::time::format::positive_duration as duration;

/// Route 53's global endpoint (`globalEndpoint` of botocore's model).
pub const DEFAULT_BASE_URL: &str = "https://route53.amazonaws.com";
/// The region requests are signed for where `base_url` is not an AWS host.
pub const DEFAULT_REGION: &str = "us-east-1";
/// The name of the key-signing key the daemon creates ("numbers, letters, and
/// underscores", 3 to 128).
pub const DEFAULT_KSK_NAME: &str = "dnssec_warden_ksk";
/// Route 53's limit: five requests a second per AWS account.
pub const DEFAULT_REQUESTS_PER_SECOND: u32 = 5;
/// How long one call waits for its change to be `INSYNC` (AWS: "generally within 60
/// seconds").
pub const DEFAULT_CHANGE_TIMEOUT: Duration = Duration::from_secs(180);

fn default_requests_per_second() -> u32 {
    DEFAULT_REQUESTS_PER_SECOND
}

fn default_change_timeout() -> Duration {
    DEFAULT_CHANGE_TIMEOUT
}

/// A Route 53 block as written: an access key pair, each half from one source.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Block {
    /// Route 53's own endpoint when absent.
    #[serde(default, deserialize_with = "crate::de::some_http_url")]
    base_url: Option<Url>,
    /// The access key id written in the file (it names the key, it is not its secret).
    #[serde(default)]
    access_key_id: Option<String>,
    #[serde(default, deserialize_with = "crate::de::secret_file")]
    access_key_id_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "crate::de::env_name")]
    access_key_id_env: Option<String>,
    #[serde(default, deserialize_with = "crate::de::credential_name")]
    access_key_id_credential: Option<String>,
    #[serde(default, deserialize_with = "crate::de::secret_file")]
    secret_access_key_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "crate::de::env_name")]
    secret_access_key_env: Option<String>,
    #[serde(default, deserialize_with = "crate::de::credential_name")]
    secret_access_key_credential: Option<String>,
    /// The signing region where `base_url` is not AWS's own.
    #[serde(default)]
    region: Option<String>,
    /// The customer managed KMS key a key-signing key is created from.
    #[serde(default)]
    kms_key_arn: Option<String>,
    #[serde(default)]
    ksk_name: Option<String>,
    #[serde(
        default = "default_requests_per_second",
        deserialize_with = "crate::de::in_range::<1, 5, _, _>"
    )]
    requests_per_second: u32,
    #[serde(default = "default_change_timeout", deserialize_with = "duration")]
    change_timeout: Duration,
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

/// Where the access key id comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyId {
    /// Written in the file.
    Plain(String),
    Source(SecretSource),
}

/// `[providers.NAME]` of kind `route53`: what its client is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route53Settings {
    pub base_url: Url,
    pub access_key_id: KeyId,
    pub secret_access_key: SecretSource,
    /// The region requests are signed for: `us-east-1` for AWS's commercial endpoint,
    /// else the block's `region`.
    pub region: String,
    pub kms_key_arn: Option<String>,
    pub ksk_name: String,
    pub requests_per_second: u32,
    pub change_timeout: Duration,
    pub request_timeout: Duration,
    pub max_attempts: u32,
    pub retry_budget: Duration,
}

impl Kind for Route53Client {
    const KIND: &'static str = "route53";
    const FOREIGN_DNSKEYS_WHY: &'static str =
        "Route 53 cannot hold another signer's DNSKEY (its record types have no DNSKEY)";
    type Block = Block;
    type Settings = Route53Settings;

    fn settings(block: Block, dir: FileDir<'_>) -> Result<Route53Settings, KeyError> {
        let id_source = dir.one_secret(
            "access_key_id",
            block.access_key_id_file,
            block.access_key_id_env,
            block.access_key_id_credential,
        )?;
        let access_key_id = match (block.access_key_id, id_source) {
            (Some(_), Some(_)) => {
                return Err(KeyError::new(
                    "access_key_id",
                    "set only one of access_key_id, access_key_id_file, access_key_id_env, access_key_id_credential",
                ));
            }
            (Some(id), None) => {
                if !plausible_key_id(&id) {
                    return Err(KeyError::new(
                        "access_key_id",
                        "an access key id is 16 to 128 letters and digits",
                    ));
                }
                KeyId::Plain(id)
            }
            (None, Some(source)) => KeyId::Source(source),
            (None, None) => {
                return Err(KeyError::new(
                    "access_key_id",
                    "no access key id: set access_key_id, access_key_id_file, access_key_id_env or access_key_id_credential",
                ));
            }
        };
        let secret_access_key = dir
            .one_secret(
                "secret_access_key",
                block.secret_access_key_file,
                block.secret_access_key_env,
                block.secret_access_key_credential,
            )?
            .ok_or_else(|| {
                KeyError::new(
                    "secret_access_key_file",
                    "no secret access key: set secret_access_key_file, secret_access_key_env or secret_access_key_credential",
                )
            })?;
        let base_url = block.base_url.unwrap_or_else(default_base_url);
        let region = match (signing_region_of(&base_url), block.region) {
            (Some(aws), Some(region)) if region != aws => {
                return Err(KeyError::new(
                    "region",
                    format!(
                        "{} is signed for {aws} whatever the region: leave region out",
                        base_url.host_str().unwrap_or_default()
                    ),
                ));
            }
            (Some(aws), _) => aws.to_string(),
            (None, Some(region)) => {
                if region.is_empty()
                    || !region
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                {
                    return Err(KeyError::new(
                        "region",
                        "a region is lower-case letters, digits and dashes (us-east-1)",
                    ));
                }
                region
            }
            (None, None) => DEFAULT_REGION.to_string(),
        };
        if let Some(arn) = &block.kms_key_arn
            && let Err(why) = check_kms_arn(arn)
        {
            return Err(KeyError::new("kms_key_arn", why));
        }
        let ksk_name = block
            .ksk_name
            .unwrap_or_else(|| DEFAULT_KSK_NAME.to_string());
        if !(3..=128).contains(&ksk_name.len())
            || !ksk_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(KeyError::new(
                "ksk_name",
                "3 to 128 letters, digits and underscores (Route 53's rule for a key-signing key's name)",
            ));
        }
        Ok(Route53Settings {
            base_url,
            access_key_id,
            secret_access_key,
            region,
            kms_key_arn: block.kms_key_arn,
            ksk_name,
            requests_per_second: block.requests_per_second,
            change_timeout: block.change_timeout,
            request_timeout: block.request_timeout,
            max_attempts: block.max_attempts,
            retry_budget: block.retry_budget,
        })
    }

    fn secret_sources(settings: &Route53Settings) -> Vec<&SecretSource> {
        let mut sources = vec![&settings.secret_access_key];
        if let KeyId::Source(s) = &settings.access_key_id {
            sources.push(s);
        }
        sources
    }

    fn build(settings: &Route53Settings) -> Result<Self, SetupError> {
        let id = match &settings.access_key_id {
            KeyId::Plain(id) => Secret::new(id.clone()),
            KeyId::Source(source) => source.load()?,
        };
        let secret = settings.secret_access_key.load()?;
        Ok(Route53Client::new(settings, id, secret)?)
    }

    fn account_conditions(&self) -> Vec<Arc<Condition>> {
        vec![self.auth_condition()]
    }

    /// The key pair tried read-only: one page of the hosted zones.
    async fn check_account(&self) -> Result<(), ProviderError> {
        self.first_zones().await.map(drop)
    }
}

fn default_base_url() -> Url {
    Url::parse(DEFAULT_BASE_URL).expect("a constant URL")
}

/// The region AWS's own Route 53 endpoints are signed for, whatever the caller's region
/// (botocore's endpoint rules); `None` for any other host (the lab, a proxy).
pub fn signing_region_of(url: &Url) -> Option<&'static str> {
    match url.host_str()? {
        "route53.amazonaws.com" | "route53-fips.amazonaws.com" => Some("us-east-1"),
        "route53.amazonaws.com.cn" => Some("cn-northwest-1"),
        "route53.us-gov.amazonaws.com" => Some("us-gov-west-1"),
        _ => None,
    }
}

fn plausible_key_id(id: &str) -> bool {
    (16..=128).contains(&id.len()) && id.chars().all(|c| c.is_ascii_alphanumeric())
}

/// A KMS key ARN (`arn:PARTITION:kms:REGION:ACCOUNT:key/ID`); in AWS's commercial
/// partition its region must be `us-east-1`, where Route 53 takes DNSSEC keys from.
pub fn check_kms_arn(arn: &str) -> Result<(), String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let ok = parts.len() == 6
        && parts[0] == "arn"
        && parts[1].starts_with("aws")
        && parts[2] == "kms"
        && !parts[3].is_empty()
        && parts[4].len() == 12
        && parts[4].chars().all(|c| c.is_ascii_digit())
        && parts[5]
            .strip_prefix("key/")
            .is_some_and(|id| !id.is_empty() && !id.contains(char::is_whitespace));
    if !ok {
        return Err(format!(
            "{arn:?} is not a KMS key ARN (arn:aws:kms:us-east-1:ACCOUNT:key/ID)"
        ));
    }
    if parts[1] == "aws" && parts[3] != "us-east-1" {
        return Err(format!(
            "{arn:?} is in {}: Route 53 takes DNSSEC keys only from a KMS key in us-east-1",
            parts[3]
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kms_arns_and_signing_regions() {
        assert!(check_kms_arn("arn:aws:kms:us-east-1:111122223333:key/abcd-1234").is_ok());
        assert!(
            check_kms_arn("arn:aws:kms:eu-west-1:111122223333:key/abcd")
                .unwrap_err()
                .contains("us-east-1")
        );
        assert!(check_kms_arn("arn:aws:kms:us-east-1:111122223333:alias/x").is_err());
        assert!(check_kms_arn("abcd").is_err());
        let url = |u| Url::parse(u).unwrap();
        assert_eq!(
            signing_region_of(&url("https://route53.amazonaws.com")),
            Some("us-east-1")
        );
        assert_eq!(signing_region_of(&url("http://127.0.0.1:9/")), None);
    }
}
