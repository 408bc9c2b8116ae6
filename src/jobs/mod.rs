//! The job engine: runs queued jobs through the render pool and records how they end.
//!
//! One tokio task per job waits (fairly) for a render slot, starts the job (the charge happens in
//! that transaction), renders on the blocking pool, writes the PNG, and finishes the job (refund on
//! failure, in the same transaction), then wakes long-polls. The queue itself is persistent: the
//! store's pending-jobs table, re-read at start.

pub mod service;
pub mod watch;
pub mod webhooks;

use crate::lock;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::RngExt;
use tracing::{error, info, warn};

use crate::clock::Clock;
use crate::render::{
    self, EditSpec, GenerateSpec, Model, PngParameters, Ratio, RenderControl, RenderError,
    RenderPool, Renderer,
};
use crate::store::{
    CancelOutcome, FailCode, FinishOutcome, JobId, JobKind, JobModel, JobRecord, StartOutcome,
    Store, StoreError,
};
pub use watch::{JobWatchers, Subscription};

#[derive(Clone)]
pub struct JobEngine {
    inner: Arc<Inner>,
}

struct Inner {
    metrics: Arc<crate::metrics::Metrics>,
    store: Store,
    renderer: Arc<dyn Renderer>,
    pool: RenderPool,
    clock: Clock,
    watchers: JobWatchers,
    images_dir: PathBuf,
    sources_dir: PathBuf,
    queue_size: usize,
    queue_timeout: Duration,
    /// Jobs waiting for a render slot right now.
    waiting: AtomicUsize,
    /// Job tasks alive (waiting or rendering); used to drain on shutdown.
    alive: AtomicUsize,
    /// Rendering paused by the operator (tray): queued jobs wait before taking a render slot.
    paused: tokio::sync::watch::Sender<bool>,
    /// Every job with a live task: its place in the queue or its render.
    live: Mutex<HashMap<JobId, Live>>,
    /// Arrival order of the queue.
    next_seq: AtomicU64,
    /// Bumped whenever a job leaves the queue, so the next in line takes its turn.
    queue_moved: tokio::sync::watch::Sender<u64>,
    /// Recent render seconds per model id (moving average), for queue ETAs.
    durations: Mutex<HashMap<&'static str, f64>>,
    /// Signalled whenever a job ends, so the webhook worker looks at the outbox at once.
    ended: Arc<tokio::sync::Notify>,
}

/// A job whose task is alive.
struct Live {
    model: JobModel,
    control: RenderControl,
    /// Set once the job is cancelled, to stop its wait for a render slot.
    cancel: tokio::sync::watch::Sender<bool>,
    /// Place in the arrival order while waiting for a render slot.
    queued: Option<u64>,
    /// When its render started.
    started: Option<Instant>,
}

/// What the engine knows of an unfinished job beyond the store: where it is in the queue, when
/// it should start, how far its render is.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LiveStatus {
    /// 1-based place among the jobs waiting for a render slot.
    pub queue_position: Option<u32>,
    /// Predicted seconds until the job starts rendering (from recent render times).
    pub eta_seconds: Option<f64>,
    /// Render progress 0..=1 while it runs.
    pub progress: Option<f64>,
}

/// Weight of the newest render in the moving average of render times.
const DURATION_WEIGHT: f64 = 0.3;

pub struct EngineOptions {
    pub metrics: Arc<crate::metrics::Metrics>,
    pub images_dir: PathBuf,
    pub sources_dir: PathBuf,
    pub render_workers: usize,
    pub queue_size: usize,
    pub queue_timeout: Duration,
}

/// Counts for status displays.
#[derive(Debug, Clone, Copy)]
pub struct EngineStats {
    pub waiting: usize,
    pub rendering: usize,
    pub workers: usize,
    pub paused: bool,
}

impl JobEngine {
    /// What renders `model` (see [`Renderer::engine`]).
    pub fn engine_for(&self, model: Model) -> String {
        self.inner.renderer.engine(model)
    }

