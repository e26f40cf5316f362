//! Our own validator: the chain of trust from the trust anchor down to the zone, walked
//! over the same per-server authoritative queries as everything else.
//!
//! Why not hickory's `DnssecDnsHandle`: it validates what a recursive upstream hands it,
//! and the observer must never trust a recursive cache (DESIGN.md section 3, rule 2). The
//! scope here is deliberately narrow, the question `check` asks: does `zone`'s apex
//! validate? For every cut from the anchor down: the DS RRset (or its signed denial,
//! NSEC or NSEC3) at the parent, the DNSKEY RRset at the child verified by a DS, and at
//! last the zone's SOA signed by its keys. Wildcards and CNAMEs do not occur on this path
//! and are not handled. Signatures are checked by hickory-proto (ring) in canonical form.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use hickory_proto::dnssec::rdata::RRSIG;
use hickory_proto::dnssec::{TBS, Verifier};
use hickory_proto::op::Message;
use hickory_proto::rr::{DNSClass, Name, Record, RecordType};

use super::anchor::TrustAnchors;
use super::sigcache;
use super::{ValidationProbe, ValidationVerdict};
use crate::dns::net::budget::Budget;
use crate::dns::net::discovery::{Discovery, ZoneCut};
use crate::dns::net::query::{self, Querier};
use crate::dns::net::transport::{NetTransport, Transport};
use crate::dns::net::wire;
use crate::dnssec::{Dnskey, Ds};
use futures::future::join_all;

/// A link whose signature could not be verified: bogus, or unknown when the work
/// allowed ran out first (never `secure`, and no outage claimed on it either).
fn failed<T>(e: VerifyError, what: String) -> Link<T> {
    match e {
        VerifyError::Failed(d) => Link::Bogus(format!("{what}: {d}")),
        VerifyError::Exhausted(d) => Link::Unknown(format!("{what}: {d}")),
    }
}

/// A DNSKEY set none of whose keys a DS (or the trust anchor) names.
const NO_ENTRY_KEY: &str = "no served DNSKEY matches the DS (or trust anchor)";

/// The words of a trust anchor no served key matches (a configuration fault).
pub const TRUST_ANCHOR_MISMATCH: &str = "the configured trust anchor matches no key served";

/// What one link of the chain walk concluded.
enum Link<T> {
    Ok(T),
    Insecure(String),
    Bogus(String),
    Unknown(String),
}

/// The answer of every address of a zone's servers, each named; or why not every address
/// answered for its zone.
type Answers = Result<Vec<(String, Arc<Message>)>, String>;

/// The distinct items of every list, in order of first appearance.
fn distinct<T: PartialEq>(lists: Vec<Vec<T>>) -> Vec<T> {
    let mut all: Vec<T> = Vec::new();
    for item in lists.into_iter().flatten() {
        if !all.contains(&item) {
            all.push(item);
        }
    }
    all
}

/// Combines one step as every address of a zone's servers answered it. The verdict must
/// not rest on one server (safety rule 3): a resolver may ask any of them.
/// - any bogus: bogus (the resolvers that ask that server fail);
/// - all insecure: insecure;
/// - all ok: ok, the values merged by `merge`;
/// - insecure beside ok (one server proves no DS, another serves one): the servers
///   disagree, and what a resolver concludes depends on which it asks: unknown.
fn combine<T>(zone: &str, steps: Vec<(String, Link<T>)>, merge: impl Fn(Vec<T>) -> T) -> Link<T> {
    let mut oks = Vec::new();
    let mut insecure = Vec::new();
    let mut unknown = Vec::new();
    for (server, step) in steps {
        match step {
            Link::Bogus(d) => return Link::Bogus(format!("at {server}: {d}")),
            Link::Ok(v) => oks.push(v),
            Link::Insecure(d) => insecure.push(d),
            Link::Unknown(d) => unknown.push(format!("{server}: {d}")),
        }
    }
    if !unknown.is_empty() {
        return Link::Unknown(unknown.join("; "));
    }
    match (oks.is_empty(), insecure.first()) {
        (true, Some(first)) => Link::Insecure(first.clone()),
        (false, None) => Link::Ok(merge(oks)),
        (false, Some(first)) => Link::Unknown(format!(
            "the servers of {zone} disagree: some prove the zone insecure ({first}), others serve a verified DS"
        )),
        (true, None) => Link::Unknown(format!("no server of {zone} answered")),
    }
}

