//! The DNS side of `dnssec-warden check ZONE`: one validated look at every parent and
//! child server, and the two verdicts drawn from it. The provider's side, the report, its
//! text and the advice are the CLI's (`cli::check`).

use super::delegation::NsAnswer;
use super::model::{
    ChildView, DsyncView, Evidence, ParentDsVerdict, ParentView, UnknownReason, VerdictReason,
};
use super::split::DelegationSplit;
use super::{ObserveError, Observer};
use crate::dns::validate::{ValidationProbe, ValidationVerdict, combine_validation};

/// What one look at the public DNS found about a zone.
#[derive(Debug, Clone)]
pub struct Look {
    /// The zone as the parent view names it (lower case, trailing dot).
    pub zone: String,
    pub parent_ds: ParentDsVerdict,
    pub parent_ds_reasons: Vec<VerdictReason>,
    pub validation: ValidationVerdict,
    /// Secure, or cleanly insecure.
    pub consistent: bool,
    /// `validated | insecure | unchecked`, as [`Evidence`] of the parent view shown.
    pub evidence: &'static str,
    pub evidence_detail: Option<String>,
    pub parent: Option<ParentView>,
    pub child: Option<ChildView>,
    pub validation_probes: Vec<ValidationProbe>,
    /// Discovery failures and the like, in the order they happened.
    pub errors: Vec<String>,
    /// The DSYNC records the parent publishes for the zone (RFC 9859), or why they are
    /// not known: which way the parent wants the DS signalled, a hint only.
    pub dsync: Result<DsyncView, ObserveError>,
    /// Parent addresses delegating to different NS sets: each set's servers asked, and
    /// whether each referral validates. `None` when they agree.
    pub split: Option<DelegationSplit>,
}

/// Observes `zone` once: the validated parent view (the routine one, said to be
/// unchecked, when the parent's keys cannot be established), the child view with its
/// CDS/CDNSKEY signals, every validator's view, and the parent's DSYNC records. Where
/// parent addresses delegate to different NS sets, the servers of each set are asked too
/// (the child view follows one of them only).
pub async fn look<O: Observer>(observer: &O, zone: &str) -> Look {
    let (parent, child, mut probes, dsync) = futures::join!(
        observer.parent_validated(zone),
        observer.child_with_signals(zone),
        observer.validation(zone),
        observer.parent_dsync(zone)
    );
    let mut errors = Vec::new();
    // The validated view; if the parent's keys cannot be established, the routine view
    // is shown instead, said to be unchecked, so the operator still sees each answer.
    let parent = match parent {
        Ok(p) => Some(p),
        Err(e) => {
            errors.push(format!("DS answers not validated: {e}"));
            observer
                .parent(zone)
                .await
                .map_err(|e| errors.push(e.to_string()))
                .ok()
        }
    };
    let (evidence, evidence_detail) = match parent.as_ref().map(|p| &p.evidence) {
        Some(Evidence::Validated) => ("validated", None),
        Some(Evidence::Insecure(why)) => ("insecure", Some(why.clone())),
        Some(Evidence::Unchecked) | None => ("unchecked", errors.first().cloned()),
    };
    // Glue that differs between parent addresses widened the delegation the child
    // view asks: asked again, every address any parent hands out is asked.
    let glue_differs = parent.as_ref().is_some_and(|p| {
        p.delegations
            .iter()
            .any(|d| matches!(d.answer, NsAnswer::Unknown(UnknownReason::GlueDiffers(_))))
    });
    let child = if glue_differs {
        let (child, again) =
            futures::join!(observer.child_with_signals(zone), observer.validation(zone));
        probes = again;
        child
    } else {
        child
    };
    let child = child.map_err(|e| errors.push(e.to_string())).ok();
    // No child view at all is no evidence: `ServedKeys::default()` is not known.
    let served = child.as_ref().map(|c| c.served_keys()).unwrap_or_default();
    let (parent_ds, parent_ds_reasons) = match parent.as_ref().map(|p| p.assess(&served)) {
        Some(a) => (a.verdict, a.reasons),
        None => (ParentDsVerdict::Unknown, vec![VerdictReason::ParentUnknown]),
    };
    let split = match &parent {
        Some(p) => super::split::follow(observer, zone, p, child.as_ref()).await,
        None => None,
    };
    let validation = combine_validation(&probes);
    let unsigned = child.as_ref().is_some_and(|c| c.all_unsigned());
    // A split is never consistent: resolvers reach different keys by the parent server
    // they happen to ask, and the next NS change at the lagging server changes that.
    let consistent = !glue_differs
        && split.is_none()
        && match parent_ds {
            ParentDsVerdict::AllMatch => validation == ValidationVerdict::Secure,
            ParentDsVerdict::AllAbsent => unsigned || validation == ValidationVerdict::Insecure,
            _ => false,
        };
    Look {
        zone: parent
            .as_ref()
            .map(|p| p.zone.clone())
            .unwrap_or_else(|| crate::dnssec::fqdn(zone).unwrap_or_else(|_| zone.to_string())),
        parent_ds,
        parent_ds_reasons,
        validation,
        consistent,
        evidence,
        evidence_detail,
        parent,
        child,
        validation_probes: probes,
        errors,
        dsync,
        split,
    }
}
