//! Who calls the image API: the user's API key (`Authorization: Bearer vx_…` or
//! `X-API-Key: vx_…`) or an app's OAuth access token (`Authorization: Bearer …`) with the scope
//! the operation needs.
//!
//! The schemes are published in the OpenAPI document as alternatives; the extractors are written
//! by hand (instead of a derived enum) so that a banned account gets 403 `banned` rather than the
//! error of whichever scheme was tried last, and an app without the scope gets 403
//! `insufficient_scope` with RFC 6750's challenge. poem-openapi would list an operation's scopes
//! on every scheme of the requirement (API-key schemes included, which OpenAPI 3.0 forbids), so
//! the requirements carry no scopes and each operation's text names the one it needs.

use poem::Request;
use poem::RequestBody;
use poem_openapi::auth::{ApiKey, Bearer};
use poem_openapi::registry::Registry;
use poem_openapi::{ApiExtractor, ApiExtractorType, ExtractParamOptions, SecurityScheme};

use super::error::{ApiFailure, codes};
use crate::auth::{self, Principal, Scope};
use crate::state::AppState;

// Named so it comes first in the docs page's Authorize dialog (Swagger UI lists the schemes in
// name order): the key a person makes on their account page, before the apps' OAuth scheme.
/// `Authorization: Bearer vx_…` (a key from your account page)
#[derive(SecurityScheme)]
#[oai(rename = "ApiKey", ty = "bearer", bearer_format = "vx_…")]
#[allow(dead_code)]
struct BearerKey(Bearer);

/// `X-API-Key: vx_…`
#[derive(SecurityScheme)]
#[oai(
    rename = "ApiKeyHeader",
    ty = "api_key",
    key_name = "X-API-Key",
    key_in = "header"
)]
#[allow(dead_code)]
struct HeaderKey(ApiKey);

/// What an app's access token may be granted for the image API (the OAuth scopes).
#[derive(poem_openapi::OAuthScopes)]
#[allow(dead_code)]
enum ImageScopes {
    /// Read your balance, limits and the jobs you made.
    #[oai(rename = "images:read")]
    Read,
    /// Make pictures (generate and edit jobs) that spend your credits, and cancel them.
    #[oai(rename = "images:generate")]
    Generate,
}

/// `Authorization: Bearer <access token>` of an app the user signed in to with Pictor
/// (authorization code flow with PKCE; `images:read` and `images:generate` are never granted
/// unless asked for). Each operation says which scope it needs.
#[derive(SecurityScheme)]
#[oai(
    rename = "AppToken",
    ty = "oauth2",
    flows(authorization_code(
        authorization_url = "/oauth/authorize",
        token_url = "/oauth/token",
        scopes = "ImageScopes"
    ))
)]
#[allow(dead_code)]
struct AppToken(Bearer);

fn presented_key(req: &Request) -> Option<String> {
    if let Some(v) = req.headers().get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(v.trim().to_string());
    }
    let auth = req
        .headers()
        .get(poem::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = auth.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

/// What an operation needs of the credential.
#[derive(Clone, Copy)]
enum Needs {
    /// An API key, or an access token with this scope.
    Scope(Scope),
    /// The user's own API key (webhook secrets are not for apps).
    ApiKey,
}

/// The signed-in browser of Pictor's own docs page ("Try it out" without a key): the session
/// cookie, with the page's CSRF token in `X-CSRF-Token` and our own origin, as the playground's
/// endpoints check them. A foreign page can neither read the token nor send the header without
/// a CORS preflight, which Pictor never grants; without the header the cookie counts for nothing.
fn session_principal(state: &AppState, req: &Request) -> Option<Principal> {
    let sent = req.header("x-csrf-token")?;
    let jar = req.cookie();
    if !crate::auth::session::csrf_ok(state, req, jar, sent) {
        return None;
    }
    crate::auth::session::principal(state, jar)
}

fn authenticate(req: &Request, needs: Needs) -> poem::Result<Principal> {
    let state = req
        .data::<AppState>()
        .ok_or_else(|| ApiFailure::new(codes::INTERNAL, "internal server error"))?;
    let Some(presented) = presented_key(req) else {
        // The docs page's session counts where an app's token could (not for the webhook
        // secret, which is the API key's alone).
        if !matches!(needs, Needs::ApiKey)
            && let Some(principal) = session_principal(state, req)
        {
            if principal.user.banned {
                return Err(ApiFailure::from(auth::AuthError::Banned).into());
            }
            return Ok(principal);
        }
        return Err(ApiFailure::new(
            codes::UNAUTHORIZED,
            "missing API key: send `Authorization: Bearer vx_…` or `X-API-Key: vx_…` (or an \
             app's access token as `Authorization: Bearer …`)",
        )
        .challenge(None, None)
        .into());
    };
    // A single indexed read of a memory-mapped B-tree: cheap enough to run inline.
    let principal = auth::authenticate(&state.store, &presented, state.clock.now())
        .map_err(ApiFailure::from)?;
    match needs {
        Needs::Scope(scope) if !principal.allows(scope) => Err(ApiFailure::new(
            codes::INSUFFICIENT_SCOPE,
            format!(
                "the app's access token does not have the `{}` scope",
                scope.as_str()
            ),
        )
        .challenge(Some("insufficient_scope"), Some(scope.as_str()))
        .into()),
        Needs::ApiKey if principal.client().is_some() => Err(ApiFailure::new(
            codes::INSUFFICIENT_SCOPE,
            "this operation needs your API key; an app's access token cannot use it",
        )
        .challenge(Some("insufficient_scope"), None)
        .into()),
        _ => Ok(principal),
    }
}

macro_rules! auth_extractor {
    ($(#[$meta:meta])* $name:ident, $needs:expr, [$($scheme:ty => $scheme_name:literal),*]) => {
        $(#[$meta])*
        pub struct $name(pub Principal);

        impl<'a> ApiExtractor<'a> for $name {
            const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::SecurityScheme];
            type ParamType = ();
            type ParamRawType = ();

            fn register(registry: &mut Registry) {
                $(<$scheme as ApiExtractor>::register(registry);)*
            }

            fn security_schemes() -> Vec<&'static str> {
                vec![$($scheme_name),*]
            }

            async fn from_request(
                req: &'a Request,
                _body: &mut RequestBody,
                _opts: ExtractParamOptions<Self::ParamType>,
            ) -> poem::Result<Self> {
                authenticate(req, $needs).map($name)
            }
        }
    };
}

auth_extractor!(
    /// The caller of a reading operation: an API key, or an app's access token with
    /// `images:read`.
    ApiAuth,
    Needs::Scope(Scope::Read),
    [BearerKey => "ApiKey", HeaderKey => "ApiKeyHeader", AppToken => "AppToken"]
);

auth_extractor!(
    /// The caller of an operation that makes (or cancels) jobs: an API key, or an app's access
    /// token with `images:generate`.
    GenerateAuth,
    Needs::Scope(Scope::Generate),
    [BearerKey => "ApiKey", HeaderKey => "ApiKeyHeader", AppToken => "AppToken"]
);

auth_extractor!(
    /// The caller of an operation for the user's own API key only.
    KeyAuth,
    Needs::ApiKey,
    [BearerKey => "ApiKey", HeaderKey => "ApiKeyHeader"]
);
