//! The operator's recorded intent starts the path it asks for.

use super::Run;
use crate::dns::ParentView;
use crate::lifecycle::model::Effect;
use crate::lifecycle::state::{Intent, State};

impl Run<'_> {
    /// Starts the path the operator asked for; true if it moved the zone.
    pub(super) fn apply_intent(&mut self, state: State) -> bool {
        if self.facts.move_in.moving_in {
            // The move in ends as the intent says (`awaiting_delegation`).
            return false;
        }
        match (self.zone.intent, state) {
            (Intent::Enabled, State::Disabled) => {
                self.go(
                    State::Enabling,
                    "operator asked to enable: switching DNSSEC on at the provider",
                );
                self.effects.push(Effect::EnableDnssec);
                true
            }
            (Intent::Enabled, State::AwaitingDsRemoval | State::TtlWait | State::Disabling) => {
                self.go(
                    State::Enabling,
                    "operator asked to enable during a disable: checking the key is served everywhere before announcing the DS again",
                );
                if state == State::Disabling {
                    self.effects.push(Effect::EnableDnssec);
                }
                true
            }
            (Intent::Disabled, State::Enabling) => {
                self.go(
                    State::AwaitingDsRemoval,
                    "operator asked to disable before the DS was announced: confirming the parent has no DS",
                );
                true
            }
            (Intent::Disabled, State::AwaitingDs) if self.zone.ds_never_submitted => {
                match self.parent_known().map(ParentView::all_absent) {
                    Some(true) if !self.evidence_ok() => return false,
                    Some(true) => {
                        self.gone_now();
                        self.go(
                            State::TtlWait,
                            "operator asked to disable and states the DS was never submitted; every parent server confirms no DS",
                        );
                    }
                    Some(false) => {
                        self.go(
                            State::AwaitingDsRemoval,
                            "operator asked to disable and states the DS was never submitted, but a parent server publishes one: it must be removed",
                        );
                        self.request_removal();
                    }
                    None => return false,
                }
                true
            }
            (Intent::Disabled, State::AwaitingDs | State::DsObserved | State::Active) => {
                self.go(
                    State::AwaitingDsRemoval,
                    "operator asked to disable: DNSSEC stays on until the DS is gone from the parent and its TTL has passed",
                );
                self.request_removal();
                true
            }
            _ => false,
        }
    }
}
