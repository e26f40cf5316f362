//! A signed move (RFC 8901 model 2; DESIGN.md section 2 "Signed moves", rule 15): the
//! phases of moving an `active` zone from one account (the source, key `Ks`) to another
//! (the target, key `Kt`) without going insecure, decided from one look as a pure
//! function. The caller performs the effects; the level-triggered ones (the foreign
//! DNSKEYs each side publishes, the target's switch) are derived again at every look, so
//! an effect lost to a crash is asked for again.

mod phases;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use super::answers::Answer;
use super::answers::{ds_of, every, failing, has_ds};
use super::hold::Party;
use crate::dnssec::{Dnskey, Ds};
use crate::time::Timestamp;

/// The phases, in order (DESIGN.md section 2). The names are a contract (`status`, the
/// stored facts), derived once from the variants.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Phase {
    SigningAtTarget,
    ExchangingKeys,
    AwaitingBothDs,
    AwaitingDelegation,
    OldDelegationWait,
    AwaitingOldDsRemoval,
    RetiringOldKey,
    OldSigningOff,
    Done,
}

impl Phase {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Whether the NS change may have been made: from here on no step goes back, because
    /// a resolver may already be sent to the target.
    fn delegation_may_have_changed(self) -> bool {
        self >= Phase::AwaitingDelegation
    }
}

/// One of the two accounts of a move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Source,
    Target,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Source => "source",
            Side::Target => "target",
        }
    }
}

/// The largest TTLs seen (0: never seen): the holds count with them. Seeded from the
/// zone's facts when the move is declared (`Move::seeded`): a TTL lowered just before the
/// move still bounds what resolvers cached before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ttls {
    pub dnskey: u32,
    pub ds: u32,
    /// The parent's NS TTL for the source's delegation.
    pub parent_ns: u32,
    /// The source's apex NS TTL.
    pub apex_ns: u32,
}

/// A move in progress, as persisted (with the zone's facts: committed with each step).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// The zone, fully qualified (the DS owner).
    pub zone: String,
    /// The accounts (`[providers.NAME]`) the zone moves from and to.
    pub source: String,
    pub target: String,
    pub phase: Phase,
    /// The key the source signs with (`Ks`).
    pub source_key: Dnskey,
    /// The key the target signs with (`Kt`), once it signs.
    pub target_key: Option<Dnskey>,
    /// When the phase's condition was first confirmed at a look, every look since
    /// confirming it: its hold counts from here.
    pub confirmed_at: Option<Timestamp>,
    /// The last look that confirmed it: a longer gap restarts the hold (rule 2's rule).
    #[serde(default)]
    pub last_confirmed: Option<Timestamp>,
    /// `T_delegated`: the first look at which every parent address delegated to the
    /// target.
    pub delegated_at: Option<Timestamp>,
    /// The target key whose DS the registrar was asked to add (a roll makes that DS
    /// stale, and its removal is asked for).
    pub ds_asked_for: Option<Dnskey>,
    pub ttls: Ttls,
}

impl Move {
    /// A move declared now, of a zone signed with `source_key` at the source.
    pub fn new(zone: &str, source_key: Dnskey) -> Move {
        Move {
            zone: zone.to_string(),
            source: String::new(),
            target: String::new(),
            phase: Phase::SigningAtTarget,
            source_key,
            target_key: None,
            confirmed_at: None,
            last_confirmed: None,
            delegated_at: None,
            ds_asked_for: None,
            ttls: Ttls::default(),
        }
    }

    /// The TTLs known before the move (the zone's facts).
    pub fn seeded(mut self, ttls: Ttls) -> Move {
        self.ttls = ttls;
        self
    }

    /// The accounts it moves between.
    pub fn between(mut self, source: &str, target: &str) -> Move {
        self.source = source.to_string();
        self.target = target.to_string();
        self
    }

    /// The phase's condition, confirmed at this look and at every look since the first
    /// that confirmed it, then held for `ttl` and the margin. A look that cannot confirm
    /// it restarts the hold: it may have missed a set a resolver cached. `Err`: what the
    /// phase waits for (`unconfirmed`, or resolvers to forget what `cached` names).
    fn confirmed_and_held(
        &mut self,
        now: Timestamp,
        holds: Option<bool>,
        ttl: u32,
        policy: &MovePolicy,
        unconfirmed: impl FnOnce() -> Wait,
        cached: impl FnOnce() -> String,
    ) -> Result<(), Wait> {
        if holds != Some(true) {
            self.confirmed_at = None;
            self.last_confirmed = None;
            return Err(unconfirmed());
        }
        // Looks too far apart (the daemon down, every look failing) may have missed a
        // set that came and went: the hold counts from this look.
        if self
            .last_confirmed
            .is_some_and(|last| now.since(last) > policy.confirmation_gap)
        {
            self.confirmed_at = None;
        }
        self.last_confirmed = Some(now);
        let until = hold_until(*self.confirmed_at.get_or_insert(now), ttl, policy);
        if now < until {
            return Err(Wait::ttl(format!(
                "resolvers to forget {} (until {until})",
                cached()
            )));
        }
        Ok(())
    }

    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.confirmed_at = None;
        self.last_confirmed = None;
    }
}

