//! LoRA: low-rank changes to a model's weights, merged into them as the model loads.
//!
//! A LoRA file holds, for some of a network's linear and convolution layers, two small matrices
//! — `down` (`[r, in]`, or `[r, in, kh, kw]` for a convolution) and `up` (`[out, r]` /
//! `[out, r, 1, 1]`) — and optionally an `alpha`. Merging it at multiplier `m` changes each such
//! weight to
//!
//! ```text
//! W + m · (alpha / r) · reshape(up.reshape(out, r) @ down.reshape(r, -1), W.shape)
//! ```
//!
//! which is what diffusers' `fuse_lora(lora_scale)`, kohya's `merge_to` and AUTOMATIC1111 compute
//! (several LoRAs add). The formats people have, all read here:
//!
//! - **kohya / AUTOMATIC1111** (`lora_unet_…`, `lora_te_…` / `lora_te1_…` / `lora_te2_…`, with
//!   `.lora_down.weight`, `.lora_up.weight`, `.alpha`): the layer's module path with `.` turned into
//!   `_`. SD 1.x files name the diffusers UNet's modules; SDXL files the original (LDM/"sgm")
//!   UNet's (`input_blocks_4_1_…`), translated here with the UNet's block layout. A missing
//!   `alpha` means `alpha = r`.
//! - **PEFT / diffusers** (`unet.…lora_A.weight` / `lora_B.weight`, `text_encoder.…`,
//!   `text_encoder_2.…`; also the older `…lora.down.weight`, `…lora_linear_layer.down.weight` and
//!   `…processor.to_q_lora.down.weight` spellings): `alpha` comes from the file's
//!   `lora_adapter_metadata` (`<part>.lora_alpha`, `<part>.alpha_pattern`, `<part>.use_rslora`)
//!   or from `.alpha` tensors; without either the scale is 1 (`alpha = r`), as diffusers does.
//!
//! The merge happens in [`LoraWeights`], a weight source wrapped around the model's own: when
//! the network asks for `X.weight` and a LoRA has a layer for module `X` of that part, the sum
//! is made then (float32), so no second copy of the model exists. Every layer of every LoRA must
//! land on a weight of the model ([`Merge::check`]): a LoRA for another family is an error, not
//! a silent no-op. LoHa/LoKr (LyCORIS), DoRA and LoRA biases are refused by name.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use candle::{DType, Device, Shape, Tensor};
use candle_nn::VarBuilder;
use candle_nn::var_builder::SimpleBackend;
use serde_json::Value;

use crate::DiffusionError;
use crate::flux::weights::{Joined, WeightMap};

/// A LoRA to merge and its multipliers (AUTOMATIC1111's `<lora:name:te:unet>`; diffusers'
/// `lora_scale · adapter_weight`).
#[derive(Debug, Clone, PartialEq)]
pub struct LoraSpec {
    pub path: PathBuf,
    /// The multiplier for the UNet's layers.
    pub unet: f32,
    /// The multiplier for the text encoders' layers.
    pub text: f32,
}

/// Which network a layer belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// The denoiser: the UNet, or FLUX's / SD 3's transformer.
    Unet,
    /// The first (`0`), second (`1`, SDXL's and SD 3's OpenCLIP-bigG) or third (`2`, SD 3's
    /// T5) text encoder.
    Text(usize),
}

/// The model a LoRA is read for: its denoiser's layer names differ.
#[derive(Debug, Clone)]
pub enum Denoiser {
    /// A UNet (SD 1.x, 2.x, SDXL) of this block layout.
    Unet(UnetLayout),
    /// FLUX's or SD 3's transformer: layers named as in the original (Black Forest Labs',
    /// Stability AI's) layout or as diffusers' modules; placed by [`Merge::apply`].
    Transformer,
}

impl Part {
    fn label(self) -> &'static str {
        match self {
            Part::Unet => "unet",
            Part::Text(0) => "text_encoder",
            Part::Text(1) => "text_encoder_2",
            Part::Text(_) => "text_encoder_3",
        }
    }
}

/// One layer of a LoRA.
#[derive(Debug)]
struct Layer {
    down: Tensor,
    up: Tensor,
    /// `alpha / r` (or `alpha / √r` for rsLoRA).
    scale: f32,
    /// The key the file names it by (for messages).
    key: String,
}

/// A LoRA file, read: its layers by (part, module path with `.` as `_`).
#[derive(Debug)]
pub struct Lora {
    path: PathBuf,
    layers: HashMap<(Part, String), Layer>,
}

/// The UNet's block layout, which the original ("sgm") layer names are numbered by.
#[derive(Debug, Clone)]
pub struct UnetLayout {
    layers_per_block: usize,
    /// Whether each up block has attention layers (`CrossAttnUpBlock2D`): its upsampler is then
    /// the third layer of its last original block, else the second.
    up_attention: Vec<bool>,
}

