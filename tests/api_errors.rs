//! Every error row of seed 000 a client can trigger, in the documented JSON shape, with nothing
//! changed by a refused request.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::*;
use pictor::ops::AdminRequest;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_errors() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (email, key) = s.user("auth@example.com", 5, false);
    let me = "/api/pictor/v1/me";

    let r = s.client.get(s.url(me)).send().await.unwrap();
    assert_error(&status_json(r).await, 401, "unauthorized");
    for bad in [
        "nonsense",
        "vx_short",
        &key.replace("vx_", "sk_"),
        &format!("vx_{}", "0".repeat(64)),
    ] {
        assert_error(&s.get(bad, me).await, 401, "unauthorized");
    }
    let r = s
        .client
        .get(s.url(me))
        .header("Authorization", "Basic Zm9vOmJhcg==")
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 401, "unauthorized");
    // Both headers work.
    let r = s
        .client
        .get(s.url(me))
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(r).await.0, 200);
    assert_eq!(s.get(&key, me).await.0, 200);
    // No key + bad body: the key is checked first.
    let r = s
        .client
        .post(s.url("/api/pictor/v1/generate"))
        .body("{{{")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 401, "unauthorized");

    // Issuing a key revokes the previous one.
    let new_key = s.admin(AdminRequest::KeyIssue {
        email: email.clone(),
    })["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    assert_error(&s.get(&key, me).await, 401, "unauthorized");
    assert_eq!(s.get(&new_key, me).await.0, 200);

    // Banned.
    s.admin(AdminRequest::UserUpdate {
        email: email.clone(),
        pro: None,
        banned: Some(true),
        daily_limit: None,
        admin: None,
        approve: false,
    });
    assert_error(&s.get(&new_key, me).await, 403, "banned");
    assert_error(
        &s.generate(&new_key, json!({"prompt": "x"})).await,
        403,
        "banned",
    );
    let r = s
        .client
        .get(s.url(me))
        .header("X-API-Key", &new_key)
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 403, "banned");
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_validation_errors_change_nothing() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (_, key) = s.user("val@example.com", 5, false);
    let cases = [
        (json!({}), "invalid_prompt"),
        (json!({"prompt": ""}), "invalid_prompt"),
        (json!({"prompt": "   \n "}), "invalid_prompt"),
        (json!({"prompt": "x".repeat(4001)}), "invalid_prompt"),
        (json!({"prompt": 5}), "invalid_prompt"),
        (json!({"prompt": ["a"]}), "invalid_prompt"),
        (json!({"prompt": null}), "invalid_prompt"),
        (json!({"prompt": "a\u{0}b"}), "invalid_prompt"),
        (json!({"prompt": "cat", "model": "dall-e"}), "invalid_model"),
        (json!({"prompt": "cat", "model": 1}), "invalid_model"),
        (json!({"prompt": "cat", "ratio": "5:4"}), "invalid_ratio"),
        (json!({"prompt": "cat", "ratio": true}), "invalid_ratio"),
        (
            json!({"prompt": "cat", "enhance": "yes"}),
            "invalid_request",
        ),
        (json!({"prompt": "cat", "seed": -5}), "invalid_request"),
        (json!({"prompt": "cat", "seed": 1.5}), "invalid_request"),
        (
            json!({"prompt": "cat", "seed": 99999999999u64}),
            "invalid_request",
        ),
        (json!({"prompt": "cat", "noise": "gpu"}), "invalid_request"),
        (
            json!({"prompt": "cat", "noise": "TORCH-CPU"}),
            "invalid_request",
        ),
        (json!({"prompt": "cat", "noise": 1}), "invalid_request"),
        (json!([1, 2]), "invalid_request"),
        (json!("prompt"), "invalid_request"),
    ];
    for (body, code) in cases {
        let got = s.generate(&key, body.clone()).await;
        assert_error(&got, 400, code);
    }
    // Both noise sources are accepted (the painter records and ignores them).
    for noise in ["torch-cpu", "a1111-gpu"] {
        let (st, c) = s
            .generate(&key, json!({"prompt": "cat", "noise": noise}))
            .await;
        assert_eq!(st, 202, "{c}");
        let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
        assert_eq!(
            done["noise"], noise,
            "the job reports its noise source: {done}"
        );
    }
    // 4000 characters (multi-byte) is fine.
    let (st, c) = s.generate(&key, json!({"prompt": "я".repeat(4000)})).await;
    assert_eq!(st, 202, "{c}");
    s.finish(&key, c["job_id"].as_str().unwrap()).await;

    for (ct, body) in [
        ("application/json", "{not json"),
        ("application/json", ""),
        ("text/plain", "{\"prompt\":\"x\"}"),
    ] {
        let r = s
            .client
            .post(s.url("/api/pictor/v1/generate"))
            .bearer_auth(&key)
            .header("content-type", ct)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_error(&status_json(r).await, 400, "invalid_request");
    }
    let r = s
        .client
        .post(s.url("/api/pictor/v1/generate"))
        .bearer_auth(&key)
        .body("{\"prompt\":\"x\"}")
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_request");
    // Deeply nested JSON is refused, not a crash.
    let deep = format!(
        "{{\"prompt\":\"x\",\"extra\":{}{}}}",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let r = s
        .client
        .post(s.url("/api/pictor/v1/generate"))
        .bearer_auth(&key)
        .header("content-type", "application/json")
        .body(deep)
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_request");

    let me = s.me(&key).await;
    assert_eq!(me["balance"], 2, "only the three valid jobs were charged");
    assert_eq!(me["active_job"], json!(null));
    assert_eq!(s.store().all_jobs().unwrap().len(), 3, "no job half-made");
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_upload_errors() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (_, key) = s.user("up@example.com", 10, false);
    let edit = |form: reqwest::multipart::Form| {
        s.client
            .post(s.url("/api/pictor/v1/edit"))
            .bearer_auth(&key)
            .multipart(form)
            .send()
    };
    let part = |bytes: Vec<u8>| reqwest::multipart::Part::bytes(bytes).file_name("x.png");

    // No photo at all.
    let r = edit(reqwest::multipart::Form::new().text("prompt", "make it gray"))
        .await
        .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_image");
    // Garbage bytes, a GIF, a truncated PNG, text under the image name.
    let gif = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;".to_vec();
    let mut truncated = png_bytes(64, 64);
    truncated.truncate(truncated.len() / 2);
    for bytes in [
        b"this is not an image at all".to_vec(),
        gif,
        truncated,
        vec![0u8; 10],
    ] {
        let r = edit(
            reqwest::multipart::Form::new()
                .part("image", part(bytes))
                .text("prompt", "make it gray"),
        )
        .await
        .unwrap();
        assert_error(&status_json(r).await, 400, "invalid_image");
    }
    let r = edit(
        reqwest::multipart::Form::new()
            .text("image", "hello")
            .text("prompt", "make it gray"),
    )
    .await
    .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_image");
    // Missing or bad prompt.
    let r = edit(reqwest::multipart::Form::new().part("image", part(png_bytes(8, 8))))
        .await
        .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_prompt");
    let r = edit(
        reqwest::multipart::Form::new()
            .part("image", part(png_bytes(8, 8)))
            .text("prompt", "x".repeat(4001)),
    )
    .await
    .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_prompt");
    // Not multipart at all.
    let r = s
        .client
        .post(s.url("/api/pictor/v1/edit"))
        .bearer_auth(&key)
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_image");

    // 21 MB: with Content-Length, and chunked without one.
    let big = vec![0x89u8; 21 * 1024 * 1024];
    let r = edit(
        reqwest::multipart::Form::new()
            .part("image", part(big.clone()))
            .text("prompt", "make it gray"),
    )
    .await
    .unwrap();
    assert_error(&status_json(r).await, 413, "image_too_large");
    let stream = futures_stream(big);
    let r = s
        .client
        .post(s.url("/api/pictor/v1/edit"))
        .bearer_auth(&key)
        .header("content-type", "multipart/form-data; boundary=xyz")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 413, "image_too_large");
    // A photo just over 20 MiB inside a body under the body limit is still too large.
    let just_over = vec![0u8; 20 * 1024 * 1024 + 10];
    let r = edit(
        reqwest::multipart::Form::new()
            .part("image", part(just_over))
            .text("prompt", "gray"),
    )
    .await
    .unwrap();
    assert_error(&status_json(r).await, 413, "image_too_large");

    // A decompression bomb: a tiny PNG that claims 100000 x 100000 pixels.
    let r = edit(
        reqwest::multipart::Form::new()
            .part("image", part(bomb_png()))
            .text("prompt", "gray"),
    )
    .await
    .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_image");

    let me = s.me(&key).await;
    assert_eq!(me["balance"], 10);
    assert_eq!(me["active_job"], json!(null));
    assert!(s.store().all_jobs().unwrap().is_empty());
    assert_eq!(
        std::fs::read_dir(s.data_dir().join("sources"))
            .unwrap()
            .count(),
        0,
        "no stored upload left behind"
    );
    s.stop().await;
}

