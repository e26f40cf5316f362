//! What the lab's name servers serve for a zone of the PowerDNS simulator, driven through
//! the simulator's API as the daemon drives it: every key as PowerDNS 4.7 serves it
//! (DESIGN.md section 7's keystore), each signature checked by the lab's own verifier,
//! and the rollovers the daemon plays (ZSK pre-publish, KSK and CSK double-DS, algorithm
//! rollovers 13 -> 15 and 8 -> 13) validating at every step.

use std::net::Ipv4Addr;

use axum::http::Method;
use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::op::Message;
use hickory_proto::rr::{RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
use serde_json::{Value, json};

use super::{ACCOUNTS, ApexSource, KeySource, LabDns};
use crate::dnssec::{DigestType, Dnskey, Ds, Rrsig, SigLimits, SignedRrset, verified_signers};
use crate::pdns_sim::{PdnsHandle, PdnsOptions, PdnsSim, parse_dnskey};

const ZONE: &str = "roll.test.";
const WWW: &str = "www.roll.test.";

fn west(i: usize) -> Ipv4Addr {
    ACCOUNTS[0].1[i].1
}

fn now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or_default()
}

/// A lab with `ZONE` at the simulator's account "west", served from its keystore.
struct Rig {
    lab: LabDns,
    sim: PdnsHandle,
    _server: PdnsSim,
}

/// One key of the keystore as the API lists it.
#[derive(Debug, Clone)]
struct Listed {
    id: u64,
    dnskey: Dnskey,
}

impl Rig {
    async fn start() -> Self {
        let server = PdnsSim::start(
            "127.0.0.1:0".parse().expect("an address"),
            PdnsOptions {
                api_key: "lab".into(),
                ..PdnsOptions::default()
            },
        )
        .await
        .expect("the simulator starts");
        let sim = server.handle();
        assert!(sim.add_zone(ZONE));
        let lab = LabDns::start().await.expect("the lab starts");
        lab.add_account_child(
            "west",
            ZONE,
            KeySource::pdns(sim.clone()),
            ApexSource::pdns(sim.clone()),
        )
        .expect("the zone at west");
        Self {
            lab,
            sim,
            _server: server,
        }
    }

    async fn call(&self, method: Method, rest: &str, body: Value) -> Value {
        let path = format!("/api/v1/servers/localhost/zones/{ZONE}{rest}");
        let (status, answer) = self.sim.call(method.clone(), &path, body).await;
        assert!(
            (200..300).contains(&status),
            "{method} {rest}: {status} {answer}"
        );
        answer
    }

    /// `POST /cryptokeys`: the new key.
    async fn add(&self, keytype: &str, algorithm: &str, active: bool, published: bool) -> Listed {
        let mut form = json!({
            "keytype": keytype, "algorithm": algorithm,
            "active": active, "published": published,
        });
        if algorithm == "RSASHA256" {
            form["bits"] = json!(2048);
        }
        listed(&self.call(Method::POST, "/cryptokeys", form).await)
    }

    async fn set(&self, key: &Listed, active: bool, published: bool) {
        let body = json!({ "active": active, "published": published });
        self.call(Method::PUT, &format!("/cryptokeys/{}", key.id), body)
            .await;
    }

    async fn delete(&self, key: &Listed) {
        self.call(
            Method::DELETE,
            &format!("/cryptokeys/{}", key.id),
            Value::Null,
        )
        .await;
    }

    async fn keys(&self) -> Vec<Listed> {
        match self.call(Method::GET, "/cryptokeys", Value::Null).await {
            Value::Array(keys) => keys.iter().map(listed).collect(),
            other => panic!("a list of keys: {other}"),
        }
    }

    /// `PUT {"dnssec": true}`: the CSK 4.7 makes.
    async fn secure(&self) -> Listed {
        self.call(Method::PUT, "", json!({ "dnssec": true })).await;
        let keys = self.keys().await;
        let [csk] = keys.as_slice() else {
            panic!("one CSK: {keys:?}")
        };
        csk.clone()
    }

