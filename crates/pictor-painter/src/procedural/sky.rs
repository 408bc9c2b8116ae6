//! Sky layers: the gradient with its sun or moon glow, nebulae and the milky way, stars, the
//! sun, moon and planets, and clouds. Painted first, back to front.

use super::canvas::{Canvas, Rgb, mix, scale, screen, smoothstep};
use super::noise::{Field, Rng, fbm1, fbm2, value2};
use super::scene::{Body, Moon, Plan, Planet};

/// Gradient, glow, nebula and milky way in one pass over every pixel.
pub fn gradient(c: &mut Canvas, plan: &Plan) {
    let p = &plan.pal;
    let u = plan.unit;
    let (w, h) = (c.w, c.h);
    let horizon = plan.horizon.max(1.0);
    let oct = plan.detail.field_octaves;
    let seed = plan.seed;

    // Nebula: two warped noise fields, coloured and added as light.
    let nebula = plan.nebula.then(|| {
        (
            Field::new(w, h, plan.detail.cell, |x, y| {
                let (x, y) = (x / (u * 420.0), y / (u * 420.0));
                let warp = fbm2(x * 1.3, y * 1.3, 3, 0.5, seed ^ 0x51);
                let v = fbm2(x + warp * 1.6, y - warp, oct + 1, 0.55, seed ^ 0x52);
                smoothstep(0.42, 0.78, v)
            }),
            Field::new(w, h, plan.detail.cell, |x, y| {
                fbm2(x / (u * 260.0), y / (u * 260.0), oct, 0.5, seed ^ 0x53)
            }),
        )
    });
    // Milky way: a band across the sky with clumpy noise inside.
    let milky = plan.milky_way.map(|(slope, offset)| {
        let norm = (1.0 + slope * slope).sqrt();
        let cy = horizon * offset;
        let width = u * 120.0;
        Field::new(w, h, plan.detail.cell, move |x, y| {
            let d = (y - cy - slope * (x - w as f32 / 2.0)) / norm / width;
            let band = 1.0 / (1.0 + d * d * d * d);
            band * smoothstep(
                0.3,
                0.8,
                fbm2(x / (u * 90.0), y / (u * 90.0), oct, 0.55, seed),
            )
        })
    });

    let mut scratch = Vec::new();
    let mut n1 = vec![0.0; w];
    let mut n2 = vec![0.0; w];
    let mut mw = vec![0.0; w];
    for y in 0..h {
        let t = y as f32 / horizon;
        let base = if t < 0.55 {
            mix(p.sky_top, p.sky_mid, smoothstep(0.0, 0.55, t))
        } else {
            mix(p.sky_mid, p.sky_low, smoothstep(0.55, 1.0, t))
        };
        if let Some((a, b)) = &nebula {
            a.row(y, &mut scratch, &mut n1);
            b.row(y, &mut scratch, &mut n2);
        }
        if let Some(m) = &milky {
            m.row(y, &mut scratch, &mut mw);
        }
        let row = c.row_mut(y);
        for (x, px) in row.iter_mut().enumerate() {
            let mut col = base;
            if let Some(g) = plan.glow {
                let dx = x as f32 - g.x;
                let dy = y as f32 - g.y;
                let d2 = dx * dx + dy * dy;
                let r2 = g.radius * g.radius;
                let k = g.strength * (r2 / (r2 + d2 * 3.0) + 0.35 * r2 / (r2 + d2 * 0.25));
                col = screen(col, p.glow, k.min(1.0));
            }
            if nebula.is_some() {
                let v = n1[x];
                let tint = mix(p.nebula[0], p.nebula[1], n2[x]);
                col = [
                    col[0] + tint[0] * v * 0.75,
                    col[1] + tint[1] * v * 0.75,
                    col[2] + tint[2] * v * 0.75,
                ];
            }
            if milky.is_some() {
                let v = mw[x] * 0.22;
                col = [col[0] + v * 0.9, col[1] + v * 0.9, col[2] + v];
            }
            *px = col;
        }
    }
}

