//! Render farms: the ComfyUI backend against a fake that speaks ComfyUI's real protocol
//! (`POST /prompt` with API-format workflows and its validation errors, the `/ws?clientId=`
//! WebSocket with `execution_start`/`progress`/`executing`/`executed`/`execution_success`/
//! `execution_error`/`execution_interrupted`, `/history/{id}`, `/view`, `/upload/image`,
//! `/queue`, `/interrupt`, `/system_stats`), and backend pools (least busy, failover without a
//! second charge, down and probed back, `pictor backends status`, `/metrics`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures_util::{SinkExt, StreamExt};
use pictor::render::backends::{Router, parse_backends_toml};
use pictor::render::{
    EditSpec, GenerateSpec, Model, ProceduralRenderer, Ratio, RenderControl, RenderError, Renderer,
};
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::web::websocket::{Message, WebSocket};
use poem::web::{Data, Json, Multipart, Path, Query};
use poem::{
    EndpointExt, IntoResponse, Response, Route, Server, get, handler, http::StatusCode, post,
};
use serde_json::{Value, json};

const CKPT: &str = "v1-5-pruned-emaonly.safetensors";

/// One prompt the fake was given.
#[derive(Clone, Debug)]
struct Queued {
    id: String,
    client: String,
    workflow: Value,
}

#[derive(Default)]
struct Inner {
    queue: Vec<Queued>,
    running: Option<Queued>,
    history: HashMap<String, Value>,
    files: HashMap<String, Vec<u8>>,
    uploads: HashMap<String, Vec<u8>>,
    sockets: HashMap<String, tokio::sync::mpsc::UnboundedSender<String>>,
    /// Every workflow accepted, in order.
    seen: Vec<Value>,
    deleted: Vec<String>,
}

/// A ComfyUI server: one prompt at a time, `steps` progress events of `step_ms` each.
#[derive(Clone)]
struct Comfy {
    url: String,
    inner: Arc<Mutex<Inner>>,
    wake: Arc<tokio::sync::Notify>,
    interrupt: Arc<AtomicBool>,
    interrupts: Arc<AtomicUsize>,
    step_ms: u64,
    /// `/ws` answers 404 (as behind a proxy without WebSocket support): clients must poll.
    no_ws: bool,
    /// Every route answers 500 while false (a broken server).
    healthy: Arc<AtomicBool>,
    /// Prompts fail in the sampler with this message.
    fail_with: Option<String>,
    served: Arc<AtomicUsize>,
}

impl Comfy {
    fn send(&self, client: &str, msg: Value) {
        if let Some(tx) = self.inner.lock().unwrap().sockets.get(client) {
            let _ = tx.send(msg.to_string());
        }
    }

    fn seen(&self) -> Vec<Value> {
        self.inner.lock().unwrap().seen.clone()
    }
}

async fn fake_comfy(step_ms: u64, no_ws: bool, fail_with: Option<&str>) -> Comfy {
    let acceptor = TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .unwrap();
    let addr = acceptor.local_addr()[0].as_socket_addr().copied().unwrap();
    let c = Comfy {
        url: format!("http://{addr}"),
        inner: Arc::default(),
        wake: Arc::default(),
        interrupt: Arc::default(),
        interrupts: Arc::default(),
        step_ms,
        no_ws,
        healthy: Arc::new(AtomicBool::new(true)),
        fail_with: fail_with.map(str::to_owned),
        served: Arc::default(),
    };
    let app = Route::new()
        .at("/prompt", post(prompt))
        .at("/ws", get(ws))
        .at("/history/:id", get(history))
        .at("/view", get(view))
        .at("/upload/image", post(upload))
        .at("/queue", get(queue_get).post(queue_post))
        .at("/interrupt", post(interrupt))
        .at("/system_stats", get(system_stats))
        .data(c.clone());
    tokio::spawn(Server::new_with_acceptor(acceptor).run(app));
    tokio::spawn(worker(c.clone()));
    c
}

fn broken() -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, "broken").into_response()
}

fn node<'a>(wf: &'a Value, class: &str) -> Option<&'a Value> {
    wf.as_object()?
        .values()
        .find(|n| n["class_type"] == class)
        .map(|n| &n["inputs"])
}

