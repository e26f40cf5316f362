//! What the rules remember about a zone across steps: one part per machine that keeps it.
//!
//! The store keeps `Facts` as one flat JSON object (`zones.facts`), each fact under its
//! own name whichever part holds it: adding a fact is one field in its part (with its line
//! in the part's table) and its line in each stored form below, and no migration. A field
//! missing from a stored object reads as its default; a field no longer known is ignored.

use serde::{Deserialize, Serialize, Serializer};

use super::hold::Hold;
use super::keys::KeyAges;
use super::own_roll::ProviderRoll;
use super::parent_way::{CdsNotified, ParentPath};
use super::rollover::Roll;
use super::signed_move::Move;
use crate::dns::DelegationVerdict;
use crate::time::Timestamp;

/// What the rules remember across steps, by the machine whose memory it is.
///
/// `step` owns every part but the signed move's: it sets the facts on the transitions
/// each part's table names, and entering `disabled` starts a new lifecycle: every part
/// cleared but the observation health (its `partial_since` restarting) and the
/// delegation, and at adoption what the looks before it saw of the DS. Outside the states
/// named, a fact is `None` or left over from earlier in the same lifecycle, and no rule
/// reads it there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(from = "StoredFacts")]
pub struct Facts {
    pub lifecycle: LifecycleFacts,
    pub health: HealthFacts,
    pub delegation: DelegationFacts,
    pub move_in: MoveInFacts,
    pub routine: RoutineLookFacts,
    pub wait: WaitFacts,
    pub parent_way: ParentWayFacts,
    /// A signed move in progress (DESIGN.md section 2, "Signed moves"): while it is set
    /// the zone is stepped by [`super::moving::decide`], not by `step`.
    ///
    /// | fact | holds in | set | cleared |
    /// |---|---|---|---|
    /// | `signed_move` | `active` | `dnssec-warden move` declares it (the one fact written outside `step`: `Store::declare_move`, at the row's version) | the move ends (only the target lists the zone) |
    pub signed_move: Option<Move>,
    /// A key rollover in progress (DESIGN.md section 2, "Key rollovers", rule 16): while
    /// it is set the zone is stepped by [`super::rollover::decide`] (through the engine's
    /// `rollover` look), not by `step`.
    ///
    /// | fact | holds in | set | cleared |
    /// |---|---|---|---|
    /// | `key_roll` | `active` | `dnssec-warden roll` declares it (written outside `step`, as the move is: `Store::declare_roll`, at the row's version) | the roll reaches `done` (the step that sees it done clears it) |
    pub key_roll: Option<Roll>,
    /// `[rollover]`'s memory of the zone (`roll_policy`): when each active key was first
    /// seen, the next roll, why a due roll waits.
    ///
    /// | fact | holds in | set | cleared |
    /// |---|---|---|---|
    /// | `key_ages` | `active` | a full look at a settled zone while a lifetime is configured (`roll_policy::schedule`); a roll's end (`roll_policy::rolled`) | entering `disabled` |
    pub key_ages: Option<KeyAges>,
    /// A roll the provider makes on its own (DESIGN.md section 2, rule 17), followed by
    /// `step` in `active`.
    ///
    /// | fact | holds in | set | cleared |
    /// |---|---|---|---|
    /// | `provider_roll` | `active` | a new SEP key beside the followed one (`step::own_roll`) | the roll ends (the zone follows the new key), the provider goes back, or the zone leaves `active` |
    pub provider_roll: Option<ProviderRoll>,
}

