//! `GET|POST /oauth/userinfo` with the Bearer access token (OIDC Core §5.3).

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::{Data, Json};
use poem::{IntoResponse, Request, Response, handler};
use serde_json::json;

use super::crypto::sha256;
use super::error::no_store;
use super::user_claims;
use crate::state::AppState;

fn invalid_token(description: &str) -> Response {
    let mut resp = (
        StatusCode::UNAUTHORIZED,
        Json(json!({"error": "invalid_token", "error_description": description})),
    )
        .into_response();
    let value = format!(
        "Bearer realm=\"pictor\", error=\"invalid_token\", error_description=\"{description}\""
    );
    if let Ok(v) = HeaderValue::from_str(&value) {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    no_store(resp)
}

#[handler]
pub async fn userinfo(req: &Request, state: Data<&AppState>) -> Response {
    userinfo_response(&state, req)
}

/// The answer (two reads of the store's cache, no write, nothing to wait for): also served by
/// the outermost layer for `GET` (see [`super::discovery::prepared_response`]).
pub fn userinfo_response(state: &AppState, req: &Request) -> Response {
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim().to_string());
    let Some(token) = token else {
        return invalid_token("an access token is required");
    };
    let now = state.clock.now();
    let Ok(Some(access)) = state.store.access_token(&sha256(&token), now) else {
        return invalid_token("the access token is invalid, expired or revoked");
    };
    let Ok(Some(user)) = state.store.user(access.user_id) else {
        return invalid_token("the access token is invalid, expired or revoked");
    };
    if user.banned {
        return invalid_token("the account is blocked");
    }
    no_store(Json(user_claims(state, &user, &access.scope)).into_response())
}
