//! The image API's one error shape, `{ok: false, error_code, error}`, and the conversion of every
//! escape path (extractor failures, unknown routes, oversized bodies) into it.

use poem::error::{MethodNotAllowedError, NotFoundError, ReadBodyError, ResponseError};
use poem::http::StatusCode;
use poem::{IntoResponse, Response};
use poem_openapi::error::{
    AuthorizationError, ContentTypeError, ParseMultipartError, ParseParamError, ParsePathError,
    ParseRequestPayloadError,
};
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Object};
use tracing::error;

/// Stable `error_code` values (part of the API; never renamed).
pub mod codes {
    pub const UNAUTHORIZED: &str = "unauthorized";
    pub const BANNED: &str = "banned";
    /// Not in the seed: an app's access token without the scope the operation needs (403,
    /// with RFC 6750's `WWW-Authenticate: Bearer error="insufficient_scope"`).
    pub const INSUFFICIENT_SCOPE: &str = "insufficient_scope";
    pub const INSUFFICIENT_CREDITS: &str = "insufficient_credits";
    pub const JOB_BUSY: &str = "job_busy";
    pub const INVALID_PROMPT: &str = "invalid_prompt";
    pub const INVALID_MODEL: &str = "invalid_model";
    pub const INVALID_RATIO: &str = "invalid_ratio";
    pub const INVALID_IMAGE: &str = "invalid_image";
    pub const IMAGE_TOO_LARGE: &str = "image_too_large";
    pub const JOB_NOT_FOUND: &str = "job_not_found";
    /// Not in the seed: cancel of a job that already ended (done, or failed for another reason).
    pub const JOB_FINISHED: &str = "job_finished";
    /// Not in the seed: a malformed request that no field-specific code describes
    /// (not JSON, wrong type of `enhance`/`seed`, `wait` out of range).
    pub const INVALID_REQUEST: &str = "invalid_request";
    /// Not in the seed: no such route.
    pub const NOT_FOUND: &str = "not_found";
    /// Not in the seed: the route exists with another method.
    pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
    /// Not in the seed: a fault on the server (details are logged, not sent).
    pub const INTERNAL: &str = "internal_error";
    /// Not in the seed, and never sent by `/api/pictor/`: a state-changing request of the web
    /// playground (which authenticates with the session cookie) without the page's CSRF token,
    /// or from a foreign origin.
    pub const CSRF_FAILED: &str = "csrf_failed";
}

/// Error body of every failed request.
#[derive(Object, Debug, Clone)]
pub struct ErrorBody {
    /// Always `false`.
    pub ok: bool,
    /// Machine-readable cause, e.g. `invalid_prompt`.
    pub error_code: String,
    /// Human-readable message.
    pub error: String,
}

/// Every error response of the image API.
#[derive(ApiResponse, Debug)]
pub enum ApiError {
    /// `invalid_prompt`, `invalid_model`, `invalid_ratio`, `invalid_image` or `invalid_request`.
    #[oai(status = 400)]
    BadRequest(Json<ErrorBody>),
    /// `unauthorized`: the API key is missing, malformed or unknown.
    #[oai(status = 401)]
    Unauthorized(Json<ErrorBody>),
    /// `insufficient_credits`: the balance does not cover the price (no job is created).
    #[oai(status = 402)]
    PaymentRequired(Json<ErrorBody>),
    /// `banned`: the account is blocked.
    #[oai(status = 403)]
    Forbidden(Json<ErrorBody>),
    /// `job_not_found`: no such job, or it belongs to another user.
    #[oai(status = 404)]
    NotFound(Json<ErrorBody>),
    /// `job_busy`: the user already has an active job; `job_finished`: a cancel came after the
    /// job ended.
    #[oai(status = 409)]
    Conflict(Json<ErrorBody>),
    /// `image_too_large`: the upload (or the request body) is over 20 MiB.
    #[oai(status = 413)]
    TooLarge(Json<ErrorBody>),
    /// `internal_error`: a fault on the server.
    #[oai(status = 500)]
    Internal(Json<ErrorBody>),
}

