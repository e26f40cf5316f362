//! Unknown never counts: the real observer (and `dnssec-warden check`) against a scripted
//! authoritative world on loopback (the test-support crate's `scripted_dns`), whose
//! servers are silent, refusing, lame, truncated, self-contradicting or answer with the
//! wrong records.

use std::net::{IpAddr, Ipv4Addr};

use dnssec_warden::dns::delegation::{self, ns_set};
use dnssec_warden::dns::observe::observer::{DS_FAILS_VALIDATION, DS_VALIDATES_AGAIN};
use dnssec_warden::dns::{
    DelegationVerdict, DnsObserver, DnskeyAnswer, DsAnswer, DsyncAnswer, DsyncVerdict, Evidence,
    NsAnswer, Observer, ParentDsVerdict, ParentView, ServerAnswer, SignalsVerdict, UnknownReason,
    ValidationVerdict,
};
use dnssec_warden::dnssec::{DigestType, Dnskey, Ds};
use dnssec_warden_lab::keys::LabKey;
use dnssec_warden_test_support::logs;
use dnssec_warden_test_support::scripted_dns::{
    Behaviour, CHILD_1, CHILD_2, ELSEWHERE, ELSEWHERE_HOST, Nsec3Script, ScriptedDns, Servers,
    Signer, TLD_A, TLD_B, ZONE, check_json,
};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, RecordType};

async fn world() -> (ScriptedDns, DnsObserver) {
    let dns = ScriptedDns::start().await;
    let observer = DnsObserver::new(&dns.settings()).expect("observer");
    (dns, observer)
}

fn ds_at(view: &ParentView, ip: Ipv4Addr) -> DsAnswer {
    view.answers
        .iter()
        .find(|a| a.addr == IpAddr::from(ip))
        .map(|a| a.answer.clone())
        .unwrap_or_else(|| panic!("no answer from {ip}: {view:?}"))
}

async fn parent_verdict(observer: &DnsObserver) -> ParentDsVerdict {
    let parent = observer.parent(ZONE).await.expect("parent view");
    let child = observer.child(ZONE).await.expect("child view");
    parent.verdict(&child.served_keys())
}

/// The zone's key (its SEP key) as some child address serves it.
fn zone_key(child: &dnssec_warden::dns::ChildView) -> Dnskey {
    child
        .answers
        .iter()
        .find_map(|a| match &a.answer {
            DnskeyAnswer::Keys(k) => k.keys.iter().find(|k| k.is_sep()).cloned(),
            _ => None,
        })
        .expect("the zone's key")
}

fn advice(json: &serde_json::Value) -> String {
    json["advice"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_world_answers_normally_secure_and_all_match() {
    let (_dns, observer) = world().await;
    assert_eq!(parent_verdict(&observer).await, ParentDsVerdict::AllMatch);
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Secure, "{probes:?}");
}

/// One look at a signed zone (the parent view, the child view and the validation probe,
/// asked together as the engine asks them) sends each question once: the probe's DS and
/// DNSKEY questions share the views' exchanges; only its SOA is its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_look_asks_each_question_once() {
    let (dns, observer) = world().await;
    // Cuts and the parent's keys established once, as a running daemon has them.
    observer.validation(ZONE).await;
    // Answers held back, so that what one look asks together is in flight together
    // (identical questions are shared only while in flight, by design).
    dns.set_answer_delay(std::time::Duration::from_millis(200));
    let before = observer.stats();
    observer.parent(ZONE).await.expect("parent view");
    let parent_alone = observer.stats().exchanges - before.exchanges;
    let before = observer.stats();
    let child = observer.child(ZONE).await.expect("child view");
    let child_alone = observer.stats().exchanges - before.exchanges;
    let child_addresses = child.answers.len() as u64;
    let before = observer.stats();
    let (parent, child, probes) = futures::join!(
        observer.parent(ZONE),
        observer.child(ZONE),
        observer.validation(ZONE)
    );
    let look = observer.stats().exchanges - before.exchanges;
    assert!(parent.is_ok() && child.is_ok());
    assert_eq!(probes[0].verdict, ValidationVerdict::Secure, "{probes:?}");
    assert_eq!(
        look,
        parent_alone + child_alone + child_addresses,
        "DS and NS at each parent address, DNSKEY and NS at each child address, and the probe's SOA at each child address"
    );
}

/// A child outage is no wrong DS: the parent serves the right DS, every child address is
/// silent, REFUSED, lame (up or sideways) or has no address. Nothing is known about the
/// child, so nothing is a mismatch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_outage_is_unknown_never_a_wrong_ds() {
    let (dns, observer) = world().await;
    dns.add_unreachable_child_server("ns3.nowhere.test.");
    for behaviour in [
        Behaviour::Silent,
        Behaviour::Rcode(ResponseCode::Refused),
        Behaviour::LameUp,
        Behaviour::LameSideways,
    ] {
        dns.script(Servers::Child, None, behaviour.clone());
        let child = observer.child(ZONE).await.expect("child view");
        assert_eq!(child.answers.len(), 3, "{child:?}");
        assert!(
            child
                .answers
                .iter()
                .all(|a| matches!(a.answer, DnskeyAnswer::Unknown(_))),
            "{behaviour:?}: {child:?}"
        );
        assert_eq!(
            parent_verdict(&observer).await,
            ParentDsVerdict::Unknown,
            "{behaviour:?}: a child outage is not a wrong DS"
        );
    }
    // Through the binary: one child server silent, one refusing, one without address.
    dns.script(Servers::One(CHILD_1), None, Behaviour::Silent);
    dns.script(
        Servers::One(CHILD_2),
        None,
        Behaviour::Rcode(ResponseCode::Refused),
    );
    let dir = tempfile::tempdir().expect("dir");
    let (code, json) = check_json(&dns.config_file(dir.path()), ZONE).await;
    assert_eq!(json["parent_ds"], "unknown", "{json:#}");
    assert_ne!(code, 0);
    let advice = advice(&json);
    assert!(!advice.contains("OUTAGE"), "{advice}");
    assert!(
        json["parent_ds_reasons"]
            .as_array()
            .is_some_and(|r| r.iter().any(|v| v == "child_unknown")),
        "{json:#}"
    );
}

/// The other side: one child address answers with its key set, the DS matches
/// nothing in it: a mismatch is certain even while the other child address is silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ds_beside_a_silent_child_server_is_still_a_mismatch() {
    let (dns, observer) = world().await;
    let other = LabKey::generate(257).expect("key");
    dns.set_ds(
        Servers::Tld,
        vec![
            Dnskey::from(other.dnskey())
                .to_ds(ZONE, DigestType::Sha256)
                .expect("digest"),
        ],
    );
    dns.script(Servers::One(CHILD_2), None, Behaviour::Silent);
    assert_eq!(parent_verdict(&observer).await, ParentDsVerdict::Mismatch);
}

/// An answer tied to our question: a NODATA without a question section is tied to our
/// question by its ID alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodata_without_question_is_unknown() {
    let (dns, observer) = world().await;
    dns.script(
        Servers::One(TLD_A),
        Some(RecordType::DS),
        Behaviour::NodataNoQuestion,
    );
    let view = observer.parent(ZONE).await.expect("parent view");
    assert!(
        matches!(
            ds_at(&view, TLD_A),
            DsAnswer::Unknown(UnknownReason::Malformed(ref d)) if d.contains("question")
        ),
        "{view:?}"
    );
    assert!(matches!(ds_at(&view, TLD_B), DsAnswer::Present { .. }));
    assert_eq!(parent_verdict(&observer).await, ParentDsVerdict::Unknown);
}

/// The allowed case: FORMERR and NOTIMP may come back without the question; they
/// are unknown for their RCODE, not for a mismatch of questions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notimp_without_question_is_unknown_for_its_rcode() {
    let (dns, observer) = world().await;
    dns.script(
        Servers::One(TLD_A),
        Some(RecordType::DS),
        Behaviour::RcodeNoQuestion(ResponseCode::NotImp),
    );
    let view = observer.parent(ZONE).await.expect("parent view");
    assert_eq!(
        ds_at(&view, TLD_A),
        DsAnswer::Unknown(UnknownReason::Rcode(4)),
        "{view:?}"
    );
}

/// TC=1 over TCP: the answer is incomplete, so a NODATA in it is no "no DS".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_answer_over_tcp_is_unknown() {
    let (dns, observer) = world().await;
    dns.script(
        Servers::One(TLD_B),
        Some(RecordType::DS),
        Behaviour::TruncatedOverTcp,
    );
    let view = observer.parent(ZONE).await.expect("parent view");
    assert!(
        matches!(
            ds_at(&view, TLD_B),
            DsAnswer::Unknown(UnknownReason::Malformed(ref d)) if d.contains("TCP")
        ),
        "{view:?}"
    );
    assert_eq!(parent_verdict(&observer).await, ParentDsVerdict::Unknown);
}

/// A DNSKEY answer holding other records (a CNAME at the apex, DNSKEYs of another
/// name) plus the SOA is no "unsigned", and the zone is not "cleanly insecure".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dnskey_answer_with_other_records_is_unknown_not_unsigned() {
    for behaviour in [Behaviour::CnameAtName, Behaviour::ForeignOwner] {
        let (dns, observer) = world().await;
        dns.set_ds(Servers::Tld, Vec::new());
        dns.script(Servers::Child, Some(RecordType::DNSKEY), behaviour.clone());
        let child = observer.child(ZONE).await.expect("child view");
        assert!(
            child
                .answers
                .iter()
                .all(|a| matches!(a.answer, DnskeyAnswer::Unknown(UnknownReason::Malformed(_)))),
            "{behaviour:?}: {child:?}"
        );
        assert!(!child.all_unsigned());
        let dir = tempfile::tempdir().expect("dir");
        let (_, json) = check_json(&dns.config_file(dir.path()), ZONE).await;
        assert_eq!(json["parent_ds"], "all_absent", "{json:#}");
        let advice = advice(&json);
        assert!(!advice.contains("cleanly insecure"), "{advice}");
        assert!(
            json["child"]["answers"]
                .as_array()
                .is_some_and(|a| a.iter().all(|a| a["answer"]["kind"] == "unknown")),
            "{json:#}"
        );
    }
}

