//! `pictor serve`: flags and env vars → `Config`, then run until SIGINT/SIGTERM.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::app::{Server, ServerHandle};
use crate::clock::Clock;
use crate::config::Config;
use crate::render::backends::{BackendsConfig, Router, parse_backends_toml};
use crate::render::faults::{FaultInjector, FlatRenderer};
use crate::render::{ProceduralRenderer, Renderer};

#[derive(Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Address to listen on (env PICTOR_LISTEN; default 127.0.0.1:8080).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Public base URL: used in poll_url/photo_url and as the OIDC issuer (env PICTOR_PUBLIC_URL).
    #[arg(long)]
    pub public_url: Option<String>,
    /// Renders that may run at once (env PICTOR_RENDER_WORKERS; default CPU cores - 1).
    #[arg(long)]
    pub render_workers: Option<usize>,
    /// Jobs that may wait for a render slot before new ones fail with tokens_exhausted (env PICTOR_QUEUE_SIZE).
    #[arg(long)]
    pub queue_size: Option<usize>,
    /// Seconds a job may wait for a render slot before it fails with tokens_exhausted (env PICTOR_QUEUE_TIMEOUT).
    #[arg(long)]
    pub queue_timeout: Option<u64>,
    /// Reverse proxies whose X-Forwarded-For / Forwarded headers name the client: addresses or
    /// CIDR blocks, comma-separated (env PICTOR_TRUSTED_PROXIES; default none).
    #[arg(long, value_name = "LIST")]
    pub trusted_proxies: Option<String>,
    /// Show a system-tray icon to control the server (needs a build with the `tray` feature and a
    /// desktop session; without a display Pictor serves headless with a warning).
    #[arg(long)]
    pub tray: bool,
}

impl ServeArgs {
    /// The dedicated flags given, as configuration keys.
    pub fn add_flags(&self, flags: &mut BTreeMap<String, String>) {
        let mut put = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                flags.insert(k.to_string(), v);
            }
        };
        put("listen", self.listen.map(|v| v.to_string()));
        put("public_url", self.public_url.clone());
        put("render_workers", self.render_workers.map(|v| v.to_string()));
        put("queue_size", self.queue_size.map(|v| v.to_string()));
        put("queue_timeout", self.queue_timeout.map(|v| v.to_string()));
        put("trusted_proxies", self.trusted_proxies.clone());
    }
}

/// The `[backends]` table of the config file (`[backends.<model>]`, `[backends.edit]`) as the
/// renderer's backend configuration; errors name the key as written in the file.
pub fn backends_config(table: &toml::Table) -> anyhow::Result<BackendsConfig> {
    let mut models = toml::Table::new();
    let mut doc = toml::Table::new();
    for (k, v) in table {
        if k == "edit" {
            doc.insert(k.clone(), v.clone());
        } else {
            models.insert(k.clone(), v.clone());
        }
    }
    doc.insert("models".into(), toml::Value::Table(models));
    let text = toml::to_string(&doc)?;
    parse_backends_toml(&text).map_err(|e| {
        anyhow::anyhow!(
            "[backends] in the config file: {}",
            e.replace("models.", "backends.")
                .replace("[models]", "[backends]")
        )
    })
}

/// The renderer of the real binary: procedural, with configured models sent to their inference
/// servers, wrapped in the fault injector when the `PICTOR_DEBUG_RENDER_DELAY_MS` /
/// `PICTOR_DEBUG_FAIL_PROMPT` testing hooks are set.
pub fn renderer_for(config: &Config) -> anyhow::Result<Arc<dyn Renderer>> {
    let procedural: Arc<dyn Renderer> = Arc::new(ProceduralRenderer);
    let routed: Arc<dyn Renderer> = match &config.backends {
        Some(table) => {
            let cfg = backends_config(table)?;
            if cfg.is_empty() {
                procedural
            } else {
                tracing::info!(models = ?cfg.models.keys().collect::<Vec<_>>(), edit = cfg.edit.is_some(), "model backends configured");
                Arc::new(Router::new(cfg, procedural))
            }
        }
        None => procedural,
    };
    let base = match &config.diffusion {
        Some(table) => diffusion_renderer(config, table, routed)?,
        None => routed,
    };
    Ok(with_testing_hooks(base))
}

