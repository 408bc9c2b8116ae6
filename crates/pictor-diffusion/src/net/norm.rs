//! Group normalisation on the CPU in one pass over the output, optionally with the SiLU that
//! follows it in every resnet block.
//!
//! candle's `GroupNorm` is eight tensor operations (sum, subtract, square, sum, divide,
//! multiply, add, then SiLU as two more), each a full pass over the feature map with a fresh
//! allocation: for the VAE decoder's 128 × 512 × 512 maps that is 134 MB written and read again
//! per step, sixty times a decode. Here a group's statistics take two reads (mean, then the
//! centred sum of squares, accumulated in float64 across blocks) and the output one write,
//! `x · scale + shift` per channel with `scale = γ / σ` and `shift = β − μ · scale` (as
//! PyTorch's CPU kernel computes it), SiLU applied on the value in a register. Groups run in
//! parallel on the rayon pool. On other devices and dtypes it is candle's `GroupNorm` (and
//! candle's SiLU).
use candle::{CpuStorage, CustomOp3, DType, Layout, Module, Result, Shape, Tensor};
use candle_nn::VarBuilder;
use rayon::prelude::*;

use super::cpu_op::f32_slice;
use super::fast_math::{exp, sum_f64, widest_simd};

/// `PICTOR_UNFUSED_NORM=1` runs candle's GroupNorm and SiLU instead (for comparison).
fn fused_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("PICTOR_UNFUSED_NORM").map_or(true, |v| v != "1"))
}

#[derive(Debug, Clone)]
pub struct GroupNorm {
    weight: Tensor,
    bias: Tensor,
    groups: usize,
    eps: f64,
    inner: candle_nn::GroupNorm,
}

/// candle_nn's `group_norm` (weight defaults to ones, bias to zeros).
pub fn group_norm(groups: usize, channels: usize, eps: f64, vs: VarBuilder) -> Result<GroupNorm> {
    let weight = vs.get_with_hints(channels, "weight", candle_nn::Init::Const(1.))?;
    let bias = vs.get_with_hints(channels, "bias", candle_nn::Init::Const(0.))?;
    GroupNorm::new(weight, bias, groups, eps)
}

impl GroupNorm {
    /// From `γ` and `β` (`[channels]` each).
    pub fn new(weight: Tensor, bias: Tensor, groups: usize, eps: f64) -> Result<Self> {
        let channels = weight.elem_count();
        let inner = candle_nn::GroupNorm::new(weight.clone(), bias.clone(), channels, groups, eps)?;
        Ok(Self {
            weight,
            bias,
            groups,
            eps,
            inner,
        })
    }

    /// `silu(group_norm(xs))`.
    pub fn forward_silu(&self, xs: &Tensor) -> Result<Tensor> {
        self.run(xs, true)
    }

    fn run(&self, xs: &Tensor, silu: bool) -> Result<Tensor> {
        let fused = fused_enabled()
            && xs.device().is_cpu()
            && [xs, &self.weight, &self.bias]
                .iter()
                .all(|t| t.dtype() == DType::F32);
        if fused {
            xs.contiguous()?.apply_op3_no_bwd(
                &self.weight.contiguous()?,
                &self.bias.contiguous()?,
                &FusedGroupNorm {
                    groups: self.groups,
                    eps: self.eps,
                    silu,
                },
            )
        } else if silu {
            candle_nn::ops::silu(&self.inner.forward(xs)?)
        } else {
            self.inner.forward(xs)
        }
    }
}

impl Module for GroupNorm {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        self.run(xs, false)
    }
}

/// The CPU operation: `(x, γ, β)` with `x` `[batch, channels, …]`, float32, contiguous.
#[derive(Debug, Clone, Copy)]
struct FusedGroupNorm {
    groups: usize,
    eps: f64,
    silu: bool,
}

