//! Key lifetimes (`[rollover]`, DESIGN.md section 2 "Key rollovers", "Policy"): when the
//! daemon first saw each of a zone's active keys, when the next roll falls due (the key's
//! age past its kind's lifetime, plus the zone's own offset in `spread`), and a roll
//! started when it is due and its account has room under `max_concurrent_per_account`.
//! Pure: the engine hands in the provider's key listing and the rolls in progress at the
//! zone's account; the roll it starts is the one `dnssec-warden roll` declares
//! (`Roll::plan`), taken by the next step through the roll's own look.

use std::time::Duration;

use super::hold::{Hold, Party};
use super::keys::KeyKind;
use super::keys::{KeyAge, NextRoll};
use super::model::{AuditNote, Decision, Zone};
use super::policy::{Policy, RolloverPolicy};
use super::rollover::{ListedKey, Roll, RollTtls};
use super::state::{Intent, State};
use crate::time::Timestamp;

/// The shortest a roll of `kind` can take with the TTLs given (0: unknown, counted as
/// nothing) and the margin: the sum of its method's holds (section 2), registrar and
/// propagation delays not counted. A lifetime shorter than this rolls back to back.
pub fn shortest_roll(kind: KeyKind, dnskey_ttl: u32, ds_ttl: u32, margin: Duration) -> Duration {
    let ttl = |t: u32| Duration::from_secs(u64::from(t)).saturating_add(margin);
    match kind {
        // publishing, swapping (the data's signatures: the DNSKEY TTL stands in for the
        // zone's largest where it is the only one known).
        KeyKind::Zsk => ttl(dnskey_ttl).saturating_mul(2),
        // publishing, awaiting_new_ds, swapping, removing_old_ds.
        KeyKind::Ksk | KeyKind::Csk => ttl(dnskey_ttl)
            .saturating_mul(2)
            .saturating_add(ttl(ds_ttl).saturating_mul(2)),
    }
}

/// The provider's keys for the zone, as one look asked them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyListing {
    /// Not asked at this look (the policy has no lifetime, the zone is not settled).
    NotAsked,
    /// The provider's API exposes no keys (Gcore): no roll is ever scheduled.
    NoKeyApi,
    Listed(Vec<ListedKey>),
    Unknown(String),
}

/// The rolls in progress at the zone's provider account (the zone's own not counted).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccountRolls {
    pub account: Option<String>,
    pub in_progress: u32,
}

/// Whether a look at the zone after `step` decided it should ask for the provider's keys:
/// the policy has a lifetime and the zone stays settled `active`, with no roll (the
/// daemon's or the provider's own) or move.
pub fn wants_keys(zone: &Zone, decision: &Decision, policy: &Policy) -> bool {
    policy.rollover.on()
        && zone.state == Some(State::Active)
        && decision.state == Some(State::Active)
        && zone.intent == Intent::Enabled
        && decision.facts.key_roll.is_none()
        && decision.facts.signed_move.is_none()
        // The provider rolling its key on its own: its keys are in flux, and a daemon's
        // roll would turn off the look that follows it (the listing resumes after).
        && decision.facts.provider_roll.is_none()
}

/// The kind each listed active key plays: a SEP key is a KSK beside an active ZSK, a CSK
/// alone.
fn active_kinds(keys: &[ListedKey]) -> Vec<(KeyKind, &ListedKey)> {
    let signing: Vec<&ListedKey> = keys.iter().filter(|k| k.active && k.published).collect();
    let zsk = signing.iter().any(|k| !k.dnskey.is_sep());
    signing
        .into_iter()
        .map(|k| {
            let kind = match (k.dnskey.is_sep(), zsk) {
                (false, _) => KeyKind::Zsk,
                (true, true) => KeyKind::Ksk,
                (true, false) => KeyKind::Csk,
            };
            (kind, k)
        })
        .collect()
}

/// The zone's active keys with their first sighting: a key seen before keeps its date
/// (found by tag, algorithm and SEP bit; its kind follows the zone's keys), a new one is
/// seen `at`; a key no longer active is forgotten.
pub fn learn(known: &[KeyAge], keys: &[ListedKey], at: Timestamp) -> Vec<KeyAge> {
    active_kinds(keys)
        .into_iter()
        .map(|(kind, k)| {
            let (tag, algorithm) = (k.dnskey.key_tag(), k.dnskey.algorithm);
            let since = known
                .iter()
                .find(|a| a.tag == tag && a.algorithm == algorithm && a.kind.sep() == kind.sep())
                .map_or(at, |a| a.since);
            KeyAge {
                kind,
                tag,
                algorithm,
                since,
            }
        })
        .collect()
}

