//! The conditions dnssec-warden alerts on, and `judge`: what one observation says about
//! each of them. `step` applies the judgement; the engine turns changes into one
//! notification per episode and a `resolved` when the condition clears.

pub use crate::alert_kind::{AlertKind, Severity};

use super::facts::Facts;
use super::model::{AlertCheck, Observation, ProviderView, Zone, parent_ds_lines};
use super::policy::Policy;
use super::rules::{delegation_hold_until, ds_request_at, removal_request_at};
use super::state::State;
use crate::dns::delegation::{self, DelegationMatch, DelegationVerdict};
use crate::dns::{
    ChildView, DsAnswer, Evidence, ParentDsVerdict, ParentView, ServedKeys, ValidationVerdict,
};
use crate::dnssec::DnssecKey;
use crate::time::Timestamp;

/// What one observation says about the alert conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    /// Every condition this observation can judge; those it cannot judge are left out,
    /// so an unknown never resolves an alert.
    pub checks: Vec<AlertCheck>,
    /// Moments before the next poll at which a judgement changes by itself (a condition
    /// becomes overdue or stuck).
    pub deadlines: Vec<Timestamp>,
    /// `Facts::partial_since` as this observation leaves it: set while parent servers
    /// disagree, cleared once they agree, kept while the parent is unknown.
    pub partial_since: Option<Timestamp>,
}

/// Judges every alert condition for `zone`, now in `state` with `facts` (the step's
/// outcome), on `obs`. Pure: the caller applies `partial_since` and the deadlines.
///
/// One step per condition, in the order the checks are listed.
pub fn judge(
    zone: &Zone,
    state: Option<State>,
    facts: &Facts,
    obs: &Observation,
    policy: &Policy,
) -> Judgement {
    let case = Case::new(zone, state, facts, obs, policy);
    let signals = super::cds::judge(zone, state, facts, obs);
    let mut out = Judgement {
        checks: Vec::new(),
        deadlines: Vec::new(),
        partial_since: facts.health.partial_since,
    };
    out.checks.push(case.ds_unpublished_overdue());
    out.checks.push(case.ds_removal_overdue());
    out.checks.push(case.ds_scan_overdue());
    if let Some(parent) = case.parent {
        case.at_the_parent(parent, &mut out);
    }
    out.checks.extend(case.validation_failed());
    out.checks.extend(case.signatures_expiring());
    let failing = case.observation_failing(&mut out.deadlines);
    out.checks.push(failing);
    out.checks.extend(case.evidence_unvalidated());
    out.checks
        .extend(missing_at_provider(case.zone, obs, case.deleg));
    out.checks.extend(provider_roll(case.zone, facts, obs));
    out.checks.extend(move_alert_handed_over(state, facts, obs));
    // A provider's own roll says its waits itself (`provider_key_rolled`): the provider
    // keeps both keys as long as it likes.
    if facts.health.failing_since.is_none() && facts.provider_roll.is_none() {
        let stalled = case.wait_stalled(&mut out.deadlines);
        out.checks.push(stalled);
    }
    out.checks.push(case.registrar_hook_failed());
    out.checks.extend(signals);
    out
}

/// What every condition is judged on: the zone as the step leaves it, and this look's
/// parts that can be read (an unknown part judges nothing).
struct Case<'a> {
    /// The zone's name, as the messages write it.
    zone: &'a str,
    state: Option<State>,
    /// Since when the zone is in `state`: now when the step moved it.
    since: Timestamp,
    facts: &'a Facts,
    obs: &'a Observation,
    policy: &'a Policy,
    now: Timestamp,
    parent: Option<&'a ParentView>,
    deleg: &'a delegation::DelegationAssessment,
    child: Option<&'a ChildView>,
    /// The provider's key, while DNSSEC is on there.
    key: Option<&'a DnssecKey>,
    /// The registry is not being given its time to act on the CDS: the registrar's
    /// deadlines count.
    at_registrar: bool,
}

