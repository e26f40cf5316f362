//! One observation of one zone: the provider, every parent address, every child address,
//! and (where it matters) validation, asked concurrently.

use serde::Serialize;

use crate::dns::delegation::{self, DelegationVerdict};
use crate::dns::{
    ChildView, DnskeyAnswer, DsyncView, ObserveError, Observer, ParentView, ValidationVerdict,
    combine_validation,
};
use crate::dnssec::DnssecKey;
use crate::dnssec::DsLine;
use crate::lifecycle::model::served_fingerprint;
use crate::lifecycle::parent_way::ParentPath;
use crate::lifecycle::rules::Look;
use crate::lifecycle::sample::Sample;
use crate::lifecycle::{CdsSetting, Clock, Observation, Policy, ProviderView, State, Zone};
use crate::provider::{HostedZone, Provider, ProviderError};
use crate::store::ObservationText;

use super::registry::resolve_path;

/// `unknown_calls`: the zone has provider calls of unknown outcome, which this look
/// settles (rule 11): the CDS setting is read then too, even at a settled zone's look.
pub(super) async fn observe<P: Provider, O: Observer>(
    provider: &P,
    observer: &O,
    zone: &Zone,
    listed: Option<&HostedZone>,
    clock: &dyn Clock,
    policy: &Policy,
    unknown_calls: bool,
) -> Observation {
    let name = zone.name.as_str();
    let look = Look::at(zone, clock.now());
    // A settled zone seen in the paged listing asks the provider nothing when nothing
    // changed (provider calls per steady poll near zero); it is asked below
    // only when the listing's flag or the served key set says something did.
    let listed = listed.filter(|_| look.settled);
    let asked = ask(
        provider,
        observer,
        name,
        &look,
        listed.is_some(),
        unknown_calls,
    )
    .await;
    let unchanged = listed.and_then(|z| {
        unchanged_view(
            zone,
            z,
            asked.parent.as_ref().ok(),
            asked.child.as_ref().ok(),
        )
    });
    let provider_asked = unchanged.is_none();
    let provider_view = provider_view(provider, name, unchanged, asked.dnssec).await;
    let provider_ns = provider_ns(
        provider,
        zone,
        look.settled,
        asked.name_servers,
        &asked.parent,
    )
    .await;
    let (zone_max_ttl, zone_ttl_error) = ttl_read(asked.rrsets);
    let ds_path = ds_path(observer, asked.dsync.as_ref(), &asked.parent, policy).await;
    Observation {
        // Taken after the answers: a "gone" seen now was true no later than now.
        at: clock.now(),
        provider: provider_view,
        zone_max_ttl,
        zone_ttl_error,
        provider_ns,
        provider_asked,
        parent: asked.parent.map_err(|e| e.to_string()),
        child: asked.child.map_err(|e| e.to_string()),
        validation: asked.validation,
        // Filled in by the engine from the outbox.
        registrar_hook_failed: None,
        cds: asked.cds,
        ds_path,
        cds_notify: None,
        delegation: Default::default(),
    }
    .assessed()
}

/// What one look asks at once: the provider's answers (`None`: not asked at this look)
/// and the public DNS's.
struct Asked {
    dnssec: Option<Result<DnssecKey, ProviderError>>,
    rrsets: Option<Result<Option<u32>, ProviderError>>,
    name_servers: Option<Result<HostedZone, ProviderError>>,
    parent: Result<ParentView, ObserveError>,
    child: Result<ChildView, ObserveError>,
    validation: ValidationVerdict,
    cds: CdsSetting,
    dsync: Option<Result<DsyncView, ObserveError>>,
}

