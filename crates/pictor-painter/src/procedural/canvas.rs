//! The floating-point canvas the layers paint on, colour helpers, and the final pass
//! (vignette, grain) that turns it into an `RgbaImage`.

use super::noise::{hash2, unit};

/// Linear-ish RGB in [0, 1] (sRGB values, blended without linearisation: cheap and pleasant).
pub type Rgb = [f32; 3];

pub const fn rgb(r: u8, g: u8, b: u8) -> Rgb {
    [r as f32 / 255.0, g as f32 / 255.0, b as f32 / 255.0]
}

#[inline]
pub fn mix(a: Rgb, b: Rgb, t: f32) -> Rgb {
    [
        a[0] + (b[0] - a[0]) * t,
        a[1] + (b[1] - a[1]) * t,
        a[2] + (b[2] - a[2]) * t,
    ]
}

/// Screen blend: adds light `tint * k` to `c` without exceeding 1.
#[inline]
pub fn screen(c: Rgb, tint: Rgb, k: f32) -> Rgb {
    [
        c[0] + (1.0 - c[0]).max(0.0) * (tint[0] * k).min(1.0),
        c[1] + (1.0 - c[1]).max(0.0) * (tint[1] * k).min(1.0),
        c[2] + (1.0 - c[2]).max(0.0) * (tint[2] * k).min(1.0),
    ]
}

#[inline]
pub fn scale(a: Rgb, k: f32) -> Rgb {
    [a[0] * k, a[1] * k, a[2] * k]
}

pub fn lum(a: Rgb) -> f32 {
    0.299 * a[0] + 0.587 * a[1] + 0.114 * a[2]
}

pub fn clamp01(a: Rgb) -> Rgb {
    [
        a[0].clamp(0.0, 1.0),
        a[1].clamp(0.0, 1.0),
        a[2].clamp(0.0, 1.0),
    ]
}

/// Moves `base` towards the hue of `tint` by `k`, keeping roughly the brightness of `base`.
pub fn tint(base: Rgb, tint: Rgb, k: f32) -> Rgb {
    let lb = lum(base).max(0.004);
    let lt = lum(tint).max(0.02);
    let target = clamp01(scale(tint, lb / lt));
    mix(base, target, k)
}

/// Rotates the hue of `c` by `degrees` (luminance-preserving YIQ rotation).
pub fn hue_rotate(c: Rgb, degrees: f32) -> Rgb {
    let (s, co) = degrees.to_radians().sin_cos();
    let y = 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2];
    let i = 0.596 * c[0] - 0.274 * c[1] - 0.322 * c[2];
    let q = 0.211 * c[0] - 0.523 * c[1] + 0.312 * c[2];
    let (i, q) = (i * co - q * s, i * s + q * co);
    clamp01([
        y + 0.956 * i + 0.621 * q,
        y - 0.272 * i - 0.647 * q,
        y - 1.106 * i + 1.703 * q,
    ])
}

