//! DNSSEC arithmetic the daemon never takes on trust: owner names in wire form, key tags
//! (RFC 4034 appendix B) and DS digests (RFC 4034 section 5.1.4, RFC 4509, RFC 6605).
//!
//! Safety rule 5 rests on this module: the provider's DS text is never believed, it is
//! recomputed here from the public key.

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
    #[error("invalid hex {0:?}")]
    InvalidHex(String),
    #[error("malformed DS record {line:?}: {reason}")]
    MalformedDs { line: String, reason: String },
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

/// A DNSKEY as its presentation RDATA, `257 3 13 <base64>`: how the store and the
/// observations keep keys (readable in the database, stable across versions).
impl serde::Serialize for Dnskey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.text())
    }
}

impl<'de> serde::Deserialize<'de> for Dnskey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Dnskey::parse_text(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("bad DNSKEY {text:?}")))
    }
}

impl Dnskey {
    /// The presentation RDATA: flags, protocol, algorithm, base64 public key.
    pub fn text(&self) -> String {
        use base64::Engine as _;
        format!(
            "{} {} {} {}",
            self.flags,
            self.protocol,
            self.algorithm,
            base64::engine::general_purpose::STANDARD.encode(&self.public_key)
        )
    }

    /// [`Dnskey::text`] read back (the base64 may be split by spaces, as zone files
    /// split it); `None` when a field is missing or malformed.
    pub fn parse_text(text: &str) -> Option<Dnskey> {
        use base64::Engine as _;
        let mut f = text.split_whitespace();
        let flags = f.next()?.parse().ok()?;
        let protocol = f.next()?.parse().ok()?;
        let algorithm = f.next()?.parse().ok()?;
        let key: String = f.collect();
        let public_key = base64::engine::general_purpose::STANDARD.decode(key).ok()?;
        Some(Dnskey {
            flags,
            protocol,
            algorithm,
            public_key,
        })
    }

    /// The RDATA in wire form: flags, protocol, algorithm, public key.
    pub fn rdata(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.public_key.len());
        out.extend_from_slice(&self.flags.to_be_bytes());
        out.push(self.protocol);
        out.push(self.algorithm);
        out.extend_from_slice(&self.public_key);
        out
    }

    /// The key tag of RFC 4034 appendix B: hickory-proto's checksum over the RDATA (for
    /// any algorithm, even one hickory does not know), `ldns-key2ds` as the independent
    /// oracle in `tests/ldns_crosscheck.rs`.
    pub fn key_tag(&self) -> u16 {
        if self.algorithm == 1 {
            // RSA/MD5 (appendix B.1): the 16 bits just above the modulus' last byte.
            let n = self.public_key.len();
            if n < 3 {
                return 0;
            }
            return u16::from_be_bytes([self.public_key[n - 3], self.public_key[n - 2]]);
        }
        hickory_proto::dnssec::rdata::DNSKEY::calculate_key_tag_internal(&self.rdata())
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

impl Ds {
    /// Whether a validator can use this DS: an algorithm and a digest type it implements
    /// (those our validator verifies with hickory-proto and ring). A DS set of which no
    /// record is usable makes the zone insecure to validators, not bogus (RFC 4035
    /// section 5.2, RFC 6840 section 5.2).
    pub fn supported(&self) -> bool {
        algorithm_supported(self.algorithm) && DigestType::from_code(self.digest_type).is_ok()
    }
}

/// The DS records of one set a validator uses: those it can use at all
/// ([`Ds::supported`]), and of those only the ones with the strongest digest type present.
/// RFC 4509 section 3: SHA-1 DS records are ignored when SHA-256 ones are present; Unbound
/// (`val_favorite_ds_algo`) uses only the highest supported digest type of the set, so a
/// right SHA-1 DS beside a wrong SHA-256 one fails validation there. The lifecycle's
/// verdicts and our validator both judge a DS set by this.
pub fn usable_ds(set: &[Ds]) -> Vec<&Ds> {
    let favourite = set
        .iter()
        .filter(|d| d.supported())
        .map(|d| d.digest_type)
        .max();
    set.iter()
        .filter(|d| d.supported() && Some(d.digest_type) == favourite)
        .collect()
}

/// The DNSKEY algorithms validators (and our validator) implement: RSA/SHA-1 (5, 7),
/// RSA/SHA-2 (8, 10), ECDSA (13, 14), Ed25519 (15).
pub fn algorithm_supported(algorithm: u8) -> bool {
    matches!(algorithm, 5 | 7 | 8 | 10 | 13 | 14 | 15)
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

/// A DS record in zone-file form, as the provider's `ds` field gives it:
/// `zxy.com. 3600 IN DS 26191 13 2 135E…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DsLine {
    /// Owner name, lower case, fully qualified (trailing dot).
    pub owner: String,
    pub ttl: u32,
    pub ds: Ds,
}

impl DsLine {
    /// Parses `owner ttl [class] DS tag alg type digest`; the digest may be split by spaces.
    pub fn parse(line: &str) -> Result<Self, DnssecError> {
        let bad = |reason: &str| DnssecError::MalformedDs {
            line: line.to_string(),
            reason: reason.to_string(),
        };
        let mut fields = line.split_whitespace().peekable();
        let owner = fields.next().ok_or_else(|| bad("empty"))?;
        let owner = fqdn(owner)?;
        let ttl: u32 = fields
            .next()
            .ok_or_else(|| bad("no TTL"))?
            .parse()
            .map_err(|_| bad("TTL is not a number"))?;
        if fields
            .peek()
            .is_some_and(|class| class.eq_ignore_ascii_case("IN"))
        {
            fields.next();
        }
        match fields.next() {
            Some(kind) if kind.eq_ignore_ascii_case("DS") => {}
            _ => return Err(bad("record type is not DS")),
        }
        let mut number = |what: &str| -> Result<u32, DnssecError> {
            fields
                .next()
                .ok_or_else(|| bad(&format!("no {what}")))?
                .parse()
                .map_err(|_| bad(&format!("{what} is not a number")))
        };
        let key_tag = u16::try_from(number("key tag")?).map_err(|_| bad("key tag too large"))?;
        let algorithm =
            u8::try_from(number("algorithm")?).map_err(|_| bad("algorithm too large"))?;
        let digest_type =
            u8::try_from(number("digest type")?).map_err(|_| bad("digest type too large"))?;
        let digest_hex: String = fields.collect();
        if digest_hex.is_empty() {
            return Err(bad("no digest"));
        }
        let digest = hex_decode(&digest_hex)?;
        Ok(Self {
            owner,
            ttl,
            ds: Ds {
                key_tag,
                algorithm,
                digest_type,
                digest,
            },
        })
    }
}

impl fmt::Display for DsLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} IN DS {}", self.owner, self.ttl, self.ds)
    }
}