/// The zone lifecycle's memory of the key followed and its DS, from adoption or
/// `disabled` to the next `disabled`: `step`'s enable and disable paths.
///
/// | fact | holds in | set | cleared |
/// |---|---|---|---|
/// | `ds_line` | `enabling` (once the provider is on) .. `disabling` | following the provider's key (`enabling`, adoption, announcing) | entering `disabled` |
/// | `ds_to_enter`, `dnskey_to_enter` | `awaiting_ds`, `ds_observed`, `active` | recomputed at every step (safety rule 8) | in every other state, and while the instruction is withheld |
/// | `provider_off_since` | `enabling` .. `active` (the enable path) | the provider says off | the provider says on, or the zone leaves the enable path |
/// | `dnskey_everywhere_at`, `hold_until` | `enabling`; kept as history until `disabled` | every child address serves the key (the propagation hold, rule 4) | a server stops serving it, the key changes, the instruction is withdrawn |
/// | `ds_announced_at` | `awaiting_ds` .. `disabling` | announcing the DS | entering `disabled` |
/// | `ds_first_seen_at` | `ds_observed`, `active` .. `disabling` | every parent address publishes the DS | entering `disabled` |
/// | `t_gone` | `ttl_wait`, `disabling` | every parent address answers "no DS" | entering `awaiting_ds_removal` or `disabled` |
/// | `gone_confirmed_at` | `ttl_wait`, `disabling` | every parent address answers "no DS" on acceptable evidence (the last such look; a longer gap than `Policy::gone_confirmation_gap` restarts `t_gone`) | entering `awaiting_ds_removal` or `disabled` |
/// | `max_ds_ttl`, `max_dnskey_ttl` | every state | the largest TTL seen (rule 2) | entering `disabled`, but by adoption |
/// | `ds_seen_at` | every state | a look at which some parent address publishes a DS (after the step's transition) | entering `disabled`, but by adoption (a look before it counts) |
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LifecycleFacts {
    /// The DS (zone-file line) of the provider key being followed.
    pub ds_line: Option<String>,
    /// The DS that belongs at the registrar now, as shown to the operator. Set only once it
    /// was announced (`awaiting_ds`, `ds_observed`, `active`), and only while the last
    /// observation showed the provider on with that key and every child address serving
    /// it (safety rule 8); `None` means the instruction is withheld or withdrawn.
    pub ds_to_enter: Option<String>,
    /// The same key in the DNSKEY form (for registrars that ask for it): set exactly
    /// when `ds_to_enter` is, from the same look.
    pub dnskey_to_enter: Option<String>,
    /// Since when the provider says DNSSEC is off while the zone is on the enable path
    /// (switched off outside dnssec-warden, or an enable call not taken yet).
    pub provider_off_since: Option<Timestamp>,
    /// When every child address was first seen serving that key (continuously since).
    pub dnskey_everywhere_at: Option<Timestamp>,
    /// End of the propagation hold before the DS may be announced.
    pub hold_until: Option<Timestamp>,
    pub ds_announced_at: Option<Timestamp>,
    pub ds_first_seen_at: Option<Timestamp>,
    /// When every parent address first answered that the DS is gone.
    pub t_gone: Option<Timestamp>,
    /// The last look that confirmed the DS gone everywhere since `t_gone` (rule 2).
    pub gone_confirmed_at: Option<Timestamp>,
    /// The largest DS TTL any parent address gave since the zone was last disabled.
    pub max_ds_ttl: Option<u32>,
    /// The largest DNSKEY TTL any child address gave since the zone was last disabled.
    pub max_dnskey_ttl: Option<u32>,
    /// The last look at which some parent address published a DS (any DS, even beside
    /// unknown answers), since the zone was last disabled. A move in asks for the NS
    /// change only once a TTL wait begun after it has ended (safety rule 9).
    pub ds_seen_at: Option<Timestamp>,
}

/// How complete and unanimous the zone's looks are: what the alert judge reads for
/// `partial_stuck` and `observation_failing`, and the metrics count.
///
/// | fact | holds in | set | cleared |
/// |---|---|---|---|
/// | `partial_since` | every state | parent servers disagree (`alerts::judge`) | they agree again, or entering `disabled` |
/// | `failing_since`, `failures` | every state, across lifecycles | an incomplete observation | a complete one |
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthFacts {
    /// Since when parent servers disagree.
    pub partial_since: Option<Timestamp>,
    /// Since when observations are incomplete, and how many in a row.
    pub failing_since: Option<Timestamp>,
    pub failures: u32,
}

