//! Terrain layers: a noise ridge line per layer, trees and buildings added to its silhouette,
//! filled down to the bottom with depth shading, slope light, snow, texture and a lit rim.
//!
//! Silhouettes are anti-aliased analytically (coverage from the fractional ridge height); with
//! `supersample = 2` each pixel column takes two ridge samples, which smooths steep edges.

use super::canvas::{Canvas, Rgb, mix, scale, smoothstep};
use super::noise::{Field, Rng, fbm1, ridged1, value1};
use super::scene::{Layer, Objects, Plan};

struct Building {
    x0: f32,
    x1: f32,
    top: f32,
    ground: f32,
}

/// Paints one layer. `texture` is a shared surface-noise field (None for the fast model).
pub fn paint(c: &mut Canvas, plan: &Plan, layer: &Layer, texture: Option<&Field>, rng: &mut Rng) {
    let (w, h) = (c.w, c.h);
    let ss = plan.detail.supersample.max(1);
    let n = w * ss;
    let oct = plan.detail.ridge_octaves.min(layer.max_octaves);

    // Ground line per sample.
    let ground: Vec<f32> = (0..n)
        .map(|i| ground_at(layer, (i as f32 + 0.5) / ss as f32, w, oct))
        .collect();

    // Silhouette: the ground plus objects standing on it.
    let mut top = ground.clone();
    let mut buildings = Vec::new();
    match &layer.objects {
        Objects::None => {}
        Objects::Trees {
            count,
            height,
            conifers,
            ..
        } => plant_trees(&mut top, &ground, ss, *count, *height, *conifers, rng),
        Objects::City {
            min_height,
            max_height,
            ..
        } => {
            buildings = raise_city(
                &mut top,
                &ground,
                ss,
                *min_height,
                *max_height,
                plan.unit,
                rng,
            );
        }
    }

    // Per-column values (averaged over samples).
    let col_ground: Vec<f32> = ground
        .chunks_exact(ss)
        .map(|s| s.iter().sum::<f32>() / ss as f32)
        .collect();
    // The snow line wanders along the range: lower in gullies, higher on spurs.
    let snow_jitter: Vec<f32> = (0..w)
        .map(|x| {
            let f = x as f32 / (plan.unit * 45.0);
            let n = fbm1(f, 3, 0.5, layer.seed ^ 0x5A0) - 0.5;
            let fine = value1(f * 6.0, layer.seed ^ 0x5A1) - 0.5;
            (n * 0.35 + fine * 0.06) * layer.amp
        })
        .collect();
    let object_color = match &layer.objects {
        Objects::Trees { color, .. } | Objects::City { color, .. } => *color,
        Objects::None => layer.top,
    };

    let top_min = top.iter().copied().fold(f32::INFINITY, f32::min);
    let y_start = (top_min.floor().max(0.0) as usize).min(h);
    let depth_scale = 1.0 / (layer.amp * 1.2 + h as f32 * 0.06);
    let shade_reach = 1.0 / (plan.unit * 60.0);
    // Slope light: the slope of the ridge measured over a window that widens with depth below
    // it, so fine crests shade only near the top and broad faces run down the whole flank.
    let relief = |x: usize, below: f32| -> f32 {
        if layer.relief <= 0.0 {
            return 0.0;
        }
        let r = plan.unit * 14.0 + below * 0.9;
        let ri = r as usize + 1;
        let a = col_ground[x.saturating_sub(ri)];
        let b = col_ground[(x + ri).min(w - 1)];
        let slope = (b - a) / (2.0 * ri as f32);
        (-slope * layer.light_side * 2.5).clamp(-1.0, 1.0) * layer.relief
    };
    let mut scratch = Vec::new();
    let mut tex = vec![0.5; w];
    for y in y_start..h {
        if let Some(field) = texture {
            field.row(y, &mut scratch, &mut tex);
        }
        let yf = y as f32;
        let row = c.row_mut(y);
        for x in 0..w {
            let samples = &top[x * ss..x * ss + ss];
            let mut cov = 0.0;
            for &t in samples {
                cov += (yf + 1.0 - t).clamp(0.0, 1.0);
            }
            if cov <= 0.0 {
                continue;
            }
            let cov = cov / ss as f32;
            let g = col_ground[x];
            let tx = tex[x];
            let color = if yf + 0.5 < g - 0.5 {
                // Trees or buildings.
                scale(object_color, 0.9 + 0.2 * tx)
            } else {
                let below = (yf - g).max(0.0);
                let mut col = mix(layer.top, layer.bottom, (below * depth_scale).min(1.0));
                let near_ridge = (1.0 - below * shade_reach).max(0.0);
                let light = relief(x, below);
                // Shadows darken fully; lit faces brighten less, so crests never blow out.
                let k = light * (0.75 + 0.25 * near_ridge);
                col = scale(col, if k > 0.0 { 1.0 + 0.55 * k } else { 1.0 + k });
                if let Some(line) = layer.snowline {
                    let sl = line + snow_jitter[x];
                    let k = ((sl - yf) / (plan.unit * 3.0)).clamp(0.0, 1.0);
                    if k > 0.0 {
                        let lit_snow = scale(layer.snow, 0.9 + 0.25 * light);
                        col = mix(col, lit_snow, k * 0.95);
                    }
                }
                if let Some((rim, width)) = layer.rim {
                    let k = 1.0 - smoothstep(0.0, width, below);
                    col = mix(col, rim, k * 0.8);
                }
                if texture.is_some() {
                    col = scale(col, 1.0 + layer.texture * (tx - 0.5));
                }
                col
            };
            row[x] = mix(row[x], color, cov);
        }
    }

    if let Objects::City {
        window,
        lit,
        window_step,
        ..
    } = &layer.objects
    {
        windows(c, &buildings, *window, *lit, *window_step, rng);
    }
}

