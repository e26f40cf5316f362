//! Key rollovers at the provider (DESIGN.md section 2 "Key rollovers", rule 16): the
//! phases of replacing a zone's keys without a moment at which a resolver holding any DS,
//! DNSKEY and RRSIG it may have cached fails the zone, decided from one look as a pure
//! function. Three methods: ZSK pre-publish, KSK or CSK double-DS through the registrar,
//! and an algorithm rollover in RFC 6781 4.1.4's conservative order. The caller performs
//! the effects: the key flags are derived again at every look (level-triggered), a key is
//! added only when no earlier addition is unsettled, the registrar is asked once, on
//! entering the phase that waits for it.

mod phases;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use super::answers::Answer;
use super::answers::{ds_of, every, failing, has_ds};
use super::hold::Party;
pub use super::keys::KeyKind;
use super::policy::Policy;
use crate::dnssec::{CdsPublication, Dnskey, Ds};
use crate::time::Timestamp;

/// How a roll replaces the keys, chosen from what the zone has and the algorithm asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Method {
    /// A ZSK: the new key published first, then the signatures swapped, then the old
    /// key removed (RFC 7583 3.2.1).
    ZskPrePublish,
    /// A KSK or a CSK: the new key published, its DS added beside the old at the
    /// registrar, the signing swapped, the old DS removed, the old key removed (RFC 7583
    /// 3.3.2, with the new key published first so that a CSK's data signatures swap
    /// as a ZSK's do).
    DoubleDs,
    /// A new algorithm: RFC 6781 4.1.4's conservative order.
    Algorithm,
}

impl Method {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The method's phases, in order.
    pub fn phases(self) -> &'static [Phase] {
        use Phase::*;
        match self {
            Method::ZskPrePublish => &[Publishing, Swapping, RemovingOldKey, Done],
            Method::DoubleDs => &[
                Publishing,
                AwaitingNewDs,
                Swapping,
                RemovingOldDs,
                RemovingOldKey,
                Done,
            ],
            Method::Algorithm => &[
                SigningUnpublished,
                PublishingNewAlgorithm,
                AwaitingNewDs,
                RemovingOldDs,
                UnpublishingOldAlgorithm,
                RemovingOldSignatures,
                Done,
            ],
        }
    }

    /// The phase after `phase` in this method's order.
    fn after(self, phase: Phase) -> Phase {
        let order = self.phases();
        order
            .iter()
            .position(|p| *p == phase)
            .and_then(|i| order.get(i + 1))
            .copied()
            .unwrap_or(Phase::Done)
    }
}

/// The phases of every method (each method uses its own subset, [`Method::phases`]). The
/// names are a contract (`status`, the stored facts), derived once from the variants.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Phase {
    /// The new key in the DNSKEY set, not signing, until every cached set holds it.
    Publishing,
    /// The new DS beside the old at every parent address.
    AwaitingNewDs,
    /// The new key signs, the old stops (still published), until nothing cached needs
    /// the old key's signatures.
    Swapping,
    /// The old DS removed at every parent address, the new kept.
    RemovingOldDs,
    /// The old key deleted, until no child address serves it.
    RemovingOldKey,
    /// Algorithm: the new keys sign everything, unpublished, until every cached RRset
    /// carries their signatures.
    SigningUnpublished,
    /// Algorithm: the new keys published, until every cached DNSKEY set holds them.
    PublishingNewAlgorithm,
    /// Algorithm: the old keys unpublished (still signing), until no cached DNSKEY set
    /// holds them.
    UnpublishingOldAlgorithm,
    /// Algorithm: the old keys deleted, their signatures gone.
    RemovingOldSignatures,
    Done,
}

impl Phase {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// How the parent takes its DS during a KSK or CSK roll: from the registrar (the hook's
/// `add`/`remove`), or from the child's CDS/CDNSKEY, which a registry scans (and is
/// told of by NOTIFY(CDS) where the parent names a target): RFC 7344 appendix B's
/// double-KSK roll, driven by what rule 14's CDS names in each phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DsVia {
    #[default]
    Registrar,
    CdsScan,
    CdsNotify,
    /// The registrar, though a registry scans the child's CDS: an algorithm roll, whose
    /// CDS would name every published SEP key (the new algorithm's before its DNSKEY TTL
    /// is waited, the old one's until it leaves), so it is withdrawn throughout and the
    /// registry changes nothing on its own.
    RegistrarCdsWithdrawn,
}