/// Scattered stars: mostly faint, a few bright with a small halo; fewer near the horizon.
pub fn stars(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    if plan.stars <= 0.0 {
        return;
    }
    let (w, h) = (c.w as f32, c.h as f32);
    let sky_h = plan.horizon.min(h);
    let count = (plan.stars * w * sky_h / 1.0e6) as usize;
    for _ in 0..count {
        let x = rng.unit() * w;
        let y = rng.unit().powf(1.3) * sky_h;
        let fade = 1.0 - smoothstep(sky_h * 0.55, sky_h, y);
        let b = (0.12 + 0.88 * rng.unit().powi(3)) * fade;
        let hue = rng.unit();
        let color = if hue < 0.2 {
            [0.75, 0.85, 1.0]
        } else if hue < 0.3 {
            [1.0, 0.88, 0.72]
        } else {
            [1.0, 1.0, 1.0]
        };
        splat(c, x, y, color, b);
        if b > 0.72 {
            let r = plan.unit * 3.0 * b;
            halo(c, x, y, r, color, b * 0.35);
        }
    }
    // The milky way gets its own dense dust of faint stars.
    if let Some((slope, offset)) = plan.milky_way {
        let cy = sky_h * offset;
        for _ in 0..count {
            let x = rng.unit() * w;
            let spread = (rng.unit() + rng.unit() + rng.unit() - 1.5) * plan.unit * 110.0;
            let y = cy + slope * (x - w / 2.0) + spread;
            if y < 0.0 || y > sky_h {
                continue;
            }
            let b = 0.08 + 0.35 * rng.unit().powi(2);
            splat(c, x, y, [0.95, 0.95, 1.0], b);
        }
    }
}

/// A point of light spread bilinearly over four pixels (sub-pixel position).
fn splat(c: &mut Canvas, x: f32, y: f32, color: Rgb, b: f32) {
    let (xf, yf) = ((x - 0.5).floor(), (y - 0.5).floor());
    let (tx, ty) = (x - 0.5 - xf, y - 0.5 - yf);
    let (xi, yi) = (xf as i64, yf as i64);
    c.light(xi, yi, color, b * (1.0 - tx) * (1.0 - ty) * 1.6);
    c.light(xi + 1, yi, color, b * tx * (1.0 - ty) * 1.6);
    c.light(xi, yi + 1, color, b * (1.0 - tx) * ty * 1.6);
    c.light(xi + 1, yi + 1, color, b * tx * ty * 1.6);
}

/// A soft round glow of radius `r`.
fn halo(c: &mut Canvas, x: f32, y: f32, r: f32, color: Rgb, strength: f32) {
    let reach = (r * 3.0).ceil() as i64;
    let (xi, yi) = (x as i64, y as i64);
    for py in yi - reach..=yi + reach {
        for px in xi - reach..=xi + reach {
            let dx = px as f32 + 0.5 - x;
            let dy = py as f32 + 0.5 - y;
            let d2 = (dx * dx + dy * dy) / (r * r);
            let k = strength / (1.0 + d2 * 4.0) - strength * 0.03;
            c.light(px, py, color, k);
        }
    }
}

/// The sun: a bright disc, slightly darker towards the limb.
pub fn sun(c: &mut Canvas, plan: &Plan, s: Body) {
    let p = &plan.pal;
    bbox_each(c, s.x, s.y, s.r + 1.0, |c, x, y, dx, dy| {
        let d = (dx * dx + dy * dy).sqrt();
        let cov = (s.r - d + 0.5).clamp(0.0, 1.0);
        if cov > 0.0 {
            let t = (d / s.r).min(1.0);
            let col = mix(p.sun, mix(p.sun, p.glow, 0.6), t * t);
            c.blend(x, y, col, cov);
        }
    });
}

