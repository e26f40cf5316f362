//! The simulator's data: zones, RRsets, DNSSEC keys, tokens, faults and the call log.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{Value, json};

use super::faults::FaultPlan;
use super::tokens::TokenStore;
use super::{CallRecord, SimOptions};
use crate::dnssec::{DigestType, Dnskey, hex_upper};
use crate::keys::LabKey;
use crate::timefmt::rfc3339;

pub(super) struct SimState {
    pub options: SimOptions,
    pub zones: BTreeMap<String, SimZone>,
    pub next_id: u64,
    pub tokens: TokenStore,
    pub logins: VecDeque<Instant>,
    pub faults: FaultPlan,
    pub calls: Vec<CallRecord>,
    /// Every API request received, by method and path shape (`GET /dns/v2/zones/{zone}/dnssec`).
    pub requests: BTreeMap<String, u64>,
    /// Zones whose calls answer 403, as for a user without rights on them.
    pub forbidden: HashSet<String>,
    /// Successful logins and refreshes, for tests of the client's token handling.
    pub logins_ok: u64,
    pub refreshes_ok: u64,
    /// Every login and refresh request, answered or refused (a client that does not back
    /// off shows here).
    pub login_attempts: u64,
    pub refresh_attempts: u64,
}

pub(super) struct SimZone {
    pub id: u64,
    pub name: String,
    pub fields: BTreeMap<String, Value>,
    pub rrsets: BTreeMap<(String, String), SimRrset>,
    /// The signing key while DNSSEC is on.
    pub key: Option<SimKey>,
    pub dnssec_status: Option<&'static str>,
    pub dnssec_status_modified_on: Option<SystemTime>,
    /// What the provider's own parent scan says (a hint the lab sets).
    pub parent_ds_hint: bool,
    /// Fields laid over the DNSSEC object, to play a provider that gets it wrong.
    pub dnssec_override: serde_json::Map<String, Value>,
}

pub(super) struct SimKey {
    /// The public key the zone is signed with.
    pub dnskey: Dnskey,
    /// Its private half, when the simulator made the key itself (the lab's servers sign
    /// with it); `None` when a [`super::Signer`] holds the key.
    pub lab: Option<LabKey>,
    pub uuid: String,
}

impl SimKey {
    pub fn generated(key: LabKey) -> Self {
        Self {
            dnskey: key.dnskey(),
            lab: Some(key),
            uuid: uuid_v4(),
        }
    }
}

pub(super) struct SimRrset {
    pub ttl: u32,
    pub records: Vec<SimRecord>,
    pub meta: Value,
    pub updated_at: u64,
}

pub(super) struct SimRecord {
    pub id: u64,
    pub content: Vec<Value>,
    pub enabled: bool,
    pub meta: Value,
}

