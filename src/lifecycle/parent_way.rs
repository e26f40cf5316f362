//! Which way a DS reaches the parent (pure): entered at the registrar, picked up by the
//! registry's CDS scan, or nudged there by NOTIFY(CDS) to the parent's notification
//! target (RFC 9859). Resolved, in this order, from the operator's configuration
//! (`[parents."NAME"]`), a DSYNC record the parent publishes for the child, built-in
//! knowledge of registries that scan CDS or CDNSKEY, and else the registrar.
//!
//! This says only how the DS gets there. Whether it is there is still what every parent
//! address answers (safety rules 3 and 10): a path never stands in for an observation.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::dns::ObserveError;
use crate::dns::observe::dsync::{DsyncVerdict, DsyncView, RRTYPE_CDS};
use crate::time::Timestamp;

/// How long a resolved path is trusted before the parent's DSYNC is asked again.
pub const PATH_REFRESH: Duration = Duration::from_secs(3600);

/// A NOTIFY(CDS) the engine sent after a step decided it (`Effect::NotifyCds`), and what
/// came of it: kept on its outbox row, and read back by the next step
/// (`Observation::cds_notify`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdsNotified {
    pub at: Timestamp,
    pub target: String,
    /// The address that answered, else the last one tried.
    pub addr: Option<String>,
    pub port: u16,
    /// What the NOTIFY was about: `key <tags>` or `delete`.
    pub signal: String,
    pub acknowledged: bool,
    /// In words: "acknowledged", "no answer after 3 attempts", "REFUSED".
    pub outcome: String,
}

/// A NOTIFY(CDS) a step decided: where it goes, and about which signal. Stored in the
/// outbox as the effect's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotifyPlan {
    pub target: String,
    pub port: u16,
    pub addrs: Vec<IpAddr>,
    pub signal: String,
}

/// `ds_path` of a `[parents."NAME"]` block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DsPathSetting {
    /// A DSYNC record, then built-in knowledge, then the registrar.
    #[default]
    Auto,
    Registrar,
    CdsScan,
    Notify,
}

/// The operator's word on one parent zone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParentWay {
    pub ds_path: DsPathSetting,
    /// How long the registry's scan may take to act before the daemon says so.
    pub scan_period: Option<Duration>,
    /// Whether the registry takes a first DS (bootstrap) from the CDS.
    pub accepts_first_ds: Option<bool>,
    /// How long the registry wants an unsigned zone's CDS unchanged before its first DS.
    pub first_ds_after: Option<Duration>,
    /// Also run the registrar hook when the DS goes by CDS scan or NOTIFY.
    pub call_registrar_hook: bool,
    /// The NOTIFY target for `ds_path = "notify"`: a host name or an address.
    pub notify_target: Option<String>,
    pub notify_port: u16,
}

/// Every `[parents."NAME"]` block, by the parent's name (normalised, trailing dot).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParentWays {
    pub parents: BTreeMap<String, ParentWay>,
}

/// A registry known to scan its children's CDS or CDNSKEY and update the DS itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Registry {
    pub zones: &'static [&'static str],
    pub operator: &'static str,
    /// `CDS` or `CDNSKEY`: what the scan reads.
    pub reads: &'static str,
    pub scan_period: Duration,
    /// Whether a zone without a DS gets its first one from the scan, and after how long
    /// the signal must have stayed unchanged.
    pub first_ds_after: Option<Duration>,
    /// Where this is said publicly.
    pub source: &'static str,
}

const DAY: Duration = Duration::from_secs(86_400);

