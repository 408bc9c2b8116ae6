//! FLUX.1 (schnell and dev): diffusers' `FluxPipeline` — CLIP-L's pooled vector and T5-XXL's
//! embeddings, the flow-matching transformer on packed 2×2 latent patches, the flow-matching
//! Euler scheduler (schnell: shift 1; dev: the resolution-dependent shift) and the 16-channel
//! VAE (`z / 0.3611 + 0.1159`).
//!
//! - [`t5`]: the T5 encoder and its SentencePiece tokenizer;
//! - [`model`]: the transformer under Black Forest Labs' names;
//! - [`weights`]: weights by name from diffusers folders, ComfyUI single files and GGUF.

pub mod model;
pub mod t5;
pub mod weights;

use std::path::{Path, PathBuf};

use candle::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use serde_json::Value;

use crate::lora::{Denoiser, LoraSpec, Merge, Part};
use crate::net::clip::ClipTextTransformer;
use crate::net::vae::AutoEncoderKL;
use crate::noise::NoiseSource;
use crate::tokenizer::ClipTokenizer;
use crate::{DiffusionError, StepControl, load};
use model::{Flux, FluxConfig};
use t5::{T5Config, T5Encoder, T5Tokenizer};
use weights::WeightMap;

/// diffusers' `FlowMatchEulerDiscreteScheduler` settings that FLUX uses.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSchedule {
    pub shift: f32,
    /// `use_dynamic_shifting`: `(base_shift, max_shift, base_image_seq_len, max_image_seq_len)`.
    pub dynamic: Option<(f64, f64, f64, f64)>,
}

impl FlowSchedule {
    pub fn from_json(v: &Value) -> FlowSchedule {
        let f = |k: &str, d: f64| v.get(k).and_then(Value::as_f64).unwrap_or(d);
        let dynamic = v
            .get("use_dynamic_shifting")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .then(|| {
                (
                    f("base_shift", 0.5),
                    f("max_shift", 1.15),
                    f("base_image_seq_len", 256.0),
                    f("max_image_seq_len", 4096.0),
                )
            });
        FlowSchedule {
            shift: f("shift", 1.0) as f32,
            dynamic,
        }
    }

    /// The sigmas for `steps` steps over `image_seq_len` packed latents, and a final 0:
    /// `linspace(1, 1/steps, steps)` in float32, shifted (`FluxPipeline` + `set_timesteps`).
    pub fn sigmas(&self, steps: usize, image_seq_len: usize) -> Vec<f32> {
        let steps = steps.max(1);
        let mut sigmas: Vec<f32> = (0..steps)
            .map(|i| {
                let end = 1.0 / steps as f64;
                let s = if steps == 1 {
                    1.0
                } else {
                    1.0 + (end - 1.0) * i as f64 / (steps - 1) as f64
                };
                s as f32
            })
            .collect();
        match self.dynamic {
            Some((base_shift, max_shift, base_len, max_len)) => {
                let m = (max_shift - base_shift) / (max_len - base_len);
                let mu = image_seq_len as f64 * m + (base_shift - m * base_len);
                let e = mu.exp() as f32;
                for s in &mut sigmas {
                    *s = e / (e + (1.0 / *s - 1.0));
                }
            }
            None => {
                let shift = self.shift;
                for s in &mut sigmas {
                    *s = shift * *s / (1.0 + (shift - 1.0) * *s);
                }
            }
        }
        sigmas.push(0.0);
        sigmas
    }
}

