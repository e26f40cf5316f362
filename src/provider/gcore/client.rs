//! The HTTP client for the provider's DNS API v2.
//!
//! One private path, [`GcoreClient::call`], carries every request: it adds the
//! `Authorization` header, retries what is worth retrying, renews bearer tokens once on a
//! 401 (the authorization and its tokens: `super::auth`), and turns statuses into
//! [`ProviderError`]s.
//!
//! Hardening, in the HTTP layer every client shares (`provider::http`):
//! redirects are never followed; a `Retry-After` holds every call of the client (all
//! zones) until it has passed; no answer body is read beyond [`MAX_BODY_BYTES`]; every
//! request says `Accept: application/json`.

use std::sync::Arc;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use url::Url;

use super::auth::{Auth, AuthBackoff};
use super::settings::{Credentials, ProviderSettings};
use super::types::{CreatedZone, NewZone, ParentDsHint, ProviderZone, RawDnssec, Rrset, RrsetBody};
use crate::condition::Condition;
use crate::dnssec::DnssecKey;
use crate::provider::http::{Http, MAX_BODY_BYTES, Reply, Request};
use crate::provider::{
    Attempts, DnssecSwitched, HostedZone, ListedZone, Provider, ProviderError, SendPermit,
};
use crate::retry::RetryPolicy;
use crate::secret::{Secret, redact};

/// The provider's `error` text when DNSSEC is off (DESIGN.md section 7, GET …/dnssec).
pub const DNSSEC_DISABLED_MESSAGE: &str = "dnssec is disabled";
/// Page size of the list calls.
pub const PAGE_LIMIT: usize = 100;
/// The most pages one listing takes (a million entries), whatever `total_amount` says.
pub const MAX_PAGES: usize = 10_000;
/// The longest one listing pages on.
pub const PAGED_BUDGET: Duration = Duration::from_secs(600);
/// Longest body excerpt an error carries.
const EXCERPT_CHARS: usize = 160;
pub struct GcoreClient {
    http: Http,
    base: Url,
    pub(super) auth: Auth,
    /// While the provider refuses the account's credentials, calls wait.
    pub(super) backoff: AuthBackoff,
}

/// One page of a listing: the entries read, how many the page had, `total_amount`, and
/// a digest of the page to tell a page that repeats.
struct Paged<T> {
    items: Vec<T>,
    entries: usize,
    total: usize,
    digest: u64,
}

impl std::fmt::Debug for GcoreClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcoreClient")
            .field("base", &self.base.as_str())
            .field(
                "auth",
                &match self.auth {
                    Auth::ApiKey(_) => "APIKey",
                    Auth::Login(_) => "Bearer",
                },
            )
            .finish()
    }
}

impl GcoreClient {
    pub fn new(
        settings: &ProviderSettings,
        credentials: Credentials,
    ) -> Result<Self, ProviderError> {
        let retry = RetryPolicy {
            max_attempts: settings.max_attempts,
            budget: settings.retry_budget,
            ..RetryPolicy::default()
        };
        Self::with_policy(
            settings.base_url.clone(),
            credentials,
            retry,
            settings.request_timeout,
        )
    }

    pub fn with_policy(
        base: Url,
        credentials: Credentials,
        retry: RetryPolicy,
        request_timeout: Duration,
    ) -> Result<Self, ProviderError> {
        let http = Http::new(retry, request_timeout)?;
        Ok(Self {
            http,
            base,
            auth: Auth::new(credentials),
            backoff: AuthBackoff::new(),
        })
    }

    /// Whether the provider refuses the account's credentials (the daemon-wide
    /// `provider_auth_failing`).
    pub fn auth_condition(&self) -> Arc<Condition> {
        self.backoff.refused.clone()
    }

    // ---- the calls ---------------------------------------------------------------------

    pub async fn create_zone(&self, zone: &NewZone) -> Result<CreatedZone, ProviderError> {
        let body = to_json(zone)?;
        self.json(Method::POST, &["zones"], &[], Some(&body)).await
    }

    pub async fn get_zone(&self, zone: &str) -> Result<ProviderZone, ProviderError> {
        self.json(Method::GET, &["zones", api_name(zone)], &[], None)
            .await
    }

    pub async fn delete_zone(&self, zone: &str) -> Result<(), ProviderError> {
        self.call(Method::DELETE, &["zones", api_name(zone)], &[], None)
            .await
            .map(drop)
    }

