//! The console's users, sessions, CSRF tokens and login limiter.
//!
//! Pure over time: every rule takes `now`, so the tests walk through an idle timeout or a
//! 15-minute back-off in milliseconds. Nothing here does I/O but [`Users::load`], and
//! nothing blocks but [`Users::verify`] and [`hash_password`] (argon2id: call them from
//! `spawn_blocking`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use argon2::password_hash::{
    PasswordHash, PasswordHashString, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use ring::digest;
use ring::rand::{SecureRandom, SystemRandom};
use thiserror::Error;

use crate::time::Timestamp;

/// The longest user name, in the users file, a login form or a proxy's header.
pub const MAX_NAME_LEN: usize = 64;
/// The shortest password [`hash_password`] accepts, in characters.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// The longest password, in bytes: longer ones are refused without hashing them.
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// The cost bounds of a users file's hashes: each login attempt costs at most this much
/// memory (KiB) and time, whatever the file says.
pub const MAX_M_COST: u32 = 262_144;
pub const MAX_T_COST: u32 = 16;
pub const MAX_P_COST: u32 = 8;

/// OWASP's argon2id parameters (19 MiB, 2 passes, 1 lane), for the hashes made here.
const OWASP_M_COST: u32 = 19_456;
const OWASP_T_COST: u32 = 2;
const OWASP_P_COST: u32 = 1;

/// Why an authentication input was refused. Never carries a password or a hash.
#[derive(Debug, Error)]
pub enum AuthError {
    #[error("cannot read the users file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file} line {line}: {problem}")]
    Line {
        file: String,
        line: usize,
        problem: LineProblem,
    },
    #[error("the user name must be 1 to 64 characters of A-Z a-z 0-9 . _ @ -")]
    Name,
    #[error("unknown role {0:?}: viewer or operator")]
    Role(String),
    #[error("the password is shorter than {MIN_PASSWORD_CHARS} characters")]
    PasswordTooShort,
    #[error("the password is longer than {MAX_PASSWORD_BYTES} bytes")]
    PasswordTooLong,
    #[error("the system's random number generator failed")]
    Random,
    #[error("argon2: {0}")]
    Hash(argon2::password_hash::Error),
}

/// What is wrong with a line of the users file. Nothing of the hash is quoted: a
/// misplaced password must not reach a log.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LineProblem {
    #[error("expected NAME:ROLE:HASH")]
    Format,
    #[error("the user name must be 1 to 64 characters of A-Z a-z 0-9 . _ @ -")]
    Name,
    #[error("user {name:?} is already on line {first} (names are compared ignoring case)")]
    Duplicate { name: String, first: usize },
    /// The role as written when it is a short word, else nothing of it.
    #[error("unknown role{}: viewer or operator", .0.as_ref().map(|r| format!(" {r:?}")).unwrap_or_default())]
    Role(Option<String>),
    #[error("the hash is {0}, not argon2id")]
    Algorithm(&'static str),
    #[error(
        "the hash is not an argon2id PHC string ($argon2id$v=19$m=…,t=…,p=…$salt$hash; \
         bcrypt and plain passwords are refused): make one with `dnssec-warden web-user`"
    )]
    NotArgon2id,
    #[error("the hash is not argon2 version 19 (v=19)")]
    Version,
    #[error("the hash's cost parameters are not valid argon2 parameters")]
    Params,
    #[error(
        "the hash's cost {param}={value} is over the bound {bound} (each login attempt's work is bounded)"
    )]
    Cost {
        param: &'static str,
        value: u32,
        bound: u32,
    },
}

/// What a user may do: look, or also change intents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Viewer,
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Operator => "operator",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Role {
    type Err = AuthError;

    fn from_str(s: &str) -> Result<Self, AuthError> {
        match s {
            "viewer" => Ok(Self::Viewer),
            "operator" => Ok(Self::Operator),
            _ => Err(AuthError::Role(s.to_string())),
        }
    }
}

/// `[A-Za-z0-9._@-]{1,64}`: the one rule for a user name, wherever it comes from.
pub fn valid_user_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'))
}

/// Fills `N` bytes from the OS generator.
fn random_bytes<const N: usize>(rng: &SystemRandom) -> Result<[u8; N], AuthError> {
    let mut bytes = [0u8; N];
    rng.fill(&mut bytes).map_err(|_| AuthError::Random)?;
    Ok(bytes)
}

/// An argon2id PHC string of `password` with OWASP's parameters and a random salt, for
/// the users file.
pub fn hash_password(password: &str) -> Result<String, AuthError> {
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(AuthError::PasswordTooLong);
    }
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(AuthError::PasswordTooShort);
    }
    let salt = random_bytes::<16>(&SystemRandom::new())?;
    let salt = SaltString::encode_b64(&salt).map_err(AuthError::Hash)?;
    let params = Params::new(OWASP_M_COST, OWASP_T_COST, OWASP_P_COST, None)
        .map_err(|e| AuthError::Hash(e.into()))?;
    let hash = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(password.as_bytes(), &salt)
        .map_err(AuthError::Hash)?;
    Ok(hash.to_string())
}

/// One user of the users file.
#[derive(Clone, PartialEq, Eq)]
struct Account {
    role: Role,
    hash: PasswordHashString,
}

/// The users file: who may log in, with which role. Its `Debug` lists names and roles,
/// never the hashes.
#[derive(Clone)]
pub struct Users {
    accounts: HashMap<String, Account>,
    /// Verified against for an unknown name, with the cost most users' hashes have: a
    /// login for a name not in the file takes as long as one for a name in it.
    dummy: PasswordHashString,
}

impl fmt::Debug for Users {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<_> = self.accounts.iter().collect();
        names.sort_by(|a, b| a.0.cmp(b.0));
        f.debug_map()
            .entries(names.into_iter().map(|(n, a)| (n, a.role)))
            .finish()
    }
}

/// The hash's parameters (`m=…,t=…,p=…`) and its output length: what a login costs.
type Cost = (String, usize);

/// A hash that no password matches (its output is zeros), with the given cost.
fn dummy_hash((params, output_len): &Cost) -> Option<PasswordHashString> {
    let salt = STANDARD_NO_PAD.encode(b"dnssec-warden-dummy-salt");
    let output = STANDARD_NO_PAD.encode(vec![0u8; *output_len]);
    PasswordHashString::new(&format!("$argon2id$v=19${params}${salt}${output}")).ok()
}

fn owasp_cost() -> Cost {
    (
        format!("m={OWASP_M_COST},t={OWASP_T_COST},p={OWASP_P_COST}"),
        32,
    )
}

