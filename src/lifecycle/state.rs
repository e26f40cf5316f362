//! The states of DESIGN.md section 2 and the operator's intent.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a zone stands. The names are a contract (`status --json`, the SQLite file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Disabled,
    Enabling,
    AwaitingDs,
    DsObserved,
    Active,
    AwaitingDsRemoval,
    TtlWait,
    Disabling,
}

impl State {
    pub const ALL: [State; 8] = [
        State::Disabled,
        State::Enabling,
        State::AwaitingDs,
        State::DsObserved,
        State::Active,
        State::AwaitingDsRemoval,
        State::TtlWait,
        State::Disabling,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::Enabling => "enabling",
            Self::AwaitingDs => "awaiting_ds",
            Self::DsObserved => "ds_observed",
            Self::Active => "active",
            Self::AwaitingDsRemoval => "awaiting_ds_removal",
            Self::TtlWait => "ttl_wait",
            Self::Disabling => "disabling",
        }
    }

    /// Steady states are observed at `poll_active`; the others at `poll_waiting`.
    pub fn is_steady(self) -> bool {
        matches!(self, Self::Active | Self::Disabled)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}")]
pub struct ParseError {
    pub what: &'static str,
    pub value: String,
}

impl FromStr for State {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| ParseError {
                what: "state",
                value: s.to_string(),
            })
    }
}

/// What the operator asked for. `None`: watch and follow the path the zone is on, but
/// start neither an enable nor a disable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    None,
    Enabled,
    Disabled,
}

impl Intent {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Enabled => "enabled",
            Self::Disabled => "disabled",
        }
    }
}

impl fmt::Display for Intent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Intent {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Self::None),
            "enabled" => Ok(Self::Enabled),
            "disabled" => Ok(Self::Disabled),
            other => Err(ParseError {
                what: "intent",
                value: other.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in State::ALL {
            assert_eq!(s.as_str().parse::<State>(), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert!("adopting".parse::<State>().is_err());
        for i in [Intent::None, Intent::Enabled, Intent::Disabled] {
            assert_eq!(i.as_str().parse::<Intent>(), Ok(i));
        }
    }
}
