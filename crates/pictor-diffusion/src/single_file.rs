//! Single-file checkpoints as AUTOMATIC1111 and ComfyUI users have them: one `.safetensors`
//! file with the original Stability (LDM) tensor names — `model.diffusion_model.*` (UNet),
//! `first_stage_model.*` (VAE), `cond_stage_model.transformer.*` (SD 1.x, CLIP ViT-L in
//! transformers' naming), `cond_stage_model.model.*` (SD 2.x, OpenCLIP ViT-H with fused q/k/v),
//! `conditioner.embedders.{0,1}.*` (SDXL's two encoders).
//!
//! The networks ask for diffusers names; [`Renamed`] answers them from the file, translating
//! each name on the fly (the mapping of diffusers' `convert_*_checkpoint` functions, derived from
//! the configuration rather than hard-coded to SD 1.5's four levels of two resnets), re-splitting
//! OpenCLIP's fused `in_proj` into q/k/v and transposing its `text_projection`.
//!
//! A single file carries no configuration: [`infer_configs`] reads the architecture off the
//! tensor shapes (levels, widths, layers, attention, context width, SDXL's size conditioning)
//! and fills in what shapes cannot tell from the published configurations of SD 1.5, SD 2.1 and
//! SDXL (attention heads, VAE scaling, scheduler). Two things cannot be read off the weights:
//! SD 2.x's prediction type, guessed as ComfyUI does (see [`v_prediction_guess`]) and overridable
//! per model, and the timestep spacing, `trailing` unless configured (it starts sampling at the
//! last training timestep, as AUTOMATIC1111's and ComfyUI's default schedules do, which one- to
//! four-step Turbo models need).

use std::collections::BTreeMap;
#[cfg(test)]
use std::collections::HashMap;
use std::path::Path;

use candle::safetensors::MmapedSafetensors;
use candle::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use serde_json::{Value, json};

use super::DiffusionError;
use pictor_core::models::{Arch, TensorInfo};

/// Where a diffusers tensor comes from in the single file.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    /// The same tensor under another name (reshaped when only unit dimensions differ:
    /// the VAE's 1×1-convolution attention weights).
    Name(String),
    /// Part `index` of `parts` equal chunks along dimension 0 (OpenCLIP's fused q/k/v).
    Chunk(String, usize, usize),
    /// The transpose (OpenCLIP's `text_projection`, stored for `x @ P`).
    Transpose(String),
}

/// A name translation: diffusers name → where it is in the file.
type Translate = Box<dyn Fn(&str) -> Option<Source> + Send + Sync>;

/// One component's view of the file: diffusers names in, original tensors out.
struct Renamed {
    file: std::sync::Arc<MmapedSafetensors>,
    translate: Translate,
}

impl Renamed {
    fn load(&self, name: &str, dev: &Device) -> candle::Result<Tensor> {
        let source = (self.translate)(name)
            .ok_or_else(|| candle::Error::CannotFindTensor { path: name.into() }.bt())?;
        match source {
            Source::Name(n) => self.file.load(&n, dev),
            Source::Chunk(n, i, parts) => {
                let t = self.file.load(&n, dev)?;
                let rows = t.dim(0)?;
                if !rows.is_multiple_of(parts) {
                    candle::bail!("{n}: {rows} rows do not split into {parts}");
                }
                t.narrow(0, i * rows / parts, rows / parts)?.contiguous()
            }
            Source::Transpose(n) => self.file.load(&n, dev)?.t()?.contiguous(),
        }
    }
}

fn squeeze_equal(want: &Shape, got: &Shape) -> bool {
    let a: Vec<usize> = want.dims().iter().copied().filter(|&d| d != 1).collect();
    let b: Vec<usize> = got.dims().iter().copied().filter(|&d| d != 1).collect();
    a == b
}

