//! Scene features beyond sky, terrain and water: aurora and rainbow, rivers and roads in
//! perspective, fields of flowers, islands, rain, lightning and fireflies, the synthwave grid,
//! and the non-landscape settings (a still life on a table, a room, the underwater world).

use std::f32::consts::PI;

use super::canvas::{Canvas, Rgb, mix, rgb, scale, screen, smoothstep};
use super::noise::{Field, Rng, fbm1, fbm2, value2};
use super::objects::{self, Look};
use super::scene::Plan;
use super::shapes::{self, Light, Part, Xform, ellipse, inter, rect};

/// Curtains of green and violet light hanging in the night sky.
pub fn aurora(c: &mut Canvas, plan: &Plan) {
    let (w, h) = (c.w, c.h);
    let u = plan.unit;
    let sky_h = plan.horizon.min(h as f32);
    let seed = plan.seed ^ 0xA0A;
    let base: Vec<f32> = (0..w)
        .map(|x| {
            let f = x as f32 / (u * 500.0);
            sky_h * (0.45 + 0.25 * (fbm1(f, 3, 0.5, seed) - 0.5) * 2.0)
        })
        .collect();
    let rays: Vec<f32> = (0..w)
        .map(|x| {
            let f = x as f32 / (u * 9.0);
            0.35 + 0.65 * fbm1(f, 3, 0.6, seed ^ 1)
        })
        .collect();
    let green = rgb(70, 255, 160);
    let violet = rgb(170, 90, 255);
    for y in 0..(sky_h as usize).min(h) {
        let row = c.row_mut(y);
        for x in 0..w {
            let d = base[x] - y as f32;
            if d < -u * 12.0 {
                continue;
            }
            let lower = smoothstep(-u * 12.0, u * 6.0, d);
            let up = (-d.max(0.0) / (u * 220.0)).exp();
            let k = lower * up * rays[x] * 0.85;
            let col = mix(green, violet, smoothstep(u * 40.0, u * 220.0, d));
            row[x] = screen(row[x], col, k);
        }
    }
}

/// A rainbow arc, its colours faint and fading at the ends.
pub fn rainbow(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    let (w, h) = (c.w as f32, c.h as f32);
    let cx = w * rng.range(0.35, 0.65);
    let cy = plan.horizon.min(h) + h * 0.1;
    let r = w.max(h) * rng.range(0.45, 0.6);
    let band = r * 0.07;
    let colors = [
        rgb(150, 60, 200),
        rgb(60, 80, 230),
        rgb(60, 170, 230),
        rgb(70, 200, 80),
        rgb(250, 230, 60),
        rgb(250, 150, 40),
        rgb(230, 50, 40),
    ];
    let y_end = plan.horizon.min(h) as usize;
    for y in 0..y_end {
        let row = c.row_mut(y);
        for (x, px) in row.iter_mut().enumerate() {
            let dx = x as f32 - cx;
            let dy = y as f32 - cy;
            let d = (dx * dx + dy * dy).sqrt();
            let t = (d - (r - band)) / band;
            if !(0.0..1.0).contains(&t) {
                continue;
            }
            let f = t * 6.0;
            let i = (f as usize).min(5);
            let col = mix(colors[i], colors[i + 1], f - i as f32);
            let fade = smoothstep(0.0, 0.25, 1.0 - (y as f32 / y_end as f32)) * 0.3
                + 0.2 * smoothstep(0.2, 0.9, 1.0 - y as f32 / y_end as f32);
            let edge = (t * PI).sin();
            *px = mix(*px, screen(*px, col, 0.9), fade * edge);
        }
    }
}

/// A river winding from the horizon to the viewer, reflecting the sky.
pub fn river(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    let (w, h) = (c.w as f32, c.h as f32);
    let hz = plan.horizon.min(h * 0.9);
    let phase = rng.range(0.0, 6.0);
    let x_end = w * rng.range(0.3, 0.7);
    let x_far = w * rng.range(0.4, 0.6);
    let sky = plan.pal.sky_mid;
    let low = plan.pal.sky_low;
    let water = plan.pal.water;
    let u = plan.unit;
    for y in (hz as usize + 1)..c.h {
        let t = (y as f32 - hz) / (h - hz);
        let cx = x_far + (x_end - x_far) * t + (t * 9.0 + phase).sin() * w * 0.12 * t;
        let half = w * (0.004 + 0.22 * t.powf(1.6));
        let refl = mix(low, sky, t);
        let row = c.row_mut(y);
        let (x0, x1) = (
            (cx - half - 2.0).max(0.0) as usize,
            ((cx + half + 2.0) as usize).min(row.len()),
        );
        for (x, px) in row.iter_mut().enumerate().take(x1).skip(x0) {
            let d = (x as f32 - cx).abs() - half;
            let cov = (0.5 - d).clamp(0.0, 1.0);
            if cov <= 0.0 {
                continue;
            }
            let ripple = value2(
                x as f32 / (u * 30.0),
                y as f32 / (u * 3.0),
                plan.seed ^ 0x21,
            );
            let mut col = mix(water, refl, 0.55 + 0.2 * ripple);
            // Darker banks.
            col = scale(col, 1.0 - 0.25 * smoothstep(-u * 6.0 * (0.3 + t), 0.0, d));
            *px = mix(*px, col, cov);
        }
    }
}

