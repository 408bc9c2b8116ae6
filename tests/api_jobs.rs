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

    // Completion: a 60 s wait returns as soon as the job finishes.
    let opener = {
        let gate = gate.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            gate.open();
        })
    };
    let t = Instant::now();
    let (st, v) = s
        .get(&key, &format!("/api/pictor/v1/jobs/{id}?wait=60"))
        .await;
    assert_eq!(st, 200);
    assert_eq!(v["status"], "done", "{v}");
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "long-poll did not return on completion"
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daily_limit_fails_the_job_and_resets_next_day() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (email, key) = s.user("daily@example.com", 10, false);
    s.admin(AdminRequest::UserUpdate {
        email: email.clone(),
        pro: None,
        banned: None,
        daily_limit: Some(1),
        admin: None,
        approve: false,
    });
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
    let r = s
        .client
        .post(s.url("/api/pictor/v1/edit"))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let (st, c) = status_json(r).await;
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
    for _ in 0..100 {
        if s.get(
            &a,
            &format!("/api/pictor/v1/jobs/{}", ja["job_id"].as_str().unwrap()),
        )
        .await
        .1["status"]
            == "running"
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (st, jb) = s.generate(&b, json!({"prompt": "second"})).await;
    assert_eq!(st, 202);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The queue holds one waiting job: C's overflows.
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
    tokio::time::sleep(Duration::from_millis(200)).await;
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
    // The stored upload is removed once the job is over.
    assert_eq!(
        std::fs::read_dir(s.data_dir().join("sources"))
            .unwrap()
            .count(),
        0
    );
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
    let r = s
        .client
        .post(s.url("/api/pictor/v1/edit"))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let (st, c) = status_json(r).await;
    assert_eq!(st, 202, "{c}");
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    assert_eq!(done["error_code"], "edit_failed", "{done}");
    assert_eq!(done["balance"], 10);
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