impl DsVia {
    pub fn is_registrar(&self) -> bool {
        *self == DsVia::Registrar
    }

    /// The parent takes the roll's DS changes from the child's CDS.
    pub fn by_cds(self) -> bool {
        matches!(self, DsVia::CdsScan | DsVia::CdsNotify)
    }

    /// The roll sets the provider's CDS (and so reads it at every look).
    pub fn sets_cds(self) -> bool {
        !self.is_registrar()
    }
}

/// One key of the roll: its part, and once the provider lists it, its id and DNSKEY.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollKey {
    pub kind: KeyKind,
    /// The provider's id for it (opaque).
    pub id: Option<String>,
    pub dnskey: Option<Dnskey>,
}

/// The largest TTLs seen since the roll began (0: never seen); the holds count with
/// them. Seeded from the zone's facts when the roll is declared (a TTL lowered just
/// before it still bounds what resolvers cached before it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RollTtls {
    pub dnskey: u32,
    pub ds: u32,
    /// The zone's largest TTL (TTLsig: what a signature over any RRset is cached for).
    pub zone: u32,
}

/// A roll in progress, as persisted (one `Option` of the zone's facts, committed with
/// each step).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Roll {
    pub method: Method,
    /// The algorithm of the keys the roll introduces.
    pub algorithm: u8,
    pub phase: Phase,
    /// The keys the roll retires: one, or an algorithm's pair (or its CSK).
    pub old: Vec<RollKey>,
    /// The keys it introduces, one for each of `old`, of the same kind.
    pub new: Vec<RollKey>,
    /// The zone's keys the roll leaves alone (the KSK of a ZSK roll, the ZSK of a KSK
    /// roll).
    pub others: Vec<RollKey>,
    /// Going back: `old` and `new` were exchanged, and the method's order goes on from
    /// the phase that mirrors the one the abort came in.
    pub aborted: bool,
    /// When the phase's condition was first confirmed, every look since confirming it.
    pub confirmed_at: Option<Timestamp>,
    /// The last look that confirmed it: a longer gap restarts the hold (rule 2's rule).
    pub last_confirmed: Option<Timestamp>,
    /// When the phase was entered.
    pub phase_since: Timestamp,
    pub ttls: RollTtls,
    /// The operator asked for the roll to be aborted (`dnssec-warden roll --abort`): the
    /// next step decides it (taken where [`may_abort`] allows it, refused with its reason
    /// in the history otherwise) and clears it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abort_asked: bool,
    /// How the parent takes the DS ([`DsVia`]): fixed before the first DS change is
    /// asked (a double-DS roll's `publishing`), from the zone's parent way.
    #[serde(default, skip_serializing_if = "DsVia::is_registrar")]
    pub via: DsVia,
    /// The CDS signal last told to the parent by NOTIFY(CDS) (`key <tags>`): told once
    /// per signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cds_notified: Option<String>,
}

/// A key as the provider lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedKey {
    pub id: String,
    /// The DNSKEY as the API gives it (flags, algorithm, public key); its tag is ours.
    pub dnskey: Dnskey,
    pub active: bool,
    pub published: bool,
}

/// What a child address served for the zone's apex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRollSeen {
    /// The DNSKEY RRset.
    pub dnskey: Vec<Dnskey>,
    pub dnskey_ttl: u32,
    /// The key tags whose RRSIG over the DNSKEY set verified, within its window.
    pub dnskey_signed_by: Vec<u16>,
    /// The key tags whose RRSIG over the zone's other data (the SOA) verified.
    pub data_signed_by: Vec<u16>,
    /// The tags of the keys its CDS and CDNSKEY name (`None`: not asked, or unknown): a
    /// roll whose DS goes by the CDS asks them.
    pub cds: Option<Vec<u16>>,
}

