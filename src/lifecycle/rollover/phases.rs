//! The phases' own work: the table (`advance`), one function per phase, the keys the
//! roll adds found in the provider's listing (`adopt_keys`) and the flags every phase
//! wants of them (`level_flags`).

use super::{
    ChildRollSeen, DsRequest, KeyKind, ListedKey, Method, ParentRollSeen, Phase, Roll, RollEffect,
    RollKey, RollPolicy, RollSeen, RollWait, ds_of, every, failing, has_ds, remove_old_ds,
    wanted_flags,
};
use crate::dnssec::{CdsPublication, Dnskey};
use crate::lifecycle::hold::Party;
use crate::time::Timestamp;

/// The phase's own work; returns what the roll waits for, and on whom.
pub(super) fn advance(
    zone: &str,
    roll: &mut Roll,
    seen: &RollSeen,
    at: Timestamp,
    policy: &RollPolicy,
    effects: &mut Vec<RollEffect>,
    alerts: &mut Vec<String>,
) -> RollWait {
    match roll.phase {
        Phase::Publishing => publishing(zone, roll, seen, at, policy, effects),
        Phase::AwaitingNewDs => awaiting_new_ds(zone, roll, seen, at, policy, effects),
        Phase::Swapping => swapping(zone, roll, seen, at, policy, effects),
        Phase::RemovingOldDs => removing_old_ds(zone, roll, seen, at, policy, alerts),
        Phase::RemovingOldKey | Phase::RemovingOldSignatures => removing_old(roll, seen, at),
        Phase::SigningUnpublished => signing_unpublished(roll, seen, at, policy),
        Phase::PublishingNewAlgorithm => {
            publishing_new_algorithm(zone, roll, seen, at, policy, effects)
        }
        Phase::UnpublishingOldAlgorithm => unpublishing_old_algorithm(roll, seen, at, policy),
        Phase::Done => RollWait::on(
            crate::lifecycle::hold::Party::Nobody,
            if roll.aborted {
                "nothing: the roll was undone"
            } else {
                "nothing: the roll is done"
            },
        ),
    }
}

fn known(keys: &[RollKey]) -> Vec<Dnskey> {
    keys.iter().filter_map(|k| k.dnskey.clone()).collect()
}

fn tags(keys: &[Dnskey]) -> String {
    keys.iter()
        .map(|k| k.key_tag().to_string())
        .collect::<Vec<_>>()
        .join(" and ")
}

fn signs(by: &[u16], key: &Dnskey) -> bool {
    by.contains(&key.key_tag())
}

/// The DNSKEY set is served validly: some key of `anchors` is in it and signs it (rule
/// 4's "serves": the observer counts only signatures that verified at the look).
fn anchored(c: &ChildRollSeen, anchors: &[Dnskey]) -> bool {
    anchors
        .iter()
        .any(|k| c.dnskey.contains(k) && signs(&c.dnskey_signed_by, k))
}

fn holds_all(c: &ChildRollSeen, keys: &[Dnskey]) -> bool {
    keys.iter().all(|k| c.dnskey.contains(k))
}

fn holds_none(c: &ChildRollSeen, keys: &[Dnskey]) -> bool {
    keys.iter().all(|k| !c.dnskey.contains(k))
}

fn sep(keys: &[RollKey]) -> Vec<Dnskey> {
    keys.iter()
        .filter(|k| k.kind.sep())
        .filter_map(|k| k.dnskey.clone())
        .collect()
}

fn data_keys(keys: &[RollKey]) -> Vec<Dnskey> {
    keys.iter()
        .filter(|k| k.kind.signs_data())
        .filter_map(|k| k.dnskey.clone())
        .collect()
}

/// The SEP keys that sign the DNSKEY set where the roll does not change them (a ZSK
/// roll's KSK or CSK).
fn steady_anchors(roll: &Roll) -> Vec<Dnskey> {
    sep(&roll.others)
}

/// Who anchors the DNSKEY set before the SEP keys swap, and after.
fn anchors_before(roll: &Roll) -> Vec<Dnskey> {
    match roll.method {
        Method::ZskPrePublish => steady_anchors(roll),
        _ => sep(&roll.old),
    }
}

fn anchors_after(roll: &Roll) -> Vec<Dnskey> {
    match roll.method {
        Method::ZskPrePublish => steady_anchors(roll),
        _ => sep(&roll.new),
    }
}

/// The roll's keys as the provider lists them; `None` where the listing is unknown.
fn listed<'a>(seen: &'a RollSeen, key: &RollKey) -> Option<Option<&'a ListedKey>> {
    let keys = seen.keys.as_ref().ok()?;
    Some(
        key.id
            .as_ref()
            .and_then(|id| keys.iter().find(|k| &k.id == id)),
    )
}

