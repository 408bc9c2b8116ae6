//! `POST /v1/generate` and `POST /v1/edit`: validate, create the queued job, hand it to the engine.

use poem_openapi::param::Query;
use poem_openapi::payload::{Binary, Json};
use poem_openapi::types::multipart::Upload;
use poem_openapi::{ApiResponse, Multipart, Object, OpenApi};
use serde_json::{Map, Value};

use super::body::{FromJsonBody, JsonBody};
use super::error::{
    ApiError, ApiFailure, EditErrors, Errors, GenerateErrors, RawEditErrors, codes,
};
use super::schema::{Referenced, RequiredText};
use super::security::GenerateAuth;
use super::{ApiTags, MAX_IMAGE_BYTES, MAX_PROMPT_CHARS};
use crate::catalog::NoiseKind;
use crate::jobs::service::{self, Generate, random_seed};
use crate::render::{Model, Ratio};
use crate::state::AppState;
use crate::store::JobRecord;

/// Text-to-image request.
#[derive(Object, Debug)]
#[oai(example)]
pub struct GenerateRequest {
    /// What to draw, 1 to 4000 characters, not only spaces and without control characters other
    /// than newline and tab.
    #[oai(validator(
        min_length = 1,
        max_length = 4000,
        pattern = r"^[^\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]*$"
    ))]
    pub prompt: String,
    /// `fast` (default), `artist` or `0.2plus`; the aliases `standard`, `std`, `pro`, `premium`,
    /// `prem` name the same models (case is ignored). `null` means the default.
    #[oai(nullable)]
    pub model: Option<Referenced<ModelName>>,
    /// `1:1` (default), `16:9`, `9:16`, `3:2`, `2:3`, `4:3`, `3:4` or `auto` (picked from the
    /// prompt). `null` means the default.
    #[oai(nullable)]
    pub ratio: Option<Referenced<RatioName>>,
    /// Prompt improvement on/off (default `true`; `null` means the default).
    #[oai(nullable)]
    pub enhance: Option<bool>,
    /// Seed for a reproducible picture, 0 to 4294967295; random when absent, `null` or `-1`.
    #[oai(
        nullable,
        validator(minimum(value = "-1"), maximum(value = "4294967295"))
    )]
    pub seed: Option<i64>,
    /// Where the seed's noise comes from, for models served by the built-in diffusion engine:
    /// `torch-cpu` (PyTorch's CPU generator: the seeds of diffusers with a CPU generator,
    /// ComfyUI and AUTOMATIC1111 "RNG: CPU") or `a1111-gpu` (AUTOMATIC1111's default GPU/NV
    /// noise). Absent or `null`: the model's configured source (`torch-cpu` unless the operator
    /// says otherwise). Other renderers record it and ignore it.
    #[oai(nullable)]
    pub noise: Option<Referenced<NoiseName>>,
    /// *(added)* An http(s) URL to POST the finished job to (the body `GET /v1/jobs/{job_id}`
    /// returns, signed with your webhook secret in `Pictor-Signature`; see `GET
    /// /v1/webhook-secret`). At most 2048 bytes; loopback, private, link-local and reserved
    /// addresses are refused unless the server's operator allows them. Delivered at least once,
    /// retried with backoff (also across server restarts); `Pictor-Webhook-Id` (the job id)
    /// identifies repeats.
    #[oai(nullable, validator(max_length = 2048))]
    pub webhook_url: Option<String>,
    /// *(added)* LoRAs to merge into the model for this picture (models served by the built-in
    /// diffusion engine), at most 8 together with the prompt's tags: each an installed LoRA's
    /// name (`pictor models list`) and a weight (default 1, from -10 to 10). The prompt may ask
    /// for them too, as AUTOMATIC1111 does: `<lora:name>`, `<lora:name:0.8>`,
    /// `<lora:name:text_weight:unet_weight>` (the tags are taken out of the text the model
    /// reads). A LoRA must be for the architecture of the model that draws the picture; an
    /// unknown one, one for another family, or any LoRA for a model drawn by the built-in
    /// painter is refused (400 `invalid_request`) and nothing is charged. The PNG's
    /// `parameters` list them as AUTOMATIC1111 does (`Lora hashes`).
    #[oai(nullable, validator(max_items = 8))]
    pub loras: Option<Vec<LoraRequest>>,
}

