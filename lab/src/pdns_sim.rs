//! A PowerDNS Authoritative API simulator over real HTTP on loopback: the part of the API
//! dnssec-warden uses (DESIGN.md section 7, "PowerDNS Authoritative"), with the answers
//! the real server gives (tests/providers/powerdns.rs runs the same client calls against
//! `pdns_server` and against this simulator and compares them).
//!
//! One server id (`localhost` unless set), the `X-API-Key` header, zones found by name
//! (`GET /zones?zone=`) and named by their id; `PUT /zones/{id} {"dnssec": …}` makes one
//! ECDSA P-256 CSK (where no key is active) or deletes every key (where one is); the
//! keystore at `/cryptokeys` (never among the zone's record sets): keys listed, added
//! (`POST`, algorithms 8, 13 and 15, `active` and `published` as asked), their flags set
//! (`PUT`) and deleted, as 4.7 answers each (DESIGN.md section 7); the
//! `PUBLISH-CDS`/`PUBLISH-CDNSKEY` metadata; other signers' DNSKEY records stored at the
//! apex with `PATCH`, served only with `direct-dnskey=yes` (`/config` says which). A 404
//! is the plain text `Not Found`, for an unknown zone's path, an unknown key and every
//! path under an unknown server id; invalid input is a 422 with `{"error": …}`. The lab's
//! name servers serve what the simulator holds ([`PdnsHandle::signing`],
//! [`PdnsHandle::apex`]).
//!
//! Every key is a real pair and the lab's signer serves what 4.7 serves
//! ([`PdnsHandle::signing`]): every published key in the DNSKEY RRset, active or not;
//! every active key signing, published or not; per algorithm, where an active SEP key
//! and an active other key exist, the SEP keys sign the DNSKEY RRset only and the others
//! everything else (CDS and CDNSKEY are signed by both); CDS/CDNSKEY for the published
//! keys but such a ZSK. RSA keys (2048 bits only) are the lab's pre-made pairs
//! ([`LabKey::lab_rsa`]): ring makes none, so a zone holds at most
//! [`crate::keys::RSA_KEY_COUNT`] of them, and two simulators may hand out the same one.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use url::Url;

use crate::dns::zone::{Signing, Signs};
use crate::dnssec::{DigestType, Dnskey};
use crate::keys::{LabKey, RSA_KEY_COUNT};
use crate::provider_sim::CallRecord;

/// The simulator's settings.
#[derive(Debug, Clone)]
pub struct PdnsOptions {
    /// The `api-key` of pdns.conf.
    pub api_key: String,
    /// The one server id of the API.
    pub server_id: String,
    /// The apex NS every new zone gets.
    pub name_servers: Vec<String>,
    /// The TTL of the zone's own records (SOA, NS); stored DNSKEYs are served at it too,
    /// as the real server serves them at its keys' TTL.
    pub ttl: u32,
    /// `direct-dnskey`: stored DNSKEY records are served beside the keystore's.
    pub direct_dnskey: bool,
}

impl Default for PdnsOptions {
    fn default() -> Self {
        Self {
            api_key: String::new(),
            server_id: "localhost".into(),
            name_servers: vec!["ns1.example.net.".into(), "ns2.example.net.".into()],
            ttl: 3600,
            direct_dnskey: true,
        }
    }
}

/// What the simulated server publishes at a zone's apex besides its own key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Apex {
    /// DNSKEY records stored as records (served only with `direct-dnskey`).
    pub stored_dnskeys: Vec<Dnskey>,
    /// `PUBLISH-CDS`: the digest types of the CDS of the entry point (empty: none).
    pub cds_digests: Vec<DigestType>,
    /// `PUBLISH-CDNSKEY` `1`: the CDNSKEY of the entry point.
    pub cdnskey: bool,
    /// `PUBLISH-CDS` or `PUBLISH-CDNSKEY` `0`: the RFC 8078 delete request.
    pub delete: bool,
}

#[derive(Debug, Clone)]
struct Rrset {
    ttl: u32,
    contents: Vec<String>,
}

