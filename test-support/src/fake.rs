//! A scripted world for engine tests: a provider and a DNS that answer from a shared
//! model the test changes at will, on a manual clock. The provider fake also checks the
//! invariants at the moment DNSSEC is switched off, against the ground truth (not
//! against what the engine observed):
//! - no parent server publishes a DS (safety rule 1);
//! - the last DS disappeared at least its TTL ago, so no resolver can still hold it (the
//!   physical fact behind safety rule 2; the rule adds a margin on top, which covers a DS
//!   that flickers between two looks);
//! - no zone moving in is switched off (DESIGN.md "Moving in": the old DS is removed and
//!   waited out without any provider call).
//!
//! The NS change a daemon asks for is delivered as a notification, not to the fake: the
//! property test checks it with [`FakeWorld::ns_change_allowed`].
//!
//! The delegation (DESIGN.md section 2, safety rule 9): the provider lists its name
//! servers ([`PROVIDER_NS`]) as the zone's name servers in `zone`/`zone_flags`; every
//! parent server delegates the zone either to them or to an old provider's
//! ([`OLD_NS`]), whose servers serve an old key of their own. The child view is the
//! servers the parents delegate to. Ground truth for rule 9 is kept with the fake
//! clock's timestamps: when every parent last became delegated to the provider
//! ([`WorldState::delegated_at`]), the old delegation's NS TTLs, and every change of a
//! parent's delegation and DS set.

use std::sync::{Arc, Mutex, MutexGuard};

use dnssec_warden::dns::delegation::ns_set;
use dnssec_warden::dns::notify::{NotifyOutcome, NotifyReport};
use dnssec_warden::dns::{
    ChildKeys, ChildView, DnskeyAnswer, DsAnswer, Evidence, NsAnswer, ObserveError, Observer,
    ParentView, ServerAnswer, SignatureWindow, UnknownReason, ValidationProbe, ValidationVerdict,
};
use dnssec_warden::dns::{Published, Signals};
use dnssec_warden::dnssec::{CdsHalves, CdsPublication, DigestType, Dnskey, DnssecKey, Ds};
use dnssec_warden::lifecycle::{Clock, ManualClock, Timestamp};
use dnssec_warden::provider::{
    Attempts, DnssecSwitched, HostedZone, ListedZone, Provider, ProviderError,
};
use dnssec_warden_lab::keys::LabKey;

/// The TTL the fake child servers give their DNSKEY set.
pub const DNSKEY_TTL: u32 = 300;
/// The provider's name servers: its apex NS, and the delegation when it serves the zone.
pub const PROVIDER_NS: [&str; 2] = ["ns1.prov.test.", "ns2.prov.test."];
/// The NS TTL of the provider's delegation at the parent and of its apex NS.
pub const PROVIDER_NS_TTL: u32 = 3600;
/// The old provider's name servers (a zone moving in is still delegated to them).
pub const OLD_NS: [&str; 2] = ["ns1.old.test.", "ns2.old.test."];
/// The TTL the old provider's servers give their DNSKEY set.
pub const OLD_DNSKEY_TTL: u32 = 3600;

/// Whose name servers a parent server delegates the zone to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Delegation {
    /// The provider's ([`PROVIDER_NS`]).
    #[default]
    Provider,
    /// The old provider's ([`OLD_NS`]).
    Old,
}

/// One parent name server address.
#[derive(Debug, Clone, Default)]
pub struct ParentServer {
    /// The DS set it publishes, with its TTL.
    pub ds: Option<(Vec<Ds>, u32)>,
    /// Answers nothing useful (a timeout), for the DS and the delegation alike.
    pub silent: bool,
    /// Answers the DS question but times out on the NS question (the observer asks
    /// them separately): its delegation is unknown, its DS answer is not.
    pub ns_silent: bool,
    /// Who it delegates the zone to.
    pub delegation: Delegation,
    /// An off-path forger's unsigned "no DS" reaches us instead of its answer: a routine
    /// look reads "absent", a validated one fails (`bogus_proof`).
    pub forged_absent: bool,
}

/// One child name server address.
#[derive(Debug, Clone, Default)]
pub struct ChildServer {
    /// Still serves the zone unsigned although the provider signs (propagation lag).
    pub lagging: bool,
    pub silent: bool,
    /// Serves the provider's key, but its DNSKEY set carries no valid signature by it (a
    /// broken signer, signatures stripped): not "served" (safety rule 4).
    pub unsigned: bool,
}

