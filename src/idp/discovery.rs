//! `GET /.well-known/openid-configuration` and `GET /oauth/jwks`.

//!
//! Both bodies are prepared once (discovery at its first request, the JWKS once per key change)
//! and served as shared bytes with an `ETag`; `If-None-Match` with it answers 304. Clients may
//! cache them for 5 minutes (`Cache-Control: public, max-age=300`), so a key rotation reaches
//! every relying party within that, while the retired key stays in the JWKS far longer.

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::Data;
use poem::{IntoResponse, Request, Response, handler};
use serde_json::json;

use super::SCOPES;
use crate::state::AppState;

/// A prepared JSON body with its ETag: 304 when the client has it, else the bytes.
fn cached_json(req: &Request, body: &bytes::Bytes, etag: &str) -> Response {
    let fresh = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = body.clone().into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        r
    };
    let h = resp.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    resp
}

#[handler]
pub async fn openid_configuration(req: &Request, state: Data<&AppState>) -> Response {
    discovery_response(&state, req)
}

fn discovery_response(state: &AppState, req: &Request) -> Response {
    let (body, etag) = state.idp.discovery.get_or_init(|| {
        let text = discovery_document(state.public_url.as_ref()).to_string();
        let etag = format!("\"{}\"", hex::encode(&super::crypto::sha256(&text)[..12]));
        (bytes::Bytes::from(text), etag)
    });
    cached_json(req, body, etag)
}

/// The answer to a `GET` of the discovery document, of the JWKS when it is prepared, or of
/// userinfo, for the outermost layer to send without the router, cookie jar, body limit and
/// state layers underneath (together they cost about as much as a JWKS answer itself). These
/// are the identity provider's hot reads, called by every relying party, often; none of them
/// reads a cookie or a body or waits for anything. `None`: another request, or a JWKS not
/// prepared yet (the router's handler builds it).
pub fn prepared_response(state: &AppState, req: &Request) -> Option<Response> {
    if req.method() != poem::http::Method::GET {
        return None;
    }
    match req.uri().path() {
        "/.well-known/openid-configuration" => Some(discovery_response(state, req)),
        "/oauth/jwks" => state
            .idp
            .signer
            .prepared(&state.store)
            .map(|set| cached_json(req, &set.jwks, &set.etag)),
        "/oauth/userinfo" => Some(super::userinfo::userinfo_response(state, req)),
        _ => None,
    }
}

fn discovery_document(base: &str) -> serde_json::Value {
    json!({
        "issuer": base.to_string(),
        "authorization_endpoint": format!("{base}/oauth/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "userinfo_endpoint": format!("{base}/oauth/userinfo"),
        "revocation_endpoint": format!("{base}/oauth/revoke"),
        "jwks_uri": format!("{base}/oauth/jwks"),
        "end_session_endpoint": format!("{base}/oauth/logout"),
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
    })
}

#[handler]
pub async fn jwks(req: &Request, state: Data<&AppState>) -> Response {
    // Prepared: no store access. Rebuilt (a store read and a key parse, on the blocking pool)
    // only after a key change.
    if let Some(set) = state.idp.signer.prepared(&state.store) {
        return cached_json(req, &set.jwks, &set.etag);
    }
    let (signer, store) = (state.idp.signer.clone(), state.store.clone());
    match tokio::task::spawn_blocking(move || signer.keys(&store)).await {
        Ok(Ok(set)) => cached_json(req, &set.jwks, &set.etag),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "jwks");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "jwks task");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
