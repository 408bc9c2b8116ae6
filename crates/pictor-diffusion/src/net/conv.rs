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
//! - 3×3 convolutions with stride 1 and padding 1 between wide layers (both sides at least
//!   [`WINOGRAD_MIN_CHANNELS`] channels: the UNet's and the VAE's resnets, most of the work) use
//!   Winograd's minimal filtering F(2×2, 3×3) (Lavin & Gray, 2016): each 2×2 block of outputs
//!   comes from a 4×4 block of inputs through 16 element-wise products of transformed inputs and
//!   transformed weights, summed over the input channels by 16 gemms — 4 multiplications per
//!   output and input channel instead of 9 (2.25× less gemm work), the transforms being a few
//!   additions. The weights are transformed at each call (a few per cent of the layer's time
//!   even on the 8×8 maps, and no second copy of the weights in memory: kept, the transformed
//!   weights would take 16/9 of the UNet's convolution weights, 1.7 GB more for SD 1.5).
//!   F(2,3)'s transforms use only 0, ±1 and ±½, so its rounding stays close to the direct
//!   sum's (checked against it).
//!
//! Bands run in parallel on the rayon pool, each gemm single-threaded; when there are fewer
//! bands than threads (small feature maps) the bands run one after another and the gemm uses all
//! threads. Anything else (other dtypes, GPUs, dilation, groups) goes to candle's own
//! convolution.

use candle::{CpuStorage, CustomOp3, DType, Layout, Module, Result, Shape, Tensor};
use rayon::prelude::*;

use super::cpu_op::{SharedOut, f32_slice};

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
        let x = f32_slice(s1, l1, self.name())?;
        let wt = f32_slice(s2, l2, self.name())?;
        let bias = f32_slice(s3, l3, self.name())?;
        let (b, c_in, h, w_in) = l1.shape().dims4()?;
        let (c_out, c_in_w, kh, kw) = l2.shape().dims4()?;
        if c_in_w != c_in || l3.shape().elem_count() != c_out {
            candle::bail!("pictor-conv2d: shapes do not match");
        }
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
        let out_ptr = SharedOut(out.as_mut_ptr());
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

/// Layers narrower than this (in or out) keep the im2col path: their gemms are too thin for the
/// 16 smaller ones to pay for the transforms.
pub const WINOGRAD_MIN_CHANNELS: usize = 32;

/// Feature maps smaller than this (32×32) keep the im2col path: their gemms would be too short
/// (a few dozen tiles against a thousand channels) to pay for packing the 16 weight matrices.
/// Measured here (2 threads, 3×3, stride 1): 320 channels at 64² 27 ms against 48, 640 at 32²
/// 36 against 48, 128 at 256² 85 against 171, 64 at 256² 22 against 56; but 1280 at 16² 96
/// against 46.
pub const WINOGRAD_MIN_PIXELS: usize = 1024;

/// Output tiles (2×2 pixels each) per band of the Winograd path: 256 tiles, 1024 output pixels,
/// as the im2col path's bands.
const WINOGRAD_BAND_TILES: usize = 256;