impl UnetLayout {
    /// From the UNet's diffusers `config.json`.
    pub fn from_config(unet: &Value) -> Self {
        let types = |k: &str| -> Vec<bool> {
            unet[k]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|t| t.as_str().is_some_and(|t| t.contains("CrossAttn")))
                        .collect()
                })
                .unwrap_or_default()
        };
        let layers_per_block = match &unet["layers_per_block"] {
            Value::Array(a) => a.first().and_then(Value::as_u64),
            v => v.as_u64(),
        }
        .unwrap_or(2) as usize;
        UnetLayout {
            layers_per_block,
            up_attention: types("up_block_types"),
        }
    }
}

fn bad(path: &Path, m: impl std::fmt::Display) -> DiffusionError {
    DiffusionError::Model(format!("LoRA {}: {m}", path.display()))
}

/// A file's tensors, or its `__metadata__` strings, by name.
type ByName<T> = BTreeMap<String, T>;

/// The LoRA file's tensors and its `__metadata__`.
fn read_tensors(path: &Path) -> Result<(ByName<Tensor>, ByName<String>), DiffusionError> {
    let header = crate::checked_header(path)?;
    let metadata = pictor_core::models::safetensors_metadata(path)
        .map_err(|e| DiffusionError::Model(e.to_string()))?;
    // SAFETY: read-only map of a file the header check just validated; Pictor does not write it.
    let file = unsafe { candle::safetensors::MmapedSafetensors::new(path)? };
    let mut tensors = BTreeMap::new();
    for name in header.keys() {
        tensors.insert(name.clone(), file.load(name, &Device::Cpu)?);
    }
    Ok((tensors, metadata))
}

/// A scalar tensor's value (alphas are saved as float16/32, bfloat16 or int64).
fn scalar(t: &Tensor) -> candle::Result<f32> {
    t.flatten_all()?.to_dtype(DType::F32)?.get(0)?.to_scalar()
}

impl Lora {
    /// Reads a LoRA file for a model with this denoiser.
    pub fn read(path: &Path, denoiser: &Denoiser) -> Result<Lora, DiffusionError> {
        let (tensors, metadata) = read_tensors(path)?;
        if tensors.is_empty() {
            return Err(bad(path, "it holds no tensors"));
        }
        for k in tensors.keys() {
            for (marker, what) in [
                ("hada_", "LoHa (LyCORIS)"),
                ("lokr_", "LoKr (LyCORIS)"),
                ("dora_scale", "DoRA"),
                ("lora_magnitude_vector", "DoRA"),
            ] {
                if k.contains(marker) {
                    return Err(bad(path, format!("{what} layers are not supported ({k})")));
                }
            }
        }
        let kohya = tensors.keys().all(|k| k.starts_with("lora_"))
            && tensors.keys().any(|k| {
                k.starts_with("lora_unet_")
                    || k.starts_with("lora_transformer_")
                    || k.starts_with("lora_te")
            });
        let layers = if kohya {
            kohya_layers(path, tensors, denoiser)?
        } else {
            peft_layers(path, tensors, &metadata, denoiser)?
        };
        Ok(Lora {
            path: path.to_owned(),
            layers,
        })
    }

    /// How many layers the file changes.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// The parts of the model it changes.
    pub fn parts(&self) -> Vec<Part> {
        let mut p: Vec<Part> = self.layers.keys().map(|(p, _)| *p).collect();
        p.sort();
        p.dedup();
        p
    }
}

/// A layer's `alpha / r` must be a number a weight can be multiplied by (a NaN, infinite or
/// absurd alpha would turn the model's weights into garbage without an error).
fn finite_scale(path: &Path, key: &str, scale: f32) -> Result<(), DiffusionError> {
    if scale.is_finite() && scale.abs() <= 1e4 {
        Ok(())
    } else {
        Err(bad(
            path,
            format!("{key} has an alpha giving the scale {scale}"),
        ))
    }
}

/// kohya's layer names: `lora_unet_<module>` etc., `.lora_down.weight` / `.lora_up.weight` /
/// `.alpha`.
fn kohya_layers(
    path: &Path,
    mut tensors: BTreeMap<String, Tensor>,
    denoiser: &Denoiser,
) -> Result<HashMap<(Part, String), Layer>, DiffusionError> {
    let downs: Vec<String> = tensors
        .keys()
        .filter(|k| k.ends_with(".lora_down.weight"))
        .cloned()
        .collect();
    let mut layers = HashMap::new();
    for key in downs {
        let name = key.trim_end_matches(".lora_down.weight").to_owned();
        let Some(down) = tensors.remove(&key) else {
            continue;
        };
        let up = tensors
            .remove(&format!("{name}.lora_up.weight"))
            .ok_or_else(|| bad(path, format!("{name} has lora_down but no lora_up")))?;
        let alpha = tensors
            .remove(&format!("{name}.alpha"))
            .map(|a| scalar(&a))
            .transpose()?;
        let denoised = name
            .strip_prefix("lora_unet_")
            .or_else(|| name.strip_prefix("lora_transformer_"));
        let (part, module) = if let Some(m) = denoised {
            match denoiser {
                Denoiser::Unet(layout) => (Part::Unet, sgm_to_diffusers(m, layout)),
                Denoiser::Transformer => (Part::Unet, m.to_owned()),
            }
        } else if let Some(m) = name
            .strip_prefix("lora_te1_")
            .or_else(|| name.strip_prefix("lora_te_"))
        {
            (
                Part::Text(0),
                text_model_prefixed(Part::Text(0), m.to_owned()),
            )
        } else if let Some(m) = name.strip_prefix("lora_te2_") {
            (
                Part::Text(1),
                text_model_prefixed(Part::Text(1), m.to_owned()),
            )
        } else if let Some(m) = name.strip_prefix("lora_te3_") {
            (Part::Text(2), m.to_owned())
        } else {
            return Err(bad(path, format!("unknown layer {name}")));
        };
        let r = down.dim(0)?;
        if r == 0 {
            return Err(bad(path, format!("{name} has rank 0")));
        }
        // kohya: a missing (or zero) alpha is the rank, scale 1.
        let alpha = alpha.filter(|a| *a != 0.0).unwrap_or(r as f32);
        finite_scale(path, &name, alpha / r as f32)?;
        let layer = Layer {
            down,
            up,
            scale: alpha / r as f32,
            key: name,
        };
        if layers.insert((part, module.clone()), layer).is_some() {
            return Err(bad(path, format!("two layers for {module}")));
        }
    }
    if let Some(k) = tensors.keys().next() {
        return Err(bad(
            path,
            format!("{k} belongs to no lora_down/lora_up pair"),
        ));
    }
    Ok(layers)
}

