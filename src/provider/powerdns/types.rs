//! The PowerDNS API's JSON shapes, as lenient as the API's own clients: fields this
//! version does not know are ignored; a fact we decide on that is missing stays unknown.

use base64::Engine;
use serde::Deserialize;

use crate::dnssec::{self, DigestType, Dnskey, DnssecKey, DsLine};
use crate::provider::ProviderError;

/// An entry of `GET /zones`: the zone's opaque id (used as the server gives it), its name
/// (with the trailing dot) and whether it is signed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ZoneEntry {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub dnssec: Option<bool>,
}

/// One entry of `GET /config`: a setting of the server's configuration and its value as
/// the server holds it (a string in 4.7; anything else is no value we read).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ConfigSetting {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: Option<serde_json::Value>,
}

impl ConfigSetting {
    pub fn text(&self) -> Option<&str> {
        self.value.as_ref().and_then(serde_json::Value::as_str)
    }
}

/// `GET /zones/{id}`: the zone with its record sets.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PdnsZone {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub dnssec: Option<bool>,
    #[serde(default)]
    pub rrsets: Vec<PdnsRrset>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PdnsRrset {
    pub name: String,
    #[serde(rename = "type")]
    pub rtype: String,
    /// `None` when the server did not say: unknown, never 0 (it bounds a wait).
    #[serde(default)]
    pub ttl: Option<u32>,
    #[serde(default)]
    pub records: Vec<PdnsRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PdnsRecord {
    pub content: String,
    #[serde(default)]
    pub disabled: bool,
}

/// One entry of `GET /zones/{id}/cryptokeys`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Cryptokey {
    pub id: u64,
    #[serde(default)]
    pub keytype: Option<String>,
    #[serde(default)]
    pub active: bool,
    /// Missing in older servers: published with the zone's keys.
    #[serde(default = "yes")]
    pub published: bool,
    #[serde(default)]
    pub flags: Option<u16>,
    /// `257 3 13 <base64>`: the key in presentation form.
    pub dnskey: String,
    /// The DS records the server computed, `tag alg digest-type digest` each.
    #[serde(default)]
    pub ds: Vec<String>,
}

fn yes() -> bool {
    true
}

impl PdnsZone {
    /// The apex NS set, as `dns::delegation::ns_set` compares them; `None` when the zone
    /// has none (unknown, never "no name servers").
    pub fn apex_ns(&self) -> Option<Vec<String>> {
        let hosts: Vec<&str> = self
            .rrsets
            .iter()
            .filter(|r| r.rtype.eq_ignore_ascii_case("NS") && same_name(&r.name, &self.name))
            .flat_map(|r| r.records.iter().filter(|rec| !rec.disabled))
            .map(|rec| rec.content.as_str())
            .collect();
        let set = crate::dns::delegation::ns_set(hosts);
        (!set.is_empty()).then_some(set)
    }

    /// The DNSKEY records stored at the apex as records, not the keystore's keys (those
    /// are `GET /cryptokeys`, and never listed here): with `direct-dnskey` the server
    /// serves them beside its own keys. Each is parsed strictly; one that does not parse,
    /// or a disabled one (stored but not served: no state the daemon makes), is an error
    /// naming it, never left out of the answer. In canonical order (by RDATA, RFC 4034
    /// section 6.3), whatever order the server lists them in, so that two reads compare.
    pub fn stored_dnskeys(&self) -> Result<Vec<Dnskey>, ProviderError> {
        let field = format!("the DNSKEY record stored at {}", self.name);
        let mut keys = Vec::new();
        for set in self
            .rrsets
            .iter()
            .filter(|r| r.rtype.eq_ignore_ascii_case("DNSKEY") && same_name(&r.name, &self.name))
        {
            for record in &set.records {
                if record.disabled {
                    return Err(ProviderError::Invalid(format!(
                        "{field} {:?} is disabled (stored, not served): not a setting the daemon makes",
                        record.content
                    )));
                }
                keys.push(parse_dnskey(&record.content, &field)?);
            }
        }
        keys.sort_by_cached_key(Dnskey::rdata);
        Ok(keys)
    }

    /// The largest TTL of the zone's record sets; `None` if one has no known TTL.
    pub fn largest_ttl(&self) -> Option<u32> {
        self.rrsets
            .iter()
            .try_fold(0, |max, s| s.ttl.map(|t| max.max(t)))
    }
}

