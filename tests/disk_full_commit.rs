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
    assert_eq!(st, 202, "{c}");
    let first = get_json(
        &http,
        &format!("{}?wait=30", c["poll_url"].as_str().unwrap()),
        &key,
    )
    .await;
    assert_eq!(first["status"], "done", "{first}");

    // Fill the filesystem completely.
    let filler = data.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![1u8; 64 * 1024];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
    }
    // A commit whose pages fit in the store file's free pages can still succeed on a full disk
    // (redb reuses pages inside its file): such a job is accepted and charged, cannot save its
    // picture, and is failed and refunded, or, if that commit no longer fits either, left for the
    // restart to resolve. The first commit that needs the file to grow fails, and from then on
    // redb refuses every write until a restart: each such request is refused with the documented
    // JSON 500 and changes nothing (the balance and the job history read back the same).
    let books = |base: String| {
        let (http, key) = (http.clone(), key.clone());
        async move {
            let me = get_json(&http, &format!("{base}/api/pictor/v1/me"), &key).await;
            let jobs = get_json(&http, &format!("{base}/api/pictor/v1/jobs?limit=100"), &key).await;
            let ids: Vec<String> = jobs["jobs"]
                .as_array()
                .unwrap_or_else(|| panic!("reads work on a full disk: {jobs}"))
                .iter()
                .map(|j| format!("{} {}", j["job_id"], j["status"]))
                .collect();
            (me["balance"].as_i64().unwrap(), ids)
        }
    };
    let (mut accepted, mut refused) = (0, 0);
    for attempt in 0..12 {
        let before = books(server.base.clone()).await;
        let r = generate(server.base.clone())
            .await
            .unwrap_or_else(|e| panic!("the server stopped answering: {e}"));
        let got = status_json(r).await;
        if got.0 == 202 {
            assert_eq!(
                refused, 0,
                "a write accepted after a refused one: {}",
                got.1
            );
            accepted += 1;
            // Let it run its course: its picture cannot be written.
            let url = format!("{}?wait=30", got.1["poll_url"].as_str().unwrap());
            let job = get_json(&http, &url, &key).await;
            assert_ne!(job["status"], "done", "{job}");
            continue;
        }
        assert_error(&got, 500, "internal_error");
        assert_eq!(
            books(server.base.clone()).await,
            before,
            "refusal {attempt} changed the books"
        );
        refused += 1;
        if refused == 5 {
            break;
        }
    }
    assert_eq!(
        refused, 5,
        "writes refused once the store file must grow ({accepted} fitted)"
    );
    println!("{accepted} jobs fitted in the store file's free pages, then 5 refusals");
    let ids = |b: (i64, Vec<String>)| -> Vec<String> {
        b.1.iter()
            .map(|j| j.split(' ').next().unwrap().to_string())
            .collect()
    };
    let before = ids(books(server.base.clone()).await);
    assert_eq!(before.len(), 1 + accepted, "{before:?}");

    // Make room, restart: no job lost or invented; what the full disk left unfinished is
    // resolved (the books are audited at the end).
    std::fs::remove_file(&filler).unwrap();
    server.kill9();
    let server = spawn_server(&data, &[("PICTOR_DEBUG_FLAT_RENDER", "1")]);
    assert_eq!(
        ids(books(server.base.clone()).await),
        before,
        "the restart lost or invented nothing"
    );
    // What the full disk left running is resolved by the restart (re-queued and rendered, or
    // failed and refunded) before the user's next job.
    for id in &before {
        let id = id.trim_matches('"');
        let job = get_json(
            &http,
            &format!("{}/api/pictor/v1/jobs/{id}?wait=30", server.base),
            &key,
        )
        .await;
        assert!(
            job["status"] == "done" || job["status"] == "failed",
            "{job}"
        );
    }
    // Commits work again: a new job is accepted and runs to the end before the server stops.
    let (st, c) = status_json(generate(server.base.clone()).await.unwrap()).await;
    assert_eq!(st, 202, "{c}");
    let done = get_json(
        &http,
        &format!("{}?wait=60", c["poll_url"].as_str().unwrap()),
        &key,
    )
    .await;
    assert_eq!(done["status"], "done", "{done}");
    server.terminate();
    let store = Store::open(&data.join("pictor.redb")).unwrap();
    assert_eq!(
        store.all_jobs().unwrap().len(),
        2 + accepted,
        "the refused requests made no job"
    );
    let mismatches = books_mismatches(&store, &data);
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}
