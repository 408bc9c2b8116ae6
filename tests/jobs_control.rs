//! Cancel, progress, queue position and history of jobs, through the real server over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Api, Gate, Options, Stepper, TestServer, assert_error, flat_picture, status_json};
use pictor::ops::AdminRequest;
use pictor::render::{EditSpec, GenerateSpec, Picture, ProceduralRenderer, RenderError, Renderer};
use serde_json::{Value, json};

async fn cancel(s: &TestServer, key: &str, job: &str) -> (u16, Value) {
    s.post(key, &format!("/api/pictor/v1/jobs/{job}/cancel"), None)
        .await
}

/// Sends a small PNG to `/v1/edit` with an instruction the filters do exactly.
async fn edit(s: &TestServer, key: &str) -> (u16, Value) {
    let photo = reqwest::multipart::Part::bytes(common::png_bytes(64, 48))
        .file_name("a.png")
        .mime_str("image/png")
        .unwrap();
    let form = reqwest::multipart::Form::new()
        .part("image", photo)
        .text("prompt", "make it black and white");
    s.edit_form(key, form).await
}

fn id(v: &Value) -> String {
    v["job_id"].as_str().unwrap().to_string()
}

async fn job(s: &TestServer, key: &str, job: &str) -> Value {
    let (st, v) = s.get(key, &format!("/api/pictor/v1/jobs/{job}")).await;
    assert_eq!(st, 200, "{v}");
    v
}

async fn until(s: &TestServer, key: &str, job_id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..500 {
        let v = job(s, key, job_id).await;
        if pred(&v) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("job {job_id} never reached the state");
}

/// Waits until the user has no active job (a cancelled render has stopped).
async fn idle(s: &TestServer, key: &str) {
    for _ in 0..500 {
        if s.me(key).await["active_job"].is_null() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the user's active job never ended");
}

fn ledger_of(s: &TestServer, email: &str) -> Vec<pictor::store::LedgerEntry> {
    let user = s
        .store()
        .users()
        .unwrap()
        .into_iter()
        .find(|u| u.email == email)
        .unwrap();
    s.store().ledger(user.id).unwrap()
}

fn pngs(s: &TestServer) -> usize {
    std::fs::read_dir(s.data_dir().join("images"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "png"))
                .count()
        })
        .unwrap_or(0)
}

