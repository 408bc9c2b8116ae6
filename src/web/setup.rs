//! `/setup?token=…`: the first start. While the store has no users the server prints a one-time
//! link; it shows a form that creates the administrator account (admin flag, 100 credits), signs
//! them in and goes to `/account`. The token is compared in constant time and stays valid until
//! an administrator exists (public registration is closed until then, so nobody can get in
//! first); it is used up by the administrator made with it.

use std::collections::HashMap;

use poem::http::StatusCode;
use poem::web::cookie::CookieJar;
use poem::web::{Data, Form, Query};
use poem::{Request, Response, Route, get, handler};
use serde::Deserialize;

use crate::auth::password;
use crate::idp::crypto;
use crate::state::AppState;
use crate::store::sessions::SessionStage;
use crate::store::{NewUser, StoreError};
use crate::web::PageError;
use crate::web::i18n;
use crate::web::{csrf_ok, csrf_token, page_with_status, redirect, start_session};

/// Credits the administrator starts with.
pub const ADMIN_START_CREDITS: u32 = 100;

/// The commands that make the administrator on the server instead: a new account, and an
/// existing one.
const CLI_ADD: &str = "pictor user add --email E --admin --password-stdin";
const CLI_MAKE_ADMIN: &str = "pictor user update --email E --admin true";

pub fn routes() -> Route {
    Route::new().at("/", get(setup_get).post(setup_post))
}

#[derive(askama::Template)]
#[template(path = "setup.html")]
struct SetupPage {
    error: Option<String>,
    csrf: String,
    token: String,
    name: String,
    email: String,
}

impl SetupPage {
    /// The note on the link and on doing it on the server instead (HTML: the commands in
    /// `<code>`).
    fn cli_note(&self) -> String {
        i18n::tr2("setup.note", CLI_ADD, CLI_MAKE_ADMIN)
    }
}

/// Whether `token` is the live setup token and no administrator exists yet.
fn link_valid(state: &AppState, token: &str) -> bool {
    !token.is_empty() && state.idp.setup_token_matches(token) && !super::setup_done(state)
}

fn dead_link(state: &AppState) -> Response {
    // Used (there is an administrator: sign in), or stale (a link from before a restart, or
    // mistyped, with nobody set up yet: the new link is in the console, or the commands).
    page_with_status(
        &SetupDeadPage {
            has_admin: crate::web::setup_done(state),
            cli_add: CLI_ADD,
            cli_make_admin: CLI_MAKE_ADMIN,
        },
        StatusCode::NOT_FOUND,
    )
}

#[derive(askama::Template)]
#[template(path = "setup_dead.html")]
struct SetupDeadPage {
    has_admin: bool,
    cli_add: &'static str,
    cli_make_admin: &'static str,
}

/// Takes the setup token if it is `token` (constant time), so two submissions cannot both
/// create an administrator. Returns the stored hash, to put back if creating the account fails.
fn claim_token(state: &AppState, token: &str) -> Option<[u8; 32]> {
    let mut guard = state
        .idp
        .setup_token
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let matches = guard
        .as_ref()
        .is_some_and(|h| crypto::ct_eq(h, &crypto::sha256(token)));
    if matches { guard.take() } else { None }
}

fn restore_token(state: &AppState, hash: [u8; 32]) {
    let mut guard = state
        .idp
        .setup_token
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if guard.is_none() {
        *guard = Some(hash);
    }
}

#[handler]
pub async fn setup_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let token = q.get("token").cloned().unwrap_or_default();
    if !link_valid(&state, &token) {
        return dead_link(&state);
    }
    page_with_status(
        &SetupPage {
            error: None,
            csrf: csrf_token(&state, jar),
            token,
            name: String::new(),
            email: String::new(),
        },
        StatusCode::OK,
    )
}

#[derive(Deserialize)]
pub struct SetupForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

#[handler]
pub async fn setup_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<SetupForm>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return PageError::FormExpired.render();
    }
    if !link_valid(&state, &f.token) {
        return dead_link(&state);
    }
    let name = f.name.trim().chars().take(100).collect::<String>();
    let email = f.email.trim().to_lowercase();
    let again = |msg: String, status| {
        page_with_status(
            &SetupPage {
                error: Some(msg),
                csrf: csrf_token(&state, jar),
                token: f.token.clone(),
                name: name.clone(),
                email: email.clone(),
            },
            status,
        )
    };
    if crate::store::users::normalize_email(&email).is_err() {
        return again(
            i18n::tr("register.bad_email").into(),
            StatusCode::BAD_REQUEST,
        );
    }
    if password::check_policy(&f.password).is_err() {
        return again(crate::web::password_rule(), StatusCode::BAD_REQUEST);
    }
    let hash = match password::hash_async(f.password.clone()).await {
        Ok(h) => h,
        Err(e) => {
            tracing::error!(error = %e, "hashing a password");
            return again(
                i18n::tr("setup.server_error").into(),
                StatusCode::INTERNAL_SERVER_ERROR,
            );
        }
    };
    let Some(claimed) = claim_token(&state, &f.token) else {
        return dead_link(&state);
    };
    let now = state.clock.now();
    let new = NewUser {
        email: email.clone(),
        name: Some(name.clone()).filter(|n| !n.is_empty()),
        password_hash: Some(hash),
        admin: true,
        // The owner's own pictures carry no watermark (the setup page says so).
        pro: true,
        credits: ADMIN_START_CREDITS,
        pending_credits: 0,
    };
    let created = state
        .store
        .call(move |s| {
            if s.has_admin()? {
                return Ok(None);
            }
            s.create_user(new, now).map(Some)
        })
        .await;
    let user = match created {
        Ok(Some(u)) => u,
        Ok(None) => return dead_link(&state),
        Err(StoreError::Invalid(m) | StoreError::Conflict(m)) => {
            restore_token(&state, claimed);
            return again(m, StatusCode::BAD_REQUEST);
        }
        Err(e) => {
            restore_token(&state, claimed);
            tracing::error!(error = %e, "creating the administrator");
            return again(
                i18n::tr("setup.server_error").into(),
                StatusCode::INTERNAL_SERVER_ERROR,
            );
        }
    };
    // Already taken above; this keeps the documented call for readers of `IdpState`.
    state.idp.consume_setup_token();
    tracing::info!(user = %user.user_id(), "administrator created with the setup link");
    if let Err(e) = start_session(&state, jar, user.id, SessionStage::Active, now).await {
        tracing::error!(error = %e, "starting a session");
        return redirect("/login?return_to=/account");
    }
    redirect("/account")
}
