//! Instruction edits: a small English/Russian phrase parser that turns "make it black and white
//! and rotate it 90 degrees" into a list of [`EditOp`]s, and the pixel operations themselves.
//!
//! The parser is table-driven: [`KEYWORDS`] maps word patterns to an operation kind, and each
//! operation reads its modifiers (amount, direction, degrees) from the words of its own clause.
//! To support a new operation add an [`EditOp`] variant, a [`Kind`], its keyword rows and a
//! line in [`UNDERSTOOD`].

use image::{RgbaImage, imageops};

use super::RenderError;

/// One edit step. Ops are applied in the order they appear in the instruction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EditOp {
    Grayscale,
    Sepia,
    /// Negative (colours inverted, alpha kept).
    Invert,
    /// Gaussian-like blur. The sigma is in pixels per 1000 pixels of the image's long side, so an
    /// instruction looks the same at any resolution.
    Blur(f32),
    /// Unsharp mask with this strength (1.0 is a clear but natural sharpening).
    Sharpen(f32),
    /// Added to every colour channel (-255..=255).
    Brightness(i32),
    /// Contrast change in percent: positive stretches, negative flattens.
    Contrast(f32),
    /// Clockwise rotation: 90, 180 or 270 degrees.
    Rotate(u16),
    FlipHorizontal,
    FlipVertical,
}

/// At most this many ops per instruction; the rest are ignored (each op is a full-image pass).
pub const MAX_OPS: usize = 12;

/// Shown to the client when nothing in the instruction was understood.
pub const UNDERSTOOD: &str = "Pictor could not find an edit it knows in this instruction. \
It understands: black and white / grayscale, sepia, invert / negative, blur, sharpen, \
brighter / darker, more / less contrast, rotate (left, right, 90, 180, 270 degrees), upside down, \
flip / mirror (horizontally or vertically); with \"slightly\" or \"very\" for the strength. \
In Russian: чёрно-белым, сепия, негатив, размой, резкость, ярче / темнее, контраст, \
поверни (влево, вправо, на 90 градусов), отрази / зеркально, немного / сильно. \
Several edits can be combined: \"make it black and white and rotate it 90 degrees\".";

/// What a keyword selects; modifiers in the same clause turn it into an [`EditOp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Grayscale,
    Sepia,
    Invert,
    Blur,
    Sharpen,
    Brighter,
    Darker,
    /// "brightness": direction from "increase"/"reduce" words, brighter by default.
    Brightness,
    Contrast,
    LessContrast,
    Rotate,
    /// Rotation with a fixed angle ("upside down").
    RotateBy(u16),
    Flip,
    FlipVertical,
}

