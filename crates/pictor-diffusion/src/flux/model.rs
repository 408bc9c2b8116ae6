//! The FLUX.1 flow-matching transformer (19 double-stream and 38 single-stream blocks in the
//! real models), under Black Forest Labs' weight names.
//!
//! Vendored from candle-transformers 0.11's `models/flux/model.rs` (MIT OR Apache-2.0, the
//! candle authors; itself after BFL's `flux/model.py`) and changed for parity with diffusers'
//! `FluxTransformer2DModel` and for Pictor:
//! - every linear layer is a [`QLinear`]: float32 weights kept transposed, or GGUF-quantised
//!   ones multiplied in place (candle's had a separate quantised copy of the model);
//! - the rotary embedding's angles are computed in float64 on the host, as diffusers does
//!   (`freqs_dtype=torch.float64`), then rounded to float32 (candle computed them in float32);
//! - the sinusoidal timestep embedding is computed in diffusers' order of float32 operations;
//! - the attention is the engine's (blocked on the CPU, [`crate::net::attention::scaled_dot_product`]);
//! - shapes are checked against the configuration when the weights are read.

use candle::{D, Device, IndexOp, Module, Result, Tensor};
use serde_json::Value;

use super::weights::{QLinear, WeightMap};
use crate::DiffusionError;

/// The transformer's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct FluxConfig {
    /// Packed latent channels (16 latent channels × 2 × 2).
    pub in_channels: usize,
    /// The pooled CLIP vector's width (768).
    pub vec_in_dim: usize,
    /// The T5 embeddings' width (4096).
    pub context_in_dim: usize,
    pub hidden_size: usize,
    pub mlp_ratio: f64,
    pub num_heads: usize,
    pub depth: usize,
    pub depth_single_blocks: usize,
    pub axes_dim: Vec<usize>,
    pub theta: usize,
    /// FLUX.1-dev's distilled guidance input (schnell has none).
    pub guidance_embed: bool,
}

impl FluxConfig {
    /// FLUX.1-dev / FLUX.1-schnell at full size (`guidance_embed`: dev).
    pub fn flux1(guidance_embed: bool) -> FluxConfig {
        FluxConfig {
            in_channels: 64,
            vec_in_dim: 768,
            context_in_dim: 4096,
            hidden_size: 3072,
            mlp_ratio: 4.0,
            num_heads: 24,
            depth: 19,
            depth_single_blocks: 38,
            axes_dim: vec![16, 56, 56],
            theta: 10_000,
            guidance_embed,
        }
    }

