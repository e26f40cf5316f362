//! What one server's answer means, as safety rule 3 needs it: an authoritative yes, an
//! authoritative no, or unknown with the reason. Nothing else is ever read as "absent".

use std::sync::Arc;

use hickory_proto::dnssec::rdata::DNSSECRData;
use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};

use super::delegation::{NsAnswer, ns_set_of};
use super::dsync::DsyncAnswer;
use super::model::{ChildKeys, DnskeyAnswer, DsAnswer, SignatureWindow, UnknownReason};
use super::signals::{Published, Signals};
use crate::dns::net::query::Outcome;
use crate::dns::net::transport::ExchangeError;
use crate::dns::net::wire;

/// The reason an exchange failed.
pub fn failure_reason(err: &ExchangeError) -> UnknownReason {
    match err {
        ExchangeError::Timeout => UnknownReason::Timeout,
        ExchangeError::Network(d) => UnknownReason::Network(d.clone()),
        ExchangeError::Unreachable(d) => UnknownReason::Network(format!("unreachable: {d}")),
        ExchangeError::Malformed(d) => UnknownReason::Malformed(d.clone()),
    }
}

/// The RCODEs that never carry an answer.
fn rcode_reason(code: ResponseCode) -> Option<UnknownReason> {
    match code {
        ResponseCode::NoError | ResponseCode::NXDomain => None,
        ResponseCode::Refused => Some(UnknownReason::Refused),
        ResponseCode::ServFail => Some(UnknownReason::Servfail),
        other => Some(UnknownReason::Rcode(u16::from(other))),
    }
}

/// An authoritative negative answer must come from `zone` (its SOA in the authority
/// section, one zone speaking); a negative answer from any other zone is a lame answer,
/// not a "no".
fn negative_from(message: &Message, zone: &str) -> Result<(), UnknownReason> {
    let mut soas = message
        .authorities
        .iter()
        .filter(|r| r.record_type() == RecordType::SOA);
    let owner = soas
        .next()
        .map(|first| &first.name)
        .filter(|first| soas.all(|r| wire::same_name(&r.name, first)));
    match owner {
        Some(owner) if wire::name_is(owner, zone) => Ok(()),
        Some(_) => Err(UnknownReason::Lame),
        None => Err(UnknownReason::Malformed(
            "negative answer without the zone's SOA".into(),
        )),
    }
}

/// `zone DS` asked at a server of `parent`.
pub fn classify_ds(zone: &Name, parent: &str, outcome: &Outcome) -> DsAnswer {
    let message = match outcome {
        Ok(m) => m,
        Err(e) => return DsAnswer::Unknown(failure_reason(e)),
    };
    if let Some(reason) = rcode_reason(message.metadata.response_code) {
        return DsAnswer::Unknown(reason);
    }
    // A referral to the child, an answer from a cache: either way not the parent speaking.
    if !message.metadata.authoritative {
        return DsAnswer::Unknown(UnknownReason::Lame);
    }
    if message.metadata.response_code == ResponseCode::NXDomain {
        return match negative_from(message, parent) {
            Ok(()) => DsAnswer::Absent,
            Err(r) => DsAnswer::Unknown(r),
        };
    }
    let ds: Vec<_> = wire::rrset(&message.answers, zone, RecordType::DS)
        .filter_map(wire::as_ds)
        .map(wire::ds_from)
        .collect();
    if ds.is_empty() {
        if message
            .answers
            .iter()
            .any(|r| r.record_type() != RecordType::RRSIG)
        {
            return DsAnswer::Unknown(UnknownReason::Malformed(
                "answer section holds no DS for the zone".into(),
            ));
        }
        return match negative_from(message, parent) {
            Ok(()) => DsAnswer::Absent,
            Err(r) => DsAnswer::Unknown(r),
        };
    }
    let sigs: Vec<_> = wire::rrsigs(&message.answers, zone, RecordType::DS).collect();
    // A DS signed by the child itself comes from the wrong side of the cut.
    if sigs
        .iter()
        .any(|s| !wire::name_is(&s.input().signer_name, parent))
    {
        return DsAnswer::Unknown(UnknownReason::Lame);
    }
    // RFC 4035 5.3.3: what a validator caches for is the RRSIG's original TTL; a record
    // TTL lowered on the way must not shorten the wait after a removal.
    let ttl = if sigs.is_empty() {
        wire::rrset(&message.answers, zone, RecordType::DS)
            .map(|r| r.ttl)
            .max()
            .unwrap_or(0)
    } else {
        sigs.iter()
            .map(|s| s.input().original_ttl)
            .max()
            .unwrap_or(0)
    };
    DsAnswer::Present { ds, ttl }
}