impl CustomOp3 for FusedGroupNorm {
    fn name(&self) -> &'static str {
        "pictor-group-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, self.name())?;
        let w = f32_slice(s2, l2, self.name())?;
        let b = f32_slice(s3, l3, self.name())?;
        let dims = l1.dims();
        if dims.len() < 3 {
            candle::bail!("pictor-group-norm: the input needs [batch, channels, …]");
        }
        let channels = dims[1];
        let per_channel: usize = dims[2..].iter().product();
        if self.groups == 0 || !channels.is_multiple_of(self.groups) {
            candle::bail!(
                "pictor-group-norm: {channels} channels in {} groups",
                self.groups
            );
        }
        if w.len() != channels || b.len() != channels {
            candle::bail!("pictor-group-norm: weight or bias is not [{channels}]");
        }
        let per_group = channels / self.groups * per_channel;
        let mut out = vec![0f32; x.len()];
        if per_group == 0 {
            return Ok((CpuStorage::F32(out), l1.shape().clone()));
        }
        out.par_chunks_mut(per_group)
            .zip(x.par_chunks(per_group))
            .enumerate()
            .for_each(|(i, (out, x))| {
                let first = i % self.groups * (channels / self.groups);
                let (w, b) = (&w[first..], &b[first..]);
                normalise_group(out, x, w, b, per_channel, self.eps, self.silu);
            });
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

/// `LayerNorm(x) · (1 + scale) + shift` without affine weights (eps 1e-6), the adaptive norm of
/// FLUX's and SD 3's blocks: `x` `(batch, len, hidden)`, `shift` and `scale` `(batch, 1,
/// hidden)`. One pass per row on the CPU in float32 (statistics summed as the group norm's);
/// elsewhere candle's operations.
pub fn modulated_layer_norm(x: &Tensor, shift: &Tensor, scale: &Tensor) -> Result<Tensor> {
    if x.device().is_cpu() && x.dtype() == DType::F32 && x.rank() == 3 {
        return x.contiguous()?.apply_op3_no_bwd(
            &shift.contiguous()?,
            &scale.contiguous()?,
            &ModulatedLayerNorm { eps: 1e-6 },
        );
    }
    let mean = x.mean_keepdim(candle::D::Minus1)?;
    let centred = x.broadcast_sub(&mean)?;
    let var = centred.sqr()?.mean_keepdim(candle::D::Minus1)?;
    let normed = centred.broadcast_div(&(var + 1e-6)?.sqrt()?)?;
    normed.broadcast_mul(&(scale + 1.0)?)?.broadcast_add(shift)
}

struct ModulatedLayerNorm {
    eps: f64,
}

impl CustomOp3 for ModulatedLayerNorm {
    fn name(&self) -> &'static str {
        "pictor-modulated-layer-norm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let x = f32_slice(s1, l1, self.name())?;
        let shift = f32_slice(s2, l2, self.name())?;
        let scale = f32_slice(s3, l3, self.name())?;
        let (b, len, hidden) = l1.shape().dims3()?;
        if l2.dims() != [b, 1, hidden] || l3.dims() != [b, 1, hidden] {
            candle::bail!(
                "pictor-modulated-layer-norm: shift {:?} and scale {:?} for x {:?}",
                l2.dims(),
                l3.dims(),
                l1.dims()
            );
        }
        let mut out = vec![0f32; x.len()];
        if hidden > 0 && len > 0 {
            out.par_chunks_mut(hidden)
                .zip(x.par_chunks(hidden))
                .enumerate()
                .for_each(|(r, (out, x))| {
                    let at = r / len * hidden;
                    modulate_row(
                        out,
                        x,
                        &shift[at..at + hidden],
                        &scale[at..at + hidden],
                        self.eps,
                    );
                });
        }
        Ok((CpuStorage::F32(out), l1.shape().clone()))
    }
}

widest_simd! {
    fn modulate_row(out: &mut [f32], x: &[f32], shift: &[f32], scale: &[f32], eps: f64) => modulate_row_body
}

