//! `GET /v1/jobs/{job_id}`, with `wait` as a true long-poll on the job's notifier.

use std::time::Duration;

use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::ApiTags;
use super::error::{ApiError, codes};
use super::security::ApiAuth;
use crate::state::AppState;
use crate::store::{JobId, JobRecord, JobStatus};

/// A job's state (fields without a value are left out). `ok` is `false` exactly when `status` is
/// `failed`; `error_code` and `error`
/// then name the cause (`insufficient_credits`, `daily_limit`, `tokens_exhausted`,
/// `generation_failed`, `edit_failed`, `source_missing`).
#[derive(Object, Debug)]
#[oai(skip_serializing_if_is_none)]
pub struct JobView {
    pub ok: bool,
    /// `job_` + 32 hex digits.
    pub job_id: String,
    /// `queued`, `running`, `done` or `failed`.
    pub status: String,
    /// `generate` or `edit`.
    pub kind: String,
    /// Direct link to the PNG (no key needed); present when `status` is `done`.
    pub photo_url: Option<String>,
    /// Credits the job costs.
    pub cost: u32,
    /// The user's credit balance now.
    pub balance: i64,
    /// Model id (`fast`, `artist`, `0.2plus`), or `edit`.
    pub model: String,
    /// Requested ratio (generation) or source size (edit).
    pub ratio: String,
    /// The prompt or edit instruction as sent.
    pub prompt: String,
    /// The prompt actually rendered when enhancement changed it.
    pub enhanced_prompt: Option<String>,
    /// Seed of the render; the same prompt, model, ratio and seed give the same picture.
    pub seed: u64,
    /// When the picture was deleted by the server's retention policy (Unix ms); `photo_url` is then absent.
    pub photo_deleted_at: Option<u64>,
    /// Picture width in pixels (when done).
    pub width: Option<u32>,
    /// Picture height in pixels (when done).
    pub height: Option<u32>,
    /// Cause of a failure.
    pub error_code: Option<String>,
    /// Message of a failure.
    pub error: Option<String>,
    /// Unix time in milliseconds.
    pub created_at: u64,
    pub started_at: Option<u64>,
    pub finished_at: Option<u64>,
}

pub fn job_view(state: &AppState, job: &JobRecord, balance: i64) -> JobView {
    JobView {
        ok: job.status != JobStatus::Failed,
        job_id: job.job_id().to_string(),
        status: job.status.as_str().to_string(),
        kind: job.kind.as_str().to_string(),
        photo_deleted_at: job.photo_deleted_at,
        photo_url: (job.status == JobStatus::Done && job.photo_deleted_at.is_none())
            .then(|| {
                job.photo_token
                    .as_ref()
                    .map(|t| format!("{}/files/{t}.png", state.public_url))
            })
            .flatten(),
        cost: job.cost,
        balance,
        model: job.model.clone(),
        ratio: job.ratio.clone(),
        prompt: job.prompt.clone(),
        enhanced_prompt: job.enhanced_prompt.clone(),
        seed: job.seed,
        width: job.width,
        height: job.height,
        error_code: job.error_code.clone(),
        error: job.error.clone(),
        created_at: job.created_at,
        started_at: job.started_at,
        finished_at: job.finished_at,
    }
}

pub struct JobsApi;

#[OpenApi(tag = "ApiTags::Jobs")]
impl JobsApi {
    /// Get a job's status
    ///
    /// With `wait` (1 to 90 seconds) the request is held until the job is done or failed, or the
    /// wait elapses, and then returns the current status. A finished job answers at once.
    /// Another user's job is `job_not_found`.
    #[oai(path = "/v1/jobs/:job_id", method = "get", operation_id = "get_job")]
    async fn get_job(
        &self,
        auth: ApiAuth,
        state: poem::web::Data<&AppState>,
        /// The job id from the create response.
        job_id: Path<String>,
        /// Seconds to wait for the job to finish, 1 to 90.
        #[oai(validator(minimum(value = "1"), maximum(value = "90")))]
        wait: Query<Option<u32>>,
    ) -> Result<Json<JobView>, ApiError> {
        let wait = wait.0.map(|w| w.to_string());
        let view = job_for_user(&state, auth.0.user.id, &job_id.0, wait.as_deref()).await?;
        Ok(Json(view))
    }
}

/// The `wait` parameter: absent, or 1 to 90 seconds.
fn parse_wait(wait: Option<&str>) -> Result<Option<Duration>, ApiError> {
    match wait {
        None => Ok(None),
        Some(w) => match w.trim().parse::<u64>() {
            Ok(s @ 1..=90) => Ok(Some(Duration::from_secs(s))),
            _ => Err(ApiError::new(
                codes::INVALID_REQUEST,
                "`wait` must be an integer number of seconds from 1 to 90",
            )),
        },
    }
}

/// A user's job by its id; with `wait` (1 to 90 seconds) held until it finishes (shared by the
/// API and the playground). Another user's job is `job_not_found`.
pub(crate) async fn job_for_user(
    state: &AppState,
    user_id: u64,
    job_id: &str,
    wait: Option<&str>,
) -> Result<JobView, ApiError> {
    let not_found = || ApiError::new(codes::JOB_NOT_FOUND, "no such job");
    let id = JobId::parse(job_id).ok_or_else(not_found)?;
    let wait = parse_wait(wait)?;
    // Subscribe before reading, so a finish between the read and the wait is not missed.
    let mut sub = state.jobs.watchers().subscribe(id);
    let mut job = state
        .store
        .job(id)?
        .filter(|j| j.user_id == user_id)
        .ok_or_else(not_found)?;
    if let Some(wait) = wait
        && !job.status.is_terminal()
        && tokio::time::timeout(wait, sub.finished()).await.is_ok()
    {
        job = state.store.job(id)?.ok_or_else(not_found)?;
    }
    drop(sub);
    let balance = state.store.user(user_id)?.map(|u| u.balance).unwrap_or(0);
    Ok(job_view(state, &job, balance))
}
