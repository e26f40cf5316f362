//! What the DNS said, server by server, and the verdicts drawn from it.
//!
//! This is the vocabulary between the observer (which asks) and the lifecycle (which
//! decides). The rules of safety rule 3 live here: an answer that is not an authoritative
//! yes or no is [`Unknown`](DsAnswer::Unknown), and "gone" or "published" need every
//! parent address to agree.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::delegation::NsAnswer;
use super::signals::Signals;
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
    /// The server contradicted itself: e.g. it refers the zone to its name servers (so the
    /// name exists) and answers NXDOMAIN for the zone's DS. Neither answer is believed.
    Contradiction(String),
    /// The answer failed validation from the trust anchor (safety rule 10): a DS without
    /// a valid RRSIG by the parent's zone key, a "no DS" without a valid NSEC or NSEC3
    /// denial, a signature outside its validity window, a proof for another name.
    BogusProof(String),
    /// A parent address's referral gives glue for the zone's name servers other than
    /// other parent addresses give: resolvers it refers may reach servers never asked.
    GlueDiffers(String),
    /// The server does not implement EDNS, so it was asked without (no DO bit) and its
    /// answer carries no DNSSEC records: it cannot show a key signing its set, a signed
    /// DS or a signed denial (RFC 6891 section 7).
    WithoutEdns,
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
            Self::Contradiction(detail) => write!(f, "contradictory answers: {detail}"),
            Self::BogusProof(detail) => write!(f, "bogus proof: {detail}"),
            Self::GlueDiffers(detail) => write!(f, "glue differs: {detail}"),
            Self::WithoutEdns => f.write_str(crate::dns::net::wire::WITHOUT_EDNS),
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

/// One child address's answer to `zone. DNSKEY` (and, asked beside it, CDS/CDNSKEY).
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
    pub keys: Vec<Dnskey>,
    pub ttl: u32,
    /// The DNSKEY RRset carried at least one RRSIG.
    pub signed: bool,
    /// The keys (indices into `keys`) that sign the DNSKEY RRset with an RRSIG that was
    /// valid at the look (`validator::self_signers`). A key counts as served only if it
    /// is here (safety rule 4).
    #[serde(default)]
    pub self_signers: Vec<usize>,
    /// Validity windows of the RRSIGs over the DNSKEY RRset (Unix seconds).
    pub signatures: Vec<SignatureWindow>,
    /// Its CDS and CDNSKEY (RFC 7344, RFC 8078), when asked.
    #[serde(default)]
    pub signals: Signals,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureWindow {
    pub key_tag: u16,
    pub inception: u32,
    pub expiration: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerAnswer<A> {
    /// The name server's host name, as the delegation names it (shared with the cached
    /// delegation: every zone at one provider names the same few).
    pub server: std::sync::Arc<str>,
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
    /// The NS set every parent address delegates the zone to (asked beside the DS).
    #[serde(default)]
    pub delegations: Vec<ServerAnswer<NsAnswer>>,
    /// Whether the DS answers were validated from the trust anchor (safety rule 10).
    #[serde(default)]
    pub evidence: Evidence,
}

/// How far the DS answers of a parent view can be trusted (safety rule 10).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum Evidence {
    /// Not validated: a routine look (`Observer::parent`).
    #[default]
    Unchecked,
    /// Every answer that is not unknown was validated from the trust anchor: a DS set
    /// with a valid RRSIG by the parent's zone key, a "no DS" with a valid NSEC or NSEC3
    /// denial. An answer that failed is `unknown` (`bogus_proof`).
    Validated,
    /// The parent zone is provably insecure (no DS for it above, proven): the answers
    /// are authoritative but cannot be validated. Says why.
    Insecure(String),
}

/// The DNSKEY set at every address of every name server the parent delegates to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildView {
    pub zone: String,
    pub answers: Vec<ServerAnswer<DnskeyAnswer>>,
    /// The apex NS set every child address serves (its TTL bounds how long resolvers
    /// may follow a delegation after it changed).
    #[serde(default)]
    pub apex_ns: Vec<ServerAnswer<NsAnswer>>,
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
    /// Some address serves a DS set none of whose usable records points at a key served
    /// by a child address that answered (at least one did).
    Mismatch,
    /// Some address gave no answer, no child address answered to judge a DS against, or
    /// a DS set holds nothing a validator can use: nothing above could be concluded.
    Unknown,
}

