//! Bot resistance without an outside service: a proof-of-work challenge that the page's own
//! script (`/static/pow.js`) solves while the person types. The server hands out a random,
//! HMAC-signed challenge `c` carrying its difficulty `d` and expiry; the form comes back with a
//! nonce `n` such that SHA-256(`c` ":" `n`) starts with `d` zero bits (2^d hashes on average).
//! Each challenge is good for one submission and ten minutes.
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

use super::crypto::SecretBox;
use crate::clock::Millis;

const TTL_MS: u64 = 10 * 60 * 1000;
/// Difficulty bounds accepted for the `challenge_bits` setting.
pub const MIN_BITS: u32 = 8;
pub const MAX_BITS: u32 = 28;

/// A challenge as the page shows it.
#[derive(Debug, Clone)]
pub struct Challenge {
    pub challenge: String,
    pub bits: u32,
}

/// Challenges are stateless: `base64url(random 8 ‖ expiry seconds u32 ‖ bits u8) "."
/// base64url(HMAC[..12])`, so handing them out stores nothing (a flood of page loads cannot
/// push out real users' challenges). Only solved ones are remembered, until they expire, to
/// make each good for one submission; filling that set costs 2^bits hashes an entry.
#[derive(Default)]
pub struct Challenges {
    used: Mutex<HashMap<String, Millis>>,
}

/// Solved challenges remembered at most (each cost its solver 2^bits hashes).
const MAX_USED: usize = 1_000_000;

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

fn tag(secrets: &SecretBox, body: &str) -> String {
    URL_SAFE_NO_PAD.encode(&secrets.mac(&[b"pow", body.as_bytes()])[..12])
}

/// The expiry (ms) and difficulty a challenge was issued with, if it is one of ours.
fn open(secrets: &SecretBox, challenge: &str) -> Option<(Millis, u32)> {
    let (body, mac) = challenge.split_once('.')?;
    if !super::crypto::ct_eq(tag(secrets, body).as_bytes(), mac.as_bytes()) {
        return None;
    }
    let raw = URL_SAFE_NO_PAD.decode(body).ok()?;
    if raw.len() != 13 {
        return None;
    }
    let exp = u32::from_be_bytes(raw[8..12].try_into().ok()?);
    Some((u64::from(exp) * 1000, u32::from(raw[12])))
}

impl Challenges {
    /// A fresh challenge of `bits` difficulty, valid for ten minutes.
    pub fn issue(&self, secrets: &SecretBox, bits: u32, now: Millis) -> Challenge {
        let bits = bits.clamp(MIN_BITS, MAX_BITS);
        let mut raw = [0u8; 13];
        raw[..8].copy_from_slice(&rand::rng().random::<[u8; 8]>());
        let exp = u32::try_from((now + TTL_MS) / 1000).unwrap_or(u32::MAX);
        raw[8..12].copy_from_slice(&exp.to_be_bytes());
        raw[12] = bits as u8;
        let body = URL_SAFE_NO_PAD.encode(raw);
        let challenge = format!("{body}.{}", tag(secrets, &body));
        Challenge { challenge, bits }
    }

    /// Checks a solution: a challenge of ours, not expired, not used before, solved at the
    /// difficulty it was issued with. A right answer uses the challenge up.
    pub fn verify(&self, secrets: &SecretBox, challenge: &str, nonce: &str, now: Millis) -> bool {
        let Some((exp, bits)) = open(secrets, challenge) else {
            return false;
        };
        if now >= exp || !solves(challenge, nonce, bits) {
            return false;
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if used.len() >= MAX_USED {
            used.retain(|_, e| now < *e);
        }
        if used.len() >= MAX_USED || used.contains_key(challenge) {
            return false;
        }
        used.insert(challenge.to_string(), exp);
        true
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

    fn secrets() -> (tempfile::TempDir, SecretBox) {
        let dir = tempfile::tempdir().unwrap();
        let b = SecretBox::open_or_create(dir.path()).unwrap();
        (dir, b)
    }

    #[test]
    fn a_solution_works_once_and_only_for_its_challenge() {
        let (_d, k) = secrets();
        let cs = Challenges::default();
        let now = 1_700_000_000_000;
        let c = cs.issue(&k, 10, now);
        // Short enough for the page script's one-block SHA-256 (message under 56 bytes, with
        // nonces of up to 12 digits — far more than 2^28 tries).
        assert!(c.challenge.len() + 1 + 12 < 56, "{}", c.challenge);
        let n = solve(&c);
        let other = cs.issue(&k, 10, now);
        assert!(!cs.verify(&k, &other.challenge, "not-a-number", now));
        assert!(cs.verify(&k, &c.challenge, &n, now + 1));
        assert!(!cs.verify(&k, &c.challenge, &n, now + 1), "single use");
        let late = cs.issue(&k, 10, now);
        let n = solve(&late);
        assert!(
            !cs.verify(&k, &late.challenge, &n, now + TTL_MS + 1),
            "expired"
        );
        // Forged: the difficulty byte lowered, or another server's key.
        let (_d2, other_key) = secrets();
        let foreign = cs.issue(&other_key, 10, now);
        let n = solve(&foreign);
        assert!(!cs.verify(&k, &foreign.challenge, &n, now));
    }

    #[test]
    fn zero_bits() {
        assert_eq!(leading_zero_bits(&[0, 0, 0x10, 0xff]), 19);
        assert_eq!(leading_zero_bits(&[0x80]), 0);
    }
}