impl<'a> Case<'a> {
    fn new(
        zone: &'a Zone,
        state: Option<State>,
        facts: &'a Facts,
        obs: &'a Observation,
        policy: &'a Policy,
    ) -> Self {
        let now = obs.at;
        let key = match &obs.provider {
            ProviderView::On(key) => Some(&**key),
            _ => None,
        };
        Case {
            zone: zone.name.as_str(),
            state,
            since: if state == zone.state { zone.since } else { now },
            facts,
            obs,
            policy,
            now,
            parent: obs.parent.as_ref().ok(),
            deleg: &obs.delegation,
            child: obs.child.as_ref().ok(),
            key,
            at_registrar: facts.parent_way.registry_since.is_none(),
        }
    }

    /// `ds_unpublished_overdue`: while the registry is given its time to act on the CDS,
    /// its deadline is the one that counts (`ds_scan_overdue` once it passed); the
    /// registrar's counts from the ask.
    fn ds_unpublished_overdue(&self) -> AlertCheck {
        let (zone, facts, now, parent) = (self.zone, self.facts, self.now, self.parent);
        let overdue = match (self.state, ds_request_at(facts)) {
            (Some(State::AwaitingDs), Some(at))
                if self.at_registrar && now.since(at) >= self.policy.ds_overdue_after =>
            {
                let there = published(parent);
                Some(match &facts.lifecycle.ds_to_enter {
                    Some(line) => format!(
                        "{zone}: the DS announced at {at} is still not published by every parent server (the parent publishes: {there}). Enter it at the registrar: {line}"
                    ),
                    None => format!(
                        "{zone}: the DS announced at {at} is still not published by every parent server (the parent publishes: {there}). The DS is not shown while not every name server can be seen serving the key: run `dnssec-warden check {zone}`"
                    ),
                })
            }
            _ => None,
        };
        AlertCheck::new(AlertKind::DsUnpublishedOverdue, overdue)
    }

    /// `ds_removal_overdue`: a DS still published long after its removal was asked.
    fn ds_removal_overdue(&self) -> AlertCheck {
        let (zone, facts, since, parent) = (self.zone, self.facts, self.since, self.parent);
        let removal_at = removal_request_at(&facts.parent_way, since);
        let removal = (self.state == Some(State::AwaitingDsRemoval)
            && self.at_registrar
            && self.now.since(removal_at) >= self.policy.ds_removal_overdue_after)
            .then(|| {
                let records = parent.map(parent_ds_lines).unwrap_or_default();
                let remove = if records.is_empty() {
                    facts.lifecycle.ds_line.as_deref().unwrap_or("(the zone's DS)").to_string()
                } else {
                    records.join("; ")
                };
                format!(
                    "{zone}: a DS is still published at the parent since {since}. Remove it at the registrar: {remove}"
                )
            });
        AlertCheck::new(AlertKind::DsRemovalOverdue, removal)
    }

    /// `ds_scan_overdue`: the registry missed its period to act on the child's CDS.
    fn ds_scan_overdue(&self) -> AlertCheck {
        let (zone, state, facts) = (self.zone, self.state, self.facts);
        let scan = match (state, facts.parent_way.registry_missed_at) {
            (Some(State::AwaitingDs | State::AwaitingDsRemoval), Some(at)) => {
                let path = facts.parent_way.ds_path.as_ref();
                let what = if state == Some(State::AwaitingDs) {
                    "published the DS from the child's CDS"
                } else {
                    "removed the DS on the child's CDS delete request"
                };
                Some(format!(
                    "{zone}: {} has not {what} within its period ({}); asked at the registrar at {at}",
                    super::registry::registry_of(path),
                    super::registry::route_text(path, facts.parent_way.cds_notified.as_ref())
                ))
            }
            _ => None,
        };
        AlertCheck::new(AlertKind::DsScanOverdue, scan)
    }

