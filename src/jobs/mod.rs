//! The job engine: runs queued jobs through the render pool and records how they end.
//!
//! One tokio task per job waits (fairly) for a render slot, starts the job (the charge happens in
//! that transaction), renders on the blocking pool, writes the PNG, and finishes the job (refund on
//! failure, in the same transaction), then wakes long-polls. The queue itself is persistent: the
//! store's pending-jobs table, re-read at start.

pub mod watch;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rand::RngExt;
use tracing::{error, info, warn};

use crate::clock::Clock;
use crate::render::{
    self, EditSpec, GenerateSpec, Model, PngParameters, Ratio, RenderControl, RenderError,
    RenderPool, Renderer,
};
use crate::store::{FinishOutcome, JobId, JobKind, JobRecord, StartOutcome, Store, StoreError};
pub use watch::{JobWatchers, Subscription};

/// Failed-job codes (part of the API; never renamed).
pub mod codes {
    pub const INSUFFICIENT_CREDITS: &str = "insufficient_credits";
    pub const DAILY_LIMIT: &str = "daily_limit";
    pub const TOKENS_EXHAUSTED: &str = "tokens_exhausted";
    pub const GENERATION_FAILED: &str = "generation_failed";
    pub const EDIT_FAILED: &str = "edit_failed";
    pub const SOURCE_MISSING: &str = "source_missing";
}

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
}

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
            }),
        }
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
        // The job's log lines carry its id, and the request id of the request that created it.
        let span = tracing::info_span!("job", job = %job.job_id());
        tokio::spawn(
            async move {
                let id = job.job_id();
                run(&inner, job).await;
                inner.alive.fetch_sub(1, Ordering::SeqCst);
                inner.watchers.finished(id);
            }
            .instrument(span),
        );
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

pub fn source_path(sources_dir: &Path, id: JobId) -> PathBuf {
    sources_dir.join(format!("{id}.src"))
}

/// Writes bytes durably: temp file, fsync, rename, fsync of the directory (where supported).
pub fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    // A full disk or any other failure leaves nothing half-written behind.
    written.inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(path)
}

fn failed_code(kind: JobKind) -> &'static str {
    match kind {
        JobKind::Generate => codes::GENERATION_FAILED,
        JobKind::Edit => codes::EDIT_FAILED,
    }
}

struct WaitingGuard<'a>(&'a AtomicUsize);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn finish(inner: &Inner, id: JobId, outcome: FinishOutcome) {
    let now = inner.clock.now();
    match inner
        .store
        .call(move |s| s.finish_job(id, outcome, now))
        .await
    {
        Ok(job) => {
            // Wake long-polls the moment the finishing transaction has committed.
            inner.watchers.finished(id);
            inner.metrics.job_finished(
                job.kind.as_str(),
                job.status.as_str(),
                job.error_code.as_deref().unwrap_or(""),
            );
            info!(job = %id, status = job.status.as_str(), code = job.error_code.as_deref().unwrap_or(""), "job finished");
        }
        // The job stays pending in the store and is resolved at the next start.
        Err(e) => error!(job = %id, error = %e, "could not record the end of a job"),
    }
}

