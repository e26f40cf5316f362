//! The HTTP client for PowerDNS Authoritative's API. Every request goes through the
//! shared HTTP layer (`provider::http`: no redirects, capped bodies, retries, the
//! `Retry-After` hold, the caller's permission) with the `X-API-Key` header; this module
//! adds the API's paths and its answers mapped to [`ProviderError`]s.
//!
//! "DNSSEC off" is `PUT /zones/{id} {"dnssec": false}`, which deletes every key of the
//! zone at once. It is sent only through the guard, like any provider's switch-off: by
//! then no parent server has published a DS for the DS TTL and the DNSKEY TTL, so no
//! resolver holds a reason to expect signatures, and removing the keys at once is safe.
//! Deactivating the keys first would change nothing a resolver can see before then (an
//! unsigned zone with its DNSKEY still published), and would leave the zone in a state the
//! lifecycle does not name.

use std::sync::Arc;

use reqwest::Method;
use reqwest::header::HeaderName;
use serde::de::DeserializeOwned;
use url::Url;

use super::PowerDnsSettings;
use super::types::{ConfigSetting, Cryptokey, PdnsZone, ZoneEntry};
use crate::alert_kind::AlertKind;
use crate::condition::Condition;
use crate::dnssec::{CdsHalves, CdsPublication, Dnskey, DnssecKey, fqdn};
use crate::provider::http::{Http, MAX_BODY_BYTES, Reply, Request};
use crate::provider::{
    Attempts, DnssecSwitched, HostedZone, KeyAlgorithm, KeyState, ListedZone, NewKey, Provider,
    ProviderError, ProviderKey, RetryPolicy, SendPermit, foreign_dnskey_set,
};
use crate::secret::{Secret, redact};

/// The zone metadata that make PowerDNS publish CDS and CDNSKEY.
const PUBLISH_CDS: &str = "PUBLISH-CDS";
const PUBLISH_CDNSKEY: &str = "PUBLISH-CDNSKEY";
/// The CDS digest types the daemon asks for: SHA-256 (RFC 8624: the one every validator
/// implements; the DS the daemon announces is the same).
const CDS_DIGESTS: &str = "2";

/// The setting that makes the server serve DNSKEY records stored as records beside its
/// keystore's keys, in one apex DNSKEY RRset signed by the zone's own keys.
const DIRECT_DNSKEY: &str = "direct-dnskey";

/// One metadata kind as the API gives it.
#[derive(serde::Deserialize)]
struct Metadata {
    /// Set in the list of a zone's every kind; absent from one kind's answer.
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: Vec<String>,
}

/// Longest body excerpt an error carries.
const EXCERPT_CHARS: usize = 160;

pub struct PowerDnsClient {
    http: Http,
    base: Url,
    server_id: String,
    api_key: Secret,
    /// The API does not know `server_id` (the daemon-wide
    /// `provider_account_misconfigured`): judged at every zone listing and search.
    misconfigured: Arc<Condition>,
}

/// One server of the API, as `GET /api/v1/servers` lists it.
#[derive(serde::Deserialize)]
struct ServerEntry {
    #[serde(default)]
    id: String,
}

impl std::fmt::Debug for PowerDnsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PowerDnsClient")
            .field("base", &self.base.as_str())
            .field("server_id", &self.server_id)
            .finish_non_exhaustive()
    }
}

static API_KEY_HEADER: HeaderName = HeaderName::from_static("x-api-key");

impl PowerDnsClient {
    pub fn new(settings: &PowerDnsSettings, api_key: Secret) -> Result<Self, ProviderError> {
        let retry = RetryPolicy {
            max_attempts: settings.max_attempts,
            budget: settings.retry_budget,
            ..RetryPolicy::default()
        };
        Ok(Self {
            http: Http::new(retry, settings.request_timeout)?,
            base: settings.base_url.clone(),
            server_id: settings.server_id.clone(),
            api_key,
            misconfigured: Arc::new(Condition::new(AlertKind::ProviderAccountMisconfigured)),
        })
    }