/// A text encoder's module (`_`-joined) under `text_model`, as the encoder's weights are named:
/// transformers 5 (and LoRAs made on it) leave that level out of its CLIP text models.
fn text_model_prefixed(part: Part, flat: String) -> String {
    let top = ["encoder_", "embeddings_", "final_layer_norm"];
    if matches!(part, Part::Text(_)) && top.iter().any(|t| flat.starts_with(t)) {
        format!("text_model_{flat}")
    } else {
        flat
    }
}

/// The diffusers UNet module (as `_`-joined path) an original-UNet ("sgm"/LDM) layer name
/// means; diffusers names come back unchanged.
fn sgm_to_diffusers(name: &str, layout: &UnetLayout) -> String {
    let lpb = layout.layers_per_block;
    let resnet = |rest: &str| -> String {
        for (from, to) in [
            ("in_layers_2", "conv1"),
            ("out_layers_3", "conv2"),
            ("emb_layers_1", "time_emb_proj"),
            ("skip_connection", "conv_shortcut"),
        ] {
            if rest == from {
                return to.to_owned();
            }
        }
        rest.to_owned()
    };
    // "<n>_<m>_<rest>" → (n, m, rest)
    let split3 = |s: &str| -> Option<(usize, usize, String)> {
        let mut it = s.splitn(3, '_');
        let n = it.next()?.parse().ok()?;
        let m = it.next()?.parse().ok()?;
        Some((n, m, it.next().unwrap_or("").to_owned()))
    };
    let exact = [
        ("time_embed_0", "time_embedding_linear_1"),
        ("time_embed_2", "time_embedding_linear_2"),
        ("label_emb_0_0", "add_embedding_linear_1"),
        ("label_emb_0_2", "add_embedding_linear_2"),
        ("input_blocks_0_0", "conv_in"),
        ("out_2", "conv_out"),
    ];
    for (from, to) in exact {
        if name == from {
            return to.to_owned();
        }
    }
    if let Some(rest) = name.strip_prefix("input_blocks_")
        && let Some((i, inner, rest)) = split3(rest)
        && i >= 1
    {
        let block = (i - 1) / (lpb + 1);
        let layer = (i - 1) % (lpb + 1);
        if layer == lpb {
            // The block's downsampler: `input_blocks_<i>_0_op`.
            return format!(
                "down_blocks_{block}_downsamplers_0_{}",
                if rest == "op" { "conv" } else { &rest }
            );
        }
        return match inner {
            0 => format!("down_blocks_{block}_resnets_{layer}_{}", resnet(&rest)),
            _ => format!("down_blocks_{block}_attentions_{layer}_{rest}"),
        };
    }
    if let Some(rest) = name.strip_prefix("middle_block_")
        && let Some((inner, rest)) = rest.split_once('_')
        && let Ok(inner) = inner.parse::<usize>()
    {
        return match inner {
            1 => format!("mid_block_attentions_0_{rest}"),
            n => format!("mid_block_resnets_{}_{}", n / 2, resnet(rest)),
        };
    }
    if let Some(rest) = name.strip_prefix("output_blocks_")
        && let Some((i, inner, rest)) = split3(rest)
    {
        let block = i / (lpb + 1);
        let layer = i % (lpb + 1);
        let attention = layout.up_attention.get(block).copied().unwrap_or(false);
        return match (inner, attention) {
            (0, _) => format!("up_blocks_{block}_resnets_{layer}_{}", resnet(&rest)),
            (1, true) => format!("up_blocks_{block}_attentions_{layer}_{rest}"),
            _ => format!("up_blocks_{block}_upsamplers_0_{rest}"),
        };
    }
    name.to_owned()
}

