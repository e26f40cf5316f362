//! Who the parent sends resolvers to: the NS set every parent address delegates the zone
//! to, judged against the provider's name servers (DESIGN.md safety rule 9).
//!
//! The same unanimity as for the DS: the delegation is the provider's only when every
//! address of every parent server delegates to exactly the provider's NS set, and
//! elsewhere only when every address delegates to servers none of which is the
//! provider's. An unknown answer never counts either way.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::model::{ServerAnswer, UnknownReason};
// The NS set's normal form is the wire layer's (discovery keeps each cut's servers in it);
// it is the delegation's vocabulary too.
pub use crate::dns::net::wire::{ns_set, ns_set_of};

/// One address's answer about who serves a zone: the NS set of a referral (at a parent
/// address) or of the apex (at a child address).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum NsAnswer {
    /// The name server host names (see [`ns_set`]) and the NS RRset's TTL. Shared with
    /// the cached cut's set when they are the same (as nearly every answer's are).
    Servers {
        hosts: Arc<[String]>,
        ttl: u32,
    },
    /// Authoritatively, no delegation at all (NXDOMAIN, or NODATA without a referral).
    NotDelegated,
    Unknown(UnknownReason),
}

/// `check --json`'s `delegation` verdict (DESIGN.md section 6).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegationVerdict {
    /// Every parent address delegates to exactly the provider's name servers.
    Provider,
    /// Every parent address delegates to name servers none of which is the provider's
    /// (or does not delegate the zone at all).
    Foreign,
    /// Parent addresses disagree, or one delegates to a mix of the provider's name
    /// servers and others: resolvers may be sent either way.
    Mixed,
    /// Some parent address gave no usable answer, or the provider's name servers are
    /// not known: nothing above could be concluded.
    #[default]
    Unknown,
}

impl DelegationVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provider => "provider",
            Self::Foreign => "foreign",
            Self::Mixed => "mixed",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for DelegationVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// How one parent address's NS set compares with the provider's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegationMatch {
    /// Exactly the provider's set.
    Provider,
    /// None of the provider's name servers.
    Foreign,
    /// Some of the provider's name servers and others, or only part of them.
    Mixed,
    /// No answer, or the provider's set is not known.
    Unknown,
}

/// One parent address, for `check --json`'s `delegation_servers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationDetail {
    pub server: String,
    pub addr: IpAddr,
    /// The NS set it delegates to (empty: it does not delegate the zone).
    pub delegates_to: Option<Vec<String>>,
    pub ttl: Option<u32>,
    pub matches: DelegationMatch,
    /// Why the answer is unknown.
    pub unknown: Option<String>,
}

/// The verdict and the per-address detail behind it (by default: unknown, nothing seen).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegationAssessment {
    pub verdict: DelegationVerdict,
    /// The provider's name servers it was judged against, when known.
    pub provider_ns: Option<Vec<String>>,
    pub servers: Vec<DelegationDetail>,
}

/// How `hosts` (an [`ns_set`]) compares with the provider's set.
pub fn compare(hosts: &[String], provider_ns: &[String]) -> DelegationMatch {
    if hosts == provider_ns {
        DelegationMatch::Provider
    } else if hosts.iter().any(|h| provider_ns.contains(h)) {
        DelegationMatch::Mixed
    } else {
        DelegationMatch::Foreign
    }
}

