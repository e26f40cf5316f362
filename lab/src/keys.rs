//! Real signing keys for the simulated world: the provider simulator's zone keys, and the
//! lab's signed DNS hierarchy. ECDSA P-256 / SHA-256 (algorithm 13), as the provider uses;
//! Ed25519 (15) and RSA/SHA-256 (8) for the PowerDNS simulator's keystore.

use std::sync::Arc;

use ring::rand::SystemRandom;
use ring::rsa::PublicKeyComponents;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RSA_PKCS1_SHA256,
    RsaKeyPair,
};

use crate::dnssec::{ALG_ECDSAP256SHA256, ALG_ED25519, ALG_RSASHA256, Dnskey, PROTOCOL_DNSSEC};

/// RSA zone keys made once for the lab (ring cannot generate RSA keys), 2048 bits, PKCS#8:
/// `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 |
///  openssl pkcs8 -topk8 -nocrypt -outform DER -out lab/src/rsa-zone-keys/N.der`.
/// Lab-only material: it protects nothing.
const RSA_KEYS: [&[u8]; 4] = [
    include_bytes!("rsa-zone-keys/1.der"),
    include_bytes!("rsa-zone-keys/2.der"),
    include_bytes!("rsa-zone-keys/3.der"),
    include_bytes!("rsa-zone-keys/4.der"),
];

/// How many RSA key pairs the lab holds ([`LabKey::lab_rsa`]).
pub const RSA_KEY_COUNT: usize = RSA_KEYS.len();

#[derive(Debug, thiserror::Error)]
#[error("lab key: {0}")]
pub struct KeyError(String);

#[derive(Clone)]
enum Pair {
    Ecdsa(Arc<EcdsaKeyPair>),
    Ed25519(Arc<Ed25519KeyPair>),
    /// The pair and its DNSKEY public key (RFC 3110), made once.
    Rsa(Arc<RsaKeyPair>, Arc<[u8]>),
}

/// A key pair with its DNSKEY flags: ECDSA P-256 unless made otherwise. Cheap to clone:
/// the lab's servers take a zone's key at every answer (parsing the key again each time,
/// which computes its public point, made them several times costlier per query than
/// Knot DNS).
#[derive(Clone)]
pub struct LabKey {
    pair: Pair,
    flags: u16,
}

impl std::fmt::Debug for LabKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LabKey")
            .field("flags", &self.flags)
            .field("algorithm", &self.algorithm())
            .field("key_tag", &self.dnskey().key_tag())
            .finish()
    }
}