/// A LoRA for one picture.
#[derive(Object, Debug)]
pub struct LoraRequest {
    /// The installed LoRA's name.
    #[oai(validator(min_length = 1, max_length = 64))]
    pub name: String,
    /// Its weight (multiplier of its changes to the text encoders and the UNet), -10 to 10;
    /// default 1.
    #[oai(validator(minimum(value = "-10"), maximum(value = "10")))]
    pub weight: Option<f64>,
}

/// The request the documentation page fills in: a real prompt, a small seed.
impl poem_openapi::types::Example for GenerateRequest {
    fn example() -> Self {
        GenerateRequest {
            prompt: "a red fox curled up in fresh snow at dawn, soft light".into(),
            model: Some(Referenced(ModelName::Fast)),
            ratio: Some(Referenced(RatioName::Landscape32)),
            enhance: Some(true),
            seed: Some(42),
            noise: None,
            webhook_url: None,
            loras: None,
        }
    }
}

/// Noise sources (documentation of `noise`).
#[derive(poem_openapi::Enum, Debug)]
pub enum NoiseName {
    #[oai(rename = "torch-cpu")]
    TorchCpu,
    #[oai(rename = "a1111-gpu")]
    A1111Gpu,
}

/// Model ids and aliases (documentation of `model`; the server also ignores case).
#[derive(poem_openapi::Enum, Debug)]
pub enum ModelName {
    #[oai(rename = "fast")]
    Fast,
    #[oai(rename = "standard")]
    Standard,
    #[oai(rename = "std")]
    Std,
    #[oai(rename = "artist")]
    Artist,
    #[oai(rename = "pro")]
    Pro,
    #[oai(rename = "0.2plus")]
    Plus,
    #[oai(rename = "premium")]
    Premium,
    #[oai(rename = "prem")]
    Prem,
}

/// Output ratios (documentation of `ratio`).
#[derive(poem_openapi::Enum, Debug)]
pub enum RatioName {
    #[oai(rename = "1:1")]
    Square,
    #[oai(rename = "16:9")]
    Wide,
    #[oai(rename = "9:16")]
    Tall,
    #[oai(rename = "3:2")]
    Landscape32,
    #[oai(rename = "2:3")]
    Portrait23,
    #[oai(rename = "4:3")]
    Landscape43,
    #[oai(rename = "3:4")]
    Portrait34,
    #[oai(rename = "auto")]
    Auto,
}

/// Validated generate request.
pub struct GenerateInput(pub Generate);

pub fn validate_prompt(value: Option<&Value>) -> Result<String, ApiFailure> {
    let bad = |m: &str| ApiFailure::new(codes::INVALID_PROMPT, m);
    let prompt = match value {
        None | Some(Value::Null) => return Err(bad("`prompt` is required")),
        Some(Value::String(s)) => s,
        Some(_) => return Err(bad("`prompt` must be a string")),
    };
    check_prompt(prompt)
}

pub fn check_prompt(prompt: &str) -> Result<String, ApiFailure> {
    let bad = |m: String| ApiFailure::new(codes::INVALID_PROMPT, m);
    if prompt.trim().is_empty() {
        return Err(bad("`prompt` must not be empty".into()));
    }
    let chars = prompt.chars().count();
    if chars > MAX_PROMPT_CHARS {
        return Err(bad(format!(
            "`prompt` is {chars} characters; the limit is {MAX_PROMPT_CHARS}"
        )));
    }
    if prompt
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return Err(bad("`prompt` must not contain control characters".into()));
    }
    Ok(prompt.trim().to_string())
}