/// Keyword patterns, one token per element. A trailing `*` matches any word with that prefix
/// (Russian endings vary). At each position the longest matching pattern wins.
const KEYWORDS: &[(&[&str], Kind)] = &[
    // Grayscale
    (&["black", "and", "white"], Kind::Grayscale),
    (&["black", "white"], Kind::Grayscale),
    (&["bw"], Kind::Grayscale),
    (&["grayscale"], Kind::Grayscale),
    (&["greyscale"], Kind::Grayscale),
    (&["gray", "scale"], Kind::Grayscale),
    (&["grey", "scale"], Kind::Grayscale),
    (&["gray"], Kind::Grayscale),
    (&["grey"], Kind::Grayscale),
    (&["monochrom*"], Kind::Grayscale),
    (&["desaturat*"], Kind::Grayscale),
    (&["colorless"], Kind::Grayscale),
    (&["черно", "бел*"], Kind::Grayscale),
    (&["чернобел*"], Kind::Grayscale),
    (&["чб"], Kind::Grayscale),
    (&["монохром*"], Kind::Grayscale),
    (&["обесцвет*"], Kind::Grayscale),
    (&["бесцвет*"], Kind::Grayscale),
    (&["серым"], Kind::Grayscale),
    (&["серый"], Kind::Grayscale),
    (&["серое"], Kind::Grayscale),
    (&["оттенк*", "серого"], Kind::Grayscale),
    // Sepia
    (&["sepia"], Kind::Sepia),
    (&["vintage"], Kind::Sepia),
    (&["old", "photo*"], Kind::Sepia),
    (&["сепи*"], Kind::Sepia),
    (&["винтаж*"], Kind::Sepia),
    (&["старин*"], Kind::Sepia),
    // Invert
    (&["invert*"], Kind::Invert),
    (&["negative"], Kind::Invert),
    (&["инверт*"], Kind::Invert),
    (&["негатив*"], Kind::Invert),
    (&["инверси*"], Kind::Invert),
    // Blur
    (&["blur*"], Kind::Blur),
    (&["soften"], Kind::Blur),
    (&["defocus*"], Kind::Blur),
    (&["out", "of", "focus"], Kind::Blur),
    (&["размы*"], Kind::Blur),
    (&["размой"], Kind::Blur),
    (&["размо*"], Kind::Blur),
    (&["размаж*"], Kind::Blur),
    (&["разма*"], Kind::Blur),
    (&["блюр*"], Kind::Blur),
    (&["нечетк*"], Kind::Blur),
    // Sharpen
    (&["sharp*"], Kind::Sharpen),
    (&["crisp*"], Kind::Sharpen),
    (&["резк*"], Kind::Sharpen),
    (&["резче"], Kind::Sharpen),
    (&["четче"], Kind::Sharpen),
    (&["четкост*"], Kind::Sharpen),
    // Brightness
    (&["brighter"], Kind::Brighter),
    (&["brighten*"], Kind::Brighter),
    (&["lighter"], Kind::Brighter),
    (&["lighten*"], Kind::Brighter),
    (&["bright"], Kind::Brighter),
    (&["brightness"], Kind::Brightness),
    (&["darker"], Kind::Darker),
    (&["darken*"], Kind::Darker),
    (&["dark"], Kind::Darker),
    (&["dim"], Kind::Darker),
    (&["dimmer"], Kind::Darker),
    (&["ярче"], Kind::Brighter),
    (&["светлее"], Kind::Brighter),
    (&["осветли*"], Kind::Brighter),
    (&["высветли*"], Kind::Brighter),
    (&["яркост*"], Kind::Brightness),
    (&["темнее"], Kind::Darker),
    (&["затемни*"], Kind::Darker),
    (&["затемн*"], Kind::Darker),
    (&["темным"], Kind::Darker),
    // Contrast
    (&["contrast*"], Kind::Contrast),
    (&["flatter"], Kind::LessContrast),
    (&["washed", "out"], Kind::LessContrast),
    (&["контраст*"], Kind::Contrast),
    // Rotation
    (&["rotat*"], Kind::Rotate),
    (&["turn*", "left"], Kind::Rotate),
    (&["turn*", "right"], Kind::Rotate),
    (&["turn*", "clockwise"], Kind::Rotate),
    (&["turn*", "counterclockwise"], Kind::Rotate),
    (&["turn*", "anticlockwise"], Kind::Rotate),
    (&["upside", "down"], Kind::RotateBy(180)),
    (&["поверн*"], Kind::Rotate),
    (&["поворот*"], Kind::Rotate),
    (&["разверн*"], Kind::Rotate),
    (&["вращ*"], Kind::Rotate),
    (&["вверх", "ногами"], Kind::RotateBy(180)),
    (&["кверху", "ногами"], Kind::RotateBy(180)),
    (&["перевер*"], Kind::RotateBy(180)),
    // Flips
    (&["flip*"], Kind::Flip),
    (&["mirror*"], Kind::Flip),
    (&["flip*", "upside", "down"], Kind::FlipVertical),
    (&["flip*", "vertical*"], Kind::FlipVertical),
    (&["отраз*"], Kind::Flip),
    (&["отраж*"], Kind::Flip),
    (&["зеркал*"], Kind::Flip),
];