    /// What the parent's answers say: a changed delegation, DNSSEC off under a DS, a DS
    /// that matches no served key, one validators cannot use, stale ones beside a good
    /// one, and parent servers that disagree.
    fn at_the_parent(&self, parent: &ParentView, out: &mut Judgement) {
        let (zone, facts, obs, deleg) = (self.zone, self.facts, self.obs, self.deleg);
        let moved = delegation_changed(zone, facts, obs, parent, deleg, self.policy);
        let moved_firing = moved.as_ref().is_some_and(|c| c.firing.is_some());
        if let Some(check) = moved {
            out.checks.push(check);
        }
        // Only a parent that may send resolvers to the provider's servers makes the
        // provider's switch matter.
        let foreign = deleg.verdict == DelegationVerdict::Foreign;
        out.checks
            .extend(self.dnssec_off_with_ds(parent, moved_firing, foreign));
        let served = self.served_keys();
        let verdict = parent.verdict(&served);
        out.checks
            .extend(self.ds_mismatch(parent, verdict, &served, moved_firing, foreign));
        out.checks.extend(self.ds_unsupported(parent));
        if let Some(check) = stale_ds(zone, parent, &served, verdict, self.key) {
            out.checks.push(check);
        }
        self.partial_propagation(parent, verdict, out);
    }

    /// `dnssec_off_with_ds`: the provider switched DNSSEC off while the parent still
    /// publishes a DS.
    fn dnssec_off_with_ds(
        &self,
        parent: &ParentView,
        moved_firing: bool,
        foreign: bool,
    ) -> Option<AlertCheck> {
        let zone = self.zone;
        let provider_off = matches!(self.obs.provider, ProviderView::Off);
        let provider_known = matches!(self.obs.provider, ProviderView::On(_) | ProviderView::Off);
        if moved_firing {
            // Said by `delegation_changed_with_ds`, worded for what really happened.
            None
        } else if provider_known && foreign {
            Some(AlertCheck::clear(AlertKind::DnssecOffWithDs))
        } else if provider_known {
            if provider_off && parent.any_present() {
                Some(AlertCheck::firing(
                    AlertKind::DnssecOffWithDs,
                    format!(
                        "{zone}: DNSSEC is off at the provider while the parent still publishes DS {}: validating resolvers fail the domain now. Switch DNSSEC back on at the provider, or remove the DS at the registrar and wait out its TTL",
                        published(Some(parent))
                    ),
                ))
            } else if !provider_off || !parent.any_unknown() {
                Some(AlertCheck::clear(AlertKind::DnssecOffWithDs))
            } else {
                None
            }
        } else {
            None
        }
    }

    /// The evidence a DS is judged against: what the child's addresses served. While
    /// no child view exists, the provider's key stands in to recognise a match (for
    /// `partial`), never to call a DS wrong.
    fn served_keys(&self) -> ServedKeys {
        match (self.child, self.key) {
            (Some(child), _) => child.served_keys(),
            (None, Some(key)) => ServedKeys::assumed(vec![key.dnskey.clone()]),
            (None, None) => ServedKeys::default(),
        }
    }

    /// `ds_mismatch`: the parent publishes a DS that matches no key the name servers
    /// serve.
    fn ds_mismatch(
        &self,
        parent: &ParentView,
        verdict: ParentDsVerdict,
        served: &ServedKeys,
        moved_firing: bool,
        foreign: bool,
    ) -> Option<AlertCheck> {
        let (zone, facts, now, key) = (self.zone, self.facts, self.now, self.key);
        let provider_off = matches!(self.obs.provider, ProviderView::Off);
        match verdict {
            // `mismatch` already needs a child address that answered (known evidence).
            _ if moved_firing => None,
            ParentDsVerdict::Mismatch if !provider_off || foreign => {
                let servers = if foreign {
                    format!(
                        "the name servers the parent delegates to ({}, not the provider's)",
                        delegation::describe(&facts.delegation.old_ns)
                    )
                } else {
                    "the zone's name servers".to_string()
                };
                // The expected DS as a fact of this look, not an instruction: the message
                // outlives the look while the alert cannot be judged, and a DS is told "to
                // enter" only by `ds_to_enter` (status, the alert's `ds`), recomputed at
                // every step (safety rule 8).
                let expected = match key {
                    Some(key) if !foreign => format!(
                        " Expected at this look ({now}): {}, the DS of the provider's key; `dnssec-warden status {zone}` shows it as the DS to enter while every name server serves the key",
                        key.ds_line()
                    ),
                    _ => String::new(),
                };
                Some(AlertCheck::firing(
                    AlertKind::DsMismatch,
                    format!(
                        "{zone}: the parent publishes DS {} which matches no key {servers} serve: validation fails.{expected}",
                        published(Some(parent)),
                    ),
                ))
            }
            ParentDsVerdict::Unknown | ParentDsVerdict::Mismatch => None,
            // No DS anywhere: nothing can mismatch, whatever the child said.
            ParentDsVerdict::AllAbsent => Some(AlertCheck::clear(AlertKind::DsMismatch)),
            // A match seen only against the provider's key, or no child address
            // answered: the child evidence is unknown; the alert is not judged.
            _ if !served.known => None,
            _ => Some(AlertCheck::clear(AlertKind::DsMismatch)),
        }
    }

