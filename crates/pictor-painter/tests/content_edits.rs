//! Content edits on real pictures (PNG bytes in, PNG bytes out): recolouring a named region,
//! the time of day and the weather, adding things where they belong, and removing or replacing
//! what the painter placed; each checked by colour statistics of regions, colour mass and the
//! shape of what changed. Refusals carry a short message in the instruction's language.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The painter and the shared types under one name, as the server shows them (`pictor::render`).
mod render {
    pub use pictor_core::*;
    pub use pictor_painter::*;
}

use image::RgbaImage;

#[path = "common/sheet.rs"]
mod sheet;
use render::{
    EditSpec, Model, PngParameters, ProceduralRenderer, Ratio, RenderError, Renderer, procedural,
};

/// A painter picture as a job stores it: PNG with its `parameters` (and the watermark when asked).
fn painted(prompt: &str, seed: u64, watermark: bool) -> Vec<u8> {
    let pic = procedural::render_picture(prompt, Model::Fast, Ratio::Landscape32, seed, None);
    let params = PngParameters {
        prompt: prompt.into(),
        seed,
        model: "fast".into(),
        kind: "generate",
        details: None,
        scene: None,
    };
    render::finish(pic, watermark, &params).unwrap()
}

fn decode(png: &[u8]) -> RgbaImage {
    image::load_from_memory(png).unwrap().to_rgba8()
}

fn try_edit(source: &[u8], instruction: &str) -> Result<RgbaImage, RenderError> {
    let pic = ProceduralRenderer.edit(&EditSpec {
        source: source.to_vec(),
        instruction: instruction.into(),
        seed: 3,
        mask: None,
        loras: Vec::new(),
    })?;
    let params = PngParameters {
        prompt: instruction.into(),
        seed: 3,
        model: "fast".into(),
        kind: "edit",
        details: None,
        scene: None,
    };
    Ok(decode(&render::finish(pic, false, &params).unwrap()))
}

fn edit(source: &[u8], instruction: &str) -> RgbaImage {
    try_edit(source, instruction).unwrap_or_else(|e| panic!("{instruction}: {e}"))
}

fn refused(source: &[u8], instruction: &str) -> String {
    match try_edit(source, instruction) {
        Err(RenderError::EditNotUnderstood(m)) => m,
        other => panic!(
            "{instruction}: expected a refusal, got {:?}",
            other.map(|i| i.dimensions())
        ),
    }
}

/// Mean colour of the rows from `from` to `to` (shares of the height).
fn band(img: &RgbaImage, from: f32, to: f32) -> [f32; 3] {
    let (w, h) = img.dimensions();
    let (y0, y1) = ((h as f32 * from) as u32, (h as f32 * to) as u32);
    let mut s = [0f32; 3];
    for y in y0..y1 {
        for x in 0..w {
            let p = img.get_pixel(x, y);
            for k in 0..3 {
                s[k] += f32::from(p[k]);
            }
        }
    }
    let n = (w * (y1 - y0)) as f32;
    [s[0] / n, s[1] / n, s[2] / n]
}

fn lum(p: [f32; 3]) -> f32 {
    0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2]
}

fn count(img: &RgbaImage, f: impl Fn([i32; 3]) -> bool) -> usize {
    img.pixels()
        .filter(|p| f([i32::from(p[0]), i32::from(p[1]), i32::from(p[2])]))
        .count()
}

fn red(p: [i32; 3]) -> bool {
    p[0] > 150 && p[1] < 90 && p[2] < 90
}

/// The pixels that changed by more than a few levels, and their bounding box.
fn changed(a: &RgbaImage, b: &RgbaImage) -> (usize, Option<(u32, u32, u32, u32)>) {
    let mut n = 0;
    let mut bbox: Option<(u32, u32, u32, u32)> = None;
    for (x, y, p) in a.enumerate_pixels() {
        let q = b.get_pixel(x, y);
        if (0..3).any(|k| p[k].abs_diff(q[k]) > 24) {
            n += 1;
            bbox = Some(match bbox {
                None => (x, y, x, y),
                Some((x0, y0, x1, y1)) => (x0.min(x), y0.min(y), x1.max(x), y1.max(y)),
            });
        }
    }
    (n, bbox)
}

