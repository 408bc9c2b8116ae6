//! Model backends against in-process fake servers that speak each protocol for real: the
//! OpenAI-compatible images API (JSON generations, multipart edits) and AUTOMATIC1111/Forge
//! (txt2img, img2img). Success, failure (500), overload (429, 503, queue full), timeout, retry,
//! exact output size, and the configuration parser.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use pictor::render::backends::{Router, parse_backends_toml};
use pictor::render::{
    EditSpec, GenerateSpec, Model, Picture, ProceduralRenderer, Ratio, RenderControl, RenderError,
    Renderer,
};
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::web::{Data, Json, Multipart};
use poem::{EndpointExt, IntoResponse, Response, Route, Server, handler, http::StatusCode, post};
use serde_json::{Value, json};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Ok,
    Fail500,
    Busy429,
    Busy503,
    QueueFull,
    Slow,
    /// Fails once with 500, then succeeds.
    Flaky,
    /// Renders 16 steps of 50 ms, reporting them on `/sdapi/v1/progress` and stopping early on
    /// `/sdapi/v1/interrupt`, as A1111 does.
    Steps,
}

#[derive(Clone)]
struct State {
    mode: Mode,
    hits: Arc<AtomicUsize>,
    seen: Arc<std::sync::Mutex<Vec<Value>>>,
    /// Steps done by the render in progress (Mode::Steps).
    step: Arc<AtomicUsize>,
    interrupts: Arc<AtomicUsize>,
}

const STEPS: usize = 16;

