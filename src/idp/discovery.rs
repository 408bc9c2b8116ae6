//! `GET /.well-known/openid-configuration` and `GET /oauth/jwks`.

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::{Data, Json};
use poem::{IntoResponse, Response, handler};
use serde_json::json;

use super::{SCOPES, keys};
use crate::state::AppState;

#[handler]
pub async fn openid_configuration(state: Data<&AppState>) -> Response {
    let base = &state.public_url;
    let mut resp = Json(json!({
        "issuer": base.to_string(),
        "authorization_endpoint": format!("{base}/oauth/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "userinfo_endpoint": format!("{base}/oauth/userinfo"),
        "revocation_endpoint": format!("{base}/oauth/revoke"),
        "jwks_uri": format!("{base}/oauth/jwks"),
        "scopes_supported": SCOPES,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "revocation_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        "claims_supported": ["sub", "iss", "aud", "exp", "iat", "auth_time", "nonce", "at_hash", "name", "picture", "preferred_username", "email", "email_verified"],
        "display_values_supported": ["page", "popup"],
        "prompt_values_supported": ["none", "login", "consent"],
        "claims_parameter_supported": false,
        "request_parameter_supported": false,
        "request_uri_parameter_supported": false,
        "authorization_response_iss_parameter_supported": true,
        "service_documentation": format!("{base}/api/pictor/docs"),
    }))
    .into_response();
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    resp
}

#[handler]
pub async fn jwks(state: Data<&AppState>) -> Response {
    match keys::jwks(&state.store) {
        Ok(doc) => {
            let mut resp = Json(doc).into_response();
            resp.headers_mut().insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=300"),
            );
            resp
        }
        Err(e) => {
            tracing::error!(error = %e, "jwks");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
