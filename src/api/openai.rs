//! The OpenAI Images API, served by Pictor (`/api/pictor/openai/v1/…`, also at `/openai/v1/…`):
//! `POST /images/generations`, `POST /images/edits`, `GET /models`, so that clients written for
//! OpenAI (the `openai` SDKs, open-webui, LibreChat, n8n) can use Pictor with a `vx_…` key as
//! their API key and this base URL.
//!
//! Each image is an ordinary job of the image API: credits are charged when it starts and
//! returned if it fails, one active job per user holds (`n` > 1 runs the images one after
//! another inside the request), the daily photo limit counts. The call waits for the pictures as
//! OpenAI's does, up to [`WAIT_LIMIT`]. Errors have OpenAI's shape,
//! `{"error": {"message", "type", "param", "code"}}`, with the statuses OpenAI uses: 401
//! `invalid_api_key`, 400 `invalid_request_error` naming the `param`, 429 `rate_limit_exceeded`
//! for a busy account or the daily limit, 429 `insufficient_quota` when the credits run out (as
//! OpenAI reports billing limits).

use std::time::Duration;

use base64::Engine as _;
use poem::http::StatusCode;
use poem::{IntoResponse, Response};
use poem_openapi::payload::{Json, Payload as _};
use poem_openapi::types::multipart::Upload;
use poem_openapi::{ApiResponse, Multipart, Object, OpenApi};
use serde_json::{Map, Value};

use super::ApiTags;
use super::body::{FromJsonBody, JsonBody};
use super::error::{ApiFailure, codes};
use super::images::check_prompt;
use super::schema::Referenced;
use super::security::GenerateAuth;
use crate::catalog::{Model, Ratio};
use crate::jobs::service::{self, Generate, JobError, WaitFor, random_seed};
use crate::state::AppState;
use crate::store::{CreateJobError, JobModel, JobRecord, JobStatus};

/// Where the OpenAI-compatible operations live inside `/api/pictor`.
pub const PATH: &str = "/openai/v1";
/// How long one request waits for its pictures before it gives up with a 504 (the jobs go on;
/// their results stay in the user's history).
pub const WAIT_LIMIT: Duration = Duration::from_secs(600);
/// Most images one request may ask for.
pub const MAX_IMAGES: u32 = 4;

/// OpenAI's model names and the tiers they draw with unless the configuration says otherwise
/// (`[openai]` `dall-e-2 = "artist"`…, see `crate::config::Config::openai_models`).
pub use crate::config::OPENAI_MODELS;

/// The error object inside OpenAI's error body.
#[derive(Object, Debug, Clone)]
pub struct OpenAiErrorDetail {
    /// Human-readable message.
    pub message: String,
    /// `invalid_request_error`, `insufficient_quota`, `requests` (rate limits) or `server_error`.
    #[oai(rename = "type")]
    pub kind: String,
    /// The request parameter at fault (`prompt`, `n`, `size`, `image`, …), when there is one.
    #[oai(nullable)]
    pub param: Option<String>,
    /// `invalid_api_key`, `insufficient_quota`, `rate_limit_exceeded`, `daily_limit_exceeded`,
    /// `account_blocked`, `timeout`, or null.
    #[oai(nullable)]
    pub code: Option<String>,
}

/// OpenAI's error body.
#[derive(Object, Debug, Clone)]
pub struct OpenAiErrorBody {
    pub error: OpenAiErrorDetail,
}

/// The error responses of the OpenAI-compatible operations.
#[derive(ApiResponse, Debug)]
pub enum OpenAiError {
    /// `invalid_request_error`: a missing or bad parameter (named in `param`); `edit_failed`: the
    /// instruction could not be done (credits returned).
    #[oai(status = 400)]
    BadRequest(Json<OpenAiErrorBody>),
    /// `invalid_api_key`: the key is missing, malformed or unknown.
    #[oai(status = 401)]
    Unauthorized(Json<OpenAiErrorBody>),
    /// The account is blocked, or an app's access token lacks `images:generate`.
    #[oai(status = 403)]
    Forbidden(Json<OpenAiErrorBody>),
    /// `rate_limit_exceeded` (another job of yours is running), `daily_limit_exceeded`,
    /// `tokens_exhausted` (the render queue is full), or `insufficient_quota` (not enough credits,
    /// or an app's spending limit: code `app_limit`).
    #[oai(status = 429)]
    TooMany(Json<OpenAiErrorBody>),
    /// `server_error`: the picture could not be made (its credits were returned).
    #[oai(status = 500)]
    Internal(Json<OpenAiErrorBody>),
    /// `timeout`: the pictures took longer than the wait limit (the jobs go on).
    #[oai(status = 504)]
    Timeout(Json<OpenAiErrorBody>),
}

