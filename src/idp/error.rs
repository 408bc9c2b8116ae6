//! Errors of the identity provider. The token and revocation endpoints answer with RFC 6749 §5.2
//! JSON (`{error, error_description}`); browser-facing endpoints render an HTML page instead.

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::Json;
use poem::{IntoResponse, Response};
use serde_json::json;

/// RFC 6749 §5.2 error codes.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// `invalid_request`: a parameter is missing, repeated or malformed.
    #[error("{0}")]
    InvalidRequest(String),
    /// `invalid_client`: client authentication failed (RFC 6749 §5.2: 401).
    #[error("{0}")]
    InvalidClient(String),
    /// `invalid_grant`: the code or refresh token is invalid, expired, revoked, reused, or was
    /// issued for another client or redirect URI.
    #[error("{0}")]
    InvalidGrant(String),
    /// `unsupported_grant_type`.
    #[error("{0}")]
    UnsupportedGrantType(String),
    /// `invalid_scope`.
    #[error("{0}")]
    InvalidScope(String),
    /// `slow_down` style throttling, reported as RFC 6585 429 with `error=invalid_request`.
    #[error("{0}")]
    TooManyRequests(String),
    /// `server_error` (details logged, not sent).
    #[error("server error")]
    ServerError,
}

impl OAuthError {
    pub fn code(&self) -> &'static str {
        match self {
            OAuthError::InvalidRequest(_) | OAuthError::TooManyRequests(_) => "invalid_request",
            OAuthError::InvalidClient(_) => "invalid_client",
            OAuthError::InvalidGrant(_) => "invalid_grant",
            OAuthError::UnsupportedGrantType(_) => "unsupported_grant_type",
            OAuthError::InvalidScope(_) => "invalid_scope",
            OAuthError::ServerError => "server_error",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            OAuthError::InvalidClient(_) => StatusCode::UNAUTHORIZED,
            OAuthError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            OAuthError::ServerError => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    pub fn server(detail: impl std::fmt::Display) -> OAuthError {
        tracing::error!(error = %detail, "identity provider error");
        OAuthError::ServerError
    }
}

/// Token responses must not be cached (RFC 6749 §5.1).
pub fn no_store(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    resp
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let body = Json(json!({"error": self.code(), "error_description": self.to_string()}));
        let mut resp = (self.status(), body).into_response();
        if matches!(self, OAuthError::InvalidClient(_)) {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"pictor\""),
            );
        }
        no_store(resp)
    }
}

impl From<crate::store::StoreError> for OAuthError {
    fn from(e: crate::store::StoreError) -> Self {
        OAuthError::server(e)
    }
}