/// A DS set with only unsupported algorithms or digest types makes the zone
/// insecure to validators; it is not an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ds_set_nothing_supports_is_insecure_not_an_outage() {
    let (dns, observer) = world().await;
    let good = dns.child_ds();
    let unsupported = vec![
        // A digest type nobody implements, for the right key.
        Ds {
            digest_type: 99,
            ..good.clone()
        },
        // A private algorithm.
        Ds {
            algorithm: 253,
            ..good
        },
    ];
    dns.set_ds(Servers::Tld, unsupported);
    let dir = tempfile::tempdir().expect("dir");
    let (code, json) = check_json(&dns.config_file(dir.path()), ZONE).await;
    assert_ne!(json["parent_ds"], "mismatch", "{json:#}");
    let advice = advice(&json);
    assert!(!advice.contains("OUTAGE"), "{advice}");
    assert!(advice.contains("insecure"), "{advice}");
    assert_eq!(json["validation"], "insecure", "{json:#}");
    assert!(
        json["parent_ds_reasons"]
            .as_array()
            .is_some_and(|r| r.iter().any(|v| v == "no_supported_ds")),
        "{json:#}"
    );
    assert_ne!(code, 0, "not a chain of trust: the operator has to act");
    assert_eq!(
        ["all_match", "all_absent", "partial", "mismatch", "unknown"]
            .iter()
            .filter(|v| json["parent_ds"] == **v)
            .count(),
        1,
        "the verdict keeps to the contract"
    );
    // The observer's own verdict says the same.
    assert_eq!(parent_verdict(&observer).await, ParentDsVerdict::Unknown);
}

/// A parent server that refers the zone to its name servers and answers
/// NXDOMAIN for its DS contradicts itself: unknown, not "no DS".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nxdomain_for_the_ds_after_a_referral_is_a_contradiction() {
    let (dns, observer) = world().await;
    dns.set_ds(Servers::Tld, Vec::new());
    dns.script(
        Servers::One(TLD_A),
        Some(RecordType::DS),
        Behaviour::Nxdomain,
    );
    let view = observer.parent(ZONE).await.expect("parent view");
    assert!(
        matches!(
            ds_at(&view, TLD_A),
            DsAnswer::Unknown(UnknownReason::Contradiction(_))
        ),
        "{view:?}"
    );
    assert_eq!(ds_at(&view, TLD_B), DsAnswer::Absent);
    assert!(!view.all_absent());
}

/// Error messages name what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_what_is_wrong() {
    let (dns, observer) = world().await;
    dns.add_unreachable_child_server("ns3.nowhere.test.");
    // A DNSKEY with protocol 2.
    dns.script(
        Servers::One(CHILD_1),
        Some(RecordType::DNSKEY),
        Behaviour::DnskeyProtocol(2),
    );
    let child = observer.child(ZONE).await.expect("child view");
    let at_1 = child
        .answers
        .iter()
        .find(|a| a.addr == IpAddr::from(CHILD_1))
        .expect("answer");
    let text = match &at_1.answer {
        DnskeyAnswer::Unknown(reason) => reason.to_string(),
        other => panic!("{other:?}"),
    };
    assert!(
        text.contains("DNSKEY") && text.contains("protocol 2 (must be 3)"),
        "{text}"
    );

    // A server without any address: the reason is said, never an empty detail.
    let unaddressed = child
        .answers
        .iter()
        .find(|a| &*a.server == "ns3.nowhere.test.")
        .expect("the unaddressed server counts");
    match &unaddressed.answer {
        DnskeyAnswer::Unknown(UnknownReason::NoAddress(detail)) => {
            assert!(detail.contains("nowhere.test."), "{detail}");
        }
        other => panic!("{other:?}"),
    }

    // Name server lookups nesting too deep: said so, not "the zone has no server address".
    dns.delegate("deep.test.", &["ns.d1.test."]);
    for i in 1..=6 {
        dns.delegate(&format!("d{i}.test."), &[&format!("ns.d{}.test.", i + 1)]);
    }
    let err = observer
        .parent("below.deep.test.")
        .await
        .expect_err("nothing answers below deep.test.");
    assert!(err.reason.contains("too deep"), "{err}");
}

/// The validator asks every parent address, not the first that answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_rests_on_every_parent_address() {
    // The second TLD server publishes a DS for another key: resolvers asking it fail.
    let (dns, observer) = world().await;
    let other = LabKey::generate(257).expect("key");
    dns.set_ds(
        Servers::One(TLD_B),
        vec![
            Dnskey::from(other.dnskey())
                .to_ds(ZONE, DigestType::Sha256)
                .expect("digest"),
        ],
    );
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Bogus, "{probes:?}");

    // The first TLD server is silent for the DS: nothing is decided on the other alone.
    let (dns, observer) = world().await;
    dns.script(Servers::One(TLD_A), Some(RecordType::DS), Behaviour::Silent);
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Unknown, "{probes:?}");
}

// Delegation awareness (safety rule 9): whom each parent address sends
// resolvers to, asked beside the DS; unknown never counts.

/// The child's own NS set, as the TLD delegates it by default.
fn child_ns() -> Vec<String> {
    ns_set(["ns1.child.test.", "ns2.child.test."])
}

fn ns_at(answers: &[ServerAnswer<NsAnswer>], ip: Ipv4Addr) -> NsAnswer {
    answers
        .iter()
        .find(|a| a.addr == IpAddr::from(ip))
        .map(|a| a.answer.clone())
        .unwrap_or_else(|| panic!("no NS answer from {ip}: {answers:?}"))
}

