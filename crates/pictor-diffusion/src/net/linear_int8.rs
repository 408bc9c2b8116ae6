//! 8-bit linear layers for the UNet (`unet_weights = "int8"`): integer products on AVX-512 VNNI.
//!
//! The weight is quantised once, at load, per output channel (`w ≈ s_c · q`, `q` in −127..127,
//! `s_c = max|w_c| / 127`); each call quantises its input rows the same way per row (`x ≈ s_r ·
//! a`), so `y[r, c] = s_r · s_c · Σ_k a[r, k] · q[c, k] + b[c]` is one integer dot product per
//! output, which `vpdpbusd` does 64 multiply-adds at a time (four times float32's 16 per FMA).
//! `vpdpbusd` multiplies unsigned by signed bytes, so the inputs are stored offset by 128 and
//! `128 · Σ_k q[c, k]` (kept per column) is taken off the sums; the sums stay inside `i32`
//! (at most 255 · 127 · k, k ≤ 65 536; wider layers stay float).
//!
//! Layout: panels of 16 output columns; within a panel, for every 4 consecutive `k`, the 16
//! columns' 4 bytes (one 512-bit vector). The kernel keeps a 12-row × 32-column block of sums in
//! 24 registers and walks `k`, reading two weight vectors and broadcasting 4 input bytes per row
//! per step. The rayon pool takes blocks of rows × panel pairs; a pair's weights (≤ 32 · k
//! bytes) stay in the L2 cache while the block's rows pass over them.
//!
//! A quarter of float32's memory for these layers (plus 8 bytes per output column). The
//! rounding is looser than float32's: docs/models.md states what the parity fixtures measure.
//! Only on x86-64 CPUs with AVX-512 VNNI ([`Int8Linear::new`] returns `None` elsewhere, and
//! the layer stays float32).

use std::sync::Arc;

use candle::{Result, Tensor};
use rayon::prelude::*;

use super::cpu_op::{SharedOut, f32_slice};

/// Output columns per panel (one 512-bit vector of `i32` sums).
const NR: usize = 16;
/// Rows per kernel call (12 × 2 panels = 24 accumulators of the 32 registers).
const MR: usize = 12;
/// Row blocks per parallel task: the task's input rows (`ROW_BLOCKS · MR · k` bytes) stay in
/// the L2 cache while it passes over its panel pairs.
const ROW_BLOCKS: usize = 8;
/// Panel pairs per parallel task.
const PAIRS_PER_TASK: usize = 4;
/// The widest input a layer may have: the integer sums (at most 255 · 127 per input, and the
/// `128 · Σ q` correction) stay inside `i32`.
const MAX_IN: usize = 65_536;

