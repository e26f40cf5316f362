//! A zone in a key rollover, stepped (DESIGN.md section 2, "Key rollovers", rule 16): what
//! the engine saw ([`RollSeen`]) in, the step's [`Decision`] out. The machine
//! (`rollover::decide`) decides the phase; this makes its outcome a step of the zone like
//! any other: the zone's state unchanged with the roll in its facts, the wait and its
//! party in `held_by`, a note per phase, lateness (rule 11), the alert, the effects as
//! outbox rows, and the roll's end. Pure, as `step` is.

use super::facts::Facts;
use super::hold::{Hold, Party};
use super::model::{AlertCheck, AuditNote, Decision, Effect, RollRequest, Zone};
use super::parent_way::{DsPath, NotifyPlan, ParentPath};
use super::policy::Policy;
use super::rollover::{
    self, DsRequest, DsVia, ListedKey, Method, Phase, Roll, RollEffect, RollPolicy, RollSeen,
    RollWait,
};
use crate::alert_kind::AlertKind;
use crate::dnssec::{DigestType, Ds, DsLine};
use crate::time::Timestamp;

/// One step of a zone whose facts hold `roll`, at `at`, with the roll's timings
/// `roll_policy` (`Policy::roll_policy`, its confirmation gap widened by the engine for a
/// look's own length); an abort the operator recorded on the roll is decided here, once.
pub fn decide(
    zone: &Zone,
    roll: &Roll,
    seen: &RollSeen,
    at: Timestamp,
    policy: &Policy,
    roll_policy: &RollPolicy,
) -> Decision {
    let name = zone.name.as_str();
    let roll = &with_parent_way(roll, zone.facts.parent_way.ds_path.as_ref());
    let decided = rollover::decide(name, roll, seen, at, roll_policy, false);
    let mut facts = zone.facts.clone();
    let notes = decided
        .notes
        .iter()
        .map(|reason| AuditNote {
            from: zone.state,
            to: zone.state,
            reason: reason.clone(),
        })
        .collect::<Vec<_>>();
    let effects: Vec<Effect> = decided
        .effects
        .iter()
        .filter_map(|e| effect_row(name, &decided.next, e, facts.parent_way.ds_path.as_ref()))
        .collect();
    if decided.next.phase == Phase::Done {
        let mut effects = effects;
        // Rule 14 of the steady zone, set by the step that ends a roll by the CDS (a
        // settled zone's look does not read the setting). A roll that withdrew the CDS
        // publishes its keys': its last look saw every child address serve them and every
        // parent address their DS, which `ds_to_enter` may not say (a settled zone's
        // sampled look leaves it unset), and the registry then has nothing to change.
        let steady = if decided.next.via == DsVia::RegistrarCdsWithdrawn
            && zone.intent == super::state::Intent::Enabled
            && zone.state == Some(super::state::State::Active)
        {
            crate::dnssec::CdsPublication::Key
        } else {
            super::rules::cds_wanted(zone.intent, zone.state, &facts.lifecycle)
        };
        if decided.next.via.sets_cds() && seen.cds.is_some_and(|now| now != steady) {
            effects.push(Effect::SetCds { to: steady });
        }
        return ended(zone, facts, &decided.next, notes, effects, at);
    }
    if decided.next.phase != roll.phase || facts.wait.held_by.is_none() {
        facts.wait.held_since = Some(at);
    }
    let since = *facts.wait.held_since.get_or_insert(at);
    facts.wait.held_by =
        Some(Hold::new(decided.wait.what.clone(), decided.wait.on).until(decided.wait.until));
    facts.key_roll = Some(decided.next.clone());
    let held = if decided.alerts.is_empty() {
        AlertCheck::clear(AlertKind::KeyRollHeld)
    } else {
        AlertCheck::firing(AlertKind::KeyRollHeld, decided.alerts.join("; "))
    };
    let stalled = match late_after(&decided.wait, since, policy) {
        Some(late) if at > late => AlertCheck::firing(
            AlertKind::WaitStalled,
            format!(
                "{name}: the {} roll has been in {} since {since}, waiting for {}",
                decided.next.method.name(),
                decided.next.phase.name(),
                decided.wait.what
            ),
        ),
        _ => AlertCheck::clear(AlertKind::WaitStalled),
    };
    Decision {
        state: zone.state,
        facts,
        effects,
        alerts: vec![held, stalled],
        notes,
        // A TTL's hold ending before the next poll is looked at when it ends.
        wake_at: match decided.wait.until {
            Some(until) if until > at => until.min(at.plus(policy.poll_waiting)),
            _ => at.plus(policy.poll_waiting),
        },
    }
}

