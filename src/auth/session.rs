//! Browser sessions and their CSRF tokens: the session cookie (its id stored as a SHA-256), the
//! signed-in user, and the HMAC-bound CSRF token of the pages' forms. A signed-in browser is one
//! of the three kinds of credential a [`super::Principal`] can come from.

use std::time::Duration;

use poem::Request;
use poem::http::header;
use poem::web::cookie::{Cookie, CookieJar, SameSite};

use super::secret::{b64url, ct_eq, random_token, sha256};
use crate::clock::Millis;
use crate::state::AppState;
use crate::store::UserRecord;
use crate::store::sessions::{PENDING_TTL_MS, SESSION_TTL_MS, SessionRecord, SessionStage};

pub const SESSION_COOKIE: &str = "pictor_session";
pub const CSRF_COOKIE: &str = "pictor_csrf";

/// Whether the public URL is https (then cookies are `Secure` and `__Host-` prefixed).
fn https(state: &AppState) -> bool {
    state.public_url.starts_with("https://")
}

/// The session cookie's name: `__Host-pictor_session` over https (so no sibling origin can set
/// or shadow it), `pictor_session` over plain http (where browsers refuse the prefix).
pub fn session_cookie(state: &AppState) -> &'static str {
    if https(state) {
        "__Host-pictor_session"
    } else {
        SESSION_COOKIE
    }
}

/// The pre-session CSRF cookie's name (see [`session_cookie`]).
pub fn csrf_cookie(state: &AppState) -> &'static str {
    if https(state) {
        "__Host-pictor_csrf"
    } else {
        CSRF_COOKIE
    }
}

fn base_cookie(state: &AppState, name: &str, value: String, max_age: Duration) -> Cookie {
    let mut c = Cookie::new_with_str(name, value);
    c.set_http_only(true);
    c.set_same_site(SameSite::Lax);
    c.set_path("/");
    c.set_secure(https(state));
    c.set_max_age(max_age);
    c
}

/// Shortest pre-session cookie accepted: a shorter (tossed or truncated) one is replaced.
const MIN_CSRF_COOKIE_LEN: usize = 43;

/// What a CSRF token is bound to: the live session when there is one, otherwise this browser's
/// random pre-session cookie (created on first use).
fn csrf_binding(state: &AppState, jar: &CookieJar, create: bool) -> Option<Vec<u8>> {
    if let Some(s) = session(state, jar) {
        let mut b = b"session:".to_vec();
        b.extend_from_slice(&s.session_hash);
        return Some(b);
    }
    let name = csrf_cookie(state);
    let existing = jar
        .get(name)
        .map(|c| c.value_str().to_string())
        .filter(|v| v.len() >= MIN_CSRF_COOKIE_LEN);
    let value = match existing {
        Some(v) => v,
        None if create => {
            let v = random_token("");
            jar.add(base_cookie(
                state,
                name,
                v.clone(),
                Duration::from_secs(30 * 86_400),
            ));
            v
        }
        None => return None,
    };
    let mut b = b"pre:".to_vec();
    b.extend_from_slice(value.as_bytes());
    Some(b)
}

/// The CSRF token the page's forms carry: an HMAC, with a key kept outside the store, of the
/// browser's session id (signed in) or of its random pre-session cookie (signed out). A token
/// is worthless for any other session, so a cookie planted by a sibling origin (cookie tossing)
/// does not help an attacker who cannot read the victim's session id.
pub fn csrf_token(state: &AppState, jar: &CookieJar) -> String {
    let binding = csrf_binding(state, jar, true).unwrap_or_default();
    b64url(&state.idp.secrets.mac(&[b"csrf", &binding]))
}

/// Our own origin (`scheme://host[:port]`), as browsers send it in `Origin`.
pub fn own_origin(state: &AppState) -> Option<String> {
    url::Url::parse(&state.public_url)
        .ok()
        .map(|u| u.origin().ascii_serialization())
}

