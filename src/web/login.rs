//! `/login` (e-mail + password, captcha after repeated failures), `/login/totp` (second factor)
//! and `/logout`. Throttled per IP and per account, on both steps.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use poem::http::StatusCode;
use poem::web::cookie::CookieJar;
use poem::web::{Data, Form, Query};
use poem::{Request, Response, handler};
use serde::Deserialize;

use super::{error_page, query_escape, safe_return_to};
use crate::auth::password;
use crate::idp::crypto::sha256_hex;
use crate::state::AppState;
use crate::store::sessions::SessionStage;
use crate::web::PageError;
use crate::web::{
    Verdict, client_ip, csrf_ok, csrf_token, end_session, page_with_status, redirect, session,
    signed_in, start_session,
};

#[derive(askama::Template)]
#[template(path = "login.html")]
struct LoginPage {
    app: Option<String>,
    notice: Option<&'static str>,
    error: Option<String>,
    csrf: String,
    return_to: String,
    return_to_q: String,
    email: String,
    challenge: Option<crate::idp::pow::Challenge>,
    /// Outgoing mail is configured: "Forgot password?" is offered.
    forgot: bool,
    /// Nobody has set this Pictor up yet (no administrator): the page says so.
    setup_pending: bool,
}

#[derive(askama::Template)]
#[template(path = "totp.html")]
struct TotpPage {
    error: Option<String>,
    csrf: String,
    return_to: String,
}

/// A fixed argon2 hash verified when the e-mail is unknown, so timing does not reveal accounts.
const DUMMY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$J0E+ZfBN1jNrIfgxDLNv1ILRFdvcQqkUPDvvKSMKW5k";

/// A new bot-check challenge at the configured difficulty.
pub fn new_challenge(state: &AppState) -> crate::idp::pow::Challenge {
    let bits = state
        .store
        .settings()
        .map(|s| s.challenge_bits)
        .unwrap_or(crate::idp::pow::MIN_BITS);
    state
        .idp
        .challenges
        .issue(&state.idp.secrets, bits, state.clock.now())
}

/// Gives a new account its held sign-up credits at its first full sign-in, unless the
/// `signup_approval` setting leaves that to an administrator.
pub async fn release_signup_credits(state: &AppState, user: &crate::store::UserRecord) {
    if user.pending_credits == 0 {
        return;
    }
    let by_approval = state
        .store
        .settings()
        .map(|s| s.signup_approval == 1)
        .unwrap_or(true);
    if by_approval {
        return;
    }
    let (uid, now) = (user.id, state.clock.now());
    match state
        .store
        .call(move |s| s.release_pending_credits(uid, now))
        .await
    {
        Ok(n) if n > 0 => {
            tracing::info!(user = %user.user_id(), credits = n, "sign-up credits released at the first sign-in")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "could not release sign-up credits"),
    }
}

#[allow(clippy::too_many_arguments)]
fn login_page(
    state: &AppState,
    req: &Request,
    jar: &CookieJar,
    return_to: &str,
    email: &str,
    error: Option<String>,
    status: StatusCode,
    app: Option<String>,
    notice: Option<&'static str>,
) -> Response {
    let now = state.clock.now();
    let ip = client_ip(state, req);
    let throttle = &state.idp.throttle;
    // Before the account is typed, the address decides: after its failed sign-ins the fresh
    // form carries the bot check already, so the next attempt is not wasted on asking for it.
    let challenge = if email.is_empty() {
        throttle.source_needs_challenge(ip, now)
    } else {
        throttle.needs_challenge(ip, email, now)
    }
    .then(|| new_challenge(state));
    page_with_status(
        &LoginPage {
            notice,
            app,
            error,
            csrf: csrf_token(state, jar),
            return_to: return_to.to_string(),
            return_to_q: query_escape(return_to),
            email: email.to_string(),
            challenge,
            forgot: state.mailer.is_some(),
            setup_pending: !crate::web::setup_done(state),
        },
        status,
    )
}

