//! The built-in Stable Diffusion engine: SD 1.x, SD 2.x/Turbo and SDXL/Turbo models from the
//! user's disk, run on the CPU (or an NVIDIA GPU with the `cuda` feature) by candle.
//!
//! - [`net`]: the networks (CLIP text encoders, UNet, VAE), candle-transformers' with the
//!   changes listed there;
//! - [`tokenizer`]: the CLIP tokenizer;
//! - [`scheduler`]: Euler and Euler ancestral as diffusers defines them, with caller noise;
//! - [`noise`]: a seed's noise (PyTorch's CPU generator);
//! - [`Pipeline`]: one loaded model — text encoding, the denoising loop, decoding, img2img;
//! - [`renderer`]: the [`pictor_core::Renderer`] that maps Pictor's model ids to pipelines
//!   and keeps them loaded within a memory budget.
//!
//! Everything here is synchronous and runs on the render pool's blocking threads.

pub mod edit;
pub mod flux;
pub mod gpu;
pub mod load;
pub mod lora;
pub mod net;
pub mod noise;
pub mod renderer;
pub mod scheduler;
pub mod sd3;
pub mod single_file;
pub mod taesd;
pub mod tokenizer;

use std::path::{Path, PathBuf};

use candle::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde_json::Value;

use net::clip::ClipTextTransformer;
use net::unet_2d::{TextTime, UNet2DConditionModel};
use net::vae::AutoEncoderKL;
use noise::NoiseSource;
use scheduler::{Sampler, SamplerState, Schedule, SchedulerConfig};
use tokenizer::ClipTokenizer;

/// The tensor library the engine is built on (for tools and tests that read reference tensors).
pub use candle;
pub use renderer::{DiffusionRenderer, ModelMapping};
pub use single_file::Overrides;

#[derive(Debug, thiserror::Error)]
pub enum DiffusionError {
    /// The model on disk is missing a part, or a part is not a supported shape.
    #[error("model: {0}")]
    Model(String),
    /// The request asks for something the model cannot do (size, steps).
    #[error("{0}")]
    Invalid(String),
    /// The engine failed while computing.
    #[error("engine: {0}")]
    Engine(#[from] candle::Error),
    /// The job was cancelled between steps.
    #[error("cancelled")]
    Cancelled,
}

/// Reads a model file of at most `cap` bytes (see [`pictor_core::files`]).
pub(crate) fn read_file(
    path: &Path,
    cap: u64,
    what: &'static str,
) -> Result<Vec<u8>, DiffusionError> {
    pictor_core::files::read_file(path, cap, what).map_err(|e| DiffusionError::Model(e.to_string()))
}

/// Reads a model's JSON configuration file (at most [`pictor_core::files::CONFIG_MAX`]).
pub(crate) fn read_json(path: &Path) -> Result<Value, DiffusionError> {
    let bytes = read_file(
        path,
        pictor_core::files::CONFIG_MAX,
        "a model configuration file",
    )?;
    serde_json::from_slice(&bytes)
        .map_err(|e| DiffusionError::Model(format!("{}: {e}", path.display())))
}

/// The safetensors header of a weights file, checked (regular file, header and tensor count
/// within bounds, every tensor inside the file) before candle maps it.
pub(crate) fn checked_header(
    path: &Path,
) -> Result<std::collections::BTreeMap<String, pictor_core::models::TensorInfo>, DiffusionError> {
    pictor_core::models::safetensors_header(path).map_err(|e| DiffusionError::Model(e.to_string()))
}

/// The device models run on: the first CUDA GPU when built with `cuda` and one is present
/// (unless [`gpu::use_cpu_only`]), else the CPU.
pub fn device() -> Device {
    #[cfg(feature = "cuda")]
    if !gpu::cpu_only() {
        match Device::new_cuda(0) {
            Ok(d) => return d,
            Err(e) => tracing::warn!("no usable NVIDIA GPU ({e}): the engine runs on the CPU"),
        }
    }
    Device::Cpu
}

/// This machine's float32 matrix-multiply speed in GFLOP/s, as the engine's gemm does it on
/// the calling thread's pool (a 512×512 by 512×512 product, best of five): the console scales the
/// benchmark's timings by it to estimate seconds per picture.
pub fn measure_gflops() -> f64 {
    let dev = Device::Cpu;
    let (Ok(a), Ok(b)) = (
        Tensor::ones((512, 512), DType::F32, &dev),
        Tensor::ones((512, 512), DType::F32, &dev),
    ) else {
        return 0.0;
    };
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = std::time::Instant::now();
        if a.matmul(&b).is_err() {
            return 0.0;
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    2.0 * 512f64.powi(3) / best.max(1e-9) / 1e9
}

/// Progress and cancellation between denoising steps.
pub trait StepControl {
    /// Called after each step with (steps done, steps in all).
    fn progress(&self, done: usize, total: usize);
    /// Whether the job was cancelled; checked before every step.
    fn cancelled(&self) -> bool;
}

/// No progress reports, never cancelled.
pub struct NoControl;

impl StepControl for NoControl {
    fn progress(&self, _: usize, _: usize) {}
    fn cancelled(&self) -> bool {
        false
    }
}

/// A text encoder and its tokenizer.
struct TextEncoder {
    tokenizer: ClipTokenizer,
    model: ClipTextTransformer,
}

/// The text conditioning of one prompt (and its negative when guidance is on).
pub struct Conditioning {
    pub cond: Tensor,
    pub uncond: Option<Tensor>,
    /// SDXL: pooled text embeddings.
    pub pooled: Option<Tensor>,
    pub uncond_pooled: Option<Tensor>,
}

/// A loaded Stable Diffusion model.
pub struct Pipeline {
    encoders: Vec<TextEncoder>,
    unet: UNet2DConditionModel,
    vae: AutoEncoderKL,
    vae_scale: f64,
    /// SDXL: the size conditioning is used and an empty negative prompt means zeros.
    sdxl: bool,
    force_zeros_for_empty_prompt: bool,
    pub scheduler: SchedulerConfig,
    /// The latent side the UNet was trained at (`sample_size`); pictures are 8× that.
    pub sample_size: usize,
    latent_channels: usize,
    unet_kind: UnetKind,
    device: Device,
    /// Bytes of float32 weights held in memory.
    pub resident_bytes: u64,
    /// The tiny decoder that replaces the VAE's for pictures, when the mapping names one.
    tiny_decoder: Option<taesd::TinyDecoder>,
    /// Latent tile side above which the VAE decodes tile by tile (memory), and the overlap.
    pub vae_tile: (usize, usize),
}

/// The VAE decodes pictures larger than 64×64 latents (512×512 pixels) in 64-latent tiles that
/// overlap by 16 (diffusers' tiling defaults for the SD VAE), bounding the decoder's memory to a
/// 512² decode's.
pub const VAE_TILE: (usize, usize) = (64, 16);

/// What a model's UNet takes beside the noisy latents, read off its input channels: the same
/// rule installing a model applies ([`pictor_core::models::Role`]).
pub use pictor_core::models::Role as UnetKind;

/// What each UNet evaluation sees beside the latents and how the guided predictions combine.
pub enum Guide {
    /// The latents alone.
    Plain,
    /// These channels appended to the scaled latents (inpainting: the mask and the masked
    /// picture's latents).
    Concat(Tensor),
    /// InstructPix2Pix: the source's latents appended, and with guidance three evaluations.
    Instruct { image: Tensor, image_guidance: f64 },
}

/// Masked img2img on a plain UNet: after every step, the latents outside `mask` (1 = change,
/// latent resolution) are the source's `clean` latents noised with `noise` to the next step.
pub struct Blend {
    pub mask: Tensor,
    pub clean: Tensor,
    pub noise: Tensor,
}

/// One denoising run ([`Pipeline::denoise_with`]).
pub struct Denoise<'a> {
    pub cond: &'a Conditioning,
    pub schedule: &'a Schedule,
    /// The evaluation the latents are noised to.
    pub start: usize,
    pub guidance: f64,
    pub guide: &'a Guide,
    pub blend: Option<&'a Blend>,
    /// The picture's (height, width).
    pub size: (usize, usize),
}

/// How one picture is made.
#[derive(Debug, Clone)]
pub struct Request {
    pub prompt: String,
    pub negative_prompt: String,
    pub steps: usize,
    pub guidance: f64,
    pub sampler: Sampler,
    /// Karras sigmas (`None`: as the model's scheduler configuration says).
    pub karras: Option<bool>,
    pub width: usize,
    pub height: usize,
}

/// Raw weights of the three parts, as variable builders.
pub struct Weights<'a> {
    pub unet: VarBuilder<'a>,
    pub vae: VarBuilder<'a>,
    pub text: Vec<VarBuilder<'a>>,
}