/// An argon2id v19 PHC string within the cost bounds, and its cost.
fn check_hash(phc: &str) -> Result<(PasswordHashString, Cost), LineProblem> {
    let parsed = PasswordHash::new(phc).map_err(|_| LineProblem::NotArgon2id)?;
    match parsed.algorithm.as_str() {
        "argon2id" => {}
        "argon2i" => return Err(LineProblem::Algorithm("argon2i")),
        "argon2d" => return Err(LineProblem::Algorithm("argon2d")),
        _ => return Err(LineProblem::NotArgon2id),
    }
    // Without `v=` the reference implementation assumes version 16, this crate 19.
    if parsed.version != Some(19) {
        return Err(LineProblem::Version);
    }
    let (Some(_), Some(output)) = (parsed.salt, parsed.hash) else {
        return Err(LineProblem::NotArgon2id);
    };
    let params = Params::try_from(&parsed).map_err(|_| LineProblem::Params)?;
    for (param, value, bound) in [
        ("m", params.m_cost(), MAX_M_COST),
        ("t", params.t_cost(), MAX_T_COST),
        ("p", params.p_cost(), MAX_P_COST),
    ] {
        if value > bound {
            return Err(LineProblem::Cost {
                param,
                value,
                bound,
            });
        }
    }
    let cost = (parsed.params.to_string(), output.len());
    Ok((PasswordHashString::from(&parsed), cost))
}

impl Users {
    /// Reads and parses the users file at `path`.
    pub fn load(path: &Path) -> Result<Self, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses `NAME:ROLE:PHC` lines; blank lines and `#` comments are skipped. `source_name`
    /// names the file in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, AuthError> {
        let mut accounts = HashMap::new();
        let mut line_of: HashMap<String, usize> = HashMap::new();
        let mut costs: Vec<(Cost, usize)> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let number = index + 1;
            let fail = |problem| AuthError::Line {
                file: source_name.to_string(),
                line: number,
                problem,
            };
            let mut fields = line.splitn(3, ':').map(str::trim);
            let (Some(name), Some(role), Some(hash)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return Err(fail(LineProblem::Format));
            };
            if !valid_user_name(name) {
                return Err(fail(LineProblem::Name));
            }
            if let Some(&first) = line_of.get(&name.to_ascii_lowercase()) {
                return Err(fail(LineProblem::Duplicate {
                    name: name.to_string(),
                    first,
                }));
            }
            let role: Role = role.parse().map_err(|_| {
                let word = role.len() <= 16 && role.bytes().all(|b| b.is_ascii_alphabetic());
                fail(LineProblem::Role(word.then(|| role.to_string())))
            })?;
            let (hash, cost) = check_hash(hash).map_err(fail)?;
            match costs.iter_mut().find(|(c, _)| *c == cost) {
                Some((_, n)) => *n += 1,
                None => costs.push((cost, 1)),
            }
            line_of.insert(name.to_ascii_lowercase(), number);
            accounts.insert(name.to_string(), Account { role, hash });
        }
        // The most common cost (the first of equals); every cost was checked above.
        let mut common: Option<&(Cost, usize)> = None;
        for c in &costs {
            if common.is_none_or(|best| c.1 > best.1) {
                common = Some(c);
            }
        }
        let dummy = common
            .and_then(|(cost, _)| dummy_hash(cost))
            .or_else(|| dummy_hash(&owasp_cost()))
            .ok_or(AuthError::Hash(
                argon2::password_hash::Error::PhcStringField,
            ))?;
        Ok(Self { accounts, dummy })
    }

    /// The user's role when `password` is theirs. An unknown name is verified against a
    /// dummy hash of the same cost all the same, so the answer's timing does not say which
    /// names exist. Slow on purpose (argon2id): call it from `spawn_blocking`.
    pub fn verify(&self, name: &str, password: &str) -> Option<Role> {
        let account = self.accounts.get(name);
        let hash = account.map_or(&self.dummy, |a| &a.hash);
        let matches = password.len() <= MAX_PASSWORD_BYTES
            && Argon2::default()
                .verify_password(password.as_bytes(), &hash.password_hash())
                .is_ok();
        account.filter(|_| matches).map(|a| a.role)
    }

    pub fn role_of(&self, name: &str) -> Option<Role> {
        self.accounts.get(name).map(|a| a.role)
    }

    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }

    /// The names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<_> = self.accounts.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// On a reload: the users of `self` whom `newer` drops or gives another role or
    /// password, whose sessions must end.
    pub fn dropped_or_changed(&self, newer: &Users) -> Vec<String> {
        let mut names: Vec<String> = self
            .accounts
            .iter()
            .filter(|(name, account)| newer.accounts.get(*name) != Some(account))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort_unstable();
        names
    }
}

/// SHA-256, fixed length whatever the input: the sessions' map key and the CSRF check.
fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, bytes).as_ref());
    out
}

/// Equal without an early exit: compares SHA-256 digests (equal length whatever was
/// given) byte for byte, folding every difference in.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (sha256(a.as_bytes()), sha256(b.as_bytes()));
    let diff = a.iter().zip(&b).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// A logged-in user, as [`Sessions::create`] and [`Sessions::get`] return it. `Debug`
/// leaves out both secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct Session {
    /// The cookie's value: 32 random bytes, base64url without padding.
    pub token: String,
    /// The forms' hidden field: another 32 random bytes.
    pub csrf: String,
    pub user: String,
    pub role: Role,
    /// The end of the absolute lifetime, however active the user is.
    pub expires: Timestamp,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("user", &self.user)
            .field("role", &self.role)
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Whether `given` is this session's CSRF token, in a time that does not depend on
    /// where they differ.
    pub fn csrf_ok(&self, given: &str) -> bool {
        same_secret(&self.csrf, given)
    }
}

/// A session as kept: no token (the map is keyed by its SHA-256), so a memory dump gives
/// no live cookie.
struct Live {
    csrf: String,
    user: String,
    role: Role,
    expires: Timestamp,
    last_used: Timestamp,
    /// Creation order, for evicting the oldest.
    seq: u64,
}

#[derive(Default)]
struct SessionTable {
    by_key: HashMap<[u8; 32], Live>,
    by_age: BTreeMap<u64, [u8; 32]>,
    next_seq: u64,
}

impl SessionTable {
    fn remove(&mut self, key: &[u8; 32]) {
        if let Some(live) = self.by_key.remove(key) {
            self.by_age.remove(&live.seq);
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(&Live) -> bool) {
        let gone: Vec<[u8; 32]> = self
            .by_key
            .iter()
            .filter(|(_, live)| !keep(live))
            .map(|(key, _)| *key)
            .collect();
        gone.iter().for_each(|key| self.remove(key));
    }
}

/// Where a lock poisoned by a panic is taken over: every change to these tables is
/// complete before anything that could panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The logged-in sessions, in memory (a restart logs everyone out), shared by the
/// handlers.
pub struct Sessions {
    lifetime: Duration,
    idle: Duration,
    max: usize,
    rng: SystemRandom,
    table: Mutex<SessionTable>,
}

impl Sessions {
    /// Sessions that end `lifetime` after the login or `idle` after their last use,
    /// whichever is first; at most `max` at once (at least one).
    pub fn new(lifetime: Duration, idle: Duration, max: usize) -> Self {
        Self {
            lifetime,
            idle,
            max: max.max(1),
            rng: SystemRandom::new(),
            table: Mutex::new(SessionTable::default()),
        }
    }

