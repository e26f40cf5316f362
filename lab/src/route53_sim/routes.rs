//! The HTTP surface of the simulator, operation for operation as docs/providers/route53.md
//! describes it, every answer in the model's XML, every error an `ErrorResponse` whose
//! `Code` is the model's error shape.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};

use super::Shared;
use super::sigv4::{self, Authorization, Signed};
use super::state::{Bucket, Effect, Ksk, R53State, XMLNS, change_info, escape, fqdn, reversed};
use crate::provider_sim::{CallRecord, FaultKind};

const API: &str = "/2013-04-01";

fn xml(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    if let Ok(id) = HeaderValue::from_str(&format!("{:032x}", fastrand::u128(..))) {
        headers.insert("x-amzn-requestid", id);
    }
    response
}

/// `<NameResponse xmlns=…>inner</NameResponse>`.
fn answer(name: &str, inner: &str) -> Response {
    answer_with(StatusCode::OK, name, inner)
}

fn answer_with(status: StatusCode, name: &str, inner: &str) -> Response {
    xml(
        status,
        format!(
            "<?xml version=\"1.0\"?>\n<{name}Response xmlns=\"{XMLNS}\">{inner}</{name}Response>"
        ),
    )
}

/// The model's error body (`Type`, `Code`, `Message`, `RequestId`).
fn error(status: u16, code: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    let kind = if status.is_server_error() {
        "Receiver"
    } else {
        "Sender"
    };
    xml(
        status,
        format!(
            "<?xml version=\"1.0\"?>\n<ErrorResponse xmlns=\"{XMLNS}\"><Error><Type>{kind}</Type><Code>{code}</Code><Message>{}</Message></Error><RequestId>{:032x}</RequestId></ErrorResponse>",
            escape(message),
            fastrand::u128(..)
        ),
    )
}

fn no_zone(id: &str) -> Response {
    error(
        404,
        "NoSuchHostedZone",
        &format!("No hosted zone found with ID: {id}"),
    )
}

pub(super) fn router(shared: Shared) -> Router {
    let api = Router::new()
        .route(&format!("{API}/hostedzone"), get(list_zones))
        .route(&format!("{API}/hostedzone/{{id}}"), get(get_zone))
        .route(&format!("{API}/hostedzone/{{id}}/dnssec"), get(get_dnssec))
        .route(
            &format!("{API}/hostedzone/{{id}}/enable-dnssec"),
            post(enable),
        )
        .route(
            &format!("{API}/hostedzone/{{id}}/disable-dnssec"),
            post(disable),
        )
        .route(&format!("{API}/hostedzone/{{id}}/rrset"), get(list_records))
        .route(&format!("{API}/hostedzonesbyname"), get(by_name))
        .route(&format!("{API}/keysigningkey"), post(create_ksk))
        .route(
            &format!("{API}/keysigningkey/{{zone}}/{{name}}/{{action}}"),
            post(ksk_action),
        )
        .route(
            &format!("{API}/keysigningkey/{{zone}}/{{name}}"),
            delete(delete_ksk),
        )
        .route(&format!("{API}/change/{{id}}"), get(get_change))
        .fallback(|request: Request| async move {
            error(
                404,
                "UnknownOperationException",
                &format!("no operation at {}", request.uri().path()),
            )
        })
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

/// The path with its ids replaced: `/2013-04-01/hostedzone/{id}/dnssec`.
fn path_shape(path: &str) -> String {
    let mut parts: Vec<String> = path.split('/').map(str::to_string).collect();
    for i in 0..parts.len() {
        let id_after = matches!(parts[i].as_str(), "hostedzone" | "change" | "keysigningkey");
        if id_after && let Some(next) = parts.get_mut(i + 1) {
            *next = "{id}".into();
            if parts[i] == "keysigningkey"
                && let Some(name) = parts.get_mut(i + 2)
            {
                *name = "{name}".into();
            }
        }
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
        Some(FaultKind::Status(code)) => error(code, "InternalFailure", "injected fault"),
        Some(FaultKind::RateLimit { .. }) => error(400, "Throttling", "Rate exceeded"),
        Some(FaultKind::Hang) => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            error(504, "InternalFailure", "hung")
        }
        Some(FaultKind::Malformed) => xml(
            StatusCode::OK,
            format!("<?xml version=\"1.0\"?>\n<GetDNSSECResponse xmlns=\"{XMLNS}\"><Status><Serve"),
        ),
    }
}

