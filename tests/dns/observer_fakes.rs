//! The observer against scripted per-server fakes: no sockets, every server's answer to
//! every question decided by the test. The fake servers answer from a lab [`World`] unless
//! a script overrides one (server, type): silence, a network error, an RCODE, a lame or
//! garbled answer, a lowered TTL.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dnssec_warden::dns::DnsSettings;
use dnssec_warden::dns::{
    DnsObserver, DsAnswer, ExchangeError, NsAnswer, Observer, ObserverOptions, ParentDsVerdict,
    Transport, UnknownReason,
};
use dnssec_warden_lab::DigestType;
use dnssec_warden_lab::dns::{Delegation, KeySource, World, ZoneData};
use dnssec_warden_lab::keys::LabKey;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::RecordType;

const ROOT: Ipv4Addr = Ipv4Addr::new(127, 0, 60, 1);
const TLD_A: Ipv4Addr = Ipv4Addr::new(127, 0, 60, 2);
const TLD_B: Ipv4Addr = Ipv4Addr::new(127, 0, 60, 3);
const CHILD: Ipv4Addr = Ipv4Addr::new(127, 0, 60, 4);
const ZONE: &str = "child.test.";

#[derive(Clone)]
enum Script {
    Silence,
    Network,
    Rcode(ResponseCode),
    /// The answer with AA cleared.
    NotAuthoritative,
    /// The answer's question replaced (an answer for another name).
    WrongQuestion,
    /// Every answer record's TTL set to this (as if decremented by a cache).
    RecordTtl(u32),
    /// NODATA with the SOA of another zone.
    SoaOf(&'static str),
    /// Silence after waiting out the query timeout, as a real silent server costs.
    Hang,
}

struct Fake {
    world: Mutex<World>,
    scripts: Mutex<HashMap<(IpAddr, RecordType), Script>>,
    asked: Mutex<Vec<(IpAddr, RecordType)>>,
    /// Per server address: exchanges in flight now, and the most ever.
    in_flight: Mutex<HashMap<IpAddr, (usize, usize)>>,
    /// How long a [`Script::Hang`] server keeps the asker waiting (the query timeout).
    hang: Duration,
}

impl Transport for Fake {
    fn exchange<'a>(
        &'a self,
        server: SocketAddr,
        query: &'a Message,
    ) -> impl Future<Output = Result<Message, ExchangeError>> + Send + 'a {
        Box::pin(async move {
            {
                let mut in_flight = self.in_flight.lock().unwrap();
                let (now, peak) = in_flight.entry(server.ip()).or_default();
                *now += 1;
                *peak = (*peak).max(*now);
            }
            // Let other questions start meanwhile, as a real exchange would.
            tokio::task::yield_now().await;
            if let Some((now, _)) = self.in_flight.lock().unwrap().get_mut(&server.ip()) {
                *now -= 1;
            }
            let qtype = query.queries[0].query_type();
            self.asked.lock().unwrap().push((server.ip(), qtype));
            let script = self
                .scripts
                .lock()
                .unwrap()
                .get(&(server.ip(), qtype))
                .cloned();
            let answer = self.world.lock().unwrap().respond(server.ip(), query);
            let Some(mut answer) = answer else {
                return Err(ExchangeError::Timeout);
            };
            match script {
                None => {}
                Some(Script::Silence) => return Err(ExchangeError::Timeout),
                Some(Script::Hang) => {
                    tokio::time::sleep(self.hang).await;
                    return Err(ExchangeError::Timeout);
                }
                Some(Script::Network) => {
                    return Err(ExchangeError::Network("connection refused".into()));
                }
                Some(Script::Rcode(code)) => {
                    answer.answers.clear();
                    answer.authorities.clear();
                    answer.metadata.response_code = code;
                }
                Some(Script::NotAuthoritative) => answer.metadata.authoritative = false,
                Some(Script::WrongQuestion) => {
                    // What the transport's question check rejects.
                    return Err(ExchangeError::Malformed(
                        "the answer is for another question".into(),
                    ));
                }
                Some(Script::RecordTtl(ttl)) => {
                    for r in &mut answer.answers {
                        if r.record_type() != RecordType::RRSIG {
                            r.ttl = ttl;
                        }
                    }
                }
                Some(Script::SoaOf(zone)) => {
                    answer.answers.clear();
                    for r in &mut answer.authorities {
                        if r.record_type() == RecordType::SOA {
                            r.name = hickory_proto::rr::Name::from_ascii(zone).unwrap();
                        }
                    }
                }
            }
            Ok(answer)
        })
    }
}