/// The DS answer was an NXDOMAIN: the zone's name does not exist at that server.
pub fn is_nxdomain(outcome: &Outcome) -> bool {
    matches!(outcome, Ok(m) if m.metadata.response_code == ResponseCode::NXDomain)
}

/// `ds` is what the same parent server said to `zone DS` (an NXDOMAIN) and `ns` what it
/// says to `zone NS`. A server that refers the zone to its name servers (the name
/// exists, delegated) while denying the name exists contradicts itself: neither answer
/// is believed, and the DS answer is unknown. Otherwise `ds` stands.
pub fn contradicted_by_referral(zone: &Name, ds: DsAnswer, ns: &Outcome) -> DsAnswer {
    let Ok(m) = ns else { return ds };
    let refers = m.metadata.response_code == ResponseCode::NoError
        && m.authorities
            .iter()
            .chain(&m.answers)
            .any(|r| r.record_type() == RecordType::NS && wire::same_name(&r.name, zone));
    if refers && matches!(ds, DsAnswer::Absent) {
        DsAnswer::Unknown(UnknownReason::Contradiction(format!(
            "NXDOMAIN for the DS of {}, yet a referral of it to its name servers",
            wire::name_text(zone)
        )))
    } else {
        ds
    }
}

/// The NS RRset owned by `zone` in `records`, as a comparable set, and its largest TTL
/// (the longest a resolver may keep following it). `None` when there is none. When the
/// set is `known` (an [`ns_set`], the cached cut's), that one is shared instead of
/// written out again.
///
/// [`ns_set`]: super::delegation::ns_set
fn ns_rrset(
    records: &[hickory_proto::rr::Record],
    zone: &Name,
    known: &Arc<[String]>,
) -> Option<NsAnswer> {
    let targets = || {
        wire::rrset(records, zone, RecordType::NS).filter_map(|r| match &r.data {
            RData::NS(ns) => Some((&ns.0, r.ttl)),
            _ => None,
        })
    };
    let ttl = targets().map(|(_, ttl)| ttl).max()?;
    // The same set: every target is one of the known hosts, and every known host a target.
    let same = targets().all(|(host, _)| known.iter().any(|k| wire::name_is(host, k)))
        && known
            .iter()
            .all(|k| targets().any(|(host, _)| wire::name_is(host, k)));
    let hosts: Arc<[String]> = if same {
        known.clone()
    } else {
        ns_set_of(targets().map(|(host, _)| wire::name_text(host)).collect()).into()
    };
    (!hosts.is_empty()).then_some(NsAnswer::Servers { hosts, ttl })
}

/// Up to three "owner TYPE" of the records in an answer section other than signatures,
/// for a reason that names what was there instead.
fn found_instead(message: &Message) -> Option<String> {
    let found: Vec<String> = message
        .answers
        .iter()
        .filter(|r| r.record_type() != RecordType::RRSIG)
        .take(3)
        .map(|r| format!("{} {}", wire::name_text(&r.name), r.record_type()))
        .collect();
    (!found.is_empty()).then(|| found.join(", "))
}

/// `zone NS` asked at a server of `parent`: whom it delegates the zone to. A referral
/// (AA=0, the zone's NS in the authority section) or, from a server hosting the child
/// too, the authoritative apex NS are delegations; an authoritative NXDOMAIN or NODATA
/// with the parent's SOA is "not delegated"; anything else is unknown (safety rule 3).
/// `known` is the NS set the cached cut holds (shared when the answer names the same).
pub fn classify_ns_at_parent(
    zone: &Name,
    parent: &str,
    outcome: &Outcome,
    known: &Arc<[String]>,
) -> NsAnswer {
    let message = match outcome {
        Ok(m) => m,
        Err(e) => return NsAnswer::Unknown(failure_reason(e)),
    };
    if let Some(reason) = rcode_reason(message.metadata.response_code) {
        return NsAnswer::Unknown(reason);
    }
    if !message.metadata.authoritative {
        // A referral carries no answer; one with answers is a cache speaking, and one
        // to any other name (up, sideways) is a lame server.
        if message.metadata.response_code == ResponseCode::NoError
            && message.answers.is_empty()
            && let Some(servers) = ns_rrset(&message.authorities, zone, known)
        {
            return servers;
        }
        return NsAnswer::Unknown(UnknownReason::Lame);
    }
    if message.metadata.response_code == ResponseCode::NXDomain {
        return match negative_from(message, parent) {
            Ok(()) => NsAnswer::NotDelegated,
            Err(r) => NsAnswer::Unknown(r),
        };
    }
    if let Some(servers) = ns_rrset(&message.answers, zone, known) {
        return servers;
    }
    if let Some(found) = found_instead(message) {
        return NsAnswer::Unknown(UnknownReason::Malformed(format!(
            "answer section holds no NS for the zone, but {found}"
        )));
    }
    // NODATA: with the parent's SOA the name exists inside the parent's zone and is not
    // delegated; with any other zone's SOA the server is lame.
    match negative_from(message, parent) {
        Ok(()) => NsAnswer::NotDelegated,
        Err(r) => NsAnswer::Unknown(r),
    }
}