/// What a provider is set to publish as the zone's CDS and CDNSKEY (RFC 7344, RFC 8078),
/// where its API controls them: the daemon sets it as DESIGN.md rule 14 says.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    strum::IntoStaticStr,
    strum::Display,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum CdsPublication {
    /// No CDS or CDNSKEY.
    Nothing,
    /// The CDS and CDNSKEY of the zone's signing key: the DS it asks the parent for.
    Key,
    /// The delete request, `CDS 0 0 0 00` and `CDNSKEY 0 3 0 AA==` (RFC 8078 section 4).
    Delete,
}

impl CdsPublication {
    /// What the whole setting publishes, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Nothing => "no CDS or CDNSKEY",
            Self::Key => "the CDS and CDNSKEY of the key",
            Self::Delete => "the CDS delete request",
        }
    }

    /// What one half (the CDS or the CDNSKEY) publishes, in words.
    fn half(self) -> &'static str {
        match self {
            Self::Nothing => "none",
            Self::Key => "the key's",
            Self::Delete => "the delete request",
        }
    }
}

/// What a provider's API is set to publish, each half as read: where the CDS and the
/// CDNSKEY are two settings (PowerDNS's `PUBLISH-CDS` and `PUBLISH-CDNSKEY`), one call
/// that sets both writes them one after the other, and an answer lost after the first
/// leaves one half set. Halves that differ are such a half-applied setting of the
/// daemon's own; each half is one of the forms the daemon sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CdsHalves {
    pub cds: CdsPublication,
    pub cdnskey: CdsPublication,
}

impl CdsHalves {
    /// Both halves set to `to`.
    pub fn whole(to: CdsPublication) -> Self {
        Self {
            cds: to,
            cdnskey: to,
        }
    }

    /// The setting, where both halves say the same.
    pub fn as_whole(self) -> Option<CdsPublication> {
        (self.cds == self.cdnskey).then_some(self.cds)
    }

    /// Either half publishes something (a registry that scans may act on a CDS without
    /// its CDNSKEY, or the other way round).
    pub fn publishes(self) -> bool {
        self.cds != CdsPublication::Nothing || self.cdnskey != CdsPublication::Nothing
    }
}

impl fmt::Display for CdsHalves {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "CDS {}, CDNSKEY {}",
            self.cds.half(),
            self.cdnskey.half()
        )
    }
}