/// Who the parent delegates to, and since when: kept across lifecycles, the ground of the
/// delegation hold (safety rule 9) and of the guard's "moved out, not in".
///
/// | fact | holds in | set | cleared |
/// |---|---|---|---|
/// | `provider_ns` | every state, across lifecycles | the provider's API listed the zone's apex NS | never (replaced) |
/// | `verdict` (stored as `delegation`) | every state, across lifecycles | the last known delegation verdict | never (replaced) |
/// | `seen_at_provider` | every state, across lifecycles | every parent address delegated to the provider | never |
/// | `old_ns`, `old_ns_ttl` | every state, across lifecycles | a parent address delegates elsewhere (the NS sets and the largest NS TTL seen for them) | never (the largest kept) |
/// | `delegated_at` | every state, across lifecycles | every parent address delegates to the provider after some did not (T_delegated, rule 9) | a parent address delegates elsewhere again |
/// | `elsewhere_seen` | every state, across lifecycles | a parent address delegates elsewhere | every parent address delegates to the provider |
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DelegationFacts {
    /// The provider's name servers for the zone, as last listed by its API.
    pub provider_ns: Option<Vec<String>>,
    /// The last delegation verdict that was not unknown.
    pub verdict: Option<DelegationVerdict>,
    /// Every parent address was once seen delegating to the provider's name servers: a
    /// zone that then goes elsewhere has moved out, not in.
    pub seen_at_provider: bool,
    /// The name servers parent addresses delegate to other than the provider's.
    pub old_ns: Vec<String>,
    /// The largest NS TTL seen for that old delegation (parent and old servers' apex).
    pub old_ns_ttl: Option<u32>,
    /// T_delegated: every parent address delegates to the provider's name servers since.
    pub delegated_at: Option<Timestamp>,
    /// A parent address was seen delegating elsewhere since the delegation was last the
    /// provider's everywhere (even beside an unknown answer): the next complete
    /// delegation to the provider starts a delegation hold.
    pub elsewhere_seen: bool,
}

/// The move in (DESIGN.md section 2, "Moving in"): the old DS removed, its TTL waited
/// out, then the NS change asked for.
///
/// | fact | holds in | set | cleared |
/// |---|---|---|---|
/// | `moving_in` | `awaiting_ds_removal`, `ttl_wait`, `awaiting_delegation` | a move in starts, or the disable path finds one (never `seen_at_provider`) | it ends (`enabling`, `disabled`, or the disable path) |
/// | `ds_to_remove` | `awaiting_ds_removal` while moving in | the DS records the parent publishes, at every step | the parent publishes none (kept as last seen while it is unknown) |
/// | `delegation_requested` | `awaiting_delegation` | the NS change is asked for | leaving `awaiting_delegation` |
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MoveInFacts {
    /// The zone is on the move in: no provider call switches DNSSEC off, and the end of
    /// `ttl_wait` leads to `awaiting_delegation`.
    pub moving_in: bool,
    /// Moving in: the DS records the parent publishes that must go (zone-file lines), as
    /// last seen; what `status` names.
    pub ds_to_remove: Vec<String>,
    /// Moving in: the NS change was asked for in this `awaiting_delegation` (only once
    /// no DS is published, on validated evidence).
    pub delegation_requested: bool,
}

/// What a settled zone's routine look is held to, so that it may ask less (DESIGN.md
/// section 4): one parent and one child address instead of all of them (`sample`), and
/// the provider's listing instead of a call for the zone (`engine::observe`).
///
/// | fact | holds in | set | cleared |
/// |---|---|---|---|
/// | `served_keys_when_asked` | every state | the provider was asked and every child address answered | the provider asked and off, or a child address unknown |
/// | `settled_view` | `active`, `disabled` | a full look at which every address said the same (the standard samples are held to, `sample::settled_view`) | at every step (recomputed) |
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutineLookFacts {
    /// The key set every child address served when the provider last said which key it
    /// signs with ([`crate::lifecycle::model::served_fingerprint`]).
    pub served_keys_when_asked: Option<String>,
    /// What every address said at the last full look, when the zone is settled and they
    /// all said the same: a sampled look agrees only with this.
    pub settled_view: Option<SettledView>,
}

