//! `dnssec-warden check ZONE`: the one-shot view of a zone at the provider, at every
//! parent server and at every child server, the two verdicts, and what to do next. The
//! look at the DNS is `dns::check`'s; the provider's side, the text and the advice are here.

use std::fmt::Write as _;

use serde::Serialize;

use crate::dns::delegation::{self, DelegationDetail, DelegationMatch, DelegationVerdict};
use crate::dns::observe::signals::{self, Signals};
use crate::dns::observe::split::{DelegationSplit, PathOutcome, ReferralPath};
use crate::dns::{
    ChildView, DnskeyAnswer, DsAnswer, DsyncView, NsAnswer, Observer, ParentDsVerdict, ParentView,
    ValidationProbe, ValidationVerdict, VerdictReason,
};
use crate::lifecycle::parent_way::{ParentPath, ParentWays};
use crate::provider::fleet::Providers;
use crate::provider::{Provider, ProviderError};

/// The provider's side, when the config has a provider.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderState {
    /// The configured account that holds the zone, where that is known.
    pub name: Option<String>,
    pub dnssec_enabled: Option<bool>,
    /// The signing key, as `flags protocol algorithm base64`.
    pub dnskey: Option<String>,
    pub key_tag: Option<u16>,
    /// The DS the registrar needs, recomputed from the key.
    pub ds: Option<String>,
    /// Whether every child server serves the provider's key.
    pub served_everywhere: Option<bool>,
    /// Whether every parent server's DS set points at the provider's key.
    pub parent_points_at_it: Option<bool>,
    /// Why part of the above is missing.
    pub error: Option<String>,
}

/// Everything `check` learnt. Serialised as `check --json`.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub zone: String,
    /// `all_match | all_absent | partial | mismatch | unknown` (DESIGN.md section 6).
    pub parent_ds: ParentDsVerdict,
    /// What lies behind a `parent_ds` of `unknown`: `parent_unknown` (a parent address
    /// gave no usable answer), `child_unknown` (a DS matches no key, but no child address
    /// answered: not evidence of a wrong DS), `no_supported_ds` (a DS set of only
    /// algorithms or digest types validators do not implement: the zone is insecure to
    /// them, RFC 4035 section 5.2, RFC 6840 section 5.2). Empty otherwise.
    pub parent_ds_reasons: Vec<VerdictReason>,
    /// `secure | insecure | bogus | unknown`.
    pub validation: ValidationVerdict,
    /// Secure, or cleanly insecure: the exit status is 0 exactly then.
    pub consistent: bool,
    /// `validated | insecure | unchecked`: whether the parent's DS answers were validated
    /// from the trust anchor (safety rule 10), the parent zone is provably insecure, or
    /// the validated view failed and the answers shown are unvalidated.
    pub evidence: &'static str,
    /// Why, for `insecure` (the proof the parent is unsigned) and `unchecked` (why the
    /// parent's keys could not be established).
    pub evidence_detail: Option<String>,
    /// `provider | foreign | mixed | unknown`: whom the parent addresses delegate the
    /// zone to, against the provider's name servers (DESIGN.md section 2).
    pub delegation: DelegationVerdict,
    /// Per parent address: the NS set it delegates to and how it compares.
    pub delegation_servers: Vec<DelegationDetail>,
    /// The provider's name servers for the zone (its apex NS), when the provider could
    /// be asked and lists them.
    pub provider_ns: Option<Vec<String>>,
    pub provider: Option<ProviderState>,
    pub parent: Option<ParentView>,
    pub child: Option<ChildView>,
    pub validation_probes: Vec<ValidationProbe>,
    /// Discovery failures and the like.
    pub errors: Vec<String>,
    /// What an operator should do next, in plain words.
    pub advice: Vec<String>,
    /// How the DS reaches the parent (registrar, the registry's CDS scan, or NOTIFY to a
    /// DSYNC target) and why; `None` when the parent zone is not known.
    pub parent_path: Option<ParentPath>,
    /// The parent's DSYNC answers at each address, where they could be asked.
    pub dsync: Option<DsyncView>,
    /// Parent addresses that delegate to different name server sets: per set, the
    /// parent addresses naming it, the keys its servers serve, and whether a resolver
    /// following that referral validates. `null` when every parent address agrees.
    pub delegation_split: Option<DelegationSplit>,
}

/// Observes `zone` once, and asks the provider if the config has one (`provider` is its
/// client, or why there is none).
pub async fn check<O: Observer, P: Provider>(
    observer: &O,
    provider: Option<Result<&Providers<P>, String>>,
    zone: &str,
) -> CheckReport {
    check_with(observer, provider, zone, &ParentWays::default()).await
}

