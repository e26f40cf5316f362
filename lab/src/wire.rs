//! Names and records between the lab's textual convention (lower case, fully qualified)
//! and hickory-proto's types.

use hickory_proto::dnssec::rdata::{DNSKEY, DS};
use hickory_proto::dnssec::{Algorithm, PublicKeyBuf};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};

use crate::dnssec::{Dnskey, Ds};

/// A name in the lab's textual convention: lower case, fully qualified.
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

/// `name` is `ancestor` or below it.
pub fn is_subdomain(name: &str, ancestor: &str) -> bool {
    if ancestor == "." || name == ancestor {
        return true;
    }
    name.len() > ancestor.len()
        && name.ends_with(ancestor)
        && name.as_bytes().get(name.len() - ancestor.len() - 1) == Some(&b'.')
}

/// The parent name of `name` (`.` for a TLD and for the root itself).
pub fn parent_name(name: &str) -> String {
    match name.trim_end_matches('.').split_once('.') {
        Some((_, rest)) => format!("{rest}."),
        None => ".".into(),
    }
}

/// A query with DO=1 and EDNS, e.g. to see whether a server answers yet.
pub fn build_query(qname: &Name, qtype: RecordType, recursion_desired: bool) -> Message {
    let mut message = Message::new(fastrand::u16(..), MessageType::Query, OpCode::Query);
    message.add_query(Query::query(qname.clone(), qtype));
    message.metadata.recursion_desired = recursion_desired;
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    edns.set_dnssec_ok(true);
    message.set_edns(edns);
    message
}

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