/// A road (asphalt in towns, a dirt path elsewhere) running to the horizon.
pub fn road(c: &mut Canvas, plan: &Plan, rng: &mut Rng, paved: bool) {
    let (w, h) = (c.w as f32, c.h as f32);
    let hz = plan.horizon.min(h * 0.9);
    let vx = w * rng.range(0.4, 0.6);
    let bend = rng.range(-0.2, 0.2) * w;
    let surface = if paved {
        scale(mix(rgb(70, 72, 78), plan.pal.haze, 0.2), 1.0)
    } else {
        mix(plan.pal.sand, plan.pal.land_near, 0.35)
    };
    let line = rgb(240, 230, 200);
    for y in (hz as usize + 1)..c.h {
        let t = (y as f32 - hz) / (h - hz);
        let cx = vx + bend * t * t;
        let half = w * (0.003 + 0.3 * t);
        let row = c.row_mut(y);
        let x0 = (cx - half - 2.0).max(0.0) as usize;
        let x1 = ((cx + half + 2.0) as usize).min(row.len());
        // Dashes evenly spaced on the ground: the depth coordinate is 1/t.
        let dash = ((1.0 / (t + 0.02)) * 1.6).fract() < 0.5;
        for (x, px) in row.iter_mut().enumerate().take(x1).skip(x0) {
            let dx = x as f32 - cx;
            let d = dx.abs() - half;
            let cov = (0.5 - d).clamp(0.0, 1.0);
            if cov <= 0.0 {
                continue;
            }
            let n = value2(x as f32 * 0.3, y as f32 * 0.3, plan.seed ^ 0x33);
            let mut col = scale(mix(surface, plan.pal.haze, (1.0 - t) * 0.5), 0.95 + 0.1 * n);
            if paved && dash && dx.abs() < half * 0.025 + 0.5 {
                col = mix(line, plan.pal.haze, (1.0 - t) * 0.5);
            }
            *px = mix(*px, col, cov);
        }
    }
}

/// Flowers scattered over the nearest land, bigger towards the viewer.
pub fn flowers(c: &mut Canvas, plan: &Plan, colors: &[Rgb], rng: &mut Rng) {
    if colors.is_empty() {
        return;
    }
    let (w, h) = (c.w as f32, c.h as f32);
    // Land layers that can bloom, back to front; a flower on one must lie between its ridge and
    // the ridge of every nearer layer (or it would float over the nearer hill).
    let layers: Vec<&super::scene::Layer> = plan
        .layers
        .iter()
        .filter(|l| l.depth >= 0.3 && !matches!(l.objects, super::scene::Objects::City { .. }))
        .collect();
    if layers.is_empty() {
        return;
    }
    let ground = |l: &super::scene::Layer, x: f32| {
        super::terrain::ground_at(l, x, plan.w, plan.detail.ridge_octaves.min(l.max_octaves))
    };
    let count = (4500.0 * plan.detail.object_factor * w * h / 1.0e6) as usize;
    let stem = scale(plan.pal.foliage, 0.9);
    let hz = plan.horizon.min(h);
    let mut spots: Vec<(f32, f32)> = (0..count)
        .filter_map(|_| {
            let x = rng.unit() * w;
            let k = rng.below(layers.len());
            let top = ground(layers[k], x);
            let bottom = layers[k + 1..]
                .iter()
                .map(|l| ground(l, x))
                .fold(h, f32::min);
            if top >= bottom - 1.0 || top >= h {
                return None;
            }
            Some((x, top + (bottom - top) * rng.unit()))
        })
        .collect();
    spots.sort_by(|a, b| a.1.total_cmp(&b.1));
    for (x, y) in spots {
        let t = ((y - hz) / (h - hz).max(1.0)).clamp(0.0, 1.0);
        let r = plan.unit * (1.2 + 5.5 * t * t);
        let col = colors[rng.below(colors.len())];
        let col = mix(col, plan.pal.haze, (1.0 - t) * 0.35);
        let lit = match plan.time {
            super::prompt::Time::Night => 0.45,
            super::prompt::Time::Golden => 0.75,
            super::prompt::Time::Day => 1.0,
        };
        if r > 2.5 {
            c.disc(x, y + r * 1.2, r * 0.25, stem, 0.9);
            for k in 0..5 {
                let a = k as f32 / 5.0 * 2.0 * PI + x;
                c.disc(
                    x + a.cos() * r * 0.55,
                    y + a.sin() * r * 0.45,
                    r * 0.5,
                    scale(col, lit),
                    0.95,
                );
            }
            c.disc(x, y, r * 0.3, scale(rgb(250, 200, 60), lit), 1.0);
        } else {
            c.disc(x, y, r, scale(col, lit), 0.9);
        }
    }
}