    fn ask(&self, server: Ipv4Addr, name: &str, rtype: RecordType) -> Message {
        let qname = crate::wire::parse_name(name).expect("a name");
        let query = crate::wire::build_query(&qname, rtype, false);
        self.lab
            .world()
            .respond(server.into(), &query)
            .expect("the lab answers")
    }

    /// What both of west's servers serve now, the same at both.
    async fn served(&self) -> Served {
        let keys = self.keys().await;
        let at = |i| Served::read(self, west(i), &keys);
        let (one, two) = (at(0), at(1));
        assert_eq!(one, two, "west's servers differ");
        one
    }
}

fn listed(key: &Value) -> Listed {
    Listed {
        id: key["id"].as_u64().expect("an id"),
        dnskey: key["dnskey"]
            .as_str()
            .and_then(parse_dnskey)
            .expect("a DNSKEY"),
    }
}

/// An RDATA in DNSSEC canonical form (RFC 4034 section 6.2), as signed.
fn canonical(rdata: &RData) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = BinEncoder::new(&mut out);
    encoder.set_canonical_form(true);
    rdata.emit(&mut encoder).expect("an RDATA encodes");
    out
}

/// An apex (or `www`) RRset as served: its TTL, its records, and the ids of the keystore's
/// keys whose RRSIG over it verifies now; every RRSIG served must verify.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Set {
    ttl: u32,
    rdatas: Vec<RData>,
    signers: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Served {
    dnskey: Set,
    soa: Set,
    www: Set,
    cds: Set,
    soa_minimum: u32,
}

impl Served {
    fn read(rig: &Rig, server: Ipv4Addr, keys: &[Listed]) -> Self {
        let set = |name: &str, rtype: RecordType| {
            let answer = rig.ask(server, name, rtype);
            rrset(&answer.answers, name, rtype, keys)
        };
        let soa = set(ZONE, RecordType::SOA);
        let soa_minimum = match soa.rdatas.first() {
            Some(RData::SOA(soa)) => soa.minimum,
            other => panic!("no SOA: {other:?}"),
        };
        Self {
            dnskey: set(ZONE, RecordType::DNSKEY),
            soa,
            www: set(WWW, RecordType::A),
            cds: set(ZONE, RecordType::CDS),
            soa_minimum,
        }
    }

    /// The served DNSKEY RRset, as lab keys.
    fn dnskeys(&self) -> Vec<Dnskey> {
        self.dnskey
            .rdatas
            .iter()
            .filter_map(|r| Dnskey::from_rdata(&canonical(r)))
            .collect()
    }

    fn has(&self, key: &Listed) -> bool {
        self.dnskeys().contains(&key.dnskey)
    }

    /// The tags of the served CDS.
    fn cds_tags(&self) -> Vec<u16> {
        let mut tags: Vec<u16> = self
            .cds
            .rdatas
            .iter()
            .filter_map(|r| Ds::from_rdata(&canonical(r)))
            .map(|ds| ds.key_tag)
            .collect();
        tags.sort_unstable();
        tags
    }

    /// A validator holding the parent's `ds` validates the zone's data: a served key a DS
    /// points at signs the DNSKEY RRset, and some served key signs the SOA and `www`
    /// (RFC 4035 section 5; RFC 6840 section 5.11: any algorithm the DS names will do).
    fn validates(&self, ds: &[Ds], keys: &[Listed]) -> bool {
        let served = self.dnskeys();
        let id_of = |k: &Dnskey| keys.iter().find(|l| l.dnskey == *k).map(|l| l.id);
        let trusted = served
            .iter()
            .filter(|k| ds.iter().any(|d| k.matches_ds(ZONE, d)))
            .filter_map(id_of)
            .any(|id| self.dnskey.signers.contains(&id));
        let signs = |set: &Set| {
            served
                .iter()
                .filter_map(id_of)
                .any(|id| set.signers.contains(&id))
        };
        trusted && signs(&self.soa) && signs(&self.www)
    }

