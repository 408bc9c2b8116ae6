//! Abstract pictures ("abstract", "pattern"): flowing bands of colour from domain-warped noise,
//! the prompt's colours (or a random hue) mapped over it.

use super::canvas::{Canvas, mix, smoothstep};
use super::noise::{Field, Rng, fbm2};
use super::scene::Plan;

pub fn paint(c: &mut Canvas, plan: &Plan, rng: &mut Rng) {
    let ramp = plan.art_ramp;
    let u = plan.unit;
    let seed = plan.seed ^ 0xA47;
    let oct = plan.detail.field_octaves + 1;
    // The seed also picks how the flow is stretched, so pictures differ in direction too.
    let (sx, sy) = (rng.range(250.0, 600.0), rng.range(250.0, 600.0));
    let warp = rng.range(2.0, 4.0);
    let field = Field::new(c.w, c.h, plan.detail.cell, |x, y| {
        let (x, y) = (x / (u * sx), y / (u * sy));
        let qx = fbm2(x, y, oct, 0.5, seed);
        let qy = fbm2(x + 5.2, y + 1.3, oct, 0.5, seed ^ 1);
        fbm2(x + warp * qx, y + warp * qy, oct, 0.5, seed ^ 2)
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
}
