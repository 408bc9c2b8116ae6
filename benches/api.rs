//! Server benchmarks (`cargo bench --bench api`): GET /me throughput and latency at 64
//! connections, 10,000 concurrent long-polls (server RSS and wake latency), and the job engine's
//! own overhead with a no-op renderer. Numbers go into the README; nothing here asserts a time.
//!
//! The first two run the release binary as a child process so its memory can be read from
//! /proc; the third runs in-process to swap in the no-op renderer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod util;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pictor::app::Server;
use pictor::clock::Clock;
use pictor::config::Config;
use pictor::ops::{self, AdminRequest};
use pictor::render::{EditSpec, GenerateSpec, Picture, RenderError, Renderer};
use serde_json::{Value, json};

fn cli(dir: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_pictor"))
        .env("PICTOR_DATA_DIR", dir)
        .arg("--init")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

struct Child {
    child: std::process::Child,
    base: String,
}

fn spawn(dir: &Path, envs: &[(&str, &str)]) -> Child {
    use std::io::BufRead;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pictor"));
    cmd.env("PICTOR_DATA_DIR", dir)
        .env("PICTOR_LOG", "warn")
        .args(["serve", "--listen", "127.0.0.1:0"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout).lines();
    let base = loop {
        let line = lines.next().unwrap().unwrap();
        if let Some(url) = line.split("is running at ").nth(1) {
            break url.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Child { child, base }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

async fn bench_me(dir: &Path) {
    cli(
        dir,
        &[
            "user",
            "add",
            "--email",
            "bench@example.com",
            "--credits",
            "10",
            "--json",
        ],
    );
    let key = cli(
        dir,
        &["key", "issue", "--email", "bench@example.com", "--json"],
    )["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let server = spawn(dir, &[]);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap();
    let url = format!("{}/api/pictor/v1/me", server.base);
    // Warm up.
    for _ in 0..200 {
        client
            .get(&url)
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let duration = Duration::from_secs(8);
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let (client, url, key, stop, count) = (
            client.clone(),
            url.clone(),
            key.clone(),
            stop.clone(),
            count.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let r = client.get(&url).bearer_auth(&key).send().await.unwrap();
                assert_eq!(r.status(), 200);
                r.bytes().await.unwrap();
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                count.fetch_add(1, Ordering::Relaxed);
            }
            lat
        }));
    }
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_by(f64::total_cmp);
    let n = count.load(Ordering::Relaxed);
    println!(
        "GET /me, 64 connections, {:.0} s: {} requests, {:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (server RSS {} MiB)",
        duration.as_secs_f64(),
        n,
        n as f64 / duration.as_secs_f64(),
        percentile(&all, 0.50),
        percentile(&all, 0.99),
        all.last().copied().unwrap_or(0.0),
        rss_kib(server.child.id()) / 1024
    );
    let mut c = server.child;
    c.kill().ok();
    c.wait().ok();
}

async fn bench_waiters(dir: &Path, waiters: usize) {
    cli(
        dir,
        &[
            "user",
            "add",
            "--email",
            "wait@example.com",
            "--credits",
            "10",
            "--json",
        ],
    );
    let key = cli(
        dir,
        &["key", "issue", "--email", "wait@example.com", "--json"],
    )["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    // Users whose single job is cancelled while the waiters are parked: each one's own waiter
    // measures how soon one wake follows its commit with 10,000 others asleep.
    let probes = 20;
    let probe_keys: Vec<String> = (0..probes)
        .map(|i| {
            let email = format!("probe{i}@example.com");
            cli(
                dir,
                &[
                    "user",
                    "add",
                    "--email",
                    &email,
                    "--credits",
                    "10",
                    "--json",
                ],
            );
            cli(dir, &["key", "issue", "--email", &email, "--json"])["api_key"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    // The render takes 8 s: long enough to park every waiter first and probe the wakes.
    let server = spawn(dir, &[("PICTOR_DEBUG_RENDER_DELAY_MS", "8000")]);
    let pid = server.child.id();
    let idle = rss_kib(pid);
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(waiters)
        .build()
        .unwrap();
    let r = client
        .post(format!("{}/api/pictor/v1/generate", server.base))
        .bearer_auth(&key)
        .json(&json!({"prompt": "bench"}))
        .send()
        .await
        .unwrap();
    let created: Value = r.json().await.unwrap();
    let url = format!("{}?wait=60", created["poll_url"].as_str().unwrap());
    let mut tasks = Vec::new();
    for _ in 0..waiters {
        let (client, url, key) = (client.clone(), url.clone(), key.clone());
        tasks.push(tokio::spawn(async move {
            let r = client.get(&url).bearer_auth(&key).send().await.unwrap();
            let v: Value = r.json().await.unwrap();
            (now_ms(), v)
        }));
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    let parked = rss_kib(pid);
    let probe_client = reqwest::Client::new();
    let mut one_wake = Vec::new();
    for key in &probe_keys {
        let r = probe_client
            .post(format!("{}/api/pictor/v1/generate", server.base))
            .bearer_auth(key)
            .json(&json!({"prompt": "probe"}))
            .send()
            .await
            .unwrap();
        let created: Value = r.json().await.unwrap();
        let poll = created["poll_url"].as_str().unwrap().to_string();
        let waiter = {
            let (c, url, key) = (probe_client.clone(), format!("{poll}?wait=30"), key.clone());
            tokio::spawn(async move {
                let v: Value = c
                    .get(&url)
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                (now_ms(), v)
            })
        };
        tokio::time::sleep(Duration::from_millis(30)).await;
        probe_client
            .post(format!("{poll}/cancel"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        let (at, v) = waiter.await.unwrap();
        assert_eq!(v["status"], "failed", "{v}");
        one_wake.push(at.saturating_sub(v["finished_at"].as_u64().unwrap()) as f64);
    }
    one_wake.sort_by(f64::total_cmp);
    let mut lat = Vec::new();
    let mut done = 0;
    for t in tasks {
        let (at, v) = t.await.unwrap();
        if v["status"] == "done" {
            done += 1;
            lat.push(at.saturating_sub(v["finished_at"].as_u64().unwrap()) as f64);
        }
    }
    lat.sort_by(f64::total_cmp);
    println!(
        "one wake with {waiters} others parked ({probes} cancelled jobs, each with its own waiter): after the commit p50 {:.0} ms, max {:.0} ms",
        percentile(&one_wake, 0.5),
        one_wake.last().copied().unwrap_or(0.0)
    );
    println!(
        "{waiters} concurrent wait polls: {done} returned done; server RSS idle {} MiB, with waiters parked {} MiB (+{:.1} KiB per waiter); all {waiters} answered after the finishing commit: p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        idle / 1024,
        parked / 1024,
        (parked.saturating_sub(idle)) as f64 / waiters as f64,
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or(0.0)
    );
    let mut c = server.child;
    c.kill().ok();
    c.wait().ok();
}

/// Renders nothing: a 1x1 picture, so only the engine's own work is measured.
struct NoOp;

impl Renderer for NoOp {
    fn generate(&self, _: &GenerateSpec) -> Result<Picture, RenderError> {
        Ok(Picture::from_rgba(1, 1, vec![0, 0, 0, 255]).unwrap())
    }
    fn edit(&self, _: &EditSpec) -> Result<Picture, RenderError> {
        Ok(Picture::from_rgba(1, 1, vec![0, 0, 0, 255]).unwrap())
    }
}

async fn bench_job_overhead(dir: &Path) {
    let mut config = Config::new(dir.to_path_buf());
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.render_workers = 1;
    let clock = Clock::default();
    let handle = Server::start(config, Arc::new(NoOp), clock.clone())
        .await
        .unwrap();
    let store = handle.state.store.clone();
    let users = 32;
    let mut keys = Vec::new();
    for i in 0..users {
        let email = format!("u{i}@example.com");
        ops::execute(
            &store,
            &handle.state.idp.secrets,
            AdminRequest::UserAdd {
                email: email.clone(),
                name: None,
                password_hash: None,
                admin: false,
                pro: true,
                credits: 100_000,
            },
            clock.now(),
        )
        .unwrap();
        store
            .update_user(
                &email,
                pictor::store::UserPatch {
                    daily_limit: Some(Some(1_000_000)),
                    ..Default::default()
                },
                clock.now(),
            )
            .unwrap();
        keys.push(
            ops::execute(
                &store,
                &handle.state.idp.secrets,
                AdminRequest::KeyIssue { email },
                clock.now(),
            )
            .unwrap()["api_key"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let client = reqwest::Client::new();
    let base = handle.base_url.clone();
    let one = move |key: String| {
        let (client, base) = (client.clone(), base.clone());
        async move {
            let t = Instant::now();
            let r = client
                .post(format!("{base}/api/pictor/v1/generate"))
                .bearer_auth(&key)
                .json(&json!({"prompt": "x"}))
                .send()
                .await
                .unwrap();
            let c: Value = r.json().await.unwrap();
            let url = format!("{}?wait=60", c["poll_url"].as_str().unwrap());
            let v: Value = client
                .get(&url)
                .bearer_auth(&key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(v["status"], "done");
            t.elapsed().as_secs_f64() * 1000.0
        }
    };
    // Sequential: create → done latency of one job at a time.
    let mut lat = Vec::new();
    for _ in 0..300 {
        lat.push(one(keys[0].clone()).await);
    }
    lat.sort_by(f64::total_cmp);
    println!(
        "job create → done (no-op renderer, one at a time, 300 jobs): p50 {:.2} ms, p99 {:.2} ms",
        percentile(&lat, 0.5),
        percentile(&lat, 0.99)
    );
    // Throughput: 32 users each running jobs back to back.
    let per_user = 150;
    let before = store.commit_counts();
    let cpu_before = util::cpu_seconds(std::process::id());
    let t = Instant::now();
    let mut tasks = Vec::new();
    for key in keys.clone() {
        let one = one.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_user {
                one(key.clone()).await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let total = users * per_user;
    let elapsed = t.elapsed().as_secs_f64();
    let cpu = util::cpu_seconds(std::process::id()) - cpu_before;
    let (flushes, commits) = store.commit_counts();
    let (flushes, commits) = (flushes - before.0, commits - before.1);
    println!(
        "job throughput (no-op renderer, {users} users, {total} jobs): {:.0} jobs/s; {flushes} fsyncs for {commits} commits; client and server together {:.2} CPU-ms per job ({:.2} cores busy)",
        total as f64 / elapsed,
        cpu * 1000.0 / total as f64,
        cpu / elapsed
    );
    handle.shutdown().await;
}

/// The store alone: 32 threads each running create → start → finish back to back (the three
/// durable state changes of a job, no HTTP, no render), the ceiling the job engine works under.
fn bench_store_jobs(dir: &Path) {
    use pictor::store::{FinishOutcome, JobId, JobModel, NewJob, Store};
    let store = Store::open(&dir.join("pictor.redb")).unwrap();
    let clock = Clock::default();
    let (threads, per_thread) = (32, 100);
    let mut ids = Vec::new();
    for i in 0..threads {
        let user = store
            .create_user(
                pictor::store::NewUser {
                    email: format!("s{i}@example.com"),
                    name: None,
                    password_hash: None,
                    admin: false,
                    pro: true,
                    credits: 1_000_000,
                    pending_credits: 0,
                },
                clock.now(),
            )
            .unwrap();
        store
            .update_user(
                &user.email,
                pictor::store::UserPatch {
                    daily_limit: Some(Some(1_000_000)),
                    ..Default::default()
                },
                clock.now(),
            )
            .unwrap();
        ids.push(user.id);
    }
    let before = store.commit_counts();
    let t = Instant::now();
    std::thread::scope(|s| {
        for &user_id in &ids {
            let (store, clock) = (&store, &clock);
            s.spawn(move || {
                for _ in 0..per_thread {
                    let job = store
                        .create_job(
                            NewJob {
                                id: JobId::new(),
                                user_id,
                                model: JobModel::Generate(pictor::catalog::Model::Fast),
                                ratio: "1:1".into(),
                                prompt: "x".into(),
                                enhance: false,
                                enhanced_prompt: None,
                                seed: 1,
                                noise: None,
                                loras: Vec::new(),
                                webhook_url: None,
                                client: None,
                                masked: false,
                            },
                            clock.now(),
                        )
                        .unwrap();
                    store.start_job(job.job_id(), clock.now()).unwrap();
                    store
                        .finish_job(
                            job.job_id(),
                            FinishOutcome::Done {
                                photo_token: "t".into(),
                                width: 1,
                                height: 1,
                                scene: None,
                            },
                            clock.now(),
                        )
                        .unwrap();
                }
            });
        }
    });
    let total = threads * per_thread;
    let after = store.commit_counts();
    println!(
        "store alone ({threads} threads, {total} jobs of 3 durable commits): {:.0} jobs/s, {} fsyncs for {} commits",
        total as f64 / t.elapsed().as_secs_f64(),
        after.0 - before.0,
        after.1 - before.1
    );
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing and must stay quick.
    if !std::env::args().any(|a| a == "--bench") {
        println!("api bench: skipped (run with `cargo bench --bench api`)");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        println!(
            "machine: {} cores; {}",
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(0),
            std::env::consts::ARCH
        );
        // API_BENCH=me,waiters,jobs runs only those parts.
        let only = std::env::var("API_BENCH").unwrap_or_default();
        let wanted = |part: &str| only.is_empty() || only.split(',').any(|p| p.trim() == part);
        if wanted("me") {
            bench_me(tempfile::tempdir().unwrap().path()).await;
        }
        if wanted("waiters") {
            bench_waiters(tempfile::tempdir().unwrap().path(), 10_000).await;
        }
        if wanted("store") {
            bench_store_jobs(tempfile::tempdir().unwrap().path());
        }
        if wanted("jobs") {
            bench_job_overhead(tempfile::tempdir().unwrap().path()).await;
        }
    });
}
