//! What the rules remember about a zone across steps.
//!
//! The store keeps `Facts` as one JSON object (`zones.facts`): adding a fact is one field
//! here (with its line in the table below), and no migration. A field missing from a
//! stored object reads as its default; a field no longer known is ignored.

use serde::{Deserialize, Serialize};

use crate::dns::DelegationVerdict;
use crate::time::Timestamp;

/// What the rules remember across steps, and in which states each fact holds.
///
/// `step` owns every fact: it sets them on the transitions named here, and entering
/// `disabled` starts a new lifecycle (every fact cleared but the observation health, and
/// at adoption what the looks before it saw of the DS).
/// Outside the states named, a fact is `None` or left over from earlier in the same
/// lifecycle, and no rule reads it there.
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
/// | `partial_since` | every state | parent servers disagree (`alerts::judge`) | they agree again |
/// | `failing_since`, `failures` | every state, across lifecycles | an incomplete observation | a complete one |
/// | `provider_ns` | every state, across lifecycles | the provider's API listed the zone's apex NS | never (replaced) |
/// | `delegation` | every state, across lifecycles | the last known delegation verdict | never (replaced) |
/// | `seen_at_provider` | every state, across lifecycles | every parent address delegated to the provider | never |
/// | `old_ns`, `old_ns_ttl` | every state, across lifecycles | a parent address delegates elsewhere (the NS sets and the largest NS TTL seen for them) | never (the largest kept) |
/// | `delegated_at` | every state, across lifecycles | every parent address delegates to the provider after some did not (T_delegated, rule 9) | a parent address delegates elsewhere again |
/// | `elsewhere_seen` | every state, across lifecycles | a parent address delegates elsewhere | every parent address delegates to the provider |
/// | `moving_in` | `awaiting_ds_removal`, `ttl_wait`, `awaiting_delegation` | a move in starts (DESIGN.md section 2), or the disable path finds one (never `seen_at_provider`) | it ends (`enabling`, `disabled`, or the disable path) |
/// | `served_keys_when_asked` | every state | the provider was asked and every child address answered | the provider asked and off, or a child address unknown |
/// | `delegation_requested` | `awaiting_delegation` | the NS change is asked for | leaving `awaiting_delegation` |
/// | `ds_to_remove` | `awaiting_ds_removal` while moving in | the DS records the parent publishes, at every step | the parent publishes none (kept as last seen while it is unknown) |
/// | `held_by` | every state | the step, when something the state alone does not say holds the zone (a failing call, a name server without the signed key, an unconfirmed chain, a TTL wait restarted by a gap in looks); in a signed move the account its wait is on (`Hold::account`) | at every step (recomputed) |
/// | `held_since` | every state | the first step with `held_by` set | a step without `held_by` |
/// | `ds_path`, `ds_path_at` | `enabling` .. `awaiting_ds`, `active` .. `awaiting_ds_removal` (where a DS request may go) | resolved at a look in those states, at most every `registry::PATH_REFRESH` | entering `disabled` |
/// | `registry_since` | `awaiting_ds`, `awaiting_ds_removal` | the DS request goes to the registry by the child's signals (`registry::takes_request`) | leaving the state, or the registry late (the request then goes to the registrar) |
/// | `registry_missed_at` | `awaiting_ds`, `awaiting_ds_removal` | the registry did not act by its deadline | leaving the state |
/// | `cds_notified` | `awaiting_ds`, `awaiting_ds_removal` | the step after a NOTIFY(CDS) was performed, from what its outbox row says came of it | leaving the state |
/// | `signed_move` | `active` | `dnssec-warden move` declares it (the one fact written outside `step`: `Store::declare_move`, at the row's version) | the move ends (only the target lists the zone) |
/// | `settled_view` | `active`, `disabled` | a full look at which every address said the same (the standard samples are held to, `sample::settled_view`) | at every step (recomputed) |
// A field at its default is left out of the stored JSON, and a missing field reads as its
// default: most fields are unset most of the time, and the row of a settled zone then
// fits two to a 4 KiB page with its last observation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Facts {
    /// The DS (zone-file line) of the provider key being followed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ds_line: Option<String>,
    /// The DS that belongs at the registrar now, as shown to the operator. Set only once it
    /// was announced (`awaiting_ds`, `ds_observed`, `active`), and only while the last
    /// observation showed the provider on with that key and every child address serving
    /// it (safety rule 8); `None` means the instruction is withheld or withdrawn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ds_to_enter: Option<String>,
    /// The same key in the DNSKEY form (for registrars that ask for it): set exactly
    /// when `ds_to_enter` is, from the same look.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dnskey_to_enter: Option<String>,
    /// Since when the provider says DNSSEC is off while the zone is on the enable path
    /// (switched off outside dnssec-warden, or an enable call not taken yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_off_since: Option<Timestamp>,
    /// When every child address was first seen serving that key (continuously since).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dnskey_everywhere_at: Option<Timestamp>,
    /// End of the propagation hold before the DS may be announced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_until: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ds_announced_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ds_first_seen_at: Option<Timestamp>,
    /// When every parent address first answered that the DS is gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub t_gone: Option<Timestamp>,
    /// The last look that confirmed the DS gone everywhere since `t_gone` (rule 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gone_confirmed_at: Option<Timestamp>,
    /// The largest DS TTL any parent address gave since the zone was last disabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ds_ttl: Option<u32>,
    /// The largest DNSKEY TTL any child address gave since the zone was last disabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_dnskey_ttl: Option<u32>,
    /// The last look at which some parent address published a DS (any DS, even beside
    /// unknown answers), since the zone was last disabled. A move in asks for the NS
    /// change only once a TTL wait begun after it has ended (safety rule 9).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ds_seen_at: Option<Timestamp>,
    /// Since when parent servers disagree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_since: Option<Timestamp>,
    /// Since when observations are incomplete, and how many in a row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<Timestamp>,
    #[serde(skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// The provider's name servers for the zone, as last listed by its API.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_ns: Option<Vec<String>>,
    /// The last delegation verdict that was not unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegation: Option<DelegationVerdict>,
    /// Every parent address was once seen delegating to the provider's name servers: a
    /// zone that then goes elsewhere has moved out, not in.
    #[serde(skip_serializing_if = "is_false")]
    pub seen_at_provider: bool,
    /// The name servers parent addresses delegate to other than the provider's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub old_ns: Vec<String>,
    /// The largest NS TTL seen for that old delegation (parent and old servers' apex).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_ns_ttl: Option<u32>,
    /// T_delegated: every parent address delegates to the provider's name servers since.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delegated_at: Option<Timestamp>,
    /// A parent address was seen delegating elsewhere since the delegation was last the
    /// provider's everywhere (even beside an unknown answer): the next complete
    /// delegation to the provider starts a delegation hold.
    #[serde(skip_serializing_if = "is_false")]
    pub elsewhere_seen: bool,
    /// The zone is on the move in (DESIGN.md section 2): no provider call switches
    /// DNSSEC off, and the end of `ttl_wait` leads to `awaiting_delegation`.
    #[serde(skip_serializing_if = "is_false")]
    pub moving_in: bool,
    /// Moving in: the DS records the parent publishes that must go (zone-file lines), as
    /// last seen; what `status` names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ds_to_remove: Vec<String>,
    /// Moving in: the NS change was asked for in this `awaiting_delegation` (only once
    /// no DS is published, on validated evidence).
    #[serde(skip_serializing_if = "is_false")]
    pub delegation_requested: bool,
    /// The key set every child address served when the provider last said which key it
    /// signs with ([`crate::lifecycle::model::served_fingerprint`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub served_keys_when_asked: Option<String>,
    /// What held the zone at its last step where the state alone does not say it: the
    /// wait `status` names (DESIGN.md rule 11: a wait names what really holds it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_by: Option<Hold>,
    /// Since when some `held_by` holds the zone without a break (`wait_stalled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_since: Option<Timestamp>,
    /// What every address said at the last full look, when the zone is settled and they
    /// all said the same: a sampled look agrees only with this (DESIGN.md section 4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled_view: Option<SettledView>,
    /// The way a DS reaches the parent, as last resolved, and when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ds_path: Option<super::parent_way::ParentPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ds_path_at: Option<Timestamp>,
    /// Since when the state's DS request waits on the registry acting on the child's
    /// CDS (publish or delete), not on someone at the registrar.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_since: Option<Timestamp>,
    /// When the registry was late, and the request went to the registrar.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_missed_at: Option<Timestamp>,
    /// The last NOTIFY(CDS) sent for the state's request, and its answer (the outbox's
    /// word, `Observation::cds_notify`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cds_notified: Option<super::parent_way::CdsNotified>,
    /// A signed move in progress (DESIGN.md section 2, "Signed moves"): while it is set
    /// the zone is stepped by [`super::signed_move::step`], not by `step`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_move: Option<super::signed_move::Move>,
}

/// One condition that holds a zone, and whose move ends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub what: String,
    pub on: Party,
    /// The provider account (`[providers.NAME]`) the wait is on, where the step knows it
    /// is one account's: a signed move's, whose two accounts each hold waits of their
    /// own. `None`: the zone's one account (or none); a fact stored before it reads so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
}

impl Hold {
    pub fn new(what: impl Into<String>, on: Party) -> Self {
        Self {
            what: what.into(),
            on,
            account: None,
        }
    }

    /// The same hold, on the account named `account`.
    pub fn at(mut self, account: Option<String>) -> Self {
        self.account = account;
        self
    }
}

/// Who must act for a wait to end (`status`'s `on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Party {
    Daemon,
    Provider,
    Registrar,
    Ttl,
    Operator,
    Nobody,
}

impl Party {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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
