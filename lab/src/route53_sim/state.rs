//! The simulator's data: hosted zones with their records and DNSSEC, the KMS keys, the
//! changes and when they become `INSYNC`, the account's token buckets, faults and the
//! call log; and the XML of each answer.

use std::collections::{BTreeMap, HashMap};
use std::time::{Instant, SystemTime};

use base64::Engine;

use super::Route53Options;
use crate::dnssec::{DigestType, hex_upper};
use crate::keys::LabKey;
use crate::provider_sim::{CallRecord, FaultPlan};
use crate::timefmt::rfc3339;

pub(super) const XMLNS: &str = "https://route53.amazonaws.com/doc/2013-04-01/";

pub(super) struct R53State {
    pub options: Route53Options,
    /// By id.
    pub zones: BTreeMap<String, Zone>,
    /// KMS keys by ARN.
    pub kms: HashMap<String, LabKey>,
    pub changes: HashMap<String, Change>,
    pub buckets: HashMap<String, Bucket>,
    pub faults: FaultPlan,
    pub calls: Vec<CallRecord>,
    /// Every request and answer, while a test records them.
    pub exchanges: crate::exchange_log::ExchangeLog,
    pub requests: BTreeMap<String, u64>,
    pub throttled: u64,
    pub auth_refusals: BTreeMap<String, u64>,
}

pub(super) struct Zone {
    pub id: String,
    /// Lower case with the trailing dot.
    pub name: String,
    pub private: bool,
    pub caller_reference: String,
    pub records: Vec<Record>,
    /// `SIGNING`, `NOT_SIGNING` or `DELETING`, as GetDNSSEC says it.
    pub serve: &'static str,
    /// Whether the lab's name servers serve it signed (the signing change is `INSYNC`).
    pub served_signed: bool,
    pub ksks: Vec<Ksk>,
    pub serve_override: Option<String>,
    pub ksk_override: Vec<(String, String)>,
}

pub(super) struct Record {
    pub name: String,
    pub rtype: String,
    pub ttl: Option<u32>,
    pub alias: Option<String>,
}

pub(super) struct Ksk {
    pub name: String,
    pub arn: String,
    pub status: &'static str,
    pub created: SystemTime,
    pub modified: SystemTime,
}

/// What a change does once `INSYNC` (the API already shows it; the name servers now).
#[derive(Clone)]
pub(super) enum Effect {
    None,
    /// The zone is served signed (true) or unsigned (false); unsigned ends `DELETING`.
    Served {
        zone: String,
        signed: bool,
    },
}

pub(super) struct Change {
    pub submitted: Instant,
    pub submitted_at: SystemTime,
    pub effect: Option<Effect>,
}

/// A request bucket per access key: `rate` at once, refilled at `rate` a second.
pub(super) struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    pub fn full(rate: u32) -> Self {
        Self {
            tokens: f64::from(rate.max(1)),
            at: Instant::now(),
        }
    }

    pub fn take(&mut self, rate: u32) -> bool {
        let now = Instant::now();
        let rate = f64::from(rate.max(1));
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * rate).min(rate);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Lower case with one trailing dot.
pub(super) fn fqdn(name: &str) -> String {
    format!("{}.", name.trim_end_matches('.').to_ascii_lowercase())
}

/// The name's labels reversed (`com.example.www.`): Route 53's order by name.
pub(super) fn reversed(name: &str) -> String {
    let labels: Vec<&str> = name.trim_end_matches('.').split('.').rev().collect();
    format!("{}.", labels.join("."))
}

fn random_id(prefix: char) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut id = String::from(prefix);
    for _ in 0..20 {
        id.push(ALPHABET[fastrand::usize(..ALPHABET.len())] as char);
    }
    id
}

pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl R53State {
    pub fn new(options: Route53Options) -> Self {
        Self {
            options,
            zones: BTreeMap::new(),
            kms: HashMap::new(),
            changes: HashMap::new(),
            buckets: HashMap::new(),
            faults: FaultPlan::default(),
            calls: Vec::new(),
            exchanges: Default::default(),
            requests: BTreeMap::new(),
            throttled: 0,
            auth_refusals: BTreeMap::new(),
        }
    }

    pub fn create_zone(&mut self, name: &str, private: bool) -> String {
        let id = random_id('Z');
        let name = fqdn(name);
        let ttl = self.options.record_ttl;
        let records = vec![
            Record {
                name: name.clone(),
                rtype: "NS".into(),
                ttl: Some(ttl),
                alias: None,
            },
            Record {
                name: name.clone(),
                rtype: "SOA".into(),
                ttl: Some(ttl.min(900)),
                alias: None,
            },
        ];
        self.zones.insert(
            id.clone(),
            Zone {
                id: id.clone(),
                name,
                private,
                caller_reference: random_id('R'),
                records,
                serve: "NOT_SIGNING",
                served_signed: false,
                ksks: Vec::new(),
                serve_override: None,
                ksk_override: Vec::new(),
            },
        );
        id
    }

    pub fn public_id(&self, name: &str) -> Option<String> {
        self.zones
            .values()
            .find(|z| z.name == name && !z.private)
            .map(|z| z.id.clone())
    }

    fn public_zone(&self, name: &str) -> Option<&Zone> {
        self.zones.values().find(|z| z.name == name && !z.private)
    }

    fn public_zone_mut(&mut self, name: &str) -> Option<&mut Zone> {
        self.zones
            .values_mut()
            .find(|z| z.name == name && !z.private)
    }

    pub fn add_record(
        &mut self,
        zone: &str,
        rtype: &str,
        name: &str,
        ttl: Option<u32>,
        alias: Option<&str>,
    ) {
        if let Some(z) = self.public_zone_mut(&fqdn(zone)) {
            z.records.push(Record {
                name: fqdn(name),
                rtype: rtype.to_ascii_uppercase(),
                ttl,
                alias: alias.map(fqdn),
            });
        }
    }

    pub fn kms_key(&mut self, arn: &str) -> LabKey {
        self.kms
            .entry(arn.to_string())
            .or_insert_with(|| LabKey::generate(257).expect("a P-256 key is generated"))
            .clone()
    }

    pub fn serve_override(&mut self, zone: &str, value: Option<&str>) {
        if let Some(z) = self.public_zone_mut(zone) {
            z.serve_override = value.map(String::from);
        }
    }

    pub fn ksk_override(&mut self, zone: &str, fields: &[(&str, &str)]) {
        if let Some(z) = self.public_zone_mut(zone) {
            z.ksk_override = fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        }
    }

    /// A new change, `PENDING` until `change_delay` has passed; its effect then.
    pub fn submit(&mut self, effect: Effect) -> String {
        let id = random_id('C');
        self.changes.insert(
            id.clone(),
            Change {
                submitted: Instant::now(),
                submitted_at: SystemTime::now(),
                effect: Some(effect),
            },
        );
        self.advance();
        id
    }

    /// Changes whose delay has passed take effect at the name servers.
    pub fn advance(&mut self) {
        let delay = self.options.change_delay;
        let mut due: Vec<(Instant, Effect)> = Vec::new();
        for change in self.changes.values_mut() {
            if change.submitted.elapsed() >= delay
                && let Some(effect) = change.effect.take()
            {
                due.push((change.submitted, effect));
            }
        }
        due.sort_by_key(|(at, _)| *at);
        for (_, effect) in due {
            if let Effect::Served { zone, signed } = effect
                && let Some(z) = self.zones.get_mut(&zone)
            {
                z.served_signed = signed;
                if !signed && z.serve == "DELETING" {
                    z.serve = "NOT_SIGNING";
                }
            }
        }
    }

    pub fn change_status(&mut self, id: &str) -> Option<(&'static str, SystemTime)> {
        self.advance();
        self.changes.get(id).map(|c| {
            (
                if c.effect.is_some() {
                    "PENDING"
                } else {
                    "INSYNC"
                },
                c.submitted_at,
            )
        })
    }

    pub fn active_key(&self, zone: &str) -> Option<LabKey> {
        let z = self.public_zone(zone)?;
        let ksk = z.ksks.iter().find(|k| k.status == "ACTIVE")?;
        self.kms.get(&ksk.arn).cloned()
    }

    pub fn signing_key(&self, zone: &str) -> Option<LabKey> {
        let z = self.public_zone(zone)?;
        if !z.served_signed {
            return None;
        }
        self.active_key(zone)
    }

    pub fn dnssec_summary(&self, zone: &str) -> Option<(String, Vec<(String, String)>)> {
        let z = self.public_zone(zone)?;
        Some((
            z.serve_override.clone().unwrap_or(z.serve.to_string()),
            z.ksks
                .iter()
                .map(|k| (k.name.clone(), k.status.to_string()))
                .collect(),
        ))
    }
}

