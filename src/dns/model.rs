//! What the DNS said, server by server, and the verdicts drawn from it.
//!
//! This is the vocabulary between the observer (which asks) and the lifecycle (which
//! decides). The rules of safety rule 3 live here: an answer that is not an authoritative
//! yes or no is [`Unknown`](DsAnswer::Unknown), and "gone" or "published" need every
//! parent address to agree.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::dnssec::{Dnskey, Ds};

/// Why a server's answer taught us nothing. Never counts as present or absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason", content = "detail")]
pub enum UnknownReason {
    Timeout,
    Refused,
    Servfail,
    /// The server is not authoritative for the zone it should be (AA=0, a referral, or
    /// an answer from the wrong zone).
    Lame,
    /// Any other RCODE.
    Rcode(u16),
    /// The answer could not be parsed or did not fit the question.
    Malformed(String),
    /// Sending or receiving failed.
    Network(String),
    /// The address could not be learnt (no glue and no resolution).
    NoAddress(String),
}

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str("timeout"),
            Self::Refused => f.write_str("refused"),
            Self::Servfail => f.write_str("servfail"),
            Self::Lame => f.write_str("not authoritative (lame)"),
            Self::Rcode(code) => write!(f, "rcode {code}"),
            Self::Malformed(detail) => write!(f, "malformed answer: {detail}"),
            Self::Network(detail) => write!(f, "network: {detail}"),
            Self::NoAddress(detail) => write!(f, "no address: {detail}"),
        }
    }
}

/// One parent address's answer to `zone. DS`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DsAnswer {
    /// The DS RRset and its TTL: the RRSIG original TTL where signed, else the record TTL.
    Present {
        #[serde(with = "ds_text")]
        ds: Vec<Ds>,
        ttl: u32,
    },
    /// Authoritative NOERROR/NODATA or NXDOMAIN.
    Absent,
    Unknown(UnknownReason),
}

/// One child address's answer to `zone. DNSKEY` (and CDS/CDNSKEY).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DnskeyAnswer {
    Keys(ChildKeys),
    /// Authoritative, and no DNSKEY: the zone is unsigned there.
    Absent,
    Unknown(UnknownReason),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildKeys {
    #[serde(with = "dnskey_text")]
    pub keys: Vec<Dnskey>,
    pub ttl: u32,
    /// The DNSKEY RRset carried at least one RRSIG.
    pub signed: bool,
    /// Validity windows of the RRSIGs over the DNSKEY RRset (Unix seconds).
    pub signatures: Vec<SignatureWindow>,
    #[serde(with = "ds_text")]
    pub cds: Vec<Ds>,
    #[serde(with = "dnskey_text")]
    pub cdnskey: Vec<Dnskey>,
    /// CDS `0 0 0 00` or CDNSKEY `0 3 0 AA==`: the child asks the parent to remove the DS
    /// (RFC 8078 section 4).
    pub delete_requested: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureWindow {
    pub key_tag: u16,
    pub inception: u32,
    pub expiration: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerAnswer<A> {
    /// The name server's host name, as the delegation names it.
    pub server: String,
    pub addr: IpAddr,
    pub answer: A,
}

/// The DS for a zone at every address of every parent name server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentView {
    /// The zone, lower case with the trailing dot.
    pub zone: String,
    /// The zone cut above it, e.g. `com.`.
    pub parent: String,
    pub answers: Vec<ServerAnswer<DsAnswer>>,
}

/// The DNSKEY set at every address of every name server the parent delegates to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildView {
    pub zone: String,
    pub answers: Vec<ServerAnswer<DnskeyAnswer>>,
}

/// `check --json`'s `parent_ds` verdict (DESIGN.md section 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParentDsVerdict {
    /// Every parent address answered, each with a DS set that points at a served SEP key.
    AllMatch,
    /// Every parent address answered that there is no DS.
    AllAbsent,
    /// Some addresses serve a (matching) DS, others answered absent.
    Partial,
    /// Some address serves a DS set none of whose records points at a served key.
    Mismatch,
    /// Some address gave no answer, and nothing above could be concluded.
    Unknown,
}

/// `check --json`'s `validation` verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValidationVerdict {
    Secure,
    Insecure,
    Bogus,
    Unknown,
}

impl fmt::Display for ParentDsVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AllMatch => "all_match",
            Self::AllAbsent => "all_absent",
            Self::Partial => "partial",
            Self::Mismatch => "mismatch",
            Self::Unknown => "unknown",
        })
    }
}

impl fmt::Display for ValidationVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Secure => "secure",
            Self::Insecure => "insecure",
            Self::Bogus => "bogus",
            Self::Unknown => "unknown",
        })
    }
}