/// Built-in knowledge, kept to what the registries say publicly (each entry's `source`).
pub const REGISTRIES: &[Registry] = &[
    // SWITCH: "checks all registered .ch and .li domain names for the presence of CDS
    // records on a daily basis"; a first DS once the CDS set is unchanged for three
    // consecutive days and three runs (at once with RFC 9615 authenticated bootstrapping).
    Registry {
        zones: &["ch.", "li."],
        operator: "SWITCH",
        reads: "CDS",
        scan_period: DAY,
        first_ds_after: Some(Duration::from_secs(3 * 86_400)),
        source: "https://www.nic.ch/security/cds/",
    },
    // The Swedish Internet Foundation: scans CDS daily from three locations; enabling
    // DNSSEC needs the CDS "consistently published for more than 72 consecutive hours".
    Registry {
        zones: &["se.", "nu."],
        operator: "Internetstiftelsen",
        reads: "CDS",
        scan_period: DAY,
        first_ds_after: Some(Duration::from_secs(3 * 86_400)),
        source: "https://internetstiftelsen.se/en/domains/tech-tools/automated-dnssec-provisioning/",
    },
    // CZ.NIC: once a day looks for CDNSKEY at every .cz domain; an unsigned domain's
    // first keyset after seven days of unchanged CDNSKEY over TCP at every server.
    Registry {
        zones: &["cz."],
        operator: "CZ.NIC",
        reads: "CDNSKEY",
        scan_period: DAY,
        first_ds_after: Some(Duration::from_secs(7 * 86_400)),
        source: "https://www.nic.cz/page/3909/automatizovana-sprava-keysetu/",
    },
];

/// The registry `parent` is known to be run by, if it scans.
pub fn known_registry(parent: &str) -> Option<&'static Registry> {
    REGISTRIES.iter().find(|r| r.zones.contains(&parent))
}

/// How the DS reaches the parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DsPath {
    /// Someone enters it at the registrar (the registrar hook, or the operator).
    Registrar,
    /// The registry reads the child's CDS/CDNSKEY on its own schedule.
    CdsScan,
    /// NOTIFY(CDS) to this target tells the registry to scan now.
    Notify {
        target: String,
        port: u16,
        /// The target's addresses, where known (empty: not resolved, see `note`).
        addrs: Vec<IpAddr>,
    },
}

/// Why the path is what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PathReason {
    /// `[parents."NAME"] ds_path`.
    Configured,
    /// A DSYNC record every parent address agreed on, at this name.
    Dsync { owner: String },
    /// Built-in knowledge of the registry.
    BuiltIn { operator: String, source: String },
    /// Nothing else said: the registrar.
    Default,
}

/// What the DSYNC lookup gave, as the resolution reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DsyncHint {
    /// An agreed NOTIFY-scheme record for CDS.
    Notify {
        owner: String,
        target: String,
        port: u16,
        addrs: Vec<IpAddr>,
    },
    /// The parent publishes none (for CDS by NOTIFY).
    None,
    /// Not known: which address and why.
    Unknown(String),
}

impl DsyncHint {
    /// The hint of an observer's DSYNC view (or of its failure).
    pub fn from_view(view: Result<&DsyncView, &ObserveError>) -> Self {
        let view = match view {
            Ok(v) => v,
            Err(e) => return Self::Unknown(e.reason.clone()),
        };
        match view.verdict() {
            DsyncVerdict::Unknown { detail } => Self::Unknown(detail),
            DsyncVerdict::None => Self::None,
            DsyncVerdict::Found { .. } => match view.target_for(RRTYPE_CDS) {
                Some(t) => Self::Notify {
                    owner: view.qname.clone(),
                    target: t.target.clone(),
                    port: t.port,
                    addrs: t.addrs.clone(),
                },
                None => Self::None,
            },
        }
    }
}

/// The path for one parent zone, with its reason and the timings that come with it (kept
/// in the zone's facts as last resolved).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentPath {
    pub parent: String,
    pub path: DsPath,
    pub reason: PathReason,
    /// How long a scan may take (configured, else the registry's known period).
    #[serde(with = "opt_secs")]
    pub scan_period: Option<Duration>,
    pub accepts_first_ds: Option<bool>,
    #[serde(with = "opt_secs")]
    pub first_ds_after: Option<Duration>,
    /// What the registry's scan reads: `CDS`, or `CDNSKEY` where it is known to.
    pub signal: String,
    /// The registrar hook runs too (always, on the registrar path).
    pub call_registrar_hook: bool,
    /// What else is worth saying: a DSYNC lookup that was unknown, a NOTIFY target
    /// without an address.
    pub note: Option<String>,
}

