//! Test harness: the real server on 127.0.0.1:0 with a temp data dir, spoken to over HTTP.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use pictor::app::{Server, ServerHandle};
use pictor::clock::Clock;
use pictor::config::Config;
use pictor::ops::{self, AdminRequest};
use pictor::render::{
    EditSpec, GenerateSpec, Picture, ProceduralRenderer, RenderControl, RenderError, Renderer,
};
use serde_json::{Value, json};
use tempfile::TempDir;

pub mod smtp;
pub mod webdriver;

pub struct TestServer {
    pub base: String,
    pub client: reqwest::Client,
    pub handle: Option<ServerHandle>,
    pub dir: TempDir,
    pub clock: Clock,
}

pub struct Options {
    pub renderer: Arc<dyn Renderer>,
    pub render_workers: usize,
    pub queue_size: usize,
    pub queue_timeout: Duration,
    /// Changes to the configuration (trusted proxies, public URL…) before the server starts.
    pub tweak: fn(&mut Config),
}

impl Default for Options {
    fn default() -> Self {
        Options {
            renderer: Arc::new(ProceduralRenderer),
            render_workers: 1,
            queue_size: 64,
            queue_timeout: Duration::from_secs(120),
            tweak: |_| {},
        }
    }
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(Options::default()).await
    }

    pub async fn with_renderer(renderer: Arc<dyn Renderer>) -> TestServer {
        Self::start_with(Options {
            renderer,
            ..Options::default()
        })
        .await
    }

    pub async fn start_with(opts: Options) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::new(dir.path().join("data"));
        config.listen = "127.0.0.1:0".parse().unwrap();
        config.render_workers = opts.render_workers;
        config.queue_size = opts.queue_size;
        config.queue_timeout = opts.queue_timeout;
        (opts.tweak)(&mut config);
        let clock = Clock::default();
        let handle = Server::start(config, opts.renderer, clock.clone())
            .await
            .unwrap();
        TestServer {
            base: handle.base_url.clone(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .unwrap(),
            handle: Some(handle),
            dir,
            clock,
        }
    }

    pub fn data_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    pub fn admin(&self, req: AdminRequest) -> Value {
        let state = &self.handle.as_ref().unwrap().state;
        ops::execute(&state.store, &state.idp.secrets, req, self.clock.now()).unwrap()
    }

    /// Creates a user with credits and returns (email, api key).
    pub fn user(&self, email: &str, credits: u32, pro: bool) -> (String, String) {
        self.admin(AdminRequest::UserAdd {
            email: email.into(),
            name: None,
            password_hash: None,
            admin: false,
            pro,
            credits,
        });
        let key = self.admin(AdminRequest::KeyIssue {
            email: email.into(),
        });
        (
            email.to_string(),
            key["api_key"].as_str().unwrap().to_string(),
        )
    }

    pub fn store(&self) -> &pictor::store::Store {
        &self.handle.as_ref().unwrap().state.store
    }

    /// The books balance and nothing is left half-done (see [`books_mismatches`]). Call it once
    /// every job the test made has ended.
    pub fn assert_books_balanced(&self) {
        let mismatches = books_mismatches(self.store(), &self.data_dir());
        assert!(mismatches.is_empty(), "{mismatches:#?}");
    }

    pub async fn stop(mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown().await;
        }
    }

    /// Stops the server and hands over its temporary folder (the data dir is `<it>/data`).
    pub async fn stop_keeping_data(mut self) -> TempDir {
        if let Some(h) = self.handle.take() {
            h.shutdown().await;
        }
        std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap())
    }
}

