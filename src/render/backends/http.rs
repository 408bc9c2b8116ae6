//! One backend call: timeouts, retries with backoff, and the mapping of answers to
//! [`CallError`]s. The request is driven on a private current-thread runtime in a scoped
//! thread ([`block_on`]), so a blocking caller never needs (or blocks) the server's runtime.

use std::time::Duration;

use super::{BackendConfig, BackendKind};
use crate::render::{RenderControl, RenderError};

/// How often a running call looks for a cancel (and asks A1111 for its progress).
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// What a finished attempt says.
enum Attempt {
    Done(serde_json::Value),
    /// Worth another try (timeout, connection, 5xx); the message if it was the last.
    Retry(String),
    /// Overloaded (429/503/queue full); retried too, and reported as `Overloaded` at the end.
    Busy(String, Option<Duration>),
    /// Final (4xx, unusable answer).
    Fail(String),
    /// The job was cancelled; the request was abandoned (and A1111 interrupted).
    Cancelled,
}

/// A request body.
pub enum Body {
    Json(serde_json::Value),
    /// Multipart form: text fields and one file (name, filename, content type, bytes).
    Multipart {
        fields: Vec<(String, String)>,
        file: (String, String, String, Vec<u8>),
    },
}

/// Why a backend call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// Unreachable, timed out or failing (5xx), after the retries: another endpoint may work.
    Unavailable(String),
    /// Overloaded (429/503/queue full), after the retries.
    Overloaded(String),
    /// Refused the request or answered unusably (4xx, not JSON, no image): no endpoint would do
    /// better.
    Refused(String),
    /// The job was cancelled and the call abandoned.
    Cancelled,
}

impl From<CallError> for RenderError {
    fn from(e: CallError) -> RenderError {
        match e {
            CallError::Unavailable(m) | CallError::Refused(m) => RenderError::Failed(m),
            CallError::Overloaded(m) => RenderError::Overloaded(m),
            CallError::Cancelled => RenderError::Cancelled,
        }
    }
}

/// Runs a backend call on a private current-thread runtime in a scoped thread, so a blocking
/// caller (the render pool) never needs or blocks the server's runtime.
pub fn block_on<T: Send>(
    fut: impl std::future::Future<Output = Result<T, CallError>> + Send,
) -> Result<T, CallError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| CallError::Refused(format!("cannot start the HTTP client: {e}")))?
                .block_on(fut)
        })
        .join()
        .unwrap_or_else(|_| Err(CallError::Refused("the backend call crashed".into())))
    })
}

/// POSTs `body` to `url` under `cfg`'s timeout and retry policy; returns the JSON answer. A
/// cancel through `control` abandons the call within [`WATCH_EVERY`] (A1111 is sent
/// `/sdapi/v1/interrupt`); while an A1111 call runs, its `/sdapi/v1/progress` is the job's.
pub fn post(
    cfg: &BackendConfig,
    base: &str,
    path: &str,
    body: &Body,
    control: &RenderControl,
) -> Result<serde_json::Value, CallError> {
    block_on(post_async(cfg, base, path, body, control))
}

/// [`post`] inside a runtime.
pub async fn post_async(
    cfg: &BackendConfig,
    base: &str,
    path: &str,
    body: &Body,
    control: &RenderControl,
) -> Result<serde_json::Value, CallError> {
    let url = &format!("{base}{path}");
    let timeout = Duration::from_secs(cfg.timeout_secs);
    let attempts = cfg.retries + 1;
    let mut last: Option<Attempt> = None;
    for n in 0..attempts {
        if n > 0 {
            let wait = match &last {
                Some(Attempt::Busy(_, Some(after))) => *after,
                _ => Duration::from_millis(cfg.backoff_ms.saturating_mul(1 << (n - 1).min(10))),
            };
            let until = tokio::time::Instant::now() + wait.min(Duration::from_secs(30));
            while tokio::time::Instant::now() < until {
                if control.is_cancelled() {
                    return Err(CallError::Cancelled);
                }
                tokio::time::sleep_until(until.min(tokio::time::Instant::now() + WATCH_EVERY))
                    .await;
            }
        }
        if control.is_cancelled() {
            return Err(CallError::Cancelled);
        }
        let attempt = tokio::select! {
            done = attempt(cfg, url, body, timeout) => done,
            () = watch(cfg, base, control) => Attempt::Cancelled,
        };
        match attempt {
            Attempt::Done(v) => return Ok(v),
            Attempt::Fail(msg) => return Err(CallError::Refused(msg)),
            Attempt::Cancelled => return Err(CallError::Cancelled),
            other => last = Some(other),
        }
    }
    Err(match last {
        Some(Attempt::Busy(msg, _)) => CallError::Overloaded(msg),
        Some(Attempt::Retry(msg)) => CallError::Unavailable(msg),
        _ => CallError::Unavailable("the backend did not answer".into()),
    })
}

