//! Route 53's XML answers (docs/providers/route53.md: botocore's `route53` model), read
//! by hand from a tree, what each DNSSEC status lets the daemon conclude ([`Reading`],
//! DESIGN.md section 7), and a key-signing key checked against its own public key
//! (rule 5).
//!
//! Lenient where botocore is: elements are matched by local name, a list's items whatever
//! their name (the model says `member`, the API reference `KeySigningKey`), unknown
//! elements ignored, a missing `KeySigningKeys` read as none. A fact decided on stays
//! unknown when missing, never a default that could move a zone.

use base64::Engine;
use roxmltree::{Document, Node};

use crate::dnssec::{self, DigestType, Dnskey, DnssecKey};
use crate::provider::ProviderError;

/// The namespace of every body, asked and answered.
pub const XMLNS: &str = "https://route53.amazonaws.com/doc/2013-04-01/";

/// The TTL written in the DS line shown to the operator: Route 53 gives none (the DS is
/// the parent's record, and the parent sets its own TTL).
pub const SHOWN_DS_TTL: u32 = 3600;

/// The most key-signing keys one answer may list: Route 53 holds at most two a zone.
const MAX_KSKS: usize = 16;

/// A parsed answer.
pub struct Xml<'a> {
    doc: Document<'a>,
}

impl<'a> Xml<'a> {
    /// The body as XML (no DTD: `roxmltree` refuses one by default, so no entity bombs).
    pub fn parse(text: &'a str) -> Result<Self, ProviderError> {
        Document::parse(text)
            .map(|doc| Self { doc })
            .map_err(|e| ProviderError::Decode {
                what: format!("not XML: {e}"),
                excerpt: text.chars().take(160).collect(),
            })
    }

    /// The root, which must be `name`.
    pub fn root(&self, name: &str) -> Result<Node<'_, 'a>, ProviderError> {
        let root = self.doc.root_element();
        if root.tag_name().name() != name {
            return Err(ProviderError::Decode {
                what: format!(
                    "the answer's root is <{}>, not <{name}>",
                    root.tag_name().name()
                ),
                excerpt: String::new(),
            });
        }
        Ok(root)
    }
}

/// The first child element named `name`.
pub fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

/// Every child element (a list's items, whatever their name).
pub fn items<'a, 'i>(node: Node<'a, 'i>) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children().filter(|c| c.is_element())
}

/// The text of the child `name`, trimmed; `None` when missing.
pub fn text(node: Node<'_, '_>, name: &str) -> Option<String> {
    child(node, name).map(|c| c.text().unwrap_or("").trim().to_string())
}

/// The required child `name`'s text.
fn required(node: Node<'_, '_>, name: &str) -> Result<String, ProviderError> {
    text(node, name).ok_or_else(|| ProviderError::Decode {
        what: format!("<{}> has no <{name}>", node.tag_name().name()),
        excerpt: String::new(),
    })
}

/// A whole number child; missing is `None`, malformed an error.
fn number(node: Node<'_, '_>, name: &str) -> Result<Option<u64>, ProviderError> {
    match text(node, name) {
        None => Ok(None),
        Some(t) if t.is_empty() => Ok(None),
        Some(t) => t.parse().map(Some).map_err(|_| ProviderError::Decode {
            what: format!("<{name}> is not a whole number"),
            excerpt: t.chars().take(40).collect(),
        }),
    }
}

/// `IsTruncated`: `true` or `false`, required.
fn truncated(node: Node<'_, '_>) -> Result<bool, ProviderError> {
    match required(node, "IsTruncated")?.as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(ProviderError::Decode {
            what: "<IsTruncated> is neither true nor false".into(),
            excerpt: other.chars().take(40).collect(),
        }),
    }
}

/// The last segment of a prefixed id (`/hostedzone/Z1` is `Z1`), as botocore's
/// `fix_route53_ids` sends it.
pub fn bare_id(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

/// A hosted zone of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostedZone {
    /// Bare (`Z…`).
    pub id: String,
    /// As Route 53 writes it: with the trailing dot.
    pub name: String,
    pub private: bool,
}

