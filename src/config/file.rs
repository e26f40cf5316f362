//! The file as written: each section's typed form, every value checked on its own as it
//! is deserialized (a `deserialize_with` helper from `de`), and the settings of the
//! sections whose file form differs from them only in shape.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use url::Url;

use super::de;
use crate::alert::{AlertSettings, ExecSettings, WebhookSettings};
use crate::dns::net::query::{MAX_QPS_PER_SERVER, MAX_QUERIES_PER_SERVER};
use crate::dns::{AddressFamilies, DnsSettings, ObservationBudget};
use crate::lifecycle::Policy;
use crate::lifecycle::parent_way::DsPathSetting;
use crate::store::DEFAULT_LEASE;
use crate::time::format::positive_duration as duration;

// ---- the sections whose file form differs from their settings --------------------------

/// `[alerts]`: where alerts go besides the log, and how often an open one is repeated.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct AlertsFile {
    #[serde(deserialize_with = "duration")]
    pub(super) renotify_after: Duration,
    /// The longest wait between two tries of a failing sink (the wait doubles from 5 s).
    #[serde(deserialize_with = "duration")]
    pub(super) sink_retry_max: Duration,
    /// A sink failing every delivery this long raises `alert_sink_failing`.
    #[serde(deserialize_with = "duration")]
    pub(super) sink_failing_after: Duration,
    /// `[[alerts.webhook]]`
    #[serde(rename = "webhook")]
    pub(super) webhooks: Vec<WebhookFile>,
    /// `[[alerts.exec]]`
    #[serde(rename = "exec")]
    pub(super) execs: Vec<ExecFile>,
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
    pub(super) fn settings(self) -> AlertSettings {
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
pub(super) struct WebhookFile {
    #[serde(deserialize_with = "de::http_url")]
    pub(super) url: Url,
    /// Extra request headers (an `Authorization` token, say), sorted by name.
    #[serde(default, deserialize_with = "de::headers")]
    pub(super) headers: Vec<(String, String)>,
    /// Time limit of one attempt.
    #[serde(default = "webhook_timeout", deserialize_with = "duration")]
    pub(super) timeout: Duration,
    /// Attempts per notification and tick, the first included.
    #[serde(
        default = "webhook_attempts",
        deserialize_with = "de::in_range::<1, 10, _, _>"
    )]
    pub(super) max_attempts: u32,
    /// Wait before the first retry; doubled for each further one.
    #[serde(default = "webhook_backoff", deserialize_with = "duration")]
    pub(super) backoff: Duration,
}

/// One `[[alerts.exec]]`: a command run with the alert in its environment and on stdin.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExecFile {
    #[serde(deserialize_with = "de::command")]
    pub(super) command: Vec<String>,
    #[serde(default = "exec_timeout", deserialize_with = "duration")]
    pub(super) timeout: Duration,
}

fn webhook_timeout() -> Duration {
    crate::alert::DEFAULT_WEBHOOK_TIMEOUT
}
fn webhook_attempts() -> u32 {
    crate::alert::DEFAULT_WEBHOOK_ATTEMPTS
}
fn webhook_backoff() -> Duration {
    crate::alert::DEFAULT_WEBHOOK_BACKOFF
}
fn exec_timeout() -> Duration {
    crate::alert::DEFAULT_EXEC_TIMEOUT
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RegistrarFile {
    #[serde(deserialize_with = "de::command")]
    pub(super) command: Vec<String>,
    #[serde(default = "de::secs::<60>", deserialize_with = "duration")]
    pub(super) timeout: Duration,
}

/// The file as written: every section typed but the provider blocks, read by their
/// `kind` afterwards (each provider's folder types its own block); `[zones]` still holds
/// keys that are only meaningful together.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct SettingsFile {
    pub(super) provider: Option<toml::Table>,
    pub(super) providers: std::collections::BTreeMap<String, toml::Table>,
    pub(super) database: DatabaseFile,
    pub(super) dns: DnsFile,
    pub(super) timing: Policy,
    pub(super) zones: ZonesFile,
    pub(super) alerts: AlertsFile,
    pub(super) registrar: Option<RegistrarFile>,
    pub(super) metrics: MetricsFile,
    pub(super) cluster: Option<ClusterFile>,
    pub(super) parents: std::collections::BTreeMap<String, ParentFile>,
    pub(super) web: WebFile,
    pub(super) rollover: RolloverFile,
}

/// `[rollover]` as written: key lifetimes (none set: no roll is ever scheduled), the
/// spread and the cap; checked against each other and `[timing]` in `CrossChecks`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RolloverFile {
    #[serde(default, deserialize_with = "de::some_duration")]
    pub(super) ksk: Option<Duration>,
    #[serde(default, deserialize_with = "de::some_duration")]
    pub(super) zsk: Option<Duration>,
    #[serde(default, deserialize_with = "de::some_duration")]
    pub(super) csk: Option<Duration>,
    #[serde(default, deserialize_with = "de::some_duration")]
    pub(super) spread: Option<Duration>,
    #[serde(default, deserialize_with = "de::some_count")]
    pub(super) max_concurrent_per_account: Option<u32>,
}

