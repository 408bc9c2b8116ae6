//! Server configuration: where data lives, addresses, pool sizes and queue limits.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything the server needs to start. Built by the CLI from flags and `PICTOR_*` env vars.
#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// Base of every URL Pictor hands out (poll_url, photo_url) and the OIDC issuer.
    /// `None` means `http://<listen address>`.
    pub public_url: Option<String>,
    /// Renders that may run at once (the blocking pool's size).
    pub render_workers: usize,
    /// Jobs that may wait for a render slot; beyond that a job fails with `tokens_exhausted`.
    pub queue_size: usize,
    /// How long a job may wait for a render slot before it fails with `tokens_exhausted`.
    pub queue_timeout: Duration,
    /// Uploads decoded at once when an edit is created.
    pub decode_workers: usize,
}

impl Config {
    pub fn new(data_dir: PathBuf) -> Config {
        Config {
            data_dir,
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public_url: None,
            render_workers: default_render_workers(),
            queue_size: 64,
            queue_timeout: Duration::from_secs(600),
            decode_workers: 2,
        }
    }

    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join("pictor.redb")
    }

    pub fn images_dir(&self) -> PathBuf {
        self.data_dir.join("images")
    }

    pub fn sources_dir(&self) -> PathBuf {
        self.data_dir.join("sources")
    }

    pub fn admin_file(&self) -> PathBuf {
        admin_file(&self.data_dir)
    }
}

/// Where the running server writes the admin channel's address and token (mode 0600).
pub fn admin_file(data_dir: &Path) -> PathBuf {
    data_dir.join("admin.json")
}

/// One render slot per core, leaving one core for the HTTP side (at least one slot).
pub fn default_render_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(1)
        .max(1)
}

/// The OS data folder (`~/.local/share/pictor` on Linux, `~/Library/Application Support/pictor`
/// on macOS, `%APPDATA%\pictor\data` on Windows).
pub fn default_data_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "pictor").map(|d| d.data_dir().to_path_buf())
}
