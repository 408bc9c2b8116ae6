//! What Pictor's engines and its server share: the [`Renderer`] trait and the job-facing types
//! (pictures, specs, progress and cancellation, errors), the model catalogue, upload decoding
//! with limits, PNG encoding with A1111 parameters, the watermark, bounded reads of files from
//! outside ([`files`]) and what a model on disk is ([`models`]).
//!
//! Dependency direction: the server (`pictor`) → the engines (`pictor-painter`,
//! `pictor-diffusion`) → this crate. Nothing here knows HTTP, the store or accounts.
//! Everything is synchronous; callers run renders on a bounded blocking pool.

pub mod catalog;
pub mod decode;
pub mod encode;
pub mod files;
pub mod gpu;
pub mod infotext;
pub mod known_models;
pub mod lora_tags;
pub mod models;
pub mod watermark;

use std::fmt;

pub use catalog::{Model, NoiseKind, Ratio};
pub use decode::{DecodeLimits, SourceInfo};

/// An RGBA picture produced by a renderer, before watermarking and encoding.
pub struct Picture(pub image::RgbaImage);

impl Picture {
    /// Builds a picture from raw RGBA8 pixels (`width * height * 4` bytes).
    pub fn from_rgba(width: u32, height: u32, pixels: Vec<u8>) -> Option<Picture> {
        image::RgbaImage::from_raw(width, height, pixels).map(Picture)
    }

    pub fn width(&self) -> u32 {
        self.0.width()
    }

    pub fn height(&self) -> u32 {
        self.0.height()
    }

    /// The pixels.
    pub fn as_rgba(&self) -> &image::RgbaImage {
        &self.0
    }
}

impl fmt::Debug for Picture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Picture({}x{})", self.width(), self.height())
    }
}

/// What to draw for a text-to-image job.
#[derive(Debug, Clone)]
pub struct GenerateSpec {
    pub prompt: String,
    pub model: Model,
    pub ratio: Ratio,
    pub seed: u64,
    /// The seed's noise source, when the job chose one (diffusion models; `None`: the
    /// model's configured one).
    pub noise: Option<NoiseKind>,
    /// LoRAs merged into the model for this job (diffusion models), in the order asked.
    pub loras: Vec<LoraUse>,
}

/// An installed LoRA a job uses, and its multipliers.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoraUse {
    /// Its installed name (`<lora:name>`).
    pub name: String,
    /// Its file.
    pub path: std::path::PathBuf,
    /// AUTOMATIC1111's hash of it ([`models::addnet_hash`]; empty when unknown).
    pub hash: String,
    /// Multiplier for the text encoders' layers.
    pub text: f32,
    /// Multiplier for the UNet's layers.
    pub unet: f32,
}

/// What to do for an edit job: the stored upload and the instruction.
#[derive(Clone)]
pub struct EditSpec {
    /// The original uploaded bytes (PNG, JPEG or WebP), as received.
    pub source: Vec<u8>,
    pub instruction: String,
    pub seed: u64,
    /// The mask as uploaded (checked: [`decode::mask`]): the area to change.
    pub mask: Option<Vec<u8>>,
    /// LoRAs merged into the edit model (the instruction's `<lora:…>` tags, resolved).
    pub loras: Vec<LoraUse>,
}

impl fmt::Debug for EditSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EditSpec")
            .field("source_len", &self.source.len())
            .field("instruction", &self.instruction)
            .field("seed", &self.seed)
            .field("mask_len", &self.mask.as_ref().map(Vec::len))
            .field("loras", &self.loras.len())
            .finish()
    }
}

/// Why a render did not produce a picture. Each maps to a failed-job code in `jobs`.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The upload is not a PNG/JPEG/WebP we can decode, is broken, or exceeds the limits.
    #[error("invalid image: {0}")]
    InvalidImage(String),
    /// The edit instruction contains nothing we understand. The message lists what we do.
    #[error("{0}")]
    EditNotUnderstood(String),
    /// The backend is overloaded (queue full, 429/503 from a remote server).
    #[error("renderer overloaded: {0}")]
    Overloaded(String),
    /// The job was cancelled while rendering.
    #[error("cancelled")]
    Cancelled,
    /// Any other fault while generating or editing.
    #[error("render failed: {0}")]
    Failed(String),
}

/// Progress, cancellation and what the renderer used, shared between a running job and its
/// renderer. Cheap to clone; the default is a fresh control nobody watches.
#[derive(Clone, Default)]
pub struct RenderControl {
    inner: std::sync::Arc<ControlInner>,
}

