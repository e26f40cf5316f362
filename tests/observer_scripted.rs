//! Unknown never counts: the real observer (and `dnssec-warden check`) against a scripted
//! authoritative world on loopback (`support::scripted_dns`), whose servers are silent,
//! refusing, lame, truncated, self-contradicting or answer with the wrong records.

mod support;

use std::net::{IpAddr, Ipv4Addr};

use dnssec_warden::dns::{
    DnsObserver, DnskeyAnswer, DsAnswer, Observer, ParentDsVerdict, ParentView, UnknownReason,
    ValidationVerdict,
};
use dnssec_warden::dnssec::{DigestType, Dnskey, Ds};
use dnssec_warden_lab::keys::LabKey;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use support::scripted_dns::{
    Behaviour, CHILD_1, CHILD_2, ScriptedDns, Servers, TLD_A, TLD_B, ZONE, check_json,
};

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

/// Issue 17, item 1: the parent serves the right DS, every child address is silent,
/// REFUSED, lame (up or sideways) or has no address. Nothing is known about the child, so
/// nothing is a mismatch.
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

/// Item 1, the other side: one child address answers with its key set, the DS matches
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

/// Item 2: a NODATA without a question section is tied to our question by its ID alone.
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

/// Item 2, the allowed case: FORMERR and NOTIMP may come back without the question; they
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

/// Item 3: TC=1 over TCP: the answer is incomplete, so a NODATA in it is no "no DS".
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

/// Item 4: a DNSKEY answer holding other records (a CNAME at the apex, DNSKEYs of another
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

/// Item 5: a DS set with only unsupported algorithms or digest types makes the zone
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

/// Item 6a: a parent server that refers the zone to its name servers and answers
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

/// Item 6b: error messages name what is wrong.
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
        .find(|a| a.server == "ns3.nowhere.test.")
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

/// Item 6c: the validator asks every parent address, not the first that answers.
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
