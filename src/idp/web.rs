//! The browser side shared by the pages: session and CSRF cookies, the signed-in user, security
//! headers, and sign-in throttling.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::cookie::{Cookie, CookieJar, SameSite};
use poem::web::{Html, Redirect};
use poem::{IntoResponse, Request, Response};

use super::crypto::{ct_eq, random_token, sha256};
use crate::clock::Millis;
use crate::state::AppState;
use crate::store::UserRecord;
use crate::store::sessions::{PENDING_TTL_MS, SESSION_TTL_MS, SessionRecord, SessionStage};

pub const SESSION_COOKIE: &str = "pictor_session";
pub const CSRF_COOKIE: &str = "pictor_csrf";

fn base_cookie(state: &AppState, name: &str, value: String, max_age: Duration) -> Cookie {
    let mut c = Cookie::new_with_str(name, value);
    c.set_http_only(true);
    c.set_same_site(SameSite::Lax);
    c.set_path("/");
    c.set_secure(state.public_url.starts_with("https://"));
    c.set_max_age(max_age);
    c
}

/// The CSRF token of this browser (double-submit: an HttpOnly cookie that every form repeats in a
/// hidden field). Created on first use.
pub fn csrf_token(state: &AppState, jar: &CookieJar) -> String {
    if let Some(c) = jar.get(CSRF_COOKIE) {
        let v = c.value_str().to_string();
        if v.len() >= 32 {
            return v;
        }
    }
    let token = random_token("");
    jar.add(base_cookie(
        state,
        CSRF_COOKIE,
        token.clone(),
        Duration::from_secs(30 * 86_400),
    ));
    token
}

/// Whether a submitted form's CSRF field matches the browser's cookie (constant time), and the
/// request's Origin, when sent, is our own.
pub fn csrf_ok(state: &AppState, req: &Request, jar: &CookieJar, submitted: &str) -> bool {
    if let Some(origin) = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        && origin != "null"
        && !state.public_url.starts_with(origin)
    {
        return false;
    }
    match jar.get(CSRF_COOKIE) {
        Some(c) => !submitted.is_empty() && ct_eq(c.value_str().as_bytes(), submitted.as_bytes()),
        None => false,
    }
}

/// A signed-in browser.
pub struct SignedIn {
    pub session_hash: [u8; 32],
    pub session: SessionRecord,
    pub user: UserRecord,
}

/// The browser's session, in any stage, with its user (banned users have no session).
pub fn session(state: &AppState, jar: &CookieJar) -> Option<SignedIn> {
    let id = jar.get(SESSION_COOKIE)?.value_str().to_string();
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
    if let Some(old) = jar.get(SESSION_COOKIE) {
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
        SESSION_COOKIE,
        id,
        Duration::from_millis(ttl),
    ));
    Ok(())
}

pub async fn end_session(state: &AppState, jar: &CookieJar) {
    if let Some(old) = jar.get(SESSION_COOKIE) {
        let hash = sha256(old.value_str());
        let _ = state.store.call(move |s| s.delete_session(&hash)).await;
    }
    jar.remove(SESSION_COOKIE);
}

/// Adds the pages' security headers.
pub fn secure_page(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// Renders an askama template as a page with the security headers.
pub fn page<T: askama::Template>(t: &T) -> Response {
    page_with_status(t, StatusCode::OK)
}

pub fn page_with_status<T: askama::Template>(t: &T, status: StatusCode) -> Response {
    match t.render() {
        Ok(html) => {
            let mut resp = Html(html).into_response();
            resp.set_status(status);
            secure_page(resp)
        }
        Err(e) => {
            tracing::error!(error = %e, "template error");
            secure_page((StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response())
        }
    }
}

pub fn redirect(to: &str) -> Response {
    secure_page(Redirect::see_other(to).into_response())
}

/// The client address for throttling (the socket peer; Pictor does not trust forwarding headers).
pub fn client_ip(req: &Request) -> Option<IpAddr> {
    req.remote_addr().as_socket_addr().map(|a| a.ip())
}

/// Sliding-window counters for sign-in attempts, per IP address and per account. Covers the
/// password step and the TOTP step alike.
#[derive(Default)]
pub struct Throttle {
    per_ip: Mutex<HashMap<IpAddr, Vec<Millis>>>,
    failures: Mutex<HashMap<String, Vec<Millis>>>,
}

/// Attempts one IP may make per minute (all accounts together).
pub const IP_ATTEMPTS_PER_MINUTE: usize = 20;
/// Failed attempts after which an account needs the captcha.
pub const CAPTCHA_AFTER_FAILURES: usize = 3;
/// Failed attempts in 15 minutes after which an account is locked for the rest of the window.
pub const LOCK_AFTER_FAILURES: usize = 10;
const FAILURE_WINDOW_MS: u64 = 15 * 60 * 1000;

pub enum Verdict {
    Allowed,
    /// Too many attempts: retry after this many seconds.
    Limited(u64),
}

impl Throttle {
    /// Records an attempt from `ip` and says whether it may proceed.
    pub fn attempt(&self, ip: Option<IpAddr>, account: &str, now: Millis) -> Verdict {
        if let Some(ip) = ip {
            let mut map = self.per_ip.lock().unwrap_or_else(|e| e.into_inner());
            if map.len() > 100_000 {
                map.retain(|_, v| v.last().is_some_and(|t| now < t + 60_000));
            }
            let hits = map.entry(ip).or_default();
            hits.retain(|t| now < t + 60_000);
            if hits.len() >= IP_ATTEMPTS_PER_MINUTE {
                let wait = hits
                    .first()
                    .map(|t| (t + 60_000).saturating_sub(now) / 1000 + 1)
                    .unwrap_or(60);
                return Verdict::Limited(wait);
            }
            hits.push(now);
        }
        let failures = self.failures(account, now);
        if failures >= LOCK_AFTER_FAILURES {
            return Verdict::Limited(FAILURE_WINDOW_MS / 1000);
        }
        Verdict::Allowed
    }

    pub fn failures(&self, account: &str, now: Millis) -> usize {
        let mut map = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        match map.get_mut(&account.to_lowercase()) {
            Some(v) => {
                v.retain(|t| now < t + FAILURE_WINDOW_MS);
                v.len()
            }
            None => 0,
        }
    }

    pub fn fail(&self, account: &str, now: Millis) {
        let mut map = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() > 100_000 {
            map.retain(|_, v| v.last().is_some_and(|t| now < t + FAILURE_WINDOW_MS));
        }
        map.entry(account.to_lowercase()).or_default().push(now);
    }

    pub fn succeed(&self, account: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&account.to_lowercase());
    }
}
