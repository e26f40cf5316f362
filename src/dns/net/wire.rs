//! The seam between hickory-proto's wire types and ours: names, queries, and DNSSEC
//! records converted to [`Dnskey`]/[`Ds`] so the verdicts use our own arithmetic
//! (`crate::dnssec`, cross-checked against ldns-key2ds).

use hickory_proto::dnssec::rdata::{CDNSKEY, CDS, DNSKEY, DNSSECRData, DS, RRSIG};
use hickory_proto::dnssec::{Algorithm, PublicKey, PublicKeyBuf};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use crate::dnssec::{Dnskey, Ds};

/// EDNS payload size of every query (the DNS flag day 2020 value): large enough for most
/// DNSKEY sets, small enough never to fragment; larger answers come back truncated and are
/// fetched over TCP.
pub const EDNS_PAYLOAD: u16 = 1232;

/// Whether `name` in our textual convention ([`name_text`]) is `text`, without writing
/// it out: the classifiers compare every answer's owners and signers with the zone.
pub fn name_is(name: &Name, text: &str) -> bool {
    if name.is_root() {
        return text == ".";
    }
    let mut rest = text.as_bytes();
    for label in name.iter() {
        // Other bytes are written escaped: compare the text written out.
        if !label
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
        {
            return name_text(name) == text;
        }
        let (Some(head), Some(b'.')) = (rest.get(..label.len()), rest.get(label.len())) else {
            return false;
        };
        if !head
            .iter()
            .zip(label)
            .all(|(t, l)| *t == l.to_ascii_lowercase())
        {
            return false;
        }
        rest = rest.get(label.len() + 1..).unwrap_or_default();
    }
    rest.is_empty()
}

/// A name in our textual convention: lower case, fully qualified.
pub fn name_text(name: &Name) -> String {
    let mut text = name.to_ascii();
    text.make_ascii_lowercase();
    if !text.ends_with('.') {
        text.push('.');
    }
    text
}

/// Parses a fully qualified name; `None` if it is not a valid DNS name.
pub fn parse_name(text: &str) -> Option<Name> {
    if text.ends_with('.') {
        Name::from_ascii(text).ok()
    } else {
        Name::from_ascii(format!("{text}.")).ok()
    }
}

/// Same owner name, compared case-insensitively and fully qualified (label by label, as
/// `name_text` of both would compare, without building the texts).
pub fn same_name(a: &Name, b: &Name) -> bool {
    a.num_labels() == b.num_labels()
        && a.iter()
            .zip(b.iter())
            .all(|(x, y)| x.eq_ignore_ascii_case(y))
}

/// `name` is `ancestor` or below it.
pub fn is_subdomain(name: &str, ancestor: &str) -> bool {
    if ancestor == "." || name == ancestor {
        return true;
    }
    name.len() > ancestor.len()
        && name.ends_with(ancestor)
        && name.as_bytes().get(name.len() - ancestor.len() - 1) == Some(&b'.')
}

/// The names from just below `from` down to `to`, shortest first; empty if `to` is not
/// below `from`. `between("test.", "a.b.test.")` = `["b.test.", "a.b.test."]`.
pub fn names_below(from: &str, to: &str) -> Vec<String> {
    if !is_subdomain(to, from) || to == from {
        return Vec::new();
    }
    let labels: Vec<&str> = to.trim_end_matches('.').split('.').collect();
    let depth_from = if from == "." {
        0
    } else {
        from.trim_end_matches('.').split('.').count()
    };
    (depth_from + 1..=labels.len())
        .map(|n| format!("{}.", labels[labels.len() - n..].join(".")))
        .collect()
}

/// The parent name of `name` (`.` for a TLD and for the root itself).
pub fn parent_name(name: &str) -> String {
    match name.trim_end_matches('.').split_once('.') {
        Some((_, rest)) => format!("{rest}."),
        None => ".".into(),
    }
}

/// Random bytes held per thread for query IDs: one `getrandom` call per 256 queries.
const ID_POOL: usize = 512;

/// A query ID from the operating system's cryptographic RNG (RFC 5452 section 9.2: an
/// attacker who sees some of our IDs, a name server we query for instance, must not be
/// able to predict the next ones). If the OS RNG ever fails, the thread-seeded fastrand
/// is the fallback: an ID is still never a constant.
pub fn query_id() -> u16 {
    use ring::rand::SecureRandom;
    use std::cell::RefCell;
    thread_local! {
        static POOL: RefCell<([u8; ID_POOL], usize)> = const { RefCell::new(([0; ID_POOL], ID_POOL)) };
    }
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let (bytes, next) = &mut *pool;
        if *next + 2 > ID_POOL {
            if ring::rand::SystemRandom::new().fill(bytes).is_err() {
                return fastrand::u16(..);
            }
            *next = 0;
        }
        let id = u16::from_be_bytes([bytes[*next], bytes[*next + 1]]);
        *next += 2;
        id
    })
}

