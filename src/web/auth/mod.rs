//! The console's users, sessions, CSRF tokens and login limiter.
//!
//! Pure over time: every rule takes `now`, so the tests walk through an idle timeout or a
//! 15-minute back-off in milliseconds. Nothing here does I/O but [`Users::load`], and
//! nothing blocks but [`Users::verify`] and [`hash_password`] (argon2id: call them from
//! `spawn_blocking`).
//!
//! - `users`: the users file of argon2id hashes, and the rule for a user name;
//! - `sessions`: the logged-in sessions and their CSRF tokens;
//! - `limiter`: the login limiter;
//! - `cookies`: the session cookie, written and read;
//! - `proxy`: the users a trusted reverse proxy names.

mod cookies;
mod limiter;
mod proxy;
mod sessions;
#[cfg(test)]
mod tests;
mod users;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};

use ring::rand::{SecureRandom, SystemRandom};
use thiserror::Error;

pub use cookies::{SESSION_COOKIE, cleared_cookie, cookie_value, session_cookie};
pub use limiter::{
    FIRST_WAIT, FORGET_AFTER, FREE_FAILURES, LOGINS_PER_SECOND, LoginLimiter, MAX_TRACKED, MAX_WAIT,
};
pub use proxy::ProxyAuth;
pub use sessions::{Session, Sessions};
pub use users::{
    LineProblem, MAX_M_COST, MAX_NAME_LEN, MAX_P_COST, MAX_PASSWORD_BYTES, MAX_T_COST,
    MIN_PASSWORD_CHARS, Users, hash_password, random_password, valid_user_name,
};

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

/// Fills `N` bytes from the OS generator.
fn random_bytes<const N: usize>(rng: &SystemRandom) -> Result<[u8; N], AuthError> {
    let mut bytes = [0u8; N];
    rng.fill(&mut bytes).map_err(|_| AuthError::Random)?;
    Ok(bytes)
}

/// Where a lock poisoned by a panic is taken over: every change to these tables is
/// complete before anything that could panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