fn verdict_against(view: &ParentView, provider_ns: &[String]) -> DelegationVerdict {
    delegation::assess(&view.delegations, Some(provider_ns)).verdict
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_referral_at_each_parent_address_is_its_delegation() {
    let (_dns, observer) = world().await;
    let view = observer.parent(ZONE).await.expect("parent view");
    assert_eq!(view.delegations.len(), view.answers.len(), "{view:?}");
    for (ds, ns) in view.answers.iter().zip(&view.delegations) {
        assert_eq!((&ds.server, ds.addr), (&ns.server, ns.addr), "same order");
    }
    for tld in [TLD_A, TLD_B] {
        assert_eq!(
            ns_at(&view.delegations, tld),
            NsAnswer::Servers {
                hosts: child_ns().into(),
                ttl: 300
            },
            "{view:?}"
        );
    }
    assert_eq!(
        verdict_against(&view, &child_ns()),
        DelegationVerdict::Provider
    );
    assert_eq!(
        verdict_against(&view, &ns_set(["ns1.gcorelabs.net", "ns2.gcdn.services"])),
        DelegationVerdict::Foreign
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_parent_address_delegating_elsewhere_is_mixed() {
    let (dns, observer) = world().await;
    dns.script(
        Servers::One(TLD_B),
        Some(RecordType::NS),
        Behaviour::ReferTo(vec![ELSEWHERE_HOST.into()]),
    );
    let view = observer.parent(ZONE).await.expect("parent view");
    assert_eq!(
        ns_at(&view.delegations, TLD_A),
        NsAnswer::Servers {
            hosts: child_ns().into(),
            ttl: 300
        }
    );
    assert_eq!(
        ns_at(&view.delegations, TLD_B),
        NsAnswer::Servers {
            hosts: vec![ELSEWHERE_HOST.to_string()].into(),
            ttl: 300
        }
    );
    let assessment = delegation::assess(&view.delegations, Some(&child_ns()));
    assert_eq!(assessment.verdict, DelegationVerdict::Mixed);
    assert_eq!(
        assessment.elsewhere_sets(),
        vec![vec![ELSEWHERE_HOST.to_string()]]
    );
    // The DS answers are untouched by it.
    assert!(matches!(ds_at(&view, TLD_B), DsAnswer::Present { .. }));
}

/// Safety rule 3 for the delegation: a silent address leaves it unknown, even when every
/// address that answered delegates to exactly the provider's set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_parent_address_leaves_the_delegation_unknown() {
    let (dns, observer) = world().await;
    dns.script(Servers::One(TLD_B), Some(RecordType::NS), Behaviour::Silent);
    let view = observer.parent(ZONE).await.expect("parent view");
    assert_eq!(
        ns_at(&view.delegations, TLD_B),
        NsAnswer::Unknown(UnknownReason::Timeout)
    );
    assert!(matches!(
        ns_at(&view.delegations, TLD_A),
        NsAnswer::Servers { .. }
    ));
    assert_eq!(
        verdict_against(&view, &child_ns()),
        DelegationVerdict::Unknown
    );
    assert_eq!(
        delegation::assess(&view.delegations, None).verdict,
        DelegationVerdict::Unknown,
        "no provider set: unknown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authoritative_nxdomain_is_not_delegated() {
    let (dns, observer) = world().await;
    // The cut is found (and cached) first: a parent denying the zone everywhere would
    // end discovery itself.
    observer.parent(ZONE).await.expect("parent view");
    dns.set_ds(Servers::One(TLD_A), Vec::new());
    dns.script(Servers::One(TLD_A), None, Behaviour::Nxdomain);
    let view = observer.parent(ZONE).await.expect("parent view");
    assert_eq!(ns_at(&view.delegations, TLD_A), NsAnswer::NotDelegated);
    assert_eq!(ds_at(&view, TLD_A), DsAnswer::Absent, "{view:?}");
    let assessment = delegation::assess(&view.delegations, Some(&child_ns()));
    assert_eq!(assessment.verdict, DelegationVerdict::Mixed);
    assert_eq!(assessment.servers[0].delegates_to, Some(Vec::new()));
}

/// The existing contradiction (NXDOMAIN for the DS, a referral for the NS) rests on the
/// one NS question asked at each address: four questions per view, not five, and the
/// delegation of that address is not believed either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contradiction_reuses_the_one_ns_answer() {
    let (dns, observer) = world().await;
    observer.parent(ZONE).await.expect("parent view");
    dns.set_ds(Servers::Tld, Vec::new());
    dns.script(
        Servers::One(TLD_A),
        Some(RecordType::DS),
        Behaviour::Nxdomain,
    );
    let before = observer.stats();
    let view = observer.parent(ZONE).await.expect("parent view");
    let after = observer.stats();
    assert_eq!(
        after.exchanges - before.exchanges,
        4,
        "DS and NS once at each of two addresses"
    );
    assert!(matches!(
        ds_at(&view, TLD_A),
        DsAnswer::Unknown(UnknownReason::Contradiction(_))
    ));
    assert!(
        matches!(
            ns_at(&view.delegations, TLD_A),
            NsAnswer::Unknown(UnknownReason::Contradiction(_))
        ),
        "{view:?}"
    );
    assert_eq!(
        verdict_against(&view, &child_ns()),
        DelegationVerdict::Unknown
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lame_or_garbage_ns_answer_at_the_parent_is_unknown_with_its_reason() {
    let (dns, observer) = world().await;
    observer.parent(ZONE).await.expect("parent view");
    type Expected = fn(&UnknownReason) -> bool;
    let cases: Vec<(Behaviour, Expected)> = vec![
        (Behaviour::LameUp, |r| *r == UnknownReason::Lame),
        (Behaviour::LameSideways, |r| *r == UnknownReason::Lame),
        (
            Behaviour::CnameAtName,
            |r| matches!(r, UnknownReason::Malformed(d) if d.contains("CNAME")),
        ),
        (
            Behaviour::NoQuestion,
            |r| matches!(r, UnknownReason::Malformed(d) if d.contains("question")),
        ),
        (Behaviour::Rcode(ResponseCode::Refused), |r| {
            *r == UnknownReason::Refused
        }),
        (Behaviour::Rcode(ResponseCode::ServFail), |r| {
            *r == UnknownReason::Servfail
        }),
    ];
    for (behaviour, expected) in cases {
        dns.script(Servers::One(TLD_A), Some(RecordType::NS), behaviour.clone());
        let view = observer.parent(ZONE).await.expect("parent view");
        match ns_at(&view.delegations, TLD_A) {
            NsAnswer::Unknown(reason) => {
                assert!(expected(&reason), "{behaviour:?}: {reason:?}");
                assert!(!reason.to_string().is_empty());
            }
            other => panic!("{behaviour:?}: {other:?}"),
        }
        assert_eq!(
            verdict_against(&view, &child_ns()),
            DelegationVerdict::Unknown,
            "{behaviour:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apex_ns_comes_from_every_child_address() {
    let (dns, observer) = world().await;
    let child = observer.child(ZONE).await.expect("child view");
    assert_eq!(child.apex_ns.len(), child.answers.len(), "{child:?}");
    for ip in [CHILD_1, CHILD_2] {
        match ns_at(&child.apex_ns, ip) {
            NsAnswer::Servers { hosts, ttl } => {
                assert_eq!(hosts.to_vec(), child_ns());
                assert!(ttl > 0);
            }
            other => panic!("{ip}: {other:?}"),
        }
    }
    assert!(delegation::max_ttl(&child.apex_ns).is_some());
    dns.script(
        Servers::One(CHILD_1),
        Some(RecordType::NS),
        Behaviour::LameUp,
    );
    dns.script(
        Servers::One(CHILD_2),
        Some(RecordType::NS),
        Behaviour::Rcode(ResponseCode::Refused),
    );
    let child = observer.child(ZONE).await.expect("child view");
    assert_eq!(
        ns_at(&child.apex_ns, CHILD_1),
        NsAnswer::Unknown(UnknownReason::Lame)
    );
    assert_eq!(
        ns_at(&child.apex_ns, CHILD_2),
        NsAnswer::Unknown(UnknownReason::Refused)
    );
    assert_eq!(delegation::max_ttl(&child.apex_ns), None);
    // The DNSKEY answers do not depend on it.
    assert!(
        child
            .answers
            .iter()
            .all(|a| matches!(a.answer, DnskeyAnswer::Keys(_)))
    );
}

/// A re-delegation between two observations: the cached cut still names the old
/// servers, until a parent view sees the parent delegate elsewhere and forgets it; the
/// next child view then asks the new servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelegation_seen_at_the_parent_makes_the_next_child_view_follow_it() {
    let (dns, observer) = world().await;
    let addrs = |answers: &[ServerAnswer<DnskeyAnswer>]| {
        let mut a: Vec<IpAddr> = answers.iter().map(|a| a.addr).collect();
        a.sort();
        a
    };
    let old = vec![IpAddr::from(CHILD_1), IpAddr::from(CHILD_2)];
    let child = observer.child(ZONE).await.expect("child view");
    assert_eq!(addrs(&child.answers), old);
    dns.set_child_ns(&[ELSEWHERE_HOST]);
    // Still the cached delegation: nothing told the observer yet.
    let child = observer.child(ZONE).await.expect("child view");
    assert_eq!(addrs(&child.answers), old);
    let view = observer.parent(ZONE).await.expect("parent view");
    for tld in [TLD_A, TLD_B] {
        assert_eq!(
            ns_at(&view.delegations, tld),
            NsAnswer::Servers {
                hosts: vec![ELSEWHERE_HOST.to_string()].into(),
                ttl: 300
            }
        );
    }
    let child = observer.child(ZONE).await.expect("child view");
    assert_eq!(
        addrs(&child.answers),
        vec![IpAddr::from(ELSEWHERE)],
        "{child:?}"
    );
    assert_eq!(
        ns_at(&child.apex_ns, ELSEWHERE),
        NsAnswer::Servers {
            hosts: child_ns().into(),
            ttl: match ns_at(&child.apex_ns, ELSEWHERE) {
                NsAnswer::Servers { ttl, .. } => ttl,
                _ => 0,
            }
        },
        "the new server serves the zone's own apex NS"
    );
    // A delegation unchanged keeps the cache: the parent view after it asks no more
    // than DS and NS at each parent address.
    let before = observer.stats();
    observer.parent(ZONE).await.expect("parent view");
    assert_eq!(observer.stats().exchanges - before.exchanges, 4);
}

/// `check --json`: the delegation verdict, per-server detail and the provider's name
/// servers, from the provider's zone object; without a provider, unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_json_reports_the_delegation() {
    use dnssec_warden_lab::{ProviderSim, SimOptions};
    let (dns, _observer) = world().await;
    let dir = tempfile::tempdir().expect("dir");

    // No provider: no provider set, so unknown; the DS verdict is as before.
    let (_, json) = check_json(&dns.config_file(dir.path()), ZONE).await;
    assert_eq!(json["delegation"], "unknown", "{json:#}");
    assert!(json["provider_ns"].is_null(), "{json:#}");
    assert_eq!(json["parent_ds"], "all_match", "{json:#}");
    assert_eq!(
        json["delegation_servers"].as_array().map(Vec::len),
        Some(2),
        "{json:#}"
    );

    // The provider lists the child's own servers as its name servers.
    let sim = ProviderSim::start(
        "127.0.0.1:0".parse().expect("address"),
        SimOptions {
            api_keys: vec!["scripted-key".into()],
            name_servers: vec!["ns1.child.test".into(), "NS2.child.test.".into()],
            ..SimOptions::default()
        },
    )
    .await
    .expect("simulator");
    sim.handle().add_zone("child.test");
    std::fs::write(dir.path().join("api-key"), "scripted-key\n").expect("key file");
    let provider = format!(
        "[provider]\nbase_url = \"{}\"\napi_key_file = \"{}\"\nrequest_timeout = \"2s\"\nmax_attempts = 1\n",
        sim.base_url(),
        dir.path().join("api-key").display()
    );
    let conf = dns.config_file_with(dir.path(), &provider);
    let (_, json) = check_json(&conf, ZONE).await;
    assert_eq!(json["delegation"], "provider", "{json:#}");
    assert_eq!(
        json["provider_ns"],
        serde_json::json!(["ns1.child.test.", "ns2.child.test."])
    );
    assert!(
        json["delegation_servers"]
            .as_array()
            .is_some_and(|s| s.iter().all(|s| s["matches"] == "provider")),
        "{json:#}"
    );
    assert!(json["parent"]["delegations"].is_array(), "{json:#}");

    // The registrar moved the zone elsewhere: foreign, with the way in said.
    dns.set_child_ns(&[ELSEWHERE_HOST]);
    let (_, json) = check_json(&conf, ZONE).await;
    assert_eq!(json["delegation"], "foreign", "{json:#}");
    let text = advice(&json);
    assert!(
        text.contains(ELSEWHERE_HOST)
            && text.contains("ns1.child.test., ns2.child.test.")
            && text.contains("dnssec-warden enable child.test."),
        "{text}"
    );

    // One TLD server still sends resolvers to the provider: mixed, each server named.
    dns.script(
        Servers::One(TLD_A),
        Some(RecordType::NS),
        Behaviour::ReferTo(vec!["ns1.child.test.".into(), "ns2.child.test.".into()]),
    );
    let (_, json) = check_json(&conf, ZONE).await;
    assert_eq!(json["delegation"], "mixed", "{json:#}");
    let text = advice(&json);
    assert!(
        text.contains("disagree") && text.contains("a.nic.test.") && text.contains(ELSEWHERE_HOST),
        "{text}"
    );
    // The existing fields keep their meaning.
    assert!(json["parent_ds"].is_string() && json["validation"].is_string());
}

// Validated parent answers (safety rule 10).

fn bogus_reason(answer: &DsAnswer) -> Option<String> {
    match answer {
        DsAnswer::Unknown(UnknownReason::BogusProof(d)) => Some(d.clone()),
        _ => None,
    }
}

/// A signed DS, and a signed NSEC denial, are validated at every parent address; so are
/// NSEC3 denials (a match without DS, an opt-out span) made with the TLD's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_present_and_absent_are_validated() {
    let (dns, observer) = world().await;
    let view = observer
        .parent_validated(ZONE)
        .await
        .expect("validated view");
    assert_eq!(view.evidence, Evidence::Validated, "{view:?}");
    for ip in [TLD_A, TLD_B] {
        assert!(
            matches!(ds_at(&view, ip), DsAnswer::Present { ref ds, .. } if *ds == vec![dns.child_ds()]),
            "{view:?}"
        );
    }
    dns.set_ds(Servers::Tld, Vec::new());
    let view = observer
        .parent_validated(ZONE)
        .await
        .expect("validated view");
    assert_eq!(view.evidence, Evidence::Validated);
    assert!(view.all_absent(), "NSEC NODATA: {view:?}");
    for opt_out in [false, true] {
        dns.script(
            Servers::Tld,
            Some(RecordType::DS),
            Behaviour::Nsec3(Nsec3Script::valid(opt_out)),
        );
        let view = observer
            .parent_validated(ZONE)
            .await
            .expect("validated view");
        assert!(view.all_absent(), "NSEC3 opt-out {opt_out}: {view:?}");
    }
    // One walk from the anchor to the TLD's keys served every view.
    assert_eq!(observer.key_cache_stats().fetches, 1);
}

/// A parent address whose DS answer fails validation at every look is said once an
/// episode: one WARN naming the zone, the address and since when, DEBUG while it lasts,
/// one INFO when its answer validates again.
#[tokio::test]
async fn a_ds_answer_failing_validation_is_said_once_an_episode() {
    let lines = logs::capture();
    let (dns, observer) = world().await;
    dns.set_ds(Servers::Tld, vec![dns.child_ds()]);
    dns.script(
        Servers::One(TLD_A),
        Some(RecordType::DS),
        Behaviour::StripSignatures,
    );
    let count = |level: &str, words: &str| {
        let text = lines.text();
        text.lines()
            .filter(|l| l.contains(level) && l.contains(words))
            .count()
    };
    for _ in 0..4 {
        let view = observer
            .parent_validated(ZONE)
            .await
            .expect("validated view");
        assert!(bogus_reason(&ds_at(&view, TLD_A)).is_some(), "{view:?}");
    }
    assert_eq!(count("WARN", DS_FAILS_VALIDATION), 1, "{}", lines.text());
    let warn = lines.text();
    assert!(
        warn.contains(ZONE) && warn.contains(&TLD_A.to_string()) && warn.contains("since"),
        "what, where and since when: {warn}"
    );
    dns.script(Servers::One(TLD_A), Some(RecordType::DS), Behaviour::Normal);
    for _ in 0..2 {
        let view = observer
            .parent_validated(ZONE)
            .await
            .expect("validated view");
        assert!(
            matches!(ds_at(&view, TLD_A), DsAnswer::Present { .. }),
            "{view:?}"
        );
    }
    assert_eq!(count("INFO", DS_VALIDATES_AGAIN), 1, "{}", lines.text());
    assert_eq!(count("WARN", DS_FAILS_VALIDATION), 1, "{}", lines.text());
}

/// Each broken proof at one parent address is unknown with its `bogus_proof` reason,
/// never present or absent; the other address, answering properly, still validates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_broken_proof_is_unknown_with_its_reason() {
    let (dns, observer) = world().await;
    let stranger = Signer::new(LabKey::generate(257).expect("key"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as u32;
    let cases: Vec<(&str, bool, Behaviour, &str)> = vec![
        (
            "a forged unsigned NODATA",
            false,
            Behaviour::UnsignedNodata,
            "no NSEC or NSEC3 record denies the DS",
        ),
        (
            "a NODATA signed by the wrong key",
            false,
            Behaviour::Resign {
                key: Some(stranger.clone()),
                window: None,
            },
            "which is no trusted key of test.",
        ),
        (
            "an expired RRSIG over the NSEC",
            false,
            Behaviour::Resign {
                key: None,
                window: Some((now - 20 * 86400, now - 86400)),
            },
            "outside its validity window",
        ),
        (
            "a signature not valid yet",
            false,
            Behaviour::Resign {
                key: None,
                window: Some((now + 86400, now + 20 * 86400)),
            },
            "outside its validity window",
        ),
        (
            "an NSEC that does not cover the name",
            false,
            Behaviour::ProofOf("zzz.test.".into()),
            "no NSEC matches child.test.",
        ),
        (
            "an NSEC3 proof with the wrong hash parameters",
            false,
            Behaviour::Nsec3(Nsec3Script {
                record_salt: vec![0x01],
                ..Nsec3Script::valid(false)
            }),
            "no NSEC3 matches or covers",
        ),
        (
            "an NSEC3 opt-out proof with the wrong hash parameters",
            false,
            Behaviour::Nsec3(Nsec3Script {
                iterations: 0,
                record_salt: Vec::new(),
                ..Nsec3Script::valid(true)
            }),
            "no NSEC3 matches or covers",
        ),
        (
            "a DS without RRSIG",
            true,
            Behaviour::StripSignatures,
            "DS is not signed",
        ),
        (
            "a DS signed by the wrong key",
            true,
            Behaviour::Resign {
                key: Some(stranger.clone()),
                window: None,
            },
            "which is no trusted key of test.",
        ),
    ];
    for (what, present, behaviour, reason) in cases {
        dns.script(Servers::Tld, None, Behaviour::Normal);
        dns.set_ds(
            Servers::Tld,
            if present {
                vec![dns.child_ds()]
            } else {
                Vec::new()
            },
        );
        dns.script(Servers::One(TLD_A), Some(RecordType::DS), behaviour);
        let view = observer
            .parent_validated(ZONE)
            .await
            .expect("validated view");
        assert_eq!(view.evidence, Evidence::Validated, "{what}");
        let bogus = bogus_reason(&ds_at(&view, TLD_A))
            .unwrap_or_else(|| panic!("{what}: not bogus_proof: {view:?}"));
        assert!(bogus.contains(reason), "{what}: {bogus}");
        let other = ds_at(&view, TLD_B);
        assert!(
            if present {
                matches!(other, DsAnswer::Present { .. })
            } else {
                other == DsAnswer::Absent
            },
            "{what}: the honest address: {other:?}"
        );
        assert!(!view.all_absent() && view.any_unknown(), "{what}");
    }
    // The routine look believes the forged NODATA; only the validated one catches it.
    dns.set_ds(Servers::Tld, Vec::new());
    dns.script(
        Servers::One(TLD_A),
        Some(RecordType::DS),
        Behaviour::UnsignedNodata,
    );
    let routine = observer.parent(ZONE).await.expect("parent view");
    assert_eq!(routine.evidence, Evidence::Unchecked);
    assert!(routine.all_absent(), "{routine:?}");
}

/// Through the binary: `check --json` uses the validated view and says so; a bogus
/// proof shows as unknown with its reason and the advice names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_json_says_whether_the_ds_evidence_was_validated() {
    let (dns, _observer) = world().await;
    let dir = tempfile::tempdir().expect("dir");
    let config = dns.config_file(dir.path());
    let (_, json) = check_json(&config, ZONE).await;
    assert_eq!(json["evidence"], "validated", "{json:#}");
    assert_eq!(json["parent_ds"], "all_match", "{json:#}");
    dns.set_ds(Servers::Tld, Vec::new());
    dns.script(
        Servers::One(TLD_B),
        Some(RecordType::DS),
        Behaviour::UnsignedNodata,
    );
    let (code, json) = check_json(&config, ZONE).await;
    assert_ne!(code, 0);
    assert_eq!(json["parent_ds"], "unknown", "{json:#}");
    let answers = json["parent"]["answers"].to_string();
    assert!(answers.contains("bogus_proof"), "{json:#}");
    assert!(advice(&json).contains("bogus_proof"), "{json:#}");
}

/// A parent zone the chain proves unsigned: the answers stand as authoritative ones, and
/// the evidence says it is insecure and why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insecure_parent_gives_unvalidated_authoritative_answers() {
    let (dns, observer) = world().await;
    dns.set_tld_unsigned();
    let view = observer
        .parent_validated(ZONE)
        .await
        .expect("validated view");
    match &view.evidence {
        Evidence::Insecure(why) => assert!(why.contains("no DS for test."), "{why}"),
        other => panic!("not insecure: {other:?}"),
    }
    assert!(
        view.answers
            .iter()
            .all(|a| matches!(a.answer, DsAnswer::Present { .. })),
        "{view:?}"
    );
    let dir = tempfile::tempdir().expect("dir");
    let (_, json) = check_json(&dns.config_file(dir.path()), ZONE).await;
    assert_eq!(json["evidence"], "insecure", "{json:#}");
}

/// The parent's keys cannot be established (the TLD silent to DNSKEY): the validated
/// view is an error naming why, never a view; the failure is not kept for long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_keys_that_cannot_be_established_are_an_observe_error() {
    let (dns, observer) = world().await;
    dns.script(
        Servers::One(TLD_B),
        Some(RecordType::DNSKEY),
        Behaviour::Silent,
    );
    let err = observer
        .parent_validated(ZONE)
        .await
        .expect_err("no view without the parent's keys");
    assert!(
        err.reason.contains("keys of the parent zone test."),
        "{err}"
    );
    dns.script(
        Servers::One(TLD_B),
        Some(RecordType::DNSKEY),
        Behaviour::Normal,
    );
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    let view = observer
        .parent_validated(ZONE)
        .await
        .expect("validated view");
    assert_eq!(view.evidence, Evidence::Validated);
}

/// 0x20: a server that answers with the question in lower case still answers (the
/// observer falls back for that address), and the DS is still validated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_echo_the_case_still_answers() {
    let (dns, observer) = world().await;
    dns.script(Servers::Tld, None, Behaviour::LowercaseQuestion);
    let view = observer
        .parent_validated(ZONE)
        .await
        .expect("validated view");
    for ip in [TLD_A, TLD_B] {
        assert!(
            matches!(ds_at(&view, ip), DsAnswer::Present { .. }),
            "{view:?}"
        );
    }
}

