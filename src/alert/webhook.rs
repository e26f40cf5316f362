//! `[[alerts.webhook]]`: a JSON POST. The body has a Slack-compatible `text` (Slack,
//! Mattermost and Rocket.Chat incoming webhooks show it) beside the structured fields.

use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};

use super::AlertEvent;
use crate::config::WebhookSettings;

/// No single wait between two attempts is longer than this.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

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
    max_attempts: u32,
    backoff: Duration,
    client: reqwest::Client,
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
            max_attempts: settings.max_attempts.max(1),
            backoff: settings.backoff,
            client,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// POSTs the event, retrying network errors, 408, 429 and 5xx with exponential
    /// backoff, at most `max_attempts` times; a `Retry-After` (in seconds) lengthens the
    /// next wait, up to [`MAX_BACKOFF`]. Other answers are not retried now: the
    /// notification stays owed and the next tick tries again.
    pub async fn send(&self, event: &AlertEvent) -> Result<(), WebhookError> {
        let mut wait = self.backoff;
        let mut asked: Option<Duration> = None;
        let mut last = String::new();
        let mut attempts = 0;
        while attempts < self.max_attempts {
            if attempts > 0 {
                let pause = asked.take().map_or(wait, |a| a.max(wait)).min(MAX_BACKOFF);
                tokio::time::sleep(pause).await;
                wait = wait.saturating_mul(2).min(MAX_BACKOFF);
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
                    last = format!("HTTP {status}");
                    asked = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(crate::provider::parse_retry_after);
                    let transient = status.is_server_error()
                        || status == reqwest::StatusCode::REQUEST_TIMEOUT
                        || status == reqwest::StatusCode::TOO_MANY_REQUESTS;
                    if !transient {
                        break;
                    }
                }
                // Without the URL: it may carry the token.
                Err(error) => last = error.without_url().to_string(),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

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
            name: "alerts.webhook[0]".into(),
            url: format!("http://{addr}/hook").parse().unwrap(),
            headers: Vec::new(),
            timeout: Duration::from_secs(5),
            max_attempts: 2,
            backoff: Duration::from_millis(10),
        })
        .unwrap();
        let event = AlertEvent {
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
        };
        hook.send(&event).await.unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        assert!(
            seen[1] - seen[0] >= Duration::from_secs(1),
            "{:?}",
            seen[1] - seen[0]
        );
    }
}