pub struct Validator<'a, T = NetTransport> {
    pub querier: &'a Querier<T>,
    pub discovery: &'a Discovery<T>,
    pub anchors: &'a TrustAnchors,
    pub port: u16,
    /// Unix seconds, for signature validity windows.
    pub now: u32,
    /// What the probe may spend on signature checks (and its time).
    budget: &'a Budget,
    /// The tightest TTL and RRSIG expiration of everything verified so far.
    freshness: Mutex<Option<Verified>>,
}

/// A zone's keys as the chain from the trust anchor establishes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneKeys {
    /// The zone's DNSKEY RRset, verified from the anchor down, at every address.
    Trusted(Vec<Dnskey>),
    /// The chain proves the zone insecure (no DS for it or a cut above it); why.
    Insecure(String),
    /// Bogus or unknown: the keys cannot be established; why.
    Failed(String),
}

impl<'a, T: Transport> Validator<'a, T> {
    pub fn new(
        querier: &'a Querier<T>,
        discovery: &'a Discovery<T>,
        anchors: &'a TrustAnchors,
        port: u16,
        now: u32,
        budget: &'a Budget,
    ) -> Self {
        Self {
            querier,
            discovery,
            anchors,
            port,
            now,
            budget,
            freshness: Mutex::new(None),
        }
    }
}

/// Whether the configured trust anchors name keys the anchored zones serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorCheck {
    /// Every anchored zone serves, at every address, a key its anchor names, signing
    /// the zone's DNSKEY set.
    Served,
    /// Some anchored zone serves no key its anchor names: the anchor is stale or wrong
    /// (a configuration fault, not an outage of the zones below). Says which.
    Mismatch(String),
    /// The anchored zones could not be asked (or answered badly): nothing concluded.
    Unknown(String),
}

