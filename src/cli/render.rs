//! `pictor render`: one picture to a file, no server needed.
//!
//! - With `--model fast|artist|0.2plus` (the default) the built-in painter draws it; `--edit IN
//!   --instruction …` applies an edit instruction to an image file.
//! - With `--model` naming a diffusion model (an installed model's name, a diffusers folder or a
//!   `.safetensors` checkpoint) the built-in diffusion engine renders it, with the sampler, steps,
//!   guidance, size, seed, noise source and negative prompt given.
//! - `--from-png FILE` takes all of that from a PNG's `parameters` (Pictor's or AUTOMATIC1111's);
//!   flags given beside it override what the file says.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;

use crate::render::infotext::Infotext;
use crate::render::{
    self, EditSpec, GenerateSpec, Model, PngParameters, ProceduralRenderer, Ratio, Renderer, Style,
};

#[derive(Args, Debug, Clone, Default)]
pub struct RenderArgs {
    /// What to draw.
    #[arg(long)]
    pub prompt: Option<String>,
    /// fast, artist or 0.2plus (the built-in painter; the default), or a diffusion model: an
    /// installed model's name (`pictor models list`), a diffusers folder or a .safetensors file.
    #[arg(long)]
    pub model: Option<String>,
    /// Painter: 1:1, 16:9, 9:16, 3:2, 2:3, 4:3, 3:4 or auto.
    #[arg(long)]
    pub ratio: Option<String>,
    /// The seed (default 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Painter: force a style: photo, watercolor, oil, sketch, pixel, lowpoly, neon, poster, japanese.
    #[arg(long)]
    pub style: Option<String>,
    /// Downscale the result so its long side is at most this many pixels (gallery thumbnails).
    #[arg(long)]
    pub max_side: Option<u32>,
    /// Edit this image file (PNG, JPEG or WebP) with `--instruction` instead of generating: by
    /// the painter (fast, artist, 0.2plus), a diffusion model (`--model NAME|PATH`, as the
    /// edit tier runs it: InstructPix2Pix follows the instruction, inpainting models and
    /// `--mask` repaint an area, other models img2img), or `--model edit` (the edit tier).
    #[arg(long)]
    pub edit: Option<PathBuf>,
    /// The edit instruction, e.g. "make it black and white and add a vignette".
    #[arg(long)]
    pub instruction: Option<String>,
    /// Edits: the area to change, an image of the source's size (transparent pixels mark it,
    /// or without transparency its white pixels); the rest stays as it was.
    #[arg(long, requires = "edit")]
    pub mask: Option<PathBuf>,
    /// Edits with an InstructPix2Pix model: how closely to keep the source (1–2 usual;
    /// default 1.5).
    #[arg(long, requires = "edit")]
    pub image_guidance: Option<f64>,
    /// Edits with other models: how much of the schedule reworks the source, (0, 1] (default:
    /// from the instruction's wording, 0.6 when it says nothing).
    #[arg(long, requires = "edit")]
    pub strength: Option<f64>,
    /// Re-render the picture a PNG's `parameters` describe (Pictor's or AUTOMATIC1111's); the
    /// other flags override what it says.
    #[arg(long)]
    pub from_png: Option<PathBuf>,
    /// Diffusion: what the picture must not show.
    #[arg(long)]
    pub negative_prompt: Option<String>,
    /// Diffusion: euler, euler_a (default), ddim, dpm++_2m, heun or lms (AUTOMATIC1111's names too).
    #[arg(long)]
    pub sampler: Option<String>,
    /// Diffusion: automatic (the model's own sigmas), karras or uniform.
    #[arg(long)]
    pub schedule: Option<String>,
    /// Diffusion: sampling steps, 1 to 150 (default 20).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Diffusion: classifier-free guidance (CFG scale), 0 to 30 (default 7).
    #[arg(long)]
    pub guidance: Option<f64>,
    /// Diffusion: width in pixels, a multiple of 8 (default: the model's native size).
    #[arg(long)]
    pub width: Option<usize>,
    /// Diffusion: height in pixels, a multiple of 8 (default: the model's native size).
    #[arg(long)]
    pub height: Option<usize>,
    /// Diffusion: where the seed's noise comes from: torch-cpu (default; diffusers with a CPU
    /// generator, ComfyUI, A1111 "RNG: CPU") or a1111-gpu (A1111's default GPU/NV noise).
    #[arg(long)]
    pub noise: Option<String>,
    /// Diffusion, single-file checkpoints: a diffusers folder whose configuration and
    /// tokenizers to use instead of those read off the checkpoint.
    #[arg(long)]
    pub model_config: Option<PathBuf>,
    /// FLUX and SD 3: the transformer as one file (a GGUF, or ComfyUI's / Stability AI's
    /// .safetensors) in place of the folder's transformer/ (default: the tier mapping's).
    #[arg(long)]
    pub transformer: Option<PathBuf>,
    /// FLUX and SD 3: the T5 encoder as one file (a GGUF such as
    /// t5-v1_1-xxl-encoder-Q8_0.gguf) in place of the folder's (default: the tier mapping's).
    #[arg(long)]
    pub t5: Option<PathBuf>,
    /// Output PNG file.
    #[arg(long)]
    pub out: PathBuf,
    /// The Karras choice a PNG's "Schedule type" makes (A1111's meaning), used when neither
    /// `--schedule` nor the sampler's name decides.
    #[arg(skip)]
    pub png_karras: Option<bool>,
}

