//! The lab's zone data and how one server answers from it: authoritative answers with AA,
//! referrals with glue and AA=0, DS at the parent side of a cut, NODATA and NXDOMAIN with
//! the SOA and NSEC proofs, and RRSIGs made on the fly with the zone's current keys (one
//! key, or a keystore's several as PowerDNS signs with them: [`Signing`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use hickory_proto::dnssec::TBS;
use hickory_proto::dnssec::rdata::{CDNSKEY, CDS, DNSKEY, DNSSECRData, NSEC, RRSIG, SigInput};
use hickory_proto::dnssec::{Algorithm, DigestType as HDigest, PublicKeyBuf};
use hickory_proto::op::{Edns, Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, NS, SOA};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType, SerialNumber};

use crate::dnssec::{Dnskey, Ds};
use crate::keys::LabKey;
use crate::wire;

/// A zone's key as a function of the zone name, e.g. the provider simulator's lookup.
pub type KeyFn = Arc<dyn Fn(&str) -> Option<LabKey> + Send + Sync>;

/// A zone's signing as a function of the zone name, e.g. the PowerDNS simulator's keystore.
pub type SigningFn = Arc<dyn Fn(&str) -> Signing + Send + Sync>;

/// What one signing key signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signs {
    /// Every RRset: a CSK.
    Everything,
    /// The DNSKEY RRset (and CDS/CDNSKEY): a KSK beside an active ZSK of its algorithm.
    Keys,
    /// Every RRset but the DNSKEY RRset: a ZSK.
    Data,
}

impl Signs {
    /// Whether a key of this role signs an RRset of `rtype`. CDS and CDNSKEY are signed by
    /// every active key, as PowerDNS 4.7 serves them.
    fn covers(self, rtype: RecordType) -> bool {
        match rtype {
            RecordType::DNSKEY => self != Self::Data,
            RecordType::CDS | RecordType::CDNSKEY => true,
            _ => self != Self::Keys,
        }
    }
}

/// How a zone is signed at one instant: the DNSKEY RRset its apex serves, the keys that
/// sign and what each signs, and the keys its CDS/CDNSKEY describe. A key may sign without
/// its DNSKEY being served, and be served without signing.
#[derive(Debug, Clone, Default)]
pub struct Signing {
    /// The apex DNSKEY RRset, in the order served.
    pub dnskeys: Vec<Dnskey>,
    /// The keys that sign, in the order their RRSIGs are served.
    pub signers: Vec<(LabKey, Signs)>,
    /// The keys the apex CDS/CDNSKEY describe where they are published.
    pub entry_points: Vec<Dnskey>,
}

impl Signing {
    /// One key that signs everything and is the zone's only DNSKEY and entry point.
    pub fn one(key: LabKey) -> Self {
        let dnskey = key.dnskey();
        Self {
            dnskeys: vec![dnskey.clone()],
            signers: vec![(key, Signs::Everything)],
            entry_points: vec![dnskey],
        }
    }

    /// Some key signs: the zone's answers carry RRSIGs and NSEC proofs.
    pub fn is_signed(&self) -> bool {
        !self.signers.is_empty()
    }

    /// The keys that sign an RRset of `rtype`.
    pub fn signers_of(&self, rtype: RecordType) -> impl Iterator<Item = &LabKey> {
        self.signers
            .iter()
            .filter(move |(_, signs)| signs.covers(rtype))
            .map(|(key, _)| key)
    }
}

/// Where a zone's signing key comes from, consulted on every query.
// One per zone: the size of the key variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Default)]
pub enum KeySource {
    #[default]
    Unsigned,
    Static(LabKey),
    /// E.g. the provider simulator's current key for the zone (`None`: DNSSEC off).
    Dynamic(KeyFn),
    /// A keystore's keys, e.g. the PowerDNS simulator's.
    Keystore(SigningFn),
}

impl std::fmt::Debug for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unsigned => f.write_str("Unsigned"),
            Self::Static(k) => write!(f, "Static({k:?})"),
            Self::Dynamic(_) => f.write_str("Dynamic"),
            Self::Keystore(_) => f.write_str("Keystore"),
        }
    }
}