/// Why a `parent_ds` verdict is what it is, where the verdict alone would mislead
/// (`check --json`'s `parent_ds_reasons`). The verdict keeps to the five values of the
/// contract; these say what lies behind an `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictReason {
    /// Some parent address gave no usable answer.
    ParentUnknown,
    /// A DS matches no key, but no child address answered: the child's servers are
    /// down, refusing or lame, which is not evidence of a wrong DS.
    ChildUnknown,
    /// Some parent address serves a DS set none of whose records uses an algorithm or
    /// digest type validators implement: validators treat the zone as insecure (RFC 4035
    /// section 5.2, RFC 6840 section 5.2). Not an outage, and not a chain of trust.
    NoSupportedDs,
}

impl fmt::Display for VerdictReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Self::ParentUnknown => "parent_unknown",
            Self::ChildUnknown => "child_unknown",
            Self::NoSupportedDs => "no_supported_ds",
        })
    }
}

/// A `parent_ds` verdict with the reasons behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentAssessment {
    pub verdict: ParentDsVerdict,
    pub reasons: Vec<VerdictReason>,
}

/// What the child's servers were seen to serve: the evidence a DS is judged against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServedKeys {
    /// Every distinct key served by a child address that answered.
    pub keys: Vec<Dnskey>,
    /// At least one child address answered authoritatively (its keys, or "no DNSKEY").
    /// Without that there is no evidence against a DS: see [`ParentView::verdict`].
    pub known: bool,
}

impl ServedKeys {
    /// Keys known to be served (at least one child address answered).
    pub fn known(keys: Vec<Dnskey>) -> Self {
        Self { keys, known: true }
    }

    /// Keys assumed, not seen served (the provider's key while the child could not be
    /// asked): enough to recognise a match, never to call a DS wrong.
    pub fn assumed(keys: Vec<Dnskey>) -> Self {
        Self { keys, known: false }
    }
}

