//! The image API key (issuing one replaces the previous) and the webhook signing secret.

use poem::http::StatusCode;
use poem::web::Data;
use poem::web::cookie::CookieJar;
use poem::{Response, handler};

use crate::auth::apikey;
use crate::state::AppState;
use crate::web::server_error;

use super::{Empty, Extras, render};
use crate::web::{CheckedForm, Member, PageError};

#[handler]
pub async fn issue_key_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(Empty {}): CheckedForm<Empty>,
    Member(s): Member,
) -> Response {
    let key = apikey::mint();
    let hash = key.hash;
    let uid = s.user.id;
    match state.store.call(move |st| st.set_api_key(uid, hash)).await {
        Ok(user) => {
            tracing::info!(user = %user.user_id(), "API key issued from the account page");
            let extras = Extras {
                new_key: Some(key.plaintext),
                ..Extras::default()
            };
            render(&state, jar, &user, extras, StatusCode::OK)
        }
        Err(e) => server_error(&state, "issuing an API key", e),
    }
}

/// Makes the webhook signing secret, or rotates it (the old one signs beside it for a day).
#[handler]
pub async fn webhook_secret_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(Empty {}): CheckedForm<Empty>,
    Member(s): Member,
) -> Response {
    let (uid, now, secrets) = (s.user.id, state.clock.now(), state.idp.secrets.clone());
    let made = state
        .store
        .call(move |st| {
            crate::jobs::webhooks::rotate(st, &secrets, uid, now)?;
            st.user(uid)
        })
        .await;
    match made {
        Ok(Some(user)) => {
            tracing::info!(user = %user.user_id(), "webhook secret rotated from the account page");
            let extras = Extras {
                webhook_fresh: true,
                ..Extras::default()
            };
            render(&state, jar, &user, extras, StatusCode::OK)
        }
        Ok(None) => PageError::SignIn {
            return_to: "/account".into(),
        }
        .render(),
        Err(e) => server_error(&state, "rotating the webhook secret", e),
    }
}
