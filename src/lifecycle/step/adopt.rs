//! Adoption: a zone seen for the first time is placed by what the world says.

use super::Run;
use crate::dns::ParentView;
use crate::dns::delegation;
use crate::lifecycle::model::ProviderView;
use crate::lifecycle::state::{Intent, State};

impl Run<'_> {
    /// A zone seen for the first time is placed by what the world says (DESIGN.md §2).
    pub(super) fn adopt(&mut self) {
        match &self.obs.provider {
            ProviderView::Unknown(why) => {
                let why = why.clone();
                self.note(format!("cannot adopt yet: provider unknown ({why})"));
            }
            ProviderView::Missing => self.note(format!(
                "cannot adopt: the provider has no zone {} (create it there, or remove it from [zones])",
                self.zone.name
            )),
            _ if self.elsewhere() && self.zone.intent != Intent::None => {
                if self.parent().is_some_and(ParentView::any_present)
                    || self.parent_known().is_some_and(ParentView::all_absent)
                {
                    self.start_move_in(State::Disabled);
                } else {
                    self.note("cannot adopt yet: the parent's DS answers are incomplete");
                }
            }
            ProviderView::Off if self.elsewhere() => self.go(
                State::Disabled,
                format!(
                    "adopted: DNSSEC is off at the provider, and the parent delegates to {}, not to the provider's name servers",
                    delegation::describe(&self.facts.delegation.old_ns)
                ),
            ),
            ProviderView::Off => self.go(State::Disabled, "adopted: DNSSEC is off at the provider"),
            ProviderView::On(_) if self.elsewhere() => self.go(
                State::AwaitingDelegation,
                format!(
                    "adopted: DNSSEC is on at the provider, but the parent delegates to {}: nothing is asked until `enable` or `disable` starts the move in",
                    delegation::describe(&self.facts.delegation.old_ns)
                ),
            ),
            ProviderView::On(key) => {
                let key = key.clone();
                let Some(parent) = self.parent_known().cloned() else {
                    self.note("cannot adopt yet: the parent's DS answers are incomplete");
                    return;
                };
                self.facts.lifecycle.ds_line = Some(key.ds_line().to_string());
                if parent.all_point_at(&key.dnskey) {
                    self.facts.lifecycle.ds_first_seen_at = Some(self.now);
                    self.go(
                        State::Active,
                        "adopted: DNSSEC is on and every parent server publishes a matching DS",
                    );
                } else if self.child().is_some_and(|c| c.all_serve(&key.dnskey))
                    && self.may_announce()
                {
                    self.announce(&key, "adopted: DNSSEC is on, the parent does not publish a matching DS everywhere");
                } else {
                    self.go(
                        State::Enabling,
                        "adopted: DNSSEC is on, not every name server serves the key yet",
                    );
                }
            }
        }
    }
}
