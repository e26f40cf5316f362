//! The pure state machine: `step(zone, observation, policy) -> decision`.
//!
//! No I/O and no clock: the time is the observation's. The caller persists the decision in
//! one transaction and only then performs its effects (krill's decide/apply split). Every
//! transition needs positive, unanimous evidence; an unknown answer leaves the zone where it
//! is (safety rule 3).
//!
//! The step reads in rooms: this file the entry, the run's state and the dispatch by state;
//! `track` what every look keeps true; `delegation` and `move_in` safety rule 9; `adopt`,
//! `intent` and `drift` what turns a zone before its state's own work; `enabling` and
//! `disabling` the two paths; `request` how a DS request reaches the parent; `own_roll` a
//! roll the provider makes on its own.

mod adopt;
mod delegation;
mod disabling;
mod drift;
mod enabling;
mod intent;
mod move_in;
mod own_roll;
mod request;
mod track;

use super::alerts;
use super::facts::{Facts, HealthFacts, LifecycleFacts};
use super::model::{AuditNote, Decision, Effect, Observation, ProviderView, Zone};
use super::policy::Policy;
use super::sample;
use super::state::State;
use crate::dns::{ChildView, ParentView};
use crate::dnssec::DnssecKey;
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
        if to != State::Active {
            // A roll the provider makes on its own is followed only while `active`.
            self.facts.provider_roll = None;
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

    /// The provider switched keys since this one was followed.
    fn key_changed(&self, key: &DnssecKey) -> bool {
        self.facts
            .lifecycle
            .ds_line
            .as_ref()
            .is_some_and(|line| *line != key.ds_line().to_string())
    }

    /// The state's own work, where nothing before it (the delegation, the intent, the
    /// provider's drift) moved the zone.
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
