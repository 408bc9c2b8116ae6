//! The T5 v1.1 text encoder FLUX.1 and SD 3.5 use (T5-XXL's encoder), as transformers'
//! `T5EncoderModel` computes it, and its SentencePiece tokenizer read from the model's
//! `tokenizer.json` by the `tokenizers` crate (already in the build through candle).
//!
//! Adapted from candle-transformers 0.11's `models/t5.rs` (MIT OR Apache-2.0, the candle
//! authors), the encoder only: no attention mask (diffusers' FLUX and SD 3 pipelines pass none,
//! so padding is attended as in the reference), the relative-position buckets computed in float32
//! as PyTorch does (the truncation to a bucket must land on the same side), the layer norm in
//! float32, weights float or quantised ([`QLinear`]: city96's T5 GGUFs).

use std::path::Path;

use candle::{D, DType, Device, Module, Result, Tensor};
use serde_json::Value;

use super::weights::{QLinear, WeightMap};
use crate::DiffusionError;

/// The encoder's shape, from transformers' `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct T5Config {
    pub vocab_size: usize,
    pub d_model: usize,
    pub d_kv: usize,
    pub d_ff: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub relative_attention_num_buckets: usize,
    pub relative_attention_max_distance: usize,
    pub layer_norm_epsilon: f64,
    /// `gated-gelu` (T5 v1.1, FLUX, SD 3) or `relu` (the original T5).
    pub gated_gelu: bool,
}

impl T5Config {
    pub fn from_json(v: &Value) -> std::result::Result<T5Config, DiffusionError> {
        let n = |k: &str| -> std::result::Result<usize, DiffusionError> {
            v.get(k)
                .and_then(Value::as_u64)
                .map(|x| x as usize)
                .filter(|&x| x > 0 && x < 1 << 20)
                .ok_or_else(|| {
                    DiffusionError::Model(format!("text_encoder_2/config.json: no valid `{k}`"))
                })
        };
        let ff = v
            .get("feed_forward_proj")
            .and_then(Value::as_str)
            .unwrap_or("relu");
        let gated_gelu = match ff {
            "gated-gelu" => true,
            "relu" => false,
            other => {
                return Err(DiffusionError::Model(format!(
                    "text_encoder_2/config.json: feed_forward_proj `{other}` is not supported (gated-gelu, relu)"
                )));
            }
        };
        Ok(T5Config {
            vocab_size: n("vocab_size")?,
            d_model: n("d_model")?,
            d_kv: n("d_kv")?,
            d_ff: n("d_ff")?,
            num_layers: n("num_layers")?,
            num_heads: n("num_heads")?,
            relative_attention_num_buckets: n("relative_attention_num_buckets")?,
            relative_attention_max_distance: v
                .get("relative_attention_max_distance")
                .and_then(Value::as_u64)
                .unwrap_or(128) as usize,
            layer_norm_epsilon: v
                .get("layer_norm_epsilon")
                .and_then(Value::as_f64)
                .unwrap_or(1e-6),
            gated_gelu,
        })
    }

    /// T5 v1.1 XXL's encoder (FLUX.1's and SD 3.5's `text_encoder_2`/`_3`), for weight files
    /// that carry no configuration (GGUF, ComfyUI's `t5xxl_*.safetensors`).
    pub fn xxl() -> T5Config {
        T5Config {
            vocab_size: 32128,
            d_model: 4096,
            d_kv: 64,
            d_ff: 10240,
            num_layers: 24,
            num_heads: 64,
            relative_attention_num_buckets: 32,
            relative_attention_max_distance: 128,
            layer_norm_epsilon: 1e-6,
            gated_gelu: true,
        }
    }
}

/// Every tensor of a T5 encoder of this shape under transformers' names, with its shape
/// (what [`T5Encoder::new`] reads; for benchmarks and tests that make weights).
pub fn t5_shapes(cfg: &T5Config) -> Vec<(String, Vec<usize>)> {
    let (dm, inner) = (cfg.d_model, cfg.num_heads * cfg.d_kv);
    let mut s = vec![("shared.weight".to_string(), vec![cfg.vocab_size, dm])];
    for i in 0..cfg.num_layers {
        let (a, f) = (
            format!("encoder.block.{i}.layer.0"),
            format!("encoder.block.{i}.layer.1"),
        );
        if i == 0 {
            s.push((
                format!("{a}.SelfAttention.relative_attention_bias.weight"),
                vec![cfg.relative_attention_num_buckets, cfg.num_heads],
            ));
        }
        for x in ["q", "k", "v"] {
            s.push((format!("{a}.SelfAttention.{x}.weight"), vec![inner, dm]));
        }
        s.push((format!("{a}.SelfAttention.o.weight"), vec![dm, inner]));
        s.push((format!("{a}.layer_norm.weight"), vec![dm]));
        let ins: &[&str] = if cfg.gated_gelu {
            &["wi_0", "wi_1"]
        } else {
            &["wi"]
        };
        for x in ins {
            s.push((format!("{f}.DenseReluDense.{x}.weight"), vec![cfg.d_ff, dm]));
        }
        s.push((format!("{f}.DenseReluDense.wo.weight"), vec![dm, cfg.d_ff]));
        s.push((format!("{f}.layer_norm.weight"), vec![dm]));
    }
    s.push(("encoder.final_layer_norm.weight".into(), vec![dm]));
    s
}