#[cfg(not(feature = "diffusion"))]
fn diffusion_renderer(
    _config: &Config,
    _table: &toml::Table,
    _fallback: Arc<dyn Renderer>,
) -> anyhow::Result<Arc<dyn Renderer>> {
    anyhow::bail!(
        "[diffusion] in the config file needs a build with the `diffusion` feature (the default)"
    )
}

/// The `[diffusion]` table: `[diffusion.fast]`, `[diffusion.artist]`, `[diffusion.0.2plus]`
/// (or any alias) and `[diffusion.edit]` name an installed model and how to run it;
/// `memory_budget_mb` bounds the models kept loaded. Names are resolved in the store now, so a
/// typo fails the start with a clear message instead of failing jobs later.
#[cfg(feature = "diffusion")]
fn diffusion_renderer(
    config: &Config,
    table: &toml::Table,
    fallback: Arc<dyn Renderer>,
) -> anyhow::Result<Arc<dyn Renderer>> {
    use crate::render::Model;
    use crate::render::diffusion::scheduler::Sampler;
    use crate::render::diffusion::{DiffusionRenderer, ModelMapping, ModelSource};

    let installed = if config.db_path().exists() {
        let store = crate::store::Store::open(&config.db_path())?;
        store.models()?
    } else {
        Vec::new()
    };
    let mut budget_mb: u64 = 16 * 1024;
    let mut models = std::collections::HashMap::new();
    let mut edit = None;
    for (key, value) in table {
        if key == "memory_budget_mb" {
            budget_mb = value.as_integer().filter(|v| *v > 0).ok_or_else(|| {
                anyhow::anyhow!("[diffusion] memory_budget_mb must be a positive integer")
            })? as u64;
            continue;
        }
        let target = if key == "edit" {
            None
        } else {
            Some(Model::parse(key).ok_or_else(|| {
                anyhow::anyhow!(
                    "[diffusion.{key}]: not a model id (fast, artist, 0.2plus) or \"edit\""
                )
            })?)
        };
        let t = value
            .as_table()
            .ok_or_else(|| anyhow::anyhow!("[diffusion.{key}] must be a table"))?;
        let name = t
            .get("model")
            .and_then(toml::Value::as_str)
            .ok_or_else(|| {
                anyhow::anyhow!("[diffusion.{key}]: model = \"<installed model name>\" is required")
            })?;
        let record = installed.iter().find(|r| r.name == name).ok_or_else(|| {
            anyhow::anyhow!(
                "[diffusion.{key}]: no installed model is named {name:?} (see `pictor models list`; add one with `pictor models add {name} PATH`)"
            )
        })?;
        let source = match record.layout {
            crate::models::Layout::Diffusers => ModelSource::Diffusers(PathBuf::from(&record.path)),
            crate::models::Layout::SingleFile => {
                // `config`: a diffusers folder (an installed model's name, or a path) whose
                // configuration and tokenizers the checkpoint uses instead of the inferred ones.
                let config = match t.get("config") {
                    None => None,
                    Some(v) => {
                        let c = v.as_str().ok_or_else(|| {
                            anyhow::anyhow!("[diffusion.{key}] config: a model name or a folder")
                        })?;
                        let dir = match installed.iter().find(|r| r.name == c) {
                            Some(r) => PathBuf::from(&r.path),
                            None => PathBuf::from(c),
                        };
                        if !dir.join("model_index.json").is_file() {
                            anyhow::bail!(
                                "[diffusion.{key}] config: {c:?} is neither an installed diffusers model nor a diffusers folder"
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
            let bad = |what: &str| anyhow::anyhow!("[diffusion.{key}] {k}: {what}");
            match k.as_str() {
                "model" => {}
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
                            "a TAESD folder (config.json + diffusion_pytorch_model.safetensors, as madebyollin/taesd)",
                        ));
                    }
                    m.tiny_vae = Some(dir);
                }
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
                "schedule" => {
                    m.karras = v
                        .as_str()
                        .and_then(crate::render::diffusion::renderer::parse_schedule)
                        .ok_or_else(|| {
                            bad("\"automatic\" (the model's), \"karras\" or \"uniform\"")
                        })?
                }
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
                "strength" => {
                    m.strength = v
                        .as_float()
                        .filter(|s| *s > 0.0 && *s <= 1.0)
                        .ok_or_else(|| bad("a number in (0, 1]"))?
                }
                _ => {
                    return Err(bad(
                        "unknown setting (model, steps, guidance, sampler, schedule, noise, size, negative_prompt, strength, prediction, timestep_spacing, tiny_vae; config for single files)",
                    ));
                }
            }
        }
        match target {
            Some(model) => {
                models.insert(model, m);
            }
            None => edit = Some(m),
        }
    }
    tracing::info!(
        models = ?models.iter().map(|(k, v)| format!("{k}={}", v.name)).collect::<Vec<_>>(),
        edit = ?edit.as_ref().map(|m| m.name.clone()),
        "diffusion models mapped"
    );
    Ok(Arc::new(DiffusionRenderer::new(
        models,
        edit,
        fallback,
        budget_mb * 1024 * 1024,
    )))
}

fn with_testing_hooks(base: Arc<dyn Renderer>) -> Arc<dyn Renderer> {
    let delay = std::env::var("PICTOR_DEBUG_RENDER_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let fail_marker = std::env::var("PICTOR_DEBUG_FAIL_PROMPT")
        .ok()
        .filter(|v| !v.is_empty());
    let flat = std::env::var("PICTOR_DEBUG_FLAT_RENDER").is_ok_and(|v| v == "1");
    if delay == 0 && fail_marker.is_none() && !flat {
        return base;
    }
    tracing::warn!(
        delay_ms = delay,
        fail_marker = fail_marker.is_some(),
        flat,
        "testing hooks active: renders are slowed, failed or flattened on purpose"
    );
    let base: Arc<dyn Renderer> = if flat {
        Arc::new(FlatRenderer { inner: base })
    } else {
        base
    };
    Arc::new(FaultInjector {
        inner: base,
        delay: Duration::from_millis(delay),
        fail_marker,
    })
}

/// Resolves on SIGINT (Ctrl+C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

pub async fn run(config: Config, config_file: Option<PathBuf>) -> anyhow::Result<()> {
    let handle = start(config, config_file).await?;
    println!("Press Ctrl+C to stop.");
    shutdown_signal().await;
    println!("Stopping…");
    handle.shutdown().await;
    Ok(())
}

/// Starts the server and prints where it runs (URLs, data and config, the first-start setup link);
/// the caller decides when to stop it (`ServerHandle::shutdown`).
pub async fn start(config: Config, config_file: Option<PathBuf>) -> anyhow::Result<ServerHandle> {
    let data = config.data_dir.clone();
    let renderer = renderer_for(&config)?;
    let handle = Server::start(config, renderer, Clock::default()).await?;
    println!(
        "Pictor {} is running at {}",
        env!("CARGO_PKG_VERSION"),
        handle.base_url
    );
    println!("  API map:   {}/api/pictor/", handle.base_url);
    println!("  API docs:  {}/api/pictor/docs", handle.base_url);
    println!("  Data:      {}", data.display());
    match &config_file {
        Some(f) => println!("  Config:    {}", f.display()),
        None => println!(
            "  Config:    none (optional: {})",
            crate::config::default_config_file()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ),
    }
    if let Some(url) = &handle.setup_url {
        println!();
        println!("  First start: open this one-time link to create the admin account:");
        println!("    {url}");
        println!(
            "  (registration stays closed until an admin exists; or from the command line: pictor user add --email you@example.com --password-stdin --admin, or pictor user update --email E --admin true)"
        );
        println!();
    }
    Ok(handle)
}
