//! The simulator's data: zones with their DNSSEC status machine and records, the shared
//! key, the token buckets, faults and the call log.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Instant, SystemTime};

use base64::Engine;
use serde_json::{Value, json};

use super::{CloudflareOptions, RateLimit};
use crate::dnssec::{DigestType, hex_upper};
use crate::keys::LabKey;
use crate::provider_sim::{CallRecord, FaultPlan};
use crate::timefmt::rfc3339;

pub(super) struct CfState {
    pub options: CloudflareOptions,
    /// Cloudflare's one key-signing key, every zone's.
    pub key: LabKey,
    /// By zone name (lower case, no trailing dot).
    pub zones: BTreeMap<String, CfZone>,
    /// Zone ids whose calls answer 403.
    pub forbidden: HashSet<String>,
    pub buckets: HashMap<String, Bucket>,
    pub faults: FaultPlan,
    pub calls: Vec<CallRecord>,
    /// Every request and answer, while a test records them.
    pub exchanges: crate::exchange_log::ExchangeLog,
    pub requests: BTreeMap<String, u64>,
    pub rate_limited: u64,
}

pub(super) struct CfZone {
    pub id: String,
    pub name: String,
    pub created: SystemTime,
    pub dnssec: Dnssec,
    pub records: Vec<CfRecord>,
    /// Fields laid over the DNSSEC object, to play a Cloudflare that gets it wrong.
    pub dnssec_override: serde_json::Map<String, Value>,
}

pub(super) struct CfRecord {
    pub id: String,
    pub rtype: String,
    pub name: String,
    pub content: String,
    /// 1: automatic.
    pub ttl: u32,
}

/// A zone's DNSSEC as Cloudflare keeps it.
pub(super) struct Dnssec {
    /// `active`, `pending`, `disabled` or `pending-disabled`.
    pub status: &'static str,
    /// `None` (with `disabled`): never on, or deleted.
    pub modified_on: Option<SystemTime>,
    /// When the status was entered: a transient one moves after the delay.
    pub since: Instant,
    /// Whether the zone is served signed.
    pub signed: bool,
    /// Reported as `error` while set, whatever the status.
    pub error: bool,
    pub multi_signer: bool,
    pub presigned: bool,
    pub use_nsec3: bool,
}

impl Dnssec {
    fn never() -> Self {
        Self {
            status: "disabled",
            modified_on: None,
            since: Instant::now(),
            signed: false,
            error: false,
            multi_signer: false,
            presigned: false,
            use_nsec3: false,
        }
    }

    pub fn set(&mut self, status: &'static str) {
        self.status = status;
        self.modified_on = Some(SystemTime::now());
        self.since = Instant::now();
    }

    /// `PATCH {"status":"active"}`: signed at once, `pending` until Cloudflare sees its DS.
    pub fn activate(&mut self) {
        self.signed = true;
        if matches!(self.status, "disabled" | "pending-disabled") {
            self.set("pending");
        }
    }

    /// `PATCH {"status":"disabled"}`: still signed; `pending-disabled` while Cloudflare
    /// may still see its DS (it saw it: `active`), else `disabled`.
    pub fn deactivate(&mut self) {
        match self.status {
            "active" => self.set("pending-disabled"),
            "pending" => self.set("disabled"),
            _ => {}
        }
    }

    /// `DELETE`: unsigned, `disabled` with no `modified_on`.
    pub fn delete(&mut self) {
        *self = Self {
            multi_signer: false,
            ..Self::never()
        };
    }
}