impl HostedZone {
    fn read(node: Node<'_, '_>) -> Result<Self, ProviderError> {
        let private = child(node, "Config")
            .and_then(|c| text(c, "PrivateZone"))
            .is_some_and(|p| p == "true");
        Ok(Self {
            id: bare_id(&required(node, "Id")?).to_string(),
            name: required(node, "Name")?,
            private,
        })
    }
}

/// One page of ListHostedZones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZonePage {
    pub zones: Vec<HostedZone>,
    /// The `marker` of the next page, while `IsTruncated`.
    pub next_marker: Option<String>,
}

impl ZonePage {
    pub fn read(xml: &Xml<'_>) -> Result<Self, ProviderError> {
        let root = xml.root("ListHostedZonesResponse")?;
        let zones = zone_list(root)?;
        let next_marker = if truncated(root)? {
            Some(required(root, "NextMarker")?)
        } else {
            None
        };
        Ok(Self { zones, next_marker })
    }
}

fn zone_list(root: Node<'_, '_>) -> Result<Vec<HostedZone>, ProviderError> {
    let list = child(root, "HostedZones").ok_or_else(|| ProviderError::Decode {
        what: "the answer has no <HostedZones>".into(),
        excerpt: String::new(),
    })?;
    items(list).map(HostedZone::read).collect()
}

/// One page of ListHostedZonesByName: a listing that starts at a name, not a filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ByNamePage {
    pub zones: Vec<HostedZone>,
    /// `NextDNSName` and `NextHostedZoneId`, while `IsTruncated`.
    pub next: Option<(String, String)>,
}

impl ByNamePage {
    pub fn read(xml: &Xml<'_>) -> Result<Self, ProviderError> {
        let root = xml.root("ListHostedZonesByNameResponse")?;
        let zones = zone_list(root)?;
        let next = if truncated(root)? {
            Some((
                required(root, "NextDNSName")?,
                bare_id(&required(root, "NextHostedZoneId")?).to_string(),
            ))
        } else {
            None
        };
        Ok(Self { zones, next })
    }
}

/// GetHostedZone: the zone and its name servers.
pub fn zone_with_servers(xml: &Xml<'_>) -> Result<(HostedZone, Vec<String>), ProviderError> {
    let root = xml.root("GetHostedZoneResponse")?;
    let zone =
        HostedZone::read(
            child(root, "HostedZone").ok_or_else(|| ProviderError::Decode {
                what: "the answer has no <HostedZone>".into(),
                excerpt: String::new(),
            })?,
        )?;
    let servers = child(root, "DelegationSet")
        .and_then(|d| child(d, "NameServers"))
        .map(|n| {
            items(n)
                .filter_map(|s| s.text().map(|t| t.trim().to_string()))
                .collect()
        })
        .unwrap_or_default();
    Ok((zone, servers))
}

/// A change's `ChangeInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeInfo {
    /// Bare (`C…`).
    pub id: String,
    /// `PENDING` or `INSYNC`.
    pub status: String,
}

impl ChangeInfo {
    pub fn insync(&self) -> bool {
        self.status == "INSYNC"
    }

    /// The `ChangeInfo` of an answer whose root is `root`.
    pub fn read(xml: &Xml<'_>, root: &str) -> Result<Self, ProviderError> {
        let root = xml.root(root)?;
        let info = child(root, "ChangeInfo").ok_or_else(|| ProviderError::Decode {
            what: "the answer has no <ChangeInfo>".into(),
            excerpt: String::new(),
        })?;
        let status = required(info, "Status")?;
        if status != "PENDING" && status != "INSYNC" {
            return Err(ProviderError::Decode {
                what: "a change status that is neither PENDING nor INSYNC".into(),
                excerpt: status.chars().take(40).collect(),
            });
        }
        Ok(Self {
            id: bare_id(&required(info, "Id")?).to_string(),
            status,
        })
    }
}

/// An `ErrorResponse`: its `Code` (what the client branches on) and `Message`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiError {
    pub code: Option<String>,
    pub message: Option<String>,
}

