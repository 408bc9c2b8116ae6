//! Picture styles as real image passes over finished pixels: watercolor (soft washes, wet edges,
//! paper grain), oil painting (Kuwahara smoothing and oriented brush strokes), pencil sketch
//! (colour dodge and hatching), pixel art (blocks on a 32-colour palette), low-poly (flat-shaded
//! triangles), neon (glowing edges on a dark picture), minimal flat poster (a few flat colours)
//! and japanese woodblock print (a fixed pigment palette, ink outlines, paper).
//!
//! The same passes serve generation (the prompt's style) and edits ("make it a watercolor").
//! Every length is relative to the picture's long side, so a style looks the same at every size,
//! and every random choice comes from the seed, so a style is deterministic.

use image::RgbaImage;

use super::procedural::noise::{Field, fbm2, hash2, unit, value2};

/// A look for the whole picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Style {
    /// Photo-like: the renderer's own shading, no pass (the default).
    Photo,
    Watercolor,
    Oil,
    Sketch,
    PixelArt,
    LowPoly,
    Neon,
    Poster,
    Japanese,
}

impl Style {
    pub const ALL: [Style; 9] = [
        Style::Photo,
        Style::Watercolor,
        Style::Oil,
        Style::Sketch,
        Style::PixelArt,
        Style::LowPoly,
        Style::Neon,
        Style::Poster,
        Style::Japanese,
    ];

    /// A short id, as accepted by `pictor render --style`.
    pub fn id(self) -> &'static str {
        match self {
            Style::Photo => "photo",
            Style::Watercolor => "watercolor",
            Style::Oil => "oil",
            Style::Sketch => "sketch",
            Style::PixelArt => "pixel",
            Style::LowPoly => "lowpoly",
            Style::Neon => "neon",
            Style::Poster => "poster",
            Style::Japanese => "japanese",
        }
    }

    /// The words a prompt uses for it (the README lists these).
    pub fn label(self) -> &'static str {
        match self {
            Style::Photo => "photo-like",
            Style::Watercolor => "watercolor",
            Style::Oil => "oil painting",
            Style::Sketch => "pencil sketch",
            Style::PixelArt => "pixel art",
            Style::LowPoly => "low-poly",
            Style::Neon => "neon / synthwave",
            Style::Poster => "minimal flat poster",
            Style::Japanese => "japanese woodblock print",
        }
    }

    pub fn parse(s: &str) -> Option<Style> {
        let s = s.trim().to_lowercase();
        Style::ALL.into_iter().find(|st| {
            st.id() == s || st.label() == s || (s == "pixel-art" && *st == Style::PixelArt)
        })
    }
}

/// Applies `style` to `img` in place (alpha is kept). `Photo` only adds the finishing touches
/// when `finish` is set (bloom on highlights, a little local contrast: the richer models).
pub fn apply(img: &mut RgbaImage, style: Style, seed: u32, finish: bool) {
    if img.width() < 2 || img.height() < 2 {
        return;
    }
    match style {
        Style::Photo => {
            if finish {
                photo_finish(img);
            }
        }
        Style::Watercolor => watercolor(img, seed),
        Style::Oil => oil(img, seed),
        Style::Sketch => sketch(img, seed),
        Style::PixelArt => pixel_art(img),
        Style::LowPoly => low_poly(img, seed),
        Style::Neon => neon(img),
        Style::Poster => poster(img),
        Style::Japanese => japanese(img, seed),
    }
}

// ---------------------------------------------------------------------------------------------
// Float planes and blurs.

/// An RGB picture as floats in [0, 1], row-major.
struct Rgbf {
    w: usize,
    h: usize,
    px: Vec<[f32; 3]>,
}

impl Rgbf {
    fn from(img: &RgbaImage) -> Rgbf {
        let px = img
            .as_raw()
            .chunks_exact(4)
            .map(|p| {
                [
                    f32::from(p[0]) / 255.0,
                    f32::from(p[1]) / 255.0,
                    f32::from(p[2]) / 255.0,
                ]
            })
            .collect();
        Rgbf {
            w: img.width() as usize,
            h: img.height() as usize,
            px,
        }
    }

    fn write(&self, img: &mut RgbaImage) {
        for (o, p) in img.as_mut().chunks_exact_mut(4).zip(&self.px) {
            o[0] = to_u8(p[0]);
            o[1] = to_u8(p[1]);
            o[2] = to_u8(p[2]);
        }
    }

    fn luma(&self) -> Vec<f32> {
        self.px.iter().map(|p| lum(*p)).collect()
    }

    /// Bilinear sample with clamping.
    fn sample(&self, x: f32, y: f32) -> [f32; 3] {
        let x = x.clamp(0.0, (self.w - 1) as f32);
        let y = y.clamp(0.0, (self.h - 1) as f32);
        let (x0, y0) = (x as usize, y as usize);
        let (x1, y1) = ((x0 + 1).min(self.w - 1), (y0 + 1).min(self.h - 1));
        let (tx, ty) = (x - x0 as f32, y - y0 as f32);
        let a = self.px[y0 * self.w + x0];
        let b = self.px[y0 * self.w + x1];
        let c = self.px[y1 * self.w + x0];
        let d = self.px[y1 * self.w + x1];
        let mut out = [0.0; 3];
        for i in 0..3 {
            let top = a[i] + (b[i] - a[i]) * tx;
            let bottom = c[i] + (d[i] - c[i]) * tx;
            out[i] = top + (bottom - top) * ty;
        }
        out
    }
}