#[derive(Debug)]
pub struct WorldState {
    pub zone: String,
    pub dnssec_on: bool,
    pub key: Option<Dnskey>,
    /// The next provider calls fail with a 503.
    pub provider_failures: u32,
    /// The provider has no such zone (404 on every zone call).
    pub zone_missing: bool,
    /// The next DNSSEC switches take effect but their answer is lost (a timeout).
    pub switches_lose_answer: u32,
    /// The next DNSSEC switches take effect and are answered 502, and the client's retry
    /// is then held by another zone's `Retry-After` (the client's verdict on such a call:
    /// [`Attempts`]).
    pub switches_sent_then_held: u32,
    /// Ground truth for rule 11: every switch that left the host (and took effect) whose
    /// answer was an error, as (time, enabled).
    pub sent_unanswered: Vec<(Timestamp, bool)>,
    /// Every `GET …/dnssec` takes this long (real time) before it answers.
    pub provider_delay: std::time::Duration,
    /// Every zone listing takes this long (real time) before it answers.
    pub listing_delay: std::time::Duration,
    /// `GET …/dnssec` calls answered, and zone listings answered.
    pub dnssec_gets: u32,
    pub listings: u32,
    pub parents: Vec<ParentServer>,
    pub children: Vec<ChildServer>,
    /// Every successful switch: (time, enabled).
    pub switches: Vec<(Timestamp, bool)>,
    /// Broken invariants, in words; a correct engine leaves this empty.
    pub violations: Vec<String>,
    /// The provider's API controls the CDS publication (PowerDNS's `PUBLISH-CDS` and
    /// `PUBLISH-CDNSKEY`), and what each half is set to.
    pub cds_control: bool,
    pub cds: CdsPublication,
    pub cdnskey: CdsPublication,
    /// Every setting of it that took effect, whole or its first half: (time, to).
    pub cds_sets: Vec<(Timestamp, CdsPublication)>,
    /// The next settings write their first half (the CDS) only, and answer a 502 (an
    /// answer lost between the two writes: the outcome is unknown to the caller).
    pub cds_half_applied: u32,
    /// Ground truth for rule 11: every setting left half applied so, (time, to).
    pub cds_halves_left: Vec<(Timestamp, CdsPublication)>,
    /// Successful reads of the CDS setting (the daemon looked at it).
    pub cds_reads: usize,
    /// The provider's servers publish the CDS its setting says (the key's, or the delete
    /// request), signed by the key; else their signals are not asked (the default).
    pub cds_served: bool,
    /// How the parent's NOTIFY target answers a NOTIFY(CDS).
    pub notify_answer: NotifyOutcome,
    /// Every NOTIFY(CDS) the daemon sent: (time, zone, address).
    pub notifies: Vec<(Timestamp, String, std::net::SocketAddr)>,
    /// DNSSEC was switched off behind the daemon's back since its own last switch: a
    /// decision taken before that may find the provider off already.
    pub off_behind_daemon: bool,
    /// Ground truth for rule 2: when the parent last stopped publishing any DS, and the
    /// largest TTL it was published with.
    pub ds_gone_at: Option<Timestamp>,
    pub largest_ds_ttl: u32,
    /// Whether a parent query has answered with a DS since it was last published: a DS
    /// published and withdrawn between two looks cannot be seen by any poller, and the
    /// margin, not the oracle, is what covers it.
    pub ds_seen: bool,
    /// Ground truth for rule 9's "the old DS is removed and its TTL waited out before
    /// the operator is told to change the NS": when the parent last stopped publishing
    /// any DS a look had seen (a DS never seen is no DS the move in can wait for).
    pub seen_ds_gone_at: Option<Timestamp>,
    /// Since when some parent server publishes a DS without a break.
    pub ds_published_since: Option<Timestamp>,
    /// A DS published this long counts whether or not a look saw it: a daemon keeping
    /// its polls would have (rule 2's `Policy::gone_confirmation_gap`).
    pub ds_counts_after: std::time::Duration,
    /// After this many more parent queries, the registrar re-publishes the DS on server 0
    /// (a DS reappearing between the engine's step and its provider call).
    pub ds_reappears_after: Option<u32>,
    /// What the validation probes say (none by default: the verdict is unknown).
    pub validation: Vec<ValidationProbe>,
    /// The expiration (Unix seconds) of the RRSIG the child servers give over the
    /// DNSKEY set; never by default.
    pub signature_expiration: u32,

    // ---- the delegation (safety rule 9) ----
    /// The provider's name servers, as its API lists them for the zone.
    pub provider_ns: Vec<String>,
    /// The provider's zone object lists its apex NS (else `apex_ns()` is unknown).
    pub provider_ns_listed: bool,
    /// The old provider's name servers.
    pub old_ns: Vec<String>,
    /// The old provider's servers, asked while some parent delegates to them.
    pub old_children: Vec<ChildServer>,
    /// The key the old provider signs with, and whether it signs.
    pub old_key: Dnskey,
    pub old_signed: bool,
    /// The parent's NS TTL for the old delegation, and the old servers' apex NS TTL.
    pub old_parent_ns_ttl: u32,
    pub old_apex_ns_ttl: u32,
    /// Ground truth for rule 9 (`T_delegated`): when every parent server last became
    /// delegated to the provider after an old delegation a poller could have seen.
    /// `None`: never delegated elsewhere as far as anyone could tell.
    pub delegated_at: Option<Timestamp>,
    /// Whether a parent query has answered with the old delegation since every parent
    /// last delegated to the provider (as `ds_seen`: a re-delegation there and back
    /// between two looks cannot be seen by any poller), at a time the provider's name
    /// servers could be known (an NS set is "elsewhere" only against the provider's).
    pub old_delegation_seen: bool,
    /// The provider's zone object has listed its name servers at least once (what a
    /// daemon needs to tell the provider's delegation from another).
    pub provider_ns_known: bool,
    /// The zone is moving in: it started delegated to the old provider and not every
    /// parent server has delegated it to the provider since. The daemon must never ask
    /// for "DNSSEC off" meanwhile.
    pub moving_in: bool,
    /// Every change of a parent server's delegation: (time, parent, new delegation).
    pub delegation_log: Vec<(Timestamp, usize, Delegation)>,
    /// Every change of a parent server's DS set: (time, parent, the set now).
    pub ds_log: Vec<(Timestamp, usize, Option<Vec<Ds>>)>,
}