impl OpenAiError {
    fn new(
        status: StatusCode,
        kind: &str,
        code: Option<&str>,
        param: Option<&str>,
        m: &str,
    ) -> Self {
        let body = Json(OpenAiErrorBody {
            error: OpenAiErrorDetail {
                message: m.to_string(),
                kind: kind.to_string(),
                param: param.map(str::to_string),
                code: code.map(str::to_string),
            },
        });
        match status {
            StatusCode::UNAUTHORIZED => OpenAiError::Unauthorized(body),
            StatusCode::FORBIDDEN => OpenAiError::Forbidden(body),
            StatusCode::TOO_MANY_REQUESTS => OpenAiError::TooMany(body),
            StatusCode::GATEWAY_TIMEOUT => OpenAiError::Timeout(body),
            s if s.is_server_error() => OpenAiError::Internal(body),
            _ => OpenAiError::BadRequest(body),
        }
    }

    fn invalid(param: &str, message: impl AsRef<str>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            None,
            Some(param),
            message.as_ref(),
        )
    }

    /// The same error from one of the image API's codes (`insufficient_credits`, …).
    fn from_code(code: &str, message: &str, param: Option<&str>) -> Self {
        let (status, kind, openai_code, param) = translate_code(code, message, param);
        Self::new(status, kind, openai_code, param.as_deref(), message)
    }
}

/// An image API error code as OpenAI says it: status, `type`, `code`, `param`.
fn translate_code(
    code: &str,
    message: &str,
    param: Option<&str>,
) -> (
    StatusCode,
    &'static str,
    Option<&'static str>,
    Option<String>,
) {
    let param = param.map(str::to_string).or_else(|| match code {
        codes::INVALID_PROMPT => Some("prompt".into()),
        codes::INVALID_MODEL => Some("model".into()),
        codes::INVALID_RATIO => Some("size".into()),
        codes::INVALID_IMAGE | codes::IMAGE_TOO_LARGE => Some("image".into()),
        // The messages name the parameter first: "`n` must be …".
        _ => message
            .strip_prefix('`')
            .and_then(|m| m.split_once('`'))
            .map(|(p, _)| p.to_string()),
    });
    match code {
        codes::UNAUTHORIZED => (
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            Some("invalid_api_key"),
            None,
        ),
        codes::BANNED => (
            StatusCode::FORBIDDEN,
            "invalid_request_error",
            Some("account_blocked"),
            None,
        ),
        codes::INSUFFICIENT_SCOPE => (
            StatusCode::FORBIDDEN,
            "invalid_request_error",
            Some("insufficient_scope"),
            None,
        ),
        codes::INSUFFICIENT_CREDITS => (
            StatusCode::TOO_MANY_REQUESTS,
            "insufficient_quota",
            Some("insufficient_quota"),
            None,
        ),
        codes::JOB_BUSY => (
            StatusCode::TOO_MANY_REQUESTS,
            "requests",
            Some("rate_limit_exceeded"),
            None,
        ),
        "daily_limit" => (
            StatusCode::TOO_MANY_REQUESTS,
            "requests",
            Some("daily_limit_exceeded"),
            None,
        ),
        codes::NOT_FOUND | codes::METHOD_NOT_ALLOWED => {
            (StatusCode::NOT_FOUND, "invalid_request_error", None, None)
        }
        codes::INTERNAL => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            None,
            None,
        ),
        _ => (
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            None,
            param,
        ),
    }
}

