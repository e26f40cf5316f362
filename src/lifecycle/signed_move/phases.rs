//! The phases' own work: the table (`advance`), one function per phase, and what
//! several phases check (the exchange, the overlap, a delegation that returned).

use super::{
    ChildSeen, Delegation, Instruction, Move, MoveEffect, MoveLook, MovePolicy, ParentSeen, Phase,
    Side, Wait, ds_of, ds_ttl, every, failing, has_ds, hold_until, old_ns_ttl, source_may_go_off,
};
use crate::dnssec::Dnskey;
use crate::lifecycle::hold::Party;

/// The phase's own work; returns what the move waits for, and on whom. The phase table:
/// one function per phase, in the order of the move.
pub(super) fn advance(
    mv: &mut Move,
    look: &MoveLook,
    policy: &MovePolicy,
    effects: &mut Vec<MoveEffect>,
    alerts: &mut Vec<String>,
) -> Wait {
    match mv.phase {
        Phase::SigningAtTarget => signing_at_target(mv, look, effects, alerts),
        Phase::ExchangingKeys => exchanging_keys(mv, look, policy, effects),
        Phase::AwaitingBothDs => awaiting_both_ds(mv, look, policy, effects),
        Phase::AwaitingDelegation => awaiting_delegation(mv, look, policy, alerts),
        Phase::OldDelegationWait => old_delegation_wait(mv, look, policy, effects, alerts),
        Phase::AwaitingOldDsRemoval => awaiting_old_ds_removal(mv, look, policy, alerts),
        Phase::RetiringOldKey => retiring_old_key(mv, look, policy, alerts),
        Phase::OldSigningOff => match delegation_returned(&mv.zone, look, alerts) {
            Some(back) => back,
            None => old_signing_off(mv, look, policy, effects),
        },
        Phase::Done => done(),
    }
}

/// `signing_at_target`: the target switched on and signing with the source's algorithm,
/// every target name server serving its key, self-signed; then the keys are exchanged.
fn signing_at_target(
    mv: &mut Move,
    look: &MoveLook,
    effects: &mut Vec<MoveEffect>,
    alerts: &mut Vec<String>,
) -> Wait {
    let zone = mv.zone.clone();
    let ks = mv.source_key.clone();
    let kt = match &look.target_key {
        Err(e) => {
            return Wait::account(
                Side::Target,
                format!("the target account (its signing key unknown: {e})"),
            );
        }
        Ok(None) => {
            effects.push(MoveEffect::TargetDnssecOn);
            return Wait::account(Side::Target, "the target account to sign the zone");
        }
        Ok(Some(kt)) => kt.clone(),
    };
    if kt.algorithm != ks.algorithm {
        alerts.push(format!(
            "{zone}: the target signs with algorithm {} and the source with {}: a signed move needs one algorithm (RFC 6840 5.11)",
            kt.algorithm, ks.algorithm
        ));
        return Wait::account(
            Side::Target,
            "the target to sign with the source's algorithm",
        );
    }
    mv.target_key = Some(kt.clone());
    let served = |s: &ChildSeen| s.keys.contains(&kt) && s.signed_by.contains(&kt);
    match every(&look.target_children, served) {
        Some(true) => {
            mv.enter(Phase::ExchangingKeys);
            Wait::accounts(None, "the two accounts to publish each other's key")
        }
        _ => Wait::account(
            Side::Target,
            format!(
                "the target's name servers to serve key {}, self-signed: {}",
                kt.key_tag(),
                failing(&look.target_children, served)
            ),
        ),
    }
}

