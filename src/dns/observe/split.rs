//! Parent servers that delegate a zone to different name server sets (an NS change that
//! reached some of them only): the servers of each set asked, and whether a resolver that
//! follows each referral validates. A resolver takes one parent server's referral, and
//! with it that server's DS and the keys of the set it names: one bad pair fails every
//! resolver that happens to ask that parent server, whatever the other sets serve.

use std::net::IpAddr;

use serde::Serialize;

use super::Observer;
use super::delegation::{NsAnswer, ns_set};
use super::model::{ChildView, DsAnswer, ParentDsVerdict, ParentView, ServerAnswer};

/// At most this many distinct NS sets are followed in one look; more are said, not asked.
/// A parent has few addresses, and each set costs a child look with its own budget.
pub const MAX_SETS: usize = 4;

/// The referrals of a parent that disagrees about the delegation (two or more NS sets).
#[derive(Debug, Clone, Serialize)]
pub struct DelegationSplit {
    pub paths: Vec<ReferralPath>,
    /// Distinct NS sets beyond [`MAX_SETS`], not asked.
    pub not_followed: usize,
}

/// One NS set some parent addresses delegate to, and what a resolver meets there.
#[derive(Debug, Clone, Serialize)]
pub struct ReferralPath {
    /// The NS set (empty: these parent addresses do not delegate the zone at all).
    pub ns: Vec<String>,
    /// The parent addresses that delegate to it.
    pub parents: Vec<ParentAddress>,
    /// The tags of the SEP keys the set's servers serve (every key where none is a SEP).
    pub key_tags: Vec<u16>,
    /// The DS of these parent addresses judged against the keys of this set alone.
    pub parent_ds: ParentDsVerdict,
    pub outcome: PathOutcome,
    /// What the set's servers answered (`None` when they could not be asked).
    pub child: Option<ChildView>,
    /// Why the set's servers could not be asked.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParentAddress {
    pub server: String,
    pub addr: IpAddr,
}

/// What a validating resolver that follows the referral gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathOutcome {
    /// The DS there names a key the set serves.
    Validates,
    /// No DS there (at some or all of these parent addresses): unvalidated, no failure.
    Insecure,
    /// A DS there names none of the keys the set serves: validation fails.
    Fails,
    /// These parent addresses do not delegate the zone: resolvers are told it does not
    /// exist.
    NotDelegated,
    /// The set's servers, or these parent addresses' DS, could not be read.
    Unknown,
}

impl DelegationSplit {
    pub fn any(&self, outcome: PathOutcome) -> bool {
        self.paths.iter().any(|p| p.outcome == outcome)
    }
}

/// The distinct NS sets the parent addresses delegate to (a "not delegated" answer is
/// the empty set), each with the addresses that name it, in the parent's order. Unknown
/// answers name no set.
fn sets(parent: &ParentView) -> Vec<(Vec<String>, Vec<ParentAddress>)> {
    let mut sets: Vec<(Vec<String>, Vec<ParentAddress>)> = Vec::new();
    for d in &parent.delegations {
        let hosts = match &d.answer {
            NsAnswer::Servers { hosts, .. } => hosts.to_vec(),
            NsAnswer::NotDelegated => Vec::new(),
            NsAnswer::Unknown(_) => continue,
        };
        let at = ParentAddress {
            server: d.server.to_string(),
            addr: d.addr,
        };
        match sets.iter_mut().find(|(s, _)| *s == hosts) {
            Some((_, addrs)) => addrs.push(at),
            None => sets.push((hosts, vec![at])),
        }
    }
    sets
}

/// When the parent's addresses delegate to more than one NS set: each set's servers
/// asked (`child`, the look's own child view, stands for the set it asked), and each
/// referral judged. `None` when every answering address names the same set.
pub async fn follow<O: Observer>(
    observer: &O,
    zone: &str,
    parent: &ParentView,
    child: Option<&ChildView>,
) -> Option<DelegationSplit> {
    let mut sets = sets(parent);
    if sets.len() < 2 {
        return None;
    }
    let not_followed = sets.len().saturating_sub(MAX_SETS);
    sets.truncate(MAX_SETS);
    let asked = child.map(|c| ns_set(c.answers.iter().map(|a| &*a.server)));
    let asked = asked.as_ref();
    let views = futures::future::join_all(sets.iter().map(|(hosts, _)| async move {
        if hosts.is_empty() {
            return Ok(None);
        }
        match child {
            Some(c) if asked == Some(hosts) => Ok(Some(c.clone())),
            _ => observer
                .child_at(zone, hosts)
                .await
                .map(Some)
                .map_err(|e| e.to_string()),
        }
    }))
    .await;
    let paths = sets
        .into_iter()
        .zip(views)
        .map(|((ns, parents), view)| judge(parent, ns, parents, view))
        .collect();
    Some(DelegationSplit {
        paths,
        not_followed,
    })
}

/// One referral: the DS of its parent addresses against the keys its set serves.
fn judge(
    parent: &ParentView,
    ns: Vec<String>,
    parents: Vec<ParentAddress>,
    view: Result<Option<ChildView>, String>,
) -> ReferralPath {
    let (child, error) = match view {
        Ok(child) => (child, None),
        Err(e) => (None, Some(e)),
    };
    // The parent view cut down to these addresses: the same rules as the whole.
    let own = ParentView {
        answers: parent
            .answers
            .iter()
            .filter(|a| {
                parents
                    .iter()
                    .any(|p| p.addr == a.addr && *p.server == *a.server)
            })
            .cloned()
            .collect::<Vec<ServerAnswer<DsAnswer>>>(),
        delegations: Vec::new(),
        ..parent.clone()
    };
    let served = child
        .as_ref()
        .map(ChildView::served_keys)
        .unwrap_or_default();
    let parent_ds = own.verdict(&served);
    let outcome = if ns.is_empty() {
        PathOutcome::NotDelegated
    } else if child.is_none() {
        PathOutcome::Unknown
    } else {
        match parent_ds {
            ParentDsVerdict::AllMatch => PathOutcome::Validates,
            ParentDsVerdict::AllAbsent | ParentDsVerdict::Partial => PathOutcome::Insecure,
            ParentDsVerdict::Mismatch => PathOutcome::Fails,
            ParentDsVerdict::Unknown => PathOutcome::Unknown,
        }
    };
    let sep: Vec<u16> = served
        .keys
        .iter()
        .filter(|k| k.is_sep() && k.is_zone_key())
        .map(|k| k.key_tag())
        .collect();
    let key_tags = if sep.is_empty() {
        served.keys.iter().map(|k| k.key_tag()).collect()
    } else {
        sep
    };
    ReferralPath {
        ns,
        parents,
        key_tags,
        parent_ds,
        outcome,
        child,
        error,
    }
}
