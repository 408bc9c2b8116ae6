//! No endpoint reads an unbounded body: 1 GiB bodies (chunked and with Content-Length) on every
//! route family are refused quickly, in the family's own error shape, while the real binary's
//! resident memory is measured from /proc. Also: the admin channel checks its token before it
//! reads a byte, and avatar uploads decode within a bounded allocation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const GIB: u64 = 1024 * 1024 * 1024;

struct Answer {
    status: u16,
    body: String,
    elapsed: Duration,
    sent: u64,
}

/// POSTs up to `total` bytes of body over a raw connection, chunked or with a Content-Length,
/// sending until the server answers or closes; returns what the server answered.
async fn post_huge(base: &str, path: &str, headers: &str, chunked: bool, total: u64) -> Answer {
    let addr = base.trim_start_matches("http://").to_string();
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let framing = if chunked {
        "Transfer-Encoding: chunked".to_string()
    } else {
        format!("Content-Length: {total}")
    };
    let head = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}{framing}\r\n\r\n");
    let started = Instant::now();
    let writer = tokio::spawn(async move {
        let mut sent = 0u64;
        if wr.write_all(head.as_bytes()).await.is_err() {
            return sent;
        }
        let block = vec![b'a'; 64 * 1024];
        while sent < total {
            let result = if chunked {
                let mut frame = format!("{:x}\r\n", block.len()).into_bytes();
                frame.extend_from_slice(&block);
                frame.extend_from_slice(b"\r\n");
                wr.write_all(&frame).await
            } else {
                wr.write_all(&block).await
            };
            if result.is_err() {
                break;
            }
            sent += block.len() as u64;
        }
        sent
    });
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rd.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => raw.extend_from_slice(&buf[..n]),
        }
        // A complete answer with a Content-Length: stop reading.
        let text = String::from_utf8_lossy(&raw);
        if let Some((head, body)) = text.split_once("\r\n\r\n")
            && let Some(len) = head.lines().find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap())
            })
            && body.len() >= len
        {
            break;
        }
    }
    let elapsed = started.elapsed();
    writer.abort();
    let sent = writer.await.unwrap_or(0);
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no answer from {path}: {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Answer {
        status,
        body,
        elapsed,
        sent,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gigabyte_bodies_are_refused_without_being_buffered() {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn_server(dir.path(), &[]);
    let pid = server.child.id();
    let base = server.base.clone();
    // Warm up every route family once, then take the baseline.
    let http = reqwest::Client::new();
    for path in [
        "/login",
        "/api/pictor/v1/models",
        "/.well-known/openid-configuration",
    ] {
        http.get(format!("{base}{path}")).send().await.unwrap();
    }
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    let (rss0, _) = memory_kib(pid);
    reset_peak(pid);

    // Three attackers at once on the token endpoint, chunked, 1 GiB each.
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let base = base.clone();
        tasks.push(tokio::spawn(async move {
            post_huge(&base, "/oauth/token", form, true, GIB).await
        }));
    }
    let mut slowest = Duration::ZERO;
    let mut read = 0;
    for t in tasks {
        let a = t.await.unwrap();
        slowest = slowest.max(a.elapsed);
        read = read.max(a.sent);
        assert_eq!(a.status, 413, "{}", a.body);
        let v: serde_json::Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["error"], "invalid_request");
        assert!(a.elapsed < Duration::from_secs(10), "{:?}", a.elapsed);
        assert!(
            a.sent < 64 * 1024 * 1024,
            "the server stopped reading: {}",
            a.sent
        );
    }
    let (_, peak) = memory_kib(pid);
    let token_growth = peak.saturating_sub(rss0);
    println!(
        "3 parallel 1 GiB chunked POSTs to /oauth/token: answered within {:.2} s having sent at most {} KiB, peak RSS +{} KiB",
        slowest.as_secs_f64(),
        read / 1024,
        token_growth
    );
    assert!(
        token_growth < 16 * 1024,
        "peak RSS grew by {token_growth} KiB"
    );

    // Every family, chunked and with a declared length.
    struct Case {
        path: &'static str,
        headers: &'static str,
        check: fn(&str),
    }
    let page = |b: &str| assert!(b.contains("Too much data") && b.contains("<html"), "{b}");
    let oauth = |b: &str| assert!(b.contains("\"invalid_request\""), "{b}");
    let api = |b: &str| assert!(b.contains("\"error_code\":\"image_too_large\""), "{b}");
    let cases = [
        Case {
            path: "/oauth/token",
            headers: form,
            check: oauth,
        },
        Case {
            path: "/oauth/revoke",
            headers: form,
            check: oauth,
        },
        Case {
            path: "/oauth/authorize",
            headers: form,
            check: page,
        },
        Case {
            path: "/login",
            headers: form,
            check: page,
        },
        Case {
            path: "/register",
            headers: form,
            check: page,
        },
        Case {
            path: "/setup",
            headers: form,
            check: page,
        },
        Case {
            path: "/account/password",
            headers: form,
            check: page,
        },
        Case {
            path: "/account/avatar",
            headers: "Content-Type: multipart/form-data; boundary=x\r\n",
            check: page,
        },
        Case {
            path: "/api/pictor/v1/generate",
            headers: "Content-Type: application/json\r\n",
            check: api,
        },
        Case {
            path: "/playground/api/generate",
            headers: "Content-Type: application/json\r\n",
            check: api,
        },
    ];
    reset_peak(pid);
    let (rss1, _) = memory_kib(pid);
    for case in &cases {
        // Declared up front: refused before a byte of the body is read.
        let a = post_huge(&base, case.path, case.headers, false, GIB).await;
        assert_eq!(
            a.status, 413,
            "{} with Content-Length: {}",
            case.path, a.body
        );
        (case.check)(&a.body);
        assert!(
            a.elapsed < Duration::from_secs(10),
            "{}: {:?}",
            case.path,
            a.elapsed
        );
        // Chunked: refused once the family's limit is passed.
        let a = post_huge(&base, case.path, case.headers, true, GIB).await;
        if case.path == "/account/avatar" || case.path == "/playground/api/generate" {
            // Parsed as they stream: the handler stops at its own limit (or asks for a
            // session first); either way nothing near 1 GiB is read.
            assert!(a.status >= 300, "{}: {}", case.path, a.status);
        } else {
            assert_eq!(a.status, 413, "{} chunked: {}", case.path, a.body);
            (case.check)(&a.body);
        }
        assert!(
            a.elapsed < Duration::from_secs(10),
            "{}: {:?}",
            case.path,
            a.elapsed
        );
        assert!(
            a.sent < 128 * 1024 * 1024,
            "{}: the server read {} bytes",
            case.path,
            a.sent
        );
    }
    let (_, peak) = memory_kib(pid);
    let growth = peak.saturating_sub(rss1);
    println!(
        "1 GiB bodies on {} routes (chunked and declared): peak RSS +{} KiB",
        cases.len(),
        growth
    );
    // The image API keeps up to its 20 MiB limit of one body; nothing else comes close.
    assert!(growth < 64 * 1024, "peak RSS grew by {growth} KiB");

    // The admin channel: a wrong token is refused before the body is read.
    let admin: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("admin.json")).unwrap()).unwrap();
    let admin_base = admin["url"].as_str().unwrap().to_string();
    let a = post_huge(
        &admin_base,
        "/admin/v1/exec",
        "Authorization: Bearer wrong\r\nContent-Type: application/json\r\n",
        true,
        GIB,
    )
    .await;
    assert_eq!(a.status, 401, "{}", a.body);
    assert!(a.elapsed < Duration::from_secs(5), "{:?}", a.elapsed);
    server.terminate();
}