/// One walk to the TLD's keys serves every zone under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parent_keys_are_fetched_once_for_many_zones() {
    let (dns, observer) = world().await;
    let zones: Vec<String> = (0..20).map(|i| format!("z{i}.test.")).collect();
    for z in &zones {
        dns.delegate(z, &["ns1.child.test.", "ns2.child.test."]);
    }
    let views = futures::future::join_all(zones.iter().map(|z| observer.parent_validated(z))).await;
    for (z, view) in zones.iter().zip(views) {
        let view = view.unwrap_or_else(|e| panic!("{z}: {e}"));
        assert!(view.all_absent(), "{z}: {view:?}");
        assert_eq!(view.evidence, Evidence::Validated);
    }
    let stats = observer.key_cache_stats();
    assert_eq!(stats.fetches, 1, "{stats:?}");
}

// The NXDOMAIN proofs, on answers made here: `proof::prove_ds` directly.

mod nxdomain_proofs {
    use dnssec_warden::dns::proof::{Proof, ProofError, prove_ds};
    use dnssec_warden::dns::validator::base32hex;
    use dnssec_warden::dns::wire::parse_name;
    use dnssec_warden::dnssec::Dnskey;
    use dnssec_warden_lab::dns::zone::sign;
    use dnssec_warden_lab::keys::LabKey;
    use dnssec_warden_test_support::scripted_dns::{hash_step, nsec3_hash};
    use hickory_proto::dnssec::Nsec3HashAlgorithm;
    use hickory_proto::dnssec::rdata::{DNSSECRData, NSEC, NSEC3};
    use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
    use hickory_proto::rr::{Name, RData, Record, RecordType};

    const SALT: &[u8] = &[0x5a, 0x17];

