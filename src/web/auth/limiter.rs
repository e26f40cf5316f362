//! The login limiter: attempts in all per second, and a doubling wait per user name and
//! per client address after consecutive failures.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use super::{MAX_NAME_LEN, lock};
use crate::time::Timestamp;

/// Login attempts in all per second: the provider's API allows its own logins no more
/// (docs/gcore-api.md), and the console keeps to the same bound.
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
pub(super) fn backoff(count: u32) -> Duration {
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
