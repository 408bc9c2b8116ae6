//! The MMDiT of Stable Diffusion 3 / 3.5 (and SD 3.5 Medium's MMDiT-X blocks, which add an
//! image-only attention), under Stability AI's weight names (`joint_blocks.N.x_block.attn.qkv`…,
//! as the `sd3.5_*.safetensors` single files and city96's GGUFs name them).
//!
//! Vendored from candle-transformers 0.11's `models/mmdit/` (MIT OR Apache-2.0, the candle
//! authors; itself after ComfyUI's `mmdit.py` and Stability AI's `mmditx.py`) and changed for
//! parity with diffusers' `SD3Transformer2DModel` and for Pictor:
//! - every linear layer is a [`QLinear`] (float32, or GGUF-quantised multiplied in place);
//! - the sinusoidal timestep embedding stays in float32 in diffusers' order of operations
//!   (candle's rounded it to float16);
//! - the patch embedding is the 2×2 convolution as a product over 2×2 patches;
//! - any head count (candle's tied it to the depth, as Stability AI's released models do),
//!   the attention is the engine's ([`crate::net::attention::scaled_dot_product`]), batches of
//!   any size (the prompt and the negative prompt in one pass);
//! - shapes are checked against the configuration when the weights are read.

use candle::{D, Module, Result, Tensor};
use serde_json::Value;

use crate::DiffusionError;
use crate::flux::model::{RmsNorm, timestep_embedding_scaled};
use crate::flux::weights::{Joined, QLinear, Weight, WeightMap, apply_plan};
use crate::net::norm::modulated_layer_norm;

/// The transformer's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Sd3Config {
    pub patch_size: usize,
    /// Latent channels in and out (16).
    pub in_channels: usize,
    pub out_channels: usize,
    pub hidden_size: usize,
    pub num_heads: usize,
    pub depth: usize,
    /// The side of the learnt position table (cropped from its centre to the picture).
    pub pos_embed_max_size: usize,
    /// The joint text embeddings' width (T5's 4096).
    pub context_in_dim: usize,
    /// The pooled CLIP vectors' width (768 + 1280).
    pub pooled_dim: usize,
    /// RMS norms on the queries and keys (SD 3.5).
    pub qk_norm: bool,
    /// Blocks with a second, image-only attention (SD 3.5 Medium: 0..=12).
    pub dual_layers: Vec<usize>,
}

fn model_err(e: impl std::fmt::Display) -> DiffusionError {
    DiffusionError::Model(format!("SD3 transformer: {e}"))
}

impl Sd3Config {
    /// SD 3.5 Medium at full size.
    pub fn sd35_medium() -> Sd3Config {
        Sd3Config {
            patch_size: 2,
            in_channels: 16,
            out_channels: 16,
            hidden_size: 24 * 64,
            num_heads: 24,
            depth: 24,
            pos_embed_max_size: 384,
            context_in_dim: 4096,
            pooled_dim: 2048,
            qk_norm: true,
            dual_layers: (0..=12).collect(),
        }
    }

    /// SD 3.5 Large (and Large Turbo) at full size.
    pub fn sd35_large() -> Sd3Config {
        Sd3Config {
            hidden_size: 38 * 64,
            num_heads: 38,
            depth: 38,
            pos_embed_max_size: 192,
            dual_layers: Vec::new(),
            ..Sd3Config::sd35_medium()
        }
    }