impl SimpleBackend for Renamed {
    fn get(
        &self,
        s: Shape,
        name: &str,
        _: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle::Result<Tensor> {
        let t = self.load(name, dev)?;
        let t = if t.shape() == &s {
            t
        } else if squeeze_equal(&s, t.shape()) && s.dims().len() != t.dims().len() {
            t.reshape(s.clone())?
        } else {
            return Err(candle::Error::UnexpectedShape {
                msg: format!("shape mismatch for {name}"),
                expected: s,
                got: t.shape().clone(),
            }
            .bt());
        };
        t.to_dtype(dtype)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle::Result<Tensor> {
        self.load(name, dev)?.to_dtype(dtype)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        match (self.translate)(name) {
            Some(Source::Name(n) | Source::Chunk(n, _, _) | Source::Transpose(n)) => {
                self.file.get(&n).is_ok()
            }
            None => false,
        }
    }
}

/// Replaces the first matching prefix of `k` (longest prefixes first, so `up_blocks.1.` never
/// shadows `up_blocks.10.`; every prefix here ends with a dot anyway).
fn by_prefix<'a>(k: &'a str, table: &[(String, String)]) -> Option<(&'a str, &'a str, String)> {
    table.iter().find_map(|(from, to)| {
        k.strip_prefix(from.as_str())
            .map(|rest| (&k[..from.len()], rest, to.clone()))
    })
}

/// diffusers UNet names → `model.diffusion_model.*`, for a UNet of `levels` levels with
/// `layers` resnets each and attention on the levels in `attn_up` (up blocks, diffusers order).
fn unet_translator(
    levels: usize,
    layers: usize,
    attn_up: Vec<bool>,
) -> impl Fn(&str) -> Option<Source> {
    let l = layers;
    let mut table: Vec<(String, String)> = Vec::new();
    for i in 0..levels {
        for j in 0..l {
            table.push((
                format!("down_blocks.{i}.resnets.{j}."),
                format!("input_blocks.{}.0.", (l + 1) * i + j + 1),
            ));
            table.push((
                format!("down_blocks.{i}.attentions.{j}."),
                format!("input_blocks.{}.1.", (l + 1) * i + j + 1),
            ));
        }
        if i + 1 < levels {
            table.push((
                format!("down_blocks.{i}.downsamplers.0.conv."),
                format!("input_blocks.{}.0.op.", (l + 1) * (i + 1)),
            ));
            let slot = if attn_up.get(i).copied().unwrap_or(false) {
                2
            } else {
                1
            };
            table.push((
                format!("up_blocks.{i}.upsamplers.0."),
                format!("output_blocks.{}.{slot}.", (l + 1) * i + l),
            ));
        }
        for j in 0..=l {
            table.push((
                format!("up_blocks.{i}.resnets.{j}."),
                format!("output_blocks.{}.0.", (l + 1) * i + j),
            ));
            table.push((
                format!("up_blocks.{i}.attentions.{j}."),
                format!("output_blocks.{}.1.", (l + 1) * i + j),
            ));
        }
    }
    for (a, b) in [
        ("mid_block.resnets.0.", "middle_block.0."),
        ("mid_block.attentions.0.", "middle_block.1."),
        ("mid_block.resnets.1.", "middle_block.2."),
        ("time_embedding.linear_1.", "time_embed.0."),
        ("time_embedding.linear_2.", "time_embed.2."),
        ("add_embedding.linear_1.", "label_emb.0.0."),
        ("add_embedding.linear_2.", "label_emb.0.2."),
        ("conv_in.", "input_blocks.0.0."),
        ("conv_norm_out.", "out.0."),
        ("conv_out.", "out.2."),
    ] {
        table.push((a.into(), b.into()));
    }
    table.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    const RESNET: [(&str, &str); 6] = [
        ("norm1.", "in_layers.0."),
        ("conv1.", "in_layers.2."),
        ("norm2.", "out_layers.0."),
        ("conv2.", "out_layers.3."),
        ("time_emb_proj.", "emb_layers.1."),
        ("conv_shortcut.", "skip_connection."),
    ];
    move |k: &str| {
        let (from, rest, to) = by_prefix(k, &table)?;
        let rest = if from.contains(".resnets.") {
            let (a, b) = RESNET.iter().find(|(a, _)| rest.starts_with(a))?;
            format!("{b}{}", &rest[a.len()..])
        } else {
            rest.to_owned()
        };
        Some(Source::Name(format!("model.diffusion_model.{to}{rest}")))
    }
}

/// diffusers AutoencoderKL names → `first_stage_model.*`.
fn vae_translator(levels: usize, layers: usize) -> impl Fn(&str) -> Option<Source> {
    let n = levels;
    let mut table: Vec<(String, String)> = Vec::new();
    for i in 0..n {
        for j in 0..layers {
            table.push((
                format!("encoder.down_blocks.{i}.resnets.{j}."),
                format!("encoder.down.{i}.block.{j}."),
            ));
        }
        if i + 1 < n {
            table.push((
                format!("encoder.down_blocks.{i}.downsamplers.0."),
                format!("encoder.down.{i}.downsample."),
            ));
            table.push((
                format!("decoder.up_blocks.{i}.upsamplers.0."),
                format!("decoder.up.{}.upsample.", n - 1 - i),
            ));
        }
        for j in 0..=layers {
            table.push((
                format!("decoder.up_blocks.{i}.resnets.{j}."),
                format!("decoder.up.{}.block.{j}.", n - 1 - i),
            ));
        }
    }
    for part in ["encoder", "decoder"] {
        table.push((
            format!("{part}.mid_block.resnets.0."),
            format!("{part}.mid.block_1."),
        ));
        table.push((
            format!("{part}.mid_block.resnets.1."),
            format!("{part}.mid.block_2."),
        ));
        table.push((
            format!("{part}.mid_block.attentions.0."),
            format!("{part}.mid.attn_1."),
        ));
        table.push((
            format!("{part}.conv_norm_out."),
            format!("{part}.norm_out."),
        ));
    }
    table.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    const ATTN: [(&str, &str); 5] = [
        ("group_norm.", "norm."),
        ("to_q.", "q."),
        ("to_k.", "k."),
        ("to_v.", "v."),
        ("to_out.0.", "proj_out."),
    ];
    move |k: &str| {
        let name = match by_prefix(k, &table) {
            Some((from, rest, to)) if from.contains(".attentions.") => {
                let (a, b) = ATTN.iter().find(|(a, _)| rest.starts_with(a))?;
                format!("{to}{b}{}", &rest[a.len()..])
            }
            Some((_, rest, to)) => {
                format!("{to}{}", rest.replace("conv_shortcut.", "nin_shortcut."))
            }
            None => k.to_owned(),
        };
        Some(Source::Name(format!("first_stage_model.{name}")))
    }
}

/// A CLIP text encoder stored in transformers' own naming under `prefix`.
fn clip_translator(prefix: &'static str) -> impl Fn(&str) -> Option<Source> {
    move |k: &str| Some(Source::Name(format!("{prefix}{k}")))
}

/// transformers CLIP names → OpenCLIP's (`prefix` is `cond_stage_model.model.` or
/// `conditioner.embedders.1.model.`).
fn openclip_translator(prefix: &'static str) -> impl Fn(&str) -> Option<Source> {
    move |k: &str| {
        let p = |s: &str| format!("{prefix}{s}");
        let src = match k {
            "text_model.embeddings.token_embedding.weight" => {
                Source::Name(p("token_embedding.weight"))
            }
            "text_model.embeddings.position_embedding.weight" => {
                Source::Name(p("positional_embedding"))
            }
            "text_model.final_layer_norm.weight" => Source::Name(p("ln_final.weight")),
            "text_model.final_layer_norm.bias" => Source::Name(p("ln_final.bias")),
            "text_projection.weight" => Source::Transpose(p("text_projection")),
            _ => {
                let rest = k.strip_prefix("text_model.encoder.layers.")?;
                let (idx, sub) = rest.split_once('.')?;
                let block = format!("transformer.resblocks.{idx}.");
                for (i, q) in ["q_proj.", "k_proj.", "v_proj."].iter().enumerate() {
                    if let Some(kind) = sub
                        .strip_prefix("self_attn.")
                        .and_then(|s| s.strip_prefix(q))
                    {
                        return Some(Source::Chunk(
                            p(&format!("{block}attn.in_proj_{kind}")),
                            i,
                            3,
                        ));
                    }
                }
                let sub = [
                    ("self_attn.out_proj.", "attn.out_proj."),
                    ("layer_norm1.", "ln_1."),
                    ("layer_norm2.", "ln_2."),
                    ("mlp.fc1.", "mlp.c_fc."),
                    ("mlp.fc2.", "mlp.c_proj."),
                ]
                .iter()
                .find_map(|(a, b)| sub.strip_prefix(a).map(|r| format!("{b}{r}")))?;
                Source::Name(p(&format!("{block}{sub}")))
            }
        };
        Some(src)
    }
}

/// The tensors of a single file, by name.
pub struct Header(BTreeMap<String, TensorInfo>);

impl Header {
    pub fn read(path: &Path) -> Result<Header, DiffusionError> {
        super::checked_header(path).map(Header)
    }