/// Resolves once the job is cancelled (after interrupting A1111); meanwhile copies A1111's
/// progress to the job.
async fn watch(cfg: &BackendConfig, base: &str, control: &RenderControl) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .ok();
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let a1111 = cfg.kind == BackendKind::A1111;
        if control.is_cancelled() {
            if a1111 && let Some(client) = &client {
                let url = format!("{base}/sdapi/v1/interrupt");
                let _ = authorized(cfg, client.post(url)).send().await;
            }
            return;
        }
        if a1111 && let Some(client) = &client {
            let url = format!("{base}/sdapi/v1/progress?skip_current_image=true");
            let progress = match authorized(cfg, client.get(url)).send().await {
                Ok(r) if r.status().is_success() => crate::bounded::json::<serde_json::Value>(
                    r,
                    crate::bounded::BACKEND_STATUS_MAX,
                    "A1111's progress",
                )
                .await
                .ok(),
                _ => None,
            };
            if let Some(p) = progress
                .as_ref()
                .and_then(|v| v.get("progress"))
                .and_then(serde_json::Value::as_f64)
                .filter(|p| *p > 0.0 && *p <= 1.0)
            {
                control.set_progress(0.05 + 0.9 * p);
            }
        }
    }
}

/// The `Authorization` value for the backend's credentials (`api_key_env`): basic auth for a
/// `user:password` value (A1111's `--api-auth`, a ComfyUI behind a password proxy), a bearer
/// token otherwise.
pub fn auth_header(cfg: &BackendConfig) -> Option<String> {
    use base64::Engine;
    let key = std::env::var(cfg.api_key_env.as_ref()?).ok()?;
    if key.is_empty() {
        return None;
    }
    Some(match (cfg.kind, key.split_once(':')) {
        (BackendKind::A1111 | BackendKind::ComfyUi, Some(_)) => format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(key.as_bytes())
        ),
        _ => format!("Bearer {key}"),
    })
}

/// The request with the backend's credentials (see [`auth_header`]).
pub fn authorized(cfg: &BackendConfig, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    match auth_header(cfg) {
        Some(value) => req.header(reqwest::header::AUTHORIZATION, value),
        None => req,
    }
}

