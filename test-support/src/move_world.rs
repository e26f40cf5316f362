//! A scripted world of a signed move (DESIGN.md section 2 "Signed moves", rule 15) for
//! engine tests: one zone held by two provider accounts, `a` (the source) and `b` (the
//! target), each with its own signing key, foreign keys, apex NS names and child
//! servers; parent servers publishing a DS set and a delegation; a registrar the test
//! drives. Everything answers from one shared model on a manual clock.
//!
//! Nothing is served the moment it changes: an account's API call makes a new version
//! of what it publishes, and each of its child addresses serves that version after its
//! own propagation lag; a registrar action reaches the registry after the delay the test
//! gives, and each parent address after its lag. An address never serves an older
//! version after a newer one (zone serials). What every address served, and from when,
//! is therefore exact: the ground truth the rule 15 oracle ([`MoveWorld::check_rule15`])
//! reads, at every moment an answer changed, not only at the moments a test looks.
//!
//! The provider side is two [`MoveAccount`]s (each one account's own client) behind
//! [`MoveProviders`], which stands for `provider::fleet::Providers`: asked about a zone
//! two accounts hold, it refuses without sending anything ([`ProviderError::Owner`]), as
//! the fleet does; [`Provider::account_named`] hands out an account's own client.

use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use dnssec_warden::dns::delegation::ns_set;
use dnssec_warden::dns::{
    ChildKeys, ChildView, DnskeyAnswer, DsAnswer, Evidence, NsAnswer, ObserveError, Observer,
    ParentView, ServerAnswer, SignatureWindow, UnknownReason, ValidationProbe, ValidationVerdict,
};
use dnssec_warden::dnssec::{CdsHalves, CdsPublication, DigestType, Dnskey, DnssecKey, Ds};
use dnssec_warden::lifecycle::{Clock, ManualClock, Timestamp};
use dnssec_warden::provider::{
    DnssecSwitched, HostedZone, ListedZone, Provider, ProviderError, SendPermit, foreign_dnskey_set,
};
use dnssec_warden_lab::keys::LabKey;

/// The zone that moves.
pub const ZONE: &str = "moving.test.";
/// The accounts' names (`[providers.NAME]`): the source, then the target.
pub const ACCOUNTS: [&str; 2] = ["a", "b"];
/// The source's and the target's account indices.
pub const SOURCE: usize = 0;
pub const TARGET: usize = 1;
/// The first version of everything dates from the epoch: long before the story.
const BEGINNING_MS: i64 = 0;

fn generate_key() -> Dnskey {
    LabKey::generate(257).expect("a lab key").dnskey().into()
}

/// The DS a registrar enters for `key` (SHA-256).
pub fn ds_of(zone: &str, key: &Dnskey) -> Ds {
    key.to_ds(zone, DigestType::Sha256).expect("a DS of a key")
}

/// What a child address serves for the apex DNSKEY set: the keys, and the key whose
/// RRSIG over the set is valid (`None`: unsigned; keys beside it are served unsigned, as
/// a zone with DNSSEC off serves DNSKEY records it stores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub keys: Vec<Dnskey>,
    pub signed_by: Option<Dnskey>,
}

impl Served {
    pub fn unsigned() -> Served {
        Served {
            keys: Vec::new(),
            signed_by: None,
        }
    }
}

/// What a parent address publishes: the DS set and the delegation's NS names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParentData {
    pub ds: Vec<Ds>,
    pub ns: Vec<String>,
}

/// What the registrar is told to do (by the test, acting on the engine's notifications).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistrarAction {
    AddDs(Ds),
    RemoveDs(Ds),
    /// The delegation becomes exactly these name servers.
    Delegate(Vec<String>),
}

impl RegistrarAction {
    fn apply(&self, data: &mut ParentData) {
        match self {
            RegistrarAction::AddDs(ds) => {
                if !data.ds.contains(ds) {
                    data.ds.push(ds.clone());
                }
            }
            RegistrarAction::RemoveDs(ds) => data.ds.retain(|d| d != ds),
            RegistrarAction::Delegate(ns) => data.ns = ns_set(ns),
        }
    }
}

/// A change an account's API made (ground truth of the calls that took effect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountCall {
    Dnssec(bool),
    Foreign(Vec<Dnskey>),
    Cds(CdsPublication),
}

/// One version of what something publishes: made at `made`, reaching address `j` at
/// `made + lags[j]` (never before an earlier version reaches it).
#[derive(Debug, Clone)]
struct Version<T> {
    made: Timestamp,
    value: T,
    lags: Vec<Duration>,
}

/// When each version reaches one address: `(arrival, value)` from the first, in order,
/// arrivals never going back; a version overtaken at the same moment is dropped.
fn arrivals<T: Clone>(initial: &T, versions: &[Version<T>], address: usize) -> Vec<(i64, T)> {
    let mut out: Vec<(i64, T)> = vec![(BEGINNING_MS, initial.clone())];
    let mut last = i64::MIN;
    for v in versions {
        let lag = v.lags.get(address).copied().unwrap_or_default();
        let lag = i64::try_from(lag.as_millis()).unwrap_or(i64::MAX / 4);
        let at = (v.made.0 + lag).max(last);
        last = at;
        match out.last_mut() {
            Some(entry) if entry.0 == at => entry.1 = v.value.clone(),
            _ => out.push((at, v.value.clone())),
        }
    }
    out
}