    pub fn new(
        store: Store,
        renderer: Arc<dyn Renderer>,
        clock: Clock,
        opts: EngineOptions,
    ) -> JobEngine {
        JobEngine {
            inner: Arc::new(Inner {
                metrics: opts.metrics,
                store,
                renderer,
                pool: RenderPool::new(opts.render_workers),
                clock,
                watchers: JobWatchers::default(),
                images_dir: opts.images_dir,
                sources_dir: opts.sources_dir,
                queue_size: opts.queue_size,
                queue_timeout: opts.queue_timeout,
                waiting: AtomicUsize::new(0),
                alive: AtomicUsize::new(0),
                paused: tokio::sync::watch::Sender::new(false),
                live: Mutex::new(HashMap::new()),
                next_seq: AtomicU64::new(0),
                queue_moved: tokio::sync::watch::Sender::new(0),
                durations: Mutex::new(HashMap::new()),
                ended: Arc::default(),
            }),
        }
    }

    /// The inference servers the renderer sends work to, with their health.
    pub fn backends_status(&self) -> Vec<crate::render::backends::pool::EndpointStatus> {
        self.inner.renderer.backends_status()
    }

    /// Signalled each time a job ends (and may have queued a webhook delivery).
    pub fn ended_signal(&self) -> Arc<tokio::sync::Notify> {
        self.inner.ended.clone()
    }

    pub fn watchers(&self) -> &JobWatchers {
        &self.inner.watchers
    }

    pub fn stats(&self) -> EngineStats {
        EngineStats {
            waiting: self.inner.waiting.load(Ordering::Relaxed),
            rendering: self.inner.pool.busy(),
            workers: self.inner.pool.size(),
            paused: self.is_paused(),
        }
    }

    /// Pauses or resumes rendering. While paused, jobs stay queued (counted as waiting, and the
    /// wait does not count against the queue timeout); renders already running finish.
    pub fn set_paused(&self, paused: bool) {
        let was = self.inner.paused.send_replace(paused);
        if was != paused {
            info!(
                paused,
                "rendering {}",
                if paused { "paused" } else { "resumed" }
            );
        }
    }

    pub fn is_paused(&self) -> bool {
        *self.inner.paused.borrow()
    }

    /// Where an edit's upload is kept until the job ends.
    pub fn source_path(&self, id: JobId) -> PathBuf {
        source_path(&self.inner.sources_dir, id)
    }

    /// Starts running a queued job in the background.
    pub fn submit(&self, job: JobRecord) {
        use tracing::Instrument;
        let inner = self.inner.clone();
        inner.alive.fetch_add(1, Ordering::SeqCst);
        let id = job.job_id();
        let (cancel, cancelled) = tokio::sync::watch::channel(false);
        let watchers = inner.watchers.clone();
        let control = RenderControl::observed(Box::new(move |_| watchers.changed(id)));
        lock(&inner.live).insert(
            id,
            Live {
                model: job.model,
                control: control.clone(),
                cancel,
                // The place in line is taken here, in the order jobs are submitted (creation
                // order, and oldest first on resume), not when the task first runs.
                queued: Some(inner.next_seq.fetch_add(1, Ordering::SeqCst)),
                started: None,
            },
        );
        // The job's log lines carry its id, and the request id of the request that created it.
        let span = tracing::info_span!("job", job = %id);
        tokio::spawn(
            async move {
                let edit = job.kind == JobKind::Edit;
                run(&inner, job, control, cancelled).await;
                lock(&inner.live).remove(&id);
                if edit {
                    forget_source(&inner, id).await;
                }
                inner.alive.fetch_sub(1, Ordering::SeqCst);
                inner.watchers.finished(id);
            }
            .instrument(span),
        );
    }