fn same_name(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// The TTL written in the DS line shown to the operator. The API gives none (the DS is
/// the parent's record, and the parent sets its own TTL); the line only needs one.
pub const SHOWN_DS_TTL: u32 = 3600;

impl Cryptokey {
    /// The key a DS must point at: active, published, a secure entry point (KSK or CSK).
    pub fn is_entry_point(&self) -> bool {
        self.active && self.published && self.flags.is_none_or(|f| f & 1 == 1)
    }

    /// Checks the key against a recomputation from its public key (safety rule 5): its
    /// presentation form is a zone key with the SEP flag, and the server's SHA-256 DS, if
    /// it lists one, is the one we compute. The DS we give is always ours.
    pub fn verify(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        let zone = dnssec::fqdn(zone).map_err(|e| ProviderError::Invalid(e.to_string()))?;
        let dnskey = parse_dnskey(&self.dnskey, "cryptokey field `dnskey`")?;
        if !dnskey.is_zone_key() || dnskey.flags & 1 != 1 {
            return Err(mismatch(
                "dnskey",
                self.dnskey.clone(),
                "a zone key with the SEP flag (257)",
            ));
        }
        if let Some(flags) = self.flags
            && flags != dnskey.flags
        {
            return Err(mismatch(
                "flags",
                flags.to_string(),
                dnskey.flags.to_string(),
            ));
        }
        let computed = dnskey
            .to_ds(&zone, DigestType::Sha256)
            .map_err(|e| ProviderError::Invalid(e.to_string()))?;
        let listed: Vec<DsLine> = self
            .ds
            .iter()
            .map(|rdata| {
                DsLine::parse(&format!("{zone} 0 IN DS {rdata}")).map_err(|e| {
                    ProviderError::Decode {
                        what: format!("cryptokey field `ds`: {e}"),
                        excerpt: rdata.chars().take(140).collect(),
                    }
                })
            })
            .collect::<Result<_, _>>()?;
        if let Some(theirs) = listed
            .iter()
            .find(|l| l.ds.digest_type == computed.digest_type)
            && theirs.ds != computed
        {
            return Err(mismatch("ds", theirs.ds.to_string(), computed.to_string()));
        }
        Ok(DnssecKey {
            zone,
            dnskey,
            ds: computed,
            ds_ttl: SHOWN_DS_TTL,
            uuid: Some(self.id.to_string()),
        })
    }
}

/// `257 3 13 <base64, maybe split by spaces>`; `field` names where the text was, for the
/// error.
pub(super) fn parse_dnskey(text: &str, field: &str) -> Result<Dnskey, ProviderError> {
    let bad = |what: &str| ProviderError::Decode {
        what: format!("{field}: {what}"),
        excerpt: text.chars().take(140).collect(),
    };
    let mut fields = text.split_whitespace();
    let mut number = |what: &str| -> Result<u16, ProviderError> {
        fields
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| bad(&format!("no {what}")))
    };
    let flags = number("flags")?;
    let protocol = u8::try_from(number("protocol")?).map_err(|_| bad("protocol too large"))?;
    let algorithm = u8::try_from(number("algorithm")?).map_err(|_| bad("algorithm too large"))?;
    let key: String = fields.collect();
    if key.is_empty() {
        return Err(bad("no public key"));
    }
    let public_key = base64::engine::general_purpose::STANDARD
        .decode(key)
        .map_err(|e| bad(&format!("the public key is not base64: {e}")))?;
    if protocol != dnssec::PROTOCOL_DNSSEC || public_key.is_empty() {
        return Err(bad("not a DNSSEC key"));
    }
    Ok(Dnskey {
        flags,
        protocol,
        algorithm,
        public_key,
    })
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

    /// A key and its DS as Debian's PowerDNS 4.7.3 gave them for `ex.test.`.
    fn served() -> Cryptokey {
        Cryptokey {
            id: 1,
            keytype: Some("csk".into()),
            active: true,
            published: true,
            flags: Some(257),
            dnskey: "257 3 13 FJLqynrq4K7K5l/tqQ9Volzf/2PFIIQTZRSvg+E4YA33eOLXga+P5oFu5JGt+eyLiLb6KvjQmW6i4pwHVaq2cA==".into(),
            ds: vec![
                "53363 13 1 cf6907f76ab252b75c09f70573b3d28110a6494f".into(),
                "53363 13 2 4e4202d14ef09fdaa0000e8be92f6a17dba38c7a27c6b3a44d850dd8e0190922".into(),
            ],
        }
    }

    #[test]
    fn the_servers_key_is_checked_and_our_ds_given() {
        let key = served().verify("ex.test").unwrap();
        assert_eq!(key.zone, "ex.test.");
        assert_eq!(key.key_tag(), 53363);
        assert_eq!(
            key.ds.to_string(),
            "53363 13 2 4E4202D14EF09FDAA0000E8BE92F6A17DBA38C7A27C6B3A44D850DD8E0190922"
        );
    }

    #[test]
    fn a_ds_that_is_not_the_keys_is_refused() {
        let mut key = served();
        key.ds[1] =
            "53363 13 2 0e4202d14ef09fdaa0000e8be92f6a17dba38c7a27c6b3a44d850dd8e0190922".into();
        assert!(matches!(
            key.verify("ex.test"),
            Err(ProviderError::DnssecMismatch { field: "ds", .. })
        ));
        // The same key under another zone name has another DS.
        assert!(matches!(
            served().verify("other.test"),
            Err(ProviderError::DnssecMismatch { field: "ds", .. })
        ));
    }

    #[test]
    fn a_zone_signing_key_or_garbage_is_no_entry_point() {
        let mut zsk = served();
        zsk.dnskey = zsk.dnskey.replacen("257", "256", 1);
        zsk.flags = Some(256);
        assert!(!zsk.is_entry_point());
        assert!(matches!(
            zsk.verify("ex.test"),
            Err(ProviderError::DnssecMismatch {
                field: "dnskey",
                ..
            })
        ));
        let mut garbage = served();
        garbage.dnskey = "257 3 13 !!!".into();
        assert!(matches!(
            garbage.verify("ex.test"),
            Err(ProviderError::Decode { .. })
        ));
    }

    #[test]
    fn the_stored_dnskeys_are_the_apex_records_read_strictly() {
        let key = served().dnskey;
        let zone = |records: &str| -> PdnsZone {
            serde_json::from_str(&format!(
                r#"{{"id":"ex.test.","name":"ex.test.","rrsets":[
                    {{"name":"ex.test.","type":"SOA","ttl":2,"records":[{{"content":"a. b. 1 2 3 4 5"}}]}},
                    {{"name":"www.ex.test.","type":"DNSKEY","ttl":2,"records":[{{"content":"{key}"}}]}},
                    {{"name":"EX.test.","type":"DNSKEY","ttl":300,"records":[{records}]}}]}}"#
            ))
            .unwrap()
        };
        let keys = zone(&format!(r#"{{"content":"{key}","disabled":false}}"#))
            .stored_dnskeys()
            .unwrap();
        assert_eq!(keys, vec![parse_dnskey(&key, "k").unwrap()]);
        assert_eq!(keys[0].key_tag(), 53363);
        assert_eq!(zone("").stored_dnskeys().unwrap(), vec![]);
        // One that does not parse fails the whole, naming it; so does a disabled one.
        let bad = zone(&format!(
            r#"{{"content":"{key}"}},{{"content":"257 3 13 !!!"}}"#
        ))
        .stored_dnskeys()
        .unwrap_err();
        assert!(
            matches!(&bad, ProviderError::Decode { what, excerpt } if what.contains("ex.test.") && excerpt.contains("!!!")),
            "{bad:?}"
        );
        for garbage in ["257 3", "257 2 13 AAAA", "70000 3 13 AAAA", "257 3 13"] {
            assert!(
                zone(&format!(r#"{{"content":"{garbage}"}}"#))
                    .stored_dnskeys()
                    .is_err(),
                "{garbage}"
            );
        }
        let off = zone(&format!(r#"{{"content":"{key}","disabled":true}}"#)).stored_dnskeys();
        assert!(
            matches!(&off, Err(ProviderError::Invalid(m)) if m.contains("disabled")),
            "{off:?}"
        );
    }

    #[test]
    fn the_apex_ns_and_largest_ttl_are_read_leniently() {
        let zone: PdnsZone = serde_json::from_str(
            r#"{"id":"ex.test.","name":"ex.test.","dnssec":false,"unknown":1,"rrsets":[
                {"name":"ex.test.","type":"NS","ttl":3600,"records":[
                    {"content":"NS2.pdns.test.","disabled":false},{"content":"ns1.pdns.test."},
                    {"content":"old.pdns.test.","disabled":true}]},
                {"name":"www.ex.test.","type":"A","ttl":7200,"records":[{"content":"192.0.2.1"}]}]}"#,
        )
        .unwrap();
        assert_eq!(
            zone.apex_ns(),
            Some(vec![
                "ns1.pdns.test.".to_string(),
                "ns2.pdns.test.".to_string()
            ])
        );
        assert_eq!(zone.largest_ttl(), Some(7200));
        let bare: PdnsZone =
            serde_json::from_str(r#"{"id":"x.","name":"x.","rrsets":[{"name":"x.","type":"A"}]}"#)
                .unwrap();
        assert_eq!(bare.apex_ns(), None);
        assert_eq!(bare.largest_ttl(), None);
    }
}
