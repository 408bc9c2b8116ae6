//! Water: everything already painted above the water line is mirrored, broken up by ripples,
//! mixed with the water colour by depth, with glittering light under the sun or moon.

use super::canvas::{Canvas, mix, scale, smoothstep};
use super::noise::{Field, fbm2};
use super::scene::{Plan, Water};

pub fn paint(c: &mut Canvas, plan: &Plan, water: Water) {
    let (w, h) = (c.w, c.h);
    let line = water.y.max(1.0);
    let first = (line.ceil() as usize).min(h);
    if first >= h {
        return;
    }
    let u = plan.unit;
    let span = (h as f32 - line).max(1.0);
    let oct = plan.detail.field_octaves;
    let seed = water.seed;
    // Ripples: long horizontal streaks that grow towards the viewer (cheap perspective).
    let ripples = Field::new(w, h - first, plan.detail.cell.min(4), |x, y| {
        let d = (y + 1.0) / span;
        fbm2(
            x / (u * (18.0 + 170.0 * d)),
            (y + first as f32) / (u * (1.2 + 14.0 * d)),
            oct,
            0.5,
            seed,
        )
    });
    let sparkle = Field::new(w, h - first, 2, |x, y| {
        let d = (y + 1.0) / span;
        fbm2(x / (u * (4.0 + 30.0 * d)), y / (u * (0.8 + 6.0 * d)), 2, 0.5, seed ^ 0x5)
    });
    let light = plan.sun.map(|s| (s, plan.pal.glow, 1.0)).or_else(|| {
        plan.moon
            .map(|m| (m.body, plan.pal.sun, if m.shadow.is_some() { 0.45 } else { 0.7 }))
    });

    let p = &plan.pal;
    let (above, below) = c.px.split_at_mut(first * w);
    let mut scratch = Vec::new();
    let mut rip = vec![0.0; w];
    let mut spk = vec![0.0; w];
    for (j, row) in below.chunks_exact_mut(w).enumerate() {
        let y = (first + j) as f32 + 0.5;
        let dist = y - line;
        let depth = (dist / span).clamp(0.0, 1.0);
        ripples.row(j, &mut scratch, &mut rip);
        sparkle.row(j, &mut scratch, &mut spk);
        let reflect = 0.82 - 0.42 * depth;
        let body = mix(p.water, scale(p.water, 0.55), depth);
        let src_base = line - dist * 1.02 - 1.0;
        let amp = u * (3.0 + 26.0 * depth);
        for (x, px) in row.iter_mut().enumerate() {
            let r = rip[x];
            let sx = (x as f32 + (r - 0.5) * amp).clamp(0.0, (w - 1) as f32) as usize;
            let sy = (src_base + (r - 0.5) * amp * 0.25).clamp(0.0, (first - 1) as f32) as usize;
            let mirrored = above[sy * w + sx];
            let mut col = mix(body, mirrored, reflect);
            // Crests catch the sky light.
            let crest = smoothstep(0.6, 0.78, r) * (0.2 - 0.1 * depth);
            col = mix(col, p.sky_low, crest);
            if let Some((b, tint, strength)) = light {
                if b.y < line {
                    let dx = x as f32 - b.x;
                    let width = b.r * (1.2 + 5.0 * depth);
                    let path = width * width / (width * width + dx * dx);
                    let g = path * smoothstep(0.52, 0.72, spk[x]) * strength;
                    for i in 0..3 {
                        col[i] += (1.0 - col[i]) * tint[i] * g;
                    }
                }
            }
            *px = col;
        }
    }
}
