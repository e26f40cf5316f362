//! The child's signals to its parent (RFC 7344, RFC 8078): each child address's CDS and
//! CDNSKEY answers, and the one verdict drawn from every address. A registry that scans
//! acts only on a set every child name server serves alike (RFC 9975), so the verdict
//! keeps the house's unanimity: one address that cannot be asked makes it unknown, two
//! that differ make it inconsistent.

use serde::{Deserialize, Serialize};

use super::model::{ChildView, DnskeyAnswer, UnknownReason};
use crate::dnssec::{Dnskey, Ds};

/// One child address's CDS and CDNSKEY, asked beside its DNSKEY.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Signals {
    /// Not asked at this look (a routine sample, or a look from before they were asked).
    #[default]
    NotAsked,
    /// Either question got no usable answer.
    Unknown(UnknownReason),
    /// Both answered with authority; empty sets when nothing is published.
    Answered(Published),
}

/// What one address publishes, and which of its served keys sign it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// The CDS records, de-duplicated, in the order served.
    #[serde(with = "super::model::ds_text")]
    pub cds: Vec<Ds>,
    /// The CDNSKEY records, de-duplicated.
    pub cdnskey: Vec<Dnskey>,
    /// The keys of the address's DNSKEY set (indices) that are served (they sign the set)
    /// and whose RRSIG over every published signal RRset is valid at the look.
    pub signers: Vec<usize>,
}

impl Published {
    pub fn is_empty(&self) -> bool {
        self.cds.is_empty() && self.cdnskey.is_empty()
    }

    /// RFC 8078 section 4: `CDS 0 0 0 00` or `CDNSKEY 0 3 0 AA==` (any record of the
    /// form counts; a delete beside other records is still a delete to a careful parent,
    /// and a contradiction we report).
    pub fn delete_requested(&self) -> bool {
        self.cds.iter().any(is_delete_ds) || self.cdnskey.iter().any(is_delete_key)
    }

    /// The sets in one comparable form, for consistency across addresses.
    fn fingerprint(&self) -> (Vec<String>, Vec<String>) {
        let mut cds: Vec<String> = self.cds.iter().map(ToString::to_string).collect();
        let mut keys: Vec<String> = self
            .cdnskey
            .iter()
            .map(|k| format!("{} {} {:?}", k.flags, k.algorithm, k.public_key))
            .collect();
        cds.sort();
        keys.sort();
        (cds, keys)
    }
}

/// `CDS 0 0 0 00` (RFC 8078 section 4).
pub fn is_delete_ds(ds: &Ds) -> bool {
    ds.algorithm == 0 && ds.key_tag == 0 && ds.digest_type == 0
}

/// `CDNSKEY 0 3 0 AA==` (RFC 8078 section 4): algorithm 0 marks it.
pub fn is_delete_key(key: &Dnskey) -> bool {
    key.algorithm == 0
}

/// The child's signals at every address, as one verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignalsVerdict {
    /// Not asked at this look.
    NotAsked,
    /// Some address could not be asked, or no address answered: nothing can be said.
    Unknown(String),
    /// Addresses serve different sets (RFC 9975: a registry acts on none of them).
    Inconsistent(String),
    /// Every address answered: nothing published.
    None,
    /// Every address serves the same delete request.
    Delete { signed_by: Vec<Dnskey> },
    /// Every address serves the same CDS/CDNSKEY records.
    Keys {
        cds: Vec<Ds>,
        cdnskey: Vec<Dnskey>,
        /// The served keys whose signature over the signals holds at every address.
        signed_by: Vec<Dnskey>,
    },
}

