//! The provider's JSON shapes (DESIGN.md section 7) and the checked DNSSEC key.
//!
//! Response types accept fields they do not know: the provider may add some, and a new
//! field must not stop the daemon. Missing required fields are decode errors.
//!
//! Lenient where the provider's own SDK is: a field the SDK makes optional may be missing
//! or `null` without breaking us. A list becomes empty; a fact we decide on stays
//! unknown (`None`), never a guess: a zone without `dnssec_enabled` is not "off", an
//! RRset without `ttl` does not have TTL 0.

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::dnssec::{self, DigestType, Dnskey, DnssecKey, DsLine};
use crate::provider::{ListedZone, ProviderError};

impl From<ProviderZone> for ListedZone {
    fn from(z: ProviderZone) -> Self {
        Self {
            name: z.name,
            dnssec_enabled: z.dnssec_enabled,
        }
    }
}

/// A zone as `GET /dns/v2/zones/{name}` and the list call return it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ProviderZone {
    pub name: String,
    #[serde(default)]
    pub id: Option<u64>,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    pub status: Option<String>,
    /// `None` when the provider did not say (missing or `null`): unknown, never "off".
    /// Decisions use `GET …/dnssec`, not this field.
    #[serde(default)]
    pub dnssec_enabled: Option<bool>,
    /// Absent until DNSSEC was first enabled.
    #[serde(default)]
    pub dnssec_status: Option<DnssecStatus>,
    #[serde(default)]
    pub dnssec_status_modified_on: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub records: Vec<ZoneRecordSummary>,
}

impl ProviderZone {
    /// The provider's name servers for the zone: the apex NS RRset the zone object
    /// lists, as a comparable set (`dns::delegation::ns_set`). `None` when the object
    /// lists no apex NS (unknown, never "no name servers").
    pub fn apex_ns(&self) -> Option<Vec<String>> {
        let apex = self.name.trim_end_matches('.');
        let hosts: Vec<String> = self
            .records
            .iter()
            .filter(|r| {
                r.rtype.eq_ignore_ascii_case("NS")
                    && r.name.trim_end_matches('.').eq_ignore_ascii_case(apex)
            })
            .flat_map(|r| r.short_answers.iter())
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        let set = crate::dns::delegation::ns_set(hosts);
        (!set.is_empty()).then_some(set)
    }
}

/// The provider's own DNSSEC scan result: a hint, never proof (DESIGN.md section 7).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DnssecStatus {
    Pending,
    Active,
    PendingDisabled,
    Disabled,
    /// A value this version does not know; kept, not rejected.
    #[serde(untagged)]
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct ZoneRecordSummary {
    pub name: String,
    #[serde(rename = "type")]
    pub rtype: String,
    #[serde(default)]
    pub ttl: Option<u32>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub short_answers: Vec<serde_json::Value>,
}

/// `POST /dns/v2/zones`: only `name` is required.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NewZone {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub contact: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub expiry: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub nx_ttl: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub primary_server: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub refresh: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub retry: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub serial: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct CreatedZone {
    pub id: u64,
    #[serde(default, deserialize_with = "null_as_default")]
    pub warnings: Vec<serde_json::Value>,
}

/// The body of RRset create and replace calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RrsetBody {
    pub ttl: u32,
    pub resource_records: Vec<ResourceRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// A/AAAA `["addr"]`, MX `[10,"mx."]`, SRV `[prio,weight,port,"target"]`, …
    pub content: Vec<serde_json::Value>,
    /// Missing or `null` in an answer: enabled, the provider's default.
    #[serde(default = "yes", deserialize_with = "null_as_true")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

fn null_as_true<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Option::<bool>::deserialize(d).map(|v| v.unwrap_or(true))
}

