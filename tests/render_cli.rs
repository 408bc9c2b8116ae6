//! `pictor render`: a picture from a prompt (with a forced style and a thumbnail size) and an
//! edit of an image file, no server or data folder.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[cfg(feature = "diffusion")]
use std::path::{Path, PathBuf};
use std::process::Command;

fn pictor(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pictor"))
        .arg("--init")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn render_writes_a_png_with_parameters_and_edits_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lighthouse.png");
    let o = pictor(&[
        "render",
        "--prompt",
        "a lighthouse at sunset",
        "--ratio",
        "16:9",
        "--seed",
        "7",
        "--style",
        "watercolor",
        "--max-side",
        "320",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&out).unwrap();
    let img = image::load_from_memory(&bytes).unwrap();
    assert_eq!((img.width(), img.height()), (320, 180));
    let params = pictor::render::encode::read_parameters(&bytes).unwrap();
    assert!(params.starts_with("a lighthouse at sunset\n") && params.contains("Seed: 7"));

    let edited = dir.path().join("edited.png");
    let o = pictor(&[
        "render",
        "--edit",
        out.to_str().unwrap(),
        "--instruction",
        "make it black and white and rotate it 90 degrees",
        "--out",
        edited.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let img = image::open(&edited).unwrap().to_rgba8();
    assert_eq!(img.dimensions(), (180, 320));
    assert!(img.pixels().all(|p| p[0] == p[1] && p[1] == p[2]));

    let o = pictor(&[
        "render",
        "--prompt",
        "x",
        "--style",
        "cubism",
        "--out",
        "/dev/null",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown style"));
}

/// The tiny SD 1.5 model with Stable Diffusion 1.5's own scheduler configuration, as the
/// sampler references were made (`tools/sd-fixtures/samplers.py`).
#[cfg(feature = "diffusion")]
fn sd15_with_sd15_scheduler(dir: &Path) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion");
    let to = dir.join("model");
    copy_dir(&root.join("sd15/model"), &to);
    std::fs::copy(
        root.join("samplers/scheduler_config.json"),
        to.join("scheduler/scheduler_config.json"),
    )
    .unwrap();
    to
}

#[cfg(feature = "diffusion")]
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

/// Largest per-channel difference (0..255) between a PNG and a float 0..1 HWC reference.
#[cfg(feature = "diffusion")]
fn max_pixel_diff(png: &Path, reference: &pictor::render::diffusion::candle::Tensor) -> u8 {
    let img = image::open(png).unwrap().to_rgb8();
    let want = reference.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert_eq!(img.as_raw().len(), want.len(), "picture size");
    img.as_raw()
        .iter()
        .zip(&want)
        .map(|(&g, &w)| (f32::from(g) - w * 255.0).abs().round() as u8)
        .max()
        .unwrap()
}

/// `pictor render` with a diffusion model gives the diffusers pipeline's picture for every
/// sampler and both noise sources (within 2/255 per channel), writes A1111-format parameters,
/// and `--from-png` re-renders its own PNG exactly.
#[cfg(feature = "diffusion")]
#[test]
fn diffusion_render_matches_diffusers_for_every_sampler_and_rerenders_from_png() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion/samplers");
    let dir = tempfile::tempdir().unwrap();
    let model = sd15_with_sd15_scheduler(dir.path());
    let refs = pictor::render::diffusion::candle::safetensors::load(
        root.join("reference.safetensors"),
        &pictor::render::diffusion::candle::Device::Cpu,
    )
    .unwrap();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("reference.json")).unwrap())
            .unwrap();
    let data = dir.path().join("data");
    for (case, c) in meta["cases"].as_object().unwrap() {
        let out = dir.path().join(format!("{case}.png"));
        let mut args = vec![
            "render".to_owned(),
            "--data-dir".into(),
            data.to_str().unwrap().into(),
            "--model".into(),
            model.to_str().unwrap().into(),
            "--prompt".into(),
            meta["prompt"].as_str().unwrap().into(),
            "--negative-prompt".into(),
            meta["negative_prompt"].as_str().unwrap().into(),
            "--sampler".into(),
            c["sampler"].as_str().unwrap().into(),
            "--steps".into(),
            meta["steps"].to_string(),
            "--guidance".into(),
            meta["guidance"].to_string(),
            "--width".into(),
            "64".into(),
            "--height".into(),
            "64".into(),
            "--seed".into(),
            meta["seed"].to_string(),
            "--noise".into(),
            c["noise"].as_str().unwrap().into(),
            "--out".into(),
            out.to_str().unwrap().into(),
        ];
        match c["karras"].as_bool() {
            Some(true) => args.extend(["--schedule".into(), "karras".into()]),
            Some(false) => args.extend(["--schedule".into(), "uniform".into()]),
            None => {}
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = pictor(&args);
        assert!(
            o.status.success(),
            "{case}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let d = max_pixel_diff(&out, &refs[&format!("{case}_image")]);
        println!("{case}: max diff {d}/255");
        assert!(d <= 2, "{case}: {d}/255 from diffusers");

        // The PNG says how it was made, in A1111's words, and re-renders to the same pixels.
        let text = pictor::render::encode::read_parameters(&std::fs::read(&out).unwrap()).unwrap();
        let info = pictor::render::infotext::Infotext::parse(&text);
        assert_eq!(info.get("Seed"), Some(meta["seed"].to_string().as_str()));
        assert_eq!(info.get("Steps"), Some("8"));
        assert_eq!(info.get("CFG scale"), Some("7.5"));
        assert_eq!(info.get("Size"), Some("64x64"));
        assert_eq!(info.negative_prompt, "blurry");
        let rng = if c["noise"] == "a1111-gpu" {
            "NV"
        } else {
            "CPU"
        };
        assert_eq!(info.get("RNG"), Some(rng), "{text}");
        let again = dir.path().join(format!("{case}-again.png"));
        let o = pictor(&[
            "render",
            "--data-dir",
            data.to_str().unwrap(),
            "--from-png",
            out.to_str().unwrap(),
            "--model",
            model.to_str().unwrap(),
            "--out",
            again.to_str().unwrap(),
        ]);
        assert!(
            o.status.success(),
            "{case}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            image::open(&out).unwrap().to_rgb8(),
            image::open(&again).unwrap().to_rgb8(),
            "{case}: --from-png gave another picture"
        );
    }
    assert!(!data.exists(), "rendering must not create a data folder");
}

/// The example in docs/reproducing.md: a picture AUTOMATIC1111-style metadata describes (DPM++ 2M
/// Karras, GPU noise, made by diffusers with A1111's Philox noise) is reproduced from the PNG
/// alone, the model found among the installed ones by the name the PNG gives.
#[cfg(feature = "diffusion")]
#[test]
fn from_png_reproduces_an_a1111_picture_with_the_installed_model() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion");
    let png = root.join("samplers/a1111_dpmpp_2m_karras.png");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let model = root.join("sd15/model");
    let o = pictor(&[
        "models",
        "add",
        "model",
        model.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.path().join("again.png");
    let o = pictor(&[
        "render",
        "--data-dir",
        data.to_str().unwrap(),
        "--from-png",
        png.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = image::open(&png).unwrap().to_rgb8();
    let got = image::open(&out).unwrap().to_rgb8();
    let d = want
        .as_raw()
        .iter()
        .zip(got.as_raw())
        .map(|(a, b)| a.abs_diff(*b))
        .max()
        .unwrap();
    println!("A1111 PNG reproduced within {d}/255");
    assert!(d <= 2, "{d}/255");
    let text = pictor::render::encode::read_parameters(&std::fs::read(&out).unwrap()).unwrap();
    assert!(
        text.contains("Sampler: DPM++ 2M, Schedule type: Karras") && text.contains("RNG: NV"),
        "{text}"
    );

    // A PNG naming a model that is not installed says so.
    let o = pictor(&[
        "render",
        "--from-png",
        png.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--data-dir",
        dir.path().join("empty").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not installed here"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A PNG whose parameters are `text` (a 1×1 picture).
#[cfg(feature = "diffusion")]
fn png_with_text(path: &Path, text: &str) {
    let file = std::fs::File::create(path).unwrap();
    let mut enc = png::Encoder::new(file, 1, 1);
    enc.set_color(png::ColorType::Rgb);
    enc.add_text_chunk("parameters".into(), text.into())
        .unwrap();
    let mut w = enc.write_header().unwrap();
    w.write_image_data(&[0, 0, 0]).unwrap();
}

/// `--from-png` refuses settings it cannot honour, with the PNG's key named, before any model
/// loads.
#[cfg(feature = "diffusion")]
#[test]
fn from_png_refuses_bad_or_unreproducible_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion/sd15/model");
    let png = dir.path().join("in.png");
    let out = dir.path().join("out.png");
    for (settings, expected) in [
        ("Steps: 8, Sampler: Euler, Seed: -1, Size: 64x64", "Seed"),
        ("Steps: 8.5, Sampler: Euler, Seed: 1, Size: 64x64", "Steps"),
        ("Steps: 8, Sampler: Euler, Seed: 1, Size: 0x0", "--width"),
        ("Steps: 8, Sampler: Euler, Seed: 1, Size: big", "Size"),
        (
            "Steps: 8, Sampler: Euler, CFG scale: NaN, Seed: 1",
            "CFG scale",
        ),
        (
            "Steps: 8, Sampler: Euler, Seed: 1, Denoising strength: 0.5",
            "edit",
        ),
        (
            "Steps: 8, Sampler: PLMS, Seed: 1, Size: 64x64",
            "unknown sampler",
        ),
        (
            "Steps: 9999, Sampler: Euler, Seed: 1, Size: 64x64",
            "--steps",
        ),
    ] {
        png_with_text(&png, &format!("a cat\n{settings}"));
        let o = pictor(&[
            "render",
            "--from-png",
            png.to_str().unwrap(),
            "--model",
            model.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--data-dir",
            dir.path().join("data").to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{settings}: accepted");
        assert!(err.contains(expected), "{settings}: {err}");
        assert!(!out.exists(), "{settings}: wrote a picture");
    }
}
