//! Signed-distance shapes: the vocabulary objects are drawn with.
//!
//! An object is a list of [`Part`]s, each a signed distance function ([`Sdf`]: circles,
//! ellipses, tapered capsules, rounded boxes, polygons and their smooth unions) with a fill.
//! Parts are painted in order over the canvas with analytic anti-aliasing (coverage from the
//! distance), rounded shading from the distance gradient, texture, silhouette darkening against
//! the light, a rim light and distance haze. Shapes are designed in a local frame where the
//! object is about 1 unit tall, y pointing up, the base at y = 0; [`Xform`] places it.

use super::canvas::{Canvas, Rgb, mix, scale, screen, smoothstep};
use super::noise::value2;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct V(pub f32, pub f32);

#[derive(Debug, Clone)]
pub enum Sdf {
    Circle(V, f32),
    Ellipse(V, f32, f32),
    /// Segment from a to b, radius tapering from ra to rb.
    Capsule(V, V, f32, f32),
    /// Axis-aligned box: centre, half sizes, corner radius.
    Rect(V, f32, f32, f32),
    Poly(Vec<V>),
    Union(Vec<Sdf>),
    /// Smooth union with blend radius k.
    Smooth(f32, Vec<Sdf>),
    Sub(Box<Sdf>, Box<Sdf>),
    Inter(Box<Sdf>, Box<Sdf>),
    /// Expanded (positive) or shrunk outline.
    Round(Box<Sdf>, f32),
}

#[inline]
fn len(x: f32, y: f32) -> f32 {
    (x * x + y * y).sqrt()
}

#[inline]
fn smin(a: f32, b: f32, k: f32) -> f32 {
    let h = (k - (a - b).abs()).max(0.0) / k;
    a.min(b) - h * h * k * 0.25
}