impl ParentView {
    /// Every address answered, and every answer was "no DS". Unknown never counts.
    pub fn all_absent(&self) -> bool {
        !self.answers.is_empty()
            && self
                .answers
                .iter()
                .all(|a| matches!(a.answer, DsAnswer::Absent))
    }

    /// Some address serves a DS (whatever the others say).
    pub fn any_present(&self) -> bool {
        self.answers
            .iter()
            .any(|a| matches!(a.answer, DsAnswer::Present { .. }))
    }

    pub fn any_unknown(&self) -> bool {
        self.answers.is_empty()
            || self
                .answers
                .iter()
                .any(|a| matches!(a.answer, DsAnswer::Unknown(_)))
    }

    /// Every address serves a DS set with a record that points at `key`.
    pub fn all_point_at(&self, key: &Dnskey) -> bool {
        !self.answers.is_empty()
            && self.answers.iter().all(|a| match &a.answer {
                DsAnswer::Present { ds, .. } => ds.iter().any(|d| key.matches_ds(&self.zone, d)),
                _ => false,
            })
    }

    /// The largest DS TTL any address gave; what a resolver may still hold after removal.
    pub fn max_ds_ttl(&self) -> Option<u32> {
        self.answers
            .iter()
            .filter_map(|a| match a.answer {
                DsAnswer::Present { ttl, .. } => Some(ttl),
                _ => None,
            })
            .max()
    }

    /// The distinct DS records served anywhere.
    pub fn distinct_ds(&self) -> Vec<Ds> {
        let mut all: Vec<Ds> = Vec::new();
        for a in &self.answers {
            if let DsAnswer::Present { ds, .. } = &a.answer {
                for d in ds {
                    if !all.contains(d) {
                        all.push(d.clone());
                    }
                }
            }
        }
        all
    }

    /// The verdict against the SEP keys the child serves.
    ///
    /// A set with one matching and one stale record still validates (RFC 4035 section
    /// 5.2 needs one DS to match), so it is not a mismatch; a set where nothing matches is,
    /// even while other addresses are unknown: that breakage is already certain.
    pub fn verdict(&self, served: &[Dnskey]) -> ParentDsVerdict {
        let sep: Vec<&Dnskey> = served
            .iter()
            .filter(|k| k.is_sep() && k.is_zone_key())
            .collect();
        let mut present = 0;
        let mut absent = 0;
        let mut unknown = 0;
        for a in &self.answers {
            match &a.answer {
                DsAnswer::Present { ds, .. } => {
                    let matched = ds
                        .iter()
                        .any(|d| sep.iter().any(|k| k.matches_ds(&self.zone, d)));
                    if !matched {
                        return ParentDsVerdict::Mismatch;
                    }
                    present += 1;
                }
                DsAnswer::Absent => absent += 1,
                DsAnswer::Unknown(_) => unknown += 1,
            }
        }
        match (present, absent, unknown) {
            (_, _, u) if u > 0 => ParentDsVerdict::Unknown,
            (0, 0, 0) => ParentDsVerdict::Unknown,
            (0, _, 0) => ParentDsVerdict::AllAbsent,
            (_, 0, 0) => ParentDsVerdict::AllMatch,
            _ => ParentDsVerdict::Partial,
        }
    }
}

impl ChildView {
    /// Every child address answered with a DNSKEY set containing `key`.
    pub fn all_serve(&self, key: &Dnskey) -> bool {
        !self.answers.is_empty()
            && self.answers.iter().all(|a| match &a.answer {
                DnskeyAnswer::Keys(k) => k.keys.contains(key),
                _ => false,
            })
    }

    /// The first child address that answered (not unknown) without `key`: proof that the
    /// key is not served everywhere now.
    pub fn lacking(&self, key: &Dnskey) -> Option<&ServerAnswer<DnskeyAnswer>> {
        self.answers.iter().find(|a| match &a.answer {
            DnskeyAnswer::Keys(k) => !k.keys.contains(key),
            DnskeyAnswer::Absent => true,
            DnskeyAnswer::Unknown(_) => false,
        })
    }

    /// Every child address answered authoritatively that there is no DNSKEY.
    pub fn all_unsigned(&self) -> bool {
        !self.answers.is_empty()
            && self
                .answers
                .iter()
                .all(|a| matches!(a.answer, DnskeyAnswer::Absent))
    }

    pub fn any_unknown(&self) -> bool {
        self.answers.is_empty()
            || self
                .answers
                .iter()
                .any(|a| matches!(a.answer, DnskeyAnswer::Unknown(_)))
    }

    /// Every distinct key any child address serves.
    pub fn served_keys(&self) -> Vec<Dnskey> {
        let mut all: Vec<Dnskey> = Vec::new();
        for a in &self.answers {
            if let DnskeyAnswer::Keys(k) = &a.answer {
                for key in &k.keys {
                    if !all.contains(key) {
                        all.push(key.clone());
                    }
                }
            }
        }
        all
    }

