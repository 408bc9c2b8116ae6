//! Instruction edits end to end (upload bytes in, picture out): every operation changes the
//! picture in its defined way, in English and Russian, combined, and gibberish is refused with a
//! few examples of what Pictor understands.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The painter and the shared types under one name, as the server shows them (`pictor::render`).
mod render {
    pub use pictor_core::*;
    pub use pictor_painter::*;
}

use render::{EditSpec, ProceduralRenderer, RenderError, Renderer};

/// A 120x80 colourful test picture with a red marker in the top-left corner.
fn source() -> image::RgbaImage {
    let mut img = image::RgbaImage::from_fn(120, 80, |x, y| {
        image::Rgba([(x * 2) as u8, (y * 3) as u8, ((x + y) % 256) as u8, 255])
    });
    for y in 0..4 {
        for x in 0..4 {
            img.put_pixel(x, y, image::Rgba([255, 0, 0, 255]));
        }
    }
    img
}

fn encoded(img: &image::RgbaImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgba8(img.clone())
        .to_rgb8()
        .write_to(&mut out, format)
        .unwrap();
    out.into_inner()
}

fn edit(instruction: &str) -> image::RgbaImage {
    try_edit(instruction).unwrap()
}

fn try_edit(instruction: &str) -> Result<image::RgbaImage, RenderError> {
    let pic = ProceduralRenderer.edit(&EditSpec {
        source: encoded(&source(), image::ImageFormat::Png),
        instruction: instruction.into(),
        seed: 1,
        mask: None,
        loras: Vec::new(),
    })?;
    // Round-trip through the public encoder to get at the pixels.
    let params = render::PngParameters {
        prompt: instruction.into(),
        seed: 1,
        model: "fast".into(),
        kind: "edit",
        details: None,
        scene: None,
    };
    let png = render::finish(pic, false, &params).unwrap();
    Ok(image::load_from_memory(&png).unwrap().to_rgba8())
}

fn mean(img: &image::RgbaImage) -> [f64; 3] {
    let mut s = [0f64; 3];
    for p in img.pixels() {
        for i in 0..3 {
            s[i] += f64::from(p[i]);
        }
    }
    let n = f64::from(img.width() * img.height());
    s.map(|v| v / n)
}

fn saturation(img: &image::RgbaImage) -> f64 {
    img.pixels()
        .map(|p| f64::from(p[0].max(p[1]).max(p[2]) - p[0].min(p[1]).min(p[2])))
        .sum::<f64>()
        / f64::from(img.width() * img.height())
}

fn distinct_colors(img: &image::RgbaImage) -> usize {
    let mut v: Vec<[u8; 3]> = img.pixels().map(|p| [p[0], p[1], p[2]]).collect();
    v.sort_unstable();
    v.dedup();
    v.len()
}

#[test]
fn grayscale_sepia_invert() {
    for i in ["make it black and white", "сделай чёрно-белым"] {
        assert!(
            edit(i).pixels().all(|p| p[0] == p[1] && p[1] == p[2]),
            "{i}"
        );
    }
    for i in ["sepia", "сепия"] {
        assert!(
            edit(i).pixels().all(|p| p[0] >= p[1] && p[1] >= p[2]),
            "{i}"
        );
    }
    for i in ["invert the colors", "негатив"] {
        assert_eq!(edit(i).get_pixel(1, 1).0, [0, 255, 255, 255], "{i}");
    }
}

#[test]
fn rotate_flip_crop_resize_change_the_geometry() {
    for i in ["rotate 90 degrees clockwise", "поверни на 90 градусов"] {
        let img = edit(i);
        assert_eq!(img.dimensions(), (80, 120), "{i}");
        assert_eq!(img.get_pixel(79, 0).0, [255, 0, 0, 255], "{i}");
    }
    assert_eq!(edit("rotate left").get_pixel(0, 119).0, [255, 0, 0, 255]);
    assert_eq!(edit("upside down").get_pixel(119, 79).0, [255, 0, 0, 255]);
    for i in ["mirror it", "отрази зеркально"] {
        assert_eq!(edit(i).get_pixel(119, 0).0, [255, 0, 0, 255], "{i}");
    }
    for i in ["crop to a center square", "обрежь до квадрата"] {
        let img = edit(i);
        assert_eq!(img.dimensions(), (80, 80), "{i}");
    }
    assert_eq!(edit("crop to 16:9").dimensions(), (120, 68));
    for i in ["half the size", "уменьши вдвое"] {
        assert_eq!(edit(i).dimensions(), (60, 40), "{i}");
    }
    assert_eq!(edit("resize to 240 wide").dimensions(), (240, 160));
    assert_eq!(edit("scale to 50%").dimensions(), (60, 40));
    assert_eq!(edit("make it twice as big").dimensions(), (240, 160));
    // Sizes stay sane: no more than 4x up.
    assert_eq!(edit("resize to 100000 wide").dimensions(), (480, 320));
}

