//! `GET /v1/jobs/{job_id}` (with `wait` as a true long-poll on the job's notifier), its cancel,
//! and `GET /v1/jobs`, the caller's history. The rules are in `jobs::service`.

use std::time::Duration;

use poem::IntoResponse;
use poem_openapi::param::{Path, Query};
use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::ApiTags;
use super::error::{ApiError, CancelErrors, Errors, GetJobErrors, ListErrors, codes};
use super::schema::Referenced;
use super::security::{ApiAuth, GenerateAuth};
use crate::app::serve::ParkSlot;
use crate::jobs::service::{self, Got, HISTORY_MAX, HistoryQuery, Snapshot, WaitFor};
use crate::state::AppState;
use crate::store::{JobId, JobKind, JobStatus};

/// A job's state (fields without a value are left out). `ok` is `false` exactly when `status` is
/// `failed`; `error_code` and `error` then name the cause (`insufficient_credits`,
/// `daily_limit`, `tokens_exhausted`, `generation_failed`, `edit_failed`, `source_missing`,
/// `cancelled`, `app_limit`).
#[derive(Object, Debug, Default)]
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
    /// *(added)* The noise source the job asked for (`torch-cpu`, `a1111-gpu`); absent when it
    /// left the choice to the model's configuration.
    pub noise: Option<String>,
    /// *(added)* The LoRAs merged for the picture (its prompt's `<lora:…>` tags, then
    /// `loras`); absent when none.
    pub loras: Option<Vec<JobLora>>,
    /// While `queued` and waiting for a render slot: 1-based place in the queue (1 = next).
    pub queue_position: Option<u32>,
    /// While `queued`: predicted seconds until the render starts, from recent render times of
    /// the jobs ahead (absent until the server has timed a render).
    pub eta_seconds: Option<f64>,
    /// While `running`: how far the render is, 0 to 1 (denoising steps for diffusion models).
    pub progress: Option<f64>,
    /// While unfinished: what a progress display shows (status, queue position, progress) as a
    /// short string; pass it as `since` with `wait_for=progress` to be answered as soon as it
    /// differs.
    pub state_token: Option<String>,
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
    /// *(added)* The job's `webhook_url` and how its delivery stands (absent without one, and in
    /// the webhook's own body).
    pub webhook: Option<Referenced<WebhookView>>,
    /// *(added)* What the built-in painter drew of the prompt's content words and what it could
    /// not draw (done jobs rendered by the built-in painter; absent for diffusion and remote
    /// backends, which draw every word their model knows).
    pub scene: Option<Referenced<SceneView>>,
    /// *(added)* The app (OAuth `client_id`) that made the job with the user's access token;
    /// absent for jobs made with the user's own API key or on Pictor's pages.
    pub client: Option<String>,
}

/// The content words of a prompt, sorted by whether the built-in painter drew them; for an
/// edit by the painter, what it did and what of the instruction it understood but could not do.
#[derive(Object, Debug)]
pub struct SceneView {
    /// Subjects, scene elements, clothes, poses and quoted text in the picture, by their English
    /// names (also for Russian prompts).
    pub drawn: Vec<String>,
    /// Content words the built-in painter has no drawing for: English names where it knows the
    /// word, otherwise as written. Install a diffusion model to draw these. For an edit: the
    /// parts it could not do, in the instruction's words ("next to girl": the dog was placed
    /// where there was room), which an edit model does.
    pub not_drawn: Vec<String>,
}

/// A job's notification.
/// A LoRA a job uses.
#[derive(Object, Debug)]
pub struct JobLora {
    /// The installed LoRA's name.
    pub name: String,
    /// Its weight on the UNet.
    pub weight: f64,
    /// Its weight on the text encoders (AUTOMATIC1111's `te`; the same unless a tag gave two).
    pub text_weight: f64,
}

#[derive(Object, Debug)]
#[oai(skip_serializing_if_is_none)]
pub struct WebhookView {
    pub url: String,
    /// `pending` (the job is unfinished, or delivery is being retried), `delivered` (a 2xx
    /// answer came back) or `failed` (every attempt failed; no more are made).
    pub status: String,
    /// Delivery attempts so far.
    pub attempts: u32,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// When it was delivered (Unix ms).
    pub delivered_at: Option<u64>,
    /// When the next attempt is due (Unix ms).
    pub next_attempt_at: Option<u64>,
}

