//! A scripted authoritative world on loopback, in the spirit of hickory-dns's per-server
//! test fakes: a signed hierarchy (real ECDSA keys, RRSIGs made per answer by the lab's
//! [`World`]) served over UDP and TCP by one small server per address, where each
//! server's behaviour is data: answer normally, stay silent, REFUSE, refer up or
//! sideways (lame), drop the question section, set TC over TCP, answer with the wrong
//! records, NXDOMAIN right after a referral, garble a DNSKEY's protocol field.
//!
//! ```text
//!  .            a.root-servers.test.  127.0.72.1   signed; its DS is the trust anchor
//!  test.        a.nic.test.           127.0.72.2   signed, each TLD server its own DS set
//!               b.nic.test.           127.0.72.3
//!  child.test.  ns1.child.test.       127.0.72.4   signed with `child_key`; the DS at
//!               ns2.child.test.       127.0.72.5   both TLD servers by default
//!               ns1.elsewhere.test.   127.0.72.6   serves the child too, delegated to
//!                                                  only after `set_child_ns`
//! ```
//! Every server listens on one port, free on every address (as the lab's hierarchy does),
//! so the observer and the `check` command reach all of them through `dns.port`.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dnssec_warden::dns::DnsSettings;
use dnssec_warden::dns::validator::base32hex;
use dnssec_warden::dns::wire;
use dnssec_warden::dnssec::{DigestType, Dnskey, Ds};
use dnssec_warden_lab::dns::zone::sign;
use dnssec_warden_lab::dns::{Delegation, KeySource, World, ZoneData};
use dnssec_warden_lab::keys::LabKey;
use hickory_proto::dnssec::Nsec3HashAlgorithm;
use hickory_proto::dnssec::PublicKey;
use hickory_proto::dnssec::rdata::{DNSSECRData, NSEC3, RRSIG};
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME, NS};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinSet;

pub const ROOT: Ipv4Addr = Ipv4Addr::new(127, 0, 72, 1);
pub const TLD_A: Ipv4Addr = Ipv4Addr::new(127, 0, 72, 2);
pub const TLD_B: Ipv4Addr = Ipv4Addr::new(127, 0, 72, 3);
pub const CHILD_1: Ipv4Addr = Ipv4Addr::new(127, 0, 72, 4);
pub const CHILD_2: Ipv4Addr = Ipv4Addr::new(127, 0, 72, 5);
/// Another provider's server, hosting the child too (a move in or out).
pub const ELSEWHERE: Ipv4Addr = Ipv4Addr::new(127, 0, 72, 6);
pub const ELSEWHERE_HOST: &str = "ns1.elsewhere.test.";
pub const ZONE: &str = "child.test.";
pub const TLD: &str = "test.";

const HOSTS: &[(&str, Ipv4Addr)] = &[
    ("a.root-servers.test.", ROOT),
    ("a.nic.test.", TLD_A),
    ("b.nic.test.", TLD_B),
    ("ns1.child.test.", CHILD_1),
    ("ns2.child.test.", CHILD_2),
    (ELSEWHERE_HOST, ELSEWHERE),
];

/// What one server does with a question, instead of (or on top of) the world's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// The world's answer.
    Normal,
    /// No answer at all, over UDP or TCP: the client times out.
    Silent,
    /// This RCODE and nothing else (REFUSED, SERVFAIL, NOTIMP, FORMERR, ...).
    Rcode(ResponseCode),
    /// A referral up, to the root (AA=0, the root's NS): an upward-referring lame server.
    LameUp,
    /// A referral sideways, to a zone that is not the one asked about (AA=0).
    LameSideways,
    /// The world's answer with its question section removed (only the ID ties it to ours).
    NoQuestion,
    /// This RCODE without the question section (as FORMERR and NOTIMP may come back).
    RcodeNoQuestion(ResponseCode),
    /// NODATA (the SOA of the zone, no records) without a question section.
    NodataNoQuestion,
    /// Over UDP TC=1 and empty; over TCP a NODATA still flagged TC=1.
    TruncatedOverTcp,
    /// Response rate limiting's slip: over UDP TC=1 and empty, over TCP the world's answer.
    Slip,
    /// The answer section is a CNAME at the name asked about; the SOA in the authority.
    CnameAtName,
    /// The answer's records owned by another name (`other.test.`); the SOA in the authority.
    ForeignOwner,
    /// NXDOMAIN with the SOA of the zone the server speaks for.
    Nxdomain,
    /// The answer's DNSKEY records with this protocol field (RFC 4034: must be 3).
    DnskeyProtocol(u8),
    /// A referral of the name asked about to these hosts (AA=0, NS TTL 300, glue for
    /// the hosts of this world): a parent server delegating elsewhere than the others.
    ReferTo(Vec<String>),
    /// NODATA with the zone's SOA only, no signature, no NSEC: a forger's "no DS".
    UnsignedNodata,
    /// The world's answer with every RRSIG removed (a DS without its signature).
    StripSignatures,
    /// The world's answer with every RRSIG made again: by `key` (the zone's own when
    /// `None`), over `window` (the default window when `None`), signer name unchanged.
    Resign {
        key: Option<Signer>,
        window: Option<(u32, u32)>,
    },
    /// The world's answer with its NSEC proofs (and their signatures) replaced by those
    /// the server gives for `name DS`: a valid proof, for another name.
    ProofOf(String),
    /// NODATA for the DS proven with NSEC3 records made here, signed with the zone's key.
    Nsec3(Nsec3Script),
    /// The world's answer with the question's letters in lower case: a server that does
    /// not echo the case of the question (0x20).
    LowercaseQuestion,
    /// KeyTrap (CVE-2023-50387): every record of the answer section repeated `copies`
    /// times, and before each RRSIG `garbage` RRSIGs with the same fields (the same key
    /// tag) and noise for a signature. The valid signature is still there, last.
    KeyTrap { copies: usize, garbage: usize },
    /// Every record of the answer section sent twice; the signatures stay those over the
    /// set without duplicates (RFC 4034 section 6.3), as a sloppy server may send them.
    Repeat,
    /// The world's answer with the A glue of this host pointing at this address instead:
    /// a parent server whose glue differs from the others'.
    Glue(String, Ipv4Addr),
    /// A server that does not implement EDNS (RFC 6891 section 7): FORMERR without an
    /// OPT, the question echoed, to any query with an OPT; the world's answer (without
    /// DO, so without RRSIGs) to one without. `truncated_over_udp`: its UDP answers say
    /// TC=1 and hold nothing (as an answer beyond 512 bytes would), over TCP the whole.
    NoEdns { truncated_over_udp: bool },
}

