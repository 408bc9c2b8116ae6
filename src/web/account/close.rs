//! Deleting one's own account: the password and a ticked confirmation, then everything goes
//! (see `store::erase`); the browser is signed out and told so.

use poem::http::StatusCode;
use poem::web::Data;
use poem::web::cookie::CookieJar;
use poem::{Request, Response, handler};
use serde::Deserialize;

use super::{Extras, render, throttled};
use crate::auth::password;
use crate::state::AppState;
use crate::store::StoreError;
use crate::web::{CheckedForm, Member, client_ip, end_session, redirect, server_error};

#[derive(Deserialize)]
pub struct DeleteForm {
    #[serde(default)]
    password: String,
    #[serde(default)]
    confirm: String,
}

/// `POST /account/delete`.
#[handler]
pub async fn delete_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<DeleteForm>,
    Member(s): Member,
) -> Response {
    let refuse =
        |msg: &str, status| render(&state, jar, &s.user, Extras::error("delete", msg), status);
    if f.confirm != "yes" {
        return refuse(
            crate::web::i18n::tr("delete.unconfirmed"),
            StatusCode::BAD_REQUEST,
        );
    }
    if let Some(r) = throttled(&state, req, jar, &s.user, "delete") {
        return r;
    }
    let proven = match s.user.password_hash.clone() {
        Some(h) => password::verify_async(f.password.clone(), h).await,
        None => false,
    };
    if !proven {
        return refuse(
            crate::web::i18n::tr("delete.bad_password"),
            StatusCode::UNAUTHORIZED,
        );
    }
    state
        .idp
        .throttle
        .succeed(client_ip(&state, req), &s.user.email);
    let (uid, now) = (s.user.id, state.clock.now());
    let result = state
        .store
        .call(move |st| {
            let erased = st.erase_user(uid, now)?;
            let files = crate::store::erase::remove_files(st.folder(), &erased);
            Ok::<_, StoreError>((erased, files))
        })
        .await;
    match result {
        Ok((erased, files)) => {
            tracing::info!(user = %s.user.user_id(), jobs = erased.jobs, files, "account deleted by its owner");
            end_session(&state, jar).await;
            redirect("/login?done=deleted")
        }
        Err(StoreError::Conflict(m)) => {
            refuse(&crate::web::error::sentence(&m), StatusCode::CONFLICT)
        }
        Err(e) => server_error(&state, "deleting an account", e),
    }
}