struct Setup {
    fake: Arc<Fake>,
    observer: DnsObserver<Fake>,
    key: LabKey,
    settings: DnsSettings,
}

impl Setup {
    /// Delegates `z0.test.` … without a DS, served by the child's server; their names.
    fn add_unsigned_zones(&self, count: usize) -> Vec<String> {
        let mut world = self.fake.world.lock().unwrap();
        let tld = world.zones.get_mut("test.").unwrap();
        let zones: Vec<String> = (0..count).map(|i| format!("z{i}.test.")).collect();
        for zone in &zones {
            tld.delegations.insert(
                zone.clone(),
                Delegation {
                    ns: vec!["ns.child.test.".into()],
                    ns_ttl: 300,
                    ds: HashMap::new(),
                    ds_ttl: 3600,
                },
            );
        }
        zones
    }

    fn script(&self, server: Ipv4Addr, qtype: RecordType, script: Script) {
        self.fake
            .scripts
            .lock()
            .unwrap()
            .insert((server.into(), qtype), script);
    }

    fn set_ds(&self, on: &[Ipv4Addr], key: &LabKey, ttl: u32) {
        let mut world = self.fake.world.lock().unwrap();
        let d = world
            .zones
            .get_mut("test.")
            .unwrap()
            .delegations
            .get_mut(ZONE)
            .unwrap();
        d.ds_ttl = ttl;
        for ip in on {
            d.ds.insert(
                (*ip).into(),
                vec![key.dnskey().to_ds(ZONE, DigestType::Sha256).unwrap()],
            );
        }
    }

    async fn parent(&self) -> dnssec_warden::dns::ParentView {
        self.observer.parent(ZONE).await.unwrap()
    }

    async fn verdict(&self) -> ParentDsVerdict {
        let parent = self.parent().await;
        let child = self.observer.child(ZONE).await.unwrap();
        parent.verdict(&child.served_keys())
    }
}

fn answer_at(view: &dnssec_warden::dns::ParentView, ip: Ipv4Addr) -> DsAnswer {
    view.answers
        .iter()
        .find(|a| a.addr == IpAddr::from(ip))
        .unwrap()
        .answer
        .clone()
}

fn setup() -> Setup {
    setup_with(|_| {})
}

/// [`setup`] with its settings adjusted before the observer is built.
fn setup_with(adjust: impl FnOnce(&mut DnsSettings)) -> Setup {
    let key = LabKey::generate(257).unwrap();
    let mut world = World::default();
    let hosts = [
        ("ns.root.", ROOT),
        ("a.test.", TLD_A),
        ("b.test.", TLD_B),
        ("ns.child.test.", CHILD),
    ];
    for (h, ip) in hosts {
        world.hosts.insert(h.into(), ip);
    }
    let mut root = ZoneData::new(".", &["ns.root."], KeySource::Unsigned);
    root.add_a("ns.root.", ROOT);
    root.delegations.insert(
        "test.".into(),
        Delegation {
            ns: vec!["a.test.".into(), "b.test.".into()],
            ns_ttl: 3600,
            ds: HashMap::new(),
            ds_ttl: 3600,
        },
    );
    let mut tld = ZoneData::new("test.", &["a.test.", "b.test."], KeySource::Unsigned);
    tld.delegations.insert(
        ZONE.into(),
        Delegation {
            ns: vec!["ns.child.test.".into()],
            ns_ttl: 300,
            ds: HashMap::new(),
            ds_ttl: 3600,
        },
    );
    tld.add_a("ns.child.test.", CHILD);
    let mut child = ZoneData::new(ZONE, &["ns.child.test."], KeySource::Static(key.clone()));
    child.add_a("ns.child.test.", CHILD);
    world.zones.insert(".".into(), root);
    world.zones.insert("test.".into(), tld);
    world.zones.insert(ZONE.into(), child);
    world.hosting.insert(ROOT.into(), [".".into()].into());
    world.hosting.insert(TLD_A.into(), ["test.".into()].into());
    world.hosting.insert(TLD_B.into(), ["test.".into()].into());
    world.hosting.insert(CHILD.into(), [ZONE.into()].into());
    let mut settings = DnsSettings {
        root_hints: vec![ROOT.into()],
        validating_resolvers: Vec::new(),
        query_timeout: Duration::from_millis(100),
        query_attempts: 2,
        ..DnsSettings::default()
    };
    adjust(&mut settings);
    let fake = Arc::new(Fake {
        world: Mutex::new(world),
        scripts: Mutex::new(HashMap::new()),
        asked: Mutex::new(Vec::new()),
        in_flight: Mutex::new(HashMap::new()),
        hang: settings.query_timeout,
    });
    let observer =
        DnsObserver::with_transport(&settings, ObserverOptions::default(), fake.clone()).unwrap();
    Setup {
        fake,
        observer,
        key,
        settings,
    }
}

