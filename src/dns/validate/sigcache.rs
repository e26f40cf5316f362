//! Signatures already verified. Verifying an RRSIG is a pure function of the key, the
//! data signed and the signature; a steady zone shows the same DS, DNSKEY and SOA
//! signatures at every look for days, and ECDSA verification was the largest single cost
//! of a look at an active zone. So a verification that succeeded is remembered by the
//! SHA-256 digest of exactly what it read, and the next one with the same inputs is not
//! done again. The validity window is not part of it: callers check it against the time
//! at every use. Failures are not remembered.
//!
//! Bounded: two generations of at most [`GENERATION`] digests each (about 10 MiB in all);
//! when the newer is full the older is dropped, so what is used at every pass stays.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use crate::dnssec::Dnskey;

/// Digests per generation: two generations hold the DS, DNSKEY and SOA signatures of
/// about 80,000 active zones.
const GENERATION: usize = 1 << 17;

type Seal = [u8; 32];

#[derive(Default)]
struct Generations {
    newer: HashSet<Seal>,
    older: HashSet<Seal>,
}

static VERIFIED: LazyLock<Mutex<Generations>> = LazyLock::new(Mutex::default);

/// The digest of one verification's inputs: the key (algorithm, flags, public key), the
/// data to be signed (RFC 4034 section 3.1.8.1, which includes the RRSIG's own fields)
/// and the signature. Each part is length-prefixed, so no two inputs share a digest by
/// shifting bytes between parts.
pub fn seal(key: &Dnskey, signed: &[u8], signature: &[u8]) -> Seal {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(&[key.algorithm, key.protocol]);
    ctx.update(&key.flags.to_be_bytes());
    for part in [key.public_key.as_slice(), signed, signature] {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// Whether a verification with these inputs succeeded before.
pub fn verified_before(seal: &Seal) -> bool {
    let mut g = VERIFIED.lock().unwrap_or_else(|p| p.into_inner());
    if g.newer.contains(seal) {
        return true;
    }
    if g.older.remove(seal) {
        // Still in use: carried into the newer generation.
        remember_in(&mut g, *seal);
        return true;
    }
    false
}

/// Remembers a verification that succeeded.
pub fn remember(seal: Seal) {
    let mut g = VERIFIED.lock().unwrap_or_else(|p| p.into_inner());
    remember_in(&mut g, seal);
}

fn remember_in(g: &mut Generations, seal: Seal) {
    if g.newer.len() >= GENERATION {
        g.older = std::mem::take(&mut g.newer);
    }
    g.newer.insert(seal);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(public_key: &[u8]) -> Dnskey {
        Dnskey {
            flags: 257,
            protocol: 3,
            algorithm: 13,
            public_key: public_key.to_vec(),
        }
    }

    #[test]
    fn every_input_is_part_of_the_seal() {
        let base = seal(&key(b"k"), b"data", b"sig");
        assert_eq!(base, seal(&key(b"k"), b"data", b"sig"));
        assert_ne!(base, seal(&key(b"K"), b"data", b"sig"));
        assert_ne!(base, seal(&key(b"k"), b"datA", b"sig"));
        assert_ne!(base, seal(&key(b"k"), b"data", b"siG"));
        // Bytes moved from one part to the next make another seal.
        assert_ne!(base, seal(&key(b"k"), b"dat", b"asig"));
        let mut zsk = key(b"k");
        zsk.flags = 256;
        assert_ne!(base, seal(&zsk, b"data", b"sig"));
    }

    #[test]
    fn remembered_seals_survive_one_generation_change() {
        let first = seal(&key(b"first"), b"d", b"s");
        assert!(!verified_before(&first));
        remember(first);
        assert!(verified_before(&first));
        let never = seal(&key(b"never"), b"d", b"s");
        assert!(!verified_before(&never));
    }
}
