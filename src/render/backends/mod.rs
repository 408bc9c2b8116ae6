//! Model backends: a model (or edits) served by existing inference servers instead of the
//! built-in renderer — an OpenAI-compatible images API, AUTOMATIC1111/Forge or ComfyUI, one
//! server or a pool of them (`pool`).
//!
//! [`Router`] is a [`Renderer`]: configured models go to their server, everything else to the
//! fallback (the procedural renderer). Calls run on the render pool's blocking threads; each
//! call drives its HTTP request on a small private runtime in a scoped thread, so it works
//! whatever runtime (if any) the caller has. Every attempt has a timeout; timeouts, connection
//! errors, 5xx and overload answers are retried with exponential backoff. What finally fails is
//! `RenderError::Failed` (`generation_failed`/`edit_failed`, credits returned), except an
//! overloaded server (HTTP 429/503, "queue is full"), which is `RenderError::Overloaded`
//! (`tokens_exhausted`). Pictures that come back are cropped and resized to the exact size the
//! job asked for.

mod a1111;
pub mod comfyui;
mod config;
mod http;
mod openai;
pub mod pool;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Instant;

use image::RgbaImage;

pub use config::{BackendConfig, BackendKind, BackendsConfig, parse_backends_toml};
pub use http::CallError;
use pool::{Endpoint, EndpointStatus, Pool};

use super::decode::{self, DecodeLimits};
use super::{EditSpec, GenerateSpec, Model, Picture, RenderControl, RenderError, Renderer, edit};

/// Sends configured models (and edits) to their inference servers, the rest to `fallback`.
pub struct Router {
    fallback: Arc<dyn Renderer>,
    models: HashMap<Model, Pool>,
    edit: Option<Pool>,
    /// Every endpoint once (shared by the pools that name it), with what it serves.
    endpoints: Vec<(Arc<Endpoint>, Vec<String>)>,
    /// One request at a time per A1111 server (by URL): its progress and interrupt endpoints
    /// speak of "the" running job, so a job must be the only one Pictor has there. A1111 renders
    /// one job at a time anyway.
    a1111_turns: HashMap<String, Arc<Mutex<()>>>,
}

impl Router {
    pub fn new(config: BackendsConfig, fallback: Arc<dyn Renderer>) -> Router {
        let mut endpoints: Vec<(Arc<Endpoint>, Vec<String>)> = Vec::new();
        let mut pool_of = |cfg: &BackendConfig, serves: &str| -> Pool {
            let members = cfg
                .endpoints()
                .iter()
                .map(|url| {
                    let base = http::base(url);
                    match endpoints
                        .iter_mut()
                        .find(|(e, _)| e.kind == cfg.kind && e.url == base)
                    {
                        Some((e, s)) => {
                            s.push(serves.to_owned());
                            e.clone()
                        }
                        None => {
                            let e = Arc::new(Endpoint::new(cfg.kind, url));
                            endpoints.push((e.clone(), vec![serves.to_owned()]));
                            e
                        }
                    }
                })
                .collect();
            Pool::new(cfg.clone(), members)
        };
        let models: HashMap<Model, Pool> = Model::ALL
            .into_iter()
            .filter_map(|m| config.for_model(m).map(|c| (m, pool_of(c, m.id()))))
            .collect();
        let edit = config.edit.as_ref().map(|c| pool_of(c, "edit"));
        let a1111_turns = endpoints
            .iter()
            .filter(|(e, _)| e.kind == BackendKind::A1111)
            .map(|(e, _)| (e.url.clone(), Arc::default()))
            .collect();
        Router {
            fallback,
            models,
            edit,
            endpoints,
            a1111_turns,
        }
    }

