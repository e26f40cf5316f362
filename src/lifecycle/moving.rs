//! A zone in a signed move, stepped (DESIGN.md section 2, "Signed moves", rule 15): what
//! the engine saw through both accounts ([`MoveSeen`]) in, the step's [`Decision`] out.
//! The planner (`signed_move::step`) decides the phase; this makes its outcome a step of
//! the zone like any other: the zone stays `active` with the move in its facts, the wait
//! and its party in `held_by`, a note per phase, lateness judged (rule 11), the alert,
//! the effects as outbox rows, and the move's end. Pure, as `step` is.

use super::hold::{Hold, Party};
use super::model::{AlertCheck, AuditNote, Decision, Effect, MoveCall, MoveRequest, Zone};
use super::policy::Policy;
use super::signed_move::{
    self, Instruction, Move, MoveDecision, MoveEffect, MoveLook, MovePolicy, Phase, Side,
};
use crate::alert_kind::AlertKind;
use crate::dnssec::{DigestType, Dnskey, DnssecKey, Ds, DsLine};
use crate::time::Timestamp;

/// What one step of a moving zone saw (the engine's look, I/O only).
#[derive(Debug, Clone)]
pub enum MoveSeen {
    /// No look could be made: why, and who must act for one to be made (the planner's
    /// phase alone would not tell: an account that cannot be asked is the provider's),
    /// and the account it is about, where it is one.
    Held {
        why: String,
        on: Party,
        account: Option<String>,
    },
    /// The move is `done` and the source no longer lists the zone: the target's key as it
    /// answers now, or why it could not be read.
    SourceGone {
        target_key: Result<DnssecKey, String>,
    },
    /// A look at both accounts (`engine::move_look`) and the target's apex NS (what the
    /// registrar is asked to delegate to).
    Looked {
        look: MoveLook,
        target_ns: Vec<String>,
    },
}

/// One step of a zone whose facts hold `mv`, at `at`. `move_policy` carries the gap
/// between looks beyond which a hold restarts (the engine's poll and its longest step).
pub fn decide(
    zone: &Zone,
    mv: &Move,
    seen: &MoveSeen,
    at: Timestamp,
    policy: &Policy,
    move_policy: &MovePolicy,
) -> Decision {
    let (planned, account, target_ns) = match seen {
        MoveSeen::Held { why, on, account } => {
            (held(mv, why.clone(), *on), account.clone(), &[][..])
        }
        MoveSeen::SourceGone {
            target_key: Ok(key),
        } => return ended(zone, mv, key, at),
        MoveSeen::SourceGone { target_key: Err(e) } => {
            let why = format!("the move's end: provider {}: {e}", mv.target);
            let planned = held(mv, why, Party::Provider);
            (planned, Some(mv.target.clone()), &[][..])
        }
        MoveSeen::Looked { look, target_ns } => {
            let mut planned = signed_move::step(mv, look, move_policy);
            if planned.next.phase == Phase::Done {
                planned.waiting = format!(
                    "the operator to delete the zone at provider {} (DNSSEC is off there and nothing delegates to it); the move ends once only provider {} lists it",
                    mv.source, mv.target
                );
            }
            let account = planned.side.map(|side| account_of(mv, side).to_string());
            (planned, account, target_ns.as_slice())
        }
    };
    stepped(
        zone,
        mv,
        &planned,
        account,
        target_ns,
        at,
        policy,
        move_policy,
    )
}

/// The account of a move's side.
fn account_of(mv: &Move, side: Side) -> &str {
    match side {
        Side::Source => &mv.source,
        Side::Target => &mv.target,
    }
}