    /// RFC 4035 section 2.2: every algorithm of the DNSKEY RRset signs every RRset (the
    /// signer's duty, which an algorithm rollover's order keeps at every step).
    fn every_algorithm_signs(&self, keys: &[Listed]) -> bool {
        let algorithm = |id: &u64| {
            keys.iter()
                .find(|k| k.id == *id)
                .map(|k| k.dnskey.algorithm)
        };
        let of = |set: &Set| -> Vec<u8> { set.signers.iter().filter_map(algorithm).collect() };
        self.dnskeys().iter().all(|k| {
            [&self.dnskey, &self.soa, &self.www]
                .iter()
                .all(|set| of(set).contains(&k.algorithm))
        })
    }
}

fn rrset(records: &[Record], owner: &str, rtype: RecordType, keys: &[Listed]) -> Set {
    let name = crate::wire::parse_name(owner).expect("a name");
    let of_set: Vec<&Record> = records
        .iter()
        .filter(|r| r.name == name && r.record_type() == rtype)
        .collect();
    let sigs: Vec<Rrsig> = records
        .iter()
        .filter(|r| r.name == name)
        .filter_map(|r| match &r.data {
            RData::DNSSEC(DNSSECRData::RRSIG(sig)) if sig.input().type_covered == rtype => {
                Rrsig::from_rdata(&canonical(&r.data))
            }
            _ => None,
        })
        .collect();
    let rdatas: Vec<Vec<u8>> = of_set.iter().map(|r| canonical(&r.data)).collect();
    let all: Vec<Dnskey> = keys.iter().map(|k| k.dnskey.clone()).collect();
    let limits = SigLimits {
        signatures: 16,
        keys_per_tag: 4,
    };
    let signed = SignedRrset {
        owner,
        rtype: u16::from(rtype),
        rdatas: &rdatas,
        sigs: &sigs,
    };
    let verified = verified_signers(&signed, &all, ZONE, now(), limits);
    assert_eq!(
        verified.len(),
        sigs.len(),
        "every RRSIG over {owner} {rtype} verifies with a key of the keystore"
    );
    let mut signers: Vec<u64> = verified
        .iter()
        .filter_map(|k| keys.iter().find(|l| l.dnskey == **k).map(|l| l.id))
        .collect();
    signers.sort_unstable();
    Set {
        ttl: of_set.iter().map(|r| r.ttl).min().unwrap_or_default(),
        rdatas: of_set.iter().map(|r| r.data.clone()).collect(),
        signers,
    }
}

fn ids(keys: &[&Listed]) -> Vec<u64> {
    let mut ids: Vec<u64> = keys.iter().map(|k| k.id).collect();
    ids.sort_unstable();
    ids
}

fn ds(key: &Listed) -> Ds {
    key.dnskey.to_ds(ZONE, DigestType::Sha256).expect("a DS")
}