    fn shape(&self, name: &str) -> Option<&[u64]> {
        self.0.get(name).map(|t| t.shape.as_slice())
    }

    pub(crate) fn dim(&self, name: &str, i: usize) -> Result<usize, DiffusionError> {
        self.shape(name)
            .and_then(|s| s.get(i))
            .map(|&d| d as usize)
            .ok_or_else(|| {
                DiffusionError::Model(format!("the checkpoint has no {name} (or it is too flat)"))
            })
    }

    fn has_prefix(&self, prefix: &str) -> bool {
        self.0
            .range(prefix.to_owned()..)
            .next()
            .is_some_and(|(k, _)| k.starts_with(prefix))
    }

    /// How many `prefix{N}.` entries there are (N from 0 with no gaps).
    fn count(&self, prefix: &str) -> usize {
        (0..)
            .take_while(|i| self.has_prefix(&format!("{prefix}{i}.")))
            .count()
    }

    pub fn arch(&self) -> Result<Arch, DiffusionError> {
        if !self.has_prefix("model.diffusion_model.") || !self.has_prefix("first_stage_model.") {
            return Err(DiffusionError::Model(
                "not a Stable Diffusion checkpoint (no model.diffusion_model.* or first_stage_model.*)".into(),
            ));
        }
        if self.has_prefix("conditioner.embedders.1.model.") {
            Ok(Arch::Sdxl)
        } else if self.has_prefix("cond_stage_model.model.") {
            Ok(Arch::Sd2)
        } else if self.has_prefix("cond_stage_model.transformer.") {
            Ok(Arch::Sd1)
        } else {
            Err(DiffusionError::Model(
                "the checkpoint has no text encoder this engine knows (cond_stage_model.*, conditioner.embedders.*)".into(),
            ))
        }
    }