fn png_of(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        image::Rgb([(x / 16) as u8, (y / 16) as u8, 100])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avatar_uploads_decode_within_a_bounded_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let server = spawn_server(dir.path(), &[]);
    let pid = server.child.id();
    let base = server.base.clone();
    let (code, _, err) = run_cli(
        dir.path(),
        &[
            "user",
            "add",
            "--email",
            "lea@example.com",
            "--password-stdin",
        ],
        Some("lea's password!!\n"),
    );
    assert_eq!(code, 0, "{err}");
    let mut b = Browser::new();
    let page = b.get(&format!("{base}/login")).await;
    let mut f = form_fields(&page.body, "/login");
    set_field(&mut f, "email", "lea@example.com");
    set_field(&mut f, "password", "lea's password!!");
    assert_eq!(b.post(&format!("{base}/login"), &f).await.status, 303);
    let page = b.get(&format!("{base}/account")).await;
    let csrf = form_fields(&page.body, "/account/avatar")
        .into_iter()
        .find(|(k, _)| k == "csrf")
        .unwrap()
        .1;
    let cookies = b.cookie_header();
    let upload = |png: Vec<u8>| {
        let (base, csrf, cookies, http) =
            (base.clone(), csrf.clone(), cookies.clone(), b.http.clone());
        async move {
            let form = reqwest::multipart::Form::new().text("csrf", csrf).part(
                "avatar",
                reqwest::multipart::Part::bytes(png)
                    .file_name("a.png")
                    .mime_str("image/png")
                    .unwrap(),
            );
            let r = http
                .post(format!("{base}/account/avatar"))
                .header("cookie", cookies)
                .multipart(form)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    // Over the pixel limit: refused from the header, before any pixel is decoded.
    let flat = {
        let img = image::RgbImage::from_pixel(8000, 8000, image::Rgb([90, 120, 200]));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    };
    assert!(flat.len() < 1024 * 1024, "{}", flat.len());
    let (status, body) = upload(flat).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("too large") || body.contains("pixels"),
        "{body}"
    );
    // Three parallel uploads at the limit (12 megapixels each).
    let big = png_of(3464, 3464);
    assert!(big.len() < 5 * 1024 * 1024, "{} bytes", big.len());
    let (rss0, _) = memory_kib(pid);
    reset_peak(pid);
    let results = futures_util::future::join_all((0..3).map(|_| upload(big.clone()))).await;
    for (status, body) in results {
        assert_eq!(status, 303, "{body}");
    }
    let (_, peak) = memory_kib(pid);
    let growth = peak.saturating_sub(rss0);
    println!(
        "3 parallel 12-megapixel avatar uploads: peak RSS +{} MiB",
        growth / 1024
    );
    assert!(
        growth < 600 * 1024,
        "peak RSS grew by {} MiB",
        growth / 1024
    );
    server.terminate();
}
