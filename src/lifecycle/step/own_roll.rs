//! An `active` zone whose provider rolls its key on its own (DESIGN.md section 2, "Rolls
//! the provider makes on its own", rule 17): the new key's DS asked for as an addition
//! once every child address serves it, the old DS's removal only once the old key is
//! gone from every child address for its DNSKEY TTL and the new DS is at every parent
//! address (validated), then the zone follows the new key.

use super::Run;
use crate::dns::ChildView;
use crate::dnssec::DsLine;
use crate::lifecycle::hold::{Hold, Party};
use crate::lifecycle::model::{Effect, ProviderView, RollRequest};
use crate::lifecycle::own_roll::{self, ProviderRoll};
use crate::lifecycle::rules;

impl Run<'_> {
    /// Follows a roll the provider makes on its own, starting one where a new SEP key
    /// appears beside the followed one. True if the zone is in such a roll (the look is
    /// then the roll's: nothing else of `active` applies).
    pub(super) fn own_roll(&mut self) -> bool {
        if matches!(self.obs.provider, ProviderView::Off | ProviderView::Missing) {
            return self.facts.provider_roll.is_some();
        }
        let roll = match self.facts.provider_roll.clone() {
            Some(roll) => roll,
            None => match self.start_own_roll() {
                Some(roll) => roll,
                None => return false,
            },
        };
        self.step_own_roll(roll);
        // A roll that ended at this look, where the look already shows the next one.
        if self.facts.provider_roll.is_none()
            && let Some(next) = self.start_own_roll()
        {
            self.step_own_roll(next);
        }
        true
    }

    /// A new SEP key beside the followed one, named by the provider or held by a child
    /// address's DNSKEY set.
    fn start_own_roll(&mut self) -> Option<ProviderRoll> {
        let old = DsLine::parse(self.facts.lifecycle.ds_line.as_deref()?).ok()?;
        let named = match &self.obs.provider {
            ProviderView::On(key) if key.ds != old.ds && key.dnskey.is_sep() => {
                Some(key.dnskey.clone())
            }
            _ => None,
        };
        let new_key = named.or_else(|| own_roll::new_sep_key(self.child()?, &old.ds))?;
        let roll = ProviderRoll::start(&old, new_key, self.now)?;
        self.note(format!(
            "the provider rolls its key on its own: a new SEP key, tag {}, beside the zone's key {}; its DS is asked for as an addition once every name server serves it, the old DS kept until the old key is gone",
            roll.new_tag(),
            roll.old_tag()
        ));
        Some(roll)
    }

    fn step_own_roll(&mut self, mut roll: ProviderRoll) {
        let Some(old_ds) = roll.old_ds() else {
            self.facts.provider_roll = None;
            return;
        };
        let new_tag = roll.new_tag();
        let child = self.child().cloned();
        let parent = self.parent_known().cloned();
        let validated = self
            .parent()
            .is_some_and(|p| rules::evidence_acceptable(&p.evidence, self.policy));
        let mut swapped = match (&child, self.parent()) {
            (Some(c), Some(p)) => own_roll::swapped(c, p, &old_ds, Some(&roll.new_key)),
            _ => None,
        };
        // The provider moved on to another key (a second roll, or a swap after a
        // pre-published key): the roll follows that one.
        let moved_on =
            swapped
                .as_ref()
                .map(|s| s.key.clone())
                .or_else(|| match &self.obs.provider {
                    ProviderView::On(k) if k.ds != old_ds && k.dnskey.is_sep() => {
                        Some(k.dnskey.clone())
                    }
                    _ => None,
                });
        // Once its DS was asked for, only where no child address signs with the roll's
        // key any more.
        let roll_key_gone = child.as_ref().is_some_and(|c| {
            !c.any_unknown()
                && !c.answers.iter().any(|a| match &a.answer {
                    crate::dns::DnskeyAnswer::Keys(k) => k.serves(&roll.new_key),
                    _ => false,
                })
        });
        if let Some(key) = moved_on.filter(|k| *k != roll.new_key)
            && (roll.add_asked_at.is_none() || roll_key_gone)
            && roll.gone_back_at.is_none()
            && let Ok(old) = DsLine::parse(&roll.old)
            && let Some(mut next) = ProviderRoll::start(&old, key, self.now)
        {
            next.stale = roll.stale.clone();
            if roll.add_asked_at.is_some() {
                next.stale.push(roll.new.clone());
            }
            self.note(format!(
                "the provider moved on from key {new_tag} to key {}: the roll follows it{}",
                next.new_tag(),
                if roll.add_asked_at.is_some() {
                    "; the DS asked for the key it left is removed with the old DS"
                } else {
                    ""
                }
            ));
            roll = next;
        }
        let (new_tag, old_tag) = (roll.new_tag(), roll.old_tag());
        let new_everywhere = child.as_ref().is_some_and(|c| c.all_serve(&roll.new_key));
        // Where the swap is to another key than the roll's (its DS asked already), the
        // alert names it; the roll's own requests stay the roll's.
        if swapped.as_ref().is_some_and(|s| s.key != roll.new_key) {
            swapped = None;
        }
        if swapped.is_some() && roll.swapped_at.is_none() {
            roll.swapped_at = Some(self.now);
            self.note(format!(
                "the provider swapped its key at once: a name server serves the new key {new_tag} without the old key {old_tag} while a parent server publishes no DS for it; the DS to add now: {}",
                roll.new
            ));
        }
        // The new key gone again from every address, the old served everywhere: the
        // provider went back (an addition asked is asked removed: it names no key).
        let gone_back = child.as_ref().is_some_and(|c| {
            !c.any_unknown()
                && c.lacking_ds(&old_ds).is_none()
                && !c.answers.iter().any(|a| match &a.answer {
                    crate::dns::DnskeyAnswer::Keys(k) => k.keys.contains(&roll.new_key),
                    _ => false,
                })
        });
        if let Some(since) = roll.gone_back_at {
            let gone = validated
                && parent.as_ref().is_some_and(|p| {
                    let stale: Vec<_> = roll.leaving_ds().into_iter().skip(1).collect();
                    !p.distinct_ds()
                        .iter()
                        .any(|d| roll.new_key.matches_ds(&p.zone, d) || stale.contains(d))
                });
            if gone {
                self.note(format!(
                    "the DS of the provider's abandoned key {new_tag} is gone from every parent server: the provider's roll is over without a change"
                ));
                self.facts.provider_roll = None;
            } else {
                self.facts.wait.held_by = Some(Hold::new(
                    format!(
                        "the DS of the provider's abandoned key {new_tag} removed at every parent server (asked at {since}), the DS of {old_tag} kept: {}",
                        roll.new
                    ),
                    Party::Registrar,
                ));
                self.deadlines.push(self.now.plus(self.policy.poll_waiting));
                self.facts.provider_roll = Some(roll);
            }
            return;
        }
        if gone_back
            && !matches!(&self.obs.provider, ProviderView::On(k) if k.dnskey == roll.new_key)
        {
            self.note(format!(
                "the provider's new key {new_tag} is gone from every name server and the old key {old_tag} serves everywhere again: the provider went back{}",
                if roll.add_asked_at.is_some() {
                    "; the DS added for the new key is asked removed (it names no key)"
                } else {
                    ""
                }
            ));
            if roll.add_asked_at.is_some() || !roll.stale.is_empty() {
                let asked = roll.add_asked_at.map(|_| &roll.new);
                for line in asked.into_iter().chain(&roll.stale) {
                    self.effects.push(Effect::RollRequest {
                        request: RollRequest::RemoveDs {
                            ds_line: line.clone(),
                            keep: roll.old.clone(),
                        },
                    });
                }
                roll.gone_back_at = Some(self.now);
                self.deadlines.push(self.now.plus(self.policy.poll_waiting));
                self.facts.wait.held_by = Some(Hold::new(
                    format!(
                        "the DS of the provider's abandoned key {new_tag} removed at every parent server, the DS of {old_tag} kept: {}",
                        roll.new
                    ),
                    Party::Registrar,
                ));
                self.facts.provider_roll = Some(roll);
            } else {
                self.facts.provider_roll = None;
            }
            return;
        }
        // The addition: once every child address serves the new key (a DS that names a
        // key beside the one the kept DS names only adds a way to validate); at once
        // where the provider swapped, which it repairs. Another algorithm waits for a
        // person: its DS before its signatures are everywhere fails strict validators.
        let same_algorithm = roll.new_key.algorithm == old_ds.algorithm;
        if roll.add_asked_at.is_none() && (swapped.is_some() || (new_everywhere && same_algorithm))
        {
            roll.add_asked_at = Some(self.now);
            self.effects.push(Effect::RollRequest {
                request: RollRequest::AddDs {
                    ds_line: roll.new.clone(),
                    keep: roll.old.clone(),
                },
            });
            self.note(format!(
                "the provider rolled its key: DS for tag {new_tag} asked as an addition (the DS of tag {old_tag} kept): {}",
                roll.new
            ));
        }
        // The old key (and any the provider moved on from) gone from every child
        // address, held for its DNSKEY TTL.
        let leaving = roll.leaving_ds();
        match child
            .as_ref()
            .and_then(|c| own_roll::old_gone_everywhere(c, &leaving))
        {
            Some(true) => {
                let gap = self.policy.gone_confirmation_gap();
                let restarted = roll
                    .old_gone_confirmed_at
                    .is_some_and(|at| self.now.since(at) > gap);
                if roll.old_gone_at.is_none() || restarted {
                    roll.old_gone_at = Some(self.now);
                    self.note(format!(
                        "the old key {old_tag} is gone from every name server{}",
                        if restarted {
                            " (confirmed again after a gap between looks: its hold starts over)"
                        } else {
                            ""
                        }
                    ));
                }
                roll.old_gone_confirmed_at = Some(self.now);
            }
            Some(false) => {
                roll.old_gone_at = None;
                roll.old_gone_confirmed_at = None;
            }
            None => {}
        }
        let new_ds_everywhere = validated
            && parent
                .as_ref()
                .is_some_and(|p| own_roll::parent_all(p, &roll.new_key, &[]));
        let new_alone = validated
            && new_everywhere
            && parent
                .as_ref()
                .is_some_and(|p| own_roll::parent_all(p, &roll.new_key, &roll.leaving_ds()));
        let dnskey_ttl = self
            .facts
            .lifecycle
            .max_dnskey_ttl
            .or_else(|| child.as_ref().and_then(ChildView::max_dnskey_ttl))
            .unwrap_or(0);
        let old_hold_until = roll.old_gone_at.map(|at| {
            at.plus_secs(dnskey_ttl)
                .plus(self.policy.propagation_margin)
        });
        let old_gone_now = roll.old_gone_confirmed_at == Some(self.now);
        if old_gone_now && new_alone {
            self.end_own_roll(&roll);
            return;
        }
        if roll.remove_asked_at.is_none()
            && old_gone_now
            && new_everywhere
            && new_ds_everywhere
            && old_hold_until.is_some_and(|until| self.now >= until)
        {
            roll.remove_asked_at = Some(self.now);
            for line in std::iter::once(&roll.old).chain(&roll.stale) {
                self.effects.push(Effect::RollRequest {
                    request: RollRequest::RemoveDs {
                        ds_line: line.clone(),
                        keep: roll.new.clone(),
                    },
                });
            }
            self.note(format!(
                "the old key {old_tag} has been gone from every name server for its DNSKEY TTL and the DS of the new key {new_tag} is at every parent server: the old DS's removal is asked (the new kept): {}",
                roll.old
            ));
        }
        let hold = self.own_roll_wait(&roll, &old_ds, new_ds_everywhere, old_hold_until);
        if let Some(until) = hold.until.filter(|u| *u > self.now) {
            self.deadlines.push(until);
        }
        self.deadlines.push(self.now.plus(self.policy.poll_waiting));
        self.facts.wait.held_by = Some(hold);
        self.facts.provider_roll = Some(roll);
    }

    /// What the roll waits for now, and on whom.
    fn own_roll_wait(
        &self,
        roll: &ProviderRoll,
        old_ds: &crate::dnssec::Ds,
        new_ds_everywhere: bool,
        old_hold_until: Option<crate::time::Timestamp>,
    ) -> Hold {
        let (new_tag, old_tag) = (roll.new_tag(), roll.old_tag());
        if roll.add_asked_at.is_none() {
            if roll.new_key.algorithm != old_ds.algorithm {
                return Hold::new(
                    format!(
                        "the operator: the provider rolls to key {new_tag} of another algorithm ({} after {}), whose DS is not asked for on its own (validators may demand its signatures everywhere first); add {} at the registrar once it is safe",
                        roll.new_key.algorithm, old_ds.algorithm, roll.new
                    ),
                    Party::Operator,
                );
            }
            let why = match self.child() {
                Some(c) => c.not_serving(&roll.new_key).map_or_else(
                    || "no name server answered".to_string(),
                    |a| {
                        format!(
                            "name server {} ({}) {}",
                            a.server,
                            a.addr,
                            crate::dns::observe::model::key_standing(&a.answer, &roll.new_key)
                        )
                    },
                ),
                None => "the name servers could not be asked".to_string(),
            };
            return Hold::new(
                format!(
                    "every name server to serve the provider's new key {new_tag}, signed by it, before its DS is asked for beside the DS of {old_tag}: {why}"
                ),
                Party::Provider,
            );
        }
        if !new_ds_everywhere {
            return Hold::new(
                format!(
                    "the DS of the provider's new key {new_tag} at every parent server (validated), asked as an addition beside the DS of {old_tag}: {}",
                    roll.new
                ),
                Party::Registrar,
            );
        }
        match (roll.old_gone_at, roll.remove_asked_at) {
            (None, _) => Hold::new(
                format!(
                    "the provider to withdraw its old key {old_tag} from every name server (its roll's own schedule); the old DS stays until then"
                ),
                Party::Provider,
            ),
            (Some(_), None) => Hold::new(
                format!(
                    "the DNSKEY sets that held the old key {old_tag} to expire from caches before its DS is asked removed"
                ),
                Party::Ttl,
            )
            .until(old_hold_until),
            (Some(_), Some(_)) => Hold::new(
                format!(
                    "the old DS removed at every parent server (validated), the new kept: {}",
                    roll.old
                ),
                Party::Registrar,
            ),
        }
    }

    /// The roll is done: the zone follows the new key, its DS alone at every parent.
    fn end_own_roll(&mut self, roll: &ProviderRoll) {
        self.facts.lifecycle.ds_line = Some(roll.new.clone());
        self.facts.provider_roll = None;
        self.facts.routine.settled_view = None;
        self.facts.routine.served_keys_when_asked = None;
        self.note(format!(
            "the provider's roll is done: every parent server publishes the DS of key {} alone and no name server serves the old key {}; the zone's key is now {}",
            roll.new_tag(),
            roll.old_tag(),
            roll.new
        ));
    }
}