impl WorldState {
    /// Some parent server that answers delegates to the old provider.
    fn old_delegation_answered(&self) -> bool {
        self.parents
            .iter()
            .any(|p| p.delegation == Delegation::Old && !p.silent && !p.ns_silent)
    }
}

#[derive(Clone)]
pub struct FakeWorld {
    state: Arc<Mutex<WorldState>>,
    pub clock: ManualClock,
}

fn generate_key() -> Dnskey {
    LabKey::generate(257).expect("a lab key").dnskey().into()
}

impl FakeWorld {
    /// Delegated to the provider at every parent server, DNSSEC off, no DS.
    pub fn new(zone: &str, parents: usize, children: usize, clock: ManualClock) -> Self {
        Self {
            state: Arc::new(Mutex::new(WorldState {
                zone: zone.to_string(),
                dnssec_on: false,
                key: None,
                provider_failures: 0,
                zone_missing: false,
                switches_lose_answer: 0,
                switches_sent_then_held: 0,
                sent_unanswered: Vec::new(),
                provider_delay: std::time::Duration::ZERO,
                listing_delay: std::time::Duration::ZERO,
                dnssec_gets: 0,
                listings: 0,
                parents: vec![ParentServer::default(); parents],
                children: vec![ChildServer::default(); children],
                switches: Vec::new(),
                violations: Vec::new(),
                cds_control: false,
                cds: CdsPublication::Nothing,
                cdnskey: CdsPublication::Nothing,
                cds_sets: Vec::new(),
                cds_half_applied: 0,
                cds_halves_left: Vec::new(),
                cds_reads: 0,
                cds_served: false,
                notify_answer: NotifyOutcome::Acknowledged,
                notifies: Vec::new(),
                off_behind_daemon: false,
                ds_gone_at: None,
                largest_ds_ttl: 0,
                ds_seen: false,
                seen_ds_gone_at: None,
                ds_published_since: None,
                ds_counts_after: dnssec_warden::lifecycle::Policy::default()
                    .gone_confirmation_gap(),
                ds_reappears_after: None,
                validation: Vec::new(),
                signature_expiration: u32::MAX,
                provider_ns: PROVIDER_NS.iter().map(|s| s.to_string()).collect(),
                provider_ns_listed: true,
                old_ns: OLD_NS.iter().map(|s| s.to_string()).collect(),
                old_children: vec![ChildServer::default(); 2],
                old_key: generate_key(),
                old_signed: true,
                old_parent_ns_ttl: 86_400,
                old_apex_ns_ttl: 3600,
                delegated_at: None,
                old_delegation_seen: false,
                provider_ns_known: false,
                moving_in: false,
                delegation_log: Vec::new(),
                ds_log: Vec::new(),
            })),
            clock,
        }
    }

    /// A zone moving in: at the provider (DNSSEC off), delegated to the old provider at
    /// every parent server, whose servers sign with the old key; with `old_ds_ttl`, the
    /// old provider's DS at every parent server with that TTL.
    pub fn moving_in(
        zone: &str,
        parents: usize,
        children: usize,
        clock: ManualClock,
        old_ds_ttl: Option<u32>,
    ) -> Self {
        let world = Self::new(zone, parents, children, clock);
        {
            let mut s = world.lock();
            s.moving_in = true;
            for p in &mut s.parents {
                p.delegation = Delegation::Old;
            }
        }
        if let Some(ttl) = old_ds_ttl {
            for i in 0..parents {
                world.publish_old_ds(i, ttl);
            }
        }
        world
    }

    pub fn lock(&self) -> MutexGuard<'_, WorldState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The registrar publishes the provider's current DS on parent server `i`.
    pub fn publish_ds(&self, i: usize, ttl: u32) {
        let mut s = self.lock();
        let Some(key) = s.key.clone() else { return };
        let zone = s.zone.clone();
        if let (Some(server), Ok(ds)) = (s.parents.get_mut(i), key.to_ds(&zone, DigestType::Sha256))
        {
            server.ds = Some((vec![ds], ttl));
        }
        s.largest_ds_ttl = s.largest_ds_ttl.max(ttl);
        drop(s);
        self.log_ds(i);
    }

    /// The registry's scan (RFC 7344, RFC 8078), as one that scans acts: the CDS of the
    /// provider's key at every child server (signed, reachable, not lagging) puts its DS
    /// at every parent server; the delete request there removes every DS. Anything else
    /// (no CDS, a child server it cannot ask) changes nothing. A setting half applied
    /// publishes its one half, on which the registry acts (RFC 7344 takes a CDS or a
    /// CDNSKEY); halves that contradict each other it ignores. True: the child served a
    /// signal the registry acts on.
    pub fn registry_scan(&self, ttl: u32) -> bool {
        let (cds, served, parents) = {
            let s = self.lock();
            let served = s.dnssec_on
                && s.key.is_some()
                && s.children
                    .iter()
                    .all(|c| !c.silent && !c.lagging && !c.unsigned);
            let signal = match (s.cds, s.cdnskey) {
                (a, b) if a == b => a,
                (CdsPublication::Nothing, one) | (one, CdsPublication::Nothing) => one,
                _ => CdsPublication::Nothing,
            };
            (signal, served, s.parents.len())
        };
        if !served || cds == CdsPublication::Nothing {
            return false;
        }
        for i in 0..parents {
            match cds {
                CdsPublication::Key => self.publish_ds(i, ttl),
                _ => self.withdraw_ds(i),
            }
        }
        true
    }

