//! The real observer against the lab's signed hierarchy on loopback: every verdict and
//! every unknown reason a real server can produce.

use std::net::IpAddr;
use std::process::Command;

use dnssec_warden::cli::lab::LabSettings;
use dnssec_warden::dns::{
    DnsObserver, DnskeyAnswer, DsAnswer, Observer, ParentDsVerdict, Signals, SignalsVerdict,
    UnknownReason, ValidationVerdict, combine_validation,
};
use dnssec_warden_lab::dns::{Fault, KeySource, LabDns, LabResolver, TLD_A, TLD_B, TldServers};
use dnssec_warden_lab::keys::LabKey;

const ZONE: &str = "example.test.";

async fn lab_with(key: KeySource) -> (LabDns, DnsObserver) {
    let lab = LabDns::start().await.unwrap();
    lab.add_child(ZONE, key).unwrap();
    let observer = DnsObserver::new(&lab.settings()).unwrap();
    (lab, observer)
}

async fn verdicts(observer: &DnsObserver, zone: &str) -> (ParentDsVerdict, ValidationVerdict) {
    let parent = observer.parent(zone).await.unwrap();
    let child = observer.child(zone).await.unwrap();
    let probes = observer.validation(zone).await;
    (
        parent.verdict(&child.served_keys()),
        combine_validation(&probes),
    )
}

fn reason_at(view: &dnssec_warden::dns::ParentView, ip: std::net::Ipv4Addr) -> DsAnswer {
    view.answers
        .iter()
        .find(|a| a.addr == IpAddr::from(ip))
        .map(|a| a.answer.clone())
        .unwrap()
}

#[tokio::test]
async fn signed_child_with_ds_everywhere_is_secure() {
    let key = LabKey::generate(257).unwrap();
    let (lab, observer) = lab_with(KeySource::Static(key.clone())).await;
    lab.publish_ds(ZONE, TldServers::Both, &key.dnskey())
        .unwrap();
    lab.set_ds_ttl(ZONE, 7200).unwrap();
    let parent = observer.parent(ZONE).await.unwrap();
    assert_eq!(parent.parent, "test.");
    assert_eq!(parent.answers.len(), 2, "{parent:?}");
    assert_eq!(parent.max_ds_ttl(), Some(7200));
    let child = observer.child(ZONE).await.unwrap();
    assert_eq!(child.answers.len(), 2);
    assert!(child.all_serve(&key.dnskey().into()));
    match &child.answers[0].answer {
        DnskeyAnswer::Keys(k) => {
            assert!(k.signed);
            assert_eq!(k.signatures[0].key_tag, key.dnskey().key_tag());
            assert_eq!(k.signals, Signals::NotAsked);
        }
        other => panic!("{other:?}"),
    }
    let probes = observer.validation(ZONE).await;
    assert_eq!(
        combine_validation(&probes),
        ValidationVerdict::Secure,
        "{probes:?}"
    );
    assert_eq!(
        parent.verdict(&child.served_keys()),
        ParentDsVerdict::AllMatch
    );
}

#[tokio::test]
async fn unsigned_child_without_ds_is_cleanly_insecure() {
    let (_lab, observer) = lab_with(KeySource::Unsigned).await;
    let child = observer.child(ZONE).await.unwrap();
    assert!(child.all_unsigned(), "{child:?}");
    assert_eq!(
        verdicts(&observer, ZONE).await,
        (ParentDsVerdict::AllAbsent, ValidationVerdict::Insecure)
    );
}

#[tokio::test]
async fn signed_child_before_its_ds_is_insecure_by_nsec_proof() {
    let key = LabKey::generate(257).unwrap();
    let (_lab, observer) = lab_with(KeySource::Static(key)).await;
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Insecure, "{probes:?}");
    assert!(probes[0].detail.contains("NSEC"), "{probes:?}");
}

#[tokio::test]
async fn ds_on_one_tld_server_only_is_partial() {
    let key = LabKey::generate(257).unwrap();
    let (lab, observer) = lab_with(KeySource::Static(key.clone())).await;
    lab.publish_ds(ZONE, TldServers::A, &key.dnskey()).unwrap();
    let parent = observer.parent(ZONE).await.unwrap();
    assert!(matches!(
        reason_at(&parent, TLD_A),
        DsAnswer::Present { .. }
    ));
    assert_eq!(reason_at(&parent, TLD_B), DsAnswer::Absent);
    assert_eq!(verdicts(&observer, ZONE).await.0, ParentDsVerdict::Partial);
}