impl FromJsonBody for GenerateInput {
    fn from_json_body(o: &Map<String, Value>) -> Result<Self, ApiFailure> {
        let prompt = validate_prompt(o.get("prompt"))?;
        let model = match o.get("model") {
            None | Some(Value::Null) => Model::Fast,
            Some(Value::String(s)) => Model::parse(s).ok_or_else(|| {
                ApiFailure::new(
                    codes::INVALID_MODEL,
                    format!("unknown model {s:?}; use fast, artist or 0.2plus"),
                )
            })?,
            Some(_) => {
                return Err(ApiFailure::new(
                    codes::INVALID_MODEL,
                    "`model` must be a string",
                ));
            }
        };
        let ratio = match o.get("ratio") {
            None | Some(Value::Null) => Ratio::Square,
            Some(Value::String(s)) => Ratio::parse(s).ok_or_else(|| {
                ApiFailure::new(
                    codes::INVALID_RATIO,
                    format!("unknown ratio {s:?}; use 1:1, 16:9, 9:16, 3:2, 2:3, 4:3, 3:4 or auto"),
                )
            })?,
            Some(_) => {
                return Err(ApiFailure::new(
                    codes::INVALID_RATIO,
                    "`ratio` must be a string",
                ));
            }
        };
        let enhance = match o.get("enhance") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ApiFailure::new(
                    codes::INVALID_REQUEST,
                    "`enhance` must be true or false",
                ));
            }
        };
        let seed = match o.get("seed") {
            None | Some(Value::Null) => random_seed(),
            Some(Value::Number(n)) if n.as_i64() == Some(-1) => random_seed(),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(s) if s <= u32::MAX as u64 => s,
                _ => {
                    return Err(ApiFailure::new(
                        codes::INVALID_REQUEST,
                        "`seed` must be an integer from 0 to 4294967295 (or -1 for random)",
                    ));
                }
            },
            Some(_) => {
                return Err(ApiFailure::new(
                    codes::INVALID_REQUEST,
                    "`seed` must be an integer from 0 to 4294967295 (or -1 for random)",
                ));
            }
        };
        let noise = match o.get("noise") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if NoiseKind::parse(s).is_some_and(|k| k.as_str() == s) => {
                NoiseKind::parse(s)
            }
            Some(_) => {
                return Err(ApiFailure::new(
                    codes::INVALID_REQUEST,
                    "`noise` must be \"torch-cpu\" or \"a1111-gpu\"",
                ));
            }
        };
        let webhook_url = match o.get("webhook_url") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(ApiFailure::new(
                    codes::INVALID_REQUEST,
                    "`webhook_url` must be a string (an http:// or https:// URL)",
                ));
            }
        };
        let loras = parse_loras(o.get("loras"))?;
        Ok(GenerateInput(Generate {
            prompt,
            model,
            ratio,
            enhance,
            seed,
            noise,
            webhook_url,
            loras,
        }))
    }
}

/// `loras`: absent, `null`, or up to 8 `{"name": …, "weight": …}` objects.
fn parse_loras(v: Option<&Value>) -> Result<Vec<(String, f32)>, ApiFailure> {
    let bad = |m: String| ApiFailure::new(codes::INVALID_REQUEST, m);
    let shape = "`loras` must be a list of {\"name\": \"<installed LoRA>\", \"weight\": <number>}";
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(bad(shape.into())),
    };
    if items.len() > service::MAX_LORAS {
        return Err(bad(format!(
            "`loras` has {} entries; at most {}",
            items.len(),
            service::MAX_LORAS
        )));
    }
    items
        .iter()
        .map(|item| {
            let Some(o) = item.as_object() else {
                return Err(bad(shape.into()));
            };
            if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "name" | "weight")) {
                return Err(bad(format!(
                    "`loras`: unknown field {k:?} (name and weight are understood)"
                )));
            }
            let name = match o.get("name") {
                Some(Value::String(n)) if !n.is_empty() && n.chars().count() <= 64 => n.clone(),
                _ => {
                    return Err(bad(
                        "`loras`: each needs a \"name\", 1 to 64 characters".into()
                    ));
                }
            };
            let weight = match o.get("weight") {
                None | Some(Value::Null) => 1.0,
                Some(Value::Number(n)) => match n.as_f64() {
                    Some(w)
                        if w.is_finite()
                            && w.abs() <= f64::from(crate::render::lora_tags::MAX_WEIGHT) =>
                    {
                        w as f32
                    }
                    _ => {
                        return Err(bad(format!(
                            "`loras`: the weight of {name:?} must be a number from -10 to 10"
                        )));
                    }
                },
                Some(_) => {
                    return Err(bad(format!(
                        "`loras`: the weight of {name:?} must be a number from -10 to 10"
                    )));
                }
            };
            Ok((name, weight))
        })
        .collect()
}