/// Small islands sitting on the water line, with a palm or two.
pub fn islands(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    let Some(water) = plan.water else { return };
    let (w, h) = (c.w as f32, c.h as f32);
    for i in 0..plan.islands {
        let depth = rng.range(0.05, 0.3);
        let y = water.y + (h - water.y) * depth;
        let size = h * (0.08 + 0.3 * depth);
        let x = w * if i == 0 {
            rng.range(0.25, 0.75)
        } else {
            rng.range(0.1, 0.9)
        };
        let sand = mix(plan.pal.sand, plan.pal.haze, 0.3 - depth);
        let green = mix(plan.pal.foliage, plan.pal.haze, 0.3 - depth);
        let mound = vec![
            Part::new(
                inter(ellipse(0.0, 0.0, 1.2, 0.22), rect(-2.0, 0.0, 2.0, 1.0, 0.0)),
                sand,
            )
            .shade(0.5),
            Part::new(
                inter(
                    ellipse(-0.1, 0.02, 0.8, 0.2),
                    rect(-2.0, 0.06, 2.0, 1.0, 0.0),
                ),
                green,
            )
            .shade(0.6),
        ];
        let mut light = Light::plain();
        light.haze = (0.3 - depth).max(0.0);
        light.haze_color = plan.pal.haze;
        if plan.time != super::prompt::Time::Day {
            light.silhouette = 0.6;
            light.shadow = scale(plan.pal.land_near, 0.8);
        }
        let t = Xform {
            ox: x,
            oy: y,
            s: size,
            flip: 1.0,
        };
        shapes::draw(c, &mound, t, &light, None);
        for k in 0..(1 + rng.below(2)) {
            let look = Look {
                color: None,
                season: None,
                lit: false,
                snow: false,
                underwater: false,
                flying: false,
                seed: rng.next_u32(),
                figure: Default::default(),
            };
            if !plan.island_palms {
                continue;
            }
            let palm = objects::build(super::prompt::Thing::Palm, &look);
            let px = x + (k as f32 - 0.4) * size * 0.5;
            let t = Xform {
                ox: px,
                oy: y - size * 0.12,
                s: size * 1.1 / palm.height,
                flip: if k == 0 { 1.0 } else { -1.0 },
            };
            shapes::draw(c, &palm.parts, t, &light, None);
        }
    }
}

/// Slanted streaks of rain.
pub fn rain(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    if plan.rain <= 0.0 {
        return;
    }
    let (w, h) = (c.w as f32, c.h as f32);
    let count = (plan.rain * 2600.0 * w * h / 1.0e6) as usize;
    let slant = rng.range(-0.25, 0.25);
    let col = mix(plan.pal.cloud_light, rgb(220, 230, 240), 0.5);
    for _ in 0..count {
        let x = rng.unit() * w;
        let y = rng.unit() * h;
        let len = plan.unit * rng.range(10.0, 28.0);
        let a = rng.range(0.12, 0.3);
        let steps = len.ceil() as usize;
        for s in 0..steps {
            let t = s as f32 / steps as f32;
            let px = x + slant * len * t;
            let py = y + len * t;
            c.blend(px as i64, py as i64, col, a * (1.0 - (t - 0.5).abs()));
        }
    }
    // Rain veils the distance.
    for y in 0..c.h {
        let k = 0.12 * plan.rain * (1.0 - smoothstep(plan.horizon, h, y as f32));
        for px in c.row_mut(y) {
            *px = mix(*px, plan.pal.haze, k);
        }
    }
}

/// A forked lightning bolt from the clouds.
pub fn lightning(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    let (w, _) = (c.w as f32, c.h as f32);
    let mut x = w * rng.range(0.2, 0.8);
    let mut y = 0.0;
    let end = plan.horizon.min(c.h as f32);
    let col = rgb(235, 235, 255);
    let u = plan.unit;
    let mut branches = Vec::new();
    while y < end {
        let nx = x + rng.range(-1.0, 1.0) * u * 25.0;
        let ny = y + rng.range(10.0, 30.0) * u;
        segment(c, x, y, nx, ny, u * 1.6, col);
        if rng.chance(0.15) {
            branches.push((nx, ny));
        }
        x = nx;
        y = ny;
    }
    for (mut bx, mut by) in branches {
        for _ in 0..6 {
            let nx = bx + rng.range(-1.0, 1.0) * u * 20.0;
            let ny = by + rng.range(8.0, 22.0) * u;
            segment(c, bx, by, nx, ny, u * 0.8, col);
            bx = nx;
            by = ny;
        }
    }
    shapes::glow(c, x, end * 0.5, end * 0.4, rgb(180, 180, 255), 0.12);
}

