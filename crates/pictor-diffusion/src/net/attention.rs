//! Attention Based Building Blocks
use candle::{D, DType, IndexOp, Result, Tensor};
use candle_nn as nn;
use candle_nn::Module;

use super::linear::Weights;

#[derive(Debug)]
struct GeGlu {
    proj: super::linear::Linear,
    span: tracing::Span,
}

impl GeGlu {
    fn new(vs: nn::VarBuilder, dim_in: usize, dim_out: usize, weights: Weights) -> Result<Self> {
        let proj = super::linear::linear(dim_in, dim_out * 2, vs.pp("proj"), weights)?;
        let span = tracing::span!(tracing::Level::TRACE, "geglu");
        Ok(Self { proj, span })
    }
}

impl Module for GeGlu {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let projected = self.proj.forward(xs)?;
        if projected.device().is_cpu() && projected.dtype() == DType::F32 {
            return projected.contiguous()?.apply_op1_no_bwd(&Geglu);
        }
        let hidden_states_and_gate = projected.chunk(2, D::Minus1)?;
        &hidden_states_and_gate[0] * hidden_states_and_gate[1].gelu_erf()?
    }
}

/// `h · gelu(g)` for `[…, 2n]` rows `[h | g]`, giving `[…, n]`, in one pass on the CPU (float32)
/// with the vectorised exact GELU: the unfused form made the gate's GELU from a strided view
/// with libm's scalar `erff` (2.5 % of a UNet step) and a third tensor for the product.
#[derive(Debug, Clone, Copy)]
struct Geglu;

impl candle::CustomOp1 for Geglu {
    fn name(&self) -> &'static str {
        "pictor-geglu"
    }

    fn cpu_fwd(
        &self,
        storage: &candle::CpuStorage,
        layout: &candle::Layout,
    ) -> Result<(candle::CpuStorage, candle::Shape)> {
        use rayon::prelude::*;
        let x = super::cpu_op::f32_slice(storage, layout, self.name())?;
        let dims = layout.dims();
        let Some((&width, lead)) = dims.split_last() else {
            candle::bail!("pictor-geglu: a scalar input");
        };
        if width % 2 != 0 {
            candle::bail!("pictor-geglu: an odd last dimension ({width})");
        }
        let n = width / 2;
        let mut out = vec![0f32; x.len() / 2];
        if n > 0 {
            out.par_chunks_mut(n)
                .zip(x.par_chunks(width))
                .for_each(|(out, row)| {
                    let (h, g) = row.split_at(n);
                    geglu_row(out, h, g);
                });
        }
        let mut shape = lead.to_vec();
        shape.push(n);
        Ok((candle::CpuStorage::F32(out), candle::Shape::from(shape)))
    }
}

super::fast_math::widest_simd! {
    fn geglu_row(out: &mut [f32], h: &[f32], g: &[f32]) => geglu_row_body
}

#[inline(always)]
fn geglu_row_body(out: &mut [f32], h: &[f32], g: &[f32]) {
    for ((o, &h), &g) in out.iter_mut().zip(h).zip(g) {
        *o = h * super::fast_math::gelu_erf(g);
    }
}

/// GELU with the tanh approximation (diffusers' `"gelu-approximate"`): one vectorised pass on the
/// CPU in float32 (candle's maps libm's scalar `tanhf` / `expm1f`: 7 % of an SD 3 step), candle's
/// elsewhere.
pub fn gelu_tanh(xs: &Tensor) -> Result<Tensor> {
    if xs.device().is_cpu() && xs.dtype() == DType::F32 {
        return xs.contiguous()?.apply_op1_no_bwd(&GeluTanh);
    }
    xs.gelu()
}

#[derive(Debug, Clone, Copy)]
struct GeluTanh;

impl candle::CustomOp1 for GeluTanh {
    fn name(&self) -> &'static str {
        "pictor-gelu-tanh"
    }

    fn cpu_fwd(
        &self,
        storage: &candle::CpuStorage,
        layout: &candle::Layout,
    ) -> Result<(candle::CpuStorage, candle::Shape)> {
        use rayon::prelude::*;
        let x = super::cpu_op::f32_slice(storage, layout, self.name())?;
        let mut out = vec![0f32; x.len()];
        out.par_chunks_mut(1 << 14)
            .zip(x.par_chunks(1 << 14))
            .for_each(|(o, x)| gelu_tanh_run(o, x));
        Ok((candle::CpuStorage::F32(out), layout.shape().clone()))
    }
}

