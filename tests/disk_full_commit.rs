//! A full disk under the store file itself: requests that need a commit fail cleanly (JSON 500,
//! nothing half-made), the store stays readable, and after room is made and the server restarts,
//! every job is resolved and the books balance. Root only (tmpfs), like tests/disk_full.rs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use pictor::store::Store;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_disk_under_the_store_fails_cleanly_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let Some(_mount) = mount_tmpfs(&data, "24m") else {
        return;
    };
    let d = data.clone();
    let key = tokio::task::spawn_blocking(move || {
        cli_json(
            &d,
            &[
                "user",
                "add",
                "--email",
                "f@example.com",
                "--credits",
                "100",
                "--pro",
                "--json",
            ],
            None,
        );
        cli_json(
            &d,
            &["key", "issue", "--email", "f@example.com", "--json"],
            None,
        )["api_key"]
            .as_str()
            .unwrap()
            .to_string()
    })
    .await
    .unwrap();
    let server = spawn_server(&data, &[("PICTOR_DEBUG_FLAT_RENDER", "1")]);
    let http = reqwest::Client::new();
    let generate = |base: String| {
        let (http, key) = (http.clone(), key.clone());
        async move {
            http.post(format!("{base}/api/pictor/v1/generate"))
                .bearer_auth(&key)
                .json(&json!({"prompt": "full"}))
                .send()
                .await
        }
    };
    // One job works.
    let (st, c) = status_json(generate(server.base.clone()).await.unwrap()).await;
    assert_eq!(st, 202);
    http.get(format!("{}?wait=30", c["poll_url"].as_str().unwrap()))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();

    // Fill the filesystem completely.
    let filler = data.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![1u8; 64 * 1024];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }
    // Requests keep getting clear answers; nothing panics.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        match generate(server.base.clone()).await {
            Ok(r) => {
                let (st, v) = status_json(r).await;
                assert!(v["ok"].is_boolean(), "{v}");
                if st == 202 {
                    http.get(format!("{}?wait=10", v["poll_url"].as_str().unwrap()))
                        .bearer_auth(&key)
                        .send()
                        .await
                        .unwrap();
                }
                statuses.push(st);
            }
            Err(e) => panic!("the server stopped answering: {e}"),
        }
    }
    println!("disk full: generate answered {statuses:?}");
    let me = http
        .get(format!("{}/api/pictor/v1/me", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 200, "reads still work on a full disk");

    // Make room, restart: every job resolved, books balanced.
    std::fs::remove_file(&filler).unwrap();
    server.kill9();
    let server = spawn_server(&data, &[("PICTOR_DEBUG_FLAT_RENDER", "1")]);
    let (st, c) = status_json(generate(server.base.clone()).await.unwrap()).await;
    assert!(st == 202 || st == 409, "{c}");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    server.terminate();
    let store = Store::open(&data.join("pictor.redb")).unwrap();
    for j in store.all_jobs().unwrap() {
        assert!(j.status.is_terminal(), "{} left {:?}", j.job_id(), j.status);
    }
    for u in store.users().unwrap() {
        assert_eq!(
            u.balance,
            store
                .ledger(u.id)
                .unwrap()
                .iter()
                .map(|e| e.delta)
                .sum::<i64>()
        );
        assert!(store.active_job(u.id).unwrap().is_none());
    }
}
