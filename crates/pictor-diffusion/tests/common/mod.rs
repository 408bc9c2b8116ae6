//! Helpers shared by the engine's parity tests.
#![allow(clippy::unwrap_used, dead_code)]

use candle::{DType, Tensor};
use pictor_diffusion::noise::{TorchCpu, TorchFill};

/// Relative error of `got` against `want`: (RMS of the difference / RMS of `want`, max abs
/// difference / max |want|).
pub fn relative(got: &Tensor, want: &Tensor) -> (f64, f64) {
    let v = |t: &Tensor| -> Vec<f64> {
        t.to_dtype(DType::F64)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f64>()
            .unwrap()
    };
    let (g, w) = (v(got), v(want));
    assert_eq!(g.len(), w.len());
    let rms =
        |x: &mut dyn Iterator<Item = f64>| (x.map(|d| d * d).sum::<f64>() / w.len() as f64).sqrt();
    let err = rms(&mut g.iter().zip(&w).map(|(a, b)| a - b));
    let scale = rms(&mut w.iter().copied());
    let worst = g
        .iter()
        .zip(&w)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let largest = w.iter().map(|x| x.abs()).fold(0.0, f64::max);
    (err / scale, worst / largest)
}

/// The largest absolute difference between two tensors of one shape.
pub fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
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

/// Asserts `got` within `tol` (max abs) of `want`, printing the difference.
pub fn close(what: &str, got: &Tensor, want: &Tensor, tol: f32) {
    let d = max_diff(got, want);
    println!("{what}: max abs diff {d:.2e}");
    assert!(d <= tol, "{what}: max abs diff {d} > {tol}");
}

/// Token ids stored as int64 by the fixture scripts.
pub fn ids(t: &Tensor) -> Vec<u32> {
    t.to_vec1::<i64>()
        .unwrap()
        .into_iter()
        .map(|x| x as u32)
        .collect()
}

/// The fixtures' noise was drawn by ATen's portable kernel.
pub fn noise(seed: u64) -> TorchCpu {
    TorchCpu::with_fill(seed, TorchFill::Portable)
}

/// The LoRA fixtures' cases (`tools/sd-fixtures/transformer_lora.py`): name → [(file, weight)].
pub fn lora_cases(dir: &std::path::Path) -> Vec<(String, Vec<pictor_diffusion::lora::LoraSpec>)> {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
            .unwrap();
    meta["cases"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(case, loras)| {
            let specs = loras
                .as_array()
                .unwrap()
                .iter()
                .map(|l| {
                    let w = l[1].as_f64().unwrap() as f32;
                    pictor_diffusion::lora::LoraSpec {
                        path: dir.join(l[0].as_str().unwrap()),
                        unet: w,
                        text: w,
                    }
                })
                .collect();
            (case.clone(), specs)
        })
        .collect()
}

/// The largest difference, in levels of 255, between a picture's bytes and a reference picture
/// (0..1 floats, HWC, as diffusers' `output_type="np"`), printed under `what`.
pub fn picture_diff(what: &str, rgb: &[u8], image: &Tensor) -> f32 {
    let want: Vec<f32> = image.flatten_all().unwrap().to_vec1().unwrap();
    assert_eq!(rgb.len(), want.len(), "{what}: picture sizes");
    let worst = rgb
        .iter()
        .zip(&want)
        .map(|(&g, &w)| (f32::from(g) - w * 255.0).abs())
        .fold(0.0, f32::max);
    println!("{what} picture: max diff {worst:.2}/255");
    worst
}

/// An all-in-one single file made of a fixture folder's parts, as ComfyUI bundles them: the
/// transformer file's tensors under `model.diffusion_model.` (added when missing), each
/// `(folder, prefix)` text encoder's under its prefix, and a stray VAE tensor under
/// `first_stage_model.`; and a copy of the folder with only `keep` (its configurations,
/// tokenizers, VAE). Returns (the temporary folder, the file, the bare folder).
pub fn all_in_one(
    dir: &std::path::Path,
    transformer: &str,
    encoders: &[(&str, &str)],
    keep: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    use candle::Device;
    let load = |p: &str| candle::safetensors::load(dir.join(p), &Device::Cpu).unwrap();
    let mut all = std::collections::HashMap::new();
    for (k, t) in load(transformer) {
        let k = if k.starts_with("model.diffusion_model.") {
            k
        } else {
            format!("model.diffusion_model.{k}")
        };
        all.insert(k, t);
    }
    for (sub, prefix) in encoders {
        for (k, t) in load(&format!("{sub}/model.safetensors")) {
            all.insert(format!("{prefix}{k}"), t);
        }
    }
    all.insert(
        "first_stage_model.decoder.conv_in.weight".to_string(),
        Tensor::zeros((2, 2), DType::F32, &Device::Cpu).unwrap(),
    );
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("all_in_one.safetensors");
    candle::safetensors::save(&all, &file).unwrap();
    let bare = tmp.path().join("bare");
    for rel in keep {
        let to = bare.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(dir.join(rel), to).unwrap();
    }
    (tmp, file, bare)
}
