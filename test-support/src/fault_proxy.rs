//! A fault-injecting HTTP reverse proxy on loopback, in front of the provider simulator
//! (or any upstream): requests pass through unchanged until a [`Fault`] is set, and every
//! request is recorded (method, path, headers, body) before any fault applies.
//!
//! ```ignore
//! let proxy = FaultProxy::start(sim.base_url()).await?;   // provider.base_url = proxy.url()
//! proxy.set_fault(Fault::Status(503));                      // every request, until cleared
//! proxy.add_fault(Rule::new(Fault::RateLimit(Some("2".into()))).on("/dns/").times(1));
//! assert_eq!(proxy.calls("/dns/v2/zones/example.com"), 1);
//! proxy.clear_faults();
//! ```
//!
//! Everything is bounded so that tests end: a hang lasts at most [`MAX_HANG`], a drip at
//! most [`MAX_DRIP`], a huge body at most [`MAX_HUGE`] bytes, an upstream call 30 s.
//! Dropping the proxy stops it. Depends on nothing but the crate's own dependencies.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use url::Url;

/// Longest a [`Fault::Hang`] holds a request, whatever it asks for.
pub const MAX_HANG: Duration = Duration::from_secs(30);
/// Longest a [`Fault::SlowDrip`] drips; the body is cut there.
pub const MAX_DRIP: Duration = Duration::from_secs(30);
/// Largest body a [`Fault::Huge`] streams.
pub const MAX_HUGE: u64 = 1 << 30;
/// Largest request body forwarded upstream.
const MAX_REQUEST: usize = 1 << 20;
const CHUNK: usize = 64 * 1024;

/// What the proxy does instead of (or to) the upstream's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Answers nothing for this long (at most [`MAX_HANG`]), then 504.
    Hang(Duration),
    /// The upstream's answer, its body one byte per interval (for at most [`MAX_DRIP`],
    /// then cut).
    SlowDrip(Duration),
    /// This status with `{"error":"injected fault"}`.
    Status(u16),
    /// `429 {"error":"too many requests"}` with this `Retry-After` (delta-seconds or an
    /// HTTP-date, see [`http_date_in`]), or without one.
    RateLimit(Option<String>),
    /// This 3xx with `Location` = `to` joined with the request's path and query: another
    /// loopback address or port continues the chain.
    Redirect { status: u16, to: Url },
    /// `200` and a body of this many bytes (at most [`MAX_HUGE`]), streamed without a
    /// `Content-Length`, so that only a reader's own cap stops it.
    Huge(u64),
    /// `200` with a JSON body cut in the middle.
    Malformed,
    /// This status and this JSON body, upstream not asked (e.g. `{"error": …}` in a 200).
    Json(u16, Value),
    /// The upstream's JSON answer with these fields set to `null` wherever they occur.
    NullFields(Vec<String>),
    /// The upstream's JSON answer with these fields removed wherever they occur.
    RemoveFields(Vec<String>),
    /// The first `n` matching requests pass; every later one gets `401`.
    UnauthorizedAfter(u32),
    /// The zone listing (`GET /dns/v2/zones`, whatever its offset) answers the same full
    /// page of these names and 99 more forever, `total_amount` 1e9; every other request
    /// passes.
    EndlessListing(Vec<String>),
    /// The request reaches the upstream (and takes effect there), then, after `delay` (at
    /// most [`MAX_HANG`]), this status with `{"error":"injected fault"}` instead of its
    /// answer: a gateway that lost the answer.
    AfterForward { status: u16, delay: Duration },
}

impl Fault {
    pub fn null_fields(fields: &[&str]) -> Self {
        Self::NullFields(fields.iter().map(|f| f.to_string()).collect())
    }

    pub fn remove_fields(fields: &[&str]) -> Self {
        Self::RemoveFields(fields.iter().map(|f| f.to_string()).collect())
    }

    pub fn retry_after(value: &str) -> Self {
        Self::RateLimit(Some(value.to_string()))
    }
}

