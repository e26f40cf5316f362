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

/// DNSKEY algorithms the lab verifies signatures of (IANA "DNS Security Algorithm Numbers").
pub const ALG_RSASHA256: u8 = 8;
pub const ALG_RSASHA512: u8 = 10;
pub const ALG_ECDSAP384SHA384: u8 = 14;
pub const ALG_ED25519: u8 = 15;

impl Dnskey {
    /// A DNSKEY from its RDATA; `None` if it is shorter than the fixed fields.
    pub fn from_rdata(rdata: &[u8]) -> Option<Self> {
        let (fixed, public_key) = rdata.split_at_checked(4)?;
        Some(Self {
            flags: u16::from_be_bytes([fixed[0], fixed[1]]),
            protocol: fixed[2],
            algorithm: fixed[3],
            public_key: public_key.to_vec(),
        })
    }

    /// RFC 8078 section 4's CDNSKEY delete record: `0 3 0 AA==`.
    pub fn is_delete(&self) -> bool {
        self.flags == 0
            && self.protocol == PROTOCOL_DNSSEC
            && self.algorithm == 0
            && self.public_key == [0]
    }

    /// Whether `signature` over `data` verifies with this key (RFC 3110, RFC 5702,
    /// RFC 6605, RFC 8080 key and signature forms); unknown algorithms never verify.
    pub fn verify(&self, data: &[u8], signature: &[u8]) -> bool {
        use ring::signature as sig;
        let ecdsa = |alg: &'static sig::EcdsaVerificationAlgorithm| {
            let mut point = Vec::with_capacity(self.public_key.len() + 1);
            point.push(4u8);
            point.extend_from_slice(&self.public_key);
            sig::UnparsedPublicKey::new(alg, point)
                .verify(data, signature)
                .is_ok()
        };
        match self.algorithm {
            ALG_ECDSAP256SHA256 => {
                self.public_key.len() == 64 && ecdsa(&sig::ECDSA_P256_SHA256_FIXED)
            }
            ALG_ECDSAP384SHA384 => {
                self.public_key.len() == 96 && ecdsa(&sig::ECDSA_P384_SHA384_FIXED)
            }
            ALG_ED25519 => {
                self.public_key.len() == 32
                    && sig::UnparsedPublicKey::new(&sig::ED25519, &self.public_key)
                        .verify(data, signature)
                        .is_ok()
            }
            ALG_RSASHA256 | ALG_RSASHA512 => {
                let Some((e, n)) = rsa_parts(&self.public_key) else {
                    return false;
                };
                let alg = if self.algorithm == ALG_RSASHA256 {
                    &sig::RSA_PKCS1_2048_8192_SHA256
                } else {
                    &sig::RSA_PKCS1_2048_8192_SHA512
                };
                sig::RsaPublicKeyComponents { n, e }
                    .verify(alg, data, signature)
                    .is_ok()
            }
            _ => false,
        }
    }
}

/// An RSA DNSKEY's exponent and modulus (RFC 3110 section 2).
fn rsa_parts(key: &[u8]) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = key.split_first()?;
    let (len, rest) = if first == 0 {
        let (len, rest) = rest.split_at_checked(2)?;
        (usize::from(u16::from_be_bytes([len[0], len[1]])), rest)
    } else {
        (usize::from(first), rest)
    };
    let (e, n) = rest.split_at_checked(len)?;
    (!e.is_empty() && !n.is_empty()).then_some((e, n))
}

impl Ds {
    /// A DS (or CDS) from its RDATA; `None` if it is shorter than the fixed fields.
    pub fn from_rdata(rdata: &[u8]) -> Option<Self> {
        let (fixed, digest) = rdata.split_at_checked(4)?;
        Some(Self {
            key_tag: u16::from_be_bytes([fixed[0], fixed[1]]),
            algorithm: fixed[2],
            digest_type: fixed[3],
            digest: digest.to_vec(),
        })
    }

