//! The HTTP client for Cloudflare's API v4 (docs/cloudflare-api.md).
//!
//! One private path, [`CloudflareClient::call`], carries every request: the API token as
//! `Authorization: Bearer`, the shared HTTP layer's retries and `Retry-After` hold
//! (`provider::http`), the backoff on refused credentials, and the envelope's reading:
//! a `result` is taken only under `success: true`, and errors are classed by the HTTP
//! status and their codes (`7003`/`7000`: no such zone), never by their message.
//!
//! Paths name a zone by its id; the client finds it by name (`GET /zones?name=`), keeps
//! it, and finds it again once when Cloudflare says the id names nothing (a zone deleted
//! and added again has a new id).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use url::Url;

use super::settings::CloudflareSettings;
use super::types::{ApiMessage, Envelope, RawDnssec, Record, ResultInfo, Zone};
use crate::condition::Condition;
use crate::dnssec::DnssecKey;
use crate::provider::gcore::AuthBackoff;
use crate::provider::http::{Http, MAX_BODY_BYTES, Reply, Request};
use crate::provider::{
    Attempts, DnssecSwitched, HostedZone, ListedZone, Provider, ProviderError, SendPermit,
};
use crate::retry::RetryPolicy;
use crate::secret::{Secret, redact};

/// `per_page` of every list call: the API's largest.
pub const PER_PAGE: usize = 50;
/// The most pages one listing takes, whatever `total_pages` says.
pub const MAX_PAGES: usize = 10_000;
/// The longest one listing pages on.
pub const PAGED_BUDGET: Duration = Duration::from_secs(600);
/// Longest body excerpt an error carries.
const EXCERPT_CHARS: usize = 160;
/// Error codes that say the zone id names nothing ("Could not route to …", "No route
/// for that URI"): the zone is gone, or the id is stale.
const NO_ROUTE_CODES: [u64; 2] = [7003, 7000];
/// Codes that say the credential itself is refused: a malformed `Authorization`
/// (`6003` with `6111`), an invalid access token (`9109`).
const BAD_CREDENTIAL_CODES: [u64; 3] = [6003, 6111, 9109];
/// Who refuses the key calls.
const KEYS_API: &str = "Cloudflare's API (Cloudflare manages its own key)";

pub struct CloudflareClient {
    http: Http,
    base: Url,
    /// `Bearer <token>`, the header's whole value.
    authorization: Secret,
    /// The token alone, to redact.
    token: Secret,
    backoff: AuthBackoff,
    /// Zone ids by name (lower case, no trailing dot).
    ids: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for CloudflareClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudflareClient")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl CloudflareClient {
    pub fn new(settings: &CloudflareSettings, token: Secret) -> Result<Self, ProviderError> {
        let retry = RetryPolicy {
            max_attempts: settings.max_attempts,
            budget: settings.retry_budget,
            ..RetryPolicy::default()
        };
        Self::with_policy(
            settings.base_url.clone(),
            token,
            retry,
            settings.request_timeout,
        )
    }

