//! A faster float32 CPU convolution than candle 0.11's for the shapes Stable Diffusion uses.
//!
//! candle's general path converts the whole input to NHWC on one thread, gathers 512-pixel
//! im2col tiles element by element and scatters the results back; on this workload it spent
//! more time moving data than multiplying (VAE decode at 512² 2.3× torch's time). Here the work
//! is split by whole output rows, so every copy is a contiguous run in NCHW:
//!
//! - the im2col block of a band of rows, `[c_in·kh·kw, rows·out_w]` in PyTorch's weight order
//!   (no reordering of the weights), is filled row run by row run (stride 1: a `copy_from_slice`
//!   per input row and tap);
//! - one gemm per band writes `[c_out, rows·out_w]` straight into the output, whose channel
//!   planes hold the band contiguously, on top of the bias (`dst = bias + W·col`);
//! - 1×1 convolutions with stride 1 skip im2col: the input band is already `[c_in, pixels]`.
//!
//! Bands run in parallel on the rayon pool, each gemm single-threaded; when there are fewer
//! bands than threads (small feature maps) the bands run one after another and the gemm uses all
//! threads. Anything else (other dtypes, GPUs, dilation, groups) goes to candle's own
//! convolution.

use candle::{CpuStorage, CustomOp3, DType, Layout, Module, Result, Shape, Tensor};
use rayon::prelude::*;

/// Output pixels per band (rounded to whole rows): large enough for gemm to run near its peak,
/// small enough for the im2col block (`c_in·9` × this × 4 bytes, ≈ 19 MB at 512 channels) to
/// stay cheap.
const BAND_PIXELS: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct FastConv {
    stride: usize,
    padding: usize,
}

impl FastConv {
    fn out_size(&self, i: usize, k: usize) -> usize {
        (i + 2 * self.padding - k) / self.stride + 1
    }
}

/// A pointer to the output shared by the bands, which write disjoint regions.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: each band writes only its own rows of every channel plane (disjoint ranges).
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

impl Out {
    fn ptr(self) -> *mut f32 {
        self.0
    }
}

impl CustomOp3 for FastConv {
    fn name(&self) -> &'static str {
        "pictor-conv2d"
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
        let (CpuStorage::F32(x), CpuStorage::F32(w), CpuStorage::F32(bias)) = (s1, s2, s3) else {
            candle::bail!("pictor-conv2d: float32 only");
        };
        let (Some((xo, _)), Some((wo, _)), Some((bo, _))) = (
            l1.contiguous_offsets(),
            l2.contiguous_offsets(),
            l3.contiguous_offsets(),
        ) else {
            candle::bail!("pictor-conv2d: contiguous tensors only");
        };
        let (b, c_in, h, w_in) = l1.shape().dims4()?;
        let (c_out, c_in_w, kh, kw) = l2.shape().dims4()?;
        if c_in_w != c_in || l3.shape().elem_count() != c_out {
            candle::bail!("pictor-conv2d: shapes do not match");
        }
        let (x, wt, bias) = (&x[xo..], &w[wo..], &bias[bo..]);
        let (oh, ow) = (self.out_size(h, kh), self.out_size(w_in, kw));
        let plane = oh * ow;
        let k = c_in * kh * kw;
        let mut out = vec![0f32; b * c_out * plane];
        for (i, v) in out.iter_mut().enumerate() {
            *v = bias[(i / plane) % c_out];
        }
        let rows_per_band = (BAND_PIXELS / ow.max(1)).max(1);
        let bands: Vec<(usize, usize)> = (0..b)
            .flat_map(|bi| (0..oh).step_by(rows_per_band).map(move |r| (bi, r)))
            .collect();
        let threads = rayon::current_num_threads().max(1);
        let out_ptr = Out(out.as_mut_ptr());
        let pointwise = kh == 1 && kw == 1 && self.stride == 1 && self.padding == 0;
        let band = |&(bi, r0): &(usize, usize), par: gemm::Parallelism| {
            let rows = rows_per_band.min(oh - r0);
            let n = rows * ow;
            let xb = &x[bi * c_in * h * w_in..(bi + 1) * c_in * h * w_in];
            let col_owned;
            // The right-hand side [k, n] and its row stride.
            let (rhs, rhs_rs): (&[f32], usize) = if pointwise {
                (&xb[r0 * ow..], h * w_in)
            } else {
                col_owned = self.im2col(xb, c_in, h, w_in, kh, kw, r0, rows, ow);
                (&col_owned, n)
            };
            // SAFETY: dst rows `co` of this band are out[bi][co][r0*ow .. r0*ow + n], in bounds
            // and disjoint from every other band's; lhs is [c_out, k] and rhs [k, n] with the
            // strides given, both within their slices.
            unsafe {
                let dst = out_ptr.ptr().add(bi * c_out * plane + r0 * ow);
                gemm::gemm(
                    c_out,
                    n,
                    k,
                    dst,
                    1,
                    plane as isize,
                    true,
                    wt.as_ptr(),
                    1,
                    k as isize,
                    rhs.as_ptr(),
                    1,
                    rhs_rs as isize,
                    1.0,
                    1.0,
                    false,
                    false,
                    false,
                    par,
                );
            }
        };
        if bands.len() >= threads && threads > 1 {
            bands
                .par_iter()
                .for_each(|bd| band(bd, gemm::Parallelism::None));
        } else {
            let par = if threads > 1 {
                gemm::Parallelism::Rayon(threads)
            } else {
                gemm::Parallelism::None
            };
            bands.iter().for_each(|bd| band(bd, par));
        }
        Ok((CpuStorage::F32(out), Shape::from((b, c_out, oh, ow))))
    }
}

