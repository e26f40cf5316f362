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
//! Adding a key: one field with its serde attributes in its section's struct (a default,
//! and a `deserialize_with` helper from `de` when the value has a form or a range), and a
//! doc line with the default in `config.example.toml`. Only a rule involving two keys
//! belongs in `CrossChecks`.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use crate::alert::{AlertSettings, ExecSettings, RegistrarSettings, WebhookSettings};
use crate::dns::net::query::{MAX_QPS_PER_SERVER, MAX_QUERIES_PER_SERVER};
use crate::dns::{AddressFamilies, DnsSettings, ObservationBudget};
use crate::lifecycle::Policy;
use crate::lifecycle::parent_way::{DsPathSetting, ParentWay, ParentWays};
use crate::provider::fleet::{ProviderConfig, ProviderOptions};
use crate::provider::gcore::{CredentialSource, ProviderSettings};
use crate::provider::powerdns::PowerDnsSettings;
use crate::secret::SecretSource;
use crate::store::{
    ClusterSettings, DEFAULT_DATABASE_PATH, DEFAULT_LEASE, DatabaseSettings, PostgresSettings,
};
use crate::time::format::positive_duration as duration;
use crate::web::{ProxySettings, TlsFiles, WebSettings};
use crate::zone_name::ZoneName;

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

/// This host's name: the kernel's, or `/etc/hostname` where `/proc/sys` is hidden (the
/// unit's `ProcSubset=pid`), else `localhost`; only what a node name may hold is kept.
fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|h| {
            h.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .take(64)
                .collect::<String>()
        })
        .find(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
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

// ---- the sections whose file form differs from their settings --------------------------

/// `[alerts]`: where alerts go besides the log, and how often an open one is repeated.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
struct AlertsFile {
    #[serde(deserialize_with = "duration")]
    renotify_after: Duration,
    /// The longest wait between two tries of a failing sink (the wait doubles from 5 s).
    #[serde(deserialize_with = "duration")]
    sink_retry_max: Duration,
    /// A sink failing every delivery this long raises `alert_sink_failing`.
    #[serde(deserialize_with = "duration")]
    sink_failing_after: Duration,
    /// `[[alerts.webhook]]`
    #[serde(rename = "webhook")]
    webhooks: Vec<WebhookFile>,
    /// `[[alerts.exec]]`
    #[serde(rename = "exec")]
    execs: Vec<ExecFile>,
}

impl Default for AlertsFile {
    fn default() -> Self {
        let defaults = AlertSettings::default();
        Self {
            renotify_after: defaults.renotify_after,
            sink_retry_max: defaults.sink_retry_max,
            sink_failing_after: defaults.sink_failing_after,
            webhooks: Vec::new(),
            execs: Vec::new(),
        }
    }
}

impl AlertsFile {
    /// The alert sinks' settings, each sink named by the key it came from.
    fn settings(self) -> AlertSettings {
        AlertSettings {
            renotify_after: self.renotify_after,
            sink_retry_max: self.sink_retry_max,
            sink_failing_after: self.sink_failing_after,
            webhooks: (self.webhooks.into_iter().enumerate())
                .map(|(i, w)| WebhookSettings {
                    name: format!("alerts.webhook[{i}]"),
                    url: w.url,
                    headers: w.headers,
                    timeout: w.timeout,
                    max_attempts: w.max_attempts,
                    backoff: w.backoff,
                })
                .collect(),
            execs: (self.execs.into_iter().enumerate())
                .map(|(i, e)| ExecSettings {
                    name: format!("alerts.exec[{i}]"),
                    command: e.command,
                    timeout: e.timeout,
                })
                .collect(),
        }
    }
}

/// One `[[alerts.webhook]]`: a JSON POST with a Slack-compatible `text`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookFile {
    #[serde(deserialize_with = "de::http_url")]
    url: Url,
    /// Extra request headers (an `Authorization` token, say), sorted by name.
    #[serde(default, deserialize_with = "de::headers")]
    headers: Vec<(String, String)>,
    /// Time limit of one attempt.
    #[serde(default = "de::secs::<10>", deserialize_with = "duration")]
    timeout: Duration,
    /// Attempts per notification and tick, the first included.
    #[serde(
        default = "de::int::<3, _>",
        deserialize_with = "de::in_range::<1, 10, _, _>"
    )]
    max_attempts: u32,
    /// Wait before the first retry; doubled for each further one.
    #[serde(default = "de::secs::<1>", deserialize_with = "duration")]
    backoff: Duration,
}

/// One `[[alerts.exec]]`: a command run with the alert in its environment and on stdin.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExecFile {
    #[serde(deserialize_with = "de::command")]
    command: Vec<String>,
    #[serde(default = "de::secs::<30>", deserialize_with = "duration")]
    timeout: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistrarFile {
    #[serde(deserialize_with = "de::command")]
    command: Vec<String>,
    #[serde(default = "de::secs::<60>", deserialize_with = "duration")]
    timeout: Duration,
}

/// The file as written: every section typed; `[provider]` and `[zones]` still hold the
/// keys that are only meaningful together.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct SettingsFile {
    provider: Option<ProviderFile>,
    providers: std::collections::BTreeMap<String, ProviderFile>,
    database: DatabaseFile,
    dns: DnsFile,
    timing: Policy,
    zones: ZonesFile,
    alerts: AlertsFile,
    registrar: Option<RegistrarFile>,
    metrics: MetricsFile,
    cluster: Option<ClusterFile>,
    parents: std::collections::BTreeMap<String, ParentFile>,
    web: WebFile,
}

/// `[web]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebFile {
    #[serde(default, deserialize_with = "de::listen")]
    listen: Option<SocketAddr>,
    users: Option<PathBuf>,
    tls_certificate: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::some_duration")]
    session_lifetime: Option<Duration>,
    #[serde(default, deserialize_with = "de::some_duration")]
    session_idle: Option<Duration>,
    proxy: Option<WebProxyFile>,
}

/// `[web.proxy]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebProxyFile {
    #[serde(deserialize_with = "de::root_hints")]
    addresses: Vec<IpAddr>,
    user_header: String,
    #[serde(default = "viewer")]
    default_role: String,
}

fn viewer() -> String {
    "viewer".to_string()
}

/// `[parents."NAME"]` as written: how the DS reaches that parent zone.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ParentFile {
    #[serde(default)]
    ds_path: DsPathSetting,
    #[serde(default, deserialize_with = "de::some_duration")]
    scan_period: Option<Duration>,
    accepts_first_ds: Option<bool>,
    #[serde(default, deserialize_with = "de::some_duration")]
    first_ds_after: Option<Duration>,
    #[serde(default)]
    call_registrar_hook: bool,
    #[serde(default, deserialize_with = "de::notify_target")]
    notify_target: Option<String>,
    #[serde(default, deserialize_with = "de::some_port")]
    notify_port: Option<u16>,
}

/// `[cluster]` as written: both keys optional.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ClusterFile {
    node: Option<String>,
    #[serde(deserialize_with = "duration")]
    lease: Duration,
}

