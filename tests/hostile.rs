//! Hostile transport input: header floods, slow (slowloris) headers, slow bodies — clear errors,
//! closed connections, nothing half-made. (Bodies: see api_errors for 21 MB, chunked, deep JSON
//! and decompression bombs.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use pictor::app::Server;
use pictor::clock::Clock;
use pictor::config::Config;
use pictor::render::ProceduralRenderer;

fn addr(base: &str) -> String {
    base.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection (or `limit` passes); returns what came and when.
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, Duration, bool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < limit {
        match stream.read(&mut buf) {
            Ok(0) => return (got, started.elapsed(), true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (got, started.elapsed(), true),
        }
    }
    (got, started.elapsed(), false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_floods_get_431() {
    let s = TestServer::start().await;
    let a = addr(&s.base);
    let reply = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(&a).unwrap();
        let mut req = String::from("GET /healthz HTTP/1.1\r\nHost: x\r\n");
        for i in 0..500 {
            req.push_str(&format!("X-Flood-{i}: {}\r\n", "a".repeat(40)));
        }
        req.push_str("\r\n");
        stream.write_all(req.as_bytes()).unwrap();
        read_until_closed(&mut stream, Duration::from_secs(10))
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&reply.0);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    assert!(reply.2, "the connection is closed after a header flood");
    // The server is fine afterwards.
    assert_eq!(
        s.client
            .get(s.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_slow_bodies_are_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new(dir.path().join("data"));
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.idle_timeout = Duration::from_secs(2);
    let h = Server::start(config, Arc::new(ProceduralRenderer), Clock::default())
        .await
        .unwrap();
    let store = h.state.store.clone();
    pictor::ops::execute(
        &store,
        &h.state.idp.secrets,
        pictor::ops::AdminRequest::UserAdd {
            email: "slow@example.com".into(),
            name: None,
            password_hash: None,
            admin: false,
            pro: false,
            credits: 5,
        },
        0,
    )
    .unwrap();
    let key = pictor::ops::execute(
        &store,
        &h.state.idp.secrets,
        pictor::ops::AdminRequest::KeyIssue {
            email: "slow@example.com".into(),
        },
        0,
    )
    .unwrap()["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let a = addr(&h.base_url);

    // Slowloris: half a request, then silence. Many at once.
    let results = tokio::task::spawn_blocking({
        let a = a.clone();
        move || {
            let streams: Vec<TcpStream> = (0..50)
                .map(|_| {
                    let mut s = TcpStream::connect(&a).unwrap();
                    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                        .unwrap();
                    s
                })
                .collect();
            let readers: Vec<_> = streams
                .into_iter()
                .map(|mut s| {
                    std::thread::spawn(move || read_until_closed(&mut s, Duration::from_secs(10)))
                })
                .collect();
            readers
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>()
        }
    })
    .await
    .unwrap();
    assert!(
        results.iter().all(|(_, _, closed)| *closed),
        "silent half-requests were not cut off"
    );
    let slowest = results.iter().map(|r| r.1).max().unwrap();
    println!(
        "slowloris: 50 half-sent requests closed by the server within {slowest:?} (idle timeout 2 s)"
    );

    // A slow body: the headers promise 1000 bytes, 10 arrive, then nothing.
    let (reply, _, closed) = tokio::task::spawn_blocking({
        let (a, key) = (a.clone(), key.clone());
        move || {
            let mut s = TcpStream::connect(&a).unwrap();
            let head = format!("POST /api/pictor/v1/generate HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"prompt\":");
            s.write_all(head.as_bytes()).unwrap();
            read_until_closed(&mut s, Duration::from_secs(10))
        }
    })
    .await
    .unwrap();
    assert!(closed, "a stalled body keeps the connection forever");
    let text = String::from_utf8_lossy(&reply);
    assert!(
        text.is_empty() || text.contains("invalid_request") || text.starts_with("HTTP/1.1 4"),
        "{text}"
    );
    assert!(store.all_jobs().unwrap().is_empty(), "nothing half-made");
    assert_eq!(
        store
            .user_by_email("slow@example.com")
            .unwrap()
            .unwrap()
            .balance,
        5
    );
    // And the server still serves.
    let r = reqwest::Client::new()
        .get(format!("{}/api/pictor/v1/me", h.base_url))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    h.shutdown().await;
}
