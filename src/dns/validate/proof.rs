//! One parent server's DS answer, validated with the parent zone's trusted keys (safety
//! rule 10): a DS RRset needs a valid RRSIG by one of the keys; "no DS" needs a signed
//! denial in that same answer.
//!
//! - NODATA at the delegation: an NSEC owned by the name, NS in its bitmap, neither DS
//!   nor SOA (RFC 4035 section 5.4); or an NSEC3 matching the name's hash without DS
//!   (RFC 5155 section 8.6), or an opt-out NSEC3 covering the next closer name with a
//!   closest-encloser proof.
//! - NXDOMAIN: an NSEC covering the name and one covering the wildcard at the closest
//!   encloser; or the NSEC3 closest-encloser proof and a cover of the wildcard (RFC 5155
//!   section 8.4).
//!
//! Every NSEC or NSEC3 used must itself carry a valid RRSIG by the parent's key. Each
//! NSEC3 is hashed with its own parameters (salt, iterations): the parent's NSEC3PARAM is
//! not needed, and a record whose parameters do not give its own owner simply proves
//! nothing. Anything that does not add up is a [`ProofError`], which the observer turns
//! into `unknown` (`bogus_proof`), never into present or absent.

use std::cmp::Ordering;
use std::collections::HashMap;

use hickory_proto::dnssec::Nsec3HashAlgorithm;
use hickory_proto::dnssec::rdata::{DNSSECRData, NSEC, NSEC3};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::validator::{VerifyError, base32hex, verify_rrset};
use crate::dns::net::budget::Budget;
use crate::dns::net::wire;
use crate::dnssec::Dnskey;

/// RFC 9276 section 3.2: validators may refuse NSEC3 records with more iterations; a
/// denial hashed more often than this costs us CPU per zone and proves nothing to many
/// resolvers, so it is not accepted as proof.
pub const MAX_NSEC3_ITERATIONS: u16 = 150;

/// How a DS answer was proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// A DS RRset with a valid RRSIG by the parent's key.
    Signed,
    /// NODATA: an NSEC at the delegation without DS.
    NsecNodata,
    /// NXDOMAIN: NSEC covers of the name and of the wildcard.
    NsecNxdomain,
    /// NODATA: an NSEC3 matching the name without DS.
    Nsec3Nodata,
    /// NODATA: an opt-out NSEC3 covering the next closer name (an unsigned delegation).
    Nsec3OptOut,
    /// NXDOMAIN: the NSEC3 closest-encloser proof and the wildcard cover.
    Nsec3Nxdomain,
}

impl std::fmt::Display for Proof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Self::Signed => "a signed DS RRset",
            Self::NsecNodata => "NSEC",
            Self::NsecNxdomain => "NSEC, NXDOMAIN",
            Self::Nsec3Nodata => "NSEC3",
            Self::Nsec3OptOut => "NSEC3 opt-out",
            Self::Nsec3Nxdomain => "NSEC3, NXDOMAIN",
        })
    }
}

/// Why a DS answer is not proven. The text is the `bogus_proof` reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("the DS RRset of {name} has no valid signature by a key of {parent}: {detail}")]
    DsSignature {
        name: String,
        parent: String,
        detail: String,
    },
    #[error("no NSEC or NSEC3 record denies the DS of {0} (an unsigned negative answer)")]
    NoDenial(String),
    #[error("{rtype} at {owner} has no valid signature by a key of {parent}: {detail}")]
    ProofSignature {
        owner: String,
        rtype: RecordType,
        parent: String,
        detail: String,
    },
    #[error("the NSEC at {owner} lists {listed}: it proves no missing DS")]
    NsecLists { owner: String, listed: RecordType },
    #[error("the NSEC at {0} does not list NS: the name is no delegation")]
    NsecWithoutNs(String),
    #[error("no NSEC matches {name} (those present are for {owners})")]
    NsecNotForName { name: String, owners: String },
    #[error("NXDOMAIN for {0}, yet an NSEC says the name exists")]
    NsecSaysExists(String),
    #[error("no NSEC covers {what} {name}")]
    NsecNoCover { what: &'static str, name: String },
    #[error("the NSEC at {owner} is a delegation above {name}: it cannot deny names below it")]
    AncestorDelegation { owner: String, name: String },
    #[error("the NSEC3 matching {name} lists {listed}")]
    Nsec3Lists { name: String, listed: RecordType },
    #[error(
        "no NSEC3 matches or covers {what} {name} with its own hash parameters (records for {owners})"
    )]
    Nsec3NoMatch {
        what: &'static str,
        name: String,
        owners: String,
    },
    #[error("the NSEC3 covering the next closer name {0} has no opt-out flag")]
    Nsec3NotOptOut(String),
    #[error("NXDOMAIN for {0}, yet an NSEC3 matches the name")]
    Nsec3SaysExists(String),
    #[error("the closest encloser {0} of the proof is a delegation or a DNAME")]
    Nsec3BadEncloser(String),
    #[error("an NSEC3 record uses {0} iterations, above the limit of {MAX_NSEC3_ITERATIONS}")]
    Nsec3Iterations(u16),
    #[error(
        "every NSEC3 record of the answer is one validators must ignore ({0}; RFC 5155 \
         sections 8.1 and 8.2): nothing denies the DS"
    )]
    Nsec3Ignored(String),
    /// The server was asked without EDNS (it does not implement it): no DO bit, so no
    /// signatures or denial records to prove anything with, either way.
    #[error("{}", wire::WITHOUT_EDNS)]
    WithoutEdns,
    /// The signature checks allowed ran out before the proof was verified: nothing
    /// proven either way.
    #[error("{0}")]
    Exhausted(String),
}

