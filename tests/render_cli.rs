//! `pictor render`: a picture from a prompt (with a forced style and a thumbnail size) and an
//! edit of an image file, no server or data folder.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

fn pictor(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pictor"))
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