/// A zone's signing key as a provider serves it, after every field the provider gave was
/// checked against a recomputation from the public key (safety rule 5). Whoever the
/// provider, this is the key the lifecycle announces and watches for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnssecKey {
    /// The zone, lower case with the trailing dot.
    pub zone: String,
    pub dnskey: Dnskey,
    /// The DS the operator must enter at the registrar, recomputed by us.
    pub ds: Ds,
    /// TTL of the provider's `ds` line.
    pub ds_ttl: u32,
    pub uuid: Option<String>,
}

impl DnssecKey {
    /// The key in the DNSKEY form some registrars ask for instead of a DS (flags,
    /// protocol, algorithm, public key), as a zone-file line without a TTL.
    pub fn dnskey_line(&self) -> String {
        format!("{} IN DNSKEY {}", self.zone, self.dnskey.text())
    }

    /// The DS line to give the registrar, rebuilt from our own computation.
    pub fn ds_line(&self) -> DsLine {
        DsLine {
            owner: self.zone.clone(),
            ttl: self.ds_ttl,
            ds: self.ds.clone(),
        }
    }

    pub fn key_tag(&self) -> u16 {
        self.ds.key_tag
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

/// A fresh ECDSA P-256 key-signing key (flags 257) for unit tests: a real public key, so
/// that tags and digests are those of a key a provider could hold.
#[cfg(test)]
pub(crate) fn test_key() -> Dnskey {
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .expect("the OS RNG works in tests");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("a generated key parses");
    Dnskey {
        flags: 257,
        protocol: PROTOCOL_DNSSEC,
        algorithm: ALG_ECDSAP256SHA256,
        public_key: pair.public_key().as_ref()[1..].to_vec(),
    }
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

pub fn hex_decode(text: &str) -> Result<Vec<u8>, DnssecError> {
    let invalid = || DnssecError::InvalidHex(text.chars().take(140).collect());
    if !text.len().is_multiple_of(2) {
        return Err(invalid());
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| {
            let hi = (pair[0] as char).to_digit(16).ok_or_else(invalid)?;
            let lo = (pair[1] as char).to_digit(16).ok_or_else(invalid)?;
            Ok((hi * 16 + lo) as u8)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    /// The provider's own published example (DESIGN.md section 7, the DNSSEC object).
    fn provider_example_key() -> Dnskey {
        Dnskey {
            flags: 257,
            protocol: PROTOCOL_DNSSEC,
            algorithm: ALG_ECDSAP256SHA256,
            public_key: base64::engine::general_purpose::STANDARD
                .decode("ahD2C5Th+4NIFmErQPgSe/j6yPc2pbuhr3QcOJImCYHtv/mR/2qP2yHjBE1x20ERnmAnp6e6//g0uYAQKTW+DA==")
                .expect("example key is valid base64"),
        }
    }

    #[test]
    fn provider_example_ds_is_recomputed_exactly() {
        let key = provider_example_key();
        assert_eq!(key.key_tag(), 26191);
        let ds = key.to_ds("zxy.com.", DigestType::Sha256).unwrap();
        assert_eq!(
            hex_upper(&ds.digest),
            "135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07"
        );
        let line = DsLine::parse(
            "zxy.com. 3600 IN DS 26191 13 2 135E208FF18578AB18C1EB8EA064BE08324DCBA6CF08FF55D76F0DBD4BF49F07",
        )
        .unwrap();
        assert_eq!(line.ds, ds);
        assert!(key.matches_ds("ZXY.com", &line.ds));
        assert!(!key.matches_ds("zxy.net.", &line.ds));
    }

    #[test]
    fn rfc4034_section_5_4_example_ds() {
        // RFC 4034 section 5.4: dskey.example.com. DNSKEY 256 3 5 … -> DS 60485 5 1 2BB183AF…
        let public_key = base64::engine::general_purpose::STANDARD
            .decode(concat!(
                "AQOeiiR0GOMYkDshWoSKz9XzfwJr1AYtsmx3TGkJaNXVbfi/2pHm822aJ5iI9BMzNXxeYCmZ",
                "DRD99WYwYqUSdjMmmAphXdvxegXd/M5+X7OrzKBaMbCVdFLUUh6DhweJBjEVv5f2wwjM9Xzc",
                "nOf+EPbtG9DMBmADjFDc2w/rljwvFw=="
            ))
            .unwrap();
        let key = Dnskey {
            flags: 256,
            protocol: 3,
            algorithm: 5,
            public_key,
        };
        assert_eq!(key.key_tag(), 60485);
        let ds = key.to_ds("dskey.example.com.", DigestType::Sha1).unwrap();
        assert_eq!(
            hex_upper(&ds.digest),
            "2BB183AF5F22588179A53B0A98631FAD1A292118"
        );
    }

    #[test]
    fn a_changed_key_changes_tag_and_digest() {
        let mut key = provider_example_key();
        let before = key.to_ds("zxy.com", DigestType::Sha256).unwrap();
        key.public_key[0] ^= 1;
        let after = key.to_ds("zxy.com", DigestType::Sha256).unwrap();
        assert_ne!(before.key_tag, after.key_tag);
        assert_ne!(before.digest, after.digest);
    }

    #[test]
    fn ds_line_parse_errors_are_specific() {
        for (line, needle) in [
            ("", "empty"),
            ("zxy.com. x IN DS 1 13 2 AB", "TTL"),
            ("zxy.com. 3600 IN DNSKEY 257 3 13 AB", "not DS"),
            ("zxy.com. 3600 IN DS 70000 13 2 AB", "key tag"),
            ("zxy.com. 3600 IN DS 1 13 2", "no digest"),
        ] {
            let err = DsLine::parse(line).unwrap_err().to_string();
            assert!(err.contains(needle), "{line:?} gave {err}");
        }
        assert!(matches!(
            DsLine::parse("zxy.com. 3600 IN DS 1 13 2 XYZ"),
            Err(DnssecError::InvalidHex(_))
        ));
        // Digests may be split into groups, as BIND prints them.
        let split = DsLine::parse("a.example 60 DS 1 13 2 AB CD").unwrap();
        assert_eq!(split.ds.digest, vec![0xab, 0xcd]);
        assert_eq!(split.owner, "a.example.");
    }

    #[test]
    fn names_are_validated() {
        assert_eq!(name_to_wire(".").unwrap(), vec![0]);
        assert_eq!(name_to_wire("Ab.c").unwrap(), b"\x02ab\x01c\x00".to_vec());
        assert!(name_to_wire("a..b").is_err());
        assert!(name_to_wire("").is_err());
        assert!(name_to_wire(&"a".repeat(64)).is_err());
        assert!(name_to_wire(&format!("{}.", ["abcdefghi"; 26].join("."))).is_err());
        assert_eq!(fqdn("Example.COM").unwrap(), "example.com.");
    }

    /// RFC 4509 section 3 and Unbound's favourite digest: only the strongest supported
    /// digest type of a set is used; unsupported records never count.
    #[test]
    fn a_validator_uses_only_the_strongest_digest_of_a_set() {
        let key = test_key();
        let ds = |t| key.to_ds("child.test.", t).unwrap();
        let (sha1, sha256, sha384) = (
            ds(DigestType::Sha1),
            ds(DigestType::Sha256),
            ds(DigestType::Sha384),
        );
        let odd = Ds {
            algorithm: 253,
            ..sha384.clone()
        };
        let set = |v: &[&Ds]| v.iter().map(|d| (*d).clone()).collect::<Vec<_>>();
        assert_eq!(usable_ds(&set(&[&sha1])), vec![&sha1]);
        assert_eq!(usable_ds(&set(&[&sha1, &sha256])), vec![&sha256]);
        assert_eq!(usable_ds(&set(&[&sha256, &sha1, &sha384])), vec![&sha384]);
        assert_eq!(usable_ds(&set(&[&sha256, &odd])), vec![&sha256]);
        assert!(usable_ds(&set(&[&odd])).is_empty());
    }
}

#[cfg(test)]
mod text_tests {
    use super::*;

    #[test]
    fn a_dnskey_is_kept_as_its_presentation_text_and_read_back() {
        let key = Dnskey {
            flags: 257,
            protocol: 3,
            algorithm: 13,
            public_key: vec![7; 64],
        };
        let json = serde_json::to_string(&key).unwrap();
        assert!(json.starts_with("\"257 3 13 BwcH"), "{json}");
        assert_eq!(serde_json::from_str::<Dnskey>(&json).unwrap(), key);
        // Split base64, as zone files write it.
        let split = format!("257 3 13 {} {}", &key.text()[9..40], &key.text()[40..]);
        assert_eq!(Dnskey::parse_text(&split), Some(key));
        for bad in ["", "257 3", "x 3 13 AAAA", "257 3 13 !!!"] {
            assert_eq!(Dnskey::parse_text(bad), None, "{bad:?}");
            assert!(serde_json::from_str::<Dnskey>(&format!("{bad:?}")).is_err());
        }
    }
}