/// What a child address answered for the apex DNSKEY set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSeen {
    pub keys: Vec<Dnskey>,
    /// The keys whose RRSIG over the set verified, within its validity window.
    pub signed_by: Vec<Dnskey>,
    pub ttl: u32,
}

/// How a parent address delegates the zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delegation {
    Source,
    Target,
    /// Neither account's name server set exactly (a mix, or a third party's).
    Other,
}

/// What a parent address answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentSeen {
    pub ds: Vec<Ds>,
    pub ds_ttl: Option<u32>,
    pub delegation: Delegation,
    pub ns_ttl: Option<u32>,
    /// The DS answer (present or absent) validated from the trust anchor (rule 10).
    pub validated: bool,
}

/// Everything one look at a moving zone saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveLook {
    pub at: Timestamp,
    /// The key each account signs with (`None`: DNSSEC off), or why it is not known.
    pub source_key: Result<Option<Dnskey>, String>,
    pub target_key: Result<Option<Dnskey>, String>,
    /// The other signer's keys each account's API publishes.
    pub source_foreign: Result<Vec<Dnskey>, String>,
    pub target_foreign: Result<Vec<Dnskey>, String>,
    pub source_children: Vec<Answer<ChildSeen>>,
    pub target_children: Vec<Answer<ChildSeen>>,
    pub parents: Vec<Answer<ParentSeen>>,
    /// The source's apex NS TTL as its servers answer it.
    pub source_apex_ns_ttl: Option<u32>,
    /// The accounts whose API says they publish CDS/CDNSKEY (a key's or the delete
    /// request), or why that is not known.
    pub cds_published: Result<Vec<Side>, String>,
}

/// What the registrar is asked to do (the log, the sinks, the hook).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    AddDs { add: Ds, keep: Ds },
    ChangeNs,
    RemoveDs { remove: Ds, keep: Ds },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveEffect {
    /// Switch DNSSEC on at the target (nothing delegates to it yet).
    TargetDnssecOn,
    /// No CDS/CDNSKEY at the account: a registry that scans would replace the DS set
    /// the move builds with the one the CDS asks for.
    CdsOff { side: Side },
    /// The other signer's keys an account publishes, made exactly `keys`.
    SetForeign { side: Side, keys: Vec<Dnskey> },
    /// Given once, on entering the phase that waits for it.
    Registrar(Instruction),
    /// DNSSEC off at the source, performed only if [`source_may_go_off`] says so right
    /// before the call, on a look of its own.
    SourceDnssecOff,
}

/// What holds a move and who must act for it to end: decided with the wait where it
/// is decided, never read back from its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub what: String,
    pub on: Party,
    /// The account whose wait it is (`status` names it): `None` where no one account's
    /// (both accounts', the registrar's, a TTL's).
    pub side: Option<Side>,
}

impl Wait {
    /// One account's wait.
    fn account(side: Side, what: impl Into<String>) -> Wait {
        Wait::accounts(Some(side), what)
    }

    /// The accounts' wait: one side's where only it holds the move, else both.
    fn accounts(side: Option<Side>, what: impl Into<String>) -> Wait {
        Wait {
            what: what.into(),
            on: Party::Provider,
            side,
        }
    }

    fn registrar(what: impl Into<String>) -> Wait {
        Wait {
            what: what.into(),
            on: Party::Registrar,
            side: None,
        }
    }

    fn ttl(what: impl Into<String>) -> Wait {
        Wait {
            what: what.into(),
            on: Party::Ttl,
            side: None,
        }
    }
}

/// The outcome of one look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveDecision {
    pub next: Move,
    pub effects: Vec<MoveEffect>,
    /// What holds the move now, naming the party.
    pub waiting: String,
    /// Who must act for the wait to end (`status`'s `on`): a person where something is
    /// alerted; otherwise the party the planner decided with the wait.
    pub on: Party,
    /// The account the wait is on, where it is one account's (`Wait::side`).
    pub side: Option<Side>,
    /// Something only a person can repair (a key changed behind the daemon's back, a DS
    /// removed too early): the move holds until it is.
    pub alerts: Vec<String>,
}