/// `exchanging_keys`: each account publishes the other's key; once every name server of
/// both serves both, held for the DNSKEY TTL, and no account publishes CDS, the
/// registrar is asked to add the target's DS.
fn exchanging_keys(
    mv: &mut Move,
    look: &MoveLook,
    policy: &MovePolicy,
    effects: &mut Vec<MoveEffect>,
) -> Wait {
    let now = look.at;
    let zone = mv.zone.clone();
    let ks = mv.source_key.clone();
    let Some(kt) = mv.target_key.clone() else {
        mv.enter(Phase::SigningAtTarget);
        return Wait::account(Side::Target, "the target account to sign the zone");
    };
    let (ok_s, ok_t) = exchanged(look, &ks, &kt);
    let holds = ok_s.zip(ok_t).map(|(a, b)| a && b);
    if let Err(waits) = mv.confirmed_and_held(
        now,
        holds,
        mv.ttls.dnskey,
        policy,
        || {
            Wait::accounts(
                exchange_side(look, &ks, &kt),
                format!(
                    "every name server of both accounts to serve keys {} and {}, each signed by its own: {}",
                    ks.key_tag(),
                    kt.key_tag(),
                    exchange_failing(look, &ks, &kt),
                ),
            )
        },
        || format!("DNSKEY sets without key {}", kt.key_tag()),
    ) {
        return waits;
    }
    if exchange(look, &ks, &kt) != Some(true) {
        return Wait::accounts(
            exchange_side(look, &ks, &kt),
            format!(
                "a look confirming the exchange: {}",
                exchange_failing(look, &ks, &kt)
            ),
        );
    }
    match &look.cds_published {
        Ok(sides) if sides.is_empty() => {}
        Ok(sides) => {
            let names: Vec<&str> = sides.iter().map(|s| s.name()).collect();
            return Wait::accounts(
                match sides.as_slice() {
                    [one] => Some(*one),
                    _ => None,
                },
                format!(
                    "the {} account to withdraw its CDS/CDNSKEY before the target's DS is asked for (a registry that scans would replace the DS set)",
                    names.join(" and ")
                ),
            );
        }
        Err(e) => {
            return Wait::accounts(
                None,
                format!("the accounts' CDS publication (unknown: {e})"),
            );
        }
    }
    let (Some(add), Some(keep)) = (ds_of(&zone, &kt), ds_of(&zone, &ks)) else {
        return Wait::accounts(None, "a DS that can be computed");
    };
    mv.enter(Phase::AwaitingBothDs);
    mv.ds_asked_for = Some(kt);
    effects.push(MoveEffect::Registrar(Instruction::AddDs { add, keep }));
    Wait::registrar("the registrar to add the target's DS beside the source's")
}

/// `awaiting_both_ds`: both DS at every parent address, validated, held for the DS TTL;
/// then, on a look confirming the exchange, the NS change.
fn awaiting_both_ds(
    mv: &mut Move,
    look: &MoveLook,
    policy: &MovePolicy,
    effects: &mut Vec<MoveEffect>,
) -> Wait {
    let now = look.at;
    let zone = mv.zone.clone();
    let ks = mv.source_key.clone();
    let Some(kt) = mv.target_key.clone() else {
        mv.enter(Phase::SigningAtTarget);
        return Wait::account(Side::Target, "the target account to sign the zone");
    };
    if let Some(back) = keys_lost_before_ns(mv, look, &ks, &kt) {
        return back;
    }
    let both =
        |p: &ParentSeen| p.validated && has_ds(&zone, &p.ds, &ks) && has_ds(&zone, &p.ds, &kt);
    if let Err(waits) = mv.confirmed_and_held(
        now,
        every(&look.parents, both),
        ds_ttl(mv, policy),
        policy,
        || {
            Wait::registrar(format!(
                "the registrar: every parent server to publish DS {} and DS {}, validated: {}",
                ks.key_tag(),
                kt.key_tag(),
                failing(&look.parents, both),
            ))
        },
        || format!("DS sets without DS {}", kt.key_tag()),
    ) {
        return waits;
    }
    // The NS change sends resolvers to the target: only on a look at which both
    // accounts and every name server of both confirm the exchange (rule 3).
    if exchange(look, &ks, &kt) != Some(true) {
        return Wait::accounts(
            exchange_side(look, &ks, &kt),
            format!(
                "a look confirming the exchange before the NS change: {}",
                exchange_failing(look, &ks, &kt)
            ),
        );
    }
    mv.enter(Phase::AwaitingDelegation);
    effects.push(MoveEffect::Registrar(Instruction::ChangeNs));
    Wait::registrar("the registrar to change the NS to the target's name servers")
}