    /// From diffusers' `transformer/config.json`.
    pub fn from_diffusers(v: &Value) -> std::result::Result<FluxConfig, DiffusionError> {
        const F: &str = "transformer/config.json";
        let n = |k: &str, default: Option<usize>| -> std::result::Result<usize, DiffusionError> {
            match v.get(k).and_then(Value::as_u64) {
                Some(x) if x > 0 && x < 1 << 20 => Ok(x as usize),
                Some(_) => Err(DiffusionError::Model(format!("{F}: `{k}` out of range"))),
                None => default.ok_or_else(|| DiffusionError::Model(format!("{F}: no `{k}`"))),
            }
        };
        if n("patch_size", Some(1))? != 1 {
            return Err(DiffusionError::Model(format!(
                "{F}: only patch_size 1 is supported"
            )));
        }
        let in_channels = n("in_channels", Some(64))?;
        if let Some(out) = v.get("out_channels").and_then(Value::as_u64)
            && out as usize != in_channels
        {
            return Err(DiffusionError::Model(format!(
                "{F}: out_channels {out} differs from in_channels {in_channels}"
            )));
        }
        let heads = n("num_attention_heads", Some(24))?;
        let head_dim = n("attention_head_dim", Some(128))?;
        let axes_dim: Vec<usize> = match v.get("axes_dims_rope").and_then(Value::as_array) {
            Some(a) => a
                .iter()
                .map(|x| x.as_u64().map(|x| x as usize))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| DiffusionError::Model(format!("{F}: bad axes_dims_rope")))?,
            None => vec![16, 56, 56],
        };
        if axes_dim.len() != 3
            || axes_dim.iter().sum::<usize>() != head_dim
            || axes_dim.iter().any(|d| d % 2 == 1)
        {
            return Err(DiffusionError::Model(format!(
                "{F}: axes_dims_rope {axes_dim:?} must be 3 even sizes summing to attention_head_dim {head_dim}"
            )));
        }
        Ok(FluxConfig {
            in_channels,
            vec_in_dim: n("pooled_projection_dim", Some(768))?,
            context_in_dim: n("joint_attention_dim", Some(4096))?,
            hidden_size: heads * head_dim,
            mlp_ratio: 4.0,
            num_heads: heads,
            depth: n("num_layers", Some(19))?,
            depth_single_blocks: n("num_single_layers", Some(38))?,
            axes_dim,
            theta: 10_000,
            guidance_embed: v
                .get("guidance_embeds")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }

    /// The shape of a BFL-named state dict (ComfyUI single files, GGUF), read off its tensors.
    pub fn from_bfl_names(w: &WeightMap) -> std::result::Result<FluxConfig, DiffusionError> {
        let count = |prefix: &str| {
            w.names()
                .filter_map(|n| {
                    n.strip_prefix(prefix)?
                        .split('.')
                        .next()?
                        .parse::<usize>()
                        .ok()
                })
                .max()
                .map_or(0, |m| m + 1)
        };
        let dims = |name: &str| {
            w.dims_of(name)
                .ok_or_else(|| DiffusionError::Model(format!("FLUX transformer: no `{name}`")))
        };
        let img_in = dims("img_in.weight")?;
        let txt_in = dims("txt_in.weight")?;
        let vec_in = dims("vector_in.in_layer.weight")?;
        let (hidden, in_channels) = (img_in[0], img_in[1]);
        let head_dim = dims("double_blocks.0.img_attn.norm.query_norm.scale")
            .or_else(|_| dims("single_blocks.0.norm.query_norm.scale"))?[0];
        if head_dim == 0 || hidden % head_dim != 0 {
            return Err(DiffusionError::Model(
                "FLUX transformer: bad head size".into(),
            ));
        }
        // The rotary axes are not in the weights: BFL's for its 128-wide heads; a model of
        // another width needs its configuration (a diffusers folder's transformer/config.json).
        if head_dim != 128 {
            return Err(DiffusionError::Model(format!(
                "FLUX transformer with {head_dim}-wide heads: its rotary axes need a transformer/config.json"
            )));
        }
        let axes_dim = vec![16, 56, 56];
        Ok(FluxConfig {
            in_channels,
            vec_in_dim: vec_in[1],
            context_in_dim: txt_in[1],
            hidden_size: hidden,
            mlp_ratio: 4.0,
            num_heads: hidden / head_dim,
            depth: count("double_blocks."),
            depth_single_blocks: count("single_blocks."),
            axes_dim,
            theta: 10_000,
            guidance_embed: w.contains("guidance_in.in_layer.weight"),
        })
    }

    fn mlp_size(&self) -> usize {
        (self.hidden_size as f64 * self.mlp_ratio) as usize
    }

    fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }
}

