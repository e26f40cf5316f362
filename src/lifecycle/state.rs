//! The states of DESIGN.md section 2 and the operator's intent.
//!
//! Every string form (SQLite, `status --json`, logs, metrics labels) is derived from the
//! variant name in snake case: `strum` for `as_str`/`Display`/`FromStr`/`ALL`, serde for
//! JSON. `names_round_trip` holds the two derivations to the same names.

use serde::{Deserialize, Serialize};
use strum::{Display, EnumString, IntoStaticStr, VariantArray};

/// Where a zone stands. The names are a contract (`status --json`, the SQLite file).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum State {
    Disabled,
    /// Moving in: waiting for every parent address to delegate to the provider's name
    /// servers (safety rule 9).
    AwaitingDelegation,
    Enabling,
    AwaitingDs,
    DsObserved,
    Active,
    AwaitingDsRemoval,
    TtlWait,
    Disabling,
}

impl State {
    pub const ALL: &'static [State] = Self::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Steady states are observed at `poll_active`; the others at `poll_waiting`.
    pub fn is_steady(self) -> bool {
        matches!(self, Self::Active | Self::Disabled)
    }
}

/// What the operator asked for. `None`: watch and follow the path the zone is on, but
/// start neither an enable nor a disable.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    Display,
    EnumString,
    IntoStaticStr,
    VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Intent {
    None,
    Enabled,
    Disabled,
}

impl Intent {
    pub const ALL: &'static [Intent] = Self::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for &s in State::ALL {
            assert_eq!(s.as_str().parse::<State>(), Ok(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(State::AwaitingDsRemoval.as_str(), "awaiting_ds_removal");
        assert!("adopting".parse::<State>().is_err());
        for &i in Intent::ALL {
            assert_eq!(i.as_str().parse::<Intent>(), Ok(i));
            assert_eq!(serde_json::to_value(i).unwrap(), i.as_str());
        }
        assert_eq!(Intent::ALL.len(), 3);
    }
}