/// Every key of `keys` is listed with these flags (`None`: the listing is unknown).
fn listed_as(seen: &RollSeen, keys: &[RollKey], active: bool, published: bool) -> Option<bool> {
    let mut all = true;
    for k in keys {
        match listed(seen, k)? {
            Some(l) => all &= l.active == active && l.published == published,
            None => all = false,
        }
    }
    Some(all)
}

fn child_wait(seen: &RollSeen, what: &str, ok: impl Fn(&ChildRollSeen) -> bool) -> RollWait {
    RollWait::provider(format!(
        "every name server to serve {what}: {}",
        failing(&seen.children, ok)
    ))
}

/// The zone's largest TTL at this look, where a hold counts with it: a hold never ends on
/// a TTL that is not known (rule 4: none is assumed).
fn zone_ttl_known(roll: &Roll, seen: &RollSeen) -> Result<u32, RollWait> {
    match &seen.zone_max_ttl {
        Ok(_) => Ok(roll.ttls.zone),
        Err(e) => Err(RollWait::provider(format!(
            "the zone's largest TTL (unknown: {e})"
        ))),
    }
}

/// The listing is known: no phase moves on a look that could not read the keys.
fn listing_known(seen: &RollSeen) -> Result<(), RollWait> {
    match &seen.keys {
        Ok(_) => Ok(()),
        Err(e) => Err(RollWait::provider(format!(
            "the provider's key listing (unknown: {e})"
        ))),
    }
}

/// `publishing` (ZSK and double-DS): the new key in every child address's DNSKEY set
/// beside the old, the set validly signed, held for the DNSKEY TTL (RFC 7583
/// Ipub = Dprp + TTLkey); then the ZSK's signatures swap, or the new DS is asked for.
fn publishing(
    zone: &str,
    roll: &mut Roll,
    seen: &RollSeen,
    at: Timestamp,
    policy: &RollPolicy,
    effects: &mut Vec<RollEffect>,
) -> RollWait {
    let (old, new) = (known(&roll.old), known(&roll.new));
    let anchors = anchors_before(roll);
    let ok = |c: &ChildRollSeen| holds_all(c, &new) && holds_all(c, &old) && anchored(c, &anchors);
    let what = format!("keys {} in a validly signed DNSKEY set", tags(&new));
    let ttl = roll.ttls.dnskey;
    if let Err(wait) = roll.confirmed_and_held(
        at,
        every(&seen.children, ok),
        ttl,
        policy,
        || child_wait(seen, &what, ok),
        || format!("DNSKEY sets without key {}", tags(&new)),
    ) {
        return wait;
    }
    if let Err(wait) = listing_known(seen) {
        return wait;
    }
    let next = roll.method.after(roll.phase);
    roll.enter(next, at);
    match next {
        Phase::AwaitingNewDs => ask_new_ds(zone, roll, effects),
        _ => RollWait::provider(format!("the provider to sign with key {}", tags(&new))),
    }
}

/// The registrar's request on entering `awaiting_new_ds`: the new DS beside the old.
fn ask_new_ds(zone: &str, roll: &Roll, effects: &mut Vec<RollEffect>) -> RollWait {
    let (Some(add), Some(keep)) = (
        sep(&roll.new).first().and_then(|k| ds_of(zone, k)),
        sep(&roll.old).first().and_then(|k| ds_of(zone, k)),
    ) else {
        return RollWait::provider("a DS that can be computed");
    };
    if roll.via.by_cds() {
        // The CDS names both keys from this phase on (`level_cds`): the registry acts.
        return RollWait::on(
            Party::Registry,
            format!(
                "the parent's registry to publish DS {} beside DS {}, from the child's CDS",
                add.key_tag, keep.key_tag
            ),
        );
    }
    let what = format!(
        "the registrar to add DS {} beside DS {}",
        add.key_tag, keep.key_tag
    );
    effects.push(RollEffect::Registrar(DsRequest::AddDs { add, keep }));
    RollWait::registrar(what)
}

/// On entering `removing_old_ds`: the registrar asked to remove the old DS, or, where
/// the DS goes by the CDS, the registry left to act on a CDS that names the new key
/// alone (`level_cds`).
pub(super) fn ask_old_ds_removed(
    zone: &str,
    roll: &Roll,
    effects: &mut Vec<RollEffect>,
) -> RollWait {
    if roll.via.by_cds() {
        return RollWait::on(
            Party::Registry,
            format!(
                "the parent's registry to remove DS {}, from the child's CDS naming key {} alone",
                tags(&sep(&roll.old)),
                tags(&sep(&roll.new))
            ),
        );
    }
    match remove_old_ds(zone, roll) {
        Some(request) => {
            effects.push(RollEffect::Registrar(request));
            RollWait::registrar("the registrar to remove the old DS")
        }
        None => RollWait::provider("a DS that can be computed"),
    }
}