const LIGHTHOUSE: &str = "a lighthouse on a cliff by the sea at noon";

#[test]
fn the_sky_takes_the_named_colour_and_the_land_keeps_its_own() {
    let src = painted(LIGHTHOUSE, 5, false);
    let before = decode(&src);
    let top = band(&before, 0.0, 0.12);
    assert!(top[2] > top[0] + 40.0, "the sky starts blue: {top:?}");
    for instruction in [
        "make the sky pink",
        "сделай небо розовым",
        "paint the sky pink",
    ] {
        let after = edit(&src, instruction);
        assert_eq!(after.dimensions(), before.dimensions());
        let top = band(&after, 0.0, 0.12);
        assert!(
            top[0] > top[1] + 50.0 && top[0] > top[2] - 10.0,
            "{instruction}: the sky is pink: {top:?}"
        );
        // The foreground (the bottom tenth: the cliff and the sea) keeps its colours.
        let (b0, b1) = (band(&before, 0.9, 1.0), band(&after, 0.9, 1.0));
        assert!(
            (0..3).all(|k| (b0[k] - b1[k]).abs() < 6.0),
            "{instruction}: the foreground changed: {b0:?} → {b1:?}"
        );
    }
    // "grey" after a region is its colour, not a black-and-white edit of the whole picture.
    let grey = edit(&src, "make the sky grey");
    let top = band(&grey, 0.0, 0.12);
    assert!((top[0] - top[2]).abs() < 12.0, "a grey sky: {top:?}");
    let cliff = count(&grey, |p| p[1] > p[0] + 30 && p[1] > p[2] + 30);
    assert!(
        cliff > 1000,
        "the green cliff stays green: {cliff} green pixels"
    );
}

#[test]
fn grass_and_water_are_found_by_colour_below_the_sky() {
    let src = painted(LIGHTHOUSE, 5, false);
    let before = decode(&src);
    let green = |p: [i32; 3]| p[1] > p[0] + 30 && p[1] > p[2] + 30;
    let yellow = |p: [i32; 3]| p[0] > 150 && p[1] > 120 && p[2] < 90;
    let after = edit(&src, "make the grass yellow");
    let (g0, g1) = (count(&before, green), count(&after, green));
    let (y0, y1) = (count(&before, yellow), count(&after, yellow));
    assert!(g0 > 5000 && g1 * 10 < g0, "green {g0} → {g1}");
    assert!(y1 > y0 + 5000, "yellow {y0} → {y1}");
    let sky = (band(&before, 0.0, 0.1), band(&after, 0.0, 0.1));
    assert!(
        (0..3).all(|k| (sky.0[k] - sky.1[k]).abs() < 4.0),
        "the sky changed: {sky:?}"
    );

    let water = edit(&src, "turn the water green");
    let bluish = |p: [i32; 3]| p[2] > p[0] + 40 && p[2] > p[1] + 20;
    let lower = |img: &RgbaImage| {
        let h = img.height();
        let sub = image::imageops::crop_imm(img, 0, h * 3 / 4, img.width() / 3, h / 4).to_image();
        (count(&sub, bluish), count(&sub, green))
    };
    let (b0, _) = lower(&before);
    let (b1, g1) = lower(&water);
    assert!(
        b0 > 5000 && b1 * 4 < b0 && g1 > b0 / 2,
        "the sea at the lower left: blue {b0} → {b1}, green {g1}"
    );
}

/// Mean colour of a rectangle given in shares of the picture.
fn patch(img: &RgbaImage, x: (f32, f32), y: (f32, f32)) -> [f32; 3] {
    let (w, h) = img.dimensions();
    let (x0, x1) = ((w as f32 * x.0) as u32, (w as f32 * x.1) as u32);
    let (y0, y1) = ((h as f32 * y.0) as u32, (h as f32 * y.1) as u32);
    let mut s = [0f32; 3];
    for yy in y0..y1 {
        for xx in x0..x1 {
            let p = img.get_pixel(xx, yy);
            for k in 0..3 {
                s[k] += f32::from(p[k]);
            }
        }
    }
    let n = ((x1 - x0) * (y1 - y0)) as f32;
    [s[0] / n, s[1] / n, s[2] / n]
}

