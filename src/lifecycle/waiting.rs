//! In plain words: what a zone waits for, and on whom, and a key rollover's line. For
//! `status` and the console's zone page.

use super::hold::{Hold, Party};
use super::model::Zone;
use super::policy::Policy;
use super::registry::{deadline, registry_of, route_text};
use super::rollover::{Method, Phase, Roll};
use super::rules::{delegation_hold_until, disable_deadline, ds_request_at, removal_request_at};
use super::state::{Intent, State};
use crate::dns::DelegationVerdict;
use crate::dns::delegation::describe as hosts;
use crate::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Waiting {
    pub what: String,
    /// `daemon`, `provider`, `registrar`, `registry` (acting on the child's CDS), `ttl`,
    /// `operator`, `nobody`, or `host` (this host's IPv6, said by `status`).
    pub on: &'static str,
    /// The provider accounts the wait is on, where known: the one its hold names (a
    /// signed move's side), both of a move where it names none; the zone's own account
    /// is filled in by `store::ZoneRow::waiting` where none is said here.
    pub accounts: Vec<String>,
    /// When the wait ends by itself, if it does.
    pub until: Option<Timestamp>,
}

impl Waiting {
    /// Who the wait is on, in `status`'s words: a provider by its account's name where
    /// known (`provider b`, `providers a and b`).
    pub fn party(&self) -> String {
        match (self.on, self.accounts.as_slice()) {
            ("provider", [one]) => format!("provider {one}"),
            ("provider", [first, rest @ ..]) if !rest.is_empty() => {
                format!("providers {first} and {}", rest.join(" and "))
            }
            (on, _) => on.to_string(),
        }
    }
}

fn wait(what: impl Into<String>, on: &'static str, until: Option<Timestamp>) -> Waiting {
    Waiting {
        what: what.into(),
        on,
        accounts: Vec::new(),
        until,
    }
}

/// What `zone` waits for: what held it at its last step where the state alone does not
/// say it (`Facts::held_by`: a failing call, a name server without the signed key), else
/// what its state waits for.
pub fn describe(zone: &Zone, policy: &Policy) -> Waiting {
    let by_state = describe_state(zone, policy);
    match &zone.facts.wait.held_by {
        Some(hold) if zone.state.is_some() => Waiting {
            what: hold.what.clone(),
            on: hold.on.as_str(),
            accounts: hold_accounts(zone, hold),
            until: hold.until.or(by_state.until),
        },
        _ => by_state,
    }
}

/// The accounts a hold is on: the one it names; during a signed move, a provider's wait
/// that names none is both accounts' (a stored hold from before holds named theirs reads
/// so too), never the one that happens to serve the zone.
fn hold_accounts(zone: &Zone, hold: &Hold) -> Vec<String> {
    match (&hold.account, &zone.facts.signed_move) {
        (Some(account), _) => vec![account.clone()],
        (None, Some(mv)) if hold.on == Party::Provider => {
            vec![mv.source.clone(), mv.target.clone()]
        }
        _ => Vec::new(),
    }
}

/// What the zone's state waits for: one step a state, each reading its arms in order.
fn describe_state(zone: &Zone, policy: &Policy) -> Waiting {
    match zone.state {
        None => wait("the first observation", "daemon", None),
        Some(State::Disabled) => disabled(zone),
        Some(State::AwaitingDelegation) => awaiting_delegation(zone),
        Some(State::Enabling) => enabling(zone, policy),
        Some(State::AwaitingDs) => awaiting_ds(zone, policy),
        Some(State::DsObserved) => wait("validation to confirm the chain", "daemon", None),
        Some(State::Active) => match zone.intent {
            Intent::Disabled => wait("the daemon to start the disable", "daemon", None),
            _ => wait("nothing (DNSSEC active)", "nobody", None),
        },
        Some(State::AwaitingDsRemoval) => awaiting_ds_removal(zone, policy),
        Some(State::TtlWait) => ttl_wait(zone, policy),
        Some(State::Disabling) => wait("the provider to switch DNSSEC off", "provider", None),
    }
}

/// The provider's name servers, as a wait names them.
fn provider_ns(zone: &Zone) -> String {
    zone.facts
        .delegation
        .provider_ns
        .as_deref()
        .map(hosts)
        .unwrap_or_else(|| "(the provider lists none: see `check`)".to_string())
}

fn disabled(zone: &Zone) -> Waiting {
    let f = &zone.facts;
    match zone.intent {
        Intent::Enabled => wait("the daemon to switch DNSSEC on", "daemon", None),
        _ if matches!(
            f.delegation.verdict,
            Some(DelegationVerdict::Foreign | DelegationVerdict::Mixed)
        ) =>
        {
            wait(
                format!(
                    "nothing (DNSSEC off; the parent delegates to {}, not to the provider's name servers)",
                    hosts(&f.delegation.old_ns)
                ),
                "nobody",
                None,
            )
        }
        _ => wait("nothing (DNSSEC off)", "nobody", None),
    }
}

