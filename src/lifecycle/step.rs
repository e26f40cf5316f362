//! The pure state machine: `step(zone, observation, policy) -> decision`.
//!
//! No I/O and no clock: the time is the observation's. The caller persists the decision in
//! one transaction and only then performs its effects (krill's decide/apply split). Every
//! transition needs positive, unanimous evidence; an unknown answer leaves the zone where it
//! is (safety rule 3).

use super::alerts;
use super::facts::{Facts, HealthFacts, LifecycleFacts};
use super::hold::{Hold, Party};
use super::model::{
    AuditNote, CdsSetting, Decision, Effect, Observation, ProviderView, Zone, parent_ds_lines,
    served_fingerprint,
};
use super::policy::Policy;
use super::registry;
use super::rules::{self, delegation_hold_until, disable_deadline, evidence_acceptable};
use super::sample;
use super::state::{Intent, State};
use crate::dns::delegation::{self, DelegationVerdict};
use crate::dns::observe::model::key_standing;
use crate::dns::{ChildView, Evidence, ParentView, ValidationVerdict};
use crate::dnssec::{CdsPublication, DnssecKey};
use crate::time::Timestamp;

/// Decides what one observation means for one zone.
pub fn step(zone: &Zone, obs: &Observation, policy: &Policy) -> Decision {
    debug_assert_eq!(
        obs.delegation,
        obs.clone().assessed().delegation,
        "an observation's delegation is judged after its parent view and name servers"
    );
    let mut run = Run {
        zone,
        obs,
        policy,
        now: obs.at,
        state: zone.state,
        facts: zone.facts.clone(),
        effects: Vec::new(),
        notes: Vec::new(),
        deadlines: Vec::new(),
    };
    run.facts.wait.held_by = None;
    run.track_health();
    run.track_ttl();
    run.track_served_keys();
    run.track_delegation();
    run.track_registry();
    match zone.state {
        None => run.adopt(),
        Some(state) => {
            if !run.follow_delegation(state)
                && !run.apply_intent(state)
                && !run.follow_provider_drift(state)
            {
                run.progress(state);
            }
        }
    }
    // After the transition: entering `disabled` forgets what came before, not this look.
    if run.parent().is_some_and(ParentView::any_present) {
        run.facts.lifecycle.ds_seen_at = Some(run.now);
    }
    run.track_instruction();
    run.track_cds();
    run.track_notify();
    run.track_missing();
    run.facts.wait.held_since = match run.facts.wait.held_by {
        Some(_) => Some(run.facts.wait.held_since.unwrap_or(run.now)),
        None => None,
    };
    let judgement = alerts::judge(zone, run.state, &run.facts, obs, policy);
    run.facts.health.partial_since = judgement.partial_since;
    run.facts.routine.settled_view = sample::settled_view(run.state, obs);
    run.deadlines.extend(judgement.deadlines);
    let wake_at = run.wake_at();
    Decision {
        state: run.state,
        facts: run.facts,
        effects: run.effects,
        alerts: judgement.checks,
        notes: run.notes,
        wake_at,
    }
}

struct Run<'a> {
    zone: &'a Zone,
    obs: &'a Observation,
    policy: &'a Policy,
    now: Timestamp,
    state: Option<State>,
    facts: Facts,
    effects: Vec<Effect>,
    notes: Vec<AuditNote>,
    /// Moments before the next poll at which something changes by itself.
    deadlines: Vec<Timestamp>,
}