    /// A DS for a key nobody serves (a typo at the registrar).
    pub fn publish_wrong_ds(&self, i: usize, ttl: u32) {
        // Resolvers may cache what a server published, whether or not we saw it.
        let mut s = self.lock();
        let zone = s.zone.clone();
        if let (Some(server), Ok(key)) = (s.parents.get_mut(i), LabKey::generate(257))
            && let Ok(ds) = Dnskey::from(key.dnskey()).to_ds(&zone, DigestType::Sha256)
        {
            server.ds = Some((vec![ds], ttl));
        }
        s.largest_ds_ttl = s.largest_ds_ttl.max(ttl);
        drop(s);
        self.log_ds(i);
    }

    pub fn withdraw_ds(&self, i: usize) {
        self.change_ds(i, |_| None);
    }

    /// Changes parent server `i`'s DS set, keeping the ground truth: the log, and when
    /// the last DS anywhere disappeared (once a poller could have seen one).
    fn change_ds(
        &self,
        i: usize,
        f: impl FnOnce(Option<(Vec<Ds>, u32)>) -> Option<(Vec<Ds>, u32)>,
    ) {
        let now = self.clock.now();
        let mut s = self.lock();
        let had = s.parents.iter().any(|p| p.ds.is_some());
        let Some(server) = s.parents.get_mut(i) else {
            return;
        };
        server.ds = f(server.ds.take()).filter(|(set, _)| !set.is_empty());
        if let Some((_, ttl)) = &server.ds {
            let ttl = *ttl;
            s.largest_ds_ttl = s.largest_ds_ttl.max(ttl);
        }
        let long_published = s
            .ds_published_since
            .is_some_and(|since| now >= since.plus(s.ds_counts_after));
        if had && s.parents.iter().all(|p| p.ds.is_none()) && (s.ds_seen || long_published) {
            s.ds_gone_at = Some(now);
            if s.ds_seen {
                s.seen_ds_gone_at = Some(now);
            }
            s.ds_seen = false;
        }
        drop(s);
        self.log_ds(i);
    }

    /// Every DS change passes here: the log of server `i`'s set, and since when some
    /// server publishes a DS.
    fn log_ds(&self, i: usize) {
        let now = self.clock.now();
        let mut s = self.lock();
        if !s.parents.iter().any(|p| p.ds.is_some()) {
            s.ds_published_since = None;
        } else if s.ds_published_since.is_none() {
            s.ds_published_since = Some(now);
        }
        let Some(set) = s
            .parents
            .get(i)
            .map(|p| p.ds.as_ref().map(|(ds, _)| ds.clone()))
        else {
            return;
        };
        s.ds_log.push((now, i, set));
    }

    /// The old provider's DS (for its key, SHA-256).
    pub fn old_ds(&self) -> Ds {
        let s = self.lock();
        s.old_key
            .to_ds(&s.zone, DigestType::Sha256)
            .expect("the old key's DS")
    }

    /// The registrar publishes the old provider's DS on parent server `i`, beside what
    /// it publishes already.
    pub fn publish_old_ds(&self, i: usize, ttl: u32) {
        let old = self.old_ds();
        self.add_ds(i, old, ttl);
    }

    /// The registrar removes the old provider's DS from parent server `i` (the rest of
    /// its DS set stays).
    pub fn remove_old_ds(&self, i: usize) {
        let old = self.old_ds();
        self.change_ds(i, |set| {
            set.map(|(ds, ttl)| (ds.into_iter().filter(|d| *d != old).collect(), ttl))
        });
    }

    /// The old provider's DS removed from every parent server.
    pub fn remove_old_ds_everywhere(&self) {
        let n = self.lock().parents.len();
        for i in 0..n {
            self.remove_old_ds(i);
        }
    }

    /// A DS for a key nobody serves added to parent server `i`'s DS set (a stale record
    /// beside the good one); returns it.
    pub fn publish_stale_ds(&self, i: usize, ttl: u32) -> Ds {
        let zone = self.lock().zone.clone();
        let stale = generate_key()
            .to_ds(&zone, DigestType::Sha256)
            .expect("a DS");
        self.add_ds(i, stale.clone(), ttl);
        stale
    }

    /// `ds` added to parent server `i`'s DS set (the set's TTL becomes the larger one).
    pub fn add_ds(&self, i: usize, ds: Ds, ttl: u32) {
        self.change_ds(i, |set| {
            let (mut list, old_ttl) = set.unwrap_or((Vec::new(), ttl));
            if !list.contains(&ds) {
                list.push(ds);
            }
            Some((list, old_ttl.max(ttl)))
        });
    }

    /// The registrar changes parent server `i`'s delegation. Keeps the ground truth:
    /// the log, whether the zone is still moving in, and `T_delegated` (when every
    /// parent server last became delegated to the provider after an old delegation
    /// that could have been seen).
    pub fn delegate(&self, i: usize, to: Delegation) {
        let now = self.clock.now();
        let mut s = self.lock();
        let Some(server) = s.parents.get_mut(i) else {
            return;
        };
        if server.delegation == to {
            return;
        }
        server.delegation = to;
        s.delegation_log.push((now, i, to));
        if s.parents
            .iter()
            .all(|p| p.delegation == Delegation::Provider)
        {
            s.moving_in = false;
            if s.old_delegation_seen {
                s.delegated_at = Some(now);
                s.old_delegation_seen = false;
            }
        }
    }

