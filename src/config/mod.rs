//! The TOML configuration file, turned into validated [`Settings`].
//!
//! Every error names the file, the key (`timing.poll_waiting`) and what is wrong, so a typo
//! at 3 a.m. is fixed in one read. Unknown keys are errors (`deny_unknown_fields`).
//! Secrets are not read here: [`Settings`] says where they live, and
//! [`CredentialSource::load`] fetches them when the provider client is built.
//!
//! A relative path in the file (`api_key_file`, `password_file`, `dns.trust_anchor_file`,
//! `database.path`) is relative to the directory of the file itself, never to the working
//! directory of whoever runs the command.
//!
//! Adding a key: one field with its serde attributes in its section's struct in `file` (a
//! default, and a `deserialize_with` helper from `de` when the value has a form or a
//! range), and a doc line with the default in `config.example.toml`. Only a rule involving
//! two keys belongs in `CrossChecks`. A provider block's keys are its provider's own
//! (`provider::registry::Kind`): `[provider]` and `[providers.NAME]` are read here as
//! tables, then by their `kind` as that provider's block.
//!
//! - `file`: each section as written, its values checked one by one as they are read;
//! - `de`: the `deserialize_with` helpers, one kind of value each;
//! - `checks`: `CrossChecks`, the rules across keys and each module's settings built.
//!
//! [`CredentialSource::load`]: crate::provider::gcore::CredentialSource::load

mod checks;
mod de;
mod file;
#[cfg(test)]
mod tests;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use crate::alert::{AlertSettings, RegistrarSettings};
use crate::dns::DnsSettings;
use crate::lifecycle::Policy;
use crate::provider::fleet::ProviderConfig;
use crate::store::{ClusterSettings, DatabaseSettings};
use crate::web::WebSettings;
use crate::zone_name::ZoneName;
use checks::CrossChecks;
use file::SettingsFile;

pub const DEFAULT_CONFIG_PATH: &str = "/etc/dnssec-warden/config.toml";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config {file}: cannot read: {error}")]
    Read {
        file: PathBuf,
        error: std::io::Error,
    },
    #[error("config {file}: {location}{message}")]
    Syntax {
        file: PathBuf,
        location: String,
        message: String,
    },
    #[error("config {file}: key `{key}`: {message}")]
    Invalid {
        file: PathBuf,
        key: String,
        message: String,
    },
}

impl ConfigError {
    /// The offending key, where the error is about one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// Validated settings. Durations are parsed, addresses are addresses, names are names.
///
/// Each section is deserialized into its typed struct: a value that is wrong on its own
/// (a bad duration, address, URL, a number out of range) fails while the file is read,
/// with the key that holds it. What is left for [`Settings::parse`] afterwards are the
/// checks across keys, and paths made relative to the file.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The file these settings came from, for messages.
    pub source: PathBuf,
    /// The provider accounts: `[provider]` (named after its kind) and every
    /// `[providers.NAME]`, by name. None: the daemon cannot act, but `check` still
    /// observes the DNS.
    pub providers: Vec<ProviderConfig>,
    pub database: DatabaseSettings,
    pub dns: DnsSettings,
    /// `[timing]`: the lifecycle's own timing struct.
    pub timing: Policy,
    pub zones: ZoneSelection,
    pub alerts: AlertSettings,
    /// `[registrar]`: the hook run when a DS should be published or withdrawn.
    pub registrar: Option<RegistrarSettings>,
    /// `[metrics]`: the Prometheus endpoint, off unless `listen` is set.
    pub metrics: Option<MetricsSettings>,
    /// `[cluster]`: this daemon's name and lease among the daemons sharing a PostgreSQL
    /// database (always set with `database.url`, defaults filled in; `None` with SQLite).
    pub cluster: Option<ClusterSettings>,
    /// `[web]`: the web console, off unless `listen`, `users` or `[web.proxy]` is set.
    pub web: Option<WebSettings>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSettings {
    pub listen: SocketAddr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneSelection {
    /// Zone names in their canonical form (A-labels, lower case, trailing dot), each once.
    Names(Vec<ZoneName>),
    /// Every zone of the account.
    All,
}

// ---- loading -------------------------------------------------------------------------

impl Settings {
    /// Reads and validates the file at `path`. Secrets are not read (see
    /// [`CredentialSource::load`](crate::provider::gcore::CredentialSource::load)).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            file: path.to_path_buf(),
            error,
        })?;
        Self::parse(&text, path)
    }

    /// Validates `text` as if it were read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let file = path.to_path_buf();
        let syntax = |err: toml::de::Error| ConfigError::Syntax {
            file: file.clone(),
            location: err
                .span()
                .map(|span| {
                    let (line, col) = line_col(text, span.start);
                    format!("line {line}, column {col}: ")
                })
                .unwrap_or_default(),
            message: err.message().trim().to_string(),
        };
        let deserializer = toml::Deserializer::parse(text).map_err(syntax)?;
        let raw: SettingsFile = serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let key = key_text(err.path());
            let inner = err.into_inner();
            if key == "." || key.is_empty() {
                syntax(inner)
            } else {
                ConfigError::Invalid {
                    file: file.clone(),
                    key,
                    message: inner.message().trim().to_string(),
                }
            }
        })?;
        CrossChecks { file }.settings(raw)
    }
}

/// The key as `serde_path_to_error` writes it (`alerts.webhook[0].url`), with a table
/// name that holds a dot quoted as TOML quotes it: `parents."ch.".ds_path`.
fn key_text(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    if path
        .iter()
        .all(|s| !matches!(s, Segment::Map { key } if key.contains('.')))
    {
        return path.to_string();
    }
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } if key.contains('.') => out.push_str(&format!(
                "{}\"{key}\"",
                if out.is_empty() { "" } else { "." }
            )),
            other => out.push_str(&format!("{}{other}", if out.is_empty() { "" } else { "." })),
        }
    }
    out
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// `IP`, `IP:port` or `[IPv6]:port`.
pub fn parse_server(text: &str, default_port: u16) -> Option<SocketAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, default_port));
    }
    text.parse::<SocketAddr>().ok()
}