    /// Every zone of the account, following `offset` until `total_amount` is reached.
    ///
    /// A zone entry that cannot be read at all (no name, say) is skipped with a warning, so
    /// that one odd zone does not hide the others; a page of which no entry can be read is
    /// an error, not an empty account. Missing optional fields are not "unreadable" (see
    /// [`ProviderZone`]).
    pub async fn list_zones(&self) -> Result<Vec<ProviderZone>, ProviderError> {
        self.zone_listing().await
    }

    /// The same listing, read into names and `dnssec_enabled` only, page by page.
    pub async fn list_zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
        self.zone_listing().await
    }

    /// Every page of `GET /dns/v2/zones`, each entry read as a `T`.
    async fn zone_listing<T: DeserializeOwned>(&self) -> Result<Vec<T>, ProviderError> {
        self.paged(|offset| async move {
            let bytes = self
                .call(Method::GET, &["zones"], &page_query(offset), None)
                .await?;
            let (items, entries, total) = zone_page(&bytes, &self.secrets())?;
            Ok(Paged {
                items,
                entries,
                total,
                digest: digest(&bytes),
            })
        })
        .await
    }

    pub async fn create_rrset(
        &self,
        zone: &str,
        name: &str,
        rtype: &str,
        body: &RrsetBody,
    ) -> Result<Rrset, ProviderError> {
        self.rrset_call(Method::POST, zone, name, rtype, Some(body))
            .await
    }

    /// Creates or replaces the RRset.
    pub async fn put_rrset(
        &self,
        zone: &str,
        name: &str,
        rtype: &str,
        body: &RrsetBody,
    ) -> Result<Rrset, ProviderError> {
        self.rrset_call(Method::PUT, zone, name, rtype, Some(body))
            .await
    }

    pub async fn get_rrset(
        &self,
        zone: &str,
        name: &str,
        rtype: &str,
    ) -> Result<Rrset, ProviderError> {
        self.rrset_call(Method::GET, zone, name, rtype, None).await
    }

    pub async fn delete_rrset(
        &self,
        zone: &str,
        name: &str,
        rtype: &str,
    ) -> Result<(), ProviderError> {
        let rtype = rtype.to_ascii_uppercase();
        self.call(
            Method::DELETE,
            &["zones", api_name(zone), api_name(name), &rtype],
            &[],
            None,
        )
        .await
        .map(drop)
    }

    pub async fn list_rrsets(&self, zone: &str) -> Result<Vec<Rrset>, ProviderError> {
        #[derive(Deserialize)]
        struct Page {
            rrsets: Vec<Rrset>,
            total_amount: usize,
        }
        // Strict, unlike the zone list: the largest TTL is taken over every RRset, and
        // skipping one could make it too small. One unreadable RRset fails the listing.
        self.paged(|offset| async move {
            let bytes = self
                .call(
                    Method::GET,
                    &["zones", api_name(zone), "rrsets"],
                    &page_query(offset),
                    None,
                )
                .await?;
            let page: Page = decode(&bytes, &self.secrets())?;
            Ok(Paged {
                entries: page.rrsets.len(),
                items: page.rrsets,
                total: page.total_amount,
                digest: digest(&bytes),
            })
        })
        .await
    }

    /// `PATCH …/dnssec`. Switching on returns the new key, checked like `get_dnssec`.
    ///
    /// Sends `{"enabled": …}` and nothing else: never `force_disable`. A 409 on switching
    /// off means the provider's own parent scan still sees a DS; its scan may lag ours
    /// (our guard asked every parent address just before), but overriding it is safe only
    /// if we are sure that it lags, and we cannot be. So 409 is
    /// [`ProviderError::Conflict`]: refused, try again later, never success.
    pub async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
    ) -> Result<DnssecSwitched, ProviderError> {
        self.set_dnssec_with(zone, enabled, None).await
    }

    /// [`set_dnssec`](Self::set_dnssec), asking `may_send` right before every attempt
    /// leaves (the first, a retry, after a token renewal), once its turn among the
    /// requests in flight has come: several daemons on one database must not send a
    /// switch once their lease on the zone is gone, however long it waited for its turn.
    pub async fn set_dnssec_with(
        &self,
        zone: &str,
        enabled: bool,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<DnssecSwitched, ProviderError> {
        #[derive(Deserialize)]
        struct Message {
            #[serde(default)]
            message: Option<String>,
        }
        let body = serde_json::json!({ "enabled": enabled });
        let bytes = self
            .call_with(
                Method::PATCH,
                &["zones", api_name(zone), "dnssec"],
                &[],
                Some(&body),
                may_send,
            )
            .await?;
        let message = decode::<Message>(&bytes, &self.secrets())?.message;
        let key = if enabled {
            let raw: RawDnssec = decode(&bytes, &self.secrets())?;
            Some(raw.verify(zone)?)
        } else {
            None
        };
        Ok(DnssecSwitched { message, key })
    }

    /// `GET …/dnssec`, every field checked against the public key.
    pub async fn get_dnssec(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        let raw: RawDnssec = self
            .json(Method::GET, &["zones", api_name(zone), "dnssec"], &[], None)
            .await?;
        raw.verify(zone)
    }

    pub async fn get_parent_ds(&self, zone: &str) -> Result<ParentDsHint, ProviderError> {
        self.json(
            Method::GET,
            &["zones", api_name(zone), "dnssec", "parent-ds"],
            &[],
            None,
        )
        .await
    }

    // ---- plumbing ----------------------------------------------------------------------

    async fn rrset_call(
        &self,
        method: Method,
        zone: &str,
        name: &str,
        rtype: &str,
        body: Option<&RrsetBody>,
    ) -> Result<Rrset, ProviderError> {
        let rtype = rtype.to_ascii_uppercase();
        let body = body.map(to_json).transpose()?;
        self.json(
            method,
            &["zones", api_name(zone), api_name(name), &rtype],
            &[],
            body.as_ref(),
        )
        .await
    }

    /// Every page of a listing ([`paged`], within [`PAGED_BUDGET`]).
    async fn paged<T, F, Fut>(&self, fetch: F) -> Result<Vec<T>, ProviderError>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<Paged<T>, ProviderError>>,
    {
        paged(fetch, PAGED_BUDGET).await
    }

    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
    ) -> Result<T, ProviderError> {
        let bytes = self.call(method, segments, query, body).await?;
        decode(&bytes, &self.secrets())
    }

    /// One API call under `/dns/v2/`: authorization, retries, one token renewal on 401.
    async fn call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
    ) -> Result<bytes::Bytes, ProviderError> {
        self.call_with(method, segments, query, body, None).await
    }

    /// [`call`](Self::call), asking `may_send` (if any) right before every attempt leaves.
    /// While the provider refuses the account's credentials, fails at once unsent.
    async fn call_with(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<bytes::Bytes, ProviderError> {
        self.backoff.gate()?;
        let result = self
            .authorized_call(method, segments, query, body, may_send)
            .await;
        self.backoff.record(&result);
        result
    }

    /// One call with its authorization, renewed once on a 401.
    async fn authorized_call(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&serde_json::Value>,
        may_send: Option<SendPermit<'_>>,
    ) -> Result<bytes::Bytes, ProviderError> {
        let url = self.url(&["dns", "v2"], segments, query)?;
        let (mut authorization, mut generation) = self.authorization().await?;
        let mut renewed = false;
        // A call that changes something: once an attempt may have taken effect, its
        // outcome stays unknown whatever the later attempts give (safety rule 11).
        let mut attempts = (!method.is_safe()).then(Attempts::default);
        let outcome = |attempts: &Option<Attempts>, e| match attempts {
            Some(attempts) => attempts.outcome(e),
            None => e,
        };
        loop {
            let reply = match self
                .send(
                    &method,
                    &url,
                    body,
                    Some(&authorization),
                    may_send,
                    attempts.as_mut(),
                )
                .await
            {
                Ok(reply) => reply,
                Err(e) => return Err(outcome(&attempts, e)),
            };
            if reply.status == StatusCode::UNAUTHORIZED
                && let Auth::Login(login) = &self.auth
                && !renewed
            {
                renewed = true;
                tracing::debug!("provider answered 401; renewing the access token");
                (authorization, generation) = match self.renew(login, generation).await {
                    Ok(renewed) => renewed,
                    Err(e) => return Err(outcome(&attempts, e)),
                };
                continue;
            }
            return self.check(reply).map_err(|e| outcome(&attempts, e));
        }
    }

    /// Sends one request through the shared HTTP layer ([`Http::send`]: retries, the
    /// `Retry-After` hold, the caller's permission), with this API's `Authorization`.
    pub(super) async fn send(
        &self,
        method: &Method,
        url: &Url,
        body: Option<&serde_json::Value>,
        authorization: Option<&Secret>,
        may_send: Option<SendPermit<'_>>,
        attempts: Option<&mut Attempts>,
    ) -> Result<Reply, ProviderError> {
        let request = Request {
            method,
            url,
            body,
            credential: authorization.map(|a| (reqwest::header::AUTHORIZATION, a)),
            may_send,
            repeatable: true,
            finish: None,
            retry_answer: None,
        };
        self.http
            .send(&request, attempts, &|reply| self.check(reply))
            .await
    }

    /// Maps a final reply to its body or a typed error.
    fn check(&self, reply: Reply) -> Result<bytes::Bytes, ProviderError> {
        self.check_with(reply, &self.secrets())
    }

    pub(super) fn check_with(
        &self,
        reply: Reply,
        secrets: &[String],
    ) -> Result<bytes::Bytes, ProviderError> {
        let status = reply.status.as_u16();
        if reply.status.is_success() {
            if reply.truncated {
                return Err(ProviderError::BodyTooLarge {
                    status,
                    limit: MAX_BODY_BYTES,
                });
            }
            if let Some(message) = error_in_success(&reply.body, secrets) {
                return Err(ProviderError::ErrorInSuccess { status, message });
            }
            return Ok(reply.body);
        }
        if reply.status.is_redirection() {
            let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
            return Err(reply.redirected(&refs));
        }
        let message = error_message(&reply.body, secrets);
        if status == 400 && message.eq_ignore_ascii_case(DNSSEC_DISABLED_MESSAGE) {
            return Err(ProviderError::DnssecDisabled);
        }
        Err(reply.status_error(message))
    }

    pub(super) fn url(
        &self,
        prefix: &[&str],
        segments: &[&str],
        query: &[(&str, String)],
    ) -> Result<Url, ProviderError> {
        let mut url = self.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .map_err(|_| ProviderError::Invalid("base_url cannot carry a path".into()))?;
            path.pop_if_empty();
            path.extend(prefix);
            path.extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        Ok(url)
    }
}