/// The ground line of `layer` at pixel column `x` (before trees and buildings).
pub fn ground_at(layer: &Layer, x: f32, w: usize, oct: u32) -> f32 {
    let f = x * layer.freq;
    let smooth = fbm1(f, oct, 0.5, layer.seed);
    let shape = if layer.sharp > 0.0 {
        let peaks = ridged1(f * 0.8, oct, 0.42, layer.seed ^ 0xA5);
        smooth + (peaks - smooth) * layer.sharp
    } else {
        smooth
    };
    let shape = ((shape - 0.18) / 0.64).clamp(0.0, 1.15);
    layer.base + layer.tilt * (x / w as f32 - 0.5) - layer.amp * shape
}

/// Conifers (three stacked triangles) and round trees, merged into the silhouette.
fn plant_trees(
    top: &mut [f32],
    ground: &[f32],
    ss: usize,
    count: usize,
    height: f32,
    conifers: f32,
    rng: &mut Rng,
) {
    let n = top.len();
    let w = (n / ss) as f32;
    for _ in 0..count {
        let x0 = rng.unit() * w;
        let th = height * rng.range(0.55, 1.35);
        let conifer = rng.chance(conifers);
        let half = th
            * if conifer {
                rng.range(0.2, 0.28)
            } else {
                rng.range(0.3, 0.42)
            };
        let gi = ((x0 * ss as f32) as usize).min(n - 1);
        let base = ground[gi] + th * 0.06;
        let crown = Crown::new(rng);
        let i0 = (((x0 - half) * ss as f32).floor().max(0.0)) as usize;
        let i1 = ((((x0 + half) * ss as f32).ceil()) as usize).min(n);
        for (i, t) in top.iter_mut().enumerate().take(i1).skip(i0) {
            let x = (i as f32 + 0.5) / ss as f32;
            let u = (x - x0) / half;
            let e = if conifer {
                conifer_profile(u.abs()) * th
            } else {
                crown.profile(u) * th
            };
            if e > 0.0 {
                *t = t.min(base - e);
            }
        }
    }
}

/// Height (0..1) of a four-tier conifer at normalised distance `u` from its axis: each tier's
/// lower edge sticks out from the one below, which reads as drooping branches.
fn conifer_profile(u: f32) -> f32 {
    let mut e: f32 = if u < 0.07 { 0.14 } else { 0.0 };
    for tier in 0..4 {
        let t = tier as f32;
        let bottom = 0.1 + 0.22 * t;
        let apex = if tier == 3 { 1.0 } else { bottom + 0.36 };
        let half = 1.0 - 0.22 * t;
        if u < half {
            e = e.max(apex - (apex - bottom) * (u / half));
        }
    }
    e
}

/// A deciduous crown: a trunk under a few overlapping round lumps placed per tree.
struct Crown {
    lumps: [(f32, f32, f32); 4],
}

impl Crown {
    fn new(rng: &mut Rng) -> Crown {
        let mut j = || rng.range(-0.08, 0.08);
        Crown {
            lumps: [
                (j(), 0.6 + j(), 0.36),
                (-0.42 + j(), 0.46 + j(), 0.27 + j() * 0.5),
                (0.42 + j(), 0.5 + j(), 0.27 + j() * 0.5),
                (j() * 2.0, 0.78 + j(), 0.2),
            ],
        }
    }

