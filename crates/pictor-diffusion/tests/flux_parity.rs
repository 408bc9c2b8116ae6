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
use pictor_diffusion::noise::NoiseSource;
use pictor_diffusion::{NoControl, to_rgb8};
use serde_json::Value;

mod common;
use common::{all_in_one, close, ids, lora_cases, max_diff, noise, picture_diff, relative};

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
    let files = flux::FluxFiles {
        transformer: transformer.map(|f| dir.join(f)),
        ..Default::default()
    };
    let mut pipe = FluxPipeline::load_diffusers(&dir, &files, &Device::Cpu).unwrap();
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
            .unwrap();
    pipe.max_sequence_length = json["max_sequence_length"].as_u64().unwrap() as usize;
    let t = candle::safetensors::load(dir.join("reference.safetensors"), &Device::Cpu).unwrap();
    Fixture { pipe, t, json }
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
        let worst = picture_diff(variant, &rgb, &f.t["image"]);
        assert!(worst <= 2.0, "{variant} picture: {worst}/255");
    }
}

/// The tiny dev transformer as city96's converter writes FLUX GGUFs (gguf-py, v3, Q8_0 where
/// rows allow, float16/float32 elsewhere): loaded without its config (the folder's is used for
/// the rotary axes) and within Q8_0's tolerance of the float model.
#[test]
fn gguf_from_gguf_py_matches() {
    let f = fixture("dev", Some("transformer.gguf"));
    let size = f.json["size"].as_u64().unwrap() as usize;
    let latents = f.t["noise_packed"].clone();
    let cond = flux::FluxConditioning {
        t5: f.t["t5_embeds"].clone(),
        pooled: f.t["pooled"].clone(),
    };
    let pe = f.pipe.positions(&cond, size, size).unwrap();
    let v = f.pipe.velocity(&cond, &latents, 0.75, 3.5, &pe).unwrap();
    let (rms, max) = relative(&v, &f.t["transformer_out"]);
    println!("gguf-py Q8_0/F16 transformer: relative RMS {rms:.2e}, max {max:.2e}");
    assert!(rms <= Q8_RMS && max <= Q8_MAX, "{rms} {max}");
}

/// A float folder loaded with its matrices quantised to Q8_0 as they are read (what the
/// automatic mode does for parts over 4 GB, such as FLUX.1's bfloat16 transformer and T5):
/// within Q8_0's tolerance of the float model, transformer and T5 alike.
#[test]
fn float_folder_quantised_at_load_matches() {
    let dir = root().join("dev");
    let files = flux::FluxFiles {
        quantise_float: Some(true),
        ..Default::default()
    };
    let mut pipe = FluxPipeline::load_diffusers(&dir, &files, &Device::Cpu).unwrap();
    let t = candle::safetensors::load(dir.join("reference.safetensors"), &Device::Cpu).unwrap();
    pipe.max_sequence_length = t["t5_ids"].dim(0).unwrap();
    let cond = pipe.encode("a photo of a red car, the astronaut!").unwrap();
    let (rms, max) = relative(&cond.t5, &t["t5_embeds"]);
    println!("T5 quantised at load: relative RMS {rms:.2e}, max {max:.2e}");
    // this tiny T5 amplifies 8-bit rounding (see t5_gguf_matches)
    assert!(rms <= 0.15 && max <= 0.3, "{rms} {max}");
    let cond = flux::FluxConditioning {
        t5: t["t5_embeds"].clone(),
        pooled: t["pooled"].clone(),
    };
    let pe = pipe.positions(&cond, 64, 64).unwrap();
    let v = pipe
        .velocity(&cond, &t["noise_packed"], 0.75, 3.5, &pe)
        .unwrap();
    let (rms, max) = relative(&v, &t["transformer_out"]);
    println!("transformer quantised at load: relative RMS {rms:.2e}, max {max:.2e}");
    assert!(rms <= Q8_RMS && max <= Q8_MAX, "{rms} {max}");
}

