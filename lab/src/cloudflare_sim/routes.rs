//! The HTTP surface of the simulator, path for path as docs/cloudflare-api.md describes
//! it, every answer in Cloudflare's envelope.

use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::Shared;
use super::state::{Bucket, CfState, normalize};
use crate::provider_sim::{CallRecord, FaultKind};

const PREFIX: &str = "/client/v4";

/// `{"success":true,"errors":[],"messages":[],"result":…}`.
fn success(result: Value) -> Response {
    envelope(
        StatusCode::OK,
        json!({
            "success": true, "errors": [], "messages": [], "result": result,
        }),
    )
}

/// A failure with its `errors[]`, `result` null.
fn failure(status: StatusCode, errors: &[(u32, &str)]) -> Response {
    let errors: Vec<Value> = errors
        .iter()
        .map(|(code, message)| json!({"code": code, "message": message}))
        .collect();
    envelope(
        status,
        json!({
            "success": false, "errors": errors, "messages": [], "result": null,
        }),
    )
}

fn envelope(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// 400 `7003` with `7000`: an id that names no zone, or is no id at all.
fn no_route(path: &str) -> Response {
    failure(
        StatusCode::BAD_REQUEST,
        &[
            (
                7003,
                &format!("Could not route to {path}, perhaps your object identifier is invalid?"),
            ),
            (7000, "No route for that URI"),
        ],
    )
}

pub(super) fn router(shared: Shared) -> Router {
    let api = Router::new()
        .route(&format!("{PREFIX}/zones"), get(list_zones))
        .route(&format!("{PREFIX}/zones/{{id}}"), get(get_zone))
        .route(
            &format!("{PREFIX}/zones/{{id}}/dnssec"),
            get(get_dnssec).patch(patch_dnssec).delete(delete_dnssec),
        )
        .route(
            &format!("{PREFIX}/zones/{{id}}/dns_records"),
            get(list_records),
        )
        .fallback(|request: Request| async move { no_route(request.uri().path()) })
        .layer(middleware::from_fn_with_state(shared.clone(), record_call))
        .layer(middleware::from_fn_with_state(shared.clone(), authorize))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            inject_faults,
        ))
        .layer(middleware::from_fn_with_state(
            shared.lock().exchanges.clone(),
            crate::exchange_log::record,
        ));
    api.with_state(shared)
}

// ---- middleware ------------------------------------------------------------------------

/// The path with its zone id replaced: `/client/v4/zones/{id}/dnssec`.
fn path_shape(path: &str) -> String {
    let mut parts: Vec<&str> = path.split('/').collect();
    if let Some(i) = parts.iter().position(|p| *p == "zones")
        && let Some(part) = parts.get_mut(i + 1)
        && !part.is_empty()
    {
        *part = "{id}";
    }
    parts.join("/")
}

/// Latency, then any injected fault, before the request reaches auth and its handler.
async fn inject_faults(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let (latency, fault) = {
        let mut state = shared.lock();
        *state
            .requests
            .entry(format!(
                "{} {}",
                request.method(),
                path_shape(request.uri().path())
            ))
            .or_default() += 1;
        (
            state.faults.latency,
            state.faults.take(request.uri().path()),
        )
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    match fault {
        None => next.run(request).await,
        Some(FaultKind::Status(code)) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            failure(status, &[(10001, "injected fault")])
        }
        Some(FaultKind::RateLimit { retry_after }) => {
            let mut response = too_many();
            if let Some(secs) = retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            response
        }
        Some(FaultKind::Hang) => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            failure(StatusCode::GATEWAY_TIMEOUT, &[(10001, "hung")])
        }
        Some(FaultKind::Malformed) => Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"success":true,"errors":[],"result":{"sta"#))
            .unwrap_or_default(),
    }
}

/// Cloudflare's answer to a rate-limited request (the code is the simulator's choice:
/// the documentation names none).
fn too_many() -> Response {
    failure(
        StatusCode::TOO_MANY_REQUESTS,
        &[(
            971,
            "Please wait and consider throttling your request speed",
        )],
    )
}

