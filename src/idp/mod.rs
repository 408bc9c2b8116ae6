//! The identity provider of seed 001: OAuth 2.0 authorization code flow with PKCE, OpenID
//! Connect id_tokens (RS256), userinfo, refresh-token rotation, revocation, discovery and JWKS,
//! the browser SDK, the consent and sign-out pages. The pages where people sign in, register and
//! manage their account are [`crate::web`]'s. The issuer is the public URL; everything shares the
//! origin with the image API.

pub mod authorize;
pub mod crypto;
pub mod discovery;
pub mod error;
pub mod keys;
pub mod logout;
pub mod pow;
pub mod token;
pub mod totp;
pub mod userinfo;

use std::sync::atomic::{AtomicU64, Ordering};

use poem::{Route, get, post};
use serde_json::{Value, json};

use crate::clock::Millis;
use crate::state::AppState;
use crate::store::UserRecord;
use crate::store::oauth::{ACCESS_TTL_MS, ClientRecord, Issued};

/// Scopes Pictor supports.
pub const SCOPES: [&str; 5] = [
    "openid",
    "profile",
    "email",
    "images:read",
    "images:generate",
];

/// What an authorization request without `scope` gets: sign-in scopes only. The image API's
/// scopes let an app read the person's jobs or spend their credits, so they are granted only
/// when the app asks for them by name (and the person consents to them in plain words).
pub const DEFAULT_SCOPES: [&str; 3] = ["openid", "profile", "email"];

/// Shared state of the identity provider.
pub struct IdpState {
    pub signer: keys::Signer,
    /// The discovery document (bytes and ETag), built at its first request: it depends only on
    /// the public URL.
    pub discovery: std::sync::OnceLock<(bytes::Bytes, String)>,
    pub secrets: std::sync::Arc<crypto::SecretBox>,
    pub throttle: crate::web::Throttle,
    pub challenges: pow::Challenges,
    pub signins_ok: AtomicU64,
    /// An administrator has been seen in the store (first-start setup is over).
    pub admin_seen: std::sync::atomic::AtomicBool,
    pub signins_failed: AtomicU64,
    /// Passwords checked against their hash by the sign-in form (the costly step the throttle
    /// and the bot check exist to spare).
    pub password_checks: AtomicU64,
    /// SHA-256 of the one-time setup token, while the store has no users (see `setup_link`).
    pub setup_token: std::sync::Mutex<Option<[u8; 32]>>,
}

impl IdpState {
    pub fn new(secrets: crypto::SecretBox) -> IdpState {
        let secrets = std::sync::Arc::new(secrets);
        IdpState {
            signer: keys::Signer::new(secrets.clone()),
            discovery: std::sync::OnceLock::new(),
            secrets,
            throttle: crate::web::Throttle::default(),
            challenges: pow::Challenges::default(),
            signins_ok: AtomicU64::new(0),
            admin_seen: std::sync::atomic::AtomicBool::new(false),
            signins_failed: AtomicU64::new(0),
            password_checks: AtomicU64::new(0),
            setup_token: std::sync::Mutex::new(None),
        }
    }

    /// Makes a new one-time setup token (replacing any previous one) and returns it.
    pub fn new_setup_token(&self) -> String {
        let token = crypto::random_token("");
        *self.setup_token.lock().unwrap_or_else(|e| e.into_inner()) = Some(crypto::sha256(&token));
        token
    }

    /// Whether `token` is the current setup token (constant time).
    pub fn setup_token_matches(&self, token: &str) -> bool {
        let guard = self.setup_token.lock().unwrap_or_else(|e| e.into_inner());
        guard
            .as_ref()
            .is_some_and(|h| crypto::ct_eq(h, &crypto::sha256(token)))
    }

    /// Uses the setup token up: the link works once.
    pub fn consume_setup_token(&self) {
        *self.setup_token.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub fn metrics_signin(&self, ok: bool) {
        let counter = if ok {
            &self.signins_ok
        } else {
            &self.signins_failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

pub fn avatar_url(state: &AppState, user: &UserRecord) -> String {
    let version = user
        .avatar
        .as_deref()
        .map(|t| &t[..8.min(t.len())])
        .unwrap_or("0");
    format!(
        "{}/avatars/{}.png?v={version}",
        state.public_url,
        user.user_id()
    )
}

/// Userinfo claims for a scope string (also merged into the id_token).
pub fn user_claims(state: &AppState, user: &UserRecord, scope: &str) -> Value {
    let sub = user.user_id().to_string();
    let mut claims = json!({ "sub": sub });
    let has = |s: &str| scope.split(' ').any(|x| x == s);
    if has("profile") {
        claims["name"] = json!(user.name);
        claims["preferred_username"] = json!(sub);
        claims["picture"] = json!(avatar_url(state, user));
    }
    if has("email") {
        claims["email"] = json!(user.email);
        claims["email_verified"] = json!(false);
    }
    claims
}

pub fn id_token_claims(
    state: &AppState,
    client: &ClientRecord,
    user: &UserRecord,
    issued: &Issued,
    now: Millis,
    at_hash: &str,
) -> Value {
    let mut claims = json!({
        "iss": state.public_url.to_string(),
        "sub": user.user_id().to_string(),
        "aud": client.name,
        "exp": (now + ACCESS_TTL_MS) / 1000,
        "iat": now / 1000,
        "auth_time": issued.auth_time / 1000,
        "at_hash": at_hash,
    });
    if let Some(nonce) = &issued.nonce {
        claims["nonce"] = json!(nonce);
    }
    claims
}

const SDK_JS: &str = include_str!("../../assets/static/sdk/pictor-login.js");

/// The identity provider's routes (OAuth endpoints, discovery, the consent and sign-out pages, the
/// browser SDK), added to `route` (the pages', [`crate::web::routes`]). The app wraps them in a
/// `CookieJarManager`.
pub fn routes(route: Route) -> Route {
    route
        .at(
            "/.well-known/openid-configuration",
            get(discovery::openid_configuration),
        )
        .at("/oauth/jwks", get(discovery::jwks))
        .at(
            "/oauth/authorize",
            get(authorize::authorize_get).post(authorize::authorize_post),
        )
        .at("/oauth/token", post(token::token))
        .at("/oauth/revoke", post(token::revoke))
        .at(
            "/oauth/logout",
            get(logout::logout_get).post(logout::logout_post),
        )
        .at(
            "/oauth/userinfo",
            get(userinfo::userinfo).post(userinfo::userinfo),
        )
        .at(
            "/static/sdk/pictor-login.js",
            crate::web::static_text(SDK_JS, "text/javascript; charset=utf-8"),
        )
}