/// One key of a zone's keystore.
#[derive(Debug, Clone)]
struct SimKey {
    id: u64,
    dnskey: Dnskey,
    /// The pair the lab's signer signs with.
    pair: LabKey,
    /// RSA: the modulus' size; 256 otherwise, as 4.7 says.
    bits: u32,
    /// Of an RSA key: which of the lab's pairs it is.
    rsa_index: Option<usize>,
    active: bool,
    published: bool,
}

impl SimKey {
    fn from_lab(id: u64, key: LabKey, active: bool, published: bool) -> Self {
        Self {
            id,
            dnskey: key.dnskey(),
            pair: key,
            bits: 256,
            rsa_index: None,
            active,
            published,
        }
    }
}

#[derive(Debug, Clone)]
struct Zone {
    id: String,
    name: String,
    serial: u32,
    /// The keystore, in the order the keys were made.
    keys: Vec<SimKey>,
    metadata: BTreeMap<String, Vec<String>>,
    /// Record sets stored through the API besides SOA and NS: (owner, type) -> set.
    rrsets: BTreeMap<(String, String), Rrset>,
    ns: Vec<String>,
}

struct PdnsState {
    options: PdnsOptions,
    zones: BTreeMap<String, Zone>,
    next_key_id: u64,
    calls: Vec<CallRecord>,
}

fn absolute(name: &str) -> String {
    let name = name.trim().to_ascii_lowercase();
    if name.ends_with('.') {
        name
    } else {
        format!("{name}.")
    }
}

/// The presentation form PowerDNS gives a DNSKEY: `257 3 13 <base64>`.
fn dnskey_text(key: &Dnskey) -> String {
    format!(
        "{} {} {} {}",
        key.flags,
        key.protocol,
        key.algorithm,
        base64::engine::general_purpose::STANDARD.encode(&key.public_key)
    )
}

pub(crate) fn parse_dnskey(text: &str) -> Option<Dnskey> {
    let mut fields = text.split_whitespace();
    let flags = fields.next()?.parse().ok()?;
    let protocol = fields.next()?.parse().ok()?;
    let algorithm = fields.next()?.parse().ok()?;
    let key: String = fields.collect();
    let public_key = base64::engine::general_purpose::STANDARD
        .decode(key.as_bytes())
        .ok()?;
    (!public_key.is_empty()).then_some(Dnskey {
        flags,
        protocol,
        algorithm,
        public_key,
    })
}

impl Zone {
    /// Signed, as 4.7 says it (`dnssec` of the zone): some key is active.
    fn secured(&self) -> bool {
        self.keys.iter().any(|k| k.active)
    }

    /// The zone's entry point: an active, published SEP key, else an active key.
    fn entry_point(&self) -> Option<&SimKey> {
        let active = || self.keys.iter().filter(|k| k.active);
        active()
            .find(|k| k.published && k.dnskey.is_sep())
            .or_else(|| active().next())
    }

    /// What 4.7 serves from the keystore: every published key in the DNSKEY RRset, every
    /// active key signing as its `keytype` says (a KSK the DNSKEY RRset, a ZSK the rest, a
    /// CSK everything), CDS/CDNSKEY for the published keys it calls no ZSK.
    fn signing(&self) -> Signing {
        let signs = |k: &SimKey| match self.keytype(k) {
            "ksk" => Signs::Keys,
            "zsk" => Signs::Data,
            _ => Signs::Everything,
        };
        Signing {
            dnskeys: self
                .keys
                .iter()
                .filter(|k| k.published)
                .map(|k| k.dnskey.clone())
                .collect(),
            signers: self
                .keys
                .iter()
                .filter(|k| k.active)
                .map(|k| (k.pair.clone(), signs(k)))
                .collect(),
            entry_points: self
                .keys
                .iter()
                .filter(|k| k.published && self.keytype(k) != "zsk")
                .map(|k| k.dnskey.clone())
                .collect(),
        }
    }

