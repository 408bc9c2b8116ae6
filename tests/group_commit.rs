//! Group commit under a crash: many clients create (and half of them cancel) jobs at once, so
//! the store shares fsyncs
//! among their transactions (checked on `/metrics`: fewer durable flushes than commits); the
//! real binary is SIGKILLed in the middle of that, three times. After each restart every job
//! whose 202 a client received is still there (nothing was acknowledged before it was
//! durable), and at the end the books balance from the store file itself.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use pictor::store::Store;
use serde_json::{Value, json};

const USERS: usize = 12;
const ROUNDS: usize = 3;

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}")) as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_a_kill_during_batched_commits() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_path_buf();
    let d = data.clone();
    let keys: Vec<String> = tokio::task::spawn_blocking(move || {
        (0..USERS)
            .map(|i| cli_user_key(&d, &format!("g{i}@example.com"), 100_000))
            .collect()
    })
    .await
    .unwrap();
    let envs = [
        ("PICTOR_DEBUG_FLAT_RENDER", "1"),
        ("PICTOR_METRICS_TOKEN", "metrics-token-0123456789"),
        ("PICTOR_LOG", "warn"),
        ("PICTOR_RENDER_WORKERS", "4"),
    ];
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    // Every job a client was told about (202), over all rounds.
    let acknowledged: Arc<Mutex<Vec<(usize, String)>>> = Arc::default();
    for round in 0..ROUNDS {
        let server = spawn_server(&data, &envs);
        let stop = Arc::new(AtomicBool::new(false));
        let mut clients = Vec::new();
        for (u, key) in keys.iter().enumerate() {
            let (http, key, base) = (http.clone(), key.clone(), server.base.clone());
            let (stop, acked) = (stop.clone(), acknowledged.clone());
            clients.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(r) = http
                        .post(format!("{base}/api/pictor/v1/generate"))
                        .bearer_auth(&key)
                        .json(&json!({"prompt": format!("round {round}")}))
                        .send()
                        .await
                    else {
                        break;
                    };
                    let status = r.status().as_u16();
                    let Ok(body) = r.json::<Value>().await else {
                        break;
                    };
                    match status {
                        202 => {
                            let id = body["job_id"].as_str().unwrap().to_string();
                            acked.lock().unwrap().push((u, id.clone()));
                            // Half the users cancel at once (cheap commits with refunds), the
                            // others follow the job to the end (one active job per user).
                            if u % 2 == 0 {
                                let _ = http
                                    .post(format!("{base}/api/pictor/v1/jobs/{id}/cancel"))
                                    .bearer_auth(&key)
                                    .send()
                                    .await;
                            }
                            let _ = http
                                .get(format!("{base}/api/pictor/v1/jobs/{id}?wait=5"))
                                .bearer_auth(&key)
                                .send()
                                .await;
                        }
                        409 => tokio::time::sleep(Duration::from_millis(2)).await,
                        other => panic!("unexpected {other}: {body}"),
                    }
                }
            }));
        }
        // Let the load run, read the commit figures, and kill in the middle of it.
        tokio::time::sleep(Duration::from_millis(2500 + 400 * round as u64)).await;
        let text = http
            .get(format!("{}/metrics", server.base))
            .bearer_auth("metrics-token-0123456789")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let (commits, flushes) = (
            metric(&text, "pictor_store_commits "),
            metric(&text, "pictor_store_durable_flushes "),
        );
        println!("round {round}: {commits} commits in {flushes} durable flushes");
        assert!(commits > 100, "the load ran: {commits} commits");
        assert!(
            flushes < commits,
            "concurrent transactions shared fsyncs: {flushes} flushes for {commits} commits"
        );
        server.kill9();
        stop.store(true, Ordering::Relaxed);
        for c in clients {
            c.await.unwrap();
        }

        // Every acknowledged job is in the store after the kill.
        let d = data.clone();
        let acked = acknowledged.lock().unwrap().clone();
        let missing = tokio::task::spawn_blocking(move || {
            let store = Store::open(&d.join("pictor.redb")).unwrap();
            let ids: std::collections::HashSet<String> = store
                .all_jobs()
                .unwrap()
                .iter()
                .map(|j| j.job_id().to_string())
                .collect();
            acked
                .iter()
                .filter(|(_, id)| !ids.contains(id))
                .cloned()
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        assert!(
            missing.is_empty(),
            "round {round}: acknowledged jobs lost by the kill: {missing:?}"
        );
    }
    // The last restart resolves what the kill left running, then the books balance.
    let server = spawn_server(&data, &envs);
    let key = &keys[0];
    let (st, c) = status_json(
        http.post(format!("{}/api/pictor/v1/generate", server.base))
            .bearer_auth(key)
            .json(&json!({"prompt": "after"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(st == 202 || st == 409, "{st} {c}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.terminate();
    let store = Store::open(&data.join("pictor.redb")).unwrap();
    let jobs = store.all_jobs().unwrap();
    assert!(
        jobs.iter().all(|j| j.status.is_terminal()),
        "every job resolved after the restart"
    );
    println!(
        "{} jobs acknowledged over {ROUNDS} kills, {} in the store",
        acknowledged.lock().unwrap().len(),
        jobs.len()
    );
    let mismatches = books_mismatches(&store, &data);
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}

/// Writers arriving together share fsyncs: a flush covers every writer that queued before it
/// (the writer's turn is taken in arrival order). With redb's own lock alone, the thread whose
/// flush followed its commit took the writer again first and covered only itself: 16 writers
/// made almost one fsync per commit.
#[test]
fn concurrent_writers_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("pictor.redb")).unwrap();
    let (threads, each) = (16, 40);
    let before = store.commit_counts();
    std::thread::scope(|s| {
        for t in 0..threads {
            let store = &store;
            s.spawn(move || {
                for i in 0..each {
                    store
                        .create_user(
                            pictor::store::NewUser {
                                email: format!("w{t}-{i}@example.com"),
                                name: None,
                                password_hash: None,
                                admin: false,
                                pro: false,
                                credits: 1,
                                pending_credits: 0,
                            },
                            pictor::clock::Clock::default().now(),
                        )
                        .unwrap();
                }
            });
        }
    });
    let after = store.commit_counts();
    let (flushes, commits) = (after.0 - before.0, after.1 - before.1);
    println!("{commits} commits in {flushes} durable flushes");
    assert_eq!(commits, threads * each);
    assert!(
        flushes * 3 <= commits,
        "writers waiting together share a flush: {flushes} flushes for {commits} commits"
    );
    // Every one of them is durable and readable.
    assert_eq!(store.users().unwrap().len() as u64, commits);
}