/// The timings a move uses (from `Policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MovePolicy {
    pub propagation_margin: Duration,
    /// The parent's NS TTL where it was never answered.
    pub assumed_ns_ttl: Duration,
    /// The DS TTL where it was never answered.
    pub assumed_ds_ttl: Duration,
    /// Looks further apart than this restart a hold (two `poll_waiting`, as rule 2).
    pub confirmation_gap: Duration,
}

fn same_keys(a: &[Dnskey], b: &[Dnskey]) -> bool {
    a.iter().all(|k| b.contains(k)) && b.iter().all(|k| a.contains(k))
}

/// The foreign keys each side is to publish in `phase` (level-triggered): the target's
/// key at the source until the source stops signing; the source's key at the target
/// until the old DS is gone and waited out.
pub fn foreign_wanted(mv: &Move, side: Side) -> Vec<Dnskey> {
    let wanted = match side {
        Side::Source => {
            (Phase::ExchangingKeys..=Phase::RetiringOldKey).contains(&mv.phase)
                && mv.target_key.is_some()
        }
        Side::Target => (Phase::ExchangingKeys..=Phase::AwaitingOldDsRemoval).contains(&mv.phase),
    };
    match (wanted, side) {
        (false, _) => Vec::new(),
        (true, Side::Source) => mv.target_key.iter().cloned().collect(),
        (true, Side::Target) => vec![mv.source_key.clone()],
    }
}

fn hold_until(from: Timestamp, ttl: u32, policy: &MovePolicy) -> Timestamp {
    from.plus_secs(ttl).plus(policy.propagation_margin)
}

fn secs(d: Duration) -> u32 {
    u32::try_from(d.as_secs()).unwrap_or(u32::MAX)
}

/// Rule 9's old NS TTL: the parent's or the source's apex NS TTL, the larger, each
/// assumed when never answered.
fn old_ns_ttl(mv: &Move, policy: &MovePolicy) -> u32 {
    let known = |ttl: u32| match ttl {
        0 => secs(policy.assumed_ns_ttl),
        ttl => ttl,
    };
    known(mv.ttls.parent_ns).max(known(mv.ttls.apex_ns))
}

/// How long `mv`'s phase holds by itself once its condition is confirmed (nothing for a
/// phase that waits on someone): what a phase that lasts much longer is late against.
pub fn phase_hold(mv: &Move, policy: &MovePolicy) -> Duration {
    let ttl = match mv.phase {
        Phase::ExchangingKeys | Phase::RetiringOldKey => mv.ttls.dnskey,
        Phase::AwaitingBothDs | Phase::AwaitingOldDsRemoval => ds_ttl(mv, policy),
        Phase::OldDelegationWait => old_ns_ttl(mv, policy),
        _ => return Duration::ZERO,
    };
    Duration::from_secs(u64::from(ttl)) + policy.propagation_margin
}

/// The DS TTL a DS hold waits out (assumed when never answered).
fn ds_ttl(mv: &Move, policy: &MovePolicy) -> u32 {
    match mv.ttls.ds {
        0 => secs(policy.assumed_ds_ttl),
        ttl => ttl,
    }
}

/// Rule 15 at the source's "DNSSEC off", asked on a fresh look right before the call:
/// every parent address delegates to the target, none publishes DS(`Ks`), on validated
/// evidence, and the old delegation's hold has passed. `Err` names what refuses it.
pub fn source_may_go_off(mv: &Move, look: &MoveLook, policy: &MovePolicy) -> Result<(), String> {
    let zone = mv.zone.as_str();
    let Some(delegated) = mv.delegated_at else {
        return Err("the delegation to the target was never confirmed".into());
    };
    let until = hold_until(delegated, old_ns_ttl(mv, policy), policy);
    if look.at < until {
        return Err(format!("the old delegation may be cached until {until}"));
    }
    let gone = |p: &ParentSeen| {
        p.validated && p.delegation == Delegation::Target && !has_ds(zone, &p.ds, &mv.source_key)
    };
    match every(&look.parents, gone) {
        Some(true) => Ok(()),
        _ => Err(format!(
            "not every parent address delegates to the target without DS({}), validated: {}",
            mv.source_key.key_tag(),
            failing(&look.parents, gone)
        )),
    }
}