    fn expired(&self, live: &Live, now: Timestamp) -> bool {
        now >= live.expires || now.since(live.last_used) >= self.idle
    }

    /// A new session for `user`. At the limit, expired sessions go first, then the
    /// oldest: a flood of logins cannot grow the table.
    pub fn create(&self, user: &str, role: Role, now: Timestamp) -> Result<Session, AuthError> {
        let token = URL_SAFE_NO_PAD.encode(random_bytes::<32>(&self.rng)?);
        let csrf = URL_SAFE_NO_PAD.encode(random_bytes::<32>(&self.rng)?);
        let expires = now.plus(self.lifetime);
        let mut table = lock(&self.table);
        if table.by_key.len() >= self.max {
            table.retain(|live| !self.expired(live, now));
        }
        while table.by_key.len() >= self.max {
            let Some((_, key)) = table.by_age.pop_first() else {
                break;
            };
            table.by_key.remove(&key);
        }
        let seq = table.next_seq;
        table.next_seq += 1;
        let key = sha256(token.as_bytes());
        table.by_age.insert(seq, key);
        table.by_key.insert(
            key,
            Live {
                csrf: csrf.clone(),
                user: user.to_string(),
                role,
                expires,
                last_used: now,
                seq,
            },
        );
        Ok(Session {
            token,
            csrf,
            user: user.to_string(),
            role,
            expires,
        })
    }

    /// The session of the cookie `token`, its idle clock restarted; `None` for an unknown
    /// or an expired one (which is removed).
    pub fn get(&self, token: &str, now: Timestamp) -> Option<Session> {
        let key = sha256(token.as_bytes());
        let mut table = lock(&self.table);
        if self.expired(table.by_key.get(&key)?, now) {
            table.remove(&key);
            return None;
        }
        let live = table.by_key.get_mut(&key)?;
        live.last_used = live.last_used.max(now);
        Some(Session {
            token: token.to_string(),
            csrf: live.csrf.clone(),
            user: live.user.clone(),
            role: live.role,
            expires: live.expires,
        })
    }

    /// Logs the session out.
    pub fn remove(&self, token: &str) {
        lock(&self.table).remove(&sha256(token.as_bytes()));
    }

    /// Ends every session of `name` (dropped or changed in the users file).
    pub fn remove_user(&self, name: &str) {
        lock(&self.table).retain(|live| live.user != name);
    }

    /// Keeps only the sessions whose user and role `keep` accepts.
    pub fn retain(&self, mut keep: impl FnMut(&str, Role) -> bool) {
        lock(&self.table).retain(|live| keep(&live.user, live.role));
    }

    /// Drops the expired sessions (a timer's sweep; `get` and `create` drop them too).
    pub fn purge_expired(&self, now: Timestamp) {
        lock(&self.table).retain(|live| !self.expired(live, now));
    }

    pub fn len(&self) -> usize {
        lock(&self.table).by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Login attempts in all per second (the interface document's limit).
pub const LOGINS_PER_SECOND: usize = 5;
/// Consecutive failures of a user name or an address before each attempt must wait.
pub const FREE_FAILURES: u32 = 3;
/// The first wait, doubled per further failure up to [`MAX_WAIT`].
pub const FIRST_WAIT: Duration = Duration::from_secs(1);
pub const MAX_WAIT: Duration = Duration::from_secs(15 * 60);
/// A name or address without a failure for this long starts again from nothing: an old
/// run of typos does not make today's first one cost 15 minutes.
pub const FORGET_AFTER: Duration = Duration::from_secs(24 * 60 * 60);
/// User names and addresses tracked at most; past it the least recently failed is
/// forgotten, so cycling names or addresses cannot grow the table.
pub const MAX_TRACKED: usize = 10_000;

/// What a back-off is kept for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Tracked {
    /// Lowercase, at most 64 characters.
    User(String),
    /// An IPv4 address, or an IPv6 address's /64 (one host's usual share).
    Addr(IpAddr),
}

fn user_key(user: &str) -> Tracked {
    Tracked::User(
        user.chars()
            .flat_map(char::to_lowercase)
            .take(MAX_NAME_LEN)
            .collect(),
    )
}

fn addr_key(addr: IpAddr) -> Tracked {
    Tracked::Addr(match addr.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
        v4 => v4,
    })
}

struct Failures {
    count: u32,
    last: Timestamp,
    /// Order of the last failure, for forgetting the least recent.
    seq: u64,
}

/// The wait after `count` consecutive failures.
fn backoff(count: u32) -> Duration {
    match count.checked_sub(FREE_FAILURES) {
        None => Duration::ZERO,
        Some(doublings) => FIRST_WAIT
            .checked_mul(1u32 << doublings.min(20))
            .map_or(MAX_WAIT, |w| w.min(MAX_WAIT)),
    }
}

#[derive(Default)]
struct LimiterState {
    /// The attempts of the last second, oldest first (at most [`LOGINS_PER_SECOND`]).
    recent: VecDeque<Timestamp>,
    failures: HashMap<Tracked, Failures>,
    by_age: BTreeMap<u64, Tracked>,
    next_seq: u64,
}

impl LimiterState {
    fn forget(&mut self, key: &Tracked) {
        if let Some(f) = self.failures.remove(key) {
            self.by_age.remove(&f.seq);
        }
    }

    /// How long `key` must still wait.
    fn wait(&mut self, key: &Tracked, now: Timestamp) -> Duration {
        let Some(f) = self.failures.get(key) else {
            return Duration::ZERO;
        };
        if now.since(f.last) >= FORGET_AFTER {
            self.forget(key);
            return Duration::ZERO;
        }
        let until = f.last.plus(backoff(f.count));
        until.since(now)
    }

    fn failed(&mut self, key: Tracked, now: Timestamp) {
        let count = match self.failures.get(&key) {
            Some(f) if now.since(f.last) < FORGET_AFTER => f.count.saturating_add(1),
            _ => 1,
        };
        self.forget(&key);
        while self.failures.len() >= MAX_TRACKED {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.failures.remove(&oldest);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_age.insert(seq, key.clone());
        self.failures.insert(
            key,
            Failures {
                count,
                last: now,
                seq,
            },
        );
    }
}

/// The login limiter: 5 attempts a second in all, and a doubling wait per user name and
/// per client address after 3 consecutive failures. Call [`check`](Self::check) before
/// verifying the password, then [`failed`](Self::failed) or
/// [`succeeded`](Self::succeeded).
#[derive(Default)]
pub struct LoginLimiter {
    state: Mutex<LimiterState>,
}

impl LoginLimiter {
    pub fn new() -> Self {
        Self::default()
    }

