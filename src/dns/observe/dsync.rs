//! What the parent's servers say of DSYNC (RFC 9859) for a child: where the parent wants
//! generalized notifications (NOTIFY(CDS) and the like) sent, address by address, and
//! the verdict with the house's unanimity.
//!
//! DSYNC answers are hints, not evidence: RFC 9859 does not require them to be
//! validated, because a notification only asks the receiver to look now, and the
//! registry checks the child's CDS itself before it changes a DS. So nothing here is
//! proven with the parent's keys, and nothing the lifecycle decides about a DS rests on
//! it; it tells only which way the DS reaches the parent.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::model::{ServerAnswer, UnknownReason};
use crate::dns::net::wire::DSYNC_SCHEME_NOTIFY;
pub use crate::dns::net::wire::Dsync;

/// The RRtypes a parent's notification target may take NOTIFYs for that concern the DS
/// or the delegation: CDS, CDNSKEY, CSYNC.
pub const NOTIFY_RRTYPES: [u16; 3] = [59, 60, 62];
/// RRtype CDS.
pub const RRTYPE_CDS: u16 = 59;

/// One parent address's answer to `<child labels>._dsync.<parent> DSYNC`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DsyncAnswer {
    /// The DSYNC records at the name (a wildcard's synthesis included), sorted, each
    /// once, null-scheme records left out (RFC 9859: consumers ignore them).
    Records {
        records: Vec<Dsync>,
        ttl: u32,
    },
    /// Authoritative NODATA or NXDOMAIN from the parent zone, or only null-scheme
    /// records (a parent opting the child out of a wildcard).
    None,
    Unknown(UnknownReason),
}

/// A notification target of the DSYNC set every parent address agreed on, with the
/// addresses its name resolves to (A and AAAA, asked of its zone's servers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotifyTarget {
    /// The RRtype the target takes NOTIFYs for (59 CDS, 60 CDNSKEY, 62 CSYNC).
    pub rrtype: u16,
    pub target: String,
    pub port: u16,
    pub addrs: Vec<IpAddr>,
    /// Why no address is known, when none is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The DSYNC lookup for `zone` at every address of every server of its parent zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DsyncView {
    pub zone: String,
    pub parent: String,
    /// The name asked: `a.b._dsync.test.` for `a.b.test.` under `test.`.
    pub qname: String,
    pub answers: Vec<ServerAnswer<DsyncAnswer>>,
    /// The NOTIFY-scheme records of the agreed set for CDS, CDNSKEY and CSYNC, their
    /// targets resolved (bounded: at most a few distinct targets are looked up).
    #[serde(default)]
    pub targets: Vec<NotifyTarget>,
}

/// What every parent address said together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DsyncVerdict {
    /// Every address answered the same DSYNC set.
    Found { records: Vec<Dsync> },
    /// Every address answered, none with a record.
    None,
    /// Some address gave no usable answer, or the addresses disagree: which, and why.
    Unknown { detail: String },
}

impl DsyncView {
    /// Unanimity, as for the DS (safety rule 3): one set at every address, or none at
    /// every address; any unknown answer or any disagreement is unknown, naming the
    /// address.
    pub fn verdict(&self) -> DsyncVerdict {
        let at = |a: &ServerAnswer<DsyncAnswer>| format!("{} {}", a.server, a.addr);
        if self.answers.is_empty() {
            return DsyncVerdict::Unknown {
                detail: format!("no server of {} to ask", self.parent),
            };
        }
        if let Some(a) = self
            .answers
            .iter()
            .find(|a| matches!(a.answer, DsyncAnswer::Unknown(_)))
        {
            let DsyncAnswer::Unknown(reason) = &a.answer else {
                return DsyncVerdict::Unknown { detail: at(a) };
            };
            return DsyncVerdict::Unknown {
                detail: format!("{}: {reason}", at(a)),
            };
        }
        let records = |a: &ServerAnswer<DsyncAnswer>| match &a.answer {
            DsyncAnswer::Records { records, .. } => Some(records.clone()),
            _ => None,
        };
        let first = &self.answers[0];
        let reference = records(first);
        if let Some(other) = self.answers.iter().find(|a| records(a) != reference) {
            let said = |r: &Option<Vec<Dsync>>| match r {
                Some(r) => describe(r),
                None => "no DSYNC".to_string(),
            };
            return DsyncVerdict::Unknown {
                detail: format!(
                    "the parent's addresses disagree: {} says {}, {} says {}",
                    at(first),
                    said(&reference),
                    at(other),
                    said(&records(other))
                ),
            };
        }
        match reference {
            Some(records) => DsyncVerdict::Found { records },
            None => DsyncVerdict::None,
        }
    }