/// T5's layer norm: no mean, no bias; `x / sqrt(mean(x²) + eps) · w` in float32.
#[derive(Debug, Clone)]
struct T5LayerNorm {
    weight: Tensor,
    eps: f64,
}

impl T5LayerNorm {
    fn new(w: &mut WeightMap, name: &str, dim: usize, eps: f64) -> Result<Self> {
        Ok(Self {
            weight: w.tensor(name, &[dim])?,
            eps,
        })
    }
}

impl Module for T5LayerNorm {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let dtype = xs.dtype();
        let xs = xs.to_dtype(DType::F32)?;
        let variance = xs.sqr()?.mean_keepdim(D::Minus1)?;
        let xs = xs.broadcast_div(&(variance + self.eps)?.sqrt()?)?;
        xs.to_dtype(dtype)?.broadcast_mul(&self.weight)
    }
}

#[derive(Debug, Clone)]
struct FeedForward {
    wi_0: QLinear,
    wi_1: Option<QLinear>,
    wo: QLinear,
    norm: T5LayerNorm,
}

impl FeedForward {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let h = self.norm.forward(xs)?;
        let h = match &self.wi_1 {
            // gelu_new (the tanh approximation) of the gate times the linear branch
            Some(wi_1) => (self.wi_0.forward(&h)?.gelu()? * wi_1.forward(&h)?)?,
            None => self.wi_0.forward(&h)?.relu()?,
        };
        xs + self.wo.forward(&h)?
    }
}

#[derive(Debug, Clone)]
struct SelfAttention {
    q: QLinear,
    k: QLinear,
    v: QLinear,
    o: QLinear,
    norm: T5LayerNorm,
    heads: usize,
    d_kv: usize,
}