    /// Bytes of the tensors the engine uses, once widened to float32.
    pub fn f32_bytes(&self) -> u64 {
        self.0
            .iter()
            .filter(|(k, _)| {
                [
                    "model.diffusion_model.",
                    "first_stage_model.",
                    "cond_stage_model.",
                    "conditioner.",
                ]
                .iter()
                .any(|p| k.starts_with(p))
            })
            .fold(0u64, |n, (_, t)| n.saturating_add(t.f32_bytes()))
    }
}

/// How a model is loaded, per model: what the configuration-less parts of a single file
/// default to, and the text encoders' weight format.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `epsilon` or `v_prediction`.
    pub prediction: Option<String>,
    /// `leading`, `trailing` or `linspace`.
    pub timestep_spacing: Option<String>,
    /// The text encoders' layers in 8-bit blocks on the CPU (`Q8_0`; see `clip::Config::int8`).
    pub int8_text: bool,
    /// The UNet's transformer layers (attention, feed-forward, projections) in 8 bits on CPUs
    /// with AVX-512 VNNI (`net::linear::Weights::Int8`).
    pub int8_unet: bool,
    /// LoRAs merged into the weights as they load ([`crate::lora`]).
    pub loras: Vec<crate::lora::LoraSpec>,
}

/// A FLUX model where a Stable Diffusion checkpoint was expected ([`Header::arch`] never says
/// FLUX: FLUX files load through [`crate::flux`]).
fn not_sd() -> DiffusionError {
    DiffusionError::Model("a FLUX model is not a Stable Diffusion checkpoint".into())
}

/// ComfyUI's guess for SD 2.x (`model_detection.py`): v-prediction models have a spread-out
/// `norm1.bias` in the last output transformer block (standard deviation above 0.09).
pub fn v_prediction_guess(file: &MmapedSafetensors, header: &Header) -> bool {
    if header.has_prefix("v_pred") {
        return true;
    }
    let k = "model.diffusion_model.output_blocks.11.1.transformer_blocks.0.norm1.bias";
    let std = || -> candle::Result<f32> {
        let t = file.load(k, &Device::Cpu)?.to_dtype(DType::F32)?;
        let mean = t.mean_all()?;
        t.broadcast_sub(&mean)?
            .sqr()?
            .mean_all()?
            .sqrt()?
            .to_scalar::<f32>()
    };
    std().is_ok_and(|s| s > 0.09)
}

