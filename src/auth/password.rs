//! Argon2id password hashes (PHC strings). Hashing costs ~19 MiB and ~30 ms, so async callers
//! go through `hash_async`/`verify_async`, which run on the blocking pool behind a small
//! semaphore: a burst of sign-ins cannot exhaust memory or starve other requests.

use std::sync::{Arc, LazyLock};

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::{PasswordHasher, PasswordVerifier};
use tokio::sync::Semaphore;

/// At most this many argon2 computations at once per process.
static HASHING: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(2)));

pub const MIN_LEN: usize = 8;
pub const MAX_LEN: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("the password must be between {MIN_LEN} and {MAX_LEN} characters")]
    Length,
    #[error("password hashing failed: {0}")]
    Hash(String),
}

pub fn check_policy(password: &str) -> Result<(), PasswordError> {
    let n = password.chars().count();
    if (MIN_LEN..=MAX_LEN).contains(&n) {
        Ok(())
    } else {
        Err(PasswordError::Length)
    }
}

pub fn hash(password: &str) -> Result<String, PasswordError> {
    check_policy(password)?;
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

/// Constant-time verification (inside argon2). A malformed stored hash verifies as false.
pub fn verify(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(parsed) => Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

pub async fn hash_async(password: String) -> Result<String, PasswordError> {
    let _permit = HASHING
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| PasswordError::Hash(e.to_string()))?;
    tokio::task::spawn_blocking(move || hash(&password))
        .await
        .map_err(|e| PasswordError::Hash(e.to_string()))?
}

/// Verifies against any hash Pictor stores (Argon2id, or an imported pbkdf2 hash).
pub async fn verify_async(password: String, phc: String) -> bool {
    let Ok(_permit) = HASHING.clone().acquire_owned().await else {
        return false;
    };
    tokio::task::spawn_blocking(move || super::import::verify_any(&password, &phc))
        .await
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_verifies_and_rejects() {
        let h = hash("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify("correct horse", &h));
        assert!(!verify("wrong horse!", &h));
        assert!(!verify("x", "not a phc"));
        assert!(hash("short").is_err());
    }
}