/// The weights `g` (`[c_out, c_in, 3, 3]`) of a 3×3 convolution transformed for F(2×2, 3×3):
/// `U = G g Gᵀ` for every (output, input) channel pair, as 16 matrices `[c_out, c_in]` (one per
/// element of the 4×4 tile), each the left-hand side of one gemm.
fn winograd_weights(g: &[f32], pairs: usize) -> Vec<f32> {
    // Blocks of pairs, each transformed into a small [16, block] buffer and copied out as 16
    // contiguous runs (writing the 16 matrices element by element would touch 16 pages far
    // apart at every step).
    const BLOCK: usize = 1024;
    let mut u = vec![0f32; 16 * pairs];
    let up = SharedOut(u.as_mut_ptr());
    let len = u.len();
    (0..pairs.div_ceil(BLOCK)).into_par_iter().for_each(|blk| {
        let p0 = blk * BLOCK;
        let n = BLOCK.min(pairs - p0);
        let mut local = vec![0f32; 16 * n];
        for q in 0..n {
            let k = &g[(p0 + q) * 9..(p0 + q) * 9 + 9];
            // G = [[1, 0, 0], [½, ½, ½], [½, −½, ½], [0, 0, 1]]; first t = G g (4×3).
            let mut t = [[0f32; 3]; 4];
            for j in 0..3 {
                let (a, b, c) = (k[j], k[3 + j], k[6 + j]);
                t[0][j] = a;
                t[1][j] = 0.5 * (a + b + c);
                t[2][j] = 0.5 * (a - b + c);
                t[3][j] = c;
            }
            // Then U = t Gᵀ (4×4).
            for (i, row) in t.iter().enumerate() {
                let (a, b, c) = (row[0], row[1], row[2]);
                let vals = [a, 0.5 * (a + b + c), 0.5 * (a - b + c), c];
                for (j, v) in vals.into_iter().enumerate() {
                    local[(i * 4 + j) * n + q] = v;
                }
            }
        }
        for xi in 0..16 {
            debug_assert!(xi * pairs + p0 + n <= len);
            // SAFETY: block `blk` owns `ξ·pairs + p0 .. ξ·pairs + p0 + n` of `u` (in bounds),
            // disjoint from every other block's runs; no other reference to it exists.
            let run = unsafe { std::slice::from_raw_parts_mut(up.ptr().add(xi * pairs + p0), n) };
            run.copy_from_slice(&local[xi * n..(xi + 1) * n]);
        }
    });
    u
}

/// F(2×2, 3×3) for a 3×3 convolution with stride 1 and padding 1 (input, weights, bias).
#[derive(Debug, Clone, Copy)]
struct WinogradConv;

