//! Text in pictures with the bundled font (DejaVu Sans Bold, `assets/fonts/`, its licence next to
//! it): poster titles, signboards, neon letters and the edit "add text". Latin and Cyrillic.
//!
//! Text is laid out on one or two lines, sized to fit the box it is given, and drawn with a
//! contrasting outline and soft shadow so it stays readable on any background.

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use image::RgbaImage;

static FONT_BYTES: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans-Bold.ttf");

fn font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(FONT_BYTES).ok())
        .as_ref()
}

/// Where a text block goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    Top,
    Center,
    Bottom,
}

/// How the letters look.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Look {
    /// Fill colour with a dark (or light) outline and shadow, picked for contrast.
    Auto,
    /// This fill colour, outline picked for contrast.
    Color([u8; 3]),
    /// Glowing tubes in this colour.
    Neon([u8; 3]),
    /// Dark ink without outline (on a light sign).
    Ink,
}

/// A coverage mask of laid-out text: `w` x `h` alpha values in [0, 1].
struct Mask {
    w: usize,
    h: usize,
    a: Vec<f32>,
}

/// Lays `text` out at pixel size `px` on at most two lines; returns the mask.
fn layout(font: &FontRef<'_>, text: &str, px: f32) -> Mask {
    let scaled = font.as_scaled(PxScale::from(px));
    let lines = split_lines(text);
    let line_h = scaled.height() + scaled.line_gap();
    let widths: Vec<f32> = lines.iter().map(|l| line_width(&scaled, l)).collect();
    let w = widths.iter().copied().fold(1.0f32, f32::max).ceil() as usize + 4;
    let h = (line_h * lines.len() as f32).ceil() as usize + 4;
    let mut a = vec![0.0f32; w * h];
    for (li, line) in lines.iter().enumerate() {
        let mut x = (w as f32 - widths[li]) / 2.0;
        let baseline = 2.0 + scaled.ascent() + li as f32 * line_h;
        let mut prev = None;
        for ch in line.chars() {
            let id = font.glyph_id(ch);
            if let Some(p) = prev {
                x += scaled.kern(p, id);
            }
            let glyph = id.with_scale_and_position(PxScale::from(px), point(x, baseline));
            if let Some(outlined) = font.outline_glyph(glyph) {
                let b = outlined.px_bounds();
                outlined.draw(|gx, gy, cov| {
                    let px_ = b.min.x as i64 + gx as i64;
                    let py_ = b.min.y as i64 + gy as i64;
                    if px_ >= 0 && py_ >= 0 && (px_ as usize) < w && (py_ as usize) < h {
                        let i = py_ as usize * w + px_ as usize;
                        a[i] = (a[i] + cov).min(1.0);
                    }
                });
            }
            x += scaled.h_advance(id);
            prev = Some(id);
        }
    }
    Mask { w, h, a }
}

fn line_width<F: Font>(scaled: &ab_glyph::PxScaleFont<&F>, line: &str) -> f32 {
    let mut width = 0.0;
    let mut prev = None;
    for ch in line.chars() {
        let id = scaled.glyph_id(ch);
        if let Some(p) = prev {
            width += scaled.kern(p, id);
        }
        width += scaled.h_advance(id);
        prev = Some(id);
    }
    width
}

/// One line for short text, two balanced lines for long text.
fn split_lines(text: &str) -> Vec<String> {
    let text = text.trim();
    let n = text.chars().count();
    if n <= 16 || !text.contains(' ') {
        return vec![text.to_owned()];
    }
    let mid = n / 2;
    let spaces: Vec<usize> = text
        .char_indices()
        .filter(|(_, c)| *c == ' ')
        .map(|(i, _)| text[..i].chars().count())
        .collect();
    let best = spaces
        .iter()
        .copied()
        .min_by_key(|&i| i.abs_diff(mid))
        .unwrap_or(mid);
    let chars: Vec<char> = text.chars().collect();
    vec![
        chars[..best].iter().collect::<String>().trim().to_owned(),
        chars[best..].iter().collect::<String>().trim().to_owned(),
    ]
}