/// One look at a moving zone: the next phase, the effects, what it waits for.
pub fn step(mv: &Move, look: &MoveLook, policy: &MovePolicy) -> MoveDecision {
    let mut next = mv.clone();
    let mut effects = Vec::new();
    let mut alerts = Vec::new();
    let zone = mv.zone.clone();
    learn_ttls(&mut next, look);

    // A key changed at either provider (a roll behind the daemon's back).
    if let Ok(Some(key)) = &look.source_key
        && *key != next.source_key
    {
        let roll = format!(
            "{zone}: the source now signs with key {} instead of {} (changed outside dnssec-warden) during the signed move",
            key.key_tag(),
            next.source_key.key_tag()
        );
        // Once the source is unreachable (its delegation waited out) its key no longer
        // matters; before, resolvers sent to it fail now (the parent has DS(Ks) only):
        // only a person can repair that, and the move holds until the key is back.
        if next.phase < Phase::AwaitingOldDsRemoval {
            alerts.push(format!(
                "{roll}: resolvers sent to the source fail validation (the parent publishes DS {}); the move holds until the source signs with key {} again",
                next.source_key.key_tag(),
                next.source_key.key_tag()
            ));
            return hold(
                next,
                effects,
                alerts,
                Wait::account(Side::Source, "the source's key to return"),
            );
        }
    }
    if let Ok(Some(key)) = &look.target_key
        && next.target_key.as_ref().is_some_and(|k| k != key)
    {
        let roll = format!(
            "{zone}: the target now signs with key {} (changed outside dnssec-warden) during the signed move",
            key.key_tag()
        );
        if next.phase.delegation_may_have_changed() {
            alerts.push(format!(
                "{roll}: resolvers sent to the target may fail; the move holds until it signs with key {} again",
                next.target_key.as_ref().map_or(0, Dnskey::key_tag)
            ));
            return hold(
                next,
                effects,
                alerts,
                Wait::account(Side::Target, "the target's key to return"),
            );
        }
        if key.algorithm != next.source_key.algorithm {
            alerts.push(format!(
                "{roll}, of algorithm {} where the source's is {}: a signed move needs one algorithm (RFC 6840 5.11); the move holds",
                key.algorithm, next.source_key.algorithm
            ));
            return hold(
                next,
                effects,
                alerts,
                Wait::account(
                    Side::Target,
                    "the target to sign with the source's algorithm",
                ),
            );
        }
        alerts.push(format!("{roll}: the keys are exchanged again"));
        // The old key's DS was asked for: it is stale now, and its removal is safe
        // (nothing signs with that key).
        if let Some(stale) = next.ds_asked_for.take()
            && let (Some(remove), Some(keep)) =
                (ds_of(&zone, &stale), ds_of(&zone, &next.source_key))
        {
            effects.push(MoveEffect::Registrar(Instruction::RemoveDs {
                remove,
                keep,
            }));
        }
        next.target_key = Some(key.clone());
        if next.phase > Phase::ExchangingKeys {
            next.enter(Phase::ExchangingKeys);
        }
    }

    let wait = phases::advance(&mut next, look, policy, &mut effects, &mut alerts);

    // The foreign keys, level-triggered, where the look read them.
    for (side, read) in [
        (Side::Source, &look.source_foreign),
        (Side::Target, &look.target_foreign),
    ] {
        let wanted = foreign_wanted(&next, side);
        if let Ok(now_published) = read
            && !same_keys(now_published, &wanted)
        {
            effects.push(MoveEffect::SetForeign { side, keys: wanted });
        }
    }
    // The CDS, level-triggered: none while the move builds the DS set by hand. Once the
    // target's DS was asked for, a CDS that reappears is alerted besides.
    if let Ok(sides) = &look.cds_published
        && next.phase != Phase::Done
    {
        for &side in sides {
            if next.phase > Phase::ExchangingKeys {
                alerts.push(format!(
                    "{zone}: the {} account publishes CDS/CDNSKEY during the signed move: a registry that scans may replace the DS set the move needs; it is withdrawn",
                    side.name()
                ));
            }
            effects.push(MoveEffect::CdsOff { side });
        }
    }
    hold(next, effects, alerts, wait)
}

/// The decision: what holds the move, on the party the wait names, or on a person
/// where something is alerted.
fn hold(next: Move, effects: Vec<MoveEffect>, alerts: Vec<String>, wait: Wait) -> MoveDecision {
    let on = if alerts.is_empty() {
        wait.on
    } else {
        Party::Operator
    };
    MoveDecision {
        next,
        effects,
        waiting: wait.what,
        on,
        side: wait.side,
        alerts,
    }
}

fn learn_ttls(mv: &mut Move, look: &MoveLook) {
    for a in look.source_children.iter().chain(&look.target_children) {
        if let Ok(s) = &a.answer {
            mv.ttls.dnskey = mv.ttls.dnskey.max(s.ttl);
        }
    }
    for a in &look.parents {
        if let Ok(p) = &a.answer {
            mv.ttls.ds = mv.ttls.ds.max(p.ds_ttl.unwrap_or(0));
            if p.delegation == Delegation::Source {
                mv.ttls.parent_ns = mv.ttls.parent_ns.max(p.ns_ttl.unwrap_or(0));
            }
        }
    }
    if let Some(ttl) = look.source_apex_ns_ttl {
        mv.ttls.apex_ns = mv.ttls.apex_ns.max(ttl);
    }
}