/// Turns an error response in the image API's shape (`{ok: false, error_code, error}`, made by
/// the shared extractors and the body guard) into OpenAI's; other responses pass.
pub async fn translate(resp: Response) -> Response {
    if resp.status().is_success() {
        return resp;
    }
    let challenge = resp
        .headers()
        .get(poem::http::header::WWW_AUTHENTICATE)
        .cloned();
    let close = resp.headers().get(poem::http::header::CONNECTION).cloned();
    let status = resp.status();
    let bytes = match resp.into_body().into_bytes().await {
        Ok(b) => b,
        Err(_) => bytes::Bytes::new(),
    };
    let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
    let mut out = match parsed.as_ref().and_then(|v| {
        Some((
            v.get("error_code")?.as_str()?.to_string(),
            v.get("error")?.as_str()?.to_string(),
        ))
    }) {
        Some((code, message)) => {
            let (translated, kind, openai_code, param) = translate_code(&code, &message, None);
            // Unknown routes and methods keep their 404/405 (the router's `Allow` follows).
            let status = if matches!(status.as_u16(), 404 | 405) {
                status
            } else {
                translated
            };
            let body = serde_json::json!({"error": {
                "message": message,
                "type": kind,
                "param": param,
                "code": openai_code,
            }});
            let mut r = poem::web::Json(body).into_response();
            r.set_status(status);
            r
        }
        None => {
            // Already OpenAI's shape (an operation's own error), or something else: as it was.
            let mut r = poem::Body::from(bytes).into_response();
            r.set_status(status);
            r.headers_mut().insert(
                poem::http::header::CONTENT_TYPE,
                poem::http::HeaderValue::from_static("application/json; charset=utf-8"),
            );
            r
        }
    };
    if let Some(c) = challenge {
        out.headers_mut()
            .insert(poem::http::header::WWW_AUTHENTICATE, c);
    }
    if let Some(c) = close {
        out.headers_mut().insert(poem::http::header::CONNECTION, c);
    }
    // OpenAI's SDKs retry 5xx answers (twice, by default) unless told not to; a retry would make
    // (and charge) the pictures again, so the server says not to.
    if out.status().is_server_error() {
        out.headers_mut().insert(
            "x-should-retry",
            poem::http::HeaderValue::from_static("false"),
        );
    }
    out
}

/// `POST /images/generations`.
#[derive(Object, Debug)]
pub struct ImageGenerationRequest {
    /// What to draw, 1 to 4000 characters (not only spaces).
    #[oai(validator(min_length = 1, max_length = 4000))]
    pub prompt: String,
    /// A Pictor model id or alias (`fast`, `artist`, `0.2plus`, `standard`, `pro`, `premium`…),
    /// or OpenAI's `dall-e-2` (→ `fast`), `dall-e-3` (→ `artist`), `gpt-image-1` (→ `0.2plus`).
    /// Default `fast`.
    #[oai(nullable)]
    pub model: Option<String>,
    /// How many images, 1 to 4 (made one after another). Default 1.
    #[oai(nullable, validator(minimum(value = "1"), maximum(value = "4")))]
    pub n: Option<u32>,
    /// `WIDTHxHEIGHT` (`1024x1024`, `1792x1024`, `1024x1536`…) or `auto`: the picture gets the
    /// nearest of Pictor's ratios at the model's own size (`auto`: square).
    #[oai(
        nullable,
        validator(pattern = r"^(auto|[1-9][0-9]{0,3}x[1-9][0-9]{0,3})$")
    )]
    pub size: Option<String>,
    /// `url` (default: a link to the PNG on this server) or `b64_json` (the PNG itself).
    #[oai(nullable)]
    pub response_format: Option<Referenced<ResponseFormat>>,
    /// Accepted and ignored (`quality`, `style`, `background`, `output_format`… too).
    #[oai(nullable)]
    pub user: Option<String>,
}

/// `response_format`.
#[derive(poem_openapi::Enum, Debug)]
pub enum ResponseFormat {
    #[oai(rename = "url")]
    Url,
    #[oai(rename = "b64_json")]
    B64Json,
}

/// A validated generation request.
pub struct GenerationInput {
    prompt: String,
    /// The tier, or one of OpenAI's names (resolved with the server's configuration).
    model: Requested,
    n: u32,
    ratio: Ratio,
    b64: bool,
}

fn text_field<'a>(o: &'a Map<String, Value>, k: &str) -> Result<Option<&'a str>, ApiFailure> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiFailure::new(
            codes::INVALID_REQUEST,
            format!("`{k}` must be a string"),
        )),
    }
}

/// A `model` as asked: one of Pictor's tiers, or one of OpenAI's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    Tier(Model),
    OpenAi(&'static str),
}

impl Requested {
    /// The tier that draws it on this server.
    fn tier(self, state: &AppState) -> Model {
        match self {
            Requested::Tier(m) => m,
            Requested::OpenAi(name) => state.config.openai_tier(name),
        }
    }
}

/// `model`: Pictor's ids and aliases, or OpenAI's names.
fn parse_model(name: Option<&str>) -> Result<Requested, ApiFailure> {
    let Some(name) = name else {
        return Ok(Requested::Tier(Model::Fast));
    };
    if let Some((n, _)) = OPENAI_MODELS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name.trim()))
    {
        return Ok(Requested::OpenAi(n));
    }
    Model::parse(name).map(Requested::Tier).ok_or_else(|| {
        ApiFailure::new(
            codes::INVALID_MODEL,
            format!(
                "unknown model {name:?}; use fast, artist, 0.2plus (or dall-e-2, dall-e-3, gpt-image-1)"
            ),
        )
    })
}

