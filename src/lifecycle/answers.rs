//! What a machine's look saw at each address, and the judgements over all of them that
//! the signed move and the key rollover share: every address known and agreeing, the
//! addresses that do not, a key's DS and whether a DS set lets validators reach a key.

use crate::dnssec::{DigestType, Dnskey, Ds};

/// One address's answer, or why it gave none (rule 3: unknown never counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer<T> {
    pub address: String,
    pub answer: Result<T, String>,
}

/// Whether every answer is known and satisfies `ok`: `Some(true)` every one does,
/// `Some(false)` a known one does not, `None` none fails but one is unknown (or none).
pub(super) fn every<T>(answers: &[Answer<T>], ok: impl Fn(&T) -> bool) -> Option<bool> {
    if answers.is_empty() {
        return None;
    }
    let mut unknown = false;
    for a in answers {
        match &a.answer {
            Ok(v) if !ok(v) => return Some(false),
            Ok(_) => {}
            Err(_) => unknown = true,
        }
    }
    if unknown { None } else { Some(true) }
}

/// The addresses that do not (or cannot be seen to) satisfy `ok`, for the wait's words.
pub(super) fn failing<T>(answers: &[Answer<T>], ok: impl Fn(&T) -> bool) -> String {
    let names: Vec<String> = answers
        .iter()
        .filter_map(|a| match &a.answer {
            Ok(v) if ok(v) => None,
            Ok(_) => Some(a.address.clone()),
            Err(e) => Some(format!("{} (unknown: {e})", a.address)),
        })
        .collect();
    if names.is_empty() {
        "no address answered".to_string()
    } else {
        names.join(", ")
    }
}

pub(super) fn ds_of(zone: &str, key: &Dnskey) -> Option<Ds> {
    key.to_ds(zone, DigestType::Sha256).ok()
}

/// A DS for `key` that a validator can use (a digest it implements): one it cannot use
/// does not make the key reachable.
pub(super) fn has_ds(zone: &str, set: &[Ds], key: &Dnskey) -> bool {
    set.iter()
        .any(|ds| ds.supported() && key.matches_ds(zone, ds))
}