/// `zone NS` and `zone DS` asked at the same parent server: a server that denies the
/// name (NXDOMAIN for one) and delegates it or publishes its DS (for the other)
/// contradicts itself, and its delegation is not believed either.
pub fn ns_contradicted_by_ds(zone: &Name, ns: NsAnswer, ds: &Outcome) -> NsAnswer {
    let contradiction = |what: &str| {
        NsAnswer::Unknown(UnknownReason::Contradiction(format!(
            "{what} for {}",
            wire::name_text(zone)
        )))
    };
    match (&ns, ds) {
        (NsAnswer::Servers { .. }, Ok(m)) if m.metadata.response_code == ResponseCode::NXDomain => {
            contradiction("a referral, yet NXDOMAIN for the DS,")
        }
        (NsAnswer::NotDelegated, Ok(m))
            if m.metadata.response_code == ResponseCode::NoError
                && wire::rrset(&m.answers, zone, RecordType::DS)
                    .next()
                    .is_some() =>
        {
            contradiction("no delegation, yet a DS")
        }
        _ => ns,
    }
}

/// `zone NS` asked at a server the parent delegates `zone` to: the apex NS RRset it
/// serves with authority. A zone always has an apex NS, so there is no "none" here:
/// anything but the authoritative RRset is unknown.
/// `known` as for [`classify_ns_at_parent`]: the delegation's NS set.
pub fn classify_apex_ns(zone: &Name, outcome: &Outcome, known: &Arc<[String]>) -> NsAnswer {
    let message = match outcome {
        Ok(m) => m,
        Err(e) => return NsAnswer::Unknown(failure_reason(e)),
    };
    if let Some(reason) = rcode_reason(message.metadata.response_code) {
        return NsAnswer::Unknown(reason);
    }
    if !message.metadata.authoritative || message.metadata.response_code == ResponseCode::NXDomain {
        return NsAnswer::Unknown(UnknownReason::Lame);
    }
    if let Some(servers) = ns_rrset(&message.answers, zone, known) {
        return servers;
    }
    NsAnswer::Unknown(UnknownReason::Malformed(match found_instead(message) {
        Some(found) => format!("answer section holds no apex NS, but {found}"),
        None => "authoritative answer without the apex NS".into(),
    }))
}

