//! A string that must never reach a log line, an error message or `Debug` output.

use std::fmt;

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
pub fn world_readable_mode(path: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o7777;
    (mode & 0o004 != 0).then_some(mode)
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