    /// `ds_unsupported`: a DS set of only algorithms or digest types validators do not
    /// implement: validators treat the zone as insecure (RFC 4035 5.2, RFC 6840 5.2). Not
    /// an outage (so not `ds_mismatch`), but no chain of trust either: a warning.
    fn ds_unsupported(&self, parent: &ParentView) -> Option<AlertCheck> {
        let zone = self.zone;
        if parent.any_unsupported_only() {
            let ds: Vec<String> = parent.distinct_ds().iter().map(|d| d.to_string()).collect();
            Some(AlertCheck::firing(
                AlertKind::DsUnsupported,
                format!(
                    "{zone}: the parent publishes DS {} whose every record uses an algorithm or digest type validators do not implement: validators treat the zone as insecure. Replace it at the registrar with the DS `dnssec-warden status {zone}` shows to enter",
                    ds.join(", "),
                ),
            ))
        } else if !parent.any_unknown() {
            Some(AlertCheck::clear(AlertKind::DsUnsupported))
        } else {
            None
        }
    }

    /// `partial_propagation_stuck`: parent servers disagree about the DS for too long;
    /// `partial_since` set while they disagree, cleared once they agree.
    fn partial_propagation(
        &self,
        parent: &ParentView,
        verdict: ParentDsVerdict,
        out: &mut Judgement,
    ) {
        let (zone, now, policy) = (self.zone, self.now, self.policy);
        match verdict {
            ParentDsVerdict::Partial => {
                let since = *out.partial_since.get_or_insert(now);
                let stuck = now.since(since) >= policy.partial_stuck_after;
                out.checks.push(AlertCheck::new(
                    AlertKind::PartialPropagationStuck,
                    stuck.then(|| {
                        let without: Vec<String> = parent
                            .answers
                            .iter()
                            .filter(|a| matches!(a.answer, DsAnswer::Absent))
                            .map(|a| format!("{} ({})", a.server, a.addr))
                            .collect();
                        format!(
                            "{zone}: parent servers disagree about the DS since {since}: DS {} is published, but not by {}. Check with the registrar or the registry",
                            published(Some(parent)),
                            without.join(", ")
                        )
                    }),
                ));
                if !stuck {
                    out.deadlines.push(since.plus(policy.partial_stuck_after));
                }
            }
            ParentDsVerdict::Unknown => {}
            _ => {
                out.partial_since = None;
                out.checks
                    .push(AlertCheck::clear(AlertKind::PartialPropagationStuck));
            }
        }
    }

    /// `validation_failed`: the validating resolvers answer bogus.
    fn validation_failed(&self) -> Option<AlertCheck> {
        let zone = self.zone;
        match self.obs.validation {
            ValidationVerdict::Bogus => Some(AlertCheck::firing(
                AlertKind::ValidationFailed,
                format!(
                    "{zone}: validation fails (bogus): resolvers answer SERVFAIL for the domain. Run `dnssec-warden check {zone}`"
                ),
            )),
            ValidationVerdict::Secure | ValidationVerdict::Insecure => {
                Some(AlertCheck::clear(AlertKind::ValidationFailed))
            }
            ValidationVerdict::Unknown => None,
        }
    }