    /// Whether the API knows the configured `server_id` (the daemon-wide
    /// `provider_account_misconfigured`).
    pub fn account_condition(&self) -> Arc<Condition> {
        self.misconfigured.clone()
    }

    // ---- the calls ---------------------------------------------------------------------

    /// Every zone of the server.
    pub async fn list_zones(&self) -> Result<Vec<ZoneEntry>, ProviderError> {
        let listed = self.json(Method::GET, &["zones"], &[], None, None).await;
        self.server_known(listed, "zones").await
    }

    /// The zone's entry, found by name (`GET /zones?zone=`); its id is the server's own.
    /// A zone the server does not have is an empty list (`NotFound`); a 404 there is the
    /// server id's (`Misconfigured`), never the zone's.
    pub async fn find_zone(&self, zone: &str) -> Result<ZoneEntry, ProviderError> {
        let name = fqdn(zone).map_err(|e| ProviderError::Invalid(e.to_string()))?;
        let entries = self
            .json(
                Method::GET,
                &["zones"],
                &[("zone", name.clone())],
                None,
                None,
            )
            .await;
        let entries: Vec<ZoneEntry> = self.server_known(entries, "zones").await?;
        entries
            .into_iter()
            .find(|e| e.name.eq_ignore_ascii_case(&name))
            .ok_or_else(|| ProviderError::NotFound(format!("zone {name} is not on the server")))
    }

    /// The configured server is one the API has (`GET /servers/{server_id}`), for
    /// `check-config`: `Misconfigured` naming the key at fault when it is not.
    pub async fn check_server(&self) -> Result<(), ProviderError> {
        let found = self.call(Method::GET, &[], &[], None, None).await.map(drop);
        self.server_known(found, "").await
    }

    /// `result` of a request under `/servers/{server_id}/` that any server of the API
    /// answers (its zone list, a search by name): a 404 there says the API has no such
    /// server (4.7 answers the plain-text `Not Found` for every path under an unknown
    /// server id, as for an unknown zone's own path), which is the account's
    /// configuration at fault, said daemon-wide, never a zone missing. Any answer of the
    /// server clears it.
    async fn server_known<T>(
        &self,
        result: Result<T, ProviderError>,
        path: &str,
    ) -> Result<T, ProviderError> {
        match result {
            Err(ProviderError::NotFound(_)) => {
                let e = self.no_such_server(path).await;
                self.misconfigured.holds(e.to_string());
                Err(e)
            }
            Err(e) => Err(e),
            Ok(v) => {
                self.misconfigured.clear();
                Ok(v)
            }
        }
    }

    /// What a 404 for `path` under the server id means, from the API's list of servers.
    async fn no_such_server(&self, path: &str) -> ProviderError {
        let asked = format!("/api/v1/servers/{}/{path}", self.server_id);
        let url = self.url_from(&["api", "v1", "servers"], &[]);
        let listed = match url {
            Ok(url) => self.call_url(Method::GET, url, None, None, true).await,
            Err(e) => Err(e),
        };
        let servers: Result<Vec<ServerEntry>, ProviderError> = listed.and_then(|bytes| {
            serde_json::from_slice(&bytes).map_err(|e| ProviderError::Decode {
                what: e.to_string(),
                excerpt: self.excerpt(&bytes),
            })
        });
        match servers {
            Ok(servers) => {
                let ids: Vec<String> = servers.iter().map(|s| format!("{:?}", s.id)).collect();
                ProviderError::Misconfigured {
                    key: "server_id",
                    message: format!(
                        "the PowerDNS API at {} has no server {:?} (it has {}): it answers 404 for {asked}, as for every path under it",
                        self.base,
                        self.server_id,
                        if ids.is_empty() {
                            "none".to_string()
                        } else {
                            ids.join(", ")
                        }
                    ),
                }
            }
            Err(ProviderError::NotFound(_)) => ProviderError::Misconfigured {
                key: "base_url",
                message: format!(
                    "{} answers 404 for /api/v1/servers and for {asked}: not a PowerDNS API (its webserver's address, with api=yes)",
                    self.base
                ),
            },
            Err(e) => ProviderError::Misconfigured {
                key: "server_id",
                message: format!(
                    "the PowerDNS API at {} answers 404 for {asked}: it has no server {:?} (its list of servers could not be read: {e})",
                    self.base, self.server_id
                ),
            },
        }
    }

