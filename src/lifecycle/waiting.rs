//! In plain words: what a zone waits for, and on whom. For `status`.

use super::policy::Policy;
use super::state::{Intent, State};
use super::step::{Zone, disable_deadline};
use super::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Waiting {
    pub what: String,
    /// `daemon`, `provider`, `registrar`, `ttl`, `operator`, or `nobody`.
    pub on: &'static str,
    /// When the wait ends by itself, if it does.
    pub until: Option<Timestamp>,
}

fn wait(what: impl Into<String>, on: &'static str, until: Option<Timestamp>) -> Waiting {
    Waiting {
        what: what.into(),
        on,
        until,
    }
}

pub fn describe(zone: &Zone, policy: &Policy) -> Waiting {
    let f = &zone.facts;
    match (zone.state, zone.intent) {
        (None, _) => wait("the first observation", "daemon", None),
        (Some(State::Disabled), Intent::Enabled) => {
            wait("the daemon to switch DNSSEC on", "daemon", None)
        }
        (Some(State::Disabled), _) => wait("nothing (DNSSEC off)", "nobody", None),
        (Some(State::AwaitingDelegation), _) => {
            wait("every parent server to delegate to the provider's name servers", "registrar", None)
        }
        (Some(State::Enabling), Intent::Enabled) if f.provider_off_since.is_some() => wait(
            "the provider to switch DNSSEC on (it says off; asked again)",
            "provider",
            None,
        ),
        (Some(State::Enabling), _) if f.provider_off_since.is_some() => wait(
            "the operator: DNSSEC is off at the provider (switched off outside dnssec-warden); `enable` switches it on again, `disable` finishes switching off",
            "operator",
            None,
        ),
        (Some(State::Enabling), _) => match f.hold_until {
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
        (Some(State::AwaitingDs), _) => wait(
            match &f.ds_to_enter {
                Some(line) => format!("the DS at every parent server: {line}"),
                // Safety rule 8: never shown unless the provider signs with it and every
                // child address served it at the last look.
                None => "the DS at every parent server (not shown while not every name server can be seen serving the key: run `check`)".to_string(),
            },
            "registrar",
            f.ds_announced_at.map(|at| at.plus(policy.ds_overdue_after)),
        ),
        (Some(State::DsObserved), _) => wait("validation to confirm the chain", "daemon", None),
        (Some(State::Active), Intent::Disabled) => {
            wait("the daemon to start the disable", "daemon", None)
        }
        (Some(State::Active), _) => wait("nothing (DNSSEC active)", "nobody", None),
        (Some(State::AwaitingDsRemoval), _) => wait(
            "the DS to be removed at the registrar and gone from every parent server",
            "registrar",
            Some(zone.since.plus(policy.ds_removal_overdue_after)),
        ),
        (Some(State::TtlWait), _) => wait(
            "the DS TTL and margin to pass",
            "ttl",
            disable_deadline(f, policy),
        ),
        (Some(State::Disabling), _) => wait("the provider to switch DNSSEC off", "provider", None),
    }
}
