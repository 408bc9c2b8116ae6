//! A linear layer for few rows on the CPU: the weight packed once, at load.
//!
//! A text encoder multiplies 77 token rows by each weight once per prompt. A general gemm
//! copies ("packs") the weight into its kernel's panel order on every call; at 77 rows that copy
//! and the threads' hand-offs around it were a third of CLIP's time (perf, SD 1.5 text encoder:
//! microkernel 41 %, packing 17 %, thread waits 16 %). Here the weight is stored in that order
//! from the start — panels of [`NR`] output columns, `k`-major, the same memory as the float32
//! weight — and an AVX2/FMA kernel keeps a [`MR`] × [`NR`] block of the output in 12 registers
//! while it walks `k` (on AVX-512, a [`MR_512`] × 2·[`NR`] block over two panels at once, in 24
//! of its 32 registers). The panels are shared out to the rayon pool in groups; each group writes
//! its own output columns. The bias is the accumulators' starting value, and an activation
//! that follows the layer ([`Epilogue`]) is applied to each panel while it is still in the
//! cache, instead of as separate passes over the whole output (candle's quick GELU is three, on
//! its own thread pool, whose idle spinning then competes with rayon's on a small machine).
//!
//! Available on x86-64 CPUs with AVX2 and FMA ([`PackedLinear::new`] returns `None` elsewhere,
//! and the caller keeps candle's linear layer).

use std::sync::Arc;

use candle::{CpuStorage, CustomOp1, DType, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::cpu_op::{SharedOut, f32_slice};
use super::fast_math::{exp, gelu_erf};

/// What is applied to the layer's outputs before they are returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Epilogue {
    None,
    /// `x · σ(1.702 x)` (CLIP's `quick_gelu`).
    QuickGelu,
    /// The exact GELU, `x · Φ(x)` (transformers' `gelu`).
    GeluErf,
}

/// Output columns per panel: two 8-lane vectors.
pub const NR: usize = 16;
/// Rows per kernel call (2 × 6 accumulators + 2 weight vectors + 1 broadcast ≤ 16 registers).
pub const MR: usize = 6;
/// Rows per AVX-512 kernel call, over two panels (2 × 12 accumulators + 2 weight vectors of 32
/// registers).
pub const MR_512: usize = 12;
/// The `k` extent walked per panel visit: the panel's slice (`KC × NR` floats, 16 KiB) stays in
/// the L1 cache while every row block uses it.
const KC: usize = 256;
/// Panels per parallel task.
const PANELS_PER_TASK: usize = 4;

/// `y = x Wᵀ + b` for a `[out, in]` weight, packed.
#[derive(Debug, Clone)]
pub struct PackedLinear {
    inner: Arc<Packed>,
}

#[derive(Debug)]
struct Packed {
    in_dim: usize,
    out_dim: usize,
    /// `panels × in_dim × NR`: element `(p, k, j)` is `W[p·NR + j, k]`, zero past `out_dim`.
    weight: Vec<f32>,
    /// `panels × NR`, zero past `out_dim` (and all zero without a bias).
    bias: Vec<f32>,
    epilogue: Epilogue,
}

impl PackedLinear {
    /// Packs `weight` (`[out, in]`) and `bias` (`[out]`), or `None` when this CPU lacks AVX2/FMA
    /// or the weight is not on the CPU.
    pub fn new(weight: &Tensor, bias: Option<&Tensor>) -> Result<Option<Self>> {
        Self::with_epilogue(weight, bias, Epilogue::None)
    }

    /// As [`new`](Self::new), the outputs then passed through `epilogue`.
    pub fn with_epilogue(
        weight: &Tensor,
        bias: Option<&Tensor>,
        epilogue: Epilogue,
    ) -> Result<Option<Self>> {
        if !super::fast_math::avx2_fma() || !weight.device().is_cpu() {
            return Ok(None);
        }
        let (out_dim, in_dim) = weight.dims2()?;
        let weight = weight.to_dtype(DType::F32)?.contiguous()?;
        let (storage, layout) = weight.storage_and_layout();
        let candle::Storage::Cpu(storage) = &*storage else {
            return Ok(None);
        };
        let w = f32_slice(storage, layout, "linear")?;
        let panels = out_dim.div_ceil(NR);
        let mut packed = vec![0f32; panels * in_dim * NR];
        for (n, row) in w.chunks_exact(in_dim.max(1)).enumerate() {
            let (p, j) = (n / NR, n % NR);
            let panel = &mut packed[p * in_dim * NR..(p + 1) * in_dim * NR];
            for (k, &v) in row.iter().enumerate() {
                panel[k * NR + j] = v;
            }
        }
        let mut b = vec![0f32; panels * NR];
        if let Some(bias) = bias {
            let bias = bias.to_dtype(DType::F32)?.to_vec1::<f32>()?;
            if bias.len() != out_dim {
                candle::bail!("linear: {} biases for {out_dim} outputs", bias.len());
            }
            b[..out_dim].copy_from_slice(&bias);
        }
        Ok(Some(Self {
            inner: Arc::new(Packed {
                in_dim,
                out_dim,
                weight: packed,
                bias: b,
                epilogue,
            }),
        }))
    }

