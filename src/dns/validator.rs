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
use crate::dnssec::{DigestType, Dnskey, Ds};

/// The algorithms we can verify (hickory-proto with ring).
fn algorithm_supported(alg: u8) -> bool {
    matches!(alg, 5 | 7 | 8 | 10 | 13 | 14 | 15)
}

fn digest_supported(kind: u8) -> bool {
    DigestType::from_code(kind).is_ok()
}

/// What one step of the walk concluded.
enum Step<T> {
    Ok(T),
    Insecure(String),
    Bogus(String),
    Unknown(String),
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
            Step::Ok(detail) => (ValidationVerdict::Secure, detail),
            Step::Insecure(d) => (ValidationVerdict::Insecure, d),
            Step::Bogus(d) => (ValidationVerdict::Bogus, d),
            Step::Unknown(d) => (ValidationVerdict::Unknown, d),
        };
        ValidationProbe {
            source: "validator".into(),
            verdict,
            detail,
        }
    }

    async fn walk(&self, zone: &str) -> Step<String> {
        let cut = match self.discovery.delegation(zone).await {
            Ok(c) => c,
            Err(e) => return Step::Unknown(e.to_string()),
        };
        let chain = cut.chain();
        // The anchored zone: the deepest one on the chain with an anchor.
        let Some(start) = chain.iter().rposition(|c| self.anchors.covers(&c.zone)) else {
            return Step::Unknown(format!("no trust anchor covers {zone}"));
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
            Step::Ok(k) => k,
            Step::Insecure(d) => return Step::Insecure(d),
            Step::Bogus(d) => {
                return Step::Bogus(format!("trust anchor for {}: {d}", anchored.zone));
            }
            Step::Unknown(d) => return Step::Unknown(d),
        };
        for pair in chain[start..].windows(2) {
            let (parent, child) = (&pair[0], &pair[1]);
            let ds = match self.child_ds(parent, &child.zone, &keys).await {
                Step::Ok(ds) => ds,
                Step::Insecure(d) => return Step::Insecure(d),
                Step::Bogus(d) => return Step::Bogus(d),
                Step::Unknown(d) => return Step::Unknown(d),
            };
            let usable: Vec<Ds> = ds
                .into_iter()
                .filter(|d| algorithm_supported(d.algorithm) && digest_supported(d.digest_type))
                .collect();
            if usable.is_empty() {
                // RFC 4035 section 5.2: no DS we can use makes the zone insecure.
                return Step::Insecure(format!(
                    "the DS set of {} uses no algorithm or digest we support",
                    child.zone
                ));
            }
            keys = match self
                .trusted_dnskeys(child, |k| {
                    usable.iter().any(|d| k.matches_ds(&child.zone, d))
                })
                .await
            {
                Step::Ok(k) => k,
                Step::Insecure(d) => return Step::Insecure(d),
                Step::Bogus(d) => return Step::Bogus(format!("{}: {d}", child.zone)),
                Step::Unknown(d) => return Step::Unknown(d),
            };
        }
        // The zone's keys are trusted; its data must verify with them.
        let Some(qname) = wire::parse_name(zone) else {
            return Step::Unknown(format!("{zone} is not a valid name"));
        };
        let message = match self.authoritative(&cut, &qname, RecordType::SOA).await {
            Ok(m) => m,
            Err(d) => return Step::Unknown(d),
        };
        match self.verify_rrset(&message.answers, &qname, RecordType::SOA, zone, &keys) {
            Ok(()) => Step::Ok(format!("chain of trust verified down to the {zone} SOA")),
            Err(d) => Step::Bogus(format!("{zone} SOA: {d}")),
        }
    }

    /// The first authoritative answer any server of `cut` gives.
    async fn authoritative(
        &self,
        cut: &ZoneCut,
        qname: &Name,
        qtype: RecordType,
    ) -> Result<std::sync::Arc<Message>, String> {
        let mut problems = Vec::new();
        for (host, addr) in cut.addresses() {
            let outcome = self
                .querier
                .ask(SocketAddr::new(addr, self.port), qname, qtype)
                .await;
            match query::authoritative(&outcome, &host, addr) {
                Ok(m) => return Ok(m.clone()),
                Err(problem) => problems.push(problem),
            }
        }
        Err(format!(
            "no server of {} answered {} {qtype}: {}",
            cut.zone,
            wire::name_text(qname),
            problems.join("; ")
        ))
    }

    /// The DNSKEY RRset of `cut`, signed by a key `trusted` accepts.
    async fn trusted_dnskeys(
        &self,
        cut: &ZoneCut,
        trusted: impl Fn(&Dnskey) -> bool,
    ) -> Step<Vec<Dnskey>> {
        let Some(qname) = wire::parse_name(&cut.zone) else {
            return Step::Unknown(format!("{} is not a valid name", cut.zone));
        };
        let message = match self.authoritative(cut, &qname, RecordType::DNSKEY).await {
            Ok(m) => m,
            Err(d) => return Step::Unknown(d),
        };
        let keys: Vec<Dnskey> = wire::rrset(&message.answers, &qname, RecordType::DNSKEY)
            .filter_map(wire::as_dnskey)
            .map(wire::dnskey_from)
            .collect();
        if keys.is_empty() {
            return Step::Bogus("a DS points at the zone but it serves no DNSKEY".into());
        }
        let entry: Vec<Dnskey> = keys
            .iter()
            .filter(|k| k.is_zone_key() && trusted(k))
            .cloned()
            .collect();
        if entry.is_empty() {
            return Step::Bogus("no served DNSKEY matches the DS (or trust anchor)".into());
        }
        match self.verify_rrset(
            &message.answers,
            &qname,
            RecordType::DNSKEY,
            &cut.zone,
            &entry,
        ) {
            Ok(()) => Step::Ok(keys),
            Err(d) => Step::Bogus(format!("DNSKEY RRset: {d}")),
        }
    }

    /// The DS RRset of `child` at `parent`, verified, or a verified proof that there is none.
    async fn child_ds(&self, parent: &ZoneCut, child: &str, keys: &[Dnskey]) -> Step<Vec<Ds>> {
        let Some(qname) = wire::parse_name(child) else {
            return Step::Unknown(format!("{child} is not a valid name"));
        };
        let message = match self.authoritative(parent, &qname, RecordType::DS).await {
            Ok(m) => m,
            Err(d) => return Step::Unknown(d),
        };
        let ds: Vec<Ds> = wire::rrset(&message.answers, &qname, RecordType::DS)
            .filter_map(wire::as_ds)
            .map(wire::ds_from)
            .collect();
        if !ds.is_empty() {
            return match self.verify_rrset(
                &message.answers,
                &qname,
                RecordType::DS,
                &parent.zone,
                keys,
            ) {
                Ok(()) => Step::Ok(ds),
                Err(d) => Step::Bogus(format!("DS of {child} at {}: {d}", parent.zone)),
            };
        }
        match self.denial_of_ds(&message, &qname, &parent.zone, keys) {
            Ok(how) => Step::Insecure(format!(
                "{} proves there is no DS for {child} ({how}): the zone is unsigned in the chain",
                parent.zone
            )),
            Err(d) => Step::Bogus(format!(
                "no DS for {child} at {}, and no valid proof: {d}",
                parent.zone
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