/// The error responses one operation can give: which of [`ApiError`]'s statuses, described for
/// that operation. Published per operation so that generated clients (and readers) see only the
/// errors an endpoint really has.
pub trait ErrorSet: Send + Sync + 'static {
    /// `(status, description)` of each error response.
    const RESPONSES: &'static [(u16, &'static str)];
}

/// An operation's error: an [`ApiError`] published with the operation's [`ErrorSet`].
pub struct Errors<S>(pub ApiError, std::marker::PhantomData<fn() -> S>);

impl<S> std::fmt::Debug for Errors<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<S: ErrorSet> ApiResponse for Errors<S> {
    fn meta() -> poem_openapi::registry::MetaResponses {
        use poem_openapi::payload::Payload;
        use poem_openapi::registry::{MetaMediaType, MetaResponse, MetaResponses};
        MetaResponses {
            responses: S::RESPONSES
                .iter()
                .map(|&(status, description)| MetaResponse {
                    description,
                    status: Some(status),
                    status_range: None,
                    content: vec![MetaMediaType {
                        content_type: <Json<ErrorBody> as Payload>::CONTENT_TYPE,
                        schema: <Json<ErrorBody> as Payload>::schema_ref(),
                    }],
                    headers: vec![],
                })
                .collect(),
        }
    }

    fn register(registry: &mut poem_openapi::registry::Registry) {
        use poem_openapi::types::Type;
        ErrorBody::register(registry);
    }
}

impl<S> IntoResponse for Errors<S> {
    fn into_response(self) -> Response {
        self.0.into_response()
    }
}

impl<S> From<Errors<S>> for poem::Error {
    fn from(e: Errors<S>) -> poem::Error {
        poem::Error::from(e.0)
    }
}

macro_rules! into_errors {
    ($($from:ty),*) => {$(
        impl<S> From<$from> for Errors<S> {
            fn from(e: $from) -> Errors<S> {
                Errors(ApiError::from(e), std::marker::PhantomData)
            }
        }
    )*};
}
into_errors!(
    ApiError,
    ApiFailure,
    crate::jobs::service::JobError,
    crate::store::StoreError
);

const UNAUTHORIZED: (u16, &str) = (
    401,
    "`unauthorized`: the API key is missing, malformed or unknown, or an app's access token is \
     invalid, expired or revoked (with `WWW-Authenticate: Bearer …`).",
);
const BANNED: (u16, &str) = (
    403,
    "`banned`: the account is blocked; `insufficient_scope`: an app's access token without the \
     scope this operation needs, or (webhook secrets) an access token where an API key is needed.",
);
const BODY_TOO_LARGE: (u16, &str) = (413, "`image_too_large`: the request body is over 20 MiB.");
const INTERNAL: (u16, &str) = (500, "`internal_error`: a fault on the server.");
const NO_CREDITS: (u16, &str) = (
    402,
    "`insufficient_credits`: the balance does not cover the price (no job is created).",
);
const BUSY: (u16, &str) = (409, "`job_busy`: you already have an active job.");
const EDIT_REFUSED: (u16, &str) = (
    400,
    "`invalid_prompt`, `invalid_image` (no photo, not a PNG/JPEG/WebP, too many pixels) or \
     `invalid_request` (a bad `webhook_url`).",
);

macro_rules! error_sets {
    ($($(#[$meta:meta])* $name:ident = [$($response:expr),* $(,)?];)*) => {$(
        $(#[$meta])*
        pub enum $name {}
        impl ErrorSet for $name {
            const RESPONSES: &'static [(u16, &'static str)] = &[$($response),*];
        }
    )*};
}