/// `y = x Wᵀ + b` with `W` quantised to 8 bits per output channel.
#[derive(Debug, Clone)]
pub struct Int8Linear {
    inner: Arc<Packed>,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
struct Packed {
    in_dim: usize,
    out_dim: usize,
    /// `in_dim` rounded up to a multiple of 4 (the padding is zero weights).
    k4: usize,
    /// `panels × (k4 / 4) × NR × 4`: byte `(p, g, j, t)` is `q[p·NR + j, 4g + t]`.
    weight: Vec<i8>,
    /// `128 · Σ_k q[c, k]` per output column (`panels · NR` of them, zero past `out_dim`).
    offset: Vec<i32>,
    /// `s_c` per output column (as `offset`).
    scale: Vec<f32>,
    /// `b[c]`, zero without a bias (as `offset`).
    bias: Vec<f32>,
}

/// Whether this CPU has the instructions the kernel uses.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `codes = round(x / s)` for `s = max|x| / 127`, returning `s`: all zero codes with `s = 1` for
/// a zero row (or one so small that `127 / max|x|` overflows: subnormals), and `s = NaN` for a
/// row with a NaN or an infinity (so its products are NaN, as float32's would be).
fn quantise_row(xs: &[f32], codes: &mut [i8]) -> f32 {
    let (mut amax, mut finite) = (0f32, true);
    for &v in xs {
        finite &= v.is_finite();
        amax = amax.max(v.abs());
    }
    let inv = 127.0 / amax;
    if !finite || !inv.is_finite() {
        codes.iter_mut().for_each(|c| *c = 0);
        return if finite { 1.0 } else { f32::NAN };
    }
    let s = amax / 127.0;
    for (c, &v) in codes.iter_mut().zip(xs) {
        *c = (v * inv).round_ties_even().clamp(-127.0, 127.0) as i8;
    }
    s
}

/// [`quantise_row`] for an input row, its codes stored offset by 128 (`u8`), in 512-bit vectors:
/// the same products and the same rounding (to nearest, ties to even), so the same codes.
///
/// # Safety
/// The CPU has AVX-512 F and BW ([`available`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn quantise_input(xs: &[f32], out: &mut [u8]) -> f32 {
    use std::arch::x86_64::*;
    debug_assert_eq!(xs.len(), out.len());
    let len = xs.len();
    let tail = |i: usize| -> __mmask16 { ((1u32 << (len - i).min(16)) - 1) as __mmask16 };
    let (mut amax, mut finite) = (_mm512_setzero_ps(), 0xffffu16);
    let limit = _mm512_set1_ps(f32::MAX);
    for i in (0..len).step_by(16) {
        let mask = tail(i);
        // SAFETY: the masked lanes are within `xs`.
        let v = _mm512_abs_ps(unsafe { _mm512_maskz_loadu_ps(mask, xs.as_ptr().add(i)) });
        // NaN compares false (ordered): a lane that is not finite clears its bit.
        finite &= _mm512_cmp_ps_mask::<_CMP_LE_OQ>(v, limit) | !mask;
        amax = _mm512_max_ps(amax, v);
    }
    let amax = _mm512_reduce_max_ps(amax);
    let inv = 127.0 / amax;
    if finite != 0xffff || !inv.is_finite() {
        out.iter_mut().for_each(|c| *c = 128);
        return if finite == 0xffff { 1.0 } else { f32::NAN };
    }
    let inv = _mm512_set1_ps(inv);
    let offset = _mm512_set1_epi32(128);
    for i in (0..len).step_by(16) {
        let mask = tail(i);
        // SAFETY: the masked lanes are within `xs` and `out`.
        unsafe {
            let v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, xs.as_ptr().add(i)), inv);
            // To nearest, ties to even (as `round_ties_even`), whatever the MXCSR says: |v| ≤ 127
            // after rounding.
            let q =
                _mm512_cvt_roundps_epi32::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(v);
            let q = _mm512_add_epi32(q, offset);
            _mm512_mask_cvtepi32_storeu_epi8(out.as_mut_ptr().add(i).cast(), mask, q);
        }
    }
    amax / 127.0
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn quantise_input(_: &[f32], _: &mut [u8]) -> f32 {
    unreachable!("int8 linear layers are made only on x86-64")
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Int8Linear({} → {})", self.in_dim, self.out_dim)
    }
}

impl Int8Linear {
    /// Quantises `weight` (`[out, in]`, float32 on the CPU) and keeps `bias` (`[out]`), or `None`
    /// (the caller keeps the layer in float) when this CPU lacks AVX-512 VNNI, the weight is not
    /// a float32 CPU tensor, has more than [`MAX_IN`] inputs, or holds a NaN or an infinity.
    pub fn new(weight: &Tensor, bias: Option<&Tensor>) -> Result<Option<Self>> {
        let (out_dim, in_dim) = weight.dims2()?;
        if !available()
            || !weight.device().is_cpu()
            || weight.dtype() != candle::DType::F32
            || in_dim == 0
            || in_dim > MAX_IN
            || out_dim == 0
        {
            return Ok(None);
        }
        let w = weight.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        let panels = out_dim.div_ceil(NR);
        let mut bias = match bias {
            Some(b) => b.to_dtype(candle::DType::F32)?.to_vec1::<f32>()?,
            None => vec![0.0; out_dim],
        };
        if bias.len() != out_dim {
            candle::bail!(
                "int8 linear: a bias of {} for {out_dim} outputs",
                bias.len()
            );
        }
        bias.resize(panels * NR, 0.0);
        let k4 = in_dim.next_multiple_of(4);
        let groups = k4 / 4;
        let mut weight = vec![0i8; panels * groups * NR * 4];
        let mut offset = vec![0i32; panels * NR];
        let mut scale = vec![0f32; panels * NR];
        // One panel per task: its 16 rows of `w` quantised and interleaved.
        let finite = weight
            .par_chunks_mut(groups * NR * 4)
            .zip(offset.par_chunks_mut(NR))
            .zip(scale.par_chunks_mut(NR))
            .enumerate()
            .try_for_each(|(p, ((panel, offset), scale))| {
                let mut codes = vec![0i8; in_dim];
                for j in 0..NR.min(out_dim - p * NR) {
                    let c = p * NR + j;
                    let s = quantise_row(&w[c * in_dim..(c + 1) * in_dim], &mut codes);
                    if !s.is_finite() {
                        return Err(c);
                    }
                    scale[j] = s;
                    offset[j] = 128 * codes.iter().map(|&q| i32::from(q)).sum::<i32>();
                    for (k, &q) in codes.iter().enumerate() {
                        panel[(k / 4) * NR * 4 + j * 4 + k % 4] = q;
                    }
                }
                Ok(())
            });
        if let Err(c) = finite {
            tracing::warn!(
                "a {out_dim}×{in_dim} layer has a non-finite weight (output {c}): it stays float"
            );
            return Ok(None);
        }
        Ok(Some(Self {
            inner: Arc::new(Packed {
                in_dim,
                out_dim,
                k4,
                weight,
                offset,
                scale,
                bias,
            }),
        }))
    }