#[inline]
fn lum(p: [f32; 3]) -> f32 {
    0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2]
}

#[inline]
fn to_u8(v: f32) -> u8 {
    (v * 255.0 + 0.5).clamp(0.0, 255.0) as u8
}

#[inline]
fn mix3(a: [f32; 3], b: [f32; 3], t: f32) -> [f32; 3] {
    [
        a[0] + (b[0] - a[0]) * t,
        a[1] + (b[1] - a[1]) * t,
        a[2] + (b[2] - a[2]) * t,
    ]
}

#[inline]
fn smoothstep(e0: f32, e1: f32, x: f32) -> f32 {
    let t = ((x - e0) / (e1 - e0)).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

/// One running-sum box blur pass of radius `r` along rows (`stride` 1) or columns.
fn box_pass<T: Copy + Default + BoxVal>(
    src: &[T],
    dst: &mut [T],
    len: usize,
    lines: usize,
    step: usize,
    line_step: usize,
    r: usize,
) {
    let norm = 1.0 / (2 * r + 1) as f32;
    if step != 1 && line_step == 1 && step == lines {
        // Down the columns of a row-major plane: the same sums in the same order per column,
        // kept for a whole row at once, so memory is read row after row (the column walk
        // missed the cache on every pixel).
        let (w, h) = (lines, len);
        let row = |i: isize| i.clamp(0, h as isize - 1) as usize * w;
        let mut acc = vec![T::default(); w];
        for i in -(r as isize)..=(r as isize) {
            let o = row(i);
            for (a, v) in acc.iter_mut().zip(&src[o..o + w]) {
                *a = a.add(*v);
            }
        }
        for i in 0..h {
            let (add, sub) = (
                row(i as isize + r as isize + 1),
                row(i as isize - r as isize),
            );
            for x in 0..w {
                dst[i * w + x] = acc[x].scale(norm);
                acc[x] = acc[x].add(src[add + x]).sub(src[sub + x]);
            }
        }
        return;
    }
    for l in 0..lines {
        let base = l * line_step;
        let at = |i: isize| -> T { src[base + (i.clamp(0, len as isize - 1) as usize) * step] };
        let mut acc = T::default();
        for i in -(r as isize)..=(r as isize) {
            acc = acc.add(at(i));
        }
        for i in 0..len {
            dst[base + i * step] = acc.scale(norm);
            acc = acc.add(at(i as isize + r as isize + 1));
            acc = acc.sub(at(i as isize - r as isize));
        }
    }
}

trait BoxVal {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn scale(self, k: f32) -> Self;
}

impl BoxVal for f32 {
    fn add(self, o: f32) -> f32 {
        self + o
    }
    fn sub(self, o: f32) -> f32 {
        self - o
    }
    fn scale(self, k: f32) -> f32 {
        self * k
    }
}

impl BoxVal for [f32; 3] {
    fn add(self, o: Self) -> Self {
        [self[0] + o[0], self[1] + o[1], self[2] + o[2]]
    }
    fn sub(self, o: Self) -> Self {
        [self[0] - o[0], self[1] - o[1], self[2] - o[2]]
    }
    fn scale(self, k: f32) -> Self {
        [self[0] * k, self[1] * k, self[2] * k]
    }
}

/// Approximately Gaussian blur (three box passes each way) of a `w`x`h` plane.
fn blur<T: Copy + Default + BoxVal>(data: &[T], w: usize, h: usize, sigma: f32) -> Vec<T> {
    let mut a = data.to_vec();
    if sigma < 0.5 || w == 0 || h == 0 {
        return a;
    }
    // Three boxes of radius r have variance 3 * ((2r+1)^2 - 1) / 12 = r(r+1).
    let r = ((sigma * sigma + 0.25).sqrt() - 0.5).round().max(1.0) as usize;
    let mut b = vec![T::default(); a.len()];
    for _ in 0..3 {
        box_pass(&a, &mut b, w, h, 1, w, r.min(w));
        box_pass(&b, &mut a, h, w, w, 1, r.min(h));
    }
    a
}

/// Sobel gradient of a plane.
fn sobel(l: &[f32], w: usize, h: usize) -> (Vec<f32>, Vec<f32>) {
    let mut gx = vec![0.0; w * h];
    let mut gy = vec![0.0; w * h];
    let at = |x: isize, y: isize| -> f32 {
        let x = x.clamp(0, w as isize - 1) as usize;
        let y = y.clamp(0, h as isize - 1) as usize;
        l[y * w + x]
    };
    for y in 0..h as isize {
        let interior_row = y > 0 && y + 1 < h as isize;
        for x in 0..w as isize {
            let i = y as usize * w + x as usize;
            if interior_row && x > 0 && x + 1 < w as isize {
                // The same sums without the edge clamps.
                let (u, m, d) = (i - w, i, i + w);
                gx[i] =
                    (l[u + 1] + 2.0 * l[m + 1] + l[d + 1]) - (l[u - 1] + 2.0 * l[m - 1] + l[d - 1]);
                gy[i] = (l[d - 1] + 2.0 * l[d] + l[d + 1]) - (l[u - 1] + 2.0 * l[u] + l[u + 1]);
                continue;
            }
            gx[i] = (at(x + 1, y - 1) + 2.0 * at(x + 1, y) + at(x + 1, y + 1))
                - (at(x - 1, y - 1) + 2.0 * at(x - 1, y) + at(x - 1, y + 1));
            gy[i] = (at(x - 1, y + 1) + 2.0 * at(x, y + 1) + at(x + 1, y + 1))
                - (at(x - 1, y - 1) + 2.0 * at(x, y - 1) + at(x + 1, y - 1));
        }
    }
    (gx, gy)
}

/// Kuwahara filter with square quadrants of radius `r`, via summed-area tables: each pixel takes
/// the mean colour of the least varied of its four neighbouring squares. Flattens texture into
/// patches while keeping edges: the basis of the painted looks.
fn kuwahara(src: &Rgbf, r: usize) -> Rgbf {
    let (w, h) = (src.w, src.h);
    let sw = w + 1;
    let mut sat = vec![[0.0f64; 4]; sw * (h + 1)];
    for y in 0..h {
        let mut row = [0.0f64; 4];
        for x in 0..w {
            let p = src.px[y * w + x];
            let l = f64::from(lum(p));
            row[0] += f64::from(p[0]);
            row[1] += f64::from(p[1]);
            row[2] += f64::from(p[2]);
            row[3] += l * l;
            let above = sat[y * sw + x + 1];
            sat[(y + 1) * sw + x + 1] = [
                above[0] + row[0],
                above[1] + row[1],
                above[2] + row[2],
                above[3] + row[3],
            ];
        }
    }
    let rect = |x0: usize, y0: usize, x1: usize, y1: usize| -> ([f64; 4], f64) {
        // Inclusive pixel rectangle [x0, x1] x [y0, y1].
        let a = sat[y0 * sw + x0];
        let b = sat[y0 * sw + x1 + 1];
        let c = sat[(y1 + 1) * sw + x0];
        let d = sat[(y1 + 1) * sw + x1 + 1];
        let n = ((x1 + 1 - x0) * (y1 + 1 - y0)) as f64;
        (
            [
                d[0] - b[0] - c[0] + a[0],
                d[1] - b[1] - c[1] + a[1],
                d[2] - b[2] - c[2] + a[2],
                d[3] - b[3] - c[3] + a[3],
            ],
            n,
        )
    };
    let mut out = vec![[0.0f32; 3]; w * h];
    for y in 0..h {
        let ya = y.saturating_sub(r);
        let yb = (y + r).min(h - 1);
        for x in 0..w {
            let xa = x.saturating_sub(r);
            let xb = (x + r).min(w - 1);
            let mut best = (f64::INFINITY, [0.0f32; 3]);
            for (x0, y0, x1, y1) in [
                (xa, ya, x, y),
                (x, ya, xb, y),
                (xa, y, x, yb),
                (x, y, xb, yb),
            ] {
                let (s, n) = rect(x0, y0, x1, y1);
                let mean = [s[0] / n, s[1] / n, s[2] / n];
                let ml = 0.299 * mean[0] + 0.587 * mean[1] + 0.114 * mean[2];
                let var = s[3] / n - ml * ml;
                if var < best.0 {
                    best = (var, [mean[0] as f32, mean[1] as f32, mean[2] as f32]);
                }
            }
            out[y * w + x] = best.1;
        }
    }
    Rgbf { w, h, px: out }
}

// ---------------------------------------------------------------------------------------------
// The styles.

/// Bloom around highlights and a touch of local contrast.
fn photo_finish(img: &mut RgbaImage) {
    let mut p = Rgbf::from(img);
    let s = p.w.max(p.h) as f32;
    let bright: Vec<[f32; 3]> =
        p.px.iter()
            .map(|c| {
                let k = smoothstep(0.72, 1.0, lum(*c));
                [c[0] * k, c[1] * k, c[2] * k]
            })
            .collect();
    let glow = blur(&bright, p.w, p.h, s * 0.012);
    let base = blur(&p.px, p.w, p.h, s * 0.02);
    for ((c, g), b) in p.px.iter_mut().zip(&glow).zip(&base) {
        for i in 0..3 {
            // Local contrast: push away from the wide blur a little; then screen the glow.
            let v = (c[i] + (c[i] - b[i]) * 0.12).clamp(0.0, 1.0);
            c[i] = 1.0 - (1.0 - v) * (1.0 - g[i] * 0.35);
        }
    }
    p.write(img);
}

const PAPER: [f32; 3] = [0.965, 0.951, 0.915];

fn watercolor(img: &mut RgbaImage, seed: u32) {
    let src = Rgbf::from(img);
    let (w, h) = (src.w, src.h);
    let s = w.max(h) as f32;
    let soft = Rgbf {
        w,
        h,
        px: blur(&src.px, w, h, s * 0.0022),
    };
    // Colours bleed: sample through a slow wobble.
    let wob = s * 0.006;
    let fx = Field::new(w, h, 8, |x, y| {
        fbm2(x / (s * 0.03), y / (s * 0.03), 3, 0.5, seed ^ 0xA1)
    });
    let fy = Field::new(w, h, 8, |x, y| {
        fbm2(x / (s * 0.03), y / (s * 0.03), 3, 0.5, seed ^ 0xA2)
    });
    // Pigment density: blotchy, low frequency; paper grain: fine.
    let dens = Field::new(w, h, 6, |x, y| {
        fbm2(x / (s * 0.05), y / (s * 0.05), 4, 0.55, seed ^ 0xA3)
    });
    let mut displaced = vec![[0.0f32; 3]; w * h];
    let (mut sc, mut rx, mut ry, mut rd) = (Vec::new(), vec![0.0; w], vec![0.0; w], vec![0.0; w]);
    let mut density = vec![0.0f32; w * h];
    for y in 0..h {
        fx.row(y, &mut sc, &mut rx);
        fy.row(y, &mut sc, &mut ry);
        dens.row(y, &mut sc, &mut rd);
        for x in 0..w {
            let dx = (rx[x] - 0.5) * 2.0 * wob;
            let dy = (ry[x] - 0.5) * 2.0 * wob;
            displaced[y * w + x] = soft.sample(x as f32 + dx, y as f32 + dy);
            density[y * w + x] = rd[x];
        }
    }
    // Washes: a wider blur; the difference to it marks where pigment pools (wet edges).
    let wash = blur(&displaced, w, h, s * 0.006);
    let mut out = vec![[0.0f32; 3]; w * h];
    let margin = s * 0.035;
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            let c = displaced[i];
            let wsh = wash[i];
            // Flatten towards the wash (watercolor has few mid-tone details).
            let mut v = mix3(c, wsh, 0.45);
            let edge = (lum(c) - lum(wsh)).abs();
            let pool = smoothstep(0.015, 0.09, edge);
            // Transparent pigment: lighten towards paper, then darken where it pools.
            let d = 0.72 + 0.38 * density[i];
            v = mix3(PAPER, v, (d * 0.86).min(1.0));
            let k = 1.0 - 0.28 * pool;
            v = [v[0] * k, v[1] * k, v[2] * k];
            // Paper grain, stronger in light areas.
            let g = unit(hash2(x as i32, y as i32, seed ^ 0xA4));
            let fine = value2(
                x as f32 / (s * 0.0025),
                y as f32 / (s * 0.0025),
                seed ^ 0xA5,
            );
            let grain = 1.0 - 0.05 * fine - 0.025 * g;
            v = [v[0] * grain, v[1] * grain, v[2] * grain];
            // An unpainted, ragged margin of paper.
            let edge_dist = (x as f32)
                .min((w - 1 - x) as f32)
                .min(y as f32)
                .min((h - 1 - y) as f32);
            let ragged = margin * (0.55 + 0.9 * density[i]);
            let paint = smoothstep(ragged * 0.5, ragged, edge_dist);
            out[i] = mix3(
                mix3(
                    PAPER,
                    [PAPER[0] * grain, PAPER[1] * grain, PAPER[2] * grain],
                    0.6,
                ),
                v,
                paint,
            );
        }
    }
    Rgbf { w, h, px: out }.write(img);
}