fn segment(c: &mut Canvas, x0: f32, y0: f32, x1: f32, y1: f32, width: f32, col: Rgb) {
    let steps = ((x1 - x0).abs().max((y1 - y0).abs()) * 1.5).ceil() as usize + 1;
    for s in 0..=steps {
        let t = s as f32 / steps as f32;
        let x = x0 + (x1 - x0) * t;
        let y = y0 + (y1 - y0) * t;
        c.disc(x, y, width, col, 1.0);
        c.light(x as i64, y as i64, col, 0.3);
    }
}

/// Glowing specks over the land (magical dusk and night).
pub fn fireflies(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    let (w, h) = (c.w as f32, c.h as f32);
    let n = (120.0 * plan.detail.object_factor) as usize;
    for _ in 0..n {
        let x = rng.unit() * w;
        let y = plan.horizon.min(h) * 0.6 + rng.unit() * (h - plan.horizon.min(h) * 0.6);
        let r = plan.unit * rng.range(1.0, 3.0);
        shapes::glow(c, x, y, r * 2.0, rgb(255, 230, 120), 0.5);
        c.disc(x, y, r * 0.6, rgb(255, 250, 200), 0.9);
    }
}

/// Synthwave: horizontal gaps through the lower half of the sun.
pub fn sun_stripes(c: &mut Canvas, plan: &Plan) {
    let Some(s) = plan.sun else { return };
    let sky = plan.pal.sky_low;
    let y0 = (s.y.max(0.0)) as usize;
    let y1 = ((s.y + s.r + 1.0) as usize).min(c.h);
    for y in y0..y1 {
        let t = (y as f32 - s.y) / s.r;
        let gap = 0.05 + 0.12 * t;
        let phase = (t * 7.0).fract();
        if phase > gap {
            continue;
        }
        let x0 = ((s.x - s.r - 1.0).max(0.0)) as usize;
        let x1 = ((s.x + s.r + 1.0) as usize).min(c.w);
        let row = c.row_mut(y);
        for px in row.iter_mut().take(x1).skip(x0) {
            *px = sky;
        }
    }
}

/// Synthwave floor: a dark plane with a glowing perspective grid.
pub fn grid_floor(c: &mut Canvas, plan: &Plan) {
    let (w, h) = (c.w as f32, c.h as f32);
    let hz = plan.horizon.min(h * 0.95);
    let vx = w / 2.0;
    let magenta = rgb(255, 60, 200);
    let cyan = rgb(60, 230, 255);
    let u = plan.unit;
    for y in (hz.ceil() as usize)..c.h {
        let t = (y as f32 - hz) / (h - hz);
        let depth = 1.0 / (t + 0.03);
        let next = 1.0 / ((y as f32 + 1.0 - hz) / (h - hz) + 0.03);
        let row = c.row_mut(y);
        // Horizontal lines: where the depth crosses a whole number.
        let hline = (depth * 0.9).floor() != (next * 0.9).floor();
        let base = mix(rgb(30, 6, 50), rgb(10, 2, 20), t);
        for (x, px) in row.iter_mut().enumerate() {
            let xf = x as f32 + 0.5 - vx;
            // Vertical lines converge on the vanishing point.
            let gx = xf / (t + 0.03) / (u * 90.0);
            let dist = (gx - gx.round()).abs() * (u * 90.0) * (t + 0.03);
            let v = 1.0 - smoothstep(0.3, 1.3 + 1.5 * t, dist);
            let mut col = base;
            let glow_col = mix(magenta, cyan, t);
            let k = (v + if hline { 1.0 } else { 0.0 }).min(1.0) * (0.35 + 0.65 * t);
            col = screen(col, glow_col, k);
            col = screen(col, plan.pal.glow, (1.0 - t).powi(6) * 0.6);
            *px = col;
        }
    }
}

