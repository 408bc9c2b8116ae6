//! The job state machine, `queued → running → done | failed`, with the credit and daily-limit
//! movements that go with each transition in the same write transaction.
//!
//! Every transition re-reads the job inside the transaction and checks its current state
//! (compare-and-set), so a job is charged at most once and refunded at most once.

use std::fmt;

use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::ledger::{self, LedgerReason};
use super::settings::Settings;
use super::tables::*;
use super::users::UserRecord;
use super::{Store, StoreError, codec};
use crate::catalog::Model;
use crate::clock::{self, Millis};

/// A job id: a UUIDv7 (sorts by creation time), shown as `job_` + 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u128);

impl JobId {
    pub fn new() -> JobId {
        JobId(uuid::Uuid::now_v7().as_u128())
    }

    pub fn parse(s: &str) -> Option<JobId> {
        let hex = s.strip_prefix("job_")?;
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(hex, 16).ok().map(JobId)
    }
}

impl Default for JobId {
    fn default() -> Self {
        JobId::new()
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job_{:032x}", self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    Generate,
    Edit,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Generate => "generate",
            JobKind::Edit => "edit",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Queued,
    Running,
    Done,
    Failed,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Done => "done",
            JobStatus::Failed => "failed",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, JobStatus::Done | JobStatus::Failed)
    }
}

/// What a job renders with, and so what it costs: a model of the catalogue, or the edit. Stored as
/// the model id (`fast`, `artist`, `0.2plus`) or `edit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobModel {
    Generate(Model),
    Edit,
}

impl JobModel {
    pub fn id(self) -> &'static str {
        match self {
            JobModel::Generate(m) => m.id(),
            JobModel::Edit => "edit",
        }
    }

    pub fn kind(self) -> JobKind {
        match self {
            JobModel::Generate(_) => JobKind::Generate,
            JobModel::Edit => JobKind::Edit,
        }
    }

    /// The price under `settings`.
    pub fn price(self, settings: &Settings) -> u32 {
        match self {
            JobModel::Generate(m) => settings.price(m),
            JobModel::Edit => settings.price_edit,
        }
    }
}

impl fmt::Display for JobModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

impl Serialize for JobModel {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

impl<'de> Deserialize<'de> for JobModel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let id = String::deserialize(d)?;
        if id == "edit" {
            return Ok(JobModel::Edit);
        }
        Model::parse(&id)
            .map(JobModel::Generate)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown model {id:?}")))
    }
}

/// Why a job failed: its `error_code` (part of the API; never renamed). One list for the store,
/// the job engine and the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailCode {
    /// The balance was below the price when the job was due to start.
    InsufficientCredits,
    /// The daily photo limit was reached when the job was due to start.
    DailyLimit,
    /// The server was too busy (queue full, queue timeout, an overloaded backend).
    TokensExhausted,
    /// The generation failed.
    GenerationFailed,
    /// The edit failed.
    EditFailed,
    /// The edit's uploaded photo was lost (server restart).
    SourceMissing,
    /// The owner cancelled the job.
    Cancelled,
    /// The app that made the job (with the person's access token) reached the spending limit
    /// the person set for it, or lost its access, before the job started.
    AppLimit,
}

impl FailCode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailCode::InsufficientCredits => "insufficient_credits",
            FailCode::DailyLimit => "daily_limit",
            FailCode::TokensExhausted => "tokens_exhausted",
            FailCode::GenerationFailed => "generation_failed",
            FailCode::EditFailed => "edit_failed",
            FailCode::SourceMissing => "source_missing",
            FailCode::Cancelled => "cancelled",
            FailCode::AppLimit => "app_limit",
        }
    }

    /// The generic failure of a job of this kind.
    pub fn failed(kind: JobKind) -> FailCode {
        match kind {
            JobKind::Generate => FailCode::GenerationFailed,
            JobKind::Edit => FailCode::EditFailed,
        }
    }
}

