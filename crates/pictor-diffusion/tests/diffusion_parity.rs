//! Parity of the built-in diffusion engine with the reference pipeline (diffusers + transformers +
//! torch), on tiny randomly initialised models with the real SD 1.5, SD 2.1 (v-prediction) and
//! SDXL architectures. The models and the reference outputs were made by
//! `tools/sd-fixtures/generate.py` (versions in each `reference.json`) and are committed; CI
//! needs no Python.
//!
//! Tolerances: token ids and the seed's noise exact (on glibc, whose libm drew the reference), text
//! embeddings, UNet outputs and latents within 1e-3 (max abs), pictures within 2/255.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use candle::{DType, Device, Tensor};
use pictor_diffusion::noise::{NoiseKind, NoiseSource, TorchCpu, TorchFill, source};
use pictor_diffusion::scheduler::Sampler;
use pictor_diffusion::{NoControl, Pipeline, Request, StepControl, to_rgb8};
use serde_json::Value;

mod common;

/// Noise is bit-identical where the libm is glibc's (as for the reference); elsewhere libm's
/// logf/cosf/sinf may differ in the last bit.
const NOISE_TOL: f32 = if cfg!(all(target_os = "linux", target_env = "gnu")) {
    0.0
} else {
    1e-5
};

/// 8-bit text encoders against transformers' float32: Q8_0 rounds each weight to 1/254 of its
/// 32-weight block's largest and the activations likewise, so instead of the float32 test's
/// 1e-4 per value the error is bounded relative to the embeddings: its root mean square at most
/// this fraction of theirs, and no value off by more than [`INT8_TEXT_MAX`] of their largest.
const INT8_TEXT_RMS: f64 = 0.02;
const INT8_TEXT_MAX: f64 = 0.05;

/// The 8-bit UNet's tolerances (`int8_unet_stays_close_to_diffusers`): weights rounded to 1/127
/// of each output channel's largest and inputs to 1/127 of each row's largest, so the error is
/// bounded relative to the outputs, as for the text encoders; it grows over a run's steps and
/// through the VAE into the picture. Measured on the three fixtures (2026-11-29): step 0.3–0.9 %,
/// latents 0.7–1.9 %, pictures at most 2.4–8/255 apart, 0.4–0.7/255 on average; the bounds are
/// about twice the worst.
const INT8_UNET_STEP_RMS: f64 = 0.02;
const INT8_UNET_LATENTS_RMS: f64 = 0.04;
const INT8_UNET_PICTURE_MAX: f32 = 16.0;
const INT8_UNET_PICTURE_MEAN: f32 = 1.5;

/// `got` against `want` with the 8-bit tolerances (relative RMS and relative maximum).
fn close_relative(what: &str, got: &Tensor, want: &Tensor) {
    let (rms, max) = common::relative(got, want);
    println!("{what}: relative RMS error {rms:.2e}, max abs diff {max:.2e} of the largest");
    assert!(rms <= INT8_TEXT_RMS, "{what}: relative RMS error {rms}");
    assert!(
        max <= INT8_TEXT_MAX,
        "{what}: max error {max} of the largest"
    );
}

/// The fixtures were drawn with ATen's portable kernel (`ATEN_CPU_CAPABILITY=default`).
fn torch(seed: u64) -> TorchCpu {
    TorchCpu::with_fill(seed, TorchFill::Portable)
}

struct Fixture {
    pipe: Pipeline,
    t: HashMap<String, Tensor>,
    json: Value,
}

/// Where the checks compute: the CPU, or with `PICTOR_TEST_DEVICE=cuda` (a `cuda` build, as
/// tools/gpu/check.sh runs it on a GPU machine) the first NVIDIA GPU. Fixtures and references are
/// loaded there; the seed's noise is drawn on the CPU either way, as in the server.
fn dev() -> Device {
    match std::env::var("PICTOR_TEST_DEVICE").as_deref() {
        Ok("cuda") => {
            Device::new_cuda(0).expect("PICTOR_TEST_DEVICE=cuda needs a cuda build and a GPU")
        }
        _ => Device::Cpu,
    }
}

/// The fixtures: beside the sources, or under `PICTOR_TEST_FIXTURES` (a test binary copied to
/// another machine, with `tests/fixtures` copied beside it).
fn fixtures_root() -> PathBuf {
    std::env::var_os("PICTOR_TEST_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"))
        .join("diffusion")
}

fn fixture_dir(arch: &str) -> PathBuf {
    fixtures_root().join(arch)
}

fn fixture(arch: &str) -> Fixture {
    let dir = fixture_dir(arch);
    let pipe = Pipeline::load_diffusers(&dir.join("model"), &Default::default(), &dev()).unwrap();
    with_pipeline(arch, pipe)
}