    pub fn with_policy(
        base: Url,
        token: Secret,
        retry: RetryPolicy,
        request_timeout: Duration,
    ) -> Result<Self, ProviderError> {
        let value = token.expose().trim();
        if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ProviderError::Invalid(
                "the Cloudflare API token is empty or holds whitespace".into(),
            ));
        }
        Ok(Self {
            http: Http::new(retry, request_timeout)?,
            base,
            authorization: Secret::new(format!("Bearer {value}")),
            token: Secret::new(value.to_string()),
            backoff: AuthBackoff::new(),
            ids: Mutex::default(),
        })
    }

    /// Whether Cloudflare refuses the account's token (the daemon-wide
    /// `provider_auth_failing`).
    pub fn auth_condition(&self) -> Arc<Condition> {
        self.backoff.refused.clone()
    }

    // ---- the calls ---------------------------------------------------------------------

    /// Every zone of the account (`GET /zones`, paged), each id kept.
    pub async fn list_zones(&self) -> Result<Vec<Zone>, ProviderError> {
        let zones: Vec<Zone> = self.paged(&["zones"], &[]).await?;
        let mut ids = self.lock_ids();
        for zone in &zones {
            ids.insert(api_name(&zone.name), zone.id.clone());
        }
        Ok(zones)
    }

    /// The first page of the zone list alone (`check-config`'s read-only try of the token).
    pub async fn first_zones(&self) -> Result<Vec<Zone>, ProviderError> {
        let query = [
            ("page", "1".to_string()),
            ("per_page", PER_PAGE.to_string()),
        ];
        let bytes = self
            .call(Method::GET, &["zones"], &query, None, None)
            .await?;
        self.result(&bytes)
    }

    /// The zone's id: kept, or found by its exact name.
    pub async fn zone_id(&self, zone: &str) -> Result<String, ProviderError> {
        let name = api_name(zone);
        if let Some(id) = self.lock_ids().get(&name) {
            return Ok(id.clone());
        }
        self.find_zone(&name).await.map(|z| z.id)
    }

    /// `GET /zones?name=`: exactly one zone of that name, its id kept.
    async fn find_zone(&self, name: &str) -> Result<Zone, ProviderError> {
        let found: Vec<Zone> = self
            .paged(&["zones"], &[("name", name.to_string())])
            .await?;
        let mut found: Vec<Zone> = found
            .into_iter()
            .filter(|z| api_name(&z.name) == name)
            .collect();
        let zone = match found.len() {
            0 => {
                return Err(ProviderError::NotFound(format!(
                    "no zone {name} in the Cloudflare account(s) the token reaches"
                )));
            }
            1 => found.remove(0),
            n => {
                let ids: Vec<&str> = found.iter().map(|z| z.id.as_str()).collect();
                return Err(ProviderError::Misconfigured {
                    key: "api_token_file",
                    message: format!(
                        "{n} zones named {name} under one token (ids {}): give each account a block of its own",
                        ids.join(", ")
                    ),
                });
            }
        };
        self.lock_ids().insert(name.to_string(), zone.id.clone());
        Ok(zone)
    }

    /// `call` on the zone's id, found again once if Cloudflare says the kept id names
    /// nothing (a definite answer: the call took no effect).
    async fn on_zone(
        &self,
        zone: &str,
        method: Method,
        tail: &[&str],
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<bytes::Bytes, ProviderError> {
        let name = api_name(zone);
        let kept = self.lock_ids().get(&name).cloned();
        let id = match &kept {
            Some(id) => id.clone(),
            None => self.find_zone(&name).await?.id,
        };
        let path = |id: &str| {
            let mut segments = vec!["zones".to_string(), id.to_string()];
            segments.extend(tail.iter().map(|s| s.to_string()));
            segments
        };
        let segments = path(&id);
        let refs: Vec<&str> = segments.iter().map(String::as_str).collect();
        match self
            .call(method.clone(), &refs, query, body, may_send)
            .await
        {
            Err(ProviderError::NotFound(_)) if kept.is_some() => {
                self.lock_ids().remove(&name);
                let fresh = self.find_zone(&name).await?.id;
                if fresh == id {
                    return Err(ProviderError::NotFound(format!(
                        "Cloudflare does not route {} for zone {name}",
                        refs.join("/")
                    )));
                }
                let segments = path(&fresh);
                let refs: Vec<&str> = segments.iter().map(String::as_str).collect();
                self.call(method, &refs, query, body, may_send).await
            }
            other => other,
        }
    }

    /// `GET /zones/{id}`.
    pub async fn get_zone(&self, zone: &str) -> Result<Zone, ProviderError> {
        let bytes = self
            .on_zone(zone, Method::GET, &[], &[], None, None)
            .await?;
        self.result(&bytes)
    }

    /// `GET /zones/{id}/dnssec`, as Cloudflare sends it.
    pub async fn get_dnssec(&self, zone: &str) -> Result<RawDnssec, ProviderError> {
        let bytes = self
            .on_zone(zone, Method::GET, &["dnssec"], &[], None, None)
            .await?;
        self.result(&bytes)
    }

    /// `PATCH /zones/{id}/dnssec {"status": …}`, nothing else (a body with every field
    /// has been seen refused as malformed).
    pub async fn patch_dnssec_status(
        &self,
        zone: &str,
        status: &str,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<RawDnssec, ProviderError> {
        let body = serde_json::json!({ "status": status });
        let bytes = self
            .on_zone(zone, Method::PATCH, &["dnssec"], &[], Some(&body), may_send)
            .await?;
        self.result(&bytes)
    }

    /// `DELETE /zones/{id}/dnssec`: Cloudflare stops signing. Taken only in `disabled`.
    pub async fn delete_dnssec(
        &self,
        zone: &str,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<(), ProviderError> {
        self.on_zone(zone, Method::DELETE, &["dnssec"], &[], None, may_send)
            .await
            .map(drop)
    }

    /// Every DNS record of the zone (`GET /zones/{id}/dns_records`, paged).
    pub async fn list_records(&self, zone: &str) -> Result<Vec<Record>, ProviderError> {
        let id = self.zone_id(zone).await?;
        self.paged(&["zones", &id, "dns_records"], &[]).await
    }

    /// Switches DNSSEC on (`PATCH status=active`, the key it answers checked) or off.
    ///
    /// Off is what stops signing: `PATCH status=disabled` (harmless: Cloudflare keeps
    /// signing, and publishes the CDS delete sentinel), then `DELETE`, which Cloudflare
    /// takes only once its own check no longer sees the DS (`disabled`). While it still
    /// does (`pending-disabled`), the call is [`ProviderError::Conflict`]: refused, try
    /// again later, the zone still signed. Sent only through the guard (rules 1 and 2).
    pub async fn set_dnssec_with(
        &self,
        zone: &str,
        enabled: bool,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<DnssecSwitched, ProviderError> {
        if enabled {
            let answer = self.patch_dnssec_status(zone, "active", may_send).await?;
            // The key of the answer; `pending` is the expected status, not a DS.
            let key = answer.signing_key(zone)?;
            return Ok(DnssecSwitched {
                message: Some(format!("Cloudflare DNSSEC status {}", answer.status_text())),
                key: Some(key),
            });
        }
        let now = self.get_dnssec(zone).await?;
        let now = match now.reading() {
            r if r.signs == Some(false) => {
                return Ok(DnssecSwitched {
                    message: Some("Cloudflare does not sign the zone".into()),
                    key: None,
                });
            }
            r if r.may_delete => now,
            r if r.signs.is_none() => return Err(now.unknown_status(zone)),
            r if r.off_asked => now,
            _ => self.patch_dnssec_status(zone, "disabled", may_send).await?,
        };
        let reading = now.reading();
        if reading.signs == Some(false) {
            return Ok(DnssecSwitched {
                message: Some("Cloudflare does not sign the zone".into()),
                key: None,
            });
        }
        if !reading.may_delete {
            return Err(ProviderError::Conflict(format!(
                "Cloudflare took the switch-off of {} (status {}) and still signs it: it deletes its DNSSEC (stops signing) only once its own check no longer sees the DS at the parent; the DELETE is asked again at the next step",
                api_name(zone),
                now.status_text()
            )));
        }
        self.delete_dnssec(zone, may_send).await?;
        Ok(DnssecSwitched {
            message: Some("Cloudflare DNSSEC deleted: the zone is served unsigned".into()),
            key: None,
        })
    }

    // ---- plumbing ----------------------------------------------------------------------

    fn lock_ids(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn secrets(&self) -> Vec<String> {
        vec![self.token.expose().to_string()]
    }

    /// The `result` of a successful envelope.
    fn result<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, ProviderError> {
        let envelope: Envelope<T> = decode(bytes, &self.secrets())?;
        envelope.result.ok_or_else(|| ProviderError::Decode {
            what: "the answer has no `result`".into(),
            excerpt: excerpt(bytes, &self.secrets()),
        })
    }

    /// Every page of a list call, `per_page` [`PER_PAGE`], up to `total_pages` or an empty
    /// page. Bounded whatever Cloudflare answers: more than [`MAX_PAGES`] pages, a page
    /// that repeats the one before, or [`PAGED_BUDGET`] end it, each an error, never a
    /// partial list. Every entry must be read: a list short of one could hide a zone or
    /// a TTL.
    async fn paged<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> Result<Vec<T>, ProviderError> {
        let started = Instant::now();
        let mut all = Vec::new();
        let mut last_digest = None;
        for page in 1..=MAX_PAGES {
            let mut q: Vec<(&str, String)> = query.to_vec();
            q.push(("page", page.to_string()));
            q.push(("per_page", PER_PAGE.to_string()));
            let bytes = self.call(Method::GET, segments, &q, None, None).await?;
            let envelope: Envelope<Vec<T>> = decode(&bytes, &self.secrets())?;
            let items = envelope.result.ok_or_else(|| ProviderError::Decode {
                what: "a list answer has no `result`".into(),
                excerpt: excerpt(&bytes, &self.secrets()),
            })?;
            let info = envelope.result_info.unwrap_or_default();
            if info.total_pages.is_some_and(|t| t > MAX_PAGES as u64) {
                return Err(ProviderError::Listing(format!(
                    "Cloudflare reports {} pages, more than the {MAX_PAGES} a listing may take",
                    info.total_pages.unwrap_or_default()
                )));
            }
            let digest = digest(&bytes);
            if !items.is_empty() && last_digest == Some(digest) {
                return Err(ProviderError::Listing(format!(
                    "page {page} repeats the one before it (Cloudflare ignores `page`?)"
                )));
            }
            last_digest = Some(digest);
            let empty = items.is_empty();
            all.extend(items);
            if empty || last_page(&info, page) {
                return Ok(all);
            }
            if started.elapsed() >= PAGED_BUDGET {
                return Err(ProviderError::Listing(format!(
                    "it did not end within {page} pages and {} s",
                    started.elapsed().as_secs()
                )));
            }
        }
        Err(ProviderError::Listing(format!(
            "it did not end within {MAX_PAGES} pages"
        )))
    }

    /// One call: the token, the shared HTTP layer, the backoff on refused credentials.
    /// A call that changes something is unknown once an attempt may have taken effect
    /// (rule 11), whatever later attempts give.
    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<bytes::Bytes, ProviderError> {
        self.backoff.gate()?;
        let url = self.url(segments, query)?;
        let mut attempts = (!method.is_safe()).then(Attempts::default);
        let request = Request {
            method: &method,
            url: &url,
            body,
            credential: Some((reqwest::header::AUTHORIZATION, &self.authorization)),
            may_send,
            repeatable: true,
            finish: None,
            retry_answer: None,
        };
        let result = match self
            .http
            .send(&request, attempts.as_mut(), &|reply| self.check(reply))
            .await
        {
            Ok(reply) => self.check(reply),
            Err(e) => Err(e),
        };
        let result = result.map_err(|e| match &attempts {
            Some(attempts) => attempts.outcome(e),
            None => e,
        });
        self.backoff.record(&result);
        result
    }

    /// A final reply's body, or its error by status and codes.
    fn check(&self, reply: Reply) -> Result<bytes::Bytes, ProviderError> {
        let secrets = self.secrets();
        let status = reply.status.as_u16();
        if reply.status.is_success() {
            if reply.truncated {
                return Err(ProviderError::BodyTooLarge {
                    status,
                    limit: MAX_BODY_BYTES,
                });
            }
            let envelope: Envelope<serde::de::IgnoredAny> = decode(&reply.body, &secrets)?;
            if !envelope.success {
                return Err(ProviderError::ErrorInSuccess {
                    status,
                    message: messages(&envelope.errors, &reply.body, &secrets),
                });
            }
            return Ok(reply.body);
        }
        if reply.status.is_redirection() {
            let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
            return Err(reply.redirected(&refs));
        }
        let errors = serde_json::from_slice::<Envelope<serde::de::IgnoredAny>>(&reply.body)
            .map(|e| e.errors)
            .unwrap_or_default();
        let codes: Vec<u64> = errors.iter().flat_map(ApiMessage::codes).collect();
        let message = messages(&errors, &reply.body, &secrets);
        if status == 400 || status == 404 {
            if codes.iter().any(|c| NO_ROUTE_CODES.contains(c)) || status == 404 {
                return Err(ProviderError::NotFound(message));
            }
            if codes.iter().any(|c| BAD_CREDENTIAL_CODES.contains(c)) {
                return Err(ProviderError::Unauthorized(message));
            }
        }
        if status == 403 && codes.contains(&9109) {
            return Err(ProviderError::Unauthorized(message));
        }
        Err(reply.status_error(message))
    }

    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Url, ProviderError> {
        let mut url = self.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|_| ProviderError::Invalid("base_url cannot carry a path".into()))?;
            path.pop_if_empty();
            path.extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        Ok(url)
    }
}

impl Provider for CloudflareClient {
    type Account = Self;
    fn account_named(&self, _name: &str) -> Option<&Self> {
        None
    }

    async fn zone(&self, zone: &str) -> Result<HostedZone, ProviderError> {
        let z = self.get_zone(zone).await?;
        let name_servers = z
            .name_servers
            .map(crate::dns::delegation::ns_set)
            .filter(|set| !set.is_empty());
        Ok(HostedZone {
            name: z.name,
            // The zone object says nothing of DNSSEC: the key decides.
            dnssec_enabled: None,
            name_servers,
        })
    }
    async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
        Ok(self
            .list_zones()
            .await?
            .into_iter()
            .map(|z| ListedZone {
                name: z.name,
                dnssec_enabled: None,
            })
            .collect())
    }
    async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        may_send: SendPermit<'_>,
    ) -> Result<DnssecSwitched, ProviderError> {
        self.set_dnssec_with(zone, enabled, Some(may_send)).await
    }
    async fn dnssec_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        self.get_dnssec(zone).await?.signing_key(zone)
    }
    async fn largest_ttl(&self, zone: &str) -> Result<Option<u32>, ProviderError> {
        Ok(Record::largest_ttl(&self.list_records(zone).await?))
    }
    // Cloudflare shows one key and no call changes it: a rollover there is Cloudflare's
    // own, seen by the observations only.
    fn keys_api(&self) -> &'static str {
        KEYS_API
    }
}