/// `[web]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WebFile {
    #[serde(default, deserialize_with = "de::listen")]
    pub(super) listen: Option<SocketAddr>,
    pub(super) users: Option<PathBuf>,
    pub(super) tls_certificate: Option<PathBuf>,
    pub(super) tls_key: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::some_duration")]
    pub(super) session_lifetime: Option<Duration>,
    #[serde(default, deserialize_with = "de::some_duration")]
    pub(super) session_idle: Option<Duration>,
    pub(super) proxy: Option<WebProxyFile>,
}

/// `[web.proxy]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WebProxyFile {
    #[serde(deserialize_with = "de::root_hints")]
    pub(super) addresses: Vec<IpAddr>,
    pub(super) user_header: String,
    #[serde(default = "viewer")]
    pub(super) default_role: String,
}

fn viewer() -> String {
    "viewer".to_string()
}

/// `[parents."NAME"]` as written: how the DS reaches that parent zone.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ParentFile {
    #[serde(default)]
    pub(super) ds_path: DsPathSetting,
    #[serde(default, deserialize_with = "de::some_duration")]
    pub(super) scan_period: Option<Duration>,
    pub(super) accepts_first_ds: Option<bool>,
    #[serde(default, deserialize_with = "de::some_duration")]
    pub(super) first_ds_after: Option<Duration>,
    #[serde(default)]
    pub(super) call_registrar_hook: bool,
    #[serde(default, deserialize_with = "de::notify_target")]
    pub(super) notify_target: Option<String>,
    #[serde(default, deserialize_with = "de::some_port")]
    pub(super) notify_port: Option<u16>,
}

/// `[cluster]` as written: both keys optional.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct ClusterFile {
    pub(super) node: Option<String>,
    #[serde(deserialize_with = "duration")]
    pub(super) lease: Duration,
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
pub(super) struct MetricsFile {
    #[serde(default, deserialize_with = "de::listen")]
    pub(super) listen: Option<SocketAddr>,
}

/// `[database]`: `path` or `url`, and the password's source for `url`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DatabaseFile {
    #[serde(default, deserialize_with = "de::some_non_empty_path")]
    pub(super) path: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::postgres_url")]
    pub(super) url: Option<Url>,
    #[serde(default, deserialize_with = "de::secret_file")]
    pub(super) password_file: Option<PathBuf>,
    #[serde(default, deserialize_with = "de::env_name")]
    pub(super) password_env: Option<String>,
    #[serde(default, deserialize_with = "de::credential_name")]
    pub(super) password_credential: Option<String>,
}

/// `[dns]` as written, the budget's keys beside the others.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct DnsFile {
    #[serde(deserialize_with = "de::root_hints")]
    pub(super) root_hints: Vec<IpAddr>,
    #[serde(deserialize_with = "de::in_range::<1, 65535, _, _>")]
    pub(super) port: u16,
    #[serde(deserialize_with = "de::empty_is_none")]
    pub(super) trust_anchor_file: Option<PathBuf>,
    #[serde(deserialize_with = "de::servers")]
    pub(super) validating_resolvers: Vec<SocketAddr>,
    #[serde(deserialize_with = "duration")]
    pub(super) query_timeout: Duration,
    #[serde(deserialize_with = "de::in_range::<1, {u64::MAX}, _, _>")]
    pub(super) query_attempts: u32,
    #[serde(deserialize_with = "de::in_range::<1, {MAX_QUERIES_PER_SERVER as u64}, _, _>")]
    pub(super) queries_per_server: usize,
    #[serde(deserialize_with = "de::in_range::<1, {MAX_QPS_PER_SERVER as u64}, _, _>")]
    pub(super) max_qps_per_server: u32,
    #[serde(deserialize_with = "de::address_families")]
    pub(super) address_families: AddressFamilies,
    #[serde(deserialize_with = "de::observation_timeout")]
    pub(super) observation_timeout: Duration,
    #[serde(deserialize_with = "de::in_range::<1, 100_000, _, _>")]
    pub(super) max_queries_per_observation: u32,
    #[serde(deserialize_with = "de::in_range::<1, 10_000, _, _>")]
    pub(super) max_host_lookups: u32,
    #[serde(deserialize_with = "de::in_range::<1, 1_000, _, _>")]
    pub(super) max_ns_per_delegation: usize,
    #[serde(deserialize_with = "de::in_range::<1, 256, _, _>")]
    pub(super) max_addresses_per_server: usize,
    pub(super) require_validated_evidence: bool,
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
    pub(super) fn settings(self) -> DnsSettings {
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
pub(super) struct ZonesFile {
    pub(super) names: Option<Vec<de::ZoneEntry>>,
    pub(super) all: Option<bool>,
}
