//! A zone's keys as the core names them: their kind (what a key signs, what a roll of it
//! does) and their ages, the memory `[rollover]`'s lifetimes are counted from. A leaf: the
//! roll machine, the policy's schedule and the facts all speak it.

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// A key's part in the zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum KeyKind {
    Ksk,
    Zsk,
    Csk,
}

impl KeyKind {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether the key signs the DNSKEY set (the parent's DS points at it).
    pub fn sep(self) -> bool {
        self != KeyKind::Zsk
    }

    /// Whether the key signs the zone's other data.
    pub fn signs_data(self) -> bool {
        self != KeyKind::Ksk
    }
}

/// When the daemon first saw one of the zone's active keys (or a roll made it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyAge {
    pub kind: KeyKind,
    pub tag: u16,
    pub algorithm: u8,
    pub since: Timestamp,
}

/// The next roll the policy makes of the zone, and of which key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextRoll {
    pub kind: KeyKind,
    pub at: Timestamp,
}

/// The policy's memory of a zone (its fact `key_ages`): each active key's first sighting,
/// the next roll as the last step computed it (for the metrics, which read no
/// configuration), and why a roll that is due has not started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyAges {
    #[serde(default)]
    pub keys: Vec<KeyAge>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_roll: Option<NextRoll>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}
