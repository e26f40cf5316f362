//! What every provider client does over HTTP, whichever the API: no redirect followed,
//! bodies read up to a cap, a bounded number of requests in flight, retries of transport
//! errors and retryable statuses under the shared [`RetryPolicy`], a `Retry-After` that
//! holds every call of the client, and a caller's permission asked right before each
//! attempt leaves (DESIGN.md rule 12). Each client keeps its own authentication and its
//! own mapping of answers to [`ProviderError`]s.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use tokio::time::Instant;
use url::Url;

use super::{Attempts, ProviderError, SendPermit};
use crate::retry::{
    MAX_RETRY_AFTER, RetryPolicy, is_retryable_status, parse_retry_after, transport_text,
};
use crate::secret::{Secret, redact};

/// The most requests one client has in flight at the provider at once, however many zones
/// the engine steps together: a first pass over thousands of waiting zones must not meet
/// the provider with hundreds of simultaneous calls.
pub const PROVIDER_REQUESTS_IN_FLIGHT: usize = 16;

/// No answer body is read beyond this: the largest real answer (a page of zones, a zone
/// with its records) is far below it, and a runaway one must not take the daemon's memory.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// One final answer, its body capped.
#[derive(Debug, Clone)]
pub(super) struct Reply {
    pub status: StatusCode,
    pub retry_after: Option<Duration>,
    pub location: Option<String>,
    /// At most [`MAX_BODY_BYTES`].
    pub body: bytes::Bytes,
    /// The body went on beyond the cap (and was not read further).
    pub truncated: bool,
}

impl Reply {
    /// A 3xx, refused: redirects are never followed; its `Location` said with `secrets`
    /// redacted.
    pub fn redirected(&self, secrets: &[&str]) -> ProviderError {
        ProviderError::Redirected {
            status: self.status.as_u16(),
            location: redact(self.location.as_deref().unwrap_or("(no Location)"), secrets),
        }
    }

    /// What a final 4xx or 5xx means, with the API's own `message`, whichever the API
    /// (each client reads its special cases first).
    pub fn status_error(&self, message: String) -> ProviderError {
        let status = self.status.as_u16();
        match status {
            401 => ProviderError::Unauthorized(message),
            403 => ProviderError::Forbidden(message),
            404 => ProviderError::NotFound(message),
            409 => ProviderError::Conflict(message),
            429 => ProviderError::RateLimited {
                retry_after: self.retry_after,
            },
            408 | 500..=599 => ProviderError::Server { status, message },
            _ => ProviderError::Rejected { status, message },
        }
    }
}

/// The "not before" a `Retry-After` sets, shared by every call of one client: after a 429
/// for one zone, the others do not ask either until it has passed.
#[derive(Default)]
struct RateGate {
    until: std::sync::Mutex<Option<Instant>>,
}

impl RateGate {
    /// Holds calls for `wait` (capped at [`MAX_RETRY_AFTER`]); never shortens a hold.
    fn hold(&self, wait: Duration) {
        let until = Instant::now() + wait.min(MAX_RETRY_AFTER);
        let mut gate = self.until.lock().unwrap_or_else(|p| p.into_inner());
        if gate.is_none_or(|t| t < until) {
            *gate = Some(until);
        }
    }

    /// How long calls are still held, if at all.
    fn remaining(&self) -> Option<Duration> {
        let gate = self.until.lock().unwrap_or_else(|p| p.into_inner());
        gate.and_then(|t| t.checked_duration_since(Instant::now()))
            .filter(|d| !d.is_zero())
    }
}

/// One request as a client asks for it.
pub(super) struct Request<'a, 'p> {
    pub method: &'a Method,
    pub url: &'a Url,
    pub body: Option<&'a serde_json::Value>,
    /// The credential's header (`Authorization`, `X-API-Key`), if any.
    pub credential: Option<(HeaderName, &'a Secret)>,
    pub may_send: Option<SendPermit<'p>>,
    /// Whether the request may be sent again after an attempt that may have taken effect
    /// (a 5xx, a timeout or reset after sending). False for a request a second copy of
    /// which would do it twice (adding a key): only attempts that surely took no effect
    /// (no connection, 408, 429) are repeated.
    pub repeatable: bool,
    /// Done to each attempt right before it leaves (after the caller's permission): an
    /// API that signs every request with its time (Route 53's SigV4) signs here, and may
    /// set a body of its own (XML).
    pub finish: Option<Finish<'a>>,
    /// Whether a final answer of another status says "try again" (Route 53 throttles with
    /// a 400 whose code says so): retried as a retryable status is.
    pub retry_answer: Option<&'a (dyn Fn(&Reply) -> bool + Send + Sync)>,
}

/// See [`Request::finish`].
pub(super) type Finish<'a> =
    &'a (dyn Fn(&mut reqwest::Request) -> Result<(), ProviderError> + Send + Sync);

/// Requests of one client spaced at least `interval` apart (an API's per-account request
/// rate), every attempt counted.
struct Pace {
    interval: Duration,
    next: std::sync::Mutex<Option<Instant>>,
}

impl Pace {
    /// Waits for this attempt's slot.
    async fn wait(&self) {
        let slot = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            let slot = next.map_or(now, |t| t.max(now));
            *next = Some(slot + self.interval);
            slot
        };
        tokio::time::sleep_until(slot).await;
    }
}