#[derive(Debug, Clone)]
pub struct AccountState {
    pub name: String,
    /// The account has the zone (the source's copy is the operator's to delete after
    /// the move).
    pub holds_zone: bool,
    /// The key it signs with; `None`: DNSSEC off.
    pub key: Option<Dnskey>,
    /// The other signers' keys it stores for the apex.
    pub foreign: Vec<Dnskey>,
    /// Its API can store foreign keys (PowerDNS `direct-dnskey=yes`; not Gcore).
    pub foreign_capable: bool,
    /// Its apex NS names (disjoint from the other account's).
    pub ns: Vec<String>,
    pub apex_ns_ttl: u32,
    pub dnskey_ttl: u32,
    pub cds: CdsPublication,
    /// The next calls fail with a 503 and take no effect.
    pub failures: u32,
    /// The next changing calls take effect and their answer is lost (a timeout): the
    /// outcome is unknown to the caller.
    pub lose_answers: u32,
    /// Every change that took effect.
    pub calls: Vec<(Timestamp, AccountCall)>,
    /// Every API call answered or failed, by name (to see what the engine asked).
    pub asked: Vec<(Timestamp, &'static str)>,
    /// What it publishes, version by version (index: child address).
    published: Vec<Version<Served>>,
    initial: Served,
}

impl AccountState {
    /// What its servers serve once they have its latest version.
    pub fn config(&self) -> Served {
        match &self.key {
            Some(k) => {
                let mut keys = vec![k.clone()];
                keys.extend(self.foreign.iter().filter(|f| *f != k).cloned());
                Served {
                    keys,
                    signed_by: Some(k.clone()),
                }
            }
            None => Served {
                keys: self.foreign.clone(),
                signed_by: None,
            },
        }
    }
}

#[derive(Debug, Clone)]
pub struct ChildServer {
    /// Whose server: [`SOURCE`] or [`TARGET`].
    pub account: usize,
    pub host: String,
    pub addr: IpAddr,
    /// How long a new version of its account takes to reach it.
    pub lag: Duration,
    /// Answers nothing (a timeout): unknown to the observer. Resolvers are assumed to
    /// reach it all the same (the oracle does not count on silence).
    pub silent: bool,
}

#[derive(Debug, Clone)]
pub struct ParentServer {
    pub host: String,
    pub addr: IpAddr,
    /// How long a new registry version takes to reach it (one lagging anycast node).
    pub lag: Duration,
    pub silent: bool,
    /// Answers the DS question, times out on the NS question.
    pub ns_silent: bool,
}

/// Shapes a world at its start.
#[derive(Debug, Clone)]
pub struct MoveSetup {
    pub parents: usize,
    /// Child addresses per account.
    pub children: usize,
    pub ds_ttl: u32,
    /// The parent's NS TTL for the delegation.
    pub ns_ttl: u32,
    pub apex_ns_ttl: [u32; 2],
    pub dnskey_ttl: [u32; 2],
    /// The target signs already when the move is declared.
    pub target_signs: bool,
}

impl Default for MoveSetup {
    fn default() -> Self {
        Self {
            parents: 3,
            children: 2,
            ds_ttl: 3600,
            ns_ttl: 3600,
            apex_ns_ttl: [3600, 3600],
            dnskey_ttl: [3600, 3600],
            target_signs: false,
        }
    }
}

#[derive(Debug)]
pub struct MoveState {
    pub zone: String,
    pub accounts: [AccountState; 2],
    pub children: Vec<ChildServer>,
    pub parents: Vec<ParentServer>,
    pub ds_ttl: u32,
    pub ns_ttl: u32,
    /// Registrar actions in the order given, each with when it reaches the registry and
    /// its lag to each parent address.
    registrar: Vec<Version<RegistrarAction>>,
    registry_initial: ParentData,
    /// Rule 15 has been checked at every moment up to here.
    checked_until: Timestamp,
    /// Broken invariants, in words (the oracle's and the calls' own checks).
    pub violations: Vec<String>,
}

impl MoveState {
    /// A new version of account `i`'s publication, made now, if it changed.
    fn publish(&mut self, i: usize, now: Timestamp) {
        let lags: Vec<Duration> = self.children.iter().map(|c| c.lag).collect();
        let account = &mut self.accounts[i];
        let config = account.config();
        let latest = account
            .published
            .last()
            .map_or(&account.initial, |v| &v.value);
        if *latest != config {
            account.published.push(Version {
                made: now,
                value: config,
                lags,
            });
        }
    }

    /// The registry's versions in the order it applies them: each registrar action
    /// folded over the ones before, with its lags.
    fn registry_versions(&self) -> Vec<Version<ParentData>> {
        let mut actions: Vec<&Version<RegistrarAction>> = self.registrar.iter().collect();
        // Stable: actions reaching the registry at once apply in the order given.
        actions.sort_by_key(|v| v.made);
        let mut data = self.registry_initial.clone();
        actions
            .into_iter()
            .map(|v| {
                v.value.apply(&mut data);
                Version {
                    made: v.made,
                    value: data.clone(),
                    lags: v.lags.clone(),
                }
            })
            .collect()
    }

    /// Parent address `i`'s history up to `until`: (since, what), oldest first.
    pub fn parent_history(&self, i: usize, until: Timestamp) -> Vec<(Timestamp, ParentData)> {
        arrivals(&self.registry_initial, &self.registry_versions(), i)
            .into_iter()
            .filter(|(at, _)| *at <= until.0)
            .map(|(at, v)| (Timestamp(at), v))
            .collect()
    }

    /// Child address `j`'s history up to `until`.
    pub fn child_history(&self, j: usize, until: Timestamp) -> Vec<(Timestamp, Served)> {
        let Some(child) = self.children.get(j) else {
            return Vec::new();
        };
        let account = &self.accounts[child.account];
        arrivals(&account.initial, &account.published, j)
            .into_iter()
            .filter(|(at, _)| *at <= until.0)
            .map(|(at, v)| (Timestamp(at), v))
            .collect()
    }

    /// What parent address `i` publishes at `at`.
    pub fn parent_at(&self, i: usize, at: Timestamp) -> ParentData {
        self.parent_history(i, at)
            .pop()
            .map_or_else(|| self.registry_initial.clone(), |(_, v)| v)
    }

    /// What child address `j` serves at `at`.
    pub fn child_at(&self, j: usize, at: Timestamp) -> Served {
        self.child_history(j, at)
            .pop()
            .map_or_else(Served::unsigned, |(_, v)| v)
    }

    /// Whether `ns` sends resolvers to account `i` (any of its names).
    fn reaches(&self, ns: &[String], i: usize) -> bool {
        let own = ns_set(&self.accounts[i].ns);
        ns_set(ns).iter().any(|n| own.contains(n))
    }

