//! ComfyUI: an API-format workflow is queued with `POST /prompt`; its progress events come over
//! the `/ws?clientId=…` WebSocket (or, when that cannot be opened, `GET /history/{prompt_id}` is
//! polled); the picture is fetched through `GET /view`. Edit sources go up through
//! `POST /upload/image`. A cancel interrupts the prompt if it is the one running
//! (`POST /interrupt`) or deletes it from ComfyUI's queue (`POST /queue {"delete": […]}`).
//!
//! Workflows carry placeholders: a string value that is exactly `{{seed}}`, `{{steps}}`,
//! `{{width}}`, `{{height}}`, `{{cfg}}` or `{{denoise}}` becomes that number; `{{prompt}}`,
//! `{{negative_prompt}}`, `{{model}}` and `{{image}}` are replaced inside any string. The bundled
//! workflows (`assets/comfyui/`) are ComfyUI's default txt2img graph and its img2img variant.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use image::RgbaImage;
use rand::RngExt;
use serde_json::{Value, json};

use super::http::{self, CallError, short};
use super::{BackendConfig, png_bytes};
use crate::render::{EditSpec, GenerateSpec, RenderControl};

pub const TXT2IMG: &str = include_str!("../../../assets/comfyui/txt2img.json");
pub const IMG2IMG: &str = include_str!("../../../assets/comfyui/img2img.json");

/// How often the wait looks for a cancel (and polls `/history` without a WebSocket).
const TICK: Duration = Duration::from_millis(200);

/// Values for a workflow's placeholders.
pub struct Fill<'a> {
    pub prompt: &'a str,
    pub negative_prompt: &'a str,
    pub model: &'a str,
    pub image: &'a str,
    pub seed: u64,
    pub steps: u32,
    pub width: u32,
    pub height: u32,
    pub cfg: f64,
    pub denoise: f64,
}

/// The workflow with its placeholders filled (see the module documentation). Text placeholders
/// are replaced in one pass, so a prompt that itself contains `{{image}}` stays as it is.
pub fn fill(workflow: &Value, f: &Fill<'_>) -> Value {
    match workflow {
        Value::String(s) => match s.as_str() {
            "{{seed}}" => json!(f.seed),
            "{{steps}}" => json!(f.steps),
            "{{width}}" => json!(f.width),
            "{{height}}" => json!(f.height),
            "{{cfg}}" => json!(f.cfg),
            "{{denoise}}" => json!(f.denoise),
            _ if s.contains("{{") => Value::String(fill_text(s, f)),
            _ => workflow.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(|v| fill(v, f)).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), fill(v, f))).collect())
        }
        other => other.clone(),
    }
}