/// A signing key in a [`Behaviour`] (boxed: a key is large); compared by its public key.
#[derive(Debug, Clone)]
pub struct Signer(pub Arc<LabKey>);

impl Signer {
    pub fn new(key: LabKey) -> Self {
        Self(Arc::new(key))
    }
}

impl PartialEq for Signer {
    fn eq(&self, other: &Self) -> bool {
        self.0.dnskey() == other.0.dnskey()
    }
}

impl Eq for Signer {}

/// The NSEC3 denial [`Behaviour::Nsec3`] serves for the child's DS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nsec3Script {
    /// The salt the owner names are hashed with.
    pub owner_salt: Vec<u8>,
    /// The salt the records say they use (a different one: the wrong parameters).
    pub record_salt: Vec<u8>,
    pub iterations: u16,
    /// `false`: an NSEC3 matching the child's name without DS (RFC 5155 section 8.6).
    /// `true`: the apex NSEC3 (the closest encloser) and an opt-out NSEC3 covering the
    /// child's name (the next closer name).
    pub opt_out: bool,
    /// The hash algorithm the records say they use (1, SHA-1, the only one assigned; the
    /// owners are SHA-1 hashes whatever it says).
    pub hash_algorithm: u8,
    /// One more signed NSEC3 beside the proof, of this (unknown) hash algorithm, owned
    /// by the hash of `zzz.` below the zone: a record validators must ignore.
    pub decoy: Option<u8>,
}

impl Nsec3Script {
    /// A valid proof: the same salt for the owners and the records.
    pub fn valid(opt_out: bool) -> Self {
        Self {
            owner_salt: vec![0xab, 0xcd],
            record_salt: vec![0xab, 0xcd],
            iterations: 1,
            opt_out,
            hash_algorithm: 1,
            decoy: None,
        }
    }
}

/// Which servers a lever applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Servers {
    Tld,
    Child,
    One(Ipv4Addr),
}

impl Servers {
    fn addrs(self) -> Vec<Ipv4Addr> {
        match self {
            Self::Tld => vec![TLD_A, TLD_B],
            Self::Child => vec![CHILD_1, CHILD_2],
            Self::One(ip) => vec![ip],
        }
    }
}

#[derive(Default)]
struct Scripts {
    /// (server, question type or every type) -> behaviour.
    by_server: HashMap<(IpAddr, Option<RecordType>), Behaviour>,
}

impl Scripts {
    fn get(&self, server: IpAddr, qtype: RecordType) -> Behaviour {
        self.by_server
            .get(&(server, Some(qtype)))
            .or_else(|| self.by_server.get(&(server, None)))
            .cloned()
            .unwrap_or(Behaviour::Normal)
    }
}

/// One scripted DSYNC record: its owner and its RDATA.
type DsyncEntry = (String, Vec<u8>);

struct Shared {
    world: Mutex<World>,
    scripts: Mutex<Scripts>,
    /// How long every UDP answer is held back (zero: none).
    delay: Mutex<std::time::Duration>,
    /// FORMERRs sent by [`Behaviour::NoEdns`] servers to queries with an OPT.
    edns_refused: std::sync::atomic::AtomicUsize,
    /// DSYNC records each server serves: (owner, RDATA as sent, any bytes at all). An
    /// owner `*.rest` answers every name below `rest` that has no records of its own, as
    /// a wildcard's synthesis does (the owner in the answer is the name asked).
    dsync: Mutex<HashMap<IpAddr, Vec<DsyncEntry>>>,
}

/// The running world; dropping it stops every server and deletes the anchor file.
pub struct ScriptedDns {
    shared: Arc<Shared>,
    port: u16,
    _tasks: JoinSet<()>,
    dir: tempfile::TempDir,
    pub child_key: LabKey,
    pub tld_key: LabKey,
}