impl poem_openapi::types::Type for GenerateInput {
    const IS_REQUIRED: bool = true;
    type RawValueType = Self;
    type RawElementValueType = Self;

    fn name() -> std::borrow::Cow<'static, str> {
        GenerateRequest::name()
    }

    fn schema_ref() -> poem_openapi::registry::MetaSchemaRef {
        GenerateRequest::schema_ref()
    }

    fn register(registry: &mut poem_openapi::registry::Registry) {
        GenerateRequest::register(registry);
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

/// Multipart body of an edit, as documented: the photo under `image` and the instruction. (The
/// server also takes the photo under `photo` or `file`, names other clients use; they are left
/// out of the schema so that generated clients have one way to send it.)
#[derive(Multipart, Debug)]
#[oai(deny_unknown_fields)]
pub struct EditRequest {
    /// The photo: PNG, JPEG or WebP, up to 20 MiB.
    pub image: Upload,
    /// The edit instruction, 1 to 4000 characters (e.g. "make it black and white");
    /// AUTOMATIC1111's `<lora:name:weight>` tags merge installed LoRAs into the edit model.
    #[oai(validator(
        min_length = 1,
        max_length = 4000,
        pattern = r"^[^\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]*[^\s\u0000-\u001F\u007F-\u009F][^\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]*$"
    ))]
    pub prompt: String,
    /// *(added)* The area to change: an image of the photo's size (PNG, JPEG or WebP) whose
    /// transparent pixels mark it (OpenAI's convention) or, without transparency, its white
    /// pixels (diffusers' and AUTOMATIC1111's). Outside it the picture stays as it was. With a
    /// model on the edit tier the model repaints the area (an inpainting model, or masked
    /// img2img); with the built-in painter the edit applies inside it only. Refused (400
    /// `invalid_image`, the message naming the mask) when its size differs or it marks nothing.
    pub mask: Option<Upload>,
    /// *(added)* An http(s) URL to POST the finished job to, as for `/v1/generate`.
    #[oai(validator(max_length = 2048))]
    pub webhook_url: Option<String>,
}

/// The edit body as parsed: every part optional, so each missing one gets its own error code.
pub struct EditBody(pub EditForm);

impl poem_openapi::payload::Payload for EditBody {
    const CONTENT_TYPE: &'static str =
        <EditRequest as poem_openapi::payload::Payload>::CONTENT_TYPE;

    fn check_content_type(content_type: &str) -> bool {
        <EditForm as poem_openapi::payload::Payload>::check_content_type(content_type)
    }

    fn schema_ref() -> poem_openapi::registry::MetaSchemaRef {
        <EditRequest as poem_openapi::payload::Payload>::schema_ref()
    }

    fn register(registry: &mut poem_openapi::registry::Registry) {
        <EditRequest as poem_openapi::payload::Payload>::register(registry);
    }
}

impl poem_openapi::payload::ParsePayload for EditBody {
    const IS_REQUIRED: bool = true;

    async fn from_request(req: &poem::Request, body: &mut poem::RequestBody) -> poem::Result<Self> {
        <EditForm as poem_openapi::payload::ParsePayload>::from_request(req, body)
            .await
            .map(EditBody)
    }
}

use poem_openapi::payload::Payload as _;
poem_openapi::impl_apirequest_for_payload!(EditBody,);