/// `out` (a query) with each letter of its question name in random case, from the same
/// OS CSPRNG as the IDs (0x20: a forger must guess these bits too). One random bit a
/// letter, 16 letters a draw; the name starts right after the 12-byte header, never
/// compressed in a query.
pub fn randomise_case(out: &mut [u8]) {
    let (mut bits, mut left) = (0u16, 0u32);
    let mut at = 12;
    // Bounded: a name has at most 127 labels.
    for _ in 0..128 {
        let Some(&len) = out.get(at) else { break };
        if len == 0 || len & 0xC0 != 0 {
            break;
        }
        let end = (at + 1 + usize::from(len)).min(out.len());
        for byte in out.get_mut(at + 1..end).unwrap_or_default() {
            if !byte.is_ascii_alphabetic() {
                continue;
            }
            if left == 0 {
                (bits, left) = (query_id(), 16);
            }
            if bits & 1 != 0 {
                *byte ^= 0x20;
            }
            (bits, left) = (bits >> 1, left - 1);
        }
        at = end;
    }
}

/// The answer's question name is the one of `wire` (the query sent) byte for byte, case
/// included.
pub fn question_case_matches(answer: &Message, wire: &[u8]) -> bool {
    let Some(question) = answer.queries.first() else {
        return false;
    };
    let mut at = 12;
    for label in question.name().iter() {
        let Some(&len) = wire.get(at) else {
            return false;
        };
        let end = at + 1 + usize::from(len);
        if wire.get(at + 1..end) != Some(label) {
            return false;
        }
        at = end;
    }
    wire.get(at) == Some(&0)
}

/// A query as every authoritative query is sent: RD as given, DO=1, EDNS payload 1232,
/// an unpredictable ID ([`query_id`]; the UDP source port is random too, see
/// `transport`).
pub fn build_query(qname: &Name, qtype: RecordType, recursion_desired: bool) -> Message {
    let mut message = Message::new(query_id(), MessageType::Query, OpCode::Query);
    message.add_query(Query::query(qname.clone(), qtype));
    message.metadata.recursion_desired = recursion_desired;
    let mut edns = Edns::new();
    edns.set_max_payload(EDNS_PAYLOAD);
    edns.set_dnssec_ok(true);
    message.set_edns(edns);
    message
}

/// A query's wire form: in place up to [`QUERY_INLINE`] bytes (a question name of up to
/// 69), so that most exchanges allocate nothing for it.
pub type QueryBytes = smallvec::SmallVec<[u8; QUERY_INLINE]>;
/// See [`QueryBytes`]: 12 bytes of header, the name, 4 of type and class, 11 of OPT.
pub const QUERY_INLINE: usize = 96;

/// The wire form of `message`. A query of the shape [`build_query`] makes (one question,
/// no records, EDNS without options) is written directly, without the general encoder's
/// bookkeeping for name compression: every observation sends tens of thousands of them.
/// Anything else goes through hickory's encoder. Both give the same bytes (tested).
pub fn encode_query(message: &Message) -> Result<QueryBytes, hickory_proto::ProtoError> {
    let plain = |m: &Message| -> Option<QueryBytes> {
        let [query] = m.queries.as_slice() else {
            return None;
        };
        let edns = m.edns.as_ref()?;
        let md = &m.metadata;
        if !(m.answers.is_empty() && m.authorities.is_empty() && m.additionals.is_empty())
            || m.signature.is_some()
            || !edns.options().as_ref().is_empty()
            || md.message_type != MessageType::Query
            || md.op_code != OpCode::Query
            || md.authoritative
            || md.truncation
            || md.recursion_available
            || md.response_code != hickory_proto::op::ResponseCode::NoError
            || edns.rcode_high() != 0
        {
            return None;
        }
        let name = query.name();
        let mut out = QueryBytes::new();
        out.extend_from_slice(&md.id.to_be_bytes());
        out.push(if md.recursion_desired { 0x01 } else { 0x00 });
        out.push(
            if md.authentic_data { 0x20 } else { 0x00 }
                | if md.checking_disabled { 0x10 } else { 0x00 },
        );
        // QDCOUNT 1, ANCOUNT 0, NSCOUNT 0, ARCOUNT 1 (the OPT record).
        out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 1]);
        for label in name.iter() {
            out.push(u8::try_from(label.len()).ok()?);
            out.extend_from_slice(label);
        }
        out.push(0);
        out.extend_from_slice(&u16::from(query.query_type()).to_be_bytes());
        out.extend_from_slice(&u16::from(query.query_class()).to_be_bytes());
        // OPT (RFC 6891 6.1.2): root owner, type 41, CLASS the payload size, TTL the
        // extended RCODE, version and flags (DO is the top bit), no options.
        out.push(0);
        out.extend_from_slice(&u16::from(RecordType::OPT).to_be_bytes());
        out.extend_from_slice(&edns.max_payload().to_be_bytes());
        out.push(0);
        out.push(edns.version());
        out.push(if edns.flags().dnssec_ok { 0x80 } else { 0x00 });
        out.extend_from_slice(&[0, 0, 0]);
        Some(out)
    };
    match plain(message) {
        Some(bytes) => Ok(bytes),
        None => message.to_vec().map(QueryBytes::from_vec),
    }
}

