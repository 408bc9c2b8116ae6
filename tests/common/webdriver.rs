//! A small W3C WebDriver client over HTTP for Debian's chromium + chromedriver. Tests that need a
//! browser call [`Driver::start`]: without chromium it prints why and returns `None`, unless
//! `PICTOR_CI=1`, where a missing browser is a failure.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

pub struct Driver {
    http: reqwest::Client,
    base: String,
    session: String,
    child: Child,
    _profile: tempfile::TempDir,
}

fn find(binary: &str) -> Option<String> {
    ["/usr/bin/", "/usr/local/bin/", "/usr/lib/chromium/"]
        .iter()
        .map(|d| format!("{d}{binary}"))
        .find(|p| std::path::Path::new(p).exists())
}

impl Driver {
    pub async fn start() -> Option<Driver> {
        let (Some(chromium), Some(chromedriver)) = (find("chromium"), find("chromedriver")) else {
            if std::env::var("PICTOR_CI").is_ok_and(|v| v == "1") {
                panic!(
                    "PICTOR_CI=1 but chromium/chromedriver are missing (apt-get install chromium chromium-driver)"
                );
            }
            eprintln!(
                "SKIPPED: this test needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
            );
            return None;
        };
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        for _ in 0..100 {
            if let Ok(r) = http.get(format!("{base}/status")).send().await
                && r.status().is_success()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                    "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-popup-blocking", "--window-size=1200,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let r: Value = http
            .post(format!("{base}/session"))
            .json(&caps)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let session = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {r}"))
            .to_string();
        Some(Driver {
            http,
            base,
            session,
            child,
            _profile: profile,
        })
    }

    async fn cmd(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{}", self.base, self.session, path);
        let mut req = self.http.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let v: Value = req.send().await.unwrap().json().await.unwrap();
        v["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.cmd(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    pub async fn current_url(&self) -> String {
        self.cmd(reqwest::Method::GET, "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub async fn source(&self) -> String {
        self.cmd(reqwest::Method::GET, "/source", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Waits up to 20 s for an element matching the CSS selector; returns its id.
    pub async fn wait_for(&self, css: &str) -> String {
        for _ in 0..200 {
            let v = self
                .cmd(
                    reqwest::Method::POST,
                    "/element",
                    Some(json!({"using": "css selector", "value": css})),
                )
                .await;
            if let Some(id) = v
                .as_object()
                .and_then(|o| o.values().next())
                .and_then(Value::as_str)
            {
                return id.to_string();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no element {css} in {}", self.source().await);
    }

    pub async fn click(&self, css: &str) {
        let id = self.wait_for(css).await;
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.wait_for(css).await;
        self.cmd(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    pub async fn windows(&self) -> Vec<String> {
        let v = self
            .cmd(reqwest::Method::GET, "/window/handles", None)
            .await;
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|h| h.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub async fn window(&self) -> String {
        self.cmd(reqwest::Method::GET, "/window", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub async fn switch_to(&self, handle: &str) {
        self.cmd(
            reqwest::Method::POST,
            "/window",
            Some(json!({"handle": handle})),
        )
        .await;
    }

    /// Waits until the page source contains `text`.
    pub async fn wait_text(&self, text: &str) -> String {
        for _ in 0..200 {
            let src = self.source().await;
            if src.contains(text) {
                return src;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{text:?} never appeared; page: {}", self.source().await);
    }

    pub async fn screenshot(&self, path: &std::path::Path) {
        use base64::Engine;
        let v = self.cmd(reqwest::Method::GET, "/screenshot", None).await;
        if let Some(b64) = v.as_str() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            std::fs::write(path, bytes).unwrap();
        }
    }
}

impl Drop for Driver {
    /// Ends the WebDriver session first (chromedriver then quits chromium and waits for it), so
    /// chromium is gone before the profile directory is removed; killing chromedriver alone left
    /// chromium writing into the profile while it was deleted, and the directory stayed behind.
    fn drop(&mut self) {
        use std::io::{Read, Write};
        let addr = self.base.trim_start_matches("http://").to_string();
        if let Ok(addr) = addr.parse::<std::net::SocketAddr>()
            && let Ok(mut conn) =
                std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        {
            let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
            let request = format!(
                "DELETE /session/{} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                self.session
            );
            if conn.write_all(request.as_bytes()).is_ok() {
                let _ = conn.read_to_end(&mut Vec::new());
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Scripts, window size and colour scheme, for tests that look at a page (the playground's).
impl Driver {
    /// Runs `script` in the page (WebDriver "Execute Script": the body of a function called with
    /// `args`) and returns what it returns.
    /// The trimmed text of the first element matching `css`, or "" when there is none.
    pub async fn text(&self, css: &str) -> String {
        self.execute(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent.trim() : '';",
            vec![serde_json::json!(css)],
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Value {
        self.cmd(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// Polls `script` every 100 ms for up to `secs` seconds until it returns `true`.
    pub async fn wait_until(&self, script: &str, secs: u64) -> bool {
        for _ in 0..secs * 10 {
            if self.execute(script, vec![]).await == json!(true) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Resizes the browser window (outer size, in CSS pixels).
    pub async fn set_window_size(&self, width: u32, height: u32) {
        self.cmd(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await;
    }

    /// Emulates `prefers-color-scheme` (`"light"` or `"dark"`) through chromedriver's CDP bridge.
    pub async fn color_scheme(&self, scheme: &str) {
        self.cmd(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(json!({
                "cmd": "Emulation.setEmulatedMedia",
                "params": {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
            })),
        )
        .await;
    }

    /// Emulates a phone-sized viewport (`width` CSS pixels, device scale 2, mobile) or, with
    /// `None`, clears the emulation.
    pub async fn phone_viewport(&self, size: Option<(u32, u32)>) {
        let (cmd, params) = match size {
            Some((w, h)) => (
                "Emulation.setDeviceMetricsOverride",
                json!({"width": w, "height": h, "deviceScaleFactor": 2, "mobile": true}),
            ),
            None => ("Emulation.clearDeviceMetricsOverride", json!({})),
        };
        self.cmd(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(json!({"cmd": cmd, "params": params})),
        )
        .await;
    }

    /// A screenshot of the whole page (not only the viewport), through CDP.
    pub async fn full_screenshot(&self, path: &std::path::Path) {
        use base64::Engine;
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/goog/cdp/execute",
                Some(json!({
                    "cmd": "Page.captureScreenshot",
                    "params": {"format": "png", "captureBeyondViewport": true}
                })),
            )
            .await;
        if let Some(b64) = v["data"].as_str() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            std::fs::write(path, bytes).unwrap();
        }
    }
}

/// Where a browser test saves its screenshot `name` (`pictor-<test>-<name>.png` in the temp
/// folder; the ones the README shows are copied to packaging/screenshots by hand).
pub fn shot(test: &str, name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("pictor-{test}-{name}.png"))
}