/// `awaiting_new_ds`: both DS at every parent address, validated; for a double-DS roll
/// held for the DS TTL (RFC 7583 IpubP = DprpP + TTLds: every cached DS set then holds
/// the new one before the new key signs alone). An algorithm roll needs no hold here:
/// nothing leaves the DNSKEY set or the signatures until the old DS is gone and waited
/// out.
fn awaiting_new_ds(
    zone: &str,
    roll: &mut Roll,
    seen: &RollSeen,
    at: Timestamp,
    policy: &RollPolicy,
    effects: &mut Vec<RollEffect>,
) -> RollWait {
    let (old_sep, new_sep) = (sep(&roll.old), sep(&roll.new));
    let both = |p: &ParentRollSeen| {
        p.validated
            && old_sep.iter().all(|k| has_ds(zone, &p.ds, k))
            && new_sep.iter().all(|k| has_ds(zone, &p.ds, k))
    };
    let by_cds = roll.via.by_cds();
    let who = if by_cds {
        "the parent's registry (from the child's CDS)"
    } else {
        "the registrar"
    };
    let unconfirmed = || {
        RollWait::parent(
            by_cds,
            format!(
                "{who}: every parent server to publish DS {} and DS {}, validated: {}",
                tags(&old_sep),
                tags(&new_sep),
                failing(&seen.parents, both)
            ),
        )
    };
    let confirmed = every(&seen.parents, both);
    if roll.method == Method::Algorithm {
        if confirmed != Some(true) {
            return unconfirmed();
        }
    } else {
        let ttl = roll.ds_ttl(policy);
        if let Err(wait) = roll.confirmed_and_held(at, confirmed, ttl, policy, unconfirmed, || {
            format!("DS sets without DS {}", tags(&new_sep))
        }) {
            return wait;
        }
    }
    if let Err(wait) = listing_known(seen) {
        return wait;
    }
    // What the next phase stands on, at this look: the new keys still in every child
    // address's DNSKEY set beside the old (a server that lost them restarts the
    // publication's hold).
    let (old, new) = (known(&roll.old), known(&roll.new));
    let anchors = anchors_before(roll);
    let ok = |c: &ChildRollSeen| holds_all(c, &new) && holds_all(c, &old) && anchored(c, &anchors);
    match every(&seen.children, ok) {
        Some(true) => {}
        Some(false) if roll.method == Method::DoubleDs => {
            let wait = child_wait(seen, "the new key again", ok);
            roll.enter(Phase::Publishing, at);
            return wait;
        }
        _ => {
            return child_wait(
                seen,
                &format!("keys {} and {}, validly signed", tags(&old), tags(&new)),
                ok,
            );
        }
    }
    let next = roll.method.after(roll.phase);
    roll.enter(next, at);
    if next == Phase::RemovingOldDs {
        return ask_old_ds_removed(zone, roll, effects);
    }
    RollWait::provider(format!("the provider to sign with key {}", tags(&new)))
}