    /// 4.7's `keytype`: per algorithm, SEP keys are `ksk` and the others `zsk` where both
    /// an active SEP and an active other key of it exist; every key is `csk` otherwise.
    fn keytype(&self, key: &SimKey) -> &'static str {
        let split = |sep: bool| {
            self.keys.iter().any(|k| {
                k.active && k.dnskey.algorithm == key.dnskey.algorithm && k.dnskey.is_sep() == sep
            })
        };
        match (split(true) && split(false), key.dnskey.is_sep()) {
            (false, _) => "csk",
            (true, true) => "ksk",
            (true, false) => "zsk",
        }
    }

    fn key_json(&self, key: &SimKey, private: bool) -> Value {
        let keytype = self.keytype(key);
        let mut out = json!({
            "type": "Cryptokey",
            "id": key.id,
            "keytype": keytype,
            "active": key.active,
            "published": key.published,
            "dnskey": dnskey_text(&key.dnskey),
            "flags": key.dnskey.flags,
            "algorithm": algorithm_name(key.dnskey.algorithm),
            "bits": key.bits,
        });
        // 4.7 lists no DS for a key it calls a ZSK.
        if keytype != "zsk" {
            let ds: Vec<String> = [DigestType::Sha1, DigestType::Sha256, DigestType::Sha384]
                .into_iter()
                .filter_map(|d| key.dnskey.to_ds(&self.name, d).ok())
                .map(|ds| ds.to_string().to_ascii_lowercase())
                .collect();
            out["ds"] = json!(ds);
        }
        if private {
            out["privatekey"] = json!(format!(
                "Private-key-format: v1.2\nAlgorithm: {} ({})\nPrivateKey: (not given by the lab)\n",
                key.dnskey.algorithm,
                algorithm_name(key.dnskey.algorithm)
            ));
        }
        out
    }

    fn apex(&self, direct_dnskey: bool) -> Apex {
        let stored_dnskeys = if direct_dnskey {
            self.rrsets
                .get(&(self.name.clone(), "DNSKEY".into()))
                .map(|s| s.contents.iter().filter_map(|c| parse_dnskey(c)).collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let values = |kind: &str| self.metadata.get(kind).cloned().unwrap_or_default();
        let (cds, cdnskey) = (values("PUBLISH-CDS"), values("PUBLISH-CDNSKEY"));
        let delete = cds.iter().chain(&cdnskey).any(|v| v == "0");
        let cds_digests = if delete {
            Vec::new()
        } else {
            cds.iter()
                .flat_map(|v| v.split(','))
                .filter_map(|d| d.trim().parse::<u8>().ok())
                .filter_map(|d| DigestType::from_code(d).ok())
                .collect()
        };
        Apex {
            stored_dnskeys,
            cds_digests,
            cdnskey: !delete && cdnskey.iter().any(|v| v == "1"),
            delete,
        }
    }

    fn entry(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "kind": "Native",
            "url": format!("/api/v1/servers/localhost/zones/{}", self.id),
            "serial": self.serial,
            "dnssec": self.secured(),
        })
    }

    fn to_json(&self, ttl: u32) -> Value {
        let soa = format!(
            "{} hostmaster.{} {} 10800 3600 604800 3600",
            self.ns.first().cloned().unwrap_or_else(|| ".".into()),
            self.name,
            self.serial
        );
        let record = |c: &String| json!({ "content": c, "disabled": false });
        let mut rrsets = vec![
            json!({ "name": self.name, "type": "SOA", "ttl": ttl, "records": [record(&soa)], "comments": [] }),
            json!({ "name": self.name, "type": "NS", "ttl": ttl,
                    "records": self.ns.iter().map(record).collect::<Vec<_>>(), "comments": [] }),
        ];
        for ((owner, rtype), set) in &self.rrsets {
            rrsets.push(json!({ "name": owner, "type": rtype, "ttl": set.ttl,
                "records": set.contents.iter().map(record).collect::<Vec<_>>(), "comments": [] }));
        }
        let mut zone = self.entry();
        zone["rrsets"] = Value::Array(rrsets);
        zone
    }

    fn cryptokeys(&self) -> Value {
        Value::Array(self.keys.iter().map(|k| self.key_json(k, false)).collect())
    }

    /// `PUT /zones/{id} {"dnssec": true}`: a CSK where no key is active (4.7 leaves a
    /// zone with an active key as it is).
    fn secure(&mut self, next_key_id: &mut u64) -> Result<(), String> {
        if !self.secured() {
            let key = LabKey::generate(257).map_err(|e| e.to_string())?;
            *next_key_id += 1;
            self.keys
                .push(SimKey::from_lab(*next_key_id, key, true, true));
            self.serial += 1;
        }
        Ok(())
    }
}