impl Sdf {
    pub fn eval(&self, x: f32, y: f32) -> f32 {
        match self {
            Sdf::Circle(c, r) => len(x - c.0, y - c.1) - r,
            Sdf::Ellipse(c, rx, ry) => {
                let (px, py) = ((x - c.0) / rx, (y - c.1) / ry);
                let k0 = len(px, py);
                let k1 = len(px / rx, py / ry);
                if k1 < 1e-6 {
                    -rx.min(*ry)
                } else {
                    k0 * (k0 - 1.0) / k1
                }
            }
            Sdf::Capsule(a, b, ra, rb) => {
                let (pax, pay) = (x - a.0, y - a.1);
                let (bax, bay) = (b.0 - a.0, b.1 - a.1);
                let bb = bax * bax + bay * bay;
                let h = if bb > 0.0 {
                    ((pax * bax + pay * bay) / bb).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                len(pax - bax * h, pay - bay * h) - (ra + (rb - ra) * h)
            }
            Sdf::Rect(c, hw, hh, r) => {
                let qx = (x - c.0).abs() - (hw - r);
                let qy = (y - c.1).abs() - (hh - r);
                len(qx.max(0.0), qy.max(0.0)) + qx.max(qy).min(0.0) - r
            }
            Sdf::Poly(v) => poly(v, x, y),
            Sdf::Union(list) => list
                .iter()
                .map(|s| s.eval(x, y))
                .fold(f32::INFINITY, f32::min),
            Sdf::Smooth(k, list) => {
                let mut d = f32::INFINITY;
                for s in list {
                    let e = s.eval(x, y);
                    d = if d.is_infinite() { e } else { smin(d, e, *k) };
                }
                d
            }
            Sdf::Sub(a, b) => a.eval(x, y).max(-b.eval(x, y)),
            Sdf::Inter(a, b) => a.eval(x, y).max(b.eval(x, y)),
            Sdf::Round(a, r) => a.eval(x, y) - r,
        }
    }

    /// Axis-aligned bounds (x0, y0, x1, y1) in local units.
    pub fn bounds(&self) -> (f32, f32, f32, f32) {
        match self {
            Sdf::Circle(c, r) => (c.0 - r, c.1 - r, c.0 + r, c.1 + r),
            Sdf::Ellipse(c, rx, ry) => (c.0 - rx, c.1 - ry, c.0 + rx, c.1 + ry),
            Sdf::Capsule(a, b, ra, rb) => {
                let r = ra.max(*rb);
                (
                    a.0.min(b.0) - r,
                    a.1.min(b.1) - r,
                    a.0.max(b.0) + r,
                    a.1.max(b.1) + r,
                )
            }
            Sdf::Rect(c, hw, hh, _) => (c.0 - hw, c.1 - hh, c.0 + hw, c.1 + hh),
            Sdf::Poly(v) => v.iter().fold(
                (
                    f32::INFINITY,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::NEG_INFINITY,
                ),
                |b, p| (b.0.min(p.0), b.1.min(p.1), b.2.max(p.0), b.3.max(p.1)),
            ),
            Sdf::Union(list) | Sdf::Smooth(_, list) => list.iter().map(Sdf::bounds).fold(
                (
                    f32::INFINITY,
                    f32::INFINITY,
                    f32::NEG_INFINITY,
                    f32::NEG_INFINITY,
                ),
                |a, b| (a.0.min(b.0), a.1.min(b.1), a.2.max(b.2), a.3.max(b.3)),
            ),
            Sdf::Sub(a, _) => a.bounds(),
            Sdf::Inter(a, b) => {
                let (p, q) = (a.bounds(), b.bounds());
                (p.0.max(q.0), p.1.max(q.1), p.2.min(q.2), p.3.min(q.3))
            }
            Sdf::Round(a, r) => {
                let b = a.bounds();
                (b.0 - r, b.1 - r, b.2 + r, b.3 + r)
            }
        }
    }
}

/// Exact signed distance to a polygon (negative inside), after Inigo Quilez.
fn poly(v: &[V], x: f32, y: f32) -> f32 {
    if v.len() < 3 {
        return f32::INFINITY;
    }
    let mut d = (x - v[0].0).powi(2) + (y - v[0].1).powi(2);
    let mut s = 1.0;
    let mut j = v.len() - 1;
    for i in 0..v.len() {
        let (ex, ey) = (v[j].0 - v[i].0, v[j].1 - v[i].1);
        let (wx, wy) = (x - v[i].0, y - v[i].1);
        let ee = ex * ex + ey * ey;
        let t = if ee > 0.0 {
            ((wx * ex + wy * ey) / ee).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let (bx, by) = (wx - ex * t, wy - ey * t);
        d = d.min(bx * bx + by * by);
        let c1 = y >= v[i].1;
        let c2 = y < v[j].1;
        let c3 = ex * wy > ey * wx;
        if (c1 && c2 && c3) || (!c1 && !c2 && !c3) {
            s = -s;
        }
        j = i;
    }
    s * d.sqrt()
}

// Short constructors: shapes read like drawings.
pub fn circle(x: f32, y: f32, r: f32) -> Sdf {
    Sdf::Circle(V(x, y), r)
}
pub fn ellipse(x: f32, y: f32, rx: f32, ry: f32) -> Sdf {
    Sdf::Ellipse(V(x, y), rx, ry)
}
pub fn cap(ax: f32, ay: f32, bx: f32, by: f32, ra: f32, rb: f32) -> Sdf {
    Sdf::Capsule(V(ax, ay), V(bx, by), ra, rb)
}
/// A box from (x0, y0) to (x1, y1) with corner radius r.
pub fn rect(x0: f32, y0: f32, x1: f32, y1: f32, r: f32) -> Sdf {
    Sdf::Rect(
        V((x0 + x1) / 2.0, (y0 + y1) / 2.0),
        (x1 - x0).abs() / 2.0,
        (y1 - y0).abs() / 2.0,
        r,
    )
}
pub fn poly_of(points: &[(f32, f32)]) -> Sdf {
    Sdf::Poly(points.iter().map(|&(x, y)| V(x, y)).collect())
}
pub fn union(list: Vec<Sdf>) -> Sdf {
    Sdf::Union(list)
}
pub fn smooth(k: f32, list: Vec<Sdf>) -> Sdf {
    Sdf::Smooth(k, list)
}
pub fn sub(a: Sdf, b: Sdf) -> Sdf {
    Sdf::Sub(Box::new(a), Box::new(b))
}
pub fn inter(a: Sdf, b: Sdf) -> Sdf {
    Sdf::Inter(Box::new(a), Box::new(b))
}
/// A chain of capsules through `points`, radius tapering from r0 to r1.
pub fn chain(points: &[(f32, f32)], r0: f32, r1: f32) -> Sdf {
    let n = points.len().saturating_sub(1).max(1) as f32;
    let list = points
        .windows(2)
        .enumerate()
        .map(|(i, p)| {
            let ra = r0 + (r1 - r0) * i as f32 / n;
            let rb = r0 + (r1 - r0) * (i + 1) as f32 / n;
            cap(p[0].0, p[0].1, p[1].0, p[1].1, ra, rb)
        })
        .collect();
    Sdf::Union(list)
}
/// A polygon rotated by `angle` radians about (cx, cy).
pub fn rotated(points: &[(f32, f32)], cx: f32, cy: f32, angle: f32) -> Sdf {
    let (s, c) = angle.sin_cos();
    Sdf::Poly(
        points
            .iter()
            .map(|&(x, y)| {
                let (dx, dy) = (x - cx, y - cy);
                V(cx + dx * c - dy * s, cy + dx * s + dy * c)
            })
            .collect(),
    )
}

/// How a part is coloured at a local point.
pub enum Fill {
    Solid(Rgb),
    /// Horizontal bands of period `p` in y alternating `a` and `b`.
    Bands(Rgb, Rgb, f32),
    /// Any function of the local point.
    Func(Box<dyn Fn(f32, f32) -> Rgb + Send + Sync>),
}

impl Fill {
    fn at(&self, x: f32, y: f32) -> Rgb {
        match self {
            Fill::Solid(c) => *c,
            Fill::Bands(a, b, p) => {
                if (y / p).floor() as i64 % 2 == 0 {
                    *a
                } else {
                    *b
                }
            }
            Fill::Func(f) => f(x, y),
        }
    }
}

pub struct Part {
    pub sdf: Sdf,
    pub fill: Fill,
    /// Rounded shading from the outline inwards (0 = flat).
    pub shade: f32,
    /// Value-noise texture amplitude and its frequency (per unit).
    pub tex: f32,
    pub tex_freq: f32,
    /// Emits light: not darkened at night, not hazed much.
    pub emissive: bool,
    pub alpha: f32,
}

impl Part {
    pub fn new(sdf: Sdf, color: Rgb) -> Part {
        Part {
            sdf,
            fill: Fill::Solid(color),
            shade: 0.6,
            tex: 0.0,
            tex_freq: 30.0,
            emissive: false,
            alpha: 1.0,
        }
    }
    pub fn fill(sdf: Sdf, fill: Fill) -> Part {
        Part {
            fill,
            ..Part::new(sdf, [0.0; 3])
        }
    }
    pub fn flat(mut self) -> Part {
        self.shade = 0.0;
        self
    }
    pub fn shade(mut self, k: f32) -> Part {
        self.shade = k;
        self
    }
    pub fn tex(mut self, amp: f32, freq: f32) -> Part {
        self.tex = amp;
        self.tex_freq = freq;
        self
    }
    pub fn glow(mut self) -> Part {
        self.emissive = true;
        self.shade = 0.0;
        self
    }
    pub fn alpha(mut self, a: f32) -> Part {
        self.alpha = a;
        self
    }
}

/// Where an object goes: local (0, 0) lands on pixel (ox, oy), one unit is `s` pixels, and
/// `flip` = -1 mirrors it left to right.
#[derive(Debug, Clone, Copy)]
pub struct Xform {
    pub ox: f32,
    pub oy: f32,
    pub s: f32,
    pub flip: f32,
}

/// The light an object is seen in.
#[derive(Debug, Clone, Copy)]
pub struct Light {
    /// Direction towards the light in local units (y up, +x towards the object's front is not
    /// implied: this is in picture space and flipped for mirrored objects).
    pub dir: (f32, f32),
    /// Multiplies the colours (the colour of the light).
    pub key: Rgb,
    /// 0 = fully lit, 1 = a flat silhouette in `shadow`.
    pub silhouette: f32,
    pub shadow: Rgb,
    /// Rim light on the edges facing the light.
    pub rim: f32,
    pub rim_color: Rgb,
    /// Atmospheric haze towards `haze_color`.
    pub haze: f32,
    pub haze_color: Rgb,
    /// Global opacity (reflections are drawn fainter).
    pub opacity: f32,
}

impl Light {
    pub fn plain() -> Light {
        Light {
            dir: (-0.6, 0.8),
            key: [1.0, 1.0, 1.0],
            silhouette: 0.0,
            shadow: [0.0; 3],
            rim: 0.0,
            rim_color: [1.0; 3],
            haze: 0.0,
            haze_color: [1.0; 3],
            opacity: 1.0,
        }
    }
}

/// Paints `parts` in order. `mirror` draws the object upside down about its base (a reflection),
/// with each row shifted by `wobble(row)` pixels.
pub fn draw(
    c: &mut Canvas,
    parts: &[Part],
    t: Xform,
    light: &Light,
    mirror: Option<&dyn Fn(i64) -> f32>,
) {
    if t.s <= 0.0 {
        return;
    }
    let inv = 1.0 / t.s;
    let (ldx, ldy) = {
        let (x, y) = (light.dir.0 * t.flip, light.dir.1);
        let n = len(x, y).max(1e-6);
        (x / n, y / n)
    };
    for part in parts {
        let (bx0, by0, bx1, by1) = part.sdf.bounds();
        if !bx0.is_finite() || !by1.is_finite() {
            continue;
        }
        // Pixel box, with a pixel of margin for anti-aliasing.
        let (xa, xb) = if t.flip >= 0.0 {
            (t.ox + bx0 * t.s, t.ox + bx1 * t.s)
        } else {
            (t.ox - bx1 * t.s, t.ox - bx0 * t.s)
        };
        let (ya, yb) = if mirror.is_some() {
            (t.oy + by0 * t.s, t.oy + by1 * t.s)
        } else {
            (t.oy - by1 * t.s, t.oy - by0 * t.s)
        };
        let pad = if mirror.is_some() {
            t.s * 0.08 + 2.0
        } else {
            2.0
        };
        let x0 = ((xa - pad).floor() as i64).max(0);
        let x1 = ((xb + pad).ceil() as i64).min(c.w as i64 - 1);
        let y0 = ((ya - 2.0).floor() as i64).max(0);
        let y1 = ((yb + 2.0).ceil() as i64).min(c.h as i64 - 1);
        if x0 > x1 || y0 > y1 {
            continue;
        }
        let shade_r = 0.07;
        for py in y0..=y1 {
            let shift = mirror.map_or(0.0, |f| f(py));
            let ly = if mirror.is_some() {
                (py as f32 + 0.5 - t.oy) * inv
            } else {
                (t.oy - py as f32 - 0.5) * inv
            };
            for px in x0..=x1 {
                let lx = (px as f32 + 0.5 - shift - t.ox) * inv * t.flip;
                let d = part.sdf.eval(lx, ly);
                let cov = (0.5 - d * t.s).clamp(0.0, 1.0);
                if cov <= 0.0 {
                    continue;
                }
                let mut col = part.fill.at(lx, ly);
                if part.shade > 0.0 && -d < shade_r {
                    let e = inv;
                    let gx = part.sdf.eval(lx + e, ly) - d;
                    let gy = part.sdf.eval(lx, ly + e) - d;
                    let gn = len(gx, gy).max(1e-9);
                    // Picture-space normal: undo the flip on x.
                    let (nx, ny) = (gx / gn * t.flip, gy / gn);
                    let ndl = nx * ldx + ny * ldy;
                    let edge = 1.0 - smoothstep(0.0, shade_r, -d);
                    let k = 1.0 + part.shade * edge * (0.45 * ndl - 0.12);
                    col = scale(col, k.max(0.0));
                }
                if part.tex > 0.0 {
                    let n = value2(lx * part.tex_freq, ly * part.tex_freq, 0x7E5);
                    col = scale(col, 1.0 + part.tex * (n - 0.5) * 2.0);
                }
                if part.emissive {
                    col = mix(col, light.haze_color, light.haze * 0.3);
                } else {
                    col = [
                        col[0] * light.key[0],
                        col[1] * light.key[1],
                        col[2] * light.key[2],
                    ];
                    col = mix(col, light.shadow, light.silhouette);
                    if light.rim > 0.0 && -d < shade_r * 0.6 {
                        let e = inv;
                        let gx = part.sdf.eval(lx + e, ly) - d;
                        let gy = part.sdf.eval(lx, ly + e) - d;
                        let gn = len(gx, gy).max(1e-9);
                        let ndl = (gx / gn * t.flip) * ldx + gy / gn * ldy;
                        let edge = 1.0 - smoothstep(0.0, shade_r * 0.6, -d);
                        col = screen(col, light.rim_color, light.rim * edge * ndl.max(0.0));
                    }
                    col = mix(col, light.haze_color, light.haze);
                }
                c.blend(px, py, col, cov * part.alpha * light.opacity);
            }
        }
    }
}

/// A soft elliptical contact shadow on the ground under an object.
pub fn ground_shadow(c: &mut Canvas, x: f32, y: f32, rx: f32, ry: f32, color: Rgb, a: f32) {
    let x0 = ((x - rx * 1.5).floor() as i64).max(0);
    let x1 = ((x + rx * 1.5).ceil() as i64).min(c.w as i64 - 1);
    let y0 = ((y - ry * 1.5).floor() as i64).max(0);
    let y1 = ((y + ry * 1.5).ceil() as i64).min(c.h as i64 - 1);
    for py in y0..=y1 {
        for px in x0..=x1 {
            let dx = (px as f32 + 0.5 - x) / rx;
            let dy = (py as f32 + 0.5 - y) / ry;
            let d2 = dx * dx + dy * dy;
            if d2 < 2.25 {
                let k = (1.0 - smoothstep(0.2, 1.5, d2.sqrt())) * a;
                c.blend(px, py, color, k);
            }
        }
    }
}

/// A soft additive glow (lamps, windows, flames).
pub fn glow(c: &mut Canvas, x: f32, y: f32, r: f32, color: Rgb, a: f32) {
    let reach = r * 2.5;
    let x0 = ((x - reach).floor() as i64).max(0);
    let x1 = ((x + reach).ceil() as i64).min(c.w as i64 - 1);
    let y0 = ((y - reach).floor() as i64).max(0);
    let y1 = ((y + reach).ceil() as i64).min(c.h as i64 - 1);
    for py in y0..=y1 {
        for px in x0..=x1 {
            let dx = px as f32 + 0.5 - x;
            let dy = py as f32 + 0.5 - y;
            let d2 = (dx * dx + dy * dy) / (r * r);
            let k = a / (1.0 + d2 * 3.0) - a * 0.05;
            if k > 0.0 {
                c.light(px, py, color, k);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_have_the_right_sign() {
        assert!(circle(0.0, 0.0, 1.0).eval(0.0, 0.0) < 0.0);
        assert!((circle(0.0, 0.0, 1.0).eval(2.0, 0.0) - 1.0).abs() < 1e-5);
        assert!(rect(-1.0, -1.0, 1.0, 1.0, 0.0).eval(0.5, 0.5) < 0.0);
        assert!((rect(-1.0, -1.0, 1.0, 1.0, 0.0).eval(3.0, 0.0) - 2.0).abs() < 1e-5);
        let tri = poly_of(&[(0.0, 0.0), (1.0, 0.0), (0.0, 1.0)]);
        assert!(tri.eval(0.2, 0.2) < 0.0);
        assert!(tri.eval(1.0, 1.0) > 0.0);
        assert!(cap(0.0, 0.0, 1.0, 0.0, 0.2, 0.1).eval(0.5, 0.0) < 0.0);
        assert!(ellipse(0.0, 0.0, 2.0, 1.0).eval(1.5, 0.0) < 0.0);
        assert!(ellipse(0.0, 0.0, 2.0, 1.0).eval(0.0, 1.5) > 0.0);
        let s = sub(circle(0.0, 0.0, 1.0), circle(0.0, 0.0, 0.5));
        assert!(s.eval(0.0, 0.0) > 0.0 && s.eval(0.75, 0.0) < 0.0);
    }

    #[test]
    fn drawing_covers_the_shape() {
        let mut c = Canvas::new(100, 100);
        let parts = [Part::new(circle(0.0, 0.5, 0.5), [1.0, 0.0, 0.0]).flat()];
        let t = Xform {
            ox: 50.0,
            oy: 90.0,
            s: 40.0,
            flip: 1.0,
        };
        draw(&mut c, &parts, t, &Light::plain(), None);
        // Centre of the disc at (50, 70), radius 20.
        assert!(c.px[70 * 100 + 50][0] > 0.99);
        assert!(c.px[70 * 100 + 5][0] < 0.01);
        assert!(c.px[45 * 100 + 50][0] < 0.01);
    }
}
