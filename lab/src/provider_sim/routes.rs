//! The HTTP surface of the simulator, path for path as DESIGN.md section 7 describes it.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::faults::FaultKind;
use super::state::{SimKey, SimRecord, SimRrset, SimState, normalize, unix_now, uuid_v4};
use super::{CallRecord, Shared};
use crate::keys::LabKey;
use crate::timefmt::rfc3339;

type Reply = (StatusCode, axum::Json<Value>);

fn reply(status: StatusCode, body: Value) -> Reply {
    (status, axum::Json(body))
}

fn error(status: StatusCode, message: &str) -> Reply {
    reply(status, json!({ "error": message }))
}

fn ok(body: Value) -> Reply {
    reply(StatusCode::OK, body)
}

pub(super) fn router(shared: Shared) -> Router {
    let dns = Router::new()
        .route("/dns/v2/zones", post(create_zone).get(list_zones))
        .route("/dns/v2/zones/{zone}", get(get_zone).delete(delete_zone))
        .route(
            "/dns/v2/zones/{zone}/dnssec",
            get(get_dnssec).patch(patch_dnssec),
        )
        .route("/dns/v2/zones/{zone}/dnssec/parent-ds", get(parent_ds))
        .route("/dns/v2/zones/{zone}/rrsets", get(list_rrsets))
        .route(
            "/dns/v2/zones/{zone}/{rrset}/{rtype}",
            get(get_rrset)
                .post(create_rrset)
                .put(put_rrset)
                .delete(delete_rrset),
        )
        .layer(middleware::from_fn_with_state(shared.clone(), authorize));
    let iam = Router::new()
        .route("/iam/auth/jwt/login", post(login))
        .route("/iam/auth/jwt/refresh", post(refresh));
    let api = dns
        .merge(iam)
        .layer(middleware::from_fn_with_state(shared.clone(), record_call))
        .layer(middleware::from_fn_with_state(
            shared.clone(),
            inject_faults,
        ));
    Router::new()
        .route("/_lab/calls", get(lab_calls))
        .merge(api)
        .fallback(|| async { error(StatusCode::NOT_FOUND, "page not found") })
        .with_state(shared)
}

// ---- middleware ------------------------------------------------------------------------

/// A request path with the zone (and record name) in it replaced by a placeholder:
/// `/dns/v2/zones/{zone}/dnssec`, so that requests can be counted by kind.
fn path_shape(path: &str) -> String {
    let mut parts: Vec<&str> = path.split('/').collect();
    if let Some(i) = parts.iter().position(|p| *p == "zones") {
        for (offset, placeholder) in [(1, "{zone}"), (2, "{name}")] {
            if let Some(part) = parts.get_mut(i + offset)
                && !matches!(*part, "" | "dnssec" | "rrsets")
            {
                *part = placeholder;
            }
        }
    }
    parts.join("/")
}

/// Latency, then any injected fault, before the request reaches its handler.
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
        let latency = state.faults.latency;
        (latency, state.faults.take(request.uri().path()))
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    match fault {
        None => next.run(request).await,
        Some(FaultKind::Status(code)) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            error(status, "injected fault").into_response()
        }
        Some(FaultKind::RateLimit { retry_after }) => {
            let mut response =
                error(StatusCode::TOO_MANY_REQUESTS, "too many requests").into_response();
            if let Some(secs) = retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(secs));
            }
            response
        }
        Some(FaultKind::Hang) => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            error(StatusCode::GATEWAY_TIMEOUT, "hung").into_response()
        }
        Some(FaultKind::Malformed) => Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"name": "zone", "records": [{"ty"#))
            .unwrap_or_default(),
    }
}

/// Keeps every state-changing DNS call, with its body and status, for tests to read.
async fn record_call(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let logged = path.starts_with("/dns/")
        && matches!(
            method,
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        );
    if !logged {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let at = SystemTime::now();
    // A real provider finishes a call whose client went away (a daemon killed mid-call):
    // the change happens and is logged. So the call runs in its own task, which a
    // dropped connection does not cancel.
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
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()).into_response(),
    }
}

