//! The lab's own DNSSEC records and arithmetic: key tags (RFC 4034 appendix B) and DS
//! digests (RFC 4034 section 5.1.4), written apart from the daemon's so that the world the
//! daemon is tested against does not share its mistakes.

use std::fmt;

use ring::digest;

/// DNSKEY flag bit 7: the key is a zone key (RFC 4034 section 2.1.1).
pub const FLAG_ZONE_KEY: u16 = 0x0100;
/// DNSKEY flag bit 15: Secure Entry Point, the key a parent DS points at.
pub const FLAG_SEP: u16 = 0x0001;
/// The only protocol value a DNSKEY may carry (RFC 4034 section 2.1.2).
pub const PROTOCOL_DNSSEC: u8 = 3;
/// ECDSA Curve P-256 with SHA-256 (RFC 6605), what the provider signs with.
pub const ALG_ECDSAP256SHA256: u8 = 13;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnssecError {
    #[error("invalid domain name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("unsupported DS digest type {0} (known: 1 SHA-1, 2 SHA-256, 4 SHA-384)")]
    UnsupportedDigestType(u8),
}

/// DS digest algorithms (IANA "Delegation Signer (DS) Resource Record Digest Algorithms").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DigestType {
    Sha1,
    Sha256,
    Sha384,
}

impl DigestType {
    pub fn from_code(code: u8) -> Result<Self, DnssecError> {
        match code {
            1 => Ok(Self::Sha1),
            2 => Ok(Self::Sha256),
            4 => Ok(Self::Sha384),
            other => Err(DnssecError::UnsupportedDigestType(other)),
        }
    }

    pub fn code(self) -> u8 {
        match self {
            Self::Sha1 => 1,
            Self::Sha256 => 2,
            Self::Sha384 => 4,
        }
    }

    /// The mnemonic the provider's API uses in `digest_algorithm`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sha1 => "SHA1",
            Self::Sha256 => "SHA256",
            Self::Sha384 => "SHA384",
        }
    }

    fn ring_algorithm(self) -> &'static digest::Algorithm {
        match self {
            Self::Sha1 => &digest::SHA1_FOR_LEGACY_USE_ONLY,
            Self::Sha256 => &digest::SHA256,
            Self::Sha384 => &digest::SHA384,
        }
    }
}

/// A DNSKEY record's RDATA fields.
#[derive(Clone, PartialEq, Eq)]
pub struct Dnskey {
    pub flags: u16,
    pub protocol: u8,
    pub algorithm: u8,
    pub public_key: Vec<u8>,
}

impl fmt::Debug for Dnskey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dnskey")
            .field("flags", &self.flags)
            .field("algorithm", &self.algorithm)
            .field("key_tag", &self.key_tag())
            .finish()
    }
}

impl Dnskey {
    /// The RDATA in wire form: flags, protocol, algorithm, public key.
    pub fn rdata(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.public_key.len());
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.push(self.protocol);
        out.push(self.algorithm);
        out.extend_from_slice(&self.public_key);
        out
    }

    /// The key tag of RFC 4034 appendix B.
    pub fn key_tag(&self) -> u16 {
        if self.algorithm == 1 {
            // RSA/MD5 (appendix B.1): the 16 bits just above the modulus' last byte.
            let n = self.public_key.len();
            if n < 3 {
                return 0;
            }
            return u16::from_be_bytes([self.public_key[n - 3], self.public_key[n - 2]]);
        }
        let mut acc: u32 = 0;
        for (i, byte) in self.rdata().iter().enumerate() {
            acc += if i % 2 == 0 {
                u32::from(*byte) << 8
            } else {
                u32::from(*byte)
            };
        }
        acc += (acc >> 16) & 0xffff;
        (acc & 0xffff) as u16
    }

    pub fn is_zone_key(&self) -> bool {
        self.flags & FLAG_ZONE_KEY != 0
    }

    pub fn is_sep(&self) -> bool {
        self.flags & FLAG_SEP != 0
    }

    /// The DS digest for this key at `owner`: hash(owner in canonical wire form | RDATA).
    pub fn ds_digest(&self, owner: &str, digest_type: DigestType) -> Result<Vec<u8>, DnssecError> {
        let mut input = name_to_wire(owner)?;
        input.extend_from_slice(&self.rdata());
        Ok(digest::digest(digest_type.ring_algorithm(), &input)
            .as_ref()
            .to_vec())
    }

    /// The DS record that points at this key from the parent.
    pub fn to_ds(&self, owner: &str, digest_type: DigestType) -> Result<Ds, DnssecError> {
        Ok(Ds {
            key_tag: self.key_tag(),
            algorithm: self.algorithm,
            digest_type: digest_type.code(),
            digest: self.ds_digest(owner, digest_type)?,
        })
    }

    /// Whether `ds` points at this key: same tag, algorithm and a recomputed digest.
    pub fn matches_ds(&self, owner: &str, ds: &Ds) -> bool {
        if ds.key_tag != self.key_tag() || ds.algorithm != self.algorithm {
            return false;
        }
        match DigestType::from_code(ds.digest_type) {
            Ok(kind) => self
                .ds_digest(owner, kind)
                .is_ok_and(|digest| digest == ds.digest),
            Err(_) => false,
        }
    }
}

/// A DS record's RDATA fields.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ds {
    pub key_tag: u16,
    pub algorithm: u8,
    pub digest_type: u8,
    pub digest: Vec<u8>,
}

impl fmt::Display for Ds {
    /// Presentation form of the RDATA: `26191 13 2 135E…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {}",
            self.key_tag,
            self.algorithm,
            self.digest_type,
            hex_upper(&self.digest)
        )
    }
}

/// Lower-cases a domain name and gives it its trailing dot, after checking it is a valid
/// name in presentation form without escapes.
pub fn fqdn(name: &str) -> Result<String, DnssecError> {
    name_to_wire(name)?;
    let lower = name.to_ascii_lowercase();
    Ok(if lower.ends_with('.') {
        lower
    } else {
        format!("{lower}.")
    })
}

/// A name in canonical (lower-case) wire form, RFC 4034 section 6.2.
pub fn name_to_wire(name: &str) -> Result<Vec<u8>, DnssecError> {
    let bad = |reason| DnssecError::InvalidName {
        name: name.to_string(),
        reason,
    };
    if name.contains('\\') {
        return Err(bad("escaped characters are not supported"));
    }
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    let mut wire = Vec::with_capacity(trimmed.len() + 2);
    if !trimmed.is_empty() {
        for label in trimmed.split('.') {
            if label.is_empty() {
                return Err(bad("empty label"));
            }
            if label.len() > 63 {
                return Err(bad("label longer than 63 octets"));
            }
            if label.bytes().any(|b| b.is_ascii_whitespace() || b == b'"') {
                return Err(bad("white space or quote in label"));
            }
            wire.push(label.len() as u8);
            wire.extend(label.bytes().map(|b| b.to_ascii_lowercase()));
        }
    } else if name.is_empty() {
        return Err(bad("empty name"));
    }
    wire.push(0);
    if wire.len() > 255 {
        return Err(bad("longer than 255 octets"));
    }
    Ok(wire)
}

pub fn hex_upper(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}
