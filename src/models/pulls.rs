//! Downloads the server runs: started from the operator console or by `pictor models pull`
//! while the server is up. Each runs as a task of its own (never in the request that started
//! it), one per model name; it is recorded in the store so a restart resumes it (the files
//! fetched so far are kept, the one in progress continues with a `Range` request); it can be
//! cancelled (its partial files are deleted); its bytes, rate and time left are read live from
//! [`Pulls::views`]. Start, cancel, failure and the model's installation are in the audit log.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use super::hub::{self, PullError, PullProgress};
use crate::state::AppState;
use crate::store::models::PullRecord;

/// How a download stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PullStatus {
    Running,
    Done,
    Failed,
    Cancelled,
}

struct Entry {
    record: PullRecord,
    progress: Arc<PullProgress>,
    started: Instant,
    status: Mutex<(PullStatus, Option<String>)>,
}

/// One download as the console and the CLI show it.
#[derive(Debug, Clone, Serialize)]
pub struct PullView {
    pub name: String,
    pub repo: String,
    pub status: PullStatus,
    /// Bytes on disk and in all (0 until the hub's listing is read).
    pub bytes_done: u64,
    pub bytes_total: u64,
    /// Bytes per second over the network in this run.
    pub rate: u64,
    /// Seconds left at that rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eta_seconds: Option<u64>,
    /// The file being fetched.
    pub file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The server's downloads (see the module documentation).
pub struct Pulls {
    endpoint: String,
    token: Option<String>,
    entries: Mutex<BTreeMap<String, Arc<Entry>>>,
}

impl Pulls {
    /// Downloads from `HF_ENDPOINT` (else the hub), with `HF_TOKEN` for gated repositories.
    pub fn from_env() -> Pulls {
        Pulls {
            endpoint: std::env::var("HF_ENDPOINT")
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| hub::DEFAULT_ENDPOINT.to_string()),
            token: std::env::var("HF_TOKEN").ok().filter(|v| !v.is_empty()),
            entries: Mutex::new(BTreeMap::new()),
        }
    }

    /// Every download of this run of the server, running ones first.
    pub fn views(&self) -> Vec<PullView> {
        let entries: Vec<Arc<Entry>> = self
            .entries
            .lock()
            .map(|g| g.values().cloned().collect())
            .unwrap_or_default();
        let mut out: Vec<PullView> = entries.iter().map(|e| view(e)).collect();
        out.sort_by_key(|v| v.status != PullStatus::Running);
        out
    }

    /// Whether `name` is being downloaded now.
    pub fn running(&self, name: &str) -> bool {
        self.entries.lock().is_ok_and(|g| {
            g.get(name)
                .is_some_and(|e| e.status.lock().is_ok_and(|s| s.0 == PullStatus::Running))
        })
    }

    /// Starts a download recorded as `record` (checked and stored by the caller: see
    /// [`Pulls::begin`]) on its own task.
    fn spawn(self: &Arc<Self>, state: &AppState, record: PullRecord) {
        let entry = self.register(record);
        let (pulls, state) = (self.clone(), state.clone());
        tokio::spawn(async move { pulls.run(&state, &entry).await });
    }

    /// A running entry for `record`, listed with the downloads (replacing an ended one).
    fn register(&self, record: PullRecord) -> Arc<Entry> {
        let entry = Arc::new(Entry {
            progress: Arc::new(PullProgress::default()),
            started: Instant::now(),
            status: Mutex::new((PullStatus::Running, None)),
            record,
        });
        if let Ok(mut g) = self.entries.lock() {
            g.insert(entry.record.name.clone(), entry.clone());
        }
        entry
    }

