//! Atmosphere over the whole scene: drifting fog banks and falling snow.

use super::canvas::{Canvas, mix, smoothstep};
use super::noise::{Field, Rng, fbm2};
use super::scene::Plan;

/// Fog banks thickest a little below the horizon, thinning upwards and towards the viewer.
pub fn fog(c: &mut Canvas, plan: &Plan) {
    if plan.fog <= 0.0 {
        return;
    }
    let u = plan.unit;
    let seed = plan.seed ^ 0xF06;
    let oct = plan.detail.field_octaves;
    let field = Field::new(c.w, c.h, plan.detail.cell * 2, |x, y| {
        fbm2(x / (u * 380.0), y / (u * 90.0), oct, 0.5, seed)
    });
    let hz = plan.horizon.min(c.h as f32 * 0.95);
    let col = mix(plan.pal.haze, plan.pal.cloud_light, 0.35);
    let mut scratch = Vec::new();
    let mut n = vec![0.0; c.w];
    for y in 0..c.h {
        let yf = y as f32;
        let band = smoothstep(hz - c.h as f32 * 0.35, hz, yf)
            * (1.0 - 0.6 * smoothstep(hz, c.h as f32, yf));
        if band <= 0.0 {
            continue;
        }
        field.row(y, &mut scratch, &mut n);
        let row = c.row_mut(y);
        for (x, px) in row.iter_mut().enumerate() {
            let k = plan.fog * band * (0.35 + 0.65 * smoothstep(0.35, 0.7, n[x]));
            *px = mix(*px, col, k.min(0.92));
        }
    }
}

/// Snowflakes of varied size; the big ones are near and a little blurred.
pub fn snowfall(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    if plan.snowfall <= 0.0 {
        return;
    }
    let (w, h) = (c.w as f32, c.h as f32);
    let count = (plan.snowfall * 900.0 * w * h / 1.0e6 * plan.detail.object_factor) as usize;
    let col = mix(plan.pal.snow, [1.0, 1.0, 1.0], 0.5);
    for _ in 0..count {
        let x = rng.unit() * w;
        let y = rng.unit() * h;
        let near = rng.unit().powi(3);
        // Soft flakes of many sizes (a halo round each), not the sharp points stars are.
        let r = plan.unit * (1.1 + 4.2 * near);
        let a = 0.55 + 0.35 * rng.unit();
        c.disc(x, y, r * 1.8, col, 0.12 + 0.1 * near);
        c.disc(x, y, r, col, a * (1.0 - 0.4 * near));
    }
}