/// The mnemonic 4.7 answers for an algorithm.
fn algorithm_name(algorithm: u8) -> &'static str {
    match algorithm {
        8 => "RSASHA256",
        13 => "ECDSAP256SHA256",
        15 => "ED25519",
        _ => "Unallocated/Reserved",
    }
}

/// A new key as `POST /cryptokeys` asks for it, or the 422's message. An RSA key is the
/// first of the lab's pairs that `in_zone` does not hold, one no zone holds
/// (`elsewhere`) first.
fn new_key(
    form: &Value,
    id: u64,
    in_zone: &[usize],
    elsewhere: &[usize],
) -> Result<SimKey, String> {
    let flags = match form.get("keytype").and_then(Value::as_str) {
        Some(t) if t.eq_ignore_ascii_case("ksk") || t.eq_ignore_ascii_case("csk") => 257,
        Some(t) if t.eq_ignore_ascii_case("zsk") => 256,
        Some(t) => return Err(format!("Invalid keytype {t}")),
        None => return Err("Key 'keytype' not present or not a String".into()),
    };
    // 4.7 takes a flag that is not a boolean as its default.
    let active = form.get("active").and_then(Value::as_bool).unwrap_or(false);
    let published = form
        .get("published")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let algorithm = match form.get("algorithm") {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u8::try_from(n).ok()),
        Some(Value::String(name)) => [8, 13, 15]
            .into_iter()
            .find(|a| algorithm_name(*a).eq_ignore_ascii_case(name)),
        _ => None,
    };
    let bits = form.get("bits").and_then(Value::as_u64);
    let fixed = |size: u64| match bits {
        None => Ok(()),
        Some(b) if b == size => Ok(()),
        Some(_) => Err("The algorithm does not support the given bit size.".to_string()),
    };
    let failed = |e: crate::keys::KeyError| e.to_string();
    let (pair, bits, rsa_index) = match algorithm {
        Some(13) => {
            fixed(256)?;
            (LabKey::generate(flags).map_err(failed)?, 256, None)
        }
        Some(15) => {
            fixed(256)?;
            (LabKey::generate_ed25519(flags).map_err(failed)?, 256, None)
        }
        Some(8) => {
            if bits.is_none() {
                return Err(
                    "Creating an algorithm 8 (RSASHA256) key requires the size (in bits) to be passed."
                        .into(),
                );
            }
            // The lab's pairs are all of 2048 bits: another size would be a key that
            // cannot sign.
            fixed(2048).map_err(|_| {
                "the lab's PowerDNS simulator makes RSA keys of 2048 bits only".to_string()
            })?;
            let free = |i: &usize| !in_zone.contains(i);
            let index = (0..RSA_KEY_COUNT)
                .find(|i| free(i) && !elsewhere.contains(i))
                .or_else(|| (0..RSA_KEY_COUNT).find(free))
                .ok_or_else(|| {
                    format!("the lab's PowerDNS simulator holds {RSA_KEY_COUNT} RSA keys, all in this zone")
                })?;
            (
                LabKey::lab_rsa(index, flags).map_err(failed)?,
                2048,
                Some(index),
            )
        }
        other => {
            let n = other.map_or(-1, i32::from);
            return Err(format!("Can not guess key size for algorithm {n}"));
        }
    };
    Ok(SimKey {
        id,
        dnskey: pair.dnskey(),
        pair,
        bits,
        rsa_index,
        active,
        published,
    })
}

impl PdnsState {
    fn create(&mut self, name: &str) -> Option<&Zone> {
        let name = absolute(name);
        if self.zones.contains_key(&name) {
            return None;
        }
        let zone = Zone {
            id: name.clone(),
            name: name.clone(),
            serial: 1,
            keys: Vec::new(),
            metadata: BTreeMap::new(),
            rrsets: BTreeMap::new(),
            ns: self
                .options
                .name_servers
                .iter()
                .map(|n| absolute(n))
                .collect(),
        };
        self.zones.insert(name.clone(), zone);
        self.zones.get(&name)
    }