/// `null` reads as the type's default (an empty list).
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// Unix seconds when it is an integer; anything else (missing, `null`, a date string) is
/// unknown rather than an error: nothing is decided on it.
fn lenient_unix<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    serde_json::Value::deserialize(d).map(|v| v.as_i64())
}

/// An RRset as the provider returns it.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Rrset {
    pub name: String,
    #[serde(rename = "type")]
    pub rtype: String,
    /// `None` when the provider did not say: unknown, never 0 (it bounds a wait).
    #[serde(default)]
    pub ttl: Option<u32>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub resource_records: Vec<ResourceRecord>,
    #[serde(default, deserialize_with = "lenient_unix")]
    pub updated_at: Option<i64>,
}

impl Rrset {
    /// The largest TTL of `sets`, or `None` if any of them has no known TTL (a wait
    /// bounded by it would be too short).
    pub fn largest_ttl(sets: &[Rrset]) -> Option<u32> {
        sets.iter().try_fold(0, |max, s| s.ttl.map(|t| max.max(t)))
    }
}

/// `GET /dns/v2/zones/{name}/dnssec/parent-ds`: the provider's scan, a hint only.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct ParentDsHint {
    pub has_valid_parent_ds: bool,
    #[serde(default)]
    pub parent_zone: Option<String>,
    #[serde(default)]
    pub scanned_at: Option<String>,
}

/// The DNSSEC object exactly as the provider sends it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct RawDnssec {
    pub algorithm: String,
    pub digest: String,
    #[serde(default)]
    pub digest_algorithm: Option<String>,
    pub digest_type: String,
    pub ds: String,
    pub flags: u16,
    pub key_tag: u16,
    #[serde(default)]
    pub key_type: Option<String>,
    pub public_key: String,
    #[serde(default)]
    pub uuid: Option<String>,
    /// Present in PATCH answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl RawDnssec {
    /// Checks every field against the public key. `zone` is the zone that was asked about.
    pub fn verify(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        let zone = dnssec::fqdn(zone).map_err(|e| ProviderError::Invalid(e.to_string()))?;
        let number = |field: &'static str, text: &str| -> Result<u8, ProviderError> {
            text.trim().parse().map_err(|_| ProviderError::Decode {
                what: format!("DNSSEC field `{field}` is not a number"),
                excerpt: text.chars().take(40).collect(),
            })
        };
        let algorithm = number("algorithm", &self.algorithm)?;
        let digest_type_code = number("digest_type", &self.digest_type)?;
        let public_key = base64::engine::general_purpose::STANDARD
            .decode(self.public_key.trim())
            .map_err(|e| ProviderError::Decode {
                what: format!("DNSSEC field `public_key` is not base64: {e}"),
                excerpt: self.public_key.chars().take(40).collect(),
            })?;
        let dnskey = Dnskey {
            flags: self.flags,
            protocol: dnssec::PROTOCOL_DNSSEC,
            algorithm,
            public_key,
        };
        if !dnskey.is_zone_key() {
            return Err(mismatch(
                "flags",
                self.flags.to_string(),
                "a zone key (flags 256 or 257)",
            ));
        }
        let digest_type = DigestType::from_code(digest_type_code)
            .map_err(|e| ProviderError::Invalid(e.to_string()))?;
        if let Some(name) = &self.digest_algorithm
            && !name.eq_ignore_ascii_case(digest_type.name())
            && !name.eq_ignore_ascii_case(&digest_type.name().replace("SHA", "SHA-"))
        {
            return Err(mismatch(
                "digest_algorithm",
                name.clone(),
                digest_type.name(),
            ));
        }
        let computed = dnskey
            .to_ds(&zone, digest_type)
            .map_err(|e| ProviderError::Invalid(e.to_string()))?;
        if self.key_tag != computed.key_tag {
            return Err(mismatch(
                "key_tag",
                self.key_tag.to_string(),
                computed.key_tag.to_string(),
            ));
        }
        let computed_hex = dnssec::hex_upper(&computed.digest);
        if !self.digest.trim().eq_ignore_ascii_case(&computed_hex) {
            return Err(mismatch("digest", self.digest.clone(), computed_hex));
        }
        let line = DsLine::parse(&self.ds).map_err(|e| ProviderError::Decode {
            what: format!("DNSSEC field `ds`: {e}"),
            excerpt: self.ds.chars().take(140).collect(),
        })?;
        let expected_line = DsLine {
            owner: zone.clone(),
            ttl: line.ttl,
            ds: computed.clone(),
        };
        if line != expected_line {
            return Err(mismatch("ds", self.ds.clone(), expected_line.to_string()));
        }
        Ok(DnssecKey {
            zone,
            dnskey,
            ds: computed,
            ds_ttl: line.ttl,
            uuid: self.uuid.clone(),
        })
    }
}

