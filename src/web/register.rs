//! `/register`: a new account with name, e-mail and password, behind the captcha. Signs the new
//! user in and continues where they were going (usually the consent page).

use std::collections::HashMap;

use poem::http::StatusCode;
use poem::web::cookie::CookieJar;
use poem::web::{Data, Form, Query};
use poem::{Request, Response, handler};
use serde::Deserialize;

use super::{error_page, query_escape, safe_return_to};
use crate::auth::password;
use crate::state::AppState;
use crate::store::sessions::SessionStage;
use crate::store::{NewUser, StoreError};
use crate::web::PageError;
use crate::web::{
    Verdict, client_ip, csrf_ok, csrf_token, page_with_status, redirect, signed_in, start_session,
};

#[derive(askama::Template)]
#[template(path = "register.html")]
struct RegisterPage {
    error: Option<String>,
    csrf: String,
    return_to: String,
    return_to_q: String,
    name: String,
    email: String,
    challenge: crate::idp::pow::Challenge,
}

fn register_page(
    state: &AppState,
    jar: &CookieJar,
    return_to: &str,
    name: &str,
    email: &str,
    error: Option<String>,
    status: StatusCode,
) -> Response {
    page_with_status(
        &RegisterPage {
            error,
            csrf: csrf_token(state, jar),
            return_to: return_to.to_string(),
            return_to_q: query_escape(return_to),
            name: name.to_string(),
            email: email.to_string(),
            challenge: super::login::new_challenge(state),
        },
        status,
    )
}

#[handler]
pub async fn register_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let return_to = safe_return_to(q.get("return_to").map(String::as_str));
    if signed_in(&state, jar).is_some() {
        return redirect(&return_to);
    }
    if let Some(closed) = closed_page(&state) {
        return closed;
    }
    register_page(&state, jar, &return_to, "", "", None, StatusCode::OK)
}

#[derive(Deserialize)]
pub struct RegisterForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
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

/// The page shown while registration is closed: before the first administrator exists (the
/// setup link or the CLI makes one), or when the `registration_open` setting is 0.
fn closed_page(state: &AppState) -> Option<Response> {
    if !super::setup_done(state) {
        return Some(error_page(
            state,
            StatusCode::FORBIDDEN,
            crate::web::i18n::tr("register.not_set_up.title"),
            &crate::web::i18n::tr1(
                "register.not_set_up.message",
                "pictor user add --email E --admin --password-stdin",
            ),
        ));
    }
    let open = state
        .store
        .settings()
        .map(|s| s.registration_open == 1)
        .unwrap_or(false);
    (!open).then(|| {
        error_page(
            state,
            StatusCode::FORBIDDEN,
            crate::web::i18n::tr("register.closed.title"),
            crate::web::i18n::tr("register.closed.message"),
        )
    })
}

#[handler]
pub async fn register_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<RegisterForm>,
) -> Response {
    let return_to = safe_return_to(Some(&f.return_to));
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return PageError::FormExpired.render();
    }
    if let Some(closed) = closed_page(&state) {
        return closed;
    }
    let now = state.clock.now();
    let ip = client_ip(&state, req);
    let name = f.name.trim().chars().take(100).collect::<String>();
    let email = f.email.trim().to_lowercase();
    let again = |msg: &str, status| {
        register_page(
            &state,
            jar,
            &return_to,
            &name,
            &email,
            Some(msg.to_string()),
            status,
        )
    };
    if let Verdict::Limited(secs) = state.idp.throttle.attempt(ip, "register:", now) {
        return again(
            &crate::web::i18n::tr1("account.too_many", secs),
            StatusCode::TOO_MANY_REQUESTS,
        );
    }
    // A place in this address's and subnet's hourly quota, taken now (parallel requests cannot
    // all pass) and given back below if no account is made.
    if let Verdict::Limited(secs) = state.idp.throttle.signup_reserve(ip, now) {
        return again(
            &crate::web::i18n::tr1("register.network_quota", secs.div_ceil(60)),
            StatusCode::TOO_MANY_REQUESTS,
        );
    }
    let again = |msg: &str, status| {
        state.idp.throttle.signup_failed(ip);
        again(msg, status)
    };
    if !state
        .idp
        .challenges
        .verify(&state.idp.secrets, &f.pow_challenge, &f.pow_nonce, now)
    {
        return again(
            crate::web::i18n::tr("register.pow_missing"),
            StatusCode::BAD_REQUEST,
        );
    }
    if crate::store::users::normalize_email(&email).is_err() {
        return again(
            crate::web::i18n::tr("register.bad_email"),
            StatusCode::BAD_REQUEST,
        );
    }
    if password::check_policy(&f.password).is_err() {
        return again(&crate::web::password_rule(), StatusCode::BAD_REQUEST);
    }
    let hash = match password::hash_async(f.password.clone()).await {
        Ok(h) => h,
        Err(e) => {
            tracing::error!(error = %e, "hashing a password");
            return again(
                crate::web::i18n::tr("error.server.message"),
                StatusCode::INTERNAL_SERVER_ERROR,
            );
        }
    };
    let credits = state
        .store
        .settings()
        .map(|s| s.signup_credits)
        .unwrap_or(0);
    let new = NewUser {
        email: email.clone(),
        name: Some(name.clone()).filter(|n| !n.is_empty()),
        password_hash: Some(hash),
        admin: false,
        pro: false,
        // Held until the first sign-in (or an administrator's approval): a script that only
        // registers gets nothing to spend.
        credits: 0,
        pending_credits: credits,
    };
    let user = match state.store.call(move |s| s.create_user(new, now)).await {
        Ok(u) => u,
        Err(StoreError::Conflict(_)) => {
            return again(crate::web::i18n::tr("register.taken"), StatusCode::CONFLICT);
        }
        Err(StoreError::Invalid(m)) => return again(&m, StatusCode::BAD_REQUEST),
        Err(e) => {
            tracing::error!(error = %e, "creating a user");
            return again(
                crate::web::i18n::tr("error.server.message"),
                StatusCode::INTERNAL_SERVER_ERROR,
            );
        }
    };
    state.idp.throttle.succeed(ip, "register:");
    if let Err(e) = start_session(&state, jar, user.id, SessionStage::Active, now).await {
        tracing::error!(error = %e, "starting a session");
    }
    redirect(&return_to)
}