/// Rule 11: a wait that does not end by itself is said. A TTL's hold is late once it is
/// `observation_failing_after` past its end (a hold that keeps restarting); a wait on the
/// registrar, the registry or a person after `ds_overdue_after`; any other after
/// `observation_failing_after`, all from when the wait began.
fn late_after(wait: &RollWait, since: Timestamp, policy: &Policy) -> Option<Timestamp> {
    match wait.on {
        Party::Ttl => Some(
            wait.until
                .unwrap_or(since)
                .plus(policy.observation_failing_after),
        ),
        Party::Registrar | Party::Registry | Party::Operator => {
            Some(since.plus(policy.ds_overdue_after))
        }
        Party::Nobody => None,
        _ => Some(since.plus(policy.observation_failing_after)),
    }
}

/// The roll is done: the facts of a zone that signs with the new keys (the lifecycle
/// follows the new SEP key's DS from here), the roll's TTLs kept as the largest seen.
fn ended(
    zone: &Zone,
    mut facts: Facts,
    roll: &Roll,
    mut notes: Vec<AuditNote>,
    effects: Vec<Effect>,
    at: Timestamp,
) -> Decision {
    facts.key_roll = None;
    super::roll_policy::rolled(&mut facts, roll, at);
    facts.wait.held_by = None;
    facts.wait.held_since = None;
    // What a settled zone's sample is held to names the old keys.
    facts.routine.settled_view = None;
    facts.routine.served_keys_when_asked = None;
    let larger = |known: Option<u32>, seen: u32| known.max(Some(seen).filter(|t| *t > 0));
    facts.lifecycle.max_dnskey_ttl = larger(facts.lifecycle.max_dnskey_ttl, roll.ttls.dnskey);
    facts.lifecycle.max_ds_ttl = larger(facts.lifecycle.max_ds_ttl, roll.ttls.ds);
    if let Some(line) = followed_ds_line(zone, roll) {
        facts.lifecycle.ds_line = Some(line);
    }
    notes.push(AuditNote {
        from: zone.state,
        to: zone.state,
        reason: format!(
            "{}: the {} roll {}",
            zone.name,
            roll.method.name(),
            if roll.aborted {
                "was undone: the zone signs with its old keys"
            } else {
                "is done: the zone signs with its new keys"
            }
        ),
    });
    Decision {
        state: zone.state,
        facts,
        effects,
        alerts: vec![
            AlertCheck::clear(AlertKind::KeyRollHeld),
            AlertCheck::clear(AlertKind::WaitStalled),
        ],
        notes,
        wake_at: at,
    }
}

/// The DS line the lifecycle follows after the roll: the SEP key the roll leaves signing
/// (the new one, or the old one where the roll was undone), in the digest of the line it
/// followed before (SHA-256 where none); `None` where the roll did not change the SEP key.
fn followed_ds_line(zone: &Zone, roll: &Roll) -> Option<String> {
    // Going back, `old` and `new` were exchanged: `new` is what signs now either way.
    let key = roll
        .new
        .iter()
        .find(|k| k.kind.sep())
        .and_then(|k| k.dnskey.clone())?;
    let before = zone.facts.lifecycle.ds_line.as_deref();
    let digest = before
        .and_then(|l| DsLine::parse(l).ok())
        .and_then(|l| DigestType::from_code(l.ds.digest_type).ok())
        .unwrap_or(DigestType::Sha256);
    let ttl = before
        .and_then(|l| DsLine::parse(l).ok())
        .map_or(roll.ttls.ds, |l| l.ttl);
    let ds = key.to_ds(zone.name.as_str(), digest).ok()?;
    Some(
        DsLine {
            owner: zone.name.to_string(),
            ttl: ttl.max(1),
            ds,
        }
        .to_string(),
    )
}

/// The roll with the way its parent takes the DS, from the zone's parent way (the path
/// last resolved): fixed while a double-DS roll is still in `publishing`, where no DS
/// change was asked yet; kept as it is after. A scanning or notified registry takes it
/// from the CDS; the registrar otherwise. An algorithm roll (whose CDS variant is not
/// built) goes by the registrar, and where a registry scans, with the CDS withdrawn from
/// its first phase, before any new key is added, to its end.
pub fn with_parent_way(roll: &Roll, path: Option<&ParentPath>) -> Roll {
    let mut roll = roll.clone();
    let scanned = matches!(
        path.map(|p| &p.path),
        Some(DsPath::CdsScan | DsPath::Notify { .. })
    );
    if roll.method == Method::DoubleDs && roll.phase == Phase::Publishing && !roll.aborted {
        roll.via = match path.map(|p| &p.path) {
            Some(DsPath::CdsScan) => DsVia::CdsScan,
            Some(DsPath::Notify { .. }) => DsVia::CdsNotify,
            _ => DsVia::Registrar,
        };
    }
    if roll.method == Method::Algorithm && roll.phase == Phase::SigningUnpublished && !roll.aborted
    {
        roll.via = if scanned {
            DsVia::RegistrarCdsWithdrawn
        } else {
            DsVia::Registrar
        };
    }
    roll
}