impl ChildView {
    /// The signals every child address publishes, judged together.
    pub fn signals(&self) -> SignalsVerdict {
        if self.answers.is_empty() {
            return SignalsVerdict::Unknown("no child address was asked".into());
        }
        let empty = Published::default();
        let mut first: Option<(&str, &Published, Vec<Dnskey>)> = None;
        let mut signed_by: Vec<Dnskey> = Vec::new();
        for a in &self.answers {
            let at = a.addr.to_string();
            let (published, keys) = match &a.answer {
                DnskeyAnswer::Unknown(reason) => {
                    return SignalsVerdict::Unknown(format!("{} ({at}): {reason}", a.server));
                }
                // An unsigned address can sign nothing: it counts as publishing nothing.
                DnskeyAnswer::Absent => (None, Vec::new()),
                DnskeyAnswer::Keys(k) => match &k.signals {
                    Signals::NotAsked => return SignalsVerdict::NotAsked,
                    Signals::Unknown(reason) => {
                        return SignalsVerdict::Unknown(format!(
                            "{} ({at}): CDS/CDNSKEY: {reason}",
                            a.server
                        ));
                    }
                    Signals::Answered(p) => (
                        Some(p),
                        p.signers
                            .iter()
                            .filter_map(|&i| k.keys.get(i).cloned())
                            .collect(),
                    ),
                },
            };
            let published = published.unwrap_or(&empty);
            match &first {
                None => {
                    signed_by = keys.clone();
                    first = Some((&a.server, published, keys));
                }
                Some((server, seen, _)) => {
                    if seen.fingerprint() != published.fingerprint() {
                        return SignalsVerdict::Inconsistent(format!(
                            "{server} serves {}, {} ({at}) serves {}",
                            describe(seen),
                            a.server,
                            describe(published)
                        ));
                    }
                    signed_by.retain(|k| keys.contains(k));
                }
            }
        }
        let Some((_, published, _)) = first else {
            return SignalsVerdict::Unknown("no child address answered".into());
        };
        if published.is_empty() {
            return SignalsVerdict::None;
        }
        if published.delete_requested() {
            SignalsVerdict::Delete { signed_by }
        } else {
            SignalsVerdict::Keys {
                cds: published.cds.clone(),
                cdnskey: published.cdnskey.clone(),
                signed_by,
            }
        }
    }
}