error_sets! {
    /// `POST /v1/generate`.
    GenerateErrors = [
        (400, "`invalid_prompt`, `invalid_model`, `invalid_ratio`, or `invalid_request` (a body \
               that is not a JSON object, a bad `enhance`, `seed`, `noise` or `webhook_url`)."),
        UNAUTHORIZED,
        NO_CREDITS,
        BANNED,
        BUSY,
        BODY_TOO_LARGE,
        INTERNAL,
    ];
    /// `POST /v1/edit`.
    EditErrors = [
        EDIT_REFUSED,
        UNAUTHORIZED,
        NO_CREDITS,
        BANNED,
        BUSY,
        (413, "`image_too_large`: the photo (or the request body) is over 20 MiB."),
        INTERNAL,
    ];
    /// `POST /v1/edit/raw`. (A query over 64 KiB is refused by the HTTP layer with a bare 414
    /// before Pictor reads it; it is not published, since a response without a body beside
    /// the typed ones stops progenitor. A 4000-character prompt always fits.)
    RawEditErrors = [
        EDIT_REFUSED,
        UNAUTHORIZED,
        NO_CREDITS,
        BANNED,
        BUSY,
        (413, "`image_too_large`: the photo is over 20 MiB."),
        INTERNAL,
    ];
    /// `GET /v1/jobs/{job_id}`.
    GetJobErrors = [
        (400, "`invalid_request`: `wait`, `wait_for` or `since` out of range."),
        UNAUTHORIZED,
        BANNED,
        (404, "`job_not_found`: no such job, or it belongs to another user."),
        INTERNAL,
    ];
    /// `POST /v1/jobs/{job_id}/cancel`.
    CancelErrors = [
        UNAUTHORIZED,
        BANNED,
        (404, "`job_not_found`: no such job, or it belongs to another user."),
        (409, "`job_finished`: the job already ended (done, or failed for another reason)."),
        BODY_TOO_LARGE,
        INTERNAL,
    ];
    /// `GET /v1/jobs`.
    ListErrors = [
        (400, "`invalid_request`: `status`, `kind` or `limit` out of range, or `before` is not a \
               job id."),
        UNAUTHORIZED,
        BANNED,
        INTERNAL,
    ];
    /// `GET /v1/me`, `GET /v1/webhook-secret`.
    AccountErrors = [UNAUTHORIZED, BANNED, INTERNAL];
    /// `POST /v1/webhook-secret/rotate`.
    RotateErrors = [UNAUTHORIZED, BANNED, BODY_TOO_LARGE, INTERNAL];
    /// `GET /v1/models` (no key needed).
    ServerErrors = [INTERNAL];
}

fn status_of(code: &str) -> StatusCode {
    match code {
        codes::UNAUTHORIZED => StatusCode::UNAUTHORIZED,
        codes::BANNED | codes::CSRF_FAILED | codes::INSUFFICIENT_SCOPE => StatusCode::FORBIDDEN,
        codes::INSUFFICIENT_CREDITS => StatusCode::PAYMENT_REQUIRED,
        codes::JOB_BUSY | codes::JOB_FINISHED => StatusCode::CONFLICT,
        codes::IMAGE_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
        codes::JOB_NOT_FOUND | codes::NOT_FOUND => StatusCode::NOT_FOUND,
        codes::METHOD_NOT_ALLOWED => StatusCode::METHOD_NOT_ALLOWED,
        codes::INTERNAL => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::BAD_REQUEST,
    }
}

impl ApiError {
    pub fn new(code: &'static str, message: impl Into<String>) -> ApiError {
        let body = Json(ErrorBody {
            ok: false,
            error_code: code.to_string(),
            error: message.into(),
        });
        match status_of(code) {
            StatusCode::UNAUTHORIZED => ApiError::Unauthorized(body),
            StatusCode::PAYMENT_REQUIRED => ApiError::PaymentRequired(body),
            StatusCode::FORBIDDEN => ApiError::Forbidden(body),
            StatusCode::NOT_FOUND => ApiError::NotFound(body),
            StatusCode::CONFLICT => ApiError::Conflict(body),
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::TooLarge(body),
            StatusCode::INTERNAL_SERVER_ERROR => ApiError::Internal(body),
            _ => ApiError::BadRequest(body),
        }
    }

