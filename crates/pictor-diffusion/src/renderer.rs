//! [`DiffusionRenderer`]: Pictor's model ids (`fast`, `artist`, `0.2plus`) mapped to installed
//! diffusion models, the rest (and exact instruction edits) left to the fallback renderer.
//!
//! Loaded pipelines stay resident between jobs within a memory budget; the least recently used
//! one is unloaded when another must load. Loading happens on the render thread that needs it,
//! under a lock per model, so two jobs never load the same model twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use candle::Device;

use super::flux::FluxPipeline;
use super::noise::NoiseKind;
use super::scheduler::Sampler;
use super::sd3::Sd3Pipeline;
use super::single_file::Overrides;
use super::{DiffusionError, ModelSource, Pipeline, Request, StepControl, UnetKind};
use pictor_core::decode::{self, DecodeLimits};
use pictor_core::fit_exact;
use pictor_core::{
    EditSpec, GenerateSpec, Model, Picture, RenderControl, RenderDetails, RenderError, Renderer,
};

/// One installed model as a Pictor model id (or the edit model) uses it.
#[derive(Debug, Clone)]
pub struct ModelMapping {
    /// The installed model's name (`pictor models list`).
    pub name: String,
    /// Its files.
    pub source: ModelSource,
    /// Scheduler settings that override the model's (or a single file's defaults).
    pub overrides: Overrides,
    pub steps: usize,
    pub guidance: f64,
    pub sampler: Sampler,
    /// Karras sigmas (`None`: as the model's scheduler configuration says).
    pub karras: Option<bool>,
    /// The seed's noise when the job does not choose.
    pub noise: NoiseKind,
    /// Long side the model renders at; `None`: the model's native size.
    pub size: Option<usize>,
    pub negative_prompt: String,
    /// img2img strength when the instruction does not say (edits only).
    pub strength: f64,
    /// InstructPix2Pix models: how closely an edit keeps the source picture (diffusers'
    /// `image_guidance_scale`).
    pub image_guidance: f64,
    /// Short hash shown as "Model hash" in the PNG parameters.
    pub hash: String,
    /// A TAESD folder whose decoder makes the pictures instead of the VAE's.
    pub tiny_vae: Option<std::path::PathBuf>,
}

impl ModelMapping {
    /// What makes two loaded pipelines different: the model and how it was loaded (scheduler
    /// overrides, configuration folder, decoder). Mappings that agree share one pipeline.
    fn load_key(&self) -> String {
        format!(
            "{}|{:?}|{:?}|{:?}",
            self.name, self.source, self.overrides, self.tiny_vae
        )
    }

    pub fn new(name: &str, source: ModelSource) -> ModelMapping {
        ModelMapping {
            name: name.to_owned(),
            source,
            overrides: Overrides::default(),
            steps: 20,
            guidance: 7.0,
            sampler: Sampler::EulerAncestral,
            karras: None,
            noise: NoiseKind::TorchCpu,
            size: None,
            negative_prompt: String::new(),
            strength: 0.6,
            image_guidance: 1.5,
            hash: String::new(),
            tiny_vae: None,
        }
    }
}

/// The side FLUX.1 and SD 3 are trained at (their presets' size), for a mapping without one.
const TRANSFORMER_SIZE: usize = 1024;

/// A loaded model: a Stable Diffusion (1.x, 2.x, XL) pipeline, a FLUX.1 one or an SD 3 one.
pub enum Engine {
    Sd(Box<Pipeline>),
    Flux(Box<FluxPipeline>),
    Sd3(Box<Sd3Pipeline>),
}

impl Engine {
    /// Bytes its weights take in memory (what the memory budget counts).
    pub fn resident_bytes(&self) -> u64 {
        match self {
            Engine::Sd(p) => p.resident_bytes,
            Engine::Flux(f) => f.resident_bytes,
            Engine::Sd3(f) => f.resident_bytes,
        }
    }
}

struct Loaded {
    /// The installed model's name.
    name: String,
    pipeline: Arc<Engine>,
    last_used: u64,
}