/// The configuration files of a model (a diffusers folder, or the folder a single-file checkpoint
/// takes its configuration from).
pub struct Configs {
    pub unet: Value,
    pub vae: Value,
    pub text: Vec<Value>,
    pub tokenizers: Vec<TokenizerSource>,
    pub scheduler: Value,
    pub model_index: Value,
    /// The text encoders' layers in 8-bit weights (`Overrides::int8_text`).
    pub int8_text: bool,
    /// The UNet's transformer layers in 8 bits (`Overrides::int8_unet`).
    pub int8_unet: bool,
}

/// Where a text encoder's tokenizer comes from.
#[derive(Debug, Clone)]
pub enum TokenizerSource {
    /// A diffusers `tokenizer/` folder.
    Folder(PathBuf),
    /// The built-in CLIP tokenizer with this pad token (`None`: end of text).
    Builtin(Option<String>),
}

impl TokenizerSource {
    fn load(&self) -> Result<ClipTokenizer, DiffusionError> {
        match self {
            TokenizerSource::Folder(dir) => ClipTokenizer::load(dir),
            TokenizerSource::Builtin(pad) => ClipTokenizer::builtin(pad.as_deref()),
        }
    }
}

/// Where a model's weights are and how to read its configuration.
#[derive(Debug, Clone)]
pub enum ModelSource {
    /// A diffusers folder.
    Diffusers(PathBuf),
    /// A single-file checkpoint; its configuration read off its shapes, or taken from
    /// `config` (a diffusers folder of the same architecture) when given.
    SingleFile {
        path: PathBuf,
        config: Option<PathBuf>,
    },
    /// A diffusers FLUX.1 folder, parts of it possibly replaced by single files.
    Flux {
        dir: PathBuf,
        files: flux::FluxFiles,
    },
    /// A diffusers SD 3 / 3.5 folder, parts of it possibly replaced by single files.
    Sd3 { dir: PathBuf, files: sd3::Sd3Files },
}

