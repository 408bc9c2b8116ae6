//! RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0): `GET` and `POST /oauth/logout`,
//! published as the discovery document's `end_session_endpoint`.
//!
//! Parameters (query for `GET`, form for `POST`):
//! - `id_token_hint`: an id_token Pictor issued to the app. Its signature is checked against
//!   Pictor's keys (retired ones too), its `iss` must be Pictor; its expiry is not checked (the
//!   specification recommends accepting expired id_tokens as hints). Its `aud` names the app.
//! - `client_id`: names the app when there is no hint (must agree with the hint's `aud`).
//! - `post_logout_redirect_uri`: where to send the browser afterwards; it must be one of the
//!   app's registered post-logout redirect URIs, byte for byte (`pictor client add
//!   --post-logout-redirect-uri`, `pictor client logout-uris`), and needs the app named by a
//!   hint or `client_id`. `state` is passed back on it.
//!
//! With a valid hint whose `sub` is the person signed in here (or when nobody is), the session
//! ends at once, as Keycloak does. Otherwise (no hint, or a hint for somebody else) Pictor asks
//! first: a link on another site alone cannot sign anyone out. A bad hint, an unknown app or an
//! unregistered redirect URI gets an error page and changes nothing. Signing out ends the
//! browser's Pictor session; the app's tokens stay valid until they expire or the app revokes
//! them (`/oauth/revoke`), as with the other providers.

use std::collections::HashMap;

use poem::http::StatusCode;
use poem::web::Data;
use poem::web::cookie::CookieJar;
use poem::{Request, Response, handler};
use serde_json::Value;

use super::authorize::{parse_params, with_params};
use crate::state::AppState;
use crate::web::i18n;
use crate::web::oauth_error_page;
use crate::web::{csrf_ok, csrf_token, end_session, page, redirect, session};

/// The parameters passed on through the confirmation form.
const PASSED_ON: [&str; 5] = [
    "id_token_hint",
    "client_id",
    "post_logout_redirect_uri",
    "state",
    "ui_locales",
];

#[derive(askama::Template)]
#[template(path = "logout.html")]
struct LogoutPage {
    confirm: bool,
    app: Option<String>,
    email: String,
    csrf: String,
    params: Vec<(String, String)>,
}

/// A checked logout request.
struct Checked {
    /// The hint's subject, when a valid hint was given.
    hint_sub: Option<String>,
    /// The app, when named by the hint or `client_id`.
    app: Option<String>,
    /// Where to go afterwards (registered for the app), with `state`.
    then: Option<String>,
}

fn refuse(state: &AppState, message: &str) -> Response {
    oauth_error_page(
        state,
        StatusCode::BAD_REQUEST,
        i18n::tr("logout.refused.title"),
        message,
    )
}

async fn check(state: &AppState, params: &HashMap<String, String>) -> Result<Checked, Response> {
    let get = |k: &str| params.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let mut hint_sub = None;
    let mut app = None;
    if let Some(hint) = get("id_token_hint") {
        let (store, token) = (state.store.clone(), hint.to_string());
        let claims = tokio::task::spawn_blocking(move || super::keys::verify(&store, &token))
            .await
            .ok()
            .flatten()
            .filter(|c| c["iss"].as_str() == Some(state.public_url.as_ref()));
        let Some(claims) = claims else {
            return Err(refuse(state, i18n::tr("logout.refused.bad_hint")));
        };
        let aud = match &claims["aud"] {
            Value::String(a) => Some(a.clone()),
            Value::Array(a) if a.len() == 1 => a[0].as_str().map(str::to_string),
            _ => None,
        };
        hint_sub = claims["sub"].as_str().map(str::to_string);
        app = aud;
    }
    if let Some(client_id) = get("client_id") {
        if app.as_deref().is_some_and(|a| a != client_id) {
            return Err(refuse(state, i18n::tr("logout.refused.hint_mismatch")));
        }
        app = Some(client_id.to_string());
    }
    let client = match &app {
        Some(name) => {
            let (store, name) = (state.store.clone(), name.clone());
            match tokio::task::spawn_blocking(move || store.client(&name)).await {
                Ok(Ok(Some(c))) => Some(c),
                Ok(Ok(None)) => {
                    return Err(refuse(state, i18n::tr("logout.refused.unknown_app")));
                }
                _ => {
                    return Err(oauth_error_page(
                        state,
                        StatusCode::INTERNAL_SERVER_ERROR,
                        i18n::tr("logout.error.title"),
                        i18n::tr("logout.error.message"),
                    ));
                }
            }
        }
        None => None,
    };
    let then = match get("post_logout_redirect_uri") {
        None => None,
        Some(uri) => {
            let Some(client) = &client else {
                return Err(refuse(state, i18n::tr("logout.refused.needs_app")));
            };
            if !client.post_logout_redirect_uris.iter().any(|u| u == uri) {
                return Err(refuse(state, i18n::tr("logout.refused.unregistered")));
            }
            Some(match get("state") {
                Some(s) => with_params(uri, &[("state", s)]),
                None => uri.to_string(),
            })
        }
    };
    Ok(Checked {
        hint_sub,
        app: client.map(|c| c.name),
        then,
    })
}

/// Ends the session (if any) and goes where the request asked.
async fn sign_out(state: &AppState, jar: &CookieJar, checked: &Checked) -> Response {
    end_session(state, jar).await;
    match &checked.then {
        Some(uri) => redirect(uri),
        None => page(&LogoutPage {
            confirm: false,
            app: None,
            email: String::new(),
            csrf: String::new(),
            params: Vec::new(),
        }),
    }
}

async fn handle(
    state: &AppState,
    jar: &CookieJar,
    params: &HashMap<String, String>,
    confirmed: bool,
) -> Response {
    let checked = match check(state, params).await {
        Ok(c) => c,
        Err(page) => return page,
    };
    let current = session(state, jar);
    let Some(current) = current else {
        // Nobody is signed in here: nothing to end, nothing to ask.
        return sign_out(state, jar, &checked).await;
    };
    let same_person = checked
        .hint_sub
        .as_deref()
        .is_some_and(|sub| sub == current.user.user_id().to_string());
    if same_person || confirmed {
        return sign_out(state, jar, &checked).await;
    }
    let passed_on = PASSED_ON
        .iter()
        .filter_map(|k| params.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    page(&LogoutPage {
        confirm: true,
        app: checked.app,
        email: current.user.email.clone(),
        csrf: csrf_token(state, jar),
        params: passed_on,
    })
}

#[handler]
pub async fn logout_get(req: &Request, state: Data<&AppState>, jar: &CookieJar) -> Response {
    match parse_params(req.uri().query().unwrap_or_default()) {
        Ok(params) => handle(&state, jar, &params, false).await,
        Err(e) => refuse(&state, &e),
    }
}

/// The app's form post (as `GET`), or the confirmation form (with `csrf` and `confirm=yes`).
#[handler]
pub async fn logout_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    body: String,
) -> Response {
    let params = match parse_params(&body) {
        Ok(p) => p,
        Err(e) => return refuse(&state, &e),
    };
    let confirmed = params.get("confirm").map(String::as_str) == Some("yes");
    if confirmed {
        let csrf = params.get("csrf").map(String::as_str).unwrap_or_default();
        if !csrf_ok(&state, req, jar, csrf) {
            return crate::web::PageError::oauth_form_expired().render();
        }
    }
    handle(&state, jar, &params, confirmed).await
}