pub fn ds_from(ds: &DS) -> Ds {
    Ds {
        key_tag: ds.key_tag(),
        algorithm: u8::from(ds.algorithm()),
        digest_type: u8::from(ds.digest_type()),
        digest: ds.digest().to_vec(),
    }
}

pub fn ds_from_cds(cds: &CDS) -> Ds {
    Ds {
        key_tag: cds.key_tag(),
        algorithm: cds.algorithm().map(u8::from).unwrap_or(0),
        digest_type: u8::from(cds.digest_type()),
        digest: cds.digest().to_vec(),
    }
}

pub fn dnskey_from(key: &DNSKEY) -> Dnskey {
    Dnskey {
        flags: key.flags(),
        protocol: crate::dnssec::PROTOCOL_DNSSEC,
        algorithm: u8::from(key.public_key().algorithm()),
        public_key: key.public_key().public_bytes().to_vec(),
    }
}

pub fn dnskey_from_cdnskey(key: &CDNSKEY) -> Dnskey {
    Dnskey {
        flags: key.flags(),
        protocol: crate::dnssec::PROTOCOL_DNSSEC,
        algorithm: key.algorithm().map(u8::from).unwrap_or(0),
        public_key: key
            .public_key()
            .map(|k| k.public_bytes().to_vec())
            .unwrap_or_default(),
    }
}

/// Our DNSKEY as hickory's, to verify signatures with it.
pub fn to_hickory_dnskey(key: &Dnskey) -> DNSKEY {
    DNSKEY::with_flags(
        key.flags,
        PublicKeyBuf::new(key.public_key.clone(), Algorithm::from_u8(key.algorithm)),
    )
}

pub fn to_hickory_ds(ds: &Ds) -> DS {
    DS::new(
        ds.key_tag,
        Algorithm::from_u8(ds.algorithm),
        ds.digest_type.into(),
        ds.digest.clone(),
    )
}

/// The records of `rtype` owned by `owner` in `records`.
pub fn rrset<'a>(
    records: &'a [Record],
    owner: &'a Name,
    rtype: RecordType,
) -> impl Iterator<Item = &'a Record> + 'a {
    records
        .iter()
        .filter(move |r| r.record_type() == rtype && same_name(&r.name, owner))
}

/// The RRSIGs over (`owner`, `covered`) in `records`.
pub fn rrsigs<'a>(
    records: &'a [Record],
    owner: &'a Name,
    covered: RecordType,
) -> impl Iterator<Item = &'a RRSIG> + 'a {
    records.iter().filter_map(move |r| match &r.data {
        RData::DNSSEC(DNSSECRData::RRSIG(sig))
            if same_name(&r.name, owner) && sig.input().type_covered == covered =>
        {
            Some(sig)
        }
        _ => None,
    })
}

/// Why [`unsigned_without_edns`] answers teach nothing that needs DNSSEC records.
pub const WITHOUT_EDNS: &str = "answered only without EDNS (RFC 6891 section 7), so without \
     the DO bit: it carries no signatures or denial records to check";

/// The answer came without EDNS (the server does not implement it, so it was asked
/// without: no DO bit) and holds no RRSIG. Its lack of signatures and of NSEC or NSEC3
/// records says nothing (RFC 3225, RFC 4035 section 3.2.1: a server adds them only when
/// DO is set): it is no evidence of "unsigned", "not served" or "bogus".
pub fn unsigned_without_edns(message: &Message) -> bool {
    message.edns.is_none()
        && !message
            .answers
            .iter()
            .chain(&message.authorities)
            .any(|r| r.record_type() == RecordType::RRSIG)
}

pub fn as_ds(record: &Record) -> Option<&DS> {
    match &record.data {
        RData::DNSSEC(DNSSECRData::DS(ds)) => Some(ds),
        _ => None,
    }
}

pub fn as_dnskey(record: &Record) -> Option<&DNSKEY> {
    match &record.data {
        RData::DNSSEC(DNSSECRData::DNSKEY(key)) => Some(key),
        _ => None,
    }
}

/// The record type (private use, RFC 6895) NSEC3 records validators must ignore are
/// decoded as: see [`mask_ignored_nsec3`].
pub const IGNORED_NSEC3: u16 = 0xFF53;

/// NSEC3 hash algorithm SHA-1 (RFC 5155 section 11), the only one assigned.
const NSEC3_SHA1: u8 = 1;

