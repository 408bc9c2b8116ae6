//! Deterministic randomness for the procedural renderer: a seeded PRNG, integer hashes, value
//! noise with fractal sums, and [`Field`], noise sampled on a coarse grid and interpolated.
//!
//! Nothing here reads the clock or process-random state, and nothing depends on a crate's
//! unspecified algorithm (rand's `StdRng` may change between versions), so a seed reproduces the
//! same picture across builds.

/// SplitMix64: tiny, fast and good enough to pick scene parameters.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / 16_777_216.0)
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform in 0..n (0 when n is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    pub fn chance(&mut self, p: f32) -> bool {
        self.unit() < p
    }

    /// An independent generator for one part of the scene, so that adding draws to one part
    /// does not reshuffle the others.
    pub fn fork(&self, label: &str) -> Rng {
        Rng::new(self.0 ^ fnv1a(label.as_bytes()).rotate_left(17))
    }
}

/// FNV-1a, 64 bit: a fixed, documented hash for words (std's hasher is randomly keyed).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01B3);
    }
    h
}

#[inline]
fn mix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x7FEB_352D);
    h ^= h >> 15;
    h = h.wrapping_mul(0x846C_A68B);
    h ^ (h >> 16)
}

#[inline]
pub fn hash1(x: i32, seed: u32) -> u32 {
    mix32((x as u32).wrapping_mul(0x9E37_79B1) ^ seed)
}

#[inline]
pub fn hash2(x: i32, y: i32, seed: u32) -> u32 {
    mix32((x as u32).wrapping_mul(0x9E37_79B1) ^ (y as u32).wrapping_mul(0x85EB_CA77) ^ seed)
}

/// A hash as a float in [0, 1).
#[inline]
pub fn unit(h: u32) -> f32 {
    (h >> 8) as f32 * (1.0 / 16_777_216.0)
}

#[inline]
fn fade(t: f32) -> f32 {
    t * t * (3.0 - 2.0 * t)
}

/// 1D value noise in [0, 1).
#[inline]
pub fn value1(x: f32, seed: u32) -> f32 {
    let xf = x.floor();
    let i = xf as i32;
    let t = fade(x - xf);
    let a = unit(hash1(i, seed));
    let b = unit(hash1(i.wrapping_add(1), seed));
    a + (b - a) * t
}

/// 2D value noise in [0, 1).
#[inline]
pub fn value2(x: f32, y: f32, seed: u32) -> f32 {
    let xf = x.floor();
    let yf = y.floor();
    let (i, j) = (xf as i32, yf as i32);
    let tx = fade(x - xf);
    let ty = fade(y - yf);
    let a = unit(hash2(i, j, seed));
    let b = unit(hash2(i.wrapping_add(1), j, seed));
    let c = unit(hash2(i, j.wrapping_add(1), seed));
    let d = unit(hash2(i.wrapping_add(1), j.wrapping_add(1), seed));
    let top = a + (b - a) * tx;
    let bottom = c + (d - c) * tx;
    top + (bottom - top) * ty
}

/// Fractal sum of 1D value noise, normalised to [0, 1).
pub fn fbm1(x: f32, octaves: u32, gain: f32, seed: u32) -> f32 {
    let (mut sum, mut norm, mut amp, mut freq) = (0.0, 0.0, 1.0, 1.0);
    for o in 0..octaves.max(1) {
        sum += amp * value1(x * freq, seed.wrapping_add(o.wrapping_mul(1013)));
        norm += amp;
        amp *= gain;
        freq *= 2.03;
    }
    sum / norm
}

/// Ridged fractal 1D noise in [0, 1): sharp peaks, for mountain crests.
pub fn ridged1(x: f32, octaves: u32, gain: f32, seed: u32) -> f32 {
    let (mut sum, mut norm, mut amp, mut freq) = (0.0, 0.0, 1.0, 1.0);
    for o in 0..octaves.max(1) {
        let v = value1(x * freq, seed.wrapping_add(o.wrapping_mul(7919)));
        // Peaks where the noise crosses 0.5 (a kink: sharp crests), valleys at its extremes
        // (smooth).
        let r = 1.0 - (2.0 * v - 1.0).abs();
        sum += amp * r;
        norm += amp;
        amp *= gain;
        freq *= 2.11;
    }
    sum / norm
}