#[inline(always)]
fn modulate_row_body(out: &mut [f32], x: &[f32], shift: &[f32], scale: &[f32], eps: f64) {
    let n = x.len() as f64;
    let mean = sum_f64(x, |v| v) / n;
    let centre = mean as f32;
    let var = sum_f64(x, |v| (v - centre) * (v - centre)) / n;
    let rstd = (1.0 / (var + eps).sqrt()) as f32;
    for (((o, &x), &sh), &sc) in out.iter_mut().zip(x).zip(shift).zip(scale) {
        *o = (x - centre) * rstd * (1.0 + sc) + sh;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::net::cpu_op::max_abs_diff;
    use candle::Device;

    /// Against candle's GroupNorm (and SiLU): shapes with one and many groups, a 1-D map, an
    /// offset mean far from zero (where `x · scale + shift` must not lose the small part), and a
    /// non-contiguous input.
    #[test]
    fn matches_candles_group_norm() {
        let dev = Device::Cpu;
        for (shape, groups, offset) in [
            (vec![2, 64, 9, 7], 32, 0.0),
            (vec![1, 32, 33, 31], 32, 0.0),
            (vec![2, 12, 5], 3, 0.0),
            (vec![1, 8, 16, 16], 1, 50.0),
            (vec![3, 4, 2, 2], 4, -3.0),
        ] {
            let channels = shape[1];
            let x = (Tensor::randn(0f32, 2f32, shape.as_slice(), &dev).unwrap() + offset).unwrap();
            let w = Tensor::randn(1f32, 0.5f32, channels, &dev).unwrap();
            let b = Tensor::randn(0f32, 0.5f32, channels, &dev).unwrap();
            let ours = GroupNorm::new(w, b, groups, 1e-6).unwrap();
            let want = ours.inner.forward(&x).unwrap();
            let got = ours.forward(&x).unwrap();
            assert!(
                max_abs_diff(&got, &want) < 2e-5,
                "{shape:?}: {}",
                max_abs_diff(&got, &want)
            );
            let want = candle_nn::ops::silu(&want).unwrap();
            let got = ours.forward_silu(&x).unwrap();
            assert!(max_abs_diff(&got, &want) < 2e-5, "{shape:?} silu");
        }
        // [2, 5, 8, 6] seen as [2, 6, 8, 5]: strided.
        let x = Tensor::randn(0f32, 1f32, (2, 5, 8, 6), &dev)
            .unwrap()
            .transpose(1, 3)
            .unwrap();
        let w = Tensor::randn(1f32, 0.5f32, 6, &dev).unwrap();
        let b = Tensor::randn(0f32, 0.5f32, 6, &dev).unwrap();
        let norm = GroupNorm::new(w, b, 2, 1e-5).unwrap();
        let want = norm.inner.forward(&x).unwrap();
        assert!(max_abs_diff(&norm.forward(&x).unwrap(), &want) < 2e-5);
    }

    /// The fused adaptive layer norm against candle's operations, a batch of two with its own
    /// modulations, and a row far from zero.
    #[test]
    fn modulated_layer_norm_matches_candle() {
        let dev = Device::Cpu;
        let x = (Tensor::randn(0f32, 2f32, (2, 7, 96), &dev).unwrap() + 30.0).unwrap();
        let shift = Tensor::randn(0f32, 1f32, (2, 1, 96), &dev).unwrap();
        let scale = Tensor::randn(0f32, 1f32, (2, 1, 96), &dev).unwrap();
        let got = modulated_layer_norm(&x, &shift, &scale).unwrap();
        let mean = x.mean_keepdim(2).unwrap();
        let c = x.broadcast_sub(&mean).unwrap();
        let var = c.sqr().unwrap().mean_keepdim(2).unwrap();
        let want = c
            .broadcast_div(&(var + 1e-6).unwrap().sqrt().unwrap())
            .unwrap()
            .broadcast_mul(&(&scale + 1.0).unwrap())
            .unwrap()
            .broadcast_add(&shift)
            .unwrap();
        assert!(
            max_abs_diff(&got, &want) < 2e-5,
            "{}",
            max_abs_diff(&got, &want)
        );
        let bad = Tensor::zeros((1, 1, 95), DType::F32, &dev).unwrap();
        assert!(modulated_layer_norm(&x, &bad, &bad).is_err());
    }

    #[test]
    fn channels_not_divisible_by_groups_is_an_error() {
        let dev = Device::Cpu;
        let x = Tensor::zeros((1, 6, 2, 2), DType::F32, &dev).unwrap();
        let w = Tensor::ones(6, DType::F32, &dev).unwrap();
        let b = Tensor::zeros(6, DType::F32, &dev).unwrap();
        let op = FusedGroupNorm {
            groups: 4,
            eps: 1e-5,
            silu: false,
        };
        assert!(x.apply_op3_no_bwd(&w, &b, &op).is_err());
    }
}

widest_simd! {
    fn normalise_group(
        out: &mut [f32],
        x: &[f32],
        w: &[f32],
        b: &[f32],
        per_channel: usize,
        eps: f64,
        silu: bool,
    ) => normalise_group_body
}

/// One group: its statistics, then every channel's `x · scale + shift` (and SiLU), `w` and `b`
/// starting at the group's first channel.
#[inline(always)]
fn normalise_group_body(
    out: &mut [f32],
    x: &[f32],
    w: &[f32],
    b: &[f32],
    per_channel: usize,
    eps: f64,
    silu: bool,
) {
    let n = x.len() as f64;
    let mean = sum_f64(x, |v| v) / n;
    let centre = mean as f32;
    let var = sum_f64(x, |v| (v - centre) * (v - centre)) / n;
    let rstd = 1.0 / (var + eps).sqrt();
    for (c, (out, x)) in out
        .chunks_mut(per_channel)
        .zip(x.chunks(per_channel))
        .enumerate()
    {
        let scale = (f64::from(w[c]) * rstd) as f32;
        let shift = (f64::from(b[c]) - mean * f64::from(scale)) as f32;
        if silu {
            for (o, &v) in out.iter_mut().zip(x) {
                let y = v * scale + shift;
                *o = y / (1.0 + exp(-y));
            }
        } else {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = v * scale + shift;
            }
        }
    }
}