fn oil(img: &mut RgbaImage, seed: u32) {
    let src = Rgbf::from(img);
    let (w, h) = (src.w, src.h);
    let s = w.max(h) as f32;
    let r = ((s * 0.0045).round() as usize).max(2);
    let mut painted = kuwahara(&src, r);
    // Stroke direction: along edges, from the smoothed structure tensor of the luminance.
    let l = blur(&painted.luma(), w, h, s * 0.003);
    let (gx, gy) = sobel(&l, w, h);
    let jxx: Vec<f32> = gx.iter().map(|g| g * g).collect();
    let jxy: Vec<f32> = gx.iter().zip(&gy).map(|(a, b)| a * b).collect();
    let jyy: Vec<f32> = gy.iter().map(|g| g * g).collect();
    let sig = s * 0.008;
    let (jxx, jxy, jyy) = (
        blur(&jxx, w, h, sig),
        blur(&jxy, w, h, sig),
        blur(&jyy, w, h, sig),
    );
    let len = s * 0.018;
    let wid = s * 0.0022;
    // Canvas weave, very faint: a product of sines, one per column and one per row.
    let weave_x: Vec<f32> = (0..w).map(|x| (x as f32 * 1.9).sin()).collect();
    let flat = 0.6f32.sin_cos();
    for y in 0..h {
        let weave_y = (y as f32 * 1.9).sin();
        for (x, weave_x) in weave_x.iter().enumerate() {
            let i = y * w + x;
            // Dominant gradient angle; strokes run perpendicular to it. Flat areas get a
            // gentle diagonal so they still show brushwork. The angle is half the tensor's
            // (cos 2θ, sin 2θ), turned a quarter: by the half-angle formulas, without atan2
            // and sin_cos per pixel.
            let (a, b, c) = (jxx[i], jxy[i], jyy[i]);
            let coherent = ((a - c) * (a - c) + 4.0 * b * b).sqrt();
            let (sn, cs) = if coherent > 1e-5 {
                let cos2 = (a - c) / coherent;
                let cos_half = ((1.0 + cos2) * 0.5).max(0.0).sqrt();
                let sin_half = ((1.0 - cos2) * 0.5).max(0.0).sqrt().copysign(b);
                (cos_half, -sin_half)
            } else {
                flat
            };
            let (xf, yf) = (x as f32, y as f32);
            let u = (xf * cs + yf * sn) / len;
            let v = (-xf * sn + yf * cs) / wid;
            let n = value2(u, v, seed ^ 0x011);
            let n2 = value2(u * 0.5 + 3.1, v * 0.35, seed ^ 0x012);
            let ridge = value2(u, v + 0.45, seed ^ 0x011) - n;
            let p = &mut painted.px[i];
            let k = 1.0 + 0.1 * (n - 0.5) + 0.06 * (n2 - 0.5);
            let spec = (ridge * 0.5).max(0.0) * 0.35;
            let weave = weave_x * weave_y * 0.012;
            for ch in p.iter_mut() {
                *ch = (*ch * k + spec + weave).clamp(0.0, 1.0);
            }
            // Oil colours are rich: a little more saturation.
            let m = lum(*p);
            for ch in p.iter_mut() {
                *ch = (m + (*ch - m) * 1.18).clamp(0.0, 1.0);
            }
        }
    }
    painted.write(img);
}

