//! `vx_` API keys: 32 random bytes, shown once as `vx_` + 64 hex digits; only the SHA-256 of the
//! whole key is stored. The key is high-entropy, so a fast hash is enough (no salt, no argon2).

use rand::RngExt;

use super::secret;

pub const PREFIX: &str = "vx_";
const HEX_LEN: usize = 64;

/// A freshly minted key. No `Debug`: it must never reach a log.
pub struct NewApiKey {
    pub plaintext: String,
    pub hash: [u8; 32],
}

pub fn mint() -> NewApiKey {
    let bytes: [u8; 32] = rand::rng().random();
    let plaintext = format!("{PREFIX}{}", hex::encode(bytes));
    let hash = hash(&plaintext);
    NewApiKey { plaintext, hash }
}

/// The last four characters of a key: stored and shown as its fingerprint (`vx_…abcd`).
pub fn tail(key: &str) -> &str {
    &key[key.len().saturating_sub(4)..]
}

pub fn hash(key: &str) -> [u8; 32] {
    secret::sha256(key)
}

/// The hash of a well-formed key (`vx_` + 64 lower-case hex digits); `None` for anything else,
/// so malformed keys are refused without touching the store.
pub fn parse_and_hash(key: &str) -> Option<[u8; 32]> {
    let rest = key.strip_prefix(PREFIX)?;
    if rest.len() != HEX_LEN || !rest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    Some(hash(key))
}

pub fn hashes_equal(a: &[u8], b: &[u8]) -> bool {
    secret::ct_eq(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_keys_parse_and_differ() {
        let a = mint();
        let b = mint();
        assert!(a.plaintext.starts_with("vx_"));
        assert_eq!(parse_and_hash(&a.plaintext), Some(a.hash));
        assert_ne!(a.plaintext, b.plaintext);
        assert_eq!(parse_and_hash("vx_short"), None);
        assert_eq!(parse_and_hash(&a.plaintext.to_uppercase()), None);
        assert_eq!(parse_and_hash(&a.plaintext.replace("vx_", "sk_")), None);
    }
}