    /// `signatures_expiring`: a signature over the DNSKEY set ends within the warning's
    /// horizon; judged on the child's answers only.
    fn signatures_expiring(&self) -> Option<AlertCheck> {
        let (zone, facts, deleg) = (self.zone, self.facts, self.deleg);
        let child = self.child?;
        let horizon = self
            .now
            .plus(self.policy.signatures_expiring_within)
            .unix_secs();
        let firing = child.earliest_expiration().and_then(|exp| {
            (i64::from(exp) <= horizon).then(|| {
                let who = if deleg.verdict == DelegationVerdict::Foreign {
                    format!(
                        "the operator of the name servers the parent delegates to ({}, not the provider's)",
                        delegation::describe(&facts.delegation.old_ns)
                    )
                } else {
                    "the provider".to_string()
                };
                format!(
                    "{zone}: a signature over the DNSKEY set expires at {}; {who} must re-sign before then",
                    Timestamp(i64::from(exp) * 1000)
                )
            })
        });
        Some(AlertCheck::new(AlertKind::SignaturesExpiring, firing))
    }

    /// `observation_failing`: no complete observation for too long, with the first
    /// reason; until then, the moment it would fire is a deadline.
    fn observation_failing(&self, deadlines: &mut Vec<Timestamp>) -> AlertCheck {
        let (zone, facts, obs, now, policy) =
            (self.zone, self.facts, self.obs, self.now, self.policy);
        let failing = facts.health.failing_since.and_then(|since| {
            (now.since(since) >= policy.observation_failing_after).then(|| {
                let why = match (&obs.provider, &obs.parent, &obs.zone_ttl_error) {
                    (ProviderView::Unknown(e), _, _) => format!("provider: {e}"),
                    (ProviderView::Missing, _, _) => format!("the provider has no zone {zone}"),
                    (_, _, Some(e)) => format!("provider: {e}"),
                    (_, Err(e), _) => format!("parent: {e}"),
                    (_, Ok(parent), _) => match parent.answers.iter().find_map(|a| match &a.answer {
                        DsAnswer::Unknown(reason) => {
                            Some(format!("parent server {} ({}): {reason}", a.server, a.addr))
                        }
                        _ => None,
                    }) {
                        Some(first) => first,
                        None => "some parent server gives no answer".to_string(),
                    },
                };
                format!(
                    "{zone}: no complete observation since {since} ({why}); no decision can be taken"
                )
            })
        });
        if let Some(since) = facts.health.failing_since
            && failing.is_none()
        {
            deadlines.push(since.plus(policy.observation_failing_after));
        }
        AlertCheck::new(AlertKind::ObservationFailing, failing)
    }

    /// `evidence_unvalidated`: safety rule 10 with `dns.require_validated_evidence`: an
    /// unsigned parent stops the decisions; said while it does, cleared once the evidence
    /// is validated.
    fn evidence_unvalidated(&self) -> Option<AlertCheck> {
        let zone = self.zone;
        let parent = self.parent?;
        match &parent.evidence {
            Evidence::Insecure(why) if self.policy.require_validated_evidence => {
                Some(AlertCheck::firing(
                    AlertKind::EvidenceUnvalidated,
                    format!(
                        "{zone}: the parent zone {} is not signed ({why}), and dns.require_validated_evidence is set: no decision that can take the domain down is taken on its answers; the zone waits",
                        parent.parent
                    ),
                ))
            }
            Evidence::Unchecked => None,
            _ => Some(AlertCheck::clear(AlertKind::EvidenceUnvalidated)),
        }
    }

    /// `wait_stalled`: a wait that does not end by itself is said once it lasts (rule 11);
    /// one that rests on incomplete observations is `observation_failing`'s (the caller
    /// asks only without one).
    fn wait_stalled(&self, deadlines: &mut Vec<Timestamp>) -> AlertCheck {
        let (zone, state, facts, now) = (self.zone, self.state, self.facts, self.now);
        let stalled = match (&facts.wait.held_by, facts.wait.held_since) {
            (Some(hold), Some(held)) => {
                let until = held.plus(self.policy.observation_failing_after);
                if now < until {
                    deadlines.push(until);
                    None
                } else {
                    Some(format!(
                        "{zone}: in {} and held since {held}; waiting for {} (on: {}). Run `dnssec-warden check {zone}`",
                        state.map_or("no state yet", State::as_str),
                        hold.what,
                        hold.on.as_str()
                    ))
                }
            }
            _ => None,
        };
        AlertCheck::new(AlertKind::WaitStalled, stalled)
    }