/// `YYYYMMDDTHHMMSSZ` as a time.
fn amz_time(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (hh, mm, ss) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

/// Every request's SigV4: the header's shape, a known access key, the scope (this
/// region, `route53`, the date of `X-Amz-Date`), the time within the skew, `host` and
/// `x-amz-date` signed, and the signature itself over the body; then the account's
/// bucket (400 `Throttling` when empty, as Route 53 answers).
async fn authorize(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return error(400, "InvalidInput", "request body too large");
    };
    let signed_host = shared.lock().options.signed_host.clone();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(n, v)| {
            let name = n.as_str().to_ascii_lowercase();
            let value = match &signed_host {
                Some(host) if name == "host" => host.clone(),
                _ => String::from_utf8_lossy(v.as_bytes()).into_owned(),
            };
            (name, value)
        })
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let refused = {
        let mut state = shared.lock();
        let verdict = check_signature(&state, &parts, &headers, &bytes, &header);
        match verdict {
            Err((code, message)) => {
                *state.auth_refusals.entry(code.to_string()).or_default() += 1;
                Some(error(403, code, &message))
            }
            Ok(key_id) => match state.options.rate_limit {
                Some(rate) => {
                    let allowed = state
                        .buckets
                        .entry(key_id)
                        .or_insert_with(|| Bucket::full(rate))
                        .take(rate);
                    if allowed {
                        None
                    } else {
                        state.throttled += 1;
                        Some(error(400, "Throttling", "Rate exceeded"))
                    }
                }
                None => None,
            },
        }
    };
    match refused {
        Some(response) => response,
        None => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

fn check_signature(
    state: &R53State,
    parts: &axum::http::request::Parts,
    headers: &[(String, String)],
    body: &[u8],
    header: &dyn Fn(&str) -> Option<String>,
) -> Result<String, (&'static str, String)> {
    let Some(value) = header("authorization") else {
        return Err((
            "MissingAuthenticationToken",
            "Missing Authentication Token".into(),
        ));
    };
    let auth = Authorization::parse(&value).map_err(|r| (r.code, r.message))?;
    let Some(amz_date) = header("x-amz-date") else {
        return Err((
            "IncompleteSignature",
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header"
                .into(),
        ));
    };
    let Some(secret) = state
        .options
        .credentials
        .iter()
        .find(|(id, _)| *id == auth.access_key_id)
        .map(|(_, s)| s.clone())
    else {
        return Err((
            "InvalidClientTokenId",
            "The security token included in the request is invalid.".into(),
        ));
    };
    if auth.service != "route53" || auth.region != state.options.region {
        return Err((
            "SignatureDoesNotMatch",
            format!(
                "Credential should be scoped to a valid region and service ('{}', 'route53'), not ('{}', '{}')",
                state.options.region, auth.region, auth.service
            ),
        ));
    }
    let Some(at) = amz_time(&amz_date) else {
        return Err(("IncompleteSignature", "X-Amz-Date is malformed".into()));
    };
    if !amz_date.starts_with(&auth.date) {
        return Err((
            "SignatureDoesNotMatch",
            "Date in Credential scope does not match YYYYMMDD from X-Amz-Date".into(),
        ));
    }
    let now = SystemTime::now();
    let skew = now.duration_since(at).unwrap_or_else(|e| e.duration());
    if skew > state.options.max_skew {
        return Err((
            "SignatureDoesNotMatch",
            format!(
                "Signature expired: {amz_date} is more than five minutes from the server's time"
            ),
        ));
    }
    for needed in ["host", "x-amz-date"] {
        if !auth.signed_headers.iter().any(|h| h == needed) {
            return Err((
                "SignatureDoesNotMatch",
                format!("'{needed}' must be a signed header"),
            ));
        }
    }
    let signed = Signed {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query().unwrap_or(""),
        headers,
        body,
    };
    if sigv4::signature(&signed, &auth, &amz_date, &secret) != auth.signature {
        return Err((
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided.".into(),
        ));
    }
    Ok(auth.access_key_id)
}

/// Keeps every state-changing call, with its body and status, for tests to read. The call
/// runs in a task of its own, which a dropped connection does not cancel: Route 53
/// finishes a call whose client went away.
async fn record_call(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    let method = request.method().clone();
    if !matches!(method, Method::POST | Method::DELETE) {
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
        shared.lock().calls.push(CallRecord {
            at,
            method: method.to_string(),
            path,
            body: serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned()),
            status: response.status().as_u16(),
        });
        response
    });
    match call.await {
        Ok(response) => response,
        Err(e) => error(500, "InternalFailure", &e.to_string()),
    }
}

