//! Model backends: a model (or edits) served by an existing inference server instead of the
//! built-in renderer — an OpenAI-compatible images API or AUTOMATIC1111/Forge.
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
mod config;
mod http;
mod openai;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use image::RgbaImage;

pub use config::{BackendConfig, BackendKind, BackendsConfig, parse_backends_toml};

use super::decode::{self, DecodeLimits};
use super::{EditSpec, GenerateSpec, Model, Picture, RenderControl, RenderError, Renderer, edit};

/// Sends configured models (and edits) to their inference servers, the rest to `fallback`.
pub struct Router {
    fallback: Arc<dyn Renderer>,
    models: HashMap<Model, BackendConfig>,
    edit: Option<BackendConfig>,
    /// One request at a time per A1111 server (by URL): its progress and interrupt endpoints
    /// speak of "the" running job, so a job must be the only one Pictor has there. A1111 renders
    /// one job at a time anyway.
    a1111_turns: HashMap<String, Arc<Mutex<()>>>,
}

impl Router {
    pub fn new(config: BackendsConfig, fallback: Arc<dyn Renderer>) -> Router {
        let models: HashMap<Model, BackendConfig> = Model::ALL
            .into_iter()
            .filter_map(|m| config.for_model(m).map(|c| (m, c.clone())))
            .collect();
        let a1111_turns = models
            .values()
            .chain(config.edit.as_ref())
            .filter(|c| c.kind == BackendKind::A1111)
            .map(|c| (http::base(&c.url).to_string(), Arc::default()))
            .collect();
        Router {
            fallback,
            models,
            edit: config.edit,
            a1111_turns,
        }
    }

    /// Waits for the A1111 server's turn (a cancel ends the wait); other kinds go at once.
    fn turn(
        &self,
        cfg: &BackendConfig,
        control: &RenderControl,
    ) -> Result<Option<MutexGuard<'_, ()>>, RenderError> {
        let Some(lock) = self.a1111_turns.get(http::base(&cfg.url)) else {
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
}

impl Renderer for Router {
    fn engine(&self, model: Model) -> String {
        match self.models.get(&model).map(|c| c.kind) {
            Some(BackendKind::OpenAi) => "openai".into(),
            Some(BackendKind::A1111) => "a1111".into(),
            None => self.fallback.engine(model),
        }
    }

    /// A remote render follows `control`: a cancel abandons the request (A1111 is
    /// interrupted) and A1111's own progress is the job's.
    fn generate_with(
        &self,
        spec: &GenerateSpec,
        control: &RenderControl,
    ) -> Result<Picture, RenderError> {
        let Some(cfg) = self.models.get(&spec.model) else {
            return self.fallback.generate_with(spec, control);
        };
        let (w, h) = spec.model.dimensions(spec.ratio.resolve_auto(&spec.prompt));
        let _turn = self.turn(cfg, control)?;
        let bytes = match cfg.kind {
            BackendKind::OpenAi => openai::generate(cfg, spec, w, h, control),
            BackendKind::A1111 => a1111::txt2img(cfg, spec, w, h, control),
        }?;
        Ok(Picture(fit_exact(decode_result(&bytes)?, w, h)))
    }

    fn edit_with(&self, spec: &EditSpec, control: &RenderControl) -> Result<Picture, RenderError> {
        let Some(cfg) = &self.edit else {
            return self.fallback.edit_with(spec, control);
        };
        let source = decode::decode(&spec.source, &DecodeLimits::default())?;
        let (w, h) =
            edit::resized_dimensions(source.width(), source.height(), edit::Resize::Scale(1.0));
        let _turn = self.turn(cfg, control)?;
        let bytes = match cfg.kind {
            BackendKind::OpenAi => openai::edit(cfg, spec, &source, control),
            BackendKind::A1111 => a1111::img2img(cfg, spec, &source, control),
        }?;
        Ok(Picture(fit_exact(decode_result(&bytes)?, w, h)))
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

/// Scales `img` to cover `w`x`h` and crops the centre: exactly the size the job asked for.
pub fn fit_exact(img: RgbaImage, w: u32, h: u32) -> RgbaImage {
    let (iw, ih) = img.dimensions();
    if (iw, ih) == (w, h) || w == 0 || h == 0 || iw == 0 || ih == 0 {
        return img;
    }
    let k = (f64::from(w) / f64::from(iw)).max(f64::from(h) / f64::from(ih));
    let sw = ((f64::from(iw) * k).ceil() as u32).max(w);
    let sh = ((f64::from(ih) * k).ceil() as u32).max(h);
    let scaled = image::imageops::resize(&img, sw, sh, image::imageops::FilterType::CatmullRom);
    image::imageops::crop_imm(&scaled, (sw - w) / 2, (sh - h) / 2, w, h).to_image()
}

/// PNG bytes of an image (what the servers are sent).
fn png_bytes(img: &RgbaImage) -> Result<Vec<u8>, RenderError> {
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .map_err(|e| RenderError::Failed(format!("cannot encode the source image: {e}")))?;
    Ok(out.into_inner())
}