    /// The RDATA in wire form: key tag, algorithm, digest type, digest.
    pub fn rdata(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.digest.len());
        out.extend_from_slice(&self.key_tag.to_be_bytes());
        out.push(self.algorithm);
        out.push(self.digest_type);
        out.extend_from_slice(&self.digest);
        out
    }

    /// RFC 8078 section 4's CDS delete record: `0 0 0 00`.
    pub fn is_delete(&self) -> bool {
        self.key_tag == 0 && self.algorithm == 0 && self.digest_type == 0 && self.digest == [0]
    }
}

/// An RRSIG record's RDATA (RFC 4034 section 3.1); the signer's name in canonical wire
/// form (it is never compressed, RFC 4034 section 3.1.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rrsig {
    pub type_covered: u16,
    pub algorithm: u8,
    pub labels: u8,
    pub original_ttl: u32,
    pub expiration: u32,
    pub inception: u32,
    pub key_tag: u16,
    pub signer: Vec<u8>,
    pub signature: Vec<u8>,
}

impl Rrsig {
    pub fn from_rdata(rdata: &[u8]) -> Option<Self> {
        let (fixed, rest) = rdata.split_at_checked(18)?;
        let u32_at =
            |i: usize| u32::from_be_bytes([fixed[i], fixed[i + 1], fixed[i + 2], fixed[i + 3]]);
        let mut signer = Vec::new();
        let mut at = 0usize;
        loop {
            let len = usize::from(*rest.get(at)?);
            if len > 63 {
                return None;
            }
            let label = rest.get(at..at + 1 + len)?;
            signer.push(label[0]);
            signer.extend(label[1..].iter().map(u8::to_ascii_lowercase));
            at += 1 + len;
            if len == 0 || signer.len() > 255 {
                break;
            }
        }
        if signer.len() > 255 {
            return None;
        }
        Some(Self {
            type_covered: u16::from_be_bytes([fixed[0], fixed[1]]),
            algorithm: fixed[2],
            labels: fixed[3],
            original_ttl: u32_at(4),
            expiration: u32_at(8),
            inception: u32_at(12),
            key_tag: u16::from_be_bytes([fixed[16], fixed[17]]),
            signer,
            signature: rest.get(at..)?.to_vec(),
        })
    }

    /// Inside its validity window at `now` (seconds since the epoch, RFC 1982 arithmetic).
    pub fn in_window(&self, now: u32) -> bool {
        now.wrapping_sub(self.inception) as i32 >= 0
            && self.expiration.wrapping_sub(now) as i32 >= 0
    }

    /// The data this signature signs (RFC 4034 section 3.1.8.1): its own RDATA without the
    /// signature, then the RRset in canonical form and order. Only for types whose RDATA
    /// holds no names (DNSKEY, DS, CDS, CDNSKEY), which are canonical as they are.
    pub fn signed_data(&self, owner_wire: &[u8], class: u16, rdatas: &[Vec<u8>]) -> Vec<u8> {
        let mut sorted: Vec<&Vec<u8>> = rdatas.iter().collect();
        sorted.sort();
        sorted.dedup();
        let mut out = Vec::new();
        out.extend_from_slice(&self.type_covered.to_be_bytes());
        out.push(self.algorithm);
        out.push(self.labels);
        out.extend_from_slice(&self.original_ttl.to_be_bytes());
        out.extend_from_slice(&self.expiration.to_be_bytes());
        out.extend_from_slice(&self.inception.to_be_bytes());
        out.extend_from_slice(&self.key_tag.to_be_bytes());
        out.extend_from_slice(&self.signer);
        for rdata in sorted {
            out.extend_from_slice(owner_wire);
            out.extend_from_slice(&self.type_covered.to_be_bytes());
            out.extend_from_slice(&class.to_be_bytes());
            out.extend_from_slice(&self.original_ttl.to_be_bytes());
            out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
            out.extend_from_slice(rdata);
        }
        out
    }
}

/// How much work one RRset's signatures may cost: a hostile zone can serve many
/// signatures and many keys with one tag (KeyTrap, CVE-2023-50387).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SigLimits {
    /// RRSIGs looked at per RRset.
    pub signatures: usize,
    /// Keys tried per signature (keys sharing its tag and algorithm).
    pub keys_per_tag: usize,
}