super::fast_math::widest_simd! {
    fn gelu_tanh_run(out: &mut [f32], x: &[f32]) => gelu_tanh_run_body
}

#[inline(always)]
fn gelu_tanh_run_body(out: &mut [f32], x: &[f32]) {
    for (o, &x) in out.iter_mut().zip(x) {
        *o = super::fast_math::gelu_tanh(x);
    }
}

/// A feed-forward layer.
#[derive(Debug)]
struct FeedForward {
    project_in: GeGlu,
    linear: super::linear::Linear,
    span: tracing::Span,
}

impl FeedForward {
    // The glu parameter in the python code is unused?
    // https://github.com/huggingface/diffusers/blob/d3d22ce5a894becb951eec03e663951b28d45135/src/diffusers/models/attention.py#L347
    /// Creates a new feed-forward layer based on some given input dimension, some
    /// output dimension, and a multiplier to be used for the intermediary layer.
    fn new(
        vs: nn::VarBuilder,
        dim: usize,
        dim_out: Option<usize>,
        mult: usize,
        weights: Weights,
    ) -> Result<Self> {
        let inner_dim = dim * mult;
        let dim_out = dim_out.unwrap_or(dim);
        let vs = vs.pp("net");
        let project_in = GeGlu::new(vs.pp("0"), dim, inner_dim, weights)?;
        let linear = super::linear::linear(inner_dim, dim_out, vs.pp("2"), weights)?;
        let span = tracing::span!(tracing::Level::TRACE, "ff");
        Ok(Self {
            project_in,
            linear,
            span,
        })
    }
}

impl Module for FeedForward {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let xs = self.project_in.forward(xs)?;
        self.linear.forward(&xs)
    }
}

/// `PICTOR_FULL_ATTENTION=1` computes attention with the whole score matrix, as candle's
/// example does (for comparison).
fn blocked_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("PICTOR_FULL_ATTENTION").map_or(true, |v| v != "1"))
}

/// Whether attention over these tensors runs as [`BlockedAttention`]: on the CPU, in float32.
///
/// [`BlockedAttention`]: super::attention_cpu::BlockedAttention
fn blocked_applies(qkv: &[&Tensor]) -> bool {
    qkv.iter()
        .all(|t| t.device().is_cpu() && t.dtype() == DType::F32)
        && blocked_enabled()
}

/// `softmax(scale · q kᵀ) v` for `[bh, n, d]` queries and `[bh, m, d]` keys and values: a
/// block of queries at a time on the CPU in float32 ([`super::attention_cpu`]), else in full.
pub fn scaled_dot_product(q: &Tensor, k: &Tensor, v: &Tensor, scale: f64) -> Result<Tensor> {
    if blocked_applies(&[q, k, v]) {
        return q.contiguous()?.apply_op3_no_bwd(
            &k.contiguous()?,
            &v.contiguous()?,
            &super::attention_cpu::BlockedAttention {
                scale: scale as f32,
            },
        );
    }
    let in_dtype = q.dtype();
    let q = q.to_dtype(DType::F32)?;
    let k = k.to_dtype(DType::F32)?;
    let v = v.to_dtype(DType::F32)?;
    let scores = q.matmul(&(k.t()? * scale)?)?;
    nn::ops::softmax_last_dim(&scores)?
        .matmul(&v)?
        .to_dtype(in_dtype)
}

#[derive(Debug)]
pub struct CrossAttention {
    to_q: super::linear::Linear,
    to_k: super::linear::Linear,
    to_v: super::linear::Linear,
    to_out: super::linear::Linear,
    heads: usize,
    scale: f64,
    slice_size: Option<usize>,
    span: tracing::Span,
    span_attn: tracing::Span,
    span_softmax: tracing::Span,
}