impl ApiError {
    /// Read leniently: any body that is not the error form reads as no code.
    pub fn read(body: &[u8]) -> Self {
        let Ok(text) = std::str::from_utf8(body) else {
            return Self::default();
        };
        let Ok(doc) = Document::parse(text) else {
            return Self::default();
        };
        let root = doc.root_element();
        let error = if root.tag_name().name() == "Error" {
            Some(root)
        } else {
            child(root, "Error")
        };
        match error {
            Some(e) => Self {
                code: text_of(e, "Code"),
                message: text_of(e, "Message"),
            },
            None => Self::default(),
        }
    }
}

fn text_of(node: Node<'_, '_>, name: &str) -> Option<String> {
    text(node, name).filter(|t| !t.is_empty())
}

/// A record set of ListResourceRecordSets, what the largest TTL needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSet {
    pub name: String,
    pub rtype: String,
    /// `None` for an alias (its TTL is its target's).
    pub ttl: Option<u32>,
    /// An alias's target name.
    pub alias: Option<String>,
}

/// One page of ListResourceRecordSets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPage {
    pub sets: Vec<RecordSet>,
    /// `NextRecordName`, `NextRecordType`, `NextRecordIdentifier`, while `IsTruncated`.
    pub next: Option<(String, Option<String>, Option<String>)>,
}

impl RecordPage {
    pub fn read(xml: &Xml<'_>) -> Result<Self, ProviderError> {
        let root = xml.root("ListResourceRecordSetsResponse")?;
        let list = child(root, "ResourceRecordSets").ok_or_else(|| ProviderError::Decode {
            what: "the answer has no <ResourceRecordSets>".into(),
            excerpt: String::new(),
        })?;
        let mut sets = Vec::new();
        for set in items(list) {
            let ttl = match number(set, "TTL")? {
                Some(t) => Some(u32::try_from(t).map_err(|_| ProviderError::Decode {
                    what: "a TTL beyond 32 bits".into(),
                    excerpt: t.to_string(),
                })?),
                None => None,
            };
            sets.push(RecordSet {
                name: required(set, "Name")?,
                rtype: required(set, "Type")?,
                ttl,
                alias: child(set, "AliasTarget").and_then(|a| text(a, "DNSName")),
            });
        }
        let next = if truncated(root)? {
            Some((
                required(root, "NextRecordName")?,
                text_of(root, "NextRecordType"),
                text_of(root, "NextRecordIdentifier"),
            ))
        } else {
            None
        };
        Ok(Self { sets, next })
    }
}

/// The largest TTL of `sets` in `zone`: an alias to a name of the zone is that name's,
/// already counted; an alias to anything else (an AWS resource) has no TTL the API
/// gives, so the largest is unknown.
pub fn largest_ttl(zone: &str, sets: &[RecordSet]) -> Option<u32> {
    let zone = zone.trim_end_matches('.').to_ascii_lowercase();
    sets.iter()
        .try_fold(0, |max, set| match (set.ttl, &set.alias) {
            (Some(ttl), _) => Some(max.max(ttl)),
            (None, Some(target)) => {
                let target = target.trim_end_matches('.').to_ascii_lowercase();
                let inside = target == zone || target.ends_with(&format!(".{zone}"));
                inside.then_some(max)
            }
            (None, None) => None,
        })
}

/// The zone's `ServeSignature`, as the model's documentation lists it (the model itself
/// says only "a string").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServeSignature {
    Signing,
    NotSigning,
    Deleting,
    ActionNeeded,
    InternalFailure,
    /// Missing, or a value this version does not know: unknown, never "off".
    Other(String),
}

impl ServeSignature {
    pub fn of(text: &str) -> Self {
        match text {
            "SIGNING" => Self::Signing,
            "NOT_SIGNING" => Self::NotSigning,
            "DELETING" => Self::Deleting,
            "ACTION_NEEDED" => Self::ActionNeeded,
            "INTERNAL_FAILURE" => Self::InternalFailure,
            other => Self::Other(other.to_string()),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Self::Signing => "SIGNING",
            Self::NotSigning => "NOT_SIGNING",
            Self::Deleting => "DELETING",
            Self::ActionNeeded => "ACTION_NEEDED",
            Self::InternalFailure => "INTERNAL_FAILURE",
            Self::Other(s) => s,
        }
    }
}

