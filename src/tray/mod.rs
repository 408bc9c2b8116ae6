//! The desktop tray controller (cargo feature `tray`, `pictor serve --tray`).
//!
//! The tray owns the main thread (GTK wants its event loop there on Linux); the server runs on the
//! tokio runtime's worker threads, started and stopped from here through its `ServerHandle`. Menu
//! actions call the server in-process: they read the job engine's counters and pause or resume
//! rendering directly. Without a display (or without the AppIndicator library) Pictor warns and
//! serves headless, exactly like `pictor serve`.
//!
//! `menu` holds the platform-neutral parts (labels, status lines, the icon, opening URLs and
//! folders); `linux` the GTK event loop. Other platforms serve headless with a warning for now.

#[cfg(target_os = "linux")]
mod linux;
pub mod menu;

use std::path::PathBuf;

use crate::config::Config;

/// Runs `pictor serve --tray`: the server on `runtime`, the tray on this (the main) thread, until
/// Quit, Ctrl+C or SIGTERM; then shuts the server down gracefully.
pub fn serve(
    runtime: &tokio::runtime::Runtime,
    config: Config,
    config_file: Option<PathBuf>,
) -> anyhow::Result<()> {
    #[cfg(target_os = "linux")]
    {
        linux::serve(runtime, config, config_file)
    }
    #[cfg(not(target_os = "linux"))]
    {
        tracing::warn!(
            "the tray icon is implemented for Linux only in this version; serving without it"
        );
        runtime.block_on(crate::cli::serve::run(config, config_file))
    }
}
