//! Stable Diffusion 3 / 3.5 (Medium, Large, Large Turbo): diffusers' `StableDiffusion3Pipeline`
//! — CLIP-L's and OpenCLIP-bigG's penultimate hidden states side by side, padded to T5's width
//! and followed by T5-XXL's embeddings (zeros without T5), their projected pooled vectors, the
//! MMDiT on 2×2 latent patches, classifier-free guidance in one batch, the flow-matching Euler
//! scheduler's own timesteps (shift 3) and the 16-channel VAE (`z / 1.5305 + 0.0609`).
//!
//! - [`model`]: the MMDiT under Stability AI's names.
//!
//! T5 and the weight files (diffusers folders, single files, GGUF, float parts quantised at
//! load) are shared with FLUX ([`crate::flux`]).

pub mod model;

use std::path::{Path, PathBuf};

use candle::{DType, Device, Tensor};
use candle_nn::VarBuilder;

use crate::flux::t5::{T5Config, T5Encoder, T5Tokenizer};
use crate::flux::weights::WeightMap;
use crate::flux::{Bundled, FlowSchedule};
use crate::lora::{Denoiser, LoraSpec, Merge, Part};
use crate::net::clip::ClipTextTransformer;
use crate::net::vae::AutoEncoderKL;
use crate::noise::NoiseSource;
use crate::tokenizer::ClipTokenizer;
use crate::{DiffusionError, StepControl, load};
use model::{Mmdit, Sd3Config};

/// A text's conditioning: the joint embeddings `(1, 77 + T5 length, width)` and the pooled
/// vectors `(1, 768 + 1280)`.
#[derive(Debug, Clone)]
pub struct Sd3Conditioning {
    pub context: Tensor,
    pub pooled: Tensor,
}

/// One CLIP text encoder with its tokenizer.
pub struct ClipPart {
    pub model: ClipTextTransformer,
    pub tokenizer: ClipTokenizer,
}

/// Files that replace parts of an SD3 folder, and how float files are held.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Sd3Files {
    /// The transformer as one file (Stability AI's names, as `sd3.5_medium.safetensors`,
    /// optionally under `model.diffusion_model.`; or a GGUF).
    pub transformer: Option<PathBuf>,
    /// The T5 encoder as one file (GGUF with llama.cpp's names, or safetensors).
    pub text_encoder_3: Option<PathBuf>,
    /// As [`crate::flux::FluxFiles::quantise_float`].
    pub quantise_float: Option<bool>,
}

impl Sd3Files {
    fn as_flux(&self) -> crate::flux::FluxFiles {
        crate::flux::FluxFiles {
            transformer: self.transformer.clone(),
            text_encoder_2: self.text_encoder_3.clone(),
            quantise_float: self.quantise_float,
        }
    }
}

/// One loaded SD3 model.
pub struct Sd3Pipeline {
    pub clip_l: ClipPart,
    pub clip_g: ClipPart,
    /// T5 and its tokenizer; without them, zeros take T5's place (as diffusers with
    /// `text_encoder_3=None`).
    pub t5: Option<(T5Encoder, T5Tokenizer)>,
    pub transformer: Mmdit,
    pub vae: AutoEncoderKL,
    vae_scale: f64,
    vae_shift: f64,
    pub schedule: FlowSchedule,
    /// T5's sequence length (diffusers' `max_sequence_length`, 256).
    pub max_sequence_length: usize,
    device: Device,
    /// Bytes the weights take in memory.
    pub resident_bytes: u64,
}

