//! The image API key (issuing one replaces the previous) and the webhook signing secret.

use poem::http::StatusCode;
use poem::web::Data;
use poem::web::cookie::CookieJar;
use poem::{Response, handler};

use crate::auth::apikey;
use crate::state::AppState;
use crate::web::server_error;

use serde::Deserialize;

use super::{Empty, Extras, NewKey, render};
use crate::store::StoreError;
use crate::web::redirect;
use crate::web::{CheckedForm, Member, PageError};

/// `POST /account/key`: a new default key, replacing the current one (the seed's behaviour);
/// when there is one, only with the confirmation box ticked.
#[derive(Deserialize)]
pub struct IssueForm {
    #[serde(default)]
    confirm: String,
}

#[handler]
pub async fn issue_key_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<IssueForm>,
    Member(s): Member,
) -> Response {
    if s.user.api_key_hash.is_some() && f.confirm != "yes" {
        return render(
            &state,
            jar,
            &s.user,
            Extras::error("key", crate::web::i18n::tr("keys.unconfirmed")),
            StatusCode::BAD_REQUEST,
        );
    }
    let key = apikey::mint();
    let (hash, uid, now) = (key.hash, s.user.id, state.clock.now());
    let tail = apikey::tail(&key.plaintext).to_string();
    match state
        .store
        .call(move |st| st.set_api_key(uid, hash, &tail, now))
        .await
    {
        Ok(user) => {
            tracing::info!(user = %user.user_id(), "API key issued from the account page");
            let extras = Extras {
                new_key: Some(NewKey {
                    label: None,
                    plaintext: key.plaintext,
                }),
                ..Extras::default()
            };
            render(&state, jar, &user, extras, StatusCode::OK)
        }
        Err(e) => server_error(&state, "issuing an API key", e),
    }
}

#[derive(Deserialize)]
pub struct NamedKeyForm {
    #[serde(default)]
    label: String,
}

/// `POST /account/keys`: a new named key beside the others; shown once.
#[handler]
pub async fn named_key_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<NamedKeyForm>,
    Member(s): Member,
) -> Response {
    let key = apikey::mint();
    let (hash, uid, now) = (key.hash, s.user.id, state.clock.now());
    let tail = apikey::tail(&key.plaintext).to_string();
    let label = f.label.clone();
    let made = state
        .store
        .call(move |st| st.add_named_key(uid, &label, hash, &tail, now))
        .await;
    match made {
        Ok((user, named)) => {
            tracing::info!(user = %user.user_id(), key = %named.id, "named API key made");
            let extras = Extras {
                new_key: Some(NewKey {
                    label: Some(named.label),
                    plaintext: key.plaintext,
                }),
                ..Extras::default()
            };
            render(&state, jar, &user, extras, StatusCode::OK)
        }
        Err(StoreError::Invalid(m) | StoreError::Conflict(m)) => render(
            &state,
            jar,
            &s.user,
            Extras::error("keys", crate::web::error::sentence(&m)),
            StatusCode::BAD_REQUEST,
        ),
        Err(e) => server_error(&state, "making a named API key", e),
    }
}

#[derive(Deserialize)]
pub struct RevokeKeyForm {
    #[serde(default)]
    id: String,
}

/// `POST /account/keys/revoke`: one named key stops working.
#[handler]
pub async fn revoke_key_post(
    state: Data<&AppState>,
    CheckedForm(f): CheckedForm<RevokeKeyForm>,
    Member(s): Member,
) -> Response {
    let (uid, id) = (s.user.id, f.id.clone());
    match state
        .store
        .call(move |st| st.revoke_named_key(uid, &id))
        .await
    {
        Ok(Some(key)) => {
            tracing::info!(user = %s.user.user_id(), key = %key.id, "named API key revoked");
            redirect("/account?done=key-revoked")
        }
        // Already gone (a second click, another tab): nothing to do.
        Ok(None) => redirect("/account?done=key-revoked"),
        Err(e) => server_error(&state, "revoking an API key", e),
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
