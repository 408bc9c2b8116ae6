//! Parity of the FLUX.1 pipeline with diffusers' `FluxPipeline` on tiny, randomly initialised
//! FLUX.1-dev- and FLUX.1-schnell-shaped models (real classes, shrunk widths) made by
//! `tools/sd-fixtures/flux.py` (versions in each `reference.json`).
//!
//! Tolerances as for Stable Diffusion: token ids and the seed's noise exact, embeddings,
//! transformer outputs and latents within 1e-3 (max abs; observed values are printed), pictures
//! within 2/255.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::PathBuf;

use candle::{Device, Tensor};
use pictor_diffusion::flux::{self, FluxPipeline, t5::T5Tokenizer};
use pictor_diffusion::noise::{NoiseSource, TorchCpu, TorchFill};
use pictor_diffusion::{NoControl, to_rgb8};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/diffusion/flux")
}

struct Fixture {
    pipe: FluxPipeline,
    t: HashMap<String, Tensor>,
    json: Value,
}

fn fixture(variant: &str, transformer: Option<&str>) -> Fixture {
    let dir = root().join(variant);
    let tfile = transformer.map(|f| dir.join(f));
    let mut pipe = FluxPipeline::load_diffusers(&dir, tfile.as_deref(), &Device::Cpu).unwrap();
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
            .unwrap();
    pipe.max_sequence_length = json["max_sequence_length"].as_u64().unwrap() as usize;
    let t = candle::safetensors::load(dir.join("reference.safetensors"), &Device::Cpu).unwrap();
    Fixture { pipe, t, json }
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims());
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

fn close(what: &str, got: &Tensor, want: &Tensor, tol: f32) {
    let d = max_diff(got, want);
    println!("{what}: max abs diff {d:.2e}");
    assert!(d <= tol, "{what}: max abs diff {d} > {tol}");
}

fn ids(t: &Tensor) -> Vec<u32> {
    t.to_vec1::<i64>()
        .unwrap()
        .into_iter()
        .map(|x| x as u32)
        .collect()
}

/// The fixtures' noise was drawn by ATen's portable kernel.
fn noise(seed: u64) -> TorchCpu {
    TorchCpu::with_fill(seed, TorchFill::Portable)
}

#[test]
fn t5_tokenizer_matches_transformers() {
    let dir = root().join("t5_tokenizer");
    let tok = T5Tokenizer::load(&dir.join("tokenizer.json")).unwrap();
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tokenizer_cases.json")).unwrap())
            .unwrap();
    let max = cases["max_length"].as_u64().unwrap() as usize;
    for case in cases["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let want = |k: &str| -> Vec<u32> {
            case[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect()
        };
        assert_eq!(tok.encode(text, max).unwrap(), want("ids"), "{text:?}");
        assert_eq!(tok.encode_full(text).unwrap(), want("full"), "{text:?}");
    }
}

#[test]
fn text_encoders_match_transformers() {
    for variant in ["dev", "schnell"] {
        let f = fixture(variant, None);
        let prompt = f.json["prompt"].as_str().unwrap();
        assert_eq!(f.pipe.clip_tokenizer.encode(prompt), ids(&f.t["clip_ids"]));
        assert_eq!(
            f.pipe
                .t5_tokenizer
                .encode(prompt, f.pipe.max_sequence_length)
                .unwrap(),
            ids(&f.t["t5_ids"])
        );
        let cond = f.pipe.encode(prompt).unwrap();
        close(
            &format!("{variant} pooled"),
            &cond.pooled,
            &f.t["pooled"],
            1e-4,
        );
        close(&format!("{variant} t5"), &cond.t5, &f.t["t5_embeds"], 1e-4);
    }
}

#[test]
fn transformer_matches_diffusers() {
    for (variant, file) in [
        ("dev", None),
        ("dev", Some("transformer_bfl.safetensors")),
        ("schnell", None),
        ("schnell", Some("transformer_bfl.safetensors")),
    ] {
        let f = fixture(variant, file);
        let size = f.json["size"].as_u64().unwrap() as usize;
        let seed = f.json["seed"].as_u64().unwrap();
        let latents = f
            .pipe
            .noise(&mut noise(seed) as &mut dyn NoiseSource, size, size)
            .unwrap();
        assert_eq!(max_diff(&latents, &f.t["noise_packed"]), 0.0, "seed noise");
        let cond = flux::FluxConditioning {
            t5: f.t["t5_embeds"].clone(),
            pooled: f.t["pooled"].clone(),
        };
        let pe = f.pipe.positions(&cond, size, size).unwrap();
        let v = f
            .pipe
            .velocity(
                &cond,
                &latents,
                0.75,
                f.json["guidance"].as_f64().unwrap() as f32,
                &pe,
            )
            .unwrap();
        close(
            &format!("{variant} {file:?} transformer"),
            &v,
            &f.t["transformer_out"],
            1e-4,
        );
    }
}

#[test]
fn pictures_match_diffusers() {
    for variant in ["dev", "schnell"] {
        let f = fixture(variant, None);
        let size = f.json["size"].as_u64().unwrap() as usize;
        let steps = f.json["steps"].as_u64().unwrap() as usize;
        let guidance = f.json["guidance"].as_f64().unwrap() as f32;
        let seed = f.json["seed"].as_u64().unwrap();
        let prompt = f.json["prompt"].as_str().unwrap();

        let sigmas = f.pipe.schedule.sigmas(steps, (size / 16) * (size / 16));
        let want: Vec<f32> = f.t["sigmas"].to_vec1().unwrap();
        assert_eq!(sigmas, want, "{variant} sigmas");

        let cond = f.pipe.encode(prompt).unwrap();
        let latents = f
            .pipe
            .noise(&mut noise(seed) as &mut dyn NoiseSource, size, size)
            .unwrap();
        let latents = f
            .pipe
            .denoise(&cond, latents, steps, guidance, (size, size), &NoControl)
            .unwrap();
        close(
            &format!("{variant} latents"),
            &latents,
            &f.t["latents_packed"],
            1e-3,
        );
        let raw = f.pipe.decode_raw(&latents, size, size).unwrap();
        close(
            &format!("{variant} decoded"),
            &raw,
            &f.t["vae_decode_out"],
            1e-3,
        );

        let rgb = f
            .pipe
            .txt2img(
                prompt,
                &mut noise(seed),
                size,
                size,
                steps,
                guidance,
                &NoControl,
            )
            .unwrap();
        assert_eq!(rgb, to_rgb8(&raw).unwrap(), "txt2img is the steps above");
        let want: Vec<f32> = f.t["image"].flatten_all().unwrap().to_vec1().unwrap();
        let worst = rgb
            .iter()
            .zip(&want)
            .map(|(&g, &w)| (f32::from(g) - w * 255.0).abs())
            .fold(0.0, f32::max);
        println!("{variant} picture: max diff {worst:.2}/255");
        assert!(worst <= 2.0, "{variant} picture: {worst}/255");
    }
}