/// The same model as a single-file checkpoint in the original Stability naming (fp16, exactly
/// the folder's weights), its configuration and tokenizer from the folder, as diffusers'
/// `from_single_file(config=...)` loads it.
fn single_file_fixture(arch: &str) -> Fixture {
    let dir = fixture_dir(arch);
    let pipe = Pipeline::load_single_file(
        &dir.join("single_file.safetensors"),
        Some(&dir.join("model")),
        &Default::default(),
        &dev(),
    )
    .unwrap();
    with_pipeline(arch, pipe)
}

fn with_pipeline(arch: &str, pipe: Pipeline) -> Fixture {
    let dir = fixture_dir(arch);
    let t = candle::safetensors::load(dir.join("reference.safetensors"), &dev()).unwrap();
    let json = serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
        .unwrap();
    Fixture { pipe, t, json }
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims(), "shapes differ");
    let a = a
        .to_dtype(DType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    let b = b
        .to_dtype(DType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap();
    a.iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn close(what: &str, got: &Tensor, want: &Tensor, tol: f32) {
    let d = max_diff(got, want);
    println!("{what}: max abs diff {d:.2e}");
    assert!(d <= tol, "{what}: max abs diff {d} > {tol}");
}

impl Fixture {
    fn get(&self, k: &str) -> &Tensor {
        self.t
            .get(k)
            .unwrap_or_else(|| panic!("fixture has no {k}"))
    }

    fn str(&self, k: &str) -> String {
        self.json[k].as_str().unwrap().to_owned()
    }

    fn request(&self, steps: usize, guidance: f64, sampler: Sampler) -> Request {
        Request {
            prompt: self.str("prompt"),
            negative_prompt: self.json["negative_prompt"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
            steps,
            guidance,
            sampler,
            karras: None,
            width: 64,
            height: 64,
        }
    }

    /// A txt2img run to latents, from the fixture's initial noise and (ancestral) the seed 4242
    /// stream the reference drew its step noise from.
    fn run(&self, sampler: Sampler, steps: usize, guidance: f64) -> Tensor {
        self.run_with(sampler, None, steps, guidance)
    }

    fn run_with(
        &self,
        sampler: Sampler,
        karras: Option<bool>,
        steps: usize,
        guidance: f64,
    ) -> Tensor {
        let req = self.request(steps, guidance, sampler);
        let cond = self
            .pipe
            .encode_text(&req.prompt, &req.negative_prompt, guidance > 1.0)
            .unwrap();
        let schedule = self
            .pipe
            .scheduler
            .schedule(steps, sampler, karras)
            .unwrap();
        let latents = (self.get("init_latents") * f64::from(schedule.init_noise_sigma)).unwrap();
        let mut noise = torch(4242);
        self.pipe
            .denoise(
                &cond,
                latents,
                &schedule,
                0,
                guidance,
                &mut noise,
                (64, 64),
                &NoControl,
            )
            .unwrap()
    }
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn check_arch(arch: &str) {
    check(arch, &fixture(arch));
}

fn check(arch: &str, f: &Fixture) {
    let sdxl = arch == "sdxl";

    // Tokenizer(s): every case, exactly.
    for case in f.json["tokenizer_cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let got = f.pipe.token_ids(text).unwrap();
        let got0 = got[0].flatten_all().unwrap().to_vec1::<u32>().unwrap();
        assert_eq!(got0, ids(&case["input_ids"]), "{arch} tokenizer: {text:?}");
        if sdxl {
            let got1 = got[1].flatten_all().unwrap().to_vec1::<u32>().unwrap();
            assert_eq!(
                got1,
                ids(&case["input_ids_2"]),
                "{arch} tokenizer 2: {text:?}"
            );
        }
    }

    // The seed's noise: PyTorch's CPU generator.
    let init = torch(42).randn(256);
    close(
        &format!("{arch} init noise (seed 42)"),
        &Tensor::from_vec(init, (1, 4, 8, 8), &dev()).unwrap(),
        f.get("init_latents"),
        NOISE_TOL,
    );
    let anc = torch(4242).randn(4 * 256);
    close(
        &format!("{arch} ancestral noise (seed 4242)"),
        &Tensor::from_vec(anc, (4, 1, 4, 8, 8), &dev()).unwrap(),
        f.get("ancestral_noise"),
        NOISE_TOL,
    );

    // Text encoding.
    let cond = f
        .pipe
        .encode_text(&f.str("prompt"), &f.str("negative_prompt"), true)
        .unwrap();
    close(
        &format!("{arch} prompt embeds"),
        &cond.cond,
        f.get("prompt_embeds"),
        1e-4,
    );
    close(
        &format!("{arch} negative embeds"),
        cond.uncond.as_ref().unwrap(),
        f.get("negative_embeds"),
        1e-4,
    );
    if sdxl {
        close(
            "sdxl pooled",
            cond.pooled.as_ref().unwrap(),
            f.get("pooled_prompt_embeds"),
            1e-4,
        );
        close(
            "sdxl negative pooled",
            cond.uncond_pooled.as_ref().unwrap(),
            f.get("negative_pooled_prompt_embeds"),
            1e-4,
        );
    }

    // One UNet evaluation on the reference's own inputs.
    let out = unet_out(arch, f);
    close(&format!("{arch} UNet step"), &out, f.get("unet_out"), 1e-3);

    // Whole runs: Euler and Euler ancestral with classifier-free guidance 7.5, 4 steps.
    let euler = f.run(Sampler::Euler, 4, 7.5);
    close(
        &format!("{arch} Euler latents"),
        &euler,
        f.get("latents_euler"),
        1e-3,
    );
    let euler_a = f.run(Sampler::EulerAncestral, 4, 7.5);
    close(
        &format!("{arch} Euler a latents"),
        &euler_a,
        f.get("latents_euler_a"),
        1e-3,
    );

    // Decoding, raw and as pixels.
    let raw = f
        .pipe
        .decode_raw(
            &(f.get("vae_decode_in") * f.json["vae_scaling_factor"].as_f64().unwrap()).unwrap(),
        )
        .unwrap();
    close(
        &format!("{arch} VAE decode"),
        &raw,
        f.get("vae_decode_out"),
        1e-3,
    );
    let rgb = to_rgb8(&f.pipe.decode_raw(&euler).unwrap()).unwrap();
    let rgb = Tensor::from_vec(rgb, (1, 64, 64, 3), &dev())
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap();
    close(
        &format!("{arch} picture (0..1)"),
        &(rgb / 255.0).unwrap(),
        f.get("image_euler"),
        2.0 / 255.0,
    );

    // DPM++ 2M with Karras sigmas (diffusers' DPMSolverMultistepScheduler).
    let dpm = f.run_with(Sampler::DpmPp2m, Some(true), 4, 7.5);
    close(
        &format!("{arch} DPM++ 2M Karras latents"),
        &dpm,
        f.get("latents_dpmpp2m_karras"),
        1e-3,
    );

    if sdxl {
        // SDXL-Turbo's way: one step, no guidance.
        let one = f.run(Sampler::Euler, 1, 0.0);
        close(
            "sdxl 1 step, guidance 0",
            &one,
            f.get("latents_sdxl_cfg0"),
            1e-3,
        );
    }
}

#[test]
fn sd15_matches_diffusers() {
    check_arch("sd15");
}

#[test]
fn sd21_v_prediction_matches_diffusers() {
    check_arch("sd21");
}

#[test]
fn sdxl_matches_diffusers() {
    check_arch("sdxl");
}

#[test]
fn sd15_single_file_matches_diffusers() {
    check("sd15", &single_file_fixture("sd15"));
}

#[test]
fn sd21_single_file_matches_diffusers() {
    check("sd21", &single_file_fixture("sd21"));
}

#[test]
fn sdxl_single_file_matches_diffusers() {
    check("sdxl", &single_file_fixture("sdxl"));
}

/// One UNet evaluation of a fixture's recorded input (its timestep and prompt embeddings).
fn unet_out(arch: &str, f: &Fixture) -> Tensor {
    let t = f64::from(f.get("unet_t").to_vec1::<f32>().unwrap()[0]);
    f.pipe
        .unet(
            f.get("unet_in"),
            t,
            f.get("prompt_embeds"),
            (arch == "sdxl").then(|| f.get("pooled_prompt_embeds")),
            (64, 64),
        )
        .unwrap()
}

/// The single file holds exactly the folder's weights: the same UNet output, bit for bit.
#[test]
fn single_file_and_folder_agree_exactly() {
    for arch in ["sd15", "sd21", "sdxl"] {
        let folder = fixture(arch);
        let single = single_file_fixture(arch);
        assert_eq!(
            max_diff(&unet_out(arch, &folder), &unet_out(arch, &single)),
            0.0,
            "{arch} UNet"
        );
        let a = folder.pipe.encode_text("a red car", "", true).unwrap();
        let b = single.pipe.encode_text("a red car", "", true).unwrap();
        assert_eq!(max_diff(&a.cond, &b.cond), 0.0, "{arch} text encoder");
        if arch == "sdxl" {
            let (pa, pb) = (a.pooled.unwrap(), b.pooled.unwrap());
            assert_eq!(max_diff(&pa, &pb), 0.0, "sdxl pooled");
        }
        let z = folder.get("vae_decode_in");
        assert_eq!(
            max_diff(
                &folder.pipe.decode_raw(z).unwrap(),
                &single.pipe.decode_raw(z).unwrap()
            ),
            0.0,
            "{arch} VAE"
        );
    }
}

#[test]
fn img2img_matches_diffusers() {
    let f = fixture("sd15");
    let image = f
        .get("img2img_image")
        .to_dtype(DType::U8)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<u8>()
        .unwrap();
    let req = f.request(4, 7.5, Sampler::Euler);
    // The reference drew the posterior sample's noise, then the noise added at the start step,
    // from one generator seeded 4343: so does the engine.
    let mut noise = torch(4343);
    let latents = f
        .pipe
        .img2img_latents(&req, &image, 0.5, &mut noise, &NoControl)
        .unwrap();
    close(
        "img2img latents (strength 0.5)",
        &latents,
        f.get("latents_img2img"),
        1e-3,
    );
}

struct Recorder {
    seen: Mutex<Vec<(usize, usize)>>,
    cancel_after: usize,
}

impl StepControl for Recorder {
    fn progress(&self, done: usize, total: usize) {
        self.seen.lock().unwrap().push((done, total));
    }
    fn cancelled(&self) -> bool {
        self.seen.lock().unwrap().len() >= self.cancel_after
    }
}

#[test]
fn progress_rises_each_step_and_cancellation_stops_between_steps() {
    let f = fixture("sd15");
    let req = f.request(6, 7.5, Sampler::EulerAncestral);
    let all = Recorder {
        seen: Mutex::new(Vec::new()),
        cancel_after: usize::MAX,
    };
    let a = f.pipe.txt2img(&req, &mut torch(5), &all).unwrap();
    assert_eq!(
        *all.seen.lock().unwrap(),
        (1..=6).map(|d| (d, 6)).collect::<Vec<_>>()
    );
    // The same seed gives the same picture; another seed another one.
    let b = f.pipe.txt2img(&req, &mut torch(5), &NoControl).unwrap();
    assert_eq!(a, b);
    let c = f.pipe.txt2img(&req, &mut torch(6), &NoControl).unwrap();
    assert_ne!(a, c);
    let stop = Recorder {
        seen: Mutex::new(Vec::new()),
        cancel_after: 2,
    };
    let err = f.pipe.txt2img(&req, &mut torch(5), &stop).unwrap_err();
    assert!(err.to_string().contains("cancelled"), "{err}");
    assert_eq!(
        stop.seen.lock().unwrap().len(),
        2,
        "stopped before the third step"
    );
}

/// The tiny decoder (TAESD, diffusers `AutoencoderTiny`) against diffusers
/// (`tools/sd-fixtures/taesd.py`): on wide random latents (the tanh clamp) and as the SD
/// pipeline decodes the SD 1.5 fixture's Euler latents with it.
#[test]
fn tiny_decoder_matches_diffusers() {
    use pictor_diffusion::taesd::TinyDecoder;
    let dir = fixture_dir("taesd");
    let tiny = TinyDecoder::load(&dir.join("model"), &dev()).unwrap();
    let t = candle::safetensors::load(dir.join("reference.safetensors"), &dev()).unwrap();
    close(
        "tiny decoder",
        &tiny.decode(&t["latents"]).unwrap(),
        &t["decoded"],
        1e-4,
    );
    let mut f = fixture("sd15");
    f.pipe.use_tiny_decoder(tiny).unwrap();
    let euler = f.run(Sampler::Euler, 4, 7.5);
    close(
        "SD 1.5 Euler latents through the tiny decoder",
        &f.pipe.decode_raw(&euler).unwrap(),
        &t["sd15_euler_decoded"],
        1e-3,
    );
}

/// Large pictures decode tile by tile: same size, seams blended, close to a whole decode
/// (the group norms and the mid-block attention see one tile at a time: on this tiny VAE
/// with 8-latent tiles about a third of the distance to another latent's picture).
#[test]
fn tiled_vae_decode_stays_close_to_a_whole_decode() {
    use pictor_diffusion::tiled_decode;
    let f = fixture("sd15");
    let z = (torch(9).randn(4 * 24 * 24))
        .into_iter()
        .collect::<Vec<f32>>();
    let z = Tensor::from_vec(z, (1, 4, 24, 24), &dev()).unwrap();
    let whole = tiled_decode(f.pipe.vae(), &z, 64, 16).unwrap();
    let tiled = tiled_decode(f.pipe.vae(), &z, 12, 4).unwrap();
    assert_eq!(tiled.dims(), &[1, 3, 192, 192]);
    let mean_abs = |a: &Tensor, b: &Tensor| {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .mean_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    };
    let d = mean_abs(&whole, &tiled);
    let other = Tensor::from_vec(torch(10).randn(4 * 24 * 24), (1, 4, 24, 24), &dev()).unwrap();
    let apart = mean_abs(&whole, &tiled_decode(f.pipe.vae(), &other, 64, 16).unwrap());
    println!("tiled vs whole: mean abs {d:.4}; another latent: {apart:.4}");
    assert!(
        d.is_finite() && d < apart / 2.0,
        "tiled {d} vs apart {apart}"
    );
}

/// Every sampler and both noise sources, whole runs from the seed (8 steps, guidance 7.5) with
/// Stable Diffusion 1.5's own scheduler configuration (no `timestep_spacing`: each sampler's
/// diffusers default), against the diffusers pipeline (`tools/sd-fixtures/samplers.py`).
#[test]
fn every_sampler_and_noise_source_matches_diffusers() {
    let root = fixtures_root();
    let dir = tempfile::tempdir().unwrap();
    let model = sd15_with_scheduler(dir.path(), &root.join("samplers/scheduler_config.json"));
    let pipe = Pipeline::load_diffusers(&model, &Default::default(), &dev()).unwrap();
    let refs =
        candle::safetensors::load(root.join("samplers/reference.safetensors"), &dev()).unwrap();
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("samplers/reference.json")).unwrap(),
    )
    .unwrap();
    let cases = meta["cases"].as_object().unwrap();
    assert!(cases.len() >= 10);
    for (case, c) in cases {
        let sampler = Sampler::parse(c["sampler"].as_str().unwrap()).unwrap();
        let kind = NoiseKind::parse(c["noise"].as_str().unwrap()).unwrap();
        let req = Request {
            prompt: meta["prompt"].as_str().unwrap().into(),
            negative_prompt: meta["negative_prompt"].as_str().unwrap().into(),
            steps: meta["steps"].as_u64().unwrap() as usize,
            guidance: meta["guidance"].as_f64().unwrap(),
            sampler,
            karras: c["karras"].as_bool(),
            width: 64,
            height: 64,
        };
        let schedule = pipe.schedule(&req).unwrap();
        let want_t: Vec<f32> = c["timesteps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        // Integer timesteps exactly; Karras' fractional ones within float32 log rounding.
        assert_eq!(schedule.timesteps.len(), want_t.len(), "{case} timesteps");
        for (a, b) in schedule.timesteps.iter().zip(&want_t) {
            assert!(
                (a - b).abs() <= 1e-3,
                "{case} timesteps: {:?} vs {want_t:?}",
                schedule.timesteps
            );
        }
        let mut noise = source(kind, meta["seed"].as_u64().unwrap());
        whole_picture_matches(&pipe, &req, noise.as_mut(), &refs, case, case);
    }
}

/// A 64² picture made from the seed's noise matches the reference's `<case>_latents` (within
/// 1e-3) and `<case>_image` (0..1, within 2/255); its latents.
fn whole_picture_matches(
    pipe: &Pipeline,
    req: &Request,
    noise: &mut dyn NoiseSource,
    refs: &HashMap<String, Tensor>,
    case: &str,
    what: &str,
) -> Tensor {
    let latents = pipe.txt2img_latents(req, noise, &NoControl).unwrap();
    close(
        &format!("{what} latents"),
        &latents,
        &refs[&format!("{case}_latents")],
        1e-3,
    );
    let rgb = to_rgb8(&pipe.decode_raw(&latents).unwrap()).unwrap();
    let rgb = Tensor::from_vec(rgb, (64, 64, 3), &dev())
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap();
    close(
        &format!("{what} picture (0..1)"),
        &(rgb / 255.0).unwrap(),
        &refs[&format!("{case}_image")],
        2.0 / 255.0,
    );
    latents
}

/// A copy of the tiny SD 1.5 model with another scheduler configuration.
pub fn sd15_with_scheduler(dir: &std::path::Path, config: &std::path::Path) -> PathBuf {
    let from = fixture_dir("sd15").join("model");
    let to = dir.join("model");
    for entry in walk(&from) {
        let rel = entry.strip_prefix(&from).unwrap();
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &dest).unwrap();
    }
    std::fs::copy(config, to.join("scheduler/scheduler_config.json")).unwrap();
    to
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Pipelines as today's tools save them (`tools/sd-fixtures/layouts.py`: the UNet in three
/// shards with diffusers' index, text encoders without the `text_model.` prefix in two shards as
/// transformers 5 writes them, tokenizers as `tokenizer.json` only) load and compute what the
/// reference computed, bit for bit what the classic layout does.
#[test]
fn todays_saved_layouts_load_and_match_diffusers() {
    for arch in ["sd15", "sdxl"] {
        let dir = fixture_dir("layouts").join(arch);
        let pipe = Pipeline::load_diffusers(&dir, &Default::default(), &dev()).unwrap();
        let today = with_pipeline(arch, pipe);
        check(arch, &today);
        let classic = fixture(arch);
        assert_eq!(
            max_diff(&unet_out(arch, &classic), &unet_out(arch, &today)),
            0.0,
            "{arch} UNet"
        );
        let a = classic
            .pipe
            .encode_text("a red car, 4k!", "blurry", true)
            .unwrap();
        let b = today
            .pipe
            .encode_text("a red car, 4k!", "blurry", true)
            .unwrap();
        assert_eq!(max_diff(&a.cond, &b.cond), 0.0, "{arch} text encoder");
        assert_eq!(
            max_diff(a.uncond.as_ref().unwrap(), b.uncond.as_ref().unwrap()),
            0.0,
            "{arch} negative"
        );
        // The index names every shard; a missing one is named in the error.
        assert_eq!(
            pictor_diffusion::load::weights_in(
                &dir.join("unet"),
                "diffusion_pytorch_model.safetensors"
            )
            .unwrap()
            .len(),
            3
        );
        // The whole folder is inspected as a diffusers model of its architecture.
        let info = pictor_core::models::inspect(&dir).unwrap();
        assert_eq!(
            info.arch.as_str(),
            if arch == "sdxl" { "sdxl" } else { "sd1" }
        );
    }
    let broken = tempfile::tempdir().unwrap();
    let unet = broken.path().join("unet");
    std::fs::create_dir_all(&unet).unwrap();
    let src = fixture_dir("layouts").join("sd15/unet");
    for f in [
        "diffusion_pytorch_model.safetensors.index.json",
        "diffusion_pytorch_model-00001-of-00003.safetensors",
    ] {
        std::fs::copy(src.join(f), unet.join(f)).unwrap();
    }
    let e = pictor_diffusion::load::weights_in(&unet, "diffusion_pytorch_model.safetensors")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("shard diffusion_pytorch_model-00002-of-00003.safetensors is missing"),
        "{e}"
    );
}

/// The tiny SD 1.5 model with the edits fixture's UNet `unet` (`ip2p_unet`, `inpaint_unet`).
fn sd15_with_unet(dir: &std::path::Path, unet: &str) -> PathBuf {
    let from = fixture_dir("sd15").join("model");
    let to = dir.join(unet);
    for entry in walk(&from) {
        let rel = entry.strip_prefix(&from).unwrap();
        if rel.starts_with("unet") {
            continue;
        }
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &dest).unwrap();
    }
    let edits = fixture_dir("edits").join(unet);
    std::fs::create_dir_all(to.join("unet")).unwrap();
    for f in ["config.json", "diffusion_pytorch_model.safetensors"] {
        std::fs::copy(edits.join(f), to.join("unet").join(f)).unwrap();
    }
    to
}

/// InstructPix2Pix, SD inpainting (a 9-channel UNet) and masked img2img (the plain SD 1.5 UNet),
/// whole runs from the seed against diffusers' own pipelines (`tools/sd-fixtures/edits.py`):
/// Euler a, Euler and DDIM, image guidance 1.0 to 2.5, no guidance, full and partial strength;
/// InstructPix2Pix also from its single-file checkpoint.
#[test]
fn edits_match_diffusers() {
    let root = fixture_dir("edits");
    let refs = candle::safetensors::load(root.join("reference.safetensors"), &dev()).unwrap();
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("reference.json")).unwrap())
            .unwrap();
    let bytes = |k: &str| {
        refs[k]
            .to_dtype(DType::U8)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<u8>()
            .unwrap()
    };
    let picture = bytes("source");
    let mask = bytes("mask");
    let tmp = tempfile::tempdir().unwrap();
    let load =
        |dir: &std::path::Path| Pipeline::load_diffusers(dir, &Default::default(), &dev()).unwrap();
    let ip2p = load(&sd15_with_unet(tmp.path(), "ip2p_unet"));
    let ip2p_file = Pipeline::load_single_file(
        &root.join("ip2p_single_file.safetensors"),
        Some(&fixture_dir("sd15").join("model")),
        &Default::default(),
        &dev(),
    )
    .unwrap();
    let inpaint = load(&sd15_with_unet(tmp.path(), "inpaint_unet"));
    let plain = load(&fixture_dir("sd15").join("model"));
    assert_eq!(ip2p.unet_kind(), pictor_diffusion::UnetKind::Instruct);
    assert_eq!(ip2p_file.unet_kind(), pictor_diffusion::UnetKind::Instruct);
    assert_eq!(inpaint.unet_kind(), pictor_diffusion::UnetKind::Inpaint);
    assert_eq!(plain.unet_kind(), pictor_diffusion::UnetKind::Text);
    let cases = meta["cases"].as_object().unwrap();
    assert_eq!(cases.len(), 8);
    for (case, c) in cases {
        let kind = c["pipe"].as_str().unwrap();
        let req = Request {
            prompt: meta[if kind == "ip2p" {
                "instruction"
            } else {
                "inpaint_prompt"
            }]
            .as_str()
            .unwrap()
            .into(),
            negative_prompt: meta["negative_prompt"].as_str().unwrap().into(),
            steps: c["steps"].as_u64().unwrap() as usize,
            guidance: c["guidance"].as_f64().unwrap(),
            sampler: Sampler::parse(c["sampler"].as_str().unwrap()).unwrap(),
            karras: None,
            width: 64,
            height: 64,
        };
        let seed = c["seed"].as_u64().unwrap();
        let pipes: Vec<(&str, &Pipeline)> = match kind {
            "ip2p" => vec![("folder", &ip2p), ("single file", &ip2p_file)],
            "inpaint" => vec![("folder", &inpaint)],
            _ => vec![("folder", &plain)],
        };
        for (from, pipe) in pipes {
            let mut noise = source(NoiseKind::TorchCpu, seed);
            let latents = if kind == "ip2p" {
                let ig = c["image_guidance"].as_f64().unwrap();
                pipe.instruct_latents(&req, &picture, ig, noise.as_mut(), &NoControl)
            } else {
                let strength = c["strength"].as_f64().unwrap();
                pipe.inpaint_latents(&req, &picture, &mask, strength, noise.as_mut(), &NoControl)
            }
            .unwrap();
            close(
                &format!("{case} ({from}) latents"),
                &latents,
                &refs[&format!("{case}_latents")],
                1e-3,
            );
            let rgb = to_rgb8(&pipe.decode_raw(&latents).unwrap()).unwrap();
            let rgb = Tensor::from_vec(rgb, (64, 64, 3), &dev())
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap();
            close(
                &format!("{case} ({from}) picture (0..1)"),
                &(rgb / 255.0).unwrap(),
                &refs[&format!("{case}_image")],
                2.0 / 255.0,
            );
        }
    }
    // What each model is for: a text model does not take instructions, an instruction model
    // neither draws from words alone nor repaints a mask.
    let req = Request {
        prompt: "x".into(),
        negative_prompt: String::new(),
        steps: 2,
        guidance: 1.0,
        sampler: Sampler::Euler,
        karras: None,
        width: 64,
        height: 64,
    };
    let mut noise = source(NoiseKind::TorchCpu, 1);
    let err = |r: Result<Tensor, pictor_diffusion::DiffusionError>| r.unwrap_err().to_string();
    assert!(
        err(plain.instruct_latents(&req, &picture, 1.5, noise.as_mut(), &NoControl))
            .contains("InstructPix2Pix")
    );
    assert!(err(ip2p.txt2img_latents(&req, noise.as_mut(), &NoControl)).contains("edit tier"));
    assert!(err(inpaint.txt2img_latents(&req, noise.as_mut(), &NoControl)).contains("edit tier"));
    assert!(
        err(ip2p.inpaint_latents(&req, &picture, &mask, 1.0, noise.as_mut(), &NoControl))
            .contains("masked")
    );
    assert!(
        err(inpaint.inpaint_latents(&req, &picture, &mask[1..], 1.0, noise.as_mut(), &NoControl))
            .contains("mask")
    );
}