/// A fault, the requests it applies to, and how many times.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub fault: Fault,
    /// Requests whose path starts with this; every request if `None`.
    pub path_prefix: Option<String>,
    /// Applies this many times, then is gone; until cleared if `None`.
    pub times: Option<u32>,
    /// Requests of this method only; any method if `None`.
    pub method: Option<String>,
    /// A matching request waits (at most [`MAX_HANG`]) until the proxy has received a
    /// request for exactly this path, then this long, before the fault applies: a fault
    /// timed between two requests in flight.
    pub once_seen: Option<(String, Duration)>,
    /// Matching requests seen so far (for [`Fault::UnauthorizedAfter`]).
    seen: u32,
}

impl Rule {
    pub fn new(fault: Fault) -> Self {
        Self {
            fault,
            path_prefix: None,
            times: None,
            method: None,
            once_seen: None,
            seen: 0,
        }
    }

    pub fn on(mut self, path_prefix: &str) -> Self {
        self.path_prefix = Some(path_prefix.to_string());
        self
    }

    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_string());
        self
    }

    /// See [`Rule::once_seen`].
    pub fn once_seen(mut self, path: &str, then: Duration) -> Self {
        self.once_seen = Some((path.to_string(), then));
        self
    }

    pub fn times(mut self, n: u32) -> Self {
        self.times = Some(n);
        self
    }
}

/// One request as the proxy received it.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl SeenRequest {
    /// Whether `needle` occurs in any header value or in the body.
    pub fn carries(&self, needle: &str) -> bool {
        self.headers
            .values()
            .any(|v| String::from_utf8_lossy(v.as_bytes()).contains(needle))
            || String::from_utf8_lossy(&self.body).contains(needle)
    }
}

#[derive(Default)]
struct ProxyState {
    rules: Vec<Rule>,
    seen: Vec<SeenRequest>,
}

struct Inner {
    upstream: Url,
    http: reqwest::Client,
    state: Mutex<ProxyState>,
    /// Bytes of injected streamed bodies (huge, drip) handed to the connection so far.
    streamed: AtomicU64,
    /// Requests being handled now, and the most at once.
    in_flight: AtomicUsize,
    peak: AtomicUsize,
}

/// One request being handled: counted in `in_flight` until it is answered.
struct Handling<'a>(&'a Inner);

impl<'a> Handling<'a> {
    fn start(inner: &'a Inner) -> Self {
        let now = inner.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        inner.peak.fetch_max(now, Ordering::SeqCst);
        Self(inner)
    }
}

impl Drop for Handling<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, ProxyState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running proxy. Dropping it stops it.
pub struct FaultProxy {
    addr: SocketAddr,
    inner: Arc<Inner>,
    server: JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on `127.0.0.1`, a port of its own, in front of `upstream`.
    pub async fn start(upstream: Url) -> std::io::Result<Self> {
        Self::start_on("127.0.0.1:0".parse().expect("an address"), upstream).await
    }

    /// A proxy on `listen` (e.g. `127.0.0.2:0`, for a redirect to another host).
    pub async fn start_on(listen: SocketAddr, upstream: Url) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(std::io::Error::other)?;
        let inner = Arc::new(Inner {
            upstream,
            http,
            state: Mutex::default(),
            streamed: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(inner.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            addr,
            inner,
            server,
        })
    }

