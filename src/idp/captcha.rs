//! A self-hosted captcha (no outside service): five characters drawn as jittered strokes over
//! noise, answered once. Shown on registration and after repeated failed sign-ins.

use std::collections::HashMap;
use std::sync::Mutex;

use rand::RngExt;

use super::crypto::random_token;
use crate::clock::Millis;

const TTL_MS: u64 = 10 * 60 * 1000;
/// No look-alikes (0/O, 1/I/L, 5/S, 2/Z, 8/B).
const ALPHABET: &[u8] = b"34679ACDEFHJKMNPRTUVWXY";
const W: usize = 200;
const H: usize = 70;

#[derive(Default)]
pub struct Captchas {
    open: Mutex<HashMap<String, (String, Millis)>>,
}

impl Captchas {
    /// A new challenge id (its picture is at `/captcha/<id>.png`).
    pub fn issue(&self, now: Millis) -> String {
        let mut rng = rand::rng();
        let answer: String = (0..5)
            .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
            .collect();
        let id = random_token("");
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|_, (_, exp)| now < *exp);
        if open.len() > 50_000 {
            open.clear();
        }
        open.insert(id.clone(), (answer, now + TTL_MS));
        id
    }

    /// Checks an answer (case-insensitive, spaces ignored). A challenge is good for one try.
    pub fn verify(&self, id: &str, answer: &str, now: Millis) -> bool {
        let entry = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        match entry {
            Some((expected, exp)) if now < exp => {
                let given: String = answer
                    .chars()
                    .filter(|c| !c.is_whitespace())
                    .collect::<String>()
                    .to_uppercase();
                super::crypto::ct_eq(given.as_bytes(), expected.as_bytes())
            }
            _ => false,
        }
    }

    /// The picture of a challenge, or `None` for an unknown or expired id.
    pub fn png(&self, id: &str, now: Millis) -> Option<Vec<u8>> {
        let answer = {
            let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            let (answer, exp) = open.get(id)?;
            if now >= *exp {
                return None;
            }
            answer.clone()
        };
        draw(&answer)
    }

    /// The answer, for tests of the pages (never exposed over HTTP).
    pub fn answer_for_tests(&self, id: &str) -> Option<String> {
        self.open.lock().ok()?.get(id).map(|(a, _)| a.clone())
    }
}

/// A line between two (x, y) points of a glyph's 4×6 grid.
type Stroke = ((u8, u8), (u8, u8));

/// Strokes of each glyph.
fn strokes(c: char) -> &'static [Stroke] {
    match c {
        '3' => &[
            ((0, 0), (4, 0)),
            ((4, 0), (4, 6)),
            ((0, 3), (4, 3)),
            ((0, 6), (4, 6)),
        ],
        '4' => &[((0, 0), (0, 3)), ((0, 3), (4, 3)), ((3, 0), (3, 6))],
        '6' => &[
            ((4, 0), (0, 0)),
            ((0, 0), (0, 6)),
            ((0, 6), (4, 6)),
            ((4, 6), (4, 3)),
            ((4, 3), (0, 3)),
        ],
        '7' => &[((0, 0), (4, 0)), ((4, 0), (1, 6))],
        '9' => &[
            ((4, 3), (0, 3)),
            ((0, 3), (0, 0)),
            ((0, 0), (4, 0)),
            ((4, 0), (4, 6)),
            ((4, 6), (0, 6)),
        ],
        'A' => &[((0, 6), (2, 0)), ((2, 0), (4, 6)), ((1, 3), (3, 3))],
        'C' => &[((4, 0), (0, 0)), ((0, 0), (0, 6)), ((0, 6), (4, 6))],
        'D' => &[
            ((0, 0), (0, 6)),
            ((0, 0), (3, 0)),
            ((3, 0), (4, 2)),
            ((4, 2), (4, 4)),
            ((4, 4), (3, 6)),
            ((3, 6), (0, 6)),
        ],
        'E' => &[
            ((4, 0), (0, 0)),
            ((0, 0), (0, 6)),
            ((0, 6), (4, 6)),
            ((0, 3), (3, 3)),
        ],
        'F' => &[((4, 0), (0, 0)), ((0, 0), (0, 6)), ((0, 3), (3, 3))],
        'H' => &[((0, 0), (0, 6)), ((4, 0), (4, 6)), ((0, 3), (4, 3))],
        'J' => &[((4, 0), (4, 6)), ((4, 6), (0, 6)), ((0, 6), (0, 4))],
        'K' => &[((0, 0), (0, 6)), ((4, 0), (0, 3)), ((0, 3), (4, 6))],
        'M' => &[
            ((0, 6), (0, 0)),
            ((0, 0), (2, 3)),
            ((2, 3), (4, 0)),
            ((4, 0), (4, 6)),
        ],
        'N' => &[((0, 6), (0, 0)), ((0, 0), (4, 6)), ((4, 6), (4, 0))],
        'P' => &[
            ((0, 6), (0, 0)),
            ((0, 0), (4, 0)),
            ((4, 0), (4, 3)),
            ((4, 3), (0, 3)),
        ],
        'R' => &[
            ((0, 6), (0, 0)),
            ((0, 0), (4, 0)),
            ((4, 0), (4, 3)),
            ((4, 3), (0, 3)),
            ((1, 3), (4, 6)),
        ],
        'T' => &[((0, 0), (4, 0)), ((2, 0), (2, 6))],
        'U' => &[((0, 0), (0, 6)), ((0, 6), (4, 6)), ((4, 6), (4, 0))],
        'V' => &[((0, 0), (2, 6)), ((2, 6), (4, 0))],
        'W' => &[
            ((0, 0), (1, 6)),
            ((1, 6), (2, 3)),
            ((2, 3), (3, 6)),
            ((3, 6), (4, 0)),
        ],
        'X' => &[((0, 0), (4, 6)), ((4, 0), (0, 6))],
        'Y' => &[((0, 0), (2, 3)), ((4, 0), (2, 3)), ((2, 3), (2, 6))],
        _ => &[],
    }
}