    /// `registrar_hook_failed`: only while the zone waits on the registrar: once it moved
    /// on, the hook's job is done (or was done by hand).
    fn registrar_hook_failed(&self) -> AlertCheck {
        let (zone, state, facts, obs) = (self.zone, self.state, self.facts, self.obs);
        let hook = match (state, &obs.registrar_hook_failed) {
            (Some(State::AwaitingDs | State::AwaitingDsRemoval), Some(error)) => Some(format!(
                "{zone}: the registrar hook failed ({error}); the DS request did not reach the registrar automatically. {}",
                match state {
                    Some(State::AwaitingDs) => format!(
                        "Enter the DS by hand: {}",
                        facts.lifecycle.ds_to_enter.as_deref().unwrap_or(
                            "(not shown while not every name server serves the key: see status)"
                        )
                    ),
                    _ => format!(
                        "Remove the DS by hand: {}",
                        published(obs.parent.as_ref().ok())
                    ),
                }
            )),
            _ => None,
        };
        AlertCheck::new(AlertKind::RegistrarHookFailed, hook)
    }
}

/// `zone_missing_at_provider`: the provider answers that it has no such zone while some
/// parent server delegates to its name servers (the whole domain is down, not only
/// DNSSEC). Cleared once the provider knows the zone again, or no parent server
/// delegates to it; not judged while either is unknown.
fn missing_at_provider(
    zone: &str,
    obs: &Observation,
    deleg: &delegation::DelegationAssessment,
) -> Option<AlertCheck> {
    let to_provider = [DelegationMatch::Provider, DelegationMatch::Mixed];
    match &obs.provider {
        ProviderView::On(_) | ProviderView::Off => {
            Some(AlertCheck::clear(AlertKind::ZoneMissingAtProvider))
        }
        ProviderView::Unknown(_) => None,
        ProviderView::Missing
            if deleg
                .servers
                .iter()
                .any(|s| to_provider.contains(&s.matches)) =>
        {
            let ds = match obs.parent.as_ref() {
                Ok(p) if p.any_present() => format!(
                    "; the parent also publishes DS {}, which no server can match now",
                    published(Some(p))
                ),
                _ => String::new(),
            };
            Some(AlertCheck::firing(
                AlertKind::ZoneMissingAtProvider,
                format!(
                    "{zone}: the provider answers that it has no zone {zone}, yet parent server(s) {} delegate to its name servers ({}): the domain does not resolve at all{ds}. Re-create the zone at the provider, or change the NS at the registrar",
                    servers_matching(deleg, &to_provider),
                    deleg
                        .provider_ns
                        .as_deref()
                        .map(delegation::describe)
                        .unwrap_or_default()
                ),
            ))
        }
        ProviderView::Missing if deleg.verdict == DelegationVerdict::Foreign => {
            Some(AlertCheck::clear(AlertKind::ZoneMissingAtProvider))
        }
        ProviderView::Missing => None,
    }
}

/// The DS records the parent publishes, as zone-file lines, for messages.
fn published(parent: Option<&ParentView>) -> String {
    let lines = parent.map(parent_ds_lines).unwrap_or_default();
    if lines.is_empty() {
        "none".to_string()
    } else {
        lines.join("; ")
    }
}

/// The parent servers whose delegation matches `which`, for messages.
fn servers_matching(deleg: &delegation::DelegationAssessment, which: &[DelegationMatch]) -> String {
    let names: Vec<String> = deleg
        .servers
        .iter()
        .filter(|s| which.contains(&s.matches))
        .map(|s| format!("{} ({})", s.server, s.addr))
        .collect();
    names.join(", ")
}