/// Multipart parts of an edit as received.
#[derive(Multipart, Debug)]
pub struct EditForm {
    /// The photo: PNG, JPEG or WebP, up to 20 MiB (alternatively under `photo` or `file`).
    pub image: Option<Upload>,
    /// Alternative name of `image`.
    pub photo: Option<Upload>,
    /// Alternative name of `image`.
    pub file: Option<Upload>,
    /// The edit instruction, 1 to 4000 characters (e.g. "make it black and white");
    /// AUTOMATIC1111's `<lora:name:weight>` tags merge installed LoRAs into the edit model.
    pub prompt: Option<String>,
    /// The area to change.
    pub mask: Option<Upload>,
    /// Where to announce the job's end.
    pub webhook_url: Option<String>,
}

/// Returned when a job is accepted.
#[derive(Object, Debug)]
pub struct JobCreated {
    /// Always `true`.
    pub ok: bool,
    /// `job_` + 32 hex digits.
    pub job_id: String,
    /// Always `queued`.
    pub status: String,
    /// Credits the job costs (taken when it starts, returned if it fails).
    pub cost: u32,
    /// Absolute URL of the job; poll it with `?wait=1..90`.
    pub poll_url: String,
}

#[derive(ApiResponse)]
pub enum CreatedResponse {
    /// The job is queued.
    #[oai(status = 202)]
    Accepted(Json<JobCreated>),
}

pub struct ImagesApi;

#[OpenApi(tag = "ApiTags::Images")]
impl ImagesApi {
    /// Generate an image from a prompt
    ///
    /// Creates a queued job and returns at once with 202. Credits (and one slot of the daily
    /// photo limit) are taken when the job starts and returned if it fails. A user has at most one
    /// active job (409 `job_busy`); a balance below the price gives 402 `insufficient_credits`.
    /// An app's access token needs the `images:generate` scope.
    #[oai(path = "/v1/generate", method = "post", operation_id = "generate")]
    async fn generate(
        &self,
        auth: GenerateAuth,
        state: poem::web::Data<&AppState>,
        body: JsonBody<GenerateInput>,
    ) -> Result<CreatedResponse, Errors<GenerateErrors>> {
        let job = service::create_generate(
            &state,
            auth.0.user.id,
            auth.0.client().map(str::to_string),
            body.0.0,
        )
        .await?;
        Ok(accepted(&state, job))
    }

    /// Edit a photo sent as the request body
    ///
    /// The same job as `POST /v1/edit` for clients that do not send multipart forms (the Rust
    /// clients progenitor generates cannot) or would rather `curl --data-binary @photo.jpg`: the
    /// body is the photo itself (PNG, JPEG or WebP, recognised by its content whatever the
    /// `Content-Type`), the instruction is the `prompt` query parameter.
    /// An app's access token needs the `images:generate` scope.
    #[oai(path = "/v1/edit/raw", method = "post", operation_id = "edit_raw")]
    async fn edit_raw(
        &self,
        auth: GenerateAuth,
        state: poem::web::Data<&AppState>,
        /// The edit instruction, 1 to 4000 characters (e.g. "make it black and white");
        /// AUTOMATIC1111's `<lora:name:weight>` tags merge installed LoRAs into the edit model.
        prompt: Query<RequiredText<MAX_PROMPT_CHARS>>,
        /// *(added)* An http(s) URL to POST the finished job to, as for `/v1/generate`.
        #[oai(validator(max_length = 2048))]
        webhook_url: Query<Option<String>>,
        photo: Binary<Vec<u8>>,
    ) -> Result<CreatedResponse, Errors<RawEditErrors>> {
        let prompt = edit_prompt(prompt.0.0.as_deref())?;
        let webhook_url = service::check_webhook(&state, webhook_url.0.as_deref())?;
        if photo.0.is_empty() {
            return Err(ApiError::new(
                codes::INVALID_IMAGE,
                "no photo: send the photo's bytes as the request body",
            )
            .into());
        }
        check_upload_size(photo.0.len())?;
        let user = &auth.0.user;
        service::precheck_edit(&state, user)?;
        let client = auth.0.client().map(str::to_string);
        let job = service::create_edit(&state, user.id, client, prompt, photo.0, None, webhook_url)
            .await?;
        Ok(accepted(&state, job))
    }
}