impl KeySource {
    /// The zone's one key; of a keystore, the first key that signs the DNSKEY RRset.
    pub fn key(&self, zone: &str) -> Option<LabKey> {
        match self {
            Self::Unsigned => None,
            Self::Static(k) => Some(k.clone()),
            Self::Dynamic(f) => f(zone),
            Self::Keystore(f) => f(zone).signers_of(RecordType::DNSKEY).next().cloned(),
        }
    }

    /// How the zone is signed now.
    pub fn signing(&self, zone: &str) -> Signing {
        match self {
            Self::Keystore(f) => f(zone),
            _ => self.key(zone).map(Signing::one).unwrap_or_default(),
        }
    }

    /// The provider simulator's key: DNSSEC switched on there signs the zone here.
    pub fn provider(sim: crate::SimHandle) -> Self {
        Self::Dynamic(Arc::new(move |zone| sim.signing_key(zone)))
    }

    /// The Cloudflare simulator's one key, for every zone it says is signed.
    pub fn cloudflare(sim: crate::cloudflare_sim::CloudflareHandle) -> Self {
        Self::Dynamic(Arc::new(move |zone| sim.signing_key(zone)))
    }

    /// The Route 53 simulator's key: the zone's `ACTIVE` key-signing key while its
    /// signing is `INSYNC`.
    pub fn route53(sim: crate::route53_sim::Route53Handle) -> Self {
        Self::Dynamic(Arc::new(move |zone| sim.signing_key(zone)))
    }

    /// The PowerDNS simulator's keystore: every active key signs, as 4.7 splits the work
    /// between KSKs and ZSKs, and every published key is served.
    pub fn pdns(sim: crate::pdns_sim::PdnsHandle) -> Self {
        Self::Keystore(Arc::new(move |zone| sim.signing(zone)))
    }
}

/// What a PowerDNS-like account publishes at a zone's apex besides its keys, asked on every
/// query (e.g. [`crate::pdns_sim::PdnsHandle::apex`]).
#[derive(Clone)]
pub struct ApexSource(pub Arc<dyn Fn(&str) -> crate::pdns_sim::Apex + Send + Sync>);

impl std::fmt::Debug for ApexSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApexSource")
    }
}

impl ApexSource {
    /// The PowerDNS simulator's stored DNSKEYs and CDS/CDNSKEY publication.
    pub fn pdns(sim: crate::pdns_sim::PdnsHandle) -> Self {
        Self(Arc::new(move |zone| sim.apex(zone)))
    }
}

/// What a server does instead of answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Servfail,
    Refused,
    /// No answer at all: the client times out.
    Drop,
}

#[derive(Debug, Clone)]
pub struct Delegation {
    pub ns: Vec<String>,
    pub ns_ttl: u32,
    /// The DS set each parent server publishes (servers not listed publish none).
    pub ds: HashMap<IpAddr, Vec<Ds>>,
    pub ds_ttl: u32,
}

#[derive(Debug, Clone)]
pub struct ZoneData {
    pub name: String,
    pub ns: Vec<String>,
    pub ttl: u32,
    pub dnskey_ttl: u32,
    /// Plain records: (owner, type) -> RDATA, all with `ttl`.
    pub records: BTreeMap<(String, RecordType), Vec<RData>>,
    pub delegations: BTreeMap<String, Delegation>,
    /// The NS set a parent server delegates a cut to where it differs from the
    /// delegation's `ns` (a re-delegation done at one server first): cut -> server -> NS.
    pub delegation_ns: BTreeMap<String, HashMap<IpAddr, Vec<String>>>,
    pub key: KeySource,
    /// Publish the RFC 8078 "delete DS" CDS and CDNSKEY.
    pub cds_delete: bool,
    /// CDS records one server publishes at the apex (in place of the delete request):
    /// a child whose name servers disagree, or a stranger's key.
    pub cds_at: HashMap<IpAddr, Vec<Ds>>,
    /// Fixed RRSIG (inception, expiration); default: an hour ago to two weeks ahead.
    pub signature_window: Option<(u32, u32)>,
    /// Stored DNSKEYs and CDS/CDNSKEY from a PowerDNS-like account, asked per query.
    pub apex: Option<ApexSource>,
}

