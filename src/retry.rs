//! When and how long to wait before trying an HTTP call again, and what a failed call
//! says: the provider client and the alert webhooks share both.

use std::time::{Duration, SystemTime};

/// Retries 408, 429, 5xx and transport errors with exponential backoff and full jitter,
/// honouring `Retry-After`, bounded both in attempts and in total time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per call, the first one included.
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// No retry starts once this much time has passed since the first attempt.
    pub budget: Duration,
    /// A `Retry-After` longer than this counts as this.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(10),
            budget: Duration::from_secs(120),
            max_retry_after: MAX_RETRY_AFTER,
        }
    }
}

/// A `Retry-After` larger than this is treated as this: the engine's own backoff takes over.
/// It also caps the client's shared "not before" gate, so that one absurd header cannot
/// silence the daemon for a day.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

impl RetryPolicy {
    /// The wait before attempt `failed + 1`, after `failed` failed attempts.
    pub fn delay(&self, failed: u32, retry_after: Option<Duration>) -> Duration {
        let exponent = failed.saturating_sub(1).min(20);
        let ceiling = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        // Jitter in [ceiling/2, ceiling]: spreads retries of many zones, keeps a floor.
        let jittered = ceiling.mul_f64(0.5 + fastrand::f64() * 0.5);
        match retry_after {
            Some(wait) => wait.min(self.max_retry_after).max(jittered),
            None => jittered,
        }
    }

    /// Whether another attempt may start, given what was spent and what the wait would be.
    pub fn allows(&self, failed: u32, elapsed: Duration, wait: Duration) -> bool {
        failed < self.max_attempts && elapsed.saturating_add(wait) <= self.budget
    }
}

/// 408, 429 and every 5xx are worth repeating; other statuses are answers.
pub fn is_retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..=599).contains(&status)
}

/// `Retry-After` in either form (RFC 9110 section 10.2.3): delta-seconds, or an HTTP-date,
/// which gives the time from now until then (zero when it has passed). Not capped here.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    parse_retry_after_at(value, SystemTime::now())
}

/// [`parse_retry_after`] with the current time given.
pub fn parse_retry_after_at(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A transport failure of reqwest as its real cause, then the cause chain (reqwest's own
/// text says "error sending request" for a refused connection and a name that did not
/// resolve alike). Never the URL: it may carry a token.
pub fn transport_text(err: &reqwest::Error) -> String {
    use std::error::Error;
    let mut chain = String::new();
    let mut refused = false;
    let mut source = err.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            refused |= io.kind() == std::io::ErrorKind::ConnectionRefused;
        }
        chain.push_str(": ");
        chain.push_str(&cause.to_string());
        source = cause.source();
    }
    let lower = chain.to_ascii_lowercase();
    let cause = if err.is_timeout() || lower.contains("timed out") {
        "timed out"
    } else if refused || lower.contains("connection refused") {
        "connection refused"
    } else if lower.contains("dns error") || lower.contains("failed to lookup address") {
        "name did not resolve"
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake")
    {
        "TLS failed"
    } else if lower.contains("connection reset") {
        "connection reset"
    } else if err.is_connect() {
        "cannot connect"
    } else if err.is_body() || err.is_decode() {
        "answer unreadable"
    } else {
        "request failed"
    };
    format!("{cause}{chain}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_with_jitter_and_a_cap() {
        let p = RetryPolicy::default();
        for _ in 0..200 {
            let d1 = p.delay(1, None);
            assert!(d1 >= Duration::from_millis(125) && d1 <= Duration::from_millis(250));
            let d3 = p.delay(3, None);
            assert!(d3 >= Duration::from_millis(500) && d3 <= Duration::from_secs(1));
            let d30 = p.delay(30, None);
            assert!(d30 <= Duration::from_secs(10) && d30 >= Duration::from_secs(5));
        }
    }

    #[test]
    fn retry_after_is_a_floor() {
        let p = RetryPolicy::default();
        assert!(p.delay(1, Some(Duration::from_secs(3))) >= Duration::from_secs(3));
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(86_400))),
            Duration::from_secs(600)
        );
        assert_eq!(parse_retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn retry_after_as_an_http_date() {
        let date = "Wed, 21 Oct 2015 07:28:00 GMT";
        let then = httpdate::parse_http_date(date).unwrap();
        assert_eq!(
            parse_retry_after_at(date, then - Duration::from_secs(30)),
            Some(Duration::from_secs(30))
        );
        // A date in the past: no wait.
        assert_eq!(parse_retry_after(date), Some(Duration::ZERO));
    }

    #[test]
    fn bounded_in_count_and_time() {
        let p = RetryPolicy {
            max_attempts: 3,
            budget: Duration::from_secs(10),
            ..RetryPolicy::default()
        };
        assert!(p.allows(2, Duration::ZERO, Duration::from_secs(1)));
        assert!(!p.allows(3, Duration::ZERO, Duration::from_secs(1)));
        assert!(!p.allows(1, Duration::from_secs(9), Duration::from_secs(2)));
    }

    #[test]
    fn which_statuses_repeat() {
        for s in [408, 429, 500, 502, 503, 599] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [200, 400, 401, 403, 404, 409, 422] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }
}