#[inline]
pub fn smoothstep(e0: f32, e1: f32, x: f32) -> f32 {
    let t = ((x - e0) / (e1 - e0)).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

pub struct Canvas {
    pub w: usize,
    pub h: usize,
    pub px: Vec<Rgb>,
}

impl Canvas {
    pub fn new(w: usize, h: usize) -> Canvas {
        Canvas {
            w,
            h,
            px: vec![[0.0; 3]; w * h],
        }
    }

    pub fn row_mut(&mut self, y: usize) -> &mut [Rgb] {
        &mut self.px[y * self.w..(y + 1) * self.w]
    }

    /// Alpha-blends `c` over one pixel; out-of-bounds is ignored.
    #[inline]
    pub fn blend(&mut self, x: i64, y: i64, c: Rgb, a: f32) {
        if x < 0 || y < 0 || x >= self.w as i64 || y >= self.h as i64 || a <= 0.0 {
            return;
        }
        let p = &mut self.px[y as usize * self.w + x as usize];
        *p = mix(*p, c, a.min(1.0));
    }

    /// Adds light to one pixel (screen blend, never exceeds 1).
    #[inline]
    pub fn light(&mut self, x: i64, y: i64, c: Rgb, a: f32) {
        if x < 0 || y < 0 || x >= self.w as i64 || y >= self.h as i64 || a <= 0.0 {
            return;
        }
        let p = &mut self.px[y as usize * self.w + x as usize];
        *p = screen(*p, c, a);
    }

    /// An anti-aliased filled disc.
    pub fn disc(&mut self, cx: f32, cy: f32, r: f32, c: Rgb, a: f32) {
        let (x0, x1) = ((cx - r - 1.0).floor() as i64, (cx + r + 1.0).ceil() as i64);
        let (y0, y1) = ((cy - r - 1.0).floor() as i64, (cy + r + 1.0).ceil() as i64);
        for y in y0..=y1 {
            for x in x0..=x1 {
                let dx = x as f32 + 0.5 - cx;
                let dy = y as f32 + 0.5 - cy;
                let d = (dx * dx + dy * dy).sqrt();
                let cov = (r - d + 0.5).clamp(0.0, 1.0);
                if cov > 0.0 {
                    self.blend(x, y, c, cov * a);
                }
            }
        }
    }

    /// Converts to 8-bit RGBA with a vignette and film grain. Grain also dithers smooth
    /// gradients, but noise in the low bits roughly doubles the PNG size, so it is optional.
    pub fn into_image(self, vignette: f32, grain: f32, seed: u32) -> image::RgbaImage {
        let (w, h) = (self.w, self.h);
        let long = w.max(h) as f32;
        let dx2: Vec<f32> = (0..w)
            .map(|x| {
                let d = (x as f32 + 0.5 - w as f32 / 2.0) / long * 2.0;
                d * d
            })
            .collect();
        let noise_amp = grain;
        let mut out = vec![0u8; w * h * 4];
        for (y, (src, dst)) in self
            .px
            .chunks_exact(w.max(1))
            .zip(out.chunks_exact_mut(w.max(1) * 4))
            .enumerate()
        {
            let dy = (y as f32 + 0.5 - h as f32 / 2.0) / long * 2.0;
            let dy2 = dy * dy;
            for (x, (p, o)) in src.iter().zip(dst.chunks_exact_mut(4)).enumerate() {
                let v = 1.0 - vignette * (dx2[x] + dy2).min(2.0) * 0.5;
                let n = if noise_amp > 0.0 {
                    (unit(hash2(x as i32, y as i32, seed)) - 0.5) * noise_amp
                } else {
                    0.0
                };
                o[0] = to_u8(p[0] * v + n);
                o[1] = to_u8(p[1] * v + n);
                o[2] = to_u8(p[2] * v + n);
                o[3] = 255;
            }
        }
        // The buffer has exactly w * h * 4 bytes, so this cannot fail; an empty picture is the
        // only conceivable fallback.
        image::RgbaImage::from_raw(w as u32, h as u32, out).unwrap_or_default()
    }
}

#[inline]
fn to_u8(v: f32) -> u8 {
    (v * 255.0 + 0.5).clamp(0.0, 255.0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tint_moves_hue_and_keeps_brightness() {
        let sky = rgb(90, 150, 230);
        let red = tint(sky, rgb(220, 30, 30), 1.0);
        assert!(red[0] > red[2]);
        assert!((lum(red) - lum(sky)).abs() < 0.15);
    }

    #[test]
    fn hue_rotation_by_zero_is_identity() {
        let c = rgb(200, 100, 50);
        let r = hue_rotate(c, 0.0);
        assert!(r.iter().zip(&c).all(|(a, b)| (a - b).abs() < 0.01));
    }

    #[test]
    fn image_has_the_canvas_size() {
        let c = Canvas::new(7, 3);
        let img = c.into_image(0.2, 0.02, 1);
        assert_eq!(img.dimensions(), (7, 3));
    }
}