/// `<ChangeInfo>` of a change.
pub(super) fn change_info(id: &str, status: &str, at: SystemTime) -> String {
    format!(
        "<ChangeInfo><Id>/change/{id}</Id><Status>{status}</Status><SubmittedAt>{}</SubmittedAt></ChangeInfo>",
        rfc3339(at)
    )
}

impl Zone {
    /// `<HostedZone>`.
    pub fn xml(&self) -> String {
        let count = self.records.len();
        format!(
            "<HostedZone><Id>/hostedzone/{}</Id><Name>{}</Name><CallerReference>{}</CallerReference><Config><Comment>lab</Comment><PrivateZone>{}</PrivateZone></Config><ResourceRecordSetCount>{count}</ResourceRecordSetCount></HostedZone>",
            self.id,
            escape(&self.name),
            escape(&self.caller_reference),
            self.private
        )
    }

    /// `<KeySigningKey>`'s members for `ksk`, signed by `key`.
    pub fn ksk_xml(&self, ksk: &Ksk, key: &LabKey, item: &str) -> String {
        let dnskey = key.dnskey();
        let public = base64::engine::general_purpose::STANDARD.encode(&dnskey.public_key);
        let (tag, digest) = match dnskey.to_ds(&self.name, DigestType::Sha256) {
            Ok(ds) => (ds.key_tag, hex_upper(&ds.digest)),
            Err(_) => (dnskey.key_tag(), String::new()),
        };
        let mut members: Vec<(String, String)> = vec![
            ("Name".into(), ksk.name.clone()),
            ("KmsArn".into(), ksk.arn.clone()),
            ("Flag".into(), "257".into()),
            ("SigningAlgorithmMnemonic".into(), "ECDSAP256SHA256".into()),
            ("SigningAlgorithmType".into(), dnskey.algorithm.to_string()),
            ("DigestAlgorithmMnemonic".into(), "SHA-256".into()),
            ("DigestAlgorithmType".into(), "2".into()),
            ("KeyTag".into(), tag.to_string()),
            ("DigestValue".into(), digest.clone()),
            ("PublicKey".into(), public.clone()),
            (
                "DSRecord".into(),
                format!("{tag} {} 2 {digest}", dnskey.algorithm),
            ),
            (
                "DNSKEYRecord".into(),
                format!("257 3 {} {public}", dnskey.algorithm),
            ),
            ("Status".into(), ksk.status.into()),
            ("StatusMessage".into(), String::new()),
            ("CreatedDate".into(), rfc3339(ksk.created)),
            ("LastModifiedDate".into(), rfc3339(ksk.modified)),
        ];
        for (field, value) in &self.ksk_override {
            if let Some(m) = members.iter_mut().find(|(f, _)| f == field) {
                m.1 = value.clone();
            }
        }
        let body: String = members
            .iter()
            .map(|(f, v)| format!("<{f}>{}</{f}>", escape(v)))
            .collect();
        format!("<{item}>{body}</{item}>")
    }
}

impl Record {
    pub fn xml(&self) -> String {
        let mut out = format!(
            "<ResourceRecordSet><Name>{}</Name><Type>{}</Type>",
            escape(&self.name),
            escape(&self.rtype)
        );
        if let Some(alias) = &self.alias {
            out.push_str(&format!(
                "<AliasTarget><HostedZoneId>Z2FDTNDATAQYW2</HostedZoneId><DNSName>{}</DNSName><EvaluateTargetHealth>false</EvaluateTargetHealth></AliasTarget>",
                escape(alias)
            ));
        }
        if let Some(ttl) = self.ttl {
            out.push_str(&format!(
                "<TTL>{ttl}</TTL><ResourceRecords><ResourceRecord><Value>lab</Value></ResourceRecord></ResourceRecords>"
            ));
        }
        out.push_str("</ResourceRecordSet>");
        out
    }
}