impl fmt::Display for FailCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: u128,
    pub user_id: u64,
    pub kind: JobKind,
    pub status: JobStatus,
    /// The model (stored as its id), or the edit.
    pub model: JobModel,
    pub ratio: String,
    pub prompt: String,
    pub enhance: bool,
    #[serde(default)]
    pub enhanced_prompt: Option<String>,
    pub seed: u64,
    /// The seed's noise source the client chose (`None`: the model's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<crate::catalog::NoiseKind>,
    /// The LoRAs the job asked for (prompt tags and `loras`), resolved to installed files when
    /// it was created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loras: Vec<crate::render::LoraUse>,
    pub cost: u32,
    /// Credits were taken (at start). Set once, never cleared.
    #[serde(default)]
    pub charged: bool,
    /// Credits were returned (at failure). Set once, never cleared.
    #[serde(default)]
    pub refunded: bool,
    /// UTC day whose daily-limit counter this job took, if it took one.
    #[serde(default)]
    pub daily_day: Option<u32>,
    /// Decided at start from the user's PRO flag.
    #[serde(default)]
    pub watermark: bool,
    #[serde(default)]
    pub error_code: Option<FailCode>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub photo_token: Option<String>,
    #[serde(default)]
    pub width: Option<u32>,
    #[serde(default)]
    pub height: Option<u32>,
    pub created_at: Millis,
    #[serde(default)]
    pub started_at: Option<Millis>,
    #[serde(default)]
    pub finished_at: Option<Millis>,
    /// Times the job was started (more than one only after restarts).
    #[serde(default)]
    pub attempts: u32,
    /// When the picture was deleted by the retention policy.
    #[serde(default)]
    pub photo_deleted_at: Option<Millis>,
    /// Where the job's end is announced, and how that delivery stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<super::Webhook>,
    /// What the built-in painter drew of the prompt (procedural renders only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scene: Option<JobScene>,
    /// The app (OAuth client) that created the job with the user's access token; `None` for
    /// the user's own API key and the playground.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// An edit with a mask (kept beside the upload until the job ends).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub masked: bool,
}

/// The content words of a prompt the built-in painter drew and could not draw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobScene {
    pub drawn: Vec<String>,
    pub not_drawn: Vec<String>,
}

impl JobRecord {
    pub fn job_id(&self) -> JobId {
        JobId(self.id)
    }
}

