//! What the child's CDS and CDNSKEY ask the parent for, read against the zone: the DS we
//! would announce, a delete, or something else. A registry that scans acts on these
//! records by itself (RFC 7344, RFC 8078), so a set that contradicts the operator's
//! intent is said (`cds_unexpected`), and one the child addresses do not agree on (which
//! a registry ignores, RFC 9975) too (`cds_inconsistent`).

use super::facts::Facts;
use super::model::{AlertCheck, CdsSetting, Observation, ProviderView, Zone};
use super::rules::cds_wanted;
use super::state::{Intent, State};
use crate::alert_kind::AlertKind;
use crate::dns::{ChildView, ParentView, SignalsVerdict, observe::signals::is_delete_ds};
use crate::dnssec::{Dnskey, Ds};

/// The child's signals, read against the zone's key and its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CdsReading {
    /// Not asked, or some address could not be asked: nothing to say.
    Unknown,
    /// The child addresses publish different sets: no registry acts on them.
    Inconsistent(String),
    /// Nothing published.
    None,
    /// The delete request (RFC 8078 section 4).
    Delete { trust: Trust },
    /// Records that all name keys every child address serves; `ours`: one of them is
    /// the provider's key (the DS we would announce).
    Served {
        ours: bool,
        keys: Vec<u16>,
        trust: Trust,
    },
    /// Some record names a key not every child address serves (a stranger's key, or
    /// one not yet published everywhere): a registry acting on it breaks validation.
    Unserved { tags: Vec<u16>, trust: Trust },
}

/// Who signs the signals, as a registry judges them: a change or a delete needs a
/// signature by a key the current DS names; a first DS (bootstrap) one by the zone's
/// own served key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Signed, at every child address, by a key a DS at the parent names.
    ByParentDs,
    /// Signed by a served key, none of which the parent's DS names (or no DS known).
    ByZoneKey,
    /// No served key signs them at every address.
    Unsigned,
}

impl Trust {
    fn of(signed_by: &[Dnskey], zone: &str, parent: Option<&ParentView>) -> Self {
        if signed_by.is_empty() {
            return Self::Unsigned;
        }
        let ds = parent.map(ParentView::distinct_ds).unwrap_or_default();
        if signed_by
            .iter()
            .any(|key| ds.iter().any(|d| key.matches_ds(zone, d)))
        {
            Self::ByParentDs
        } else {
            Self::ByZoneKey
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::ByParentDs => "signed by a key the parent's DS names",
            Self::ByZoneKey => "signed by the zone's own key, not one the parent's DS names",
            Self::Unsigned => "not signed by any key the zone serves",
        }
    }
}

/// The child's signals at this look, read against the provider's key and the parent.
pub fn read(zone: &str, obs: &Observation) -> CdsReading {
    let Ok(child) = &obs.child else {
        return CdsReading::Unknown;
    };
    let parent = obs.parent.as_ref().ok();
    let key = match &obs.provider {
        ProviderView::On(key) => Some(&key.dnskey),
        _ => None,
    };
    match child.signals() {
        SignalsVerdict::NotAsked | SignalsVerdict::Unknown(_) => CdsReading::Unknown,
        SignalsVerdict::Inconsistent(detail) => CdsReading::Inconsistent(detail),
        SignalsVerdict::None => CdsReading::None,
        SignalsVerdict::Delete { signed_by } => CdsReading::Delete {
            trust: Trust::of(&signed_by, zone, parent),
        },
        SignalsVerdict::Keys {
            cds,
            cdnskey,
            signed_by,
        } => {
            let trust = Trust::of(&signed_by, zone, parent);
            let unserved: Vec<u16> = cds
                .iter()
                .filter(|d| !is_delete_ds(d) && !served_ds(child, d))
                .map(|d| d.key_tag)
                .chain(
                    cdnskey
                        .iter()
                        .filter(|k| !child.all_serve(k))
                        .map(Dnskey::key_tag),
                )
                .collect();
            if !unserved.is_empty() {
                return CdsReading::Unserved {
                    tags: sorted(unserved),
                    trust,
                };
            }
            let ours = key.is_some_and(|key| {
                cds.iter().any(|d| key.matches_ds(zone, d)) || cdnskey.contains(key)
            });
            let keys = cds
                .iter()
                .map(|d| d.key_tag)
                .chain(cdnskey.iter().map(Dnskey::key_tag))
                .collect();
            CdsReading::Served {
                ours,
                keys: sorted(keys),
                trust,
            }
        }
    }
}

