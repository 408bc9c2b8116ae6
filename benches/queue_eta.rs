//! Queue-ETA accuracy under load (`cargo bench --bench queue_eta`): how well a job's
//! `queue_position` and `eta_seconds`, read right after it is created, predict when its render
//! really starts (`started_at`).
//!
//! An in-process server with 2 render slots and a renderer that sleeps like real models do
//! (fast 150 ms, artist 450 ms, 0.2plus 900 ms, each ±25 % at random); 40 users in a closed
//! loop, each creating a job of a random model, waiting for it, then thinking 0–6 s (3 s on
//! average), so a queue of 20–30 jobs builds up and drains. Numbers go into the README; nothing
//! here asserts a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use pictor::app::Server;
use pictor::clock::Clock;
use pictor::config::Config;
use pictor::ops::{self, AdminRequest};
use pictor::render::{EditSpec, GenerateSpec, Model, Picture, RenderError, Renderer};
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

/// Sleeps like a model of that size, ±25 %.
struct Timed;

impl Renderer for Timed {
    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError> {
        let base = match spec.model {
            Model::Fast => 150.0,
            Model::Artist => 450.0,
            Model::Plus => 900.0,
        };
        let k: f64 = rand::rng().random_range(0.75..1.25);
        std::thread::sleep(Duration::from_secs_f64(base * k / 1000.0));
        Ok(Picture::from_rgba(1, 1, vec![0, 0, 0, 255]).unwrap())
    }
    fn edit(&self, _: &EditSpec) -> Result<Picture, RenderError> {
        Ok(Picture::from_rgba(1, 1, vec![0, 0, 0, 255]).unwrap())
    }
}

struct Sample {
    position: u64,
    /// Predicted start (ms since the epoch): observation time + eta.
    predicted: f64,
    observed_at: f64,
    started: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        * 1000.0
}

async fn run(duration: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path().to_path_buf());
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.render_workers = 2;
    config.queue_size = 1000;
    let clock = Clock::default();
    let handle = Server::start(config, Arc::new(Timed), clock.clone())
        .await
        .unwrap();
    let store = handle.state.store.clone();
    let users = 40;
    let mut keys = Vec::new();
    for i in 0..users {
        let email = format!("u{i}@example.com");
        let exec = |req| ops::execute(&store, &handle.state.idp.secrets, req, clock.now()).unwrap();
        exec(AdminRequest::UserAdd {
            email: email.clone(),
            name: None,
            password_hash: None,
            admin: false,
            pro: true,
            credits: 1_000_000,
        });
        exec(AdminRequest::UserUpdate {
            email: email.clone(),
            pro: None,
            banned: None,
            daily_limit: Some(1_000_000),
            admin: None,
            approve: false,
        });
        keys.push(
            exec(AdminRequest::KeyIssue { email })["api_key"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let client = reqwest::Client::new();
    let base = handle.base_url.clone();
    let end = Instant::now() + duration;
    let mut tasks = Vec::new();
    for (n, key) in keys.into_iter().enumerate() {
        let (client, base) = (client.clone(), base.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(n as u64);
            let mut samples = Vec::new();
            // Spread the first arrivals over the first 2 s.
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..2000))).await;
            while Instant::now() < end {
                let model = ["fast", "artist", "0.2plus"][rng.random_range(0..3)];
                let c: Value = client
                    .post(format!("{base}/api/pictor/v1/generate"))
                    .bearer_auth(&key)
                    .json(&json!({"prompt": "x", "model": model, "enhance": false}))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let url = c["poll_url"].as_str().unwrap().to_string();
                let observed_at = now_ms();
                let first: Value = client
                    .get(&url)
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let done: Value = client
                    .get(format!("{url}?wait=90"))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert_eq!(done["status"], "done", "{done}");
                if let (Some(pos), Some(eta)) = (
                    first["queue_position"].as_u64(),
                    first["eta_seconds"].as_f64(),
                ) {
                    samples.push(Sample {
                        position: pos,
                        predicted: observed_at + eta * 1000.0,
                        observed_at,
                        started: done["started_at"].as_f64().unwrap(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(rng.random_range(0..6000))).await;
            }
            samples
        }));
    }
    let mut samples = Vec::new();
    for t in tasks {
        samples.extend(t.await.unwrap());
    }
    handle.shutdown().await;

    // Only jobs that really waited say anything about the prediction.
    let waited: Vec<&Sample> = samples.iter().filter(|s| s.position > 1).collect();
    let mut abs: Vec<f64> = waited
        .iter()
        .map(|s| (s.predicted - s.started).abs() / 1000.0)
        .collect();
    abs.sort_by(f64::total_cmp);
    let bias = waited
        .iter()
        .map(|s| (s.predicted - s.started) / 1000.0)
        .sum::<f64>()
        / waited.len() as f64;
    let mut rel: Vec<f64> = waited
        .iter()
        .filter(|s| s.started - s.observed_at > 1000.0)
        .map(|s| (s.predicted - s.started).abs() / (s.started - s.observed_at))
        .collect();
    rel.sort_by(f64::total_cmp);
    let mut waits: Vec<f64> = waited
        .iter()
        .map(|s| (s.started - s.observed_at) / 1000.0)
        .collect();
    waits.sort_by(f64::total_cmp);
    let max_pos = waited.iter().map(|s| s.position).max().unwrap_or(0);
    println!(
        "queue ETA: {} jobs with an ETA, {} waited behind others (position up to {max_pos}; actual wait p50 {:.1} s, p90 {:.1} s)",
        samples.len(),
        waited.len(),
        percentile(&waits, 0.5),
        percentile(&waits, 0.9)
    );
    println!(
        "  |predicted − actual start|: p50 {:.2} s, p90 {:.2} s, max {:.2} s; bias {:+.2} s (positive = predicted late)",
        percentile(&abs, 0.5),
        percentile(&abs, 0.9),
        abs.last().copied().unwrap_or(f64::NAN),
        bias
    );
    println!(
        "  relative to the wait (waits > 1 s, {} jobs): p50 {:.0} %, p90 {:.0} %",
        rel.len(),
        percentile(&rel, 0.5) * 100.0,
        percentile(&rel, 0.9) * 100.0
    );
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("queue_eta bench: skipped (run with `cargo bench --bench queue_eta`)");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "machine: {} cores; {}",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0),
        std::env::consts::ARCH
    );
    rt.block_on(run(Duration::from_secs(60)));
}
