//! Parity of the SD 3.5 pipeline with diffusers' `StableDiffusion3Pipeline` on tiny, randomly
//! initialised SD 3.5 Medium-shaped (MMDiT-X block, RMS q/k norms, T5, guidance 4.5 with a
//! negative prompt) and Large Turbo-shaped (plain blocks, no guidance, no T5) models made by
//! `tools/sd-fixtures/sd3.py` (versions in each `reference.json`).
//!
//! Tolerances as for Stable Diffusion: token ids and the seed's noise exact, sigmas exact,
//! embeddings, transformer outputs and latents within 1e-3 (max abs; observed values are
//! printed), pictures within 2/255.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::PathBuf;

use candle::{Device, Tensor};
use pictor_diffusion::noise::NoiseSource;
use pictor_diffusion::sd3::{Sd3Conditioning, Sd3Files, Sd3Pipeline};
use pictor_diffusion::{NoControl, to_rgb8};
use serde_json::Value;

mod common;
use common::{all_in_one, close, ids, lora_cases, max_diff, noise, picture_diff, relative};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/diffusion/sd3")
}

struct Fixture {
    pipe: Sd3Pipeline,
    t: HashMap<String, Tensor>,
    json: Value,
}

fn fixture(variant: &str, transformer: Option<&str>) -> Fixture {
    let dir = root().join(variant);
    let files = Sd3Files {
        transformer: transformer.map(|f| dir.join(f)),
        ..Default::default()
    };
    let mut pipe = Sd3Pipeline::load_diffusers(&dir, &files, &Device::Cpu).unwrap();
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
            .unwrap();
    pipe.max_sequence_length = json["max_sequence_length"].as_u64().unwrap() as usize;
    let t = candle::safetensors::load(dir.join("reference.safetensors"), &Device::Cpu).unwrap();
    Fixture { pipe, t, json }
}

#[test]
fn text_encoders_match_transformers() {
    for variant in ["medium", "turbo"] {
        let f = fixture(variant, None);
        let prompt = f.json["prompt"].as_str().unwrap();
        assert_eq!(
            f.pipe.clip_l.tokenizer.encode(prompt),
            ids(&f.t["clip_l_ids"])
        );
        assert_eq!(
            f.pipe.clip_g.tokenizer.encode(prompt),
            ids(&f.t["clip_g_ids"])
        );
        if let Some((_, tok)) = &f.pipe.t5 {
            assert_eq!(
                tok.encode(prompt, f.pipe.max_sequence_length).unwrap(),
                ids(&f.t["t5_ids"])
            );
        }
        assert_eq!(f.pipe.t5.is_some(), f.json["t5"].as_bool().unwrap());
        let (l, lp) = f.pipe.encode_clip(&f.pipe.clip_l, prompt).unwrap();
        close(
            &format!("{variant} CLIP-L hidden"),
            &l,
            &f.t["clip_l_hidden"],
            1e-4,
        );
        close(
            &format!("{variant} CLIP-L pooled"),
            &lp,
            &f.t["clip_l_pooled"],
            1e-4,
        );
        let (g, gp) = f.pipe.encode_clip(&f.pipe.clip_g, prompt).unwrap();
        close(
            &format!("{variant} CLIP-G hidden"),
            &g,
            &f.t["clip_g_hidden"],
            1e-4,
        );
        close(
            &format!("{variant} CLIP-G pooled"),
            &gp,
            &f.t["clip_g_pooled"],
            1e-4,
        );
        let t5 = f.pipe.encode_t5(prompt).unwrap();
        close(&format!("{variant} T5"), &t5, &f.t["t5_embeds"], 1e-4);
        let cond = f.pipe.encode(prompt).unwrap();
        close(
            &format!("{variant} prompt embeds"),
            &cond.context,
            &f.t["prompt_embeds"],
            1e-4,
        );
        close(
            &format!("{variant} pooled"),
            &cond.pooled,
            &f.t["pooled"],
            1e-4,
        );
        let neg = f
            .pipe
            .encode(f.json["negative_prompt"].as_str().unwrap())
            .unwrap();
        close(
            &format!("{variant} negative embeds"),
            &neg.context,
            &f.t["negative_prompt_embeds"],
            1e-4,
        );
        close(
            &format!("{variant} negative pooled"),
            &neg.pooled,
            &f.t["negative_pooled"],
            1e-4,
        );
    }
}