/// Stated tolerances of the quantised transformers, relative (RMS error / RMS of the output, max
/// error / largest output). Q8_0 rounds each weight to 1/127 of its 32-block's largest (5.5e-3
/// RMS on the wide model with the activations in float32, measured with
/// `CANDLE_DEQUANTIZE_ALL=1`), and candle's quantised matmul rounds the activations to 8 bits
/// per 32-block too (1.1e-2 in all). Q5_K and Q4_K: 5.5 and 4.5 bits per weight in 256-blocks
/// with 6-bit scales (2.9e-2 and 6.3e-2 from the weights alone, 3.0e-2 and 6.4e-2 in all).
/// Each bound is about twice what was measured.
const Q8_RMS: f64 = 0.02;
const Q8_MAX: f64 = 0.03;
const Q5K_RMS: f64 = 0.05;
const Q5K_MAX: f64 = 0.06;
const Q4K_RMS: f64 = 0.1;
const Q4K_MAX: f64 = 0.12;

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// `det_fill` of tools/sd-fixtures/flux_gguf.py.
fn det_fill(name: &str, n: usize, scale: f64) -> Vec<f32> {
    let seed = fnv1a(name);
    (0..n)
        .map(|i| {
            let u = (splitmix64(seed.wrapping_add(i as u64)) >> 40) as f64;
            ((u / 16_777_216.0 - 0.5) * 2.0 * scale) as f32
        })
        .collect()
}

/// The wide model's shape (`wide_bfl_shapes` in flux_gguf.py): 2 heads of 128, 1 double and
/// 1 single block, T5 and CLIP widths 256, the guidance embedder.
fn wide_shapes() -> Vec<(String, Vec<usize>)> {
    let cfg = flux::model::FluxConfig {
        context_in_dim: 256,
        vec_in_dim: 256,
        hidden_size: 256,
        num_heads: 2,
        depth: 1,
        depth_single_blocks: 1,
        ..flux::model::FluxConfig::flux1(true)
    };
    flux::model::bfl_shapes(&cfg)
}

/// A FLUX transformer with 128-wide heads (the rotary axes inferred from the weights alone, as
/// for a real GGUF without a folder), its matrices quantised by candle to Q8_0, Q5_K and Q4_K
/// (rows too short for a K-quant's 256-block fall back to Q8_0, as llama.cpp's quantiser does),
/// written as GGUF, read back and run: within each type's tolerance of diffusers' float output,
/// and the float32 GGUF within the float tolerance. The quantised matrices stay quantised in
/// memory.
#[test]
fn wide_gguf_quantisations_match() {
    use candle::quantized::{GgmlDType, QTensor, gguf_file};
    let dir = root().join("wide");
    let t = candle::safetensors::load(dir.join("reference.safetensors"), &Device::Cpu).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let f32_bytes: usize = wide_shapes()
        .iter()
        .map(|(_, s)| 4 * s.iter().product::<usize>())
        .sum();
    for (dtype, rms_tol, max_tol) in [
        (GgmlDType::F32, 1e-6, 1e-5),
        (GgmlDType::Q8_0, Q8_RMS, Q8_MAX),
        (GgmlDType::Q5K, Q5K_RMS, Q5K_MAX),
        (GgmlDType::Q4K, Q4K_RMS, Q4K_MAX),
    ] {
        let tensors: Vec<(String, QTensor)> = wide_shapes()
            .into_iter()
            .map(|(name, shape)| {
                let n = shape.iter().product();
                let data = if name.ends_with(".scale") {
                    det_fill(&name, n, 0.2)
                        .into_iter()
                        .map(|x| 1.0 + x)
                        .collect()
                } else if shape.len() == 1 {
                    det_fill(&name, n, 0.05)
                } else {
                    det_fill(&name, n, 1.0 / (shape[1] as f64).sqrt())
                };
                let x = Tensor::from_vec(data, shape.as_slice(), &Device::Cpu).unwrap();
                let q = if shape.len() == 1 {
                    GgmlDType::F32
                } else if shape[1] % dtype.block_size() == 0 {
                    dtype
                } else {
                    GgmlDType::Q8_0
                };
                (name, QTensor::quantize(&x, q).unwrap())
            })
            .collect();
        let path = tmp.path().join(format!("wide-{dtype:?}.gguf"));
        let mut file = std::fs::File::create(&path).unwrap();
        let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, q)| (n.as_str(), q)).collect();
        gguf_file::write(&mut file, &[], &refs).unwrap();
        drop(file);

        let mut w = flux::transformer_file(&path, &Default::default(), &Device::Cpu).unwrap();
        let resident = w.resident_bytes() as usize;
        let cfg = flux::model::FluxConfig::from_bfl_names(&w).unwrap();
        assert_eq!(cfg.axes_dim, vec![16, 56, 56]);
        assert_eq!(
            (cfg.num_heads, cfg.depth, cfg.depth_single_blocks),
            (2, 1, 1)
        );
        let model = flux::model::Flux::new(&cfg, &mut w).unwrap();
        let txt_ids = vec![[0f32; 3]; 8];
        let pe = model
            .positions(&txt_ids, &flux::image_ids(4, 4), &Device::Cpu)
            .unwrap();
        let out = model
            .forward(&t["img"], &t["txt"], &t["pooled"], 0.6, Some(4.0), &pe)
            .unwrap();
        let (rms, max) = relative(&out, &t["out"]);
        println!(
            "wide {dtype:?}: relative RMS {rms:.2e}, max {max:.2e}; weights {:.2} MB in memory ({:.0} % of float32)",
            resident as f64 / 1e6,
            100.0 * resident as f64 / f32_bytes as f64
        );
        assert!(rms <= rms_tol && max <= max_tol, "{dtype:?}: {rms} {max}");
        if dtype != GgmlDType::F32 {
            assert!(resident < f32_bytes * 3 / 10, "{dtype:?} kept quantised");
        }
    }
}