#[tokio::test]
async fn every_verdict() {
    let s = setup();
    assert_eq!(s.verdict().await, ParentDsVerdict::AllAbsent);
    s.set_ds(&[TLD_A], &s.key.clone(), 3600);
    assert_eq!(s.verdict().await, ParentDsVerdict::Partial);
    s.set_ds(&[TLD_A, TLD_B], &s.key.clone(), 3600);
    assert_eq!(s.verdict().await, ParentDsVerdict::AllMatch);
    let other = LabKey::generate(257).unwrap();
    s.set_ds(&[TLD_B], &other, 3600);
    assert_eq!(s.verdict().await, ParentDsVerdict::Mismatch);
    s.script(TLD_B, RecordType::DS, Script::Silence);
    assert_eq!(
        s.verdict().await,
        ParentDsVerdict::Unknown,
        "the mismatching server is silent now, the other matches"
    );
}

#[tokio::test]
async fn a_timeout_beside_an_absent_is_unknown_never_all_absent() {
    let s = setup();
    s.script(TLD_B, RecordType::DS, Script::Silence);
    let view = s.parent().await;
    assert_eq!(answer_at(&view, TLD_A), DsAnswer::Absent);
    assert_eq!(
        answer_at(&view, TLD_B),
        DsAnswer::Unknown(UnknownReason::Timeout)
    );
    assert!(!view.all_absent());
    assert_eq!(s.verdict().await, ParentDsVerdict::Unknown);
    // Bounded retries: two attempts at the silent server, no more.
    let asked = s.fake.asked.lock().unwrap().clone();
    let at_b = asked
        .iter()
        .filter(|(ip, t)| *ip == IpAddr::from(TLD_B) && *t == RecordType::DS)
        .count();
    assert_eq!(at_b, 4, "two attempts in each of the two observations");
}

#[tokio::test]
async fn every_unknown_reason() {
    for (script, expected) in [
        (Script::Silence, UnknownReason::Timeout),
        (
            Script::Network,
            UnknownReason::Network("connection refused".into()),
        ),
        (Script::Rcode(ResponseCode::Refused), UnknownReason::Refused),
        (
            Script::Rcode(ResponseCode::ServFail),
            UnknownReason::Servfail,
        ),
        (Script::Rcode(ResponseCode::NotImp), UnknownReason::Rcode(4)),
        (Script::NotAuthoritative, UnknownReason::Lame),
        (Script::SoaOf("child.test."), UnknownReason::Lame),
        (
            Script::WrongQuestion,
            UnknownReason::Malformed("the answer is for another question".into()),
        ),
    ] {
        let s = setup();
        s.script(TLD_B, RecordType::DS, script);
        let view = s.parent().await;
        assert_eq!(answer_at(&view, TLD_A), DsAnswer::Absent);
        assert_eq!(answer_at(&view, TLD_B), DsAnswer::Unknown(expected.clone()));
        assert_eq!(
            view.verdict(&dnssec_warden::dns::ServedKeys::known(vec![
                s.key.dnskey().into()
            ])),
            ParentDsVerdict::Unknown,
            "{expected:?}"
        );
    }
}