/// 8-bit text encoders (`Overrides::int8_text`): the prompt embeddings stay within a stated,
/// looser tolerance of transformers' float32 ones, and really are the 8-bit path (not equal to
/// the float32 engine's). Layers whose input width is not a whole number of 32-weight blocks
/// (the fixtures' 37-wide MLP output) stay float32.
#[test]
fn int8_text_encoders_stay_close_to_diffusers() {
    for arch in ["sd15", "sdxl"] {
        let dir = fixture_dir(arch);
        let overrides = pictor_diffusion::single_file::Overrides {
            int8_text: true,
            ..Default::default()
        };
        let pipe = Pipeline::load_diffusers(&dir.join("model"), &overrides, &dev()).unwrap();
        let int8 = with_pipeline(arch, pipe);
        let float = fixture(arch);
        let prompt = int8.str("prompt");
        let a = int8.pipe.encode_text(&prompt, "", false).unwrap();
        let b = float.pipe.encode_text(&prompt, "", false).unwrap();
        assert!(
            max_diff(&a.cond, &b.cond) > 0.0,
            "{arch}: the 8-bit encoder gave the float32 numbers"
        );
        close_relative(
            &format!("{arch} int8 prompt embeds"),
            &a.cond,
            int8.get("prompt_embeds"),
        );
        if arch == "sdxl" {
            close_relative(
                "sdxl int8 pooled",
                a.pooled.as_ref().unwrap(),
                int8.get("pooled_prompt_embeds"),
            );
        }
    }
}