fn sketch(img: &mut RgbaImage, seed: u32) {
    let src = Rgbf::from(img);
    let (w, h) = (src.w, src.h);
    let s = w.max(h) as f32;
    let g = blur(&src.luma(), w, h, s * 0.0008);
    let inv: Vec<f32> = g.iter().map(|v| 1.0 - v).collect();
    let b = blur(&inv, w, h, s * 0.005);
    let tone = blur(&g, w, h, s * 0.01);
    let graphite = [0.22, 0.22, 0.26];
    let spacing = (s * 0.006).max(3.0);
    let mut out = vec![[0.0f32; 3]; w * h];
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            // Colour dodge: near 1 where the picture is flat, dark along edges.
            let dodge = (g[i] / (1.0 - b[i] * 0.98).max(0.02)).min(1.0);
            let mut v = dodge.powf(2.2);
            // Hatching in dark areas: one direction, then crossed in the darkest.
            let t = tone[i];
            let (xf, yf) = (x as f32, y as f32);
            let jitter = value2(xf / (s * 0.05), yf / (s * 0.05), seed ^ 0x5E) * spacing;
            let d1 = ((xf + yf + jitter) / spacing).fract();
            let d2 = ((xf - yf + jitter * 0.7 + 1000.0) / spacing).fract();
            let break1 = value2(xf / (s * 0.03), yf / (s * 0.004), seed ^ 0x5F);
            let line1 = (1.0 - smoothstep(0.0, 0.22, (d1 - 0.5).abs() * 2.0 - 0.62)) * break1;
            let line2 = 1.0 - smoothstep(0.0, 0.22, (d2 - 0.5).abs() * 2.0 - 0.62);
            let dark1 = smoothstep(0.62, 0.3, t);
            let dark2 = smoothstep(0.38, 0.12, t);
            v *= 1.0 - 0.45 * dark1 * line1 - 0.4 * dark2 * line2;
            v *= 1.0 - 0.25 * smoothstep(0.5, 0.1, t);
            // Paper tooth.
            let tooth = unit(hash2(x as i32, y as i32, seed ^ 0x60));
            v *= 0.97 + 0.03 * tooth;
            out[i] = mix3(graphite, PAPER, v.clamp(0.0, 1.0));
        }
    }
    Rgbf { w, h, px: out }.write(img);
}

