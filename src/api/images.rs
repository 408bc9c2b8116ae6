//! `POST /v1/generate` and `POST /v1/edit`: validate, create the queued job, hand it to the engine.

use poem_openapi::payload::Json;
use poem_openapi::types::multipart::Upload;
use poem_openapi::{ApiResponse, Multipart, Object, OpenApi};
use rand::RngExt;
use serde_json::{Map, Value};

use super::body::{FromJsonBody, JsonBody};
use super::error::{ApiError, ApiFailure, codes};
use super::security::ApiAuth;
use super::{ApiTags, MAX_IMAGE_BYTES, MAX_PROMPT_CHARS};
use crate::jobs::write_durably;
use crate::render::{self, DecodeLimits, Model, Ratio};
use crate::state::AppState;
use crate::store::{CreateJobError, JobId, JobKind, JobRecord, NewJob};

/// Text-to-image request.
#[derive(Object, Debug)]
pub struct GenerateRequest {
    /// What to draw, 1 to 4000 characters.
    #[oai(validator(min_length = 1, max_length = 4000))]
    pub prompt: String,
    /// `fast` (default), `artist` or `0.2plus`; the aliases `standard`, `std`, `pro`, `premium`,
    /// `prem` are accepted (case-insensitive).
    pub model: Option<String>,
    /// `1:1` (default), `16:9`, `9:16`, `3:2`, `2:3`, `4:3`, `3:4` or `auto` (picked from the prompt).
    pub ratio: Option<String>,
    /// Prompt improvement on/off (default `true`).
    pub enhance: Option<bool>,
    /// Seed for a reproducible picture, 0 to 4294967295; random when absent or `-1`.
    pub seed: Option<i64>,
}

/// Validated generate request.
pub struct GenerateInput {
    prompt: String,
    model: Model,
    ratio: Ratio,
    enhance: bool,
    seed: u64,
}

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
        Ok(GenerateInput {
            prompt,
            model,
            ratio,
            enhance,
            seed,
        })
    }
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

fn random_seed() -> u64 {
    rand::rng().random::<u32>() as u64
}

/// Multipart body of an edit.
#[derive(Multipart, Debug)]
pub struct EditForm {
    /// The photo: PNG, JPEG or WebP, up to 20 MiB (alternatively under `photo` or `file`).
    pub image: Option<Upload>,
    /// Alternative name of `image`.
    pub photo: Option<Upload>,
    /// Alternative name of `image`.
    pub file: Option<Upload>,
    /// The edit instruction, 1 to 4000 characters (e.g. "make it black and white").
    pub prompt: Option<String>,
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
    #[oai(path = "/v1/generate", method = "post", operation_id = "generate")]
    async fn generate(
        &self,
        auth: ApiAuth,
        state: poem::web::Data<&AppState>,
        body: JsonBody<GenerateInput>,
    ) -> Result<CreatedResponse, ApiError> {
        let input = body.0;
        let cost = state.store.settings()?.price(input.model);
        let ratio = input.ratio;
        let enhanced_prompt = if input.enhance {
            let (prompt, seed) = (input.prompt.clone(), input.seed);
            state
                .decode_pool
                .spawn(move || render::enhance::enhance(&prompt, seed))
                .await
                .map_err(ApiError::internal)?
        } else {
            None
        };
        let new = NewJob {
            id: JobId::new(),
            user_id: auth.0.user.id,
            kind: JobKind::Generate,
            model: input.model.id().to_string(),
            ratio: ratio.as_str().to_string(),
            prompt: input.prompt,
            enhance: input.enhance,
            enhanced_prompt,
            seed: input.seed,
            cost,
        };
        let job = create(&state, new).await?;
        Ok(accepted(&state, job))
    }