    /// Waits for the A1111 server's turn (a cancel ends the wait); other kinds go at once.
    fn turn(
        &self,
        endpoint: &Endpoint,
        control: &RenderControl,
    ) -> Result<Option<MutexGuard<'_, ()>>, RenderError> {
        let Some(lock) = self.a1111_turns.get(&endpoint.url) else {
            return Ok(None);
        };
        loop {
            match lock.try_lock() {
                Ok(guard) => return Ok(Some(guard)),
                Err(TryLockError::Poisoned(p)) => return Ok(Some(p.into_inner())),
                Err(TryLockError::WouldBlock) => {
                    if control.is_cancelled() {
                        return Err(RenderError::Cancelled);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
        }
    }

    /// Whether `model` is served remotely.
    pub fn is_remote(&self, model: Model) -> bool {
        self.models.contains_key(&model)
    }

    /// Runs `call` on the pool's endpoints until one answers: the least busy healthy one first,
    /// then (if it is unavailable or overloaded) the next, within this one render. A refusal
    /// (4xx, unusable answer) ends it at once: another server would refuse too.
    fn call(
        &self,
        pool: &Pool,
        control: &RenderControl,
        call: impl Fn(&BackendConfig, &str) -> Result<Vec<u8>, CallError>,
    ) -> Result<Vec<u8>, RenderError> {
        let pooled = pool.endpoints.len() > 1;
        // In a pool the next server is the retry; alone, the server's own retries apply.
        let cfg = if pooled {
            BackendConfig {
                retries: 0,
                ..pool.cfg.clone()
            }
        } else {
            pool.cfg.clone()
        };
        let down_for = std::time::Duration::from_secs(pool.cfg.probe_secs);
        let mut tried = Vec::new();
        let mut last: Option<CallError> = None;
        while let Some((i, busy)) = pool.pick(&tried) {
            tried.push(i);
            let endpoint = &pool.endpoints[i];
            // Counted busy from the pick on, also while waiting for an A1111 server's turn.
            let turn = self.turn(endpoint, control)?;
            let started = Instant::now();
            let result = call(&cfg, &endpoint.url);
            drop((turn, busy));
            match result {
                Ok(bytes) => {
                    endpoint.answered(Some(started.elapsed()));
                    return Ok(bytes);
                }
                Err(CallError::Cancelled) => return Err(RenderError::Cancelled),
                Err(e @ CallError::Refused(_)) => {
                    endpoint.answered(None);
                    return Err(e.into());
                }
                Err(e @ CallError::Overloaded(_)) => {
                    // Busy, not broken: no mark, but the job moves on.
                    last = Some(e);
                }
                Err(CallError::Unavailable(m)) => {
                    endpoint.failed(&m, pool.cfg.down_after, down_for);
                    tracing::warn!(endpoint = %endpoint.url, error = %m, "backend endpoint failed");
                    last = Some(CallError::Unavailable(m));
                }
            }
            if control.is_cancelled() {
                return Err(RenderError::Cancelled);
            }
        }
        Err(match last {
            Some(e) if pooled => match e {
                CallError::Overloaded(m) => {
                    RenderError::Overloaded(format!("every server of the pool is busy ({m})"))
                }
                other => RenderError::Failed(format!(
                    "no server of the pool could render it (last: {})",
                    RenderError::from(other)
                )),
            },
            Some(e) => e.into(),
            None => RenderError::Failed(
                "every server of the pool is down; they are probed again shortly".into(),
            ),
        })
    }
}

impl Renderer for Router {
    fn engine(&self, model: Model) -> String {
        match self.models.get(&model) {
            Some(pool) => pool.cfg.kind.as_str().to_owned(),
            None => self.fallback.engine(model),
        }
    }

    fn is_local(&self, model: Model) -> bool {
        !self.is_remote(model) && self.fallback.is_local(model)
    }

    /// With an edit server every edit goes there; without one, the fallback's exact edits.
    fn exact_edit(&self, instruction: &str) -> Result<bool, RenderError> {
        match &self.edit {
            Some(_) => Ok(false),
            None => self.fallback.exact_edit(instruction),
        }
    }

    /// The painter's exact operations (rotate, crop…) after a model's edit.
    fn apply_exact(
        &self,
        picture: Picture,
        instruction: &str,
        seed: u64,
    ) -> Result<(Picture, Vec<String>), RenderError> {
        self.fallback.apply_exact(picture, instruction, seed)
    }

    fn backends_status(&self) -> Vec<EndpointStatus> {
        self.endpoints
            .iter()
            .map(|(e, serves)| e.status(serves.clone()))
            .collect()
    }

    /// A remote render follows `control`: a cancel abandons the request (A1111 and ComfyUI are
    /// interrupted) and the server's own progress is the job's.
    fn generate_with(
        &self,
        spec: &GenerateSpec,
        control: &RenderControl,
    ) -> Result<Picture, RenderError> {
        let Some(pool) = self.models.get(&spec.model) else {
            return self.fallback.generate_with(spec, control);
        };
        let (w, h) = spec.model.dimensions(spec.ratio.resolve_auto(&spec.prompt));
        let bytes = self.call(pool, control, |cfg, base| match cfg.kind {
            BackendKind::OpenAi => openai::generate(cfg, base, spec, w, h, control),
            BackendKind::A1111 => a1111::txt2img(cfg, base, spec, w, h, control),
            BackendKind::ComfyUi => comfyui::txt2img(cfg, base, spec, w, h, control),
        })?;
        Ok(Picture(fit_exact(decode_result(&bytes)?, w, h)))
    }

    fn edit_with(&self, spec: &EditSpec, control: &RenderControl) -> Result<Picture, RenderError> {
        let Some(pool) = &self.edit else {
            return self.fallback.edit_with(spec, control);
        };
        let source = decode::decode(&spec.source, &DecodeLimits::default())?;
        let (w, h) =
            edit::resized_dimensions(source.width(), source.height(), edit::Resize::Scale(1.0));
        let bytes = self.call(pool, control, |cfg, base| match cfg.kind {
            BackendKind::OpenAi => openai::edit(cfg, base, spec, &source, control),
            BackendKind::A1111 => a1111::img2img(cfg, base, spec, &source, control),
            BackendKind::ComfyUi => comfyui::img2img(cfg, base, spec, &source, control),
        })?;
        let out = fit_exact(decode_result(&bytes)?, w, h);
        // A mask: the server edited the whole picture; only the masked area keeps its changes.
        Ok(Picture(match &spec.mask {
            Some(m) => {
                let mask =
                    decode::mask(m, source.width(), source.height(), &DecodeLimits::default())?;
                decode::keep_outside_mask(out, &source, &mask)
            }
            None => out,
        }))
    }

    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError> {
        self.generate_with(spec, &RenderControl::default())
    }

    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError> {
        self.edit_with(spec, &RenderControl::default())
    }
}

fn decode_result(bytes: &[u8]) -> Result<RgbaImage, RenderError> {
    decode::decode(bytes, &DecodeLimits::default())
        .map_err(|e| RenderError::Failed(format!("the backend returned an unusable image: {e}")))
}

pub use pictor_core::fit_exact;

/// PNG bytes of an image (what the servers are sent).
fn png_bytes(img: &RgbaImage) -> Result<Vec<u8>, CallError> {
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .map_err(|e| CallError::Refused(format!("cannot encode the source image: {e}")))?;
    Ok(out.into_inner())
}
