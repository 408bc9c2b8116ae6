//! The published interface: the OpenAPI document, its page, the map, and drift against the
//! committed `openapi.json`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_docs_and_map() {
    let s = TestServer::start().await;
    let r = s
        .client
        .get(s.url("/api/pictor/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let spec: Value = r.json().await.unwrap();
    assert!(spec["openapi"].as_str().unwrap().starts_with("3."));
    assert_eq!(spec["servers"][0]["url"], format!("{}/api/pictor", s.base));
    let paths = spec["paths"].as_object().unwrap();
    for p in [
        "/v1/generate",
        "/v1/edit",
        "/v1/jobs/{job_id}",
        "/v1/me",
        "/v1/models",
        "/",
    ] {
        assert!(paths.contains_key(p), "missing {p}");
    }
    let schemes = spec["components"]["securitySchemes"].as_object().unwrap();
    assert_eq!(schemes["BearerKey"]["scheme"], "bearer");
    assert_eq!(schemes["HeaderKey"]["name"], "X-API-Key");
    // Documented error codes on generate.
    let responses = spec["paths"]["/v1/generate"]["post"]["responses"]
        .as_object()
        .unwrap();
    for code in ["202", "400", "401", "402", "403", "409", "413"] {
        assert!(
            responses.contains_key(code),
            "generate does not document {code}"
        );
    }

    let r = s
        .client
        .get(s.url("/api/pictor/docs"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = r.text().await.unwrap();
    assert!(
        html.contains("SwaggerUIBundle") && html.contains("/v1/generate"),
        "the page embeds the spec"
    );

    for path in ["/api/pictor/", "/api/pictor"] {
        let r = s.client.get(s.url(path)).send().await.unwrap();
        let (st, map) = status_json(r).await;
        assert_eq!(st, 200, "{path}");
        assert_eq!(map["ok"], true);
        assert_eq!(
            map["openapi_url"],
            format!("{}/api/pictor/openapi.json", s.base)
        );
        let endpoints = map["endpoints"].as_array().unwrap();
        for (p, ops) in paths {
            for method in ops.as_object().unwrap().keys() {
                let full = format!("/api/pictor{p}");
                assert!(
                    endpoints.iter().any(|e| e["path"] == full.as_str()
                        && e["method"] == method.to_uppercase().as_str()),
                    "map lacks {method} {full}"
                );
            }
        }
        assert!(
            endpoints
                .iter()
                .all(|e| !e["summary"].as_str().unwrap().is_empty())
        );
    }
    s.stop().await;
}

#[test]
fn committed_openapi_json_is_current() {
    let current = pictor::api::spec("http://127.0.0.1:8080");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let a: Value = serde_json::from_str(&current).unwrap();
    let b: Value = serde_json::from_str(&committed).unwrap_or(Value::Null);
    assert!(
        a == b,
        "openapi.json is out of date: run `cargo run -- openapi > openapi.json` and commit it"
    );
}