/// PICO-8's 16 colours and their 16 "secret" companions.
const PIXEL_PALETTE: [u32; 32] = [
    0x000000, 0x1D2B53, 0x7E2553, 0x008751, 0xAB5236, 0x5F574F, 0xC2C3C7, 0xFFF1E8, 0xFF004D,
    0xFFA300, 0xFFEC27, 0x00E436, 0x29ADFF, 0x83769C, 0xFF77A8, 0xFFCCAA, 0x291814, 0x111D35,
    0x422136, 0x125359, 0x742F29, 0x49333B, 0xA28879, 0xF3EF7D, 0xBE1250, 0xFF6C24, 0xA8E72E,
    0x00B543, 0x065AB5, 0x754665, 0xFF6E59, 0xFF9D81,
];

fn hex(c: u32) -> [f32; 3] {
    [
        ((c >> 16) & 0xFF) as f32 / 255.0,
        ((c >> 8) & 0xFF) as f32 / 255.0,
        (c & 0xFF) as f32 / 255.0,
    ]
}

/// The palette entry nearest to `c` (weighted RGB distance, close to perceived difference).
fn nearest(c: [f32; 3], palette: &[[f32; 3]]) -> usize {
    let mut best = (f32::INFINITY, 0);
    for (i, p) in palette.iter().enumerate() {
        let rm = (c[0] + p[0]) * 0.5;
        let dr = c[0] - p[0];
        let dg = c[1] - p[1];
        let db = c[2] - p[2];
        let d = (2.0 + rm) * dr * dr + 4.0 * dg * dg + (3.0 - rm) * db * db;
        if d < best.0 {
            best = (d, i);
        }
    }
    best.1
}

/// The block size of pixel art for a picture with this long side.
pub fn pixel_block(long: u32) -> u32 {
    (long / 112).max(2)
}

fn pixel_art(img: &mut RgbaImage) {
    let src = Rgbf::from(img);
    let (w, h) = (src.w, src.h);
    let block = pixel_block(w.max(h) as u32) as usize;
    let palette: Vec<[f32; 3]> = PIXEL_PALETTE.iter().map(|&c| hex(c)).collect();
    const BAYER: [f32; 16] = [
        0.0, 8.0, 2.0, 10.0, 12.0, 4.0, 14.0, 6.0, 3.0, 11.0, 1.0, 9.0, 15.0, 7.0, 13.0, 5.0,
    ];
    let mut out = vec![[0.0f32; 3]; w * h];
    let (bw, bh) = (w.div_ceil(block), h.div_ceil(block));
    for by in 0..bh {
        for bx in 0..bw {
            let (x0, y0) = (bx * block, by * block);
            let (x1, y1) = ((x0 + block).min(w), (y0 + block).min(h));
            let mut acc = [0.0f32; 3];
            for y in y0..y1 {
                for x in x0..x1 {
                    let p = src.px[y * w + x];
                    acc = [acc[0] + p[0], acc[1] + p[1], acc[2] + p[2]];
                }
            }
            let n = ((x1 - x0) * (y1 - y0)) as f32;
            let mut c = [acc[0] / n, acc[1] / n, acc[2] / n];
            // Punchier colours read better on a small palette.
            let m = lum(c);
            for ch in c.iter_mut() {
                *ch = (m + (*ch - m) * 1.25).clamp(0.0, 1.0);
            }
            let d = (BAYER[(by % 4) * 4 + bx % 4] / 16.0 - 0.47) * 0.05;
            let q = palette[nearest([c[0] + d, c[1] + d, c[2] + d], &palette)];
            for y in y0..y1 {
                for x in x0..x1 {
                    // A faint grid shows the pixels at large block sizes.
                    let grid = block >= 6 && (x == x1 - 1 || y == y1 - 1);
                    out[y * w + x] = if grid {
                        [q[0] * 0.93, q[1] * 0.93, q[2] * 0.93]
                    } else {
                        q
                    };
                }
            }
        }
    }
    Rgbf { w, h, px: out }.write(img);
}