    /// `http://ADDR:PORT/`: the base URL that reaches the upstream through the proxy.
    pub fn url(&self) -> Url {
        Url::parse(&format!("http://{}/", self.addr)).expect("a socket address makes a URL")
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn upstream(&self) -> &Url {
        &self.inner.upstream
    }

    /// `fault` on every request until cleared, in place of any other fault.
    pub fn set_fault(&self, fault: Fault) {
        let mut state = self.inner.lock();
        state.rules.clear();
        state.rules.push(Rule::new(fault));
    }

    /// Adds a rule; the first rule that matches a request applies.
    pub fn add_fault(&self, rule: Rule) {
        self.inner.lock().rules.push(rule);
    }

    pub fn clear_faults(&self) {
        self.inner.lock().rules.clear();
    }

    /// Requests received for exactly this path (faulted or passed through).
    /// The largest `offset=` any request to `path` asked for.
    pub fn max_offset(&self, path: &str) -> Option<u64> {
        self.inner
            .lock()
            .seen
            .iter()
            .filter(|r| r.path == path)
            .filter_map(|r| {
                r.query.as_deref()?.split('&').find_map(|kv| {
                    kv.strip_prefix("offset=")
                        .and_then(|v| v.parse::<u64>().ok())
                })
            })
            .max()
    }

    pub fn calls(&self, path: &str) -> usize {
        self.inner
            .lock()
            .seen
            .iter()
            .filter(|r| r.path == path)
            .count()
    }

    /// Requests received in all.
    pub fn total_calls(&self) -> usize {
        self.inner.lock().seen.len()
    }

    /// Every request received, oldest first.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.inner.lock().seen.clone()
    }

    /// Bytes of injected streamed bodies ([`Fault::Huge`], [`Fault::SlowDrip`]) handed to
    /// connections so far: how much a client let itself be sent.
    pub fn streamed_bytes(&self) -> u64 {
        self.inner.streamed.load(Ordering::SeqCst)
    }

    /// The most requests the proxy was handling at once.
    pub fn peak_in_flight(&self) -> usize {
        self.inner.peak.load(Ordering::SeqCst)
    }