    /// Cancels a queued or running job of any user (the caller checks ownership): the store
    /// fails it with `cancelled` and returns its credits if it was charged; a waiting job leaves
    /// the queue at once, a rendering one stops at its renderer's next checkpoint.
    pub async fn cancel(&self, id: JobId) -> Result<CancelOutcome, StoreError> {
        let inner = &self.inner;
        let now = inner.clock.now();
        let outcome = inner.store.call(move |s| s.cancel_job(id, now)).await?;
        if let CancelOutcome::Cancelled(job) = &outcome {
            if let Some(live) = lock(&inner.live).get(&id) {
                live.control.cancel();
                live.cancel.send_replace(true);
            }
            inner.watchers.finished(id);
            inner.ended.notify_one();
            inner.metrics.job_finished(
                job.kind.as_str(),
                job.status.as_str(),
                FailCode::Cancelled.as_str(),
            );
            info!(job = %id, charged = job.charged, "job cancelled");
        }
        Ok(outcome)
    }

    /// Queue position, ETA and progress of an unfinished job (`None` once its task ended).
    pub fn live_status(&self, id: JobId) -> Option<LiveStatus> {
        let live = lock(&self.inner.live);
        let me = live.get(&id)?;
        if me.started.is_some() {
            return Some(LiveStatus {
                progress: Some(me.control.progress()),
                ..LiveStatus::default()
            });
        }
        let seq = me.queued?;
        let mut ahead: Vec<(u64, JobModel)> = live
            .values()
            .filter_map(|l| l.queued.filter(|s| *s < seq).map(|s| (s, l.model)))
            .collect();
        ahead.sort_by_key(|(s, _)| *s);
        let position = u32::try_from(ahead.len() + 1).unwrap_or(u32::MAX);
        let durations = lock(&self.inner.durations);
        let eta = if self.is_paused() {
            None
        } else {
            let running = live
                .values()
                .filter_map(|l| l.started.map(|t| (l.model, t)));
            predict_start(
                &durations,
                self.inner.pool.size(),
                running,
                ahead.iter().map(|(_, m)| *m),
            )
        };
        Some(LiveStatus {
            queue_position: Some(position),
            eta_seconds: eta,
            progress: None,
        })
    }

    /// Resumes jobs left unfinished by the last run (see `Store::recover_jobs`).
    pub async fn resume(&self) -> Result<usize, StoreError> {
        let now = self.inner.clock.now();
        let jobs = self.inner.store.call(move |s| s.recover_jobs(now)).await?;
        let n = jobs.len();
        for job in jobs {
            self.submit(job);
        }
        Ok(n)
    }

    /// Waits until no job task is alive, or the timeout passes. Jobs still running at exit are
    /// resumed at the next start.
    pub async fn drain(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.inner.alive.load(Ordering::SeqCst) > 0 {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        true
    }
}

/// Deletes an edit's upload once its job has ended in the store, however it ended (done,
/// failed, cancelled while queued, refused at start). A job the store could not finish keeps its
/// upload for the run after the next start.
async fn forget_source(inner: &Inner, id: JobId) {
    let ended = matches!(
        inner.store.call(move |s| s.job(id)).await,
        Ok(Some(job)) if job.status.is_terminal()
    );
    if ended {
        let _ = tokio::fs::remove_file(source_path(&inner.sources_dir, id)).await;
        let _ = tokio::fs::remove_file(mask_path(&inner.sources_dir, id)).await;
    }
}

/// Seconds until a job starts, given the renders running now (model, start) and the jobs ahead of
/// it: each of `workers` slots takes the next job as soon as it frees up, every job lasting its
/// model's recent average. `None` while some model has no render time yet and no other model
/// has one to stand in for it.
fn predict_start(
    durations: &HashMap<&'static str, f64>,
    workers: usize,
    running: impl Iterator<Item = (JobModel, Instant)>,
    ahead: impl Iterator<Item = JobModel>,
) -> Option<f64> {
    let fallback =
        (!durations.is_empty()).then(|| durations.values().sum::<f64>() / durations.len() as f64);
    let estimate = |m: JobModel| durations.get(m.id()).copied().or(fallback);
    let mut free: Vec<f64> = Vec::with_capacity(workers.max(1));
    for (model, started) in running {
        free.push((estimate(model)? - started.elapsed().as_secs_f64()).max(0.0));
    }
    free.resize(free.len().max(workers.max(1)), 0.0);
    // Slots beyond the pool's size (a render finishing while a new one starts) free up first.
    free.sort_by(f64::total_cmp);
    free.truncate(workers.max(1));
    for model in ahead {
        let (i, t) = free
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))?;
        free[i] = t + estimate(model)?;
    }
    free.into_iter().min_by(f64::total_cmp)
}