/// The dev model's T5 encoder as city96's T5 GGUFs carry it (llama.cpp's names,
/// `enc.blk.N.attn_q.weight`…) in place of `text_encoder_2/`. As float32 it must give
/// transformers' embeddings (the names and layout are right); with Q8_0 matrices, compared with
/// the same weights dequantised and run in float32, what is left is candle's 8-bit rounding of
/// the activations: 5e-3 per layer ([`quantised_linear_error`]), which this tiny random T5 (no
/// score scaling, 4 heads of 8, 2 layers) amplifies to 3e-2 (measured); bound at twice that.
/// (Its weights' own Q8_0 rounding costs another 5e-2 against transformers: the file's, not the
/// engine's.)
#[test]
fn t5_gguf_matches() {
    use candle::quantized::{GgmlDType, QTensor, gguf_file};
    let dir = root().join("dev");
    let st = candle::safetensors::load(dir.join("text_encoder_2/model.safetensors"), &Device::Cpu)
        .unwrap();
    let to_gguf = flux::weights::t5_name_in_gguf;
    let t = candle::safetensors::load(dir.join("reference.safetensors"), &Device::Cpu).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // kind: 0 = float32, 1 = Q8_0 matrices, 2 = those Q8_0 matrices dequantised to float32
    let embeds = |kind: u8| {
        let tensors: Vec<(String, QTensor)> = st
            .iter()
            .filter(|(n, _)| n.as_str() != "encoder.embed_tokens.weight")
            .map(|(n, x)| {
                let quantise = kind > 0 && x.rank() == 2 && x.dim(1).unwrap() % 32 == 0;
                let q = if quantise {
                    let q = QTensor::quantize(x, GgmlDType::Q8_0).unwrap();
                    if kind == 2 {
                        QTensor::quantize(&q.dequantize(&Device::Cpu).unwrap(), GgmlDType::F32)
                            .unwrap()
                    } else {
                        q
                    }
                } else {
                    QTensor::quantize(x, GgmlDType::F32).unwrap()
                };
                (to_gguf(n), q)
            })
            .collect();
        assert!(
            tensors
                .iter()
                .any(|(n, _)| n == "enc.blk.1.ffn_gate.weight")
        );
        let path = tmp.path().join(format!("t5-encoder-{kind}.gguf"));
        let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, q)| (n.as_str(), q)).collect();
        gguf_file::write(&mut std::fs::File::create(&path).unwrap(), &[], &refs).unwrap();
        let files = flux::FluxFiles {
            text_encoder_2: Some(path),
            ..Default::default()
        };
        let mut pipe = FluxPipeline::load_diffusers(&dir, &files, &Device::Cpu).unwrap();
        pipe.max_sequence_length = t["t5_ids"].dim(0).unwrap();
        pipe.encode("a photo of a red car, the astronaut!")
            .unwrap()
            .t5
    };
    close("T5 float32 GGUF", &embeds(0), &t["t5_embeds"], 1e-4);
    let (rms, max) = relative(&embeds(1), &embeds(2));
    println!("T5 Q8_0 GGUF against its weights in float32: relative RMS {rms:.2e}, max {max:.2e}");
    assert!(rms <= 0.06 && max <= 0.13, "{rms} {max}");
}

