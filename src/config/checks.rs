//! What is left after the typed sections: the checks across keys, paths taken relative
//! to the file, and each module's settings built from them.

use std::path::PathBuf;
use std::time::Duration;

use super::file::{ClusterFile, DatabaseFile, ParentFile, SettingsFile, WebFile, ZonesFile};
use super::{ConfigError, MetricsSettings, Settings, ZoneSelection};
use crate::alert::RegistrarSettings;
use crate::de::{FileDir, KeyError};
use crate::lifecycle::Policy;
use crate::lifecycle::parent_way::{DsPathSetting, ParentWay, ParentWays, duration_text};
use crate::lifecycle::policy::RolloverPolicy;
use crate::provider::fleet::{ProviderConfig, ProviderOptions};
use crate::provider::gcore::GcoreClient;
use crate::provider::registry::Kind;
use crate::provider::{Block, KINDS};
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
    /// The file's directory: a relative path in the file is taken from there.
    fn dir(&self) -> FileDir<'_> {
        FileDir(self.file.parent())
    }

    /// A path from the file: a relative one is taken relative to the file's directory.
    fn path(&self, path: PathBuf) -> PathBuf {
        self.dir().path(path)
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
        let rollover = self.rollover(raw.rollover, &raw.timing)?;
        Ok(Settings {
            source: self.file.clone(),
            providers: self.providers(raw.provider, raw.providers)?,
            database,
            dns,
            timing: Policy {
                require_validated_evidence,
                parents,
                rollover,
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

    /// `[rollover]`: a lifetime no shorter than the holds of one roll of its kind with
    /// `[timing]`'s margin and assumed DS TTL (a zone's own TTLs, known only at its looks,
    /// are said in its history); `spread` shorter than the shortest lifetime.
    fn rollover(
        &self,
        raw: super::file::RolloverFile,
        timing: &Policy,
    ) -> Result<RolloverPolicy, ConfigError> {
        use crate::lifecycle::roll_policy::shortest_roll;
        use crate::lifecycle::rollover::KeyKind;
        let ds_ttl = u32::try_from(timing.assumed_ds_ttl.as_secs()).unwrap_or(u32::MAX);
        for (kind, lifetime) in [
            (KeyKind::Ksk, raw.ksk),
            (KeyKind::Zsk, raw.zsk),
            (KeyKind::Csk, raw.csk),
        ] {
            let Some(lifetime) = lifetime else { continue };
            // A ZSK's holds count no DS TTL; a KSK's and a CSK's the assumed one, as a
            // zone whose DS TTL was never seen waits it.
            let shortest = shortest_roll(kind, 0, ds_ttl, timing.propagation_margin);
            if lifetime < shortest {
                return Err(self.err(
                    &format!("rollover.{}", kind.name()),
                    format!(
                        "{} is shorter than one {} roll takes with timing.propagation_margin and timing.assumed_ds_ttl ({}): the key would be rolled again before its roll ends",
                        duration_text(lifetime),
                        kind.name(),
                        duration_text(shortest)
                    ),
                ));
            }
        }
        let shortest_lifetime = [raw.ksk, raw.zsk, raw.csk].into_iter().flatten().min();
        let spread = raw.spread.unwrap_or(Duration::ZERO);
        if let Some(lifetime) = shortest_lifetime
            && spread >= lifetime
        {
            return Err(self.err(
                "rollover.spread",
                format!(
                    "{} is not shorter than the shortest lifetime ({}): a zone's roll would fall due a whole lifetime late",
                    duration_text(spread),
                    duration_text(lifetime)
                ),
            ));
        }
        Ok(RolloverPolicy {
            ksk: raw.ksk,
            zsk: raw.zsk,
            csk: raw.csk,
            spread,
            max_concurrent_per_account: raw
                .max_concurrent_per_account
                .unwrap_or(crate::lifecycle::policy::DEFAULT_MAX_CONCURRENT_PER_ACCOUNT),
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
        legacy: Option<toml::Table>,
        named: std::collections::BTreeMap<String, toml::Table>,
    ) -> Result<Vec<ProviderConfig>, ConfigError> {
        let mut all = Vec::new();
        if let Some(raw) = legacy {
            let options = self.provider("provider", raw)?;
            let name = options.kind().to_string();
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
                options,
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

    /// One provider block, read as its `kind`'s (Gcore without one, as `[provider]`
    /// always was): its keys by its own type, then its own checks across them.
    fn provider(&self, stem: &str, mut raw: toml::Table) -> Result<ProviderOptions, ConfigError> {
        let key = |k: &str| format!("{stem}.{k}");
        let kind = match raw.remove("kind") {
            None => GcoreClient::KIND.to_string(),
            Some(toml::Value::String(kind)) => kind,
            Some(other) => {
                return Err(self.err(
                    &key("kind"),
                    format!("must be a string, not {}", other.type_str()),
                ));
            }
        };
        let mut track = serde_path_to_error::Track::new();
        let block = Block::read(
            &kind,
            serde_path_to_error::Deserializer::new(raw, &mut track),
        );
        let block = match block {
            Some(Ok(block)) => block,
            None => {
                let error = <toml::de::Error as serde::de::Error>::unknown_variant(&kind, KINDS);
                return Err(self.err(&key("kind"), error.message().trim()));
            }
            Some(Err(error)) => {
                let field = track.path().to_string();
                // A key not of this kind's block but of another's: say whose.
                let known = |k: &str| Block::fields(k).contains(&field.as_str());
                let others: Vec<String> = KINDS
                    .iter()
                    .filter(|k| !known(&kind) && known(k))
                    .map(|k| format!("kind = {k:?}"))
                    .collect();
                let message = match others.is_empty() {
                    true => error.message().trim().to_string(),
                    false => format!("applies to {} only", others.join(" or ")),
                };
                let at = match field.as_str() {
                    "" | "." => stem.to_string(),
                    field => key(field),
                };
                return Err(self.err(&at, message));
            }
        };
        block
            .settings(self.dir())
            .map_err(|KeyError { key: k, message }| self.err(&key(&k), message))
    }

    /// At most one of the three ways to give a secret.
    fn one_source(
        &self,
        stem: &str,
        file: Option<PathBuf>,
        env: Option<String>,
        credential: Option<String>,
    ) -> Result<Option<SecretSource>, ConfigError> {
        self.dir()
            .one_secret(stem, file, env, credential)
            .map_err(|e| self.err(&e.key, e.message))
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