    /// `[…, in]` → `[…, out]`, in the input's dtype (computed in float32).
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let dtype = xs.dtype();
        let ys = xs
            .to_dtype(DType::F32)?
            .contiguous()?
            .apply_op1_no_bwd(self)?;
        ys.to_dtype(dtype)
    }
}

impl CustomOp1 for PackedLinear {
    fn name(&self) -> &'static str {
        "pictor-packed-linear"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let p = &*self.inner;
        let x = f32_slice(storage, layout, self.name())?;
        let dims = layout.shape().dims();
        let Some((&k, lead)) = dims.split_last() else {
            candle::bail!("{}: a scalar input", self.name());
        };
        if k != p.in_dim {
            candle::bail!("{}: input width {k}, weight {}", self.name(), p.in_dim);
        }
        let m: usize = lead.iter().product();
        let mut out_shape = lead.to_vec();
        out_shape.push(p.out_dim);
        let mut out = vec![0f32; m * p.out_dim];
        if m > 0 && p.out_dim > 0 {
            p.run(x, m, &mut out);
        }
        Ok((CpuStorage::F32(out), Shape::from(out_shape)))
    }
}

impl Packed {
    fn run(&self, x: &[f32], m: usize, out: &mut [f32]) {
        self.run_with(x, m, out, super::fast_math::avx512());
    }

    /// With the AVX-512 kernel (`wide`, only where the CPU has it) or the AVX2 one.
    fn run_with(&self, x: &[f32], m: usize, out: &mut [f32], wide: bool) {
        let (k, n) = (self.in_dim, self.out_dim);
        let panels = n.div_ceil(NR);
        let tasks: Vec<usize> = (0..panels).step_by(PANELS_PER_TASK).collect();
        let out_ptr = SharedOut(out.as_mut_ptr());
        tasks.par_iter().for_each(|&first| {
            let last = (first + PANELS_PER_TASK).min(panels);
            if wide {
                // SAFETY: AVX-512F was detected; the task owns panels first..last.
                unsafe { self.run_pairs(x, m, out_ptr, first, last) };
                if self.epilogue != Epilogue::None {
                    for p in first..last {
                        self.activate_panel(out_ptr, m, p);
                    }
                }
                return;
            }
            for p in first..last {
                let cols = NR.min(n - p * NR);
                let panel = &self.weight[p * k * NR..(p + 1) * k * NR];
                let bias = &self.bias[p * NR..(p + 1) * NR];
                for k0 in (0..k).step_by(KC) {
                    let kc = KC.min(k - k0);
                    for r0 in (0..m).step_by(MR) {
                        let rows = MR.min(m - r0);
                        // SAFETY: rows r0..r0+rows of x are within x ([m, k]); the panel slice
                        // covers k0..k0+kc; the output block (rows × cols at column p·NR) is
                        // written only by this task, which owns panel p.
                        unsafe {
                            block(
                                x.as_ptr().add(r0 * k + k0),
                                k,
                                panel.as_ptr().add(k0 * NR),
                                kc,
                                (k0 == 0).then_some(bias),
                                out_ptr.ptr().add(r0 * n + p * NR),
                                n,
                                rows,
                                cols,
                            );
                        }
                    }
                }
                if self.epilogue != Epilogue::None {
                    self.activate_panel(out_ptr, m, p);
                }
            }
        });
    }

    /// The epilogue on panel `p`'s columns of every row (owned by the caller's task).
    fn activate_panel(&self, out: SharedOut, m: usize, p: usize) {
        let n = self.out_dim;
        let cols = NR.min(n - p * NR);
        for r in 0..m {
            // SAFETY: row r's columns of panel p, within the [m, n] output and owned by the
            // caller's task.
            let row =
                unsafe { std::slice::from_raw_parts_mut(out.ptr().add(r * n + p * NR), cols) };
            activate(row, self.epilogue);
        }
    }