impl Provider for GcoreClient {
    type Account = Self;
    fn account_named(&self, _name: &str) -> Option<&Self> {
        None
    }

    async fn zone(&self, zone: &str) -> Result<HostedZone, ProviderError> {
        let z = GcoreClient::get_zone(self, zone).await?;
        Ok(HostedZone {
            name_servers: z.apex_ns(),
            dnssec_enabled: z.dnssec_enabled,
            name: z.name,
        })
    }
    async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
        GcoreClient::list_zone_flags(self).await
    }
    async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        may_send: SendPermit<'_>,
    ) -> Result<DnssecSwitched, ProviderError> {
        GcoreClient::set_dnssec_with(self, zone, enabled, Some(may_send)).await
    }
    async fn dnssec_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        GcoreClient::get_dnssec(self, zone).await
    }
    async fn largest_ttl(&self, zone: &str) -> Result<Option<u32>, ProviderError> {
        let sets = GcoreClient::list_rrsets(self, zone).await?;
        Ok(Rrset::largest_ttl(&sets))
    }
    // The DNSSEC object shows one key and no call changes keys: a rollover there is the
    // provider's own, seen by the observations only.
    fn keys_api(&self) -> &'static str {
        KEYS_API
    }
}

/// Who refuses the key calls.
const KEYS_API: &str = "the Gcore API";