    /// From diffusers' `transformer/config.json`.
    pub fn from_diffusers(v: &Value) -> std::result::Result<Sd3Config, DiffusionError> {
        const F: &str = "transformer/config.json";
        let n = |k: &str, default: usize| -> std::result::Result<usize, DiffusionError> {
            match v.get(k) {
                None | Some(Value::Null) => Ok(default),
                Some(x) => match x.as_u64() {
                    Some(x) if x > 0 && x < 1 << 20 => Ok(x as usize),
                    _ => Err(DiffusionError::Model(format!("{F}: `{k}` out of range"))),
                },
            }
        };
        let heads = n("num_attention_heads", 18)?;
        let hidden = heads * n("attention_head_dim", 64)?;
        if n("caption_projection_dim", hidden)? != hidden {
            return Err(DiffusionError::Model(format!(
                "{F}: caption_projection_dim must equal num_attention_heads × attention_head_dim"
            )));
        }
        let depth = n("num_layers", 18)?;
        let dual_layers = match v.get("dual_attention_layers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| x.as_u64().map(|x| x as usize).filter(|&x| x < depth))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| DiffusionError::Model(format!("{F}: bad dual_attention_layers")))?,
            Some(_) => {
                return Err(DiffusionError::Model(format!(
                    "{F}: bad dual_attention_layers"
                )));
            }
        };
        let qk_norm = match v.get("qk_norm") {
            None | Some(Value::Null) => false,
            Some(Value::String(s)) if s == "rms_norm" => true,
            Some(other) => {
                return Err(DiffusionError::Model(format!(
                    "{F}: qk_norm {other} is not supported"
                )));
            }
        };
        let in_channels = n("in_channels", 16)?;
        let cfg = Sd3Config {
            patch_size: n("patch_size", 2)?,
            in_channels,
            out_channels: n("out_channels", in_channels)?,
            hidden_size: hidden,
            num_heads: heads,
            depth,
            pos_embed_max_size: n("pos_embed_max_size", 96)?,
            context_in_dim: n("joint_attention_dim", 4096)?,
            pooled_dim: n("pooled_projection_dim", 2048)?,
            qk_norm,
            dual_layers,
        };
        cfg.check()?;
        Ok(cfg)
    }