/// What holds the zone where its state alone does not say it: the wait `status` names
/// (DESIGN.md rule 11: a wait names what really holds it), and how long it has held.
///
/// | fact | holds in | set | cleared |
/// |---|---|---|---|
/// | `held_by` | every state | the step, when something the state alone does not say holds the zone (a failing call, a name server without the signed key, an unconfirmed chain, a TTL wait restarted by a gap in looks); in a signed move the account its wait is on (`Hold::account`) | at every step (recomputed) |
/// | `held_since` | every state | the first step with `held_by` set | a step without `held_by` |
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitFacts {
    /// What held the zone at its last step.
    pub held_by: Option<Hold>,
    /// Since when some `held_by` holds the zone without a break (`wait_stalled`).
    pub held_since: Option<Timestamp>,
}

/// The way a DS request reaches the parent, and the registry's part in the state's
/// request (`parent_way`, `registry`, `cds`).
///
/// | fact | holds in | set | cleared |
/// |---|---|---|---|
/// | `ds_path`, `ds_path_at` | `enabling` .. `awaiting_ds`, `active` .. `awaiting_ds_removal` (where a DS request may go) | resolved at a look in those states, at most every `registry::PATH_REFRESH` | entering `disabled` |
/// | `registry_since` | `awaiting_ds`, `awaiting_ds_removal` | the DS request goes to the registry by the child's signals (`registry::takes_request`) | leaving the state, or the registry late (the request then goes to the registrar) |
/// | `registry_missed_at` | `awaiting_ds`, `awaiting_ds_removal` | the registry did not act by its deadline | leaving the state |
/// | `cds_notified` | `awaiting_ds`, `awaiting_ds_removal` | the step after a NOTIFY(CDS) was performed, from what its outbox row says came of it | leaving the state |
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParentWayFacts {
    /// The way a DS reaches the parent, as last resolved, and when.
    pub ds_path: Option<ParentPath>,
    pub ds_path_at: Option<Timestamp>,
    /// Since when the state's DS request waits on the registry acting on the child's
    /// CDS (publish or delete), not on someone at the registrar.
    pub registry_since: Option<Timestamp>,
    /// When the registry was late, and the request went to the registrar.
    pub registry_missed_at: Option<Timestamp>,
    /// The last NOTIFY(CDS) sent for the state's request, and its answer (the outbox's
    /// word, `Observation::cds_notify`).
    pub cds_notified: Option<CdsNotified>,
}

/// What every address said at the last full look of a settled zone, when they all said
/// the same: the standard a sample is held to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettledView {
    /// The DS set every parent address publishes (`sample::ds_fingerprint`).
    pub parent_ds: String,
    /// The DNSKEY set every child address serves (`sample::keys_fingerprint`).
    pub child_keys: String,
}

// The stored form. One flat object, not one object a part: the rows of every build so far
// read as they are, and operators' `json_extract(facts, '$.name')` keeps its names. Read
// into `StoredFacts` and moved into the parts; written from `StoredFactsRef`, which
// borrows them (a step writes its facts once, and copies none). No `#[serde(flatten)]`:
// it reads through a buffer of every field, and every step and status row reads facts.

/// `Facts` as read: every fact by its stored name, missing ones at their defaults,
/// unknown ones ignored.
#[derive(Default, Deserialize)]
#[serde(default)]
struct StoredFacts {
    ds_line: Option<String>,
    ds_to_enter: Option<String>,
    dnskey_to_enter: Option<String>,
    provider_off_since: Option<Timestamp>,
    dnskey_everywhere_at: Option<Timestamp>,
    hold_until: Option<Timestamp>,
    ds_announced_at: Option<Timestamp>,
    ds_first_seen_at: Option<Timestamp>,
    t_gone: Option<Timestamp>,
    gone_confirmed_at: Option<Timestamp>,
    max_ds_ttl: Option<u32>,
    max_dnskey_ttl: Option<u32>,
    ds_seen_at: Option<Timestamp>,
    partial_since: Option<Timestamp>,
    failing_since: Option<Timestamp>,
    failures: u32,
    provider_ns: Option<Vec<String>>,
    delegation: Option<DelegationVerdict>,
    seen_at_provider: bool,
    old_ns: Vec<String>,
    old_ns_ttl: Option<u32>,
    delegated_at: Option<Timestamp>,
    elsewhere_seen: bool,
    moving_in: bool,
    ds_to_remove: Vec<String>,
    delegation_requested: bool,
    served_keys_when_asked: Option<String>,
    held_by: Option<Hold>,
    held_since: Option<Timestamp>,
    settled_view: Option<SettledView>,
    ds_path: Option<ParentPath>,
    ds_path_at: Option<Timestamp>,
    registry_since: Option<Timestamp>,
    registry_missed_at: Option<Timestamp>,
    cds_notified: Option<CdsNotified>,
    signed_move: Option<Move>,
    key_roll: Option<Roll>,
    key_ages: Option<KeyAges>,
    provider_roll: Option<ProviderRoll>,
}