    /// Checks and records a new download, audits it and starts it.
    pub async fn begin(
        self: &Arc<Self>,
        state: &AppState,
        record: PullRecord,
    ) -> Result<(), String> {
        crate::models::check_name(&record.name).map_err(|e| e.to_string())?;
        if self.running(&record.name) {
            return Err(format!("{:?} is already being downloaded", record.name));
        }
        let dest = state.config.data_dir.join("models").join(&record.name);
        if dest.exists() {
            return Err(format!(
                "{} already exists: remove the model first (`pictor models remove {} --delete-files`)",
                dest.display(),
                record.name
            ));
        }
        let (store, r) = (state.store.clone(), record.clone());
        let now = state.clock.now();
        store
            .call(move |s| {
                s.add_pull(&r)?;
                s.audit(
                    &r.actor,
                    "model.pull",
                    None,
                    &format!("{}@{} → {}", r.repo, r.revision, r.name),
                    now,
                )
            })
            .await
            .map_err(|e| e.to_string())?;
        self.spawn(state, record);
        Ok(())
    }

    /// Downloads again the damaged files of an installed model pulled from the hub (see
    /// [`hub::repair`]), as a task shown with the downloads; audited.
    pub async fn repair(
        self: &Arc<Self>,
        state: &AppState,
        model: &crate::store::models::ModelRecord,
        actor: String,
    ) -> Result<(), String> {
        if self.running(&model.name) {
            return Err(format!("{:?} is already being downloaded", model.name));
        }
        let source = model.source.as_deref().ok_or_else(|| {
            format!(
                "{:?} was not downloaded from the hub: nothing to repair from",
                model.name
            )
        })?;
        let (repo, commit) = source.split_once('@').unwrap_or((source, ""));
        let record = PullRecord {
            name: model.name.clone(),
            repo: repo.to_string(),
            revision: commit.to_string(),
            variant: None,
            started_at: state.clock.now(),
            actor,
        };
        let entry = self.register(record);
        let (pulls, state, dir) = (
            self.clone(),
            state.clone(),
            std::path::PathBuf::from(&model.path),
        );
        tokio::spawn(async move {
            let r = &entry.record;
            let outcome = hub::repair(
                &pulls.endpoint,
                pulls.token.clone(),
                &dir,
                Some(entry.progress.clone()),
            )
            .await;
            let (status, error, detail) = match outcome {
                Ok(n) => (
                    PullStatus::Done,
                    None,
                    format!("{}: {n} files downloaded again", r.name),
                ),
                Err(e) => (
                    PullStatus::Failed,
                    Some(e.to_string()),
                    format!("{}: {e}", r.name),
                ),
            };
            let (actor, now) = (r.actor.clone(), state.clock.now());
            let action = if error.is_none() {
                "model.repair"
            } else {
                "model.repair.failed"
            };
            if let Err(e) = state
                .store
                .call(move |s| s.audit(&actor, action, None, &detail, now))
                .await
            {
                tracing::error!(error = %e, "auditing a repair");
            }
            if let Ok(mut s) = entry.status.lock() {
                *s = (status, error);
            }
        });
        Ok(())
    }