/// A CLIP text encoder with its projection from `dir/sub` (its configuration; its weights
/// there too unless `bundled` gives them) and its tokenizer from `dir/tok`.
fn load_clip(
    dir: &Path,
    (sub, tok): (&str, &str),
    bundled: Option<(VarBuilder<'static>, u64)>,
    (merge, part): (&Merge, Part),
    device: &Device,
) -> Result<(ClipPart, u64), DiffusionError> {
    let json = crate::read_json(&dir.join(sub).join("config.json"))?;
    let (cfg, projection) = load::clip_config(&json)?;
    if !projection {
        return Err(DiffusionError::Model(format!(
            "{sub}: SD3 needs CLIPTextModelWithProjection"
        )));
    }
    let (vb, bytes) = match bundled {
        Some(b) => b,
        None => {
            let files = load::weights_in(&dir.join(sub), "model.safetensors")?;
            let mut bytes = 0u64;
            let mut prefixed = false;
            for p in &files {
                let h = crate::checked_header(p)?;
                prefixed |= h.keys().any(|k| k.starts_with("text_model."));
                bytes += h.values().map(|t| t.f32_bytes()).sum::<u64>();
            }
            // SAFETY: mapped read-only (see Pipeline::load_diffusers).
            let vb = unsafe { VarBuilder::from_mmaped_safetensors(&files, DType::F32, device)? };
            let vb = if prefixed {
                vb
            } else {
                vb.rename_f(|n: &str| n.strip_prefix("text_model.").unwrap_or(n).to_owned())
            };
            (vb, bytes)
        }
    };
    let model = ClipTextTransformer::new(merge.wrap(part, vb), &cfg, true)?;
    let tokenizer = ClipTokenizer::load(&dir.join(tok))?;
    Ok((ClipPart { model, tokenizer }, bytes))
}

impl Sd3Pipeline {
    /// Whether `dir` is a diffusers SD3 folder (`model_index.json` names
    /// `StableDiffusion3Pipeline`).
    pub fn is_sd3_folder(dir: &Path) -> bool {
        crate::read_json(&dir.join("model_index.json"))
            .ok()
            .and_then(|v| {
                v.get("_class_name")?
                    .as_str()
                    .map(|s| s == "StableDiffusion3Pipeline")
            })
            .unwrap_or(false)
    }

    /// Loads a diffusers-layout SD3 folder; `files` may replace its transformer (Stability AI's
    /// names: `sd3.5_medium.safetensors`, or a GGUF) and its T5 encoder. A folder without
    /// `text_encoder_3` (and no T5 file) runs without T5.
    pub fn load_diffusers(
        dir: &Path,
        files: &Sd3Files,
        device: &Device,
    ) -> Result<Sd3Pipeline, DiffusionError> {
        Self::load_with_loras(dir, files, &[], device)
    }

    /// [`load_diffusers`](Self::load_diffusers) with LoRAs on the transformer (merged into
    /// float weights, applied beside quantised ones) and on the two CLIP encoders; every layer
    /// of every LoRA must find its weight.
    pub fn load_with_loras(
        dir: &Path,
        files: &Sd3Files,
        loras: &[LoraSpec],
        device: &Device,
    ) -> Result<Sd3Pipeline, DiffusionError> {
        let merge = Merge::read(loras, &Denoiser::Transformer)?;
        merge.refuse(Part::Text(2), "the T5 text encoder")?;
        // An all-in-one transformer file's own text encoders come before the folder's.
        let bundled = Bundled::of(files.transformer.as_deref())?;
        let from_file =
            |has: bool, prefix: &str| has.then(|| bundled.clip(prefix, device)).transpose();
        let clip = |names, weights, part| load_clip(dir, names, weights, (&merge, part), device);
        let (clip_l, b1) = clip(
            ("text_encoder", "tokenizer"),
            from_file(bundled.clip_l, Bundled::CLIP_L)?,
            Part::Text(0),
        )?;
        let (clip_g, b2) = clip(
            ("text_encoder_2", "tokenizer_2"),
            from_file(bundled.clip_g, Bundled::CLIP_G)?,
            Part::Text(1),
        )?;
        let mut bytes = b1 + b2;
        let flux_files = files.as_flux();

        let t5_dir = dir.join("text_encoder_3");
        let t5 =
            if files.text_encoder_3.is_some() || bundled.t5 || t5_dir.join("config.json").is_file()
            {
                let json = t5_dir.join("config.json");
                let cfg = if json.is_file() {
                    T5Config::from_json(&crate::read_json(&json)?)?
                } else {
                    T5Config::xxl()
                };
                // The mapping's T5 file, else the bundled T5, else the folder's.
                let mut w = if files.text_encoder_3.is_none() && bundled.t5 {
                    bundled.t5_weights(&flux_files, device)?
                } else {
                    crate::flux::t5_weights(dir, "text_encoder_3", &flux_files, device)?
                };
                bytes += w.resident_bytes();
                let enc = T5Encoder::new(&cfg, &mut w)
                    .map_err(|e| DiffusionError::Model(format!("T5 text encoder: {e}")))?;
                let tok = T5Tokenizer::load(&dir.join("tokenizer_3/tokenizer.json"))?;
                Some((enc, tok))
            } else {
                None
            };

        let in_folder = crate::flux::component_gguf(dir, "transformer")?;
        let (cfg, mut tw) = match files.transformer.as_deref().or(in_folder.as_deref()) {
            None => {
                let cfg = Sd3Config::from_diffusers(&crate::read_json(
                    &dir.join("transformer/config.json"),
                )?)?;
                let paths = load::weights_in(
                    &dir.join("transformer"),
                    "diffusion_pytorch_model.safetensors",
                )?;
                let q = flux_files.quantise(WeightMap::f32_bytes(&paths)?);
                let mut w = WeightMap::safetensors(&paths, device, |n| n.to_string(), q)?;
                model::diffusers_to_sai(&mut w, &cfg)?;
                (cfg, w)
            }
            Some(path) => {
                let w = crate::flux::transformer_file(path, &flux_files, device)?;
                let json = dir.join("transformer/config.json");
                let cfg = if json.is_file() {
                    Sd3Config::from_diffusers(&crate::read_json(&json)?)?
                } else {
                    Sd3Config::from_sai_names(&w)?
                };
                (cfg, w)
            }
        };
        merge.apply(&mut tw, &model::sai_plan(&cfg))?;
        bytes += tw.resident_bytes();
        let transformer = Mmdit::new(&cfg, &mut tw)?;
        merge.check()?;

        if cfg.out_channels != cfg.in_channels {
            return Err(DiffusionError::Model(format!(
                "the transformer takes {} latent channels and makes {}",
                cfg.in_channels, cfg.out_channels
            )));
        }
        let (vae, vae_scale, vae_shift, vae_bytes) =
            crate::flux::load_vae16(dir, cfg.in_channels, device)?;
        bytes += vae_bytes;
        let schedule = FlowSchedule::from_json(&crate::read_json(
            &dir.join("scheduler/scheduler_config.json"),
        )?);
        let mut pipe = Self::from_parts(
            clip_l,
            clip_g,
            t5,
            transformer,
            vae,
            (vae_scale, vae_shift),
            schedule,
            device,
        );
        pipe.resident_bytes = bytes;
        Ok(pipe)
    }

    /// A pipeline from parts already built (the loader; benchmarks that make full-size
    /// weights); `resident_bytes` is left to the caller.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        clip_l: ClipPart,
        clip_g: ClipPart,
        t5: Option<(T5Encoder, T5Tokenizer)>,
        transformer: Mmdit,
        vae: AutoEncoderKL,
        (vae_scale, vae_shift): (f64, f64),
        schedule: FlowSchedule,
        device: &Device,
    ) -> Sd3Pipeline {
        Sd3Pipeline {
            clip_l,
            clip_g,
            t5,
            transformer,
            vae,
            vae_scale,
            vae_shift,
            schedule,
            max_sequence_length: 256,
            device: device.clone(),
            resident_bytes: 0,
        }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// One CLIP encoder's penultimate hidden states `(1, 77, width)` and projected pooled
    /// vector `(1, projection)` (`_get_clip_prompt_embeds`).
    pub fn encode_clip(
        &self,
        part: &ClipPart,
        text: &str,
    ) -> Result<(Tensor, Tensor), DiffusionError> {
        let ids = part.tokenizer.encode(text);
        let ids = Tensor::new(ids.as_slice(), &self.device)?.unsqueeze(0)?;
        let out = part.model.encode(&ids, Some(1))?;
        let hidden = out
            .hidden
            .ok_or_else(|| DiffusionError::Model("the text encoder is too shallow".into()))?;
        let pooled = out
            .pooled
            .ok_or_else(|| DiffusionError::Model("the text encoder has no projection".into()))?;
        Ok((hidden, pooled))
    }

    /// T5's embeddings `(1, max_sequence_length, width)`, or zeros without T5.
    pub fn encode_t5(&self, text: &str) -> Result<Tensor, DiffusionError> {
        let width = self.transformer.config().context_in_dim;
        match &self.t5 {
            Some((enc, tok)) => {
                let ids = tok.encode(text, self.max_sequence_length)?;
                let ids = Tensor::new(ids.as_slice(), &self.device)?.unsqueeze(0)?;
                Ok(enc.forward(&ids)?)
            }
            None => Ok(Tensor::zeros(
                (1, self.max_sequence_length, width),
                DType::F32,
                &self.device,
            )?),
        }
    }

    /// The conditioning for one text (`encode_prompt` for one side).
    pub fn encode(&self, text: &str) -> Result<Sd3Conditioning, DiffusionError> {
        let (l, l_pooled) = self.encode_clip(&self.clip_l, text)?;
        let (g, g_pooled) = self.encode_clip(&self.clip_g, text)?;
        let clip = Tensor::cat(&[&l, &g], 2)?;
        let t5 = self.encode_t5(text)?;
        let width = t5.dim(2)?;
        let clip_width = clip.dim(2)?;
        if clip_width > width {
            return Err(DiffusionError::Model(format!(
                "CLIP's {clip_width} columns are wider than the text embeddings' {width}"
            )));
        }
        let clip = if clip_width < width {
            let pad = Tensor::zeros(
                (1, clip.dim(1)?, width - clip_width),
                DType::F32,
                &self.device,
            )?;
            Tensor::cat(&[&clip, &pad], 2)?
        } else {
            clip
        };
        Ok(Sd3Conditioning {
            context: Tensor::cat(&[&clip, &t5], 1)?,
            pooled: Tensor::cat(&[&l_pooled, &g_pooled], 1)?,
        })
    }

    /// The latent grid of a `width`×`height` picture (a multiple of 16 in pixels).
    pub fn latent_size(
        &self,
        width: usize,
        height: usize,
    ) -> Result<(usize, usize), DiffusionError> {
        if !width.is_multiple_of(16) || !height.is_multiple_of(16) || width == 0 || height == 0 {
            return Err(DiffusionError::Invalid(format!(
                "SD3 pictures are a multiple of 16 pixels on each side, not {width}×{height}"
            )));
        }
        let (h, w) = (height / 8, width / 8);
        let side = self.transformer.config().pos_embed_max_size * 2;
        if h > side || w > side {
            return Err(DiffusionError::Invalid(format!(
                "this model draws up to {}×{} pixels",
                side * 8,
                side * 8
            )));
        }
        Ok((h, w))
    }

    /// Seed noise `(1, C, h, w)` as diffusers draws it.
    pub fn noise(
        &self,
        noise: &mut dyn NoiseSource,
        width: usize,
        height: usize,
    ) -> Result<Tensor, DiffusionError> {
        let (h, w) = self.latent_size(width, height)?;
        let c = self.transformer.config().in_channels;
        Ok(Tensor::from_vec(
            noise.randn(c * h * w),
            (1, c, h, w),
            &self.device,
        )?)
    }

    /// The sigmas for `steps` steps on latents `(1, C, h, w)`, and a final 0.
    pub fn sigmas(&self, steps: usize, latents: &Tensor) -> Result<Vec<f32>, DiffusionError> {
        let (_, _, h, w) = latents.dims4()?;
        let p = self.transformer.config().patch_size;
        Ok(self.schedule.sigmas_from_training(steps, (h / p) * (w / p)))
    }

    /// The guided velocity at timestep `t` (sigma · 1000): with `uncond` and `guidance` > 1 the
    /// prompt and the negative prompt in one batch, `uncond + g · (cond − uncond)`.
    pub fn velocity(
        &self,
        cond: &Sd3Conditioning,
        uncond: Option<&Sd3Conditioning>,
        guidance: f32,
        latents: &Tensor,
        t: f32,
    ) -> Result<Tensor, DiffusionError> {
        let m = &self.transformer;
        match uncond {
            Some(u) => {
                let x = Tensor::cat(&[latents, latents], 0)?;
                let ctx = Tensor::cat(&[&u.context, &cond.context], 0)?;
                let pooled = Tensor::cat(&[&u.pooled, &cond.pooled], 0)?;
                let out = m.forward(&x, t, &ctx, &pooled)?;
                let (u, c) = (out.narrow(0, 0, 1)?, out.narrow(0, 1, 1)?);
                Ok((&u + ((&c - &u)? * f64::from(guidance))?)?)
            }
            None => Ok(m.forward(latents, t, &cond.context, &cond.pooled)?),
        }
    }

    /// The denoising loop from seed noise: `steps` flow-matching Euler steps.
    pub fn denoise(
        &self,
        cond: &Sd3Conditioning,
        uncond: Option<&Sd3Conditioning>,
        guidance: f32,
        mut latents: Tensor,
        steps: usize,
        control: &dyn StepControl,
    ) -> Result<Tensor, DiffusionError> {
        let sigmas = self.sigmas(steps, &latents)?;
        for k in 0..sigmas.len() - 1 {
            if control.cancelled() {
                return Err(DiffusionError::Cancelled);
            }
            let v = self.velocity(cond, uncond, guidance, &latents, sigmas[k] * 1000.0)?;
            latents = (latents + (v * f64::from(sigmas[k + 1] - sigmas[k]))?)?;
            control.progress(k + 1, sigmas.len() - 1);
        }
        Ok(latents)
    }

    /// Latents to the VAE's raw output `(1, 3, H, W)`.
    pub fn decode_raw(&self, latents: &Tensor) -> Result<Tensor, DiffusionError> {
        let z = ((latents / self.vae_scale)? + self.vae_shift)?;
        crate::tiled_decode(&self.vae, &z, crate::VAE_TILE.0, crate::VAE_TILE.1)
    }

    /// A whole picture: RGB8, `width`×`height`; guidance above 1 runs the negative prompt beside
    /// the prompt (`do_classifier_free_guidance`).
    #[allow(clippy::too_many_arguments)]
    pub fn txt2img(
        &self,
        prompt: &str,
        negative: &str,
        noise: &mut dyn NoiseSource,
        width: usize,
        height: usize,
        steps: usize,
        guidance: f32,
        control: &dyn StepControl,
    ) -> Result<Vec<u8>, DiffusionError> {
        let cond = self.encode(prompt)?;
        let uncond = if guidance > 1.0 {
            Some(self.encode(negative)?)
        } else {
            None
        };
        let latents = self.noise(noise, width, height)?;
        let latents = self.denoise(&cond, uncond.as_ref(), guidance, latents, steps, control)?;
        crate::to_rgb8(&self.decode_raw(&latents)?)
    }
}