/// One transformer evaluation at timestep 750, from the diffusers folder and from the
/// transformer as Stability AI's single file (`model.diffusion_model.` keys, config from the
/// folder, and without it: read off the weights).
#[test]
fn transformer_matches_diffusers() {
    for (variant, file) in [
        ("medium", None),
        ("medium", Some("transformer_sai.safetensors")),
        ("turbo", None),
        ("turbo", Some("transformer_sai.safetensors")),
    ] {
        let f = fixture(variant, file);
        let size = f.json["size"].as_u64().unwrap() as usize;
        let seed = f.json["seed"].as_u64().unwrap();
        let latents = f
            .pipe
            .noise(&mut noise(seed) as &mut dyn NoiseSource, size, size)
            .unwrap();
        assert_eq!(max_diff(&latents, &f.t["noise"]), 0.0, "seed noise");
        let v = f
            .pipe
            .transformer
            .forward(&latents, 750.0, &f.t["prompt_embeds"], &f.t["pooled"])
            .unwrap();
        close(
            &format!("{variant} {file:?} transformer"),
            &v,
            &f.t["transformer_out"],
            1e-4,
        );
    }
}

/// Stability AI's names alone give the shape: depth, heads (from the q/k norms), the position
/// table, the MMDiT-X blocks.
#[test]
fn config_from_stability_names_matches_diffusers() {
    for variant in ["medium", "turbo"] {
        let dir = root().join(variant);
        let w = pictor_diffusion::flux::weights::WeightMap::safetensors(
            &[dir.join("transformer_sai.safetensors")],
            &Device::Cpu,
            |n| {
                n.strip_prefix("model.diffusion_model.")
                    .unwrap_or(n)
                    .to_string()
            },
            None,
        )
        .unwrap();
        let from_names = pictor_diffusion::sd3::model::Sd3Config::from_sai_names(&w).unwrap();
        let json: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("transformer/config.json")).unwrap(),
        )
        .unwrap();
        let from_json = pictor_diffusion::sd3::model::Sd3Config::from_diffusers(&json).unwrap();
        assert_eq!(from_names, from_json, "{variant}");
        if variant == "medium" {
            let w = pictor_diffusion::flux::weights::WeightMap::gguf(
                &dir.join("transformer.gguf"),
                &Device::Cpu,
                |n| n.to_string(),
            )
            .unwrap();
            let from_gguf = pictor_diffusion::sd3::model::Sd3Config::from_sai_names(&w).unwrap();
            assert_eq!(from_gguf, from_json, "GGUF");
        }
    }
}