fn awaiting_delegation(zone: &Zone) -> Waiting {
    let f = &zone.facts;
    let provider_ns = provider_ns(zone);
    match zone.intent {
        _ if f.move_in.moving_in => wait(
            format!(
                "the NS at the registrar to be changed to: {provider_ns} (every parent server must delegate to exactly these; the old delegation: {})",
                hosts(&f.delegation.old_ns)
            ),
            "registrar",
            None,
        ),
        Intent::None => wait(
            format!(
                "the operator: the parent delegates to {}, not to the provider's name servers ({provider_ns}); `enable` or `disable` starts the move in",
                hosts(&f.delegation.old_ns)
            ),
            "operator",
            None,
        ),
        _ => wait(
            "a complete look at the parent to start the move in",
            "daemon",
            None,
        ),
    }
}

fn enabling(zone: &Zone, policy: &Policy) -> Waiting {
    let f = &zone.facts;
    let delegation_hold = delegation_hold_until(&f.delegation, policy);
    match zone.intent {
        Intent::Enabled if f.lifecycle.provider_off_since.is_some() => wait(
            "the provider to switch DNSSEC on (it says off; asked again)",
            "provider",
            None,
        ),
        _ if f.lifecycle.provider_off_since.is_some() => wait(
            "the operator: DNSSEC is off at the provider (switched off outside dnssec-warden); `enable` switches it on again, `disable` finishes switching off",
            "operator",
            None,
        ),
        _ if delegation_hold.is_some_and(|until| until > zone.since) => {
            match f.lifecycle.hold_until {
                Some(until) if Some(until) > delegation_hold => wait(
                    "the propagation hold after every name server served the key",
                    "ttl",
                    Some(until),
                ),
                _ => wait(
                    "the old delegation to expire from resolvers' caches (safety rule 9), and every name server to serve the provider's key",
                    "ttl",
                    delegation_hold,
                ),
            }
        }
        _ => match f.lifecycle.hold_until {
            Some(until) => wait(
                "the propagation hold after every name server served the key",
                "ttl",
                Some(until),
            ),
            None => wait(
                "every name server to serve the provider's key",
                "provider",
                None,
            ),
        },
    }
}

fn awaiting_ds(zone: &Zone, policy: &Policy) -> Waiting {
    let f = &zone.facts;
    if f.parent_way.registry_since.is_some() {
        let path = f.parent_way.ds_path.as_ref();
        return wait(
            format!(
                "{} to publish the DS from the child's CDS ({}){}",
                registry_of(path),
                route_text(path, f.parent_way.cds_notified.as_ref()),
                f.lifecycle
                    .ds_to_enter
                    .as_deref()
                    .map(|line| format!(": {line}"))
                    .unwrap_or_default()
            ),
            "registry",
            f.parent_way
                .registry_since
                .map(|since| deadline(path, since, f.lifecycle.ds_first_seen_at.is_none(), policy)),
        );
    }
    wait(
        match &f.lifecycle.ds_to_enter {
            Some(line) => format!("the DS at every parent server: {line}"),
            // Safety rule 8: never shown unless the provider signs with it and every
            // child address served it at the last look.
            None => "the DS at every parent server (not shown while not every name server can be seen serving the key: run `check`)".to_string(),
        },
        "registrar",
        ds_request_at(f).map(|at| at.plus(policy.ds_overdue_after)),
    )
}

fn awaiting_ds_removal(zone: &Zone, policy: &Policy) -> Waiting {
    let f = &zone.facts;
    if f.parent_way.registry_since.is_some() && !f.move_in.moving_in {
        let path = f.parent_way.ds_path.as_ref();
        return wait(
            format!(
                "{} to remove the DS on the child's CDS delete request ({})",
                registry_of(path),
                route_text(path, f.parent_way.cds_notified.as_ref())
            ),
            "registry",
            f.parent_way
                .registry_since
                .map(|since| deadline(path, since, false, policy)),
        );
    }
    if f.move_in.moving_in {
        return wait(
            format!(
                "moving in: the old DS to be removed at the registrar and gone from every parent server: {}",
                if f.move_in.ds_to_remove.is_empty() {
                    "(none seen at the last look)".to_string()
                } else {
                    f.move_in.ds_to_remove.join("; ")
                }
            ),
            "registrar",
            Some(zone.since.plus(policy.ds_removal_overdue_after)),
        );
    }
    wait(
        "the DS to be removed at the registrar and gone from every parent server",
        "registrar",
        Some(removal_request_at(&f.parent_way, zone.since).plus(policy.ds_removal_overdue_after)),
    )
}

