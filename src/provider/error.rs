//! What can go wrong talking to the provider. Messages carry the provider's own `error`
//! text and short body excerpts, never a credential.
//!
//! Every error falls in one [`ErrorClass`]; the engine needs the class to keep its word
//! (safety rule 11): a refusal is recorded as refused, a call whose outcome is unknown as
//! unknown, to be settled by the next observation.

use std::time::{Duration, SystemTime};

use crate::time::format::rfc3339;

/// How [`ProviderError::AuthBackoff`] begins: a daemon-wide condition
/// (`provider_auth_failing`), not one of a zone.
pub const ACCOUNT_REFUSED: &str = "the provider refuses this account's credentials";

/// How [`ProviderError::Misconfigured`] begins: a daemon-wide condition
/// (`provider_account_misconfigured`), not one of a zone.
pub const ACCOUNT_MISCONFIGURED: &str = "the provider account's configuration is wrong";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// 404: the zone (or record) does not exist at the provider. A definite answer.
    #[error("not found: {0}")]
    NotFound(String),
    /// `GET …/dnssec` on a zone whose DNSSEC is off (400 "dnssec is disabled").
    #[error("DNSSEC is disabled for the zone")]
    DnssecDisabled,
    #[error("unauthorized (401): {0}")]
    Unauthorized(String),
    #[error("forbidden (403): {0}")]
    Forbidden(String),
    /// Status 409. On `PATCH …/dnssec {"enabled":false}`: the provider's own parent scan still
    /// sees a DS (its scan may lag ours): refused, try again later; never success.
    #[error("conflict (409): {0}")]
    Conflict(String),
    #[error("rate limited (429) after retries{}", retry_after.map(|d| format!(", Retry-After {}s", d.as_secs())).unwrap_or_default())]
    RateLimited { retry_after: Option<Duration> },
    /// Not sent: an earlier `Retry-After` holds every call of this client until `until`,
    /// and that is beyond this call's retry budget.
    #[error("rate limited by the provider until {}; not sent", rfc3339(*until))]
    RateLimitedUntil { until: SystemTime },
    #[error("server error {status} after retries: {message}")]
    Server { status: u16, message: String },
    /// Any other 4xx: the request itself was refused, retrying will not help.
    #[error("request rejected ({status}): {message}")]
    Rejected { status: u16, message: String },
    /// A 3xx. Redirects are never followed: the API does not redirect, and following one
    /// would carry the credential (or the login body) to wherever it points.
    #[error(
        "the provider answered {status} redirecting to {location:?}; redirects are not followed (check provider.base_url)"
    )]
    Redirected { status: u16, location: String },
    /// A 2xx whose body is the error form `{"error": …}`.
    #[error("the provider answered {status} but with an error: {message}")]
    ErrorInSuccess { status: u16, message: String },
    /// The answer's body is larger than we read; reading stopped at the cap.
    #[error(
        "the provider's answer ({status}) is larger than the {limit}-byte cap; not read further"
    )]
    BodyTooLarge { status: u16, limit: usize },
    #[error("login failed: {0}")]
    LoginFailed(String),
    /// Not sent: the caller withdrew its permission before the request left (with
    /// several daemons, its lease on the zone was gone).
    #[error("not sent: {0}")]
    NotSent(String),
    /// Not sent: the provider refused the account's credentials (401 after renewal, a
    /// refused login) and calls back off until `until`. Its text starts with
    /// [`ACCOUNT_REFUSED`] and names no time, so that it reads the same at every call.
    #[error("{ACCOUNT_REFUSED} ({cause}); backing off, not sent")]
    AuthBackoff { until: SystemTime, cause: String },
    /// No connection could be made: the request never left.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The request may have been sent: a timeout, a reset, a truncated answer.
    #[error("transport: {0}")]
    Transport(String),
    /// A paged listing that cannot be followed to its end (a page that repeats, more
    /// pages than a listing may take, past its time): never taken as a partial list.
    #[error("the listing cannot be followed to its end: {0}")]
    Listing(String),
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
    /// Not sent: which configured provider holds the zone is not one answer (two list
    /// it, or one cannot be asked). Never a guess (`provider::fleet`).
    #[error("not sent: {0}")]
    Owner(String),
    /// The account's configuration names something the provider does not have (PowerDNS:
    /// a `server_id` its API does not know, under which every path answers 404): no
    /// answer about any zone, least of all that it is missing. `key` is the account
    /// block's key at fault. Its text starts with [`ACCOUNT_MISCONFIGURED`].
    #[error("{ACCOUNT_MISCONFIGURED} ({key}): {message}")]
    Misconfigured { key: &'static str, message: String },
    /// An attempt of the call may have reached the provider and taken effect (`sent`:
    /// what it gave), and a later attempt ended in `then`, which says nothing about the
    /// earlier one: a retry held by a `Retry-After`, refused, or answered 409 does not
    /// undo a request that took effect. Built by [`Attempts`].
    #[error(
        "an attempt was sent and its outcome is unknown ({sent}); {}",
        retry_text(then)
    )]
    SentBefore {
        sent: Box<ProviderError>,
        then: Box<ProviderError>,
    },
    /// Adding a key (a `POST`, which a second attempt would repeat as a second key) may
    /// have taken effect: an attempt timed out or was reset after sending, the provider
    /// answered a 5xx, or its answer could not be read or trusted (`cause`). Never sent
    /// again: the zone's keys, listed, say whether the key exists.
    #[error(
        "adding a key to {zone} may have taken effect ({cause}); not sent again: list the zone's keys to settle whether it was added"
    )]
    KeyMaybeAdded {
        zone: String,
        cause: Box<ProviderError>,
    },
    /// A call made of several requests (PowerDNS's CDS setting: `PUBLISH-CDS`, then
    /// `PUBLISH-CDNSKEY`) whose first took effect (`applied`) and whose next failed
    /// (`then`): the setting is half applied, which the next observation reads and settles.
    #[error("{applied}, then the next request failed: {then}")]
    PartlyApplied {
        applied: String,
        then: Box<ProviderError>,
    },
}