    /// Every parent server delegates to `to`.
    pub fn delegate_all(&self, to: Delegation) {
        let n = self.lock().parents.len();
        for i in 0..n {
            self.delegate(i, to);
        }
    }

    /// Ground truth: every parent server delegates to exactly the provider's servers.
    pub fn delegated_to_provider(&self) -> bool {
        self.lock()
            .parents
            .iter()
            .all(|p| p.delegation == Delegation::Provider)
    }

    /// Ground truth: the old delegation's NS TTL (the larger of the parent's and the old
    /// servers' apex NS TTL).
    pub fn old_ns_ttl(&self) -> u32 {
        let s = self.lock();
        s.old_parent_ns_ttl.max(s.old_apex_ns_ttl)
    }

    /// Safety rule 9 against the ground truth: whether a DS for the provider's key may be
    /// announced (or shown "to enter") now, with `margin` the propagation margin. Err
    /// says why not: some parent server delegates elsewhere, or the old delegation may
    /// still be cached (before `T_delegated + old NS TTL + margin`).
    pub fn ds_announce_allowed(&self, margin: std::time::Duration) -> Result<(), String> {
        let now = self.clock.now();
        let s = self.lock();
        if let Some(i) = s
            .parents
            .iter()
            .position(|p| p.delegation != Delegation::Provider)
        {
            return Err(format!(
                "at {now} parent server {i} delegates the zone to the old provider"
            ));
        }
        if let Some(at) = s.delegated_at {
            let ttl = s.old_parent_ns_ttl.max(s.old_apex_ns_ttl);
            let allowed = at.plus_secs(ttl).plus(margin);
            if now < allowed {
                return Err(format!(
                    "at {now}, before {allowed} (delegated to the provider everywhere at {at} + old NS TTL {ttl} s + margin): resolvers may still follow the old delegation"
                ));
            }
        }
        Ok(())
    }

    /// Safety rule 9 against the ground truth: whether the daemon may ask for the NS
    /// change now. No parent server publishes a DS, and the last DS a look saw is gone
    /// for at least its TTL: a resolver still holding it would follow the new delegation
    /// to servers that do not serve its key. Err says why not.
    pub fn ns_change_allowed(&self) -> Result<(), String> {
        let now = self.clock.now();
        let s = self.lock();
        if let Some(i) = s.parents.iter().position(|p| p.ds.is_some()) {
            return Err(format!("at {now} parent server {i} publishes a DS"));
        }
        if let Some(gone) = s.seen_ds_gone_at {
            let allowed = gone.plus_secs(s.largest_ds_ttl);
            if now < allowed {
                return Err(format!(
                    "at {now}, before {allowed} (a DS seen at the parent gone at {gone} + DS TTL {} s): resolvers may still hold it",
                    s.largest_ds_ttl
                ));
            }
        }
        Ok(())
    }

    /// Someone switches DNSSEC at the provider behind the daemon's back (no invariant is
    /// checked: it is not the daemon's call). On gives a new key if there is none.
    pub fn flip_dnssec(&self, on: bool) {
        let mut s = self.lock();
        if on && s.key.is_none() {
            s.key = LabKey::generate(257).ok().map(|k| k.dnskey().into());
        }
        if !on {
            s.key = None;
            s.off_behind_daemon = true;
        }
        s.dnssec_on = on;
    }

    /// The provider rolls to a new key while signing (no-op when off).
    pub fn rekey(&self) {
        let mut s = self.lock();
        if s.dnssec_on {
            s.key = LabKey::generate(257).ok().map(|k| k.dnskey().into());
        }
    }

    /// Ground truth for safety rule 8: the DS line a correct daemon may show "to enter"
    /// now (the provider signs with that key and every child server answers with it).
    pub fn enterable_ds(&self) -> Option<String> {
        let s = self.lock();
        let key = s.key.as_ref().filter(|_| s.dnssec_on)?;
        // Every child address: with an old delegation anywhere, the old servers too,
        // which never serve the provider's key.
        let served = s
            .children
            .iter()
            .all(|c| !c.lagging && !c.silent && !c.unsigned)
            && s.parents
                .iter()
                .all(|p| p.delegation == Delegation::Provider);
        let line = provider_key(&s.zone, key).ok()?.ds_line().to_string();
        served.then_some(line)
    }

    /// Ground truth for safety rule 4 when an announcement is delivered (perhaps after a
    /// crash, decided on an earlier look): the provider signs, and every child server
    /// that answers serves its key in a set signed by it. A silent server gives resolvers
    /// nothing to fail on; one without the key, or with a key it does not sign, does.
    pub fn key_served_signed(&self) -> bool {
        let s = self.lock();
        s.dnssec_on
            && s.key.is_some()
            && s.children
                .iter()
                .all(|c| c.silent || (!c.lagging && !c.unsigned))
    }

    pub fn any_ds(&self) -> bool {
        self.lock().parents.iter().any(|p| p.ds.is_some())
    }

    pub fn dnssec_on(&self) -> bool {
        self.lock().dnssec_on
    }

    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// The NOTIFY(CDS)s sent so far: (time, zone, address).
    pub fn notifies(&self) -> Vec<(Timestamp, String, std::net::SocketAddr)> {
        self.lock().notifies.clone()
    }

    pub fn switches(&self) -> Vec<(Timestamp, bool)> {
        self.lock().switches.clone()
    }
}

