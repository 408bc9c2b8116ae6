//! Full-size speed and memory of the built-in diffusion engine, next to diffusers + torch.
//!
//! ```sh
//! cargo bench -p pictor-diffusion --bench diffusion                      # Pictor only
//! PICTOR_BENCH_PYTHON=/tmp/sdref/bin/python cargo bench -p pictor-diffusion --bench diffusion
//! PICTOR_DIFFUSION_BENCH_ONLY=sd21 cargo bench -p pictor-diffusion --bench diffusion
//! ```
//!
//! The networks have the real SD 2.1 (SD-Turbo), SD 1.5 and SDXL architectures
//! (`tools/bench/sd_architectures.json`, read by both sides) and random weights: timings do not
//! depend on the values. Every case runs in a fresh process (this binary again, or
//! `tools/bench/diffusion_torch.py`) so its peak RSS (`VmHWM`) is its own; both engines use 2
//! threads. Results go to stdout and `target/diffusion-bench.md`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

fn main() {
    bench::main();
}

mod bench {
    use std::path::PathBuf;
    use std::process::Command;
    use std::time::Instant;

    use candle::quantized::{GgmlDType, QStorage, QTensor};
    use candle::{DType, Device, Shape, Tensor};
    use candle_nn::VarBuilder;
    use candle_nn::var_builder::SimpleBackend;
    use pictor_diffusion::net::clip::ClipTextTransformer;
    use pictor_diffusion::net::linear::Weights;
    use pictor_diffusion::net::unet_2d::{TextTime, UNet2DConditionModel};
    use pictor_diffusion::net::vae::AutoEncoderKL;
    use pictor_diffusion::{flux, load, sd3};
    use serde_json::{Value, json};

    const CASE_ENV: &str = "PICTOR_DIFFUSION_BENCH_CASE";

    /// (architecture, part, picture side, variant)
    const CASES: &[(&str, &str, usize, &str)] = &[
        ("sd21", "text", 512, "f32"),
        ("sd21", "unet", 512, "f32"),
        ("sd21", "unet", 512, "f32-sliced"),
        ("sd21", "unet", 512, "f16"),
        ("sd21", "vae", 512, "f32"),
        ("sd21", "vae", 512, "f32-tiled32"),
        ("sd21", "taesd", 512, "f32"),
        ("sd21", "turbo", 512, "f32"),
        ("sd21", "text", 512, "int8"),
        ("sd21", "turbo", 512, "int8"),
        ("sd21", "unet", 512, "int8"),
        ("sd21", "turbo", 512, "int8-all"),
        ("sd15", "text", 512, "f32"),
        ("sd15", "unet", 512, "f32"),
        ("sd15", "unet", 512, "f32-cfg"),
        ("sd15", "text", 512, "int8"),
        ("sd15", "unet", 512, "int8-cfg"),
        ("sd15", "picture20", 512, "f32"),
        ("sd15", "picture20", 512, "int8-all"),
        ("sdxl", "text", 1024, "f32"),
        ("sdxl", "unet", 512, "f32"),
        ("sdxl", "unet", 1024, "f32"),
        ("sdxl", "unet", 1024, "int8"),
        ("sdxl", "vae", 1024, "f32-tiled"),
        ("flux", "t5", 512, "q8_0"),
        ("flux", "step", 512, "q4k"),
        ("flux", "step", 512, "q4k-lora16"),
        ("flux", "step", 512, "q8_0"),
        ("flux", "vae16", 512, "f32"),
        ("sd35m", "step", 512, "f32"),
        ("sd35m", "step", 512, "q8_0"),
        ("sd35m", "picture2", 512, "f32"),
    ];

    /// The UNet of `config`, its transformer layers in 8 bits for the `int8-all` variants (the
    /// text encoders' too: `int8` alone is the text encoders only).
    fn unet_for(config: &Value, vb: VarBuilder, variant: &str) -> UNet2DConditionModel {
        let mut shape = load::unet_config(config).unwrap();
        if variant == "int8-all" {
            shape.config.weights = int8_weights();
        }
        UNet2DConditionModel::new(vb, 4, 4, shape.config).unwrap()
    }

