//! The parent's way for a DS and NOTIFY(CDS), as a look performs them: the DSYNC records
//! resolved into a path (`lifecycle::parent_way::resolve`, with a NOTIFY target's
//! addresses looked up), and the NOTIFY the lifecycle says is due
//! (`lifecycle::registry::notify_due`) sent to the target's addresses in turn.

use std::net::SocketAddr;

use crate::dns::observe::model::DsyncView;
use crate::dns::{ObserveError, Observer};
use crate::lifecycle::Timestamp;
use crate::lifecycle::parent_way::{self, DsPath, DsyncHint, ParentPath, ParentWays};
use crate::lifecycle::registry::{CdsNotified, NotifyPlan};

/// The path for `parent` from the operator's word, the DSYNC lookup and what is known of
/// the registry; a NOTIFY target without addresses (configured by name, or the DSYNC
/// lookup could not resolve it) is looked up here.
pub async fn resolve_path<O: Observer>(
    observer: &O,
    parent: &str,
    dsync: Result<&DsyncView, &ObserveError>,
    ways: &ParentWays,
) -> ParentPath {
    let hint = DsyncHint::from_view(dsync);
    let mut path = parent_way::resolve(parent, ways, &hint);
    if let DsPath::Notify { target, addrs, .. } = &mut path.path
        && addrs.is_empty()
    {
        match observer.addresses_of(target).await {
            Ok(found) => *addrs = found,
            Err(e) => {
                path.note = Some(format!("no address known for {target}: {}", e.reason));
            }
        }
    }
    path
}

/// Sends the NOTIFY(CDS) of `plan` to each of its target's addresses in turn until one
/// acknowledges it (a target's addresses are one receiver; RFC 9859 asks for one
/// NOTIFY). `at`: when it went.
pub async fn send_notify<O: Observer>(
    observer: &O,
    zone: &str,
    plan: &NotifyPlan,
    at: Timestamp,
) -> CdsNotified {
    let mut last = None;
    for addr in &plan.addrs {
        let report = observer
            .notify_cds(zone, SocketAddr::new(*addr, plan.port))
            .await;
        let acknowledged = matches!(
            report.outcome,
            crate::dns::net::notify::NotifyOutcome::Acknowledged
        );
        last = Some((addr.to_string(), report.describe(), acknowledged));
        if acknowledged {
            break;
        }
    }
    let (addr, outcome, acknowledged) = match last {
        Some((addr, outcome, ok)) => (Some(addr), outcome, ok),
        None => (None, "no address to send it to".to_string(), false),
    };
    CdsNotified {
        at,
        target: plan.target.clone(),
        addr,
        port: plan.port,
        signal: plan.signal.clone(),
        acknowledged,
        outcome,
    }
}