/// ComfyUI's validation: the answer real servers give for a bad graph.
fn validate(wf: &Value, uploads: &HashMap<String, Vec<u8>>) -> Result<(), Value> {
    let bad = |node: &str, msg: &str| {
        json!({
            "error": {"type": "prompt_outputs_failed_validation", "message": "Prompt outputs failed validation", "details": "", "extra_info": {}},
            "node_errors": {node: {"errors": [{"type": "value_not_in_list", "message": msg, "details": msg, "extra_info": {}}], "dependent_outputs": ["9"], "class_type": "?"}}
        })
    };
    let ks = node(wf, "KSampler").ok_or_else(|| bad("3", "no KSampler"))?;
    for k in ["seed", "steps"] {
        if !ks[k].is_u64() {
            return Err(bad("3", &format!("{k} is not an integer: {}", ks[k])));
        }
    }
    if !ks["cfg"].is_number() || !ks["denoise"].is_number() {
        return Err(bad("3", "cfg/denoise are not numbers"));
    }
    let ckpt = node(wf, "CheckpointLoaderSimple").ok_or_else(|| bad("4", "no loader"))?;
    if ckpt["ckpt_name"] != CKPT {
        return Err(bad(
            "4",
            &format!(
                "Value not in list: ckpt_name: '{}' not in ['{CKPT}']",
                ckpt["ckpt_name"]
            ),
        ));
    }
    if let Some(load) = node(wf, "LoadImage") {
        let name = load["image"].as_str().unwrap_or("");
        if !uploads.contains_key(name) {
            return Err(bad("10", &format!("Invalid image file: {name}")));
        }
    } else {
        let latent = node(wf, "EmptyLatentImage").ok_or_else(|| bad("5", "no latent"))?;
        for k in ["width", "height"] {
            if latent[k].as_u64().is_none_or(|v| v % 8 != 0) {
                return Err(bad("5", &format!("{k} must be a multiple of 8")));
            }
        }
    }
    if node(wf, "SaveImage").is_none() {
        return Err(
            json!({"error": {"type": "prompt_no_outputs", "message": "Prompt has no outputs", "details": "", "extra_info": {}}, "node_errors": {}}),
        );
    }
    Ok(())
}

#[handler]
async fn prompt(Json(body): Json<Value>, c: Data<&Comfy>) -> Response {
    if !c.healthy.load(Ordering::SeqCst) {
        return broken();
    }
    let wf = body["prompt"].clone();
    let client = body["client_id"].as_str().unwrap_or("").to_owned();
    let mut inner = c.inner.lock().unwrap();
    if let Err(e) = validate(&wf, &inner.uploads) {
        return (StatusCode::BAD_REQUEST, Json(e)).into_response();
    }
    let id = format!(
        "{:08x}-0000-4000-8000-{:012x}",
        inner.seen.len(),
        rand_u64() & 0xFFFF_FFFF_FFFF
    );
    inner.seen.push(wf.clone());
    let number = inner.seen.len();
    inner.queue.push(Queued {
        id: id.clone(),
        client,
        workflow: wf,
    });
    drop(inner);
    c.wake.notify_one();
    Json(json!({"prompt_id": id, "number": number, "node_errors": {}})).into_response()
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(7);
    h.finish()
}

#[handler]
async fn ws(ws: WebSocket, Query(q): Query<HashMap<String, String>>, c: Data<&Comfy>) -> Response {
    if c.no_ws {
        return (StatusCode::NOT_FOUND, "404: Not Found").into_response();
    }
    let client = q.get("clientId").cloned().unwrap_or_default();
    let c = c.clone();
    ws.on_upgrade(move |socket| async move {
        let (mut sink, mut stream) = socket.split();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let queue_remaining = c.inner.lock().unwrap().queue.len();
        let _ = tx.send(json!({"type": "status", "data": {"status": {"exec_info": {"queue_remaining": queue_remaining}}, "sid": client}}).to_string());
        c.inner.lock().unwrap().sockets.insert(client.clone(), tx);
        loop {
            tokio::select! {
                out = rx.recv() => match out {
                    Some(text) => if sink.send(Message::Text(text)).await.is_err() { break },
                    None => break,
                },
                inc = stream.next() => if inc.is_none() { break },
            }
        }
        c.inner.lock().unwrap().sockets.remove(&client);
    })
    .into_response()
}

