//! `pictor serve`: flags and env vars → `Config`, then run until SIGINT/SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::app::Server;
use crate::clock::Clock;
use crate::config::Config;
use crate::render::faults::FaultInjector;
use crate::render::{ProceduralRenderer, Renderer};

#[derive(Args, Debug, Clone, Default)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "PICTOR_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Public base URL (used in poll_url/photo_url and as the OIDC issuer). Default: http://<listen>.
    #[arg(long, env = "PICTOR_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Renders that may run at once. Default: CPU cores - 1 (at least 1).
    #[arg(long, env = "PICTOR_RENDER_WORKERS")]
    pub render_workers: Option<usize>,
    /// Jobs that may wait for a render slot before new ones fail with tokens_exhausted.
    #[arg(long, env = "PICTOR_QUEUE_SIZE")]
    pub queue_size: Option<usize>,
    /// Seconds a job may wait for a render slot before it fails with tokens_exhausted.
    #[arg(long, env = "PICTOR_QUEUE_TIMEOUT")]
    pub queue_timeout: Option<u64>,
}

pub fn build_config(data_dir: PathBuf, args: &ServeArgs) -> anyhow::Result<Config> {
    let mut config = Config::new(data_dir);
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(url) = &args.public_url {
        let url = url.trim().trim_end_matches('/').to_string();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            anyhow::bail!("--public-url must start with http:// or https://");
        }
        config.public_url = Some(url);
    }
    if let Some(n) = args.render_workers {
        anyhow::ensure!(
            (1..=256).contains(&n),
            "--render-workers must be between 1 and 256"
        );
        config.render_workers = n;
    }
    if let Some(n) = args.queue_size {
        anyhow::ensure!(
            (1..=100_000).contains(&n),
            "--queue-size must be between 1 and 100000"
        );
        config.queue_size = n;
    }
    if let Some(s) = args.queue_timeout {
        anyhow::ensure!(
            (1..=86_400).contains(&s),
            "--queue-timeout must be between 1 and 86400 seconds"
        );
        config.queue_timeout = Duration::from_secs(s);
    }
    Ok(config)
}

/// The renderer of the real binary: procedural, wrapped in the fault injector when the
/// `PICTOR_DEBUG_RENDER_DELAY_MS` / `PICTOR_DEBUG_FAIL_PROMPT` testing hooks are set.
pub fn renderer_from_env() -> Arc<dyn Renderer> {
    let base: Arc<dyn Renderer> = Arc::new(ProceduralRenderer);
    let delay = std::env::var("PICTOR_DEBUG_RENDER_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let fail_marker = std::env::var("PICTOR_DEBUG_FAIL_PROMPT")
        .ok()
        .filter(|v| !v.is_empty());
    if delay == 0 && fail_marker.is_none() {
        return base;
    }
    tracing::warn!(
        delay_ms = delay,
        fail_marker = fail_marker.is_some(),
        "testing hooks active: renders are slowed or failed on purpose"
    );
    Arc::new(FaultInjector {
        inner: base,
        delay: Duration::from_millis(delay),
        fail_marker,
    })
}

async fn shutdown_signal() {
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

pub async fn run(data_dir: PathBuf, args: &ServeArgs) -> anyhow::Result<()> {
    let config = build_config(data_dir, args)?;
    let data = config.data_dir.clone();
    let handle = Server::start(config, renderer_from_env(), Clock::default()).await?;
    println!(
        "Pictor {} is running at {}",
        env!("CARGO_PKG_VERSION"),
        handle.base_url
    );
    println!("  API map:   {}/api/pictor/", handle.base_url);
    println!("  API docs:  {}/api/pictor/docs", handle.base_url);
    println!("  Data:      {}", data.display());
    if let Some(url) = &handle.setup_url {
        println!();
        println!("  First start: open this one-time link to create the admin account:");
        println!("    {url}");
        println!("  (or from the command line: pictor user add --email you@example.com --password-stdin --admin)");
        println!();
    }
    println!("Press Ctrl+C to stop.");
    shutdown_signal().await;
    println!("Stopping…");
    handle.shutdown().await;
    Ok(())
}