/// The region masks follow what is in the picture, not a coarse grid: mist in front of a cliff
/// is not sky, trees as green as the meadow are not grass, the sun's path on a lake is not sky.
#[test]
fn region_edges_follow_the_picture() {
    let moved = |a: [f32; 3], b: [f32; 3]| (0..3).map(|k| (a[k] - b[k]).abs()).fold(0.0, f32::max);

    // The lighthouse's cliff, left of the tower, has a pale misty stretch the sky's colour.
    let src = painted(LIGHTHOUSE, 5, false);
    let before = decode(&src);
    let pink = edit(&src, "make the sky pink");
    let mist = ((0.14, 0.22), (0.47, 0.51));
    let (m0, m1) = (patch(&before, mist.0, mist.1), patch(&pink, mist.0, mist.1));
    assert!(
        moved(m0, m1) < 8.0,
        "the misty cliff turned: {m0:?} → {m1:?}"
    );
    let sky = ((0.1, 0.3), (0.3, 0.4));
    let (s0, s1) = (patch(&before, sky.0, sky.1), patch(&pink, sky.0, sky.1));
    assert!(
        s1[0] > s0[0] + 60.0,
        "the sky just above it is pink: {s0:?} → {s1:?}"
    );

    // The cabin's meadow turns yellow; the forest behind it, trees as green as the meadow
    // among them, stays green.
    let src = painted("a cabin in a green meadow by a forest at noon", 2, false);
    let before = decode(&src);
    let yellow = edit(&src, "make the grass yellow");
    let meadow = band(&yellow, 0.9, 1.0);
    assert!(
        meadow[0] > 150.0 && meadow[1] > 120.0 && meadow[2] < 90.0,
        "the meadow is yellow: {meadow:?}"
    );
    let (f0, f1) = (band(&before, 0.66, 0.78), band(&yellow, 0.66, 0.78));
    assert!(
        f1[1] > f1[0] + 25.0 && moved(f0, f1) < 12.0,
        "the forest stays green: {f0:?} → {f1:?}"
    );

    // The boat's lake has the sun's path on it, below the mountains: not sky.
    let src = painted("a red boat on a lake with mountains", 4, false);
    let before = decode(&src);
    let pink = edit(&src, "make the sky pink");
    let path = ((0.44, 0.50), (0.6, 0.75));
    let (p0, p1) = (patch(&before, path.0, path.1), patch(&pink, path.0, path.1));
    assert!(
        moved(p0, p1) < 8.0,
        "the sun's path turned: {p0:?} → {p1:?}"
    );
}

#[test]
fn night_sunset_and_day_change_the_whole_scene() {
    let src = painted(LIGHTHOUSE, 5, false);
    let before = decode(&src);
    let all0 = lum(band(&before, 0.0, 1.0));
    for instruction in ["make it night", "сделай ночь"] {
        let night = edit(&src, instruction);
        let all = lum(band(&night, 0.0, 1.0));
        assert!(all < all0 * 0.45, "{instruction}: {all0} → {all}");
        let top = band(&night, 0.0, 0.15);
        assert!(
            lum(top) < 40.0 && top[2] > top[0],
            "{instruction}: a dark blue sky: {top:?}"
        );
        // Stars: small bright points in the upper sky.
        let upper =
            image::imageops::crop_imm(&night, 0, 0, night.width(), night.height() / 4).to_image();
        let stars = count(&upper, |p| {
            lum([p[0] as f32, p[1] as f32, p[2] as f32]) > 150.0
        });
        assert!(stars > 20, "{instruction}: {stars} star pixels");
    }
    let sunset = edit(&src, "make it sunset");
    let low_sky = band(&sunset, 0.25, 0.35);
    assert!(
        low_sky[0] > low_sky[2] + 40.0,
        "a warm sky towards the horizon: {low_sky:?}"
    );
    // Day over a night picture lifts it.
    let night_png = painted("a castle on a hill at night", 2, false);
    let dark = lum(band(&decode(&night_png), 0.0, 1.0));
    let day = lum(band(&edit(&night_png, "make it daytime"), 0.0, 1.0));
    assert!(day > dark * 1.8, "day: {dark} → {day}");
}