    /// `Ok` when this attempt may go ahead (and it is counted), else how long to wait.
    pub fn check(&self, user: &str, addr: IpAddr, now: Timestamp) -> Result<(), Duration> {
        let mut state = lock(&self.state);
        let wait = state
            .wait(&user_key(user), now)
            .max(state.wait(&addr_key(addr), now));
        if !wait.is_zero() {
            return Err(wait);
        }
        while state
            .recent
            .front()
            .is_some_and(|&t| now.since(t) >= Duration::from_secs(1))
        {
            state.recent.pop_front();
        }
        if state.recent.len() >= LOGINS_PER_SECOND {
            let oldest = state.recent.front().copied().unwrap_or(now);
            let wait = oldest.plus(Duration::from_secs(1)).since(now);
            return Err(wait.max(Duration::from_millis(1)));
        }
        state.recent.push_back(now);
        Ok(())
    }

    /// The password was wrong (or the user unknown).
    pub fn failed(&self, user: &str, addr: IpAddr, now: Timestamp) {
        let mut state = lock(&self.state);
        state.failed(user_key(user), now);
        state.failed(addr_key(addr), now);
    }

    /// The login succeeded: the user's and the address's failures are cleared.
    pub fn succeeded(&self, user: &str, addr: IpAddr) {
        let mut state = lock(&self.state);
        state.forget(&user_key(user));
        state.forget(&addr_key(addr));
    }

    /// User names and addresses with failures kept.
    pub fn tracked(&self) -> usize {
        lock(&self.state).failures.len()
    }
}

/// The session cookie's name. `__Host-`: the browser takes it only with `Secure`,
/// `Path=/` and no `Domain`, so a sibling subdomain cannot plant one.
pub const SESSION_COOKIE: &str = "__Host-dw_session";

/// The `Set-Cookie` value for a session `token` (as [`Sessions::create`] makes it:
/// base64url, nothing to escape).
pub fn session_cookie(token: &str, max_age: Duration) -> String {
    debug_assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    format!(
        "{SESSION_COOKIE}={token}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age={}",
        max_age.as_secs()
    )
}

/// The `Set-Cookie` value that removes the session cookie (logout).
pub fn cleared_cookie() -> String {
    format!("{SESSION_COOKIE}=; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=0")
}

/// The value of cookie `name` in a `Cookie` header (`a=b; c=d`), the first if repeated.
pub fn cookie_value<'a>(cookie_header: &'a str, name: &str) -> Option<&'a str> {
    cookie_header.split(';').find_map(|pair| {
        let (n, v) = pair.split_once('=')?;
        (n.trim() == name).then(|| {
            let v = v.trim();
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v)
        })
    })
}

/// A reverse proxy that authenticates users itself and names them in a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyAuth {
    /// The proxy's addresses: only a connection from one of them is believed.
    pub addresses: Vec<IpAddr>,
    /// The header naming the user (`X-Remote-User`, say).
    pub user_header: String,
    /// The role of a user the users file does not list.
    pub default_role: Role,
}