async fn run(inner: &Inner, job: JobRecord) {
    let id = job.job_id();
    // Bounded queue: beyond `queue_size` waiting jobs, fail at once instead of queueing forever.
    let waiting = inner.waiting.fetch_add(1, Ordering::SeqCst) + 1;
    let guard = WaitingGuard(&inner.waiting);
    if waiting > inner.queue_size {
        drop(guard);
        warn!(job = %id, waiting, "render queue full");
        let message = format!(
            "the render queue is full ({} jobs waiting); try again later",
            inner.queue_size
        );
        finish(
            inner,
            id,
            FinishOutcome::Failed {
                code: codes::TOKENS_EXHAUSTED,
                message,
            },
        )
        .await;
        return;
    }
    let slot = match acquire_unpaused(inner).await {
        Ok(slot) => slot,
        Err(()) => {
            drop(guard);
            let message = format!(
                "the job waited more than {} s for a render slot; credits were not taken",
                inner.queue_timeout.as_secs()
            );
            finish(
                inner,
                id,
                FinishOutcome::Failed {
                    code: codes::TOKENS_EXHAUSTED,
                    message,
                },
            )
            .await;
            return;
        }
    };
    drop(guard);

    let now = inner.clock.now();
    let job = match inner.store.call(move |s| s.start_job(id, now)).await {
        Ok(StartOutcome::Started(job)) => job,
        Ok(StartOutcome::Failed(job)) => {
            inner.watchers.finished(id);
            inner.metrics.job_finished(
                job.kind.as_str(),
                job.status.as_str(),
                job.error_code.as_deref().unwrap_or(""),
            );
            info!(job = %id, code = job.error_code.as_deref().unwrap_or(""), "job failed at start");
            return;
        }
        Ok(StartOutcome::NotQueued(_)) => return,
        Err(e) => {
            error!(job = %id, error = %e, "could not start a job");
            return;
        }
    };

    let kind = job.kind;
    let source = match kind {
        JobKind::Generate => None,
        JobKind::Edit => {
            let path = source_path(&inner.sources_dir, id);
            match tokio::fs::read(&path).await {
                Ok(bytes) => Some(bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let message =
                        "the uploaded photo is gone (lost in a server restart); credits returned"
                            .to_string();
                    finish(
                        inner,
                        id,
                        FinishOutcome::Failed {
                            code: codes::SOURCE_MISSING,
                            message,
                        },
                    )
                    .await;
                    return;
                }
                Err(e) => {
                    error!(job = %id, error = %e, "could not read an edit source");
                    let message = "could not read the uploaded photo; credits returned".to_string();
                    finish(
                        inner,
                        id,
                        FinishOutcome::Failed {
                            code: codes::EDIT_FAILED,
                            message,
                        },
                    )
                    .await;
                    return;
                }
            }
        }
    };

    let renderer = inner.renderer.clone();
    let images_dir = inner.images_dir.clone();
    let model_label = job.model.clone();
    let started = std::time::Instant::now();
    // Progress and cancellation of this render (exposed through the jobs service).
    let control = RenderControl::default();
    let rendered = inner
        .pool
        .run(slot, move || {
            render_job(renderer.as_ref(), &job, source, &images_dir, &control)
        })
        .await;
    let outcome = match rendered {
        Ok(Ok(done)) => done,
        Ok(Err(RenderFailure::Render(e))) => {
            let code = match &e {
                RenderError::Overloaded(_) => codes::TOKENS_EXHAUSTED,
                _ => failed_code(kind),
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
                code: failed_code(kind),
                message: "the picture could not be saved on the server; credits returned".into(),
            }
        }
        Err(e) => {
            error!(job = %id, error = %e, "render task crashed");
            FinishOutcome::Failed {
                code: failed_code(kind),
                message: "the renderer crashed; credits returned".into(),
            }
        }
    };
    inner
        .metrics
        .observe_render(&model_label, started.elapsed().as_secs_f64());
    info!(job = %id, ms = started.elapsed().as_millis() as u64, "render finished");
    finish(inner, id, outcome).await;
    if kind == JobKind::Edit {
        let _ = tokio::fs::remove_file(source_path(&inner.sources_dir, id)).await;
    }
}

/// Waits until rendering is not paused, then for a render slot (within the queue timeout). A pause
/// that begins while the job waits for its slot sends it back to waiting for the resume.
async fn acquire_unpaused(inner: &Inner) -> Result<render::pool::Slot, ()> {
    let mut paused = inner.paused.subscribe();
    loop {
        // The receiver lives as long as `inner`'s sender, so this only ends when not paused.
        let _ = paused.wait_for(|p| !*p).await;
        let slot = match tokio::time::timeout(inner.queue_timeout, inner.pool.acquire()).await {
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

/// The blocking part of a job: render, watermark, encode, write the file.
fn render_job(
    renderer: &dyn Renderer,
    job: &JobRecord,
    source: Option<Vec<u8>>,
    images_dir: &Path,
    control: &RenderControl,
) -> Result<FinishOutcome, RenderFailure> {
    let rendered_prompt = job
        .enhanced_prompt
        .clone()
        .unwrap_or_else(|| job.prompt.clone());
    let picture = match source {
        None => {
            let model = Model::parse(&job.model).unwrap_or(Model::Fast);
            let ratio = Ratio::parse(&job.ratio)
                .unwrap_or(Ratio::Square)
                .resolve_auto(&rendered_prompt);
            renderer.generate_with(
                &GenerateSpec {
                    prompt: rendered_prompt.clone(),
                    model,
                    ratio,
                    seed: job.seed,
                },
                control,
            )
        }
        Some(bytes) => renderer.edit_with(
            &EditSpec {
                source: bytes,
                instruction: job.prompt.clone(),
                seed: job.seed,
            },
            control,
        ),
    }
    .map_err(RenderFailure::Render)?;
    let params = PngParameters {
        prompt: rendered_prompt,
        seed: job.seed,
        model: job.model.clone(),
        kind: job.kind.as_str(),
        details: control.details(),
    };
    let (width, height) = (picture.width(), picture.height());
    let png = render::finish(picture, job.watermark, &params).map_err(RenderFailure::Render)?;
    let token = hex::encode(rand::rng().random::<[u8; 16]>());
    write_durably(images_dir, &format!("{token}.png"), &png).map_err(RenderFailure::Io)?;
    Ok(FinishOutcome::Done {
        photo_token: token,
        width,
        height,
    })
}