pub async fn run(
    args: &RenderArgs,
    data_dir: PathBuf,
    diffusion: Option<toml::Table>,
) -> anyhow::Result<()> {
    let mut args = args.clone();
    let mut from_png = None;
    if let Some(path) = &args.from_png {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let text = render::encode::read_parameters(&bytes).with_context(|| {
            format!(
                "{} has no `parameters` text (not made by Pictor or AUTOMATIC1111?)",
                path.display()
            )
        })?;
        let info = Infotext::parse(&text);
        if info.params.is_empty() {
            bail!("{}: its parameters have no settings line", path.display());
        }
        apply_infotext(&mut args, &info)?;
        from_png = Some(info);
    }
    if args.edit.is_some()
        && args
            .instruction
            .as_deref()
            .is_none_or(|s| s.trim().is_empty())
    {
        bail!("--edit needs --instruction (what to do to the picture)");
    }
    // No model and no PNG to say which: the painter's default.
    let model = match (&args.model, &from_png) {
        (Some(m), _) => m.clone(),
        (None, None) => "fast".to_owned(),
        (None, Some(_)) => String::new(),
    };
    let painter = Model::parse(&model).filter(|_| !Path::new(&model).exists());
    // `--edit --model edit`: whatever draws the server's edit tier.
    if args.edit.is_some() && model == "edit" && !Path::new(&model).exists() {
        let has_store = data_dir.join("pictor.redb").exists();
        let edit_tier = super::tier_lines(&data_dir, has_store, diffusion.as_ref())
            .await
            .into_iter()
            .find(|t| t["tier"] == "edit" && t["settings"].is_object());
        let (picture, params) = match edit_tier {
            Some(tier) => {
                let name = tier["model"].as_str().unwrap_or_default().to_owned();
                diffuse(&args, &name, None, &data_dir, Some(&tier["settings"])).await?
            }
            None => paint(&args, Model::Fast)?,
        };
        return write_picture(&args, picture, &params);
    }
    // A tier mapped to an installed model (config file or store) renders as the server would.
    let mapped = match painter {
        Some(tier) if args.edit.is_none() => {
            let has_store = data_dir.join("pictor.redb").exists();
            super::tier_lines(&data_dir, has_store, diffusion.as_ref())
                .await
                .into_iter()
                .find(|t| t["tier"] == tier.id() && t["settings"].is_object())
        }
        _ => None,
    };
    let (picture, params) = match (painter, mapped) {
        (Some(_), Some(tier)) => {
            let name = tier["model"].as_str().unwrap_or_default().to_owned();
            diffuse(&args, &name, None, &data_dir, Some(&tier["settings"])).await?
        }
        (Some(model), None) => paint(&args, model)?,
        (None, _) => diffuse(&args, &model, from_png.as_ref(), &data_dir, None).await?,
    };
    write_picture(&args, picture, &params)
}

/// Writes the PNG (downscaled to `--max-side`) with its parameters.
fn write_picture(
    args: &RenderArgs,
    picture: render::Picture,
    params: &PngParameters,
) -> anyhow::Result<()> {
    let picture = match args.max_side {
        Some(side) => render::downscale(picture, side),
        None => picture,
    };
    let (w, h) = (picture.width(), picture.height());
    let png = render::finish(picture, false, params)?;
    std::fs::write(&args.out, &png)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    eprintln!(
        "wrote {} ({w}x{h}, {} KB, {} by {}, seed {})",
        args.out.display(),
        png.len().div_ceil(1000),
        params.kind,
        params
            .details
            .as_ref()
            .map_or(params.model.as_str(), |d| d.model_name.as_str()),
        params.seed
    );
    Ok(())
}

/// `--edit` and `--mask`, read and checked (before a model loads).
#[cfg(feature = "diffusion")]
fn edit_input(
    args: &RenderArgs,
) -> anyhow::Result<Option<(image::RgbaImage, Option<image::GrayImage>)>> {
    let Some(path) = &args.edit else {
        return Ok(None);
    };
    let limits = render::decode::DecodeLimits::default();
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let source = render::decode::decode(&bytes, &limits)
        .with_context(|| format!("{} is not a picture Pictor can edit", path.display()))?;
    let mask = read_mask(args)?
        .map(|m| render::decode::mask(&m, source.width(), source.height(), &limits))
        .transpose()?;
    Ok(Some((source, mask)))
}

/// `--mask`, read.
fn read_mask(args: &RenderArgs) -> anyhow::Result<Option<Vec<u8>>> {
    args.mask
        .as_ref()
        .map(|p| std::fs::read(p).with_context(|| format!("cannot read {}", p.display())))
        .transpose()
}

/// Settings in a PNG that change a picture and that a re-render does not reproduce.
const NOT_REPRODUCED: [&str; 9] = [
    "Clip skip",
    "ENSD",
    "Eta",
    "Eta DDIM",
    "Hires upscale",
    "Variation seed",
    "Seed resize from",
    "SGM noise multiplier",
    "Refiner",
];

