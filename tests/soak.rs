//! Crash safety under load: at least 1,000 jobs from many users (generations and edits, some
//! renders failing on purpose) while the real binary is SIGKILLed at random moments at least 10
//! times and restarted. Then, from the store file itself: every job is done or failed, none was
//! charged or refunded twice, each balance equals its ledger and grants − charges + refunds, and
//! nobody is stuck with an active job. Prints the figures.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use pictor::clock::Clock;
use pictor::ops::{self, AdminRequest};
use pictor::store::{JobStatus, Store, UserPatch};
use rand::RngExt;
use serde_json::json;

const USERS: usize = 40;
const TARGET_JOBS: usize = 1000;
const MIN_KILLS: usize = 10;
/// How long a client follows one accepted job before calling it lost (a job takes milliseconds;
/// a restart a second or two).
const JOB_DEADLINE: Duration = Duration::from_secs(120);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(dir: &std::path::Path, port: u16) -> std::process::Child {
    let mut child = pictor_cmd(dir)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("PICTOR_DEBUG_FLAT_RENDER", "1")
        .env("PICTOR_DEBUG_FAIL_PROMPT", "[fail]")
        .env("PICTOR_LOG", "warn")
        .env("PICTOR_RENDER_WORKERS", "4")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains("is running at") => break,
            Some(_) => {}
            None => panic!("the server did not start"),
        }
    }
    std::thread::spawn(move || for _ in lines {});
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_survive_repeated_sigkill_with_books_balanced() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    // Users, keys and credits, written directly into the store before the server starts.
    let keys: Vec<String> = {
        let store = Store::open(&d.join("pictor.redb")).unwrap();
        let secrets = pictor::idp::crypto::SecretBox::open_or_create(&d).unwrap();
        let now = Clock::default().now();
        (0..USERS)
            .map(|i| {
                let email = format!("soak{i}@example.com");
                ops::execute(
                    &store,
                    &secrets,
                    AdminRequest::UserAdd {
                        email: email.clone(),
                        name: None,
                        password_hash: None,
                        admin: false,
                        pro: i % 2 == 0,
                        credits: 100_000,
                    },
                    now,
                )
                .unwrap();
                store
                    .update_user(
                        &email,
                        UserPatch {
                            daily_limit: Some(Some(1_000_000)),
                            ..Default::default()
                        },
                        now,
                    )
                    .unwrap();
                ops::execute(&store, &secrets, AdminRequest::KeyIssue { email }, now).unwrap()["api_key"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    };
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let server = Arc::new(Mutex::new(Some(start(&d, port))));
    let accepted = Arc::new(Mutex::new(BTreeSet::<String>::new()));
    let stop_load = Arc::new(AtomicBool::new(false));
    let errors_seen = Arc::new(AtomicUsize::new(0));
    let lost = Arc::new(Mutex::new(Vec::<String>::new()));
    let png = png_bytes(48, 32);
    let started = Instant::now();

    let mut workers = Vec::new();
    for key in keys.clone() {
        let (base, accepted, stop_load, errors_seen, png) = (
            base.clone(),
            accepted.clone(),
            stop_load.clone(),
            errors_seen.clone(),
            png.clone(),
        );
        let lost = lost.clone();
        workers.push(tokio::spawn(async move {
            let http = reqwest::Client::builder().timeout(Duration::from_secs(20)).build().unwrap();
            while !stop_load.load(Ordering::Relaxed) {
                let (edit, fail) = {
                    let mut rng = rand::rng();
                    (rng.random_range(0..5) == 0, rng.random_range(0..10) == 0)
                };
                let prompt = if fail { "make it grayscale [fail]" } else { "make it grayscale" };
                let sent = if edit {
                    let form = reqwest::multipart::Form::new()
                        .part("image", reqwest::multipart::Part::bytes(png.clone()).file_name("a.png"))
                        .text("prompt", prompt.to_string());
                    http.post(format!("{base}/api/pictor/v1/edit")).bearer_auth(&key).multipart(form).send().await
                } else {
                    http.post(format!("{base}/api/pictor/v1/generate")).bearer_auth(&key).json(&json!({"prompt": prompt.replace("make it grayscale", "a flat test picture")})).send().await
                };
                let Ok(r) = sent else {
                    errors_seen.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let status = r.status().as_u16();
                let Ok(body) = r.json::<serde_json::Value>().await else {
                    errors_seen.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if status == 409 {
                    // The previous job is still active (e.g. its 202 was lost in a kill): wait for it.
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    continue;
                }
                assert_eq!(status, 202, "{body}");
                let id = body["job_id"].as_str().unwrap().to_string();
                accepted.lock().unwrap().insert(id.clone());
                // Poll until it ends, riding out kills and restarts. An accepted job that the
                // server no longer knows (404), or that does not end within the deadline, is a
                // mismatch, not a hang.
                let deadline = Instant::now() + JOB_DEADLINE;
                loop {
                    if Instant::now() > deadline {
                        lost.lock().unwrap().push(format!("{id} did not end within {JOB_DEADLINE:?}"));
                        break;
                    }
                    match http.get(format!("{base}/api/pictor/v1/jobs/{id}?wait=5")).bearer_auth(&key).send().await {
                        Ok(r) => {
                            let status = r.status().as_u16();
                            let Ok(v) = r.json::<serde_json::Value>().await else {
                                // The connection died mid-answer (a kill): ride it out.
                                errors_seen.fetch_add(1, Ordering::Relaxed);
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                continue;
                            };
                            if status == 404 {
                                lost.lock().unwrap().push(format!("accepted job {id} answered 404: {v}"));
                                break;
                            }
                            assert_eq!(status, 200, "{v}");
                            if v["status"] == "done" || v["status"] == "failed" {
                                break;
                            }
                        }
                        Err(_) => {
                            errors_seen.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(50)).await
                        }
                    }
                }
            }
        }));
    }

    // The killer: SIGKILL at random moments spread over the whole run (when the count of accepted
    // jobs passes random thresholds), restarting at once on the same port.
    let mut thresholds: Vec<usize> = {
        let mut rng = rand::rng();
        (0..MIN_KILLS + 2)
            .map(|_| rng.random_range(10..TARGET_JOBS - 20))
            .collect()
    };
    thresholds.sort();
    let mut kills = 0;
    while accepted.lock().unwrap().len() < TARGET_JOBS {
        let jitter = rand::rng().random_range(0..40);
        tokio::time::sleep(Duration::from_millis(20 + jitter)).await;
        let n = accepted.lock().unwrap().len();
        if thresholds.first().is_some_and(|t| n >= *t) {
            thresholds.remove(0);
            let mut guard = server.lock().unwrap();
            let mut child = guard.take().unwrap();
            child.kill().unwrap();
            child.wait().unwrap();
            kills += 1;
            *guard = Some(start(&d, port));
        }
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "soak took too long"
        );
    }
    stop_load.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let accepted: BTreeSet<String> = accepted.lock().unwrap().clone();
    let mut child = server.lock().unwrap().take().unwrap();
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();

    // The audit, from the store file.
    let store = Store::open(&d.join("pictor.redb")).unwrap();
    let jobs = store.all_jobs().unwrap();
    let by_id: BTreeMap<String, &pictor::store::JobRecord> =
        jobs.iter().map(|j| (j.job_id().to_string(), j)).collect();
    let mut mismatches = lost.lock().unwrap().clone();
    for id in &accepted {
        if !by_id.contains_key(id) {
            mismatches.push(format!("accepted job {id} is not in the store"));
        }
    }
    let (mut done, mut failed) = (0, BTreeMap::<String, usize>::new());
    for j in &jobs {
        match j.status {
            JobStatus::Done => done += 1,
            JobStatus::Failed => {
                *failed
                    .entry(
                        j.error_code
                            .map(|c| c.as_str().to_string())
                            .unwrap_or_default(),
                    )
                    .or_default() += 1
            }
            _ => {}
        }
    }
    mismatches.extend(books_mismatches(&store, &d));
    println!(
        "soak: {} jobs accepted by clients, {} in the store, {} done, failed {:?}; {} SIGKILLs; {} client errors ridden out; {:.0} s; mismatches = {}",
        accepted.len(),
        jobs.len(),
        done,
        failed,
        kills,
        errors_seen.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{mismatches:#?}");
    assert!(accepted.len() >= TARGET_JOBS);
    assert!(kills >= MIN_KILLS);
    assert!(
        failed.get("generation_failed").copied().unwrap_or(0)
            + failed.get("edit_failed").copied().unwrap_or(0)
            > 0,
        "some renders failed on purpose"
    );
}
