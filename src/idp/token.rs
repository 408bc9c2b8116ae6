//! `POST /oauth/token` (authorization_code with PKCE, refresh_token with rotation) and
//! `POST /oauth/revoke` (RFC 7009). Client authentication by HTTP Basic, or
//! `client_id`/`client_secret` (or `app_name`/`app_secret`) in the form body.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use poem::http::{StatusCode, header};
use poem::web::{Data, Json};
use poem::{IntoResponse, Request, Response, handler};
use rand::RngExt;
use serde_json::json;

use super::authorize::parse_params;
use super::crypto::{b64url, ct_eq, pkce_s256_matches, random_token, sha256, sha256_hex};
use super::error::{OAuthError, no_store};
use super::{id_token_claims, user_claims};
use crate::state::AppState;
use crate::store::oauth::{ACCESS_TTL_MS, ClientRecord, GrantError, Issued, NewTokens};
use crate::web::client_ip;

pub use crate::web::throttle::CLIENT_FAILURES_LIMIT;

fn form(req: &Request, body: &str) -> Result<HashMap<String, String>, OAuthError> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !ct
        .to_ascii_lowercase()
        .starts_with("application/x-www-form-urlencoded")
    {
        return Err(OAuthError::InvalidRequest(
            "the body must be application/x-www-form-urlencoded".into(),
        ));
    }
    parse_params(body).map_err(OAuthError::InvalidRequest)
}

fn basic_credentials(req: &Request) -> Result<Option<(String, String)>, OAuthError> {
    let Some(v) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(None);
    };
    let Some((scheme, b64)) = v.trim().split_once(' ') else {
        return Err(OAuthError::InvalidClient(
            "malformed Authorization header".into(),
        ));
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(OAuthError::InvalidClient(
            "use HTTP Basic or client_id/client_secret in the body".into(),
        ));
    }
    let decoded = STANDARD
        .decode(b64.trim())
        .map_err(|_| OAuthError::InvalidClient("malformed Basic credentials".into()))?;
    let text = String::from_utf8(decoded)
        .map_err(|_| OAuthError::InvalidClient("malformed Basic credentials".into()))?;
    let (id, secret) = text
        .split_once(':')
        .ok_or_else(|| OAuthError::InvalidClient("malformed Basic credentials".into()))?;
    // RFC 6749 §2.3.1: both parts are form-urlencoded before base64.
    let unescape = |s: &str| {
        serde_urlencoded::from_str::<Vec<(String, String)>>(&format!("x={s}"))
            .ok()
            .and_then(|v| v.into_iter().next())
            .map(|(_, v)| v)
            .unwrap_or_default()
    };
    Ok(Some((unescape(id), unescape(secret))))
}

/// Authenticates the client; unknown clients and wrong secrets are indistinguishable (401).
fn authenticate_client(
    state: &AppState,
    req: &Request,
    p: &HashMap<String, String>,
) -> Result<ClientRecord, OAuthError> {
    let body_id = p.get("client_id").or_else(|| p.get("app_name"));
    let body_secret = p.get("client_secret").or_else(|| p.get("app_secret"));
    let basic = basic_credentials(req)?;
    let (id, secret) = match (basic, body_id, body_secret) {
        (Some(_), _, Some(_)) => {
            return Err(OAuthError::InvalidRequest(
                "use one client authentication method, not both".into(),
            ));
        }
        (Some((id, secret)), body_id, None) => {
            if body_id.is_some_and(|b| *b != id) {
                return Err(OAuthError::InvalidRequest(
                    "client_id differs from the Basic credentials".into(),
                ));
            }
            (id, secret)
        }
        (None, Some(id), Some(secret)) => (id.clone(), secret.clone()),
        (None, _, _) => {
            return Err(OAuthError::InvalidClient(
                "client authentication is required".into(),
            ));
        }
    };
    // The secret is checked first: a correct one is never refused, whatever others did with
    // this client_id. Only failures count, and only against the caller's address.
    let now = state.clock.now();
    let client = state.store.client(&id)?;
    let presented = sha256_hex(&secret);
    let ok = match &client {
        Some(c) => ct_eq(c.secret_hash.as_bytes(), presented.as_bytes()),
        // Same work for unknown clients.
        None => {
            let _ = ct_eq(presented.as_bytes(), sha256_hex("").as_bytes());
            false
        }
    };
    if let Some(c) = client.filter(|_| ok) {
        return Ok(c);
    }
    let ip = client_ip(state, req);
    let throttle = &state.idp.throttle;
    if throttle.client_failures_exceeded(ip, now) {
        return Err(OAuthError::TooManyRequests(
            "too many failed client authentications from this address; try again later".into(),
        ));
    }
    throttle.client_failed(ip, now);
    Err(OAuthError::InvalidClient(
        "unknown client or wrong secret".into(),
    ))
}

fn new_tokens() -> (String, String, NewTokens) {
    let access = random_token("pat_");
    let refresh = random_token("prt_");
    let tokens = NewTokens {
        access_hash: sha256(&access),
        refresh_hash: sha256(&refresh),
        family: rand::rng().random(),
    };
    (access, refresh, tokens)
}

fn grant_error(e: GrantError) -> OAuthError {
    match e {
        GrantError::InvalidGrant(m) => OAuthError::InvalidGrant(m),
        GrantError::InvalidScope(m) => OAuthError::InvalidScope(m),
        GrantError::Store(e) => OAuthError::server(e),
    }
}