/// One Q8_0 linear layer through candle's quantised matmul against the same weights
/// dequantised (the activations' 8-bit rounding) and against the float weights (the weights'
/// rounding): each about 5e-3 relative RMS for N(0, 0.2) weights and N(0, 1) inputs.
#[test]
fn quantised_linear_error() {
    use candle::Module;
    use candle::quantized::{GgmlDType, QMatMul, QTensor};
    let dev = Device::Cpu;
    let rel = |p: &Tensor, r: &Tensor| relative(p, r).0;
    for k in [32usize, 64, 256] {
        let w = Tensor::randn(0f32, 0.2, (48, k), &dev).unwrap();
        let x = Tensor::randn(0f32, 1.0, (24, k), &dev).unwrap();
        let q = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
        let deq = x.matmul(&q.dequantize(&dev).unwrap().t().unwrap()).unwrap();
        let quant = QMatMul::from_qtensor(q).unwrap().forward(&x).unwrap();
        let float = x.matmul(&w.t().unwrap()).unwrap();
        let (a, b) = (rel(&quant, &deq), rel(&deq, &float));
        println!("k {k}: activations {a:.2e}, weights {b:.2e}");
        assert!(a < 0.01 && b < 0.01, "k {k}: {a} {b}");
    }
}

/// FLUX LoRAs as people have them — diffusers / PEFT / ai-toolkit files (`transformer.…lora_A`,
/// q, k, v and the MLP input landing on row ranges of the joined `qkv` / `linear1`, the final
/// modulation's halves exchanged, embedders, CLIP-L) and kohya / sd-scripts files under BFL's
/// names (one `lora_down` for the joined q, k, v; float16 alphas) — alone at 0.7 and two at
/// once (0.8, 0.6), against diffusers' `load_lora_weights` + `set_adapters` + `fuse_lora` on the
/// tiny FLUX.1-dev: latents within 1e-3, pictures within 2/255. The same LoRAs on the BFL
/// single file give the folder's latents, as does ComfyUI's spelling of the kohya file
/// (`diffusion_model.…`); on the GGUF transformer (changes to quantised matrices applied beside
/// them) they stay within Q8_0's tolerance.
#[test]
fn loras_match_diffusers_fuse_lora() {
    use pictor_diffusion::lora::LoraSpec;
    let lora_dir = root().join("../lora/flux");
    let refs =
        candle::safetensors::load(lora_dir.join("reference.safetensors"), &Device::Cpu).unwrap();
    let dir = root().join("dev");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(lora_dir.join("reference.json")).unwrap())
            .unwrap();
    let prompt = json["prompt"].as_str().unwrap();
    let (steps, guidance) = (3, json["guidance"].as_f64().unwrap() as f32);
    let seed = json["seed"].as_u64().unwrap();
    let draw = |files: &flux::FluxFiles, loras: &[LoraSpec]| {
        let mut pipe = FluxPipeline::load_with_loras(&dir, files, loras, &Device::Cpu).unwrap();
        pipe.max_sequence_length = 24;
        let cond = pipe.encode(prompt).unwrap();
        let latents = pipe
            .noise(&mut noise(seed) as &mut dyn NoiseSource, 64, 64)
            .unwrap();
        let latents = pipe
            .denoise(&cond, latents, steps, guidance, (64, 64), &NoControl)
            .unwrap();
        let raw = pipe.decode_raw(&latents, 64, 64).unwrap();
        (latents, to_rgb8(&raw).unwrap())
    };
    for (case, loras) in lora_cases(&lora_dir) {
        let (latents, rgb) = draw(&flux::FluxFiles::default(), &loras);
        close(
            &format!("FLUX LoRA case {case} latents"),
            &latents,
            &refs[&format!("{case}_latents")],
            1e-3,
        );
        let what = format!("FLUX LoRA case {case}");
        let worst = picture_diff(&what, &rgb, &refs[&format!("{case}_image")]);
        assert!(worst <= 2.0, "{case}: {worst}/255");
        if case != "ab" {
            continue;
        }
        let single = flux::FluxFiles {
            transformer: Some(dir.join("transformer_bfl.safetensors")),
            ..Default::default()
        };
        close(
            "LoRAs on the BFL single file",
            &draw(&single, &loras).0,
            &latents,
            1e-5,
        );
        // ComfyUI's spelling of the kohya file: BFL's dotted names under `diffusion_model.`.
        let tmp = tempfile::tempdir().unwrap();
        let bfl = candle::safetensors::load(dir.join("transformer_bfl.safetensors"), &Device::Cpu)
            .unwrap();
        let dotted: HashMap<String, String> = bfl
            .keys()
            .filter_map(|k| k.strip_suffix(".weight"))
            .map(|m| (m.replace('.', "_"), m.to_owned()))
            .collect();
        let kohya = candle::safetensors::load(&loras[1].path, &Device::Cpu).unwrap();
        let comfy: HashMap<String, Tensor> = kohya
            .into_iter()
            .map(|(k, v)| match k.strip_prefix("lora_unet_") {
                Some(rest) => {
                    let (module, tail) = rest.split_once('.').unwrap();
                    (format!("diffusion_model.{}.{tail}", dotted[module]), v)
                }
                None => (k, v),
            })
            .collect();
        assert!(
            comfy.contains_key("diffusion_model.double_blocks.0.img_attn.qkv.lora_down.weight")
        );
        let path = tmp.path().join("comfy.safetensors");
        candle::safetensors::save(&comfy, &path).unwrap();
        let mut renamed = loras.clone();
        renamed[1].path = path;
        close(
            "ComfyUI-named kohya file",
            &draw(&flux::FluxFiles::default(), &renamed).0,
            &latents,
            1e-6,
        );
        let gguf = flux::FluxFiles {
            transformer: Some(dir.join("transformer.gguf")),
            ..Default::default()
        };
        let (rms, max) = relative(&draw(&gguf, &loras).0, &latents);
        println!("LoRAs on the GGUF transformer: relative RMS {rms:.2e}, max {max:.2e}");
        assert!(rms <= Q8_RMS && max <= Q8_MAX, "{rms} {max}");
    }
}

