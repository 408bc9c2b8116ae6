//! Reading a model's configuration files into the networks' configurations.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::DiffusionError;
use super::net::clip::{self, Activation};
use super::net::unet_2d::{BlockConfig, TextTimeConfig, UNet2DConditionModelConfig};
use super::net::vae::AutoEncoderKLConfig;

fn bad(file: &str, m: impl std::fmt::Display) -> DiffusionError {
    DiffusionError::Model(format!("{file}: {m}"))
}

fn usize_of(v: &Value, k: &str, d: usize) -> usize {
    v.get(k).and_then(Value::as_u64).map_or(d, |x| x as usize)
}

/// An int or a per-block list (`attention_head_dim`, `transformer_layers_per_block`, …).
fn per_block(
    v: Option<&Value>,
    n: usize,
    file: &str,
    key: &str,
) -> Result<Option<Vec<usize>>, DiffusionError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(x)) => match x.as_u64() {
            Some(x @ 1..=1024) => Ok(Some(vec![x as usize; n])),
            _ => Err(bad(file, format!("{key} must be from 1 to 1024"))),
        },
        Some(Value::Array(a)) if a.len() == n => a
            .iter()
            .map(|x| match x.as_u64() {
                Some(x @ 1..=1024) => Ok(x as usize),
                _ => Err(bad(
                    file,
                    format!("{key} must hold integers from 1 to 1024"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(bad(
            file,
            format!("{key} must be an integer or one per block"),
        )),
    }
}

/// `block_out_channels`: 1 to 8 widths, each 1..=8192.
fn block_out_channels(v: &Value, file: &str) -> Result<Vec<usize>, DiffusionError> {
    let channels: Vec<usize> = v
        .get("block_out_channels")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_u64)
                .map(|x| x as usize)
                .collect()
        })
        .ok_or_else(|| bad(file, "no block_out_channels"))?;
    if channels.is_empty() || channels.len() > 8 || channels.iter().any(|&c| c == 0 || c > 8192) {
        return Err(bad(file, "implausible block_out_channels"));
    }
    Ok(channels)
}

/// What the UNet's `config.json` says, in candle's terms, plus its latent size.
pub struct UNetShape {
    pub config: UNet2DConditionModelConfig,
    pub in_channels: usize,
    pub out_channels: usize,
    /// `sample_size`: the latent side the model was trained at.
    pub sample_size: usize,
}