/// `zone DNSKEY` asked at a server the parent delegates `zone` to. `cds` and `cdnskey`
/// are the same server's answers to `zone CDS` and `zone CDNSKEY`, when asked.
/// `now` (Unix seconds) is the time the keys' self-signatures must be valid at.
pub fn classify_dnskey(
    zone: &Name,
    outcome: &Outcome,
    cds: Option<&Outcome>,
    cdnskey: Option<&Outcome>,
    now: u32,
    budget: &crate::dns::net::budget::Budget,
) -> DnskeyAnswer {
    let zone_text = wire::name_text(zone);
    let message = match outcome {
        Ok(m) => m,
        Err(e) => return DnskeyAnswer::Unknown(failure_reason(e)),
    };
    if let Some(reason) = rcode_reason(message.metadata.response_code) {
        return DnskeyAnswer::Unknown(reason);
    }
    // The child's own servers must answer for its apex with authority; NXDOMAIN there
    // means the server does not know the zone.
    if !message.metadata.authoritative || message.metadata.response_code == ResponseCode::NXDomain {
        return DnskeyAnswer::Unknown(UnknownReason::Lame);
    }
    // Duplicates are one record (RFC 2181 section 5): a key repeated is not more keys.
    let mut keys: Vec<_> = Vec::new();
    for key in wire::rrset(&message.answers, zone, RecordType::DNSKEY)
        .filter_map(wire::as_dnskey)
        .map(wire::dnskey_from)
    {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    if keys.is_empty() {
        // As for the DS: an answer section holding anything but signatures (a CNAME at the
        // apex, DNSKEYs owned by another name) is no NODATA, whatever SOA comes with it.
        if message
            .answers
            .iter()
            .any(|r| r.record_type() != RecordType::RRSIG)
        {
            let found: Vec<String> = message
                .answers
                .iter()
                .filter(|r| r.record_type() != RecordType::RRSIG)
                .take(3)
                .map(|r| format!("{} {}", wire::name_text(&r.name), r.record_type()))
                .collect();
            return DnskeyAnswer::Unknown(UnknownReason::Malformed(format!(
                "answer section holds no DNSKEY for the zone, but {}",
                found.join(", ")
            )));
        }
        return match negative_from(message, &zone_text) {
            Ok(()) => DnskeyAnswer::Absent,
            Err(r) => DnskeyAnswer::Unknown(r),
        };
    }
    // Keys without signatures from a server asked without EDNS: whether a key signs
    // its set is unknown, not "not served" (which would withdraw an announced DS).
    if wire::unsigned_without_edns(message) {
        return DnskeyAnswer::Unknown(UnknownReason::WithoutEdns);
    }
    let ttl = wire::rrset(&message.answers, zone, RecordType::DNSKEY)
        .map(|r| r.ttl)
        .max()
        .unwrap_or(0);
    let signatures: Vec<SignatureWindow> = wire::rrsigs(&message.answers, zone, RecordType::DNSKEY)
        .map(|s| SignatureWindow {
            key_tag: s.input().key_tag,
            inception: s.input().sig_inception.get(),
            expiration: s.input().sig_expiration.get(),
        })
        .collect();
    let self_signers = match crate::dns::validate::validator::self_signers(
        &message.answers,
        zone,
        &keys,
        now,
        budget,
    ) {
        Ok(signers) => signers,
        // Work cut short proves neither "signed" nor "not signed".
        Err(e) => return DnskeyAnswer::Unknown(UnknownReason::Malformed(e.to_string())),
    };
    let signals = match (cds, cdnskey) {
        (Some(cds), Some(cdnskey)) => {
            classify_signals(zone, cds, cdnskey, &keys, &self_signers, now, budget)
        }
        _ => Signals::NotAsked,
    };
    DnskeyAnswer::Keys(ChildKeys {
        keys,
        ttl,
        signed: !signatures.is_empty(),
        self_signers,
        signatures,
        signals,
    })
}

/// One child address's `zone CDS` and `zone CDNSKEY` answers, beside its DNSKEY set
/// (`keys`, of which `served` sign the set). Either answer unusable makes both unknown:
/// a half-seen signal is not a signal. The signers are the served keys whose RRSIG over
/// every published signal RRset is valid at `now`.
fn classify_signals(
    zone: &Name,
    cds: &Outcome,
    cdnskey: &Outcome,
    keys: &[crate::dnssec::Dnskey],
    served: &[usize],
    now: u32,
    budget: &crate::dns::net::budget::Budget,
) -> Signals {
    let zone_text = wire::name_text(zone);
    let answer = |outcome: &Outcome, rtype: RecordType| -> Result<bool, UnknownReason> {
        let message = outcome.as_ref().map_err(failure_reason)?;
        if let Some(reason) = rcode_reason(message.metadata.response_code) {
            return Err(reason);
        }
        // The server just answered the zone's DNSKEY with authority: NXDOMAIN or a
        // non-authoritative answer now is not a "none published".
        if !message.metadata.authoritative
            || message.metadata.response_code == ResponseCode::NXDomain
        {
            return Err(UnknownReason::Lame);
        }
        if wire::rrset(&message.answers, zone, rtype).next().is_some() {
            if wire::unsigned_without_edns(message) {
                return Err(UnknownReason::WithoutEdns);
            }
            return Ok(true);
        }
        if let Some(found) = found_instead(message) {
            return Err(UnknownReason::Malformed(format!(
                "answer section holds no {rtype} for the zone, but {found}"
            )));
        }
        negative_from(message, &zone_text).map(|()| false)
    };
    let (has_cds, has_cdnskey) = match (
        answer(cds, RecordType::CDS),
        answer(cdnskey, RecordType::CDNSKEY),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(reason), _) | (_, Err(reason)) => return Signals::Unknown(reason),
    };
    let mut published = Published::default();
    if let (true, Ok(m)) = (has_cds, cds) {
        for r in wire::rrset(&m.answers, zone, RecordType::CDS) {
            if let RData::DNSSEC(DNSSECRData::CDS(c)) = &r.data {
                let ds = wire::ds_from_cds(c);
                // Duplicates are one record (RFC 2181 section 5).
                if !published.cds.contains(&ds) {
                    published.cds.push(ds);
                }
            }
        }
    }
    if let (true, Ok(m)) = (has_cdnskey, cdnskey) {
        for r in wire::rrset(&m.answers, zone, RecordType::CDNSKEY) {
            if let RData::DNSSEC(DNSSECRData::CDNSKEY(c)) = &r.data {
                let key = wire::dnskey_from_cdnskey(c);
                if !published.cdnskey.contains(&key) {
                    published.cdnskey.push(key);
                }
            }
        }
    }
    let signed = |outcome: &Outcome, rtype: RecordType, key: &crate::dnssec::Dnskey| {
        let Ok(m) = outcome else { return Ok(false) };
        match crate::dns::validate::validator::verify_rrset(
            &m.answers,
            zone,
            rtype,
            &zone_text,
            std::slice::from_ref(key),
            now,
            budget,
        ) {
            Ok(_) => Ok(true),
            Err(crate::dns::validate::validator::VerifyError::Failed(_)) => Ok(false),
            Err(e) => Err(e),
        }
    };
    for &i in served {
        let Some(key) = keys.get(i) else { continue };
        let both = (|| {
            Ok::<_, crate::dns::validate::validator::VerifyError>(
                (!has_cds || signed(cds, RecordType::CDS, key)?)
                    && (!has_cdnskey || signed(cdnskey, RecordType::CDNSKEY, key)?),
            )
        })();
        match both {
            Ok(true) if has_cds || has_cdnskey => published.signers.push(i),
            Ok(_) => {}
            // Work cut short proves neither "signed" nor "not signed".
            Err(e) => return Signals::Unknown(UnknownReason::Malformed(e.to_string())),
        }
    }
    Signals::Answered(published)
}