/// Every tensor of a BFL-named transformer of this shape, with its shape (what
/// [`Flux::new`] reads; for benchmarks and tests that make weights).
pub fn bfl_shapes(cfg: &FluxConfig) -> Vec<(String, Vec<usize>)> {
    let (h, mlp, hd) = (cfg.hidden_size, cfg.mlp_size(), cfg.head_dim());
    let mut s = Vec::new();
    let mut lin = |name: String, i: usize, o: usize| {
        s.push((format!("{name}.weight"), vec![o, i]));
        s.push((format!("{name}.bias"), vec![o]));
    };
    lin("img_in".into(), cfg.in_channels, h);
    lin("txt_in".into(), cfg.context_in_dim, h);
    let mut embedders = vec![("time_in", 256), ("vector_in", cfg.vec_in_dim)];
    if cfg.guidance_embed {
        embedders.push(("guidance_in", 256));
    }
    for (e, i) in embedders {
        lin(format!("{e}.in_layer"), i, h);
        lin(format!("{e}.out_layer"), h, h);
    }
    for b in 0..cfg.depth {
        for st in ["img", "txt"] {
            let d = format!("double_blocks.{b}.{st}");
            lin(format!("{d}_mod.lin"), h, 6 * h);
            lin(format!("{d}_attn.qkv"), h, 3 * h);
            lin(format!("{d}_attn.proj"), h, h);
            lin(format!("{d}_mlp.0"), h, mlp);
            lin(format!("{d}_mlp.2"), mlp, h);
        }
    }
    for b in 0..cfg.depth_single_blocks {
        let d = format!("single_blocks.{b}");
        lin(format!("{d}.linear1"), h, 3 * h + mlp);
        lin(format!("{d}.linear2"), h + mlp, h);
        lin(format!("{d}.modulation.lin"), h, 3 * h);
    }
    lin("final_layer.adaLN_modulation.1".into(), h, 2 * h);
    lin("final_layer.linear".into(), h, cfg.in_channels);
    for b in 0..cfg.depth {
        for st in ["img", "txt"] {
            for n in ["query_norm", "key_norm"] {
                s.push((
                    format!("double_blocks.{b}.{st}_attn.norm.{n}.scale"),
                    vec![hd],
                ));
            }
        }
    }
    for b in 0..cfg.depth_single_blocks {
        for n in ["query_norm", "key_norm"] {
            s.push((format!("single_blocks.{b}.norm.{n}.scale"), vec![hd]));
        }
    }
    s
}

/// The rotary embedding for position ids `(seq, 3)`: `(cos, sin)`, each `(seq, head_dim)` with
/// every angle repeated for its pair (diffusers' `repeat_interleave_real`).
pub fn rope(
    ids: &[[f32; 3]],
    axes_dim: &[usize],
    theta: usize,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let head_dim: usize = axes_dim.iter().sum();
    let mut cos = Vec::with_capacity(ids.len() * head_dim);
    let mut sin = Vec::with_capacity(ids.len() * head_dim);
    for id in ids {
        for (axis, &dim) in axes_dim.iter().enumerate() {
            let pos = id[axis] as f64;
            for j in 0..dim / 2 {
                let freq = 1.0 / (theta as f64).powf((2 * j) as f64 / dim as f64);
                let angle = pos * freq;
                let (s, c) = angle.sin_cos();
                cos.extend([c as f32, c as f32]);
                sin.extend([s as f32, s as f32]);
            }
        }
    }
    Ok((
        Tensor::from_vec(cos, (ids.len(), head_dim), device)?,
        Tensor::from_vec(sin, (ids.len(), head_dim), device)?,
    ))
}

/// `x · cos + rotate(x) · sin` on `(batch, heads, seq, head_dim)`, pairs `(x₀, x₁)` rotated to
/// `(-x₁, x₀)`.
fn apply_rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (b, h, l, d) = x.dims4()?;
    let pairs = x.reshape((b, h, l, d / 2, 2))?;
    let x0 = pairs.narrow(D::Minus1, 0, 1)?;
    let x1 = pairs.narrow(D::Minus1, 1, 1)?;
    let rotated = Tensor::cat(&[&x1.neg()?, &x0], D::Minus1)?.reshape((b, h, l, d))?;
    x.broadcast_mul(cos)?.add(&rotated.broadcast_mul(sin)?)
}

/// diffusers' `get_timestep_embedding(t · 1000, 256, flip_sin_to_cos=True)` in its float32
/// order of operations: `[cos, sin]`.
pub fn timestep_embedding(t: f32, dim: usize, device: &Device) -> Result<Tensor> {
    timestep_embedding_scaled(t * 1000.0, dim, device)
}