impl FlowSchedule {
    /// The sigmas diffusers' scheduler makes by itself (no `sigmas` passed, as
    /// `StableDiffusion3Pipeline`), and a final 0: timesteps spaced evenly from the training
    /// schedule's largest sigma to its smallest — already shifted when the shift is static, so
    /// the shift applies twice, as diffusers does — then shifted (or, with dynamic shifting,
    /// moved by `mu` from `image_seq_len` patches).
    pub fn sigmas_from_training(&self, steps: usize, image_seq_len: usize) -> Vec<f32> {
        let steps = steps.max(1);
        let shift = self.shift;
        // __init__: sigmas = linspace(1, 1000, 1000)[::-1] / 1000 in float32, shifted in
        // float32 unless the shift is dynamic; sigma_max = 1 either way.
        let smallest = 1.0f32 / 1000.0;
        let sigma_min = match self.dynamic {
            Some(_) => smallest,
            None => shift * smallest / (1.0 + (shift - 1.0) * smallest),
        };
        let sigma_max = match self.dynamic {
            Some(_) => 1.0f32,
            None => shift / (1.0 + (shift - 1.0)),
        };
        // set_timesteps: np.linspace(sigma_max · 1000, sigma_min · 1000, steps) / 1000 in
        // float64, shifted in float64, then float32.
        let (start, stop) = (f64::from(sigma_max) * 1000.0, f64::from(sigma_min) * 1000.0);
        let step = if steps > 1 {
            (stop - start) / (steps - 1) as f64
        } else {
            0.0
        };
        let mut sigmas: Vec<f32> = (0..steps)
            .map(|i| {
                let t = if steps > 1 && i == steps - 1 {
                    stop
                } else {
                    i as f64 * step + start
                };
                let s = t / 1000.0;
                let s = match self.dynamic {
                    Some((base_shift, max_shift, base_len, max_len)) => {
                        let m = (max_shift - base_shift) / (max_len - base_len);
                        let mu = image_seq_len as f64 * m + (base_shift - m * base_len);
                        mu.exp() / (mu.exp() + (1.0 / s - 1.0))
                    }
                    None => {
                        let shift = f64::from(shift);
                        shift * s / (1.0 + (shift - 1.0) * s)
                    }
                };
                s as f32
            })
            .collect();
        sigmas.push(0.0);
        sigmas
    }
}

/// `(1, C, h, w)` latents to `(1, h/2 · w/2, 4C)` patches (`_pack_latents`).
pub fn pack(latents: &Tensor) -> candle::Result<Tensor> {
    let (b, c, h, w) = latents.dims4()?;
    latents
        .reshape((b, c, h / 2, 2, w / 2, 2))?
        .permute((0, 2, 4, 1, 3, 5))?
        .reshape((b, (h / 2) * (w / 2), c * 4))
}

/// The inverse of [`pack`] for a latent grid of `h`×`w` (`_unpack_latents`).
pub fn unpack(packed: &Tensor, h: usize, w: usize) -> candle::Result<Tensor> {
    let (b, _, c4) = packed.dims3()?;
    packed
        .reshape((b, h / 2, w / 2, c4 / 4, 2, 2))?
        .permute((0, 3, 1, 4, 2, 5))?
        .reshape((b, c4 / 4, h, w))
}

/// Position ids of a `rows`×`cols` patch grid: `[0, row, col]` (`_prepare_latent_image_ids`).
pub fn image_ids(rows: usize, cols: usize) -> Vec<[f32; 3]> {
    (0..rows)
        .flat_map(|r| (0..cols).map(move |c| [0.0, r as f32, c as f32]))
        .collect()
}

/// A prompt's conditioning: T5's embeddings and CLIP's pooled vector.
pub struct FluxConditioning {
    pub t5: Tensor,
    pub pooled: Tensor,
}

/// One loaded FLUX.1 model.
pub struct FluxPipeline {
    pub clip: ClipTextTransformer,
    pub clip_tokenizer: ClipTokenizer,
    pub t5: T5Encoder,
    pub t5_tokenizer: T5Tokenizer,
    pub transformer: Flux,
    pub vae: AutoEncoderKL,
    vae_scale: f64,
    vae_shift: f64,
    pub schedule: FlowSchedule,
    /// T5's sequence length (diffusers' `max_sequence_length`: 256 for schnell, 512 for dev).
    pub max_sequence_length: usize,
    device: Device,
    /// Bytes the weights take in memory.
    pub resident_bytes: u64,
}

/// The weight files of a diffusers sub-folder.
fn weight_files(dir: &Path, sub: &str, plain: &str) -> Result<Vec<PathBuf>, DiffusionError> {
    load::weights_in(&dir.join(sub), plain)
}

fn is_gguf(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
}