/// `Authorization: APIKey <key>` or `Bearer <access token>`; the scheme is case-insensitive.
async fn authorize(
    State(shared): State<Shared>,
    headers: HeaderMap,
    request: Request,
    next: Next,
) -> Response {
    let allowed = {
        let state = shared.lock();
        let credential = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '));
        let authenticated = match credential {
            Some((scheme, key)) if scheme.eq_ignore_ascii_case("apikey") => {
                state.options.api_keys.iter().any(|k| k == key.trim())
            }
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => {
                state.tokens.access_valid(token.trim())
            }
            _ => false,
        };
        if !authenticated {
            Err((
                StatusCode::UNAUTHORIZED,
                state.options.unauthorized_body.clone(),
            ))
        } else {
            let zone = request
                .uri()
                .path()
                .strip_prefix("/dns/v2/zones/")
                .and_then(|rest| rest.split('/').next())
                .map(normalize);
            match zone {
                Some(zone) if state.forbidden.contains(&zone) => {
                    Err((StatusCode::FORBIDDEN, state.options.forbidden_body.clone()))
                }
                _ => Ok(()),
            }
        }
    };
    match allowed {
        Ok(()) => next.run(request).await,
        Err((status, body)) => reply(status, body).into_response(),
    }
}

// ---- login -------------------------------------------------------------------------------

async fn login(State(shared): State<Shared>, body: Bytes) -> Response {
    let mut state = shared.lock();
    state.login_attempts += 1;
    let now = Instant::now();
    while state
        .logins
        .front()
        .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
    {
        state.logins.pop_front();
    }
    if state.logins.len() >= state.options.logins_per_second {
        let mut response =
            error(StatusCode::TOO_MANY_REQUESTS, "too many login requests").into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    }
    state.logins.push_back(now);
    let form: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let username = form.get("username").and_then(Value::as_str);
    let password = form.get("password").and_then(Value::as_str);
    let (Some(username), Some(password)) = (username, password) else {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({"errors": {"errors": ["username and password are required."]}}),
        )
        .into_response();
    };
    let known = state
        .options
        .users
        .iter()
        .any(|(u, p)| u == username && p == password);
    if !known {
        return reply(
            StatusCode::BAD_REQUEST,
            json!({"errors": {"errors": ["No active account found with the given credentials."]}}),
        )
        .into_response();
    }
    let (access, refresh) = state.tokens.issue_pair(username);
    state.logins_ok += 1;
    ok(json!({ "access": access, "refresh": refresh })).into_response()
}

async fn refresh(State(shared): State<Shared>, body: Bytes) -> Reply {
    let mut state = shared.lock();
    state.refresh_attempts += 1;
    let form: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(token) = form.get("refresh").and_then(Value::as_str) else {
        return error(StatusCode::BAD_REQUEST, "refresh is required");
    };
    if !state.tokens.redeem_refresh(token) {
        return reply(
            StatusCode::UNAUTHORIZED,
            json!({"detail": "Token is invalid or expired", "code": "token_not_valid"}),
        );
    }
    let user = token_username(token).unwrap_or_default();
    let (access, refresh) = state.tokens.issue_pair(&user);
    state.refreshes_ok += 1;
    ok(json!({ "access": access, "refresh": refresh }))
}

fn token_username(token: &str) -> Option<String> {
    use base64::Engine;
    let claims = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims)
        .ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    value.get("username")?.as_str().map(str::to_string)
}

// ---- zones -------------------------------------------------------------------------------

fn parse_body(body: &Bytes) -> Result<serde_json::Map<String, Value>, Reply> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(error(StatusCode::BAD_REQUEST, "body must be a JSON object")),
        Err(e) => Err(error(
            StatusCode::BAD_REQUEST,
            &format!("invalid JSON body: {e}"),
        )),
    }
}