#[test]
fn pictures_match_diffusers() {
    for variant in ["medium", "turbo"] {
        let f = fixture(variant, None);
        let size = f.json["size"].as_u64().unwrap() as usize;
        let steps = f.json["steps"].as_u64().unwrap() as usize;
        let guidance = f.json["guidance"].as_f64().unwrap() as f32;
        let seed = f.json["seed"].as_u64().unwrap();
        let prompt = f.json["prompt"].as_str().unwrap();
        let negative = f.json["negative_prompt"].as_str().unwrap();

        let latents = f
            .pipe
            .noise(&mut noise(seed) as &mut dyn NoiseSource, size, size)
            .unwrap();
        let sigmas = f.pipe.sigmas(steps, &latents).unwrap();
        let want: Vec<f32> = f.t["sigmas"].to_vec1().unwrap();
        assert_eq!(sigmas, want, "{variant} sigmas");

        let cond = f.pipe.encode(prompt).unwrap();
        let uncond: Option<Sd3Conditioning> =
            (guidance > 1.0).then(|| f.pipe.encode(negative).unwrap());
        let mut x = latents;
        let want_steps = &f.t["latents_steps"];
        for k in 0..steps {
            let v = f
                .pipe
                .velocity(&cond, uncond.as_ref(), guidance, &x, sigmas[k] * 1000.0)
                .unwrap();
            x = (x + (v * f64::from(sigmas[k + 1] - sigmas[k])).unwrap()).unwrap();
            close(
                &format!("{variant} latents after step {}", k + 1),
                &x,
                &want_steps.get(k).unwrap(),
                1e-3,
            );
        }
        let raw = f.pipe.decode_raw(&x).unwrap();
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
                negative,
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

/// The medium transformer as city96's converter writes SD 3.5 GGUFs (gguf-py, Q8_0 where rows
/// allow, float16 elsewhere — exact here: the weights are on the float16 grid): within Q8_0's
/// tolerance of the float model (relative RMS 2 %, max 3 %, as FLUX's).
#[test]
fn gguf_from_gguf_py_matches() {
    let f = fixture("medium", Some("transformer.gguf"));
    let v = f
        .pipe
        .transformer
        .forward(&f.t["noise"], 750.0, &f.t["prompt_embeds"], &f.t["pooled"])
        .unwrap();
    let (rms, max) = relative(&v, &f.t["transformer_out"]);
    println!("gguf-py Q8_0/F16 transformer: relative RMS {rms:.2e}, max {max:.2e}");
    assert!(rms <= 0.02 && max <= 0.03, "{rms} {max}");
}

/// Hostile or mismatched sizes are refused with a message, not a panic.
#[test]
fn bad_sizes_are_refused() {
    let f = fixture("turbo", None);
    for (w, h) in [(0, 64), (60, 64), (64, 8), (16 * 200, 64)] {
        let err = f
            .pipe
            .noise(&mut noise(1) as &mut dyn NoiseSource, w, h)
            .err()
            .unwrap_or_else(|| panic!("{w}×{h} accepted"));
        println!("{w}×{h}: {err}");
    }
}

/// SD 3 LoRAs as people have them — diffusers / PEFT files (`transformer.…lora_A`: q, k, v on
/// row ranges of the joined `qkv`, the second attention of the MMDiT-X block, the last block's
/// context modulation and the final one with their halves exchanged, embedders, both CLIPs)
/// and kohya / sd-scripts files under Stability AI's names (`lora_unet_joint_blocks_0_x_block_
/// attn_qkv`, `lora_te1_` / `lora_te2_`) — alone at 0.7 and two at once (0.8, 0.6), against
/// diffusers' `load_lora_weights` + `set_adapters` + `fuse_lora` on the tiny SD 3.5 Medium (the
/// kohya file's layers given to diffusers as the same diffusers modules: diffusers reads no SD 3
/// kohya files): whole pictures with guidance and a negative prompt, latents within 1e-3,
/// pictures within 2/255. On the Stability AI single file the folder's latents.
#[test]
fn loras_match_diffusers_fuse_lora() {
    let lora_dir = root().join("../lora/sd3");
    let refs =
        candle::safetensors::load(lora_dir.join("reference.safetensors"), &Device::Cpu).unwrap();
    let dir = root().join("medium");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(lora_dir.join("reference.json")).unwrap())
            .unwrap();
    let prompt = json["prompt"].as_str().unwrap();
    let negative = json["negative_prompt"].as_str().unwrap();
    let steps = json["steps"].as_u64().unwrap() as usize;
    let guidance = json["guidance"].as_f64().unwrap() as f32;
    let seed = json["seed"].as_u64().unwrap();
    let draw = |files: &Sd3Files, loras: &[pictor_diffusion::lora::LoraSpec]| {
        let mut pipe = Sd3Pipeline::load_with_loras(&dir, files, loras, &Device::Cpu).unwrap();
        pipe.max_sequence_length = 24;
        let latents = pipe
            .noise(&mut noise(seed) as &mut dyn NoiseSource, 64, 64)
            .unwrap();
        let cond = pipe.encode(prompt).unwrap();
        let uncond = pipe.encode(negative).unwrap();
        let x = pipe
            .denoise(&cond, Some(&uncond), guidance, latents, steps, &NoControl)
            .unwrap();
        let raw = pipe.decode_raw(&x).unwrap();
        (x, to_rgb8(&raw).unwrap())
    };
    for (case, loras) in lora_cases(&lora_dir) {
        let (latents, rgb) = draw(&Sd3Files::default(), &loras);
        close(
            &format!("SD 3 LoRA case {case} latents"),
            &latents,
            &refs[&format!("{case}_latents")],
            1e-3,
        );
        let what = format!("SD 3 LoRA case {case}");
        let worst = picture_diff(&what, &rgb, &refs[&format!("{case}_image")]);
        assert!(worst <= 2.0, "{case}: {worst}/255");
        if case == "ab" {
            let single = Sd3Files {
                transformer: Some(dir.join("transformer_sai.safetensors")),
                ..Default::default()
            };
            close(
                "LoRAs on the Stability AI single file",
                &draw(&single, &loras).0,
                &latents,
                1e-5,
            );
        }
    }
    // A FLUX LoRA finds no place in SD 3.
    let flux = root().join("../lora/flux/detail_kohya.safetensors");
    let spec = pictor_diffusion::lora::LoraSpec {
        path: flux,
        unet: 1.0,
        text: 1.0,
    };
    let e = Sd3Pipeline::load_with_loras(&dir, &Sd3Files::default(), &[spec], &Device::Cpu)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not in this model"), "{e}");
}

/// An all-in-one single file as ComfyUI and Stability AI bundle them (the MMDiT under
/// `model.diffusion_model.`, CLIP-L / bigG / T5 under `text_encoders.…transformer.`, a VAE
/// under `first_stage_model.`) as the mapping's transformer file, with a folder that keeps only
/// the text encoders' configurations: the bundled encoders are used (the same conditioning and
/// the same velocity as the folder's pipeline); the bundled VAE is left to the folder's. A T5 in
/// ComfyUI's scaled float8 is refused with what to use instead.
#[test]
fn all_in_one_single_files_bring_their_text_encoders() {
    let dir = root().join("medium");
    let f = fixture("medium", None);
    let (_tmp, aio, bare) = all_in_one(
        &dir,
        "transformer_sai.safetensors",
        &[
            ("text_encoder", "text_encoders.clip_l.transformer."),
            ("text_encoder_2", "text_encoders.clip_g.transformer."),
            ("text_encoder_3", "text_encoders.t5xxl.transformer."),
        ],
        &[
            "model_index.json",
            "scheduler/scheduler_config.json",
            "text_encoder/config.json",
            "text_encoder_2/config.json",
            "text_encoder_3/config.json",
            "tokenizer/merges.txt",
            "tokenizer/vocab.json",
            "tokenizer/tokenizer_config.json",
            "tokenizer_2/merges.txt",
            "tokenizer_2/vocab.json",
            "tokenizer_2/tokenizer_config.json",
            "tokenizer_3/tokenizer.json",
            "transformer/config.json",
            "vae/config.json",
            "vae/diffusion_pytorch_model.safetensors",
        ],
    );
    let files = Sd3Files {
        transformer: Some(aio.clone()),
        ..Default::default()
    };
    let mut pipe = Sd3Pipeline::load_diffusers(&bare, &files, &Device::Cpu).unwrap();
    pipe.max_sequence_length = f.pipe.max_sequence_length;
    let prompt = f.json["prompt"].as_str().unwrap();
    let (a, b) = (pipe.encode(prompt).unwrap(), f.pipe.encode(prompt).unwrap());
    close(
        "bundled encoders' prompt embeddings",
        &a.context,
        &b.context,
        1e-6,
    );
    close("bundled encoders' pooled", &a.pooled, &b.pooled, 1e-6);
    let x = f.t["noise"].clone();
    let va = pipe.velocity(&a, None, 1.0, &x, 750.0).unwrap();
    let vb = f.pipe.velocity(&b, None, 1.0, &x, 750.0).unwrap();
    close("transformer from the all-in-one file", &va, &vb, 1e-6);

    // A float8 (e4m3) T5, as `sd3_medium_incl_clips_t5xxlfp8.safetensors` holds it: read as
    // the same weights rounded to float8 and widened (given as the mapping's T5 file, which
    // comes before the bundled one).
    let mut all = candle::safetensors::load(&aio, &Device::Cpu).unwrap();
    let mut widened = HashMap::new();
    for (k, t) in all.iter_mut() {
        if let Some(rest) = k.strip_prefix("text_encoders.t5xxl.transformer.") {
            let f8 = t.to_dtype(candle::DType::F8E4M3).unwrap();
            widened.insert(rest.to_owned(), f8.to_dtype(candle::DType::F32).unwrap());
            *t = f8;
        }
    }
    let fp8 = aio.with_file_name("incl_clips_t5xxlfp8.safetensors");
    candle::safetensors::save(&all, &fp8).unwrap();
    let t5_file = aio.with_file_name("t5_rounded.safetensors");
    candle::safetensors::save(&widened, &t5_file).unwrap();
    let embed = |files: Sd3Files| {
        let mut p = Sd3Pipeline::load_diffusers(&bare, &files, &Device::Cpu).unwrap();
        p.max_sequence_length = f.pipe.max_sequence_length;
        p.encode(prompt).unwrap().context
    };
    let from_fp8 = embed(Sd3Files {
        transformer: Some(fp8),
        ..Default::default()
    });
    let from_rounded = embed(Sd3Files {
        transformer: Some(aio.clone()),
        text_encoder_3: Some(t5_file),
        ..Default::default()
    });
    close("bundled float8 T5", &from_fp8, &from_rounded, 1e-6);

    // Scaled float8 T5 (ComfyUI's `t5xxl_fp8_e4m3fn_scaled`): refused by name.
    let mut all = candle::safetensors::load(&aio, &Device::Cpu).unwrap();
    all.insert(
        "text_encoders.t5xxl.transformer.encoder.block.0.layer.0.SelfAttention.q.scale_weight"
            .into(),
        Tensor::ones(1, candle::DType::F32, &Device::Cpu).unwrap(),
    );
    candle::safetensors::save(&all, &aio).unwrap();
    let e = Sd3Pipeline::load_diffusers(&bare, &files, &Device::Cpu)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("scaled float8"), "{e}");
}
