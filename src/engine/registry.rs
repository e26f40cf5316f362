//! The parent's way for a DS and NOTIFY(CDS): the DSYNC records resolved into a path at a
//! look (`lifecycle::parent_way::resolve`, with a NOTIFY target's addresses looked up),
//! and the NOTIFY a step decided (`Effect::NotifyCds`, `lifecycle::registry::notify_due`)
//! sent to the target's addresses in turn, after the commit.

use std::net::SocketAddr;

use crate::dns::observe::model::DsyncView;
use crate::dns::{ObserveError, Observer};
use crate::lifecycle::Timestamp;
use crate::lifecycle::parent_way::{self, DsPath, DsyncHint, ParentPath, ParentWays};
use crate::lifecycle::registry::{CdsNotified, NotifyPlan};
use crate::provider::SendPermit;

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
/// NOTIFY). `at`: when it went. `may_send` is asked right before each address (several
/// daemons: this daemon's lease on the zone still current); `None` when it said no
/// before anything was sent (the zone's holder decides afresh).
pub async fn send_notify<O: Observer>(
    observer: &O,
    zone: &str,
    plan: &NotifyPlan,
    at: Timestamp,
    may_send: SendPermit<'_>,
) -> Option<CdsNotified> {
    let mut last = None;
    for addr in &plan.addrs {
        if !may_send().await {
            // Nothing sent yet: nothing to record.
            last.as_ref()?;
            break;
        }
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
    Some(CdsNotified {
        at,
        target: plan.target.clone(),
        addr,
        port: plan.port,
        signal: plan.signal.clone(),
        acknowledged,
        outcome,
    })
}