/// The diffusers configuration files a single file would have had: read off its shapes, with
/// the published configurations' values for what shapes do not tell.
pub fn infer_configs(
    header: &Header,
    v_prediction: bool,
    overrides: &Overrides,
) -> Result<InferredConfigs, DiffusionError> {
    let arch = header.arch()?;
    let u = "model.diffusion_model.";
    // Input blocks: conv_in, then per level `layers` resnets and (but the last) a downsampler.
    let inputs = header.count(&format!("{u}input_blocks."));
    let first_op = (1..inputs).find(|i| header.has_prefix(&format!("{u}input_blocks.{i}.0.op.")));
    let layers = first_op.map_or(inputs.saturating_sub(1), |i| i - 1);
    if layers == 0 {
        return Err(DiffusionError::Model("the UNet has no input blocks".into()));
    }
    let levels = inputs.saturating_sub(1).div_ceil(layers + 1).max(1);
    let mut channels = Vec::new();
    let mut attn = Vec::new();
    let mut depth = Vec::new();
    for i in 0..levels {
        let block = format!("{u}input_blocks.{}.", (layers + 1) * i + 1);
        channels.push(header.dim(&format!("{block}0.out_layers.3.weight"), 0)?);
        let tb = format!("{block}1.transformer_blocks.");
        let has = header.has_prefix(&format!("{block}1."));
        attn.push(has);
        depth.push(if has { header.count(&tb).max(1) } else { 1 });
    }
    let attn_block = (0..levels).find(|&i| attn[i]).ok_or_else(|| {
        DiffusionError::Model("the UNet has no cross-attention: not a text-to-image model".into())
    })?;
    let attn_prefix = format!("{u}input_blocks.{}.1.", (layers + 1) * attn_block + 1);
    let context = header.dim(
        &format!("{attn_prefix}transformer_blocks.0.attn2.to_k.weight"),
        1,
    )?;
    let linear_proj = header
        .shape(&format!("{attn_prefix}proj_in.weight"))
        .is_some_and(|s| s.len() == 2);
    let sdxl = arch == Arch::Sdxl;
    // Heads: SD 1.x has 8 per block; SD 2.x and SDXL have 64 channels per head.
    let heads: Vec<usize> = channels
        .iter()
        .map(|&c| {
            if arch == Arch::Sd1 {
                8
            } else {
                (c / 64).max(1)
            }
        })
        .collect();
    let down: Vec<&str> = attn
        .iter()
        .map(|&a| {
            if a {
                "CrossAttnDownBlock2D"
            } else {
                "DownBlock2D"
            }
        })
        .collect();
    let up: Vec<&str> = attn
        .iter()
        .rev()
        .map(|&a| if a { "CrossAttnUpBlock2D" } else { "UpBlock2D" })
        .collect();
    let sample_size = match arch {
        Arch::Sdxl => 128,
        Arch::Sd2 if v_prediction => 96,
        _ => 64,
    };
    let mut unet = json!({
        "_class_name": "UNet2DConditionModel",
        "in_channels": header.dim(&format!("{u}input_blocks.0.0.weight"), 1)?,
        "out_channels": header.dim(&format!("{u}out.2.weight"), 0)?,
        "block_out_channels": channels,
        "layers_per_block": layers,
        "down_block_types": down,
        "up_block_types": up,
        "attention_head_dim": heads,
        "transformer_layers_per_block": depth,
        "cross_attention_dim": context,
        "use_linear_projection": linear_proj,
        "sample_size": sample_size,
        "norm_num_groups": 32,
    });
    if sdxl {
        let input_dim = header.dim(&format!("{u}label_emb.0.0.weight"), 1)?;
        let pooled = header.dim("conditioner.embedders.1.model.text_projection", 1)?;
        unet["addition_embed_type"] = json!("text_time");
        unet["addition_time_embed_dim"] = json!((input_dim.saturating_sub(pooled)) / 6);
        unet["projection_class_embeddings_input_dim"] = json!(input_dim);
    }

    let f = "first_stage_model.";
    let vae_levels = header.count(&format!("{f}encoder.down."));
    let vae_layers = header.count(&format!("{f}encoder.down.0.block."));
    let vae_channels = (0..vae_levels)
        .map(|i| header.dim(&format!("{f}encoder.down.{i}.block.0.conv2.weight"), 0))
        .collect::<Result<Vec<_>, _>>()?;
    let vae = json!({
        "_class_name": "AutoencoderKL",
        "in_channels": header.dim(&format!("{f}encoder.conv_in.weight"), 1)?,
        "out_channels": header.dim(&format!("{f}decoder.conv_out.weight"), 0)?,
        "block_out_channels": vae_channels,
        "layers_per_block": vae_layers,
        "latent_channels": header.dim(&format!("{f}post_quant_conv.weight"), 0)?,
        "norm_num_groups": 32,
        "scaling_factor": if sdxl { 0.13025 } else { 0.18215 },
        "use_quant_conv": header.has_prefix(&format!("{f}quant_conv.")),
        "use_post_quant_conv": header.has_prefix(&format!("{f}post_quant_conv.")),
    });

    let clip_l = |prefix: &str| -> Result<Value, DiffusionError> {
        let t = format!("{prefix}text_model.");
        let width = header.dim(&format!("{t}embeddings.token_embedding.weight"), 1)?;
        Ok(json!({
            "architectures": ["CLIPTextModel"],
            "hidden_act": "quick_gelu",
            "hidden_size": width,
            "intermediate_size": header.dim(&format!("{t}encoder.layers.0.mlp.fc1.weight"), 0)?,
            "num_hidden_layers": header.count(&format!("{t}encoder.layers.")),
            "num_attention_heads": (width / 64).max(1),
            "max_position_embeddings": header.dim(&format!("{t}embeddings.position_embedding.weight"), 0)?,
            "vocab_size": header.dim(&format!("{t}embeddings.token_embedding.weight"), 0)?,
            "projection_dim": width,
            "eos_token_id": 2,
        }))
    };
    // OpenCLIP: SD 2.x uses the penultimate layer (its text encoder drops the last block, as
    // diffusers' SD 2 configuration has 23 of ViT-H's 24); SDXL's keeps them all and projects.
    let open_clip = |prefix: &str, drop_last: bool| -> Result<Value, DiffusionError> {
        let width = header.dim(&format!("{prefix}token_embedding.weight"), 1)?;
        let blocks = header.count(&format!("{prefix}transformer.resblocks."));
        let layers = if drop_last {
            blocks.saturating_sub(1).max(1)
        } else {
            blocks
        };
        let projection = header
            .dim(&format!("{prefix}text_projection"), 1)
            .unwrap_or(width);
        Ok(json!({
            "architectures": [if drop_last { "CLIPTextModel" } else { "CLIPTextModelWithProjection" }],
            "hidden_act": "gelu",
            "hidden_size": width,
            "intermediate_size": header.dim(&format!("{prefix}transformer.resblocks.0.mlp.c_fc.weight"), 0)?,
            "num_hidden_layers": layers,
            "num_attention_heads": (width / 64).max(1),
            "max_position_embeddings": header.dim(&format!("{prefix}positional_embedding"), 0)?,
            "vocab_size": header.dim(&format!("{prefix}token_embedding.weight"), 0)?,
            "projection_dim": projection,
            "eos_token_id": 2,
        }))
    };
    let (text, pads) = match arch {
        Arch::Flux | Arch::Sd3 => return Err(not_sd()),
        Arch::Sd1 => (vec![clip_l("cond_stage_model.transformer.")?], vec![None]),
        Arch::Sd2 => (
            vec![open_clip("cond_stage_model.model.", true)?],
            vec![Some("!")],
        ),
        Arch::Sdxl => (
            vec![
                clip_l("conditioner.embedders.0.transformer.")?,
                open_clip("conditioner.embedders.1.model.", false)?,
            ],
            vec![None, Some("!")],
        ),
    };
    let prediction = overrides.prediction.clone().unwrap_or_else(|| {
        if v_prediction {
            "v_prediction"
        } else {
            "epsilon"
        }
        .to_owned()
    });
    let scheduler = json!({
        "_class_name": "EulerDiscreteScheduler",
        "num_train_timesteps": 1000,
        "beta_start": 0.00085,
        "beta_end": 0.012,
        "beta_schedule": "scaled_linear",
        "prediction_type": prediction,
        "timestep_spacing": overrides.timestep_spacing.clone().unwrap_or_else(|| "trailing".into()),
        "steps_offset": 1,
        "set_alpha_to_one": false,
    });
    Ok(InferredConfigs {
        arch,
        unet,
        vae,
        text,
        pads: pads.into_iter().map(|p| p.map(str::to_owned)).collect(),
        scheduler,
        model_index: json!({"force_zeros_for_empty_prompt": sdxl}),
    })
}