impl Configs {
    /// Reads the configuration files of a diffusers folder.
    pub fn read(dir: &Path) -> Result<Configs, DiffusionError> {
        let model_index = read_json(&dir.join("model_index.json"))?;
        let mut text = vec![read_json(&dir.join("text_encoder/config.json"))?];
        let mut tokenizers = vec![TokenizerSource::Folder(dir.join("tokenizer"))];
        if dir.join("text_encoder_2/config.json").is_file() {
            text.push(read_json(&dir.join("text_encoder_2/config.json"))?);
            tokenizers.push(TokenizerSource::Folder(dir.join("tokenizer_2")));
        }
        Ok(Configs {
            int8_text: false,
            int8_unet: false,
            unet: read_json(&dir.join("unet/config.json"))?,
            vae: read_json(&dir.join("vae/config.json"))?,
            text,
            tokenizers,
            scheduler: read_json(&dir.join("scheduler/scheduler_config.json"))?,
            model_index,
        })
    }
}

impl Configs {
    /// Applies the per-model overrides (prediction type, timestep spacing, 8-bit text encoders).
    pub fn apply_overrides(&mut self, o: &single_file::Overrides) {
        self.int8_text = o.int8_text;
        self.int8_unet = o.int8_unet;
        if let Some(obj) = self.scheduler.as_object_mut() {
            if let Some(p) = &o.prediction {
                obj.insert("prediction_type".into(), Value::String(p.clone()));
            }
            if let Some(s) = &o.timestep_spacing {
                obj.insert("timestep_spacing".into(), Value::String(s.clone()));
            }
        }
    }
}

impl Pipeline {
    /// Loads a model from its source, with the per-model scheduler overrides.
    pub fn load(
        source: &ModelSource,
        overrides: &single_file::Overrides,
        device: &Device,
    ) -> Result<Pipeline, DiffusionError> {
        match source {
            ModelSource::Diffusers(dir) => Self::load_diffusers(dir, overrides, device),
            ModelSource::SingleFile { path, config } => {
                Self::load_single_file(path, config.as_deref(), overrides, device)
            }
            ModelSource::Flux { .. } => Err(DiffusionError::Model(
                "a FLUX model loads as a flux::FluxPipeline, not a Stable Diffusion pipeline"
                    .into(),
            )),
            ModelSource::Sd3 { .. } => Err(DiffusionError::Model(
                "an SD3 model loads as an sd3::Sd3Pipeline, not a Stable Diffusion pipeline".into(),
            )),
        }
    }

    /// Loads a single-file checkpoint (float32 in memory), its configuration inferred from
    /// its tensors or read from `config_dir`.
    pub fn load_single_file(
        path: &Path,
        config_dir: Option<&Path>,
        overrides: &single_file::Overrides,
        device: &Device,
    ) -> Result<Pipeline, DiffusionError> {
        let header = single_file::Header::read(path)?;
        let arch = header.arch()?;
        let mut configs = match config_dir {
            Some(dir) => {
                let mut c = Configs::read(dir)?;
                // The file's UNet decides what it takes (a folder of the same architecture may
                // be a text model's, the file an instruction-editing or inpainting one).
                if let Ok(n) = header.dim("model.diffusion_model.input_blocks.0.0.weight", 1) {
                    c.unet["in_channels"] = serde_json::json!(n);
                }
                c
            }
            None => {
                let v_pred = overrides.prediction.is_none()
                    && arch == pictor_core::models::Arch::Sd2
                    // SAFETY: read-only map of the user's checkpoint (see load_diffusers).
                    && single_file::v_prediction_guess(
                        &unsafe { candle::safetensors::MmapedSafetensors::new(path)? },
                        &header,
                    );
                let c = single_file::infer_configs(&header, v_pred, overrides)?;
                Configs {
                    int8_text: false,
                    int8_unet: false,
                    unet: c.unet,
                    vae: c.vae,
                    text: c.text,
                    tokenizers: c.pads.into_iter().map(TokenizerSource::Builtin).collect(),
                    scheduler: c.scheduler,
                    model_index: c.model_index,
                }
            }
        };
        configs.apply_overrides(overrides);
        if (configs.text.len() == 2) != (arch == pictor_core::models::Arch::Sdxl) {
            return Err(DiffusionError::Model(format!(
                "{}: the configuration folder is not of the checkpoint's architecture ({})",
                path.display(),
                arch.as_str()
            )));
        }
        let weights = single_file::weights(path, arch, &configs.unet, &configs.vae, device)?;
        Self::build_with_loras(
            &configs,
            weights,
            device,
            header.f32_bytes(),
            &overrides.loras,
        )
    }

