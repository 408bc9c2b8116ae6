//! The OpenAI Images API served by Pictor (`/openai/v1`, also under `/api/pictor/openai/v1`):
//! generations and edits as OpenAI's clients send them, the answers they expect (`url` and
//! `b64_json`, real PNGs at the asked ratio), OpenAI's error shape and statuses for every refusal
//! (which change nothing), credits that add up exactly, one active job per user (429), and the
//! official `openai` Python package against a real server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};

async fn post(s: &TestServer, key: Option<&str>, path: &str, body: Value) -> (u16, Value) {
    let mut req = s.client.post(format!("{}{path}", s.base)).json(&body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    status_json(req.send().await.unwrap()).await
}

fn png_of(bytes: &[u8]) -> image::RgbaImage {
    assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
    image::load_from_memory(bytes).unwrap().to_rgba8()
}

fn balance(s: &TestServer, email: &str) -> i64 {
    s.store().user_by_email(email).unwrap().unwrap().balance
}

fn jobs_of(s: &TestServer, email: &str) -> usize {
    let user = s.store().user_by_email(email).unwrap().unwrap();
    s.store().user_jobs(user.id, 1000).unwrap().len()
}

/// An OpenAI error body: status, `type`, `code`, `param`.
fn openai_error(
    got: &(u16, Value),
    status: u16,
    kind: &str,
    code: Option<&str>,
    param: Option<&str>,
) {
    let (st, v) = got;
    assert_eq!(*st, status, "{v}");
    let e = &v["error"];
    assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    assert_eq!(e["type"], kind, "{v}");
    assert_eq!(e["code"], code.map_or(Value::Null, Value::from), "{v}");
    assert_eq!(e["param"], param.map_or(Value::Null, Value::from), "{v}");
}

#[tokio::test]
async fn openai_clients_generate_edit_and_read_models() {
    let s = TestServer::start().await;
    let (email, key) = s.user("openai@example.com", 20, true);

    // Two images in one call, as PNG bytes, at the nearest ratio to 1792×1024 (16:9).
    let (st, v) = post(
        &s,
        Some(&key),
        "/openai/v1/images/generations",
        json!({"prompt": "a lighthouse on a cliff at dusk", "n": 2, "size": "1792x1024",
               "response_format": "b64_json", "quality": "hd", "user": "someone"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert!(v["created"].as_u64().unwrap() > 1_700_000_000, "{v}");
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "{v}");
    let mut firsts = Vec::new();
    for d in data {
        assert!(d.get("url").is_none(), "{d}");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(d["b64_json"].as_str().unwrap())
            .unwrap();
        let img = png_of(&bytes);
        let r = f64::from(img.width()) / f64::from(img.height());
        assert!(
            (r - 16.0 / 9.0).abs() < 0.02,
            "{}x{}",
            img.width(),
            img.height()
        );
        firsts.push(img.as_raw()[..64].to_vec());
    }
    assert_ne!(firsts[0], firsts[1], "two images, two seeds");
    assert_eq!(balance(&s, &email), 18, "fast costs 1 per image");

    // The long base, OpenAI's model name, a link to the picture.
    let (st, v) = post(
        &s,
        Some(&key),
        "/api/pictor/openai/v1/images/generations",
        json!({"prompt": "a red bicycle", "model": "dall-e-3", "size": "1024x1536"}),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let url = v["data"][0]["url"].as_str().unwrap();
    let img = png_of(
        &s.client
            .get(url)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    );
    assert!(img.height() > img.width(), "2:3");
    assert_eq!(
        balance(&s, &email),
        13,
        "dall-e-3 draws with the artist tier (5)"
    );

    // Models: Pictor's ids and OpenAI's names.
    let models: Value = s
        .client
        .get(format!("{}/openai/v1/models", s.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    for id in [
        "fast",
        "artist",
        "0.2plus",
        "dall-e-2",
        "dall-e-3",
        "gpt-image-1",
    ] {
        assert!(ids.contains(&id), "{ids:?}");
    }

    // An edit: multipart as OpenAI's clients send it.
    let form = reqwest::multipart::Form::new()
        .part(
            "image",
            reqwest::multipart::Part::bytes(png_bytes(64, 48))
                .file_name("photo.png")
                .mime_str("image/png")
                .unwrap(),
        )
        .text("prompt", "make it black and white")
        .text("n", "1")
        .text("response_format", "b64_json");
    let r = s
        .client
        .post(format!("{}/openai/v1/images/edits", s.base))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let (st, v) = status_json(r).await;
    assert_eq!(st, 200, "{v}");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v["data"][0]["b64_json"].as_str().unwrap())
        .unwrap();
    let img = png_of(&bytes);
    let grey = img.pixels().all(|p| p[0] == p[1] && p[1] == p[2]);
    assert!(grey, "black and white");
    assert_eq!(balance(&s, &email), 11, "an edit costs 2");

    // An instruction the edit tier cannot do: 400 naming the prompt, the credits returned.
    let form = reqwest::multipart::Form::new()
        .part(
            "image[]",
            reqwest::multipart::Part::bytes(png_bytes(16, 16)).file_name("a.png"),
        )
        .text("prompt", "0");
    let got = status_json(
        s.client
            .post(format!("{}/openai/v1/images/edits", s.base))
            .bearer_auth(&key)
            .multipart(form)
            .send()
            .await
            .unwrap(),
    )
    .await;
    openai_error(
        &got,
        400,
        "invalid_request_error",
        Some("edit_failed"),
        Some("prompt"),
    );
    assert_eq!(balance(&s, &email), 11, "refunded");

    // A mask (OpenAI's: transparent = change) limits the edit to its area: the left half turns
    // black and white, the right half keeps its colours exactly.
    let source = png_bytes(64, 48);
    let mask = {
        let img = image::RgbaImage::from_fn(64, 48, |x, _| {
            image::Rgba([0, 0, 0, if x < 32 { 0 } else { 255 }])
        });
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    };
    let form = reqwest::multipart::Form::new()
        .part(
            "image",
            reqwest::multipart::Part::bytes(source.clone()).file_name("photo.png"),
        )
        .part(
            "mask",
            reqwest::multipart::Part::bytes(mask).file_name("mask.png"),
        )
        .text("prompt", "make it black and white")
        .text("response_format", "b64_json");
    let (st, v) = status_json(
        s.client
            .post(format!("{}/openai/v1/images/edits", s.base))
            .bearer_auth(&key)
            .multipart(form)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let img = png_of(
        &base64::engine::general_purpose::STANDARD
            .decode(v["data"][0]["b64_json"].as_str().unwrap())
            .unwrap(),
    );
    let src = png_of(&source);
    for (x, y, p) in img.enumerate_pixels() {
        if x < 32 {
            assert!(
                p[0] == p[1] && p[1] == p[2],
                "({x}, {y}) inside the mask is grey"
            );
        } else if !(x >= 40 && y >= 30) {
            // (the watermark's corner aside)
            assert_eq!(
                p.0[..3],
                src.get_pixel(x, y).0[..3],
                "({x}, {y}) outside the mask"
            );
        }
    }
    assert_eq!(balance(&s, &email), 9, "a masked edit costs 2 too");

    // Refusals: OpenAI's shape, nothing charged, no job made.
    let jobs_before = jobs_of(&s, &email);
    let (st, v) = {
        let form = reqwest::multipart::Form::new()
            .part(
                "image",
                reqwest::multipart::Part::bytes(png_bytes(8, 8)).file_name("a.png"),
            )
            .part(
                "mask",
                reqwest::multipart::Part::bytes(png_bytes(4, 4)).file_name("m.png"),
            )
            .text("prompt", "add a hat");
        status_json(
            s.client
                .post(format!("{}/openai/v1/images/edits", s.base))
                .bearer_auth(&key)
                .multipart(form)
                .send()
                .await
                .unwrap(),
        )
        .await
    };
    openai_error(&(st, v), 400, "invalid_request_error", None, Some("mask"));
    let generations = "/openai/v1/images/generations";
    for (body, param) in [
        (json!({"prompt": "x", "n": 5}), "n"),
        (json!({"prompt": "x", "n": 0}), "n"),
        (json!({"prompt": "x", "n": "2"}), "n"),
        (json!({"prompt": "x", "size": "huge"}), "size"),
        (json!({"prompt": "x", "size": "0x1024"}), "size"),
        (json!({"prompt": "x", "model": "midjourney"}), "model"),
        (
            json!({"prompt": "x", "response_format": "xml"}),
            "response_format",
        ),
        (json!({"n": 1}), "prompt"),
        (json!({"prompt": "   "}), "prompt"),
        (json!({"prompt": "x".repeat(4001)}), "prompt"),
    ] {
        let got = post(&s, Some(&key), generations, body.clone()).await;
        openai_error(&got, 400, "invalid_request_error", None, Some(param));
    }
    let got = post(&s, Some("vx_wrong"), generations, json!({"prompt": "x"})).await;
    openai_error(
        &got,
        401,
        "invalid_request_error",
        Some("invalid_api_key"),
        None,
    );
    let got = post(&s, None, generations, json!({"prompt": "x"})).await;
    openai_error(
        &got,
        401,
        "invalid_request_error",
        Some("invalid_api_key"),
        None,
    );
    let r = s
        .client
        .post(format!("{}{generations}", s.base))
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let got = status_json(r).await;
    openai_error(&got, 400, "invalid_request_error", None, None);
    assert_eq!(balance(&s, &email), 9, "refusals cost nothing");
    assert_eq!(jobs_of(&s, &email), jobs_before, "and make no job");

    // Out of credits: 429 insufficient_quota, as OpenAI reports billing limits.
    let (_, broke) = s.user("broke@example.com", 0, true);
    let got = post(&s, Some(&broke), generations, json!({"prompt": "a cat"})).await;
    openai_error(
        &got,
        429,
        "insufficient_quota",
        Some("insufficient_quota"),
        None,
    );
    // Three credits for n=4 at 1 each: refused before any picture is made.
    let (poor_email, poor) = s.user("poor@example.com", 3, true);
    let got = post(
        &s,
        Some(&poor),
        generations,
        json!({"prompt": "a cat", "n": 4}),
    )
    .await;
    openai_error(
        &got,
        429,
        "insufficient_quota",
        Some("insufficient_quota"),
        None,
    );
    assert_eq!(balance(&s, &poor_email), 3, "nothing charged");
    assert_eq!(jobs_of(&s, &poor_email), 0, "no job made");
    // `user` must be a string, as published.
    let got = post(
        &s,
        Some(&key),
        generations,
        json!({"prompt": "x", "user": 0}),
    )
    .await;
    openai_error(&got, 400, "invalid_request_error", None, Some("user"));

    // A real photo through the short base URL (over the pages' 64 KiB body limit).
    let big = {
        let img = image::RgbaImage::from_fn(300, 300, |x, y| {
            image::Rgba([(x * 7 + y * 13) as u8, (x * y) as u8, (y * 3) as u8, 255])
        });
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    };
    assert!(big.len() > 64 * 1024, "{}", big.len());
    let form = reqwest::multipart::Form::new()
        .part(
            "image",
            reqwest::multipart::Part::bytes(big).file_name("big.png"),
        )
        .text("prompt", "make it black and white");
    let (st, v) = status_json(
        s.client
            .post(format!("{}/openai/v1/images/edits", s.base))
            .bearer_auth(&key)
            .multipart(form)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(balance(&s, &email), 7, "an edit costs 2");
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test]
async fn a_busy_account_is_rate_limited() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let (email, key) = s.user("busy@example.com", 10, true);
    let first = {
        let (client, url, key) = (
            s.client.clone(),
            format!("{}/openai/v1/images/generations", s.base),
            key.clone(),
        );
        tokio::spawn(async move {
            status_json(
                client
                    .post(url)
                    .bearer_auth(key)
                    .json(&json!({"prompt": "a slow picture"}))
                    .send()
                    .await
                    .unwrap(),
            )
            .await
        })
    };
    let user = s.store().user_by_email(&email).unwrap().unwrap();
    let mut active = false;
    for _ in 0..500 {
        if s.store().active_job(user.id).unwrap().is_some() {
            active = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(active, "the first request made no job");
    let got = tokio::time::timeout(
        Duration::from_secs(60),
        post(
            &s,
            Some(&key),
            "/openai/v1/images/generations",
            json!({"prompt": "another"}),
        ),
    )
    .await
    .expect("the second request was not refused at once");
    openai_error(&got, 429, "requests", Some("rate_limit_exceeded"), None);
    gate.open();
    let (st, v) = first.await.unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(balance(&s, &email), 9);
    s.assert_books_balanced();
    s.stop().await;
}

/// The official `openai` Python package (pinned in tests/clients/openai/requirements.txt) against
/// a real server: `PICTOR_OPENAI_PYTHON` names a Python that has it (`.ci/run` makes one); without
/// it the test says so and skips, except under CI.
#[tokio::test]
async fn the_official_openai_python_package_works_with_pictor() {
    let python = std::env::var("PICTOR_OPENAI_PYTHON").ok().or_else(|| {
        std::process::Command::new("python3")
            .args(["-c", "import openai"])
            .status()
            .ok()
            .filter(|s| s.success())
            .map(|_| "python3".to_string())
    });
    let Some(python) = python else {
        assert!(
            std::env::var_os("PICTOR_CI").is_none(),
            "PICTOR_OPENAI_PYTHON is not set and python3 has no `openai` package"
        );
        eprintln!(
            "skipped: no Python with the `openai` package (pip install -r tests/clients/openai/requirements.txt, or set PICTOR_OPENAI_PYTHON)"
        );
        return;
    };
    let s = TestServer::start().await;
    let (email, key) = s.user("sdk@example.com", 12, true);
    let (_, broke) = s.user("sdk-broke@example.com", 0, true);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/openai/check.py");
    let out = tokio::process::Command::new(&python)
        .arg(script)
        .env("OPENAI_BASE_URL", format!("{}/openai/v1", s.base))
        .env("PICTOR_KEY", &key)
        .env("PICTOR_BROKE_KEY", &broke)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("openai python: all checks passed"), "{text}");
    // 2 generations (1 each) + 2 edits (2 each).
    assert_eq!(balance(&s, &email), 12 - 2 - 2 * 2, "{text}");
    s.assert_books_balanced();
    s.stop().await;
}

/// The official `openai` npm package (pinned in tests/clients/openai-node; `.ci/run` installs it
/// with `npm ci`): a generation at a ratio, an edit with and without a mask, the models list and
/// the errors it maps to its exception classes. Without node or the package the test says so and
/// skips, except under CI.
#[tokio::test]
async fn the_official_openai_node_package_works_with_pictor() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/openai-node");
    let installed = std::path::Path::new(dir)
        .join("node_modules/openai/package.json")
        .is_file();
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(installed && node) {
        assert!(
            std::env::var_os("PICTOR_CI").is_none(),
            "node or tests/clients/openai-node/node_modules is missing (npm ci there)"
        );
        eprintln!("skipped: needs node and `npm ci` in tests/clients/openai-node");
        return;
    }
    let s = TestServer::start().await;
    let (email, key) = s.user("node@example.com", 12, true);
    let (_, broke) = s.user("node-broke@example.com", 0, true);
    let out = tokio::process::Command::new("node")
        .arg("check.mjs")
        .current_dir(dir)
        .env("OPENAI_BASE_URL", format!("{}/openai/v1", s.base))
        .env("PICTOR_KEY", &key)
        .env("PICTOR_BROKE_KEY", &broke)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("openai node: all checks passed"), "{text}");
    // 1 generation (1) + 2 edits (2 each).
    assert_eq!(balance(&s, &email), 12 - 1 - 2 * 2, "{text}");
    s.assert_books_balanced();
    s.stop().await;
}

/// The operator decides which tier each of OpenAI's names draws with (`[openai]` in the config
/// file): here dall-e-3 is the fast tier, so it costs (and is drawn as) fast.
#[tokio::test]
async fn openai_names_draw_with_the_tiers_the_operator_maps() {
    let s = TestServer::start_with(common::Options {
        tweak: |c| c.openai_models[1].1 = pictor::catalog::Model::Fast,
        ..Default::default()
    })
    .await;
    let (email, key) = s.user("mapped@example.com", 10, true);
    let got = post(
        &s,
        Some(&key),
        "/openai/v1/images/generations",
        json!({"prompt": "a lighthouse", "model": "dall-e-3", "response_format": "b64_json"}),
    )
    .await;
    assert_eq!(got.0, 200, "{}", got.1);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(got.1["data"][0]["b64_json"].as_str().unwrap())
        .unwrap();
    let params = pictor::render::encode::read_parameters(&bytes).unwrap();
    assert!(params.contains("Model: fast"), "{params}");
    assert_eq!(balance(&s, &email), 9, "the fast price");
    s.stop().await;
}