fn provider_key(zone: &str, key: &Dnskey) -> Result<DnssecKey, ProviderError> {
    Ok(DnssecKey {
        zone: zone.to_string(),
        dnskey: key.clone(),
        ds: key
            .to_ds(zone, DigestType::Sha256)
            .map_err(|e| ProviderError::Invalid(e.to_string()))?,
        ds_ttl: 3600,
        uuid: None,
    })
}

impl FakeWorld {
    /// The provider's name servers for the zone, once it lists them.
    fn apex_ns(&self) -> Option<Vec<String>> {
        let s = self.lock();
        s.provider_ns_listed
            .then(|| dnssec_warden::dns::delegation::ns_set(&s.provider_ns))
    }

    /// Which servers the child view asks: those the parent servers that answer delegate
    /// to (all of them when none answers), as (provider's, old provider's).
    fn delegated_servers(s: &WorldState) -> (bool, bool) {
        let answering: Vec<&ParentServer> = s
            .parents
            .iter()
            .filter(|p| !p.silent && !p.ns_silent)
            .collect();
        let asked = if answering.is_empty() {
            s.parents.iter().collect()
        } else {
            answering
        };
        let to = |d: Delegation| asked.iter().any(|p| p.delegation == d);
        if s.parents.is_empty() {
            return (true, false);
        }
        (to(Delegation::Provider), to(Delegation::Old))
    }

    fn provider_fault(&self) -> Result<(), ProviderError> {
        let mut s = self.lock();
        if s.zone_missing {
            return Err(ProviderError::NotFound("zone is not found".into()));
        }
        if s.provider_failures > 0 {
            s.provider_failures -= 1;
            return Err(ProviderError::Server {
                status: 503,
                message: "injected".into(),
            });
        }
        Ok(())
    }
}

impl Provider for FakeWorld {
    type Account = Self;
    fn account_named(&self, _name: &str) -> Option<&Self> {
        None
    }
    async fn zone(&self, zone: &str) -> Result<HostedZone, ProviderError> {
        self.provider_fault()?;
        {
            let mut s = self.lock();
            if s.provider_ns_listed {
                s.provider_ns_known = true;
                if s.old_delegation_answered() {
                    s.old_delegation_seen = true;
                }
            }
        }
        Ok(HostedZone {
            name: zone.trim_end_matches('.').to_string(),
            dnssec_enabled: Some(self.dnssec_on()),
            name_servers: self.apex_ns(),
        })
    }

    async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
        let delay = self.lock().listing_delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.lock().listings += 1;
        let zone = self.lock().zone.clone();
        let hosted = self.zone(&zone).await?;
        Ok(vec![ListedZone {
            name: hosted.name,
            dnssec_enabled: hosted.dnssec_enabled,
        }])
    }

    // One attempt, never repeated: the fake has no retries to fence.
    async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        _may_send: dnssec_warden::provider::SendPermit<'_>,
    ) -> Result<DnssecSwitched, ProviderError> {
        self.provider_fault()?;
        let now = self.clock.now();
        let mut s = self.lock();
        if !enabled && s.moving_in {
            let v = format!(
                "DNSSEC switch-off asked at {now} while the zone moves in (a parent server still delegates to the old provider)"
            );
            s.violations.push(v);
        }
        if !enabled && s.dnssec_on {
            if let Some(i) = s.parents.iter().position(|p| p.ds.is_some()) {
                let v =
                    format!("DNSSEC switched off at {now} while parent server {i} publishes a DS");
                s.violations.push(v);
            }
            if let Some(gone) = s.ds_gone_at {
                // A resolver may validate the DNSKEY with the DS at the DS's last moment,
                // then trust the key for the DNSKEY TTL.
                let allowed = gone.plus_secs(s.largest_ds_ttl + DNSKEY_TTL);
                if now < allowed {
                    let v = format!(
                        "DNSSEC switched off at {now}, before {allowed} (DS gone at {gone} + DS TTL + DNSKEY TTL): resolvers may still hold it"
                    );
                    s.violations.push(v);
                }
            }
        }
        if !enabled && !s.dnssec_on && !s.off_behind_daemon {
            // Off since the daemon's own last switch (or since the start): no decision
            // needs this call, and the history would say DNSSEC was switched off.
            let v = format!("DNSSEC switched off at {now} though it was never switched on");
            s.violations.push(v);
        }
        if enabled && s.key.is_none() {
            s.key = LabKey::generate(257).ok().map(|k| k.dnskey().into());
        }
        if !enabled {
            s.key = None;
        }
        s.dnssec_on = enabled;
        s.off_behind_daemon = false;
        s.switches.push((now, enabled));
        if s.switches_lose_answer > 0 {
            s.switches_lose_answer -= 1;
            s.sent_unanswered.push((now, enabled));
            return Err(ProviderError::Transport(
                "operation timed out (the answer was lost)".into(),
            ));
        }
        if s.switches_sent_then_held > 0 {
            s.switches_sent_then_held -= 1;
            s.sent_unanswered.push((now, enabled));
            let mut attempts = Attempts::default();
            attempts.failed(&ProviderError::Server {
                status: 502,
                message: "bad gateway (the answer was lost)".into(),
            });
            let until = std::time::UNIX_EPOCH
                + std::time::Duration::from_millis(u64::try_from(now.0).unwrap_or(0) + 60_000);
            return Err(attempts.outcome(ProviderError::RateLimitedUntil { until }));
        }
        let key = match (&s.key, enabled) {
            (Some(k), true) => Some(provider_key(zone, k)?),
            _ => None,
        };
        Ok(DnssecSwitched { message: None, key })
    }

    async fn dnssec_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        self.lock().dnssec_gets += 1;
        let delay = self.lock().provider_delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        self.provider_fault()?;
        let s = self.lock();
        match (&s.key, s.dnssec_on) {
            (Some(key), true) => provider_key(zone, key),
            _ => Err(ProviderError::DnssecDisabled),
        }
    }

    async fn largest_ttl(&self, _zone: &str) -> Result<Option<u32>, ProviderError> {
        self.provider_fault()?;
        Ok(Some(0))
    }

    async fn cds_publication(&self, _zone: &str) -> Result<Option<CdsHalves>, ProviderError> {
        if !self.lock().cds_control {
            return Ok(None);
        }
        self.provider_fault()?;
        let mut w = self.lock();
        w.cds_reads += 1;
        Ok(Some(CdsHalves {
            cds: w.cds,
            cdnskey: w.cdnskey,
        }))
    }

    // Checked against the ground truth by the property test at every step (rule 14);
    // here only that a setting is sent where the API controls it.
    async fn set_cds_publication(
        &self,
        _zone: &str,
        to: CdsPublication,
        _may_send: dnssec_warden::provider::SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        self.provider_fault()?;
        let now = self.clock.now();
        let mut s = self.lock();
        if !s.cds_control {
            let v = format!("CDS publication set at {now} at a provider that cannot");
            s.violations.push(v);
        }
        s.cds = to;
        s.cds_sets.push((now, to));
        if s.cds_half_applied > 0 {
            s.cds_half_applied -= 1;
            s.cds_halves_left.push((now, to));
            return Err(ProviderError::Server {
                status: 502,
                message: "bad gateway (the answer to the first write was lost)".into(),
            });
        }
        s.cdnskey = to;
        Ok(())
    }
}

