//! The conditions dnssec-warden alerts on. `step` judges them; the engine turns changes
//! into one notification per episode and a `resolved` when the condition clears.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    DsUnpublishedOverdue,
    DsRemovalOverdue,
    DsMismatch,
    /// The parent's DS set holds nothing validators can use: insecure to them.
    DsUnsupported,
    DnssecOffWithDs,
    PartialPropagationStuck,
    ValidationFailed,
    SignaturesExpiring,
    ObservationFailing,
    RegistrarHookFailed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Warning,
    Critical,
}

impl AlertKind {
    pub const ALL: [AlertKind; 10] = [
        AlertKind::DsUnpublishedOverdue,
        AlertKind::DsRemovalOverdue,
        AlertKind::DsMismatch,
        AlertKind::DsUnsupported,
        AlertKind::DnssecOffWithDs,
        AlertKind::PartialPropagationStuck,
        AlertKind::ValidationFailed,
        AlertKind::SignaturesExpiring,
        AlertKind::ObservationFailing,
        AlertKind::RegistrarHookFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::DsUnpublishedOverdue => "ds_unpublished_overdue",
            Self::DsRemovalOverdue => "ds_removal_overdue",
            Self::DsMismatch => "ds_mismatch",
            Self::DsUnsupported => "ds_unsupported",
            Self::DnssecOffWithDs => "dnssec_off_with_ds",
            Self::PartialPropagationStuck => "partial_propagation_stuck",
            Self::ValidationFailed => "validation_failed",
            Self::SignaturesExpiring => "signatures_expiring",
            Self::ObservationFailing => "observation_failing",
            Self::RegistrarHookFailed => "registrar_hook_failed",
        }
    }

    /// Critical: the domain fails validation now. Warning: a step is late or at risk.
    pub fn severity(self) -> Severity {
        match self {
            Self::DsMismatch | Self::DnssecOffWithDs | Self::ValidationFailed => Severity::Critical,
            _ => Severity::Warning,
        }
    }
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Warning => "warning",
            Self::Critical => "critical",
        }
    }
}

impl fmt::Display for AlertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AlertKind {
    type Err = super::state::ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AlertKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| super::state::ParseError {
                what: "alert kind",
                value: s.to_string(),
            })
    }
}

/// One judged condition: firing with its message, or clear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertCheck {
    pub kind: AlertKind,
    pub firing: Option<String>,
}

impl AlertCheck {
    pub fn new(kind: AlertKind, firing: Option<String>) -> Self {
        Self { kind, firing }
    }

    pub fn firing(kind: AlertKind, message: String) -> Self {
        Self {
            kind,
            firing: Some(message),
        }
    }

    pub fn clear(kind: AlertKind) -> Self {
        Self { kind, firing: None }
    }
}