/// `swapping`: the new key signs what the old signed (the DNSKEY set for a KSK or CSK,
/// the data for a ZSK or CSK) and the old does not, both still published, at every child
/// address; held for the TTL of what the old signed (RFC 7583 Iret = Dprp + TTLkey for
/// the DNSKEY set, + TTLsig for the data: a CSK both). Then the old ZSK goes, or the
/// old DS is asked removed, where every parent address still publishes the new one.
fn swapping(
    zone: &str,
    roll: &mut Roll,
    seen: &RollSeen,
    at: Timestamp,
    policy: &RollPolicy,
    effects: &mut Vec<RollEffect>,
) -> RollWait {
    let (old, new) = (known(&roll.old), known(&roll.new));
    let kind = roll.new.first().map_or(KeyKind::Zsk, |k| k.kind);
    let anchors = anchors_after(roll);
    let ok = |c: &ChildRollSeen| {
        holds_all(c, &new)
            && holds_all(c, &old)
            && anchored(c, &anchors)
            && (!kind.sep()
                || (new.iter().all(|k| signs(&c.dnskey_signed_by, k))
                    && !old.iter().any(|k| signs(&c.dnskey_signed_by, k))))
            && (!kind.signs_data()
                || (new.iter().all(|k| signs(&c.data_signed_by, k))
                    && !old.iter().any(|k| signs(&c.data_signed_by, k))))
    };
    let swapped = listed_as(seen, &roll.new, true, true)
        .zip(listed_as(seen, &roll.old, false, true))
        .map(|(a, b)| a && b);
    let served = every(&seen.children, ok);
    let holds = match (swapped, served) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    };
    let mut ttl = 0;
    if kind.sep() {
        ttl = ttl.max(roll.ttls.dnskey);
    }
    if kind.signs_data() {
        match zone_ttl_known(roll, seen) {
            Ok(zone_ttl) => ttl = ttl.max(zone_ttl),
            Err(wait) => return wait,
        }
    }
    let signed = if kind.sep() && kind.signs_data() {
        "the DNSKEY set and the data"
    } else if kind.sep() {
        "the DNSKEY set"
    } else {
        "the data"
    };
    if let Err(wait) = roll.confirmed_and_held(
        at,
        holds,
        ttl,
        policy,
        || {
            let children = child_wait(
                seen,
                &format!(
                    "{signed} signed by key {} and not {}",
                    tags(&new),
                    tags(&old)
                ),
                ok,
            );
            if swapped == Some(true) {
                children
            } else {
                RollWait::provider(format!(
                    "the provider to sign with key {} instead of {}; {}",
                    tags(&new),
                    tags(&old),
                    children.what
                ))
            }
        },
        || format!("{signed} signed by key {}", tags(&old)),
    ) {
        return wait;
    }
    let next = roll.method.after(roll.phase);
    if next == Phase::RemovingOldDs {
        let new_sep = sep(&roll.new);
        let kept =
            |p: &ParentRollSeen| p.validated && new_sep.iter().all(|k| has_ds(zone, &p.ds, k));
        if every(&seen.parents, kept) != Some(true) {
            return RollWait::parent(
                roll.via.by_cds(),
                format!(
                    "every parent server to publish DS {}, validated, before the old DS is asked removed: {}",
                    tags(&new_sep),
                    failing(&seen.parents, kept)
                ),
            );
        }
    }
    roll.enter(next, at);
    if next == Phase::RemovingOldDs {
        return ask_old_ds_removed(zone, roll, effects);
    }
    RollWait::provider(format!("the provider to delete key {}", tags(&old)))
}

/// `removing_old_ds`: every parent address publishes the new DS without the old,
/// validated, held for the DS TTL (every cached DS set then lacks the old DS before its
/// key leaves the DNSKEY set: a validator that holds a DS set to every algorithm in it,
/// RFC 6840 5.11, is never left with one whose key is gone).
fn removing_old_ds(
    zone: &str,
    roll: &mut Roll,
    seen: &RollSeen,
    at: Timestamp,
    policy: &RollPolicy,
    alerts: &mut Vec<String>,
) -> RollWait {
    let (old_sep, new_sep) = (sep(&roll.old), sep(&roll.new));
    let kept = |p: &ParentRollSeen| new_sep.iter().all(|k| has_ds(zone, &p.ds, k));
    if every(&seen.parents, kept) == Some(false) {
        alerts.push(format!(
            "{zone}: a parent server no longer publishes DS {} of the key the zone now signs with: validating resolvers fail the zone; enter it again at the registrar: {}",
            tags(&new_sep),
            failing(&seen.parents, kept)
        ));
    }
    let gone = |p: &ParentRollSeen| {
        p.validated
            && new_sep.iter().all(|k| has_ds(zone, &p.ds, k))
            && !old_sep.iter().any(|k| has_ds(zone, &p.ds, k))
    };
    let ttl = roll.ds_ttl(policy);
    let by_cds = roll.via.by_cds();
    let who = if by_cds {
        "the parent's registry (from the child's CDS)"
    } else {
        "the registrar"
    };
    if let Err(wait) = roll.confirmed_and_held(
        at,
        every(&seen.parents, gone),
        ttl,
        policy,
        || {
            RollWait::parent(
                by_cds,
                format!(
                    "{who}: every parent server to drop DS {} and keep DS {}, validated: {}",
                    tags(&old_sep),
                    tags(&new_sep),
                    failing(&seen.parents, gone)
                ),
            )
        },
        || format!("DS sets with DS {}", tags(&old_sep)),
    ) {
        return wait;
    }
    if let Err(wait) = listing_known(seen) {
        return wait;
    }
    let next = roll.method.after(roll.phase);
    roll.enter(next, at);
    RollWait::provider(format!(
        "the provider to stop publishing key {}",
        tags(&known(&roll.old))
    ))
}