pub fn source_path(sources_dir: &Path, id: JobId) -> PathBuf {
    sources_dir.join(format!("{id}.src"))
}

/// Where a masked edit's mask is kept beside its upload.
pub fn mask_path(sources_dir: &Path, id: JobId) -> PathBuf {
    sources_dir.join(format!("{id}.mask"))
}

/// Writes bytes durably under a new name: created (never over an existing file), written,
/// fsynced, then the folder fsynced (shared, see [`sync_dir_shared`]). Only for names nothing
/// refers to yet (a random picture token, a fresh job id): the store names the file only after
/// this returns, so nobody reads it half-written, and a crash midway leaves an unreferenced
/// file, as a temp file would have. Writing in place saves the rename (on this machine's disk
/// the create and the rename, each taking the folder's lock, were a sixth of a no-op job's CPU).
pub fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let path = dir.join(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    drop(f);
    // A full disk or any other failure leaves nothing half-written behind.
    written.inspect_err(|_| {
        let _ = std::fs::remove_file(&path);
    })?;
    sync_dir_shared(dir);
    Ok(path)
}

/// Makes the files created in `dir` so far durable with one fsync of the folder shared by every
/// writer waiting at the same time (like the store's group commit): concurrent jobs finishing
/// together cost one journal commit for their folder entries instead of one each. Best effort,
/// as before (a folder that cannot be opened or synced is not an error: the file itself is).
fn sync_dir_shared(dir: &Path) {
    use crate::store::group::GroupSync;
    static DIRS: std::sync::OnceLock<Mutex<HashMap<PathBuf, Arc<GroupSync>>>> =
        std::sync::OnceLock::new();
    let sync = lock(DIRS.get_or_init(Default::default))
        .entry(dir.to_path_buf())
        .or_default()
        .clone();
    // This writer's file was created before it takes its ticket.
    let ticket = sync.ticket();
    let _ = sync.wait(ticket, |_| {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    });
}

struct WaitingGuard<'a>(&'a AtomicUsize);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn finish(inner: &Inner, id: JobId, outcome: FinishOutcome) {
    let now = inner.clock.now();
    let made = match &outcome {
        FinishOutcome::Done { photo_token, .. } => Some(photo_token.clone()),
        FinishOutcome::Failed { .. } => None,
    };
    match inner
        .store
        .call(move |s| s.finish_job(id, outcome, now))
        .await
    {
        Ok((job, false)) => {
            // Cancelled while it rendered: the cancel won, and a picture made meanwhile goes.
            if let Some(token) = made {
                let _ = tokio::fs::remove_file(inner.images_dir.join(format!("{token}.png"))).await;
            }
            info!(job = %id, status = job.status.as_str(), "render ended after the job was finished");
        }
        Ok((job, true)) => {
            // Counted before anyone is woken, so a client that saw the job end sees it counted.
            inner.metrics.job_finished(
                job.kind.as_str(),
                job.status.as_str(),
                job.error_code.map_or("", FailCode::as_str),
            );
            // Wake long-polls the moment the finishing transaction has committed.
            inner.watchers.finished(id);
            inner.ended.notify_one();
            info!(job = %id, status = job.status.as_str(), code = job.error_code.map_or("", FailCode::as_str), "job finished");
        }
        // The job stays pending in the store and is resolved at the next start.
        Err(e) => error!(job = %id, error = %e, "could not record the end of a job"),
    }
}