    /// The shape of a Stability AI-named state dict (single files, GGUF), read off its tensors.
    /// The head width is the q/k norms' size when there are norms, else 64 (every released
    /// SD3 model's).
    pub fn from_sai_names(w: &WeightMap) -> std::result::Result<Sd3Config, DiffusionError> {
        let dims = |name: &str| {
            w.dims_of(name)
                .ok_or_else(|| model_err(format!("no `{name}`")))
        };
        let depth = w
            .names()
            .filter_map(|n| {
                n.strip_prefix("joint_blocks.")?
                    .split('.')
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .max()
            .map_or(0, |m| m + 1);
        let x_emb = dims("x_embedder.proj.weight")?;
        if x_emb.len() != 4 || x_emb[2] != x_emb[3] {
            return Err(model_err(
                "x_embedder.proj.weight is not a square convolution",
            ));
        }
        let hidden = x_emb[0];
        let pos = dims("pos_embed")?;
        let table = pos.get(1).copied().unwrap_or(0);
        let side = (table as f64).sqrt().round() as usize;
        if side * side != table {
            return Err(model_err("pos_embed is not a square table"));
        }
        let qk_norm = w.contains("joint_blocks.0.x_block.attn.ln_q.weight");
        let head_dim = if qk_norm {
            dims("joint_blocks.0.x_block.attn.ln_q.weight")?[0]
        } else {
            64
        };
        if head_dim == 0 || !hidden.is_multiple_of(head_dim) {
            return Err(model_err("bad head size"));
        }
        let final_out = dims("final_layer.linear.weight")?[0];
        let p2 = x_emb[2] * x_emb[2];
        let cfg = Sd3Config {
            patch_size: x_emb[2],
            in_channels: x_emb[1],
            out_channels: final_out / p2.max(1),
            hidden_size: hidden,
            num_heads: hidden / head_dim,
            depth,
            pos_embed_max_size: side,
            context_in_dim: dims("context_embedder.weight")?[1],
            pooled_dim: dims("y_embedder.mlp.0.weight")?[1],
            qk_norm,
            dual_layers: (0..depth)
                .filter(|i| w.contains(&format!("joint_blocks.{i}.x_block.attn2.qkv.weight")))
                .collect(),
        };
        cfg.check()?;
        Ok(cfg)
    }

    fn check(&self) -> std::result::Result<(), DiffusionError> {
        if self.patch_size != 2 {
            return Err(model_err("only patch size 2 is supported"));
        }
        if self.depth < 1 || self.num_heads == 0 || !self.hidden_size.is_multiple_of(self.num_heads)
        {
            return Err(model_err("bad depth or head count"));
        }
        if self.dual_layers.contains(&(self.depth - 1)) {
            return Err(model_err("the last block cannot have a second attention"));
        }
        Ok(())
    }

    fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }

    fn patch_dim(&self) -> usize {
        self.in_channels * self.patch_size * self.patch_size
    }
}

/// Every tensor of a Stability AI-named transformer of this shape, with its shape (what
/// [`Mmdit::new`] reads; for benchmarks and tests that make weights).
pub fn sai_shapes(cfg: &Sd3Config) -> Vec<(String, Vec<usize>)> {
    let (h, hd, p) = (cfg.hidden_size, cfg.head_dim(), cfg.patch_size);
    let mut s = vec![
        (
            "pos_embed".to_string(),
            vec![1, cfg.pos_embed_max_size * cfg.pos_embed_max_size, h],
        ),
        (
            "x_embedder.proj.weight".into(),
            vec![h, cfg.in_channels, p, p],
        ),
        ("x_embedder.proj.bias".into(), vec![h]),
    ];
    let mut lin = |name: String, i: usize, o: usize| {
        s.push((format!("{name}.weight"), vec![o, i]));
        s.push((format!("{name}.bias"), vec![o]));
    };
    lin("t_embedder.mlp.0".into(), 256, h);
    lin("t_embedder.mlp.2".into(), h, h);
    lin("y_embedder.mlp.0".into(), cfg.pooled_dim, h);
    lin("y_embedder.mlp.2".into(), h, h);
    lin("context_embedder".into(), cfg.context_in_dim, h);
    for i in 0..cfg.depth {
        let last = i + 1 == cfg.depth;
        let dual = cfg.dual_layers.contains(&i);
        for (part, mods) in [
            ("x_block", if dual { 9 } else { 6 }),
            ("context_block", if last { 2 } else { 6 }),
        ] {
            let b = format!("joint_blocks.{i}.{part}");
            let pre_only = last && part == "context_block";
            lin(format!("{b}.adaLN_modulation.1"), h, mods * h);
            let attns: &[&str] = if part == "x_block" && dual {
                &["attn", "attn2"]
            } else {
                &["attn"]
            };
            for a in attns {
                lin(format!("{b}.{a}.qkv"), h, 3 * h);
                if !pre_only {
                    lin(format!("{b}.{a}.proj"), h, h);
                }
            }
            if !pre_only {
                lin(format!("{b}.mlp.fc1"), h, 4 * h);
                lin(format!("{b}.mlp.fc2"), 4 * h, h);
            }
        }
    }
    lin("final_layer.adaLN_modulation.1".into(), h, 2 * h);
    lin("final_layer.linear".into(), h, p * p * cfg.out_channels);
    if cfg.qk_norm {
        for i in 0..cfg.depth {
            for a in ["x_block.attn", "context_block.attn"]
                .into_iter()
                .chain(cfg.dual_layers.contains(&i).then_some("x_block.attn2"))
            {
                for x in ["q", "k"] {
                    s.push((format!("joint_blocks.{i}.{a}.ln_{x}.weight"), vec![hd]));
                }
            }
        }
    }
    s
}

/// SD 3's layers in Stability AI's layout from diffusers' `SD3Transformer2DModel` modules: q, k,
/// v joined into `qkv`, the halves of the final modulation and of the last block's context
/// modulation swapped.
pub fn sai_plan(cfg: &Sd3Config) -> Vec<Joined> {
    let mut plan = vec![Joined::moved("x_embedder.proj", "pos_embed.proj")];
    for (a, b) in [
        ("t_embedder", "timestep_embedder"),
        ("y_embedder", "text_embedder"),
    ] {
        for (x, y) in [("0", "1"), ("2", "2")] {
            plan.push(Joined::moved(
                format!("{a}.mlp.{x}"),
                format!("time_text_embed.{b}.linear_{y}"),
            ));
        }
    }
    plan.push(Joined::moved("context_embedder", "context_embedder"));
    plan.push(Joined::moved("final_layer.linear", "proj_out"));
    plan.push(Joined::swapped(
        "final_layer.adaLN_modulation.1",
        "norm_out.linear",
    ));
    for i in 0..cfg.depth {
        let (j, b) = (
            format!("joint_blocks.{i}"),
            format!("transformer_blocks.{i}"),
        );
        let qkv = |pre: &str, post: &str| {
            ["q", "k", "v"]
                .map(|x| format!("{b}.{pre}{x}{post}"))
                .to_vec()
        };
        plan.push(Joined::stacked(
            format!("{j}.x_block.attn.qkv"),
            qkv("attn.to_", ""),
        ));
        plan.push(Joined::stacked(
            format!("{j}.context_block.attn.qkv"),
            qkv("attn.add_", "_proj"),
        ));
        let mut moves = vec![
            ("x_block.attn.proj", "attn.to_out.0"),
            ("x_block.adaLN_modulation.1", "norm1.linear"),
            ("x_block.mlp.fc1", "ff.net.0.proj"),
            ("x_block.mlp.fc2", "ff.net.2"),
        ];
        if i + 1 == cfg.depth {
            plan.push(Joined::swapped(
                format!("{j}.context_block.adaLN_modulation.1"),
                format!("{b}.norm1_context.linear"),
            ));
        } else {
            moves.extend([
                ("context_block.adaLN_modulation.1", "norm1_context.linear"),
                ("context_block.attn.proj", "attn.to_add_out"),
                ("context_block.mlp.fc1", "ff_context.net.0.proj"),
                ("context_block.mlp.fc2", "ff_context.net.2"),
            ]);
        }
        if cfg.dual_layers.contains(&i) {
            plan.push(Joined::stacked(
                format!("{j}.x_block.attn2.qkv"),
                qkv("attn2.to_", ""),
            ));
            moves.push(("x_block.attn2.proj", "attn2.to_out.0"));
        }
        for (dst, src) in moves {
            plan.push(Joined::moved(format!("{j}.{dst}"), format!("{b}.{src}")));
        }
    }
    plan
}

/// Renames a diffusers `SD3Transformer2DModel` state dict to Stability AI's names, the inverse
/// of diffusers' `convert_sd3_transformer_checkpoint_to_diffusers` ([`sai_plan`], the position
/// table and the q/k norms).
pub fn diffusers_to_sai(
    w: &mut WeightMap,
    cfg: &Sd3Config,
) -> std::result::Result<(), DiffusionError> {
    let mv = |w: &mut WeightMap, dst: String, src: String| -> Result<()> {
        let t = w.take(&src)?;
        w.insert(dst, t);
        Ok(())
    };
    let run = |w: &mut WeightMap| -> Result<()> {
        mv(w, "pos_embed".into(), "pos_embed.pos_embed".into())?;
        apply_plan(w, &sai_plan(cfg))?;
        if !cfg.qk_norm {
            return Ok(());
        }
        for i in 0..cfg.depth {
            let (j, b) = (
                format!("joint_blocks.{i}"),
                format!("transformer_blocks.{i}"),
            );
            let mut norms = vec![
                ("x_block.attn", "attn.norm_"),
                ("context_block.attn", "attn.norm_added_"),
            ];
            if cfg.dual_layers.contains(&i) {
                norms.push(("x_block.attn2", "attn2.norm_"));
            }
            for (dst, src) in norms {
                for x in ["q", "k"] {
                    mv(
                        w,
                        format!("{j}.{dst}.ln_{x}.weight"),
                        format!("{b}.{src}{x}.weight"),
                    )?;
                }
            }
        }
        Ok(())
    };
    run(w).map_err(model_err)
}

/// `shift, scale` (and a gate) from one modulation.
struct Mod {
    shift: Tensor,
    scale: Tensor,
    gate: Tensor,
}

impl Mod {
    /// `LayerNorm(xs) · (1 + scale) + shift`, fused.
    fn norm_apply(&self, xs: &Tensor) -> Result<Tensor> {
        modulated_layer_norm(xs, &self.shift, &self.scale)
    }
}

/// `silu(c) · W + b` in `n` chunks, each `(batch, 1, hidden)`.
fn chunks(lin: &QLinear, c: &Tensor, n: usize) -> Result<Vec<Tensor>> {
    lin.forward(&c.silu()?)?.unsqueeze(1)?.chunk(n, D::Minus1)
}

struct Attn {
    qkv: QLinear,
    ln_q: Option<RmsNorm>,
    ln_k: Option<RmsNorm>,
    /// Absent on the last block's context side (its attention output is not used).
    proj: Option<QLinear>,
}

impl Attn {
    fn new(w: &mut WeightMap, p: &str, cfg: &Sd3Config, pre_only: bool) -> Result<Attn> {
        let h = cfg.hidden_size;
        let norm = |w: &mut WeightMap, x: &str| -> Result<Option<RmsNorm>> {
            cfg.qk_norm
                .then(|| RmsNorm::new(w, &format!("{p}.ln_{x}.weight"), cfg.head_dim()))
                .transpose()
        };
        Ok(Attn {
            qkv: w.linear(&format!("{p}.qkv"), h, 3 * h, true)?,
            ln_q: norm(w, "q")?,
            ln_k: norm(w, "k")?,
            proj: if pre_only {
                None
            } else {
                Some(w.linear(&format!("{p}.proj"), h, h, true)?)
            },
        })
    }