/// The decision a move's step commits: the zone's state unchanged, the move in its facts,
/// its wait in `held_by` (on its party, and the account it is on), a note per phase, its
/// alert folded into one (`signed_move_held`), lateness (`wait_stalled`), its effects as
/// outbox rows.
#[allow(clippy::too_many_arguments)]
fn stepped(
    zone: &Zone,
    mv: &Move,
    planned: &MoveDecision,
    account: Option<String>,
    target_ns: &[String],
    now: Timestamp,
    policy: &Policy,
    move_policy: &MovePolicy,
) -> Decision {
    let mut facts = zone.facts.clone();
    facts.signed_move = Some(planned.next.clone());
    // Something holds a move until it ends; `held_since` counts from its phase's start,
    // so that a phase that lasts is said.
    if planned.next.phase != mv.phase || facts.wait.held_by.is_none() {
        facts.wait.held_since = Some(now);
    }
    let since = *facts.wait.held_since.get_or_insert(now);
    let on_account = account
        .as_deref()
        .map(|a| format!(" (on provider {a})"))
        .unwrap_or_default();
    facts.wait.held_by = Some(Hold::new(planned.waiting.clone(), planned.on).at(account));
    let mut notes = Vec::new();
    if planned.next.phase != mv.phase {
        notes.push(AuditNote {
            from: zone.state,
            to: zone.state,
            reason: format!(
                "signed move from provider {} to {}: {} -> {}; waiting for {}",
                mv.source,
                mv.target,
                mv.phase.name(),
                planned.next.phase.name(),
                planned.waiting
            ),
        });
    }
    let alert = if planned.alerts.is_empty() {
        AlertCheck::clear(AlertKind::SignedMoveHeld)
    } else {
        AlertCheck::firing(AlertKind::SignedMoveHeld, planned.alerts.join("; "))
    };
    let (from, late) = late_from(&planned.next, since, policy, move_policy);
    let stalled = match late {
        late if now.since(from) > late => AlertCheck::firing(
            AlertKind::WaitStalled,
            format!(
                "{}: the signed move has been in {} since {since}, waiting for {}{on_account}",
                mv.zone,
                planned.next.phase.name(),
                planned.waiting
            ),
        ),
        _ => AlertCheck::clear(AlertKind::WaitStalled),
    };
    let effects = planned
        .effects
        .iter()
        .filter_map(|e| effect_row(&planned.next, e, target_ns))
        .collect();
    Decision {
        state: zone.state,
        facts,
        effects,
        alerts: vec![alert, stalled],
        notes,
        wake_at: now.plus(policy.poll_waiting),
    }
}

/// Rule 11: a wait that does not end by itself is said: from when, and after how long. A
/// phase waiting on the registrar or the operator is late after `ds_overdue_after` from
/// its start; any other after its own hold and `observation_failing_after` (a hold that
/// keeps restarting). A registrar's phase whose change the parent confirmed waits on its
/// own hold from then, so that the DS TTL waited out after a timely registrar is not
/// counted against the registrar.
fn late_from(
    mv: &Move,
    since: Timestamp,
    policy: &Policy,
    move_policy: &MovePolicy,
) -> (Timestamp, std::time::Duration) {
    let own = || signed_move::phase_hold(mv, move_policy) + policy.observation_failing_after;
    match (mv.phase, mv.confirmed_at) {
        (Phase::AwaitingBothDs | Phase::AwaitingOldDsRemoval, Some(confirmed)) => {
            (confirmed, own())
        }
        (
            Phase::AwaitingBothDs
            | Phase::AwaitingDelegation
            | Phase::AwaitingOldDsRemoval
            | Phase::Done,
            _,
        ) => (since, policy.ds_overdue_after),
        _ => (since, own()),
    }
}

/// A planner's effect as an outbox row; the NS change only with the target's name
/// servers known.
fn effect_row(mv: &Move, effect: &MoveEffect, target_ns: &[String]) -> Option<Effect> {
    let account = |side: Side| account_of(mv, side).to_string();
    let line = |ds: &Ds| {
        DsLine {
            owner: mv.zone.clone(),
            ttl: mv.ttls.ds.max(1),
            ds: ds.clone(),
        }
        .to_string()
    };
    Some(match effect {
        MoveEffect::TargetDnssecOn => Effect::MoveCall {
            account: account(Side::Target),
            call: MoveCall::DnssecOn,
        },
        MoveEffect::SourceDnssecOff => Effect::MoveCall {
            account: account(Side::Source),
            call: MoveCall::DnssecOff,
        },
        MoveEffect::CdsOff { side } => Effect::MoveCall {
            account: account(*side),
            call: MoveCall::CdsOff,
        },
        MoveEffect::SetForeign { side, keys } => Effect::MoveCall {
            account: account(*side),
            call: MoveCall::ForeignKeys {
                keys: keys.clone(),
                ttl: mv.ttls.dnskey.max(1),
            },
        },
        MoveEffect::Registrar(Instruction::AddDs { add, keep }) => Effect::MoveRequest {
            request: MoveRequest::AddDs {
                ds_line: line(add),
                keep: line(keep),
            },
        },
        MoveEffect::Registrar(Instruction::RemoveDs { remove, keep }) => Effect::MoveRequest {
            request: MoveRequest::RemoveDs {
                ds_line: line(remove),
                keep: line(keep),
            },
        },
        MoveEffect::Registrar(Instruction::ChangeNs) if target_ns.is_empty() => return None,
        MoveEffect::Registrar(Instruction::ChangeNs) => Effect::MoveRequest {
            request: MoveRequest::ChangeNs {
                name_servers: target_ns.to_vec(),
            },
        },
    })
}