fn low_poly(img: &mut RgbaImage, seed: u32) {
    let src = Rgbf::from(img);
    let (w, h) = (src.w, src.h);
    let s = w.max(h) as f32;
    let cell = (s / 52.0).max(4.0);
    let soft = Rgbf {
        w,
        h,
        px: blur(&src.px, w, h, cell * 0.2),
    };
    let cols = ((w as f32 / cell).ceil() as usize).max(1);
    let rows = ((h as f32 / cell).ceil() as usize).max(1);
    let cw = w as f32 / cols as f32;
    let ch = h as f32 / rows as f32;
    let vx = |i: usize, j: usize| -> (f32, f32) {
        let jx = if i == 0 || i == cols {
            0.0
        } else {
            (unit(hash2(i as i32, j as i32, seed ^ 0x71)) - 0.5) * 0.8
        };
        let jy = if j == 0 || j == rows {
            0.0
        } else {
            (unit(hash2(i as i32, j as i32, seed ^ 0x72)) - 0.5) * 0.8
        };
        ((i as f32 + jx) * cw, (j as f32 + jy) * ch)
    };
    let mut out = src.px.clone();
    for j in 0..rows {
        for i in 0..cols {
            let a = vx(i, j);
            let b = vx(i + 1, j);
            let c = vx(i, j + 1);
            let d = vx(i + 1, j + 1);
            let tris = if hash2(i as i32, j as i32, seed ^ 0x73) & 1 == 0 {
                [[a, b, d], [a, d, c]]
            } else {
                [[a, b, c], [b, d, c]]
            };
            for (k, t) in tris.iter().enumerate() {
                let cx = (t[0].0 + t[1].0 + t[2].0) / 3.0;
                let cy = (t[0].1 + t[1].1 + t[2].1) / 3.0;
                let mut col = soft.sample(cx, cy);
                for v in t {
                    let p = soft.sample((v.0 + cx) * 0.5, (v.1 + cy) * 0.5);
                    col = [col[0] + p[0], col[1] + p[1], col[2] + p[2]];
                }
                // Facets catch the light differently.
                let facet =
                    1.0 + (unit(hash2((i * 2 + k) as i32, j as i32, seed ^ 0x74)) - 0.5) * 0.12;
                let col = [
                    col[0] / 4.0 * facet,
                    col[1] / 4.0 * facet,
                    col[2] / 4.0 * facet,
                ];
                fill_triangle(&mut out, w, h, t, col);
            }
        }
    }
    Rgbf { w, h, px: out }.write(img);
}

/// Fills a triangle (pixel centres inside, inclusive of shared edges).
fn fill_triangle(out: &mut [[f32; 3]], w: usize, h: usize, t: &[(f32, f32); 3], col: [f32; 3]) {
    let x0 = t
        .iter()
        .map(|p| p.0)
        .fold(f32::INFINITY, f32::min)
        .floor()
        .max(0.0) as usize;
    let x1 = (t
        .iter()
        .map(|p| p.0)
        .fold(f32::NEG_INFINITY, f32::max)
        .ceil() as usize)
        .min(w);
    let y0 = t
        .iter()
        .map(|p| p.1)
        .fold(f32::INFINITY, f32::min)
        .floor()
        .max(0.0) as usize;
    let y1 = (t
        .iter()
        .map(|p| p.1)
        .fold(f32::NEG_INFINITY, f32::max)
        .ceil() as usize)
        .min(h);
    let edge = |a: (f32, f32), b: (f32, f32), x: f32, y: f32| {
        (b.0 - a.0) * (y - a.1) - (b.1 - a.1) * (x - a.0)
    };
    let area = edge(t[0], t[1], t[2].0, t[2].1);
    if area.abs() < 1e-6 {
        return;
    }
    let sign = area.signum();
    for y in y0..y1 {
        for x in x0..x1 {
            let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
            let e0 = edge(t[0], t[1], px, py) * sign;
            let e1 = edge(t[1], t[2], px, py) * sign;
            let e2 = edge(t[2], t[0], px, py) * sign;
            if e0 >= -0.01 && e1 >= -0.01 && e2 >= -0.01 {
                out[y * w + x] = col;
            }
        }
    }
}