    fn sign(&mut self, zone: &str) -> Result<(), String> {
        let z = self
            .zones
            .get_mut(&absolute(zone))
            .ok_or_else(|| format!("no zone {zone}"))?;
        z.secure(&mut self.next_key_id)
    }
}

#[derive(Clone)]
struct Shared(Arc<Mutex<PdnsState>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, PdnsState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running simulator; dropping it stops the server.
pub struct PdnsSim {
    addr: SocketAddr,
    handle: PdnsHandle,
    server: JoinHandle<()>,
}

impl std::fmt::Debug for PdnsSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PdnsSim").field("addr", &self.addr).finish()
    }
}

impl PdnsSim {
    /// Starts serving on `listen` (port 0 picks a free one).
    pub async fn start(listen: SocketAddr, options: PdnsOptions) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        let addr = listener.local_addr()?;
        let shared = Shared(Arc::new(Mutex::new(PdnsState {
            options,
            zones: BTreeMap::new(),
            next_key_id: 0,
            calls: Vec::new(),
        })));
        let app = Router::new().fallback(serve).with_state(shared.clone());
        let server = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "PowerDNS simulator stopped");
            }
        });
        Ok(Self {
            addr,
            handle: PdnsHandle(shared),
            server,
        })
    }

    /// `http://127.0.0.1:PORT/`, the account's `base_url`.
    pub fn base_url(&self) -> Url {
        Url::parse(&format!("http://{}/", self.addr)).expect("a socket address makes a URL")
    }

    pub fn handle(&self) -> PdnsHandle {
        self.handle.clone()
    }
}

impl Drop for PdnsSim {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The lab's lever on a running simulator, and what its name servers serve.
#[derive(Clone)]
pub struct PdnsHandle(Shared);

impl PdnsHandle {
    /// Creates a zone, as `POST /zones` would; false if it exists.
    pub fn add_zone(&self, name: &str) -> bool {
        self.0.lock().create(name).is_some()
    }

    /// Deletes a zone, as `DELETE /zones/{id}` would; false if there was none.
    pub fn delete_zone(&self, name: &str) -> bool {
        self.0.lock().zones.remove(&absolute(name)).is_some()
    }

    pub fn has_zone(&self, name: &str) -> bool {
        self.0.lock().zones.contains_key(&absolute(name))
    }

    /// Signs the zone (`pdnsutil secure-zone`); an error if there is no such zone.
    pub fn secure_zone(&self, name: &str) -> Result<(), String> {
        self.0.lock().sign(name)
    }

    /// The zone's entry point while a key is active: an active, published SEP key, else an
    /// active key.
    pub fn signing_key(&self, zone: &str) -> Option<LabKey> {
        let state = self.0.lock();
        state
            .zones
            .get(&absolute(zone))
            .and_then(|z| z.entry_point().map(|k| k.pair.clone()))
    }

    /// How the lab's name servers sign the zone, from its keystore as 4.7 does (the
    /// module's opening says how); unsigned where there is no such zone.
    pub fn signing(&self, zone: &str) -> Signing {
        let state = self.0.lock();
        state
            .zones
            .get(&absolute(zone))
            .map(Zone::signing)
            .unwrap_or_default()
    }

    /// What the zone's apex publishes besides the signing key.
    pub fn apex(&self, zone: &str) -> Apex {
        let state = self.0.lock();
        state
            .zones
            .get(&absolute(zone))
            .map(|z| z.apex(state.options.direct_dnskey))
            .unwrap_or_default()
    }

    /// Every state-changing call so far, oldest first.
    pub fn calls(&self) -> Vec<CallRecord> {
        self.0.lock().calls.clone()
    }