impl CrossAttention {
    // Defaults should be heads = 8, dim_head = 64, context_dim = None
    pub fn new(
        vs: nn::VarBuilder,
        query_dim: usize,
        context_dim: Option<usize>,
        heads: usize,
        dim_head: usize,
        slice_size: Option<usize>,
        weights: Weights,
    ) -> Result<Self> {
        let inner_dim = dim_head * heads;
        let context_dim = context_dim.unwrap_or(query_dim);
        let scale = 1.0 / f64::sqrt(dim_head as f64);
        let to_q = super::linear::linear_no_bias(query_dim, inner_dim, vs.pp("to_q"), weights)?;
        let to_k = super::linear::linear_no_bias(context_dim, inner_dim, vs.pp("to_k"), weights)?;
        let to_v = super::linear::linear_no_bias(context_dim, inner_dim, vs.pp("to_v"), weights)?;
        let to_out = super::linear::linear(inner_dim, query_dim, vs.pp("to_out.0"), weights)?;
        let span = tracing::span!(tracing::Level::TRACE, "xa");
        let span_attn = tracing::span!(tracing::Level::TRACE, "xa-attn");
        let span_softmax = tracing::span!(tracing::Level::TRACE, "xa-softmax");
        Ok(Self {
            to_q,
            to_k,
            to_v,
            to_out,
            heads,
            scale,
            slice_size,
            span,
            span_attn,
            span_softmax,
        })
    }

    fn reshape_heads_to_batch_dim(&self, xs: &Tensor) -> Result<Tensor> {
        let (batch_size, seq_len, dim) = xs.dims3()?;
        xs.reshape((batch_size, seq_len, self.heads, dim / self.heads))?
            .transpose(1, 2)?
            .reshape((batch_size * self.heads, seq_len, dim / self.heads))
    }

    fn reshape_batch_dim_to_heads(&self, xs: &Tensor) -> Result<Tensor> {
        let (batch_size, seq_len, dim) = xs.dims3()?;
        xs.reshape((batch_size / self.heads, self.heads, seq_len, dim))?
            .transpose(1, 2)?
            .reshape((batch_size / self.heads, seq_len, dim * self.heads))
    }

    fn sliced_attention(
        &self,
        query: &Tensor,
        key: &Tensor,
        value: &Tensor,
        slice_size: usize,
    ) -> Result<Tensor> {
        let batch_size_attention = query.dim(0)?;
        let mut hidden_states = Vec::with_capacity(batch_size_attention.div_ceil(slice_size));
        let in_dtype = query.dtype();
        let query = query.to_dtype(DType::F32)?;
        let key = key.to_dtype(DType::F32)?;
        let value = value.to_dtype(DType::F32)?;

        for start_idx in (0..batch_size_attention).step_by(slice_size) {
            let end_idx = (start_idx + slice_size).min(batch_size_attention);

            let xs = query
                .i(start_idx..end_idx)?
                .matmul(&(key.i(start_idx..end_idx)?.t()? * self.scale)?)?;
            let xs = nn::ops::softmax(&xs, D::Minus1)?.matmul(&value.i(start_idx..end_idx)?)?;
            hidden_states.push(xs)
        }
        let hidden_states = Tensor::cat(&hidden_states, 0)?.to_dtype(in_dtype)?;
        self.reshape_batch_dim_to_heads(&hidden_states)
    }

    fn attention(&self, query: &Tensor, key: &Tensor, value: &Tensor) -> Result<Tensor> {
        let _enter = self.span_attn.enter();
        // On the CPU in float32: a block of queries at a time, never the whole score matrix.
        if blocked_applies(&[query, key, value]) {
            let xs = query.contiguous()?.apply_op3_no_bwd(
                &key.contiguous()?,
                &value.contiguous()?,
                &super::attention_cpu::BlockedAttention {
                    scale: self.scale as f32,
                },
            )?;
            return self.reshape_batch_dim_to_heads(&xs);
        }
        let xs = {
            let in_dtype = query.dtype();
            let query = query.to_dtype(DType::F32)?;
            let key = key.to_dtype(DType::F32)?;
            let value = value.to_dtype(DType::F32)?;
            let xs = query.matmul(&(key.t()? * self.scale)?)?;
            let xs = {
                let _enter = self.span_softmax.enter();
                nn::ops::softmax_last_dim(&xs)?
            };
            xs.matmul(&value)?.to_dtype(in_dtype)?
        };
        self.reshape_batch_dim_to_heads(&xs)
    }

