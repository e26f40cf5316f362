//! The users file: `NAME:ROLE:PHC` lines of argon2id hashes within cost bounds, the one
//! rule for a user name, and the hashes made for it.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use argon2::password_hash::{
    PasswordHash, PasswordHashString, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use thiserror::Error;

use super::{AuthError, Role, random_bytes};

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

/// `[A-Za-z0-9._@-]{1,64}`: the one rule for a user name, wherever it comes from.
pub fn valid_user_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'))
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

/// A password for a user made by the program itself (`demo --keep`'s console): 18 bytes
/// of the OS generator as 24 characters of base64url, nothing to type wrong or quote.
pub fn random_password() -> Result<String, AuthError> {
    let bytes = random_bytes::<18>(&SystemRandom::new())?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
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
    pub(super) dummy: PasswordHashString,
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