fn line(buf: &mut [u8], (x0, y0): (f32, f32), (x1, y1): (f32, f32), width: f32, ink: u8) {
    let steps = ((x1 - x0).abs().max((y1 - y0).abs()) * 2.0).max(1.0) as usize;
    for i in 0..=steps {
        let t = i as f32 / steps as f32;
        let (cx, cy) = (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t);
        let r = width / 2.0;
        for y in (cy - r).floor() as i32..=(cy + r).ceil() as i32 {
            for x in (cx - r).floor() as i32..=(cx + r).ceil() as i32 {
                if x >= 0 && y >= 0 && (x as usize) < W && (y as usize) < H {
                    let d = ((x as f32 - cx).powi(2) + (y as f32 - cy).powi(2)).sqrt();
                    if d <= r {
                        let p = &mut buf[y as usize * W + x as usize];
                        *p = (*p).min(ink);
                    }
                }
            }
        }
    }
}

fn draw(answer: &str) -> Option<Vec<u8>> {
    let mut rng = rand::rng();
    let mut buf = vec![255u8; W * H];
    for p in buf.iter_mut() {
        *p = 225 + rng.random_range(0..30u8);
    }
    for _ in 0..6 {
        let a = (
            rng.random_range(0.0..W as f32),
            rng.random_range(0.0..H as f32),
        );
        let b = (
            rng.random_range(0.0..W as f32),
            rng.random_range(0.0..H as f32),
        );
        line(&mut buf, a, b, 1.5, 150);
    }
    for (i, c) in answer.chars().enumerate() {
        let ox = 14.0 + i as f32 * 36.0 + rng.random_range(-3.0..3.0);
        let oy = 12.0 + rng.random_range(-5.0..5.0);
        let (sx, sy) = (rng.random_range(5.0..6.5), rng.random_range(6.5..7.5));
        let slant = rng.random_range(-0.25..0.25);
        for &((ax, ay), (bx, by)) in strokes(c) {
            let map = |x: u8, y: u8| {
                (
                    ox + x as f32 * sx + (6.0 - y as f32) * slant * sx,
                    oy + y as f32 * sy,
                )
            };
            line(&mut buf, map(ax, ay), map(bx, by), 3.2, 30);
        }
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, W as u32, H as u32);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc.write_header().ok()?;
        writer.write_image_data(&buf).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_try_per_challenge() {
        let c = Captchas::default();
        let id = c.issue(0);
        let answer = c.answer_for_tests(&id).unwrap();
        assert!(c.png(&id, 0).unwrap().starts_with(b"\x89PNG"));
        assert!(!c.verify(&id, "WRONG", 0));
        assert!(
            !c.verify(&id, &answer, 0),
            "a failed try consumes the challenge"
        );
        let id = c.issue(0);
        let answer = c.answer_for_tests(&id).unwrap();
        assert!(c.verify(&id, &answer.to_lowercase(), 0));
        assert!(!c.verify(&id, &answer, 0), "single use");
        let id = c.issue(0);
        assert!(c.png(&id, TTL_MS + 1).is_none());
        for ch in ALPHABET {
            assert!(!strokes(*ch as char).is_empty(), "{}", *ch as char);
        }
    }
}