impl Default for ClusterFile {
    fn default() -> Self {
        Self {
            node: None,
            lease: DEFAULT_LEASE,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricsFile {
    #[serde(default, deserialize_with = "de::listen")]
    listen: Option<SocketAddr>,
}

/// `[provider]` or `[providers.NAME]`: the credentials are several keys of which exactly
/// one source is set.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderFile {
    #[serde(default)]
    kind: ProviderKind,
    /// Gcore's own API when absent; PowerDNS has no default.
    #[serde(default, deserialize_with = "de::some_http_url")]
    base_url: Option<Url>,
    /// PowerDNS only: the `{server_id}` of `/api/v1/servers/{server_id}`.
    #[serde(default, deserialize_with = "de::server_id")]
    server_id: Option<String>,
    #[serde(default, deserialize_with = "de::secret_file")]
    api_key_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::env_name")]
    api_key_env: Option<String>,
    #[serde(default, deserialize_with = "de::credential_name")]
    api_key_credential: Option<String>,
    #[serde(default, deserialize_with = "de::username")]
    username: Option<String>,
    #[serde(default, deserialize_with = "de::secret_file")]
    password_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::env_name")]
    password_env: Option<String>,
    #[serde(default, deserialize_with = "de::credential_name")]
    password_credential: Option<String>,
    #[serde(default = "de::secs::<30>", deserialize_with = "duration")]
    request_timeout: Duration,
    #[serde(
        default = "de::int::<5, _>",
        deserialize_with = "de::in_range::<1, {u64::MAX}, _, _>"
    )]
    max_attempts: u32,
    #[serde(default = "de::secs::<120>", deserialize_with = "duration")]
    retry_budget: Duration,
}

/// `[database]`: `path` or `url`, and the password's source for `url`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DatabaseFile {
    #[serde(default, deserialize_with = "de::some_non_empty_path")]
    path: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::postgres_url")]
    url: Option<Url>,
    #[serde(default, deserialize_with = "de::secret_file")]
    password_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::env_name")]
    password_env: Option<String>,
    #[serde(default, deserialize_with = "de::credential_name")]
    password_credential: Option<String>,
}

/// `kind` of a provider block.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ProviderKind {
    #[default]
    Gcore,
    Powerdns,
}

impl ProviderKind {
    fn name(self) -> &'static str {
        match self {
            Self::Gcore => "gcore",
            Self::Powerdns => "powerdns",
        }
    }
}

/// A provider block's name: what status, check and the alerts print.
fn valid_provider_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
}

fn default_base_url() -> Url {
    Url::parse("https://api.gcore.com").expect("a constant URL")
}

/// `[dns]` as written, the budget's keys beside the others.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct DnsFile {
    #[serde(deserialize_with = "de::root_hints")]
    root_hints: Vec<IpAddr>,
    #[serde(deserialize_with = "de::in_range::<1, 65535, _, _>")]
    port: u16,
    #[serde(deserialize_with = "de::empty_is_none")]
    trust_anchor_file: Option<PathBuf>,
    #[serde(deserialize_with = "de::servers")]
    validating_resolvers: Vec<SocketAddr>,
    #[serde(deserialize_with = "duration")]
    query_timeout: Duration,
    #[serde(deserialize_with = "de::in_range::<1, {u64::MAX}, _, _>")]
    query_attempts: u32,
    #[serde(deserialize_with = "de::in_range::<1, {MAX_QUERIES_PER_SERVER as u64}, _, _>")]
    queries_per_server: usize,
    #[serde(deserialize_with = "de::in_range::<1, {MAX_QPS_PER_SERVER as u64}, _, _>")]
    max_qps_per_server: u32,
    #[serde(deserialize_with = "de::address_families")]
    address_families: AddressFamilies,
    #[serde(deserialize_with = "de::observation_timeout")]
    observation_timeout: Duration,
    #[serde(deserialize_with = "de::in_range::<1, 100_000, _, _>")]
    max_queries_per_observation: u32,
    #[serde(deserialize_with = "de::in_range::<1, 10_000, _, _>")]
    max_host_lookups: u32,
    #[serde(deserialize_with = "de::in_range::<1, 1_000, _, _>")]
    max_ns_per_delegation: usize,
    #[serde(deserialize_with = "de::in_range::<1, 256, _, _>")]
    max_addresses_per_server: usize,
    require_validated_evidence: bool,
}

impl Default for DnsFile {
    fn default() -> Self {
        let defaults = DnsSettings::default();
        let budget = defaults.budget;
        Self {
            root_hints: defaults.root_hints,
            port: defaults.port,
            trust_anchor_file: defaults.trust_anchor_file,
            validating_resolvers: defaults.validating_resolvers,
            query_timeout: defaults.query_timeout,
            query_attempts: defaults.query_attempts,
            queries_per_server: defaults.queries_per_server,
            max_qps_per_server: defaults.max_qps_per_server,
            address_families: defaults.address_families,
            observation_timeout: budget.timeout,
            max_queries_per_observation: budget.max_queries,
            max_host_lookups: budget.max_host_lookups,
            max_ns_per_delegation: budget.max_ns_per_delegation,
            max_addresses_per_server: budget.max_addresses_per_server,
            require_validated_evidence: defaults.require_validated_evidence,
        }
    }
}

impl DnsFile {
    /// The observer's settings, the budget's keys grouped.
    fn settings(self) -> DnsSettings {
        DnsSettings {
            root_hints: self.root_hints,
            port: self.port,
            trust_anchor_file: self.trust_anchor_file,
            validating_resolvers: self.validating_resolvers,
            query_timeout: self.query_timeout,
            query_attempts: self.query_attempts,
            queries_per_server: self.queries_per_server,
            max_qps_per_server: self.max_qps_per_server,
            address_families: self.address_families,
            budget: ObservationBudget {
                timeout: self.observation_timeout,
                max_queries: self.max_queries_per_observation,
                max_host_lookups: self.max_host_lookups,
                max_ns_per_delegation: self.max_ns_per_delegation,
                max_addresses_per_server: self.max_addresses_per_server,
            },
            require_validated_evidence: self.require_validated_evidence,
        }
    }
}

/// `[zones]`: `names` or `all`, never both.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ZonesFile {
    names: Option<Vec<de::ZoneEntry>>,
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

/// What is left after the typed sections: checks across keys, and paths taken relative
/// to the file.
struct CrossChecks {
    file: PathBuf,
}

impl CrossChecks {
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

    fn settings(&self, raw: SettingsFile) -> Result<Settings, ConfigError> {
        let mut dns = raw.dns.settings();
        if !dns
            .root_hints
            .iter()
            .any(|a| dns.address_families.allows(a))
        {
            return Err(self.err(
                "dns.root_hints",
                "no address of an enabled family (dns.address_families)",
            ));
        }
        dns.trust_anchor_file = dns.trust_anchor_file.map(|p| self.path(p));
        let alerts = raw.alerts.settings();
        let require_validated_evidence = dns.require_validated_evidence;
        let parents = self.parents(raw.parents)?;
        let database = self.database(raw.database)?;
        let cluster = self.cluster(raw.cluster, &database, &raw.timing)?;
        Ok(Settings {
            source: self.file.clone(),
            providers: self.providers(raw.provider, raw.providers)?,
            database,
            dns,
            timing: Policy {
                require_validated_evidence,
                parents,
                ..raw.timing
            },
            zones: self.zones(raw.zones)?,
            alerts,
            registrar: raw.registrar.map(|r| RegistrarSettings {
                command: r.command,
                timeout: r.timeout,
            }),
            metrics: raw.metrics.listen.map(|listen| MetricsSettings { listen }),
            cluster,
            web: self.web(raw.web)?,
        })
    }

