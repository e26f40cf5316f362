//! Trust anchors: DS or DNSKEY lines in zone-file form (`dns.trust_anchor_file`), or the
//! IANA root's when none is configured.

use std::path::{Path, PathBuf};

use base64::Engine;

use crate::dnssec::{self, Dnskey, Ds, DsLine};

/// The root zone's KSK-2017 and KSK-2024, as IANA publishes them (root-anchors.xml; the
/// same lines as Debian's dns-root-data `/usr/share/dns/root.ds`).
pub const IANA_ROOT_DS: &[&str] = &[
    ". 172800 IN DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D",
    ". 172800 IN DS 38696 8 2 683D2D0ACB8C9B712A1948B27F741219298D0A450D612C483AF444A4C0FB2B16",
];

#[derive(Debug, thiserror::Error)]
pub enum AnchorError {
    #[error("trust anchor file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("trust anchor file {path}, line {line}: {reason}")]
    Parse {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("trust anchor file {0} holds no DS or DNSKEY record")]
    Empty(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anchor {
    Ds { owner: String, ds: Ds },
    Dnskey { owner: String, key: Dnskey },
}

impl Anchor {
    pub fn owner(&self) -> &str {
        match self {
            Self::Ds { owner, .. } | Self::Dnskey { owner, .. } => owner,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustAnchors(pub Vec<Anchor>);

impl TrustAnchors {
    pub fn iana_root() -> Self {
        Self(
            IANA_ROOT_DS
                .iter()
                .filter_map(|line| DsLine::parse(line).ok())
                .map(|l| Anchor::Ds {
                    owner: l.owner,
                    ds: l.ds,
                })
                .collect(),
        )
    }

    /// From the file, or the IANA root's with `None`.
    pub fn load(path: Option<&Path>) -> Result<Self, AnchorError> {
        let Some(path) = path else {
            return Ok(Self::iana_root());
        };
        let text = std::fs::read_to_string(path).map_err(|error| AnchorError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, AnchorError> {
        let mut anchors = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split(';').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let bad = |reason: String| AnchorError::Parse {
                path: path.to_path_buf(),
                line: i + 1,
                reason,
            };
            anchors.push(parse_line(line).map_err(bad)?);
        }
        if anchors.is_empty() {
            return Err(AnchorError::Empty(path.to_path_buf()));
        }
        Ok(Self(anchors))
    }

    pub fn covers(&self, zone: &str) -> bool {
        self.0.iter().any(|a| a.owner() == zone)
    }

    pub fn ds_for(&self, zone: &str) -> Vec<Ds> {
        self.0
            .iter()
            .filter_map(|a| match a {
                Anchor::Ds { owner, ds } if owner == zone => Some(ds.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn keys_for(&self, zone: &str) -> Vec<Dnskey> {
        self.0
            .iter()
            .filter_map(|a| match a {
                Anchor::Dnskey { owner, key } if owner == zone => Some(key.clone()),
                _ => None,
            })
            .collect()
    }
}

/// `owner [ttl] [class] DS|DNSKEY rdata…`
fn parse_line(line: &str) -> Result<Anchor, String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let kind_at = fields
        .iter()
        .position(|f| f.eq_ignore_ascii_case("DS") || f.eq_ignore_ascii_case("DNSKEY"))
        .ok_or("neither a DS nor a DNSKEY record")?;
    let owner = dnssec::fqdn(fields.first().ok_or("empty")?).map_err(|e| e.to_string())?;
    if fields[kind_at].eq_ignore_ascii_case("DS") {
        let rdata = fields[kind_at + 1..].join(" ");
        let parsed =
            DsLine::parse(&format!("{owner} 0 IN DS {rdata}")).map_err(|e| e.to_string())?;
        return Ok(Anchor::Ds {
            owner,
            ds: parsed.ds,
        });
    }
    let rest = &fields[kind_at + 1..];
    if rest.len() < 4 {
        return Err("DNSKEY needs flags, protocol, algorithm and key".into());
    }
    let number = |s: &str, what: &str| s.parse::<u16>().map_err(|_| format!("bad {what} {s:?}"));
    let flags = number(rest[0], "flags")?;
    let protocol = u8::try_from(number(rest[1], "protocol")?).map_err(|_| "bad protocol")?;
    let algorithm = u8::try_from(number(rest[2], "algorithm")?).map_err(|_| "bad algorithm")?;
    let public_key = base64::engine::general_purpose::STANDARD
        .decode(rest[3..].concat())
        .map_err(|e| format!("bad key: {e}"))?;
    Ok(Anchor::Dnskey {
        owner,
        key: Dnskey {
            flags,
            protocol,
            algorithm,
            public_key,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iana_root_anchor_is_built_in() {
        let anchors = TrustAnchors::iana_root();
        assert_eq!(anchors.ds_for(".").len(), 2);
        assert!(anchors.covers("."));
        // Where Debian's dns-root-data is installed, it must agree with ours.
        if let Ok(text) = std::fs::read_to_string("/usr/share/dns/root.ds") {
            let theirs = TrustAnchors::parse(&text, Path::new("root.ds")).unwrap();
            assert_eq!(theirs.ds_for("."), anchors.ds_for("."));
        }
    }

    #[test]
    fn files_hold_ds_or_dnskey_lines() {
        let text = "; lab\n. 3600 IN DS 1 13 2 ABCD\nexample. DNSKEY 257 3 13 AAEC AwQ=\n";
        let anchors = TrustAnchors::parse(text, Path::new("a")).unwrap();
        assert_eq!(anchors.0.len(), 2);
        assert_eq!(
            anchors.keys_for("example.")[0].public_key,
            vec![0, 1, 2, 3, 4]
        );
        let err = TrustAnchors::parse(". IN A 1.2.3.4", Path::new("a")).unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
        assert!(TrustAnchors::parse("; nothing\n", Path::new("a")).is_err());
    }
}