impl Default for SigLimits {
    fn default() -> Self {
        Self {
            signatures: 8,
            keys_per_tag: 4,
        }
    }
}

/// An RRset of class IN, its RDATAs as served, and the signatures served with it.
#[derive(Debug, Clone, Copy)]
pub struct SignedRrset<'a> {
    pub owner: &'a str,
    pub rtype: u16,
    pub rdatas: &'a [Vec<u8>],
    pub sigs: &'a [Rrsig],
}

/// The keys of `keys` whose signature over `rrset` verifies at `now`, signed as `zone`;
/// in the order of `keys`, each once.
pub fn verified_signers<'k>(
    rrset: &SignedRrset<'_>,
    keys: &'k [Dnskey],
    zone: &str,
    now: u32,
    limits: SigLimits,
) -> Vec<&'k Dnskey> {
    let SignedRrset {
        owner,
        rtype,
        rdatas,
        sigs,
    } = *rrset;
    let (Ok(owner_wire), Ok(zone_wire)) = (name_to_wire(owner), name_to_wire(zone)) else {
        return Vec::new();
    };
    let owner_labels = label_count(&owner_wire);
    let mut signers: Vec<usize> = Vec::new();
    for sig in sigs.iter().take(limits.signatures) {
        if sig.type_covered != rtype
            || sig.signer != zone_wire
            || usize::from(sig.labels) != owner_labels
            || !sig.in_window(now)
        {
            continue;
        }
        let data = sig.signed_data(&owner_wire, 1, rdatas);
        let candidates = keys
            .iter()
            .enumerate()
            .filter(|(_, k)| {
                k.algorithm == sig.algorithm
                    && k.protocol == PROTOCOL_DNSSEC
                    && k.is_zone_key()
                    && k.key_tag() == sig.key_tag
            })
            .take(limits.keys_per_tag);
        for (i, key) in candidates {
            if !signers.contains(&i) && key.verify(&data, &sig.signature) {
                signers.push(i);
                break;
            }
        }
    }
    signers.sort_unstable();
    signers.into_iter().filter_map(|i| keys.get(i)).collect()
}