/// `removing_old_key`, `removing_old_signatures`: the old keys deleted (level-triggered),
/// until the provider no longer lists them and no child address serves them or their
/// signatures; nothing cached needs them any more (the previous phase's hold).
fn removing_old(roll: &mut Roll, seen: &RollSeen, at: Timestamp) -> RollWait {
    let old = known(&roll.old);
    let anchors = anchors_after(roll);
    let ok = |c: &ChildRollSeen| {
        holds_none(c, &old)
            && !old
                .iter()
                .any(|k| signs(&c.data_signed_by, k) || signs(&c.dnskey_signed_by, k))
            && anchored(c, &anchors)
    };
    let deleted = match &seen.keys {
        Ok(keys) => roll.old.iter().all(|k| {
            k.id.as_ref()
                .is_none_or(|id| !keys.iter().any(|l| &l.id == id))
        }),
        Err(e) => {
            return RollWait::provider(format!("the provider's key listing (unknown: {e})"));
        }
    };
    if !deleted {
        return RollWait::provider(format!("the provider to delete key {}", tags(&old)));
    }
    match every(&seen.children, ok) {
        Some(true) => {
            roll.enter(Phase::Done, at);
            RollWait::on(
                crate::lifecycle::hold::Party::Nobody,
                "nothing: the roll is done",
            )
        }
        _ => child_wait(
            seen,
            &format!("a validly signed DNSKEY set without key {}", tags(&old)),
            ok,
        ),
    }
}

/// `signing_unpublished` (algorithm): the new keys sign the DNSKEY set and the data,
/// unpublished, at every child address; held for the zone's largest TTL (RFC 6781 4.1.4:
/// every cached RRset then carries the new algorithm's signatures before its DNSKEY
/// appears, which RFC 4035 2.2 lets a validator demand).
fn signing_unpublished(
    roll: &mut Roll,
    seen: &RollSeen,
    at: Timestamp,
    policy: &RollPolicy,
) -> RollWait {
    let (old, new) = (known(&roll.old), known(&roll.new));
    let (old_data, new_data) = (data_keys(&roll.old), data_keys(&roll.new));
    let anchors = sep(&roll.old);
    let ok = |c: &ChildRollSeen| {
        holds_all(c, &old)
            && holds_none(c, &new)
            && anchored(c, &anchors)
            && new_data.iter().all(|k| signs(&c.data_signed_by, k))
            && old_data.iter().all(|k| signs(&c.data_signed_by, k))
    };
    let algorithm = roll.algorithm;
    let signing = listed_as(seen, &roll.new, true, false);
    let holds = match (signing, every(&seen.children, ok)) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    };
    let ttl = match zone_ttl_known(roll, seen) {
        Ok(ttl) => ttl,
        Err(wait) => return wait,
    };
    if let Err(wait) = roll.confirmed_and_held(
        at,
        holds,
        ttl,
        policy,
        || {
            child_wait(
                seen,
                &format!("the data signed by key {} as well", tags(&new_data)),
                ok,
            )
        },
        || format!("RRsets without signatures of algorithm {algorithm}"),
    ) {
        return wait;
    }
    let next = roll.method.after(roll.phase);
    roll.enter(next, at);
    RollWait::provider(format!("the provider to publish key {}", tags(&new)))
}

/// `publishing_new_algorithm`: both algorithms' keys in every child address's DNSKEY
/// set, signed by both, the data signed by both; held for the DNSKEY TTL (every cached
/// DNSKEY set then holds the new keys before a DS points at them); then the new DS.
fn publishing_new_algorithm(
    zone: &str,
    roll: &mut Roll,
    seen: &RollSeen,
    at: Timestamp,
    policy: &RollPolicy,
    effects: &mut Vec<RollEffect>,
) -> RollWait {
    let (old, new) = (known(&roll.old), known(&roll.new));
    let (old_sep, new_sep) = (sep(&roll.old), sep(&roll.new));
    let all_data: Vec<Dnskey> = data_keys(&roll.old)
        .into_iter()
        .chain(data_keys(&roll.new))
        .collect();
    let ok = |c: &ChildRollSeen| {
        holds_all(c, &old)
            && holds_all(c, &new)
            && anchored(c, &old_sep)
            && anchored(c, &new_sep)
            && all_data.iter().all(|k| signs(&c.data_signed_by, k))
    };
    let ttl = roll.ttls.dnskey;
    if let Err(wait) = roll.confirmed_and_held(
        at,
        every(&seen.children, ok),
        ttl,
        policy,
        || {
            child_wait(
                seen,
                &format!("keys {} and {}, signed by both", tags(&old), tags(&new)),
                ok,
            )
        },
        || format!("DNSKEY sets without key {}", tags(&new)),
    ) {
        return wait;
    }
    if let Err(wait) = listing_known(seen) {
        return wait;
    }
    let next = roll.method.after(roll.phase);
    roll.enter(next, at);
    ask_new_ds(zone, roll, effects)
}