/// Proves `message` (the answer of one server of `parent` to `name DS`, already
/// classified present or absent) with `keys`, the parent's validated DNSKEYs, at `now`
/// (Unix seconds).
pub fn prove_ds(
    message: &Message,
    name: &Name,
    parent: &str,
    keys: &[Dnskey],
    now: u32,
    budget: &Budget,
) -> Result<Proof, ProofError> {
    let name_text = wire::name_text(name);
    if wire::unsigned_without_edns(message) {
        return Err(ProofError::WithoutEdns);
    }
    if wire::rrset(&message.answers, name, RecordType::DS)
        .next()
        .is_some()
    {
        return verify_rrset(
            &message.answers,
            name,
            RecordType::DS,
            parent,
            keys,
            now,
            budget,
        )
        .map(|_| Proof::Signed)
        .map_err(|e| match e {
            VerifyError::Failed(detail) => ProofError::DsSignature {
                name: name_text,
                parent: parent.to_string(),
                detail,
            },
            VerifyError::Exhausted(d) => ProofError::Exhausted(d),
        });
    }
    let nxdomain = message.metadata.response_code == ResponseCode::NXDomain;
    let ctx = Denial {
        records: &message.authorities,
        name,
        parent,
        keys,
        now,
        budget,
    };
    let has = |t: RecordType| message.authorities.iter().any(|r| r.record_type() == t);
    if has(RecordType::NSEC) {
        if nxdomain {
            ctx.nsec_nxdomain()
        } else {
            ctx.nsec_nodata()
        }
    } else if has(RecordType::NSEC3) {
        if nxdomain {
            ctx.nsec3_nxdomain()
        } else {
            ctx.nsec3_nodata()
        }
    } else if let Some(what) = ignored_nsec3s(&message.authorities) {
        Err(ProofError::Nsec3Ignored(what))
    } else {
        Err(ProofError::NoDenial(name_text))
    }
}

/// What makes the answer's ignored NSEC3 records ignored (`wire::ignored_nsec3`): their
/// hash algorithms and flags, each said once; `None` if there are none.
fn ignored_nsec3s(records: &[Record]) -> Option<String> {
    let mut what: Vec<String> = Vec::new();
    for (algorithm, flags) in records.iter().filter_map(wire::ignored_nsec3) {
        let said = if algorithm != 1 {
            format!("hash algorithm {algorithm}")
        } else {
            format!("flags {flags:#04x}")
        };
        if !what.contains(&said) {
            what.push(said);
        }
    }
    (!what.is_empty()).then(|| what.join(", "))
}

/// RFC 4034 section 6.1: canonical order, labels compared from the right, lower case.
pub fn canonical_cmp(a: &Name, b: &Name) -> Ordering {
    let labels = |n: &Name| -> Vec<Vec<u8>> {
        let mut l: Vec<Vec<u8>> = n.iter().map(|l| l.to_ascii_lowercase()).collect();
        l.reverse();
        l
    };
    labels(a).cmp(&labels(b))
}

/// The number of labels, from the right, `a` and `b` share.
fn common_labels(a: &Name, b: &Name) -> usize {
    let rev = |n: &Name| -> Vec<Vec<u8>> {
        let mut l: Vec<Vec<u8>> = n.iter().map(|l| l.to_ascii_lowercase()).collect();
        l.reverse();
        l
    };
    rev(a)
        .iter()
        .zip(rev(b).iter())
        .take_while(|(x, y)| x == y)
        .count()
}