    /// The zone with its record sets.
    pub async fn get_zone(&self, zone: &str) -> Result<PdnsZone, ProviderError> {
        let entry = self.find_zone(zone).await?;
        self.json(Method::GET, &["zones", &entry.id], &[], None, None)
            .await
    }

    /// Creates a native zone with these name servers (tests and the lab).
    pub async fn create_zone(
        &self,
        zone: &str,
        name_servers: &[&str],
    ) -> Result<PdnsZone, ProviderError> {
        let body = serde_json::json!({
            "name": absolute(zone),
            "kind": "Native",
            "nameservers": name_servers.iter().map(|n| absolute(n)).collect::<Vec<_>>(),
        });
        self.json(Method::POST, &["zones"], &[], Some(&body), None)
            .await
    }

    /// The zone's keys, each checked by [`Cryptokey::verify`] when it is used.
    pub async fn cryptokeys(&self, zone: &str) -> Result<Vec<Cryptokey>, ProviderError> {
        let entry = self.find_zone(zone).await?;
        self.json(
            Method::GET,
            &["zones", &entry.id, "cryptokeys"],
            &[],
            None,
            None,
        )
        .await
    }

    /// The zone's keys in the daemon's terms, each checked ([`Cryptokey::provider_key`]),
    /// in the order of their ids (4.7 lists them in no fixed order).
    pub async fn list_keys(&self, zone: &str) -> Result<Vec<ProviderKey>, ProviderError> {
        let entry = self.find_zone(zone).await?;
        let mut keys: Vec<Cryptokey> = self
            .json(
                Method::GET,
                &["zones", &entry.id, "cryptokeys"],
                &[],
                None,
                None,
            )
            .await?;
        keys.sort_by_key(|k| k.id);
        keys.iter().map(|k| k.provider_key(&entry.name)).collect()
    }

