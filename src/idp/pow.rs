//! Bot resistance without an outside service: a proof-of-work challenge that the page's own
//! script (`/static/pow.js`) solves while the person types. The server hands out a random
//! challenge `c` and a difficulty `d`; the form comes back with a nonce `n` such that
//! SHA-256(`c` ":" `n`) starts with `d` zero bits (2^d hashes on average). Each challenge is good
//! for one submission and ten minutes, and is kept only in memory.
//!
//! Shown on registration, and on sign-in once a source (or the account) has failed too often.
//! The work is the same for a script and for the page; what bounds a script's yield are the
//! sign-up limits per address and subnet and the sign-up credits held back until a first real
//! sign-in (or an administrator's approval). See README, Security.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt;
use sha2::{Digest, Sha256};

use crate::clock::Millis;

const TTL_MS: u64 = 10 * 60 * 1000;
/// Open challenges kept at most (oldest dropped first past this).
const MAX_OPEN: usize = 100_000;
/// Difficulty bounds accepted for the `challenge_bits` setting.
pub const MIN_BITS: u32 = 8;
pub const MAX_BITS: u32 = 28;

/// A challenge as the page shows it.
#[derive(Debug, Clone)]
pub struct Challenge {
    pub challenge: String,
    pub bits: u32,
}

#[derive(Default)]
pub struct Challenges {
    open: Mutex<HashMap<String, (u32, Millis)>>,
}

/// Leading zero bits of a digest.
pub fn leading_zero_bits(digest: &[u8]) -> u32 {
    let mut bits = 0;
    for byte in digest {
        if *byte == 0 {
            bits += 8;
        } else {
            bits += byte.leading_zeros();
            break;
        }
    }
    bits
}

/// Whether `nonce` solves `challenge` at `bits` of difficulty.
pub fn solves(challenge: &str, nonce: &str, bits: u32) -> bool {
    if nonce.is_empty() || nonce.len() > 20 || !nonce.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let digest = Sha256::new()
        .chain_update(challenge.as_bytes())
        .chain_update(b":")
        .chain_update(nonce.as_bytes())
        .finalize();
    leading_zero_bits(&digest) >= bits
}

impl Challenges {
    /// A fresh challenge of `bits` difficulty.
    pub fn issue(&self, bits: u32, now: Millis) -> Challenge {
        let bits = bits.clamp(MIN_BITS, MAX_BITS);
        let challenge = URL_SAFE_NO_PAD.encode(rand::rng().random::<[u8; 16]>());
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.len() >= MAX_OPEN {
            open.retain(|_, (_, exp)| now < *exp);
            if open.len() >= MAX_OPEN {
                // Still full of live challenges (a flood): forget the oldest half.
                let mut expiries: Vec<Millis> = open.values().map(|(_, e)| *e).collect();
                expiries.sort_unstable();
                let cut = expiries[expiries.len() / 2];
                open.retain(|_, (_, exp)| *exp > cut);
            }
        }
        open.insert(challenge.clone(), (bits, now + TTL_MS));
        Challenge { challenge, bits }
    }

    /// Checks a solution. The challenge is used up by any answer, right or wrong.
    pub fn verify(&self, challenge: &str, nonce: &str, now: Millis) -> bool {
        let entry = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(challenge);
        match entry {
            Some((bits, exp)) if now < exp => solves(challenge, nonce, bits),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solve(c: &Challenge) -> String {
        (0u64..)
            .map(|n| n.to_string())
            .find(|n| solves(&c.challenge, n, c.bits))
            .unwrap_or_default()
    }

    #[test]
    fn a_solution_works_once_and_only_for_its_challenge() {
        let cs = Challenges::default();
        let c = cs.issue(10, 0);
        let n = solve(&c);
        let other = cs.issue(10, 0);
        assert!(!cs.verify(&other.challenge, "not-a-number", 0));
        assert!(cs.verify(&c.challenge, &n, 1));
        assert!(!cs.verify(&c.challenge, &n, 1), "single use");
        let late = cs.issue(10, 0);
        let n = solve(&late);
        assert!(!cs.verify(&late.challenge, &n, TTL_MS + 1), "expired");
    }

    #[test]
    fn zero_bits() {
        assert_eq!(leading_zero_bits(&[0, 0, 0x10, 0xff]), 19);
        assert_eq!(leading_zero_bits(&[0x80]), 0);
    }
}
