//! The enable path: `enabling` (every name server serves the key, then the propagation
//! hold), `awaiting_ds`, `ds_observed` (the chain of trust), and `active`, which watches
//! its DS and its key; `enterable_ds`, the DS line rules 8 and 9 allow showing (which
//! `track` shows, and `awaiting_ds` asks the registrar with).

use super::Run;
use crate::dns::delegation::DelegationVerdict;
use crate::dns::observe::model::key_standing;
use crate::dns::{ChildView, Evidence, ParentView, ValidationVerdict};
use crate::dnssec::{CdsPublication, DnssecKey};
use crate::lifecycle::facts::Facts;
use crate::lifecycle::hold::{Hold, Party};
use crate::lifecycle::model::{Effect, Observation, ProviderView};
use crate::lifecycle::policy::Policy;
use crate::lifecycle::rules::{self, delegation_hold_until};
use crate::lifecycle::state::{Intent, State};

impl Run<'_> {
    /// Waits for every child address to serve the key, then for the propagation hold
    /// (safety rule 4; RFC 7583 section 3.3.1).
    pub(super) fn enabling(&mut self) {
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

    pub(super) fn awaiting_ds(&mut self) {
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
    pub(super) fn ds_observed(&mut self) {
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

    pub(super) fn active(&mut self) {
        if self.own_roll() {
            return;
        }
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