/// The path for `parent`: configured beats DSYNC beats built-in knowledge beats the
/// registrar. Pure.
pub fn resolve(parent: &str, ways: &ParentWays, dsync: &DsyncHint) -> ParentPath {
    let way = ways.parents.get(parent).cloned().unwrap_or_default();
    let known = known_registry(parent);
    let dsync_note = match dsync {
        DsyncHint::Unknown(why) => Some(format!("DSYNC lookup unknown: {why}")),
        _ => None,
    };
    let mut out = ParentPath {
        parent: parent.to_string(),
        path: DsPath::Registrar,
        reason: PathReason::Default,
        scan_period: way.scan_period.or(known.map(|r| r.scan_period)),
        accepts_first_ds: way
            .accepts_first_ds
            .or(known.map(|r| r.first_ds_after.is_some())),
        first_ds_after: way.first_ds_after.or(known.and_then(|r| r.first_ds_after)),
        signal: known.map_or("CDS", |r| r.reads).to_string(),
        call_registrar_hook: way.call_registrar_hook,
        note: None,
    };
    let notify_from_dsync = |out: &mut ParentPath| -> bool {
        let DsyncHint::Notify {
            owner,
            target,
            port,
            addrs,
        } = dsync
        else {
            return false;
        };
        out.path = DsPath::Notify {
            target: target.clone(),
            port: *port,
            addrs: addrs.clone(),
        };
        out.reason = PathReason::Dsync {
            owner: owner.clone(),
        };
        if addrs.is_empty() {
            out.note = Some(format!("no address known for {target}"));
        }
        true
    };
    match way.ds_path {
        DsPathSetting::Registrar => {
            out.reason = PathReason::Configured;
        }
        DsPathSetting::CdsScan => {
            out.path = DsPath::CdsScan;
            out.reason = PathReason::Configured;
        }
        DsPathSetting::Notify => {
            out.reason = PathReason::Configured;
            match way.notify_target {
                Some(target) => {
                    let addrs = match (target.parse::<IpAddr>(), dsync) {
                        (Ok(ip), _) => vec![ip],
                        // The same target as the DSYNC record names: its addresses.
                        (
                            _,
                            DsyncHint::Notify {
                                target: t, addrs, ..
                            },
                        ) if *t == target => addrs.clone(),
                        _ => Vec::new(),
                    };
                    out.path = DsPath::Notify {
                        target,
                        port: way.notify_port,
                        addrs,
                    };
                }
                // No target configured: the DSYNC record's, if there is one.
                None => {
                    if notify_from_dsync(&mut out) {
                        out.reason = PathReason::Configured;
                    } else {
                        out.note = Some(
                            "ds_path = \"notify\" without notify_target, and no DSYNC target: the DS goes by the registrar".into(),
                        );
                    }
                }
            }
        }
        DsPathSetting::Auto => {
            if !notify_from_dsync(&mut out)
                && let Some(r) = known
            {
                out.path = DsPath::CdsScan;
                out.reason = PathReason::BuiltIn {
                    operator: r.operator.to_string(),
                    source: r.source.to_string(),
                };
            }
        }
    }
    if matches!(out.path, DsPath::Registrar) {
        out.call_registrar_hook = true;
    }
    if out.note.is_none() {
        out.note = dsync_note;
    }
    out
}