async fn attempt(cfg: &BackendConfig, url: &str, body: &Body, timeout: Duration) -> Attempt {
    let client = match reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .timeout(timeout)
        .build()
    {
        Ok(c) => c,
        Err(e) => return Attempt::Fail(format!("cannot build the HTTP client: {e}")),
    };
    let req = authorized(cfg, client.post(url));
    let req = match body {
        Body::Json(v) => req.json(v),
        Body::Multipart { fields, file } => {
            let boundary = format!("pictor-{:016x}", fnv(url.as_bytes()) ^ file.3.len() as u64);
            let bytes = multipart(&boundary, fields, file);
            req.header(
                reqwest::header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(bytes)
        }
    };
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => {
            return Attempt::Retry(format!(
                "the backend did not answer within {} s",
                timeout.as_secs()
            ));
        }
        Err(e) => {
            return Attempt::Retry(format!(
                "cannot reach the backend: {}",
                short(&e.to_string())
            ));
        }
    };
    let status = resp.status();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let text = match crate::bounded::body(
        resp,
        crate::bounded::BACKEND_ANSWER_MAX,
        "the backend's answer",
    )
    .await
    {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e @ crate::bounded::BodyError::TooLarge { .. }) => {
            return Attempt::Fail(e.to_string());
        }
        Err(e) if e.is_timeout() => {
            return Attempt::Retry(format!(
                "the backend did not answer within {} s",
                timeout.as_secs()
            ));
        }
        Err(e) => {
            return Attempt::Retry(format!("the answer was cut off: {}", short(&e.to_string())));
        }
    };
    let lower = text.to_lowercase();
    if status.as_u16() == 429
        || status.as_u16() == 503
        || (!status.is_success()
            && (lower.contains("queue is full") || lower.contains("queue full")))
    {
        return Attempt::Busy(
            format!("the backend is overloaded (HTTP {})", status.as_u16()),
            retry_after,
        );
    }
    if status.is_server_error() {
        return Attempt::Retry(format!(
            "the backend failed (HTTP {}): {}",
            status.as_u16(),
            short(&text)
        ));
    }
    if !status.is_success() {
        return Attempt::Fail(format!(
            "the backend refused the request (HTTP {}): {}",
            status.as_u16(),
            error_summary(&text)
        ));
    }
    match serde_json::from_str(&text) {
        Ok(v) => Attempt::Done(v),
        Err(_) => Attempt::Fail(format!(
            "the backend's answer is not JSON: {}",
            short(&text)
        )),
    }
}

/// What an error answer says, in a line: the message fields of the usual shapes (OpenAI's
/// `error.message`, FastAPI's `detail`, ComfyUI's `error.message` and each node's errors), else
/// the start of the text.
fn error_summary(text: &str) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return short(text);
    };
    let mut parts: Vec<String> = Vec::new();
    for m in [
        &v["error"]["message"],
        &v["error"],
        &v["detail"],
        &v["message"],
    ] {
        if let Some(m) = m.as_str() {
            parts.push(m.to_owned());
            break;
        }
    }
    if let Some(nodes) = v["node_errors"].as_object() {
        for (id, node) in nodes {
            for e in node["errors"].as_array().into_iter().flatten() {
                let m = e["details"]
                    .as_str()
                    .filter(|d| !d.is_empty())
                    .or(e["message"].as_str())
                    .unwrap_or("invalid");
                parts.push(format!("node {id}: {m}"));
            }
        }
    }
    if parts.is_empty() {
        return short(text);
    }
    parts
        .join("; ")
        .chars()
        .take(400)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The first 200 characters of a message, on one line.
pub(super) fn short(s: &str) -> String {
    s.chars()
        .take(200)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn fnv(bytes: &[u8]) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01B3);
    }
    h
}

/// A multipart/form-data body (RFC 7578) with text fields and one file.
fn multipart(
    boundary: &str,
    fields: &[(String, String)],
    file: &(String, String, String, Vec<u8>),
) -> Vec<u8> {
    let mut out = Vec::with_capacity(file.3.len() + 1024);
    for (name, value) in fields {
        out.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    let (name, filename, content_type, bytes) = file;
    out.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\nContent-Type: {content_type}\r\n\r\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(bytes);
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    out
}

/// The base64 image in `value` at `path` (e.g. `data[0].b64_json`), decoded.
pub fn b64_image(value: &serde_json::Value, pointer: &str) -> Result<Vec<u8>, CallError> {
    use base64::Engine;
    let s = value
        .pointer(pointer)
        .and_then(|v| v.as_str())
        .ok_or_else(|| CallError::Refused("the backend's answer has no image".into()))?;
    // Some servers prefix a data URL.
    let s = s.split_once("base64,").map_or(s, |(_, b)| b);
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|_| CallError::Refused("the backend's image is not valid base64".into()))
}

/// The base URL without a trailing slash (and without `/v1` for OpenAI-style URLs).
pub fn base(url: &str) -> &str {
    let url = url.trim().trim_end_matches('/');
    url.strip_suffix("/v1").unwrap_or(url)
}