/// LoRAs for other models are refused with what is wrong, before anything is drawn.
#[test]
fn foreign_loras_are_refused() {
    use pictor_diffusion::lora::LoraSpec;
    let dir = root().join("dev");
    let spec = |p: PathBuf| LoraSpec {
        path: p,
        unet: 1.0,
        text: 1.0,
    };
    let lora = root().join("../lora");
    for (file, says) in [
        ("sd15/style_peft.safetensors", "not in this model"),
        // SD 3's have layers for a second CLIP, which is T5's place in FLUX.
        (
            "sd3/style_peft.safetensors",
            "LoRA layers for the T5 text encoder",
        ),
        (
            "sd3/detail_kohya.safetensors",
            "LoRA layers for the T5 text encoder",
        ),
    ] {
        let e = FluxPipeline::load_with_loras(
            &dir,
            &flux::FluxFiles::default(),
            &[spec(lora.join(file))],
            &Device::Cpu,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains(says), "{file}: {e}");
    }
}

/// An all-in-one FLUX file (the transformer under `model.diffusion_model.`, CLIP-L and T5 under
/// `text_encoders.…transformer.`, a VAE tensor under `first_stage_model.`) as the mapping's
/// transformer file, with a folder that keeps only the encoders' configurations: the bundled
/// CLIP-L and T5 are used — the same conditioning and velocity as the folder's pipeline.
#[test]
fn all_in_one_single_files_bring_their_text_encoders() {
    let f = fixture("dev", None);
    let dir = root().join("dev");
    let (_tmp, file, bare) = all_in_one(
        &dir,
        "transformer_bfl.safetensors",
        &[
            ("text_encoder", "text_encoders.clip_l.transformer."),
            ("text_encoder_2", "text_encoders.t5xxl.transformer."),
        ],
        &[
            "model_index.json",
            "scheduler/scheduler_config.json",
            "text_encoder/config.json",
            "text_encoder_2/config.json",
            "tokenizer/merges.txt",
            "tokenizer/vocab.json",
            "tokenizer/tokenizer_config.json",
            "tokenizer_2/tokenizer.json",
            "transformer/config.json",
            "vae/config.json",
            "vae/diffusion_pytorch_model.safetensors",
        ],
    );
    let files = flux::FluxFiles {
        transformer: Some(file),
        ..Default::default()
    };
    let mut pipe = FluxPipeline::load_diffusers(&bare, &files, &Device::Cpu).unwrap();
    pipe.max_sequence_length = f.pipe.max_sequence_length;
    let prompt = f.json["prompt"].as_str().unwrap();
    let (a, b) = (pipe.encode(prompt).unwrap(), f.pipe.encode(prompt).unwrap());
    close("bundled T5", &a.t5, &b.t5, 1e-6);
    close("bundled CLIP-L pooled", &a.pooled, &b.pooled, 1e-6);
    let pe = pipe.positions(&a, 64, 64).unwrap();
    let va = pipe
        .velocity(&a, &f.t["noise_packed"], 0.75, 3.5, &pe)
        .unwrap();
    let vb = f
        .pipe
        .velocity(&b, &f.t["noise_packed"], 0.75, 3.5, &pe)
        .unwrap();
    close("transformer from the all-in-one file", &va, &vb, 1e-6);
}
