//! Contrastive Language-Image Pre-Training
//!
//! Contrastive Language-Image Pre-Training (CLIP) is an architecture trained on
//! pairs of images with related texts.
//!
//! - [CLIP](https://github.com/openai/CLIP)
use candle::{D, DType, Device, Result, Tensor};
use candle_nn as nn;
use candle_nn::Module;

#[derive(Debug, Clone, Copy)]
pub enum Activation {
    QuickGelu,
    Gelu,
    GeluErf,
}

impl Module for Activation {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Activation::QuickGelu => xs * nn::ops::sigmoid(&(xs * 1.702f64)?)?,
            Activation::Gelu => xs.gelu(),
            // transformers' "gelu" (GELUActivation) is the exact, erf-based one.
            Activation::GeluErf => xs.gelu_erf(),
        }
    }
}

/// A CLIP text encoder's shape, read from its `config.json` (transformers' `CLIPTextConfig`).
#[derive(Debug, Clone)]
pub struct Config {
    pub vocab_size: usize,
    /// `hidden_size`.
    pub embed_dim: usize,
    /// `hidden_act`: transformers' `"gelu"` is the exact (erf) GELU, `"quick_gelu"` the sigmoid one.
    pub activation: Activation,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    /// Width of `text_projection` (CLIPTextModelWithProjection, SDXL's second encoder).
    pub projection_dim: usize,
    pub layer_norm_eps: f64,
    /// The end-of-text token: the pooled output is taken at its first occurrence. `None` for
    /// the legacy configurations (`eos_token_id: 2`), where transformers pools at the largest id.
    pub eos_token_id: Option<u32>,
    /// Keep the encoder layers' linear weights in 8-bit blocks (`Q8_0`: 32 weights share one
    /// float16 scale), multiplied by candle's quantised matmul, on the CPU. A quarter of the
    /// memory, about 1.6 times the speed of the packed float32 layers at 77 tokens (AVX-512
    /// VNNI / AVX2), and a looser match with transformers (docs/models.md).
    pub int8: bool,
}

/// A linear layer of the encoder: float32 as loaded, or with its weight in 8-bit blocks.
#[derive(Debug)]
enum Linear {
    F32(candle_nn::Linear),
    /// Float32 with the weight packed for few rows ([`super::linear_cpu`]), on x86-64 CPUs.
    Packed(super::linear_cpu::PackedLinear),
    Int8 {
        weight: candle::quantized::QMatMul,
        bias: Tensor,
    },
}

/// The layer `prefix` (`weight` `[out, in]` and `bias`), 8-bit when `c.int8` asks for it on
/// the CPU and `in` divides into whole blocks.
fn linear(in_dim: usize, out_dim: usize, vs: candle_nn::VarBuilder, c: &Config) -> Result<Linear> {
    Ok(linear_then(in_dim, out_dim, vs, c, None)?.0)
}

/// As [`linear`], followed by `activation` when given; the `bool` says whether the layer applies
/// it itself (a packed float32 layer does, for the quick and the exact GELU).
fn linear_then(
    in_dim: usize,
    out_dim: usize,
    vs: candle_nn::VarBuilder,
    c: &Config,
    activation: Option<Activation>,
) -> Result<(Linear, bool)> {
    use super::linear_cpu::{Epilogue, PackedLinear};
    use candle::quantized::{GgmlDType, QMatMul, QTensor};
    let layer = candle_nn::linear(in_dim, out_dim, vs)?;
    let blocks = in_dim.is_multiple_of(GgmlDType::Q8_0.block_size());
    if !(c.int8 && blocks && layer.weight().device().is_cpu()) {
        let epilogue = match activation {
            None => Some(Epilogue::None),
            Some(Activation::QuickGelu) => Some(Epilogue::QuickGelu),
            Some(Activation::GeluErf) => Some(Epilogue::GeluErf),
            Some(Activation::Gelu) => None,
        };
        if let Some(epilogue) = epilogue
            && std::env::var_os("PICTOR_UNPACKED_LINEAR").is_none()
            && let Some(packed) =
                PackedLinear::with_epilogue(layer.weight(), layer.bias(), epilogue)?
        {
            return Ok((Linear::Packed(packed), activation.is_some()));
        }
        return Ok((Linear::F32(layer), false));
    }
    let weight = QTensor::quantize(&layer.weight().to_dtype(DType::F32)?, GgmlDType::Q8_0)?;
    let bias = layer
        .bias()
        .cloned()
        .ok_or_else(|| candle::Error::Msg("CLIP linear layer without a bias".into()))?;
    Ok((
        Linear::Int8 {
            weight: QMatMul::from_qtensor(weight)?,
            bias,
        },
        false,
    ))
}