impl Run<'_> {
    fn parent(&self) -> Option<&ParentView> {
        self.obs.parent.as_ref().ok()
    }

    fn child(&self) -> Option<&ChildView> {
        self.obs.child.as_ref().ok()
    }

    fn key(&self) -> Option<&DnssecKey> {
        match &self.obs.provider {
            ProviderView::On(key) => Some(key),
            _ => None,
        }
    }

    /// The parent answered completely (no unknown address).
    fn parent_known(&self) -> Option<&ParentView> {
        self.parent().filter(|p| !p.any_unknown())
    }

    fn go(&mut self, to: State, reason: impl Into<String>) {
        let from = self.state;
        self.notes.push(AuditNote {
            from,
            to: Some(to),
            reason: reason.into(),
        });
        if from != Some(to) {
            // The registry's part belongs to the state's DS request.
            self.facts.parent_way.registry_since = None;
            self.facts.parent_way.registry_missed_at = None;
            self.facts.parent_way.cds_notified = None;
        }
        self.state = Some(to);
        if to != State::AwaitingDelegation {
            self.facts.move_in.delegation_requested = false;
        }
        match to {
            State::AwaitingDsRemoval => {
                self.facts.lifecycle.t_gone = None;
                self.facts.lifecycle.gone_confirmed_at = None;
            }
            State::Disabled => {
                // A new lifecycle starts from here: nothing of the old one applies but
                // what is about the observations and the delegation. Adoption ends no
                // lifecycle: a DS the looks before it saw was waited out by nothing, and
                // a move in must still wait it out (rule 9).
                let f = std::mem::take(&mut self.facts);
                let adopted = from.is_none();
                let seen = &f.lifecycle;
                self.facts = Facts {
                    lifecycle: LifecycleFacts {
                        ds_seen_at: seen.ds_seen_at.filter(|_| adopted),
                        max_ds_ttl: seen.max_ds_ttl.filter(|_| adopted),
                        max_dnskey_ttl: seen.max_dnskey_ttl.filter(|_| adopted),
                        ..LifecycleFacts::default()
                    },
                    health: HealthFacts {
                        partial_since: None,
                        ..f.health
                    },
                    delegation: f.delegation,
                    ..Facts::default()
                };
            }
            State::Enabling | State::AwaitingDs | State::DsObserved | State::Active => {
                self.facts.move_in.moving_in = false;
            }
            _ => {}
        }
    }

    fn note(&mut self, reason: impl Into<String>) {
        self.notes.push(AuditNote {
            from: self.state,
            to: self.state,
            reason: reason.into(),
        });
    }

    /// Counts incomplete observations (provider unknown, parent unknown anywhere).
    fn track_health(&mut self) {
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
    fn track_served_keys(&mut self) {
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
    fn track_ttl(&mut self) {
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
    fn track_instruction(&mut self) {
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
    fn track_cds(&mut self) {
        let to = rules::cds_wanted(self.zone.intent, self.state, &self.facts.lifecycle);
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
    fn track_missing(&mut self) {
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

    /// The provider no longer matches what the zone's state stands on (changed outside
    /// dnssec-warden). The daemon's word must stay true and no DS instruction may go stale
    /// (safety rule 8): the zone moves to the state that describes the world, the stale
    /// instruction is withdrawn at once, and the provider is switched only where the
    /// operator's recorded intent asks for it (never "fixed" by guessing, rule 7).
    /// True if it moved the zone.
    fn follow_provider_drift(&mut self, state: State) -> bool {
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
    fn withdraw_given_ds(&mut self, state: State) -> String {
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

    // ---- delegation (safety rule 9) ---------------------------------------------------

    fn verdict(&self) -> DelegationVerdict {
        self.obs.delegation.verdict
    }

    /// Some parent address sends resolvers to name servers that are not exactly the
    /// provider's (certain evidence).
    fn elsewhere(&self) -> bool {
        self.obs.delegation.any_elsewhere()
    }

    /// May a decision that can take the domain down rest on this parent view (safety
    /// rule 10)? Validated answers, or a provably insecure parent unless the operator
    /// requires validated evidence everywhere. A routine (unchecked) look never does.
    fn evidence_ok(&self) -> bool {
        self.parent()
            .is_some_and(|p| evidence_acceptable(&p.evidence, self.policy))
    }

    fn provider_ns_text(&self) -> String {
        self.facts
            .delegation
            .provider_ns
            .as_deref()
            .map(delegation::describe)
            .unwrap_or_else(|| "(the provider lists no NS for the zone)".to_string())
    }

    /// Remembers who the parent delegates to: the verdict, `T_delegated`, and the old
    /// delegation's name servers and largest NS TTL (the parent's and the old servers'
    /// apex NS TTL), which bound how long resolvers may still follow it.
    fn track_delegation(&mut self) {
        if let Some(ns) = &self.obs.provider_ns {
            self.facts.delegation.provider_ns = Some(ns.clone());
        }
        let verdict = self.verdict();
        let before = self.facts.delegation.verdict;
        // Certain evidence counts even beside an unknown answer: one parent address that
        // delegates elsewhere may have sent resolvers there.
        if self.obs.delegation.any_elsewhere() {
            self.facts.delegation.delegated_at = None;
            self.facts.delegation.elsewhere_seen = true;
            let mut old: Vec<String> = self.facts.delegation.old_ns.clone();
            for set in self.obs.delegation.elsewhere_sets() {
                old.extend(set);
            }
            self.facts.delegation.old_ns = delegation::ns_set(old);
            let mut ttl = self.obs.delegation.elsewhere_ttl();
            // The servers the child view asked are the old ones when they are not
            // exactly the provider's: their apex NS TTL counts too.
            if let (Some(child), Some(ns)) = (self.child(), &self.facts.delegation.provider_ns) {
                let asked = delegation::ns_set(child.answers.iter().map(|a| &a.server));
                if &asked != ns {
                    ttl = ttl.max(delegation::max_ttl(&child.apex_ns));
                }
            }
            if let Some(ttl) = ttl {
                self.facts.delegation.old_ns_ttl =
                    Some(self.facts.delegation.old_ns_ttl.map_or(ttl, |m| m.max(ttl)));
            }
        }
        if verdict == DelegationVerdict::Provider {
            if self.facts.delegation.elsewhere_seen && self.facts.delegation.delegated_at.is_none()
            {
                self.facts.delegation.delegated_at = Some(self.now);
            }
            self.facts.delegation.elsewhere_seen = false;
            self.facts.delegation.seen_at_provider = true;
        }
        if verdict == DelegationVerdict::Unknown {
            return;
        }
        if before.is_some_and(|b| b != verdict) {
            let now_to = match verdict {
                DelegationVerdict::Provider => format!(
                    "every parent server now delegates to the provider's name servers ({})",
                    self.provider_ns_text()
                ),
                DelegationVerdict::Foreign => format!(
                    "every parent server now delegates elsewhere: {}",
                    delegation::describe(&self.facts.delegation.old_ns)
                ),
                _ => "parent servers now disagree about the delegation (some delegate to the provider's name servers, some elsewhere)".to_string(),
            };
            self.note(format!("the delegation changed: {now_to}"));
        }
        self.facts.delegation.verdict = Some(verdict);
    }

    /// The end of the delegation hold (safety rule 9): `T_delegated + old NS TTL +
    /// margin`, if the delegation was seen coming to the provider.
    fn delegation_hold(&self) -> Option<Timestamp> {
        delegation_hold_until(&self.facts.delegation, self.policy)
    }

    /// May the provider's DS be announced now (safety rule 9)? Every parent address
    /// delegates to exactly the provider's name servers, and the old delegation has
    /// expired from every cache. Pushes the hold's end as a deadline when it is pending.
    fn may_announce(&mut self) -> bool {
        if self.verdict() != DelegationVerdict::Provider {
            return false;
        }
        match self.delegation_hold() {
            Some(until) if self.now < until => {
                self.deadlines.push(until);
                false
            }
            _ => true,
        }
    }

    /// Handles a zone some parent address delegates elsewhere, before the intent and
    /// the provider are looked at. True if it moved (or deliberately held) the zone.
    fn follow_delegation(&mut self, state: State) -> bool {
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
    fn start_move_in(&mut self, state: State) {
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

    fn ask_for_delegation(&mut self) {
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
    fn awaiting_delegation(&mut self) {
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

    // ---- adoption -------------------------------------------------------------------

    /// A zone seen for the first time is placed by what the world says (DESIGN.md §2).
    fn adopt(&mut self) {
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

    // ---- intent -----------------------------------------------------------------------

    /// Starts the path the operator asked for; true if it moved the zone.
    fn apply_intent(&mut self, state: State) -> bool {
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

    /// Asks for the DS to be removed: of the registry, by the CDS delete request the
    /// provider publishes (rule 14), where it acts on it; else at the registrar.
    fn request_removal(&mut self) {
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
    fn announce(&mut self, key: &DnssecKey, reason: &str) {
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
    fn first_ds(&self) -> bool {
        self.facts.lifecycle.ds_first_seen_at.is_none()
    }

    /// The resolved path into the facts, and the last NOTIFY(CDS) performed with it (the
    /// outbox's word, which the history has as the effect's outcome already).
    fn track_registry(&mut self) {
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
    fn track_notify(&mut self) {
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
    fn registry_late(&mut self, wanted: CdsPublication, first_ds: bool) -> bool {
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

    /// The provider switched keys since this one was followed.
    fn key_changed(&self, key: &DnssecKey) -> bool {
        self.facts
            .lifecycle
            .ds_line
            .as_ref()
            .is_some_and(|line| *line != key.ds_line().to_string())
    }

    // ---- progress along the path ------------------------------------------------------

    fn progress(&mut self, state: State) {
        match state {
            State::Disabled => {}
            State::AwaitingDelegation => self.awaiting_delegation(),
            State::Enabling => self.enabling(),
            State::AwaitingDs => self.awaiting_ds(),
            State::DsObserved => self.ds_observed(),
            State::Active => self.active(),
            State::AwaitingDsRemoval => self.awaiting_ds_removal(),
            State::TtlWait => self.ttl_wait(),
            State::Disabling => self.disabling(),
        }
    }

    /// Waits for every child address to serve the key, then for the propagation hold
    /// (safety rule 4; RFC 7583 section 3.3.1).
    fn enabling(&mut self) {
        let key = match &self.obs.provider {
            ProviderView::On(key) => key.clone(),
            ProviderView::Off => {
                // The switch was lost or undone: ask again (idempotent), but only on the
                // operator's word; an adopted zone waits for `enable` or `disable`.
                if self.zone.intent == Intent::Enabled {
                    self.effects.push(Effect::EnableDnssec);
                }
                return;
            }
            ProviderView::Unknown(e) => {
                self.facts.wait.held_by = Some(Hold::new(
                    format!("the provider's DNSSEC answer, which fails: {e}"),
                    Party::Provider,
                ));
                return;
            }
            ProviderView::Missing => return,
        };
        if self.key_changed(&key) {
            self.facts.lifecycle.dnskey_everywhere_at = None;
            self.facts.lifecycle.hold_until = None;
            self.note(format!("the provider's key is now {}", key.ds_line()));
        }
        self.facts.lifecycle.ds_line = Some(key.ds_line().to_string());
        if !self.child().is_some_and(|c| c.all_serve(&key.dnskey)) {
            let why = self.not_served_why(&key);
            if self.facts.lifecycle.dnskey_everywhere_at.take().is_some() {
                self.note(format!(
                    "a name server stopped serving the key: the propagation hold starts over ({why})"
                ));
            }
            self.facts.lifecycle.hold_until = None;
            self.facts.wait.held_by = Some(Hold::new(
                format!(
                    "every name server to serve the provider's key {} in a DNSKEY set signed by it (safety rule 4): {why}",
                    key.key_tag()
                ),
                Party::Provider,
            ));
            return;
        }
        let hold_until = match self.facts.lifecycle.hold_until {
            Some(at) => at,
            None => {
                let dnskey_ttl = self
                    .child()
                    .and_then(ChildView::max_dnskey_ttl)
                    .unwrap_or(0);
                // The hold covers the zone's largest TTL: not known (the RRset listing
                // failed, or a TTL was missing), no hold can be set yet.
                let Some(zone_ttl) = self.obs.zone_max_ttl else {
                    let why = self
                        .obs
                        .zone_ttl_error
                        .clone()
                        .unwrap_or_else(|| "not known".to_string());
                    self.facts.wait.held_by = Some(Hold::new(
                        format!(
                            "the zone's largest TTL, which the propagation hold needs (safety rule 4): {why}"
                        ),
                        Party::Provider,
                    ));
                    return;
                };
                let longest = dnskey_ttl.max(zone_ttl);
                let at = self
                    .now
                    .plus_secs(longest)
                    .plus(self.policy.propagation_margin);
                self.facts.lifecycle.dnskey_everywhere_at = Some(self.now);
                self.facts.lifecycle.hold_until = Some(at);
                self.note(format!(
                    "every name server serves key {}, in a DNSKEY set signed by it; holding until {at} (TTL {longest}s + margin)",
                    key.key_tag()
                ));
                at
            }
        };
        if self.now >= hold_until && self.may_announce() {
            self.announce(
                &key,
                "every name server has served the key for the whole propagation hold",
            );
        } else if self.now < hold_until {
            self.deadlines.push(hold_until);
        } else if self.verdict() != DelegationVerdict::Provider {
            self.facts.wait.held_by = Some(Hold::new(
                format!(
                    "every parent server to delegate to the provider's name servers ({}); at this look the delegation is {}",
                    self.provider_ns_text(),
                    self.verdict()
                ),
                Party::Daemon,
            ));
        }
    }

    /// Which child address does not serve `key` (validly signed), and how it stands.
    fn not_served_why(&self, key: &DnssecKey) -> String {
        match self.child() {
            None => match &self.obs.child {
                Err(e) => format!("the name servers could not be asked ({e})"),
                Ok(_) => "the name servers could not be asked".to_string(),
            },
            Some(child) => not_serving_text(child, key),
        }
    }

    fn awaiting_ds(&mut self) {
        let Some(key) = self.key().cloned() else {
            return; // Off moved the zone already; unknown is unknown: no move.
        };
        if let Some(parent) = self.parent_known()
            && parent.all_point_at(&key.dnskey)
            && self.evidence_ok()
        {
            self.facts.lifecycle.ds_first_seen_at = Some(self.now);
            self.go(
                State::DsObserved,
                "every parent server publishes a DS matching the key",
            );
            return;
        }
        // The registrar is asked only with the DS it may be shown (rule 8); while the
        // instruction is withheld, the registry could not act either, and the zone waits
        // on what withholds it.
        if enterable_ds(&self.facts, self.obs, self.policy).is_ok()
            && self.registry_late(CdsPublication::Key, self.first_ds())
            && let Some(line) = self.facts.lifecycle.ds_line.clone()
        {
            self.effects.push(Effect::AnnounceDs { ds_line: line });
        }
        if self.facts.parent_way.registry_since.is_none()
            && let Some(at) = rules::ds_request_at(&self.facts)
        {
            self.deadlines.push(at.plus(self.policy.ds_overdue_after));
        }
    }

    /// The DS is everywhere; the chain must not be bogus before calling it active.
    fn ds_observed(&mut self) {
        let Some(key) = self.key().cloned() else {
            return;
        };
        if self.key_changed(&key) {
            self.go(State::Enabling, "the provider's key changed");
            return;
        }
        let Some(parent) = self.parent_known().cloned() else {
            return;
        };
        if !parent.all_point_at(&key.dnskey) {
            self.go(
                State::AwaitingDs,
                "a parent server no longer publishes the matching DS",
            );
            return;
        }
        if !self.child().is_some_and(|c| c.all_serve(&key.dnskey)) {
            let why = self.not_served_why(&key);
            self.facts.wait.held_by = Some(Hold::new(
                format!("every name server to serve the key, signed by it: {why}"),
                Party::Provider,
            ));
            return;
        }
        if self.verdict() != DelegationVerdict::Provider || !self.evidence_ok() {
            return;
        }
        // `active` means what operators read it as: where the parent is signed, the
        // validator said `secure` at this look; an unsigned parent settles without it,
        // said as such. Unknown and insecure under a signed parent keep asking.
        match (&parent.evidence, &self.obs.validation) {
            (_, ValidationVerdict::Bogus) => {
                // Alerted (`validation_failed`); wait for it to clear.
                self.facts.wait.held_by = Some(Hold::new(
                    "validation to stop failing: validators answer SERVFAIL for the zone (see its alerts)",
                    Party::Provider,
                ));
            }
            (Evidence::Validated, ValidationVerdict::Secure) => self.go(
                State::Active,
                "chain of trust complete: every parent server publishes the DS, and validation from the trust anchor says secure",
            ),
            (Evidence::Insecure(why), _) => self.go(
                State::Active,
                format!(
                    "every parent server publishes the DS, but the parent zone {} is not signed ({why}): no chain of trust can reach the zone, validators treat it as insecure; settled without one",
                    parent.parent
                ),
            ),
            (_, verdict) => {
                self.facts.wait.held_by = Some(Hold::new(
                    format!(
                        "validation to confirm the chain of trust (the parent is signed; validation says {verdict} at this look; asked again)"
                    ),
                    Party::Daemon,
                ));
            }
        }
    }

    fn active(&mut self) {
        let Some(key) = self.key().cloned() else {
            return;
        };
        if self.key_changed(&key) {
            self.go(
                State::Enabling,
                format!("the provider's key changed to {}: its DS must be announced once served everywhere", key.ds_line()),
            );
            return;
        }
        if self.parent_known().is_some_and(ParentView::all_absent) {
            self.facts.lifecycle.ds_line = Some(key.ds_line().to_string());
            if self.child().is_some_and(|c| c.all_serve(&key.dnskey)) && self.may_announce() {
                self.announce(&key, "the DS disappeared from every parent server");
            } else {
                self.go(
                    State::Enabling,
                    "the DS disappeared from every parent server and it cannot be announced again now (not every name server serves the key, or the delegation is not the provider's): it is once it can be",
                );
            }
        }
    }

    /// DNSSEC stays on; waits for every parent address to answer that the DS is gone.
    fn awaiting_ds_removal(&mut self) {
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
    fn gone_now(&mut self) {
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

    fn ttl_wait(&mut self) {
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

    fn disabling(&mut self) {
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

    fn wake_at(&self) -> Timestamp {
        if self.state != self.zone.state {
            // A new state is judged on a fresh observation, now.
            return self.now;
        }
        let mut wake = match self.state {
            Some(state) if state.is_steady() => self
                .policy
                .next_settled_look(self.zone.name.as_str(), self.now),
            _ => self.now.plus(self.policy.poll_waiting),
        };
        if self.facts.health.failures > 0 {
            wake = wake.min(
                self.now
                    .plus(self.policy.backoff(self.facts.health.failures)),
            );
        }
        for deadline in &self.deadlines {
            if *deadline > self.now {
                wake = wake.min(*deadline);
            }
        }
        wake
    }
}

/// The DS line rules 8 and 9 allow showing as "to enter" now: the provider is on with
/// the followed key, every child address answered serving it, every parent address
/// delegates to the provider's name servers, and the delegation hold is over.
/// `Err` says what withholds it.
pub(super) fn enterable_ds(
    facts: &Facts,
    obs: &Observation,
    policy: &Policy,
) -> Result<String, Hold> {
    let key = match &obs.provider {
        ProviderView::On(key) => key,
        ProviderView::Off => {
            return Err(Hold::new("DNSSEC is off at the provider", Party::Provider));
        }
        ProviderView::Missing => {
            return Err(Hold::new("the provider has no such zone", Party::Provider));
        }
        ProviderView::Unknown(e) => {
            return Err(Hold::new(
                format!("the provider's DNSSEC answer fails: {e}"),
                Party::Provider,
            ));
        }
    };
    if !obs.provider_asked {
        return Err(Hold::new(
            "the provider was not asked at this look (the zone listing showed nothing changed)",
            Party::Daemon,
        ));
    }
    let verdict = obs.delegation.verdict;
    if verdict != DelegationVerdict::Provider {
        return Err(Hold::new(
            format!(
                "the delegation is {verdict} at this look, not the provider's name servers at every parent server (safety rule 9)"
            ),
            Party::Daemon,
        ));
    }
    if let Some(until) =
        delegation_hold_until(&facts.delegation, policy).filter(|until| obs.at < *until)
    {
        return Err(Hold::new(
            format!("the old delegation may be cached until {until} (safety rule 9)"),
            Party::Ttl,
        ));
    }
    let line = key.ds_line().to_string();
    if facts
        .lifecycle
        .ds_line
        .as_deref()
        .is_some_and(|l| l != line)
    {
        return Err(Hold::new(
            format!("the provider's key changed to {line}"),
            Party::Provider,
        ));
    }
    match &obs.child {
        Ok(c) if c.all_serve(&key.dnskey) => Ok(line),
        Ok(c) => {
            let why = not_serving_text(c, key);
            Err(Hold::new(
                format!("not every name server serves the key signed by it: {why}"),
                Party::Provider,
            ))
        }
        Err(e) => Err(Hold::new(
            format!("the name servers could not be asked: {e}"),
            Party::Daemon,
        )),
    }
}

/// The first child address that does not serve the provider's key (validly signed), and
/// how it stands, in words.
fn not_serving_text(child: &ChildView, key: &DnssecKey) -> String {
    match child.not_serving(&key.dnskey) {
        Some(a) => format!(
            "name server {} ({}) {}",
            a.server,
            a.addr,
            key_standing(&a.answer, &key.dnskey)
        ),
        None => "no name server answered".to_string(),
    }
}