/// A roll's effect as an outbox row; `None` for a NOTIFY(CDS) where the parent names no
/// target with an address (its registry's scan finds the CDS on its own).
fn effect_row(
    zone: &str,
    roll: &Roll,
    effect: &RollEffect,
    path: Option<&ParentPath>,
) -> Option<Effect> {
    let line = |ds: &Ds| {
        DsLine {
            owner: zone.to_string(),
            ttl: roll.ttls.ds.max(1),
            ds: ds.clone(),
        }
        .to_string()
    };
    Some(match effect {
        RollEffect::SetCds(to) => Effect::SetCds { to: *to },
        RollEffect::NotifyCds { signal } => match path.map(|p| &p.path) {
            Some(DsPath::Notify {
                target,
                port,
                addrs,
            }) if !addrs.is_empty() => Effect::NotifyCds(NotifyPlan {
                target: target.clone(),
                port: *port,
                addrs: addrs.clone(),
                signal: signal.clone(),
            }),
            _ => return None,
        },
        RollEffect::AddKey {
            kind,
            algorithm,
            active,
            published,
        } => Effect::AddKey {
            kind: *kind,
            algorithm: *algorithm,
            active: *active,
            published: *published,
        },
        RollEffect::SetKey {
            id,
            active,
            published,
        } => Effect::SetKeyState {
            id: id.clone(),
            active: *active,
            published: *published,
        },
        RollEffect::DeleteKey { id } => Effect::DeleteKey { id: id.clone() },
        RollEffect::Registrar(DsRequest::AddDs { add, keep }) => Effect::RollRequest {
            request: RollRequest::AddDs {
                ds_line: line(add),
                keep: line(keep),
            },
        },
        RollEffect::Registrar(DsRequest::RemoveDs { remove, keep }) => Effect::RollRequest {
            request: RollRequest::RemoveDs {
                ds_line: line(remove),
                keep: line(keep),
            },
        },
    })
}

/// Whether an owed registrar request of a roll is sent now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stands {
    Yes,
    /// Not now: the roll holds on what a person must repair.
    Later,
    /// Never: the roll went on without it (why).
    No(String),
}

/// Whether a key call of unknown outcome took, by the listing (rule 11); `None` when the
/// listing cannot tell. An addition took when the listing holds a key of its kind and
/// algorithm that the roll does not know yet.
pub fn key_call_took(roll: &Roll, effect: &Effect, keys: &[ListedKey]) -> Option<bool> {
    let known = |id: &str| {
        roll.old
            .iter()
            .chain(&roll.new)
            .chain(&roll.others)
            .any(|k| k.id.as_deref() == Some(id))
    };
    match effect {
        Effect::AddKey {
            kind, algorithm, ..
        } => Some(keys.iter().any(|l| {
            !known(&l.id) && l.dnskey.algorithm == *algorithm && l.dnskey.is_sep() == kind.sep()
        })),
        Effect::SetKeyState {
            id,
            active,
            published,
        } => Some(
            keys.iter()
                .any(|l| &l.id == id && l.active == *active && l.published == *published),
        ),
        Effect::DeleteKey { id } => Some(!keys.iter().any(|l| &l.id == id)),
        _ => None,
    }
}

/// Whether an owed request still stands on the roll as the last step committed it (a
/// crash or a failing hook left it owed while the roll went on or was aborted: an "add"
/// sent once the roll went back would put a DS for a key about to go at the parent).
pub fn request_stands(
    roll: Option<&Roll>,
    held_by: Option<&Hold>,
    request: &RollRequest,
) -> Stands {
    let Some(roll) = roll else {
        return Stands::No("the zone is not in a key rollover any more".into());
    };
    if held_by.map(|h| h.on) == Some(Party::Operator) {
        return Stands::Later;
    }
    let (belongs, ds_line) = match request {
        RollRequest::AddDs { ds_line, .. } => (Phase::AwaitingNewDs, ds_line),
        RollRequest::RemoveDs { ds_line, .. } => (Phase::RemovingOldDs, ds_line),
    };
    // The key the request names is still the one the phase adds (or removes).
    let side = match request {
        RollRequest::AddDs { .. } => &roll.new,
        RollRequest::RemoveDs { .. } => &roll.old,
    };
    let names = side
        .iter()
        .filter(|k| k.kind.sep())
        .filter_map(|k| k.dnskey.as_ref())
        .filter_map(|k| k.to_ds(&roll_zone(ds_line), DigestType::Sha256).ok())
        .any(|ds| ds_line.ends_with(&ds.to_string()));
    if roll.phase == belongs && names {
        Stands::Yes
    } else {
        Stands::No(format!(
            "the roll is in {}{}, and the request belongs to {}",
            roll.phase.name(),
            if roll.aborted { " (going back)" } else { "" },
            belongs.name()
        ))
    }
}

/// The owner of a DS zone-file line.
fn roll_zone(line: &str) -> String {
    line.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}