    /// `POST /zones/{id}/cryptokeys`: a new key made by the server, answered `201` with
    /// the key (and its private part, which is never read, kept or shown). Sent once:
    /// an attempt that may have taken effect is not repeated, and any outcome but the
    /// key read back as asked is [`ProviderError::KeyMaybeAdded`] (or a definite
    /// refusal). Every key is asked for with its algorithm's size ([`key_bits`]): one
    /// the POST leaves out is the server's `default-ksk-size` or `default-zsk-size`, which
    /// a server set up to make RSA keys has (4.7 needs one for them), and an ECDSA or
    /// Ed25519 key of that size is refused.
    pub async fn add_key_with(
        &self,
        zone: &str,
        key: NewKey,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<ProviderKey, ProviderError> {
        let entry = self.find_zone(zone).await?;
        let body = serde_json::json!({
            "keytype": key.kind.name(),
            "active": key.state.active,
            "published": key.state.published,
            "algorithm": key.algorithm.number(),
            "bits": key_bits(key.algorithm),
        });
        let url = self.url(&["zones", &entry.id, "cryptokeys"], &[])?;
        let answer = self
            .call_url(Method::POST, url, Some(&body), may_send, false)
            .await;
        let added = answer.and_then(|bytes| {
            let made: Cryptokey =
                serde_json::from_slice(&bytes).map_err(|e| ProviderError::Decode {
                    what: e.to_string(),
                    excerpt: "(not shown: the answer carries the key's private part)".into(),
                })?;
            let made = made.provider_key(&entry.name)?;
            let asked = (key.kind.flags(), key.algorithm.number(), key.state);
            let got = (made.dnskey.flags, made.dnskey.algorithm, made.state);
            if got != asked {
                return Err(ProviderError::ErrorInSuccess {
                    status: 201,
                    message: format!(
                        "key {} was made as flags {}, algorithm {}, {:?}; asked: flags {}, algorithm {}, {:?}",
                        made.id, got.0, got.1, got.2, asked.0, asked.1, asked.2
                    ),
                });
            }
            Ok(made)
        });
        added.map_err(|e| match e.outcome_unknown() {
            true => ProviderError::KeyMaybeAdded {
                zone: entry.name.clone(),
                cause: Box::new(e),
            },
            false => e,
        })
    }

    /// `PUT /zones/{id}/cryptokeys/{key}` with both flags, always: 4.7 refuses a body
    /// without a boolean `active`, and takes a `published` missing (or not a boolean) as
    /// `true`, publishing the key. `204`. Repeating it is harmless, so it is retried as
    /// any call.
    pub async fn set_key_state_with(
        &self,
        zone: &str,
        id: &str,
        state: KeyState,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<(), ProviderError> {
        let key = key_id(zone, id)?;
        let entry = self.find_zone(zone).await?;
        let body = serde_json::json!({ "active": state.active, "published": state.published });
        self.call(
            Method::PUT,
            &["zones", &entry.id, "cryptokeys", &key],
            &[],
            Some(&body),
            may_send,
        )
        .await
        .map(drop)
        .map_err(|e| key_missing(e, &entry.name, &key))
    }

    /// `DELETE /zones/{id}/cryptokeys/{key}`: `204`; a key the server does not have is
    /// its plain-text `404`.
    pub async fn delete_key_with(
        &self,
        zone: &str,
        id: &str,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<(), ProviderError> {
        let key = key_id(zone, id)?;
        let entry = self.find_zone(zone).await?;
        self.call(
            Method::DELETE,
            &["zones", &entry.id, "cryptokeys", &key],
            &[],
            None,
            may_send,
        )
        .await
        .map(drop)
        .map_err(|e| key_missing(e, &entry.name, &key))
    }

    /// Signs the zone (`true`: one key, a CSK, in 4.7) or deletes every key (`false`).
    pub async fn set_dnssec_with(
        &self,
        zone: &str,
        enabled: bool,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<(), ProviderError> {
        let entry = self.find_zone(zone).await?;
        let body = serde_json::json!({ "dnssec": enabled });
        self.call(
            Method::PUT,
            &["zones", &entry.id],
            &[],
            Some(&body),
            may_send,
        )
        .await
        .map(drop)
    }

    /// The key a DS must name: the one active, published secure entry point, checked
    /// against its own public key. [`ProviderError::DnssecDisabled`] when the zone is not
    /// signed; several entry points (a rollover behind the daemon's back) are refused,
    /// not guessed between.
    pub async fn get_dnssec(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        let entry = self.find_zone(zone).await?;
        if entry.dnssec == Some(false) {
            return Err(ProviderError::DnssecDisabled);
        }
        let keys: Vec<Cryptokey> = self
            .json(
                Method::GET,
                &["zones", &entry.id, "cryptokeys"],
                &[],
                None,
                None,
            )
            .await?;
        let mut points = keys.iter().filter(|k| k.is_entry_point());
        match (points.next(), points.next()) {
            (None, _) => Err(ProviderError::DnssecDisabled),
            (Some(key), None) => key.verify(&entry.name),
            (Some(a), Some(b)) => Err(ProviderError::Invalid(format!(
                "zone {} has several active entry-point keys (ids {} and {}): which one a DS names is the operator's choice",
                entry.name, a.id, b.id
            ))),
        }
    }

    /// What `PUBLISH-CDS` and `PUBLISH-CDNSKEY` say, each read apart (the server
    /// publishes the CDS and CDNSKEY of its entry-point keys when set, the delete request
    /// when set to `0`). Each half must be one of the forms the daemon sets (unset,
    /// `["2"]` and `["1"]`, `["0"]`); halves that differ are a setting of the daemon's
    /// half applied (an answer lost between its two writes), which the next step
    /// completes or rolls back. Anything else is refused, not guessed: an operator who
    /// set other digest types by hand is told, and nothing is changed.
    pub async fn get_cds_publication(&self, zone: &str) -> Result<CdsHalves, ProviderError> {
        let entry = self.find_zone(zone).await?;
        // Every kind in one request: a look that reads the setting costs the server two.
        let all: Vec<Metadata> = self
            .json(
                Method::GET,
                &["zones", &entry.id, "metadata"],
                &[],
                None,
                None,
            )
            .await?;
        let of = |kind: &str| -> Vec<String> {
            all.iter()
                .filter(|m| m.kind.eq_ignore_ascii_case(kind))
                .flat_map(|m| m.metadata.iter().cloned())
                .collect()
        };
        let (cds, cdnskey) = (of(PUBLISH_CDS), of(PUBLISH_CDNSKEY));
        let read = |values: &[String], key: &str| match values {
            [] => Some(CdsPublication::Nothing),
            [one] if one == "0" => Some(CdsPublication::Delete),
            [one] if one == key => Some(CdsPublication::Key),
            _ => None,
        };
        match (read(&cds, CDS_DIGESTS), read(&cdnskey, "1")) {
            (Some(cds), Some(cdnskey)) => Ok(CdsHalves { cds, cdnskey }),
            _ => Err(ProviderError::Invalid(format!(
                "zone {}: {PUBLISH_CDS} {cds:?} and {PUBLISH_CDNSKEY} {cdnskey:?} are not a setting the daemon makes (each unset, [\"{CDS_DIGESTS}\"] and [\"1\"], or [\"0\"]); not changed",
                entry.name
            ))),
        }
    }

    /// Sets `PUBLISH-CDS` and `PUBLISH-CDNSKEY` together: the SHA-256 CDS and the CDNSKEY
    /// of the entry-point key, the delete request, or neither.
    pub async fn set_cds_publication_with(
        &self,
        zone: &str,
        to: CdsPublication,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<(), ProviderError> {
        let entry = self.find_zone(zone).await?;
        let values = match to {
            CdsPublication::Nothing => None,
            CdsPublication::Key => Some((CDS_DIGESTS, "1")),
            CdsPublication::Delete => Some(("0", "0")),
        };
        let mut applied: Option<String> = None;
        for (kind, value) in [
            (PUBLISH_CDS, values.map(|v| v.0)),
            (PUBLISH_CDNSKEY, values.map(|v| v.1)),
        ] {
            let body = value.map(|value| serde_json::json!({ "kind": kind, "metadata": [value] }));
            let method = match value {
                Some(_) => Method::PUT,
                None => Method::DELETE,
            };
            let written = self
                .call(
                    method,
                    &["zones", &entry.id, "metadata", kind],
                    &[],
                    body.as_ref(),
                    may_send,
                )
                .await;
            match (written, &applied) {
                (Ok(_), _) => {
                    applied = Some(match value {
                        Some(value) => format!("{kind} was set to [\"{value}\"]"),
                        None => format!("{kind} was removed"),
                    });
                }
                // The first half took effect: the call is not "not performed", whatever
                // the second's error says (rule 11); the next look reads the half.
                (Err(e), Some(done)) if !e.outcome_unknown() => {
                    return Err(ProviderError::PartlyApplied {
                        applied: format!("zone {}: {done}", entry.name),
                        then: Box::new(e),
                    });
                }
                (Err(e), _) => return Err(e),
            }
        }
        Ok(())
    }

    /// Whether the server serves stored DNSKEY records (`direct-dnskey`), from
    /// `GET /config`, which lists every setting with its value (4.7 reports it; the API
    /// key's value shows as `***`). Only the documented `yes` counts, though 4.7 itself
    /// takes every value but `no` and `off` as on (even `false` and `0`, tried on the
    /// real server): reading an odd value as off leaves a capability unused at worst,
    /// never a foreign key believed served that is not. A server that does not list the
    /// setting does not promise it either.
    pub async fn direct_dnskey(&self) -> Result<bool, ProviderError> {
        let settings = self.json(Method::GET, &["config"], &[], None, None).await;
        let settings: Vec<ConfigSetting> = self.server_known(settings, "config").await?;
        Ok(settings
            .iter()
            .filter(|s| s.name == DIRECT_DNSKEY)
            .any(|s| s.text().is_some_and(|v| v.eq_ignore_ascii_case("yes"))))
    }

    /// The DNSKEY records stored at the zone's apex as records (the other signers' keys),
    /// never the keystore's: [`PdnsZone::stored_dnskeys`].
    pub async fn get_foreign_dnskeys(&self, zone: &str) -> Result<Vec<Dnskey>, ProviderError> {
        self.get_zone(zone).await?.stored_dnskeys()
    }

    /// Makes the apex's stored DNSKEY records exactly `keys` (checked by
    /// [`foreign_dnskey_set`] before any request): one `PATCH` of the zone's record sets,
    /// `REPLACE` with the keys or `DELETE` of the set, both level-triggered (the server's
    /// `DELETE` of a set that is not there is a 204 too).
    ///
    /// 4.7 stores a DNSKEY set through the API with `direct-dnskey` off as well, and
    /// then never serves it: keys are refused unless the server says it serves them
    /// ([`Self::direct_dnskey`]); removing them is always sent. The server serves the
    /// stored records with the keystore's keys at their TTL (the SOA minimum), not at the
    /// `ttl` stored with them (which the API needs, and which counts in `largest_ttl`).
    pub async fn set_foreign_dnskeys_with(
        &self,
        zone: &str,
        keys: &[Dnskey],
        ttl: u32,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<(), ProviderError> {
        let keys = foreign_dnskey_set(zone, keys)?;
        let entry = self.find_zone(zone).await?;
        let set = if keys.is_empty() {
            serde_json::json!({
                "name": entry.name, "type": "DNSKEY", "changetype": "DELETE",
            })
        } else {
            if !self.direct_dnskey().await? {
                return Err(ProviderError::Invalid(format!(
                    "the server does not serve stored DNSKEY records ({DIRECT_DNSKEY} is not yes): another signer's key for {} would be stored and never served; not sent",
                    entry.name
                )));
            }
            let records: Vec<serde_json::Value> = keys
                .iter()
                .map(|k| serde_json::json!({ "content": k.text(), "disabled": false }))
                .collect();
            serde_json::json!({
                "name": entry.name, "type": "DNSKEY", "ttl": ttl, "changetype": "REPLACE",
                "records": records,
            })
        };
        let body = serde_json::json!({ "rrsets": [set] });
        self.call(
            Method::PATCH,
            &["zones", &entry.id],
            &[],
            Some(&body),
            may_send,
        )
        .await
        .map(drop)
    }

    // ---- plumbing ----------------------------------------------------------------------

    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<T, ProviderError> {
        let bytes = self.call(method, segments, query, body, may_send).await?;
        serde_json::from_slice(&bytes).map_err(|e| ProviderError::Decode {
            what: e.to_string(),
            excerpt: self.excerpt(&bytes),
        })
    }

    /// One call under `/api/v1/servers/{server_id}/`. A call that changes something stays
    /// of unknown outcome once an attempt may have taken effect (safety rule 11).
    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<bytes::Bytes, ProviderError> {
        let url = self.url(segments, query)?;
        self.call_url(method, url, body, may_send, true).await
    }

    /// One request to `url`, as [`Self::call`]; `repeatable` false: not sent again once
    /// an attempt may have taken effect.
    async fn call_url(
        &self,
        method: Method,
        url: Url,
        body: Option<&serde_json::Value>,
        may_send: Option<SendPermit<'_>>,
        repeatable: bool,
    ) -> Result<bytes::Bytes, ProviderError> {
        let mut attempts = (!method.is_safe()).then(Attempts::default);
        let request = Request {
            method: &method,
            url: &url,
            body,
            credential: Some((API_KEY_HEADER.clone(), &self.api_key)),
            may_send,
            repeatable,
            finish: None,
            retry_answer: None,
        };
        let reply = self
            .http
            .send(&request, attempts.as_mut(), &|reply| self.check(reply))
            .await;
        let outcome = |e| match &attempts {
            Some(attempts) => attempts.outcome(e),
            None => e,
        };
        match reply {
            Ok(reply) => self.check(reply).map_err(outcome),
            Err(e) => Err(outcome(e)),
        }
    }

    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Url, ProviderError> {
        let under = ["api", "v1", "servers", self.server_id.as_str()];
        let all: Vec<&str> = under.iter().chain(segments).copied().collect();
        self.url_from(&all, query)
    }

    /// `segments` under the base URL.
    fn url_from(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Url, ProviderError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| {
                ProviderError::Invalid(format!("base URL {} cannot take a path", self.base))
            })?
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    /// Maps a final reply to its body or a typed error. The server's errors are JSON
    /// `{"error": …}`, but a 404 for an unknown zone is the plain text `Not Found`.
    fn check(&self, reply: Reply) -> Result<bytes::Bytes, ProviderError> {
        let status = reply.status.as_u16();
        if reply.status.is_success() {
            if reply.truncated {
                return Err(ProviderError::BodyTooLarge {
                    status,
                    limit: MAX_BODY_BYTES,
                });
            }
            return Ok(reply.body);
        }
        if reply.status.is_redirection() {
            return Err(reply.redirected(&[self.api_key.expose()]));
        }
        Err(reply.status_error(self.message(&reply.body)))
    }

    fn message(&self, body: &[u8]) -> String {
        let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
        match parsed
            .as_ref()
            .and_then(|v| v.get("error"))
            .and_then(|e| e.as_str())
        {
            Some(message) => redact(message, &[self.api_key.expose()])
                .chars()
                .take(EXCERPT_CHARS)
                .collect(),
            None => self.excerpt(body),
        }
    }

    /// The start of `body`, redacted before it is cut.
    fn excerpt(&self, body: &[u8]) -> String {
        redact(&String::from_utf8_lossy(body), &[self.api_key.expose()])
            .trim()
            .chars()
            .take(EXCERPT_CHARS)
            .collect()
    }
}

impl Provider for PowerDnsClient {
    type Account = Self;
    fn account_named(&self, _name: &str) -> Option<&Self> {
        None
    }

    async fn zone(&self, zone: &str) -> Result<HostedZone, ProviderError> {
        let z = self.get_zone(zone).await?;
        Ok(HostedZone {
            name_servers: z.apex_ns(),
            dnssec_enabled: z.dnssec,
            name: z.name,
        })
    }
    async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
        Ok(self
            .list_zones()
            .await?
            .into_iter()
            .map(|e| ListedZone {
                name: e.name,
                dnssec_enabled: e.dnssec,
            })
            .collect())
    }
    async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        may_send: SendPermit<'_>,
    ) -> Result<DnssecSwitched, ProviderError> {
        self.set_dnssec_with(zone, enabled, Some(may_send)).await?;
        // The API answers 204: the key is asked for separately; failing that, the next
        // observation names it.
        let key = match enabled {
            true => self.get_dnssec(zone).await.ok(),
            false => None,
        };
        Ok(DnssecSwitched { message: None, key })
    }
    async fn dnssec_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        self.get_dnssec(zone).await
    }
    async fn largest_ttl(&self, zone: &str) -> Result<Option<u32>, ProviderError> {
        Ok(self.get_zone(zone).await?.largest_ttl())
    }
    async fn cds_publication(&self, zone: &str) -> Result<Option<CdsHalves>, ProviderError> {
        self.get_cds_publication(zone).await.map(Some)
    }
    async fn set_cds_publication(
        &self,
        zone: &str,
        to: CdsPublication,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        self.set_cds_publication_with(zone, to, Some(may_send))
            .await
    }
    async fn keys(&self, zone: &str) -> Result<Option<Vec<ProviderKey>>, ProviderError> {
        self.list_keys(zone).await.map(Some)
    }
    async fn add_key(
        &self,
        zone: &str,
        key: NewKey,
        may_send: SendPermit<'_>,
    ) -> Result<ProviderKey, ProviderError> {
        self.add_key_with(zone, key, Some(may_send)).await
    }
    async fn set_key_state(
        &self,
        zone: &str,
        id: &str,
        state: KeyState,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        self.set_key_state_with(zone, id, state, Some(may_send))
            .await
    }
    async fn delete_key(
        &self,
        zone: &str,
        id: &str,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        self.delete_key_with(zone, id, Some(may_send)).await
    }
    async fn foreign_dnskeys_supported(&self, _zone: &str) -> Result<bool, ProviderError> {
        // A setting of the server, the same for each of its zones.
        self.direct_dnskey().await
    }
    async fn foreign_dnskeys(&self, zone: &str) -> Result<Option<Vec<Dnskey>>, ProviderError> {
        self.get_foreign_dnskeys(zone).await.map(Some)
    }
    async fn set_foreign_dnskeys(
        &self,
        zone: &str,
        keys: &[Dnskey],
        ttl: u32,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        self.set_foreign_dnskeys_with(zone, keys, ttl, Some(may_send))
            .await
    }
}

/// The bits of an RSA key the daemon adds: RFC 8624's recommended minimum, the size
/// `pdnsutil` makes by default.
const RSA_BITS: u32 = 2048;

/// The size a key of `algorithm` is asked for with: [`RSA_BITS`], or the curve's (the
/// only one each elliptic algorithm has, as the server lists them).
fn key_bits(algorithm: KeyAlgorithm) -> u32 {
    match algorithm {
        KeyAlgorithm::RsaSha256 => RSA_BITS,
        KeyAlgorithm::EcdsaP256Sha256 | KeyAlgorithm::Ed25519 => 256,
    }
}

/// A key id as [`PowerDnsClient::list_keys`] gives them: the server's number. Anything
/// else is refused before any request (4.7 answers a 500 for a path id that is not a
/// number).
fn key_id(zone: &str, id: &str) -> Result<String, ProviderError> {
    id.parse::<u64>().map(|n| n.to_string()).map_err(|_| {
        ProviderError::Invalid(format!(
            "{id:?} is no PowerDNS key id (a number) of {zone}; not sent"
        ))
    })
}

/// A 404 for a key's path, once the zone was found: the key is not among the zone's.
fn key_missing(e: ProviderError, zone: &str, id: &str) -> ProviderError {
    match e {
        ProviderError::NotFound(_) => {
            ProviderError::NotFound(format!("key {id} is not among the keys of {zone}"))
        }
        other => other,
    }
}

/// A name as given, with the trailing dot the API wants: only for `create_zone` (tests
/// and the lab), which lets the server judge the name; every call of the daemon's takes
/// its zone through [`fqdn`], which refuses a name that is not one.
fn absolute(name: &str) -> String {
    let name = name.trim();
    if name.ends_with('.') {
        name.to_ascii_lowercase()
    } else {
        format!("{}.", name.to_ascii_lowercase())
    }
}