    pub fn forward(&self, xs: &Tensor, context: Option<&Tensor>) -> Result<Tensor> {
        let _enter = self.span.enter();
        let query = self.to_q.forward(xs)?;
        let context = context.unwrap_or(xs).contiguous()?;
        let key = self.to_k.forward(&context)?;
        let value = self.to_v.forward(&context)?;
        let query = self.reshape_heads_to_batch_dim(&query)?;
        let key = self.reshape_heads_to_batch_dim(&key)?;
        let value = self.reshape_heads_to_batch_dim(&value)?;
        let dim0 = query.dim(0)?;
        // Slicing bounds the score matrix's memory; the CPU's blocked attention never makes it.
        let slice_size = self
            .slice_size
            .filter(|&slice_size| dim0 >= slice_size && !blocked_applies(&[&query, &key, &value]));
        let xs = match slice_size {
            None => self.attention(&query, &key, &value)?,
            Some(slice_size) => self.sliced_attention(&query, &key, &value, slice_size)?,
        };
        self.to_out.forward(&xs)
    }
}

impl CrossAttention {
    fn linears(&self) -> [&super::linear::Linear; 4] {
        [&self.to_q, &self.to_k, &self.to_v, &self.to_out]
    }
}

/// A basic Transformer block.
#[derive(Debug)]
struct BasicTransformerBlock {
    attn1: CrossAttention,
    ff: FeedForward,
    attn2: CrossAttention,
    norm1: nn::LayerNorm,
    norm2: nn::LayerNorm,
    norm3: nn::LayerNorm,
    span: tracing::Span,
}

impl BasicTransformerBlock {
    fn new(
        vs: nn::VarBuilder,
        dim: usize,
        n_heads: usize,
        d_head: usize,
        context_dim: Option<usize>,
        sliced_attention_size: Option<usize>,
        weights: Weights,
    ) -> Result<Self> {
        let attn1 = CrossAttention::new(
            vs.pp("attn1"),
            dim,
            None,
            n_heads,
            d_head,
            sliced_attention_size,
            weights,
        )?;
        let ff = FeedForward::new(vs.pp("ff"), dim, None, 4, weights)?;
        let attn2 = CrossAttention::new(
            vs.pp("attn2"),
            dim,
            context_dim,
            n_heads,
            d_head,
            sliced_attention_size,
            weights,
        )?;
        let norm1 = nn::layer_norm(dim, 1e-5, vs.pp("norm1"))?;
        let norm2 = nn::layer_norm(dim, 1e-5, vs.pp("norm2"))?;
        let norm3 = nn::layer_norm(dim, 1e-5, vs.pp("norm3"))?;
        let span = tracing::span!(tracing::Level::TRACE, "basic-transformer");
        Ok(Self {
            attn1,
            ff,
            attn2,
            norm1,
            norm2,
            norm3,
            span,
        })
    }

    fn forward(&self, xs: &Tensor, context: Option<&Tensor>) -> Result<Tensor> {
        let _enter = self.span.enter();
        let xs = (self.attn1.forward(&self.norm1.forward(xs)?, None)? + xs)?;
        let xs = (self.attn2.forward(&self.norm2.forward(&xs)?, context)? + xs)?;
        self.ff.forward(&self.norm3.forward(&xs)?)? + xs
    }
}

#[derive(Debug, Clone, Copy)]
pub struct SpatialTransformerConfig {
    pub depth: usize,
    pub num_groups: usize,
    pub context_dim: Option<usize>,
    pub sliced_attention_size: Option<usize>,
    pub use_linear_projection: bool,
    /// The linear layers in float32 or 8 bits.
    pub weights: Weights,
}

impl Default for SpatialTransformerConfig {
    fn default() -> Self {
        Self {
            depth: 1,
            num_groups: 32,
            context_dim: None,
            sliced_attention_size: None,
            use_linear_projection: false,
            weights: Weights::Float,
        }
    }
}