fn neon(img: &mut RgbaImage) {
    let src = Rgbf::from(img);
    let (w, h) = (src.w, src.h);
    let s = w.max(h) as f32;
    let l = blur(&src.luma(), w, h, s * 0.0012);
    let (gx, gy) = sobel(&l, w, h);
    let mut lines = vec![[0.0f32; 3]; w * h];
    for y in 0..h {
        let t = y as f32 / h as f32;
        // Magenta at the top, cyan at the bottom.
        let hue = mix3(
            [1.0, 0.16, 0.78],
            [0.1, 0.9, 1.0],
            smoothstep(0.25, 0.85, t),
        );
        for x in 0..w {
            let i = y * w + x;
            let m = smoothstep(0.08, 0.35, (gx[i] * gx[i] + gy[i] * gy[i]).sqrt());
            // Keep the picture's own hue where it is saturated.
            let c = src.px[i];
            let mx = c[0].max(c[1]).max(c[2]);
            let mn = c[0].min(c[1]).min(c[2]);
            let sat = if mx > 0.0 { (mx - mn) / mx } else { 0.0 };
            let own = if mx > 0.0 {
                [c[0] / mx, c[1] / mx, c[2] / mx]
            } else {
                hue
            };
            let tint = mix3(hue, own, smoothstep(0.35, 0.8, sat) * 0.6);
            lines[i] = [tint[0] * m, tint[1] * m, tint[2] * m];
        }
    }
    let glow = blur(&lines, w, h, s * 0.006);
    let wide = blur(&lines, w, h, s * 0.02);
    let mut out = vec![[0.0f32; 3]; w * h];
    for i in 0..w * h {
        let c = src.px[i];
        let base = [c[0] * 0.2 + 0.03, c[1] * 0.12 + 0.01, c[2] * 0.3 + 0.06];
        let bright = smoothstep(0.7, 1.0, lum(c)) * 0.6;
        let mut v = [0.0; 3];
        for k in 0..3 {
            let add = lines[i][k] * 1.1 + glow[i][k] * 1.6 + wide[i][k] * 0.9;
            v[k] = 1.0 - (1.0 - base[k] - c[k] * bright).max(0.0) * (1.0 - add.min(1.0));
        }
        out[i] = v;
    }
    Rgbf { w, h, px: out }.write(img);
}

/// k-means colours of the picture (deterministic: seeded by luminance quantiles).
fn kmeans(px: &[[f32; 3]], k: usize) -> Vec<[f32; 3]> {
    let step = (px.len() / 6000).max(1);
    let sample: Vec<[f32; 3]> = px.iter().step_by(step).copied().collect();
    let mut sorted = sample.clone();
    sorted.sort_by(|a, b| lum(*a).total_cmp(&lum(*b)));
    let mut centers: Vec<[f32; 3]> = (0..k)
        .map(|i| sorted[((i * 2 + 1) * sorted.len() / (2 * k)).min(sorted.len() - 1)])
        .collect();
    for _ in 0..10 {
        let mut acc = vec![[0.0f32; 4]; k];
        for p in &sample {
            let j = nearest(*p, &centers);
            acc[j] = [
                acc[j][0] + p[0],
                acc[j][1] + p[1],
                acc[j][2] + p[2],
                acc[j][3] + 1.0,
            ];
        }
        for (c, a) in centers.iter_mut().zip(&acc) {
            if a[3] > 0.0 {
                *c = [a[0] / a[3], a[1] / a[3], a[2] / a[3]];
            }
        }
    }
    centers
}

fn poster(img: &mut RgbaImage) {
    let src = Rgbf::from(img);
    let (w, h) = (src.w, src.h);
    let s = w.max(h) as f32;
    let smooth = kuwahara(&src, ((s * 0.006).round() as usize).max(2));
    let smooth = Rgbf {
        w,
        h,
        px: blur(&smooth.px, w, h, s * 0.002),
    };
    let mut centers = kmeans(&smooth.px, 7);
    // Poster inks: cleaner, a little more saturated.
    for c in centers.iter_mut() {
        let m = lum(*c);
        for ch in c.iter_mut() {
            *ch = (m + (*ch - m) * 1.3).clamp(0.0, 1.0);
        }
    }
    let mut out: Vec<[f32; 3]> = smooth
        .px
        .iter()
        .map(|p| centers[nearest(*p, &centers)])
        .collect();
    // A cream frame around the print.
    let frame = (s * 0.028) as usize;
    let cream = [0.96, 0.93, 0.86];
    for y in 0..h {
        for x in 0..w {
            if x < frame || y < frame || x + frame >= w || y + frame >= h {
                out[y * w + x] = cream;
            }
        }
    }
    Rgbf { w, h, px: out }.write(img);
}

/// Woodblock pigments: indigo, prussian blue, pale blue, vermilion, rose, ochre, cream, sage,
/// pine green, sumi ink, warm grey, straw, peach, terracotta, plum, pale straw.
const JAPANESE_PALETTE: [u32; 16] = [
    0x243A5E, 0x2F5F86, 0x8FB3BE, 0xC8472F, 0xD99A8A, 0xD9A55B, 0xEEE2C4, 0x8A9A6A, 0x3E5A45,
    0x2A2624, 0x9C968A, 0xF2C76B, 0xE9B98C, 0xB8664A, 0x6B4E71, 0xF0D9A8,
];

