//! A settled zone's routine look from a sample (DESIGN.md section 4): one parent address
//! and one child address instead of all of them, compared with what the zone's last full
//! look saw. Unanimity across every address is what makes a decision safe (safety rule
//! 3); a zone that decides nothing needs only to notice drift, and any difference, or any
//! answer that is not known, sends it to a full look at once.

pub use super::facts::SettledView;
use super::model::{Observation, ProviderView, Zone, key_marks};
use super::policy::Policy;
use super::state::{Intent, State};
use crate::dns::delegation::{self, DelegationVerdict};
use crate::dns::{ChildView, DnskeyAnswer, DsAnswer, ParentView, ValidationVerdict};
use crate::time::Timestamp;

/// What a sampled look saw: the provider's paged listing, one parent address and one
/// child address.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Timestamp,
    /// The listing's DNSSEC flag for the zone; `None` when the zone is not in it (or the
    /// listing is not at hand, or does not say).
    pub listed: Option<bool>,
    pub parent: Result<ParentView, String>,
    pub child: Result<ChildView, String>,
}

/// Whether the zone's next look may be a sample: a settled zone (`active` or `disabled`,
/// delegated to the provider, whose name servers are known) whose intent agrees with its
/// state, whose last full look found every address saying the same and nothing holding
/// or failing, with no open alert and nothing owed, and whose last full look is younger
/// than `full_look_every`.
pub fn may_sample(
    zone: &Zone,
    quiet: bool,
    last_full_look: Option<Timestamp>,
    now: Timestamp,
    policy: &Policy,
) -> bool {
    let intent_agrees = match zone.state {
        Some(State::Active) => zone.intent != Intent::Disabled,
        Some(State::Disabled) => zone.intent != Intent::Enabled,
        _ => false,
    };
    let f = &zone.facts;
    quiet
        && intent_agrees
        && f.routine.settled_view.is_some()
        && f.delegation.verdict == Some(DelegationVerdict::Provider)
        && f.delegation.provider_ns.is_some()
        && f.wait.held_by.is_none()
        && f.health.failures == 0
        && f.health.partial_since.is_none()
        && !f.move_in.moving_in
        && last_full_look.is_some_and(|at| now.since(at) < policy.full_look_every)
}

/// The standard for the zone's next samples, from a full look that leaves it in `state`:
/// `None` unless the zone is settled and every address said the same, known, thing (the
/// provider's answer matching the state, the delegation the provider's everywhere, and an
/// `active` zone validating as secure). Only a routine look, one that took the provider's
/// word from its listing, sets it: an agreeing sample then leaves the zone exactly as
/// such a look would (no DS "to enter" on a word the provider did not give now, rule 8).
pub fn settled_view(state: Option<State>, obs: &Observation) -> Option<SettledView> {
    if obs.provider_asked {
        return None;
    }
    let provider_agrees = match (state?, &obs.provider) {
        (State::Active, ProviderView::On(_)) => obs.validation == ValidationVerdict::Secure,
        (State::Disabled, ProviderView::Off) => true,
        _ => false,
    };
    if !provider_agrees || obs.delegation.verdict != DelegationVerdict::Provider {
        return None;
    }
    let parent = obs.parent.as_ref().ok()?;
    let child = obs.child.as_ref().ok()?;
    Some(SettledView {
        parent_ds: unanimous(parent.answers.iter().map(|a| ds_fingerprint(&a.answer)))?,
        child_keys: unanimous(child.answers.iter().map(|a| keys_fingerprint(&a.answer)))?,
    })
}

/// The one value every item has; `None` if there is none, or any is `None` or different.
fn unanimous(mut items: impl Iterator<Item = Option<String>>) -> Option<String> {
    let first = items.next()??;
    items.all(|i| i.as_ref() == Some(&first)).then_some(first)
}

