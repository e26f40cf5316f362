//! The HTTP client for the provider's DNS API v2.
//!
//! One private path, [`GcoreClient::call`], carries every request: it adds the
//! `Authorization` header, retries what is worth retrying, renews bearer tokens once on a
//! 401, and turns statuses into [`ProviderError`]s.

use std::collections::VecDeque;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::sync::Mutex;
use tokio::time::Instant;
use url::Url;

use super::error::ProviderError;
use super::retry::{RetryPolicy, is_retryable_status, parse_retry_after};
use super::types::{
    CreatedZone, DnssecKey, NewZone, ParentDsHint, RawDnssec, Rrset, RrsetBody, Zone,
};
use super::{DnssecSwitched, Provider};
use crate::config::{Credentials, ProviderSettings};
use crate::secret::{Secret, redact};

/// The provider's `error` text when DNSSEC is off (gcore-api.md, GET …/dnssec).
pub const DNSSEC_DISABLED_MESSAGE: &str = "dnssec is disabled";
/// Page size of the list calls.
pub const PAGE_LIMIT: usize = 100;
/// The login endpoint allows at most this many requests per second (interface document §8).
pub const LOGINS_PER_SECOND: usize = 5;
/// Longest body excerpt an error carries.
const EXCERPT_CHARS: usize = 160;

pub struct GcoreClient {
    http: reqwest::Client,
    base: Url,
    auth: Auth,
    retry: RetryPolicy,
}

enum Auth {
    ApiKey(Secret),
    Login(LoginAuth),
}

struct LoginAuth {
    username: String,
    password: Secret,
    tokens: Mutex<Tokens>,
    limiter: LoginLimiter,
}

/// The current token pair; `generation` grows with every renewal so that concurrent
/// requests hit by the same expiry renew once, not once each.
#[derive(Default)]
struct Tokens {
    access: Option<Secret>,
    refresh: Option<Secret>,
    generation: u64,
}

#[derive(Deserialize)]
struct TokenPair {
    access: String,
    refresh: String,
}