    /// Height (0..1) at signed normalised offset `u` from the trunk.
    fn profile(&self, u: f32) -> f32 {
        let mut e: f32 = if u.abs() < 0.07 { 0.4 } else { 0.0 };
        for &(cx, cy, r) in &self.lumps {
            let dx = u - cx;
            if dx.abs() < r {
                e = e.max(cy + (r * r - dx * dx).sqrt() * 0.9);
            }
        }
        e.min(1.0)
    }
}

/// Rectangular towers along the ground, some with setbacks or spires.
fn raise_city(
    top: &mut [f32],
    ground: &[f32],
    ss: usize,
    min_h: f32,
    max_h: f32,
    unit: f32,
    rng: &mut Rng,
) -> Vec<Building> {
    let n = top.len();
    let w = (n / ss) as f32;
    let mut out = Vec::new();
    let mut x = -rng.unit() * unit * 40.0;
    while x < w {
        let bw = unit * rng.range(28.0, 80.0);
        let tall = rng.chance(0.18);
        let bh = if tall {
            rng.range(0.7, 1.0) * max_h
        } else {
            min_h + (max_h - min_h) * rng.unit().powi(2) * 0.7
        };
        let gi = (((x + bw / 2.0).max(0.0) * ss as f32) as usize).min(n - 1);
        let g = ground[gi] + unit * 2.0;
        let roof = g - bh;
        let style = rng.below(4);
        let set = bw * rng.range(0.15, 0.3);
        let spire = unit * rng.range(15.0, 45.0);
        let i0 = ((x.max(0.0)) * ss as f32) as usize;
        let i1 = (((x + bw) * ss as f32) as usize).min(n);
        for (i, t) in top.iter_mut().enumerate().take(i1).skip(i0) {
            let px = (i as f32 + 0.5) / ss as f32 - x;
            let mut e = roof;
            if style == 1 && (px < set || px > bw - set) {
                e = roof + bh * 0.12; // stepped top
            }
            if style == 2 && (px - bw / 2.0).abs() < unit * 1.2 {
                e = roof - spire; // antenna
            }
            *t = t.min(e);
        }
        out.push(Building {
            x0: x,
            x1: x + bw,
            top: roof,
            ground: g,
        });
        x += bw + unit * rng.range(0.0, 10.0);
    }
    out
}

/// Window grids; lit windows glow at night, dark ones reflect the sky by day.
fn windows(c: &mut Canvas, buildings: &[Building], color: Rgb, lit: f32, step: f32, rng: &mut Rng) {
    let step = step.max(3.0);
    let ww = (step * 0.45).max(1.0);
    let wh = (step * 0.6).max(1.0);
    for b in buildings {
        let cols = ((b.x1 - b.x0 - step * 0.5) / step).floor() as i32;
        let rows = ((b.ground - b.top - step) / (step * 1.3)).floor() as i32;
        if cols < 1 || rows < 1 {
            continue;
        }
        let pad = (b.x1 - b.x0 - cols as f32 * step) / 2.0;
        // Whole floors or columns are sometimes dark, which looks more real than pure noise.
        let floor_bias = rng.range(-0.2, 0.2);
        for j in 0..rows {
            let row_on = rng.range(-0.25, 0.25) + floor_bias;
            for i in 0..cols {
                let on = lit > 0.0 && rng.unit() < lit + row_on;
                let (col, a) = if on {
                    (scale(color, rng.range(0.7, 1.1)), 0.95)
                } else if lit > 0.0 {
                    continue;
                } else {
                    (color, 0.35)
                };
                let x0 = b.x0 + pad + i as f32 * step + (step - ww) / 2.0;
                let y0 = b.top + step * 0.8 + j as f32 * step * 1.3;
                fill_rect(c, x0, y0, ww, wh, col, a);
            }
        }
    }
}

/// An axis-aligned rectangle with anti-aliased edges.
fn fill_rect(c: &mut Canvas, x: f32, y: f32, w: f32, h: f32, col: Rgb, a: f32) {
    let (x0, x1) = (x.floor() as i64, (x + w).ceil() as i64);
    let (y0, y1) = (y.floor() as i64, (y + h).ceil() as i64);
    for py in y0..y1 {
        let cy = ((py as f32 + 1.0).min(y + h) - (py as f32).max(y)).clamp(0.0, 1.0);
        for px in x0..x1 {
            let cx = ((px as f32 + 1.0).min(x + w) - (px as f32).max(x)).clamp(0.0, 1.0);
            c.blend(px, py, col, a * cx * cy);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_profiles_peak_on_the_axis() {
        assert!((conifer_profile(0.0) - 1.0).abs() < 1e-6);
        assert_eq!(conifer_profile(1.01), 0.0);
        let crown = Crown::new(&mut Rng::new(1));
        assert!(crown.profile(0.0) > 0.8);
        assert_eq!(crown.profile(1.5), 0.0);
    }
}
