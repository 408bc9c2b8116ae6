//! The job service: everything a client does with jobs (create a generation or an edit, read one
//! with a long-poll, cancel it, list the history), called by the image API and the playground
//! alike. Handlers parse HTTP and turn [`JobError`] into their error bodies; the rules live here.

use std::time::Duration;

use rand::RngExt;

use super::LiveStatus;
use crate::catalog::{Model, Ratio};
use crate::render::{self, DecodeLimits};
use crate::state::AppState;
use crate::store::{
    CancelOutcome, CreateJobError, JobId, JobKind, JobModel, JobRecord, JobStatus, NewJob,
    StoreError, UserRecord,
};

/// A validated generation request.
#[derive(Debug, Clone)]
pub struct Generate {
    pub prompt: String,
    pub model: Model,
    pub ratio: Ratio,
    pub enhance: bool,
    pub seed: u64,
    /// The seed's noise source (`None`: the model's configured one).
    pub noise: Option<crate::catalog::NoiseKind>,
    /// Where to announce the job's end (checked by [`check_webhook`] when the job is created).
    pub webhook_url: Option<String>,
    /// LoRAs asked for besides the prompt's `<lora:…>` tags: (installed name, weight).
    pub loras: Vec<(String, f32)>,
}

/// The most LoRAs one job merges.
pub const MAX_LORAS: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error(transparent)]
    Create(#[from] CreateJobError),
    /// The photo of an edit is not a picture Pictor takes.
    #[error("{0}")]
    InvalidImage(String),
    /// A `webhook_url` Pictor will not call.
    #[error("{0}")]
    InvalidWebhook(String),
    /// A LoRA the job cannot have (unknown, for another model family, a tag that does not
    /// read, or a model that takes none).
    #[error("{0}")]
    InvalidLora(String),
    /// No such job, or another user's.
    #[error("no such job")]
    NotFound,
    /// Cancel of a job that already ended (done, or failed for another reason).
    #[error("the job has already finished ({})", .0.status.as_str())]
    Finished(Box<JobRecord>),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

fn internal(e: impl std::fmt::Display) -> JobError {
    JobError::Internal(e.to_string())
}

/// A job as its owner sees it: the stored record, the balance now, and (while unfinished) its
/// queue position, ETA and progress.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub job: JobRecord,
    pub balance: i64,
    pub live: Option<LiveStatus>,
}

impl Snapshot {
    /// What a progress display shows, as a short string that changes whenever it does:
    /// `<status>.<queue position>.<progress in thousandths>`.
    pub fn state_token(&self) -> String {
        let live = self.live.unwrap_or_default();
        format!(
            "{}.{}.{}",
            self.job.status.as_str(),
            live.queue_position.unwrap_or(0),
            live.progress.map_or(0, |p| (p * 1000.0).round() as u32)
        )
    }
}

/// Checks a job's `webhook_url` against the SSRF guard (see `jobs::webhooks::check_url`).
pub fn check_webhook(state: &AppState, url: Option<&str>) -> Result<Option<String>, JobError> {
    url.map(|u| {
        super::webhooks::check_url(u, state.config.webhooks.allow_private)
            .map(|_| u.to_owned())
            .map_err(JobError::InvalidWebhook)
    })
    .transpose()
}

pub fn random_seed() -> u64 {
    rand::rng().random::<u32>() as u64
}

/// Creates a queued generation: the prompt is enhanced (when asked) on the decode pool, and the
/// job is created (price read and balance checked in that transaction) and submitted.
pub async fn create_generate(
    state: &AppState,
    user_id: u64,
    client: Option<String>,
    input: Generate,
) -> Result<JobRecord, JobError> {
    let webhook_url = check_webhook(state, input.webhook_url.as_deref())?;
    let (text, loras) = resolve_loras(
        state,
        JobModel::Generate(input.model),
        &input.prompt,
        &input.loras,
    )?;
    let enhanced_prompt = if input.enhance {
        // The enhancer sees the words, not the `<lora:…>` tags (already taken out above).
        let (prompt, seed) = (text, input.seed);
        state
            .decode_pool
            .spawn(move || render::enhance::enhance(&prompt, seed))
            .await
            .map_err(internal)?
    } else {
        None
    };
    let new = NewJob {
        id: JobId::new(),
        user_id,
        model: JobModel::Generate(input.model),
        ratio: input.ratio.as_str().to_string(),
        prompt: input.prompt,
        enhance: input.enhance,
        enhanced_prompt,
        seed: input.seed,
        noise: input.noise,
        loras,
        webhook_url,
        client,
        masked: false,
    };
    create(state, new).await
}