    /// `(q, k, v)`, each `(batch, heads, len, head_dim)`, q and k normalised.
    fn qkv(&self, xs: &Tensor, heads: usize) -> Result<(Tensor, Tensor, Tensor)> {
        let (b, l, _) = xs.dims3()?;
        let qkv = self.qkv.forward(xs)?.reshape((b, l, 3, heads, ()))?;
        let part = |i: usize, n: &Option<RmsNorm>| -> Result<Tensor> {
            let t = qkv.narrow(2, i, 1)?.squeeze(2)?.transpose(1, 2)?;
            match n {
                Some(n) => n.forward(&t),
                None => t.contiguous(),
            }
        };
        Ok((part(0, &self.ln_q)?, part(1, &self.ln_k)?, part(2, &None)?))
    }

    fn proj(&self, xs: &Tensor) -> Result<Tensor> {
        match &self.proj {
            Some(p) => p.forward(xs),
            None => candle::bail!("no output projection"),
        }
    }
}

/// `softmax(q kᵀ / √d) v` for `(batch, heads, len, d)`, back to `(batch, len, heads · d)`.
fn attention(q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    let (b, h, l, d) = q.dims4()?;
    let m = k.dim(2)?;
    let out = crate::net::attention::scaled_dot_product(
        &q.reshape((b * h, l, d))?,
        &k.reshape((b * h, m, d))?,
        &v.reshape((b * h, m, d))?,
        1.0 / (d as f64).sqrt(),
    )?;
    out.reshape((b, h, l, d))?
        .transpose(1, 2)?
        .reshape((b, l, h * d))
}

struct Mlp {
    fc1: QLinear,
    fc2: QLinear,
}

impl Mlp {
    fn new(w: &mut WeightMap, p: &str, h: usize) -> Result<Mlp> {
        Ok(Mlp {
            fc1: w.linear(&format!("{p}.fc1"), h, 4 * h, true)?,
            fc2: w.linear(&format!("{p}.fc2"), 4 * h, h, true)?,
        })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        // GELU, tanh approximation (diffusers' "gelu-approximate")
        self.fc2
            .forward(&crate::net::attention::gelu_tanh(&self.fc1.forward(xs)?)?)
    }
}

/// One side (image or text) of a joint block.
struct Side {
    modulation: QLinear,
    mods: usize,
    attn: Attn,
    attn2: Option<Attn>,
    mlp: Option<Mlp>,
}

impl Side {
    fn new(
        w: &mut WeightMap,
        p: &str,
        cfg: &Sd3Config,
        pre_only: bool,
        dual: bool,
    ) -> Result<Side> {
        let h = cfg.hidden_size;
        let mods = if pre_only {
            2
        } else if dual {
            9
        } else {
            6
        };
        Ok(Side {
            modulation: w.linear(&format!("{p}.adaLN_modulation.1"), h, mods * h, true)?,
            mods,
            attn: Attn::new(w, &format!("{p}.attn"), cfg, pre_only)?,
            attn2: if dual {
                Some(Attn::new(w, &format!("{p}.attn2"), cfg, false)?)
            } else {
                None
            },
            mlp: if pre_only {
                None
            } else {
                Some(Mlp::new(w, &format!("{p}.mlp"), h)?)
            },
        })
    }

