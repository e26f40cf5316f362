//! `[[alerts.webhook]]`: a JSON POST. The body has a Slack-compatible `text` (Slack,
//! Mattermost and Rocket.Chat incoming webhooks show it) beside the structured fields.

use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};

use super::AlertEvent;
use super::WebhookSettings;
use crate::retry::{RetryPolicy, is_retryable_status, parse_retry_after, transport_text};

/// No single wait between two attempts is longer than this.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Of a receiver's answer, no more than this is read (for the error's excerpt); a 2xx
/// answer's body is not read at all.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Longest excerpt of a receiver's answer in an error.
const EXCERPT_CHARS: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{sink}: cannot build the HTTP client: {error}")]
    Client { sink: String, error: String },
    #[error("{sink}: not delivered after {attempts} attempt(s): {last}")]
    Undelivered {
        sink: String,
        attempts: u32,
        last: String,
    },
}

#[derive(Clone)]
pub struct Webhook {
    name: String,
    url: url::Url,
    headers: Vec<(HeaderName, HeaderValue)>,
    timeout: Duration,
    retry: RetryPolicy,
    client: reqwest::Client,
    /// The URL's `user:password` in every form a receiver may echo it (as written, decoded,
    /// and as the Basic credentials sent from it), to redact from what is logged.
    credentials: Vec<String>,
}

// The URL and headers may hold tokens.
impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("name", &self.name)
            .field("host", &self.url.host_str())
            .finish_non_exhaustive()
    }
}

impl Webhook {
    pub fn new(settings: &WebhookSettings) -> Result<Self, WebhookError> {
        let client_error = |error: String| WebhookError::Client {
            sink: settings.name.clone(),
            error,
        };
        let mut headers = Vec::with_capacity(settings.headers.len());
        for (name, value) in &settings.headers {
            // Validated with the configuration; checked again because settings are public.
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| client_error(format!("invalid header name {name:?}")))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| client_error(format!("invalid value of header {name}")))?;
            value.set_sensitive(true);
            headers.push((name, value));
        }
        let client = reqwest::Client::builder()
            .user_agent(concat!("dnssec-warden/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(settings.timeout.min(Duration::from_secs(10)))
            // A redirected POST is a misconfiguration; following it could send the alert
            // (and its headers) somewhere unintended.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| client_error(e.without_url().to_string()))?;
        Ok(Self {
            name: settings.name.clone(),
            url: settings.url.clone(),
            headers,
            timeout: settings.timeout,
            retry: RetryPolicy {
                max_attempts: settings.max_attempts.max(1),
                base_delay: settings.backoff,
                max_delay: MAX_BACKOFF,
                // Bounded by the attempts; a tick's notifications wait for this sink.
                budget: Duration::MAX,
                max_retry_after: MAX_BACKOFF,
            },
            client,
            credentials: url_credentials(&settings.url),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The longest one [`Webhook::send`] can take: every attempt and every wait between.
    pub fn longest(&self) -> Duration {
        (self.timeout + MAX_BACKOFF).saturating_mul(self.retry.max_attempts)
    }

    /// POSTs the event, retrying network errors, 408, 429 and 5xx with the shared
    /// [`RetryPolicy`] (exponential backoff with jitter, at most `max_attempts` times; a
    /// `Retry-After` lengthens the next wait, up to [`MAX_BACKOFF`]). Other answers are
    /// not retried now: the notification stays owed and the next tick tries again.
    pub async fn send(&self, event: &AlertEvent) -> Result<(), WebhookError> {
        let mut asked: Option<Duration> = None;
        let mut last = String::new();
        let mut attempts = 0;
        while attempts < self.retry.max_attempts {
            if attempts > 0 {
                tokio::time::sleep(self.retry.delay(attempts, asked.take())).await;
            }
            attempts += 1;
            let mut request = self
                .client
                .post(self.url.clone())
                .timeout(self.timeout)
                .json(event);
            for (name, value) in &self.headers {
                request = request.header(name, value);
            }
            match request.send().await {
                Ok(response) if response.status().is_success() => return Ok(()),
                Ok(response) => {
                    let status = response.status();
                    asked = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_retry_after);
                    last = format!("HTTP {status}{}", self.answer_excerpt(response).await);
                    if !is_retryable_status(status.as_u16()) {
                        break;
                    }
                }
                // The real cause (refused, unresolved, timed out, TLS), without the URL:
                // it may carry the token.
                Err(error) => last = transport_text(&error),
            }
            tracing::debug!(
                sink = self.name.as_str(),
                attempts,
                "webhook attempt failed: {last}"
            );
        }
        Err(WebhookError::Undelivered {
            sink: self.name.clone(),
            attempts,
            last,
        })
    }

    /// `: <start of the answer>`, read to at most [`MAX_ANSWER_BYTES`] (the rest is never
    /// read: the connection is dropped), with the sink's secrets redacted.
    async fn answer_excerpt(&self, mut response: reqwest::Response) -> String {
        let mut body = Vec::new();
        let mut over = response
            .content_length()
            .is_some_and(|n| n > MAX_ANSWER_BYTES as u64);
        while !over {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = MAX_ANSWER_BYTES - body.len();
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    over = chunk.len() > room;
                }
                Ok(None) => break,
                Err(e) => {
                    let e = e.without_url();
                    return format!(" (answer unreadable: {e})");
                }
            }
        }
        // The header values and the URL's path and query (Slack's URL is the secret).
        let secrets: Vec<&str> = self
            .headers
            .iter()
            .filter_map(|(_, v)| v.to_str().ok())
            .chain([self.url.path()])
            .chain(self.url.query())
            .chain(self.credentials.iter().map(String::as_str))
            .collect();
        // Redacted before it is cut, so that no part of a secret survives the cut.
        let text = crate::secret::redact(&String::from_utf8_lossy(&body), &secrets);
        let text: String = text.trim().chars().take(EXCERPT_CHARS).collect();
        let note = if over {
            format!(" (answer longer than {MAX_ANSWER_BYTES} bytes; not read further)")
        } else {
            String::new()
        };
        match (text.is_empty(), note.is_empty()) {
            (true, true) => String::new(),
            _ => format!(": {text}{note}"),
        }
    }
}

