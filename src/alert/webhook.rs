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
    /// backoff, at most `max_attempts` times. Other answers are not retried now: the
    /// notification stays owed and the next tick tries again.
    pub async fn send(&self, event: &AlertEvent) -> Result<(), WebhookError> {
        let mut wait = self.backoff;
        let mut last = String::new();
        let mut attempts = 0;
        while attempts < self.max_attempts {
            if attempts > 0 {
                tokio::time::sleep(wait).await;
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