async fn token_response(
    state: &AppState,
    client: &ClientRecord,
    issued: Issued,
    access: String,
    refresh: String,
    with_id_token: bool,
) -> Result<Response, OAuthError> {
    let user = state
        .store
        .user(issued.user_id)?
        .ok_or_else(|| OAuthError::InvalidGrant("the account no longer exists".into()))?;
    if user.banned {
        return Err(OAuthError::InvalidGrant("the account is blocked".into()));
    }
    let mut body = json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": ACCESS_TTL_MS / 1000,
        "refresh_token": refresh,
        "scope": issued.scope,
    });
    // The code exchange returns an id_token when `openid` was granted; a refresh does not
    // (OpenID Connect Core 12.2 lets it omit one): the sign-in already proved who the user is,
    // and the RS256 signature would be most of a refresh's cost. Current claims: userinfo.
    if with_id_token && issued.scope.split(' ').any(|s| s == "openid") {
        let now = state.clock.now();
        let at_hash = b64url(&sha256(&access)[..16]);
        let mut claims = id_token_claims(state, client, &user, &issued, now, &at_hash);
        if let Some(obj) = claims.as_object_mut() {
            for (k, v) in user_claims(state, &user, &issued.scope)
                .as_object()
                .cloned()
                .unwrap_or_default()
            {
                obj.entry(k).or_insert(v);
            }
        }
        let signer = state.idp.signer.clone();
        let store = state.store.clone();
        let jwt = tokio::task::spawn_blocking(move || signer.sign(&store, &claims))
            .await
            .map_err(OAuthError::server)?
            .map_err(OAuthError::server)?;
        body["id_token"] = json!(jwt);
    }
    Ok(no_store(Json(body).into_response()))
}

#[handler]
pub async fn token(req: &Request, state: Data<&AppState>, body: String) -> Response {
    match token_inner(req, &state, &body).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn token_inner(req: &Request, state: &AppState, body: &str) -> Result<Response, OAuthError> {
    let p = form(req, body)?;
    let client = authenticate_client(state, req, &p)?;
    let now = state.clock.now();
    match p.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let code = p
                .get("code")
                .filter(|c| !c.is_empty())
                .ok_or_else(|| OAuthError::InvalidRequest("code is required".into()))?;
            let redirect_uri = p.get("redirect_uri").cloned();
            let verifier = p.get("code_verifier").cloned();
            let (access, refresh, tokens) = new_tokens();
            let (hash, name) = (sha256(code), client.name.clone());
            let issued = state
                .store
                .call(move |s| {
                    Ok::<_, crate::store::StoreError>(s.exchange_code(
                        hash,
                        &name,
                        redirect_uri.as_deref(),
                        |challenge| match (challenge, verifier.as_deref()) {
                            (Some(c), Some(v)) if pkce_s256_matches(v, c) => Ok(()),
                            (Some(_), Some(_)) => {
                                Err("code_verifier does not match the code_challenge".into())
                            }
                            (Some(_), None) => {
                                Err("code_verifier is required (a code_challenge was sent)".into())
                            }
                            // PKCE downgrade: a verifier for a code issued without a challenge.
                            (None, Some(_)) => Err(
                                "no code_challenge was sent with the authorization request".into(),
                            ),
                            (None, None) => Ok(()),
                        },
                        tokens,
                        now,
                    ))
                })
                .await?
                .map_err(grant_error)?;
            token_response(state, &client, issued, access, refresh, true).await
        }
        Some("refresh_token") => {
            let presented = p
                .get("refresh_token")
                .filter(|c| !c.is_empty())
                .ok_or_else(|| OAuthError::InvalidRequest("refresh_token is required".into()))?;
            let scope = p.get("scope").cloned();
            let (access, refresh, tokens) = new_tokens();
            let (hash, name) = (sha256(presented), client.name.clone());
            let issued = state
                .store
                .call(move |s| {
                    Ok::<_, crate::store::StoreError>(s.refresh(
                        hash,
                        &name,
                        scope.as_deref(),
                        tokens,
                        now,
                    ))
                })
                .await?
                .map_err(grant_error)?;
            token_response(state, &client, issued, access, refresh, false).await
        }
        Some(other) => Err(OAuthError::UnsupportedGrantType(format!(
            "grant_type {other:?} is not supported; use authorization_code or refresh_token"
        ))),
        None => Err(OAuthError::InvalidRequest("grant_type is required".into())),
    }
}

/// RFC 7009: 200 for any token string once the client is authenticated.
#[handler]
pub async fn revoke(req: &Request, state: Data<&AppState>, body: String) -> Response {
    let result = async {
        let p = form(req, &body)?;
        let client = authenticate_client(&state, req, &p)?;
        let presented = p
            .get("token")
            .ok_or_else(|| OAuthError::InvalidRequest("token is required".into()))?;
        let (hash, name, now) = (sha256(presented), client.name.clone(), state.clock.now());
        state
            .store
            .call(move |s| s.revoke_token(hash, &name, now))
            .await?;
        Ok::<_, OAuthError>(no_store(StatusCode::OK.into_response()))
    }
    .await;
    result.unwrap_or_else(|e| e.into_response())
}
