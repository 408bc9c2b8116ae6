//! Restart recovery with the real binary: SIGKILL mid-job, start again, the job resolves and the
//! books balance; an edit whose upload is truly gone fails with `source_missing` and a refund.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use pictor::store::{LedgerReason, Store};
use serde_json::{Value, json};

/// Polls the job until its status is `want`.
async fn wait_status(server: &impl Api, key: &str, id: &str, want: &str) -> Value {
    server
        .wait_for_job(key, id, want, |v| v["status"] == want)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_job_resumes_and_charges_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = cli_user_key(d, "k@example.com", 20);

    // A slow renderer: the job is surely running when we kill the process.
    let server = spawn_server(d, &[("PICTOR_DEBUG_RENDER_DELAY_MS", "60000")]);
    let (st, c) = server
        .generate(&key, json!({"prompt": "a lighthouse", "model": "artist"}))
        .await;
    assert_eq!(st, 202);
    let id = c["job_id"].as_str().unwrap().to_string();
    let running = wait_status(&server, &key, &id, "running").await;
    assert_eq!(running["balance"], 15, "charged at start");
    server.kill9();

    let server = spawn_server(d, &[]);
    let (_, done) = server
        .get(&key, &format!("/api/pictor/v1/jobs/{id}?wait=60"))
        .await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["balance"], 15, "not charged twice");
    server.download(done["photo_url"].as_str().unwrap()).await;
    assert_eq!(server.me(&key).await["active_job"], json!(null));
    server.terminate();

    let store = Store::open(&d.join("pictor.redb")).unwrap();
    let user = store.user_by_email("k@example.com").unwrap().unwrap();
    let ledger = store.ledger(user.id).unwrap();
    assert_eq!(
        ledger
            .iter()
            .filter(|e| e.reason == LedgerReason::Charge)
            .count(),
        1
    );
    assert_eq!(ledger.iter().map(|e| e.delta).sum::<i64>(), user.balance);
    assert_eq!(user.balance, 15);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_with_lost_source_fails_source_missing_with_refund() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = cli_user_key(d, "e@example.com", 10);
    let server = spawn_server(d, &[("PICTOR_DEBUG_RENDER_DELAY_MS", "60000")]);
    let form = reqwest::multipart::Form::new()
        .part(
            "image",
            reqwest::multipart::Part::bytes(png_bytes(40, 30)).file_name("a.png"),
        )
        .text("prompt", "make it black and white");
    let (st, c) = server.edit_form(&key, form).await;
    assert_eq!(st, 202, "{c}");
    let id = c["job_id"].as_str().unwrap().to_string();
    // The upload is on disk before the 202.
    assert_eq!(std::fs::read_dir(d.join("sources")).unwrap().count(), 1);
    wait_status(&server, &key, &id, "running").await;
    server.kill9();
    for f in std::fs::read_dir(d.join("sources")).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    let server = spawn_server(d, &[]);
    let (_, v) = server
        .get(&key, &format!("/api/pictor/v1/jobs/{id}?wait=60"))
        .await;
    assert_eq!(v["status"], "failed");
    assert_eq!(v["error_code"], "source_missing");
    assert_eq!(v["balance"], 10);
    server.terminate();
}

/// Starts the job's renders (a minute-long render each time) and SIGKILLs the server while it
/// runs, `times` times; returns the server started after the last kill.
async fn interrupt(
    d: &std::path::Path,
    key: &str,
    id: &str,
    mut server: ChildServer,
    times: usize,
) -> ChildServer {
    for attempt in 1..=times {
        let running = wait_status(&server, key, id, "running").await;
        assert_eq!(
            running["balance"], 15,
            "attempt {attempt}: charged once, at the first start"
        );
        server.kill9();
        server = spawn_server(d, &[("PICTOR_DEBUG_RENDER_DELAY_MS", "60000")]);
    }
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_interrupted_three_times_is_given_up_with_a_refund() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = cli_user_key(d, "i@example.com", 20);
    let server = spawn_server(d, &[("PICTOR_DEBUG_RENDER_DELAY_MS", "60000")]);
    let (st, c) = server
        .generate(&key, json!({"prompt": "a lighthouse", "model": "artist"}))
        .await;
    assert_eq!(st, 202, "{c}");
    let id = c["job_id"].as_str().unwrap().to_string();
    // Interrupted twice: it runs a third time.
    let server = interrupt(d, &key, &id, server, 2).await;
    let third = wait_status(&server, &key, &id, "running").await;
    assert_eq!(third["balance"], 15);
    // The third interruption gives it up: failed, credits and daily slot returned.
    server.kill9();
    let server = spawn_server(d, &[]);
    let (_, v) = server.get(&key, &format!("/api/pictor/v1/jobs/{id}")).await;
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["error_code"], "generation_failed", "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("interrupted by 3 server restarts"),
        "{v}"
    );
    assert_eq!(v["balance"], 20, "{v}");
    let me = server.me(&key).await;
    assert_eq!(
        (me["daily_used"].as_u64(), &me["active_job"]),
        (Some(0), &json!(null)),
        "{me}"
    );
    server.terminate();
    let store = Store::open(&d.join("pictor.redb")).unwrap();
    let job = store.all_jobs().unwrap().pop().unwrap();
    assert_eq!(job.attempts, 3);
    let mismatches = books_mismatches(&store, d);
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_left_queued_run_after_a_restart_in_creation_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let keys: Vec<String> = (0..4)
        .map(|i| cli_user_key(d, &format!("q{i}@example.com"), 20))
        .collect();
    // One render slot held by a minute-long render: the other three jobs stay queued.
    let server = spawn_server(
        d,
        &[
            ("PICTOR_DEBUG_RENDER_DELAY_MS", "60000"),
            ("PICTOR_RENDER_WORKERS", "1"),
        ],
    );
    let mut ids = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let (st, c) = server
            .generate(
                key,
                json!({"prompt": format!("queued {i}"), "model": "fast"}),
            )
            .await;
        assert_eq!(st, 202, "{c}");
        let id = c["job_id"].as_str().unwrap().to_string();
        let want = if i == 0 { "running" } else { "queued" };
        let v = wait_status(&server, key, &id, want).await;
        if i > 0 {
            assert_eq!(v["balance"], 20, "a queued job is not charged yet");
        }
        ids.push(id);
    }
    server.kill9();
    // Restarted with 200 ms renders in one slot: every job runs, one after another, in the
    // order they were created (the interrupted one first).
    let server = spawn_server(
        d,
        &[
            ("PICTOR_DEBUG_RENDER_DELAY_MS", "200"),
            ("PICTOR_RENDER_WORKERS", "1"),
        ],
    );
    let mut spans = Vec::new();
    for (key, id) in keys.iter().zip(&ids) {
        let (_, v) = server
            .get(key, &format!("/api/pictor/v1/jobs/{id}?wait=60"))
            .await;
        assert_eq!(v["status"], "done", "{v}");
        assert_eq!(
            v["balance"].as_i64().unwrap(),
            20 - v["cost"].as_i64().unwrap(),
            "charged once: {v}"
        );
        spans.push((
            v["started_at"].as_u64().unwrap(),
            v["finished_at"].as_u64().unwrap(),
        ));
    }
    // Each starts when the one created before it has had its render (200 ms) in the one slot.
    for w in spans.windows(2) {
        assert!(
            w[1].0 >= w[0].0 + 200,
            "not one after another in creation order: {spans:?}"
        );
    }
    server.terminate();
    let store = Store::open(&d.join("pictor.redb")).unwrap();
    let mismatches = books_mismatches(&store, d);
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}