/// `bytes` (a message hickory could not decode) with every NSEC3 record that validators
/// must ignore, one of an unknown hash algorithm (RFC 5155 section 8.1) or with flags
/// other than opt-out (section 8.2), retyped in place to [`IGNORED_NSEC3`], which
/// hickory keeps as opaque data: the rest of the answer stands, instead of the whole
/// message being malformed for a record the rules say to ignore. `None` when there is no
/// such record, or the message already holds that private type. Every loop is bounded
/// by the message's counts and length.
pub fn mask_ignored_nsec3(bytes: &[u8]) -> Option<Vec<u8>> {
    let u16_at = |b: &[u8], at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
    };
    let skip_name = |mut at: usize| -> Option<usize> {
        for _ in 0..128 {
            let len = *bytes.get(at)?;
            match len {
                0 => return Some(at + 1),
                l if l & 0xC0 == 0xC0 => return Some(at + 2),
                l if l & 0xC0 == 0 => at += 1 + usize::from(l),
                _ => return None,
            }
        }
        None
    };
    let questions = u16_at(bytes, 4)?;
    let records = [6, 8, 10]
        .iter()
        .map(|&at| u16_at(bytes, at).map(usize::from))
        .sum::<Option<usize>>()?;
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(at)? + 4;
    }
    let mut out = bytes.to_vec();
    let mut masked = false;
    for _ in 0..records {
        at = skip_name(at)?;
        let rtype = u16_at(bytes, at)?;
        let rdlength = usize::from(u16_at(bytes, at + 8)?);
        let rdata = at + 10;
        if rtype == IGNORED_NSEC3 {
            return None;
        }
        if rtype == u16::from(RecordType::NSEC3) && rdlength >= 2 {
            let (algorithm, flags) = (*bytes.get(rdata)?, *bytes.get(rdata + 1)?);
            if algorithm != NSEC3_SHA1 || flags & !1 != 0 {
                out.get_mut(at..at + 2)?
                    .copy_from_slice(&IGNORED_NSEC3.to_be_bytes());
                masked = true;
            }
        }
        at = rdata + rdlength;
    }
    masked.then_some(out)
}

/// The hash algorithm and flags of an NSEC3 record [`mask_ignored_nsec3`] set aside.
pub fn ignored_nsec3(record: &Record) -> Option<(u8, u8)> {
    use hickory_proto::serialize::binary::BinEncodable;
    let RData::Unknown { code, rdata } = &record.data else {
        return None;
    };
    if u16::from(*code) != IGNORED_NSEC3 {
        return None;
    }
    let bytes = rdata.to_bytes().ok()?;
    Some((*bytes.first()?, *bytes.get(1)?))
}

/// What is wrong with a message hickory could not decode, where a walk over its records
/// can tell: a DNSKEY or CDNSKEY whose protocol is not 3 (RFC 4034 section 2.1.2) or whose
/// RDATA is too short to hold its fields. `None` when nothing specific is found. Every
/// loop is bounded by the message's length.
pub fn diagnose(bytes: &[u8]) -> Option<String> {
    let u16_at = |at: usize| -> Option<usize> {
        Some(usize::from(u16::from_be_bytes([
            *bytes.get(at)?,
            *bytes.get(at + 1)?,
        ])))
    };
    // Skips a (possibly compressed) name: the offset just after it.
    let skip_name = |mut at: usize| -> Option<usize> {
        for _ in 0..128 {
            let len = *bytes.get(at)?;
            match len {
                0 => return Some(at + 1),
                l if l & 0xC0 == 0xC0 => return Some(at + 2),
                l if l & 0xC0 == 0 => at += 1 + usize::from(l),
                _ => return None,
            }
        }
        None
    };
    let questions = u16_at(4)?;
    let records = u16_at(6)? + u16_at(8)? + u16_at(10)?;
    let mut at = 12;
    for _ in 0..questions {
        at = skip_name(at)? + 4;
    }
    for _ in 0..records {
        at = skip_name(at)?;
        let rtype = u16_at(at)?;
        let rdlength = u16_at(at + 8)?;
        let rdata = at + 10;
        let name = match RecordType::from(u16::try_from(rtype).ok()?) {
            RecordType::DNSKEY => "DNSKEY",
            RecordType::CDNSKEY => "CDNSKEY",
            _ => {
                at = rdata + rdlength;
                continue;
            }
        };
        if rdlength < 4 {
            return Some(format!(
                "{name} record with {rdlength} octets of RDATA (flags, protocol and algorithm need 4)"
            ));
        }
        let protocol = *bytes.get(rdata + 2)?;
        if protocol != crate::dnssec::PROTOCOL_DNSSEC {
            return Some(format!("{name} with protocol {protocol} (must be 3)"));
        }
        at = rdata + rdlength;
    }
    None
}