/// PEFT / diffusers names.
fn peft_layers(
    path: &Path,
    tensors: BTreeMap<String, Tensor>,
    metadata: &BTreeMap<String, String>,
    denoiser: &Denoiser,
) -> Result<HashMap<(Part, String), Layer>, DiffusionError> {
    let config: Value = match metadata.get("lora_adapter_metadata") {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| bad(path, format!("unreadable lora_adapter_metadata: {e}")))?,
        None => Value::Null,
    };
    #[derive(Default)]
    struct Pair {
        down: Option<Tensor>,
        up: Option<Tensor>,
        alpha: Option<f32>,
        key: String,
        /// The module's dotted path (PEFT's `alpha_pattern` matches at dots).
        module: String,
    }
    let mut pairs: BTreeMap<(Part, String), Pair> = BTreeMap::new();
    for (key, t) in tensors {
        // (kohya's `lora_unet_` / `lora_te…_` spellings too: ComfyUI's files mix them in.)
        let transformer = [
            "transformer.",
            "model.diffusion_model.",
            "diffusion_model.",
            "lora_unet_",
            "lora_transformer_",
        ]
        .iter()
        .find_map(|p| key.strip_prefix(p));
        let text = [
            ("lora_te_", 0),
            ("lora_te1_", 0),
            ("lora_te2_", 1),
            ("lora_te3_", 2),
            ("text_encoder.", 0),
            ("text_encoder_2.", 1),
            ("text_encoder_3.", 2),
            // ComfyUI's names for the text encoders.
            ("text_encoders.clip_l.transformer.", 0),
            ("text_encoders.clip_g.transformer.", 1),
            ("text_encoders.t5xxl.transformer.", 2),
        ]
        .iter()
        .find_map(|(p, i)| key.strip_prefix(p).map(|r| (Part::Text(*i), r)));
        let (part, rest) = if let Some(r) = key.strip_prefix("unet.") {
            (Part::Unet, r)
        } else if let Some(t) = text {
            t
        } else if let Some(r) = transformer {
            if matches!(denoiser, Denoiser::Unet(_)) {
                return Err(bad(
                    path,
                    if key.starts_with("lora_") {
                        "it mixes kohya's lora_unet_ names with others, which is read for FLUX / SD 3 only"
                    } else {
                        "it is a LoRA for a transformer model (FLUX / SD 3), not for this UNet"
                    },
                ));
            }
            (Part::Unet, r)
        } else {
            // Unprefixed attention-processor files (diffusers ≤ 0.20) are the UNet's.
            (Part::Unet, key.as_str())
        };
        let rest = rest.replace(".processor.", ".");
        let (module, role) = peft_role(&rest, part)
            .ok_or_else(|| bad(path, format!("{key} is not a LoRA layer's tensor")))?;
        let pair = pairs
            .entry((part, text_model_prefixed(part, module.replace('.', "_"))))
            .or_default();
        if pair.key.is_empty() {
            pair.key = key.clone();
            pair.module = module.clone();
        }
        let slot = match role {
            Role::Down => &mut pair.down,
            Role::Up => &mut pair.up,
            Role::Alpha => {
                pair.alpha = Some(scalar(&t)?);
                continue;
            }
        };
        if slot.replace(t).is_some() {
            return Err(bad(path, format!("two tensors for {key}")));
        }
    }
    let mut layers = HashMap::new();
    for ((part, flat), pair) in pairs {
        let (Some(down), Some(up)) = (pair.down, pair.up) else {
            return Err(bad(path, format!("{} lacks its A/B partner", pair.key)));
        };
        let r = down.dim(0)?;
        if r == 0 {
            return Err(bad(path, format!("{} has rank 0", pair.key)));
        }
        let c = &config;
        // diffusers keeps a denoiser's settings under its pipeline's name for it.
        let label = match part {
            Part::Unet if c.get("unet.r").is_none() && c.get("transformer.r").is_some() => {
                "transformer"
            }
            p => p.label(),
        };
        let pattern_alpha = c[format!("{label}.alpha_pattern")]
            .as_object()
            .and_then(|pats| {
                pats.iter().find_map(|(pat, a)| {
                    // As PEFT matches: the whole path, or a suffix starting at a dot (so
                    // `transformer_blocks.0.attn.to_q` is not `single_transformer_blocks.0…`).
                    let pat = pat.trim_start_matches('^');
                    let m = &pair.module;
                    (m == pat || m.ends_with(&format!(".{pat}")))
                        .then(|| a.as_f64())
                        .flatten()
                })
            });
        let alpha = pair
            .alpha
            .map(f64::from)
            .or(pattern_alpha)
            .or_else(|| c[format!("{label}.lora_alpha")].as_f64());
        let rslora = c[format!("{label}.use_rslora")].as_bool() == Some(true);
        let scale = match alpha {
            None => 1.0,
            Some(a) if rslora => a as f32 / (r as f32).sqrt(),
            Some(a) => a as f32 / r as f32,
        };
        finite_scale(path, &pair.key, scale)?;
        layers.insert(
            (part, flat),
            Layer {
                down,
                up,
                scale,
                key: pair.key,
            },
        );
    }
    Ok(layers)
}

enum Role {
    Down,
    Up,
    Alpha,
}

