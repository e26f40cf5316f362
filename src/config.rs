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

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use crate::secret::Secret;
use crate::zone_name::ZoneName;

pub const DEFAULT_CONFIG_PATH: &str = "/etc/dnssec-warden/config.toml";

/// The IANA root servers (root-servers.org), where iterative discovery starts by default.
pub const IANA_ROOT_HINTS: &[&str] = &[
    "198.41.0.4",
    "2001:503:ba3e::2:30",
    "170.247.170.2",
    "2801:1b8:10::b",
    "192.33.4.12",
    "2001:500:2::c",
    "199.7.91.13",
    "2001:500:2d::d",
    "192.203.230.10",
    "2001:500:a8::e",
    "192.5.5.241",
    "2001:500:2f::f",
    "192.112.36.4",
    "2001:500:12::d0d",
    "198.97.190.53",
    "2001:500:1::53",
    "192.36.148.17",
    "2001:7fe::53",
    "192.58.128.30",
    "2001:503:c27::2:30",
    "193.0.14.129",
    "2001:7fd::1",
    "199.7.83.42",
    "2001:500:9f::42",
    "202.12.27.33",
    "2001:dc3::35",
];

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
#[derive(Debug, Clone)]
pub struct Settings {
    /// The file these settings came from, for messages.
    pub source: PathBuf,
    /// Absent: the daemon cannot act, but `check` still observes the DNS.
    pub provider: Option<ProviderSettings>,
    pub database: DatabaseSettings,
    pub dns: DnsSettings,
    pub timing: TimingSettings,
    pub zones: ZoneSelection,
    pub alerts: AlertSettings,
    /// `[registrar]`: the hook run when a DS should be published or withdrawn.
    pub registrar: Option<RegistrarSettings>,
    /// `[metrics]`: the Prometheus endpoint, off unless `listen` is set.
    pub metrics: Option<MetricsSettings>,
}

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    File(PathBuf),
    Env(String),
    /// A name in `$CREDENTIALS_DIRECTORY`, as systemd's `LoadCredential=` provides.
    Credential(String),
}

/// Credentials read from their source.
#[derive(Debug, Clone)]
pub enum Credentials {
    ApiKey(Secret),
    Login { username: String, password: Secret },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseSettings {
    pub path: PathBuf,
}

/// Default of `dns.queries_per_server`. Validating resolvers (Unbound, BIND, Knot Resolver)
/// put no cap of their own on queries in flight to one server, and `dnsperf` keeps 100;
/// 16 stays far below what any authoritative server answers, while at 8 the server
/// woke for nearly every query and spent about a fifth more CPU on each (knotd, in
/// `cargo bench --bench observe`).
pub const DEFAULT_QUERIES_PER_SERVER: usize = 16;
/// Upper bound of `dns.queries_per_server`: the observer's cap on queries in flight to all
/// servers together.
pub const MAX_QUERIES_PER_SERVER: usize = 64;

/// The budget of one observation (one zone's parent view, child view or validation):
/// what discovery and the queries behind it may spend before the observation ends as
/// unknown, "budget exhausted: …". Depth alone bounds nothing: a glueless fan-out of F
/// names per zone costs F^depth lookups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObservationBudget {
    /// Wall time of one observation (`dns.observation_timeout`), well under the engine's
    /// step timeout of 120 s.
    pub timeout: Duration,
    /// Questions asked (each with up to `dns.query_attempts` tries),
    /// `dns.max_queries_per_observation`.
    pub max_queries: u32,
    /// Addresses of name servers looked up because no glue came with them,
    /// `dns.max_host_lookups`.
    pub max_host_lookups: u32,
    /// Name servers one delegation may have (`dns.max_ns_per_delegation`); beyond it the
    /// zone is unknown, never asked in part.
    pub max_ns_per_delegation: usize,
    /// Addresses one name server may have (`dns.max_addresses_per_server`); beyond it the
    /// server is unknown.
    pub max_addresses_per_server: usize,
}

/// Default of `dns.observation_timeout`.
pub const DEFAULT_OBSERVATION_TIMEOUT: Duration = Duration::from_secs(60);
/// Upper bound of `dns.observation_timeout`: the engine abandons a step after 120 s, and
/// a step may observe and then call the provider.
pub const MAX_OBSERVATION_TIMEOUT: Duration = Duration::from_secs(90);
/// Default of `dns.max_queries_per_observation`: a zone under a TLD of 13 dual-stack
/// servers asks 26 DS questions; its 13 dual-stack servers 78 DNSKEY/CDS/CDNSKEY ones;
/// glueless name servers a few more each.
pub const DEFAULT_MAX_QUERIES_PER_OBSERVATION: u32 = 500;
/// Default of `dns.max_host_lookups` (Unbound stops at 64 target lookups per query).
pub const DEFAULT_MAX_HOST_LOOKUPS: u32 = 64;
/// Default of `dns.max_ns_per_delegation`: 13 is the most seen in practice.
pub const DEFAULT_MAX_NS_PER_DELEGATION: usize = 20;
/// Default of `dns.max_addresses_per_server`: one IPv4 and one IPv6 address is usual.
pub const DEFAULT_MAX_ADDRESSES_PER_SERVER: usize = 8;