/// The moon: textured disc with a phase shadow; the dark part lets a little sky through.
pub fn moon(c: &mut Canvas, plan: &Plan, m: Moon) {
    let b = m.body;
    let p = &plan.pal;
    let seed = plan.seed ^ 0x3001;
    let oct = plan.detail.field_octaves + 1;
    bbox_each(c, b.x, b.y, b.r + 1.0, |c, x, y, dx, dy| {
        let d = (dx * dx + dy * dy).sqrt();
        let cov = (b.r - d + 0.5).clamp(0.0, 1.0);
        if cov <= 0.0 {
            return;
        }
        let lit = match m.shadow {
            None => 1.0,
            Some((ox, oy)) => {
                let sx = dx - ox * b.r;
                let sy = dy - oy * b.r;
                let ds = (sx * sx + sy * sy).sqrt();
                ((ds - b.r) / (b.r * 0.06) + 0.5).clamp(0.0, 1.0)
            }
        };
        let (mx, my) = (dx / b.r * 2.5, dy / b.r * 2.5);
        let maria = smoothstep(0.45, 0.7, fbm2(mx + 10.0, my + 10.0, oct, 0.5, seed));
        let albedo = 0.95 - 0.22 * maria - 0.08 * value2(mx * 6.0, my * 6.0, seed ^ 9);
        let limb = 1.0 - 0.18 * (d / b.r).powi(4);
        let col = scale(p.sun, albedo * limb);
        let under = c.px[y as usize * c.w + x as usize];
        // Earthshine: the unlit part is only slightly brighter than the sky behind it.
        let dark = mix(under, scale(p.sun, 0.2), 0.25);
        c.blend(x, y, mix(dark, col, lit), cov);
    });
}

/// A planet with banded clouds, a day/night terminator, an atmosphere rim and optional rings.
pub fn planet(c: &mut Canvas, plan: &Plan, pl: Planet) {
    let b = pl.body;
    let ring_outer = b.r * 2.1;
    let ring_inner = b.r * 1.35;
    let flat = 0.26;
    let ring_color = mix(pl.colors[1], [0.9, 0.88, 0.82], 0.5);
    let ring = |c: &mut Canvas, front: bool| {
        let Some(tilt) = pl.ring else { return };
        let (s, co) = tilt.sin_cos();
        bbox_each(c, b.x, b.y, ring_outer + 1.0, |c, x, y, dx, dy| {
            let ru = dx * co + dy * s;
            let rv = -dx * s + dy * co;
            if (rv > 0.0) != front {
                return;
            }
            let e = (ru * ru + (rv / flat) * (rv / flat)).sqrt();
            if e < ring_inner || e > ring_outer {
                return;
            }
            let t = (e - ring_inner) / (ring_outer - ring_inner);
            let bands = 0.55 + 0.45 * fbm1(t * 9.0, 3, 0.5, pl.seed ^ 0x77);
            let edge = smoothstep(0.0, 0.04, t) * (1.0 - smoothstep(0.94, 1.0, t));
            let gap = 1.0 - 0.8 * (1.0 - smoothstep(0.0, 0.03, (t - 0.62).abs()));
            c.blend(
                x,
                y,
                scale(ring_color, 0.5 + 0.5 * bands),
                0.8 * edge * gap * bands,
            );
        });
    };

    ring(c, false);
    let (lx, ly) = pl.light;
    let lz = 0.45;
    let ln = (lx * lx + ly * ly + lz * lz).sqrt();
    let oct = plan.detail.field_octaves;
    bbox_each(c, b.x, b.y, b.r * 1.08 + 1.0, |c, x, y, dx, dy| {
        let d = (dx * dx + dy * dy).sqrt();
        let (nx, ny) = (dx / b.r, dy / b.r);
        let n2 = nx * nx + ny * ny;
        let diffuse_rim = ((nx * lx + ny * ly) / ln).max(0.0);
        if d > b.r - 0.5 {
            // Atmosphere: a thin glow on the lit side.
            let t = ((d - b.r) / (b.r * 0.08)).clamp(0.0, 1.0);
            c.light(
                x,
                y,
                pl.colors[1],
                (1.0 - t) * (1.0 - t) * 0.5 * diffuse_rim,
            );
        }
        let cov = (b.r - d + 0.5).clamp(0.0, 1.0);
        if cov <= 0.0 {
            return;
        }
        let nz = (1.0 - n2).max(0.0).sqrt();
        let diffuse = ((nx * lx + ny * ly + nz * lz) / ln).max(0.0);
        // Bands follow latitude, wobbling with longitude.
        let lat = ny + 0.08 * fbm2(nx * 3.0, ny * 3.0, oct, 0.5, pl.seed);
        let band = fbm1(lat * 7.0, oct, 0.55, pl.seed ^ 0x99);
        let col = mix(pl.colors[0], pl.colors[1], smoothstep(0.3, 0.7, band));
        let light = 0.04 + 0.96 * smoothstep(0.0, 0.35, diffuse) * (0.6 + 0.4 * diffuse);
        c.blend(x, y, scale(col, light), cov);
    });
    ring(c, true);
}