fn valid_name(name: &str) -> bool {
    crate::dnssec::name_to_wire(name).is_ok() && normalize(name).contains('.')
}

const ZONE_FIELDS: &[&str] = &[
    "contact",
    "enabled",
    "expiry",
    "meta",
    "nx_ttl",
    "primary_server",
    "refresh",
    "retry",
    "serial",
];

async fn create_zone(State(shared): State<Shared>, body: Bytes) -> Reply {
    let form = match parse_body(&body) {
        Ok(form) => form,
        Err(reply) => return reply,
    };
    let Some(name) = form.get("name").and_then(Value::as_str) else {
        return error(StatusCode::BAD_REQUEST, "name is required");
    };
    if !valid_name(name) {
        return error(StatusCode::BAD_REQUEST, "name is invalid");
    }
    let fields: BTreeMap<String, Value> = form
        .iter()
        .filter(|(k, _)| ZONE_FIELDS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut state = shared.lock();
    match state.create_zone(name, fields) {
        Some(id) => ok(json!({ "id": id, "warnings": [] })),
        None => {
            let status = StatusCode::from_u16(state.options.zone_exists_status)
                .unwrap_or(StatusCode::CONFLICT);
            error(status, "zone is already exists")
        }
    }
}

fn zone_not_found() -> Reply {
    error(StatusCode::NOT_FOUND, "zone is not found")
}

async fn get_zone(State(shared): State<Shared>, Path(zone): Path<String>) -> Reply {
    let state = shared.lock();
    match state.zones.get(&normalize(&zone)) {
        Some(z) => ok(z.to_json()),
        None => zone_not_found(),
    }
}

async fn delete_zone(State(shared): State<Shared>, Path(zone): Path<String>) -> Reply {
    match shared.lock().zones.remove(&normalize(&zone)) {
        Some(_) => ok(json!({})),
        None => zone_not_found(),
    }
}

/// `limit`, `offset` and any number of `name` filters.
fn paging(query: Option<&str>, state: &SimState) -> (usize, usize, Vec<String>) {
    let mut limit = state.options.default_page_limit;
    let mut offset = 0;
    let mut names = Vec::new();
    for (key, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match key.as_ref() {
            "limit" => limit = value.parse().unwrap_or(limit),
            "offset" => offset = value.parse().unwrap_or(0),
            "name" => names.push(normalize(&value)),
            _ => {}
        }
    }
    (limit.clamp(1, state.options.max_page_limit), offset, names)
}

async fn list_zones(State(shared): State<Shared>, RawQuery(query): RawQuery) -> Reply {
    let state = shared.lock();
    let (limit, offset, names) = paging(query.as_deref(), &state);
    let matching: Vec<_> = state
        .zones
        .values()
        .filter(|z| names.is_empty() || names.contains(&z.name))
        .collect();
    let page: Vec<Value> = matching
        .iter()
        .skip(offset)
        .take(limit)
        .map(|z| z.to_json())
        .collect();
    ok(json!({ "zones": page, "total_amount": matching.len() }))
}

// ---- DNSSEC ------------------------------------------------------------------------------

async fn get_dnssec(State(shared): State<Shared>, Path(zone): Path<String>) -> Reply {
    let signer = {
        let state = shared.lock();
        if !state.zones.contains_key(&normalize(&zone)) {
            return zone_not_found();
        }
        state.options.signer.clone()
    };
    // With a real signer, what it signs with now is the truth (it may have been switched
    // off behind the provider's back).
    if let Some(signer) = signer {
        let name = format!("{}.", normalize(&zone));
        match blocking(move || signer.key(&name)).await {
            Ok(key) => record_signer_key(&shared, &zone, key),
            Err(e) => return error(StatusCode::BAD_GATEWAY, &format!("signer: {e}")),
        }
    }
    let state = shared.lock();
    let Some(z) = state.zones.get(&normalize(&zone)) else {
        return zone_not_found();
    };
    match z.dnssec_json(state.options.ds_ttl) {
        Some(object) => ok(object),
        None => error(StatusCode::BAD_REQUEST, "dnssec is disabled"),
    }
}

/// Runs a signer call on a blocking thread (it may spawn processes).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(format!("signer task failed: {e}")))
}