/// A still life: a wall lit from a window on the left, a wooden table top.
pub fn interior(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    let (w, h) = (c.w as f32, c.h as f32);
    let wall = match plan.time {
        super::prompt::Time::Night => rgb(70, 56, 52),
        _ => mix(rgb(226, 210, 186), plan.pal.sky_low, 0.15),
    };
    let wood = rgb(130, 84, 52);
    let table_y = h * 0.62;
    let seed = plan.seed ^ 0x7AB;
    let grain = Field::new(c.w, c.h, 4, |x, y| {
        fbm2(x / (w * 0.3), y / (h * 0.012), 4, 0.5, seed)
    });
    let mut scratch = Vec::new();
    let mut row_n = vec![0.0; c.w];
    let light_x = w * rng.range(0.0, 0.25);
    for y in 0..c.h {
        grain.row(y, &mut scratch, &mut row_n);
        let yf = y as f32;
        let row = c.row_mut(y);
        for (x, px) in row.iter_mut().enumerate() {
            let xf = x as f32;
            let lightness = 1.0 - 0.45 * ((xf - light_x) / w).abs().min(1.0);
            *px = if yf < table_y {
                // Soft window light falling on the wall.
                let k = lightness * (0.8 + 0.2 * (yf / table_y));
                scale(wall, 0.55 + 0.5 * k)
            } else {
                let t = (yf - table_y) / (h - table_y);
                let g = row_n[x];
                let streak = ((g * 30.0).sin() * 0.5 + 0.5) * 0.18;
                let c0 = scale(wood, 0.75 + 0.35 * t + streak - 0.09);
                let edge = smoothstep(0.0, 0.015, t);
                scale(mix(rgb(90, 56, 36), c0, edge), 0.7 + 0.4 * lightness)
            };
        }
    }
}

/// Underwater: light falling through blue water, rays, a sandy floor with weed, bubbles.
pub fn underwater(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    let (w, h) = (c.w as f32, c.h as f32);
    let top = mix(rgb(60, 170, 200), plan.pal.sky_low, 0.15);
    let deep = rgb(6, 40, 80);
    let u = plan.unit;
    let seed = plan.seed ^ 0xDEE;
    let rays = |x: f32| -> f32 {
        let a = (x / (u * 60.0)).sin() * 0.5 + 0.5;
        let b = value2(x / (u * 35.0), 0.5, seed);
        (a * b).powi(2)
    };
    let caustic = Field::new(c.w, c.h, 6, |x, y| {
        fbm2(x / (u * 40.0), y / (u * 25.0), 3, 0.5, seed ^ 1)
    });
    let floor_y = h * 0.84;
    let mut scratch = Vec::new();
    let mut row_n = vec![0.0; c.w];
    for y in 0..c.h {
        caustic.row(y, &mut scratch, &mut row_n);
        let yf = y as f32;
        let t = yf / h;
        let base = mix(top, deep, t.powf(0.8));
        let row = c.row_mut(y);
        for (x, px) in row.iter_mut().enumerate() {
            let xf = x as f32;
            let slant = xf + (yf) * 0.35;
            let r = rays(slant) * (1.0 - t).powi(2) * 0.5;
            let mut col = screen(base, rgb(200, 240, 255), r);
            if yf < h * 0.08 {
                let k = (1.0 - yf / (h * 0.08)) * smoothstep(0.5, 0.7, row_n[x]);
                col = screen(col, rgb(220, 250, 255), k * 0.5);
            }
            if yf > floor_y - (row_n[x] - 0.5) * u * 30.0 {
                let sand = mix(
                    rgb(200, 180, 130),
                    deep,
                    0.45 + 0.2 * (1.0 - (yf - floor_y) / (h - floor_y)),
                );
                col = scale(sand, 0.85 + 0.3 * row_n[x]);
            }
            *px = col;
        }
    }
    // Seaweed swaying up from the floor.
    let weed = rgb(30, 110, 70);
    for _ in 0..(18.0 * plan.detail.object_factor) as usize {
        let x0 = rng.unit() * w;
        let height = h * rng.range(0.12, 0.35);
        let phase = rng.range(0.0, 6.0);
        let steps = (height / u) as usize;
        let col = mix(weed, deep, rng.range(0.1, 0.5));
        for s in 0..steps {
            let t = s as f32 / steps as f32;
            let x = x0 + (t * 5.0 + phase).sin() * u * 14.0 * t;
            let y = h * 0.95 - height * t;
            c.disc(x, y, u * (5.0 - 3.5 * t), col, 0.95);
        }
    }
    // Bubbles.
    for _ in 0..(60.0 * plan.detail.object_factor) as usize {
        let x = rng.unit() * w;
        let y = rng.unit() * h * 0.8;
        let r = u * rng.range(2.0, 7.0);
        c.disc(x, y, r, rgb(210, 240, 255), 0.25);
        c.disc(x - r * 0.3, y - r * 0.3, r * 0.3, rgb(255, 255, 255), 0.5);
    }
}