/// [`infer_configs`]' result: diffusers-shaped configuration documents.
#[derive(Debug)]
pub struct InferredConfigs {
    pub arch: Arch,
    pub unet: Value,
    pub vae: Value,
    pub text: Vec<Value>,
    /// Each tokenizer's pad token (`None`: the end-of-text token).
    pub pads: Vec<Option<String>>,
    pub scheduler: Value,
    pub model_index: Value,
}

/// The variable builders of a single file's three parts, for networks of `unet_config` and
/// `vae_config` (diffusers documents; either inferred or from a configuration folder).
pub fn weights<'a>(
    path: &Path,
    arch: Arch,
    unet_config: &Value,
    vae_config: &Value,
    device: &Device,
) -> Result<super::Weights<'a>, DiffusionError> {
    // SAFETY: as for diffusers folders, the file is mapped read-only and not written while
    // the server runs.
    let file = std::sync::Arc::new(unsafe { MmapedSafetensors::new(path)? });
    let list = |v: &Value, k: &str| v.get(k).and_then(Value::as_array).map_or(0, Vec::len);
    let layers = |v: &Value| {
        v.get("layers_per_block")
            .and_then(Value::as_u64)
            .unwrap_or(2) as usize
    };
    let attn_up: Vec<bool> = unet_config
        .get("up_block_types")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|t| t.as_str().is_some_and(|s| s.contains("CrossAttn")))
                .collect()
        })
        .unwrap_or_default();
    let vb = |t: Translate| {
        let backend: Box<dyn SimpleBackend> = Box::new(Renamed {
            file: file.clone(),
            translate: t,
        });
        candle_nn::VarBuilder::from_backend(backend, DType::F32, device.clone())
    };
    let unet = vb(Box::new(unet_translator(
        list(unet_config, "block_out_channels"),
        layers(unet_config),
        attn_up,
    )));
    let vae = vb(Box::new(vae_translator(
        list(vae_config, "block_out_channels"),
        layers(vae_config),
    )));
    let text = match arch {
        Arch::Flux | Arch::Sd3 => return Err(not_sd()),
        Arch::Sd1 => vec![vb(Box::new(clip_translator(
            "cond_stage_model.transformer.",
        )))],
        Arch::Sd2 => vec![vb(Box::new(openclip_translator("cond_stage_model.model.")))],
        Arch::Sdxl => vec![
            vb(Box::new(clip_translator(
                "conditioner.embedders.0.transformer.",
            ))),
            vb(Box::new(openclip_translator(
                "conditioner.embedders.1.model.",
            ))),
        ],
    };
    Ok(super::Weights { unet, vae, text })
}