    /// The largest DNSKEY TTL served.
    pub fn max_dnskey_ttl(&self) -> Option<u32> {
        self.answers
            .iter()
            .filter_map(|a| match &a.answer {
                DnskeyAnswer::Keys(k) => Some(k.ttl),
                _ => None,
            })
            .max()
    }

    /// The earliest RRSIG expiration over the DNSKEY RRset anywhere (Unix seconds).
    pub fn earliest_expiration(&self) -> Option<u32> {
        self.answers
            .iter()
            .filter_map(|a| match &a.answer {
                DnskeyAnswer::Keys(k) => k.signatures.iter().map(|s| s.expiration).min(),
                _ => None,
            })
            .min()
    }
}

/// A validating resolver's or our validator's answer about the zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationProbe {
    /// `validator` for our own, or the resolver's address.
    pub source: String,
    pub verdict: ValidationVerdict,
    /// What was seen: "AD set", "SERVFAIL, EDE 6 (DNSSEC Bogus)", "timeout", …
    pub detail: String,
}

/// Combines probes: any bogus is bogus; otherwise the probes that knew must agree.
pub fn combine_validation(probes: &[ValidationProbe]) -> ValidationVerdict {
    if probes.iter().any(|p| p.verdict == ValidationVerdict::Bogus) {
        return ValidationVerdict::Bogus;
    }
    let known: Vec<ValidationVerdict> = probes
        .iter()
        .map(|p| p.verdict)
        .filter(|v| *v != ValidationVerdict::Unknown)
        .collect();
    match known.first() {
        Some(first) if known.iter().all(|v| v == first) => *first,
        _ => ValidationVerdict::Unknown,
    }
}

