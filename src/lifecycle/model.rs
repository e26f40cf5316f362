//! The lifecycle's vocabulary: the zone as it is known between steps, what one look
//! observed, and what a step decides (the next state, effects, audit notes). `step`, the
//! alert judge, the guard and the engine all speak it; none of them owns it.

use serde::{Deserialize, Serialize};

use super::facts::Facts;
use super::state::{Intent, State};
use crate::alert_kind::AlertKind;
use crate::dns::delegation::{self, DelegationAssessment};
use crate::dns::{ChildView, ParentView, ValidationVerdict};
use crate::dnssec::{CdsHalves, CdsPublication, DnssecKey};
use crate::time::Timestamp;
use crate::zone_name::ZoneName;

/// A zone as the lifecycle knows it between steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zone {
    pub name: ZoneName,
    pub intent: Intent,
    /// The operator said the DS from `awaiting_ds` was never entered at the registrar.
    pub ds_never_submitted: bool,
    /// `None` until the first observation adopts the zone.
    pub state: Option<State>,
    pub since: Timestamp,
    pub facts: Facts,
}

/// What the provider said about the zone's DNSSEC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderView {
    /// On, with its key (checked against its own DS).
    On(Box<DnssecKey>),
    Off,
    /// The provider answered that it has no such zone: a definite answer, but one on
    /// which no DNSSEC decision can rest.
    Missing,
    /// The provider could not be asked or gave an unusable answer.
    Unknown(String),
}

/// The provider's CDS/CDNSKEY setting as one look found it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CdsSetting {
    /// Not asked at this look (a settled zone's look asks the provider as little as it
    /// can): nothing is set on it.
    #[default]
    NotAsked,
    /// The provider's API does not control it (the Gcore API).
    Uncontrolled,
    Set(CdsPublication),
    /// Its two halves (the CDS and the CDNSKEY) differ, each one of the daemon's own
    /// forms: a setting of the daemon's half applied (an answer lost between its two
    /// writes). The step sets it whole again (rule 14, level-triggered: completed or
    /// rolled back to what the zone wants now) and says so.
    HalfApplied(CdsHalves),
    /// It could not be read: nothing is set on it either.
    Unknown(String),
}

impl CdsSetting {
    /// Read at this look where the daemon sets it: a step may change it.
    pub fn controlled(&self) -> bool {
        matches!(self, Self::Set(_) | Self::HalfApplied(_))
    }

    /// The setting as the provider's API gave it, each half as read.
    pub fn read(halves: Option<CdsHalves>) -> Self {
        match halves {
            None => Self::Uncontrolled,
            Some(h) => match h.as_whole() {
                Some(whole) => Self::Set(whole),
                None => Self::HalfApplied(h),
            },
        }
    }
}

/// Everything observed for one step.
#[derive(Debug, Clone)]
pub struct Observation {
    pub at: Timestamp,
    pub provider: ProviderView,
    /// The largest TTL in the zone (from the provider's RRsets), for the enabling hold.
    pub zone_max_ttl: Option<u32>,
    /// Why the zone's largest TTL is not known though it was asked for (the RRset
    /// listing failed, or an RRset has no TTL): the observation is incomplete.
    pub zone_ttl_error: Option<String>,
    /// The provider's name servers for the zone (its apex NS, as `dns::delegation::ns_set`),
    /// asked now or remembered from an earlier look; `None` when never known.
    pub provider_ns: Option<Vec<String>>,
    /// The provider was asked about this zone's DNSSEC now. False for a settled zone seen
    /// through the paged zone listing with nothing changed: the key is the one followed,
    /// as the name servers still serve it, but it was not confirmed by the provider, so
    /// no DS is shown "to enter" on it (safety rule 8).
    pub provider_asked: bool,
    pub parent: Result<ParentView, String>,
    pub child: Result<ChildView, String>,
    pub validation: ValidationVerdict,
    /// The registrar hook's last error for a DS request made in the current state.
    pub registrar_hook_failed: Option<String>,
    /// What the provider is set to publish as CDS/CDNSKEY (DESIGN.md rule 14).
    pub cds: CdsSetting,
    /// The way a DS reaches the parent, where it was resolved at this look (`Look::ds_path`).
    pub ds_path: Option<super::parent_way::ParentPath>,
    /// The last NOTIFY(CDS) performed for a DS request of the zone's current state, and
    /// its outcome: filled in by the engine from the outbox (a step decides a NOTIFY,
    /// the engine sends it after the commit and records its outcome on its row).
    pub cds_notify: Option<super::parent_way::CdsNotified>,
    /// Who the parent addresses delegate to, against `provider_ns`: judged once, by
    /// [`Observation::assessed`], and read by `step`, the alerts and the audit trail.
    pub delegation: DelegationAssessment,
}

impl Observation {
    /// The observation with its delegation judged from its parent view and the
    /// provider's name servers (no parent view: unknown). Whoever builds or changes an
    /// observation's parent view or name servers calls it last.
    pub fn assessed(mut self) -> Self {
        self.delegation = assess_delegation(&self.parent, self.provider_ns.as_deref());
        self
    }
}

