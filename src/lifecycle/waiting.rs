//! In plain words: what a zone waits for, and on whom. For `status`.

use super::hold::{Hold, Party};
use super::model::Zone;
use super::policy::Policy;
use super::registry::{deadline, registry_of, route_text};
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
