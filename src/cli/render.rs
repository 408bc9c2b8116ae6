//! `pictor render`: one picture to a file with the built-in renderer, no server or data folder.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::render::{
    self, GenerateSpec, Model, PngParameters, ProceduralRenderer, Ratio, Renderer,
};

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// What to draw.
    #[arg(long)]
    pub prompt: String,
    /// fast, artist or 0.2plus (aliases accepted).
    #[arg(long, default_value = "fast")]
    pub model: String,
    /// 1:1, 16:9, 9:16, 3:2, 2:3, 4:3, 3:4 or auto.
    #[arg(long, default_value = "1:1")]
    pub ratio: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output PNG file.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: &RenderArgs) -> anyhow::Result<()> {
    let model = Model::parse(&args.model).context("unknown model; use fast, artist or 0.2plus")?;
    let ratio = Ratio::parse(&args.ratio)
        .context("unknown ratio")?
        .resolve_auto(&args.prompt);
    let spec = GenerateSpec {
        prompt: args.prompt.clone(),
        model,
        ratio,
        seed: args.seed,
    };
    let picture = ProceduralRenderer.generate(&spec)?;
    let params = PngParameters {
        prompt: args.prompt.clone(),
        seed: args.seed,
        model: model.id().into(),
        kind: "generate",
    };
    let png = render::finish(picture, false, &params)?;
    std::fs::write(&args.out, png)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    Ok(())
}
