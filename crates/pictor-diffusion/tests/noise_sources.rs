//! The seed's noise, bit for bit against what the reference tools draw
//! (`tools/sd-fixtures/noise.py`; seeds, call shapes and versions in
//! `tests/fixtures/noise/noise.json`): several seeds (up to and beyond 32 bits), several calls in
//! a row on one generator, small tensors (PyTorch's scalar path), 16 and more (its 16-wide fill,
//! odd tails) and whole 512×512 / 768×512 latents.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use candle::Device;
use pictor_diffusion::noise::{NoiseKind, NoiseSource, TorchCpu, TorchFill};
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/noise")
}

fn check(name: &str, file: &str, make: impl Fn(u64) -> Box<dyn NoiseSource>) {
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("noise.json")).unwrap())
            .unwrap();
    let refs = candle::safetensors::load(fixtures().join(file), &Device::Cpu).unwrap();
    let mut compared = 0;
    for seed in meta["seeds"].as_array().unwrap() {
        let seed = seed.as_u64().unwrap();
        let mut source = make(seed);
        for (i, shape) in meta["calls"][seed.to_string()]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            let n: usize = shape
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .product();
            let got = source.randn(n);
            let want = refs[&format!("s{seed}_c{i}")]
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            assert_eq!(got.len(), want.len());
            for (j, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g.to_bits() == w.to_bits(),
                    "{name} seed {seed} call {i} shape {shape} element {j}: {g:e} != {w:e}"
                );
            }
            compared += n;
        }
    }
    assert!(compared > 60_000, "{compared}");
    println!("{name}: {compared} values bit-identical");
}

#[test]
fn torch_cpu_is_bit_identical_to_torch_randn_on_x86() {
    check("torch-cpu", "torch_cpu.safetensors", |s| {
        pictor_diffusion::noise::source(NoiseKind::TorchCpu, s)
    });
}

#[test]
fn torch_cpu_portable_fill_is_bit_identical_to_atens_default_kernel() {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        // The portable kernel calls libm's logf/cosf/sinf: equal bits need glibc's.
        println!("skipped: the portable fill's reference was drawn with glibc's libm");
        return;
    }
    check(
        "torch-cpu (portable fill)",
        "torch_cpu_portable.safetensors",
        |s| Box::new(TorchCpu::with_fill(s, TorchFill::Portable)),
    );
}

#[test]
fn a1111_gpu_is_bit_identical_to_a1111_philox() {
    check("a1111-gpu", "a1111_gpu.safetensors", |s| {
        pictor_diffusion::noise::source(NoiseKind::A1111Gpu, s)
    });
}