/// Judges the parent addresses' delegations against the provider's name servers.
pub fn assess(
    delegations: &[ServerAnswer<NsAnswer>],
    provider_ns: Option<&[String]>,
) -> DelegationAssessment {
    let provider_ns = provider_ns.filter(|ns| !ns.is_empty());
    let servers: Vec<DelegationDetail> = delegations
        .iter()
        .map(|a| {
            let (delegates_to, ttl, unknown) = match &a.answer {
                NsAnswer::Servers { hosts, ttl } => (Some(hosts.to_vec()), Some(*ttl), None),
                NsAnswer::NotDelegated => (Some(Vec::new()), None, None),
                NsAnswer::Unknown(reason) => (None, None, Some(reason.to_string())),
            };
            let matches = match (&delegates_to, provider_ns) {
                (Some(hosts), Some(ns)) => compare(hosts, ns),
                _ => DelegationMatch::Unknown,
            };
            DelegationDetail {
                server: a.server.to_string(),
                addr: a.addr,
                delegates_to,
                ttl,
                matches,
                unknown,
            }
        })
        .collect();
    let count = |m: DelegationMatch| servers.iter().filter(|s| s.matches == m).count();
    let (provider, foreign, mixed, unknown) = (
        count(DelegationMatch::Provider),
        count(DelegationMatch::Foreign),
        count(DelegationMatch::Mixed),
        count(DelegationMatch::Unknown),
    );
    let verdict = if provider_ns.is_none() || servers.is_empty() {
        DelegationVerdict::Unknown
    } else if mixed > 0 || (provider > 0 && foreign > 0) {
        // Certain even beside an unknown: some resolvers are sent elsewhere.
        DelegationVerdict::Mixed
    } else if unknown > 0 {
        DelegationVerdict::Unknown
    } else if foreign == 0 {
        DelegationVerdict::Provider
    } else {
        DelegationVerdict::Foreign
    };
    DelegationAssessment {
        verdict,
        provider_ns: provider_ns.map(<[String]>::to_vec),
        servers,
    }
}

impl DelegationAssessment {
    /// Some parent address answered with a delegation that is not exactly the
    /// provider's: resolvers asking it are sent (also) elsewhere. Certain evidence.
    pub fn any_elsewhere(&self) -> bool {
        self.servers
            .iter()
            .any(|s| matches!(s.matches, DelegationMatch::Foreign | DelegationMatch::Mixed))
    }

    /// Every distinct NS set some parent address delegates to other than the provider's.
    pub fn elsewhere_sets(&self) -> Vec<Vec<String>> {
        let mut sets: Vec<Vec<String>> = Vec::new();
        for s in &self.servers {
            if matches!(s.matches, DelegationMatch::Foreign | DelegationMatch::Mixed)
                && let Some(hosts) = &s.delegates_to
                && !sets.contains(hosts)
            {
                sets.push(hosts.clone());
            }
        }
        sets
    }

    /// The largest NS TTL of the delegations that are not the provider's: how long a
    /// resolver may still follow them after they changed (the parent's side).
    pub fn elsewhere_ttl(&self) -> Option<u32> {
        self.servers
            .iter()
            .filter(|s| matches!(s.matches, DelegationMatch::Foreign | DelegationMatch::Mixed))
            .filter_map(|s| s.ttl)
            .max()
    }
}

/// The largest apex NS TTL any address answered (the child's side of the old delegation).
pub fn max_ttl(answers: &[ServerAnswer<NsAnswer>]) -> Option<u32> {
    answers
        .iter()
        .filter_map(|a| match a.answer {
            NsAnswer::Servers { ttl, .. } => Some(ttl),
            _ => None,
        })
        .max()
}