/// Words that end a clause: modifiers do not cross them.
const CONJUNCTIONS: &[&str] = &[
    "and",
    "then",
    "also",
    "plus",
    "after",
    "afterwards",
    "finally",
    "и",
    "затем",
    "потом",
    "также",
    "после",
    "а",
    "еще",
    "плюс",
];

/// Words dropped before matching so that "flip the image upside down" matches "flip upside down".
const FILLER: &[&str] = &[
    "a",
    "an",
    "the",
    "it",
    "its",
    "this",
    "that",
    "image",
    "picture",
    "photo",
    "pic",
    "please",
    "make",
    "me",
    "my",
    "to",
    "by",
    "be",
    "is",
    "into",
    "in",
    "degrees",
    "degree",
    "deg",
    "°",
    "его",
    "ее",
    "это",
    "эту",
    "этот",
    "картинку",
    "картинка",
    "изображение",
    "фото",
    "фотографию",
    "снимок",
    "пожалуйста",
    "сделай",
    "сделайте",
    "сделать",
    "на",
    "градусов",
    "градуса",
    "градус",
    "чтобы",
    "была",
    "было",
    "стала",
    "стало",
];

const SLIGHT: &[&str] = &[
    "slight*",
    "bit",
    "little",
    "touch",
    "tad",
    "subtl*",
    "gentl*",
    "soft*",
    "mild*",
    "немн*",
    "слегка",
    "чуть*",
    "капельк*",
    "легк*",
    "небольш*",
    "малость",
];
const STRONG: &[&str] = &[
    "very",
    "lot",
    "much",
    "strong*",
    "heav*",
    "really",
    "extrem*",
    "hard",
    "super",
    "way",
    "сильн*",
    "очень",
    "гораздо",
    "намного",
    "максимал*",
    "мощн*",
    "значительн*",
    "куда",
];
const LESS: &[&str] = &[
    "less",
    "lower",
    "reduce*",
    "decrease*",
    "remove",
    "меньше",
    "уменьш*",
    "сниз*",
    "убав*",
    "понизь*",
    "убери",
];
const MORE: &[&str] = &[
    "more",
    "increase*",
    "raise",
    "boost",
    "higher",
    "add",
    "больше",
    "увелич*",
    "повыс*",
    "добав*",
    "прибав*",
];
const LEFT: &[&str] = &[
    "left",
    "counterclockwise",
    "anticlockwise",
    "ccw",
    "влево",
    "налево",
    "против",
];
const VERTICAL: &[&str] = &[
    "vertical*",
    "upside",
    "top",
    "вертикал*",
    "сверху",
    "вниз",
    "вверх",
];

/// Parses an instruction into ops, in reading order.
pub fn parse_instruction(text: &str) -> Result<Vec<EditOp>, RenderError> {
    let tokens = tokenize(text);
    let mut found: Vec<(usize, usize, Kind)> = Vec::new(); // (start, end, kind)
    let mut i = 0;
    while i < tokens.len() {
        let best = KEYWORDS
            .iter()
            .filter(|(pattern, _)| matches_at(&tokens, i, pattern))
            .max_by_key(|(pattern, _)| pattern.len());
        match best {
            Some((pattern, kind)) => {
                let end = i + pattern.len();
                match found.last_mut() {
                    // "отрази зеркально", "переверни вверх ногами": one op said twice.
                    Some(last)
                        if last.2 == *kind && !tokens[last.1..i].iter().any(|t| is_boundary(t)) =>
                    {
                        last.1 = end;
                    }
                    _ => found.push((i, end, *kind)),
                }
                i = end;
            }
            None => i += 1,
        }
    }

    let mut ops = Vec::new();
    for (n, &(start, end, kind)) in found.iter().enumerate() {
        // The clause: back to the previous op or conjunction, forward to the next one.
        let lo = found
            .get(n.wrapping_sub(1))
            .map_or(0, |prev| prev.1)
            .max(last_boundary_before(&tokens, start));
        let hi = found
            .get(n + 1)
            .map_or(tokens.len(), |next| next.0)
            .min(first_boundary_after(&tokens, end));
        let mut clause: Vec<&str> = tokens[lo..start].iter().map(String::as_str).collect();
        clause.extend(tokens[end..hi].iter().map(String::as_str));
        let matched: Vec<&str> = tokens[start..end].iter().map(String::as_str).collect();
        ops.push(build_op(kind, &clause, &matched));
    }
    ops.truncate(MAX_OPS);

    if ops.is_empty() {
        return Err(RenderError::EditNotUnderstood(UNDERSTOOD.to_owned()));
    }
    Ok(ops)
}