    pub fn out_dim(&self) -> usize {
        self.inner.out_dim
    }

    /// `x Wᵀ + b` for `x` of `[…, in]`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let p = &*self.inner;
        let dims = x.dims();
        let Some((&k, lead)) = dims.split_last() else {
            candle::bail!("int8 linear: a scalar input");
        };
        if k != p.in_dim {
            candle::bail!("int8 linear: {k} inputs for a layer of {}", p.in_dim);
        }
        let m: usize = lead.iter().product();
        let x = x.to_dtype(candle::DType::F32)?.contiguous()?;
        let (guard, layout) = x.storage_and_layout();
        let candle::Storage::Cpu(storage) = &*guard else {
            candle::bail!("int8 linear: CPU tensors only");
        };
        let out = p.run(f32_slice(storage, layout, "int8 linear")?, m);
        drop(guard);
        let mut shape = lead.to_vec();
        shape.push(p.out_dim);
        Tensor::from_vec(out, shape, x.device())
    }
}

impl Packed {
    /// The `[m, out]` product of `m` row-major input rows.
    fn run(&self, xs: &[f32], m: usize) -> Vec<f32> {
        let (k, k4) = (self.in_dim, self.k4);
        // The rows quantised, stored offset by 128 (unsigned) and padded with zero's code (128),
        // in a buffer the calling thread keeps (the UNet's inputs reach 20 MB: fresh pages each
        // call were a tenth of the time).
        thread_local! {
            static ROWS: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
        }
        let mut a = ROWS.take();
        a.clear();
        a.resize(m * k4, 128);
        let mut row_scale = vec![0f32; m];
        a.par_chunks_mut(k4)
            .zip(row_scale.par_iter_mut())
            .zip(xs.par_chunks(k))
            .for_each(|((a, s), x)| {
                // SAFETY: `available()` held when the layer was made.
                *s = unsafe { quantise_input(x, &mut a[..k]) };
            });
        let out = self.multiply(&a, &row_scale, m);
        ROWS.set(a);
        out
    }

    /// The `[m, out]` product of quantised rows.
    fn multiply(&self, a: &[u8], row_scale: &[f32], m: usize) -> Vec<f32> {
        let n = self.out_dim;
        let mut out = vec![0f32; m * n];
        let panels = n.div_ceil(NR);
        let pairs = panels.div_ceil(2);
        let row_tasks = m.div_ceil(MR * ROW_BLOCKS);
        let pair_tasks = pairs.div_ceil(PAIRS_PER_TASK);
        let out_ptr = SharedOut(out.as_mut_ptr());
        (0..row_tasks * pair_tasks).into_par_iter().for_each(|t| {
            let (rt, pt) = (t / pair_tasks, t % pair_tasks);
            let rows = rt * MR * ROW_BLOCKS..((rt + 1) * MR * ROW_BLOCKS).min(m);
            let pairs = pt * PAIRS_PER_TASK..((pt + 1) * PAIRS_PER_TASK).min(pairs);
            for pair in pairs {
                let first = 2 * pair;
                let count = (panels - first).min(2);
                for r0 in rows.clone().step_by(MR) {
                    let r = MR.min(rows.end - r0);
                    // SAFETY: `available()` held when the layer was made; the block's rows and
                    // panels are within `a`, the weights and the `[m, n]` output, and this task
                    // alone writes them.
                    unsafe {
                        self.block(a, row_scale, r0, r, first, count, out_ptr);
                    }
                }
            }
        });
        out
    }