pub fn unet_config(v: &Value) -> Result<UNetShape, DiffusionError> {
    const F: &str = "unet/config.json";
    let channels = block_out_channels(v, F)?;
    let n = channels.len();
    let types = |k: &str| -> Vec<String> {
        v.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let down = types("down_block_types");
    let up = types("up_block_types");
    if down.len() != n || up.len() != n {
        return Err(bad(
            F,
            "down/up block types do not match block_out_channels",
        ));
    }
    for (i, d) in down.iter().enumerate() {
        let cross = d == "CrossAttnDownBlock2D";
        if !cross && d != "DownBlock2D" {
            return Err(bad(F, format!("down block {d:?} is not supported")));
        }
        let u = &up[n - 1 - i];
        let ok = if cross {
            u == "CrossAttnUpBlock2D"
        } else {
            u == "UpBlock2D"
        };
        if !ok {
            return Err(bad(F, "up blocks must mirror the down blocks"));
        }
    }
    for unsupported in ["class_embed_type", "time_cond_proj_dim", "encoder_hid_dim"] {
        if v.get(unsupported).is_some_and(|x| !x.is_null()) {
            return Err(bad(F, format!("{unsupported} is not supported")));
        }
    }
    if let Some(m) = v.get("mid_block_type").and_then(Value::as_str)
        && m != "UNetMidBlock2DCrossAttn"
    {
        return Err(bad(F, format!("mid block {m:?} is not supported")));
    }
    // diffusers: num_attention_heads defaults to attention_head_dim (a historical naming).
    let heads = per_block(v.get("num_attention_heads"), n, F, "num_attention_heads")?
        .or(per_block(
            v.get("attention_head_dim"),
            n,
            F,
            "attention_head_dim",
        )?)
        .unwrap_or_else(|| vec![8; n]);
    let layers = per_block(
        v.get("transformer_layers_per_block"),
        n,
        F,
        "transformer_layers_per_block",
    )?
    .unwrap_or_else(|| vec![1; n]);
    let cross_attention_dim = match v.get("cross_attention_dim") {
        Some(Value::Number(x)) => x.as_u64().unwrap_or(0) as usize,
        Some(Value::Array(a)) => a.first().and_then(Value::as_u64).unwrap_or(0) as usize,
        _ => 1280,
    };
    let blocks = (0..n)
        .map(|i| BlockConfig {
            out_channels: channels[i],
            use_cross_attn: (down[i] == "CrossAttnDownBlock2D").then_some(layers[i]),
            attention_head_dim: heads[i],
        })
        .collect();
    let text_time = match v.get("addition_embed_type").and_then(Value::as_str) {
        None => None,
        Some("text_time") => Some(TextTimeConfig {
            time_embed_dim: usize_of(v, "addition_time_embed_dim", 256),
            input_dim: usize_of(v, "projection_class_embeddings_input_dim", 2816),
        }),
        Some(other) => {
            return Err(bad(
                F,
                format!("addition_embed_type {other:?} is not supported"),
            ));
        }
    };
    let f = |k: &str, d: f64| v.get(k).and_then(Value::as_f64).unwrap_or(d);
    let config = UNet2DConditionModelConfig {
        center_input_sample: v
            .get("center_input_sample")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        flip_sin_to_cos: v
            .get("flip_sin_to_cos")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        freq_shift: f("freq_shift", 0.0),
        blocks,
        layers_per_block: usize_of(v, "layers_per_block", 2),
        downsample_padding: usize_of(v, "downsample_padding", 1),
        mid_block_scale_factor: f("mid_block_scale_factor", 1.0),
        norm_num_groups: usize_of(v, "norm_num_groups", 32),
        norm_eps: f("norm_eps", 1e-5),
        cross_attention_dim,
        sliced_attention_size: None,
        use_linear_projection: v
            .get("use_linear_projection")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        weights: crate::net::linear::Weights::Float,
        text_time,
    };
    Ok(UNetShape {
        config,
        in_channels: usize_of(v, "in_channels", 4),
        out_channels: usize_of(v, "out_channels", 4),
        sample_size: usize_of(v, "sample_size", 64),
    })
}

/// The VAE's shape and its latent scaling factor.
pub fn vae_config(v: &Value) -> Result<(AutoEncoderKLConfig, f64, usize, usize), DiffusionError> {
    const F: &str = "vae/config.json";
    let channels = block_out_channels(v, F)?;
    let config = AutoEncoderKLConfig {
        block_out_channels: channels,
        layers_per_block: usize_of(v, "layers_per_block", 2),
        latent_channels: usize_of(v, "latent_channels", 4),
        norm_num_groups: usize_of(v, "norm_num_groups", 32),
        use_quant_conv: v
            .get("use_quant_conv")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        use_post_quant_conv: v
            .get("use_post_quant_conv")
            .and_then(Value::as_bool)
            .unwrap_or(true),
    };
    let scale = v
        .get("scaling_factor")
        .and_then(Value::as_f64)
        .unwrap_or(0.18215);
    Ok((
        config,
        scale,
        usize_of(v, "in_channels", 3),
        usize_of(v, "out_channels", 3),
    ))
}

/// A CLIP text encoder's configuration and whether it has a text projection.
pub fn clip_config(v: &Value) -> Result<(clip::Config, bool), DiffusionError> {
    const F: &str = "text_encoder/config.json";
    let activation = match v
        .get("hidden_act")
        .and_then(Value::as_str)
        .unwrap_or("quick_gelu")
    {
        "quick_gelu" => Activation::QuickGelu,
        "gelu" => Activation::GeluErf,
        "gelu_new" | "gelu_pytorch_tanh" => Activation::Gelu,
        other => return Err(bad(F, format!("hidden_act {other:?} is not supported"))),
    };
    let eos = v.get("eos_token_id").and_then(Value::as_u64).unwrap_or(2) as u32;
    let c = clip::Config {
        vocab_size: usize_of(v, "vocab_size", 49408),
        embed_dim: usize_of(v, "hidden_size", 768),
        activation,
        intermediate_size: usize_of(v, "intermediate_size", 3072),
        max_position_embeddings: usize_of(v, "max_position_embeddings", 77),
        num_hidden_layers: usize_of(v, "num_hidden_layers", 12),
        num_attention_heads: usize_of(v, "num_attention_heads", 12),
        projection_dim: usize_of(v, "projection_dim", 768),
        layer_norm_eps: v
            .get("layer_norm_eps")
            .and_then(Value::as_f64)
            .unwrap_or(1e-5),
        eos_token_id: (eos != 2).then_some(eos),
        int8: false,
    };
    if c.num_attention_heads == 0 || !c.embed_dim.is_multiple_of(c.num_attention_heads) {
        return Err(bad(
            F,
            "hidden_size must be a multiple of num_attention_heads",
        ));
    }
    let projection = v
        .get("architectures")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .any(|x| x.as_str() == Some("CLIPTextModelWithProjection"))
        });
    Ok((c, projection))
}