/// A CDS record names a key every child address serves.
fn served_ds(child: &ChildView, ds: &Ds) -> bool {
    child.lacking_ds(ds).is_none() && !child.any_unknown() && !child.answers.is_empty()
}

fn sorted(mut tags: Vec<u16>) -> Vec<u16> {
    tags.sort_unstable();
    tags.dedup();
    tags
}

fn tags_text(tags: &[u16]) -> String {
    let tags: Vec<String> = tags.iter().map(u16::to_string).collect();
    tags.join(", ")
}

/// `cds_inconsistent` and `cds_unexpected` for this look (the zone left in `state` with
/// `facts`); nothing when the signals could not be read (an unknown never resolves an
/// alert) or the zone is not managed. Where the daemon sets the provider's CDS and this
/// step changes the setting (rule 14), or the step moves the zone to another state (what
/// is expected changed with it, and the next look reads the setting), what the name
/// servers still serve is not yet a contradiction: `cds_unexpected` waits for the next
/// look.
pub fn judge(
    zone: &Zone,
    state: Option<State>,
    facts: &Facts,
    obs: &Observation,
) -> Vec<AlertCheck> {
    if zone.intent == Intent::None {
        return Vec::new();
    }
    let correcting = state != zone.state
        || matches!(obs.cds, CdsSetting::HalfApplied(_))
        || matches!(obs.cds, CdsSetting::Set(now) if now != cds_wanted(zone.intent, state, &facts.lifecycle));
    let name = zone.name.as_str();
    let reading = read(name, obs);
    let inconsistent = match &reading {
        CdsReading::Unknown => return Vec::new(),
        CdsReading::Inconsistent(detail) => Some(format!(
            "{name}: the child's name servers publish different CDS/CDNSKEY sets ({detail}): a registry that scans acts on none of them (RFC 9975). Make every name server serve the same set"
        )),
        _ => None,
    };
    let mut checks = vec![AlertCheck::new(AlertKind::CdsInconsistent, inconsistent)];
    let unexpected = match (&reading, zone.intent) {
        (CdsReading::Inconsistent(_), _) => return checks,
        _ if correcting => return checks,
        (CdsReading::Unserved { tags, trust }, _) => Some(format!(
            "{name}: the child publishes CDS/CDNSKEY for key {} which not every name server serves ({}): a registry that scans and acts on it breaks validation of the domain. Remove it at the provider",
            tags_text(tags),
            trust.describe()
        )),
        (CdsReading::Delete { trust }, Intent::Enabled) => Some(format!(
            "{name}: the child publishes the CDS delete request (CDS 0 0 0 00, {}), though the zone's intent is enabled: a registry that scans removes the DS and the zone goes insecure. Withdraw it at the provider, or disable the zone",
            trust.describe()
        )),
        (
            CdsReading::Served {
                ours: false, keys, ..
            },
            Intent::Enabled,
        ) if matches!(obs.provider, ProviderView::On(_)) => Some(format!(
            "{name}: the child publishes CDS/CDNSKEY for key {}, not for the key the provider signs with: a registry that scans installs a DS the daemon does not expect",
            tags_text(keys)
        )),
        (CdsReading::Served { keys, trust, .. }, Intent::Disabled) => Some(format!(
            "{name}: the child publishes CDS/CDNSKEY for key {} ({}), though the zone's intent is disabled: a registry that scans publishes the DS again. Withdraw it at the provider (or publish the delete request)",
            tags_text(keys),
            trust.describe()
        )),
        // A provider view that is not "on" cannot tell ours from another served key.
        (CdsReading::Served { ours: false, .. }, _) => return checks,
        _ => None,
    };
    checks.push(AlertCheck::new(AlertKind::CdsUnexpected, unexpected));
    checks
}
