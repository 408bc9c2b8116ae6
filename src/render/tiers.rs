//! Tiers: what draws Standard (`fast`), PRO (`artist`), Premium (`0.2plus`) and edits.
//!
//! A tier is drawn by an installed diffusion model when one is mapped to it, else by the
//! renderer underneath (the procedural painter, or an inference server from `[backends]`).
//! Mappings come from two places, as settings do: the config file's `[diffusion.<tier>]` tables
//! (checked at start: a typo stops the server with its reason) and the store, where the
//! operator console and `pictor models map` put them. The config file wins for a tier it maps.
//! Every mapping starts from its model's family preset ([`crate::models::Family::preset`]) and
//! overrides what it names; a stored mapping is applied without a restart ([`Tiers::reload`]).

use std::sync::{Arc, RwLock};

use serde::Serialize;

use crate::models::{Arch, Kind};
use crate::store::Store;
use crate::store::models::{ModelRecord, TIER_NAMES, TierMapping};

use super::{EditSpec, GenerateSpec, Model, Picture, RenderControl, RenderError, Renderer};

/// The catalogue entry recommended for this build: SD-Turbo (+ TAESD) on a CPU, SDXL-Turbo
/// with a GPU.
pub fn recommended() -> &'static str {
    if cfg!(feature = "cuda") {
        "sdxl-turbo"
    } else {
        "sd-turbo"
    }
}

/// [`recommended`]'s title.
pub fn recommended_title() -> &'static str {
    if cfg!(feature = "cuda") {
        "SDXL-Turbo"
    } else {
        "SD-Turbo"
    }
}

/// Where a tier's mapping comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `[diffusion.<tier>]` in the config file.
    ConfigFile,
    /// The store: the operator console or `pictor models map`.
    Console,
    /// Not mapped: the renderer underneath draws it.
    None,
}

