//! The configuration file's values that more than one section's form reads (`config`'s
//! sections, each provider's own block): the `deserialize_with` helpers, one kind of value
//! each, what is wrong with a value on its own (the key is added by `serde_path_to_error`);
//! a secret given by one of its three keys; paths relative to the file. Below `provider`,
//! so that a provider's folder reads its block as `config` reads the rest.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::Error;
use serde::{Deserialize, Deserializer};
use url::Url;

use crate::secret::SecretSource;

/// A key of a block and what is wrong with it, found by a check across its keys. The key
/// is relative to the block (`api_key_file`); `config` names the block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    pub key: String,
    pub message: String,
}

impl KeyError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// The directory of the configuration file: a relative path in it is taken from there,
/// never from the working directory of whoever runs the command.
#[derive(Debug, Clone, Copy)]
pub struct FileDir<'a>(pub Option<&'a Path>);

impl FileDir<'_> {
    pub fn path(&self, path: PathBuf) -> PathBuf {
        match self.0 {
            Some(dir) if !path.is_absolute() => dir.join(path),
            _ => path,
        }
    }

    /// The secret `{name}_file`, `{name}_env` or `{name}_credential` gives: at most one of
    /// them is set (else the error names `{name}_file`).
    pub fn one_secret(
        &self,
        name: &str,
        file: Option<PathBuf>,
        env: Option<String>,
        credential: Option<String>,
    ) -> Result<Option<SecretSource>, KeyError> {
        let mut found: Vec<SecretSource> = [
            file.map(|p| SecretSource::File(self.path(p))),
            env.map(SecretSource::Env),
            credential.map(SecretSource::Credential),
        ]
        .into_iter()
        .flatten()
        .collect();
        if found.len() > 1 {
            return Err(KeyError::new(
                format!("{name}_file"),
                format!("set only one of {name}_file, {name}_env, {name}_credential"),
            ));
        }
        Ok(found.pop())
    }
}

pub fn secs<const N: u64>() -> Duration {
    Duration::from_secs(N)
}

/// An integer in `MIN..=MAX` (`MAX = u64::MAX`: no upper bound).
pub fn in_range<'de, const MIN: u64, const MAX: u64, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Copy + TryInto<u64>,
{
    let value = T::deserialize(d)?;
    match value.try_into() {
        Ok(v) if (MIN..=MAX).contains(&v) => Ok(value),
        _ if MAX == u64::MAX => Err(D::Error::custom(format!("must be at least {MIN}"))),
        _ => Err(D::Error::custom(format!("must be {MIN} to {MAX}"))),
    }
}

/// An http:// or https:// URL with a host. It may hold a token (a Slack webhook): the
/// message says what is wrong and never echoes it, as `Url`'s own serde impl would.
pub fn http_url<'de, D: Deserializer<'de>>(d: D) -> Result<Url, D::Error> {
    let text = String::deserialize(d)?;
    let url = Url::parse(&text).map_err(|e| D::Error::custom(format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(D::Error::custom(
            "must be an http:// or https:// URL with a host",
        ));
    }
    Ok(url)
}

/// [`http_url`] for an optional key.
pub fn some_http_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Url>, D::Error> {
    http_url(d).map(Some)
}

pub fn non_empty_path<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    let path = PathBuf::deserialize(d)?;
    if path.as_os_str().is_empty() {
        return Err(D::Error::custom("is empty"));
    }
    Ok(path)
}

pub fn secret_file<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    non_empty_path(d).map(Some)
}

pub fn env_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let var = String::deserialize(d)?;
    if var.is_empty() || var.contains('=') {
        return Err(D::Error::custom("is not a variable name"));
    }
    Ok(Some(var))
}

pub fn credential_name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let name = String::deserialize(d)?;
    if name.is_empty() || name.contains('/') {
        return Err(D::Error::custom("must be a credential name without '/'"));
    }
    Ok(Some(name))
}

pub fn username<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let name = String::deserialize(d)?;
    if name.trim().is_empty() {
        return Err(D::Error::custom("is empty"));
    }
    Ok(Some(name))
}