impl<T: Transport> Validator<'_, T> {
    /// Checks every trust anchor against the keys its zone serves now.
    pub async fn check_anchors(&self) -> AnchorCheck {
        let mut owners: Vec<&str> = self.anchors.0.iter().map(|a| a.owner()).collect();
        owners.sort_unstable();
        owners.dedup();
        for owner in owners {
            let cut = match self.discovery.locate(owner).await {
                Ok(cut) if cut.zone == owner => cut,
                Ok(cut) => {
                    return AnchorCheck::Unknown(format!(
                        "the trust anchor's zone {owner} is no zone cut (it lies in {})",
                        cut.zone
                    ));
                }
                Err(e) => return AnchorCheck::Unknown(format!("{owner}: {e}")),
            };
            let ds = self.anchors.ds_for(owner);
            let keys = self.anchors.keys_for(owner);
            let named = |k: &Dnskey| keys.contains(k) || ds.iter().any(|d| k.matches_ds(owner, d));
            match self.trusted_dnskeys(&cut, named).await {
                Link::Ok(_) => {}
                Link::Bogus(d) if d.ends_with(NO_ENTRY_KEY) => {
                    return AnchorCheck::Mismatch(format!(
                        "{TRUST_ANCHOR_MISMATCH} by {owner}: {d}; update dns.trust_anchor_file"
                    ));
                }
                Link::Bogus(d) | Link::Insecure(d) | Link::Unknown(d) => {
                    return AnchorCheck::Unknown(format!("{owner}: {d}"));
                }
            }
        }
        AnchorCheck::Served
    }

    pub async fn probe(&self, zone: &str) -> ValidationProbe {
        Self::probe_of(self.walk(zone).await)
    }

    /// The keys of `cut`'s zone, from the trust anchor down (every address of every zone
    /// on the way agreeing, as for `probe`).
    pub async fn zone_keys(&self, cut: &Arc<ZoneCut>) -> ZoneKeys {
        match self.keys_down_to(cut).await {
            Link::Ok(keys) => ZoneKeys::Trusted(keys),
            Link::Insecure(d) => ZoneKeys::Insecure(d),
            Link::Bogus(d) => ZoneKeys::Failed(format!("bogus: {d}")),
            Link::Unknown(d) => ZoneKeys::Failed(d),
        }
    }

    /// The tightest TTL and signature expiration of what the walk verified so far.
    pub fn freshness(&self) -> Option<Verified> {
        *self.freshness.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn walk(&self, zone: &str) -> Link<String> {
        let cut = match self.discovery.delegation(zone).await {
            Ok(c) => c,
            Err(e) => return Link::Unknown(e.to_string()),
        };
        let keys = match self.keys_down_to(&cut).await {
            Link::Ok(k) => k,
            Link::Insecure(d) => return Link::Insecure(d),
            Link::Bogus(d) => return Link::Bogus(d),
            Link::Unknown(d) => return Link::Unknown(d),
        };
        self.zone_data(&cut, &keys).await
    }

    /// The probe of `cut`'s zone from its parent zone's keys, established before (the
    /// observer's cache of them, which its validated parent views use too): the zone's DS
    /// at every parent address, its keys, its data. The same verdicts as `probe`, without
    /// walking the chain above the parent again for every zone. The three questions are
    /// asked at once: the DS and DNSKEY ones then share the exchanges of the parent and
    /// child views of the same look (asked alongside), and the probe takes one round trip.
    pub async fn probe_below(
        &self,
        cut: &ZoneCut,
        parent: &ZoneCut,
        parent_keys: &[Dnskey],
    ) -> ValidationProbe {
        let Some(qname) = wire::parse_name(&cut.zone) else {
            return Self::probe_of(Link::Unknown(format!("{} is not a valid name", cut.zone)));
        };
        let (ds, dnskeys, soa) = futures::join!(
            self.authoritative(parent, &qname, RecordType::DS),
            self.authoritative(cut, &qname, RecordType::DNSKEY),
            self.authoritative(cut, &qname, RecordType::SOA),
        );
        let sets = self.ds_sets(parent, &cut.zone, &qname, ds, parent_keys);
        let link = match self.keys_from_ds(parent, cut, &qname, sets, dnskeys) {
            Link::Ok(keys) => self.zone_data_in(cut, &qname, soa, &keys),
            Link::Insecure(d) => Link::Insecure(d),
            Link::Bogus(d) => Link::Bogus(d),
            Link::Unknown(d) => Link::Unknown(d),
        };
        Self::probe_of(link)
    }

    fn probe_of(link: Link<String>) -> ValidationProbe {
        let (verdict, detail) = match link {
            Link::Ok(detail) => (ValidationVerdict::Secure, detail),
            Link::Insecure(d) => (ValidationVerdict::Insecure, d),
            Link::Bogus(d) => (ValidationVerdict::Bogus, d),
            Link::Unknown(d) => (ValidationVerdict::Unknown, d),
        };
        ValidationProbe {
            source: "validator".into(),
            verdict,
            detail,
        }
    }

    /// The zone's keys are trusted; its data (the SOA) must verify with them, at every
    /// address.
    async fn zone_data(&self, cut: &ZoneCut, keys: &[Dnskey]) -> Link<String> {
        let Some(qname) = wire::parse_name(&cut.zone) else {
            return Link::Unknown(format!("{} is not a valid name", cut.zone));
        };
        let answers = self.authoritative(cut, &qname, RecordType::SOA).await;
        self.zone_data_in(cut, &qname, answers, keys)
    }

    /// `zone_data` on the SOA answers of every address.
    fn zone_data_in(
        &self,
        cut: &ZoneCut,
        qname: &Name,
        answers: Answers,
        keys: &[Dnskey],
    ) -> Link<String> {
        let zone = cut.zone.as_str();
        let answers = match answers {
            Ok(a) => a,
            Err(d) => return Link::Unknown(d),
        };
        for (server, message) in &answers {
            match self.verify_rrset(&message.answers, qname, RecordType::SOA, zone, keys) {
                Ok(()) => {}
                Err(e) => return failed(e, format!("{zone} SOA at {server}")),
            }
        }
        Link::Ok(format!(
            "chain of trust verified down to the {zone} SOA, at every server address"
        ))
    }

    /// The DNSKEY RRset of `cut`'s zone, verified from the deepest trust anchor above it.
    async fn keys_down_to(&self, cut: &Arc<ZoneCut>) -> Link<Vec<Dnskey>> {
        let zone = cut.zone.as_str();
        let chain = cut.chain();
        // The anchored zone: the deepest one on the chain with an anchor.
        let Some(start) = chain.iter().rposition(|c| self.anchors.covers(&c.zone)) else {
            return Link::Unknown(format!("no trust anchor covers {zone}"));
        };
        let anchored = &chain[start];
        let anchor_ds = self.anchors.ds_for(&anchored.zone);
        let anchor_keys = self.anchors.keys_for(&anchored.zone);
        let mut keys = match self
            .trusted_dnskeys(anchored, |k| {
                anchor_keys.contains(k) || anchor_ds.iter().any(|d| k.matches_ds(&anchored.zone, d))
            })
            .await
        {
            Link::Ok(k) => k,
            Link::Insecure(d) => return Link::Insecure(d),
            // No key the anchored zone serves is the configured anchor: the operator's
            // anchor is stale or wrong, a fault of the configuration, not of any zone
            // below it. No zone is called bogus (an outage page) on it.
            Link::Bogus(d) if d.ends_with(NO_ENTRY_KEY) => {
                return Link::Unknown(format!(
                    "{TRUST_ANCHOR_MISMATCH} for {} ({d}): check dns.trust_anchor_file",
                    anchored.zone
                ));
            }
            Link::Bogus(d) => {
                return Link::Bogus(format!("trust anchor for {}: {d}", anchored.zone));
            }
            Link::Unknown(d) => return Link::Unknown(d),
        };
        for pair in chain[start..].windows(2) {
            keys = match self.descend(&pair[0], &pair[1], &keys).await {
                Link::Ok(k) => k,
                Link::Insecure(d) => return Link::Insecure(d),
                Link::Bogus(d) => return Link::Bogus(d),
                Link::Unknown(d) => return Link::Unknown(d),
            };
        }
        Link::Ok(keys)
    }

    /// One cut down: `child`'s keys from its `parent`'s trusted `keys` (the DS set at every
    /// parent address, each leading to the child's keys on its own).
    async fn descend(
        &self,
        parent: &ZoneCut,
        child: &ZoneCut,
        keys: &[Dnskey],
    ) -> Link<Vec<Dnskey>> {
        let Some(qname) = wire::parse_name(&child.zone) else {
            return Link::Unknown(format!("{} is not a valid name", child.zone));
        };
        let ds = self.authoritative(parent, &qname, RecordType::DS).await;
        let sets = self.ds_sets(parent, &child.zone, &qname, ds, keys);
        // The child's keys are asked for only when a DS set may lead to them.
        let dnskeys = match &sets {
            Link::Ok(sets) if sets.iter().flatten().any(Ds::supported) => {
                self.authoritative(child, &qname, RecordType::DNSKEY).await
            }
            _ => Ok(Vec::new()),
        };
        self.keys_from_ds(parent, child, &qname, sets, dnskeys)
    }

    /// `child`'s keys from the distinct DS sets of its parent's addresses: each set must
    /// lead to the keys every child address serves on its own (a resolver may have any
    /// one of them).
    fn keys_from_ds(
        &self,
        parent: &ZoneCut,
        child: &ZoneCut,
        qname: &Name,
        sets: Link<Vec<Vec<Ds>>>,
        dnskeys: Answers,
    ) -> Link<Vec<Dnskey>> {
        let sets = match sets {
            Link::Ok(sets) => sets,
            Link::Insecure(d) => return Link::Insecure(d),
            Link::Bogus(d) => return Link::Bogus(d),
            Link::Unknown(d) => return Link::Unknown(d),
        };
        let mut steps = Vec::new();
        for (i, ds) in sets.iter().enumerate() {
            let usable = crate::dnssec::usable_ds(ds);
            let step = if usable.is_empty() {
                // RFC 4035 section 5.2: no DS we can use makes the zone insecure.
                Link::Insecure(format!(
                    "the DS set of {} uses no algorithm or digest we support",
                    child.zone
                ))
            } else {
                match self.dnskeys_from(child, qname, dnskeys.clone(), |k| {
                    usable.iter().any(|d| k.matches_ds(&child.zone, d))
                }) {
                    Link::Bogus(d) => Link::Bogus(format!("{}: {d}", child.zone)),
                    other => other,
                }
            };
            steps.push((format!("DS set {} of {}", i + 1, parent.zone), step));
        }
        combine(&parent.zone, steps, distinct)
    }

    /// The answer of every address of `cut`'s servers, each authoritative; unknown (the
    /// reasons) if any address could not be asked or did not speak for its zone.
    async fn authoritative(&self, cut: &ZoneCut, qname: &Name, qtype: RecordType) -> Answers {
        let addresses = cut.addresses();
        let unaddressed: Vec<String> = cut
            .servers
            .iter()
            .filter(|s| s.addrs.is_empty())
            .map(|s| {
                format!(
                    "{}: no address ({})",
                    s.host,
                    s.problem.as_deref().unwrap_or("none learnt")
                )
            })
            .collect();
        if addresses.is_empty() || !unaddressed.is_empty() {
            return Err(format!(
                "not every server of {} can be asked about {} {qtype}: {}",
                cut.zone,
                wire::name_text(qname),
                if unaddressed.is_empty() {
                    "the zone has no name server".to_string()
                } else {
                    unaddressed.join("; ")
                }
            ));
        }
        let asks = addresses.iter().map(|(host, addr)| async move {
            let outcome = self
                .querier
                .ask(SocketAddr::new(*addr, self.port), qname, qtype)
                .await;
            let server = format!("{host} ({addr})");
            match query::authoritative(&outcome, host, *addr) {
                // Every answer the walk asks for must carry DNSSEC records; one from a
                // server asked without EDNS cannot, so it proves nothing either way.
                Ok(m) if wire::unsigned_without_edns(m) => {
                    Err(format!("{server}: {}", wire::WITHOUT_EDNS))
                }
                Ok(m) => Ok((server, m.clone())),
                Err(problem) => Err(problem),
            }
        });
        let mut answers = Vec::new();
        let mut problems = Vec::new();
        for result in join_all(asks).await {
            match result {
                Ok(a) => answers.push(a),
                Err(problem) => problems.push(problem),
            }
        }
        if problems.is_empty() {
            Ok(answers)
        } else {
            Err(format!(
                "not every server of {} answered {} {qtype}: {}",
                cut.zone,
                wire::name_text(qname),
                problems.join("; ")
            ))
        }
    }

    /// The DNSKEY RRset of `cut` at every address, each signed by a key `trusted` accepts;
    /// the keys of every address together.
    async fn trusted_dnskeys(
        &self,
        cut: &ZoneCut,
        trusted: impl Fn(&Dnskey) -> bool,
    ) -> Link<Vec<Dnskey>> {
        let Some(qname) = wire::parse_name(&cut.zone) else {
            return Link::Unknown(format!("{} is not a valid name", cut.zone));
        };
        let answers = self.authoritative(cut, &qname, RecordType::DNSKEY).await;
        self.dnskeys_from(cut, &qname, answers, trusted)
    }

    /// `trusted_dnskeys` on the DNSKEY answers of every address.
    fn dnskeys_from(
        &self,
        cut: &ZoneCut,
        qname: &Name,
        answers: Answers,
        trusted: impl Fn(&Dnskey) -> bool,
    ) -> Link<Vec<Dnskey>> {
        let answers = match answers {
            Ok(a) => a,
            Err(d) => return Link::Unknown(d),
        };
        let steps = answers
            .into_iter()
            .map(|(server, message)| {
                let step = self.dnskeys_in(&message, qname, &cut.zone, &trusted);
                (server, step)
            })
            .collect();
        combine(&cut.zone, steps, distinct)
    }

    /// The DNSKEY RRset in one server's answer, signed by a key `trusted` accepts.
    fn dnskeys_in(
        &self,
        message: &Message,
        qname: &Name,
        zone: &str,
        trusted: &impl Fn(&Dnskey) -> bool,
    ) -> Link<Vec<Dnskey>> {
        let keys: Vec<Dnskey> = wire::rrset(&message.answers, qname, RecordType::DNSKEY)
            .filter_map(wire::as_dnskey)
            .map(wire::dnskey_from)
            .collect();
        if keys.is_empty() {
            return Link::Bogus("a DS points at the zone but it serves no DNSKEY".into());
        }
        let entry: Vec<Dnskey> = keys
            .iter()
            .filter(|k| k.is_zone_key() && trusted(k))
            .cloned()
            .collect();
        if entry.is_empty() {
            return Link::Bogus(NO_ENTRY_KEY.into());
        }
        match self.verify_rrset(&message.answers, qname, RecordType::DNSKEY, zone, &entry) {
            Ok(()) => Link::Ok(keys),
            Err(e) => failed(e, "DNSKEY RRset".to_string()),
        }
    }

    /// The DS RRset of `child` in the answers of every address of `parent`, each verified
    /// (the distinct sets), or a verified proof at every address that there is none.
    fn ds_sets(
        &self,
        parent: &ZoneCut,
        child: &str,
        qname: &Name,
        answers: Answers,
        keys: &[Dnskey],
    ) -> Link<Vec<Vec<Ds>>> {
        let answers = match answers {
            Ok(a) => a,
            Err(d) => return Link::Unknown(d),
        };
        let steps = answers
            .into_iter()
            .map(|(server, message)| {
                let step = match self.ds_in(&message, qname, &parent.zone, child, keys) {
                    Link::Ok(ds) => Link::Ok(vec![ds]),
                    Link::Insecure(d) => Link::Insecure(d),
                    Link::Bogus(d) => Link::Bogus(d),
                    Link::Unknown(d) => Link::Unknown(d),
                };
                (server, step)
            })
            .collect();
        combine(&parent.zone, steps, distinct)
    }

    /// The DS RRset in one parent server's answer, verified, or its verified denial.
    fn ds_in(
        &self,
        message: &Message,
        qname: &Name,
        parent: &str,
        child: &str,
        keys: &[Dnskey],
    ) -> Link<Vec<Ds>> {
        let ds: Vec<Ds> = wire::rrset(&message.answers, qname, RecordType::DS)
            .filter_map(wire::as_ds)
            .map(wire::ds_from)
            .collect();
        if !ds.is_empty() {
            return match self.verify_rrset(&message.answers, qname, RecordType::DS, parent, keys) {
                Ok(()) => Link::Ok(ds),
                Err(e) => failed(e, format!("DS of {child} at {parent}")),
            };
        }
        // The same proof rules as the observer's validated DS answers (`proof`).
        match super::proof::prove_ds(message, qname, parent, keys, self.now, self.budget) {
            Ok(how) => Link::Insecure(format!(
                "{parent} proves there is no DS for {child} ({how}): the zone is unsigned in the chain"
            )),
            Err(
                e
                @ (super::proof::ProofError::Exhausted(_) | super::proof::ProofError::WithoutEdns),
            ) => Link::Unknown(format!("no DS for {child} at {parent}: {e}")),
            // Only NSEC3 records validators must ignore (an unknown hash algorithm): the
            // denial is unprovable, and resolvers differ on what follows (RFC 5155 section
            // 8.1 "generally bogus", Unbound SERVFAIL; BIND insecure), so no verdict is
            // ours to page on.
            Err(e @ super::proof::ProofError::Nsec3Ignored(_)) => Link::Unknown(format!(
                "no DS for {child} at {parent}, unprovable: {e} (Unbound answers SERVFAIL, BIND insecure)"
            )),
            // RFC 9276 section 3.2: validators may treat a denial with more iterations
            // as insecure (Unbound answers without AD): what resolvers conclude, though
            // it proves nothing for a decision (the observer keeps it unknown).
            Err(e @ super::proof::ProofError::Nsec3Iterations(_)) => Link::Insecure(format!(
                "{parent} denies a DS for {child} with NSEC3 that validators treat as insecure (RFC 9276 section 3.2): {e}"
            )),
            Err(d) => Link::Bogus(format!(
                "no DS for {child} at {parent}, and no valid proof: {d}"
            )),
        }
    }

    /// Some RRSIG over (`owner`, `rtype`) in `records`, by `signer` with one of `keys`, is
    /// valid now; what it verified bounds how long the walk's result may be kept.
    fn verify_rrset(
        &self,
        records: &[Record],
        owner: &Name,
        rtype: RecordType,
        signer: &str,
        keys: &[Dnskey],
    ) -> Result<(), VerifyError> {
        let verified = verify_rrset(records, owner, rtype, signer, keys, self.now, self.budget)?;
        let mut freshness = self.freshness.lock().unwrap_or_else(|p| p.into_inner());
        *freshness = Some(match *freshness {
            None => verified,
            Some(f) => f.min(verified, self.now),
        });
        Ok(())
    }
}