/// A client's HTTP: the connection pool and the limits every call shares.
pub(super) struct Http {
    client: reqwest::Client,
    gate: RateGate,
    /// Requests in flight at once (one attempt each; retries wait outside it).
    in_flight: tokio::sync::Semaphore,
    pub retry: RetryPolicy,
    /// An episode of calls failing after every retry: said at warn when it begins and at
    /// info when an answer comes again, not at each attempt of each poll.
    failing: std::sync::atomic::AtomicBool,
    /// The spacing of every attempt, where the API sets a rate per account.
    pace: Option<Pace>,
}

impl Http {
    pub fn new(retry: RetryPolicy, request_timeout: Duration) -> Result<Self, ProviderError> {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        );
        let client = reqwest::Client::builder()
            // Not even a same-origin redirect is followed: an API never redirects, so one
            // means a wrong base URL or something in between; following it would send the
            // credential on, and would turn a PATCH into a GET on 301/302. The client
            // turns the 3xx into `ProviderError::Redirected`, naming it.
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(headers)
            // The whole exchange, the body included: a slow drip ends here too.
            .timeout(request_timeout)
            .connect_timeout(request_timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("dnssec-warden/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ProviderError::Transport(e.to_string()))?;
        Ok(Self {
            client,
            gate: RateGate::default(),
            in_flight: tokio::sync::Semaphore::new(PROVIDER_REQUESTS_IN_FLIGHT),
            retry,
            failing: std::sync::atomic::AtomicBool::new(false),
            pace: None,
        })
    }

    /// Every attempt of this client at least `interval` after the one before.
    pub fn paced(mut self, interval: Duration) -> Self {
        self.pace = Some(Pace {
            interval,
            next: std::sync::Mutex::new(None),
        });
        self
    }

    /// A call failed after every attempt: the first of an episode is said at warn (the
    /// provider down must not write lines at every attempt of every poll for ever).
    fn gave_up(
        &self,
        method: &Method,
        url: &Url,
        attempts: u32,
        outcome: &Result<Reply, ProviderError>,
    ) {
        use std::sync::atomic::Ordering;
        if self.failing.swap(true, Ordering::Relaxed) {
            return;
        }
        let why = match outcome {
            Ok(reply) => format!("HTTP {}", reply.status.as_u16()),
            Err(e) => e.to_string(),
        };
        tracing::warn!(
            %method,
            host = url.host_str().unwrap_or(""),
            path = url.path(),
            attempts,
            "provider calls failing ({why}); said again when the provider answers"
        );
    }

    /// An answer came: an episode of failing calls, if any, is over.
    fn answered(&self, url: &Url) {
        if self
            .failing
            .swap(false, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::info!(
                host = url.host_str().unwrap_or(""),
                "provider answers again"
            );
        }
    }

    /// Sends one request, retrying transport errors and retryable statuses. While the
    /// shared gate of a `Retry-After` holds, waits for it if that fits the call's retry
    /// budget, else fails at once with [`ProviderError::RateLimitedUntil`]; either way the
    /// provider is not asked while it holds. `may_send` is asked once the attempt's turn
    /// has come, the last moment before it leaves; refused, nothing more is sent (the
    /// last failure stands, or [`ProviderError::NotSent`] before the first attempt).
    /// Every failed attempt is told to `attempts`, if given, as `classify` reads it.
    pub async fn send(
        &self,
        request: &Request<'_, '_>,
        mut attempts: Option<&mut Attempts>,
        classify: &(dyn Fn(Reply) -> Result<bytes::Bytes, ProviderError> + Send + Sync),
    ) -> Result<Reply, ProviderError> {
        let Request {
            method,
            url,
            body,
            credential,
            may_send,
            repeatable,
            finish,
            retry_answer,
        } = request;
        let started = Instant::now();
        let mut failed = 0;
        let mut last: Option<Result<Reply, ProviderError>> = None;
        // Bounded: every pass sleeps, and the budget check ends it.
        loop {
            if let Some(wait) = self.gate.remaining() {
                if started.elapsed().saturating_add(wait) > self.retry.budget {
                    return Err(ProviderError::RateLimitedUntil {
                        until: SystemTime::now() + wait,
                    });
                }
                tracing::debug!(%method, path = url.path(), wait_ms = wait.as_millis() as u64, "provider asked us to wait (Retry-After); holding the call");
                tokio::time::sleep(wait).await;
                continue;
            }
            let mut builder = self.client.request((*method).clone(), (*url).clone());
            if let Some((name, value)) = credential {
                builder = builder.header(name.clone(), value.expose());
            }
            if let Some(body) = body {
                builder = builder.json(body);
            }
            let outcome = async {
                // Closed only if the client were dropped mid-call: then there is no limit
                // left to keep.
                let _turn = self.in_flight.acquire().await.ok();
                if let Some(pace) = &self.pace {
                    pace.wait().await;
                }
                if let Some(permit) = may_send
                    && !permit().await
                {
                    return Ok(None);
                }
                let mut built = builder.build().map_err(Attempt::Http)?;
                if let Some(finish) = finish {
                    finish(&mut built).map_err(Attempt::Refused)?;
                }
                let response = self.client.execute(built).await.map_err(Attempt::Http)?;
                let status = response.status();
                let header = |name| {
                    response
                        .headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string)
                };
                let retry_after = header(reqwest::header::RETRY_AFTER)
                    .as_deref()
                    .and_then(parse_retry_after);
                let location = header(reqwest::header::LOCATION);
                let (body, truncated) = read_capped(response, MAX_BODY_BYTES)
                    .await
                    .map_err(Attempt::Http)?;
                Ok::<_, Attempt>(Some(Reply {
                    status,
                    retry_after,
                    location,
                    body,
                    truncated,
                }))
            }
            .await;
            let outcome = match outcome {
                Ok(Some(reply)) => Ok(reply),
                Ok(None) => {
                    // The caller's permission (the fence) says why, once.
                    tracing::debug!(%method, path = url.path(), attempt = failed + 1, "provider call not sent: the caller no longer may (its lease on the zone is gone)");
                    return last.unwrap_or(Err(ProviderError::NotSent(
                        "the caller no longer may send it (its lease on the zone is gone)".into(),
                    )));
                }
                // Nothing left: the request could not be finished (signed).
                Err(Attempt::Refused(e)) => return last.unwrap_or(Err(e)),
                Err(Attempt::Http(e)) => Err(e),
            };
            failed += 1;
            let mut took_effect = false;
            let (retry_after, this) = match outcome {
                Ok(reply)
                    if !is_retryable_status(reply.status.as_u16())
                        && !retry_answer.is_some_and(|again| again(&reply)) =>
                {
                    self.answered(url);
                    return Ok(reply);
                }
                Ok(reply) => {
                    tracing::debug!(%method, path = url.path(), status = reply.status.as_u16(), attempt = failed, "provider call failed");
                    if let Some(wait) = reply.retry_after {
                        self.gate.hold(wait);
                    }
                    if let Err(e) = classify(reply.clone()) {
                        took_effect = e.outcome_unknown();
                        if let Some(attempts) = attempts.as_deref_mut() {
                            attempts.failed(&e);
                        }
                    }
                    (reply.retry_after, Ok(reply))
                }
                Err(err) => {
                    let text = transport_text(&err);
                    tracing::debug!(%method, path = url.path(), error = %text, attempt = failed, "provider call failed");
                    let error = if err.is_connect() {
                        ProviderError::Connect(text)
                    } else {
                        ProviderError::Transport(text)
                    };
                    took_effect = error.outcome_unknown();
                    if let Some(attempts) = attempts.as_deref_mut() {
                        attempts.failed(&error);
                    }
                    (None, Err(error))
                }
            };
            let wait = self.retry.delay(failed, retry_after);
            if took_effect && !repeatable {
                tracing::debug!(%method, path = url.path(), attempt = failed, "provider call not repeated: the attempt may have taken effect");
                return this;
            }
            if !self.retry.allows(failed, started.elapsed(), wait) {
                self.gave_up(method, url, failed, &this);
                return this;
            }
            last = Some(this);
            tokio::time::sleep(wait).await;
        }
    }
}