/// A published set in a few words, for the history and the alerts.
pub fn describe(p: &Published) -> String {
    if p.is_empty() {
        return "no CDS or CDNSKEY".into();
    }
    if p.delete_requested() {
        return "the delete request (CDS 0 0 0 00)".into();
    }
    let mut tags: Vec<String> = p
        .cds
        .iter()
        .map(|d| format!("CDS {} {} {}", d.key_tag, d.algorithm, d.digest_type))
        .chain(
            p.cdnskey
                .iter()
                .map(|k| format!("CDNSKEY of key {}", k.key_tag())),
        )
        .collect();
    tags.sort();
    tags.dedup();
    tags.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::{ChildKeys, ServerAnswer, SignatureWindow};
    use crate::dnssec::DigestType;

    const ZONE: &str = "child.test.";

    fn keys(key: &Dnskey, signals: Signals) -> DnskeyAnswer {
        DnskeyAnswer::Keys(ChildKeys {
            keys: vec![key.clone()],
            ttl: 300,
            signed: true,
            self_signers: vec![0],
            signatures: vec![SignatureWindow {
                key_tag: key.key_tag(),
                inception: 0,
                expiration: u32::MAX,
            }],
            signals,
        })
    }

    fn view(answers: Vec<DnskeyAnswer>) -> ChildView {
        ChildView {
            zone: ZONE.into(),
            apex_ns: vec![],
            answers: answers
                .into_iter()
                .enumerate()
                .map(|(i, answer)| ServerAnswer {
                    server: format!("ns{i}.child.test.").into(),
                    addr: format!("127.0.0.{}", 20 + i).parse().unwrap(),
                    answer,
                })
                .collect(),
        }
    }

    fn cds_of(key: &Dnskey) -> Published {
        Published {
            cds: vec![key.to_ds(ZONE, DigestType::Sha256).unwrap()],
            cdnskey: vec![key.clone()],
            signers: vec![0],
        }
    }

    fn delete() -> Published {
        Published {
            cds: vec![Ds {
                key_tag: 0,
                algorithm: 0,
                digest_type: 0,
                digest: vec![0],
            }],
            cdnskey: vec![],
            signers: vec![0],
        }
    }

    #[test]
    fn every_address_alike_is_one_verdict() {
        let key = crate::dnssec::test_key();
        let same = Signals::Answered(cds_of(&key));
        assert_eq!(
            view(vec![keys(&key, same.clone()), keys(&key, same)]).signals(),
            SignalsVerdict::Keys {
                cds: cds_of(&key).cds,
                cdnskey: vec![key.clone()],
                signed_by: vec![key.clone()],
            }
        );
        let nothing = Signals::Answered(Published::default());
        assert_eq!(
            view(vec![keys(&key, nothing.clone()), keys(&key, nothing)]).signals(),
            SignalsVerdict::None
        );
        let del = Signals::Answered(delete());
        assert_eq!(
            view(vec![keys(&key, del.clone()), keys(&key, del)]).signals(),
            SignalsVerdict::Delete {
                signed_by: vec![key.clone()]
            }
        );
    }

    #[test]
    fn one_address_that_differs_or_is_silent_decides_nothing() {
        let key = crate::dnssec::test_key();
        let ours = Signals::Answered(cds_of(&key));
        let verdict = view(vec![
            keys(&key, ours.clone()),
            keys(&key, Signals::Answered(Published::default())),
        ])
        .signals();
        assert!(
            matches!(&verdict, SignalsVerdict::Inconsistent(d) if d.contains("127.0.0.21") && d.contains("no CDS")),
            "{verdict:?}"
        );
        let verdict = view(vec![
            keys(&key, ours.clone()),
            keys(&key, Signals::Unknown(UnknownReason::Timeout)),
        ])
        .signals();
        assert!(
            matches!(&verdict, SignalsVerdict::Unknown(d) if d.contains("127.0.0.21") && d.contains("timeout")),
            "{verdict:?}"
        );
        let verdict = view(vec![
            keys(&key, ours.clone()),
            DnskeyAnswer::Unknown(UnknownReason::Refused),
        ])
        .signals();
        assert!(matches!(verdict, SignalsVerdict::Unknown(_)), "{verdict:?}");
        // An unsigned address beside one that publishes: not the same set.
        let verdict = view(vec![keys(&key, ours.clone()), DnskeyAnswer::Absent]).signals();
        assert!(
            matches!(verdict, SignalsVerdict::Inconsistent(_)),
            "{verdict:?}"
        );
        assert_eq!(
            view(vec![DnskeyAnswer::Absent, DnskeyAnswer::Absent]).signals(),
            SignalsVerdict::None
        );
        assert_eq!(
            view(vec![keys(&key, ours), keys(&key, Signals::NotAsked)]).signals(),
            SignalsVerdict::NotAsked
        );
        assert!(matches!(view(vec![]).signals(), SignalsVerdict::Unknown(_)));
    }

    #[test]
    fn a_signer_counts_only_where_it_signs_at_every_address() {
        let key = crate::dnssec::test_key();
        let mut unsigned = cds_of(&key);
        unsigned.signers.clear();
        let verdict = view(vec![
            keys(&key, Signals::Answered(cds_of(&key))),
            keys(&key, Signals::Answered(unsigned)),
        ])
        .signals();
        assert!(
            matches!(&verdict, SignalsVerdict::Keys { signed_by, .. } if signed_by.is_empty()),
            "{verdict:?}"
        );
    }

    #[test]
    fn signals_round_trip_through_json_and_old_rows_read_as_not_asked() {
        let key = crate::dnssec::test_key();
        let answer = keys(&key, Signals::Answered(cds_of(&key)));
        let text = serde_json::to_string(&answer).unwrap();
        assert_eq!(serde_json::from_str::<DnskeyAnswer>(&text).unwrap(), answer);
        let old = text.replace("\"signals\"", "\"cds_old\"");
        let DnskeyAnswer::Keys(k) = serde_json::from_str::<DnskeyAnswer>(&old).unwrap() else {
            panic!("keys")
        };
        assert_eq!(k.signals, Signals::NotAsked);
    }
}
