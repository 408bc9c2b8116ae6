//! Edits with models, end to end through the real binary: tiny InstructPix2Pix (8-channel UNet)
//! and inpainting (9-channel) models made like the parity fixtures', installed with
//! `pictor models add` and mapped to the edit tier while the server runs; `POST /v1/edit` with
//! and without a mask; a mixed instruction (the model's part, then the exact part); masks
//! refused without a charge; `pictor render --edit` with a model and its `--from-png` re-render.
#![cfg(feature = "diffusion")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{Api, ChildServer, assert_error, cli_json, run_cli, spawn_server};
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion")
}

fn copy_tree(from: &Path, to: &Path, skip: &str) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap();
        if name == skip {
            continue;
        }
        if p.is_dir() {
            copy_tree(&p, &to.join(name), "");
        } else {
            std::fs::copy(&p, to.join(name)).unwrap();
        }
    }
}

/// The tiny SD 1.5 model with the edits fixture's `unet` (`ip2p_unet`, `inpaint_unet`), as a
/// diffusers folder under `dir`.
fn model_with_unet(dir: &Path, unet: &str) -> PathBuf {
    let to = dir.join(unet.replace("_unet", ""));
    copy_tree(&fixtures().join("sd15/model"), &to, "unet");
    copy_tree(&fixtures().join("edits").join(unet), &to.join("unet"), "");
    to
}

/// A 96×64 picture with structure everywhere.
fn source() -> image::RgbaImage {
    image::RgbaImage::from_fn(96, 64, |x, y| {
        image::Rgba([
            (x * 2) as u8,
            (255 - y * 3) as u8,
            if (x + y) / 8 % 2 == 0 { 60 } else { 200 },
            255,
        ])
    })
}