impl ParentPath {
    /// One line for `check`: the path and why.
    pub fn describe(&self) -> String {
        let why = match &self.reason {
            PathReason::Configured => format!(" (configured in [parents.\"{}\"])", self.parent),
            PathReason::Dsync { owner } => format!(", from DSYNC at {owner}"),
            PathReason::BuiltIn { operator, source } => {
                format!(" (built-in: {operator}, {source})")
            }
            PathReason::Default => " (default)".into(),
        };
        let how = match &self.path {
            DsPath::Registrar => "DS entered at the registrar".to_string(),
            DsPath::CdsScan => {
                let mut s = format!("the registry scans {}", self.signal);
                if let Some(p) = self.scan_period {
                    s.push_str(&format!(" every {}", duration_text(p)));
                }
                match (self.accepts_first_ds, self.first_ds_after) {
                    (Some(true), Some(after)) => s.push_str(&format!(
                        ", a first DS after {} of unchanged {}",
                        duration_text(after),
                        self.signal
                    )),
                    (Some(true), None) => s.push_str(", a first DS too"),
                    (Some(false), _) => s.push_str(", no first DS"),
                    (None, _) => {}
                }
                s
            }
            DsPath::Notify {
                target,
                port,
                addrs,
            } => {
                let at = if addrs.is_empty() {
                    "no address known".to_string()
                } else {
                    addrs
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                format!("DS by NOTIFY(CDS) to {target} port {port} ({at})")
            }
        };
        let mut line = format!("parent {}: {how}{why}", self.parent);
        if self.call_registrar_hook && !matches!(self.path, DsPath::Registrar) {
            line.push_str("; the registrar hook runs too");
        }
        if let Some(note) = &self.note {
            line.push_str(&format!(" [{note}]"));
        }
        line
    }
}

/// A duration as the configuration writes it: `1d`, `3d`, `12h`, `90s`.
pub fn duration_text(d: Duration) -> String {
    let secs = d.as_secs();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if secs >= size && secs.is_multiple_of(size) {
            return format!("{}{unit}", secs / size);
        }
    }
    format!("{secs}s")
}