/// What a parent address published for the zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentRollSeen {
    pub ds: Vec<Ds>,
    pub ds_ttl: Option<u32>,
    /// The DS answer (present or absent) validated from the trust anchor (rule 10).
    pub validated: bool,
}

/// Everything one look at a rolling zone saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollSeen {
    /// The provider's keys for the zone, or why they are not known.
    pub keys: Result<Vec<ListedKey>, String>,
    /// An `AddKey` of this roll still owed or of unknown outcome (the engine's outbox):
    /// no key is asked for again until it is settled by the listing (rule 11; a second
    /// addition would add a second key).
    pub add_key_unsettled: bool,
    pub children: Vec<Answer<ChildRollSeen>>,
    pub parents: Vec<Answer<ParentRollSeen>>,
    /// The zone's largest TTL as the provider lists its RRsets, or why it is not known.
    pub zone_max_ttl: Result<u32, String>,
    /// The provider's CDS/CDNSKEY setting (rule 14), where it was read whole (`None`:
    /// not asked, unknown, half applied, or not the daemon's to set).
    pub cds: Option<CdsPublication>,
}

/// What the registrar is asked to do (the log, the sinks, the hook's `add`/`remove`
/// with `DNSSEC_WARDEN_DS_KEEP`), as the signed move's `Instruction` asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DsRequest {
    AddDs { add: Ds, keep: Ds },
    RemoveDs { remove: Ds, keep: Ds },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollEffect {
    /// Add a key at the provider.
    AddKey {
        kind: KeyKind,
        algorithm: u8,
        active: bool,
        published: bool,
    },
    /// Set a listed key's flags.
    SetKey {
        id: String,
        active: bool,
        published: bool,
    },
    DeleteKey {
        id: String,
    },
    /// Given once, on entering the phase that waits for it.
    Registrar(DsRequest),
    /// Set the provider's CDS/CDNSKEY (a roll whose DS goes by the CDS): the provider
    /// publishes those of its published entry-point keys.
    SetCds(CdsPublication),
    /// Tell the parent's registry the CDS changed (NOTIFY(CDS), RFC 9859): `signal` is
    /// `key <tags>`. The caller sends it where the parent names a target.
    NotifyCds {
        signal: String,
    },
}

/// What holds a roll, who must act for it to end, and until when where a TTL holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollWait {
    pub what: String,
    pub on: Party,
    pub until: Option<Timestamp>,
}

impl RollWait {
    fn on(on: Party, what: impl Into<String>) -> RollWait {
        RollWait {
            what: what.into(),
            on,
            until: None,
        }
    }

    fn provider(what: impl Into<String>) -> RollWait {
        RollWait::on(Party::Provider, what)
    }

    fn registrar(what: impl Into<String>) -> RollWait {
        RollWait::on(Party::Registrar, what)
    }

    /// The registrar, or the parent's registry where the roll's DS goes by the CDS.
    fn parent(by_cds: bool, what: impl Into<String>) -> RollWait {
        let on = if by_cds {
            Party::Registry
        } else {
            Party::Registrar
        };
        RollWait::on(on, what)
    }

    /// The instant is said once, by whoever shows the wait (`until`).
    fn ttl(what: impl Into<String>, until: Timestamp) -> RollWait {
        RollWait {
            what: what.into(),
            on: Party::Ttl,
            until: Some(until),
        }
    }
}

/// The outcome of one look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollDecision {
    pub next: Roll,
    pub effects: Vec<RollEffect>,
    pub wait: RollWait,
    /// Something only a person can repair (a key changed behind the daemon's back, a DS
    /// the roll needs gone from a parent address): the roll holds.
    pub alerts: Vec<String>,
    /// For the history: a phase entered, an abort taken or refused.
    pub notes: Vec<String>,
}