    /// Loads a diffusers-layout folder (float32 in memory; f16/bf16 files are widened).
    pub fn load_diffusers(
        dir: &Path,
        overrides: &single_file::Overrides,
        device: &Device,
    ) -> Result<Pipeline, DiffusionError> {
        let mut configs = Configs::read(dir)?;
        configs.apply_overrides(overrides);
        let files = |sub: &str, plain: &str| load::weights_in(&dir.join(sub), plain);
        let unet_w = files("unet", "diffusion_pytorch_model.safetensors")?;
        let vae_w = files("vae", "diffusion_pytorch_model.safetensors")?;
        let mut text_w = vec![files("text_encoder", "model.safetensors")?];
        if configs.text.len() > 1 {
            text_w.push(files("text_encoder_2", "model.safetensors")?);
        }
        // What the weights take once widened to float32 (an fp16 file doubles), from the
        // safetensors headers alone: the number the memory budget counts. Each header is
        // checked before its file is mapped.
        let mut bytes = 0u64;
        // Text encoders saved by transformers 5 have no `text_model.` prefix.
        let mut unprefixed = Vec::new();
        for (i, files) in [&unet_w, &vae_w]
            .into_iter()
            .chain(text_w.iter())
            .enumerate()
        {
            let mut prefixed = false;
            for p in files {
                let header = checked_header(p)?;
                prefixed |= header.keys().any(|k| k.starts_with("text_model."));
                bytes = header
                    .values()
                    .fold(bytes, |n, t| n.saturating_add(t.f32_bytes()));
            }
            if i >= 2 {
                unprefixed.push(!prefixed);
            }
        }
        // SAFETY: the weight files are mapped read-only; Pictor does not write them, and the
        // README tells users not to modify a model's files while the server is running.
        let vb =
            |p: &[PathBuf]| unsafe { VarBuilder::from_mmaped_safetensors(p, DType::F32, device) };
        let weights = Weights {
            unet: vb(&unet_w)?,
            vae: vb(&vae_w)?,
            text: text_w
                .iter()
                .zip(unprefixed)
                .map(|(p, unprefixed)| {
                    let vb = vb(p)?;
                    Ok::<_, DiffusionError>(if unprefixed {
                        vb.rename_f(|name: &str| {
                            name.strip_prefix("text_model.").unwrap_or(name).to_owned()
                        })
                    } else {
                        vb
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        Self::build_with_loras(&configs, weights, device, bytes, &overrides.loras)
    }

    /// [`build`](Self::build) with `loras` merged into the weights as they are read
    /// ([`lora`]); every layer of every LoRA must find its weight.
    pub fn build_with_loras(
        configs: &Configs,
        weights: Weights<'_>,
        device: &Device,
        resident_bytes: u64,
        loras: &[lora::LoraSpec],
    ) -> Result<Pipeline, DiffusionError> {
        if loras.is_empty() {
            return Self::build(configs, weights, device, resident_bytes);
        }
        let merge = lora::Merge::read(
            loras,
            &lora::Denoiser::Unet(lora::UnetLayout::from_config(&configs.unet)),
        )?;
        let weights = Weights {
            unet: merge.wrap(lora::Part::Unet, weights.unet),
            vae: weights.vae,
            text: weights
                .text
                .into_iter()
                .enumerate()
                .map(|(i, vb)| merge.wrap(lora::Part::Text(i), vb))
                .collect(),
        };
        let pipe = Self::build(configs, weights, device, resident_bytes).map_err(|e| match e {
            // A LoRA layer whose shape does not fit is the LoRA's fault, not the engine's.
            DiffusionError::Engine(c) if c.to_string().starts_with("LoRA ") => {
                DiffusionError::Model(c.to_string())
            }
            e => e,
        })?;
        merge.check()?;
        Ok(pipe)
    }

    /// Builds the networks from configurations and weights.
    pub fn build(
        configs: &Configs,
        weights: Weights<'_>,
        device: &Device,
        resident_bytes: u64,
    ) -> Result<Pipeline, DiffusionError> {
        let unet_shape = load::unet_config(&configs.unet)?;
        let (vae_cfg, vae_scale, vae_in, vae_out) = load::vae_config(&configs.vae)?;
        let latent_channels = vae_cfg.latent_channels;
        let unet_kind = UnetKind::of(unet_shape.in_channels as u64, latent_channels as u64)
            .ok_or_else(|| {
                DiffusionError::Model(format!(
                    "the UNet takes {} input channels; the VAE makes {latent_channels}-channel latents \
                     (a model for text, instruction edits or inpainting takes {latent_channels}, {} or {})",
                    unet_shape.in_channels,
                    2 * latent_channels,
                    2 * latent_channels + 1
                ))
            })?;
        if unet_shape.out_channels != latent_channels {
            return Err(DiffusionError::Model(
                "the UNet and the VAE disagree on latent channels".into(),
            ));
        }
        let sdxl = unet_shape.config.text_time.is_some();
        if sdxl && unet_kind != UnetKind::Text {
            return Err(DiffusionError::Model(format!(
                "SDXL {} models are not supported yet (SD 1.x and 2.x ones are)",
                if unet_kind == UnetKind::Instruct {
                    "instruction-editing"
                } else {
                    "inpainting"
                }
            )));
        }
        if configs.text.len() != configs.tokenizers.len() || (sdxl && configs.text.len() != 2) {
            return Err(DiffusionError::Model(
                "text encoders and tokenizers do not match the UNet".into(),
            ));
        }
        let mut encoders = Vec::new();
        for ((cfg, tok), vb) in configs
            .text
            .iter()
            .zip(&configs.tokenizers)
            .zip(weights.text)
        {
            let (mut c, projection) = load::clip_config(cfg)?;
            c.int8 = configs.int8_text;
            encoders.push(TextEncoder {
                tokenizer: tok.load()?,
                model: ClipTextTransformer::new(vb, &c, projection)?,
            });
        }
        let mut unet_config = unet_shape.config;
        if configs.int8_unet {
            if device.is_cpu() && net::linear_int8::available() {
                unet_config.weights = net::linear::Weights::Int8;
            } else {
                tracing::warn!(
                    "8-bit UNet weights need a CPU with AVX-512 VNNI: the UNet stays in float"
                );
            }
        }
        let unet = UNet2DConditionModel::new(
            weights.unet,
            unet_shape.in_channels,
            unet_shape.out_channels,
            unet_config,
        )?;
        let vae = AutoEncoderKL::new(weights.vae, vae_in, vae_out, vae_cfg)?;
        let force_zeros_for_empty_prompt = configs
            .model_index
            .get("force_zeros_for_empty_prompt")
            .and_then(Value::as_bool)
            .unwrap_or(sdxl);
        Ok(Pipeline {
            encoders,
            unet,
            vae,
            vae_scale,
            sdxl,
            force_zeros_for_empty_prompt,
            scheduler: SchedulerConfig::from_json(&configs.scheduler)?,
            sample_size: unet_shape.sample_size,
            latent_channels,
            unet_kind,
            device: device.clone(),
            resident_bytes,
            tiny_decoder: None,
            vae_tile: VAE_TILE,
        })
    }

    /// Decodes pictures with a TAESD decoder instead of the VAE's (the VAE still encodes
    /// img2img sources).
    pub fn use_tiny_decoder(&mut self, d: taesd::TinyDecoder) -> Result<(), DiffusionError> {
        if d.latent_channels() != self.latent_channels {
            return Err(DiffusionError::Model(format!(
                "the tiny decoder takes {} latent channels, the model makes {}",
                d.latent_channels(),
                self.latent_channels
            )));
        }
        self.resident_bytes += d.resident_bytes;
        self.tiny_decoder = Some(d);
        Ok(())
    }

    /// The UNet's transformer linear layers: how many are 8-bit (`Overrides::int8_unet`), and
    /// how many there are.
    pub fn unet_linear_layers(&self) -> (usize, usize) {
        self.unet.linear_layers()
    }

    /// The VAE.
    pub fn vae(&self) -> &AutoEncoderKL {
        &self.vae
    }

    /// Whether pictures are decoded by a tiny decoder.
    pub fn has_tiny_decoder(&self) -> bool {
        self.tiny_decoder.is_some()
    }

    /// What the UNet takes beside the latents.
    pub fn unet_kind(&self) -> UnetKind {
        self.unet_kind
    }

    pub fn is_sdxl(&self) -> bool {
        self.sdxl
    }

    /// Token ids of `text` for each text encoder (`(1, 77)` u32 tensors).
    pub fn token_ids(&self, text: &str) -> Result<Vec<Tensor>, DiffusionError> {
        self.encoders
            .iter()
            .map(|e| {
                let ids = e.tokenizer.encode(text);
                Ok(Tensor::from_vec(
                    ids,
                    (1, e.tokenizer.max_len()),
                    &self.device,
                )?)
            })
            .collect()
    }

    /// diffusers `encode_prompt` for one text: SD 1/2 the last hidden state; SDXL the
    /// penultimate hidden states of both encoders side by side, and the second's pooled output.
    fn encode_one(&self, text: &str) -> Result<(Tensor, Option<Tensor>), DiffusionError> {
        let ids = self.token_ids(text)?;
        if !self.sdxl {
            let out = self.encoders[0].model.encode(&ids[0], None)?;
            return Ok((out.last, None));
        }
        let mut parts = Vec::new();
        let mut pooled = None;
        for (e, ids) in self.encoders.iter().zip(&ids) {
            let out = e.model.encode(ids, Some(1))?;
            let hidden = out
                .hidden
                .ok_or_else(|| DiffusionError::Model("the text encoder is too shallow".into()))?;
            parts.push(hidden);
            if out.pooled.is_some() {
                pooled = out.pooled;
            }
        }
        let pooled = pooled.ok_or_else(|| {
            DiffusionError::Model("SDXL needs a text encoder with a projection".into())
        })?;
        Ok((Tensor::cat(&parts, 2)?, Some(pooled)))
    }

    /// The conditioning for a prompt; with `guidance`, also for the negative prompt.
    pub fn encode_text(
        &self,
        prompt: &str,
        negative: &str,
        guidance: bool,
    ) -> Result<Conditioning, DiffusionError> {
        let (cond, pooled) = self.encode_one(prompt)?;
        let (uncond, uncond_pooled) = if !guidance {
            (None, None)
        } else if self.sdxl && self.force_zeros_for_empty_prompt && negative.is_empty() {
            (
                Some(cond.zeros_like()?),
                pooled.as_ref().map(Tensor::zeros_like).transpose()?,
            )
        } else {
            let (u, p) = self.encode_one(negative)?;
            (Some(u), p)
        };
        Ok(Conditioning {
            cond,
            uncond,
            pooled,
            uncond_pooled,
        })
    }

    /// One UNet evaluation (batch 1) at timestep `t`.
    pub fn unet(
        &self,
        x: &Tensor,
        t: f64,
        context: &Tensor,
        pooled: Option<&Tensor>,
        size: (usize, usize),
    ) -> Result<Tensor, DiffusionError> {
        let time_ids;
        let text_time = match pooled {
            Some(p) if self.sdxl => {
                let (h, w) = (size.0 as f32, size.1 as f32);
                time_ids = Tensor::new(&[[h, w, 0.0, 0.0, h, w]], &self.device)?;
                Some(TextTime {
                    text_embeds: p,
                    time_ids: &time_ids,
                })
            }
            _ => None,
        };
        Ok(self.unet.forward(x, t, context, text_time.as_ref())?)
    }

    /// The denoising loop from `latents` (already noised to the schedule's evaluation
    /// `start`). Classifier-free guidance runs the two halves one after the other (half the peak
    /// memory of a batch of two, the same arithmetic).
    #[allow(clippy::too_many_arguments)]
    pub fn denoise(
        &self,
        cond: &Conditioning,
        latents: Tensor,
        schedule: &Schedule,
        start: usize,
        guidance: f64,
        noise: &mut dyn NoiseSource,
        size: (usize, usize),
        control: &dyn StepControl,
    ) -> Result<Tensor, DiffusionError> {
        let run = Denoise {
            cond,
            schedule,
            start,
            guidance,
            guide: &Guide::Plain,
            blend: None,
            size,
        };
        self.denoise_with(&run, latents, noise, control)
    }

    /// [`Pipeline::denoise`] with extra UNet inputs ([`Guide`]) and, for masked img2img, the
    /// source blended back outside the mask after every step ([`Blend`]).
    pub fn denoise_with(
        &self,
        run: &Denoise<'_>,
        mut latents: Tensor,
        noise: &mut dyn NoiseSource,
        control: &dyn StepControl,
    ) -> Result<Tensor, DiffusionError> {
        let schedule = run.schedule;
        let total = schedule.len() - run.start;
        let mut state = SamplerState::default();
        for (done, k) in (run.start..schedule.len()).enumerate() {
            if control.cancelled() {
                return Err(DiffusionError::Cancelled);
            }
            let t = f64::from(schedule.timesteps[k]);
            let x = schedule.scale_input(&latents, k)?;
            let eps = self.predict(run, &x, t)?;
            let step_noise = if schedule.sampler.ancestral() {
                Some(self.randn(noise, latents.dims())?)
            } else {
                None
            };
            latents = schedule.step(&mut state, &eps, k, &latents, step_noise.as_ref())?;
            if let Some(b) = run.blend {
                // diffusers' StableDiffusionInpaintPipeline on a 4-channel UNet: outside the
                // mask, the source noised to the next step (clean after the last).
                let proper = if k + 1 < schedule.len() {
                    schedule.add_noise(&b.clean, &b.noise, k + 1)?
                } else {
                    b.clean.clone()
                };
                let keep = b.mask.affine(-1.0, 1.0)?;
                latents = (proper.broadcast_mul(&keep)? + latents.broadcast_mul(&b.mask)?)?;
            }
            control.progress(done + 1, total);
        }
        Ok(latents)
    }

    /// The guided noise prediction for the scaled latents `x` at timestep `t`.
    fn predict(&self, run: &Denoise<'_>, x: &Tensor, t: f64) -> Result<Tensor, DiffusionError> {
        let cond = run.cond;
        let size = run.size;
        let with = |extra: &Tensor| Tensor::cat(&[x, extra], 1);
        match run.guide {
            Guide::Instruct {
                image,
                image_guidance,
            } => {
                // diffusers' StableDiffusionInstructPix2PixPipeline: (text, image), (none,
                // image), (none, none), combined as uncond + g (text − image) + ig (image − uncond).
                let xi = with(image)?;
                let text = self.unet(&xi, t, &cond.cond, None, size)?;
                match &cond.uncond {
                    Some(un) if run.guidance > 1.0 && *image_guidance >= 1.0 => {
                        let img = self.unet(&xi, t, un, None, size)?;
                        let blank = with(&image.zeros_like()?)?;
                        let none = self.unet(&blank, t, un, None, size)?;
                        Ok(((&none + ((text - &img)? * run.guidance)?)?
                            + ((img - &none)? * *image_guidance)?)?)
                    }
                    _ => Ok(text),
                }
            }
            guide => {
                let input;
                let x = match guide {
                    Guide::Concat(extra) => {
                        input = with(extra)?;
                        &input
                    }
                    _ => x,
                };
                let text = self.unet(x, t, &cond.cond, cond.pooled.as_ref(), size)?;
                match &cond.uncond {
                    Some(uncond) if run.guidance > 1.0 => {
                        let un = self.unet(x, t, uncond, cond.uncond_pooled.as_ref(), size)?;
                        Ok((&un + ((text - &un)? * run.guidance)?)?)
                    }
                    _ => Ok(text),
                }
            }
        }
    }

    /// Standard-normal noise of `shape` from `noise`.
    pub fn randn(
        &self,
        noise: &mut dyn NoiseSource,
        shape: &[usize],
    ) -> Result<Tensor, DiffusionError> {
        let n = shape.iter().product();
        Ok(Tensor::from_vec(noise.randn(n), shape, &self.device)?)
    }

    /// The latent shape of a `width`×`height` picture.
    pub fn latent_shape(&self, width: usize, height: usize) -> [usize; 4] {
        [1, self.latent_channels, height / 8, width / 8]
    }

    /// Decodes latents to the VAE's raw output (`(1, 3, H, W)`, about -1..1): by the tiny
    /// decoder when there is one, else by the VAE, tile by tile above [`Pipeline::vae_tile`].
    pub fn decode_raw(&self, latents: &Tensor) -> Result<Tensor, DiffusionError> {
        if let Some(tiny) = &self.tiny_decoder {
            return tiny.decode(latents);
        }
        let (tile, overlap) = self.vae_tile;
        tiled_decode(&self.vae, &(latents / self.vae_scale)?, tile, overlap)
    }

    /// Encodes an image (`(1, 3, H, W)` in -1..1) to scaled latents, sampling the posterior
    /// with `noise` as diffusers' `latent_dist.sample(generator)` does.
    pub fn encode_image(
        &self,
        image: &Tensor,
        noise: &mut dyn NoiseSource,
    ) -> Result<Tensor, DiffusionError> {
        let dist = self.vae.encode(image)?;
        let eps = self.randn(noise, dist.mean().dims())?;
        Ok((dist.sample_with(&eps)? * self.vae_scale)?)
    }

    /// RGB8 `width`×`height` as the VAE takes it: `(1, 3, H, W)` in -1..1 (diffusers'
    /// `image_processor.preprocess`).
    pub fn pixels(
        &self,
        image: &[u8],
        width: usize,
        height: usize,
    ) -> Result<Tensor, DiffusionError> {
        if image.len() != width * height * 3 {
            return Err(DiffusionError::Invalid(
                "the source image has the wrong size".into(),
            ));
        }
        let pixels = Tensor::from_vec(image.to_vec(), (height, width, 3), &self.device)?
            .permute((2, 0, 1))?
            .to_dtype(DType::F32)?
            .unsqueeze(0)?;
        Ok((((pixels / 255.0)? * 2.0)? - 1.0)?)
    }

    /// The schedule of a request.
    pub fn schedule(&self, req: &Request) -> Result<Schedule, DiffusionError> {
        self.scheduler.schedule(req.steps, req.sampler, req.karras)
    }

    pub(crate) fn check(&self, req: &Request) -> Result<(), DiffusionError> {
        if !req.width.is_multiple_of(8)
            || !req.height.is_multiple_of(8)
            || req.width < 64
            || req.height < 64
        {
            return Err(DiffusionError::Invalid(
                "width and height must be multiples of 8, at least 64".into(),
            ));
        }
        if req.width > 4096 || req.height > 4096 {
            return Err(DiffusionError::Invalid(
                "pictures are at most 4096 pixels a side".into(),
            ));
        }
        Ok(())
    }

    /// Refuses models whose UNet needs a source picture (instruction editing, inpainting).
    fn needs_text_unet(&self) -> Result<(), DiffusionError> {
        match self.unet_kind {
            UnetKind::Text => Ok(()),
            UnetKind::Instruct => Err(DiffusionError::Invalid(
                "this is an instruction-editing (InstructPix2Pix) model: it edits pictures, map it to the edit tier".into(),
            )),
            UnetKind::Inpaint => Err(DiffusionError::Invalid(
                "this is an inpainting model: it repaints masked areas of a picture, map it to the edit tier".into(),
            )),
        }
    }

    /// Text to image: the picture as RGB8, `width * height * 3` bytes.
    pub fn txt2img(
        &self,
        req: &Request,
        noise: &mut dyn NoiseSource,
        control: &dyn StepControl,
    ) -> Result<Vec<u8>, DiffusionError> {
        let latents = self.txt2img_latents(req, noise, control)?;
        to_rgb8(&self.decode_raw(&latents)?)
    }

    /// [`Pipeline::txt2img`] up to the final latents.
    pub fn txt2img_latents(
        &self,
        req: &Request,
        noise: &mut dyn NoiseSource,
        control: &dyn StepControl,
    ) -> Result<Tensor, DiffusionError> {
        self.check(req)?;
        self.needs_text_unet()?;
        let guided = req.guidance > 1.0;
        let cond = self.encode_text(&req.prompt, &req.negative_prompt, guided)?;
        let schedule = self.schedule(req)?;
        let shape = self.latent_shape(req.width, req.height);
        let latents = (self.randn(noise, &shape)? * f64::from(schedule.init_noise_sigma))?;
        self.denoise(
            &cond,
            latents,
            &schedule,
            0,
            req.guidance,
            noise,
            (req.height, req.width),
            control,
        )
    }

    /// Image to image: `image` is RGB8 of `req.width`×`req.height`; `strength` in (0, 1] is how
    /// much of the schedule runs (diffusers `StableDiffusionImg2ImgPipeline`).
    pub fn img2img(
        &self,
        req: &Request,
        image: &[u8],
        strength: f64,
        noise: &mut dyn NoiseSource,
        control: &dyn StepControl,
    ) -> Result<Vec<u8>, DiffusionError> {
        let latents = self.img2img_latents(req, image, strength, noise, control)?;
        to_rgb8(&self.decode_raw(&latents)?)
    }

    /// [`Pipeline::img2img`] up to the final latents.
    pub fn img2img_latents(
        &self,
        req: &Request,
        image: &[u8],
        strength: f64,
        noise: &mut dyn NoiseSource,
        control: &dyn StepControl,
    ) -> Result<Tensor, DiffusionError> {
        self.check(req)?;
        self.needs_text_unet()?;
        if image.len() != req.width * req.height * 3 {
            return Err(DiffusionError::Invalid(
                "the source image has the wrong size".into(),
            ));
        }
        let guided = req.guidance > 1.0;
        let cond = self.encode_text(&req.prompt, &req.negative_prompt, guided)?;
        let schedule = self.schedule(req)?;
        let init = ((req.steps as f64 * strength.clamp(0.0, 1.0)) as usize).min(req.steps);
        if init == 0 {
            return Err(DiffusionError::Invalid(
                "the edit strength leaves no step to run".into(),
            ));
        }
        let start = req.steps - init;
        let pixels = self.pixels(image, req.width, req.height)?;
        let clean = self.encode_image(&pixels, noise)?;
        let eps = self.randn(noise, clean.dims())?;
        let begin = schedule.begin(start);
        let latents = schedule.add_noise(&clean, &eps, begin)?;
        self.denoise(
            &cond,
            latents,
            &schedule,
            begin,
            req.guidance,
            noise,
            (req.height, req.width),
            control,
        )
    }
}

/// diffusers' post-processing: `(x / 2 + 0.5).clamp(0, 1)`, then `round(x * 255)` as u8, HWC.
pub fn to_rgb8(raw: &Tensor) -> Result<Vec<u8>, DiffusionError> {
    let img = ((raw / 2.0)? + 0.5)?.clamp(0f32, 1f32)?;
    let img = (img * 255.0)?.round()?.to_dtype(DType::U8)?;
    let img = img.squeeze(0)?.permute((1, 2, 0))?.contiguous()?;
    Ok(img.flatten_all()?.to_vec1::<u8>()?)
}

/// Tile starts along one latent axis of `len`, as diffusers' `tiled_decode` places them: every
/// `tile - overlap` latents, while the tile still reaches past the previous one's overlap (the
/// last tile may be narrower).
fn tile_starts(len: usize, tile: usize, overlap: usize) -> Vec<usize> {
    if len <= tile {
        return vec![0];
    }
    let stride = tile.saturating_sub(overlap).max(1);
    (0..)
        .map(|i| i * stride)
        .take_while(|&s| s == 0 || s + overlap < len)
        .collect()
}

/// Decodes `z` (unscaled latents, `(1, C, h, w)`) tile by tile — `tile`×`tile` latents
/// overlapping by `overlap` — and blends the overlaps with linear ramps, so the decoder's
/// memory is that of one tile whatever the picture's size (diffusers' `enable_tiling` idea;
/// the group norms see one tile at a time, so tiles differ slightly from a whole decode, and the
/// ramps hide the seams). Pictures no larger than a tile are decoded whole.
pub fn tiled_decode(
    vae: &AutoEncoderKL,
    z: &Tensor,
    tile: usize,
    overlap: usize,
) -> Result<Tensor, DiffusionError> {
    let (_, _, h, w) = z.dims4()?;
    if h <= tile && w <= tile {
        return Ok(vae.decode(z)?);
    }
    let overlap = overlap.min(tile / 2);
    let (ys, xs) = (tile_starts(h, tile, overlap), tile_starts(w, tile, overlap));
    let (ph, pw) = (h * 8, w * 8);
    let mut acc: Vec<f32> = Vec::new();
    let mut weight = vec![0f32; ph * pw];
    let mut channels = 0;
    // Weight of pixel `i` of a tile of `n` pixels along an axis: ramps up over the overlap on
    // sides that meet another tile, flat (1) on the picture's border.
    let ramp = |i: usize, n: usize, first: bool, last: bool, blend: usize| -> f32 {
        let up = if first || blend == 0 {
            1.0
        } else {
            ((i as f32 + 0.5) / blend as f32).min(1.0)
        };
        let down = if last || blend == 0 {
            1.0
        } else {
            ((n - i) as f32 - 0.5).min(blend as f32) / blend as f32
        };
        up.min(down)
    };
    for (yi, &y0) in ys.iter().enumerate() {
        for (xi, &x0) in xs.iter().enumerate() {
            let th = tile.min(h - y0);
            let tw = tile.min(w - x0);
            let part = z.narrow(2, y0, th)?.narrow(3, x0, tw)?.contiguous()?;
            let out = vae.decode(&part)?.to_dtype(DType::F32)?.squeeze(0)?;
            let (c, oh, ow) = out.dims3()?;
            if acc.is_empty() {
                channels = c;
                acc = vec![0f32; c * ph * pw];
            }
            let data = out.flatten_all()?.to_vec1::<f32>()?;
            let blend = overlap * 8;
            let wy: Vec<f32> = (0..oh)
                .map(|i| ramp(i, oh, yi == 0, yi + 1 == ys.len(), blend))
                .collect();
            let wx: Vec<f32> = (0..ow)
                .map(|i| ramp(i, ow, xi == 0, xi + 1 == xs.len(), blend))
                .collect();
            for ch in 0..c {
                for (i, wyi) in wy.iter().enumerate() {
                    let row = (ch * ph + y0 * 8 + i) * pw + x0 * 8;
                    let src = &data[(ch * oh + i) * ow..(ch * oh + i + 1) * ow];
                    for ((a, d), wxj) in acc[row..row + ow].iter_mut().zip(src).zip(&wx) {
                        *a += d * wyi * wxj;
                    }
                }
            }
            for (i, wyi) in wy.iter().enumerate() {
                let row = (y0 * 8 + i) * pw + x0 * 8;
                for (w, wxj) in weight[row..row + ow].iter_mut().zip(&wx) {
                    *w += wyi * wxj;
                }
            }
        }
    }
    for ch in 0..channels {
        for (a, wgt) in acc[ch * ph * pw..(ch + 1) * ph * pw]
            .iter_mut()
            .zip(&weight)
        {
            *a /= wgt.max(1e-6);
        }
    }
    Ok(Tensor::from_vec(acc, (1, channels, ph, pw), z.device())?)
}

#[cfg(test)]
mod tiling_tests {
    use super::tile_starts;

    #[test]
    fn tiles_cover_the_axis_and_end_flush() {
        assert_eq!(tile_starts(64, 64, 16), vec![0]);
        assert_eq!(tile_starts(128, 64, 16), vec![0, 48, 96]);
        assert_eq!(tile_starts(100, 64, 16), vec![0, 48]);
        assert_eq!(tile_starts(200, 64, 16), vec![0, 48, 96, 144]);
        assert_eq!(tile_starts(65, 64, 16), vec![0, 48]);
    }
}

#[cfg(test)]
mod speed_tests {
    #[test]
    fn the_matmul_speed_is_measured() {
        let g = super::measure_gflops();
        eprintln!("float32 matmul: {g:.1} GFLOP/s");
        assert!(g > 0.1, "{g}");
    }
}