/// Takes a job out of the queue (`started`: into a render slot) and wakes the watchers of every
/// job whose view changed: its own, and those of the jobs still waiting (their places moved).
fn leave_queue(inner: &Inner, id: JobId, started: bool) {
    let live = &mut *lock(&inner.live);
    if let Some(me) = live.get_mut(&id) {
        me.queued = None;
        if started {
            me.started.get_or_insert_with(Instant::now);
        }
    }
    inner.watchers.changed(id);
    for (other, l) in live.iter() {
        if l.queued.is_some() {
            inner.watchers.changed(*other);
        }
    }
    inner.queue_moved.send_modify(|n| *n = n.wrapping_add(1));
}

/// Whether `id` is first in line: no waiting job arrived before it.
fn first_in_line(inner: &Inner, id: JobId) -> bool {
    let live = lock(&inner.live);
    let Some(mine) = live.get(&id).and_then(|l| l.queued) else {
        return true;
    };
    !live.values().any(|l| l.queued.is_some_and(|s| s < mine))
}

async fn run(
    inner: &Inner,
    job: JobRecord,
    control: RenderControl,
    mut cancelled: tokio::sync::watch::Receiver<bool>,
) {
    let id = job.job_id();
    // Bounded queue: beyond `queue_size` waiting jobs, fail at once instead of queueing forever.
    let waiting = inner.waiting.fetch_add(1, Ordering::SeqCst) + 1;
    let guard = WaitingGuard(&inner.waiting);
    if waiting > inner.queue_size {
        drop(guard);
        leave_queue(inner, id, false);
        warn!(job = %id, waiting, "render queue full");
        let message = format!(
            "the render queue is full ({} jobs waiting); try again later",
            inner.queue_size
        );
        finish(
            inner,
            id,
            FinishOutcome::Failed {
                code: FailCode::TokensExhausted,
                message,
            },
        )
        .await;
        return;
    }
    let acquired = tokio::select! {
        acquired = acquire_in_turn(inner, id) => Some(acquired),
        // Cancelled while waiting: the store has it failed already; just leave the queue.
        _ = cancelled.wait_for(|c| *c) => None,
    };
    leave_queue(inner, id, matches!(acquired, Some(Ok(_))));
    let slot = match acquired {
        None => return,
        Some(Ok(slot)) => slot,
        Some(Err(())) => {
            drop(guard);
            let message = format!(
                "the job waited more than {} s for a render slot; credits were not taken",
                inner.queue_timeout.as_secs()
            );
            finish(
                inner,
                id,
                FinishOutcome::Failed {
                    code: FailCode::TokensExhausted,
                    message,
                },
            )
            .await;
            return;
        }
    };
    drop(guard);

    // The render begins at once and the start (the charge: a store commit, which waits for the
    // writer) is made beside it, in this same task, so the slot is not held while the start
    // waits; with one slot and fast renders, that wait was most of the slot's time. Nothing of
    // the render is kept unless the job started: a start that fails cancels it at its next
    // checkpoint, and the picture is written only after the start is known.
    // The watermark is decided at the start: the render reads it when it gets to the watermark
    // (after drawing), and uses the job's own until the start has said.
    let decided = Arc::new(std::sync::OnceLock::<bool>::new());
    let start = async {
        let now = inner.clock.now();
        let started = inner
            .store
            .call(move |s| s.start_job_deferred(id, now))
            .await;
        let started = on_start(inner, id, started);
        match &started {
            Some(job) => {
                let _ = decided.set(job.watermark);
            }
            None => control.cancel(),
        }
        started
    };
    let kind = job.kind;
    let model = job.model;
    let render = async {
        let source = match kind {
            JobKind::Generate => None,
            JobKind::Edit => match read_source(inner, id, job.masked).await {
                Ok(source) => source,
                Err(failure) => {
                    drop(slot);
                    return Err(failure);
                }
            },
        };
        Ok(render_in_slot(
            inner,
            slot,
            job.clone(),
            source,
            control.clone(),
            decided.clone(),
        )
        .await)
    };
    // Only the local engines render beside the start: a remote server's render is billed or
    // queued upstream once sent, so for those (and for edits) the start comes first, as a job
    // refused at start (daily limit, credits, an app's cap) must cost nothing.
    let beside = match job.model {
        JobModel::Generate(m) => inner.renderer.is_local(m),
        JobModel::Edit => false,
    };
    let (started_job, rendered) = if beside {
        tokio::join!(start, render)
    } else {
        match start.await {
            // Dropping the render that never ran gives its slot back.
            None => return,
            started => (started, render.await),
        }
    };
    // The slot is free again.
    let Some(started_job) = started_job else {
        return;
    };
    let (rendered, mut took) = match rendered {
        Ok(rendered) => rendered,
        Err(failure) => {
            finish(inner, id, failure).await;
            return;
        }
    };
    // A render that got to its watermark before the start had decided it used the job's own; if
    // the account's PRO status changed since the job was created, the picture is made again
    // (rare), waiting for a slot like any job.
    let stale = matches!(&rendered, Ok(Ok(e)) if e.watermark != started_job.watermark);
    let rendered = if stale {
        // Only generations render beside the start; an edit's render reads the watermark the
        // start decided before it began.
        debug_assert_eq!(kind, JobKind::Generate);
        let Ok(slot) = acquire_in_turn(inner, id).await else {
            let message = format!(
                "the job waited more than {} s for a render slot; credits returned",
                inner.queue_timeout.as_secs()
            );
            let code = FailCode::TokensExhausted;
            finish(inner, id, FinishOutcome::Failed { code, message }).await;
            return;
        };
        let again;
        (again, took) = render_in_slot(inner, slot, started_job, None, control, decided).await;
        again
    } else {
        rendered
    };
    // The file is written on the blocking pool, outside the slot.
    let images_dir = inner.images_dir.clone();
    let rendered = match rendered {
        Ok(Ok(encoded)) => tokio::task::spawn_blocking(move || save_picture(&images_dir, encoded))
            .await
            .map_err(|e| e.to_string()),
        Ok(Err(e)) => Ok(Err(e)),
        Err(e) => Err(e.to_string()),
    };
    let outcome = match rendered {
        Ok(Ok(done)) => done,
        Ok(Err(RenderFailure::Render(e))) => {
            let code = match &e {
                RenderError::Overloaded(_) => FailCode::TokensExhausted,
                RenderError::Cancelled => FailCode::Cancelled,
                _ => FailCode::failed(kind),
            };
            warn!(job = %id, error = %e, "render failed");
            FinishOutcome::Failed {
                code,
                message: format!("{e}; credits returned"),
            }
        }
        Ok(Err(RenderFailure::Io(e))) => {
            error!(job = %id, error = %e, "could not write the picture");
            FinishOutcome::Failed {
                code: FailCode::failed(kind),
                message: "the picture could not be saved on the server; credits returned".into(),
            }
        }
        Err(e) => {
            error!(job = %id, error = %e, "render task crashed");
            FinishOutcome::Failed {
                code: FailCode::failed(kind),
                message: "the renderer crashed; credits returned".into(),
            }
        }
    };
    let seconds = took.as_secs_f64();
    inner.metrics.observe_render(model.id(), seconds);
    if matches!(outcome, FinishOutcome::Done { .. }) {
        let mut durations = lock(&inner.durations);
        let average = durations.entry(model.id()).or_insert(seconds);
        *average += DURATION_WEIGHT * (seconds - *average);
    }
    info!(job = %id, ms = took.as_millis() as u64, "render finished");
    finish(inner, id, outcome).await;
}

