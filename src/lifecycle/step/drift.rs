//! The provider changed outside dnssec-warden: the zone moves to the state that describes
//! the world, and a DS instruction that would go stale is withdrawn (safety rule 8).

use super::Run;
use crate::lifecycle::model::{Effect, ProviderView};
use crate::lifecycle::state::{Intent, State};

impl Run<'_> {
    /// The provider no longer matches what the zone's state stands on (changed outside
    /// dnssec-warden). The daemon's word must stay true and no DS instruction may go stale
    /// (safety rule 8): the zone moves to the state that describes the world, the stale
    /// instruction is withdrawn at once, and the provider is switched only where the
    /// operator's recorded intent asks for it (never "fixed" by guessing, rule 7).
    /// True if it moved the zone.
    pub(super) fn follow_provider_drift(&mut self, state: State) -> bool {
        match (state, &self.obs.provider) {
            (State::AwaitingDs | State::DsObserved | State::Active, ProviderView::Off) => {
                let reason = match self.zone.intent {
                    Intent::Enabled => "switching it on again (the operator's intent is enabled)",
                    _ => {
                        "waiting for the operator: `enable` switches it on again, `disable` finishes switching off"
                    }
                };
                self.withdraw_instruction(
                    state,
                    format!("DNSSEC is off at the provider (switched off outside dnssec-warden); {reason}"),
                );
                true
            }
            (State::AwaitingDs, ProviderView::On(key)) if self.key_changed(key) => {
                let line = key.ds_line().to_string();
                self.withdraw_instruction(
                    state,
                    format!("the provider's key changed to {line}: the new DS is announced once every name server serves it"),
                );
                true
            }
            // The provider cannot be asked: the DS announced is checked against what the
            // name servers serve, so that an instruction (perhaps still owed after a crash)
            // is not given for a key they do not serve (safety rules 4 and 8).
            (State::AwaitingDs, ProviderView::Unknown(_) | ProviderView::Missing) => {
                let Some(line) = self
                    .facts
                    .lifecycle
                    .ds_line
                    .as_deref()
                    .and_then(|l| crate::dnssec::DsLine::parse(l).ok())
                else {
                    return false;
                };
                let Some(lacking) = self.child().and_then(|c| c.lacking_ds(&line.ds)) else {
                    return false;
                };
                let why = format!(
                    "name server {} ({}) does not serve the key of the DS announced, validly signed, and the provider cannot be asked which key it signs with; the DS is announced again once every name server has served the provider's key for the propagation hold",
                    lacking.server, lacking.addr
                );
                self.withdraw_instruction(state, why);
                true
            }
            (State::AwaitingDs, ProviderView::On(key)) => {
                let Some(lacking) = self.child().and_then(|c| c.lacking(&key.dnskey)) else {
                    return false;
                };
                let why = format!(
                    "name server {} ({}) no longer serves the key; the DS is announced again once every name server has served it for the propagation hold",
                    lacking.server, lacking.addr
                );
                self.withdraw_instruction(state, why);
                true
            }
            (State::Disabled, ProviderView::On(_)) => match self.zone.intent {
                Intent::Disabled => {
                    self.go(
                        State::AwaitingDsRemoval,
                        "DNSSEC is on at the provider (switched on outside dnssec-warden) and the operator's intent is disabled: switching it off again the safe way, once no parent server publishes a DS",
                    );
                    true
                }
                // Enabled: the intent starts the enable path; none: the zone is adopted
                // again as it is now.
                Intent::Enabled => false,
                Intent::None if self.parent_known().is_some() => {
                    self.adopt();
                    true
                }
                Intent::None => true,
            },
            _ => false,
        }
    }

    /// Leaves a state in which a DS was (or may have been) told "to enter" for `enabling`:
    /// the instruction is withdrawn in the audit trail, in status and alerts, and, if it
    /// was announced in this state, at the registrar hook.
    fn withdraw_instruction(&mut self, state: State, why: String) {
        let told = self.withdraw_given_ds(state);
        self.facts.lifecycle.dnskey_everywhere_at = None;
        self.facts.lifecycle.hold_until = None;
        self.facts.lifecycle.ds_to_enter = None;
        self.go(State::Enabling, format!("{why}{told}"));
    }

    /// In `awaiting_ds` the DS was given to enter: its removal is asked for (safety rule
    /// 8), and the words for the history returned; elsewhere nothing.
    pub(super) fn withdraw_given_ds(&mut self, state: State) -> String {
        if state != State::AwaitingDs {
            return String::new();
        }
        let line = self.facts.lifecycle.ds_line.clone();
        let told = format!(
            "; the DS instruction is withdrawn: do not enter {} at the registrar, and remove it if it was entered",
            line.as_deref().unwrap_or("(none)")
        );
        self.effects
            .push(Effect::RequestDsRemoval { ds_line: line });
        told
    }
}