impl Observer for FakeWorld {
    async fn parent(&self, zone: &str) -> Result<ParentView, ObserveError> {
        let countdown = self.lock().ds_reappears_after;
        match countdown {
            Some(0) => {
                self.lock().ds_reappears_after = None;
                self.publish_ds(0, 3600);
            }
            Some(n) => self.lock().ds_reappears_after = Some(n - 1),
            None => {}
        }
        let mut s = self.lock();
        if s.parents.iter().any(|p| p.ds.is_some() && !p.silent) {
            s.ds_seen = true;
        }
        if s.provider_ns_known && s.old_delegation_answered() {
            s.old_delegation_seen = true;
        }
        let server = |i: usize| format!("ns{}.test.", i + 1);
        let addr = |i: usize| std::net::IpAddr::from([127, 0, 0, u8::try_from(i + 1).unwrap_or(1)]);
        Ok(ParentView {
            zone: zone.to_string(),
            parent: "test.".into(),
            delegations: s
                .parents
                .iter()
                .enumerate()
                .map(|(i, p)| ServerAnswer {
                    server: server(i).into(),
                    addr: addr(i),
                    answer: match (p.delegation, p.silent || p.ns_silent) {
                        (_, true) => NsAnswer::Unknown(UnknownReason::Timeout),
                        (Delegation::Provider, false) => NsAnswer::Servers {
                            hosts: ns_set(&s.provider_ns).into(),
                            ttl: PROVIDER_NS_TTL,
                        },
                        (Delegation::Old, false) => NsAnswer::Servers {
                            hosts: ns_set(&s.old_ns).into(),
                            ttl: s.old_parent_ns_ttl,
                        },
                    },
                })
                .collect(),
            answers: s
                .parents
                .iter()
                .enumerate()
                .map(|(i, p)| ServerAnswer {
                    server: server(i).into(),
                    addr: addr(i),
                    answer: match (&p.ds, p.silent) {
                        (_, true) => DsAnswer::Unknown(UnknownReason::Timeout),
                        _ if p.forged_absent => DsAnswer::Absent,
                        (Some((ds, ttl)), false) => DsAnswer::Present {
                            ds: ds.clone(),
                            ttl: *ttl,
                        },
                        (None, false) => DsAnswer::Absent,
                    },
                })
                .collect(),
            evidence: Evidence::Unchecked,
        })
    }

    /// The fake's answers are its ground truth: validated, but a forged one fails.
    async fn parent_validated(&self, zone: &str) -> Result<ParentView, ObserveError> {
        let mut view = self.parent(zone).await?;
        view.evidence = Evidence::Validated;
        let forged: Vec<bool> = self
            .lock()
            .parents
            .iter()
            .map(|p| p.forged_absent)
            .collect();
        for (answer, forged) in view.answers.iter_mut().zip(forged) {
            if forged {
                answer.answer = DsAnswer::Unknown(UnknownReason::BogusProof(
                    "NODATA without a signed NSEC or NSEC3 denial".into(),
                ));
            }
        }
        Ok(view)
    }

    /// The fake world has one provider's servers and the old ones, both reached only by
    /// delegation: servers asked by name are not modelled, so nothing is made up.
    async fn child_at(
        &self,
        zone: &str,
        _name_servers: &[String],
    ) -> Result<ChildView, ObserveError> {
        Err(ObserveError {
            zone: zone.to_string(),
            reason: "the fake world does not model name servers asked by name".into(),
        })
    }