impl LabKey {
    /// A fresh ECDSA P-256 key; `flags` 257 for a KSK/CSK, 256 for a ZSK.
    pub fn generate(flags: u16) -> Result<Self, KeyError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| KeyError("key generation failed".into()))?;
        Self::from_pkcs8(pkcs8.as_ref(), flags)
    }

    /// An ECDSA P-256 key from its PKCS#8 form.
    pub fn from_pkcs8(pkcs8: &[u8], flags: u16) -> Result<Self, KeyError> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &rng)
            .map_err(|e| KeyError(e.to_string()))?;
        Ok(Self {
            pair: Pair::Ecdsa(Arc::new(pair)),
            flags,
        })
    }

    /// A fresh Ed25519 key (algorithm 15).
    pub fn generate_ed25519(flags: u16) -> Result<Self, KeyError> {
        let rng = SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng)
            .map_err(|_| KeyError("key generation failed".into()))?;
        let pair =
            Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).map_err(|e| KeyError(e.to_string()))?;
        Ok(Self {
            pair: Pair::Ed25519(Arc::new(pair)),
            flags,
        })
    }

    /// The lab's RSA/SHA-256 key number `index` (algorithm 8, 2048 bits), one of
    /// [`RSA_KEY_COUNT`]: the same pair every time it is asked for.
    pub fn lab_rsa(index: usize, flags: u16) -> Result<Self, KeyError> {
        let der = RSA_KEYS
            .get(index)
            .ok_or_else(|| KeyError(format!("the lab holds {RSA_KEY_COUNT} RSA keys")))?;
        let pair = RsaKeyPair::from_pkcs8(der).map_err(|e| KeyError(e.to_string()))?;
        // RFC 3110 section 2: the exponent's length in one octet (it is short), the
        // exponent, then the modulus.
        let parts = PublicKeyComponents::<Vec<u8>>::from(pair.public());
        let e_len = u8::try_from(parts.e.len())
            .map_err(|_| KeyError("an RSA exponent longer than 255 octets".into()))?;
        let mut public = vec![e_len];
        public.extend_from_slice(&parts.e);
        public.extend_from_slice(&parts.n);
        Ok(Self {
            pair: Pair::Rsa(Arc::new(pair), public.into()),
            flags,
        })
    }

    /// The DNSSEC algorithm number.
    pub fn algorithm(&self) -> u8 {
        match self.pair {
            Pair::Ecdsa(_) => ALG_ECDSAP256SHA256,
            Pair::Ed25519(_) => ALG_ED25519,
            Pair::Rsa(..) => ALG_RSASHA256,
        }
    }

    /// The DNSKEY: for ECDSA the public point without its 0x04 prefix (RFC 6605 section
    /// 4), for Ed25519 the 32-octet key (RFC 8080), for RSA RFC 3110's form.
    pub fn dnskey(&self) -> Dnskey {
        let public_key = match &self.pair {
            Pair::Ecdsa(pair) => pair
                .public_key()
                .as_ref()
                .get(1..)
                .unwrap_or_default()
                .to_vec(),
            Pair::Ed25519(pair) => pair.public_key().as_ref().to_vec(),
            Pair::Rsa(_, public) => public.to_vec(),
        };
        Dnskey {
            flags: self.flags,
            protocol: PROTOCOL_DNSSEC,
            algorithm: self.algorithm(),
            public_key,
        }
    }

    /// A signature in DNSSEC form: for ECDSA r and s, 32 octets each (RFC 6605 section
    /// 4); Ed25519's 64 octets (RFC 8080); RSA's PKCS #1 v1.5 (RFC 5702).
    pub fn sign(&self, data: &[u8]) -> Result<Vec<u8>, KeyError> {
        let failed = || KeyError("signing failed".into());
        match &self.pair {
            Pair::Ecdsa(pair) => pair
                .sign(&SystemRandom::new(), data)
                .map(|sig| sig.as_ref().to_vec())
                .map_err(|_| failed()),
            Pair::Ed25519(pair) => Ok(pair.sign(data).as_ref().to_vec()),
            Pair::Rsa(pair, _) => {
                let mut sig = vec![0u8; pair.public().modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), data, &mut sig)
                    .map_err(|_| failed())?;
                Ok(sig)
            }
        }
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

    /// Ed25519 and the lab's RSA keys sign what their DNSKEY verifies (the lab's own
    /// verifier, written apart from ring's signing side only in the key's form).
    #[test]
    fn ed25519_and_rsa_keys_sign_and_verify_as_dnssec_expects() {
        let ed = LabKey::generate_ed25519(256).unwrap();
        assert_eq!(ed.dnskey().algorithm, 15);
        assert_eq!(ed.dnskey().public_key.len(), 32);
        let sig = ed.sign(b"data").unwrap();
        assert!(ed.dnskey().verify(b"data", &sig));
        assert!(!ed.dnskey().verify(b"other", &sig));
        let mut tags = Vec::new();
        for i in 0..RSA_KEY_COUNT {
            let rsa = LabKey::lab_rsa(i, 257).unwrap();
            let dnskey = rsa.dnskey();
            assert_eq!((dnskey.algorithm, dnskey.flags), (8, 257));
            // Exponent 65537 in three octets, then a 2048-bit modulus.
            assert_eq!(dnskey.public_key[..4], [3, 1, 0, 1]);
            assert_eq!(dnskey.public_key.len(), 4 + 256);
            let sig = rsa.sign(b"data").unwrap();
            assert!(dnskey.verify(b"data", &sig));
            assert!(!dnskey.verify(b"other", &sig));
            assert_eq!(LabKey::lab_rsa(i, 257).unwrap().dnskey(), dnskey);
            tags.push(dnskey.key_tag());
        }
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), RSA_KEY_COUNT, "distinct keys");
        assert!(LabKey::lab_rsa(RSA_KEY_COUNT, 257).is_err());
    }
}