/// Fills the flags not given from an infotext; refuses what cannot be re-rendered and warns
/// about settings that will be left out.
fn apply_infotext(args: &mut RenderArgs, info: &Infotext) -> anyhow::Result<()> {
    fn int<T: std::str::FromStr>(info: &Infotext, k: &str) -> anyhow::Result<Option<T>> {
        info.get(k)
            .map(|v| {
                v.trim()
                    .parse::<T>()
                    .ok()
                    .with_context(|| format!("the PNG's {k} is not a whole number in range: {v:?}"))
            })
            .transpose()
    }
    let edit = info.get("Denoising strength").is_some()
        || info.get("Edit") == Some("yes")
        || info.get("Edit mode").is_some();
    if edit {
        if args.edit.is_none() {
            bail!(
                "the PNG is an edit: pass the picture it edited with --edit SOURCE (and its mask with --mask) to re-render it"
            );
        }
        args.instruction.get_or_insert_with(|| info.prompt.clone());
        if args.image_guidance.is_none() {
            args.image_guidance = info
                .get("Image CFG scale")
                .map(|v| v.trim().parse::<f64>())
                .transpose()
                .context("the PNG's Image CFG scale is not a number")?;
        }
        if args.strength.is_none() && info.get("Edit mode").is_some() {
            args.strength = info
                .get("Denoising strength")
                .map(|v| v.trim().parse::<f64>())
                .transpose()
                .context("the PNG's Denoising strength is not a number")?;
        }
        let masked = matches!(info.get("Edit mode"), Some("inpainting" | "masked img2img"))
            && info.get("Denoising strength").is_some();
        if masked && args.mask.is_none() {
            eprintln!("warning: the edit was masked; without --mask the whole picture is edited");
        }
    } else {
        args.prompt.get_or_insert_with(|| info.prompt.clone());
    }
    if !info.negative_prompt.is_empty() {
        args.negative_prompt
            .get_or_insert_with(|| info.negative_prompt.clone());
    }
    if args.seed.is_none() {
        args.seed = int::<u64>(info, "Seed")?;
    }
    let size = match info.get("Size") {
        None => None,
        Some(v) => Some(
            info.size("Size")
                .with_context(|| format!("the PNG's Size is not WIDTHxHEIGHT: {v:?}"))?,
        ),
    };
    if info.get("Sampler") == Some("procedural") {
        // Only a painter id: a PNG does not get to name files to load.
        if args.model.is_none() {
            args.model = ["Pictor model", "Model"]
                .into_iter()
                .filter_map(|k| info.get(k))
                .find_map(Model::parse)
                .map(|m| m.id().to_owned());
        }
        if args.ratio.is_none()
            && let Some((w, h)) = size
        {
            args.ratio = Some(Ratio::closest(w, h).as_str().to_owned());
        }
        return Ok(());
    }
    if args.steps.is_none() {
        args.steps = int::<usize>(info, "Steps")?;
    }
    if args.guidance.is_none() {
        args.guidance = info
            .get("CFG scale")
            .map(|v| {
                v.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|g| g.is_finite())
                    .with_context(|| format!("the PNG's CFG scale is not a number: {v:?}"))
            })
            .transpose()?;
    }
    if args.sampler.is_none() {
        args.sampler = info.get("Sampler").map(str::to_owned);
    }
    #[cfg(feature = "diffusion")]
    if let Some(name) = &args.sampler
        && let Some((sampler, _)) =
            crate::render::diffusion::scheduler::Sampler::parse_with_schedule(name)
    {
        args.png_karras =
            crate::render::diffusion::renderer::karras_for(sampler, info.get("Schedule type"));
    }
    if let Some((w, h)) = size {
        args.width.get_or_insert(w as usize);
        args.height.get_or_insert(h as usize);
    }
    if args.noise.is_none() {
        // A1111 leaves RNG out for its default, the GPU noise.
        args.noise = Some(info.get("RNG").unwrap_or("GPU").to_owned());
    }
    let left_out: Vec<&str> = NOT_REPRODUCED
        .into_iter()
        .filter(|k| match info.get(k) {
            None => false,
            Some(v) => !(*k == "Clip skip" && v.trim() == "1"),
        })
        .collect();
    if !left_out.is_empty() {
        eprintln!(
            "warning: the PNG's {} {} not reproduced; the picture will differ",
            left_out.join(", "),
            if left_out.len() == 1 { "is" } else { "are" }
        );
    }
    Ok(())
}