    /// The modulations: `[msa, mlp, msa2]` as far as this side has them.
    fn modulations(&self, c: &Tensor) -> Result<Vec<Mod>> {
        let ch = chunks(&self.modulation, c, self.mods)?;
        if self.mods == 2 {
            let zero = ch[0].zeros_like()?;
            return Ok(vec![Mod {
                shift: ch[0].clone(),
                scale: ch[1].clone(),
                gate: zero,
            }]);
        }
        Ok(ch
            .chunks(3)
            .map(|c| Mod {
                shift: c[0].clone(),
                scale: c[1].clone(),
                gate: c[2].clone(),
            })
            .collect())
    }

    /// After the attention: `x + gate · proj(attn)` (+ the second attention), then the MLP.
    fn finish(
        &self,
        xs: &Tensor,
        attn: &Tensor,
        attn2: Option<&Tensor>,
        m: &[Mod],
    ) -> Result<Tensor> {
        let mut xs = (xs + m[0].gate.broadcast_mul(&self.attn.proj(attn)?)?)?;
        if let (Some(a2), Some(out2), Some(m2)) = (&self.attn2, attn2, m.get(2)) {
            xs = (xs + m2.gate.broadcast_mul(&a2.proj(out2)?)?)?;
        }
        match &self.mlp {
            Some(mlp) => {
                let ff = mlp.forward(&m[1].norm_apply(&xs)?)?;
                &xs + m[1].gate.broadcast_mul(&ff)?
            }
            None => Ok(xs),
        }
    }
}

struct JointBlock {
    x: Side,
    context: Side,
    heads: usize,
}

impl JointBlock {
    /// `(context, x)` after the block; the context is `None` after the last block.
    fn forward(
        &self,
        context: &Tensor,
        x: &Tensor,
        c: &Tensor,
    ) -> Result<(Option<Tensor>, Tensor)> {
        let cm = self.context.modulations(c)?;
        let xm = self.x.modulations(c)?;
        let (cq, ck, cv) = self
            .context
            .attn
            .qkv(&cm[0].norm_apply(context)?, self.heads)?;
        let (xq, xk, xv) = self.x.attn.qkv(&xm[0].norm_apply(x)?, self.heads)?;
        let n_ctx = context.dim(1)?;
        let joint = attention(
            &Tensor::cat(&[&cq, &xq], 2)?,
            &Tensor::cat(&[&ck, &xk], 2)?,
            &Tensor::cat(&[&cv, &xv], 2)?,
        )?;
        let ctx_attn = joint.narrow(1, 0, n_ctx)?;
        let x_attn = joint.narrow(1, n_ctx, joint.dim(1)? - n_ctx)?;
        let x_attn2 = match (&self.x.attn2, xm.get(2)) {
            (Some(a2), Some(m2)) => {
                let (q, k, v) = a2.qkv(&m2.norm_apply(x)?, self.heads)?;
                Some(attention(&q, &k, &v)?)
            }
            _ => None,
        };
        let x = self.x.finish(x, &x_attn, x_attn2.as_ref(), &xm)?;
        let context = match self.context.mlp {
            Some(_) => Some(self.context.finish(context, &ctx_attn, None, &cm)?),
            None => None,
        };
        Ok((context, x))
    }
}

/// The whole transformer.
pub struct Mmdit {
    /// The patch embedding, `[hidden, in · p · p]` (the 2×2 stride-2 convolution).
    x_embedder: QLinear,
    pos_embed: Tensor,
    t_in: (QLinear, QLinear),
    y_in: (QLinear, QLinear),
    context_embedder: QLinear,
    blocks: Vec<JointBlock>,
    final_mod: QLinear,
    final_linear: QLinear,
    cfg: Sd3Config,
}

impl Mmdit {
    /// Builds the network from Stability AI-named weights (every one must be used).
    pub fn new(cfg: &Sd3Config, w: &mut WeightMap) -> std::result::Result<Mmdit, DiffusionError> {
        let build = |w: &mut WeightMap| -> Result<Mmdit> {
            let h = cfg.hidden_size;
            let p = cfg.patch_size;
            // The convolution's kernel as a matrix over (channel, row, column) patches.
            let conv = w.take("x_embedder.proj.weight")?;
            if conv.dims() != [h, cfg.in_channels, p, p] {
                candle::bail!(
                    "`x_embedder.proj.weight` is {:?}, expected {:?}",
                    conv.dims(),
                    [h, cfg.in_channels, p, p]
                );
            }
            let flat = conv.float(w.device())?.reshape((h, cfg.patch_dim()))?;
            w.insert("x_embedder.proj.weight".into(), Weight::Float(flat));
            let x_embedder = w.linear("x_embedder.proj", cfg.patch_dim(), h, true)?;
            let side = cfg.pos_embed_max_size;
            let pos_embed = w.tensor("pos_embed", &[1, side * side, h])?;
            let mlp2 = |w: &mut WeightMap, p: &str, i: usize| -> Result<(QLinear, QLinear)> {
                Ok((
                    w.linear(&format!("{p}.mlp.0"), i, h, true)?,
                    w.linear(&format!("{p}.mlp.2"), h, h, true)?,
                ))
            };
            let t_in = mlp2(w, "t_embedder", 256)?;
            let y_in = mlp2(w, "y_embedder", cfg.pooled_dim)?;
            let context_embedder = w.linear("context_embedder", cfg.context_in_dim, h, true)?;
            let mut blocks = Vec::with_capacity(cfg.depth);
            for i in 0..cfg.depth {
                let last = i + 1 == cfg.depth;
                let dual = cfg.dual_layers.contains(&i);
                blocks.push(JointBlock {
                    x: Side::new(w, &format!("joint_blocks.{i}.x_block"), cfg, false, dual)?,
                    context: Side::new(
                        w,
                        &format!("joint_blocks.{i}.context_block"),
                        cfg,
                        last,
                        false,
                    )?,
                    heads: cfg.num_heads,
                });
            }
            Ok(Mmdit {
                x_embedder,
                pos_embed,
                t_in,
                y_in,
                context_embedder,
                blocks,
                final_mod: w.linear("final_layer.adaLN_modulation.1", h, 2 * h, true)?,
                final_linear: w.linear("final_layer.linear", h, p * p * cfg.out_channels, true)?,
                cfg: cfg.clone(),
            })
        };
        let m = build(w).map_err(model_err)?;
        w.check_used()?;
        Ok(m)
    }