/// Every diffusers name a translator answers, for the tests: `(diffusers name, source)`.
#[cfg(test)]
fn translate_all(names: &[String], t: &dyn Fn(&str) -> Option<Source>) -> HashMap<String, Source> {
    names
        .iter()
        .filter_map(|n| t(n).map(|s| (n.clone(), s)))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn unet_names_follow_the_levels() {
        let t = unet_translator(4, 2, vec![false, true, true, true]);
        let names: Vec<String> = [
            "conv_in.weight",
            "down_blocks.0.resnets.1.conv1.weight",
            "down_blocks.0.attentions.1.proj_in.weight",
            "down_blocks.2.downsamplers.0.conv.bias",
            "mid_block.resnets.1.time_emb_proj.weight",
            "up_blocks.0.upsamplers.0.conv.weight",
            "up_blocks.1.upsamplers.0.conv.weight",
            "up_blocks.3.resnets.2.conv_shortcut.weight",
            "up_blocks.3.attentions.2.transformer_blocks.0.attn2.to_k.weight",
            "add_embedding.linear_2.bias",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let got = translate_all(&names, &t);
        let want = [
            "input_blocks.0.0.weight",
            "input_blocks.2.0.in_layers.2.weight",
            "input_blocks.2.1.proj_in.weight",
            "input_blocks.9.0.op.bias",
            "middle_block.2.emb_layers.1.weight",
            "output_blocks.2.1.conv.weight",
            "output_blocks.5.2.conv.weight",
            "output_blocks.11.0.skip_connection.weight",
            "output_blocks.11.1.transformer_blocks.0.attn2.to_k.weight",
            "label_emb.0.2.bias",
        ];
        for (n, w) in names.iter().zip(want) {
            assert_eq!(
                got[n],
                Source::Name(format!("model.diffusion_model.{w}")),
                "{n}"
            );
        }
    }

    #[test]
    fn openclip_splits_qkv_and_transposes_the_projection() {
        let t = openclip_translator("cond_stage_model.model.");
        assert_eq!(
            t("text_model.encoder.layers.3.self_attn.k_proj.bias"),
            Some(Source::Chunk(
                "cond_stage_model.model.transformer.resblocks.3.attn.in_proj_bias".into(),
                1,
                3
            ))
        );
        assert_eq!(
            t("text_model.encoder.layers.0.mlp.fc2.weight"),
            Some(Source::Name(
                "cond_stage_model.model.transformer.resblocks.0.mlp.c_proj.weight".into()
            ))
        );
        assert_eq!(
            t("text_projection.weight"),
            Some(Source::Transpose(
                "cond_stage_model.model.text_projection".into()
            ))
        );
        assert_eq!(t("text_model.embeddings.position_ids"), None);
    }

    #[test]
    fn vae_names_reverse_the_decoder_levels() {
        let t = vae_translator(4, 2);
        assert_eq!(
            t("decoder.up_blocks.0.resnets.2.conv_shortcut.weight"),
            Some(Source::Name(
                "first_stage_model.decoder.up.3.block.2.nin_shortcut.weight".into()
            ))
        );
        assert_eq!(
            t("decoder.mid_block.attentions.0.to_out.0.weight"),
            Some(Source::Name(
                "first_stage_model.decoder.mid.attn_1.proj_out.weight".into()
            ))
        );
        assert_eq!(
            t("encoder.down_blocks.1.downsamplers.0.conv.bias"),
            Some(Source::Name(
                "first_stage_model.encoder.down.1.downsample.conv.bias".into()
            ))
        );
        assert_eq!(
            t("post_quant_conv.weight"),
            Some(Source::Name(
                "first_stage_model.post_quant_conv.weight".into()
            ))
        );
    }

    /// The configuration read off the fixtures' single files agrees with the diffusers folders
    /// they were exported from, in everything the shapes determine.
    #[test]
    fn inferred_configs_match_the_folders() {
        for arch in ["sd15", "sd21", "sdxl"] {
            let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/diffusion")
                .join(arch);
            let header = Header::read(&dir.join("single_file.safetensors")).unwrap();
            let c = infer_configs(&header, arch == "sd21", &Overrides::default()).unwrap();
            let folder = crate::Configs::read(&dir.join("model")).unwrap();
            for k in [
                "in_channels",
                "out_channels",
                "block_out_channels",
                "layers_per_block",
                "down_block_types",
                "up_block_types",
                "cross_attention_dim",
                "use_linear_projection",
            ] {
                assert_eq!(c.unet[k], folder.unet[k], "{arch} unet {k}");
            }
            for k in [
                "block_out_channels",
                "layers_per_block",
                "latent_channels",
                "in_channels",
                "out_channels",
            ] {
                assert_eq!(c.vae[k], folder.vae[k], "{arch} vae {k}");
            }
            for (i, text) in c.text.iter().enumerate() {
                for k in [
                    "hidden_size",
                    "intermediate_size",
                    "vocab_size",
                    "max_position_embeddings",
                    "hidden_act",
                ] {
                    assert_eq!(text[k], folder.text[i][k], "{arch} text encoder {i} {k}");
                }
            }
            if arch == "sdxl" {
                for k in [
                    "addition_embed_type",
                    "addition_time_embed_dim",
                    "projection_class_embeddings_input_dim",
                    "transformer_layers_per_block",
                ] {
                    assert_eq!(c.unet[k], folder.unet[k], "sdxl unet {k}");
                }
                assert_eq!(
                    c.text[1]["projection_dim"],
                    folder.text[1]["projection_dim"]
                );
                assert_eq!(
                    c.text[1]["num_hidden_layers"],
                    folder.text[1]["num_hidden_layers"]
                );
                assert_eq!(c.pads, vec![None, Some("!".to_owned())]);
                assert_eq!(c.vae["scaling_factor"], 0.13025);
                continue;
            }
            let file_layers = folder.text[0]["num_hidden_layers"].as_u64().unwrap();
            // SD 2.x files hold OpenCLIP's last block, which SD 2 does not use; these fixtures
            // were exported with the folder's blocks only, so one fewer is read off them.
            let want = if arch == "sd21" {
                file_layers - 1
            } else {
                file_layers
            };
            assert_eq!(
                c.text[0]["num_hidden_layers"].as_u64().unwrap(),
                want,
                "{arch} layers"
            );
            assert_eq!(
                c.scheduler["prediction_type"],
                if arch == "sd21" {
                    "v_prediction"
                } else {
                    "epsilon"
                }
            );
            assert_eq!(
                c.pads[0].as_deref(),
                if arch == "sd21" { Some("!") } else { None }
            );
        }
    }
}