impl ScriptedDns {
    /// The hierarchy above, every server answering normally, the child's DS at both TLD
    /// servers.
    pub async fn start() -> Self {
        let root_key = LabKey::generate(257).expect("key");
        let tld_key = LabKey::generate(257).expect("key");
        let child_key = LabKey::generate(257).expect("key");
        let mut world = World::default();
        for (host, ip) in HOSTS {
            world.hosts.insert(host.to_string(), *ip);
        }
        let ds_of = |key: &LabKey, owner: &str| {
            key.dnskey()
                .to_ds(owner, dnssec_warden_lab::DigestType::Sha256)
                .expect("digest")
        };
        let mut root = ZoneData::new(
            ".",
            &["a.root-servers.test."],
            KeySource::Static(root_key.clone()),
        );
        root.add_a("a.root-servers.test.", ROOT);
        root.add_a("a.nic.test.", TLD_A);
        root.add_a("b.nic.test.", TLD_B);
        root.delegations.insert(
            TLD.into(),
            Delegation {
                ns: vec!["a.nic.test.".into(), "b.nic.test.".into()],
                ns_ttl: 3600,
                ds: HashMap::from([(IpAddr::from(ROOT), vec![ds_of(&tld_key, TLD)])]),
                ds_ttl: 3600,
            },
        );
        let mut tld = ZoneData::new(
            TLD,
            &["a.nic.test.", "b.nic.test."],
            KeySource::Static(tld_key.clone()),
        );
        for (host, ip) in HOSTS {
            tld.add_a(host, *ip);
        }
        let child_ds = vec![ds_of(&child_key, ZONE)];
        tld.delegations.insert(
            ZONE.into(),
            Delegation {
                ns: vec!["ns1.child.test.".into(), "ns2.child.test.".into()],
                ns_ttl: 300,
                ds: HashMap::from([
                    (IpAddr::from(TLD_A), child_ds.clone()),
                    (IpAddr::from(TLD_B), child_ds),
                ]),
                ds_ttl: 3600,
            },
        );
        let mut child = ZoneData::new(
            ZONE,
            &["ns1.child.test.", "ns2.child.test."],
            KeySource::Static(child_key.clone()),
        );
        child.add_a("ns1.child.test.", CHILD_1);
        child.add_a("ns2.child.test.", CHILD_2);
        world.zones.insert(".".into(), root);
        world.zones.insert(TLD.into(), tld);
        world.zones.insert(ZONE.into(), child);
        world.hosting.insert(ROOT.into(), [".".into()].into());
        world.hosting.insert(TLD_A.into(), [TLD.into()].into());
        world.hosting.insert(TLD_B.into(), [TLD.into()].into());
        world.hosting.insert(CHILD_1.into(), [ZONE.into()].into());
        world.hosting.insert(CHILD_2.into(), [ZONE.into()].into());
        world.hosting.insert(ELSEWHERE.into(), [ZONE.into()].into());

        let dir = tempfile::tempdir().expect("temporary directory");
        std::fs::write(
            dir.path().join("anchor.ds"),
            format!(". 3600 IN DS {}\n", ds_of(&root_key, ".")),
        )
        .expect("anchor file");
        let shared = Arc::new(Shared {
            world: Mutex::new(world),
            scripts: Mutex::new(Scripts::default()),
            delay: Mutex::new(std::time::Duration::ZERO),
            edns_refused: Default::default(),
            dsync: Mutex::default(),
        });
        let (port, tasks) = bind_all(&shared).await;
        Self {
            shared,
            port,
            _tasks: tasks,
            dir,
            child_key,
            tld_key,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many queries with EDNS the [`Behaviour::NoEdns`] servers refused so far.
    pub fn edns_refusals(&self) -> usize {
        self.shared
            .edns_refused
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `behaviour` for every question `on` gets (`qtype` None) or for one type only.
    pub fn script(&self, on: Servers, qtype: Option<RecordType>, behaviour: Behaviour) {
        let mut scripts = self
            .shared
            .scripts
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for ip in on.addrs() {
            scripts
                .by_server
                .insert((ip.into(), qtype), behaviour.clone());
        }
    }

    /// The DSYNC records (owner, RDATA) the given servers serve from now on, in place of
    /// any before (empty: none). The RDATA is sent as given, malformed or not.
    pub fn set_dsync(&self, on: Servers, records: &[(&str, Vec<u8>)]) {
        let mut dsync = self.shared.dsync.lock().unwrap_or_else(|p| p.into_inner());
        for ip in on.addrs() {
            dsync.insert(
                ip.into(),
                records
                    .iter()
                    .map(|(owner, rdata)| (owner.to_ascii_lowercase(), rdata.clone()))
                    .collect(),
            );
        }
    }

    /// An A record for `host` (a name under `test.`) at the TLD: a host resolvers find
    /// by asking the TLD's servers, such as a NOTIFY target.
    pub fn add_host(&self, host: &str, ip: Ipv4Addr) {
        let mut world = self.shared.world.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = world.zones.get_mut(TLD) {
            t.add_a(host, ip);
        }
    }

    /// Replaces the child's DS set on the given TLD servers (empty: no DS there).
    /// Every UDP answer from now on sent this long after its query (each on its own), so
    /// that questions asked together are surely in flight together.
    pub fn set_answer_delay(&self, delay: std::time::Duration) {
        *self.shared.delay.lock().unwrap() = delay;
    }

    pub fn set_ds(&self, on: Servers, ds: Vec<Ds>) {
        let mut world = self.shared.world.lock().unwrap_or_else(|p| p.into_inner());
        let Some(d) = world
            .zones
            .get_mut(TLD)
            .and_then(|t| t.delegations.get_mut(ZONE))
        else {
            return;
        };
        for ip in on.addrs() {
            d.ds.insert(ip.into(), ds.iter().cloned().map(Into::into).collect());
        }
    }

    /// The TLD unsigned, and no DS for it at the root: a provably insecure parent.
    pub fn set_tld_unsigned(&self) {
        let mut world = self.shared.world.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = world
            .zones
            .get_mut(".")
            .and_then(|r| r.delegations.get_mut(TLD))
        {
            d.ds.clear();
        }
        if let Some(t) = world.zones.get_mut(TLD) {
            t.key = KeySource::Unsigned;
        }
    }

    /// Signs the child with `key`, or leaves it unsigned.
    pub fn set_child_key(&self, key: Option<LabKey>) {
        let mut world = self.shared.world.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(z) = world.zones.get_mut(ZONE) {
            z.key = key.map_or(KeySource::Unsigned, KeySource::Static);
        }
    }

    /// The child publishes `rdata` as its apex `rtype` RRset (signed with the zone's key,
    /// as everything it serves), or nothing for an empty list: its CDS and CDNSKEY.
    pub fn set_child_rrset(&self, rtype: RecordType, rdata: Vec<RData>) {
        let mut world = self.shared.world.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(z) = world.zones.get_mut(ZONE) {
            if rdata.is_empty() {
                z.records.remove(&(ZONE.to_string(), rtype));
            } else {
                z.records.insert((ZONE.to_string(), rtype), rdata);
            }
        }
    }

    /// Delegates the child to one more name server too, `host`, with no address
    /// anywhere (its name lies in a zone that does not exist).
    pub fn add_unreachable_child_server(&self, host: &str) {
        let mut world = self.shared.world.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = world
            .zones
            .get_mut(TLD)
            .and_then(|t| t.delegations.get_mut(ZONE))
        {
            d.ns.push(host.to_string());
        }
    }

    /// Re-delegates the child at every TLD server to `hosts` (names of this world, whose
    /// glue the TLD has), as a registrar's NS change does.
    pub fn set_child_ns(&self, hosts: &[&str]) {
        let mut world = self.shared.world.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = world
            .zones
            .get_mut(TLD)
            .and_then(|t| t.delegations.get_mut(ZONE))
        {
            d.ns = hosts.iter().map(|h| h.to_string()).collect();
        }
    }

    /// Delegates `zone` (below `test.`, no DS) to `hosts`, with no glue: their addresses
    /// must be looked up.
    pub fn delegate(&self, zone: &str, hosts: &[&str]) {
        let mut world = self.shared.world.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = world.zones.get_mut(TLD) {
            t.delegations.insert(
                zone.to_string(),
                Delegation {
                    ns: hosts.iter().map(|h| h.to_string()).collect(),
                    ns_ttl: 300,
                    ds: HashMap::new(),
                    ds_ttl: 300,
                },
            );
        }
    }

    /// The child's DS as the TLD publishes it by default.
    pub fn child_ds(&self) -> Ds {
        Dnskey::from(self.child_key.dnskey())
            .to_ds(ZONE, DigestType::Sha256)
            .expect("digest")
    }

    pub fn trust_anchor_path(&self) -> PathBuf {
        self.dir.path().join("anchor.ds")
    }

    /// Observer settings for this world: short timeouts, one attempt (loopback).
    pub fn settings(&self) -> DnsSettings {
        DnsSettings {
            root_hints: vec![ROOT.into()],
            port: self.port,
            trust_anchor_file: Some(self.trust_anchor_path()),
            validating_resolvers: Vec::new(),
            query_timeout: Duration::from_millis(300),
            query_attempts: 1,
            ..DnsSettings::default()
        }
    }

    /// A config file for the `dnssec-warden` binary (no provider) in `dir`.
    pub fn config_file(&self, dir: &Path) -> PathBuf {
        self.config_file_with(dir, "")
    }

    /// As [`config_file`](Self::config_file), with `extra` (a `[provider]` section, say)
    /// appended.
    pub fn config_file_with(&self, dir: &Path, extra: &str) -> PathBuf {
        let path = dir.join("config.toml");
        let text = format!(
            "[database]\npath = \"{}\"\n[dns]\nroot_hints = [\"{ROOT}\"]\nport = {}\ntrust_anchor_file = \"{}\"\nvalidating_resolvers = []\nquery_timeout = \"300ms\"\nquery_attempts = 1\n[zones]\nnames = []\n{extra}",
            dir.join("state.db").display(),
            self.port,
            self.trust_anchor_path().display()
        );
        std::fs::write(&path, text).expect("config file");
        path
    }
}

/// The world's answer to `query` at `server`, transformed by the server's behaviour; the
/// wire form to send, or `None` for silence.
fn reply(shared: &Shared, server: IpAddr, query: &Message, tcp: bool) -> Option<Vec<u8>> {
    let question = query.queries.first()?;
    let qtype = question.query_type();
    let qname = question.name().clone();
    let behaviour = shared
        .scripts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(server, qtype);
    let behaviour_again = behaviour.clone();
    if matches!(behaviour, Behaviour::NoEdns { .. }) && query.edns.is_some() {
        shared
            .edns_refused
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut refusal = Message::error_msg(
            query.metadata.id,
            query.metadata.op_code,
            ResponseCode::FormErr,
        );
        refusal.add_query(question.clone());
        return refusal.to_vec().ok();
    }
    let world = shared.world.lock().unwrap_or_else(|p| p.into_inner());
    let mut answer = world.respond(server, query)?;
    if u16::from(qtype) == wire::DSYNC
        && let Some(records) = scripted_dsync(shared, server, &qname)
    {
        answer.answers = records;
        answer.authorities.clear();
        answer.metadata.response_code = ResponseCode::NoError;
        answer.metadata.authoritative = true;
    }
    // The zone this server speaks for, for SOAs in made-up negative answers.
    let soa: Vec<Record> = world
        .hosting
        .get(&server)
        .and_then(|zones| {
            let mut at = wire::name_text(&qname);
            for _ in 0..128 {
                if zones.contains(&at) {
                    return world.zones.get(&at);
                }
                if at == "." {
                    return None;
                }
                at = wire::parent_name(&at);
            }
            None
        })
        .and_then(|z| {
            let apex = wire::parse_name(&z.name)?;
            let data = z.records.get(&(z.name.clone(), RecordType::SOA))?;
            Some(
                data.iter()
                    .map(|d| Record::from_rdata(apex.clone(), 60, d.clone()))
                    .collect(),
            )
        })
        .unwrap_or_default();
    drop(world);
    let negative = |m: &mut Message| {
        m.answers.clear();
        m.authorities = soa.clone();
        m.additionals.clear();
        m.metadata.authoritative = true;
    };
    let referral = |m: &mut Message, owner: &str, host: &str, ip: Ipv4Addr| {
        m.answers.clear();
        m.metadata.authoritative = false;
        m.metadata.response_code = ResponseCode::NoError;
        let (Some(owner), Some(host)) = (wire::parse_name(owner), wire::parse_name(host)) else {
            return;
        };
        m.authorities = vec![Record::from_rdata(owner, 3600, RData::NS(NS(host.clone())))];
        m.additionals = vec![Record::from_rdata(host, 3600, RData::A(A(ip)))];
    };
    let mut patch = None;
    let mut lowercase = false;
    match behaviour {
        Behaviour::UnsignedNodata => {
            negative(&mut answer);
            answer.metadata.response_code = ResponseCode::NoError;
        }
        Behaviour::KeyTrap { copies, garbage } => {
            let mut out = Vec::new();
            for r in &answer.answers {
                match &r.data {
                    RData::DNSSEC(DNSSECRData::RRSIG(sig)) => {
                        for i in 0..garbage {
                            let noise: Vec<u8> = (0..sig.sig().len())
                                .map(|b| (b as u8) ^ (i as u8).wrapping_mul(31) ^ 0x5a)
                                .collect();
                            out.push(Record::from_rdata(
                                r.name.clone(),
                                r.ttl,
                                RData::DNSSEC(DNSSECRData::RRSIG(RRSIG::from_sig(
                                    sig.input().clone(),
                                    noise,
                                ))),
                            ));
                        }
                        out.push(r.clone());
                    }
                    _ => out.extend(std::iter::repeat_n(r.clone(), copies)),
                }
            }
            answer.answers = out;
        }
        Behaviour::Glue(host, ip) => {
            for r in &mut answer.additionals {
                if wire::name_text(&r.name) == host && matches!(r.data, RData::A(_)) {
                    r.data = RData::A(A(ip));
                }
            }
        }
        Behaviour::Repeat => {
            let mut out = Vec::new();
            for r in &answer.answers {
                out.push(r.clone());
                if r.record_type() != RecordType::RRSIG {
                    out.push(r.clone());
                }
            }
            answer.answers = out;
        }
        Behaviour::StripSignatures => {
            answer
                .answers
                .retain(|r| r.record_type() != RecordType::RRSIG);
            answer
                .authorities
                .retain(|r| r.record_type() != RecordType::RRSIG);
        }
        Behaviour::Resign { key, window } => {
            let world = shared.world.lock().unwrap_or_else(|p| p.into_inner());
            let (zone, zone_key) = signing_zone(&world, server, &qname)?;
            drop(world);
            let key = key.map_or(zone_key, |s| (*s.0).clone());
            let now = now_secs();
            let window = window.unwrap_or((now - 3600, now + 14 * 86400));
            answer.answers = resign(&answer.answers, &zone, &key, window);
            answer.authorities = resign(&answer.authorities, &zone, &key, window);
        }
        Behaviour::ProofOf(name) => {
            let world = shared.world.lock().unwrap_or_else(|p| p.into_inner());
            let mut other = query.clone();
            other.queries = vec![hickory_proto::op::Query::query(
                wire::parse_name(&name)?,
                RecordType::DS,
            )];
            let proof = world.respond(server, &other)?;
            drop(world);
            let is_proof = |r: &Record| {
                r.record_type() == RecordType::NSEC
                    || r.record_type() == RecordType::NSEC3
                    || matches!(&r.data, RData::DNSSEC(DNSSECRData::RRSIG(s))
                        if matches!(s.input().type_covered, RecordType::NSEC | RecordType::NSEC3))
            };
            answer.authorities.retain(|r| !is_proof(r));
            answer
                .authorities
                .extend(proof.authorities.into_iter().filter(is_proof));
        }
        Behaviour::Nsec3(script) => {
            let world = shared.world.lock().unwrap_or_else(|p| p.into_inner());
            let (zone, key) = signing_zone(&world, server, &qname)?;
            drop(world);
            let is_nsec = |r: &Record| {
                r.record_type() == RecordType::NSEC
                    || matches!(&r.data, RData::DNSSEC(DNSSECRData::RRSIG(s))
                        if s.input().type_covered == RecordType::NSEC)
            };
            answer.authorities.retain(|r| !is_nsec(r));
            answer
                .authorities
                .extend(nsec3_proof(&script, &qname, &zone, &key)?);
        }
        Behaviour::LowercaseQuestion => lowercase = true,
        _ => {}
    }
    match behaviour_again {
        Behaviour::Normal => {}
        Behaviour::Silent => return None,
        Behaviour::Rcode(code) => {
            answer.answers.clear();
            answer.authorities.clear();
            answer.additionals.clear();
            answer.metadata.response_code = code;
        }
        Behaviour::LameUp => referral(&mut answer, ".", "a.root-servers.test.", ROOT),
        Behaviour::LameSideways => referral(&mut answer, "other.test.", "ns.other.test.", TLD_A),
        Behaviour::NoQuestion => answer.queries.clear(),
        Behaviour::RcodeNoQuestion(code) => {
            answer = Message::error_msg(answer.metadata.id, answer.metadata.op_code, code);
        }
        Behaviour::NodataNoQuestion => {
            negative(&mut answer);
            answer.queries.clear();
        }
        Behaviour::TruncatedOverTcp => {
            negative(&mut answer);
            answer.metadata.truncation = true;
            if !tcp {
                answer.authorities.clear();
            }
        }
        Behaviour::Slip => {
            if !tcp {
                answer.answers.clear();
                answer.authorities.clear();
                answer
                    .additionals
                    .retain(|r| r.record_type() == RecordType::OPT);
                answer.metadata.truncation = true;
            }
        }
        Behaviour::CnameAtName => {
            negative(&mut answer);
            let target = wire::parse_name("elsewhere.test.")?;
            answer.answers = vec![Record::from_rdata(qname, 300, RData::CNAME(CNAME(target)))];
        }
        Behaviour::ForeignOwner => {
            let other = wire::parse_name("other.test.")?;
            let mut moved = answer.answers.clone();
            for r in &mut moved {
                r.name = other.clone();
            }
            negative(&mut answer);
            answer.answers = moved;
        }
        Behaviour::Nxdomain => {
            negative(&mut answer);
            answer.metadata.response_code = ResponseCode::NXDomain;
        }
        Behaviour::DnskeyProtocol(protocol) => patch = Some(protocol),
        Behaviour::NoEdns { truncated_over_udp } => {
            if truncated_over_udp && !tcp {
                answer.answers.clear();
                answer.authorities.clear();
                answer.additionals.clear();
                answer.metadata.truncation = true;
            }
        }
        Behaviour::UnsignedNodata
        | Behaviour::StripSignatures
        | Behaviour::Resign { .. }
        | Behaviour::ProofOf(_)
        | Behaviour::Nsec3(_)
        | Behaviour::KeyTrap { .. }
        | Behaviour::Glue(..)
        | Behaviour::Repeat
        | Behaviour::LowercaseQuestion => {}
        Behaviour::ReferTo(hosts) => {
            answer.answers.clear();
            answer.metadata.authoritative = false;
            answer.metadata.response_code = ResponseCode::NoError;
            answer.authorities = hosts
                .iter()
                .filter_map(|h| wire::parse_name(h))
                .map(|h| Record::from_rdata(qname.clone(), 300, RData::NS(NS(h))))
                .collect();
            answer.additionals = hosts
                .iter()
                .filter_map(|h| {
                    let ip = HOSTS.iter().find(|(name, _)| name == h)?.1;
                    Some(Record::from_rdata(
                        wire::parse_name(h)?,
                        300,
                        RData::A(A(ip)),
                    ))
                })
                .collect();
        }
    }
    if lowercase {
        for q in &mut answer.queries {
            let lower = q.name().to_lowercase();
            q.set_name(lower);
        }
    }
    let mut bytes = answer.to_vec().ok()?;
    if let Some(protocol) = patch {
        set_dnskey_protocol(&mut bytes, &answer, protocol);
    }
    Some(bytes)
}

/// The DSYNC records `server` serves at `qname`: its own, else a wildcard's above it
/// (the closest), owned by `qname` as a synthesised answer is. `None` when there are none.
fn scripted_dsync(shared: &Shared, server: IpAddr, qname: &Name) -> Option<Vec<Record>> {
    let dsync = shared.dsync.lock().unwrap_or_else(|p| p.into_inner());
    let entries = dsync.get(&server)?;
    let name = wire::name_text(qname);
    let at = |owner: &str| -> Vec<&Vec<u8>> {
        entries
            .iter()
            .filter(|(o, _)| o == owner)
            .map(|(_, rdata)| rdata)
            .collect()
    };
    let mut found = at(&name);
    let mut above = name.clone();
    // Bounded: a name has at most 127 labels.
    for _ in 0..128 {
        if !found.is_empty() || above == "." {
            break;
        }
        above = wire::parent_name(&above);
        found = at(&format!("*.{above}").replace("*..", "*."));
    }
    if found.is_empty() {
        return None;
    }
    let code = RecordType::from(wire::DSYNC);
    Some(
        found
            .into_iter()
            .map(|rdata| {
                Record::from_rdata(
                    qname.clone(),
                    300,
                    RData::Unknown {
                        code,
                        rdata: hickory_proto::rr::rdata::NULL::with(rdata.clone()),
                    },
                )
            })
            .collect(),
    )
}

fn now_secs() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or_default()
}

/// The zone `server` speaks for about `qname` (its apex) and its key.
fn signing_zone(world: &World, server: IpAddr, qname: &Name) -> Option<(Name, LabKey)> {
    let zones = world.hosting.get(&server)?;
    let mut at = wire::name_text(qname);
    for _ in 0..128 {
        if zones.contains(&at) {
            let zone = world.zones.get(&at)?;
            return Some((wire::parse_name(&zone.name)?, zone.key.key(&zone.name)?));
        }
        if at == "." {
            return None;
        }
        at = wire::parent_name(&at);
    }
    None
}

/// `records` with every RRSIG made again by `key` over `window`, signer `zone`.
fn resign(records: &[Record], zone: &Name, key: &LabKey, window: (u32, u32)) -> Vec<Record> {
    let mut out: Vec<Record> = records
        .iter()
        .filter(|r| r.record_type() != RecordType::RRSIG)
        .cloned()
        .collect();
    for r in records {
        let RData::DNSSEC(DNSSECRData::RRSIG(sig)) = &r.data else {
            continue;
        };
        let covered = sig.input().type_covered;
        let rrset: Vec<Record> = wire::rrset(records, &r.name, covered).cloned().collect();
        if let Some(new) = sign(
            &rrset,
            covered,
            &r.name,
            zone,
            key,
            sig.input().original_ttl,
            window,
        ) {
            out.push(new);
        }
    }
    out
}

/// The SHA-1 NSEC3 hash of `name` (RFC 5155 section 5), raw.
pub fn nsec3_hash(name: &Name, salt: &[u8], iterations: u16) -> Option<Vec<u8>> {
    Nsec3HashAlgorithm::SHA1
        .hash(salt, name, iterations)
        .ok()
        .map(|d| d.as_ref().to_vec())
}

/// `hash` plus `delta` (+1 or -1), as a 160-bit number.
pub fn hash_step(hash: &[u8], up: bool) -> Vec<u8> {
    let mut out = hash.to_vec();
    for b in out.iter_mut().rev() {
        if up {
            let (v, carry) = b.overflowing_add(1);
            *b = v;
            if !carry {
                break;
            }
        } else {
            let (v, borrow) = b.overflowing_sub(1);
            *b = v;
            if !borrow {
                break;
            }
        }
    }
    out
}

/// The NSEC3 records (signed) of `script` for `qname DS` in `zone`.
fn nsec3_proof(
    script: &Nsec3Script,
    qname: &Name,
    zone: &Name,
    key: &LabKey,
) -> Option<Vec<Record>> {
    let now = now_secs();
    let window = (now - 3600, now + 14 * 86400);
    let record_of =
        |algorithm: u8, owner_hash: &[u8], next: Vec<u8>, opt_out: bool, types: Vec<RecordType>| {
            let owner = zone.prepend_label(base32hex(owner_hash)).ok()?;
            let nsec3 = NSEC3::new(
                Nsec3HashAlgorithm::SHA1,
                opt_out,
                script.iterations,
                script.record_salt.clone(),
                next,
                types,
            );
            let rdata = if algorithm == 1 {
                RData::DNSSEC(DNSSECRData::NSEC3(nsec3))
            } else {
                // hickory knows no other hash algorithm: the RDATA written out, its first
                // octet (the algorithm) changed.
                use hickory_proto::serialize::binary::BinEncodable;
                let mut bytes = nsec3.to_bytes().ok()?;
                *bytes.first_mut()? = algorithm;
                RData::Unknown {
                    code: RecordType::NSEC3,
                    rdata: hickory_proto::rr::rdata::NULL::with(bytes),
                }
            };
            let records = vec![Record::from_rdata(owner.clone(), 60, rdata)];
            let sig = sign(&records, RecordType::NSEC3, &owner, zone, key, 60, window)?;
            Some([records, vec![sig]].concat())
        };
    let record = |owner_hash: &[u8], next: Vec<u8>, opt_out: bool, types: Vec<RecordType>| {
        record_of(script.hash_algorithm, owner_hash, next, opt_out, types)
    };
    let decoy = match script.decoy {
        Some(algorithm) => {
            let other = nsec3_hash(
                &zone.prepend_label("zzz").ok()?,
                &script.owner_salt,
                script.iterations,
            )?;
            record_of(
                algorithm,
                &other,
                hash_step(&other, true),
                false,
                vec![RecordType::NS],
            )?
        }
        None => Vec::new(),
    };
    let child = nsec3_hash(qname, &script.owner_salt, script.iterations)?;
    if !script.opt_out {
        let mut out = record(&child, hash_step(&child, true), false, vec![RecordType::NS])?;
        out.extend(decoy);
        return Some(out);
    }
    let apex = nsec3_hash(zone, &script.owner_salt, script.iterations)?;
    let mut out = record(
        &apex,
        hash_step(&apex, true),
        true,
        vec![
            RecordType::SOA,
            RecordType::NS,
            RecordType::DNSKEY,
            RecordType::NSEC3PARAM,
            RecordType::RRSIG,
        ],
    )?;
    out.extend(record(
        &hash_step(&child, false),
        hash_step(&child, true),
        true,
        vec![RecordType::NS],
    )?);
    out.extend(decoy);
    Some(out)
}

/// Rewrites the protocol octet of every DNSKEY in `bytes` (the wire form of `answer`),
/// found by its public key, which hickory would refuse to write with a protocol other
/// than 3.
fn set_dnskey_protocol(bytes: &mut [u8], answer: &Message, protocol: u8) {
    for r in &answer.answers {
        let Some(key) = wire::as_dnskey(r) else {
            continue;
        };
        let public = key.public_key().public_bytes().to_vec();
        if public.is_empty() {
            continue;
        }
        let at = bytes
            .windows(public.len())
            .position(|w| w == public.as_slice());
        if let Some(at) = at
            && at >= 2
        {
            bytes[at - 2] = protocol;
        }
    }
}

/// Binds UDP and TCP on every address at one port; bounded tries.
async fn bind_all(shared: &Arc<Shared>) -> (u16, JoinSet<()>) {
    for _ in 0..50 {
        let Ok(probe) = std::net::UdpSocket::bind(SocketAddr::new(ROOT.into(), 0)) else {
            continue;
        };
        let Ok(port) = probe.local_addr().map(|a| a.port()) else {
            continue;
        };
        drop(probe);
        let mut tasks = JoinSet::new();
        let mut ok = true;
        for (_, ip) in HOSTS {
            let addr = SocketAddr::new((*ip).into(), port);
            let (Ok(udp), Ok(tcp)) = (UdpSocket::bind(addr).await, TcpListener::bind(addr).await)
            else {
                ok = false;
                break;
            };
            let (u, t) = (shared.clone(), shared.clone());
            tasks.spawn(serve_udp(udp, u));
            tasks.spawn(serve_tcp(tcp, t));
        }
        if ok {
            return (port, tasks);
        }
        tasks.abort_all();
    }
    panic!("no port free on every scripted address after 50 tries");
}

async fn serve_udp(socket: UdpSocket, shared: Arc<Shared>) {
    let socket = Arc::new(socket);
    let Ok(local) = socket.local_addr() else {
        return;
    };
    let mut buf = vec![0u8; 65_535];
    loop {
        let Ok((len, peer)) = socket.recv_from(&mut buf).await else {
            continue;
        };
        let Some(query) = buf.get(..len).and_then(|q| Message::from_vec(q).ok()) else {
            continue;
        };
        let Some(mut bytes) = reply(&shared, local.ip(), &query, false) else {
            continue;
        };
        let limit = query
            .edns
            .as_ref()
            .map_or(512, |e| usize::from(e.max_payload().max(512)));
        if bytes.len() > limit
            && let Ok(mut short) = Message::from_vec(&bytes)
        {
            short.answers.clear();
            short.authorities.clear();
            short.additionals.clear();
            short.metadata.truncation = true;
            bytes = short.to_vec().unwrap_or_default();
        }
        let delay = *shared.delay.lock().unwrap();
        if delay.is_zero() {
            let _ = socket.send_to(&bytes, peer).await;
        } else {
            let socket = socket.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = socket.send_to(&bytes, peer).await;
            });
        }
    }
}

