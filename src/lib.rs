//! Pictor: a self-hosted image generation service (seed 000) and OpenID Connect provider
//! (seed 001) in one binary, on one embedded redb file.
//!
//! Dependency direction: `cli → app → {api, jobs} → auth → store`, `jobs → render`;
//! everything may use `config` and `clock`. `render` is where the engines' crates
//! (`pictor-painter`, `pictor-diffusion`) and what they share (`pictor-core`) meet the server;
//! see `docs/architecture.md`.

pub mod api;
pub mod app;
pub mod auth;
pub mod backup;
pub mod bounded;
pub mod cli;
pub mod clock;
pub mod config;
pub mod gpu;
pub mod idp;
pub mod jobs;
pub mod mail;
pub mod metrics;
pub mod models;
pub mod net;
pub mod ops;
pub mod render;
pub mod state;
pub mod store;
#[cfg(feature = "tray")]
pub mod tray;
pub mod web;

pub use app::{Server, ServerHandle};
/// The model catalogue (ids, prices, sizes), shared with the engines.
pub use pictor_core::catalog;

/// Locks `m`, also after a thread panicked while holding it: no critical section in Pictor
/// leaves its data half-changed, so a poisoned lock is still good to use.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
