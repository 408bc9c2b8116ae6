//! The local admin channel: a loopback-only HTTP listener, separate from the public one, that
//! runs `ops::execute` for the CLI while the server holds the store open. Its address and a
//! random token are written to `<data>/admin.json`, readable by the owner only.

use std::path::Path;

use poem::http::StatusCode;
use poem::web::{Data, Json};
use poem::{Body, EndpointExt, IntoResponse, Request, Response, Route, handler, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use super::limits;
use crate::ops::{self, AdminRequest, OpError};
use crate::state::AppState;

/// Contents of `admin.json`. No `Debug`: it holds the token.
#[derive(Serialize, Deserialize)]
pub struct AdminFile {
    pub url: String,
    pub token: String,
    pub pid: u32,
}

#[derive(Clone)]
struct AdminToken(String);

/// Largest admin request (a user import carries many records).
const ADMIN_BODY_LIMIT: usize = 16 * 1024 * 1024;

fn refused(status: StatusCode, error: &str) -> Response {
    (status, Json(json!({"ok": false, "error": error}))).into_response()
}

/// Checks the token first (before a byte of the body is read), then reads the body with a cap
/// and parses it.
async fn authorized_body<T: serde::de::DeserializeOwned>(
    req: &Request,
    token: &AdminToken,
    body: Body,
) -> Result<T, Response> {
    if !token_ok(req, token) {
        let mut resp = refused(StatusCode::UNAUTHORIZED, "bad admin token");
        resp.headers_mut().insert(
            poem::http::header::CONNECTION,
            poem::http::HeaderValue::from_static("close"),
        );
        return Err(resp);
    }
    if limits::declared_length(req).is_some_and(|n| n > ADMIN_BODY_LIMIT as u64) {
        return Err(refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request over 16 MiB",
        ));
    }
    match limits::read_capped(body, ADMIN_BODY_LIMIT).await {
        limits::BodyRead::Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| refused(StatusCode::BAD_REQUEST, &format!("bad request: {e}"))),
        limits::BodyRead::TooLarge => Err(refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request over 16 MiB",
        )),
        limits::BodyRead::Failed(m) => Err(refused(StatusCode::BAD_REQUEST, &m)),
    }
}

#[handler]
async fn exec(
    req: &Request,
    token: Data<&AdminToken>,
    state: Data<&AppState>,
    body: Body,
) -> Response {
    let request: AdminRequest = match authorized_body(req, &token, body).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    // Downloads are the server's own work, not the store's.
    match &request {
        AdminRequest::ModelPull {
            repo,
            revision,
            variant,
            name,
        } => {
            let record = crate::store::models::PullRecord {
                name: name.clone(),
                repo: repo.clone(),
                revision: revision.clone(),
                variant: variant.clone(),
                started_at: state.clock.now(),
                actor: "cli".into(),
            };
            return match state.pulls.begin(&state, record).await {
                Ok(()) => Json(json!({"ok": true, "result": {"started": name}})).into_response(),
                Err(m) => (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"ok": false, "error": m})),
                )
                    .into_response(),
            };
        }
        AdminRequest::PullList => {
            return Json(json!({"ok": true, "result": {"pulls": state.pulls.views()}}))
                .into_response();
        }
        AdminRequest::PullCancel { name } => {
            return if state.pulls.cancel(name) {
                Json(json!({"ok": true, "result": {"cancelled": name}})).into_response()
            } else {
                (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"ok": false, "error": format!("no download of {name:?} is running")})),
                )
                    .into_response()
            };
        }
        AdminRequest::ModelList => {
            // The running server also knows what is loaded, and where the engine computes.
            return match state.store.call(|s| s.models()).await {
                Ok(models) => {
                    let loaded = state.tiers.loaded();
                    let models: Vec<Value> = models
                        .into_iter()
                        .map(|m| {
                            let held = loaded.iter().find(|(n, _, _)| *n == m.name);
                            let mut v = json!(m);
                            v["loaded_bytes"] = json!(held.map(|(_, b, _)| b));
                            v["loaded_on"] = json!(held.map(|(_, _, d)| d));
                            v
                        })
                        .collect();
                    Json(json!({"ok": true, "result": {
                        "models": models,
                        "device": state.tiers.device(),
                    }}))
                    .into_response()
                }
                Err(e) => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Json(json!({"ok": false, "error": e.to_string()})),
                )
                    .into_response(),
            };
        }
        _ => {}
    }
    let now = state.clock.now();
    let tiers = request.changes_tiers();
    match state
        .store
        .call({
            let idp = state.idp.clone();
            move |s| Ok::<_, crate::store::StoreError>(ops::execute(s, &idp.secrets, request, now))
        })
        .await
    {
        Ok(Ok(mut value)) => {
            if tiers {
                state.reload_tiers().await;
            }
            crate::ops::complete_urls(&mut value, &state.public_url);
            Json(json!({"ok": true, "result": value})).into_response()
        }
        Ok(Err(OpError::Invalid(m))) => (
            StatusCode::BAD_REQUEST,
            Json(json!({"ok": false, "error": m})),
        )
            .into_response(),
        Ok(Err(OpError::Store(e))) | Err(e) => {
            tracing::error!(error = %e, "admin operation failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Json(json!({"ok": false, "error": e.to_string()})),
            )
                .into_response()
        }
    }
}

