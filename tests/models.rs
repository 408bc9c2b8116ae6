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
    /// Other repositories (`owner/name` → files), served without a token.
    extra: BTreeMap<String, BTreeMap<String, (Vec<u8>, bool)>>,
    /// Storage sends 8 KiB every this many milliseconds (0: all at once), so a download can
    /// be watched, cancelled and interrupted.
    delay_ms: std::sync::atomic::AtomicU64,
    /// Sizes the listing claims instead of the real ones (path → bytes).
    claimed: BTreeMap<String, u64>,
}

impl HubState {
    fn repo(&self, repo: &str) -> Option<&BTreeMap<String, (Vec<u8>, bool)>> {
        if repo == REPO {
            Some(&self.files)
        } else {
            self.extra.get(repo)
        }
    }
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
    let repo = format!("{owner}/{name}");
    if repo == REPO && !authorized(&hub, req.headers()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Some(files) = hub.repo(&repo).filter(|_| rev == "main" || rev == COMMIT) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let siblings: Vec<Value> = files
        .iter()
        .map(|(p, (bytes, lfs))| {
            let size = hub.claimed.get(p).copied().unwrap_or(bytes.len() as u64);
            let mut s = json!({"rfilename": p, "size": size, "blobId": git_blob(bytes)});
            if *lfs {
                s["lfs"] = json!({"sha256": sha256_hex(bytes), "size": size, "pointerSize": 134});
            }
            s
        })
        .collect();
    poem::web::Json(json!({"id": repo, "sha": COMMIT, "siblings": siblings})).into_response()
}

#[handler]
fn resolve(
    UrlPath((owner, name, rev, path)): UrlPath<(String, String, String, String)>,
    req: &Request,
    hub: Data<&Hub>,
) -> Response {
    let repo = format!("{owner}/{name}");
    if repo == REPO && !authorized(&hub, req.headers()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Some((bytes, lfs)) = hub
        .repo(&repo)
        .filter(|_| rev == "main" || rev == COMMIT)
        .and_then(|f| f.get(&path))
    else {
        return StatusCode::NOT_FOUND.into_response();
    };
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
                format!("http://localhost:{port}/lfs-storage/{sha}?repo={repo}&path={path}"),
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
    let query: BTreeMap<String, String> = req
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let path = query.get("path").cloned().unwrap_or_default();
    let repo = query.get("repo").cloned().unwrap_or_default();
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
    let Some((bytes, _)) = hub.repo(&repo).and_then(|f| f.get(&path)) else {
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
    let delay = hub.delay_ms.load(std::sync::atomic::Ordering::Relaxed);
    if delay > 0 {
        // Slowly: 8 KiB, then a pause.
        let chunks: Vec<bytes::Bytes> = body
            .chunks(8192)
            .map(|c| bytes::Bytes::from(c.to_vec()))
            .collect();
        let stream = futures_util::stream::unfold(chunks.into_iter(), move |mut it| async move {
            let next = it.next()?;
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
            Some((Ok::<_, std::io::Error>(next), it))
        });
        return builder.body(Body::from_bytes_stream(stream));
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

/// A download larger than the free space is refused before anything is written, with the
/// numbers.
#[tokio::test]
async fn a_download_larger_than_the_disk_is_refused_with_the_numbers() {
    let mut claimed = BTreeMap::new();
    // 1 PiB of UNet: more than any test machine's disk.
    claimed.insert(
        "unet/diffusion_pytorch_model.safetensors".to_string(),
        1u64 << 50,
    );
    let state = Arc::new(HubState {
        files: repo_files(),
        claimed,
        ..HubState::default()
    });
    let (endpoint, _task) = fake_hub(state.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (code, _, err) = cli(
        &data,
        &["models", "pull", REPO, "--yes"],
        &[("HF_ENDPOINT", endpoint.as_str())],
    )
    .await;
    assert_ne!(code, 0);
    assert!(
        err.contains("not enough disk space: the download needs 1024.0 TiB more")
            && err.contains(" free (Pictor keeps 256.0 MiB spare)"),
        "{err}"
    );
    assert!(
        state.storage_log.lock().unwrap().is_empty(),
        "nothing fetched"
    );
    assert!(
        !data.join("models/.partial-tiny-sd").exists(),
        "nothing written"
    );
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

#[cfg(feature = "diffusion")]
/// The tiny FLUX fixture's T5 as city96's T5 GGUFs are written (llama.cpp's names; float32
/// here, which the loader reads like the quantised types).
fn t5_gguf(folder: &Path) -> Vec<u8> {
    use pictor::render::diffusion::candle::{
        Device,
        quantized::{GgmlDType, QTensor, gguf_file},
    };
    let st = pictor::render::diffusion::candle::safetensors::load(
        folder.join("text_encoder_2/model.safetensors"),
        &Device::Cpu,
    )
    .unwrap();
    let rename = pictor::render::diffusion::flux::weights::t5_name_in_gguf;
    let tensors: Vec<(String, QTensor)> = st
        .iter()
        .filter(|(n, _)| n.as_str() != "encoder.embed_tokens.weight")
        .map(|(n, t)| (rename(n), QTensor::quantize(t, GgmlDType::F32).unwrap()))
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut out = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut out, &[], &refs).unwrap();
    out.into_inner()
}

/// FLUX.1-schnell from the catalogue comes from three repositories: Black Forest Labs' for the
/// configurations, tokenizers, CLIP and VAE (not its 24 GB transformer nor its 9.5 GB T5),
/// city96's Q4_K transformer GGUF and Q8_0 T5 GGUF, each put into its component's folder. The
/// download record names each file's repository and commit, so a damaged GGUF is found and
/// fetched again from its own repository; the installed model draws with `pictor render`.
#[cfg(feature = "diffusion")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_is_pulled_from_three_repositories_and_draws() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion/flux/dev");
    let base = folder_files(&fixtures);
    let gguf = std::fs::read(fixtures.join("transformer.gguf")).unwrap();
    let t5 = t5_gguf(&fixtures);
    let mut extra = BTreeMap::new();
    extra.insert("black-forest-labs/FLUX.1-schnell".to_string(), base.clone());
    let one = |name: &str, bytes: &Vec<u8>| {
        let mut m = BTreeMap::new();
        m.insert(name.to_string(), (bytes.clone(), true));
        m.insert(
            "README.md".to_string(),
            (b"GGUF conversions".to_vec(), false),
        );
        m
    };
    extra.insert(
        "city96/FLUX.1-schnell-gguf".to_string(),
        one("flux1-schnell-Q4_K_S.gguf", &gguf),
    );
    extra.insert(
        "city96/t5-v1_1-xxl-encoder-gguf".to_string(),
        one("t5-v1_1-xxl-encoder-Q8_0.gguf", &t5),
    );
    let state = Arc::new(HubState {
        extra,
        ..HubState::default()
    });
    let (endpoint, _task) = fake_hub(state.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let (code, out, err) = cli(&data, &["models", "pull", "flux1-schnell", "--json"], &env).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["model"]["arch"], "flux", "{v}");
    let folder = data.join("models/flux1-schnell");
    let placed = folder.join("transformer/flux1-schnell-Q4_K_S.gguf");
    assert!(std::fs::read(&placed).unwrap() == gguf);
    assert!(
        std::fs::read(folder.join("text_encoder_2/t5-v1_1-xxl-encoder-Q8_0.gguf")).unwrap() == t5
    );
    for (path, (bytes, _)) in &base {
        let got = std::fs::read(folder.join(path)).ok();
        let float_part = path.starts_with("transformer/diffusion_pytorch_model")
            || path.starts_with("text_encoder_2/model");
        let config_or_weights = [".json", ".txt", ".safetensors"]
            .iter()
            .any(|x| path.ends_with(x));
        let fetched =
            path == "model_index.json" || path.contains('/') && config_or_weights && !float_part;
        if fetched {
            assert!(got.as_ref() == Some(bytes), "{path} fetched as it is");
        } else {
            assert!(got.is_none(), "{path} should not be fetched");
        }
    }
    let log: Vec<String> = state
        .storage_log
        .lock()
        .unwrap()
        .iter()
        .map(|(p, _, _)| p.clone())
        .collect();
    assert!(
        log.contains(&"flux1-schnell-Q4_K_S.gguf".to_string()),
        "fetched under its own repository's name: {log:?}"
    );
    let source: Value =
        serde_json::from_slice(&std::fs::read(folder.join("pictor-source.json")).unwrap()).unwrap();
    let files = source["files"].as_array().unwrap();
    let record = files
        .iter()
        .find(|f| f["path"] == "transformer/flux1-schnell-Q4_K_S.gguf")
        .unwrap();
    assert_eq!(record["repo"], "city96/FLUX.1-schnell-gguf", "{record}");
    assert_eq!(record["file"], "flux1-schnell-Q4_K_S.gguf", "{record}");

    // A damaged GGUF: found by the check, fetched again from city96's repository.
    let n = pictor::models::hub::verify(&folder).unwrap();
    assert_eq!(n, files.len());
    let mut bad = gguf.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    std::fs::write(&placed, &bad).unwrap();
    let e = pictor::models::hub::verify(&folder).unwrap_err();
    assert!(e.contains("flux1-schnell-Q4_K_S.gguf"), "{e}");
    let fixed = pictor::models::hub::repair(&endpoint, None, &folder, None)
        .await
        .unwrap();
    assert_eq!(fixed, 1);
    assert!(std::fs::read(&placed).unwrap() == gguf, "repaired");

    // It draws: the GGUF transformer and T5 from their folders.
    let png = dir.path().join("flux.png");
    let (code, _, err) = cli(
        &data,
        &[
            "render",
            "--model",
            "flux1-schnell",
            "--prompt",
            "a red car",
            "--steps",
            "1",
            "--width",
            "64",
            "--height",
            "64",
            "--out",
            png.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let img = image::open(&png).unwrap();
    assert_eq!((img.width(), img.height()), (64, 64));
}

/// The files of a fixture folder as a hub repository (`.safetensors` through LFS).
fn folder_files(dir: &Path) -> BTreeMap<String, (Vec<u8>, bool)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (Vec<u8>, bool)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_str().unwrap().to_string();
                let lfs = rel.ends_with(".safetensors");
                out.insert(rel, (std::fs::read(&p).unwrap(), lfs));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The models page in chromium, against a fake hub serving a tiny SD 1.5-architecture model as
/// `stabilityai/sd-turbo` and a tiny TAESD as `madebyollin/taesd`: the catalogue with its
/// licence tick, a download with its progress rising, a cancel, a download interrupted by
/// `kill -9` that resumes after the restart and installs, the tiny decoder, the fast tier
/// mapped with the Turbo preset, the playground's picker naming it, a picture drawn by it, and
/// removal refused while it is mapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_models_page_downloads_maps_and_survives_a_restart() {
    let Some(d) = common::webdriver::Driver::start().await else {
        return;
    };
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion");
    let turbo = folder_files(&fixtures.join("sd15/model"));
    let total: usize = turbo.values().map(|(b, _)| b.len()).sum();
    let mut extra = BTreeMap::new();
    extra.insert("stabilityai/sd-turbo".to_string(), turbo);
    extra.insert(
        "madebyollin/taesd".to_string(),
        folder_files(&fixtures.join("taesd/model")),
    );
    let hub = Arc::new(HubState {
        extra,
        delay_ms: 40.into(),
        ..HubState::default()
    });
    let (endpoint, _task) = fake_hub(hub.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    const EMAIL: &str = "operator@example.com";
    const PASSWORD: &str = "the operator's long password";
    cli_json(
        &data,
        &[
            "user",
            "add",
            "--email",
            EMAIL,
            "--admin",
            "--password-stdin",
            "--json",
        ],
        Some(&format!("{PASSWORD}\n")),
    );
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let server = spawn_server(&data, &env);

    d.goto(&server.url("/login?return_to=/admin/models")).await;
    d.type_into("#email", EMAIL).await;
    d.type_into("#password", PASSWORD).await;
    d.click("form[action=\"/login\"] button[type=submit]").await;
    assert!(
        d.wait_until("return location.pathname === '/admin/models'", 20)
            .await,
        "{}",
        d.current_url().await
    );
    // Nothing installed: the first-run card on the admin overview leads to the catalogue,
    // which has its own card, the recommended model, its licence and the tick a
    // non-commercial licence needs.
    d.goto(&server.url("/admin")).await;
    d.click("#first-run a.button").await;
    assert!(
        d.wait_until(
            "return location.pathname === '/admin/models' && location.hash === '#catalogue'",
            20
        )
        .await,
        "{}",
        d.current_url().await
    );
    d.wait_for("#first-run").await;
    let item = d.text("#catalogue-sd-turbo").await;
    assert!(
        item.contains("recommended here")
            && item.contains("Non-Commercial")
            && item.contains("estimate for this server"),
        "{item}"
    );
    assert_eq!(
        d.execute(
            "return document.getElementById('pull-sd-turbo').form.checkValidity()",
            vec![]
        )
        .await,
        json!(false),
        "the licence must be ticked first"
    );
    d.full_screenshot(&common::webdriver::shot("models", "catalogue"))
        .await;

    // Download, watch it rise, cancel.
    d.click("#accept-sd-turbo").await;
    d.click("#pull-sd-turbo").await;
    assert!(
        d.wait_until("return location.search.includes('done=pull') && document.querySelector('#download-sd-turbo.pull-running') !== null", 20)
            .await
    );
    let progress =
        "return Number(document.querySelector('#download-sd-turbo progress')?.value || 0)";
    assert!(
        d.wait_until(
            &format!("{};", progress.replace("return ", "return 0 < ")),
            20
        )
        .await
    );
    let first = d.execute(progress, vec![]).await.as_f64().unwrap();
    assert!(
        d.wait_until(&format!("return Number(document.querySelector('#download-sd-turbo progress')?.value || 0) > {first}"), 20)
            .await,
        "the download's progress rises"
    );
    assert!(
        d.text("#download-sd-turbo").await.contains("/s"),
        "a rate is shown"
    );
    d.full_screenshot(&common::webdriver::shot("models", "download"))
        .await;
    d.click("#download-sd-turbo form button").await;
    assert!(
        d.wait_until(
            "return document.querySelector('#download-sd-turbo.pull-cancelled') !== null",
            20
        )
        .await,
        "{}",
        d.text("#downloads").await
    );
    assert!(
        !data.join("models/.partial-sd-turbo").exists(),
        "a cancelled download frees its space"
    );
    assert!(!data.join("models/sd-turbo").exists());

    // Again, interrupted by kill -9 four tenths of the way: the restarted server resumes it.
    hub.storage_log.lock().unwrap().clear();
    hub.delay_ms
        .store(100, std::sync::atomic::Ordering::Relaxed);
    d.goto(&server.url("/admin/models")).await;
    d.wait_for("#pull-sd-turbo").await;
    d.execute(
        "document.getElementById('accept-sd-turbo').checked = true; document.getElementById('pull-sd-turbo').click();",
        vec![],
    )
    .await;
    assert!(
        d.wait_until("return location.search.includes('done=pull') && document.querySelector('#download-sd-turbo.pull-running') !== null", 20)
            .await,
        "{} {}",
        d.current_url().await,
        d.text("main").await
    );
    let at = total * 4 / 10;
    assert!(
        d.wait_until(&format!("return Number(document.querySelector('#download-sd-turbo progress')?.value || 0) > {at}"), 30)
            .await
    );
    server.kill9();
    assert!(
        data.join("models/.partial-sd-turbo").exists() && !data.join("models/sd-turbo").exists(),
        "killed while downloading: {:?}",
        walk_names(&data)
    );
    let before = hub.storage_log.lock().unwrap().len();
    hub.delay_ms.store(5, std::sync::atomic::Ordering::Relaxed);
    let server = spawn_server(&data, &env);
    d.goto(&server.url("/admin/models")).await;
    assert!(
        d.wait_until(
            "return document.getElementById('installed-sd-turbo') !== null",
            40
        )
        .await,
        "{}",
        d.text("main").await
    );
    {
        let log = hub.storage_log.lock().unwrap();
        let after: Vec<_> = log[before..].iter().collect();
        assert!(
            after
                .iter()
                .all(|(p, _, _)| p != "text_encoder/model.safetensors"),
            "a file finished before the kill is not fetched again: {after:?}"
        );
        assert!(
            after.iter().any(|(_, r, _)| r.is_some()),
            "the file in progress resumes with a Range request: {after:?}"
        );
    }
    // The tiny decoder (MIT: no tick).
    d.click("#pull-taesd").await;
    assert!(
        d.wait_until(
            "return document.getElementById('installed-taesd') !== null",
            40
        )
        .await
    );

    // `pictor models pull` while the server runs: the server downloads, the CLI follows.
    let (code, out, err) = cli(
        &data,
        &[
            "models",
            "pull",
            "madebyollin/taesd",
            "--name",
            "taesd-cli",
            "--json",
        ],
        &env,
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["pull"]["status"], "done", "{v}");
    assert_eq!(v["model"]["kind"], "tiny_decoder", "{v}");

    // Fast → the pulled model with the Turbo preset.
    d.execute("document.getElementById('map-fast').open = true", vec![])
        .await;
    // An SD model is chosen: FLUX / SD 3's file fields are hidden and left out of the form,
    // the tiny decoder's shown.
    assert!(
        d.wait_until(
            "const t = document.getElementById('transformer-fast'); return t.disabled && t.closest('[data-archs]').hidden && !document.getElementById('tiny-fast').closest('[data-archs]').hidden;",
            10,
        )
        .await,
        "the mapping form's fields for an SD model"
    );
    d.execute(
        "document.getElementById('model-fast').value = 'sd-turbo'; document.getElementById('preset-fast').value = 'sd-turbo';",
        vec![],
    )
    .await;
    d.click("#map-fast form.model-map button[type=submit]")
        .await;
    assert!(
        d.wait_until("return location.search.includes('done=map')", 20)
            .await
    );
    let row = d.text("#tier-fast").await;
    assert!(
        row.contains("SD-Turbo") && row.contains("steps 1") && row.contains("tiny decoder"),
        "{row}"
    );
    d.full_screenshot(&common::webdriver::shot("models", "installed"))
        .await;
    d.phone_viewport(Some((390, 844))).await;
    d.full_screenshot(&common::webdriver::shot("models", "phone"))
        .await;
    d.phone_viewport(None).await;

    // The playground names it; a picture is drawn by it.
    d.goto(&server.url("/playground")).await;
    let option = d.text("#gen-model option[value=fast]").await;
    assert!(option.starts_with("Standard · SD-Turbo"), "{option}");
    let key = cli_user_key(&data, "artist@example.com", 10);
    let (_, r) = server
        .generate(
            &key,
            json!({"prompt": "a red car", "model": "fast", "seed": 5}),
        )
        .await;
    let job = r["job_id"].as_str().unwrap_or_else(|| panic!("{r}"));
    let done = server.finish(&key, job).await;
    assert_eq!(done["status"], "done", "{done}");
    let png = server.fetch(done["photo_url"].as_str().unwrap()).await;
    let params = pictor::render::encode::read_parameters(&png).unwrap();
    assert!(
        params.contains("Steps: 1, Sampler: Euler a") && params.contains("Model: sd-turbo"),
        "{params}"
    );

    // Removal is refused while a tier uses it; the page says which. The tier's time is the
    // one its last picture took here now, not the estimate.
    d.goto(&server.url("/admin/models")).await;
    let row = d.text("#tier-fast").await;
    assert!(row.contains("its last picture here"), "{row}");
    d.click("#installed-sd-turbo form[action=\"/admin/models/remove\"] button")
        .await;
    // Wait for the answer's page itself (the element alone can be found while the browser is
    // still between the form's POST and the page it redirects to).
    d.wait_until(
        "const e = document.getElementById('models-error'); return !!e && e.textContent.includes('draws the fast tier');",
        20,
    )
    .await;
    let error = d.text("#models-error").await;
    assert!(error.contains("draws the fast tier"), "{error}");
    // A damaged file: Check files names it, Repair downloads it again from the recorded commit.
    let vae = data.join("models/sd-turbo/vae/diffusion_pytorch_model.safetensors");
    let mut bytes = std::fs::read(&vae).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&vae, &bytes).unwrap();
    // A fresh page first: the removal's error box is still on this one, and waiting for
    // "#models-error" after the click would find it before the check's page arrives.
    d.goto(&server.url("/admin/models")).await;
    d.click("#installed-sd-turbo form[action=\"/admin/models/check\"] button")
        .await;
    // Waited for by its text: the check's answer, whatever page was on screen a moment before.
    d.wait_text("vae/diffusion_pytorch_model.safetensors (checksum differs)")
        .await;
    d.goto(&server.url("/admin/models")).await;
    d.click("#installed-sd-turbo form[action=\"/admin/models/repair\"] button")
        .await;
    assert!(
        d.wait_until(
            "return document.querySelector('#download-sd-turbo.pull-done') !== null",
            30
        )
        .await,
        "{}",
        d.text("main").await
    );
    d.goto(&server.url("/admin/models")).await;
    d.click("#installed-sd-turbo form[action=\"/admin/models/check\"] button")
        .await;
    d.wait_text("matches its checksum").await;
    bytes[last] ^= 0xff;
    assert_eq!(
        std::fs::read(&vae).unwrap(),
        bytes,
        "the file is whole again"
    );

    // Every step is in the audit log.
    d.goto(&server.url("/admin/audit")).await;
    let audit = d.text("#audit").await;
    for action in [
        "model.pull",
        "model.pull.cancel",
        "model.add",
        "model.map",
        "model.repair",
    ] {
        assert!(audit.contains(action), "{action} missing: {audit}");
    }
    // In Russian.
    d.goto(&server.url("/admin/models")).await;
    d.click("nav.langs a[lang=ru]").await;
    assert!(
        d.wait_until("return document.documentElement.lang === 'ru'", 10)
            .await
    );
    assert!(
        d.text("#tiers-h").await.contains("Что рисует"),
        "{}",
        d.text("#tiers-h").await
    );
    let artist = d.text("#tier-artist").await;
    assert!(
        artist.contains("встроенный художник") && artist.contains("по умолчанию"),
        "{artist}"
    );
    let fast = d.text("#tier-fast").await;
    assert!(fast.contains("последняя картинка здесь"), "{fast}");
    d.full_screenshot(&common::webdriver::shot("models", "ru"))
        .await;
    server.terminate();
}

fn walk_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.display().to_string());
            if p.is_dir() {
                out.extend(walk_names(&p));
            }
        }
    }
    out
}