    fn now() -> u32 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs() as u32
    }

    fn signed(key: &LabKey, owner: &Name, rdata: RData) -> Vec<Record> {
        let zone = parse_name("test.").unwrap();
        let records = vec![Record::from_rdata(owner.clone(), 60, rdata)];
        let rtype = records[0].record_type();
        let t = now();
        let sig = sign(&records, rtype, owner, &zone, key, 60, (t - 60, t + 3600)).unwrap();
        [records, vec![sig]].concat()
    }

    /// An NSEC3 of `test.` spanning from `owner` to `next` (raw hashes).
    fn nsec3(key: &LabKey, owner: &[u8], next: &[u8], types: Vec<RecordType>) -> Vec<Record> {
        let name = parse_name("test.")
            .unwrap()
            .prepend_label(base32hex(owner))
            .unwrap();
        let rdata = RData::DNSSEC(DNSSECRData::NSEC3(NSEC3::new(
            Nsec3HashAlgorithm::SHA1,
            false,
            1,
            SALT.to_vec(),
            next.to_vec(),
            types,
        )));
        signed(key, &name, rdata)
    }

    fn h(name: &str) -> Vec<u8> {
        nsec3_hash(&parse_name(name).unwrap(), SALT, 1).unwrap()
    }

    /// An NSEC3 matching `name` with these types.
    fn matching(key: &LabKey, name: &str, types: Vec<RecordType>) -> Vec<Record> {
        let hash = h(name);
        nsec3(key, &hash, &hash_step(&hash, true), types)
    }

    /// An NSEC3 covering `name` (and little else).
    fn covering(key: &LabKey, name: &str) -> Vec<Record> {
        let hash = h(name);
        nsec3(
            key,
            &hash_step(&hash, false),
            &hash_step(&hash, true),
            vec![RecordType::A],
        )
    }

    fn nxdomain(records: Vec<Vec<Record>>) -> Message {
        let mut m = Message::new(1, MessageType::Response, OpCode::Query);
        m.metadata.authoritative = true;
        m.metadata.response_code = ResponseCode::NXDomain;
        m.authorities = records.concat();
        m
    }

    fn prove(key: &LabKey, m: &Message, name: &str) -> Result<Proof, ProofError> {
        let keys = vec![Dnskey::from(key.dnskey())];
        let budget = dnssec_warden::dns::Budget::new(Default::default());
        prove_ds(
            m,
            &parse_name(name).unwrap(),
            "test.",
            &keys,
            now(),
            &budget,
        )
    }

    fn apex() -> Vec<RecordType> {
        vec![RecordType::SOA, RecordType::NS, RecordType::DNSKEY]
    }

    /// RFC 5155 section 8.4: the closest encloser, the next closer name covered, the
    /// wildcard covered; each part missing or wrong is bogus.
    #[test]
    fn nsec3_nxdomain_needs_the_whole_closest_encloser_proof() {
        let key = LabKey::generate(257).unwrap();
        let ce = matching(&key, "test.", apex());
        let next_closer = covering(&key, "gone.test.");
        let wildcard = covering(&key, "*.test.");
        let whole = nxdomain(vec![ce.clone(), next_closer.clone(), wildcard.clone()]);
        assert_eq!(prove(&key, &whole, "gone.test."), Ok(Proof::Nsec3Nxdomain));
        // A proof for another name.
        assert!(prove(&key, &whole, "other.test.").is_err());
        let no_wildcard = nxdomain(vec![ce.clone(), next_closer.clone()]);
        assert!(
            matches!(prove(&key, &no_wildcard, "gone.test."), Err(ProofError::Nsec3NoMatch { what, .. }) if what == "the wildcard"),
        );
        let no_encloser = nxdomain(vec![next_closer.clone(), wildcard.clone()]);
        assert!(prove(&key, &no_encloser, "gone.test.").is_err());
        let no_cover = nxdomain(vec![ce.clone(), wildcard.clone()]);
        assert!(
            matches!(prove(&key, &no_cover, "gone.test."), Err(ProofError::Nsec3NoMatch { what, .. }) if what == "the next closer name"),
        );
        // Signed by another key.
        let stranger = LabKey::generate(257).unwrap();
        let forged = nxdomain(vec![ce, covering(&stranger, "gone.test."), wildcard]);
        assert!(matches!(
            prove(&key, &forged, "gone.test."),
            Err(ProofError::ProofSignature { .. })
        ));
        // A delegation point (NS without SOA) is no closest encloser for names below it.
        let below = nxdomain(vec![
            matching(&key, "child.test.", vec![RecordType::NS]),
            covering(&key, "a.child.test."),
            covering(&key, "*.child.test."),
        ]);
        assert!(matches!(
            prove(&key, &below, "a.child.test."),
            Err(ProofError::Nsec3BadEncloser(_))
        ));
    }

    fn nsec(key: &LabKey, owner: &str, next: &str, types: Vec<RecordType>) -> Vec<Record> {
        let rdata = RData::DNSSEC(DNSSECRData::NSEC(NSEC::new(
            parse_name(next).unwrap(),
            types,
        )));
        signed(key, &parse_name(owner).unwrap(), rdata)
    }

    /// RFC 4035 section 5.4: NXDOMAIN needs the name covered and the wildcard at the
    /// closest encloser covered; an NSEC from a delegation above the name proves nothing.
    #[test]
    fn nsec_nxdomain_needs_the_name_and_the_wildcard_covered() {
        let key = LabKey::generate(257).unwrap();
        let apex = nsec(&key, "test.", "a.test.", apex());
        let cover = nsec(&key, "a.test.", "m.test.", vec![RecordType::NS]);
        let whole = nxdomain(vec![apex.clone(), cover.clone()]);
        assert_eq!(prove(&key, &whole, "gone.test."), Ok(Proof::NsecNxdomain));
        let no_wildcard = nxdomain(vec![cover.clone()]);
        assert!(matches!(
            prove(&key, &no_wildcard, "gone.test."),
            Err(ProofError::NsecNoCover {
                what: "the wildcard",
                ..
            })
        ));
        assert!(matches!(
            prove(&key, &whole, "zz.test."),
            Err(ProofError::NsecNoCover {
                what: "the name",
                ..
            })
        ));
        let above = nxdomain(vec![
            apex,
            nsec(&key, "child.test.", "m.test.", vec![RecordType::NS]),
        ]);
        assert!(matches!(
            prove(&key, &above, "a.child.test."),
            Err(ProofError::AncestorDelegation { .. })
        ));
    }

    /// A verification remembered (the signature cache) never lets other data, another
    /// key or an expired signature through: only the very same inputs are taken as
    /// verified again.
    #[test]
    fn a_remembered_signature_covers_only_the_same_inputs() {
        use dnssec_warden::dns::validator::verify_rrset;
        let key = LabKey::generate(257).unwrap();
        let keys = vec![Dnskey::from(key.dnskey())];
        let owner = parse_name("cached.test.").unwrap();
        let a = |text: &str| RData::A(text.parse().unwrap());
        let records = signed(&key, &owner, a("192.0.2.1"));
        let check = |records: &[Record], keys: &[Dnskey], at: u32| {
            let budget = dnssec_warden::dns::Budget::new(Default::default());
            verify_rrset(records, &owner, RecordType::A, "test.", keys, at, &budget)
        };
        assert!(check(&records, &keys, now()).is_ok());
        assert!(
            check(&records, &keys, now()).is_ok(),
            "verified again, remembered"
        );
        // The same signature over other data.
        let mut tampered = records.clone();
        tampered[0] = Record::from_rdata(owner.clone(), 60, a("192.0.2.2"));
        assert!(check(&tampered, &keys, now()).is_err());
        // The same data and signature, with a key that did not sign it as the only one.
        let stranger = Dnskey::from(LabKey::generate(257).unwrap().dnskey());
        assert!(check(&records, &[stranger], now()).is_err());
        // Past its expiration (an hour from now), remembered or not.
        assert!(check(&records, &keys, now() + 7200).is_err());
        assert!(check(&records, &keys, now()).is_ok());
    }
}

/// Safety rule 4: a child server that serves the zone's key in a DNSKEY
/// set without a valid signature by it (stripped, by another key, expired, not yet valid)
/// does not "serve" the key; the same set with its signature does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_served_only_in_a_set_it_validly_signs() {
    let (dns, observer) = world().await;
    let child = observer.child(ZONE).await.expect("child view");
    let key = zone_key(&child);
    assert!(child.all_serve(&key), "{child:?}");
    let stranger = Signer::new(LabKey::generate(257).expect("key"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as u32;
    for (what, behaviour) in [
        ("no RRSIG", Behaviour::StripSignatures),
        (
            "an RRSIG by a stranger's key",
            Behaviour::Resign {
                key: Some(stranger),
                window: None,
            },
        ),
        (
            "an expired RRSIG",
            Behaviour::Resign {
                key: None,
                window: Some((now - 20 * 86400, now - 86400)),
            },
        ),
        (
            "an RRSIG not valid yet",
            Behaviour::Resign {
                key: None,
                window: Some((now + 86400, now + 20 * 86400)),
            },
        ),
    ] {
        dns.script(Servers::One(CHILD_1), Some(RecordType::DNSKEY), behaviour);
        let child = observer.child(ZONE).await.expect("child view");
        assert!(!child.all_serve(&key), "{what}: {child:?}");
        let lacking = child
            .lacking(&key)
            .expect("a server proven not to serve it");
        assert_eq!(lacking.addr, IpAddr::from(CHILD_1), "{what}");
        let DnskeyAnswer::Keys(keys) = &lacking.answer else {
            panic!("{what}: {lacking:?}");
        };
        assert!(keys.keys.contains(&key), "{what}: the key is in the set");
        assert!(keys.self_signers.is_empty(), "{what}: {keys:?}");
    }
    dns.script(
        Servers::One(CHILD_1),
        Some(RecordType::DNSKEY),
        Behaviour::Normal,
    );
    let child = observer.child(ZONE).await.expect("child view");
    assert!(child.all_serve(&key), "{child:?}");
}

/// KeyTrap (CVE-2023-50387): every child address answers the DNSKEY
/// question (over TCP: the answer is too large for UDP) with 300 copies of the key and
/// 300 garbage RRSIGs with its tag before the valid one, and its SOA with 450 garbage
/// RRSIGs. Unbound and BIND since their 2024 fixes give up after a few checks; so do we:
/// the look and the probe cost at most `MAX_SIGNATURE_CHECKS` each, and the verdict is
/// unknown ("validation budget exhausted"), never `secure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keytrap_child_costs_a_bounded_number_of_checks_and_is_never_secure() {
    let (dns, observer) = world().await;
    dns.script(
        Servers::Child,
        Some(RecordType::DNSKEY),
        Behaviour::KeyTrap {
            copies: 300,
            garbage: 300,
        },
    );
    dns.script(
        Servers::Child,
        Some(RecordType::SOA),
        Behaviour::KeyTrap {
            copies: 1,
            garbage: 450,
        },
    );
    let started = std::time::Instant::now();
    let child = observer.child(ZONE).await.expect("child view");
    for a in &child.answers {
        assert!(
            matches!(&a.answer, DnskeyAnswer::Unknown(r) if r.to_string().contains("validation budget exhausted")),
            "{a:?}"
        );
    }
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Unknown, "{probes:?}");
    assert!(
        probes[0].detail.contains("validation budget exhausted"),
        "{probes:?}"
    );
    // Not a timing assertion: a bound an unbounded validator misses by far (it spent
    // about 10 s of CPU an address here).
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

