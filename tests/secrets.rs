//! Secrets stay secret: after a full run with the real binary (password sign-in, API key, OAuth
//! client secret, authorization code, access and refresh tokens, session cookie), none of them
//! appears in the server's log at debug level, nor in plain text in the store file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeSet, HashMap};
use std::io::BufRead;

/// The length of a piece of a secret that counts as a leak.
const WINDOW: usize = 16;

use common::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_in_logs_or_in_the_store_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_path_buf();
    let password = "a very secret password 42";
    let (key, app_secret) = tokio::task::spawn_blocking({
        let d = d.clone();
        move || {
            cli_json(
                &d,
                &[
                    "user",
                    "add",
                    "--email",
                    "s@example.com",
                    "--password-stdin",
                    "--credits",
                    "5",
                    "--json",
                ],
                Some(&format!("{password}\n")),
            );
            let key = cli_json(
                &d,
                &["key", "issue", "--email", "s@example.com", "--json"],
                None,
            )["api_key"]
                .as_str()
                .unwrap()
                .to_string();
            let secret = cli_json(
                &d,
                &[
                    "client",
                    "add",
                    "--name",
                    "app",
                    "--redirect-uri",
                    "http://127.0.0.1:9/cb",
                    "--json",
                ],
                None,
            )["app_secret"]
                .as_str()
                .unwrap()
                .to_string();
            (key, secret)
        }
    })
    .await
    .unwrap();
    let log = d.join("server.log");
    let mut child = pictor_cmd(&d)
        .env("PICTOR_LOG", "debug")
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
    // API key use.
    let r = http
        .post(format!("{base}/api/pictor/v1/generate"))
        .bearer_auth(&key)
        .json(&json!({"prompt": "secret test"}))
        .send()
        .await
        .unwrap();
    let (_, c) = status_json(r).await;
    http.get(format!("{}?wait=30", c["poll_url"].as_str().unwrap()))
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    // A wrong password too (logged as a failure, without the password).
    let mut b = Browser::new();
    let page = b.get(&format!("{base}/login")).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", "s@example.com");
    set_field(&mut fields, "password", "wrong secret guess 123");
    b.post(&format!("{base}/login"), &fields).await;
    // Sign in, consent, code, tokens, refresh, userinfo, revoke.
    let url = authorize_url(
        &base,
        &[
            ("response_type", "code"),
            ("client_id", "app"),
            ("redirect_uri", "http://127.0.0.1:9/cb"),
            ("state", "st"),
        ],
    );
    let page = b.get(&url).await;
    let page = b.follow(&base, page).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", "s@example.com");
    set_field(&mut fields, "password", password);
    let r = b.post(&format!("{base}/login"), &fields).await;
    let consent = b.follow(&base, r).await;
    let mut fields = form_fields(&consent.body, "/oauth/authorize");
    set_field(&mut fields, "decision", "allow");
    let r = b.post(&format!("{base}/oauth/authorize"), &fields).await;
    let code = query_of(&r.location.unwrap())["code"].clone();
    let tokens: Value = http
        .post(format!("{base}/oauth/token"))
        .basic_auth("app", Some(&app_secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", "http://127.0.0.1:9/cb"),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();
    http.get(format!("{base}/oauth/userinfo"))
        .bearer_auth(&access)
        .send()
        .await
        .unwrap();
    let refreshed: Value = http
        .post(format!("{base}/oauth/token"))
        .basic_auth("app", Some(&app_secret))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh.as_str()),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let refresh2 = refreshed["refresh_token"].as_str().unwrap().to_string();
    let session = b.cookies["pictor_session"].clone();
    let csrf = b.cookies["pictor_csrf"].clone();
    std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    child.wait().unwrap();

    let secrets = [
        ("password", password.to_string()),
        ("wrong password", "wrong secret guess 123".to_string()),
        ("API key", key.clone()),
        ("client secret", app_secret.clone()),
        ("authorization code", code.clone()),
        ("access token", access.clone()),
        ("refresh token", refresh.clone()),
        ("rotated refresh token", refresh2.clone()),
        ("session id", session.clone()),
        ("csrf token", csrf.clone()),
    ];
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(
        log_text.lines().count() > 20,
        "the log is not empty: {log_text}"
    );
    let raw = std::fs::read(d.join("pictor.redb")).unwrap();
    // Any 16-character piece of a secret, wherever it starts, would be a leak: every window of
    // every secret is looked for in the log and in the store file (one pass over each).
    let mut windows: HashMap<&[u8], &str> = HashMap::new();
    for (what, secret) in &secrets {
        let bytes = secret.as_bytes();
        assert!(bytes.len() >= WINDOW, "{what} is shorter than a window");
        for w in bytes.windows(WINDOW) {
            windows.insert(w, what);
        }
    }
    let leaks = |haystack: &[u8]| -> BTreeSet<&str> {
        haystack
            .windows(WINDOW)
            .filter_map(|w| windows.get(w).copied())
            .collect()
    };
    let in_log = leaks(log_text.as_bytes());
    assert!(in_log.is_empty(), "in the log: {in_log:?}");
    let in_store = leaks(&raw);
    assert!(
        in_store.is_empty(),
        "in plain text in the store: {in_store:?}"
    );
    println!(
        "secrets: every {WINDOW}-character piece of {} secrets ({} pieces) checked against {} log lines and {} bytes of store: none found",
        secrets.len(),
        windows.len(),
        log_text.lines().count(),
        raw.len()
    );
}
