//! Diffusion models on disk: `pictor models add/list/remove` with diffusers folders and
//! single-file checkpoints, and `pictor models pull` against a fake Hugging Face hub that speaks
//! the hub's protocol (the revision API with blobs, resolve URLs that redirect LFS files to
//! storage with `X-Linked-Etag`/`X-Linked-Size`/`X-Repo-Commit`, `Range` requests), including a
//! dropped connection mid-file, a corrupted file, a resume across runs and a gated repository.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::*;
use poem::http::{HeaderMap, StatusCode};
use poem::web::{Data, Path as UrlPath};
use poem::{Body, EndpointExt, IntoResponse, Request, Response, Route, handler};
use serde_json::{Value, json};
use sha1::Sha1;
use sha2::{Digest, Sha256};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const REPO: &str = "tester/tiny-sd";
const TOKEN: &str = "hf_test_token_123";

/// A `.safetensors` file with real headers and `fill`-valued F32 data.
fn safetensors(tensors: &[(&str, &[u64])], fill: u8) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut offset = 0u64;
    for (name, shape) in tensors {
        let bytes = shape.iter().product::<u64>() * 4;
        header.insert(
            name.to_string(),
            json!({"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let text = serde_json::to_vec(&header).unwrap();
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text);
    out.extend(vec![fill; offset as usize]);
    out
}

/// The files of a tiny SD 1.x diffusers repository (path → content, LFS or not).
fn repo_files() -> BTreeMap<String, (Vec<u8>, bool)> {
    let mut f = BTreeMap::new();
    let mut text = |p: &str, s: &str| {
        f.insert(p.to_string(), (s.as_bytes().to_vec(), false));
    };
    text(
        "model_index.json",
        r#"{"_class_name":"StableDiffusionPipeline","unet":["diffusers","UNet2DConditionModel"],"vae":["diffusers","AutoencoderKL"],"text_encoder":["transformers","CLIPTextModel"],"tokenizer":["transformers","CLIPTokenizer"],"scheduler":["diffusers","EulerDiscreteScheduler"]}"#,
    );
    text("README.md", "# tiny");
    text("unet/config.json", r#"{"cross_attention_dim": 768}"#);
    text("vae/config.json", "{}");
    text("text_encoder/config.json", "{}");
    text("tokenizer/vocab.json", "{}");
    text("tokenizer/merges.txt", "#version: 0.2\n");
    text(
        "scheduler/scheduler_config.json",
        r#"{"prediction_type":"epsilon"}"#,
    );
    // 1.5 MB of UNet, so a connection can drop half-way.
    f.insert(
        "unet/diffusion_pytorch_model.safetensors".into(),
        (safetensors(&[("conv_in.weight", &[96, 64, 8, 8])], 1), true),
    );
    f.insert(
        "unet/diffusion_pytorch_model.fp16.safetensors".into(),
        (safetensors(&[("conv_in.weight", &[4, 4])], 2), true),
    );
    f.insert(
        "unet/diffusion_pytorch_model.bin".into(),
        (b"pickle!".to_vec(), true),
    );
    f.insert(
        "vae/diffusion_pytorch_model.safetensors".into(),
        (
            safetensors(&[("decoder.conv_in.weight", &[32, 4, 3, 3])], 3),
            true,
        ),
    );
    f.insert(
        "text_encoder/model.safetensors".into(),
        (
            safetensors(
                &[("text_model.embeddings.token_embedding.weight", &[64, 32])],
                4,
            ),
            true,
        ),
    );
    f
}

fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn git_blob(b: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", b.len()).as_bytes());
    h.update(b);
    hex::encode(h.finalize())
}

#[derive(Default)]
struct HubState {
    files: BTreeMap<String, (Vec<u8>, bool)>,
    /// LFS files whose first download breaks off half-way.
    cut_once: Mutex<HashSet<String>>,
    /// LFS files served with wrong bytes.
    corrupt: Mutex<HashSet<String>>,
    /// (path, Range header, Authorization present) of every storage download.
    storage_log: Mutex<Vec<(String, Option<String>, bool)>>,
    gated: bool,
}

type Hub = Arc<HubState>;

fn authorized(state: &HubState, headers: &HeaderMap) -> bool {
    !state.gated
        || headers.get("authorization").and_then(|v| v.to_str().ok())
            == Some(&format!("Bearer {TOKEN}"))
}

#[handler]
fn api(
    UrlPath((owner, name, rev)): UrlPath<(String, String, String)>,
    req: &Request,
    hub: Data<&Hub>,
) -> Response {
    if !authorized(&hub, req.headers()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    if format!("{owner}/{name}") != REPO || !(rev == "main" || rev == COMMIT) {
        return StatusCode::NOT_FOUND.into_response();
    }
    let siblings: Vec<Value> = hub
        .files
        .iter()
        .map(|(p, (bytes, lfs))| {
            let mut s = json!({"rfilename": p, "size": bytes.len(), "blobId": git_blob(bytes)});
            if *lfs {
                s["lfs"] =
                    json!({"sha256": sha256_hex(bytes), "size": bytes.len(), "pointerSize": 134});
            }
            s
        })
        .collect();
    poem::web::Json(json!({"id": REPO, "sha": COMMIT, "siblings": siblings})).into_response()
}

#[handler]
fn resolve(
    UrlPath((owner, name, rev, path)): UrlPath<(String, String, String, String)>,
    req: &Request,
    hub: Data<&Hub>,
) -> Response {
    if !authorized(&hub, req.headers()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Some((bytes, lfs)) = hub.files.get(&path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if format!("{owner}/{name}") != REPO || !(rev == "main" || rev == COMMIT) {
        return StatusCode::NOT_FOUND.into_response();
    }
    if *lfs {
        let sha = sha256_hex(bytes);
        // LFS storage is another host, as on the real hub (there a CDN): `localhost` for the
        // `127.0.0.1` the hub is reached at.
        let port = req
            .headers()
            .get("host")
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.rsplit(':').next())
            .unwrap_or_default()
            .to_string();
        Response::builder()
            .status(StatusCode::FOUND)
            .header(
                "location",
                format!("http://localhost:{port}/lfs-storage/{sha}?path={path}"),
            )
            .header("x-linked-etag", format!("\"{sha}\""))
            .header("x-linked-size", bytes.len().to_string())
            .header("x-repo-commit", COMMIT)
            .header("etag", "\"pointer-etag\"")
            .finish()
    } else {
        let mut resp = Response::builder()
            .header("etag", format!("\"{}\"", git_blob(bytes)))
            .header("x-repo-commit", COMMIT)
            .header("content-length", bytes.len().to_string());
        if req.method() == poem::http::Method::HEAD {
            resp = resp.header("content-type", "text/plain");
            return resp.finish();
        }
        resp.body(bytes.clone())
    }
}

#[handler]
fn storage(req: &Request, hub: Data<&Hub>) -> Response {
    let path = req
        .uri()
        .query()
        .and_then(|q| q.strip_prefix("path="))
        .unwrap_or_default()
        .to_string();
    let range = req
        .headers()
        .get("range")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    hub.storage_log.lock().unwrap().push((
        path.clone(),
        range.clone(),
        req.headers().contains_key("authorization"),
    ));
    let Some((bytes, _)) = hub.files.get(&path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let mut bytes = bytes.clone();
    if hub.corrupt.lock().unwrap().contains(&path) {
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
    }
    let start = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|r| r.parse::<usize>().ok())
        .unwrap_or(0);
    let total = bytes.len();
    let body = bytes[start.min(total)..].to_vec();
    let status = if range.is_some() {
        StatusCode::PARTIAL_CONTENT
    } else {
        StatusCode::OK
    };
    let builder = Response::builder()
        .status(status)
        .header("content-length", body.len().to_string())
        .header(
            "content-range",
            format!("bytes {start}-{}/{total}", total.saturating_sub(1)),
        );
    if hub.cut_once.lock().unwrap().remove(&path) {
        // Half the bytes, then the connection breaks.
        let half = body.len() / 2;
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = vec![
            Ok(bytes::Bytes::from(body[..half].to_vec())),
            Err(std::io::Error::other("connection dropped")),
        ];
        return builder.body(Body::from_bytes_stream(futures_util::stream::iter(chunks)));
    }
    builder.body(body)
}

async fn fake_hub(state: Hub) -> (String, tokio::task::JoinHandle<()>) {
    let app = Route::new()
        .at("/api/models/:owner/:name/revision/:rev", poem::get(api))
        .at(
            "/:owner/:name/resolve/:rev/*path",
            poem::get(resolve).head(resolve),
        )
        .at("/lfs-storage/:sha", poem::get(storage))
        .data(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let server = poem::Server::new(poem::listener::TcpListener::bind(addr.to_string()));
    let task = tokio::spawn(async move {
        let _ = server.run(app).await;
    });
    // Wait until it accepts.
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    (format!("http://{addr}"), task)
}

async fn cli(data: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let data = data.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let mut cmd = pictor_cmd(&data);
        cmd.args(&args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pull_resumes_checks_every_file_and_installs() {
    let state = Arc::new(HubState {
        files: repo_files(),
        gated: true,
        ..HubState::default()
    });
    state
        .cut_once
        .lock()
        .unwrap()
        .insert("unet/diffusion_pytorch_model.safetensors".into());
    state
        .corrupt
        .lock()
        .unwrap()
        .insert("vae/diffusion_pytorch_model.safetensors".into());
    let (endpoint, _task) = fake_hub(state.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let env = [("HF_ENDPOINT", endpoint.as_str()), ("HF_TOKEN", TOKEN)];

    // Without the token, a gated repository says why.
    let (code, _, err) = cli(
        &data,
        &["models", "pull", REPO],
        &[("HF_ENDPOINT", endpoint.as_str())],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("401") && err.contains("HF_TOKEN"), "{err}");

    // First run: the UNet download breaks half-way (resumed within the run); the VAE arrives
    // corrupted: the pull fails, nothing is installed, the bad file is gone.
    let (code, _, err) = cli(&data, &["models", "pull", REPO, "--json"], &env).await;
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(!data.join("models/tiny-sd").exists());
    assert!(
        !data
            .join("models/.partial-tiny-sd/vae/diffusion_pytorch_model.safetensors.part")
            .exists()
    );
    let (_, out, _) = cli(&data, &["models", "list", "--json"], &[]).await;
    let listed: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(listed["models"], json!([]));
    {
        let log = state.storage_log.lock().unwrap();
        let unet: Vec<&Option<String>> = log
            .iter()
            .filter(|(p, _, _)| p == "unet/diffusion_pytorch_model.safetensors")
            .map(|(_, r, _)| r)
            .collect();
        let half = repo_files()["unet/diffusion_pytorch_model.safetensors"]
            .0
            .len()
            / 2;
        assert_eq!(
            unet,
            vec![&None, &Some(format!("bytes={half}-"))],
            "resumed with a Range request where the connection broke"
        );
        assert!(
            log.iter().all(|(_, _, auth)| !auth),
            "the token never goes to the storage host"
        );
    }

    // Second run, the hub fixed: what was fetched and checked before is kept.
    state.corrupt.lock().unwrap().clear();
    let (code, out, err) = cli(&data, &["models", "pull", REPO, "--json"], &env).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let files = repo_files();
    let unet_len = files["unet/diffusion_pytorch_model.safetensors"].0.len() as u64;
    assert!(
        v["pull"]["resumed_bytes"].as_u64().unwrap() >= unet_len,
        "{v}"
    );
    assert_eq!(v["model"]["name"], "tiny-sd");
    assert_eq!(v["model"]["arch"], "sd1");
    assert_eq!(v["model"]["source"], format!("{REPO}@{COMMIT}"));
    let installed = data.join("models/tiny-sd");
    for (path, (bytes, _)) in &files {
        let got = std::fs::read(installed.join(path)).ok();
        if path.ends_with(".bin") || path == "README.md" || path.contains(".fp16.") {
            assert!(got.is_none(), "{path} should not be fetched");
        } else {
            assert_eq!(got.as_ref(), Some(bytes), "{path}");
        }
    }
    assert!(!data.join("models/.partial-tiny-sd").exists());
    let source: Value =
        serde_json::from_slice(&std::fs::read(installed.join("pictor-source.json")).unwrap())
            .unwrap();
    assert_eq!(source["commit"], COMMIT);
    // Listed, and a second pull under the same name is refused.
    let (_, out, _) = cli(&data, &["models", "list"], &[]).await;
    assert!(out.contains("tiny-sd") && out.contains("sd1"), "{out}");
    let (code, _, err) = cli(&data, &["models", "pull", REPO], &env).await;
    assert_ne!(code, 0);
    assert!(err.contains("already"), "{err}");
    // Removing it with its files.
    let (code, _, err) = cli(
        &data,
        &["models", "remove", "tiny-sd", "--delete-files"],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(!installed.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_list_and_remove_models_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A diffusers folder (SDXL by its UNet config) and an SD 2 single-file checkpoint.
    let xl = dir.path().join("my-sdxl");
    for (p, (bytes, _)) in repo_files() {
        if p.ends_with(".bin") {
            continue;
        }
        let to = xl.join(&p);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, bytes).unwrap();
    }
    std::fs::write(
        xl.join("unet/config.json"),
        r#"{"cross_attention_dim": 2048, "addition_embed_type": "text_time"}"#,
    )
    .unwrap();
    let (code, _, err) = cli(&data, &["models", "add", "xl", xl.to_str().unwrap()], &[]).await;
    assert_ne!(code, 0, "SDXL needs its second text encoder");
    assert!(err.contains("text_encoder_2"), "{err}");
    for c in ["text_encoder_2", "tokenizer_2"] {
        std::fs::create_dir_all(xl.join(c)).unwrap();
    }
    std::fs::write(
        xl.join("text_encoder_2/model.safetensors"),
        safetensors(
            &[("text_model.embeddings.token_embedding.weight", &[8, 8])],
            0,
        ),
    )
    .unwrap();
    let index = r#"{"unet":[],"vae":[],"text_encoder":[],"text_encoder_2":[],"tokenizer":[],"tokenizer_2":[],"scheduler":[]}"#;
    std::fs::write(xl.join("model_index.json"), index).unwrap();
    let (code, out, err) = cli(
        &data,
        &["models", "add", "xl", xl.to_str().unwrap(), "--json"],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["model"]["arch"].as_str(), v["model"]["layout"].as_str()),
        (Some("sdxl"), Some("diffusers"))
    );

    let ckpt = dir.path().join("v2-1_512.safetensors");
    std::fs::write(
        &ckpt,
        safetensors(
            &[
                (
                    "model.diffusion_model.input_blocks.0.0.weight",
                    &[8, 4, 3, 3],
                ),
                ("first_stage_model.decoder.conv_in.weight", &[8, 4, 3, 3]),
                ("cond_stage_model.model.token_embedding.weight", &[16, 8]),
            ],
            0,
        ),
    )
    .unwrap();
    let (code, out, err) = cli(
        &data,
        &["models", "add", "turbo", ckpt.to_str().unwrap(), "--json"],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["model"]["arch"].as_str(), v["model"]["layout"].as_str()),
        (Some("sd2"), Some("single_file"))
    );
    // Bad input changes nothing.
    for (args, why) in [
        (
            vec!["models", "add", "Bad Name", ckpt.to_str().unwrap()],
            "model name",
        ),
        (
            vec!["models", "add", "turbo", ckpt.to_str().unwrap()],
            "already installed",
        ),
        (
            vec!["models", "add", "x", "/nonexistent/model"],
            "cannot find",
        ),
    ] {
        let (code, _, err) = cli(&data, &args, &[]).await;
        assert_ne!(code, 0);
        assert!(err.contains(why), "{args:?}: {err}");
    }
    let pickle = dir.path().join("model.ckpt");
    std::fs::write(&pickle, b"x").unwrap();
    let (code, _, err) = cli(
        &data,
        &["models", "add", "p", pickle.to_str().unwrap()],
        &[],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("pickle"), "{err}");

    // With the server running, through the admin channel.
    let server = spawn_server(&data, &[]);
    let (code, out, _) = cli(&data, &["models", "list", "--json"], &[]).await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    let names: Vec<&str> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(names, vec!["turbo", "xl"]);
    // Files outside the data folder are never deleted.
    let (code, _, err) = cli(&data, &["models", "remove", "xl", "--delete-files"], &[]).await;
    assert_ne!(code, 0);
    assert!(err.contains("did not delete"), "{err}");
    assert!(xl.join("model_index.json").exists());
    let (code, _, _) = cli(&data, &["models", "remove", "turbo"], &[]).await;
    assert_eq!(code, 0);
    assert!(ckpt.exists());
    server.terminate();
    let (_, out, _) = cli(&data, &["models", "list", "--json"], &[]).await;
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["models"], json!([]));
}

/// Offline: the pull says what to do instead (a mirror, or download elsewhere and add), and a
/// catalogue name names its repository and licence.
#[tokio::test]
async fn an_unreachable_hub_says_what_to_do_instead() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    let (code, _, err) = cli(
        &d,
        &["models", "pull", "sd-turbo", "--yes"],
        &[("HF_ENDPOINT", "http://127.0.0.1:9")],
    )
    .await;
    assert_ne!(code, 0);
    assert!(err.contains("stabilityai/sd-turbo"), "{err}");
    assert!(err.contains("non-commercial"), "{err}");
    assert!(err.contains("cannot reach http://127.0.0.1:9"), "{err}");
    assert!(
        err.contains("HF_ENDPOINT") && err.contains("pictor models add"),
        "{err}"
    );
}
