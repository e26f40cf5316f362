//! A string that must never reach a log line, an error message or `Debug` output.

use std::fmt;
use std::path::{Path, PathBuf};

/// An API key, password or token. `Debug` prints `[redacted]`; there is no `Display`, so
/// the only way to the text is the explicit [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Replaces every occurrence of the given secrets in `text`, for excerpts of bodies that
/// might echo a credential back.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(secret, "[redacted]");
    }
    out
}

/// The permission bits of the file at `path` when any user may read it (the "other"
/// read bit), else None (also when it cannot be looked at: reading it will say why).
pub fn world_readable_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o7777;
    (mode & 0o004 != 0).then_some(mode)
}

/// Where a secret lives: read only when needed, so that this value can be logged and
/// cloned freely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    File(PathBuf),
    Env(String),
    /// A name in `$CREDENTIALS_DIRECTORY`, as systemd's `LoadCredential=` provides.
    Credential(String),
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read secret file {path}: {error}")]
    File {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("environment variable {0} is not set or not UTF-8")]
    Env(String),
    #[error(
        "credential {name:?} not found: $CREDENTIALS_DIRECTORY is not set (use systemd's LoadCredential=)"
    )]
    NoCredentialsDirectory { name: String },
    #[error("secret from {0} is empty")]
    Empty(String),
}

impl SecretSource {
    pub fn load(&self) -> Result<Secret, SecretError> {
        let (text, origin) = match self {
            Self::File(path) => (read_secret_file(path)?, path.display().to_string()),
            Self::Env(var) => (
                std::env::var(var).map_err(|_| SecretError::Env(var.clone()))?,
                format!("${var}"),
            ),
            Self::Credential(name) => {
                let dir = std::env::var_os("CREDENTIALS_DIRECTORY")
                    .ok_or_else(|| SecretError::NoCredentialsDirectory { name: name.clone() })?;
                let path = Path::new(&dir).join(name);
                (read_secret_file(&path)?, path.display().to_string())
            }
        };
        // A trailing newline from `echo key > file` is not part of the secret.
        let trimmed = text.trim_end_matches(['\n', '\r']);
        if trimmed.trim().is_empty() {
            return Err(SecretError::Empty(origin));
        }
        Ok(Secret::new(trimmed.to_string()))
    }
}

impl SecretSource {
    /// For a secret file readable by every user: what to say about it.
    pub fn exposure_warning(&self) -> Option<String> {
        let Self::File(path) = self else {
            return None;
        };
        let mode = world_readable_mode(path)?;
        Some(format!(
            "secret file {} is readable by every user (mode {mode:04o}); restrict it: chmod o-r (0600, or 0640 with the daemon's group)",
            path.display()
        ))
    }
}

fn read_secret_file(path: &Path) -> Result<String, SecretError> {
    std::fs::read_to_string(path).map_err(|error| SecretError::File {
        path: path.to_path_buf(),
        error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_readable_files_are_told_apart() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "k").unwrap();
        for (mode, seen) in [
            (0o600, None),
            (0o640, None),
            (0o644, Some(0o644)),
            (0o604, Some(0o604)),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(world_readable_mode(&path), seen, "{mode:o}");
        }
        assert_eq!(world_readable_mode(&dir.path().join("missing")), None);
    }

    #[test]
    fn debug_hides_the_value() {
        let s = Secret::new("hunter2-abc".into());
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{:?}", Some(&s)), "Some([redacted])");
    }

    #[test]
    fn redact_replaces_every_occurrence() {
        assert_eq!(
            redact("key=abcd1234 and abcd1234", &["abcd1234"]),
            "key=[redacted] and [redacted]"
        );
        // Too short to be a credential: replacing it would only garble the excerpt.
        assert_eq!(redact("a b", &["a"]), "a b");
    }
}