/// Draws `text` centred in the box (x, y, w, h) of `img`, as large as fits.
/// Returns the pixel rectangle covered by the letters, or `None` when nothing was drawn.
pub fn draw_in_box(
    img: &mut RgbaImage,
    text: &str,
    bx: (f32, f32, f32, f32),
    look: Look,
) -> Option<(u32, u32, u32, u32)> {
    let font = font()?;
    if text.trim().is_empty() || bx.2 < 4.0 || bx.3 < 4.0 {
        return None;
    }
    // Measure at a reference size, then scale to fit.
    let probe = layout(font, text, 100.0);
    let k = (bx.2 / probe.w as f32).min(bx.3 / probe.h as f32);
    let px = (100.0 * k).clamp(6.0, 2000.0);
    let mask = layout(font, text, px);
    let ox = (bx.0 + (bx.2 - mask.w as f32) / 2.0).round() as i64;
    let oy = (bx.1 + (bx.3 - mask.h as f32) / 2.0).round() as i64;
    // Contrast: average brightness under the text box.
    let bg = mean_luma(img, ox, oy, mask.w, mask.h);
    let (fill, edge) = match look {
        Look::Auto => {
            if bg > 0.55 {
                ([24u8, 22, 28], [250u8, 248, 240])
            } else {
                ([252, 250, 244], [18, 16, 22])
            }
        }
        Look::Color(c) => {
            let l = (0.299 * f32::from(c[0]) + 0.587 * f32::from(c[1]) + 0.114 * f32::from(c[2]))
                / 255.0;
            (
                c,
                if l > 0.5 {
                    [18, 16, 22]
                } else {
                    [250, 248, 240]
                },
            )
        }
        Look::Neon(c) => (c, c),
        Look::Ink => ([30, 24, 20], [0, 0, 0]),
    };
    let outline = (px * 0.06).max(1.0);
    match look {
        Look::Neon(c) => {
            let (glow, p) = dilate(&mask, (px * 0.12).max(2.0));
            composite(img, &glow, ox - p, oy - p, c, 0.55);
            let (inner, p) = dilate(&mask, (px * 0.03).max(1.0));
            composite(img, &inner, ox - p, oy - p, c, 0.8);
            composite(img, &mask, ox, oy, mix_u8(c, [255, 255, 255], 0.6), 0.9);
        }
        Look::Ink => composite(img, &mask, ox, oy, fill, 1.0),
        _ => {
            let (shadow, p) = dilate(&mask, outline * 2.5);
            let (sx, sy) = ((outline * 0.8) as i64, (outline * 1.2) as i64);
            composite(img, &shadow, ox - p + sx, oy - p + sy, edge, 0.35);
            let (ring, p) = dilate(&mask, outline);
            composite(img, &ring, ox - p, oy - p, edge, 0.9);
            composite(img, &mask, ox, oy, fill, 1.0);
        }
    }
    let x0 = ox.max(0) as u32;
    let y0 = oy.max(0) as u32;
    Some((x0, y0, mask.w as u32, mask.h as u32))
}

/// Draws `text` across the picture at a position: a title band of the picture's width.
pub fn draw_at(
    img: &mut RgbaImage,
    text: &str,
    pos: Position,
    look: Look,
) -> Option<(u32, u32, u32, u32)> {
    let (w, h) = (img.width() as f32, img.height() as f32);
    let bw = w * 0.84;
    let bh = h * if split_lines(text).len() > 1 {
        0.26
    } else {
        0.16
    };
    let y = match pos {
        Position::Top => h * 0.06,
        Position::Center => (h - bh) / 2.0,
        Position::Bottom => h * 0.94 - bh,
    };
    draw_in_box(img, text, ((w - bw) / 2.0, y, bw, bh), look)
}

fn mix_u8(a: [u8; 3], b: [u8; 3], t: f32) -> [u8; 3] {
    [0, 1, 2].map(|i| (f32::from(a[i]) + (f32::from(b[i]) - f32::from(a[i])) * t).round() as u8)
}

