//! What holds a zone, and who must act for the wait to end: the words every machine that
//! steps a zone (`step`, the signed move) leaves in its facts for `status` and the alert
//! judge (DESIGN.md rule 11: a wait names what really holds it). Below the machines, so
//! that each can name a party without importing another.

use serde::{Deserialize, Serialize};

/// One condition that holds a zone, and whose move ends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub what: String,
    pub on: Party,
    /// The provider account (`[providers.NAME]`) the wait is on, where the step knows it
    /// is one account's: a signed move's, whose two accounts each hold waits of their
    /// own. `None`: the zone's one account (or none); a fact stored before it reads so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// When the wait ends by itself, where the step knows it (a key rollover's TTL hold);
    /// `None`: the state's own deadline, if any, is the one `status` shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<crate::time::Timestamp>,
}

impl Hold {
    pub fn new(what: impl Into<String>, on: Party) -> Self {
        Self {
            what: what.into(),
            on,
            account: None,
            until: None,
        }
    }

    /// The same hold, ending by itself at `until`.
    pub fn until(mut self, until: Option<crate::time::Timestamp>) -> Self {
        self.until = until;
        self
    }

    /// The same hold, on the account named `account`.
    pub fn at(mut self, account: Option<String>) -> Self {
        self.account = account;
        self
    }
}

/// Who must act for a wait to end (`status`'s `on`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Party {
    Daemon,
    Provider,
    Registrar,
    /// The parent's registry, acting on the child's CDS (no person in the loop).
    Registry,
    Ttl,
    Operator,
    Nobody,
}

impl Party {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}
