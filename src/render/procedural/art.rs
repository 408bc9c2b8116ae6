//! Abstract pictures ("abstract", "pattern"): flowing bands of colour from domain-warped noise,
//! with a few soft translucent circles on top.

use super::canvas::{Canvas, mix, smoothstep};
use super::noise::{Field, Rng, fbm2};
use super::scene::Plan;

pub fn paint(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    let ramp = plan.art_ramp;
    let u = plan.unit;
    let seed = plan.seed ^ 0xA47;
    let oct = plan.detail.field_octaves + 1;
    let field = Field::new(c.w, c.h, plan.detail.cell, |x, y| {
        let (x, y) = (x / (u * 380.0), y / (u * 380.0));
        let qx = fbm2(x, y, oct, 0.5, seed);
        let qy = fbm2(x + 5.2, y + 1.3, oct, 0.5, seed ^ 1);
        fbm2(x + 3.0 * qx, y + 3.0 * qy, oct, 0.5, seed ^ 2)
    });
    let mut scratch = Vec::new();
    let mut n = vec![0.0; c.w];
    for y in 0..c.h {
        field.row(y, &mut scratch, &mut n);
        for (px, &v) in c.row_mut(y).iter_mut().zip(&n) {
            // Stretch the noise (it clusters around 0.5) over the whole ramp.
            let t = smoothstep(0.2, 0.8, v) * 3.0;
            let i = (t as usize).min(2);
            *px = mix(ramp[i], ramp[i + 1], t - i as f32);
        }
    }
    let circles = 4 + rng.below(5);
    for _ in 0..circles {
        let r = u * rng.range(40.0, 220.0);
        let x = rng.unit() * c.w as f32;
        let y = rng.unit() * c.h as f32;
        let col = ramp[rng.below(4)];
        c.disc(x, y, r, mix(col, [1.0, 1.0, 1.0], 0.25), rng.range(0.15, 0.4));
    }
}
