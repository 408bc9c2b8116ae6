//! Restart recovery with the real binary: SIGKILL mid-job, start again, the job resolves and the
//! books balance; an edit whose upload is truly gone fails with `source_missing` and a refund.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::*;
use pictor::store::{LedgerReason, Store};
use serde_json::{Value, json};

async fn wait_status(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    id: &str,
    want: &str,
) -> Value {
    for _ in 0..200 {
        let r = client
            .get(format!("{base}/api/pictor/v1/jobs/{id}"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        let (_, v) = status_json(r).await;
        if v["status"] == want {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("job {id} never reached {want}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_job_resumes_and_charges_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = cli_user_key(d, "k@example.com", 20);
    let client = reqwest::Client::new();

    // A slow renderer: the job is surely running when we kill the process.
    let server = spawn_server(d, &[("PICTOR_DEBUG_RENDER_DELAY_MS", "60000")]);
    let r = client
        .post(format!("{}/api/pictor/v1/generate", server.base))
        .bearer_auth(&key)
        .json(&json!({"prompt": "a lighthouse", "model": "artist"}))
        .send()
        .await
        .unwrap();
    let (st, c) = status_json(r).await;
    assert_eq!(st, 202);
    let id = c["job_id"].as_str().unwrap().to_string();
    let running = wait_status(&client, &server.base, &key, &id, "running").await;
    assert_eq!(running["balance"], 15, "charged at start");
    server.kill9();

    let server = spawn_server(d, &[]);
    let r = client
        .get(format!("{}/api/pictor/v1/jobs/{id}?wait=60", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let (_, done) = status_json(r).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["balance"], 15, "not charged twice");
    let img = client
        .get(done["photo_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert!(image::load_from_memory(&img).is_ok());
    let r = client
        .get(format!("{}/api/pictor/v1/me", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(r).await.1["active_job"], json!(null));
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
    let client = reqwest::Client::new();
    let server = spawn_server(d, &[("PICTOR_DEBUG_RENDER_DELAY_MS", "60000")]);
    let form = reqwest::multipart::Form::new()
        .part(
            "image",
            reqwest::multipart::Part::bytes(png_bytes(40, 30)).file_name("a.png"),
        )
        .text("prompt", "make it black and white");
    let r = client
        .post(format!("{}/api/pictor/v1/edit", server.base))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let (st, c) = status_json(r).await;
    assert_eq!(st, 202, "{c}");
    let id = c["job_id"].as_str().unwrap().to_string();
    // The upload is on disk before the 202.
    assert_eq!(std::fs::read_dir(d.join("sources")).unwrap().count(), 1);
    wait_status(&client, &server.base, &key, &id, "running").await;
    server.kill9();
    for f in std::fs::read_dir(d.join("sources")).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    let server = spawn_server(d, &[]);
    let r = client
        .get(format!("{}/api/pictor/v1/jobs/{id}?wait=60", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let (_, v) = status_json(r).await;
    assert_eq!(v["status"], "failed");
    assert_eq!(v["error_code"], "source_missing");
    assert_eq!(v["balance"], 10);
    server.terminate();
}