/// The LoRAs a generation asks for — its prompt's `<lora:name:weight>` tags, then `requested`
/// — as the installed files the model drawing `model` merges, with the prompt's text without
/// the tags. Each must be an installed LoRA of that model's architecture, and the model a
/// diffusion model (the built-in painter takes none).
pub fn resolve_loras(
    state: &AppState,
    model: JobModel,
    prompt: &str,
    requested: &[(String, f32)],
) -> Result<(String, Vec<render::LoraUse>), JobError> {
    let (text, tags) = render::lora_tags::parse(prompt).map_err(JobError::InvalidLora)?;
    let mut asked: Vec<(String, f32, f32)> =
        tags.into_iter().map(|t| (t.name, t.text, t.unet)).collect();
    asked.extend(requested.iter().map(|(n, w)| (n.clone(), *w, *w)));
    if asked.is_empty() {
        return Ok((text, Vec::new()));
    }
    if asked.len() > MAX_LORAS {
        return Err(JobError::InvalidLora(format!(
            "{} LoRAs asked for; at most {MAX_LORAS} per picture",
            asked.len()
        )));
    }
    let tier = model.id();
    let drawn_by = state
        .tiers
        .states()
        .into_iter()
        .find(|t| t.tier == tier)
        .filter(|t| t.problem.is_none())
        .and_then(|t| t.model);
    let Some(pipeline) = drawn_by else {
        return Err(JobError::InvalidLora(format!(
            "model {tier} is drawn by the built-in painter, which takes no LoRAs; the operator maps a diffusion model to it first (`pictor models map {tier} <model>`)"
        )));
    };
    let installed = state.store.models()?;
    let arch = installed
        .iter()
        .find(|r| r.name == pipeline)
        .map(|r| r.arch)
        .ok_or_else(|| JobError::Internal(format!("tier {tier}: {pipeline:?} is not installed")))?;
    asked
        .into_iter()
        .map(|(name, text_w, unet_w)| {
            let record = installed
                .iter()
                .find(|r| r.name == name && r.kind == crate::models::Kind::Lora)
                .ok_or_else(|| {
                    JobError::InvalidLora(format!(
                        "no LoRA is installed under the name {name:?} (the operator adds one with `pictor models add {name} FILE.safetensors`)"
                    ))
                })?;
            if record.arch != arch {
                return Err(JobError::InvalidLora(format!(
                    "LoRA {name:?} is for {}; model {tier} is drawn by {pipeline:?} ({})",
                    record.arch.title(),
                    arch.title()
                )));
            }
            Ok(render::LoraUse {
                name,
                path: std::path::PathBuf::from(&record.path),
                hash: record.sha256.clone().unwrap_or_default(),
                text: text_w,
                unet: unet_w,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|loras| (text, loras))
}

/// The checks an edit can fail before its upload is read: an active job, or a balance below the
/// edit price (checked again when the job is created).
pub fn precheck_edit(state: &AppState, user: &UserRecord) -> Result<(), JobError> {
    let cost = JobModel::Edit.price(&state.store.settings()?);
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
    Ok(())
}

/// Checks the photo (format by content, pixel limits) and the mask (the photo's size, something
/// to change), stores them durably and creates the queued edit job.
#[allow(clippy::too_many_arguments)]
pub async fn create_edit(
    state: &AppState,
    user_id: u64,
    client: Option<String>,
    prompt: String,
    bytes: Vec<u8>,
    mask: Option<Vec<u8>>,
    webhook_url: Option<String>,
) -> Result<JobRecord, JobError> {
    let webhook_url = check_webhook(state, webhook_url.as_deref())?;
    // The instruction's `<lora:…>` tags, for the model that draws the edit tier (checked
    // before the upload is stored: a refused request leaves nothing behind).
    let (_, loras) = resolve_loras(state, JobModel::Edit, &prompt, &[])?;
    let ((bytes, mask), checked) = state
        .decode_pool
        .spawn(move || {
            let limits = DecodeLimits::default();
            let checked = match &mask {
                None => render::decode::inspect(&bytes, &limits),
                // The mask must match the photo as shown (EXIF orientation applied).
                Some(m) => render::decode::decode(&bytes, &limits).and_then(|img| {
                    render::decode::mask(m, img.width(), img.height(), &limits)?;
                    Ok(render::decode::SourceInfo {
                        format: render::decode::sniff(&bytes).unwrap_or("png"),
                        width: img.width(),
                        height: img.height(),
                    })
                }),
            };
            ((bytes, mask), checked)
        })
        .await
        .map_err(internal)?;
    let info = checked.map_err(|e| JobError::InvalidImage(e.to_string()))?;
    tracing::debug!(
        format = info.format,
        width = info.width,
        height = info.height,
        masked = mask.is_some(),
        "edit upload accepted"
    );

    let id = JobId::new();
    let dir = state.config.sources_dir();
    let name = super::source_path(&dir, id);
    let mask_name = super::mask_path(&dir, id);
    let file = |p: &std::path::Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let (file_name, mask_file) = (file(&name), file(&mask_name));
    let masked = mask.is_some();
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        if let Some(mask) = &mask {
            super::write_durably(&dir, &mask_file, mask)?;
        }
        super::write_durably(&dir, &file_name, &bytes).map(drop)
    })
    .await
    .map_err(internal)?
    .map_err(internal)?;
    let new = NewJob {
        id,
        user_id,
        model: JobModel::Edit,
        ratio: format!("{}x{}", info.width, info.height),
        prompt,
        enhance: false,
        enhanced_prompt: None,
        seed: random_seed(),
        noise: None,
        loras,
        webhook_url,
        client,
        masked,
    };
    match create(state, new).await {
        Ok(job) => Ok(job),
        Err(e) => {
            let _ = tokio::fs::remove_file(&name).await;
            let _ = tokio::fs::remove_file(&mask_name).await;
            Err(e)
        }
    }
}

async fn create(state: &AppState, new: NewJob) -> Result<JobRecord, JobError> {
    let now = state.clock.now();
    let job = state.store.call(move |s| s.create_job(new, now)).await?;
    state.metrics.job_created(job.model.id());
    state.jobs.submit(job.clone());
    Ok(job)
}

/// What a long-poll waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitFor {
    /// The job is done or failed.
    Finish,
    /// Anything a progress display shows (progress, queue position, status) to differ from the
    /// state the caller saw last ([`Snapshot::state_token`]); without one, the next change.
    Change { since: Option<String> },
}