/// What a zone's `ServeSignature` lets the daemon conclude (DESIGN.md section 7's
/// "Route 53" table): whether Route 53 signs the zone (`None`: unknown), and whether the
/// zone may be switched on or off from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    pub signs: Option<bool>,
    /// Signing is being removed: wait, ask nothing.
    pub settling: bool,
}

impl Reading {
    pub fn of(serve: &ServeSignature) -> Self {
        match serve {
            ServeSignature::Signing => Self {
                signs: Some(true),
                settling: false,
            },
            ServeSignature::NotSigning => Self {
                signs: Some(false),
                settling: false,
            },
            // Still served signed somewhere until it is NOT_SIGNING.
            ServeSignature::Deleting => Self {
                signs: Some(true),
                settling: true,
            },
            ServeSignature::ActionNeeded
            | ServeSignature::InternalFailure
            | ServeSignature::Other(_) => Self {
                signs: None,
                settling: false,
            },
        }
    }
}

/// A key-signing key of GetDNSSEC, every member optional as in the model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ksk {
    pub name: Option<String>,
    pub kms_arn: Option<String>,
    pub flag: Option<u64>,
    pub signing_algorithm_mnemonic: Option<String>,
    pub signing_algorithm_type: Option<u64>,
    pub digest_algorithm_mnemonic: Option<String>,
    pub digest_algorithm_type: Option<u64>,
    pub key_tag: Option<u64>,
    pub digest_value: Option<String>,
    pub public_key: Option<String>,
    pub ds_record: Option<String>,
    pub dnskey_record: Option<String>,
    /// `ACTIVE`, `INACTIVE`, `DELETING`, `ACTION_NEEDED`, `INTERNAL_FAILURE`.
    pub status: Option<String>,
    pub status_message: Option<String>,
}

impl Ksk {
    fn read(node: Node<'_, '_>) -> Result<Self, ProviderError> {
        Ok(Self {
            name: text_of(node, "Name"),
            kms_arn: text_of(node, "KmsArn"),
            flag: number(node, "Flag")?,
            signing_algorithm_mnemonic: text_of(node, "SigningAlgorithmMnemonic"),
            signing_algorithm_type: number(node, "SigningAlgorithmType")?,
            digest_algorithm_mnemonic: text_of(node, "DigestAlgorithmMnemonic"),
            digest_algorithm_type: number(node, "DigestAlgorithmType")?,
            key_tag: number(node, "KeyTag")?,
            digest_value: text_of(node, "DigestValue"),
            public_key: text_of(node, "PublicKey"),
            ds_record: text_of(node, "DSRecord"),
            dnskey_record: text_of(node, "DNSKEYRecord"),
            status: text_of(node, "Status"),
            status_message: text_of(node, "StatusMessage"),
        })
    }

    pub fn status(&self) -> &str {
        self.status.as_deref().unwrap_or("")
    }

    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    /// A status that says the key is broken at AWS (its KMS key, its permissions).
    pub fn failing(&self) -> bool {
        matches!(self.status(), "ACTION_NEEDED" | "INTERNAL_FAILURE")
    }