#[handler]
pub async fn login_get(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let return_to = safe_return_to(q.get("return_to").map(String::as_str));
    // `force=1` (an app asked for prompt=login or max_age): sign in again even when signed in.
    let force = q.get("force").is_some_and(|v| v == "1");
    if !force && signed_in(&state, jar).is_some() {
        return redirect(&return_to);
    }
    login_page(
        &state,
        req,
        jar,
        &return_to,
        "",
        None,
        StatusCode::OK,
        q.get("app").cloned(),
        match q.get("done").map(String::as_str) {
            Some("reset") => Some(crate::web::i18n::tr("login.notice.reset")),
            Some("deleted") => Some(crate::web::i18n::tr("login.notice.deleted")),
            _ => None,
        },
    )
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    return_to: String,
    #[serde(default)]
    pow_challenge: String,
    #[serde(default)]
    pow_nonce: String,
}

#[handler]
pub async fn login_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<LoginForm>,
) -> Response {
    let return_to = safe_return_to(Some(&f.return_to));
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return PageError::FormExpired.render();
    }
    let now = state.clock.now();
    let email = f.email.trim().to_lowercase();
    let ip = client_ip(&state, req);
    // The form again, with an error.
    let again = |error: &str, status| {
        login_page(
            &state,
            req,
            jar,
            &return_to,
            &email,
            Some(error.to_string()),
            status,
            None,
            None,
        )
    };
    // Counted as a failure from here on, unless the password turns out right.
    let challenge = match state.idp.throttle.attempt(ip, &email, now) {
        Verdict::Limited(secs) => {
            state.idp.metrics_signin(false);
            return again(
                &crate::web::i18n::tr1("account.too_many", secs),
                StatusCode::TOO_MANY_REQUESTS,
            );
        }
        Verdict::Allowed { challenge } => challenge,
    };
    if challenge
        && !state
            .idp
            .challenges
            .verify(&state.idp.secrets, &f.pow_challenge, &f.pow_nonce, now)
    {
        state.idp.throttle.cancel(ip, &email);
        return again(
            crate::web::i18n::tr("login.pow_missing"),
            StatusCode::BAD_REQUEST,
        );
    }
    let user = state.store.user_by_email(&email).ok().flatten();
    let hash = user
        .as_ref()
        .and_then(|u| u.password_hash.clone())
        .unwrap_or_else(|| DUMMY_HASH.to_string());
    state.idp.password_checks.fetch_add(1, Ordering::Relaxed);
    let ok = password::verify_async(f.password.clone(), hash).await
        && user.as_ref().is_some_and(|u| u.password_hash.is_some());
    let Some(user) = user.filter(|_| ok) else {
        state.idp.metrics_signin(false);
        tracing::info!(account = %sha256_hex(&email)[..12], "sign-in failed");
        return again(
            crate::web::i18n::tr("login.wrong"),
            StatusCode::UNAUTHORIZED,
        );
    };
    if user.banned {
        return again(crate::web::i18n::tr("login.blocked"), StatusCode::FORBIDDEN);
    }
    // An imported (pbkdf2) hash is replaced by Argon2id now that we have the password.
    if user
        .password_hash
        .as_deref()
        .is_some_and(crate::auth::import::needs_rehash)
    {
        match password::hash_async(f.password.clone()).await {
            Ok(new_hash) => {
                let uid = user.id;
                let result = state
                    .store
                    .call(move |s| {
                        s.modify_user(uid, |u| {
                            u.password_hash = Some(new_hash);
                            u.password_needs_rehash = false;
                            Ok(())
                        })
                    })
                    .await;
                match result {
                    Ok(_) => {
                        tracing::info!(user = %user.user_id(), "imported password hash upgraded to argon2id")
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "could not upgrade an imported password hash")
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not upgrade an imported password hash"),
        }
    }
    let stage = if user.totp_secret_enc.is_some() {
        SessionStage::PendingTotp
    } else {
        SessionStage::Active
    };
    // The password was right: this attempt is not a failure (the TOTP step counts on its own).
    state.idp.throttle.succeed(ip, &email);
    if stage == SessionStage::Active {
        state.idp.metrics_signin(true);
        release_signup_credits(&state, &user).await;
    }
    super::restore_language(&state, jar, &user);
    if let Err(e) = start_session(&state, jar, user.id, stage, now).await {
        tracing::error!(error = %e, "starting a session");
        return error_page(
            &state,
            StatusCode::INTERNAL_SERVER_ERROR,
            crate::web::i18n::tr("error.server.title"),
            crate::web::i18n::tr("error.server.message"),
        );
    }
    match stage {
        SessionStage::PendingTotp => redirect(&format!(
            "/login/totp?return_to={}",
            query_escape(&return_to)
        )),
        SessionStage::Active => redirect(&return_to),
    }
}

#[handler]
pub async fn totp_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let return_to = safe_return_to(q.get("return_to").map(String::as_str));
    match session(&state, jar) {
        Some(s) if s.session.stage == SessionStage::PendingTotp => page_with_status(
            &TotpPage {
                error: None,
                csrf: csrf_token(&state, jar),
                return_to,
            },
            StatusCode::OK,
        ),
        Some(_) => redirect(&return_to),
        None => redirect(&format!("/login?return_to={}", query_escape(&return_to))),
    }
}