#[tokio::test]
async fn a_server_without_address_is_unknown() {
    let s = setup();
    {
        let mut world = s.fake.world.lock().unwrap();
        let root = world.zones.get_mut(".").unwrap();
        root.delegations
            .get_mut("test.")
            .unwrap()
            .ns
            .push("c.elsewhere.".into());
    }
    let view = s.parent().await;
    assert_eq!(view.answers.len(), 3);
    let missing = view
        .answers
        .iter()
        .find(|a| &*a.server == "c.elsewhere.")
        .unwrap();
    assert!(
        matches!(
            missing.answer,
            DsAnswer::Unknown(UnknownReason::NoAddress(_))
        ),
        "{missing:?}"
    );
}

#[tokio::test]
async fn the_rrsig_original_ttl_wins_over_a_lowered_record_ttl() {
    let s = setup();
    // Sign the TLD so the DS carries an RRSIG with its original TTL.
    {
        let mut world = s.fake.world.lock().unwrap();
        world.zones.get_mut("test.").unwrap().key =
            KeySource::Static(LabKey::generate(257).unwrap());
    }
    s.set_ds(&[TLD_A, TLD_B], &s.key.clone(), 86_400);
    s.script(TLD_A, RecordType::DS, Script::RecordTtl(60));
    let view = s.parent().await;
    for ip in [TLD_A, TLD_B] {
        match answer_at(&view, ip) {
            DsAnswer::Present { ttl, .. } => assert_eq!(ttl, 86_400, "{ip}"),
            other => panic!("{other:?}"),
        }
    }
    // Unsigned: the record TTL is all there is.
    let s = setup();
    s.set_ds(&[TLD_A, TLD_B], &s.key.clone(), 86_400);
    s.script(TLD_A, RecordType::DS, Script::RecordTtl(60));
    match answer_at(&s.parent().await, TLD_A) {
        DsAnswer::Present { ttl, .. } => assert_eq!(ttl, 60),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn ten_thousand_zones_share_one_tld_lookup_within_the_limits() {
    // Unpaced: 10,000 observations asked at once, each within its budget from the start,
    // would wait minutes at one address's pace (the daemon asks 64 zones at a time).
    let s =
        setup_with(|d| d.max_qps_per_server = dnssec_warden::dns::net::query::MAX_QPS_PER_SERVER);
    let zones = s.add_unsigned_zones(10_000);
    let views = futures::future::join_all(zones.iter().map(|z| s.observer.parent(z))).await;
    assert!(views.into_iter().all(|v| v.unwrap().all_absent()));
    let asked = s.fake.asked.lock().unwrap().clone();
    let root_queries = asked
        .iter()
        .filter(|(ip, _)| *ip == IpAddr::from(ROOT))
        .count();
    assert!(root_queries <= 4, "the root was asked {root_queries} times");
    let stats = s.observer.stats();
    assert!(
        stats.peak_in_flight <= ObserverOptions::default().queries_in_flight,
        "{stats:?}"
    );
    // Per zone: the NS question that finds the cut at one TLD server, then the DS and
    // the NS (the delegation) at each of the two; plus the shared lookups.
    assert!(stats.exchanges <= 5 * 10_000 + 10, "{stats:?}");
}

/// `dns.queries_per_server`: the cap is reached and never passed, at every server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_to_one_server_never_pass_the_per_server_cap() {
    let s = setup();
    let zones = s.add_unsigned_zones(500);
    let cap = 3;
    let options = ObserverOptions {
        per_server: cap,
        ..ObserverOptions::default()
    };
    // The cap on queries in flight, unpaced: the fake answers at once, so queries paced
    // apart would never be in flight together.
    let settings = DnsSettings {
        max_qps_per_server: dnssec_warden::dns::net::query::MAX_QPS_PER_SERVER,
        ..s.settings.clone()
    };
    let observer = DnsObserver::with_transport(&settings, options, s.fake.clone()).unwrap();
    let views = futures::future::join_all(zones.iter().map(|z| observer.parent(z))).await;
    assert!(views.into_iter().all(|v| v.unwrap().all_absent()));
    let in_flight = s.fake.in_flight.lock().unwrap().clone();
    for tld in [TLD_A, TLD_B] {
        let (now, peak) = in_flight[&IpAddr::from(tld)];
        assert_eq!((now, peak), (0, cap), "{tld}");
    }
}

#[tokio::test]
async fn identical_questions_in_flight_are_sent_once() {
    let s = setup();
    s.observer.parent(ZONE).await.unwrap();
    let before = s.observer.stats();
    let views = futures::future::join_all((0..50).map(|_| s.observer.parent(ZONE))).await;
    assert!(views.iter().all(|v| v.as_ref().unwrap().all_absent()));
    let after = s.observer.stats();
    assert!(after.shared > before.shared, "{after:?}");
    assert!(
        after.exchanges - before.exchanges < 50 * 2,
        "{before:?} {after:?}"
    );
}

#[tokio::test]
async fn addresses_of_a_disabled_family_are_not_asked() {
    // b.test. also has an IPv6 address, where nothing answers.
    let s = setup();
    s.fake
        .world
        .lock()
        .unwrap()
        .hosts6
        .insert("b.test.".into(), "fd00::53".parse().unwrap());
    let view = s.parent().await;
    assert_eq!(view.answers.len(), 3, "{view:?}");
    assert!(
        !view.all_absent(),
        "a silent IPv6 address blocks the verdict"
    );

    let mut settings = s.settings.clone();
    settings.address_families.ipv6 = false;
    let v4 =
        DnsObserver::with_transport(&settings, ObserverOptions::default(), s.fake.clone()).unwrap();
    let view = v4.parent(ZONE).await.unwrap();
    assert_eq!(view.answers.len(), 2, "{view:?}");
    assert!(view.answers.iter().all(|a| a.addr.is_ipv4()));
    assert!(view.all_absent());
}

/// The zones of the glueless fan-out, a cycle: `g1.`'s servers are named under `g2.`, …,
/// `g5.`'s under `g1.`.
const FAN_OUT_CYCLE: usize = 5;

impl Setup {
    /// `child.test.` delegated to `fan_out` glueless names under `g1.`, whose servers are
    /// `fan_out` glueless names under `g2.`, and so on around a five-zone cycle: no name
    /// ever gets an address, and every lookup needs `fan_out` more.
    fn glueless_fan_out(&self, fan_out: usize) {
        let names = |zone: usize| -> Vec<String> {
            (0..fan_out)
                .map(|i| format!("ns{i}.g{}.", zone % FAN_OUT_CYCLE + 1))
                .collect()
        };
        let mut world = self.fake.world.lock().unwrap();
        world
            .zones
            .get_mut("test.")
            .unwrap()
            .delegations
            .get_mut(ZONE)
            .unwrap()
            .ns = names(0);
        let root = world.zones.get_mut(".").unwrap();
        for zone in 0..FAN_OUT_CYCLE {
            root.delegations.insert(
                format!("g{}.", zone + 1),
                Delegation {
                    ns: names(zone + 1),
                    ns_ttl: 3600,
                    ds: HashMap::new(),
                    ds_ttl: 3600,
                },
            );
        }
    }

    /// `test.` served by `count` servers `t0.test.` … (with glue) instead of two; their
    /// addresses.
    fn tld_servers(&self, count: u8) -> Vec<Ipv4Addr> {
        let mut world = self.fake.world.lock().unwrap();
        let mut names = Vec::new();
        let mut addrs = Vec::new();
        for i in 0..count {
            let (name, ip) = (format!("t{i}.test."), Ipv4Addr::new(127, 0, 61, i + 1));
            world.hosts.insert(name.clone(), ip);
            world.hosting.insert(ip.into(), ["test.".into()].into());
            names.push(name);
            addrs.push(ip);
        }
        world
            .zones
            .get_mut(".")
            .unwrap()
            .delegations
            .get_mut("test.")
            .unwrap()
            .ns = names;
        addrs
    }
}

/// A glueless fan-out of 8 names per zone around a cycle of five zones starts 8^4 lookups
/// from a handful of queries, its memory growing with each level. The observation's budget
/// of host lookups ends it: unknown, with the reason, never an answer.
#[tokio::test]
async fn a_glueless_fan_out_ends_in_unknown_budget_exhausted() {
    let s = setup();
    s.glueless_fan_out(8);
    let parent = s.observer.parent(ZONE).await;
    let child = s.observer.child(ZONE).await;
    for (what, result) in [
        ("parent", parent.map(|v| format!("{v:?}"))),
        ("child", child.map(|v| format!("{v:?}"))),
    ] {
        let err = result.expect_err(what);
        assert!(
            err.reason.contains("budget exhausted: host lookups"),
            "{what}: {err}"
        );
    }
    let stats = s.observer.stats();
    assert!(stats.exchanges <= 100, "{stats:?}");
    // Nothing learnt while the budget ran out was kept: once the delegation is sane
    // again, the child's server is asked.
    s.fake
        .world
        .lock()
        .unwrap()
        .zones
        .get_mut("test.")
        .unwrap()
        .delegations
        .get_mut(ZONE)
        .unwrap()
        .ns = vec!["ns.child.test.".into()];
    let child = s.observer.child(ZONE).await.unwrap();
    assert_eq!(child.answers.len(), 1);
    assert_eq!(child.answers[0].addr, IpAddr::from(CHILD), "{child:?}");
}

/// `dns.max_queries_per_observation`: an observation needing more questions ends as
/// unknown, having asked no more.
#[tokio::test]
async fn an_observation_asks_no_more_questions_than_its_budget() {
    let s = setup_with(|settings| settings.budget.max_queries = 3);
    // Priming, `test.`, `child.test.`: three NS questions; the DS ones are over budget.
    let err = s.observer.parent(ZONE).await.unwrap_err();
    assert!(err.reason.contains("budget exhausted: queries"), "{err}");
    let asked = s.fake.asked.lock().unwrap().len();
    assert_eq!(asked, 3);
    // Enough for three NS questions, then the DS at both TLD addresses and the NS at the
    // one that did not show the cut: each observation has a budget of its own (the
    // second finds the cuts cached and asks the DS and the NS at each parent address).
    let s = setup_with(|settings| settings.budget.max_queries = 6);
    assert!(s.observer.parent(ZONE).await.unwrap().all_absent());
    assert!(s.observer.parent(ZONE).await.unwrap().all_absent());
    assert_eq!(s.fake.asked.lock().unwrap().len(), 6 + 4);
    // One question short of that: unknown, not a view with an address left out.
    let s = setup_with(|settings| settings.budget.max_queries = 5);
    let err = s.observer.parent(ZONE).await.unwrap_err();
    assert!(err.reason.contains("budget exhausted: queries"), "{err}");
}

/// The TLD address whose answer showed the cut is not asked `child.test. NS` again in the
/// same observation: that answer is its NS answer, and the view carries it. The next
/// observation (the cut cached) asks every address both questions.
#[tokio::test]
async fn the_answer_that_showed_the_cut_is_its_servers_ns_answer() {
    let s = setup();
    let view = s.observer.parent(ZONE).await.unwrap();
    assert!(view.all_absent(), "{view:?}");
    assert_eq!(view.delegations.len(), 2, "{view:?}");
    for d in &view.delegations {
        assert!(
            matches!(&d.answer, NsAnswer::Servers { hosts, .. } if hosts.iter().any(|h| h == "ns.child.test.")),
            "{d:?}"
        );
    }
    let at = |asked: &[(IpAddr, RecordType)], addr: Ipv4Addr, qtype| {
        asked
            .iter()
            .filter(|(a, t)| *a == IpAddr::from(addr) && *t == qtype)
            .count()
    };
    let asked = s.fake.asked.lock().unwrap().clone();
    // `test.` is found at the root; `child.test.` at TLD A, asked first.
    assert_eq!(at(&asked, TLD_A, RecordType::NS), 1, "{asked:?}");
    assert_eq!(at(&asked, TLD_B, RecordType::NS), 1, "{asked:?}");
    assert_eq!(at(&asked, TLD_A, RecordType::DS), 1, "{asked:?}");
    assert_eq!(at(&asked, TLD_B, RecordType::DS), 1, "{asked:?}");
    s.fake.asked.lock().unwrap().clear();
    assert!(s.observer.parent(ZONE).await.unwrap().all_absent());
    let asked = s.fake.asked.lock().unwrap().clone();
    for addr in [TLD_A, TLD_B] {
        for qtype in [RecordType::NS, RecordType::DS] {
            assert_eq!(at(&asked, addr, qtype), 1, "{addr} {qtype}: {asked:?}");
        }
    }
    assert_eq!(asked.len(), 4, "{asked:?}");
}

/// The reason a server has no address is kept, not hidden behind "the zone has
/// no server address".
#[tokio::test]
async fn a_glueless_cycle_says_it_nests_too_deep() {
    let s = setup();
    s.glueless_fan_out(1);
    let child = s.observer.child(ZONE).await.unwrap();
    assert_eq!(child.answers.len(), 1, "{child:?}");
    let detail = format!("{:?}", child.answers[0].answer);
    assert!(detail.contains("nest too deep"), "{detail}");
}

/// A parent server whose addresses are silent is not waited out one address
/// after another: eleven silent servers before the one that answers cost about one query
/// timeout, not eleven times the attempts.
#[tokio::test(start_paused = true)]
async fn silent_servers_are_asked_in_parallel() {
    let s = setup_with(|settings| settings.query_timeout = Duration::from_secs(1));
    let tld = s.tld_servers(12);
    for ip in &tld[..11] {
        s.script(*ip, RecordType::NS, Script::Hang);
        s.script(*ip, RecordType::DS, Script::Hang);
    }
    let start = tokio::time::Instant::now();
    let view = s.parent().await;
    let took = start.elapsed();
    assert_eq!(view.answers.len(), 12);
    assert_eq!(answer_at(&view, tld[11]), DsAnswer::Absent);
    assert_eq!(
        answer_at(&view, tld[0]),
        DsAnswer::Unknown(UnknownReason::Timeout)
    );
    // One after another: 11 servers x 2 attempts x 1 s, then the DS (2 s).
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

/// An observation has a wall time (60 s by default): twelve parent servers
/// silent for 30 s a query end it there, unknown with the reason, not after 12 minutes.
#[tokio::test(start_paused = true)]
async fn an_observation_ends_at_its_time_budget() {
    let s = setup_with(|settings| settings.query_timeout = Duration::from_secs(30));
    for ip in s.tld_servers(12) {
        s.script(ip, RecordType::NS, Script::Hang);
    }
    let start = tokio::time::Instant::now();
    let err = s.observer.parent(ZONE).await.unwrap_err();
    let took = start.elapsed();
    assert!(err.reason.contains("budget exhausted: time"), "{err}");
    assert!(took <= Duration::from_secs(61), "took {took:?}");
}

/// A delegation to more name servers than `dns.max_ns_per_delegation` is
/// unknown with the reason; never asked in part (a subset could look unanimous).
#[tokio::test]
async fn a_delegation_beyond_the_name_server_cap_is_unknown() {
    let s = setup();
    {
        let mut world = s.fake.world.lock().unwrap();
        let names: Vec<String> = (0..300).map(|i| format!("ns{i}.child.test.")).collect();
        for name in &names {
            world.hosts.insert(name.clone(), CHILD);
        }
        world
            .zones
            .get_mut("test.")
            .unwrap()
            .delegations
            .get_mut(ZONE)
            .unwrap()
            .ns = names;
    }
    let err = match s.observer.child(ZONE).await {
        Ok(view) => panic!("{} answers", view.answers.len()),
        Err(e) => e,
    };
    assert!(err.reason.contains("300 name servers"), "{err}");
    assert!(err.reason.contains("max_ns_per_delegation"), "{err}");
    let stats = s.observer.stats();
    assert!(stats.exchanges <= 10, "{stats:?}");
}

/// The peak memory of one observation of a glueless fan-out (`FAN_OUT`, 16 by default):
/// `FAN_OUT=16 cargo test --test dns observer_fakes::fan_out_peak_memory -- --ignored --nocapture`
#[tokio::test]
#[ignore = "a measurement: run alone, it reads the process's peak RSS"]
async fn fan_out_peak_memory() {
    let fan_out = std::env::var("FAN_OUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let s = setup();
    s.glueless_fan_out(fan_out);
    let start = std::time::Instant::now();
    let parent = s.observer.parent(ZONE).await;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak = status
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .unwrap_or("VmHWM: ?");
    println!(
        "fan-out {fan_out}: {peak}, {:?}, {:?}, {:?}",
        start.elapsed(),
        s.observer.stats(),
        parent.map(|v| v.answers.len())
    );
}