/// Makes the zone's recorded key the signer's; the UUID stays while the key does.
fn record_signer_key(shared: &Shared, zone: &str, key: Option<crate::dnssec::Dnskey>) {
    let mut state = shared.lock();
    let Some(z) = state.zones.get_mut(&normalize(zone)) else {
        return;
    };
    match key {
        Some(dnskey) => {
            if z.key.as_ref().map(|k| &k.dnskey) != Some(&dnskey) {
                z.key = Some(SimKey {
                    dnskey,
                    lab: None,
                    uuid: uuid_v4(),
                });
                z.set_dnssec_status("pending");
            }
        }
        None => {
            if z.key.take().is_some() {
                z.set_dnssec_status("disabled");
            }
        }
    }
}

async fn patch_dnssec(
    State(shared): State<Shared>,
    Path(zone): Path<String>,
    body: Bytes,
) -> Reply {
    let form = match parse_body(&body) {
        Ok(form) => form,
        Err(reply) => return reply,
    };
    let Some(enabled) = form.get("enabled").and_then(Value::as_bool) else {
        return error(StatusCode::BAD_REQUEST, "enabled must be true or false");
    };
    let force = form
        .get("force_disable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let signer = {
        let state = shared.lock();
        let Some(z) = state.zones.get(&normalize(&zone)) else {
            return zone_not_found();
        };
        if !enabled && state.options.refuse_disable_with_parent_ds && z.parent_ds_hint && !force {
            return error(
                StatusCode::CONFLICT,
                "DS record is still present at the registrar; remove it or send force_disable",
            );
        }
        state.options.signer.clone()
    };
    // The real signer acts first; the simulator records what it then signs with.
    let signed = match signer {
        None => None,
        Some(signer) => {
            let name = format!("{}.", normalize(&zone));
            let result = blocking(move || {
                if enabled {
                    signer.enable(&name).map(Some)
                } else {
                    signer.disable(&name).map(|()| None)
                }
            })
            .await;
            match result {
                Ok(key) => Some(key),
                Err(e) => return error(StatusCode::BAD_GATEWAY, &format!("signer: {e}")),
            }
        }
    };
    let mut state = shared.lock();
    let ds_ttl = state.options.ds_ttl;
    let message = if enabled {
        state.options.enable_message.clone()
    } else {
        state.options.disable_message.clone()
    };
    let Some(z) = state.zones.get_mut(&normalize(&zone)) else {
        return zone_not_found();
    };
    if enabled {
        match signed {
            // The signer's key, recorded anew only when it changed (the UUID stays).
            Some(Some(dnskey)) if z.key.as_ref().map(|k| &k.dnskey) != Some(&dnskey) => {
                z.key = Some(SimKey {
                    dnskey,
                    lab: None,
                    uuid: uuid_v4(),
                });
                z.set_dnssec_status("pending");
            }
            Some(Some(_)) => {}
            _ if z.key.is_none() => {
                match LabKey::generate(257) {
                    Ok(key) => z.key = Some(SimKey::generated(key)),
                    Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
                }
                z.set_dnssec_status("pending");
            }
            _ => {}
        }
    } else if z.key.is_some() {
        z.set_dnssec_status("disabled");
    }
    // The answer carries the key the call acted on, so read it before a disable drops it.
    let mut object = z.dnssec_json(ds_ttl).unwrap_or_else(|| json!({}));
    if !enabled {
        z.key = None;
    }
    object["message"] = json!(message);
    ok(object)
}