/// A room: the back wall (faint wallpaper stripes, a wainscot, the light from the window or the
/// fire), a wooden floor in perspective, and what the plan puts on the wall: a window onto the
/// sky of the time of day, a brick fireplace with a fire, bookshelves, a kitchen's cabinets,
/// tiles and counter; then the low table small things stand on.
pub fn room(c: &mut Canvas, plan: &Plan, room: &super::scene::Room, rng: &mut Rng) {
    use super::prompt::Time;
    let (w, h) = (c.w as f32, c.h as f32);
    let fy = room.floor_y;
    let night = plan.time == Time::Night;
    // Where the light comes from: the window by day, the fire (or a lamp) at night.
    let light_x = match (room.window, room.fireplace, night) {
        (_, Some((fx, _)), true) => fx,
        (Some((x, _, ww, _)), _, _) => x + ww / 2.0,
        (_, Some((fx, _)), _) => fx,
        _ => w * 0.3,
    };
    let seed = plan.seed ^ 0x2004;
    let wood = mix(rgb(150, 100, 62), room.wall, 0.15);
    let vx = w * 0.5;
    for y in 0..c.h {
        let yf = y as f32 + 0.5;
        let row = c.row_mut(y);
        for (x, px) in row.iter_mut().enumerate() {
            let xf = x as f32 + 0.5;
            let near = 1.0 - ((xf - light_x) / w).abs().min(1.0);
            let lit = if night {
                0.45 + 0.55 * near * near
            } else {
                0.72 + 0.35 * near
            };
            *px = if yf < fy {
                let stripe = ((xf / (plan.unit * 26.0)).sin() * 0.5 + 0.5) * 0.05;
                let wainscot = yf > fy - h * 0.16;
                let base = if wainscot {
                    scale(room.wall, 0.86)
                } else {
                    room.wall
                };
                let rail = (yf - (fy - h * 0.16)).abs() < plan.unit * 3.0;
                scale(
                    if rail { scale(base, 0.75) } else { base },
                    lit * (0.95 + stripe),
                )
            } else {
                // Planks converging to the middle of the wall.
                let t = (yf - fy) / (h - fy);
                let u = (xf - vx) / (0.25 + 0.75 * t);
                let plank = (u / (w * 0.09)).floor();
                let shade = 0.85 + 0.15 * value2(plank, 0.5, seed);
                let seam = ((u / (w * 0.09)).fract() < 0.03) as u8 as f32;
                let g = value2(xf / (w * 0.2), yf / (h * 0.01), seed ^ 3) * 0.12;
                scale(wood, (shade - 0.3 * seam + g) * lit * (0.7 + 0.4 * t))
            };
        }
    }
    // Skirting board.
    for y in (fy as usize)..((fy + plan.unit * 8.0) as usize).min(c.h) {
        for p in c.row_mut(y) {
            *p = scale(*p, 0.7);
        }
    }
    if room.shelves {
        bookshelves(c, plan, room, rng);
    }
    if room.kitchen {
        kitchen(c, plan, room);
    }
    if let Some(win) = room.window {
        window(c, plan, win, rng);
    }
    if let Some((fx, fw)) = room.fireplace {
        fireplace(c, plan, fy, fx, fw, rng);
    }
    if !room.kitchen
        && let Some((x0, x1, top)) = room.table
    {
        let wood = rgb(118, 76, 46);
        fill_rect(c, x0, top, x1, top + plan.unit * 14.0, scale(wood, 1.1));
        let leg = plan.unit * 10.0;
        let bottom = (top + (h - top) * 0.6).min(h);
        fill_rect(c, x0 + leg, top, x0 + 2.0 * leg, bottom, scale(wood, 0.8));
        fill_rect(c, x1 - 2.0 * leg, top, x1 - leg, bottom, scale(wood, 0.8));
    }
}

fn fill_rect(c: &mut Canvas, x0: f32, y0: f32, x1: f32, y1: f32, col: Rgb) {
    let clip = |v: f32, max: usize| (v.max(0.0) as usize).min(max);
    let (x0, x1) = (clip(x0, c.w), clip(x1, c.w));
    let (y0, y1) = (clip(y0, c.h), clip(y1, c.h));
    for y in y0..y1 {
        for p in &mut c.row_mut(y)[x0..x1.max(x0)] {
            *p = col;
        }
    }
}