    /// `[web]`: on with any of `listen`, `users`, `[web.proxy]` (on 127.0.0.1:8440 unless
    /// `listen` says otherwise); a non-loopback address only with TLS; a way to log in.
    fn web(&self, raw: WebFile) -> Result<Option<WebSettings>, ConfigError> {
        if raw.listen.is_none() && raw.users.is_none() && raw.proxy.is_none() {
            return Ok(None);
        }
        let listen = raw.listen.unwrap_or(crate::web::settings::DEFAULT_LISTEN);
        let tls = match (raw.tls_certificate, raw.tls_key) {
            (Some(certificate), Some(key)) => Some(TlsFiles {
                certificate: self.path(certificate),
                key: self.path(key),
            }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(self.err("web.tls_key", "needed with web.tls_certificate"));
            }
            (None, Some(_)) => {
                return Err(self.err("web.tls_certificate", "needed with web.tls_key"));
            }
        };
        if tls.is_none() && !listen.ip().is_loopback() {
            return Err(self.err(
                "web.listen",
                format!(
                    "{listen} is not a loopback address: the console is served there only over TLS (set web.tls_certificate and web.tls_key)"
                ),
            ));
        }
        let proxy = match raw.proxy {
            Some(p) => {
                if !matches!(p.default_role.as_str(), "viewer" | "operator") {
                    return Err(self.err(
                        "web.proxy.default_role",
                        format!("{:?} is not a role: viewer or operator", p.default_role),
                    ));
                }
                let header_ok = !p.user_header.is_empty()
                    && p.user_header
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                if !header_ok {
                    return Err(self.err(
                        "web.proxy.user_header",
                        format!("{:?} is not a header name", p.user_header),
                    ));
                }
                Some(ProxySettings {
                    addresses: p.addresses,
                    user_header: p.user_header.to_ascii_lowercase(),
                    default_role: p.default_role,
                })
            }
            None => None,
        };
        if raw.users.is_none() && proxy.is_none() {
            return Err(self.err(
                "web.users",
                "the console needs a users file (`dnssec-warden web-user NAME` prints a line for it) or [web.proxy]",
            ));
        }
        Ok(Some(WebSettings {
            listen,
            users: raw.users.map(|p| self.path(p)),
            tls,
            proxy,
            session_lifetime: raw
                .session_lifetime
                .unwrap_or(crate::web::settings::DEFAULT_SESSION_LIFETIME),
            session_idle: raw
                .session_idle
                .unwrap_or(crate::web::settings::DEFAULT_SESSION_IDLE),
        }))
    }

    /// `[parents."NAME"]`: each name a zone name, equal names after normalisation once;
    /// a NOTIFY target only with `ds_path = "notify"`.
    fn parents(
        &self,
        raw: std::collections::BTreeMap<String, ParentFile>,
    ) -> Result<ParentWays, ConfigError> {
        let mut ways = ParentWays::default();
        for (name, file) in raw {
            let stem = format!("parents.\"{name}\"");
            let zone = ZoneName::parse_parent(&name).map_err(|e| self.err(&stem, e.to_string()))?;
            if file.ds_path != DsPathSetting::Notify {
                for (key, given) in [
                    ("notify_target", file.notify_target.is_some()),
                    ("notify_port", file.notify_port.is_some()),
                ] {
                    if given {
                        return Err(
                            self.err(&format!("{stem}.{key}"), "only for ds_path = \"notify\"")
                        );
                    }
                }
            }
            let way = ParentWay {
                ds_path: file.ds_path,
                scan_period: file.scan_period,
                accepts_first_ds: file.accepts_first_ds,
                first_ds_after: file.first_ds_after,
                call_registrar_hook: file.call_registrar_hook,
                notify_target: file.notify_target,
                notify_port: file.notify_port.unwrap_or(53),
            };
            let canonical = zone.as_str().to_string();
            if ways.parents.insert(canonical.clone(), way).is_some() {
                return Err(self.err(
                    &stem,
                    format!(
                        "{canonical} is configured twice (names are equal after normalisation)"
                    ),
                ));
            }
        }
        Ok(ways)
    }

    /// `[cluster]`: only beside `database.url`, where it is always in force (defaults).
    fn cluster(
        &self,
        raw: Option<ClusterFile>,
        database: &DatabaseSettings,
        timing: &Policy,
    ) -> Result<Option<ClusterSettings>, ConfigError> {
        if matches!(database, DatabaseSettings::Sqlite { .. }) {
            return match raw {
                Some(_) => Err(self.err(
                    "cluster",
                    "several daemons share a PostgreSQL database (database.url); a SQLite file has one daemon",
                )),
                None => Ok(None),
            };
        }
        let raw = raw.unwrap_or_default();
        let node = match raw.node {
            Some(node) => {
                let ok = !node.is_empty()
                    && node.len() <= 64
                    && node
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
                if !ok {
                    return Err(self.err(
                        "cluster.node",
                        format!(
                            "{node:?} is not a node name: 1-64 letters, digits, '-', '_' or '.'"
                        ),
                    ));
                }
                node
            }
            None => host_name(),
        };
        let lease = raw.lease;
        if lease < Duration::from_secs(1) {
            return Err(self.err("cluster.lease", "must be at least 1s"));
        }
        if lease >= timing.poll_waiting {
            return Err(self.err(
                "cluster.lease",
                format!(
                    "must be shorter than timing.poll_waiting ({}s): a dead daemon's waiting zones would wait longer than their poll",
                    timing.poll_waiting.as_secs_f64()
                ),
            ));
        }
        Ok(Some(ClusterSettings { node, lease }))
    }

    /// Exactly one of `path` and `url`; a password source only with `url`.
    fn database(&self, raw: DatabaseFile) -> Result<DatabaseSettings, ConfigError> {
        let password = self.one_source(
            "database.password",
            raw.password_file,
            raw.password_env,
            raw.password_credential,
        )?;
        match (raw.path, raw.url) {
            (Some(_), Some(_)) => Err(self.err(
                "database.url",
                "set either database.path (SQLite) or database.url (PostgreSQL), not both",
            )),
            (path, None) => {
                if password.is_some() {
                    return Err(self.err(
                        "database.password_file",
                        "a password is only for database.url (PostgreSQL)",
                    ));
                }
                Ok(DatabaseSettings::Sqlite {
                    path: self.path(path.unwrap_or_else(|| DEFAULT_DATABASE_PATH.into())),
                })
            }
            (None, Some(url)) => Ok(DatabaseSettings::Postgres(PostgresSettings {
                url,
                password,
            })),
        }
    }