/// LoRAs in both formats people have — PEFT/diffusers with `lora_adapter_metadata` (attention,
/// feed-forward, projections, 3×3 resnet convolutions, time embeddings, text encoders) and kohya's
/// (`lora_unet_…`/`lora_te…`, float16 alphas; SDXL's with the original UNet's `input_blocks_…`
/// names, shortcuts and down/upsamplers) — merged at load, alone at 0.7 and two at once (0.8 and
/// 0.6), against diffusers' `load_lora_weights` + `set_adapters` + `fuse_lora` on the tiny SD 1.5
/// and SDXL models (`tools/sd-fixtures/lora.py`), whole 4-step pictures from the seed. The
/// same LoRAs on the SD 1.5 single-file checkpoint (original layer names underneath) give the
/// same latents as on the folder.
#[test]
fn loras_in_both_formats_match_diffusers_fuse_lora() {
    use pictor_diffusion::lora::LoraSpec;
    use pictor_diffusion::single_file::Overrides;
    for arch in ["sd15", "sdxl"] {
        let dir = fixtures_root().join("lora").join(arch);
        let refs = candle::safetensors::load(dir.join("reference.safetensors"), &dev()).unwrap();
        let meta: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap())
                .unwrap();
        let req = Request {
            prompt: meta["prompt"].as_str().unwrap().into(),
            negative_prompt: meta["negative_prompt"].as_str().unwrap().into(),
            steps: meta["steps"].as_u64().unwrap() as usize,
            guidance: meta["guidance"].as_f64().unwrap(),
            sampler: Sampler::parse(meta["sampler"].as_str().unwrap()).unwrap(),
            karras: None,
            width: 64,
            height: 64,
        };
        let seed = meta["seed"].as_u64().unwrap();
        for (case, loras) in meta["cases"].as_object().unwrap() {
            let overrides = Overrides {
                loras: loras
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| {
                        let w = l[1].as_f64().unwrap() as f32;
                        LoraSpec {
                            path: dir.join(l[0].as_str().unwrap()),
                            unet: w,
                            text: w,
                        }
                    })
                    .collect(),
                ..Default::default()
            };
            let pipe =
                Pipeline::load_diffusers(&fixture_dir(arch).join("model"), &overrides, &dev())
                    .unwrap();
            let mut noise = source(NoiseKind::TorchCpu, seed);
            let what = format!("{arch} LoRA case {case}");
            let latents = whole_picture_matches(&pipe, &req, noise.as_mut(), &refs, case, &what);
            if arch == "sd15" && case == "ab" {
                let single = Pipeline::load_single_file(
                    &fixture_dir(arch).join("single_file.safetensors"),
                    Some(&fixture_dir(arch).join("model")),
                    &overrides,
                    &dev(),
                )
                .unwrap();
                let mut noise = source(NoiseKind::TorchCpu, seed);
                let from_file = single
                    .txt2img_latents(&req, noise.as_mut(), &NoControl)
                    .unwrap();
                close("single file with LoRAs", &from_file, &latents, 1e-5);
            }
        }
    }
}