/// Labels of a name in wire form, the root not counted (RRSIG's `labels`).
fn label_count(wire: &[u8]) -> usize {
    let mut count = 0;
    let mut at = 0;
    while let Some(&len) = wire.get(at) {
        if len == 0 {
            break;
        }
        count += 1;
        at += 1 + usize::from(len);
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::LabKey;
    use hickory_proto::dnssec::rdata::DNSSECRData;
    use hickory_proto::rr::{Name, RData, Record, RecordType};

    fn now() -> u32 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as u32)
            .unwrap_or_default()
    }

    /// The lab's responder signs through hickory's TBS; our signed data must be the same
    /// bytes for its signatures to verify, whatever the owner's case and the RRs' order.
    #[test]
    fn signatures_the_lab_makes_verify_with_our_signed_data() {
        let ksk = LabKey::generate(257).unwrap();
        let zsk = LabKey::generate(256).unwrap();
        let owner = Name::from_ascii("Pd.Test.").unwrap();
        let records: Vec<Record> = [&zsk, &ksk]
            .iter()
            .map(|k| {
                Record::from_rdata(
                    owner.clone(),
                    2,
                    crate::dns::zone::dnskey_rdata(&k.dnskey()),
                )
            })
            .collect();
        let window = (now() - 60, now() + 3600);
        let sig = crate::dns::zone::sign(
            &records,
            RecordType::DNSKEY,
            &owner,
            &owner,
            &ksk,
            2,
            window,
        )
        .unwrap();
        let RData::DNSSEC(DNSSECRData::RRSIG(rrsig)) = &sig.data else {
            panic!("an RRSIG");
        };
        let ours = Rrsig {
            type_covered: 48,
            algorithm: ALG_ECDSAP256SHA256,
            labels: 2,
            original_ttl: 2,
            expiration: window.1,
            inception: window.0,
            key_tag: ksk.dnskey().key_tag(),
            signer: name_to_wire("pd.test.").unwrap(),
            signature: rrsig.sig().to_vec(),
        };
        let keys = vec![zsk.dnskey(), ksk.dnskey()];
        // In the other order than signed, and one twice.
        let rdatas = vec![keys[1].rdata(), keys[0].rdata(), keys[1].rdata()];
        let rrset = SignedRrset {
            owner: "pd.test.",
            rtype: 48,
            rdatas: &rdatas,
            sigs: std::slice::from_ref(&ours),
        };
        let signers = verified_signers(&rrset, &keys, "pd.test.", now(), SigLimits::default());
        assert_eq!(signers, vec![&keys[1]]);

        // Only so many signatures are looked at: the good one behind nine bad ones
        // verifies with room for ten, not with the default eight.
        let mut many: Vec<Rrsig> = (0..9u8)
            .map(|i| Rrsig {
                signature: vec![i; 64],
                ..ours.clone()
            })
            .collect();
        many.push(ours.clone());
        let rrset = SignedRrset {
            sigs: &many,
            ..rrset
        };
        assert!(
            verified_signers(&rrset, &keys, "pd.test.", now(), SigLimits::default()).is_empty()
        );
        let roomy = SigLimits {
            signatures: 10,
            ..SigLimits::default()
        };
        assert_eq!(
            verified_signers(&rrset, &keys, "pd.test.", now(), roomy),
            vec![&keys[1]]
        );

        // Back through the RDATA form.
        let mut wire = ours.signed_data(&[], 0, &[])[..18].to_vec();
        wire.extend_from_slice(&ours.signer);
        wire.extend_from_slice(&ours.signature);
        assert_eq!(Rrsig::from_rdata(&wire), Some(ours.clone()));

        // Any change of data, time, signer or type: nothing verifies.
        let mut other = rdatas.clone();
        other.pop();
        other.pop();
        let expired = Rrsig {
            expiration: now() - 1,
            ..ours.clone()
        };
        let elsewhere = Rrsig {
            signer: name_to_wire("test.").unwrap(),
            ..ours.clone()
        };
        for (sig, rdatas, zone) in [
            (&ours, &other, "pd.test."),
            (&expired, &rdatas, "pd.test."),
            (&elsewhere, &rdatas, "pd.test."),
            (&ours, &rdatas, "test."),
        ] {
            let rrset = SignedRrset {
                owner: "pd.test.",
                rtype: 48,
                rdatas,
                sigs: std::slice::from_ref(sig),
            };
            let signers = verified_signers(&rrset, &keys, zone, now(), SigLimits::default());
            assert!(signers.is_empty());
        }
    }

    #[test]
    fn delete_records_and_rdata_round_trips() {
        let delete = Ds::from_rdata(&[0, 0, 0, 0, 0]).unwrap();
        assert!(delete.is_delete());
        assert_eq!(delete.to_string(), "0 0 0 00");
        let key = Dnskey::from_rdata(&[0, 0, 3, 0, 0]).unwrap();
        assert!(key.is_delete());
        let ds = Ds {
            key_tag: 26191,
            algorithm: 13,
            digest_type: 2,
            digest: vec![0xab; 32],
        };
        assert_eq!(Ds::from_rdata(&ds.rdata()), Some(ds.clone()));
        assert!(!ds.is_delete());
        assert!(Ds::from_rdata(&[1, 2, 3]).is_none());
        assert!(Dnskey::from_rdata(&[1, 2, 3]).is_none());
    }

    #[test]
    fn rsa_keys_split_into_exponent_and_modulus() {
        assert_eq!(rsa_parts(&[1, 3, 9, 9]), Some((&[3u8][..], &[9u8, 9][..])));
        assert_eq!(rsa_parts(&[0, 0, 1, 3, 9]), Some((&[3u8][..], &[9u8][..])));
        assert_eq!(rsa_parts(&[4, 3]), None);
        assert_eq!(rsa_parts(&[]), None);
    }
}