#[derive(Debug)]
enum Proj {
    Conv2d(super::with_tracing::Conv2d),
    Linear(super::linear::Linear),
}

// Aka Transformer2DModel
#[derive(Debug)]
pub struct SpatialTransformer {
    norm: super::norm::GroupNorm,
    proj_in: Proj,
    transformer_blocks: Vec<BasicTransformerBlock>,
    proj_out: Proj,
    span: tracing::Span,
    pub config: SpatialTransformerConfig,
}

/// Linear layers of `transformers`: how many are 8-bit, and how many there are.
pub fn linear_layers<'a>(
    transformers: impl IntoIterator<Item = &'a SpatialTransformer>,
) -> (usize, usize) {
    let mut layers: Vec<&super::linear::Linear> = Vec::new();
    for t in transformers {
        for p in [&t.proj_in, &t.proj_out] {
            if let Proj::Linear(l) = p {
                layers.push(l);
            }
        }
        for b in &t.transformer_blocks {
            layers.extend(b.attn1.linears());
            layers.extend(b.attn2.linears());
            layers.push(&b.ff.project_in.proj);
            layers.push(&b.ff.linear);
        }
    }
    (layers.iter().filter(|l| l.is_int8()).count(), layers.len())
}

impl SpatialTransformer {
    pub fn new(
        vs: nn::VarBuilder,
        in_channels: usize,
        n_heads: usize,
        d_head: usize,
        config: SpatialTransformerConfig,
    ) -> Result<Self> {
        let inner_dim = n_heads * d_head;
        let norm = super::norm::group_norm(config.num_groups, in_channels, 1e-6, vs.pp("norm"))?;
        let proj_in = if config.use_linear_projection {
            Proj::Linear(super::linear::linear(
                in_channels,
                inner_dim,
                vs.pp("proj_in"),
                config.weights,
            )?)
        } else {
            Proj::Conv2d(super::with_tracing::conv2d(
                in_channels,
                inner_dim,
                1,
                Default::default(),
                vs.pp("proj_in"),
            )?)
        };
        let mut transformer_blocks = vec![];
        let vs_tb = vs.pp("transformer_blocks");
        for index in 0..config.depth {
            let tb = BasicTransformerBlock::new(
                vs_tb.pp(index.to_string()),
                inner_dim,
                n_heads,
                d_head,
                config.context_dim,
                config.sliced_attention_size,
                config.weights,
            )?;
            transformer_blocks.push(tb)
        }
        let proj_out = if config.use_linear_projection {
            Proj::Linear(super::linear::linear(
                in_channels,
                inner_dim,
                vs.pp("proj_out"),
                config.weights,
            )?)
        } else {
            Proj::Conv2d(super::with_tracing::conv2d(
                inner_dim,
                in_channels,
                1,
                Default::default(),
                vs.pp("proj_out"),
            )?)
        };
        let span = tracing::span!(tracing::Level::TRACE, "spatial-transformer");
        Ok(Self {
            norm,
            proj_in,
            transformer_blocks,
            proj_out,
            span,
            config,
        })
    }

    pub fn forward(&self, xs: &Tensor, context: Option<&Tensor>) -> Result<Tensor> {
        let _enter = self.span.enter();
        let (batch, _channel, height, weight) = xs.dims4()?;
        let residual = xs;
        let xs = self.norm.forward(xs)?;
        let (inner_dim, xs) = match &self.proj_in {
            Proj::Conv2d(p) => {
                let xs = p.forward(&xs)?;
                let inner_dim = xs.dim(1)?;
                let xs = xs
                    .transpose(1, 2)?
                    .t()?
                    .reshape((batch, height * weight, inner_dim))?;
                (inner_dim, xs)
            }
            Proj::Linear(p) => {
                let inner_dim = xs.dim(1)?;
                let xs = xs
                    .transpose(1, 2)?
                    .t()?
                    .reshape((batch, height * weight, inner_dim))?;
                (inner_dim, p.forward(&xs)?)
            }
        };
        let mut xs = xs;
        for block in self.transformer_blocks.iter() {
            xs = block.forward(&xs, context)?
        }
        let xs = match &self.proj_out {
            Proj::Conv2d(p) => p.forward(
                &xs.reshape((batch, height, weight, inner_dim))?
                    .t()?
                    .transpose(1, 2)?,
            )?,
            Proj::Linear(p) => p
                .forward(&xs)?
                .reshape((batch, height, weight, inner_dim))?
                .t()?
                .transpose(1, 2)?,
        };
        xs + residual
    }
}