    async fn child(&self, zone: &str) -> Result<ChildView, ObserveError> {
        let s = self.lock();
        let (provider, old) = Self::delegated_servers(&s);
        // What the provider's servers publish as CDS, where the test has them publish it.
        let signals = |key: &Dnskey| {
            if !s.cds_served {
                return Signals::NotAsked;
            }
            let cds = match s.cds {
                CdsPublication::Key => key.to_ds(zone, DigestType::Sha256).into_iter().collect(),
                CdsPublication::Delete => vec![Ds {
                    key_tag: 0,
                    algorithm: 0,
                    digest_type: 0,
                    digest: vec![0],
                }],
                CdsPublication::Nothing => Vec::new(),
            };
            Signals::Answered(Published {
                cds,
                cdnskey: Vec::new(),
                signers: vec![0],
            })
        };
        let keys = |key: &Dnskey, ttl: u32, signing: bool| {
            DnskeyAnswer::Keys(ChildKeys {
                keys: vec![key.clone()],
                ttl,
                signed: signing,
                self_signers: if signing { vec![0] } else { vec![] },
                signatures: if signing {
                    vec![SignatureWindow {
                        key_tag: key.key_tag(),
                        inception: 0,
                        expiration: s.signature_expiration,
                    }]
                } else {
                    vec![]
                },
                signals: Default::default(),
            })
        };
        let name = |list: &[String], i: usize| {
            list.get(i % list.len().max(1))
                .cloned()
                .unwrap_or_else(|| format!("ns{}.{zone}", i + 1))
        };
        // (server, address, DNSKEY answer, apex NS answer) for every address asked.
        let mut asked: Vec<(String, std::net::IpAddr, DnskeyAnswer, NsAnswer)> = Vec::new();
        if provider {
            for (i, c) in s.children.iter().enumerate() {
                let answer = match (&s.key, s.dnssec_on && !c.lagging, c.silent) {
                    (_, _, true) => DnskeyAnswer::Unknown(UnknownReason::Timeout),
                    (Some(key), true, false) => {
                        let mut answer = keys(key, DNSKEY_TTL, !c.unsigned);
                        if let DnskeyAnswer::Keys(k) = &mut answer {
                            k.signals = signals(key);
                        }
                        answer
                    }
                    _ => DnskeyAnswer::Absent,
                };
                let ns = if c.silent {
                    NsAnswer::Unknown(UnknownReason::Timeout)
                } else {
                    NsAnswer::Servers {
                        hosts: ns_set(&s.provider_ns).into(),
                        ttl: PROVIDER_NS_TTL,
                    }
                };
                asked.push((
                    name(&s.provider_ns, i),
                    std::net::IpAddr::from([127, 0, 1, u8::try_from(i + 1).unwrap_or(1)]),
                    answer,
                    ns,
                ));
            }
        }
        if old {
            for (i, c) in s.old_children.iter().enumerate() {
                let (answer, ns) = if c.silent {
                    (
                        DnskeyAnswer::Unknown(UnknownReason::Timeout),
                        NsAnswer::Unknown(UnknownReason::Timeout),
                    )
                } else {
                    (
                        if s.old_signed {
                            keys(&s.old_key, OLD_DNSKEY_TTL, true)
                        } else {
                            DnskeyAnswer::Absent
                        },
                        NsAnswer::Servers {
                            hosts: ns_set(&s.old_ns).into(),
                            ttl: s.old_apex_ns_ttl,
                        },
                    )
                };
                asked.push((
                    name(&s.old_ns, i),
                    std::net::IpAddr::from([127, 0, 2, u8::try_from(i + 1).unwrap_or(1)]),
                    answer,
                    ns,
                ));
            }
        }
        Ok(ChildView {
            zone: zone.to_string(),
            apex_ns: asked
                .iter()
                .map(|(server, addr, _, ns)| ServerAnswer {
                    server: server.as_str().into(),
                    addr: *addr,
                    answer: ns.clone(),
                })
                .collect(),
            answers: asked
                .into_iter()
                .map(|(server, addr, answer, _)| ServerAnswer {
                    server: server.into(),
                    addr,
                    answer,
                })
                .collect(),
        })
    }

    /// Records the NOTIFY(CDS) and answers as the test set (`notify_answer`).
    async fn notify_cds(&self, zone: &str, to: std::net::SocketAddr) -> NotifyReport {
        let mut s = self.lock();
        let now = self.clock.now();
        s.notifies.push((now, zone.to_string(), to));
        NotifyReport {
            outcome: s.notify_answer.clone(),
            attempts: 1,
            ignored: 0,
        }
    }

    /// The probes set by a test; else the ground truth: `secure` once every parent
    /// server publishes a DS for the key every child server serves, signed by it (the
    /// chain a validator would build), unknown otherwise.
    async fn validation(&self, _zone: &str) -> Vec<ValidationProbe> {
        let s = self.lock();
        if !s.validation.is_empty() {
            return s.validation.clone();
        }
        let chain = s.key.as_ref().filter(|_| s.dnssec_on).is_some_and(|key| {
            s.parents.iter().all(|p| {
                !p.silent
                    && p.delegation == Delegation::Provider
                    && p.ds
                        .as_ref()
                        .is_some_and(|(ds, _)| ds.iter().any(|d| key.matches_ds(&s.zone, d)))
            }) && s
                .children
                .iter()
                .all(|c| !c.silent && !c.lagging && !c.unsigned)
        });
        if chain {
            vec![ValidationProbe {
                source: "validator".into(),
                verdict: ValidationVerdict::Secure,
                detail: "the fake world's chain".into(),
            }]
        } else {
            vec![]
        }
    }
}
