//! The DS request to the parent: to the registry, by the CDS the provider publishes
//! (rule 14), where it takes it, else to the registrar; and to the registrar after all
//! where the registry does not act in time. NOTIFY(CDS) where one is due.

use super::Run;
use crate::dnssec::{CdsPublication, DnssecKey};
use crate::lifecycle::model::Effect;
use crate::lifecycle::registry;
use crate::lifecycle::state::{Intent, State};

impl Run<'_> {
    /// Asks for the DS to be removed: of the registry, by the CDS delete request the
    /// provider publishes (rule 14), where it acts on it; else at the registrar.
    pub(super) fn request_removal(&mut self) {
        if self.by_registry(CdsPublication::Delete) {
            self.facts.parent_way.registry_since = Some(self.now);
            let path = self.facts.parent_way.ds_path.clone();
            let path = path.as_ref();
            self.note(format!(
                "the DS removal goes to {} by the CDS delete request ({}): nothing to do at the registrar unless it has not acted by {}",
                registry::registry_of(path),
                registry::route_text(path, None),
                registry::deadline(path, self.now, false, self.policy)
            ));
            if !path.is_some_and(|p| p.call_registrar_hook) {
                return;
            }
        }
        self.effects.push(Effect::RequestDsRemoval {
            ds_line: self.facts.lifecycle.ds_line.clone(),
        });
    }

    /// Announces the DS: to the registry, by the CDS the provider publishes for the key
    /// (rule 14), where it takes it; else to the registrar.
    pub(super) fn announce(&mut self, key: &DnssecKey, reason: &str) {
        let line = key.ds_line().to_string();
        self.facts.lifecycle.ds_line = Some(line.clone());
        self.facts.lifecycle.ds_announced_at = Some(self.now);
        if self.by_registry(CdsPublication::Key) {
            let path = self.facts.parent_way.ds_path.clone();
            let path = path.as_ref();
            let first = self.first_ds();
            self.go(
                State::AwaitingDs,
                format!(
                    "{reason}; the DS goes to {} by the CDS ({}): nothing to enter at the registrar unless it has not published it by {}: {line}",
                    registry::registry_of(path),
                    registry::route_text(path, None),
                    registry::deadline(path, self.now, first, self.policy)
                ),
            );
            self.facts.parent_way.registry_since = Some(self.now);
            if !path.is_some_and(|p| p.call_registrar_hook) {
                return;
            }
        } else {
            self.go(State::AwaitingDs, format!("{reason}; DS announced: {line}"));
        }
        self.effects.push(Effect::AnnounceDs { ds_line: line });
    }

    /// The registry acts on the child's signal for this request (`registry::takes_request`).
    fn by_registry(&self, wanted: CdsPublication) -> bool {
        registry::takes_request(
            self.facts.parent_way.ds_path.as_ref(),
            wanted,
            self.first_ds(),
            self.zone.name.as_str(),
            self.obs,
        )
    }

    /// The DS was not seen at the parent in this lifecycle: it would be the zone's
    /// first, which some registries take only after a while, or not at all.
    pub(super) fn first_ds(&self) -> bool {
        self.facts.lifecycle.ds_first_seen_at.is_none()
    }

    /// The resolved path into the facts, and the last NOTIFY(CDS) performed with it (the
    /// outbox's word, which the history has as the effect's outcome already).
    pub(super) fn track_registry(&mut self) {
        if let Some(path) = &self.obs.ds_path {
            self.facts.parent_way.ds_path = Some(path.clone());
            self.facts.parent_way.ds_path_at = Some(self.now);
        }
        if let Some(sent) = &self.obs.cds_notify {
            self.facts.parent_way.cds_notified = Some(sent.clone());
        }
    }

    /// NOTIFY(CDS) to the parent's target where one is due in the state and facts this
    /// step leaves (`registry::notify_due`): an effect, sent after the commit.
    pub(super) fn track_notify(&mut self) {
        if let Some(plan) = registry::notify_due(
            self.zone.name.as_str(),
            self.state,
            &self.facts.parent_way,
            self.obs,
            self.policy,
        ) {
            self.effects.push(Effect::NotifyCds(plan));
        }
    }

    /// The registry was given until its deadline to act on the child's signal; past it,
    /// the request goes to the registrar after all (`ds_scan_overdue` says so). Where the
    /// registry can no longer act at all (`registry::cannot_act`), at once. True: the
    /// registrar is to be asked now.
    pub(super) fn registry_late(&mut self, wanted: CdsPublication, first_ds: bool) -> bool {
        let Some(since) = self.facts.parent_way.registry_since else {
            return false;
        };
        let path = self.facts.parent_way.ds_path.clone();
        // Rule 14 withdraws the signal once the intent turns against the request (the
        // key's CDS on `disabled`, the delete request off it): no signal for the registry.
        // (A withheld instruction withdraws the key's too, but only for a while: the
        // caller asks only while it stands.)
        let withdrawn = self.obs.cds.controlled()
            && (self.zone.intent == Intent::Disabled) != (wanted == CdsPublication::Delete);
        let cannot = if self.facts.move_in.moving_in {
            // The registry reads the CDS at the servers the parent delegates to, some of
            // them the old provider's.
            Some(
                "the zone is moving in: some parent servers delegate to the old name servers"
                    .to_string(),
            )
        } else if withdrawn {
            Some(format!(
                "the intent is now {}: the daemon no longer publishes the CDS it needs",
                self.zone.intent.as_str()
            ))
        } else {
            registry::cannot_act(path.as_ref(), wanted, first_ds, self.obs)
        };
        if let Some(why) = cannot {
            self.facts.parent_way.registry_since = None;
            self.note(format!(
                "{} cannot act on the child's CDS now ({why}): asking at the registrar",
                registry::registry_of(path.as_ref())
            ));
            return !path.is_some_and(|p| p.call_registrar_hook);
        }
        let due = registry::deadline(path.as_ref(), since, first_ds, self.policy);
        if self.now < due {
            self.deadlines.push(due);
            return false;
        }
        self.facts.parent_way.registry_since = None;
        self.facts.parent_way.registry_missed_at = Some(self.now);
        self.note(format!(
            "{} has not acted on the child's CDS since {since}: asking at the registrar",
            registry::registry_of(path.as_ref())
        ));
        // The hook already ran for the request where it is called always.
        !path.is_some_and(|p| p.call_registrar_hook)
    }
}