// ---- zones -----------------------------------------------------------------------------

fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// `maxitems`: a string of digits, 1 or more; above the largest page it is cut to it.
/// `Err`: the refusal to answer.
fn max_items(pairs: &[(String, String)], state: &R53State) -> Result<usize, Box<Response>> {
    match pairs.iter().find(|(k, _)| k == "maxitems") {
        None => Ok(state.options.max_items),
        Some((_, v)) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n.min(state.options.max_items)),
            _ => Err(Box::new(error(
                400,
                "InvalidInput",
                "Invalid value for maxitems",
            ))),
        },
    }
}

/// ListHostedZones: by id, from `marker` (the id of the first zone of the page).
async fn list_zones(State(shared): State<Shared>, RawQuery(query): RawQuery) -> Response {
    let state = shared.lock();
    let pairs = query_pairs(query.as_deref());
    let max = match max_items(&pairs, &state) {
        Ok(m) => m,
        Err(e) => return *e,
    };
    let marker = pairs
        .iter()
        .find(|(k, _)| k == "marker")
        .map(|(_, v)| v.clone());
    if let Some(m) = &marker
        && !state.zones.contains_key(m)
    {
        return error(400, "InvalidInput", &format!("Invalid marker {m}"));
    }
    let zones: Vec<_> = state
        .zones
        .values()
        .skip_while(|z| marker.as_ref().is_some_and(|m| z.id < *m))
        .collect();
    let page: String = zones.iter().take(max).map(|z| z.xml()).collect();
    let more = zones.len() > max;
    let mut inner = format!(
        "<HostedZones>{page}</HostedZones><Marker>{}</Marker><IsTruncated>{more}</IsTruncated>",
        marker.unwrap_or_default()
    );
    if more {
        inner.push_str(&format!("<NextMarker>{}</NextMarker>", zones[max].id));
    }
    inner.push_str(&format!("<MaxItems>{max}</MaxItems>"));
    answer("ListHostedZones", &inner)
}

