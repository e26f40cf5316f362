//! A recording of every request a simulator answers, both bodies byte for byte, for the
//! conformance tests (tests/providers/conformance.rs), which hold each body to the
//! provider's own published definitions. Off until a test turns it on: while off, nothing
//! is buffered and answers stream as they are.

use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

/// The most of one body kept; a larger one is cut there (the checker then says so).
const BODY_LIMIT: usize = 4 << 20;

/// One request and the answer it got.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub method: String,
    /// The path without the query.
    pub path: String,
    pub query: Option<String>,
    pub request_body: Vec<u8>,
    pub status: u16,
    pub response_body: Vec<u8>,
}

impl Exchange {
    pub fn request_text(&self) -> String {
        String::from_utf8_lossy(&self.request_body).into_owned()
    }

    pub fn response_text(&self) -> String {
        String::from_utf8_lossy(&self.response_body).into_owned()
    }
}

/// Shared between a simulator's router and its handle; `None` while not recording.
#[derive(Debug, Clone, Default)]
pub struct ExchangeLog(Arc<Mutex<Option<Vec<Exchange>>>>);

impl ExchangeLog {
    fn lock(&self) -> MutexGuard<'_, Option<Vec<Exchange>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts recording (again, from nothing).
    pub fn start(&self) {
        *self.lock() = Some(Vec::new());
    }

    /// The exchanges recorded so far, in the order they were answered; recording goes on.
    pub fn take(&self) -> Vec<Exchange> {
        self.lock().as_mut().map(std::mem::take).unwrap_or_default()
    }

    fn on(&self) -> bool {
        self.lock().is_some()
    }

    fn push(&self, exchange: Exchange) {
        if let Some(log) = self.lock().as_mut() {
            log.push(exchange);
        }
    }
}

/// The outermost layer of a simulator's router: it sees what the client sent and what the
/// simulator answered, faults and refusals of auth included.
pub(crate) async fn record(
    State(log): State<ExchangeLog>,
    request: Request,
    next: Next,
) -> Response {
    if !log.on() {
        return next.run(request).await;
    }
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let query = request.uri().query().map(str::to_string);
    let (parts, body) = request.into_parts();
    let request_body = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .unwrap_or_default();
    let response = next
        .run(Request::from_parts(parts, Body::from(request_body.clone())))
        .await;
    let (parts, body) = response.into_parts();
    let response_body = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .unwrap_or_default();
    log.push(Exchange {
        method,
        path,
        query,
        request_body: request_body.to_vec(),
        status: parts.status.as_u16(),
        response_body: response_body.to_vec(),
    });
    Response::from_parts(parts, Body::from(response_body))
}
