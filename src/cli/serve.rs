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

/// The renderer under the tiers of the real binary: procedural, with configured models sent to
/// their inference servers, wrapped in the fault injector when the `PICTOR_DEBUG_RENDER_DELAY_MS` /
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
    // The config file's `[diffusion]` mappings go on top of it in the server (`render::tiers`).
    Ok(with_testing_hooks(routed))
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
    println!(
        "  Engine:    {}",
        crate::gpu::describe_engine(&handle.state.tiers.device())
    );
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
