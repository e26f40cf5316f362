//! Cloudflare's JSON shapes (docs/cloudflare-api.md), what each DNSSEC status lets the
//! daemon conclude ([`Reading`], DESIGN.md section 7), and the DNSSEC object checked
//! against its own public key (rule 5).
//!
//! Lenient where the official library is: every field it makes optional may be missing
//! or `null`, numbers may come as strings or numbers. A fact decided on stays unknown
//! when missing, never a default that could move a zone.

use base64::Engine;
use serde::{Deserialize, Deserializer};

use crate::dnssec::{self, DigestType, Dnskey, DnssecKey, DsLine};
use crate::provider::ProviderError;

/// Every answer: `success`, `errors`, `messages`, `result`, `result_info`.
#[derive(Debug, Deserialize)]
pub struct Envelope<T> {
    /// Missing: not a success (a `result` is taken only when it is `true`).
    #[serde(default)]
    pub success: bool,
    #[serde(default, deserialize_with = "null_as_default")]
    pub errors: Vec<ApiMessage>,
    #[serde(default = "none")]
    pub result: Option<T>,
    #[serde(default)]
    pub result_info: Option<ResultInfo>,
}

fn none<T>() -> Option<T> {
    None
}

/// One of `errors[]` (or `messages[]`): `code`, `message`, and a nested `error_chain`
/// some errors carry.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ApiMessage {
    #[serde(default, deserialize_with = "lenient_number")]
    pub code: Option<u64>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub error_chain: Vec<ApiMessage>,
}

impl ApiMessage {
    /// Its code and those of its chain.
    pub fn codes(&self) -> Vec<u64> {
        self.code
            .into_iter()
            .chain(self.error_chain.iter().flat_map(ApiMessage::codes))
            .collect()
    }

    /// `code: message` and its chain's, for the log and the alert text.
    pub fn text(&self) -> String {
        let own = match (self.code, &self.message) {
            (Some(code), Some(message)) => format!("{code}: {message}"),
            (Some(code), None) => code.to_string(),
            (None, Some(message)) => message.clone(),
            (None, None) => String::new(),
        };
        let chain: Vec<String> = self.error_chain.iter().map(ApiMessage::text).collect();
        if chain.is_empty() {
            own
        } else {
            format!("{own} ({})", chain.join("; "))
        }
    }
}

/// `result_info` of a list, every field optional (the library models only two).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ResultInfo {
    #[serde(default, deserialize_with = "lenient_number")]
    pub page: Option<u64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub per_page: Option<u64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub count: Option<u64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub total_count: Option<u64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub total_pages: Option<u64>,
}

/// A zone (`types/zones/zone.py`), the fields the daemon reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Zone {
    pub id: String,
    /// Without the trailing dot.
    pub name: String,
    /// Cloudflare's view of the delegation (`pending`, `active`, `moved`); nothing about
    /// DNSSEC.
    #[serde(default)]
    pub status: Option<String>,
    /// The name servers Cloudflare assigned; `None` when missing (unknown).
    #[serde(default)]
    pub name_servers: Option<Vec<String>>,
}

/// A DNS record, the fields the daemon reads (its TTL bounds the enabling hold).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Record {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(rename = "type", default)]
    pub rtype: Option<String>,
    /// 1 is "automatic"; `None` when missing (unknown, never 0).
    #[serde(default, deserialize_with = "lenient_number")]
    pub ttl: Option<u64>,
}

/// Cloudflare's "automatic" TTL value, and what it means in seconds (its documentation:
/// automatic is 300 s).
pub const AUTOMATIC_TTL: u64 = 1;
pub const AUTOMATIC_TTL_SECS: u32 = 300;

impl Record {
    /// The TTL the record is served with, `None` when unknown.
    pub fn served_ttl(&self) -> Option<u32> {
        match self.ttl? {
            AUTOMATIC_TTL => Some(AUTOMATIC_TTL_SECS),
            t => u32::try_from(t).ok(),
        }
    }

    /// The largest served TTL of `records`, `None` if one is unknown.
    pub fn largest_ttl(records: &[Record]) -> Option<u32> {
        records
            .iter()
            .try_fold(0, |max, r| r.served_ttl().map(|t| max.max(t)))
    }
}

/// The DNSSEC object's `status`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DnssecStatus {
    Active,
    Pending,
    Disabled,
    PendingDisabled,
    Error,
    /// A value this version does not know; kept, not rejected.
    #[serde(untagged)]
    Other(String),
}