impl Module for Linear {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Linear::F32(layer) => layer.forward(xs),
            Linear::Packed(layer) => layer.forward(xs),
            Linear::Int8 { weight, bias } => {
                let in_dtype = xs.dtype();
                weight
                    .forward(&xs.to_dtype(DType::F32)?)?
                    .broadcast_add(&bias.to_dtype(DType::F32)?)?
                    .to_dtype(in_dtype)
            }
        }
    }
}

// CLIP Text Model
// https://github.com/huggingface/transformers/blob/674f750a57431222fa2832503a108df3badf1564/src/transformers/models/clip/modeling_clip.py
#[derive(Debug)]
struct ClipTextEmbeddings {
    token_embedding: candle_nn::Embedding,
    position_embedding: candle_nn::Embedding,
    position_ids: Tensor,
}

impl ClipTextEmbeddings {
    fn new(vs: candle_nn::VarBuilder, c: &Config) -> Result<Self> {
        let token_embedding =
            candle_nn::embedding(c.vocab_size, c.embed_dim, vs.pp("token_embedding"))?;
        let position_embedding = candle_nn::embedding(
            c.max_position_embeddings,
            c.embed_dim,
            vs.pp("position_embedding"),
        )?;
        let position_ids =
            Tensor::arange(0u32, c.max_position_embeddings as u32, vs.device())?.unsqueeze(0)?;
        Ok(ClipTextEmbeddings {
            token_embedding,
            position_embedding,
            position_ids,
        })
    }
}

impl Module for ClipTextEmbeddings {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let token_embedding = self.token_embedding.forward(xs)?;
        let position_embedding = self.position_embedding.forward(&self.position_ids)?;
        token_embedding.broadcast_add(&position_embedding)
    }
}

#[derive(Debug)]
struct ClipAttention {
    k_proj: Linear,
    v_proj: Linear,
    q_proj: Linear,
    out_proj: Linear,
    head_dim: usize,
    scale: f64,
    num_attention_heads: usize,
}

impl ClipAttention {
    fn new(vs: candle_nn::VarBuilder, c: &Config) -> Result<Self> {
        let embed_dim = c.embed_dim;
        let num_attention_heads = c.num_attention_heads;
        let k_proj = linear(embed_dim, embed_dim, vs.pp("k_proj"), c)?;
        let v_proj = linear(embed_dim, embed_dim, vs.pp("v_proj"), c)?;
        let q_proj = linear(embed_dim, embed_dim, vs.pp("q_proj"), c)?;
        let out_proj = linear(embed_dim, embed_dim, vs.pp("out_proj"), c)?;
        let head_dim = embed_dim / num_attention_heads;
        let scale = (head_dim as f64).powf(-0.5);
        Ok(ClipAttention {
            k_proj,
            v_proj,
            q_proj,
            out_proj,
            head_dim,
            scale,
            num_attention_heads,
        })
    }

    fn shape(&self, xs: &Tensor, seq_len: usize, bsz: usize) -> Result<Tensor> {
        xs.reshape((bsz, seq_len, self.num_attention_heads, self.head_dim))?
            .transpose(1, 2)?
            .contiguous()
    }

    fn forward(&self, xs: &Tensor, causal_attention_mask: &Tensor) -> Result<Tensor> {
        let in_dtype = xs.dtype();
        let (bsz, seq_len, embed_dim) = xs.dims3()?;
        let query_states = (self.q_proj.forward(xs)? * self.scale)?;
        let proj_shape = (bsz * self.num_attention_heads, seq_len, self.head_dim);
        let query_states = self
            .shape(&query_states, seq_len, bsz)?
            .reshape(proj_shape)?
            .to_dtype(DType::F32)?;
        let key_states = self
            .shape(&self.k_proj.forward(xs)?, seq_len, bsz)?
            .reshape(proj_shape)?
            .to_dtype(DType::F32)?;
        let value_states = self
            .shape(&self.v_proj.forward(xs)?, seq_len, bsz)?
            .reshape(proj_shape)?
            .to_dtype(DType::F32)?;
        let attn_weights = query_states.matmul(&key_states.transpose(1, 2)?)?;

        let src_len = key_states.dim(1)?;
        let attn_weights = attn_weights
            .reshape((bsz, self.num_attention_heads, seq_len, src_len))?
            .broadcast_add(causal_attention_mask)?;
        let attn_weights =
            attn_weights.reshape((bsz * self.num_attention_heads, seq_len, src_len))?;
        let attn_weights = candle_nn::ops::softmax(&attn_weights, D::Minus1)?;

        let attn_output = attn_weights.matmul(&value_states)?.to_dtype(in_dtype)?;
        let attn_output = attn_output
            .reshape((bsz, self.num_attention_heads, seq_len, self.head_dim))?
            .transpose(1, 2)?
            .reshape((bsz, seq_len, embed_dim))?;
        self.out_proj.forward(&attn_output)
    }
}