/// Lowercases, folds "ё", keeps "ч/б" and "b&w" as one word, splits on everything else.
/// Punctuation that separates clauses becomes a "," token.
fn tokenize(text: &str) -> Vec<String> {
    let lower = text
        .to_lowercase()
        .replace('ё', "е")
        .replace("ч/б", " чб ")
        .replace("ч-б", " чб ")
        .replace("b&w", " bw ")
        .replace("b/w", " bw ")
        .replace("counter-clockwise", "counterclockwise")
        .replace("counter clockwise", "counterclockwise")
        .replace("anti-clockwise", "anticlockwise")
        .replace("по часовой", "по_часовой")
        .replace("против часовой", "против_часовой");
    let mut tokens = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, tokens: &mut Vec<String>| {
        if !word.is_empty() {
            let w = std::mem::take(word);
            let w = match w.as_str() {
                "по_часовой" => "clockwise".to_owned(),
                "против_часовой" => "counterclockwise".to_owned(),
                _ => w,
            };
            if !FILLER.contains(&w.as_str()) {
                tokens.push(w);
            }
        }
    };
    let mut chars = lower.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            let starts_number = word.is_empty() && chars.peek().is_some_and(char::is_ascii_digit);
            flush(&mut word, &mut tokens);
            if matches!(c, ',' | ';' | '.' | '!' | '?' | '&' | '+' | '\n') {
                tokens.push(",".to_owned());
            } else if c == '-' && starts_number {
                // "-90": a negative angle reads as counterclockwise.
                tokens.push("counterclockwise".to_owned());
            }
        }
    }
    flush(&mut word, &mut tokens);
    tokens
}

fn word_matches(word: &str, pattern: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => word.starts_with(prefix),
        None => word == pattern,
    }
}

fn any_word(words: &[&str], patterns: &[&str]) -> bool {
    words
        .iter()
        .any(|w| patterns.iter().any(|p| word_matches(w, p)))
}

fn matches_at(tokens: &[String], at: usize, pattern: &[&str]) -> bool {
    at + pattern.len() <= tokens.len()
        && pattern
            .iter()
            .zip(&tokens[at..])
            .all(|(p, t)| word_matches(t, p))
}

fn is_boundary(token: &str) -> bool {
    token == "," || CONJUNCTIONS.contains(&token)
}

fn last_boundary_before(tokens: &[String], at: usize) -> usize {
    tokens[..at]
        .iter()
        .rposition(|t| is_boundary(t))
        .map_or(0, |p| p + 1)
}

fn first_boundary_after(tokens: &[String], at: usize) -> usize {
    tokens[at..]
        .iter()
        .position(|t| is_boundary(t))
        .map_or(tokens.len(), |p| at + p)
}

#[derive(Clone, Copy)]
enum Amount {
    Slight,
    Normal,
    Strong,
}

impl Amount {
    fn of(clause: &[&str]) -> Amount {
        if any_word(clause, STRONG) {
            Amount::Strong
        } else if any_word(clause, SLIGHT) {
            Amount::Slight
        } else {
            Amount::Normal
        }
    }