/// What became of the attempt after one that was sent, in words that cannot be read as
/// "the call was not sent".
fn retry_text(then: &ProviderError) -> String {
    match then {
        ProviderError::RateLimitedUntil { until } => format!(
            "no further attempt: the provider asked us to wait until {}",
            rfc3339(*until)
        ),
        ProviderError::NotSent(why) => format!("no further attempt: {why}"),
        other => format!("a later attempt: {other}"),
    }
}

/// The attempts of one call that changes something at the provider (safety rule 11):
/// once an attempt may have left this host (a 5xx, a timeout or reset after sending, an
/// answer we cannot read), the call's outcome is unknown whatever later attempts give.
/// A later refusal (409, 4xx), a `Retry-After` hold or a withdrawn permission is a
/// definite answer about that attempt only.
#[derive(Debug, Default)]
pub struct Attempts {
    /// The first attempt that may have taken effect: what it gave.
    sent: Option<ProviderError>,
}

impl Attempts {
    /// An attempt ended in `error`.
    pub fn failed(&mut self, error: &ProviderError) {
        if self.sent.is_none() && error.outcome_unknown() {
            self.sent = Some(error.clone());
        }
    }

    /// Whether some attempt may have taken effect.
    pub fn sent(&self) -> bool {
        self.sent.is_some()
    }

    /// The call's error, `last` being what ended it (its last attempt's error, or what
    /// stopped it before another attempt left).
    pub fn outcome(&self, last: ProviderError) -> ProviderError {
        match &self.sent {
            Some(sent) if !last.outcome_unknown() => ProviderError::SentBefore {
                sent: Box::new(sent.clone()),
                then: Box::new(last),
            },
            _ => last,
        }
    }
}