#[derive(Debug)]
struct ClipMlp {
    fc1: Linear,
    fc2: Linear,
    /// The activation after `fc1`, unless `fc1` applies it itself.
    activation: Option<Activation>,
}

impl ClipMlp {
    fn new(vs: candle_nn::VarBuilder, c: &Config) -> Result<Self> {
        let (fc1, fused) = linear_then(
            c.embed_dim,
            c.intermediate_size,
            vs.pp("fc1"),
            c,
            Some(c.activation),
        )?;
        let fc2 = linear(c.intermediate_size, c.embed_dim, vs.pp("fc2"), c)?;
        Ok(ClipMlp {
            fc1,
            fc2,
            activation: (!fused).then_some(c.activation),
        })
    }
}

impl ClipMlp {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let xs = self.fc1.forward(xs)?;
        match &self.activation {
            Some(activation) => self.fc2.forward(&activation.forward(&xs)?),
            None => self.fc2.forward(&xs),
        }
    }
}

#[derive(Debug)]
struct ClipEncoderLayer {
    self_attn: ClipAttention,
    layer_norm1: candle_nn::LayerNorm,
    mlp: ClipMlp,
    layer_norm2: candle_nn::LayerNorm,
}

impl ClipEncoderLayer {
    fn new(vs: candle_nn::VarBuilder, c: &Config) -> Result<Self> {
        let self_attn = ClipAttention::new(vs.pp("self_attn"), c)?;
        let layer_norm1 =
            candle_nn::layer_norm(c.embed_dim, c.layer_norm_eps, vs.pp("layer_norm1"))?;
        let mlp = ClipMlp::new(vs.pp("mlp"), c)?;
        let layer_norm2 =
            candle_nn::layer_norm(c.embed_dim, c.layer_norm_eps, vs.pp("layer_norm2"))?;
        Ok(ClipEncoderLayer {
            self_attn,
            layer_norm1,
            mlp,
            layer_norm2,
        })
    }

    fn forward(&self, xs: &Tensor, causal_attention_mask: &Tensor) -> Result<Tensor> {
        let residual = xs;
        let xs = self.layer_norm1.forward(xs)?;
        let xs = self.self_attn.forward(&xs, causal_attention_mask)?;
        let xs = (xs + residual)?;

        let residual = &xs;
        let xs = self.layer_norm2.forward(&xs)?;
        let xs = self.mlp.forward(&xs)?;
        xs + residual
    }
}

#[derive(Debug)]
struct ClipEncoder {
    layers: Vec<ClipEncoderLayer>,
}

impl ClipEncoder {
    fn new(vs: candle_nn::VarBuilder, c: &Config) -> Result<Self> {
        let vs = vs.pp("layers");
        let mut layers: Vec<ClipEncoderLayer> = Vec::new();
        for index in 0..c.num_hidden_layers {
            let layer = ClipEncoderLayer::new(vs.pp(index.to_string()), c)?;
            layers.push(layer)
        }
        Ok(ClipEncoder { layers })
    }

    fn forward(&self, xs: &Tensor, causal_attention_mask: &Tensor) -> Result<Tensor> {
        let mut xs = xs.clone();
        for layer in self.layers.iter() {
            xs = layer.forward(&xs, causal_attention_mask)?;
        }
        Ok(xs)
    }
}

/// A CLIP transformer based model.
#[derive(Debug)]
pub struct ClipTextTransformer {
    embeddings: ClipTextEmbeddings,
    encoder: ClipEncoder,
    final_layer_norm: candle_nn::LayerNorm,
    /// `text_projection` of CLIPTextModelWithProjection (SDXL's second encoder).
    text_projection: Option<candle_nn::Linear>,
    eos_token_id: Option<u32>,
}

/// What one pass of the text encoder gives.
pub struct TextOutput {
    /// The last hidden state after the final layer norm, `(batch, seq, hidden)`.
    pub last: Tensor,
    /// The hidden state after encoder layer `len - skip` (no final norm), when asked.
    pub hidden: Option<Tensor>,
    /// The projected pooled output (`text_embeds`), for encoders with a projection.
    pub pooled: Option<Tensor>,
}