/// `unpublishing_old_algorithm`: the old keys gone from every child address's DNSKEY
/// set, still signing, the set anchored by the new keys; held for the DNSKEY TTL (no
/// cached DNSKEY set then holds an old key whose algorithm RFC 4035 2.2 would demand
/// signatures of); then the old keys are deleted.
fn unpublishing_old_algorithm(
    roll: &mut Roll,
    seen: &RollSeen,
    at: Timestamp,
    policy: &RollPolicy,
) -> RollWait {
    let (old, new) = (known(&roll.old), known(&roll.new));
    let new_sep = sep(&roll.new);
    let new_data = data_keys(&roll.new);
    let old_data = data_keys(&roll.old);
    let ok = |c: &ChildRollSeen| {
        holds_none(c, &old)
            && holds_all(c, &new)
            && anchored(c, &new_sep)
            && new_data.iter().all(|k| signs(&c.data_signed_by, k))
            && old_data.iter().all(|k| signs(&c.data_signed_by, k))
    };
    let unpublished = listed_as(seen, &roll.old, true, false);
    let holds = match (unpublished, every(&seen.children, ok)) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    };
    let ttl = roll.ttls.dnskey;
    if let Err(wait) = roll.confirmed_and_held(
        at,
        holds,
        ttl,
        policy,
        || {
            child_wait(
                seen,
                &format!("a DNSKEY set without key {}", tags(&old)),
                ok,
            )
        },
        || format!("DNSKEY sets with key {}", tags(&old)),
    ) {
        return wait;
    }
    let next = roll.method.after(roll.phase);
    roll.enter(next, at);
    RollWait::provider(format!("the provider to delete key {}", tags(&old)))
}

/// The keys the roll adds, found in the provider's listing; asked for where missing and
/// no addition is unsettled. `Some`: what holds the roll before its phase's work.
pub(super) fn adopt_keys(
    zone: &str,
    roll: &mut Roll,
    seen: &RollSeen,
    effects: &mut Vec<RollEffect>,
    alerts: &mut Vec<String>,
) -> Option<RollWait> {
    if roll.phase == Phase::Done {
        return None;
    }
    let keys = match &seen.keys {
        Ok(keys) => keys,
        // A phase's DNS conditions are still confirmed; nothing moves without the
        // listing (each phase checks it where it moves on).
        Err(_) => return None,
    };
    let ours = |l: &ListedKey, r: &Roll| {
        r.old
            .iter()
            .chain(&r.new)
            .chain(&r.others)
            .any(|k| k.id.as_deref() == Some(l.id.as_str()))
    };
    // The side whose keys the roll added: the new ones, or the old ones going back.
    let adding = if roll.aborted { &roll.old } else { &roll.new };
    let missing: Vec<usize> = adding
        .iter()
        .enumerate()
        .filter(|(_, k)| k.id.is_none())
        .map(|(i, _)| i)
        .collect();
    if !missing.is_empty() {
        let mut taken: Vec<String> = Vec::new();
        let mut found: Vec<(usize, ListedKey)> = Vec::new();
        for &i in &missing {
            let kind = adding[i].kind;
            if let Some(l) = keys.iter().find(|l| {
                !ours(l, roll)
                    && !taken.contains(&l.id)
                    && l.dnskey.algorithm == roll.algorithm
                    && l.dnskey.is_sep() == kind.sep()
            }) {
                taken.push(l.id.clone());
                found.push((i, l.clone()));
            }
        }
        let mut held = None;
        for (i, l) in found {
            // A tag the zone's other keys have: signatures by tag could not tell them
            // apart. Deleted (it never signed) and asked for again.
            let collides = roll
                .old
                .iter()
                .chain(&roll.new)
                .chain(&roll.others)
                .any(|k| {
                    k.dnskey
                        .as_ref()
                        .is_some_and(|d| d.key_tag() == l.dnskey.key_tag())
                });
            if collides && !roll.aborted {
                effects.push(RollEffect::DeleteKey { id: l.id.clone() });
                held = Some(RollWait::provider(format!(
                    "a new key: key {} has the tag of another of the zone's keys and is deleted",
                    l.dnskey.key_tag()
                )));
                continue;
            }
            let side = if roll.aborted {
                &mut roll.old
            } else {
                &mut roll.new
            };
            side[i].id = Some(l.id.clone());
            side[i].dnskey = Some(l.dnskey.clone());
        }
        if let Some(wait) = held {
            return Some(wait);
        }
        let adding = if roll.aborted { &roll.old } else { &roll.new };
        let still: Vec<KeyKind> = adding
            .iter()
            .filter(|k| k.id.is_none())
            .map(|k| k.kind)
            .collect();
        if !still.is_empty() {
            if seen.add_key_unsettled {
                return Some(RollWait::provider(
                    "the provider's answer to the key's addition (its outcome unknown: settled by the next listing)",
                ));
            }
            if roll.aborted {
                // Going back, a key that never came is nothing to remove.
                roll.old.retain(|k| k.id.is_some());
            } else if roll.phase == roll.method.phases()[0] {
                if roll.via.sets_cds() && seen.cds != Some(CdsPublication::Nothing) {
                    // A key added while the CDS is published would be named by it at
                    // the addresses that serve it first, before every address does
                    // (`level_cds` withdraws it).
                    return Some(RollWait::provider(
                        "the provider to withdraw the CDS before the new key is added",
                    ));
                }
                let (_, flags) = wanted_flags(roll);
                let (active, published) = flags.unwrap_or((false, true));
                for kind in &still {
                    effects.push(RollEffect::AddKey {
                        kind: *kind,
                        algorithm: roll.algorithm,
                        active,
                        published,
                    });
                }
                return Some(RollWait::provider(format!(
                    "the provider to add the new {} of algorithm {}",
                    still
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(" and "),
                    roll.algorithm
                )));
            }
        }
    }
    // A key of the roll gone from the listing before the roll removes it.
    let removing = matches!(
        roll.phase,
        Phase::RemovingOldKey | Phase::RemovingOldSignatures
    );
    let vanished: Vec<&RollKey> = roll
        .new
        .iter()
        .chain(if removing { [].iter() } else { roll.old.iter() })
        .chain(&roll.others)
        .filter(|k| {
            k.id.as_ref()
                .is_some_and(|id| !keys.iter().any(|l| &l.id == id))
        })
        .collect();
    if !vanished.is_empty() {
        alerts.push(format!(
            "{zone}: key {} is no longer listed at the provider (deleted outside dnssec-warden) during the {} roll; the roll holds",
            tags(&vanished.iter().filter_map(|k| k.dnskey.clone()).collect::<Vec<_>>()),
            roll.method.name()
        ));
        return Some(RollWait::provider("the roll's keys to be listed again"));
    }
    // A key that is neither the roll's nor the zone's others, active or published: a
    // roll behind the daemon's back, which the roll's holds do not cover.
    let foreign: Vec<Dnskey> = keys
        .iter()
        .filter(|l| !ours(l, roll) && (l.active || l.published))
        .map(|l| l.dnskey.clone())
        .collect();
    if !foreign.is_empty() {
        alerts.push(format!(
            "{zone}: key {} was added outside dnssec-warden during the {} roll; the roll holds until it is removed",
            tags(&foreign),
            roll.method.name()
        ));
        return Some(RollWait::provider("the key added outside the roll to go"));
    }
    None
}