/// The move is over: the zone is the target's alone, with the facts of an `active` zone
/// there (the next step's look reads the rest afresh). `key`: the target's key now.
fn ended(zone: &Zone, mv: &Move, key: &DnssecKey, now: Timestamp) -> Decision {
    let mut facts = zone.facts.clone();
    facts.signed_move = None;
    facts.wait.held_by = None;
    facts.wait.held_since = None;
    facts.routine.settled_view = None;
    facts.routine.served_keys_when_asked = None;
    facts.delegation.provider_ns = None;
    facts.delegation.delegated_at = mv.delegated_at;
    // The key as the lifecycle follows it: the DS line of the key the move had the parent
    // publish, in the form `step` computes (so a key the target rolled to since is a key
    // change to `step`, announced in the safe order, and the parent's DS no longer
    // matching it is `step`'s alert to raise).
    let rolled_since = mv.target_key.as_ref().filter(|k| **k != key.dnskey);
    let ds = match rolled_since {
        // Rolled since: the moved key's DS, in the provider's digest.
        Some(moved) => moved_ds(moved, key).unwrap_or_else(|| key.ds.clone()),
        None => key.ds.clone(),
    };
    facts.lifecycle.ds_line = Some(
        DsLine {
            owner: key.zone.clone(),
            ttl: key.ds_ttl,
            ds,
        }
        .to_string(),
    );
    // The largest TTLs seen bound later waits (rule 2): the move's count too.
    let larger = |known: Option<u32>, seen: u32| known.max(Some(seen).filter(|t| *t > 0));
    facts.lifecycle.max_dnskey_ttl = larger(facts.lifecycle.max_dnskey_ttl, mv.ttls.dnskey);
    facts.lifecycle.max_ds_ttl = larger(facts.lifecycle.max_ds_ttl, mv.ttls.ds);
    facts.lifecycle.ds_to_enter = None;
    facts.lifecycle.dnskey_to_enter = None;
    // A target that rolled since may sign with a key the parent has no DS for: the move's
    // alert stays until the zone's own look speaks for the key (`alerts::judge` clears it
    // in the judgement that raises the provider's roll's), never a moment with neither.
    let mut alerts = vec![AlertCheck::clear(AlertKind::WaitStalled)];
    if rolled_since.is_none() {
        alerts.insert(0, AlertCheck::clear(AlertKind::SignedMoveHeld));
    }
    Decision {
        state: zone.state,
        facts,
        effects: Vec::new(),
        alerts,
        notes: vec![AuditNote {
            from: zone.state,
            to: zone.state,
            reason: format!(
                "signed move from provider {} to {} ended: the zone is at provider {} only",
                mv.source, mv.target, mv.target
            ),
        }],
        wake_at: now,
    }
}

/// The DS of the key the move had the parent publish, in the digest the target uses.
fn moved_ds(moved: &Dnskey, key: &DnssecKey) -> Option<Ds> {
    let digest = DigestType::from_code(key.ds.digest_type).ok()?;
    moved.to_ds(&key.zone, digest).ok()
}