impl fmt::Display for ParentDsVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Self::AllMatch => "all_match",
            Self::AllAbsent => "all_absent",
            Self::Partial => "partial",
            Self::Mismatch => "mismatch",
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

    /// Every address serves a DS set of which a record validators use
    /// ([`crate::dnssec::usable_ds`]) points at `key`.
    pub fn all_point_at(&self, key: &Dnskey) -> bool {
        !self.answers.is_empty()
            && self.answers.iter().all(|a| match &a.answer {
                DsAnswer::Present { ds, .. } => crate::dnssec::usable_ds(ds)
                    .iter()
                    .any(|d| key.matches_ds(&self.zone, d)),
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

    /// Some address serves a DS set none of whose records a validator can use
    /// (unsupported algorithm or digest type only): to validators the zone is insecure.
    pub fn any_unsupported_only(&self) -> bool {
        self.answers.iter().any(
            |a| matches!(&a.answer, DsAnswer::Present { ds, .. } if !ds.iter().any(Ds::supported)),
        )
    }

    /// The verdict against the SEP keys the child serves.
    pub fn verdict(&self, served: &ServedKeys) -> ParentDsVerdict {
        self.assess(served).verdict
    }

    /// The verdict and the reasons behind it. The rules:
    ///
    /// - Only DS records a validator uses count (supported algorithm and digest type, and
    ///   of those the strongest digest type of the set: [`crate::dnssec::usable_ds`]).
    ///   A set with none of them is neither a match nor a mismatch: validators treat the
    ///   zone as insecure (RFC 4035 section 5.2, RFC 6840 section 5.2). That address
    ///   counts as unknown, with [`VerdictReason::NoSupportedDs`].
    /// - A set with one matching and one stale record still validates (RFC 4035 section
    ///   5.2 needs one DS to match), so it is not a mismatch.
    /// - `mismatch` needs known child evidence: at least one child address answered
    ///   (its keys, or "no DNSKEY"), and some address's usable DS set matches no SEP key
    ///   served by any child address that answered. A resolver that reaches an answering
    ///   child server then fails validation: the breakage is certain, even while other
    ///   child or parent addresses are unknown. When no child address answered (silent,
    ///   REFUSED, lame, no address), the served set is empty for want of evidence, not
    ///   because the zone serves nothing: the DS is not judged and the address counts as
    ///   unknown, with [`VerdictReason::ChildUnknown`]. A child outage reads as
    ///   `unknown`, never as a wrong DS.
    /// - `all_absent`, `all_match` and `partial` need every parent address to have
    ///   answered (safety rule 3).
    pub fn assess(&self, served: &ServedKeys) -> ParentAssessment {
        let sep: Vec<&Dnskey> = served
            .keys
            .iter()
            .filter(|k| k.is_sep() && k.is_zone_key())
            .collect();
        let mut reasons = Vec::new();
        let mut reason = |r: VerdictReason| {
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        };
        let mut present = 0;
        let mut absent = 0;
        let mut unknown = 0;
        let mut mismatch = false;
        for a in &self.answers {
            match &a.answer {
                DsAnswer::Present { ds, .. } => {
                    let usable = crate::dnssec::usable_ds(ds);
                    if usable.is_empty() {
                        reason(VerdictReason::NoSupportedDs);
                        unknown += 1;
                        continue;
                    }
                    let matched = usable
                        .iter()
                        .any(|d| sep.iter().any(|k| k.matches_ds(&self.zone, d)));
                    if matched {
                        present += 1;
                    } else if served.known {
                        mismatch = true;
                    } else {
                        reason(VerdictReason::ChildUnknown);
                        unknown += 1;
                    }
                }
                DsAnswer::Absent => absent += 1,
                DsAnswer::Unknown(_) => {
                    reason(VerdictReason::ParentUnknown);
                    unknown += 1;
                }
            }
        }
        if self.answers.is_empty() {
            reason(VerdictReason::ParentUnknown);
        }
        let verdict = match (mismatch, present, absent, unknown) {
            (true, ..) => ParentDsVerdict::Mismatch,
            (_, _, _, u) if u > 0 => ParentDsVerdict::Unknown,
            (_, 0, 0, 0) => ParentDsVerdict::Unknown,
            (_, 0, _, 0) => ParentDsVerdict::AllAbsent,
            (_, _, 0, 0) => ParentDsVerdict::AllMatch,
            _ => ParentDsVerdict::Partial,
        };
        if verdict == ParentDsVerdict::Mismatch {
            reasons.clear();
        }
        ParentAssessment { verdict, reasons }
    }
}

/// Which of `len` addresses (in the observer's order) a sample of `turn` asks: the
/// real observer and [`ParentView::sampled`] alike.
pub fn sample_index(len: usize, turn: u64) -> Option<usize> {
    let n = u64::try_from(len).ok().filter(|n| *n > 0)?;
    usize::try_from(turn % n).ok()
}

/// Keeps the answer of the `turn`'s address in `answers`, and that address's in `paired`
/// (the same addresses' other question).
fn keep_sampled<A, B>(
    answers: &mut Vec<ServerAnswer<A>>,
    paired: &mut Vec<ServerAnswer<B>>,
    turn: u64,
) {
    if let Some(i) = sample_index(answers.len(), turn) {
        let kept = answers.swap_remove(i);
        paired.retain(|d| d.addr == kept.addr);
        paired.truncate(1);
        *answers = vec![kept];
    }
}

impl ParentView {
    /// The view as a sample of `turn` would have seen it: one address's DS and NS answers.
    pub fn sampled(mut self, turn: u64) -> Self {
        keep_sampled(&mut self.answers, &mut self.delegations, turn);
        self
    }
}

impl ChildView {
    /// The view as a sample of `turn` would have seen it: one address's answers.
    pub fn sampled(mut self, turn: u64) -> Self {
        keep_sampled(&mut self.answers, &mut self.apex_ns, turn);
        self
    }
}

impl ChildKeys {
    /// `key` is in the set and signs it validly (safety rule 4's "served").
    pub fn serves(&self, key: &Dnskey) -> bool {
        self.keys
            .iter()
            .position(|k| k == key)
            .is_some_and(|i| self.self_signers.contains(&i))
    }
}

/// How one child address stands with a key, in words for the history and `status`.
pub fn key_standing(answer: &DnskeyAnswer, key: &Dnskey) -> String {
    match answer {
        DnskeyAnswer::Keys(k) if k.serves(key) => "serves the key, signed by it".to_string(),
        DnskeyAnswer::Keys(k) if k.keys.contains(key) && !k.signed => {
            "serves the key without any signature over the DNSKEY set".to_string()
        }
        DnskeyAnswer::Keys(k) if k.keys.contains(key) => {
            "serves the key, but no valid signature by it over the DNSKEY set (bad, expired or not yet valid)".to_string()
        }
        DnskeyAnswer::Keys(_) => "serves other keys, not this one".to_string(),
        DnskeyAnswer::Absent => "serves no DNSKEY at all".to_string(),
        DnskeyAnswer::Unknown(reason) => format!("cannot be asked ({reason})"),
    }
}

impl ChildView {
    /// Every child address answered with a DNSKEY set containing `key`, signed by it
    /// (safety rule 4).
    pub fn all_serve(&self, key: &Dnskey) -> bool {
        !self.answers.is_empty()
            && self.answers.iter().all(|a| match &a.answer {
                DnskeyAnswer::Keys(k) => k.serves(key),
                _ => false,
            })
    }

    /// The first child address that answered (not unknown) without serving `key` (not in
    /// its set, or not signing it validly): proof that the key is not served everywhere
    /// now.
    pub fn lacking(&self, key: &Dnskey) -> Option<&ServerAnswer<DnskeyAnswer>> {
        self.answers.iter().find(|a| match &a.answer {
            DnskeyAnswer::Keys(k) => !k.serves(key),
            DnskeyAnswer::Absent => true,
            DnskeyAnswer::Unknown(_) => false,
        })
    }

    /// The first child address that answered (not unknown) without serving, validly
    /// signed, a key `ds` names: proof that the key of an announced DS is not served
    /// everywhere now, even when the provider cannot say which key it signs with.
    pub fn lacking_ds(&self, ds: &Ds) -> Option<&ServerAnswer<DnskeyAnswer>> {
        self.answers.iter().find(|a| match &a.answer {
            DnskeyAnswer::Keys(k) => !k
                .keys
                .iter()
                .any(|key| key.matches_ds(&self.zone, ds) && k.serves(key)),
            DnskeyAnswer::Absent => true,
            DnskeyAnswer::Unknown(_) => false,
        })
    }

    /// The first child address that does not serve `key` for any reason, unknown ones
    /// included: what holds a wait for the key.
    pub fn not_serving(&self, key: &Dnskey) -> Option<&ServerAnswer<DnskeyAnswer>> {
        self.answers.iter().find(|a| match &a.answer {
            DnskeyAnswer::Keys(k) => !k.serves(key),
            _ => true,
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

    /// What the child's servers were seen to serve, as evidence for the parent verdict:
    /// every distinct key any child address serves, and whether any address answered at
    /// all (an empty set from silent servers is no evidence that nothing is served).
    pub fn served_keys(&self) -> ServedKeys {
        ServedKeys {
            keys: self.keys_served(),
            known: self
                .answers
                .iter()
                .any(|a| !matches!(a.answer, DnskeyAnswer::Unknown(_))),
        }
    }

    /// Every distinct key any child address serves.
    fn keys_served(&self) -> Vec<Dnskey> {
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

// DSYNC's vocabulary lives beside its verdict; named here with the rest.
pub use super::dsync::{DsyncAnswer, DsyncVerdict, DsyncView, NotifyTarget};

/// DS and DNSKEY records as their presentation text in JSON and in the database.
pub(super) mod ds_text {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dnssec::DigestType;

    const ZONE: &str = "child.test.";

    fn parent(answers: Vec<DsAnswer>) -> ParentView {
        ParentView {
            zone: ZONE.into(),
            parent: "test.".into(),
            evidence: Default::default(),
            delegations: vec![],
            answers: answers
                .into_iter()
                .enumerate()
                .map(|(i, answer)| ServerAnswer {
                    server: format!("ns{i}.test.").into(),
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
        let key = crate::dnssec::test_key();
        let other = crate::dnssec::test_key();
        let served = &ServedKeys::known(vec![key.clone()]);
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
        // Nothing served, known (an unsigned child answered): any DS is a mismatch.
        assert_eq!(
            parent(vec![present(&key, 60)]).verdict(&ServedKeys::known(vec![])),
            Mismatch
        );
        // A ZSK (flags 256) is not what a DS may point at.
        let mut zsk = key.clone();
        zsk.flags = 256;
        assert_eq!(
            parent(vec![present(&zsk, 60)]).verdict(&ServedKeys::known(vec![zsk])),
            Mismatch
        );
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

    /// No child address answered, so nothing is evidence against a DS.
    #[test]
    fn no_child_evidence_is_never_a_mismatch() {
        let key = crate::dnssec::test_key();
        let other = crate::dnssec::test_key();
        let nothing = ServedKeys::default();
        let view = parent(vec![present(&key, 60), present(&other, 60)]);
        let a = view.assess(&nothing);
        assert_eq!(a.verdict, ParentDsVerdict::Unknown);
        assert_eq!(a.reasons, vec![VerdictReason::ChildUnknown]);
        // The provider's key assumed (no child view): a match is recognised, a wrong DS
        // is not judged.
        let assumed = ServedKeys::assumed(vec![key.clone()]);
        assert_eq!(
            parent(vec![present(&key, 60), DsAnswer::Absent]).verdict(&assumed),
            ParentDsVerdict::Partial
        );
        assert_eq!(
            parent(vec![present(&other, 60)]).verdict(&assumed),
            ParentDsVerdict::Unknown
        );
        // A child view whose every answer is unknown is no evidence either.
        let child = ChildView {
            zone: ZONE.into(),
            apex_ns: vec![],
            answers: [
                UnknownReason::Timeout,
                UnknownReason::Refused,
                UnknownReason::Lame,
                UnknownReason::NoAddress("ns3.nowhere.test. does not exist".into()),
            ]
            .into_iter()
            .map(|r| ServerAnswer {
                server: "ns.child.test.".into(),
                addr: "127.0.0.20".parse().unwrap(),
                answer: DnskeyAnswer::Unknown(r),
            })
            .collect(),
        };
        assert!(!child.served_keys().known);
        assert_eq!(
            parent(vec![present(&key, 60)]).verdict(&child.served_keys()),
            ParentDsVerdict::Unknown
        );
        // One answering child address (unsigned) makes a DS a certain mismatch.
        let mut one = child.clone();
        one.answers[0].answer = DnskeyAnswer::Absent;
        assert_eq!(
            parent(vec![present(&key, 60)]).verdict(&one.served_keys()),
            ParentDsVerdict::Mismatch
        );
    }

    /// A DS set nothing supports is insecure to validators, not a
    /// mismatch; one supported matching record beside unsupported ones still matches.
    #[test]
    fn a_ds_set_nothing_supports_is_not_a_mismatch() {
        let key = crate::dnssec::test_key();
        let served = ServedKeys::known(vec![key.clone()]);
        let good = key.to_ds(ZONE, DigestType::Sha256).unwrap();
        let odd_digest = Ds {
            digest_type: 99,
            ..good.clone()
        };
        let private_alg = Ds {
            algorithm: 253,
            ..good.clone()
        };
        let only_unsupported = parent(vec![DsAnswer::Present {
            ds: vec![odd_digest.clone(), private_alg],
            ttl: 60,
        }]);
        let a = only_unsupported.assess(&served);
        assert_eq!(a.verdict, ParentDsVerdict::Unknown);
        assert_eq!(a.reasons, vec![VerdictReason::NoSupportedDs]);
        assert!(only_unsupported.any_unsupported_only());
        assert!(
            only_unsupported.any_present(),
            "still a DS for safety rule 1"
        );
        let mixed = parent(vec![DsAnswer::Present {
            ds: vec![odd_digest, good],
            ttl: 60,
        }]);
        assert_eq!(mixed.verdict(&served), ParentDsVerdict::AllMatch);
        assert!(!mixed.any_unsupported_only());
    }

    #[test]
    fn unanimity_predicates() {
        let key = crate::dnssec::test_key();
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
        let key = crate::dnssec::test_key();
        let keys = |list: Vec<Dnskey>| {
            DnskeyAnswer::Keys(ChildKeys {
                keys: list,
                ttl: 300,
                signed: true,
                self_signers: vec![0],
                signatures: vec![SignatureWindow {
                    key_tag: 1,
                    inception: 10,
                    expiration: 1000,
                }],
                signals: Default::default(),
            })
        };
        let view = |answers: Vec<DnskeyAnswer>| ChildView {
            zone: ZONE.into(),
            apex_ns: vec![],
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
    fn views_round_trip_through_json() {
        let key = crate::dnssec::test_key();
        let view = parent(vec![
            present(&key, 60),
            DsAnswer::Unknown(UnknownReason::Servfail),
        ]);
        let text = serde_json::to_string(&view).unwrap();
        assert!(text.contains("\"kind\":\"present\""), "{text}");
        assert_eq!(serde_json::from_str::<ParentView>(&text).unwrap(), view);
    }
}