/// Each of 4.7's rules, one step at a time: a published inactive key is served and
/// signs nothing; an active key signs; an active ZSK takes the zone's data from the SEP
/// key of its algorithm, which then signs the DNSKEY RRset only; an active unpublished
/// key signs unseen; every algorithm with an active key signs every RRset (RSA and
/// Ed25519 signatures verifying); the DNSKEY (and CDS) TTL is the SOA minimum.
#[tokio::test]
async fn the_lab_serves_the_simulators_keystore_as_powerdns_does() {
    let rig = Rig::start().await;
    rig.call(
        Method::PUT,
        "/metadata/PUBLISH-CDS",
        json!({ "metadata": ["2"] }),
    )
    .await;
    // No key: nothing served, nothing signed.
    let served = rig.served().await;
    assert!(served.dnskey.rdatas.is_empty() && served.soa.signers.is_empty());

    // The CSK 4.7 makes signs everything.
    let csk = rig.secure().await;
    let served = rig.served().await;
    assert_eq!(served.dnskeys(), vec![csk.dnskey.clone()]);
    for set in [&served.dnskey, &served.soa, &served.www, &served.cds] {
        assert_eq!(set.signers, ids(&[&csk]), "{set:?}");
    }
    assert_eq!(served.cds_tags(), vec![csk.dnskey.key_tag()]);

    // A ZSK published inactive: served, signing nothing.
    let zsk = rig.add("zsk", "ECDSAP256SHA256", false, true).await;
    let served = rig.served().await;
    assert!(served.has(&zsk) && served.has(&csk));
    assert_eq!(served.dnskey.signers, ids(&[&csk]));
    assert_eq!(served.soa.signers, ids(&[&csk]));
    assert_eq!(served.www.signers, ids(&[&csk]));

    // Active: it takes the data, the CSK (a KSK now) keeps the DNSKEY RRset only; CDS is
    // signed by both and names the SEP key alone.
    rig.set(&zsk, true, true).await;
    let served = rig.served().await;
    assert_eq!(served.dnskey.signers, ids(&[&csk]));
    assert_eq!(served.soa.signers, ids(&[&zsk]));
    assert_eq!(served.www.signers, ids(&[&zsk]));
    assert_eq!(served.cds.signers, ids(&[&csk, &zsk]));
    assert_eq!(served.cds_tags(), vec![csk.dnskey.key_tag()]);

    // An Ed25519 KSK active and unpublished: its signatures over every RRset verify with
    // its key, which is not served.
    let ed = rig.add("ksk", "ED25519", true, false).await;
    let served = rig.served().await;
    assert!(!served.has(&ed));
    assert_eq!(served.dnskey.signers, ids(&[&csk, &ed]));
    assert_eq!(served.soa.signers, ids(&[&zsk, &ed]));
    assert_eq!(served.www.signers, ids(&[&zsk, &ed]));
    assert!(!served.cds_tags().contains(&ed.dnskey.key_tag()));

    // An RSA KSK, published inactive: served, in the CDS (an entry point), silent; then
    // active: a third algorithm signs every RRset.
    let rsa = rig.add("ksk", "RSASHA256", false, true).await;
    assert_eq!(rsa.dnskey.algorithm, 8);
    let served = rig.served().await;
    assert!(served.has(&rsa));
    assert!(served.cds_tags().contains(&rsa.dnskey.key_tag()));
    assert!(!served.soa.signers.contains(&rsa.id));
    rig.set(&rsa, true, true).await;
    let served = rig.served().await;
    assert_eq!(served.dnskey.signers, ids(&[&csk, &ed, &rsa]));
    assert_eq!(served.soa.signers, ids(&[&zsk, &ed, &rsa]));
    assert_eq!(served.www.signers, ids(&[&zsk, &ed, &rsa]));

    // The ZSK inactive again: the CSK signs everything once more.
    rig.set(&zsk, false, true).await;
    let served = rig.served().await;
    assert_eq!(served.soa.signers, ids(&[&csk, &ed, &rsa]));
    assert_eq!(
        served.cds_tags(),
        {
            let mut tags = vec![
                csk.dnskey.key_tag(),
                zsk.dnskey.key_tag(),
                rsa.dnskey.key_tag(),
            ];
            tags.sort_unstable();
            tags
        },
        "every published key 4.7 calls no ZSK has its CDS"
    );

    // The DNSKEY RRset, CDS included, at the SOA minimum, the zone's own TTL apart.
    assert_eq!(served.dnskey.ttl, served.soa_minimum);
    assert_eq!(served.cds.ttl, served.soa_minimum);
    rig.lab
        .set_account_dnskey_ttl("west", ZONE, 7)
        .expect("the zone at west");
    rig.lab
        .set_account_zone_ttl("west", ZONE, 3)
        .expect("the zone at west");
    let served = rig.served().await;
    assert_eq!(
        (served.dnskey.ttl, served.cds.ttl, served.soa_minimum),
        (7, 7, 7)
    );
    assert_eq!((served.soa.ttl, served.www.ttl), (3, 3));

    // No key active: the keys are still served, nothing is signed.
    for key in [&csk, &ed, &rsa] {
        rig.set(key, false, true).await;
    }
    let served = rig.served().await;
    assert_eq!(served.dnskeys().len(), 4);
    for set in [&served.dnskey, &served.soa, &served.www] {
        assert!(set.signers.is_empty(), "{set:?}");
    }
}