/// The image API over HTTP, for any server a test started: in-process ([`TestServer`]) or the
/// real binary as a child ([`ChildServer`]). `use common::*` brings it in.
#[allow(async_fn_in_trait)]
pub trait Api {
    /// `http://127.0.0.1:PORT`.
    fn base(&self) -> &str;
    fn http(&self) -> &reqwest::Client;

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base(), path)
    }

    async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        let r = self
            .http()
            .get(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        status_json(r).await
    }

    async fn generate(&self, key: &str, body: Value) -> (u16, Value) {
        let r = self
            .http()
            .post(self.url("/api/pictor/v1/generate"))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .unwrap();
        status_json(r).await
    }

    async fn me(&self, key: &str) -> Value {
        let (s, v) = self.get(key, "/api/pictor/v1/me").await;
        assert_eq!(s, 200, "{v}");
        v
    }

    /// Polls with `wait` until the job is done or failed.
    async fn finish(&self, key: &str, job_id: &str) -> Value {
        for _ in 0..60 {
            let (s, v) = self
                .get(key, &format!("/api/pictor/v1/jobs/{job_id}?wait=30"))
                .await;
            assert_eq!(s, 200, "{v}");
            if v["status"] == "done" || v["status"] == "failed" {
                return v;
            }
        }
        panic!("job {job_id} did not finish");
    }

    /// Polls the job (every 10 ms, 60 s at most) until `until` holds for its body, and returns
    /// the body; a deadline passed is a failure naming `what`.
    async fn wait_for_job(
        &self,
        key: &str,
        job_id: &str,
        what: &str,
        until: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let (s, v) = self
                .get(key, &format!("/api/pictor/v1/jobs/{job_id}"))
                .await;
            assert_eq!(s, 200, "{v}");
            if until(&v) {
                return v;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "job {job_id} never became {what}: {v}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The PNG at `url` (a `photo_url`), its bytes as served.
    async fn fetch(&self, url: &str) -> Vec<u8> {
        let r = self.http().get(url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "image/png");
        r.bytes().await.unwrap().to_vec()
    }

    /// The PNG at `url`, decoded.
    async fn download(&self, url: &str) -> image::RgbaImage {
        let bytes = self.fetch(url).await;
        image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
            .unwrap()
            .to_rgba8()
    }

    /// `POST /v1/edit` with the key and a multipart `form`: (status, the answer's JSON).
    async fn edit_form(&self, key: &str, form: reqwest::multipart::Form) -> (u16, Value) {
        let r = self
            .http()
            .post(self.url("/api/pictor/v1/edit"))
            .bearer_auth(key)
            .multipart(form)
            .send()
            .await
            .unwrap();
        status_json(r).await
    }

    /// `POST` to `path` with the key, and `body` as JSON when given: (status, the answer's JSON).
    async fn post(&self, key: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let mut req = self.http().post(self.url(path)).bearer_auth(key);
        if let Some(b) = body {
            req = req.json(b);
        }
        status_json(req.send().await.unwrap()).await
    }
}

impl Api for TestServer {
    fn base(&self) -> &str {
        &self.base
    }

    fn http(&self) -> &reqwest::Client {
        &self.client
    }
}

impl Api for ChildServer {
    fn base(&self) -> &str {
        &self.base
    }

    fn http(&self) -> &reqwest::Client {
        &self.client
    }
}

pub async fn status_json(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = r.text().await.unwrap();
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("status {status}, not JSON ({ct}): {text:?}"));
    (status, v)
}