/// The module path and the tensor's role in a PEFT / diffusers key (after the part's prefix).
fn peft_role(rest: &str, part: Part) -> Option<(String, Role)> {
    for (suffix, role) in [
        (".lora_A.weight", Role::Down),
        (".lora_B.weight", Role::Up),
        (".lora_down.weight", Role::Down),
        (".lora_up.weight", Role::Up),
        (".lora.down.weight", Role::Down),
        (".lora.up.weight", Role::Up),
        (".lora_linear_layer.down.weight", Role::Down),
        (".lora_linear_layer.up.weight", Role::Up),
        (".alpha", Role::Alpha),
    ] {
        if let Some(m) = rest.strip_suffix(suffix) {
            return Some((m.to_owned(), role));
        }
    }
    // The attention processors' spelling: `<attn>.to_q_lora.down.weight`.
    for (suffix, role) in [(".down.weight", Role::Down), (".up.weight", Role::Up)] {
        if let Some(m) = rest.strip_suffix(suffix) {
            let (parent, proc) = m.rsplit_once('.')?;
            let target = match (proc, part) {
                ("to_q_lora", Part::Unet) => "to_q",
                ("to_k_lora", Part::Unet) => "to_k",
                ("to_v_lora", Part::Unet) => "to_v",
                ("to_out_lora", Part::Unet) => "to_out.0",
                ("to_q_lora", _) => "q_proj",
                ("to_k_lora", _) => "k_proj",
                ("to_v_lora", _) => "v_proj",
                ("to_out_lora", _) => "out_proj",
                _ => return None,
            };
            return Some((format!("{parent}.{target}"), role));
        }
    }
    None
}

/// LoRAs being merged into a model as it loads; [`check`](Merge::check) after the networks are
/// built.
pub struct Merge {
    loras: Arc<Vec<(Lora, LoraSpec)>>,
    used: Arc<Mutex<HashSet<(usize, Part, String)>>>,
}

impl Merge {
    /// Reads the LoRA files for a model with this denoiser.
    pub fn read(specs: &[LoraSpec], denoiser: &Denoiser) -> Result<Merge, DiffusionError> {
        let mut loras = Vec::new();
        for s in specs {
            if !(s.unet.is_finite() && s.text.is_finite()) {
                return Err(bad(&s.path, "its multiplier is not a finite number"));
            }
            loras.push((Lora::read(&s.path, denoiser)?, s.clone()));
        }
        Ok(Merge {
            loras: Arc::new(loras),
            used: Arc::default(),
        })
    }

    /// `weights` with the LoRAs' layers for `part` added as they are read.
    pub fn wrap<'a>(&self, part: Part, weights: VarBuilder<'a>) -> VarBuilder<'a> {
        if !self.loras.iter().any(|(l, _)| l.parts().contains(&part)) {
            return weights;
        }
        let dtype = weights.dtype();
        let device = weights.device().clone();
        let backend: Box<dyn SimpleBackend + 'a> = Box::new(LoraWeights {
            inner: weights,
            part,
            loras: self.loras.clone(),
            used: self.used.clone(),
        });
        VarBuilder::from_backend(backend, dtype, device)
    }

    /// Refuses a LoRA with layers for `part`, which this model has no place for (`what`: the
    /// part, in words).
    pub fn refuse(&self, part: Part, what: &str) -> Result<(), DiffusionError> {
        for (lora, _) in self.loras.iter() {
            if let Some(((_, _), l)) = lora.layers.iter().find(|((p, _), _)| *p == part) {
                return Err(bad(
                    &lora.path,
                    format!("LoRA layers for {what} are not supported ({})", l.key),
                ));
            }
        }
        Ok(())
    }

    /// Adds the LoRAs' denoiser layers to a FLUX / SD 3 transformer's weights `w` (the
    /// original layout's names). A layer is found by its own name in that layout (kohya's and
    /// ComfyUI's files: `double_blocks_0_img_attn_qkv`) or, through `plan`, by its diffusers
    /// module (PEFT files: `transformer_blocks.0.attn.to_q`), which may be a row range of a
    /// joined matrix (q of `qkv`) or a modulation with its halves exchanged. The changes to one
    /// matrix are gathered into one `up · down` ([`WeightMap::add_low_rank`]).
    pub fn apply(&self, w: &mut WeightMap, plan: &[Joined]) -> Result<(), DiffusionError> {
        let own: HashMap<String, String> = w
            .names()
            .filter_map(|n| n.strip_suffix(".weight"))
            .map(|m| (m.replace('.', "_"), m.to_owned()))
            .collect();
        let mut by_diffusers: HashMap<String, (usize, usize)> = HashMap::new();
        for (j, joined) in plan.iter().enumerate() {
            for (k, src) in joined.srcs.iter().enumerate() {
                by_diffusers.insert(src.replace('.', "_"), (j, k));
            }
        }
        let mut changes: BTreeMap<String, (Vec<Tensor>, Vec<Tensor>)> = BTreeMap::new();
        for (i, (lora, spec)) in self.loras.iter().enumerate() {
            let mut layers: Vec<_> = lora
                .layers
                .iter()
                .filter(|((p, _), _)| *p == Part::Unet)
                .collect();
            layers.sort_by(|a, b| a.0.cmp(b.0));
            for ((part, flat), layer) in layers {
                let (module, joined, k) = if let Some(m) = own.get(flat) {
                    (m.clone(), None, 0)
                } else if let Some(&(j, k)) = by_diffusers.get(flat) {
                    (plan[j].dst.clone(), Some(&plan[j]), k)
                } else {
                    continue; // `check` names it
                };
                let name = format!("{module}.weight");
                let Some(dims) = w.dims_of(&name).filter(|d| d.len() >= 2) else {
                    continue; // `check` names it (no matrix of that name)
                };
                let fit = |e: candle::Error| {
                    bad(
                        &lora.path,
                        format!(
                            "{} does not fit the model's {name} {dims:?}: {e}",
                            layer.key
                        ),
                    )
                };
                let (up, down) =
                    transformer_factors(layer, joined, k, &dims, spec.unet).map_err(fit)?;
                self.used.lock().unwrap_or_else(|e| e.into_inner()).insert((
                    i,
                    *part,
                    flat.clone(),
                ));
                let entry = changes.entry(name).or_default();
                entry.0.push(up);
                entry.1.push(down);
            }
        }
        for (name, (ups, downs)) in changes {
            let up = Tensor::cat(&ups, 1);
            let down = Tensor::cat(&downs, 0);
            up.and_then(|up| w.add_low_rank(&name, up, down?))
                .map_err(|e| DiffusionError::Model(format!("LoRA on {name}: {e}")))?;
        }
        Ok(())
    }

    /// Every layer of every LoRA found its weight; else which did not (the LoRA is for another
    /// model, or names layers this engine does not have).
    pub fn check(&self) -> Result<(), DiffusionError> {
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        for (i, (lora, _)) in self.loras.iter().enumerate() {
            let mut missing: Vec<&str> = lora
                .layers
                .iter()
                .filter(|((p, m), _)| !used.contains(&(i, *p, m.clone())))
                .map(|(_, l)| l.key.as_str())
                .collect();
            if missing.is_empty() {
                continue;
            }
            missing.sort_unstable();
            return Err(bad(
                &lora.path,
                format!(
                    "{} of its {} layers are not in this model (is it for another model family?), e.g. {}",
                    missing.len(),
                    lora.layers.len(),
                    missing[..missing.len().min(3)].join(", ")
                ),
            ));
        }
        Ok(())
    }
}