#[tokio::test]
async fn ds_for_a_key_the_child_does_not_serve_is_mismatch_and_bogus() {
    let served = LabKey::generate(257).unwrap();
    let stale = LabKey::generate(257).unwrap();
    let (lab, observer) = lab_with(KeySource::Static(served)).await;
    lab.publish_ds(ZONE, TldServers::Both, &stale.dnskey())
        .unwrap();
    assert_eq!(
        verdicts(&observer, ZONE).await,
        (ParentDsVerdict::Mismatch, ValidationVerdict::Bogus)
    );
}

#[tokio::test]
async fn ds_left_behind_after_unsigning_is_mismatch_and_bogus() {
    let key = LabKey::generate(257).unwrap();
    let (lab, observer) = lab_with(KeySource::Static(key.clone())).await;
    lab.publish_ds(ZONE, TldServers::Both, &key.dnskey())
        .unwrap();
    lab.set_child_key(ZONE, KeySource::Unsigned).unwrap();
    assert_eq!(
        verdicts(&observer, ZONE).await,
        (ParentDsVerdict::Mismatch, ValidationVerdict::Bogus)
    );
}

#[tokio::test]
async fn a_silent_parent_server_beside_an_absent_one_is_unknown() {
    let (lab, observer) = lab_with(KeySource::Unsigned).await;
    // Discover the delegation first, so that only the DS query meets the fault.
    observer.child(ZONE).await.unwrap();
    lab.set_fault(TLD_B.into(), Some(Fault::Drop));
    let parent = observer.parent(ZONE).await.unwrap();
    assert_eq!(reason_at(&parent, TLD_A), DsAnswer::Absent);
    assert_eq!(
        reason_at(&parent, TLD_B),
        DsAnswer::Unknown(UnknownReason::Timeout)
    );
    assert!(!parent.all_absent());
    assert_eq!(
        parent.verdict(&dnssec_warden::dns::ServedKeys::default()),
        ParentDsVerdict::Unknown
    );
}

#[tokio::test]
async fn servfail_refused_and_stopped_servers_are_unknown_with_their_reason() {
    let (lab, observer) = lab_with(KeySource::Unsigned).await;
    observer.child(ZONE).await.unwrap();
    lab.set_fault(TLD_A.into(), Some(Fault::Servfail));
    lab.set_fault(TLD_B.into(), Some(Fault::Refused));
    let parent = observer.parent(ZONE).await.unwrap();
    assert_eq!(
        reason_at(&parent, TLD_A),
        DsAnswer::Unknown(UnknownReason::Servfail)
    );
    assert_eq!(
        reason_at(&parent, TLD_B),
        DsAnswer::Unknown(UnknownReason::Refused)
    );
    lab.set_fault(TLD_A.into(), None);
    lab.set_fault(TLD_B.into(), None);
    lab.stop_server(TLD_B.into());
    let parent = observer.parent(ZONE).await.unwrap();
    assert_eq!(reason_at(&parent, TLD_A), DsAnswer::Absent);
    assert!(
        matches!(
            reason_at(&parent, TLD_B),
            DsAnswer::Unknown(UnknownReason::Network(_))
        ),
        "{parent:?}"
    );
    lab.restart_server(TLD_B.into()).await.unwrap();
    assert!(observer.parent(ZONE).await.unwrap().all_absent());
}

#[tokio::test]
async fn the_child_follows_the_provider_simulator() {
    use dnssec_warden_lab::{ProviderSim, SimOptions};
    let options = SimOptions {
        api_keys: vec!["lab-key".into()],
        ..SimOptions::default()
    };
    let sim = ProviderSim::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let handle = sim.handle();
    handle.add_zone("example.test");
    let (lab, observer) = lab_with(KeySource::provider(handle.clone())).await;
    assert!(observer.child(ZONE).await.unwrap().all_unsigned());
    assert!(handle.signing_key(ZONE).is_none());
    // Switch DNSSEC on at the simulator as the API would.
    let client = reqwest::Client::new();
    let base = sim.base_url();
    let url = base.join("dns/v2/zones/example.test/dnssec").unwrap();
    let key = "lab-key";
    let status = client
        .patch(url)
        .header("Authorization", format!("APIKey {key}"))
        .json(&serde_json::json!({"enabled": true}))
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success(), "{status}");
    let served = handle.dnskey(ZONE).unwrap();
    let child = observer.child(ZONE).await.unwrap();
    assert!(child.all_serve(&served.clone().into()), "{child:?}");
    lab.publish_ds(ZONE, TldServers::Both, &served).unwrap();
    assert_eq!(
        verdicts(&observer, ZONE).await,
        (ParentDsVerdict::AllMatch, ValidationVerdict::Secure)
    );
}