impl FastConv {
    /// The im2col block of output rows `r0 .. r0 + rows`: row `(ci·kh + ky)·kw + kx`, column
    /// `local_row·ow + ox`, holding `x[ci][oy·s + ky − p][ox·s + kx − p]` (0 outside).
    #[allow(clippy::too_many_arguments)]
    fn im2col(
        &self,
        x: &[f32],
        c_in: usize,
        h: usize,
        w: usize,
        kh: usize,
        kw: usize,
        r0: usize,
        rows: usize,
        ow: usize,
    ) -> Vec<f32> {
        let n = rows * ow;
        let (s, p) = (self.stride, self.padding as isize);
        let mut col = vec![0f32; c_in * kh * kw * n];
        col.par_chunks_mut(kh * kw * n)
            .with_min_len(8)
            .enumerate()
            .for_each(|(ci, chunk)| {
                let xc = &x[ci * h * w..(ci + 1) * h * w];
                for ky in 0..kh {
                    for kx in 0..kw {
                        let dst = &mut chunk[(ky * kw + kx) * n..(ky * kw + kx + 1) * n];
                        // Output columns whose input column is inside the picture.
                        let lo = ((p - kx as isize).max(0) as usize).div_ceil(s);
                        let hi = if (w as isize + p - kx as isize) <= 0 {
                            0
                        } else {
                            ((w as isize + p - kx as isize - 1) as usize / s + 1).min(ow)
                        };
                        for lr in 0..rows {
                            let iy = ((r0 + lr) * s + ky) as isize - p;
                            if iy < 0 || iy >= h as isize || lo >= hi {
                                continue;
                            }
                            let src_row = &xc[iy as usize * w..(iy as usize + 1) * w];
                            let d = &mut dst[lr * ow..(lr + 1) * ow];
                            let ix0 = (lo * s) as isize + kx as isize - p;
                            if s == 1 {
                                let len = hi - lo;
                                d[lo..hi]
                                    .copy_from_slice(&src_row[ix0 as usize..ix0 as usize + len]);
                            } else {
                                for (j, ox) in (lo..hi).enumerate() {
                                    d[ox] = src_row[ix0 as usize + j * s];
                                }
                            }
                        }
                    }
                }
            });
        col
    }
}

/// A 2-D convolution: Pictor's CPU path for float32, candle's otherwise.
#[derive(Debug, Clone)]
pub struct Conv2d {
    inner: candle_nn::Conv2d,
    /// The bias, zeros when the convolution has none (the fast path always adds one).
    bias: Tensor,
    fast: Option<FastConv>,
}

impl Conv2d {
    pub fn new(inner: candle_nn::Conv2d) -> Result<Conv2d> {
        let cfg = *inner.config();
        let fast = (cfg.dilation == 1 && cfg.groups == 1 && fast_enabled()).then_some(FastConv {
            stride: cfg.stride,
            padding: cfg.padding,
        });
        let w = inner.weight();
        let bias = match inner.bias() {
            Some(b) => b.contiguous()?,
            None => Tensor::zeros(w.dim(0)?, w.dtype(), w.device())?,
        };
        Ok(Conv2d { inner, bias, fast })
    }
}

/// `PICTOR_CANDLE_CONV=1` turns the fast path off (for comparison).
fn fast_enabled() -> bool {
    std::env::var("PICTOR_CANDLE_CONV").map_or(true, |v| v != "1")
}

impl Module for Conv2d {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let weight = self.inner.weight();
        match self.fast {
            Some(op)
                if x.device().is_cpu()
                    && x.dtype() == DType::F32
                    && weight.dtype() == DType::F32 =>
            {
                x.contiguous()?
                    .apply_op3_no_bwd(&weight.contiguous()?, &self.bias, &op)
            }
            _ => self.inner.forward(x),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use candle::Device;

    /// Pictor's path against candle's own, over the shapes the networks use: 3×3 with padding,
    /// strided downsampling, 1×1, odd sizes, batches, bias or none.
    #[test]
    fn matches_candles_convolution() {
        let dev = Device::Cpu;
        for &(b, ci, co, h, w, k, stride, pad, bias) in &[
            (1, 4, 8, 9, 7, 3, 1, 1, true),
            (2, 3, 5, 16, 33, 3, 1, 1, false),
            (1, 8, 8, 17, 16, 3, 2, 0, true),
            (1, 8, 8, 16, 16, 3, 2, 1, true),
            (1, 6, 4, 40, 40, 1, 1, 0, true),
            (1, 6, 4, 5, 5, 1, 2, 0, false),
            (1, 2, 3, 64, 70, 3, 1, 1, true),
        ] {
            let x = Tensor::randn(0f32, 1f32, (b, ci, h, w), &dev).unwrap();
            let wt = Tensor::randn(0f32, 1f32, (co, ci, k, k), &dev).unwrap();
            let bs = bias.then(|| Tensor::randn(0f32, 1f32, co, &dev).unwrap());
            let cfg = candle_nn::Conv2dConfig {
                padding: pad,
                stride,
                ..Default::default()
            };
            let reference = candle_nn::Conv2d::new(wt, bs, cfg);
            let want = reference.forward(&x).unwrap();
            let got = Conv2d::new(reference).unwrap().forward(&x).unwrap();
            assert_eq!(got.dims(), want.dims());
            let d = (got - want)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(d < 1e-4, "{b}x{ci}x{h}x{w} k{k} s{stride} p{pad}: {d}");
        }
    }
}