/// Files that replace parts of a FLUX folder, and how float files are held.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FluxFiles {
    /// The transformer as one file (BFL names; safetensors or GGUF).
    pub transformer: Option<PathBuf>,
    /// The T5 encoder as one file (GGUF with llama.cpp's names, or safetensors).
    pub text_encoder_2: Option<PathBuf>,
    /// Float (safetensors) transformer and T5 weights: `None` (automatic) keeps a part in
    /// float32 up to [`FLOAT_PART_MAX`] and quantises a larger one to Q8_0 as it is read
    /// (FLUX.1's bfloat16 files would take 47.6 + 19 GB as float32); `Some(false)` always
    /// float32, `Some(true)` always Q8_0.
    pub quantise_float: Option<bool>,
}

/// Float32 bytes above which a float part loads as Q8_0 (automatic mode).
pub const FLOAT_PART_MAX: u64 = 4 << 30;

impl FluxFiles {
    /// The quantisation for a float part of `f32_bytes`.
    pub(crate) fn quantise(&self, f32_bytes: u64) -> Option<candle::quantized::GgmlDType> {
        let q = self.quantise_float.unwrap_or(f32_bytes > FLOAT_PART_MAX);
        q.then_some(candle::quantized::GgmlDType::Q8_0)
    }
}

impl FluxPipeline {
    /// Whether `dir` is a diffusers FLUX folder (`model_index.json` names `FluxPipeline`).
    pub fn is_flux_folder(dir: &Path) -> bool {
        crate::read_json(&dir.join("model_index.json"))
            .ok()
            .and_then(|v| v.get("_class_name")?.as_str().map(|s| s == "FluxPipeline"))
            .unwrap_or(false)
    }

    /// Loads a diffusers-layout FLUX folder; `files` may replace its transformer (BFL names:
    /// ComfyUI's `flux1-*.safetensors`, or a GGUF) and its T5 encoder (a GGUF with llama.cpp's
    /// names, as city96's `t5-v1_1-xxl-encoder-*.gguf`, or a safetensors file with transformers'
    /// names).
    pub fn load_diffusers(
        dir: &Path,
        files: &FluxFiles,
        device: &Device,
    ) -> Result<FluxPipeline, DiffusionError> {
        Self::load_with_loras(dir, files, &[], device)
    }