    pub fn config(&self) -> &Sd3Config {
        &self.cfg
    }

    /// The position table's centre `rows × cols`, `(1, rows · cols, hidden)` (diffusers'
    /// `cropped_pos_embed`).
    fn cropped_pos_embed(&self, rows: usize, cols: usize) -> Result<Tensor> {
        let side = self.cfg.pos_embed_max_size;
        if rows > side || cols > side {
            candle::bail!(
                "the picture is {rows}×{cols} patches; the position table has {side}×{side}"
            );
        }
        let (top, left) = ((side - rows) / 2, (side - cols) / 2);
        self.pos_embed
            .reshape((side, side, ()))?
            .narrow(0, top, rows)?
            .narrow(1, left, cols)?
            .reshape((1, rows * cols, ()))
    }

    /// The velocity for latents `x` `(batch, C, h, w)` at timestep `t` (sigma · 1000), joint
    /// text embeddings `context` `(batch, len, context_in_dim)` and pooled vectors `y`
    /// `(batch, pooled_dim)`.
    pub fn forward(&self, x: &Tensor, t: f32, context: &Tensor, y: &Tensor) -> Result<Tensor> {
        let (b, _, h, w) = x.dims4()?;
        let p = self.cfg.patch_size;
        let (rows, cols) = (h / p, w / p);
        if rows * p != h || cols * p != w {
            candle::bail!("latents {h}×{w} are not a whole number of {p}×{p} patches");
        }
        let patches = crate::flux::pack(x)?;
        let mut x = self
            .x_embedder
            .forward(&patches)?
            .broadcast_add(&self.cropped_pos_embed(rows, cols)?)?;
        let temb = timestep_embedding_scaled(t, 256, x.device())?;
        let temb = self.t_in.1.forward(&self.t_in.0.forward(&temb)?.silu()?)?;
        let yemb = self.y_in.1.forward(&self.y_in.0.forward(y)?.silu()?)?;
        let c = yemb.broadcast_add(&temb)?;
        let mut context = Some(self.context_embedder.forward(context)?);
        for block in &self.blocks {
            let ctx = context
                .take()
                .ok_or_else(|| candle::Error::Msg("no context after the last block".into()))?;
            let (ctx, xs) = block.forward(&ctx, &x, &c)?;
            context = ctx;
            x = xs;
        }
        let m = chunks(&self.final_mod, &c, 2)?;
        let out = self
            .final_linear
            .forward(&modulated_layer_norm(&x, &m[0], &m[1])?)?;
        // "nhwpqc -> nchpwq"
        let co = self.cfg.out_channels;
        out.reshape((b, rows, cols, p, p, co))?
            .permute((0, 5, 1, 3, 2, 4))?
            .reshape((b, co, h, w))
    }
}