fn fill_text(s: &str, f: &Fill<'_>) -> String {
    let mut out = String::with_capacity(s.len() + f.prompt.len());
    let mut rest = s;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let value = [
            ("{{prompt}}", f.prompt),
            ("{{negative_prompt}}", f.negative_prompt),
            ("{{model}}", f.model),
            ("{{image}}", f.image),
        ]
        .into_iter()
        .find(|(name, _)| tail.starts_with(name));
        match value {
            Some((name, v)) => {
                out.push_str(v);
                rest = &tail[name.len()..];
            }
            None => {
                out.push_str("{{");
                rest = &tail[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Checks a workflow file: API format (node id → `{class_type, inputs}`), with the placeholders
/// its use needs (`{{image}}` for edits).
pub fn check_workflow(doc: &Value, edit: bool) -> Result<(), String> {
    let nodes = doc.as_object().filter(|m| !m.is_empty()).ok_or(
        "must be a ComfyUI workflow in API format (an object of nodes; use \"Export (API)\")",
    )?;
    for (id, node) in nodes {
        if node.get("class_type").and_then(Value::as_str).is_none()
            || !node.get("inputs").is_some_and(Value::is_object)
        {
            return Err(format!(
                "node {id} has no class_type/inputs: export the workflow with \"Export (API)\""
            ));
        }
    }
    let text = doc.to_string();
    if !text.contains("{{prompt}}") {
        return Err("has no {{prompt}} placeholder".into());
    }
    if edit && !text.contains("{{image}}") {
        return Err(
            "is used for edits but has no {{image}} placeholder (a LoadImage input)".into(),
        );
    }
    Ok(())
}

fn round8(v: u32) -> u32 {
    (v.div_ceil(8) * 8).clamp(64, 4096)
}

pub fn txt2img(
    cfg: &BackendConfig,
    base: &str,
    spec: &GenerateSpec,
    w: u32,
    h: u32,
    control: &RenderControl,
) -> Result<Vec<u8>, CallError> {
    let workflow = workflow(cfg, TXT2IMG)?;
    let prompt = fill(
        &workflow,
        &Fill {
            prompt: &spec.prompt,
            negative_prompt: cfg.negative_prompt.as_deref().unwrap_or(""),
            model: cfg.model.as_deref().unwrap_or(""),
            image: "",
            seed: spec.seed,
            steps: cfg.steps.unwrap_or(20),
            width: round8(w),
            height: round8(h),
            cfg: 7.0,
            denoise: 1.0,
        },
    );
    http::block_on(run(cfg, base, prompt, control))
}

pub fn img2img(
    cfg: &BackendConfig,
    base: &str,
    spec: &EditSpec,
    source: &RgbaImage,
    control: &RenderControl,
) -> Result<Vec<u8>, CallError> {
    let workflow = workflow(cfg, IMG2IMG)?;
    let png = png_bytes(source)?;
    let (instruction, seed) = (spec.instruction.clone(), spec.seed);
    let negative = cfg.negative_prompt.clone().unwrap_or_default();
    let model = cfg.model.clone().unwrap_or_default();
    let (steps, denoise) = (
        cfg.steps.unwrap_or(20),
        cfg.denoising_strength.unwrap_or(0.55),
    );
    let (w, h) = source.dimensions();
    http::block_on(async move {
        let image = upload(cfg, base, png, control).await?;
        let prompt = fill(
            &workflow,
            &Fill {
                prompt: &instruction,
                negative_prompt: &negative,
                model: &model,
                image: &image,
                seed,
                steps,
                width: w,
                height: h,
                cfg: 7.0,
                denoise: f64::from(denoise),
            },
        );
        run(cfg, base, prompt, control).await
    })
}

fn workflow(cfg: &BackendConfig, bundled: &str) -> Result<Value, CallError> {
    match &cfg.workflow_doc {
        Some(doc) => Ok((**doc).clone()),
        None => serde_json::from_str(bundled)
            .map_err(|e| CallError::Refused(format!("the bundled workflow is broken: {e}"))),
    }
}

fn client(cfg: &BackendConfig) -> Result<reqwest::Client, CallError> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(cfg.timeout_secs.min(10)))
        .timeout(Duration::from_secs(cfg.timeout_secs))
        .build()
        .map_err(|e| CallError::Refused(format!("cannot build the HTTP client: {e}")))
}

/// Uploads an edit's source; returns the name a LoadImage node takes.
async fn upload(
    cfg: &BackendConfig,
    base: &str,
    png: Vec<u8>,
    control: &RenderControl,
) -> Result<String, CallError> {
    let name = format!("pictor-{:016x}.png", rand::rng().random::<u64>());
    let body = http::Body::Multipart {
        fields: vec![
            ("type".into(), "input".into()),
            ("overwrite".into(), "true".into()),
        ],
        file: ("image".into(), name, "image/png".into(), png),
    };
    let answer = http::post_async(cfg, base, "/upload/image", &body, control).await?;
    let name = answer
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| CallError::Refused("ComfyUI's upload answer has no name".into()))?;
    Ok(match answer.get("subfolder").and_then(Value::as_str) {
        Some(sub) if !sub.is_empty() => format!("{sub}/{name}"),
        _ => name.to_owned(),
    })
}

/// Queues `prompt`, follows it to its end, and fetches its picture.
async fn run(
    cfg: &BackendConfig,
    base: &str,
    prompt: Value,
    control: &RenderControl,
) -> Result<Vec<u8>, CallError> {
    let client_id = format!("pictor-{:032x}", rand::rng().random::<u128>());
    // Listen before queueing, so no event of the prompt is missed.
    let mut ws = open_ws(cfg, base, &client_id).await;
    let body = http::Body::Json(json!({ "prompt": prompt, "client_id": client_id }));
    let answer = http::post_async(cfg, base, "/prompt", &body, control).await?;
    let prompt_id = answer
        .get("prompt_id")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            CallError::Refused(format!(
                "ComfyUI did not queue the workflow: {}",
                short(&answer.to_string())
            ))
        })?
        .to_owned();
    let http = client(cfg)?;
    let limit = Duration::from_secs(cfg.timeout_secs);
    // With the WebSocket, `timeout_secs` counts from `execution_start` (a wait in ComfyUI's own
    // queue is not the server failing; a cancel ends it); polled, from the submission.
    let mut deadline = ws.is_none().then(|| Instant::now() + limit);
    let finished = loop {
        if control.is_cancelled() {
            cancel(cfg, &http, base, &prompt_id).await;
            return Err(CallError::Cancelled);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            cancel(cfg, &http, base, &prompt_id).await;
            return Err(CallError::Unavailable(format!(
                "ComfyUI did not finish within {} s",
                cfg.timeout_secs
            )));
        }
        match &mut ws {
            Some(socket) => match tokio::time::timeout(TICK, socket.next()).await {
                Err(_) => {}
                Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Text(text)))) => {
                    match event(&text, &prompt_id, control) {
                        Event::None => {}
                        Event::Started => {
                            deadline.get_or_insert_with(|| Instant::now() + limit);
                        }
                        Event::Done => break history(cfg, &http, base, &prompt_id).await?,
                        Event::Error(m) => return Err(CallError::Refused(m)),
                        // Someone stopped it there (not a broken server): no other server.
                        Event::Interrupted => {
                            return Err(CallError::Refused(
                                "the prompt was interrupted on the ComfyUI server".into(),
                            ));
                        }
                    }
                }
                // Previews (binary frames), pings.
                Ok(Some(Ok(_))) => {}
                // The socket went away: follow by polling from here on.
                Ok(Some(Err(_)) | None) => {
                    ws = None;
                    deadline.get_or_insert_with(|| Instant::now() + limit);
                }
            },
            None => {
                tokio::time::sleep(TICK).await;
                if let Some(done) = poll_history(cfg, &http, base, &prompt_id).await? {
                    break done;
                }
            }
        }
    };
    let image = output_image(&finished)?;
    fetch(cfg, &http, base, &image).await
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn open_ws(cfg: &BackendConfig, base: &str, client_id: &str) -> Option<Socket> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let ws_url = base
        .strip_prefix("http://")
        .map(|rest| format!("ws://{rest}/ws?clientId={client_id}"))?;
    let mut request = ws_url.into_client_request().ok()?;
    if let Some(value) = http::auth_header(cfg) {
        request
            .headers_mut()
            .insert("authorization", value.parse().ok()?);
    }
    match tokio::time::timeout(
        Duration::from_secs(5),
        // Events are small JSON; previews are JPEGs of a few hundred KiB. The library's defaults
        // (64 MiB messages) would let a server hold that much per job in memory.
        tokio_tungstenite::connect_async_with_config(
            request,
            Some(
                tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
                    .max_message_size(Some(crate::bounded::BACKEND_STATUS_MAX))
                    .max_frame_size(Some(crate::bounded::BACKEND_STATUS_MAX)),
            ),
            true,
        ),
    )
    .await
    {
        Ok(Ok((mut socket, _))) => {
            let _ = socket.flush().await;
            Some(socket)
        }
        _ => None,
    }
}