/// DS and DNSKEY records as their presentation text in JSON and in the database.
mod ds_text {
    use super::*;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(list: &[Ds], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(list.iter().map(|d| d.to_string()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Ds>, D::Error> {
        let texts: Vec<String> = Vec::deserialize(d)?;
        texts
            .iter()
            .map(|t| {
                crate::dnssec::DsLine::parse(&format!(". 0 IN DS {t}"))
                    .map(|line| line.ds)
                    .map_err(serde::de::Error::custom)
            })
            .collect()
    }
}

mod dnskey_text {
    use super::*;
    use base64::Engine;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(list: &[Dnskey], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(list.iter().map(|k| {
            format!(
                "{} {} {} {}",
                k.flags,
                k.protocol,
                k.algorithm,
                base64::engine::general_purpose::STANDARD.encode(&k.public_key)
            )
        }))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Dnskey>, D::Error> {
        let texts: Vec<String> = Vec::deserialize(d)?;
        texts
            .iter()
            .map(|t| {
                let bad = || serde::de::Error::custom(format!("bad DNSKEY {t:?}"));
                let mut f = t.split_whitespace();
                let flags = f.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
                let protocol = f.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
                let algorithm = f.next().and_then(|v| v.parse().ok()).ok_or_else(bad)?;
                let key: String = f.collect();
                let public_key = base64::engine::general_purpose::STANDARD
                    .decode(key)
                    .map_err(|_| bad())?;
                Ok(Dnskey {
                    flags,
                    protocol,
                    algorithm,
                    public_key,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::DigestType;
    use crate::lab::keys::LabKey;

    const ZONE: &str = "child.test.";

    fn parent(answers: Vec<DsAnswer>) -> ParentView {
        ParentView {
            zone: ZONE.into(),
            parent: "test.".into(),
            answers: answers
                .into_iter()
                .enumerate()
                .map(|(i, answer)| ServerAnswer {
                    server: format!("ns{i}.test."),
                    addr: format!("127.0.0.{}", i + 10).parse().unwrap(),
                    answer,
                })
                .collect(),
        }
    }

    fn present(key: &Dnskey, ttl: u32) -> DsAnswer {
        DsAnswer::Present {
            ds: vec![key.to_ds(ZONE, DigestType::Sha256).unwrap()],
            ttl,
        }
    }

    #[test]
    fn verdicts() {
        let key = LabKey::generate(257).unwrap().dnskey();
        let other = LabKey::generate(257).unwrap().dnskey();
        let served = std::slice::from_ref(&key);
        use ParentDsVerdict::*;
        assert_eq!(
            parent(vec![present(&key, 60), present(&key, 60)]).verdict(served),
            AllMatch
        );
        assert_eq!(
            parent(vec![DsAnswer::Absent, DsAnswer::Absent]).verdict(served),
            AllAbsent
        );
        assert_eq!(
            parent(vec![present(&key, 60), DsAnswer::Absent]).verdict(served),
            Partial
        );
        assert_eq!(
            parent(vec![present(&other, 60), present(&key, 60)]).verdict(served),
            Mismatch
        );
        assert_eq!(
            parent(vec![
                present(&other, 60),
                DsAnswer::Unknown(UnknownReason::Timeout)
            ])
            .verdict(served),
            Mismatch,
            "a certain breakage is reported even beside an unknown"
        );
        assert_eq!(
            parent(vec![
                DsAnswer::Unknown(UnknownReason::Timeout),
                DsAnswer::Absent
            ])
            .verdict(served),
            Unknown,
            "a timeout beside an absent is never all_absent"
        );
        assert_eq!(parent(vec![]).verdict(served), Unknown);
        // Nothing served (unsigned child): any DS is a mismatch.
        assert_eq!(parent(vec![present(&key, 60)]).verdict(&[]), Mismatch);
        // A ZSK (flags 256) is not what a DS may point at.
        let mut zsk = key.clone();
        zsk.flags = 256;
        assert_eq!(parent(vec![present(&zsk, 60)]).verdict(&[zsk]), Mismatch);
        // One stale record beside a matching one still validates.
        let mixed = DsAnswer::Present {
            ds: vec![
                other.to_ds(ZONE, DigestType::Sha256).unwrap(),
                key.to_ds(ZONE, DigestType::Sha256).unwrap(),
            ],
            ttl: 60,
        };
        assert_eq!(parent(vec![mixed]).verdict(served), AllMatch);
    }

    #[test]
    fn unanimity_predicates() {
        let key = LabKey::generate(257).unwrap().dnskey();
        let timeout = DsAnswer::Unknown(UnknownReason::Timeout);
        assert!(parent(vec![DsAnswer::Absent, DsAnswer::Absent]).all_absent());
        assert!(!parent(vec![DsAnswer::Absent, timeout.clone()]).all_absent());
        assert!(!parent(vec![]).all_absent());
        assert!(parent(vec![present(&key, 60), present(&key, 60)]).all_point_at(&key));
        assert!(!parent(vec![present(&key, 60), timeout]).all_point_at(&key));
        assert_eq!(
            parent(vec![present(&key, 60), present(&key, 86400)]).max_ds_ttl(),
            Some(86400)
        );
    }

    #[test]
    fn child_predicates() {
        let key = LabKey::generate(257).unwrap().dnskey();
        let keys = |list: Vec<Dnskey>| {
            DnskeyAnswer::Keys(ChildKeys {
                keys: list,
                ttl: 300,
                signed: true,
                signatures: vec![SignatureWindow {
                    key_tag: 1,
                    inception: 10,
                    expiration: 1000,
                }],
                cds: vec![],
                cdnskey: vec![],
                delete_requested: false,
            })
        };
        let view = |answers: Vec<DnskeyAnswer>| ChildView {
            zone: ZONE.into(),
            answers: answers
                .into_iter()
                .map(|answer| ServerAnswer {
                    server: "ns.child.test.".into(),
                    addr: "127.0.0.20".parse().unwrap(),
                    answer,
                })
                .collect(),
        };
        assert!(view(vec![keys(vec![key.clone()]), keys(vec![key.clone()])]).all_serve(&key));
        assert!(!view(vec![keys(vec![key.clone()]), DnskeyAnswer::Absent]).all_serve(&key));
        assert!(
            !view(vec![
                keys(vec![key.clone()]),
                DnskeyAnswer::Unknown(UnknownReason::Refused)
            ])
            .all_serve(&key)
        );
        assert!(view(vec![DnskeyAnswer::Absent]).all_unsigned());
        assert_eq!(
            view(vec![keys(vec![key.clone()])]).earliest_expiration(),
            Some(1000)
        );
    }

    #[test]
    fn validation_combines_conservatively() {
        use ValidationVerdict::*;
        let p = |v| ValidationProbe {
            source: "x".into(),
            verdict: v,
            detail: String::new(),
        };
        assert_eq!(combine_validation(&[p(Secure), p(Secure)]), Secure);
        assert_eq!(combine_validation(&[p(Secure), p(Unknown)]), Secure);
        assert_eq!(combine_validation(&[p(Secure), p(Bogus)]), Bogus);
        assert_eq!(combine_validation(&[p(Secure), p(Insecure)]), Unknown);
        assert_eq!(combine_validation(&[]), Unknown);
    }

    #[test]
    fn views_round_trip_through_json() {
        let key = LabKey::generate(257).unwrap().dnskey();
        let view = parent(vec![
            present(&key, 60),
            DsAnswer::Unknown(UnknownReason::Servfail),
        ]);
        let text = serde_json::to_string(&view).unwrap();
        assert!(text.contains("\"kind\":\"present\""), "{text}");
        assert_eq!(serde_json::from_str::<ParentView>(&text).unwrap(), view);
    }
}