impl CustomOp3 for WinogradConv {
    fn name(&self) -> &'static str {
        "pictor-conv2d-winograd"
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
        let g = f32_slice(s2, l2, self.name())?;
        let bias = f32_slice(s3, l3, self.name())?;
        let (b, c_in, h, w) = l1.shape().dims4()?;
        let (c_out, c_in_w, kh, kw) = l2.shape().dims4()?;
        if c_in_w != c_in || (kh, kw) != (3, 3) || l3.shape().elem_count() != c_out {
            candle::bail!("pictor-conv2d-winograd: shapes do not match");
        }
        let u = winograd_weights(&g[..c_out * c_in * 9], c_out * c_in);
        let plane = h * w;
        let (th, tw) = (h.div_ceil(2), w.div_ceil(2));
        let rows_per_band = (WINOGRAD_BAND_TILES / tw.max(1)).max(1);
        let bands: Vec<(usize, usize)> = (0..b)
            .flat_map(|bi| (0..th).step_by(rows_per_band).map(move |r| (bi, r)))
            .collect();
        let threads = rayon::current_num_threads().max(1);
        let mut out = vec![0f32; b * c_out * plane];
        let out_ptr = SharedOut(out.as_mut_ptr());
        let band = |&(bi, tr0): &(usize, usize), par: gemm::Parallelism| {
            let trows = rows_per_band.min(th - tr0);
            let t = trows * tw;
            let xb = &x[bi * c_in * plane..(bi + 1) * c_in * plane];
            // V[ξ][ci][tile] = Bᵀ d B of the 4×4 input block (zero outside the picture), a row
            // of tiles at a time so every step is a loop over the row's tiles.
            let mut v = vec![0f32; 16 * c_in * t];
            let vstride = c_in * t;
            let vp = SharedOut(v.as_mut_ptr());
            let fill = |ci: usize| {
                winograd_fill(
                    &xb[ci * plane..(ci + 1) * plane],
                    vp,
                    ci * t,
                    vstride,
                    tw,
                    trows,
                    tr0,
                    h,
                    w,
                )
            };
            // The channels are filled one by one (each writes its own columns of every V
            // matrix); in parallel only when the band is alone on the pool.
            if matches!(par, gemm::Parallelism::None) {
                (0..c_in).for_each(fill);
            } else {
                (0..c_in).into_par_iter().for_each(fill);
            }
            // M[ξ] = U[ξ] · V[ξ]: [c_out, t] each.
            let mut m = vec![0f32; 16 * c_out * t];
            for xi in 0..16 {
                // SAFETY: U[ξ] is [c_out, c_in], V[ξ] [c_in, t] and M[ξ] [c_out, t], row-major
                // with the strides given, all within their buffers.
                unsafe {
                    gemm::gemm(
                        c_out,
                        t,
                        c_in,
                        m.as_mut_ptr().add(xi * c_out * t),
                        1,
                        t as isize,
                        false,
                        u.as_ptr().add(xi * c_out * c_in),
                        1,
                        c_in as isize,
                        v.as_ptr().add(xi * vstride),
                        1,
                        t as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        par,
                    );
                }
            }
            drop(v);
            // Y = Aᵀ M A (2×2 outputs per tile), plus the bias, into the output planes, a row
            // of tiles at a time.
            let store = |co: usize| {
                // This band's output rows of plane (bi, co).
                let (oy0, oy1) = (2 * tr0, (2 * (tr0 + trows)).min(h));
                // SAFETY: rows oy0 .. oy1 of plane (bi, co) are in bounds and written by this
                // band and this output channel only: no other reference to them exists.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(
                        out_ptr.ptr().add((bi * c_out + co) * plane + oy0 * w),
                        (oy1 - oy0) * w,
                    )
                };
                winograd_store(&m, co * t, c_out * t, bias[co], dst, tw, trows, tr0, h, w);
            };
            if matches!(par, gemm::Parallelism::None) {
                (0..c_out).for_each(store);
            } else {
                (0..c_out).into_par_iter().for_each(store);
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
        Ok((CpuStorage::F32(out), Shape::from((b, c_out, h, w))))
    }
}

super::fast_math::widest_simd! {
    /// Channel `xc` of a band's input into its columns `col0 ..` of every `V[ξ]` (row stride
    /// `vstride`): `Bᵀ d B` of each tile's 4×4 input block, zero outside the picture.
    fn winograd_fill(
        xc: &[f32],
        v: SharedOut,
        col0: usize,
        vstride: usize,
        tw: usize,
        trows: usize,
        tr0: usize,
        h: usize,
        w: usize,
    ) => winograd_fill_body
}

