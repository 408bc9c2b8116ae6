//! `AppState`: the cheaply cloned bundle handed to handlers, the admin channel and workers.

use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Config;
use crate::idp::IdpState;
use crate::jobs::JobEngine;
use crate::metrics::Metrics;
use crate::render::RenderPool;
use crate::store::Store;

/// Handlers get it by reference (`Data<&AppState>`); every request's state layer clones it,
/// which costs one reference count, not one per part.
#[derive(Clone)]
pub struct AppState(Arc<AppParts>);

impl AppState {
    pub fn new(parts: AppParts) -> AppState {
        AppState(Arc::new(parts))
    }
}

impl AppState {
    /// Applies changed tier mappings (after an admin operation that may have changed them).
    pub async fn reload_tiers(&self) {
        let (tiers, store) = (self.tiers.clone(), self.store.clone());
        match tokio::task::spawn_blocking(move || tiers.reload(&store)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "reloading the tier mappings"),
            Err(e) => tracing::error!(error = %e, "reloading the tier mappings"),
        }
    }
}

impl std::ops::Deref for AppState {
    type Target = AppParts;
    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// What [`AppState`] holds.
pub struct AppParts {
    pub config: Arc<Config>,
    pub store: Store,
    pub jobs: JobEngine,
    /// What draws each tier (`render::tiers`); the job engine renders through it.
    pub tiers: Arc<crate::render::tiers::Tiers>,
    /// Model downloads the server runs (`models::pulls`).
    pub pulls: Arc<crate::models::pulls::Pulls>,
    pub clock: Clock,
    /// Base URL without a trailing slash, e.g. `http://127.0.0.1:8080`.
    pub public_url: Arc<str>,
    /// Small pool for decoding uploads while an edit is created (separate from rendering so a
    /// busy render queue does not stall request validation).
    pub decode_pool: RenderPool,
    /// Identity provider state: signer, secret box, throttles, bot-check challenges.
    pub idp: Arc<IdpState>,
    pub metrics: Arc<Metrics>,
    /// Outgoing mail, when `smtp.host` is configured ("Forgot password?").
    pub mailer: Option<Arc<crate::mail::Mailer>>,
}