impl ZoneData {
    pub fn new(name: &str, ns: &[&str], key: KeySource) -> Self {
        let mut zone = Self {
            name: name.to_string(),
            ns: ns.iter().map(|s| s.to_string()).collect(),
            ttl: 300,
            dnskey_ttl: 300,
            records: BTreeMap::new(),
            delegations: BTreeMap::new(),
            delegation_ns: BTreeMap::new(),
            key,
            cds_delete: false,
            cds_at: HashMap::new(),
            signature_window: None,
            apex: None,
        };
        if let Some(apex) = wire::parse_name(name) {
            let host = |s: &str| wire::parse_name(s).unwrap_or_else(Name::root);
            let soa = SOA::new(
                host(ns.first().copied().unwrap_or(".")),
                host(&format!("hostmaster.{}", name.trim_start_matches('.'))),
                1,
                3600,
                600,
                86400,
                60,
            );
            zone.records.insert(
                (wire::name_text(&apex), RecordType::SOA),
                vec![RData::SOA(soa)],
            );
            zone.records.insert(
                (wire::name_text(&apex), RecordType::NS),
                ns.iter().map(|h| RData::NS(NS(host(h)))).collect(),
            );
        }
        zone
    }

    /// The apex SOA's minimum field.
    pub fn set_soa_minimum(&mut self, minimum: u32) {
        if let Some(apex) = wire::parse_name(&self.name)
            && let Some(sets) = self
                .records
                .get_mut(&(wire::name_text(&apex), RecordType::SOA))
        {
            for rdata in sets {
                if let RData::SOA(soa) = rdata {
                    soa.minimum = minimum;
                }
            }
        }
    }

    pub fn add_a(&mut self, owner: &str, ip: Ipv4Addr) {
        self.records
            .entry((owner.to_string(), RecordType::A))
            .or_default()
            .push(RData::A(A(ip)));
    }

    /// The NS set `server` delegates `cut` to: its own where it was given one, else the
    /// delegation's.
    pub fn ns_at<'a>(
        &'a self,
        cut: &str,
        delegation: &'a Delegation,
        server: IpAddr,
    ) -> &'a [String] {
        self.delegation_ns
            .get(cut)
            .and_then(|per_server| per_server.get(&server))
            .unwrap_or(&delegation.ns)
    }

    /// The delegation `name` lies at or below, if any.
    fn delegation_above(&self, name: &str) -> Option<(&String, &Delegation)> {
        // Walk up from the name: a few map lookups, however many delegations there are.
        let mut at = name.to_string();
        while at != self.name && wire::is_subdomain(&at, &self.name) {
            if let Some(found) = self.delegations.get_key_value(&at) {
                return Some(found);
            }
            at = wire::parent_name(&at);
        }
        None
    }
}

/// Everything the lab's servers serve, and what each server hosts.
#[derive(Debug, Default)]
pub struct World {
    pub zones: BTreeMap<String, ZoneData>,
    /// Zones each server address hosts (a set: a server may host 100,000).
    pub hosting: HashMap<IpAddr, BTreeSet<String>>,
    pub faults: HashMap<IpAddr, Fault>,
    /// Host name -> address, for glue.
    pub hosts: BTreeMap<String, Ipv4Addr>,
    /// IPv6 glue for name server hosts (nothing in the lab listens there).
    pub hosts6: BTreeMap<String, Ipv6Addr>,
    /// The old provider's copies of zones moving in (their own keys and apex NS).
    pub old_zones: BTreeMap<String, ZoneData>,
    /// The old provider's servers: they answer from `old_zones` (every zone there), and
    /// never from `zones`.
    pub old_servers: BTreeSet<IpAddr>,
    /// Queries the lab's servers have read (benchmarks count what an observer asks).
    pub queries: u64,
    /// The servers of each PowerDNS-like account: server -> account.
    pub account_servers: HashMap<IpAddr, String>,
    /// Each account's copies of the zones it holds (own keys, own apex NS): account ->
    /// zone -> data. Its servers answer from these only.
    pub account_zones: BTreeMap<String, BTreeMap<String, ZoneData>>,
    /// Sources whose RFC 2136 UPDATEs of a delegation's DS the servers take (a registry).
    pub update_from: BTreeSet<IpAddr>,
}

/// No zones: what a server of an account holding nothing answers from.
const NO_ZONES: &BTreeMap<String, ZoneData> = &BTreeMap::new();