/// Renders `job` on the blocking pool, holding `slot` for the render alone (see [`render_job`]);
/// with the time the render took.
async fn render_in_slot(
    inner: &Inner,
    slot: render::pool::Slot,
    job: JobRecord,
    source: Option<Upload>,
    control: RenderControl,
    decided: Arc<std::sync::OnceLock<bool>>,
) -> (
    Result<Result<Encoded, RenderFailure>, render::pool::PoolError>,
    Duration,
) {
    let renderer = inner.renderer.clone();
    let began = Instant::now();
    let rendered = inner
        .pool
        .run(slot, move || {
            render_job(renderer.as_ref(), &job, source, &control, &decided)
        })
        .await;
    (rendered, began.elapsed())
}

/// How long a job's start may wait for a flush made by others before it flushes itself (see
/// [`Store::durable_soon`]): displays see `running` at most this late.
const START_PATIENCE: Duration = Duration::from_millis(20);

/// Reports the job's start (see `run`): `Some` with the started record if it started (watchers
/// hear of it once it is durable); `None` if it did not (failed at start: reported here; no
/// longer queued; or the store failed).
fn on_start(
    inner: &Inner,
    id: JobId,
    started: Result<(StartOutcome, Option<u64>), StoreError>,
) -> Option<JobRecord> {
    match started {
        Ok((StartOutcome::Started(job), pending)) => {
            // Readers see `running` once the start is durable (the finish's durable commit
            // covers it at the latest); that is when progress displays hear.
            let (store, watchers) = (inner.store.clone(), inner.watchers.clone());
            tokio::spawn(async move {
                if let Some(seq) = pending
                    && store.durable_soon(seq, START_PATIENCE).await.is_err()
                {
                    return;
                }
                watchers.changed(id);
            });
            Some(job)
        }
        Ok((StartOutcome::Failed(job), _)) => {
            inner.watchers.finished(id);
            inner.ended.notify_one();
            inner.metrics.job_finished(
                job.kind.as_str(),
                job.status.as_str(),
                job.error_code.map_or("", FailCode::as_str),
            );
            info!(job = %id, code = job.error_code.map_or("", FailCode::as_str), "job failed at start");
            None
        }
        Ok((StartOutcome::NotQueued(_), _)) => None,
        Err(e) => {
            error!(job = %id, error = %e, "could not start a job");
            None
        }
    }
}