/// What draws each model id and edits; replaced whole when the operator maps a tier.
#[derive(Default)]
struct Mappings {
    models: HashMap<Model, ModelMapping>,
    edit: Option<ModelMapping>,
}

/// A model held in memory (`DiffusionRenderer::loaded`).
#[derive(Debug, Clone)]
pub struct LoadedModel {
    pub name: String,
    /// Bytes of its weights as held (float32).
    pub bytes: u64,
    /// Where they are held and computed: "cpu" or "cuda:N".
    pub device: String,
}

/// The diffusion renderer (see the module documentation).
pub struct DiffusionRenderer {
    mappings: RwLock<Arc<Mappings>>,
    fallback: Arc<dyn Renderer>,
    device: Device,
    budget_bytes: u64,
    loaded: Mutex<HashMap<String, Loaded>>,
    /// One lock per model name: held while that model loads.
    loading: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    clock: std::sync::atomic::AtomicU64,
    /// When each model last drew a picture (milliseconds since the epoch), since the start.
    used: Mutex<HashMap<String, u64>>,
    /// Seconds each model's last picture took here (text, steps and decode; loading apart).
    timed: Mutex<HashMap<String, f64>>,
}

struct Control<'a>(&'a RenderControl);

impl StepControl for Control<'_> {
    fn progress(&self, done: usize, total: usize) {
        // Text encoding and decoding are outside the loop: steps cover 5%..95%.
        self.0
            .set_progress(0.05 + 0.9 * done as f64 / total.max(1) as f64);
    }

    fn cancelled(&self) -> bool {
        self.0.is_cancelled()
    }
}

fn failed(e: DiffusionError) -> RenderError {
    match e {
        DiffusionError::Cancelled => RenderError::Cancelled,
        other => RenderError::Failed(other.to_string()),
    }
}

/// A picture size for a model that renders `long` pixels on its long side: the job's aspect
/// ratio, each side a multiple of 64 (the UNet halves the latent three times).
pub fn working_size(long: usize, width: u32, height: u32) -> (usize, usize) {
    let (w, h) = (f64::from(width.max(1)), f64::from(height.max(1)));
    let scale = long as f64 / w.max(h);
    let snap = |x: f64| (((x * scale) / 64.0).round() as usize).max(1) * 64;
    (snap(w), snap(h))
}

impl DiffusionRenderer {
    pub fn new(
        models: HashMap<Model, ModelMapping>,
        edit: Option<ModelMapping>,
        fallback: Arc<dyn Renderer>,
        budget_bytes: u64,
    ) -> DiffusionRenderer {
        DiffusionRenderer {
            mappings: RwLock::new(Arc::new(Mappings { models, edit })),
            fallback,
            device: super::device(),
            budget_bytes,
            loaded: Mutex::new(HashMap::new()),
            loading: Mutex::new(HashMap::new()),
            clock: std::sync::atomic::AtomicU64::new(0),
            used: Mutex::new(HashMap::new()),
            timed: Mutex::new(HashMap::new()),
        }
    }

    fn current(&self) -> Arc<Mappings> {
        match self.mappings.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Which installed model serves `model`, if any.
    pub fn mapping(&self, model: Model) -> Option<ModelMapping> {
        self.current().models.get(&model).cloned()
    }

    /// The edit mapping, if any.
    pub fn edit_mapping(&self) -> Option<ModelMapping> {
        self.current().edit.clone()
    }

    /// Replaces what draws each model id and edits, at once for the jobs that start after it
    /// (running renders finish with the mapping they began with). Loaded pipelines that no
    /// mapping uses any more are unloaded; the others stay resident.
    pub fn set_mappings(&self, models: HashMap<Model, ModelMapping>, edit: Option<ModelMapping>) {
        let keys: std::collections::HashSet<String> = models
            .values()
            .chain(edit.as_ref())
            .map(ModelMapping::load_key)
            .collect();
        let next = Arc::new(Mappings { models, edit });
        match self.mappings.write() {
            Ok(mut g) => *g = next,
            Err(p) => *p.into_inner() = next,
        }
        if let Ok(mut g) = self.loaded.lock() {
            g.retain(|k, l| {
                let keep = keys.contains(k);
                if !keep {
                    tracing::info!(model = %l.name, "diffusion model unloaded (no tier uses it)");
                }
                keep
            });
        }
    }

    /// When each model last drew a picture (milliseconds since the epoch), since the start.
    pub fn last_used(&self) -> HashMap<String, u64> {
        self.used.lock().map(|g| g.clone()).unwrap_or_default()
    }

    /// Seconds each model's last picture took on this machine (loading apart), since the start.
    pub fn last_seconds(&self) -> HashMap<String, f64> {
        self.timed.lock().map(|g| g.clone()).unwrap_or_default()
    }

    fn note_time(&self, name: &str, started: std::time::Instant) {
        if let Ok(mut g) = self.timed.lock() {
            g.insert(name.to_owned(), started.elapsed().as_secs_f64());
        }
    }

    fn note_use(&self, name: &str) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        if let Ok(mut g) = self.used.lock() {
            g.insert(name.to_owned(), now);
        }
    }