/// As [`check`], with the operator's `[parents."NAME"]` blocks for the parent's path.
pub async fn check_with<O: Observer, P: Provider>(
    observer: &O,
    provider: Option<Result<&Providers<P>, String>>,
    zone: &str,
    parents: &ParentWays,
) -> CheckReport {
    let look = crate::dns::observe::check::look(observer, zone).await;
    let parent_path = parent_path(observer, &look, parents).await;
    let mut errors = look.errors;
    let (provider, provider_ns) = match provider {
        None => (None, None),
        Some(Err(e)) => {
            errors.push(format!(
                "provider: {e}; the delegation cannot be judged without its name servers"
            ));
            (Some(ProviderState::failed(e)), None)
        }
        Some(Ok(client)) => {
            let (state, ns) =
                provider_state(client, zone, look.parent.as_ref(), look.child.as_ref()).await;
            match ns {
                Ok(ns) => (Some(state), Some(ns)),
                Err(e) => {
                    errors.push(e);
                    (Some(state), None)
                }
            }
        }
    };
    let assessment = delegation::assess(
        look.parent
            .as_ref()
            .map_or(&[][..], |p| p.delegations.as_slice()),
        provider_ns.as_deref(),
    );
    let mut report = CheckReport {
        zone: look.zone,
        parent_ds: look.parent_ds,
        parent_ds_reasons: look.parent_ds_reasons,
        validation: look.validation,
        consistent: look.consistent,
        evidence: look.evidence,
        evidence_detail: look.evidence_detail,
        delegation: assessment.verdict,
        delegation_servers: assessment.servers,
        provider_ns,
        provider,
        parent: look.parent,
        child: look.child,
        validation_probes: look.validation_probes,
        errors,
        advice: Vec::new(),
        parent_path,
        dsync: look.dsync.ok(),
        delegation_split: look.split,
    };
    report.advice = advise(&report);
    report
}

/// The parent's path for the zone of `look`: the configuration, the DSYNC records, what
/// is known of the registry (`engine::registry::resolve_path`).
async fn parent_path<O: Observer>(
    observer: &O,
    look: &crate::dns::observe::check::Look,
    parents: &ParentWays,
) -> Option<ParentPath> {
    let parent = match (&look.dsync, &look.parent) {
        (Ok(d), _) => d.parent.clone(),
        (Err(_), Some(p)) => p.parent.clone(),
        (Err(_), None) => return None,
    };
    Some(
        crate::engine::registry::resolve_path(observer, &parent, look.dsync.as_ref(), parents)
            .await,
    )
}

impl ProviderState {
    fn failed(error: String) -> Self {
        Self {
            name: None,
            dnssec_enabled: None,
            dnskey: None,
            key_tag: None,
            ds: None,
            served_everywhere: None,
            parent_points_at_it: None,
            error: Some(error),
        }
    }
}

/// The provider's side of the zone, and its name servers (the apex NS of the zone
/// object) or why they are not known.
async fn provider_state<P: Provider>(
    client: &Providers<P>,
    zone: &str,
    parent: Option<&ParentView>,
    child: Option<&ChildView>,
) -> (ProviderState, Result<Vec<String>, String>) {
    let mut state = ProviderState::failed(String::new());
    state.error = None;
    let ns = match client.zone(zone).await {
        Ok(z) => {
            state.dnssec_enabled = z.dnssec_enabled;
            state.name = client.holder_known(zone).map(str::to_string);
            z.name_servers.ok_or_else(|| {
                format!("the provider's zone object lists no apex NS for {zone}: the delegation cannot be judged")
            })
        }
        Err(e) => {
            state.error = Some(format!("zone: {e}"));
            let ns = Err(format!(
                "provider zone {zone}: {e}; the delegation cannot be judged without its name servers"
            ));
            return (state, ns);
        }
    };
    // Unknown (the provider left the field out) is settled by asking for the key.
    if state.dnssec_enabled == Some(false) {
        return (state, ns);
    }
    match client.dnssec_key(zone).await {
        Ok(key) => {
            state.dnskey = Some(format!(
                "{} {} {} {}",
                key.dnskey.flags,
                key.dnskey.protocol,
                key.dnskey.algorithm,
                base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    &key.dnskey.public_key
                )
            ));
            state.key_tag = Some(key.key_tag());
            state.ds = Some(key.ds_line().to_string());
            state.served_everywhere = child.map(|c| c.all_serve(&key.dnskey));
            state.parent_points_at_it = parent.map(|p| p.all_point_at(&key.dnskey));
        }
        Err(ProviderError::DnssecDisabled) => state.dnssec_enabled = Some(false),
        Err(e) => state.error = Some(format!("DNSSEC key: {e}")),
    }
    (state, ns)
}

