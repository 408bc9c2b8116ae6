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
    assert_eq!(schemes["ApiKey"]["scheme"], "bearer");
    assert_eq!(schemes["ApiKeyHeader"]["name"], "X-API-Key");
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
    // Pictor's page: its title and icon, a way back, a real example request.
    assert!(
        html.contains("<title>Pictor image API · Pictor</title>"),
        "title"
    );
    assert!(!html.contains("<title>Swagger UI</title>"));
    assert!(
        html.contains(r#"rel="icon" href="/static/icon.svg""#),
        "favicon"
    );
    assert!(
        html.contains(r#"<a class="brand" href="/">Pictor</a>"#),
        "link back"
    );
    let spec: serde_json::Value = s
        .client
        .get(s.url("/api/pictor/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let example = &spec["components"]["schemas"]["GenerateRequest"]["example"];
    assert_eq!(example["seed"], 42, "{example}");
    assert!(
        example["prompt"].as_str().unwrap().contains("fox"),
        "{example}"
    );
    // The OAuth receiver of the page still answers.
    let r = s
        .client
        .get(s.url("/api/pictor/docs/oauth-receiver.html"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

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
    let current = pictor::api::spec("http://127.0.0.1:8080", true);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let a: Value = serde_json::from_str(&current).unwrap();
    let b: Value = serde_json::from_str(&committed).unwrap_or(Value::Null);
    assert!(
        a == b,
        "openapi.json is out of date: run `cargo run -- openapi > openapi.json` and commit it"
    );
}

/// Every place in a document where a JSON schema sits, with its JSON pointer.
fn schemas<'a>(v: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(o) => {
            if o.contains_key("type") || o.contains_key("$ref") || o.contains_key("allOf") {
                out.push((at.clone(), v));
            }
            for (k, child) in o {
                schemas(child, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                schemas(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The shapes the mainstream client generators (openapi-python-client, openapi-typescript,
/// progenitor) read as meant; `.ci/clients.sh` runs the generators themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_has_the_shapes_client_generators_read() {
    let s = TestServer::start().await;
    let (status, doc) = s.get("", "/api/pictor/openapi.json").await;
    assert_eq!(status, 200);
    let mut found = Vec::new();
    schemas(&doc, String::new(), &mut found);
    for (at, schema) in &found {
        // A named type with the field's own keywords is a one-member `allOf`, never a second
        // member without a type (which openapi-python-client refuses and openapi-typescript
        // types as `T & unknown`).
        if let Some(all_of) = schema.get("allOf") {
            assert_eq!(all_of.as_array().unwrap().len(), 1, "{at}: {schema}");
            assert!(all_of[0].get("$ref").is_some(), "{at}: {schema}");
        }
        for union in ["anyOf", "oneOf"] {
            assert!(schema.get(union).is_none(), "{at} has {union}: {schema}");
        }
    }
    // Optional request fields stay optional in generated types: their defaults are said in
    // words, not as `default` (openapi-typescript makes a field with a `default` required).
    let request = &doc["components"]["schemas"]["GenerateRequest"];
    assert_eq!(request["required"], serde_json::json!(["prompt"]));
    let generate = &request["properties"];
    for field in ["model", "ratio", "enhance", "seed", "noise", "webhook_url"] {
        assert!(generate[field].get("default").is_none(), "{field}");
        assert_eq!(generate[field]["nullable"], true, "{field}");
    }
    assert_eq!(
        generate["model"]["allOf"][0]["$ref"],
        "#/components/schemas/ModelName"
    );
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for (method, op) in ops.as_object().unwrap() {
            // One media type per request body (progenitor takes no more).
            if let Some(body) = op.get("requestBody") {
                assert_eq!(
                    body["content"].as_object().unwrap().len(),
                    1,
                    "{method} {path}"
                );
            }
            // Every error response is the one error shape: Pictor's, or OpenAI's on the
            // OpenAI-compatible operations.
            let shape = if path.starts_with("/openai/") {
                "#/components/schemas/OpenAiErrorBody"
            } else {
                "#/components/schemas/ErrorBody"
            };
            for (status, response) in op["responses"].as_object().unwrap() {
                if status.starts_with('4') || status.starts_with('5') {
                    let content = response["content"].as_object().unwrap();
                    assert_eq!(content.len(), 1, "{method} {path} {status}");
                    let schema = &content.values().next().unwrap()["schema"];
                    assert_eq!(schema["$ref"], shape, "{method} {path} {status}");
                }
            }
        }
    }
    // The edit form: the photo and the instruction are required, and nothing else is a
    // variant of them.
    let form = &doc["paths"]["/v1/edit"]["post"]["requestBody"]["content"]["multipart/form-data"]["schema"];
    assert_eq!(form["required"], serde_json::json!(["image", "prompt"]));
    assert_eq!(form["properties"]["image"]["format"], "binary");
    // Each operation documents the errors it can give, not every error of the API.
    let statuses = |path: &str, method: &str| -> Vec<String> {
        doc["paths"][path][method]["responses"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(statuses("/v1/me", "get"), ["200", "401", "403", "500"]);
    assert_eq!(statuses("/v1/models", "get"), ["200", "500"]);
    assert_eq!(
        statuses("/v1/jobs/{job_id}", "get"),
        ["200", "400", "401", "403", "404", "500"]
    );
    for (path, method) in [
        ("/openai/v1/images/generations", "post"),
        ("/openai/v1/images/edits", "post"),
    ] {
        assert_eq!(
            statuses(path, method),
            ["200", "400", "401", "403", "429", "500", "504"],
            "{path}"
        );
    }
    assert_eq!(
        statuses("/v1/generate", "post"),
        ["202", "400", "401", "402", "403", "409", "413", "500"]
    );
    s.stop().await;
}

/// `?multipart=false` is the same document without `POST /v1/edit`, whose job
/// `POST /v1/edit/raw` also does, for generators that cannot send forms (progenitor).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_without_multipart_lacks_only_the_form_upload() {
    let s = TestServer::start().await;
    let (_, full) = s.get("", "/api/pictor/openapi.json").await;
    let (status, plain) = s.get("", "/api/pictor/openapi.json?multipart=false").await;
    assert_eq!(status, 200);
    let mut expected = full.clone();
    expected["paths"]
        .as_object_mut()
        .unwrap()
        .remove("/v1/edit");
    // And the OpenAI-compatible edit (multipart too).
    expected["paths"]
        .as_object_mut()
        .unwrap()
        .remove("/openai/v1/images/edits");
    assert_eq!(plain["paths"], expected["paths"]);
    assert_eq!(plain["components"], full["components"]);
    assert_eq!(plain["info"], full["info"]);
    assert!(!plain.to_string().contains("multipart/form-data"));
    let raw = &plain["paths"]["/v1/edit/raw"]["post"];
    assert_eq!(raw["operationId"], "edit_raw");
    assert_eq!(
        raw["requestBody"]["content"]["application/octet-stream"]["schema"]["format"],
        "binary"
    );
    let prompt = raw["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "prompt")
        .unwrap();
    assert_eq!(prompt["required"], true);
    assert_eq!(prompt["schema"]["maxLength"], 4000);
    // The command line prints the same document.
    let cli = pictor::api::spec("http://127.0.0.1:8080", false);
    let cli: Value = serde_json::from_str(&cli).unwrap();
    assert_eq!(cli["paths"], plain["paths"]);
    s.stop().await;
}