    /// Resumes the downloads a stopped server left (at start).
    pub async fn resume(self: &Arc<Self>, state: &AppState) {
        let store = state.store.clone();
        let records = match store.call(|s| s.pulls()).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "reading the downloads to resume");
                return;
            }
        };
        for r in records {
            tracing::info!(model = %r.name, repo = %r.repo, "resuming a download");
            self.spawn(state, r);
        }
    }

    /// Asks a running download to stop; `false` when there is none of that name.
    pub fn cancel(&self, name: &str) -> bool {
        let entry = self.entries.lock().ok().and_then(|g| g.get(name).cloned());
        match entry {
            Some(e) if e.status.lock().is_ok_and(|s| s.0 == PullStatus::Running) => {
                e.progress.cancel.store(true, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    async fn run(&self, state: &AppState, entry: &Arc<Entry>) {
        let r = &entry.record;
        let models_dir = state.config.data_dir.join("models");
        let pull = hub::Pull {
            endpoint: self.endpoint.clone(),
            token: self.token.clone(),
            repo: r.repo.clone(),
            revision: r.revision.clone(),
            variant: r.variant.clone(),
            dest: models_dir.join(&r.name),
            progress: false,
            approve: None,
            sink: Some(entry.progress.clone()),
            extras: hub::extras_for(&r.repo),
        };
        let outcome = match std::fs::create_dir_all(&models_dir) {
            Ok(()) => hub::pull(&pull).await,
            Err(e) => Err(PullError::Io(
                format!("cannot create {}", models_dir.display()),
                e,
            )),
        };
        let (status, error, action, detail) = match outcome {
            Ok(report) => match install(state, r, &report).await {
                Ok(()) => (PullStatus::Done, None, None, String::new()),
                Err(e) => (
                    PullStatus::Failed,
                    Some(e.clone()),
                    Some("model.pull.failed"),
                    e,
                ),
            },
            Err(PullError::Cancelled) => (
                PullStatus::Cancelled,
                None,
                Some("model.pull.cancel"),
                r.repo.clone(),
            ),
            Err(e) => {
                let m = e.to_string();
                (
                    PullStatus::Failed,
                    Some(m.clone()),
                    Some("model.pull.failed"),
                    m,
                )
            }
        };
        match &error {
            Some(e) => tracing::warn!(model = %r.name, error = %e, "download failed"),
            None => tracing::info!(model = %r.name, ?status, "download ended"),
        }
        let (name, actor, now) = (r.name.clone(), r.actor.clone(), state.clock.now());
        let result = state
            .store
            .call(move |s| {
                s.remove_pull(&name)?;
                if let Some(action) = action {
                    s.audit(&actor, action, None, &format!("{name}: {detail}"), now)?;
                }
                Ok::<_, crate::store::StoreError>(())
            })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "recording the end of a download");
        }
        if let Ok(mut s) = entry.status.lock() {
            *s = (status, error);
        }
    }
}

/// Registers a finished download as an installed model (audited as `model.add`) and applies
/// the tiers again (a mapping may have waited for it).
async fn install(state: &AppState, r: &PullRecord, report: &hub::PullReport) -> Result<(), String> {
    let path = std::fs::canonicalize(&report.path)
        .map_err(|e| format!("{}: {e}", report.path.display()))?;
    let req = crate::ops::AdminRequest::ModelAdd {
        name: r.name.clone(),
        path: path.display().to_string(),
        source: Some(format!("{}@{}", report.repo, report.commit)),
        sha256: None,
        lora_for: None,
    };
    let (secrets, actor, now) = (
        state.idp.secrets.clone(),
        r.actor.clone(),
        state.clock.now(),
    );
    let out = state
        .store
        .call(move |s| {
            Ok::<_, crate::store::StoreError>(crate::ops::execute_as(s, &secrets, req, now, &actor))
        })
        .await
        .map_err(|e| e.to_string())?;
    out.map_err(|e| e.to_string())?;
    state.reload_tiers().await;
    Ok(())
}

fn view(e: &Entry) -> PullView {
    let p = &e.progress;
    let (done, total) = (
        p.done.load(Ordering::Relaxed),
        p.total.load(Ordering::Relaxed),
    );
    let secs = e.started.elapsed().as_secs_f64().max(0.001);
    let rate = (p.fetched.load(Ordering::Relaxed) as f64 / secs) as u64;
    let (status, error) = e
        .status
        .lock()
        .map(|s| s.clone())
        .unwrap_or((PullStatus::Failed, None));
    let eta_seconds = (status == PullStatus::Running && rate > 0 && total > 0)
        .then(|| total.saturating_sub(done) / rate.max(1));
    PullView {
        name: e.record.name.clone(),
        repo: e.record.repo.clone(),
        status,
        bytes_done: done,
        bytes_total: total,
        rate,
        eta_seconds,
        file: p.file.lock().map(|f| f.clone()).unwrap_or_default(),
        error,
    }
}