/// How one attempt failed before an answer: over HTTP, or before it left.
enum Attempt {
    Http(reqwest::Error),
    Refused(ProviderError),
}

/// Reads at most `limit` bytes of the body, chunk by chunk; the rest is never read (the
/// connection is dropped with the response). True when the body went on beyond `limit`.
async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(bytes::Bytes, bool), reqwest::Error> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        // Announced beyond the cap: not even the first part is read.
        return Ok((bytes::Bytes::new(), true));
    }
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body.freeze(), true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body.freeze(), false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_rate_gate_is_capped_and_never_shortened() {
        let gate = RateGate::default();
        assert_eq!(gate.remaining(), None);
        gate.hold(Duration::from_secs(86_400));
        assert_eq!(gate.remaining(), Some(MAX_RETRY_AFTER));
        gate.hold(Duration::from_secs(5));
        assert_eq!(gate.remaining(), Some(MAX_RETRY_AFTER), "not shortened");
        tokio::time::advance(MAX_RETRY_AFTER).await;
        assert_eq!(gate.remaining(), None);
    }

    /// Lines the test's subscriber wrote, shared with its writer.
    #[derive(Clone, Default)]
    struct Lines(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn count(&self, level: &str, text: &str) -> usize {
            let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
            String::from_utf8_lossy(&all)
                .lines()
                .filter(|l| l.contains(level) && l.contains(text))
                .count()
        }
    }

    /// One answer to each connection, then the listener is dropped.
    async fn answer_once(listener: tokio::net::TcpListener) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        if let Ok((mut socket, _)) = listener.accept().await {
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                .await;
        }
    }

    /// Answers every connection with `status`, counting the requests.
    async fn answer_every(
        listener: tokio::net::TcpListener,
        status: &'static str,
        seen: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let reply =
                format!("HTTP/1.1 {status}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}");
            let _ = socket.write_all(reply.as_bytes()).await;
        }
    }

    /// A request that must not be done twice is not repeated after an answer that says
    /// nothing of its effect (a 5xx); one that surely took no effect (a 429) is.
    #[tokio::test]
    async fn a_request_not_repeatable_is_sent_once_when_it_may_have_taken_effect() {
        let retry = RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            ..RetryPolicy::default()
        };
        let http = Http::new(retry, Duration::from_secs(2)).expect("a client");
        for (status, repeatable, sent) in [
            ("502 Bad Gateway", false, 1),
            ("502 Bad Gateway", true, 3),
            ("429 Too Many Requests", false, 3),
        ] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a port");
            let port = listener.local_addr().expect("its address").port();
            let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let server = tokio::spawn(answer_every(listener, status, seen.clone()));
            let url = Url::parse(&format!("http://127.0.0.1:{port}/keys")).expect("a URL");
            let request = Request {
                method: &Method::POST,
                url: &url,
                body: None,
                credential: None,
                may_send: None,
                repeatable,
                finish: None,
                retry_answer: None,
            };
            let classify = |r: Reply| Err(r.status_error(String::new()));
            let mut attempts = Attempts::default();
            let reply = http.send(&request, Some(&mut attempts), &classify).await;
            assert!(reply.is_ok_and(|r| !r.status.is_success()), "{status}");
            assert_eq!(
                seen.load(std::sync::atomic::Ordering::SeqCst),
                sent,
                "{status}, repeatable {repeatable}"
            );
            server.abort();
        }
    }

    /// A provider that cannot be reached is said once per episode at warn, not at every
    /// attempt of every call; its return is said once too.
    #[tokio::test]
    async fn a_provider_down_is_said_once_an_episode() {
        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let retry = RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            ..RetryPolicy::default()
        };
        let http = Http::new(retry, Duration::from_secs(2)).expect("a client");
        // A port nobody listens on: connections refused.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let port = closed.local_addr().expect("its address").port();
        drop(closed);
        let url = Url::parse(&format!("http://127.0.0.1:{port}/dns/v2/zones")).expect("a URL");
        let call = || async {
            let request = Request {
                method: &Method::GET,
                url: &url,
                body: None,
                credential: None,
                may_send: None,
                repeatable: true,
                finish: None,
                retry_answer: None,
            };
            http.send(&request, None, &|r: Reply| Ok(r.body)).await
        };
        for _ in 0..4 {
            assert!(call().await.is_err());
        }
        assert_eq!(lines.count("WARN", "provider calls failing"), 1);
        assert_eq!(lines.count("WARN", "provider call failed"), 0);
        assert_eq!(lines.count("DEBUG", "provider call failed"), 12);
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the port again");
        let server = tokio::spawn(answer_once(listener));
        assert!(call().await.is_ok());
        server.await.expect("the server task");
        assert_eq!(lines.count("INFO", "provider answers again"), 1);
        assert!(call().await.is_err());
        assert_eq!(
            lines.count("WARN", "provider calls failing"),
            2,
            "a new episode"
        );
    }
}