async fn parent_ds(State(shared): State<Shared>, Path(zone): Path<String>) -> Reply {
    let state = shared.lock();
    let Some(z) = state.zones.get(&normalize(&zone)) else {
        return zone_not_found();
    };
    let parent = z.name.split_once('.').map_or("", |(_, p)| p);
    ok(json!({
        "has_valid_parent_ds": z.parent_ds_hint,
        "parent_zone": format!("{parent}."),
        "scanned_at": rfc3339(SystemTime::now()),
    }))
}

// ---- RRsets ------------------------------------------------------------------------------

async fn list_rrsets(
    State(shared): State<Shared>,
    Path(zone): Path<String>,
    RawQuery(query): RawQuery,
) -> Reply {
    let state = shared.lock();
    let (limit, offset, _) = paging(query.as_deref(), &state);
    let Some(z) = state.zones.get(&normalize(&zone)) else {
        return zone_not_found();
    };
    let page: Vec<Value> = z
        .rrsets
        .iter()
        .skip(offset)
        .take(limit)
        .map(|((owner, rtype), set)| set.to_json(owner, rtype))
        .collect();
    ok(json!({ "rrsets": page, "total_amount": z.rrsets.len() }))
}

async fn get_rrset(
    State(shared): State<Shared>,
    Path((zone, owner, rtype)): Path<(String, String, String)>,
) -> Reply {
    let state = shared.lock();
    let Some(z) = state.zones.get(&normalize(&zone)) else {
        return zone_not_found();
    };
    let key = (normalize(&owner), rtype.to_ascii_uppercase());
    match z.rrsets.get(&key) {
        Some(set) => ok(set.to_json(&key.0, &key.1)),
        None => error(StatusCode::NOT_FOUND, "record is not found"),
    }
}

async fn delete_rrset(
    State(shared): State<Shared>,
    Path((zone, owner, rtype)): Path<(String, String, String)>,
) -> Reply {
    let mut state = shared.lock();
    let Some(z) = state.zones.get_mut(&normalize(&zone)) else {
        return zone_not_found();
    };
    match z
        .rrsets
        .remove(&(normalize(&owner), rtype.to_ascii_uppercase()))
    {
        Some(_) => ok(json!({})),
        None => error(StatusCode::NOT_FOUND, "record is not found"),
    }
}

async fn create_rrset(
    State(shared): State<Shared>,
    Path((zone, owner, rtype)): Path<(String, String, String)>,
    body: Bytes,
) -> Reply {
    write_rrset(shared, zone, owner, rtype, body, false)
}

async fn put_rrset(
    State(shared): State<Shared>,
    Path((zone, owner, rtype)): Path<(String, String, String)>,
    body: Bytes,
) -> Reply {
    write_rrset(shared, zone, owner, rtype, body, true)
}

