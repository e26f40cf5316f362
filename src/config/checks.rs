//! What is left after the typed sections: the checks across keys, paths taken relative
//! to the file, and each module's settings built from them.

use std::path::PathBuf;
use std::time::Duration;

use url::Url;

use super::file::{
    ClusterFile, DatabaseFile, ParentFile, ProviderFile, ProviderKind, SettingsFile, WebFile,
    ZonesFile,
};
use super::{ConfigError, MetricsSettings, Settings, ZoneSelection};
use crate::alert::RegistrarSettings;
use crate::lifecycle::Policy;
use crate::lifecycle::parent_way::{DsPathSetting, ParentWay, ParentWays};
use crate::provider::fleet::{ProviderConfig, ProviderOptions};
use crate::provider::gcore::{CredentialSource, ProviderSettings};
use crate::provider::powerdns::PowerDnsSettings;
use crate::secret::SecretSource;
use crate::store::{ClusterSettings, DEFAULT_DATABASE_PATH, DatabaseSettings, PostgresSettings};
use crate::web::{ProxySettings, TlsFiles, WebSettings};
use crate::zone_name::ZoneName;

/// What is left after the typed sections: checks across keys, and paths taken relative
/// to the file.
pub(super) struct CrossChecks {
    pub(super) file: PathBuf,
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

    pub(super) fn settings(&self, raw: SettingsFile) -> Result<Settings, ConfigError> {
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
                block: "provider".into(),
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
                block: stem,
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
