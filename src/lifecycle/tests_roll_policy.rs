//! `[rollover]`'s schedule (`roll_policy`): key ages learnt from the listing, a roll
//! started once a key is past its lifetime and the zone's spread offset, never over the
//! account's cap, the same dates after a restart (the facts as stored), and old stored
//! facts read without the new fields.

use std::time::Duration;

use super::facts::Facts;
use super::keys::{KeyAge, KeyAges};
use super::model::{Decision, Zone};
use super::policy::{Policy, RolloverPolicy};
use super::roll_policy::{AccountRolls, KeyListing, next_roll, rolled, schedule};
use super::rollover::{KeyKind, ListedKey, Method, Phase};
use super::state::{Intent, State};
use super::tests::zone;
use crate::dnssec::Dnskey;
use crate::time::Timestamp;

const T0: Timestamp = Timestamp(1_800_000_000_000);
const DAY: Duration = Duration::from_secs(86_400);

fn key(n: u8, sep: bool) -> Dnskey {
    let mut public_key = vec![0u8; 64];
    public_key[0] = n;
    Dnskey {
        flags: if sep { 257 } else { 256 },
        protocol: 3,
        algorithm: 13,
        public_key,
    }
}

fn listed(keys: &[(u8, bool)]) -> Vec<ListedKey> {
    keys.iter()
        .map(|&(n, sep)| ListedKey {
            id: n.to_string(),
            dnskey: key(n, sep),
            active: true,
            published: true,
        })
        .collect()
}

fn policy(rollover: RolloverPolicy) -> Policy {
    Policy {
        rollover,
        ..Policy::default()
    }
}

fn csk_30d() -> RolloverPolicy {
    RolloverPolicy {
        csk: Some(30 * DAY),
        ..RolloverPolicy::default()
    }
}

fn active() -> Zone {
    zone(Some(State::Active), Intent::Enabled)
}

/// What `step` decides for a settled active zone: nothing changes.
fn quiet(zone: &Zone, at: Timestamp) -> Decision {
    Decision {
        state: zone.state,
        facts: zone.facts.clone(),
        effects: Vec::new(),
        alerts: Vec::new(),
        notes: Vec::new(),
        wake_at: at.plus(Duration::from_secs(3600)),
    }
}

fn look(zone: &Zone, keys: &KeyListing, rolls: u32, at: Timestamp, policy: &Policy) -> Decision {
    let rolls = AccountRolls {
        account: Some("pdns".into()),
        in_progress: rolls,
    };
    schedule(zone, quiet(zone, at), keys, &rolls, at, policy)
}

/// The zone after a decision committed.
fn after(zone: &Zone, d: &Decision) -> Zone {
    Zone {
        facts: d.facts.clone(),
        state: d.state,
        ..zone.clone()
    }
}

#[test]
fn a_key_past_its_lifetime_starts_the_roll_dnssec_warden_roll_would() {
    let policy = policy(csk_30d());
    let keys = KeyListing::Listed(listed(&[(1, true)]));
    let mut z = active();
    // First seen now: its age counts from here.
    let d = look(&z, &keys, 0, T0, &policy);
    assert!(d.facts.key_roll.is_none());
    let ages = d.facts.key_ages.clone().expect("key ages kept");
    assert_eq!(ages.keys.len(), 1);
    assert_eq!(ages.keys[0].kind, KeyKind::Csk);
    assert_eq!(ages.keys[0].since, T0);
    assert_eq!(ages.next_roll.map(|n| n.at), Some(T0.plus(30 * DAY)));
    z = after(&z, &d);
    // A day before: not yet, and the first sighting is kept.
    let d = look(&z, &keys, 0, T0.plus(29 * DAY), &policy);
    assert!(d.facts.key_roll.is_none());
    assert!(d.notes.is_empty(), "{:?}", d.notes);
    z = after(&z, &d);
    // Due: the roll `roll` would declare, taken by the next step.
    let at = T0.plus(30 * DAY);
    let d = look(&z, &keys, 0, at, &policy);
    let roll = d.facts.key_roll.as_ref().expect("a roll started");
    assert_eq!(roll.method, Method::DoubleDs);
    assert_eq!(roll.phase, Phase::Publishing);
    assert_eq!(roll.old[0].kind, KeyKind::Csk);
    assert_eq!(d.wake_at, at);
    assert!(d.facts.wait.held_by.is_some());
    let note = &d.notes[0].reason;
    assert!(
        note.starts_with("scheduled by policy, key age 30d (rollover.csk = 30d)"),
        "{note}"
    );
}

