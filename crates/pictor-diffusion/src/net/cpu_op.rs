//! What the engine's CPU operations (convolution, attention, normalisation, GEGLU) share: their
//! operands as float32 slices, and the output pointer their parallel parts write through.
use candle::{CpuStorage, Layout, Result};

/// A float32, contiguous operand's elements; anything else is the operation's error.
pub fn f32_slice<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
    let CpuStorage::F32(v) = storage else {
        candle::bail!("{op}: float32 only");
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle::bail!("{op}: contiguous tensors only");
    };
    Ok(&v[start..end])
}

/// A pointer to an output shared by parallel parts that write disjoint regions of it.
#[derive(Clone, Copy)]
pub struct SharedOut(pub *mut f32);
// SAFETY: every user writes through it only the region its part owns (disjoint ranges), and
// the buffer outlives the parallel loop.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    pub fn ptr(self) -> *mut f32 {
        self.0
    }
}

/// `srcᵀ` (`[cols, rows]`) of a row-major `[rows, cols]` matrix, in 32 × 32 tiles.
pub fn transpose(src: &[f32], dst: &mut [f32], rows: usize, cols: usize) {
    const T: usize = 32;
    for r0 in (0..rows).step_by(T) {
        for c0 in (0..cols).step_by(T) {
            for r in r0..(r0 + T).min(rows) {
                for c in c0..(c0 + T).min(cols) {
                    dst[c * rows + r] = src[r * cols + c];
                }
            }
        }
    }
}

/// [`transpose`] on the rayon pool, bands of 32 output rows in parallel.
pub fn transpose_par(src: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    use rayon::prelude::*;
    const T: usize = 32;
    let mut dst = vec![0f32; rows * cols];
    if rows == 0 || cols == 0 {
        return dst;
    }
    dst.par_chunks_mut(T * rows)
        .enumerate()
        .for_each(|(band, out)| {
            let c0 = band * T;
            for r0 in (0..rows).step_by(T) {
                for c in c0..(c0 + T).min(cols) {
                    let o = &mut out[(c - c0) * rows..];
                    for r in r0..(r0 + T).min(rows) {
                        o[r] = src[r * cols + c];
                    }
                }
            }
        });
    dst
}

/// The largest absolute difference between two tensors (tests).
#[cfg(test)]
pub fn max_abs_diff(a: &candle::Tensor, b: &candle::Tensor) -> f32 {
    (a - b)
        .and_then(|d| d.abs()?.max_all()?.to_scalar::<f32>())
        .unwrap_or(f32::INFINITY)
}