/// Clouds: anisotropic noise, thresholded, lit near the sun and darker where thick.
pub fn clouds(c: &mut Canvas, plan: &Plan) {
    if plan.clouds <= 0.0 {
        return;
    }
    let p = &plan.pal;
    let u = plan.unit;
    let seed = plan.seed ^ 0xC10D;
    let oct = plan.detail.field_octaves + 1;
    let sky_h = (plan.horizon.min(c.h as f32)) as usize;
    if sky_h == 0 {
        return;
    }
    let field = Field::new(c.w, sky_h, plan.detail.cell, |x, y| {
        // Flatter and finer towards the horizon: a cheap perspective.
        let t = y / sky_h as f32;
        let sy = 1.0 + 2.5 * t * t;
        let warp = value2(x / (u * 300.0), y / (u * 120.0), seed ^ 7);
        fbm2(
            x / (u * 330.0) + warp * 0.8,
            y * sy / (u * 110.0),
            oct,
            0.52,
            seed,
        )
    });
    let th = 0.62 - 0.24 * plan.clouds;
    let mut scratch = Vec::new();
    let mut row_n = vec![0.0; c.w];
    for y in 0..sky_h {
        field.row(y, &mut scratch, &mut row_n);
        let yf = y as f32;
        let env = 1.0 - 0.6 * smoothstep(sky_h as f32 * 0.75, sky_h as f32, yf);
        let row = c.row_mut(y);
        for (x, px) in row.iter_mut().enumerate() {
            let n = row_n[x];
            if n <= th {
                continue;
            }
            let a = smoothstep(th, th + 0.16, n) * env * 0.96;
            let thick = smoothstep(th + 0.04, th + 0.3, n);
            let mut light = p.cloud_light;
            if let Some(g) = plan.glow {
                let dx = x as f32 - g.x;
                let dy = yf - g.y;
                let r2 = g.radius * g.radius;
                let k = r2 / (r2 + (dx * dx + dy * dy) * 2.0) * g.strength;
                light = mix(light, p.glow, k.min(1.0));
            }
            let col = mix(light, p.cloud_dark, thick * 0.7);
            *px = mix(*px, col, a);
        }
    }
}

/// Calls `f(canvas, x, y, dx, dy)` for each pixel in the square of radius `r` around (cx, cy)
/// that lies on the canvas; (dx, dy) is the pixel centre relative to (cx, cy).
fn bbox_each(
    c: &mut Canvas,
    cx: f32,
    cy: f32,
    r: f32,
    mut f: impl FnMut(&mut Canvas, i64, i64, f32, f32),
) {
    let x0 = ((cx - r).floor() as i64).max(0);
    let x1 = ((cx + r).ceil() as i64).min(c.w as i64 - 1);
    let y0 = ((cy - r).floor() as i64).max(0);
    let y1 = ((cy + r).ceil() as i64).min(c.h as i64 - 1);
    for y in y0..=y1 {
        for x in x0..=x1 {
            let dx = x as f32 + 0.5 - cx;
            let dy = y as f32 + 0.5 - cy;
            f(c, x, y, dx, dy);
        }
    }
}