/// Whether `page` was the last one `info` announces.
fn last_page(info: &ResultInfo, page: usize) -> bool {
    match (info.total_pages, info.total_count, info.per_page) {
        (Some(total), _, _) => page as u64 >= total,
        (None, Some(count), Some(per)) if per > 0 => page as u64 >= count.div_ceil(per),
        // Nothing says: the next page, until one is empty.
        _ => false,
    }
}

/// Zone names as Cloudflare writes them: lower case, no trailing dot.
fn api_name(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// The envelope's errors as text, else an excerpt of the body.
fn messages(errors: &[ApiMessage], body: &[u8], secrets: &[String]) -> String {
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let text: Vec<String> = errors.iter().map(ApiMessage::text).collect();
    if text.is_empty() {
        excerpt(body, secrets)
    } else {
        redact(&text.join("; "), &refs)
    }
}

/// A page's digest (not cryptographic: it tells a repeat of the page before).
fn digest(body: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut hasher);
    hasher.finish()
}

fn decode<T: DeserializeOwned>(body: &[u8], secrets: &[String]) -> Result<T, ProviderError> {
    serde_json::from_slice(body).map_err(|e| ProviderError::Decode {
        what: e.to_string(),
        excerpt: excerpt(body, secrets),
    })
}

/// The start of `body`, redacted before it is cut (a cut secret would escape redaction).
fn excerpt(body: &[u8], secrets: &[String]) -> String {
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    redact(&String::from_utf8_lossy(body), &refs)
        .chars()
        .take(EXCERPT_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_page_is_what_result_info_says_else_an_empty_one() {
        let info = |total_pages, total_count, per_page| ResultInfo {
            total_pages,
            total_count,
            per_page,
            ..ResultInfo::default()
        };
        assert!(last_page(&info(Some(3), None, None), 3));
        assert!(!last_page(&info(Some(3), None, None), 2));
        assert!(last_page(&info(None, Some(101), Some(50)), 3));
        assert!(!last_page(&info(None, Some(101), Some(50)), 2));
        assert!(!last_page(&info(None, None, None), 7));
    }

    #[test]
    fn errors_read_with_their_codes_and_chain_and_no_token() {
        let body = br#"{"success":false,"errors":[{"code":6003,"message":"Invalid request headers s3cr3t","error_chain":[{"code":6111,"message":"Invalid format for Authorization header"}]}],"messages":[],"result":null}"#;
        let envelope: Envelope<serde::de::IgnoredAny> = serde_json::from_slice(body).unwrap();
        assert_eq!(envelope.errors[0].codes(), vec![6003, 6111]);
        assert_eq!(
            messages(&envelope.errors, body, &["s3cr3t".into()]),
            "6003: Invalid request headers [redacted] (6111: Invalid format for Authorization header)"
        );
        assert_eq!(
            messages(&[], b"<html>bad gateway</html>", &[]),
            "<html>bad gateway</html>"
        );
    }
}