    /// Rows `r0..r0 + r` (`r ≤ MR`) × panels `first..first + count` (`count` 1 or 2).
    ///
    /// # Safety
    /// The CPU has AVX-512 F, BW and VNNI; the block is within the operands; no other thread
    /// writes its part of `out`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn block(
        &self,
        a: &[u8],
        row_scale: &[f32],
        r0: usize,
        r: usize,
        first: usize,
        count: usize,
        out: SharedOut,
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            macro_rules! rows {
                ($p:literal) => {
                    match r {
                        1 => unsafe { kernel::<1, $p>(self, a, row_scale, r0, first, out) },
                        2 => unsafe { kernel::<2, $p>(self, a, row_scale, r0, first, out) },
                        3 => unsafe { kernel::<3, $p>(self, a, row_scale, r0, first, out) },
                        4 => unsafe { kernel::<4, $p>(self, a, row_scale, r0, first, out) },
                        5 => unsafe { kernel::<5, $p>(self, a, row_scale, r0, first, out) },
                        6 => unsafe { kernel::<6, $p>(self, a, row_scale, r0, first, out) },
                        7 => unsafe { kernel::<7, $p>(self, a, row_scale, r0, first, out) },
                        8 => unsafe { kernel::<8, $p>(self, a, row_scale, r0, first, out) },
                        9 => unsafe { kernel::<9, $p>(self, a, row_scale, r0, first, out) },
                        10 => unsafe { kernel::<10, $p>(self, a, row_scale, r0, first, out) },
                        11 => unsafe { kernel::<11, $p>(self, a, row_scale, r0, first, out) },
                        _ => unsafe { kernel::<MR, $p>(self, a, row_scale, r0, first, out) },
                    }
                };
            }
            if count == 2 { rows!(2) } else { rows!(1) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (a, row_scale, r0, r, first, count, out);
            unreachable!("int8 linear layers are made only on x86-64");
        }
    }
}

