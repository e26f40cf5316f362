//! The logged-in sessions, in memory: keyed by a digest of their token, with absolute and
//! idle ends, and the constant-time check of their CSRF token.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::digest;
use ring::rand::SystemRandom;

use super::{AuthError, Role, lock, random_bytes};
use crate::time::Timestamp;

/// SHA-256, fixed length whatever the input: the sessions' map key and the CSRF check.
pub(super) fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest::digest(&digest::SHA256, bytes).as_ref());
    out
}

/// Equal without an early exit: compares SHA-256 digests (equal length whatever was
/// given) byte for byte, folding every difference in.
pub(super) fn same_secret(a: &str, b: &str) -> bool {
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
pub(super) struct Live {
    csrf: String,
    user: String,
    role: Role,
    expires: Timestamp,
    last_used: Timestamp,
    /// Creation order, for evicting the oldest.
    seq: u64,
}

#[derive(Default)]
pub(super) struct SessionTable {
    pub(super) by_key: HashMap<[u8; 32], Live>,
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

/// The logged-in sessions, in memory (a restart logs everyone out), shared by the
/// handlers.
pub struct Sessions {
    lifetime: Duration,
    idle: Duration,
    max: usize,
    rng: SystemRandom,
    pub(super) table: Mutex<SessionTable>,
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