    /// The key, every member checked against its public key (rule 5). `zone` is the
    /// zone asked about.
    pub fn verify(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        let zone = dnssec::fqdn(zone).map_err(|e| ProviderError::Invalid(e.to_string()))?;
        let missing = |field: &str| ProviderError::Decode {
            what: format!("the key-signing key {} has no <{field}>", self.name()),
            excerpt: String::new(),
        };
        let small = |field: &'static str, n: u64| -> Result<u8, ProviderError> {
            u8::try_from(n).map_err(|_| mismatch(field, n.to_string(), "a number below 256"))
        };
        let algorithm = small(
            "SigningAlgorithmType",
            self.signing_algorithm_type
                .ok_or_else(|| missing("SigningAlgorithmType"))?,
        )?;
        let digest_code = small(
            "DigestAlgorithmType",
            self.digest_algorithm_type
                .ok_or_else(|| missing("DigestAlgorithmType"))?,
        )?;
        let flags = self.flag.ok_or_else(|| missing("Flag"))?;
        if flags != 257 {
            return Err(mismatch(
                "Flag",
                flags.to_string(),
                "257 (a key-signing key)",
            ));
        }
        let public_key = self
            .public_key
            .as_deref()
            .ok_or_else(|| missing("PublicKey"))?;
        let public_key = base64::engine::general_purpose::STANDARD
            .decode(public_key.split_whitespace().collect::<String>())
            .map_err(|e| ProviderError::Decode {
                what: format!("<PublicKey> is not base64: {e}"),
                excerpt: public_key.chars().take(40).collect(),
            })?;
        let dnskey = Dnskey {
            flags: 257,
            protocol: dnssec::PROTOCOL_DNSSEC,
            algorithm,
            public_key,
        };
        if let Some(mnemonic) = &self.signing_algorithm_mnemonic {
            let expected = match algorithm {
                8 => "RSASHA256",
                13 => "ECDSAP256SHA256",
                14 => "ECDSAP384SHA384",
                15 => "ED25519",
                _ => "",
            };
            if !expected.is_empty() && !mnemonic.eq_ignore_ascii_case(expected) {
                return Err(mismatch(
                    "SigningAlgorithmMnemonic",
                    mnemonic.clone(),
                    expected,
                ));
            }
        }
        let digest_type = DigestType::from_code(digest_code)
            .map_err(|e| ProviderError::Invalid(e.to_string()))?;
        if let Some(mnemonic) = &self.digest_algorithm_mnemonic {
            let plain = mnemonic.replace('-', "");
            if !plain.eq_ignore_ascii_case(digest_type.name()) {
                return Err(mismatch(
                    "DigestAlgorithmMnemonic",
                    mnemonic.clone(),
                    digest_type.name(),
                ));
            }
        }
        let computed = dnskey
            .to_ds(&zone, digest_type)
            .map_err(|e| ProviderError::Invalid(e.to_string()))?;
        let key_tag = self.key_tag.ok_or_else(|| missing("KeyTag"))?;
        if key_tag != u64::from(computed.key_tag) {
            return Err(mismatch(
                "KeyTag",
                key_tag.to_string(),
                computed.key_tag.to_string(),
            ));
        }
        let computed_hex = dnssec::hex_upper(&computed.digest);
        let digest = self
            .digest_value
            .as_deref()
            .ok_or_else(|| missing("DigestValue"))?;
        if !digest.trim().eq_ignore_ascii_case(&computed_hex) {
            return Err(mismatch("DigestValue", digest.to_string(), computed_hex));
        }
        // The DS as "tag algorithm type digest", maybe behind an owner, a TTL and a class.
        let ds = self
            .ds_record
            .as_deref()
            .ok_or_else(|| missing("DSRecord"))?;
        let expected_ds = format!(
            "{} {} {} {}",
            computed.key_tag, computed.algorithm, computed.digest_type, computed_hex
        );
        if !ds_rdata_is(ds, &expected_ds) {
            return Err(mismatch("DSRecord", ds.to_string(), expected_ds));
        }
        if let Some(record) = &self.dnskey_record {
            let rdata = record
                .split_whitespace()
                .skip_while(|t| t.parse::<u16>().is_err())
                .collect::<Vec<_>>()
                .join(" ");
            if Dnskey::parse_text(&rdata).as_ref() != Some(&dnskey) {
                return Err(mismatch("DNSKEYRecord", record.clone(), dnskey.text()));
            }
        }
        Ok(DnssecKey {
            zone,
            dnskey,
            ds: computed,
            ds_ttl: SHOWN_DS_TTL,
            uuid: self.name.clone(),
        })
    }
}

/// Whether a DS record's text ends in `rdata` (tag, algorithm, digest type, digest),
/// the digest compared without case and spaces.
fn ds_rdata_is(record: &str, rdata: &str) -> bool {
    let tokens: Vec<&str> = record.split_whitespace().collect();
    let Some(start) = tokens.iter().position(|t| t.eq_ignore_ascii_case("DS")) else {
        return fields_match(&tokens, rdata);
    };
    fields_match(&tokens[start + 1..], rdata)
}