/// The flags the phase wants of the roll's keys, set where the listing says otherwise;
/// the old keys deleted in the phases that remove them. An old key stops signing only
/// once every new key is listed signing: the zone is never left without an active key.
pub(super) fn level_flags(roll: &Roll, seen: &RollSeen, effects: &mut Vec<RollEffect>) {
    let Ok(keys) = &seen.keys else {
        return;
    };
    let (want_old, want_new) = wanted_flags(roll);
    let lookup = |k: &RollKey| {
        k.id.as_ref()
            .and_then(|id| keys.iter().find(|l| &l.id == id))
    };
    let mut new_all_active = true;
    for k in &roll.new {
        let Some(l) = lookup(k) else {
            new_all_active = false;
            continue;
        };
        if let Some((active, published)) = want_new
            && (l.active != active || l.published != published)
        {
            effects.push(RollEffect::SetKey {
                id: l.id.clone(),
                active,
                published,
            });
        }
        new_all_active &= l.active;
    }
    // Where the parent reads the CDS, a SEP key leaves the DNSKEY set only once no child
    // address's CDS names it: the provider drops it from both at once, and an address
    // that applies it first would serve no key for what a lagging one's CDS still names.
    let named_somewhere = |l: &ListedKey| {
        roll.via.by_cds()
            && l.published
            && l.dnskey.is_sep()
            && every(&seen.children, |c| {
                c.cds
                    .as_ref()
                    .is_some_and(|t| !t.contains(&l.dnskey.key_tag()))
            }) != Some(true)
    };
    for k in &roll.old {
        let Some(l) = lookup(k) else { continue };
        let leaving = match want_old {
            None => true,
            Some((_, published)) => !published,
        };
        if leaving && named_somewhere(l) {
            continue;
        }
        match want_old {
            None => effects.push(RollEffect::DeleteKey { id: l.id.clone() }),
            Some((active, published)) if l.active != active || l.published != published => {
                if l.active && !active && !new_all_active {
                    continue;
                }
                effects.push(RollEffect::SetKey {
                    id: l.id.clone(),
                    active,
                    published,
                });
            }
            Some(_) => {}
        }
    }
}