pub fn job_view(state: &AppState, snap: &Snapshot) -> JobView {
    let job = &snap.job;
    let state_token = (!job.status.is_terminal()).then(|| snap.state_token());
    let live = snap.live.unwrap_or_default();
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
        balance: snap.balance,
        model: job.model.id().to_string(),
        ratio: job.ratio.clone(),
        prompt: job.prompt.clone(),
        enhanced_prompt: job.enhanced_prompt.clone(),
        seed: job.seed,
        noise: job.noise.map(|n| n.as_str().to_owned()),
        loras: (!job.loras.is_empty()).then(|| {
            job.loras
                .iter()
                .map(|l| {
                    // The float32 weight as it was written (0.7, not 0.699999988).
                    let shown = |w: f32| (f64::from(w) * 1e6).round() / 1e6;
                    JobLora {
                        name: l.name.clone(),
                        weight: shown(l.unet),
                        text_weight: shown(l.text),
                    }
                })
                .collect()
        }),
        queue_position: live.queue_position,
        eta_seconds: live.eta_seconds.map(|s| (s * 10.0).round() / 10.0),
        progress: live.progress,
        state_token,
        width: job.width,
        height: job.height,
        error_code: job.error_code.map(|c| c.as_str().to_string()),
        error: job.error.clone(),
        created_at: job.created_at,
        started_at: job.started_at,
        finished_at: job.finished_at,
        webhook: job.webhook.as_ref().map(|w| {
            Referenced(WebhookView {
                url: w.url.clone(),
                status: w.status.as_str().to_owned(),
                attempts: w.attempts,
                last_error: w.last_error.clone(),
                delivered_at: w.delivered_at,
                next_attempt_at: w.next_attempt_at,
            })
        }),
        scene: job.scene.as_ref().map(|s| {
            Referenced(SceneView {
                drawn: s.drawn.clone(),
                not_drawn: s.not_drawn.clone(),
            })
        }),
        client: job.client.clone(),
    }
}

/// What `wait` waits for.
#[derive(poem_openapi::Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum WaitForParam {
    /// Until the job is done or failed (the default).
    Finish,
    /// Until anything a progress display shows changes: `progress`, `queue_position`,
    /// `status`.
    Progress,
}

/// Job statuses (the `status` filter of the history).
#[derive(poem_openapi::Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum StatusParam {
    Queued,
    Running,
    Done,
    Failed,
}

/// Job kinds (the `kind` filter of the history).
#[derive(poem_openapi::Enum, Debug, Clone, Copy, PartialEq, Eq)]
#[oai(rename_all = "snake_case")]
pub enum KindParam {
    Generate,
    Edit,
}

/// One page of the history.
#[derive(Object, Debug)]
#[oai(skip_serializing_if_is_none)]
pub struct JobList {
    /// Always `true`.
    pub ok: bool,
    /// The caller's jobs, newest first.
    pub jobs: Vec<JobView>,
    /// Pass as `before` to get the next (older) page; absent on the last page.
    pub next_before: Option<String>,
}

pub struct JobsApi;

#[OpenApi(tag = "ApiTags::Jobs")]
impl JobsApi {
    /// Get a job's status
    ///
    /// With `wait` (1 to 90 seconds) the request is held until the job is done or failed, or the
    /// wait elapses, and then returns the current status. With `wait_for=progress` it also
    /// returns as soon as the job's progress, queue position or status differs from the
    /// `state_token` given as `since` (without `since`: at the next change), so a progress bar
    /// is one request per change and misses none. A finished job answers at once. Another
    /// user's job is `job_not_found`.
    /// An app's access token needs the `images:read` scope.
    #[oai(path = "/v1/jobs/:job_id", method = "get", operation_id = "get_job")]
    // The operation's parameters, each its own OpenAPI parameter.
    #[allow(clippy::too_many_arguments)]
    async fn get_job(
        &self,
        auth: ApiAuth,
        state: poem::web::Data<&AppState>,
        req: &poem::Request,
        /// The job id from the create response.
        job_id: Path<String>,
        /// Seconds to wait for the job to finish, 1 to 90.
        #[oai(validator(minimum(value = "1"), maximum(value = "90")))]
        wait: Query<Option<u32>>,
        /// What ends the wait early: `finish` (default) or `progress`.
        wait_for: Query<Option<WaitForParam>>,
        /// With `wait_for=progress`: the `state_token` of the last answer; the request returns
        /// as soon as the job's state differs from it (an empty value: at once).
        #[oai(validator(max_length = 64))]
        since: Query<Option<String>>,
    ) -> Result<Json<JobView>, Errors<GetJobErrors>> {
        let what = match wait_for.0 {
            Some(WaitForParam::Progress) => WaitFor::Change { since: since.0 },
            _ => WaitFor::Finish,
        };
        let wait = wait.0.map(|s| (Duration::from_secs(s.into()), what));
        let snap = match service::get_or_wait(&state, auth.0.user.id, &job_id.0, wait)? {
            Got::Now(snap) => snap,
            Got::Wait(waiter) => match req.extensions().get::<ParkSlot>() {
                // Parked: the request's layers are let go while the job is waited for; the
                // server sends the parked answer with this placeholder's headers.
                Some(slot) => {
                    let waiter = waiter.until(slot.stopping());
                    let state = AppState::clone(&state);
                    slot.park(Box::pin(async move {
                        match waiter.finish().await {
                            Ok(snap) => Json(job_view(&state, &snap)).into_response(),
                            Err(e) => Errors::<GetJobErrors>::from(e).into_response(),
                        }
                    }));
                    return Ok(Json(JobView::default()));
                }
                None => waiter.finish().await?,
            },
        };
        Ok(Json(job_view(&state, &snap)))
    }