/// Fractal sum of 2D value noise, normalised to [0, 1).
pub fn fbm2(x: f32, y: f32, octaves: u32, gain: f32, seed: u32) -> f32 {
    let (mut sum, mut norm, mut amp, mut freq) = (0.0, 0.0, 1.0, 1.0);
    for o in 0..octaves.max(1) {
        // Each octave is shifted so lattice lines of different octaves do not align.
        let off = o as f32 * 17.31;
        sum += amp
            * value2(
                x * freq + off,
                y * freq - off,
                seed.wrapping_add(o.wrapping_mul(2_654_435)),
            );
        norm += amp;
        amp *= gain;
        freq *= 2.07;
    }
    sum / norm
}

/// A scalar function of the picture sampled every `cell` pixels and interpolated bilinearly.
///
/// Per-pixel fractal noise costs `octaves` noise evaluations per pixel; a field costs that per
/// grid point plus one cheap interpolation per pixel, which is what keeps large renders fast.
pub struct Field {
    cols: usize,
    rows: usize,
    cell: f32,
    data: Vec<f32>,
}

impl Field {
    /// Samples `f(x, y)` (pixel coordinates) on a grid covering `w`x`h`.
    pub fn new(w: usize, h: usize, cell: usize, f: impl Fn(f32, f32) -> f32) -> Field {
        let cell = cell.max(1);
        let cols = w / cell + 2;
        let rows = h / cell + 2;
        let mut data = Vec::with_capacity(cols * rows);
        for j in 0..rows {
            for i in 0..cols {
                data.push(f((i * cell) as f32, (j * cell) as f32));
            }
        }
        Field {
            cols,
            rows,
            cell: cell as f32,
            data,
        }
    }

    /// Writes the interpolated values of pixel row `y` into `out` (one per column).
    pub fn row(&self, y: usize, scratch: &mut Vec<f32>, out: &mut [f32]) {
        let fy = y as f32 / self.cell;
        let j = (fy as usize).min(self.rows - 2);
        let ty = fy - j as f32;
        let (a, b) = (j * self.cols, (j + 1) * self.cols);
        scratch.clear();
        scratch.extend(
            self.data[a..a + self.cols]
                .iter()
                .zip(&self.data[b..b + self.cols])
                .map(|(&p, &q)| p + (q - p) * ty),
        );
        let inv = 1.0 / self.cell;
        for (x, o) in out.iter_mut().enumerate() {
            let fx = x as f32 * inv;
            let i = (fx as usize).min(self.cols - 2);
            let tx = fx - i as f32;
            let p = scratch[i];
            *o = p + (scratch[i + 1] - p) * tx;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_spread() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let xs: Vec<u64> = (0..10).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..10).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let mut r = Rng::new(7);
        let mean = (0..10_000).map(|_| r.unit()).sum::<f32>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02);
    }

    #[test]
    fn noise_stays_in_range() {
        for i in 0..2000 {
            let x = i as f32 * 0.173 - 50.0;
            for v in [
                value1(x, 3),
                value2(x, x * 0.7, 3),
                fbm1(x, 5, 0.5, 9),
                ridged1(x, 5, 0.5, 9),
                fbm2(x, -x, 4, 0.5, 1),
            ] {
                assert!((0.0..1.0).contains(&v), "{v}");
            }
        }
    }

    #[test]
    fn field_interpolates_the_function() {
        let f = Field::new(100, 50, 10, |x, y| x + 2.0 * y);
        let mut scratch = Vec::new();
        let mut row = vec![0.0; 100];
        f.row(25, &mut scratch, &mut row);
        for (x, v) in row.iter().enumerate() {
            assert!((v - (x as f32 + 50.0)).abs() < 1e-3);
        }
    }
}
