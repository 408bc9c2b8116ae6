//! Bounded work for every file and listing Pictor reads from outside (issue 34), on the real
//! binary with its resident memory read from /proc: model folders whose files are links to
//! `/dev/zero` or FIFOs, safetensors headers with hundreds of thousands of tensors, oversized
//! tokenizer files met at the first render, a hub that streams an endless listing or lists sizes
//! that add up past 2^64, and webhook URLs in the IPv6 forms of never-allowed IPv4 addresses.
//! Each refusal is a clear error naming what and why, and changes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

const MIB: u64 = 1024;

struct Run {
    code: i32,
    stderr: String,
    /// Highest VmHWM seen while it ran (KiB).
    peak_kib: u64,
}

/// Runs the CLI with `env`, sampling its peak memory every 5 ms; killed (code -9) after
/// `limit` or once it (or the server `watch`, whose work it asked for) holds more than 1 GiB, so
/// a regression fails instead of exhausting the machine.
fn cli_watched(
    data: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
    watch: Option<u32>,
) -> Run {
    use std::io::Read;
    let mut cmd = pictor_cmd(data);
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let mut stderr = child.stderr.take().unwrap();
    // At most 16 MiB of standard error is kept (a progress bar gone wrong printed 209 MB).
    let reader = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0usize;
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
            if kept.len() < 16 << 20 {
                kept.extend_from_slice(&buf[..n]);
            }
        }
        (kept, total)
    });
    let started = Instant::now();
    let mut peak = 0;
    let code = loop {
        if let Some(p) = status_kib(pid, "VmHWM:") {
            peak = peak.max(p);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        let server_rss = watch.and_then(|pid| status_kib(pid, "VmRSS:")).unwrap_or(0);
        if started.elapsed() > limit || peak > 1024 * MIB || server_rss > 1024 * MIB {
            if server_rss > 1024 * MIB {
                let _ = std::process::Command::new("kill")
                    .args(["-9", &watch.unwrap_or(0).to_string()])
                    .status();
            }
            let _ = child.kill();
            let _ = child.wait();
            break -9;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let (kept, total) = reader.join().unwrap();
    let mut stderr = String::from_utf8_lossy(&kept).into_owned();
    if total > kept.len() {
        stderr.push_str(&format!("\n[{total} bytes of standard error in all]"));
    }
    Run {
        code,
        stderr,
        peak_kib: peak,
    }
}

fn fixture_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/pictor-diffusion/tests/fixtures/diffusion/sd15/model")
}

/// A copy of the tiny SD 1.5 fixture (a diffusers folder) at `to`.
fn copy_model(to: &Path) {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    copy(&fixture_model(), to);
}

/// Replaces a file of a model folder with a symbolic link to `target`.
fn link(path: &Path, target: &str) {
    std::fs::remove_file(path).unwrap();
    std::os::unix::fs::symlink(target, path).unwrap();
}

/// A single-file checkpoint whose header lists `n` one-element tensors (with the prefixes that
/// make it an SD 1.x checkpoint): ~58 bytes of header per tensor.
fn many_tensor_checkpoint(path: &Path, n: usize) -> u64 {
    let mut header = String::with_capacity(n * 60);
    header.push('{');
    for (i, prefix) in [
        "model.diffusion_model.x",
        "first_stage_model.x",
        "cond_stage_model.transformer.x",
    ]
    .iter()
    .enumerate()
    {
        header.push_str(&format!(
            r#""{prefix}":{{"dtype":"F32","shape":[1],"data_offsets":[{},{}]}},"#,
            i * 4,
            i * 4 + 4
        ));
    }
    for i in 0..n {
        header.push_str(&format!(
            r#""t{i}":{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}},"#
        ));
    }
    header.pop();
    header.push('}');
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    f.write_all(header.as_bytes()).unwrap();
    f.write_all(&[0u8; 12]).unwrap();
    f.flush().unwrap();
    header.len() as u64
}

/// `pictor models list --json` names no model.
fn assert_no_models(data: &Path) {
    let listed = cli_json(data, &["models", "list", "--json"], None);
    assert_eq!(listed["models"], json!([]), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_add_refuses_devices_fifos_and_oversized_headers_while_serving() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let server = spawn_server(&data, &[]);
    let pid = server.child.id();

    // 1. A model whose unet/config.json is a link to /dev/zero: refused without a read.
    let zero = dir.path().join("zero-model");
    copy_model(&zero);
    link(&zero.join("unet/config.json"), "/dev/zero");
    // 2. Its scheduler configuration a FIFO nobody writes: refused without blocking.
    let fifo = dir.path().join("fifo-model");
    copy_model(&fifo);
    let sched = fifo.join("scheduler/scheduler_config.json");
    std::fs::remove_file(&sched).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&sched)
            .status()
            .unwrap()
            .success()
    );
    // 3. A tokenizer vocabulary over its cap (58 MiB).
    let vocab = dir.path().join("vocab-model");
    copy_model(&vocab);
    std::fs::write(
        vocab.join("tokenizer/vocab.json"),
        big_vocab(58 << 20).as_bytes(),
    )
    .unwrap();

    // 4. The red team's checkpoint: 825,109 tensors in a 48 MB header (the format allows 100 MB).
    let ckpt = dir.path().join("many.safetensors");
    let header_bytes = many_tensor_checkpoint(&ckpt, 825_109);
    assert!(header_bytes > 45_000_000, "{header_bytes}");
    // 5. Under the header cap but over the tensor cap: 70,000 tensors in 4 MB.
    let ckpt2 = dir.path().join("many2.safetensors");
    many_tensor_checkpoint(&ckpt2, 70_000);

    let cases: [(&Path, &str, &str); 5] = [
        (&zero, "unet/config.json", "is a device, not a regular file"),
        (
            &fifo,
            "scheduler_config.json",
            "is a FIFO, not a regular file",
        ),
        (
            &vocab,
            "tokenizer/vocab.json",
            "over the 4.0 MiB Pictor reads for a tokenizer vocabulary",
        ),
        (
            &ckpt,
            "many.safetensors",
            "its safetensors header is 46.3 MiB, over the 16.0 MiB Pictor reads",
        ),
        // The 4 MB header is parsed up to the cap: a few MiB of entries.
        (&ckpt2, "many2.safetensors", "more than 65536 tensors"),
    ];
    for (model, file, why) in cases {
        let (rss0, _) = memory_kib(pid);
        reset_peak(pid);
        let run = cli_watched(
            &data,
            &["models", "add", "bad", model.to_str().unwrap()],
            &[],
            Duration::from_secs(60),
            Some(pid),
        );
        let (_, peak) = memory_kib(pid);
        let growth = peak.saturating_sub(rss0);
        eprintln!(
            "models add with {file} ({why}): exit {}, server peak RSS +{growth} KiB, CLI peak {} KiB: {}",
            run.code,
            run.peak_kib,
            run.stderr.trim()
        );
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(
            run.stderr.contains(file) && run.stderr.contains(why),
            "{}",
            run.stderr
        );
        assert!(growth < 32 * MIB, "server peak RSS grew by {growth} KiB");
    }

    // Nothing was installed, and the server still serves.
    assert_no_models(&data);
    let health = reqwest::get(format!("{}/healthz", server.base))
        .await
        .unwrap();
    assert!(health.status().is_success());
}