    /// Cancel a job
    ///
    /// A queued job fails at once with `error_code: "cancelled"` and nothing charged. A running
    /// job fails the same way, its credits and daily slot are returned, and its render stops at
    /// the renderer's next checkpoint (between denoising steps). Cancelling a cancelled job
    /// again answers the same (idempotent); a job that already ended otherwise is 409
    /// `job_finished`. The job stays readable (a cancel is not a deletion, so there is no
    /// `DELETE`).
    /// An app's access token needs the `images:generate` scope.
    #[oai(
        path = "/v1/jobs/:job_id/cancel",
        method = "post",
        operation_id = "cancel_job"
    )]
    async fn cancel_job(
        &self,
        auth: GenerateAuth,
        state: poem::web::Data<&AppState>,
        /// The job id from the create response.
        job_id: Path<String>,
    ) -> Result<Json<JobView>, Errors<CancelErrors>> {
        let snap = service::cancel(&state, auth.0.user.id, &job_id.0).await?;
        Ok(Json(job_view(&state, &snap)))
    }

    /// List your jobs
    ///
    /// The caller's jobs, newest first, optionally only those with a `status` and/or `kind`.
    /// Pages hold `limit` jobs (1 to 100, default 20); pass the page's `next_before` as
    /// `before` to get the next, older page (absent on the last page).
    /// An app's access token needs the `images:read` scope.
    #[oai(path = "/v1/jobs", method = "get", operation_id = "list_jobs")]
    async fn list_jobs(
        &self,
        auth: ApiAuth,
        state: poem::web::Data<&AppState>,
        /// Only jobs with this status.
        status: Query<Option<StatusParam>>,
        /// Only jobs of this kind.
        kind: Query<Option<KindParam>>,
        /// Only jobs older than this job id (`next_before` of the previous page); empty means
        /// from the newest.
        #[oai(validator(pattern = r"^(job_[0-9a-fA-F]{32})?$"))]
        before: Query<Option<String>>,
        /// Jobs per page, 1 to 100 (default 20).
        #[oai(validator(minimum(value = "1"), maximum(value = "100")))]
        limit: Query<Option<u32>>,
    ) -> Result<Json<JobList>, Errors<ListErrors>> {
        let before = match before.0.as_deref().filter(|b| !b.is_empty()) {
            None => None,
            Some(b) => Some(JobId::parse(b).ok_or_else(|| {
                ApiError::new(
                    codes::INVALID_REQUEST,
                    "`before` must be a job id (`next_before` of the previous page)",
                )
            })?),
        };
        let q = HistoryQuery {
            status: status.0.map(|s| match s {
                StatusParam::Queued => JobStatus::Queued,
                StatusParam::Running => JobStatus::Running,
                StatusParam::Done => JobStatus::Done,
                StatusParam::Failed => JobStatus::Failed,
            }),
            kind: kind.0.map(|k| match k {
                KindParam::Generate => JobKind::Generate,
                KindParam::Edit => JobKind::Edit,
            }),
            before,
            limit: limit.0.map_or(20, |l| l as usize).min(HISTORY_MAX),
        };
        let (jobs, next) = service::history(&state, auth.0.user.id, q).await?;
        Ok(Json(JobList {
            ok: true,
            jobs: jobs.iter().map(|s| job_view(&state, s)).collect(),
            next_before: next.map(|id| id.to_string()),
        }))
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

/// The `wait_for` parameter: `finish` (default) or `progress` (with `since`).
fn parse_wait_for(wait_for: Option<&str>, since: Option<String>) -> Result<WaitFor, ApiError> {
    match wait_for.map(str::trim) {
        None | Some("" | "finish") => Ok(WaitFor::Finish),
        Some("progress") => Ok(WaitFor::Change { since }),
        Some(_) => Err(ApiError::new(
            codes::INVALID_REQUEST,
            "`wait_for` must be `finish` or `progress`",
        )),
    }
}

/// A user's job by its id; with `wait` (1 to 90 seconds) held until it finishes, or changes with
/// `wait_for=progress` (from the state `since`; shared by the API and the playground). Another user's job is
/// `job_not_found`.
pub(crate) async fn job_for_user(
    state: &AppState,
    user_id: u64,
    job_id: &str,
    wait: Option<&str>,
    wait_for: Option<&str>,
    since: Option<String>,
) -> Result<JobView, ApiError> {
    let what = parse_wait_for(wait_for, since)?;
    let wait = parse_wait(wait)?.map(|d| (d, what));
    let snap = service::get(state, user_id, job_id, wait).await?;
    Ok(job_view(state, &snap))
}
