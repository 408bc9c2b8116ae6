//! The UNet's linear layers, with the weight kept transposed.
//!
//! candle's `Linear` multiplies by `Wᵀ`, a strided view of the `[out, in]` weight: gemm then
//! packs it for every call by gathering single elements (a tenth of an SDXL step went to gemm's
//! packing, its stores one float at a time). Kept as `Wᵀ` (`[in, out]`, contiguous, made once
//! at load and in place of the original, so no extra memory), every row of the packed matrix is
//! a contiguous run; and the leading dimensions are folded into one gemm of all the rows.
//! Measured on `[4096, 640] × [640, 5120]` (release, 2 threads, AVX-512): 277 → 290 GFLOP/s.

use candle::{Module, Result, Tensor};
use candle_nn as nn;

/// How a network keeps its linear layers' weights.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Weights {
    /// As the files hold them, in float32 (or the device's dtype).
    #[default]
    Float,
    /// 8 bits per weight with a scale per output channel, inputs quantised per row, multiplied
    /// in integers ([`super::linear_int8`]) — on CPUs with AVX-512 VNNI; elsewhere (or on a
    /// GPU) the layers stay float.
    Int8,
}

/// `y = x W + b` with `W` stored `[in, out]`, or quantised to 8 bits.
#[derive(Debug, Clone)]
pub struct Linear {
    kind: Kind,
    span: tracing::Span,
}

#[derive(Debug, Clone)]
enum Kind {
    Float {
        weight_t: Tensor,
        bias: Option<Tensor>,
    },
    Int8(super::linear_int8::Int8Linear),
}

impl Linear {
    /// From a `[out, in]` weight (as the files hold it) and an optional `[out]` bias.
    pub fn new(weight: Tensor, bias: Option<Tensor>) -> Result<Self> {
        Ok(Self {
            kind: Kind::Float {
                weight_t: transposed(&weight)?,
                bias,
            },
            span: tracing::span!(tracing::Level::TRACE, "linear"),
        })
    }

    /// As [`Linear::new`], in 8 bits when `weights` asks for it and this CPU and the layer's
    /// shape allow ([`super::linear_int8::Int8Linear::new`]).
    pub fn with_weights(weight: Tensor, bias: Option<Tensor>, weights: Weights) -> Result<Self> {
        if weights == Weights::Int8
            && let Some(q) = super::linear_int8::Int8Linear::new(&weight, bias.as_ref())?
        {
            return Ok(Self {
                kind: Kind::Int8(q),
                span: tracing::span!(tracing::Level::TRACE, "linear-int8"),
            });
        }
        Self::new(weight, bias)
    }

    /// Whether the layer multiplies in 8 bits.
    pub fn is_int8(&self) -> bool {
        matches!(self.kind, Kind::Int8(_))
    }
}

/// `weightᵀ`, contiguous: on the CPU in float32 by tiles on the rayon pool (candle's strided
/// copy walks it one element at a time on one thread: seconds of a UNet's load).
fn transposed(weight: &Tensor) -> Result<Tensor> {
    let (rows, cols) = weight.dims2()?;
    if weight.device().is_cpu() && weight.dtype() == candle::DType::F32 {
        let w = weight.contiguous()?;
        let (storage, layout) = w.storage_and_layout();
        if let candle::Storage::Cpu(storage) = &*storage {
            let src = super::cpu_op::f32_slice(storage, layout, "linear")?;
            let t = super::cpu_op::transpose_par(src, rows, cols);
            return Tensor::from_vec(t, (cols, rows), weight.device());
        }
    }
    weight.t()?.contiguous()
}

impl Module for Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let _enter = self.span.enter();
        let (weight_t, bias) = match &self.kind {
            Kind::Float { weight_t, bias } => (weight_t, bias),
            Kind::Int8(q) => return q.forward(x),
        };
        let dims = x.dims();
        let Some((&k, lead)) = dims.split_last() else {
            candle::bail!("linear: a scalar input");
        };
        let rows: usize = lead.iter().product();
        let y = x.reshape((rows, k))?.matmul(weight_t)?;
        let y = match bias {
            Some(b) => y.broadcast_add(b)?,
            None => y,
        };
        let mut out = lead.to_vec();
        out.push(weight_t.dim(1)?);
        y.reshape(out)
    }
}

/// A linear layer with a bias, read from `vs` (`weight`, `bias`).
pub fn linear(
    in_dim: usize,
    out_dim: usize,
    vs: nn::VarBuilder,
    weights: Weights,
) -> Result<Linear> {
    let l = nn::linear(in_dim, out_dim, vs)?;
    Linear::with_weights(l.weight().clone(), l.bias().cloned(), weights)
}

/// A linear layer without a bias.
pub fn linear_no_bias(
    in_dim: usize,
    out_dim: usize,
    vs: nn::VarBuilder,
    weights: Weights,
) -> Result<Linear> {
    let l = nn::linear_no_bias(in_dim, out_dim, vs)?;
    Linear::with_weights(l.weight().clone(), None, weights)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use candle::Device;

    #[test]
    fn matches_candles_linear() {
        let dev = Device::Cpu;
        for (shape, bias) in [
            (vec![2, 7, 12], true),
            (vec![5, 12], false),
            (vec![1, 2, 3, 12], true),
        ] {
            // 33 × 12: a partial band of 32 rows in the transposition.
            let w = Tensor::randn(0f32, 1.0, (33, 12), &dev).unwrap();
            let b = Tensor::randn(0f32, 1.0, 33, &dev).unwrap();
            let x = Tensor::randn(0f32, 1.0, shape.as_slice(), &dev).unwrap();
            // A non-contiguous input too.
            let xt = x.t().unwrap().contiguous().unwrap().t().unwrap();
            let want = nn::Linear::new(w.clone(), bias.then(|| b.clone()))
                .forward(&x)
                .unwrap();
            let ours = Linear::new(w, bias.then_some(b)).unwrap();
            for x in [&x, &xt] {
                let got = ours.forward(x).unwrap();
                assert_eq!(got.dims(), want.dims());
                assert!(crate::net::cpu_op::max_abs_diff(&got, &want) < 1e-5);
            }
        }
    }
}