/// `awaiting_delegation`: every parent address delegates to the target, validated
/// (`T_delegated`), while the overlap stands.
fn awaiting_delegation(
    mv: &mut Move,
    look: &MoveLook,
    policy: &MovePolicy,
    alerts: &mut Vec<String>,
) -> Wait {
    let now = look.at;
    let ks = mv.source_key.clone();
    let Some(kt) = mv.target_key.clone() else {
        return Wait::account(Side::Target, "the target's key (lost)");
    };
    if let Some(broken) = overlap_broken(mv, look, &ks, &kt, alerts) {
        return broken;
    }
    let moved = |p: &ParentSeen| p.validated && p.delegation == Delegation::Target;
    match every(&look.parents, moved) {
        Some(true) => {
            mv.enter(Phase::OldDelegationWait);
            mv.delegated_at = Some(now);
            mv.confirmed_at = Some(now);
            Wait::ttl(format!(
                "resolvers to forget the source's delegation (until {})",
                hold_until(now, old_ns_ttl(mv, policy), policy)
            ))
        }
        _ => Wait::registrar(format!(
            "the registrar: every parent server to delegate to the target's name servers: {}",
            failing(&look.parents, moved)
        )),
    }
}

/// `old_delegation_wait`: the source's delegation waited out (rule 9); then the
/// registrar is asked to remove the source's DS.
fn old_delegation_wait(
    mv: &mut Move,
    look: &MoveLook,
    policy: &MovePolicy,
    effects: &mut Vec<MoveEffect>,
    alerts: &mut Vec<String>,
) -> Wait {
    let now = look.at;
    let zone = mv.zone.clone();
    let ks = mv.source_key.clone();
    let Some(kt) = mv.target_key.clone() else {
        return Wait::account(Side::Target, "the target's key (lost)");
    };
    if let Some(broken) = overlap_broken(mv, look, &ks, &kt, alerts) {
        return broken;
    }
    let moved = |p: &ParentSeen| p.delegation == Delegation::Target;
    if every(&look.parents, moved) == Some(false) {
        // A parent server delegates to the source again: the hold starts over
        // from the next look that sees the target everywhere.
        mv.enter(Phase::AwaitingDelegation);
        mv.delegated_at = None;
        return Wait::registrar(format!(
            "the registrar: every parent server to delegate to the target's name servers again: {}",
            failing(&look.parents, moved)
        ));
    }
    let Some(delegated) = mv.delegated_at else {
        mv.enter(Phase::AwaitingDelegation);
        return Wait::registrar("the delegation to the target to be confirmed");
    };
    let until = hold_until(delegated, old_ns_ttl(mv, policy), policy);
    if now < until {
        return Wait::ttl(format!(
            "resolvers to forget the source's delegation (until {until})"
        ));
    }
    // Removing DS(Ks) fails whoever is still sent to the source: every parent
    // address must be seen delegating to the target at this look (rule 3).
    let validated = |p: &ParentSeen| p.validated && p.delegation == Delegation::Target;
    if every(&look.parents, validated) != Some(true) {
        return Wait::ttl(format!(
            "every parent server seen delegating to the target, validated, before the source's DS goes: {}",
            failing(&look.parents, validated)
        ));
    }
    let (Some(remove), Some(keep)) = (ds_of(&zone, &ks), ds_of(&zone, &kt)) else {
        return Wait::ttl("a DS that can be computed");
    };
    mv.enter(Phase::AwaitingOldDsRemoval);
    effects.push(MoveEffect::Registrar(Instruction::RemoveDs {
        remove,
        keep,
    }));
    Wait::registrar("the registrar to remove the source's DS")
}

