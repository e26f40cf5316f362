//! A zone some parent address delegates elsewhere: the move in (DESIGN.md section 2,
//! "Moving in"). The old DS goes first, its TTL is waited out, then the NS change is
//! asked for; `awaiting_delegation` ends it as the operator's intent says.

use super::Run;
use crate::dns::ParentView;
use crate::dns::delegation::{self, DelegationVerdict};
use crate::lifecycle::model::{Effect, ProviderView, parent_ds_lines};
use crate::lifecycle::rules::disable_deadline;
use crate::lifecycle::state::{Intent, State};

impl Run<'_> {
    /// Handles a zone some parent address delegates elsewhere, before the intent and
    /// the provider are looked at. True if it moved (or deliberately held) the zone.
    pub(super) fn follow_delegation(&mut self, state: State) -> bool {
        if self.facts.move_in.moving_in || state == State::AwaitingDelegation || !self.elsewhere() {
            return false;
        }
        let intent = self.zone.intent;
        match state {
            State::Disabled => {
                let moving_in = match intent {
                    Intent::Enabled => true,
                    Intent::Disabled => !self.facts.delegation.seen_at_provider,
                    Intent::None => false,
                };
                if moving_in {
                    self.start_move_in(state);
                }
                // A zone that moved out is no longer the provider's to serve: nothing
                // at the provider is asked of it (not even a drift to follow).
                true
            }
            State::Enabling | State::AwaitingDs => {
                match intent {
                    Intent::Enabled | Intent::Disabled => self.start_move_in(state),
                    Intent::None => {
                        self.leave_for_delegation(state, "not every parent server delegates to the provider's name servers: nothing is asked until `enable` or `disable` starts the move in");
                    }
                }
                true
            }
            // The disable path of a zone never delegated to the provider everywhere is
            // not a move out but a move in, seen late (a parent server that could not be
            // asked before): no "DNSSEC off" while it moves in (DESIGN.md "Moving in").
            // On `disable`, the DS removal and its TTL wait go on as the move in's, whose
            // end asks for the NS change; with no intent the zone is only watched; on
            // `enable` it leaves for `enabling`, which starts the move in at its next look.
            State::AwaitingDsRemoval | State::TtlWait | State::Disabling
                if !self.facts.delegation.seen_at_provider && intent != Intent::Enabled =>
            {
                if intent == Intent::None {
                    self.leave_for_delegation(
                        state,
                        "it never delegated to the provider's name servers everywhere, so this is a move in, not out: DNSSEC is not switched off, and nothing is asked until `enable` or `disable` starts the move in",
                    );
                    return true;
                }
                let why = format!(
                    "moving in: the parent delegates to {}, and never delegated to the provider's name servers everywhere; DNSSEC is not switched off before it does",
                    delegation::describe(&self.facts.delegation.old_ns)
                );
                self.facts.move_in.moving_in = true;
                if state == State::Disabling {
                    self.go(
                        State::TtlWait,
                        format!("{why}: the DS wait is confirmed, then the NS change is asked for"),
                    );
                    return true;
                }
                self.note(format!(
                    "{why}: the DS removal and its TTL wait go on, then the NS change is asked for"
                ));
                false
            }
            // The provider's DS may be published (a critical alert says so), or the
            // disable path is under way, which is the safe exit: carry on.
            _ => false,
        }
    }

    /// Leaves `state` for `awaiting_delegation`, withdrawing a DS instruction given in
    /// `awaiting_ds` (safety rule 8).
    fn leave_for_delegation(&mut self, state: State, why: &str) {
        let told = self.withdraw_given_ds(state);
        self.facts.lifecycle.dnskey_everywhere_at = None;
        self.facts.lifecycle.hold_until = None;
        self.facts.lifecycle.ds_to_enter = None;
        let elsewhere = delegation::describe(&self.facts.delegation.old_ns);
        self.go(
            State::AwaitingDelegation,
            format!("the parent delegates to {elsewhere}: {why}{told}"),
        );
    }

    /// Starts the move in (DESIGN.md section 2): the old DS goes first, then the NS.
    pub(super) fn start_move_in(&mut self, state: State) {
        let parent = self.parent().cloned();
        let present = parent.as_ref().is_some_and(ParentView::any_present);
        // Skipping the DS removal rests on "no DS" everywhere: validated (rule 10).
        let absent = self.parent_known().is_some_and(ParentView::all_absent) && self.evidence_ok();
        if !present && !absent && state == State::Disabled {
            // Wait for a complete look at the parent before asking anything.
            return;
        }
        self.facts.move_in.moving_in = true;
        if present {
            let records = parent.map(|p| parent_ds_lines(&p)).unwrap_or_default();
            if state == State::AwaitingDs {
                self.facts.lifecycle.ds_to_enter = None;
            }
            self.facts.lifecycle.dnskey_everywhere_at = None;
            self.facts.lifecycle.hold_until = None;
            self.go(
                State::AwaitingDsRemoval,
                format!(
                    "moving in: the parent delegates to {} and publishes a DS; it must go first (safety rule 9). Remove at the registrar: {}",
                    delegation::describe(&self.facts.delegation.old_ns),
                    records.join("; ")
                ),
            );
            self.effects.push(Effect::RequestDsRemoval {
                ds_line: Some(records.join("\n")),
            });
        } else if absent && self.ds_wait_owed() {
            self.wait_out_seen_ds(state);
        } else {
            self.leave_for_delegation(state, "moving in");
            self.ask_for_delegation();
        }
    }

    /// A DS was seen at the parent since the last TTL wait that ended: resolvers may
    /// still hold it (and the DNSKEY it validated), and would follow a new delegation
    /// to servers that do not serve its key. The move in's NS change waits it out first
    /// (safety rule 9), as the disable waits before "DNSSEC off" (rule 2).
    fn ds_wait_owed(&self) -> bool {
        self.facts.lifecycle.ds_seen_at.is_some_and(|seen| {
            let waited = self.facts.lifecycle.t_gone.is_some_and(|gone| gone > seen)
                && disable_deadline(&self.facts.lifecycle, self.policy)
                    .is_some_and(|end| self.now >= end);
            !waited
        })
    }

    /// Moving in, no DS published at this look (validated), but one seen since the last
    /// wait: `ttl_wait` from this look (`T_gone`), whose end asks for the NS change.
    fn wait_out_seen_ds(&mut self, state: State) {
        let told = self.withdraw_given_ds(state);
        let seen = self
            .facts
            .lifecycle
            .ds_seen_at
            .map_or_else(String::new, |t| format!(" at {t}"));
        self.facts.move_in.moving_in = true;
        self.facts.lifecycle.dnskey_everywhere_at = None;
        self.facts.lifecycle.hold_until = None;
        self.facts.lifecycle.ds_to_enter = None;
        self.gone_now();
        self.go(
            State::TtlWait,
            format!(
                "moving in: the parent delegates to {} and publishes no DS now, but a DS was published{seen}: resolvers may still hold it, so its TTL is waited out before the NS change is asked for (safety rule 9){told}",
                delegation::describe(&self.facts.delegation.old_ns)
            ),
        );
    }

    pub(super) fn ask_for_delegation(&mut self) {
        if self.verdict() == DelegationVerdict::Provider {
            self.note("every parent server already delegates to the provider's name servers");
            return;
        }
        // The NS may move only once no DS is published anywhere, on validated evidence
        // (rules 9 and 10); until then `awaiting_delegation` asks nothing.
        if !(self.parent_known().is_some_and(ParentView::all_absent) && self.evidence_ok()) {
            self.note("moving in: the NS change is asked for once every parent server proves that no DS is published");
            return;
        }
        self.facts.move_in.delegation_requested = true;
        let ns = self
            .facts
            .delegation
            .provider_ns
            .clone()
            .unwrap_or_default();
        self.note(format!(
            "moving in: change the NS at the registrar to: {}",
            self.provider_ns_text()
        ));
        self.effects
            .push(Effect::RequestDelegation { name_servers: ns });
    }

    /// Waits for every parent address to delegate to the provider's name servers; then
    /// the move in ends as the operator's intent says.
    pub(super) fn awaiting_delegation(&mut self) {
        if self.facts.move_in.moving_in
            && !self.facts.move_in.delegation_requested
            && self.verdict() != DelegationVerdict::Provider
            && self.parent_known().is_some_and(ParentView::all_absent)
            && self.evidence_ok()
        {
            if self.ds_wait_owed() {
                self.wait_out_seen_ds(State::AwaitingDelegation);
                return;
            }
            self.ask_for_delegation();
        }
        if self.facts.move_in.moving_in && self.parent().is_some_and(ParentView::any_present) {
            let records = self.parent().map(parent_ds_lines).unwrap_or_default();
            self.go(
                State::AwaitingDsRemoval,
                format!(
                    "a DS is published at the parent again; it must go before the move goes on. Remove at the registrar: {}",
                    records.join("; ")
                ),
            );
            self.effects.push(Effect::RequestDsRemoval {
                ds_line: Some(records.join("\n")),
            });
            return;
        }
        if !self.facts.move_in.moving_in && self.elsewhere() {
            if matches!(self.zone.intent, Intent::Enabled | Intent::Disabled) {
                // The operator's word starts the move in from here.
                self.start_move_in(State::AwaitingDelegation);
            }
            return;
        }
        if self.verdict() != DelegationVerdict::Provider {
            return;
        }
        if self.facts.move_in.moving_in
            && !(self.parent_known().is_some_and(ParentView::all_absent) && self.evidence_ok())
        {
            // The move in ends on "no DS" everywhere, validated (rule 10).
            return;
        }
        let was_moving = std::mem::take(&mut self.facts.move_in.moving_in);
        let reason = "every parent server delegates to the provider's name servers";
        match (self.zone.intent, &self.obs.provider) {
            (Intent::Enabled, provider) => {
                let until = self
                    .delegation_hold()
                    .map(|t| format!(" ({t})"))
                    .unwrap_or_default();
                self.go(
                    State::Enabling,
                    format!("{reason}: on to the enable path; the DS is announced only after the old delegation has expired from caches{until} and every name server has served the key for the propagation hold (safety rules 4 and 9)"),
                );
                if matches!(provider, ProviderView::Off) {
                    self.effects.push(Effect::EnableDnssec);
                }
            }
            (Intent::Disabled, ProviderView::Off) => {
                self.go(State::Disabled, format!("{reason}: moved in, DNSSEC off"));
            }
            (Intent::Disabled, ProviderView::On(_)) => {
                self.go(
                    State::AwaitingDsRemoval,
                    format!("{reason}; the operator's intent is disabled: switching DNSSEC off the safe way, once no parent server publishes a DS"),
                );
            }
            (Intent::Disabled, _) => self.facts.move_in.moving_in = was_moving,
            (Intent::None, _) => self.adopt(),
        }
    }
}