impl SelfAttention {
    fn forward(&self, xs: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let h = self.norm.forward(xs)?;
        let (b, l, _) = h.dims3()?;
        let split = |t: Tensor| {
            t.reshape((b, l, self.heads, self.d_kv))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(self.q.forward(&h)?)?;
        let k = split(self.k.forward(&h)?)?;
        let v = split(self.v.forward(&h)?)?;
        // T5 does not scale the scores (folded into its initialisation).
        let scores = q.matmul(&k.t()?)?.broadcast_add(bias)?;
        let p = candle_nn::ops::softmax_last_dim(&scores)?;
        let out = p
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((b, l, self.heads * self.d_kv))?;
        xs + self.o.forward(&out)?
    }
}

/// transformers' `_relative_position_bucket` (bidirectional), with its float32 logarithm.
fn relative_bucket(relative: i64, num_buckets: usize, max_distance: usize) -> usize {
    let half = num_buckets / 2;
    let mut bucket = if relative > 0 { half } else { 0 };
    let n = relative.unsigned_abs() as usize;
    let max_exact = half / 2;
    if n < max_exact {
        bucket += n;
    } else {
        let ratio = ((n as f32) / (max_exact as f32)).ln()
            / ((max_distance as f64 / max_exact as f64).ln() as f32)
            * ((half - max_exact) as f32);
        bucket += (max_exact + ratio as usize).min(half - 1);
    }
    bucket
}

/// The encoder: `last_hidden_state` of transformers' `T5EncoderModel`.
#[derive(Debug, Clone)]
pub struct T5Encoder {
    embed: Tensor,
    layers: Vec<(SelfAttention, FeedForward)>,
    relative_bias: Tensor,
    final_norm: T5LayerNorm,
    cfg: T5Config,
}

impl T5Encoder {
    /// From transformers' names (`shared.weight`, `encoder.block.N.layer.…`); the embedding
    /// may also be under `encoder.embed_tokens.weight` (tied).
    pub fn new(cfg: &T5Config, w: &mut WeightMap) -> Result<T5Encoder> {
        let (dm, inner) = (cfg.d_model, cfg.num_heads * cfg.d_kv);
        let embed = if w.contains("shared.weight") {
            let e = w.tensor("shared.weight", &[cfg.vocab_size, dm])?;
            if w.contains("encoder.embed_tokens.weight") {
                w.take("encoder.embed_tokens.weight")?;
            }
            e
        } else {
            w.tensor("encoder.embed_tokens.weight", &[cfg.vocab_size, dm])?
        };
        let eps = cfg.layer_norm_epsilon;
        let mut layers = Vec::with_capacity(cfg.num_layers);
        let mut relative_bias = None;
        for i in 0..cfg.num_layers {
            let a = format!("encoder.block.{i}.layer.0");
            let f = format!("encoder.block.{i}.layer.1");
            if i == 0 {
                relative_bias = Some(w.tensor(
                    &format!("{a}.SelfAttention.relative_attention_bias.weight"),
                    &[cfg.relative_attention_num_buckets, cfg.num_heads],
                )?);
            }
            let attn = SelfAttention {
                q: w.linear(&format!("{a}.SelfAttention.q"), dm, inner, false)?,
                k: w.linear(&format!("{a}.SelfAttention.k"), dm, inner, false)?,
                v: w.linear(&format!("{a}.SelfAttention.v"), dm, inner, false)?,
                o: w.linear(&format!("{a}.SelfAttention.o"), inner, dm, false)?,
                norm: T5LayerNorm::new(w, &format!("{a}.layer_norm.weight"), dm, eps)?,
                heads: cfg.num_heads,
                d_kv: cfg.d_kv,
            };
            let ff = if cfg.gated_gelu {
                FeedForward {
                    wi_0: w.linear(&format!("{f}.DenseReluDense.wi_0"), dm, cfg.d_ff, false)?,
                    wi_1: Some(w.linear(
                        &format!("{f}.DenseReluDense.wi_1"),
                        dm,
                        cfg.d_ff,
                        false,
                    )?),
                    wo: w.linear(&format!("{f}.DenseReluDense.wo"), cfg.d_ff, dm, false)?,
                    norm: T5LayerNorm::new(w, &format!("{f}.layer_norm.weight"), dm, eps)?,
                }
            } else {
                FeedForward {
                    wi_0: w.linear(&format!("{f}.DenseReluDense.wi"), dm, cfg.d_ff, false)?,
                    wi_1: None,
                    wo: w.linear(&format!("{f}.DenseReluDense.wo"), cfg.d_ff, dm, false)?,
                    norm: T5LayerNorm::new(w, &format!("{f}.layer_norm.weight"), dm, eps)?,
                }
            };
            layers.push((attn, ff));
        }
        let final_norm = T5LayerNorm::new(w, "encoder.final_layer_norm.weight", dm, eps)?;
        Ok(T5Encoder {
            embed,
            layers,
            relative_bias: relative_bias
                .ok_or_else(|| candle::Error::Msg("T5: no layers".into()))?,
            final_norm,
            cfg: cfg.clone(),
        })
    }

    /// `(1, heads, len, len)`: the relative-position bias every layer adds to its scores.
    fn position_bias(&self, len: usize, device: &Device) -> Result<Tensor> {
        let buckets: Vec<u32> = (0..len)
            .flat_map(|q| {
                (0..len).map(move |k| {
                    relative_bucket(
                        k as i64 - q as i64,
                        self.cfg.relative_attention_num_buckets,
                        self.cfg.relative_attention_max_distance,
                    ) as u32
                })
            })
            .collect();
        let idx = Tensor::from_vec(buckets, len * len, device)?;
        self.relative_bias
            .index_select(&idx, 0)?
            .reshape((len, len, self.cfg.num_heads))?
            .permute((2, 0, 1))?
            .unsqueeze(0)?
            .contiguous()
    }