/// A child that repeats every record of its DNSKEY and SOA answers,
/// signed over the set without duplicates (RFC 4034 section 6.3): Unbound validates it,
/// and so do we; the key is served (one key, not two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_records_still_validate() {
    let (dns, observer) = world().await;
    dns.script(Servers::Child, None, Behaviour::Repeat);
    dns.script(Servers::Tld, Some(RecordType::DS), Behaviour::Repeat);
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Secure, "{probes:?}");
    let child = observer.child(ZONE).await.expect("child view");
    let parent = observer
        .parent_validated(ZONE)
        .await
        .expect("validated parent view");
    assert!(!parent.any_unknown(), "{parent:?}");
    assert_eq!(
        parent.verdict(&child.served_keys()),
        ParentDsVerdict::AllMatch,
        "{parent:?} {child:?}"
    );
    for a in &child.answers {
        let DnskeyAnswer::Keys(k) = &a.answer else {
            panic!("{a:?}");
        };
        let sep = k.keys.iter().find(|k| k.is_sep()).expect("the zone's key");
        assert!(k.serves(sep), "{a:?}");
    }
}

/// A right SHA-1 DS beside a wrong SHA-256 DS for the same key. RFC 4509
/// section 3 has validators ignore SHA-1 when SHA-256 is present, and Unbound answers
/// SERVFAIL ("DS hash mismatches key"): the set is a mismatch and the chain bogus, never
/// `all_match` and `secure`. The right SHA-1 alone still validates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ds_set_is_judged_by_the_digest_validators_use() {
    let (dns, observer) = world().await;
    let child = observer.child(ZONE).await.expect("child view");
    let key = zone_key(&child);
    let sha1 = key.to_ds(ZONE, DigestType::Sha1).expect("SHA-1 DS");
    let mut wrong = dns.child_ds();
    assert_eq!(wrong.digest_type, 2, "{wrong}");
    wrong.digest[0] ^= 0xff;
    dns.set_ds(Servers::Tld, vec![sha1.clone(), wrong]);
    assert_eq!(parent_verdict(&observer).await, ParentDsVerdict::Mismatch);
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Bogus, "{probes:?}");
    let parent = observer.parent_validated(ZONE).await.expect("parent view");
    assert!(!parent.all_point_at(&key), "{parent:?}");

    dns.set_ds(Servers::Tld, vec![sha1]);
    assert_eq!(parent_verdict(&observer).await, ParentDsVerdict::AllMatch);
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Secure, "{probes:?}");
}

/// The parent denies the DS with NSEC3 of 200 iterations. RFC 9276
/// section 3.2 lets validators treat it as insecure, and Unbound answers NOERROR without
/// AD: our validator says `insecure` with the reason, never `bogus` (no false outage
/// page); the evidence stays unknown for decisions (such a denial proves no "no DS"), and
/// `check` tells the operator that a disable waits on the parent's parameters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costly_nsec3_at_the_parent_is_insecure_not_bogus() {
    let (dns, observer) = world().await;
    dns.set_ds(Servers::Tld, Vec::new());
    dns.script(
        Servers::Tld,
        Some(RecordType::DS),
        Behaviour::Nsec3(Nsec3Script {
            iterations: 200,
            ..Nsec3Script::valid(false)
        }),
    );
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Insecure, "{probes:?}");
    assert!(probes[0].detail.contains("RFC 9276"), "{probes:?}");
    let parent = observer.parent_validated(ZONE).await.expect("parent view");
    assert!(
        parent.answers.iter().all(|a| matches!(
            &a.answer,
            DsAnswer::Unknown(UnknownReason::BogusProof(d)) if d.contains("200 iterations")
        )),
        "{parent:?}"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let (_, json) = check_json(&dns.config_file(dir.path()), ZONE).await;
    assert_eq!(json["validation"], "insecure", "{json}");
    let advice = advice(&json);
    assert!(advice.contains("NSEC3 iterations"), "{advice}");
    assert!(!advice.contains("bogus"), "{advice}");
}

/// A stale or unrelated root key in `dns.trust_anchor_file` (here the
/// IANA root's DS, which the lab root does not serve). It is the operator's anchor that is
/// wrong, not the domain: validation is unknown with the reason naming the file, never
/// `bogus` ("resolvers answer SERVFAIL"), and no validated evidence is claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_trust_anchor_is_a_configuration_fault_not_an_outage() {
    let (dns, _) = world().await;
    let dir = tempfile::tempdir().expect("dir");
    let anchor = dir.path().join("stale.ds");
    std::fs::write(
        &anchor,
        dnssec_warden::dns::anchor::IANA_ROOT_DS.join("\n") + "\n",
    )
    .expect("anchor written");
    let mut settings = dns.settings();
    settings.trust_anchor_file = Some(anchor);
    let observer = DnsObserver::new(&settings).expect("observer");
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Unknown, "{probes:?}");
    assert!(
        probes[0]
            .detail
            .contains("trust anchor matches no key served")
            && probes[0].detail.contains("dns.trust_anchor_file"),
        "{probes:?}"
    );
    match observer.parent_validated(ZONE).await {
        Ok(view) => assert_ne!(view.evidence, Evidence::Validated, "{view:?}"),
        Err(e) => assert!(e.to_string().contains("trust anchor"), "{e}"),
    }
    // Said once, of the configuration: the check `run` and `check-config` make.
    use dnssec_warden::dns::validator::AnchorCheck;
    let check = observer.check_trust_anchors().await;
    assert!(
        matches!(&check, AnchorCheck::Mismatch(d) if d.contains("dns.trust_anchor_file")),
        "{check:?}"
    );
    let good = DnsObserver::new(&dns.settings()).expect("observer");
    assert_eq!(good.check_trust_anchors().await, AnchorCheck::Served);
}

/// Glue that differs: both TLD servers name the same hosts, but one's glue for
/// `ns2.child.test.` points at another server (here `ns1.elsewhere.test.`'s address,
/// which serves the child zone without its key's signatures). Resolvers that parent
/// server refers fail. The disagreement is shown at that parent address (its delegation
/// unknown: the rules that need it wait), the child addresses asked are the union of
/// every parent's glue, and `check` is not "consistent".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glue_that_differs_between_parent_servers_is_seen_and_asked() {
    let (dns, observer) = world().await;
    dns.script(
        Servers::One(TLD_B),
        None,
        Behaviour::Glue("ns2.child.test.".into(), ELSEWHERE),
    );
    dns.script(
        Servers::One(ELSEWHERE),
        Some(RecordType::DNSKEY),
        Behaviour::StripSignatures,
    );
    let parent = observer.parent(ZONE).await.expect("parent view");
    let at_b = ns_at(&parent.delegations, TLD_B);
    assert!(
        matches!(&at_b, NsAnswer::Unknown(UnknownReason::GlueDiffers(d)) if d.contains("ns2.child.test.")),
        "{at_b:?}"
    );
    assert!(
        matches!(ns_at(&parent.delegations, TLD_A), NsAnswer::Servers { .. }),
        "{parent:?}"
    );
    let child = observer.child(ZONE).await.expect("child view");
    assert!(
        child
            .answers
            .iter()
            .any(|a| a.addr == IpAddr::from(ELSEWHERE)),
        "the union of the glue is asked: {child:?}"
    );
    let key = zone_key(&child);
    assert!(!child.all_serve(&key), "{child:?}");

    let dir = tempfile::tempdir().expect("dir");
    let (_, json) = check_json(&dns.config_file(dir.path()), ZONE).await;
    assert_eq!(json["consistent"], false, "{json:#}");
    assert!(advice(&json).contains("glue"), "{json:#}");
}

/// A server that answers FORMERR (without an OPT) to every
/// query with EDNS. RFC 6891 sections 7 and 6.2.2: it does not implement EDNS, and may be
/// asked again without; Unbound does so ("attempt without EDNS"). Without EDNS there is
/// no DO bit, so its answers carry no RRSIGs: what needs them is unknown, never proven,
/// never `secure`, never "gone", and a key it serves is never "not served" for it. It
/// is remembered for a while (no FORMERR again), and a UDP answer without EDNS that is
/// truncated (512 bytes) is fetched over TCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_edns_is_asked_without_it_and_proves_nothing() {
    let (dns, observer) = world().await;
    dns.script(
        Servers::One(TLD_A),
        None,
        Behaviour::NoEdns {
            truncated_over_udp: false,
        },
    );
    // The DS itself needs no DO: the routine (unvalidated) look sees it.
    let view = observer.parent(ZONE).await.expect("parent view");
    assert!(
        matches!(ds_at(&view, TLD_A), DsAnswer::Present { ref ds, .. } if *ds == vec![dns.child_ds()]),
        "{view:?}"
    );
    assert!(
        matches!(ns_at(&view.delegations, TLD_A), NsAnswer::Servers { .. }),
        "{view:?}"
    );
    let refused = dns.edns_refusals();
    assert!(refused > 0, "never asked with EDNS first");
    // Remembered: asked without EDNS at once.
    observer.parent(ZONE).await.expect("parent view");
    assert_eq!(
        dns.edns_refusals(),
        refused,
        "asked with EDNS again at once"
    );
    // Nothing of the TLD validates through it: its DNSKEY set comes without signatures.
    let err = observer
        .parent_validated(ZONE)
        .await
        .expect_err("the parent's keys cannot be established");
    assert!(err.reason.contains("without EDNS"), "{err}");
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Unknown, "{probes:?}");
    assert!(probes[0].detail.contains("without EDNS"), "{probes:?}");

    // No false "gone": with the parent's keys established (this server refuses EDNS to
    // the DS question only, asked by a fresh observer), its unsigned NODATA proves no
    // missing DS, while the other address's signed denial does.
    let observer = DnsObserver::new(&dns.settings()).expect("observer");
    dns.script(Servers::One(TLD_A), None, Behaviour::Normal);
    dns.script(
        Servers::One(TLD_A),
        Some(RecordType::DS),
        Behaviour::NoEdns {
            truncated_over_udp: false,
        },
    );
    observer.parent_validated(ZONE).await.expect("parent view");
    dns.set_ds(Servers::Tld, Vec::new());
    let validated = observer.parent_validated(ZONE).await.expect("parent view");
    assert_eq!(
        ds_at(&validated, TLD_A),
        DsAnswer::Unknown(UnknownReason::WithoutEdns),
        "{validated:?}"
    );
    assert_eq!(ds_at(&validated, TLD_B), DsAnswer::Absent, "{validated:?}");
    assert!(!validated.all_absent(), "{validated:?}");
    dns.script(Servers::One(TLD_A), None, Behaviour::Normal);

    // A child server without EDNS whose UDP answers are truncated: over TCP it serves the
    // key, but without the signature the DO bit would have brought.
    dns.script(
        Servers::One(CHILD_1),
        None,
        Behaviour::NoEdns {
            truncated_over_udp: true,
        },
    );
    let child = observer.child(ZONE).await.expect("child view");
    let at_1 = child
        .answers
        .iter()
        .find(|a| a.addr == IpAddr::from(CHILD_1))
        .expect("asked");
    assert_eq!(
        at_1.answer,
        DnskeyAnswer::Unknown(UnknownReason::WithoutEdns),
        "{child:?}"
    );
    assert!(
        matches!(ns_at(&child.apex_ns, CHILD_1), NsAnswer::Servers { .. }),
        "the apex NS over TCP without EDNS: {child:?}"
    );
    let key = zone_key(&child);
    assert!(!child.all_serve(&key), "{child:?}");
    assert!(
        child.lacking(&key).is_none(),
        "a server asked without EDNS is not one proven not to serve the key: {child:?}"
    );
}