fn now() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or_default()
}

/// RFC 4034 section 6.1 canonical order: compare labels from the right, lower-cased.
fn canonical_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let labels = |s: &str| -> Vec<Vec<u8>> {
        s.trim_end_matches('.')
            .split('.')
            .filter(|l| !l.is_empty())
            .rev()
            .map(|l| l.to_ascii_lowercase().into_bytes())
            .collect()
    };
    labels(a).cmp(&labels(b))
}

struct Answer {
    message: Message,
    /// The zone answered from, how it is signed now and the signatures' window.
    zone: String,
    signing: Signing,
    window: (u32, u32),
    /// What a PowerDNS-like account publishes at the apex, asked once per answer.
    apex: Option<crate::pdns_sim::Apex>,
    dnssec_ok: bool,
}

impl Answer {
    fn rrset(&self, owner: &str, ttl: u32, data: Vec<RData>) -> Vec<Record> {
        let Some(name) = wire::parse_name(owner) else {
            return Vec::new();
        };
        let records: Vec<Record> = data
            .into_iter()
            .map(|d| Record::from_rdata(name.clone(), ttl, d))
            .collect();
        let mut out = records.clone();
        if let (true, Some(first)) = (self.dnssec_ok, records.first()) {
            let rtype = first.record_type();
            let zone_name = wire::parse_name(&self.zone).unwrap_or_else(Name::root);
            for key in self.signing.signers_of(rtype) {
                if let Some(sig) = sign(&records, rtype, &name, &zone_name, key, ttl, self.window) {
                    out.push(sig);
                }
            }
        }
        out
    }
}

/// Signatures made, by the digest of the key and the data signed: a signed zone serves
/// the same RRSIG until it is signed again (as Knot DNS and BIND do), not a new one at
/// every answer. Bounded: forgotten all at once past 2^18 signatures.
static SIGNATURES: LazyLock<Mutex<HashMap<[u8; 32], Vec<u8>>>> = LazyLock::new(Mutex::default);

fn signature(key: &LabKey, tbs: &[u8]) -> Option<Vec<u8>> {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let public = key.dnskey().public_key;
    ctx.update(&(public.len() as u64).to_be_bytes());
    ctx.update(&public);
    ctx.update(tbs);
    let mut digest = [0u8; 32];
    digest.copy_from_slice(ctx.finish().as_ref());
    let mut made = SIGNATURES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(sig) = made.get(&digest) {
        return Some(sig.clone());
    }
    let sig = key.sign(tbs).ok()?;
    if made.len() >= 1 << 18 {
        made.clear();
    }
    made.insert(digest, sig.clone());
    Some(sig)
}

/// The RRSIG over `records` by `key` of `zone`.
pub fn sign(
    records: &[Record],
    rtype: RecordType,
    owner: &Name,
    zone: &Name,
    key: &LabKey,
    ttl: u32,
    (inception, expiration): (u32, u32),
) -> Option<Record> {
    let input = SigInput {
        type_covered: rtype,
        algorithm: Algorithm::from_u8(key.algorithm()),
        num_labels: owner.num_labels(),
        original_ttl: ttl,
        sig_expiration: SerialNumber::new(expiration),
        sig_inception: SerialNumber::new(inception),
        key_tag: key.dnskey().key_tag(),
        signer_name: zone.clone(),
    };
    let tbs = TBS::from_input(owner, DNSClass::IN, &input, records.iter()).ok()?;
    let signature = signature(key, tbs.as_ref())?;
    Some(Record::from_rdata(
        owner.clone(),
        ttl,
        RData::DNSSEC(DNSSECRData::RRSIG(RRSIG::from_sig(input, signature))),
    ))
}

pub fn dnskey_rdata(key: &Dnskey) -> RData {
    RData::DNSSEC(DNSSECRData::DNSKEY(DNSKEY::with_flags(
        key.flags,
        PublicKeyBuf::new(key.public_key.clone(), Algorithm::from_u8(key.algorithm)),
    )))
}

pub fn ds_rdata(ds: &Ds) -> RData {
    RData::DNSSEC(DNSSECRData::DS(wire::to_hickory_ds(ds)))
}

