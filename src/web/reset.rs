//! `/reset?token=…`: a person sets a new password with a one-time link an administrator gave
//! them (`pictor user reset-link`, the admin page; see `store::recovery`). Using it ends every
//! session of theirs and the apps they signed in to must ask again, as a password change does.

use std::collections::HashMap;

use poem::http::StatusCode;
use poem::web::cookie::CookieJar;
use poem::web::{Data, Query};
use poem::{Response, handler};
use serde::Deserialize;

use super::{CheckedForm, PageError, csrf_token, i18n, page_with_status, redirect, server_error};
use crate::auth::password;
use crate::auth::secret::sha256;
use crate::state::AppState;
use crate::store::UserRecord;

#[derive(askama::Template)]
#[template(path = "reset.html")]
struct ResetPage {
    csrf: String,
    token: String,
    email: String,
    error: Option<String>,
}

fn dead_link() -> PageError {
    PageError::refused(
        StatusCode::GONE,
        i18n::tr("reset.dead.title"),
        i18n::tr("reset.dead.message"),
    )
}

fn form(
    state: &AppState,
    jar: &CookieJar,
    token: &str,
    user: &UserRecord,
    error: Option<String>,
    status: StatusCode,
) -> Response {
    page_with_status(
        &ResetPage {
            csrf: csrf_token(state, jar),
            token: token.to_string(),
            email: user.email.clone(),
            error,
        },
        status,
    )
}

#[handler]
pub async fn reset_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Response, PageError> {
    let token = q.get("token").map(String::as_str).unwrap_or_default();
    let (hash, now) = (sha256(token), state.clock.now());
    let store = state.store.clone();
    let user = store
        .call(move |s| s.password_reset(&hash, now))
        .await
        .map_err(|e| PageError::server("reading a reset link", e))?
        .ok_or_else(dead_link)?;
    Ok(form(&state, jar, token, &user, None, StatusCode::OK))
}

#[derive(Deserialize)]
pub struct ResetForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    new_password: String,
    #[serde(default)]
    new_password2: String,
}

#[handler]
pub async fn reset_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<ResetForm>,
) -> Result<Response, PageError> {
    let (hash, now) = (sha256(&f.token), state.clock.now());
    let store = state.store.clone();
    let user = store
        .call(move |s| s.password_reset(&hash, now))
        .await
        .map_err(|e| PageError::server("reading a reset link", e))?
        .ok_or_else(dead_link)?;
    let refuse = |msg: String| {
        Ok(form(
            &state,
            jar,
            &f.token,
            &user,
            Some(msg),
            StatusCode::BAD_REQUEST,
        ))
    };
    if f.new_password != f.new_password2 {
        return refuse(i18n::tr("reset.mismatch").into());
    }
    if password::check_policy(&f.new_password).is_err() {
        return refuse(crate::web::password_rule());
    }
    let new_hash = password::hash_async(f.new_password.clone())
        .await
        .map_err(|e| PageError::server("hashing a password", e))?;
    let result = state
        .store
        .call(move |s| {
            let Some(user) = s.use_password_reset(&hash, new_hash, now)? else {
                return Ok(None);
            };
            let grants = s.revoke_user_grants(user.id, "password reset", now)?;
            let sessions = s.delete_user_sessions(user.id, None)?;
            Ok::<_, crate::store::StoreError>(Some((user, sessions, grants)))
        })
        .await;
    match result {
        Ok(Some((user, sessions, grants))) => {
            tracing::info!(user = %user.user_id(), sessions, grants, "password set with a reset link");
            Ok(redirect("/login?done=reset"))
        }
        // Used by another tab meanwhile.
        Ok(None) => Err(dead_link()),
        Err(e) => Ok(server_error(
            &state,
            "setting a password from a reset link",
            e,
        )),
    }
}