fn advise(r: &CheckReport) -> Vec<String> {
    let mut advice = Vec::new();
    if r.parent.is_none() || r.child.is_none() {
        advice.push(
            "The delegation could not be followed; check the zone name and that the parent's servers answer."
                .into(),
        );
    }
    advise_parent_ds(r, &mut advice);
    let unproven = unproven_ds(r);
    advice.extend(advise_glue(r));
    if unproven.iter().any(|d| is_costly(d)) {
        advice.push(format!(
            "The parent zone's NSEC3 denials use more than {} iterations: RFC 9276 lets validators treat them as insecure, and they prove no \"no DS\" to dnssec-warden, so a disable or a move in (which need \"no DS\" proven at every parent server) waits. Ask the registry to lower its NSEC3 iterations (RFC 9276 recommends 0).",
            crate::dns::proof::MAX_NSEC3_ITERATIONS
        ));
    }
    if r.validation == ValidationVerdict::Bogus && r.parent_ds != ParentDsVerdict::Mismatch {
        advice.push(
            "Validation fails (bogus): resolvers that validate cannot reach the zone. Look at the validator details."
                .into(),
        );
    }
    advise_provider(r, &mut advice);
    if delete_requested(r) {
        advice.push(
            "The zone publishes the RFC 8078 delete request (CDS 0 0 0 00): it asks the parent to remove its DS."
                .into(),
        );
    }
    if unproven.iter().any(|d| !is_costly(d)) {
        advice.push(
            "A parent server's DS answer failed validation (bogus_proof, see the per-server detail): a broken signer at the parent, a stale signature, or a forged answer. It counts as unknown, never as \"DS present\" or \"no DS\"; check again, and alert the registry if it persists."
                .into(),
        );
    }
    advice.extend(advise_delegation(r));
    advice.extend(
        r.delegation_split
            .as_ref()
            .map(|s| advise_split(&r.zone, s)),
    );
    advice
}

/// What the `parent_ds` verdict asks of the operator.
fn advise_parent_ds(r: &CheckReport, advice: &mut Vec<String>) {
    let unsigned = r.child.as_ref().is_some_and(|c| c.all_unsigned());
    let child_unread = r
        .child
        .as_ref()
        .is_none_or(|c| c.any_unknown() && c.served_keys().keys.is_empty());
    let said: &str = match r.parent_ds {
        // Judged against one name server set of several: the split's advice says
        // whether each referral validates.
        ParentDsVerdict::AllMatch | ParentDsVerdict::Mismatch if r.delegation_split.is_some() => {
            return;
        }
        ParentDsVerdict::AllMatch if r.validation == ValidationVerdict::Secure => {
            "The chain of trust is complete and validates. Nothing to do."
        }
        ParentDsVerdict::AllMatch => {
            advice.push(format!(
                "Every parent server publishes a matching DS, but validation is {}: look at the validator details before changing anything.",
                r.validation
            ));
            return;
        }
        ParentDsVerdict::AllAbsent if unsigned => {
            "The zone is unsigned and the parent has no DS: cleanly insecure. To enable DNSSEC, run `dnssec-warden enable`."
        }
        ParentDsVerdict::AllAbsent if child_unread => {
            "The parent has no DS, and the zone's name servers could not be read (see the per-server detail): whether the zone is signed is unknown. Retry; never treat this as \"unsigned\"."
        }
        ParentDsVerdict::AllAbsent => {
            "The zone is signed but the parent has no DS yet: give the registrar the DS record (see the provider section), then check again."
        }
        ParentDsVerdict::Partial => {
            "Only some parent servers publish the DS: the registry is still propagating it (or removing it). Wait and check again; do not switch DNSSEC off meanwhile."
        }
        ParentDsVerdict::Mismatch if unsigned => {
            "OUTAGE: the parent publishes a DS but the zone is not signed. Validating resolvers fail it. Remove the DS at the registrar now, or switch DNSSEC back on at the provider."
        }
        ParentDsVerdict::Mismatch => {
            "OUTAGE RISK: a DS at the parent matches no key the zone serves. Correct the DS at the registrar to the provider's current DS."
        }
        ParentDsVerdict::Unknown => {
            advice.extend(advise_unknown(&r.parent_ds_reasons));
            return;
        }
    };
    advice.push(said.into());
}

/// What lies behind an `unknown` verdict, in words.
fn advise_unknown(reasons: &[VerdictReason]) -> Vec<String> {
    let mut advice = Vec::new();
    if reasons.contains(&VerdictReason::NoSupportedDs) {
        advice.push(
            "No supported DS: a parent server publishes a DS set whose every record uses an algorithm or digest type validators do not implement, so validators treat the zone as insecure (RFC 4035 section 5.2, RFC 6840 section 5.2). Not an outage, but no chain of trust: replace the DS at the registrar with one of algorithm 13 and digest type 2 (see the provider section)."
                .into(),
        );
    }
    if reasons.contains(&VerdictReason::ChildUnknown) {
        advice.push(
            "No name server of the zone could be read (silent, refused, lame or without address): the parent's DS cannot be judged against the served keys. This is not evidence of a wrong DS; fix or wait for the zone's name servers, then check again."
                .into(),
        );
    }
    if reasons.contains(&VerdictReason::ParentUnknown) || reasons.is_empty() {
        advice.push(
            "Some parent server gave no usable answer (see the per-server detail). Nothing can be concluded; retry, and never treat this as \"no DS\"."
                .into(),
        );
    }
    advice
}

