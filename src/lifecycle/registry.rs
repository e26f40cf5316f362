//! The parent's registry as a party (pure): whether a DS request goes to it through the
//! child's signals instead of to the registrar, how long it may take before the daemon
//! says so and asks the registrar after all, and when a step decides to send it
//! NOTIFY(CDS) (an effect, sent by the engine after the commit).
//!
//! None of this decides what is safe: the DS is there when every parent address says so
//! (rules 3 and 10), gone when every one says so, whoever put it there. The registry only
//! changes who is waited on, and for how long.

use std::time::Duration;

use super::cds::{CdsReading, read};
use super::facts::ParentWayFacts;
use super::model::{Observation, ProviderView, Zone};
pub use super::parent_way::{CdsNotified, NotifyPlan, PATH_REFRESH};
use super::parent_way::{DsPath, ParentPath, duration_text};
use super::policy::Policy;
use super::state::State;
use crate::dnssec::CdsPublication;
use crate::time::Timestamp;

/// A scan period nobody stated: registries that scan say daily.
const DEFAULT_SCAN_PERIOD: Duration = Duration::from_secs(86_400);

/// The path the zone's DS request would take now: the one resolved at this look, else the
/// one remembered.
pub fn path<'a>(zone: &'a Zone, obs: &'a Observation) -> Option<&'a ParentPath> {
    obs.ds_path
        .as_ref()
        .or(zone.facts.parent_way.ds_path.as_ref())
}

/// The registry acts on the child's signals for this request: the parent's path scans
/// (or is notified), it takes a first DS where this is one, the provider signs (an
/// unsigned zone's CDS proves nothing, and a delete request must be signed by a key the
/// DS names), and the child's CDS will say `wanted`: the daemon sets it (the provider's
/// API controls it, rule 14), or every child address already publishes it.
pub fn takes_request(
    path: Option<&ParentPath>,
    wanted: CdsPublication,
    first_ds: bool,
    zone: &str,
    obs: &Observation,
) -> bool {
    let Some(path) = path else {
        return false;
    };
    if matches!(path.path, DsPath::Registrar) {
        return false;
    }
    if wanted == CdsPublication::Key && first_ds && path.accepts_first_ds == Some(false) {
        return false;
    }
    if !matches!(obs.provider, ProviderView::On(_)) {
        return false;
    }
    obs.cds.controlled() || signal_of(zone, obs) == Some(wanted)
}

/// Why the registry can no longer act on a request that went to it, where this look
/// says so for certain (an unknown says nothing): the provider no longer signs, the
/// parent's path is now the registrar's, or the registry takes no first DS.
pub fn cannot_act(
    path: Option<&ParentPath>,
    wanted: CdsPublication,
    first_ds: bool,
    obs: &Observation,
) -> Option<String> {
    if matches!(obs.provider, ProviderView::Off | ProviderView::Missing) {
        return Some(
            "the provider no longer signs the zone, so no CDS it publishes is signed".into(),
        );
    }
    match path {
        Some(p) if matches!(p.path, DsPath::Registrar) => Some(format!(
            "the parent's way is now the registrar's: {}",
            p.describe()
        )),
        Some(p)
            if wanted == CdsPublication::Key && first_ds && p.accepts_first_ds == Some(false) =>
        {
            Some("it takes no first DS from the CDS".into())
        }
        _ => None,
    }
}

/// What every child address publishes, where that is one of the daemon's signals: the
/// provider's key (`Key`), the delete request, or nothing.
fn signal_of(zone: &str, obs: &Observation) -> Option<CdsPublication> {
    match read(zone, obs) {
        CdsReading::Served { ours: true, .. } => Some(CdsPublication::Key),
        CdsReading::Delete { .. } => Some(CdsPublication::Delete),
        CdsReading::None => Some(CdsPublication::Nothing),
        _ => None,
    }
}

/// When the registry is late: a scan period (a day where nothing says), plus for a first
/// DS the time it wants the signal unchanged, plus the propagation margin.
pub fn deadline(
    path: Option<&ParentPath>,
    since: Timestamp,
    first_ds: bool,
    policy: &Policy,
) -> Timestamp {
    let scan = path
        .and_then(|p| p.scan_period)
        .unwrap_or(DEFAULT_SCAN_PERIOD);
    let first = match (first_ds, path) {
        (true, Some(p)) => p.first_ds_after.unwrap_or_default(),
        _ => Duration::ZERO,
    };
    since.plus(scan + first + policy.propagation_margin)
}

/// "the registry of `test.`".
pub fn registry_of(path: Option<&ParentPath>) -> String {
    match path {
        Some(p) => format!("the registry of {}", p.parent),
        None => "the parent's registry".to_string(),
    }
}

/// How the registry learns of the signal, in words: "its CDS scan (every 1d)", "NOTIFY
/// sent at T to ADDR port P: acknowledged".
pub fn route_text(path: Option<&ParentPath>, notified: Option<&CdsNotified>) -> String {
    let scan = |p: &ParentPath| {
        format!(
            "its {} scan{}",
            p.signal,
            p.scan_period
                .map(|d| format!(" (every {})", duration_text(d)))
                .unwrap_or_default()
        )
    };
    match (path, notified) {
        (_, Some(n)) => format!(
            "NOTIFY(CDS) sent at {} to {} ({} port {}): {}",
            n.at,
            n.target,
            n.addr.as_deref().unwrap_or("no address"),
            n.port,
            n.outcome
        ),
        (Some(p), None) if matches!(p.path, DsPath::Notify { .. }) => {
            format!("NOTIFY(CDS) not sent yet, else {}", scan(p))
        }
        (Some(p), None) => scan(p),
        (None, None) => "its scan".to_string(),
    }
}

/// The NOTIFY(CDS) a step decides (RFC 9859), given the zone's state and facts as the
/// step leaves them: the DS request goes to the registry, its path has a NOTIFY target
/// with an address, every child address publishes the signal the request needs (a
/// registry checks it anyway: a NOTIFY before that would be wasted), and that signal was
/// not notified already (again after a scan period once acknowledged, at the next look
/// once not). `facts.cds_notified` is the last one performed, as the outbox said.
pub fn notify_due(
    zone: &str,
    state: Option<State>,
    facts: &ParentWayFacts,
    obs: &Observation,
    policy: &Policy,
) -> Option<NotifyPlan> {
    facts.registry_since?;
    let wanted = match state {
        Some(State::AwaitingDs) => CdsPublication::Key,
        Some(State::AwaitingDsRemoval) => CdsPublication::Delete,
        _ => return None,
    };
    let path = obs.ds_path.as_ref().or(facts.ds_path.as_ref())?;
    let DsPath::Notify {
        target,
        port,
        addrs,
    } = &path.path
    else {
        return None;
    };
    if addrs.is_empty() {
        return None;
    }
    let signal = match read(zone, obs) {
        CdsReading::Served {
            ours: true, keys, ..
        } if wanted == CdsPublication::Key => format!(
            "key {}",
            keys.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        ),
        CdsReading::Delete { .. } if wanted == CdsPublication::Delete => "delete".to_string(),
        _ => return None,
    };
    if let Some(last) = &facts.cds_notified
        && last.signal == signal
    {
        let again = if last.acknowledged {
            path.scan_period.unwrap_or(DEFAULT_SCAN_PERIOD)
        } else {
            policy.retry_base
        };
        if obs.at < last.at.plus(again) {
            return None;
        }
    }
    Some(NotifyPlan {
        target: target.clone(),
        port: *port,
        addrs: addrs.clone(),
        signal,
    })
}