fn paint(args: &RenderArgs, model: Model) -> anyhow::Result<(render::Picture, PngParameters)> {
    let seed = args.seed.unwrap_or(1);
    if let Some(input) = &args.edit {
        let instruction = args.instruction.clone().unwrap_or_default();
        let source =
            std::fs::read(input).with_context(|| format!("cannot read {}", input.display()))?;
        let mask = read_mask(args)?;
        let picture = ProceduralRenderer.edit(&EditSpec {
            source,
            instruction: instruction.clone(),
            seed,
            mask,
            loras: Vec::new(),
        })?;
        let params = PngParameters {
            prompt: instruction,
            seed,
            model: model.id().into(),
            kind: "edit",
            details: None,
            scene: None,
        };
        return Ok((picture, params));
    }
    let prompt = args.prompt.clone().unwrap_or_default();
    anyhow::ensure!(!prompt.trim().is_empty(), "--prompt is required");
    let ratio = Ratio::parse(args.ratio.as_deref().unwrap_or("1:1"))
        .context("unknown ratio")?
        .resolve_auto(&prompt);
    let control = render::RenderControl::default();
    let picture = match &args.style {
        Some(name) => {
            let style = Style::parse(name).context(
                "unknown style; use photo, watercolor, oil, sketch, pixel, lowpoly, neon, poster or japanese",
            )?;
            render::procedural::render_picture(&prompt, model, ratio, seed, Some(style))
        }
        None => ProceduralRenderer.generate_with(
            &GenerateSpec {
                prompt: prompt.clone(),
                model,
                ratio,
                seed,
                noise: None,
                loras: Vec::new(),
            },
            &control,
        )?,
    };
    // What the painter drew and could not draw, as the server's pictures record it.
    let params = PngParameters {
        prompt,
        seed,
        model: model.id().into(),
        kind: "generate",
        details: None,
        scene: control.scene(),
    };
    Ok((picture, params))
}

#[cfg(not(feature = "diffusion"))]
async fn diffuse(
    _: &RenderArgs,
    model: &str,
    _: Option<&Infotext>,
    _: &Path,
    _: Option<&serde_json::Value>,
) -> anyhow::Result<(render::Picture, PngParameters)> {
    bail!(
        "{model:?} is not fast, artist or 0.2plus, and this build has no diffusion engine (feature `diffusion`)"
    )
}