#[derive(Debug, Clone)]
pub struct NewJob {
    /// Chosen by the caller so an edit's source file can be stored under it before the job exists.
    pub id: JobId,
    pub user_id: u64,
    /// The model; the job's kind and price follow from it (the price is read in the creating
    /// transaction, so a price change cannot slip between the check and the job).
    pub model: JobModel,
    pub ratio: String,
    pub prompt: String,
    pub enhance: bool,
    pub enhanced_prompt: Option<String>,
    pub seed: u64,
    pub noise: Option<crate::catalog::NoiseKind>,
    /// Resolved and checked by the caller (`jobs::service::resolve_loras`).
    pub loras: Vec<crate::render::LoraUse>,
    /// Checked by the caller (`jobs::webhooks::check_url`).
    pub webhook_url: Option<String>,
    /// The app acting for the user, if any.
    pub client: Option<String>,
    /// An edit whose mask was stored beside its upload.
    pub masked: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum CreateJobError {
    #[error("you already have an active job ({0})")]
    Busy(JobId),
    #[error("not enough credits: the job costs {cost}, the balance is {balance}")]
    InsufficientCredits { cost: u32, balance: i64 },
    #[error("the account is blocked")]
    Banned,
    #[error("no such user")]
    NoUser,
    #[error(transparent)]
    Store(#[from] StoreError),
}

macro_rules! create_err_from {
    ($($t:ty),*) => {$(
        impl From<$t> for CreateJobError {
            fn from(e: $t) -> Self {
                CreateJobError::Store(e.into())
            }
        }
    )*};
}
create_err_from!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// What `start_job` did.
#[derive(Debug)]
pub enum StartOutcome {
    /// Now running; charged unless it had been charged before a restart.
    Started(JobRecord),
    /// Failed at start (`insufficient_credits`, `daily_limit`); nothing was charged.
    Failed(JobRecord),
    /// Not queued any more (already finished): nothing to do.
    NotQueued(JobRecord),
}

/// How a job ended.
#[derive(Debug, Clone)]
pub enum FinishOutcome {
    Done {
        photo_token: String,
        width: u32,
        height: u32,
        /// What the built-in painter drew of the prompt.
        scene: Option<JobScene>,
    },
    Failed {
        code: FailCode,
        message: String,
    },
}

/// What `cancel_job` did.
#[derive(Debug)]
pub enum CancelOutcome {
    /// Cancelled now (refunded if it had been charged).
    Cancelled(JobRecord),
    /// It had been cancelled before: nothing changed.
    AlreadyCancelled(JobRecord),
    /// It had already finished (done, or failed for another reason): nothing changed.
    Finished(JobRecord),
}

/// A job interrupted by this many restarts while running is failed (and refunded) rather than
/// started again, so a picture that crashes the process cannot loop forever.
pub const MAX_ATTEMPTS: u32 = 3;

fn read_job(txn: &WriteTransaction, id: u128) -> Result<JobRecord, StoreError> {
    let jobs = txn.open_table(JOBS)?;
    let row = jobs.get(id)?;
    match row {
        Some(v) => codec::decode(v.value()),
        None => Err(StoreError::NotFound(format!("no job {}", JobId(id)))),
    }
}

fn write_job(txn: &WriteTransaction, job: &JobRecord) -> Result<(), StoreError> {
    txn.open_table(JOBS)?
        .insert(job.id, codec::encode(job)?.as_slice())?;
    Ok(())
}

fn read_user(txn: &WriteTransaction, id: u64) -> Result<Option<UserRecord>, StoreError> {
    let users = txn.open_table(USERS)?;
    let row = users.get(id)?;
    row.map(|v| codec::decode(v.value())).transpose()
}

fn read_settings(txn: &WriteTransaction) -> Result<Settings, StoreError> {
    let table = txn.open_table(SETTINGS)?;
    let row = table.get("settings")?;
    match row {
        Some(v) => codec::decode(v.value()),
        None => Ok(Settings::default()),
    }
}

/// Marks a job terminal: clears the user's active slot and the pending row.
fn close_job(txn: &WriteTransaction, job: &JobRecord) -> Result<(), StoreError> {
    let mut active = txn.open_table(ACTIVE_BY_USER)?;
    let current = active.get(job.user_id)?.map(|v| v.value());
    if current == Some(job.id) {
        active.remove(job.user_id)?;
    }
    txn.open_table(PENDING_JOBS)?.remove(job.id)?;
    Ok(())
}

/// Why a job an app made may not be charged now: the person's consent to the app is gone (or
/// is for an earlier registration under the same name), or the charge would take the app past
/// a spending limit. Read in the transaction that charges, so nothing can slip between.
fn app_over_cap(
    txn: &WriteTransaction,
    job: &JobRecord,
    day: u32,
) -> Result<Option<String>, StoreError> {
    use super::oauth::{AppSpend, ClientRecord, ConsentRecord};
    let Some(client) = job.client.as_deref() else {
        return Ok(None);
    };
    let uid = txn
        .open_table(CLIENTS)?
        .get(client)?
        .map(|v| codec::decode::<ClientRecord>(v.value()))
        .transpose()?
        .map(|c| c.uid);
    let consent = txn
        .open_table(CONSENTS)?
        .get((job.user_id, client))?
        .map(|v| codec::decode::<ConsentRecord>(v.value()))
        .transpose()?
        .filter(|c| Some(c.client_uid) == uid);
    let Some(consent) = consent else {
        return Ok(Some(format!(
            "{client} no longer has access to this account; nothing was charged"
        )));
    };
    let spent: AppSpend = txn
        .open_table(APP_SPEND)?
        .get((job.user_id, client))?
        .map(|v| codec::decode(v.value()))
        .transpose()?
        .unwrap_or_default();
    let cost = u64::from(job.cost);
    if let Some(cap) = consent.caps.daily
        && spent.today_on(day) + cost > u64::from(cap)
    {
        return Ok(Some(format!(
            "{client} reached the daily spending limit you set ({} of {cap} credits today; the job costs {cost}); nothing was charged",
            spent.today_on(day)
        )));
    }
    if let Some(cap) = consent.caps.total
        && spent.total + cost > u64::from(cap)
    {
        return Ok(Some(format!(
            "{client} reached the spending limit you set ({} of {cap} credits in all; the job costs {cost}); nothing was charged",
            spent.total
        )));
    }
    Ok(None)
}

/// Adds `delta` credits (negative: a refund) to what `client` spent of the user's credits.
fn add_app_spend(
    txn: &WriteTransaction,
    user_id: u64,
    client: &str,
    day: u32,
    delta: i64,
) -> Result<(), StoreError> {
    use super::oauth::AppSpend;
    let mut t = txn.open_table(APP_SPEND)?;
    let mut spent: AppSpend = t
        .get((user_id, client))?
        .map(|v| codec::decode(v.value()))
        .transpose()?
        .unwrap_or_default();
    let apply = |v: u64| v.saturating_add_signed(delta);
    if spent.day == day {
        spent.today = apply(spent.today);
    } else if delta > 0 {
        // A new day: today starts from this charge (a refund of an earlier day's charge leaves
        // today's figure alone).
        spent.day = day;
        spent.today = apply(0);
    }
    spent.total = apply(spent.total);
    t.insert((user_id, client), codec::encode(&spent)?.as_slice())?;
    Ok(())
}

/// Fails a job and closes it (see [`fail_open`]).
fn fail_in(
    txn: &WriteTransaction,
    job: &mut JobRecord,
    code: FailCode,
    message: String,
    now: Millis,
) -> Result<(), StoreError> {
    fail_open(txn, job, code, message, now)?;
    close_job(txn, job)
}

/// Fails a job; if it was charged and not yet refunded, returns its credits and its daily-limit
/// slot. The only place refunds happen. The user's active slot and the pending row stay until
/// [`close_job`] (for a render still winding down).
fn fail_open(
    txn: &WriteTransaction,
    job: &mut JobRecord,
    code: FailCode,
    message: String,
    now: Millis,
) -> Result<(), StoreError> {
    if job.charged && !job.refunded {
        if let Some(mut user) = read_user(txn, job.user_id)? {
            ledger::apply_for(
                txn,
                &mut user,
                job.cost as i64,
                LedgerReason::Refund,
                Some(job.id),
                job.client.as_deref(),
                now,
            )?;
        }
        if let Some(client) = &job.client {
            let day = clock::day_of(job.started_at.unwrap_or(now));
            add_app_spend(txn, job.user_id, client, day, -(job.cost as i64))?;
        }
        if let Some(day) = job.daily_day {
            let mut usage = txn.open_table(DAILY_USAGE)?;
            let used = usage
                .get((job.user_id, day))?
                .map(|v| v.value())
                .unwrap_or(0);
            usage.insert((job.user_id, day), used.saturating_sub(1))?;
        }
        job.refunded = true;
    }
    job.status = JobStatus::Failed;
    job.error_code = Some(code);
    job.error = Some(message);
    job.finished_at = Some(now);
    super::webhooks::enqueue(txn, job, now)?;
    write_job(txn, job)
}

/// [`Store::create_job`]'s transaction (see `write_combined`: it may run twice).
fn create_in(
    txn: &WriteTransaction,
    new: NewJob,
    now: Millis,
) -> Result<JobRecord, CreateJobError> {
    let now = super::ordered_stamp(txn, now)?;

    let user = read_user(txn, new.user_id)?.ok_or(CreateJobError::NoUser)?;
    if user.banned {
        return Err(CreateJobError::Banned);
    }
    let mut active = txn.open_table(ACTIVE_BY_USER)?;
    if let Some(existing) = active.get(user.id)?.map(|v| v.value()) {
        return Err(CreateJobError::Busy(JobId(existing)));
    }
    let cost = new.model.price(&read_settings(txn)?);
    if user.balance < cost as i64 {
        return Err(CreateJobError::InsufficientCredits {
            cost,
            balance: user.balance,
        });
    }
    let job = JobRecord {
        id: new.id.0,
        user_id: user.id,
        kind: new.model.kind(),
        status: JobStatus::Queued,
        model: new.model,
        ratio: new.ratio,
        prompt: new.prompt,
        enhance: new.enhance,
        enhanced_prompt: new.enhanced_prompt,
        seed: new.seed,
        noise: new.noise,
        loras: new.loras,
        cost,
        charged: false,
        refunded: false,
        daily_day: None,
        watermark: !user.pro,
        error_code: None,
        error: None,
        photo_token: None,
        width: None,
        height: None,
        created_at: now,
        started_at: None,
        finished_at: None,
        attempts: 0,
        photo_deleted_at: None,
        webhook: new.webhook_url.map(super::Webhook::new),
        scene: None,
        client: new.client,
        masked: new.masked,
    };
    active.insert(user.id, job.id)?;
    write_job(txn, &job)?;
    txn.open_table(JOBS_BY_USER)?
        .insert((user.id, job.id), ())?;
    txn.open_table(PENDING_JOBS)?.insert(job.id, ())?;
    Ok(job)
}

/// [`Store::start_job_deferred`]'s transaction (see `write_combined`: it may run twice).
fn start_in(txn: &WriteTransaction, id: JobId, now: Millis) -> Result<StartOutcome, StoreError> {
    let now = super::ordered_stamp(txn, now)?;
    let mut job = read_job(txn, id.0)?;
    if job.status != JobStatus::Queued {
        return Ok(StartOutcome::NotQueued(job));
    }
    let outcome = if job.charged {
        job.status = JobStatus::Running;
        job.started_at = Some(now);
        job.attempts += 1;
        write_job(txn, &job)?;
        StartOutcome::Started(job)
    } else {
        let Some(mut user) = read_user(txn, job.user_id)? else {
            let code = FailCode::failed(job.kind);
            fail_in(
                txn,
                &mut job,
                code,
                "the account no longer exists".into(),
                now,
            )?;
            return Ok(StartOutcome::Failed(job));
        };
        let settings = read_settings(txn)?;
        let day = clock::day_of(now);
        let used = {
            let usage = txn.open_table(DAILY_USAGE)?;
            usage.get((user.id, day))?.map(|v| v.value()).unwrap_or(0)
        };
        let limit = settings.daily_limit_for(user.pro, user.daily_limit);
        if user.balance < job.cost as i64 {
            let message = format!(
                "not enough credits: the job costs {}, the balance is {}",
                job.cost, user.balance
            );
            fail_in(txn, &mut job, FailCode::InsufficientCredits, message, now)?;
            StartOutcome::Failed(job)
        } else if job.kind == JobKind::Generate && used >= limit {
            let message = format!(
                "daily photo limit reached: {used} of {limit} generations today (resets at 00:00 UTC)"
            );
            fail_in(txn, &mut job, FailCode::DailyLimit, message, now)?;
            StartOutcome::Failed(job)
        } else if let Some(message) = app_over_cap(txn, &job, day)? {
            fail_in(txn, &mut job, FailCode::AppLimit, message, now)?;
            StartOutcome::Failed(job)
        } else {
            ledger::apply_for(
                txn,
                &mut user,
                -(job.cost as i64),
                LedgerReason::Charge,
                Some(job.id),
                job.client.as_deref(),
                now,
            )?;
            if job.kind == JobKind::Generate {
                txn.open_table(DAILY_USAGE)?
                    .insert((user.id, day), used + 1)?;
                job.daily_day = Some(day);
            }
            if let Some(client) = &job.client {
                add_app_spend(txn, user.id, client, day, job.cost as i64)?;
            }
            job.charged = true;
            job.watermark = !user.pro;
            job.status = JobStatus::Running;
            job.started_at = Some(now);
            job.attempts += 1;
            write_job(txn, &job)?;
            StartOutcome::Started(job)
        }
    };
    Ok(outcome)
}

/// [`Store::finish_job`]'s transaction (see `write_combined`: it may run twice).
fn finish_in(
    txn: &WriteTransaction,
    id: JobId,
    outcome: FinishOutcome,
    now: Millis,
) -> Result<(JobRecord, bool), StoreError> {
    let now = super::ordered_stamp(txn, now)?;
    let mut job = read_job(txn, id.0)?;
    if job.status.is_terminal() {
        // Cancelled while it rendered: the render has stopped now, so the user's active
        // slot goes (a no-op when it is gone already).
        close_job(txn, &job)?;
        return Ok((job, false));
    }
    match outcome {
        FinishOutcome::Done {
            photo_token,
            width,
            height,
            scene,
        } => {
            if job.status != JobStatus::Running {
                return Err(StoreError::Conflict(format!(
                    "{} is not running",
                    job.job_id()
                )));
            }
            job.status = JobStatus::Done;
            job.photo_token = Some(photo_token);
            job.width = Some(width);
            job.height = Some(height);
            job.scene = scene;
            job.finished_at = Some(now);
            super::webhooks::enqueue(txn, &mut job, now)?;
            write_job(txn, &job)?;
            close_job(txn, &job)?;
        }
        FinishOutcome::Failed { code, message } => {
            fail_in(txn, &mut job, code, message, now)?;
        }
    }
    Ok((job, true))
}

/// [`Store::cancel_job`]'s transaction (see `write_combined`: it may run twice).
fn cancel_in(txn: &WriteTransaction, id: JobId, now: Millis) -> Result<CancelOutcome, StoreError> {
    let now = super::ordered_stamp(txn, now)?;
    let mut job = read_job(txn, id.0)?;
    let outcome = match job.status {
        JobStatus::Failed if job.error_code == Some(FailCode::Cancelled) => {
            return Ok(CancelOutcome::AlreadyCancelled(job));
        }
        JobStatus::Done | JobStatus::Failed => return Ok(CancelOutcome::Finished(job)),
        JobStatus::Queued => {
            let message = if job.charged {
                "cancelled by its owner; credits returned"
            } else {
                "cancelled by its owner before it started; nothing was charged"
            };
            fail_in(txn, &mut job, FailCode::Cancelled, message.into(), now)?;
            CancelOutcome::Cancelled(job)
        }
        // Refunded now; the user's active slot is released when the render has stopped
        // (`finish_job`), so a cancelled render never runs beside the user's next job.
        JobStatus::Running => {
            let message = "cancelled by its owner; credits returned".to_string();
            fail_open(txn, &mut job, FailCode::Cancelled, message, now)?;
            CancelOutcome::Cancelled(job)
        }
    };
    Ok(outcome)
}

impl Store {
    /// Creates a queued job. In the same transaction: the user exists and is not banned, has no
    /// active job, and can pay the price now (the charge itself happens at start).
    pub fn create_job(&self, new: NewJob, now: Millis) -> Result<JobRecord, CreateJobError> {
        // A refusal (busy, credits, banned) is the inner error: it writes nothing that matters
        // (the clock stamp), so it does not make the operations combined with it run again.
        let (created, seq) = self.write_combined(move |txn| {
            Ok::<_, CreateJobError>(match create_in(txn, new.clone(), now) {
                Err(CreateJobError::Store(e)) => return Err(CreateJobError::Store(e)),
                other => other,
            })
        })?;
        let job = created?;
        self.wait_durable(seq)?;
        Ok(job)
    }

    /// `queued → running`. Charges the price and (for generation) one daily-limit slot, unless
    /// the job was already charged before a restart. A user who can no longer pay, or has hit the
    /// daily limit, gets the job failed with `insufficient_credits` / `daily_limit` instead.
    pub fn start_job(&self, id: JobId, now: Millis) -> Result<StartOutcome, StoreError> {
        let (outcome, pending) = self.start_job_deferred(id, now)?;
        if let Some(seq) = pending {
            self.wait_durable(seq)?;
        }
        Ok(outcome)
    }

    /// [`Store::start_job`] that does not wait for a `Started` job's commit to be durable (its
    /// number comes back; [`Store::wait_durable`] waits for it): the render can begin at once,
    /// since nobody is told of the start before the job's finish, whose durable commit covers
    /// it. If the process dies first, the job is still queued and uncharged. Failures at start
    /// are durable before this returns (they are reported and refunded at once).
    pub fn start_job_deferred(
        &self,
        id: JobId,
        now: Millis,
    ) -> Result<(StartOutcome, Option<u64>), StoreError> {
        let (outcome, seq) = self.write_combined(move |txn| start_in(txn, id, now))?;
        match outcome {
            StartOutcome::Started(_) => Ok((outcome, Some(seq))),
            StartOutcome::Failed(_) => {
                self.wait_durable(seq)?;
                Ok((outcome, None))
            }
            StartOutcome::NotQueued(_) => Ok((outcome, None)),
        }
    }

    /// `running → done | failed` (and `queued → failed` for jobs that never got a render slot).
    /// A failure refunds exactly once. Finishing an already-finished job (one cancelled while its
    /// render ran) changes nothing but the closing bookkeeping and returns `false` with the job
    /// as it is.
    pub fn finish_job(
        &self,
        id: JobId,
        outcome: FinishOutcome,
        now: Millis,
    ) -> Result<(JobRecord, bool), StoreError> {
        let (finished, seq) =
            self.write_combined(move |txn| finish_in(txn, id, outcome.clone(), now))?;
        self.wait_durable(seq)?;
        Ok(finished)
    }

    /// Cancels a queued or running job (`failed` with `cancelled`), returning its credits and
    /// daily slot if it had been charged. Compare-and-set like every transition: of a cancel and
    /// a finish racing, exactly one commits its change.
    pub fn cancel_job(&self, id: JobId, now: Millis) -> Result<CancelOutcome, StoreError> {
        let (outcome, seq) = self.write_combined(move |txn| cancel_in(txn, id, now))?;
        // Also when it changed nothing: what it read may be an end committed in the same batch.
        self.wait_durable(seq)?;
        Ok(outcome)
    }

    /// Every job not yet done or failed (queued or running), oldest first.
    pub fn pending_jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        let txn = self.begin_read()?;
        let pending = txn.open_table(PENDING_JOBS)?;
        let jobs = txn.open_table(JOBS)?;
        let mut out = Vec::new();
        for row in pending.iter()? {
            let id = row?.0.value();
            if let Some(v) = jobs.get(id)? {
                let job: JobRecord = codec::decode(v.value())?;
                if matches!(job.status, JobStatus::Queued | JobStatus::Running) {
                    out.push(job);
                }
            }
        }
        Ok(out)
    }

    pub fn job(&self, id: JobId) -> Result<Option<JobRecord>, StoreError> {
        let txn = self.begin_read()?;
        let jobs = txn.open_table(JOBS)?;
        jobs.get(id.0)?
            .map(|v| codec::decode(v.value()))
            .transpose()
    }

    /// The user's active (queued or running) job, if any.
    pub fn active_job(&self, user_id: u64) -> Result<Option<JobId>, StoreError> {
        let txn = self.begin_read()?;
        let active = txn.open_table(ACTIVE_BY_USER)?;
        Ok(active.get(user_id)?.map(|v| JobId(v.value())))
    }

    /// A user's jobs, newest first, at most `limit`.
    pub fn user_jobs(&self, user_id: u64, limit: usize) -> Result<Vec<JobRecord>, StoreError> {
        let txn = self.begin_read()?;
        let index = txn.open_table(JOBS_BY_USER)?;
        let jobs = txn.open_table(JOBS)?;
        let mut out = Vec::new();
        for row in index.range((user_id, 0)..=(user_id, u128::MAX))?.rev() {
            let (key, _) = row?;
            if let Some(v) = jobs.get(key.value().1)? {
                out.push(codec::decode(v.value())?);
            }
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// One page of a user's jobs, newest first: those older than `before` (from the newest when
    /// `None`) that `keep` accepts, at most `limit`, and whether more such jobs remain.
    pub fn user_jobs_page(
        &self,
        user_id: u64,
        before: Option<JobId>,
        limit: usize,
        keep: impl Fn(&JobRecord) -> bool,
    ) -> Result<(Vec<JobRecord>, bool), StoreError> {
        let txn = self.begin_read()?;
        let index = txn.open_table(JOBS_BY_USER)?;
        let jobs = txn.open_table(JOBS)?;
        let end = before.map_or(u128::MAX, |b| b.0);
        let mut out = Vec::new();
        for row in index.range((user_id, 0)..(user_id, end))?.rev() {
            let (key, _) = row?;
            let Some(v) = jobs.get(key.value().1)? else {
                continue;
            };
            let job: JobRecord = codec::decode(v.value())?;
            if !keep(&job) {
                continue;
            }
            if out.len() == limit {
                return Ok((out, true));
            }
            out.push(job);
        }
        Ok((out, false))
    }

    /// Run once at start, before serving: jobs left `running` by a crash go back to `queued`
    /// (keeping their charge, so they are not charged again), or fail with a refund after
    /// [`MAX_ATTEMPTS`]. Returns every unfinished job, oldest first, for the engine to run.
    pub fn recover_jobs(&self, now: Millis) -> Result<Vec<JobRecord>, StoreError> {
        let txn = self.begin_write()?;
        let mut resume = Vec::new();
        {
            let ids: Vec<u128> = {
                let pending = txn.open_table(PENDING_JOBS)?;
                let mut ids = Vec::new();
                for row in pending.iter()? {
                    ids.push(row?.0.value());
                }
                ids
            };
            for id in ids {
                let mut job = read_job(&txn, id)?;
                match job.status {
                    JobStatus::Queued => resume.push(job),
                    JobStatus::Running if job.attempts >= MAX_ATTEMPTS => {
                        let code = FailCode::failed(job.kind);
                        let message = format!(
                            "the job was interrupted by {} server restarts and was given up; credits returned",
                            job.attempts
                        );
                        fail_in(&txn, &mut job, code, message, now)?;
                    }
                    JobStatus::Running => {
                        job.status = JobStatus::Queued;
                        write_job(&txn, &job)?;
                        resume.push(job);
                    }
                    JobStatus::Done | JobStatus::Failed => {
                        // Terminal but still listed: finish the bookkeeping.
                        close_job(&txn, &job)?;
                    }
                }
            }
        }
        self.commit(txn)?;
        Ok(resume)
    }

    /// Marks pictures of jobs finished before `before` as deleted (at most `limit` per call) and
    /// returns their file tokens, for the caller to remove the files.
    pub fn expire_pictures(
        &self,
        before: Millis,
        now: Millis,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let txn = self.begin_write()?;
        let mut tokens = Vec::new();
        {
            let mut jobs = txn.open_table(JOBS)?;
            let mut expired: Vec<JobRecord> = Vec::new();
            for row in jobs.iter()? {
                let job: JobRecord = codec::decode(row?.1.value())?;
                if job.status == JobStatus::Done
                    && job.photo_deleted_at.is_none()
                    && job.finished_at.is_some_and(|f| f < before)
                {
                    expired.push(job);
                    if expired.len() >= limit {
                        break;
                    }
                }
            }
            for mut job in expired {
                if let Some(t) = job.photo_token.clone() {
                    tokens.push(t);
                }
                job.photo_deleted_at = Some(now);
                jobs.insert(job.id, codec::encode(&job)?.as_slice())?;
            }
        }
        self.commit(txn)?;
        Ok(tokens)
    }

    /// Every job (used by the consistency checks of tests and `pictor` maintenance).
    pub fn all_jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        let txn = self.begin_read()?;
        let jobs = txn.open_table(JOBS)?;
        let mut out = Vec::new();
        for row in jobs.iter()? {
            out.push(codec::decode(row?.1.value())?);
        }
        Ok(out)
    }
}