fn mismatch(field: &'static str, provider: String, computed: impl Into<String>) -> ProviderError {
    ProviderError::DnssecMismatch {
        field,
        provider,
        computed: computed.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn provider_example() -> RawDnssec {
        serde_json::from_str(
            r#"{"algorithm":"13","digest":"135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07",
 "digest_algorithm":"SHA256","digest_type":"2",
 "ds":"zxy.com. 3600 IN DS 26191 13 2 135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07",
 "flags":257,"key_tag":26191,"key_type":"ECDSAP256SHA256",
 "public_key":"ahD2C5Th+4NIFmErQPgSe/j6yPc2pbuhr3QcOJImCYHtv/mR/2qP2yHjBE1x20ERnmAnp6e6//g0uYAQKTW+DA==",
 "uuid":"0b1c"}"#,
        )
        .unwrap()
    }

    #[test]
    fn the_provider_example_verifies() {
        let key = provider_example().verify("zxy.com").unwrap();
        assert_eq!(key.key_tag(), 26191);
        assert_eq!(
            key.ds_line().to_string(),
            "zxy.com. 3600 IN DS 26191 13 2 135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07"
        );
    }

    #[test]
    fn every_field_is_checked() {
        type Change = Box<dyn Fn(&mut RawDnssec)>;
        let cases: Vec<(&str, Change)> = vec![
            ("key_tag", Box::new(|r| r.key_tag = 26192)),
            (
                "digest",
                Box::new(|r| r.digest = r.digest.replace("135E", "135F")),
            ),
            ("ds", Box::new(|r| r.ds = r.ds.replace("26191", "26192"))),
            (
                "ds",
                Box::new(|r| r.ds = r.ds.replace("zxy.com.", "zxy.net.")),
            ),
            ("ds", Box::new(|r| r.ds = r.ds.replace(" 13 2 ", " 8 2 "))),
            (
                "digest_algorithm",
                Box::new(|r| r.digest_algorithm = Some("SHA1".into())),
            ),
            ("flags", Box::new(|r| r.flags = 1)),
        ];
        for (field, change) in cases {
            let mut raw = provider_example();
            change(&mut raw);
            match raw.verify("zxy.com") {
                Err(ProviderError::DnssecMismatch { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: expected a mismatch, got {other:?}"),
            }
        }
        // The key answers for zxy.com, not for another zone.
        assert!(matches!(
            provider_example().verify("other.com"),
            Err(ProviderError::DnssecMismatch {
                field: "key_tag" | "digest",
                ..
            })
        ));
    }

    #[test]
    fn a_wrong_digest_carries_both_values() {
        let mut raw = provider_example();
        raw.digest = "00".repeat(32);
        let err = raw.verify("zxy.com").unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&"00".repeat(32)), "{text}");
        assert!(text.contains("135E208F"), "{text}");
    }

    #[test]
    fn optional_fields_may_be_missing_or_null() {
        let z: ProviderZone = serde_json::from_str(
            r#"{"name":"a.b","dnssec_enabled":null,"records":null,"dnssec_status":null}"#,
        )
        .unwrap();
        assert_eq!(z.dnssec_enabled, None, "unknown, not off");
        assert!(z.records.is_empty());
        let z: ProviderZone = serde_json::from_str(
            r#"{"name":"a.b","records":[{"name":"a.b","type":"NS","ttl":null,"short_answers":null}]}"#,
        )
        .unwrap();
        assert_eq!(z.dnssec_enabled, None);
        assert_eq!(z.records[0].ttl, None);
        assert!(z.records[0].short_answers.is_empty());
        let z: ProviderZone =
            serde_json::from_str(r#"{"name":"a.b","dnssec_enabled":false}"#).unwrap();
        assert_eq!(z.dnssec_enabled, Some(false));

        let c: CreatedZone = serde_json::from_str(r#"{"id":7,"warnings":null}"#).unwrap();
        assert!(c.warnings.is_empty());
        let c: CreatedZone = serde_json::from_str(r#"{"id":7}"#).unwrap();
        assert!(c.warnings.is_empty());

        let r: Rrset = serde_json::from_str(
            r#"{"name":"www.a.b","type":"A","ttl":null,"updated_at":null,
                "resource_records":[{"content":["192.0.2.1"],"enabled":null},{"content":["192.0.2.2"]}]}"#,
        )
        .unwrap();
        assert_eq!((r.ttl, r.updated_at), (None, None));
        assert!(r.resource_records.iter().all(|rr| rr.enabled));
        let r: Rrset = serde_json::from_str(
            r#"{"name":"www.a.b","type":"A","updated_at":"2026-01-01T00:00:00Z","resource_records":[]}"#,
        )
        .unwrap();
        assert_eq!((r.ttl, r.updated_at), (None, None));
    }

    #[test]
    fn an_unknown_ttl_makes_the_largest_unknown() {
        let set = |ttl| Rrset {
            name: "a.b".into(),
            rtype: "A".into(),
            ttl,
            resource_records: vec![],
            updated_at: None,
        };
        assert_eq!(Rrset::largest_ttl(&[]), Some(0));
        assert_eq!(
            Rrset::largest_ttl(&[set(Some(300)), set(Some(3600))]),
            Some(3600)
        );
        assert_eq!(Rrset::largest_ttl(&[set(Some(300)), set(None)]), None);
    }

    #[test]
    fn unknown_status_values_are_kept() {
        let z: ProviderZone = serde_json::from_str(
            r#"{"name":"a.b","dnssec_enabled":true,"dnssec_status":"pending-disabled"}"#,
        )
        .unwrap();
        assert_eq!(z.dnssec_status, Some(DnssecStatus::PendingDisabled));
        let z: ProviderZone =
            serde_json::from_str(r#"{"name":"a.b","dnssec_status":"rotating"}"#).unwrap();
        assert_eq!(
            z.dnssec_status,
            Some(DnssecStatus::Other("rotating".into()))
        );
    }
}

#[cfg(test)]
mod apex_ns_tests {
    use super::*;

    #[test]
    fn the_apex_ns_is_read_from_the_zone_object() {
        let zone: ProviderZone = serde_json::from_str(
            r#"{"name":"Example.com","records":[
                {"name":"example.com","type":"NS","ttl":3600,"short_answers":["NS2.example.net","ns1.example.net."]},
                {"name":"sub.example.com","type":"NS","short_answers":["ns.elsewhere.test"]},
                {"name":"example.com","type":"A","short_answers":["192.0.2.1"]}]}"#,
        )
        .unwrap();
        assert_eq!(
            zone.apex_ns(),
            Some(vec!["ns1.example.net.".into(), "ns2.example.net.".into()])
        );
        let bare: ProviderZone =
            serde_json::from_str(r#"{"name":"example.com","records":null}"#).unwrap();
        assert_eq!(bare.apex_ns(), None, "no NS listed is unknown, not empty");
    }
}