/// `awaiting_old_ds_removal`: only the target's DS at every parent address, validated,
/// held for the DS TTL; then the source's key retires at the target.
fn awaiting_old_ds_removal(
    mv: &mut Move,
    look: &MoveLook,
    policy: &MovePolicy,
    alerts: &mut Vec<String>,
) -> Wait {
    let now = look.at;
    let zone = mv.zone.clone();
    let ks = mv.source_key.clone();
    let Some(kt) = mv.target_key.clone() else {
        return Wait::account(Side::Target, "the target's key (lost)");
    };
    if let Some(back) = delegation_returned(&zone, look, alerts) {
        return back;
    }
    let kept = |p: &ParentSeen| has_ds(&zone, &p.ds, &kt);
    if every(&look.parents, kept) == Some(false) {
        alerts.push(format!(
            "{zone}: a parent server no longer publishes DS {} of the target's key: validating resolvers fail the zone; enter it again at the registrar: {}",
            kt.key_tag(),
            failing(&look.parents, kept)
        ));
    }
    let gone = |p: &ParentSeen| {
        p.validated
            && p.delegation == Delegation::Target
            && has_ds(&zone, &p.ds, &kt)
            && !has_ds(&zone, &p.ds, &ks)
    };
    if let Err(waits) = mv.confirmed_and_held(
        now,
        every(&look.parents, gone),
        ds_ttl(mv, policy),
        policy,
        || {
            Wait::registrar(format!(
                "the registrar: every parent server to drop DS {} and keep DS {}, validated: {}",
                ks.key_tag(),
                kt.key_tag(),
                failing(&look.parents, gone),
            ))
        },
        || format!("DS sets with DS {}", ks.key_tag()),
    ) {
        return waits;
    }
    mv.enter(Phase::RetiringOldKey);
    Wait::account(
        Side::Target,
        format!(
            "the target's name servers to stop serving key {}",
            ks.key_tag()
        ),
    )
}

/// `retiring_old_key`: the target's name servers serve its key without the source's,
/// held for the DNSKEY TTL; then the source stops signing.
fn retiring_old_key(
    mv: &mut Move,
    look: &MoveLook,
    policy: &MovePolicy,
    alerts: &mut Vec<String>,
) -> Wait {
    let now = look.at;
    let zone = mv.zone.clone();
    let ks = mv.source_key.clone();
    let Some(kt) = mv.target_key.clone() else {
        return Wait::account(Side::Target, "the target's key (lost)");
    };
    if let Some(back) = delegation_returned(&zone, look, alerts) {
        return back;
    }
    let retired = |s: &ChildSeen| s.signed_by.contains(&kt) && !s.keys.contains(&ks);
    if let Err(waits) = mv.confirmed_and_held(
        now,
        every(&look.target_children, retired),
        mv.ttls.dnskey,
        policy,
        || {
            Wait::account(
                Side::Target,
                format!(
                    "the target's name servers to serve key {} without key {}: {}",
                    kt.key_tag(),
                    ks.key_tag(),
                    failing(&look.target_children, retired)
                ),
            )
        },
        || format!("DNSKEY sets with key {}", ks.key_tag()),
    ) {
        return waits;
    }
    mv.enter(Phase::OldSigningOff);
    Wait::account(Side::Source, "the source account to stop signing")
}

/// The source stops signing: its copy of the target's key withdrawn (the level-triggered
/// foreign keys), then DNSSEC off there behind the guard; done once both are so.
fn old_signing_off(
    mv: &mut Move,
    look: &MoveLook,
    policy: &MovePolicy,
    effects: &mut Vec<MoveEffect>,
) -> Wait {
    match (&look.source_key, &look.source_foreign) {
        (Ok(None), Ok(foreign)) if foreign.is_empty() => {
            mv.enter(Phase::Done);
            done()
        }
        (Ok(Some(_)), _) => match source_may_go_off(mv, look, policy) {
            Ok(()) => {
                effects.push(MoveEffect::SourceDnssecOff);
                Wait::account(Side::Source, "the source account to stop signing")
            }
            Err(why) => {
                let what =
                    format!("the source to become unreachable before it stops signing: {why}");
                // The old delegation's hold, else the parent's answers (DS(Ks) or the
                // delegation): the registrar's, as in the phases that confirmed them.
                if old_delegation_cached(mv, look, policy) {
                    Wait::ttl(what)
                } else {
                    Wait::registrar(what)
                }
            }
        },
        (Err(e), _) | (_, Err(e)) => {
            Wait::account(Side::Source, format!("the source account (unknown: {e})"))
        }
        (Ok(None), Ok(_)) => Wait::account(
            Side::Source,
            "the source account to withdraw the target's key",
        ),
    }
}