#[cfg(feature = "diffusion")]
async fn diffuse(
    args: &RenderArgs,
    model: &str,
    from_png: Option<&Infotext>,
    data_dir: &Path,
    mapped: Option<&serde_json::Value>,
) -> anyhow::Result<(render::Picture, PngParameters)> {
    use crate::catalog::NoiseKind;
    use crate::render::diffusion::renderer::{parse_schedule, render_details, to_picture};
    use crate::render::diffusion::scheduler::Sampler;
    use crate::render::diffusion::{ModelSource, NoControl, Pipeline, Request, noise};

    let (name, source, hash, preset) = resolve_model(args, model, from_png, data_dir).await?;
    // What the flags and a PNG leave open: the tier's mapping, else the model family's preset
    // (a Turbo model runs 1 step without guidance, not 20 at CFG 7).
    let defaults = mapped.cloned().or(preset).unwrap_or_default();
    if matches!(source, ModelSource::Flux { .. } | ModelSource::Sd3 { .. }) {
        return diffuse_transformer(args, (name, source, hash), &defaults, from_png, data_dir)
            .await;
    }
    let default_str = |k: &str| defaults.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let sampler_name = args.sampler.clone().or_else(|| default_str("sampler"));
    let (sampler, named_karras) = match &sampler_name {
        None => (Sampler::EulerAncestral, None),
        Some(s) => Sampler::parse_with_schedule(s).with_context(|| {
            format!("unknown sampler {s:?}; use euler, euler_a, ddim, dpm++_2m, heun or lms")
        })?,
    };
    // An explicit --schedule decides; else a name like "DPM++ 2M Karras"; else what a PNG's
    // "Schedule type" meant to A1111; else the mapping's or preset's (when the sampler is
    // theirs too); else the model's own configuration.
    let schedule = args.schedule.clone().or_else(|| {
        args.sampler
            .is_none()
            .then(|| default_str("schedule"))
            .flatten()
    });
    let karras = match &schedule {
        Some(s) => parse_schedule(s)
            .with_context(|| format!("unknown schedule {s:?}; use automatic, karras or uniform"))?,
        None => named_karras.or(args.png_karras),
    };
    if karras == Some(true) && !sampler.supports_karras() {
        eprintln!(
            "warning: {} has no Karras schedule; using the model's",
            sampler.a1111_name()
        );
    }
    let kind = match &args.noise {
        None => NoiseKind::TorchCpu,
        Some(n) => NoiseKind::parse(n)
            .with_context(|| format!("unknown noise source {n:?}; use torch-cpu or a1111-gpu"))?,
    };
    let steps = args
        .steps
        .or_else(|| {
            defaults
                .get("steps")
                .and_then(|v| v.as_u64())
                .map(|v| v as usize)
        })
        .unwrap_or(20);
    anyhow::ensure!((1..=150).contains(&steps), "--steps must be from 1 to 150");
    let guidance = args
        .guidance
        .or_else(|| defaults.get("guidance").and_then(|v| v.as_f64()))
        .unwrap_or(7.0);
    anyhow::ensure!(
        (0.0..=30.0).contains(&guidance),
        "--guidance must be from 0 to 30"
    );
    let editing = args.edit.is_some();
    let prompt = if editing {
        args.instruction.clone()
    } else {
        args.prompt.clone()
    }
    .unwrap_or_default();
    anyhow::ensure!(
        !prompt.trim().is_empty(),
        if editing {
            "--instruction is required"
        } else {
            "--prompt is required"
        }
    );
    let seed = args.seed.unwrap_or(1);
    // Checked before a model of several GB loads.
    let edit_input = edit_input(args)?;
    // A prompt's `<lora:name:weight>` tags: installed LoRAs merged into the model; the model
    // reads the words without them.
    let (words, loras) = if editing {
        (prompt.clone(), Vec::new())
    } else {
        let (words, tags) = render::lora_tags::parse(&prompt).map_err(anyhow::Error::msg)?;
        (words, installed_loras(&tags, from_png, data_dir).await?)
    };
    if let Some(s) = args.strength {
        anyhow::ensure!(s > 0.0 && s <= 1.0, "--strength must be in (0, 1]");
    }
    let image_guidance = args
        .image_guidance
        .or_else(|| defaults.get("image_guidance").and_then(|v| v.as_f64()))
        .unwrap_or(1.5);
    anyhow::ensure!(
        (0.0..=10.0).contains(&image_guidance),
        "--image-guidance must be from 0 to 10"
    );
    for (flag, v) in [("--width", args.width), ("--height", args.height)] {
        if let Some(v) = v {
            anyhow::ensure!(
                v.is_multiple_of(8) && (64..=4096).contains(&v),
                "{flag} must be a multiple of 8 from 64 to 4096 (got {v})"
            );
        }
    }

    let started = std::time::Instant::now();
    let device = crate::render::diffusion::device();
    let overrides = crate::render::diffusion::single_file::Overrides {
        prediction: default_str("prediction"),
        timestep_spacing: default_str("timestep_spacing"),
        int8_text: default_str("text_weights")
            .is_some_and(|w| matches!(w.as_str(), "int8" | "q8_0")),
        int8_unet: default_str("unet_weights")
            .is_some_and(|w| matches!(w.as_str(), "int8" | "q8_0")),
        loras: loras
            .iter()
            .map(|u| crate::render::diffusion::lora::LoraSpec {
                path: u.path.clone(),
                unet: u.unet,
                text: u.text,
            })
            .collect(),
    };
    let tiny = default_str("tiny_vae").map(PathBuf::from);
    let pipeline = tokio::task::spawn_blocking(move || {
        let mut p = Pipeline::load(&source, &overrides, &device)?;
        if let Some(dir) = &tiny {
            p.use_tiny_decoder(crate::render::diffusion::taesd::TinyDecoder::load(
                dir, &device,
            )?)?;
        }
        Ok::<_, crate::render::diffusion::DiffusionError>(p)
    })
    .await?
    .with_context(|| format!("cannot load {name:?}"))?;
    let native = defaults
        .get("size")
        .and_then(|v| v.as_u64())
        .map(|v| v as usize)
        .unwrap_or(pipeline.sample_size * 8);
    let req = Request {
        prompt: words,
        negative_prompt: args
            .negative_prompt
            .clone()
            .or_else(|| default_str("negative_prompt"))
            .unwrap_or_default(),
        steps,
        guidance,
        sampler,
        karras,
        width: args.width.unwrap_or(native),
        height: args.height.unwrap_or(native),
    };
    if let Some((source, mask)) = edit_input {
        let mapped_strength = defaults
            .get("strength")
            .and_then(|v| v.as_f64())
            .unwrap_or(0.6);
        let settings = crate::render::diffusion::renderer::EditSettings {
            negative_prompt: req.negative_prompt.clone(),
            steps,
            guidance,
            sampler,
            karras,
            long: args.width.max(args.height).unwrap_or(native),
            strength: args.strength.unwrap_or_else(|| {
                crate::render::diffusion::renderer::strength_for(&prompt, mapped_strength)
            }),
            image_guidance,
        };
        let instruction = prompt.clone();
        let (picture, req, made) = tokio::task::spawn_blocking(move || {
            let mut n = noise::source(kind, seed);
            crate::render::diffusion::renderer::edit_picture(
                &pipeline,
                &source,
                mask.as_ref(),
                &instruction,
                &settings,
                n.as_mut(),
                &NoControl,
            )
            .map(|(p, r, m)| (p, (r, pipeline), m))
        })
        .await??;
        let (req, pipeline) = req;
        let (picture, exact) = ProceduralRenderer.apply_exact(picture, &prompt, seed)?;
        let mut details = render_details(&pipeline, &req, &name, &hash, kind, made.strength);
        details.edit_mode = Some(made.mode);
        details.image_guidance = made.image_guidance;
        details.exact = exact.clone();
        eprintln!(
            "{name}: {} edit at {}x{}, {} {} steps, seed {seed}, {kind} noise{}, {:.1} s",
            made.mode,
            req.width,
            req.height,
            sampler.a1111_name(),
            steps,
            if exact.is_empty() {
                String::new()
            } else {
                format!(", then {}", exact.join(", "))
            },
            started.elapsed().as_secs_f64()
        );
        let params = PngParameters {
            prompt,
            seed,
            model: name,
            kind: "edit",
            details: Some(details),
            scene: None,
        };
        return Ok((picture, params));
    }
    let mut details = render_details(&pipeline, &req, &name, &hash, kind, None);
    details.loras = loras
        .iter()
        .map(|u| (u.name.clone(), u.hash.clone()))
        .collect();
    let (w, h) = (req.width, req.height);
    let rgb = tokio::task::spawn_blocking(move || {
        let mut n = noise::source(kind, seed);
        pipeline.txt2img(&req, n.as_mut(), &NoControl)
    })
    .await??;
    let picture = to_picture(rgb, w, h, w as u32, h as u32)?;
    eprintln!(
        "{name}: {w}x{h}, {} {} steps, seed {seed}, {kind} noise, {:.1} s",
        sampler.a1111_name(),
        steps,
        started.elapsed().as_secs_f64()
    );
    let params = PngParameters {
        prompt,
        seed,
        model: name,
        kind: "generate",
        details: Some(details),
        scene: None,
    };
    Ok((picture, params))
}

