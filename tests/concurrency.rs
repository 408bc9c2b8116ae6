//! Races on the same users: creates, polls, key rotations and credit grants at once. The
//! invariants of DESIGN.md hold throughout: at most one active job per user, no negative balance,
//! balance = ledger, no job charged or refunded twice.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use pictor::ops::AdminRequest;
use rand::RngExt;
use serde_json::json;
use tokio::sync::RwLock;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_clients_keep_the_invariants() {
    let s = Arc::new(
        TestServer::start_with(Options {
            renderer: Arc::new(open_gate()),
            render_workers: 2,
            ..Options::default()
        })
        .await,
    );
    let users = 4;
    let mut keys = Vec::new();
    for i in 0..users {
        // Few credits, so creates race against running out.
        let (email, key) = s.user(&format!("race{i}@example.com"), 12, false);
        s.admin(AdminRequest::UserUpdate {
            email,
            pro: None,
            banned: None,
            daily_limit: Some(1000),
            admin: None,
            approve: false,
        });
        // The key with the number of rotations that made it.
        keys.push(Arc::new(RwLock::new((key, 0usize))));
    }
    let (accepted, busy, broke, unauthorized) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let mut tasks = Vec::new();
    // 6 clients per user creating and polling.
    for user_key in &keys {
        for _ in 0..6 {
            let (s, key, accepted, busy, broke, unauthorized) = (
                s.clone(),
                user_key.clone(),
                accepted.clone(),
                busy.clone(),
                broke.clone(),
                unauthorized.clone(),
            );
            tasks.push(tokio::spawn(async move {
                for i in 0..15 {
                    let (k, generation) = key.read().await.clone();
                    // A 401 is expected only for a key that was rotated away meanwhile.
                    let rotated_since = || async { key.read().await.1 > generation };
                    let model = ["fast", "artist"][i % 2];
                    let (st, v) = s
                        .generate(&k, json!({"prompt": format!("race {i}"), "model": model}))
                        .await;
                    match st {
                        202 => {
                            accepted.fetch_add(1, Ordering::Relaxed);
                            let id = v["job_id"].as_str().unwrap().to_string();
                            let (st, v) =
                                s.get(&k, &format!("/api/pictor/v1/jobs/{id}?wait=2")).await;
                            assert!(
                                st == 200 || (st == 401 && rotated_since().await),
                                "poll {st}: {v}"
                            );
                        }
                        409 => {
                            busy.fetch_add(1, Ordering::Relaxed);
                        }
                        402 => {
                            broke.fetch_add(1, Ordering::Relaxed);
                        }
                        401 if rotated_since().await => {
                            unauthorized.fetch_add(1, Ordering::Relaxed);
                        }
                        other => panic!("unexpected {other}: {v}"),
                    }
                }
            }));
        }
    }
    // Key rotations and credit grants (both signs) racing with them.
    for (u, user_key) in keys.iter().enumerate() {
        let (s, key) = (s.clone(), user_key.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0..20 {
                let pause = rand::rng().random_range(5..40);
                tokio::time::sleep(Duration::from_millis(pause)).await;
                let email = format!("race{u}@example.com");
                if i % 3 == 0 {
                    // Under the write lock: no client reads the old key as current meanwhile.
                    let mut current = key.write().await;
                    let v = s.admin(AdminRequest::KeyIssue { email });
                    *current = (v["api_key"].as_str().unwrap().to_string(), current.1 + 1);
                } else {
                    let amount = if i % 2 == 0 { 5 } else { -3 };
                    // A removal that would go below zero is refused, never applied.
                    let store = s.store().clone();
                    let now = s.clock.now();
                    let _ = tokio::task::spawn_blocking(move || {
                        store.grant_credits(&email, amount, now)
                    })
                    .await
                    .unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Let everything finish.
    for _ in 0..200 {
        if s.store()
            .all_jobs()
            .unwrap()
            .iter()
            .all(|j| j.status.is_terminal())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let store = s.store();
    let jobs = store.all_jobs().unwrap();
    assert!(jobs.iter().all(|j| j.status.is_terminal()));
    // At most one active job per user at any moment: two jobs of one user never overlap in time.
    for u in store.users().unwrap() {
        let mut spans: Vec<(u64, u64)> = jobs
            .iter()
            .filter(|j| j.user_id == u.id)
            .map(|j| (j.created_at, j.finished_at.unwrap()))
            .collect();
        spans.sort();
        for w in spans.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "two active jobs overlapped for {}",
                u.email
            );
        }
        assert!(
            store
                .ledger(u.id)
                .unwrap()
                .iter()
                .all(|e| e.balance_after >= 0),
            "the balance never went negative"
        );
    }
    s.assert_books_balanced();
    println!(
        "concurrency: {} accepted, {} job_busy, {} insufficient_credits, {} rejected old keys, {} jobs",
        accepted.load(Ordering::Relaxed),
        busy.load(Ordering::Relaxed),
        broke.load(Ordering::Relaxed),
        unauthorized.load(Ordering::Relaxed),
        jobs.len()
    );
    assert!(
        busy.load(Ordering::Relaxed) > 0,
        "the race never produced a job_busy"
    );
}