#[test]
fn tone_operations_move_the_statistics() {
    let src = source();
    let m0 = mean(&src);
    let sum = |m: [f64; 3]| m[0] + m[1] + m[2];
    assert!(sum(mean(&edit("brighter"))) > sum(m0) + 50.0);
    assert!(sum(mean(&edit("темнее"))) < sum(m0) - 50.0);
    assert!(saturation(&edit("more saturated")) > saturation(&src) * 1.2);
    assert!(saturation(&edit("less saturated")) < saturation(&src) * 0.8);
    let warm = mean(&edit("warmer"));
    let cool = mean(&edit("холоднее"));
    assert!(warm[0] - warm[2] > m0[0] - m0[2] + 10.0);
    assert!(cool[0] - cool[2] < m0[0] - m0[2] - 10.0);
    assert!(distinct_colors(&edit("posterize")) <= 125);
    assert!(distinct_colors(&edit("pixelate")) < distinct_colors(&src) / 4);
}

#[test]
fn vignette_border_and_text() {
    let src = source();
    let v = edit("add a strong vignette");
    let corner = |img: &image::RgbaImage| u32::from(img.get_pixel(119, 79)[1]);
    assert!(corner(&v) < corner(&src) / 2);
    assert_eq!(v.get_pixel(60, 40), src.get_pixel(60, 40));
    for (i, color) in [
        ("add a red border", [210, 30, 30]),
        ("белая рамка", [255, 255, 255]),
    ] {
        let img = edit(i);
        for (x, y) in [(0, 0), (119, 0), (0, 79), (119, 79), (60, 0), (0, 40)] {
            let p = img.get_pixel(x, y);
            assert_eq!([p[0], p[1], p[2]], color, "{i} at {x},{y}");
        }
        assert_eq!(img.get_pixel(60, 40), src.get_pixel(60, 40), "{i}");
    }
    let t = edit("add text \"HELLO\" at the top");
    let top_changed = (0..120)
        .flat_map(|x| (0..30).map(move |y| (x, y)))
        .filter(|&(x, y)| t.get_pixel(x, y) != src.get_pixel(x, y))
        .count();
    let bottom_changed = (0..120)
        .flat_map(|x| (55..80).map(move |y| (x, y)))
        .filter(|&(x, y)| t.get_pixel(x, y) != src.get_pixel(x, y))
        .count();
    assert!(
        top_changed > 200 && bottom_changed == 0,
        "{top_changed} {bottom_changed}"
    );
    let ru = edit("добавь надпись «Привет» внизу");
    assert_ne!(ru, src);
}

#[test]
fn blur_sharpen_and_restyle() {
    let src = source();
    let b = edit("blur it a lot");
    assert_eq!(b.dimensions(), src.dimensions());
    assert_ne!(b, src);
    assert_ne!(edit("sharpen"), src);
    for i in [
        "make it a watercolor",
        "as an oil painting",
        "pencil sketch",
        "pixel art",
        "low poly",
        "neon",
        "flat poster",
        "japanese woodblock print",
        "в стиле акварели",
    ] {
        let img = edit(i);
        assert_eq!(img.dimensions(), src.dimensions(), "{i}");
        assert_ne!(img, src, "{i}");
    }
}

#[test]
fn combined_instructions_apply_in_order() {
    let img = edit("make it black and white, crop it to a square and add a vignette");
    assert_eq!(img.dimensions(), (80, 80));
    assert!(img.pixels().all(|p| p[0] == p[1] && p[1] == p[2]));
    let ru = edit("сделай чёрно-белым, поверни вправо и добавь рамку");
    assert_eq!(ru.dimensions(), (80, 120));
    assert!(ru.pixels().all(|p| p[0] == p[1] && p[1] == p[2]));
    assert_eq!(ru.get_pixel(0, 0).0, [255, 255, 255, 255]);
}

#[test]
fn jpeg_and_webp_uploads_are_edited_too() {
    for format in [image::ImageFormat::Jpeg, image::ImageFormat::WebP] {
        let pic = ProceduralRenderer
            .edit(&EditSpec {
                source: encoded(&source(), format),
                instruction: "rotate 90".into(),
                seed: 1,
                mask: None,
                loras: Vec::new(),
            })
            .unwrap();
        assert_eq!((pic.width(), pic.height()), (80, 120), "{format:?}");
    }
}

#[test]
fn gibberish_is_not_understood_and_the_message_gives_a_few_examples() {
    for (i, example) in [
        ("qwerty asdf", "make it black and white"),
        ("сделай красиво", "сделай чёрно-белым"),
        ("", "crop it to a square"),
    ] {
        match try_edit(i) {
            Err(RenderError::EditNotUnderstood(msg)) => {
                assert!(msg.contains(example), "{example} missing from {msg}");
                assert!(msg.chars().count() < 300, "short: {msg}");
            }
            other => panic!("{i:?} gave {other:?}"),
        }
    }
}