impl DnssecStatus {
    /// As Cloudflare writes it.
    pub fn name(&self) -> &str {
        match self {
            Self::Active => "active",
            Self::Pending => "pending",
            Self::Disabled => "disabled",
            Self::PendingDisabled => "pending-disabled",
            Self::Error => "error",
            Self::Other(s) => s,
        }
    }
}

/// What a DNSSEC status (with `modified_on`) lets the daemon conclude: Cloudflare's word
/// is a hint about the parent, never proof (the daemon's own looks decide); what it says
/// about signing is what the daemon follows. DESIGN.md section 7 holds this table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Whether Cloudflare signs the zone (serves DNSKEY and RRSIGs): `None` unknown.
    pub signs: Option<bool>,
    /// Whether someone asked Cloudflare to switch DNSSEC off (a `PATCH status=disabled`).
    pub off_asked: bool,
    /// Whether Cloudflare's own check sees its DS at the parent: a hint only.
    pub sees_ds: Option<bool>,
    /// Whether `DELETE …/dnssec` (the call that stops signing) will be taken.
    pub may_delete: bool,
}

impl Reading {
    pub fn of(status: &DnssecStatus, modified_on_set: bool) -> Self {
        let reading = |signs, off_asked, sees_ds, may_delete| Self {
            signs,
            off_asked,
            sees_ds,
            may_delete,
        };
        match status {
            DnssecStatus::Pending => reading(Some(true), false, Some(false), false),
            DnssecStatus::Active => reading(Some(true), false, Some(true), false),
            DnssecStatus::PendingDisabled => reading(Some(true), true, Some(true), false),
            // Still signed until `DELETE`: the documentation's states page.
            DnssecStatus::Disabled if modified_on_set => {
                reading(Some(true), true, Some(false), true)
            }
            // Never on, or deleted: unsigned.
            DnssecStatus::Disabled => reading(Some(false), false, Some(false), false),
            DnssecStatus::Error | DnssecStatus::Other(_) => reading(None, false, None, false),
        }
    }
}

/// The DNSSEC object (`types/dns/dnssec.py`), every field optional.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RawDnssec {
    #[serde(default)]
    pub status: Option<DnssecStatus>,
    /// `null`: never on, or deleted.
    #[serde(default)]
    pub modified_on: Option<String>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub algorithm: Option<u64>,
    #[serde(default)]
    pub digest: Option<String>,
    #[serde(default)]
    pub digest_algorithm: Option<String>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub digest_type: Option<u64>,
    #[serde(default)]
    pub ds: Option<String>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub flags: Option<u64>,
    #[serde(default, deserialize_with = "lenient_number")]
    pub key_tag: Option<u64>,
    #[serde(default)]
    pub key_type: Option<String>,
    #[serde(default)]
    pub public_key: Option<String>,
    #[serde(default)]
    pub dnssec_multi_signer: Option<bool>,
}

impl RawDnssec {
    /// What its status says; a missing status is unknown.
    pub fn reading(&self) -> Reading {
        match &self.status {
            Some(status) => Reading::of(status, self.modified_on.is_some()),
            None => Reading::of(&DnssecStatus::Other(String::new()), false),
        }
    }

    /// The status as Cloudflare wrote it, for messages.
    pub fn status_text(&self) -> String {
        match &self.status {
            None => "(none)".into(),
            Some(s) => s.name().to_string(),
        }
    }