fn owned(state: &AppState, user_id: u64, id: JobId) -> Result<JobRecord, JobError> {
    state
        .store
        .job(id)?
        .filter(|j| j.user_id == user_id)
        .ok_or(JobError::NotFound)
}

fn snapshot(state: &AppState, job: JobRecord) -> Result<Snapshot, JobError> {
    let balance = state.store.user(job.user_id)?.map_or(0, |u| u.balance);
    Ok(with_live(state, job, balance))
}

/// The snapshot of `job` with the engine's live status of an unfinished job.
fn with_live(state: &AppState, job: JobRecord, balance: i64) -> Snapshot {
    let live = (!job.status.is_terminal())
        .then(|| state.jobs.live_status(job.job_id()))
        .flatten();
    Snapshot { job, balance, live }
}

/// A user's job by its id; with `wait`, held until it finishes (or changes, for
/// [`WaitFor::Change`]) or the wait elapses. Another user's job is [`JobError::NotFound`].
pub async fn get(
    state: &AppState,
    user_id: u64,
    job_id: &str,
    wait: Option<(Duration, WaitFor)>,
) -> Result<Snapshot, JobError> {
    match get_or_wait(state, user_id, job_id, wait)? {
        Got::Now(snap) => Ok(snap),
        Got::Wait(waiter) => waiter.finish().await,
    }
}

/// What [`get_or_wait`] found: the answer, or a wait that gives it.
// Returned once and matched at once: boxing the snapshot would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum Got {
    Now(Snapshot),
    Wait(Waiter),
}

/// [`get`] up to its wait: the answer when it is known at once (no `wait`, a finished job, a
/// state that already differs from `since`), otherwise the wait, to be awaited where the caller
/// likes (the server parks it outside the request's layers: see `app::serve::ParkSlot`).
pub fn get_or_wait(
    state: &AppState,
    user_id: u64,
    job_id: &str,
    wait: Option<(Duration, WaitFor)>,
) -> Result<Got, JobError> {
    let id = JobId::parse(job_id).ok_or(JobError::NotFound)?;
    let Some((wait, what)) = wait else {
        return snapshot(state, owned(state, user_id, id)?).map(Got::Now);
    };
    // Subscribe before reading, so a change between the read and the wait is not missed; to
    // the finish alone when only the finish ends the wait.
    let watchers = state.jobs.watchers();
    let sub = match what {
        WaitFor::Finish => watchers.subscribe_finish(id),
        WaitFor::Change { .. } => watchers.subscribe(id),
    };
    let job = owned(state, user_id, id)?;
    match &what {
        WaitFor::Finish if job.status.is_terminal() => {
            return snapshot(state, job).map(Got::Now);
        }
        WaitFor::Finish => {}
        WaitFor::Change { since } => {
            let snap = snapshot(state, job)?;
            let differs = since
                .as_ref()
                .is_some_and(|seen| snap.state_token() != *seen);
            if snap.job.status.is_terminal() || differs {
                return Ok(Got::Now(snap));
            }
        }
    }
    Ok(Got::Wait(Waiter {
        state: state.clone(),
        user_id,
        id,
        deadline: tokio::time::Instant::now() + wait,
        what,
        sub,
        stop: None,
    }))
}