/// An optional duration in JSON as whole seconds, or null.
mod opt_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dsync_notify() -> DsyncHint {
        DsyncHint::Notify {
            owner: "x._dsync.ch.".into(),
            target: "notify.nic.ch.".into(),
            port: 5359,
            addrs: vec![IpAddr::from([127, 0, 0, 9])],
        }
    }

    fn configured(parent: &str, way: ParentWay) -> ParentWays {
        ParentWays {
            parents: BTreeMap::from([(parent.to_string(), way)]),
        }
    }

    #[test]
    fn configured_beats_dsync_beats_built_in_beats_default() {
        // Configured: whatever the DNS says.
        let ways = configured(
            "ch.",
            ParentWay {
                ds_path: DsPathSetting::Registrar,
                ..ParentWay::default()
            },
        );
        let p = resolve("ch.", &ways, &dsync_notify());
        assert_eq!(
            (p.path, p.reason),
            (DsPath::Registrar, PathReason::Configured)
        );

        // DSYNC beats the built-in scan of ch.
        let p = resolve("ch.", &ParentWays::default(), &dsync_notify());
        assert_eq!(
            p.path,
            DsPath::Notify {
                target: "notify.nic.ch.".into(),
                port: 5359,
                addrs: vec![IpAddr::from([127, 0, 0, 9])]
            }
        );
        assert_eq!(
            p.reason,
            PathReason::Dsync {
                owner: "x._dsync.ch.".into()
            }
        );
        assert!(!p.call_registrar_hook);

        // No DSYNC: built-in knowledge, with its period and bootstrap.
        let p = resolve("ch.", &ParentWays::default(), &DsyncHint::None);
        assert_eq!(p.path, DsPath::CdsScan);
        assert!(matches!(
            p.reason,
            PathReason::BuiltIn { ref operator, .. } if operator == "SWITCH"
        ));
        assert_eq!(p.scan_period, Some(DAY));
        assert_eq!(p.accepts_first_ds, Some(true));
        assert_eq!(p.first_ds_after, Some(3 * DAY));
        assert_eq!(
            p.describe(),
            "parent ch.: the registry scans CDS every 1d, a first DS after 3d of unchanged CDS (built-in: SWITCH, https://www.nic.ch/security/cds/)"
        );
        // CZ.NIC reads CDNSKEY.
        let p = resolve("cz.", &ParentWays::default(), &DsyncHint::None);
        assert!(
            p.describe()
                .contains("scans CDNSKEY every 1d, a first DS after 7d of unchanged CDNSKEY"),
            "{}",
            p.describe()
        );

        // Nothing known: the registrar, by default, and the hook runs.
        let p = resolve("com.", &ParentWays::default(), &DsyncHint::None);
        assert_eq!(
            (p.path.clone(), p.reason.clone()),
            (DsPath::Registrar, PathReason::Default)
        );
        assert!(p.call_registrar_hook);
        assert_eq!(
            p.describe(),
            "parent com.: DS entered at the registrar (default)"
        );
    }

    /// An unknown DSYNC lookup is no NOTIFY target: the next source decides, and the
    /// line says the lookup was unknown.
    #[test]
    fn an_unknown_dsync_lookup_is_said_and_decides_nothing() {
        let hint = DsyncHint::Unknown("b.nic.test. 127.0.0.3: timeout".into());
        let p = resolve("se.", &ParentWays::default(), &hint);
        assert_eq!(p.path, DsPath::CdsScan);
        assert!(
            p.describe()
                .contains("[DSYNC lookup unknown: b.nic.test. 127.0.0.3: timeout]"),
            "{}",
            p.describe()
        );
        let p = resolve("test.", &ParentWays::default(), &hint);
        assert_eq!(p.path, DsPath::Registrar);
    }

    #[test]
    fn configured_values_override_the_built_in_ones() {
        let ways = configured(
            "cz.",
            ParentWay {
                ds_path: DsPathSetting::CdsScan,
                scan_period: Some(2 * DAY),
                accepts_first_ds: Some(false),
                call_registrar_hook: true,
                ..ParentWay::default()
            },
        );
        let p = resolve("cz.", &ways, &DsyncHint::None);
        assert_eq!(
            (p.path.clone(), p.reason.clone()),
            (DsPath::CdsScan, PathReason::Configured)
        );
        assert_eq!(p.scan_period, Some(2 * DAY));
        assert_eq!(p.accepts_first_ds, Some(false));
        assert!(p.call_registrar_hook);
        assert!(
            p.describe().ends_with(
                "no first DS (configured in [parents.\"cz.\"]); the registrar hook runs too"
            ),
            "{}",
            p.describe()
        );

        // Notify with a configured address target.
        let ways = configured(
            "test.",
            ParentWay {
                ds_path: DsPathSetting::Notify,
                notify_target: Some("127.0.0.53".into()),
                notify_port: 5300,
                ..ParentWay::default()
            },
        );
        let p = resolve("test.", &ways, &DsyncHint::None);
        assert_eq!(
            p.path,
            DsPath::Notify {
                target: "127.0.0.53".into(),
                port: 5300,
                addrs: vec![IpAddr::from([127, 0, 0, 53])]
            }
        );
        // Configured notify without a target takes the DSYNC one, still "configured".
        let ways = configured(
            "ch.",
            ParentWay {
                ds_path: DsPathSetting::Notify,
                ..ParentWay::default()
            },
        );
        let p = resolve("ch.", &ways, &dsync_notify());
        assert!(matches!(p.path, DsPath::Notify { ref target, .. } if target == "notify.nic.ch."));
        assert_eq!(p.reason, PathReason::Configured);
        let p = resolve("ch.", &ways, &DsyncHint::None);
        assert_eq!(p.path, DsPath::Registrar);
        assert!(
            p.note
                .as_deref()
                .unwrap_or("")
                .contains("without notify_target")
        );
    }

    #[test]
    fn every_built_in_entry_names_its_source_and_a_normalised_zone() {
        for r in REGISTRIES {
            assert!(r.source.starts_with("https://"), "{r:?}");
            for z in r.zones {
                assert!(z.ends_with('.') && *z == z.to_ascii_lowercase(), "{z}");
            }
        }
        assert!(known_registry("li.").is_some());
        assert!(known_registry("com.").is_none());
    }
}
