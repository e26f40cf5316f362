//! What can go wrong talking to the provider. Messages carry the provider's own `error`
//! text and short body excerpts, never a credential.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    #[error("not found: {0}")]
    NotFound(String),
    /// `GET …/dnssec` on a zone whose DNSSEC is off (400 "dnssec is disabled").
    #[error("DNSSEC is disabled for the zone")]
    DnssecDisabled,
    #[error("unauthorized (401): {0}")]
    Unauthorized(String),
    #[error("forbidden (403): {0}")]
    Forbidden(String),
    #[error("conflict (409): {0}")]
    Conflict(String),
    #[error("rate limited (429) after retries{}", retry_after.map(|d| format!(", Retry-After {}s", d.as_secs())).unwrap_or_default())]
    RateLimited { retry_after: Option<Duration> },
    #[error("server error {status} after retries: {message}")]
    Server { status: u16, message: String },
    /// Any other 4xx: the request itself was refused, retrying will not help.
    #[error("request rejected ({status}): {message}")]
    Rejected { status: u16, message: String },
    #[error("login failed: {0}")]
    LoginFailed(String),
    #[error("transport: {0}")]
    Transport(String),
    #[error("cannot decode the provider's answer: {what}; body starts {excerpt:?}")]
    Decode { what: String, excerpt: String },
    /// A DNSSEC field disagrees with what the public key gives (safety rule 5).
    #[error(
        "provider's DNSSEC `{field}` does not match its public key: provider says {provider:?}, recomputed {computed:?}"
    )]
    DnssecMismatch {
        field: &'static str,
        provider: String,
        computed: String,
    },
    /// An argument or a value the client refuses before any request.
    #[error("invalid: {0}")]
    Invalid(String),
}

impl ProviderError {
    /// A call that failed this way may still have taken effect at the provider: the
    /// request may have reached it (a timeout or a broken connection after sending, a 5xx,
    /// an unreadable 2xx). Everything else is a definite "not done".
    pub fn outcome_unknown(&self) -> bool {
        matches!(
            self,
            Self::Server { .. } | Self::Transport(_) | Self::Decode { .. }
        )
    }

    /// Worth trying again later (the engine reschedules with backoff); a 4xx other than 408
    /// and 429 is not.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. } | Self::Server { .. } | Self::Transport(_)
        )
    }
}
