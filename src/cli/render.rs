//! `pictor render`: one picture to a file with the built-in renderer, no server or data folder.
//! Also applies an edit instruction to an image file (`--edit IN --instruction …`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::render::{
    self, EditSpec, GenerateSpec, Model, PngParameters, ProceduralRenderer, Ratio, Renderer, Style,
};

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// What to draw.
    #[arg(long, default_value = "")]
    pub prompt: String,
    /// fast, artist or 0.2plus (aliases accepted).
    #[arg(long, default_value = "fast")]
    pub model: String,
    /// 1:1, 16:9, 9:16, 3:2, 2:3, 4:3, 3:4 or auto.
    #[arg(long, default_value = "1:1")]
    pub ratio: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Force a style: photo, watercolor, oil, sketch, pixel, lowpoly, neon, poster, japanese.
    #[arg(long)]
    pub style: Option<String>,
    /// Downscale the result so its long side is at most this many pixels (gallery thumbnails).
    #[arg(long)]
    pub max_side: Option<u32>,
    /// Edit this image file (PNG, JPEG or WebP) with `--instruction` instead of generating.
    #[arg(long, requires = "instruction")]
    pub edit: Option<PathBuf>,
    /// The edit instruction, e.g. "make it black and white and add a vignette".
    #[arg(long)]
    pub instruction: Option<String>,
    /// Output PNG file.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: &RenderArgs) -> anyhow::Result<()> {
    let model = Model::parse(&args.model).context("unknown model; use fast, artist or 0.2plus")?;
    let (picture, params) = if let Some(input) = &args.edit {
        let instruction = args.instruction.clone().unwrap_or_default();
        let source =
            std::fs::read(input).with_context(|| format!("cannot read {}", input.display()))?;
        let picture = ProceduralRenderer.edit(&EditSpec {
            source,
            instruction: instruction.clone(),
            seed: args.seed,
        })?;
        let params = PngParameters {
            prompt: instruction,
            seed: args.seed,
            model: model.id().into(),
            kind: "edit",
            details: None,
        };
        (picture, params)
    } else {
        anyhow::ensure!(!args.prompt.trim().is_empty(), "--prompt is required");
        let ratio = Ratio::parse(&args.ratio)
            .context("unknown ratio")?
            .resolve_auto(&args.prompt);
        let picture = match &args.style {
            Some(name) => {
                let style = Style::parse(name).context(
                    "unknown style; use photo, watercolor, oil, sketch, pixel, lowpoly, neon, poster or japanese",
                )?;
                render::procedural::render_picture(
                    &args.prompt,
                    model,
                    ratio,
                    args.seed,
                    Some(style),
                )
            }
            None => ProceduralRenderer.generate(&GenerateSpec {
                noise: None,
                prompt: args.prompt.clone(),
                model,
                ratio,
                seed: args.seed,
            })?,
        };
        let params = PngParameters {
            prompt: args.prompt.clone(),
            seed: args.seed,
            model: model.id().into(),
            kind: "generate",
            details: None,
        };
        (picture, params)
    };
    let picture = match args.max_side {
        Some(side) => render::downscale(picture, side),
        None => picture,
    };
    let png = render::finish(picture, false, &params)?;
    std::fs::write(&args.out, png)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    Ok(())
}