fn write_rrset(
    shared: Shared,
    zone: String,
    owner: String,
    rtype: String,
    body: Bytes,
    replace: bool,
) -> Reply {
    let form = match parse_body(&body) {
        Ok(form) => form,
        Err(reply) => return reply,
    };
    let zone = normalize(&zone);
    let owner = normalize(&owner);
    let rtype = rtype.to_ascii_uppercase();
    if owner != zone && !owner.ends_with(&format!(".{zone}")) {
        return error(StatusCode::BAD_REQUEST, "rrset name is outside the zone");
    }
    if !valid_name(&owner) {
        return error(StatusCode::BAD_REQUEST, "rrset name is invalid");
    }
    let ttl = match form.get("ttl") {
        None => 300,
        Some(v) => match v.as_u64().and_then(|t| u32::try_from(t).ok()) {
            Some(t) => t,
            None => return error(StatusCode::BAD_REQUEST, "ttl must be a positive integer"),
        },
    };
    let records = match form.get("resource_records").and_then(Value::as_array) {
        Some(list) if !list.is_empty() => list,
        _ => return error(StatusCode::BAD_REQUEST, "resource_records are required"),
    };
    let mut parsed = Vec::with_capacity(records.len());
    for record in records {
        let Some(content) = record.get("content").and_then(Value::as_array) else {
            return error(StatusCode::BAD_REQUEST, "content is required");
        };
        if let Err(message) = check_content(&rtype, content) {
            return error(StatusCode::BAD_REQUEST, &message);
        }
        parsed.push((
            content.clone(),
            record
                .get("enabled")
                .and_then(Value::as_bool)
                .unwrap_or(true),
            record.get("meta").cloned().unwrap_or_else(|| json!({})),
        ));
    }
    let mut state = shared.lock();
    if !state.zones.contains_key(&zone) {
        return zone_not_found();
    }
    let ids: Vec<u64> = parsed.iter().map(|_| state.next_id()).collect();
    let Some(z) = state.zones.get_mut(&zone) else {
        return zone_not_found();
    };
    let key = (owner, rtype);
    if !replace && z.rrsets.contains_key(&key) {
        return error(StatusCode::CONFLICT, "rrset is already exists");
    }
    let set = SimRrset {
        ttl,
        records: parsed
            .into_iter()
            .zip(ids)
            .map(|((content, enabled, meta), id)| SimRecord {
                id,
                content,
                enabled,
                meta,
            })
            .collect(),
        meta: form.get("meta").cloned().unwrap_or_else(|| json!({})),
        updated_at: unix_now(),
    };
    let answer = set.to_json(&key.0, &key.1);
    z.rrsets.insert(key, set);
    ok(answer)
}

/// The content checks the provider makes for the common types.
fn check_content(rtype: &str, content: &[Value]) -> Result<(), String> {
    let first = content.first().ok_or("content is empty")?;
    let text = first.as_str();
    match rtype {
        "A" => text
            .and_then(|t| t.parse::<Ipv4Addr>().ok())
            .map(drop)
            .ok_or_else(|| format!("{first} is not an IPv4 address")),
        "AAAA" => text
            .and_then(|t| t.parse::<Ipv6Addr>().ok())
            .map(drop)
            .ok_or_else(|| format!("{first} is not an IPv6 address")),
        "MX" if content.len() != 2 || !first.is_u64() => {
            Err("MX content is [preference, \"exchange\"]".into())
        }
        "SRV" if content.len() != 4 => {
            Err("SRV content is [priority, weight, port, \"target\"]".into())
        }
        _ => Ok(()),
    }
}

// ---- the lab's own window ----------------------------------------------------------------

async fn lab_calls(State(shared): State<Shared>) -> Reply {
    let calls: Vec<Value> = shared
        .lock()
        .calls
        .iter()
        .map(|c| {
            json!({
                "at": rfc3339(c.at),
                "method": c.method,
                "path": c.path,
                "body": c.body,
                "status": c.status,
            })
        })
        .collect();
    ok(Value::Array(calls))
}

#[cfg(test)]
mod tests {
    use super::path_shape;

    #[test]
    fn requests_are_counted_by_the_shape_of_their_path() {
        assert_eq!(path_shape("/dns/v2/zones"), "/dns/v2/zones");
        assert_eq!(
            path_shape("/dns/v2/zones/example.com/dnssec"),
            "/dns/v2/zones/{zone}/dnssec"
        );
        assert_eq!(
            path_shape("/dns/v2/zones/example.com"),
            "/dns/v2/zones/{zone}"
        );
        assert_eq!(
            path_shape("/dns/v2/zones/example.com/www.example.com/A"),
            "/dns/v2/zones/{zone}/{name}/A"
        );
        assert_eq!(
            path_shape("/dns/v2/zones/example.com/rrsets"),
            "/dns/v2/zones/{zone}/rrsets"
        );
    }
}