/// In `done` the source's copy of the zone is the operator's to delete there.
fn done() -> Wait {
    Wait {
        what: "nothing: the zone is active at the target".into(),
        on: Party::Operator,
        side: Some(Side::Source),
    }
}

/// Whether a resolver may still follow the source's delegation (rule 9's hold).
fn old_delegation_cached(mv: &Move, look: &MoveLook, policy: &MovePolicy) -> bool {
    mv.delegated_at
        .is_none_or(|at| look.at < hold_until(at, old_ns_ttl(mv, policy), policy))
}

/// After the source's delegation was waited out, a parent address that delegates
/// anywhere but the target again (an undo at the registrar, a lagging server) sends
/// resolvers where the retirement of the source's DS or key fails them: alerted, and
/// the move holds until every address delegates to the target again.
fn delegation_returned(zone: &str, look: &MoveLook, alerts: &mut Vec<String>) -> Option<Wait> {
    let moved = |p: &ParentSeen| p.delegation == Delegation::Target;
    if every(&look.parents, moved) != Some(false) {
        return None;
    }
    let which = failing(&look.parents, moved);
    alerts.push(format!(
        "{zone}: after the signed move a parent server no longer delegates to the target ({which}): resolvers sent back to the source may fail once its DS or key is gone; delegate to the target's name servers again"
    ));
    Some(Wait::registrar(format!(
        "the registrar: every parent server to delegate to the target's name servers again: {which}"
    )))
}

/// A child address serves exactly the two keys, the set signed by `own`. A third key (a
/// ZSK) is one the other side does not publish: a signed move exchanges one key each.
fn serves_both<'a>(
    ks: &'a Dnskey,
    kt: &'a Dnskey,
    own: &'a Dnskey,
) -> impl Fn(&ChildSeen) -> bool + 'a {
    move |s: &ChildSeen| {
        s.keys.len() == 2 && s.keys.contains(ks) && s.keys.contains(kt) && s.signed_by.contains(own)
    }
}

/// Whether each side's children serve both keys: (source, target).
fn exchanged(look: &MoveLook, ks: &Dnskey, kt: &Dnskey) -> (Option<bool>, Option<bool>) {
    (
        every(&look.source_children, serves_both(ks, kt, ks)),
        every(&look.target_children, serves_both(ks, kt, kt)),
    )
}

/// What the accounts' APIs say of the exchange: each signs with its key and publishes
/// the other's. `Err` names what is not so, or not known.
fn accounts_agree(look: &MoveLook, ks: &Dnskey, kt: &Dnskey) -> Result<(), (bool, String)> {
    let checks = [
        (
            "the source's key",
            look.source_key.as_ref().map(|k| k.as_ref() == Some(ks)),
        ),
        (
            "the target's key",
            look.target_key.as_ref().map(|k| k.as_ref() == Some(kt)),
        ),
        (
            "the target's key at the source",
            look.source_foreign.as_ref().map(|f| f.contains(kt)),
        ),
        (
            "the source's key at the target",
            look.target_foreign.as_ref().map(|f| f.contains(ks)),
        ),
    ];
    for (what, read) in &checks {
        if let Ok(false) = read {
            return Err((true, format!("{what} is not as the move has it")));
        }
    }
    for (what, read) in &checks {
        if let Err(e) = read {
            return Err((false, format!("{what} unknown: {e}")));
        }
    }
    Ok(())
}