    /// [`load_diffusers`](Self::load_diffusers) with LoRAs on the transformer (merged into
    /// float weights, applied beside quantised ones: [`crate::lora::Merge::apply`]) and on
    /// CLIP-L; every layer of every LoRA must find its weight.
    pub fn load_with_loras(
        dir: &Path,
        files: &FluxFiles,
        loras: &[LoraSpec],
        device: &Device,
    ) -> Result<FluxPipeline, DiffusionError> {
        let merge = Merge::read(loras, &Denoiser::Transformer)?;
        // FLUX's second text encoder is T5 (diffusers' `text_encoder_2`; kohya's `lora_te3_`).
        merge.refuse(Part::Text(1), "the T5 text encoder (text_encoder_2)")?;
        merge.refuse(Part::Text(2), "the T5 text encoder (lora_te3_)")?;
        let in_folder = component_gguf(dir, "transformer")?;
        let transformer = files.transformer.as_deref().or(in_folder.as_deref());
        // An all-in-one transformer file's own text encoders come before the folder's.
        let bundled = Bundled::of(files.transformer.as_deref())?;
        // CLIP-L: its pooled output only.
        let clip_json = crate::read_json(&dir.join("text_encoder/config.json"))?;
        let (clip_cfg, _) = load::clip_config(&clip_json)?;
        let (vb, mut bytes) = if bundled.clip_l {
            bundled.clip(Bundled::CLIP_L, device)?
        } else {
            let clip_files = weight_files(dir, "text_encoder", "model.safetensors")?;
            let mut prefixed = false;
            let mut bytes = 0u64;
            for p in &clip_files {
                let h = crate::checked_header(p)?;
                prefixed |= h.keys().any(|k| k.starts_with("text_model."));
                bytes += h.values().map(|t| t.f32_bytes()).sum::<u64>();
            }
            // SAFETY: mapped read-only (see Pipeline::load_diffusers).
            let vb =
                unsafe { VarBuilder::from_mmaped_safetensors(&clip_files, DType::F32, device)? };
            let vb = if prefixed {
                vb
            } else {
                vb.rename_f(|n: &str| n.strip_prefix("text_model.").unwrap_or(n).to_owned())
            };
            (vb, bytes)
        };
        let clip = ClipTextTransformer::new(merge.wrap(Part::Text(0), vb), &clip_cfg, false)?;
        let clip_tokenizer = ClipTokenizer::load(&dir.join("tokenizer"))?;

        let t5_json = dir.join("text_encoder_2/config.json");
        let t5_cfg = if t5_json.is_file() {
            T5Config::from_json(&crate::read_json(&t5_json)?)?
        } else {
            T5Config::xxl()
        };
        // The mapping's T5 file, else the bundled T5, else the folder's.
        let mut t5_w = if files.text_encoder_2.is_none() && bundled.t5 {
            bundled.t5_weights(files, device)?
        } else {
            t5_weights(dir, "text_encoder_2", files, device)?
        };
        bytes += t5_w.resident_bytes();
        let t5 = T5Encoder::new(&t5_cfg, &mut t5_w)
            .map_err(|e| DiffusionError::Model(format!("T5 text encoder: {e}")))?;
        let t5_tokenizer = T5Tokenizer::load(&dir.join("tokenizer_2/tokenizer.json"))?;

        let (cfg, mut tw) = match transformer {
            None => {
                let cfg = FluxConfig::from_diffusers(&crate::read_json(
                    &dir.join("transformer/config.json"),
                )?)?;
                let paths =
                    weight_files(dir, "transformer", "diffusion_pytorch_model.safetensors")?;
                let q = files.quantise(WeightMap::f32_bytes(&paths)?);
                let mut w = WeightMap::safetensors(&paths, device, |n| n.to_string(), q)?;
                weights::diffusers_to_bfl(&mut w, cfg.depth, cfg.depth_single_blocks)?;
                (cfg, w)
            }
            Some(path) => {
                let w = transformer_file(path, files, device)?;
                // The folder's configuration when it has one (as diffusers'
                // `from_single_file(config=…)`); the weights' shapes are checked against it.
                let json = dir.join("transformer/config.json");
                let cfg = if json.is_file() {
                    FluxConfig::from_diffusers(&crate::read_json(&json)?)?
                } else {
                    FluxConfig::from_bfl_names(&w)?
                };
                (cfg, w)
            }
        };
        merge.apply(
            &mut tw,
            &weights::bfl_plan(cfg.depth, cfg.depth_single_blocks, cfg.guidance_embed),
        )?;
        bytes += tw.resident_bytes();
        let transformer = Flux::new(&cfg, &mut tw)?;
        merge.check()?;

        if !cfg.in_channels.is_multiple_of(4) {
            return Err(DiffusionError::Model(format!(
                "the transformer takes {} channels: not 2×2 patches of latents",
                cfg.in_channels
            )));
        }
        let (vae, vae_scale, vae_shift, vae_bytes) = load_vae16(dir, cfg.in_channels / 4, device)?;
        bytes += vae_bytes;

        let schedule = FlowSchedule::from_json(&crate::read_json(
            &dir.join("scheduler/scheduler_config.json"),
        )?);
        Ok(FluxPipeline {
            clip,
            clip_tokenizer,
            t5,
            t5_tokenizer,
            max_sequence_length: if cfg.guidance_embed { 512 } else { 256 },
            transformer,
            vae,
            vae_scale,
            vae_shift,
            schedule,
            device: device.clone(),
            resident_bytes: bytes,
        })
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The CLIP ids, T5 ids, and what the encoders make of them.
    pub fn encode(&self, prompt: &str) -> Result<FluxConditioning, DiffusionError> {
        let clip_ids = self.clip_tokenizer.encode(prompt);
        let ids = Tensor::new(clip_ids.as_slice(), &self.device)?.unsqueeze(0)?;
        let out = self.clip.encode(&ids, None)?;
        let pooled = self.clip.eos_states(&ids, &out.last)?;
        let t5_ids = self.t5_tokenizer.encode(prompt, self.max_sequence_length)?;
        let ids = Tensor::new(t5_ids.as_slice(), &self.device)?.unsqueeze(0)?;
        let t5 = self.t5.forward(&ids)?;
        Ok(FluxConditioning { t5, pooled })
    }

    /// The latent grid of a `width`×`height` picture (a multiple of 16 in pixels).
    pub fn latent_size(
        &self,
        width: usize,
        height: usize,
    ) -> Result<(usize, usize), DiffusionError> {
        if !width.is_multiple_of(16) || !height.is_multiple_of(16) || width == 0 || height == 0 {
            return Err(DiffusionError::Invalid(format!(
                "FLUX pictures are a multiple of 16 pixels on each side, not {width}×{height}"
            )));
        }
        Ok((height / 8, width / 8))
    }

    /// Seed noise, `(1, C, h, w)` as diffusers draws it, packed.
    pub fn noise(
        &self,
        noise: &mut dyn NoiseSource,
        width: usize,
        height: usize,
    ) -> Result<Tensor, DiffusionError> {
        let (h, w) = self.latent_size(width, height)?;
        let c = self.transformer.config().in_channels / 4;
        let raw = Tensor::from_vec(noise.randn(c * h * w), (1, c, h, w), &self.device)?;
        Ok(pack(&raw)?)
    }

    /// The transformer's velocity for packed latents at sigma `t`.
    pub fn velocity(
        &self,
        cond: &FluxConditioning,
        latents: &Tensor,
        t: f32,
        guidance: f32,
        pe: &(Tensor, Tensor),
    ) -> Result<Tensor, DiffusionError> {
        let g = self.transformer.config().guidance_embed.then_some(guidance);
        Ok(self
            .transformer
            .forward(latents, &cond.t5, &cond.pooled, t, g, pe)?)
    }

    /// The rotary embedding for a `width`×`height` picture and this conditioning's text.
    pub fn positions(
        &self,
        cond: &FluxConditioning,
        width: usize,
        height: usize,
    ) -> Result<(Tensor, Tensor), DiffusionError> {
        let (h, w) = self.latent_size(width, height)?;
        let txt = vec![[0.0; 3]; cond.t5.dim(1)?];
        Ok(self
            .transformer
            .positions(&txt, &image_ids(h / 2, w / 2), &self.device)?)
    }

    /// The denoising loop from packed noise: `steps` flow-matching Euler steps.
    pub fn denoise(
        &self,
        cond: &FluxConditioning,
        mut latents: Tensor,
        steps: usize,
        guidance: f32,
        size: (usize, usize),
        control: &dyn StepControl,
    ) -> Result<Tensor, DiffusionError> {
        let (width, height) = size;
        let pe = self.positions(cond, width, height)?;
        let sigmas = self.schedule.sigmas(steps, latents.dim(1)?);
        for k in 0..sigmas.len() - 1 {
            if control.cancelled() {
                return Err(DiffusionError::Cancelled);
            }
            // The pipeline passes `timestep / 1000` with timestep = sigma · 1000 (float32).
            let t = (sigmas[k] * 1000.0) / 1000.0;
            let v = self.velocity(cond, &latents, t, guidance, &pe)?;
            latents = (latents + (v * f64::from(sigmas[k + 1] - sigmas[k]))?)?;
            control.progress(k + 1, sigmas.len() - 1);
        }
        Ok(latents)
    }

    /// Packed latents to the VAE's raw output `(1, 3, H, W)`.
    pub fn decode_raw(
        &self,
        packed: &Tensor,
        width: usize,
        height: usize,
    ) -> Result<Tensor, DiffusionError> {
        let (h, w) = self.latent_size(width, height)?;
        let z = ((unpack(packed, h, w)? / self.vae_scale)? + self.vae_shift)?;
        crate::tiled_decode(&self.vae, &z, crate::VAE_TILE.0, crate::VAE_TILE.1)
    }

    /// A whole picture: RGB8, `width`×`height`.
    #[allow(clippy::too_many_arguments)]
    pub fn txt2img(
        &self,
        prompt: &str,
        noise: &mut dyn NoiseSource,
        width: usize,
        height: usize,
        steps: usize,
        guidance: f32,
        control: &dyn StepControl,
    ) -> Result<Vec<u8>, DiffusionError> {
        let cond = self.encode(prompt)?;
        let latents = self.noise(noise, width, height)?;
        let latents = self.denoise(&cond, latents, steps, guidance, (width, height), control)?;
        crate::to_rgb8(&self.decode_raw(&latents, width, height)?)
    }
}

/// The VAE of a FLUX or SD 3 folder (`vae/`), its latents checked to have `channels`
/// channels: the network, its scaling and shift factors, and its bytes as float32.
pub(crate) fn load_vae16(
    dir: &Path,
    channels: usize,
    device: &Device,
) -> Result<(AutoEncoderKL, f64, f64, u64), DiffusionError> {
    let vae_json = crate::read_json(&dir.join("vae/config.json"))?;
    let (vae_cfg, vae_scale, _, _) = load::vae_config(&vae_json)?;
    let vae_shift = vae_json
        .get("shift_factor")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    if vae_cfg.latent_channels != channels {
        return Err(DiffusionError::Model(format!(
            "the transformer works on {channels} latent channels; the VAE's latents have {}",
            vae_cfg.latent_channels
        )));
    }
    let vae_files = weight_files(dir, "vae", "diffusion_pytorch_model.safetensors")?;
    let mut bytes = 0u64;
    for p in &vae_files {
        bytes += crate::checked_header(p)?
            .values()
            .map(|t| t.f32_bytes())
            .sum::<u64>();
    }
    // SAFETY: mapped read-only (see Pipeline::load_diffusers).
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&vae_files, DType::F32, device)? };
    let vae = AutoEncoderKL::new(vb, 3, 3, vae_cfg)?;
    Ok((vae, vae_scale, vae_shift, bytes))
}