/// The weights files of a diffusers component folder: the plain file (`plain`), else the
/// shards its index lists (`<plain>.index.json`, as diffusers and transformers write any
/// component over their shard size: `diffusion_pytorch_model-00001-of-00003.safetensors`…),
/// else a variant's file or shards (`*.fp16.safetensors`, `<plain>.index.fp16.json`), else the
/// only `.safetensors` there.
pub fn weights_in(dir: &Path, plain: &str) -> Result<Vec<PathBuf>, DiffusionError> {
    let p = dir.join(plain);
    if p.is_file() {
        return Ok(vec![p]);
    }
    let index = dir.join(format!("{plain}.index.json"));
    if index.is_file() {
        return shards(dir, &index);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| DiffusionError::Model(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    found.sort();
    let name = |p: &PathBuf| {
        p.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned()
    };
    // A variant's index: `diffusion_pytorch_model.safetensors.index.fp16.json`.
    if let Some(i) = found.iter().find(|p| {
        let n = name(p);
        n.starts_with(&format!("{plain}.index.")) && n.ends_with(".json")
    }) {
        return shards(dir, i);
    }
    found
        .into_iter()
        .find(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .map(|p| vec![p])
        .ok_or_else(|| {
            DiffusionError::Model(format!("no .safetensors weights in {}", dir.display()))
        })
}

/// The shard files an index lists (`weight_map`'s values), each a plain file of `dir`, in order.
fn shards(dir: &Path, index: &Path) -> Result<Vec<PathBuf>, DiffusionError> {
    let bad = |m: &str| DiffusionError::Model(format!("{}: {m}", index.display()));
    let text =
        pictor_core::files::read_file(index, pictor_core::files::CONFIG_MAX * 8, "a weights index")
            .map_err(|e| DiffusionError::Model(e.to_string()))?;
    let v: Value = serde_json::from_slice(&text).map_err(|e| bad(&e.to_string()))?;
    let map = v
        .get("weight_map")
        .and_then(Value::as_object)
        .ok_or_else(|| bad("no weight_map"))?;
    let mut files: Vec<String> = map
        .values()
        .map(|f| {
            f.as_str()
                .map(str::to_owned)
                .ok_or_else(|| bad("a shard name is not a string"))
        })
        .collect::<Result<_, _>>()?;
    files.sort();
    files.dedup();
    if files.is_empty() {
        return Err(bad("lists no shards"));
    }
    files
        .into_iter()
        .map(|f| {
            let safe = !f.is_empty()
                && !f.contains(['/', '\\'])
                && f != ".."
                && f.ends_with(".safetensors");
            if !safe {
                return Err(bad(&format!("{f:?} is not a shard file name")));
            }
            let p = dir.join(&f);
            if !p.is_file() {
                return Err(bad(&format!(
                    "shard {f} is missing (an interrupted download?)"
                )));
            }
            Ok(p)
        })
        .collect()
}

/// A short, cheap fingerprint of a model (SHA-256 of the UNet weights' size and first MiB),
/// shown as "Model hash" in the PNG parameters.
pub fn quick_hash(path: &std::path::Path) -> String {
    use sha2::Digest;
    use std::io::Read;
    let dir = path;
    // A diffusers folder: its UNet weights (every shard: size and first MiB each, which for one
    // file is what it always was); a single file: itself.
    let files = weights_in(&dir.join("unet"), "diffusion_pytorch_model.safetensors")
        .unwrap_or_else(|_| vec![dir.to_path_buf()]);
    let mut h = sha2::Sha256::new();
    for file in files {
        if let Ok((f, len)) = pictor_core::files::open_regular(&file) {
            h.update(len.to_le_bytes());
            let mut buf = Vec::new();
            let _ = f.take(1 << 20).read_to_end(&mut buf);
            h.update(&buf);
        }
    }
    hex::encode(&h.finalize()[..5])
}