#[test]
fn each_kind_rolls_by_its_own_lifetime() {
    let policy = policy(RolloverPolicy {
        zsk: Some(30 * DAY),
        ksk: Some(365 * DAY),
        ..RolloverPolicy::default()
    });
    let keys = KeyListing::Listed(listed(&[(1, true), (2, false)]));
    let z = after(&active(), &look(&active(), &keys, 0, T0, &policy));
    let next = z.facts.key_ages.as_ref().and_then(|a| a.next_roll);
    assert_eq!(next.map(|n| n.kind), Some(KeyKind::Zsk));
    let d = look(&z, &keys, 0, T0.plus(30 * DAY), &policy);
    let roll = d.facts.key_roll.expect("the ZSK's roll");
    assert_eq!(roll.method, Method::ZskPrePublish);
    // No lifetime for a kind: never due by it.
    let only_zsk = policy.rollover.clone();
    let ages = [KeyAge {
        kind: KeyKind::Ksk,
        tag: 1,
        algorithm: 13,
        since: T0,
    }];
    assert_eq!(
        next_roll(
            "z.",
            &ages,
            &RolloverPolicy {
                ksk: None,
                ..only_zsk
            }
        ),
        None
    );
}

#[test]
fn the_spread_offset_is_the_zones_own_and_survives_a_restart() {
    let spread = RolloverPolicy {
        spread: 7 * DAY,
        ..csk_30d()
    };
    let mut offsets = std::collections::HashSet::new();
    for i in 0..50 {
        let name = format!("zone{i}.example.");
        let offset = spread.offset(&name);
        assert!(offset < 7 * DAY, "{name}: {offset:?}");
        // Another policy built the same (a restart) gives the same offset.
        assert_eq!(spread.clone().offset(&name), offset);
        offsets.insert(offset);
    }
    assert!(offsets.len() > 40, "zones due together are spread");
    // The facts as stored, read back after a restart: the same next roll.
    let policy = policy(spread);
    let keys = KeyListing::Listed(listed(&[(1, true)]));
    let d = look(&active(), &keys, 0, T0, &policy);
    let next = d.facts.key_ages.as_ref().and_then(|a| a.next_roll);
    let offset = policy.rollover.offset(active().name.as_str());
    assert_eq!(next.map(|n| n.at), Some(T0.plus(30 * DAY).plus(offset)));
    let stored = serde_json::to_string(&d.facts).unwrap();
    let read: Facts = serde_json::from_str(&stored).unwrap();
    assert_eq!(read, d.facts);
    let z = Zone {
        facts: read,
        ..active()
    };
    let later = T0.plus(3 * DAY);
    let d = look(&z, &keys, 0, later, &policy);
    assert_eq!(d.facts.key_ages.and_then(|a| a.next_roll), next);
    // Due only past its offset.
    if !offset.is_zero() {
        let before = Timestamp(T0.plus(30 * DAY).plus(offset).0 - 1);
        assert!(look(&z, &keys, 0, before, &policy).facts.key_roll.is_none());
    }
    let due = T0.plus(30 * DAY).plus(offset);
    assert!(look(&z, &keys, 0, due, &policy).facts.key_roll.is_some());
}

#[test]
fn a_due_roll_waits_while_its_account_is_at_the_cap() {
    let policy = policy(RolloverPolicy {
        max_concurrent_per_account: 2,
        ..csk_30d()
    });
    let keys = KeyListing::Listed(listed(&[(1, true)]));
    let z = after(&active(), &look(&active(), &keys, 0, T0, &policy));
    let at = T0.plus(31 * DAY);
    let d = look(&z, &keys, 2, at, &policy);
    assert!(d.facts.key_roll.is_none(), "over the cap");
    let waiting = d.facts.key_ages.as_ref().and_then(|a| a.waiting.clone());
    let waiting = waiting.expect("status says why");
    assert!(
        waiting.contains("2 roll(s) in progress at provider pdns")
            && waiting.contains("max_concurrent_per_account = 2"),
        "{waiting}"
    );
    assert_eq!(d.notes.len(), 1, "said once in the history");
    // A look whose listing failed keeps the wait as it was.
    let z = after(&z, &d);
    let d = look(&z, &KeyListing::Unknown("timeout".into()), 3, at, &policy);
    assert!(d.notes.is_empty(), "{:?}", d.notes);
    assert_eq!(
        d.facts.key_ages.as_ref().and_then(|a| a.waiting.as_deref()),
        Some(waiting.as_str())
    );
    // Still waiting: said again in the facts, not in the history.
    let z = after(&z, &d);
    let d = look(&z, &keys, 3, at.plus(DAY), &policy);
    assert!(d.facts.key_roll.is_none());
    assert!(d.notes.is_empty(), "{:?}", d.notes);
    // Room again: it starts, and the wait is gone.
    let z = after(&z, &d);
    let d = look(&z, &keys, 1, at.plus(2 * DAY), &policy);
    assert!(d.facts.key_roll.is_some());
    assert_eq!(d.facts.key_ages.and_then(|a| a.waiting), None);
}