/// A picture from a FLUX.1 or SD 3 model: its family's steps and guidance unless given, the
/// flow-matching Euler sampler; SD 3 takes a negative prompt, FLUX none; LoRAs from the
/// prompt's tags. Edits and other samplers are refused before anything loads.
#[cfg(feature = "diffusion")]
async fn diffuse_transformer(
    args: &RenderArgs,
    (name, mut source, hash): (String, crate::render::diffusion::ModelSource, String),
    defaults: &serde_json::Value,
    from_png: Option<&Infotext>,
    data_dir: &Path,
) -> anyhow::Result<(render::Picture, PngParameters)> {
    use crate::catalog::NoiseKind;
    use crate::render::diffusion::ModelSource;
    use crate::render::diffusion::renderer::{flux_details, sd3_details, to_picture};
    use crate::render::diffusion::{NoControl, noise};

    let flux = matches!(source, ModelSource::Flux { .. });
    let family = if flux { "FLUX" } else { "SD 3" };
    anyhow::ensure!(
        args.edit.is_none(),
        "{family} models do not edit pictures yet: use an SD 1.x/2.x/XL model for --edit"
    );
    let prompt = args.prompt.clone().unwrap_or_default();
    anyhow::ensure!(!prompt.trim().is_empty(), "--prompt is required");
    // `<lora:name:weight>` tags: installed LoRAs applied to the transformer and CLIP.
    let (words, tags) = render::lora_tags::parse(&prompt).map_err(anyhow::Error::msg)?;
    let loras = installed_loras(&tags, from_png, data_dir).await?;
    let lora_specs: Vec<_> = loras
        .iter()
        .map(|u| crate::render::diffusion::lora::LoraSpec {
            path: u.path.clone(),
            unet: u.unet,
            text: u.text,
        })
        .collect();
    if let Some(s) = &args.sampler {
        anyhow::ensure!(
            s.eq_ignore_ascii_case("euler"),
            "{family} models have one sampler: euler"
        );
    }
    if let Some(s) = &args.schedule {
        anyhow::ensure!(
            s.eq_ignore_ascii_case("automatic"),
            "{family} models have one schedule: automatic"
        );
    }
    let default_str = |k: &str| defaults.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let negative = args
        .negative_prompt
        .clone()
        .or_else(|| default_str("negative_prompt"))
        .unwrap_or_default();
    anyhow::ensure!(
        !flux || negative.is_empty(),
        "FLUX models take no negative prompt"
    );
    let steps = args
        .steps
        .or_else(|| {
            defaults
                .get("steps")
                .and_then(|v| v.as_u64())
                .map(|v| v as usize)
        })
        .unwrap_or(20);
    anyhow::ensure!((1..=150).contains(&steps), "--steps must be from 1 to 150");
    let guidance = args
        .guidance
        .or_else(|| defaults.get("guidance").and_then(|v| v.as_f64()))
        .unwrap_or(if flux { 3.5 } else { 4.5 });
    anyhow::ensure!(
        (0.0..=30.0).contains(&guidance),
        "--guidance must be from 0 to 30"
    );
    let native = defaults
        .get("size")
        .and_then(|v| v.as_u64())
        .map_or(1024, |v| v as usize);
    let (width, height) = (args.width.unwrap_or(native), args.height.unwrap_or(native));
    for (flag, v) in [("--width", width), ("--height", height)] {
        anyhow::ensure!(
            v.is_multiple_of(16) && (64..=4096).contains(&v),
            "{flag} must be a multiple of 16 from 64 to 4096 for {family} models (got {v})"
        );
    }
    let kind = match &args.noise {
        None => NoiseKind::TorchCpu,
        Some(n) => NoiseKind::parse(n)
            .with_context(|| format!("unknown noise source {n:?}; use torch-cpu or a1111-gpu"))?,
    };
    let seed = args.seed.unwrap_or(1);
    // The tier mapping's part files when the flags name none.
    let mapped_file = |k: &str| default_str(k).map(PathBuf::from);
    match &mut source {
        ModelSource::Flux { files, .. } => {
            files.transformer = files
                .transformer
                .take()
                .or_else(|| mapped_file("transformer"));
            files.text_encoder_2 = files
                .text_encoder_2
                .take()
                .or_else(|| mapped_file("text_encoder_2"));
        }
        ModelSource::Sd3 { files, .. } => {
            files.transformer = files
                .transformer
                .take()
                .or_else(|| mapped_file("transformer"));
            files.text_encoder_3 = files
                .text_encoder_3
                .take()
                .or_else(|| mapped_file("text_encoder_3"));
        }
        _ => {}
    }
    let started = std::time::Instant::now();
    let device = crate::render::diffusion::device();
    let (rgb, details) = tokio::task::spawn_blocking(move || {
        let mut n = noise::source(kind, seed);
        let who = (name.as_str(), hash.as_str());
        let made = match &source {
            ModelSource::Flux { dir, files } => {
                let f = crate::render::diffusion::flux::FluxPipeline::load_with_loras(
                    dir,
                    files,
                    &lora_specs,
                    &device,
                )?;
                let rgb = f.txt2img(
                    &words,
                    n.as_mut(),
                    width,
                    height,
                    steps,
                    guidance as f32,
                    &NoControl,
                )?;
                (
                    rgb,
                    flux_details(&f, steps, guidance, (width, height), who, kind),
                )
            }
            ModelSource::Sd3 { dir, files } => {
                let f = crate::render::diffusion::sd3::Sd3Pipeline::load_with_loras(
                    dir,
                    files,
                    &lora_specs,
                    &device,
                )?;
                let rgb = f.txt2img(
                    &words,
                    &negative,
                    n.as_mut(),
                    width,
                    height,
                    steps,
                    guidance as f32,
                    &NoControl,
                )?;
                let details = sd3_details(&negative, steps, guidance, (width, height), who, kind);
                (rgb, details)
            }
            _ => {
                return Err(crate::render::diffusion::DiffusionError::Model(
                    "not a FLUX or SD 3 model".into(),
                ));
            }
        };
        Ok::<_, crate::render::diffusion::DiffusionError>((made, name))
    })
    .await?
    .map(|((rgb, details), name)| (rgb, (details, name)))
    .context("rendering")?;
    let (mut details, name) = details;
    details.loras = loras
        .iter()
        .map(|u| (u.name.clone(), u.hash.clone()))
        .collect();
    let picture = to_picture(rgb, width, height, width as u32, height as u32)?;
    eprintln!(
        "{name}: {width}x{height}, Euler {steps} steps, seed {seed}, {kind} noise, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let params = PngParameters {
        prompt,
        seed,
        model: name,
        kind: "generate",
        details: Some(details),
        scene: None,
    };
    Ok((picture, params))
}

