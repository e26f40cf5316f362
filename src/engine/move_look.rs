//! One look at a zone in a signed move (DESIGN.md section 2, "Signed moves"): both
//! accounts, every child address of both accounts' name servers, every parent address,
//! asked concurrently and mapped to [`signed_move::MoveLook`], the planner's input. Every
//! answer that is not known is an `Err` with its reason (rule 3: unknown never counts).

use crate::dns::delegation::ns_set;
use crate::dns::{
    ChildView, DnskeyAnswer, DsAnswer, Evidence, NsAnswer, ObserveError, Observer, ServerAnswer,
};
use crate::dnssec::{CdsHalves, Dnskey, DnssecKey};
use crate::lifecycle::signed_move::{self, Answer, ChildSeen, Delegation, MoveLook, Side};
use crate::provider::{Provider, ProviderError};
use crate::time::Clock;

/// The address an answer is filed under when the view failed before any address was
/// asked (discovery, the budget): one unknown answer, so the failure is said and holds.
pub const NO_ADDRESS: &str = "(no address)";

/// Looks at `zone` moving from `source` (its name servers `source_ns`) to `target` (its
/// name servers `target_ns`, the provider's apex NS list: nothing delegates to them
/// before the NS change, so they are asked by name, as the source's are). The look's
/// time is read from `clock` after the answers, as `engine::observe` does: a hold counted
/// from it never starts before what it confirms was seen.
pub async fn look<S: Provider, T: Provider, O: Observer>(
    source: &S,
    target: &T,
    observer: &O,
    zone: &str,
    source_ns: &[String],
    target_ns: &[String],
    clock: &dyn Clock,
) -> MoveLook {
    let (
        (source_key, target_key, source_foreign, target_foreign, source_view, target_view, parent),
        (source_cds, target_cds),
    ) = tokio::join!(
        async {
            tokio::join!(
                source.dnssec_key(zone),
                target.dnssec_key(zone),
                source.foreign_dnskeys(zone),
                target.foreign_dnskeys(zone),
                observer.child_at(zone, source_ns),
                observer.child_at(zone, target_ns),
                // Every phase's parent question decides (rule 10): validated, always.
                observer.parent_validated(zone),
            )
        },
        async { tokio::join!(source.cds_publication(zone), target.cds_publication(zone)) },
    );
    MoveLook {
        at: clock.now(),
        source_key: signing_key(source_key),
        target_key: signing_key(target_key),
        source_foreign: foreign_keys(source_foreign),
        target_foreign: foreign_keys(target_foreign),
        source_apex_ns_ttl: apex_ns_ttl(&source_view),
        source_children: children(&source_view),
        target_children: children(&target_view),
        parents: parents(parent, source_ns, target_ns),
        cds_published: cds_published(source_cds, target_cds),
    }
}

/// The accounts that publish CDS/CDNSKEY; an API that does not control them (`None`)
/// publishes none the daemon could withdraw, and counts as none. A setting half applied
/// (one half publishing) publishes: a registry may act on a CDS without its CDNSKEY, so
/// it is withdrawn like any other.
pub fn cds_published(
    source: Result<Option<CdsHalves>, ProviderError>,
    target: Result<Option<CdsHalves>, ProviderError>,
) -> Result<Vec<Side>, String> {
    let mut sides = Vec::new();
    for (side, read) in [(Side::Source, source), (Side::Target, target)] {
        if read
            .map_err(|e| format!("{}: {e}", side.name()))?
            .is_some_and(CdsHalves::publishes)
        {
            sides.push(side);
        }
    }
    Ok(sides)
}