    /// `[provider]` (named after its kind) and each `[providers.NAME]`.
    fn providers(
        &self,
        legacy: Option<ProviderFile>,
        named: std::collections::BTreeMap<String, ProviderFile>,
    ) -> Result<Vec<ProviderConfig>, ConfigError> {
        let mut all = Vec::new();
        if let Some(raw) = legacy {
            let name = raw.kind.name().to_string();
            if named.contains_key(&name) {
                return Err(self.err(
                    &format!("providers.{name}"),
                    format!(
                        "the name {name:?} is taken by [provider]; give this block another name"
                    ),
                ));
            }
            all.push(ProviderConfig {
                name,
                options: self.provider("provider", raw)?,
            });
        }
        for (name, raw) in named {
            let stem = format!("providers.{name}");
            if !valid_provider_name(&name) {
                return Err(self.err(
                    &stem,
                    "a provider's name is 1 to 32 of a-z, 0-9, '-' and '_', starting with a letter or digit",
                ));
            }
            all.push(ProviderConfig {
                options: self.provider(&stem, raw)?,
                name,
            });
        }
        Ok(all)
    }

    /// One provider block. Exactly one credential source: for Gcore an API key, or a
    /// username with a password; for PowerDNS an API key.
    fn provider(&self, stem: &str, raw: ProviderFile) -> Result<ProviderOptions, ConfigError> {
        let key = |k: &str| format!("{stem}.{k}");
        let api_key = self.one_source(
            &key("api_key"),
            raw.api_key_file,
            raw.api_key_env,
            raw.api_key_credential,
        )?;
        let password = self.one_source(
            &key("password"),
            raw.password_file,
            raw.password_env,
            raw.password_credential,
        )?;
        if raw.kind == ProviderKind::Powerdns {
            if raw.username.is_some() || password.is_some() {
                return Err(self.err(
                    &key("username"),
                    "PowerDNS takes an API key (api_key_file, api_key_env or api_key_credential), not a login",
                ));
            }
            let Some(api_key) = api_key else {
                return Err(self.err(
                    &key("api_key_file"),
                    "no credentials: set api_key_file, api_key_env or api_key_credential (the api-key of pdns.conf)",
                ));
            };
            let Some(base_url) = raw.base_url else {
                return Err(self.err(
                    &key("base_url"),
                    "is missing: PowerDNS's webserver, e.g. \"http://127.0.0.1:8081/\"",
                ));
            };
            return Ok(ProviderOptions::PowerDns {
                settings: PowerDnsSettings {
                    base_url,
                    server_id: raw.server_id.unwrap_or_else(|| "localhost".into()),
                    request_timeout: raw.request_timeout,
                    max_attempts: raw.max_attempts,
                    retry_budget: raw.retry_budget,
                },
                api_key,
            });
        }
        if raw.server_id.is_some() {
            return Err(self.err(&key("server_id"), "applies to kind = \"powerdns\" only"));
        }
        let credentials = match (api_key, raw.username, password) {
            (Some(key), None, None) => CredentialSource::ApiKey(key),
            (None, Some(username), Some(password)) => {
                CredentialSource::Login { username, password }
            }
            (None, Some(_), None) => {
                return Err(self.err(
                    &key("username"),
                    "needs password_file, password_env or password_credential",
                ));
            }
            (None, None, Some(_)) => {
                return Err(self.err(&key("username"), "is missing (a password is set)"));
            }
            (Some(_), _, _) => {
                return Err(self.err(
                    &key("api_key_file"),
                    "give either an API key or username + password, not both",
                ));
            }
            (None, None, None) => {
                return Err(self.err(
                    &key("api_key_file"),
                    "no credentials: set api_key_file, api_key_env, api_key_credential, or username with a password source",
                ));
            }
        };
        Ok(ProviderOptions::Gcore(ProviderSettings {
            base_url: raw.base_url.unwrap_or_else(default_base_url),
            credentials,
            request_timeout: raw.request_timeout,
            max_attempts: raw.max_attempts,
            retry_budget: raw.retry_budget,
        }))
    }

    /// At most one of the three ways to give a secret.
    fn one_source(
        &self,
        stem: &str,
        file: Option<PathBuf>,
        env: Option<String>,
        credential: Option<String>,
    ) -> Result<Option<SecretSource>, ConfigError> {
        let mut found: Vec<SecretSource> = [
            file.map(|p| SecretSource::File(self.path(p))),
            env.map(SecretSource::Env),
            credential.map(SecretSource::Credential),
        ]
        .into_iter()
        .flatten()
        .collect();
        if found.len() > 1 {
            return Err(self.err(
                &format!("{stem}_file"),
                format!("set only one of {stem}_file, {stem}_env, {stem}_credential"),
            ));
        }
        Ok(found.pop())
    }

    /// `names` or `all`; duplicates are found after normalisation: `bücher.example` and
    /// `xn--bcher-kva.example` are one zone.
    fn zones(&self, raw: ZonesFile) -> Result<ZoneSelection, ConfigError> {
        match (raw.names, raw.all) {
            (Some(_), Some(true)) => Err(self.err(
                "zones.all",
                "set either zones.names or zones.all = true, not both",
            )),
            (None, Some(true)) => Ok(ZoneSelection::All),
            (Some(names), _) => {
                for (i, entry) in names.iter().enumerate() {
                    if let Some(first) = names[..i].iter().position(|e| e.zone == entry.zone) {
                        return Err(self.err(
                            &format!("zones.names[{i}]"),
                            format!(
                                "{:?} is the same zone as {:?} (zones.names[{first}]): both are {}",
                                entry.text, names[first].text, entry.zone
                            ),
                        ));
                    }
                }
                Ok(ZoneSelection::Names(
                    names.into_iter().map(|e| e.zone).collect(),
                ))
            }
            (None, _) => Ok(ZoneSelection::Names(Vec::new())),
        }
    }
}

/// `IP`, `IP:port` or `[IPv6]:port`.
pub fn parse_server(text: &str, default_port: u16) -> Option<SocketAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, default_port));
    }
    text.parse::<SocketAddr>().ok()
}

/// The `deserialize_with` helpers: each one type of value, and what is wrong with it on
/// its own. The key is added by `serde_path_to_error`.
mod de {
    use std::fmt;
    use std::net::{IpAddr, SocketAddr};
    use std::path::PathBuf;
    use std::time::Duration;

    use serde::de::{DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
    use serde::{Deserialize, Deserializer};
    use url::Url;

    use crate::dns::AddressFamilies;
    use crate::dns::net::budget::MAX_OBSERVATION_TIMEOUT;
    use crate::zone_name::ZoneName;

    /// An optional positive duration (`"1d"`).
    pub fn some_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        super::duration(d).map(Some)
    }