/// `qname DSYNC` (the child's lookup name, `child._dsync.parent.`) asked at a server of
/// `parent`: the DSYNC records at that name (a wildcard's synthesis carries the name
/// asked as its owner), or an authoritative "none" with the parent's SOA. A record that
/// does not parse (truncated, trailing octets, a compressed or broken target) makes the
/// whole answer unknown: a set read in part is never taken for the set. Null-scheme
/// records are left out (RFC 9859 section 2: consumers ignore them).
pub fn classify_dsync(qname: &Name, parent: &str, outcome: &Outcome) -> DsyncAnswer {
    use hickory_proto::serialize::binary::BinEncodable;
    let message = match outcome {
        Ok(m) => m,
        Err(e) => return DsyncAnswer::Unknown(failure_reason(e)),
    };
    if let Some(reason) = rcode_reason(message.metadata.response_code) {
        return DsyncAnswer::Unknown(reason);
    }
    if !message.metadata.authoritative {
        return DsyncAnswer::Unknown(UnknownReason::Lame);
    }
    let rtype = RecordType::from(wire::DSYNC);
    // An NXDOMAIN is the parent's "none" only with nothing in the answer section (an
    // alias there says the name asked is another's, RFC 6604).
    if message.metadata.response_code == ResponseCode::NXDomain {
        if let Some(found) = found_instead(message) {
            return DsyncAnswer::Unknown(UnknownReason::Malformed(format!(
                "NXDOMAIN for {}, yet the answer section holds {found}",
                wire::name_text(qname)
            )));
        }
        return match negative_from(message, parent) {
            Ok(()) => DsyncAnswer::None,
            Err(r) => DsyncAnswer::Unknown(r),
        };
    }
    let mut records = Vec::new();
    let mut ttl = 0;
    for r in wire::rrset(&message.answers, qname, rtype) {
        let bytes = match &r.data {
            RData::Unknown { rdata, .. } => rdata.anything.clone(),
            other => match other.to_bytes() {
                Ok(b) => b,
                Err(e) => {
                    return DsyncAnswer::Unknown(UnknownReason::Malformed(format!(
                        "DSYNC record: {e}"
                    )));
                }
            },
        };
        match wire::parse_dsync(&bytes) {
            Ok(d) => records.push(d),
            Err(e) => return DsyncAnswer::Unknown(UnknownReason::Malformed(e.to_string())),
        }
        ttl = ttl.max(r.ttl);
    }
    if records.is_empty() {
        if let Some(found) = found_instead(message) {
            return DsyncAnswer::Unknown(UnknownReason::Malformed(format!(
                "answer section holds no DSYNC for {}: {found}",
                wire::name_text(qname)
            )));
        }
        return match negative_from(message, parent) {
            Ok(()) => DsyncAnswer::None,
            Err(r) => DsyncAnswer::Unknown(r),
        };
    }
    records.retain(|d| d.scheme != wire::DSYNC_SCHEME_NULL);
    records.sort();
    records.dedup();
    if records.is_empty() {
        return DsyncAnswer::None;
    }
    DsyncAnswer::Records { records, ttl }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::dns::observe::delegation::ns_set;

    use hickory_proto::op::{MessageType, OpCode};
    use hickory_proto::rr::Record;
    use hickory_proto::rr::rdata::{CNAME, NS, SOA};

    use super::*;

    fn name(text: &str) -> Name {
        wire::parse_name(text).unwrap_or_else(Name::root)
    }

    fn ns(owner: &str, host: &str, ttl: u32) -> Record {
        Record::from_rdata(name(owner), ttl, RData::NS(NS(name(host))))
    }

    fn soa(owner: &str) -> Record {
        Record::from_rdata(
            name(owner),
            60,
            RData::SOA(SOA::new(
                name(&format!("ns.{owner}")),
                name(&format!("hostmaster.{owner}")),
                1,
                3600,
                600,
                86400,
                60,
            )),
        )
    }

    fn message(aa: bool, rcode: ResponseCode, answers: Vec<Record>, auth: Vec<Record>) -> Outcome {
        let mut m = Message::new(1, MessageType::Response, OpCode::Query);
        m.metadata.authoritative = aa;
        m.metadata.response_code = rcode;
        m.answers = answers;
        m.authorities = auth;
        Ok(Arc::new(m))
    }

    const ZONE: &str = "child.test.";
    const PARENT: &str = "test.";

    /// No cached NS set to share: every answer's set is written out.
    fn none() -> Arc<[String]> {
        Arc::from([])
    }

    /// The DS of ZONE and its RRSIG by `signer` (the signature bytes are not checked here).
    fn signed_ds(signer: &str) -> Vec<Record> {
        use hickory_proto::dnssec::rdata::{DS, RRSIG, SigInput};
        use hickory_proto::dnssec::{Algorithm, DigestType};
        use hickory_proto::rr::SerialNumber;
        let ds = DS::new(
            12345,
            Algorithm::ECDSAP256SHA256,
            DigestType::SHA256,
            vec![0xab; 32],
        );
        let input = SigInput {
            type_covered: RecordType::DS,
            algorithm: Algorithm::ECDSAP256SHA256,
            num_labels: 2,
            original_ttl: 3600,
            sig_expiration: SerialNumber::new(2_000_000_000),
            sig_inception: SerialNumber::new(1_000_000_000),
            key_tag: 1,
            signer_name: Name::from_ascii(signer).unwrap(),
        };
        vec![
            Record::from_rdata(name(ZONE), 600, RData::DNSSEC(DNSSECRData::DS(ds))),
            Record::from_rdata(
                name(ZONE),
                600,
                RData::DNSSEC(DNSSECRData::RRSIG(RRSIG::from_sig(input, vec![0; 64]))),
            ),
        ]
    }

    /// A DS signed by the child itself comes from the wrong side of the cut: lame, not the
    /// parent's "present". The parent's name in other case is still the parent.
    #[test]
    fn a_ds_is_the_parents_only_when_the_parent_signed_it() {
        let z = name(ZONE);
        for signer in ["test.", "TEST.", "Test."] {
            let answer = message(true, ResponseCode::NoError, signed_ds(signer), vec![]);
            assert!(
                matches!(
                    classify_ds(&z, PARENT, &answer),
                    DsAnswer::Present { ttl: 3600, .. }
                ),
                "{signer}"
            );
        }
        for signer in ["child.test.", "CHILD.test.", "other.", "xtest."] {
            let answer = message(true, ResponseCode::NoError, signed_ds(signer), vec![]);
            assert_eq!(
                classify_ds(&z, PARENT, &answer),
                DsAnswer::Unknown(UnknownReason::Lame),
                "{signer}"
            );
        }
    }

    #[test]
    fn the_parent_delegates_by_referral_or_by_hosting_the_child() {
        let z = name(ZONE);
        let referral = message(
            false,
            ResponseCode::NoError,
            vec![],
            vec![
                ns(ZONE, "NS2.child.test.", 300),
                ns(ZONE, "ns1.child.test.", 600),
            ],
        );
        let expected = NsAnswer::Servers {
            hosts: ns_set(["ns1.child.test", "ns2.child.test"]).into(),
            ttl: 600,
        };
        assert_eq!(
            classify_ns_at_parent(&z, PARENT, &referral, &none()),
            expected
        );
        // A parent server that hosts the child too answers the apex NS with authority.
        let hosting = message(
            true,
            ResponseCode::NoError,
            vec![
                ns(ZONE, "ns1.child.test.", 600),
                ns(ZONE, "ns2.child.test.", 600),
            ],
            vec![],
        );
        assert_eq!(
            classify_ns_at_parent(&z, PARENT, &hosting, &none()),
            expected
        );
    }

    /// A referral naming the cached cut's NS set (in any case and order) shares it; one
    /// naming more, fewer or other hosts gets its own set, written out as before.
    #[test]
    fn a_referral_naming_the_cached_set_shares_it() {
        let z = name(ZONE);
        let known: Arc<[String]> = ns_set(["ns1.child.test", "ns2.child.test"]).into();
        let referral = |hosts: &[&str]| {
            let records = hosts.iter().map(|h| ns(ZONE, h, 600)).collect();
            message(false, ResponseCode::NoError, vec![], records)
        };
        let hosts_of = |answer: NsAnswer| match answer {
            NsAnswer::Servers { hosts, .. } => hosts,
            other => panic!("{other:?}"),
        };
        let same = hosts_of(classify_ns_at_parent(
            &z,
            PARENT,
            &referral(&["NS2.Child.test.", "ns1.child.test.", "ns1.child.test."]),
            &known,
        ));
        assert!(Arc::ptr_eq(&same, &known));
        for (named, expected) in [
            (&["ns1.child.test."][..], &["ns1.child.test."][..]),
            (
                &["ns1.child.test.", "ns2.child.test.", "ns3.child.test."],
                &["ns1.child.test.", "ns2.child.test.", "ns3.child.test."],
            ),
            (
                &["ns1.other.test.", "ns2.child.test."],
                &["ns1.other.test.", "ns2.child.test."],
            ),
        ] {
            let own = hosts_of(classify_ns_at_parent(&z, PARENT, &referral(named), &known));
            assert!(!Arc::ptr_eq(&own, &known), "{named:?}");
            assert_eq!(&*own, expected, "{named:?}");
        }
    }

    #[test]
    fn only_the_parents_own_denial_is_not_delegated() {
        let z = name(ZONE);
        let nx = message(true, ResponseCode::NXDomain, vec![], vec![soa(PARENT)]);
        assert_eq!(
            classify_ns_at_parent(&z, PARENT, &nx, &none()),
            NsAnswer::NotDelegated
        );
        let nodata = message(true, ResponseCode::NoError, vec![], vec![soa(PARENT)]);
        assert_eq!(
            classify_ns_at_parent(&z, PARENT, &nodata, &none()),
            NsAnswer::NotDelegated
        );
        // Another zone's SOA: lame. No SOA at all: malformed. Neither is "not delegated".
        let other = message(true, ResponseCode::NoError, vec![], vec![soa(ZONE)]);
        assert_eq!(
            classify_ns_at_parent(&z, PARENT, &other, &none()),
            NsAnswer::Unknown(UnknownReason::Lame)
        );
        let bare = message(true, ResponseCode::NXDomain, vec![], vec![]);
        assert!(matches!(
            classify_ns_at_parent(&z, PARENT, &bare, &none()),
            NsAnswer::Unknown(UnknownReason::Malformed(_))
        ));
        // An NXDOMAIN without authority is a cache or a lame server speaking.
        let cached = message(false, ResponseCode::NXDomain, vec![], vec![soa(PARENT)]);
        assert_eq!(
            classify_ns_at_parent(&z, PARENT, &cached, &none()),
            NsAnswer::Unknown(UnknownReason::Lame)
        );
    }

    #[test]
    fn anything_else_at_the_parent_is_unknown() {
        let z = name(ZONE);
        let cases = [
            // A referral up or sideways.
            message(
                false,
                ResponseCode::NoError,
                vec![],
                vec![ns(".", "a.root.", 1)],
            ),
            // A recursive answer, not the parent speaking.
            message(
                false,
                ResponseCode::NoError,
                vec![ns(ZONE, "ns1.child.test.", 300)],
                vec![],
            ),
            message(false, ResponseCode::NoError, vec![], vec![]),
        ];
        for outcome in &cases {
            assert_eq!(
                classify_ns_at_parent(&z, PARENT, outcome, &none()),
                NsAnswer::Unknown(UnknownReason::Lame),
                "{outcome:?}"
            );
        }
        let cname = message(
            true,
            ResponseCode::NoError,
            vec![Record::from_rdata(
                z.clone(),
                60,
                RData::CNAME(CNAME(name("x.test."))),
            )],
            vec![soa(PARENT)],
        );
        assert!(matches!(
            classify_ns_at_parent(&z, PARENT, &cname, &none()),
            NsAnswer::Unknown(UnknownReason::Malformed(d)) if d.contains("CNAME")
        ));
        let refused = message(true, ResponseCode::Refused, vec![], vec![]);
        assert_eq!(
            classify_ns_at_parent(&z, PARENT, &refused, &none()),
            NsAnswer::Unknown(UnknownReason::Refused)
        );
        let timeout: Outcome = Err(ExchangeError::Timeout);
        assert_eq!(
            classify_ns_at_parent(&z, PARENT, &timeout, &none()),
            NsAnswer::Unknown(UnknownReason::Timeout)
        );
    }

    #[test]
    fn a_parent_denying_what_it_delegates_is_not_believed() {
        let z = name(ZONE);
        let servers = NsAnswer::Servers {
            hosts: ns_set(["ns1.child.test"]).into(),
            ttl: 300,
        };
        let ds_nx = message(true, ResponseCode::NXDomain, vec![], vec![soa(PARENT)]);
        assert!(matches!(
            ns_contradicted_by_ds(&z, servers.clone(), &ds_nx),
            NsAnswer::Unknown(UnknownReason::Contradiction(_))
        ));
        let ds_nodata = message(true, ResponseCode::NoError, vec![], vec![soa(PARENT)]);
        assert_eq!(
            ns_contradicted_by_ds(&z, servers.clone(), &ds_nodata),
            servers
        );
        let timeout: Outcome = Err(ExchangeError::Timeout);
        assert_eq!(
            ns_contradicted_by_ds(&z, NsAnswer::NotDelegated, &timeout),
            NsAnswer::NotDelegated
        );
        // A DS exists only at a delegation: "not delegated" beside one is not believed.
        let ds = wire::to_hickory_ds(&crate::dnssec::Ds {
            key_tag: 1,
            algorithm: 13,
            digest_type: 2,
            digest: vec![0; 32],
        });
        let ds_present = message(
            true,
            ResponseCode::NoError,
            vec![Record::from_rdata(
                z.clone(),
                300,
                RData::DNSSEC(DNSSECRData::DS(ds)),
            )],
            vec![],
        );
        assert!(matches!(
            ns_contradicted_by_ds(&z, NsAnswer::NotDelegated, &ds_present),
            NsAnswer::Unknown(UnknownReason::Contradiction(_))
        ));
    }

    #[test]
    fn the_apex_ns_needs_the_childs_authority() {
        let z = name(ZONE);
        let apex = message(
            true,
            ResponseCode::NoError,
            vec![ns(ZONE, "ns1.child.test.", 3600)],
            vec![],
        );
        assert_eq!(
            classify_apex_ns(&z, &apex, &none()),
            NsAnswer::Servers {
                hosts: ns_set(["ns1.child.test"]).into(),
                ttl: 3600
            }
        );
        let referral = message(
            false,
            ResponseCode::NoError,
            vec![],
            vec![ns(ZONE, "ns1.child.test.", 3600)],
        );
        assert_eq!(
            classify_apex_ns(&z, &referral, &none()),
            NsAnswer::Unknown(UnknownReason::Lame)
        );
        // A zone always has an apex NS: a NODATA for it is no answer.
        let nodata = message(true, ResponseCode::NoError, vec![], vec![soa(ZONE)]);
        assert!(matches!(
            classify_apex_ns(&z, &nodata, &none()),
            NsAnswer::Unknown(UnknownReason::Malformed(_))
        ));
    }
}