/// One LoRA layer as `up` (`[out, r]`, scaled by the multiplier and the layer's scale, zero
/// outside the rows it changes) and `down` (`[r, in]`) for a matrix of `dims`; `joined` and `k`
/// say where a diffusers module sits in it.
fn transformer_factors(
    layer: &Layer,
    joined: Option<&Joined>,
    k: usize,
    dims: &[usize],
    multiplier: f32,
) -> candle::Result<(Tensor, Tensor)> {
    let r = layer.down.dim(0)?;
    let out = dims[0];
    let inputs: usize = dims[1..].iter().product();
    let down = layer.down.to_dtype(DType::F32)?.reshape((r, ()))?;
    let up = layer
        .up
        .to_dtype(DType::F32)?
        .reshape((layer.up.dim(0)?, ()))?;
    if up.dim(1)? != r || down.dim(1)? != inputs {
        candle::bail!("{:?} × {:?}", layer.up.dims(), layer.down.dims());
    }
    let (start, len) = match joined {
        Some(j) if j.srcs.len() > 1 => j.rows_of(k, (out, dims[1])),
        _ => (0, out),
    };
    if up.dim(0)? != len || start + len > out {
        candle::bail!(
            "{:?} × {:?} for rows {start}..{}",
            layer.up.dims(),
            layer.down.dims(),
            start + len
        );
    }
    let up = if joined.is_some_and(|j| j.swap) {
        let half = out / 2;
        Tensor::cat(
            &[up.narrow(0, half, out - half)?, up.narrow(0, 0, half)?],
            0,
        )?
    } else {
        let mut parts = Vec::new();
        if start > 0 {
            parts.push(Tensor::zeros((start, r), DType::F32, up.device())?);
        }
        parts.push(up);
        if start + len < out {
            parts.push(Tensor::zeros(
                (out - start - len, r),
                DType::F32,
                &Device::Cpu,
            )?);
        }
        Tensor::cat(&parts, 0)?
    };
    Ok(((up * f64::from(multiplier * layer.scale))?, down))
}

/// A weight source that adds the LoRAs' changes to the weights of one part of the model.
struct LoraWeights<'a> {
    inner: VarBuilder<'a>,
    part: Part,
    loras: Arc<Vec<(Lora, LoraSpec)>>,
    used: Arc<Mutex<HashSet<(usize, Part, String)>>>,
}