impl Default for ObservationBudget {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_OBSERVATION_TIMEOUT,
            max_queries: DEFAULT_MAX_QUERIES_PER_OBSERVATION,
            max_host_lookups: DEFAULT_MAX_HOST_LOOKUPS,
            max_ns_per_delegation: DEFAULT_MAX_NS_PER_DELEGATION,
            max_addresses_per_server: DEFAULT_MAX_ADDRESSES_PER_SERVER,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSettings {
    pub root_hints: Vec<IpAddr>,
    pub port: u16,
    /// None: the IANA root trust anchor built into the validator.
    pub trust_anchor_file: Option<PathBuf>,
    pub validating_resolvers: Vec<SocketAddr>,
    pub query_timeout: Duration,
    pub query_attempts: u32,
    /// Queries in flight at once to one name server address (politeness; see
    /// [`MAX_QUERIES_PER_SERVER`]).
    pub queries_per_server: usize,
    /// Which name server addresses are asked. Both by default; a host without IPv6 sets
    /// `["ipv4"]`, or every IPv6 address would answer "unknown" and block every decision.
    pub address_families: AddressFamilies,
    /// What one observation may spend (`dns.observation_timeout`, `dns.max_*`).
    pub budget: ObservationBudget,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressFamilies {
    pub ipv4: bool,
    pub ipv6: bool,
}

impl Default for AddressFamilies {
    fn default() -> Self {
        Self {
            ipv4: true,
            ipv6: true,
        }
    }
}

impl AddressFamilies {
    pub fn allows(&self, addr: &IpAddr) -> bool {
        match addr {
            IpAddr::V4(_) => self.ipv4,
            IpAddr::V6(_) => self.ipv6,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimingSettings {
    pub poll_waiting: Duration,
    pub poll_active: Duration,
    pub propagation_margin: Duration,
    pub ds_overdue_after: Duration,
    pub ds_removal_overdue_after: Duration,
    pub partial_stuck_after: Duration,
    pub signatures_expiring_within: Duration,
    pub observation_failing_after: Duration,
    pub retry_base: Duration,
    pub assumed_ds_ttl: Duration,
}

/// `[alerts]`: where alerts go besides the log, and how often an open one is repeated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertSettings {
    pub renotify_after: Duration,
    pub webhooks: Vec<WebhookSettings>,
    pub execs: Vec<ExecSettings>,
}

/// One `[[alerts.webhook]]`: a JSON POST with a Slack-compatible `text`.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// The key it came from (`alerts.webhook[0]`), to name it in logs without its URL.
    pub name: String,
    pub url: Url,
    /// Extra request headers (an `Authorization` token, say), sorted by name.
    pub headers: Vec<(String, String)>,
    /// Time limit of one attempt.
    pub timeout: Duration,
    /// Attempts per notification and tick, the first included.
    pub max_attempts: u32,
    /// Wait before the first retry; doubled for each further one.
    pub backoff: Duration,
}

// Webhook URLs and headers often carry tokens (Slack's URL is the secret): never printed.
impl std::fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("name", &self.name)
            .field("host", &self.url.host_str())
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .finish()
    }
}

/// One `[[alerts.exec]]`: a command run with the alert in its environment and on stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSettings {
    /// The key it came from (`alerts.exec[0]`).
    pub name: String,
    pub command: Vec<String>,
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrarSettings {
    pub command: Vec<String>,
    pub timeout: Duration,
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

// ---- the file as written -------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    provider: Option<RawProvider>,
    #[serde(default)]
    database: RawDatabase,
    #[serde(default)]
    dns: RawDns,
    #[serde(default)]
    timing: RawTiming,
    #[serde(default)]
    zones: RawZones,
    #[serde(default)]
    alerts: RawAlerts,
    registrar: Option<RawRegistrar>,
    #[serde(default)]
    metrics: RawMetrics,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawAlerts {
    renotify_after: String,
    webhook: Vec<RawWebhook>,
    exec: Vec<RawExec>,
}

impl Default for RawAlerts {
    fn default() -> Self {
        Self {
            renotify_after: "24h".into(),
            webhook: Vec::new(),
            exec: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhook {
    url: String,
    #[serde(default)]
    headers: toml::Table,
    #[serde(default = "default_webhook_timeout")]
    timeout: String,
    #[serde(default = "default_webhook_attempts")]
    max_attempts: u32,
    #[serde(default = "default_webhook_backoff")]
    backoff: String,
}

fn default_webhook_timeout() -> String {
    "10s".into()
}
fn default_webhook_attempts() -> u32 {
    3
}
fn default_webhook_backoff() -> String {
    "1s".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExec {
    command: Vec<String>,
    #[serde(default = "default_exec_timeout")]
    timeout: String,
}

fn default_exec_timeout() -> String {
    "30s".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRegistrar {
    command: Vec<String>,
    #[serde(default = "default_registrar_timeout")]
    timeout: String,
}

fn default_registrar_timeout() -> String {
    "60s".into()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    listen: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProvider {
    #[serde(default = "default_base_url")]
    base_url: String,
    api_key_file: Option<PathBuf>,
    api_key_env: Option<String>,
    api_key_credential: Option<String>,
    username: Option<String>,
    password_file: Option<PathBuf>,
    password_env: Option<String>,
    password_credential: Option<String>,
    #[serde(default = "default_request_timeout")]
    request_timeout: String,
    #[serde(default = "default_max_attempts")]
    max_attempts: u32,
    #[serde(default = "default_retry_budget")]
    retry_budget: String,
}

fn default_base_url() -> String {
    "https://api.gcore.com".into()
}
fn default_request_timeout() -> String {
    "30s".into()
}
fn default_max_attempts() -> u32 {
    5
}
fn default_retry_budget() -> String {
    "2m".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDatabase {
    path: PathBuf,
}

impl Default for RawDatabase {
    fn default() -> Self {
        Self {
            path: "/var/lib/dnssec-warden/state.db".into(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawDns {
    root_hints: Vec<String>,
    port: u16,
    trust_anchor_file: String,
    validating_resolvers: Vec<String>,
    query_timeout: String,
    query_attempts: u32,
    queries_per_server: usize,
    address_families: Vec<String>,
    observation_timeout: String,
    max_queries_per_observation: u32,
    max_host_lookups: u32,
    max_ns_per_delegation: usize,
    max_addresses_per_server: usize,
}

impl Default for RawDns {
    fn default() -> Self {
        Self {
            root_hints: IANA_ROOT_HINTS.iter().map(|s| s.to_string()).collect(),
            port: 53,
            trust_anchor_file: String::new(),
            validating_resolvers: vec!["1.1.1.1".into(), "9.9.9.9".into()],
            query_timeout: "2s".into(),
            query_attempts: 3,
            queries_per_server: DEFAULT_QUERIES_PER_SERVER,
            address_families: vec!["ipv4".into(), "ipv6".into()],
            observation_timeout: "60s".into(),
            max_queries_per_observation: DEFAULT_MAX_QUERIES_PER_OBSERVATION,
            max_host_lookups: DEFAULT_MAX_HOST_LOOKUPS,
            max_ns_per_delegation: DEFAULT_MAX_NS_PER_DELEGATION,
            max_addresses_per_server: DEFAULT_MAX_ADDRESSES_PER_SERVER,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawTiming {
    poll_waiting: String,
    poll_active: String,
    propagation_margin: String,
    ds_overdue_after: String,
    ds_removal_overdue_after: String,
    partial_stuck_after: String,
    signatures_expiring_within: String,
    observation_failing_after: String,
    retry_base: String,
    assumed_ds_ttl: String,
}

impl Default for RawTiming {
    fn default() -> Self {
        Self {
            poll_waiting: "5m".into(),
            poll_active: "1h".into(),
            propagation_margin: "1h".into(),
            ds_overdue_after: "24h".into(),
            ds_removal_overdue_after: "24h".into(),
            partial_stuck_after: "6h".into(),
            signatures_expiring_within: "3d".into(),
            observation_failing_after: "1h".into(),
            retry_base: "5s".into(),
            assumed_ds_ttl: "1d".into(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawZones {
    names: Option<Vec<String>>,
    all: Option<bool>,
}

// ---- loading -------------------------------------------------------------------------

impl Settings {
    /// Reads and validates the file at `path`. Secrets are not read (see
    /// [`CredentialSource::load`]).
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
        let raw: RawConfig = serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let key = err.path().to_string();
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
        Validator { file }.settings(raw)
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

struct Validator {
    file: PathBuf,
}

impl Validator {
    /// A path from the file: a relative one is taken relative to the file's directory.
    fn path(&self, path: PathBuf) -> PathBuf {
        if path.is_absolute() {
            return path;
        }
        match self.file.parent() {
            Some(dir) => dir.join(path),
            None => path,
        }
    }

    fn err(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.clone(),
            key: key.to_string(),
            message: message.into(),
        }
    }

    fn duration(&self, key: &str, text: &str) -> Result<Duration, ConfigError> {
        let value = parse_duration(text).map_err(|msg| self.err(key, msg))?;
        if value.is_zero() {
            return Err(self.err(key, "must be longer than zero"));
        }
        Ok(value)
    }

    fn settings(&self, raw: RawConfig) -> Result<Settings, ConfigError> {
        Ok(Settings {
            source: self.file.clone(),
            provider: raw.provider.map(|p| self.provider(p)).transpose()?,
            database: self.database(raw.database)?,
            dns: self.dns(raw.dns)?,
            timing: self.timing(raw.timing)?,
            zones: self.zones(raw.zones)?,
            alerts: self.alerts(raw.alerts)?,
            registrar: raw.registrar.map(|r| self.registrar(r)).transpose()?,
            metrics: self.metrics(raw.metrics)?,
        })
    }

    /// A command line: at least the program, no empty words.
    fn command(&self, key: &str, argv: Vec<String>) -> Result<Vec<String>, ConfigError> {
        match argv.first() {
            None => Err(self.err(
                key,
                "must name a program: [\"/path/to/program\", \"arg\", ...]",
            )),
            Some(program) if program.trim().is_empty() => {
                Err(self.err(&format!("{key}[0]"), "the program must not be empty"))
            }
            Some(_) => Ok(argv),
        }
    }

    fn alerts(&self, raw: RawAlerts) -> Result<AlertSettings, ConfigError> {
        let renotify_after = self.duration("alerts.renotify_after", &raw.renotify_after)?;
        let webhooks = raw
            .webhook
            .into_iter()
            .enumerate()
            .map(|(i, w)| self.webhook(&format!("alerts.webhook[{i}]"), w))
            .collect::<Result<_, _>>()?;
        let execs = raw
            .exec
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let name = format!("alerts.exec[{i}]");
                Ok(ExecSettings {
                    command: self.command(&format!("{name}.command"), e.command)?,
                    timeout: self.duration(&format!("{name}.timeout"), &e.timeout)?,
                    name,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(AlertSettings {
            renotify_after,
            webhooks,
            execs,
        })
    }

    fn webhook(&self, name: &str, raw: RawWebhook) -> Result<WebhookSettings, ConfigError> {
        let key = format!("{name}.url");
        // The URL may hold a token: the message says what is wrong, never echoes it.
        let url = Url::parse(&raw.url).map_err(|e| self.err(&key, format!("not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(self.err(&key, "must be an http:// or https:// URL with a host"));
        }
        let mut headers = Vec::with_capacity(raw.headers.len());
        for (header, value) in raw.headers {
            let key = format!("{name}.headers.{header}");
            if reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err(self.err(&key, "not a valid HTTP header name"));
            }
            let toml::Value::String(value) = value else {
                return Err(self.err(&key, "must be a string"));
            };
            if reqwest::header::HeaderValue::from_str(&value).is_err() {
                return Err(self.err(&key, "not a valid HTTP header value (control characters?)"));
            }
            headers.push((header, value));
        }
        if !(1..=10).contains(&raw.max_attempts) {
            return Err(self.err(&format!("{name}.max_attempts"), "must be 1 to 10"));
        }
        Ok(WebhookSettings {
            name: name.to_string(),
            url,
            headers,
            timeout: self.duration(&format!("{name}.timeout"), &raw.timeout)?,
            max_attempts: raw.max_attempts,
            backoff: self.duration(&format!("{name}.backoff"), &raw.backoff)?,
        })
    }

    fn registrar(&self, raw: RawRegistrar) -> Result<RegistrarSettings, ConfigError> {
        Ok(RegistrarSettings {
            command: self.command("registrar.command", raw.command)?,
            timeout: self.duration("registrar.timeout", &raw.timeout)?,
        })
    }

    fn metrics(&self, raw: RawMetrics) -> Result<Option<MetricsSettings>, ConfigError> {
        raw.listen
            .map(|text| {
                text.parse::<SocketAddr>()
                    .map(|listen| MetricsSettings { listen })
                    .map_err(|_| {
                        self.err(
                            "metrics.listen",
                            format!("{text:?} is not IP:port (e.g. \"127.0.0.1:9753\")"),
                        )
                    })
            })
            .transpose()
    }

    fn provider(&self, raw: RawProvider) -> Result<ProviderSettings, ConfigError> {
        let base_url = Url::parse(&raw.base_url)
            .map_err(|e| self.err("provider.base_url", format!("not a URL: {e}")))?;
        if !matches!(base_url.scheme(), "http" | "https") || base_url.host().is_none() {
            return Err(self.err(
                "provider.base_url",
                "must be an http:// or https:// URL with a host",
            ));
        }
        let api_key = self.one_source(
            "provider.api_key",
            raw.api_key_file,
            raw.api_key_env,
            raw.api_key_credential,
        )?;
        let password = self.one_source(
            "provider.password",
            raw.password_file,
            raw.password_env,
            raw.password_credential,
        )?;
        let credentials = match (api_key, raw.username, password) {
            (Some(key), None, None) => CredentialSource::ApiKey(key),
            (None, Some(username), Some(password)) => {
                if username.trim().is_empty() {
                    return Err(self.err("provider.username", "is empty"));
                }
                CredentialSource::Login { username, password }
            }
            (None, Some(_), None) => {
                return Err(self.err(
                    "provider.username",
                    "needs password_file, password_env or password_credential",
                ));
            }
            (None, None, Some(_)) => {
                return Err(self.err("provider.username", "is missing (a password is set)"));
            }
            (Some(_), _, _) => {
                return Err(self.err(
                    "provider.api_key_file",
                    "give either an API key or username + password, not both",
                ));
            }
            (None, None, None) => {
                return Err(self.err(
                    "provider.api_key_file",
                    "no credentials: set api_key_file, api_key_env, api_key_credential, or username with a password source",
                ));
            }
        };
        if raw.max_attempts == 0 {
            return Err(self.err("provider.max_attempts", "must be at least 1"));
        }
        Ok(ProviderSettings {
            base_url,
            credentials,
            request_timeout: self.duration("provider.request_timeout", &raw.request_timeout)?,
            max_attempts: raw.max_attempts,
            retry_budget: self.duration("provider.retry_budget", &raw.retry_budget)?,
        })
    }

    /// At most one of the three ways to give a secret.
    fn one_source(
        &self,
        stem: &str,
        file: Option<PathBuf>,
        env: Option<String>,
        credential: Option<String>,
    ) -> Result<Option<SecretSource>, ConfigError> {
        let mut found = Vec::new();
        if let Some(path) = file {
            if path.as_os_str().is_empty() {
                return Err(self.err(&format!("{stem}_file"), "is empty"));
            }
            found.push(SecretSource::File(self.path(path)));
        }
        if let Some(var) = env {
            if var.is_empty() || var.contains('=') {
                return Err(self.err(&format!("{stem}_env"), "is not a variable name"));
            }
            found.push(SecretSource::Env(var));
        }
        if let Some(name) = credential {
            if name.is_empty() || name.contains('/') {
                return Err(self.err(
                    &format!("{stem}_credential"),
                    "must be a credential name without '/'",
                ));
            }
            found.push(SecretSource::Credential(name));
        }
        if found.len() > 1 {
            return Err(self.err(
                &format!("{stem}_file"),
                format!("set only one of {stem}_file, {stem}_env, {stem}_credential"),
            ));
        }
        Ok(found.pop())
    }

    fn database(&self, raw: RawDatabase) -> Result<DatabaseSettings, ConfigError> {
        if raw.path.as_os_str().is_empty() {
            return Err(self.err("database.path", "is empty"));
        }
        Ok(DatabaseSettings {
            path: self.path(raw.path),
        })
    }

    fn dns(&self, raw: RawDns) -> Result<DnsSettings, ConfigError> {
        if raw.root_hints.is_empty() {
            return Err(self.err("dns.root_hints", "needs at least one address"));
        }
        let root_hints: Vec<IpAddr> = raw
            .root_hints
            .iter()
            .enumerate()
            .map(|(i, text)| {
                text.parse::<IpAddr>().map_err(|_| {
                    self.err(
                        &format!("dns.root_hints[{i}]"),
                        format!("{text:?} is not an IP address"),
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        if raw.port == 0 {
            return Err(self.err("dns.port", "must be 1 to 65535"));
        }
        let validating_resolvers = raw
            .validating_resolvers
            .iter()
            .enumerate()
            .map(|(i, text)| {
                parse_server(text, 53).ok_or_else(|| {
                    self.err(
                        &format!("dns.validating_resolvers[{i}]"),
                        format!("{text:?} is not an address (IP or IP:port, [v6]:port)"),
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        if raw.query_attempts == 0 {
            return Err(self.err("dns.query_attempts", "must be at least 1"));
        }
        if !(1..=MAX_QUERIES_PER_SERVER).contains(&raw.queries_per_server) {
            return Err(self.err(
                "dns.queries_per_server",
                format!("must be 1 to {MAX_QUERIES_PER_SERVER}"),
            ));
        }
        let mut families = AddressFamilies {
            ipv4: false,
            ipv6: false,
        };
        for (i, family) in raw.address_families.iter().enumerate() {
            match family.as_str() {
                "ipv4" => families.ipv4 = true,
                "ipv6" => families.ipv6 = true,
                other => {
                    return Err(self.err(
                        &format!("dns.address_families[{i}]"),
                        format!("{other:?} is neither \"ipv4\" nor \"ipv6\""),
                    ));
                }
            }
        }
        if !families.ipv4 && !families.ipv6 {
            return Err(self.err("dns.address_families", "needs \"ipv4\", \"ipv6\" or both"));
        }
        let budget = self.budget(&raw)?;
        let root_hints: Vec<IpAddr> = root_hints;
        if !root_hints.iter().any(|a| families.allows(a)) {
            return Err(self.err(
                "dns.root_hints",
                "no address of an enabled family (dns.address_families)",
            ));
        }
        Ok(DnsSettings {
            root_hints,
            port: raw.port,
            trust_anchor_file: (!raw.trust_anchor_file.is_empty())
                .then(|| self.path(PathBuf::from(&raw.trust_anchor_file))),
            validating_resolvers,
            query_timeout: self.duration("dns.query_timeout", &raw.query_timeout)?,
            query_attempts: raw.query_attempts,
            queries_per_server: raw.queries_per_server,
            address_families: families,
            budget,
        })
    }

    fn budget(&self, raw: &RawDns) -> Result<ObservationBudget, ConfigError> {
        let timeout = self.duration("dns.observation_timeout", &raw.observation_timeout)?;
        if timeout > MAX_OBSERVATION_TIMEOUT {
            return Err(self.err(
                "dns.observation_timeout",
                format!(
                    "must be at most {}s (the engine abandons a step after 120s)",
                    MAX_OBSERVATION_TIMEOUT.as_secs()
                ),
            ));
        }
        let range = |key: &str, value: u64, max: u64| {
            if (1..=max).contains(&value) {
                Ok(())
            } else {
                Err(self.err(key, format!("must be 1 to {max}")))
            }
        };
        range(
            "dns.max_queries_per_observation",
            raw.max_queries_per_observation.into(),
            100_000,
        )?;
        range("dns.max_host_lookups", raw.max_host_lookups.into(), 10_000)?;
        range(
            "dns.max_ns_per_delegation",
            raw.max_ns_per_delegation as u64,
            1_000,
        )?;
        range(
            "dns.max_addresses_per_server",
            raw.max_addresses_per_server as u64,
            256,
        )?;
        Ok(ObservationBudget {
            timeout,
            max_queries: raw.max_queries_per_observation,
            max_host_lookups: raw.max_host_lookups,
            max_ns_per_delegation: raw.max_ns_per_delegation,
            max_addresses_per_server: raw.max_addresses_per_server,
        })
    }

    fn timing(&self, raw: RawTiming) -> Result<TimingSettings, ConfigError> {
        Ok(TimingSettings {
            poll_waiting: self.duration("timing.poll_waiting", &raw.poll_waiting)?,
            poll_active: self.duration("timing.poll_active", &raw.poll_active)?,
            propagation_margin: self
                .duration("timing.propagation_margin", &raw.propagation_margin)?,
            ds_overdue_after: self.duration("timing.ds_overdue_after", &raw.ds_overdue_after)?,
            ds_removal_overdue_after: self.duration(
                "timing.ds_removal_overdue_after",
                &raw.ds_removal_overdue_after,
            )?,
            partial_stuck_after: self
                .duration("timing.partial_stuck_after", &raw.partial_stuck_after)?,
            signatures_expiring_within: self.duration(
                "timing.signatures_expiring_within",
                &raw.signatures_expiring_within,
            )?,
            observation_failing_after: self.duration(
                "timing.observation_failing_after",
                &raw.observation_failing_after,
            )?,
            retry_base: self.duration("timing.retry_base", &raw.retry_base)?,
            assumed_ds_ttl: self.duration("timing.assumed_ds_ttl", &raw.assumed_ds_ttl)?,
        })
    }

    fn zones(&self, raw: RawZones) -> Result<ZoneSelection, ConfigError> {
        match (raw.names, raw.all) {
            (Some(_), Some(true)) => Err(self.err(
                "zones.all",
                "set either zones.names or zones.all = true, not both",
            )),
            (None, Some(true)) => Ok(ZoneSelection::All),
            (Some(names), _) => {
                let mut out: Vec<ZoneName> = Vec::with_capacity(names.len());
                for (i, name) in names.iter().enumerate() {
                    let key = format!("zones.names[{i}]");
                    let zone = ZoneName::parse(name).map_err(|e| self.err(&key, e.to_string()))?;
                    // Duplicates are found after normalisation: `bücher.example` and
                    // `xn--bcher-kva.example` are one zone.
                    if let Some(first) = out.iter().position(|z| *z == zone) {
                        return Err(self.err(
                            &key,
                            format!(
                                "{name:?} is the same zone as {:?} (zones.names[{first}]): both are {zone}",
                                names[first]
                            ),
                        ));
                    }
                    out.push(zone);
                }
                Ok(ZoneSelection::Names(out))
            }
            (None, _) => Ok(ZoneSelection::Names(Vec::new())),
        }
    }
}

/// `"90s"`, `"5m"`, `"24h"`, `"2d"`, `"1h30m"`, `"250ms"`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration (write e.g. \"90s\", \"5m\", \"24h\")".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "invalid duration {text:?}: expected a number at {rest:?}"
            ));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}: number too large"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(number),
            "s" => Duration::from_secs(number),
            "m" => Duration::from_secs(number.saturating_mul(60)),
            "h" => Duration::from_secs(number.saturating_mul(3600)),
            "d" => Duration::from_secs(number.saturating_mul(86_400)),
            "" => {
                return Err(format!(
                    "invalid duration {text:?}: a unit is needed (ms, s, m, h or d)"
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration {text:?}: unknown unit {other:?} (use ms, s, m, h or d)"
                ));
            }
        };
        total = total.saturating_add(part);
    }
    Ok(total)
}

/// `IP`, `IP:port` or `[IPv6]:port`.
pub fn parse_server(text: &str, default_port: u16) -> Option<SocketAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, default_port));
    }
    text.parse::<SocketAddr>().ok()
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

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read secret file {path}: {error}")]
    File {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("environment variable {0} is not set or not UTF-8")]
    Env(String),
    #[error(
        "credential {name:?} not found: $CREDENTIALS_DIRECTORY is not set (use systemd's LoadCredential=)"
    )]
    NoCredentialsDirectory { name: String },
    #[error("secret from {0} is empty")]
    Empty(String),
}

impl SecretSource {
    pub fn load(&self) -> Result<Secret, SecretError> {
        let (text, origin) = match self {
            Self::File(path) => (read_secret_file(path)?, path.display().to_string()),
            Self::Env(var) => (
                std::env::var(var).map_err(|_| SecretError::Env(var.clone()))?,
                format!("${var}"),
            ),
            Self::Credential(name) => {
                let dir = std::env::var_os("CREDENTIALS_DIRECTORY")
                    .ok_or_else(|| SecretError::NoCredentialsDirectory { name: name.clone() })?;
                let path = Path::new(&dir).join(name);
                (read_secret_file(&path)?, path.display().to_string())
            }
        };
        // A trailing newline from `echo key > file` is not part of the secret.
        let trimmed = text.trim_end_matches(['\n', '\r']);
        if trimmed.trim().is_empty() {
            return Err(SecretError::Empty(origin));
        }
        Ok(Secret::new(trimmed.to_string()))
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

impl SecretSource {
    /// For a secret file readable by every user: what to say about it.
    pub fn exposure_warning(&self) -> Option<String> {
        let Self::File(path) = self else {
            return None;
        };
        let mode = crate::secret::world_readable_mode(path)?;
        Some(format!(
            "secret file {} is readable by every user (mode {mode:04o}); restrict it: chmod o-r (0600, or 0640 with the daemon's group)",
            path.display()
        ))
    }
}

fn read_secret_file(path: &Path) -> Result<String, SecretError> {
    std::fs::read_to_string(path).map_err(|error| SecretError::File {
        path: path.to_path_buf(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, ConfigError> {
        Settings::parse(text, Path::new("/etc/test.toml"))
    }

    fn key_of(text: &str) -> String {
        let err = parse(text).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("/etc/test.toml"), "{message}");
        err.key().map(str::to_string).unwrap_or(message)
    }

    #[test]
    fn empty_file_gives_documented_defaults() {
        let s = parse("").unwrap();
        assert!(s.provider.is_none());
        assert_eq!(
            s.database.path,
            PathBuf::from("/var/lib/dnssec-warden/state.db")
        );
        assert_eq!(s.dns.port, 53);
        assert_eq!(s.dns.root_hints.len(), 26);
        assert_eq!(s.dns.validating_resolvers.len(), 2);
        assert_eq!(s.timing.poll_waiting, Duration::from_secs(300));
        assert_eq!(s.timing.poll_active, Duration::from_secs(3600));
        assert_eq!(s.timing.ds_overdue_after, Duration::from_secs(86_400));
        assert_eq!(s.zones, ZoneSelection::Names(vec![]));
    }

    #[test]
    fn errors_name_the_key() {
        assert_eq!(
            key_of("[timing]\npoll_waiting = \"5x\""),
            "timing.poll_waiting"
        );
        assert_eq!(
            key_of("[timing]\npoll_active = \"0s\""),
            "timing.poll_active"
        );
        assert_eq!(key_of("[dns]\nport = 0"), "dns.port");
        assert_eq!(key_of("[dns]\nport = 70000"), "dns.port");
        assert_eq!(
            key_of("[dns]\nroot_hints = [\"1.2.3.4\", \"x\"]"),
            "dns.root_hints[1]"
        );
        assert_eq!(key_of("[zones]\nnames = [\"a..b\"]"), "zones.names[0]");
        assert_eq!(
            key_of("[zones]\nnames = [\"a.b\", \"A.b.\"]"),
            "zones.names[1]"
        );
        assert_eq!(
            key_of("[zones]\nnames = [\"a.b\"]\nall = true"),
            "zones.all"
        );
        assert_eq!(
            key_of("[provider]\nbase_url = \"ftp://x\"\napi_key_env = \"K\""),
            "provider.base_url"
        );
        assert_eq!(key_of("[provider]\n"), "provider.api_key_file");
        assert_eq!(
            key_of("[provider]\napi_key_env = \"K\"\napi_key_file = \"/k\""),
            "provider.api_key_file"
        );
        assert_eq!(key_of("[provider]\nusername = \"u\""), "provider.username");
    }

    #[test]
    fn alerts_registrar_and_metrics_defaults() {
        let s = parse("").unwrap();
        assert_eq!(s.alerts.renotify_after, Duration::from_secs(86_400));
        assert!(s.alerts.webhooks.is_empty() && s.alerts.execs.is_empty());
        assert!(s.registrar.is_none());
        assert!(s.metrics.is_none());

        let s = parse(
            "[alerts]\nrenotify_after = \"12h\"\n\
             [[alerts.webhook]]\nurl = \"https://hooks.example/T0/secret-token\"\n\
             headers = { Authorization = \"Bearer tok\" }\n\
             [[alerts.webhook]]\nurl = \"http://127.0.0.1:9/x\"\ntimeout = \"2s\"\n\
             max_attempts = 5\nbackoff = \"100ms\"\n\
             [[alerts.exec]]\ncommand = [\"/usr/local/bin/page\", \"--team\", \"dns\"]\n\
             [registrar]\ncommand = [\"/usr/local/bin/registrar-ds\"]\ntimeout = \"2m\"\n\
             [metrics]\nlisten = \"127.0.0.1:9753\"",
        )
        .unwrap();
        assert_eq!(s.alerts.renotify_after, Duration::from_secs(43_200));
        let w = &s.alerts.webhooks;
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].name, "alerts.webhook[0]");
        assert_eq!(w[0].timeout, Duration::from_secs(10));
        assert_eq!(w[0].max_attempts, 3);
        assert_eq!(w[0].backoff, Duration::from_secs(1));
        assert_eq!(
            w[0].headers,
            vec![("Authorization".to_string(), "Bearer tok".to_string())]
        );
        // Neither the URL's token nor a header value is ever printed.
        let debug = format!("{:?}", w[0]);
        assert!(
            !debug.contains("secret-token") && !debug.contains("Bearer"),
            "{debug}"
        );
        assert_eq!(w[1].max_attempts, 5);
        assert_eq!(w[1].backoff, Duration::from_millis(100));
        assert_eq!(s.alerts.execs[0].name, "alerts.exec[0]");
        assert_eq!(s.alerts.execs[0].command.len(), 3);
        assert_eq!(s.alerts.execs[0].timeout, Duration::from_secs(30));
        let r = s.registrar.unwrap();
        assert_eq!(r.command, vec!["/usr/local/bin/registrar-ds".to_string()]);
        assert_eq!(r.timeout, Duration::from_secs(120));
        assert_eq!(
            s.metrics.unwrap().listen,
            "127.0.0.1:9753".parse::<SocketAddr>().unwrap()
        );
        let r = parse("[registrar]\ncommand = [\"/bin/true\"]").unwrap();
        assert_eq!(r.registrar.unwrap().timeout, Duration::from_secs(60));
    }

    #[test]
    fn the_example_documents_the_alert_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
        let example = Settings::load(&path).unwrap();
        let defaults = parse("").unwrap();
        assert_eq!(example.alerts, defaults.alerts);
        assert_eq!(example.registrar, None);
        assert_eq!(example.metrics, None);
    }

    #[test]
    fn alert_errors_name_the_key() {
        assert_eq!(
            key_of("[alerts]\nrenotify_after = \"soon\""),
            "alerts.renotify_after"
        );
        assert_eq!(
            key_of("[[alerts.webhook]]\nurl = \"ftp://x/\""),
            "alerts.webhook[0].url"
        );
        assert_eq!(
            key_of("[[alerts.webhook]]\nurl = \"http://a/\"\n[[alerts.webhook]]\nurl = \"nope\""),
            "alerts.webhook[1].url"
        );
        assert_eq!(
            key_of("[[alerts.webhook]]\nurl = \"http://a/\"\ntimeout = \"0s\""),
            "alerts.webhook[0].timeout"
        );
        assert_eq!(
            key_of("[[alerts.webhook]]\nurl = \"http://a/\"\nmax_attempts = 0"),
            "alerts.webhook[0].max_attempts"
        );
        assert_eq!(
            key_of("[[alerts.webhook]]\nurl = \"http://a/\"\nheaders = { \"bad name\" = \"x\" }"),
            "alerts.webhook[0].headers.bad name"
        );
        assert_eq!(
            key_of("[[alerts.webhook]]\nurl = \"http://a/\"\nheaders = { X-N = 1 }"),
            "alerts.webhook[0].headers.X-N"
        );
        assert_eq!(
            key_of("[[alerts.webhook]]\ntimeout = \"1s\""),
            "alerts.webhook[0]"
        );
        assert_eq!(
            key_of("[[alerts.webhook]]\nurl = \"http://a/\"\nretries = 3"),
            "alerts.webhook[0].retries"
        );
        assert_eq!(
            key_of("[[alerts.exec]]\ncommand = []"),
            "alerts.exec[0].command"
        );
        assert_eq!(
            key_of("[[alerts.exec]]\ncommand = [\"\"]"),
            "alerts.exec[0].command[0]"
        );
        assert_eq!(
            key_of("[[alerts.exec]]\ncommand = [\"/bin/x\"]\ntimeout = \"1\""),
            "alerts.exec[0].timeout"
        );
        assert_eq!(key_of("[registrar]\ncommand = []"), "registrar.command");
        assert_eq!(key_of("[registrar]\ntimeout = \"1s\""), "registrar");
        assert_eq!(
            key_of("[registrar]\ncommand = [\"/x\"]\ntimeout = \"-1s\""),
            "registrar.timeout"
        );
        assert_eq!(
            key_of("[metrics]\nlisten = \"localhost\""),
            "metrics.listen"
        );
        assert_eq!(key_of("[metrics]\nport = 9753"), "metrics.port");
        // A bad URL is reported without echoing it: it may carry a token.
        let err = parse("[[alerts.webhook]]\nurl = \"https//hooks/secret-token\"").unwrap_err();
        assert!(!err.to_string().contains("secret-token"), "{err}");
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = parse("[timing]\npoll_wating = \"5m\"").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("poll_wating"), "{text}");
        assert!(text.contains("timing"), "{text}");
        let err = parse("[provider]\napi_key = \"inline-secret\"").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("api_key"), "{text}");
        assert!(!text.contains("inline-secret"), "{text}");
        let err = parse("[dnz]\nport = 53").unwrap_err();
        assert!(err.to_string().contains("dnz"), "{err}");
    }

    #[test]
    fn syntax_errors_give_a_line() {
        let err = parse("[dns]\nport = = 5").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn login_and_api_key_sources() {
        let s = parse("[provider]\nusername = \"ops@example.com\"\npassword_env = \"PW\"").unwrap();
        assert_eq!(
            s.provider.unwrap().credentials,
            CredentialSource::Login {
                username: "ops@example.com".into(),
                password: SecretSource::Env("PW".into())
            }
        );
        let s = parse("[provider]\napi_key_credential = \"gcore-api-key\"").unwrap();
        assert_eq!(
            s.provider.unwrap().credentials,
            CredentialSource::ApiKey(SecretSource::Credential("gcore-api-key".into()))
        );
    }

    #[test]
    fn secrets_are_read_trimmed_and_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "s3cr3t-value\n").unwrap();
        let secret = SecretSource::File(path.clone()).load().unwrap();
        assert_eq!(secret.expose(), "s3cr3t-value");
        assert!(!format!("{secret:?}").contains("s3cr3t"));
        let creds = Credentials::ApiKey(secret);
        assert!(!format!("{creds:?}").contains("s3cr3t"));

        std::fs::write(&path, "\n").unwrap();
        assert!(matches!(
            SecretSource::File(path).load(),
            Err(SecretError::Empty(_))
        ));
        assert!(matches!(
            SecretSource::File(dir.path().join("missing")).load(),
            Err(SecretError::File { .. })
        ));
    }

    #[test]
    fn zone_names_are_normalised_and_duplicates_found_after() {
        let s = parse("[zones]\nnames = [\"Bücher.example\", \"example.COM.\"]").unwrap();
        let ZoneSelection::Names(names) = s.zones else {
            panic!("names")
        };
        let names: Vec<&str> = names.iter().map(ZoneName::as_str).collect();
        assert_eq!(names, ["xn--bcher-kva.example.", "example.com."]);

        let err =
            parse("[zones]\nnames = [\"bücher.example\", \"xn--bcher-kva.example\"]").unwrap_err();
        assert_eq!(err.key(), Some("zones.names[1]"));
        let text = err.to_string();
        assert!(text.contains("\"bücher.example\""), "{text}");
        assert!(text.contains("\"xn--bcher-kva.example\""), "{text}");
        assert!(text.contains("zones.names[0]"), "{text}");

        for bad in [
            "a/b.example",
            "*.example",
            "127.0.0.1",
            ".",
            "com",
            "a\\u0000b.example",
        ] {
            let err = parse(&format!("[zones]\nnames = [\"{bad}\"]")).unwrap_err();
            assert_eq!(err.key(), Some("zones.names[0]"), "{bad}: {err}");
            assert!(err.to_string().contains("zone name"), "{err}");
        }
    }

    #[test]
    fn relative_paths_are_relative_to_the_file() {
        let s = Settings::parse(
            "[provider]\napi_key_file = \"keys/api-key\"\n\
             [database]\npath = \"state.db\"\n[dns]\ntrust_anchor_file = \"anchors\"",
            Path::new("/etc/dnssec-warden/config.toml"),
        )
        .unwrap();
        assert_eq!(
            s.provider.unwrap().credentials,
            CredentialSource::ApiKey(SecretSource::File("/etc/dnssec-warden/keys/api-key".into()))
        );
        assert_eq!(
            s.database.path,
            PathBuf::from("/etc/dnssec-warden/state.db")
        );
        assert_eq!(
            s.dns.trust_anchor_file,
            Some(PathBuf::from("/etc/dnssec-warden/anchors"))
        );
        let s = Settings::parse(
            "[provider]\nusername = \"u\"\npassword_file = \"../pw\"\n[database]\npath = \"/abs/state.db\"",
            Path::new("/etc/dnssec-warden/config.toml"),
        )
        .unwrap();
        assert_eq!(
            s.provider.unwrap().credentials,
            CredentialSource::Login {
                username: "u".into(),
                password: SecretSource::File("/etc/dnssec-warden/../pw".into()),
            }
        );
        assert_eq!(s.database.path, PathBuf::from("/abs/state.db"));
        // A config named relative to the working directory: its paths are too, alike.
        let s = Settings::parse("[database]\npath = \"s.db\"", Path::new("conf/c.toml")).unwrap();
        assert_eq!(s.database.path, PathBuf::from("conf/s.db"));
        let s = Settings::parse("[database]\npath = \"s.db\"", Path::new("c.toml")).unwrap();
        assert_eq!(s.database.path, PathBuf::from("s.db"));
    }

    #[test]
    fn world_readable_secret_files_are_warned_about_without_the_secret() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "s3cr3t-value\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let source = CredentialSource::ApiKey(SecretSource::File(path.clone()));
        assert!(source.exposure_warnings().is_empty());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let warnings = source.exposure_warnings();
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains(&path.display().to_string()),
            "{warnings:?}"
        );
        assert!(warnings[0].contains("0644"), "{warnings:?}");
        assert!(!warnings[0].contains("s3cr3t"), "{warnings:?}");
        assert!(
            CredentialSource::ApiKey(SecretSource::Env("K".into()))
                .exposure_warnings()
                .is_empty()
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        assert!(parse_duration("5").unwrap_err().contains("unit"));
        assert!(parse_duration("5 m").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn servers() {
        assert_eq!(
            parse_server("1.1.1.1", 53),
            Some("1.1.1.1:53".parse().unwrap())
        );
        assert_eq!(
            parse_server("127.0.0.1:5353", 53),
            Some("127.0.0.1:5353".parse().unwrap())
        );
        assert_eq!(parse_server("::1", 53), Some("[::1]:53".parse().unwrap()));
        assert_eq!(parse_server("nope", 53), None);
    }
}