/// The installed models, if there is a store (rendering never creates one).
#[cfg(feature = "diffusion")]
async fn installed_records(
    data_dir: &Path,
) -> anyhow::Result<Vec<crate::store::models::ModelRecord>> {
    let listed = if data_dir.join("pictor.redb").exists() {
        super::run_admin(data_dir.to_path_buf(), crate::ops::AdminRequest::ModelList).await?
    } else {
        serde_json::Value::Null
    };
    Ok(serde_json::from_value(listed["models"].clone()).unwrap_or_default())
}

/// The installed LoRAs a prompt's tags name: by installed name or file name, else — from a
/// PNG — by the hash its `Lora hashes` give for the tag's name (AUTOMATIC1111's addnet hash).
#[cfg(feature = "diffusion")]
async fn installed_loras(
    tags: &[render::lora_tags::LoraTag],
    from_png: Option<&Infotext>,
    data_dir: &Path,
) -> anyhow::Result<Vec<render::LoraUse>> {
    if tags.is_empty() {
        return Ok(Vec::new());
    }
    let records = installed_records(data_dir).await?;
    let loras: Vec<_> = records
        .iter()
        .filter(|r| r.kind == crate::models::Kind::Lora)
        .collect();
    // "name: hash, name: hash" from the PNG.
    let png_hashes: Vec<(String, String)> = from_png
        .and_then(|i| i.get("Lora hashes"))
        .map(|h| {
            h.split(',')
                .filter_map(|p| p.split_once(':'))
                .map(|(n, h)| (n.trim().to_owned(), h.trim().to_ascii_lowercase()))
                .collect()
        })
        .unwrap_or_default();
    let stem = |p: &str| {
        Path::new(p)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
    };
    tags.iter()
        .map(|t| {
            let by_hash = png_hashes
                .iter()
                .find(|(n, _)| *n == t.name)
                .and_then(|(_, h)| {
                    loras.iter().find(|r| {
                        r.sha256
                            .as_deref()
                            .is_some_and(|s| !h.is_empty() && s.starts_with(h.as_str()))
                    })
                });
            let found = loras
                .iter()
                .find(|r| r.name == t.name || stem(&r.path).as_deref() == Some(&t.name))
                .or(by_hash)
                .with_context(|| {
                    format!(
                        "<lora:{}>: no such LoRA is installed here (pictor models add {} FILE.safetensors)",
                        t.name, t.name
                    )
                })?;
            Ok(render::LoraUse {
                name: t.name.clone(),
                path: PathBuf::from(&found.path),
                hash: found.sha256.clone().unwrap_or_default(),
                text: t.text,
                unet: t.unet,
            })
        })
        .collect()
}