/// ListHostedZonesByName: in order of reversed labels, then id, starting at `dnsname`
/// (and `hostedzoneid`, which needs `dnsname`).
async fn by_name(State(shared): State<Shared>, RawQuery(query): RawQuery) -> Response {
    let state = shared.lock();
    let pairs = query_pairs(query.as_deref());
    let max = match max_items(&pairs, &state) {
        Ok(m) => m,
        Err(e) => return *e,
    };
    let get = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let dnsname = get("dnsname");
    let start_id = get("hostedzoneid");
    if start_id.is_some() && dnsname.is_none() {
        return error(400, "InvalidInput", "hostedzoneid requires dnsname");
    }
    if let Some(n) = &dnsname
        && (n.contains("..") || n.starts_with('.'))
    {
        return error(
            400,
            "InvalidDomainName",
            &format!("{n} is not a valid domain name"),
        );
    }
    let mut zones: Vec<_> = state.zones.values().collect();
    zones.sort_by(|a, b| (reversed(&a.name), &a.id).cmp(&(reversed(&b.name), &b.id)));
    let start = dnsname.as_deref().map(|n| reversed(&fqdn(n)));
    let zones: Vec<_> = zones
        .into_iter()
        .filter(|z| match (&start, &start_id) {
            (None, _) => true,
            (Some(s), None) => reversed(&z.name) >= *s,
            (Some(s), Some(id)) => (reversed(&z.name), z.id.clone()) >= (s.clone(), id.clone()),
        })
        .collect();
    let page: String = zones.iter().take(max).map(|z| z.xml()).collect();
    let more = zones.len() > max;
    let mut inner = format!("<HostedZones>{page}</HostedZones>");
    if let Some(n) = &dnsname {
        inner.push_str(&format!("<DNSName>{}</DNSName>", escape(n)));
    }
    if let Some(id) = &start_id {
        inner.push_str(&format!("<HostedZoneId>{id}</HostedZoneId>"));
    }
    inner.push_str(&format!("<IsTruncated>{more}</IsTruncated>"));
    if more {
        inner.push_str(&format!(
            "<NextDNSName>{}</NextDNSName><NextHostedZoneId>{}</NextHostedZoneId>",
            escape(&zones[max].name),
            zones[max].id
        ));
    }
    inner.push_str(&format!("<MaxItems>{max}</MaxItems>"));
    answer("ListHostedZonesByName", &inner)
}

async fn get_zone(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let state = shared.lock();
    let Some(z) = state.zones.get(&id) else {
        return no_zone(&id);
    };
    let servers: String = state
        .options
        .name_servers
        .iter()
        .map(|s| format!("<NameServer>{}</NameServer>", escape(s)))
        .collect();
    answer(
        "GetHostedZone",
        &format!(
            "{}<DelegationSet><NameServers>{servers}</NameServers></DelegationSet>",
            z.xml()
        ),
    )
}

/// ListResourceRecordSets: by reversed name then type, from `name` (and `type`).
async fn list_records(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let state = shared.lock();
    let pairs = query_pairs(query.as_deref());
    let max = match max_items(&pairs, &state) {
        Ok(m) => m.min(300),
        Err(e) => return *e,
    };
    let Some(z) = state.zones.get(&id) else {
        return no_zone(&id);
    };
    let get = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let start = get("name").map(|n| (reversed(&fqdn(&n)), get("type").unwrap_or_default()));
    let mut records: Vec<_> = z.records.iter().collect();
    records.sort_by(|a, b| (reversed(&a.name), &a.rtype).cmp(&(reversed(&b.name), &b.rtype)));
    let records: Vec<_> = records
        .into_iter()
        .filter(|r| {
            start
                .as_ref()
                .is_none_or(|(n, t)| (reversed(&r.name), r.rtype.clone()) >= (n.clone(), t.clone()))
        })
        .collect();
    let page: String = records.iter().take(max).map(|r| r.xml()).collect();
    let more = records.len() > max;
    let mut inner =
        format!("<ResourceRecordSets>{page}</ResourceRecordSets><IsTruncated>{more}</IsTruncated>");
    if more {
        inner.push_str(&format!(
            "<NextRecordName>{}</NextRecordName><NextRecordType>{}</NextRecordType>",
            escape(&records[max].name),
            records[max].rtype
        ));
    }
    inner.push_str(&format!("<MaxItems>{max}</MaxItems>"));
    answer("ListResourceRecordSets", &inner)
}

// ---- DNSSEC ----------------------------------------------------------------------------