/// `Authorization: Bearer <token>`: a malformed header is 400 `6003` with the chain
/// `6111`, an unknown token 401 `10000`, a zone the token may not touch 403 `10000`;
/// then the token's bucket: 429 with `Retry-After` when empty, the `Ratelimit` headers on
/// every answer.
async fn authorize(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let token = match header.as_deref().and_then(|v| v.split_once(' ')) {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            token.trim().to_string()
        }
        _ => {
            return envelope(
                StatusCode::BAD_REQUEST,
                json!({
                    "success": false,
                    "errors": [{"code": 6003, "message": "Invalid request headers",
                        "error_chain": [{"code": 6111, "message": "Invalid format for Authorization header"}]}],
                    "messages": [], "result": null,
                }),
            );
        }
    };
    let take = {
        let mut state = shared.lock();
        if !state.options.tokens.contains(&token) {
            return failure(StatusCode::UNAUTHORIZED, &[(10000, "Authentication error")]);
        }
        let forbidden =
            zone_id_of(request.uri().path()).is_some_and(|id| state.forbidden.contains(id));
        if forbidden {
            return failure(StatusCode::FORBIDDEN, &[(10000, "Authentication error")]);
        }
        match state.options.rate_limit {
            None => None,
            Some(limit) => {
                let take = state
                    .buckets
                    .entry(token)
                    .or_insert_with(|| Bucket::full(limit))
                    .take(limit);
                if !take.allowed {
                    state.rate_limited += 1;
                }
                Some((limit, take))
            }
        }
    };
    let Some((limit, take)) = take else {
        return next.run(request).await;
    };
    let mut response = if take.allowed {
        next.run(request).await
    } else {
        let mut response = too_many();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(take.reset));
        response
    };
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!(
        "\"default\";r={};t={}",
        take.remaining, take.reset
    )) {
        headers.insert("ratelimit", v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!(
        "\"default\";q={};w={}",
        limit.capacity,
        limit.window.as_secs()
    )) {
        headers.insert("ratelimit-policy", v);
    }
    response
}

/// The zone id a path names, if any.
fn zone_id_of(path: &str) -> Option<&str> {
    path.strip_prefix(PREFIX)?
        .strip_prefix("/zones/")?
        .split('/')
        .next()
}

/// Keeps every state-changing call, with its body and status, for tests to read. The call
/// runs in a task of its own, which a dropped connection does not cancel: Cloudflare
/// finishes a call whose client went away.
async fn record_call(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    if !matches!(
        method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    ) {
        return next.run(request).await;
    }
    let path = request.uri().path().to_string();
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let at = SystemTime::now();
    let call = tokio::spawn(async move {
        let response = next
            .run(Request::from_parts(parts, Body::from(bytes.clone())))
            .await;
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        shared.lock().calls.push(CallRecord {
            at,
            method: method.to_string(),
            path,
            body,
            status: response.status().as_u16(),
        });
        response
    });
    match call.await {
        Ok(response) => response,
        Err(e) => failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            &[(10001, &e.to_string())],
        ),
    }
}

// ---- zones -------------------------------------------------------------------------------

/// `page` and `per_page` (5..50, default 20: out of range is a 400), and `name`, exact.
fn paging(
    query: Option<&str>,
    state: &CfState,
) -> Result<(usize, usize, Option<String>), &'static str> {
    let options = &state.options;
    let mut page = 1;
    let mut per_page = options.default_per_page;
    let mut name = None;
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        let number = || value.parse::<usize>().ok();
        match key.as_ref() {
            "page" => match number() {
                Some(n) if n >= 1 => page = n,
                _ => return Err("Invalid page"),
            },
            "per_page" => match number() {
                Some(n) if (options.min_per_page..=options.max_per_page).contains(&n) => {
                    per_page = n
                }
                _ => return Err("Invalid per_page: must be between 5 and 50"),
            },
            "name" => name = Some(normalize(&value)),
            _ => {}
        }
    }
    Ok((page, per_page, name))
}

/// One page of `items` with its `result_info`.
fn paged(items: Vec<Value>, page: usize, per_page: usize) -> Response {
    let total = items.len();
    let result: Vec<Value> = items
        .into_iter()
        .skip((page - 1).saturating_mul(per_page))
        .take(per_page)
        .collect();
    let body = json!({
        "success": true, "errors": [], "messages": [],
        "result_info": {
            "page": page, "per_page": per_page, "count": result.len(),
            "total_count": total, "total_pages": total.div_ceil(per_page),
        },
        "result": result,
    });
    envelope(StatusCode::OK, body)
}