    /// Edit a photo with an instruction
    ///
    /// Multipart form with the photo under `image` (or `photo`, `file`) and the instruction under
    /// `prompt`. Costs the edit price (2 credits by default); does not use the daily photo limit.
    /// The upload is checked (PNG, JPEG or WebP by content, pixel limits) before the job is
    /// created and stored before the 202 is sent.
    #[oai(path = "/v1/edit", method = "post", operation_id = "edit")]
    async fn edit(
        &self,
        auth: ApiAuth,
        state: poem::web::Data<&AppState>,
        form: EditForm,
    ) -> Result<CreatedResponse, ApiError> {
        let prompt = match &form.prompt {
            Some(p) => check_prompt(p).map_err(failure)?,
            None => {
                return Err(ApiError::new(
                    codes::INVALID_PROMPT,
                    "`prompt` (the edit instruction) is required",
                ));
            }
        };
        let upload = form.image.or(form.photo).or(form.file).ok_or_else(|| {
            ApiError::new(
                codes::INVALID_IMAGE,
                "no photo: attach it as a multipart file field named `image` (or `photo`, `file`)",
            )
        })?;
        if upload.size() > MAX_IMAGE_BYTES {
            return Err(ApiError::new(
                codes::IMAGE_TOO_LARGE,
                format!(
                    "the photo is {} bytes; the limit is 20 MiB ({MAX_IMAGE_BYTES} bytes)",
                    upload.size()
                ),
            ));
        }
        let user = &auth.0.user;
        let cost = state.store.settings()?.price_edit;
        // Cheap checks first, so a busy or broke user does not make us decode 20 MB.
        if let Some(active) = state.store.active_job(user.id)? {
            return Err(CreateJobError::Busy(active).into());
        }
        if user.balance < cost as i64 {
            return Err(CreateJobError::InsufficientCredits {
                cost,
                balance: user.balance,
            }
            .into());
        }
        let bytes = upload.into_vec().await.map_err(ApiError::internal)?;
        let (bytes, checked) = state
            .decode_pool
            .spawn(move || {
                let checked = render::decode::inspect(&bytes, &DecodeLimits::default());
                (bytes, checked)
            })
            .await
            .map_err(ApiError::internal)?;
        let info = checked.map_err(|e| ApiError::new(codes::INVALID_IMAGE, e.to_string()))?;
        tracing::debug!(
            format = info.format,
            width = info.width,
            height = info.height,
            "edit upload accepted"
        );

        let id = JobId::new();
        let dir = state.config.sources_dir();
        let name = crate::jobs::source_path(&dir, id);
        let file_name = name
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        tokio::task::spawn_blocking(move || write_durably(&dir, &file_name, &bytes))
            .await
            .map_err(ApiError::internal)?
            .map_err(ApiError::internal)?;
        let new = NewJob {
            id,
            user_id: user.id,
            kind: JobKind::Edit,
            model: "edit".into(),
            ratio: format!("{}x{}", info.width, info.height),
            prompt,
            enhance: false,
            enhanced_prompt: None,
            seed: random_seed(),
            cost,
        };
        match create(&state, new).await {
            Ok(job) => Ok(accepted(&state, job)),
            Err(e) => {
                let _ = tokio::fs::remove_file(&name).await;
                Err(e)
            }
        }
    }
}

fn failure(f: ApiFailure) -> ApiError {
    ApiError::new(f.code, f.message)
}

async fn create(state: &AppState, new: NewJob) -> Result<JobRecord, ApiError> {
    let now = state.clock.now();
    let job = state.store.call(move |s| s.create_job(new, now)).await?;
    state.metrics.job_created(&job.model);
    state.jobs.submit(job.clone());
    Ok(job)
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

impl From<CreateJobError> for ApiError {
    fn from(e: CreateJobError) -> Self {
        match e {
            CreateJobError::Busy(id) => ApiError::new(
                codes::JOB_BUSY,
                format!("you already have an active job ({id}); wait for it to finish"),
            ),
            e @ CreateJobError::InsufficientCredits { .. } => {
                ApiError::new(codes::INSUFFICIENT_CREDITS, e.to_string())
            }
            CreateJobError::Banned => ApiError::new(codes::BANNED, "the account is blocked"),
            CreateJobError::NoUser => {
                ApiError::new(codes::UNAUTHORIZED, "the account no longer exists")
            }
            CreateJobError::Store(e) => ApiError::internal(e),
        }
    }
}