#[derive(Deserialize)]
pub struct TotpForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    code: String,
    #[serde(default)]
    return_to: String,
}

#[handler]
pub async fn totp_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<TotpForm>,
) -> Response {
    let return_to = safe_return_to(Some(&f.return_to));
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return PageError::FormExpired.render();
    }
    let Some(s) = session(&state, jar).filter(|s| s.session.stage == SessionStage::PendingTotp)
    else {
        return redirect(&format!("/login?return_to={}", query_escape(&return_to)));
    };
    let now = state.clock.now();
    let email = s.user.email.clone();
    let retry = |msg: &str, status| {
        page_with_status(
            &TotpPage {
                error: Some(msg.to_string()),
                csrf: csrf_token(&state, jar),
                return_to: return_to.clone(),
            },
            status,
        )
    };
    let ip = client_ip(&state, req);
    if let Verdict::Limited(secs) = state.idp.throttle.attempt(ip, &email, now) {
        return retry(
            &crate::web::i18n::tr1("account.too_many", secs),
            StatusCode::TOO_MANY_REQUESTS,
        );
    }
    let ok = crate::idp::totp::verify_code(&state, &s.user, &f.code, now).await;
    if !ok {
        state.idp.metrics_signin(false);
        return retry(crate::web::i18n::tr("totp.wrong"), StatusCode::UNAUTHORIZED);
    }
    state.idp.throttle.succeed(ip, &email);
    state.idp.metrics_signin(true);
    release_signup_credits(&state, &s.user).await;
    // Second factor done: a brand-new session id for the full session.
    if let Err(e) = start_session(&state, jar, s.user.id, SessionStage::Active, now).await {
        tracing::error!(error = %e, "starting a session");
        return error_page(
            &state,
            StatusCode::INTERNAL_SERVER_ERROR,
            crate::web::i18n::tr("error.server.title"),
            crate::web::i18n::tr("error.server.message"),
        );
    }
    redirect(&return_to)
}

#[derive(Deserialize)]
pub struct LogoutForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    return_to: String,
}

#[handler]
pub async fn logout_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<LogoutForm>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return PageError::FormExpired.render();
    }
    end_session(&state, jar).await;
    let return_to = safe_return_to(Some(&f.return_to));
    redirect(&format!("/login?return_to={}", query_escape(&return_to)))
}
