//! Real signing keys for the simulated world: the provider simulator's zone keys, and the
//! lab's signed DNS hierarchy. ECDSA P-256 / SHA-256 (algorithm 13), as the provider uses.

use std::sync::Arc;

use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};

use crate::dnssec::{ALG_ECDSAP256SHA256, Dnskey, PROTOCOL_DNSSEC};

#[derive(Debug, thiserror::Error)]
#[error("lab key: {0}")]
pub struct KeyError(String);

/// An ECDSA P-256 key pair with its DNSKEY flags. Cheap to clone: the lab's servers take
/// a zone's key at every answer (parsing the key again each time, which computes its
/// public point, made them several times costlier per query than Knot DNS).
#[derive(Clone)]
pub struct LabKey {
    pair: Arc<EcdsaKeyPair>,
    flags: u16,
}

impl std::fmt::Debug for LabKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabKey")
            .field("flags", &self.flags)
            .field("key_tag", &self.dnskey().key_tag())
            .finish()
    }
}

impl LabKey {
    /// A fresh key; `flags` 257 for a KSK/CSK, 256 for a ZSK.
    pub fn generate(flags: u16) -> Result<Self, KeyError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| KeyError("key generation failed".into()))?;
        Self::from_pkcs8(pkcs8.as_ref(), flags)
    }

    pub fn from_pkcs8(pkcs8: &[u8], flags: u16) -> Result<Self, KeyError> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &rng)
            .map_err(|e| KeyError(e.to_string()))?;
        Ok(Self {
            pair: Arc::new(pair),
            flags,
        })
    }

    /// The DNSKEY: the public point without its 0x04 prefix (RFC 6605 section 4).
    pub fn dnskey(&self) -> Dnskey {
        let point = self.pair.public_key().as_ref();
        Dnskey {
            flags: self.flags,
            protocol: PROTOCOL_DNSSEC,
            algorithm: ALG_ECDSAP256SHA256,
            public_key: point.get(1..).unwrap_or_default().to_vec(),
        }
    }

    /// A signature in DNSSEC form: r and s, 32 octets each (RFC 6605 section 4).
    pub fn sign(&self, data: &[u8]) -> Result<Vec<u8>, KeyError> {
        self.pair
            .sign(&SystemRandom::new(), data)
            .map(|sig| sig.as_ref().to_vec())
            .map_err(|_| KeyError("signing failed".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    #[test]
    fn keys_sign_and_verify_as_dnssec_expects() {
        let key = LabKey::generate(257).unwrap();
        let dnskey = key.dnskey();
        assert_eq!(dnskey.public_key.len(), 64);
        assert!(dnskey.is_sep() && dnskey.is_zone_key());
        let sig = key.sign(b"data").unwrap();
        assert_eq!(sig.len(), 64);
        let mut point = vec![4u8];
        point.extend_from_slice(&dnskey.public_key);
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(b"data", &sig)
            .unwrap();
        assert_eq!(key.clone().dnskey(), dnskey);
    }
}