/// T5's weights: `files.text_encoder_2` (a GGUF with llama.cpp's names, or safetensors with
/// transformers' names) when given, else the folder `dir/sub`.
pub(crate) fn t5_weights(
    dir: &Path,
    sub: &str,
    files: &FluxFiles,
    device: &Device,
) -> Result<WeightMap, DiffusionError> {
    match files.text_encoder_2.as_deref() {
        Some(p) if is_gguf(p) => WeightMap::gguf(p, device, weights::t5_gguf_name),
        Some(p) => {
            let q = files.quantise(WeightMap::f32_bytes(&[p])?);
            WeightMap::safetensors(&[p], device, |n| n.to_string(), q)
        }
        None => match component_gguf(dir, sub)? {
            Some(p) => WeightMap::gguf(&p, device, weights::t5_gguf_name),
            None => {
                let paths = weight_files(dir, sub, "model.safetensors")?;
                let q = files.quantise(WeightMap::f32_bytes(&paths)?);
                WeightMap::safetensors(&paths, device, |n| n.to_string(), q)
            }
        },
    }
}

/// A GGUF holding the weights of `dir/sub` in that folder (what `pictor models pull` fetches
/// for FLUX / SD 3 in place of the float files), if any.
pub(crate) fn component_gguf(dir: &Path, sub: &str) -> Result<Option<PathBuf>, DiffusionError> {
    pictor_core::models::component_gguf(&dir.join(sub))
        .map_err(|e| DiffusionError::Model(e.to_string()))
}