    /// Rule 15 at `now`, from the histories alone. This mirrors the oracle of
    /// `src/lifecycle/tests_signed_move.rs` (`World::violations`), which drives the
    /// planner without the engine; here with a TTL per account and delegations that may
    /// name both accounts' servers (a resolver may be sent to either). For every DS set a
    /// parent address published in `(now - DS TTL, now]`, every account a delegation
    /// published in `(now - NS TTL, now]` sends resolvers to (NS TTL: the parent's, or
    /// the account's apex NS TTL, the larger), and every DNSKEY set a reachable account's
    /// address served in `(now - DNSKEY TTL, now]`: every address of a reachable account
    /// signs with a key whose DS is in each such DS set and which each such DNSKEY set
    /// holds.
    pub fn violations_at(&self, now: Timestamp) -> Vec<String> {
        let now_ms = now.0;
        let secs = |ttl: u32| i64::from(ttl) * 1000;
        // (from, to, value): to is the next entry's start, or just after now.
        fn spans<T: Clone>(history: &[(Timestamp, T)], now: i64) -> Vec<(i64, i64, T)> {
            history
                .iter()
                .enumerate()
                .map(|(k, (from, v))| {
                    let to = history.get(k + 1).map_or(now + 1, |(t, _)| t.0);
                    (from.0, to, v.clone())
                })
                .collect()
        }
        let within = |from: i64, to: i64, ttl: u32| to > now_ms - secs(ttl) && from <= now_ms;
        let overlaps = |spans: &[(i64, i64)], from: i64, to: i64| {
            spans.iter().any(|(a, b)| *a < to && *b > from)
        };
        let parents: Vec<Vec<(i64, i64, ParentData)>> = (0..self.parents.len())
            .map(|i| spans(&self.parent_history(i, now), now_ms))
            .collect();
        let ds_sets: Vec<&Vec<Ds>> = parents
            .iter()
            .flatten()
            .filter(|(from, to, _)| within(*from, *to, self.ds_ttl))
            .map(|(_, _, p)| &p.ds)
            .collect();
        // When resolvers may be sent to each account: each stretch a parent address
        // delegated there, lengthened by what a resolver may cache of the delegation.
        let reach: Vec<Vec<(i64, i64)>> = (0..2)
            .map(|i| {
                let ttl = self.ns_ttl.max(self.accounts[i].apex_ns_ttl);
                parents
                    .iter()
                    .flatten()
                    .filter(|(_, _, p)| self.reaches(&p.ns, i))
                    .map(|(from, to, _)| (*from, to + secs(ttl)))
                    .collect()
            })
            .collect();
        let children: Vec<Vec<(i64, i64, Served)>> = (0..self.children.len())
            .map(|j| spans(&self.child_history(j, now), now_ms))
            .collect();
        let mut key_sets: Vec<(String, &Vec<Dnskey>)> = Vec::new();
        for (j, c) in self.children.iter().enumerate() {
            let ttl = self.accounts[c.account].dnskey_ttl;
            for (from, to, served) in &children[j] {
                let window_from = (*from).max(now_ms - secs(ttl));
                if within(*from, *to, ttl)
                    && overlaps(&reach[c.account], window_from, *to)
                    && served.signed_by.is_some()
                {
                    key_sets.push((c.host.clone(), &served.keys));
                }
            }
        }
        let mut out = Vec::new();
        for (j, c) in self.children.iter().enumerate() {
            if !overlaps(&reach[c.account], now_ms, now_ms + 1) {
                continue;
            }
            let who = format!("{} {} ({})", self.accounts[c.account].name, c.host, c.addr);
            let current = children[j].last().map(|(_, _, s)| s.clone());
            match current.and_then(|s| s.signed_by) {
                None => {
                    if ds_sets.iter().any(|d| !d.is_empty()) {
                        out.push(format!(
                            "at {now}: {who} answers unsigned under a cached DS"
                        ));
                    }
                }
                Some(signer) => {
                    if let Some(d) = ds_sets
                        .iter()
                        .find(|d| !d.iter().any(|ds| signer.matches_ds(&self.zone, ds)))
                    {
                        out.push(format!(
                            "at {now}: {who} signs with {} but a cached DS set lacks its DS: {}",
                            signer.key_tag(),
                            tags(d)
                        ));
                    }
                    if let Some((from, k)) = key_sets.iter().find(|(_, k)| !k.contains(&signer)) {
                        out.push(format!(
                            "at {now}: {who} signs with {} but a DNSKEY set {from} served may be cached without it: {:?}",
                            signer.key_tag(),
                            k.iter().map(Dnskey::key_tag).collect::<Vec<_>>()
                        ));
                    }
                }
            }
        }
        out
    }
}

fn tags(ds: &[Ds]) -> String {
    let tags: Vec<String> = ds.iter().map(|d| d.key_tag.to_string()).collect();
    format!("DS {{{}}}", tags.join(", "))
}

/// The world: its state, shared by every handle, and the clock.
#[derive(Clone)]
pub struct MoveWorld {
    state: Arc<Mutex<MoveState>>,
    pub clock: ManualClock,
}

impl MoveWorld {
    /// The zone `active` at account `a` (signing, its DS at every parent address,
    /// delegated to its name servers since long ago), present at `b` too (signing or
    /// not, as `setup` says), no foreign key anywhere; both accounts can store foreign
    /// keys.
    pub fn new(setup: &MoveSetup, clock: ManualClock) -> MoveWorld {
        let zone = ZONE.to_string();
        let account = |i: usize, key: Option<Dnskey>| {
            let name = ACCOUNTS[i];
            let mut state = AccountState {
                name: name.to_string(),
                holds_zone: true,
                key,
                foreign: Vec::new(),
                foreign_capable: true,
                ns: ns_set([format!("ns1.{name}.test."), format!("ns2.{name}.test.")]),
                apex_ns_ttl: setup.apex_ns_ttl[i],
                dnskey_ttl: setup.dnskey_ttl[i],
                cds: CdsPublication::Nothing,
                failures: 0,
                lose_answers: 0,
                calls: Vec::new(),
                asked: Vec::new(),
                published: Vec::new(),
                initial: Served::unsigned(),
            };
            state.initial = state.config();
            state
        };
        let ks = generate_key();
        let accounts = [
            account(SOURCE, Some(ks.clone())),
            account(TARGET, setup.target_signs.then(generate_key)),
        ];
        let mut children = Vec::new();
        for (i, a) in accounts.iter().enumerate() {
            for j in 0..setup.children {
                let octet = u8::try_from(j + 1).unwrap_or(u8::MAX);
                children.push(ChildServer {
                    account: i,
                    host: a.ns[j % a.ns.len()].clone(),
                    addr: IpAddr::from([127, 0, u8::try_from(i + 1).unwrap_or(9), octet]),
                    lag: Duration::ZERO,
                    silent: false,
                });
            }
        }
        let parents = (0..setup.parents)
            .map(|i| ParentServer {
                host: format!(
                    "{}.nic.test.",
                    char::from(b'a' + u8::try_from(i % 26).unwrap_or(0))
                ),
                addr: IpAddr::from([127, 0, 0, u8::try_from(i + 1).unwrap_or(u8::MAX)]),
                lag: Duration::ZERO,
                silent: false,
                ns_silent: false,
            })
            .collect();
        let registry_initial = ParentData {
            ds: vec![ds_of(&zone, &ks)],
            ns: accounts[SOURCE].ns.clone(),
        };
        let checked_until = clock.now();
        MoveWorld {
            state: Arc::new(Mutex::new(MoveState {
                zone,
                accounts,
                children,
                parents,
                ds_ttl: setup.ds_ttl,
                ns_ttl: setup.ns_ttl,
                registrar: Vec::new(),
                registry_initial,
                checked_until,
                violations: Vec::new(),
            })),
            clock,
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, MoveState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fleet stand-in the engine is given.
    pub fn providers(&self) -> MoveProviders {
        MoveProviders {
            accounts: [self.account(SOURCE), self.account(TARGET)],
        }
    }

    /// Account `i`'s own client.
    pub fn account(&self, i: usize) -> MoveAccount {
        MoveAccount {
            world: self.clone(),
            index: i,
        }
    }

    /// The key account `i` signs with now.
    pub fn key(&self, i: usize) -> Option<Dnskey> {
        self.lock().accounts[i].key.clone()
    }

    /// The registrar does `action`: it reaches the registry after `delay`, then each
    /// parent address after that address's lag.
    pub fn registrar(&self, action: RegistrarAction, delay: Duration) {
        let lags = self.lock().parents.iter().map(|p| p.lag).collect();
        self.registrar_with_lags(action, delay, lags);
    }

    /// As [`MoveWorld::registrar`], with a lag of its own for each parent address.
    pub fn registrar_with_lags(
        &self,
        action: RegistrarAction,
        delay: Duration,
        lags: Vec<Duration>,
    ) {
        let at = self.clock.now().plus(delay);
        self.lock().registrar.push(Version {
            made: at,
            value: action,
            lags,
        });
    }

    /// Every registrar action given so far, with when it reaches the registry.
    pub fn registrar_actions(&self) -> Vec<(Timestamp, RegistrarAction)> {
        let s = self.lock();
        s.registrar
            .iter()
            .map(|v| (v.made, v.value.clone()))
            .collect()
    }

    /// Account `i`'s name servers (the target's: what "change the NS" asks for).
    pub fn ns_of(&self, i: usize) -> Vec<String> {
        self.lock().accounts[i].ns.clone()
    }

    /// Someone outside the daemon changes account `i` (a roll, DNSSEC switched, a
    /// foreign key deleted): `f` on its state, published now.
    pub fn behind_the_daemon(&self, i: usize, f: impl FnOnce(&mut AccountState)) {
        let now = self.clock.now();
        let mut s = self.lock();
        f(&mut s.accounts[i]);
        s.publish(i, now);
    }

    /// Account `i` rolls to a new key (if it signs).
    pub fn roll(&self, i: usize) {
        self.behind_the_daemon(i, |a| {
            if a.key.is_some() {
                a.key = Some(generate_key());
            }
        });
    }

    /// What parent address `i` publishes now.
    pub fn parent_now(&self, i: usize) -> ParentData {
        let now = self.clock.now();
        self.lock().parent_at(i, now)
    }

    /// What child address `j` serves now.
    pub fn child_now(&self, j: usize) -> Served {
        let now = self.clock.now();
        self.lock().child_at(j, now)
    }

    /// Rule 15 at every moment since the last check up to now: at each moment an
    /// address's answer changed (only then can a violation begin: caches only expire in
    /// between), and now. New violations are kept in [`MoveState::violations`] and
    /// returned.
    pub fn check_rule15(&self) -> Vec<String> {
        let now = self.clock.now();
        let mut s = self.lock();
        let from = s.checked_until;
        let mut moments: Vec<Timestamp> = Vec::new();
        for i in 0..s.parents.len() {
            moments.extend(s.parent_history(i, now).into_iter().map(|(t, _)| t));
        }
        for j in 0..s.children.len() {
            moments.extend(s.child_history(j, now).into_iter().map(|(t, _)| t));
        }
        // (`from` again: something may have arrived at the very moment of the last check,
        // after it.)
        moments.retain(|t| *t >= from);
        moments.push(now);
        moments.sort();
        moments.dedup();
        let mut found = Vec::new();
        for t in moments {
            for v in s.violations_at(t) {
                if !found.contains(&v) {
                    found.push(v);
                }
            }
        }
        s.checked_until = s.checked_until.max(now);
        s.violations.extend(found.iter().cloned());
        found
    }

    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// What every address published and when (key tags), and the registrar's actions,
    /// for a failure's message.
    pub fn story(&self) -> String {
        let now = self.clock.now();
        let s = self.lock();
        let mut out = Vec::new();
        for (i, a) in s.accounts.iter().enumerate() {
            let tag = |k: &Option<Dnskey>| {
                k.as_ref()
                    .map_or("off".to_string(), |k| k.key_tag().to_string())
            };
            out.push(format!(
                "account {} (key {}): calls {:?}",
                a.name,
                tag(&a.key),
                a.calls
                    .iter()
                    .map(|(t, c)| format!("{t} {c:?}"))
                    .collect::<Vec<_>>()
            ));
            for (j, c) in s
                .children
                .iter()
                .enumerate()
                .filter(|(_, c)| c.account == i)
            {
                let h: Vec<String> = s
                    .child_history(j, now)
                    .iter()
                    .map(|(t, v)| {
                        format!(
                            "{t} {:?} by {}",
                            v.keys.iter().map(Dnskey::key_tag).collect::<Vec<_>>(),
                            tag(&v.signed_by)
                        )
                    })
                    .collect();
                out.push(format!("  {} lag {:?}: {}", c.addr, c.lag, h.join("; ")));
            }
        }
        for (i, p) in s.parents.iter().enumerate() {
            let h: Vec<String> = s
                .parent_history(i, now)
                .iter()
                .map(|(t, d)| format!("{t} {} NS {:?}", tags(&d.ds), d.ns))
                .collect();
            out.push(format!(
                "parent {} lag {:?}: {}",
                p.addr,
                p.lag,
                h.join("; ")
            ));
        }
        let actions: Vec<String> = s
            .registrar
            .iter()
            .map(|v| match &v.value {
                RegistrarAction::AddDs(d) => format!("{} add DS {}", v.made, d.key_tag),
                RegistrarAction::RemoveDs(d) => format!("{} remove DS {}", v.made, d.key_tag),
                RegistrarAction::Delegate(ns) => format!("{} NS {ns:?}", v.made),
            })
            .collect();
        out.push(format!("registrar: {}", actions.join("; ")));
        out.join("\n")
    }

    /// Ground truth at the end of a move: every parent address publishes DS(target's
    /// key) only and delegates to the target's name servers, and the source signs no
    /// more. Err says what is not so.
    pub fn moved(&self) -> Result<(), String> {
        let now = self.clock.now();
        let s = self.lock();
        let kt = s.accounts[TARGET]
            .key
            .clone()
            .ok_or("the target does not sign")?;
        if s.accounts[SOURCE].key.is_some() {
            return Err("the source still signs".into());
        }
        for i in 0..s.parents.len() {
            let p = s.parent_at(i, now);
            let only_kt = p.ds.len() == 1 && kt.matches_ds(&s.zone, &p.ds[0]);
            if !only_kt || p.ns != s.accounts[TARGET].ns {
                return Err(format!(
                    "parent address {i} publishes {} and delegates to {:?}",
                    tags(&p.ds),
                    p.ns
                ));
            }
        }
        Ok(())
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

/// One account's own client.
#[derive(Clone)]
pub struct MoveAccount {
    world: MoveWorld,
    index: usize,
}

impl MoveAccount {
    pub fn name(&self) -> &'static str {
        ACCOUNTS[self.index]
    }

    /// A call begins: it is counted, an injected failure ends it, and a zone the
    /// account does not hold is not found.
    fn begin(&self, call: &'static str, zone: &str) -> Result<(), ProviderError> {
        let now = self.world.clock.now();
        let mut s = self.world.lock();
        let a = &mut s.accounts[self.index];
        a.asked.push((now, call));
        if a.failures > 0 {
            a.failures -= 1;
            return Err(ProviderError::Server {
                status: 503,
                message: "injected".into(),
            });
        }
        if !a.holds_zone || !same_zone(zone, &s.zone) {
            return Err(ProviderError::NotFound("zone is not found".into()));
        }
        Ok(())
    }

    /// A change takes effect now (published to the child addresses); `Err` when its
    /// answer is then lost.
    fn changed(&self, call: AccountCall) -> Result<(), ProviderError> {
        let now = self.world.clock.now();
        let mut s = self.world.lock();
        s.publish(self.index, now);
        let a = &mut s.accounts[self.index];
        a.calls.push((now, call));
        if a.lose_answers > 0 {
            a.lose_answers -= 1;
            return Err(ProviderError::Transport(
                "operation timed out (the answer was lost)".into(),
            ));
        }
        Ok(())
    }
}

fn same_zone(asked: &str, zone: &str) -> bool {
    asked
        .trim_end_matches('.')
        .eq_ignore_ascii_case(zone.trim_end_matches('.'))
}

async fn permitted(may_send: SendPermit<'_>) -> Result<(), ProviderError> {
    if may_send().await {
        Ok(())
    } else {
        Err(ProviderError::NotSent(
            "the permission was withdrawn".into(),
        ))
    }
}

impl Provider for MoveAccount {
    type Account = Self;
    fn account_named(&self, _name: &str) -> Option<&Self> {
        None
    }

    async fn zone(&self, zone: &str) -> Result<HostedZone, ProviderError> {
        self.begin("zone", zone)?;
        let s = self.world.lock();
        let a = &s.accounts[self.index];
        Ok(HostedZone {
            name: s.zone.trim_end_matches('.').to_string(),
            dnssec_enabled: Some(a.key.is_some()),
            name_servers: Some(a.ns.clone()),
        })
    }

    async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
        let zone = self.world.lock().zone.clone();
        match self.zone(&zone).await {
            Ok(hosted) => Ok(vec![ListedZone {
                name: hosted.name,
                dnssec_enabled: hosted.dnssec_enabled,
            }]),
            Err(ProviderError::NotFound(_)) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        may_send: SendPermit<'_>,
    ) -> Result<DnssecSwitched, ProviderError> {
        permitted(may_send).await?;
        self.begin("set_dnssec", zone)?;
        let key = {
            let mut s = self.world.lock();
            let a = &mut s.accounts[self.index];
            if !enabled {
                a.key = None;
            } else if a.key.is_none() {
                a.key = Some(generate_key());
            }
            a.key.clone()
        };
        self.changed(AccountCall::Dnssec(enabled))?;
        let key = match key {
            Some(k) if enabled => Some(provider_key(zone, &k)?),
            _ => None,
        };
        Ok(DnssecSwitched { message: None, key })
    }

    async fn dnssec_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        self.begin("dnssec_key", zone)?;
        let key = self.world.lock().accounts[self.index].key.clone();
        match key {
            Some(k) => provider_key(zone, &k),
            None => Err(ProviderError::DnssecDisabled),
        }
    }

    async fn largest_ttl(&self, zone: &str) -> Result<Option<u32>, ProviderError> {
        self.begin("largest_ttl", zone)?;
        let s = self.world.lock();
        let a = &s.accounts[self.index];
        Ok(Some(a.dnskey_ttl.max(a.apex_ns_ttl)))
    }

    async fn cds_publication(&self, zone: &str) -> Result<Option<CdsHalves>, ProviderError> {
        self.begin("cds_publication", zone)?;
        Ok(Some(CdsHalves::whole(
            self.world.lock().accounts[self.index].cds,
        )))
    }

    async fn set_cds_publication(
        &self,
        zone: &str,
        to: CdsPublication,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        permitted(may_send).await?;
        self.begin("set_cds_publication", zone)?;
        self.world.lock().accounts[self.index].cds = to;
        self.changed(AccountCall::Cds(to))
    }

    async fn foreign_dnskeys_supported(&self, zone: &str) -> Result<bool, ProviderError> {
        self.begin("foreign_dnskeys_supported", zone)?;
        Ok(self.world.lock().accounts[self.index].foreign_capable)
    }

    async fn foreign_dnskeys(&self, zone: &str) -> Result<Option<Vec<Dnskey>>, ProviderError> {
        let s = self.world.lock();
        let a = &s.accounts[self.index];
        if !a.foreign_capable {
            // Asks nothing, as a client whose API cannot store them.
            return Ok(None);
        }
        drop(s);
        self.begin("foreign_dnskeys", zone)?;
        Ok(Some(self.world.lock().accounts[self.index].foreign.clone()))
    }

    async fn set_foreign_dnskeys(
        &self,
        zone: &str,
        keys: &[Dnskey],
        _ttl: u32,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        let keys = foreign_dnskey_set(zone, keys)?;
        if !self.world.lock().accounts[self.index].foreign_capable {
            return Err(ProviderError::Invalid(format!(
                "the provider's API cannot publish another signer's DNSKEY for {zone}"
            )));
        }
        permitted(may_send).await?;
        self.begin("set_foreign_dnskeys", zone)?;
        self.world.lock().accounts[self.index].foreign = keys.clone();
        self.changed(AccountCall::Foreign(keys))
    }

    fn account(&self, _zone: &str) -> Option<String> {
        Some(self.name().to_string())
    }
}

/// The fleet stand-in: both accounts by name; a call about the zone goes to the one
/// account that holds it, and is refused unsent while both do (as
/// `provider::fleet::Providers` refuses a zone two accounts list).
#[derive(Clone)]
pub struct MoveProviders {
    accounts: [MoveAccount; 2],
}

impl MoveProviders {
    /// The one account holding `zone`, as the fleet finds it.
    fn holder(&self, zone: &str) -> Result<&MoveAccount, ProviderError> {
        let world = &self.accounts[0].world;
        let s = world.lock();
        let holding: Vec<usize> = (0..2)
            .filter(|&i| s.accounts[i].holds_zone && same_zone(zone, &s.zone))
            .collect();
        match holding.as_slice() {
            [i] => Ok(&self.accounts[*i]),
            [] => Err(ProviderError::NotFound(format!(
                "no configured provider (a, b) has the zone {zone}"
            ))),
            _ => Err(ProviderError::Owner(format!(
                "{zone} is at more than one provider (a and b): nothing is sent to either until it is deleted from all but one (a move between two managed providers is not supported)"
            ))),
        }
    }
}

impl Provider for MoveProviders {
    type Account = MoveAccount;
    fn account_named(&self, name: &str) -> Option<&MoveAccount> {
        self.accounts.iter().find(|a| a.name() == name)
    }

    async fn zone(&self, zone: &str) -> Result<HostedZone, ProviderError> {
        self.holder(zone)?.zone(zone).await
    }

    /// Both listings; a zone both list is left out (its calls are refused).
    async fn zone_flags(&self) -> Result<Vec<ListedZone>, ProviderError> {
        let mut all = Vec::new();
        for a in &self.accounts {
            all.extend(a.zone_flags().await?);
        }
        let names: Vec<String> = all.iter().map(|z| z.name.clone()).collect();
        all.retain(|z| names.iter().filter(|n| **n == z.name).count() == 1);
        Ok(all)
    }

    async fn set_dnssec(
        &self,
        zone: &str,
        enabled: bool,
        may_send: SendPermit<'_>,
    ) -> Result<DnssecSwitched, ProviderError> {
        self.holder(zone)?.set_dnssec(zone, enabled, may_send).await
    }

    async fn dnssec_key(&self, zone: &str) -> Result<DnssecKey, ProviderError> {
        self.holder(zone)?.dnssec_key(zone).await
    }

    async fn largest_ttl(&self, zone: &str) -> Result<Option<u32>, ProviderError> {
        self.holder(zone)?.largest_ttl(zone).await
    }

    async fn cds_publication(&self, zone: &str) -> Result<Option<CdsHalves>, ProviderError> {
        self.holder(zone)?.cds_publication(zone).await
    }

    async fn set_cds_publication(
        &self,
        zone: &str,
        to: CdsPublication,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        self.holder(zone)?
            .set_cds_publication(zone, to, may_send)
            .await
    }

    async fn foreign_dnskeys_supported(&self, zone: &str) -> Result<bool, ProviderError> {
        self.holder(zone)?.foreign_dnskeys_supported(zone).await
    }

    async fn foreign_dnskeys(&self, zone: &str) -> Result<Option<Vec<Dnskey>>, ProviderError> {
        self.holder(zone)?.foreign_dnskeys(zone).await
    }

    async fn set_foreign_dnskeys(
        &self,
        zone: &str,
        keys: &[Dnskey],
        ttl: u32,
        may_send: SendPermit<'_>,
    ) -> Result<(), ProviderError> {
        foreign_dnskey_set(zone, keys)?;
        self.holder(zone)?
            .set_foreign_dnskeys(zone, keys, ttl, may_send)
            .await
    }

    fn account(&self, zone: &str) -> Option<String> {
        self.holder(zone).ok().map(|a| a.name().to_string())
    }

    fn accounts(&self) -> usize {
        2
    }
}

impl MoveWorld {
    fn keys_answer(served: &Served, ttl: u32) -> DnskeyAnswer {
        if served.keys.is_empty() {
            return DnskeyAnswer::Absent;
        }
        let signer = served
            .signed_by
            .as_ref()
            .and_then(|k| served.keys.iter().position(|s| s == k));
        DnskeyAnswer::Keys(ChildKeys {
            keys: served.keys.clone(),
            ttl,
            signed: signer.is_some(),
            self_signers: signer.into_iter().collect(),
            signatures: served
                .signed_by
                .iter()
                .map(|k| SignatureWindow {
                    key_tag: k.key_tag(),
                    inception: 0,
                    expiration: u32::MAX,
                })
                .collect(),
            signals: Default::default(),
        })
    }
}

impl Observer for MoveWorld {
    async fn parent(&self, zone: &str) -> Result<ParentView, ObserveError> {
        let now = self.clock.now();
        let s = self.lock();
        if !same_zone(zone, &s.zone) {
            return Err(ObserveError {
                zone: zone.to_string(),
                reason: "the move world has one zone".into(),
            });
        }
        let mut answers = Vec::new();
        let mut delegations = Vec::new();
        for (i, p) in s.parents.iter().enumerate() {
            let data = s.parent_at(i, now);
            let ds = if p.silent {
                DsAnswer::Unknown(UnknownReason::Timeout)
            } else if data.ds.is_empty() {
                DsAnswer::Absent
            } else {
                DsAnswer::Present {
                    ds: data.ds.clone(),
                    ttl: s.ds_ttl,
                }
            };
            let ns = if p.silent || p.ns_silent {
                NsAnswer::Unknown(UnknownReason::Timeout)
            } else {
                NsAnswer::Servers {
                    hosts: ns_set(&data.ns).into(),
                    ttl: s.ns_ttl,
                }
            };
            answers.push(ServerAnswer {
                server: p.host.as_str().into(),
                addr: p.addr,
                answer: ds,
            });
            delegations.push(ServerAnswer {
                server: p.host.as_str().into(),
                addr: p.addr,
                answer: ns,
            });
        }
        Ok(ParentView {
            zone: s.zone.clone(),
            parent: "test.".into(),
            answers,
            delegations,
            evidence: Evidence::Unchecked,
        })
    }

    /// The world's answers are its ground truth: validated.
    async fn parent_validated(&self, zone: &str) -> Result<ParentView, ObserveError> {
        let mut view = self.parent(zone).await?;
        view.evidence = Evidence::Validated;
        Ok(view)
    }

    /// The servers the parent addresses that answer delegate to (all of them when none
    /// answers), asked by name.
    async fn child(&self, zone: &str) -> Result<ChildView, ObserveError> {
        let now = self.clock.now();
        let names = {
            let s = self.lock();
            let answering: Vec<usize> = (0..s.parents.len())
                .filter(|&i| !s.parents[i].silent && !s.parents[i].ns_silent)
                .collect();
            let asked = if answering.is_empty() {
                (0..s.parents.len()).collect()
            } else {
                answering
            };
            let mut names: Vec<String> = asked
                .into_iter()
                .flat_map(|i| s.parent_at(i, now).ns)
                .collect();
            names.sort();
            names.dedup();
            names
        };
        self.child_at(zone, &names).await
    }

    /// Every address of the named servers; a name no server has is one unknown answer
    /// (no address), as the observer gives for a name it cannot resolve.
    async fn child_at(
        &self,
        zone: &str,
        name_servers: &[String],
    ) -> Result<ChildView, ObserveError> {
        let now = self.clock.now();
        let s = self.lock();
        if !same_zone(zone, &s.zone) {
            return Err(ObserveError {
                zone: zone.to_string(),
                reason: "the move world has one zone".into(),
            });
        }
        let mut answers = Vec::new();
        let mut apex_ns = Vec::new();
        for name in ns_set(name_servers) {
            let servers: Vec<usize> = (0..s.children.len())
                .filter(|&j| s.children[j].host == name)
                .collect();
            if servers.is_empty() {
                let unknown = UnknownReason::NoAddress(format!("{name} has no address"));
                answers.push(ServerAnswer {
                    server: name.as_str().into(),
                    addr: IpAddr::from([0, 0, 0, 0]),
                    answer: DnskeyAnswer::Unknown(unknown.clone()),
                });
                apex_ns.push(ServerAnswer {
                    server: name.as_str().into(),
                    addr: IpAddr::from([0, 0, 0, 0]),
                    answer: NsAnswer::Unknown(unknown),
                });
                continue;
            }
            for j in servers {
                let c = &s.children[j];
                let account = &s.accounts[c.account];
                let (answer, ns) = if c.silent {
                    (
                        DnskeyAnswer::Unknown(UnknownReason::Timeout),
                        NsAnswer::Unknown(UnknownReason::Timeout),
                    )
                } else {
                    (
                        Self::keys_answer(&s.child_at(j, now), account.dnskey_ttl),
                        NsAnswer::Servers {
                            hosts: ns_set(&account.ns).into(),
                            ttl: account.apex_ns_ttl,
                        },
                    )
                };
                answers.push(ServerAnswer {
                    server: name.as_str().into(),
                    addr: c.addr,
                    answer,
                });
                apex_ns.push(ServerAnswer {
                    server: name.as_str().into(),
                    addr: c.addr,
                    answer: ns,
                });
            }
        }
        Ok(ChildView {
            zone: s.zone.clone(),
            answers,
            apex_ns,
        })
    }

    /// The ground truth's chain: `secure` while every parent address delegates to one
    /// account's name servers exactly, with a DS for the key that account signs with,
    /// and every address of that account serves the key, signed by it; else no verdict.
    async fn validation(&self, _zone: &str) -> Vec<ValidationProbe> {
        let now = self.clock.now();
        let s = self.lock();
        let secure = (0..2).any(|i| {
            let Some(key) = s.accounts[i].key.clone() else {
                return false;
            };
            (0..s.parents.len()).all(|p| {
                let data = s.parent_at(p, now);
                data.ns == s.accounts[i].ns && data.ds.iter().any(|d| key.matches_ds(&s.zone, d))
            }) && (0..s.children.len())
                .filter(|&j| s.children[j].account == i)
                .all(|j| {
                    let served = s.child_at(j, now);
                    served.signed_by.as_ref() == Some(&key)
                })
        });
        if secure {
            vec![ValidationProbe {
                source: "validator".into(),
                verdict: ValidationVerdict::Secure,
                detail: "the move world's chain".into(),
            }]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp(1_800_000_000_000);

    fn world(setup: &MoveSetup) -> MoveWorld {
        MoveWorld::new(setup, ManualClock::starting_at(T0))
    }

    fn allowed() -> dnssec_warden::provider::PermitAnswer<'static> {
        Box::pin(async { true })
    }

    #[test]
    fn a_registrar_action_reaches_each_parent_after_its_delay_and_lag() {
        let w = world(&MoveSetup::default());
        w.lock().parents[2].lag = Duration::from_secs(3600);
        let ks = w.key(SOURCE).unwrap();
        let kt = generate_key();
        let add = RegistrarAction::AddDs(ds_of(ZONE, &kt));
        w.registrar(add, Duration::from_secs(600));
        w.clock.advance(Duration::from_secs(599));
        assert_eq!(w.parent_now(0).ds, vec![ds_of(ZONE, &ks)]);
        w.clock.advance(Duration::from_secs(1));
        let both = vec![ds_of(ZONE, &ks), ds_of(ZONE, &kt)];
        assert_eq!(w.parent_now(0).ds, both);
        assert_eq!(w.parent_now(1).ds, both);
        assert_eq!(w.parent_now(2).ds.len(), 1, "the lagging address");
        w.clock.advance(Duration::from_secs(3600));
        assert_eq!(w.parent_now(2).ds, both);
        // Its history says when.
        let h = w.lock().parent_history(2, w.clock.now());
        assert_eq!(h.last().map(|(t, _)| *t), Some(T0.plus_secs(4200)));
    }

    #[test]
    fn a_parent_never_serves_an_older_version_after_a_newer_one() {
        let w = world(&MoveSetup::default());
        let kt = generate_key();
        // The add reaches parent 0 late; the NS change given after it, early: parent 0
        // takes both at once when the add arrives (zone serials).
        let lags = vec![Duration::from_secs(3600), Duration::ZERO, Duration::ZERO];
        w.registrar_with_lags(
            RegistrarAction::AddDs(ds_of(ZONE, &kt)),
            Duration::ZERO,
            lags,
        );
        w.clock.advance(Duration::from_secs(60));
        let target_ns = w.ns_of(TARGET);
        w.registrar(RegistrarAction::Delegate(target_ns.clone()), Duration::ZERO);
        assert_eq!(w.parent_now(1).ns, target_ns);
        assert_eq!(w.parent_now(0).ns, w.ns_of(SOURCE));
        w.clock.advance(Duration::from_secs(3600));
        assert_eq!(w.parent_now(0).ns, target_ns);
        assert_eq!(w.parent_now(0).ds.len(), 2);
    }

    #[tokio::test]
    async fn a_child_serves_foreign_keys_set_through_the_api_after_its_lag() {
        let w = world(&MoveSetup::default());
        w.lock().children[1].lag = Duration::from_secs(300);
        let source = w.account(SOURCE);
        let ks = w.key(SOURCE).unwrap();
        let kt = generate_key();
        assert_eq!(
            source.foreign_dnskeys(ZONE).await.unwrap(),
            Some(Vec::new())
        );
        source
            .set_foreign_dnskeys(ZONE, std::slice::from_ref(&kt), 300, &allowed)
            .await
            .unwrap();
        assert_eq!(
            source.foreign_dnskeys(ZONE).await.unwrap(),
            Some(vec![kt.clone()])
        );
        let both = Served {
            keys: vec![ks.clone(), kt.clone()],
            signed_by: Some(ks.clone()),
        };
        assert_eq!(w.child_now(0), both);
        assert_eq!(w.child_now(1).keys, vec![ks.clone()], "lagging");
        // The observer asked by name sees the same, signed by the source's key alone.
        let view = w.child_at(ZONE, &w.ns_of(SOURCE)).await.unwrap();
        assert_eq!(view.answers.len(), 2);
        match &view.answers[0].answer {
            DnskeyAnswer::Keys(k) => {
                assert_eq!(k.keys, both.keys);
                assert_eq!(k.self_signers, vec![0]);
            }
            other => panic!("{other:?}"),
        }
        w.clock.advance(Duration::from_secs(300));
        assert_eq!(w.child_now(1), both);
        // The target's servers serve nothing signed (DNSSEC off there).
        let view = w.child_at(ZONE, &w.ns_of(TARGET)).await.unwrap();
        assert!(matches!(view.answers[0].answer, DnskeyAnswer::Absent));
        // A name no server has is unknown, never "absent".
        let view = w
            .child_at(ZONE, &["ns9.x.test.".to_string()])
            .await
            .unwrap();
        assert!(matches!(
            view.answers[0].answer,
            DnskeyAnswer::Unknown(UnknownReason::NoAddress(_))
        ));
    }

    #[tokio::test]
    async fn the_fleet_refuses_a_zone_both_accounts_hold_and_hands_out_each_account() {
        let w = world(&MoveSetup::default());
        let fleet = w.providers();
        assert!(matches!(
            fleet.dnssec_key(ZONE).await,
            Err(ProviderError::Owner(_))
        ));
        assert!(matches!(
            fleet.set_dnssec(ZONE, false, &allowed).await,
            Err(ProviderError::Owner(_))
        ));
        assert!(fleet.zone_flags().await.unwrap().is_empty());
        assert_eq!(fleet.account(ZONE), None);
        assert!(w.key(SOURCE).is_some(), "nothing was sent");
        let target = fleet.account_named("b").expect("account b");
        assert!(matches!(
            target.dnssec_key(ZONE).await,
            Err(ProviderError::DnssecDisabled)
        ));
        let on = target.set_dnssec(ZONE, true, &allowed).await.unwrap();
        assert_eq!(on.key.map(|k| k.dnskey), w.key(TARGET));
        assert_eq!(
            fleet
                .account_named("a")
                .unwrap()
                .zone(ZONE)
                .await
                .unwrap()
                .name_servers,
            Some(w.ns_of(SOURCE))
        );
        assert!(fleet.account_named("c").is_none());
        // The source's copy deleted: the fleet goes to the target.
        w.lock().accounts[SOURCE].holds_zone = false;
        assert_eq!(fleet.account(ZONE).as_deref(), Some("b"));
        assert_eq!(
            fleet.dnssec_key(ZONE).await.map(|k| k.dnskey).ok(),
            w.key(TARGET)
        );
        assert_eq!(fleet.zone_flags().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn injected_failures_and_lost_answers() {
        let w = world(&MoveSetup::default());
        let target = w.account(TARGET);
        w.lock().accounts[TARGET].failures = 1;
        assert!(matches!(
            target.set_dnssec(ZONE, true, &allowed).await,
            Err(ProviderError::Server { status: 503, .. })
        ));
        assert_eq!(w.key(TARGET), None, "a 503 here takes no effect");
        w.lock().accounts[TARGET].lose_answers = 1;
        let lost = target.set_dnssec(ZONE, true, &allowed).await.unwrap_err();
        assert!(lost.outcome_unknown(), "{lost}");
        assert!(w.key(TARGET).is_some(), "the call took effect");
        let not_sent = target
            .set_dnssec(ZONE, false, &|| Box::pin(async { false }))
            .await;
        assert!(matches!(not_sent, Err(ProviderError::NotSent(_))));
        assert!(w.key(TARGET).is_some());
    }

    #[tokio::test]
    async fn the_parent_view_is_the_ground_truth_validated_and_silence_is_unknown() {
        let w = world(&MoveSetup::default());
        w.lock().parents[1].ns_silent = true;
        w.lock().parents[2].silent = true;
        let view = w.parent_validated(ZONE).await.unwrap();
        assert_eq!(view.evidence, Evidence::Validated);
        assert!(matches!(
            view.answers[0].answer,
            DsAnswer::Present { ttl: 3600, .. }
        ));
        assert!(matches!(view.answers[1].answer, DsAnswer::Present { .. }));
        assert!(matches!(view.delegations[1].answer, NsAnswer::Unknown(_)));
        assert!(matches!(view.answers[2].answer, DsAnswer::Unknown(_)));
        // The child view follows the delegation of the addresses that answer.
        let child = w.child(ZONE).await.unwrap();
        assert_eq!(child.answers.len(), 2);
        assert!(
            child
                .answers
                .iter()
                .all(|a| a.addr.to_string().starts_with("127.0.1."))
        );
        assert_eq!(w.validation(ZONE).await.len(), 1, "secure at the source");
    }

    #[test]
    fn the_oracle_sees_nothing_wrong_at_the_start_nor_in_a_safe_exchange() {
        let w = world(&MoveSetup::default());
        assert_eq!(w.check_rule15(), Vec::<String>::new());
        // The target signs (unreachable: fine), the keys exchanged, both DS, then the NS.
        let ks = w.key(SOURCE).unwrap();
        w.behind_the_daemon(TARGET, |a| a.key = Some(generate_key()));
        let kt = w.key(TARGET).unwrap();
        w.behind_the_daemon(TARGET, |a| a.foreign = vec![ks.clone()]);
        w.behind_the_daemon(SOURCE, |a| a.foreign = vec![kt.clone()]);
        w.clock.advance(Duration::from_secs(7200));
        w.registrar(RegistrarAction::AddDs(ds_of(ZONE, &kt)), Duration::ZERO);
        w.clock.advance(Duration::from_secs(7200));
        w.registrar(
            RegistrarAction::Delegate(w.ns_of(TARGET)),
            Duration::from_secs(60),
        );
        w.clock.advance(Duration::from_secs(7200));
        assert_eq!(w.check_rule15(), Vec::<String>::new());
    }

    #[test]
    fn the_oracle_sees_a_dnskey_set_cached_without_the_targets_key() {
        let w = world(&MoveSetup::default());
        let ks = w.key(SOURCE).unwrap();
        w.behind_the_daemon(TARGET, |a| {
            a.key = Some(generate_key());
            a.foreign = vec![ks.clone()];
        });
        let kt = w.key(TARGET).unwrap();
        // Kt at the source only now: a {Ks} set is cached for an hour.
        w.behind_the_daemon(SOURCE, |a| a.foreign = vec![kt.clone()]);
        w.registrar(RegistrarAction::AddDs(ds_of(ZONE, &kt)), Duration::ZERO);
        w.registrar(
            RegistrarAction::Delegate(w.ns_of(TARGET)),
            Duration::from_secs(60),
        );
        w.clock.advance(Duration::from_secs(120));
        let found = w.check_rule15();
        assert!(
            found.iter().any(|v| v.contains("may be cached without it")),
            "{found:?}"
        );
    }

    #[test]
    fn the_oracle_sees_a_moment_between_two_checks() {
        // The old DS removed while the source is reachable, then put back before the
        // next check, long enough before it that no cache holds the short-lived set any
        // more: the moment it arrived still counts.
        let w = world(&MoveSetup {
            ds_ttl: 60,
            ..MoveSetup::default()
        });
        assert!(w.check_rule15().is_empty());
        let ks = w.key(SOURCE).unwrap();
        let kt = generate_key();
        w.registrar(RegistrarAction::AddDs(ds_of(ZONE, &kt)), Duration::ZERO);
        w.registrar(
            RegistrarAction::RemoveDs(ds_of(ZONE, &ks)),
            Duration::from_secs(10),
        );
        w.registrar(
            RegistrarAction::AddDs(ds_of(ZONE, &ks)),
            Duration::from_secs(20),
        );
        w.clock.advance(Duration::from_secs(300));
        assert!(w.lock().violations_at(w.clock.now()).is_empty());
        let found = w.check_rule15();
        assert!(
            found.iter().any(|v| v.contains("lacks its DS")),
            "{found:?}"
        );
        assert_eq!(w.violations().len(), found.len());
    }

    #[test]
    fn the_source_switched_off_under_its_ds_is_seen() {
        let w = world(&MoveSetup::default());
        w.lock().children[0].lag = Duration::from_secs(5);
        w.behind_the_daemon(SOURCE, |a| a.key = None);
        w.clock.advance(Duration::from_secs(1));
        assert!(w.check_rule15().iter().any(|v| v.contains("unsigned")));
    }
}