/// What a verified signature allows a cache: the RRset's TTL (the smaller of the record
/// TTL and the RRSIG's original TTL) and the signature's expiration (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub ttl: u32,
    pub expiration: u32,
}

impl Verified {
    /// The tighter of both bounds.
    fn min(self, other: Self, now: u32) -> Self {
        let left = |v: &Self| v.expiration.wrapping_sub(now);
        Self {
            ttl: self.ttl.min(other.ttl),
            expiration: if left(&self) <= left(&other) {
                self.expiration
            } else {
                other.expiration
            },
        }
    }

    /// Seconds a result resting on this may be kept, from `now`.
    pub fn keep_for(&self, now: u32) -> u32 {
        let until_expiry = if window_holds(now, self.expiration, now) {
            self.expiration.wrapping_sub(now)
        } else {
            0
        };
        self.ttl.min(until_expiry)
    }
}

/// Signature verifications made by this process (the cryptography, not a remembered
/// result): what the validator-budget bench reports.
static CHECKS_MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Signature verifications made by this process so far.
pub fn signature_checks_made() -> u64 {
    CHECKS_MADE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Why no signature over an RRset could be verified.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// Every signature tried failed, or none could be tried: bogus.
    #[error("{0}")]
    Failed(String),
    /// The work allowed ran out before a signature verified (KeyTrap-shaped answers):
    /// nothing is concluded, never `secure`.
    #[error("{0}")]
    Exhausted(String),
}