fn fields_match(tokens: &[&str], rdata: &str) -> bool {
    if tokens.len() < 4 {
        return false;
    }
    let ours: Vec<&str> = rdata.split_whitespace().collect();
    tokens[..3] == ours[..3] && tokens[3..].concat().eq_ignore_ascii_case(ours[3])
}

/// GetDNSSEC: the zone's signing status and its key-signing keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dnssec {
    pub serve: ServeSignature,
    pub status_message: Option<String>,
    pub ksks: Vec<Ksk>,
}

impl Dnssec {
    pub fn read(xml: &Xml<'_>) -> Result<Self, ProviderError> {
        let root = xml.root("GetDNSSECResponse")?;
        let status = child(root, "Status").ok_or_else(|| ProviderError::Decode {
            what: "the answer has no <Status>".into(),
            excerpt: String::new(),
        })?;
        let serve = ServeSignature::of(&text(status, "ServeSignature").unwrap_or_default());
        let ksks: Vec<Ksk> = match child(root, "KeySigningKeys") {
            Some(list) => items(list).map(Ksk::read).collect::<Result<_, _>>()?,
            // Required by the model; moto leaves it out when there is none.
            None => Vec::new(),
        };
        if ksks.len() > MAX_KSKS {
            return Err(ProviderError::Decode {
                what: format!(
                    "{} key-signing keys listed, more than Route 53 holds",
                    ksks.len()
                ),
                excerpt: String::new(),
            });
        }
        Ok(Self {
            serve,
            status_message: text_of(status, "StatusMessage"),
            ksks,
        })
    }

    pub fn reading(&self) -> Reading {
        Reading::of(&self.serve)
    }

    /// The keys in `ACTIVE`.
    pub fn active(&self) -> Vec<&Ksk> {
        self.ksks
            .iter()
            .filter(|k| k.status() == "ACTIVE")
            .collect()
    }

    /// Why whether Route 53 signs is unknown, as an error of unknown outcome.
    pub fn unknown(&self, zone: &str, why: &str) -> ProviderError {
        ProviderError::ErrorInSuccess {
            status: 200,
            message: format!(
                "Route 53 reports ServeSignature `{}` for {zone}{}: {why}",
                self.serve.name(),
                self.status_message
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ),
        }
    }

    /// A key broken at AWS, if any (`ACTION_NEEDED`, `INTERNAL_FAILURE`).
    pub fn failing_key(&self, zone: &str) -> Option<ProviderError> {
        self.ksks.iter().find(|k| k.failing()).map(|k| {
            ProviderError::ErrorInSuccess {
                status: 200,
                message: format!(
                    "Route 53 reports key-signing key {} of {zone} as {}{}: fix it at AWS (its KMS key, the key policy)",
                    k.name(),
                    k.status(),
                    k.status_message
                        .as_deref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                ),
            }
        })
    }

    /// The key the zone is signed with, checked (rule 5):
    /// [`ProviderError::DnssecDisabled`] when Route 53 does not sign it, an error of
    /// unknown outcome when its status or its keys say nothing sure.
    pub fn signing_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        match self.reading().signs {
            Some(false) => Err(ProviderError::DnssecDisabled),
            None => Err(self.unknown(zone, "whether it signs is unknown")),
            Some(true) => {
                if let Some(e) = self.failing_key(zone) {
                    return Err(e);
                }
                match self.active().as_slice() {
                    [one] => one.verify(zone),
                    [] => Err(self.unknown(zone, "no key-signing key is ACTIVE")),
                    many => Err(self.unknown(
                        zone,
                        &format!(
                            "{} key-signing keys are ACTIVE (a key roll this version does not drive)",
                            many.len()
                        ),
                    )),
                }
            }
        }
    }
}

fn mismatch(field: &'static str, provider: String, computed: impl Into<String>) -> ProviderError {
    ProviderError::DnssecMismatch {
        field,
        provider,
        computed: computed.into(),
    }
}