    /// The agreed set's NOTIFY-scheme records for CDS, CDNSKEY and CSYNC (what a child
    /// operator acts on); empty unless the verdict is `found`.
    pub fn notify_records(&self) -> Vec<Dsync> {
        match self.verdict() {
            DsyncVerdict::Found { records } => records
                .into_iter()
                .filter(|r| r.scheme == DSYNC_SCHEME_NOTIFY && NOTIFY_RRTYPES.contains(&r.rrtype))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The resolved target for NOTIFY(`rrtype`), if the agreed set names one.
    pub fn target_for(&self, rrtype: u16) -> Option<&NotifyTarget> {
        self.targets.iter().find(|t| t.rrtype == rrtype)
    }
}

/// `CDS NOTIFY 5359 registry.test.` for each record, joined.
pub fn describe(records: &[Dsync]) -> String {
    if records.is_empty() {
        return "no DSYNC".into();
    }
    records
        .iter()
        .map(|r| {
            let rrtype = hickory_proto::rr::RecordType::from(r.rrtype);
            let scheme = match r.scheme {
                DSYNC_SCHEME_NOTIFY => "NOTIFY".to_string(),
                other => format!("scheme {other}"),
            };
            format!("{rrtype} {scheme} {} {}", r.port, r.target)
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(rrtype: u16, target: &str) -> Dsync {
        Dsync {
            rrtype,
            scheme: 1,
            port: 5359,
            target: target.into(),
        }
    }

    fn view(answers: Vec<DsyncAnswer>) -> DsyncView {
        DsyncView {
            zone: "child.test.".into(),
            parent: "test.".into(),
            qname: "child._dsync.test.".into(),
            answers: answers
                .into_iter()
                .enumerate()
                .map(|(i, answer)| ServerAnswer {
                    server: format!("ns{i}.test.").into(),
                    addr: IpAddr::from([127, 0, 0, 10 + i as u8]),
                    answer,
                })
                .collect(),
            targets: Vec::new(),
        }
    }

    fn found(records: Vec<Dsync>) -> DsyncAnswer {
        DsyncAnswer::Records { records, ttl: 300 }
    }

    #[test]
    fn every_address_must_say_the_same() {
        let set = vec![record(59, "r.test."), record(62, "r.test.")];
        assert_eq!(
            view(vec![found(set.clone()), found(set.clone())]).verdict(),
            DsyncVerdict::Found {
                records: set.clone()
            }
        );
        assert_eq!(
            view(vec![DsyncAnswer::None, DsyncAnswer::None]).verdict(),
            DsyncVerdict::None
        );
        // Records at one address, none at the other: disagreement, naming both.
        let DsyncVerdict::Unknown { detail } =
            view(vec![found(set.clone()), DsyncAnswer::None]).verdict()
        else {
            panic!("disagreement is unknown")
        };
        assert!(
            detail.contains("ns1.test. 127.0.0.11 says no DSYNC"),
            "{detail}"
        );
        // Another set at the second.
        let DsyncVerdict::Unknown { detail } =
            view(vec![found(set.clone()), found(vec![record(59, "x.test.")])]).verdict()
        else {
            panic!("disagreement is unknown")
        };
        assert!(
            detail.contains("ns1.test. 127.0.0.11 says CDS NOTIFY 5359 x.test."),
            "{detail}"
        );
        // Any unknown, even beside agreement: unknown, naming the address.
        let DsyncVerdict::Unknown { detail } = view(vec![
            found(set.clone()),
            found(set.clone()),
            DsyncAnswer::Unknown(UnknownReason::Timeout),
        ])
        .verdict() else {
            panic!("an unknown answer is unknown")
        };
        assert_eq!(detail, "ns2.test. 127.0.0.12: timeout");
        assert!(matches!(
            view(vec![]).verdict(),
            DsyncVerdict::Unknown { .. }
        ));
    }

    #[test]
    fn only_notify_records_for_the_delegation_types_are_acted_on() {
        let set = vec![
            record(59, "r.test."),
            Dsync {
                scheme: 2,
                ..record(60, "other-scheme.test.")
            },
            record(1, "a-records.test."),
            record(62, "csync.test."),
        ];
        let v = view(vec![found(set.clone()), found(set)]);
        let acted: Vec<(u16, String)> = v
            .notify_records()
            .into_iter()
            .map(|r| (r.rrtype, r.target))
            .collect();
        assert_eq!(
            acted,
            vec![(59, "r.test.".into()), (62, "csync.test.".into())]
        );
        // Nothing is acted on without agreement.
        let split = view(vec![found(vec![record(59, "r.test.")]), DsyncAnswer::None]);
        assert!(split.notify_records().is_empty());
    }
}