impl World {
    /// The answer `server` gives to `query`; `None` to stay silent.
    pub fn respond(&self, server: IpAddr, query: &Message) -> Option<Message> {
        let mut response = Message::new(
            query.metadata.id,
            MessageType::Response,
            query.metadata.op_code,
        );
        response.metadata.recursion_desired = query.metadata.recursion_desired;
        response.queries = query.queries.clone();
        let dnssec_ok = query.edns.as_ref().is_some_and(|e| e.flags().dnssec_ok);
        if query.edns.is_some() {
            let mut edns = Edns::new();
            edns.set_max_payload(1232);
            edns.set_dnssec_ok(dnssec_ok);
            response.set_edns(edns);
        }
        match self.faults.get(&server) {
            Some(Fault::Drop) => return None,
            Some(Fault::Servfail) => {
                response.metadata.response_code = ResponseCode::ServFail;
                return Some(response);
            }
            Some(Fault::Refused) => {
                response.metadata.response_code = ResponseCode::Refused;
                return Some(response);
            }
            None => {}
        }
        let Some(question) = query.queries.first().filter(|_| query.queries.len() == 1) else {
            response.metadata.response_code = ResponseCode::FormErr;
            return Some(response);
        };
        let qname = wire::name_text(question.name());
        let qtype = question.query_type();
        // The most specific hosted zone containing the name.
        // The most specific hosted zone: walk up from the name (a few map lookups, so a
        // server hosting 10,000 zones, as in the benchmark, stays fast).
        let hosted = self.hosting.get(&server);
        let account = self.account_servers.get(&server);
        // The old provider's and an account's servers serve every zone of their own.
        let old = self.old_servers.contains(&server) || account.is_some();
        let zones = match account {
            Some(a) => self.account_zones.get(a).unwrap_or(NO_ZONES),
            None if old => &self.old_zones,
            None => &self.zones,
        };
        let mut at = qname.clone();
        let mut found = None;
        for _ in 0..128 {
            if let Some(z) = zones.get(&at)
                && (old || hosted.is_some_and(|h| h.contains(&at)))
            {
                found = Some(z);
                break;
            }
            if at == "." {
                break;
            }
            at = wire::parent_name(&at);
        }
        let Some(zone) = found else {
            response.metadata.response_code = ResponseCode::Refused;
            return Some(response);
        };
        let signing = zone.key.signing(&zone.name);
        // Signed anew every hour, as a signer refreshing its signatures would: valid from
        // an hour before the last full hour, for 15 days.
        let window = zone.signature_window.unwrap_or_else(|| {
            let inception = (now() / 3600 * 3600).saturating_sub(3600);
            (inception, inception.saturating_add(15 * 86400))
        });
        let mut answer = Answer {
            message: response,
            zone: zone.name.clone(),
            signing,
            window,
            apex: zone.apex.as_ref().map(|a| (a.0)(&zone.name)),
            dnssec_ok,
        };
        self.answer_in_zone(server, zone, &qname, qtype, &mut answer);
        Some(answer.message)
    }