/// An edit's uploaded photo (and its mask), or the job's failure if they cannot be read.
async fn read_source(
    inner: &Inner,
    id: JobId,
    masked: bool,
) -> Result<Option<Upload>, FinishOutcome> {
    let read = |path: PathBuf, what: &'static str| async move {
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(FinishOutcome::Failed {
                code: FailCode::SourceMissing,
                message: format!(
                    "the uploaded {what} is gone (lost in a server restart); credits returned"
                ),
            }),
            Err(e) => {
                error!(job = %id, error = %e, "could not read an edit's {what}");
                Err(FinishOutcome::Failed {
                    code: FailCode::EditFailed,
                    message: format!("could not read the uploaded {what}; credits returned"),
                })
            }
        }
    };
    let photo = read(source_path(&inner.sources_dir, id), "photo").await?;
    let mask = if masked {
        Some(read(mask_path(&inner.sources_dir, id), "mask").await?)
    } else {
        None
    };
    Ok(Some(Upload { photo, mask }))
}

/// An edit's photo and mask as uploaded.
struct Upload {
    photo: Vec<u8>,
    mask: Option<Vec<u8>>,
}

/// Waits for the job's turn and a render slot: jobs take slots strictly in the order they
/// joined the queue (only the first in line waits on the pool, whose semaphore is fair), and not
/// while rendering is paused (a pause that begins while the job waits for its slot sends it back
/// to waiting for the resume). Fails after `queue_timeout` of waiting, paused time not counted.
async fn acquire_in_turn(inner: &Inner, id: JobId) -> Result<render::pool::Slot, ()> {
    let mut paused = inner.paused.subscribe();
    let mut moved = inner.queue_moved.subscribe();
    let mut deadline = tokio::time::Instant::now() + inner.queue_timeout;
    loop {
        if *paused.borrow_and_update() {
            let since = tokio::time::Instant::now();
            // The receiver lives as long as `inner`'s sender, so this only ends when not paused.
            let _ = paused.wait_for(|p| !*p).await;
            deadline += since.elapsed();
        }
        moved.borrow_and_update();
        if !first_in_line(inner, id) {
            tokio::select! {
                changed = tokio::time::timeout_at(deadline, moved.changed()) => {
                    if changed.is_err() {
                        return Err(());
                    }
                }
                _ = paused.changed() => {}
            }
            continue;
        }
        let slot = match tokio::time::timeout_at(deadline, inner.pool.acquire()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) | Err(_) => return Err(()),
        };
        if !*paused.borrow_and_update() {
            return Ok(slot);
        }
    }
}