#[test]
fn weather_rain_snow_and_fog() {
    let src = painted(LIGHTHOUSE, 5, false);
    let before = decode(&src);
    let white = |p: [i32; 3]| p.iter().all(|&c| c > 225);
    let lower = |img: &RgbaImage| {
        image::imageops::crop_imm(img, 0, img.height() * 3 / 4, img.width(), img.height() / 4)
            .to_image()
    };
    let (w0, w1) = (
        count(&lower(&before), white),
        count(&lower(&edit(&src, "make it snowy")), white),
    );
    assert!(
        w1 > w0 * 2 + 500,
        "snowflakes over the foreground: {w0} → {w1}"
    );
    let (w1, _) = (count(&lower(&edit(&src, "добавь снег")), white), ());
    assert!(w1 > w0 * 2 + 500, "снег: {w0} → {w1}");

    let spread = |img: &RgbaImage| {
        let m = lum(band(img, 0.0, 1.0));
        let v: f32 = img
            .pixels()
            .map(|p| (lum([f32::from(p[0]), f32::from(p[1]), f32::from(p[2])]) - m).powi(2))
            .sum::<f32>()
            / (img.width() * img.height()) as f32;
        v.sqrt()
    };
    let (s0, s1) = (spread(&before), spread(&edit(&src, "add fog")));
    assert!(s1 < s0 * 0.75, "fog flattens the contrast: {s0} → {s1}");
    let rain = edit(&src, "make it rainy");
    assert!(
        lum(band(&rain, 0.0, 1.0)) < lum(band(&before, 0.0, 1.0)) * 0.9,
        "rain darkens"
    );
}

#[test]
fn things_are_added_where_they_belong() {
    let src = painted(LIGHTHOUSE, 5, false);
    let before = decode(&src);
    let (w, h) = before.dimensions();

    // A moon: a compact round change in the upper sky, about 5.5 % of the short side across.
    for instruction in ["add a moon", "добавь луну"] {
        let after = edit(&src, instruction);
        let (n, bbox) = changed(&before, &after);
        let (x0, y0, x1, y1) = bbox.unwrap();
        let r = h as f32 * 0.055;
        assert!(y1 < h * 6 / 10, "{instruction}: in the upper sky: {bbox:?}");
        assert!(
            (n as f32) > std::f32::consts::PI * r * r * 0.7
                && (n as f32) < std::f32::consts::PI * (2.5 * r).powi(2),
            "{instruction}: a disc with its glow: {n} pixels, r {r}"
        );
        assert!(
            ((x1 - x0) as f32) < r * 6.0 && ((y1 - y0) as f32) < r * 6.0,
            "{bbox:?}"
        );
    }

    // A cat stands on the land in the lower part, sized like a foreground animal.
    let cat = edit(&src, "add a black cat");
    let (_, bbox) = changed(&before, &cat);
    let (_, y0, _, y1) = bbox.unwrap();
    assert!(y1 > h / 2 && y0 > h / 4, "on the ground: {bbox:?}");
    let tall = (y1 - y0) as f32 / h as f32;
    assert!((0.1..0.5).contains(&tall), "cat height {tall}");
    let dark = |p: [i32; 3]| p.iter().all(|&c| c < 50);
    assert!(
        count(&cat, dark) > count(&before, dark) + 1500,
        "a black cat"
    );

    // Three balloons in the sky: three separate changes above the middle.
    let balloons = edit(&src, "add three balloons");
    let mut cols = vec![false; w as usize];
    for (x, y, p) in balloons.enumerate_pixels() {
        let q = before.get_pixel(x, y);
        if (0..3).any(|k| p[k].abs_diff(q[k]) > 40) {
            assert!(y < h * 6 / 10, "a balloon low at {x},{y}");
            cols[x as usize] = true;
        }
    }
    let groups = cols.windows(2).filter(|p| !p[0] && p[1]).count() + usize::from(cols[0]);
    assert!(groups >= 3, "{groups} separate balloons");

    // A rainbow: colour bands in the sky, the foreground untouched.
    let rainbow = edit(&src, "add a rainbow");
    let (n, bbox) = changed(&before, &rainbow);
    assert!(n > 2000 && bbox.unwrap().1 < h / 2, "{n} {bbox:?}");
}

