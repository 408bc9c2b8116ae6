//! A full disk while a picture is written: the job fails with `generation_failed`, the credits and
//! the daily slot come back, the store stays readable, and the next job works once there is room.
//! Needs root to mount a small tmpfs over the images folder; without it the test says why and
//! skips (under PICTOR_CI=1 it must run).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::*;
use pictor::app::Server;
use pictor::clock::Clock;
use pictor::config::Config;
use pictor::ops::{self, AdminRequest};
use pictor::render::ProceduralRenderer;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_disk_while_writing_a_picture_fails_the_job_with_a_refund() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let Some(_mount) = mount_tmpfs(&data.join("images"), "1m") else {
        return;
    };
    // Fill it up, leaving far less room than a picture needs.
    let filler = data.join("images").join(".filler");
    std::fs::write(&filler, vec![7u8; 1024 * 1024 - 16 * 1024]).ok();

    let mut config = Config::new(data.clone());
    config.listen = "127.0.0.1:0".parse().unwrap();
    let clock = Clock::default();
    let h = Server::start(config, Arc::new(ProceduralRenderer), clock.clone())
        .await
        .unwrap();
    let store = h.state.store.clone();
    ops::execute(
        &store,
        &h.state.idp.secrets,
        AdminRequest::UserAdd {
            email: "full@example.com".into(),
            name: None,
            password_hash: None,
            admin: false,
            pro: true,
            credits: 10,
        },
        clock.now(),
    )
    .unwrap();
    let key = ops::execute(
        &store,
        &h.state.idp.secrets,
        AdminRequest::KeyIssue {
            email: "full@example.com".into(),
        },
        clock.now(),
    )
    .unwrap()["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let http = reqwest::Client::new();
    let generate = || {
        http.post(format!("{}/api/pictor/v1/generate", h.base_url))
            .bearer_auth(&key)
            .json(&json!({"prompt": "a busy city at night with many lights", "model": "artist"}))
            .send()
    };

    let (st, c) = status_json(generate().await.unwrap()).await;
    assert_eq!(st, 202, "{c}");
    let v: serde_json::Value = http
        .get(format!("{}?wait=60", c["poll_url"].as_str().unwrap()))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["status"], "failed", "{v}");
    assert_eq!(v["error_code"], "generation_failed");
    assert!(
        v["error"].as_str().unwrap().contains("could not be saved"),
        "{v}"
    );
    assert_eq!(v["balance"], 10, "credits returned");
    let me: serde_json::Value = http
        .get(format!("{}/api/pictor/v1/me", h.base_url))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["daily_used"], 0, "daily slot returned");
    assert!(store.readable());
    // No half-written picture is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(data.join("images"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name() != ".filler")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Room again: the next job works.
    std::fs::remove_file(&filler).unwrap();
    let (st, c) = status_json(generate().await.unwrap()).await;
    assert_eq!(st, 202);
    let v: serde_json::Value = http
        .get(format!("{}?wait=60", c["poll_url"].as_str().unwrap()))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(v["balance"], 5);
    h.shutdown().await;
}
