//! Changing the password (the current one first; other devices and apps signed out).

use poem::http::StatusCode;
use poem::web::Data;
use poem::web::cookie::CookieJar;
use poem::{Request, Response, handler};
use serde::Deserialize;

use crate::auth::password;
use crate::state::AppState;
use crate::web::server_error;
use crate::web::{client_ip, redirect};

use super::{Extras, render, throttled};
use crate::web::{CheckedForm, Member};

#[derive(Deserialize)]
pub struct PasswordForm {
    #[serde(default)]
    current_password: String,
    #[serde(default)]
    new_password: String,
    #[serde(default)]
    new_password2: String,
}

#[handler]
pub async fn password_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<PasswordForm>,
    Member(s): Member,
) -> Response {
    let refuse =
        |msg: &str, status| render(&state, jar, &s.user, Extras::error("password", msg), status);
    if let Some(r) = throttled(&state, req, jar, &s.user, "password") {
        return r;
    }
    let Some(current_hash) = s.user.password_hash.clone() else {
        return refuse(
            crate::web::i18n::tr("password.none"),
            StatusCode::BAD_REQUEST,
        );
    };
    if !password::verify_async(f.current_password.clone(), current_hash).await {
        return refuse(
            crate::web::i18n::tr("password.wrong"),
            StatusCode::UNAUTHORIZED,
        );
    }
    state
        .idp
        .throttle
        .succeed(client_ip(&state, req), &s.user.email);
    if f.new_password != f.new_password2 {
        return refuse(
            crate::web::i18n::tr("password.mismatch"),
            StatusCode::BAD_REQUEST,
        );
    }
    if password::check_policy(&f.new_password).is_err() {
        return refuse(&crate::web::password_rule(), StatusCode::BAD_REQUEST);
    }
    let hash = match password::hash_async(f.new_password.clone()).await {
        Ok(h) => h,
        Err(e) => return server_error(&state, "hashing a password", e),
    };
    let uid = s.user.id;
    let keep = s.session_hash;
    let now = state.clock.now();
    let result = state
        .store
        .call(move |st| {
            st.modify_user(uid, |u| {
                u.password_hash = Some(hash);
                u.password_needs_rehash = false;
                Ok(())
            })?;
            // Apps signed in with the old password lose their refresh tokens too.
            let grants = st.revoke_user_grants(uid, "password changed", now)?;
            Ok::<_, crate::store::StoreError>((st.delete_user_sessions(uid, Some(&keep))?, grants))
        })
        .await;
    match result {
        Ok((ended, grants)) => {
            tracing::info!(user = %s.user.user_id(), ended, grants, "password changed");
            redirect("/account?done=password")
        }
        Err(e) => server_error(&state, "changing a password", e),
    }
}