/// The timings a roll uses (from `Policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RollPolicy {
    /// RFC 7583's propagation delay beyond what every address was seen serving.
    pub propagation_margin: Duration,
    /// The DS TTL where it was never answered.
    pub assumed_ds_ttl: Duration,
    /// Looks further apart than this restart a hold (two `poll_waiting`, as rule 2; the
    /// engine adds the longest a step may take, as for a move).
    pub confirmation_gap: Duration,
    /// Test builds only: a mutant that deletes the old key one DNSKEY TTL too early (the
    /// hold of the phase before `removing_old_key`, `swapping` for a ZSK and
    /// `removing_old_ds` for a KSK or CSK, is that much shorter), for tests that must
    /// fail on it.
    #[cfg(any(test, feature = "test-hooks"))]
    pub mutant_early_removal: bool,
}

impl Policy {
    /// A roll's timings: this policy's margin, the DS TTL assumption and rule 2's gap.
    pub fn roll_policy(&self) -> RollPolicy {
        RollPolicy {
            propagation_margin: self.propagation_margin,
            assumed_ds_ttl: self.assumed_ds_ttl,
            confirmation_gap: self.gone_confirmation_gap(),
            #[cfg(any(test, feature = "test-hooks"))]
            mutant_early_removal: false,
        }
    }
}

fn hold_until(from: Timestamp, ttl: u32, policy: &RollPolicy) -> Timestamp {
    from.plus_secs(ttl).plus(policy.propagation_margin)
}

fn secs(d: Duration) -> u32 {
    u32::try_from(d.as_secs()).unwrap_or(u32::MAX)
}

/// Why a roll cannot be planned from the zone's keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the provider lists no active, published {0} for the zone")]
    NoKey(&'static str),
    #[error(
        "the provider lists several active, published {what} keys ({tags}): roll them one at a time, or remove the extra ones first"
    )]
    Several { what: &'static str, tags: String },
    #[error("the zone signs with a {has} (no separate {missing}): roll it as a {has}")]
    WrongKind {
        has: &'static str,
        missing: &'static str,
    },
    #[error("algorithm {0} is not one validators implement (RFC 8624)")]
    Unsupported(u8),
}

impl Roll {
    /// The roll of `kind` (a key roll at the zone's algorithm), or of the zone's whole
    /// key set to `algorithm` where it differs from the zone's, planned from the keys
    /// the provider lists now, at `at`.
    pub fn plan(
        keys: &[ListedKey],
        kind: KeyKind,
        algorithm: Option<u8>,
        at: Timestamp,
    ) -> Result<Roll, PlanError> {
        let signing: Vec<&ListedKey> = keys.iter().filter(|k| k.active && k.published).collect();
        let one = |sep: bool, what: &'static str| -> Result<Option<&ListedKey>, PlanError> {
            let found: Vec<&&ListedKey> = signing
                .iter()
                .filter(|k| k.dnskey.is_sep() == sep)
                .collect();
            match found.as_slice() {
                [] => Ok(None),
                [k] => Ok(Some(**k)),
                several => Err(PlanError::Several {
                    what,
                    tags: several
                        .iter()
                        .map(|k| k.dnskey.key_tag().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                }),
            }
        };
        let sep = one(true, "SEP")?.ok_or(PlanError::NoKey("SEP key (KSK or CSK)"))?;
        let zsk = one(false, "ZSK")?;
        let current = sep.dnskey.algorithm;
        let roll_key = |k: &ListedKey, kind| RollKey {
            kind,
            id: Some(k.id.clone()),
            dnskey: Some(k.dnskey.clone()),
        };
        let new_of = |kind| RollKey {
            kind,
            id: None,
            dnskey: None,
        };
        let others_but = |retired: &[&ListedKey]| -> Vec<RollKey> {
            keys.iter()
                .filter(|k| !retired.iter().any(|r| r.id == k.id))
                .map(|k| {
                    let kind = if k.dnskey.is_sep() {
                        KeyKind::Ksk
                    } else {
                        KeyKind::Zsk
                    };
                    roll_key(k, kind)
                })
                .collect()
        };
        let (method, algorithm, old, others) = match algorithm {
            Some(a) if !crate::dnssec::algorithm_supported(a) => {
                return Err(PlanError::Unsupported(a));
            }
            Some(a) if a != current => {
                let mut old = vec![roll_key(
                    sep,
                    if zsk.is_some() {
                        KeyKind::Ksk
                    } else {
                        KeyKind::Csk
                    },
                )];
                let mut retired = vec![sep];
                if let Some(z) = zsk {
                    old.push(roll_key(z, KeyKind::Zsk));
                    retired.push(z);
                }
                (Method::Algorithm, a, old, others_but(&retired))
            }
            _ => match (kind, zsk) {
                (KeyKind::Zsk, Some(z)) => (
                    Method::ZskPrePublish,
                    current,
                    vec![roll_key(z, KeyKind::Zsk)],
                    others_but(&[z]),
                ),
                (KeyKind::Zsk, None) => {
                    return Err(PlanError::WrongKind {
                        has: "csk",
                        missing: "zsk",
                    });
                }
                (KeyKind::Ksk, Some(_)) => (
                    Method::DoubleDs,
                    current,
                    vec![roll_key(sep, KeyKind::Ksk)],
                    others_but(&[sep]),
                ),
                (KeyKind::Ksk, None) => {
                    return Err(PlanError::WrongKind {
                        has: "csk",
                        missing: "zsk",
                    });
                }
                (KeyKind::Csk, None) => (
                    Method::DoubleDs,
                    current,
                    vec![roll_key(sep, KeyKind::Csk)],
                    others_but(&[sep]),
                ),
                (KeyKind::Csk, Some(_)) => {
                    return Err(PlanError::WrongKind {
                        has: "ksk",
                        missing: "csk",
                    });
                }
            },
        };
        let new = old.iter().map(|k| new_of(k.kind)).collect();
        let phase = method.phases()[0];
        Ok(Roll {
            method,
            algorithm,
            phase,
            old,
            new,
            others,
            aborted: false,
            confirmed_at: None,
            last_confirmed: None,
            phase_since: at,
            ttls: RollTtls::default(),
            abort_asked: false,
            via: DsVia::Registrar,
            cds_notified: None,
        })
    }