    fn pick<T>(self, slight: T, normal: T, strong: T) -> T {
        match self {
            Amount::Slight => slight,
            Amount::Normal => normal,
            Amount::Strong => strong,
        }
    }
}

fn build_op(kind: Kind, clause: &[&str], matched: &[&str]) -> EditOp {
    let amount = Amount::of(clause);
    let less = any_word(clause, LESS);
    match kind {
        Kind::Grayscale => EditOp::Grayscale,
        Kind::Sepia => EditOp::Sepia,
        Kind::Invert => EditOp::Invert,
        Kind::Blur => EditOp::Blur(amount.pick(1.5, 3.5, 9.0)),
        Kind::Sharpen => EditOp::Sharpen(amount.pick(0.5, 1.0, 2.0)),
        Kind::Brighter => EditOp::Brightness(amount.pick(20, 40, 80)),
        Kind::Darker => EditOp::Brightness(-amount.pick(20, 40, 80)),
        Kind::Brightness => {
            let delta = amount.pick(20, 40, 80);
            EditOp::Brightness(if less && !any_word(clause, MORE) {
                -delta
            } else {
                delta
            })
        }
        Kind::Contrast => {
            let pct = amount.pick(15.0, 30.0, 60.0);
            EditOp::Contrast(if less { -pct } else { pct })
        }
        Kind::LessContrast => EditOp::Contrast(-amount.pick(15.0, 30.0, 50.0)),
        Kind::Rotate => EditOp::Rotate(rotation(clause, matched)),
        Kind::RotateBy(degrees) => EditOp::Rotate(degrees),
        Kind::Flip => {
            if any_word(clause, VERTICAL) {
                EditOp::FlipVertical
            } else {
                EditOp::FlipHorizontal
            }
        }
        Kind::FlipVertical => EditOp::FlipVertical,
    }
}

/// Clockwise degrees from "90", "180", "270", "left"/"right", "counterclockwise"; 90 by default.
fn rotation(clause: &[&str], matched: &[&str]) -> u16 {
    let words: Vec<&str> = clause.iter().chain(matched).copied().collect();
    let left = any_word(&words, LEFT);
    let number = words
        .iter()
        .find_map(|w| match *w {
            "90" | "ninety" | "девяносто" => Some(90u16),
            "180" | "half" | "пол" => Some(180),
            "270" => Some(270),
            _ => None,
        })
        .unwrap_or(90);
    // "right" and "clockwise" keep the number as is; only a left turn mirrors it.
    match (number, left) {
        (180, _) => 180,
        (n, true) => 360 - n,
        (n, false) => n,
    }
}

/// Applies the ops in order.
pub fn apply(img: RgbaImage, ops: &[EditOp]) -> RgbaImage {
    ops.iter().fold(img, |img, op| apply_one(img, *op))
}