/// Asks, concurrently, what `look` says this look needs. `listed`: the zone's flag is at
/// hand from the listing, so its DNSSEC key is asked only if the answers disagree with
/// what is remembered (then by [`provider_view`]).
async fn ask<P: Provider, O: Observer>(
    provider: &P,
    observer: &O,
    name: &str,
    look: &Look,
    listed: bool,
    unknown_calls: bool,
) -> Asked {
    let parent_view = async {
        if look.validated_parent {
            observer.parent_validated(name).await
        } else {
            observer.parent(name).await
        }
    };
    let rrsets = async {
        if look.zone_ttl {
            Some(provider.largest_ttl(name).await)
        } else {
            None
        }
    };
    // The provider's name servers (safety rule 9): asked at every look at a zone that
    // waits or is not delegated to them; a steady zone delegated to them uses the set
    // remembered, and asks again only when the parent disagrees with it.
    let name_servers = async {
        if look.settled {
            None
        } else {
            Some(provider.zone(name).await)
        }
    };
    let validation = async {
        if look.validation {
            combine_validation(&observer.validation(name).await)
        } else {
            ValidationVerdict::Unknown
        }
    };
    let dnssec = async {
        if listed {
            None
        } else {
            Some(provider.dnssec_key(name).await)
        }
    };
    // The provider's CDS setting (rule 14), where a step may change it, and where a call
    // to set it may be what this look settles.
    let cds = async {
        if look.cds() || unknown_calls {
            match provider.cds_publication(name).await {
                Ok(halves) => CdsSetting::read(halves),
                Err(e) => CdsSetting::Unknown(e.to_string()),
            }
        } else {
            CdsSetting::NotAsked
        }
    };
    // The parent's DSYNC (RFC 9859), where a DS request may go by the registry.
    let dsync = async {
        if look.ds_path {
            Some(observer.parent_dsync(name).await)
        } else {
            None
        }
    };
    let (dnssec, rrsets, name_servers, parent, child, validation, cds, dsync) = tokio::join!(
        dnssec,
        rrsets,
        name_servers,
        parent_view,
        // Every full look asks the child's CDS and CDNSKEY too: a registry that scans
        // may act on them, so a set that contradicts the intent is said at once.
        observer.child_with_signals(name),
        validation,
        cds,
        dsync
    );
    Asked {
        dnssec,
        rrsets,
        name_servers,
        parent,
        child,
        validation,
        cds,
        dsync,
    }
}

/// What the provider says of the zone's DNSSEC: the listing's word where the answers
/// agree with what is remembered (`unchanged`), else the key asked at the look, else
/// asked now.
async fn provider_view<P: Provider>(
    provider: &P,
    name: &str,
    unchanged: Option<ProviderView>,
    asked: Option<Result<DnssecKey, ProviderError>>,
) -> ProviderView {
    let key = match (unchanged, asked) {
        (Some(view), _) => return view,
        (None, Some(asked)) => asked,
        (None, None) => provider.dnssec_key(name).await,
    };
    match key {
        Ok(key) => ProviderView::On(Box::new(key)),
        Err(ProviderError::DnssecDisabled) => ProviderView::Off,
        Err(ProviderError::NotFound(_)) => ProviderView::Missing,
        Err(e) => ProviderView::Unknown(e.to_string()),
    }
}

/// The provider's name servers: as asked at the look, else the set remembered; a
/// settled zone whose parent does not delegate to that set asks the provider again.
async fn provider_ns<P: Provider>(
    provider: &P,
    zone: &Zone,
    settled: bool,
    asked: Option<Result<HostedZone, ProviderError>>,
    parent: &Result<ParentView, ObserveError>,
) -> Option<Vec<String>> {
    let remembered = zone.facts.delegation.provider_ns.clone();
    let mut provider_ns = match asked {
        Some(Ok(z)) => z.name_servers.or(remembered),
        _ => remembered,
    };
    if settled
        && let Ok(view) = parent
        && delegation::assess(&view.delegations, provider_ns.as_deref()).verdict
            != DelegationVerdict::Provider
        && let Ok(z) = provider.zone(zone.name.as_str()).await
        && let Some(ns) = z.name_servers
    {
        provider_ns = Some(ns);
    }
    provider_ns
}