    /// 8-bit UNet layers, which this CPU must be able to run (else the case would time float32).
    fn int8_weights() -> Weights {
        assert!(
            pictor_diffusion::net::linear_int8::available(),
            "the int8 UNet cases need a CPU with AVX-512 VNNI"
        );
        Weights::Int8
    }

    fn root() -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
    }

    fn architectures() -> Value {
        let p = root().join("tools/bench/sd_architectures.json");
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    fn peak_rss() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .map_or(0, |kb| kb * 1024)
    }

    /// Random weights on demand: uniform with the variance of PyTorch's default init
    /// (1/fan_in), norm scales near one; deterministic per tensor name.
    struct RandomWeights;

    impl SimpleBackend for RandomWeights {
        fn get(
            &self,
            s: Shape,
            name: &str,
            _: candle_nn::Init,
            dtype: DType,
            dev: &Device,
        ) -> candle::Result<Tensor> {
            let dims = s.dims().to_vec();
            let n = s.elem_count();
            let fan_in: usize = dims.iter().skip(1).product::<usize>().max(1);
            let norm = dims.len() == 1 && name.ends_with("weight");
            let a = if dims.len() == 1 {
                0.02
            } else {
                (3.0 / fan_in as f32).sqrt()
            };
            let mut x = name.bytes().fold(0x9E37_79B9_7F4A_7C15u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)
            }) | 1;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let u = (x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                v.push(if norm { 1.0 + 0.1 * u } else { a * u });
            }
            Tensor::from_vec(v, s, dev)?.to_dtype(dtype)
        }

        fn get_unchecked(&self, name: &str, _: DType, _: &Device) -> candle::Result<Tensor> {
            candle::bail!("{name}: shape unknown")
        }

        fn contains_tensor(&self, name: &str) -> bool {
            // The VAE attention asks which naming the weights use: the current one.
            !name.contains(".query.") && !name.ends_with("query.weight")
        }
    }

    fn quant(variant: &str) -> GgmlDType {
        match variant.split('-').next().unwrap_or(variant) {
            "q4k" => GgmlDType::Q4K,
            "q5k" => GgmlDType::Q5K,
            "q8_0" => GgmlDType::Q8_0,
            other => panic!("no quantisation {other}"),
        }
    }

    /// Random weights for quantised networks, made as blocks (quantising 12 billion floats
    /// would take minutes): matrices whose rows fit `dtype`'s blocks get random block bytes
    /// with small, finite scales (the leading float16 `d`, and `dmin` for K-quants); the rest
    /// (norm scales, biases, short rows) random floats. Timings do not depend on the values.
    fn random_quantised(
        shapes: Vec<(String, Vec<usize>)>,
        dtype: GgmlDType,
    ) -> flux::weights::WeightMap {
        let mut map = std::collections::HashMap::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (name, shape) in shapes {
            let n: usize = shape.iter().product();
            let rows = *shape.last().unwrap();
            let w = if shape.len() == 2 && rows % dtype.block_size() == 0 {
                let (block, bytes) = (
                    dtype.type_size(),
                    n / dtype.block_size() * dtype.type_size(),
                );
                let mut data = vec![0u8; bytes];
                for c in data.chunks_mut(8) {
                    let r = next().to_le_bytes();
                    c.copy_from_slice(&r[..c.len()]);
                }
                let scale = half::f16::from_f32(0.0005).to_le_bytes();
                for b in data.chunks_mut(block) {
                    b[..2].copy_from_slice(&scale);
                    if dtype != GgmlDType::Q8_0 {
                        b[2..4].copy_from_slice(&scale);
                    }
                }
                let storage =
                    QStorage::from_data(std::borrow::Cow::Owned(data), &Device::Cpu, dtype)
                        .unwrap();
                flux::weights::Weight::Quant(std::sync::Arc::new(
                    QTensor::new(storage, shape.as_slice()).unwrap(),
                ))
            } else {
                let v: Vec<f32> = (0..n)
                    .map(|_| 1.0 + ((next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.02)
                    .collect();
                flux::weights::Weight::Float(
                    Tensor::from_vec(v, shape.as_slice(), &Device::Cpu).unwrap(),
                )
            };
            map.insert(name, w);
        }
        flux::weights::WeightMap::new(map, &Device::Cpu, "random".into())
    }

    /// Random float32 weights of these shapes (as [`RandomWeights`]).
    fn random_float(shapes: Vec<(String, Vec<usize>)>) -> flux::weights::WeightMap {
        let map = shapes
            .into_iter()
            .map(|(name, shape)| {
                let t = RandomWeights
                    .get(
                        Shape::from(shape.as_slice()),
                        &name,
                        candle_nn::Init::Const(0.0),
                        DType::F32,
                        &Device::Cpu,
                    )
                    .unwrap();
                (name, flux::weights::Weight::Float(t))
            })
            .collect();
        flux::weights::WeightMap::new(map, &Device::Cpu, "random".into())
    }

    fn randn(shape: &[usize], dtype: DType) -> Tensor {
        Tensor::randn(0f32, 1f32, shape, &Device::Cpu)
            .unwrap()
            .to_dtype(dtype)
            .unwrap()
    }

    /// Runs one case in this process; prints its JSON result.
    fn child(case: &str) {
        let parts: Vec<&str> = case.split(':').collect();
        let (arch, part, side, variant) = (
            parts[0],
            parts[1],
            parts[2].parse::<usize>().unwrap(),
            parts[3],
        );
        let dtype = if variant.starts_with("f16") {
            DType::F16
        } else {
            DType::F32
        };
        let a = architectures();
        let dev = Device::Cpu;
        let vb = VarBuilder::from_backend(Box::new(RandomWeights), dtype, dev.clone());
        let mut times = Vec::new();
        let load_start = Instant::now();
        match part {
            "unet" => {
                let mut shape = load::unet_config(&a[arch]["unet"]).unwrap();
                if variant.ends_with("sliced") {
                    shape.config.sliced_attention_size = Some(1);
                }
                // `int8…`: the transformer layers in 8 bits (`unet_weights = "int8"`); torch
                // runs the same case in float32.
                if variant.starts_with("int8") {
                    shape.config.weights = int8_weights();
                }
                let ctx_dim = shape.config.cross_attention_dim;
                let sdxl = shape.config.text_time.is_some();
                let unet = UNet2DConditionModel::new(vb, 4, 4, shape.config).unwrap();
                let load_s = load_start.elapsed().as_secs_f64();
                // `…-cfg`: the guidance batch of two, as a step with CFG runs it.
                let batch = if variant.ends_with("cfg") { 2 } else { 1 };
                let x = randn(&[batch, 4, side / 8, side / 8], dtype);
                let ctx = randn(&[batch, 77, ctx_dim], dtype);
                let pooled = randn(&[1, 1280], dtype);
                let ids = Tensor::new(
                    &[[side as f32, side as f32, 0.0, 0.0, side as f32, side as f32]],
                    &dev,
                )
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
                for _ in 0..2 {
                    let tt = TextTime {
                        text_embeds: &pooled,
                        time_ids: &ids,
                    };
                    let t = Instant::now();
                    let out = unet.forward(&x, 999.0, &ctx, sdxl.then_some(&tt)).unwrap();
                    let _ = out
                        .sum_all()
                        .unwrap()
                        .to_dtype(DType::F32)
                        .unwrap()
                        .to_scalar::<f32>()
                        .unwrap();
                    times.push(t.elapsed().as_secs_f64());
                }
                let _ = load_s;
            }
            "vae" => {
                let (cfg, _, vin, vout) = load::vae_config(&a["vae"]).unwrap();
                let vae = AutoEncoderKL::new(vb, vin, vout, cfg).unwrap();
                let z = randn(&[1, 4, side / 8, side / 8], dtype);
                let t = Instant::now();
                let out = if variant.ends_with("tiled32") {
                    pictor_diffusion::tiled_decode(&vae, &z, 32, 8).unwrap()
                } else if variant.ends_with("tiled") {
                    pictor_diffusion::tiled_decode(&vae, &z, 64, 16).unwrap()
                } else {
                    vae.decode(&z).unwrap()
                };
                let _ = out
                    .sum_all()
                    .unwrap()
                    .to_dtype(DType::F32)
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap();
                times.push(t.elapsed().as_secs_f64());
            }
            "t5" if arch == "flux" => {
                // T5-XXL's encoder on FLUX.1-schnell's 256 tokens, 8-bit blocks (city96's
                // t5-v1_1-xxl-encoder-Q8_0.gguf).
                let cfg = flux::t5::T5Config::xxl();
                let mut w = random_quantised(flux::t5::t5_shapes(&cfg), quant(variant));
                let t5 = flux::t5::T5Encoder::new(&cfg, &mut w).unwrap();
                let ids = Tensor::new(&[[3u32; 256]], &dev).unwrap();
                for _ in 0..2 {
                    let t = Instant::now();
                    let out = t5.forward(&ids).unwrap();
                    let _ = out.sum_all().unwrap().to_scalar::<f32>().unwrap();
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            "step" if arch == "flux" => {
                // One evaluation of FLUX.1-schnell's transformer at `side`² (packed 2×2
                // patches: 1024 image tokens at 512²) with 256 T5 tokens, its matrices in
                // `variant` blocks (city96's flux1-schnell-Q4_K_S / -Q8_0 GGUFs).
                let cfg = flux::model::FluxConfig::flux1(false);
                let mut w = random_quantised(flux::model::bfl_shapes(&cfg), quant(variant));
                if variant.ends_with("-lora16") {
                    // A rank-16 LoRA on every matrix of every block (qkv, projections, MLPs,
                    // modulations, linear1/2: 8 + 4 per block, 266 in all), kept beside the
                    // quantised weights and applied in each product, as Pictor applies them.
                    let names: Vec<String> = w
                        .names()
                        .filter(|n| n.contains("blocks.") && n.ends_with(".weight"))
                        .filter(|n| w.dims_of(n).is_some_and(|d| d.len() == 2))
                        .cloned()
                        .collect();
                    for n in names {
                        let d = w.dims_of(&n).unwrap();
                        let up = randn(&[d[0], 16], DType::F32);
                        let down = randn(&[16, d[1]], DType::F32);
                        w.add_low_rank(&n, up, down).unwrap();
                    }
                }
                let model = flux::model::Flux::new(&cfg, &mut w).unwrap();
                let grid = side / 16;
                let img = randn(&[1, grid * grid, 64], DType::F32);
                let txt = randn(&[1, 256, 4096], DType::F32);
                let y = randn(&[1, 768], DType::F32);
                let pe = model
                    .positions(&vec![[0.0; 3]; 256], &flux::image_ids(grid, grid), &dev)
                    .unwrap();
                for _ in 0..2 {
                    let t = Instant::now();
                    let out = model.forward(&img, &txt, &y, 1.0, None, &pe).unwrap();
                    let _ = out.sum_all().unwrap().to_scalar::<f32>().unwrap();
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            "step" if arch == "sd35m" => {
                // One evaluation of SD 3.5 Medium's MMDiT at `side`² (2×2 patches: 1024 image
                // tokens at 512²) with 77 CLIP + 256 T5 tokens, float32 or 8-bit blocks.
                let cfg = sd3::model::Sd3Config::sd35_medium();
                let shapes = sd3::model::sai_shapes(&cfg);
                let mut w = if variant == "f32" {
                    random_float(shapes)
                } else {
                    random_quantised(shapes, quant(variant))
                };
                let model = sd3::model::Mmdit::new(&cfg, &mut w).unwrap();
                let x = randn(&[1, 16, side / 8, side / 8], DType::F32);
                let ctx = randn(&[1, 333, 4096], DType::F32);
                let y = randn(&[1, 2048], DType::F32);
                for _ in 0..2 {
                    let t = Instant::now();
                    let out = model.forward(&x, 999.0, &ctx, &y).unwrap();
                    let _ = out.sum_all().unwrap().to_scalar::<f32>().unwrap();
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            "picture2" if arch == "sd35m" => {
                // A whole SD 3.5 Medium picture at `side`², 2 steps with guidance 4.5 (prompt
                // and negative prompt in one batch): CLIP-L and bigG (float32), T5-XXL in 8-bit
                // blocks (as a float T5 over 4 GB loads, or city96's Q8_0 GGUF), the MMDiT in
                // float32, the 16-channel VAE — everything resident at once, as the server
                // holds it. The time includes the text encoders and the decode, not the load.
                let clip = |i: usize, c: &Value, pad: Option<&str>| {
                    let (cfg, _) = load::clip_config(c).unwrap();
                    sd3::ClipPart {
                        model: ClipTextTransformer::new(vb.pp(format!("te{i}")), &cfg, true)
                            .unwrap(),
                        tokenizer: pictor_diffusion::tokenizer::ClipTokenizer::builtin(pad)
                            .unwrap(),
                    }
                };
                let encoders = a["sdxl"]["text_encoders"].as_array().unwrap();
                let clip_l = clip(0, &encoders[0], None);
                let clip_g = clip(1, &encoders[1], Some("!"));
                let t5_cfg = flux::t5::T5Config::xxl();
                let mut w = random_quantised(flux::t5::t5_shapes(&t5_cfg), GgmlDType::Q8_0);
                let t5 = flux::t5::T5Encoder::new(&t5_cfg, &mut w).unwrap();
                let tok = flux::t5::T5Tokenizer::load(&root().join(
                    "crates/pictor-diffusion/tests/fixtures/diffusion/flux/dev/tokenizer_2/tokenizer.json",
                ))
                .unwrap();
                let cfg = sd3::model::Sd3Config::sd35_medium();
                let mut w = random_float(sd3::model::sai_shapes(&cfg));
                let mmdit = sd3::model::Mmdit::new(&cfg, &mut w).unwrap();
                let (mut vcfg, _, vin, vout) = load::vae_config(&a["vae"]).unwrap();
                vcfg.latent_channels = 16;
                vcfg.use_quant_conv = false;
                vcfg.use_post_quant_conv = false;
                let vae = AutoEncoderKL::new(vb.pp("vae"), vin, vout, vcfg).unwrap();
                let pipe = sd3::Sd3Pipeline::from_parts(
                    clip_l,
                    clip_g,
                    Some((t5, tok)),
                    mmdit,
                    vae,
                    (1.5305, 0.0609),
                    flux::FlowSchedule {
                        shift: 3.0,
                        dynamic: None,
                    },
                    &dev,
                );
                let t = Instant::now();
                let mut noise = pictor_diffusion::noise::TorchCpu::new(7);
                let rgb = pipe
                    .txt2img(
                        "a lighthouse on a cliff at dusk, oil painting",
                        "blurry",
                        &mut noise,
                        side,
                        side,
                        2,
                        4.5,
                        &pictor_diffusion::NoControl,
                    )
                    .unwrap();
                assert_eq!(rgb.len(), side * side * 3);
                times.push(t.elapsed().as_secs_f64());
            }
            "vae16" => {
                // FLUX's 16-channel VAE decoder (SD's widths, no quant convs).
                let (mut cfg, _, vin, vout) = load::vae_config(&a["vae"]).unwrap();
                cfg.latent_channels = 16;
                cfg.use_quant_conv = false;
                cfg.use_post_quant_conv = false;
                let vae = AutoEncoderKL::new(vb, vin, vout, cfg).unwrap();
                let z = randn(&[1, 16, side / 8, side / 8], dtype);
                let t = Instant::now();
                let out = vae.decode(&z).unwrap();
                let _ = out.sum_all().unwrap().to_scalar::<f32>().unwrap();
                times.push(t.elapsed().as_secs_f64());
            }
            "taesd" => {
                let tiny =
                    pictor_diffusion::taesd::TinyDecoder::new(vb.pp("decoder.layers"), &json!({}))
                        .unwrap();
                let z = randn(&[1, 4, side / 8, side / 8], dtype);
                for _ in 0..2 {
                    let t = Instant::now();
                    let out = tiny.decode(&z).unwrap();
                    let _ = out.sum_all().unwrap().to_scalar::<f32>().unwrap();
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            "turbo" => {
                // A whole SD-Turbo picture: text encoding, one UNet step without guidance, the
                // tiny decoder.
                let (mut tc, proj) = load::clip_config(&a[arch]["text_encoders"][0]).unwrap();
                tc.int8 = variant.starts_with("int8");
                let text = ClipTextTransformer::new(vb.pp("te"), &tc, proj).unwrap();
                let unet = unet_for(&a[arch]["unet"], vb.pp("unet"), variant);
                let tiny =
                    pictor_diffusion::taesd::TinyDecoder::new(vb.pp("taesd"), &json!({})).unwrap();
                let ids = Tensor::new(&[[49406u32; 77]], &dev).unwrap();
                let x = randn(&[1, 4, side / 8, side / 8], dtype);
                for _ in 0..2 {
                    let t = Instant::now();
                    let ctx = text.encode(&ids, None).unwrap().last;
                    let eps = unet.forward(&x, 999.0, &ctx, None).unwrap();
                    let out = tiny.decode(&(&x - eps).unwrap()).unwrap();
                    let _ = out.sum_all().unwrap().to_scalar::<f32>().unwrap();
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            "picture20" => {
                // A whole SD 1.5 picture as a pipeline makes it: the prompt and the negative
                // prompt encoded, 20 UNet steps on the guidance batch of two, the VAE decode.
                // The scheduler's arithmetic (a few element-wise operations) is left out on
                // both sides.
                let (mut tc, proj) = load::clip_config(&a[arch]["text_encoders"][0]).unwrap();
                tc.int8 = variant.starts_with("int8");
                let text = ClipTextTransformer::new(vb.pp("te"), &tc, proj).unwrap();
                let unet = unet_for(&a[arch]["unet"], vb.pp("unet"), variant);
                let (vc, _, vin, vout) = load::vae_config(&a["vae"]).unwrap();
                let vae = AutoEncoderKL::new(vb.pp("vae"), vin, vout, vc).unwrap();
                let ids = Tensor::new(&[[49406u32; 77]], &dev).unwrap();
                let mut x = randn(&[1, 4, side / 8, side / 8], dtype);
                let t = Instant::now();
                let cond = text.encode(&ids, None).unwrap().last;
                let uncond = text.encode(&ids, None).unwrap().last;
                let ctx = Tensor::cat(&[&uncond, &cond], 0).unwrap();
                for step in 0..20 {
                    let both = Tensor::cat(&[&x, &x], 0).unwrap();
                    let eps = unet
                        .forward(&both, 999.0 - 50.0 * step as f64, &ctx, None)
                        .unwrap();
                    let e = eps.chunk(2, 0).unwrap();
                    let guided = (&e[0] + ((&e[1] - &e[0]).unwrap() * 7.5).unwrap()).unwrap();
                    x = (&x - (guided * 0.05).unwrap()).unwrap();
                }
                let out = vae.decode(&x).unwrap();
                let _ = out.sum_all().unwrap().to_scalar::<f32>().unwrap();
                times.push(t.elapsed().as_secs_f64());
            }
            "text" => {
                let encoders: Vec<(ClipTextTransformer, bool)> = a[arch]["text_encoders"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let (mut cfg, proj) = load::clip_config(c).unwrap();
                        cfg.int8 = variant == "int8";
                        (
                            ClipTextTransformer::new(vb.pp(format!("te{i}")), &cfg, proj).unwrap(),
                            proj,
                        )
                    })
                    .collect();
                let ids = Tensor::new(&[[49406u32; 77]], &dev).unwrap();
                // More passes for a profile: `PICTOR_DIFFUSION_BENCH_TEXT_PASSES=50 perf record …`.
                let passes = std::env::var("PICTOR_DIFFUSION_BENCH_TEXT_PASSES")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(2);
                for _ in 0..passes {
                    let t = Instant::now();
                    for (e, _) in &encoders {
                        let out = e.encode(&ids, (arch == "sdxl").then_some(1)).unwrap();
                        let _ = out
                            .last
                            .sum_all()
                            .unwrap()
                            .to_dtype(DType::F32)
                            .unwrap()
                            .to_scalar::<f32>()
                            .unwrap();
                    }
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            "lora" => {
                // Merging a LoRA at load against the same model without it, from files on disk
                // (not in the table: it needs a saved model and LoRA, e.g. tools/gpu/
                // diffusers_sd15.py's random SD 1.5 and a LoRA made for it):
                // PICTOR_BENCH_MODEL_DIR=… PICTOR_BENCH_LORA=… PICTOR_DIFFUSION_BENCH_CASE=sd15:lora:512:f32
                // seconds = [load, load with the LoRA merged, 1-step picture latents (CFG),
                // the same with the merged model].
                use pictor_diffusion::lora::LoraSpec;
                use pictor_diffusion::single_file::Overrides;
                use pictor_diffusion::{NoControl, Pipeline, Request};
                let var =
                    |k: &str| PathBuf::from(std::env::var(k).unwrap_or_else(|_| panic!("{k}")));
                let (dir, lora) = (var("PICTOR_BENCH_MODEL_DIR"), var("PICTOR_BENCH_LORA"));
                // Once to bring the files into the page cache.
                drop(Pipeline::load_diffusers(&dir, &Overrides::default(), &dev).unwrap());
                let t = Instant::now();
                let plain = Pipeline::load_diffusers(&dir, &Overrides::default(), &dev).unwrap();
                times.push(t.elapsed().as_secs_f64());
                let with = Overrides {
                    loras: vec![LoraSpec {
                        path: lora,
                        unet: 0.8,
                        text: 0.8,
                    }],
                    ..Overrides::default()
                };
                let t = Instant::now();
                let merged = Pipeline::load_diffusers(&dir, &with, &dev).unwrap();
                times.push(t.elapsed().as_secs_f64());
                let req = Request {
                    prompt: "a red fox in the snow".into(),
                    negative_prompt: String::new(),
                    steps: 1,
                    guidance: 7.5,
                    sampler: pictor_diffusion::scheduler::Sampler::Euler,
                    karras: None,
                    width: side,
                    height: side,
                };
                for p in [&plain, &merged] {
                    let mut noise = pictor_diffusion::noise::source(
                        pictor_diffusion::noise::NoiseKind::TorchCpu,
                        1,
                    );
                    let t = Instant::now();
                    p.txt2img_latents(&req, noise.as_mut(), &NoControl).unwrap();
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            other => panic!("unknown part {other}"),
        }
        println!(
            "{}",
            json!({"case": case, "seconds": times, "peak_rss": peak_rss(), "engine": "pictor (candle 0.11)"})
        );
    }

    fn run(cmd: &mut Command, case: &str) -> Value {
        let out = cmd.env(CASE_ENV, case).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            Some(v) => v,
            None => json!({
                "case": case,
                "error": format!(
                    "{} {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).lines().rev().take(3).collect::<Vec<_>>().join(" | ")
                )
            }),
        }
    }

    fn best(v: &Value) -> Option<f64> {
        v["seconds"]
            .as_array()
            .and_then(|a| a.iter().filter_map(Value::as_f64).reduce(f64::min))
    }

    /// The CPU features the engine's kernels can use (gemm's FMA, candle's 8-bit VNNI) and
    /// those a bfloat16 path would need (AVX-512 BF16, AMX), as this CPU reports them.
    fn cpu_features() -> String {
        #[cfg(target_arch = "x86_64")]
        {
            let has = [
                ("avx2", std::arch::is_x86_feature_detected!("avx2")),
                ("fma", std::arch::is_x86_feature_detected!("fma")),
                ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
                (
                    "avx512vnni",
                    std::arch::is_x86_feature_detected!("avx512vnni"),
                ),
                (
                    "avx512bf16",
                    std::arch::is_x86_feature_detected!("avx512bf16"),
                ),
                // AMX detection is not stable in std: Linux's flags say it.
                (
                    "amx-bf16",
                    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains(" amx_bf16")),
                ),
            ];
            let on: Vec<&str> = has.iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect();
            format!("features: {}", on.join(" "))
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            std::env::consts::ARCH.to_owned()
        }
    }

    pub fn main() {
        if let Ok(case) = std::env::var(CASE_ENV) {
            child(&case);
            return;
        }
        let only = std::env::var("PICTOR_DIFFUSION_BENCH_ONLY").unwrap_or_default();
        let python = std::env::var("PICTOR_BENCH_PYTHON").ok();
        let exe = std::env::current_exe().unwrap();
        let script = root().join("tools/bench/diffusion_torch.py");
        let mut rows = Vec::new();
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
            })
            .unwrap_or_default();
        let mut md = format!(
            "Machine: {cpu}, {} cores ({}); 2 threads per engine; one fresh process per case.\n\n| case | Pictor s | torch s | ratio | Pictor peak RSS | torch peak RSS | ratio |\n|---|---|---|---|---|---|---|\n",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_features()
        );
        println!("{md}");
        for (arch, part, side, variant) in CASES {
            let case = format!("{arch}:{part}:{side}:{variant}");
            if !only.is_empty() && !only.split(',').any(|o| case.contains(o)) {
                continue;
            }
            let ours = run(Command::new(&exe).env("RAYON_NUM_THREADS", "2"), &case);
            // FLUX: torch has no run here (its bfloat16 transformer alone is 23.8 GB);
            // quantised SD 3.5 neither (torch's is float32).
            let torch = match (
                &python,
                variant.contains("f16")
                    || variant.contains("tiled") && *side == 512
                    || *arch == "flux"
                    || *arch == "sd35m" && *variant != "f32",
            ) {
                (Some(py), false) => Some(run(
                    Command::new(py)
                        .arg(&script)
                        .env("OMP_NUM_THREADS", "2")
                        .env("MKL_NUM_THREADS", "2"),
                    &case,
                )),
                _ => None,
            };
            let gb = |v: &Value| v["peak_rss"].as_f64().map(|b| b / 1e9);
            let cell = |x: Option<f64>, unit: &str| {
                x.map_or("—".to_owned(), |x| format!("{x:.2}{unit}"))
            };
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
                _ => "—".into(),
            };
            let (ps, ts) = (best(&ours), torch.as_ref().and_then(best));
            let (pm, tm) = (gb(&ours), torch.as_ref().and_then(gb));
            let err = [Some(&ours), torch.as_ref()]
                .into_iter()
                .flatten()
                .filter_map(|v| v["error"].as_str())
                .collect::<Vec<_>>()
                .join("; ");
            let row = format!(
                "| {case}{} | {} | {} | {} | {} | {} | {} |",
                if err.is_empty() {
                    String::new()
                } else {
                    format!(" (failed: {err})")
                },
                cell(ps, ""),
                cell(ts, ""),
                ratio(ps, ts),
                cell(pm, " GB"),
                cell(tm, " GB"),
                ratio(pm, tm)
            );
            println!("{row}");
            md.push_str(&row);
            md.push('\n');
            rows.push(json!({"case": case, "pictor": ours, "torch": torch}));
        }
        let target = root().join("target");
        let _ = std::fs::create_dir_all(&target);
        std::fs::write(target.join("diffusion-bench.md"), &md).unwrap();
        std::fs::write(
            target.join("diffusion-bench.json"),
            serde_json::to_string_pretty(&rows).unwrap(),
        )
        .unwrap();
    }
}
