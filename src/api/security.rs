//! API-key authentication: `Authorization: Bearer vx_…` or `X-API-Key: vx_…`.
//!
//! The two schemes are published in the OpenAPI document as alternatives; [`ApiAuth`] is written
//! by hand (instead of a derived enum) so that a banned account gets 403 `banned` rather than the
//! error of whichever scheme was tried last.

use poem::Request;
use poem::RequestBody;
use poem_openapi::auth::{ApiKey, Bearer};
use poem_openapi::registry::Registry;
use poem_openapi::{ApiExtractor, ApiExtractorType, ExtractParamOptions, SecurityScheme};

use super::error::{ApiFailure, codes};
use crate::auth::{self, Principal};
use crate::state::AppState;

/// `Authorization: Bearer vx_…`
#[derive(SecurityScheme)]
#[oai(rename = "BearerKey", ty = "bearer", bearer_format = "vx_…")]
#[allow(dead_code)]
struct BearerKey(Bearer);

/// `X-API-Key: vx_…`
#[derive(SecurityScheme)]
#[oai(
    rename = "HeaderKey",
    ty = "api_key",
    key_name = "X-API-Key",
    key_in = "header"
)]
#[allow(dead_code)]
struct HeaderKey(ApiKey);

/// The authenticated caller of an image API operation.
pub struct ApiAuth(pub Principal);

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

impl<'a> ApiExtractor<'a> for ApiAuth {
    const TYPES: &'static [ApiExtractorType] = &[ApiExtractorType::SecurityScheme];
    type ParamType = ();
    type ParamRawType = ();

    fn register(registry: &mut Registry) {
        <BearerKey as ApiExtractor>::register(registry);
        <HeaderKey as ApiExtractor>::register(registry);
    }

    fn security_schemes() -> Vec<&'static str> {
        vec!["BearerKey", "HeaderKey"]
    }

    async fn from_request(
        req: &'a Request,
        _body: &mut RequestBody,
        _opts: ExtractParamOptions<Self::ParamType>,
    ) -> poem::Result<Self> {
        let key = presented_key(req).ok_or_else(|| {
            ApiFailure::new(
                codes::UNAUTHORIZED,
                "missing API key: send `Authorization: Bearer vx_…` or `X-API-Key: vx_…`",
            )
        })?;
        let state = req
            .data::<AppState>()
            .ok_or_else(|| ApiFailure::new(codes::INTERNAL, "internal server error"))?;
        // A single indexed read of a memory-mapped B-tree: cheap enough to run inline.
        let principal = auth::authenticate_key(&state.store, &key).map_err(ApiFailure::from)?;
        Ok(ApiAuth(principal))
    }
}