/// Who the parent addresses delegate to, against the provider's name servers.
fn assess_delegation(
    parent: &Result<ParentView, String>,
    provider_ns: Option<&[String]>,
) -> DelegationAssessment {
    let answers = parent
        .as_ref()
        .map(|p| p.delegations.as_slice())
        .unwrap_or_default();
    delegation::assess(answers, provider_ns)
}

/// One judged condition: firing with its message, or clear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertCheck {
    pub kind: AlertKind,
    pub firing: Option<String>,
}

impl AlertCheck {
    pub fn new(kind: AlertKind, firing: Option<String>) -> Self {
        Self { kind, firing }
    }

    pub fn firing(kind: AlertKind, message: String) -> Self {
        Self {
            kind,
            firing: Some(message),
        }
    }

    pub fn clear(kind: AlertKind) -> Self {
        Self { kind, firing: None }
    }
}

/// A side effect, performed by the engine after the decision is committed. Stored in the
/// outbox as JSON tagged `effect`, beside its kind (`EffectKind`, the same name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, strum::EnumDiscriminants)]
#[serde(rename_all = "snake_case", tag = "effect")]
#[strum_discriminants(
    name(EffectKind),
    derive(strum::IntoStaticStr, strum::EnumString, strum::VariantArray),
    strum(serialize_all = "snake_case")
)]
pub enum Effect {
    /// `PATCH …/dnssec {"enabled":true}`.
    EnableDnssec,
    /// `PATCH …/dnssec {"enabled":false}`, only through the safety guard.
    DisableDnssec,
    /// Sets what the provider publishes as CDS/CDNSKEY (DESIGN.md rule 14: a CDS is an
    /// announcement).
    SetCds { to: CdsPublication },
    /// Tell the operator (log, sinks, registrar hook) to enter this DS at the registrar.
    AnnounceDs { ds_line: String },
    /// Tell the operator to remove the DS at the registrar: the followed key's line, or
    /// (moving in) every DS record the parent publishes, one zone-file line each.
    RequestDsRemoval { ds_line: Option<String> },
    /// Tell the operator (log and sinks; never the registrar hook: a wrong NS set takes
    /// the domain down) to change the zone's NS at the registrar to these name servers.
    RequestDelegation { name_servers: Vec<String> },
    /// A signed move (DESIGN.md section 2): a call to one of the zone's two accounts,
    /// named (the fleet's one-holder rule does not apply to a declared move, rule 13).
    MoveCall { account: String, call: MoveCall },
    /// A signed move: a request to the registrar, owed until told whatever the zone's
    /// state (it stays `active` throughout a move).
    MoveRequest { request: MoveRequest },
    /// NOTIFY(CDS) to the parent's notification target (RFC 9859): a hint that the
    /// child's CDS asks for a change (`registry::notify_due`).
    NotifyCds(super::parent_way::NotifyPlan),
    /// A key rollover (DESIGN.md "Key rollovers"): a key added at the provider. Never
    /// sent again while an earlier one's outcome is unknown (rule 11: a second addition
    /// adds a second key); the provider's listing settles it.
    AddKey {
        kind: super::rollover::KeyKind,
        algorithm: u8,
        active: bool,
        published: bool,
    },
    /// A key rollover: a listed key's flags set (level-triggered).
    SetKeyState {
        id: String,
        active: bool,
        published: bool,
    },
    /// A key rollover: a listed key deleted.
    DeleteKey { id: String },
    /// A key rollover's request to the registrar (log, sinks, the hook's `add` and
    /// `remove` with `DNSSEC_WARDEN_DS_KEEP`), as a signed move's: owed until told.
    RollRequest { request: RollRequest },
}

/// A key rollover's request to the registrar: one DS added beside the one kept, or
/// removed with the other kept (zone-file lines).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "request")]
pub enum RollRequest {
    AddDs { ds_line: String, keep: String },
    RemoveDs { ds_line: String, keep: String },
}

/// A signed move's provider call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "call")]
pub enum MoveCall {
    /// DNSSEC on at the target.
    DnssecOn,
    /// DNSSEC off at the source, only if `signed_move::source_may_go_off` allows it on a
    /// look taken right before the call.
    DnssecOff,
    /// The other signer's DNSKEYs the account publishes, made exactly `keys`.
    ForeignKeys {
        keys: Vec<crate::dnssec::Dnskey>,
        ttl: u32,
    },
    /// No CDS/CDNSKEY at the account while the move runs (a registry that scans would
    /// otherwise replace the DS set the move builds).
    CdsOff,
}

/// A signed move's request to the registrar (log, sinks; the hook's `add` and `remove`,
/// never the NS change).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "request")]
pub enum MoveRequest {
    AddDs { ds_line: String, keep: String },
    ChangeNs { name_servers: Vec<String> },
    RemoveDs { ds_line: String, keep: String },
}