/// Zone and owner names as Cloudflare keys them: lower case, no trailing dot.
pub(super) fn normalize(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// A fresh 32-character lower-case hex identifier.
fn new_id() -> String {
    format!("{:032x}", fastrand::u128(..))
}

/// Requests allowed and the time the bucket started counting from.
pub(super) struct Bucket {
    tokens: f64,
    at: Instant,
}

/// What the bucket says of one request.
pub(super) struct Take {
    pub allowed: bool,
    pub remaining: u32,
    /// Whole seconds until a request is allowed again (at least 1), or until the bucket is
    /// full.
    pub reset: u64,
}

impl Bucket {
    pub fn take(&mut self, limit: RateLimit) -> Take {
        let now = Instant::now();
        let capacity = f64::from(limit.capacity.max(1));
        let per_second = capacity / limit.window.as_secs_f64().max(0.001);
        self.tokens =
            (self.tokens + now.duration_since(self.at).as_secs_f64() * per_second).min(capacity);
        self.at = now;
        let allowed = self.tokens >= 1.0;
        if allowed {
            self.tokens -= 1.0;
        }
        let missing = if allowed {
            capacity - self.tokens
        } else {
            1.0 - self.tokens
        };
        Take {
            allowed,
            remaining: self.tokens.floor() as u32,
            reset: ((missing / per_second).ceil() as u64).max(1),
        }
    }

    pub fn full(limit: RateLimit) -> Self {
        Self {
            tokens: f64::from(limit.capacity.max(1)),
            at: Instant::now(),
        }
    }
}

impl CfState {
    pub fn new(options: CloudflareOptions, key: LabKey) -> Self {
        Self {
            options,
            key,
            zones: BTreeMap::new(),
            forbidden: HashSet::new(),
            buckets: HashMap::new(),
            faults: FaultPlan::default(),
            calls: Vec::new(),
            exchanges: Default::default(),
            requests: BTreeMap::new(),
            rate_limited: 0,
        }
    }

    pub fn create_zone(&mut self, name: &str) -> Option<String> {
        let name = normalize(name);
        if self.zones.contains_key(&name) {
            return None;
        }
        let id = new_id();
        self.zones.insert(
            name.clone(),
            CfZone {
                id: id.clone(),
                records: vec![CfRecord {
                    id: new_id(),
                    rtype: "A".into(),
                    name: name.clone(),
                    content: "192.0.2.1".into(),
                    ttl: self.options.record_ttl,
                }],
                name,
                created: SystemTime::now(),
                dnssec: Dnssec::never(),
                dnssec_override: serde_json::Map::new(),
            },
        );
        Some(id)
    }

    pub fn add_record(&mut self, zone: &str, rtype: &str, name: &str, content: &str, ttl: u32) {
        if let Some(z) = self.zones.get_mut(&normalize(zone)) {
            z.records.push(CfRecord {
                id: new_id(),
                rtype: rtype.to_ascii_uppercase(),
                name: normalize(name),
                content: content.into(),
                ttl,
            });
        }
    }

    pub fn zone_by_id(&mut self, id: &str) -> Option<&mut CfZone> {
        self.zones.values_mut().find(|z| z.id == id)
    }

    /// Cloudflare's own check: a transient status that has lasted the delay moves when
    /// the lab's parent agrees (or at once after the delay, without a parent).
    pub fn advance(&mut self) {
        let delay = self.options.status_delay;
        let parent = self.options.parent_ds.clone();
        for zone in self.zones.values_mut() {
            let d = &mut zone.dnssec;
            if d.since.elapsed() < delay {
                continue;
            }
            let ds = parent.as_ref().map(|p| p(&format!("{}.", zone.name)));
            match (d.status, ds) {
                ("pending", None | Some(Some(true))) => d.set("active"),
                ("pending-disabled", None | Some(Some(false))) => d.set("disabled"),
                _ => {}
            }
        }
    }
}

impl CfZone {
    /// The zone object (`types/zones/zone.py`).
    pub fn to_json(&self, name_servers: &[String]) -> Value {
        let created = rfc3339(self.created);
        json!({
            "id": self.id,
            "name": self.name,
            "status": "active",
            "paused": false,
            "type": "full",
            "development_mode": 0,
            "name_servers": name_servers,
            "original_name_servers": ["ns1.registrar.example", "ns2.registrar.example"],
            "original_registrar": null,
            "original_dnshost": null,
            "created_on": created,
            "modified_on": created,
            "activated_on": created,
            "meta": {"step": 2, "custom_certificate_quota": 0, "page_rule_quota": 3,
                     "phishing_detected": false},
            "owner": {"id": null, "name": null, "type": "user"},
            "account": {"id": "0123456789abcdef0123456789abcdef", "name": "Lab account"},
            "tenant": {"id": null, "name": null},
            "tenant_unit": {"id": null},
            "permissions": ["#dns_records:edit", "#dns_records:read", "#zone:read"],
            "plan": {"id": "0feeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "name": "Free Website",
                     "price": 0, "currency": "USD", "frequency": "", "is_subscribed": false,
                     "can_subscribe": false, "legacy_id": "free", "legacy_discount": false,
                     "externally_managed": false},
        })
    }

    /// The DNSSEC object (`types/dns/dnssec.py`): the key's fields while the zone is
    /// signed, `null` when it is not.
    pub fn dnssec_json(&self, key: &LabKey, ds_ttl: u32) -> Value {
        let d = &self.dnssec;
        let mut object = json!({
            "status": if d.error { "error" } else { d.status },
            "modified_on": d.modified_on.map(rfc3339),
            "dnssec_multi_signer": d.multi_signer,
            "dnssec_presigned": d.presigned,
            "dnssec_use_nsec3": d.use_nsec3,
            "algorithm": null,
            "digest": null,
            "digest_algorithm": null,
            "digest_type": null,
            "ds": null,
            "flags": null,
            "key_tag": null,
            "key_type": null,
            "public_key": null,
        });
        let owner = format!("{}.", self.name);
        let dnskey = key.dnskey();
        if d.signed
            && let Ok(ds) = dnskey.to_ds(&owner, DigestType::Sha256)
        {
            let digest = hex_upper(&ds.digest);
            for (field, value) in [
                ("algorithm", json!(dnskey.algorithm.to_string())),
                ("digest", json!(digest)),
                ("digest_algorithm", json!("SHA256")),
                ("digest_type", json!("2")),
                (
                    "ds",
                    json!(format!(
                        "{owner} {ds_ttl} IN DS {} {} 2 {digest}",
                        ds.key_tag, dnskey.algorithm
                    )),
                ),
                ("flags", json!(dnskey.flags)),
                ("key_tag", json!(ds.key_tag)),
                ("key_type", json!("ECDSAP256SHA256")),
                (
                    "public_key",
                    json!(base64::engine::general_purpose::STANDARD.encode(&dnskey.public_key)),
                ),
            ] {
                object[field] = value;
            }
        }
        for (field, value) in &self.dnssec_override {
            object[field] = value.clone();
        }
        object
    }
}

impl CfRecord {
    /// A DNS record (`types/dns/record_response.py`, the fields the simulator keeps).
    pub fn to_json(&self, zone: &CfZone) -> Value {
        let created = rfc3339(zone.created);
        json!({
            "id": self.id,
            "name": self.name,
            "type": self.rtype,
            "content": self.content,
            "proxiable": true,
            "proxied": false,
            "ttl": self.ttl,
            "settings": {},
            "meta": {},
            "comment": null,
            "tags": [],
            "created_on": created,
            "modified_on": created,
        })
    }
}