/// What an error says about the request's effect at the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The provider definitely refused the request; it took no effect. A 4xx other than
    /// 401, 404, 408 and 429 (409 included), a redirect, "DNSSEC is disabled".
    Refused,
    /// 404: the zone (or record) does not exist at the provider. Definite.
    NotFound,
    /// The request took no effect, and trying again later may work: never sent (no
    /// connection, our own rate-limit gate, an invalid argument), or answered without
    /// being processed (401 after renewal, failed login, 408, 429).
    NotPerformed,
    /// The request may have reached the provider and we cannot tell whether it took
    /// effect: a timeout or reset after sending, a 5xx, a 2xx we cannot read or trust
    /// (decode failure, body over the cap, an `error` in a 2xx, a key that does not match
    /// its own DS), or any failure after an attempt that was so ([`Attempts`]).
    Unknown,
}

impl ProviderError {
    /// The class of this error; see [`ErrorClass`].
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::NotFound(_) => ErrorClass::NotFound,
            Self::DnssecDisabled
            | Self::Forbidden(_)
            | Self::Conflict(_)
            | Self::Rejected { .. }
            | Self::Redirected { .. } => ErrorClass::Refused,
            Self::Unauthorized(_)
            | Self::LoginFailed(_)
            | Self::RateLimited { .. }
            | Self::RateLimitedUntil { .. }
            | Self::Connect(_)
            | Self::NotSent(_)
            | Self::AuthBackoff { .. }
            | Self::Invalid(_)
            | Self::Owner(_)
            | Self::Misconfigured { .. }
            | Self::Server { status: 408, .. } => ErrorClass::NotPerformed,
            Self::Server { .. }
            | Self::ErrorInSuccess { .. }
            | Self::BodyTooLarge { .. }
            | Self::Transport(_)
            | Self::Decode { .. }
            | Self::Listing(_)
            | Self::DnssecMismatch { .. }
            | Self::SentBefore { .. }
            | Self::PartlyApplied { .. }
            | Self::KeyMaybeAdded { .. } => ErrorClass::Unknown,
        }
    }

    /// True when the request may have reached the provider and taken effect without our
    /// knowing: a state-changing call that failed so must be recorded as "outcome
    /// unknown" and settled by the next observation, never as refused or done.
    pub fn outcome_unknown(&self) -> bool {
        self.class() == ErrorClass::Unknown
    }

    /// True when the provider definitely refused the request (it took no effect, and
    /// repeating it unchanged now will be refused again).
    pub fn is_refusal(&self) -> bool {
        self.class() == ErrorClass::Refused
    }

    /// Whether the provider answered with the account's credentials accepted (`Some(true)`:
    /// any answer but 401), refused them (`Some(false)`), or this says nothing of them.
    pub fn credentials_accepted(&self) -> Option<bool> {
        match self {
            Self::Unauthorized(_) | Self::LoginFailed(_) => Some(false),
            Self::NotFound(_)
            | Self::DnssecDisabled
            | Self::Forbidden(_)
            | Self::Conflict(_)
            | Self::RateLimited { .. }
            | Self::Server { .. }
            | Self::Rejected { .. }
            | Self::Redirected { .. }
            | Self::ErrorInSuccess { .. }
            | Self::BodyTooLarge { .. }
            | Self::Decode { .. }
            | Self::Listing(_)
            | Self::DnssecMismatch { .. } => Some(true),
            Self::RateLimitedUntil { .. }
            | Self::NotSent(_)
            | Self::AuthBackoff { .. }
            | Self::Connect(_)
            | Self::Transport(_)
            | Self::Invalid(_)
            | Self::Owner(_)
            | Self::Misconfigured { .. } => None,
            // The last attempt's answer is the newest word on the credentials.
            Self::SentBefore { then, .. } | Self::PartlyApplied { then, .. } => {
                then.credentials_accepted()
            }
            Self::KeyMaybeAdded { cause, .. } => cause.credentials_accepted(),
        }
    }

    /// Worth trying again later (the engine reschedules with backoff); a 4xx other than 408
    /// and 429 is not, nor a key that may have been added (the keys are listed first).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::RateLimitedUntil { .. }
                | Self::Server { .. }
                | Self::Transport(_)
                | Self::Connect(_)
                | Self::SentBefore { .. }
                | Self::PartlyApplied { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(status: u16) -> ProviderError {
        ProviderError::Server {
            status,
            message: "x".into(),
        }
    }

    #[test]
    fn definite_refusals() {
        for e in [
            ProviderError::Conflict("DS still at the registrar".into()),
            ProviderError::Forbidden("no".into()),
            ProviderError::Rejected {
                status: 422,
                message: "bad".into(),
            },
            ProviderError::Redirected {
                status: 302,
                location: "http://elsewhere/".into(),
            },
            ProviderError::DnssecDisabled,
        ] {
            assert_eq!(e.class(), ErrorClass::Refused, "{e:?}");
            assert!(e.is_refusal() && !e.outcome_unknown(), "{e:?}");
        }
    }

    #[test]
    fn not_found_is_its_own_answer() {
        let e = ProviderError::NotFound("zone is not found".into());
        assert_eq!(e.class(), ErrorClass::NotFound);
        assert!(!e.outcome_unknown() && !e.is_refusal());
    }

    #[test]
    fn unknown_outcomes() {
        for e in [
            server(500),
            server(502),
            server(503),
            ProviderError::Transport("timed out".into()),
            ProviderError::Decode {
                what: "eof".into(),
                excerpt: "{".into(),
            },
            ProviderError::BodyTooLarge {
                status: 200,
                limit: 1 << 20,
            },
            ProviderError::ErrorInSuccess {
                status: 200,
                message: "oops".into(),
            },
            ProviderError::DnssecMismatch {
                field: "digest",
                provider: "a".into(),
                computed: "b".into(),
            },
        ] {
            assert!(e.outcome_unknown(), "{e:?}");
            assert!(!e.is_refusal(), "{e:?}");
        }
    }

    #[test]
    fn not_performed() {
        for e in [
            server(408),
            ProviderError::RateLimited {
                retry_after: Some(Duration::from_secs(3)),
            },
            ProviderError::RateLimitedUntil {
                until: SystemTime::UNIX_EPOCH,
            },
            ProviderError::Connect("refused".into()),
            ProviderError::Unauthorized("bad key".into()),
            ProviderError::LoginFailed("bad password".into()),
            ProviderError::AuthBackoff {
                until: SystemTime::UNIX_EPOCH,
                cause: "401".into(),
            },
            ProviderError::Invalid("name".into()),
        ] {
            assert_eq!(e.class(), ErrorClass::NotPerformed, "{e:?}");
            assert!(!e.outcome_unknown() && !e.is_refusal(), "{e:?}");
        }
    }

    /// Rule 11: once an attempt may have taken effect, no later attempt makes the call
    /// refused or not performed; a later unknown stands as it is.
    #[test]
    fn an_attempt_sent_makes_the_call_unknown_whatever_follows() {
        let held = ProviderError::RateLimitedUntil {
            until: SystemTime::UNIX_EPOCH,
        };
        let mut attempts = Attempts::default();
        attempts.failed(&ProviderError::Connect("refused".into()));
        assert!(!attempts.sent());
        assert_eq!(
            attempts.outcome(held.clone()),
            held,
            "nothing left the host"
        );
        attempts.failed(&server(502));
        assert!(attempts.sent());
        for later in [
            held,
            ProviderError::Conflict("DS still at the registrar".into()),
            ProviderError::NotFound("zone is not found".into()),
            ProviderError::NotSent("lease gone".into()),
            ProviderError::Connect("refused".into()),
            ProviderError::RateLimited { retry_after: None },
        ] {
            let e = attempts.outcome(later.clone());
            assert_eq!(e.class(), ErrorClass::Unknown, "{later:?} after a 502");
            assert!(e.to_string().contains("502"), "{e}");
            assert!(!e.to_string().contains("not sent"), "{e}");
        }
        let timeout = ProviderError::Transport("timed out".into());
        assert_eq!(attempts.outcome(timeout.clone()), timeout);
    }

    #[test]
    fn the_gate_names_its_time() {
        let e = ProviderError::RateLimitedUntil {
            until: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        };
        assert!(e.to_string().contains("2027-01-15T08:00:00Z"), "{e}");
    }
}
