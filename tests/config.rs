//! Configuration: file < env < flags with sources shown by `pictor config show`, unknown keys
//! named, configured prices applied to the running server, and picture retention.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::*;
use serde_json::json;

#[test]
fn config_show_reports_values_and_sources() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, "listen = \"127.0.0.1:9999\"\nqueue_size = 5\n[prices]\nfast = 3\n[backends.artist]\nkind = \"a1111\"\nurl = \"http://127.0.0.1:7860\"\n").unwrap();
    let out = pictor_cmd(dir.path())
        .env("PICTOR_QUEUE_SIZE", "7")
        .args([
            "--config",
            file.to_str().unwrap(),
            "--set",
            "limits.daily=4",
            "config",
            "show",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config_file"], file.to_str().unwrap());
    let get = |k: &str| {
        (
            v["values"][k]["value"].as_str().unwrap().to_string(),
            v["values"][k]["source"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(
        get("listen"),
        ("127.0.0.1:9999".into(), "config file".into())
    );
    assert_eq!(get("queue_size"), ("7".into(), "environment".into()));
    assert_eq!(get("limits.daily"), ("4".into(), "command line".into()));
    assert_eq!(get("prices.fast"), ("3".into(), "config file".into()));
    assert_eq!(get("data_dir").1, "environment");
    assert_eq!(get("render_workers").1, "default");
    assert_eq!(v["backends"], json!(["artist"]));
    // Human form too.
    let out = pictor_cmd(dir.path())
        .args(["--config", file.to_str().unwrap(), "config", "show"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("queue_size") && text.contains("# config file"),
        "{text}"
    );
}

#[test]
fn unknown_keys_and_bad_values_are_errors_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    for (content, key) in [
        ("[prices]\nturbo = 3\n", "prices.turbo"),
        ("listen = 5\n", "listen"),
        ("queue_timeout = 0\n", "queue_timeout"),
        ("lisen = \"x\"\n", "lisen"),
    ] {
        std::fs::write(&file, content).unwrap();
        let out = pictor_cmd(dir.path())
            .args(["--config", file.to_str().unwrap(), "config", "show"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{content}: {err}");
    }
    let out = pictor_cmd(dir.path())
        .args(["--set", "nope=1", "config", "show"])
        .output()
        .unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("nope"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_prices_reach_the_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, "[prices]\nfast = 3\nedit = 4\n[limits]\ndaily = 2\n").unwrap();
    let server = spawn_server(dir.path(), &[("PICTOR_CONFIG", file.to_str().unwrap())]);
    let models: serde_json::Value = reqwest::get(format!("{}/api/pictor/v1/models", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["models"][0]["price"], 3);
    assert_eq!(models["edit_price"], 4);
    server.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pictures_past_retention_are_deleted_and_jobs_say_so() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (_, key) = s.user("ret@example.com", 5, false);
    let (_, c) = s.generate(&key, json!({"prompt": "old picture"})).await;
    let done = s.finish(&key, c["job_id"].as_str().unwrap()).await;
    let url = done["photo_url"].as_str().unwrap().to_string();
    assert_eq!(s.client.get(&url).send().await.unwrap().status(), 200);
    let state = s.handle.as_ref().unwrap().state.clone();
    // Not yet old enough.
    assert_eq!(
        pictor::app::maintenance::expire_now(&state, 30)
            .await
            .unwrap(),
        0
    );
    s.clock.advance(31 * 86_400_000);
    assert_eq!(
        pictor::app::maintenance::expire_now(&state, 30)
            .await
            .unwrap(),
        1
    );
    let (_, job) = s
        .get(
            &key,
            &format!("/api/pictor/v1/jobs/{}", c["job_id"].as_str().unwrap()),
        )
        .await;
    assert_eq!(job["status"], "done");
    assert!(job["photo_url"].is_null(), "{job}");
    assert!(job["photo_deleted_at"].as_u64().is_some());
    assert_eq!(s.client.get(&url).send().await.unwrap().status(), 404);
    assert_eq!(
        std::fs::read_dir(s.data_dir().join("images"))
            .unwrap()
            .count(),
        0
    );
    s.stop().await;
}

#[poem::handler]
async fn fake_txt2img(
    body: poem::web::Json<serde_json::Value>,
) -> poem::web::Json<serde_json::Value> {
    use base64::Engine;
    let img = image::RgbImage::from_pixel(64, 48, image::Rgb([10, 200, 30]));
    let mut png = std::io::Cursor::new(Vec::new());
    img.write_to(&mut png, image::ImageFormat::Png).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(png.into_inner());
    poem::web::Json(json!({"images": [b64], "parameters": body.0, "info": "{}"}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_backend_from_the_config_file_serves_jobs() {
    use poem::listener::{Acceptor, Listener};
    let acceptor = poem::listener::TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .unwrap();
    let fake = format!(
        "http://{}",
        acceptor.local_addr()[0].as_socket_addr().unwrap()
    );
    tokio::spawn(async move {
        poem::Server::new_with_acceptor(acceptor)
            .run(poem::Route::new().at("/sdapi/v1/txt2img", poem::post(fake_txt2img)))
            .await
    });

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    // A bad key inside a backend table is named as written in the file.
    std::fs::write(
        &file,
        format!("[backends.fast]\nkind = \"a1111\"\nurl = \"{fake}\"\nstepz = 3\n"),
    )
    .unwrap();
    let out = pictor_cmd(dir.path())
        .args(["--config", file.to_str().unwrap(), "config", "show"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("stepz"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    std::fs::write(
        &file,
        format!("[backends.fast]\nkind = \"a1111\"\nurl = \"{fake}\"\nretries = 0\n"),
    )
    .unwrap();
    let d = dir.path().to_path_buf();
    let key = tokio::task::spawn_blocking(move || {
        cli_json(
            &d,
            &[
                "user",
                "add",
                "--email",
                "gpu@example.com",
                "--pro",
                "--credits",
                "5",
                "--json",
            ],
            None,
        );
        cli_json(
            &d,
            &["key", "issue", "--email", "gpu@example.com", "--json"],
            None,
        )["api_key"]
            .as_str()
            .unwrap()
            .to_string()
    })
    .await
    .unwrap();
    let server = spawn_server(dir.path(), &[("PICTOR_CONFIG", file.to_str().unwrap())]);
    let http = reqwest::Client::new();
    let (_, c) = server
        .generate(&key, json!({"prompt": "anything", "ratio": "16:9"}))
        .await;
    let done: serde_json::Value = http
        .get(format!("{}?wait=60", c["poll_url"].as_str().unwrap()))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(done["status"], "done", "{done}");
    let png = http
        .get(done["photo_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let img = image::load_from_memory(&png).unwrap().to_rgb8();
    assert_eq!(
        img.dimensions(),
        (1024, 576),
        "scaled to the job's exact size"
    );
    let p = img.get_pixel(512, 288);
    assert!(
        p[1] > 180 && p[0] < 40,
        "the backend's picture, not the built-in one: {p:?}"
    );
    server.terminate();
}