impl From<StoredFacts> for Facts {
    fn from(s: StoredFacts) -> Self {
        Facts {
            lifecycle: LifecycleFacts {
                ds_line: s.ds_line,
                ds_to_enter: s.ds_to_enter,
                dnskey_to_enter: s.dnskey_to_enter,
                provider_off_since: s.provider_off_since,
                dnskey_everywhere_at: s.dnskey_everywhere_at,
                hold_until: s.hold_until,
                ds_announced_at: s.ds_announced_at,
                ds_first_seen_at: s.ds_first_seen_at,
                t_gone: s.t_gone,
                gone_confirmed_at: s.gone_confirmed_at,
                max_ds_ttl: s.max_ds_ttl,
                max_dnskey_ttl: s.max_dnskey_ttl,
                ds_seen_at: s.ds_seen_at,
            },
            health: HealthFacts {
                partial_since: s.partial_since,
                failing_since: s.failing_since,
                failures: s.failures,
            },
            delegation: DelegationFacts {
                provider_ns: s.provider_ns,
                verdict: s.delegation,
                seen_at_provider: s.seen_at_provider,
                old_ns: s.old_ns,
                old_ns_ttl: s.old_ns_ttl,
                delegated_at: s.delegated_at,
                elsewhere_seen: s.elsewhere_seen,
            },
            move_in: MoveInFacts {
                moving_in: s.moving_in,
                ds_to_remove: s.ds_to_remove,
                delegation_requested: s.delegation_requested,
            },
            routine: RoutineLookFacts {
                served_keys_when_asked: s.served_keys_when_asked,
                settled_view: s.settled_view,
            },
            wait: WaitFacts {
                held_by: s.held_by,
                held_since: s.held_since,
            },
            parent_way: ParentWayFacts {
                ds_path: s.ds_path,
                ds_path_at: s.ds_path_at,
                registry_since: s.registry_since,
                registry_missed_at: s.registry_missed_at,
                cds_notified: s.cds_notified,
            },
            signed_move: s.signed_move,
            key_roll: s.key_roll,
            key_ages: s.key_ages,
            provider_roll: s.provider_roll,
        }
    }
}

/// `Facts` as written, in the stored order. A field at its default is left out: most
/// facts are unset most of the time, and the row of a settled zone then fits two to a
/// 4 KiB page with its last observation.
#[derive(Serialize)]
struct StoredFactsRef<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    ds_line: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ds_to_enter: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dnskey_to_enter: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider_off_since: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dnskey_everywhere_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hold_until: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ds_announced_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ds_first_seen_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    t_gone: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gone_confirmed_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_ds_ttl: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_dnskey_ttl: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ds_seen_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partial_since: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failing_since: Option<Timestamp>,
    #[serde(skip_serializing_if = "is_zero")]
    failures: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider_ns: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delegation: Option<DelegationVerdict>,
    #[serde(skip_serializing_if = "is_false")]
    seen_at_provider: bool,
    #[serde(skip_serializing_if = "is_empty")]
    old_ns: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    old_ns_ttl: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delegated_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "is_false")]
    elsewhere_seen: bool,
    #[serde(skip_serializing_if = "is_false")]
    moving_in: bool,
    #[serde(skip_serializing_if = "is_empty")]
    ds_to_remove: &'a [String],
    #[serde(skip_serializing_if = "is_false")]
    delegation_requested: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    served_keys_when_asked: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    held_by: Option<&'a Hold>,
    #[serde(skip_serializing_if = "Option::is_none")]
    held_since: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    settled_view: Option<&'a SettledView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ds_path: Option<&'a ParentPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ds_path_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    registry_since: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    registry_missed_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cds_notified: Option<&'a CdsNotified>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signed_move: Option<&'a Move>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_roll: Option<&'a Roll>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_ages: Option<&'a KeyAges>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider_roll: Option<&'a ProviderRoll>,
}