    /// The TTLs known before the roll (the zone's facts).
    pub fn seeded(mut self, ttls: RollTtls) -> Roll {
        self.ttls = ttls;
        self
    }

    fn enter(&mut self, phase: Phase, at: Timestamp) {
        self.phase = phase;
        self.phase_since = at;
        self.confirmed_at = None;
        self.last_confirmed = None;
    }

    /// The DS TTL a DS hold waits out (assumed when never answered).
    fn ds_ttl(&self, policy: &RollPolicy) -> u32 {
        match self.ttls.ds {
            0 => secs(policy.assumed_ds_ttl),
            ttl => ttl,
        }
    }

    /// The phase's condition, confirmed at this look and at every look since the first
    /// that confirmed it, then held for `ttl` and the margin (RFC 7583: the propagation
    /// delay is what was seen, the margin what may lie beyond it). A look that cannot
    /// confirm it restarts the hold: it may have missed a set a resolver cached.
    fn confirmed_and_held(
        &mut self,
        now: Timestamp,
        holds: Option<bool>,
        ttl: u32,
        policy: &RollPolicy,
        unconfirmed: impl FnOnce() -> RollWait,
        cached: impl FnOnce() -> String,
    ) -> Result<(), RollWait> {
        if holds != Some(true) {
            self.confirmed_at = None;
            self.last_confirmed = None;
            return Err(unconfirmed());
        }
        if self
            .last_confirmed
            .is_some_and(|last| now.since(last) > policy.confirmation_gap)
        {
            self.confirmed_at = None;
        }
        self.last_confirmed = Some(now);
        #[cfg(any(test, feature = "test-hooks"))]
        let ttl = if policy.mutant_early_removal
            && self.method.after(self.phase) == Phase::RemovingOldKey
        {
            ttl.saturating_sub(self.ttls.dnskey)
        } else {
            ttl
        };
        let until = hold_until(*self.confirmed_at.get_or_insert(now), ttl, policy);
        if now < until {
            return Err(RollWait::ttl(
                format!("resolvers to forget {}", cached()),
                until,
            ));
        }
        Ok(())
    }