    /// One API call as the HTTP surface answers it (the lab's tests have no HTTP client):
    /// the status and the body as JSON (`Null` where it is none).
    #[cfg(test)]
    pub(crate) async fn call(&self, method: Method, path: &str, body: Value) -> (u16, Value) {
        let mut headers = HeaderMap::new();
        let key = self.0.lock().options.api_key.clone();
        if let Ok(value) = key.parse() {
            headers.insert("x-api-key", value);
        }
        let body = Bytes::from(body.to_string());
        let response = answer(&self.0, &method, path, "", &headers, &body);
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap_or_default();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

// ---- the HTTP surface ----------------------------------------------------------------

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "Not Found",
    )
        .into_response()
}

fn json_reply(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn unprocessable(message: &str) -> Response {
    json_reply(
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({ "error": message }),
    )
}

fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

async fn serve(State(shared): State<Shared>, request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or_default().to_string();
    let headers = request.headers().clone();
    let body = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let response = answer(&shared, &method, &path, &query, &headers, &body);
    if method != Method::GET {
        let logged = serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
        shared.lock().calls.push(CallRecord {
            at: SystemTime::now(),
            method: method.to_string(),
            path,
            body: logged,
            status: response.status().as_u16(),
        });
    }
    response
}

fn answer(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let mut state = shared.lock();
    let key_ok = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|k| !state.options.api_key.is_empty() && k == state.options.api_key);
    if !key_ok {
        return (StatusCode::UNAUTHORIZED, Body::from("Unauthorized")).into_response();
    }
    let segments: Vec<String> = path
        .trim_start_matches('/')
        .split('/')
        .map(|s| {
            url::form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map_or_else(|| s.to_string(), |(_, v)| v.into_owned())
        })
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let server = json!({
        "type": "Server", "id": state.options.server_id, "daemon_type": "authoritative",
        "version": "4.7.3-lab", "url": format!("/api/v1/servers/{}", state.options.server_id),
        "config_url": format!("/api/v1/servers/{}/config{{/config_setting}}", state.options.server_id),
        "zones_url": format!("/api/v1/servers/{}/zones{{/zone}}", state.options.server_id),
    });
    let rest = match segments.as_slice() {
        ["api", "v1", "servers"] if method == Method::GET => {
            return json_reply(StatusCode::OK, json!([server]));
        }
        ["api", "v1", "servers", id, rest @ ..] if *id == state.options.server_id => rest,
        _ => return not_found(),
    };
    let ttl = state.options.ttl;
    match (method.clone(), rest) {
        (Method::GET, []) => json_reply(StatusCode::OK, server),
        (Method::GET, ["config"]) => {
            let direct = if state.options.direct_dnskey {
                "yes"
            } else {
                "no"
            };
            json_reply(
                StatusCode::OK,
                json!([
                    { "type": "ConfigSetting", "name": "api", "value": "yes" },
                    { "type": "ConfigSetting", "name": "api-key", "value": "***" },
                    { "type": "ConfigSetting", "name": "direct-dnskey", "value": direct },
                ]),
            )
        }
        (Method::GET, ["zones"]) => {
            let wanted = url::form_urlencoded::parse(query.as_bytes())
                .find(|(k, _)| k == "zone")
                .map(|(_, v)| absolute(&v));
            let zones: Vec<Value> = state
                .zones
                .values()
                .filter(|z| wanted.as_ref().is_none_or(|w| *w == z.name))
                .map(Zone::entry)
                .collect();
            json_reply(StatusCode::OK, Value::Array(zones))
        }
        (Method::POST, ["zones"]) => {
            let Ok(form) = serde_json::from_slice::<Value>(body) else {
                return unprocessable("the body is not JSON");
            };
            let Some(name) = form.get("name").and_then(Value::as_str) else {
                return unprocessable("the zone needs a name");
            };
            if !name.ends_with('.') {
                return unprocessable(&format!("DNS Name '{name}' is not canonical"));
            }
            let ns: Option<Vec<String>> = form
                .get("nameservers")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(absolute).collect());
            let name = absolute(name);
            if state.create(&name).is_none() {
                return json_reply(
                    StatusCode::CONFLICT,
                    json!({ "error": format!("Domain '{name}' already exists") }),
                );
            }
            let Some(zone) = state.zones.get_mut(&name) else {
                return not_found();
            };
            if let Some(ns) = ns.filter(|n| !n.is_empty()) {
                zone.ns = ns;
            }
            json_reply(StatusCode::CREATED, zone.to_json(ttl))
        }
        (method, ["zones", id, rest @ ..]) => {
            let PdnsState {
                zones, next_key_id, ..
            } = &mut *state;
            let rsa_in_use: Vec<usize> = zones
                .values()
                .flat_map(|z| z.keys.iter().filter_map(|k| k.rsa_index))
                .collect();
            let Some(zone) = zones.values_mut().find(|z| z.id == *id) else {
                return not_found();
            };
            let keys = KeyIds {
                next: next_key_id,
                rsa_in_use: &rsa_in_use,
            };
            let reply = zone_call(zone, &method, rest, body, ttl, keys);
            if let ZoneReply::Deleted(name) = &reply {
                zones.remove(name);
            }
            reply.into_response()
        }
        _ => not_found(),
    }
}