enum Event {
    None,
    /// ComfyUI began executing the prompt.
    Started,
    Done,
    Error(String),
    Interrupted,
}

/// What a WebSocket message says about our prompt (progress goes straight to the job).
fn event(text: &str, prompt_id: &str, control: &RenderControl) -> Event {
    let Ok(msg) = serde_json::from_str::<Value>(text) else {
        return Event::None;
    };
    let data = &msg["data"];
    if data.get("prompt_id").and_then(Value::as_str) != Some(prompt_id) {
        return Event::None;
    }
    match msg["type"].as_str().unwrap_or("") {
        "progress" => {
            let (v, max) = (data["value"].as_f64(), data["max"].as_f64());
            if let (Some(v), Some(max)) = (v, max)
                && max > 0.0
            {
                control.set_progress(0.05 + 0.9 * (v / max).clamp(0.0, 1.0));
            }
            Event::None
        }
        // `executing` with no node: the prompt's graph is done (older servers send no
        // `execution_success`).
        "executing" if data.get("node").is_some_and(Value::is_null) => Event::Done,
        "execution_success" => Event::Done,
        "execution_start" => Event::Started,
        "execution_error" => Event::Error(format!(
            "ComfyUI failed in node {} ({}): {}",
            data["node_id"].as_str().unwrap_or("?"),
            data["node_type"].as_str().unwrap_or("?"),
            short(data["exception_message"].as_str().unwrap_or("no message"))
        )),
        "execution_interrupted" => Event::Interrupted,
        _ => Event::None,
    }
}