/// A FLUX or SD 3 transformer in one file under the original layout's names: safetensors
/// (ComfyUI's `flux1-*.safetensors`, Stability AI's `sd3.5_medium.safetensors`, keys
/// optionally under `model.diffusion_model.`) or GGUF. Of an all-in-one file (the text encoders
/// under `text_encoders.`, the VAE under `first_stage_model.` beside the transformer under
/// `model.diffusion_model.`), the transformer's tensors only ([`Bundled`] reads the rest).
pub fn transformer_file(
    path: &Path,
    files: &FluxFiles,
    device: &Device,
) -> Result<WeightMap, DiffusionError> {
    let strip = |n: &str| {
        n.strip_prefix("model.diffusion_model.")
            .unwrap_or(n)
            .to_string()
    };
    if is_gguf(path) {
        return WeightMap::gguf(path, device, strip);
    }
    let header = crate::checked_header(path)?;
    let prefixed = header
        .keys()
        .any(|k| k.starts_with("model.diffusion_model."));
    let bytes = header
        .iter()
        .filter(|(name, _)| transformer_name(name, prefixed).is_some())
        .fold(0u64, |n, (_, t)| n.saturating_add(t.f32_bytes()));
    let q = files.quantise(bytes);
    WeightMap::safetensors_part(&[path], device, |n| transformer_name(n, prefixed), q)
}