/// `n`: 1 to [`MAX_IMAGES`].
fn parse_n(n: Option<&Value>) -> Result<u32, ApiFailure> {
    match n {
        None | Some(Value::Null) => Ok(1),
        Some(Value::Number(v)) => match v.as_u64() {
            Some(n) if (1..=u64::from(MAX_IMAGES)).contains(&n) => Ok(n as u32),
            _ => Err(ApiFailure::new(
                codes::INVALID_REQUEST,
                format!("`n` must be an integer from 1 to {MAX_IMAGES}"),
            )),
        },
        Some(_) => Err(ApiFailure::new(
            codes::INVALID_REQUEST,
            format!("`n` must be an integer from 1 to {MAX_IMAGES}"),
        )),
    }
}

/// `size`: `WxH` (1 to 4 digits each, no leading zero: the published pattern) → the nearest
/// ratio; `auto` (or absent) → square.
fn parse_size(size: Option<&str>) -> Result<Ratio, ApiFailure> {
    let bad = || {
        ApiFailure::new(
            codes::INVALID_REQUEST,
            "`size` must be WIDTHxHEIGHT (e.g. 1024x1024, 1792x1024, 1024x1536) or auto",
        )
    };
    let side = |t: &str| -> Option<u32> {
        let ok = (1..=4).contains(&t.len())
            && t.bytes().all(|b| b.is_ascii_digit())
            && !t.starts_with('0');
        ok.then(|| t.parse().ok()).flatten()
    };
    let (w, h) = match size {
        None | Some("auto") => return Ok(Ratio::Square),
        Some(s) => s
            .split_once('x')
            .and_then(|(w, h)| Some((side(w)?, side(h)?)))
            .ok_or_else(bad)?,
    };
    let want = (f64::from(w) / f64::from(h)).ln();
    Ok(Ratio::ALL
        .into_iter()
        .filter(|r| *r != Ratio::Auto)
        .min_by(|a, b| {
            let d = |r: &Ratio| {
                let (rw, rh) = Model::Fast.dimensions(*r);
                ((f64::from(rw) / f64::from(rh)).ln() - want).abs()
            };
            d(a).total_cmp(&d(b))
        })
        .unwrap_or(Ratio::Square))
}

/// `response_format`: `url` or `b64_json`.
fn parse_format(f: Option<&str>) -> Result<bool, ApiFailure> {
    match f {
        None | Some("url") => Ok(false),
        Some("b64_json") => Ok(true),
        Some(other) => Err(ApiFailure::new(
            codes::INVALID_REQUEST,
            format!("`response_format` must be url or b64_json, not {other:?}"),
        )),
    }
}

impl FromJsonBody for GenerationInput {
    fn from_json_body(o: &Map<String, Value>) -> Result<Self, ApiFailure> {
        let prompt = match text_field(o, "prompt")? {
            Some(p) => check_prompt(p)?,
            None => {
                return Err(ApiFailure::new(
                    codes::INVALID_PROMPT,
                    "`prompt` is required",
                ));
            }
        };
        Ok(GenerationInput {
            prompt,
            model: parse_model(text_field(o, "model")?)?,
            n: parse_n(o.get("n"))?,
            ratio: parse_size(text_field(o, "size")?)?,
            b64: {
                // Accepted and ignored, but a string as published.
                text_field(o, "user")?;
                parse_format(text_field(o, "response_format")?)?
            },
        })
    }
}

impl poem_openapi::types::Type for GenerationInput {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Self;

    fn name() -> std::borrow::Cow<'static, str> {
        <ImageGenerationRequest as poem_openapi::types::Type>::name()
    }

    fn schema_ref() -> poem_openapi::registry::MetaSchemaRef {
        <ImageGenerationRequest as poem_openapi::types::Type>::schema_ref()
    }

    fn register(registry: &mut poem_openapi::registry::Registry) {
        <ImageGenerationRequest as poem_openapi::types::Type>::register(registry);
    }

    fn as_raw_value(&self) -> Option<&Self::RawValueType> {
        Some(self)
    }

    fn raw_element_iter<'a>(
        &'a self,
    ) -> Box<dyn Iterator<Item = &'a Self::RawElementValueType> + 'a> {
        Box::new(std::iter::once(self))
    }
}