/// The parent's unproven DS answers: those whose NSEC3 is too costly to verify (RFC
/// 9276), and the others (broken or forged).
fn unproven_ds(r: &CheckReport) -> Vec<&str> {
    r.parent
        .iter()
        .flat_map(|p| &p.answers)
        .filter_map(|a| match &a.answer {
            DsAnswer::Unknown(crate::dns::UnknownReason::BogusProof(d)) => Some(d.as_str()),
            _ => None,
        })
        .collect()
}

/// The words of `ProofError::Nsec3Iterations` (the reason is kept as its text).
fn is_costly(detail: &str) -> bool {
    detail.contains("iterations, above the limit of")
}

/// Glue that differs between parent servers.
fn advise_glue(r: &CheckReport) -> Option<String> {
    let glue: Vec<String> = r
        .parent
        .iter()
        .flat_map(|p| &p.delegations)
        .filter_map(|d| match &d.answer {
            delegation::NsAnswer::Unknown(crate::dns::UnknownReason::GlueDiffers(g)) => {
                Some(format!("{} ({}): {g}", d.server, d.addr))
            }
            _ => None,
        })
        .collect();
    (!glue.is_empty()).then(|| format!(
        "Parent servers hand out different addresses (glue) for the zone's name servers: {}. Every address was asked above; no DS is announced while they differ. Ask the registrar or registry to correct the glue.",
        glue.join("; ")
    ))
}

/// What the provider's side asks of the operator.
fn advise_provider(r: &CheckReport, advice: &mut Vec<String>) {
    let Some(p) = &r.provider else {
        return;
    };
    let any_ds = r.parent.as_ref().is_some_and(|p| p.any_present());
    if p.dnssec_enabled == Some(false) && any_ds {
        advice.push(
            "DNSSEC is off at the provider while the parent publishes a DS: remove the DS at the registrar, or switch DNSSEC on again."
                .into(),
        );
    }
    if p.dnssec_enabled == Some(true) && p.served_everywhere == Some(false) {
        advice.push(
            "DNSSEC is on at the provider but not every name server serves its key yet: wait before giving the DS to the registrar."
                .into(),
        );
    }
    if let Some(e) = &p.error {
        advice.push(format!(
            "The provider could not be asked ({e}); the DNS view above stands on its own."
        ));
    }
}

/// Some child address publishes the RFC 8078 delete request.
fn delete_requested(r: &CheckReport) -> bool {
    r.child.as_ref().is_some_and(|c| {
        c.answers.iter().any(|a| {
            matches!(&a.answer, DnskeyAnswer::Keys(k)
                if matches!(&k.signals, Signals::Answered(p) if p.delete_requested()))
        })
    })
}

/// What the delegation verdict asks of the operator.
fn advise_delegation(r: &CheckReport) -> Option<String> {
    let provider_ns = r.provider_ns.as_deref().unwrap_or_default();
    match r.delegation {
        DelegationVerdict::Provider => None,
        DelegationVerdict::Foreign => Some(format!(
            "The parent delegates {zone} to {to}, not the provider's name servers {ours}. To move the zone in run `dnssec-warden enable {zone}` and follow `dnssec-warden status {zone}`: it says each step (any old DS removed first, then the NS changed at the registrar).",
            zone = r.zone,
            to = delegated_sets(r)
                .into_iter()
                .map(delegation::describe)
                .collect::<Vec<_>>()
                .join(" / "),
            ours = delegation::describe(provider_ns),
        )),
        DelegationVerdict::Mixed => {
            let by_server: Vec<String> = r
                .delegation_servers
                .iter()
                .map(|s| {
                    format!(
                        "{} {}: {}",
                        s.server,
                        s.addr,
                        s.delegates_to
                            .as_deref()
                            .map_or_else(|| "unknown".into(), delegation::describe)
                    )
                })
                .collect();
            Some(format!(
                "Parent servers disagree about the delegation: {}; the provider's name servers are {}. Resolvers are sent to different servers: wait for the registry to finish the change, or correct the NS at the registrar.",
                by_server.join("; "),
                delegation::describe(provider_ns)
            ))
        }
        DelegationVerdict::Unknown if r.provider_ns.is_some() && !r.delegation_servers.is_empty() => Some(
            "Some parent server gave no usable answer about the delegation (see the per-server detail): whether it is the provider's is unknown."
                .into(),
        ),
        DelegationVerdict::Unknown => None,
    }
}

