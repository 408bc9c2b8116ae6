//! Backups: `pictor backup` while the server runs under load, `pictor restore` into an empty
//! folder, and the restored server has the same users, keys, jobs, pictures and clients.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use pictor::store::Store;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_while_serving_and_restore_round_trip() {
    let a = tempfile::tempdir().unwrap();
    let server = spawn_server(a.path(), &[]);
    let d = a.path().to_path_buf();
    let (key, secret) = tokio::task::spawn_blocking(move || {
        cli_json(
            &d,
            &[
                "user",
                "add",
                "--email",
                "b@example.com",
                "--credits",
                "50",
                "--json",
            ],
            None,
        );
        let key = cli_json(
            &d,
            &["key", "issue", "--email", "b@example.com", "--json"],
            None,
        )["api_key"]
            .as_str()
            .unwrap()
            .to_string();
        let secret = cli_json(
            &d,
            &[
                "client",
                "add",
                "--name",
                "app",
                "--redirect-uri",
                "https://app.example/cb",
                "--json",
            ],
            None,
        )["app_secret"]
            .as_str()
            .unwrap()
            .to_string();
        (key, secret)
    })
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let generate = |prompt: &str| {
        http.post(format!("{}/api/pictor/v1/generate", server.base))
            .bearer_auth(&key)
            .json(&json!({"prompt": prompt, "seed": 3}))
            .send()
    };
    let (_, c) = status_json(generate("a red boat").await.unwrap()).await;
    let job_id = c["job_id"].as_str().unwrap().to_string();
    let done: Value = http
        .get(format!(
            "{}/api/pictor/v1/jobs/{job_id}?wait=60",
            server.base
        ))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(done["status"], "done");
    let original = http
        .get(done["photo_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();

    // Keep the server busy while the backup runs.
    let busy = {
        let (http, base, key) = (http.clone(), server.base.clone(), key.clone());
        tokio::spawn(async move {
            for i in 0..20 {
                let r = http
                    .post(format!("{base}/api/pictor/v1/generate"))
                    .bearer_auth(&key)
                    .json(&json!({"prompt": format!("load {i}")}))
                    .send()
                    .await
                    .unwrap();
                let (st, c) = status_json(r).await;
                if st == 202 {
                    http.get(format!("{}?wait=30", c["poll_url"].as_str().unwrap()))
                        .bearer_auth(&key)
                        .send()
                        .await
                        .unwrap();
                }
            }
        })
    };
    let archive = a
        .path()
        .join("..")
        .join(format!("pictor-backup-{}.tar", std::process::id()));
    let (d, ar) = (a.path().to_path_buf(), archive.clone());
    let report = tokio::task::spawn_blocking(move || {
        cli_json(
            &d,
            &["backup", "--to", ar.to_str().unwrap(), "--json"],
            None,
        )
    })
    .await
    .unwrap();
    assert!(report["bytes"].as_u64().unwrap() > 0);
    assert!(report["files"].as_u64().unwrap() >= 1);
    busy.await.unwrap();
    server.terminate();

    // Restore refuses a non-empty folder.
    let (code, _, err) = run_cli(
        a.path(),
        &["restore", "--from", archive.to_str().unwrap()],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("not empty"), "{err}");

    let b = tempfile::tempdir().unwrap();
    let target = b.path().join("restored");
    let (code, out, err) = run_cli(
        &target,
        &["restore", "--from", archive.to_str().unwrap(), "--json"],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let restored: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(restored["users"], 1);
    std::fs::remove_file(&archive).unwrap();

    // The restored store is consistent: balances equal ledgers, nothing stuck half-done.
    {
        let store = Store::open(&target.join("pictor.redb")).unwrap();
        for u in store.users().unwrap() {
            let sum: i64 = store.ledger(u.id).unwrap().iter().map(|e| e.delta).sum();
            assert_eq!(sum, u.balance);
        }
        assert_eq!(store.clients().unwrap().len(), 1);
    }
    let server = spawn_server(&target, &[]);
    // Same key, same job, same picture bytes.
    let r: Value = http
        .get(format!("{}/api/pictor/v1/jobs/{job_id}", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["status"], "done");
    let photo = r["photo_url"].as_str().unwrap().to_string();
    let again = http
        .get(&photo)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(again, original);
    // Every job the snapshot holds as done has its picture.
    let me: Value = http
        .get(format!("{}/api/pictor/v1/me", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["email"], "b@example.com");
    // The OAuth client's secret still authenticates.
    let r = http
        .post(format!("{}/oauth/token", server.base))
        .basic_auth("app", Some(&secret))
        .form(&[("grant_type", "refresh_token"), ("refresh_token", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        400,
        "client authenticated (invalid_grant, not invalid_client)"
    );
    server.terminate();
}