    /// Panels `first..last` two at a time (32 output columns, AVX-512), for every row block
    /// of [`MR_512`] rows and `k` block.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `x` is `[m, in_dim]`; the caller owns the panels' output columns.
    #[cfg(target_arch = "x86_64")]
    unsafe fn run_pairs(&self, x: &[f32], m: usize, out: SharedOut, first: usize, last: usize) {
        let (k, n) = (self.in_dim, self.out_dim);
        for p in (first..last).step_by(2) {
            let second = if p + 1 < last { p + 1 } else { p };
            // A lone panel (the task's last when it has an odd count) is at most NR wide: the
            // next panel belongs to another task.
            let cols = if second == p { NR } else { 2 * NR }.min(n - p * NR);
            let b0 = &self.weight[p * k * NR..(p + 1) * k * NR];
            let b1 = &self.weight[second * k * NR..(second + 1) * k * NR];
            let bias = &self.bias[p * NR..];
            for k0 in (0..k).step_by(KC) {
                let kc = KC.min(k - k0);
                for r0 in (0..m).step_by(MR_512) {
                    let rows = MR_512.min(m - r0);
                    // SAFETY: rows r0..r0+rows of x are within x; the panel slices cover
                    // k0..k0+kc; the bias has `cols` values from panel p on; the output block
                    // (rows × cols at column p·NR) is the caller's.
                    unsafe {
                        block_512(
                            x.as_ptr().add(r0 * k + k0),
                            k,
                            [b0.as_ptr().add(k0 * NR), b1.as_ptr().add(k0 * NR)],
                            kc,
                            (k0 == 0).then_some(bias),
                            out.ptr().add(r0 * n + p * NR),
                            n,
                            rows,
                            cols,
                        );
                    }
                }
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn run_pairs(&self, _: &[f32], _: usize, _: SharedOut, _: usize, _: usize) {
        unreachable!("AVX-512 is only detected on x86-64")
    }
}

super::fast_math::widest_simd! {
    fn activate(xs: &mut [f32], epilogue: Epilogue) => activate_body
}

#[inline(always)]
fn activate_body(xs: &mut [f32], epilogue: Epilogue) {
    match epilogue {
        Epilogue::None => {}
        Epilogue::QuickGelu => {
            for x in xs {
                *x /= 1.0 + exp(-1.702 * *x);
            }
        }
        Epilogue::GeluErf => {
            for x in xs {
                *x = gelu_erf(*x);
            }
        }
    }
}

/// As [`block`] for AVX-512: up to [`MR_512`] rows × up to 32 columns (`b[0]` the first
/// panel's `kc × NR` slice, `b[1]` the second's; with `cols ≤ NR` the second is not stored).
///
/// # Safety
/// As [`block`], for `cols ≤ 2·NR`; the bias (when given) holds `cols` values; the CPU has
/// AVX-512F.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn block_512(
    a: *const f32,
    lda: usize,
    b: [*const f32; 2],
    kc: usize,
    bias: Option<&[f32]>,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    let mask = |from: usize| -> u16 {
        let n = cols.saturating_sub(from).min(NR);
        ((1u32 << n) - 1) as u16
    };
    let masks = [mask(0), mask(NR)];
    // SAFETY: forwarded.
    unsafe {
        match rows {
            12 => kernel_512::<12>(a, lda, b, kc, bias, c, ldc, masks),
            11 => kernel_512::<11>(a, lda, b, kc, bias, c, ldc, masks),
            10 => kernel_512::<10>(a, lda, b, kc, bias, c, ldc, masks),
            9 => kernel_512::<9>(a, lda, b, kc, bias, c, ldc, masks),
            8 => kernel_512::<8>(a, lda, b, kc, bias, c, ldc, masks),
            7 => kernel_512::<7>(a, lda, b, kc, bias, c, ldc, masks),
            6 => kernel_512::<6>(a, lda, b, kc, bias, c, ldc, masks),
            5 => kernel_512::<5>(a, lda, b, kc, bias, c, ldc, masks),
            4 => kernel_512::<4>(a, lda, b, kc, bias, c, ldc, masks),
            3 => kernel_512::<3>(a, lda, b, kc, bias, c, ldc, masks),
            2 => kernel_512::<2>(a, lda, b, kc, bias, c, ldc, masks),
            _ => kernel_512::<1>(a, lda, b, kc, bias, c, ldc, masks),
        }
    }
}

/// `R` rows × two panels: 2·R accumulators (≤ 24) + 2 weight vectors of the 32 registers, the
/// row's value broadcast from memory into each multiply-add. Columns outside `masks` are
/// neither read nor written (masked loads do not fault).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_512<const R: usize>(
    a: *const f32,
    lda: usize,
    b: [*const f32; 2],
    kc: usize,
    bias: Option<&[f32]>,
    c: *mut f32,
    ldc: usize,
    masks: [u16; 2],
) {
    use std::arch::x86_64::*;
    // SAFETY: within the bounds the caller guarantees (see `block_512`).
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        match bias {
            Some(bias) => {
                let b0 = _mm512_maskz_loadu_ps(masks[0], bias.as_ptr());
                let b1 = _mm512_maskz_loadu_ps(masks[1], bias.as_ptr().wrapping_add(NR));
                for r in acc.iter_mut() {
                    *r = [b0, b1];
                }
            }
            None => {
                for (i, r) in acc.iter_mut().enumerate() {
                    let row = c.add(i * ldc);
                    *r = [
                        _mm512_maskz_loadu_ps(masks[0], row),
                        _mm512_maskz_loadu_ps(masks[1], row.wrapping_add(NR)),
                    ];
                }
            }
        }
        for kk in 0..kc {
            let w0 = _mm512_loadu_ps(b[0].add(kk * NR));
            let w1 = _mm512_loadu_ps(b[1].add(kk * NR));
            for (i, r) in acc.iter_mut().enumerate() {
                let x = _mm512_set1_ps(*a.add(i * lda + kk));
                r[0] = _mm512_fmadd_ps(x, w0, r[0]);
                r[1] = _mm512_fmadd_ps(x, w1, r[1]);
            }
        }
        for (i, r) in acc.iter().enumerate() {
            let row = c.add(i * ldc);
            _mm512_mask_storeu_ps(row, masks[0], r[0]);
            _mm512_mask_storeu_ps(row.wrapping_add(NR), masks[1], r[1]);
        }
    }
}