fn ttl_wait(zone: &Zone, policy: &Policy) -> Waiting {
    let f = &zone.facts;
    if f.move_in.moving_in {
        return wait(
            "moving in: the old DS TTL and margin to pass; then the NS can move",
            "ttl",
            disable_deadline(&f.lifecycle, policy),
        );
    }
    wait(
        "the DS TTL and margin to pass",
        "ttl",
        disable_deadline(&f.lifecycle, policy),
    )
}

/// A key rollover in plain words, as `status` and the console's zone page both say it:
/// its method and the kind of key it replaces, the algorithm it introduces, and its phase
/// by name and in words (what the wait is for is the zone's [`Waiting`]).
pub fn roll_line(roll: &Roll) -> String {
    let algorithm = match roll.method {
        Method::Algorithm => format!("to algorithm {}", roll.algorithm),
        _ => format!("(algorithm {})", roll.algorithm),
    };
    format!(
        "{} roll of the {} {algorithm}, phase {}{}: {}",
        roll.method.name(),
        kinds(roll),
        roll.phase.name(),
        if roll.aborted { " (going back)" } else { "" },
        phase_words(roll)
    )
}

/// The kinds of key the roll replaces: `csk`, `zsk`, `ksk`, or an algorithm's `ksk and zsk`.
fn kinds(roll: &Roll) -> String {
    roll.new
        .iter()
        .map(|k| k.kind.name())
        .collect::<Vec<_>>()
        .join(" and ")
}

/// What the roll's phase has at the provider and the parent. Going back, the roll's
/// `old` are the keys it had introduced and `new` the zone's own: named so, not swapped.
fn phase_words(roll: &Roll) -> String {
    let kind = kinds(roll).to_uppercase();
    let (old, new) = match (roll.method, roll.aborted) {
        (Method::Algorithm, false) => (
            "the old algorithm's keys".to_string(),
            "the new algorithm's keys".to_string(),
        ),
        (Method::Algorithm, true) => (
            "the new algorithm's keys".to_string(),
            "the original algorithm's keys".to_string(),
        ),
        (_, false) => (format!("the old {kind}"), format!("the new {kind}")),
        (_, true) => (
            format!("the roll's new {kind}"),
            format!("the original {kind}"),
        ),
    };
    match roll.phase {
        Phase::Publishing => format!("{new} published beside {old}, not signing yet"),
        Phase::AwaitingNewDs => {
            format!("the DS of {new} to be added at the parent beside that of {old}")
        }
        Phase::Swapping => format!("{new} signing in place of {old}, both still published"),
        Phase::RemovingOldDs => {
            format!("the DS of {old} to be removed at the parent, that of {new} kept")
        }
        Phase::RemovingOldKey => format!("{old} deleted at the provider, {new} alone signing"),
        Phase::SigningUnpublished => {
            format!("{new} signing beside {old}, their DNSKEYs not published yet")
        }
        Phase::PublishingNewAlgorithm => {
            format!("{new} published beside {old}, both signing")
        }
        Phase::UnpublishingOldAlgorithm => {
            format!("{old} unpublished but still signing, {new} published and signing")
        }
        Phase::RemovingOldSignatures => {
            format!("{old} deleted at the provider, their signatures leaving the zone")
        }
        Phase::Done => "done".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::rollover::{KeyKind, ListedKey};

    fn csk_roll() -> Roll {
        let listed = [ListedKey {
            id: "1".into(),
            dnskey: crate::dnssec::test_key(),
            active: true,
            published: true,
        }];
        Roll::plan(&listed, KeyKind::Csk, None, Timestamp(0)).unwrap()
    }

    /// Going back, the keys are named for what they are to the operator: the one the
    /// roll introduced is removed, the zone's own is kept.
    #[test]
    fn a_roll_going_back_names_the_key_it_removes_as_the_rolls_new_one() {
        let mut roll = csk_roll();
        assert_eq!(
            roll_line(&roll),
            "double_ds roll of the csk (algorithm 13), phase publishing: \
             the new CSK published beside the old CSK, not signing yet"
        );
        std::mem::swap(&mut roll.old, &mut roll.new);
        roll.aborted = true;
        roll.phase = Phase::RemovingOldKey;
        assert_eq!(
            roll_line(&roll),
            "double_ds roll of the csk (algorithm 13), phase removing_old_key (going back): \
             the roll's new CSK deleted at the provider, the original CSK alone signing"
        );
        roll.method = Method::Algorithm;
        roll.phase = Phase::SigningUnpublished;
        roll.aborted = false;
        assert!(
            roll_line(&roll).starts_with(
                "algorithm roll of the csk to algorithm 13, phase signing_unpublished: \
                 the new algorithm's keys signing beside the old algorithm's keys"
            ),
            "{}",
            roll_line(&roll)
        );
    }
}