    /// A server fault: the detail goes to the log, the client gets a generic message.
    pub fn internal(detail: impl std::fmt::Display) -> ApiError {
        error!(error = %detail, "internal error");
        ApiError::new(codes::INTERNAL, "internal server error")
    }
}

impl From<crate::jobs::service::JobError> for ApiError {
    fn from(e: crate::jobs::service::JobError) -> Self {
        use crate::jobs::service::JobError;
        use crate::store::CreateJobError;
        match e {
            JobError::Create(CreateJobError::Busy(id)) => ApiError::new(
                codes::JOB_BUSY,
                format!("you already have an active job ({id}); wait for it to finish"),
            ),
            JobError::Create(e @ CreateJobError::InsufficientCredits { .. }) => {
                ApiError::new(codes::INSUFFICIENT_CREDITS, e.to_string())
            }
            JobError::Create(CreateJobError::Banned) => {
                ApiError::new(codes::BANNED, "the account is blocked")
            }
            JobError::Create(CreateJobError::NoUser) => {
                ApiError::new(codes::UNAUTHORIZED, "the account no longer exists")
            }
            JobError::Create(CreateJobError::Store(e)) | JobError::Store(e) => {
                ApiError::internal(e)
            }
            JobError::InvalidImage(m) => ApiError::new(codes::INVALID_IMAGE, m),
            JobError::InvalidWebhook(m) | JobError::InvalidLora(m) => {
                ApiError::new(codes::INVALID_REQUEST, m)
            }
            JobError::NotFound => ApiError::new(codes::JOB_NOT_FOUND, "no such job"),
            e @ JobError::Finished(_) => ApiError::new(
                codes::JOB_FINISHED,
                format!("{e}; only a queued or running job can be cancelled"),
            ),
            JobError::Internal(m) => ApiError::internal(m),
        }
    }
}

/// An API error raised inside an extractor (auth, body parsing), carried through `poem::Error`
/// and turned back into the JSON body by [`error_response`].
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiFailure {
    pub code: &'static str,
    pub message: String,
    /// A `WWW-Authenticate` challenge to send with it (RFC 6750 §3).
    pub challenge: Option<String>,
}

impl ApiFailure {
    pub fn new(code: &'static str, message: impl Into<String>) -> ApiFailure {
        ApiFailure {
            code,
            message: message.into(),
            challenge: None,
        }
    }

    /// With a `WWW-Authenticate: Bearer realm="pictor"…` challenge; `error` and `scope` as in
    /// RFC 6750 §3.
    pub fn challenge(mut self, error: Option<&str>, scope: Option<&str>) -> ApiFailure {
        let mut value = String::from("Bearer realm=\"pictor\"");
        if let Some(e) = error {
            value.push_str(&format!(", error=\"{e}\""));
        }
        if let Some(s) = scope {
            value.push_str(&format!(", scope=\"{s}\""));
        }
        self.challenge = Some(value);
        self
    }
}

impl From<ApiFailure> for ApiError {
    fn from(f: ApiFailure) -> Self {
        ApiError::new(f.code, f.message)
    }
}

impl ResponseError for ApiFailure {
    fn status(&self) -> StatusCode {
        status_of(self.code)
    }

    fn as_response(&self) -> Response {
        let mut resp = json_response(self.code, &self.message);
        if let Some(v) = self
            .challenge
            .as_deref()
            .and_then(|c| poem::http::HeaderValue::from_str(c).ok())
        {
            resp.headers_mut()
                .insert(poem::http::header::WWW_AUTHENTICATE, v);
        }
        resp
    }
}

pub fn json_response(code: &'static str, message: &str) -> Response {
    let mut resp = ApiError::new(code, message).into_response();
    resp.set_status(status_of(code));
    resp
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        ApiError::internal(e)
    }
}