fn apply_one(mut img: RgbaImage, op: EditOp) -> RgbaImage {
    match op {
        EditOp::Grayscale => {
            map_rgb(&mut img, |[r, g, b]| {
                let y = luma(r, g, b);
                [y, y, y]
            });
            img
        }
        EditOp::Sepia => {
            map_rgb(&mut img, |[r, g, b]| {
                let (r, g, b) = (f32::from(r), f32::from(g), f32::from(b));
                [
                    to_u8(0.393 * r + 0.769 * g + 0.189 * b),
                    to_u8(0.349 * r + 0.686 * g + 0.168 * b),
                    to_u8(0.272 * r + 0.534 * g + 0.131 * b),
                ]
            });
            img
        }
        EditOp::Invert => {
            map_rgb(&mut img, |[r, g, b]| [255 - r, 255 - g, 255 - b]);
            img
        }
        EditOp::Brightness(delta) => {
            let lut: [u8; 256] = std::array::from_fn(|v| (v as i32 + delta).clamp(0, 255) as u8);
            map_rgb(&mut img, |[r, g, b]| {
                [lut[r as usize], lut[g as usize], lut[b as usize]]
            });
            img
        }
        EditOp::Contrast(percent) => {
            let k = ((100.0 + percent.clamp(-100.0, 400.0)) / 100.0).powi(2);
            let lut: [u8; 256] = std::array::from_fn(|v| {
                let x = v as f32 / 255.0;
                to_u8(((x - 0.5) * k + 0.5) * 255.0)
            });
            map_rgb(&mut img, |[r, g, b]| {
                [lut[r as usize], lut[g as usize], lut[b as usize]]
            });
            img
        }
        EditOp::Blur(sigma) => {
            let px = scaled_sigma(&img, sigma);
            if px < 0.3 {
                img
            } else {
                imageops::fast_blur(&img, px)
            }
        }
        EditOp::Sharpen(strength) => sharpen(img, strength),
        EditOp::Rotate(90) => imageops::rotate90(&img),
        EditOp::Rotate(180) => {
            imageops::rotate180_in_place(&mut img);
            img
        }
        EditOp::Rotate(270) => imageops::rotate270(&img),
        EditOp::Rotate(_) => img,
        EditOp::FlipHorizontal => {
            imageops::flip_horizontal_in_place(&mut img);
            img
        }
        EditOp::FlipVertical => {
            imageops::flip_vertical_in_place(&mut img);
            img
        }
    }
}

/// A per-1000-px sigma as pixels for this image.
fn scaled_sigma(img: &RgbaImage, sigma: f32) -> f32 {
    let long = img.width().max(img.height()) as f32;
    sigma * long / 1000.0
}

/// Unsharp mask: out = img + strength × (img − blurred), colour channels only.
fn sharpen(mut img: RgbaImage, strength: f32) -> RgbaImage {
    let sigma = scaled_sigma(&img, 1.2).max(0.8);
    let blurred = imageops::fast_blur(&img, sigma);
    for (px, bl) in img
        .as_mut()
        .chunks_exact_mut(4)
        .zip(blurred.as_raw().chunks_exact(4))
    {
        for (c, &b) in px.iter_mut().zip(bl).take(3) {
            let v = f32::from(*c);
            *c = to_u8(v + strength * (v - f32::from(b)));
        }
    }
    img
}

fn map_rgb(img: &mut RgbaImage, f: impl Fn([u8; 3]) -> [u8; 3]) {
    for px in img.as_mut().chunks_exact_mut(4) {
        let [r, g, b] = f([px[0], px[1], px[2]]);
        px[0] = r;
        px[1] = g;
        px[2] = b;
    }
}

/// Rec. 601 luma in integer arithmetic.
fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((299 * u32::from(r) + 587 * u32::from(g) + 114 * u32::from(b) + 500) / 1000) as u8
}