/// The next roll of the zone: the earliest key past its kind's lifetime and the zone's
/// offset; `None` where no lifetime applies to its keys.
pub fn next_roll(zone: &str, ages: &[KeyAge], policy: &RolloverPolicy) -> Option<NextRoll> {
    let offset = policy.offset(zone);
    ages.iter()
        .filter_map(|a| {
            let lifetime = policy.lifetime(a.kind)?;
            Some(NextRoll {
                kind: a.kind,
                at: a.since.plus(lifetime).plus(offset),
            })
        })
        .min_by_key(|n| n.at)
}

/// The next roll as the zone's facts and this policy say it now (`status`); `None` where
/// no lifetime applies or no key age is known.
pub fn next_roll_of(zone: &Zone, policy: &RolloverPolicy) -> Option<NextRoll> {
    let ages = zone.facts.key_ages.as_ref()?;
    next_roll(zone.name.as_str(), &ages.keys, policy)
}

/// Whether the zone's next roll is due at `at` by what its facts hold: a settled zone's
/// sampled look gives way to a full look, which asks for the keys.
pub fn due(zone: &Zone, at: Timestamp, policy: &Policy) -> bool {
    policy.rollover.on()
        && zone.facts.key_roll.is_none()
        && next_roll_of(zone, &policy.rollover).is_some_and(|n| n.at <= at)
}

/// Whether, with `keys` listed at `at`, a roll is due (the engine then counts the rolls
/// in progress at the account).
pub fn due_with(zone: &Zone, keys: &KeyListing, at: Timestamp, policy: &Policy) -> bool {
    let KeyListing::Listed(keys) = keys else {
        return false;
    };
    let known = zone
        .facts
        .key_ages
        .as_ref()
        .map(|a| a.keys.as_slice())
        .unwrap_or_default();
    let ages = learn(known, keys, at);
    next_roll(zone.name.as_str(), &ages, &policy.rollover).is_some_and(|n| n.at <= at)
}

