//! The lab registry of `test.` (dnssec_warden_lab::registry) against real software: the
//! children hosted at a real PowerDNS (Debian's `pdns-server`, sqlite3), which publishes
//! CDS and CDNSKEY (`pdnsutil set-publish-cds`, `set-publish-cdnskey`), and the real Knot
//! TLD servers, which take the registry's UPDATEs and sign the DS. Each test has its own
//! 127.0.B.x block (73-76); see test-support/src/world.rs.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use dnssec_warden_lab::dnssec::{
    Dnskey, Ds, Rrsig, SigLimits, SignedRrset, name_to_wire, verified_signers,
};
use dnssec_warden_lab::registry::{self, Registry, What, msg};
use dnssec_warden_test_support::knot::{Knot, Signing, ZoneConf, wait_for_zone};
use dnssec_warden_test_support::world::{
    REGISTRY_HOST, REGISTRY_NAME, RealWorld, RegistryOptions, Tld, WorldOptions, ip,
};

const ASKER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

async fn world(block: u8, zone: &str, options: RegistryOptions) -> RealWorld {
    RealWorld::start_with(
        block,
        &[zone],
        WorldOptions {
            at_powerdns: vec![zone.to_string()],
            registry: Some(options),
            ..WorldOptions::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("the world starts: {e}"))
}

fn registry(w: &RealWorld) -> &Registry {
    w.registry.as_ref().expect("a world with a registry")
}

fn pdnsutil(w: &RealWorld, args: &[&str]) -> String {
    w.pdns
        .as_ref()
        .expect("PowerDNS")
        .pdnsutil(args)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Signs the zone at PowerDNS and publishes its CDS and CDNSKEY.
fn secure_with_cds(w: &RealWorld, zone: &str) {
    pdnsutil(w, &["secure-zone", zone]);
    pdnsutil(w, &["set-publish-cds", zone]);
    pdnsutil(w, &["set-publish-cdnskey", zone]);
}

/// Every SHA-256 DS of the zone's entry points, as PowerDNS computes them (upper case).
fn pdns_ds_all(w: &RealWorld, zone: &str) -> Vec<String> {
    pdns_ds_of(w, zone, &["2"])
}

/// Every DS of the zone's entry points with one of `digests`, as PowerDNS computes them.
fn pdns_ds_of(w: &RealWorld, zone: &str, digests: &[&str]) -> Vec<String> {
    let out = pdnsutil(w, &["export-zone-ds", zone]);
    let mut all: Vec<String> = out
        .lines()
        .filter_map(|l| l.split_once(" DS "))
        .map(|(_, rdata)| {
            rdata
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_uppercase()
        })
        .filter(|rdata| {
            rdata
                .split_whitespace()
                .nth(2)
                .is_some_and(|d| digests.contains(&d))
        })
        .collect();
    all.sort();
    all
}

/// The DS RRset one TLD server serves for `zone` (`tag alg type HEX`, sorted).
async fn tld_ds(tld: &Knot, zone: &str) -> Vec<String> {
    let name = name_to_wire(zone).unwrap();
    let m = msg::ask(
        ASKER,
        tld.socket(),
        &name,
        msg::TYPE_DS,
        Duration::from_secs(2),
    )
    .await
    .unwrap_or_else(|e| panic!("{} DS at {}: {e}", zone, tld.addr));
    let mut set: Vec<String> = m
        .rrset(&name, msg::TYPE_DS)
        .iter()
        .map(|r| Ds::from_rdata(r).unwrap().to_string())
        .collect();
    set.sort();
    set
}

/// The DS RRset at both TLD servers, when they agree.
async fn ds_everywhere(w: &RealWorld, zone: &str) -> Option<Vec<String>> {
    let a = tld_ds(&w.tld_a, zone).await;
    let b = tld_ds(&w.tld_b, zone).await;
    (a == b).then_some(a)
}

/// The DS RRset of `zone` at `tld` carries a signature by a key of `test.` that verifies
/// (the lab's own arithmetic): Knot signed what the UPDATE wrote.
async fn ds_signed_at(tld: &Knot, zone: &str) -> bool {
    let timeout = Duration::from_secs(2);
    let apex = name_to_wire("test.").unwrap();
    let keys = msg::ask(ASKER, tld.socket(), &apex, msg::TYPE_DNSKEY, timeout)
        .await
        .unwrap();
    let keys: Vec<Dnskey> = keys
        .rrset(&apex, msg::TYPE_DNSKEY)
        .iter()
        .map(|r| Dnskey::from_rdata(r).unwrap())
        .collect();
    let name = name_to_wire(zone).unwrap();
    let m = msg::ask(ASKER, tld.socket(), &name, msg::TYPE_DS, timeout)
        .await
        .unwrap();
    let sigs: Vec<Rrsig> = m
        .rrsigs(&name, msg::TYPE_DS)
        .iter()
        .filter_map(|r| Rrsig::from_rdata(r))
        .collect();
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    let rdatas = m.rrset(&name, msg::TYPE_DS);
    let rrset = SignedRrset {
        owner: zone,
        rtype: msg::TYPE_DS,
        rdatas: &rdatas,
        sigs: &sigs,
    };
    !rdatas.is_empty()
        && !verified_signers(&rrset, &keys, "test.", now, SigLimits::default()).is_empty()
}

/// Waits (bounded) for an event of `zone` that `want` accepts; the first such.
async fn wait_event(
    reg: &Registry,
    zone: &str,
    within: Duration,
    want: impl Fn(&What) -> bool,
) -> registry::RegistryEvent {
    let until = Instant::now() + within;
    for _ in 0..10_000 {
        if let Some(e) = reg
            .events()
            .into_iter()
            .find(|e| e.child == zone && want(&e.what))
        {
            return e;
        }
        if Instant::now() > until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "no such event for {zone} within {within:?} ({} scans):\n{}",
        reg.scans(),
        reg.story(zone)
    );
}

fn refused(what: &What, says: &str) -> bool {
    matches!(what, What::Refused(why) if why.contains(says))
}

/// A zone signed at PowerDNS with its CDS published and no DS at the TLD gets its DS
/// only after the CDS has been seen unchanged for the bootstrap period (a change within
/// it starts the period again); the DS is Knot-signed and
/// names PowerDNS's key; a CDS equal to the DS does nothing; the RFC 8078 delete
/// (`CDS 0 0 0 00`, `CDNSKEY 0 3 0 AA==`) removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_after_the_period_then_nothing_then_delete() {
    let zone = "pd.test.";
    let period = Duration::from_secs(5);
    let w = world(
        73,
        zone,
        RegistryOptions {
            bootstrap_period: period,
            scan_interval: Duration::from_millis(500),
            notify: false,
            children: Vec::new(),
        },
    )
    .await;
    let reg = registry(&w);
    wait_event(reg, zone, Duration::from_secs(20), |w| {
        *w == What::Scanned("no CDS or CDNSKEY".into())
    })
    .await;

    secure_with_cds(&w, zone);
    let sha256 = pdns_ds_all(&w, zone);
    assert_eq!(sha256.len(), 1, "{sha256:?}");
    let seen = wait_event(reg, zone, Duration::from_secs(20), |w| {
        refused(w, "bootstrap: consistent since")
    })
    .await;
    // A CDS change within the period (a SHA-384 digest beside the SHA-256) starts the
    // clock again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    pdnsutil(&w, &["set-publish-cds", zone, "2,4"]);
    let ds = pdns_ds_of(&w, zone, &["2", "4"]);
    assert_eq!(ds.len(), 2, "{ds:?}");
    let What::Refused(said) = &seen.what else {
        unreachable!()
    };
    let first = wait_event(reg, zone, Duration::from_secs(20), |w| {
        matches!(w, What::Refused(why) if why.starts_with("bootstrap: consistent since") && why != said)
    })
    .await;
    assert!(first.at.duration_since(seen.at).unwrap_or_default() >= Duration::from_secs(2));
    // Within the period: no DS at either TLD server.
    let mut looked = 0;
    while first.at.elapsed().unwrap_or_default() + Duration::from_millis(800) < period {
        assert_eq!(
            ds_everywhere(&w, zone).await,
            Some(vec![]),
            "a DS before the bootstrap period\n{}",
            reg.story(zone)
        );
        looked += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(looked >= 3, "looked {looked} times within the period");
    let published = wait_event(reg, zone, Duration::from_secs(30), |w| {
        matches!(w, What::Published(_))
    })
    .await;
    // The first event is recorded just after its scan started the clock.
    let waited = published.at.duration_since(first.at).unwrap_or_default();
    assert!(
        waited + Duration::from_millis(50) >= period,
        "published {waited:?} after the CDS changed\n{}",
        reg.story(zone)
    );
    let What::Published(lines) = &published.what else {
        unreachable!()
    };
    let mut lines = lines.clone();
    lines.sort();
    assert_eq!(
        lines,
        ds.iter()
            .map(|d| format!("{zone} 2 IN DS {d}"))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        ds_everywhere(&w, zone).await,
        Some(ds.clone()),
        "{}",
        reg.story(zone)
    );
    for tld in [&w.tld_a, &w.tld_b] {
        assert!(
            ds_signed_at(tld, zone).await,
            "the DS signed at {}",
            tld.addr
        );
    }

    // The CDS is the DS now: a scan changes nothing.
    let updates = reg.updates();
    assert_eq!(
        reg.scan(zone).await,
        What::Scanned("the CDS is the DS already".into())
    );
    assert_eq!(reg.updates(), updates);

    // PowerDNS 4.7 publishes the RFC 8078 delete with `set-publish-cds ZONE 0` and
    // `set-publish-cdnskey ZONE delete`, signed with the zone's key the DS names.
    pdnsutil(&w, &["set-publish-cds", zone, "0"]);
    pdnsutil(&w, &["set-publish-cdnskey", zone, "delete"]);
    wait_event(reg, zone, Duration::from_secs(20), |w| *w == What::Removed).await;
    assert_eq!(ds_everywhere(&w, zone).await, Some(vec![]));
    // Nothing further to remove.
    assert_eq!(
        reg.scan(zone).await,
        What::Scanned("a CDS delete, and no DS to delete".into())
    );
}

fn notify_message(id: u16, opcode: u8, name: &str, qtype: u16) -> Vec<u8> {
    let mut m = msg::query(id, &name_to_wire(name).unwrap(), qtype, false);
    m[2] = opcode << 3;
    m.truncate(m.len() - 11); // no OPT record
    m[11] = 0;
    m
}

/// Sends `message` to the registry over UDP; its answer, if one comes within 1 s.
async fn send_udp(to: SocketAddr, message: &[u8]) -> Option<msg::Message> {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket.send_to(message, to).await.unwrap();
    let mut buf = [0u8; 1024];
    let (len, _) = tokio::time::timeout(Duration::from_secs(1), socket.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    msg::parse(&buf[..len])
}

/// A NOTIFY(CDS) to the address `test.`'s DSYNC record names makes the registry scan at
/// once (its periodic scan is ten minutes away): answered NOERROR, the DS at the TLD
/// within seconds. Hostile or wrong messages before it are refused or dropped, and the
/// registry keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notify_scans_at_once_and_garbage_is_refused() {
    let zone = "pd.test.";
    let w = world(
        74,
        zone,
        RegistryOptions {
            bootstrap_period: Duration::ZERO,
            scan_interval: Duration::from_secs(600),
            notify: true,
            children: Vec::new(),
        },
    )
    .await;
    let reg = registry(&w);
    let to = reg.notify_addr().unwrap();
    assert_eq!(to, SocketAddr::new(ip(74, REGISTRY_HOST).into(), w.port));

    // Knot serves the DSYNC record (in RFC 3597's form) and its target's address.
    let kdig = |name: &str, rtype: &str| {
        let out = Command::new("kdig")
            .args([
                &format!("@{}", w.tld_a.addr),
                "-p",
                &w.port.to_string(),
                name,
                rtype,
                "+short",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let rdata = registry::dsync_generic_rdata(59, 1, w.port, REGISTRY_NAME).unwrap();
    assert_eq!(kdig("pd._dsync.test.", "TYPE66"), rdata);
    assert_eq!(kdig(REGISTRY_NAME, "A"), ip(74, REGISTRY_HOST).to_string());

    // The first pass (at the start) saw no CDS; then the zone is signed.
    wait_event(reg, zone, Duration::from_secs(20), |w| {
        *w == What::Scanned("no CDS or CDNSKEY".into())
    })
    .await;
    secure_with_cds(&w, zone);
    let ds = pdns_ds_all(&w, zone);
    let scans = reg.scans();

    // Garbage: never a scan, never NOERROR.
    let query = notify_message(1, 0, zone, msg::TYPE_CDS);
    let a = send_udp(to, &query).await.expect("a QUERY is answered");
    assert_eq!((a.id, a.rcode()), (1, msg::RCODE_REFUSED));
    let stranger = notify_message(2, 4, "other.test.", msg::TYPE_CDS);
    let a = send_udp(to, &stranger).await.expect("answered");
    assert_eq!((a.id, a.rcode()), (2, msg::RCODE_NOTAUTH));
    let soa = notify_message(3, 4, zone, msg::TYPE_SOA);
    let a = send_udp(to, &soa).await.expect("answered");
    assert_eq!((a.id, a.rcode()), (3, msg::RCODE_REFUSED));
    let mut cut = notify_message(4, 4, zone, msg::TYPE_CDS);
    cut.truncate(16);
    let a = send_udp(to, &cut).await.expect("answered");
    assert_eq!((a.id, a.rcode()), (4, msg::RCODE_FORMERR));
    assert!(
        send_udp(to, &[0x12, 0x34, 0x20]).await.is_none(),
        "too short"
    );
    let mut response = notify_message(5, 4, zone, msg::TYPE_CDS);
    response[2] |= 0x80;
    assert!(send_udp(to, &response).await.is_none(), "a response");
    assert_eq!(reg.notifies(), 0);
    assert_eq!(reg.notifies_refused(), 6);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(reg.scans(), scans, "no scan for garbage");
    assert_eq!(ds_everywhere(&w, zone).await, Some(vec![]));

    // The NOTIFY: NOERROR, authoritative, the question echoed; the DS within seconds.
    let notify = notify_message(0x4242, 4, zone, msg::TYPE_CDS);
    let sent = Instant::now();
    let a = send_udp(to, &notify).await.expect("the NOTIFY is answered");
    assert_eq!(a.id, 0x4242);
    assert!(a.is_response() && a.authoritative());
    assert_eq!((a.opcode(), a.rcode()), (4, msg::RCODE_NOERROR));
    assert_eq!(
        a.question,
        Some((name_to_wire(zone).unwrap(), msg::TYPE_CDS, msg::CLASS_IN))
    );
    wait_event(reg, zone, Duration::from_secs(10), |w| {
        matches!(w, What::Published(_))
    })
    .await;
    assert!(sent.elapsed() < Duration::from_secs(10));
    assert_eq!(ds_everywhere(&w, zone).await, Some(ds.clone()));
    assert_eq!(reg.notifies(), 1);

    // Repeated NOTIFYs are coalesced: fewer scans than NOTIFYs. Over TCP too.
    let scans = reg.scans();
    for id in 10..15 {
        let a = send_udp(to, &notify_message(id, 4, zone, msg::TYPE_CDNSKEY))
            .await
            .expect("answered");
        assert_eq!(a.rcode(), msg::RCODE_NOERROR);
    }
    let tcp = msg::exchange_tcp(
        ASKER,
        to,
        &notify_message(20, 4, zone, msg::TYPE_CDS),
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    let a = msg::parse(&tcp).unwrap();
    assert_eq!((a.id, a.rcode()), (20, msg::RCODE_NOERROR));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let more = reg.scans() - scans;
    assert!((1..=4).contains(&more), "{more} scans for 6 NOTIFYs");
    assert_eq!(reg.notifies(), 7);
}

/// One of the child's servers (a Knot serving the zone unsigned) has no CDS: no DS, the
/// refusal naming that server. Once the delegation names PowerDNS's servers only, the
/// bootstrap goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inconsistent_cds_changes_nothing_and_names_the_server() {
    let zone = "pd.test.";
    let block = 75;
    let w = world(
        block,
        zone,
        RegistryOptions {
            bootstrap_period: Duration::from_secs(2),
            scan_interval: Duration::from_millis(500),
            notify: false,
            children: Vec::new(),
        },
    )
    .await;
    let reg = registry(&w);
    let other = ip(block, 10);
    let body = format!(
        "$ORIGIN {zone}\n@ 2 SOA ns3.pdns.test. h.test. $SERIAL 3600 600 86400 2\n\
         @ 2 NS ns1.pdns.test.\n@ 2 NS ns3.pdns.test.\n"
    );
    let mut knot = Knot::new(
        &w.dir.path().join("other"),
        other,
        w.port,
        &[ZoneConf::new(zone, body, Signing::Off)],
    )
    .unwrap();
    knot.start().unwrap();
    wait_for_zone(knot.socket(), zone, Duration::from_secs(20))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", knot.log()));
    let glue = format!("3600 A {other}");
    for tld in [&w.tld_a, &w.tld_b] {
        tld.edit("test.", &[("ns3.pdns.test.", &glue)], &[])
            .unwrap();
    }
    w.delegate(zone, Tld::Both, &["ns1.pdns.test.", "ns3.pdns.test."])
        .unwrap();

    secure_with_cds(&w, zone);
    let ds = pdns_ds_all(&w, zone);
    let said = format!(
        "inconsistent: {other} serves CDS none, {} serves {}",
        ip(block, 8),
        ds[0]
    );
    let first = wait_event(reg, zone, Duration::from_secs(20), |w| refused(w, &said)).await;
    // Several scans and more than the bootstrap period later: still no DS.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let refusals = reg
        .events()
        .iter()
        .filter(|e| e.child == zone && e.at > first.at && refused(&e.what, &said))
        .count();
    assert!(refusals >= 3, "{}", reg.story(zone));
    assert!(
        !reg.events()
            .iter()
            .any(|e| e.child == zone && matches!(e.what, What::Published(_))),
        "{}",
        reg.story(zone)
    );
    assert_eq!(ds_everywhere(&w, zone).await, Some(vec![]));

    // Consistent again (PowerDNS's two addresses): the bootstrap goes through.
    w.delegate(zone, Tld::Both, &["ns1.pdns.test.", "ns2.pdns.test."])
        .unwrap();
    wait_event(reg, zone, Duration::from_secs(20), |w| {
        matches!(w, What::Published(_))
    })
    .await;
    assert_eq!(ds_everywhere(&w, zone).await, Some(ds));
}

/// The DS names the zone's key; PowerDNS's keys are replaced by a stranger's (a new key,
/// the old one gone): its CDS, signed only by the new key, is refused and the DS stays.
/// A rollover signed by the key the DS names goes through. Before all that, a registry
/// the TLD servers do not allow to UPDATE records its failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cds_not_signed_by_a_key_the_ds_names_is_refused() {
    let zone = "pd.test.";
    let w = world(
        76,
        zone,
        RegistryOptions {
            // Far away: no DS may come from a bootstrap here.
            bootstrap_period: Duration::from_secs(3600),
            scan_interval: Duration::from_millis(500),
            notify: false,
            children: Vec::new(),
        },
    )
    .await;
    let reg = registry(&w);
    secure_with_cds(&w, zone);
    let old = pdns_ds_all(&w, zone);

    // A registry at an address the TLD servers' ACL does not name: its UPDATE is
    // refused, and that is recorded, not taken for done.
    let mut config = registry::RegistryConfig::new(
        "test.",
        vec![w.tld_a.socket(), w.tld_b.socket()],
        ip(76, REGISTRY_HOST + 1).into(),
        w.port,
    );
    config.children = vec![zone.to_string()];
    config.bootstrap_period = Duration::ZERO;
    let outsider = Registry::start(config).await.unwrap();
    let what = outsider.scan(zone).await;
    assert!(
        matches!(&what, What::UpdateFailed(why)
            if why.contains(&format!("{}: UPDATE answered", w.tld_a.socket()))
            && why.contains(&format!("{}: UPDATE answered", w.tld_b.socket()))),
        "{what:?}"
    );
    assert_eq!(outsider.updates(), 0);
    drop(outsider);
    assert_eq!(ds_everywhere(&w, zone).await, Some(vec![]));

    w.publish_ds(zone, Tld::Both, &old[0]).unwrap();
    wait_event(reg, zone, Duration::from_secs(20), |w| {
        *w == What::Scanned("the CDS is the DS already".into())
    })
    .await;

    // A stranger's key: the old one deleted, a new one made.
    pdnsutil(&w, &["disable-dnssec", zone]);
    pdnsutil(&w, &["secure-zone", zone]);
    pdnsutil(&w, &["set-publish-cds", zone]);
    pdnsutil(&w, &["set-publish-cdnskey", zone]);
    let stranger = pdns_ds_all(&w, zone);
    assert_ne!(stranger, old);
    let first = wait_event(reg, zone, Duration::from_secs(20), |w| {
        refused(w, "the CDS RRset is not signed by a key the DS names")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        reg.events()
            .iter()
            .filter(|e| e.child == zone && e.at > first.at)
            .all(|e| matches!(e.what, What::Refused(_))),
        "{}",
        reg.story(zone)
    );
    assert_eq!(ds_everywhere(&w, zone).await, Some(old.clone()));

    // A rollover: the registrar's DS names the new key; a second key is added, and the
    // CDS for both is signed by both.
    w.publish_ds(zone, Tld::Both, &stranger[0]).unwrap();
    pdnsutil(
        &w,
        &[
            "add-zone-key",
            zone,
            "ksk",
            "active",
            "published",
            "ecdsa256",
        ],
    );
    let both = pdns_ds_all(&w, zone);
    assert_eq!(both.len(), 2, "{both:?}");
    wait_event(
        reg,
        zone,
        Duration::from_secs(20),
        |w| matches!(w, What::Published(lines) if lines.len() == 2),
    )
    .await;
    assert_eq!(ds_everywhere(&w, zone).await, Some(both));
}