/// 8-bit UNet transformer layers (`Overrides::int8_unet`, AVX-512 VNNI): one UNet evaluation,
/// a whole 4-step Euler run with guidance 7.5 and its picture stay within stated, looser
/// tolerances of diffusers' float32 (relative RMS error of the UNet output and the latents,
/// the picture's largest and mean difference in 1/255), and really are the 8-bit path. Every
/// linear layer of the fixtures' transformers is 8-bit (widths that end inside a 16-column
/// panel included); the convolutions stay float32.
#[test]
fn int8_unet_stays_close_to_diffusers() {
    if !pictor_diffusion::net::linear_int8::available() || !dev().is_cpu() {
        eprintln!("skipped: 8-bit UNet layers need a CPU with AVX-512 VNNI (they stay float here)");
        return;
    }
    for arch in ["sd15", "sd21", "sdxl"] {
        let overrides = pictor_diffusion::single_file::Overrides {
            int8_unet: true,
            ..Default::default()
        };
        let pipe =
            Pipeline::load_diffusers(&fixture_dir(arch).join("model"), &overrides, &dev()).unwrap();
        let (int8, all) = pipe.unet_linear_layers();
        assert!(
            int8 == all && all > 0,
            "{arch}: {int8} of the {all} transformer layers are 8-bit"
        );
        let f = with_pipeline(arch, pipe);
        let out = unet_out(arch, &f);
        assert!(
            max_diff(&out, f.get("unet_out")) > 1e-4,
            "{arch}: the 8-bit UNet gave the float32 numbers"
        );
        let (rms, max) = common::relative(&out, f.get("unet_out"));
        println!("{arch} int8 UNet step: relative RMS {rms:.2e}, max {max:.2e} of the largest");
        assert!(
            rms <= INT8_UNET_STEP_RMS,
            "{arch} int8 UNet step: relative RMS {rms}"
        );
        let euler = f.run(Sampler::Euler, 4, 7.5);
        let (rms, max) = common::relative(&euler, f.get("latents_euler"));
        println!("{arch} int8 Euler latents: relative RMS {rms:.2e}, max {max:.2e} of the largest");
        assert!(
            rms <= INT8_UNET_LATENTS_RMS,
            "{arch} int8 latents: relative RMS {rms}"
        );
        let rgb = to_rgb8(&f.pipe.decode_raw(&euler).unwrap()).unwrap();
        let want = f
            .get("image_euler")
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let diffs: Vec<f32> = rgb
            .iter()
            .zip(&want)
            .map(|(&g, &w)| (f32::from(g) - w * 255.0).abs())
            .collect();
        let worst = diffs.iter().copied().fold(0.0, f32::max);
        let mean = diffs.iter().sum::<f32>() / diffs.len() as f32;
        println!("{arch} int8 picture: largest difference {worst:.1}/255, mean {mean:.2}/255");
        assert!(
            worst <= INT8_UNET_PICTURE_MAX,
            "{arch} int8 picture: {worst}/255"
        );
        assert!(
            mean <= INT8_UNET_PICTURE_MEAN,
            "{arch} int8 picture: mean {mean}/255"
        );
    }
}