/// A duration for people: its two largest units (`90d 4h`, `2h 30m`, `45s`).
fn human(d: Duration) -> String {
    let secs = d.as_secs();
    let (days, hours, mins) = (secs / 86_400, secs % 86_400 / 3600, secs % 3600 / 60);
    match (days, hours, mins) {
        (0, 0, 0) => format!("{secs}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, 0) => format!("{h}h"),
        (0, h, m) => format!("{h}h {m}m"),
        (d, 0, _) => format!("{d}d"),
        (d, h, _) => format!("{d}d {h}h"),
    }
}

/// The policy applied to a look `step` decided at `at` (`wants_keys` true): the key ages
/// learnt from `keys`, the next roll computed, and where it is due and the account has
/// room, the roll declared as `dnssec-warden roll` declares it (the zone's facts hold it,
/// the next step takes it). A due roll that cannot start says why in the facts (`status`)
/// and once in the history.
pub fn schedule(
    zone: &Zone,
    mut decision: Decision,
    keys: &KeyListing,
    rolls: &AccountRolls,
    at: Timestamp,
    policy: &Policy,
) -> Decision {
    if !wants_keys(zone, &decision, policy) {
        return decision;
    }
    let name = zone.name.as_str();
    let before = zone.facts.key_ages.clone().unwrap_or_default();
    let mut ages = before.clone();
    let note = |reason: String| AuditNote {
        from: decision.state,
        to: decision.state,
        reason,
    };
    let mut notes = Vec::new();
    let listed = match keys {
        KeyListing::NotAsked | KeyListing::Unknown(_) => None,
        KeyListing::NoKeyApi => {
            let why =
                "the provider's API exposes no keys: [rollover] schedules no roll of this zone";
            // Said once in the history, and in `status` for as long as it holds.
            if before.waiting.as_deref() != Some(why) {
                decision.notes.push(note(format!("{name}: {why}")));
            }
            ages.keys.clear();
            ages.next_roll = None;
            ages.waiting = Some(why.into());
            decision.facts.key_ages = Some(ages);
            return decision;
        }
        KeyListing::Listed(keys) => Some(keys),
    };
    if let Some(keys) = listed {
        ages.keys = learn(&before.keys, keys, at);
        // A lifetime too short for this zone's roll is said once, when the key is first seen.
        for a in ages.keys.iter().filter(|a| !before.keys.contains(a)) {
            let Some(lifetime) = policy.rollover.lifetime(a.kind) else {
                continue;
            };
            let facts = &decision.facts.lifecycle;
            let ds = facts
                .max_ds_ttl
                .unwrap_or(u32::try_from(policy.assumed_ds_ttl.as_secs()).unwrap_or(u32::MAX));
            let shortest = shortest_roll(
                a.kind,
                facts.max_dnskey_ttl.unwrap_or(0),
                ds,
                policy.propagation_margin,
            );
            if lifetime < shortest {
                notes.push(note(format!(
                    "{name}: rollover.{} ({}) is shorter than a roll of this zone takes with its TTLs (at least {}): its rolls will follow each other back to back",
                    a.kind.name(),
                    human(lifetime),
                    human(shortest)
                )));
            }
        }
    }
    ages.next_roll = next_roll(name, &ages.keys, &policy.rollover);
    let due = ages.next_roll.filter(|n| n.at <= at);
    // A look that could not list the keys leaves the wait as it was (said once).
    if listed.is_some() {
        ages.waiting = None;
    }
    if let (Some(due), Some(keys)) = (due, listed) {
        let age = ages
            .keys
            .iter()
            .filter(|a| a.kind == due.kind)
            .map(|a| a.since)
            .min()
            .map_or_else(|| "unknown".to_string(), |since| human(at.since(since)));
        let cap = policy.rollover.max_concurrent_per_account;
        let refused = if rolls.in_progress >= cap {
            Err(format!(
                "the {} roll due since {} waits: {} roll(s) in progress at {} (rollover.max_concurrent_per_account = {cap})",
                due.kind.name(),
                due.at,
                rolls.in_progress,
                rolls
                    .account
                    .as_deref()
                    .map_or("the zone's account".to_string(), |a| format!(
                        "provider {a}"
                    ))
            ))
        } else {
            Roll::plan(keys, due.kind, None, at).map_err(|e| {
                format!(
                    "the {} roll due since {} cannot be planned: {e}",
                    due.kind.name(),
                    due.at
                )
            })
        };
        match refused {
            Ok(roll) => {
                let facts = &decision.facts.lifecycle;
                let roll = roll.seeded(RollTtls {
                    dnskey: facts.max_dnskey_ttl.unwrap_or(0),
                    ds: facts.max_ds_ttl.unwrap_or(0),
                    zone: 0,
                });
                notes.push(note(format!(
                    "scheduled by policy, key age {age} (rollover.{} = {}{}): key rollover declared ({}, algorithm {}, retiring key {})",
                    due.kind.name(),
                    policy
                        .rollover
                        .lifetime(due.kind)
                        .map_or_else(String::new, human),
                    match policy.rollover.offset(name) {
                        d if d.is_zero() => String::new(),
                        d => format!(", spread offset {}", human(d)),
                    },
                    roll.method.name(),
                    roll.algorithm,
                    roll.old
                        .iter()
                        .filter_map(|k| k.dnskey.as_ref())
                        .map(|k| k.key_tag().to_string())
                        .collect::<Vec<_>>()
                        .join(" and ")
                )));
                decision.facts.key_roll = Some(roll);
                decision.facts.wait.held_by = Some(Hold::new(
                    "the daemon's first look at the key rollover",
                    Party::Daemon,
                ));
                decision.facts.wait.held_since = Some(at);
                decision.wake_at = decision.wake_at.min(at);
                ages.next_roll = None;
            }
            Err(why) => {
                if before.waiting.is_none() {
                    notes.push(note(format!("{name}: {why}")));
                }
                ages.waiting = Some(why);
            }
        }
    }
    decision.facts.key_ages = Some(ages);
    decision.notes.extend(notes);
    decision
}

/// A roll ended at `at`: the keys it leaves signing are as old as its end (an undone roll
/// counts its old keys' age again from there, so the policy does not start it at once).
pub fn rolled(facts: &mut super::facts::Facts, roll: &Roll, at: Timestamp) {
    let Some(ages) = facts.key_ages.as_mut() else {
        return;
    };
    let is = |a: &KeyAge, key: &super::rollover::RollKey| {
        key.dnskey.as_ref().is_some_and(|d| {
            d.key_tag() == a.tag && d.algorithm == a.algorithm && a.kind.sep() == key.kind.sep()
        })
    };
    // The keys it retired are gone, and those it leaves signing counted anew.
    ages.keys
        .retain(|a| !roll.old.iter().chain(&roll.new).any(|k| is(a, k)));
    for k in &roll.new {
        let Some(key) = &k.dnskey else { continue };
        let (tag, algorithm) = (key.key_tag(), key.algorithm);
        ages.keys.push(KeyAge {
            kind: k.kind,
            tag,
            algorithm,
            since: at,
        });
    }
    ages.waiting = None;
    ages.next_roll = None;
}