/// A 300x200 PNG (deliberately not the size asked for), base64.
fn fake_image() -> String {
    let img = image::RgbaImage::from_fn(300, 200, |x, y| {
        image::Rgba([(x % 256) as u8, (y % 256) as u8, 120, 255])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    base64::engine::general_purpose::STANDARD.encode(out.into_inner())
}

async fn answer(state: &State, ok: Value) -> Response {
    let n = state.hits.fetch_add(1, Ordering::SeqCst);
    match state.mode {
        Mode::Ok => Json(ok).into_response(),
        Mode::Flaky if n > 0 => Json(ok).into_response(),
        Mode::Flaky | Mode::Fail500 => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        Mode::Busy429 => (StatusCode::TOO_MANY_REQUESTS, "slow down").into_response(),
        Mode::Busy503 => (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response(),
        Mode::QueueFull => (
            StatusCode::BAD_REQUEST,
            Json(json!({"detail": "Queue is full, try again later"})),
        )
            .into_response(),
        Mode::Slow => {
            // Far beyond the client's 1 s timeout, so a client that waited it out is plain.
            tokio::time::sleep(Duration::from_secs(120)).await;
            Json(ok).into_response()
        }
        Mode::Steps => {
            state.step.store(0, Ordering::SeqCst);
            for i in 1..=STEPS {
                if state.interrupts.load(Ordering::SeqCst) > 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                state.step.store(i, Ordering::SeqCst);
            }
            Json(ok).into_response()
        }
    }
}

/// A1111's `GET /sdapi/v1/progress`: the running job's fraction done.
#[handler]
async fn progress(state: Data<&State>) -> Json<Value> {
    let step = state.step.load(Ordering::SeqCst);
    Json(json!({
        "progress": step as f64 / STEPS as f64,
        "eta_relative": 0.0,
        "state": {"sampling_step": step, "sampling_steps": STEPS, "interrupted": false},
        "current_image": null,
        "textinfo": null
    }))
}

/// A1111's `POST /sdapi/v1/interrupt`.
#[handler]
async fn interrupt(state: Data<&State>) -> Json<Value> {
    state.interrupts.fetch_add(1, Ordering::SeqCst);
    Json(json!({}))
}

#[handler]
async fn generations(Json(body): Json<Value>, state: Data<&State>) -> Response {
    assert_eq!(body["response_format"], "b64_json");
    assert!(body["prompt"].is_string());
    state.seen.lock().unwrap().push(body);
    answer(
        &state,
        json!({"created": 1, "data": [{"b64_json": fake_image()}]}),
    )
    .await
}

#[handler]
async fn edits(mut form: Multipart, state: Data<&State>) -> Response {
    let mut fields = serde_json::Map::new();
    while let Some(field) = form.next_field().await.unwrap() {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "image" {
            let bytes = field.bytes().await.unwrap();
            assert!(bytes.starts_with(b"\x89PNG"), "image part is a PNG");
            fields.insert(name, json!(bytes.len()));
        } else {
            fields.insert(name, json!(field.text().await.unwrap()));
        }
    }
    assert!(fields.contains_key("image") && fields.contains_key("prompt"));
    state.seen.lock().unwrap().push(Value::Object(fields));
    answer(&state, json!({"data": [{"b64_json": fake_image()}]})).await
}

#[handler]
async fn txt2img(Json(body): Json<Value>, state: Data<&State>) -> Response {
    assert_eq!(body["width"].as_u64().unwrap() % 8, 0);
    state.seen.lock().unwrap().push(body);
    answer(&state, json!({"images": [fake_image()], "info": "{}"})).await
}

#[handler]
async fn img2img(Json(body): Json<Value>, state: Data<&State>) -> Response {
    assert!(body["init_images"][0].is_string());
    state.seen.lock().unwrap().push(body);
    answer(&state, json!({"images": [fake_image()]})).await
}

struct Fake {
    url: String,
    state: State,
}

async fn fake(mode: Mode) -> Fake {
    let state = State {
        mode,
        hits: Arc::new(AtomicUsize::new(0)),
        seen: Arc::new(std::sync::Mutex::new(Vec::new())),
        step: Arc::new(AtomicUsize::new(0)),
        interrupts: Arc::new(AtomicUsize::new(0)),
    };
    let app = Route::new()
        .at("/v1/images/generations", post(generations))
        .at("/v1/images/edits", post(edits))
        .at("/sdapi/v1/txt2img", post(txt2img))
        .at("/sdapi/v1/img2img", post(img2img))
        .at("/sdapi/v1/progress", poem::get(progress))
        .at("/sdapi/v1/interrupt", post(interrupt))
        .data(state.clone());
    let acceptor = TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .unwrap();
    let addr = *acceptor.local_addr()[0].as_socket_addr().unwrap();
    tokio::spawn(Server::new_with_acceptor(acceptor).run(app));
    Fake {
        url: format!("http://{addr}"),
        state,
    }
}

fn router(kind: &str, url: &str, extra: &str) -> Router {
    let toml = format!(
        "[models.artist]\nkind = \"{kind}\"\nurl = \"{url}\"\nmodel = \"remote-model\"\nretries = 1\nbackoff_ms = 10\ntimeout_secs = 1\n{extra}\n\n[edit]\nkind = \"{kind}\"\nurl = \"{url}\"\nretries = 1\nbackoff_ms = 10\ntimeout_secs = 1\n"
    );
    let config = parse_backends_toml(&toml).unwrap();
    Router::new(config, Arc::new(ProceduralRenderer))
}

fn spec(model: Model) -> GenerateSpec {
    GenerateSpec {
        noise: None,
        loras: Vec::new(),
        prompt: "a lighthouse".into(),
        model,
        ratio: Ratio::Wide,
        seed: 5,
    }
}

fn source_png() -> Vec<u8> {
    let img = image::RgbaImage::from_pixel(64, 48, image::Rgba([10, 200, 30, 255]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

async fn generate(r: Arc<Router>, model: Model) -> Result<Picture, RenderError> {
    tokio::task::spawn_blocking(move || r.generate(&spec(model)))
        .await
        .unwrap()
}

async fn edit(r: Arc<Router>) -> Result<Picture, RenderError> {
    tokio::task::spawn_blocking(move || {
        r.edit(&EditSpec {
            source: source_png(),
            instruction: "make it a watercolor".into(),
            seed: 2,
            mask: None,
            loras: Vec::new(),
        })
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_success_has_the_exact_size() {
    let f = fake(Mode::Ok).await;
    let r = Arc::new(router("openai", &f.url, ""));
    let pic = generate(r.clone(), Model::Artist).await.unwrap();
    assert_eq!(
        (pic.width(), pic.height()),
        Model::Artist.dimensions(Ratio::Wide)
    );
    let seen = f.state.seen.lock().unwrap().clone();
    assert_eq!(seen[0]["model"], "remote-model");
    assert_eq!(seen[0]["size"], "1536x864");
    // Other models still use the built-in renderer.
    assert!(!r.is_remote(Model::Fast));
    let local = generate(r.clone(), Model::Fast).await.unwrap();
    assert_eq!((local.width(), local.height()), (1024, 576));
    assert_eq!(f.state.hits.load(Ordering::SeqCst), 1);
    // Edits: multipart with the image and the instruction; the result keeps the source size.
    let pic = edit(r).await.unwrap();
    assert_eq!((pic.width(), pic.height()), (64, 48));
    let seen = f.state.seen.lock().unwrap().clone();
    assert_eq!(seen[1]["prompt"], "make it a watercolor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a1111_success_has_the_exact_size() {
    let f = fake(Mode::Ok).await;
    let r = Arc::new(router("a1111", &f.url, "steps = 12"));
    let pic = generate(r.clone(), Model::Artist).await.unwrap();
    assert_eq!((pic.width(), pic.height()), (1536, 864));
    let seen = f.state.seen.lock().unwrap().clone();
    assert_eq!(seen[0]["steps"], 12);
    assert_eq!(seen[0]["width"], 1536);
    assert_eq!(seen[0]["height"], 864);
    assert_eq!(
        seen[0]["override_settings"]["sd_model_checkpoint"],
        "remote-model"
    );
    let pic = edit(r).await.unwrap();
    assert_eq!((pic.width(), pic.height()), (64, 48));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried_then_fail() {
    for kind in ["openai", "a1111"] {
        let f = fake(Mode::Fail500).await;
        let r = Arc::new(router(kind, &f.url, ""));
        let err = generate(r.clone(), Model::Artist).await.unwrap_err();
        assert!(
            matches!(err, RenderError::Failed(ref m) if m.contains("500")),
            "{kind}: {err:?}"
        );
        // One try plus one retry.
        assert_eq!(f.state.hits.load(Ordering::SeqCst), 2, "{kind}");
        let err = edit(r).await.unwrap_err();
        assert!(matches!(err, RenderError::Failed(_)), "{kind}: {err:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_recovers_from_one_failure() {
    let f = fake(Mode::Flaky).await;
    let r = Arc::new(router("openai", &f.url, ""));
    assert!(generate(r, Model::Artist).await.is_ok());
    assert_eq!(f.state.hits.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_maps_to_overloaded() {
    for (kind, mode) in [
        ("openai", Mode::Busy429),
        ("openai", Mode::Busy503),
        ("a1111", Mode::Busy503),
        ("a1111", Mode::QueueFull),
    ] {
        let f = fake(mode).await;
        let r = Arc::new(router(kind, &f.url, ""));
        let err = generate(r.clone(), Model::Artist).await.unwrap_err();
        assert!(
            matches!(err, RenderError::Overloaded(_)),
            "{kind} {mode:?}: {err:?}"
        );
        let err = edit(r).await.unwrap_err();
        assert!(
            matches!(err, RenderError::Overloaded(_)),
            "{kind} {mode:?}: {err:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_server_times_out() {
    let f = fake(Mode::Slow).await;
    let r = Arc::new(router("a1111", &f.url, ""));
    let started = std::time::Instant::now();
    let err = generate(r, Model::Artist).await.unwrap_err();
    assert!(
        matches!(err, RenderError::Failed(ref m) if m.contains("within 1 s")),
        "{err:?}"
    );
    // Two attempts (retries = 1), each given up after its second, not the server's 120: the
    // bound is wide enough for a loaded machine and far below one waited-out answer.
    assert_eq!(f.state.hits.load(Ordering::SeqCst), 2, "two attempts");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a1111_progress_is_the_jobs_and_a_cancel_interrupts_it() {
    let f = fake(Mode::Steps).await;
    // A timeout far above the render's 0.8 s, so a busy machine cannot turn it into a retry.
    let toml = format!(
        "[models.artist]\nkind = \"a1111\"\nurl = \"{}\"\nretries = 0\ntimeout_secs = 30\n",
        f.url
    );
    let r = Arc::new(Router::new(
        parse_backends_toml(&toml).unwrap(),
        Arc::new(ProceduralRenderer),
    ));
    // Progress: read from /sdapi/v1/progress while the request runs, never going back.
    let control = RenderControl::default();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let watcher = {
        let (control, seen) = (control.clone(), seen.clone());
        tokio::spawn(async move {
            for _ in 0..200 {
                seen.lock().unwrap().push(control.progress());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let (r2, c2) = (r.clone(), control.clone());
    let picture = tokio::task::spawn_blocking(move || r2.generate_with(&spec(Model::Artist), &c2))
        .await
        .unwrap()
        .unwrap();
    watcher.abort();
    assert_eq!((picture.width(), picture.height()), (1536, 864));
    let seen = seen.lock().unwrap().clone();
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    let distinct: std::collections::BTreeSet<u64> = seen
        .iter()
        .filter(|p| **p > 0.0)
        .map(|p| (p * 1000.0) as u64)
        .collect();
    assert!(
        distinct.len() >= 2,
        "A1111's progress was followed: {seen:?}"
    );
    assert_eq!(f.state.interrupts.load(Ordering::SeqCst), 0);

    // Cancel: the call ends with `Cancelled` and A1111 is told to interrupt. (The step counter
    // still says 16 from the render above: start it again, so the cancel lands mid-render.)
    f.state.step.store(0, Ordering::SeqCst);
    let control = RenderControl::default();
    let c2 = control.clone();
    let call = tokio::task::spawn_blocking(move || r.generate_with(&spec(Model::Artist), &c2));
    for _ in 0..100 {
        if f.state.step.load(Ordering::SeqCst) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    control.cancel();
    let err = call.await.unwrap().unwrap_err();
    assert!(matches!(err, RenderError::Cancelled), "{err:?}");
    for _ in 0..100 {
        if f.state.interrupts.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        f.state.interrupts.load(Ordering::SeqCst),
        1,
        "interrupted once"
    );
    assert!(
        f.state.step.load(Ordering::SeqCst) < STEPS,
        "the server stopped its render"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_fails() {
    let r = Arc::new(router("openai", "http://127.0.0.1:9", ""));
    let err = generate(r, Model::Artist).await.unwrap_err();
    assert!(matches!(err, RenderError::Failed(_)), "{err:?}");
}

#[test]
fn config_parses_and_refuses_unknown_keys_by_name() {
    let c = parse_backends_toml(
        "[models.pro]\nkind = \"forge\"\nurl = \"http://gpu:7860\"\n\n[models.\"0.2plus\"]\nkind = \"openai\"\nurl = \"http://x:8000/v1\"\napi_key_env = \"OPENAI_API_KEY\"\nsize = \"1024x1024\"\n",
    )
    .unwrap();
    assert!(c.models.contains_key("artist") && c.models.contains_key("0.2plus"));
    assert_eq!(c.models["artist"].timeout_secs, 120);
    assert_eq!(c.models["artist"].retries, 2);
    assert!(c.edit.is_none());

    let err = parse_backends_toml(
        "[models.fast]\nkind = \"openai\"\nurl = \"http://a:1\"\ntimeout = 5\n",
    )
    .unwrap_err();
    assert!(err.contains("timeout"), "{err}");
    let err = parse_backends_toml("[modles.fast]\nkind = \"openai\"\n").unwrap_err();
    assert!(err.contains("modles"), "{err}");
    let err = parse_backends_toml("[models.dalle]\nkind = \"openai\"\nurl = \"http://a:1\"\n")
        .unwrap_err();
    assert!(err.contains("dalle"), "{err}");
    let err =
        parse_backends_toml("[edit]\nkind = \"invokeai\"\nurl = \"http://a:1\"\n").unwrap_err();
    assert!(err.contains("invokeai"), "{err}");
    // ComfyUI's bundled workflow needs the checkpoint's name; pools take `urls`, not both.
    let err =
        parse_backends_toml("[edit]\nkind = \"comfyui\"\nurl = \"http://a:1\"\n").unwrap_err();
    assert!(err.contains("edit.model"), "{err}");
    let err = parse_backends_toml(
        "[models.fast]\nkind = \"a1111\"\nurl = \"http://a:1\"\nurls = [\"http://b:1\"]\n",
    )
    .unwrap_err();
    assert!(err.contains("not both"), "{err}");
    let err = parse_backends_toml(
        "[models.fast]\nkind = \"a1111\"\nurls = [\"http://b:1\", \"http://b:1/\"]\n",
    )
    .unwrap_err();
    assert!(err.contains("twice"), "{err}");
    let err = parse_backends_toml("[models.fast]\nkind = \"a1111\"\n").unwrap_err();
    assert!(err.contains("needs `url`"), "{err}");
    let c = parse_backends_toml(
        "[models.fast]\nkind = \"comfy\"\nurls = [\"http://b:1\", \"http://c:1\"]\nmodel = \"v1-5.safetensors\"\n",
    )
    .unwrap();
    assert_eq!(c.models["fast"].endpoints().len(), 2);
    assert_eq!(c.models["fast"].down_after, 1);
    let err = parse_backends_toml("[edit]\nkind = \"openai\"\nurl = \"ftp://a\"\n").unwrap_err();
    assert!(err.contains("edit.url"), "{err}");
    assert!(parse_backends_toml("").unwrap().is_empty());
}

/// A cancel while an OpenAI-compatible server is still working: the call ends with `Cancelled`
/// at once (the request is abandoned, not waited out), and nothing is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_request_is_abandoned_on_cancel() {
    let f = fake(Mode::Slow).await;
    let toml = format!(
        "[models.artist]\nkind = \"openai\"\nurl = \"{}\"\nretries = 2\ntimeout_secs = 60\n",
        f.url
    );
    let r = Arc::new(Router::new(
        parse_backends_toml(&toml).unwrap(),
        Arc::new(ProceduralRenderer),
    ));
    let control = RenderControl::default();
    let c2 = control.clone();
    let call = tokio::task::spawn_blocking(move || r.generate_with(&spec(Model::Artist), &c2));
    for _ in 0..500 {
        if f.state.hits.load(Ordering::SeqCst) >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        f.state.hits.load(Ordering::SeqCst),
        1,
        "the request reached the server"
    );
    let cancelled = std::time::Instant::now();
    control.cancel();
    let err = call.await.unwrap().unwrap_err();
    assert!(matches!(err, RenderError::Cancelled), "{err:?}");
    // The server sleeps 120 s and the timeout is 60 s: ending at all before them means the
    // request was abandoned.
    assert!(
        cancelled.elapsed() < Duration::from_secs(30),
        "{:?}",
        cancelled.elapsed()
    );
    assert_eq!(f.state.hits.load(Ordering::SeqCst), 1, "not retried");
}
