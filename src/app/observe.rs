//! Observability: a request id on every request (and so on every log line written while it is
//! handled), one access-log line per request, HTTP metrics, `GET /metrics` and `GET /healthz`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::{Data, Json};
use poem::{Endpoint, IntoResponse, Request, Response, handler};
use rand::RngExt;
use serde_json::json;
use tracing::Instrument;

use crate::metrics::{ResultLabels, StateLabels, method_label, route_label};
use crate::state::AppState;

/// A client-supplied `X-Request-Id` is kept when it is short and plain; otherwise a new one is made.
fn request_id(req: &Request) -> String {
    req.headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 64
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .map(str::to_string)
        .unwrap_or_else(|| hex::encode(rand::rng().random::<[u8; 8]>()))
}

/// Addresses of the APIs (JSON whoever asks).
fn is_api_path(path: &str) -> bool {
    ["/api/", "/openai/", "/oauth/", "/.well-known/"]
        .iter()
        .any(|p| path.starts_with(p))
}

/// The outermost middleware: request id + span, JSON errors for anything that escaped, metrics,
/// and the access log line.
pub async fn request<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
    state: AppState,
) -> poem::Result<Response> {
    let registry = state.metrics.clone();
    let id = request_id(&req);
    // The URI is shared (`Bytes` inside): kept for the error body and the language switcher
    // without copying the path on every request.
    let uri = req.uri().clone();
    let route = route_label(uri.path());
    let method = method_label(req.method());
    let span = tracing::info_span!("request", request_id = %id, method, route);
    let started = Instant::now();
    let slot = req.extensions().get::<super::serve::ParkSlot>().cloned();
    // A browser (it asks for HTML) that opens an address with nothing behind it gets the site's
    // 404 page; API clients, and anything under the API's prefixes, keep the JSON error.
    let page_404 = !is_api_path(uri.path())
        && req
            .headers()
            .get(poem::http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("text/html"));
    let mut resp = match crate::idp::discovery::prepared_response(&state, &req) {
        // The discovery document and the JWKS, prepared: no layer below is needed.
        Some(resp) => resp,
        None => {
            // The pages' language, for the whole request (page errors included).
            let lang = crate::web::i18n::negotiate(req.headers());
            crate::web::i18n::scope(lang, uri.clone(), async {
                match ep.call(req).await {
                    Ok(resp) => resp.into_response(),
                    // A page's refusal is a page; anything else that escaped becomes the API's
                    // JSON.
                    Err(err) => match err.downcast_ref::<crate::web::PageError>() {
                        Some(page) => page.render(),
                        None if page_404 && err.is::<poem::error::NotFoundError>() => {
                            crate::web::PageError::not_found().render()
                        }
                        None => crate::api::error::error_response(err, uri.path()),
                    },
                }
            })
            .instrument(span.clone())
            .await
        }
    };
    let answer_span = span.clone();
    let log = move |status: u16| {
        let secs = started.elapsed().as_secs_f64();
        registry.observe_http(route, method, status, secs);
        span.in_scope(|| tracing::info!(status, ms = (secs * 1000.0) as u64, "request"));
    };
    // A parked long-poll is timed and logged when it is answered (the server adds this
    // placeholder's headers, the request id among them, to the answer), or as 499 when it is
    // dropped unanswered (its client hung up).
    match slot {
        Some(slot) if slot.is_parked() => slot.wrap(move |answer| {
            Box::pin(async move {
                let once = LogOnce(Some(log));
                let resp = answer.instrument(answer_span).await;
                once.done(resp.status().as_u16());
                resp
            })
        }),
        _ => log(resp.status().as_u16()),
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert("x-request-id", v);
    }
    Ok(resp)
}

/// Calls its function once: with the status given to [`LogOnce::done`], or with 499 ("client
/// closed request", as nginx logs it) when dropped before.
struct LogOnce<F: FnOnce(u16)>(Option<F>);

impl<F: FnOnce(u16)> LogOnce<F> {
    fn done(mut self, status: u16) {
        if let Some(log) = self.0.take() {
            log(status);
        }
    }
}

impl<F: FnOnce(u16)> Drop for LogOnce<F> {
    fn drop(&mut self) {
        if let Some(log) = self.0.take() {
            log(499);
        }
    }
}

/// `GET /metrics` on the public listener: only with `Authorization: Bearer <metrics_token>`
/// when `metrics_token` is configured; without one it is not served there (404) and lives on the
/// loopback admin channel only.
#[handler]
pub async fn metrics_public(req: &Request, state: Data<&AppState>) -> Response {
    use crate::api::error::{codes, json_response};
    let Some(expected) = state.config.metrics_token.as_deref() else {
        return json_response(
            codes::NOT_FOUND,
            "/metrics is served only when metrics_token is configured (see docs/administration.md, Observability)",
        );
    };
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !crate::idp::crypto::ct_eq(
        &crate::idp::crypto::sha256(presented),
        &crate::idp::crypto::sha256(expected),
    ) {
        let mut resp = json_response(
            codes::UNAUTHORIZED,
            "send Authorization: Bearer <metrics_token>",
        );
        resp.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"metrics\""),
        );
        return resp;
    }
    metrics_text(&state)
}

/// Prometheus/OpenMetrics text (the admin channel serves it after its own token check).
pub fn metrics_text(state: &AppState) -> Response {
    let m = &state.metrics;
    let stats = state.jobs.stats();
    m.queue_depth.set(stats.waiting as i64);
    m.jobs_active
        .get_or_create(&StateLabels {
            state: "queued".into(),
        })
        .set(stats.waiting as i64);
    m.jobs_active
        .get_or_create(&StateLabels {
            state: "running".into(),
        })
        .set(stats.rendering as i64);
    m.signins
        .get_or_create(&ResultLabels {
            result: "ok".into(),
        })
        .set(state.idp.signins_ok.load(Ordering::Relaxed) as i64);
    m.signins
        .get_or_create(&ResultLabels {
            result: "failed".into(),
        })
        .set(state.idp.signins_failed.load(Ordering::Relaxed) as i64);
    m.password_checks
        .set(state.idp.password_checks.load(Ordering::Relaxed) as i64);
    m.observe_backends(&state.jobs.backends_status());
    m.observe_engine(&state.tiers.loaded(), &state.tiers.device());
    let (flushes, commits) = state.store.commit_counts();
    m.store_commits.set(commits as i64);
    m.store_flushes.set(flushes as i64);
    let mut resp = m.encode().into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    resp
}

/// `GET /healthz`: 200 when the store answers, 503 otherwise.
#[handler]
pub async fn healthz(state: Data<&AppState>) -> Response {
    let store = state.store.clone();
    let ok = tokio::task::spawn_blocking(move || store.readable())
        .await
        .unwrap_or(false);
    let stats = state.jobs.stats();
    let body = Json(json!({
        "status": if ok { "ok" } else { "unavailable" },
        "store": ok,
        "render_workers": stats.workers,
        "jobs_queued": stats.waiting,
        "jobs_running": stats.rendering,
        "version": env!("CARGO_PKG_VERSION"),
    }));
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body).into_response()
}