    /// The answer `server` gives an RFC 2136 UPDATE (`bytes`) from `peer`: only of
    /// delegations' DS RRsets in a zone it hosts, from a source in `update_from` (as the
    /// TLD's ACL for its registry); every change checked before any is made, then each
    /// made on this server only (each TLD server is updated on its own). `None`: not an
    /// UPDATE that can be answered.
    pub fn update(&mut self, server: IpAddr, peer: IpAddr, bytes: &[u8]) -> Option<Vec<u8>> {
        use crate::registry::msg;
        let m = msg::parse(bytes)?;
        let question = bytes.get(12..m.question_end).unwrap_or_default();
        let answer = |rcode| {
            Some(msg::answer(
                m.id,
                m.flags,
                rcode,
                rcode == msg::RCODE_NOERROR,
                question,
            ))
        };
        if m.is_response() || m.opcode() != msg::OPCODE_UPDATE {
            return None;
        }
        if !self.update_from.contains(&peer) {
            return answer(msg::RCODE_REFUSED);
        }
        let Some((zone_wire, _, _)) = &m.question else {
            return answer(msg::RCODE_FORMERR);
        };
        let zone_name = msg::name_text(zone_wire);
        let hosted = self
            .hosting
            .get(&server)
            .is_some_and(|h| h.contains(&zone_name));
        let Some(zone) = self.zones.get_mut(&zone_name).filter(|_| hosted) else {
            return answer(msg::RCODE_NOTAUTH);
        };
        // Per delegation: cleared first (a delete of the RRset), then these added.
        let mut changes: BTreeMap<String, (bool, Vec<Ds>, Option<u32>)> = BTreeMap::new();
        for rr in &m.authority {
            let owner = msg::name_text(&rr.owner);
            if rr.rtype != msg::TYPE_DS || !zone.delegations.contains_key(&owner) {
                return answer(msg::RCODE_REFUSED);
            }
            let change = changes.entry(owner).or_default();
            match rr.class {
                msg::CLASS_ANY if rr.rdata.is_empty() => change.0 = true,
                msg::CLASS_IN => {
                    let Some(ds) = Ds::from_rdata(&rr.rdata) else {
                        return answer(msg::RCODE_FORMERR);
                    };
                    change.1.push(ds);
                    change.2 = Some(rr.ttl);
                }
                _ => return answer(msg::RCODE_REFUSED),
            }
        }
        for (owner, (clear, add, ttl)) in changes {
            let Some(d) = zone.delegations.get_mut(&owner) else {
                continue;
            };
            let set = d.ds.entry(server).or_default();
            if clear {
                set.clear();
            }
            for ds in add {
                if !set.contains(&ds) {
                    set.push(ds);
                }
            }
            if set.is_empty() {
                d.ds.remove(&server);
            }
            if let Some(ttl) = ttl {
                d.ds_ttl = ttl;
            }
        }
        answer(msg::RCODE_NOERROR)
    }

    fn answer_in_zone(
        &self,
        server: IpAddr,
        zone: &ZoneData,
        qname: &str,
        qtype: RecordType,
        out: &mut Answer,
    ) {
        // At or below a delegation: DS at the cut is ours, everything else is a referral.
        if let Some((cut, delegation)) = zone.delegation_above(qname) {
            let ds = delegation.ds.get(&server).cloned().unwrap_or_default();
            if qname == cut && qtype == RecordType::DS {
                out.message.metadata.authoritative = true;
                if ds.is_empty() {
                    self.negative(server, zone, qname, false, out);
                } else {
                    let records =
                        out.rrset(cut, delegation.ds_ttl, ds.iter().map(ds_rdata).collect());
                    out.message.answers.extend(records);
                }
                return;
            }
            out.message.metadata.authoritative = false;
            let ns_set = zone.ns_at(cut, delegation, server);
            let ns = out.rrset(
                cut,
                delegation.ns_ttl,
                ns_set
                    .iter()
                    .filter_map(|h| wire::parse_name(h))
                    .map(|n| RData::NS(NS(n)))
                    .collect(),
            );
            // NS at a cut is not signed: drop any signature `rrset` made.
            out.message
                .authorities
                .extend(ns.into_iter().filter(|r| r.record_type() == RecordType::NS));
            if ds.is_empty() {
                if out.dnssec_ok && out.signing.is_signed() {
                    let nsec = self.nsec_at(server, zone, cut, out);
                    out.message.authorities.extend(nsec);
                }
            } else {
                let records = out.rrset(cut, delegation.ds_ttl, ds.iter().map(ds_rdata).collect());
                out.message.authorities.extend(records);
            }
            for host in ns_set {
                if let (true, Some(ip)) =
                    (wire::is_subdomain(host, &zone.name), self.hosts.get(host))
                    && let Some(name) = wire::parse_name(host)
                {
                    if let Some(ip6) = self.hosts6.get(host) {
                        out.message.additionals.push(Record::from_rdata(
                            name.clone(),
                            delegation.ns_ttl,
                            RData::AAAA(AAAA(*ip6)),
                        ));
                    }
                    out.message.additionals.push(Record::from_rdata(
                        name,
                        delegation.ns_ttl,
                        RData::A(A(*ip)),
                    ));
                }
            }
            return;
        }
        out.message.metadata.authoritative = true;
        let data = self.data_at(server, zone, out, qname);
        if let Some(rdata) = data.get(&qtype).filter(|d| !d.is_empty()) {
            // A PowerDNS-like account serves its CDS and CDNSKEY at its DNSKEY TTL (4.7:
            // the SOA minimum, as its keys).
            let key_ttl = matches!(qtype, RecordType::DNSKEY)
                || (out.apex.is_some() && matches!(qtype, RecordType::CDS | RecordType::CDNSKEY));
            let ttl = if key_ttl { zone.dnskey_ttl } else { zone.ttl };
            let records = out.rrset(qname, ttl, rdata.clone());
            out.message.answers.extend(records);
            if qtype == RecordType::NS {
                for r in rdata {
                    if let RData::NS(NS(host)) = r
                        && let Some(ip) = self.hosts.get(&wire::name_text(host))
                    {
                        out.message.additionals.push(Record::from_rdata(
                            host.clone(),
                            zone.ttl,
                            RData::A(A(*ip)),
                        ));
                    }
                }
            }
            return;
        }
        let exists = !data.is_empty()
            || zone
                .records
                .keys()
                .any(|(owner, _)| wire::is_subdomain(owner, qname));
        self.negative(server, zone, qname, !exists, out);
    }

