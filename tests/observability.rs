//! `/metrics`, `/healthz`, and request ids on log lines (real binary, its stderr captured).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::BufRead;
use std::sync::Arc;

use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_health() {
    let s = TestServer::start_with(Options {
        renderer: Arc::new(open_gate()),
        tweak: |c| c.metrics_token = Some("observability-test-token".into()),
        ..Options::default()
    })
    .await;
    let (_, key) = s.user("m@example.com", 5, false);
    let r = s.client.get(s.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let h: serde_json::Value = r.json().await.unwrap();
    assert_eq!(h["status"], "ok");
    let (_, c) = s.generate(&key, json!({"prompt": "metrics"})).await;
    s.finish(&key, c["job_id"].as_str().unwrap()).await;
    s.client.get(s.url("/nope")).send().await.unwrap();
    let r = s
        .client
        .get(s.url("/api/pictor/v1/me"))
        .header("x-request-id", "given-id-42")
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-request-id"], "given-id-42");
    let r = s
        .client
        .get(s.url("/api/pictor/v1/me"))
        .header("x-request-id", "bad id with spaces!")
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let generated = r.headers()["x-request-id"].to_str().unwrap().to_string();
    assert!(generated.len() == 16 && generated.bytes().all(|b| b.is_ascii_hexdigit()));
    // The prepared documents (answered above the router) are observed like any request.
    for path in ["/oauth/jwks", "/.well-known/openid-configuration"] {
        let r = s
            .client
            .get(s.url(path))
            .header("x-request-id", "doc-1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-request-id"], "doc-1");
        assert!(r.headers().contains_key("etag"));
    }

    let r = s
        .client
        .get(s.url("/metrics"))
        .bearer_auth("observability-test-token")
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = r.text().await.unwrap();
    for needle in [
        "pictor_http_requests_total{route=\"/api/pictor/v1/generate\",method=\"POST\",status=\"202\"} 1",
        "pictor_http_requests_total{route=\"other\",method=\"GET\",status=\"404\"} 1",
        "pictor_http_requests_total{route=\"/oauth/jwks\",method=\"GET\",status=\"200\"} 1",
        "pictor_http_requests_total{route=\"/.well-known/openid-configuration\",method=\"GET\",status=\"200\"} 1",
        "pictor_http_request_duration_seconds_bucket{le=",
        "pictor_jobs_created_total{model=\"fast\"} 1",
        "pictor_jobs_finished_total{kind=\"generate\",status=\"done\",code=\"\"} 1",
        "pictor_render_duration_seconds_count{model=\"fast\"} 1",
        "pictor_render_queue_depth 0",
        "pictor_jobs{state=\"running\"} 0",
        "pictor_signins{result=\"failed\"} 0",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_log_line_of_a_request_carries_its_id_and_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let key = tokio::task::spawn_blocking(move || {
        cli_json(
            &d,
            &[
                "user",
                "add",
                "--email",
                "log@example.com",
                "--credits",
                "5",
                "--json",
            ],
            None,
        );
        cli_json(
            &d,
            &["key", "issue", "--email", "log@example.com", "--json"],
            None,
        )["api_key"]
            .as_str()
            .unwrap()
            .to_string()
    })
    .await
    .unwrap();
    let log = dir.path().join("server.log");
    let mut child = pictor_cmd(dir.path())
        .env("PICTOR_LOG", "info")
        .env("NO_COLOR", "1")
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let base = loop {
        let line = lines.next().unwrap().unwrap();
        if let Some(u) = line.split("is running at ").nth(1) {
            break u.trim().to_string();
        }
    };
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{base}/api/pictor/v1/generate"))
        .bearer_auth(&key)
        .header("x-request-id", "req-create-1")
        .json(&json!({"prompt": "logged"}))
        .send()
        .await
        .unwrap();
    let (_, c) = status_json(r).await;
    http.get(format!("{}?wait=30", c["poll_url"].as_str().unwrap()))
        .bearer_auth(&key)
        .header("x-request-id", "req-poll-1")
        .send()
        .await
        .unwrap();
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let job_id = c["job_id"].as_str().unwrap();
    // Every line about the job (its creation, queueing, render, finish) carries the id of the
    // request that created it; the poll's own lines carry the poll's id.
    let job_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(job_id) || l.contains("req-create-1"))
        .collect();
    assert!(
        job_lines.iter().filter(|l| l.contains(job_id)).count() >= 2,
        "the render and the finish are logged with the job: {text}"
    );
    for line in &job_lines {
        if line.contains("req-poll-1") {
            // The poll's own lines name the job only in its path, never its render or finish.
            assert!(
                !line.contains("render") && !line.contains("finished") && !line.contains("queued"),
                "a line about the job's work under the poll's id: {line}\n{text}"
            );
        } else {
            assert!(
                line.contains("req-create-1"),
                "a line about the job without the id of the request that created it: {line}\n{text}"
            );
        }
    }
    let create: Vec<&&str> = job_lines
        .iter()
        .filter(|l| l.contains("req-create-1"))
        .collect();
    assert!(create.iter().any(|l| l.contains("status=202")), "{text}");
    assert!(create.iter().any(|l| l.contains("job finished")), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("req-poll-1") && l.contains("status=200")),
        "{text}"
    );
    assert!(!text.contains(&key), "the API key appears in the log");
    assert!(
        !text.contains(&key[3..20]),
        "part of the API key appears in the log"
    );
}