/// One tier as it is served now.
#[derive(Debug, Clone, Serialize)]
pub struct TierState {
    pub tier: &'static str,
    pub origin: Origin,
    /// The installed model that draws it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How people call that model ("SD-Turbo").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family: Option<&'static str>,
    /// The settings it runs with (the preset with the mapping's overrides), as the config file
    /// would write them.
    pub settings: serde_json::Value,
    /// Why a mapping is not applied (the tier is drawn by the renderer underneath meanwhile).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// A stored mapping as the config file would write it.
pub fn mapping_table(m: &TierMapping) -> toml::Table {
    let mut t = match toml::Value::try_from(m) {
        Ok(toml::Value::Table(t)) => t,
        _ => toml::Table::new(),
    };
    t.remove("updated_at");
    t
}

/// Whether a tiny decoder made for `decoder` decodes `pipeline`'s latents (TAESD serves SD 1.x
/// and 2.x, which share a latent space; TAESDXL serves SDXL).
fn decodes_for(decoder: Arch, pipeline: Arch) -> bool {
    !pipeline.is_transformer() && (decoder == Arch::Sdxl) == (pipeline == Arch::Sdxl)
}

/// The settings a mapping runs with: its model's family preset, overlaid with the keys
/// `given` names; `tiny_vae` resolved to a folder (an installed tiny decoder's name, `none`, or
/// a path). Errors name the key.
pub fn effective(
    tier: &str,
    given: &toml::Table,
    installed: &[ModelRecord],
) -> Result<toml::Table, String> {
    let name = given
        .get("model")
        .and_then(toml::Value::as_str)
        .ok_or_else(|| format!("{tier}: model = \"<installed model name>\" is required"))?;
    let record = installed.iter().find(|r| r.name == name).ok_or_else(|| {
        format!(
            "{tier}: no installed model is named {name:?} (see `pictor models list`; add one with `pictor models add {name} PATH`)"
        )
    })?;
    let own = record.family().ok_or_else(|| match record.kind {
        Kind::Lora => format!(
            "{tier}: {name:?} is a LoRA; map a pipeline, and ask for the LoRA per picture (<lora:{name}:1> in the prompt, or `loras`)"
        ),
        _ => format!(
            "{tier}: {name:?} is a tiny decoder; map a pipeline and attach it with tiny_vae"
        ),
    })?;
    let family = match given.get("preset") {
        None => own,
        Some(v) => {
            let f = v
                .as_str()
                .and_then(crate::models::Family::parse)
                .ok_or_else(|| {
                    format!(
                        "{tier} preset: one of sd1, sd2, sd-turbo, sdxl, sdxl-turbo, flux-schnell, flux-dev, sd3, sd3-turbo"
                    )
                })?;
            // UNet presets share their settings; a transformer's preset is its own.
            if (f.arch().is_transformer() || record.arch.is_transformer())
                && f.arch() != record.arch
            {
                return Err(format!(
                    "{tier} preset: {} is for {} models, {name:?} is {}",
                    f.id(),
                    f.arch().title(),
                    record.arch.title()
                ));
            }
            // A preset is settings: a Turbo-distilled SD 1.5 fine-tune runs the Turbo one.
            f
        }
    };
    if record.arch.is_transformer() && tier == "edit" {
        return Err(format!(
            "{tier}: {name:?} is a {} model, and Pictor does not edit pictures with {} yet: map a Stable Diffusion 1.x/2.x/XL model (an InstructPix2Pix one follows instructions best)",
            record.arch.title(),
            record.arch.title()
        ));
    }
    if !record.role.is_text() && tier != "edit" {
        return Err(format!(
            "{tier}: {name:?} is an {} model: it edits pictures, map it to the edit tier",
            record.role.title()
        ));
    }
    let preset = family.preset_for(record.role);
    let mut t = toml::Table::new();
    t.insert("steps".into(), i64::from(preset.steps).into());
    t.insert("guidance".into(), preset.guidance.into());
    t.insert("sampler".into(), preset.sampler.into());
    if !given.contains_key("sampler") {
        // A schedule belongs with its sampler: a mapping that names another sampler gets that
        // sampler's own unless it names one too.
        t.insert("schedule".into(), preset.schedule.into());
    }
    if let Some(s) = preset.timestep_spacing {
        t.insert("timestep_spacing".into(), s.into());
    }
    if !preset.negative_prompt.is_empty() {
        t.insert("negative_prompt".into(), preset.negative_prompt.into());
    }
    if let Some(g) = preset.image_guidance {
        t.insert("image_guidance".into(), g.into());
    }
    if preset.tiny_decoder
        && let Some(d) = installed
            .iter()
            .find(|r| r.kind == Kind::TinyDecoder && decodes_for(r.arch, record.arch))
    {
        t.insert("tiny_vae".into(), d.path.clone().into());
    }
    for (k, v) in given {
        t.insert(k.clone(), v.clone());
    }
    if let Some(v) = given.get("tiny_vae") {
        let v = v.as_str().ok_or_else(|| {
            format!("{tier} tiny_vae: an installed tiny decoder's name, \"none\" or a folder")
        })?;
        if v == "none" {
            t.remove("tiny_vae");
        } else if let Some(d) = installed.iter().find(|r| r.name == v) {
            if d.kind != Kind::TinyDecoder {
                return Err(format!(
                    "{tier} tiny_vae: {v:?} is not a tiny decoder (install madebyollin/taesd)"
                ));
            }
            if !decodes_for(d.arch, record.arch) {
                return Err(format!(
                    "{tier} tiny_vae: {v:?} decodes for {}, {name:?} is {}",
                    d.arch.as_str(),
                    record.arch.as_str()
                ));
            }
            t.insert("tiny_vae".into(), d.path.clone().into());
        }
    }
    Ok(t)
}

/// Checks a mapping before it is stored: the tier, the model, and every setting as the engine
/// will read it. Nothing is loaded.
pub fn check(tier: &str, m: &TierMapping, installed: &[ModelRecord]) -> Result<(), String> {
    if !TIER_NAMES.contains(&tier) {
        return Err(format!(
            "{tier:?} is not a tier: use fast, artist, 0.2plus or edit"
        ));
    }
    for (name, v) in [
        ("negative_prompt", &m.negative_prompt),
        ("sampler", &m.sampler),
        ("schedule", &m.schedule),
        ("tiny_vae", &m.tiny_vae),
        ("preset", &m.preset),
        ("timestep_spacing", &m.timestep_spacing),
        ("text_weights", &m.text_weights),
        ("unet_weights", &m.unet_weights),
        ("transformer", &m.transformer),
        ("text_encoder_2", &m.text_encoder_2),
        ("text_encoder_3", &m.text_encoder_3),
    ] {
        if v.as_ref().is_some_and(|v| v.chars().count() > 1000) {
            return Err(format!("{tier} {name}: at most 1000 characters"));
        }
    }
    let table = effective(tier, &mapping_table(m), installed)?;
    #[cfg(feature = "diffusion")]
    {
        engine::mapping_from_table(tier, &table, installed)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    #[cfg(not(feature = "diffusion"))]
    {
        let _ = table;
        Err("this build has no diffusion engine (the `diffusion` cargo feature)".into())
    }
}

/// The tiers of a running server: a [`Renderer`] that sends each tier to its mapped model or
/// to the renderer underneath, and re-reads the stored mappings when they change.
pub struct Tiers {
    fallback: Arc<dyn Renderer>,
    /// The config file's `[diffusion]` table.
    config: Option<toml::Table>,
    #[cfg(feature = "diffusion")]
    engine: Arc<super::diffusion::DiffusionRenderer>,
    states: RwLock<Vec<TierState>>,
}

/// The config file's mapping tables, by tier (`memory_budget_mb` apart); an unknown tier fails.
fn config_tiers(config: Option<&toml::Table>) -> anyhow::Result<Vec<(&'static str, toml::Table)>> {
    let mut out = Vec::new();
    for (key, value) in config.into_iter().flatten() {
        if key == "memory_budget_mb" {
            continue;
        }
        let tier = match key.as_str() {
            "edit" => "edit",
            k => Model::parse(k).map(Model::id).ok_or_else(|| {
                anyhow::anyhow!(
                    "[diffusion.{key}]: not a model id (fast, artist, 0.2plus) or \"edit\""
                )
            })?,
        };
        let t = value
            .as_table()
            .ok_or_else(|| anyhow::anyhow!("[diffusion.{key}] must be a table"))?;
        out.push((tier, t.clone()));
    }
    Ok(out)
}

fn memory_budget(config: Option<&toml::Table>) -> anyhow::Result<u64> {
    match config.and_then(|t| t.get("memory_budget_mb")) {
        None => Ok(16 * 1024 * 1024 * 1024),
        Some(v) => v
            .as_integer()
            .filter(|v| *v > 0)
            .map(|v| v as u64 * 1024 * 1024)
            .ok_or_else(|| {
                anyhow::anyhow!("[diffusion] memory_budget_mb must be a positive integer")
            }),
    }
}

impl Tiers {
    /// The tiers from the config file's `[diffusion]` table and the store. The config file's
    /// mappings must be right (the error says which key is not); a stored mapping that no longer
    /// works (its model's files gone) leaves its tier to the renderer underneath, with the
    /// reason in [`Tiers::states`].
    pub fn new(
        config: Option<toml::Table>,
        fallback: Arc<dyn Renderer>,
        store: &Store,
    ) -> anyhow::Result<Tiers> {
        let budget = memory_budget(config.as_ref())?;
        #[cfg(not(feature = "diffusion"))]
        if config.is_some() {
            anyhow::bail!(
                "[diffusion] in the config file needs a build with the `diffusion` feature (the default)"
            );
        }
        #[cfg(not(feature = "diffusion"))]
        let _ = budget;
        let tiers = Tiers {
            #[cfg(feature = "diffusion")]
            engine: Arc::new(super::diffusion::DiffusionRenderer::new(
                Default::default(),
                None,
                fallback.clone(),
                budget,
            )),
            fallback,
            config,
            states: RwLock::new(Vec::new()),
        };
        tiers.apply(store, true)?;
        Ok(tiers)
    }

    /// Re-reads the stored mappings and applies them to the jobs that start from now on.
    pub fn reload(&self, store: &Store) -> anyhow::Result<()> {
        self.apply(store, false)
    }

    /// Every tier as served now.
    pub fn states(&self) -> Vec<TierState> {
        self.states.read().map(|g| g.clone()).unwrap_or_default()
    }

    /// What does edits that are not exact pixel filters: `diffusion:<name>` when a model is
    /// mapped to edits, else the renderer underneath's engine for edits (`procedural`).
    pub fn edit_engine(&self) -> String {
        self.states()
            .into_iter()
            .find(|s| s.tier == "edit" && s.problem.is_none())
            .and_then(|s| s.model)
            .map(|m| format!("diffusion:{m}"))
            .unwrap_or_else(|| "procedural".into())
    }

    /// An engine id in words: the mapped model's title for `diffusion:…`, "built-in painter",
    /// or the inference server's kind.
    pub fn engine_name(&self, tier: &str, engine: &str) -> String {
        if let Some(name) = engine.strip_prefix("diffusion:") {
            return self
                .states()
                .into_iter()
                .find(|s| s.tier == tier && s.model.as_deref() == Some(name))
                .and_then(|s| s.title)
                .unwrap_or_else(|| name.to_string());
        }
        match engine {
            "procedural" => "built-in painter".into(),
            "a1111" => "AUTOMATIC1111 server".into(),
            "comfyui" => "ComfyUI server".into(),
            "openai" => "OpenAI-compatible server".into(),
            other => other.to_string(),
        }
    }

    /// When each installed model last drew a picture (milliseconds since the epoch), since
    /// the start.
    pub fn last_used(&self) -> std::collections::HashMap<String, u64> {
        #[cfg(feature = "diffusion")]
        {
            self.engine.last_used()
        }
        #[cfg(not(feature = "diffusion"))]
        std::collections::HashMap::new()
    }

    /// Seconds each installed model's last picture took here (loading apart), since the start.
    pub fn last_seconds(&self) -> std::collections::HashMap<String, f64> {
        #[cfg(feature = "diffusion")]
        {
            self.engine.last_seconds()
        }
        #[cfg(not(feature = "diffusion"))]
        std::collections::HashMap::new()
    }

    /// The installed models held in memory now: name, bytes, device ("cpu", "cuda:0").
    pub fn loaded(&self) -> Vec<(String, u64, String)> {
        #[cfg(feature = "diffusion")]
        {
            self.engine
                .loaded()
                .into_iter()
                .map(|l| (l.name, l.bytes, l.device))
                .collect()
        }
        #[cfg(not(feature = "diffusion"))]
        Vec::new()
    }

    /// Where the built-in engine computes (the GPU's memory read now).
    pub fn device(&self) -> pictor_core::gpu::EngineDevice {
        #[cfg(feature = "diffusion")]
        {
            pictor_diffusion::gpu::engine_device(self.engine.device())
        }
        #[cfg(not(feature = "diffusion"))]
        pictor_core::gpu::EngineDevice::cpu()
    }

    /// Loads the GPU's kernels before the first job (see `pictor_diffusion::gpu::warm`); nothing
    /// on the CPU. Returns how many kernel modules were loaded.
    pub fn warm(&self) -> Result<usize, String> {
        #[cfg(feature = "diffusion")]
        {
            pictor_diffusion::gpu::warm(self.engine.device())
        }
        #[cfg(not(feature = "diffusion"))]
        Ok(0)
    }

    fn apply(&self, store: &Store, strict: bool) -> anyhow::Result<()> {
        let installed = store.models()?;
        let stored = store.tiers()?;
        let from_config = config_tiers(self.config.as_ref())?;
        let mut states = Vec::new();
        #[cfg(feature = "diffusion")]
        let (mut models, mut edit) = (std::collections::HashMap::new(), None);
        for tier in TIER_NAMES {
            let (origin, given) = match from_config.iter().find(|(t, _)| *t == tier) {
                Some((_, t)) => (Origin::ConfigFile, Some(t.clone())),
                None => match stored.iter().find(|(t, _)| t == tier) {
                    Some((_, m)) => (Origin::Console, Some(mapping_table(m))),
                    None => (Origin::None, None),
                },
            };
            let mut state = TierState {
                tier,
                origin,
                model: None,
                title: None,
                family: None,
                settings: serde_json::Value::Null,
                problem: None,
            };
            if let Some(given) = given {
                let name = given.get("model").and_then(toml::Value::as_str);
                let record = name.and_then(|n| installed.iter().find(|r| r.name == n));
                state.model = name.map(str::to_string);
                state.title = record.map(ModelRecord::title);
                state.family = record.and_then(ModelRecord::family).map(|f| f.id());
                let key = match origin {
                    Origin::ConfigFile => format!("[diffusion.{tier}]"),
                    _ => tier.to_string(),
                };
                let resolved = effective(&key, &given, &installed).map_err(anyhow::Error::msg);
                #[cfg(feature = "diffusion")]
                let resolved = resolved.and_then(|t| {
                    let m = engine::mapping_from_table(&key, &t, &installed)?;
                    Ok((t, m))
                });
                #[cfg(not(feature = "diffusion"))]
                let resolved = resolved.and_then(|_| -> anyhow::Result<(toml::Table, ())> {
                    anyhow::bail!(
                        "this build has no diffusion engine (the `diffusion` cargo feature)"
                    )
                });
                match resolved {
                    Ok((table, _mapping)) => {
                        state.settings = serde_json::to_value(&table).unwrap_or_default();
                        #[cfg(feature = "diffusion")]
                        match Model::parse(tier) {
                            Some(model) => {
                                models.insert(model, _mapping);
                            }
                            None => edit = Some(_mapping),
                        }
                    }
                    Err(e) if strict && origin == Origin::ConfigFile => return Err(e),
                    Err(e) => {
                        tracing::warn!(tier, error = %e, "tier mapping not applied; the painter draws it");
                        state.problem = Some(e.to_string());
                    }
                }
            }
            states.push(state);
        }
        #[cfg(feature = "diffusion")]
        {
            tracing::info!(
                models = ?models.iter().map(|(k, v)| format!("{k}={}", v.name)).collect::<Vec<_>>(),
                edit = ?edit.as_ref().map(|m| m.name.clone()),
                "diffusion models mapped"
            );
            self.engine.set_mappings(models, edit);
        }
        match self.states.write() {
            Ok(mut g) => *g = states,
            Err(p) => *p.into_inner() = states,
        }
        Ok(())
    }

    fn current(&self) -> &dyn Renderer {
        #[cfg(feature = "diffusion")]
        {
            self.engine.as_ref()
        }
        #[cfg(not(feature = "diffusion"))]
        {
            self.fallback.as_ref()
        }
    }
}

impl Renderer for Tiers {
    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError> {
        self.current().generate(spec)
    }

    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError> {
        self.current().edit(spec)
    }

    fn generate_with(
        &self,
        spec: &GenerateSpec,
        control: &RenderControl,
    ) -> Result<Picture, RenderError> {
        self.current().generate_with(spec, control)
    }

    fn edit_with(&self, spec: &EditSpec, control: &RenderControl) -> Result<Picture, RenderError> {
        self.current().edit_with(spec, control)
    }

    fn engine(&self, model: Model) -> String {
        self.current().engine(model)
    }

    fn is_local(&self, model: Model) -> bool {
        self.current().is_local(model)
    }

    fn backends_status(&self) -> Vec<super::EndpointStatus> {
        self.fallback.backends_status()
    }

    fn exact_edit(&self, instruction: &str) -> Result<bool, RenderError> {
        self.fallback.exact_edit(instruction)
    }

    fn apply_exact(
        &self,
        picture: Picture,
        instruction: &str,
        seed: u64,
    ) -> Result<(Picture, Vec<String>), RenderError> {
        self.fallback.apply_exact(picture, instruction, seed)
    }
}

#[cfg(feature = "diffusion")]
pub mod engine {
    //! A mapping's settings (the config file's keys) as the engine's [`ModelMapping`].
    use std::path::PathBuf;

    use crate::render::diffusion::scheduler::Sampler;
    use crate::render::diffusion::{ModelMapping, ModelSource};
    use crate::store::models::ModelRecord;

    /// `"float32"` or `"int8"` (`text_weights`, `unet_weights`): whether the layers are 8-bit.
    fn int8_setting(v: &toml::Value) -> Result<bool, &'static str> {
        match v.as_str() {
            Some("int8" | "q8_0") => Ok(true),
            Some("float32" | "f32") => Ok(false),
            _ => Err("\"float32\" or \"int8\""),
        }
    }

    /// Reads one mapping table (`key` names it in errors: `[diffusion.fast]` or `fast`).
    pub fn mapping_from_table(
        key: &str,
        t: &toml::Table,
        installed: &[ModelRecord],
    ) -> anyhow::Result<ModelMapping> {
        let name = t
            .get("model")
            .and_then(toml::Value::as_str)
            .ok_or_else(|| {
                anyhow::anyhow!("{key}: model = \"<installed model name>\" is required")
            })?;
        let record = installed.iter().find(|r| r.name == name).ok_or_else(|| {
            anyhow::anyhow!(
                "{key}: no installed model is named {name:?} (see `pictor models list`; add one with `pictor models add {name} PATH`)"
            )
        })?;
        let arch = record.arch;
        let flux = arch == crate::models::Arch::Flux;
        let sd3 = arch == crate::models::Arch::Sd3;
        // A file in place of a transformer folder's part: a regular file, safetensors or GGUF
        // (the T5 key is text_encoder_2 in FLUX folders, text_encoder_3 in SD3 ones).
        let part = |k: &str| -> anyhow::Result<Option<PathBuf>> {
            let Some(v) = t.get(k) else { return Ok(None) };
            let bad = || match k {
                "text_encoder_2" => anyhow::anyhow!(
                    "{key} {k}: the path of a .safetensors or .gguf file (FLUX models only)"
                ),
                "text_encoder_3" => anyhow::anyhow!(
                    "{key} {k}: the path of a .safetensors or .gguf file (SD3 models only)"
                ),
                _ => anyhow::anyhow!(
                    "{key} {k}: the path of a .safetensors or .gguf file (FLUX and SD3 models only)"
                ),
            };
            let p = PathBuf::from(v.as_str().ok_or_else(bad)?);
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            let fits = match k {
                "text_encoder_2" => flux,
                "text_encoder_3" => sd3,
                _ => flux || sd3,
            };
            if !fits || !p.is_file() || !matches!(ext, "safetensors" | "gguf") {
                return Err(bad());
            }
            Ok(Some(p))
        };
        let transformer = part("transformer")?;
        let t5_flux = part("text_encoder_2")?;
        let t5_sd3 = part("text_encoder_3")?;
        // A T5 file reads its words with the folder's T5 tokenizer.
        let t5_tokenizer = if flux { "tokenizer_2" } else { "tokenizer_3" };
        if (t5_flux.is_some() || t5_sd3.is_some())
            && !std::path::Path::new(&record.path)
                .join(t5_tokenizer)
                .join("tokenizer.json")
                .is_file()
        {
            anyhow::bail!(
                "{key}: a T5 file needs the folder's {t5_tokenizer}/tokenizer.json (download the repository without the T5 weights, not without its tokenizer)"
            );
        }
        let source = match record.layout {
            crate::models::Layout::Diffusers if flux => ModelSource::Flux {
                dir: PathBuf::from(&record.path),
                files: crate::render::diffusion::flux::FluxFiles {
                    transformer,
                    text_encoder_2: t5_flux,
                    quantise_float: None,
                },
            },
            crate::models::Layout::Diffusers if sd3 => ModelSource::Sd3 {
                dir: PathBuf::from(&record.path),
                files: crate::render::diffusion::sd3::Sd3Files {
                    transformer,
                    text_encoder_3: t5_sd3,
                    quantise_float: None,
                },
            },
            crate::models::Layout::Diffusers => ModelSource::Diffusers(PathBuf::from(&record.path)),
            crate::models::Layout::SingleFile => {
                // `config`: a diffusers folder (an installed model's name, or a path) whose
                // configuration and tokenizers the checkpoint uses instead of the inferred ones.
                let config = match t.get("config") {
                    None => None,
                    Some(v) => {
                        let c = v.as_str().ok_or_else(|| {
                            anyhow::anyhow!("{key} config: a model name or a folder")
                        })?;
                        let dir = match installed.iter().find(|r| r.name == c) {
                            Some(r) => PathBuf::from(&r.path),
                            None => PathBuf::from(c),
                        };
                        if !dir.join("model_index.json").is_file() {
                            anyhow::bail!(
                                "{key} config: {c:?} is neither an installed diffusers model nor a diffusers folder"
                            );
                        }
                        Some(dir)
                    }
                };
                ModelSource::SingleFile {
                    path: PathBuf::from(&record.path),
                    config,
                }
            }
        };
        let mut m = ModelMapping::new(name, source);
        // A1111's hash of a single file (taken when it was added); Pictor's quick one otherwise.
        m.hash = match &record.sha256 {
            Some(h) if h.len() >= 10 => h[..10].to_owned(),
            _ => crate::render::diffusion::load::quick_hash(std::path::Path::new(&record.path)),
        };
        for (k, v) in t {
            let bad = |what: &str| anyhow::anyhow!("{key} {k}: {what}");
            if arch.is_transformer() {
                // FLUX.1 has no negative prompt or CFG; FLUX.1 and SD 3 have one sampler, no
                // tiny decoder (yet), and do not edit.
                let unsupported = match k.as_str() {
                    "negative_prompt" => flux && v.as_str() != Some(""),
                    "sampler" => v.as_str() != Some("euler"),
                    "schedule" => v.as_str() != Some("automatic"),
                    "tiny_vae" | "text_weights" | "unet_weights" | "prediction"
                    | "timestep_spacing" | "strength" | "image_guidance" => true,
                    _ => false,
                };
                if unsupported {
                    return Err(bad(if flux {
                        "not a setting of FLUX models (they take steps, guidance, noise, size, transformer, text_encoder_2; sampler \"euler\")"
                    } else {
                        "not a setting of SD3 models (they take steps, guidance, negative_prompt, noise, size, transformer, text_encoder_3; sampler \"euler\")"
                    }));
                }
            }
            match k.as_str() {
                "model" | "preset" | "transformer" | "text_encoder_2" | "text_encoder_3" => {}
                "config" if record.layout == crate::models::Layout::SingleFile => {}
                "prediction" => {
                    m.overrides.prediction = Some(
                        match v.as_str() {
                            Some("epsilon" | "eps") => "epsilon",
                            Some("v_prediction" | "v") => "v_prediction",
                            _ => return Err(bad("\"epsilon\" or \"v_prediction\"")),
                        }
                        .to_owned(),
                    )
                }
                "tiny_vae" => {
                    let dir = PathBuf::from(v.as_str().ok_or_else(|| bad("a folder"))?);
                    if !dir.join("config.json").is_file() {
                        return Err(bad(
                            "an installed tiny decoder's name or a TAESD folder (config.json + diffusion_pytorch_model.safetensors, as madebyollin/taesd)",
                        ));
                    }
                    m.tiny_vae = Some(dir);
                }
                "text_weights" => m.overrides.int8_text = int8_setting(v).map_err(bad)?,
                "unet_weights" => m.overrides.int8_unet = int8_setting(v).map_err(bad)?,
                "timestep_spacing" => {
                    m.overrides.timestep_spacing = Some(
                        v.as_str()
                            .filter(|s| matches!(*s, "leading" | "trailing" | "linspace"))
                            .ok_or_else(|| bad("\"leading\", \"trailing\" or \"linspace\""))?
                            .to_owned(),
                    )
                }
                "steps" => {
                    m.steps = v
                        .as_integer()
                        .filter(|s| (1..=150).contains(s))
                        .ok_or_else(|| bad("an integer from 1 to 150"))?
                        as usize
                }
                "guidance" => {
                    m.guidance = v
                        .as_float()
                        .or(v.as_integer().map(|i| i as f64))
                        .filter(|g| (0.0..=30.0).contains(g))
                        .ok_or_else(|| bad("a number from 0 to 30"))?
                }
                "sampler" => {
                    let (sampler, karras) = v
                        .as_str()
                        .and_then(Sampler::parse_with_schedule)
                        .ok_or_else(|| {
                            bad("one of euler, euler_a, ddim, dpm++_2m, heun, lms (A1111 names too, e.g. \"DPM++ 2M Karras\")")
                        })?;
                    m.sampler = sampler;
                    if karras.is_some() {
                        m.karras = karras;
                    }
                }
                "schedule" => {}
                "noise" => {
                    m.noise = v
                        .as_str()
                        .and_then(crate::catalog::NoiseKind::parse)
                        .ok_or_else(|| bad("\"torch-cpu\" or \"a1111-gpu\""))?
                }
                "size" => {
                    m.size = Some(
                        v.as_integer()
                            .filter(|s| (64..=2048).contains(s) && s % 64 == 0)
                            .ok_or_else(|| bad("a multiple of 64 from 64 to 2048"))?
                            as usize,
                    )
                }
                "negative_prompt" => {
                    m.negative_prompt = v.as_str().ok_or_else(|| bad("a string"))?.to_owned()
                }
                "image_guidance" => {
                    m.image_guidance = v
                        .as_float()
                        .or(v.as_integer().map(|i| i as f64))
                        .filter(|g| (0.0..=10.0).contains(g))
                        .ok_or_else(|| bad("a number from 0 to 10"))?
                }
                "strength" => {
                    m.strength = v
                        .as_float()
                        .or(v.as_integer().map(|i| i as f64))
                        .filter(|s| *s > 0.0 && *s <= 1.0)
                        .ok_or_else(|| bad("a number in (0, 1]"))?
                }
                _ => {
                    return Err(bad(
                        "unknown setting (model, steps, guidance, sampler, schedule, noise, size, negative_prompt, strength, image_guidance, prediction, timestep_spacing, text_weights, unet_weights, tiny_vae; config for single files)",
                    ));
                }
            }
        }
        // After the sampler: "schedule" refines what the sampler's name said.
        if let Some(v) = t.get("schedule") {
            let bad = |what: &str| anyhow::anyhow!("{key} schedule: {what}");
            let karras = v
                .as_str()
                .and_then(crate::render::diffusion::renderer::parse_schedule)
                .ok_or_else(|| bad("\"automatic\" (the model's), \"karras\" or \"uniform\""))?;
            if karras == Some(true) && !m.sampler.supports_karras() {
                return Err(bad(&format!(
                    "{} has no Karras schedule (euler, dpm++_2m, heun and lms have)",
                    m.sampler.id()
                )));
            }
            m.karras = karras;
        }
        Ok(m)
    }
}

/// The speed on `measure_gflops` of the machine each of [`estimate_seconds`]' figures was
/// measured on: the UNets' on the 2-core EPYC (62–100 over four runs), the transformers' on the
/// 2-core Xeon that replaced it (60.6–63.5 over four runs, 2026-11-29).
#[cfg(all(feature = "diffusion", not(feature = "cuda")))]
const UNET_REFERENCE_GFLOPS: f64 = 80.0;
#[cfg(all(feature = "diffusion", not(feature = "cuda")))]
const TRANSFORMER_REFERENCE_GFLOPS: f64 = 62.0;

/// Seconds per picture on this server, estimated: the benchmark's figures for each stage
/// (docs/benchmarks.md: SD 1.5, SD 2.1 and SDXL at 512², SDXL at 1024², measured on the build
/// machine, a 2-core AMD EPYC, float32) scaled by this machine's matrix-multiply speed against
/// that machine's. `None` on a GPU build (no GPU figures yet) or without the engine.
pub fn estimate_seconds(
    arch: Arch,
    steps: u32,
    guidance: f64,
    size: u32,
    tiny: bool,
) -> Option<f64> {
    #[cfg(all(feature = "diffusion", not(feature = "cuda")))]
    {
        static SPEED: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
        let gflops = *SPEED.get_or_init(super::diffusion::measure_gflops);
        if gflops <= 0.0 {
            return None;
        }
        let r = f64::from(size.max(64)) / 512.0;
        // Seconds at 512²: the text encoders, one evaluation of the denoiser, the decode.
        // UNets: fitted to the 512² and 1024² SDXL steps (12.3 s, 62.4 s) and decodes (23.9 s,
        // 135 s). Transformers: docs/models.md's full-size runs — FLUX.1 with its Q4_K
        // transformer (53.1 s an evaluation; T5 in Q8_0 10.7 s; VAE 7.2 s), SD 3.5 Medium in
        // float32 (12.5 s; three encoders 12 s; Large is about three times Medium); their cost
        // grows a little faster than the pixels (attention over 4× the tokens).
        let (text, eval512, growth, decode512, reference) = match arch {
            Arch::Sd1 => (0.15, 9.00, 2.34, 23.85, UNET_REFERENCE_GFLOPS),
            Arch::Sd2 => (0.53, 8.64, 2.34, 23.85, UNET_REFERENCE_GFLOPS),
            Arch::Sdxl => (1.09, 12.30, 2.34, 23.85, UNET_REFERENCE_GFLOPS),
            Arch::Flux => (10.7, 53.1, 2.2, 7.2, TRANSFORMER_REFERENCE_GFLOPS),
            Arch::Sd3 => (12.0, 12.53, 2.2, 7.2, TRANSFORMER_REFERENCE_GFLOPS),
        };
        // FLUX's guidance is an input of the one evaluation; the others' guidance doubles it.
        let evaluations = if guidance > 1.0 && arch != Arch::Flux {
            2.0
        } else {
            1.0
        };
        let decode = if tiny {
            3.87 * r * r
        } else {
            decode512 * r.powf(2.5)
        };
        let seconds = text + f64::from(steps) * evaluations * eval512 * r.powf(growth) + decode;
        Some(seconds * reference / gflops)
    }
    #[cfg(not(all(feature = "diffusion", not(feature = "cuda"))))]
    {
        let _ = (arch, steps, guidance, size, tiny);
        None
    }
}

/// The estimate for a mapping's settings (as [`effective`] makes them) and its model.
pub fn estimate_for(settings: &toml::Table, record: &ModelRecord) -> Option<f64> {
    let steps = settings.get("steps")?.as_integer()? as u32;
    let guidance = settings
        .get("guidance")
        .and_then(|v| v.as_float().or(v.as_integer().map(|i| i as f64)))?;
    // The family's preset size is its native one (Turbo models 512).
    let native = record.family()?.preset().size;
    let size = settings
        .get("size")
        .and_then(toml::Value::as_integer)
        .map_or(native, |s| s as u32);
    estimate_seconds(
        record.arch,
        steps,
        guidance,
        size,
        settings.contains_key("tiny_vae"),
    )
}

#[cfg(all(test, feature = "diffusion", not(feature = "cuda")))]
mod estimate_tests {
    use super::*;