impl ProxyAuth {
    /// The user the proxy vouches for: `None` when the connection is not from the proxy
    /// (anyone can send the header), without the header, or with a value that is no user
    /// name. The users file's role when it lists the name, else `default_role`.
    pub fn proxy_user(
        &self,
        peer: IpAddr,
        header_value: Option<&str>,
        users: &Users,
    ) -> Option<(String, Role)> {
        let peer = peer.to_canonical();
        if !self.addresses.iter().any(|a| a.to_canonical() == peer) {
            return None;
        }
        let name = header_value?.trim();
        if !valid_user_name(name) {
            return None;
        }
        let role = users.role_of(name).unwrap_or(self.default_role);
        Some((name.to_string(), role))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::time::Instant;

    const T0: Timestamp = Timestamp(1_700_000_000_000);

    fn at(ms: u64) -> Timestamp {
        T0.plus(Duration::from_millis(ms))
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// An argon2id hash at a test's cost (fast in a debug build).
    fn hash_at(password: &str, m: u32, t: u32) -> String {
        let params = Params::new(m, t, 1, None).unwrap();
        let salt = SaltString::encode_b64(b"0123456789abcdef").unwrap();
        Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password(password.as_bytes(), &salt)
            .unwrap()
            .to_string()
    }

    fn cheap(password: &str) -> String {
        hash_at(password, 8, 1)
    }

    /// A well-formed PHC string of `algorithm` with the given parameters; never verified.
    fn phc(algorithm: &str, version: &str, params: &str) -> String {
        format!(
            "${algorithm}${version}${params}$c2FsdHNhbHRzYWx0c2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
        )
    }

    fn v4(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    #[test]
    fn roles_read_and_write_their_two_words_only() {
        for role in [Role::Viewer, Role::Operator] {
            assert_eq!(role.as_str().parse::<Role>().unwrap(), role);
            assert_eq!(role.to_string(), role.as_str());
        }
        assert_eq!("viewer".parse::<Role>().unwrap(), Role::Viewer);
        assert_eq!("operator".parse::<Role>().unwrap(), Role::Operator);
        for bad in ["Operator", "admin", "", " viewer", "operators"] {
            assert!(bad.parse::<Role>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_user_name_is_1_to_64_of_a_small_alphabet() {
        let long = "a".repeat(64);
        for good in ["a", "alice", "a.b_c@d-e", "Z9", long.as_str()] {
            assert!(valid_user_name(good), "{good:?}");
        }
        let too_long = "a".repeat(65);
        for bad in [
            "",
            too_long.as_str(),
            "a b",
            "a:b",
            "ä",
            "a/b",
            "a\n",
            "<b>",
        ] {
            assert!(!valid_user_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_users_file_has_one_user_a_line_with_comments_and_blanks() {
        let text = format!(
            "# the console's users\n\n  alice:operator:{}\r\n# bob looks only\nbob:viewer:{}\n   \n",
            cheap("alice's long password"),
            cheap("bob's long password!")
        );
        let users = Users::parse(&text, "users").unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users.names(), ["alice", "bob"]);
        assert_eq!(users.role_of("alice"), Some(Role::Operator));
        assert_eq!(users.role_of("bob"), Some(Role::Viewer));
        assert_eq!(users.role_of("carol"), None);
        let empty = Users::parse("# nobody yet\n", "users").unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.verify("alice", "alice's long password"), None);
    }

    #[test]
    fn each_bad_line_is_named_with_its_number_and_never_quotes_the_hash() {
        let good = cheap("a good long password");
        let cases: Vec<(String, LineProblem)> = vec![
            ("alice:operator".into(), LineProblem::Format),
            ("just-a-password-pasted-here".into(), LineProblem::Format),
            (format!("al ice:viewer:{good}"), LineProblem::Name),
            (
                format!("{}:viewer:{good}", "a".repeat(65)),
                LineProblem::Name,
            ),
            (
                format!("Bob:viewer:{good}"),
                LineProblem::Duplicate {
                    name: "Bob".into(),
                    first: 2,
                },
            ),
            (
                format!("carol:admin:{good}"),
                LineProblem::Role(Some("admin".into())),
            ),
            (format!("carol:hunter2!:{good}"), LineProblem::Role(None)),
            (
                format!("carol:viewer:{}", phc("argon2i", "v=19", "m=8,t=1,p=1")),
                LineProblem::Algorithm("argon2i"),
            ),
            (
                format!("carol:viewer:{}", phc("argon2d", "v=19", "m=8,t=1,p=1")),
                LineProblem::Algorithm("argon2d"),
            ),
            (
                "carol:viewer:$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW".into(),
                LineProblem::NotArgon2id,
            ),
            (
                "carol:viewer:correct horse battery".into(),
                LineProblem::NotArgon2id,
            ),
            (
                format!("carol:viewer:{}", phc("scrypt", "v=19", "m=8,t=1,p=1")),
                LineProblem::NotArgon2id,
            ),
            (
                format!("carol:viewer:{}", phc("argon2id", "v=16", "m=8,t=1,p=1")),
                LineProblem::Version,
            ),
            (
                format!(
                    "carol:viewer:{}",
                    phc("argon2id", "m=8", "t=1,p=1").replace("$m=8$", "$m=8,")
                ),
                LineProblem::Version,
            ),
            (
                format!(
                    "carol:viewer:{}",
                    phc("argon2id", "v=19", "m=262145,t=1,p=1")
                ),
                LineProblem::Cost {
                    param: "m",
                    value: 262_145,
                    bound: MAX_M_COST,
                },
            ),
            (
                format!("carol:viewer:{}", phc("argon2id", "v=19", "m=64,t=17,p=1")),
                LineProblem::Cost {
                    param: "t",
                    value: 17,
                    bound: MAX_T_COST,
                },
            ),
            (
                format!("carol:viewer:{}", phc("argon2id", "v=19", "m=128,t=1,p=9")),
                LineProblem::Cost {
                    param: "p",
                    value: 9,
                    bound: MAX_P_COST,
                },
            ),
            (
                format!("carol:viewer:{}", phc("argon2id", "v=19", "m=8,t=0,p=1")),
                LineProblem::Params,
            ),
        ];
        for (line, want) in cases {
            // Line 2 is bob's; the line under test is line 4.
            let text = format!("# users\nbob:viewer:{good}\n\n{line}\n");
            let err = Users::parse(&text, "/etc/dnssec-warden/users").unwrap_err();
            let said = err.to_string();
            match &err {
                AuthError::Line {
                    file,
                    line: 4,
                    problem,
                } => {
                    assert_eq!(file, "/etc/dnssec-warden/users");
                    assert_eq!(problem, &want, "{line}");
                }
                other => panic!("{line}: {other:?}"),
            }
            assert!(
                said.starts_with("/etc/dnssec-warden/users line 4: "),
                "{said}"
            );
            let hash = line.splitn(3, ':').nth(2).unwrap_or(&line);
            assert!(!said.contains(hash), "{said}");
            assert!(!said.contains("c2FsdHNhbHRzYWx0c2FsdA"), "{said}");
            assert!(!said.contains("hunter2"), "{said}");
        }
    }

    #[test]
    fn costs_up_to_the_bounds_are_accepted() {
        let text = format!(
            "a:viewer:{}\nb:viewer:{}\n",
            phc("argon2id", "v=19", "m=262144,t=16,p=8"),
            phc("argon2id", "v=19", "m=8,t=1,p=1")
        );
        let users = Users::parse(&text, "users").unwrap();
        assert_eq!(users.len(), 2);
    }

    #[test]
    fn a_password_verifies_for_its_user_only() {
        let text = format!(
            "alice:operator:{}\nbob:viewer:{}\n",
            cheap("alice's long password"),
            cheap("bob's long password!")
        );
        let users = Users::parse(&text, "users").unwrap();
        assert_eq!(
            users.verify("alice", "alice's long password"),
            Some(Role::Operator)
        );
        assert_eq!(
            users.verify("bob", "bob's long password!"),
            Some(Role::Viewer)
        );
        assert_eq!(users.verify("alice", "bob's long password!"), None);
        assert_eq!(users.verify("alice", "alice's long passwor"), None);
        assert_eq!(users.verify("alice", ""), None);
        // Names are exact; an unknown one never logs in, whatever the password.
        assert_eq!(users.verify("Alice", "alice's long password"), None);
        assert_eq!(users.verify("mallory", "alice's long password"), None);
        assert_eq!(users.verify("mallory", ""), None);
    }

    #[test]
    fn a_password_over_the_length_bound_is_refused_without_hashing() {
        let long = "x".repeat(MAX_PASSWORD_BYTES + 1);
        let users = Users::parse(&format!("alice:viewer:{}\n", cheap(&long)), "u").unwrap();
        assert_eq!(users.verify("alice", &long), None);
        let at_bound = "x".repeat(MAX_PASSWORD_BYTES);
        let users = Users::parse(&format!("alice:viewer:{}\n", cheap(&at_bound)), "u").unwrap();
        assert_eq!(users.verify("alice", &at_bound), Some(Role::Viewer));
    }

    #[test]
    fn an_unknown_name_costs_what_the_users_hashes_cost() {
        // Two users at one cost, one at another: the dummy takes the common one.
        let text = format!(
            "a:viewer:{}\nb:viewer:{}\nc:viewer:{}\n",
            cheap("a long password a"),
            hash_at("a long password b", 2048, 2),
            hash_at("a long password c", 2048, 2),
        );
        let users = Users::parse(&text, "u").unwrap();
        let dummy = users.dummy.password_hash();
        assert_eq!(dummy.algorithm.as_str(), "argon2id");
        assert_eq!(dummy.params.to_string(), "m=2048,t=2,p=1");
        assert_eq!(dummy.hash.map(|h| h.len()), Some(32));
        // And it is verified against: as slow as a known name, not answered at once.
        let time = |name: &str| {
            (0..5)
                .map(|_| {
                    let start = Instant::now();
                    assert_eq!(users.verify(name, "a wrong password"), None);
                    start.elapsed()
                })
                .min()
                .unwrap()
        };
        let (known, unknown) = (time("b"), time("nobody"));
        // Without the dummy an unknown name is answered ~1000 times faster; a factor of
        // 10 leaves room for a loaded machine.
        assert!(unknown * 10 > known, "known {known:?}, unknown {unknown:?}");
        // With no user at all, OWASP's cost.
        let none = Users::parse("", "u").unwrap();
        assert_eq!(
            none.dummy.password_hash().params.to_string(),
            "m=19456,t=2,p=1"
        );
    }

    #[test]
    fn the_users_file_is_read_from_its_path_and_a_missing_one_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users");
        std::fs::write(
            &path,
            format!("alice:viewer:{}\n", cheap("a long password!")),
        )
        .unwrap();
        let users = Users::load(&path).unwrap();
        assert_eq!(
            users.verify("alice", "a long password!"),
            Some(Role::Viewer)
        );
        let missing = dir.path().join("no-such-users");
        let err = Users::load(&missing).unwrap_err();
        assert!(matches!(err, AuthError::Read { .. }), "{err:?}");
        assert!(err.to_string().contains("no-such-users"), "{err}");
        std::fs::write(&path, "alice:viewer:plain\n").unwrap();
        let err = Users::load(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{} line 1:", path.display())),
            "{err}"
        );
    }

    #[test]
    fn a_reload_names_the_users_dropped_or_changed() {
        let (a, b, c) = (
            cheap("password of a!"),
            cheap("password of b!"),
            cheap("password of c!"),
        );
        let old = Users::parse(
            &format!("a:viewer:{a}\nb:viewer:{b}\nc:operator:{c}\nd:viewer:{a}\n"),
            "u",
        )
        .unwrap();
        let new = Users::parse(
            &format!("a:viewer:{a}\nb:operator:{b}\nd:viewer:{b}\ne:viewer:{c}\n"),
            "u",
        )
        .unwrap();
        assert_eq!(old.dropped_or_changed(&new), ["b", "c", "d"]);
        assert!(old.dropped_or_changed(&old.clone()).is_empty());
    }

    #[test]
    fn debug_output_shows_no_hash() {
        let users = Users::parse(
            &format!("alice:viewer:{}\n", cheap("a long password!")),
            "u",
        )
        .unwrap();
        let shown = format!("{users:?}");
        assert!(
            shown.contains("alice") && shown.contains("Viewer"),
            "{shown}"
        );
        assert!(!shown.contains("argon2"), "{shown}");
    }

    #[test]
    fn hash_password_makes_an_owasp_argon2id_line_the_users_file_accepts() {
        let first = hash_password("correct horse battery").unwrap();
        let parsed = PasswordHash::new(&first).unwrap();
        assert_eq!(parsed.algorithm.as_str(), "argon2id");
        assert_eq!(parsed.version, Some(19));
        assert_eq!(parsed.params.to_string(), "m=19456,t=2,p=1");
        // A random salt: the same password hashes differently.
        assert_ne!(first, hash_password("correct horse battery").unwrap());
        let users = Users::parse(&format!("alice:operator:{first}\n"), "u").unwrap();
        assert_eq!(
            users.verify("alice", "correct horse battery"),
            Some(Role::Operator)
        );
        assert_eq!(users.verify("alice", "correct horse batter"), None);
    }

    #[test]
    fn hash_password_refuses_short_and_overlong_passwords() {
        assert!(matches!(
            hash_password("elevenchars"),
            Err(AuthError::PasswordTooShort)
        ));
        assert!(matches!(
            hash_password(""),
            Err(AuthError::PasswordTooShort)
        ));
        // Characters, not bytes: eleven two-byte characters are too few.
        assert!(matches!(
            hash_password(&"é".repeat(11)),
            Err(AuthError::PasswordTooShort)
        ));
        assert!(matches!(
            hash_password(&"x".repeat(MAX_PASSWORD_BYTES + 1)),
            Err(AuthError::PasswordTooLong)
        ));
        assert!(matches!(
            hash_password(&"é".repeat(MAX_PASSWORD_BYTES / 2 + 1)),
            Err(AuthError::PasswordTooLong)
        ));
        let said = AuthError::PasswordTooShort.to_string();
        assert!(said.contains("12 characters"), "{said}");
    }

    #[test]
    fn hash_password_accepts_the_bounds_themselves() {
        assert!(hash_password("twelve chars").is_ok());
        assert!(hash_password(&"x".repeat(MAX_PASSWORD_BYTES)).is_ok());
    }

    fn sessions() -> Sessions {
        Sessions::new(secs(10), secs(5), 100)
    }

    #[test]
    fn a_session_has_two_random_url_safe_secrets() {
        let s = sessions();
        let a = s.create("alice", Role::Operator, T0).unwrap();
        let b = s.create("alice", Role::Operator, T0).unwrap();
        for secret in [&a.token, &a.csrf, &b.token, &b.csrf] {
            assert_eq!(secret.len(), 43, "{secret}");
            assert!(URL_SAFE_NO_PAD.decode(secret).is_ok_and(|b| b.len() == 32));
        }
        assert_ne!(a.token, a.csrf);
        assert_ne!(a.token, b.token);
        assert_ne!(a.csrf, b.csrf);
        assert_eq!(a.expires, at(10_000));
        assert_eq!(s.get(&a.token, at(1)), Some(a.clone()));
        assert_eq!(s.get(&b.token, at(1)).unwrap().csrf, b.csrf);
        assert_eq!(s.get("", at(1)), None);
        assert_eq!(s.get(&a.csrf, at(1)), None);
        let shown = format!("{a:?}");
        assert!(
            !shown.contains(&a.token) && !shown.contains(&a.csrf),
            "{shown}"
        );
    }

    #[test]
    fn a_session_ends_at_its_absolute_lifetime_however_used() {
        let s = sessions();
        let a = s.create("alice", Role::Viewer, T0).unwrap();
        for ms in [4_000, 8_000, 9_999] {
            assert!(s.get(&a.token, at(ms)).is_some(), "{ms}");
        }
        assert_eq!(s.get(&a.token, at(10_000)), None);
        assert!(s.is_empty());
    }

    #[test]
    fn a_session_ends_when_idle_and_each_use_restarts_the_idle_clock() {
        // An hour's lifetime: only the 5 s idle timeout ends these.
        let s = Sessions::new(secs(3600), secs(5), 100);
        let a = s.create("alice", Role::Viewer, T0).unwrap();
        assert!(s.get(&a.token, at(4_999)).is_some());
        // 9 s after creation, but only 4 s after the last use.
        assert!(s.get(&a.token, at(9_000)).is_some());
        assert_eq!(s.get(&a.token, at(14_000)), None);
        // Removed, not only refused: an earlier clock does not bring it back.
        assert_eq!(s.len(), 0);
        assert_eq!(s.get(&a.token, at(9_001)), None);
        let b = s.create("bob", Role::Viewer, T0).unwrap();
        assert!(s.get(&b.token, at(4_999)).is_some());
        assert!(s.get(&b.token, at(9_998)).is_some());
        assert_eq!(s.get(&b.token, at(14_998)), None);
    }

    #[test]
    fn sessions_are_removed_one_by_user_or_by_rule() {
        let s = sessions();
        let a1 = s.create("alice", Role::Operator, T0).unwrap();
        let a2 = s.create("alice", Role::Operator, T0).unwrap();
        let b = s.create("bob", Role::Viewer, T0).unwrap();
        let c = s.create("carol", Role::Operator, T0).unwrap();
        s.remove(&a1.token);
        assert_eq!(s.get(&a1.token, T0), None);
        assert!(s.get(&a2.token, T0).is_some());
        s.remove_user("alice");
        assert_eq!(s.get(&a2.token, T0), None);
        assert!(s.get(&b.token, T0).is_some());
        s.retain(|_, role| role == Role::Viewer);
        assert_eq!(s.get(&c.token, T0), None);
        assert!(s.get(&b.token, T0).is_some());
        assert_eq!(s.len(), 1);
        s.purge_expired(at(5_000));
        assert!(s.is_empty());
    }

    #[test]
    fn past_the_limit_the_oldest_session_goes() {
        let s = Sessions::new(secs(3600), secs(600), 3);
        let made: Vec<Session> = (0..4)
            .map(|i| s.create(&format!("u{i}"), Role::Viewer, at(i)).unwrap())
            .collect();
        assert_eq!(s.len(), 3);
        assert_eq!(s.get(&made[0].token, at(10)), None);
        for m in &made[1..] {
            assert!(s.get(&m.token, at(10)).is_some(), "{}", m.user);
        }
    }

    #[test]
    fn past_the_limit_an_expired_session_goes_before_the_oldest() {
        let s = Sessions::new(secs(3600), secs(10), 2);
        let old = s.create("old", Role::Viewer, T0).unwrap();
        let idle = s.create("idle", Role::Viewer, at(1_000)).unwrap();
        assert!(s.get(&old.token, at(9_000)).is_some());
        // At 12 s `idle` has been idle 11 s; `old` only 3 s.
        let new = s.create("new", Role::Viewer, at(12_000)).unwrap();
        assert!(s.get(&old.token, at(12_000)).is_some());
        assert!(s.get(&new.token, at(12_000)).is_some());
        assert_eq!(s.get(&idle.token, at(1_000)), None);
    }

    #[test]
    fn the_table_holds_digests_of_the_tokens_not_the_tokens() {
        let s = sessions();
        let a = s.create("alice", Role::Viewer, T0).unwrap();
        let table = lock(&s.table);
        assert!(table.by_key.contains_key(&sha256(a.token.as_bytes())));
        assert!(
            !table
                .by_key
                .keys()
                .any(|k| k.as_slice() == a.token.as_bytes())
        );
    }

    #[test]
    fn only_the_sessions_own_csrf_token_passes() {
        let s = sessions();
        let a = s.create("alice", Role::Operator, T0).unwrap();
        let b = s.create("alice", Role::Operator, T0).unwrap();
        assert!(a.csrf_ok(&a.csrf));
        let mut last_changed = a.csrf.clone();
        last_changed.pop();
        last_changed.push(if a.csrf.ends_with('A') { 'B' } else { 'A' });
        for wrong in [
            "",
            &a.csrf[..42],
            &format!("{}A", a.csrf),
            &last_changed,
            &a.token,
            &b.csrf,
        ] {
            assert!(!a.csrf_ok(wrong), "{wrong:?}");
        }
        assert!(same_secret("x", "x") && !same_secret("x", "y"));
    }

    #[test]
    fn the_shared_tables_can_be_shared() {
        fn shared<T: Send + Sync>() {}
        shared::<Sessions>();
        shared::<LoginLimiter>();
        shared::<Users>();
    }

    #[test]
    fn at_most_five_login_attempts_a_second_in_all() {
        let l = LoginLimiter::new();
        for i in 0..5 {
            assert_eq!(
                l.check(&format!("u{i}"), v4(i), at(u64::from(i) * 10)),
                Ok(())
            );
        }
        assert_eq!(
            l.check("other", v4(9), at(300)),
            Err(Duration::from_millis(700))
        );
        assert_eq!(
            l.check("other", v4(9), at(999)),
            Err(Duration::from_millis(1))
        );
        // The first attempt's second is over: one more may go.
        assert_eq!(l.check("other", v4(9), at(1_000)), Ok(()));
        assert_eq!(
            l.check("other", v4(9), at(1_005)),
            Err(Duration::from_millis(5))
        );
        assert_eq!(l.check("other", v4(9), at(1_010)), Ok(()));
    }

    /// Fails `user` from `addr` `n` times a second apart from `start` ms (each checked
    /// first, as the handler does); the time of the last failure.
    fn fail_n(l: &LoginLimiter, user: &str, addr: IpAddr, start: u64, n: u64) -> u64 {
        let mut t = start;
        for i in 0..n {
            t = start + i * 1_000;
            assert_eq!(l.check(user, addr, at(t)), Ok(()), "attempt {i}");
            l.failed(user, addr, at(t));
        }
        t
    }

    #[test]
    fn after_three_failures_each_attempt_waits_doubling_to_fifteen_minutes() {
        let l = LoginLimiter::new();
        let t = fail_n(&l, "alice", v4(1), 0, 3);
        assert_eq!(l.check("alice", v4(1), at(t)), Err(secs(1)));
        assert_eq!(
            l.check("alice", v4(1), at(t + 999)),
            Err(Duration::from_millis(1))
        );
        let mut t = t + 1_000;
        let mut wait = 1_000;
        for _ in 0..12 {
            assert_eq!(l.check("alice", v4(1), at(t)), Ok(()));
            l.failed("alice", v4(1), at(t));
            wait = (wait * 2).min(15 * 60 * 1_000);
            assert_eq!(
                l.check("alice", v4(1), at(t)),
                Err(Duration::from_millis(wait))
            );
            t += wait;
        }
        assert_eq!(wait, 15 * 60 * 1_000);
        assert_eq!(backoff(u32::MAX), MAX_WAIT);
    }

    #[test]
    fn the_back_off_is_kept_per_user_name_and_per_address() {
        let l = LoginLimiter::new();
        // alice from three addresses: alice waits from a fourth.
        for (i, a) in [1, 2, 3].into_iter().enumerate() {
            fail_n(&l, "alice", v4(a), i as u64 * 1_000, 1);
        }
        assert_eq!(
            l.check("alice", v4(4), at(2_500)),
            Err(Duration::from_millis(500))
        );
        // Its name in capitals, or followed by more than 64 characters, is the same name.
        assert!(l.check("ALICE", v4(5), at(2_500)).is_err());
        let long = format!("{}x", "b".repeat(64));
        fail_n(&l, &long, v4(6), 3_000, 3);
        assert!(
            l.check(&format!("{}y", "B".repeat(64)), v4(7), at(5_500))
                .is_err()
        );
        // Three names from one address: the address waits for a fourth name.
        for (i, u) in ["c1", "c2", "c3"].into_iter().enumerate() {
            fail_n(&l, u, v4(8), 10_000 + i as u64 * 1_000, 1);
        }
        assert!(l.check("c4", v4(8), at(12_500)).is_err());
        // Others are not held up.
        assert_eq!(l.check("dave", v4(9), at(12_500)), Ok(()));
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_one_its_address() {
        let l = LoginLimiter::new();
        let host = |segments: [u16; 8]| IpAddr::V6(Ipv6Addr::from(segments));
        let a = host([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]);
        for (i, u) in ["u1", "u2", "u3"].into_iter().enumerate() {
            fail_n(&l, u, a, i as u64 * 1_000, 1);
        }
        assert!(
            l.check("u4", host([0x2001, 0xdb8, 0, 0, 9, 9, 9, 9]), at(2_500))
                .is_err()
        );
        assert_eq!(
            l.check("u4", host([0x2001, 0xdb8, 0, 1, 0, 0, 0, 1]), at(2_500)),
            Ok(())
        );
        for (i, u) in ["v1", "v2", "v3"].into_iter().enumerate() {
            fail_n(&l, u, v4(1), 10_000 + i as u64 * 1_000, 1);
        }
        let mapped = IpAddr::V6(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped());
        assert!(l.check("v4", mapped, at(12_500)).is_err());
    }

    #[test]
    fn a_success_clears_the_users_and_the_addresss_failures() {
        let l = LoginLimiter::new();
        let t = fail_n(&l, "alice", v4(1), 0, 3);
        assert!(l.check("alice", v4(1), at(t)).is_err());
        assert!(l.check("bob", v4(1), at(t)).is_err());
        l.succeeded("alice", v4(1));
        assert_eq!(l.check("alice", v4(1), at(t)), Ok(()));
        // Counting starts again: one failure is free.
        l.failed("alice", v4(1), at(t));
        assert_eq!(l.check("alice", v4(1), at(t + 1)), Ok(()));
        assert_eq!(l.tracked(), 2);
    }

    #[test]
    fn a_day_without_failures_forgets_them() {
        let l = LoginLimiter::new();
        (0..8).for_each(|_| l.failed("alice", v4(1), T0));
        assert_eq!(l.check("alice", v4(1), T0), Err(secs(32)));
        let t = 0;
        let day = 24 * 3600 * 1_000;
        assert!(l.check("alice", v4(1), at(t + day - 1)).is_ok());
        l.failed("alice", v4(1), at(t + day));
        assert_eq!(l.check("alice", v4(1), at(t + day)), Ok(()));
    }

    #[test]
    fn the_tracked_names_and_addresses_are_bounded_the_oldest_forgotten() {
        let l = LoginLimiter::new();
        let victim = fail_n(&l, "victim", v4(1), 0, 3);
        assert!(l.check("victim", v4(2), at(victim)).is_err());
        // Checks alone track nothing.
        for i in 0..1_000u64 {
            let _ = l.check(&format!("probe{i}"), v4(3), at(10_000 + i * 1_000));
        }
        assert_eq!(l.tracked(), 2);
        for i in 0..MAX_TRACKED as u64 {
            l.failed(&format!("user{i}"), v4(1), at(2_000_000 + i));
        }
        assert_eq!(l.tracked(), MAX_TRACKED);
        let now = at(2_000_000 + MAX_TRACKED as u64);
        assert_eq!(l.check("victim", v4(2), now), Ok(()));
        // The most recent are still held.
        l.failed("user9999", v4(9), now);
        l.failed("user9999", v4(9), now);
        assert!(l.check("user9999", v4(10), now).is_err());
    }

    #[test]
    fn the_session_cookie_is_http_only_secure_strict_and_host_only() {
        let set = session_cookie("abc-_123", secs(43_200));
        assert_eq!(
            set,
            "__Host-dw_session=abc-_123; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=43200"
        );
        let cleared = cleared_cookie();
        assert!(cleared.starts_with("__Host-dw_session=;"), "{cleared}");
        assert!(cleared.ends_with("Max-Age=0"), "{cleared}");
        for attr in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
            assert!(cleared.contains(attr), "{cleared}");
        }
        assert!(!set.contains("Domain") && !cleared.contains("Domain"));
    }

    #[test]
    fn a_cookie_is_found_by_its_exact_name() {
        let h = "theme=dark; __Host-dw_session=tok123;lang=en";
        assert_eq!(cookie_value(h, SESSION_COOKIE), Some("tok123"));
        assert_eq!(cookie_value(h, "lang"), Some("en"));
        assert_eq!(cookie_value("  a = 1 ;  b=2  ", "a"), Some("1"));
        assert_eq!(cookie_value("  a = 1 ;  b=2  ", "b"), Some("2"));
        assert_eq!(cookie_value("x_session=1; session=2", "session"), Some("2"));
        assert_eq!(cookie_value("session_old=1", "session"), None);
        assert_eq!(cookie_value("Session=1", "session"), None);
        assert_eq!(cookie_value("a=\"quoted\"", "a"), Some("quoted"));
        assert_eq!(cookie_value("a=b=c", "a"), Some("b=c"));
        assert_eq!(cookie_value("a=1; a=2", "a"), Some("1"));
        assert_eq!(cookie_value("", "a"), None);
        assert_eq!(cookie_value("novalue; a", "a"), None);
        let set = session_cookie("tok", secs(1));
        let pair = set.split(';').next().unwrap();
        assert_eq!(cookie_value(pair, SESSION_COOKIE), Some("tok"));
    }

    #[test]
    fn a_proxys_header_is_believed_from_the_proxy_only() {
        let users = Users::parse(
            &format!("alice:operator:{}\n", cheap("a long password!")),
            "u",
        )
        .unwrap();
        let proxy = ProxyAuth {
            addresses: vec![v4(10), IpAddr::V6(Ipv6Addr::LOCALHOST)],
            user_header: "X-Remote-User".into(),
            default_role: Role::Viewer,
        };
        assert_eq!(
            proxy.proxy_user(v4(10), Some("alice"), &users),
            Some(("alice".into(), Role::Operator))
        );
        assert_eq!(
            proxy.proxy_user(IpAddr::V6(Ipv6Addr::LOCALHOST), Some(" bob "), &users),
            Some(("bob".into(), Role::Viewer))
        );
        let mapped = IpAddr::V6(Ipv4Addr::new(127, 0, 0, 10).to_ipv6_mapped());
        assert_eq!(
            proxy.proxy_user(mapped, Some("alice"), &users),
            Some(("alice".into(), Role::Operator))
        );
        // Anyone else can send the header: not believed.
        assert_eq!(proxy.proxy_user(v4(11), Some("alice"), &users), None);
        assert_eq!(proxy.proxy_user(v4(10), None, &users), None);
        for bad in ["", "a b", "<script>", &"a".repeat(65), "alice\r\nX: y"] {
            assert_eq!(proxy.proxy_user(v4(10), Some(bad), &users), None, "{bad:?}");
        }
    }
}