/// The parent denies the DS with NSEC3 records of a hash
/// algorithm no validator knows (2; only 1, SHA-1, is assigned). RFC 5155 section 8.1:
/// validators must ignore such records, so the answer is no malformed message but one
/// whose denial nothing proves: unknown for decisions (`bogus_proof`, naming the
/// algorithm), never "gone". What resolvers make of it differs (RFC 5155 8.1 "will
/// generally be considered bogus", Unbound SERVFAIL; BIND insecure): our validator says
/// `unknown` (unprovable), neither an outage page nor "fine". A valid SHA-1 proof beside
/// an ignored record still proves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nsec3_of_an_unknown_hash_algorithm_is_ignored_not_malformed() {
    let (dns, observer) = world().await;
    dns.set_ds(Servers::Tld, Vec::new());
    dns.script(
        Servers::Tld,
        Some(RecordType::DS),
        Behaviour::Nsec3(Nsec3Script {
            hash_algorithm: 2,
            ..Nsec3Script::valid(false)
        }),
    );
    let routine = observer.parent(ZONE).await.expect("parent view");
    assert!(routine.all_absent(), "an authoritative NODATA: {routine:?}");
    let parent = observer.parent_validated(ZONE).await.expect("parent view");
    for ip in [TLD_A, TLD_B] {
        let bogus = bogus_reason(&ds_at(&parent, ip))
            .unwrap_or_else(|| panic!("not bogus_proof: {parent:?}"));
        assert!(
            bogus.contains("hash algorithm 2") && bogus.contains("RFC 5155"),
            "{bogus}"
        );
    }
    assert!(!parent.all_absent(), "{parent:?}");
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Unknown, "{probes:?}");
    assert!(probes[0].detail.contains("hash algorithm 2"), "{probes:?}");
    assert!(probes[0].detail.contains("unprovable"), "{probes:?}");

    for opt_out in [false, true] {
        dns.script(
            Servers::Tld,
            Some(RecordType::DS),
            Behaviour::Nsec3(Nsec3Script {
                decoy: Some(2),
                ..Nsec3Script::valid(opt_out)
            }),
        );
        let parent = observer.parent_validated(ZONE).await.expect("parent view");
        assert!(parent.all_absent(), "opt-out {opt_out}: {parent:?}");
        assert_eq!(parent.evidence, Evidence::Validated);
    }
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Insecure, "{probes:?}");
}

/// DESIGN.md section 4, "Sampled looks": a sample asks one parent address (DS and NS,
/// validated with the parent's keys from the cache) and one child address (DNSKEY and
/// NS), and the next turn asks the next address, so that every address is asked within as
/// many turns as there are addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_asks_one_address_of_each_side_and_rotates() {
    let (_dns, observer) = world().await;
    // Cuts and the parent's keys established, as a running daemon has them.
    let parent = observer.parent_validated(ZONE).await.expect("parent view");
    let child = observer.child(ZONE).await.expect("child view");
    let every = |answers: Vec<IpAddr>| {
        let mut a = answers;
        a.sort();
        a.dedup();
        a
    };
    let parents = every(parent.answers.iter().map(|a| a.addr).collect());
    let children = every(child.answers.iter().map(|a| a.addr).collect());
    assert!(
        parents.len() >= 2 && children.len() >= 2,
        "{parents:?} {children:?}"
    );
    let turns = parents.len().max(children.len()) as u64;
    let (mut seen_parents, mut seen_children) = (Vec::new(), Vec::new());
    for turn in 0..turns {
        let before = observer.stats().exchanges;
        let (p, c) = futures::join!(
            observer.parent_sample(ZONE, turn),
            observer.child_sample(ZONE, turn)
        );
        let (p, c) = (p.expect("parent sample"), c.expect("child sample"));
        let asked = observer.stats().exchanges - before;
        assert_eq!(
            asked, 4,
            "turn {turn}: DS and NS at one parent address, DNSKEY and NS at one child address"
        );
        assert_eq!((p.answers.len(), p.delegations.len()), (1, 1), "{p:?}");
        assert_eq!(p.answers[0].addr, p.delegations[0].addr);
        assert_eq!(p.evidence, Evidence::Validated);
        assert!(
            matches!(p.answers[0].answer, DsAnswer::Present { .. }),
            "{p:?}"
        );
        assert_eq!(c.answers.len(), 1, "{c:?}");
        assert!(
            matches!(c.answers[0].answer, DnskeyAnswer::Keys(_)),
            "{c:?}"
        );
        seen_parents.push(p.answers[0].addr);
        seen_children.push(c.answers[0].addr);
    }
    assert_eq!(
        every(seen_parents),
        parents,
        "every parent address in {turns} turns"
    );
    assert_eq!(
        every(seen_children),
        children,
        "every child address in {turns} turns"
    );
}

/// A parent address that slips (response rate limiting: TC=1 and empty over UDP) is asked
/// over TCP, where its answer counts, and its pace is slowed: the querier says so in its
/// counters (the metrics endpoint's `dnssec_warden_dns_server_backoffs_total`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slipping_server_is_asked_over_tcp_and_slowed() {
    let (dns, observer) = world().await;
    dns.script(Servers::One(TLD_B), Some(RecordType::DS), Behaviour::Slip);
    let before = observer.stats().backoffs;
    let view = observer.parent(ZONE).await.expect("parent view");
    assert!(
        matches!(ds_at(&view, TLD_B), DsAnswer::Present { .. }),
        "{view:?}"
    );
    assert_eq!(observer.stats().backoffs, before + 1);
    assert_eq!(
        observer.slowed_servers(),
        vec![(IpAddr::from(TLD_B), 2)],
        "half its pace"
    );
    assert_eq!(parent_verdict(&observer).await, ParentDsVerdict::AllMatch);
    // `check` says it, and what to do.
    let dir = tempfile::tempdir().expect("dir");
    let (_, json) = check_json(&dns.config_file(dir.path()), ZONE).await;
    let advice = advice(&json);
    assert!(
        advice.contains(&format!("the server at {TLD_B} dropped or slipped queries")),
        "{advice}"
    );
}