/// Follows `offset` page by page, the offset moving by the entries, kept or not.
/// Bounded whatever the provider answers: a `total_amount` beyond [`MAX_PAGES`] pages, a
/// page that repeats the one before (an offset the provider ignores), [`MAX_PAGES`] pages
/// or `budget` of time end it; each is an error, never a partial list.
async fn paged<T, F, Fut>(fetch: F, budget: Duration) -> Result<Vec<T>, ProviderError>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<Paged<T>, ProviderError>>,
{
    let started = Instant::now();
    let mut all = Vec::new();
    let mut offset = 0;
    let mut last_digest = None;
    let mut pages = 0;
    loop {
        pages += 1;
        let page = fetch(offset).await?;
        if page.total > MAX_PAGES * PAGE_LIMIT {
            return Err(ProviderError::Listing(format!(
                "the provider reports {} items, more than the {MAX_PAGES} pages of {PAGE_LIMIT} a listing may take",
                page.total
            )));
        }
        if page.entries > 0 && last_digest == Some(page.digest) {
            return Err(ProviderError::Listing(format!(
                "the page at offset {offset} repeats the one before it (the provider ignores the offset?)"
            )));
        }
        last_digest = Some(page.digest);
        all.extend(page.items);
        offset += page.entries;
        if offset >= page.total {
            return Ok(all);
        }
        if page.entries == 0 {
            return Err(ProviderError::Listing(format!(
                "the provider reports {} items but the page at offset {offset} is empty",
                page.total
            )));
        }
        if pages >= MAX_PAGES || started.elapsed() >= budget {
            return Err(ProviderError::Listing(format!(
                "it did not end within {pages} pages and {} s (offset {offset} of {})",
                started.elapsed().as_secs(),
                page.total
            )));
        }
    }
}