fn futures_stream(
    bytes: Vec<u8>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, std::io::Error>> + Send + 'static {
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        bytes.chunks(1 << 20).map(|c| Ok(c.to_vec())).collect();
    futures_util::stream::iter(chunks)
}

/// PNG signature + IHDR declaring 100000 x 100000 RGBA + an empty IDAT + IEND, with real CRCs.
fn bomb_png() -> Vec<u8> {
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = 0xffff_ffffu32;
        for &b in data {
            crc ^= b as u32;
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
        out.extend((data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend(data);
        out.extend(&body);
        out.extend(crc32(&body).to_be_bytes());
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend(100_000u32.to_be_bytes());
    ihdr.extend(100_000u32.to_be_bytes());
    ihdr.extend([8, 6, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(
        &mut out,
        b"IDAT",
        &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
    );
    chunk(&mut out, b"IEND", &[]);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_insufficient_credits_and_not_found() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let (_, poor) = s.user("poor@example.com", 4, false);
    let (_, other) = s.user("other@example.com", 10, false);
    assert_error(
        &s.generate(&poor, json!({"prompt": "x", "model": "artist"}))
            .await,
        402,
        "insufficient_credits",
    );
    let form = reqwest::multipart::Form::new()
        .part("image", reqwest::multipart::Part::bytes(png_bytes(8, 8)))
        .text("prompt", "gray");
    let (_, broke) = s.user("broke@example.com", 1, false);
    let r = s
        .client
        .post(s.url("/api/pictor/v1/edit"))
        .bearer_auth(&broke)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 402, "insufficient_credits");

    let (_, c) = s.generate(&poor, json!({"prompt": "x"})).await;
    let id = c["job_id"].as_str().unwrap();
    // Busy: a second create is refused while the first is active (generate and edit alike).
    assert_error(
        &s.generate(&poor, json!({"prompt": "y"})).await,
        409,
        "job_busy",
    );
    let form = reqwest::multipart::Form::new()
        .part("image", reqwest::multipart::Part::bytes(png_bytes(8, 8)))
        .text("prompt", "gray");
    let r = s
        .client
        .post(s.url("/api/pictor/v1/edit"))
        .bearer_auth(&poor)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 409, "job_busy");
    // Another user's job does not exist for them.
    assert_error(
        &s.get(&other, &format!("/api/pictor/v1/jobs/{id}")).await,
        404,
        "job_not_found",
    );
    assert_error(
        &s.get(&other, &format!("/api/pictor/v1/jobs/{id}?wait=2"))
            .await,
        404,
        "job_not_found",
    );
    for bad in [
        "job_nope",
        "job_00000000000000000000000000000000",
        "123",
        "job_%2e%2e",
    ] {
        assert_error(
            &s.get(&poor, &format!("/api/pictor/v1/jobs/{bad}")).await,
            404,
            "job_not_found",
        );
    }
    for wait in ["0", "91", "abc", "-1", "1.5"] {
        assert_error(
            &s.get(&poor, &format!("/api/pictor/v1/jobs/{id}?wait={wait}"))
                .await,
            400,
            "invalid_request",
        );
    }
    gate.open();
    assert_eq!(s.finish(&poor, id).await["balance"], 3);
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_and_methods_are_json() {
    let s = TestServer::start().await;
    for path in [
        "/api/pictor/v2/generate",
        "/api/pictor/v1/nope",
        "/nothing-here",
        "/files/abc.png",
    ] {
        let r = s.client.get(s.url(path)).send().await.unwrap();
        let got = status_json(r).await;
        assert_eq!(got.0, 404, "{path}: {}", got.1);
        assert_eq!(got.1["ok"], false);
        assert_eq!(got.1["error_code"], "not_found");
    }
    let r = s
        .client
        .post(s.url("/files/00000000000000000000000000000000.png"))
        .send()
        .await
        .unwrap();
    let got = status_json(r).await;
    assert_eq!(got.0, 405, "{}", got.1);
    let r = s
        .client
        .delete(s.url("/api/pictor/v1/generate"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["allow"],
        "POST",
        "405 lists the allowed methods"
    );
    let got = status_json(r).await;
    assert_eq!(got.0, 405);
    assert_eq!(got.1["error_code"], "method_not_allowed");
    let r = s
        .client
        .put(s.url("/api/pictor/v1/jobs/job_x"))
        .send()
        .await
        .unwrap();
    let allow = r.headers()["allow"].to_str().unwrap().to_string();
    let mut allow: Vec<&str> = allow.split(", ").collect();
    allow.sort_unstable();
    assert_eq!(
        allow,
        ["GET", "HEAD"],
        "a cancel is POST …/cancel, not DELETE"
    );
    s.stop().await;
}

/// Sends `GET {target}` exactly as written (no client-side normalisation of `..` or
/// percent-escapes) and returns the status and the body.
async fn raw_get(base: &str, target: &str) -> (u16, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let head_end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP answer");
    let head = String::from_utf8_lossy(&answer[..head_end]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, answer[head_end + 4..].to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn path_traversal_under_files_reaches_nothing() {
    let s = TestServer::start().await;
    let (_, key) = s.user("walk@example.com", 10, true);
    // Bait beside the pictures folder and in the data folder, and the store itself.
    std::fs::write(s.data_dir().join("bait.png"), "BAIT-IN-DATA").unwrap();
    std::fs::write(
        s.data_dir().join("images").join("bait.png"),
        "BAIT-IN-IMAGES",
    )
    .unwrap();
    // The raw client reaches a real picture, so the refusals below are the server's own.
    let (_, c) = s.generate(&key, json!({"prompt": "a red boat"})).await;
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    let photo = done["photo_url"].as_str().unwrap();
    let path = &photo[photo.find("/files/").unwrap()..];
    let (status, body) = raw_get(&s.base, path).await;
    assert_eq!(status, 200);
    assert!(body.starts_with(b"\x89PNG"), "the picture itself");
    for target in [
        "/files/../../etc/passwd",
        "/files/../pictor.redb",
        "/files/../bait.png",
        "/files/..%2fpictor.redb",
        "/files/..%2Fbait.png",
        "/files/%2e%2e%2fbait.png",
        "/files/%2e%2e/%2e%2e/etc/passwd",
        "/files/..%5cbait.png",
        "/files/..%252fbait.png",
        "/files/bait.png",
        "/files/%2fetc%2fpasswd",
        "/files/images%2fbait.png",
        "/files/./bait.png",
    ] {
        let (status, body) = raw_get(&s.base, target).await;
        let text = String::from_utf8_lossy(&body);
        assert!(status == 404 || status == 400, "{target}: {status} {text}");
        assert!(
            !text.contains("BAIT") && !text.contains("root:"),
            "{target}: {text}"
        );
        assert!(
            !body.windows(4).any(|w| w == b"redb"),
            "{target} read the store"
        );
        let v: serde_json::Value =
            serde_json::from_slice(&body).unwrap_or_else(|_| panic!("{target}: not JSON: {text}"));
        assert_eq!(v["ok"], false, "{target}: {v}");
    }
    s.stop().await;
}

/// An address with nothing behind it: a browser (Accept: text/html) gets the site's 404 page, in
/// its language; API clients, and any address under the API's prefixes, get the JSON error.
#[tokio::test]
async fn unknown_addresses_are_a_page_for_browsers_and_json_for_clients() {
    let s = TestServer::start().await;
    let get = |path: &str, accept: &str, lang: &str| {
        s.client
            .get(format!("{}{path}", s.base))
            .header("Accept", accept)
            .header("Accept-Language", lang)
            .send()
    };
    let html = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    for (lang, title) in [("en", "Page not found"), ("ru", "Страница не найдена")]
    {
        let r = get("/no/such/page", html, lang).await.unwrap();
        assert_eq!(r.status(), 404);
        let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(ct.starts_with("text/html"), "{ct}");
        let body = r.text().await.unwrap();
        assert!(body.contains(title), "{lang}: {body}");
        assert!(!body.contains("no such endpoint"), "{body}");
    }
    for (path, accept) in [
        ("/no/such/page", "application/json"),
        ("/no/such/page", "*/*"),
        ("/api/pictor/v1/nothing", html),
        ("/openai/v1/nothing", html),
    ] {
        let r = get(path, accept, "en").await.unwrap();
        assert_eq!(r.status(), 404, "{path}");
        let v: serde_json::Value = r.json().await.unwrap();
        if path.starts_with("/openai/") {
            // OpenAI's error shape there.
            assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
        } else {
            assert_eq!(v["error_code"], "not_found", "{path} {accept}: {v}");
        }
    }
    s.stop().await;
}