/// The child's CDS and CDNSKEY for its own key, as the scripted world's rdata.
fn signals_of(key: &LabKey) -> (Vec<RData>, Vec<RData>) {
    use hickory_proto::dnssec::rdata::{CDNSKEY, CDS, DNSSECRData};
    use hickory_proto::dnssec::{Algorithm, DigestType as HDigest};
    let k = key.dnskey();
    let ds = k
        .to_ds(ZONE, dnssec_warden_lab::DigestType::Sha256)
        .expect("digest");
    let cds = RData::DNSSEC(DNSSECRData::CDS(CDS::new(
        ds.key_tag,
        Some(Algorithm::ECDSAP256SHA256),
        HDigest::SHA256,
        ds.digest.clone(),
    )));
    let cdnskey = RData::DNSSEC(DNSSECRData::CDNSKEY(CDNSKEY::with_flags(
        k.flags,
        Some(Algorithm::ECDSAP256SHA256),
        k.public_key.clone(),
    )));
    (vec![cds], vec![cdnskey])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_signals_are_read_at_every_address_with_their_signers() {
    let (dns, observer) = world().await;
    let (cds, cdnskey) = signals_of(&dns.child_key);
    dns.set_child_rrset(RecordType::CDS, cds);
    dns.set_child_rrset(RecordType::CDNSKEY, cdnskey);
    let child = observer.child_with_signals(ZONE).await.expect("child view");
    let key = zone_key(&child);
    match child.signals() {
        SignalsVerdict::Keys {
            cds,
            cdnskey,
            signed_by,
        } => {
            assert_eq!(cds.len(), 1);
            assert!(key.matches_ds(ZONE, &cds[0]));
            assert_eq!(cdnskey, vec![key.clone()]);
            assert_eq!(signed_by, vec![key.clone()]);
        }
        other => panic!("{other:?}"),
    }
    // A plain look does not ask them.
    let child = observer.child(ZONE).await.expect("child view");
    assert_eq!(child.signals(), SignalsVerdict::NotAsked);

    // Without signatures over the CDS the set is the same, signed by nobody.
    dns.script(
        Servers::Child,
        Some(RecordType::CDS),
        Behaviour::StripSignatures,
    );
    let child = observer.child_with_signals(ZONE).await.expect("child view");
    assert!(
        matches!(child.signals(), SignalsVerdict::Keys { ref signed_by, .. } if signed_by.is_empty()),
        "{:?}",
        child.signals()
    );
    // Signed by another key than the zone serves: not a signer either.
    dns.script(
        Servers::Child,
        Some(RecordType::CDS),
        Behaviour::Resign {
            key: Some(Signer::new(LabKey::generate(257).expect("key"))),
            window: None,
        },
    );
    let child = observer.child_with_signals(ZONE).await.expect("child view");
    assert!(
        matches!(child.signals(), SignalsVerdict::Keys { ref signed_by, .. } if signed_by.is_empty()),
        "{:?}",
        child.signals()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_signals_that_differ_or_fail_at_one_address_decide_nothing() {
    let (dns, observer) = world().await;
    let (cds, cdnskey) = signals_of(&dns.child_key);
    dns.set_child_rrset(RecordType::CDS, cds);
    dns.set_child_rrset(RecordType::CDNSKEY, cdnskey);
    // One address serves no CDS (NODATA): the sets differ (RFC 9975).
    dns.script(
        Servers::One(CHILD_2),
        Some(RecordType::CDS),
        Behaviour::UnsignedNodata,
    );
    let child = observer.child_with_signals(ZONE).await.expect("child view");
    let verdict = child.signals();
    assert!(
        matches!(&verdict, SignalsVerdict::Inconsistent(d) if d.contains(&CHILD_2.to_string())),
        "{verdict:?}"
    );
    // One address silent for its CDNSKEY: unknown, naming it.
    dns.script(
        Servers::One(CHILD_2),
        Some(RecordType::CDS),
        Behaviour::Normal,
    );
    dns.script(
        Servers::One(CHILD_1),
        Some(RecordType::CDNSKEY),
        Behaviour::Rcode(ResponseCode::Refused),
    );
    let child = observer.child_with_signals(ZONE).await.expect("child view");
    let verdict = child.signals();
    assert!(
        matches!(&verdict, SignalsVerdict::Unknown(d) if d.contains(&CHILD_1.to_string()) && d.contains("refused")),
        "{verdict:?}"
    );
    // Nothing published anywhere.
    dns.script(
        Servers::One(CHILD_1),
        Some(RecordType::CDNSKEY),
        Behaviour::Normal,
    );
    dns.set_child_rrset(RecordType::CDS, vec![]);
    dns.set_child_rrset(RecordType::CDNSKEY, vec![]);
    let child = observer.child_with_signals(ZONE).await.expect("child view");
    assert_eq!(child.signals(), SignalsVerdict::None);
}

// ---- DSYNC (RFC 9859): the parent's notification target for the child ----------------

/// The registry's NOTIFY target in these tests: an A record at the TLD.
const REGISTRY: Ipv4Addr = Ipv4Addr::new(127, 0, 72, 9);

fn dsync_rdata(rrtype: u16, scheme: u8, port: u16, target: &str) -> Vec<u8> {
    dnssec_warden::dns::wire::dsync_rdata(&dnssec_warden::dns::wire::Dsync {
        rrtype,
        scheme,
        port,
        target: target.into(),
    })
    .expect("a target that is a name")
}

fn cds_notify() -> Vec<u8> {
    dsync_rdata(59, 1, 5359, "notify.registry.test.")
}

/// A DSYNC for the child at every parent address: found, every address asked once,
/// its NOTIFY target's address looked up at the TLD.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dsync_at_every_parent_address_is_found_with_its_target() {
    let (dns, observer) = world().await;
    dns.add_host("notify.registry.test.", REGISTRY);
    // A null-scheme record beside it is ignored; a CSYNC one is kept.
    dns.set_dsync(
        Servers::Tld,
        &[
            ("child._dsync.test.", cds_notify()),
            (
                "child._dsync.test.",
                dsync_rdata(62, 1, 5359, "notify.registry.test."),
            ),
            ("child._dsync.test.", dsync_rdata(60, 0, 0, "ignored.test.")),
        ],
    );
    let view = observer.parent_dsync(ZONE).await.expect("a DSYNC view");
    assert_eq!(view.qname, "child._dsync.test.");
    assert_eq!(view.parent, "test.");
    assert_eq!(view.answers.len(), 2, "{view:?}");
    let DsyncVerdict::Found { records } = view.verdict() else {
        panic!("every address agrees: {view:?}")
    };
    assert_eq!(
        records.iter().map(|r| r.rrtype).collect::<Vec<_>>(),
        vec![59, 62]
    );
    let target = view.target_for(59).expect("the CDS target");
    assert_eq!(
        (target.target.as_str(), target.port),
        ("notify.registry.test.", 5359)
    );
    assert_eq!(target.addrs, vec![IpAddr::from(REGISTRY)], "{target:?}");
}

/// What the signals cost the child's servers: a full look with them asks exactly two
/// questions more (CDS and CDNSKEY) at every child address than a plain look, whether
/// the zone publishes them or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signals_add_two_questions_at_every_child_address() {
    let (dns, observer) = world().await;
    // The cut and the delegation cached, as at a daemon's routine looks.
    observer.child(ZONE).await.expect("child view");
    let before = observer.stats().exchanges;
    let plain = observer.child(ZONE).await.expect("child view");
    let plain_cost = observer.stats().exchanges - before;
    let addresses = plain.answers.len() as u64;
    assert!(addresses >= 2, "{plain:?}");
    for published in [false, true] {
        if published {
            let (cds, cdnskey) = signals_of(&dns.child_key);
            dns.set_child_rrset(RecordType::CDS, cds);
            dns.set_child_rrset(RecordType::CDNSKEY, cdnskey);
        }
        let before = observer.stats().exchanges;
        let full = observer.child_with_signals(ZONE).await.expect("child view");
        let cost = observer.stats().exchanges - before;
        assert_eq!(full.answers.len() as u64, addresses);
        assert_eq!(
            cost,
            plain_cost + 2 * addresses,
            "published: {published}; a plain look: {plain_cost}"
        );
    }
}

/// `*._dsync.test.` answers the child's lookup by synthesis: one query an address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_dsync_at_the_parent_answers_for_the_child() {
    let (dns, observer) = world().await;
    dns.add_host("notify.registry.test.", REGISTRY);
    dns.set_dsync(Servers::Tld, &[("*._dsync.test.", cds_notify())]);
    observer.parent_dsync(ZONE).await.expect("cut cached");
    let before = observer.stats().exchanges;
    let view = observer.parent_dsync(ZONE).await.expect("a DSYNC view");
    assert!(
        matches!(view.verdict(), DsyncVerdict::Found { .. }),
        "{view:?}"
    );
    assert_eq!(view.target_for(59).map(|t| t.port), Some(5359));
    // One DSYNC question at each of the two TLD addresses, and the target's A and AAAA
    // at one of them (the first answer will do for an address lookup).
    let asked = observer.stats().exchanges - before;
    assert!((2..=6).contains(&asked), "{asked} exchanges");
}

/// Two addresses, two answers: unknown, naming the address that differs; records at
/// one address and none at the other too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_addresses_that_disagree_on_dsync_are_unknown() {
    let (dns, observer) = world().await;
    dns.set_dsync(Servers::One(TLD_A), &[("child._dsync.test.", cds_notify())]);
    dns.set_dsync(
        Servers::One(TLD_B),
        &[("child._dsync.test.", dsync_rdata(59, 1, 53, "other.test."))],
    );
    let view = observer.parent_dsync(ZONE).await.expect("a DSYNC view");
    let DsyncVerdict::Unknown { detail } = view.verdict() else {
        panic!("disagreement is unknown: {view:?}")
    };
    assert!(
        detail.contains("127.0.72.3 says CDS NOTIFY 53 other.test."),
        "{detail}"
    );
    assert!(
        view.targets.is_empty(),
        "nothing resolved without agreement"
    );

    dns.set_dsync(Servers::One(TLD_B), &[]);
    let view = observer.parent_dsync(ZONE).await.expect("a DSYNC view");
    let DsyncVerdict::Unknown { detail } = view.verdict() else {
        panic!("records beside none is unknown: {view:?}")
    };
    assert!(detail.contains("127.0.72.3 says no DSYNC"), "{detail}");

    // A silent address beside one with the record: unknown, said as a timeout there.
    dns.set_dsync(Servers::Tld, &[("child._dsync.test.", cds_notify())]);
    dns.script(
        Servers::One(TLD_B),
        Some(RecordType::from(66)),
        Behaviour::Silent,
    );
    let view = observer.parent_dsync(ZONE).await.expect("a DSYNC view");
    assert_eq!(
        view.verdict(),
        DsyncVerdict::Unknown {
            detail: "b.nic.test. 127.0.72.3: timeout".into()
        }
    );
}

/// No DSYNC anywhere (the TLD's NXDOMAIN for the lookup name, or NODATA): none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_dsync_at_any_parent_address_is_none() {
    let (dns, observer) = world().await;
    let view = observer.parent_dsync(ZONE).await.expect("a DSYNC view");
    assert_eq!(view.verdict(), DsyncVerdict::None, "{view:?}");
    assert!(
        view.answers.iter().all(|a| a.answer == DsyncAnswer::None),
        "{view:?}"
    );
    // NODATA: the name exists (an A record there), no DSYNC.
    dns.add_host("child._dsync.test.", REGISTRY);
    let view = observer.parent_dsync(ZONE).await.expect("a DSYNC view");
    assert_eq!(view.verdict(), DsyncVerdict::None, "{view:?}");
    // Only null-scheme records: the parent opting the child out.
    dns.set_dsync(
        Servers::Tld,
        &[("child._dsync.test.", dsync_rdata(59, 0, 0, "x.test."))],
    );
    let view = observer.parent_dsync(ZONE).await.expect("a DSYNC view");
    assert_eq!(view.verdict(), DsyncVerdict::None, "{view:?}");
}

/// A malformed record at one address (cut short, trailing octets, a compressed target):
/// that address is unknown, and so the verdict; never the part that could be read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_dsync_record_is_unknown() {
    let (dns, observer) = world().await;
    let good = cds_notify();
    let mut trailing = good.clone();
    trailing.push(0);
    for bad in [
        good[..4].to_vec(),
        trailing,
        vec![0, 59, 1, 0x14, 0xef, 0xC0, 0x0C],
    ] {
        dns.set_dsync(Servers::One(TLD_A), &[("child._dsync.test.", good.clone())]);
        dns.set_dsync(
            Servers::One(TLD_B),
            &[
                ("child._dsync.test.", good.clone()),
                ("child._dsync.test.", bad.clone()),
            ],
        );
        let view = observer.parent_dsync(ZONE).await.expect("a DSYNC view");
        let at_b = view
            .answers
            .iter()
            .find(|a| a.addr == IpAddr::from(TLD_B))
            .expect("an answer from b");
        assert!(
            matches!(
                &at_b.answer,
                DsyncAnswer::Unknown(UnknownReason::Malformed(_))
            ),
            "{bad:?}: {at_b:?}"
        );
        let DsyncVerdict::Unknown { detail } = view.verdict() else {
            panic!("{bad:?}: a malformed record is unknown")
        };
        assert!(
            detail.starts_with("b.nic.test. 127.0.72.3: malformed"),
            "{detail}"
        );
    }
    // A CNAME where the DSYNC should be is no "none".
    dns.set_dsync(Servers::Tld, &[]);
    dns.script(
        Servers::One(TLD_A),
        Some(RecordType::from(66)),
        Behaviour::CnameAtName,
    );
    let view = observer.parent_dsync(ZONE).await.expect("a DSYNC view");
    let DsyncVerdict::Unknown { detail } = view.verdict() else {
        panic!("a CNAME is unknown: {view:?}")
    };
    assert!(
        detail.starts_with("a.nic.test. 127.0.72.2: malformed")
            && detail.contains("child._dsync.test. CNAME"),
        "{detail}"
    );
}