impl<'a> From<&'a Facts> for StoredFactsRef<'a> {
    fn from(f: &'a Facts) -> Self {
        // Every part and every field named: a fact added to a part and not stored does
        // not compile.
        let Facts {
            lifecycle:
                LifecycleFacts {
                    ds_line,
                    ds_to_enter,
                    dnskey_to_enter,
                    provider_off_since,
                    dnskey_everywhere_at,
                    hold_until,
                    ds_announced_at,
                    ds_first_seen_at,
                    t_gone,
                    gone_confirmed_at,
                    max_ds_ttl,
                    max_dnskey_ttl,
                    ds_seen_at,
                },
            health:
                HealthFacts {
                    partial_since,
                    failing_since,
                    failures,
                },
            delegation:
                DelegationFacts {
                    provider_ns,
                    verdict,
                    seen_at_provider,
                    old_ns,
                    old_ns_ttl,
                    delegated_at,
                    elsewhere_seen,
                },
            move_in:
                MoveInFacts {
                    moving_in,
                    ds_to_remove,
                    delegation_requested,
                },
            routine:
                RoutineLookFacts {
                    served_keys_when_asked,
                    settled_view,
                },
            wait: WaitFacts {
                held_by,
                held_since,
            },
            parent_way:
                ParentWayFacts {
                    ds_path,
                    ds_path_at,
                    registry_since,
                    registry_missed_at,
                    cds_notified,
                },
            signed_move,
            key_roll,
            key_ages,
            provider_roll,
        } = f;
        StoredFactsRef {
            ds_line: ds_line.as_deref(),
            ds_to_enter: ds_to_enter.as_deref(),
            dnskey_to_enter: dnskey_to_enter.as_deref(),
            provider_off_since: *provider_off_since,
            dnskey_everywhere_at: *dnskey_everywhere_at,
            hold_until: *hold_until,
            ds_announced_at: *ds_announced_at,
            ds_first_seen_at: *ds_first_seen_at,
            t_gone: *t_gone,
            gone_confirmed_at: *gone_confirmed_at,
            max_ds_ttl: *max_ds_ttl,
            max_dnskey_ttl: *max_dnskey_ttl,
            ds_seen_at: *ds_seen_at,
            partial_since: *partial_since,
            failing_since: *failing_since,
            failures: *failures,
            provider_ns: provider_ns.as_deref(),
            delegation: *verdict,
            seen_at_provider: *seen_at_provider,
            old_ns,
            old_ns_ttl: *old_ns_ttl,
            delegated_at: *delegated_at,
            elsewhere_seen: *elsewhere_seen,
            moving_in: *moving_in,
            ds_to_remove,
            delegation_requested: *delegation_requested,
            served_keys_when_asked: served_keys_when_asked.as_deref(),
            held_by: held_by.as_ref(),
            held_since: *held_since,
            settled_view: settled_view.as_ref(),
            ds_path: ds_path.as_ref(),
            ds_path_at: *ds_path_at,
            registry_since: *registry_since,
            registry_missed_at: *registry_missed_at,
            cds_notified: cds_notified.as_ref(),
            signed_move: signed_move.as_ref(),
            key_roll: key_roll.as_ref(),
            key_ages: key_ages.as_ref(),
            provider_roll: provider_roll.as_ref(),
        }
    }
}

impl Serialize for Facts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        StoredFactsRef::from(self).serialize(serializer)
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_empty(items: &&[String]) -> bool {
    items.is_empty()
}