/// The provider's entry-point keys its CDS names once this step's key calls are made:
/// the published SEP keys of the listing, with the step's effects applied.
fn cds_would_name(keys: &[ListedKey], effects: &[RollEffect]) -> Vec<Dnskey> {
    keys.iter()
        .filter(|l| l.dnskey.is_sep())
        .filter(|l| {
            effects.iter().fold(l.published, |published, e| match e {
                RollEffect::SetKey {
                    id, published: p, ..
                } if *id == l.id => *p,
                RollEffect::DeleteKey { id } if *id == l.id => false,
                _ => published,
            })
        })
        .map(|l| l.dnskey.clone())
        .collect()
}

/// Rule 14 in a roll whose DS goes by the CDS (RFC 7344 appendix B): the provider's CDS
/// is set to name exactly what the parent should hold in the phase (`ds_wanted`), and
/// only where a registry may act on it safely: every key it names is served by every
/// child address, and a key that signs the DNSKEY set (and so the CDS) at every child
/// address has its DS at every parent address (a registry takes a change only signed by
/// a key the current DS names, RFC 7344 4.1). Else it is withdrawn: a registry changes
/// nothing on no CDS. Withdrawn in `publishing`: the new key is not yet served
/// everywhere. NOTIFY(CDS) once per signal, where the parent names a target, once every
/// child address publishes it.
pub(super) fn level_cds(
    zone: &str,
    roll: &mut Roll,
    seen: &RollSeen,
    effects: &mut Vec<RollEffect>,
) {
    if roll.via == super::DsVia::RegistrarCdsWithdrawn {
        if roll.phase != Phase::Done && seen.cds.is_some_and(|c| c != CdsPublication::Nothing) {
            effects.push(RollEffect::SetCds(CdsPublication::Nothing));
        }
        return;
    }
    if !roll.via.by_cds() || roll.method != Method::DoubleDs || roll.phase == Phase::Done {
        return;
    }
    let Ok(keys) = &seen.keys else {
        return;
    };
    let wanted = super::ds_wanted(roll);
    let want = if roll.phase == Phase::Publishing {
        CdsPublication::Nothing
    } else {
        let names = cds_would_name(keys, effects);
        let same = names.len() == wanted.len() && names.iter().all(|k| wanted.contains(k));
        let served = every(&seen.children, |c| holds_all(c, &names));
        let candidates: Vec<Dnskey> = sep(&roll.old)
            .into_iter()
            .chain(sep(&roll.new))
            .chain(sep(&roll.others))
            .collect();
        let trust: Vec<Option<bool>> = candidates
            .iter()
            .map(|k| {
                let signs_all = every(&seen.children, |c| signs(&c.dnskey_signed_by, k));
                let named = every(&seen.parents, |p| has_ds(zone, &p.ds, k));
                match (signs_all, named) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                }
            })
            .collect();
        let trusted = if trust.contains(&Some(true)) {
            Some(true)
        } else if trust.contains(&None) {
            None
        } else {
            Some(false)
        };
        match (same, served, trusted) {
            (true, Some(true), Some(true)) => CdsPublication::Key,
            (false, _, _) | (_, Some(false), _) | (_, _, Some(false)) => CdsPublication::Nothing,
            // A look that cannot tell changes nothing: the setting stands as the last
            // look that could tell left it.
            _ => return,
        }
    };
    if seen.cds != Some(want) {
        effects.push(RollEffect::SetCds(want));
    }
    if roll.via != super::DsVia::CdsNotify
        || want != CdsPublication::Key
        || !matches!(roll.phase, Phase::AwaitingNewDs | Phase::RemovingOldDs)
    {
        return;
    }
    let mut wanted_tags: Vec<u16> = wanted.iter().map(Dnskey::key_tag).collect();
    wanted_tags.sort_unstable();
    let signal = format!(
        "key {}",
        wanted_tags
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let published = |c: &ChildRollSeen| {
        c.cds.as_ref().is_some_and(|t| {
            let mut t = t.clone();
            t.sort_unstable();
            t.dedup();
            t == wanted_tags
        })
    };
    if roll.cds_notified.as_deref() != Some(signal.as_str())
        && every(&seen.children, published) == Some(true)
    {
        effects.push(RollEffect::NotifyCds {
            signal: signal.clone(),
        });
        roll.cds_notified = Some(signal);
    }
}