/// The zone's largest TTL from the provider's RRset listing, or why it is not known
/// (`None, None`: not asked at this look).
fn ttl_read(rrsets: Option<Result<Option<u32>, ProviderError>>) -> (Option<u32>, Option<String>) {
    match rrsets {
        None => (None, None),
        Some(Ok(Some(ttl))) => (Some(ttl), None),
        Some(Ok(None)) => (
            None,
            Some("an RRset the provider lists for the zone has no TTL".to_string()),
        ),
        Some(Err(e)) => (
            None,
            Some(format!("the provider's RRset listing failed: {e}")),
        ),
    }
}

/// The parent's way for a DS, where this look asked for its DSYNC. The parent's name:
/// the DSYNC lookup's, else the DS look's.
async fn ds_path<O: Observer>(
    observer: &O,
    dsync: Option<&Result<DsyncView, ObserveError>>,
    parent: &Result<ParentView, ObserveError>,
    policy: &Policy,
) -> Option<ParentPath> {
    match (dsync, parent) {
        (Some(Ok(view)), _) => {
            Some(resolve_path(observer, &view.parent, Ok(view), &policy.parents).await)
        }
        (Some(Err(e)), Ok(p)) => {
            Some(resolve_path(observer, &p.parent, Err(e), &policy.parents).await)
        }
        _ => None,
    }
}

/// A settled zone's sampled look (DESIGN.md section 4): the listing's flag, and the
/// `turn`'s one parent address (validated where the parent's keys are at hand) and one
/// child address, asked concurrently.
pub(super) async fn sample<O: Observer>(
    observer: &O,
    zone: &Zone,
    listed: Option<&HostedZone>,
    turn: u64,
    clock: &dyn Clock,
) -> Sample {
    let name = zone.name.as_str();
    let (parent, child) = tokio::join!(
        observer.parent_sample(name, turn),
        observer.child_sample(name, turn)
    );
    Sample {
        at: clock.now(),
        listed: listed.and_then(|z| z.dnssec_enabled),
        parent: parent.map_err(|e| e.to_string()),
        child: child.map_err(|e| e.to_string()),
    }
}

/// What a settled zone's provider side is when the listing shows nothing changed:
/// `disabled`, the listing says off and every child address answers that it serves no
/// DNSKEY (a listing in hand may be older than a switch behind our back; the name
/// servers are not); or `active`, the listing says on, every child
/// address serves exactly the key set it served when the provider last named its key,
/// which is still the one followed, and every parent address publishes a DS for it.
/// `None`: something may have changed; ask the provider.
fn unchanged_view(
    zone: &Zone,
    listed: &HostedZone,
    parent: Option<&crate::dns::ParentView>,
    child: Option<&crate::dns::ChildView>,
) -> Option<ProviderView> {
    match (zone.state, listed.dnssec_enabled) {
        (Some(State::Disabled), Some(false)) => child
            .is_some_and(|c| c.all_unsigned())
            .then_some(ProviderView::Off),
        (Some(State::Active), Some(true)) => {
            let child = child.filter(|c| !c.any_unknown())?;
            if zone.facts.routine.served_keys_when_asked.as_deref()
                != Some(&served_fingerprint(child))
            {
                return None;
            }
            let line = DsLine::parse(zone.facts.lifecycle.ds_line.as_deref()?).ok()?;
            let dnskey = child.answers.iter().find_map(|a| match &a.answer {
                DnskeyAnswer::Keys(k) => k
                    .keys
                    .iter()
                    .find(|key| key.matches_ds(zone.name.as_str(), &line.ds))
                    .cloned(),
                _ => None,
            })?;
            if !parent.is_some_and(|p| p.all_point_at(&dnskey)) {
                return None;
            }
            Some(ProviderView::On(Box::new(DnssecKey {
                zone: zone.name.to_string(),
                dnskey,
                ds: line.ds,
                ds_ttl: line.ttl,
                uuid: None,
            })))
        }
        _ => None,
    }
}