    /// DNSSEC switched at the upstream behind the client's back (not through the proxy,
    /// not counted): `PATCH …/dnssec` with an API key. Returns the upstream's status.
    pub async fn flip_dnssec_upstream(
        &self,
        api_key: &str,
        zone: &str,
        enabled: bool,
    ) -> Result<u16, String> {
        flip_dnssec(&self.inner.upstream, api_key, zone, enabled).await
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// `PATCH {base}dns/v2/zones/{zone}/dnssec {"enabled": …}` straight at the simulator: the
/// "DNSSEC flipped behind the daemon's back" fault. Returns the status.
pub async fn flip_dnssec(
    base: &Url,
    api_key: &str,
    zone: &str,
    enabled: bool,
) -> Result<u16, String> {
    let zone = zone.trim_end_matches('.');
    let url = base
        .join(&format!("dns/v2/zones/{zone}/dnssec"))
        .map_err(|e| e.to_string())?;
    let response = reqwest::Client::new()
        .patch(url)
        .header(header::AUTHORIZATION, format!("APIKey {api_key}"))
        .json(&json!({ "enabled": enabled }))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    Ok(response.status().as_u16())
}

/// An HTTP-date `secs` seconds from now, for a `Retry-After` in that form.
pub fn http_date_in(secs: u64) -> String {
    httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(secs))
}

/// The fault that applies to `method` `path`, if any, with the rule's `once_seen`;
/// counted rules are used up.
fn take_fault(
    state: &mut ProxyState,
    method: &str,
    path: &str,
) -> Option<(Fault, Option<(String, Duration)>)> {
    let index = state.rules.iter().position(|r| {
        r.path_prefix.as_deref().is_none_or(|p| path.starts_with(p))
            && r.method.as_deref().is_none_or(|m| m == method)
            && r.times != Some(0)
    })?;
    let rule = &mut state.rules[index];
    rule.seen += 1;
    let fault = match &rule.fault {
        Fault::UnauthorizedAfter(n) if rule.seen <= *n => None,
        other => Some((other.clone(), rule.once_seen.clone())),
    };
    if let Some(left) = &mut rule.times {
        *left -= 1;
        if *left == 0 {
            state.rules.remove(index);
        }
    }
    fault
}

/// Waits (at most [`MAX_HANG`]) until a request for exactly `path` has been received.
async fn wait_seen(inner: &Inner, path: &str) {
    let until = tokio::time::Instant::now() + MAX_HANG;
    while tokio::time::Instant::now() < until && !inner.lock().seen.iter().any(|r| r.path == path) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn handle(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let _handling = Handling::start(&inner);
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, MAX_REQUEST)
        .await
        .unwrap_or_default();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().map(str::to_string);
    let fault = {
        let mut state = inner.lock();
        state.seen.push(SeenRequest {
            method: parts.method.to_string(),
            path: path.clone(),
            query: query.clone(),
            headers: parts.headers.clone(),
            body: body.clone(),
        });
        take_fault(&mut state, parts.method.as_str(), &path)
    };
    let fault = match fault {
        Some((fault, Some((seen, then)))) => {
            wait_seen(&inner, &seen).await;
            tokio::time::sleep(then.min(MAX_HANG)).await;
            Some(fault)
        }
        other => other.map(|(fault, _)| fault),
    };
    let json_reply = |status: u16, body: Value| {
        (
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            axum::Json(body),
        )
            .into_response()
    };
    match fault {
        None => forward(&inner, &parts, body)
            .await
            .unwrap_or_else(|e| json_reply(502, json!({ "error": e }))),
        Some(Fault::Hang(wait)) => {
            tokio::time::sleep(wait.min(MAX_HANG)).await;
            json_reply(504, json!({"error": "hung"}))
        }
        Some(Fault::Status(status)) => json_reply(status, json!({"error": "injected fault"})),
        Some(Fault::Json(status, value)) => json_reply(status, value),
        Some(Fault::RateLimit(retry_after)) => {
            let mut response = json_reply(429, json!({"error": "too many requests"}));
            if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        Some(Fault::Redirect { status, to }) => {
            let mut target = to.join(path.trim_start_matches('/')).unwrap_or(to);
            target.set_query(query.as_deref());
            let mut response = json_reply(status, json!({"error": "moved"}));
            if let Ok(value) = HeaderValue::from_str(target.as_str()) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            response
        }
        Some(Fault::Malformed) => Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"name": "zone", "records": [{"ty"#))
            .unwrap_or_default(),
        Some(Fault::Huge(bytes)) => {
            let mut head = b"{\"zones\":[".to_vec();
            head.resize(CHUNK, b' ');
            let chunk = Bytes::from(head);
            let total = bytes.min(MAX_HUGE);
            let streamed = inner.clone();
            let stream = futures::stream::unfold(0u64, move |sent| {
                let chunk = chunk.clone();
                let streamed = streamed.clone();
                async move {
                    if sent >= total {
                        return None;
                    }
                    let n = (total - sent).min(CHUNK as u64) as usize;
                    streamed.streamed.fetch_add(n as u64, Ordering::SeqCst);
                    Some((Ok::<_, std::io::Error>(chunk.slice(..n)), sent + n as u64))
                }
            });
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(stream))
                .unwrap_or_default()
        }
        Some(Fault::SlowDrip(interval)) => match forward_raw(&inner, &parts, body).await {
            Ok((status, headers, bytes)) => {
                let interval = interval.max(Duration::from_millis(1));
                let max_bytes = (MAX_DRIP.as_millis() / interval.as_millis()).max(1) as usize;
                let bytes = bytes.slice(..bytes.len().min(max_bytes));
                let streamed = inner.clone();
                let stream = futures::stream::unfold(0usize, move |at| {
                    let bytes = bytes.clone();
                    let streamed = streamed.clone();
                    async move {
                        if at >= bytes.len() {
                            return None;
                        }
                        tokio::time::sleep(interval).await;
                        streamed.streamed.fetch_add(1, Ordering::SeqCst);
                        Some((Ok::<_, std::io::Error>(bytes.slice(at..at + 1)), at + 1))
                    }
                });
                let mut response = Response::new(Body::from_stream(stream));
                *response.status_mut() = status;
                *response.headers_mut() = headers;
                response
            }
            Err(e) => json_reply(502, json!({ "error": e })),
        },
        Some(Fault::NullFields(fields)) => rewrite(&inner, &parts, body, &fields, true).await,
        Some(Fault::RemoveFields(fields)) => rewrite(&inner, &parts, body, &fields, false).await,
        Some(Fault::UnauthorizedAfter(_)) => json_reply(401, json!({"error": "Unauthorized"})),
        Some(Fault::EndlessListing(names)) if path == "/dns/v2/zones" => {
            let zones: Vec<Value> = names
                .iter()
                .cloned()
                .chain((0..).map(|i| format!("filler-{i}.test")))
                .take(100)
                .map(|name| json!({"name": name, "dnssec_enabled": false}))
                .collect();
            json_reply(
                200,
                json!({"zones": zones, "total_amount": 1_000_000_000u64}),
            )
        }
        Some(Fault::EndlessListing(_)) => forward(&inner, &parts, body)
            .await
            .unwrap_or_else(|e| json_reply(502, json!({ "error": e }))),
        Some(Fault::AfterForward { status, delay }) => {
            let forwarded = forward_raw(&inner, &parts, body).await;
            tokio::time::sleep(delay.min(MAX_HANG)).await;
            let error = match forwarded {
                Ok(_) => "injected fault".to_string(),
                Err(e) => e,
            };
            json_reply(status, json!({ "error": error }))
        }
    }
}

/// The upstream's answer: status, headers fit to pass on (no length or framing), body.
async fn forward_raw(
    inner: &Inner,
    parts: &axum::http::request::Parts,
    body: Bytes,
) -> Result<(StatusCode, HeaderMap, Bytes), String> {
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .trim_start_matches('/');
    let url = inner
        .upstream
        .join(path_and_query)
        .map_err(|e| e.to_string())?;
    let mut headers = parts.headers.clone();
    for name in [header::HOST, header::CONTENT_LENGTH, header::CONNECTION] {
        headers.remove(name);
    }
    let response = inner
        .http
        .request(parts.method.clone(), url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .map_err(|e| format!("upstream: {e}"))?;
    let status = response.status();
    let mut headers = response.headers().clone();
    for name in [
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::CONNECTION,
    ] {
        headers.remove(name);
    }
    let bytes = response
        .bytes()
        .await
        .map_err(|e| format!("upstream body: {e}"))?;
    Ok((status, headers, bytes))
}

async fn forward(
    inner: &Inner,
    parts: &axum::http::request::Parts,
    body: Bytes,
) -> Result<Response, String> {
    let (status, headers, bytes) = forward_raw(inner, parts, body).await?;
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

/// The upstream's answer with `fields` nulled (or removed) wherever they occur; a body
/// that is not JSON passes unchanged.
async fn rewrite(
    inner: &Inner,
    parts: &axum::http::request::Parts,
    body: Bytes,
    fields: &[String],
    null: bool,
) -> Response {
    match forward_raw(inner, parts, body).await {
        Ok((status, headers, bytes)) => {
            let bytes = match serde_json::from_slice::<Value>(&bytes) {
                Ok(mut value) => {
                    edit_fields(&mut value, fields, null);
                    Bytes::from(value.to_string())
                }
                Err(_) => bytes,
            };
            let mut response = Response::new(Body::from(bytes));
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            response
        }
        Err(e) => (StatusCode::BAD_GATEWAY, axum::Json(json!({ "error": e }))).into_response(),
    }
}

fn edit_fields(value: &mut Value, fields: &[String], null: bool) {
    match value {
        Value::Object(map) => {
            for field in fields {
                if null {
                    if let Some(v) = map.get_mut(field) {
                        *v = Value::Null;
                    }
                } else {
                    map.remove(field);
                }
            }
            for v in map.values_mut() {
                edit_fields(v, fields, null);
            }
        }
        Value::Array(items) => {
            for v in items {
                edit_fields(v, fields, null);
            }
        }
        _ => {}
    }
}