/// The prompt's history entry once it has completed (`None` while it has not).
async fn poll_history(
    cfg: &BackendConfig,
    http: &reqwest::Client,
    base: &str,
    prompt_id: &str,
) -> Result<Option<Value>, CallError> {
    let url = format!("{base}/history/{prompt_id}");
    let answer: Value = match http::authorized(cfg, http.get(&url)).send().await {
        Ok(r) if r.status().is_success() => {
            crate::bounded::json(r, crate::bounded::BACKEND_STATUS_MAX, "ComfyUI's history")
                .await
                .unwrap_or(Value::Null)
        }
        Ok(r) if r.status().is_server_error() => return Ok(None),
        Ok(r) => {
            return Err(CallError::Refused(format!(
                "ComfyUI's history answered HTTP {}",
                r.status().as_u16()
            )));
        }
        // A blip while polling: poll again at the next tick.
        Err(_) => return Ok(None),
    };
    let Some(entry) = answer.get(prompt_id) else {
        return Ok(None);
    };
    let status = &entry["status"];
    match status["status_str"].as_str() {
        Some("error") => {
            let message = status["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m[0] == "execution_error")
                .and_then(|m| m[1]["exception_message"].as_str())
                .unwrap_or("the workflow failed");
            Err(CallError::Refused(format!(
                "ComfyUI failed: {}",
                short(message)
            )))
        }
        _ if status["completed"].as_bool() == Some(true)
            || entry
                .get("outputs")
                .is_some_and(|o| o.as_object().is_some_and(|m| !m.is_empty())) =>
        {
            Ok(Some(entry.clone()))
        }
        _ => Ok(None),
    }
}

async fn history(
    cfg: &BackendConfig,
    http: &reqwest::Client,
    base: &str,
    prompt_id: &str,
) -> Result<Value, CallError> {
    // The entry is written as the prompt ends; give it a moment if the event came first.
    for _ in 0..25 {
        if let Some(done) = poll_history(cfg, http, base, prompt_id).await? {
            return Ok(done);
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    Err(CallError::Unavailable(
        "ComfyUI finished the prompt but has no history for it".into(),
    ))
}

/// The first saved picture among the outputs (`type: output`, as SaveImage writes), else the
/// first picture of any kind (a PreviewImage's `temp`).
fn output_image(entry: &Value) -> Result<Value, CallError> {
    let images: Vec<&Value> = entry["outputs"]
        .as_object()
        .into_iter()
        .flat_map(|o| o.values())
        .filter_map(|node| node["images"].as_array())
        .flatten()
        .collect();
    images
        .iter()
        .find(|i| i["type"] == "output")
        .or_else(|| images.first())
        .map(|i| (*i).clone())
        .ok_or_else(|| {
            CallError::Refused(
                "the ComfyUI workflow saved no picture (it needs a SaveImage node)".into(),
            )
        })
}

async fn fetch(
    cfg: &BackendConfig,
    http: &reqwest::Client,
    base: &str,
    image: &Value,
) -> Result<Vec<u8>, CallError> {
    let query = [
        ("filename", image["filename"].as_str().unwrap_or("")),
        ("subfolder", image["subfolder"].as_str().unwrap_or("")),
        ("type", image["type"].as_str().unwrap_or("output")),
    ];
    let r = http::authorized(cfg, http.get(format!("{base}/view")).query(&query))
        .send()
        .await
        .map_err(|e| CallError::Unavailable(format!("cannot fetch the picture: {e}")))?;
    if !r.status().is_success() {
        return Err(CallError::Unavailable(format!(
            "ComfyUI's /view answered HTTP {}",
            r.status().as_u16()
        )));
    }
    crate::bounded::body(r, crate::bounded::BACKEND_ANSWER_MAX, "ComfyUI's picture")
        .await
        .map_err(|e| match e {
            crate::bounded::BodyError::TooLarge { .. } => CallError::Refused(e.to_string()),
            e => CallError::Unavailable(format!("the picture was cut off: {e}")),
        })
}

/// Stops our prompt: deleted from ComfyUI's queue, and interrupted if it is the one running
/// (or the queue cannot be read). The interrupt names the prompt, which current ComfyUI honours,
/// so a cancel does not stop someone else's prompt on a shared server.
async fn cancel(cfg: &BackendConfig, http: &reqwest::Client, base: &str, prompt_id: &str) {
    let _ = http::authorized(cfg, http.post(format!("{base}/queue")))
        .json(&json!({ "delete": [prompt_id] }))
        .send()
        .await;
    let queue: Option<Value> = match http::authorized(cfg, http.get(format!("{base}/queue")))
        .send()
        .await
    {
        Ok(r) if r.status().is_success() => {
            crate::bounded::json(r, crate::bounded::BACKEND_STATUS_MAX, "ComfyUI's queue")
                .await
                .ok()
        }
        _ => None,
    };
    let running = queue.as_ref().is_none_or(|q| {
        q["queue_running"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|item| item[1] == prompt_id)
    });
    if running {
        let _ = http::authorized(cfg, http.post(format!("{base}/interrupt")))
            .json(&json!({ "prompt_id": prompt_id }))
            .send()
            .await;
    }
}