/// The distinct NS sets the parent addresses delegate to, in their order.
fn delegated_sets(r: &CheckReport) -> Vec<&[String]> {
    let mut sets: Vec<&[String]> = Vec::new();
    for s in &r.delegation_servers {
        if let Some(hosts) = &s.delegates_to
            && !sets.contains(&hosts.as_slice())
        {
            sets.push(hosts);
        }
    }
    sets
}

/// Parent servers that delegate to different NS sets: what it means for resolvers, and
/// what is safe meanwhile.
fn advise_split(zone: &str, s: &DelegationSplit) -> String {
    let at = |p: &ReferralPath| {
        p.parents
            .iter()
            .map(|a| format!("{} ({})", a.server, a.addr))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let failing: Vec<&ReferralPath> = s
        .paths
        .iter()
        .filter(|p| matches!(p.outcome, PathOutcome::Fails | PathOutcome::NotDelegated))
        .collect();
    let good: Vec<&ReferralPath> = s
        .paths
        .iter()
        .filter(|p| p.outcome == PathOutcome::Validates)
        .collect();
    if failing.is_empty() {
        let unknown = s.any(PathOutcome::Unknown);
        return format!(
            "The parent's servers send resolvers for {zone} to different name server sets (an NS change that has reached some of them only). {} Wait for the registry to finish the change, and change no key, DS or name server until every parent server delegates to one set; then check again.",
            if unknown {
                "Not every referral could be judged (see the split above): whether each validates is unknown."
            } else {
                "Every referral validates (or is cleanly insecure) today."
            }
        );
    }
    let broken: Vec<String> = failing
        .iter()
        .map(|p| match p.outcome {
            PathOutcome::NotDelegated => format!(
                "resolvers asking {} are told {zone} does not exist",
                at(p)
            ),
            _ => format!(
                "resolvers following the referral of {} to {} get {}, which no DS there names: they FAIL validation (SERVFAIL)",
                at(p),
                delegation::describe(&p.ns),
                key_tags(&p.key_tags)
            ),
        })
        .collect();
    let safe = match good.first() {
        Some(g) => format!(
            "Safe action: make every referral validate before anything else changes: publish at the registrar the DS of {} beside the DS of {} (keep both), or have {} serve the zone signed with {}; keep both name server sets serving the zone, and ask the registrar or registry why the NS change has not reached {}. Remove the extra DS only once every parent server delegates to {} (check again then).",
            key_tags(&failing.iter().flat_map(|p| p.key_tags.iter().copied()).collect::<Vec<_>>()),
            key_tags(&g.key_tags),
            failing
                .iter()
                .map(|p| delegation::describe(&p.ns))
                .collect::<Vec<_>>()
                .join(" / "),
            key_tags(&g.key_tags),
            failing.iter().map(|p| at(p)).collect::<Vec<_>>().join(", "),
            delegation::describe(&g.ns),
        ),
        None => "Safe action: have the registrar put the DS and NS of one name server set at every parent server (keep both DS while both sets are named), and switch nothing off meanwhile.".to_string(),
    };
    format!(
        "OUTAGE for part of the resolvers: the parent's servers disagree about the delegation of {zone} (an NS change that has reached some of them only), and {}. {safe}",
        broken.join("; ")
    )
}

/// `key tag 123` or `key tags 123, 456`, or `no key`.
fn key_tags(tags: &[u16]) -> String {
    match tags {
        [] => "no key".to_string(),
        [one] => format!("key tag {one}"),
        many => format!(
            "key tags {}",
            many.iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The report in words, for a terminal: one section after the other.
pub fn render_text(r: &CheckReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "zone {}", r.zone);
    if let Some(p) = &r.provider {
        render_provider(&mut out, p);
    }
    if let Some(parent) = &r.parent {
        render_parent(&mut out, r, parent);
    }
    if let Some(child) = &r.child {
        render_child(&mut out, child);
    }
    for p in &r.validation_probes {
        let _ = writeln!(
            out,
            "validation by {}: {} ({})",
            p.source, p.verdict, p.detail
        );
    }
    for e in &r.errors {
        let _ = writeln!(out, "error: {e}");
    }
    render_verdicts(&mut out, r);
    render_delegation(&mut out, r);
    if let Some(split) = &r.delegation_split {
        render_split(&mut out, split);
    }
    if let Some(path) = &r.parent_path {
        let _ = writeln!(out, "{}", path.describe());
    }
    for a in &r.advice {
        let _ = writeln!(out, "-> {a}");
    }
    out
}

fn render_provider(out: &mut String, p: &ProviderState) {
    let _ = match &p.name {
        Some(name) => writeln!(out, "provider {name}:"),
        None => writeln!(out, "provider:"),
    };
    let _ = match p.dnssec_enabled {
        Some(on) => writeln!(out, "  DNSSEC {}", if on { "on" } else { "off" }),
        None => writeln!(out, "  DNSSEC state unknown"),
    };
    if let (Some(tag), Some(ds)) = (p.key_tag, &p.ds) {
        let _ = writeln!(out, "  key tag {tag}, DS for the registrar: {ds}");
    }
    if let Some(e) = &p.error {
        let _ = writeln!(out, "  error: {e}");
    }
}

fn render_parent(out: &mut String, r: &CheckReport, parent: &ParentView) {
    let _ = writeln!(
        out,
        "parent {} (DS of {} at each address):",
        parent.parent, parent.zone
    );
    for a in &parent.answers {
        let what = match &a.answer {
            DsAnswer::Present { ds, ttl } => format!(
                "DS ttl {ttl}: {}",
                ds.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(" | ")
            ),
            DsAnswer::Absent => "no DS (authoritative)".into(),
            DsAnswer::Unknown(reason) => format!("unknown: {reason}"),
        };
        let _ = writeln!(out, "  {} {}: {what}", a.server, a.addr);
    }
    let _ = match (r.evidence, &r.evidence_detail) {
        ("validated", _) => writeln!(
            out,
            "  DS evidence validated: every answer above that is not unknown is proven by a signature of {} from the trust anchor",
            parent.parent
        ),
        ("insecure", Some(why)) => writeln!(
            out,
            "  DS evidence NOT validated: the parent zone is provably insecure ({why}); the answers are authoritative only"
        ),
        (_, Some(why)) => writeln!(out, "  DS evidence NOT validated: {why}"),
        _ => writeln!(out, "  DS evidence NOT validated"),
    };
}

fn render_child(out: &mut String, child: &ChildView) {
    let _ = writeln!(out, "child {} (DNSKEY at each address):", child.zone);
    for a in &child.answers {
        let _ = writeln!(
            out,
            "  {} {}: {}",
            a.server,
            a.addr,
            dnskey_words(&a.answer)
        );
        let apex = child
            .apex_ns
            .iter()
            .find(|n| n.server == a.server && n.addr == a.addr)
            .map(|n| match &n.answer {
                NsAnswer::Servers { hosts, ttl } => {
                    format!("{} ttl {ttl}", delegation::describe(hosts))
                }
                NsAnswer::NotDelegated => "none".into(),
                NsAnswer::Unknown(reason) => format!("unknown: {reason}"),
            });
        if let Some(apex) = apex {
            let _ = writeln!(out, "    apex NS: {apex}");
        }
    }
}

/// One child address's DNSKEY answer (with its CDS/CDNSKEY signals), in words.
fn dnskey_words(answer: &DnskeyAnswer) -> String {
    match answer {
        DnskeyAnswer::Keys(k) => {
            let keys: Vec<String> = k
                .keys
                .iter()
                .map(|key| format!("{} alg {} tag {}", key.flags, key.algorithm, key.key_tag()))
                .collect();
            format!(
                "{} ttl {}, {}{}",
                keys.join(", "),
                k.ttl,
                if k.signed { "signed" } else { "NOT signed" },
                match &k.signals {
                    Signals::Answered(p) if p.delete_requested() => {
                        ", CDS delete request".to_string()
                    }
                    Signals::Answered(p) if !p.is_empty() => {
                        format!(", publishes {}", signals::describe(p))
                    }
                    Signals::Unknown(reason) => format!(", CDS/CDNSKEY unknown: {reason}"),
                    _ => String::new(),
                }
            )
        }
        DnskeyAnswer::Absent => "no DNSKEY (unsigned)".into(),
        DnskeyAnswer::Unknown(reason) => format!("unknown: {reason}"),
    }
}

fn render_verdicts(out: &mut String, r: &CheckReport) {
    let _ = writeln!(out, "parent_ds: {}", r.parent_ds);
    if !r.parent_ds_reasons.is_empty() {
        let reasons: Vec<String> = r.parent_ds_reasons.iter().map(|x| x.to_string()).collect();
        let _ = writeln!(out, "parent_ds reasons: {}", reasons.join(", "));
    }
    let _ = writeln!(out, "validation: {}", r.validation);
}

fn render_delegation(out: &mut String, r: &CheckReport) {
    let _ = writeln!(
        out,
        "delegation: {} (provider's name servers: {})",
        r.delegation,
        r.provider_ns
            .as_deref()
            .map_or_else(|| "unknown".to_string(), delegation::describe)
    );
    for d in &r.delegation_servers {
        let what = match (&d.delegates_to, &d.unknown) {
            (Some(hosts), _) => format!(
                "{}{} ({})",
                delegation::describe(hosts),
                d.ttl.map(|t| format!(" ttl {t}")).unwrap_or_default(),
                match d.matches {
                    DelegationMatch::Provider => "provider",
                    DelegationMatch::Foreign => "foreign",
                    DelegationMatch::Mixed => "mixed",
                    DelegationMatch::Unknown => "not judged",
                }
            ),
            (None, Some(reason)) => format!("unknown: {reason}"),
            (None, None) => "unknown".into(),
        };
        let _ = writeln!(out, "  {} {}: {what}", d.server, d.addr);
    }
}

/// Each referral of a split delegation: which parent servers send resolvers to which
/// NS set, the keys that set serves, and whether a resolver following it validates.
fn render_split(out: &mut String, s: &DelegationSplit) {
    let _ = writeln!(
        out,
        "delegation split: the parent's servers send resolvers to {} name server sets (parent_ds and validation above judge one of them only):",
        s.paths.len() + s.not_followed
    );
    for p in &s.paths {
        let parents: Vec<String> = p
            .parents
            .iter()
            .map(|a| format!("{} {}", a.server, a.addr))
            .collect();
        let served = match (&p.child, &p.error) {
            _ if p.ns.is_empty() => "no delegation".to_string(),
            (Some(c), _) if c.all_unsigned() => "serves no DNSKEY (unsigned)".to_string(),
            (Some(c), _) if c.served_keys().known => format!("serves {}", key_tags(&p.key_tags)),
            (Some(_), _) => "could not be read".to_string(),
            (None, Some(e)) => format!("could not be asked ({e})"),
            (None, None) => "not asked".to_string(),
        };
        let outcome = match p.outcome {
            PathOutcome::Validates => {
                "the DS there names its key: resolvers following this referral validate"
            }
            PathOutcome::Insecure => {
                "no DS there (at some of these parent servers): resolvers following this referral do not validate it (insecure)"
            }
            PathOutcome::Fails => {
                "the DS there names none of its keys: resolvers following this referral FAIL validation"
            }
            PathOutcome::NotDelegated => "resolvers asking there are told the zone does not exist",
            PathOutcome::Unknown => "not judged (see above)",
        };
        let _ = writeln!(
            out,
            "  {} -> {}: {served}; {outcome}",
            parents.join(", "),
            delegation::describe(&p.ns)
        );
    }
    if s.not_followed > 0 {
        let _ = writeln!(
            out,
            "  ({} more name server sets not asked: at most {} are followed in one check)",
            s.not_followed,
            crate::dns::observe::split::MAX_SETS
        );
    }
}

/// What `dnssec-warden check` runs: builds the observer and the provider client from the
/// settings, checks, and renders.
pub async fn run(
    settings: &crate::config::Settings,
    zone: &str,
) -> Result<CheckReport, crate::dns::ObserverSetupError> {
    let observer = crate::dns::DnsObserver::new(&settings.dns)?;
    let client = (!settings.providers.is_empty())
        .then(|| Providers::build(&settings.providers).map_err(|e| e.to_string()));
    let mut report = check_with(
        &observer,
        client.as_ref().map(|c| c.as_ref().map_err(Clone::clone)),
        zone,
        &settings.timing.parents,
    )
    .await;
    for (ip, factor) in observer.slowed_servers() {
        report.advice.push(format!(
            "the server at {ip} dropped or slipped queries while it answered others (response rate limiting?): it was asked at 1/{factor} of dns.max_qps_per_server; if a running daemon logs the same for it, lower dns.max_qps_per_server"
        ));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns::ServerAnswer;

    fn report(delegations: Vec<(&str, NsAnswer)>, provider_ns: Option<Vec<String>>) -> CheckReport {
        let delegations: Vec<ServerAnswer<NsAnswer>> = delegations
            .into_iter()
            .enumerate()
            .map(|(i, (server, answer))| ServerAnswer {
                server: server.into(),
                addr: std::net::IpAddr::from([127, 0, 0, 10 + i as u8]),
                answer,
            })
            .collect();
        let a = delegation::assess(&delegations, provider_ns.as_deref());
        let mut r = CheckReport {
            zone: "shop.test.".into(),
            parent_ds: ParentDsVerdict::AllAbsent,
            parent_ds_reasons: Vec::new(),
            validation: ValidationVerdict::Insecure,
            consistent: true,
            evidence: "unchecked",
            evidence_detail: None,
            delegation: a.verdict,
            delegation_servers: a.servers,
            provider_ns,
            provider: None,
            parent: Some(ParentView {
                zone: "shop.test.".into(),
                parent: "test.".into(),
                answers: Vec::new(),
                delegations,
                evidence: Default::default(),
            }),
            child: None,
            validation_probes: Vec::new(),
            errors: Vec::new(),
            advice: Vec::new(),
            parent_path: None,
            dsync: None,
            delegation_split: None,
        };
        r.advice = advise(&r);
        r
    }

    fn to(hosts: &[&str]) -> NsAnswer {
        NsAnswer::Servers {
            hosts: delegation::ns_set(hosts).into(),
            ttl: 86400,
        }
    }

    #[test]
    fn foreign_and_mixed_delegations_are_said_with_what_to_do() {
        let ours = Some(delegation::ns_set(["ns1.prov.net", "ns2.prov.net"]));
        let old = ["ns1.old.net", "ns2.old.net"];
        let r = report(
            vec![("a.nic.test.", to(&old)), ("b.nic.test.", to(&old))],
            ours.clone(),
        );
        assert_eq!(r.delegation, DelegationVerdict::Foreign);
        let advice = r.advice.join("\n");
        assert!(
            advice.contains("delegates shop.test. to ns1.old.net., ns2.old.net.")
                && advice.contains("not the provider's name servers ns1.prov.net., ns2.prov.net.")
                && advice.contains("`dnssec-warden enable shop.test.`"),
            "{advice}"
        );
        let text = render_text(&r);
        assert!(text.contains("delegation: foreign"), "{text}");
        assert!(
            text.contains("a.nic.test. 127.0.0.10: ns1.old.net., ns2.old.net. ttl 86400 (foreign)"),
            "{text}"
        );

        let r = report(
            vec![
                ("a.nic.test.", to(&["ns1.prov.net", "ns2.prov.net"])),
                ("b.nic.test.", to(&old)),
            ],
            ours.clone(),
        );
        assert_eq!(r.delegation, DelegationVerdict::Mixed);
        let advice = r.advice.join("\n");
        assert!(
            advice.contains("Parent servers disagree about the delegation")
                && advice.contains("b.nic.test. 127.0.0.11: ns1.old.net., ns2.old.net."),
            "{advice}"
        );

        // The provider's own: nothing to say. Unknown: said, never as foreign.
        let r = report(
            vec![("a.nic.test.", to(&["ns1.prov.net", "ns2.prov.net"]))],
            ours.clone(),
        );
        assert_eq!(r.delegation, DelegationVerdict::Provider);
        assert!(
            !r.advice
                .iter()
                .any(|a| a.contains("delegates") || a.contains("disagree")),
            "{:?}",
            r.advice
        );
        let r = report(
            vec![(
                "a.nic.test.",
                NsAnswer::Unknown(crate::dns::UnknownReason::Timeout),
            )],
            ours,
        );
        assert_eq!(r.delegation, DelegationVerdict::Unknown);
        assert!(render_text(&r).contains("a.nic.test. 127.0.0.10: unknown: timeout"));
        let json = serde_json::to_value(&r).unwrap_or_default();
        assert_eq!(json["delegation"], "unknown");
        assert_eq!(json["delegation_servers"][0]["unknown"], "timeout");
    }

    /// A split is said whatever its referrals give: an outage with the safe action when
    /// one fails, a wait when each validates; never "Nothing to do".
    #[test]
    fn a_split_delegation_is_said_with_what_it_means() {
        use crate::dns::observe::split::ParentAddress;
        let path = |ns: &str, server: &str, outcome, tags: Vec<u16>| ReferralPath {
            ns: delegation::ns_set([ns]),
            parents: vec![ParentAddress {
                server: server.into(),
                addr: std::net::IpAddr::from([127, 0, 0, 10]),
            }],
            key_tags: tags,
            parent_ds: ParentDsVerdict::AllMatch,
            outcome,
            child: None,
            error: None,
        };
        let mut r = report(Vec::new(), None);
        r.parent_ds = ParentDsVerdict::AllMatch;
        r.validation = ValidationVerdict::Secure;
        r.delegation_split = Some(DelegationSplit {
            paths: vec![
                path(
                    "ns1.new.net",
                    "a.nic.test.",
                    PathOutcome::Validates,
                    vec![1],
                ),
                path(
                    "ns1.old.net",
                    "b.nic.test.",
                    PathOutcome::Validates,
                    vec![2],
                ),
            ],
            not_followed: 0,
        });
        let advice = advise(&r).join("\n");
        assert!(
            advice.contains("Every referral validates") && !advice.contains("OUTAGE"),
            "{advice}"
        );
        assert!(!advice.contains("Nothing to do"), "{advice}");
        if let Some(split) = r.delegation_split.as_mut() {
            split.paths[1].outcome = PathOutcome::Fails;
        }
        let advice = advise(&r).join("\n");
        assert!(
            advice.contains("OUTAGE for part of the resolvers")
                && advice.contains("b.nic.test. (127.0.0.10) to ns1.old.net. get key tag 2")
                && advice.contains("the DS of key tag 2 beside the DS of key tag 1 (keep both)"),
            "{advice}"
        );
    }
}
