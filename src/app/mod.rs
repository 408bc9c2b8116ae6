//! Assembles the server: opens the store, starts the job engine, builds the routes (image API,
//! files, admin channel), binds, serves, and shuts down gracefully.

pub mod admin;
pub mod files;
pub mod idle;
pub mod limits;
pub mod maintenance;
pub mod observe;
pub mod serve;
pub mod webhooks;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{EndpointExt, Route, get};
use rand::RngExt;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::clock::Clock;
use crate::config::Config;
use crate::jobs::{EngineOptions, JobEngine};
use crate::render::{RenderPool, Renderer};
use crate::state::AppState;
use crate::store::{Store, StoreError};

pub struct Server;

/// A running server. `shutdown` stops it gracefully; dropping it leaves it running.
pub struct ServerHandle {
    pub local_addr: SocketAddr,
    /// Base URL clients use (the public URL).
    pub base_url: String,
    pub state: AppState,
    /// The one-time setup link, when the store has no users yet.
    pub setup_url: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Server {
    /// Opens the data dir, resumes unfinished jobs, binds `config.listen` and starts serving.
    pub async fn start(
        config: Config,
        renderer: Arc<dyn Renderer>,
        clock: Clock,
    ) -> anyhow::Result<ServerHandle> {
        for dir in [
            config.data_dir.clone(),
            config.images_dir(),
            config.sources_dir(),
        ] {
            crate::store::private_dir(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let db_path = config.db_path();
        let store = tokio::task::spawn_blocking(move || Store::open(&db_path))
            .await?
            .map_err(|e| match e {
                StoreError::AlreadyOpen => anyhow::anyhow!(
                    "{} is in use: another Pictor is already running with this data folder",
                    config.db_path().display()
                ),
                other => anyhow::anyhow!(other),
            })?;

        // Settings given in the configuration win over stored ones (see docs/administration.md, Configuration).
        for (key, value) in config.settings_overrides.clone() {
            let current = store
                .settings()?
                .entries()
                .into_iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v);
            if current != Some(value) {
                let s = store.clone();
                tokio::task::spawn_blocking(move || s.set_setting(key, value)).await??;
                info!(
                    setting = key,
                    value, "setting applied from the configuration"
                );
            }
        }

        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?;
        let local_addr = listener.local_addr().context("listener has no address")?;
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{local_addr}"))
            .trim_end_matches('/')
            .to_string();

        // What draws each tier: the config file's [diffusion] mappings, then the stored ones,
        // on top of the renderer given (render::tiers).
        let tiers = {
            let (table, s) = (config.diffusion.clone(), store.clone());
            Arc::new(
                tokio::task::spawn_blocking(move || {
                    let tiers = crate::render::tiers::Tiers::new(table, renderer, &s)?;
                    // On a GPU, every kernel is loaded (compiled by the driver the first time on
                    // this machine) before the server answers, not inside the first job.
                    let device = tiers.device();
                    if device.gpu.is_some() {
                        tracing::info!(
                            "engine: {}; loading the GPU kernels (the first start on this machine compiles them: up to a minute)",
                            crate::gpu::describe_engine(&device)
                        );
                        let started = std::time::Instant::now();
                        match tiers.warm() {
                            Ok(n) => tracing::info!(
                                "{n} GPU kernel modules loaded in {:.1} s",
                                started.elapsed().as_secs_f64()
                            ),
                            Err(e) => tracing::warn!("{e}: the first job will load them"),
                        }
                    }
                    anyhow::Ok(tiers)
                })
                .await??,
            )
        };
        let metrics = Arc::new(crate::metrics::Metrics::default());
        let engine = JobEngine::new(
            store.clone(),
            tiers.clone(),
            clock.clone(),
            EngineOptions {
                metrics: metrics.clone(),
                images_dir: config.images_dir(),
                sources_dir: config.sources_dir(),
                render_workers: config.render_workers,
                queue_size: config.queue_size,
                queue_timeout: config.queue_timeout,
            },
        );
        let now = clock.now();
        let secrets = crate::idp::crypto::SecretBox::open_or_create(&config.data_dir)?;
        let idp = Arc::new(crate::idp::IdpState::new(secrets));
        let (key_store, key_idp) = (store.clone(), idp.clone());
        tokio::task::spawn_blocking(move || {
            crate::idp::keys::ensure_key(&key_store, &key_idp.secrets, now)
        })
        .await?
        .context("cannot create the token signing key")?;
        let mailer = match &config.smtp {
            Some(o) => {
                if config.public_url.is_none() {
                    tracing::warn!(
                        "smtp.host is set but public_url is not: reset links in mail will point at http://{local_addr}"
                    );
                }
                if o.security == crate::mail::Security::None && o.username.is_some() {
                    tracing::warn!(
                        host = %o.host,
                        "smtp.security = none: the mail password crosses the network unencrypted"
                    );
                }
                Some(Arc::new(
                    crate::mail::Mailer::new(o).map_err(anyhow::Error::msg)?,
                ))
            }
            None => None,
        };
        let state = AppState::new(crate::state::AppParts {
            mailer,
            metrics,
            idp,
            decode_pool: RenderPool::new(config.decode_workers),
            config: Arc::new(config),
            store,
            jobs: engine.clone(),
            tiers,
            pulls: Arc::new(crate::models::pulls::Pulls::from_env()),
            clock,
            public_url: public_url.clone().into(),
        });

        // The link stays valid until an administrator exists (not merely a user: registration
        // is closed until then, and an account made by someone else must not kill the link).
        let setup_url = (!crate::web::setup_done(&state))
            .then(|| format!("{public_url}/setup?token={}", state.idp.new_setup_token()));

        state.pulls.resume(&state).await;
        let resumed = engine.resume().await?;
        if resumed > 0 {
            info!(jobs = resumed, "resumed unfinished jobs");
        }

        // Admin channel on loopback, separate from the public listener.
        let admin_token = hex::encode(rand::rng().random::<[u8; 32]>());
        let admin_acceptor = TcpListener::bind("127.0.0.1:0").into_acceptor().await?;
        let admin_addr = admin_acceptor
            .local_addr()
            .first()
            .and_then(|a| a.as_socket_addr().copied())
            .context("admin listener has no address")?;
        let admin_path = state.config.admin_file();
        admin::write_file(
            &admin_path,
            &admin::AdminFile {
                url: format!("http://{admin_addr}"),
                token: admin_token.clone(),
                pid: std::process::id(),
            },
        )
        .with_context(|| format!("cannot write {}", admin_path.display()))?;

        let api = std::sync::Arc::new(crate::api::routes(&public_url));
        let app = Route::new()
            .nest_no_strip("/api/pictor", api.clone())
            .nest_no_strip("/openai/v1", crate::api::OpenAiAlias(api))
            .at("/files/:name", get(files::get_file))
            .at("/metrics", get(observe::metrics_public))
            .at("/healthz", get(observe::healthz))
            .nest("/", crate::idp::routes(crate::web::routes()))
            .data(state.clone())
            .with(poem::middleware::CookieJarManager::new())
            .around(limits::limit_body);
        let state_for_requests = state.clone();
        let app = app.around(move |ep, req| observe::request(ep, req, state_for_requests.clone()));
        let admin_app = admin::routes(state.clone(), admin_token);

        let (maint_stop, maint_rx) = tokio::sync::watch::channel(false);
        let mut maintenance = maintenance::spawn(state.clone(), maint_rx.clone());
        maintenance.push(webhooks::spawn(state.clone(), maint_rx));
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let (admin_stop_tx, admin_stop_rx) = oneshot::channel::<()>();
        let engine_for_stop = engine.clone();
        let idle_timeout = state.config.idle_timeout;
        let task = tokio::spawn(async move {
            let admin_task = tokio::spawn(async move {
                let _ = poem::Server::new_with_acceptor(admin_acceptor)
                    .run_with_graceful_shutdown(
                        admin_app,
                        async {
                            let _ = admin_stop_rx.await;
                        },
                        Some(Duration::from_secs(2)),
                    )
                    .await;
            });
            serve::run(
                listener,
                app,
                idle_timeout,
                async {
                    let _ = stop_rx.await;
                },
                Duration::from_secs(5),
            )
            .await;
            let _ = admin_stop_tx.send(());
            let _ = admin_task.await;
            let _ = maint_stop.send(true);
            for task in maintenance {
                let _ = task.await;
            }
            let _ = std::fs::remove_file(&admin_path);
            if !engine_for_stop.drain(Duration::from_secs(10)).await {
                warn!("jobs still running at shutdown; they resume at the next start");
            }
        });
        info!(%local_addr, %public_url, "pictor listening");
        Ok(ServerHandle {
            local_addr,
            base_url: public_url,
            state,
            setup_url,
            stop: Some(stop_tx),
            task,
        })
    }
}

impl ServerHandle {
    /// Stops accepting, lets in-flight requests and renders finish (bounded), then returns.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }

    /// Waits until the server stops by itself (it does not, unless shut down).
    pub async fn wait(&mut self) {
        let _ = (&mut self.task).await;
    }
}