/// Called (on the render thread) each time the progress advances; must be quick.
pub type ProgressObserver = Box<dyn Fn(f64) + Send + Sync>;

#[derive(Default)]
struct ControlInner {
    cancelled: std::sync::atomic::AtomicBool,
    /// Progress in thousandths.
    progress: std::sync::atomic::AtomicU32,
    details: std::sync::Mutex<Option<RenderDetails>>,
    scene: std::sync::Mutex<Option<SceneReport>>,
    observer: Option<ProgressObserver>,
}

/// How a model-based renderer made the picture, for the PNG `parameters` chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderDetails {
    pub negative_prompt: String,
    pub steps: usize,
    /// The sampler by its AUTOMATIC1111 name ("Euler a", "DPM++ 2M"…).
    pub sampler: String,
    /// A1111's "Schedule type": "Automatic" (the model's own sigmas), "Karras", or "Uniform"
    /// (DPM++ 2M without Karras sigmas, which A1111's "Automatic" would mean).
    pub schedule: &'static str,
    pub guidance: f64,
    /// The size the model rendered at (before fitting to the job's size).
    pub size: (u32, u32),
    pub model_name: String,
    pub model_hash: String,
    /// The noise source (`torch-cpu`, `a1111-gpu`).
    pub noise: &'static str,
    /// A1111's "RNG" for that noise ("CPU", "NV").
    pub rng: &'static str,
    /// img2img: how much of the schedule ran.
    pub strength: Option<f64>,
    /// Edits: how the model edited ("InstructPix2Pix", "inpainting", "masked img2img",
    /// "img2img").
    pub edit_mode: Option<&'static str>,
    /// InstructPix2Pix: the image guidance.
    pub image_guidance: Option<f64>,
    /// What was done exactly (pixel operations) after the model's edit, in words.
    pub exact: Vec<String>,
    /// The LoRAs merged for the picture: (name, AUTOMATIC1111's short hash).
    pub loras: Vec<(String, String)>,
    /// FLUX.1-dev's guidance input (Forge's "Distilled CFG Scale"; its "CFG scale" is then 1).
    pub distilled_guidance: Option<f64>,
}

impl RenderControl {
    /// A control whose progress is reported to `observer` as it advances.
    pub fn observed(observer: ProgressObserver) -> RenderControl {
        RenderControl {
            inner: std::sync::Arc::new(ControlInner {
                observer: Some(observer),
                ..ControlInner::default()
            }),
        }
    }

    /// Asks the renderer to stop at its next checkpoint (between denoising steps).
    pub fn cancel(&self) {
        self.inner
            .cancelled
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.inner
            .cancelled
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Records progress in 0..=1 (never goes back).
    pub fn set_progress(&self, p: f64) {
        let v = (p.clamp(0.0, 1.0) * 1000.0).round() as u32;
        let before = self
            .inner
            .progress
            .fetch_max(v, std::sync::atomic::Ordering::SeqCst);
        if v > before
            && let Some(observe) = &self.inner.observer
        {
            observe(f64::from(v) / 1000.0);
        }
    }

    pub fn progress(&self) -> f64 {
        f64::from(
            self.inner
                .progress
                .load(std::sync::atomic::Ordering::SeqCst),
        ) / 1000.0
    }

    pub fn set_details(&self, d: RenderDetails) {
        if let Ok(mut g) = self.inner.details.lock() {
            *g = Some(d);
        }
    }

    pub fn details(&self) -> Option<RenderDetails> {
        self.inner.details.lock().ok().and_then(|g| g.clone())
    }

    /// Records what the built-in painter drew of the prompt.
    pub fn set_scene(&self, s: SceneReport) {
        if let Ok(mut g) = self.inner.scene.lock() {
            *g = Some(s);
        }
    }

    pub fn scene(&self) -> Option<SceneReport> {
        self.inner.scene.lock().ok().and_then(|g| g.clone())
    }
}

/// What the built-in painter made of the prompt's content words (English names, also for
/// Russian prompts; words it does not know are given as written): the subjects, scene elements,
/// clothes and poses it drew, and the ones it could not draw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SceneReport {
    pub drawn: Vec<String>,
    pub not_drawn: Vec<String>,
}