fn japanese(img: &mut RgbaImage, seed: u32) {
    let src = Rgbf::from(img);
    let (w, h) = (src.w, src.h);
    let s = w.max(h) as f32;
    let smooth = kuwahara(&src, ((s * 0.004).round() as usize).max(2));
    let palette: Vec<[f32; 3]> = JAPANESE_PALETTE.iter().map(|&c| hex(c)).collect();
    let idx: Vec<u8> = smooth
        .px
        .iter()
        .map(|p| {
            // Slightly desaturated, lifted mid-tones: prints are matte.
            let m = lum(*p);
            let c = [
                (m + (p[0] - m) * 1.1) * 0.92 + 0.05,
                (m + (p[1] - m) * 1.1) * 0.92 + 0.05,
                (m + (p[2] - m) * 1.1) * 0.92 + 0.05,
            ];
            nearest(c, &palette) as u8
        })
        .collect();
    let ink = hex(0x2A2624);
    let line = ((s * 0.0012).round() as usize).max(1);
    let mut out = vec![[0.0f32; 3]; w * h];
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            let me = idx[i];
            let mut c = palette[me as usize];
            // Ink outline where the pigment changes (keyblock lines).
            let mut border = false;
            for (dx, dy) in [(line, 0), (0, line)] {
                if x + dx < w && idx[i + dx] != me {
                    border = true;
                }
                if y + dy < h && idx[i + dy * w] != me {
                    border = true;
                }
            }
            if border {
                c = mix3(c, ink, 0.75);
            }
            // Paper fibres and uneven pigment.
            let (xf, yf) = (x as f32, y as f32);
            let fibre = value2(xf / (s * 0.02), yf / (s * 0.0015), seed ^ 0x91);
            let blot = value2(xf / (s * 0.04), yf / (s * 0.04), seed ^ 0x92);
            let k = 0.94 + 0.06 * fibre + 0.04 * (blot - 0.5);
            c = [c[0] * k, c[1] * k, c[2] * k];
            out[i] = mix3(c, hex(0xEEE2C4), 0.08);
        }
    }
    Rgbf { w, h, px: out }.write(img);
}

#[cfg(test)]
mod tests {

    /// The column pass (row-major sums) gives exactly what the row pass gives on the transposed
    /// plane: the same additions in the same order.
    #[test]
    fn column_box_pass_equals_the_row_pass_transposed() {
        let (w, h) = (37, 23);
        let data: Vec<f32> = (0..w * h)
            .map(|i| ((i * 7919) % 101) as f32 / 101.0)
            .collect();
        for r in [1, 3, 8, 30] {
            let mut cols = vec![0.0; w * h];
            box_pass(&data, &mut cols, h, w, w, 1, r);
            let t: Vec<f32> = (0..w * h).map(|k| data[(k % h) * w + k / h]).collect();
            let mut rows = vec![0.0; w * h];
            box_pass(&t, &mut rows, h, w, 1, h, r);
            for y in 0..h {
                for x in 0..w {
                    assert_eq!(
                        cols[y * w + x].to_bits(),
                        rows[x * h + y].to_bits(),
                        "r {r} at {x},{y}"
                    );
                }
            }
        }
    }
    use super::*;

    fn scene() -> RgbaImage {
        RgbaImage::from_fn(120, 80, |x, y| {
            let sky = y < 40;
            let disc = (x as i32 - 80).pow(2) + (y as i32 - 20).pow(2) < 100;
            if disc {
                image::Rgba([250, 220, 120, 255])
            } else if sky {
                image::Rgba([90, 150, (200 + y) as u8, 255])
            } else {
                image::Rgba([40, (120 + x / 4) as u8, 50, 255])
            }
        })
    }

    #[test]
    fn every_style_changes_the_picture_and_keeps_its_size() {
        for style in Style::ALL {
            let mut img = scene();
            apply(&mut img, style, 7, true);
            assert_eq!(img.dimensions(), (120, 80), "{style:?}");
            if style != Style::Photo {
                assert_ne!(img, scene(), "{style:?}");
            }
            let mut again = scene();
            apply(&mut again, style, 7, true);
            assert_eq!(img, again, "{style:?} is not deterministic");
        }
    }

    #[test]
    fn pixel_art_uses_the_palette_only() {
        let mut img = scene();
        apply(&mut img, Style::PixelArt, 1, false);
        let palette: Vec<[u8; 3]> = PIXEL_PALETTE
            .iter()
            .flat_map(|&c| {
                let p = [(c >> 16) as u8, (c >> 8) as u8, c as u8];
                // Grid lines are the palette colour darkened a little.
                [p, p.map(|v| to_u8(f32::from(v) / 255.0 * 0.93))]
            })
            .collect();
        assert!(img.pixels().all(|p| palette.contains(&[p[0], p[1], p[2]])));
    }

    #[test]
    fn sketch_is_nearly_grey() {
        let mut img = scene();
        apply(&mut img, Style::Sketch, 1, false);
        assert!(
            img.pixels()
                .all(|p| (i32::from(p[0]) - i32::from(p[2])).abs() < 25)
        );
    }

    #[test]
    fn styles_parse_from_ids_and_labels() {
        for style in Style::ALL {
            assert_eq!(Style::parse(style.id()), Some(style));
            assert_eq!(Style::parse(style.label()), Some(style));
        }
        assert_eq!(Style::parse("cubism"), None);
    }

    #[test]
    fn blur_keeps_the_mean() {
        let data: Vec<f32> = (0..400).map(|i| (i % 7) as f32).collect();
        let b = blur(&data, 20, 20, 3.0);
        let m0: f32 = data.iter().sum::<f32>() / 400.0;
        let m1: f32 = b.iter().sum::<f32>() / 400.0;
        assert!((m0 - m1).abs() < 0.2);
    }
}