/// One page of the zone list: the zones that can be read, how many entries the page had,
/// and `total_amount`.
fn zone_page<T: DeserializeOwned>(
    body: &[u8],
    secrets: &[String],
) -> Result<(Vec<T>, usize, usize), ProviderError> {
    #[derive(Deserialize)]
    struct Page {
        zones: Vec<serde_json::Value>,
        total_amount: usize,
    }
    let page: Page = decode(body, secrets)?;
    let got = page.zones.len();
    let mut zones = Vec::with_capacity(got);
    let mut first_error = None;
    for entry in page.zones {
        match T::deserialize(&entry) {
            Ok(zone) => zones.push(zone),
            Err(e) => {
                let excerpt = excerpt(entry.to_string().as_bytes(), secrets);
                tracing::warn!(error = %e, entry = %excerpt, "skipping a zone entry of the provider's list that cannot be read");
                first_error.get_or_insert(ProviderError::Decode {
                    what: format!("no zone entry of the page can be read: {e}"),
                    excerpt,
                });
            }
        }
    }
    match first_error {
        Some(error) if zones.is_empty() => Err(error),
        _ => Ok((zones, got, page.total_amount)),
    }
}

/// The message of a 2xx whose body is nonetheless the error form `{"error": …}` (a
/// non-empty string or any other non-null value).
fn error_in_success(body: &[u8], secrets: &[String]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let message = match value.get("error")? {
        serde_json::Value::Null => return None,
        serde_json::Value::String(s) if s.trim().is_empty() => return None,
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    Some(
        redact(&message, &refs)
            .chars()
            .take(EXCERPT_CHARS)
            .collect(),
    )
}

/// A page's digest (not cryptographic: it tells a repeat of the page before).
fn digest(body: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut hasher);
    hasher.finish()
}

/// The provider names zones and RRsets without the trailing dot.
fn api_name(name: &str) -> &str {
    name.strip_suffix('.').unwrap_or(name)
}

