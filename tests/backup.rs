//! Backups: `pictor backup` while the server runs under load, `pictor restore` into an empty
//! folder, and the restored server has the same users, keys, jobs, pictures and clients.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pictor::store::{JobStatus, Store};
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
    let done = get_json(
        &http,
        &format!("{}/api/pictor/v1/jobs/{job_id}?wait=60", server.base),
        &key,
    )
    .await;
    assert_eq!(done["status"], "done");
    let original = http
        .get(done["photo_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();

    // Keep the server busy while the backup runs: jobs one after another, from before the
    // backup starts until after it ends (each job's acceptance and end are timed).
    let stop = Arc::new(AtomicBool::new(false));
    let spans = Arc::new(Mutex::new(Vec::<(Instant, Instant)>::new()));
    let busy = {
        let (http, base, key) = (http.clone(), server.base.clone(), key.clone());
        let (stop, spans) = (stop.clone(), spans.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let r = http
                    .post(format!("{base}/api/pictor/v1/generate"))
                    .bearer_auth(&key)
                    .json(&json!({"prompt": format!("load {i}"), "model": "fast"}))
                    .send()
                    .await
                    .unwrap();
                let accepted = Instant::now();
                let (st, c) = status_json(r).await;
                assert_eq!(st, 202, "{c}");
                let v = get_json(
                    &http,
                    &format!("{}?wait=30", c["poll_url"].as_str().unwrap()),
                    &key,
                )
                .await;
                assert_eq!(v["status"], "done", "{v}");
                spans.lock().unwrap().push((accepted, Instant::now()));
            }
        })
    };
    while spans.lock().unwrap().len() < 2 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let archive = a
        .path()
        .join("..")
        .join(format!("pictor-backup-{}.tar", std::process::id()));
    let (d, ar) = (a.path().to_path_buf(), archive.clone());
    let backup_started = Instant::now();
    let report = tokio::task::spawn_blocking(move || {
        cli_json(
            &d,
            &["backup", "--to", ar.to_str().unwrap(), "--json"],
            None,
        )
    })
    .await
    .unwrap();
    let backup_ended = Instant::now();
    assert!(report["bytes"].as_u64().unwrap() > 0);
    assert!(report["files"].as_u64().unwrap() >= 1);
    // The load goes on past the end of the backup, then stops.
    while !spans
        .lock()
        .unwrap()
        .iter()
        .any(|(accepted, _)| *accepted > backup_ended)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);
    busy.await.unwrap();
    let spans = spans.lock().unwrap().clone();
    let during = spans
        .iter()
        .filter(|(accepted, ended)| *accepted <= backup_ended && *ended >= backup_started)
        .count();
    println!(
        "backup: {:?} while {} jobs ran before, during ({during} in flight) and after it",
        backup_ended - backup_started,
        spans.len()
    );
    assert!(spans.first().unwrap().0 < backup_started && spans.last().unwrap().0 > backup_ended);
    // At least one job was in flight while the backup ran: the window (a whole CLI process plus
    // the snapshot) is longer than the moment between one job's end and the next one's 202.
    assert!(
        during >= 1,
        "no job was in flight during the backup ({:?}): {spans:?}",
        backup_ended - backup_started
    );
    // Jobs run back to back: the load was working all through the backup.
    for w in spans.windows(2) {
        assert!(
            w[1].0 - w[0].1 < Duration::from_secs(2),
            "a pause in the load: {spans:?}"
        );
    }
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

    // The restored snapshot is consistent: balances equal ledgers, every job it holds as done
    // has its picture, the client is there. (Jobs the snapshot caught unfinished run after the
    // restored server starts; the full audit is at the end.)
    let done_in_snapshot = {
        let store = Store::open(&target.join("pictor.redb")).unwrap();
        for u in store.users().unwrap() {
            let sum: i64 = store.ledger(u.id).unwrap().iter().map(|e| e.delta).sum();
            assert_eq!(sum, u.balance);
        }
        assert_eq!(store.clients().unwrap().len(), 1);
        let done: Vec<_> = store
            .all_jobs()
            .unwrap()
            .into_iter()
            .filter(|j| j.status == JobStatus::Done)
            .collect();
        for j in &done {
            let token = j.photo_token.as_deref().unwrap();
            assert!(
                target.join("images").join(format!("{token}.png")).exists(),
                "{} is done in the backup but its picture is not",
                j.job_id()
            );
        }
        done.len()
    };
    assert!(
        done_in_snapshot >= 3,
        "the snapshot holds the jobs done before it"
    );
    let server = spawn_server(&target, &[]);
    // Same key, same job, same picture bytes.
    let r = get_json(
        &http,
        &format!("{}/api/pictor/v1/jobs/{job_id}", server.base),
        &key,
    )
    .await;
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
    let me = get_json(&http, &format!("{}/api/pictor/v1/me", server.base), &key).await;
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
    // A job the snapshot caught unfinished runs to its end on the restored server.
    if let Some(active) = me["active_job"].as_str() {
        let v = get_json(
            &http,
            &format!("{}/api/pictor/v1/jobs/{active}?wait=60", server.base),
            &key,
        )
        .await;
        assert_eq!(v["status"], "done", "{v}");
    }
    server.terminate();
    let store = Store::open(&target.join("pictor.redb")).unwrap();
    let mismatches = books_mismatches(&store, &target);
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}
