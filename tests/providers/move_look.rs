//! `engine::move_look` on real servers: two PowerDNS Authoritative servers (Debian's
//! `pdns-server`, sqlite3, `direct-dnskey=yes`) as the two accounts of a signed move, each
//! signing `m.test.` with its own key, under a signed Knot root and two Knot servers of
//! `test.` that delegate `m.test.` to the source with DS(Ks). The look is made by the real
//! observer from the lab's root. Its own block, 127.0.90.x (see test-support/src/world.rs
//! for the blocks of the other tests):
//!
//! ```text
//!  .        127.0.90.1      knotd  signed; its DS is the trust anchor
//!  test.    127.0.90.2, .3  knotd  a.nic.test., b.nic.test. (each its own key, both keys
//!                                  published); m.test. NS ns1/ns2.src.test., DS(Ks)
//!  source   127.0.90.4, .5  pdns_server  ns1.src.test., ns2.src.test.
//!  target   127.0.90.6, .7  pdns_server  ns1.dst.test., ns2.dst.test. (delegated by nobody)
//! ```
//! All on one port (53 where free, else one the kernel picks); every process is stopped by
//! its PID.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use dnssec_warden::dns::{
    DnsObserver, DnsSettings, DnskeyAnswer, Observer, UnknownReason, delegation::ns_set,
};
use dnssec_warden::dnssec::Dnskey;
use dnssec_warden::engine::move_look::{self, NO_ADDRESS};
use dnssec_warden::lifecycle::signed_move::{
    self, Delegation, Move, MoveEffect, MoveLook, MovePolicy, Phase, Side,
};
use dnssec_warden::provider::powerdns::{PowerDnsClient, PowerDnsSettings};
use dnssec_warden::provider::{PermitAnswer, Provider};
use dnssec_warden::secret::Secret;
use dnssec_warden::time::SystemClock;
use dnssec_warden_test_support::knot::{Knot, Signing, ZoneConf, pick_port, wait_for_zone};
use dnssec_warden_test_support::pdns::{Pdns, PdnsOptions};

const BLOCK: u8 = 90;
/// The apex NS TTL of a zone made through PowerDNS's API in the lab.
const APEX_NS_TTL: u32 = 2;
const ZONE: &str = "m.test.";
const API_KEY: &str = "move-look-api-key";
const SOURCE_NS: [&str; 2] = ["ns1.src.test.", "ns2.src.test."];
const TARGET_NS: [&str; 2] = ["ns1.dst.test.", "ns2.dst.test."];

fn at(host: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, BLOCK, host)
}

fn soa(ns: &str) -> String {
    format!("@ 2 SOA {ns} hostmaster.test. $SERIAL 3600 600 86400 2\n")
}

fn allowed() -> PermitAnswer<'static> {
    Box::pin(async { true })
}

/// The lab, its processes stopped by their PIDs when dropped (the directory last).
struct World {
    port: u16,
    source: Pdns,
    target: Pdns,
    tld_b: Knot,
    _tld_a: Knot,
    _root: Knot,
    settings: DnsSettings,
    _dir: tempfile::TempDir,
}

fn client(pdns: &Pdns) -> PowerDnsClient {
    let settings = PowerDnsSettings {
        request_timeout: Duration::from_secs(5),
        max_attempts: 2,
        retry_budget: Duration::from_secs(5),
        ..PowerDnsSettings::new(pdns.base_url().parse().expect("a URL"))
    };
    PowerDnsClient::new(&settings, Secret::new(API_KEY.into())).expect("a client")
}