/// `name` with `labels` labels kept from the right.
fn trim(name: &Name, labels: usize) -> Name {
    name.trim_to(labels)
}

/// An NSEC span (`owner`, `next`) covers `name`: strictly between them in canonical order
/// (the last NSEC of the zone wraps around to the apex).
fn covers(owner: &Name, next: &Name, name: &Name) -> bool {
    let after_owner = canonical_cmp(owner, name) == Ordering::Less;
    let before_next = canonical_cmp(name, next) == Ordering::Less;
    if canonical_cmp(owner, next) == Ordering::Less {
        after_owner && before_next
    } else {
        after_owner || before_next
    }
}

struct Denial<'a> {
    records: &'a [Record],
    name: &'a Name,
    parent: &'a str,
    keys: &'a [Dnskey],
    now: u32,
    budget: &'a Budget,
}

/// One NSEC3 record of the parent zone, with its owner's hash.
struct Hashed<'a> {
    record: &'a Record,
    nsec3: &'a NSEC3,
    owner_hash: String,
    next_hash: String,
}

impl<'a> Denial<'a> {
    fn signed(&self, owner: &Name, rtype: RecordType) -> Result<(), ProofError> {
        verify_rrset(
            self.records,
            owner,
            rtype,
            self.parent,
            self.keys,
            self.now,
            self.budget,
        )
        .map(|_| ())
        .map_err(|e| match e {
            VerifyError::Failed(detail) => ProofError::ProofSignature {
                owner: wire::name_text(owner),
                rtype,
                parent: self.parent.to_string(),
                detail,
            },
            VerifyError::Exhausted(d) => ProofError::Exhausted(d),
        })
    }

    /// The NSEC records of the answer inside the parent zone.
    fn nsecs(&self) -> Vec<(&'a Name, &'a NSEC)> {
        let Some(zone) = wire::parse_name(self.parent) else {
            return Vec::new();
        };
        self.records
            .iter()
            .filter_map(|r| match &r.data {
                RData::DNSSEC(DNSSECRData::NSEC(n)) if zone.zone_of(&r.name) => Some((&r.name, n)),
                _ => None,
            })
            .collect()
    }

    fn owners(list: impl Iterator<Item = String>) -> String {
        let all: Vec<String> = list.collect();
        if all.is_empty() {
            "no name".into()
        } else {
            all.join(", ")
        }
    }

    fn nsec_nodata(&self) -> Result<Proof, ProofError> {
        let nsecs = self.nsecs();
        let Some((owner, nsec)) = nsecs
            .iter()
            .find(|(owner, _)| wire::same_name(owner, self.name))
        else {
            return Err(ProofError::NsecNotForName {
                name: wire::name_text(self.name),
                owners: Self::owners(nsecs.iter().map(|(o, _)| wire::name_text(o))),
            });
        };
        let types = nsec.type_set();
        for listed in [RecordType::DS, RecordType::SOA] {
            if types.contains(listed) {
                return Err(ProofError::NsecLists {
                    owner: wire::name_text(owner),
                    listed,
                });
            }
        }
        if !types.contains(RecordType::NS) {
            return Err(ProofError::NsecWithoutNs(wire::name_text(owner)));
        }
        self.signed(owner, RecordType::NSEC)?;
        Ok(Proof::NsecNodata)
    }

    /// The signed NSEC whose span covers `target` (never one from a delegation above it).
    fn nsec_cover(&self, what: &'static str, target: &Name) -> Result<(Name, Name), ProofError> {
        for (owner, nsec) in self.nsecs() {
            if wire::same_name(owner, target) {
                return Err(ProofError::NsecSaysExists(wire::name_text(target)));
            }
            if !covers(owner, nsec.next_domain_name(), target) {
                continue;
            }
            let types = nsec.type_set();
            // RFC 6840 section 4.1: an NSEC at a delegation point (NS without SOA) or a
            // DNAME speaks only for its own name, not for names below it.
            if owner.zone_of(target)
                && ((types.contains(RecordType::NS) && !types.contains(RecordType::SOA))
                    || types.contains(RecordType::DNAME))
            {
                return Err(ProofError::AncestorDelegation {
                    owner: wire::name_text(owner),
                    name: wire::name_text(target),
                });
            }
            self.signed(owner, RecordType::NSEC)?;
            return Ok((owner.clone(), nsec.next_domain_name().clone()));
        }
        Err(ProofError::NsecNoCover {
            what,
            name: wire::name_text(target),
        })
    }