/// The key an account signs with: `None` when DNSSEC is off there.
pub fn signing_key(read: Result<DnssecKey, ProviderError>) -> Result<Option<Dnskey>, String> {
    match read {
        Ok(key) => Ok(Some(key.dnskey)),
        Err(ProviderError::DnssecDisabled) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The foreign keys an account publishes; an account whose API cannot publish any can
/// take no part in a signed move, which is said, not read as "none".
pub fn foreign_keys(
    read: Result<Option<Vec<Dnskey>>, ProviderError>,
) -> Result<Vec<Dnskey>, String> {
    match read {
        Ok(Some(keys)) => Ok(keys),
        Ok(None) => Err("the account cannot publish another signer's DNSKEY".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// One child address's DNSKEY answer. "No DNSKEY" is known (the zone unsigned there);
/// `signed_by` is the keys whose RRSIG over the set verified within its window (rule 4).
pub fn served_keys(answer: &DnskeyAnswer) -> Result<ChildSeen, String> {
    match answer {
        DnskeyAnswer::Keys(k) => Ok(ChildSeen {
            keys: k.keys.clone(),
            signed_by: k
                .self_signers
                .iter()
                .filter_map(|&i| k.keys.get(i).cloned())
                .collect(),
            ttl: k.ttl,
        }),
        DnskeyAnswer::Absent => Ok(ChildSeen {
            keys: Vec::new(),
            signed_by: Vec::new(),
            ttl: 0,
        }),
        DnskeyAnswer::Unknown(reason) => Err(reason.to_string()),
    }
}

/// Every child address's answer; a view that failed is one unknown answer.
pub fn children(view: &Result<ChildView, ObserveError>) -> Vec<Answer<ChildSeen>> {
    match view {
        Ok(view) => view
            .answers
            .iter()
            .map(|a| Answer {
                address: a.addr.to_string(),
                answer: served_keys(&a.answer),
            })
            .collect(),
        Err(e) => vec![Answer {
            address: NO_ADDRESS.into(),
            answer: Err(e.to_string()),
        }],
    }
}

/// The largest apex NS TTL the child addresses answered (`None`: none answered).
pub fn apex_ns_ttl(view: &Result<ChildView, ObserveError>) -> Option<u32> {
    view.as_ref()
        .ok()?
        .apex_ns
        .iter()
        .filter_map(|a| match a.answer {
            NsAnswer::Servers { ttl, .. } => Some(ttl),
            _ => None,
        })
        .max()
}

/// How a parent address's NS set (an [`ns_set`]) compares with both accounts' sets:
/// only exactly one of them counts; a mix, a part or a third party's is `Other`.
pub fn delegation_of(hosts: &[String], source_ns: &[String], target_ns: &[String]) -> Delegation {
    let hosts = ns_set(hosts);
    if hosts == ns_set(source_ns) {
        Delegation::Source
    } else if hosts == ns_set(target_ns) {
        Delegation::Target
    } else {
        Delegation::Other
    }
}

/// One parent address: its DS answer and the NS answer asked beside it, both known, or
/// why not.
fn parent_answer(
    ds: &DsAnswer,
    ns: Option<&NsAnswer>,
    validated: bool,
    source_ns: &[String],
    target_ns: &[String],
) -> Result<signed_move::ParentSeen, String> {
    let (ds, ds_ttl) = match ds {
        DsAnswer::Present { ds, ttl } => (ds.clone(), Some(*ttl)),
        DsAnswer::Absent => (Vec::new(), None),
        DsAnswer::Unknown(reason) => return Err(format!("DS unknown: {reason}")),
    };
    let (delegation, ns_ttl) = match ns {
        Some(NsAnswer::Servers { hosts, ttl }) => {
            (delegation_of(hosts, source_ns, target_ns), Some(*ttl))
        }
        // Authoritatively delegated nowhere: to neither account.
        Some(NsAnswer::NotDelegated) => (Delegation::Other, None),
        Some(NsAnswer::Unknown(reason)) => return Err(format!("delegation unknown: {reason}")),
        None => return Err("delegation unknown: no NS answer from this address".into()),
    };
    Ok(signed_move::ParentSeen {
        ds,
        ds_ttl,
        delegation,
        ns_ttl,
        validated,
    })
}

/// Every parent address's answer; a view that failed is one unknown answer. Validated
/// only on [`Evidence::Validated`]: an insecure parent's answers are authoritative, not
/// validated (rule 10).
pub fn parents(
    view: Result<crate::dns::ParentView, ObserveError>,
    source_ns: &[String],
    target_ns: &[String],
) -> Vec<Answer<signed_move::ParentSeen>> {
    let view = match view {
        Ok(view) => view,
        Err(e) => {
            return vec![Answer {
                address: NO_ADDRESS.into(),
                answer: Err(e.to_string()),
            }];
        }
    };
    let validated = matches!(view.evidence, Evidence::Validated);
    let ns_of = |a: &ServerAnswer<DsAnswer>| {
        view.delegations
            .iter()
            .find(|d| d.addr == a.addr && d.server == a.server)
            .map(|d| &d.answer)
    };
    view.answers
        .iter()
        .map(|a| Answer {
            address: a.addr.to_string(),
            answer: parent_answer(&a.answer, ns_of(a), validated, source_ns, target_ns),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::sync::Arc;

    use super::*;
    use crate::dns::{ChildKeys, ParentView, UnknownReason};
    use crate::dnssec::{DigestType, test_key};

    const ZONE: &str = "m.test.";

    fn src_ns() -> Vec<String> {
        vec!["ns1.src.test.".into(), "NS2.src.test".into()]
    }

    fn dst_ns() -> Vec<String> {
        vec!["ns1.dst.test.".into(), "ns2.dst.test.".into()]
    }

    fn at<A>(i: u8, answer: A) -> ServerAnswer<A> {
        ServerAnswer {
            server: Arc::from(format!("{}.nic.test.", char::from(b'a' + i))),
            addr: IpAddr::from([127, 0, 0, i + 1]),
            answer,
        }
    }

    fn servers(hosts: &[&str], ttl: u32) -> NsAnswer {
        NsAnswer::Servers {
            hosts: ns_set(hosts).into(),
            ttl,
        }
    }

    fn parent_view(
        answers: Vec<DsAnswer>,
        delegations: Vec<NsAnswer>,
        evidence: Evidence,
    ) -> ParentView {
        ParentView {
            zone: ZONE.into(),
            parent: "test.".into(),
            answers: answers
                .into_iter()
                .enumerate()
                .map(|(i, a)| at(i as u8, a))
                .collect(),
            delegations: delegations
                .into_iter()
                .enumerate()
                .map(|(i, a)| at(i as u8, a))
                .collect(),
            evidence,
        }
    }

    /// A CDS setting half applied at an account publishes (one half is enough for a
    /// registry that scans): the move withdraws it, instead of holding on an error for
    /// ever. What the API cannot read stays unknown.
    #[test]
    fn a_half_applied_cds_setting_counts_as_published() {
        use crate::dnssec::CdsPublication;
        let half = CdsHalves {
            cds: CdsPublication::Key,
            cdnskey: CdsPublication::Nothing,
        };
        let none = CdsHalves::whole(CdsPublication::Nothing);
        assert_eq!(
            cds_published(Ok(Some(half)), Ok(Some(none))),
            Ok(vec![Side::Source])
        );
        let withdrawn_half = CdsHalves {
            cds: CdsPublication::Nothing,
            cdnskey: CdsPublication::Delete,
        };
        assert_eq!(
            cds_published(Ok(None), Ok(Some(withdrawn_half))),
            Ok(vec![Side::Target])
        );
        assert_eq!(cds_published(Ok(Some(none)), Ok(None)), Ok(vec![]));
        assert!(cds_published(Err(ProviderError::Invalid("x".into())), Ok(None)).is_err());
    }

    #[test]
    fn the_delegation_is_an_account_only_when_it_is_exactly_its_set() {
        let (s, t) = (src_ns(), dst_ns());
        assert_eq!(
            delegation_of(&ns_set(["ns2.src.test.", "ns1.src.test."]), &s, &t),
            Delegation::Source
        );
        assert_eq!(
            delegation_of(&ns_set(["NS1.dst.test", "ns2.dst.test."]), &s, &t),
            Delegation::Target
        );
        // A mix of both, a part of one, a third party's: neither.
        assert_eq!(
            delegation_of(&ns_set(["ns1.src.test.", "ns1.dst.test."]), &s, &t),
            Delegation::Other
        );
        assert_eq!(
            delegation_of(&ns_set(["ns1.src.test."]), &s, &t),
            Delegation::Other
        );
        assert_eq!(
            delegation_of(&ns_set(["ns1.other.test."]), &s, &t),
            Delegation::Other
        );
    }

    #[test]
    fn parent_answers_map_with_their_ttls_and_unknowns_stay_unknown() {
        let ks = test_key();
        let ds = vec![ks.to_ds(ZONE, DigestType::Sha256).unwrap()];
        let view = parent_view(
            vec![
                DsAnswer::Present {
                    ds: ds.clone(),
                    ttl: 86400,
                },
                DsAnswer::Absent,
                DsAnswer::Unknown(UnknownReason::Timeout),
                DsAnswer::Present {
                    ds: ds.clone(),
                    ttl: 7200,
                },
            ],
            vec![
                servers(&["ns1.src.test.", "ns2.src.test."], 3600),
                servers(&["ns1.dst.test.", "ns2.dst.test."], 600),
                servers(&["ns1.src.test.", "ns2.src.test."], 3600),
                NsAnswer::Unknown(UnknownReason::Refused),
            ],
            Evidence::Validated,
        );
        let got = parents(Ok(view), &src_ns(), &dst_ns());
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].address, "127.0.0.1");
        assert_eq!(
            got[0].answer,
            Ok(signed_move::ParentSeen {
                ds: ds.clone(),
                ds_ttl: Some(86400),
                delegation: Delegation::Source,
                ns_ttl: Some(3600),
                validated: true,
            })
        );
        assert_eq!(
            got[1].answer,
            Ok(signed_move::ParentSeen {
                ds: vec![],
                ds_ttl: None,
                delegation: Delegation::Target,
                ns_ttl: Some(600),
                validated: true,
            })
        );
        // An unknown DS, or an unknown delegation beside a known DS: the address is
        // unknown, never half-counted.
        assert!(matches!(&got[2].answer, Err(e) if e.contains("DS") && e.contains("timeout")));
        assert!(
            matches!(&got[3].answer, Err(e) if e.contains("delegation") && e.contains("refused"))
        );
    }

    #[test]
    fn only_validated_evidence_is_validated() {
        for (evidence, validated) in [
            (Evidence::Validated, true),
            (Evidence::Insecure("no DS for test.".into()), false),
            (Evidence::Unchecked, false),
        ] {
            let view = parent_view(
                vec![DsAnswer::Absent],
                vec![servers(&["ns1.src.test.", "ns2.src.test."], 2)],
                evidence.clone(),
            );
            let got = parents(Ok(view), &src_ns(), &dst_ns());
            assert!(
                matches!(&got[0].answer, Ok(p) if p.validated == validated),
                "{evidence:?}: {got:?}"
            );
        }
    }

    #[test]
    fn a_parent_address_without_an_ns_answer_and_a_failed_view_are_unknown() {
        let view = parent_view(
            vec![DsAnswer::Absent, DsAnswer::Absent],
            vec![NsAnswer::NotDelegated],
            Evidence::Validated,
        );
        let got = parents(Ok(view), &src_ns(), &dst_ns());
        assert!(matches!(&got[0].answer, Ok(p) if p.delegation == Delegation::Other));
        assert!(got[1].answer.is_err(), "{got:?}");

        let failed = parents(
            Err(ObserveError {
                zone: ZONE.into(),
                reason: "no parent zone found".into(),
            }),
            &src_ns(),
            &dst_ns(),
        );
        assert_eq!(failed.len(), 1);
        assert!(matches!(&failed[0].answer, Err(e) if e.contains("no parent zone found")));
    }

    #[test]
    fn served_keys_are_signed_only_by_the_self_signers() {
        let (ks, kt) = (test_key(), test_key());
        let answer = DnskeyAnswer::Keys(ChildKeys {
            keys: vec![ks.clone(), kt.clone()],
            ttl: 300,
            signed: true,
            self_signers: vec![1, 7],
            signatures: vec![],
            signals: Default::default(),
        });
        assert_eq!(
            served_keys(&answer),
            Ok(ChildSeen {
                keys: vec![ks, kt.clone()],
                signed_by: vec![kt],
                ttl: 300,
            })
        );
        assert_eq!(
            served_keys(&DnskeyAnswer::Absent).map(|s| s.keys.len()),
            Ok(0)
        );
        assert!(matches!(
            served_keys(&DnskeyAnswer::Unknown(UnknownReason::Servfail)),
            Err(e) if e.contains("servfail")
        ));
    }

    #[test]
    fn children_and_the_apex_ns_ttl_come_from_every_address() {
        let view = ChildView {
            zone: ZONE.into(),
            answers: vec![
                at(0, DnskeyAnswer::Unknown(UnknownReason::Timeout)),
                at(1, DnskeyAnswer::Absent),
            ],
            apex_ns: vec![
                at(0, NsAnswer::Unknown(UnknownReason::Timeout)),
                at(1, servers(&["ns1.src.test."], 3600)),
                at(2, servers(&["ns1.src.test."], 86400)),
            ],
        };
        let view = Ok(view);
        let got = children(&view);
        assert_eq!(got.len(), 2);
        assert!(got[0].answer.is_err());
        assert_eq!(got[1].address, "127.0.0.2");
        assert_eq!(apex_ns_ttl(&view), Some(86400));
        let none = Ok(ChildView {
            zone: ZONE.into(),
            answers: vec![],
            apex_ns: vec![at(0, NsAnswer::Unknown(UnknownReason::Timeout))],
        });
        assert_eq!(apex_ns_ttl(&none), None);
        let failed = Err(ObserveError {
            zone: ZONE.into(),
            reason: "no name servers to ask".into(),
        });
        assert_eq!(apex_ns_ttl(&failed), None);
        assert!(
            matches!(&children(&failed)[..], [a] if a.address == NO_ADDRESS && a.answer.is_err())
        );
    }

    #[test]
    fn account_reads_map_off_to_none_and_no_capability_to_an_error() {
        assert_eq!(signing_key(Err(ProviderError::DnssecDisabled)), Ok(None));
        assert!(signing_key(Err(ProviderError::NotFound("m.test.".into()))).is_err());
        let key = test_key();
        assert_eq!(foreign_keys(Ok(Some(vec![key.clone()]))), Ok(vec![key]));
        assert!(matches!(foreign_keys(Ok(None)), Err(e) if e.contains("cannot publish")));
    }
}