/// `GET url` with the key, the answer's body as JSON (any status).
pub async fn get_json(http: &reqwest::Client, url: &str, key: &str) -> Value {
    http.get(url)
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Asserts the seed's error shape with the given status and code.
pub fn assert_error(got: &(u16, Value), status: u16, code: &str) {
    let (s, v) = got;
    assert_eq!(*s, status, "{v}");
    assert_eq!(v["ok"], json!(false), "{v}");
    assert_eq!(v["error_code"], json!(code), "{v}");
    assert!(v["error"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
}

/// A renderer whose renders block until the gate is opened; then it draws a flat picture of the
/// exact requested size (fast, so tests spend their time on the job machinery).
#[derive(Clone, Default)]
pub struct Gate {
    pub state: Arc<(Mutex<bool>, Condvar)>,
    pub fail: bool,
}

impl Gate {
    pub fn open(&self) {
        let (m, c) = &*self.state;
        *m.lock().unwrap() = true;
        c.notify_all();
    }

    pub fn close(&self) {
        *self.state.0.lock().unwrap() = false;
    }

    fn pass(&self) {
        let (m, c) = &*self.state;
        let mut open = m.lock().unwrap();
        while !*open {
            open = c.wait(open).unwrap();
        }
    }
}

pub fn flat_picture(w: u32, h: u32, rgba: [u8; 4]) -> Picture {
    Picture::from_rgba(w, h, rgba.repeat((w * h) as usize)).unwrap()
}

impl Renderer for Gate {
    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError> {
        self.pass();
        if self.fail {
            return Err(RenderError::Failed(
                "the test renderer fails on purpose".into(),
            ));
        }
        let (w, h) = spec.model.dimensions(spec.ratio);
        Ok(flat_picture(w, h, [40, 90, 160, 255]))
    }

    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError> {
        self.pass();
        if self.fail {
            return Err(RenderError::Failed(
                "the test renderer fails on purpose".into(),
            ));
        }
        ProceduralRenderer.edit(spec)
    }

    /// The painter's edit with its report (what was done and what could not be).
    fn edit_with(&self, spec: &EditSpec, control: &RenderControl) -> Result<Picture, RenderError> {
        self.pass();
        if self.fail {
            return Err(RenderError::Failed(
                "the test renderer fails on purpose".into(),
            ));
        }
        ProceduralRenderer.edit_with(spec, control)
    }
}

/// A renderer with a denoising-like loop: `steps` steps of `step` each, progress reported after
/// every step, cancellation checked before every step. Remembers where each render stopped.
#[derive(Clone)]
pub struct Stepper {
    pub steps: usize,
    pub step: Duration,
    /// Steps run by each render, in the order renders ended.
    pub ran: Arc<Mutex<Vec<usize>>>,
    /// Waits before the loop until opened (for queue tests).
    pub gate: Gate,
}

impl Stepper {
    pub fn new(steps: usize, step: Duration) -> Stepper {
        Stepper {
            steps,
            step,
            ran: Arc::default(),
            gate: open_gate(),
        }
    }
}

impl Renderer for Stepper {
    fn generate(&self, spec: &GenerateSpec) -> Result<Picture, RenderError> {
        self.generate_with(spec, &RenderControl::default())
    }

    fn edit(&self, spec: &EditSpec) -> Result<Picture, RenderError> {
        ProceduralRenderer.edit(spec)
    }

    fn generate_with(
        &self,
        spec: &GenerateSpec,
        control: &RenderControl,
    ) -> Result<Picture, RenderError> {
        self.gate.generate(spec)?;
        for i in 0..self.steps {
            if control.is_cancelled() {
                self.ran.lock().unwrap().push(i);
                return Err(RenderError::Cancelled);
            }
            std::thread::sleep(self.step);
            control.set_progress((i + 1) as f64 / self.steps as f64);
        }
        self.ran.lock().unwrap().push(self.steps);
        let (w, h) = spec.model.dimensions(spec.ratio);
        Ok(flat_picture(w, h, [10, 20, 30, 255]))
    }
}

/// An opened gate (renders immediately).
pub fn open_gate() -> Gate {
    let g = Gate::default();
    g.open();
    g
}

pub fn png_bytes(w: u32, h: u32) -> Vec<u8> {
    let img = image::RgbaImage::from_fn(w, h, |x, y| {
        image::Rgba([(x * 7) as u8, (y * 5) as u8, 200, 255])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

pub fn file_exists(p: &Path) -> bool {
    p.exists()
}

/// Every way the books can be wrong, read from the store (and the pictures in `data_dir`):
/// a balance that differs from its ledger or from grants − charges + refunds, a negative
/// balance, a user left with an active job, a job not done or failed, a job charged or refunded
/// other than once (done: one charge, no refund; failed: a refund for each charge, at most one),
/// a job whose `charged`/`refunded` flags disagree with its ledger rows, a done job without its
/// picture (unless it expired).
pub fn books_mismatches(store: &pictor::store::Store, data_dir: &Path) -> Vec<String> {
    use pictor::store::{JobStatus, LedgerReason};
    let mut mismatches = Vec::new();
    let jobs = store.all_jobs().unwrap();
    for u in store.users().unwrap() {
        let ledger = store.ledger(u.id).unwrap();
        let of = |reason: LedgerReason| -> i64 {
            ledger
                .iter()
                .filter(|e| e.reason == reason)
                .map(|e| e.delta)
                .sum()
        };
        let sum: i64 = ledger.iter().map(|e| e.delta).sum();
        let (grants, charges, refunds) = (
            of(LedgerReason::Grant),
            -of(LedgerReason::Charge),
            of(LedgerReason::Refund),
        );
        if u.balance != sum || sum != grants - charges + refunds || u.balance < 0 {
            mismatches.push(format!(
                "{}: balance {} ledger {sum} grants {grants} charges {charges} refunds {refunds}",
                u.email, u.balance
            ));
        }
        if let Some(active) = store.active_job(u.id).unwrap() {
            mismatches.push(format!("{} is left with the active job {active}", u.email));
        }
        let mut per_job: std::collections::BTreeMap<u128, (usize, usize)> = Default::default();
        for e in &ledger {
            if let Some(j) = e.job_id {
                let entry = per_job.entry(j).or_default();
                match e.reason {
                    LedgerReason::Charge => entry.0 += 1,
                    LedgerReason::Refund => entry.1 += 1,
                    LedgerReason::Grant | LedgerReason::Closed => {}
                }
            }
        }
        for j in jobs.iter().filter(|j| j.user_id == u.id) {
            let (c, r) = per_job.get(&j.id).copied().unwrap_or((0, 0));
            let counts_ok = match j.status {
                JobStatus::Done => c == 1 && r == 0,
                JobStatus::Failed => c <= 1 && r == c,
                _ => false,
            };
            if !counts_ok || j.charged != (c == 1) || j.refunded != (r == 1) {
                mismatches.push(format!(
                    "{} ({:?}, charged {}, refunded {}) has {c} charge and {r} refund rows",
                    j.job_id(),
                    j.status,
                    j.charged,
                    j.refunded
                ));
            }
            if j.status == JobStatus::Done && j.photo_deleted_at.is_none() {
                let token = j.photo_token.as_deref().unwrap_or("?");
                let path = data_dir.join("images").join(format!("{token}.png"));
                if !path.exists() {
                    mismatches.push(format!("{} is done but its picture is missing", j.job_id()));
                }
            }
        }
    }
    mismatches
}

/// The real binary as a child process.
pub struct ChildServer {
    pub child: std::process::Child,
    pub base: String,
    pub client: reqwest::Client,
}

/// The binary on `data_dir`, with `--init`: tests make their stores with their first command
/// (the refusal without it is tested in `tests/cli.rs`).
pub fn pictor_cmd(data_dir: &Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_pictor"));
    cmd.arg("--init")
        .env("PICTOR_DATA_DIR", data_dir)
        .env_remove("PICTOR_DEBUG_RENDER_DELAY_MS")
        .env_remove("PICTOR_DEBUG_FAIL_PROMPT")
        .env_remove("PICTOR_DEBUG_FLAT_RENDER")
        .env_remove("PICTOR_CONFIG")
        .env_remove("PICTOR_DEVICE")
        .env_remove("PICTOR_CUDA_BINARY");
    cmd
}

/// Starts `pictor serve --listen 127.0.0.1:0` and waits for its address.
pub fn spawn_server(data_dir: &Path, envs: &[(&str, &str)]) -> ChildServer {
    use std::io::BufRead;
    let mut cmd = pictor_cmd(data_dir);
    cmd.args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent && let Some(url) = line.split("is running at ").nth(1) {
                let _ = tx.send(url.trim().to_string());
                sent = true;
            }
        }
    });
    let base = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("server did not start");
    ChildServer {
        child,
        base,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap(),
    }
}

/// A test that fails half-way does not leave its server running.
impl Drop for ChildServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl ChildServer {
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        self.child.wait().unwrap()
    }
}

/// Runs the CLI and returns (exit code, stdout, stderr).
pub fn run_cli(data_dir: &Path, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    use std::io::Write;
    let mut cmd = pictor_cmd(data_dir);
    cmd.args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        let mut si = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            si.write_all(text.as_bytes()).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Creates a user with `credits` through the CLI and returns a fresh API key for it.
pub fn cli_user_key(data_dir: &Path, email: &str, credits: u32) -> String {
    let credits = credits.to_string();
    cli_json(
        data_dir,
        &[
            "user",
            "add",
            "--email",
            email,
            "--credits",
            &credits,
            "--json",
        ],
        None,
    );
    cli_json(
        data_dir,
        &["key", "issue", "--email", email, "--json"],
        None,
    )["api_key"]
        .as_str()
        .unwrap()
        .to_string()
}

pub fn cli_json(data_dir: &Path, args: &[&str], stdin: Option<&str>) -> Value {
    let (code, out, err) = run_cli(data_dir, args, stdin);
    assert_eq!(code, 0, "pictor {args:?} failed: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("not JSON: {out}"))
}

/// A minimal browser for driving the pages over HTTP: keeps cookies, does not follow redirects.
pub struct Browser {
    pub http: reqwest::Client,
    pub cookies: std::collections::BTreeMap<String, String>,
}

pub struct Page {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
    pub headers: reqwest::header::HeaderMap,
}

impl Default for Browser {
    fn default() -> Self {
        Self::new()
    }
}

impl Browser {
    pub fn new() -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: Default::default(),
        }
    }

    /// A browser on another machine: its requests come from `ip` (any 127.x.y.z address).
    pub fn from_ip(ip: &str) -> Browser {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .local_address(ip.parse::<std::net::IpAddr>().unwrap())
                .build()
                .unwrap(),
            cookies: Default::default(),
        }
    }

    pub fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn finish(&mut self, r: reqwest::Response) -> Page {
        for v in r.headers().get_all("set-cookie") {
            let s = v.to_str().unwrap();
            let pair = s.split(';').next().unwrap();
            let (k, val) = pair.split_once('=').unwrap();
            if val.is_empty() || s.to_ascii_lowercase().contains("max-age=0") {
                self.cookies.remove(k);
            } else {
                self.cookies.insert(k.to_string(), val.to_string());
            }
        }
        Page {
            status: r.status().as_u16(),
            location: r
                .headers()
                .get("location")
                .map(|v| v.to_str().unwrap().to_string()),
            headers: r.headers().clone(),
            body: r.text().await.unwrap(),
        }
    }

    pub async fn get(&mut self, url: &str) -> Page {
        let r = self
            .http
            .get(url)
            .header("cookie", self.cookie_header())
            .send()
            .await
            .unwrap();
        self.finish(r).await
    }

    pub async fn post(&mut self, url: &str, fields: &[(String, String)]) -> Page {
        let r = self
            .http
            .post(url)
            .header("cookie", self.cookie_header())
            .form(fields)
            .send()
            .await
            .unwrap();
        self.finish(r).await
    }

    /// Submits the first form with `action` on `page` (its hidden fields included), after
    /// applying `changes`.
    pub async fn submit(
        &mut self,
        base: &str,
        page: &Page,
        action: &str,
        changes: &[(&str, &str)],
    ) -> Page {
        let mut fields = form_fields(&page.body, action);
        for (k, v) in changes {
            set_field(&mut fields, k, v);
        }
        self.post(&format!("{base}{action}"), &fields).await
    }

    /// Signs in on `/login`; the answer is a 303 when it worked.
    pub async fn sign_in(&mut self, base: &str, email: &str, password: &str) -> Page {
        let page = self.get(&format!("{base}/login")).await;
        assert_eq!(page.status, 200, "{}", page.body);
        self.submit(
            base,
            &page,
            "/login",
            &[("email", email), ("password", password)],
        )
        .await
    }

    /// Opens `url` (an authorize request, a page that needs a session) and follows it; when it
    /// leads to the sign-in form, signs in as `email` and follows on: the page that ends it (the
    /// consent page, or a redirect to the client).
    pub async fn through_login(
        &mut self,
        base: &str,
        url: &str,
        email: &str,
        password: &str,
    ) -> Page {
        let page = self.get(url).await;
        let page = self.follow(base, page).await;
        if !page.body.contains("action=\"/login\"") {
            return page;
        }
        let mut fields = form_fields(&page.body, "/login");
        set_field(&mut fields, "email", email);
        set_field(&mut fields, "password", password);
        let r = self.post(&format!("{base}/login"), &fields).await;
        assert_eq!(r.status, 303, "login failed: {}", r.body);
        self.follow(base, r).await
    }

    /// Follows same-origin redirects (relative or starting with `base`) until a page or a redirect
    /// elsewhere; returns the last response.
    pub async fn follow(&mut self, base: &str, mut page: Page) -> Page {
        for _ in 0..10 {
            match page.location.clone() {
                Some(loc) if loc.starts_with('/') => page = self.get(&format!("{base}{loc}")).await,
                Some(loc) if loc.starts_with(base) => page = self.get(&loc).await,
                _ => return page,
            }
        }
        page
    }
}

pub fn html_unescape(s: &str) -> String {
    s.replace("&#34;", "\"")
        .replace("&#60;", "<")
        .replace("&#62;", ">")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&#x2f;", "/")
        .replace("&#47;", "/")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
        .replace("&#38;", "&")
}

/// The `name`/`value` pairs of every `<input … name="…" value="…">` in the first form whose
/// action is `action`.
pub fn form_fields(html: &str, action: &str) -> Vec<(String, String)> {
    let start = html
        .find(&format!("action=\"{action}\""))
        .unwrap_or_else(|| panic!("no form {action} in {html}"));
    let form = &html[start
        ..html[start..]
            .find("</form>")
            .map(|e| start + e)
            .unwrap_or(html.len())];
    let mut out = Vec::new();
    for part in form.split("<input").skip(1) {
        let tag = &part[..part.find('>').unwrap_or(part.len())];
        let attr = |name: &str| {
            let key = format!("{name}=\"");
            tag.find(&key).map(|i| {
                let rest = &tag[i + key.len()..];
                html_unescape(&rest[..rest.find('"').unwrap()])
            })
        };
        // As a browser: an unticked box sends nothing.
        let unticked = matches!(attr("type").as_deref(), Some("checkbox" | "radio"))
            && !tag.contains(" checked");
        if let (Some(n), Some(v)) = (attr("name"), attr("value"))
            && !unticked
        {
            out.push((n, v));
        }
    }
    out
}

pub fn set_field(fields: &mut Vec<(String, String)>, name: &str, value: &str) {
    fields.retain(|(k, _)| k != name);
    fields.push((name.to_string(), value.to_string()));
}

/// Query parameters of a URL.
pub fn query_of(url: &str) -> std::collections::HashMap<String, String> {
    let q = url.split_once('?').map(|(_, q)| q).unwrap_or_default();
    serde_urlencoded::from_str::<Vec<(String, String)>>(q)
        .unwrap()
        .into_iter()
        .collect()
}

/// Solves the page's proof-of-work bot check the way `/static/pow.js` does (a script could do
/// no less): finds `n` with SHA-256(challenge ":" n) starting with `bits` zero bits, fills
/// `pow_nonce`, and returns how many hashes it took. `None` when the form has no challenge.
pub fn solve_bot_check(html: &str, fields: &mut Vec<(String, String)>) -> Option<u64> {
    use sha2::{Digest, Sha256};
    let challenge = fields.iter().find(|(k, _)| k == "pow_challenge")?.1.clone();
    let at = html.find("name=\"pow_challenge\"")?;
    let bits: u32 = html[at..]
        .split("data-bits=\"")
        .nth(1)?
        .split('"')
        .next()?
        .parse()
        .ok()?;
    for n in 0u64.. {
        let digest = Sha256::new()
            .chain_update(challenge.as_bytes())
            .chain_update(b":")
            .chain_update(n.to_string().as_bytes())
            .finalize();
        if pictor::idp::pow::leading_zero_bits(&digest) >= bits {
            set_field(fields, "pow_nonce", &n.to_string());
            return Some(n + 1);
        }
    }
    None
}

impl TestServer {
    /// First-start setup done the CLI way: an administrator exists, so `/register` opens.
    pub fn finish_setup(&self) {
        self.admin(AdminRequest::UserAdd {
            email: "owner@example.com".into(),
            name: Some("Owner".into()),
            password_hash: None,
            admin: true,
            pro: false,
            credits: 0,
        });
    }

    /// A user with a password, for the pages.
    pub fn person(&self, email: &str, password: &str) {
        let hash = pictor::auth::password::hash(password).unwrap();
        self.admin(AdminRequest::UserAdd {
            email: email.into(),
            name: Some("Test Person".into()),
            password_hash: Some(hash),
            admin: false,
            pro: false,
            credits: 5,
        });
    }

    /// Registers an OAuth client and returns (app_name, app_secret).
    pub fn oauth_client(&self, name: &str, redirect_uris: &[&str]) -> (String, String) {
        let v = self.admin(AdminRequest::ClientAdd {
            name: name.into(),
            redirect_uris: redirect_uris.iter().map(|s| s.to_string()).collect(),
            post_logout_redirect_uris: Vec::new(),
            profile: Default::default(),
        });
        (
            v["app_name"].as_str().unwrap().to_string(),
            v["app_secret"].as_str().unwrap().to_string(),
        )
    }

    /// Drives sign-in and consent for an authorize URL; returns the final redirect to the client.
    pub async fn sign_in_and_consent(
        &self,
        browser: &mut Browser,
        authorize_url: &str,
        email: &str,
        password: &str,
    ) -> String {
        sign_in_and_consent(&self.base, browser, authorize_url, email, password).await
    }
}

/// Drives Pictor's sign-in and consent pages at `base` for an authorize URL; returns the final
/// redirect to the client.
pub async fn sign_in_and_consent(
    base: &str,
    browser: &mut Browser,
    authorize_url: &str,
    email: &str,
    password: &str,
) -> String {
    let page = browser
        .through_login(base, authorize_url, email, password)
        .await;
    if page.body.contains("action=\"/oauth/authorize\"") {
        let mut fields = form_fields(&page.body, "/oauth/authorize");
        set_field(&mut fields, "decision", "allow");
        let r = browser
            .post(&format!("{base}/oauth/authorize"), &fields)
            .await;
        assert_eq!(r.status, 303, "{}", r.body);
        return r.location.unwrap();
    }
    page.location
        .unwrap_or_else(|| panic!("no redirect: {} {}", page.status, page.body))
}

/// `{base}/oauth/authorize?` with these query parameters.
pub fn authorize_url(base: &str, params: &[(&str, &str)]) -> String {
    format!(
        "{base}/oauth/authorize?{}",
        serde_urlencoded::to_string(params).unwrap()
    )
}

/// Exchanges an authorization code at `base`'s `/oauth/token` with the client's secret (HTTP
/// Basic); the token response.
pub async fn exchange_code(
    base: &str,
    app: &str,
    secret: &str,
    redirect: &str,
    code: &str,
) -> Value {
    reqwest::Client::new()
        .post(format!("{base}/oauth/token"))
        .basic_auth(app, Some(secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A tmpfs mounted for a test (root only), unmounted on drop.
pub struct Mount(pub std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Mounts a tmpfs of `size` at `at`. Without root: says why and returns `None` (a skip), except
/// under `PICTOR_CI=1`, where it fails.
pub fn mount_tmpfs(at: &Path, size: &str) -> Option<Mount> {
    std::fs::create_dir_all(at).unwrap();
    let ok = std::process::Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size}"),
            "tmpfs",
            at.to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Some(Mount(at.to_path_buf()))
    } else if std::env::var("PICTOR_CI").is_ok_and(|v| v == "1") {
        panic!("PICTOR_CI=1 but a tmpfs cannot be mounted (this test needs root)");
    } else {
        eprintln!("SKIPPED: mounting a tmpfs needs root");
        None
    }
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`), or `None` once the process has
/// gone.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}

/// (VmRSS, VmHWM) of a running process, in KiB.
pub fn memory_kib(pid: u32) -> (u64, u64) {
    (
        status_kib(pid, "VmRSS:").unwrap(),
        status_kib(pid, "VmHWM:").unwrap(),
    )
}

/// Resets the process's peak-RSS mark (Linux: writing 5 to clear_refs).
pub fn reset_peak(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}