impl LoraWeights<'_> {
    fn merged(&self, name: &str, w: Tensor) -> candle::Result<Tensor> {
        let Some(module) = name.strip_suffix(".weight") else {
            return Ok(w);
        };
        let flat = module.replace('.', "_");
        let mut sum: Option<Tensor> = None;
        for (i, (lora, spec)) in self.loras.iter().enumerate() {
            let Some(layer) = lora.layers.get(&(self.part, flat.clone())) else {
                continue;
            };
            let m = match self.part {
                Part::Unet => spec.unet,
                Part::Text(_) => spec.text,
            };
            self.used.lock().unwrap_or_else(|e| e.into_inner()).insert((
                i,
                self.part,
                flat.clone(),
            ));
            let r = layer.down.dim(0)?;
            let out = layer.up.dim(0)?;
            let dev = w.device();
            let up = layer.up.to_dtype(DType::F32)?.reshape((out, ()))?;
            let down = layer.down.to_dtype(DType::F32)?.reshape((r, ()))?;
            if up.dim(1)? != r || out * down.dim(1)? != w.elem_count() || out != w.dim(0)? {
                candle::bail!(
                    "LoRA {}: {} ({:?} × {:?}) does not fit the model's {name} {:?}",
                    lora.path.display(),
                    layer.key,
                    layer.up.dims(),
                    layer.down.dims(),
                    w.dims()
                );
            }
            let delta =
                (up.to_device(dev)?.matmul(&down.to_device(dev)?)? * f64::from(m * layer.scale))?;
            sum = Some(match sum {
                None => delta,
                Some(s) => (s + delta)?,
            });
        }
        match sum {
            None => Ok(w),
            Some(d) => {
                let dtype = w.dtype();
                (w.to_dtype(DType::F32)? + d.reshape(w.shape())?)?.to_dtype(dtype)
            }
        }
    }
}

