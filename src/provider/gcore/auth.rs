//! The client's authorization: an API key, or a login whose token pair is refreshed once
//! on a 401 (concurrent requests hit by the same expiry renew once), logins held to the
//! endpoint's rate; the backoff while the provider refuses the account's credentials
//! (`provider_auth_failing`); and the secrets every error and log line is redacted of.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::Method;
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::client::{GcoreClient, error_message};
use super::settings::Credentials;
use crate::alert_kind::AlertKind;
use crate::condition::Condition;
use crate::provider::{ACCOUNT_REFUSED, ProviderError};
use crate::secret::Secret;

/// The login endpoint allows at most this many requests per second (DESIGN.md section 7).
pub const LOGINS_PER_SECOND: usize = 5;
/// The first wait after the provider refuses the account's credentials; each refusal in
/// a row doubles it, up to [`AUTH_BACKOFF_CEILING`].
pub const AUTH_BACKOFF_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two tries of refused credentials: a revoked account is asked
/// a few times an hour, never at the login limit (an account lockout waiting to happen).
pub const AUTH_BACKOFF_CEILING: Duration = Duration::from_secs(600);

/// Backing off after the provider refused the account's credentials (401 after renewal,
/// a refused login): every call fails at once, unsent, until the wait is over; the next
/// refusal doubles the wait (calls in flight together count once), any answer that
/// accepts the credentials ends it. Said as the daemon-wide `provider_auth_failing`.
pub(in crate::provider) struct AuthBackoff {
    state: std::sync::Mutex<BackoffState>,
    pub(in crate::provider) refused: Arc<Condition>,
}

#[derive(Default)]
struct BackoffState {
    failures: u32,
    /// Until when calls wait (the monotonic clock, and the wall clock to say it).
    until: Option<(Instant, SystemTime)>,
    cause: String,
}