/// `delegation_changed_with_ds`: a delegation that changed while a DS the new name
/// servers cannot match is published (safety rule 9). Moving out: some parent address
/// delegates elsewhere while the provider's DS is published. Moving in, in the wrong
/// order: during a move, some parent address delegates to the provider's servers while
/// the parent publishes a DS the provider does not sign with. `None`: not judged (the
/// provider, its name servers, or a parent answer unknown).
fn delegation_changed(
    zone: &str,
    facts: &Facts,
    obs: &Observation,
    parent: &ParentView,
    deleg: &delegation::DelegationAssessment,
    policy: &Policy,
) -> Option<AlertCheck> {
    let provider_ns = deleg.provider_ns.as_ref()?;
    let key = match &obs.provider {
        ProviderView::On(key) => Some(key),
        ProviderView::Off => None,
        ProviderView::Unknown(_) | ProviderView::Missing => return None,
    };
    let points_at_key =
        |ds: &crate::dnssec::Ds| key.is_some_and(|k| k.dnskey.matches_ds(&parent.zone, ds));
    let provider_ds = parent
        .answers
        .iter()
        .any(|a| matches!(&a.answer, DsAnswer::Present { ds, .. } if ds.iter().any(points_at_key)));
    if deleg.any_elsewhere() && provider_ds {
        let sets: Vec<String> = deleg
            .elsewhere_sets()
            .iter()
            .map(|s| delegation::describe(s))
            .collect();
        return Some(AlertCheck::firing(
            AlertKind::DelegationChangedWithDs,
            format!(
                "{zone}: parent server(s) {} delegate to {}, not to the provider's name servers, while the parent publishes DS {} for the provider's key: validating resolvers that follow that delegation fail the domain. Remove the DS at the registrar now (`dnssec-warden disable {zone}` walks it), or put the NS back to {}",
                servers_matching(deleg, &[DelegationMatch::Foreign, DelegationMatch::Mixed]),
                sets.join(" / "),
                published(Some(parent)),
                delegation::describe(provider_ns)
            ),
        ));
    }
    let during_move = facts.move_in.moving_in
        || deleg.verdict == DelegationVerdict::Mixed
        || delegation_hold_until(&facts.delegation, policy).is_some_and(|until| obs.at < until);
    let to_provider = deleg.servers.iter().any(|s| {
        matches!(
            s.matches,
            DelegationMatch::Provider | DelegationMatch::Mixed
        )
    });
    let foreign_ds = parent.answers.iter().any(|a| {
        matches!(&a.answer, DsAnswer::Present { ds, .. }
            if ds.iter().any(crate::dnssec::Ds::supported) && !ds.iter().any(points_at_key))
    });
    if during_move && to_provider && foreign_ds {
        return Some(AlertCheck::firing(
            AlertKind::DelegationChangedWithDs,
            format!(
                "{zone}: parent server(s) {} delegate to the provider's name servers ({}) while the parent still publishes DS {}, for a key the provider does not sign with: validating resolvers that follow the new delegation fail the domain. Remove the DS at the registrar now, or put the NS back to {}",
                servers_matching(deleg, &[DelegationMatch::Provider, DelegationMatch::Mixed]),
                delegation::describe(provider_ns),
                published(Some(parent)),
                delegation::describe(&facts.delegation.old_ns)
            ),
        ));
    }
    let known = !parent.any_unknown() && deleg.verdict != DelegationVerdict::Unknown;
    known.then(|| AlertCheck::clear(AlertKind::DelegationChangedWithDs))
}

/// `ds_stale`: beside a DS that matches the served key, DS records for keys no name
/// server serves (and the provider does not sign with). Judged only on known child
/// evidence.
fn stale_ds(
    zone: &str,
    parent: &ParentView,
    served: &ServedKeys,
    verdict: ParentDsVerdict,
    key: Option<&crate::dnssec::DnssecKey>,
) -> Option<AlertCheck> {
    match verdict {
        ParentDsVerdict::AllMatch | ParentDsVerdict::Partial if served.known => {}
        ParentDsVerdict::AllAbsent => return Some(AlertCheck::clear(AlertKind::DsStale)),
        _ => return None,
    }
    let ttl = parent.max_ds_ttl().unwrap_or(0);
    let stale: Vec<String> = parent
        .distinct_ds()
        .iter()
        .filter(|d| d.supported())
        .filter(|d| {
            !served
                .keys
                .iter()
                .any(|k| k.is_sep() && k.is_zone_key() && k.matches_ds(&parent.zone, d))
                && !key.is_some_and(|k| k.dnskey.matches_ds(&parent.zone, d))
        })
        .map(|d| format!("{} {ttl} IN DS {d}", parent.zone))
        .collect();
    Some(AlertCheck::new(
        AlertKind::DsStale,
        (!stale.is_empty()).then(|| {
            format!(
                "{zone}: beside the DS that matches the served key, the parent publishes DS records for keys no name server serves: {}. Remove them at the registrar (unless a key roll is about to introduce their key)",
                stale.join("; ")
            )
        }),
    ))
}

