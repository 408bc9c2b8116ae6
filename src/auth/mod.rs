//! Credentials: `vx_` API keys (minted, hashed with SHA-256, looked up), OAuth access tokens
//! issued to apps (looked up by their SHA-256, with the app and its scopes), browser sessions and
//! their CSRF tokens ([`session`]), Argon2id passwords, the secret helpers all of them share
//! ([`secret`]), and the `Principal` a request acts as.

pub mod apikey;
pub mod import;
pub mod password;
pub mod secret;
pub mod session;

use crate::clock::Millis;
use crate::store::{Store, StoreError, UserRecord};

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Missing, malformed or unknown credential.
    #[error("missing or invalid API key")]
    Unauthorized,
    /// An access token that is unknown, expired or revoked (RFC 6750 `invalid_token`).
    #[error("the access token is invalid, expired or revoked")]
    InvalidToken,
    #[error("the account is blocked")]
    Banned,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What an app's access token may do on the image API. An API key may do everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `images:read`: the profile (balance, limits) and the user's own jobs.
    Read,
    /// `images:generate`: create generate and edit jobs, and cancel them.
    Generate,
}

impl Scope {
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "images:read",
            Scope::Generate => "images:generate",
        }
    }
}

/// How a request proved who it is.
#[derive(Debug, Clone)]
pub enum Credential {
    /// The user's own `vx_` API key: every operation.
    ApiKey,
    /// An OAuth access token issued to `client` (an app) with `scopes`.
    AccessToken { client: String, scopes: Vec<String> },
    /// A signed-in browser on Pictor's own pages (the playground): the person themselves.
    Session,
}

/// The user a request acts as, and through what.
#[derive(Debug, Clone)]
pub struct Principal {
    pub user: UserRecord,
    pub via: Credential,
}

impl Principal {
    /// Whether the credential covers `scope`.
    pub fn allows(&self, scope: Scope) -> bool {
        match &self.via {
            Credential::ApiKey | Credential::Session => true,
            Credential::AccessToken { scopes, .. } => scopes.iter().any(|s| s == scope.as_str()),
        }
    }

    /// The app acting for the user, when the credential is an access token.
    pub fn client(&self) -> Option<&str> {
        match &self.via {
            Credential::ApiKey | Credential::Session => None,
            Credential::AccessToken { client, .. } => Some(client),
        }
    }
}

/// Resolves a bearer credential: a `vx_` API key, or else an OAuth access token.
pub fn authenticate(store: &Store, presented: &str, now: Millis) -> Result<Principal, AuthError> {
    if presented.starts_with(apikey::PREFIX) {
        return authenticate_key(store, presented, now);
    }
    authenticate_access_token(store, presented, now)
}

/// Resolves an OAuth access token (stored as the SHA-256 of the token) to its (not banned)
/// user, app and scopes; expired, revoked and unknown tokens are all `InvalidToken`.
pub fn authenticate_access_token(
    store: &Store,
    token: &str,
    now: Millis,
) -> Result<Principal, AuthError> {
    if token.is_empty() || token.len() > 512 {
        return Err(AuthError::InvalidToken);
    }
    let access = store
        .access_token(&apikey::hash(token), now)?
        .ok_or(AuthError::InvalidToken)?;
    let user = store.user(access.user_id)?.ok_or(AuthError::InvalidToken)?;
    if user.banned {
        return Err(AuthError::Banned);
    }
    Ok(Principal {
        user,
        via: Credential::AccessToken {
            client: access.client,
            scopes: access.scope.split(' ').map(str::to_string).collect(),
        },
    })
}

/// Whether a key's use should be written now: not when a write for it was scheduled within the
/// hour (a burst of requests with a key whose "last used" is old schedules one write, not one
/// per request, while the first is still on its way to the store). Bounded: old entries go
/// when it grows past 10,000 keys.
fn touch_due(hash: [u8; 32], now: Millis) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SCHEDULED: OnceLock<Mutex<HashMap<[u8; 32], Millis>>> = OnceLock::new();
    let granularity = crate::store::keys::LAST_USED_GRANULARITY_MS;
    let mut map = SCHEDULED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if map
        .get(&hash)
        .is_some_and(|t| now.saturating_sub(*t) < granularity)
    {
        return false;
    }
    if map.len() >= 10_000 {
        map.retain(|_, t| now.saturating_sub(*t) < granularity);
    }
    map.insert(hash, now);
    true
}

/// Resolves an API key (the default one or a named one) to its (not banned) user. A key's "last
/// used" is written at most once an hour, off the request's path.
pub fn authenticate_key(store: &Store, key: &str, now: Millis) -> Result<Principal, AuthError> {
    let hash = apikey::parse_and_hash(key).ok_or(AuthError::Unauthorized)?;
    let user = store
        .user_by_key_hash(&hash)?
        .ok_or(AuthError::Unauthorized)?;
    // The index lookup found the row by hash; the user's keys are compared again in constant
    // time so the decision never rests on a short-circuiting comparison.
    let matched = user.key_matching(&hash).ok_or(AuthError::Unauthorized)?;
    if user.banned {
        return Err(AuthError::Banned);
    }
    // Keys issued before keys had dates (no metadata) are not dated now.
    let stale = user.key_meta(&matched).is_some_and(|m| {
        m.last_used
            .is_none_or(|t| now.saturating_sub(t) >= crate::store::keys::LAST_USED_GRANULARITY_MS)
    });
    if stale
        && touch_due(hash, now)
        && let Ok(rt) = tokio::runtime::Handle::try_current()
    {
        let (store, id) = (store.clone(), user.id);
        rt.spawn_blocking(move || {
            if let Err(e) = store.touch_api_key(id, &matched, now) {
                tracing::warn!(error = %e, "recording an API key's last use");
            }
        });
    }
    Ok(Principal {
        user,
        via: Credential::ApiKey,
    })
}