/// Configuration for an attention block.
#[derive(Debug, Clone, Copy)]
pub struct AttentionBlockConfig {
    pub num_head_channels: Option<usize>,
    pub num_groups: usize,
    pub rescale_output_factor: f64,
    pub eps: f64,
}

impl Default for AttentionBlockConfig {
    fn default() -> Self {
        Self {
            num_head_channels: None,
            num_groups: 32,
            rescale_output_factor: 1.,
            eps: 1e-5,
        }
    }
}

#[derive(Debug)]
pub struct AttentionBlock {
    group_norm: super::norm::GroupNorm,
    query: nn::Linear,
    key: nn::Linear,
    value: nn::Linear,
    proj_attn: nn::Linear,
    channels: usize,
    num_heads: usize,
    span: tracing::Span,
    config: AttentionBlockConfig,
}

// In the .safetensor weights of official Stable Diffusion 3 Medium Huggingface repo
// https://huggingface.co/stabilityai/stable-diffusion-3-medium
// Linear layer may use a different dimension for the weight in the linear, which is
// incompatible with the current implementation of the nn::linear constructor.
// This is a workaround to handle the different dimensions.
fn get_qkv_linear(channels: usize, vs: nn::VarBuilder) -> Result<nn::Linear> {
    match vs.get((channels, channels), "weight") {
        Ok(_) => nn::linear(channels, channels, vs),
        Err(_) => {
            let weight = vs
                .get((channels, channels, 1, 1), "weight")?
                .reshape((channels, channels))?;
            let bias = vs.get((channels,), "bias")?;
            Ok(nn::Linear::new(weight, Some(bias)))
        }
    }
}

impl AttentionBlock {
    pub fn new(vs: nn::VarBuilder, channels: usize, config: AttentionBlockConfig) -> Result<Self> {
        let num_head_channels = config.num_head_channels.unwrap_or(channels);
        let num_heads = channels / num_head_channels;
        let group_norm =
            super::norm::group_norm(config.num_groups, channels, config.eps, vs.pp("group_norm"))?;
        let (q_path, k_path, v_path, out_path) = if vs.contains_tensor("to_q.weight") {
            ("to_q", "to_k", "to_v", "to_out.0")
        } else {
            ("query", "key", "value", "proj_attn")
        };
        let query = get_qkv_linear(channels, vs.pp(q_path))?;
        let key = get_qkv_linear(channels, vs.pp(k_path))?;
        let value = get_qkv_linear(channels, vs.pp(v_path))?;
        let proj_attn = get_qkv_linear(channels, vs.pp(out_path))?;
        let span = tracing::span!(tracing::Level::TRACE, "attn-block");
        Ok(Self {
            group_norm,
            query,
            key,
            value,
            proj_attn,
            channels,
            num_heads,
            span,
            config,
        })
    }

    fn transpose_for_scores(&self, xs: Tensor) -> Result<Tensor> {
        let (batch, t, h_times_d) = xs.dims3()?;
        xs.reshape((batch, t, self.num_heads, h_times_d / self.num_heads))?
            .transpose(1, 2)
    }
}

impl Module for AttentionBlock {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let in_dtype = xs.dtype();
        let residual = xs;
        let (batch, channel, height, width) = xs.dims4()?;
        let xs = self
            .group_norm
            .forward(xs)?
            .reshape((batch, channel, height * width))?
            .transpose(1, 2)?;

        let query_proj = self.query.forward(&xs)?;
        let key_proj = self.key.forward(&xs)?;
        let value_proj = self.value.forward(&xs)?;