    fn sep_keys(keys: &[RollKey]) -> Vec<Dnskey> {
        keys.iter()
            .filter(|k| k.kind.sep())
            .filter_map(|k| k.dnskey.clone())
            .collect()
    }

    /// The first SEP key of the roll's old and new sets, once known.
    fn old_sep(&self) -> Option<Dnskey> {
        Self::sep_keys(&self.old).into_iter().next()
    }

    fn new_sep(&self) -> Option<Dnskey> {
        Self::sep_keys(&self.new).into_iter().next()
    }
}

/// A key's wanted (active, published) flags; `None`: deleted, or not there yet.
type Flags = Option<(bool, bool)>;

/// The flags each of the roll's keys should have at the provider in its phase:
/// (old: active, published), (new: active, published); `None` where the key is to be
/// deleted or not yet there. A roll whose DS goes by the CDS unpublishes the old key
/// once its DS is to go: the provider's CDS names its published entry-point keys, and
/// must then name the new one alone (the new key signs the DNSKEY set and the data
/// since `swapping`'s hold, and every cached DS set holds the new DS since
/// `awaiting_new_ds`'s).
fn wanted_flags(roll: &Roll) -> (Flags, Flags) {
    let on = Some((true, true));
    let (method, phase) = (roll.method, roll.phase);
    if roll.via.by_cds() && method == Method::DoubleDs && phase == Phase::RemovingOldDs {
        return (Some((false, false)), on);
    }
    match (method, phase) {
        (_, Phase::Publishing) | (_, Phase::AwaitingNewDs) if method != Method::Algorithm => {
            (on, Some((false, true)))
        }
        (Method::Algorithm, Phase::SigningUnpublished) => (on, Some((true, false))),
        (Method::Algorithm, Phase::PublishingNewAlgorithm)
        | (Method::Algorithm, Phase::AwaitingNewDs)
        | (Method::Algorithm, Phase::RemovingOldDs) => (on, on),
        (_, Phase::Swapping) | (_, Phase::RemovingOldDs) => (Some((false, true)), on),
        (_, Phase::UnpublishingOldAlgorithm) => (Some((true, false)), on),
        (_, Phase::RemovingOldKey) | (_, Phase::RemovingOldSignatures) | (_, Phase::Done) => {
            (None, on)
        }
        _ => (on, on),
    }
}

/// The SEP keys whose DS the parent should publish in the roll's phase (what rule 14's
/// CDS would follow, where the parent's way reads one).
pub fn ds_wanted(roll: &Roll) -> Vec<Dnskey> {
    let (old, new) = (roll.old_sep(), roll.new_sep());
    let both = || old.iter().chain(&new).cloned().collect();
    match roll.phase {
        Phase::AwaitingNewDs | Phase::Swapping => both(),
        Phase::RemovingOldDs
        | Phase::RemovingOldKey
        | Phase::UnpublishingOldAlgorithm
        | Phase::RemovingOldSignatures
        | Phase::Done => new.into_iter().collect(),
        _ => old.into_iter().collect(),
    }
}

/// Whether an abort can go back from the roll's phase, and where to: `Err` says why it
/// cannot (the CLI refuses with it).
pub fn may_abort(roll: &Roll) -> Result<Phase, String> {
    if roll.aborted {
        return Err("the roll is already going back".into());
    }
    match roll.phase {
        // The new key never signed: deleting it is safe at once.
        Phase::Publishing => Ok(Phase::RemovingOldKey),
        // Its signatures are cached with the zone's data, its key never published: it
        // goes as the old keys of an algorithm roll go, from the last phase.
        Phase::SigningUnpublished => Ok(Phase::RemovingOldSignatures),
        Phase::PublishingNewAlgorithm => Ok(Phase::UnpublishingOldAlgorithm),
        // The new DS may be at the parent: removed first, the old kept throughout.
        Phase::AwaitingNewDs => Ok(Phase::RemovingOldDs),
        // The signing swapped back while both keys are published and both DS stand.
        Phase::Swapping => Ok(Phase::Swapping),
        Phase::RemovingOldDs => Err(
            "the old DS's removal was asked of the registrar: going back would need it at every parent address again, which is a new roll to the old key, not an abort; the roll completes"
                .into(),
        ),
        Phase::RemovingOldKey | Phase::RemovingOldSignatures => Err(
            "the old key is being deleted: nothing depends on it any more; the roll completes (roll again to change the key)"
                .into(),
        ),
        Phase::UnpublishingOldAlgorithm => Err(
            "the old algorithm's DS is gone from the parent: going back would need it there again, a new algorithm roll; the roll completes"
                .into(),
        ),
        Phase::Done => Err("the roll is done".into()),
    }
}