/// At most this many RRSIGs over one RRset are verified (or found remembered) before the
/// RRset is given up as unknown: a well-formed RRset needs one or two (a key roll);
/// Unbound and BIND after KeyTrap (CVE-2023-50387) cap it alike.
pub const MAX_SIGNATURES_PER_RRSET: usize = 8;

/// At most this many keys with one key tag are tried for one RRSIG (key tags collide
/// rarely by chance, and by design in a KeyTrap answer).
pub const MAX_KEYS_PER_TAG: usize = 4;

/// The records of (`owner`, `rtype`) in `records`, duplicates removed: an RRset is a set
/// (RFC 2181 section 5), and its canonical form for signing has no duplicates (RFC 4034
/// section 6.3), so a server repeating a record neither breaks the signature nor makes
/// more work.
fn distinct_rrset<'a>(
    records: &'a [Record],
    owner: &'a Name,
    rtype: RecordType,
) -> Vec<&'a Record> {
    let mut set: Vec<&Record> = Vec::new();
    for r in wire::rrset(records, owner, rtype) {
        if !set.iter().any(|seen| seen.data == r.data) {
            set.push(r);
        }
    }
    set
}

/// Some RRSIG over (`owner`, `rtype`) in `records` is valid at `now`: by `signer`, with
/// one of `keys` (zone keys, matched by tag and algorithm), the owner's label count (no
/// wildcard expansion on these paths), inception <= now <= expiration. Every
/// cryptographic check is charged to `budget`; at most [`MAX_SIGNATURES_PER_RRSET`]
/// signatures and [`MAX_KEYS_PER_TAG`] keys a signature are tried.
pub fn verify_rrset(
    records: &[Record],
    owner: &Name,
    rtype: RecordType,
    signer: &str,
    keys: &[Dnskey],
    now: u32,
    budget: &Budget,
) -> Result<Verified, VerifyError> {
    let sigs: Vec<&RRSIG> = wire::rrsigs(records, owner, rtype).collect();
    if sigs.is_empty() {
        return Err(VerifyError::Failed(format!("{rtype} is not signed")));
    }
    let covered = distinct_rrset(records, owner, rtype);
    if covered.is_empty() {
        return Err(VerifyError::Failed(format!("no {rtype} records")));
    }
    let record_ttl = covered.iter().map(|r| r.ttl).min().unwrap_or(0);
    let mut problems = Vec::new();
    let mut tried = 0;
    for sig in sigs {
        let input = sig.input();
        if wire::name_text(&input.signer_name) != signer {
            problems.push(format!("signed by {}, not {signer}", input.signer_name));
            continue;
        }
        if input.num_labels != owner.num_labels() {
            problems.push(format!(
                "signature by key {} has {} labels, the owner {}",
                input.key_tag,
                input.num_labels,
                owner.num_labels()
            ));
            continue;
        }
        if !window_holds(input.sig_inception.get(), input.sig_expiration.get(), now) {
            problems.push(format!(
                "signature by key {} outside its validity window ({} to {}, now {now})",
                input.key_tag,
                input.sig_inception.get(),
                input.sig_expiration.get()
            ));
            continue;
        }
        let mut candidates: Vec<&Dnskey> = Vec::new();
        for k in keys.iter().filter(|k| {
            k.key_tag() == input.key_tag
                && k.algorithm == u8::from(input.algorithm)
                && k.is_zone_key()
        }) {
            if !candidates.contains(&k) && candidates.len() < MAX_KEYS_PER_TAG {
                candidates.push(k);
            }
        }
        if candidates.is_empty() {
            problems.push(format!(
                "signature by key {}, which is no trusted key of {signer}",
                input.key_tag
            ));
            continue;
        }
        if tried == MAX_SIGNATURES_PER_RRSET {
            return Err(VerifyError::Exhausted(format!(
                "validation budget exhausted: more than {MAX_SIGNATURES_PER_RRSET} signatures over {rtype} to try, none of those tried valid (the first: {})",
                problems.first().map_or("none", String::as_str)
            )));
        }
        tried += 1;
        let signed = match TBS::from_input(owner, DNSClass::IN, input, covered.iter().copied()) {
            Ok(tbs) => tbs,
            Err(e) => {
                problems.push(format!("key {}: {e}", input.key_tag));
                continue;
            }
        };
        let verified = Verified {
            ttl: record_ttl.min(input.original_ttl),
            expiration: input.sig_expiration.get(),
        };
        for key in candidates {
            let seal = sigcache::seal(key, signed.as_ref(), sig.sig());
            if sigcache::verified_before(&seal) {
                return Ok(verified);
            }
            budget
                .signature_check()
                .map_err(|e| VerifyError::Exhausted(e.to_string()))?;
            CHECKS_MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let verifier = wire::to_hickory_dnskey(key);
            match verifier.verify(signed.as_ref(), sig.sig()) {
                Ok(()) => {
                    sigcache::remember(seal);
                    return Ok(verified);
                }
                Err(e) => problems.push(format!("key {}: {e}", input.key_tag)),
            }
        }
    }
    Err(VerifyError::Failed(if problems.is_empty() {
        "no signature by a trusted key".into()
    } else {
        problems.join("; ")
    }))
}

