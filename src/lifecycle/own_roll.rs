//! A key roll the provider makes on its own (DESIGN.md section 2, "Rolls the provider
//! makes on its own", rule 17): its memory between steps and what one look says of it.
//! `step` decides it (`step::own_roll`), the alert judge reads it; both from here, which
//! names no other machine (the facts hold it).
//!
//! The daemon cannot tell the provider when to swap or retire its keys; it can only keep
//! the parent's DS set from being what breaks the chain: the new key's DS added (the old
//! one kept) once every child address serves the new key, the old DS removed only once
//! no child address serves the old key and no cached DNSKEY set can need it, and a
//! provider that swaps with only the old DS at the parent said at once.

use serde::{Deserialize, Serialize};

use crate::dns::{ChildView, DnskeyAnswer, DsAnswer, ParentView};
use crate::dnssec::{DigestType, Dnskey, Ds, DsLine};
use crate::time::Timestamp;

/// A roll the provider makes on its own, followed by the daemon: the zone is `active`
/// throughout, and its key is the old one until the roll ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderRoll {
    /// The DS (zone-file line) of the key the zone followed before the roll: the DS kept.
    pub old: String,
    /// The provider's new SEP key.
    pub new_key: Dnskey,
    /// Its DS (zone-file line, SHA-256, the old line's TTL): the DS added.
    pub new: String,
    /// When the new key was first seen.
    pub seen_at: Timestamp,
    /// When the new DS was asked for as an addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_asked_at: Option<Timestamp>,
    /// The first look at which every child address served no DNSKEY set holding the old
    /// key (`T_old_gone`), and the last that confirmed it since (a gap of
    /// `confirmation_gap` restarts it, as rule 2's `T_gone`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_gone_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_gone_confirmed_at: Option<Timestamp>,
    /// When the old DS's removal was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_asked_at: Option<Timestamp>,
    /// The first look at which a child address served the new key without the old while
    /// a parent address published no DS for it (`provider_key_swapped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swapped_at: Option<Timestamp>,
    /// The provider went back (the new key gone from every child address, the old one
    /// served everywhere) after the new DS was asked for: since when its removal is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone_back_at: Option<Timestamp>,
    /// The DS (zone-file lines) asked for keys the provider moved on from before they
    /// replaced the old one: removed with the old DS.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<String>,
}

impl ProviderRoll {
    /// A roll of the zone's key `old` (its DS line) to `new_key`, first seen `at`.
    pub fn start(old: &DsLine, new_key: Dnskey, at: Timestamp) -> Option<Self> {
        let ds = new_key.to_ds(&old.owner, DigestType::Sha256).ok()?;
        let new = DsLine {
            owner: old.owner.clone(),
            ttl: old.ttl,
            ds,
        };
        Some(Self {
            old: old.to_string(),
            new_key,
            new: new.to_string(),
            seen_at: at,
            add_asked_at: None,
            old_gone_at: None,
            old_gone_confirmed_at: None,
            remove_asked_at: None,
            swapped_at: None,
            gone_back_at: None,
            stale: Vec::new(),
        })
    }

    /// The DS records the roll removes: the old key's and those of keys the provider
    /// moved on from.
    pub fn leaving_ds(&self) -> Vec<Ds> {
        std::iter::once(&self.old)
            .chain(&self.stale)
            .filter_map(|l| DsLine::parse(l).ok().map(|l| l.ds))
            .collect()
    }

    /// The old key's DS record.
    pub fn old_ds(&self) -> Option<Ds> {
        DsLine::parse(&self.old).ok().map(|l| l.ds)
    }

    /// The DS line of `key`, as the old one is written (its owner and TTL).
    pub fn line_of(&self, key: &Dnskey) -> String {
        match DsLine::parse(&self.old) {
            Ok(old) => match key.to_ds(&old.owner, DigestType::Sha256) {
                Ok(ds) => DsLine {
                    owner: old.owner,
                    ttl: old.ttl,
                    ds,
                }
                .to_string(),
                Err(_) => format!("(the DS of key {})", key.key_tag()),
            },
            Err(_) => format!("(the DS of key {})", key.key_tag()),
        }
    }

    pub fn old_tag(&self) -> u16 {
        self.old_ds().map_or(0, |d| d.key_tag)
    }

    pub fn new_tag(&self) -> u16 {
        self.new_key.key_tag()
    }

    /// The roll's phase in a word, for status and the history.
    pub fn phase(&self) -> &'static str {
        match (self.add_asked_at, self.old_gone_at, self.remove_asked_at) {
            _ if self.gone_back_at.is_some() => "removing_new_ds",
            (None, _, _) => "new_key_propagating",
            (Some(_), _, Some(_)) => "removing_old_ds",
            (Some(_), None, None) => "awaiting_new_ds",
            (Some(_), Some(_), None) => "old_key_gone",
        }
    }

    /// The provider's CDS of its entry points is wanted (rule 14 during the roll): from
    /// the addition on, but between the old key's going and the end of its hold, when
    /// a CDS of the new key alone would have a registry that scans remove the old DS
    /// before cached DNSKEY sets that need it expire.
    pub fn cds_key_wanted(&self) -> bool {
        self.add_asked_at.is_some()
            && (self.old_gone_at.is_none() || self.remove_asked_at.is_some())
    }

    /// Whether an owed registrar request of the roll still stands on it (checked right
    /// before it is sent): the addition of its new DS, or the removal of its old one
    /// once asked. `Err` says why not.
    pub fn request_stands(&self, add: bool, ds_line: &str) -> Result<(), String> {
        let (line, what, asked) = match (add, self.gone_back_at) {
            (true, None) => (
                &self.new,
                "the addition of the new key's DS",
                self.add_asked_at,
            ),
            (false, None) if self.stale.iter().any(|l| l == ds_line) => (
                &self.stale[self.stale.iter().position(|l| l == ds_line).unwrap_or(0)],
                "the removal of a DS the provider moved on from",
                self.remove_asked_at,
            ),
            (false, None) => (
                &self.old,
                "the removal of the old key's DS",
                self.remove_asked_at,
            ),
            (false, Some(at)) if self.stale.iter().any(|l| l == ds_line) => (
                &self.stale[self.stale.iter().position(|l| l == ds_line).unwrap_or(0)],
                "the removal of a DS the provider moved on from",
                Some(at),
            ),
            (false, Some(at)) => (&self.new, "the removal of the new key's DS", Some(at)),
            (true, Some(_)) => (&self.new, "the addition of the new key's DS", None),
        };
        if line == ds_line && asked.is_some() {
            Ok(())
        } else {
            Err(format!(
                "the provider's roll to key {} no longer asks for {what} of {ds_line}",
                self.new_tag()
            ))
        }
    }
}