/// `R` rows × `P` panels of the output, all of `k`.
///
/// # Safety
/// As [`Packed::block`], with `R` the block's rows and `P` its panels.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn kernel<const R: usize, const P: usize>(
    p: &Packed,
    a: &[u8],
    row_scale: &[f32],
    r0: usize,
    first: usize,
    out: SharedOut,
) {
    use std::arch::x86_64::*;
    let groups = p.k4 / 4;
    let panel_len = groups * NR * 4;
    let n = p.out_dim;
    let mut acc = [[_mm512_setzero_si512(); P]; R];
    let a_rows: [*const u8; R] = std::array::from_fn(|i| a[(r0 + i) * p.k4..].as_ptr());
    let w = p.weight[first * panel_len..].as_ptr();
    for g in 0..groups {
        let mut wv = [_mm512_setzero_si512(); P];
        for (j, wv) in wv.iter_mut().enumerate() {
            // SAFETY: panel first + j's group g, 64 bytes inside the weight.
            *wv = unsafe { _mm512_loadu_si512(w.add(j * panel_len + g * NR * 4).cast()) };
        }
        for (i, acc) in acc.iter_mut().enumerate() {
            // SAFETY: row r0 + i's bytes 4g..4g + 4, inside its k4 bytes.
            let x = unsafe { a_rows[i].add(4 * g).cast::<i32>().read_unaligned() };
            let x = _mm512_set1_epi32(x);
            for j in 0..P {
                acc[j] = _mm512_dpbusd_epi32(acc[j], x, wv[j]);
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        let r = r0 + i;
        let s = _mm512_set1_ps(row_scale[r]);
        for (j, &acc) in acc.iter().enumerate() {
            let c = (first + j) * NR;
            // The last panel's columns past `n` are not stored.
            let mask = ((1u32 << (n - c).min(NR)) - 1) as __mmask16;
            // SAFETY: columns c..c + 16 of the per-column vectors (padded to whole panels) and
            // the masked ones of row r's output.
            unsafe {
                let off = _mm512_loadu_si512(p.offset[c..].as_ptr().cast());
                let sums = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc, off));
                let sc = _mm512_mul_ps(s, _mm512_loadu_ps(p.scale[c..].as_ptr()));
                let y = _mm512_fmadd_ps(sums, sc, _mm512_loadu_ps(p.bias[c..].as_ptr()));
                _mm512_mask_storeu_ps(out.ptr().add(r * n + c), mask, y);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use candle::{Device, Module};

    /// The same arithmetic in plain integers: the kernel must give it exactly (up to the
    /// float32 epilogue's one rounding).
    fn reference(
        w: &[f32],
        b: Option<&[f32]>,
        x: &[f32],
        (m, k, n): (usize, usize, usize),
    ) -> Vec<f32> {
        let mut out = vec![0f32; m * n];
        let mut wq = vec![0i8; k];
        let mut xq = vec![0i8; k];
        for c in 0..n {
            let sw = quantise_row(&w[c * k..(c + 1) * k], &mut wq);
            for r in 0..m {
                let sx = quantise_row(&x[r * k..(r + 1) * k], &mut xq);
                let dot: i32 = wq
                    .iter()
                    .zip(&xq)
                    .map(|(&a, &b)| i32::from(a) * i32::from(b))
                    .sum();
                out[r * n + c] = dot as f32 * (sx * sw) + b.map_or(0.0, |b| b[c]);
            }
        }
        out
    }

    #[test]
    fn matches_the_integer_arithmetic_and_the_float_layer() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI (the int8 layers stay float32 here)");
            return;
        }
        let dev = Device::Cpu;
        // k not a multiple of 4, one panel (odd panel count), output widths that end inside a
        // panel, with and without a bias.
        // Every row count of a block (1..=12) and of a task's rows (up to 96) and past them.
        let rows = (1..=25).map(|m| (m, 37, 37, m % 2 == 0));
        for (m, k, n, bias) in rows.chain([
            (1, 8, 16, true),
            (3, 8, 8, true),
            (13, 37, 48, false),
            (30, 33, 37, true),
            (25, 64, 32, true),
            (97, 130, 80, true),
            (200, 320, 640, false),
        ]) {
            let w = Tensor::randn(0f32, 0.05, (n, k), &dev).unwrap();
            let b = Tensor::randn(0f32, 0.1, n, &dev).unwrap();
            let x = Tensor::randn(0f32, 1.0, (m, k), &dev).unwrap();
            let layer = Int8Linear::new(&w, bias.then_some(&b)).unwrap().unwrap();
            let got = layer.forward(&x).unwrap();
            assert_eq!(got.dims(), &[m, n]);
            let got = got.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let bv = b.to_vec1::<f32>().unwrap();
            let want = reference(
                &w.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                bias.then_some(bv.as_slice()),
                &x.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                (m, k, n),
            );
            for (g, w) in got.iter().zip(&want) {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "{m}×{k}×{n}: {g} vs {w}"
                );
            }
            // And near the float32 layer: 8-bit rounding of both operands.
            let float = candle_nn::Linear::new(w.clone(), bias.then(|| b.clone()))
                .forward(&x)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            let scale = float.iter().fold(0f32, |m, v| m.max(v.abs()));
            let err = got
                .iter()
                .zip(&float)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(err < 0.03 * scale, "{m}×{k}×{n}: {err} of {scale}");
        }
    }

    #[test]
    fn leading_dimensions_and_bad_inputs() {
        if !available() {
            eprintln!("skipped: this CPU has no AVX-512 VNNI");
            return;
        }
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 0.05, (32, 24), &dev).unwrap();
        let layer = Int8Linear::new(&w, None).unwrap().unwrap();
        let x = Tensor::randn(0f32, 1.0, (2, 3, 24), &dev).unwrap();
        let y = layer.forward(&x).unwrap();
        assert_eq!(y.dims(), &[2, 3, 32]);
        let flat = layer.forward(&x.reshape((6, 24)).unwrap()).unwrap();
        assert_eq!(
            y.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            flat.flatten_all().unwrap().to_vec1::<f32>().unwrap()
        );
        // A zero row is exactly the bias (here zero), a NaN row NaN (as float32's); a wrong
        // width is an error.
        let zeros = layer
            .forward(&Tensor::zeros((1, 24), candle::DType::F32, &dev).unwrap())
            .unwrap();
        assert!(
            zeros
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
                .iter()
                .all(|&v| v == 0.0)
        );
        assert!(
            layer
                .forward(&Tensor::zeros((1, 25), candle::DType::F32, &dev).unwrap())
                .is_err()
        );
        let mut row = [0.5f32; 24];
        row[3] = f32::NAN;
        let nan = layer.forward(&Tensor::new(&[row], &dev).unwrap()).unwrap();
        assert!(
            nan.flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
                .iter()
                .all(|v| v.is_nan())
        );
        // Subnormal inputs (127 / max overflows) count as zero, in the kernel and the reference.
        let tiny = layer
            .forward(&Tensor::new(&[[1e-40f32; 24]], &dev).unwrap())
            .unwrap();
        assert!(
            tiny.flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
                .iter()
                .all(|&v| v == 0.0)
        );
        let mut codes = [5i8; 24];
        assert_eq!(quantise_row(&[1e-40f32; 24], &mut codes), 1.0);
        assert_eq!(codes, [0; 24]);
        // A weight with an infinity (or too wide a layer) stays float.
        let mut bad = vec![0.01f32; 32 * 24];
        bad[40] = f32::INFINITY;
        let bad = Tensor::from_vec(bad, (32, 24), &dev).unwrap();
        assert!(Int8Linear::new(&bad, None).unwrap().is_none());
        let wide = Tensor::zeros((16, MAX_IN + 4), candle::DType::F32, &dev).unwrap();
        assert!(Int8Linear::new(&wide, None).unwrap().is_none());
    }
}