    /// The transformers have estimates now, scaled like the UNets': FLUX.1-schnell's 4 steps
    /// at 512² cost about as the measured evaluations add up; SD 3's guidance doubles them.
    #[test]
    fn transformer_models_have_estimates() {
        let sd1 = estimate_seconds(Arch::Sd1, 1, 0.0, 512, false).unwrap();
        let flux = estimate_seconds(Arch::Flux, 4, 0.0, 512, false).unwrap();
        let sd3 = estimate_seconds(Arch::Sd3, 4, 4.5, 512, false).unwrap();
        let sd3_no_cfg = estimate_seconds(Arch::Sd3, 4, 1.0, 512, false).unwrap();
        // Ratios to SD 1.x's one step (the machine's speed cancels).
        let sd1_seconds = (0.15 + 9.0 + 23.85) * UNET_REFERENCE_GFLOPS;
        for (got, seconds) in [
            (flux, 10.7 + 4.0 * 53.1 + 7.2),
            (sd3, 12.0 + 8.0 * 12.53 + 7.2),
            (sd3_no_cfg, 12.0 + 4.0 * 12.53 + 7.2),
        ] {
            let want = seconds * TRANSFORMER_REFERENCE_GFLOPS / sd1_seconds;
            let r = got / sd1;
            assert!((r / want - 1.0).abs() < 1e-9, "{r} vs {want}");
        }
        assert!(
            estimate_seconds(Arch::Flux, 4, 0.0, 1024, false).unwrap() > 4.0 * flux * 0.9,
            "1024² costs about four times 512²"
        );
    }
}