/// The DSYNC record type (RFC 9859): where a parent wants generalized notifications.
/// hickory-proto knows no such type and hands its RDATA over as opaque bytes.
pub const DSYNC: u16 = 66;
/// DSYNC scheme 1: notifications are DNS NOTIFY messages (RFC 9859 section 2).
pub const DSYNC_SCHEME_NOTIFY: u8 = 1;
/// DSYNC scheme 0, the null scheme: consumers ignore such records.
pub const DSYNC_SCHEME_NULL: u8 = 0;

/// One DSYNC record's RDATA: for notifications about `rrtype` (CDS 59, CDNSKEY 60,
/// CSYNC 62), send them by `scheme` to `target` at `port`.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Dsync {
    pub rrtype: u16,
    pub scheme: u8,
    pub port: u16,
    /// Lower case with the trailing dot (our textual convention, [`name_text`]).
    pub target: String,
}

/// Why DSYNC RDATA is not a DSYNC record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DsyncError {
    #[error("DSYNC RDATA of {0} octets: RRtype, scheme and port need 5, and a target")]
    Truncated(usize),
    #[error("DSYNC target {0}")]
    BadTarget(&'static str),
    #[error("DSYNC RDATA has {0} octets after its target")]
    Trailing(usize),
}

/// Parses DSYNC RDATA (RFC 9859 section 2.1): RRtype (16 bits), scheme (8), port (16),
/// then the target as an uncompressed domain name, and nothing after it. Strict: a
/// truncated field, a compression pointer, a label of a reserved kind, a name over 255
/// octets or trailing octets make the record malformed, never guessed at.
pub fn parse_dsync(rdata: &[u8]) -> Result<Dsync, DsyncError> {
    let (Some(head), Some(name)) = (rdata.get(..5), rdata.get(5..)) else {
        return Err(DsyncError::Truncated(rdata.len()));
    };
    if name.is_empty() {
        return Err(DsyncError::Truncated(rdata.len()));
    }
    let rrtype = u16::from_be_bytes([head[0], head[1]]);
    let scheme = head[2];
    let port = u16::from_be_bytes([head[3], head[4]]);
    let mut labels: Vec<&[u8]> = Vec::new();
    let mut at = 0usize;
    // Bounded: every turn moves past at least one octet of a name of at most 255.
    loop {
        let Some(&len) = name.get(at) else {
            return Err(DsyncError::BadTarget("is cut short"));
        };
        if len == 0 {
            at += 1;
            break;
        }
        if len & 0xC0 == 0xC0 {
            return Err(DsyncError::BadTarget("is compressed (RFC 9859 forbids it)"));
        }
        if len & 0xC0 != 0 {
            return Err(DsyncError::BadTarget("has a label of a reserved kind"));
        }
        let end = at + 1 + usize::from(len);
        let Some(label) = name.get(at + 1..end) else {
            return Err(DsyncError::BadTarget("is cut short"));
        };
        labels.push(label);
        at = end;
        if at >= 255 {
            return Err(DsyncError::BadTarget("is longer than 255 octets"));
        }
    }
    if at < name.len() {
        return Err(DsyncError::Trailing(name.len() - at));
    }
    let target = if labels.is_empty() {
        Name::root()
    } else {
        Name::from_labels(labels).map_err(|_| DsyncError::BadTarget("is not a domain name"))?
    };
    Ok(Dsync {
        rrtype,
        scheme,
        port,
        target: name_text(&target),
    })
}

/// The RDATA of `record` (for tests and the scripted servers): `None` if its target is
/// not a domain name.
pub fn dsync_rdata(record: &Dsync) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    out.extend_from_slice(&record.rrtype.to_be_bytes());
    out.push(record.scheme);
    out.extend_from_slice(&record.port.to_be_bytes());
    let target = parse_name(&record.target)?;
    for label in target.iter() {
        out.push(u8::try_from(label.len()).ok()?);
        out.extend_from_slice(label);
    }
    out.push(0);
    Some(out)
}

/// The name a DSYNC lookup for `child` asks under `parent` (RFC 9859 section 4.1): the
/// child's labels left of the parent, then `_dsync`, then the parent:
/// `a.b.test.` under `test.` is `a.b._dsync.test.`. `None` if `child` is not below
/// `parent` or the name would not be one.
pub fn dsync_lookup_name(child: &str, parent: &str) -> Option<String> {
    if child == parent || !is_subdomain(child, parent) {
        return None;
    }
    let left = if parent == "." {
        child.trim_end_matches('.')
    } else {
        child.strip_suffix(parent)?.trim_end_matches('.')
    };
    let name = if parent == "." {
        format!("{left}._dsync.")
    } else {
        format!("{left}._dsync.{parent}")
    };
    parse_name(&name).map(|n| name_text(&n))
}