fn png(w: u32, h: u32, seed: u64) -> Vec<u8> {
    let img = image::RgbaImage::from_pixel(w, h, image::Rgba([(seed % 251) as u8, 90, 200, 255]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

/// Runs queued prompts one at a time, as ComfyUI's executor does.
async fn worker(c: Comfy) {
    loop {
        let next = {
            let mut inner = c.inner.lock().unwrap();
            if inner.queue.is_empty() {
                None
            } else {
                let job = inner.queue.remove(0);
                inner.running = Some(job.clone());
                Some(job)
            }
        };
        let Some(job) = next else {
            c.wake.notified().await;
            continue;
        };
        c.interrupt.store(false, Ordering::SeqCst);
        let pid = job.id.clone();
        let wf = &job.workflow;
        let ks = node(wf, "KSampler").unwrap().clone();
        let steps = ks["steps"].as_u64().unwrap();
        c.send(
            &job.client,
            json!({"type": "execution_start", "data": {"prompt_id": pid, "timestamp": 0}}),
        );
        c.send(&job.client, json!({"type": "execution_cached", "data": {"nodes": [], "prompt_id": pid, "timestamp": 0}}));
        c.send(&job.client, json!({"type": "executing", "data": {"node": "3", "display_node": "3", "prompt_id": pid}}));
        let mut outcome = "success";
        for i in 1..=steps {
            tokio::time::sleep(Duration::from_millis(c.step_ms)).await;
            if c.interrupt.swap(false, Ordering::SeqCst) {
                outcome = "interrupted";
                break;
            }
            if c.fail_with.is_some() && i == steps / 2 {
                outcome = "error";
                break;
            }
            c.send(&job.client, json!({"type": "progress", "data": {"value": i, "max": steps, "prompt_id": pid, "node": "3"}}));
        }
        let status = match outcome {
            "success" => {
                let (w, h) = match node(wf, "LoadImage") {
                    Some(load) => {
                        let inner = c.inner.lock().unwrap();
                        let bytes = &inner.uploads[load["image"].as_str().unwrap()];
                        image::load_from_memory(bytes)
                            .unwrap()
                            .to_rgba8()
                            .dimensions()
                    }
                    None => {
                        let l = node(wf, "EmptyLatentImage").unwrap();
                        (
                            l["width"].as_u64().unwrap() as u32,
                            l["height"].as_u64().unwrap() as u32,
                        )
                    }
                };
                let filename = format!(
                    "pictor_{:05}_.png",
                    c.served.fetch_add(1, Ordering::SeqCst) + 1
                );
                c.inner
                    .lock()
                    .unwrap()
                    .files
                    .insert(filename.clone(), png(w, h, ks["seed"].as_u64().unwrap()));
                let images = json!([{"filename": filename, "subfolder": "", "type": "output"}]);
                c.send(&job.client, json!({"type": "executing", "data": {"node": "9", "display_node": "9", "prompt_id": pid}}));
                c.send(&job.client, json!({"type": "executed", "data": {"node": "9", "display_node": "9", "output": {"images": images}, "prompt_id": pid}}));
                c.send(
                    &job.client,
                    json!({"type": "executing", "data": {"node": null, "prompt_id": pid}}),
                );
                c.send(&job.client, json!({"type": "execution_success", "data": {"prompt_id": pid, "timestamp": 0}}));
                // Real ComfyUI writes the history entry a little after these messages.
                tokio::time::sleep(Duration::from_millis(60)).await;
                c.inner.lock().unwrap().history.insert(pid.clone(), json!({
                    "prompt": [1, pid, wf, {}, ["9"]],
                    "outputs": {"9": {"images": images}},
                    "status": {"status_str": "success", "completed": true, "messages": [["execution_start", {"prompt_id": pid}], ["execution_success", {"prompt_id": pid}]]},
                    "meta": {}
                }));
                json!(null)
            }
            "interrupted" => {
                let msg = json!({"prompt_id": pid, "node_id": "3", "node_type": "KSampler", "executed": []});
                c.send(
                    &job.client,
                    json!({"type": "execution_interrupted", "data": msg}),
                );
                json!({"status_str": "error", "completed": false, "messages": [["execution_interrupted", msg]]})
            }
            _ => {
                let msg = json!({"prompt_id": pid, "node_id": "3", "node_type": "KSampler", "exception_message": c.fail_with.clone().unwrap(), "exception_type": "RuntimeError", "traceback": []});
                c.send(&job.client, json!({"type": "execution_error", "data": msg}));
                json!({"status_str": "error", "completed": false, "messages": [["execution_error", msg]]})
            }
        };
        let mut inner = c.inner.lock().unwrap();
        if !status.is_null() {
            inner.history.insert(pid.clone(), json!({"prompt": [1, pid, wf, {}, ["9"]], "outputs": {}, "status": status, "meta": {}}));
        }
        inner.running = None;
    }
}

#[handler]
async fn history(Path(id): Path<String>, c: Data<&Comfy>) -> Response {
    if !c.healthy.load(Ordering::SeqCst) {
        return broken();
    }
    let inner = c.inner.lock().unwrap();
    match inner.history.get(&id) {
        Some(h) => Json(json!({ id: h })).into_response(),
        None => Json(json!({})).into_response(),
    }
}

#[handler]
async fn view(Query(q): Query<HashMap<String, String>>, c: Data<&Comfy>) -> Response {
    let inner = c.inner.lock().unwrap();
    match (
        q.get("type").map(String::as_str),
        inner
            .files
            .get(q.get("filename").map_or("", String::as_str)),
    ) {
        (Some("output"), Some(bytes)) if q.get("subfolder").is_some_and(String::is_empty) => {
            Response::builder()
                .content_type("image/png")
                .body(bytes.clone())
        }
        _ => (StatusCode::NOT_FOUND, "404: Not Found").into_response(),
    }
}

#[handler]
async fn upload(mut form: Multipart, c: Data<&Comfy>) -> Response {
    let mut name = None;
    let mut bytes = None;
    let mut kind = None;
    while let Ok(Some(field)) = form.next_field().await {
        match field.name() {
            Some("image") => {
                name = field.file_name().map(str::to_owned);
                bytes = Some(field.bytes().await.unwrap());
            }
            Some("type") => kind = Some(field.text().await.unwrap()),
            _ => {}
        }
    }
    let (Some(name), Some(bytes)) = (name, bytes) else {
        return (StatusCode::BAD_REQUEST, "no image").into_response();
    };
    assert_eq!(kind.as_deref(), Some("input"));
    c.inner.lock().unwrap().uploads.insert(name.clone(), bytes);
    Json(json!({"name": name, "subfolder": "", "type": "input"})).into_response()
}

#[handler]
async fn queue_get(c: Data<&Comfy>) -> Json<Value> {
    let inner = c.inner.lock().unwrap();
    let item = |q: &Queued| json!([0, q.id, q.workflow, {"client_id": q.client}, ["9"]]);
    Json(json!({
        "queue_running": inner.running.iter().map(item).collect::<Vec<_>>(),
        "queue_pending": inner.queue.iter().map(item).collect::<Vec<_>>(),
    }))
}

#[handler]
async fn queue_post(Json(body): Json<Value>, c: Data<&Comfy>) -> Json<Value> {
    let mut inner = c.inner.lock().unwrap();
    for id in body["delete"].as_array().into_iter().flatten() {
        let id = id.as_str().unwrap_or("").to_owned();
        inner.queue.retain(|q| q.id != id);
        inner.deleted.push(id);
    }
    Json(json!({}))
}

#[handler]
async fn interrupt(body: Option<Json<Value>>, c: Data<&Comfy>) -> Json<Value> {
    c.interrupts.fetch_add(1, Ordering::SeqCst);
    let running = c
        .inner
        .lock()
        .unwrap()
        .running
        .as_ref()
        .map(|q| q.id.clone());
    let wanted = body.and_then(|b| b.0["prompt_id"].as_str().map(str::to_owned));
    // Newer ComfyUI interrupts only the named prompt.
    if wanted.is_none() || wanted == running {
        c.interrupt.store(true, Ordering::SeqCst);
    }
    Json(json!({}))
}

#[handler]
async fn system_stats(c: Data<&Comfy>) -> Response {
    if !c.healthy.load(Ordering::SeqCst) {
        return broken();
    }
    Json(json!({"system": {"os": "posix", "comfyui_version": "0.3.40"}, "devices": []}))
        .into_response()
}

fn comfy_router(toml: &str) -> Arc<Router> {
    Arc::new(Router::new(
        parse_backends_toml(toml).unwrap(),
        Arc::new(ProceduralRenderer),
    ))
}

fn spec(text: &str, seed: u64) -> GenerateSpec {
    GenerateSpec {
        prompt: text.into(),
        model: Model::Fast,
        ratio: Ratio::Wide,
        seed,
        noise: None,
        loras: Vec::new(),
    }
}

/// Renders on a blocking thread, recording every progress value the job saw.
async fn render(
    r: Arc<Router>,
    spec: GenerateSpec,
    control: RenderControl,
) -> Result<image::RgbaImage, RenderError> {
    tokio::task::spawn_blocking(move || {
        r.generate_with(&spec, &control)
            .map(|p| p.as_rgba().clone())
    })
    .await
    .unwrap()
}

fn watched() -> (RenderControl, Arc<Mutex<Vec<f64>>>) {
    let seen: Arc<Mutex<Vec<f64>>> = Arc::default();
    let s = seen.clone();
    let control = RenderControl::observed(Box::new(move |p| s.lock().unwrap().push(p)));
    (control, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comfyui_txt2img_follows_websocket_progress() {
    let c = fake_comfy(15, false, None).await;
    let r = comfy_router(&format!(
        "[models.fast]\nkind = \"comfyui\"\nurl = \"{}\"\nmodel = \"{CKPT}\"\nsteps = 12\nnegative_prompt = \"blurry\"\n",
        c.url
    ));
    assert_eq!(r.engine(Model::Fast), "comfyui");
    let (control, seen) = watched();
    let img = render(r, spec("a red fox in snow", 4_000_000_123), control)
        .await
        .unwrap();
    // The exact size of the job, from a 1024x576 latent (576 is a multiple of 8).
    assert_eq!(img.dimensions(), Model::Fast.dimensions(Ratio::Wide));
    assert_eq!(
        img.get_pixel(10, 10).0,
        [(4_000_000_123u64 % 251) as u8, 90, 200, 255]
    );
    let wf = &c.seen()[0];
    assert_eq!(node(wf, "KSampler").unwrap()["seed"], 4_000_000_123u64);
    assert_eq!(node(wf, "KSampler").unwrap()["steps"], 12);
    assert_eq!(node(wf, "EmptyLatentImage").unwrap()["width"], 1024);
    assert_eq!(node(wf, "EmptyLatentImage").unwrap()["height"], 576);
    let texts: Vec<&Value> = wf
        .as_object()
        .unwrap()
        .values()
        .filter(|n| n["class_type"] == "CLIPTextEncode")
        .map(|n| &n["inputs"]["text"])
        .collect();
    assert!(texts.contains(&&json!("a red fox in snow")) && texts.contains(&&json!("blurry")));
    // Progress came from the WebSocket's step events: rising, one per step.
    let seen = seen.lock().unwrap().clone();
    let steps: Vec<f64> = seen
        .iter()
        .copied()
        .filter(|p| *p > 0.05 && *p < 0.96)
        .collect();
    assert!(steps.len() >= 10, "{seen:?}");
    assert!(steps.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comfyui_without_websocket_polls_history() {
    let c = fake_comfy(5, true, None).await;
    let r = comfy_router(&format!(
        "[models.fast]\nkind = \"comfyui\"\nurl = \"{}/\"\nmodel = \"{CKPT}\"\n",
        c.url
    ));
    let img = render(r, spec("a lighthouse", 7), RenderControl::default())
        .await
        .unwrap();
    assert_eq!(img.dimensions(), Model::Fast.dimensions(Ratio::Wide));
    assert_eq!(
        node(&c.seen()[0], "KSampler").unwrap()["steps"],
        20,
        "default steps"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comfyui_img2img_uploads_the_source() {
    let c = fake_comfy(5, false, None).await;
    let r = comfy_router(&format!(
        "[edit]\nkind = \"comfyui\"\nurl = \"{}\"\nmodel = \"{CKPT}\"\ndenoising_strength = 0.4\n",
        c.url
    ));
    let spec = EditSpec {
        source: png_bytes(320, 200),
        instruction: "make it autumn".into(),
        seed: 99,
        mask: None,
        loras: Vec::new(),
    };
    let img = tokio::task::spawn_blocking(move || r.edit(&spec).map(|p| p.as_rgba().clone()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(img.dimensions(), (320, 200));
    let wf = &c.seen()[0];
    let name = node(wf, "LoadImage").unwrap()["image"]
        .as_str()
        .unwrap()
        .to_owned();
    let uploaded = c.inner.lock().unwrap().uploads[&name].clone();
    assert_eq!(
        image::load_from_memory(&uploaded)
            .unwrap()
            .to_rgba8()
            .dimensions(),
        (320, 200)
    );
    assert_eq!(
        node(wf, "KSampler").unwrap()["denoise"].as_f64().unwrap(),
        0.4f32 as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comfyui_operator_workflow_placeholders() {
    let c = fake_comfy(5, false, None).await;
    let dir = tempfile::tempdir().unwrap();
    let mut wf: Value = serde_json::from_str(pictor::render::backends::comfyui::TXT2IMG).unwrap();
    wf["6"]["inputs"]["text"] = json!("masterpiece, {{prompt}}, best quality");
    wf["3"]["inputs"]["sampler_name"] = json!("dpmpp_2m");
    wf["3"]["inputs"]["cfg"] = json!(5.5);
    wf["4"]["inputs"]["ckpt_name"] = json!(CKPT);
    let path = dir.path().join("wf.json");
    std::fs::write(&path, wf.to_string()).unwrap();
    let r = comfy_router(&format!(
        "[models.fast]\nkind = \"comfyui\"\nurl = \"{}\"\nworkflow = \"{}\"\n",
        c.url,
        path.display()
    ));
    render(r, spec("a \"quoted\" cat", 3), RenderControl::default())
        .await
        .unwrap();
    let sent = &c.seen()[0];
    assert_eq!(
        sent["6"]["inputs"]["text"],
        "masterpiece, a \"quoted\" cat, best quality"
    );
    assert_eq!(sent["3"]["inputs"]["sampler_name"], "dpmpp_2m");
    assert_eq!(sent["3"]["inputs"]["cfg"], 5.5);
    assert_eq!(sent["3"]["inputs"]["seed"], 3);

    // Files that are not API-format workflows, or edits without an image input, are refused.
    std::fs::write(&path, r#"{"nodes": [], "links": []}"#).unwrap();
    let err = parse_backends_toml(&format!(
        "[models.fast]\nkind = \"comfyui\"\nurl = \"{}\"\nworkflow = \"{}\"\n",
        c.url,
        path.display()
    ))
    .unwrap_err();
    assert!(err.contains("API"), "{err}");
    std::fs::write(&path, wf.to_string()).unwrap();
    let err = parse_backends_toml(&format!(
        "[edit]\nkind = \"comfyui\"\nurl = \"{}\"\nworkflow = \"{}\"\n",
        c.url,
        path.display()
    ))
    .unwrap_err();
    assert!(err.contains("{{image}}"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comfyui_errors_fail_the_render_with_the_servers_message() {
    let c = fake_comfy(5, false, Some("CUDA out of memory")).await;
    let r = comfy_router(&format!(
        "[models.fast]\nkind = \"comfyui\"\nurl = \"{}\"\nmodel = \"{CKPT}\"\n",
        c.url
    ));
    let err = render(r, spec("x", 1), RenderControl::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RenderError::Failed(m) if m.contains("CUDA out of memory") && m.contains("KSampler")),
        "{err:?}"
    );

    // A checkpoint the server does not have: ComfyUI's 400 validation answer.
    let c = fake_comfy(5, false, None).await;
    let r = comfy_router(&format!(
        "[models.fast]\nkind = \"comfyui\"\nurl = \"{}\"\nmodel = \"sdxl.safetensors\"\n",
        c.url
    ));
    let err = render(r, spec("x", 1), RenderControl::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RenderError::Failed(m) if m.contains("400") && m.contains("ckpt_name")),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn comfyui_cancel_interrupts_a_running_prompt_and_deletes_a_queued_one() {
    let c = fake_comfy(100, false, None).await;
    let r = comfy_router(&format!(
        "[models.fast]\nkind = \"comfyui\"\nurl = \"{}\"\nmodel = \"{CKPT}\"\n",
        c.url
    ));
    // Running: the prompt is interrupted on the server.
    let (control, _) = watched();
    let job = tokio::spawn(render(r.clone(), spec("slow", 1), control.clone()));
    for _ in 0..100 {
        if c.inner.lock().unwrap().running.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    control.cancel();
    assert!(matches!(job.await.unwrap(), Err(RenderError::Cancelled)));
    // Stopped by the server's interrupt (not by a clock: the render's length is not asserted).
    assert_eq!(c.interrupts.load(Ordering::SeqCst), 1);
    for _ in 0..100 {
        if c.inner.lock().unwrap().running.is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        c.inner.lock().unwrap().running.is_none(),
        "the server stopped it"
    );

    // Queued behind someone else's prompt: deleted from the queue, the other one untouched.
    let other = tokio::spawn(render(
        r.clone(),
        spec("theirs", 2),
        RenderControl::default(),
    ));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (control, _) = watched();
    let mine = tokio::spawn(render(r.clone(), spec("mine", 3), control.clone()));
    for _ in 0..100 {
        if !c.inner.lock().unwrap().queue.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    control.cancel();
    assert!(matches!(mine.await.unwrap(), Err(RenderError::Cancelled)));
    // Deleted from the queue (the running one was deleted too, harmlessly, then interrupted).
    assert_eq!(c.inner.lock().unwrap().deleted.len(), 2);
    assert_eq!(
        c.interrupts.load(Ordering::SeqCst),
        1,
        "no interrupt of the other prompt"
    );
    assert!(other.await.unwrap().is_ok());
}

// ---- pools ----

fn pool_toml(urls: &[&str], extra: &str) -> String {
    let list: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
    format!(
        "[models.fast]\nkind = \"comfyui\"\nurls = [{}]\nmodel = \"{CKPT}\"\ntimeout_secs = 20\n{extra}",
        list.join(", ")
    )
}

/// A URL nothing listens on.
async fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_spreads_work_to_the_least_busy_endpoint() {
    let a = fake_comfy(60, false, None).await;
    let b = fake_comfy(60, false, None).await;
    let r = comfy_router(&pool_toml(&[&a.url, &b.url], ""));
    let jobs: Vec<_> = (0..4)
        .map(|i| tokio::spawn(render(r.clone(), spec("x", i), RenderControl::default())))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = r.backends_status();
    assert_eq!(
        status.iter().map(|s| s.in_flight).sum::<usize>(),
        4,
        "{status:?}"
    );
    assert_eq!(status[0].in_flight, 2, "{status:?}");
    for j in jobs {
        j.await.unwrap().unwrap();
    }
    assert_eq!((a.seen().len(), b.seen().len()), (2, 2));
    let status = r.backends_status();
    assert!(
        status
            .iter()
            .all(|s| s.up && s.requests_ok == 2 && s.latency_ms.is_some())
    );
    assert_eq!(status[0].serves, ["fast"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_fails_over_marks_down_and_probes_back() {
    let dead = dead_url().await;
    let a = fake_comfy(5, false, None).await;
    let r = comfy_router(&pool_toml(&[&dead, &a.url], "probe_secs = 1\n"));
    // The first pick is the dead one (same load, listed first): the job moves on to `a`.
    render(r.clone(), spec("x", 1), RenderControl::default())
        .await
        .unwrap();
    let s = r.backends_status();
    assert!(
        !s[0].up && s[0].requests_failed == 1 && s[0].last_error.is_some(),
        "{s:?}"
    );
    assert!(s[1].up && s[1].requests_ok == 1);
    // While down it gets no work.
    render(r.clone(), spec("x", 2), RenderControl::default())
        .await
        .unwrap();
    assert_eq!(r.backends_status()[0].requests_failed, 1);

    // A broken server (500s) goes down too, and comes back after a good probe.
    a.healthy.store(false, Ordering::SeqCst);
    let err = render(r.clone(), spec("x", 3), RenderControl::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RenderError::Failed(m) if m.contains("pool")),
        "{err:?}"
    );
    assert!(r.backends_status().iter().all(|s| !s.up));
    let err = render(r.clone(), spec("x", 4), RenderControl::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RenderError::Failed(m) if m.contains("down")),
        "{err:?}"
    );
    a.healthy.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    render(r.clone(), spec("x", 5), RenderControl::default())
        .await
        .unwrap();
    let s = r.backends_status();
    assert!(s[1].up, "{s:?}");
    assert!(!s[0].up, "the dead one failed its probe: {s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recovered_endpoint_rejoins_while_its_peer_carries_the_load() {
    let b = fake_comfy(5, false, None).await;
    let a = fake_comfy(5, false, None).await;
    b.healthy.store(false, Ordering::SeqCst);
    let r = comfy_router(&pool_toml(&[&b.url, &a.url], "probe_secs = 1\n"));
    render(r.clone(), spec("x", 1), RenderControl::default())
        .await
        .unwrap();
    assert!(!r.backends_status()[0].up);
    render(r.clone(), spec("x", 2), RenderControl::default())
        .await
        .unwrap();
    assert_eq!(a.seen().len(), 2, "b rests");
    b.healthy.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Its rest is over: probed (good), up again, and as idle as `a` with no slower record.
    render(r.clone(), spec("x", 3), RenderControl::default())
        .await
        .unwrap();
    let s = r.backends_status();
    assert!(s[0].up && s[1].up, "{s:?}");
    assert_eq!(b.seen().len(), 1, "b took work again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_failover_in_the_real_binary_with_status_in_the_cli_and_metrics() {
    let dead = dead_url().await;
    let a = fake_comfy(5, false, None).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let config = d.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[backends.fast]\nkind = \"comfyui\"\nurls = [\"{dead}\", \"{}\"]\nmodel = \"{CKPT}\"\n",
            a.url
        ),
    )
    .unwrap();
    let key = cli_user_key(d, "p@example.com", 10);
    let cfg = config.display().to_string();
    let server = spawn_server(d, &[("PICTOR_CONFIG", cfg.as_str())]);
    let client = reqwest::Client::new();
    let (st, c) = server
        .generate(
            &key,
            json!({"prompt": "a harbour", "model": "fast", "ratio": "3:2"}),
        )
        .await;
    assert_eq!(st, 202, "{c}");
    let id = c["job_id"].as_str().unwrap();
    let (_, job) = server
        .get(&key, &format!("/api/pictor/v1/jobs/{id}?wait=60"))
        .await;
    assert_eq!(job["status"], "done", "{job}");
    assert_eq!(job["balance"], 9, "charged once despite the failover");
    let png = client
        .get(job["photo_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let img = image::load_from_memory(&png).unwrap();
    assert_eq!(
        (img.width(), img.height()),
        Model::Fast.dimensions(Ratio::parse("3:2").unwrap())
    );

    let (code, out, err) = run_cli(d, &["backends", "status", "--json"], None);
    assert_eq!(code, 0, "{err}");
    let status: Value = serde_json::from_str(out.trim()).unwrap();
    let list = status.as_array().unwrap();
    assert_eq!(list.len(), 2, "{status}");
    assert_eq!(list[0]["up"], false);
    assert_eq!(list[1]["up"], true);
    assert_eq!(list[1]["requests_ok"], 1);
    assert_eq!(list[1]["kind"], "comfyui");
    let (code, text, _) = run_cli(d, &["backends", "status"], None);
    assert_eq!(code, 0);
    assert!(text.contains("down (") && text.contains(&a.url), "{text}");

    // The admin channel's /metrics.
    let admin: Value =
        serde_json::from_slice(&std::fs::read(d.join("admin.json")).unwrap()).unwrap();
    let metrics = client
        .get(format!("{}/metrics", admin["url"].as_str().unwrap()))
        .bearer_auth(admin["token"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "pictor_backend_up{{endpoint=\"{}\",kind=\"comfyui\"}} 1",
            a.url
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "pictor_backend_up{{endpoint=\"{dead}\",kind=\"comfyui\"}} 0"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("pictor_backend_requests{"), "{metrics}");
    // Nothing in flight once the jobs are done; the endpoint that served has a latency.
    assert!(
        metrics.contains(&format!(
            "pictor_backend_in_flight{{endpoint=\"{}\",kind=\"comfyui\"}} 0",
            a.url
        )),
        "{metrics}"
    );
    let latency: f64 = metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!(
                "pictor_backend_latency_seconds{{endpoint=\"{}\",kind=\"comfyui\"}} ",
                a.url
            ))
        })
        .unwrap_or_else(|| panic!("no latency for {}: {metrics}", a.url))
        .parse()
        .unwrap();
    assert!(latency > 0.0 && latency < 60.0, "latency {latency}");
    drop(server);

    // Without a running server the command says so.
    let (code, _, err) = run_cli(d, &["backends", "status"], None);
    assert_ne!(code, 0);
    assert!(err.contains("not running"), "{err}");
}
