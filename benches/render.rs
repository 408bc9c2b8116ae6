//! Renderer benchmarks (`cargo bench --bench render`), one core, PNG encoding included:
//! `fast` 1024², `artist` 1536², `0.2plus` 2048² (a busy scene: objects, water, reflections,
//! the artist/0.2plus finishing pass), every style pass at `fast`, content edits on a `fast`
//! picture, and the edit pipeline on a 12 MP JPEG upload
//! (decode + ops + encode). Each is paired with the floor: PNG-encoding the same number of pixels.
//! Numbers go into the README; nothing here asserts a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use pictor::render::{
    EditSpec, GenerateSpec, Model, Picture, PngParameters, ProceduralRenderer, Ratio, Renderer,
    finish,
};

const PROMPT: &str = "a lighthouse on a cliff by the sea at sunset, three sailboats, birds";

fn params(model: Model) -> PngParameters {
    PngParameters {
        prompt: PROMPT.into(),
        seed: 7,
        model: model.id().into(),
        kind: "generate",
        details: None,
        scene: None,
    }
}

fn generate(model: Model, prompt: &str) -> Vec<u8> {
    let pic = ProceduralRenderer
        .generate(&GenerateSpec {
            noise: None,
            loras: Vec::new(),
            prompt: prompt.into(),
            model,
            ratio: Ratio::Square,
            seed: 7,
        })
        .unwrap();
    finish(pic, true, &params(model)).unwrap()
}

/// A noisy-enough picture of the given size for the encoding floor.
fn pixels(w: u32, h: u32) -> Vec<u8> {
    let img = pictor::render::procedural::render(PROMPT, Model::Fast, Ratio::Square, 7);
    let small = img.as_raw();
    let mut out = Vec::with_capacity((w * h * 4) as usize);
    for y in 0..h {
        for x in 0..w {
            let i = (((y % 1024) * 1024 + (x % 1024)) * 4) as usize;
            out.extend_from_slice(&small[i..i + 4]);
        }
    }
    out
}

fn floor(c: &mut Criterion, name: &str, w: u32, h: u32) {
    let raw = pixels(w, h);
    c.bench_function(name, |b| {
        b.iter(|| {
            let pic = Picture::from_rgba(w, h, raw.clone()).unwrap();
            black_box(finish(pic, false, &params(Model::Fast)).unwrap())
        })
    });
}

/// A 4000x3000 JPEG (12 MP) made from a rendered picture, like a phone photo.
fn jpeg_12mp() -> Vec<u8> {
    let raw = pixels(4000, 3000);
    let img = image::RgbaImage::from_raw(4000, 3000, raw).unwrap();
    let rgb = image::DynamicImage::ImageRgba8(img).to_rgb8();
    let mut out = std::io::Cursor::new(Vec::new());
    rgb.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
    out.into_inner()
}

fn benches(c: &mut Criterion) {
    c.bench_function("fast 1024x1024 (render + watermark + PNG)", |b| {
        b.iter(|| black_box(generate(Model::Fast, PROMPT)))
    });
    floor(c, "floor: PNG encode 1024x1024", 1024, 1024);
    // Every style pass at `fast` (the scene, the pass, watermark and PNG).
    for style in pictor::render::Style::ALL {
        c.bench_function(&format!("fast 1024x1024 style {}", style.id()), |b| {
            b.iter(|| {
                let pic = pictor::render::procedural::render_picture(
                    PROMPT,
                    Model::Fast,
                    Ratio::Square,
                    7,
                    Some(style),
                );
                black_box(finish(pic, true, &params(Model::Fast)).unwrap())
            })
        });
    }
    // Content edits on a `fast` picture (PNG in, PNG out): a region recolour, night, adding a
    // thing, and removing one (which paints the picture twice: the check and the result).
    let source = generate(Model::Fast, PROMPT);
    for instruction in [
        "make the sky pink",
        "make it night",
        "add a horse",
        "remove the lighthouse",
    ] {
        c.bench_function(&format!("edit fast 1024x1024: {instruction}"), |b| {
            b.iter(|| {
                let pic = ProceduralRenderer
                    .edit(&EditSpec {
                        source: source.clone(),
                        instruction: instruction.into(),
                        seed: 1,
                        mask: None,
                        loras: Vec::new(),
                    })
                    .unwrap();
                black_box(finish(pic, true, &params(Model::Fast)).unwrap())
            })
        });
    }
    c.bench_function("artist 1536x1536 (render + watermark + PNG)", |b| {
        b.iter(|| black_box(generate(Model::Artist, PROMPT)))
    });
    floor(c, "floor: PNG encode 1536x1536", 1536, 1536);
    c.bench_function("0.2plus 2048x2048 (render + watermark + PNG)", |b| {
        b.iter(|| black_box(generate(Model::Plus, PROMPT)))
    });
    floor(c, "floor: PNG encode 2048x2048", 2048, 2048);

    let jpeg = jpeg_12mp();
    let instruction = "make it black and white, add a vignette and a white border";
    c.bench_function(
        "edit 12 MP JPEG (decode + grayscale, vignette, border + PNG)",
        |b| {
            b.iter(|| {
                let pic = ProceduralRenderer
                    .edit(&EditSpec {
                        source: jpeg.clone(),
                        instruction: instruction.into(),
                        seed: 1,
                        mask: None,
                        loras: Vec::new(),
                    })
                    .unwrap();
                black_box(finish(pic, true, &params(Model::Fast)).unwrap())
            })
        },
    );
    floor(c, "floor: PNG encode 4000x3000", 4000, 3000);
}

criterion_group! {
    name = render;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = benches
}
criterion_main!(render);