/// The exchange at this look: both APIs agree and every child address of both serves
/// both keys, each signed by its own (`Some(false)`: something known says otherwise).
fn exchange(look: &MoveLook, ks: &Dnskey, kt: &Dnskey) -> Option<bool> {
    let (s, t) = exchanged(look, ks, kt);
    match accounts_agree(look, ks, kt) {
        Err((true, _)) => Some(false),
        _ if s == Some(false) || t == Some(false) => Some(false),
        Err((false, _)) => None,
        Ok(()) => s.zip(t).map(|(a, b)| a && b),
    }
}

fn exchange_failing(look: &MoveLook, ks: &Dnskey, kt: &Dnskey) -> String {
    let api = match accounts_agree(look, ks, kt) {
        Ok(()) => String::new(),
        Err((_, why)) => format!("{why}; "),
    };
    format!(
        "{api}source: {}; target: {}",
        failing(&look.source_children, serves_both(ks, kt, ks)),
        failing(&look.target_children, serves_both(ks, kt, kt))
    )
}

/// The one account an exchange waits on: the side whose API or name servers do not (or
/// cannot be seen to) hold both keys, where the other's all do; `None`: both.
fn exchange_side(look: &MoveLook, ks: &Dnskey, kt: &Dnskey) -> Option<Side> {
    let (s, t) = exchanged(look, ks, kt);
    let source_api = look
        .source_key
        .as_ref()
        .is_ok_and(|k| k.as_ref() == Some(ks))
        && look.source_foreign.as_ref().is_ok_and(|f| f.contains(kt));
    let target_api = look
        .target_key
        .as_ref()
        .is_ok_and(|k| k.as_ref() == Some(kt))
        && look.target_foreign.as_ref().is_ok_and(|f| f.contains(ks));
    match (s == Some(true) && source_api, t == Some(true) && target_api) {
        (true, false) => Some(Side::Target),
        (false, true) => Some(Side::Source),
        _ => None,
    }
}

/// Before the NS change: a side seen without both keys sends the move back to
/// exchanging them (the DS instruction stands; the holds start again).
fn keys_lost_before_ns(mv: &mut Move, look: &MoveLook, ks: &Dnskey, kt: &Dnskey) -> Option<Wait> {
    if exchange(look, ks, kt) == Some(false) {
        mv.enter(Phase::ExchangingKeys);
        return Some(Wait::accounts(
            exchange_side(look, ks, kt),
            format!(
                "every name server of both accounts to serve keys {} and {} again: {}",
                ks.key_tag(),
                kt.key_tag(),
                exchange_failing(look, ks, kt)
            ),
        ));
    }
    None
}

/// After the NS change may have been made, the overlap must stand until the source is
/// unreachable: both keys at both sides, both DS at every parent address. What breaks it
/// is alerted and holds the move (no step of the daemon's repairs it).
fn overlap_broken(
    mv: &mut Move,
    look: &MoveLook,
    ks: &Dnskey,
    kt: &Dnskey,
    alerts: &mut Vec<String>,
) -> Option<Wait> {
    let zone = mv.zone.clone();
    let (s, t) = exchanged(look, ks, kt);
    let both_ds = |p: &ParentSeen| has_ds(&zone, &p.ds, ks) && has_ds(&zone, &p.ds, kt);
    let ds = every(&look.parents, both_ds);
    if s == Some(false) || t == Some(false) {
        alerts.push(format!(
            "{zone}: during the signed move a name server stopped serving both keys: resolvers may fail the zone: {}",
            exchange_failing(look, ks, kt)
        ));
        return Some(Wait::accounts(
            exchange_side(look, ks, kt),
            "both accounts to serve both keys again",
        ));
    }
    if ds == Some(false) {
        alerts.push(format!(
            "{zone}: during the signed move a parent server stopped publishing both DS: resolvers may fail the zone; enter DS {} and DS {} again: {}",
            ks.key_tag(),
            kt.key_tag(),
            failing(&look.parents, both_ds)
        ));
        return Some(Wait::registrar(
            "the registrar: both DS at every parent server again",
        ));
    }
    None
}