/// The secrets of a URL's userinfo: the password as written and percent-decoded,
/// `user:password` decoded, and its base64 (the Basic credentials sent from it), the
/// longest first so that no part of one survives the redaction of another.
fn url_credentials(url: &url::Url) -> Vec<String> {
    let Some(written) = url.password() else {
        return Vec::new();
    };
    use base64::Engine as _;
    let password = percent_decoded(written);
    let pair = format!("{}:{password}", percent_decoded(url.username()));
    let mut all = vec![
        base64::engine::general_purpose::STANDARD.encode(&pair),
        pair,
        written.to_string(),
        password,
    ];
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
    all.dedup();
    all
}

/// `%41` as `A`; anything not a valid escape is kept as written.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(value as u8);
                i += 3;
            }
            (b, ..) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    fn event() -> AlertEvent {
        AlertEvent {
            text: "test".into(),
            id: "alert-1-firing".into(),
            event: super::super::EventKind::Firing,
            zone: "example.com.".into(),
            kind: None,
            severity: "warning".into(),
            message: "test".into(),
            state: None,
            opened_at: None,
            resolved_at: None,
            ds: None,
            at: "2026-11-22T00:00:00Z".into(),
            seq: None,
            provider: None,
        }
    }

    /// A receiver answering 500 with an endless body (512 MiB, no Content-Length): the
    /// error carries a redacted excerpt and says the answer was not read further, and
    /// only a little of it was ever taken from the receiver.
    #[tokio::test]
    async fn an_endless_answer_is_read_to_the_cap_only() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let produced = Arc::new(AtomicU64::new(0));
        let counter = produced.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move || {
                let counter = counter.clone();
                async move {
                    let mut chunk = b"error: token s3cr3t-t0ken rejected ".to_vec();
                    chunk.resize(64 * 1024, b'x');
                    let chunk = bytes::Bytes::from(chunk);
                    let stream = futures::stream::unfold(0u32, move |n| {
                        let chunk = chunk.clone();
                        let counter = counter.clone();
                        async move {
                            (n < 8192).then(|| {
                                counter.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                                (Ok::<_, std::io::Error>(chunk), n + 1)
                            })
                        }
                    });
                    (
                        reqwest::StatusCode::INTERNAL_SERVER_ERROR,
                        axum::body::Body::from_stream(stream),
                    )
                        .into_response()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let hook = Webhook::new(&WebhookSettings {
            headers: vec![("X-Token".into(), "s3cr3t-t0ken".into())],
            max_attempts: 1,
            backoff: Duration::from_millis(10),
            ..WebhookSettings::new(
                "alerts.webhook[0]",
                format!("http://{addr}/hook").parse().unwrap(),
            )
        })
        .unwrap();
        let err = hook.send(&event()).await.unwrap_err().to_string();
        assert!(
            err.contains("not read further") && err.contains(&MAX_ANSWER_BYTES.to_string()),
            "{err}"
        );
        assert!(
            err.contains("[redacted]") && !err.contains("s3cr3t"),
            "{err}"
        );
        let produced = produced.load(Ordering::SeqCst);
        assert!(
            produced < 16 << 20,
            "the receiver produced {produced} bytes"
        );
    }

    /// A password in the webhook URL never reaches an error (the log):
    /// not as written, not decoded, not as the Basic credentials a receiver echoes.
    #[tokio::test]
    async fn credentials_in_the_url_are_redacted_from_an_echoed_answer() {
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(|headers: axum::http::HeaderMap| async move {
                use base64::Engine as _;
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("none")
                    .to_string();
                let decoded = auth
                    .strip_prefix("Basic ")
                    .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                (
                    reqwest::StatusCode::UNAUTHORIZED,
                    format!("Authorization={auth} decoded={decoded} raw=hunter2%70ass"),
                )
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let hook = Webhook::new(&WebhookSettings {
            max_attempts: 1,
            backoff: Duration::from_millis(10),
            ..WebhookSettings::new(
                "alerts.webhook[0]",
                format!("http://alertuser:hunter2%70ass@{addr}/hook")
                    .parse()
                    .unwrap(),
            )
        })
        .unwrap();
        let err = hook.send(&event()).await.unwrap_err().to_string();
        assert!(err.contains("HTTP 401"), "{err}");
        assert!(err.contains("[redacted]"), "{err}");
        for secret in [
            "hunter2pass",
            "hunter2%70ass",
            "YWxlcnR1c2VyOmh1bnRlcjJwYXNz",
        ] {
            assert!(!err.contains(secret), "{secret} in {err}");
        }
        assert_eq!(percent_decoded("a%41%zz%4"), "aA%zz%4");
    }

    /// A failure says its real cause, not reqwest's "error sending
    /// request": a refused connection, and a receiver that never answers.
    #[tokio::test]
    async fn a_failure_says_its_real_cause() {
        let hook = |addr: std::net::SocketAddr| {
            Webhook::new(&WebhookSettings {
                timeout: Duration::from_millis(300),
                max_attempts: 1,
                backoff: Duration::from_millis(10),
                ..WebhookSettings::new(
                    "alerts.webhook[0]",
                    format!("http://{addr}/hook").parse().unwrap(),
                )
            })
            .unwrap()
        };
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let err = hook(closed).send(&event()).await.unwrap_err().to_string();
        assert!(err.contains("connection refused"), "{err}");
        assert!(!err.contains("error sending request"), "{err}");
        // Accepts, never answers.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            for _ in 0..4 {
                if let Ok((socket, _)) = silent.accept().await {
                    open.push(socket);
                }
            }
        });
        let err = hook(addr).send(&event()).await.unwrap_err().to_string();
        held.abort();
        assert!(err.contains("timed out"), "{err}");
    }

    /// A 429 with `Retry-After: 1` is waited out (not the 10 ms backoff) before the retry.
    #[tokio::test]
    async fn a_retry_after_lengthens_the_next_wait() {
        let seen: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let log = seen.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move || {
                let log = log.clone();
                async move {
                    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                    log.push(Instant::now());
                    if log.len() == 1 {
                        (
                            reqwest::StatusCode::TOO_MANY_REQUESTS,
                            [(reqwest::header::RETRY_AFTER, "1")],
                        )
                            .into_response()
                    } else {
                        reqwest::StatusCode::OK.into_response()
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let hook = Webhook::new(&WebhookSettings {
            timeout: Duration::from_secs(5),
            max_attempts: 2,
            backoff: Duration::from_millis(10),
            ..WebhookSettings::new(
                "alerts.webhook[0]",
                format!("http://{addr}/hook").parse().unwrap(),
            )
        })
        .unwrap();
        hook.send(&event()).await.unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        assert!(
            seen[1] - seen[0] >= Duration::from_secs(1),
            "{:?}",
            seen[1] - seen[0]
        );
    }
}