/// The model a diffusion render uses: a path (a diffusers folder or a checkpoint file), an
/// installed model's name, or — from a PNG with no `--model` — the installed model its
/// parameters name (by name or file name, else by hash).
#[cfg(feature = "diffusion")]
async fn resolve_model(
    args: &RenderArgs,
    model: &str,
    from_png: Option<&Infotext>,
    data_dir: &Path,
) -> anyhow::Result<(
    String,
    crate::render::diffusion::ModelSource,
    String,
    Option<serde_json::Value>,
)> {
    use crate::render::diffusion::{ModelSource, load};

    // The hash a PNG records: A1111's (the file's SHA-256, first 10 digits) for a single file,
    // Pictor's quick hash for a diffusers folder.
    let from_path = |path: &Path, name: String, sha256: Option<&str>| -> anyhow::Result<_> {
        let flux = crate::render::diffusion::flux::FluxPipeline::is_flux_folder(path);
        let sd3 = crate::render::diffusion::sd3::Sd3Pipeline::is_sd3_folder(path);
        if !flux && !sd3 && (args.transformer.is_some() || args.t5.is_some()) {
            bail!("--transformer and --t5 are for FLUX and SD 3 models");
        }
        let (source, hash) = if flux {
            let files = crate::render::diffusion::flux::FluxFiles {
                transformer: args.transformer.clone(),
                text_encoder_2: args.t5.clone(),
                quantise_float: None,
            };
            (
                ModelSource::Flux {
                    dir: path.to_path_buf(),
                    files,
                },
                load::quick_hash(path),
            )
        } else if sd3 {
            let files = crate::render::diffusion::sd3::Sd3Files {
                transformer: args.transformer.clone(),
                text_encoder_3: args.t5.clone(),
                quantise_float: None,
            };
            (
                ModelSource::Sd3 {
                    dir: path.to_path_buf(),
                    files,
                },
                load::quick_hash(path),
            )
        } else if path.join("model_index.json").is_file() {
            (
                ModelSource::Diffusers(path.to_path_buf()),
                load::quick_hash(path),
            )
        } else if path.is_file() {
            let sha = match sha256 {
                Some(h) => h.to_owned(),
                None => crate::models::sha256_file(path)
                    .with_context(|| format!("cannot read {}", path.display()))?,
            };
            let source = ModelSource::SingleFile {
                path: path.to_path_buf(),
                config: args.model_config.clone(),
            };
            (source, sha.chars().take(10).collect())
        } else {
            bail!(
                "{} is neither a diffusers folder (model_index.json) nor a checkpoint file",
                path.display()
            )
        };
        Ok((name, source, hash))
    };
    // The family preset of a model on disk, as a mapping's settings.
    let preset = |path: &Path, name: &str, source: Option<&str>| {
        let info = crate::models::inspect(path).ok()?;
        let family = crate::models::family_of(&info, name, source);
        serde_json::to_value(preset_settings(family, info.role)).ok()
    };
    let path = Path::new(model);
    let explicit = args.model.is_some() || from_png.is_none();
    if explicit && path.exists() {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| model.to_owned());
        let p = preset(path, &name, None);
        return from_path(path, name, None).map(|(a, b, c)| (a, b, c, p));
    }
    let records = installed_records(data_dir).await?;
    let installed: Vec<(String, PathBuf, Option<String>)> = records
        .iter()
        .map(|m| (m.name.clone(), PathBuf::from(&m.path), m.sha256.clone()))
        .collect();
    let stem = |p: &Path| p.file_stem().map(|s| s.to_string_lossy().into_owned());
    let found = if explicit {
        installed.iter().find(|(n, _, _)| n == model)
    } else {
        let info = from_png.context("--model is required")?;
        let wanted = info.get("Model").unwrap_or_default();
        installed
            .iter()
            .find(|(n, p, _)| n == wanted || stem(p).as_deref() == Some(wanted))
            .or_else(|| {
                let hash = info.get("Model hash")?.to_ascii_lowercase();
                installed.iter().find(|(_, p, sha)| {
                    sha.as_deref().is_some_and(|s| s.starts_with(&hash))
                        || load::quick_hash(p) == hash
                })
            })
    };
    match found {
        Some((name, path, sha)) => {
            let t = toml::Table::from_iter([("model".to_string(), name.clone().into())]);
            // An edit runs with what the edit tier would (an InstructPix2Pix model's preset).
            let tier = if args.edit.is_some() {
                "edit"
            } else {
                "--model"
            };
            let p = crate::render::tiers::effective(tier, &t, &records)
                .ok()
                .and_then(|t| serde_json::to_value(t).ok());
            from_path(path, name.clone(), sha.as_deref()).map(|(a, b, c)| (a, b, c, p))
        }
        None if explicit => bail!(
            "no installed model is named {model:?} and no such file or folder exists (see `pictor models list`)"
        ),
        None => bail!(
            "the PNG was made with model {:?} (hash {}), which is not installed here: pass --model NAME|PATH",
            from_png.and_then(|i| i.get("Model")).unwrap_or("?"),
            from_png.and_then(|i| i.get("Model hash")).unwrap_or("?"),
        ),
    }
}

/// A family's preset as a mapping's settings (for a model given by path, with no installed
/// tiny decoder to attach).
#[cfg(feature = "diffusion")]
fn preset_settings(family: crate::models::Family, role: crate::models::Role) -> serde_json::Value {
    let p = family.preset_for(role);
    let mut v = serde_json::json!({
        "steps": p.steps,
        "guidance": p.guidance,
        "sampler": p.sampler,
        "schedule": p.schedule,
    });
    if let Some(s) = p.timestep_spacing {
        v["timestep_spacing"] = s.into();
    }
    if let Some(g) = p.image_guidance {
        v["image_guidance"] = g.into();
    }
    v
}