    fn nsec_nxdomain(&self) -> Result<Proof, ProofError> {
        let (owner, next) = self.nsec_cover("the name", self.name)?;
        // The closest encloser is the longest ancestor of the name the span shows to
        // exist: the longer common suffix with its owner or its next name.
        let ce_labels = common_labels(self.name, &owner).max(common_labels(self.name, &next));
        let closest = trim(self.name, ce_labels);
        let wildcard = closest
            .prepend_label("*")
            .map_err(|_| ProofError::NsecNoCover {
                what: "the wildcard at",
                name: wire::name_text(&closest),
            })?;
        self.nsec_cover("the wildcard", &wildcard)?;
        Ok(Proof::NsecNxdomain)
    }

    /// The NSEC3 records of the answer owned directly below the parent zone, with a
    /// known hash algorithm.
    fn nsec3s(&self) -> Result<Vec<Hashed<'a>>, ProofError> {
        let Some(zone) = wire::parse_name(self.parent) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for record in self.records {
            let RData::DNSSEC(DNSSECRData::NSEC3(nsec3)) = &record.data else {
                continue;
            };
            if record.name.num_labels() != zone.num_labels() + 1
                || !wire::same_name(&record.name.base_name(), &zone)
                || nsec3.hash_algorithm() != Nsec3HashAlgorithm::SHA1
            {
                continue;
            }
            if nsec3.iterations() > MAX_NSEC3_ITERATIONS {
                return Err(ProofError::Nsec3Iterations(nsec3.iterations()));
            }
            let Some(first) = record.name.iter().next() else {
                continue;
            };
            out.push(Hashed {
                record,
                nsec3,
                owner_hash: String::from_utf8_lossy(first).to_ascii_lowercase(),
                next_hash: base32hex(nsec3.next_hashed_owner_name()),
            });
        }
        Ok(out)
    }

    /// The hash of `name` with one record's own parameters (cached per parameters).
    fn hash_with(
        cache: &mut HashMap<(Vec<u8>, u16), HashMap<Name, String>>,
        n: &NSEC3,
        name: &Name,
    ) -> Option<String> {
        let per = cache
            .entry((n.salt().to_vec(), n.iterations()))
            .or_default();
        if let Some(h) = per.get(name) {
            return Some(h.clone());
        }
        let digest = n
            .hash_algorithm()
            .hash(n.salt(), &name.to_lowercase(), n.iterations())
            .ok()?;
        let h = base32hex(digest.as_ref());
        per.insert(name.clone(), h.clone());
        Some(h)
    }

    fn matching<'b>(
        set: &'b [Hashed<'a>],
        cache: &mut HashMap<(Vec<u8>, u16), HashMap<Name, String>>,
        name: &Name,
    ) -> Option<&'b Hashed<'a>> {
        set.iter()
            .find(|h| Self::hash_with(cache, h.nsec3, name).is_some_and(|x| x == h.owner_hash))
    }

    fn covering<'b>(
        set: &'b [Hashed<'a>],
        cache: &mut HashMap<(Vec<u8>, u16), HashMap<Name, String>>,
        name: &Name,
    ) -> Option<&'b Hashed<'a>> {
        set.iter().find(|h| {
            let Some(x) = Self::hash_with(cache, h.nsec3, name) else {
                return false;
            };
            let (o, n) = (h.owner_hash.as_str(), h.next_hash.as_str());
            if o < n {
                o < x.as_str() && x.as_str() < n
            } else {
                // The last NSEC3 of the chain wraps around.
                o < x.as_str() || x.as_str() < n
            }
        })
    }

    fn describe(set: &[Hashed<'_>]) -> String {
        Self::owners(set.iter().map(|h| wire::name_text(&h.record.name)))
    }

    /// RFC 5155 section 8.3: the closest encloser (an ancestor of the name with a
    /// matching NSEC3) and the NSEC3 covering the next closer name (one label longer),
    /// both signed. `Ok(None)` when the name itself matches.
    fn closest_encloser<'b>(
        &self,
        set: &'b [Hashed<'a>],
        cache: &mut HashMap<(Vec<u8>, u16), HashMap<Name, String>>,
    ) -> Result<(Name, &'b Hashed<'a>), ProofError> {
        let zone_labels = wire::parse_name(self.parent).map_or(0, |z| z.num_labels());
        let mut next_closer = self.name.clone();
        let mut labels = self.name.num_labels();
        while labels > zone_labels {
            labels -= 1;
            let candidate = self.name.trim_to(usize::from(labels));
            if let Some(m) = Self::matching(set, cache, &candidate) {
                let types = m.nsec3.type_set();
                // An encloser at a delegation point (NS without SOA) or a DNAME cannot
                // speak for names below it.
                if (types.contains(RecordType::NS) && !types.contains(RecordType::SOA))
                    || types.contains(RecordType::DNAME)
                {
                    return Err(ProofError::Nsec3BadEncloser(wire::name_text(&candidate)));
                }
                let Some(cover) = Self::covering(set, cache, &next_closer) else {
                    return Err(ProofError::Nsec3NoMatch {
                        what: "the next closer name",
                        name: wire::name_text(&next_closer),
                        owners: Self::describe(set),
                    });
                };
                self.signed(&m.record.name, RecordType::NSEC3)?;
                self.signed(&cover.record.name, RecordType::NSEC3)?;
                return Ok((candidate, cover));
            }
            next_closer = candidate;
        }
        Err(ProofError::Nsec3NoMatch {
            what: "a closest encloser of",
            name: wire::name_text(self.name),
            owners: Self::describe(set),
        })
    }

    fn nsec3_nodata(&self) -> Result<Proof, ProofError> {
        let set = self.nsec3s()?;
        let mut cache = HashMap::new();
        if let Some(m) = Self::matching(&set, &mut cache, self.name) {
            let types = m.nsec3.type_set();
            for listed in [RecordType::DS, RecordType::CNAME, RecordType::SOA] {
                if types.contains(listed) {
                    return Err(ProofError::Nsec3Lists {
                        name: wire::name_text(self.name),
                        listed,
                    });
                }
            }
            self.signed(&m.record.name, RecordType::NSEC3)?;
            return Ok(Proof::Nsec3Nodata);
        }
        // RFC 5155 section 8.6: no match, so an opt-out span must cover the next closer
        // name of a proven closest encloser (an unsigned delegation left out of the chain).
        let (closest, cover) = self.closest_encloser(&set, &mut cache)?;
        if !cover.nsec3.opt_out() {
            let next_closer = self
                .name
                .trim_to(usize::from(closest.num_labels()) + 1)
                .to_lowercase();
            return Err(ProofError::Nsec3NotOptOut(wire::name_text(&next_closer)));
        }
        Ok(Proof::Nsec3OptOut)
    }

    fn nsec3_nxdomain(&self) -> Result<Proof, ProofError> {
        let set = self.nsec3s()?;
        let mut cache = HashMap::new();
        if Self::matching(&set, &mut cache, self.name).is_some() {
            return Err(ProofError::Nsec3SaysExists(wire::name_text(self.name)));
        }
        let (closest, _) = self.closest_encloser(&set, &mut cache)?;
        let wildcard = closest
            .prepend_label("*")
            .map_err(|_| ProofError::Nsec3NoMatch {
                what: "the wildcard at",
                name: wire::name_text(&closest),
                owners: Self::describe(&set),
            })?;
        let Some(cover) = Self::covering(&set, &mut cache, &wildcard) else {
            return Err(ProofError::Nsec3NoMatch {
                what: "the wildcard",
                name: wire::name_text(&wildcard),
                owners: Self::describe(&set),
            });
        };
        self.signed(&cover.record.name, RecordType::NSEC3)?;
        Ok(Proof::Nsec3Nxdomain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Name {
        wire::parse_name(s).expect("name")
    }

    #[test]
    fn canonical_order_is_by_labels_from_the_right() {
        // RFC 4034 section 6.1's example order.
        let order = [
            "example.",
            "a.example.",
            "yljkjljk.a.example.",
            "Z.a.example.",
            "zABC.a.EXAMPLE.",
            "z.example.",
            "*.z.example.",
        ];
        for pair in order.windows(2) {
            assert_eq!(
                canonical_cmp(&n(pair[0]), &n(pair[1])),
                Ordering::Less,
                "{pair:?}"
            );
        }
    }

    #[test]
    fn spans_cover_strictly_and_wrap() {
        assert!(covers(&n("a.test."), &n("c.test."), &n("b.test.")));
        assert!(!covers(&n("a.test."), &n("c.test."), &n("a.test.")));
        assert!(!covers(&n("a.test."), &n("c.test."), &n("d.test.")));
        // The last NSEC: from z.test. back to the apex.
        assert!(covers(&n("z.test."), &n("test."), &n("zz.test.")));
        assert!(!covers(&n("z.test."), &n("test."), &n("b.test.")));
    }

    #[test]
    fn the_closest_encloser_of_a_span() {
        let name = n("a.b.child.test.");
        assert_eq!(common_labels(&name, &n("child.test.")), 2);
        assert_eq!(common_labels(&name, &n("test.")), 1);
        assert_eq!(trim(&name, 2), n("child.test."));
    }
}