/// A short description of an NS set for messages: `ns1.old.example., ns2.old.example.`.
pub fn describe(hosts: &[String]) -> String {
    if hosts.is_empty() {
        "(no delegation)".to_string()
    } else {
        hosts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways to build a set give the set of the definition.
    #[test]
    fn ns_set_of_names_in_hand_is_ns_set() {
        let lists: [&[&str]; 5] = [
            &["ns2.example.net.", "NS1.Example.NET", "ns2.example.net"],
            &[" ns1.x.test. ", "ns1.x.test.", "."],
            &["", "a.", "A", "b.test."],
            &[],
            &["ns.b.", "ns.a.", "ns.c."],
        ];
        for list in lists {
            // The definition: lower case, the trailing dot, sorted, once each, no root.
            let expected: Vec<String> = list
                .iter()
                .map(|h| {
                    let h = h.trim().to_ascii_lowercase();
                    if h.ends_with('.') { h } else { format!("{h}.") }
                })
                .filter(|h| h != ".")
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let owned = list.iter().map(|h| h.to_string()).collect();
            assert_eq!(ns_set_of(owned), expected, "{list:?}");
            assert_eq!(ns_set(list), expected, "{list:?}");
        }
    }

    fn answers(list: Vec<NsAnswer>) -> Vec<ServerAnswer<NsAnswer>> {
        list.into_iter()
            .enumerate()
            .map(|(i, answer)| ServerAnswer {
                server: format!("ns{i}.nic.test.").into(),
                addr: format!("127.0.0.{}", i + 10).parse().unwrap(),
                answer,
            })
            .collect()
    }

    fn to(hosts: &[&str], ttl: u32) -> NsAnswer {
        NsAnswer::Servers {
            hosts: ns_set(hosts).into(),
            ttl,
        }
    }

    #[test]
    fn sets_are_normalised() {
        assert_eq!(
            ns_set(["NS2.Example.NET", "ns1.example.net.", "ns2.example.net."]),
            vec![
                "ns1.example.net.".to_string(),
                "ns2.example.net.".to_string()
            ]
        );
    }

    #[test]
    fn verdicts_need_every_address() {
        use DelegationVerdict::*;
        let ours = ns_set(["ns1.prov.test", "ns2.prov.test"]);
        let p = Some(ours.as_slice());
        let mine = || to(&["ns2.prov.test.", "NS1.prov.test"], 3600);
        let old = || to(&["ns1.old.test", "ns2.old.test"], 86400);
        let timeout = || NsAnswer::Unknown(UnknownReason::Timeout);
        assert_eq!(assess(&answers(vec![mine(), mine()]), p).verdict, Provider);
        assert_eq!(assess(&answers(vec![old(), old()]), p).verdict, Foreign);
        assert_eq!(
            assess(&answers(vec![old(), NsAnswer::NotDelegated]), p).verdict,
            Foreign
        );
        assert_eq!(assess(&answers(vec![mine(), old()]), p).verdict, Mixed);
        assert_eq!(
            assess(&answers(vec![mine(), timeout()]), p).verdict,
            Unknown,
            "an unknown never completes a delegation"
        );
        assert_eq!(assess(&answers(vec![old(), timeout()]), p).verdict, Unknown);
        assert_eq!(
            assess(&answers(vec![mine(), old(), timeout()]), p).verdict,
            Mixed,
            "a certain split is said beside an unknown"
        );
        // Only one of the provider's servers, or the provider's plus another: mixed.
        let half = to(&["ns1.prov.test"], 3600);
        assert_eq!(assess(&answers(vec![half.clone(), half]), p).verdict, Mixed);
        let plus = to(&["ns1.prov.test", "ns2.prov.test", "ns1.old.test"], 3600);
        assert_eq!(assess(&answers(vec![plus]), p).verdict, Mixed);
        // No provider set: unknown, whatever the parent says.
        assert_eq!(assess(&answers(vec![mine()]), None).verdict, Unknown);
        assert_eq!(assess(&answers(vec![mine()]), Some(&[])).verdict, Unknown);
        assert_eq!(assess(&[], p).verdict, Unknown);
    }

    #[test]
    fn the_old_delegation_is_described() {
        let ours = ns_set(["ns1.prov.test", "ns2.prov.test"]);
        let a = assess(
            &answers(vec![
                to(&["ns1.prov.test", "ns2.prov.test"], 3600),
                to(&["ns1.old.test"], 172_800),
                to(&["ns1.old.test"], 86400),
            ]),
            Some(&ours),
        );
        assert!(a.any_elsewhere());
        assert_eq!(a.elsewhere_sets(), vec![vec!["ns1.old.test.".to_string()]]);
        assert_eq!(a.elsewhere_ttl(), Some(172_800));
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["verdict"], "mixed");
        assert_eq!(json["servers"][1]["matches"], "foreign");
    }
}