async fn get_dnssec(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let mut state = shared.lock();
    state.advance();
    let item = state.options.ksk_item;
    let Some(z) = state.zones.get(&id) else {
        return no_zone(&id);
    };
    let serve = z.serve_override.clone().unwrap_or(z.serve.to_string());
    let keys: String = z
        .ksks
        .iter()
        .filter_map(|k| state.kms.get(&k.arn).map(|key| z.ksk_xml(k, key, item)))
        .collect();
    answer(
        "GetDNSSEC",
        &format!(
            "<Status><ServeSignature>{}</ServeSignature></Status><KeySigningKeys>{keys}</KeySigningKeys>",
            escape(&serve)
        ),
    )
}

fn changed(state: &mut R53State, name: &str, effect: Effect, extra: &str) -> Response {
    changed_with(state, StatusCode::OK, name, effect, extra)
}

fn changed_with(
    state: &mut R53State,
    status: StatusCode,
    name: &str,
    effect: Effect,
    extra: &str,
) -> Response {
    let id = state.submit(effect);
    let (st, at) = state
        .change_status(&id)
        .unwrap_or(("PENDING", SystemTime::now()));
    answer_with(
        status,
        name,
        &format!("{}{extra}", change_info(&id, st, at)),
    )
}

/// EnableHostedZoneDNSSEC: an `ACTIVE` key needed, the parent's NS must be the zone's
/// (else `HostedZonePartiallyDelegated`); the name servers sign once `INSYNC`.
async fn enable(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let mut state = shared.lock();
    state.advance();
    let parent_ns = state.options.parent_ns.clone();
    let ours: Vec<String> = state.options.name_servers.iter().map(|s| fqdn(s)).collect();
    let Some(z) = state.zones.get_mut(&id) else {
        return no_zone(&id);
    };
    if z.serve == "DELETING" {
        return error(
            400,
            "InvalidSigningStatus",
            "Your hosted zone status isn't valid for this operation.",
        );
    }
    if !z.ksks.iter().any(|k| k.status == "ACTIVE") {
        return error(
            400,
            "KeySigningKeyWithActiveStatusNotFound",
            "A key-signing key (KSK) with ACTIVE status wasn't found.",
        );
    }
    if let Some(parent) = parent_ns
        && let Some(ns) = parent(&z.name)
    {
        let mut theirs: Vec<String> = ns.iter().map(|s| fqdn(s)).collect();
        theirs.sort();
        let mut mine = ours.clone();
        mine.sort();
        if theirs != mine {
            return error(
                400,
                "HostedZonePartiallyDelegated",
                "The hosted zone nameservers don't match the parent nameservers. The hosted zone and parent must have the same nameservers.",
            );
        }
    }
    z.serve = "SIGNING";
    let effect = Effect::Served {
        zone: id.clone(),
        signed: true,
    };
    changed(&mut state, "EnableHostedZoneDNSSEC", effect, "")
}

/// DisableHostedZoneDNSSEC: refused while the parent lists a DS; `DELETING` until
/// `INSYNC`, then `NOT_SIGNING` and served unsigned. Its keys stay as they are.
async fn disable(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let mut state = shared.lock();
    state.advance();
    let parent_ds = state.options.parent_ds.clone();
    let Some(z) = state.zones.get_mut(&id) else {
        return no_zone(&id);
    };
    if z.ksks.is_empty() && z.serve == "NOT_SIGNING" {
        return error(
            400,
            "DNSSECNotFound",
            "The hosted zone doesn't have any DNSSEC resources.",
        );
    }
    if z.serve == "SIGNING"
        && let Some(parent) = parent_ds
        && parent(&z.name) == Some(true)
    {
        return error(
            400,
            "KeySigningKeyInParentDSRecord",
            "The key-signing key (KSK) is specified in a parent DS record.",
        );
    }
    let effect = if z.serve == "NOT_SIGNING" {
        Effect::None
    } else {
        z.serve = "DELETING";
        Effect::Served {
            zone: id.clone(),
            signed: false,
        }
    };
    changed(&mut state, "DisableHostedZoneDNSSEC", effect, "")
}