/// A `vocab.json` of about `bytes` bytes (a map of distinct tokens).
fn big_vocab(bytes: usize) -> String {
    let mut s = String::with_capacity(bytes + 64);
    s.push('{');
    let mut i = 0u64;
    while s.len() < bytes {
        s.push_str(&format!("\"tok{i:08}\":{i},"));
        i += 1;
    }
    s.pop();
    s.push('}');
    s
}

/// Polls a job until it is done or failed, failing the test (and so killing the server) if
/// the server holds more than 1 GiB meanwhile.
#[cfg(feature = "diffusion")]
async fn finish_watched(server: &ChildServer, key: &str, job: &str) -> Value {
    for _ in 0..600 {
        let (_, v) = server
            .get(key, &format!("/api/pictor/v1/jobs/{job}?wait=1"))
            .await;
        if v["status"] == "done" || v["status"] == "failed" {
            return v;
        }
        let (rss, _) = memory_kib(server.child.id());
        assert!(
            rss < 1024 * MIB,
            "the server holds {rss} KiB while rendering"
        );
    }
    panic!("job {job} did not finish");
}

/// The files the engine reads at the first render, swapped after `models add` checked them: a
/// text encoder configuration linked to /dev/zero, a 58 MiB vocabulary, 99 MiB of merges. Each
/// job fails with the file named, is refunded, and the server's memory stays flat; the model
/// renders once its files are restored.
#[cfg(feature = "diffusion")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn render_time_reads_of_model_files_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let model = dir.path().join("tiny");
    copy_model(&model);
    let added = cli_json(
        &data,
        &["models", "add", "tiny", model.to_str().unwrap(), "--json"],
        None,
    );
    assert_eq!(added["model"]["name"], "tiny", "{added}");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[diffusion.fast]\nmodel = \"tiny\"\nsteps = 1\n").unwrap();
    let key = cli_user_key(&data, "r@example.com", 20);
    let server = spawn_server(&data, &[("PICTOR_CONFIG", config.to_str().unwrap())]);
    let pid = server.child.id();
    let before = server.me(&key).await["balance"].clone();
    let car = json!({"prompt": "a red car", "model": "fast"});

    let merges: String = (0..6_000_000).map(|i| format!("a{i} b{i}\n")).collect();
    type Swap<'a> = (&'a str, Box<dyn Fn(&Path)>, &'a str);
    let swaps: [Swap; 3] = [
        (
            "text_encoder/config.json",
            Box::new(|p: &Path| link(p, "/dev/zero")),
            "is a device, not a regular file",
        ),
        (
            "tokenizer/vocab.json",
            Box::new(|p: &Path| std::fs::write(p, big_vocab(58 << 20)).unwrap()),
            "over the 4.0 MiB Pictor reads for a tokenizer vocabulary",
        ),
        (
            "tokenizer/merges.txt",
            Box::new(move |p: &Path| std::fs::write(p, merges.as_bytes()).unwrap()),
            "over the 4.0 MiB Pictor reads for a tokenizer's merges",
        ),
    ];
    for (file, swap, why) in swaps {
        let path = model.join(file);
        let kept = std::fs::read(&path).unwrap();
        swap(&path);
        let (rss0, _) = memory_kib(pid);
        reset_peak(pid);
        let (_, r) = server.generate(&key, car.clone()).await;
        let job = r["job_id"].as_str().unwrap_or_else(|| panic!("{r}"));
        let done = finish_watched(&server, &key, job).await;
        let (_, peak) = memory_kib(pid);
        let growth = peak.saturating_sub(rss0);
        eprintln!("render with {file} swapped: server peak RSS +{growth} KiB; job {done}");
        assert_eq!(done["status"], "failed", "{done}");
        let text = done.to_string();
        assert!(text.contains(file) && text.contains(why), "{done}");
        assert!(growth < 48 * MIB, "server peak RSS grew by {growth} KiB");
        assert_eq!(server.me(&key).await["balance"], before, "refunded");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, kept).unwrap();
    }
    // The server needed no restart: the restored model renders.
    let (_, r) = server.generate(&key, car).await;
    let done = finish_watched(&server, &key, r["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "done", "{done}");
}

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// A hub whose revision listing for `owner/endless` never ends (300 MB of siblings, then the
/// connection closes) and for `owner/huge` lists two weight files whose sizes add up past 2^64.
/// Every other hub URL answers 404, as the hub does for what it does not have.
async fn hostile_hub() -> String {
    use poem::web::Path as UrlPath;
    use poem::{Body, Response, Route, handler};

    #[handler]
    fn listing(UrlPath((_owner, name, _rev)): UrlPath<(String, String, String)>) -> Response {
        match name.as_str() {
            "endless" => {
                let entry = r#"{"rfilename":"unet/config.json","size":2,"blobId":"0123456789abcdef0123456789abcdef01234567"},"#;
                let chunk = bytes::Bytes::from(entry.repeat(65536 / entry.len()));
                let head = bytes::Bytes::from(format!(r#"{{"sha":"{COMMIT}","siblings":["#));
                let chunks = (0..300_000_000 / chunk.len()).map(move |_| chunk.clone());
                let stream = futures_util::stream::iter(
                    std::iter::once(head)
                        .chain(chunks)
                        .map(Ok::<_, std::io::Error>),
                );
                Response::builder()
                    .content_type("application/json")
                    .body(Body::from_bytes_stream(stream))
            }
            "huge" => {
                let lfs = |size: u64| json!({"sha256": "ab".repeat(32), "size": size});
                let listing = json!({
                    "sha": COMMIT,
                    "siblings": [
                        {"rfilename": "model_index.json", "size": 2, "blobId": COMMIT},
                        {"rfilename": "unet/diffusion_pytorch_model.safetensors", "size": 1u64 << 63, "lfs": lfs(1 << 63)},
                        {"rfilename": "vae/diffusion_pytorch_model.safetensors", "size": (1u64 << 63) + 4, "lfs": lfs((1 << 63) + 4)},
                    ]
                });
                Response::builder()
                    .content_type("application/json")
                    .body(listing.to_string())
            }
            _ => Response::builder()
                .status(poem::http::StatusCode::NOT_FOUND)
                .finish(),
        }
    }

    let app = Route::new().at("/api/models/:owner/:name/revision/:rev", poem::get(listing));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    tokio::spawn(async move {
        let _ = poem::Server::new(poem::listener::TcpListener::bind(addr.to_string()))
            .run(app)
            .await;
    });
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    format!("http://{addr}")
}

/// `pictor models pull REPO` from the hub at `endpoint`, watched (see [`cli_watched`]).
async fn pull(data: &Path, endpoint: &str, repo: &str) -> Run {
    let (data, endpoint, repo) = (data.to_path_buf(), endpoint.to_string(), repo.to_string());
    tokio::task::spawn_blocking(move || {
        cli_watched(
            &data,
            &["models", "pull", &repo],
            &[("HF_ENDPOINT", &endpoint)],
            Duration::from_secs(120),
            None,
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_pull_reads_hub_listings_within_bounds() {
    let endpoint = hostile_hub().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");

    let run = pull(&data, &endpoint, "owner/endless").await;
    eprintln!(
        "pull of an endless listing: exit {}, peak RSS {} KiB: {}",
        run.code,
        run.peak_kib,
        run.stderr.trim()
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("the hub's listing is larger than the 16.0 MiB Pictor reads"),
        "{}",
        run.stderr
    );
    assert!(run.peak_kib < 96 * MIB, "peak RSS {} KiB", run.peak_kib);

    let run = pull(&data, &endpoint, "owner/huge").await;
    eprintln!(
        "pull of sizes past 2^64: exit {}, {} bytes of standard error: {}",
        run.code,
        run.stderr.len(),
        run.stderr.trim()
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("add up past 2^64"), "{}", run.stderr);
    assert!(run.stderr.len() < 4096, "{} bytes", run.stderr.len());
    // Nothing was left behind: no model, no partial download.
    let models = data.join("models");
    let left: Vec<_> = std::fs::read_dir(&models)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.file_name())).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// With `webhooks.allow_private = true` the IPv6 forms of addresses that may never receive a
/// webhook (unspecified, multicast, broadcast) are refused like the IPv4 ones, and a refused job
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_urls_in_ipv6_forms_of_forbidden_addresses_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[webhooks]\nallow_private = true\n").unwrap();
    let key = cli_user_key(&data, "w@example.com", 10);
    let server = spawn_server(&data, &[("PICTOR_CONFIG", config.to_str().unwrap())]);
    for url in [
        "http://[::ffff:0.0.0.0]/",
        "http://[::ffff:224.0.0.1]/",
        "http://[::ffff:255.255.255.255]/",
        "http://[::0.0.0.0]:9/",
        "http://[::224.0.0.1]/",
        "http://[::255.255.255.255]/",
        "http://[64:ff9b::e000:1]/",
        "http://[2002:e000:1::]/",
        "http://[::]/",
        "http://224.0.0.1/",
    ] {
        let got = server
            .generate(&key, json!({"prompt": "a cat", "webhook_url": url}))
            .await;
        assert_error(&got, 400, "invalid_request");
        assert!(
            got.1["error"]
                .as_str()
                .unwrap()
                .contains("cannot receive webhooks"),
            "{url}: {}",
            got.1
        );
    }
    // Nothing was charged for the refusals.
    let me = server.me(&key).await;
    assert_eq!(me["balance"], 10, "{me}");
    assert_eq!(me["active_job"], Value::Null, "{me}");
    // Loopback stays allowed in this mode, in its mapped form too.
    let hook = json!({"prompt": "a cat", "webhook_url": "http://[::ffff:127.0.0.1]:9/hook"});
    assert_eq!(server.generate(&key, hook).await.0, 202);
}