async fn serve_tcp(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    connections.spawn(serve_connection(stream, shared.clone()));
                }
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let Ok(local) = stream.local_addr() else {
        return;
    };
    // A few queries per connection at most, each within a second.
    for _ in 0..8 {
        let mut len = [0u8; 2];
        let read = tokio::time::timeout(Duration::from_secs(1), stream.read_exact(&mut len));
        if !matches!(read.await, Ok(Ok(_))) {
            return;
        }
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if stream.read_exact(&mut query).await.is_err() {
            return;
        }
        let Ok(query) = Message::from_vec(&query) else {
            return;
        };
        let Some(bytes) = reply(&shared, local.ip(), &query, true) else {
            // Silence: hold the connection until the client gives up (bounded).
            let mut sink = [0u8; 1];
            let _ = tokio::time::timeout(Duration::from_secs(2), stream.read(&mut sink)).await;
            return;
        };
        let Ok(n) = u16::try_from(bytes.len()) else {
            return;
        };
        let mut framed = n.to_be_bytes().to_vec();
        framed.extend_from_slice(&bytes);
        if stream.write_all(&framed).await.is_err() {
            return;
        }
    }
}

/// Runs `dnssec-warden check ZONE --json` with `config`: exit code and the JSON.
pub async fn check_json(config: &Path, zone: &str) -> (i32, serde_json::Value) {
    let out = tokio::process::Command::new(crate::daemon::exe())
        .arg("--config")
        .arg(config)
        .args(["check", zone, "--json"])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("check finished within a minute")
        .expect("check ran");
    let text = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), json)
}