/// `text` escaped for an XML element's content.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// CreateKeySigningKey's body, its members in the model's order, no XML declaration
/// (as botocore sends it).
pub fn create_ksk_body(
    caller_reference: &str,
    zone_id: &str,
    kms_arn: &str,
    name: &str,
    status: &str,
) -> String {
    format!(
        "<CreateKeySigningKeyRequest xmlns=\"{XMLNS}\"><CallerReference>{}</CallerReference><HostedZoneId>{}</HostedZoneId><KeyManagementServiceArn>{}</KeyManagementServiceArn><Name>{}</Name><Status>{}</Status></CreateKeySigningKeyRequest>",
        escape(caller_reference),
        escape(zone_id),
        escape(kms_arn),
        escape(name),
        escape(status)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Gcore example's key for `zxy.com` (its DS known from the provider's example).
    const PUBLIC: &str =
        "ahD2C5Th+4NIFmErQPgSe/j6yPc2pbuhr3QcOJImCYHtv/mR/2qP2yHjBE1x20ERnmAnp6e6//g0uYAQKTW+DA==";
    const DIGEST: &str = "135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07";

    fn answer(serve: &str, ksks: &str) -> String {
        format!(
            "<GetDNSSECResponse xmlns=\"{XMLNS}\"><Status><ServeSignature>{serve}</ServeSignature></Status><KeySigningKeys>{ksks}</KeySigningKeys></GetDNSSECResponse>"
        )
    }

    fn ksk(item: &str, status: &str, tag: u32, digest: &str) -> String {
        format!(
            "<{item}><Name>warden_ksk</Name><KmsArn>arn:aws:kms:us-east-1:111122223333:key/k</KmsArn><Flag>257</Flag><SigningAlgorithmMnemonic>ECDSAP256SHA256</SigningAlgorithmMnemonic><SigningAlgorithmType>13</SigningAlgorithmType><DigestAlgorithmMnemonic>SHA-256</DigestAlgorithmMnemonic><DigestAlgorithmType>2</DigestAlgorithmType><KeyTag>{tag}</KeyTag><DigestValue>{digest}</DigestValue><PublicKey>{PUBLIC}</PublicKey><DSRecord>26191 13 2 {DIGEST}</DSRecord><DNSKEYRecord>257 3 13 {PUBLIC}</DNSKEYRecord><Status>{status}</Status></{item}>"
        )
    }

    fn read(body: &str) -> Dnssec {
        Dnssec::read(&Xml::parse(body).unwrap()).unwrap()
    }

    /// DESIGN.md section 7's Route 53 table, row by row.
    #[test]
    fn every_serve_signature_reads_as_the_table_says() {
        let rows = [
            ("SIGNING", Some(true), false),
            ("NOT_SIGNING", Some(false), false),
            ("DELETING", Some(true), true),
            ("ACTION_NEEDED", None, false),
            ("INTERNAL_FAILURE", None, false),
            ("ROTATING", None, false),
            ("", None, false),
        ];
        for (serve, signs, settling) in rows {
            assert_eq!(
                Reading::of(&ServeSignature::of(serve)),
                Reading { signs, settling },
                "{serve}"
            );
        }
    }

    #[test]
    fn the_active_key_is_taken_whatever_its_items_are_named() {
        for item in ["member", "KeySigningKey"] {
            let d = read(&answer("SIGNING", &ksk(item, "ACTIVE", 26191, DIGEST)));
            let key = d.signing_key("zxy.com").unwrap();
            assert_eq!(key.key_tag(), 26191);
            assert_eq!(key.uuid.as_deref(), Some("warden_ksk"));
        }
        let d = read(&answer(
            "NOT_SIGNING",
            &ksk("member", "ACTIVE", 26191, DIGEST),
        ));
        assert_eq!(d.signing_key("zxy.com"), Err(ProviderError::DnssecDisabled));
        let missing = read(&format!(
            "<GetDNSSECResponse xmlns=\"{XMLNS}\"><Status><ServeSignature>NOT_SIGNING</ServeSignature></Status></GetDNSSECResponse>"
        ));
        assert!(missing.ksks.is_empty(), "moto's answer: none");
        let e = read(&answer("ACTION_NEEDED", ""))
            .signing_key("zxy.com")
            .unwrap_err();
        assert!(e.outcome_unknown(), "{e:?}");
        let e = read(&answer(
            "SIGNING",
            &ksk("member", "INTERNAL_FAILURE", 26191, DIGEST),
        ))
        .signing_key("zxy.com")
        .unwrap_err();
        assert!(
            e.outcome_unknown() && e.to_string().contains("INTERNAL_FAILURE"),
            "{e}"
        );
    }

    /// Rule 5: a key tag, digest or DS that disagrees with the public key is refused.
    #[test]
    fn a_key_that_disagrees_with_itself_is_refused() {
        let e = read(&answer("SIGNING", &ksk("member", "ACTIVE", 2371, DIGEST)))
            .signing_key("zxy.com")
            .unwrap_err();
        assert!(
            matches!(
                e,
                ProviderError::DnssecMismatch {
                    field: "KeyTag",
                    ..
                }
            ),
            "{e:?}"
        );
        let wrong = DIGEST.replace("135E", "135F");
        let e = read(&answer("SIGNING", &ksk("member", "ACTIVE", 26191, &wrong)))
            .signing_key("zxy.com")
            .unwrap_err();
        assert!(
            matches!(
                e,
                ProviderError::DnssecMismatch {
                    field: "DigestValue",
                    ..
                }
            ),
            "{e:?}"
        );
        let body = answer("SIGNING", &ksk("member", "ACTIVE", 26191, DIGEST))
            .replace("<DSRecord>26191", "<DSRecord>26192");
        let e = read(&body).signing_key("zxy.com").unwrap_err();
        assert!(
            matches!(
                e,
                ProviderError::DnssecMismatch {
                    field: "DSRecord",
                    ..
                }
            ),
            "{e:?}"
        );
        let d = read(&answer("SIGNING", &ksk("member", "ACTIVE", 26191, DIGEST)));
        assert!(d.signing_key("zxy.net").is_err(), "the DS covers the owner");
    }

    #[test]
    fn errors_pages_and_ttls_read() {
        let e = ApiError::read(
            br#"<ErrorResponse xmlns="https://route53.amazonaws.com/doc/2013-04-01/"><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>r</RequestId></ErrorResponse>"#,
        );
        assert_eq!(e.code.as_deref(), Some("Throttling"));
        assert_eq!(ApiError::read(b"<html>bad gateway"), ApiError::default());
        let page = ZonePage::read(
            &Xml::parse(&format!(
                "<ListHostedZonesResponse xmlns=\"{XMLNS}\"><HostedZones><HostedZone><Id>/hostedzone/Z1</Id><Name>a.example.</Name><CallerReference>x</CallerReference><Config><PrivateZone>true</PrivateZone></Config></HostedZone></HostedZones><Marker></Marker><IsTruncated>true</IsTruncated><NextMarker>Z2</NextMarker><MaxItems>1</MaxItems></ListHostedZonesResponse>"
            ))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(page.zones[0].id, "Z1");
        assert!(page.zones[0].private);
        assert_eq!(page.next_marker.as_deref(), Some("Z2"));
        let set = |ttl: Option<u32>, alias: Option<&str>| RecordSet {
            name: "x".into(),
            rtype: "A".into(),
            ttl,
            alias: alias.map(String::from),
        };
        assert_eq!(
            largest_ttl("ex.com.", &[set(Some(60), None), set(Some(7200), None)]),
            Some(7200)
        );
        assert_eq!(
            largest_ttl(
                "ex.com.",
                &[set(Some(60), None), set(None, Some("www.ex.com."))]
            ),
            Some(60)
        );
        assert_eq!(
            largest_ttl("ex.com.", &[set(None, Some("d1.cloudfront.net."))]),
            None
        );
        assert!(Xml::parse("<!DOCTYPE x [<!ENTITY a \"b\">]><x>&a;</x>").is_err());
        assert_eq!(
            create_ksk_body("r", "Z1", "arn:a&b", "k", "ACTIVE"),
            format!(
                "<CreateKeySigningKeyRequest xmlns=\"{XMLNS}\"><CallerReference>r</CallerReference><HostedZoneId>Z1</HostedZoneId><KeyManagementServiceArn>arn:a&amp;b</KeyManagementServiceArn><Name>k</Name><Status>ACTIVE</Status></CreateKeySigningKeyRequest>"
            )
        );
    }
}