#[tokio::test]
async fn cds_delete_and_signature_windows_are_reported() {
    let key = LabKey::generate(257).unwrap();
    let (lab, observer) = lab_with(KeySource::Static(key)).await;
    lab.set_cds_delete(ZONE, true).unwrap();
    lab.set_signature_window(ZONE, Some((1_000, 2_000_000_000)))
        .unwrap();
    lab.set_dnskey_ttl(ZONE, 1234).unwrap();
    let child = observer.child_with_signals(ZONE).await.unwrap();
    assert_eq!(child.max_dnskey_ttl(), Some(1234));
    assert_eq!(child.earliest_expiration(), Some(2_000_000_000));
    for a in &child.answers {
        match &a.answer {
            DnskeyAnswer::Keys(k) => match &k.signals {
                Signals::Answered(p) => {
                    assert!(p.delete_requested(), "{k:?}");
                    assert_eq!(p.cds.len(), 1);
                    assert_eq!(p.cdnskey.len(), 1);
                    // Signed by the zone's key, as the rest of the zone.
                    assert_eq!(p.signers, vec![0]);
                }
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(child.signals(), SignalsVerdict::Delete { .. }));
}

#[tokio::test]
async fn expired_signatures_are_bogus() {
    let key = LabKey::generate(257).unwrap();
    let (lab, observer) = lab_with(KeySource::Static(key.clone())).await;
    lab.publish_ds(ZONE, TldServers::Both, &key.dnskey())
        .unwrap();
    lab.set_signature_window(ZONE, Some((1_000, 2_000)))
        .unwrap();
    let probes = observer.validation(ZONE).await;
    assert_eq!(probes[0].verdict, ValidationVerdict::Bogus, "{probes:?}");
}

#[tokio::test]
async fn a_name_that_is_not_a_zone_is_an_observe_error() {
    let (_lab, observer) = lab_with(KeySource::Unsigned).await;
    let err = observer.parent("www.example.test.").await.unwrap_err();
    assert!(err.reason.contains("not delegated"), "{err}");
    let err = observer.parent("nowhere.test.").await.unwrap_err();
    assert!(err.reason.contains("does not exist"), "{err}");
}

#[tokio::test]
async fn many_zones_share_one_tld_lookup() {
    let lab = LabDns::start().await.unwrap();
    let zones: Vec<String> = (0..200).map(|i| format!("z{i}.test.")).collect();
    for z in &zones {
        lab.add_child(z, KeySource::Unsigned).unwrap();
    }
    let observer = DnsObserver::new(&lab.settings()).unwrap();
    let views = futures::future::join_all(zones.iter().map(|z| observer.parent(z))).await;
    for v in views {
        assert!(v.unwrap().all_absent());
    }
    let stats = observer.stats();
    // Per zone: one NS at a TLD server to find the cut, then DS and NS (the
    // delegation) at each of the two. Shared: priming, `test.`, glue.
    assert!(stats.exchanges <= 200 * 5 + 10, "{stats:?}");
    assert!(stats.peak_in_flight <= 64, "{stats:?}");
}

/// `dig`, an independent client, sees what the lab serves: a signed DS with AA at the TLD.
#[tokio::test]
async fn dig_sees_the_lab() {
    let key = LabKey::generate(257).unwrap();
    let (lab, _observer) = lab_with(KeySource::Static(key.clone())).await;
    lab.publish_ds(ZONE, TldServers::Both, &key.dnskey())
        .unwrap();
    let port = lab.port().to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("dig")
            .args(["@127.0.53.2", "-p", &port, "+norec", "+dnssec", ZONE, "DS"])
            .output()
    })
    .await
    .unwrap()
    .expect("dig runs (Debian bind9-dnsutils; tests/run.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("flags: qr aa"), "{text}");
    assert!(
        text.contains(&format!("IN\tDS\t{} 13 2", key.dnskey().key_tag())),
        "{text}"
    );
    assert!(text.contains("RRSIG\tDS 13 2"), "{text}");
}

/// Unbound, an independent validator, reaches the same verdict as ours in each condition:
/// the lab's signatures and NSEC proofs are right, and so is our chain walk.
#[tokio::test]
async fn unbound_agrees_with_our_validator() {
    let lab = LabDns::start().await.unwrap();
    let good = LabKey::generate(257).unwrap();
    let stale = LabKey::generate(257).unwrap();
    lab.add_child("secure.test.", KeySource::Static(good.clone()))
        .unwrap();
    lab.publish_ds("secure.test.", TldServers::Both, &good.dnskey())
        .unwrap();
    lab.add_child("unsigned.test.", KeySource::Unsigned)
        .unwrap();
    lab.add_child("signed-no-ds.test.", KeySource::Static(good.clone()))
        .unwrap();
    lab.add_child("broken.test.", KeySource::Static(good.clone()))
        .unwrap();
    lab.publish_ds("broken.test.", TldServers::Both, &stale.dnskey())
        .unwrap();
    let resolver = LabResolver::start(&lab).await.unwrap();
    let observer = DnsObserver::new(&lab.settings_with_resolvers(&[resolver.addr()])).unwrap();
    for (zone, expected) in [
        ("secure.test.", ValidationVerdict::Secure),
        ("unsigned.test.", ValidationVerdict::Insecure),
        ("signed-no-ds.test.", ValidationVerdict::Insecure),
        ("broken.test.", ValidationVerdict::Bogus),
    ] {
        let probes = observer.validation(zone).await;
        assert_eq!(probes.len(), 2);
        assert_eq!(probes[0].verdict, expected, "ours, {zone}: {probes:?}");
        assert_eq!(probes[1].verdict, expected, "unbound, {zone}: {probes:?}");
    }
    // Our four probes started from the TLD's keys established once, not from the
    // trust anchor each.
    let stats = observer.key_cache_stats();
    assert_eq!((stats.fetches, stats.hits), (1, 3), "{stats:?}");
}

/// The lab's old provider and its re-delegation lever, as the real observer sees them:
/// a zone moving in is delegated elsewhere with the old key's DS (secure through the old
/// servers), then mixed while one TLD server lags, then at the provider's name servers.
#[tokio::test]
async fn a_moving_child_goes_from_the_old_provider_to_the_provider() {
    use dnssec_warden::dns::DelegationVerdict;
    use dnssec_warden_lab::dns::{NAME_SERVERS, OLD_1, OLD_2, OLD_NAME_SERVERS};

    let lab = LabDns::start().await.unwrap();
    let old_key = LabKey::generate(257).unwrap();
    let new_key = LabKey::generate(257).unwrap();
    lab.add_moving_child(ZONE, &old_key, KeySource::Static(new_key.clone()))
        .unwrap();
    let observer = DnsObserver::new(&lab.settings()).unwrap();
    let provider: Vec<String> = NAME_SERVERS.map(String::from).to_vec();
    let verdict = |parent: &dnssec_warden::dns::ParentView| {
        dnssec_warden::dns::delegation::assess(&parent.delegations, Some(&provider)).verdict
    };

    let parent = observer.parent(ZONE).await.unwrap();
    assert_eq!(verdict(&parent), DelegationVerdict::Foreign, "{parent:?}");
    let child = observer.child(ZONE).await.unwrap();
    let asked: Vec<IpAddr> = child.answers.iter().map(|a| a.addr).collect();
    assert!(
        asked.contains(&IpAddr::from(OLD_1)) && asked.contains(&IpAddr::from(OLD_2)),
        "{asked:?}"
    );
    assert!(child.all_serve(&old_key.dnskey().into()));
    assert_eq!(
        parent.verdict(&child.served_keys()),
        ParentDsVerdict::AllMatch
    );
    let old: Vec<String> = OLD_NAME_SERVERS.map(String::from).to_vec();
    // Every old server's apex NS names the old servers.
    assert!(!child.apex_ns.is_empty());
    for answer in &child.apex_ns {
        match &answer.answer {
            dnssec_warden::dns::NsAnswer::Servers { hosts, .. } => {
                assert_eq!(dnssec_warden::dns::delegation::ns_set(hosts.iter()), old);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        combine_validation(&observer.validation(ZONE).await),
        ValidationVerdict::Secure
    );

    // The old DS goes; the registrar changes the NS at one TLD server, then the other.
    lab.remove_ds(ZONE, TldServers::Both).unwrap();
    lab.delegate(ZONE, TldServers::A, &NAME_SERVERS).unwrap();
    let parent = observer.parent(ZONE).await.unwrap();
    assert_eq!(verdict(&parent), DelegationVerdict::Mixed, "{parent:?}");
    lab.delegate(ZONE, TldServers::B, &NAME_SERVERS).unwrap();
    let parent = observer.parent(ZONE).await.unwrap();
    assert_eq!(verdict(&parent), DelegationVerdict::Provider, "{parent:?}");
    let child = observer.child(ZONE).await.unwrap();
    assert!(child.all_serve(&new_key.dnskey().into()));
    assert!(!child.all_serve(&old_key.dnskey().into()));
}