/// Why the sample differs from the zone's settled view, or `None` when it agrees (a
/// settled zone whose sample agrees needs no step: nothing it would decide can have
/// changed).
pub fn disagreement(zone: &Zone, sample: &Sample, policy: &Policy) -> Option<String> {
    let f = &zone.facts;
    let Some(view) = &f.routine.settled_view else {
        return Some("no settled view to compare with".into());
    };
    let on = match zone.state {
        Some(State::Active) => true,
        Some(State::Disabled) => false,
        _ => return Some("the zone is not settled".into()),
    };
    if sample.listed != Some(on) {
        return Some(match sample.listed {
            Some(flag) => format!(
                "the provider's listing says DNSSEC is {}",
                if flag { "on" } else { "off" }
            ),
            None => "the provider's listing does not say".into(),
        });
    }
    let parent = match &sample.parent {
        Ok(p) if !p.answers.is_empty() && !p.delegations.is_empty() => p,
        Ok(_) => return Some("the parent sample has no answer".into()),
        Err(e) => return Some(format!("the parent could not be asked: {e}")),
    };
    for a in &parent.answers {
        if ds_fingerprint(&a.answer).as_ref() != Some(&view.parent_ds) {
            return Some(format!(
                "parent address {} ({}) answers the DS otherwise",
                a.addr, a.server
            ));
        }
        if let DsAnswer::Present { ttl, .. } = a.answer
            && f.lifecycle.max_ds_ttl.is_none_or(|max| ttl > max)
        {
            return Some(format!("parent address {} gives a longer DS TTL", a.addr));
        }
    }
    if delegation::assess(&parent.delegations, f.delegation.provider_ns.as_deref()).verdict
        != DelegationVerdict::Provider
    {
        return Some("the parent sample does not delegate to the provider".into());
    }
    let child = match &sample.child {
        Ok(c) if !c.answers.is_empty() => c,
        Ok(_) => return Some("the child sample has no answer".into()),
        Err(e) => return Some(format!("the name servers could not be asked: {e}")),
    };
    let horizon = sample
        .at
        .plus(policy.signatures_expiring_within)
        .unix_secs();
    for a in &child.answers {
        if keys_fingerprint(&a.answer).as_ref() != Some(&view.child_keys) {
            return Some(format!(
                "name server address {} ({}) serves other keys",
                a.addr, a.server
            ));
        }
        if let DnskeyAnswer::Keys(k) = &a.answer {
            if f.lifecycle.max_dnskey_ttl.is_none_or(|max| k.ttl > max) {
                return Some(format!(
                    "name server address {} gives a longer DNSKEY TTL",
                    a.addr
                ));
            }
            if k.signatures
                .iter()
                .any(|s| i64::from(s.expiration) <= horizon)
            {
                return Some(format!(
                    "a signature over the DNSKEY set at {} expires soon",
                    a.addr
                ));
            }
        }
    }
    None
}

/// One parent address's DS answer as comparable text: the DS records, sorted, or `none`;
/// `None` when unknown.
pub fn ds_fingerprint(answer: &DsAnswer) -> Option<String> {
    match answer {
        DsAnswer::Present { ds, .. } => {
            let mut lines: Vec<String> = ds.iter().map(ToString::to_string).collect();
            lines.sort();
            lines.dedup();
            Some(lines.join(","))
        }
        DsAnswer::Absent => Some("none".into()),
        DsAnswer::Unknown(_) => None,
    }
}

/// One child address's DNSKEY answer as comparable text: each key's flags, algorithm and
/// tag, marked when it does not sign the set ([`key_marks`]), or
/// `none`; `None` when unknown.
pub fn keys_fingerprint(answer: &DnskeyAnswer) -> Option<String> {
    match answer {
        DnskeyAnswer::Keys(k) => {
            let mut keys: Vec<String> = key_marks(k).collect();
            keys.sort();
            keys.dedup();
            Some(keys.join(","))
        }
        DnskeyAnswer::Absent => Some("none".into()),
        DnskeyAnswer::Unknown(_) => None,
    }
}