/// `POST /images/edits`: the multipart form as OpenAI documents it (the published schema).
#[derive(Multipart, Debug)]
pub struct ImageEditRequest {
    /// The picture to edit (PNG, JPEG or WebP, up to 20 MiB). Clients that send several
    /// pictures as `image[]` (gpt-image-1 style) are accepted too: the first is edited.
    pub image: Upload,
    /// The instruction, 1 to 4000 characters.
    #[oai(validator(min_length = 1, max_length = 4000))]
    pub prompt: String,
    /// A PNG the picture's size whose transparent pixels mark the area to change (OpenAI's
    /// convention; a black-and-white mask, white = change, is read too). Outside it the
    /// picture stays exactly as it was.
    pub mask: Option<Upload>,
    /// As for generations (every edit is drawn by the edit tier).
    pub model: Option<String>,
    /// 1 to 4.
    pub n: Option<String>,
    /// Accepted; an edit keeps its picture's size.
    pub size: Option<String>,
    /// `url` or `b64_json`.
    pub response_format: Option<String>,
    /// Accepted and ignored.
    pub user: Option<String>,
}

/// The edit form as received: read part by part (poem's multipart reader), so that `image[]`
/// works and each missing or bad part gets its own error naming it.
#[derive(Default)]
pub struct ImageEditForm {
    image: Option<Vec<u8>>,
    prompt: Option<String>,
    mask: Option<Vec<u8>>,
    model: Option<String>,
    n: Option<String>,
    response_format: Option<String>,
}

impl poem_openapi::payload::Payload for ImageEditForm {
    const CONTENT_TYPE: &'static str =
        <ImageEditRequest as poem_openapi::payload::Payload>::CONTENT_TYPE;

    fn check_content_type(content_type: &str) -> bool {
        <ImageEditRequest as poem_openapi::payload::Payload>::check_content_type(content_type)
    }

    fn schema_ref() -> poem_openapi::registry::MetaSchemaRef {
        <ImageEditRequest as poem_openapi::payload::Payload>::schema_ref()
    }

    fn register(registry: &mut poem_openapi::registry::Registry) {
        <ImageEditRequest as poem_openapi::payload::Payload>::register(registry);
    }
}

impl poem_openapi::payload::ParsePayload for ImageEditForm {
    const IS_REQUIRED: bool = true;

    async fn from_request(req: &poem::Request, body: &mut poem::RequestBody) -> poem::Result<Self> {
        use poem::FromRequest as _;
        let bad = |m: String| ApiFailure::new(codes::INVALID_REQUEST, m);
        let mut parts = poem::web::Multipart::from_request(req, body)
            .await
            .map_err(|e| bad(format!("`image`: could not read the multipart body: {e}")))?;
        let mut form = ImageEditForm::default();
        while let Some(field) = parts
            .next_field()
            .await
            .map_err(|e| bad(format!("`image`: could not read the multipart body: {e}")))?
        {
            let name = field.name().unwrap_or_default().to_string();
            let text = |field: poem::web::Field, name: String| async move {
                field
                    .text()
                    .await
                    .map_err(|_| bad(format!("`{name}` must be UTF-8 text")))
            };
            match name.as_str() {
                "image" | "image[]" => {
                    let bytes = field
                        .bytes()
                        .await
                        .map_err(|e| bad(format!("`image`: {e}")))?;
                    // The first picture is edited; the others are read past.
                    if form.image.is_none() {
                        form.image = Some(bytes);
                    }
                }
                "mask" => {
                    let bytes = field
                        .bytes()
                        .await
                        .map_err(|e| bad(format!("`mask`: {e}")))?;
                    form.mask = Some(bytes);
                }
                "prompt" => form.prompt = Some(text(field, name).await?),
                "model" => form.model = Some(text(field, name).await?),
                "n" => form.n = Some(text(field, name).await?),
                "response_format" => form.response_format = Some(text(field, name).await?),
                // size, user, quality, background, input_fidelity…: accepted, ignored.
                _ => {
                    let _ = field.bytes().await;
                }
            }
        }
        Ok(form)
    }
}

poem_openapi::impl_apirequest_for_payload!(ImageEditForm,);

/// One picture of the answer.
#[derive(Object, Debug)]
#[oai(skip_serializing_if_is_none)]
pub struct ImageData {
    /// Link to the PNG (with `response_format` `url`).
    pub url: Option<String>,
    /// The PNG, base64 (with `response_format` `b64_json`).
    pub b64_json: Option<String>,
    /// The prompt as drawn, when Pictor's prompt improvement changed it.
    pub revised_prompt: Option<String>,
}

/// The answer of a generation or an edit.
#[derive(Object, Debug)]
pub struct ImagesResponse {
    /// Unix time in seconds.
    pub created: u64,
    pub data: Vec<ImageData>,
}