        let query_states = self
            .transpose_for_scores(query_proj)?
            .to_dtype(DType::F32)?;
        let key_states = self.transpose_for_scores(key_proj)?.to_dtype(DType::F32)?;
        let value_states = self
            .transpose_for_scores(value_proj)?
            .to_dtype(DType::F32)?;

        // scale is applied twice, hence the -0.25 here rather than -0.5.
        // https://github.com/huggingface/diffusers/blob/d3d22ce5a894becb951eec03e663951b28d45135/src/diffusers/models/attention.py#L87
        let scale = f64::powf(self.channels as f64 / self.num_heads as f64, -0.25);
        let xs = if blocked_applies(&[&query_states, &key_states, &value_states]) {
            // The same attention a block of queries at a time (the VAE's mid block at 512²
            // has 4096 positions: a 64 MiB score matrix per picture otherwise).
            let (b, h, t, d) = query_states.dims4()?;
            let flat = |x: &Tensor| x.contiguous()?.reshape((b * h, t, d));
            flat(&query_states)?
                .apply_op3_no_bwd(
                    &flat(&key_states)?,
                    &flat(&value_states)?,
                    &super::attention_cpu::BlockedAttention {
                        scale: (scale * scale) as f32,
                    },
                )?
                .reshape((b, h, t, d))?
        } else {
            let attention_scores = (query_states * scale)?.matmul(&(key_states.t()? * scale)?)?;
            let attention_probs = nn::ops::softmax(&attention_scores, D::Minus1)?;
            attention_probs.matmul(&value_states)?
        };
        let xs = xs.to_dtype(in_dtype)?;
        let xs = xs.transpose(1, 2)?.contiguous()?;
        let xs = xs.flatten_from(D::Minus2)?;
        let xs = self
            .proj_attn
            .forward(&xs)?
            .t()?
            .reshape((batch, channel, height, width))?;
        (xs + residual)? / self.config.rescale_output_factor
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use candle::Device;

    /// The fused GEGLU against candle's chunk, exact GELU and product, on 2- and 3-D inputs.
    #[test]
    fn fused_geglu_matches_candle() {
        let dev = Device::Cpu;
        for shape in [vec![5, 14], vec![2, 77, 40], vec![1, 1, 2]] {
            let x = (Tensor::randn(0f32, 1f32, shape.as_slice(), &dev).unwrap() * 3.0).unwrap();
            let got = x.apply_op1_no_bwd(&Geglu).unwrap();
            let parts = x.chunk(2, D::Minus1).unwrap();
            let want = (&parts[0] * parts[1].gelu_erf().unwrap()).unwrap();
            assert_eq!(got.dims(), want.dims());
            // Per element: a few ulps of the output, plus erf's error in `1 + erf(g/√2)` (up
            // to 4 ulps of 1.0, as in libm's erff that candle uses) carried by `|h·g|`: a
            // large negative `g` makes a tiny output out of a cancellation.
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let (got, want) = (flat(&got), flat(&want));
            let (h, g) = (flat(&parts[0]), flat(&parts[1]));
            for i in 0..got.len() {
                let bound = 2e-7 * want[i].abs().max(1.0) + 5e-7 * (h[i] * g[i]).abs();
                let diff = (got[i] - want[i]).abs();
                assert!(diff <= bound, "{shape:?}[{i}]: {diff} > {bound}");
            }
        }
        let odd = Tensor::zeros((2, 3), DType::F32, &dev).unwrap();
        assert!(odd.apply_op1_no_bwd(&Geglu).is_err());
    }

    /// The vectorised tanh GELU against candle's, on a strided view too.
    #[test]
    fn gelu_tanh_matches_candle() {
        let dev = Device::Cpu;
        let x = (Tensor::randn(0f32, 1f32, (3, 40_000), &dev).unwrap() * 4.0).unwrap();
        for x in [x.clone(), x.t().unwrap()] {
            let got = gelu_tanh(&x).unwrap();
            let want = x.gelu().unwrap();
            let d = (got - want)
                .unwrap()
                .abs()
                .unwrap()
                .flatten_all()
                .unwrap()
                .max(0)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(d < 2e-6, "{d}");
        }
    }
}