    /// Token ids `(batch, len)` to the last hidden state `(batch, len, d_model)`.
    pub fn forward(&self, ids: &Tensor) -> Result<Tensor> {
        let (_, len) = ids.dims2()?;
        let bias = self.position_bias(len, ids.device())?;
        let (b, _) = ids.dims2()?;
        let mut xs =
            self.embed
                .index_select(&ids.flatten_all()?, 0)?
                .reshape((b, len, self.cfg.d_model))?;
        for (attn, ff) in &self.layers {
            xs = attn.forward(&xs, &bias)?;
            xs = ff.forward(&xs)?;
        }
        self.final_norm.forward(&xs)
    }
}

/// T5's SentencePiece tokenizer from a `tokenizer.json` (FLUX's and SD 3's `tokenizer_2`/`_3`
/// folders; transformers' `T5TokenizerFast`): ids with `</s>` appended, truncated to `max_len`
/// keeping `</s>` last, padded with `<pad>` (0) as the pipelines ask (`padding="max_length"`).
pub struct T5Tokenizer {
    inner: tokenizers::Tokenizer,
    pad_id: u32,
}

impl T5Tokenizer {
    pub fn load(path: &Path) -> std::result::Result<T5Tokenizer, DiffusionError> {
        let bad = |e: String| DiffusionError::Model(format!("{}: {e}", path.display()));
        let bytes = crate::read_file(
            path,
            pictor_core::files::CONFIG_MAX * 16,
            "a tokenizer file",
        )?;
        let mut json: Value = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        // transformers >= 5 (what diffusers runs) builds T5's tokenizer from the file's vocabulary
        // and charsmap with its own pipeline: the Precompiled normaliser alone, whitespace split
        // before Metaspace. The files' own (older) pipeline folds runs of spaces instead and
        // keeps a lone "▁" for trailing spaces; the ids differ only there.
        let precompiled = find_precompiled(&json["normalizer"])
            .ok_or_else(|| bad("no Precompiled normaliser (not a T5 tokenizer)".into()))?;
        json["normalizer"] = precompiled;
        json["pre_tokenizer"] = serde_json::json!({
            "type": "Sequence",
            "pretokenizers": [
                {"type": "WhitespaceSplit"},
                {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "always", "split": true}
            ]
        });
        let inner: tokenizers::Tokenizer =
            serde_json::from_value(json).map_err(|e| bad(e.to_string()))?;
        let pad_id = inner.token_to_id("<pad>").unwrap_or(0);
        Ok(T5Tokenizer { inner, pad_id })
    }

    /// The ids for `text`, exactly `max_len` of them: as the tokenizer with truncation to
    /// `max_len` and fixed padding would make them (the text's pieces cut to leave room for
    /// what the post-processor appends — T5's `</s>` — then `<pad>`), without cloning the
    /// tokenizer to set those options per call.
    pub fn encode(
        &self,
        text: &str,
        max_len: usize,
    ) -> std::result::Result<Vec<u32>, DiffusionError> {
        use tokenizers::PostProcessor;
        let err = |e: tokenizers::Error| DiffusionError::Invalid(format!("T5 tokenizer: {e}"));
        let mut enc = self.inner.encode(text, false).map_err(err)?;
        let added = self
            .inner
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(false));
        enc.truncate(
            max_len.saturating_sub(added),
            0,
            tokenizers::TruncationDirection::Right,
        );
        let enc = self.inner.post_process(enc, None, true).map_err(err)?;
        let mut ids = enc.get_ids().to_vec();
        ids.truncate(max_len);
        ids.resize(max_len, self.pad_id);
        Ok(ids)
    }

    /// The ids without truncation or padding (`</s>` appended).
    pub fn encode_full(&self, text: &str) -> std::result::Result<Vec<u32>, DiffusionError> {
        let enc = self
            .inner
            .encode(text, true)
            .map_err(|e| DiffusionError::Invalid(format!("T5 tokenizer: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }
}

/// The `Precompiled` normaliser, alone or inside a `Sequence`.
fn find_precompiled(v: &Value) -> Option<Value> {
    match v.get("type")?.as_str()? {
        "Precompiled" => Some(v.clone()),
        "Sequence" => v
            .get("normalizers")?
            .as_array()?
            .iter()
            .find_map(find_precompiled),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::relative_bucket;

    /// transformers' buckets for T5-XXL's 32 buckets / distance 128
    /// (`T5Attention._relative_position_bucket` over -200..=200): the exact region, the sign,
    /// every step of the logarithmic region (where float32 truncation decides) and the cap.
    #[test]
    fn buckets_match_transformers() {
        // (first relative position with this bucket, bucket), for positive positions
        let steps = [
            (1, 17),
            (2, 18),
            (3, 19),
            (4, 20),
            (5, 21),
            (6, 22),
            (7, 23),
            (8, 24),
            (12, 25),
            (16, 26),
            (23, 27),
            (32, 28),
            (46, 29),
            (64, 30),
            (91, 31),
        ];
        let mut expected = vec![0usize; 201];
        for (i, &(from, b)) in steps.iter().enumerate() {
            let to = steps.get(i + 1).map_or(201, |s| s.0);
            expected[from..to].iter_mut().for_each(|e| *e = b);
        }
        for (x, &b) in expected.iter().enumerate() {
            assert_eq!(relative_bucket(x as i64, 32, 128), b, "+{x}");
            // negative positions take the lower half
            let neg = if x == 0 { 0 } else { b - 16 };
            assert_eq!(relative_bucket(-(x as i64), 32, 128), neg, "-{x}");
        }
    }
}
