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

use hickory_proto::dnssec::Verifier;
use hickory_proto::dnssec::rdata::{DNSSECRData, RRSIG};
use hickory_proto::op::Message;
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use super::anchor::TrustAnchors;
use super::discovery::{Discovery, ZoneCut};
use super::model::{ValidationProbe, ValidationVerdict};
use super::query::{self, Querier};
use super::wire;
use crate::dnssec::{Dnskey, Ds};
use futures::future::join_all;

/// What one link of the chain walk concluded.
enum Link<T> {
    Ok(T),
    Insecure(String),
    Bogus(String),
    Unknown(String),
}

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

pub struct Validator<'a> {
    pub querier: &'a Querier,
    pub discovery: &'a Discovery,
    pub anchors: &'a TrustAnchors,
    pub port: u16,
    /// Unix seconds, for signature validity windows.
    pub now: u32,
}

impl Validator<'_> {
    pub async fn probe(&self, zone: &str) -> ValidationProbe {
        let (verdict, detail) = match self.walk(zone).await {
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

    async fn walk(&self, zone: &str) -> Link<String> {
        let cut = match self.discovery.delegation(zone).await {
            Ok(c) => c,
            Err(e) => return Link::Unknown(e.to_string()),
        };
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
            Link::Bogus(d) => {
                return Link::Bogus(format!("trust anchor for {}: {d}", anchored.zone));
            }
            Link::Unknown(d) => return Link::Unknown(d),
        };
        for pair in chain[start..].windows(2) {
            let (parent, child) = (&pair[0], &pair[1]);
            let sets = match self.child_ds(parent, &child.zone, &keys).await {
                Link::Ok(sets) => sets,
                Link::Insecure(d) => return Link::Insecure(d),
                Link::Bogus(d) => return Link::Bogus(d),
                Link::Unknown(d) => return Link::Unknown(d),
            };
            // Each parent address's DS set must lead to the child's keys on its own: a
            // resolver may have any one of them.
            let mut steps = Vec::new();
            for (i, ds) in sets.iter().enumerate() {
                let usable: Vec<&Ds> = ds.iter().filter(|d| d.supported()).collect();
                let step = if usable.is_empty() {
                    // RFC 4035 section 5.2: no DS we can use makes the zone insecure.
                    Link::Insecure(format!(
                        "the DS set of {} uses no algorithm or digest we support",
                        child.zone
                    ))
                } else {
                    match self
                        .trusted_dnskeys(child, |k| {
                            usable.iter().any(|d| k.matches_ds(&child.zone, d))
                        })
                        .await
                    {
                        Link::Bogus(d) => Link::Bogus(format!("{}: {d}", child.zone)),
                        other => other,
                    }
                };
                steps.push((format!("DS set {} of {}", i + 1, parent.zone), step));
            }
            keys = match combine(&parent.zone, steps, distinct) {
                Link::Ok(k) => k,
                Link::Insecure(d) => return Link::Insecure(d),
                Link::Bogus(d) => return Link::Bogus(d),
                Link::Unknown(d) => return Link::Unknown(d),
            };
        }
        // The zone's keys are trusted; its data must verify with them, at every address.
        let Some(qname) = wire::parse_name(zone) else {
            return Link::Unknown(format!("{zone} is not a valid name"));
        };
        let answers = match self.authoritative(&cut, &qname, RecordType::SOA).await {
            Ok(a) => a,
            Err(d) => return Link::Unknown(d),
        };
        for (server, message) in &answers {
            if let Err(d) =
                self.verify_rrset(&message.answers, &qname, RecordType::SOA, zone, &keys)
            {
                return Link::Bogus(format!("{zone} SOA at {server}: {d}"));
            }
        }
        Link::Ok(format!(
            "chain of trust verified down to the {zone} SOA, at every server address"
        ))
    }

    /// The answer of every address of `cut`'s servers, each authoritative; unknown (the
    /// reasons) if any address could not be asked or did not speak for its zone.
    async fn authoritative(
        &self,
        cut: &ZoneCut,
        qname: &Name,
        qtype: RecordType,
    ) -> Result<Vec<(String, std::sync::Arc<Message>)>, String> {
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
            query::authoritative(&outcome, host, *addr)
                .map(|m| (format!("{host} ({addr})"), m.clone()))
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
        let answers = match self.authoritative(cut, &qname, RecordType::DNSKEY).await {
            Ok(a) => a,
            Err(d) => return Link::Unknown(d),
        };
        let steps = answers
            .into_iter()
            .map(|(server, message)| {
                let step = self.dnskeys_in(&message, &qname, &cut.zone, &trusted);
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
            return Link::Bogus("no served DNSKEY matches the DS (or trust anchor)".into());
        }
        match self.verify_rrset(&message.answers, qname, RecordType::DNSKEY, zone, &entry) {
            Ok(()) => Link::Ok(keys),
            Err(d) => Link::Bogus(format!("DNSKEY RRset: {d}")),
        }
    }

    /// The DS RRset of `child` at every address of `parent`, each verified (the distinct
    /// sets), or a verified proof at every address that there is none.
    async fn child_ds(&self, parent: &ZoneCut, child: &str, keys: &[Dnskey]) -> Link<Vec<Vec<Ds>>> {
        let Some(qname) = wire::parse_name(child) else {
            return Link::Unknown(format!("{child} is not a valid name"));
        };
        let answers = match self.authoritative(parent, &qname, RecordType::DS).await {
            Ok(a) => a,
            Err(d) => return Link::Unknown(d),
        };
        let steps = answers
            .into_iter()
            .map(|(server, message)| {
                let step = match self.ds_in(&message, &qname, &parent.zone, child, keys) {
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
                Err(d) => Link::Bogus(format!("DS of {child} at {parent}: {d}")),
            };
        }
        match self.denial_of_ds(message, qname, parent, keys) {
            Ok(how) => Link::Insecure(format!(
                "{parent} proves there is no DS for {child} ({how}): the zone is unsigned in the chain"
            )),
            Err(d) => Link::Bogus(format!(
                "no DS for {child} at {parent}, and no valid proof: {d}"
            )),
        }
    }

    /// NSEC or NSEC3 records, signed by `keys`, proving `qname` has no DS.
    fn denial_of_ds(
        &self,
        message: &Message,
        qname: &Name,
        zone: &str,
        keys: &[Dnskey],
    ) -> Result<&'static str, String> {
        let auth = &message.authorities;
        // NSEC at the name itself: NS without DS (and without SOA: not the child's apex).
        for r in auth {
            if let RData::DNSSEC(DNSSECRData::NSEC(nsec)) = &r.data
                && wire::same_name(&r.name, qname)
            {
                let types = nsec.type_set();
                if types.contains(RecordType::DS) || types.contains(RecordType::SOA) {
                    return Err("the NSEC at the name lists DS or SOA".into());
                }
                self.verify_rrset(auth, &r.name, RecordType::NSEC, zone, keys)?;
                return Ok("NSEC");
            }
        }
        // NSEC3: a record matching the name's hash without DS, or an opt-out span over it.
        let target = qname.to_lowercase();
        for r in auth {
            let RData::DNSSEC(DNSSECRData::NSEC3(nsec3)) = &r.data else {
                continue;
            };
            let Ok(digest) = nsec3
                .hash_algorithm()
                .hash(nsec3.salt(), &target, nsec3.iterations())
            else {
                continue;
            };
            let hashed = base32hex(digest.as_ref());
            let owner = r
                .name
                .iter()
                .next()
                .map(|l| String::from_utf8_lossy(l).to_ascii_lowercase())
                .unwrap_or_default();
            let next = base32hex(nsec3.next_hashed_owner_name());
            if owner == hashed {
                if nsec3.type_set().contains(RecordType::DS) {
                    return Err("the matching NSEC3 lists DS".into());
                }
                self.verify_rrset(auth, &r.name, RecordType::NSEC3, zone, keys)?;
                return Ok("NSEC3");
            }
            let covers = if owner < next {
                owner < hashed && hashed < next
            } else {
                owner < hashed || hashed < next
            };
            if covers && nsec3.opt_out() {
                self.verify_rrset(auth, &r.name, RecordType::NSEC3, zone, keys)?;
                return Ok("NSEC3 opt-out");
            }
        }
        Err("no NSEC or NSEC3 record denies the DS".into())
    }

    /// Some RRSIG over (`owner`, `rtype`) in `records`, by `signer` with one of `keys`, is
    /// valid now.
    fn verify_rrset(
        &self,
        records: &[Record],
        owner: &Name,
        rtype: RecordType,
        signer: &str,
        keys: &[Dnskey],
    ) -> Result<(), String> {
        let sigs: Vec<&RRSIG> = wire::rrsigs(records, owner, rtype).collect();
        if sigs.is_empty() {
            return Err(format!("{rtype} is not signed"));
        }
        let covered: Vec<Record> = wire::rrset(records, owner, rtype).cloned().collect();
        if covered.is_empty() {
            return Err(format!("no {rtype} records"));
        }
        let mut problems = Vec::new();
        for sig in sigs {
            let input = sig.input();
            if wire::name_text(&input.signer_name) != signer {
                problems.push(format!("signed by {}, not {signer}", input.signer_name));
                continue;
            }
            if !window_holds(
                input.sig_inception.get(),
                input.sig_expiration.get(),
                self.now,
            ) {
                problems.push(format!(
                    "signature by key {} outside its validity window",
                    input.key_tag
                ));
                continue;
            }
            let candidates = keys.iter().filter(|k| {
                k.key_tag() == input.key_tag
                    && k.algorithm == u8::from(input.algorithm)
                    && k.is_zone_key()
            });
            for key in candidates {
                let verifier = wire::to_hickory_dnskey(key);
                match verifier.verify_rrsig(owner, DNSClass::IN, sig, covered.iter()) {
                    Ok(()) => return Ok(()),
                    Err(e) => problems.push(format!("key {}: {e}", input.key_tag)),
                }
            }
        }
        Err(if problems.is_empty() {
            "no signature by a trusted key".into()
        } else {
            problems.join("; ")
        })
    }
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