fn png(img: &image::DynamicImage) -> Vec<u8> {
    let mut out = Vec::new();
    img.write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

/// Whether (x, y) is in the area the masks mark: columns 24..72, rows 16..48.
fn inside(x: u32, y: u32) -> bool {
    (24..72).contains(&x) && (16..48).contains(&y)
}

/// A mask of `w`×`h` marking [`inside`]: OpenAI's kind (the picture, transparent there) or a
/// black-and-white one (white there).
fn mask(w: u32, h: u32, transparent: bool) -> Vec<u8> {
    if transparent {
        let src = source();
        png(&image::DynamicImage::ImageRgba8(image::RgbaImage::from_fn(
            w,
            h,
            |x, y| {
                let mut p = *src.get_pixel(x % 96, y % 64);
                p[3] = if inside(x, y) { 0 } else { 255 };
                p
            },
        )))
    } else {
        png(&image::DynamicImage::ImageLuma8(image::GrayImage::from_fn(
            w,
            h,
            |x, y| image::Luma([if inside(x, y) { 255 } else { 0 }]),
        )))
    }
}

/// `POST /v1/edit`: (status, answer).
async fn edit(
    server: &ChildServer,
    key: &str,
    instruction: &str,
    mask: Option<Vec<u8>>,
) -> (u16, Value) {
    let part = |b: Vec<u8>, name: &str| {
        reqwest::multipart::Part::bytes(b)
            .file_name(name.to_owned())
            .mime_str("image/png")
            .unwrap()
    };
    let mut form = reqwest::multipart::Form::new()
        .text("prompt", instruction.to_owned())
        .part(
            "image",
            part(png(&image::DynamicImage::ImageRgba8(source())), "s.png"),
        );
    if let Some(m) = mask {
        form = form.part("mask", part(m, "m.png"));
    }
    server.edit_form(key, form).await
}

/// An edit to its picture and parameters.
async fn edited(
    server: &ChildServer,
    key: &str,
    instruction: &str,
    mask: Option<Vec<u8>>,
) -> (image::RgbaImage, String) {
    let (status, r) = edit(server, key, instruction, mask).await;
    assert_eq!(status, 202, "{instruction}: {r}");
    let done = server.finish(key, r["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "done", "{instruction}: {done}");
    let bytes = server.fetch(done["photo_url"].as_str().unwrap()).await;
    let params = pictor::render::encode::read_parameters(&bytes).unwrap();
    (image::load_from_memory(&bytes).unwrap().to_rgba8(), params)
}

/// Pixels outside the mask are the source's exactly; inside, the model changed them.
fn check_masked(img: &image::RgbaImage, what: &str) {
    let src = source();
    assert_eq!(img.dimensions(), src.dimensions(), "{what}");
    let (mut changed, mut kept) = (0, 0);
    for (x, y, p) in img.enumerate_pixels() {
        let s = src.get_pixel(x, y);
        if inside(x, y) {
            changed += usize::from(p.0[..3] != s.0[..3]);
        } else {
            assert_eq!(
                p.0[..3],
                s.0[..3],
                "{what}: ({x}, {y}) outside the mask changed"
            );
            kept += 1;
        }
    }
    assert!(
        kept > 0 && changed > 48 * 32 / 2,
        "{what}: {changed} pixels changed inside the mask"
    );
}

#[tokio::test]
async fn edit_models_follow_instructions_and_masks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    let ip2p = model_with_unet(dir.path(), "ip2p_unet");
    let inpaint = model_with_unet(dir.path(), "inpaint_unet");
    for (name, path) in [
        ("tinyip2p", ip2p.clone()),
        ("tinyinpaint", inpaint.clone()),
        ("tiny", fixtures().join("sd15/model")),
    ] {
        let added = cli_json(
            &d,
            &["models", "add", name, path.to_str().unwrap(), "--json"],
            None,
        );
        assert_eq!(added["model"]["name"], name, "{added}");
    }
    let listed = cli_json(&d, &["models", "list", "--json"], None);
    let role = |n: &str| {
        listed["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == n)
            .unwrap()["role"]
            .clone()
    };
    assert_eq!(role("tinyip2p"), "instruct", "{listed}");
    assert_eq!(role("tinyinpaint"), "inpaint", "{listed}");
    // PRO: no watermark, so the pixels outside a mask can be compared exactly.
    cli_json(
        &d,
        &[
            "user",
            "add",
            "--email",
            "e@example.com",
            "--credits",
            "40",
            "--pro",
            "--json",
        ],
        None,
    );
    let key = cli_json(
        &d,
        &["key", "issue", "--email", "e@example.com", "--json"],
        None,
    )["api_key"]
        .as_str()
        .unwrap()
        .to_owned();
    let server = spawn_server(&d, &[]);
    let balance = |me: &Value| me["balance"].as_i64().unwrap();
    let start = balance(&server.me(&key).await);

    // An edit model cannot draw a generation tier: refused, saying where it belongs.
    let (code, _, err) = run_cli(&d, &["models", "map", "fast", "tinyip2p"], None);
    assert_ne!(code, 0);
    assert!(err.contains("edit tier"), "{err}");

    // InstructPix2Pix on the edit tier: its preset (Euler a, CFG 7.5, image guidance 1.5).
    let mapped = cli_json(
        &d,
        &[
            "models", "map", "edit", "tinyip2p", "--steps", "3", "--json",
        ],
        None,
    );
    assert_eq!(mapped["settings"]["image_guidance"], 1.5, "{mapped}");
    assert_eq!(mapped["settings"]["sampler"], "euler_a", "{mapped}");
    let (img, params) = edited(&server, &key, "make it a snowy winter day", None).await;
    assert_eq!(img.dimensions(), (96, 64));
    for want in [
        "Edit mode: InstructPix2Pix",
        "Image CFG scale: 1.5",
        "Steps: 3",
        "Sampler: Euler a",
        "Model: tinyip2p",
    ] {
        assert!(params.contains(want), "{want}: {params}");
    }
    assert!(!params.contains("Denoising strength"), "{params}");
    // A mixed instruction: the model's edit, then the exact part, both in the parameters.
    let (img, params) = edited(
        &server,
        &key,
        "make it a snowy winter day and rotate it 90 degrees",
        None,
    )
    .await;
    assert_eq!(img.dimensions(), (64, 96), "rotated");
    assert!(params.contains("Exact edits: rotate 90°"), "{params}");
    assert!(params.contains("Edit mode: InstructPix2Pix"), "{params}");
    // With a mask (OpenAI's kind), only the masked area changes.
    let (img, _) = edited(
        &server,
        &key,
        "make it a snowy winter day",
        Some(mask(96, 64, true)),
    )
    .await;
    check_masked(&img, "InstructPix2Pix, masked");

    // An inpainting model repaints the masked area.
    cli_json(
        &d,
        &[
            "models",
            "map",
            "edit",
            "tinyinpaint",
            "--steps",
            "3",
            "--json",
        ],
        None,
    );
    let (img, params) = edited(&server, &key, "a red car", Some(mask(96, 64, true))).await;
    assert!(params.contains("Edit mode: inpainting"), "{params}");
    check_masked(&img, "inpainting");
    // A text model: masked img2img, with a black-and-white mask.
    cli_json(
        &d,
        &["models", "map", "edit", "tiny", "--steps", "3", "--json"],
        None,
    );
    let (img, params) = edited(&server, &key, "a red car", Some(mask(96, 64, false))).await;
    assert!(params.contains("Edit mode: masked img2img"), "{params}");
    check_masked(&img, "masked img2img");
    let done = 5;

    // Masks that cannot be used are refused before anything is charged or stored.
    for (m, why) in [
        (mask(64, 64, false), "size"),
        (
            png(&image::DynamicImage::ImageLuma8(image::GrayImage::new(
                96, 64,
            ))),
            "nothing",
        ),
        (b"not an image".to_vec(), "PNG"),
        (Vec::new(), "empty"),
    ] {
        let got = edit(&server, &key, "a red car", Some(m)).await;
        assert_error(&got, 400, "invalid_image");
        let msg = got.1["error"].as_str().unwrap_or_default().to_owned();
        assert!(msg.contains("mask"), "{why}: {msg}");
    }
    let jobs = server.get(&key, "/api/pictor/v1/jobs").await.1;
    assert_eq!(jobs["jobs"].as_array().map(Vec::len), Some(done), "{jobs}");
    let models: Value = server.get(&key, "/api/pictor/v1/models").await.1;
    let price = models["edit_price"].as_i64().unwrap();
    assert_eq!(balance(&server.me(&key).await), start - done as i64 * price);
    let sources: Vec<_> = std::fs::read_dir(d.join("sources")).unwrap().collect();
    assert!(
        sources.is_empty(),
        "uploads and masks are deleted with their jobs: {sources:?}"
    );
}

#[test]
fn render_edits_with_a_model_and_re_renders_from_the_png() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    let ip2p = model_with_unet(dir.path(), "ip2p_unet");
    let inpaint = model_with_unet(dir.path(), "inpaint_unet");
    let src = dir.path().join("src.png");
    std::fs::write(&src, png(&image::DynamicImage::ImageRgba8(source()))).unwrap();
    let m = dir.path().join("mask.png");
    std::fs::write(&m, mask(96, 64, false)).unwrap();
    let out = |n: &str| dir.path().join(n);
    let s = |p: &Path| p.to_str().unwrap().to_owned();

    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--model",
            &s(&ip2p),
            "--edit",
            &s(&src),
            "--instruction",
            "make it snowy",
            "--steps",
            "3",
            "--seed",
            "5",
            "--image-guidance",
            "1.2",
            "--out",
            &s(&out("a.png")),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("InstructPix2Pix edit"), "{err}");
    let a = std::fs::read(out("a.png")).unwrap();
    let params = pictor::render::encode::read_parameters(&a).unwrap();
    for want in [
        "make it snowy",
        "Image CFG scale: 1.2",
        "Edit mode: InstructPix2Pix",
        "Seed: 5",
        "Steps: 3",
        "Edit: yes",
    ] {
        assert!(params.contains(want), "{want}: {params}");
    }
    assert_eq!(
        image::load_from_memory(&a).unwrap().to_rgba8().dimensions(),
        (96, 64)
    );

    // The PNG re-renders the edit bit for bit, given its source.
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--from-png",
            &s(&out("a.png")),
            "--model",
            &s(&ip2p),
            "--edit",
            &s(&src),
            "--out",
            &s(&out("b.png")),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read(out("b.png")).unwrap(),
        a,
        "the re-render differs"
    );
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--from-png",
            &s(&out("a.png")),
            "--model",
            &s(&ip2p),
            "--out",
            &s(&out("c.png")),
        ],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("--edit"), "{err}");

    // Masked with the inpainting model: outside the mask, the source's own pixels.
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--model",
            &s(&inpaint),
            "--edit",
            &s(&src),
            "--instruction",
            "a red car",
            "--mask",
            &s(&m),
            "--steps",
            "3",
            "--out",
            &s(&out("d.png")),
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let d_png = std::fs::read(out("d.png")).unwrap();
    check_masked(
        &image::load_from_memory(&d_png).unwrap().to_rgba8(),
        "render --mask",
    );
    assert!(
        pictor::render::encode::read_parameters(&d_png)
            .unwrap()
            .contains("Edit mode: inpainting")
    );
    // A mask of another size is refused before the model loads.
    std::fs::write(&m, mask(64, 64, false)).unwrap();
    let (code, _, err) = run_cli(
        &d,
        &[
            "render",
            "--model",
            &s(&inpaint),
            "--edit",
            &s(&src),
            "--instruction",
            "x",
            "--mask",
            &s(&m),
            "--out",
            &s(&out("e.png")),
        ],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("mask") && err.contains("size"), "{err}");
}