/// One step of a rollover, checked once the key calls are made: what `parent` publishes
/// validates the zone, and every algorithm served signs every RRset.
async fn step(rig: &Rig, what: &str, parent: &[Ds]) {
    let keys = rig.keys().await;
    let served = rig.served().await;
    assert!(
        served.validates(parent, &keys),
        "{what}: the zone does not validate from its DS set\n{served:#?}"
    );
    assert!(
        served.every_algorithm_signs(&keys),
        "{what}: an algorithm of the DNSKEY RRset does not sign every RRset\n{served:#?}"
    );
}

/// The rollovers the daemon drives at PowerDNS, played through the simulator's API: at
/// every step, a validator holding the parent's DS set validates the zone and every
/// algorithm served signs every RRset. A step taken too early (a key removed before its
/// successor signs, a DS removed before the new key signs the DNSKEY RRset) fails the
/// same check.
#[tokio::test]
async fn rollovers_play_end_to_end_in_the_lab() {
    // ZSK pre-publish: new ZSK published, signatures swapped, old ZSK removed.
    let rig = Rig::start().await;
    let ksk = rig.secure().await;
    let zsk1 = rig.add("zsk", "ECDSAP256SHA256", true, true).await;
    let parent = vec![ds(&ksk)];
    step(&rig, "ZSK: start", &parent).await;
    let zsk2 = rig.add("zsk", "ECDSAP256SHA256", false, true).await;
    step(&rig, "ZSK: new one published", &parent).await;
    rig.set(&zsk2, true, true).await;
    step(&rig, "ZSK: both active", &parent).await;
    rig.set(&zsk1, false, true).await;
    step(&rig, "ZSK: signatures swapped", &parent).await;
    assert_eq!(rig.served().await.soa.signers, ids(&[&zsk2]));
    rig.delete(&zsk1).await;
    step(&rig, "ZSK: old one removed", &parent).await;

    // KSK double-DS: new KSK published, its DS beside the old, keys swapped, old DS
    // removed.
    let ksk2 = rig.add("ksk", "ECDSAP256SHA256", false, true).await;
    step(&rig, "KSK: new one published", &parent).await;
    // Its DS alone would not do yet: a published inactive key signs nothing.
    let keys = rig.keys().await;
    assert!(!rig.served().await.validates(&[ds(&ksk2)], &keys));
    let both = vec![ds(&ksk), ds(&ksk2)];
    step(&rig, "KSK: both DS", &both).await;
    rig.set(&ksk2, true, true).await;
    step(&rig, "KSK: both active", &both).await;
    rig.delete(&ksk).await;
    step(&rig, "KSK: old one removed", &both).await;
    step(&rig, "KSK: old DS removed", &[ds(&ksk2)]).await;
    let served = rig.served().await;
    assert_eq!(
        (served.dnskey.signers.clone(), served.soa.signers.clone()),
        (ids(&[&ksk2]), ids(&[&zsk2]))
    );

    // CSK double-DS, on a zone of its own.
    let rig = Rig::start().await;
    let csk1 = rig.secure().await;
    step(&rig, "CSK: start", &[ds(&csk1)]).await;
    let csk2 = rig.add("csk", "ECDSAP256SHA256", false, true).await;
    let both = vec![ds(&csk1), ds(&csk2)];
    step(&rig, "CSK: both DS", &both).await;
    rig.set(&csk2, true, true).await;
    step(&rig, "CSK: both active", &both).await;
    rig.delete(&csk1).await;
    step(&rig, "CSK: old DS removed", &[ds(&csk2)]).await;
    // Removed one step too early, the old DS alone no longer validates.
    let keys = rig.keys().await;
    assert!(!rig.served().await.validates(&[ds(&csk1)], &keys));

    // Algorithm rollovers the conservative way (RFC 6781 section 4.1.4): the new keys
    // sign unpublished, then are published, the DS swapped, the old keys unpublished,
    // then removed.
    for (from, to) in [
        ("ECDSAP256SHA256", "ED25519"),
        ("RSASHA256", "ECDSAP256SHA256"),
    ] {
        let rig = Rig::start().await;
        let old_ksk = rig.add("ksk", from, true, true).await;
        let old_zsk = rig.add("zsk", from, true, true).await;
        let what = |s: &str| format!("{from} -> {to}: {s}");
        let old_ds = vec![ds(&old_ksk)];
        step(&rig, &what("start"), &old_ds).await;
        let new_ksk = rig.add("ksk", to, true, false).await;
        let new_zsk = rig.add("zsk", to, true, false).await;
        step(&rig, &what("new keys sign unpublished"), &old_ds).await;
        let served = rig.served().await;
        assert!(!served.has(&new_ksk) && !served.has(&new_zsk));
        assert_eq!(served.soa.signers, ids(&[&old_zsk, &new_zsk]));
        for key in [&new_ksk, &new_zsk] {
            rig.set(key, true, true).await;
        }
        step(&rig, &what("new keys published"), &old_ds).await;
        let both = vec![ds(&old_ksk), ds(&new_ksk)];
        step(&rig, &what("both DS"), &both).await;
        let new_ds = vec![ds(&new_ksk)];
        step(&rig, &what("DS swapped"), &new_ds).await;
        for key in [&old_ksk, &old_zsk] {
            rig.set(key, true, false).await;
        }
        step(&rig, &what("old keys unpublished"), &new_ds).await;
        // The old algorithm still signs, unseen: a validator of the old DS alone fails.
        let keys = rig.keys().await;
        let served = rig.served().await;
        assert!(!served.validates(&old_ds, &keys));
        assert!(served.soa.signers.contains(&old_zsk.id));
        for key in [&old_ksk, &old_zsk] {
            rig.delete(key).await;
        }
        step(&rig, &what("old keys removed"), &new_ds).await;
        let served = rig.served().await;
        assert_eq!(served.dnskey.signers, ids(&[&new_ksk]));
        assert_eq!(served.soa.signers, ids(&[&new_zsk]));
    }
}