/// Host names as one comparable set: lower case, with the trailing dot, sorted, without
/// duplicates. Names are compared case-insensitively (RFC 4343).
pub fn ns_set<S: AsRef<str>>(hosts: impl IntoIterator<Item = S>) -> Vec<String> {
    sorted_set(hosts.into_iter().map(|h| normal_host(h.as_ref())).collect())
}

/// [`ns_set`] of names already in hand, written in place (a name already in set form is
/// kept, not copied): an observation builds one for every NS answer.
pub fn ns_set_of(mut hosts: Vec<String>) -> Vec<String> {
    for host in &mut hosts {
        if !is_normal_host(host) {
            *host = normal_host(host);
        }
    }
    sorted_set(hosts)
}

/// A host name as [`ns_set`] holds it already.
fn is_normal_host(host: &str) -> bool {
    host.trim().len() == host.len()
        && host.ends_with('.')
        && !host.bytes().any(|b| b.is_ascii_uppercase())
}

/// One host name as [`ns_set`] holds it.
fn normal_host(host: &str) -> String {
    let lower = host.trim().to_ascii_lowercase();
    if lower.ends_with('.') {
        lower
    } else {
        format!("{lower}.")
    }
}

/// Normalized names sorted, once each, without the root.
fn sorted_set(mut hosts: Vec<String>) -> Vec<String> {
    hosts.sort_unstable();
    hosts.dedup();
    hosts.retain(|h| h != ".");
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_helpers() {
        assert_eq!(names_below(".", "a.test."), vec!["test.", "a.test."]);
        assert_eq!(
            names_below("test.", "a.b.test."),
            vec!["b.test.", "a.b.test."]
        );
        assert!(names_below("test.", "test.").is_empty());
        assert!(names_below("other.", "a.test.").is_empty());
        assert_eq!(parent_name("a.test."), "test.");
        assert_eq!(parent_name("test."), ".");
        assert!(is_subdomain("a.test.", "test."));
        assert!(!is_subdomain("atest.", "test."));
        assert_eq!(name_text(&parse_name("A.Test").unwrap()), "a.test.");
        assert_eq!(name_text(&Name::root()), ".");
        assert!(is_subdomain("test.", "."));
        assert!(!is_subdomain("test.", "a.test."));
        let (a, b) = (
            parse_name("WwW.Test").unwrap(),
            parse_name("www.test.").unwrap(),
        );
        assert!(same_name(&a, &b));
        assert!(!same_name(&a, &parse_name("www.test2.").unwrap()));
        assert!(!same_name(&a, &parse_name("test.").unwrap()));
        assert!(same_name(&Name::root(), &Name::root()));
        assert!(!same_name(&Name::root(), &b));
    }

    #[test]
    fn queries_are_encoded_as_hickory_encodes_them() {
        let names = [
            ".",
            "test.",
            "WwW.Example.TEST.",
            "a\\.b.test.",
            "xn--bcher-kva.test.",
            // Longer than a query's inline buffer (QUERY_INLINE): written to the heap.
            "a-label-of-sixty-three-bytes-makes-this-query-longer-than-96-by.example.test.",
        ];
        let types = [
            RecordType::DS,
            RecordType::DNSKEY,
            RecordType::NS,
            RecordType::SOA,
        ];
        for text in names {
            let name = Name::from_ascii(text).unwrap();
            for rtype in types {
                for (rd, cd, ad) in [
                    (false, false, false),
                    (true, true, false),
                    (true, false, true),
                ] {
                    let mut q = build_query(&name, rtype, rd);
                    let spilled = encode_query(&q).unwrap().spilled();
                    assert_eq!(spilled, text.len() > 60, "{text}");
                    q.metadata.checking_disabled = cd;
                    q.metadata.authentic_data = ad;
                    assert_eq!(
                        encode_query(&q).unwrap().as_slice(),
                        q.to_vec().unwrap(),
                        "{text} {rtype} rd={rd} cd={cd} ad={ad}"
                    );
                }
            }
        }
        // Other shapes go through hickory's encoder.
        let mut q = build_query(&Name::root(), RecordType::NS, false);
        q.edns = None;
        assert_eq!(encode_query(&q).unwrap().as_slice(), q.to_vec().unwrap());
    }

    #[test]
    fn query_ids_come_from_a_refilled_pool_and_vary() {
        // Several refills of the pool: the IDs keep changing and spread over the range.
        let ids: Vec<u16> = (0..4 * ID_POOL).map(|_| query_id()).collect();
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert!(
            distinct.len() > ids.len() * 9 / 10,
            "{} distinct",
            distinct.len()
        );
        assert!(ids.iter().any(|&i| i >= 0x8000) && ids.iter().any(|&i| i < 0x8000));
    }

    #[test]
    fn queries_ask_for_dnssec_without_recursion() {
        let q = build_query(&parse_name("x.test.").unwrap(), RecordType::DS, false);
        assert!(!q.metadata.recursion_desired);
        let edns = q.edns.as_ref().unwrap();
        assert!(edns.flags().dnssec_ok);
        assert_eq!(edns.max_payload(), EDNS_PAYLOAD);
    }

    /// `name_is` says what comparing `name_text` would, for plain names, names in upper
    /// case, the root, a wildcard and names with escaped bytes.
    #[test]
    fn name_is_agrees_with_name_text() {
        let mut names: Vec<Name> = [
            "example.test.",
            "EXAMPLE.Test.",
            ".",
            "a-b_c.d1.",
            "*.wild.test.",
            "x.test.",
        ]
        .iter()
        .map(|n| Name::from_ascii(n).unwrap())
        .collect();
        // Bytes that are written escaped.
        for odd in [&b"sp ace"[..], b"dot.ted", b"UP\xff", b"back\\slash"] {
            names.push(Name::from_labels([odd, b"test"]).unwrap());
        }
        let mut texts: Vec<String> = [
            "example.test.",
            "EXAMPLE.test.",
            ".",
            "example.test",
            "example.test..",
            "a-b_c.d1.",
            "*.wild.test.",
            "x.test.",
            "x.test.x.",
            "test.",
            "",
            "sp ace.test.",
            "dot.ted.test.",
        ]
        .map(String::from)
        .to_vec();
        texts.extend(names.iter().map(name_text));
        for name in &names {
            assert!(name_is(name, &name_text(name)), "{name}");
            for t in &texts {
                assert_eq!(name_is(name, t), name_text(name) == *t, "{name} is {t}?");
            }
        }
    }

    /// NSEC3 records of an unknown hash algorithm or unknown flags are set aside, the
    /// usable ones and the rest of the message kept (compressed names included).
    #[test]
    fn nsec3_records_validators_ignore_are_set_aside() {
        use hickory_proto::dnssec::Nsec3HashAlgorithm;
        use hickory_proto::dnssec::rdata::NSEC3;
        use hickory_proto::rr::rdata::NULL;
        use hickory_proto::serialize::binary::BinEncodable;
        let zone = parse_name("test.").unwrap();
        let nsec3 = |opt_out| {
            NSEC3::new(
                Nsec3HashAlgorithm::SHA1,
                opt_out,
                1,
                vec![0xab],
                vec![7; 20],
                vec![RecordType::NS],
            )
        };
        let odd = |patch: fn(&mut Vec<u8>)| {
            let mut bytes = nsec3(false).to_bytes().unwrap();
            patch(&mut bytes);
            RData::Unknown {
                code: RecordType::NSEC3,
                rdata: NULL::with(bytes),
            }
        };
        let owner = |label: &str| zone.prepend_label(label).unwrap();
        let mut m = Message::new(9, MessageType::Response, OpCode::Query);
        m.add_query(Query::query(parse_name("a.test.").unwrap(), RecordType::DS));
        m.add_authority(Record::from_rdata(owner("aa"), 60, odd(|b| b[0] = 2)));
        m.add_authority(Record::from_rdata(
            owner("bb"),
            60,
            RData::DNSSEC(DNSSECRData::NSEC3(nsec3(true))),
        ));
        m.add_authority(Record::from_rdata(owner("cc"), 60, odd(|b| b[1] = 2)));
        let bytes = m.to_vec().unwrap();
        assert!(Message::from_vec(&bytes).is_err(), "hickory reads it now");
        let read = Message::from_vec(&mask_ignored_nsec3(&bytes).expect("masked")).unwrap();
        let ignored: Vec<_> = read.authorities.iter().filter_map(ignored_nsec3).collect();
        assert_eq!(ignored, vec![(2, 0), (1, 2)]);
        let usable = read
            .authorities
            .iter()
            .filter(|r| r.record_type() == RecordType::NSEC3)
            .count();
        assert_eq!(usable, 1);
        assert_eq!(read.authorities[1].name, owner("bb"));
        // Nothing to set aside: left as it is.
        let plain = build_query(&zone, RecordType::DS, false).to_vec().unwrap();
        assert_eq!(mask_ignored_nsec3(&plain), None);
    }

    fn dsync(rrtype: u16, scheme: u8, port: u16, target: &str) -> Dsync {
        Dsync {
            rrtype,
            scheme,
            port,
            target: target.into(),
        }
    }

    #[test]
    fn a_dsync_record_is_read_whole_or_not_at_all() {
        let good = dsync(59, 1, 5359, "notify.registry.test.");
        let bytes = dsync_rdata(&good).unwrap();
        assert_eq!(
            bytes[..5],
            [0, 59, 1, 0x14, 0xef],
            "RRtype, scheme, port in network order"
        );
        assert_eq!(parse_dsync(&bytes), Ok(good.clone()));
        // Upper case in the target is read in our convention.
        let upper = dsync_rdata(&dsync(59, 1, 53, "Notify.REGISTRY.test.")).unwrap();
        assert_eq!(parse_dsync(&upper).unwrap().target, "notify.registry.test.");
        // Scheme 0 and RRtypes we do not act on are still records: what a consumer
        // ignores is decided above, not by the parser.
        let null = dsync(59, 0, 0, "x.test.");
        assert_eq!(parse_dsync(&dsync_rdata(&null).unwrap()), Ok(null));
        let other = dsync(65000, 7, 1, "x.test.");
        assert_eq!(parse_dsync(&dsync_rdata(&other).unwrap()), Ok(other));
        // The root as target is a name.
        assert_eq!(parse_dsync(&[0, 59, 1, 0, 53, 0]).unwrap().target, ".");

        // Truncated anywhere: in the fixed fields, before the target, inside it.
        for cut in 0..bytes.len() {
            assert!(parse_dsync(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(matches!(
            parse_dsync(&bytes[..5]),
            Err(DsyncError::Truncated(5))
        ));
        // Trailing octets.
        let mut long = bytes.clone();
        long.extend_from_slice(&[0, 0]);
        assert_eq!(parse_dsync(&long), Err(DsyncError::Trailing(2)));
        // A compression pointer (to the message's header, say) is no name here.
        assert!(matches!(
            parse_dsync(&[0, 59, 1, 0, 53, 0xC0, 0x0C]),
            Err(DsyncError::BadTarget(why)) if why.contains("compressed")
        ));
        // Reserved label kinds (0x40, 0x80).
        assert!(parse_dsync(&[0, 59, 1, 0, 53, 0x41, b'a', 0]).is_err());
        assert!(parse_dsync(&[0, 59, 1, 0, 53, 0x81, b'a', 0]).is_err());
        // A label running past the end; a name without its terminating root label.
        assert!(parse_dsync(&[0, 59, 1, 0, 53, 5, b'a', b'b', 0]).is_err());
        assert!(parse_dsync(&[0, 59, 1, 0, 53, 1, b'a']).is_err());
        // Longer than 255 octets.
        let mut huge = vec![0, 59, 1, 0, 53];
        for _ in 0..5 {
            huge.push(63);
            huge.extend_from_slice(&[b'a'; 63]);
        }
        huge.push(0);
        assert!(matches!(
            parse_dsync(&huge),
            Err(DsyncError::BadTarget(why)) if why.contains("255")
        ));
        // Garbage of every short length never panics, and is never half-read.
        for len in 0..64usize {
            let noise: Vec<u8> = (0..len)
                .map(|i| (i as u8).wrapping_mul(97) ^ 0xC3)
                .collect();
            let _ = parse_dsync(&noise);
        }
    }

    #[test]
    fn the_dsync_lookup_name_puts_dsync_between_child_and_parent() {
        assert_eq!(
            dsync_lookup_name("a.b.test.", "test.").as_deref(),
            Some("a.b._dsync.test.")
        );
        assert_eq!(
            dsync_lookup_name("child.test.", "test.").as_deref(),
            Some("child._dsync.test.")
        );
        assert_eq!(
            dsync_lookup_name("example.co.uk.", "co.uk.").as_deref(),
            Some("example._dsync.co.uk.")
        );
        assert_eq!(
            dsync_lookup_name("test.", ".").as_deref(),
            Some("test._dsync.")
        );
        assert_eq!(dsync_lookup_name("test.", "test."), None);
        assert_eq!(dsync_lookup_name("other.", "test."), None);
        assert_eq!(dsync_lookup_name("atest.", "test."), None);
    }

    /// 0x20: only the question name's letters change case, and an answer echoing the
    /// sent name byte for byte matches while one in other case does not.
    #[test]
    fn randomised_case_is_echoed_or_caught() {
        let name = parse_name("a1-very.long-label.example.test.").unwrap();
        let wire = encode_query(&build_query(&name, RecordType::DS, false)).unwrap();
        let mut seen_upper = false;
        for _ in 0..16 {
            let mut mixed = wire.clone();
            randomise_case(&mut mixed);
            assert_eq!(mixed.len(), wire.len());
            assert!(mixed.eq_ignore_ascii_case(&wire));
            assert_eq!(mixed[..12], wire[..12], "the header is untouched");
            seen_upper |= mixed != wire;
            let decoded = Message::from_vec(&mixed).unwrap();
            assert!(same_name(decoded.queries[0].name(), &name));
            let mut echo = decoded.clone();
            echo.metadata.message_type = MessageType::Response;
            assert!(
                question_case_matches(&echo, &mixed),
                "the decoder keeps case"
            );
            if mixed != wire {
                assert!(!question_case_matches(&echo, &wire));
            }
        }
        assert!(seen_upper, "16 draws never changed a letter");
    }
}