/// CreateKeySigningKey's body: the model's root in its namespace, its five members in
/// order, each once, nothing else.
fn create_request(body: &[u8]) -> Result<[String; 5], String> {
    let text = std::str::from_utf8(body).map_err(|_| "the body is not UTF-8".to_string())?;
    let doc = roxmltree::Document::parse(text).map_err(|e| format!("not XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "CreateKeySigningKeyRequest"
        || root.tag_name().namespace() != Some(XMLNS)
    {
        return Err(
            "the root must be CreateKeySigningKeyRequest in the 2013-04-01 namespace".into(),
        );
    }
    let members = [
        "CallerReference",
        "HostedZoneId",
        "KeyManagementServiceArn",
        "Name",
        "Status",
    ];
    let children: Vec<_> = root.children().filter(|c| c.is_element()).collect();
    if children.len() != members.len() {
        return Err(format!("{} members, not 5", children.len()));
    }
    let mut out: [String; 5] = Default::default();
    for (i, (child, name)) in children.iter().zip(members).enumerate() {
        if child.tag_name().name() != name {
            return Err(format!(
                "member {i} is {}, not {name}",
                child.tag_name().name()
            ));
        }
        out[i] = child.text().unwrap_or("").to_string();
    }
    Ok(out)
}

async fn create_ksk(State(shared): State<Shared>, body: Bytes) -> Response {
    let [reference, zone_id, arn, name, status] = match create_request(&body) {
        Ok(m) => m,
        Err(why) => return error(400, "InvalidInput", &why),
    };
    if reference.is_empty() || reference.len() > 128 {
        return error(
            400,
            "InvalidInput",
            "CallerReference must be 1 to 128 characters",
        );
    }
    if zone_id.contains('/') {
        return error(400, "InvalidInput", "HostedZoneId must be the bare id");
    }
    let mut state = shared.lock();
    state.advance();
    let known_arn = state.kms.contains_key(&arn);
    let Some(z) = state.zones.get_mut(&zone_id) else {
        return no_zone(&zone_id);
    };
    if !(3..=128).contains(&name.len())
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return error(
            400,
            "InvalidKeySigningKeyName",
            "The key-signing key (KSK) name that you specified isn't a valid name.",
        );
    }
    if status != "ACTIVE" && status != "INACTIVE" {
        return error(
            400,
            "InvalidKeySigningKeyStatus",
            "The key-signing key (KSK) status isn't valid.",
        );
    }
    if !known_arn {
        return error(
            400,
            "InvalidKMSArn",
            "The KeyManagementServiceArn that you specified isn't valid to use with DNSSEC signing.",
        );
    }
    if z.ksks.iter().any(|k| k.name == name || k.arn == arn) {
        return error(
            409,
            "KeySigningKeyAlreadyExists",
            "You've already created a key-signing key (KSK) with this name or with the same customer managed key ARN.",
        );
    }
    if z.ksks.len() >= 2 {
        return error(
            400,
            "TooManyKeySigningKeys",
            "You've reached the limit for the number of key-signing keys (KSKs). Remove at least one KSK, and then try again.",
        );
    }
    let now = SystemTime::now();
    let ksk = Ksk {
        name: name.clone(),
        arn: arn.clone(),
        status: if status == "ACTIVE" {
            "ACTIVE"
        } else {
            "INACTIVE"
        },
        created: now,
        modified: now,
    };
    let key = state.kms_key(&arn);
    let Some(z) = state.zones.get_mut(&zone_id) else {
        return no_zone(&zone_id);
    };
    let member = z.ksk_xml(&ksk, &key, "KeySigningKey");
    z.ksks.push(ksk);
    let mut response = changed_with(
        &mut state,
        StatusCode::CREATED,
        "CreateKeySigningKey",
        Effect::None,
        &member,
    );
    if let Ok(location) = HeaderValue::from_str(&format!(
        "https://route53.amazonaws.com{API}/keysigningkey/{zone_id}/{name}"
    )) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Activate/DeactivateKeySigningKey. Deactivating the only `ACTIVE` key of a signed zone
/// is `KeySigningKeyInUse`; any while the parent lists a DS `KeySigningKeyInParentDSRecord`.
async fn ksk_action(
    State(shared): State<Shared>,
    Path((zone_id, name, action)): Path<(String, String, String)>,
) -> Response {
    let mut state = shared.lock();
    state.advance();
    let parent_ds = state.options.parent_ds.clone();
    let Some(z) = state.zones.get_mut(&zone_id) else {
        return no_zone(&zone_id);
    };
    let signing = z.serve != "NOT_SIGNING";
    let actives = z.ksks.iter().filter(|k| k.status == "ACTIVE").count();
    let zone_name = z.name.clone();
    let Some(ksk) = z.ksks.iter_mut().find(|k| k.name == name) else {
        return error(
            404,
            "NoSuchKeySigningKey",
            "The specified key-signing key (KSK) doesn't exist.",
        );
    };
    let root = match action.as_str() {
        "activate" => {
            ksk.status = "ACTIVE";
            "ActivateKeySigningKey"
        }
        "deactivate" => {
            if ksk.status == "ACTIVE" && signing && actives == 1 {
                return error(
                    400,
                    "KeySigningKeyInUse",
                    "The key-signing key (KSK) that you specified can't be deactivated because it's the only KSK for a currently-enabled DNSSEC. Disable DNSSEC signing, or add or enable another KSK.",
                );
            }
            if let Some(parent) = &parent_ds
                && signing
                && parent(&zone_name) == Some(true)
            {
                return error(
                    400,
                    "KeySigningKeyInParentDSRecord",
                    "The key-signing key (KSK) is specified in a parent DS record.",
                );
            }
            ksk.status = "INACTIVE";
            "DeactivateKeySigningKey"
        }
        _ => {
            return error(
                404,
                "UnknownOperationException",
                &format!("no action {action}"),
            );
        }
    };
    ksk.modified = SystemTime::now();
    changed(&mut state, root, Effect::None, "")
}

/// DeleteKeySigningKey: only an `INACTIVE` key.
async fn delete_ksk(
    State(shared): State<Shared>,
    Path((zone_id, name)): Path<(String, String)>,
) -> Response {
    let mut state = shared.lock();
    state.advance();
    let Some(z) = state.zones.get_mut(&zone_id) else {
        return no_zone(&zone_id);
    };
    let Some(i) = z.ksks.iter().position(|k| k.name == name) else {
        return error(
            404,
            "NoSuchKeySigningKey",
            "The specified key-signing key (KSK) doesn't exist.",
        );
    };
    if z.ksks[i].status != "INACTIVE" {
        return error(
            400,
            "InvalidKeySigningKeyStatus",
            "The key-signing key (KSK) status isn't valid or another KSK has the status INTERNAL_FAILURE.",
        );
    }
    z.ksks.remove(i);
    changed(&mut state, "DeleteKeySigningKey", Effect::None, "")
}

async fn get_change(State(shared): State<Shared>, Path(id): Path<String>) -> Response {
    let mut state = shared.lock();
    match state.change_status(&id) {
        Some((status, at)) => answer("GetChange", &change_info(&id, status, at)),
        None => error(
            404,
            "NoSuchChange",
            &format!("A change with the specified change ID does not exist: {id}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_counted_by_shape_and_dates_read() {
        assert_eq!(
            path_shape("/2013-04-01/hostedzone/Z1/dnssec"),
            "/2013-04-01/hostedzone/{id}/dnssec"
        );
        assert_eq!(
            path_shape("/2013-04-01/keysigningkey/Z1/k/activate"),
            "/2013-04-01/keysigningkey/{id}/{name}/activate"
        );
        assert_eq!(
            amz_time("20150830T123600Z"),
            Some(UNIX_EPOCH + Duration::from_secs(1_440_938_160))
        );
        assert_eq!(amz_time("2015-08-30"), None);
    }
}
