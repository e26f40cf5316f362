//! The disable path: `awaiting_ds_removal`, `ttl_wait` (safety rule 2, `T_gone`
//! reconfirmed), `disabling`, and the hold of a zone that may be moving in.

use super::Run;
use crate::dns::ParentView;
use crate::dnssec::CdsPublication;
use crate::lifecycle::hold::{Hold, Party};
use crate::lifecycle::model::{Effect, ProviderView};
use crate::lifecycle::rules::{self, disable_deadline};
use crate::lifecycle::state::State;

impl Run<'_> {
    /// DNSSEC stays on; waits for every parent address to answer that the DS is gone.
    pub(super) fn awaiting_ds_removal(&mut self) {
        if let Some(parent) = self.parent_known()
            && parent.all_absent()
            && self.evidence_ok()
        {
            self.gone_now();
            let ttl = match self.facts.lifecycle.max_ds_ttl {
                Some(ttl) => format!("{ttl}s, the largest seen"),
                None if self.facts.lifecycle.ds_announced_at.is_some() => {
                    format!(
                        "never seen: assuming {}s",
                        self.policy.assumed_ds_ttl.as_secs()
                    )
                }
                None => "none: the DS was never announced".to_string(),
            };
            self.go(
                State::TtlWait,
                format!("every parent server answers that the DS is gone; waiting out its TTL ({ttl}) plus margin"),
            );
            return;
        }
        if self.registry_late(CdsPublication::Delete, false) {
            self.effects.push(Effect::RequestDsRemoval {
                ds_line: self.facts.lifecycle.ds_line.clone(),
            });
        }
        if self.facts.parent_way.registry_since.is_none() {
            self.deadlines.push(
                rules::removal_request_at(&self.facts.parent_way, self.zone.since)
                    .plus(self.policy.ds_removal_overdue_after),
            );
        }
    }

    /// `T_gone`: every parent address answers "no DS" at this look.
    pub(super) fn gone_now(&mut self) {
        self.facts.lifecycle.t_gone = Some(self.now);
        self.facts.lifecycle.gone_confirmed_at = Some(self.now);
    }

    /// Rule 2 holds `T_gone` only while looks keep confirming the DS gone: after a
    /// longer stretch without one (the daemon down, a parent server silent, answers not
    /// validated) a DS may have been published and withdrawn unseen, and the wait
    /// restarts at this look. True if it restarted.
    fn reconfirm_gone(&mut self) -> bool {
        if !self.parent_known().is_some_and(ParentView::all_absent) || !self.evidence_ok() {
            return false;
        }
        let last = self
            .facts
            .lifecycle
            .gone_confirmed_at
            .or(self.facts.lifecycle.t_gone);
        self.facts.lifecycle.gone_confirmed_at = Some(self.now);
        let gap = self.policy.gone_confirmation_gap();
        match last {
            Some(last) if self.now < last.plus(gap) => false,
            _ => {
                let since = last.map_or_else(|| "ever".to_string(), |t| format!("since {t}"));
                self.facts.lifecycle.t_gone = Some(self.now);
                self.note(format!(
                    "no look confirmed the DS gone at every parent server {since} (longer than {}s): a DS may have come and gone unseen, so the wait counts from this look",
                    gap.as_secs()
                ));
                true
            }
        }
    }

    pub(super) fn ttl_wait(&mut self) {
        // A DS seen anywhere restarts the wait, even while another parent server cannot
        // be asked: the wait counts from the last moment a DS was published.
        if self.parent().is_some_and(ParentView::any_present) {
            self.go(
                State::AwaitingDsRemoval,
                "a DS reappeared at a parent server",
            );
            return;
        }
        if self.parent_known().is_none() {
            return;
        }
        if self.reconfirm_gone() {
            // Restarted at every look, the wait never ends (looks always further apart
            // than the gap: a daemon behind its schedule, a poll longer than its pace
            // allows): held, so that `wait_stalled` says so once it lasts (rule 11).
            self.facts.wait.held_by = Some(Hold::new(
                format!(
                    "looks confirming the DS gone at every parent server at most {}s apart (this one came later, so the TTL wait starts again; if it keeps happening, the daemon looks less often than timing.poll_waiting: lengthen it, or raise dns.max_qps_per_server if the parents allow)",
                    self.policy.gone_confirmation_gap().as_secs()
                ),
                Party::Daemon,
            ));
        }
        let Some(deadline) = disable_deadline(&self.facts.lifecycle, self.policy) else {
            return;
        };
        if self.now >= deadline && !self.evidence_ok() {
            // The last look before the provider call (or the NS change) rests on
            // validated evidence (rule 10); the guard checks again.
            return;
        }
        if self.now >= deadline && self.facts.move_in.moving_in {
            self.go(
                State::AwaitingDelegation,
                "the old DS TTL and margin have passed since the DS was gone everywhere: the zone is insecure, and the NS can move",
            );
            self.ask_for_delegation();
        } else if self.now >= deadline
            && !self.facts.delegation.seen_at_provider
            && self.obs.provider != ProviderView::Off
        {
            self.hold_for_delegation();
        } else if self.now >= deadline {
            // Only a provider seen signing is asked to stop: a zone whose switch-on was
            // overtaken by a disable before it was sent is off already, and a call would
            // be one no decision needs (and the history would claim it).
            match self.obs.provider {
                ProviderView::Off => self.go(
                    State::Disabled,
                    "the DS TTL and margin have passed since the DS was gone everywhere, and the provider already has DNSSEC off",
                ),
                ProviderView::On(_) => {
                    self.go(
                        State::Disabling,
                        "the DS TTL and margin have passed since the DS was gone everywhere: switching DNSSEC off",
                    );
                    self.effects.push(Effect::DisableDnssec);
                }
                ProviderView::Unknown(_) | ProviderView::Missing => self.go(
                    State::Disabling,
                    "the DS TTL and margin have passed since the DS was gone everywhere: switching DNSSEC off once the provider answers",
                ),
            }
        } else {
            self.deadlines.push(deadline);
        }
    }

    pub(super) fn disabling(&mut self) {
        if self.parent().is_some_and(ParentView::any_present) {
            self.go(
                State::AwaitingDsRemoval,
                "a DS reappeared at a parent server before DNSSEC was switched off",
            );
            return;
        }
        if self.obs.provider == ProviderView::Off {
            self.go(State::Disabled, "the provider confirms DNSSEC is off");
        } else if self.reconfirm_gone() {
            self.go(
                State::TtlWait,
                "the DS TTL and margin are waited out again before DNSSEC is switched off",
            );
        } else if !self.facts.delegation.seen_at_provider {
            self.hold_for_delegation();
        } else if let ProviderView::On(_) = self.obs.provider {
            self.effects.push(Effect::DisableDnssec);
        }
    }

    /// A zone never delegated to the provider's name servers at every parent address may
    /// be moving in where a parent address's delegation is unknown (rule 3: unknown never
    /// counts, and a parent server can answer the DS and not the NS): DNSSEC is not
    /// switched off until a look sees every address delegate to the provider (or one
    /// delegate elsewhere, which makes it the move in's: `follow_delegation`).
    fn hold_for_delegation(&mut self) {
        self.facts.wait.held_by = Some(Hold::new(
            format!(
                "every parent server to answer that it delegates to the provider's name servers ({}): the zone was never delegated to them everywhere, and DNSSEC is not switched off while it may be moving in (the delegation is {} at this look)",
                self.provider_ns_text(),
                self.verdict()
            ),
            Party::Daemon,
        ));
    }
}
