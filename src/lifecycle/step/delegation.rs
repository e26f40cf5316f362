//! Who the parent delegates to (safety rule 9): the verdict remembered across looks, the
//! old delegation's hold, and whether the provider's DS may be announced.

use super::Run;
use crate::dns::delegation::{self, DelegationVerdict};
use crate::lifecycle::rules::{delegation_hold_until, evidence_acceptable};
use crate::time::Timestamp;

impl Run<'_> {
    pub(super) fn verdict(&self) -> DelegationVerdict {
        self.obs.delegation.verdict
    }

    /// Some parent address sends resolvers to name servers that are not exactly the
    /// provider's (certain evidence).
    pub(super) fn elsewhere(&self) -> bool {
        self.obs.delegation.any_elsewhere()
    }

    /// May a decision that can take the domain down rest on this parent view (safety
    /// rule 10)? Validated answers, or a provably insecure parent unless the operator
    /// requires validated evidence everywhere. A routine (unchecked) look never does.
    pub(super) fn evidence_ok(&self) -> bool {
        self.parent()
            .is_some_and(|p| evidence_acceptable(&p.evidence, self.policy))
    }

    pub(super) fn provider_ns_text(&self) -> String {
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
    pub(super) fn track_delegation(&mut self) {
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
    pub(super) fn delegation_hold(&self) -> Option<Timestamp> {
        delegation_hold_until(&self.facts.delegation, self.policy)
    }

    /// May the provider's DS be announced now (safety rule 9)? Every parent address
    /// delegates to exactly the provider's name servers, and the old delegation has
    /// expired from every cache. Pushes the hold's end as a deadline when it is pending.
    pub(super) fn may_announce(&mut self) -> bool {
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
}