/// A window with a frame and muntins onto the sky: blue with a cloud by day, warm at golden
/// hour, dark with the moon and stars at night; by day a patch of light falls on the floor.
fn window(c: &mut Canvas, plan: &Plan, (x, y, ww, wh): (f32, f32, f32, f32), rng: &mut Rng) {
    use super::prompt::Time;
    let (top, low) = match plan.time {
        Time::Day => (rgb(90, 150, 225), rgb(190, 220, 245)),
        Time::Golden => (rgb(120, 90, 150), rgb(250, 170, 100)),
        Time::Night => (rgb(10, 14, 36), rgb(30, 40, 80)),
    };
    let frame = rgb(236, 232, 222);
    let bar = plan.unit * 7.0;
    for py in (y.max(0.0) as usize)..((y + wh) as usize).min(c.h) {
        let t = (py as f32 - y) / wh;
        fill_rect(c, x, py as f32, x + ww, py as f32 + 1.0, mix(top, low, t));
    }
    match plan.time {
        Time::Night => {
            for _ in 0..((ww * wh) / 600.0) as usize {
                let sx = x + rng.range(0.05, 0.95) * ww;
                let sy = y + rng.range(0.05, 0.7) * wh;
                c.disc(
                    sx,
                    sy,
                    plan.unit * 1.2,
                    rgb(250, 248, 230),
                    rng.range(0.5, 1.0),
                );
            }
            let (mx, my) = (x + ww * 0.68, y + wh * 0.28);
            shapes::glow(c, mx, my, ww * 0.12, rgb(200, 210, 255), 0.3);
            c.disc(mx, my, ww * 0.09, rgb(240, 236, 214), 1.0);
        }
        _ => {
            for k in 0..6 {
                let cx = x + ww * (0.2 + 0.12 * k as f32) + rng.range(-0.03, 0.03) * ww;
                let cy = y + wh * 0.3 + rng.range(-0.04, 0.04) * wh;
                c.disc(cx, cy, ww * rng.range(0.06, 0.1), rgb(250, 250, 252), 0.85);
            }
        }
    }
    // Frame, sill and muntins.
    fill_rect(c, x - bar, y - bar, x + ww + bar, y, frame);
    fill_rect(
        c,
        x - bar * 1.6,
        y + wh,
        x + ww + bar * 1.6,
        y + wh + bar * 1.4,
        frame,
    );
    fill_rect(c, x - bar, y, x, y + wh, frame);
    fill_rect(c, x + ww, y, x + ww + bar, y + wh, frame);
    fill_rect(
        c,
        x + ww / 2.0 - bar / 2.0,
        y,
        x + ww / 2.0 + bar / 2.0,
        y + wh,
        frame,
    );
    fill_rect(
        c,
        x,
        y + wh * 0.45 - bar / 2.0,
        x + ww,
        y + wh * 0.45 + bar / 2.0,
        frame,
    );
    if plan.time != Time::Night {
        // Light through the window onto the floor.
        let h = c.h as f32;
        let floor = plan.room.map_or(h * 0.66, |r| r.floor_y);
        for py in (floor as usize)..c.h {
            let t = (py as f32 - floor) / (h - floor);
            let x0 = x + ww * 0.2 * t + ww * 0.3 * t;
            for px in (x0.max(0.0) as usize)..((x0 + ww * (1.0 + 0.4 * t)) as usize).min(c.w) {
                c.light(px as i64, py as i64, rgb(255, 240, 200), 0.16 * (1.0 - t));
            }
        }
    }
}

/// A brick fireplace with a mantel and a fire glowing in its dark opening.
fn fireplace(c: &mut Canvas, plan: &Plan, floor: f32, cx: f32, fw: f32, rng: &mut Rng) {
    let h = c.h as f32;
    let top = floor - h * 0.34;
    let brick = rgb(150, 70, 52);
    let mortar = rgb(190, 170, 150);
    let (x0, x1) = (cx - fw / 2.0, cx + fw / 2.0);
    let bh = plan.unit * 16.0;
    for py in (top.max(0.0) as usize)..(floor as usize).min(c.h) {
        let row = ((py as f32 - top) / bh).floor();
        let offset = if row as i32 % 2 == 0 { 0.0 } else { bh * 1.2 };
        for px in (x0.max(0.0) as usize)..(x1 as usize).min(c.w) {
            let u = (px as f32 - x0 + offset) % (bh * 2.4);
            let v = (py as f32 - top) % bh;
            let joint = u < plan.unit * 2.0 || v < plan.unit * 2.0;
            let tone = 0.85 + 0.2 * value2(px as f32 / bh, row, plan.seed ^ 0xB1C);
            c.px[py * c.w + px] = if joint { mortar } else { scale(brick, tone) };
        }
    }
    // Mantel.
    fill_rect(
        c,
        x0 - fw * 0.06,
        top - plan.unit * 14.0,
        x1 + fw * 0.06,
        top,
        rgb(120, 80, 50),
    );
    // The opening and the fire.
    let (ox0, ox1) = (cx - fw * 0.3, cx + fw * 0.3);
    let oy = floor - h * 0.2;
    fill_rect(c, ox0, oy, ox1, floor, rgb(24, 16, 14));
    shapes::glow(c, cx, floor - h * 0.05, fw * 0.35, rgb(255, 150, 60), 0.9);
    for k in 0..9 {
        let fx = cx + (k as f32 - 4.0) * fw * 0.05 + rng.range(-0.02, 0.02) * fw;
        let size = fw * rng.range(0.05, 0.09) * (1.0 - (k as f32 - 4.0).abs() * 0.12);
        for s in 0..5 {
            let t = s as f32 / 4.0;
            let col = mix(rgb(255, 220, 90), rgb(230, 80, 30), t);
            c.disc(
                fx,
                floor - h * 0.03 - t * size * 2.2,
                size * (1.0 - 0.6 * t),
                col,
                0.9,
            );
        }
    }
    // Logs.
    fill_rect(
        c,
        ox0 + fw * 0.05,
        floor - h * 0.025,
        ox1 - fw * 0.05,
        floor - h * 0.005,
        rgb(70, 44, 28),
    );
    // The fire lights the room around it.
    shapes::glow(c, cx, floor - h * 0.1, fw * 0.9, rgb(255, 160, 80), 0.35);
}