/// The same for a timestep already on diffusers' 0..1000 scale (SD3 passes `sigma · 1000`).
pub fn timestep_embedding_scaled(t: f32, dim: usize, device: &Device) -> Result<Tensor> {
    let half = dim / 2;
    let mut out = vec![0f32; dim];
    for j in 0..half {
        let exponent = (-(10000f64.ln()) as f32 * j as f32) / half as f32;
        let arg = t * exponent.exp();
        out[j] = arg.cos();
        out[half + j] = arg.sin();
    }
    Tensor::from_vec(out, (1, dim), device)
}

#[derive(Debug, Clone)]
pub(crate) struct RmsNorm {
    weight: Tensor,
}

impl RmsNorm {
    pub(crate) fn new(w: &mut WeightMap, name: &str, dim: usize) -> Result<Self> {
        Ok(Self {
            weight: w.tensor(name, &[dim])?,
        })
    }

    pub(crate) fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        candle_nn::ops::rms_norm(&xs.contiguous()?, &self.weight, 1e-6)
    }
}

#[derive(Debug, Clone)]
struct MlpEmbedder {
    in_layer: QLinear,
    out_layer: QLinear,
}

impl MlpEmbedder {
    fn new(w: &mut WeightMap, p: &str, in_sz: usize, h: usize) -> Result<Self> {
        Ok(Self {
            in_layer: w.linear(&format!("{p}.in_layer"), in_sz, h, true)?,
            out_layer: w.linear(&format!("{p}.out_layer"), h, h, true)?,
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        self.out_layer.forward(&self.in_layer.forward(xs)?.silu()?)
    }
}

/// One modulation: `(shift, scale, gate)`, each `(batch, 1, hidden)`.
struct Mod {
    shift: Tensor,
    scale: Tensor,
    gate: Tensor,
}

impl Mod {
    /// `LayerNorm(xs) · (1 + scale) + shift`, fused.
    fn norm_modulate(&self, xs: &Tensor) -> Result<Tensor> {
        crate::net::norm::modulated_layer_norm(xs, &self.shift, &self.scale)
    }
}

/// `n` modulations from `silu(vec) · W + b`.
fn modulations(lin: &QLinear, vec_: &Tensor, n: usize) -> Result<Vec<Mod>> {
    let ys = lin
        .forward(&vec_.silu()?)?
        .unsqueeze(1)?
        .chunk(3 * n, D::Minus1)?;
    Ok(ys
        .chunks(3)
        .map(|c| Mod {
            shift: c[0].clone(),
            scale: c[1].clone(),
            gate: c[2].clone(),
        })
        .collect())
}

#[derive(Debug, Clone)]
struct StreamAttention {
    qkv: QLinear,
    query_norm: RmsNorm,
    key_norm: RmsNorm,
    proj: QLinear,
}

impl StreamAttention {
    fn new(w: &mut WeightMap, p: &str, cfg: &FluxConfig) -> Result<Self> {
        let h = cfg.hidden_size;
        Ok(Self {
            qkv: w.linear(&format!("{p}.qkv"), h, 3 * h, true)?,
            query_norm: RmsNorm::new(w, &format!("{p}.norm.query_norm.scale"), cfg.head_dim())?,
            key_norm: RmsNorm::new(w, &format!("{p}.norm.key_norm.scale"), cfg.head_dim())?,
            proj: w.linear(&format!("{p}.proj"), h, h, true)?,
        })
    }
}

/// Splits `(b, l, 3 · heads · d)` into normalised `q`, `k` and `v`, each `(b, heads, l, d)`.
fn split_qkv(
    qkv: &Tensor,
    heads: usize,
    qn: &RmsNorm,
    kn: &RmsNorm,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (b, l, _) = qkv.dims3()?;
    let qkv = qkv.reshape((b, l, 3, heads, ()))?;
    let q = qkv.i((.., .., 0))?.transpose(1, 2)?;
    let k = qkv.i((.., .., 1))?.transpose(1, 2)?;
    let v = qkv.i((.., .., 2))?.transpose(1, 2)?.contiguous()?;
    Ok((qn.forward(&q)?, kn.forward(&k)?, v))
}

/// Attention over the joint sequence with the rotary embedding: `(b, l, heads · d)`.
fn attention(q: &Tensor, k: &Tensor, v: &Tensor, pe: &(Tensor, Tensor)) -> Result<Tensor> {
    let (b, h, l, d) = q.dims4()?;
    let q = apply_rope(q, &pe.0, &pe.1)?.reshape((b * h, l, d))?;
    let k = apply_rope(k, &pe.0, &pe.1)?.reshape((b * h, l, d))?;
    let v = v.reshape((b * h, l, d))?;
    let out = crate::net::attention::scaled_dot_product(&q, &k, &v, 1.0 / (d as f64).sqrt())?;
    out.reshape((b, h, l, d))?
        .transpose(1, 2)?
        .reshape((b, l, h * d))
}

#[derive(Debug, Clone)]
struct Mlp {
    lin1: QLinear,
    lin2: QLinear,
}

impl Mlp {
    fn new(w: &mut WeightMap, p: &str, h: usize, mlp: usize) -> Result<Self> {
        Ok(Self {
            lin1: w.linear(&format!("{p}.0"), h, mlp, true)?,
            lin2: w.linear(&format!("{p}.2"), mlp, h, true)?,
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        // GELU, tanh approximation (diffusers' "gelu-approximate")
        self.lin2
            .forward(&crate::net::attention::gelu_tanh(&self.lin1.forward(xs)?)?)
    }
}

#[derive(Debug, Clone)]
struct DoubleStreamBlock {
    img_mod: QLinear,
    img_attn: StreamAttention,
    img_mlp: Mlp,
    txt_mod: QLinear,
    txt_attn: StreamAttention,
    txt_mlp: Mlp,
    heads: usize,
}

impl DoubleStreamBlock {
    fn new(w: &mut WeightMap, p: &str, cfg: &FluxConfig) -> Result<Self> {
        let h = cfg.hidden_size;
        Ok(Self {
            img_mod: w.linear(&format!("{p}.img_mod.lin"), h, 6 * h, true)?,
            img_attn: StreamAttention::new(w, &format!("{p}.img_attn"), cfg)?,
            img_mlp: Mlp::new(w, &format!("{p}.img_mlp"), h, cfg.mlp_size())?,
            txt_mod: w.linear(&format!("{p}.txt_mod.lin"), h, 6 * h, true)?,
            txt_attn: StreamAttention::new(w, &format!("{p}.txt_attn"), cfg)?,
            txt_mlp: Mlp::new(w, &format!("{p}.txt_mlp"), h, cfg.mlp_size())?,
            heads: cfg.num_heads,
        })
    }

    fn forward(
        &self,
        img: &Tensor,
        txt: &Tensor,
        vec_: &Tensor,
        pe: &(Tensor, Tensor),
    ) -> Result<(Tensor, Tensor)> {
        let im = modulations(&self.img_mod, vec_, 2)?;
        let tm = modulations(&self.txt_mod, vec_, 2)?;
        let img_in = im[0].norm_modulate(img)?;
        let (iq, ik, iv) = split_qkv(
            &self.img_attn.qkv.forward(&img_in)?,
            self.heads,
            &self.img_attn.query_norm,
            &self.img_attn.key_norm,
        )?;
        let txt_in = tm[0].norm_modulate(txt)?;
        let (tq, tk, tv) = split_qkv(
            &self.txt_attn.qkv.forward(&txt_in)?,
            self.heads,
            &self.txt_attn.query_norm,
            &self.txt_attn.key_norm,
        )?;
        let q = Tensor::cat(&[tq, iq], 2)?;
        let k = Tensor::cat(&[tk, ik], 2)?;
        let v = Tensor::cat(&[tv, iv], 2)?;
        let attn = attention(&q, &k, &v, pe)?;
        let n_txt = txt.dim(1)?;
        let txt_attn = attn.narrow(1, 0, n_txt)?;
        let img_attn = attn.narrow(1, n_txt, attn.dim(1)? - n_txt)?;

        let img = (img
            + im[0]
                .gate
                .broadcast_mul(&self.img_attn.proj.forward(&img_attn)?)?)?;
        let img_ff = self.img_mlp.forward(&im[1].norm_modulate(&img)?)?;
        let img = (&img + im[1].gate.broadcast_mul(&img_ff)?)?;

        let txt = (txt
            + tm[0]
                .gate
                .broadcast_mul(&self.txt_attn.proj.forward(&txt_attn)?)?)?;
        let txt_ff = self.txt_mlp.forward(&tm[1].norm_modulate(&txt)?)?;
        let txt = (&txt + tm[1].gate.broadcast_mul(&txt_ff)?)?;
        Ok((img, txt))
    }
}

#[derive(Debug, Clone)]
struct SingleStreamBlock {
    linear1: QLinear,
    linear2: QLinear,
    query_norm: RmsNorm,
    key_norm: RmsNorm,
    modulation: QLinear,
    hidden: usize,
    mlp: usize,
    heads: usize,
}

impl SingleStreamBlock {
    fn new(w: &mut WeightMap, p: &str, cfg: &FluxConfig) -> Result<Self> {
        let (h, mlp) = (cfg.hidden_size, cfg.mlp_size());
        Ok(Self {
            linear1: w.linear(&format!("{p}.linear1"), h, 3 * h + mlp, true)?,
            linear2: w.linear(&format!("{p}.linear2"), h + mlp, h, true)?,
            query_norm: RmsNorm::new(w, &format!("{p}.norm.query_norm.scale"), cfg.head_dim())?,
            key_norm: RmsNorm::new(w, &format!("{p}.norm.key_norm.scale"), cfg.head_dim())?,
            modulation: w.linear(&format!("{p}.modulation.lin"), h, 3 * h, true)?,
            hidden: h,
            mlp,
            heads: cfg.num_heads,
        })
    }

    fn forward(&self, xs: &Tensor, vec_: &Tensor, pe: &(Tensor, Tensor)) -> Result<Tensor> {
        let m = modulations(&self.modulation, vec_, 1)?;
        let x_mod = self.linear1.forward(&m[0].norm_modulate(xs)?)?;
        let qkv = x_mod.narrow(D::Minus1, 0, 3 * self.hidden)?;
        let (q, k, v) = split_qkv(&qkv, self.heads, &self.query_norm, &self.key_norm)?;
        let mlp = x_mod.narrow(D::Minus1, 3 * self.hidden, self.mlp)?;
        let attn = attention(&q, &k, &v, pe)?;
        let out = self.linear2.forward(&Tensor::cat(
            &[attn, crate::net::attention::gelu_tanh(&mlp)?],
            2,
        )?)?;
        xs + m[0].gate.broadcast_mul(&out)?
    }
}

/// The whole transformer.
#[derive(Debug, Clone)]
pub struct Flux {
    img_in: QLinear,
    txt_in: QLinear,
    time_in: MlpEmbedder,
    vector_in: MlpEmbedder,
    guidance_in: Option<MlpEmbedder>,
    double_blocks: Vec<DoubleStreamBlock>,
    single_blocks: Vec<SingleStreamBlock>,
    final_norm_mod: QLinear,
    final_linear: QLinear,
    cfg: FluxConfig,
}

impl Flux {
    /// Builds the network from BFL-named weights (every one must be used).
    pub fn new(cfg: &FluxConfig, w: &mut WeightMap) -> std::result::Result<Flux, DiffusionError> {
        let build = |w: &mut WeightMap| -> Result<Flux> {
            let h = cfg.hidden_size;
            let mut double_blocks = Vec::with_capacity(cfg.depth);
            for i in 0..cfg.depth {
                double_blocks.push(DoubleStreamBlock::new(
                    w,
                    &format!("double_blocks.{i}"),
                    cfg,
                )?);
            }
            let mut single_blocks = Vec::with_capacity(cfg.depth_single_blocks);
            for i in 0..cfg.depth_single_blocks {
                single_blocks.push(SingleStreamBlock::new(
                    w,
                    &format!("single_blocks.{i}"),
                    cfg,
                )?);
            }
            Ok(Flux {
                img_in: w.linear("img_in", cfg.in_channels, h, true)?,
                txt_in: w.linear("txt_in", cfg.context_in_dim, h, true)?,
                time_in: MlpEmbedder::new(w, "time_in", 256, h)?,
                vector_in: MlpEmbedder::new(w, "vector_in", cfg.vec_in_dim, h)?,
                guidance_in: if cfg.guidance_embed {
                    Some(MlpEmbedder::new(w, "guidance_in", 256, h)?)
                } else {
                    None
                },
                double_blocks,
                single_blocks,
                final_norm_mod: w.linear("final_layer.adaLN_modulation.1", h, 2 * h, true)?,
                final_linear: w.linear("final_layer.linear", h, cfg.in_channels, true)?,
                cfg: cfg.clone(),
            })
        };
        let flux = build(w).map_err(|e| DiffusionError::Model(format!("FLUX transformer: {e}")))?;
        w.check_used()?;
        Ok(flux)
    }

    pub fn config(&self) -> &FluxConfig {
        &self.cfg
    }

    /// The rotary embedding for these text and image position ids.
    pub fn positions(
        &self,
        txt_ids: &[[f32; 3]],
        img_ids: &[[f32; 3]],
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let ids: Vec<[f32; 3]> = txt_ids.iter().chain(img_ids).copied().collect();
        rope(&ids, &self.cfg.axes_dim, self.cfg.theta, device)
    }

    /// The velocity for packed latents `img` `(1, seq, in_channels)` at time `t` (sigma, in
    /// 0..1), text embeddings `txt` `(1, len, context_in_dim)`, the pooled CLIP vector `y`
    /// `(1, vec_in_dim)` and, for guidance-distilled models, the guidance scale.
    pub fn forward(
        &self,
        img: &Tensor,
        txt: &Tensor,
        y: &Tensor,
        t: f32,
        guidance: Option<f32>,
        pe: &(Tensor, Tensor),
    ) -> Result<Tensor> {
        let dev = img.device();
        let mut txt = self.txt_in.forward(txt)?;
        let mut img = self.img_in.forward(img)?;
        let mut vec_ = self.time_in.forward(&timestep_embedding(t, 256, dev)?)?;
        if let Some(g_in) = &self.guidance_in {
            let g = guidance.unwrap_or(3.5);
            vec_ = (vec_ + g_in.forward(&timestep_embedding(g, 256, dev)?)?)?;
        }
        let vec_ = (vec_ + self.vector_in.forward(y)?)?;
        for block in &self.double_blocks {
            (img, txt) = block.forward(&img, &txt, &vec_, pe)?;
        }
        let n_txt = txt.dim(1)?;
        let mut xs = Tensor::cat(&[&txt, &img], 1)?;
        for block in &self.single_blocks {
            xs = block.forward(&xs, &vec_, pe)?;
        }
        let img = xs.i((.., n_txt..))?;
        let m = self
            .final_norm_mod
            .forward(&vec_.silu()?)?
            .chunk(2, D::Minus1)?;
        let (shift, scale) = (m[0].unsqueeze(1)?, m[1].unsqueeze(1)?);
        let img = crate::net::norm::modulated_layer_norm(&img, &shift, &scale)?;
        self.final_linear.forward(&img)
    }
}