fn to_u8(v: f32) -> u8 {
    (v + 0.5).clamp(0.0, 255.0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use EditOp::*;

    fn ops(text: &str) -> Vec<EditOp> {
        parse_instruction(text).unwrap()
    }

    /// A 40x30 colourful test picture with a marked pixel at (0, 0).
    fn picture() -> RgbaImage {
        let mut img = RgbaImage::from_fn(40, 30, |x, y| {
            image::Rgba([(x * 6) as u8, (y * 8) as u8, ((x + y) * 3) as u8, 255])
        });
        img.put_pixel(0, 0, image::Rgba([255, 0, 0, 255]));
        img
    }

    fn mean(img: &RgbaImage) -> f64 {
        let raw = img.as_raw();
        let sum: u64 = raw
            .chunks_exact(4)
            .map(|p| u64::from(p[0]) + u64::from(p[1]) + u64::from(p[2]))
            .sum();
        sum as f64 / (raw.len() / 4 * 3) as f64
    }

    fn variance(img: &RgbaImage) -> f64 {
        let m = mean(img);
        let raw = img.as_raw();
        let sum: f64 = raw
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2]])
            .map(|v| (f64::from(v) - m).powi(2))
            .sum();
        sum / (raw.len() / 4 * 3) as f64
    }

    #[test]
    fn english_instructions() {
        assert_eq!(
            ops("make it black and white and rotate it 90 degrees clockwise"),
            [Grayscale, Rotate(90)]
        );
        assert_eq!(ops("Grayscale please"), [Grayscale]);
        assert_eq!(ops("b&w"), [Grayscale]);
        assert_eq!(ops("black-and-white"), [Grayscale]);
        assert_eq!(ops("sepia, then invert"), [Sepia, Invert]);
        assert_eq!(ops("make it a negative"), [Invert]);
        assert_eq!(ops("rotate left"), [Rotate(270)]);
        assert_eq!(ops("rotate right"), [Rotate(90)]);
        assert_eq!(ops("rotate 90 degrees counter-clockwise"), [Rotate(270)]);
        assert_eq!(ops("rotate by -90"), [Rotate(270)]);
        assert_eq!(ops("rotate 180"), [Rotate(180)]);
        assert_eq!(ops("rotate it 270°"), [Rotate(270)]);
        assert_eq!(ops("turn it upside down"), [Rotate(180)]);
        assert_eq!(ops("flip"), [FlipHorizontal]);
        assert_eq!(ops("mirror the photo"), [FlipHorizontal]);
        assert_eq!(ops("flip vertically"), [FlipVertical]);
        assert_eq!(ops("flip it upside down"), [FlipVertical]);
        assert_eq!(ops("sharpen"), [Sharpen(1.0)]);
        assert_eq!(ops("more contrast"), [Contrast(30.0)]);
        assert_eq!(ops("reduce the contrast"), [Contrast(-30.0)]);
        assert_eq!(ops("reduce brightness"), [Brightness(-40)]);
        assert_eq!(ops("darker"), [Brightness(-40)]);
    }

    #[test]
    fn amounts_bind_to_their_own_clause() {
        assert_eq!(ops("slightly blur"), [Blur(1.5)]);
        assert_eq!(ops("blur it a lot"), [Blur(9.0)]);
        assert_eq!(
            ops("blur it a bit and make it very bright"),
            [Blur(1.5), Brightness(80)]
        );
        assert_eq!(
            ops("a bit darker, more contrast"),
            [Brightness(-20), Contrast(30.0)]
        );
    }

    #[test]
    fn russian_instructions() {
        assert_eq!(
            ops("сделай черно-белым и поверни на 90 градусов"),
            [Grayscale, Rotate(90)]
        );
        assert_eq!(ops("Чёрно-белый"), [Grayscale]);
        assert_eq!(ops("ч/б"), [Grayscale]);
        assert_eq!(ops("размой немного"), [Blur(1.5)]);
        assert_eq!(ops("сильное размытие"), [Blur(9.0)]);
        assert_eq!(ops("поверни влево"), [Rotate(270)]);
        assert_eq!(
            ops("поверни на 90 градусов против часовой стрелки"),
            [Rotate(270)]
        );
        assert_eq!(ops("отрази зеркально"), [FlipHorizontal]);
        assert_eq!(ops("отрази по вертикали"), [FlipVertical]);
        assert_eq!(ops("сделай ярче"), [Brightness(40)]);
        assert_eq!(ops("немного темнее"), [Brightness(-20)]);
        assert_eq!(ops("сепия"), [Sepia]);
        assert_eq!(ops("инвертируй цвета"), [Invert]);
        assert_eq!(ops("негатив"), [Invert]);
        assert_eq!(ops("добавь резкость"), [Sharpen(1.0)]);
        assert_eq!(ops("больше контраста"), [Contrast(30.0)]);
        assert_eq!(ops("уменьши контраст"), [Contrast(-30.0)]);
        assert_eq!(ops("переверни вверх ногами"), [Rotate(180)]);
    }

    #[test]
    fn gibberish_is_not_understood() {
        for text in ["", "   ", "asdf qwerty", "сделай красиво", "make it pop"] {
            match parse_instruction(text) {
                Err(RenderError::EditNotUnderstood(msg)) => {
                    assert!(msg.contains("black and white") && msg.contains("поверни"));
                }
                other => panic!("{text:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn grayscale_makes_channels_equal() {
        let img = apply(picture(), &[Grayscale]);
        assert!(
            img.pixels()
                .all(|p| p[0] == p[1] && p[1] == p[2] && p[3] == 255)
        );
    }

    #[test]
    fn sepia_is_warm_and_invert_is_involutive() {
        let img = apply(picture(), &[Sepia]);
        assert!(img.pixels().all(|p| p[0] >= p[1] && p[1] >= p[2]));
        assert_eq!(apply(picture(), &[Invert, Invert]), picture());
        assert_eq!(
            apply(picture(), &[Invert]).get_pixel(0, 0).0,
            [0, 255, 255, 255]
        );
    }

    #[test]
    fn rotations_move_the_marked_corner() {
        let src = picture();
        let r90 = apply(src.clone(), &[Rotate(90)]);
        assert_eq!(r90.dimensions(), (30, 40));
        // Clockwise: the top-left corner goes to the top-right.
        assert_eq!(r90.get_pixel(29, 0).0, [255, 0, 0, 255]);
        let r270 = apply(src.clone(), &[Rotate(270)]);
        assert_eq!(r270.dimensions(), (30, 40));
        assert_eq!(r270.get_pixel(0, 39).0, [255, 0, 0, 255]);
        let r180 = apply(src.clone(), &[Rotate(180)]);
        assert_eq!(r180.dimensions(), (40, 30));
        assert_eq!(r180.get_pixel(39, 29).0, [255, 0, 0, 255]);
        assert_eq!(apply(src.clone(), &[Rotate(90), Rotate(270)]), src);
    }

    #[test]
    fn flips_move_the_marked_pixel() {
        let h = apply(picture(), &[FlipHorizontal]);
        assert_eq!(h.get_pixel(39, 0).0, [255, 0, 0, 255]);
        let v = apply(picture(), &[FlipVertical]);
        assert_eq!(v.get_pixel(0, 29).0, [255, 0, 0, 255]);
    }

    #[test]
    fn brightness_and_contrast_move_the_statistics() {
        let src = picture();
        assert!(mean(&apply(src.clone(), &[Brightness(40)])) > mean(&src) + 20.0);
        assert!(mean(&apply(src.clone(), &[Brightness(-40)])) < mean(&src) - 20.0);
        assert!(variance(&apply(src.clone(), &[Contrast(30.0)])) > variance(&src));
        assert!(variance(&apply(src.clone(), &[Contrast(-30.0)])) < variance(&src));
    }

    #[test]
    fn blur_lowers_and_sharpen_raises_variance() {
        // A checkerboard: maximal local variance.
        let board = RgbaImage::from_fn(200, 200, |x, y| {
            let v = if (x / 4 + y / 4) % 2 == 0 { 230 } else { 20 };
            image::Rgba([v, v, v, 255])
        });
        let blurred = apply(board.clone(), &[Blur(9.0)]);
        assert_eq!(blurred.dimensions(), board.dimensions());
        assert!(variance(&blurred) < variance(&board) * 0.8);
        let soft = apply(board.clone(), &[Blur(10.0)]);
        let sharpened = apply(soft.clone(), &[Sharpen(1.0)]);
        assert!(variance(&sharpened) > variance(&soft));
    }

    #[test]
    fn alpha_is_preserved() {
        let img = RgbaImage::from_pixel(10, 10, image::Rgba([10, 20, 30, 77]));
        for op in [Grayscale, Sepia, Invert, Brightness(50), Contrast(40.0)] {
            assert!(
                apply(img.clone(), &[op]).pixels().all(|p| p[3] == 77),
                "{op:?}"
            );
        }
    }
}