async fn list_zones(State(shared): State<Shared>, RawQuery(query): RawQuery) -> Response {
    let state = shared.lock();
    let (page, per_page, name) = match paging(query.as_deref(), &state) {
        Ok(p) => p,
        Err(message) => return failure(StatusCode::BAD_REQUEST, &[(1001, message)]),
    };
    let zones: Vec<Value> = state
        .zones
        .values()
        .filter(|z| name.as_ref().is_none_or(|n| *n == z.name))
        .filter(|z| !state.forbidden.contains(&z.id))
        .map(|z| z.to_json(&state.options.name_servers))
        .collect();
    paged(zones, page, per_page)
}

async fn get_zone(State(shared): State<Shared>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    let Some(id) = zone_id_of(&path) else {
        return no_route(&path);
    };
    let mut state = shared.lock();
    let name_servers = state.options.name_servers.clone();
    match state.zone_by_id(id) {
        Some(z) => success(z.to_json(&name_servers)),
        None => no_route(&path),
    }
}

async fn list_records(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let mut state = shared.lock();
    let (page, per_page, _) = match paging(query.as_deref(), &state) {
        Ok(p) => p,
        Err(message) => return failure(StatusCode::BAD_REQUEST, &[(1001, message)]),
    };
    let Some(z) = state.zone_by_id(&id) else {
        return no_route(&format!("{PREFIX}/zones/{id}/dns_records"));
    };
    let records: Vec<Value> = z.records.iter().map(|r| r.to_json(z)).collect();
    paged(records, page, per_page)
}

// ---- DNSSEC ------------------------------------------------------------------------------

async fn get_dnssec(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let mut state = shared.lock();
    state.advance();
    let ttl = state.options.ds_ttl;
    let key = state.key.clone();
    match state.zone_by_id(&id) {
        Some(z) => success(z.dnssec_json(&key, ttl)),
        None => no_route(&format!("{PREFIX}/zones/{id}/dnssec")),
    }
}

/// `{"status": "active" | "disabled", "dnssec_multi_signer", "dnssec_presigned",
/// "dnssec_use_nsec3"}`, every field optional; anything else is a malformed body.
async fn patch_dnssec(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let malformed = || failure(StatusCode::BAD_REQUEST, &[(1001, "Malformed request body")]);
    let Ok(Value::Object(form)) = serde_json::from_slice::<Value>(&body) else {
        return malformed();
    };
    let mut status = None;
    let mut flags = Vec::new();
    for (field, value) in &form {
        match (field.as_str(), value) {
            ("status", Value::String(s)) if s == "active" || s == "disabled" => {
                status = Some(s == "active");
            }
            ("status", _) => {
                return failure(
                    StatusCode::BAD_REQUEST,
                    &[(1007, "status must be one of active, disabled")],
                );
            }
            ("dnssec_multi_signer" | "dnssec_presigned" | "dnssec_use_nsec3", Value::Bool(b)) => {
                flags.push((field.clone(), *b))
            }
            _ => return malformed(),
        }
    }
    let mut state = shared.lock();
    state.advance();
    let ttl = state.options.ds_ttl;
    let key = state.key.clone();
    let Some(z) = state.zone_by_id(&id) else {
        return no_route(&format!("{PREFIX}/zones/{id}/dnssec"));
    };
    for (field, on) in flags {
        match field.as_str() {
            "dnssec_multi_signer" => z.dnssec.multi_signer = on,
            "dnssec_presigned" => z.dnssec.presigned = on,
            _ => z.dnssec.use_nsec3 = on,
        }
    }
    match status {
        Some(true) => z.dnssec.activate(),
        Some(false) => z.dnssec.deactivate(),
        None => {}
    }
    success(z.dnssec_json(&key, ttl))
}

/// Only in `disabled`: the zone is unsigned afterwards (`modified_on` null).
async fn delete_dnssec(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let mut state = shared.lock();
    state.advance();
    let (status, code, message) = state.options.delete_refused.clone();
    let Some(z) = state.zone_by_id(&id) else {
        return no_route(&format!("{PREFIX}/zones/{id}/dnssec"));
    };
    if z.dnssec.status != "disabled" || z.dnssec.error {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
        return failure(status, &[(code, &message)]);
    }
    z.dnssec.delete();
    success(json!(id))
}

#[cfg(test)]
mod tests {
    use super::path_shape;

    #[test]
    fn requests_are_counted_by_the_shape_of_their_path() {
        assert_eq!(path_shape("/client/v4/zones"), "/client/v4/zones");
        assert_eq!(
            path_shape("/client/v4/zones/0123abcd/dnssec"),
            "/client/v4/zones/{id}/dnssec"
        );
    }
}
