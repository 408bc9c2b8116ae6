//! The job API end to end: create → poll → download, credits, limits, long-poll, concurrency.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use pictor::ops::AdminRequest;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_poll_download_and_charge() {
    let s = TestServer::start().await;
    let (_, key) = s.user("ann@example.com", 20, false);

    let (status, created) = s
        .generate(
            &key,
            json!({"prompt": "a red sunset over the sea", "model": "fast"}),
        )
        .await;
    assert_eq!(status, 202, "{created}");
    assert_eq!(created["ok"], true);
    assert_eq!(created["status"], "queued");
    assert_eq!(created["cost"], 1);
    let job_id = created["job_id"].as_str().unwrap();
    assert!(job_id.starts_with("job_") && job_id.len() == 36);
    assert_eq!(
        created["poll_url"],
        json!(s.url(&format!("/api/pictor/v1/jobs/{job_id}")))
    );
    assert_eq!(
        created.as_object().unwrap().len(),
        5,
        "creation body is exactly the seed's: {created}"
    );

    let done = s.finish(&key, job_id).await;
    assert_eq!(done["ok"], true, "{done}");
    assert_eq!(done["status"], "done");
    assert_eq!(done["kind"], "generate");
    assert_eq!(done["cost"], 1);
    assert_eq!(done["balance"], 19);
    let photo_url = done["photo_url"].as_str().unwrap();
    assert!(photo_url.starts_with(&s.url("/files/")) && photo_url.ends_with(".png"));
    // Direct link: no key needed.
    let img = s.download(photo_url).await;
    assert_eq!(img.dimensions(), (1024, 1024));

    let me = s.me(&key).await;
    assert_eq!(me["balance"], 19);
    assert_eq!(me["daily_used"], 1);
    assert_eq!(me["active_job"], json!(null));
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ratio_has_exact_dimensions() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (_, key) = s.user("r@example.com", 100, true);
    let expected = [
        ("1:1", (1024, 1024)),
        ("16:9", (1024, 576)),
        ("9:16", (576, 1024)),
        ("3:2", (1024, 683)),
        ("2:3", (683, 1024)),
        ("4:3", (1024, 768)),
        ("3:4", (768, 1024)),
        ("auto", (1024, 1024)),
    ];
    for (ratio, dims) in expected {
        let (st, c) = s
            .generate(&key, json!({"prompt": "a quiet lake", "ratio": ratio}))
            .await;
        assert_eq!(st, 202, "{c}");
        let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
        let img = s.download(done["photo_url"].as_str().unwrap()).await;
        assert_eq!(img.dimensions(), dims, "ratio {ratio}");
        assert_eq!(
            (
                done["width"].as_u64().unwrap() as u32,
                done["height"].as_u64().unwrap() as u32
            ),
            dims
        );
    }
    // auto reads the prompt.
    let (_, c) = s
        .generate(
            &key,
            json!({"prompt": "a panorama of snowy mountains", "ratio": "auto"}),
        )
        .await;
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(
        s.download(done["photo_url"].as_str().unwrap())
            .await
            .dimensions(),
        (1024, 576)
    );
    // Bigger models, bigger pictures.
    for (model, dims) in [("artist", (1536, 1536)), ("0.2plus", (2048, 2048))] {
        let (_, c) = s
            .generate(&key, json!({"prompt": "a lake", "model": model}))
            .await;
        let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
        assert_eq!(
            s.download(done["photo_url"].as_str().unwrap())
                .await
                .dimensions(),
            dims
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_aliases_and_prices() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (_, key) = s.user("m@example.com", 100, false);

    let r = s
        .client
        .get(s.url("/api/pictor/v1/models"))
        .send()
        .await
        .unwrap();
    let (st, models) = status_json(r).await;
    assert_eq!(st, 200);
    assert_eq!(models["ok"], true);
    let list = models["models"].as_array().unwrap();
    let summary: Vec<_> = list
        .iter()
        .map(|m| (m["id"].clone(), m["name"].clone(), m["price"].clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (json!("fast"), json!("Standard"), json!(1)),
            (json!("artist"), json!("PRO"), json!(5)),
            (json!("0.2plus"), json!("Premium"), json!(10)),
        ]
    );
    assert_eq!(list[2]["aliases"], json!(["0.2plus", "premium", "prem"]));
    assert_eq!(models["edit_price"], 2);

    let mut balance = 100;
    for (alias, id, price) in [
        ("STD", "fast", 1),
        ("Standard", "fast", 1),
        ("pro", "artist", 5),
        ("Prem", "0.2plus", 10),
        ("premium", "0.2plus", 10),
    ] {
        let (st, c) = s
            .generate(&key, json!({"prompt": "a cat", "model": alias}))
            .await;
        assert_eq!(st, 202, "{c}");
        assert_eq!(c["cost"], price);
        let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
        assert_eq!(done["model"], id);
        balance -= price;
        assert_eq!(done["balance"], balance);
    }

    // Prices are settings an operator can change.
    s.admin(AdminRequest::SettingsSet {
        key: "price.fast".into(),
        value: 3,
    });
    let (_, c) = s.generate(&key, json!({"prompt": "a cat"})).await;
    assert_eq!(c["cost"], 3);
    s.finish(&key, c["job_id"].as_str().unwrap()).await;
    let r = s
        .client
        .get(s.url("/api/pictor/v1/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(r).await.1["models"][0]["price"], 3);
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watermark_for_non_pro_only() {
    let s = TestServer::start().await;
    let (_, free) = s.user("free@example.com", 10, false);
    let (_, pro) = s.user("pro@example.com", 10, true);
    let body = json!({"prompt": "green hills under a blue sky", "seed": 42, "ratio": "1:1"});
    let (_, a) = s.generate(&free, body.clone()).await;
    let (_, b) = s.generate(&pro, body).await;
    let a = s.finish(&free, a["job_id"].as_str().unwrap()).await;
    let b = s.finish(&pro, b["job_id"].as_str().unwrap()).await;
    let wa = s.download(a["photo_url"].as_str().unwrap()).await;
    let wb = s.download(b["photo_url"].as_str().unwrap()).await;
    assert_eq!(wa.dimensions(), wb.dimensions());
    let (w, h) = wa.dimensions();
    let (mut corner_diff, mut elsewhere_diff) = (0u64, 0u64);
    for (x, y, pa) in wa.enumerate_pixels() {
        let pb = wb.get_pixel(x, y);
        let d: u64 = (0..3)
            .map(|i| (pa[i] as i64 - pb[i] as i64).unsigned_abs())
            .sum();
        if x > w / 2 && y > h * 3 / 4 {
            corner_diff += d;
        } else {
            elsewhere_diff += d;
        }
    }
    // Same seed, same picture: the only difference is the non-PRO watermark in the corner.
    assert_eq!(
        elsewhere_diff, 0,
        "pictures differ outside the watermark corner"
    );
    assert!(
        corner_diff > 10_000,
        "no visible watermark on the non-PRO picture ({corner_diff})"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_returns_on_completion_and_at_deadline() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let (_, key) = s.user("w@example.com", 10, false);
    let (_, c) = s.generate(&key, json!({"prompt": "a boat"})).await;
    let id = c["job_id"].as_str().unwrap().to_string();

    // Deadline: the gate is closed, so wait=1 returns the unfinished job after about a second.
    let t = Instant::now();
    let (st, v) = s
        .get(&key, &format!("/api/pictor/v1/jobs/{id}?wait=1"))
        .await;
    assert_eq!(st, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(950),
        "returned before the deadline"
    );
    assert!(v["status"] == "queued" || v["status"] == "running", "{v}");

    // Completion: a 60 s wait returns as soon as the job finishes: it blocks while the gate is
    // closed, and answers within a second of the moment the job was finished (by the server's
    // own `finished_at`), not at a later re-check.
    let opened_at = Arc::new(std::sync::Mutex::new(None));
    let opener = {
        let (gate, opened_at, clock) = (gate.clone(), opened_at.clone(), s.clock.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            *opened_at.lock().unwrap() = Some(clock.now());
            gate.open();
        })
    };
    let (st, v) = s
        .get(&key, &format!("/api/pictor/v1/jobs/{id}?wait=60"))
        .await;
    let returned = s.clock.now();
    assert_eq!(st, 200);
    assert_eq!(v["status"], "done", "{v}");
    let opened = opened_at
        .lock()
        .unwrap()
        .expect("returned before the gate opened");
    let finished = v["finished_at"].as_u64().unwrap();
    assert!(
        finished >= opened,
        "finished {finished} before the gate opened {opened}"
    );
    assert!(
        returned - finished < 1000,
        "long-poll answered {} ms after the job finished",
        returned - finished
    );
    opener.await.unwrap();
    // A finished job answers at once, whatever the wait.
    let t = Instant::now();
    let (_, v) = s
        .get(&key, &format!("/api/pictor/v1/jobs/{id}?wait=90"))
        .await;
    assert_eq!(v["status"], "done");
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(
        s.handle.as_ref().unwrap().state.jobs.watchers().is_empty(),
        "watch channels leaked"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_creates_give_one_202_and_one_409() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let (_, key) = s.user("race@example.com", 10, false);
    for round in 0..5 {
        gate.close();
        let a = s.generate(&key, json!({"prompt": format!("race {round} a")}));
        let b = s.generate(&key, json!({"prompt": format!("race {round} b")}));
        let (ra, rb) = tokio::join!(a, b);
        let mut statuses = vec![ra.0, rb.0];
        statuses.sort();
        assert_eq!(statuses, vec![202, 409], "{ra:?} {rb:?}");
        let (ok, busy) = if ra.0 == 202 { (ra, rb) } else { (rb, ra) };
        assert_error(&busy, 409, "job_busy");
        let me = s.me(&key).await;
        assert_eq!(me["active_job"], ok.1["job_id"]);
        gate.open();
        s.finish(&key, ok.1["job_id"].as_str().unwrap()).await;
    }
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_render_refunds_credits_and_daily_slot() {
    let gate = Gate {
        fail: true,
        ..open_gate()
    };
    let s = TestServer::with_renderer(Arc::new(gate)).await;
    let (email, key) = s.user("fail@example.com", 10, false);
    let (_, c) = s
        .generate(&key, json!({"prompt": "a castle", "model": "artist"}))
        .await;
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["ok"], false);
    assert_eq!(done["error_code"], "generation_failed");
    assert!(done["error"].as_str().unwrap().contains("credits returned"));
    assert_eq!(done["balance"], 10);
    assert!(done.get("photo_url").is_none() || done["photo_url"].is_null());
    let me = s.me(&key).await;
    assert_eq!(me["balance"], 10);
    assert_eq!(me["daily_used"], 0);
    assert_eq!(me["active_job"], json!(null));
    let user = s.store().user_by_email(&email).unwrap().unwrap();
    let ledger = s.store().ledger(user.id).unwrap();
    let deltas: Vec<i64> = ledger.iter().map(|e| e.delta).collect();
    assert_eq!(deltas, vec![10, -5, 5], "grant, charge, refund");
    s.assert_books_balanced();
    s.stop().await;
}

/// Gives the user a daily limit of `n` generations.
fn set_daily_limit(s: &TestServer, email: &str, n: u32) {
    s.admin(AdminRequest::UserUpdate {
        email: email.to_owned(),
        pro: None,
        banned: None,
        daily_limit: Some(n),
        admin: None,
        approve: false,
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daily_limit_fails_the_job_and_resets_next_day() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (email, key) = s.user("daily@example.com", 10, false);
    set_daily_limit(&s, &email, 1);
    let (_, c) = s.generate(&key, json!({"prompt": "one"})).await;
    assert_eq!(
        s.finish(&key, c["job_id"].as_str().unwrap()).await["status"],
        "done"
    );
    let (st, c) = s.generate(&key, json!({"prompt": "two"})).await;
    assert_eq!(st, 202);
    let failed = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(failed["error_code"], "daily_limit", "{failed}");
    assert_eq!(failed["balance"], 9, "a job failed at start is not charged");
    // Edits do not use the daily limit.
    let form = reqwest::multipart::Form::new()
        .part(
            "image",
            reqwest::multipart::Part::bytes(png_bytes(64, 48)).file_name("a.png"),
        )
        .text("prompt", "make it black and white");
    let (st, c) = s.edit_form(&key, form).await;
    assert_eq!(st, 202, "{c}");
    assert_eq!(
        s.finish(&key, c["job_id"].as_str().unwrap()).await["status"],
        "done"
    );
    // The next UTC day the limit is fresh.
    s.clock.advance(86_400_000);
    assert_eq!(s.me(&key).await["daily_used"], 0);
    let (_, c) = s.generate(&key, json!({"prompt": "three"})).await;
    assert_eq!(
        s.finish(&key, c["job_id"].as_str().unwrap()).await["status"],
        "done"
    );
    s.assert_books_balanced();
    s.stop().await;
}

/// Moves the server's clock to `hh:mm` UTC of the current test day (or of the next one when
/// `next_day`), and returns the new time.
fn set_time_of_day(s: &TestServer, hh: u64, mm: u64, next_day: bool) -> u64 {
    const DAY: u64 = 86_400_000;
    let now = s.clock.now();
    let day_start = now - now % DAY + if next_day { DAY } else { 0 };
    let target = day_start + (hh * 60 + mm) * 60_000;
    s.clock.advance(target as i64 - now as i64);
    s.clock.now()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_daily_limits_reset_at_midnight_utc_not_after_24_hours() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (_, basic) = s.user("basic@example.com", 1000, false);
    let (_, pro) = s.user("pro@example.com", 1000, true);
    // Noon UTC: both use up the default limits (25 and 250 generations a day).
    set_time_of_day(&s, 12, 0, false);
    let use_up = |key: String, limit: usize| {
        let s = &s;
        async move {
            for i in 0..limit {
                let (st, c) = s
                    .generate(&key, json!({"prompt": format!("noon {i}")}))
                    .await;
                assert_eq!(st, 202, "{c}");
                let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
                assert_eq!(done["status"], "done", "{done}");
            }
            let me = s.me(&key).await;
            assert_eq!(me["daily_used"], limit, "{me}");
            assert_eq!(me["daily_limit"], limit, "{me}");
        }
    };
    tokio::join!(use_up(basic.clone(), 25), use_up(pro.clone(), 250));
    // 23:59 the same day: one more is refused at start, nothing charged.
    let at = set_time_of_day(&s, 23, 59, false);
    for key in [&basic, &pro] {
        let balance = s.me(key).await["balance"].as_i64().unwrap();
        let (st, c) = s.generate(key, json!({"prompt": "23:59"})).await;
        assert_eq!(st, 202, "{c}");
        let failed = s.finish(key, c["job_id"].as_str().unwrap()).await;
        assert_eq!(failed["error_code"], "daily_limit", "{failed}");
        assert_eq!(failed["balance"], balance, "{failed}");
        let refused_at = failed["finished_at"].as_u64().unwrap();
        assert!(
            (at..at + 60_000).contains(&refused_at),
            "refused at {refused_at}, not 23:59"
        );
    }
    // 00:01 the next day, 12 hours after the noon jobs (a rolling 24 hours would still refuse):
    // the limit is fresh.
    set_time_of_day(&s, 0, 1, true);
    for key in [&basic, &pro] {
        assert_eq!(s.me(key).await["daily_used"], 0);
        let (st, c) = s.generate(key, json!({"prompt": "00:01"})).await;
        assert_eq!(st, 202, "{c}");
        let done = s.finish(key, c["job_id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "done", "{done}");
        assert_eq!(s.me(key).await["daily_used"], 1);
    }
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_wait_for_a_render_slot_in_creation_order() {
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(Recorder {
        gate: gate.clone(),
        order: order.clone(),
    }))
    .await;
    let mut jobs = Vec::new();
    for i in 0..6 {
        let (_, key) = s.user(&format!("q{i}@example.com"), 10, false);
        let (st, c) = s
            .generate(
                &key,
                json!({"prompt": format!("job {i}"), "enhance": false}),
            )
            .await;
        assert_eq!(st, 202, "{c}");
        let id = c["job_id"].as_str().unwrap().to_string();
        if i == 0 {
            s.wait_for_job(&key, &id, "running", |v| v["status"] == "running")
                .await;
        } else {
            // Each new job joins the end of the line.
            s.wait_for_job(&key, &id, "queued last", |v| v["queue_position"] == i)
                .await;
        }
        jobs.push((key, id));
    }
    gate.open();
    for (key, id) in &jobs {
        assert_eq!(s.finish(key, id).await["status"], "done");
    }
    let expected: Vec<String> = (0..6).map(|i| format!("job {i}")).collect();
    assert_eq!(*order.lock().unwrap(), expected);
    s.assert_books_balanced();
    s.stop().await;
}

/// Renders (after its gate opens) in one slot and remembers the prompts in render order.
struct Recorder {
    gate: Gate,
    order: Arc<std::sync::Mutex<Vec<String>>>,
}

impl pictor::render::Renderer for Recorder {
    fn generate(
        &self,
        spec: &pictor::render::GenerateSpec,
    ) -> Result<pictor::render::Picture, pictor::render::RenderError> {
        self.order.lock().unwrap().push(spec.prompt.clone());
        self.gate.generate(spec)
    }

    fn edit(
        &self,
        spec: &pictor::render::EditSpec,
    ) -> Result<pictor::render::Picture, pictor::render::RenderError> {
        self.gate.edit(spec)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_edges_of_the_accepted_ranges_are_accepted() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (_, key) = s.user("edges@example.com", 100, true);
    let run = |body: serde_json::Value| {
        let (s, key) = (&s, key.clone());
        async move {
            let (st, c) = s.generate(&key, body.clone()).await;
            assert_eq!(st, 202, "{body}: {c}");
            let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
            assert_eq!(done["status"], "done", "{done}");
            done
        }
    };
    // seed: -1 means random (reported as the seed actually used), 0 and 4294967295 are kept.
    let random = run(json!({"prompt": "a boat", "seed": -1})).await;
    assert!(
        random["seed"].as_u64().unwrap() <= u32::MAX as u64,
        "{random}"
    );
    for seed in [0u64, 4_294_967_295] {
        assert_eq!(
            run(json!({"prompt": "a boat", "seed": seed})).await["seed"],
            seed
        );
    }
    for seed in [json!(-2), json!(4_294_967_296u64)] {
        assert_error(
            &s.generate(&key, json!({"prompt": "a boat", "seed": seed}))
                .await,
            400,
            "invalid_request",
        );
    }
    // Newline, carriage return and tab are allowed in prompts and kept as sent; other control
    // characters are refused.
    let prompt = "a boat\non the sea,\tat dawn\r\nwith gulls";
    assert_eq!(run(json!({ "prompt": prompt })).await["prompt"], prompt);
    for bad in ["a\u{7}boat", "a\u{1b}[31mboat", "a\u{7f}boat"] {
        assert_error(
            &s.generate(&key, json!({ "prompt": bad })).await,
            400,
            "invalid_prompt",
        );
    }
    // 4000 characters (not bytes: 16,000 bytes of four-byte characters) is the most.
    let longest = "🐱".repeat(4000);
    assert_eq!(run(json!({ "prompt": longest })).await["prompt"], longest);
    assert_error(
        &s.generate(&key, json!({ "prompt": "🐱".repeat(4001) }))
            .await,
        400,
        "invalid_prompt",
    );
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credits_checked_again_at_start_and_queue_overflow_is_tokens_exhausted() {
    let gate = Gate::default();
    let s = TestServer::start_with(Options {
        renderer: Arc::new(gate.clone()),
        render_workers: 1,
        queue_size: 1,
        ..Options::default()
    })
    .await;
    let (_, a) = s.user("a@example.com", 10, false);
    let (b_email, b) = s.user("b@example.com", 1, false);
    let (_, c) = s.user("c@example.com", 10, false);

    let (_, ja) = s.generate(&a, json!({"prompt": "first"})).await;
    // Wait until A's job holds the only render slot.
    s.wait_for_job(&a, ja["job_id"].as_str().unwrap(), "running", |v| {
        v["status"] == "running"
    })
    .await;
    let (st, jb) = s.generate(&b, json!({"prompt": "second"})).await;
    assert_eq!(st, 202);
    // B's job waits in the render queue (first in line); the queue is full now: C's overflows.
    s.wait_for_job(&b, jb["job_id"].as_str().unwrap(), "first in line", |v| {
        v["status"] == "queued" && v["queue_position"] == 1
    })
    .await;
    let (st, jc) = s.generate(&c, json!({"prompt": "third"})).await;
    assert_eq!(st, 202);
    let fc = s.finish(&c, jc["job_id"].as_str().unwrap()).await;
    assert_eq!(fc["error_code"], "tokens_exhausted", "{fc}");
    assert_eq!(fc["balance"], 10);
    // B spends its credit elsewhere while queued: at start it cannot pay.
    s.admin(AdminRequest::CreditsGrant {
        email: b_email,
        amount: -1,
    });
    gate.open();
    let fb = s.finish(&b, jb["job_id"].as_str().unwrap()).await;
    assert_eq!(fb["error_code"], "insufficient_credits", "{fb}");
    assert_eq!(fb["balance"], 0);
    assert_eq!(
        s.finish(&a, ja["job_id"].as_str().unwrap()).await["status"],
        "done"
    );
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_timeout_is_tokens_exhausted() {
    let gate = Gate::default();
    let s = TestServer::start_with(Options {
        renderer: Arc::new(gate.clone()),
        render_workers: 1,
        queue_timeout: Duration::from_secs(1),
        ..Options::default()
    })
    .await;
    let (_, a) = s.user("a@example.com", 10, false);
    let (_, b) = s.user("b@example.com", 10, false);
    let (_, ja) = s.generate(&a, json!({"prompt": "slow"})).await;
    s.wait_for_job(&a, ja["job_id"].as_str().unwrap(), "running", |v| {
        v["status"] == "running"
    })
    .await;
    let (_, jb) = s.generate(&b, json!({"prompt": "waits too long"})).await;
    let fb = s.finish(&b, jb["job_id"].as_str().unwrap()).await;
    assert_eq!(fb["error_code"], "tokens_exhausted");
    assert_eq!(fb["balance"], 10);
    gate.open();
    s.finish(&a, ja["job_id"].as_str().unwrap()).await;
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_applies_instruction_to_upload() {
    let s = TestServer::start().await;
    let (_, key) = s.user("edit@example.com", 10, true);
    let form = reqwest::multipart::Form::new()
        .part(
            "photo",
            reqwest::multipart::Part::bytes(png_bytes(120, 80))
                .file_name("x.png")
                .mime_str("image/png")
                .unwrap(),
        )
        .text(
            "prompt",
            "make it black and white and rotate it 90 degrees clockwise",
        );
    let r = s
        .client
        .post(s.url("/api/pictor/v1/edit"))
        .header("X-API-Key", &key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let (st, c) = status_json(r).await;
    assert_eq!(st, 202, "{c}");
    assert_eq!(c["cost"], 2);
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["kind"], "edit");
    assert_eq!(done["balance"], 8);
    let img = s.download(done["photo_url"].as_str().unwrap()).await;
    assert_eq!(img.dimensions(), (80, 120), "rotated 90°");
    assert!(
        img.pixels().all(|p| p[0] == p[1] && p[1] == p[2]),
        "grayscale (PRO: no watermark)"
    );
    // The stored upload is removed once the job is over (by the job's task, just after the
    // long-poll was woken by the finishing commit).
    let sources = s.data_dir().join("sources");
    let t = Instant::now();
    while std::fs::read_dir(&sources).unwrap().count() > 0 && t.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(std::fs::read_dir(&sources).unwrap().count(), 0);
    s.assert_books_balanced();
    s.stop().await;
}

/// `POST /v1/edit/raw`: the photo as the body, the instruction as `prompt`; the same job and
/// price as the form upload, and each bad request refused with its code and nothing made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_with_the_photo_as_the_request_body() {
    let s = TestServer::start().await;
    let (_, key) = s.user("raw@example.com", 10, true);
    let raw = |query: &str, body: Vec<u8>, content_type: Option<&str>| {
        let mut req = s
            .client
            .post(s.url(&format!("/api/pictor/v1/edit/raw{query}")))
            .bearer_auth(&key)
            .body(body);
        if let Some(t) = content_type {
            req = req.header("content-type", t);
        }
        async move { status_json(req.send().await.unwrap()).await }
    };
    let long = format!("?prompt={}", "a".repeat(4001));
    let refused = [
        raw("", png_bytes(40, 30), Some("image/png")).await,
        raw("?prompt=", png_bytes(40, 30), Some("image/png")).await,
        raw("?prompt=%20%20", png_bytes(40, 30), Some("image/png")).await,
        raw(&long, png_bytes(40, 30), Some("image/png")).await,
        raw("?prompt=grayscale", vec![], Some("image/png")).await,
        raw(
            "?prompt=grayscale",
            b"not a picture".to_vec(),
            Some("image/png"),
        )
        .await,
        raw("?prompt=grayscale", png_bytes(40, 30), None).await,
        raw(
            "?prompt=grayscale&webhook_url=ftp%3A%2F%2Fexample.com",
            png_bytes(40, 30),
            Some("image/png"),
        )
        .await,
    ];
    let codes = [
        "invalid_prompt",
        "invalid_prompt",
        "invalid_prompt",
        "invalid_prompt",
        "invalid_image",
        "invalid_image",
        "invalid_image",
        "invalid_request",
    ];
    for (got, code) in refused.iter().zip(codes) {
        assert_error(got, 400, code);
    }
    let big = vec![0u8; 20 * 1024 * 1024 + 1];
    assert_error(
        &raw("?prompt=grayscale", big, Some("application/octet-stream")).await,
        413,
        "image_too_large",
    );
    let (_, jobs) = s.get(&key, "/api/pictor/v1/jobs").await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 0, "no job was made");
    assert_eq!(s.me(&key).await["balance"], 10);

    // Any content type: the photo is recognised by its bytes.
    let (st, c) = raw(
        "?prompt=make%20it%20black%20and%20white",
        png_bytes(64, 48),
        Some("application/octet-stream"),
    )
    .await;
    assert_eq!(st, 202, "{c}");
    assert_eq!(c["cost"], 2);
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["kind"], "edit");
    assert_eq!(done["prompt"], "make it black and white");
    assert_eq!(done["balance"], 8);
    let img = s.download(done["photo_url"].as_str().unwrap()).await;
    assert_eq!(img.dimensions(), (64, 48));
    assert!(img.pixels().all(|p| p[0] == p[1] && p[1] == p[2]));
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_instruction_fails_with_edit_failed_and_refund() {
    let s = TestServer::start().await;
    let (_, key) = s.user("edit2@example.com", 10, false);
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(png_bytes(32, 32)).file_name("x.png"),
        )
        .text("prompt", "qwzx blorp");
    let (st, c) = s.edit_form(&key, form).await;
    assert_eq!(st, 202, "{c}");
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(done["error_code"], "edit_failed", "{done}");
    assert_eq!(done["balance"], 10);
    s.assert_books_balanced();
    s.stop().await;
}

/// An edit the built-in painter understands but cannot do as asked is never passed off as done:
/// dressing someone in the photo fails `edit_failed` (credits returned) saying why; in a longer
/// instruction the rest is done and the job, like its PNG, says what was and what was not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_the_painter_cannot_do_is_said_not_substituted() {
    let s = TestServer::start().await;
    let (_, key) = s.user("edit3@example.com", 10, false);
    let edit = |prompt: &'static str| {
        reqwest::multipart::Form::new()
            .part(
                "file",
                reqwest::multipart::Part::bytes(png_bytes(64, 48)).file_name("x.png"),
            )
            .text("prompt", prompt)
    };
    for prompt in [
        "put a small red hat on the girl",
        "надень на девочку маленькую красную шляпу",
    ] {
        let (st, c) = s.edit_form(&key, edit(prompt)).await;
        assert_eq!(st, 202, "{c}");
        let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
        assert_eq!(done["error_code"], "edit_failed", "{done}");
        let why = done["error"].as_str().unwrap();
        assert!(
            why.contains("does not find people") || why.contains("не находит людей"),
            "{why}"
        );
        assert_eq!(done["balance"], 10, "{done}");
    }
    let (st, c) = s
        .edit_form(
            &key,
            edit("make it black and white and add a dog next to the girl"),
        )
        .await;
    assert_eq!(st, 202, "{c}");
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(
        done["scene"]["drawn"],
        json!(["black and white", "added dog"]),
        "{done}"
    );
    assert_eq!(
        done["scene"]["not_drawn"],
        json!(["next to girl"]),
        "{done}"
    );
    let png = reqwest::get(done["photo_url"].as_str().unwrap())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let text = pictor::render::encode::read_parameters(&png).unwrap();
    assert!(text.contains("Not drawn: next to girl"), "{text}");
    s.assert_books_balanced();
    s.stop().await;
}

/// The built-in painter says in the job body and in the PNG what it drew of the prompt and what
/// it could not draw (English names, also for Russian words).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_says_what_the_painter_drew_and_could_not() {
    let s = TestServer::start().await;
    let (_, key) = s.user("sam@example.com", 20, false);
    let (status, created) = s
        .generate(
            &key,
            json!({"prompt": "a girl with an umbrella and a kangaroo by the sea", "model": "fast"}),
        )
        .await;
    assert_eq!(status, 202, "{created}");
    let done = s.finish(&key, created["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "done", "{done}");
    let drawn = done["scene"]["drawn"].as_array().unwrap();
    let not_drawn = done["scene"]["not_drawn"].as_array().unwrap();
    for word in ["person", "umbrella", "sea"] {
        assert!(drawn.contains(&json!(word)), "{word}: {done}");
    }
    assert_eq!(not_drawn, &vec![json!("kangaroo")], "{done}");
    // The picture's parameters chunk records it too.
    let png = reqwest::get(done["photo_url"].as_str().unwrap())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let text = pictor::render::encode::read_parameters(&png).unwrap();
    assert!(text.contains("Not drawn: kangaroo"), "{text}");
    assert!(text.contains("Drawn: \"person, umbrella"), "{text}");

    // A Russian prompt: English names.
    let (status, created) = s
        .generate(&key, json!({"prompt": "кенгуру и дракон", "model": "fast"}))
        .await;
    assert_eq!(status, 202, "{created}");
    let done = s.finish(&key, created["job_id"].as_str().unwrap()).await;
    assert_eq!(done["scene"]["drawn"], json!(["dragon"]), "{done}");
    assert_eq!(done["scene"]["not_drawn"], json!(["kangaroo"]), "{done}");
    s.assert_books_balanced();
    s.stop().await;
}

/// A content edit through the API: the picture a job made goes back as an upload, and "remove
/// the boat" paints it again without the boat (non-PRO: watermarked source and result); an
/// instruction Pictor does not know fails `edit_failed` with a short message in its language.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_picture_is_edited_by_what_it_contains() {
    let s = TestServer::start().await;
    let (_, key) = s.user("eve@example.com", 40, false);
    let (status, created) = s
        .generate(
            &key,
            json!({"prompt": "a red boat on a lake with mountains", "model": "fast", "seed": 4}),
        )
        .await;
    assert_eq!(status, 202, "{created}");
    let done = s.finish(&key, created["job_id"].as_str().unwrap()).await;
    let png = reqwest::get(done["photo_url"].as_str().unwrap())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let red = |img: &image::RgbaImage| {
        img.pixels()
            .filter(|p| p[0] > 150 && p[1] < 90 && p[2] < 90)
            .count()
    };
    let before = image::load_from_memory(&png).unwrap().to_rgba8();
    let edit = |instruction: &str| {
        let form = reqwest::multipart::Form::new()
            .part(
                "image",
                reqwest::multipart::Part::bytes(png.clone()).file_name("boat.png"),
            )
            .text("prompt", instruction.to_string());
        s.client
            .post(s.url("/api/pictor/v1/edit"))
            .bearer_auth(&key)
            .multipart(form)
            .send()
    };
    let (st, c) = status_json(edit("remove the boat").await.unwrap()).await;
    assert_eq!(st, 202, "{c}");
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "done", "{done}");
    let after = reqwest::get(done["photo_url"].as_str().unwrap())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let after = image::load_from_memory(&after).unwrap().to_rgba8();
    assert_eq!(after.dimensions(), before.dimensions());
    assert!(
        red(&before) > 300 && red(&after) * 10 < red(&before),
        "the boat is gone"
    );

    let (st, c) = status_json(edit("сделай красиво").await.unwrap()).await;
    assert_eq!(st, 202, "{c}");
    let failed = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(failed["error_code"], "edit_failed", "{failed}");
    let msg = failed["error"].as_str().unwrap();
    assert!(
        msg.contains("добавь луну") && msg.chars().count() < 300,
        "{msg}"
    );
    s.assert_books_balanced();
    s.stop().await;
}

/// Renders at once until `block` is set; then waits (up to 10 s) for its job to be cancelled,
/// and finishes its picture all the same (as a renderer without checkpoints would).
#[derive(Default)]
struct UntilCancelled {
    block: std::sync::atomic::AtomicBool,
    saw_cancel: std::sync::atomic::AtomicBool,
}

impl pictor::render::Renderer for UntilCancelled {
    fn generate(
        &self,
        _: &pictor::render::GenerateSpec,
    ) -> Result<pictor::render::Picture, pictor::render::RenderError> {
        unreachable!("the engine calls generate_with")
    }
    fn edit(
        &self,
        _: &pictor::render::EditSpec,
    ) -> Result<pictor::render::Picture, pictor::render::RenderError> {
        unreachable!("no edits here")
    }
    fn generate_with(
        &self,
        spec: &pictor::render::GenerateSpec,
        control: &pictor::render::RenderControl,
    ) -> Result<pictor::render::Picture, pictor::render::RenderError> {
        use std::sync::atomic::Ordering;
        if self.block.load(Ordering::SeqCst) {
            let until = Instant::now() + Duration::from_secs(10);
            while Instant::now() < until {
                if control.is_cancelled() {
                    self.saw_cancel.store(true, Ordering::SeqCst);
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let (w, h) = spec.model.dimensions(spec.ratio);
        Ok(flat_picture(w, h, [10, 20, 30, 255]))
    }
}

/// The render begins beside the job's start (the charge); a start that fails stops it and
/// nothing of it is kept: no picture file, no charge, the failure reported as the start's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_fails_stops_the_render_begun_beside_it() {
    use std::sync::atomic::Ordering;
    let renderer = Arc::new(UntilCancelled::default());
    let s = TestServer::with_renderer(renderer.clone()).await;
    let (email, key) = s.user("beside@example.com", 10, false);
    set_daily_limit(&s, &email, 1);
    let (_, c) = s.generate(&key, json!({"prompt": "one"})).await;
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "done", "{done}");
    let balance = done["balance"].clone();
    let pictures = || {
        std::fs::read_dir(s.data_dir().join("images"))
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(pictures().len(), 1, "{:?}", pictures());

    renderer.block.store(true, Ordering::SeqCst);
    let t = Instant::now();
    let (st, c) = s.generate(&key, json!({"prompt": "two"})).await;
    assert_eq!(st, 202, "{c}");
    let failed = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(failed["error_code"], "daily_limit", "{failed}");
    assert_eq!(failed["balance"], balance, "not charged");
    // The render saw the cancel long before its own 10 s limit.
    while !renderer.saw_cancel.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        renderer.saw_cancel.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(8),
        "the render was not stopped ({:?})",
        t.elapsed()
    );
    // The user can go on at once (the slot and the active job are free), and no file was
    // written for the failed job (its render did return a picture).
    assert_eq!(s.me(&key).await["active_job"], json!(null));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(pictures().len(), 1, "{:?}", pictures());
    s.assert_books_balanced();
    s.stop().await;
}

/// The watermark is decided when the job starts: an account made PRO while its job waited gets
/// a picture without it, although the render (begun beside the start) began with the
/// watermark the job had when it was created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watermark_is_decided_at_the_start() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let (_, first) = s.user("first@example.com", 10, true);
    let (upgraded_email, upgraded) = s.user("upgraded@example.com", 10, false);
    let (_, free) = s.user("free@example.com", 10, false);
    let (_, j1) = s.generate(&first, json!({"prompt": "one"})).await;
    s.wait_for_job(&first, j1["job_id"].as_str().unwrap(), "running", |v| {
        v["status"] == "running"
    })
    .await;
    let (_, j2) = s.generate(&upgraded, json!({"prompt": "two"})).await;
    let (_, j3) = s.generate(&free, json!({"prompt": "three"})).await;
    s.admin(AdminRequest::UserUpdate {
        email: upgraded_email,
        pro: Some(true),
        banned: None,
        daily_limit: None,
        admin: None,
        approve: false,
    });
    gate.open();
    s.finish(&first, j1["job_id"].as_str().unwrap()).await;
    let flat = |img: &image::RgbaImage| img.pixels().all(|p| p.0 == [40, 90, 160, 255]);
    let two = s.finish(&upgraded, j2["job_id"].as_str().unwrap()).await;
    let two = s.download(two["photo_url"].as_str().unwrap()).await;
    assert!(flat(&two), "PRO at the start: no watermark");
    let three = s.finish(&free, j3["job_id"].as_str().unwrap()).await;
    let three = s.download(three["photo_url"].as_str().unwrap()).await;
    assert!(!flat(&three), "not PRO: watermarked");
    s.assert_books_balanced();
    s.stop().await;
}

/// Counts its renders; says it is a remote engine (as the inference-server backends do).
#[derive(Default)]
struct RemoteCounting {
    calls: std::sync::atomic::AtomicUsize,
}

impl pictor::render::Renderer for RemoteCounting {
    fn generate(
        &self,
        spec: &pictor::render::GenerateSpec,
    ) -> Result<pictor::render::Picture, pictor::render::RenderError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (w, h) = spec.model.dimensions(spec.ratio);
        Ok(flat_picture(w, h, [10, 20, 30, 255]))
    }
    fn edit(
        &self,
        _: &pictor::render::EditSpec,
    ) -> Result<pictor::render::Picture, pictor::render::RenderError> {
        unreachable!("no edits here")
    }
    fn engine(&self, _: pictor::render::Model) -> String {
        "a1111".into()
    }
    fn is_local(&self, _: pictor::render::Model) -> bool {
        false
    }
}

/// A remote server's render is billed or queued upstream once sent, so for a remote engine the
/// start comes first: a job refused at start never reaches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_render_is_sent_only_after_the_start() {
    use std::sync::atomic::Ordering;
    let renderer = Arc::new(RemoteCounting::default());
    let s = TestServer::with_renderer(renderer.clone()).await;
    let (email, key) = s.user("remote@example.com", 10, false);
    set_daily_limit(&s, &email, 1);
    let (_, c) = s.generate(&key, json!({"prompt": "one"})).await;
    assert_eq!(
        s.finish(&key, c["job_id"].as_str().unwrap()).await["status"],
        "done"
    );
    assert_eq!(renderer.calls.load(Ordering::SeqCst), 1);
    for prompt in ["two", "three"] {
        let (st, c) = s.generate(&key, json!({"prompt": prompt})).await;
        assert_eq!(st, 202, "{c}");
        let failed = s.finish(&key, c["job_id"].as_str().unwrap()).await;
        assert_eq!(failed["error_code"], "daily_limit", "{failed}");
    }
    assert_eq!(
        renderer.calls.load(Ordering::SeqCst),
        1,
        "refused jobs were sent"
    );
    s.assert_books_balanced();
    s.stop().await;
}

/// With prompt improvement on, the enhancer's own words ("clear silhouette", "starry sky") are
/// never reported as things the painter could not draw: only what the person asked for is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_enhancers_words_are_not_reported_as_not_drawn() {
    let s = TestServer::start().await;
    let (_, key) = s.user("ned@example.com", 40, true);
    for (prompt, seed) in [
        ("a bowl of fruit", 0),
        ("a girl reading in a library", 1),
        ("a vase of flowers on a table", 2),
    ] {
        let (status, created) = s
            .generate(
                &key,
                json!({"prompt": prompt, "model": "fast", "enhance": true, "seed": seed}),
            )
            .await;
        assert_eq!(status, 202, "{created}");
        let done = s.finish(&key, created["job_id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "done", "{done}");
        assert!(
            done["enhanced_prompt"]
                .as_str()
                .is_some_and(|e| e.contains("clear silhouette")),
            "{done}"
        );
        let asked = pictor::render::procedural::mentioned(prompt);
        for n in done["scene"]["not_drawn"].as_array().unwrap() {
            assert!(
                asked.iter().any(|a| n == a),
                "{prompt:?}: {n} is the enhancer's word, not the person's: {done}"
            );
        }
    }
    s.stop().await;
}