/// A decision that only says what holds the move (no look could be made); `on` names the
/// party. What only a person can repair is alerted.
fn held(mv: &Move, why: String, on: Party) -> MoveDecision {
    let alerts = if on == Party::Operator {
        vec![format!("{}: {why}", mv.zone)]
    } else {
        Vec::new()
    };
    MoveDecision {
        next: mv.clone(),
        effects: Vec::new(),
        waiting: why,
        on,
        side: None,
        alerts,
    }
}

/// The account that serves the zone to resolvers, as `status` and the console name the
/// zone's provider: the source until the delegation to the target is confirmed. (A wait
/// names the account it is on in its own `Hold::account`.)
pub fn serving_account(mv: &Move) -> &str {
    if mv.phase >= Phase::OldDelegationWait {
        &mv.target
    } else {
        &mv.source
    }
}

/// Whether a move's call of unknown outcome took, by what `look` saw at the account it
/// was sent to (rule 11); `None` when the look could not tell.
pub fn call_took(mv: &Move, account: &str, call: &MoveCall, look: &MoveLook) -> Option<bool> {
    let side = if account == mv.source {
        Side::Source
    } else {
        Side::Target
    };
    let (key, foreign) = match side {
        Side::Source => (&look.source_key, &look.source_foreign),
        Side::Target => (&look.target_key, &look.target_foreign),
    };
    match call {
        MoveCall::DnssecOn => key.as_ref().ok().map(Option::is_some),
        MoveCall::DnssecOff => key.as_ref().ok().map(Option::is_none),
        MoveCall::ForeignKeys { keys, .. } => foreign
            .as_ref()
            .ok()
            .map(|now| now.len() == keys.len() && keys.iter().all(|k| now.contains(k))),
        MoveCall::CdsOff => look
            .cds_published
            .as_ref()
            .ok()
            .map(|sides| !sides.contains(&side)),
    }
}

/// Whether an owed request of a move is sent now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stands {
    Yes,
    /// Not now: the move holds on what a person must repair.
    Later,
    /// Never: the move went on without it (why).
    No(String),
}

/// Whether an owed request still stands on the move as the last step committed it
/// (`mv`, `held_by`): a crash or a failing hook left it owed while the move went on, and
/// a request sent late could break what the move now waits on (an NS change after a roll
/// at the target, the source's DS removed while a parent delegates to the source again).
pub fn request_stands(mv: Option<&Move>, held_by: Option<&Hold>, request: &MoveRequest) -> Stands {
    let Some(mv) = mv else {
        return Stands::No("the zone is not in a signed move any more".into());
    };
    // Held on what only a person can repair: sent once it is repaired, if the phase
    // still wants it.
    if held_by.map(|h| h.on) == Some(Party::Operator) {
        return Stands::Later;
    }
    let line_of = |key: Option<&Dnskey>| {
        key.and_then(|k| k.to_ds(&mv.zone, DigestType::Sha256).ok())
            .map(|ds| ds.to_string())
    };
    let names =
        |ds_line: &str, key: Option<&Dnskey>| line_of(key).is_some_and(|ds| ds_line.ends_with(&ds));
    let (phase, wanted) = match request {
        MoveRequest::AddDs { ds_line, .. } => {
            if !names(ds_line, mv.target_key.as_ref()) {
                return Stands::No("it names a key the target no longer signs with".into());
            }
            (Phase::AwaitingBothDs, mv.phase == Phase::AwaitingBothDs)
        }
        MoveRequest::ChangeNs { .. } => (
            Phase::AwaitingDelegation,
            mv.phase == Phase::AwaitingDelegation,
        ),
        // The removal of a DS the target no longer signs with stands in any phase before
        // the NS change (nothing signs with that key); the source's only in its own phase.
        MoveRequest::RemoveDs { ds_line, .. } => {
            if names(ds_line, Some(&mv.source_key)) {
                (
                    Phase::AwaitingOldDsRemoval,
                    mv.phase == Phase::AwaitingOldDsRemoval,
                )
            } else if names(ds_line, mv.target_key.as_ref()) {
                return Stands::No("it names the key the target signs with".into());
            } else {
                (Phase::ExchangingKeys, true)
            }
        }
    };
    if wanted {
        Stands::Yes
    } else {
        Stands::No(format!(
            "the move is in {}, and the request belongs to {}",
            mv.phase.name(),
            phase.name()
        ))
    }
}