    /// The device models run on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The models held in memory now.
    pub fn loaded(&self) -> Vec<LoadedModel> {
        self.loaded
            .lock()
            .map(|g| {
                g.values()
                    .map(|l| LoadedModel {
                        name: l.name.clone(),
                        bytes: l.pipeline.resident_bytes(),
                        device: crate::gpu::device_id(&self.device),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn tick(&self) -> u64 {
        self.clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The loaded pipeline of `m`, loading it (and unloading others beyond the budget).
    fn pipeline(&self, m: &ModelMapping) -> Result<Arc<Engine>, RenderError> {
        self.note_use(&m.name);
        let key = m.load_key();
        let lock = {
            let mut g = self
                .loading
                .lock()
                .map_err(|_| RenderError::Failed("lock poisoned".into()))?;
            g.entry(key.clone()).or_default().clone()
        };
        let _loading = lock
            .lock()
            .map_err(|_| RenderError::Failed("lock poisoned".into()))?;
        if let Ok(mut g) = self.loaded.lock()
            && let Some(l) = g.get_mut(&key)
        {
            l.last_used = self.tick();
            return Ok(l.pipeline.clone());
        }
        // A pipeline of a model already loaded with other LoRAs is about as large: make room
        // for it before loading, so the peak stays within the budget (a FLUX pipeline is
        // 13 GB).
        if let Ok(mut g) = self.loaded.lock() {
            let like = g
                .values()
                .filter(|l| l.name == m.name)
                .map(|l| l.pipeline.resident_bytes())
                .max();
            if let Some(bytes) = like {
                self.make_room(&mut g, bytes);
            }
        }
        let started = std::time::Instant::now();
        let load = || -> Result<Engine, DiffusionError> {
            let loras = &m.overrides.loras;
            if let ModelSource::Flux { dir, files } = &m.source {
                return Ok(Engine::Flux(Box::new(FluxPipeline::load_with_loras(
                    dir,
                    files,
                    loras,
                    &self.device,
                )?)));
            }
            if let ModelSource::Sd3 { dir, files } = &m.source {
                return Ok(Engine::Sd3(Box::new(Sd3Pipeline::load_with_loras(
                    dir,
                    files,
                    loras,
                    &self.device,
                )?)));
            }
            let mut p = Pipeline::load(&m.source, &m.overrides, &self.device)?;
            if let Some(dir) = &m.tiny_vae {
                p.use_tiny_decoder(super::taesd::TinyDecoder::load(dir, &self.device)?)?;
            }
            Ok(Engine::Sd(Box::new(p)))
        };
        let pipeline = load()
            .map_err(|e| RenderError::Failed(format!("could not load model {:?}: {e}", m.name)))?;
        let pipeline = Arc::new(pipeline);
        tracing::info!(model = %m.name, ms = started.elapsed().as_millis() as u64, bytes = pipeline.resident_bytes(), "diffusion model loaded");
        let mut g = self
            .loaded
            .lock()
            .map_err(|_| RenderError::Failed("lock poisoned".into()))?;
        // Unload the least recently used models until this one fits (it always stays).
        self.make_room(&mut g, pipeline.resident_bytes());
        g.insert(
            key.clone(),
            Loaded {
                name: m.name.clone(),
                pipeline: pipeline.clone(),
                last_used: self.tick(),
            },
        );
        drop(g);
        drop(_loading);
        // The per-key lock is only needed while a load is under way: forget it unless another
        // job waits on it (each LoRA set has its own key; they must not pile up).
        if let Ok(mut g) = self.loading.lock()
            && g.get(&key).is_some_and(|l| Arc::strong_count(l) <= 2)
        {
            g.remove(&key);
        }
        Ok(pipeline)
    }
}

impl DiffusionRenderer {
    /// Unloads the least recently used pipelines until `bytes` more fit the memory budget (or
    /// none is left).
    fn make_room(&self, g: &mut HashMap<String, Loaded>, bytes: u64) {
        loop {
            let used: u64 = g.values().map(|l| l.pipeline.resident_bytes()).sum();
            if used + bytes <= self.budget_bytes || g.is_empty() {
                break;
            }
            let Some(oldest) = g
                .iter()
                .min_by_key(|(_, l)| l.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            tracing::info!(model = %oldest, "diffusion model unloaded (memory budget)");
            g.remove(&oldest);
        }
    }

    /// A picture from a FLUX.1 or SD 3 model (`engine` is one of them): the mapping's steps and
    /// guidance (FLUX.1-dev's guidance input; SD 3's classifier-free guidance, with the
    /// mapping's negative prompt), the flow-matching Euler sampler.
    fn generate_transformer(
        &self,
        engine: &Engine,
        m: &ModelMapping,
        spec: &GenerateSpec,
        prompt: &str,
        (out_w, out_h): (u32, u32),
        control: &RenderControl,
    ) -> Result<Picture, RenderError> {
        let long = m.size.unwrap_or(TRANSFORMER_SIZE);
        let (width, height) = working_size(long, out_w, out_h);
        control.set_progress(0.02);
        let kind = spec.noise.unwrap_or(m.noise);
        let mut noise = super::noise::source(kind, spec.seed);
        let started = std::time::Instant::now();
        let (steps, guidance, size, who) =
            (m.steps, m.guidance, (width, height), (&*m.name, &*m.hash));
        let (rgb, details) = match engine {
            Engine::Flux(f) => (
                f.txt2img(
                    prompt,
                    noise.as_mut(),
                    width,
                    height,
                    steps,
                    guidance as f32,
                    &Control(control),
                ),
                flux_details(f, steps, guidance, size, who, kind),
            ),
            Engine::Sd3(f) => (
                f.txt2img(
                    prompt,
                    &m.negative_prompt,
                    noise.as_mut(),
                    width,
                    height,
                    steps,
                    guidance as f32,
                    &Control(control),
                ),
                sd3_details(&m.negative_prompt, steps, guidance, size, who, kind),
            ),
            Engine::Sd(_) => {
                return Err(RenderError::Failed(
                    "a Stable Diffusion pipeline is not a transformer model".into(),
                ));
            }
        };
        let rgb = rgb.map_err(failed)?;
        self.note_time(&m.name, started);
        let mut details = details;
        details.loras = job_loras(spec);
        control.set_details(details);
        control.set_progress(1.0);
        to_picture(rgb, width, height, out_w, out_h)
    }
}

/// The job's LoRAs as the PNG's `Lora hashes` name them.
fn job_loras(spec: &GenerateSpec) -> Vec<(String, String)> {
    lora_hashes(&spec.loras)
}

fn lora_hashes(loras: &[pictor_core::LoraUse]) -> Vec<(String, String)> {
    loras
        .iter()
        .map(|u| (u.name.clone(), u.hash.clone()))
        .collect()
}

/// A mapping with a job's LoRAs: a pipeline of its own, merged at load and kept like any other
/// (the load key has them), so the next job with the same set starts at once.
fn with_job_loras(m: &ModelMapping, loras: &[pictor_core::LoraUse]) -> ModelMapping {
    let mut l = m.clone();
    l.overrides.loras = loras
        .iter()
        .map(|u| super::lora::LoraSpec {
            path: u.path.clone(),
            unet: u.unet,
            text: u.text,
        })
        .collect();
    l
}

/// How a FLUX.1 model made a picture, as Forge writes it: Euler, "Simple", CFG scale 1, and
/// dev's guidance input as "Distilled CFG Scale".
pub fn flux_details(
    f: &FluxPipeline,
    steps: usize,
    guidance: f64,
    (width, height): (usize, usize),
    (model_name, model_hash): (&str, &str),
    noise: NoiseKind,
) -> RenderDetails {
    let distilled = f.transformer.config().guidance_embed;
    RenderDetails {
        negative_prompt: String::new(),
        steps,
        sampler: "Euler".into(),
        schedule: "Simple",
        guidance: 1.0,
        size: (width as u32, height as u32),
        model_name: model_name.to_owned(),
        model_hash: model_hash.to_owned(),
        noise: noise.as_str(),
        rng: noise.a1111_rng(),
        strength: None,
        edit_mode: None,
        image_guidance: None,
        exact: Vec::new(),
        loras: Vec::new(),
        distilled_guidance: distilled.then_some(guidance),
    }
}

/// How an SD 3 model made a picture: Euler, "Simple", its guidance and negative prompt.
pub fn sd3_details(
    negative_prompt: &str,
    steps: usize,
    guidance: f64,
    (width, height): (usize, usize),
    (model_name, model_hash): (&str, &str),
    noise: NoiseKind,
) -> RenderDetails {
    RenderDetails {
        negative_prompt: negative_prompt.to_owned(),
        steps,
        sampler: "Euler".into(),
        schedule: "Simple",
        guidance,
        size: (width as u32, height as u32),
        model_name: model_name.to_owned(),
        model_hash: model_hash.to_owned(),
        noise: noise.as_str(),
        rng: noise.a1111_rng(),
        strength: None,
        edit_mode: None,
        image_guidance: None,
        exact: Vec::new(),
        loras: Vec::new(),
        distilled_guidance: None,
    }
}

/// How `pipeline` made a picture for `req`, as the PNG `parameters` record it.
pub fn render_details(
    pipeline: &Pipeline,
    req: &Request,
    model_name: &str,
    model_hash: &str,
    noise: NoiseKind,
    strength: Option<f64>,
) -> RenderDetails {
    let karras = pipeline.scheduler.uses_karras(req.sampler, req.karras);
    RenderDetails {
        negative_prompt: req.negative_prompt.clone(),
        steps: req.steps,
        sampler: req.sampler.a1111_name().to_owned(),
        schedule: schedule_type(req.sampler, karras),
        guidance: req.guidance,
        size: (req.width as u32, req.height as u32),
        model_name: model_name.to_owned(),
        model_hash: model_hash.to_owned(),
        noise: noise.as_str(),
        rng: noise.a1111_rng(),
        strength,
        edit_mode: None,
        image_guidance: None,
        exact: Vec::new(),
        loras: Vec::new(),
        distilled_guidance: None,
    }
}

/// A1111's "Schedule type" for a run: "Karras" for Karras sigmas; for DPM++ 2M without them
/// "Uniform" (A1111's "Automatic" means Karras for that sampler); else "Automatic".
pub fn schedule_type(sampler: Sampler, karras: bool) -> &'static str {
    if karras {
        "Karras"
    } else if sampler == Sampler::DpmPp2m {
        "Uniform"
    } else {
        "Automatic"
    }
}

/// Pictor's schedule setting (configuration `schedule`, `--schedule`): `automatic` (the model's
/// own sigmas: `Some(None)`), `karras` or `uniform`; `None` for anything else.
pub fn parse_schedule(name: &str) -> Option<Option<bool>> {
    match name.trim().to_ascii_lowercase().as_str() {
        "automatic" => Some(None),
        "karras" => Some(Some(true)),
        "uniform" => Some(Some(false)),
        _ => None,
    }
}

/// The Karras choice an A1111 "Schedule type" asks of `sampler` (`None`: the model's own).
/// Since v1.9 A1111 writes the type; its "Automatic" means Karras for DPM++ 2M. Older
/// versions wrote none and named Karras in the sampler ("DPM++ 2M Karras"): no type, no Karras.
pub fn karras_for(sampler: Sampler, schedule_type: Option<&str>) -> Option<bool> {
    match schedule_type.map(str::to_ascii_lowercase).as_deref() {
        Some("karras") => Some(true),
        Some("uniform") => Some(false),
        Some("automatic") if sampler == Sampler::DpmPp2m => Some(true),
        _ => None,
    }
}

/// The engine's RGB8 output (`w`×`h`) fitted to exactly `out_w`×`out_h`.
pub fn to_picture(
    rgb: Vec<u8>,
    w: usize,
    h: usize,
    out_w: u32,
    out_h: u32,
) -> Result<Picture, RenderError> {
    let rgb = image::RgbImage::from_raw(w as u32, h as u32, rgb).ok_or_else(|| {
        RenderError::Failed("the engine returned a picture of the wrong size".into())
    })?;
    let rgba = image::DynamicImage::ImageRgb8(rgb).to_rgba8();
    Ok(Picture(fit_exact(rgba, out_w, out_h)))
}

/// img2img strength from the instruction's wording: small words keep more of the photo.
pub fn strength_for(instruction: &str, default: f64) -> f64 {
    let t = instruction.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if has(&[
        "slightly",
        "a little",
        "a bit",
        "subtle",
        "subtly",
        "чуть",
        "немного",
        "слегка",
    ]) {
        0.35
    } else if has(&[
        "completely",
        "entirely",
        "totally",
        "turn it into",
        "turn into",
        "redraw",
        "полностью",
        "преврати",
    ]) {
        0.8
    } else {
        default
    }
}

impl Renderer for DiffusionRenderer {
    fn engine(&self, model: Model) -> String {
        match self.current().models.get(&model) {
            Some(m) => format!("diffusion:{}", m.name),
            None => self.fallback.engine(model),
        }
    }

    fn backends_status(&self) -> Vec<pictor_core::EndpointStatus> {
        self.fallback.backends_status()
    }

    fn exact_edit(&self, instruction: &str) -> Result<bool, RenderError> {
        self.fallback.exact_edit(instruction)
    }

    fn is_local(&self, model: Model) -> bool {
        self.current().models.contains_key(&model) || self.fallback.is_local(model)
    }

    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError> {
        self.generate_with(spec, &RenderControl::default())
    }

    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError> {
        self.edit_with(spec, &RenderControl::default())
    }

    fn generate_with(
        &self,
        spec: &GenerateSpec,
        control: &RenderControl,
    ) -> Result<Picture, RenderError> {
        let mappings = self.current();
        let Some(m) = mappings.models.get(&spec.model) else {
            return self.fallback.generate_with(spec, control);
        };
        let (out_w, out_h) = spec.model.dimensions(spec.ratio.resolve_auto(&spec.prompt));
        // The job's LoRAs: a pipeline of their own, merged at load and kept like any other
        // (the load key has them), so the next job with the same set starts at once.
        let with_loras;
        let m = if spec.loras.is_empty() {
            m
        } else {
            with_loras = with_job_loras(m, &spec.loras);
            &with_loras
        };
        let engine = self.pipeline(m)?;
        // The model reads the prompt without its `<lora:…>` tags (the PNG keeps them).
        let prompt = pictor_core::lora_tags::parse(&spec.prompt)
            .map(|(text, _)| text)
            .unwrap_or_else(|_| spec.prompt.clone());
        let pipeline = match &*engine {
            Engine::Sd(p) => p,
            Engine::Flux(_) | Engine::Sd3(_) => {
                return self.generate_transformer(
                    &engine,
                    m,
                    spec,
                    &prompt,
                    (out_w, out_h),
                    control,
                );
            }
        };
        let long = m.size.unwrap_or(pipeline.sample_size * 8);
        let (width, height) = working_size(long, out_w, out_h);
        let req = Request {
            prompt,
            negative_prompt: m.negative_prompt.clone(),
            steps: m.steps,
            guidance: m.guidance,
            sampler: m.sampler,
            karras: m.karras,
            width,
            height,
        };
        control.set_progress(0.02);
        let kind = spec.noise.unwrap_or(m.noise);
        let mut noise = super::noise::source(kind, spec.seed);
        let started = std::time::Instant::now();
        let rgb = pipeline
            .txt2img(&req, noise.as_mut(), &Control(control))
            .map_err(failed)?;
        self.note_time(&m.name, started);
        let mut details = render_details(pipeline, &req, &m.name, &m.hash, kind, None);
        details.loras = job_loras(spec);
        control.set_details(details);
        control.set_progress(1.0);
        to_picture(rgb, width, height, out_w, out_h)
    }

    fn edit_with(&self, spec: &EditSpec, control: &RenderControl) -> Result<Picture, RenderError> {
        let mappings = self.current();
        let Some(m) = &mappings.edit else {
            return self.fallback.edit_with(spec, control);
        };
        // The instruction without its `<lora:…>` tags (the filters and the model read words),
        // and the edit's LoRAs merged into a pipeline of their own, as for generations.
        let stripped;
        let spec = match pictor_core::lora_tags::parse(&spec.instruction) {
            Ok((text, tags)) if !tags.is_empty() => {
                stripped = EditSpec {
                    instruction: text,
                    source: spec.source.clone(),
                    mask: spec.mask.clone(),
                    seed: spec.seed,
                    loras: spec.loras.clone(),
                };
                &stripped
            }
            _ => spec,
        };
        let with_loras;
        let m = if spec.loras.is_empty() {
            m
        } else {
            with_loras = with_job_loras(m, &spec.loras);
            &with_loras
        };
        // What the instruction filters do exactly (rotate, crop, black and white…) stays theirs
        // (inside the mask, when there is one); what changes the content (add, remove, recolour,
        // night…) the model paints itself, and a mixed instruction gets both: the model's
        // edit, then the exact part.
        if self.fallback.exact_edit(&spec.instruction)? {
            return self.fallback.edit_with(spec, control);
        }
        let limits = DecodeLimits::default();
        let source = decode::decode(&spec.source, &limits)?;
        let (w, h) = source.dimensions();
        let mask = spec
            .mask
            .as_deref()
            .map(|b| decode::mask(b, w, h, &limits))
            .transpose()?;
        let engine = self.pipeline(m)?;
        let Engine::Sd(pipeline) = &*engine else {
            return Err(RenderError::Failed(
                "FLUX models do not edit pictures yet: map a Stable Diffusion model to the edit tier"
                    .into(),
            ));
        };
        let long = m.size.unwrap_or(pipeline.sample_size * 8);
        let settings = EditSettings {
            negative_prompt: m.negative_prompt.clone(),
            steps: m.steps,
            guidance: m.guidance,
            sampler: m.sampler,
            karras: m.karras,
            long,
            strength: strength_for(&spec.instruction, m.strength),
            image_guidance: m.image_guidance,
        };
        control.set_progress(0.02);
        let mut noise = super::noise::source(m.noise, spec.seed);
        let started = std::time::Instant::now();
        let (picture, req, made) = edit_picture(
            pipeline,
            &source,
            mask.as_ref(),
            &spec.instruction,
            &settings,
            noise.as_mut(),
            &Control(control),
        )
        .map_err(failed)?;
        self.note_time(&m.name, started);
        let (picture, exact) = self
            .fallback
            .apply_exact(picture, &spec.instruction, spec.seed)?;
        let mut details = render_details(pipeline, &req, &m.name, &m.hash, m.noise, made.strength);
        details.edit_mode = Some(made.mode);
        details.loras = lora_hashes(&spec.loras);
        details.image_guidance = made.image_guidance;
        details.exact = exact;
        control.set_details(details);
        control.set_progress(1.0);
        Ok(picture)
    }
}

/// How an edit runs (a mapping's settings, or the CLI's flags).
#[derive(Debug, Clone)]
pub struct EditSettings {
    pub negative_prompt: String,
    pub steps: usize,
    pub guidance: f64,
    pub sampler: super::scheduler::Sampler,
    pub karras: Option<bool>,
    /// Long side the model works at.
    pub long: usize,
    /// img2img / masked img2img strength (an inpainting model with a mask runs the whole
    /// schedule).
    pub strength: f64,
    /// InstructPix2Pix models.
    pub image_guidance: f64,
}

/// What an edit did, for the PNG parameters.
#[derive(Debug, Clone, Copy)]
pub struct EditMade {
    /// "InstructPix2Pix", "inpainting", "masked img2img" or "img2img".
    pub mode: &'static str,
    pub strength: Option<f64>,
    pub image_guidance: Option<f64>,
}

/// Edits `source` as the model is made to: an InstructPix2Pix model follows the instruction,
/// an inpainting model repaints the masked area (the whole picture without a mask), a text
/// model repaints the masked area (masked img2img) or the picture (img2img). The model works
/// at `settings.long` on its long side; the result is fitted back to the source's size and,
/// with a mask, keeps the source's own pixels outside it.
pub fn edit_picture(
    pipeline: &Pipeline,
    source: &image::RgbaImage,
    mask: Option<&image::GrayImage>,
    instruction: &str,
    settings: &EditSettings,
    noise: &mut dyn super::noise::NoiseSource,
    control: &dyn StepControl,
) -> Result<(Picture, Request, EditMade), DiffusionError> {
    let (out_w, out_h) = source.dimensions();
    let (width, height) = working_size(settings.long, out_w, out_h);
    let resized = image::imageops::resize(
        &image::DynamicImage::ImageRgba8(source.clone()).to_rgb8(),
        width as u32,
        height as u32,
        image::imageops::FilterType::Lanczos3,
    );
    let req = Request {
        prompt: instruction.to_owned(),
        negative_prompt: settings.negative_prompt.clone(),
        steps: settings.steps,
        guidance: settings.guidance,
        sampler: settings.sampler,
        karras: settings.karras,
        width,
        height,
    };
    // The mask at the working size (nearest: it stays black and white).
    let small = mask.map(|m| {
        image::imageops::resize(
            m,
            width as u32,
            height as u32,
            image::imageops::FilterType::Nearest,
        )
        .into_raw()
    });
    let image = resized.as_raw();
    let worded = settings.strength;
    let made = |mode, strength, image_guidance| EditMade {
        mode,
        strength,
        image_guidance,
    };
    let (rgb, made) = match (pipeline.unet_kind(), &small) {
        (UnetKind::Instruct, _) => {
            let ig = settings.image_guidance;
            (
                pipeline.instruct(&req, image, ig, noise, control)?,
                made("InstructPix2Pix", None, Some(ig)),
            )
        }
        (UnetKind::Inpaint, Some(m)) => (
            pipeline.inpaint(&req, image, m, 1.0, noise, control)?,
            made("inpainting", Some(1.0), None),
        ),
        (UnetKind::Text, Some(m)) => (
            pipeline.inpaint(&req, image, m, worded, noise, control)?,
            made("masked img2img", Some(worded), None),
        ),
        (UnetKind::Inpaint, None) => {
            let all = vec![255; width * height];
            (
                pipeline.inpaint(&req, image, &all, worded, noise, control)?,
                made("inpainting", Some(worded), None),
            )
        }
        (UnetKind::Text, None) => (
            pipeline.img2img(&req, image, worded, noise, control)?,
            made("img2img", Some(worded), None),
        ),
    };
    let picture = to_picture(rgb, width, height, out_w, out_h)
        .map_err(|e| DiffusionError::Model(e.to_string()))?;
    let picture = match mask {
        Some(m) => Picture(decode::keep_outside_mask(picture.0, source, m)),
        None => picture,
    };
    Ok((picture, req, made))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_sizes_keep_the_ratio_on_a_64_grid() {
        assert_eq!(working_size(512, 1024, 1024), (512, 512));
        assert_eq!(working_size(512, 1024, 576), (512, 320));
        assert_eq!(working_size(1024, 683, 1024), (704, 1024));
    }

    #[test]
    fn strength_follows_the_wording() {
        assert_eq!(strength_for("make it slightly warmer", 0.6), 0.35);
        assert_eq!(strength_for("turn it into a watercolor", 0.6), 0.8);
        assert_eq!(strength_for("add a hat", 0.6), 0.6);
    }
}
