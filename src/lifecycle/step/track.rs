//! What every step keeps true to its look, whatever the state: the health of the looks,
//! the TTLs and keys served, the DS instruction shown, the provider's CDS setting (rule
//! 14), a zone the provider no longer has.

use super::Run;
use super::enabling::enterable_ds;
use crate::dns::{ChildView, ParentView};
use crate::dnssec::CdsPublication;
use crate::lifecycle::hold::{Hold, Party};
use crate::lifecycle::model::{
    CdsSetting, Effect, ProviderView, parent_ds_lines, served_fingerprint,
};
use crate::lifecycle::rules;
use crate::lifecycle::state::{Intent, State};

impl Run<'_> {
    /// Counts incomplete observations (provider unknown, parent unknown anywhere).
    pub(super) fn track_health(&mut self) {
        let complete = matches!(self.obs.provider, ProviderView::On(_) | ProviderView::Off)
            && self.obs.zone_ttl_error.is_none()
            && self.parent_known().is_some();
        if complete {
            self.facts.health.failing_since = None;
            self.facts.health.failures = 0;
        } else {
            self.facts.health.failing_since.get_or_insert(self.now);
            self.facts.health.failures = self.facts.health.failures.saturating_add(1);
        }
    }

    /// Remembers the key set the name servers served when the provider was last asked:
    /// a settled zone whose servers still serve that set needs no per-zone call.
    pub(super) fn track_served_keys(&mut self) {
        if !self.obs.provider_asked {
            return;
        }
        self.facts.routine.served_keys_when_asked = match (&self.obs.provider, self.child()) {
            (ProviderView::On(_), Some(child)) if !child.any_unknown() => {
                Some(served_fingerprint(child))
            }
            _ => None,
        };
    }

    /// Remembers the largest DS and DNSKEY TTLs served (safety rule 2).
    pub(super) fn track_ttl(&mut self) {
        if let Some(ttl) = self.parent().and_then(ParentView::max_ds_ttl) {
            self.facts.lifecycle.max_ds_ttl =
                Some(self.facts.lifecycle.max_ds_ttl.map_or(ttl, |m| m.max(ttl)));
        }
        if let Some(ttl) = self.child().and_then(ChildView::max_dnskey_ttl) {
            self.facts.lifecycle.max_dnskey_ttl = Some(
                self.facts
                    .lifecycle
                    .max_dnskey_ttl
                    .map_or(ttl, |m| m.max(ttl)),
            );
        }
    }

    /// Keeps `ds_to_enter` and `provider_off_since` true to this observation.
    pub(super) fn track_instruction(&mut self) {
        if self.facts.move_in.moving_in && self.state == Some(State::AwaitingDsRemoval) {
            if let Some(parent) = self.parent() {
                let lines = parent_ds_lines(parent);
                if !lines.is_empty() || !parent.any_unknown() {
                    self.facts.move_in.ds_to_remove = lines;
                }
            }
        } else {
            self.facts.move_in.ds_to_remove.clear();
        }
        self.facts.lifecycle.ds_to_enter = match self.state {
            Some(State::AwaitingDs | State::DsObserved | State::Active) => {
                match enterable_ds(&self.facts, self.obs, self.policy) {
                    Ok(line) => Some(line),
                    Err(hold) => {
                        if self.state == Some(State::AwaitingDs)
                            && self.facts.wait.held_by.is_none()
                        {
                            self.facts.wait.held_by = Some(Hold::new(
                                format!(
                                    "the DS at every parent server; it is not shown to enter now: {}",
                                    hold.what
                                ),
                                hold.on,
                            ));
                        }
                        None
                    }
                }
            }
            _ => None,
        };
        self.facts.lifecycle.dnskey_to_enter =
            match (&self.facts.lifecycle.ds_to_enter, &self.obs.provider) {
                (Some(_), ProviderView::On(key)) => Some(key.dnskey_line()),
                _ => None,
            };
        let enable_path = matches!(
            self.state,
            Some(State::Enabling | State::AwaitingDs | State::DsObserved | State::Active)
        );
        match &self.obs.provider {
            ProviderView::Off if enable_path => {
                self.facts
                    .lifecycle
                    .provider_off_since
                    .get_or_insert(self.now);
            }
            ProviderView::Unknown(_) | ProviderView::Missing if enable_path => {}
            _ => self.facts.lifecycle.provider_off_since = None,
        }
    }

    /// Safety rule 14: the provider's CDS/CDNSKEY setting brought to what the zone's
    /// intent, state and instruction allow, where it was read at this look.
    pub(super) fn track_cds(&mut self) {
        let to = match &self.facts.provider_roll {
            // The provider's own roll: its CDS (every entry point's, both keys while it
            // serves both) is the addition and, once the old key is waited out, the
            // removal; a registry that scans follows it as the registrar follows the
            // requests (`own_roll`).
            Some(roll) if self.zone.intent != Intent::Disabled && roll.cds_key_wanted() => {
                CdsPublication::Key
            }
            _ => rules::cds_wanted(self.zone.intent, self.state, &self.facts.lifecycle),
        };
        match &self.obs.cds {
            CdsSetting::Set(now) if *now != to => self.effects.push(Effect::SetCds { to }),
            // One of the daemon's own settings, half applied (an answer lost between its
            // two writes): made whole again, to what is wanted now (rule 11: said).
            CdsSetting::HalfApplied(halves) => {
                // The CDS half is written first: the one that differs from it is the older.
                let verb = if halves.cds == to {
                    "completed"
                } else if halves.cdnskey == to {
                    "rolled back"
                } else {
                    "replaced"
                };
                self.note(format!(
                    "the provider's CDS setting is half applied ({halves}), a setting of the daemon's whose answer was lost between its two writes: {verb}, set whole to {}",
                    to.describe()
                ));
                self.effects.push(Effect::SetCds { to });
            }
            _ => {}
        }
    }

    /// The provider has no such zone: whatever the state, that is what holds it (and,
    /// where the parent still delegates to the provider, the domain is down: alerted).
    pub(super) fn track_missing(&mut self) {
        if matches!(self.obs.provider, ProviderView::Missing) {
            self.facts.wait.held_by = Some(Hold::new(
                format!(
                    "the provider, which answers that it has no zone {} (deleted there?); re-create it there, or remove the zone from [zones]",
                    self.zone.name
                ),
                Party::Provider,
            ));
        }
    }
}