    /// Every RRset at `name` in `zone` (apex DNSSEC records included).
    fn data_at(
        &self,
        server: IpAddr,
        zone: &ZoneData,
        out: &Answer,
        name: &str,
    ) -> BTreeMap<RecordType, Vec<RData>> {
        let mut data: BTreeMap<RecordType, Vec<RData>> = zone
            .records
            .iter()
            .filter(|((owner, _), _)| owner == name)
            .map(|((_, t), d)| (*t, d.clone()))
            .collect();
        if name == zone.name {
            let mut keys: Vec<RData> = Vec::new();
            for k in &out.signing.dnskeys {
                let rdata = dnskey_rdata(k);
                if !keys.contains(&rdata) {
                    keys.push(rdata);
                }
            }
            if !keys.is_empty() {
                data.insert(RecordType::DNSKEY, keys);
            }
            if let Some(apex) = &out.apex {
                Self::pdns_apex(&zone.name, &out.signing, apex, &mut data);
            }
            if zone.cds_delete {
                insert_cds_delete(&mut data);
            }
            if let Some(cds) = zone.cds_at.get(&server).filter(|c| !c.is_empty()) {
                data.insert(
                    RecordType::CDS,
                    cds.iter()
                        .map(|d| {
                            let ds = wire::to_hickory_ds(d);
                            RData::DNSSEC(DNSSECRData::CDS(CDS::new(
                                ds.key_tag(),
                                Some(ds.algorithm()),
                                ds.digest_type(),
                                ds.digest().to_vec(),
                            )))
                        })
                        .collect(),
                );
                data.remove(&RecordType::CDNSKEY);
            }
        }
        data
    }

    /// A PowerDNS-like apex: the stored DNSKEYs beside the keystore's (served unsigned
    /// while the zone is), the CDS and CDNSKEY of its entry points as published, or the
    /// delete request.
    fn pdns_apex(
        zone: &str,
        signing: &Signing,
        apex: &crate::pdns_sim::Apex,
        data: &mut BTreeMap<RecordType, Vec<RData>>,
    ) {
        if !apex.stored_dnskeys.is_empty() {
            let set = data.entry(RecordType::DNSKEY).or_default();
            for k in &apex.stored_dnskeys {
                let rdata = dnskey_rdata(k);
                if !set.contains(&rdata) {
                    set.push(rdata);
                }
            }
        }
        if apex.delete {
            insert_cds_delete(data);
            return;
        }
        // The server publishes CDS/CDNSKEY for its entry points only.
        let keys = &signing.entry_points;
        let cds: Vec<RData> = keys
            .iter()
            .flat_map(|key| {
                apex.cds_digests
                    .iter()
                    .filter_map(|d| key.to_ds(zone, *d).ok())
            })
            .map(|d| {
                let ds = wire::to_hickory_ds(&d);
                RData::DNSSEC(DNSSECRData::CDS(CDS::new(
                    ds.key_tag(),
                    Some(ds.algorithm()),
                    ds.digest_type(),
                    ds.digest().to_vec(),
                )))
            })
            .collect();
        if !cds.is_empty() {
            data.insert(RecordType::CDS, cds);
        }
        if apex.cdnskey && !keys.is_empty() {
            data.insert(
                RecordType::CDNSKEY,
                keys.iter()
                    .map(|key| {
                        RData::DNSSEC(DNSSECRData::CDNSKEY(CDNSKEY::with_flags(
                            key.flags,
                            Some(Algorithm::from_u8(key.algorithm)),
                            key.public_key.clone(),
                        )))
                    })
                    .collect(),
            );
        }
    }