enum RenderFailure {
    Render(RenderError),
    Io(std::io::Error),
}

/// A rendered, encoded picture on its way to the disk.
struct Encoded {
    png: Vec<u8>,
    /// Whether it carries the watermark.
    watermark: bool,
    width: u32,
    height: u32,
    scene: Option<crate::store::JobScene>,
}

/// The blocking part of a job that needs a render slot: render, watermark, encode. Writing the
/// file durably (two fsyncs) happens after the slot is given back, so the next render does not
/// wait for this one's disk.
fn render_job(
    renderer: &dyn Renderer,
    job: &JobRecord,
    source: Option<Upload>,
    control: &RenderControl,
    decided: &std::sync::OnceLock<bool>,
) -> Result<Encoded, RenderFailure> {
    let rendered_prompt = job
        .enhanced_prompt
        .clone()
        .unwrap_or_else(|| job.prompt.clone());
    let picture = match source {
        None => {
            let model = match job.model {
                JobModel::Generate(m) => m,
                JobModel::Edit => Model::Fast,
            };
            let ratio = Ratio::parse(&job.ratio)
                .unwrap_or(Ratio::Square)
                .resolve_auto(&rendered_prompt);
            renderer.generate_with(
                &GenerateSpec {
                    prompt: rendered_prompt.clone(),
                    model,
                    ratio,
                    seed: job.seed,
                    noise: job.noise,
                    loras: job.loras.clone(),
                },
                control,
            )
        }
        Some(upload) => renderer.edit_with(
            &EditSpec {
                source: upload.photo,
                instruction: job.prompt.clone(),
                seed: job.seed,
                mask: upload.mask,
                loras: job.loras.clone(),
            },
            control,
        ),
    }
    .map_err(RenderFailure::Render)?;
    if control.is_cancelled() {
        return Err(RenderFailure::Render(RenderError::Cancelled));
    }
    control.set_progress(0.95);
    // Every LoRA the picture was drawn with is in its prompt as a tag (AUTOMATIC1111 reads
    // them from there), also those asked for in `loras` or dropped by the enhancer.
    let loras: Vec<(String, f32, f32)> = job
        .loras
        .iter()
        .map(|l| (l.name.clone(), l.text, l.unet))
        .collect();
    let params = PngParameters {
        prompt: render::lora_tags::with_tags(&rendered_prompt, &loras),
        seed: job.seed,
        model: job.model.id().to_string(),
        kind: job.kind.as_str(),
        details: control.details(),
        scene: control.scene().map(|mut scene| {
            // Only what the person asked for can be "not drawn": words the prompt enhancer
            // added are its own business.
            if job.enhanced_prompt.is_some() && job.kind == JobKind::Generate {
                let asked = render::procedural::mentioned(&job.prompt);
                scene.not_drawn.retain(|n| asked.contains(n));
            }
            scene
        }),
    };
    let (width, height) = (picture.width(), picture.height());
    let watermark = decided.get().copied().unwrap_or(job.watermark);
    let png = render::finish(picture, watermark, &params).map_err(RenderFailure::Render)?;
    Ok(Encoded {
        png,
        watermark,
        width,
        height,
        scene: params.scene.map(|s| crate::store::JobScene {
            drawn: s.drawn,
            not_drawn: s.not_drawn,
        }),
    })
}

/// Writes the picture durably under a new random name; the job's `Done` outcome.
fn save_picture(images_dir: &Path, e: Encoded) -> Result<FinishOutcome, RenderFailure> {
    let token = hex::encode(rand::rng().random::<[u8; 16]>());
    write_durably(images_dir, &format!("{token}.png"), &e.png).map_err(RenderFailure::Io)?;
    Ok(FinishOutcome::Done {
        scene: e.scene,
        photo_token: token,
        width: e.width,
        height: e.height,
    })
}