fn mean_luma(img: &RgbaImage, x: i64, y: i64, w: usize, h: usize) -> f32 {
    let (iw, ih) = (i64::from(img.width()), i64::from(img.height()));
    let mut sum = 0.0;
    let mut n = 0.0;
    let step = (w.max(h) / 40).max(1);
    for yy in (0..h).step_by(step) {
        for xx in (0..w).step_by(step) {
            let (px, py) = (x + xx as i64, y + yy as i64);
            if px >= 0 && py >= 0 && px < iw && py < ih {
                let p = img.get_pixel(px as u32, py as u32);
                sum +=
                    (0.299 * f32::from(p[0]) + 0.587 * f32::from(p[1]) + 0.114 * f32::from(p[2]))
                        / 255.0;
                n += 1.0;
            }
        }
    }
    if n > 0.0 { sum / n } else { 0.5 }
}

/// Grows a mask by `r` pixels with soft edges (max filter over a disc, separable approximation).
fn dilate(m: &Mask, r: f32) -> (Mask, i64) {
    let ri = r.ceil() as i64;
    let pad = ri as usize;
    let (w, h) = (m.w + 2 * pad, m.h + 2 * pad);
    let mut src = vec![0.0f32; w * h];
    for y in 0..m.h {
        for x in 0..m.w {
            src[(y + pad) * w + x + pad] = m.a[y * m.w + x];
        }
    }
    // Horizontal then vertical max: a square; soften the corners by weighting with distance.
    let mut tmp = vec![0.0f32; w * h];
    for y in 0..h {
        for x in 0..w {
            let mut v: f32 = 0.0;
            for d in -ri..=ri {
                let xx = x as i64 + d;
                if xx >= 0 && (xx as usize) < w {
                    let fall = (1.0 - (d.abs() as f32 - r + 1.0).max(0.0)).clamp(0.0, 1.0);
                    v = v.max(src[y * w + xx as usize] * fall);
                }
            }
            tmp[y * w + x] = v;
        }
    }
    let mut out = vec![0.0f32; w * h];
    for y in 0..h {
        for x in 0..w {
            let mut v: f32 = 0.0;
            for d in -ri..=ri {
                let yy = y as i64 + d;
                if yy >= 0 && (yy as usize) < h {
                    let fall = (1.0 - (d.abs() as f32 - r + 1.0).max(0.0)).clamp(0.0, 1.0);
                    v = v.max(tmp[yy as usize * w + x] * fall);
                }
            }
            out[y * w + x] = v;
        }
    }
    (Mask { w, h, a: out }, ri)
}

fn composite(img: &mut RgbaImage, m: &Mask, ox: i64, oy: i64, color: [u8; 3], alpha: f32) {
    let (iw, ih) = (i64::from(img.width()), i64::from(img.height()));
    for y in 0..m.h {
        let py = oy + y as i64;
        if py < 0 || py >= ih {
            continue;
        }
        for x in 0..m.w {
            let px = ox + x as i64;
            if px < 0 || px >= iw {
                continue;
            }
            let a = m.a[y * m.w + x] * alpha;
            if a <= 0.0 {
                continue;
            }
            let p = img.get_pixel_mut(px as u32, py as u32);
            for i in 0..3 {
                let v = f32::from(p[i]) + (f32::from(color[i]) - f32::from(p[i])) * a.min(1.0);
                p[i] = v.round().clamp(0.0, 255.0) as u8;
            }
            if p[3] < 255 {
                p[3] = (f32::from(p[3]) + (255.0 - f32::from(p[3])) * a.min(1.0)).round() as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn font_loads_and_draws_latin_and_cyrillic() {
        for text in ["HELLO", "Привет", "Hello, world and everyone here"] {
            let mut img = RgbaImage::from_pixel(400, 300, image::Rgba([90, 140, 200, 255]));
            let before = img.clone();
            let rect = draw_at(&mut img, text, Position::Center, Look::Auto).unwrap();
            assert!(rect.2 > 50 && rect.3 > 10, "{text}: {rect:?}");
            let changed = img
                .pixels()
                .zip(before.pixels())
                .filter(|(a, b)| a != b)
                .count();
            assert!(changed > 500, "{text}: {changed}");
        }
    }

    #[test]
    fn long_text_wraps_on_two_lines() {
        assert_eq!(split_lines("HELLO").len(), 1);
        assert_eq!(split_lines("Welcome to the seaside town").len(), 2);
    }
}