/// Starts both PowerDNS servers, makes `m.test.` signed at each, then the root and
/// `test.` delegating it to the source with the source's DS.
async fn world() -> (World, PowerDnsClient, PowerDnsClient) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let port = pick_port(&(1..=7).map(at).collect::<Vec<_>>()).expect("a port");
    let direct = PdnsOptions {
        direct_dnskey: true,
        default_algorithm: None,
        zsk_algorithm: None,
    };
    let source = Pdns::start_with(
        &dir.path().join("source"),
        &[at(4), at(5)],
        port,
        API_KEY,
        direct,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let target = Pdns::start_with(
        &dir.path().join("target"),
        &[at(6), at(7)],
        port,
        API_KEY,
        direct,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (src, dst) = (client(&source), client(&target));
    for (c, ns) in [(&src, SOURCE_NS), (&dst, TARGET_NS)] {
        c.create_zone(ZONE, &ns).await.expect("the zone is created");
        Provider::set_dnssec(c, ZONE, true, &allowed)
            .await
            .expect("DNSSEC on");
    }
    let ds = source.ds(ZONE).unwrap_or_else(|e| panic!("{e}"));

    let tld = format!(
        "$ORIGIN test.\n{}@ 3600 NS a.nic.test.\n@ 3600 NS b.nic.test.\n\
         a.nic 3600 A {}\nb.nic 3600 A {}\nns1.src 3600 A {}\nns2.src 3600 A {}\n\
         ns1.dst 3600 A {}\nns2.dst 3600 A {}\n\
         m 2 NS {}\nm 2 NS {}\nm 2 DS {ds}\n",
        soa("a.nic.test."),
        at(2),
        at(3),
        at(4),
        at(5),
        at(6),
        at(7),
        SOURCE_NS[0],
        SOURCE_NS[1],
    );
    let mut root = Knot::new(
        &dir.path().join("root"),
        at(1),
        port,
        &[ZoneConf::new(".", String::new(), Signing::Manual)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut tld_a = Knot::new(
        &dir.path().join("tld-a"),
        at(2),
        port,
        &[ZoneConf::new("test.", tld.clone(), Signing::Manual)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut tld_b = Knot::new(
        &dir.path().join("tld-b"),
        at(3),
        port,
        &[ZoneConf::new("test.", tld, Signing::Manual)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let root_ds = root.generate_csk(".").unwrap_or_else(|e| panic!("{e}"));
    let ds_a = tld_a
        .generate_csk("test.")
        .unwrap_or_else(|e| panic!("{e}"));
    let ds_b = tld_b
        .generate_csk("test.")
        .unwrap_or_else(|e| panic!("{e}"));
    // Both TLD servers publish both keys (RFC 8901), as in the lab's RealWorld.
    let keys_a = tld_a.dnskey_text("test.").unwrap_or_else(|e| panic!("{e}"));
    let keys_b = tld_b.dnskey_text("test.").unwrap_or_else(|e| panic!("{e}"));
    tld_a.import_public_keys("test.", &keys_b).unwrap();
    tld_b.import_public_keys("test.", &keys_a).unwrap();
    root.write_zone(
        ".",
        &format!(
            "$ORIGIN .\n{}@ 3600 NS a.root.test.\ntest. 3600 NS a.nic.test.\ntest. 3600 NS b.nic.test.\n\
             test. 3600 DS {ds_a}\ntest. 3600 DS {ds_b}\n\
             a.root.test. 3600 A {}\na.nic.test. 3600 A {}\nb.nic.test. 3600 A {}\n",
            soa("a.root.test."),
            at(1),
            at(2),
            at(3)
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let anchor = dir.path().join("root.ds");
    std::fs::write(&anchor, format!(". 3600 IN DS {root_ds}\n")).unwrap();
    for k in [&mut root, &mut tld_a, &mut tld_b] {
        k.start().unwrap_or_else(|e| panic!("{e}"));
    }
    let limit = Duration::from_secs(20);
    let mut waits = vec![
        (root.socket(), "."),
        (tld_a.socket(), "test."),
        (tld_b.socket(), "test."),
    ];
    for h in 4..=7 {
        waits.push((std::net::SocketAddr::from((at(h), port)), ZONE));
    }
    for (server, zone) in waits {
        wait_for_zone(server, zone, limit)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{e}\n{}{}{}{}{}",
                    root.log(),
                    tld_a.log(),
                    tld_b.log(),
                    source.log(),
                    target.log()
                )
            });
    }
    let settings = DnsSettings {
        root_hints: vec![at(1).into()],
        port,
        trust_anchor_file: Some(anchor),
        validating_resolvers: Vec::new(),
        query_timeout: Duration::from_secs(1),
        query_attempts: 2,
        ..DnsSettings::default()
    };
    let w = World {
        port,
        source,
        target,
        tld_b,
        _tld_a: tld_a,
        _root: root,
        settings,
        _dir: dir,
    };
    (w, src, dst)
}

/// Whether every answer is known and each satisfies `ok` (and there is one at least).
fn every<T: std::fmt::Debug>(answers: &[signed_move::Answer<T>], ok: impl Fn(&T) -> bool) -> bool {
    !answers.is_empty() && answers.iter().all(|a| a.answer.as_ref().is_ok_and(&ok))
}

fn addresses<T>(answers: &[signed_move::Answer<T>]) -> Vec<String> {
    let mut a: Vec<String> = answers.iter().map(|a| a.address.clone()).collect();
    a.sort();
    a
}

/// Both keys served, signed only by `own`.
fn both_signed_by(s: &signed_move::ChildSeen, ks: &Dnskey, kt: &Dnskey, own: &Dnskey) -> bool {
    s.keys.contains(ks) && s.keys.contains(kt) && s.signed_by == vec![own.clone()]
}

const POLICY: MovePolicy = MovePolicy {
    propagation_margin: Duration::from_secs(1),
    assumed_ns_ttl: Duration::from_secs(3),
    assumed_ds_ttl: Duration::from_secs(3),
    confirmation_gap: Duration::from_secs(600),
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_moves_look_asks_both_accounts_both_sets_of_servers_and_every_parent() {
    let started = Instant::now();
    let (mut w, src, dst) = world().await;
    eprintln!(
        "the world started in {:?} on port {}",
        started.elapsed(),
        w.port
    );
    let observer = DnsObserver::new(&w.settings).expect("an observer");
    // The name servers as each account lists them (the provider's apex NS list).
    let source_ns = Provider::zone(&src, ZONE)
        .await
        .unwrap()
        .name_servers
        .expect("the source lists its name servers");
    let target_ns = Provider::zone(&dst, ZONE)
        .await
        .unwrap()
        .name_servers
        .expect("the target lists its name servers");
    assert_eq!(source_ns, ns_set(SOURCE_NS));
    assert_eq!(target_ns, ns_set(TARGET_NS));
    let ks = Provider::dnssec_key(&src, ZONE).await.unwrap().dnskey;
    let kt = Provider::dnssec_key(&dst, ZONE).await.unwrap().dnskey;
    assert_ne!(ks, kt, "each account signs with its own key");
    let look = async || {
        move_look::look(
            &src,
            &dst,
            &observer,
            ZONE,
            &source_ns,
            &target_ns,
            &SystemClock,
        )
        .await
    };

    // Before the exchange.
    let t = Instant::now();
    let first = look().await;
    eprintln!("a look took {:?}", t.elapsed());
    assert_eq!(first.source_key, Ok(Some(ks.clone())));
    assert_eq!(first.target_key, Ok(Some(kt.clone())));
    assert_eq!(first.source_foreign, Ok(vec![]));
    assert_eq!(first.target_foreign, Ok(vec![]));
    assert_eq!(
        addresses(&first.source_children),
        ["127.0.90.4", "127.0.90.5"]
    );
    assert!(
        every(&first.source_children, |s| s.keys.contains(&ks)
            && !s.keys.contains(&kt)
            && s.signed_by == vec![ks.clone()]),
        "{:#?}",
        first.source_children
    );
    // The target is delegated by nobody: asked at its own name servers' addresses.
    assert_eq!(
        addresses(&first.target_children),
        ["127.0.90.6", "127.0.90.7"]
    );
    assert!(
        every(&first.target_children, |s| s.keys.contains(&kt)
            && !s.keys.contains(&ks)
            && s.signed_by == vec![kt.clone()]),
        "{:#?}",
        first.target_children
    );
    assert_eq!(addresses(&first.parents), ["127.0.90.2", "127.0.90.3"]);
    assert!(
        every(&first.parents, |p| p.delegation == Delegation::Source
            && p.validated
            && p.ds_ttl == Some(2)
            && p.ns_ttl == Some(2)
            && p.ds.len() == 1
            && ks.matches_ds(ZONE, &p.ds[0])),
        "{:#?}",
        first.parents
    );
    // PowerDNS's apex NS TTL (the zone made through its API).
    assert_eq!(first.source_apex_ns_ttl, Some(APEX_NS_TTL), "{first:#?}");

    // `child_at` asks by name within the delegation's caps: a name without an address is
    // an unknown answer that still counts; more names than a delegation may have is
    // refused whole.
    let with_lame = observer
        .child_at(ZONE, &[TARGET_NS[0].into(), "ns9.nowhere.test.".into()])
        .await
        .expect("a view");
    assert_eq!(with_lame.answers.len(), 2, "{with_lame:#?}");
    assert!(
        with_lame.answers.iter().any(|a| matches!(
            &a.answer,
            DnskeyAnswer::Unknown(UnknownReason::NoAddress(_))
        )),
        "{with_lame:#?}"
    );
    let over = dnssec_warden::dns::budget::DEFAULT_MAX_NS_PER_DELEGATION + 1;
    let many: Vec<String> = (0..over).map(|i| format!("ns{i}.dst.test.")).collect();
    let refused = observer.child_at(ZONE, &many).await;
    assert!(
        matches!(&refused, Err(e) if e.reason.contains("max_ns_per_delegation")),
        "{refused:?}"
    );

    // The planner: the target serves Kt, self-signed, so the keys are to be exchanged,
    // and each side is asked for the other's key.
    let decided = signed_move::step(&Move::new(ZONE, ks.clone()), &first, &POLICY);
    assert_eq!(decided.next.phase, Phase::ExchangingKeys, "{decided:#?}");
    assert_eq!(decided.next.target_key, Some(kt.clone()));
    for (side, key) in [(Side::Source, &kt), (Side::Target, &ks)] {
        assert!(
            decided.effects.contains(&MoveEffect::SetForeign {
                side,
                keys: vec![key.clone()]
            }),
            "{side:?}: {:?}",
            decided.effects
        );
    }

    // The effects performed: each account publishes the other's key.
    Provider::set_foreign_dnskeys(&src, ZONE, std::slice::from_ref(&kt), 2, &allowed)
        .await
        .unwrap();
    Provider::set_foreign_dnskeys(&dst, ZONE, std::slice::from_ref(&ks), 2, &allowed)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let exchanged = |l: &MoveLook| {
        every(&l.source_children, |s| both_signed_by(s, &ks, &kt, &ks))
            && every(&l.target_children, |s| both_signed_by(s, &ks, &kt, &kt))
    };
    let second = loop {
        let l = look().await;
        if exchanged(&l) {
            break l;
        }
        assert!(
            Instant::now() < deadline,
            "the servers never served both keys: {l:#?}\n{}{}",
            w.source.log(),
            w.target.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(second.source_foreign, Ok(vec![kt.clone()]));
    assert_eq!(second.target_foreign, Ok(vec![ks.clone()]));
    assert!(every(&second.parents, |p| p.delegation
        == Delegation::Source
        && p.validated));
    let held = signed_move::step(&decided.next, &second, &POLICY);
    assert_eq!(held.next.phase, Phase::ExchangingKeys, "{held:#?}");
    assert_eq!(held.next.confirmed_at, Some(second.at), "{held:#?}");
    assert!(
        !held
            .effects
            .iter()
            .any(|e| matches!(e, MoveEffect::SetForeign { .. })),
        "published already: {:?}",
        held.effects
    );

    // One TLD server stopped (by its PID): its address is unknown, the other still
    // answers.
    w.tld_b.stop();
    let third = look().await;
    let by = |a: &str| third.parents.iter().find(|p| p.address == a);
    assert!(
        by("127.0.90.3").is_some_and(|p| p.answer.is_err()),
        "{:#?}",
        third.parents
    );
    assert!(
        by("127.0.90.2").is_some_and(|p| p
            .answer
            .as_ref()
            .is_ok_and(|p| p.delegation == Delegation::Source)),
        "{:#?}",
        third.parents
    );
    assert!(third.parents.iter().all(|p| p.address != NO_ADDRESS));
    // Holding: the phase's question cannot be answered by every parent address, but the
    // children still can.
    assert!(exchanged(&third));
    eprintln!("the test took {:?}", started.elapsed());
}