/// `POST /v1/edit`, the one operation with a multipart body, on its own so that the document
/// can also be published without it (`openapi.json?multipart=false`) for client generators
/// that cannot send forms.
pub struct EditFormApi;

#[OpenApi(tag = "ApiTags::Images")]
impl EditFormApi {
    /// Edit a photo with an instruction
    ///
    /// Multipart form with the photo under `image` (or `photo`, `file`) and the instruction under
    /// `prompt`, and optionally a `mask` marking the area to change. Costs the edit price (2
    /// credits by default); does not use the daily photo limit. The uploads are checked (PNG,
    /// JPEG or WebP by content, pixel limits, the mask the photo's size) before the job is
    /// created and stored before the 202 is sent.
    /// An app's access token needs the `images:generate` scope.
    #[oai(path = "/v1/edit", method = "post", operation_id = "edit")]
    async fn edit(
        &self,
        auth: GenerateAuth,
        state: poem::web::Data<&AppState>,
        form: EditBody,
    ) -> Result<CreatedResponse, Errors<EditErrors>> {
        let form = form.0;
        let prompt = edit_prompt(form.prompt.as_deref())?;
        let webhook_url = service::check_webhook(&state, form.webhook_url.as_deref())?;
        if [&form.image, &form.photo, &form.file]
            .iter()
            .any(|u| u.as_ref().is_some_and(|u| u.size() == 0))
        {
            return Err(ApiError::new(codes::INVALID_IMAGE, "an image part is empty").into());
        }
        let upload = form
            .image
            .or(form.photo)
            .or(form.file)
            .ok_or_else(no_photo)?;
        check_upload_size(upload.size())?;
        if let Some(m) = &form.mask {
            if m.size() == 0 {
                return Err(ApiError::new(codes::INVALID_IMAGE, "the mask part is empty").into());
            }
            check_upload_size(m.size())?;
        }
        let user = &auth.0.user;
        // Cheap checks first, so a busy or broke user does not make us decode 20 MB.
        service::precheck_edit(&state, user)?;
        let bytes = upload.into_vec().await.map_err(ApiError::internal)?;
        let client = auth.0.client().map(str::to_string);
        let mask = match form.mask {
            Some(m) => Some(m.into_vec().await.map_err(ApiError::internal)?),
            None => None,
        };
        let job =
            service::create_edit(&state, user.id, client, prompt, bytes, mask, webhook_url).await?;
        Ok(accepted(&state, job))
    }
}

/// The edit instruction, required and checked like a prompt.
pub(crate) fn edit_prompt(prompt: Option<&str>) -> Result<String, ApiError> {
    match prompt {
        Some(p) => check_prompt(p).map_err(failure),
        None => Err(ApiError::new(
            codes::INVALID_PROMPT,
            "`prompt` (the edit instruction) is required",
        )),
    }
}

/// The error for an edit without a photo.
pub(crate) fn no_photo() -> ApiError {
    ApiError::new(
        codes::INVALID_IMAGE,
        "no photo: attach it as a multipart file field named `image` (or `photo`, `file`)",
    )
}

/// Refuses a photo over [`MAX_IMAGE_BYTES`].
pub(crate) fn check_upload_size(size: usize) -> Result<(), ApiError> {
    if size > MAX_IMAGE_BYTES {
        return Err(ApiError::new(
            codes::IMAGE_TOO_LARGE,
            format!("the photo is {size} bytes; the limit is 20 MiB ({MAX_IMAGE_BYTES} bytes)"),
        ));
    }
    Ok(())
}

fn failure(f: ApiFailure) -> ApiError {
    ApiError::new(f.code, f.message)
}

fn accepted(state: &AppState, job: JobRecord) -> CreatedResponse {
    let id = job.job_id();
    CreatedResponse::Accepted(Json(JobCreated {
        ok: true,
        job_id: id.to_string(),
        status: job.status.as_str().to_string(),
        cost: job.cost,
        poll_url: format!("{}/api/pictor/v1/jobs/{id}", state.public_url),
    }))
}