impl AuthBackoff {
    pub(in crate::provider) fn new() -> Self {
        Self {
            state: std::sync::Mutex::default(),
            refused: Arc::new(Condition::new(AlertKind::ProviderAuthFailing)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BackoffState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An error, without a request, while backing off.
    pub(in crate::provider) fn gate(&self) -> Result<(), ProviderError> {
        let state = self.lock();
        match state.until {
            Some((at, until)) if at > Instant::now() => Err(ProviderError::AuthBackoff {
                until,
                cause: state.cause.clone(),
            }),
            _ => Ok(()),
        }
    }

    pub(in crate::provider) fn refused(&self, cause: &str) {
        let mut state = self.lock();
        let now = Instant::now();
        if state.until.is_some_and(|(at, _)| at > now) {
            return;
        }
        state.failures = state.failures.saturating_add(1);
        let doublings = state.failures.saturating_sub(1).min(20);
        let wait = AUTH_BACKOFF_FIRST
            .saturating_mul(1 << doublings)
            .min(AUTH_BACKOFF_CEILING);
        state.until = Some((now + wait, SystemTime::now() + wait));
        state.cause = cause.to_string();
        drop(state);
        self.refused.holds(format!(
            "{ACCOUNT_REFUSED} ({cause}): provider calls back off, from {} s doubling to {} min \
             between tries; check the account and its credentials in [provider]",
            AUTH_BACKOFF_FIRST.as_secs(),
            AUTH_BACKOFF_CEILING.as_secs() / 60
        ));
    }

    /// What a call's outcome says of the credentials: a success or an answer that took
    /// them counts as accepted, a refusal of them as refused, anything else as neither.
    pub(in crate::provider) fn record<T>(&self, result: &Result<T, ProviderError>) {
        match result {
            Ok(_) => self.accepted(),
            Err(e) => match e.credentials_accepted() {
                Some(true) => self.accepted(),
                Some(false) => self.refused(&e.to_string()),
                None => {}
            },
        }
    }

    pub(in crate::provider) fn accepted(&self) {
        {
            let mut state = self.lock();
            if state.failures > 0 {
                *state = BackoffState::default();
            }
        }
        self.refused.clear();
    }
}

pub(super) enum Auth {
    ApiKey(Secret),
    Login(LoginAuth),
}

pub(super) struct LoginAuth {
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

/// A login or refresh answer. A refresh answer may carry `access` alone (the provider's
/// SDK allows it): the refresh token in hand then stays.
#[derive(Deserialize)]
struct TokenPair {
    access: String,
    #[serde(default)]
    refresh: Option<String>,
}

impl Auth {
    pub(super) fn new(credentials: Credentials) -> Self {
        match credentials {
            Credentials::ApiKey(key) => Self::ApiKey(key),
            Credentials::Login { username, password } => Self::Login(LoginAuth {
                username,
                password,
                tokens: Mutex::new(Tokens::default()),
                limiter: LoginLimiter::default(),
            }),
        }
    }
}

impl GcoreClient {
    /// The `Authorization` value for the next request, logging in first if needed.
    pub(super) async fn authorization(&self) -> Result<(Secret, u64), ProviderError> {
        match &self.auth {
            Auth::ApiKey(key) => Ok((Secret::new(format!("APIKey {}", key.expose())), 0)),
            Auth::Login(login) => {
                let mut tokens = login.tokens.lock().await;
                if tokens.access.is_none() {
                    // Another call's refusal while this one waited for the tokens.
                    self.backoff.gate()?;
                    self.login(login, &mut tokens).await?;
                }
                Ok(bearer(&tokens))
            }
        }
    }

    /// After a 401: refresh once; if that fails, log in again.
    pub(super) async fn renew(
        &self,
        login: &LoginAuth,
        seen: u64,
    ) -> Result<(Secret, u64), ProviderError> {
        let mut tokens = login.tokens.lock().await;
        if tokens.generation != seen && tokens.access.is_some() {
            // Another request renewed while this one waited.
            return Ok(bearer(&tokens));
        }
        // Another request's renewal was refused while this one waited.
        self.backoff.gate()?;
        if let Some(refresh) = tokens.refresh.take() {
            let body = serde_json::json!({ "refresh": refresh.expose() });
            let url = self.url(&["iam", "auth", "jwt", "refresh"], &[], &[])?;
            match self
                .send(&Method::POST, &url, Some(&body), None, None, None)
                .await
            {
                Ok(reply) if reply.status.is_success() => {
                    let secrets = self.secrets_with(&tokens, Some(&refresh));
                    match self
                        .check_with(reply, &secrets)
                        .and_then(|body| token_pair(&body))
                    {
                        Ok(pair) => {
                            store(&mut tokens, pair, Some(refresh));
                            return Ok(bearer(&tokens));
                        }
                        Err(err) => tracing::debug!(
                            error = %err,
                            "cannot read the token refresh answer; logging in again"
                        ),
                    }
                }
                Ok(reply) => {
                    tracing::debug!(
                        status = reply.status.as_u16(),
                        "token refresh refused; logging in again"
                    );
                }
                Err(err) => tracing::debug!(error = %err, "token refresh failed; logging in again"),
            }
        }
        self.login(login, &mut tokens).await?;
        Ok(bearer(&tokens))
    }

    async fn login(&self, login: &LoginAuth, tokens: &mut Tokens) -> Result<(), ProviderError> {
        login.limiter.acquire().await;
        // Within an episode of refusals, `provider_auth_failing` says it once.
        if self.backoff.refused.holding() {
            tracing::debug!("logging in to the provider");
        } else {
            tracing::info!("logging in to the provider");
        }
        let body = serde_json::json!({
            "username": login.username,
            "password": login.password.expose(),
        });
        let url = self.url(&["iam", "auth", "jwt", "login"], &[], &[])?;
        let reply = self
            .send(&Method::POST, &url, Some(&body), None, None, None)
            .await?;
        let secrets = self.secrets_with(tokens, None);
        match reply.status.as_u16() {
            400 | 401 | 403 => {
                tokens.access = None;
                tokens.refresh = None;
                Err(ProviderError::LoginFailed(error_message(
                    &reply.body,
                    &secrets,
                )))
            }
            _ => {
                let body = self.check_with(reply, &secrets)?;
                store(tokens, token_pair(&body)?, None);
                Ok(())
            }
        }
    }

    /// [`Self::secrets`] while the token lock is held (where `try_lock` would miss them),
    /// with a refresh token taken out of `tokens`.
    fn secrets_with(&self, tokens: &Tokens, taken: Option<&Secret>) -> Vec<String> {
        let mut all = match &self.auth {
            Auth::ApiKey(key) => vec![key.expose().to_string()],
            Auth::Login(login) => vec![login.password.expose().to_string()],
        };
        all.extend(
            [&tokens.access, &tokens.refresh]
                .into_iter()
                .flatten()
                .chain(taken)
                .map(|s| s.expose().to_string()),
        );
        all
    }

    /// Everything that must never appear in an error or a log line.
    pub(super) fn secrets(&self) -> Vec<String> {
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

/// Keeps a new pair; without a new refresh token, `kept` (the one just used) stays.
fn store(tokens: &mut Tokens, pair: TokenPair, kept: Option<Secret>) {
    tokens.access = Some(Secret::new(pair.access));
    tokens.refresh = pair.refresh.map(Secret::new).or(kept);
    tokens.generation += 1;
}

/// A login or refresh answer. Its body holds tokens, so a failure carries no excerpt and
/// no serde text (which may quote a value), only where reading stopped.
fn token_pair(body: &[u8]) -> Result<TokenPair, ProviderError> {
    serde_json::from_slice::<TokenPair>(body).map_err(|e| ProviderError::Decode {
        what: format!(
            "the token answer is not {{\"access\", \"refresh\"}} ({:?} at line {} column {})",
            e.classify(),
            e.line(),
            e.column()
        ),
        excerpt: "[withheld: token answer]".into(),
    })
}

fn bearer(tokens: &Tokens) -> (Secret, u64) {
    let access = tokens.access.as_ref().map(Secret::expose).unwrap_or("");
    (Secret::new(format!("Bearer {access}")), tokens.generation)
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
    fn a_token_answer_that_cannot_be_read_shows_no_token() {
        let err = token_pair(br#"{"access": 12, "refresh": "eyJsecret"}"#)
            .err()
            .expect("not a pair");
        assert!(!err.to_string().contains("eyJsecret"), "{err}");
        let pair = token_pair(br#"{"access":"a1"}"#).expect("access alone");
        assert_eq!(pair.refresh, None);
    }
}