    /// NODATA or NXDOMAIN, with the SOA and, in a signed zone, the NSEC proofs.
    fn negative(
        &self,
        server: IpAddr,
        zone: &ZoneData,
        qname: &str,
        nxdomain: bool,
        out: &mut Answer,
    ) {
        if nxdomain {
            out.message.metadata.response_code = ResponseCode::NXDomain;
        }
        if let Some(soa) = zone.records.get(&(zone.name.clone(), RecordType::SOA)) {
            let records = out.rrset(&zone.name, zone.ttl.min(60), soa.clone());
            out.message.authorities.extend(records);
        }
        if !(out.dnssec_ok && out.signing.is_signed()) {
            return;
        }
        let mut proofs = self.nsec_at(server, zone, qname, out);
        if nxdomain {
            let wildcard = format!("*.{}", zone.name);
            for r in self.nsec_at(server, zone, &wildcard, out) {
                if !proofs.contains(&r) {
                    proofs.push(r);
                }
            }
        }
        out.message.authorities.extend(proofs);
    }

    /// The NSEC that matches or covers `name`, signed.
    fn nsec_at(&self, server: IpAddr, zone: &ZoneData, name: &str, out: &Answer) -> Vec<Record> {
        let mut owners: BTreeSet<String> = BTreeSet::new();
        owners.insert(zone.name.clone());
        for (owner, _) in zone.records.keys() {
            // Names below a cut are glue, outside the zone's own data.
            if zone
                .delegation_above(owner)
                .is_none_or(|(cut, _)| cut == owner)
            {
                owners.insert(owner.clone());
            }
        }
        owners.extend(zone.delegations.keys().cloned());
        let mut sorted: Vec<String> = owners.into_iter().collect();
        sorted.sort_by(|a, b| canonical_cmp(a, b));
        // The last owner not after `name`: the match, or the one whose span covers it.
        let at = sorted
            .iter()
            .rposition(|o| canonical_cmp(o, name) != std::cmp::Ordering::Greater)
            .unwrap_or(sorted.len().saturating_sub(1));
        let owner = sorted[at].clone();
        let next = sorted[(at + 1) % sorted.len()].clone();
        let mut types: BTreeSet<RecordType> = BTreeSet::new();
        types.insert(RecordType::NSEC);
        if let Some(delegation) = zone.delegations.get(&owner) {
            types.insert(RecordType::NS);
            if delegation.ds.get(&server).is_some_and(|d| !d.is_empty()) {
                types.insert(RecordType::DS);
                types.insert(RecordType::RRSIG);
            }
        } else {
            types.insert(RecordType::RRSIG);
            types.extend(self.data_at(server, zone, out, &owner).keys());
        }
        let Some(next_name) = wire::parse_name(&next) else {
            return Vec::new();
        };
        out.rrset(
            &owner,
            zone.ttl.min(60),
            vec![RData::DNSSEC(DNSSECRData::NSEC(NSEC::new(
                next_name, types,
            )))],
        )
    }
}

/// RFC 8078's "delete DNSSEC" sentinel as the apex's CDS and CDNSKEY sets.
fn insert_cds_delete(data: &mut BTreeMap<RecordType, Vec<RData>>) {
    data.insert(
        RecordType::CDS,
        vec![RData::DNSSEC(DNSSECRData::CDS(CDS::new(
            0,
            None,
            HDigest::from(0),
            vec![0],
        )))],
    );
    data.insert(
        RecordType::CDNSKEY,
        vec![RData::DNSSEC(DNSSECRData::CDNSKEY(CDNSKEY::with_flags(
            0,
            None,
            vec![0],
        )))],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_order_is_by_labels_from_the_right() {
        let mut names = vec!["z.test.", "test.", "a.b.test.", "b.test.", "*.test."];
        names.sort_by(|a, b| canonical_cmp(a, b));
        assert_eq!(
            names,
            vec!["test.", "*.test.", "b.test.", "a.b.test.", "z.test."]
        );
    }
}