/// See [`winograd_fill`]; writes only its own runs of `V`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn winograd_fill_body(
    xc: &[f32],
    v: SharedOut,
    col0: usize,
    vstride: usize,
    tw: usize,
    trows: usize,
    tr0: usize,
    h: usize,
    w: usize,
) {
    // The row's odd and even columns: od[k] = x[2k − 1], ev[k] = x[2k] (0 outside).
    let mut od = vec![0f32; tw + 1];
    let mut ev = vec![0f32; tw + 1];
    // r[row][j][tile]: the block's row `row` transformed by B on the right.
    let mut r = vec![0f32; 16 * tw];
    for ty in 0..trows {
        let y0 = (2 * (tr0 + ty)) as isize - 1;
        for row in 0..4 {
            let y = y0 + row as isize;
            let rr = &mut r[row * 4 * tw..(row + 1) * 4 * tw];
            if y < 0 || y >= h as isize {
                rr.fill(0.0);
                continue;
            }
            let src = &xc[y as usize * w..(y as usize + 1) * w];
            od[0] = 0.0;
            for (k, o) in od.iter_mut().enumerate().skip(1) {
                *o = src.get(2 * k - 1).copied().unwrap_or(0.0);
            }
            for (k, e) in ev.iter_mut().enumerate() {
                *e = src.get(2 * k).copied().unwrap_or(0.0);
            }
            // B = [[1, 0, 0, 0], [0, 1, −1, 1], [−1, 1, 1, 0], [0, 0, 0, −1]] on
            // d = (od[k], ev[k], od[k + 1], ev[k + 1]).
            let (r0, rest) = rr.split_at_mut(tw);
            let (r1, rest) = rest.split_at_mut(tw);
            let (r2, r3) = rest.split_at_mut(tw);
            for k in 0..tw {
                let (d0, d1, d2, d3) = (od[k], ev[k], od[k + 1], ev[k + 1]);
                r0[k] = d0 - d2;
                r1[k] = d1 + d2;
                r2[k] = d2 - d1;
                r3[k] = d1 - d3;
            }
        }
        // Bᵀ on the left: rows 0..4 of the block combined, for each column j.
        let at = ty * tw;
        for j in 0..4 {
            let row = |n: usize| &r[(n * 4 + j) * tw..(n * 4 + j + 1) * tw];
            let (a, b2, c, d) = (row(0), row(1), row(2), row(3));
            for (i, op) in [0usize, 1, 2, 3].into_iter().enumerate() {
                let start = (i * 4 + j) * vstride + col0 + at;
                // SAFETY: channel `ci` owns the run `start .. start + tw` of V (in
                // bounds): every other channel's runs lie elsewhere, so this is the
                // only reference to it.
                let dst = unsafe { std::slice::from_raw_parts_mut(v.ptr().add(start), tw) };
                match op {
                    0 => dst
                        .iter_mut()
                        .enumerate()
                        .for_each(|(k, o)| *o = a[k] - c[k]),
                    1 => dst
                        .iter_mut()
                        .enumerate()
                        .for_each(|(k, o)| *o = b2[k] + c[k]),
                    2 => dst
                        .iter_mut()
                        .enumerate()
                        .for_each(|(k, o)| *o = c[k] - b2[k]),
                    _ => dst
                        .iter_mut()
                        .enumerate()
                        .for_each(|(k, o)| *o = b2[k] - d[k]),
                }
            }
        }
    }
}