/// Zone and owner names as the provider keys them: lower case, no trailing dot.
pub(super) fn normalize(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

impl SimState {
    pub fn new(options: SimOptions) -> Self {
        Self {
            tokens: TokenStore::new(
                options.access_token_lifetime,
                options.refresh_token_lifetime,
            ),
            options,
            zones: BTreeMap::new(),
            next_id: 1,
            logins: VecDeque::new(),
            faults: FaultPlan::default(),
            calls: Vec::new(),
            requests: BTreeMap::new(),
            forbidden: HashSet::new(),
            logins_ok: 0,
            refreshes_ok: 0,
            login_attempts: 0,
            refresh_attempts: 0,
        }
    }

    pub fn next_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Creates a zone with the provider's apex NS RRset; `None` if it exists.
    pub fn create_zone(&mut self, name: &str, fields: BTreeMap<String, Value>) -> Option<u64> {
        let name = normalize(name);
        if self.zones.contains_key(&name) {
            return None;
        }
        let id = self.next_id();
        let ns_records = self
            .options
            .name_servers
            .clone()
            .into_iter()
            .map(|ns| SimRecord {
                id: self.next_id(),
                content: vec![Value::String(ns)],
                enabled: true,
                meta: json!({}),
            })
            .collect();
        let mut rrsets = BTreeMap::new();
        rrsets.insert(
            (name.clone(), "NS".to_string()),
            SimRrset {
                ttl: self.options.name_server_ttl,
                records: ns_records,
                meta: json!({}),
                updated_at: unix_now(),
            },
        );
        self.zones.insert(
            name.clone(),
            SimZone {
                id,
                name,
                fields,
                rrsets,
                key: None,
                dnssec_status: None,
                dnssec_status_modified_on: None,
                parent_ds_hint: false,
                dnssec_override: serde_json::Map::new(),
            },
        );
        Some(id)
    }
}

impl SimZone {
    pub fn set_dnssec_status(&mut self, status: &'static str) {
        self.dnssec_status = Some(status);
        self.dnssec_status_modified_on = Some(SystemTime::now());
    }

    /// The zone object of `GET /dns/v2/zones/{name}`.
    pub fn to_json(&self) -> Value {
        let mut zone = json!({
            "id": self.id,
            "name": self.name,
            "contact": "support@example.net",
            "enabled": true,
            "expiry": 1_209_600,
            "meta": {},
            "nx_ttl": 300,
            "primary_server": "ns1.example.net",
            "refresh": 5400,
            "retry": 3600,
            "serial": 1_714_000_000u64,
            "status": "active",
            "dnssec_enabled": self.key.is_some(),
        });
        for (key, value) in &self.fields {
            zone[key] = value.clone();
        }
        if let Some(status) = self.dnssec_status {
            zone["dnssec_status"] = json!(status);
        }
        if let Some(at) = self.dnssec_status_modified_on {
            zone["dnssec_status_modified_on"] = json!(rfc3339(at));
        }
        let records: Vec<Value> = self
            .rrsets
            .iter()
            .map(|((owner, rtype), set)| {
                json!({
                    "name": owner,
                    "type": rtype,
                    "ttl": set.ttl,
                    "short_answers": set.records.iter().map(|r| short_answer(&r.content)).collect::<Vec<_>>(),
                })
            })
            .collect();
        let total = self.rrsets.len();
        zone["records"] = Value::Array(records);
        zone["rrsets_amount"] = json!({
            "dynamic": {"healthcheck": 0, "total": 0},
            "static": total,
            "total": total,
        });
        zone
    }

    /// The DNSSEC object, computed from the real key.
    pub fn dnssec_json(&self, ds_ttl: u32) -> Option<Value> {
        let key = self.key.as_ref()?;
        let dnskey = &key.dnskey;
        let owner = format!("{}.", self.name);
        let ds = dnskey.to_ds(&owner, DigestType::Sha256).ok()?;
        let digest = hex_upper(&ds.digest);
        let mut object = json!({
            "algorithm": dnskey.algorithm.to_string(),
            "digest": digest,
            "digest_algorithm": "SHA256",
            "digest_type": "2",
            "ds": format!("{owner} {ds_ttl} IN DS {} {} 2 {digest}", ds.key_tag, dnskey.algorithm),
            "flags": dnskey.flags,
            "key_tag": ds.key_tag,
            "key_type": "ECDSAP256SHA256",
            "public_key": base64::engine::general_purpose::STANDARD.encode(&dnskey.public_key),
            "uuid": key.uuid,
        });
        for (field, value) in &self.dnssec_override {
            object[field] = value.clone();
        }
        Some(object)
    }
}

impl SimRrset {
    pub fn to_json(&self, owner: &str, rtype: &str) -> Value {
        json!({
            "name": owner,
            "type": rtype,
            "ttl": self.ttl,
            "resource_records": self.records.iter().map(|r| json!({
                "id": r.id,
                "content": r.content,
                "enabled": r.enabled,
                "meta": r.meta,
            })).collect::<Vec<_>>(),
            "meta": self.meta,
            "updated_at": self.updated_at,
            "warnings": [],
        })
    }
}

/// `["ns1.example.net"]` -> `ns1.example.net`; `[10,"mx."]` -> `10 mx.`.
fn short_answer(content: &[Value]) -> String {
    content
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A random version-4 UUID in its usual form.
pub(super) fn uuid_v4() -> String {
    let mut b = fastrand::u128(..).to_be_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex_upper(&b).to_ascii_lowercase();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}
