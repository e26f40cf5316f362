//! The PowerDNS API's JSON shapes, as lenient as the API's own clients: fields this
//! version does not know are ignored; a fact we decide on that is missing stays unknown.

use base64::Engine;
use serde::Deserialize;

use crate::dnssec::{self, DigestType, Dnskey, DnssecKey, DsLine};
use crate::provider::{KeyState, ProviderError, ProviderKey};

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
    /// The DS records the server computed, `tag alg digest-type digest` each (4.7 lists
    /// none for a key it calls a ZSK).
    #[serde(default)]
    pub ds: Vec<String>,
    /// The algorithm's mnemonic (`ECDSAP256SHA256`), as 4.7 answers it; a number is read
    /// too. Checked against the key when it is one we know.
    #[serde(default)]
    pub algorithm: Option<serde_json::Value>,
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

/// The algorithm number of a mnemonic PowerDNS answers (its `DNSSECKeeper` names), or of
/// a number; `None` for anything else (not checked).
fn algorithm_number(value: &serde_json::Value) -> Option<u8> {
    if let Some(n) = value.as_u64() {
        return u8::try_from(n).ok();
    }
    Some(match value.as_str()?.to_ascii_uppercase().as_str() {
        "RSASHA1" => 5,
        "RSASHA1-NSEC3-SHA1" => 7,
        "RSASHA256" => 8,
        "RSASHA512" => 10,
        "ECDSAP256SHA256" => 13,
        "ECDSAP384SHA384" => 14,
        "ED25519" => 15,
        "ED448" => 16,
        _ => return None,
    })
}