fn token_ok(req: &Request, token: &AdminToken) -> bool {
    let presented = req
        .headers()
        .get(poem::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    bool::from(presented.as_bytes().ct_eq(token.0.as_bytes()))
}

#[derive(Deserialize)]
struct BackupRequest {
    to: std::path::PathBuf,
}

#[handler]
async fn backup(
    req: &Request,
    token: Data<&AdminToken>,
    state: Data<&AppState>,
    body: Body,
) -> Response {
    let request: BackupRequest = match authorized_body(req, &token, body).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    let (store, data_dir, to) = (
        state.store.clone(),
        state.config.data_dir.clone(),
        request.to,
    );
    match tokio::task::spawn_blocking(move || crate::backup::backup(&store, &data_dir, &to)).await {
        Ok(Ok(v)) => Json(json!({"ok": true, "result": v})).into_response(),
        Ok(Err(e)) => (
            StatusCode::BAD_REQUEST,
            Json(json!({"ok": false, "error": e.to_string()})),
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"ok": false, "error": e.to_string()})),
        )
            .into_response(),
    }
}

/// `GET /metrics` on the admin channel (the admin token as bearer).
#[handler]
async fn metrics(req: &Request, token: Data<&AdminToken>, state: Data<&AppState>) -> Response {
    if !token_ok(req, &token) {
        return refused(StatusCode::UNAUTHORIZED, "bad admin token");
    }
    super::observe::metrics_text(&state)
}

/// `POST /admin/v1/backends`: the inference servers' health (`pictor backends status`).
#[handler]
async fn backends(req: &Request, token: Data<&AdminToken>, state: Data<&AppState>) -> Response {
    if !token_ok(req, &token) {
        return refused(StatusCode::UNAUTHORIZED, "bad admin token");
    }
    Json(json!({"ok": true, "result": state.jobs.backends_status()})).into_response()
}

pub fn routes(state: AppState, token: String) -> impl poem::Endpoint + use<> {
    Route::new()
        .at("/metrics", poem::get(metrics))
        .at("/admin/v1/backends", post(backends))
        .at("/admin/v1/exec", post(exec))
        .at("/admin/v1/backup", post(backup))
        .data(AdminToken(token))
        .data(state)
}

/// Writes `admin.json` with owner-only permissions (created that way, never widened).
pub fn write_file(path: &Path, file: &AdminFile) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(file).map_err(std::io::Error::other)?;
    let tmp = path.with_extension("json.tmp");
    let _ = std::fs::remove_file(&tmp);
    {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        use std::io::Write;
        let mut f = opts.open(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