/// The simulator's RSA keys are the lab's pairs, a different one for each key of a zone
/// while there are some, and asked in a size the lab does not hold, refused with the
/// reason.
#[tokio::test]
async fn rsa_keys_are_the_labs_pairs_each_once_in_a_zone() {
    let rig = Rig::start().await;
    let mut tags = Vec::new();
    for _ in 0..crate::keys::RSA_KEY_COUNT {
        tags.push(
            rig.add("zsk", "RSASHA256", true, true)
                .await
                .dnskey
                .key_tag(),
        );
    }
    tags.sort_unstable();
    tags.dedup();
    assert_eq!(tags.len(), crate::keys::RSA_KEY_COUNT);
    let path = format!("/api/v1/servers/localhost/zones/{ZONE}/cryptokeys");
    let form = |bits| json!({ "keytype": "zsk", "algorithm": "RSASHA256", "bits": bits });
    let (status, answer) = rig.sim.call(Method::POST, &path, form(2048)).await;
    assert_eq!(status, 422, "{answer}");
    let (status, answer) = rig.sim.call(Method::POST, &path, form(1024)).await;
    assert_eq!(status, 422);
    assert!(answer["error"].as_str().is_some_and(|e| e.contains("2048")));
    // Every one of them signs what it serves.
    let served = rig.served().await;
    assert_eq!(served.soa.signers.len(), crate::keys::RSA_KEY_COUNT);
}