impl ClipTextTransformer {
    pub fn new(vs: candle_nn::VarBuilder, c: &Config, with_projection: bool) -> Result<Self> {
        let text_projection = if with_projection {
            Some(candle_nn::linear_no_bias(
                c.embed_dim,
                c.projection_dim,
                vs.pp("text_projection"),
            )?)
        } else {
            None
        };
        let vs = vs.pp("text_model");
        let embeddings = ClipTextEmbeddings::new(vs.pp("embeddings"), c)?;
        let encoder = ClipEncoder::new(vs.pp("encoder"), c)?;
        let final_layer_norm =
            candle_nn::layer_norm(c.embed_dim, c.layer_norm_eps, vs.pp("final_layer_norm"))?;
        Ok(ClipTextTransformer {
            embeddings,
            encoder,
            final_layer_norm,
            text_projection,
            eos_token_id: c.eos_token_id,
        })
    }

    // https://github.com/huggingface/transformers/blob/674f750a57431222fa2832503a108df3badf1564/src/transformers/models/clip/modeling_clip.py#L678
    fn build_causal_attention_mask(
        bsz: usize,
        seq_len: usize,
        mask_after: usize,
        device: &Device,
    ) -> Result<Tensor> {
        let mask: Vec<_> = (0..seq_len)
            .flat_map(|i| {
                (0..seq_len).map(move |j| {
                    if j > i || j > mask_after {
                        f32::MIN
                    } else {
                        0.
                    }
                })
            })
            .collect();
        let mask = Tensor::from_slice(&mask, (seq_len, seq_len), device)?;
        mask.broadcast_as((bsz, seq_len, seq_len))
    }

    pub fn forward_with_mask(&self, xs: &Tensor, mask_after: usize) -> Result<Tensor> {
        let (bsz, seq_len) = xs.dims2()?;
        let xs = self.embeddings.forward(xs)?;
        let causal_attention_mask =
            Self::build_causal_attention_mask(bsz, seq_len, mask_after, xs.device())?;
        let xs = self.encoder.forward(&xs, &causal_attention_mask)?;
        self.final_layer_norm.forward(&xs)
    }

    /// Runs the encoder on token ids `(batch, seq)`. `hidden_from_end = Some(k)` also returns the
    /// output of the k-th layer from the end (`hidden_states[-k-1]` in transformers: 1 is the
    /// penultimate layer, as SDXL and "clip skip 2" use).
    pub fn encode(&self, ids: &Tensor, hidden_from_end: Option<usize>) -> Result<TextOutput> {
        let (bsz, seq_len) = ids.dims2()?;
        let xs = self.embeddings.forward(ids)?;
        let mask = Self::build_causal_attention_mask(bsz, seq_len, usize::MAX, xs.device())?;
        let n = self.encoder.layers.len();
        let want = hidden_from_end.and_then(|k| n.checked_sub(k));
        // hidden_states[0] is the embedding output; hidden_states[i] the output of layer i - 1.
        let mut hidden = if want == Some(0) {
            Some(xs.clone())
        } else {
            None
        };
        let mut xs = xs;
        for (i, layer) in self.encoder.layers.iter().enumerate() {
            xs = layer.forward(&xs, &mask)?;
            if want == Some(i + 1) {
                hidden = Some(xs.clone());
            }
        }
        let last = self.final_layer_norm.forward(&xs)?;
        let pooled = match &self.text_projection {
            None => None,
            Some(proj) => Some(proj.forward(&self.eos_states(ids, &last)?)?),
        };
        Ok(TextOutput {
            last,
            hidden,
            pooled,
        })
    }
}

impl ClipTextTransformer {
    /// The last hidden state at each row's end-of-text token, `(batch, hidden)`: transformers'
    /// `pooler_output` (before any projection; FLUX's pooled CLIP vector).
    pub fn eos_states(&self, ids: &Tensor, last: &Tensor) -> Result<Tensor> {
        let seq_len = ids.dim(1)?;
        let ids_v = ids.to_vec2::<u32>()?;
        let rows = ids_v
            .iter()
            .enumerate()
            .map(|(b, row)| {
                let at = match self.eos_token_id {
                    Some(eos) => row.iter().position(|&t| t == eos),
                    None => {
                        let max = row.iter().copied().max().unwrap_or(0);
                        row.iter().position(|&t| t == max)
                    }
                }
                .unwrap_or(seq_len - 1);
                last.get(b)?.get(at)
            })
            .collect::<Result<Vec<_>>>()?;
        Tensor::stack(&rows, 0)
    }
}

impl Module for ClipTextTransformer {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        self.forward_with_mask(xs, usize::MAX)
    }
}