impl Effect {
    /// In words, for the audit trail: "switch DNSSEC on", ...
    pub fn describe(&self) -> &'static str {
        match self {
            Self::EnableDnssec => "switch DNSSEC on",
            Self::DisableDnssec => "switch DNSSEC off",
            Self::SetCds { to } => match to {
                CdsPublication::Key => "publish the CDS of the key",
                CdsPublication::Delete => "publish the CDS delete request",
                CdsPublication::Nothing => "withdraw the CDS",
            },
            Self::AnnounceDs { .. } => "announce the DS",
            Self::RequestDsRemoval { .. } => "request the DS removal",
            Self::RequestDelegation { .. } => "request the NS change",
            Self::MoveCall { call, .. } => match call {
                MoveCall::DnssecOn => "switch DNSSEC on at the target",
                MoveCall::DnssecOff => "switch DNSSEC off at the source",
                MoveCall::ForeignKeys { .. } => "set the other signer's keys",
                MoveCall::CdsOff => "withdraw the CDS",
            },
            Self::MoveRequest { request } => match request {
                MoveRequest::AddDs { .. } => "request the target's DS added",
                MoveRequest::ChangeNs { .. } => "request the NS change",
                MoveRequest::RemoveDs { .. } => "request the source's DS removed",
            },
            Self::NotifyCds(_) => "send NOTIFY(CDS) to the parent's registry",
            Self::AddKey { .. } => "add the roll's new key",
            Self::SetKeyState { .. } => "set a key's signing and publication",
            Self::DeleteKey { .. } => "delete the roll's old key",
            Self::RollRequest { request } => match request {
                RollRequest::AddDs { .. } => "request the new key's DS added",
                RollRequest::RemoveDs { .. } => "request the old key's DS removed",
            },
        }
    }

    /// Provider calls are re-derived from the state at every step, so an older pending
    /// one is superseded by the newer decision; notifications are delivered once each.
    pub fn is_provider_call(&self) -> bool {
        self.kind().is_provider_call()
    }

    pub fn kind(&self) -> EffectKind {
        self.into()
    }
}

impl EffectKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn is_provider_call(self) -> bool {
        matches!(
            self,
            Self::EnableDnssec
                | Self::DisableDnssec
                | Self::SetCds
                | Self::MoveCall
                | Self::AddKey
                | Self::SetKeyState
                | Self::DeleteKey
        )
    }

    /// Decided afresh by every step from its look: an owed one is superseded by a newer
    /// commit (the newer decision has it again where it is still due), and a failed one
    /// is not tried again as the same row. Provider calls (a key rollover's key calls
    /// among them: an owed one was never sent, and a begun one is of unknown outcome,
    /// settled by the key listing before another is decided), and the NOTIFY(CDS) (whose
    /// plan and signal are the look's). The registrar's requests, a roll's too, are
    /// delivered once.
    pub fn is_rederived(self) -> bool {
        self.is_provider_call() || self == Self::NotifyCds
    }

    /// A request to the operator or the registrar hook about the DS at the registrar.
    pub fn is_registrar_request(self) -> bool {
        matches!(self, Self::AnnounceDs | Self::RequestDsRemoval)
    }
}

/// One line of the audit trail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditNote {
    pub from: Option<State>,
    pub to: Option<State>,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub state: Option<State>,
    pub facts: Facts,
    pub effects: Vec<Effect>,
    pub alerts: Vec<AlertCheck>,
    pub notes: Vec<AuditNote>,
    pub wake_at: Timestamp,
}

impl Decision {
    pub fn transitioned(&self, zone: &Zone) -> bool {
        self.state != zone.state
    }
}

/// Every distinct DS record the parent publishes, as zone-file lines (for the operator
/// to remove exactly these).
pub fn parent_ds_lines(parent: &ParentView) -> Vec<String> {
    let ttl = parent.max_ds_ttl().unwrap_or(0);
    parent
        .distinct_ds()
        .iter()
        .map(|ds| format!("{} {ttl} IN DS {ds}", parent.zone))
        .collect()
}

/// The distinct keys every child address serves, as one comparable text (flags,
/// algorithm, key tag, sorted): how a settled zone sees that nothing changed.
pub fn served_fingerprint(child: &ChildView) -> String {
    let mut keys: Vec<String> = Vec::new();
    for a in &child.answers {
        match &a.answer {
            crate::dns::DnskeyAnswer::Keys(k) => keys.extend(key_marks(k)),
            _ => keys.push("none".to_string()),
        }
    }
    keys.sort();
    keys.dedup();
    keys.join(",")
}

/// Each key of one child address's set as flags, algorithm and key tag; a key not signing
/// the set is marked, so that its signatures failing (or coming back) is a change.
pub fn key_marks(k: &crate::dns::ChildKeys) -> impl Iterator<Item = String> + '_ {
    k.keys.iter().map(|key| {
        let mark = if k.serves(key) { "" } else { "/unsigned" };
        format!("{}/{}/{}{mark}", key.flags, key.algorithm, key.key_tag())
    })
}