/// At most this many distinct keys of one DNSKEY answer are checked for a signature over
/// their own set (a zone has one to three; more is a key roll in progress or an attack).
pub const SELF_SIGNED_KEYS_CHECKED: usize = 4;

/// The keys of the DNSKEY RRset of `zone` in `records` (indices into `keys`) that sign
/// that RRset with an RRSIG valid at `now`: signer the zone itself, the apex's label
/// count, within its validity window, verified against the key (safety rule 4: a key is
/// served only where it signs the set). Only keys some RRSIG names by tag are checked,
/// at most [`SELF_SIGNED_KEYS_CHECKED`] of them, each as [`verify_rrset`] bounds it;
/// work cut short is `Err`, never "not signed".
pub fn self_signers(
    records: &[Record],
    zone: &Name,
    keys: &[Dnskey],
    now: u32,
    budget: &Budget,
) -> Result<Vec<usize>, VerifyError> {
    let tags: Vec<u16> = wire::rrsigs(records, zone, RecordType::DNSKEY)
        .map(|s| s.input().key_tag)
        .collect();
    let signer = wire::name_text(zone);
    let mut signers = Vec::new();
    let mut checked = 0;
    for (i, key) in keys.iter().enumerate() {
        if !key.is_zone_key() || !tags.contains(&key.key_tag()) {
            continue;
        }
        if checked == SELF_SIGNED_KEYS_CHECKED {
            return Err(VerifyError::Exhausted(format!(
                "validation budget exhausted: more than {SELF_SIGNED_KEYS_CHECKED} keys with signatures over the DNSKEY set"
            )));
        }
        checked += 1;
        match verify_rrset(
            records,
            zone,
            RecordType::DNSKEY,
            &signer,
            std::slice::from_ref(key),
            now,
            budget,
        ) {
            Ok(_) => signers.push(i),
            Err(VerifyError::Failed(_)) => {}
            Err(e @ VerifyError::Exhausted(_)) => return Err(e),
        }
    }
    Ok(signers)
}

/// RFC 4034 section 3.1.5: serial number arithmetic on 32-bit times.
pub fn window_holds(inception: u32, expiration: u32, now: u32) -> bool {
    let after = |a: u32, b: u32| (a.wrapping_sub(b) as i32) >= 0;
    after(now, inception) && after(expiration, now)
}

/// Base32 with the extended hex alphabet, lower case, no padding (RFC 4648 section 7), as
/// NSEC3 owner names are written.
pub fn base32hex(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let mut buffer: u64 = 0;
    let mut bits = 0u32;
    for b in bytes {
        buffer = (buffer << 8) | u64::from(*b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32hex_matches_rfc4648_vectors() {
        assert_eq!(base32hex(b"f"), "co");
        assert_eq!(base32hex(b"foobar"), "cpnmuoj1e8");
    }

    #[test]
    fn windows_use_serial_arithmetic() {
        assert!(window_holds(10, 20, 15));
        assert!(!window_holds(10, 20, 21));
        assert!(!window_holds(10, 20, 9));
        assert!(window_holds(u32::MAX - 5, 5, 2));
    }
}