/// The observation as the audit trail and `status` keep it: what each server said, as
/// JSON text (written straight from the observation; no JSON tree is built), and its
/// brief: the provider's answer or failure and the parent's evidence.
/// `account`: the configured provider that holds the zone, where it is known.
pub fn summarize(obs: &Observation, account: Option<&str>) -> ObservationText {
    let provider = match &obs.provider {
        ProviderView::On(key) => ProviderPart {
            account: None,
            dnssec: "on",
            ds: Some(key.ds_line().to_string()),
            error: None,
        },
        ProviderView::Off => ProviderPart::said("off"),
        ProviderView::Missing => ProviderPart::said("not_found"),
        ProviderView::Unknown(e) => ProviderPart {
            error: Some(e),
            ..ProviderPart::said("unknown")
        },
    };
    // A call that failed beside a good DNSSEC answer (the RRset listing) is still the
    // provider's failure: `status` names it.
    let provider = match (&obs.zone_ttl_error, provider.error) {
        (Some(e), None) => ProviderPart {
            error: Some(e),
            ..provider
        },
        _ => provider,
    };
    let provider = ProviderPart {
        account,
        ..provider
    };
    let brief = ObservationText::brief(
        account.map(Into::into),
        Some(provider.dnssec.into()),
        provider.error.map(Into::into),
        obs.parent
            .as_ref()
            .ok()
            .and_then(|view| serde_json::to_value(&view.evidence).ok()),
    );
    let summary = Summary {
        at: obs.at.to_string(),
        child: match &obs.child {
            Ok(view) => Part::Seen(view.answers.iter().map(child_answer).collect()),
            Err(e) => Part::Failed { error: e },
        },
        delegation: &obs.delegation,
        parent: match &obs.parent {
            Ok(view) => Part::Seen(view),
            Err(e) => Part::Failed { error: e },
        },
        provider,
        validation: obs.validation.to_string(),
    };
    ObservationText {
        whole: json_text(&summary),
        brief,
    }
}

/// Plain data into a string: this cannot fail, but if it did, the row still holds JSON.
fn json_text<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_string())
}

/// The summary's fields, in the order `status` and the audit trail have always kept them.
#[derive(Serialize)]
struct Summary<'a> {
    at: String,
    child: Part<'a, Vec<ChildAnswer<'a>>>,
    delegation: &'a crate::dns::delegation::DelegationAssessment,
    parent: Part<'a, &'a crate::dns::ParentView>,
    provider: ProviderPart<'a>,
    validation: String,
}

/// What a view gave: the view, or why there is none.
#[derive(Serialize)]
#[serde(untagged)]
enum Part<'a, T> {
    Seen(T),
    Failed { error: &'a str },
}

#[derive(Serialize)]
struct ProviderPart<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    account: Option<&'a str>,
    dnssec: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ds: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

impl ProviderPart<'_> {
    fn said(dnssec: &'static str) -> Self {
        Self {
            account: None,
            dnssec,
            ds: None,
            error: None,
        }
    }
}

/// One child address's DNSKEY answer: the keys (flags, algorithm, tag), their TTL and
/// whether signed; or "no DNSKEY", "unknown: why".
#[derive(Serialize)]
struct ChildAnswer<'a> {
    addr: String,
    answer: Said,
    server: &'a str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Said {
    Keys {
        keys: Vec<String>,
        signed: bool,
        /// The key tags whose signature over the DNSKEY set was valid at the look.
        signed_by: Vec<u16>,
        ttl: u32,
    },
    Text(String),
}

fn child_answer(a: &crate::dns::ServerAnswer<DnskeyAnswer>) -> ChildAnswer<'_> {
    ChildAnswer {
        addr: a.addr.to_string(),
        answer: match &a.answer {
            DnskeyAnswer::Keys(k) => Said::Keys {
                keys: k
                    .keys
                    .iter()
                    .map(|key| format!("{} {} tag {}", key.flags, key.algorithm, key.key_tag()))
                    .collect(),
                signed: k.signed,
                signed_by: k
                    .self_signers
                    .iter()
                    .filter_map(|i| k.keys.get(*i).map(|key| key.key_tag()))
                    .collect(),
                ttl: k.ttl,
            },
            DnskeyAnswer::Absent => Said::Text("no DNSKEY".to_string()),
            DnskeyAnswer::Unknown(r) => Said::Text(format!("unknown: {r}")),
        },
        server: &a.server,
    }
}
