//! Water: everything already painted above the water line is mirrored, broken up by waves,
//! mixed with the water colour by depth, with glittering light under the sun or moon.
//!
//! Waves are horizontal bands in a perspective depth coordinate (a sine of 1/distance, bent by
//! low-frequency noise), faded out where they would be finer than a pixel: distant water is a
//! calm mirror, near water is choppy. Anisotropic value noise would give diagonal lattice
//! artefacts here; the sine does not.

use std::f32::consts::TAU;

use super::canvas::{Canvas, mix, scale, screen, smoothstep};
use super::noise::{Field, fbm2, hash1, unit};
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
    // Low-frequency wobble that bends the wave bands, and finer noise that breaks up crests.
    let bend = Field::new(w, h - first, plan.detail.cell, |x, y| {
        fbm2(x / (u * 160.0), y / (u * 40.0), oct, 0.5, seed)
    });
    let breakup = Field::new(w, h - first, plan.detail.cell.min(4), |x, y| {
        fbm2(x / (u * 26.0), y / (u * 9.0), oct.min(3), 0.5, seed ^ 0x5)
    });
    let light = plan.sun.map(|s| (s, plan.pal.glow, 1.0)).or_else(|| {
        plan.moon.map(|m| {
            let strength = if m.shadow.is_some() { 0.45 } else { 0.7 };
            (m.body, plan.pal.sun, strength)
        })
    });

    // Waves: about one band per 35 units near the viewer.
    let cycles = span / (u * 35.0);
    let phase_at = |dist: f32| cycles / (dist / span + 0.02);

    let p = &plan.pal;
    let (above, below) = c.px.split_at_mut(first * w);
    let mut scratch = Vec::new();
    let mut bend_row = vec![0.0; w];
    let mut break_row = vec![0.0; w];
    for (j, row) in below.chunks_exact_mut(w).enumerate() {
        let y = (first + j) as f32 + 0.5;
        let dist = y - line;
        let depth = (dist / span).clamp(0.0, 1.0);
        bend.row(j, &mut scratch, &mut bend_row);
        breakup.row(j, &mut scratch, &mut break_row);
        let phase = phase_at(dist);
        // Fade waves out where a band would be thinner than about three pixels.
        let step = (phase_at(dist - 1.0) - phase).abs();
        let visible = 1.0 - smoothstep(0.08, 0.5, step);
        // Far glitter is thin horizontal dashes: only some rows catch the light.
        let row_glints = unit(hash1((first + j) as i32, seed ^ 0x6));
        let row_glints = smoothstep(0.45, 0.75, row_glints);
        let reflect = 0.84 - 0.4 * depth;
        let body = mix(p.water, scale(p.water, 0.55), depth);
        let src_base = line - dist * 1.02 - 1.0;
        let amp = u * (1.5 + 16.0 * depth);
        for (x, px) in row.iter_mut().enumerate() {
            let b = bend_row[x];
            let wave = (TAU * phase + b * 9.0).sin() * visible;
            let wobble = (b - 0.5) * u * (2.0 + 6.0 * depth);
            let sx = (x as f32 + wave * amp + wobble).clamp(0.0, (w - 1) as f32) as usize;
            let sy = (src_base + wave * amp * 0.3).clamp(0.0, (first - 1) as f32) as usize;
            let mirrored = above[sy * w + sx];
            let mut col = mix(body, mirrored, reflect);
            // Crests catch the sky light.
            let crest = smoothstep(0.55, 0.95, wave) * smoothstep(0.4, 0.65, break_row[x]);
            col = mix(col, p.sky_low, crest * (0.22 - 0.1 * depth));
            if let Some((body_light, tint, strength)) = light
                && body_light.y < line
            {
                let dx = x as f32 - body_light.x;
                let width = body_light.r * (0.7 + 4.5 * depth);
                let path = width * width / (width * width + dx * dx);
                // Near the horizon the path is a solid streak, nearer it breaks into glints.
                let streak = smoothstep(0.4, 0.6, break_row[x]) * row_glints;
                let glints = smoothstep(0.3, 0.9, wave) * smoothstep(0.5, 0.62, break_row[x]);
                let glint = streak + (glints - streak) * visible;
                let g = path * glint * strength * (1.0 - 0.5 * depth);
                col = screen(col, tint, g);
            }
            *px = col;
        }
    }
}