/// One model as `GET /models` lists it.
#[derive(Object, Debug)]
pub struct OpenAiModel {
    pub id: String,
    /// Always `model`.
    pub object: String,
    /// Unix time in seconds (the server's start).
    pub created: u64,
    /// `pictor`.
    pub owned_by: String,
}

#[derive(Object, Debug)]
pub struct OpenAiModelList {
    /// Always `list`.
    pub object: String,
    pub data: Vec<OpenAiModel>,
}

pub struct OpenAiApi;

type OpenAiResult<T> = Result<Json<T>, OpenAiError>;

#[OpenApi(tag = "ApiTags::OpenAi", prefix_path = "/openai/v1")]
impl OpenAiApi {
    /// Create images (OpenAI-compatible)
    ///
    /// OpenAI's `POST /v1/images/generations` with a `vx_…` key as the API key
    /// (`Authorization: Bearer vx_…`; an app's access token needs `images:generate`). Each image
    /// is a job of the image API, charged and refunded as usual, made one after another; the call
    /// waits for them (up to 10 minutes).
    #[oai(
        path = "/images/generations",
        method = "post",
        operation_id = "openai_generations"
    )]
    async fn generations(
        &self,
        auth: GenerateAuth,
        state: poem::web::Data<&AppState>,
        body: JsonBody<GenerationInput>,
    ) -> OpenAiResult<ImagesResponse> {
        let input = body.0;
        let client = auth.0.client().map(str::to_string);
        let user = auth.0.user.id;
        let model = input.model.tier(&state);
        check_quota(&state, user, JobModel::Generate(model), input.n)?;
        let deadline = tokio::time::Instant::now() + wait_limit(&state);
        let mut data = Vec::new();
        for _ in 0..input.n {
            let job = service::create_generate(
                &state,
                user,
                client.clone(),
                Generate {
                    prompt: input.prompt.clone(),
                    model,
                    ratio: input.ratio,
                    enhance: false,
                    seed: random_seed(),
                    noise: None,
                    webhook_url: None,
                    loras: Vec::new(),
                },
            )
            .await
            .map_err(job_error)?;
            data.push(finish(&state, user, job, input.b64, deadline).await?);
        }
        Ok(Json(ImagesResponse {
            created: state.clock.now() / 1000,
            data,
        }))
    }

    /// List models (OpenAI-compatible)
    ///
    /// Pictor's model ids and OpenAI's names that map to them.
    #[oai(path = "/models", method = "get", operation_id = "openai_models")]
    async fn models(&self, state: poem::web::Data<&AppState>) -> Json<OpenAiModelList> {
        let created = state.clock.now() / 1000;
        let model = |id: &str| OpenAiModel {
            id: id.to_string(),
            object: "model".into(),
            created,
            owned_by: "pictor".into(),
        };
        Json(OpenAiModelList {
            object: "list".into(),
            data: Model::ALL
                .iter()
                .map(|m| model(m.id()))
                .chain(OPENAI_MODELS.iter().map(|(n, _)| model(n)))
                .collect(),
        })
    }
}

/// `POST /images/edits`, the one multipart operation, on its own (see `EditFormApi`).
pub struct OpenAiEditApi;

#[OpenApi(tag = "ApiTags::OpenAi", prefix_path = "/openai/v1")]
impl OpenAiEditApi {
    /// Edit an image (OpenAI-compatible)
    ///
    /// OpenAI's `POST /v1/images/edits`: multipart `image` (or `image[]`, the first is edited),
    /// `prompt`, optional `n`, `response_format`. Done by the edit tier, at the edit price per
    /// image. An optional `mask` (transparent = change) keeps the rest of the picture as it was.
    #[oai(path = "/images/edits", method = "post", operation_id = "openai_edits")]
    async fn edits(
        &self,
        auth: GenerateAuth,
        state: poem::web::Data<&AppState>,
        form: ImageEditForm,
    ) -> OpenAiResult<ImagesResponse> {
        let prompt = match form.prompt.as_deref() {
            Some(p) => check_prompt(p).map_err(failure)?,
            None => return Err(OpenAiError::invalid("prompt", "`prompt` is required")),
        };
        if let Some(m) = &form.mask {
            if m.is_empty() {
                return Err(OpenAiError::invalid("mask", "the `mask` part is empty"));
            }
            super::images::check_upload_size(m.len())
                .map_err(|_| OpenAiError::invalid("mask", "the mask is over 20 MiB"))?;
        }
        let n = match form.n.as_deref() {
            None => 1,
            Some(s) => parse_n(Some(&s.parse::<u64>().map_or(Value::Null, Value::from)))
                .and_then(|n| {
                    if s.parse::<u64>().is_ok() {
                        Ok(n)
                    } else {
                        Err(ApiFailure::new(
                            codes::INVALID_REQUEST,
                            format!("`n` must be an integer from 1 to {MAX_IMAGES}"),
                        ))
                    }
                })
                .map_err(failure)?,
        };
        parse_model(form.model.as_deref()).map_err(failure)?;
        let b64 = parse_format(form.response_format.as_deref()).map_err(failure)?;
        let bytes = form.image.ok_or_else(|| {
            OpenAiError::invalid("image", "`image` is required: attach the picture to edit")
        })?;
        if bytes.is_empty() {
            return Err(OpenAiError::invalid("image", "the `image` part is empty"));
        }
        super::images::check_upload_size(bytes.len())
            .map_err(|_| OpenAiError::invalid("image", "the image is over 20 MiB"))?;
        let user = &auth.0.user;
        service::precheck_edit(&state, user).map_err(job_error)?;
        let client = auth.0.client().map(str::to_string);
        check_quota(&state, user.id, JobModel::Edit, n)?;
        let deadline = tokio::time::Instant::now() + wait_limit(&state);
        let mut data = Vec::new();
        for _ in 0..n {
            let job = service::create_edit(
                &state,
                user.id,
                client.clone(),
                prompt.clone(),
                bytes.clone(),
                form.mask.clone(),
                None,
            )
            .await
            .map_err(job_error)?;
            data.push(finish(&state, user.id, job, b64, deadline).await?);
        }
        Ok(Json(ImagesResponse {
            created: state.clock.now() / 1000,
            data,
        }))
    }
}