/// One `rows × cols` output block (`rows ≤ MR`, `cols ≤ NR`) over `kc` steps of `k`: starts
/// from `bias` when given, else from the block's current values.
///
/// # Safety
/// `a` is readable for `rows` rows of stride `lda` and `kc` columns; `b` for `kc × NR`; `c` is
/// writable for `rows` rows of stride `ldc` and `cols` columns, owned by the caller.
#[allow(clippy::too_many_arguments)]
unsafe fn block(
    a: *const f32,
    lda: usize,
    b: *const f32,
    kc: usize,
    bias: Option<&[f32]>,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    // SAFETY: forwarded; the caller checked AVX2/FMA when it packed the weight.
    unsafe {
        match rows {
            6 => kernel::<6>(a, lda, b, kc, bias, c, ldc, cols),
            5 => kernel::<5>(a, lda, b, kc, bias, c, ldc, cols),
            4 => kernel::<4>(a, lda, b, kc, bias, c, ldc, cols),
            3 => kernel::<3>(a, lda, b, kc, bias, c, ldc, cols),
            2 => kernel::<2>(a, lda, b, kc, bias, c, ldc, cols),
            _ => kernel::<1>(a, lda, b, kc, bias, c, ldc, cols),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel<const R: usize>(
    a: *const f32,
    lda: usize,
    b: *const f32,
    kc: usize,
    bias: Option<&[f32]>,
    c: *mut f32,
    ldc: usize,
    cols: usize,
) {
    use std::arch::x86_64::*;
    // SAFETY: within the bounds the caller guarantees (see `block`); unaligned loads/stores.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        let mut edge = [0f32; NR];
        match bias {
            Some(bias) => {
                let b0 = _mm256_loadu_ps(bias.as_ptr());
                let b1 = _mm256_loadu_ps(bias.as_ptr().add(8));
                for r in acc.iter_mut() {
                    *r = [b0, b1];
                }
            }
            None => {
                for (i, r) in acc.iter_mut().enumerate() {
                    let row = c.add(i * ldc);
                    if cols == NR {
                        *r = [_mm256_loadu_ps(row), _mm256_loadu_ps(row.add(8))];
                    } else {
                        std::ptr::copy_nonoverlapping(row, edge.as_mut_ptr(), cols);
                        *r = [
                            _mm256_loadu_ps(edge.as_ptr()),
                            _mm256_loadu_ps(edge.as_ptr().add(8)),
                        ];
                    }
                }
            }
        }
        for kk in 0..kc {
            let w0 = _mm256_loadu_ps(b.add(kk * NR));
            let w1 = _mm256_loadu_ps(b.add(kk * NR + 8));
            for (i, r) in acc.iter_mut().enumerate() {
                let x = _mm256_broadcast_ss(&*a.add(i * lda + kk));
                r[0] = _mm256_fmadd_ps(x, w0, r[0]);
                r[1] = _mm256_fmadd_ps(x, w1, r[1]);
            }
        }
        for (i, r) in acc.iter().enumerate() {
            let row = c.add(i * ldc);
            if cols == NR {
                _mm256_storeu_ps(row, r[0]);
                _mm256_storeu_ps(row.add(8), r[1]);
            } else {
                _mm256_storeu_ps(edge.as_mut_ptr(), r[0]);
                _mm256_storeu_ps(edge.as_mut_ptr().add(8), r[1]);
                std::ptr::copy_nonoverlapping(edge.as_ptr(), row, cols);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel<const R: usize>(
    _a: *const f32,
    _lda: usize,
    _b: *const f32,
    _kc: usize,
    _bias: Option<&[f32]>,
    _c: *mut f32,
    _ldc: usize,
    _cols: usize,
) {
    unreachable!("PackedLinear::new returns None off x86-64")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::cpu_op::max_abs_diff;
    use candle::{Device, Module};

    fn check(m: usize, k: usize, n: usize, bias: bool) {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (n, k), &dev).unwrap();
        let b = Tensor::randn(0f32, 1.0, n, &dev).unwrap();
        let x = Tensor::randn(0f32, 1.0, (2, m, k), &dev).unwrap();
        let reference = candle_nn::Linear::new(w.clone(), bias.then(|| b.clone()));
        let Some(packed) = PackedLinear::new(&w, bias.then_some(&b)).unwrap() else {
            eprintln!("no AVX2/FMA on this CPU: the packed linear layer is not used here");
            return;
        };
        let got = packed.forward(&x).unwrap();
        let want = reference.forward(&x).unwrap();
        assert_eq!(got.dims(), &[2, m, n]);
        // Sums of k products of unit normals (|y| ~ √k) in another order: measured 1.4e-4 at
        // k = 768, 1.3e-7 at k = 3; the bound is about ten times that.
        let tol = 2e-6 * k as f32;
        let diff = max_abs_diff(&got, &want);
        assert!(diff <= tol, "m {m} k {k} n {n}: {diff} > {tol}");
        // The AVX2 kernel too, where the CPU would pick the AVX-512 one.
        if crate::net::fast_math::avx512() {
            let xs = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let mut out = vec![0f32; 2 * m * n];
            packed.inner.run_with(&xs, 2 * m, &mut out, false);
            let got = Tensor::from_vec(out, (2, m, n), &dev).unwrap();
            let diff = max_abs_diff(&got, &want);
            assert!(diff <= tol, "AVX2, m {m} k {k} n {n}: {diff} > {tol}");
        }
    }

    #[test]
    fn matches_candle_at_every_edge() {
        // Full and partial row blocks, panels and k blocks; several tasks.
        check(77, 768, 768, true);
        check(1, 3, 5, true);
        check(7, 300, 40, false);
        check(13, 513, 100, true);
        check(6, 256, 16, true);
        // AVX-512: 12-row blocks and panel pairs, the last pair partial (115 columns: 7 full
        // panels and one of 3). Lone last panels: 40 columns (3 panels) and 5 (1) above.
        check(25, 64, 16 * 7 + 3, true);
        check(12, 40, 32, false);
    }

    #[test]
    fn activations_follow_the_layer() {
        let dev = Device::Cpu;
        let (m, k, n) = (77, 96, 200);
        let w = Tensor::randn(0f32, 0.3, (n, k), &dev).unwrap();
        let b = Tensor::randn(0f32, 1.0, n, &dev).unwrap();
        let x = Tensor::randn(0f32, 1.0, (m, k), &dev).unwrap();
        let y = candle_nn::Linear::new(w.clone(), Some(b.clone()))
            .forward(&x)
            .unwrap();
        let quick = (&y * candle_nn::ops::sigmoid(&(&y * 1.702).unwrap()).unwrap()).unwrap();
        for (epilogue, want) in [
            (Epilogue::QuickGelu, quick),
            (Epilogue::GeluErf, y.gelu_erf().unwrap()),
        ] {
            let Some(p) = PackedLinear::with_epilogue(&w, Some(&b), epilogue).unwrap() else {
                return;
            };
            let diff = max_abs_diff(&p.forward(&x).unwrap(), &want);
            assert!(diff < 2e-5, "{epilogue:?}: {diff}");
        }
    }

    #[test]
    fn wrong_width_is_an_error() {
        let dev = Device::Cpu;
        let w = Tensor::zeros((4, 8), DType::F32, &dev).unwrap();
        if let Some(p) = PackedLinear::new(&w, None).unwrap() {
            let x = Tensor::zeros((2, 7), DType::F32, &dev).unwrap();
            assert!(p.forward(&x).is_err());
        }
    }
}