/// A source of pictures. Implementations are synchronous and run on the blocking pool.
///
/// The built-in implementation is [`ProceduralRenderer`]; tests inject their own to make renders
/// fail or stall, and the model-backend work plugs remote inference servers in here.
pub trait Renderer: Send + Sync + 'static {
    /// Text to image. The picture must be exactly `spec.model.dimensions(spec.ratio)`.
    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError>;
    /// Applies the instruction to the source image.
    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError>;

    /// [`Renderer::generate`] with progress, cancellation and details (`control`). Renderers
    /// without checkpoints keep the default, which ignores it.
    fn generate_with(
        &self,
        spec: &GenerateSpec,
        control: &RenderControl,
    ) -> Result<Picture, RenderError> {
        let _ = control;
        self.generate(spec)
    }

    /// What renders `model`: `procedural`, `diffusion:<name>`, `a1111`, `openai`.
    fn engine(&self, model: Model) -> String {
        let _ = model;
        "procedural".into()
    }

    /// Whether `model` renders on this machine (the painter, built-in diffusion) rather than on
    /// an inference server, where a render is billed or queued upstream once it is sent: only a
    /// local render may begin before the job's start has been accepted.
    fn is_local(&self, model: Model) -> bool {
        let _ = model;
        true
    }

    /// The inference servers it sends work to, with their health (the server's `backends::pool`).
    fn backends_status(&self) -> Vec<EndpointStatus> {
        Vec::new()
    }

    /// Whether this renderer does all of `instruction` exactly, as pixel operations (rotate,
    /// crop, black and white…), with nothing in it that changes the picture's content: a model
    /// renderer hands such edits to it and paints the others itself. `Ok(false)` also when the
    /// instruction is not understood; an error only for a fault. The default: no exact edits.
    fn exact_edit(&self, instruction: &str) -> Result<bool, RenderError> {
        let _ = instruction;
        Ok(false)
    }

    /// Applies to `picture` the parts of `instruction` this renderer does exactly (rotate,
    /// crop, black and white…), leaving the rest (what changes the content) to whoever painted
    /// it; returns the picture and what was done, in words (nothing: an empty list). The
    /// default does nothing.
    fn apply_exact(
        &self,
        picture: Picture,
        instruction: &str,
        seed: u64,
    ) -> Result<(Picture, Vec<String>), RenderError> {
        let _ = (instruction, seed);
        Ok((picture, Vec::new()))
    }

    /// [`Renderer::edit`] with progress, cancellation and details.
    fn edit_with(&self, spec: &EditSpec, control: &RenderControl) -> Result<Picture, RenderError> {
        let _ = control;
        self.edit(spec)
    }
}

/// Metadata written into every PNG (`parameters` text chunk, AUTOMATIC1111 format).
#[derive(Debug, Clone)]
pub struct PngParameters {
    pub prompt: String,
    pub seed: u64,
    pub model: String,
    pub kind: &'static str,
    /// How a model-based renderer made it (steps, sampler, guidance, model hash…).
    pub details: Option<RenderDetails>,
    /// What the built-in painter drew and could not draw.
    pub scene: Option<SceneReport>,
}

/// Shrinks a picture so that its long side is at most `max_side` (never enlarges).
pub fn downscale(picture: Picture, max_side: u32) -> Picture {
    let (w, h) = (picture.width(), picture.height());
    let long = w.max(h);
    if max_side == 0 || long <= max_side {
        return picture;
    }
    let k = f64::from(max_side) / f64::from(long);
    let nw = ((f64::from(w) * k).round() as u32).max(1);
    let nh = ((f64::from(h) * k).round() as u32).max(1);
    Picture(image::imageops::resize(
        &picture.0,
        nw,
        nh,
        image::imageops::FilterType::Lanczos3,
    ))
}

/// Watermarks (when asked) and encodes the picture as PNG with a `parameters` chunk.
pub fn finish(
    mut picture: Picture,
    watermark: bool,
    params: &PngParameters,
) -> Result<Vec<u8>, RenderError> {
    if watermark {
        watermark::apply(&mut picture.0);
    }
    encode::png_with_parameters(&picture.0, params)
}

/// What `pictor backends status` and `/metrics` show of an inference server (the server's
/// backends fill it in; engines on this machine have none).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct EndpointStatus {
    pub url: String,
    pub kind: String,
    /// The models (ids, or `edit`) it serves.
    pub serves: Vec<String>,
    pub up: bool,
    pub in_flight: usize,
    pub requests_ok: u64,
    pub requests_failed: u64,
    /// Moving average of successful calls, milliseconds.
    pub latency_ms: Option<u64>,
    pub last_error: Option<String>,
    /// Seconds until it is probed again, while down.
    pub down_for_secs: Option<u64>,
}

/// Scales `img` to cover `w`x`h` and crops the centre: exactly the size the job asked for.
pub fn fit_exact(img: image::RgbaImage, w: u32, h: u32) -> image::RgbaImage {
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