#[test]
fn things_are_added_to_an_uploaded_photo_too() {
    // A "photo": a blue sky with a soft gradient over green land, as a JPEG (no parameters).
    let img = RgbaImage::from_fn(600, 400, |_, y| {
        if y < 220 {
            image::Rgba([90 + (y / 4) as u8, 140 + (y / 4) as u8, 230, 255])
        } else {
            image::Rgba([60, 140 - ((y - 220) / 4) as u8, 50, 255])
        }
    });
    let mut jpeg = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgba8(img.clone())
        .to_rgb8()
        .write_to(&mut jpeg, image::ImageFormat::Jpeg)
        .unwrap();
    let jpeg = jpeg.into_inner();
    let before = decode(&jpeg);
    let sun = edit(&jpeg, "add the sun");
    let (_, bbox) = changed(&before, &sun);
    assert!(bbox.unwrap().3 < 220, "the sun is in the sky: {bbox:?}");
    let bright = |p: [i32; 3]| p[0] > 245 && p[1] > 230;
    assert!(count(&sun, bright) > 400, "a bright disc");
    let horse = edit(&jpeg, "add a horse");
    let (_, bbox) = changed(&before, &horse);
    assert!(
        bbox.unwrap().3 > 220,
        "the horse stands on the land: {bbox:?}"
    );
    let pink = edit(&jpeg, "make the sky pink");
    let top = band(&pink, 0.0, 0.3);
    assert!(top[0] > top[1] + 50.0, "{top:?}");
    let land = (band(&before, 0.7, 1.0), band(&pink, 0.7, 1.0));
    assert!(
        (0..3).all(|k| (land.0[k] - land.1[k]).abs() < 5.0),
        "{land:?}"
    );
}

#[test]
fn what_the_painter_placed_is_removed_or_replaced() {
    let prompt = "a red boat on a lake with mountains";
    for watermark in [false, true] {
        let src = painted(prompt, 4, watermark);
        let before = decode(&src);
        let reds = count(&before, red);
        assert!(reds > 300, "the red boat: {reds} red pixels");

        let gone = edit(&src, "remove the boat");
        assert!(count(&gone, red) * 10 < reds, "the boat is gone");
        let (n, _) = changed(&before, &gone);
        let total = (before.width() * before.height()) as usize;
        assert!(
            n < total / 5,
            "only the boat and its reflection changed: {n} of {total}"
        );

        let swan = edit(&src, "replace the boat with a swan");
        assert!(count(&swan, red) * 10 < reds, "no red boat");
        let white = |p: [i32; 3]| p.iter().all(|&c| c > 215);
        assert!(
            count(&swan, white) > count(&gone, white) + 200,
            "a white swan"
        );

        let ru = edit(&src, "убери лодку");
        assert!(count(&ru, red) * 10 < reds, "убери лодку");
    }

    // Words that say where a thing is are not removed or added with it.
    let src = painted(prompt, 4, false);
    let before = decode(&src);
    let gone = edit(&src, "remove the boat in the fog");
    assert!(
        count(&gone, red) * 10 < count(&before, red),
        "the boat is gone, no fog needed"
    );
    let cat = edit(&src, "add a cat in the snow");
    let (_, bbox) = changed(&before, &cat);
    let (_, y0, _, _) = bbox.unwrap();
    assert!(
        y0 > before.height() / 4,
        "only the cat changed, no snow over the sky: {bbox:?}"
    );

    // The sun of a sunset scene is the painter's too.
    let src = painted("a lighthouse by the sea at sunset with the sun", 1, false);
    let before = decode(&src);
    let (n, _) = changed(&before, &edit(&src, "remove the sun"));
    assert!(n > 200, "the sun was taken away: {n}");
}