super::fast_math::widest_simd! {
    /// One output channel of a band: `Aᵀ M A` of each tile (row `row0 ..` of every `M[ξ]`,
    /// `mstride` apart) plus the bias, into `dst` (the band's output rows of the plane).
    fn winograd_store(
        m: &[f32],
        row0: usize,
        mstride: usize,
        bias: f32,
        dst: &mut [f32],
        tw: usize,
        trows: usize,
        tr0: usize,
        h: usize,
        w: usize,
    ) => winograd_store_body
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn winograd_store_body(
    m: &[f32],
    row0: usize,
    mstride: usize,
    bias: f32,
    dst: &mut [f32],
    tw: usize,
    trows: usize,
    tr0: usize,
    h: usize,
    w: usize,
) {
    let oy0 = 2 * tr0;
    let mut s = vec![0f32; 8 * tw];
    for ty in 0..trows {
        let at = ty * tw;
        let mrow = |xi: usize| &m[xi * mstride + row0 + at..][..tw];
        // Aᵀ = [[1, 1, 1, 0], [0, 1, −1, −1]] on the left: s[a][j][tile].
        for j in 0..4 {
            let (m0, m1, m2, m3) = (mrow(j), mrow(4 + j), mrow(8 + j), mrow(12 + j));
            let (s0, s1) = s.split_at_mut(4 * tw);
            let s0 = &mut s0[j * tw..(j + 1) * tw];
            let s1 = &mut s1[j * tw..(j + 1) * tw];
            for k in 0..tw {
                s0[k] = m0[k] + m1[k] + m2[k];
                s1[k] = m1[k] - m2[k] - m3[k];
            }
        }
        // Then A on the right, interleaved into the two output rows.
        for a in 0..2 {
            let oy = 2 * (tr0 + ty) + a;
            if oy >= h {
                break;
            }
            let sa = &s[a * 4 * tw..(a + 1) * 4 * tw];
            let (c0, c1, c2, c3) = (
                &sa[..tw],
                &sa[tw..2 * tw],
                &sa[2 * tw..3 * tw],
                &sa[3 * tw..],
            );
            let out_row = &mut dst[(oy - oy0) * w..(oy - oy0 + 1) * w];
            let (pairs, last) = out_row.split_at_mut(w / 2 * 2);
            for (k, pair) in pairs.chunks_exact_mut(2).enumerate() {
                pair[0] = c0[k] + c1[k] + c2[k] + bias;
                pair[1] = c1[k] - c2[k] - c3[k] + bias;
            }
            if let Some(o) = last.first_mut() {
                let k = w / 2;
                *o = c0[k] + c1[k] + c2[k] + bias;
            }
        }
    }
}

/// A 2-D convolution: Pictor's CPU path for float32, candle's otherwise.
#[derive(Debug, Clone)]
pub struct Conv2d {
    inner: candle_nn::Conv2d,
    /// The bias, zeros when the convolution has none (the fast path always adds one).
    bias: Tensor,
    fast: Option<FastConv>,
    /// A 3×3, stride 1, padding 1 convolution between wide layers: Winograd's F(2×2, 3×3).
    winograd: bool,
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
        let (c_out, c_in, kh, kw) = w.dims4()?;
        let winograd = fast.is_some()
            && (kh, kw, cfg.stride, cfg.padding) == (3, 3, 1, 1)
            && (c_in.min(c_out) >= WINOGRAD_MIN_CHANNELS || winograd_always())
            && winograd_enabled();
        Ok(Conv2d {
            inner,
            bias,
            fast,
            winograd,
        })
    }
}

/// `PICTOR_CANDLE_CONV=1` turns the fast path off (for comparison).
fn fast_enabled() -> bool {
    std::env::var("PICTOR_CANDLE_CONV").map_or(true, |v| v != "1")
}

/// `PICTOR_NO_WINOGRAD=1` keeps 3×3 convolutions on the im2col path (for comparison).
fn winograd_enabled() -> bool {
    std::env::var("PICTOR_NO_WINOGRAD").map_or(true, |v| v != "1")
}

/// `PICTOR_WINOGRAD_ALWAYS=1` takes every float32 3×3, stride 1, padding 1 convolution through
/// Winograd whatever its width and map (CI runs the diffusers parity fixtures, whose networks
/// are narrow, so with it).
fn winograd_always() -> bool {
    static ALWAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALWAYS.get_or_init(|| std::env::var("PICTOR_WINOGRAD_ALWAYS").is_ok_and(|v| v == "1"))
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
                let (_, _, h, w) = x.dims4()?;
                if self.winograd && (h * w >= WINOGRAD_MIN_PIXELS || winograd_always()) {
                    return x.contiguous()?.apply_op3_no_bwd(
                        &weight.contiguous()?,
                        &self.bias,
                        &WinogradConv,
                    );
                }
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
            // Winograd's shapes: wide layers, odd and even sides, batches, no bias, the
            // smallest map it takes (32×32) and one more band than a whole one.
            (1, 32, 48, 35, 33, 3, 1, 1, true),
            (2, 64, 32, 40, 33, 3, 1, 1, false),
            (1, 40, 40, 32, 32, 3, 1, 1, true),
            (1, 128, 64, 37, 70, 3, 1, 1, true),
            (1, 32, 32, 65, 31, 3, 1, 1, true),
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
            // Sums of c_in·9 unit-variance products: relative to their size.
            let scale = ((ci * k * k) as f32).sqrt();
            assert!(
                d < 2e-6 * scale.max(1.0) * 10.0,
                "{b}x{ci}x{h}x{w} k{k} s{stride} p{pad}: {d}"
            );
        }
    }
}