fn page_query(offset: usize) -> Vec<(&'static str, String)> {
    vec![
        ("limit", PAGE_LIMIT.to_string()),
        ("offset", offset.to_string()),
    ]
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, ProviderError> {
    serde_json::to_value(value).map_err(|e| ProviderError::Invalid(e.to_string()))
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

/// The provider's message: `{"error":…}`, the login form `{"errors":{"errors":[…]}}`, a
/// `detail`, or else an excerpt of the body.
pub(super) fn error_message(body: &[u8], secrets: &[String]) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        v.get("error")
            .and_then(|e| e.as_str().map(str::to_string))
            .or_else(|| {
                v.pointer("/errors/errors").and_then(|list| {
                    list.as_array().map(|items| {
                        items
                            .iter()
                            .filter_map(|i| i.as_str())
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                })
            })
            .or_else(|| v.get("detail").and_then(|d| d.as_str().map(str::to_string)))
    });
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    match found {
        Some(message) => redact(&message, &refs),
        None => excerpt(body, secrets),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page of `entries` numbers from `offset`, `digest` as given.
    fn page(offset: usize, entries: usize, total: usize, digest: u64) -> Paged<usize> {
        Paged {
            items: (offset..offset + entries).collect(),
            entries,
            total,
            digest,
        }
    }

    #[tokio::test]
    async fn a_listing_is_bounded_whatever_the_provider_answers() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let asked = AtomicUsize::new(0);
        let ask = || asked.fetch_add(1, Ordering::SeqCst);
        let minute = Duration::from_secs(60);

        // Honest: every page, once.
        let all = paged(
            |o| {
                ask();
                async move { Ok(page(o, (250 - o).min(100), 250, o as u64)) }
            },
            minute,
        )
        .await
        .unwrap();
        assert_eq!(all, (0..250).collect::<Vec<_>>());
        assert_eq!(asked.swap(0, Ordering::SeqCst), 3);

        // The same full page whatever the offset: cut at the second.
        let e = paged(
            |_| {
                ask();
                async { Ok(page(0, 100, 10_000, 7)) }
            },
            minute,
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("repeats the one before"), "{e}");
        assert_eq!(asked.swap(0, Ordering::SeqCst), 2);

        // A total beyond the cap: at the first page.
        let e = paged(
            |o| {
                ask();
                async move { Ok(page(o, 100, 1_000_000_000, o as u64)) }
            },
            minute,
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("more than the"), "{e}");
        assert_eq!(asked.swap(0, Ordering::SeqCst), 1);

        // New pages forever within the cap: cut by the time budget.
        let e = paged(
            |o| {
                ask();
                async move { Ok(page(o, 100, MAX_PAGES * PAGE_LIMIT, o as u64)) }
            },
            Duration::ZERO,
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("did not end within 1 pages"), "{e}");
        assert_eq!(asked.swap(0, Ordering::SeqCst), 1);

        // ... and by the page cap.
        let e = paged(
            |o| {
                ask();
                async move { Ok(page(o, 1, MAX_PAGES * PAGE_LIMIT, o as u64)) }
            },
            minute,
        )
        .await
        .unwrap_err();
        assert!(e.to_string().contains("pages"), "{e}");
        assert_eq!(asked.load(Ordering::SeqCst), MAX_PAGES);
    }

    #[test]
    fn a_2xx_error_body_is_found_and_an_empty_one_is_not() {
        assert_eq!(
            error_in_success(br#"{"error":"boom k3y-s3cret"}"#, &["k3y-s3cret".into()]),
            Some("boom [redacted]".into())
        );
        assert_eq!(
            error_in_success(br#"{"error":{"code":5}}"#, &[]),
            Some(r#"{"code":5}"#.into())
        );
        for body in [
            &br#"{"error":null,"id":1}"#[..],
            br#"{"error":""}"#,
            br#"{"id":1}"#,
            b"not json",
        ] {
            assert_eq!(error_in_success(body, &[]), None);
        }
    }

    #[test]
    fn a_zone_page_skips_what_it_cannot_read() {
        let page = br#"{"zones":[{"name":"a.b"},{"name":null},7,{"name":"c.d","dnssec_enabled":null},{"name":"e.f","dnssec_enabled":true,"records":[{"name":"e.f","type":"NS"}]}],"total_amount":9}"#;
        let (zones, got, total) = zone_page::<ProviderZone>(page, &[]).unwrap();
        let names: Vec<_> = zones.iter().map(|z| z.name.as_str()).collect();
        assert_eq!((names, got, total), (vec!["a.b", "c.d", "e.f"], 5, 9));
        // The lean reading skips and keeps the same entries.
        let (flags, got, total) = zone_page::<ListedZone>(page, &[]).unwrap();
        let lean: Vec<ListedZone> = zones.into_iter().map(ListedZone::from).collect();
        assert_eq!((flags, got, total), (lean, 5, 9));
        assert!(matches!(
            zone_page::<ProviderZone>(br#"{"zones":[{"id":1}],"total_amount":1}"#, &[]),
            Err(ProviderError::Decode { .. })
        ));
        assert!(matches!(
            zone_page::<ListedZone>(br#"{"zones":[{"id":1}],"total_amount":1}"#, &[]),
            Err(ProviderError::Decode { .. })
        ));
        let (zones, got, _) =
            zone_page::<ProviderZone>(br#"{"zones":[],"total_amount":0}"#, &[]).unwrap();
        assert!(zones.is_empty() && got == 0);
    }

    #[test]
    fn error_messages_in_every_documented_shape() {
        assert_eq!(
            error_message(br#"{"error":"zone is not found"}"#, &[]),
            "zone is not found"
        );
        assert_eq!(
            error_message(
                br#"{"errors":{"errors":["No active account found with the given credentials."]}}"#,
                &[]
            ),
            "No active account found with the given credentials."
        );
        assert_eq!(
            error_message(b"<html>bad gateway</html>", &[]),
            "<html>bad gateway</html>"
        );
        assert_eq!(
            error_message(br#"{"error":"bad key k3y-s3cret"}"#, &["k3y-s3cret".into()]),
            "bad key [redacted]"
        );
    }
}