/// What one attempt, or the last of its retries, returned.
struct Reply {
    status: StatusCode,
    retry_after: Option<Duration>,
    body: bytes::Bytes,
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
        let http = reqwest::Client::builder()
            .timeout(request_timeout)
            .connect_timeout(request_timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("dnssec-warden/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Transport(e.to_string()))?;
        let auth = match credentials {
            Credentials::ApiKey(key) => Auth::ApiKey(key),
            Credentials::Login { username, password } => Auth::Login(LoginAuth {
                username,
                password,
                tokens: Mutex::new(Tokens::default()),
                limiter: LoginLimiter::default(),
            }),
        };
        Ok(Self {
            http,
            base,
            auth,
            retry,
        })
    }

    // ---- the calls ---------------------------------------------------------------------

    pub async fn create_zone(&self, zone: &NewZone) -> Result<CreatedZone, ProviderError> {
        let body = to_json(zone)?;
        self.json(Method::POST, &["zones"], &[], Some(&body)).await
    }

    pub async fn get_zone(&self, zone: &str) -> Result<Zone, ProviderError> {
        self.json(Method::GET, &["zones", api_name(zone)], &[], None)
            .await
    }

    pub async fn delete_zone(&self, zone: &str) -> Result<(), ProviderError> {
        self.call(Method::DELETE, &["zones", api_name(zone)], &[], None)
            .await
            .map(drop)
    }

    /// Every zone of the account, following `offset` until `total_amount` is reached.
    pub async fn list_zones(&self) -> Result<Vec<Zone>, ProviderError> {
        #[derive(Deserialize)]
        struct Page {
            zones: Vec<Zone>,
            total_amount: usize,
        }
        self.paged(|offset| async move {
            let page: Page = self
                .json(Method::GET, &["zones"], &page_query(offset), None)
                .await?;
            Ok((page.zones, page.total_amount))
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
        self.paged(|offset| async move {
            let page: Page = self
                .json(
                    Method::GET,
                    &["zones", api_name(zone), "rrsets"],
                    &page_query(offset),
                    None,
                )
                .await?;
            Ok((page.rrsets, page.total_amount))
        })
        .await
    }

    /// `PATCH …/dnssec`. Switching on returns the new key, checked like `get_dnssec`.
    pub async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
    ) -> Result<DnssecSwitched, ProviderError> {
        #[derive(Deserialize)]
        struct Message {
            #[serde(default)]
            message: Option<String>,
        }
        let body = serde_json::json!({ "enabled": enabled });
        let bytes = self
            .call(
                Method::PATCH,
                &["zones", api_name(zone), "dnssec"],
                &[],
                Some(&body),
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

    async fn paged<T, F, Fut>(&self, fetch: F) -> Result<Vec<T>, ProviderError>
    where
        F: Fn(usize) -> Fut,
        Fut: Future<Output = Result<(Vec<T>, usize), ProviderError>>,
    {
        let mut all = Vec::new();
        loop {
            let (items, total) = fetch(all.len()).await?;
            let got = items.len();
            all.extend(items);
            if all.len() >= total {
                return Ok(all);
            }
            if got == 0 {
                return Err(ProviderError::Decode {
                    what: format!(
                        "the provider reports {total} items but the page at offset {} is empty",
                        all.len()
                    ),
                    excerpt: String::new(),
                });
            }
        }
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
        let url = self.url(&["dns", "v2"], segments, query)?;
        let (mut authorization, mut generation) = self.authorization().await?;
        let mut renewed = false;
        loop {
            let reply = self.send(&method, &url, body, Some(&authorization)).await?;
            if reply.status == StatusCode::UNAUTHORIZED
                && let Auth::Login(login) = &self.auth
                && !renewed
            {
                renewed = true;
                tracing::info!("provider answered 401; renewing the access token");
                (authorization, generation) = self.renew(login, generation).await?;
                continue;
            }
            return self.check(reply);
        }
    }

    /// Sends one request, retrying transport errors and retryable statuses.
    async fn send(
        &self,
        method: &Method,
        url: &Url,
        body: Option<&serde_json::Value>,
        authorization: Option<&Secret>,
    ) -> Result<Reply, ProviderError> {
        let started = Instant::now();
        let mut failed = 0;
        loop {
            let mut request = self.http.request(method.clone(), url.clone());
            if let Some(value) = authorization {
                request = request.header(reqwest::header::AUTHORIZATION, value.expose());
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            let outcome = async {
                let response = request.send().await?;
                let status = response.status();
                let retry_after = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_retry_after);
                let body = response.bytes().await?;
                Ok::<_, reqwest::Error>(Reply {
                    status,
                    retry_after,
                    body,
                })
            }
            .await;
            failed += 1;
            let (retry_after, last) = match outcome {
                Ok(reply) if !is_retryable_status(reply.status.as_u16()) => return Ok(reply),
                Ok(reply) => {
                    tracing::warn!(%method, path = url.path(), status = reply.status.as_u16(), attempt = failed, "provider call failed");
                    (reply.retry_after, Ok(reply))
                }
                Err(err) => {
                    let text = transport_text(&err);
                    tracing::warn!(%method, path = url.path(), error = %text, attempt = failed, "provider call failed");
                    (None, Err(ProviderError::Transport(text)))
                }
            };
            let wait = self.retry.delay(failed, retry_after);
            if !self.retry.allows(failed, started.elapsed(), wait) {
                return last;
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Maps a final reply to its body or a typed error.
    fn check(&self, reply: Reply) -> Result<bytes::Bytes, ProviderError> {
        let status = reply.status.as_u16();
        if reply.status.is_success() {
            return Ok(reply.body);
        }
        let message = error_message(&reply.body, &self.secrets());
        Err(match status {
            400 if message.eq_ignore_ascii_case(DNSSEC_DISABLED_MESSAGE) => {
                ProviderError::DnssecDisabled
            }
            401 => ProviderError::Unauthorized(message),
            403 => ProviderError::Forbidden(message),
            404 => ProviderError::NotFound(message),
            409 => ProviderError::Conflict(message),
            429 => ProviderError::RateLimited {
                retry_after: reply.retry_after,
            },
            408 | 500..=599 => ProviderError::Server { status, message },
            _ => ProviderError::Rejected { status, message },
        })
    }

    /// The `Authorization` value for the next request, logging in first if needed.
    async fn authorization(&self) -> Result<(Secret, u64), ProviderError> {
        match &self.auth {
            Auth::ApiKey(key) => Ok((Secret::new(format!("APIKey {}", key.expose())), 0)),
            Auth::Login(login) => {
                let mut tokens = login.tokens.lock().await;
                if tokens.access.is_none() {
                    self.login(login, &mut tokens).await?;
                }
                Ok(bearer(&tokens))
            }
        }
    }

    /// After a 401: refresh once; if that fails, log in again.
    async fn renew(&self, login: &LoginAuth, seen: u64) -> Result<(Secret, u64), ProviderError> {
        let mut tokens = login.tokens.lock().await;
        if tokens.generation != seen && tokens.access.is_some() {
            // Another request renewed while this one waited.
            return Ok(bearer(&tokens));
        }
        if let Some(refresh) = tokens.refresh.take() {
            let body = serde_json::json!({ "refresh": refresh.expose() });
            let url = self.url(&["iam", "auth", "jwt", "refresh"], &[], &[])?;
            match self.send(&Method::POST, &url, Some(&body), None).await {
                Ok(reply) if reply.status.is_success() => {
                    let pair: TokenPair = decode(&reply.body, &self.secrets())?;
                    store(&mut tokens, pair);
                    return Ok(bearer(&tokens));
                }
                Ok(reply) => {
                    tracing::info!(
                        status = reply.status.as_u16(),
                        "token refresh refused; logging in again"
                    );
                }
                Err(err) => tracing::info!(error = %err, "token refresh failed; logging in again"),
            }
        }
        self.login(login, &mut tokens).await?;
        Ok(bearer(&tokens))
    }

    async fn login(&self, login: &LoginAuth, tokens: &mut Tokens) -> Result<(), ProviderError> {
        login.limiter.acquire().await;
        tracing::info!("logging in to the provider");
        let body = serde_json::json!({
            "username": login.username,
            "password": login.password.expose(),
        });
        let url = self.url(&["iam", "auth", "jwt", "login"], &[], &[])?;
        let reply = self.send(&Method::POST, &url, Some(&body), None).await?;
        match reply.status.as_u16() {
            200..=299 => {
                let pair: TokenPair = decode(&reply.body, &self.secrets())?;
                store(tokens, pair);
                Ok(())
            }
            400 | 401 | 403 => {
                tokens.access = None;
                tokens.refresh = None;
                Err(ProviderError::LoginFailed(error_message(
                    &reply.body,
                    &self.secrets(),
                )))
            }
            _ => self.check(reply).map(drop),
        }
    }

    fn url(
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

    /// Everything that must never appear in an error or a log line.
    fn secrets(&self) -> Vec<String> {
        match &self.auth {
            Auth::ApiKey(key) => vec![key.expose().to_string()],
            Auth::Login(login) => {
                let mut all = vec![login.password.expose().to_string()];
                if let Ok(tokens) = login.tokens.try_lock() {
                    all.extend(tokens.access.iter().map(|s| s.expose().to_string()));
                    all.extend(tokens.refresh.iter().map(|s| s.expose().to_string()));
                }
                all
            }
        }
    }
}

impl Provider for GcoreClient {
    async fn get_zone(&self, zone: &str) -> Result<Zone, ProviderError> {
        GcoreClient::get_zone(self, zone).await
    }
    async fn list_zones(&self) -> Result<Vec<Zone>, ProviderError> {
        GcoreClient::list_zones(self).await
    }
    async fn set_dnssec(&self, zone: &str, enabled: bool) -> Result<DnssecSwitched, ProviderError> {
        GcoreClient::set_dnssec(self, zone, enabled).await
    }
    async fn get_dnssec(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        GcoreClient::get_dnssec(self, zone).await
    }
    async fn list_rrsets(&self, zone: &str) -> Result<Vec<Rrset>, ProviderError> {
        GcoreClient::list_rrsets(self, zone).await
    }
    async fn get_parent_ds(&self, zone: &str) -> Result<ParentDsHint, ProviderError> {
        GcoreClient::get_parent_ds(self, zone).await
    }
}

fn store(tokens: &mut Tokens, pair: TokenPair) {
    tokens.access = Some(Secret::new(pair.access));
    tokens.refresh = Some(Secret::new(pair.refresh));
    tokens.generation += 1;
}

fn bearer(tokens: &Tokens) -> (Secret, u64) {
    let access = tokens.access.as_ref().map(Secret::expose).unwrap_or("");
    (Secret::new(format!("Bearer {access}")), tokens.generation)
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

fn excerpt(body: &[u8], secrets: &[String]) -> String {
    let text: String = String::from_utf8_lossy(body)
        .chars()
        .take(EXCERPT_CHARS)
        .collect();
    let refs: Vec<&str> = secrets.iter().map(String::as_str).collect();
    redact(&text, &refs)
}

/// The provider's message: `{"error":…}`, the login form `{"errors":{"errors":[…]}}`, a
/// `detail`, or else an excerpt of the body.
fn error_message(body: &[u8], secrets: &[String]) -> String {
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

/// reqwest's error text without the URL's query (which holds nothing secret today, but
/// the habit is cheap) and with the cause chain that says what really happened.
fn transport_text(err: &reqwest::Error) -> String {
    use std::error::Error;
    let mut text = if err.is_timeout() {
        "timed out".to_string()
    } else if err.is_connect() {
        "cannot connect".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Holds logins to [`LOGINS_PER_SECOND`] in any one-second window.
#[derive(Default)]
struct LoginLimiter {
    recent: Mutex<VecDeque<Instant>>,
}

impl LoginLimiter {
    async fn acquire(&self) {
        loop {
            let wait = {
                let mut recent = self.recent.lock().await;
                let now = Instant::now();
                while recent
                    .front()
                    .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
                {
                    recent.pop_front();
                }
                if recent.len() < LOGINS_PER_SECOND {
                    recent.push_back(now);
                    return;
                }
                recent
                    .front()
                    .map(|t| Duration::from_secs(1).saturating_sub(now.duration_since(*t)))
                    .unwrap_or_default()
            };
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn login_limiter_allows_five_per_second() {
        let limiter = LoginLimiter::default();
        let start = Instant::now();
        for _ in 0..LOGINS_PER_SECOND {
            limiter.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        limiter.acquire().await;
        assert!(start.elapsed() >= Duration::from_secs(1));
        for _ in 0..4 {
            limiter.acquire().await;
        }
        assert!(start.elapsed() < Duration::from_secs(2));
        limiter.acquire().await;
        assert!(start.elapsed() >= Duration::from_secs(2));
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