/// Shelves of books along the back wall (a library), leaving room for a window or fireplace.
fn bookshelves(c: &mut Canvas, plan: &Plan, room: &super::scene::Room, rng: &mut Rng) {
    let h = c.h as f32;
    let w = c.w as f32;
    let shelf_wood = rgb(96, 62, 40);
    let top = h * 0.06;
    let rows = 5;
    let row_h = (room.floor_y - top) / rows as f32;
    let spines = [
        rgb(150, 40, 40),
        rgb(40, 70, 130),
        rgb(40, 110, 70),
        rgb(190, 150, 60),
        rgb(110, 60, 120),
        rgb(200, 190, 170),
        rgb(70, 50, 40),
    ];
    let gaps: Vec<(f32, f32)> = room
        .window
        .map(|(x, _, ww, _)| (x - plan.unit * 20.0, x + ww + plan.unit * 20.0))
        .into_iter()
        .chain(
            room.fireplace
                .map(|(fx, fw)| (fx - fw * 0.6, fx + fw * 0.6)),
        )
        .collect();
    fill_rect(
        c,
        0.0,
        top - plan.unit * 10.0,
        w,
        room.floor_y,
        scale(shelf_wood, 0.6),
    );
    for r in 0..rows {
        let y0 = top + r as f32 * row_h;
        let board = y0 + row_h - plan.unit * 8.0;
        let mut x = plan.unit * 10.0;
        while x < w {
            let bw = plan.unit * rng.range(10.0, 22.0);
            let bh = row_h * rng.range(0.62, 0.88);
            if !gaps.iter().any(|&(a, b)| x + bw > a && x < b) {
                let col = spines[rng.below(spines.len())];
                fill_rect(
                    c,
                    x,
                    board - bh,
                    x + bw - plan.unit * 1.5,
                    board,
                    scale(col, rng.range(0.8, 1.1)),
                );
                // A band on some spines.
                if rng.chance(0.4) {
                    let band = board - bh * 0.75;
                    fill_rect(
                        c,
                        x,
                        band,
                        x + bw - plan.unit * 1.5,
                        band + plan.unit * 3.0,
                        rgb(220, 190, 110),
                    );
                }
            }
            x += bw;
        }
        fill_rect(c, 0.0, board, w, board + plan.unit * 8.0, shelf_wood);
    }
}

/// A kitchen wall: upper cabinets, a tiled splashback and the counter over lower cabinets.
fn kitchen(c: &mut Canvas, plan: &Plan, room: &super::scene::Room) {
    let (w, h) = (c.w as f32, c.h as f32);
    let counter = room.table.map_or(h * 0.6, |t| t.2);
    let cab = mix(rgb(210, 220, 214), room.wall, 0.3);
    let u = plan.unit;
    // Tiles.
    let tile = u * 40.0;
    for py in ((h * 0.38) as usize)..(counter as usize).min(c.h) {
        for px in 0..c.w {
            let (a, b) = ((px as f32 % tile) < u * 2.0, ((py as f32) % tile) < u * 2.0);
            if a || b {
                c.px[py * c.w + px] = rgb(190, 190, 186);
            } else {
                c.px[py * c.w + px] = mix(rgb(236, 238, 240), room.wall, 0.2);
            }
        }
    }
    // Upper cabinets, leaving the window free.
    let free = |x0: f32, x1: f32| {
        room.window
            .is_none_or(|(x, _, ww, _)| x1 < x - u * 20.0 || x0 > x + ww + u * 20.0)
    };
    let door = w * 0.14;
    let mut x = u * 20.0;
    while x + door < w {
        if free(x, x + door) {
            fill_rect(c, x, h * 0.08, x + door - u * 6.0, h * 0.32, cab);
            fill_rect(
                c,
                x + door * 0.45,
                h * 0.26,
                x + door * 0.55,
                h * 0.28,
                rgb(120, 120, 120),
            );
        }
        x += door;
    }
    // Counter top and the cabinets under it, down to the floor.
    fill_rect(c, 0.0, counter, w, counter + u * 16.0, rgb(200, 196, 188));
    let mut x = 0.0;
    while x < w {
        fill_rect(
            c,
            x + u * 4.0,
            counter + u * 20.0,
            x + door - u * 4.0,
            h * 0.97,
            scale(cab, 0.92),
        );
        fill_rect(
            c,
            x + door * 0.45,
            counter + u * 40.0,
            x + door * 0.55,
            counter + u * 46.0,
            rgb(120, 120, 120),
        );
        x += door;
    }
}