/// How long a request waits for its pictures: [`WAIT_LIMIT`], but always inside the server's
/// `idle_timeout` (a connection that sends nothing for that long is closed, and a client that
/// then retries would start — and pay for — the pictures again).
fn wait_limit(state: &AppState) -> Duration {
    WAIT_LIMIT.min(
        state
            .config
            .idle_timeout
            .saturating_sub(Duration::from_secs(5))
            .max(Duration::from_secs(1)),
    )
}

/// `n` pictures at the price of `model` must be covered by the balance before the first starts,
/// so that a request is not half made and half refused for credits.
fn check_quota(state: &AppState, user: u64, model: JobModel, n: u32) -> Result<(), OpenAiError> {
    let settings = state
        .store
        .settings()
        .map_err(|e| server_error(&e.to_string()))?;
    let balance = state
        .store
        .user(user)
        .map_err(|e| server_error(&e.to_string()))?
        .map_or(0, |u| u.balance);
    let cost = i64::from(model.price(&settings)) * i64::from(n);
    if balance < cost {
        return Err(OpenAiError::from_code(
            codes::INSUFFICIENT_CREDITS,
            &format!("not enough credits: {n} picture(s) cost {cost}, the balance is {balance}"),
            None,
        ));
    }
    Ok(())
}

fn failure(f: ApiFailure) -> OpenAiError {
    OpenAiError::from_code(f.code, &f.message, None)
}

fn server_error(message: &str) -> OpenAiError {
    tracing::error!(error = message, "openai-compatible request failed");
    OpenAiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        None,
        None,
        "internal server error",
    )
}

fn job_error(e: JobError) -> OpenAiError {
    match e {
        JobError::Create(CreateJobError::Busy(id)) => OpenAiError::from_code(
            codes::JOB_BUSY,
            &format!("you already have an active job ({id}); wait for it to finish"),
            None,
        ),
        JobError::Create(e @ CreateJobError::InsufficientCredits { .. }) => {
            OpenAiError::from_code(codes::INSUFFICIENT_CREDITS, &e.to_string(), None)
        }
        JobError::Create(CreateJobError::Banned) => {
            OpenAiError::from_code(codes::BANNED, "the account is blocked", None)
        }
        JobError::Create(CreateJobError::NoUser) => {
            OpenAiError::from_code(codes::UNAUTHORIZED, "the account no longer exists", None)
        }
        JobError::InvalidImage(m) if m.contains("the mask") => OpenAiError::invalid("mask", m),
        JobError::InvalidImage(m) => OpenAiError::invalid("image", m),
        JobError::InvalidWebhook(m) => OpenAiError::invalid("webhook_url", m),
        JobError::InvalidLora(m) => OpenAiError::invalid("prompt", m),
        other => server_error(&other.to_string()),
    }
}