impl Cryptokey {
    /// The key in the daemon's terms ([`ProviderKey`]), whatever its flags and state: its
    /// DNSKEY parsed from the presentation form (a DNSSEC zone key), and every field the
    /// server gives beside it checked against the key (rule 5's spirit): `flags`,
    /// `algorithm`, and each listed DS of a digest type we compute, for the key's own tag,
    /// algorithm and digest. `keytype` is the server's judgement of the key set (4.7 calls
    /// a lone KSK, and a ZSK beside no KSK of its algorithm, a CSK) and is not read.
    pub fn provider_key(&self, zone: &str) -> Result<ProviderKey, ProviderError> {
        let zone = dnssec::fqdn(zone).map_err(|e| ProviderError::Invalid(e.to_string()))?;
        let field = format!("cryptokey {} field `dnskey`", self.id);
        let dnskey = parse_dnskey(&self.dnskey, &field)?;
        if !dnskey.is_zone_key() {
            return Err(mismatch(
                "dnskey",
                self.dnskey.clone(),
                "a zone key (flags bit 7)",
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
        if let Some(named) = self.algorithm.as_ref().and_then(algorithm_number)
            && named != dnskey.algorithm
        {
            return Err(mismatch(
                "algorithm",
                named.to_string(),
                dnskey.algorithm.to_string(),
            ));
        }
        for rdata in &self.ds {
            let line = DsLine::parse(&format!("{zone} 0 IN DS {rdata}")).map_err(|e| {
                ProviderError::Decode {
                    what: format!("cryptokey {} field `ds`: {e}", self.id),
                    excerpt: rdata.chars().take(140).collect(),
                }
            })?;
            let Ok(digest) = DigestType::from_code(line.ds.digest_type) else {
                continue;
            };
            let computed = dnskey
                .to_ds(&zone, digest)
                .map_err(|e| ProviderError::Invalid(e.to_string()))?;
            if line.ds != computed {
                return Err(mismatch("ds", line.ds.to_string(), computed.to_string()));
            }
        }
        Ok(ProviderKey {
            id: self.id.to_string(),
            dnskey,
            state: KeyState {
                active: self.active,
                published: self.published,
            },
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
            algorithm: Some("ECDSAP256SHA256".into()),
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

    /// Keys as 4.7.3 listed them for `r.test.`: a ZSK it called `csk` (no KSK of its
    /// algorithm was active), an Ed25519 KSK.
    fn listed(json: &str) -> Cryptokey {
        serde_json::from_str(json).unwrap()
    }

    const ZSK: &str = r#"{"active": false, "algorithm": "ECDSAP256SHA256", "bits": 256, "dnskey": "256 3 13 vMNaKrlEQt3vX88ZrTQ6H8wzkZ/+P1WBe9RsGHsKt9E+DfS/y9ttN6TtUrZqKQ78gdMMObVlS+yIk3hhe1AUPw==", "ds": ["34261 13 1 490b6d97b6a4731d69f52049db8e244b399de626", "34261 13 2 6d1834f1b5e6b81583ca4410d47d69dc30bbb8df6a91ea5d6789a82ccca8f91e", "34261 13 4 17be7d46cdbb1a72e8da260112976ee0001324189a1a817b0348aeda3e47851e2d63b29b513a6a245819e58e6281944e"], "flags": 256, "id": 2, "keytype": "csk", "published": true, "type": "Cryptokey"}"#;
    const ED25519: &str = r#"{"active": false, "algorithm": "ED25519", "bits": 256, "dnskey": "257 3 15 KtOi9KMiAX2LSoBFYMKBHgGz13I8DFrDjOR5u+8+Nbw=", "ds": ["65400 15 1 e1c75a265452ee88a0c645153e5f94e0d3891c1c", "65400 15 2 3c574a0fbb36e8b691fb6d3fa5770f918962094b276c7073fdf6c2139b990d3c", "65400 15 4 2ad66067782a855dfd5fa22c20c2ff44dfed9ef8e4cd90aeb3ac156ea66522066bc3cdd0c6e98fc95e17638aaf92db8c"], "flags": 257, "id": 3, "keytype": "csk", "privatekey": "Private-key-format: v1.2", "published": false, "type": "Cryptokey"}"#;

    #[test]
    fn every_key_is_read_in_the_daemons_terms_its_tag_recomputed() {
        let zsk = listed(ZSK).provider_key("r.test").unwrap();
        assert_eq!(zsk.id, "2");
        assert!(!zsk.is_sep());
        assert_eq!((zsk.algorithm(), zsk.key_tag()), (13, 34261));
        assert_eq!(
            zsk.state,
            KeyState {
                active: false,
                published: true
            }
        );
        let ksk = listed(ED25519).provider_key("r.test.").unwrap();
        assert!(ksk.is_sep());
        assert_eq!((ksk.algorithm(), ksk.key_tag()), (15, 65400));
        assert!(!ksk.state.published && !ksk.state.active);
        // The same keys under another zone name: their DS are not these.
        assert!(matches!(
            listed(ZSK).provider_key("other.test"),
            Err(ProviderError::DnssecMismatch { field: "ds", .. })
        ));
        // Without the DS and the optional fields, the key alone is enough.
        let bare = listed(
            r#"{"id": 7, "dnskey": "257 3 15 KtOi9KMiAX2LSoBFYMKBHgGz13I8DFrDjOR5u+8+Nbw="}"#,
        )
        .provider_key("r.test")
        .unwrap();
        assert_eq!(
            (bare.key_tag(), bare.state.active, bare.state.published),
            (65400, false, true)
        );
    }

    #[test]
    fn a_field_beside_the_key_that_disagrees_with_it_is_refused() {
        let mut flags = listed(ZSK);
        flags.flags = Some(257);
        assert!(matches!(
            flags.provider_key("r.test"),
            Err(ProviderError::DnssecMismatch { field: "flags", .. })
        ));
        let mut algorithm = listed(ED25519);
        algorithm.algorithm = Some("ECDSAP256SHA256".into());
        assert!(matches!(
            algorithm.provider_key("r.test"),
            Err(ProviderError::DnssecMismatch {
                field: "algorithm",
                ..
            })
        ));
        // A name we do not know is not checked; a number is.
        algorithm.algorithm = Some("SOMETHING-NEW".into());
        assert!(algorithm.provider_key("r.test").is_ok());
        algorithm.algorithm = Some(13.into());
        assert!(algorithm.provider_key("r.test").is_err());
        let mut ds = listed(ED25519);
        ds.ds[0] = "65400 15 1 e1c75a265452ee88a0c645153e5f94e0d3891c1d".into();
        assert!(matches!(
            ds.provider_key("r.test"),
            Err(ProviderError::DnssecMismatch { field: "ds", .. })
        ));
        let mut tag = listed(ED25519);
        tag.ds[1] = tag.ds[1].replacen("65400", "65401", 1);
        assert!(tag.provider_key("r.test").is_err());
        let mut not_zone = listed(ZSK);
        not_zone.dnskey = not_zone.dnskey.replacen("256", "0", 1);
        not_zone.flags = None;
        assert!(matches!(
            not_zone.provider_key("r.test"),
            Err(ProviderError::DnssecMismatch {
                field: "dnskey",
                ..
            })
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
