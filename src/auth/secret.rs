//! Secrets as credentials handle them: random tokens, SHA-256 (how every bearer secret — API
//! keys, access and refresh tokens, codes, session ids — is stored), constant-time comparison,
//! base64url. One implementation for the API keys, the identity provider and the sessions.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// `prefix` + 43 characters of base64url (256 random bits).
pub fn random_token(prefix: &str) -> String {
    let bytes: [u8; 32] = rand::rng().random();
    format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes))
}

pub fn sha256(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

pub fn sha256_hex(value: &str) -> String {
    hex::encode(sha256(value))
}

pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

pub fn b64url(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}