/// The name of a transformer tensor of a single file (`prefixed`: the transformer is under
/// `model.diffusion_model.`); `None` for another part of an all-in-one file.
fn transformer_name(n: &str, prefixed: bool) -> Option<String> {
    const OTHERS: [&str; 5] = [
        "text_encoders.",
        "first_stage_model.",
        "vae.",
        "cond_stage_model.",
        "conditioner.",
    ];
    if prefixed {
        n.strip_prefix("model.diffusion_model.").map(str::to_owned)
    } else if OTHERS.iter().any(|o| n.starts_with(o)) {
        None
    } else {
        Some(n.to_owned())
    }
}

/// The text encoders an all-in-one single file carries beside its transformer, as ComfyUI
/// writes them (`text_encoders.clip_l.transformer.text_model.…`, `…clip_g…`,
/// `text_encoders.t5xxl.transformer.encoder.…`).
#[derive(Debug, Clone, Default)]
pub struct Bundled {
    pub file: Option<PathBuf>,
    pub clip_l: bool,
    pub clip_g: bool,
    pub t5: bool,
}

impl Bundled {
    pub const CLIP_L: &'static str = "text_encoders.clip_l.transformer.";
    pub const CLIP_G: &'static str = "text_encoders.clip_g.transformer.";
    pub const T5: &'static str = "text_encoders.t5xxl.transformer.";

    /// What `transformer` (a mapping's transformer file) bundles; nothing for a GGUF or none.
    pub fn of(transformer: Option<&Path>) -> Result<Bundled, DiffusionError> {
        let Some(path) = transformer.filter(|p| !is_gguf(p)) else {
            return Ok(Bundled::default());
        };
        let header = crate::checked_header(path)?;
        let has = |p: &str| header.keys().any(|k| k.starts_with(p));
        if let Some(k) = header
            .keys()
            .find(|k| k.starts_with(Self::T5) && k.ends_with(".scale_weight"))
        {
            return Err(DiffusionError::Model(format!(
                "{}: its T5 is in ComfyUI's scaled float8 ({k}), which is not read; use a file with T5 in float16, or a T5 GGUF as the mapping's T5 file",
                path.display()
            )));
        }
        Ok(Bundled {
            file: Some(path.to_owned()),
            clip_l: has(Self::CLIP_L),
            clip_g: has(Self::CLIP_G),
            t5: has(Self::T5),
        })
    }

    /// The bundled T5's weights under transformers' names.
    pub fn t5_weights(
        &self,
        files: &FluxFiles,
        device: &Device,
    ) -> Result<WeightMap, DiffusionError> {
        let path = self
            .file
            .as_deref()
            .ok_or_else(|| DiffusionError::Model("no bundled T5".into()))?;
        let header = crate::checked_header(path)?;
        let bytes = header
            .iter()
            .filter(|(k, _)| k.starts_with(Self::T5))
            .fold(0u64, |n, (_, t)| n.saturating_add(t.f32_bytes()));
        WeightMap::safetensors_part(
            &[path],
            device,
            |n| n.strip_prefix(Self::T5).map(str::to_owned),
            files.quantise(bytes),
        )
    }

    /// A weight source over the bundled CLIP under `prefix`, named as the folder's CLIP
    /// (`text_model.…`, `text_projection.weight`); its float32 bytes.
    pub fn clip(
        &self,
        prefix: &str,
        device: &Device,
    ) -> Result<(VarBuilder<'static>, u64), DiffusionError> {
        let path = self
            .file
            .as_deref()
            .ok_or_else(|| DiffusionError::Model("no bundled CLIP".into()))?;
        let header = crate::checked_header(path)?;
        let bytes = header
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .fold(0u64, |n, (_, t)| n.saturating_add(t.f32_bytes()));
        let prefixed = header
            .keys()
            .any(|k| k.starts_with(&format!("{prefix}text_model.")));
        // SAFETY: mapped read-only (see Pipeline::load_diffusers).
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[path], DType::F32, device)? };
        let prefix = prefix.to_owned();
        let vb = vb.rename_f(move |n: &str| match n.strip_prefix("text_model.") {
            Some(rest) if !prefixed => format!("{prefix}{rest}"),
            _ => format!("{prefix}{n}"),
        });
        Ok((vb, bytes))
    }
}