/// Whether a state-changing request may come from where it says it comes from: `Origin`, when
/// sent, must equal our origin exactly (`null` — sandboxed frames, `data:` pages — is refused),
/// and `Sec-Fetch-Site`, when sent, must be `same-origin` (or `none`: typed by the person).
pub fn origin_ok(state: &AppState, req: &Request) -> bool {
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        if own_origin(state).as_deref() != Some(origin) {
            return false;
        }
    }
    !req.headers()
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| site != "same-origin" && site != "none")
}

/// Whether `submitted` is this browser's CSRF token (constant time).
pub fn csrf_matches(state: &AppState, jar: &CookieJar, submitted: &str) -> bool {
    let Some(binding) = csrf_binding(state, jar, false) else {
        return false;
    };
    let expected = b64url(&state.idp.secrets.mac(&[b"csrf", &binding]));
    !submitted.is_empty() && ct_eq(expected.as_bytes(), submitted.trim().as_bytes())
}

/// A form's CSRF check: the request's origin is ours and the token is this session's.
pub fn csrf_ok(state: &AppState, req: &Request, jar: &CookieJar, submitted: &str) -> bool {
    origin_ok(state, req) && csrf_matches(state, jar, submitted)
}

/// A signed-in browser.
pub struct SignedIn {
    pub session_hash: [u8; 32],
    pub session: SessionRecord,
    pub user: UserRecord,
}

/// The browser's session, in any stage, with its user (banned users have no session).
pub fn session(state: &AppState, jar: &CookieJar) -> Option<SignedIn> {
    let id = jar.get(session_cookie(state))?.value_str().to_string();
    let hash = sha256(&id);
    let session = state.store.session(&hash, state.clock.now()).ok()??;
    let user = state.store.user(session.user_id).ok()??;
    if user.banned {
        return None;
    }
    Some(SignedIn {
        session_hash: hash,
        session,
        user,
    })
}

/// The fully signed-in user (second factor done).
pub fn signed_in(state: &AppState, jar: &CookieJar) -> Option<SignedIn> {
    session(state, jar).filter(|s| s.session.stage == SessionStage::Active)
}

/// Starts a new session with a fresh id (never reusing the old cookie: no session fixation).
pub async fn start_session(
    state: &AppState,
    jar: &CookieJar,
    user_id: u64,
    stage: SessionStage,
    auth_time: Millis,
) -> Result<(), crate::store::StoreError> {
    if let Some(old) = jar.get(session_cookie(state)) {
        let old_hash = sha256(old.value_str());
        state
            .store
            .call(move |s| s.delete_session(&old_hash))
            .await?;
    }
    let id = random_token("");
    let hash = sha256(&id);
    let now = state.clock.now();
    let ttl = match stage {
        SessionStage::PendingTotp => PENDING_TTL_MS,
        SessionStage::Active => SESSION_TTL_MS,
    };
    let record = SessionRecord {
        user_id,
        stage,
        created_at: now,
        expires_at: now + ttl,
        auth_time,
    };
    state
        .store
        .call(move |s| s.create_session(hash, record))
        .await?;
    jar.add(base_cookie(
        state,
        session_cookie(state),
        id,
        Duration::from_millis(ttl),
    ));
    Ok(())
}

pub async fn end_session(state: &AppState, jar: &CookieJar) {
    if let Some(old) = jar.get(session_cookie(state)) {
        let hash = sha256(old.value_str());
        let _ = state.store.call(move |s| s.delete_session(&hash)).await;
    }
    // Expired in place, with the same attributes (a `__Host-` cookie is only replaced by one
    // that is Secure with Path=/).
    jar.add(base_cookie(
        state,
        session_cookie(state),
        String::new(),
        Duration::ZERO,
    ));
}

/// The signed-in browser as a principal (the web playground acts through it).
pub fn principal(state: &AppState, jar: &CookieJar) -> Option<super::Principal> {
    signed_in(state, jar).map(|s| super::Principal {
        user: s.user,
        via: super::Credential::Session,
    })
}