/// A long-poll's wait, on its own: it keeps no job record (the job is read again when the wait
/// ends), so a parked wait is a few hundred bytes.
pub struct Waiter {
    state: AppState,
    user_id: u64,
    id: JobId,
    deadline: tokio::time::Instant,
    what: WaitFor,
    sub: super::watch::Subscription,
    stop: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Waiter {
    /// Ends the wait early, with the job's state then, when `stop` becomes `true` (the server
    /// is stopping).
    pub fn until(mut self, stop: tokio::sync::watch::Receiver<bool>) -> Waiter {
        self.stop = Some(stop);
        self
    }

    /// Waits, then reads the job: at its finish, at a change that differs from `since`
    /// ([`WaitFor::Change`]), when the wait elapses, or when the server stops.
    pub async fn finish(self) -> Result<Snapshot, JobError> {
        let Waiter {
            state,
            user_id,
            id,
            deadline,
            what,
            mut sub,
            mut stop,
        } = self;
        let read = |state: &AppState| snapshot(state, owned(state, user_id, id)?);
        match what {
            WaitFor::Finish => {
                let _ = tokio::time::timeout_at(deadline, async {
                    tokio::select! {
                        _ = sub.finished() => {}
                        _ = stopped(&mut stop) => {}
                    }
                })
                .await;
                read(&state)
            }
            WaitFor::Change { since } => loop {
                let woke = tokio::time::timeout_at(deadline, async {
                    tokio::select! {
                        ended = sub.changed() => Some(ended),
                        _ = stopped(&mut stop) => None,
                    }
                })
                .await;
                let Ok(Some(ended)) = woke else {
                    return read(&state);
                };
                let snap = read(&state)?;
                // A wake-up may change nothing shown (an ETA); then wait on. Once the task has
                // ended no change follows (a job the store could not finish stays as it is).
                let differs = since
                    .as_ref()
                    .is_none_or(|seen| snap.state_token() != *seen);
                if ended || differs || snap.job.status.is_terminal() {
                    return Ok(snap);
                }
            },
        }
    }
}

/// Resolves when the server is stopping (never without a signal).
async fn stopped(stop: &mut Option<tokio::sync::watch::Receiver<bool>>) {
    if let Some(rx) = stop
        && rx.wait_for(|s| *s).await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

/// Cancels a user's queued or running job (see [`super::JobEngine::cancel`]). Cancelling a
/// cancelled job again answers the same; a job that ended otherwise is [`JobError::Finished`].
pub async fn cancel(state: &AppState, user_id: u64, job_id: &str) -> Result<Snapshot, JobError> {
    let id = JobId::parse(job_id).ok_or(JobError::NotFound)?;
    owned(state, user_id, id)?;
    match state.jobs.cancel(id).await? {
        CancelOutcome::Cancelled(job) | CancelOutcome::AlreadyCancelled(job) => {
            snapshot(state, job)
        }
        CancelOutcome::Finished(job) => Err(JobError::Finished(Box::new(job))),
    }
}

/// Most jobs one history page holds.
pub const HISTORY_MAX: usize = 100;

/// Which jobs a history page lists.
#[derive(Debug, Clone, Copy, Default)]
pub struct HistoryQuery {
    pub status: Option<JobStatus>,
    pub kind: Option<JobKind>,
    /// Only jobs older than this one (the previous page's cursor).
    pub before: Option<JobId>,
    /// 1 to [`HISTORY_MAX`].
    pub limit: usize,
}

/// One page of a user's jobs, newest first, and the cursor of the next page.
pub async fn history(
    state: &AppState,
    user_id: u64,
    q: HistoryQuery,
) -> Result<(Vec<Snapshot>, Option<JobId>), JobError> {
    let limit = q.limit.clamp(1, HISTORY_MAX);
    let keep = move |j: &JobRecord| {
        q.status.is_none_or(|s| s == j.status) && q.kind.is_none_or(|k| k == j.kind)
    };
    let (jobs, more) = state
        .store
        .call(move |s| s.user_jobs_page(user_id, q.before, limit, keep))
        .await?;
    let next = more.then(|| jobs.last().map(JobRecord::job_id)).flatten();
    let balance = state.store.user(user_id)?.map_or(0, |u| u.balance);
    let snapshots = jobs
        .into_iter()
        .map(|job| with_live(state, job, balance))
        .collect();
    Ok((snapshots, next))
}