enum ZoneReply {
    Done(Response),
    Deleted(String),
}

impl IntoResponse for ZoneReply {
    fn into_response(self) -> Response {
        match self {
            Self::Done(r) => r,
            Self::Deleted(_) => no_content(),
        }
    }
}

/// The simulator's key numbering, and the lab's RSA pairs its zones hold.
struct KeyIds<'a> {
    next: &'a mut u64,
    rsa_in_use: &'a [usize],
}

fn zone_call(
    zone: &mut Zone,
    method: &Method,
    rest: &[&str],
    body: &Bytes,
    ttl: u32,
    keys: KeyIds<'_>,
) -> ZoneReply {
    let KeyIds {
        next: next_key_id,
        rsa_in_use,
    } = keys;
    let done = ZoneReply::Done;
    let form = || serde_json::from_slice::<Value>(body).ok();
    match (method.clone(), rest) {
        (Method::GET, []) => done(json_reply(StatusCode::OK, zone.to_json(ttl))),
        (Method::DELETE, []) => ZoneReply::Deleted(zone.name.clone()),
        (Method::PUT, []) => {
            let Some(form) = form() else {
                return done(unprocessable("the body is not JSON"));
            };
            match form.get("dnssec").map(Value::as_bool) {
                Some(Some(true)) => {
                    if let Err(e) = zone.secure(next_key_id) {
                        return done(unprocessable(&e));
                    }
                }
                // Every key of the zone at once, where one is active (4.7 leaves a zone
                // of inactive keys as it is).
                Some(Some(false)) if zone.secured() => {
                    zone.keys.clear();
                    zone.serial += 1;
                }
                Some(Some(false)) | None => {}
                Some(None) => return done(unprocessable("'dnssec' must be a boolean")),
            }
            done(no_content())
        }
        (Method::PATCH, []) => {
            let Some(sets) =
                form().and_then(|f| f.get("rrsets").and_then(Value::as_array).cloned())
            else {
                return done(unprocessable("No rrsets given in patch request"));
            };
            let mut changes = Vec::new();
            for set in &sets {
                let name = set.get("name").and_then(Value::as_str).map(absolute);
                let rtype = set
                    .get("type")
                    .and_then(Value::as_str)
                    .map(str::to_ascii_uppercase);
                let change = set
                    .get("changetype")
                    .and_then(Value::as_str)
                    .map(str::to_ascii_uppercase);
                let (Some(name), Some(rtype), Some(change)) = (name, rtype, change) else {
                    return done(unprocessable("an RRset needs name, type and changetype"));
                };
                if !(name == zone.name || name.ends_with(&format!(".{}", zone.name))) {
                    return done(unprocessable(&format!(
                        "RRset {name} IN {rtype}: Name is out of zone"
                    )));
                }
                match change.as_str() {
                    "DELETE" => changes.push(((name, rtype), None)),
                    "REPLACE" => {
                        let Some(ttl) = set.get("ttl").and_then(Value::as_u64) else {
                            return done(unprocessable("Key 'ttl' not present or not a Number"));
                        };
                        let contents: Vec<String> = set
                            .get("records")
                            .and_then(Value::as_array)
                            .map(|r| {
                                r.iter()
                                    .filter_map(|x| x.get("content").and_then(Value::as_str))
                                    .map(str::to_string)
                                    .collect()
                            })
                            .unwrap_or_default();
                        if rtype == "DNSKEY"
                            && let Some(bad) = contents.iter().find(|c| parse_dnskey(c).is_none())
                        {
                            return done(unprocessable(&format!(
                                "Record {name}/DNSKEY '{bad}': Parsing record content failed"
                            )));
                        }
                        let mut unique = contents;
                        unique.dedup();
                        changes.push((
                            (name, rtype),
                            Some(Rrset {
                                ttl: u32::try_from(ttl).unwrap_or(u32::MAX),
                                contents: unique,
                            }),
                        ));
                    }
                    other => {
                        return done(unprocessable(&format!(
                            "Changetype '{other}' not understood"
                        )));
                    }
                }
            }
            for (at, set) in changes {
                match set {
                    Some(set) if !set.contents.is_empty() => {
                        zone.rrsets.insert(at, set);
                    }
                    _ => {
                        zone.rrsets.remove(&at);
                    }
                }
            }
            zone.serial += 1;
            done(no_content())
        }
        (Method::GET, ["cryptokeys"]) => done(json_reply(StatusCode::OK, zone.cryptokeys())),
        (Method::POST, ["cryptokeys"]) => {
            let Some(form) = form() else {
                return done(unprocessable("the body is not JSON"));
            };
            let in_zone: Vec<usize> = zone.keys.iter().filter_map(|k| k.rsa_index).collect();
            match new_key(&form, *next_key_id + 1, &in_zone, rsa_in_use) {
                Ok(key) => {
                    *next_key_id += 1;
                    zone.keys.push(key);
                    zone.serial += 1;
                    let answer = zone.keys.last().map(|k| zone.key_json(k, true));
                    done(json_reply(StatusCode::CREATED, answer.unwrap_or_default()))
                }
                Err(e) => done(unprocessable(&e)),
            }
        }
        (method, ["cryptokeys", key]) => {
            // 4.7 answers a 500 for an id that is not a number.
            let Ok(id) = key.parse::<u64>() else {
                return done(
                    (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error").into_response(),
                );
            };
            let Some(at) = zone.keys.iter().position(|k| k.id == id) else {
                return done(not_found());
            };
            match method {
                Method::GET => {
                    let answer = zone.key_json(&zone.keys[at], true);
                    done(json_reply(StatusCode::OK, answer))
                }
                Method::PUT => {
                    let form = form().unwrap_or(Value::Null);
                    let Some(active) = form.get("active").and_then(Value::as_bool) else {
                        return done(unprocessable("Key 'active' not present or not a Bool"));
                    };
                    // A `published` missing or not a boolean publishes the key.
                    let published = form
                        .get("published")
                        .and_then(Value::as_bool)
                        .unwrap_or(true);
                    let key = &mut zone.keys[at];
                    key.active = active;
                    key.published = published;
                    zone.serial += 1;
                    done(no_content())
                }
                Method::DELETE => {
                    zone.keys.remove(at);
                    zone.serial += 1;
                    done(no_content())
                }
                _ => done(not_found()),
            }
        }
        (Method::GET, ["metadata"]) => {
            let all: Vec<Value> = zone
                .metadata
                .iter()
                .map(|(k, v)| json!({ "type": "Metadata", "kind": k, "metadata": v }))
                .collect();
            done(json_reply(StatusCode::OK, Value::Array(all)))
        }
        (Method::GET, ["metadata", kind]) => {
            let values = zone.metadata.get(*kind).cloned().unwrap_or_default();
            done(json_reply(
                StatusCode::OK,
                json!({ "type": "Metadata", "kind": kind, "metadata": values }),
            ))
        }
        (Method::PUT, ["metadata", kind]) => {
            let values: Option<Vec<String>> = form().and_then(|f| {
                f.get("metadata").and_then(Value::as_array).map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
            });
            let Some(values) = values else {
                return done(unprocessable("the metadata must be a list of strings"));
            };
            zone.metadata.insert(kind.to_string(), values.clone());
            done(json_reply(
                StatusCode::OK,
                json!({ "type": "Metadata", "kind": kind, "metadata": values }),
            ))
        }
        (Method::DELETE, ["metadata", kind]) => {
            zone.metadata.remove(*kind);
            done(json_reply(StatusCode::OK, json!({})))
        }
        _ => done(not_found()),
    }
}