/// `signed_move_held` as a move that ended with the target's key changed leaves it: the
/// zone's own look speaks for the key from the look that judges it, and only then is the
/// move's alert cleared: where the provider's roll stands (its alerts are in this same
/// judgement), where the provider names the key the zone follows, or where the zone left
/// `active` (its state's own alerts speak).
fn move_alert_handed_over(
    state: Option<State>,
    facts: &Facts,
    obs: &Observation,
) -> Option<AlertCheck> {
    if facts.signed_move.is_some() {
        return None;
    }
    let followed = match &obs.provider {
        ProviderView::On(key) => {
            facts.lifecycle.ds_line.as_deref() == Some(key.ds_line().to_string().as_str())
        }
        _ => false,
    };
    let spoken = facts.provider_roll.is_some() || followed || state != Some(State::Active);
    spoken.then(|| AlertCheck::clear(AlertKind::SignedMoveHeld))
}

/// `provider_key_rolled` while the provider's own roll stands, with what was asked of the
/// registrar; `provider_key_swapped` where a look shows a name server serving the new key
/// without the old while a parent server publishes no DS for it (cleared only by a look
/// at which every address answered).
fn provider_roll(zone: &str, facts: &Facts, obs: &Observation) -> Vec<AlertCheck> {
    let Some(roll) = &facts.provider_roll else {
        return vec![
            AlertCheck::clear(AlertKind::ProviderKeyRolled),
            AlertCheck::clear(AlertKind::ProviderKeySwapped),
        ];
    };
    let (new_tag, old_tag) = (roll.new_tag(), roll.old_tag());
    let mut said = format!(
        "{zone}: the provider rolled its key on its own (key {old_tag} to key {new_tag}, seen {}): ",
        roll.seen_at
    );
    match (roll.add_asked_at, roll.remove_asked_at) {
        (None, _) => said.push_str(
            "the new key's DS is asked for as an addition once every name server serves it",
        ),
        (Some(at), None) => said.push_str(&format!(
            "DS for tag {new_tag} asked as an addition at {at} (the DS of tag {old_tag} kept): {}; the old DS is asked removed once the old key is gone from every name server and the new DS is at every parent server",
            roll.new
        )),
        (Some(at), Some(removed)) => said.push_str(&format!(
            "DS for tag {new_tag} asked as an addition at {at}: {}; the old DS's removal asked at {removed}: {}",
            roll.new, roll.old
        )),
    }
    let mut out = vec![AlertCheck::firing(AlertKind::ProviderKeyRolled, said)];
    let (Ok(child), Ok(parent)) = (&obs.child, &obs.parent) else {
        return out;
    };
    let Some(old) = roll.old_ds() else {
        return out;
    };
    match super::own_roll::swapped(child, parent, &old, Some(&roll.new_key)) {
        Some(swap) => out.push(AlertCheck::firing(
            AlertKind::ProviderKeySwapped,
            format!(
                "{zone}: the provider swapped its key at once: name server {} serves the new key {} without the old key {old_tag}, while parent server {} publishes no DS for the new key: validating resolvers fail the zone there now. Add this DS at the registrar now, keeping the old one: {}",
                swap.server,
                swap.key.key_tag(),
                swap.parent_server,
                roll.line_of(&swap.key)
            ),
        )),
        None if !child.any_unknown() && !parent.any_unknown() => {
            out.push(AlertCheck::clear(AlertKind::ProviderKeySwapped));
        }
        None => {}
    }
    out
}
