//! The lifecycle of a zone: the states, the pure `step` that moves between them, the
//! policy of timings, the alert conditions, and the guard in front of "DNSSEC off".

pub mod alerts;
mod answers;
pub mod cds;
pub mod facts;
pub mod guard;
pub mod hold;
pub mod keys;
pub mod model;
pub mod moving;
pub mod own_roll;
pub mod parent_way;
pub mod policy;
pub mod registry;
pub mod roll_policy;
pub mod rolling;
pub mod rollover;
pub mod rules;
pub mod sample;
pub mod signed_move;
pub mod state;
pub mod step;
pub mod waiting;

pub use crate::time::{Clock, ManualClock, SystemClock, Timestamp};
pub use alerts::{AlertKind, Judgement, Severity, judge};
pub use facts::Facts;
pub use guard::{GuardRefusal, may_disable};
pub use model::{
    AlertCheck, AuditNote, CdsSetting, Decision, Effect, EffectKind, MoveCall, MoveRequest,
    Observation, ProviderView, RollRequest, Zone,
};
pub use policy::Policy;
pub use rules::disable_deadline;
pub use state::{Intent, State};
pub use step::step;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cds;
#[cfg(test)]
mod tests_evidence;
#[cfg(test)]
mod tests_facts;
#[cfg(test)]
mod tests_move;
#[cfg(test)]
mod tests_moving;
#[cfg(test)]
mod tests_own_roll;
#[cfg(test)]
mod tests_registry;
#[cfg(test)]
mod tests_roll_policy;
#[cfg(test)]
mod tests_rollover;
#[cfg(test)]
mod tests_sample;
#[cfg(test)]
mod tests_signed_move;