    /// The key the zone is signed with, every field checked against the public key
    /// (rule 5): [`ProviderError::DnssecDisabled`] when Cloudflare does not sign it, an
    /// error of unknown outcome when its status is `error` or one this version does not
    /// know. `zone` is the zone that was asked about.
    pub fn signing_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        match self.reading().signs {
            Some(true) => self.verify(zone),
            Some(false) => Err(ProviderError::DnssecDisabled),
            None => Err(self.unknown_status(zone)),
        }
    }

    /// A status that says nothing of signing (`error`, or one this version does not
    /// know): of unknown outcome, never "off".
    pub fn unknown_status(&self, zone: &str) -> ProviderError {
        ProviderError::ErrorInSuccess {
            status: 200,
            message: format!(
                "Cloudflare reports DNSSEC status `{}` for {zone}: whether it signs is unknown",
                self.status_text()
            ),
        }
    }

    /// Checks every key field against the public key.
    pub fn verify(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        let zone = dnssec::fqdn(zone).map_err(|e| ProviderError::Invalid(e.to_string()))?;
        let missing = |field: &str| ProviderError::Decode {
            what: format!("the DNSSEC object of a signed zone has no `{field}`"),
            excerpt: String::new(),
        };
        let small = |field: &'static str, n: u64| -> Result<u8, ProviderError> {
            u8::try_from(n).map_err(|_| ProviderError::Decode {
                what: format!("DNSSEC field `{field}` is out of range"),
                excerpt: n.to_string(),
            })
        };
        let algorithm = small(
            "algorithm",
            self.algorithm.ok_or_else(|| missing("algorithm"))?,
        )?;
        let digest_type_code = small(
            "digest_type",
            self.digest_type.ok_or_else(|| missing("digest_type"))?,
        )?;
        let flags = self.flags.ok_or_else(|| missing("flags"))?;
        let flags = u16::try_from(flags)
            .map_err(|_| mismatch("flags", flags.to_string(), "a 16-bit number"))?;
        let public_key = self
            .public_key
            .as_deref()
            .ok_or_else(|| missing("public_key"))?;
        let public_key = base64::engine::general_purpose::STANDARD
            .decode(public_key.trim())
            .map_err(|e| ProviderError::Decode {
                what: format!("DNSSEC field `public_key` is not base64: {e}"),
                excerpt: public_key.chars().take(40).collect(),
            })?;
        let dnskey = Dnskey {
            flags,
            protocol: dnssec::PROTOCOL_DNSSEC,
            algorithm,
            public_key,
        };
        if !dnskey.is_zone_key() {
            return Err(mismatch(
                "flags",
                flags.to_string(),
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
        let key_tag = self.key_tag.ok_or_else(|| missing("key_tag"))?;
        if key_tag != u64::from(computed.key_tag) {
            return Err(mismatch(
                "key_tag",
                key_tag.to_string(),
                computed.key_tag.to_string(),
            ));
        }
        let digest = self.digest.as_deref().ok_or_else(|| missing("digest"))?;
        let computed_hex = dnssec::hex_upper(&computed.digest);
        if !digest.trim().eq_ignore_ascii_case(&computed_hex) {
            return Err(mismatch("digest", digest.to_string(), computed_hex));
        }
        let ds = self.ds.as_deref().ok_or_else(|| missing("ds"))?;
        let line = DsLine::parse(ds).map_err(|e| ProviderError::Decode {
            what: format!("DNSSEC field `ds`: {e}"),
            excerpt: ds.chars().take(140).collect(),
        })?;
        let expected = DsLine {
            owner: zone.clone(),
            ttl: line.ttl,
            ds: computed.clone(),
        };
        if line != expected {
            return Err(mismatch("ds", ds.to_string(), expected.to_string()));
        }
        Ok(DnssecKey {
            zone,
            dnskey,
            ds: computed,
            ds_ttl: line.ttl,
            uuid: None,
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

/// `null` reads as the type's default (an empty list).
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// A number written as a number or as a string of digits; `null` or missing is `None`.
fn lenient_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("{n} is not a whole number"))),
        Some(serde_json::Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| D::Error::custom(format!("{s:?} is not a number"))),
        Some(other) => Err(D::Error::custom(format!("{other} is not a number"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DNSSEC object as the simulator answers it for `zxy.com` (the Gcore example's
    /// key: its DS is known from the provider's own example).
    fn signed(status: &str) -> RawDnssec {
        serde_json::from_value(serde_json::json!({
            "status": status, "modified_on": "2026-01-01T00:00:00Z",
            "algorithm": "13", "digest_type": "2", "digest_algorithm": "SHA256",
            "digest": "135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07",
            "ds": "zxy.com. 3600 IN DS 26191 13 2 135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07",
            "flags": 257, "key_tag": 26191, "key_type": "ECDSAP256SHA256",
            "public_key": "ahD2C5Th+4NIFmErQPgSe/j6yPc2pbuhr3QcOJImCYHtv/mR/2qP2yHjBE1x20ERnmAnp6e6//g0uYAQKTW+DA==",
            "dnssec_multi_signer": false
        }))
        .unwrap()
    }

    /// DESIGN.md section 7's table, row by row: `pending` is not a DS at the parent,
    /// `pending-disabled` and a `disabled` not yet deleted are still signed, only a
    /// `disabled` without `modified_on` is unsigned, `error` is unknown.
    #[test]
    fn every_status_reads_as_the_table_says() {
        use DnssecStatus::*;
        let rows = [
            (Pending, true, Some(true), false, Some(false), false),
            (Active, true, Some(true), false, Some(true), false),
            (PendingDisabled, true, Some(true), true, Some(true), false),
            (Disabled, true, Some(true), true, Some(false), true),
            (Disabled, false, Some(false), false, Some(false), false),
            (Error, true, None, false, None, false),
            (Other("rotating".into()), true, None, false, None, false),
        ];
        for (status, modified, signs, off_asked, sees_ds, may_delete) in rows {
            assert_eq!(
                Reading::of(&status, modified),
                Reading {
                    signs,
                    off_asked,
                    sees_ds,
                    may_delete
                },
                "{status:?}, modified_on set: {modified}"
            );
        }
    }

    #[test]
    fn the_key_is_the_daemons_exactly_while_cloudflare_signs() {
        for status in ["pending", "active", "pending-disabled", "disabled"] {
            let key = signed(status).signing_key("zxy.com.").unwrap();
            assert_eq!(key.key_tag(), 26191, "{status}");
            assert_eq!(key.ds_ttl, 3600);
        }
        let mut deleted = signed("disabled");
        deleted.modified_on = None;
        assert_eq!(
            deleted.signing_key("zxy.com"),
            Err(ProviderError::DnssecDisabled)
        );
        let e = signed("error").signing_key("zxy.com").unwrap_err();
        assert!(
            e.outcome_unknown() && e.to_string().contains("`error`"),
            "{e}"
        );
        let e = signed("rotating").signing_key("zxy.com").unwrap_err();
        assert!(
            e.outcome_unknown() && e.to_string().contains("rotating"),
            "{e}"
        );
    }

    #[test]
    fn every_key_field_is_checked_against_the_public_key() {
        type Change = Box<dyn Fn(&mut RawDnssec)>;
        let cases: Vec<(&str, Change)> = vec![
            ("key_tag", Box::new(|r| r.key_tag = Some(2371))),
            (
                "digest",
                Box::new(|r| r.digest = r.digest.as_ref().map(|d| d.replace("135E", "135F"))),
            ),
            (
                "ds",
                Box::new(|r| r.ds = r.ds.as_ref().map(|d| d.replace("zxy.com.", "zxy.net."))),
            ),
            (
                "digest_algorithm",
                Box::new(|r| r.digest_algorithm = Some("SHA1".into())),
            ),
            ("flags", Box::new(|r| r.flags = Some(1))),
        ];
        for (field, change) in cases {
            let mut raw = signed("active");
            change(&mut raw);
            match raw.signing_key("zxy.com") {
                Err(ProviderError::DnssecMismatch { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: expected a mismatch, got {other:?}"),
            }
        }
        let mut raw = signed("active");
        raw.public_key = None;
        assert!(matches!(
            raw.signing_key("zxy.com"),
            Err(ProviderError::Decode { .. })
        ));
    }

    #[test]
    fn numbers_come_as_strings_or_numbers_and_nulls_are_unknown() {
        let raw: RawDnssec = serde_json::from_str(
            r#"{"status":"disabled","modified_on":null,"algorithm":null,"flags":null,"key_tag":null,"ds":null}"#,
        )
        .unwrap();
        assert_eq!(
            (raw.algorithm, raw.flags, raw.modified_on),
            (None, None, None)
        );
        let raw: RawDnssec =
            serde_json::from_str(r#"{"algorithm":13,"digest_type":"2","flags":"257"}"#).unwrap();
        assert_eq!(
            (raw.algorithm, raw.digest_type, raw.flags),
            (Some(13), Some(2), Some(257))
        );
        assert_eq!(raw.reading().signs, None, "no status: unknown");
        let records: Vec<Record> = serde_json::from_str(
            r#"[{"name":"a.b","type":"A","ttl":1},{"name":"a.b","type":"TXT","ttl":3600}]"#,
        )
        .unwrap();
        assert_eq!(Record::largest_ttl(&records), Some(3600));
        let auto: Vec<Record> = serde_json::from_str(r#"[{"ttl":1}]"#).unwrap();
        assert_eq!(Record::largest_ttl(&auto), Some(AUTOMATIC_TTL_SECS));
        let unknown: Vec<Record> = serde_json::from_str(r#"[{"ttl":1},{"ttl":null}]"#).unwrap();
        assert_eq!(Record::largest_ttl(&unknown), None);
    }
}