/// One look at a rolling zone, at `at`: the next phase, the effects, what it waits for.
/// `abort`: the operator asked to go back (taken where [`may_abort`] allows it, refused
/// with its reason in the notes otherwise).
pub fn decide(
    zone: &str,
    roll: &Roll,
    seen: &RollSeen,
    at: Timestamp,
    policy: &RollPolicy,
    abort: bool,
) -> RollDecision {
    let mut next = roll.clone();
    // An abort the operator recorded counts as asked now, once.
    let abort = abort || next.abort_asked;
    next.abort_asked = false;
    let mut effects = Vec::new();
    let mut alerts = Vec::new();
    let mut notes = Vec::new();
    learn_ttls(&mut next, seen);

    if abort {
        match may_abort(&next) {
            Ok(to) => {
                let from = next.phase;
                std::mem::swap(&mut next.old, &mut next.new);
                next.aborted = true;
                next.enter(to, at);
                notes.push(format!(
                    "{zone}: the {} roll aborted in {}: going back by {}",
                    next.method.name(),
                    from.name(),
                    to.name()
                ));
                if to == Phase::RemovingOldDs {
                    phases::ask_old_ds_removed(zone, &next, &mut effects);
                }
            }
            Err(why) => notes.push(format!(
                "{zone}: abort refused in {}: {why}",
                next.phase.name()
            )),
        }
    }

    let from = next.phase;
    let wait = match phases::adopt_keys(zone, &mut next, seen, &mut effects, &mut alerts) {
        Some(held) => held,
        None => phases::advance(zone, &mut next, seen, at, policy, &mut effects, &mut alerts),
    };
    if next.phase != from {
        notes.push(format!(
            "{zone}: {} roll{}: {} -> {}; waiting for {}",
            next.method.name(),
            if next.aborted { " (going back)" } else { "" },
            from.name(),
            next.phase.name(),
            wait.what
        ));
    }
    if next.phase != Phase::Done {
        phases::level_flags(&next, seen, &mut effects);
        phases::level_cds(zone, &mut next, seen, &mut effects);
    }
    let wait = if alerts.is_empty() {
        wait
    } else {
        RollWait {
            on: Party::Operator,
            ..wait
        }
    };
    RollDecision {
        next,
        effects,
        wait,
        alerts,
        notes,
    }
}

/// The registrar's request on entering `removing_old_ds`: the old SEP key's DS removed,
/// the new one's kept.
fn remove_old_ds(zone: &str, roll: &Roll) -> Option<DsRequest> {
    let remove = ds_of(zone, &roll.old_sep()?)?;
    let keep = ds_of(zone, &roll.new_sep()?)?;
    Some(DsRequest::RemoveDs { remove, keep })
}

fn learn_ttls(roll: &mut Roll, seen: &RollSeen) {
    for a in &seen.children {
        if let Ok(c) = &a.answer {
            roll.ttls.dnskey = roll.ttls.dnskey.max(c.dnskey_ttl);
        }
    }
    for a in &seen.parents {
        if let Ok(p) = &a.answer {
            roll.ttls.ds = roll.ttls.ds.max(p.ds_ttl.unwrap_or(0));
        }
    }
    if let Ok(ttl) = seen.zone_max_ttl {
        roll.ttls.zone = roll.ttls.zone.max(ttl);
    }
}