/// The DS record of `key` under `zone`, as validators compare it.
fn names(zone: &str, ds: &Ds, key: &Dnskey) -> bool {
    key.matches_ds(zone, ds)
}

/// `key` is in the address's DNSKEY set and signs it validly (rule 4's "serves").
pub fn serves_ds(answer: &DnskeyAnswer, zone: &str, ds: &Ds) -> bool {
    match answer {
        DnskeyAnswer::Keys(k) => k
            .keys
            .iter()
            .any(|key| names(zone, ds, key) && k.serves(key)),
        _ => false,
    }
}

/// A SEP zone key some child address holds in its DNSKEY set beside (or instead of) the
/// key `old` names, of the same algorithm where there is one: the provider's new key.
/// Keys served validly signed come first.
pub fn new_sep_key(child: &ChildView, old: &Ds) -> Option<Dnskey> {
    let mut found: Vec<(bool, Dnskey)> = Vec::new();
    for a in &child.answers {
        if let DnskeyAnswer::Keys(k) = &a.answer {
            for key in &k.keys {
                if key.is_sep() && key.is_zone_key() && !names(&child.zone, old, key) {
                    let signed = k.serves(key);
                    if !found.iter().any(|(_, f)| f == key) {
                        found.push((signed, key.clone()));
                    }
                }
            }
        }
    }
    found.sort_by_key(|(signed, key)| (!signed, key.algorithm != old.algorithm, key.key_tag()));
    found.into_iter().next().map(|(_, k)| k)
}

/// How the child addresses stand with the old keys (`old`, their DS): `Some(true)` no address's DNSKEY set
/// holds one (every one answered with keys), `Some(false)` some address's does, `None`
/// neither can be told (an address unknown, or one serving no DNSKEY at all).
pub fn old_gone_everywhere(child: &ChildView, old: &[Ds]) -> Option<bool> {
    if child.answers.is_empty() {
        return None;
    }
    let mut unknown = false;
    for a in &child.answers {
        match &a.answer {
            DnskeyAnswer::Keys(k) => {
                if k.keys
                    .iter()
                    .any(|key| old.iter().any(|ds| names(&child.zone, ds, key)))
                {
                    return Some(false);
                }
            }
            _ => unknown = true,
        }
    }
    if unknown { None } else { Some(true) }
}

/// Every parent address publishes a DS set validators can use that names `key`, and no
/// record of `without`.
pub fn parent_all(parent: &ParentView, key: &Dnskey, without: &[Ds]) -> bool {
    !parent.answers.is_empty()
        && parent.answers.iter().all(|a| match &a.answer {
            DsAnswer::Present { ds, .. } => {
                crate::dnssec::usable_ds(ds)
                    .iter()
                    .any(|d| names(&parent.zone, d, key))
                    && !without.iter().any(|w| ds.contains(w))
            }
            _ => false,
        })
}

/// The provider swapped at once, as this look shows it: a child address whose DNSKEY
/// set the old key does not sign, signed by other SEP keys none of which a parent
/// address's DS set names (only the old DS, or none of the new): resolvers that combine
/// the two fail the zone. The addresses in words, and the key whose DS is missing
/// (`prefer` where it is one of them).
pub fn swapped(
    child: &ChildView,
    parent: &ParentView,
    old: &Ds,
    prefer: Option<&Dnskey>,
) -> Option<Swap> {
    let zone = &child.zone;
    for a in &child.answers {
        let DnskeyAnswer::Keys(k) = &a.answer else {
            continue;
        };
        if serves_ds(&a.answer, zone, old) {
            continue;
        }
        let signing: Vec<&Dnskey> = k
            .keys
            .iter()
            .filter(|key| key.is_sep() && k.serves(key))
            .collect();
        let Some(first) = signing.first() else {
            continue;
        };
        let lacking = parent.answers.iter().find(|p| match &p.answer {
            DsAnswer::Present { ds, .. } => !crate::dnssec::usable_ds(ds)
                .iter()
                .any(|d| signing.iter().any(|key| names(zone, d, key))),
            _ => false,
        });
        if let Some(p) = lacking {
            let key = prefer
                .filter(|want| signing.contains(want))
                .unwrap_or(first);
            return Some(Swap {
                server: format!("{} ({})", a.server, a.addr),
                parent_server: format!("{} ({})", p.server, p.addr),
                key: key.clone(),
            });
        }
    }
    None
}

/// Where a look shows the provider swapped at once, and the key it swapped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swap {
    pub server: String,
    pub parent_server: String,
    pub key: Dnskey,
}
