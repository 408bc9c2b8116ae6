//! Credentials: `vx_` API keys (minted, hashed with SHA-256, looked up), Argon2id passwords,
//! and the `Principal` a request acts as.

pub mod apikey;
pub mod import;
pub mod password;

use crate::store::{Store, StoreError, UserRecord};

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Missing, malformed or unknown credential.
    #[error("missing or invalid API key")]
    Unauthorized,
    #[error("the account is blocked")]
    Banned,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The user a request acts as.
#[derive(Debug, Clone)]
pub struct Principal {
    pub user: UserRecord,
}

/// Resolves an API key to its (not banned) user.
pub fn authenticate_key(store: &Store, key: &str) -> Result<Principal, AuthError> {
    let hash = apikey::parse_and_hash(key).ok_or(AuthError::Unauthorized)?;
    let user = store
        .user_by_key_hash(&hash)?
        .ok_or(AuthError::Unauthorized)?;
    // The index lookup found the row by hash; compare the stored hash again in constant time so
    // the decision never rests on a short-circuiting comparison.
    let stored = user
        .api_key_hash
        .as_deref()
        .and_then(|h| hex::decode(h).ok())
        .unwrap_or_default();
    if !apikey::hashes_equal(&stored, &hash) {
        return Err(AuthError::Unauthorized);
    }
    if user.banned {
        return Err(AuthError::Banned);
    }
    Ok(Principal { user })
}