    /// A port, 1 to 65535.
    pub fn some_port<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
        let port = u64::deserialize(d)?;
        match u16::try_from(port) {
            Ok(p) if p > 0 => Ok(Some(p)),
            _ => Err(D::Error::custom("must be a port, 1 to 65535")),
        }
    }

    /// A NOTIFY target: an IP address, or a host name (normalised as a zone name).
    pub fn notify_target<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let text = String::deserialize(d)?;
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(Some(ip.to_string()));
        }
        ZoneName::parse(&text)
            .map(|name| Some(name.as_str().to_string()))
            .map_err(|e| D::Error::custom(format!("not an address or a host name: {e}")))
    }

    pub fn secs<const N: u64>() -> Duration {
        Duration::from_secs(N)
    }

    pub fn int<const N: u64, T: TryFrom<u64> + Default>() -> T {
        T::try_from(N).unwrap_or_default()
    }

    /// An integer in `MIN..=MAX` (`MAX = u64::MAX`: no upper bound).
    pub fn in_range<'de, const MIN: u64, const MAX: u64, D, T>(d: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de> + Copy + TryInto<u64>,
    {
        let value = T::deserialize(d)?;
        match value.try_into() {
            Ok(v) if (MIN..=MAX).contains(&v) => Ok(value),
            _ if MAX == u64::MAX => Err(D::Error::custom(format!("must be at least {MIN}"))),
            _ => Err(D::Error::custom(format!("must be {MIN} to {MAX}"))),
        }
    }

    /// `dns.observation_timeout`: at most [`MAX_OBSERVATION_TIMEOUT`].
    pub fn observation_timeout<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let value = super::duration(d)?;
        if value > MAX_OBSERVATION_TIMEOUT {
            return Err(D::Error::custom(format!(
                "must be at most {}s (the engine abandons a step after 120s)",
                MAX_OBSERVATION_TIMEOUT.as_secs()
            )));
        }
        Ok(value)
    }

    /// `dns.address_families`: `["ipv4", "ipv6"]`, at least one of them.
    pub fn address_families<'de, D: Deserializer<'de>>(d: D) -> Result<AddressFamilies, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "lowercase")]
        enum Family {
            Ipv4,
            Ipv6,
        }
        let families = Vec::<Family>::deserialize(d)?;
        let has = |f: fn(&Family) -> bool| families.iter().any(f);
        let out = AddressFamilies {
            ipv4: has(|f| matches!(f, Family::Ipv4)),
            ipv6: has(|f| matches!(f, Family::Ipv6)),
        };
        if !out.ipv4 && !out.ipv6 {
            return Err(D::Error::custom("needs \"ipv4\", \"ipv6\" or both"));
        }
        Ok(out)
    }

    /// An http:// or https:// URL with a host. It may hold a token (a Slack webhook): the
    /// message says what is wrong and never echoes it, as `Url`'s own serde impl would.
    pub fn http_url<'de, D: Deserializer<'de>>(d: D) -> Result<Url, D::Error> {
        let text = String::deserialize(d)?;
        let url = Url::parse(&text).map_err(|e| D::Error::custom(format!("not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(D::Error::custom(
                "must be an http:// or https:// URL with a host",
            ));
        }
        Ok(url)
    }

    /// [`http_url`] for an optional key.
    pub fn some_http_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Url>, D::Error> {
        http_url(d).map(Some)
    }

    /// `server_id` of a PowerDNS block: one path segment.
    pub fn server_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
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

    /// `metrics.listen`: `IP:port`. Parsed here rather than by serde's own impl, whose
    /// message ("invalid socket address syntax") would lose the value and the form.
    pub fn listen<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map(Some).map_err(|_| {
            D::Error::custom(format!("{text:?} is not IP:port (e.g. \"127.0.0.1:9753\")"))
        })
    }

    /// `dns.root_hints`: IP addresses, at least one (each named by its value when wrong,
    /// which serde's own impl does not).
    pub fn root_hints<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<IpAddr>, D::Error> {
        struct Ip(IpAddr);
        impl<'de> Deserialize<'de> for Ip {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse()
                    .map(Ip)
                    .map_err(|_| D::Error::custom(format!("{text:?} is not an IP address")))
            }
        }
        let hints: Vec<IpAddr> = Vec::<Ip>::deserialize(d)?
            .into_iter()
            .map(|ip| ip.0)
            .collect();
        if hints.is_empty() {
            return Err(D::Error::custom("needs at least one address"));
        }
        Ok(hints)
    }

    /// `dns.validating_resolvers`: `IP`, `IP:port` or `[IPv6]:port`, port 53 by default.
    pub fn servers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SocketAddr>, D::Error> {
        struct Server(SocketAddr);
        impl<'de> Deserialize<'de> for Server {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                super::parse_server(&text, 53).map(Server).ok_or_else(|| {
                    D::Error::custom(format!(
                        "{text:?} is not an address (IP or IP:port, [v6]:port)"
                    ))
                })
            }
        }
        Ok(Vec::<Server>::deserialize(d)?
            .into_iter()
            .map(|s| s.0)
            .collect())
    }

    /// `""` is no path (`dns.trust_anchor_file`: the built-in root anchor).
    pub fn empty_is_none<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        let path = PathBuf::deserialize(d)?;
        Ok((!path.as_os_str().is_empty()).then_some(path))
    }

    pub fn non_empty_path<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        let path = PathBuf::deserialize(d)?;
        if path.as_os_str().is_empty() {
            return Err(D::Error::custom("is empty"));
        }
        Ok(path)
    }

    pub fn some_non_empty_path<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<PathBuf>, D::Error> {
        non_empty_path(d).map(Some)
    }

    /// A PostgreSQL URL without a password: the password comes from `password_file`,
    /// `password_env` or `password_credential`, so that the file can be shown and logged.
    pub fn postgres_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Url>, D::Error> {
        let text = String::deserialize(d)?;
        // The text is never echoed back: it might hold a password.
        let url = Url::parse(&text).map_err(|e| D::Error::custom(format!("is not a URL: {e}")))?;
        if !matches!(url.scheme(), "postgres" | "postgresql") {
            return Err(D::Error::custom(
                "must be a postgres:// or postgresql:// URL",
            ));
        }
        if url.password().is_some() {
            return Err(D::Error::custom(
                "holds a password: put it in database.password_file, password_env or password_credential instead",
            ));
        }
        Ok(Some(url))
    }

    pub fn secret_file<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        non_empty_path(d).map(Some)
    }

    pub fn env_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let var = String::deserialize(d)?;
        if var.is_empty() || var.contains('=') {
            return Err(D::Error::custom("is not a variable name"));
        }
        Ok(Some(var))
    }

    pub fn credential_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let name = String::deserialize(d)?;
        if name.is_empty() || name.contains('/') {
            return Err(D::Error::custom("must be a credential name without '/'"));
        }
        Ok(Some(name))
    }

    pub fn username<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let name = String::deserialize(d)?;
        if name.trim().is_empty() {
            return Err(D::Error::custom("is empty"));
        }
        Ok(Some(name))
    }

    /// A command line: at least the program (`command[0]`, not blank), then its arguments.
    pub fn command<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        struct Argv;
        struct Program;
        impl<'de> DeserializeSeed<'de> for Program {
            type Value = String;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
                let program = String::deserialize(d)?;
                if program.trim().is_empty() {
                    return Err(D::Error::custom("the program must not be empty"));
                }
                Ok(program)
            }
        }
        impl<'de> Visitor<'de> for Argv {
            type Value = Vec<String>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a command line: [\"/path/to/program\", \"arg\", ...]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
                let Some(program) = seq.next_element_seed(Program)? else {
                    return Err(A::Error::custom(
                        "must name a program: [\"/path/to/program\", \"arg\", ...]",
                    ));
                };
                let mut argv = vec![program];
                while let Some(arg) = seq.next_element()? {
                    argv.push(arg);
                }
                Ok(argv)
            }
        }
        d.deserialize_seq(Argv)
    }

    /// HTTP headers, `{ Name = "value" }`, sorted by name. The value's check runs as the
    /// value is read, so the error's key is `headers.<Name>`.
    pub fn headers<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
        struct Headers;
        struct Value<'a>(&'a str);
        impl<'de> DeserializeSeed<'de> for Value<'_> {
            type Value = String;
            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
                if reqwest::header::HeaderName::from_bytes(self.0.as_bytes()).is_err() {
                    return Err(D::Error::custom("not a valid HTTP header name"));
                }
                let value = String::deserialize(d)?;
                if reqwest::header::HeaderValue::from_str(&value).is_err() {
                    return Err(D::Error::custom(
                        "not a valid HTTP header value (control characters?)",
                    ));
                }
                Ok(value)
            }
        }
        impl<'de> Visitor<'de> for Headers {
            type Value = Vec<(String, String)>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of header names and values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    let value = map.next_value_seed(Value(&name))?;
                    out.push((name, value));
                }
                out.sort();
                Ok(out)
            }
        }
        d.deserialize_map(Headers)
    }

    /// One of `zones.names`: the name as written (for messages) and its canonical form.
    #[derive(Debug)]
    pub struct ZoneEntry {
        pub text: String,
        pub zone: ZoneName,
    }

    impl<'de> Deserialize<'de> for ZoneEntry {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let text = String::deserialize(d)?;
            let zone = ZoneName::parse(&text).map_err(D::Error::custom)?;
            Ok(Self { text, zone })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::gcore::Credentials;
    use crate::secret::SecretError;

    fn parse(text: &str) -> Result<Settings, ConfigError> {
        Settings::parse(text, Path::new("/etc/test.toml"))
    }

    fn key_of(text: &str) -> String {
        let err = parse(text).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("/etc/test.toml"), "{message}");
        err.key().map(str::to_string).unwrap_or(message)
    }

    /// Issue 36: named provider blocks beside the old `[provider]`, each with its kind.
    #[test]
    fn provider_blocks_are_named_and_typed() {
        let s = parse(
            "[provider]\napi_key_env = \"K\"\n\
             [providers.pdns-main]\nkind = \"powerdns\"\nbase_url = \"http://127.0.0.1:8081/\"\n\
             api_key_file = \"/etc/dnssec-warden/pdns-key\"\n\
             [providers.other]\nkind = \"gcore\"\nbase_url = \"https://api.example.net\"\n\
             username = \"u\"\npassword_env = \"P\"\n",
        )
        .unwrap();
        let names: Vec<&str> = s.providers.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["gcore", "other", "pdns-main"]);
        match &s.providers[2].options {
            ProviderOptions::PowerDns { settings, api_key } => {
                assert_eq!(settings.base_url.as_str(), "http://127.0.0.1:8081/");
                assert_eq!(settings.server_id, "localhost");
                assert_eq!(
                    *api_key,
                    SecretSource::File("/etc/dnssec-warden/pdns-key".into())
                );
            }
            other => panic!("{other:?}"),
        }
        let other = s.providers[1].gcore().unwrap();
        assert_eq!(other.base_url.as_str(), "https://api.example.net/");
        // `[provider]` alone is the one Gcore account it always was.
        let s = parse("[provider]\napi_key_env = \"K\"").unwrap();
        assert_eq!(s.providers.len(), 1);
        assert_eq!(s.providers[0].name, "gcore");
        assert_eq!(
            s.providers[0].gcore().unwrap().base_url.as_str(),
            "https://api.gcore.com/"
        );
    }

    #[test]
    fn a_wrong_provider_block_names_its_key() {
        let pdns = "[providers.p]\nkind = \"powerdns\"\n";
        for (text, key, words) in [
            (
                format!("{pdns}api_key_env = \"K\""),
                "providers.p.base_url",
                "is missing",
            ),
            (
                format!("{pdns}base_url = \"http://127.0.0.1:1/\""),
                "providers.p.api_key_file",
                "no credentials",
            ),
            (
                format!(
                    "{pdns}base_url = \"http://127.0.0.1:1/\"\nusername = \"u\"\npassword_env = \"P\""
                ),
                "providers.p.username",
                "not a login",
            ),
            (
                format!(
                    "{pdns}base_url = \"http://127.0.0.1:1/\"\napi_key_env = \"K\"\nserver_id = \"a/b\""
                ),
                "providers.p.server_id",
                "server id",
            ),
            (
                "[providers.g]\napi_key_env = \"K\"\nserver_id = \"localhost\"".into(),
                "providers.g.server_id",
                "powerdns",
            ),
            (
                "[providers.g]\nkind = \"bind\"\napi_key_env = \"K\"".into(),
                "providers.g.kind",
                "powerdns",
            ),
            (
                "[providers.Big]\napi_key_env = \"K\"".into(),
                "providers.Big",
                "a-z",
            ),
            (
                "[provider]\napi_key_env = \"K\"\n[providers.gcore]\napi_key_env = \"L\"".into(),
                "providers.gcore",
                "taken by [provider]",
            ),
        ] {
            let err = parse(&text).unwrap_err();
            assert_eq!(err.key(), Some(key), "{text}: {err}");
            assert!(err.to_string().contains(words), "{text}: {err}");
        }
    }

    #[test]
    fn a_wrong_parent_block_names_its_key() {
        for (text, key, words) in [
            (
                "[parents.\"ch.\"]\nds_path = \"carrier-pigeon\"",
                "parents.\"ch.\".ds_path",
                "unknown variant",
            ),
            (
                "[parents.\"ch.\"]\nscan_period = \"daily\"",
                "parents.\"ch.\".scan_period",
                "",
            ),
            (
                "[parents.\"ch.\"]\nsurprise = 1",
                "parents.\"ch.\".surprise",
                "unknown field",
            ),
            (
                "[parents.ch]\naccepts_first_ds = \"yes\"",
                "parents.ch.accepts_first_ds",
                "",
            ),
            (
                "[parents.\"ch.\"]\nnotify_target = \"registry.ch.\"",
                "parents.\"ch.\".notify_target",
                "only for ds_path = \"notify\"",
            ),
            (
                "[parents.\"ch.\"]\nds_path = \"notify\"\nnotify_target = \"bad name!\"",
                "parents.\"ch.\".notify_target",
                "not an address or a host name",
            ),
            (
                "[parents.\"ch.\"]\nds_path = \"notify\"\nnotify_port = 70000",
                "parents.\"ch.\".notify_port",
                "1 to 65535",
            ),
            (
                "[parents.\"bad name\"]\nds_path = \"registrar\"",
                "parents.\"bad name\"",
                "",
            ),
            (
                "[parents.CH]\nds_path = \"registrar\"\n[parents.\"ch.\"]\nds_path = \"cds-scan\"",
                "parents.\"ch.\"",
                "configured twice",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.key(), Some(key), "{text}: {err}");
            assert!(err.to_string().contains(words), "{text}: {err}");
        }
        // Good: normalised names, defaults filled in.
        let s = parse(
            "[parents.CH]\nds_path = \"cds-scan\"\nscan_period = \"2d\"\n\
             [parents.\"test.\"]\nds_path = \"notify\"\nnotify_target = \"Registry.Test\"\n",
        )
        .unwrap();
        let ch = &s.timing.parents.parents["ch."];
        assert_eq!(ch.scan_period, Some(Duration::from_secs(2 * 86_400)));
        let test = &s.timing.parents.parents["test."];
        assert_eq!(test.notify_target.as_deref(), Some("registry.test."));
        assert_eq!(test.notify_port, 53);
    }

    #[test]
    fn empty_file_gives_documented_defaults() {
        let s = parse("").unwrap();
        assert!(s.providers.is_empty());
        assert_eq!(
            s.database.sqlite_path(),
            Some(Path::new("/var/lib/dnssec-warden/state.db"))
        );
        assert_eq!(s.dns.port, 53);
        assert_eq!(s.dns.root_hints.len(), 26);
        assert_eq!(s.dns.validating_resolvers.len(), 2);
        assert_eq!(s.timing.poll_waiting, Duration::from_secs(300));
        assert_eq!(s.timing.poll_active, Duration::from_secs(3600));
        assert_eq!(s.timing.ds_overdue_after, Duration::from_secs(86_400));
        assert_eq!(s.zones, ZoneSelection::Names(vec![]));
        // One Default impl per section: the lifecycle's for [timing], the settings' own.
        assert_eq!(s.timing, Policy::default());
        assert_eq!(s.dns, DnsSettings::default());
        assert_eq!(s.dns.trust_anchor_file, None);
        assert_eq!(s.alerts, AlertSettings::default());
        assert_eq!(s.database, DatabaseSettings::default());
    }

    /// Each value is checked as it is deserialized into its type, and the error still
    /// names its key.
    #[test]
    fn typed_values_fail_at_their_key() {
        for (text, key, says) in [
            (
                "[timing]\nretry_base = 5",
                "timing.retry_base",
                "expected a string",
            ),
            (
                "[timing]\nretry_base = \"5 s\"",
                "timing.retry_base",
                "unknown unit",
            ),
            (
                "[dns]\naddress_families = [\"ipv5\"]",
                "dns.address_families[0]",
                "`ipv5`",
            ),
            (
                "[dns]\naddress_families = []",
                "dns.address_families",
                "ipv4",
            ),
            ("[dns]\nroot_hints = []", "dns.root_hints", "at least one"),
            (
                "[dns]\nroot_hints = [\"::1\"]\naddress_families = [\"ipv4\"]",
                "dns.root_hints",
                "no address of an enabled family",
            ),
            (
                "[dns]\nquery_attempts = 0",
                "dns.query_attempts",
                "at least 1",
            ),
            (
                "[dns]\nmax_host_lookups = 10001",
                "dns.max_host_lookups",
                "1 to 10000",
            ),
            ("[database]\npath = \"\"", "database.path", "is empty"),
            (
                "[provider]\napi_key_env = \"A=B\"",
                "provider.api_key_env",
                "variable name",
            ),
            (
                "[provider]\napi_key_credential = \"a/b\"",
                "provider.api_key_credential",
                "without '/'",
            ),
            (
                "[provider]\nusername = \" \"\npassword_env = \"P\"",
                "provider.username",
                "is empty",
            ),
            (
                "[provider]\napi_key_env = \"K\"\nmax_attempts = 0",
                "provider.max_attempts",
                "at least 1",
            ),
            (
                "[provider]\napi_key_env = \"K\"\nretry_budget = \"0s\"",
                "provider.retry_budget",
                "longer than zero",
            ),
            (
                "[provider]\napi_key_env = \"K\"\napi_key_credential = \"k\"",
                "provider.api_key_file",
                "only one of",
            ),
            (
                "[[alerts.webhook]]\nurl = \"http://a/\"\nheaders = { X-N = 1 }",
                "alerts.webhook[0].headers.X-N",
                "expected a string",
            ),
            (
                "[[alerts.webhook]]\nurl = \"http://a/\"\nheaders = { X = \"a\\u0001\" }",
                "alerts.webhook[0].headers.X",
                "header value",
            ),
            (
                "[registrar]\ncommand = \"/bin/x\"",
                "registrar.command",
                "command line",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.key(), Some(key), "{text}: {err}");
            assert!(err.to_string().contains(says), "{text}: {err}");
        }
        let s =
            parse("[[alerts.webhook]]\nurl = \"http://a/\"\nheaders = { b = \"2\", A = \"1\" }")
                .unwrap();
        assert_eq!(
            s.alerts.webhooks[0].headers,
            [
                ("A".to_string(), "1".to_string()),
                ("b".to_string(), "2".to_string())
            ]
        );
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

    /// `[cluster]` is in force with `database.url` (defaults filled in) and refused with a
    /// SQLite file; a bad node name or lease is named.
    #[test]
    fn cluster_goes_with_postgres_only() {
        let s = parse("[database]\nurl = \"postgres://h/d\"").unwrap();
        let cluster = s.cluster.expect("always with a URL");
        assert_eq!(cluster.lease, DEFAULT_LEASE);
        assert!(!cluster.node.is_empty());
        let s = parse(
            "[database]\nurl = \"postgres://h/d\"\n[cluster]\nnode = \"ops-1.dc2\"\nlease = \"10s\"",
        )
        .unwrap();
        assert_eq!(
            s.cluster,
            Some(ClusterSettings {
                node: "ops-1.dc2".into(),
                lease: Duration::from_secs(10)
            })
        );
        assert!(parse("").unwrap().cluster.is_none());
        for (text, key, says) in [
            ("[cluster]\nnode = \"a\"", "cluster", "PostgreSQL"),
            (
                "[database]\nurl = \"postgres://h/d\"\n[cluster]\nnode = \"a b\"",
                "cluster.node",
                "not a node name",
            ),
            (
                "[database]\nurl = \"postgres://h/d\"\n[cluster]\nlease = \"500ms\"",
                "cluster.lease",
                "at least 1s",
            ),
            (
                "[database]\nurl = \"postgres://h/d\"\n[timing]\npoll_waiting = \"20s\"\n[cluster]\nlease = \"30s\"",
                "cluster.lease",
                "shorter than timing.poll_waiting",
            ),
            (
                "[database]\nurl = \"postgres://h/d\"\n[cluster]\nleases = \"3s\"",
                "cluster.leases",
                "unknown",
            ),
        ] {
            let err = parse(text).unwrap_err();
            let message = err.to_string();
            assert_eq!(err.key(), Some(key), "{text}: {message}");
            assert!(message.contains(says), "{text}: {message}");
        }
    }

    /// `path` or `url`, never both; the URL's password only from a secret source, never
    /// in the URL, in `Debug` or in an error.
    #[test]
    fn database_is_a_file_or_a_postgres_url() {
        let s = parse("[database]\npath = \"state.db\"").unwrap();
        assert_eq!(s.database.sqlite_path(), Some(Path::new("/etc/state.db")));
        let s = parse(
            "[database]\nurl = \"postgres://warden@db.example:5433/warden?sslmode=require\"\n\
             password_file = \"pg-password\"",
        )
        .unwrap();
        let DatabaseSettings::Postgres(pg) = &s.database else {
            panic!("{:?}", s.database);
        };
        assert_eq!(pg.url.host_str(), Some("db.example"));
        assert_eq!(
            pg.password,
            Some(SecretSource::File("/etc/pg-password".into()))
        );
        assert_eq!(s.database.sqlite_path(), None);
        for (source, expected) in [
            (
                "password_env = \"PGPASS\"",
                SecretSource::Env("PGPASS".into()),
            ),
            (
                "password_credential = \"pg\"",
                SecretSource::Credential("pg".into()),
            ),
        ] {
            let s = parse(&format!("[database]\nurl = \"postgres://h/d\"\n{source}")).unwrap();
            assert!(
                matches!(&s.database, DatabaseSettings::Postgres(pg) if pg.password == Some(expected.clone())),
                "{source}"
            );
        }
        // No password source: peer or trust authentication, a unix socket.
        let s = parse("[database]\nurl = \"postgresql:///warden?host=/run/postgresql\"").unwrap();
        assert!(matches!(&s.database, DatabaseSettings::Postgres(pg) if pg.password.is_none()));

        for (text, key, says) in [
            (
                "[database]\npath = \"a.db\"\nurl = \"postgres://h/d\"",
                "database.url",
                "not both",
            ),
            (
                "[database]\nurl = \"mysql://h/d\"",
                "database.url",
                "postgres://",
            ),
            (
                "[database]\nurl = \"not a url\"",
                "database.url",
                "is not a URL",
            ),
            (
                "[database]\nurl = \"postgres://u:hunter2@h/d\"",
                "database.url",
                "password_file",
            ),
            (
                "[database]\nurl = \"postgres://h/d\"\npassword_env = \"A\"\npassword_file = \"/p\"",
                "database.password_file",
                "only one of",
            ),
            (
                "[database]\npassword_env = \"A\"",
                "database.password_file",
                "only for database.url",
            ),
            (
                "[database]\nurl = \"postgres://h/d\"\npassword_env = \"A=B\"",
                "database.password_env",
                "variable name",
            ),
            ("[database]\npath = \"\"", "database.path", "is empty"),
        ] {
            let err = parse(text).unwrap_err();
            let message = err.to_string();
            assert_eq!(err.key(), Some(key), "{text}: {message}");
            assert!(message.contains(says), "{text}: {message}");
            assert!(!message.contains("hunter2"), "{message}");
        }
        let s = parse("[database]\nurl = \"postgres://warden@h/d\"\npassword_env = \"P\"").unwrap();
        let debug = format!("{s:?}");
        // The settings say where the password lives, never what it is.
        assert!(debug.contains("password: Some(Env(\"P\"))"), "{debug}");
        assert_eq!(s.database.describe(), "postgres://warden@h/d");
    }

    #[test]
    fn the_web_console_is_off_unless_listen_and_refuses_what_would_expose_it() {
        assert_eq!(parse("").unwrap().web, None);
        assert_eq!(parse("[web]").unwrap().web, None);
        let s = parse("[web]\nusers = \"web-users\"").unwrap();
        let web = s.web.unwrap();
        assert_eq!(web.listen, "127.0.0.1:8440".parse::<SocketAddr>().unwrap());
        // Relative to the file, as every path in it.
        assert_eq!(web.users, Some(PathBuf::from("/etc/web-users")));
        assert_eq!(web.tls, None);
        assert_eq!(web.session_lifetime, Duration::from_secs(8 * 3600));
        assert_eq!(web.session_idle, Duration::from_secs(3600));
        let s = parse(
            "[web]\nlisten = \"[::]:8443\"\nusers = \"/u\"\ntls_certificate = \"c.pem\"\n\
             tls_key = \"k.pem\"\nsession_lifetime = \"1h\"\nsession_idle = \"10m\"\n\
             [web.proxy]\naddresses = [\"127.0.0.1\"]\nuser_header = \"X-Remote-User\"",
        )
        .unwrap();
        let web = s.web.unwrap();
        let tls = web.tls.unwrap();
        assert_eq!(tls.certificate, PathBuf::from("/etc/c.pem"));
        assert_eq!(tls.key, PathBuf::from("/etc/k.pem"));
        let proxy = web.proxy.unwrap();
        assert_eq!(proxy.user_header, "x-remote-user");
        assert_eq!(proxy.default_role, "viewer");
        assert_eq!(web.session_idle, Duration::from_secs(600));
        for (text, key, says) in [
            (
                "[web]\nlisten = \"0.0.0.0:8440\"\nusers = \"u\"",
                "web.listen",
                "only over TLS",
            ),
            (
                "[web]\nlisten = \"192.0.2.1:8440\"\nusers = \"u\"",
                "web.listen",
                "not a loopback",
            ),
            (
                "[web]\nlisten = \"127.0.0.1:8440\"",
                "web.users",
                "users file",
            ),
            (
                "[web]\nlisten = \"127.0.0.1:1\"\nusers = \"u\"\ntls_certificate = \"c\"",
                "web.tls_key",
                "needed",
            ),
            (
                "[web]\nlisten = \"127.0.0.1:1\"\nusers = \"u\"\ntls_key = \"k\"",
                "web.tls_certificate",
                "needed",
            ),
            (
                "[web]\nlisten = \"127.0.0.1:1\"\n[web.proxy]\naddresses = [\"127.0.0.1\"]\nuser_header = \"X\"\ndefault_role = \"admin\"",
                "web.proxy.default_role",
                "not a role",
            ),
            (
                "[web]\nlisten = \"127.0.0.1:1\"\n[web.proxy]\naddresses = [\"127.0.0.1\"]\nuser_header = \"X User\"",
                "web.proxy.user_header",
                "not a header",
            ),
            (
                "[web]\nlisten = \"127.0.0.1:1\"\nusers = \"u\"\npassword = \"x\"",
                "web.password",
                "unknown field",
            ),
        ] {
            let err = parse(text).unwrap_err();
            let message = err.to_string();
            assert_eq!(err.key(), Some(key), "{text}: {message}");
            assert!(message.contains(says), "{text}: {message}");
        }
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
            s.providers[0].gcore().unwrap().credentials.clone(),
            CredentialSource::Login {
                username: "ops@example.com".into(),
                password: SecretSource::Env("PW".into())
            }
        );
        let s = parse("[provider]\napi_key_credential = \"gcore-api-key\"").unwrap();
        assert_eq!(
            s.providers[0].gcore().unwrap().credentials.clone(),
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
            s.providers[0].gcore().unwrap().credentials.clone(),
            CredentialSource::ApiKey(SecretSource::File("/etc/dnssec-warden/keys/api-key".into()))
        );
        assert_eq!(
            s.database.sqlite_path(),
            Some(Path::new("/etc/dnssec-warden/state.db"))
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
            s.providers[0].gcore().unwrap().credentials.clone(),
            CredentialSource::Login {
                username: "u".into(),
                password: SecretSource::File("/etc/dnssec-warden/../pw".into()),
            }
        );
        assert_eq!(s.database.sqlite_path(), Some(Path::new("/abs/state.db")));
        // A config named relative to the working directory: its paths are too, alike.
        let s = Settings::parse("[database]\npath = \"s.db\"", Path::new("conf/c.toml")).unwrap();
        assert_eq!(s.database.sqlite_path(), Some(Path::new("conf/s.db")));
        let s = Settings::parse("[database]\npath = \"s.db\"", Path::new("c.toml")).unwrap();
        assert_eq!(s.database.sqlite_path(), Some(Path::new("s.db")));
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