impl From<crate::auth::AuthError> for ApiFailure {
    fn from(e: crate::auth::AuthError) -> Self {
        match e {
            crate::auth::AuthError::Unauthorized => ApiFailure::new(
                codes::UNAUTHORIZED,
                "missing or invalid API key: send `Authorization: Bearer vx_…` or `X-API-Key: vx_…`",
            )
            .challenge(None, None),
            crate::auth::AuthError::InvalidToken => ApiFailure::new(
                codes::UNAUTHORIZED,
                "not an API key (`vx_…`), and not a valid app access token (unknown, expired or \
                 revoked)",
            )
            .challenge(Some("invalid_token"), None),
            crate::auth::AuthError::Banned => {
                ApiFailure::new(codes::BANNED, "the account is blocked")
            }
            crate::auth::AuthError::Store(e) => {
                error!(error = %e, "store error during authentication");
                ApiFailure::new(codes::INTERNAL, "internal server error")
            }
        }
    }
}

/// Turns any error that escaped a handler or extractor into the JSON error body. `path` picks
/// the code for unparseable bodies (`invalid_image` on the edit route, `invalid_request` elsewhere).
pub fn error_response(err: poem::Error, path: &str) -> Response {
    if let Some(f) = err.downcast_ref::<ApiFailure>() {
        return f.as_response();
    }
    if err.is_from_response() {
        let resp = err.into_response();
        let is_json = resp
            .headers()
            .get(poem::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if is_json {
            return resp;
        }
        return generic(resp.status(), "request failed");
    }
    let edit = path.ends_with("/v1/edit") || path.ends_with("/images/edits");
    let raw_edit = path.ends_with("/v1/edit/raw");
    if err.is::<NotFoundError>() {
        return json_response(
            codes::NOT_FOUND,
            "no such endpoint; see /api/pictor/ for the map",
        );
    }
    if err.is::<MethodNotAllowedError>() {
        return json_response(
            codes::METHOD_NOT_ALLOWED,
            "this endpoint does not accept that method",
        );
    }
    if err.is::<AuthorizationError>() {
        return json_response(
            codes::UNAUTHORIZED,
            "missing API key: send `Authorization: Bearer vx_…` or `X-API-Key: vx_…`",
        );
    }
    if let Some(ReadBodyError::PayloadTooLarge) = err.downcast_ref::<ReadBodyError>() {
        return json_response(codes::IMAGE_TOO_LARGE, "the request body is over 20 MiB");
    }
    if err.is::<ContentTypeError>() {
        return if raw_edit {
            json_response(
                codes::INVALID_IMAGE,
                "send the photo's bytes as the body, with a `Content-Type` (e.g. image/png)",
            )
        } else if edit {
            json_response(
                codes::INVALID_IMAGE,
                "send the photo as multipart/form-data (field `image`, `photo` or `file`) with a `prompt` field",
            )
        } else {
            json_response(
                codes::INVALID_REQUEST,
                "send the body as JSON with `Content-Type: application/json`",
            )
        };
    }
    if err.is::<ParseMultipartError>() || (edit && err.is::<ParseRequestPayloadError>()) {
        return json_response(
            codes::INVALID_IMAGE,
            format!("could not read the multipart body: {err}").as_str(),
        );
    }
    if err.is::<ParseRequestPayloadError>()
        || err.is::<ParseParamError>()
        || err.is::<ParsePathError>()
    {
        return json_response(codes::INVALID_REQUEST, &err.to_string());
    }
    generic(err.status(), &err.to_string())
}

fn generic(status: StatusCode, message: &str) -> Response {
    if status.is_server_error() {
        error!(status = %status, error = message, "unhandled server error");
        json_response(codes::INTERNAL, "internal server error")
    } else if status == StatusCode::NOT_FOUND {
        json_response(codes::NOT_FOUND, "not found")
    } else if status == StatusCode::PAYLOAD_TOO_LARGE {
        json_response(codes::IMAGE_TOO_LARGE, "the request body is over 20 MiB")
    } else {
        let mut resp = json_response(codes::INVALID_REQUEST, message);
        resp.set_status(status);
        resp
    }
}