/// A server with one render slot behind a gate, and two users with 10 credits (their keys).
async fn gated_server_with_two_users() -> (Gate, TestServer, String, String) {
    let gate = Gate::default();
    let s = TestServer::start_with(Options {
        renderer: Arc::new(gate.clone()),
        render_workers: 1,
        ..Options::default()
    })
    .await;
    let (_, a) = s.user("a@example.com", 10, false);
    let (_, b) = s.user("b@example.com", 10, false);
    (gate, s, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_queued_and_running_jobs_returns_credits_exactly_once() {
    let (gate, s, a, b) = gated_server_with_two_users().await;

    // A's job takes the only render slot (the gate holds it); B's waits in the queue.
    let (_, ja) = s
        .generate(&a, json!({"prompt": "first", "model": "artist"}))
        .await;
    let ja = id(&ja);
    let running = until(&s, &a, &ja, |v| v["status"] == "running").await;
    assert_eq!(running["balance"], 5, "charged at start: {running}");
    assert!(running["progress"].is_number(), "{running}");
    let (_, jb) = s.generate(&b, json!({"prompt": "second"})).await;
    let jb = id(&jb);
    let queued = until(&s, &b, &jb, |v| v["queue_position"].is_number()).await;
    assert_eq!(queued["status"], "queued");
    assert_eq!(queued["queue_position"], 1, "{queued}");

    // Someone else's job, and ids that are not jobs, are not found.
    assert_error(&cancel(&s, &a, &jb).await, 404, "job_not_found");
    assert_error(&cancel(&s, &a, "job_123").await, 404, "job_not_found");
    assert_error(&cancel(&s, &a, "../../me").await, 404, "not_found");

    // Queued: failed with `cancelled`, nothing charged, and the same answer again.
    let (st, v) = cancel(&s, &b, &jb).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "failed");
    assert_eq!(v["ok"], false);
    assert_eq!(v["error_code"], "cancelled");
    assert_eq!(v["balance"], 10);
    let (st, again) = cancel(&s, &b, &jb).await;
    assert_eq!(st, 200, "{again}");
    assert_eq!(again["error_code"], "cancelled");
    assert_eq!(again["finished_at"], v["finished_at"], "idempotent");
    assert!(v.get("queue_position").is_none(), "{v}");

    // Running: refunded at once, daily slot returned.
    let (st, v) = cancel(&s, &a, &ja).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["error_code"], "cancelled");
    assert_eq!(v["balance"], 10);
    assert_eq!(s.me(&a).await["daily_used"], 0);
    // This render ignores cancels (the gate holds it): until it stops, the user's next job
    // waits, so a cancelled render never runs beside a new one.
    let busy = s.generate(&a, json!({"prompt": "third"})).await;
    assert_error(&busy, 409, "job_busy");
    // The gate lets the cancelled render finish: its picture is thrown away, the job stays
    // cancelled, the credits are not returned twice, and the active slot is released.
    gate.open();
    idle(&s, &a).await;
    let (st, next) = s.generate(&a, json!({"prompt": "third"})).await;
    assert_eq!(st, 202, "{next}");
    let done = s.finish(&a, &id(&next)).await;
    assert_eq!(done["status"], "done");
    assert_eq!(done["balance"], 9);
    let after = job(&s, &a, &ja).await;
    assert_eq!(after["error_code"], "cancelled", "{after}");
    assert!(after.get("photo_url").is_none());
    assert_eq!(pngs(&s), 1, "only the finished job's picture is kept");

    // A finished job cannot be cancelled.
    assert_error(&cancel(&s, &a, &id(&next)).await, 409, "job_finished");
    // a: +10 granted, -5 charged, +5 refunded once, -1 for the next job.
    let deltas: Vec<i64> = ledger_of(&s, "a@example.com")
        .iter()
        .map(|e| e.delta)
        .collect();
    assert_eq!(deltas, [10, -5, 5, -1]);
    assert_eq!(
        ledger_of(&s, "b@example.com").len(),
        1,
        "b was never charged"
    );
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_edit_leaves_no_upload_behind() {
    let (gate, s, a, b) = gated_server_with_two_users().await;
    let (_, ja) = s.generate(&a, json!({"prompt": "holds the slot"})).await;
    until(&s, &a, &id(&ja), |v| v["status"] == "running").await;
    let uploads = |s: &TestServer| {
        std::fs::read_dir(s.data_dir().join("sources"))
            .map(|d| d.filter_map(Result::ok).count())
            .unwrap_or(0)
    };
    let (st, e) = edit(&s, &b).await;
    assert_eq!(st, 202, "{e}");
    assert_eq!(uploads(&s), 1, "the upload is kept while the edit waits");
    let (st, v) = cancel(&s, &b, &id(&e)).await;
    assert_eq!(st, 200, "{v}");
    for _ in 0..200 {
        if uploads(&s) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(uploads(&s), 0, "a cancelled edit's upload is deleted");
    gate.open();
    s.finish(&a, &id(&ja)).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_rises_and_a_cancel_stops_the_render_between_steps() {
    let stepper = Stepper::new(12, Duration::from_millis(60));
    let s = TestServer::with_renderer(Arc::new(stepper.clone())).await;
    let (_, key) = s.user("p@example.com", 10, false);

    // Follow a whole render with `wait_for=progress`: one answer per change, never backwards.
    let (_, j) = s.generate(&key, json!({"prompt": "steps"})).await;
    let j = id(&j);
    let mut seen = Vec::new();
    let mut since = String::new();
    let last = loop {
        let (st, v) = s
            .get(
                &key,
                &format!("/api/pictor/v1/jobs/{j}?wait=30&wait_for=progress&since={since}"),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        if let Some(t) = v["state_token"].as_str() {
            assert_ne!(t, since, "answered only when the state differs");
            since = t.to_string();
        }
        if let Some(p) = v["progress"].as_f64() {
            seen.push(p);
        }
        if v["status"] == "done" || v["status"] == "failed" {
            break v;
        }
        assert!(seen.len() < 200, "too many answers: {seen:?}");
    };
    assert_eq!(last["status"], "done", "{last}");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(
        seen.iter().filter(|p| **p > 0.0 && **p < 1.0).count() >= 4,
        "the steps were seen one by one: {seen:?}"
    );
    assert!(seen.iter().all(|p| (0.0..=1.0).contains(p)), "{seen:?}");

    // A cancel mid-loop stops the render at its next step.
    let slow = Stepper::new(400, Duration::from_millis(50));
    let s2 = TestServer::with_renderer(Arc::new(slow.clone())).await;
    let (_, key) = s2.user("q@example.com", 10, false);
    let (_, j) = s2.generate(&key, json!({"prompt": "long"})).await;
    let j = id(&j);
    until(&s2, &key, &j, |v| {
        v["progress"].as_f64().is_some_and(|p| p > 0.0)
    })
    .await;
    let (st, v) = cancel(&s2, &key, &j).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["balance"], 10);
    for _ in 0..200 {
        if !slow.ran.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ran = slow.ran.lock().unwrap().clone();
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert!(ran[0] < 400, "stopped after {} of 400 steps", ran[0]);
    // The job's task closes its bookkeeping (the active-job row) just after the render returns.
    let uid = s2
        .store()
        .user_by_email("q@example.com")
        .unwrap()
        .unwrap()
        .id;
    for _ in 0..200 {
        if s2.store().active_job(uid).unwrap().is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s2.assert_books_balanced();
    s.stop().await;
    s2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_positions_and_etas_follow_the_queue() {
    let stepper = Stepper::new(4, Duration::from_millis(50));
    stepper.gate.close();
    let s = TestServer::start_with(Options {
        renderer: Arc::new(stepper.clone()),
        render_workers: 1,
        ..Options::default()
    })
    .await;
    let keys: Vec<String> = (0..4)
        .map(|i| s.user(&format!("u{i}@example.com"), 10, true).1)
        .collect();
    // One render first, so the server knows how long a `fast` render takes.
    stepper.gate.open();
    let (_, j) = s.generate(&keys[0], json!({"prompt": "warm up"})).await;
    assert_eq!(s.finish(&keys[0], &id(&j)).await["status"], "done");
    stepper.gate.close();

    // Job 0 holds the slot; jobs 1..3 queue behind it in order.
    let mut jobs = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let (st, j) = s.generate(key, json!({"prompt": format!("job {i}")})).await;
        assert_eq!(st, 202, "{j}");
        jobs.push(id(&j));
        if i == 0 {
            until(&s, key, &jobs[0], |v| v["status"] == "running").await;
        } else {
            until(&s, key, &jobs[i], |v| v["queue_position"].is_number()).await;
        }
    }
    let mut etas = Vec::new();
    for i in 1..4 {
        let v = job(&s, &keys[i], &jobs[i]).await;
        assert_eq!(v["queue_position"], i, "{v}");
        etas.push(
            v["eta_seconds"]
                .as_f64()
                .expect("an ETA once a render was timed"),
        );
    }
    assert!(etas.windows(2).all(|w| w[0] < w[1]), "{etas:?}");

    // A long-poll with `wait_for=progress` wakes when the queue moves.
    let s = Arc::new(s);
    let poll = {
        let (s, key, job) = (s.clone(), keys[3].clone(), jobs[3].clone());
        tokio::spawn(async move {
            let t = Instant::now();
            let v = s
                .get(
                    &key,
                    &format!("/api/pictor/v1/jobs/{job}?wait=60&wait_for=progress"),
                )
                .await;
            (v, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (st, _) = cancel(&s, &keys[1], &jobs[1]).await;
    assert_eq!(st, 200);
    let ((st, v), waited) = poll.await.unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["queue_position"], 2, "{v}");
    assert!(
        waited < Duration::from_secs(30),
        "woke on the change, not the deadline"
    );
    assert_eq!(job(&s, &keys[2], &jobs[2]).await["queue_position"], 1);

    stepper.gate.open();
    for i in [0, 2, 3] {
        assert_eq!(s.finish(&keys[i], &jobs[i]).await["status"], "done");
    }
    s.assert_books_balanced();
}

/// A renderer that finishes at once, so cancels race the finish.
struct Instant0;

impl Renderer for Instant0 {
    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError> {
        let (w, h) = spec.model.dimensions(spec.ratio);
        // A little work, so some cancels land while the render runs.
        std::thread::sleep(Duration::from_micros(500));
        Ok(flat_picture(w.min(64), h.min(64), [1, 2, 3, 255]))
    }

    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError> {
        ProceduralRenderer.edit(spec)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_cancel_versus_finish_races_keep_the_books() {
    let s = TestServer::with_renderer(Arc::new(Instant0)).await;
    s.admin(AdminRequest::SettingsSet {
        key: "daily_limit".into(),
        value: 1000,
    });
    let (_, key) = s.user("race@example.com", 1000, false);
    let (mut cancelled, mut done, mut while_running) = (0usize, 0usize, 0usize);
    let jitter = AtomicUsize::new(0);
    // The cancel comes 0..24 × `scale` after the 202. The scale adapts to this machine's speed
    // so that both outcomes keep happening: doubled while no finish has won, halved while no
    // cancel has.
    let mut scale = Duration::from_micros(700);
    for i in 0..200 {
        if i % 40 == 39 {
            if done == 0 {
                scale *= 2;
            } else if cancelled == 0 {
                scale /= 2;
            }
        }
        let (st, j) = s
            .generate(&key, json!({"prompt": format!("race {i}")}))
            .await;
        assert_eq!(st, 202, "{j}");
        let j = id(&j);
        // Cancels land before the start, during the render, and after the finish.
        let wait = jitter.fetch_add(1, Ordering::Relaxed) % 25;
        if wait > 0 {
            tokio::time::sleep(scale * wait as u32).await;
        }
        let (st, v) = cancel(&s, &key, &j).await;
        let end = s.finish(&key, &j).await;
        idle(&s, &key).await;
        match st {
            200 => {
                assert_eq!(v["error_code"], "cancelled", "{v}");
                assert_eq!(end["error_code"], "cancelled", "{end}");
                cancelled += 1;
                if v["error"].as_str().unwrap().contains("credits returned") {
                    while_running += 1;
                }
            }
            409 => {
                assert_eq!(v["error_code"], "job_finished", "{v}");
                assert_eq!(end["status"], "done", "{end}");
                done += 1;
            }
            other => panic!("cancel answered {other}: {v}"),
        }
        assert_eq!(
            end["balance"].as_i64().unwrap(),
            1000 - done as i64,
            "race {i}: {end}"
        );
    }
    assert_eq!(cancelled + done, 200);
    eprintln!(
        "{cancelled} cancels won ({while_running} of them after the charge), {done} finishes won"
    );
    assert!(
        cancelled > 0 && done > 0,
        "the cancels did not race the finishes"
    );
    // Every done job kept its picture; no cancelled render left one behind.
    assert_eq!(pngs(&s), done);
    assert_eq!(s.me(&key).await["daily_used"], done);
    let ledger = ledger_of(&s, "race@example.com");
    let charges = ledger.iter().filter(|e| e.delta < 0).count();
    let refunds = ledger
        .iter()
        .filter(|e| e.delta > 0 && e.job_id.is_some())
        .count();
    assert_eq!(
        charges - refunds,
        done,
        "{charges} charges, {refunds} refunds"
    );
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_lists_own_jobs_newest_first_with_filters_and_cursor() {
    let s = TestServer::start().await;
    let (_, key) = s.user("h@example.com", 100, true);
    let (_, other) = s.user("o@example.com", 100, true);
    let (_, oj) = s.generate(&other, json!({"prompt": "not yours"})).await;
    s.finish(&other, &id(&oj)).await;

    let mut ids = Vec::new();
    for i in 0..5 {
        let (_, j) = s
            .generate(&key, json!({"prompt": format!("picture {i}")}))
            .await;
        ids.push(id(&j));
        if i == 2 {
            // Cancelled as soon as it is queued (or the finish wins the race; either is fine).
            let _ = cancel(&s, &key, &ids[2]).await;
        }
        s.finish(&key, &ids[i]).await;
        idle(&s, &key).await;
    }
    let (st, e) = edit(&s, &key).await;
    assert_eq!(st, 202, "{e}");
    s.finish(&key, &id(&e)).await;
    ids.push(id(&e));

    // Pages of two, newest first, following `next_before` to the end.
    let mut listed = Vec::new();
    let mut before = String::new();
    loop {
        let path = format!("/api/pictor/v1/jobs?limit=2&before={before}");
        let (st, page) = s.get(&key, &path).await;
        assert_eq!(st, 200, "{page}");
        assert_eq!(page["ok"], true);
        let jobs = page["jobs"].as_array().unwrap();
        assert!(jobs.len() <= 2);
        listed.extend(jobs.iter().map(id));
        match page["next_before"].as_str() {
            Some(n) => before = n.to_string(),
            None => break,
        }
    }
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(listed, newest_first);

    let (_, edits) = s.get(&key, "/api/pictor/v1/jobs?kind=edit").await;
    assert_eq!(edits["jobs"].as_array().unwrap().len(), 1, "{edits}");
    assert_eq!(edits["jobs"][0]["kind"], "edit");
    let (_, failed) = s.get(&key, "/api/pictor/v1/jobs?status=failed").await;
    for j in failed["jobs"].as_array().unwrap() {
        assert_eq!(j["error_code"], "cancelled", "{j}");
    }
    let (_, done) = s
        .get(&key, "/api/pictor/v1/jobs?status=done&kind=generate")
        .await;
    let n_done = done["jobs"].as_array().unwrap().len();
    assert_eq!(
        n_done + failed["jobs"].as_array().unwrap().len(),
        5,
        "{done} {failed}"
    );
    assert!(done["jobs"][0]["photo_url"].is_string());

    for bad in [
        "limit=0",
        "limit=101",
        "limit=x",
        "status=paused",
        "kind=video",
        "before=job_zz",
    ] {
        let got = s.get(&key, &format!("/api/pictor/v1/jobs?{bad}")).await;
        assert_error(&got, 400, "invalid_request");
    }
    let r = s
        .client
        .get(s.url("/api/pictor/v1/jobs"))
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 401, "unauthorized");
    s.stop().await;
}