#[test]
fn remove_and_replace_refuse_clearly_what_they_cannot_do() {
    let src = painted("a red boat on a lake", 4, false);
    let m = refused(&src, "remove the whale");
    assert!(m.contains("no whale"), "{m}");
    let m = refused(&src, "убери кита");
    assert!(m.contains("нет") && m.contains("whale"), "{m}");

    // A picture changed after the painter made it (re-encoded with a blur) is not its scene.
    let mut img = decode(&src);
    img = image::imageops::blur(&img, 3.0);
    let params = PngParameters {
        prompt: "a red boat on a lake".into(),
        seed: 4,
        model: "fast".into(),
        kind: "generate",
        details: None,
        scene: None,
    };
    let forged = render::encode::png_with_parameters(&img, &params).unwrap();
    let m = refused(&forged, "remove the boat");
    assert!(m.contains("changed after"), "{m}");

    // A small patch painted over (a signature) is a change too.
    let mut img = decode(&src);
    for y in 10..70 {
        for x in 10..70 {
            img.put_pixel(x, y, image::Rgba([255, 0, 255, 255]));
        }
    }
    let signed = render::encode::png_with_parameters(&img, &params).unwrap();
    let m = refused(&signed, "remove the boat");
    assert!(m.contains("changed after"), "{m}");

    // A picture of another version of Pictor (its painter may place things elsewhere): the same
    // pixels and parameters, only the Version line says otherwise.
    let text = render::encode::read_parameters(&src).unwrap();
    let ours = concat!("Version: pictor ", env!("CARGO_PKG_VERSION"));
    assert!(text.contains(ours), "{text}");
    let older = text.replace(ours, "Version: pictor 0.0.1");
    let img = decode(&src);
    let mut bytes = Vec::new();
    let mut enc = png::Encoder::new(&mut bytes, img.width(), img.height());
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    enc.add_text_chunk("parameters".into(), older).unwrap();
    let mut w = enc.write_header().unwrap();
    w.write_image_data(img.as_raw()).unwrap();
    w.finish().unwrap();
    let m = refused(&bytes, "remove the boat");
    assert!(m.contains("another version"), "{m}");
    let m = refused(&bytes, "убери лодку");
    assert!(m.contains("другая версия"), "{m}");

    // A photo without the painter's parameters.
    let mut jpeg = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgba8(decode(&src))
        .to_rgb8()
        .write_to(&mut jpeg, image::ImageFormat::Jpeg)
        .unwrap();
    let m = refused(&jpeg.into_inner(), "remove the boat");
    assert!(m.contains("built-in painter"), "{m}");
}

#[test]
fn an_instruction_not_understood_gets_a_short_answer_in_its_language() {
    let src = painted("a red boat on a lake", 4, false);
    let en = refused(&src, "qwerty asdf");
    assert!(en.len() < 320, "short: {en}");
    assert!(
        en.contains("make the sky pink") && en.contains("add a moon"),
        "{en}"
    );
    let ru = refused(&src, "сделай красиво");
    assert!(ru.contains("добавь луну") && !ru.contains("Try"), "{ru}");
    assert!(ru.chars().count() < 260, "short: {ru}");
}

/// The sheet of content edits in docs/painter.md: each row a picture and what the edits made of it
/// (`PICTOR_WRITE_GALLERY=1 cargo test --release --test content_edits -- --ignored edits_sheet`).
#[test]
#[ignore = "writes the gallery sheet"]
fn edits_sheet() {
    let rows: [(&str, u64, [&str; 4]); 3] = [
        (
            LIGHTHOUSE,
            5,
            [
                "make the sky pink",
                "add a moon and make it night",
                "make it sunset and add birds",
                "replace the lighthouse with a castle",
            ],
        ),
        (
            "a red boat on a lake with mountains",
            4,
            [
                "remove the boat",
                "replace the boat with a swan",
                "make it snowy",
                "добавь радугу",
            ],
        ),
        (
            "a cabin in a green meadow by a forest at noon",
            2,
            [
                "add a horse and a dog",
                "make the grass yellow",
                "add fog",
                "make it rainy",
            ],
        ),
    ];
    let mut cells = Vec::new();
    for (prompt, seed, edits) in &rows {
        let src = painted(prompt, *seed, false);
        cells.push((prompt.to_string(), decode(&src)));
        for e in edits {
            cells.push((format!("→ {e}"), edit(&src, e)));
        }
    }
    sheet::write("edits-sheet.png", 5, (300, 200, 24), &cells);
}