impl SimpleBackend for LoraWeights<'_> {
    fn get(
        &self,
        s: Shape,
        name: &str,
        h: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> candle::Result<Tensor> {
        let w = self.inner.get_with_hints_dtype(s, name, h, dtype)?;
        self.merged(name, w)?.to_device(dev)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle::Result<Tensor> {
        let w = self.inner.get_unchecked_dtype(name, dtype)?;
        self.merged(name, w)?.to_device(dev)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.inner.contains_tensor(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sdxl() -> UnetLayout {
        UnetLayout {
            layers_per_block: 2,
            up_attention: vec![true, true, false],
        }
    }

    fn sd15() -> UnetLayout {
        UnetLayout {
            layers_per_block: 2,
            up_attention: vec![false, true, true, true],
        }
    }

    #[test]
    fn original_unet_names_become_diffusers_names() {
        let x = sdxl();
        for (sgm, diffusers) in [
            (
                "input_blocks_4_1_transformer_blocks_0_attn1_to_q",
                "down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q",
            ),
            (
                "input_blocks_1_0_in_layers_2",
                "down_blocks_0_resnets_0_conv1",
            ),
            (
                "input_blocks_2_0_emb_layers_1",
                "down_blocks_0_resnets_1_time_emb_proj",
            ),
            ("input_blocks_3_0_op", "down_blocks_0_downsamplers_0_conv"),
            (
                "input_blocks_4_0_skip_connection",
                "down_blocks_1_resnets_0_conv_shortcut",
            ),
            ("middle_block_0_out_layers_3", "mid_block_resnets_0_conv2"),
            ("middle_block_1_proj_in", "mid_block_attentions_0_proj_in"),
            ("middle_block_2_in_layers_2", "mid_block_resnets_1_conv1"),
            ("output_blocks_2_2_conv", "up_blocks_0_upsamplers_0_conv"),
            (
                "output_blocks_5_1_proj_out",
                "up_blocks_1_attentions_2_proj_out",
            ),
            (
                "output_blocks_8_0_out_layers_3",
                "up_blocks_2_resnets_2_conv2",
            ),
            ("time_embed_0", "time_embedding_linear_1"),
            ("label_emb_0_2", "add_embedding_linear_2"),
            (
                "down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q",
                "down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q",
            ),
        ] {
            assert_eq!(sgm_to_diffusers(sgm, &x), diffusers, "{sgm}");
        }
        // SD 1.x: the first up block has no attention, its upsampler is inner layer 1.
        assert_eq!(
            sgm_to_diffusers("output_blocks_2_1_conv", &sd15()),
            "up_blocks_0_upsamplers_0_conv"
        );
        assert_eq!(
            sgm_to_diffusers("output_blocks_5_2_conv", &sd15()),
            "up_blocks_1_upsamplers_0_conv"
        );
    }

    /// A LoRA file of `tensors` (all `[2, 4]` zeros) and what reading it says.
    fn read_error(names: &[&str]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.safetensors");
        let t: HashMap<String, Tensor> = names
            .iter()
            .map(|n| {
                let t = Tensor::zeros((2, 4), DType::F32, &Device::Cpu).unwrap();
                (n.to_string(), t)
            })
            .collect();
        candle::safetensors::save(&t, &path).unwrap();
        match Lora::read(&path, &Denoiser::Unet(sd15())) {
            Ok(l) => format!("read {} layers", l.len()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unsupported_and_broken_files_are_refused_by_name() {
        let e = read_error(&["lora_unet_a_b.hada_w1_a", "lora_unet_a_b.hada_w1_b"]);
        assert!(e.contains("LoHa"), "{e}");
        let e = read_error(&["lora_unet_x.lora_down.weight", "lora_unet_x.dora_scale"]);
        assert!(e.contains("DoRA"), "{e}");
        let e = read_error(&["transformer.single_transformer_blocks.0.attn.to_q.lora_A.weight"]);
        assert!(e.contains("FLUX"), "{e}");
        let e = read_error(&["lora_unet_x.lora_down.weight"]);
        assert!(e.contains("no lora_up"), "{e}");
        let e = read_error(&["unet.x.to_q.lora_A.weight"]);
        assert!(e.contains("partner"), "{e}");
        let e = read_error(&["unet.x.to_q.weight"]);
        assert!(e.contains("not a LoRA layer"), "{e}");
        let e = read_error(&["lora_unet_x.lora_down.weight", "lora_unet_x.lora_up.weight"]);
        assert_eq!(e, "read 1 layers");
    }

    /// A safetensors file of float32 tensors (name, shape, value) with `__metadata__`.
    fn safetensors_with(tensors: &[(&str, &[usize], f32)], metadata: &str) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        header.insert(
            "__metadata__".into(),
            serde_json::json!({"lora_adapter_metadata": metadata}),
        );
        let mut data = Vec::new();
        for (name, shape, v) in tensors {
            let n: usize = shape.iter().product::<usize>().max(1);
            let start = data.len();
            for _ in 0..n {
                data.extend_from_slice(&v.to_le_bytes());
            }
            header.insert(
                name.to_string(),
                serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}),
            );
        }
        let text = serde_json::Value::Object(header).to_string();
        let mut out = (text.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(&data);
        out
    }

    /// PEFT's `alpha_pattern` matches a module at a dot boundary: the double block's `to_q`
    /// pattern does not reach the single block's `to_q`; an absurd alpha is refused.
    #[test]
    fn alpha_patterns_match_whole_modules_and_alphas_are_sane() {
        let dir = tempfile::tempdir().unwrap();
        let q = "transformer.transformer_blocks.0.attn.to_q";
        let single = "transformer.single_transformer_blocks.0.attn.to_q";
        let meta = r#"{"transformer.r": 2, "transformer.lora_alpha": 4, "transformer.alpha_pattern": {"transformer_blocks.0.attn.to_q": 8}}"#;
        let path = dir.path().join("p.safetensors");
        let tensors: Vec<(String, Vec<usize>)> = [q, single]
            .iter()
            .flat_map(|m| {
                [
                    (format!("{m}.lora_A.weight"), vec![2, 4]),
                    (format!("{m}.lora_B.weight"), vec![4, 2]),
                ]
            })
            .collect();
        let refs: Vec<(&str, &[usize], f32)> = tensors
            .iter()
            .map(|(n, s)| (n.as_str(), s.as_slice(), 0.5))
            .collect();
        std::fs::write(&path, safetensors_with(&refs, meta)).unwrap();
        let lora = Lora::read(&path, &Denoiser::Transformer).unwrap();
        let scale = |m: &str| lora.layers[&(Part::Unet, m.to_string())].scale;
        assert_eq!(
            scale("transformer_blocks_0_attn_to_q"),
            4.0,
            "its pattern: 8 / 2"
        );
        assert_eq!(
            scale("single_transformer_blocks_0_attn_to_q"),
            2.0,
            "lora_alpha: 4 / 2"
        );

        let k = "lora_unet_double_blocks_0_img_attn_qkv";
        let down = format!("{k}.lora_down.weight");
        let up = format!("{k}.lora_up.weight");
        let alpha = format!("{k}.alpha");
        for bad in [f32::INFINITY, f32::NAN, 1e9] {
            let bytes = safetensors_with(
                &[
                    (&down, &[2, 4], 0.5),
                    (&up, &[4, 2], 0.5),
                    (&alpha, &[], bad),
                ],
                "{}",
            );
            std::fs::write(&path, bytes).unwrap();
            let e = Lora::read(&path, &Denoiser::Transformer)
                .unwrap_err()
                .to_string();
            assert!(e.contains("alpha giving the scale"), "{bad}: {e}");
        }
    }

    #[test]
    fn peft_spellings_name_the_same_module() {
        let m = |k: &str, p| peft_role(k, p).map(|(m, _)| m);
        let q = "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q";
        assert_eq!(
            m(&format!("{q}.lora_A.weight"), Part::Unet).as_deref(),
            Some(q)
        );
        assert_eq!(
            m(&format!("{q}.lora.up.weight"), Part::Unet).as_deref(),
            Some(q)
        );
        assert_eq!(
            m(
                "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_out_lora.down.weight",
                Part::Unet
            )
            .as_deref(),
            Some("down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_out.0")
        );
        assert_eq!(
            m(
                "text_model.encoder.layers.0.self_attn.to_k_lora.up.weight",
                Part::Text(0)
            )
            .as_deref(),
            Some("text_model.encoder.layers.0.self_attn.k_proj")
        );
        assert!(m("down_blocks.0.resnets.0.norm1.weight", Part::Unet).is_none());
    }
}