/// Waits for `job` and returns its picture, or the error it failed with (its credits were
/// returned by the engine).
async fn finish(
    state: &AppState,
    user: u64,
    job: JobRecord,
    b64: bool,
    deadline: tokio::time::Instant,
) -> Result<ImageData, OpenAiError> {
    let id = job.job_id().to_string();
    let snap = loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(OpenAiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "server_error",
                Some("timeout"),
                None,
                &format!(
                    "the picture was not ready within {} s; it goes on as job {id} (see your history)",
                    wait_limit(state).as_secs()
                ),
            ));
        }
        let wait = left.min(Duration::from_secs(60));
        let snap = service::get(state, user, &id, Some((wait, WaitFor::Finish)))
            .await
            .map_err(job_error)?;
        if snap.job.status.is_terminal() {
            break snap;
        }
    };
    let job = &snap.job;
    if job.status != JobStatus::Done {
        let view = super::jobs::job_view(state, &snap);
        let code = view.error_code.clone().unwrap_or_default();
        let message = view
            .error
            .clone()
            .unwrap_or_else(|| "the picture could not be made".into());
        let refunded = if message.contains("credits returned") || job.cost == 0 {
            message.clone()
        } else {
            format!("{message} (its credits were returned)")
        };
        return Err(match code.as_str() {
            codes::INSUFFICIENT_CREDITS | "daily_limit" | codes::BANNED => {
                OpenAiError::from_code(&code, &message, None)
            }
            // The painter could not do what the instruction asks: the request's fault, not the
            // server's.
            "edit_failed" => OpenAiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("edit_failed"),
                Some("prompt"),
                &refunded,
            ),
            // The render queue is full (or waited too long), or an app's spending limit.
            "tokens_exhausted" | "app_limit" => OpenAiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                if code == "app_limit" {
                    "insufficient_quota"
                } else {
                    "requests"
                },
                Some(code.as_str()),
                None,
                &message,
            ),
            _ => OpenAiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                (!code.is_empty()).then_some(code.as_str()),
                None,
                &refunded,
            ),
        });
    }
    let view = super::jobs::job_view(state, &snap);
    let revised_prompt = job.enhanced_prompt.clone();
    if b64 {
        let token = job
            .photo_token
            .clone()
            .ok_or_else(|| server_error("a done job without a picture"))?;
        let path = state.config.images_dir().join(format!("{token}.png"));
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(|e| server_error(&format!("{}: {e}", path.display())))?;
        Ok(ImageData {
            url: None,
            b64_json: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
            revised_prompt,
        })
    } else {
        Ok(ImageData {
            url: view.photo_url,
            b64_json: None,
            revised_prompt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_go_to_the_nearest_ratio() {
        let r = |s: &str| parse_size(Some(s)).map(|r| r.as_str()).ok();
        assert_eq!(r("1024x1024"), Some("1:1"));
        assert_eq!(r("1792x1024"), Some("16:9"));
        assert_eq!(r("1024x1792"), Some("9:16"));
        assert_eq!(r("1536x1024"), Some("3:2"));
        assert_eq!(r("1024x1536"), Some("2:3"));
        assert_eq!(r("auto"), Some("1:1"));
        assert_eq!(r("256x256"), Some("1:1"));
        for bad in [
            "",
            "1024",
            "0x10",
            "axb",
            "99999x1",
            "1024x1024x1",
            "AUTO",
            " 1x1",
            "1X1",
            "01x1",
        ] {
            assert!(parse_size(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn openai_names_map_to_tiers() {
        assert_eq!(
            parse_model(Some("dall-e-3")).ok(),
            Some(Requested::OpenAi("dall-e-3"))
        );
        assert_eq!(
            parse_model(Some("DALL-E-2")).ok(),
            Some(Requested::OpenAi("dall-e-2"))
        );
        assert_eq!(
            parse_model(Some("gpt-image-1")).ok(),
            Some(Requested::OpenAi("gpt-image-1"))
        );
        assert_eq!(
            parse_model(Some("premium")).ok(),
            Some(Requested::Tier(Model::Plus))
        );
        assert_eq!(parse_model(None).ok(), Some(Requested::Tier(Model::Fast)));
        assert!(parse_model(Some("midjourney")).is_err());
    }

    #[test]
    fn errors_name_their_parameter() {
        let (s, kind, code, param) = translate_code("invalid_request", "`n` must be …", None);
        assert_eq!(
            (s.as_u16(), kind, code, param.as_deref()),
            (400, "invalid_request_error", None, Some("n"))
        );
        let (s, kind, code, _) = translate_code("insufficient_credits", "x", None);
        assert_eq!(
            (s.as_u16(), kind, code),
            (429, "insufficient_quota", Some("insufficient_quota"))
        );
        let (s, _, code, _) = translate_code("unauthorized", "x", None);
        assert_eq!((s.as_u16(), code), (401, Some("invalid_api_key")));
    }
}
