//! The public listener's own connection handling (src/app/serve.rs): a `?wait=` long-poll is
//! parked outside the request's layers and answered with the headers they added; the server's
//! stop answers parked polls at once; HTTP/1 pipelining and HTTP/2 with prior knowledge still
//! work.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Api, Gate, TestServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_long_poll_gets_the_finished_job_with_the_layers_headers() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let (_, key) = s.user("park@example.com", 10, false);
    let (_, c) = s.generate(&key, json!({"prompt": "a boat"})).await;
    let id = c["job_id"].as_str().unwrap().to_string();
    let url = s.url(&format!("/api/pictor/v1/jobs/{id}?wait=60"));
    let detached = pictor::app::serve::detached_count();
    let poll = {
        let (client, url, key) = (s.client.clone(), url.clone(), key.clone());
        tokio::spawn(async move {
            client
                .get(&url)
                .bearer_auth(&key)
                .header("x-request-id", "parked-poll-1")
                .send()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!poll.is_finished(), "the long-poll did not wait");
    // The waiting connection has left hyper (the answers look the same either way).
    assert!(pictor::app::serve::detached_count() > detached);
    gate.open();
    let r = tokio::time::timeout(Duration::from_secs(20), poll)
        .await
        .expect("the parked poll was not answered")
        .unwrap();
    assert_eq!(r.status(), 200);
    // Added by the outer layer to the placeholder, carried over to the parked answer.
    assert_eq!(r.headers()["x-request-id"], "parked-poll-1");
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "{:?}",
        r.headers()
    );
    // One value per header: the answer's own `content-type` is not doubled by the placeholder's.
    assert_eq!(r.headers().get_all("content-type").iter().count(), 1);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(v["job_id"], id.as_str());
    assert!(v["photo_url"].as_str().is_some(), "{v}");
    // The connection goes on serving (keep-alive) after a parked answer.
    let (st, me) = s.get(&key, "/api/pictor/v1/me").await;
    assert_eq!(st, 200, "{me}");

    // Another user's job is still `job_not_found`, also with a wait.
    let (_, other) = s.user("other@example.com", 10, false);
    let (st, v) = s
        .get(&other, &format!("/api/pictor/v1/jobs/{id}?wait=5"))
        .await;
    common::assert_error(&(st, v), 404, "job_not_found");
    assert!(
        s.handle.as_ref().unwrap().state.jobs.watchers().is_empty(),
        "watch channels leaked"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_while_parked_leaves_nothing_behind() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let (_, key) = s.user("gone@example.com", 10, false);
    let (_, c) = s.generate(&key, json!({"prompt": "a boat"})).await;
    let id = c["job_id"].as_str().unwrap().to_string();
    let addr = s.base.trim_start_matches("http://").to_string();
    let detached = pictor::app::serve::detached_count();
    for _ in 0..20 {
        let mut sock = TcpStream::connect(&addr).await.unwrap();
        let req = format!(
            "GET /api/pictor/v1/jobs/{id}?wait=60 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n"
        );
        sock.write_all(req.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(sock);
    }
    // The job is still unfinished, and every parked wait has noticed its client's hang-up and
    // ended (its subscription dropped with it) instead of waiting out its 60 s.
    let watchers = s.handle.as_ref().unwrap().state.jobs.watchers();
    let t = Instant::now();
    while !watchers.is_empty() && t.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(watchers.is_empty(), "parked waits outlived their clients");
    assert!(pictor::app::serve::detached_count() >= detached + 20);
    gate.open();
    let v = s.finish(&key, &id).await;
    assert_eq!(v["status"], "done", "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_long_poll_is_answered_when_the_server_stops() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let (_, key) = s.user("stop@example.com", 10, false);
    let (_, c) = s.generate(&key, json!({"prompt": "a boat"})).await;
    let id = c["job_id"].as_str().unwrap().to_string();
    let url = s.url(&format!("/api/pictor/v1/jobs/{id}?wait=90"));
    let poll = {
        let (client, key) = (s.client.clone(), key.clone());
        tokio::spawn(async move {
            let r = client.get(&url).bearer_auth(&key).send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!poll.is_finished(), "the long-poll did not wait");
    let stopped_at = Instant::now();
    let stop = tokio::spawn(s.stop());
    // The render is still blocked: the poll is answered with the job as it stands, at once,
    // rather than cut off when the grace period ends.
    let (st, v) = tokio::time::timeout(Duration::from_secs(4), poll)
        .await
        .expect("the parked poll was not answered at the stop")
        .unwrap();
    assert!(stopped_at.elapsed() < Duration::from_secs(4));
    assert_eq!(st, 200, "{v}");
    assert!(v["status"] == "queued" || v["status"] == "running", "{v}");
    gate.open();
    stop.await.unwrap();
}

/// Reads from `sock` until `count` occurrences of `needle` have arrived (or 10 s pass).
async fn read_until(sock: &mut TcpStream, needle: &str, count: usize) -> String {
    let mut got = Vec::new();
    let t = Instant::now();
    while String::from_utf8_lossy(&got).matches(needle).count() < count {
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut buf))
            .await
            .expect("no answer")
            .unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        assert!(t.elapsed() < Duration::from_secs(10));
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_http1_requests_are_answered_in_order() {
    let s = TestServer::start().await;
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut sock = TcpStream::connect(&addr).await.unwrap();
    sock.write_all(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /api/pictor/v1/nope HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await
    .unwrap();
    let text = read_until(&mut sock, "HTTP/1.1 ", 2).await;
    let first = text.find("HTTP/1.1 200").expect(&text);
    let second = text.find("HTTP/1.1 404").expect(&text);
    assert!(first < second, "{text}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_with_prior_knowledge_is_served() {
    let s = TestServer::start().await;
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut sock = TcpStream::connect(&addr).await.unwrap();
    // The client preface: the magic string and an empty SETTINGS frame (RFC 9113 §3.4).
    sock.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    sock.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    let mut head = [0u8; 9];
    tokio::time::timeout(Duration::from_secs(10), sock.read_exact(&mut head))
        .await
        .expect("no HTTP/2 answer")
        .unwrap();
    // The server's preface is a SETTINGS frame (type 4) on stream 0.
    assert_eq!(head[3], 4, "{head:?}");
    assert_eq!(&head[5..9], &[0, 0, 0, 0], "{head:?}");
    // An HTTP/1 request on a fresh connection is still HTTP/1.
    let mut sock = TcpStream::connect(&addr).await.unwrap();
    sock.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let text = read_until(&mut sock, "HTTP/1.1 200", 1).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_pipelined_behind_a_parked_poll_is_answered_after_it() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let (_, key) = s.user("pipe@example.com", 10, false);
    let (_, c) = s.generate(&key, json!({"prompt": "a boat"})).await;
    let id = c["job_id"].as_str().unwrap().to_string();
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut sock = TcpStream::connect(&addr).await.unwrap();
    let poll = format!(
        "GET /api/pictor/v1/jobs/{id}?wait=60 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nX-Request-Id: first\r\n\r\n"
    );
    // The second request arrives in the same packet as the parked one.
    let both = format!("{poll}GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    let detached = pictor::app::serve::detached_count();
    sock.write_all(both.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(pictor::app::serve::detached_count() > detached);
    gate.open();
    let text = read_until(&mut sock, "HTTP/1.1 200", 2).await;
    let first = text.find("\"status\":\"done\"").expect(&text);
    let id_header = text.find("x-request-id: first").expect(&text);
    let second = text.rfind("HTTP/1.1 200").unwrap();
    assert!(id_header < first && first < second, "{text}");
    // The parked answer is framed by its length, so the second answer starts right after it.
    let head_end = text.find("\r\n\r\n").unwrap();
    let length: usize = text[..head_end]
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .expect(&text)
        .trim()
        .parse()
        .unwrap();
    assert_eq!(head_end + 4 + length, second, "{text}");
    assert!(text[..head_end].contains("\r\ndate: "), "{text}");

    // `Connection: close` on a parked poll: the answer says so and the connection ends.
    gate.close();
    let (_, c) = s.generate(&key, json!({"prompt": "a cat"})).await;
    let id = c["job_id"].as_str().unwrap().to_string();
    let mut sock = TcpStream::connect(&addr).await.unwrap();
    let req = format!(
        "GET /api/pictor/v1/jobs/{id}?wait=60 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
    );
    sock.write_all(req.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    gate.open();
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), sock.read_to_end(&mut all))
        .await
        .expect("the connection stayed open")
        .unwrap();
    let text = String::from_utf8_lossy(&all);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\r\nconnection: close\r\n"), "{text}");
    assert!(text.contains("\"status\":\"done\""), "{text}");
    s.stop().await;
}