#[test]
fn nothing_is_scheduled_without_keys_or_outside_a_settled_active_zone() {
    let policy = policy(csk_30d());
    let long_ago = KeyAges {
        keys: vec![KeyAge {
            kind: KeyKind::Csk,
            tag: key(1, true).key_tag(),
            algorithm: 13,
            since: T0,
        }],
        ..KeyAges::default()
    };
    let mut z = active();
    z.facts.key_ages = Some(long_ago.clone());
    let at = T0.plus(60 * DAY);
    // The listing failed: nothing can be planned.
    let d = look(&z, &KeyListing::Unknown("timeout".into()), 0, at, &policy);
    assert!(d.facts.key_roll.is_none());
    assert_eq!(
        d.facts.key_ages.as_ref().map(|a| &a.keys),
        Some(&long_ago.keys)
    );
    // A provider without a key API: never, and said in the facts.
    let d = look(&z, &KeyListing::NoKeyApi, 0, at, &policy);
    assert!(d.facts.key_roll.is_none());
    let ages = d.facts.key_ages.expect("kept");
    assert!(ages.waiting.is_some_and(|w| w.contains("exposes no keys")));
    assert_eq!(ages.next_roll, None);
    // Not active, not enabled, or no lifetime: left alone.
    let keys = KeyListing::Listed(listed(&[(1, true)]));
    for (state, intent, p) in [
        (State::AwaitingDs, Intent::Enabled, policy.clone()),
        (State::Active, Intent::None, policy.clone()),
        (State::Active, Intent::Enabled, Policy::default()),
    ] {
        let mut z = zone(Some(state), intent);
        z.facts.key_ages = Some(long_ago.clone());
        let d = look(&z, &keys, 0, at, &p);
        assert!(d.facts.key_roll.is_none(), "{state:?} {intent:?}");
        assert_eq!(d.facts.key_ages, Some(long_ago.clone()));
    }
}

#[test]
fn a_due_roll_waits_while_the_provider_rolls_on_its_own() {
    use super::own_roll::ProviderRoll;
    let policy = policy(csk_30d());
    let mut z = active();
    z.facts.key_ages = Some(KeyAges {
        keys: vec![KeyAge {
            kind: KeyKind::Csk,
            tag: key(1, true).key_tag(),
            algorithm: 13,
            since: T0,
        }],
        ..KeyAges::default()
    });
    let old = crate::dnssec::DsLine {
        owner: z.name.to_string(),
        ttl: 3600,
        ds: key(1, true)
            .to_ds(z.name.as_str(), crate::dnssec::DigestType::Sha256)
            .expect("a test key's DS"),
    };
    z.facts.provider_roll = ProviderRoll::start(&old, key(2, true), T0);
    assert!(z.facts.provider_roll.is_some());
    let keys = KeyListing::Listed(listed(&[(1, true), (2, true)]));
    let d = look(&z, &keys, 0, T0.plus(60 * DAY), &policy);
    assert!(d.facts.key_roll.is_none(), "{:?}", d.notes);
    assert_eq!(d.facts.key_ages, z.facts.key_ages);
    // Once the provider's roll is over, the schedule looks again.
    z.facts.provider_roll = None;
    let d = look(&z, &keys, 0, T0.plus(60 * DAY), &policy);
    assert!(d.facts.key_ages != z.facts.key_ages);
}

#[test]
fn old_stored_facts_read_without_key_ages() {
    // A row written before the policy existed.
    let old = r#"{"ds_line":"z. 3600 IN DS 1 13 2 AA","max_dnskey_ttl":3600}"#;
    let facts: Facts = serde_json::from_str(old).unwrap();
    assert_eq!(facts.key_ages, None);
    // A key_ages object of an earlier shape (no next_roll, no waiting) reads too.
    let partial = r#"{"key_ages":{"keys":[{"kind":"csk","tag":7,"algorithm":13,"since":5}]}}"#;
    let facts: Facts = serde_json::from_str(partial).unwrap();
    let ages = facts.key_ages.expect("read");
    assert_eq!(ages.keys[0].since, Timestamp(5));
    assert_eq!(ages.next_roll, None);
    // And nothing is written for a zone the policy never saw.
    let text = serde_json::to_string(&Facts::default()).unwrap();
    assert!(!text.contains("key_ages"), "{text}");
}

#[test]
fn a_roll_ending_counts_the_keys_it_leaves_from_its_end() {
    let policy = policy(csk_30d());
    let keys = listed(&[(1, true)]);
    let z = after(
        &active(),
        &look(&active(), &KeyListing::Listed(keys.clone()), 0, T0, &policy),
    );
    let mut roll = super::rollover::Roll::plan(&keys, KeyKind::Csk, None, T0).unwrap();
    roll.new[0].dnskey = Some(key(9, true));
    let mut facts = z.facts.clone();
    let end = T0.plus(33 * DAY);
    rolled(&mut facts, &roll, end);
    let ages = facts.key_ages.expect("kept");
    assert_eq!(ages.keys.len(), 1, "{:?}", ages.keys);
    assert_eq!(ages.keys[0].tag, key(9, true).key_tag());
    assert_eq!(ages.keys[0].since, end);
    // An undone roll: the old key's age counts from the end, so it is not rolled at once.
    let mut facts = z.facts.clone();
    let mut undone = roll.clone();
    std::mem::swap(&mut undone.old, &mut undone.new);
    undone.aborted = true;
    rolled(&mut facts, &undone, end);
    let ages = facts.key_ages.expect("kept");
    assert_eq!(ages.keys[0].tag, key(1, true).key_tag());
    assert_eq!(ages.keys[0].since, end);
}
