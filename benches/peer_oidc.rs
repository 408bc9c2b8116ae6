//! Pictor's identity provider side by side with node-oidc-provider, the certified reference
//! OpenID provider (`cargo bench --bench peer_oidc`; needs Node and npm, and installs
//! `benches/peer/node` from the npm registry on first run).
//!
//! Both servers run as their own processes on this machine with the same client (confidential,
//! `client_secret_basic`, PKCE S256) and a session seeded once the way a browser does it (sign
//! in, consent). The same closed-loop load generator (16 workers, keep-alive) then runs five
//! phases against each: the code flow (authorize with the session cookie → 302 with a code →
//! token exchange with an RS256 id_token), refresh (with rotation), userinfo, discovery and
//! JWKS (these three over one raw keep-alive HTTP/1.1 connection per worker with the request
//! prepared once, so the generator's own CPU does not cap the rate of the cheap documents). Servers alternate phase by phase, three rounds; the figures are medians of the rounds.
//! Server CPU per operation comes from /proc (user + system time of the server process), peak
//! RSS from its VmHWM. Nothing here asserts a time: the numbers go into the README.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/common/mod.rs"]
mod common;
mod util;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{Browser, form_fields, query_of, set_field};
use pictor::idp::crypto::{b64url, random_token, sha256};
use serde_json::Value;

const REDIRECT: &str = "http://127.0.0.1:9/cb";
const WORKERS: usize = 16;
const ROUNDS: usize = 3;
/// No `offline_access`: Pictor issues a refresh token with every code exchange and does not
/// know that scope; node-oidc-provider is configured to do the same (see benches/peer/README.md).
const SCOPE: &str = "openid profile email";

/// One server under test, seeded and ready.
struct Peer {
    name: &'static str,
    child: Child,
    base: String,
    client_id: String,
    secret: String,
    /// The signed-in browser's cookies.
    cookie: String,
    authorize: String,
    token: String,
    userinfo: String,
    jwks: String,
    discovery: String,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Peak resident set of a process, MB.
fn peak_rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits for a line containing `marker` on the child's stdout; returns that line.
fn wait_for_line(child: &mut Child, marker: &str) -> String {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let marker = marker.to_string();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if !sent && line.contains(&marker) {
                let _ = tx.send(line);
                sent = true;
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the server did not start")
}

fn pkce() -> (String, String) {
    let verifier = random_token("v");
    let challenge = b64url(&sha256(&verifier));
    (verifier, challenge)
}

fn authorize_url(p: &Peer, state: &str, challenge: &str, extra: &[(&str, &str)]) -> String {
    let mut params = vec![
        ("response_type", "code"),
        ("client_id", p.client_id.as_str()),
        ("redirect_uri", REDIRECT),
        ("scope", SCOPE),
        ("state", state),
        ("nonce", state),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
    ];
    params.extend_from_slice(extra);
    format!(
        "{}?{}",
        p.authorize,
        serde_urlencoded::to_string(&params).unwrap()
    )
}

impl Peer {
    /// A started server, its endpoints read from its discovery document; not yet signed in.
    async fn new(
        name: &'static str,
        child: Child,
        base: String,
        client_id: String,
        secret: String,
    ) -> Peer {
        let discovery = format!("{base}/.well-known/openid-configuration");
        let doc: Value = reqwest::get(&discovery)
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let get = |k: &str| doc[k].as_str().unwrap_or_else(|| panic!("{k}")).to_string();
        Peer {
            name,
            child,
            base,
            client_id,
            secret,
            cookie: String::new(),
            authorize: get("authorization_endpoint"),
            token: get("token_endpoint"),
            userinfo: get("userinfo_endpoint"),
            jwks: get("jwks_uri"),
            discovery,
        }
    }
}

/// Pictor: the release binary on a fresh data folder, a user and the client made by its CLI,
/// the session from its sign-in form and the consent from its consent form.
async fn start_pictor(data: &Path) -> Peer {
    let cli = |args: &[&str], stdin: Option<&str>| common::cli_json(data, args, stdin);
    cli(
        &[
            "user",
            "add",
            "--email",
            "bench@example.com",
            "--name",
            "Bench Person",
            "--password-stdin",
            "--json",
        ],
        Some("bench password 123\n"),
    );
    let client = cli(
        &[
            "client",
            "add",
            "--name",
            "bench",
            "--redirect-uri",
            REDIRECT,
            "--json",
        ],
        None,
    );
    let mut child = common::pictor_cmd(data)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("PICTOR_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let line = wait_for_line(&mut child, "is running at ");
    let base = line
        .split("is running at ")
        .nth(1)
        .unwrap()
        .trim()
        .to_string();
    let mut p = Peer::new(
        "Pictor",
        child,
        base,
        client["app_name"].as_str().unwrap().to_string(),
        client["app_secret"].as_str().unwrap().to_string(),
    )
    .await;
    let mut browser = Browser::new();
    let (_, challenge) = pkce();
    let back = common::sign_in_and_consent(
        &p.base,
        &mut browser,
        &authorize_url(&p, "seed", &challenge, &[]),
        "bench@example.com",
        "bench password 123",
    )
    .await;
    assert!(query_of(&back).contains_key("code"), "seeding: {back}");
    p.cookie = browser.cookie_header();
    p
}

/// node-oidc-provider 9 (`benches/peer/node/server.mjs`): in-memory adapter, RS256, the same
/// client; the session from its development login and consent pages.
async fn start_node(dir: &Path, client_id: &str, secret: &str) -> Peer {
    let port = free_port();
    let mut child = Command::new("node")
        .arg("server.mjs")
        .current_dir(dir)
        .env("PORT", port.to_string())
        .env("CLIENT_ID", client_id)
        .env("CLIENT_SECRET", secret)
        .env("REDIRECT", REDIRECT)
        .env("NODE_ENV", "production")
        // A plain Map instead of the stock in-memory adapter, which keeps only ~1,000 entries
        // and rescans a session's tokens on every save (it slows as flows pile up on one
        // session): node at its best.
        .env("ADAPTER", "map")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("node");
    wait_for_line(&mut child, "ready ");
    let base = format!("http://127.0.0.1:{port}");
    let mut p = Peer::new(
        "node-oidc-provider",
        child,
        base,
        client_id.into(),
        secret.into(),
    )
    .await;
    let mut browser = Browser::new();
    let (_, challenge) = pkce();
    let mut page = browser
        .get(&authorize_url(&p, "seed", &challenge, &[]))
        .await;
    // Login, then consent: each an interaction page with one form posting back to itself.
    for _ in 0..6 {
        page = browser.follow(&p.base, page).await;
        if page
            .location
            .as_deref()
            .is_some_and(|l| l.starts_with(REDIRECT))
        {
            break;
        }
        let action = page
            .body
            .split("action=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_else(|| panic!("no form: {} {}", page.status, page.body))
            .to_string();
        let mut fields = form_fields(&page.body, &action);
        set_field(&mut fields, "login", "bench@example.com");
        set_field(&mut fields, "password", "bench password 123");
        let url = if action.starts_with('/') {
            format!("{}{action}", p.base)
        } else {
            action
        };
        page = browser.post(&url, &fields).await;
    }
    let back = page.location.unwrap_or_default();
    assert!(
        query_of(&back).contains_key("code"),
        "node seeding ended without a code: {back}"
    );
    p.cookie = browser.cookie_header();
    p
}

/// The outcome of one phase against one server.
#[derive(Clone, Copy, Default)]
struct Run {
    rate: f64,
    p99_ms: f64,
    cpu_ms_per_op: f64,
}

/// Tokens each worker carries from the flow phase into refresh and userinfo.
#[derive(Clone, Default)]
struct Tokens {
    access: String,
    refresh: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Flow,
    Refresh,
    Userinfo,
    Discovery,
    Jwks,
}

impl Phase {
    const ALL: [Phase; 5] = [
        Phase::Flow,
        Phase::Refresh,
        Phase::Userinfo,
        Phase::Discovery,
        Phase::Jwks,
    ];

    fn name(self) -> &'static str {
        match self {
            Phase::Flow => "flow: authorize + token, RS256 id_token",
            Phase::Refresh => "refresh grant (rotation)",
            Phase::Userinfo => "userinfo",
            Phase::Discovery => "discovery",
            Phase::Jwks => "JWKS",
        }
    }
}

/// One authorize (with the session) + token exchange; returns the tokens.
async fn flow(http: &reqwest::Client, p: &Peer, i: usize) -> Tokens {
    let (verifier, challenge) = pkce();
    let state = format!("s{i}");
    let r = http
        .get(authorize_url(p, &state, &challenge, &[]))
        .header("cookie", &p.cookie)
        .send()
        .await
        .unwrap();
    let location = r
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("{}: authorize answered {}", p.name, r.status()));
    let q = query_of(&location);
    let code = q
        .get("code")
        .unwrap_or_else(|| panic!("{}: no code in {location}", p.name));
    assert_eq!(q.get("state"), Some(&state));
    let v: Value = http
        .post(&p.token)
        .basic_auth(&p.client_id, Some(&p.secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("code_verifier", verifier.as_str()),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(v["id_token"].is_string(), "{}: {v}", p.name);
    Tokens {
        access: v["access_token"].as_str().unwrap().to_string(),
        refresh: v["refresh_token"].as_str().unwrap_or_default().to_string(),
    }
}

/// One keep-alive HTTP/1.1 connection that writes a request prepared once and reads the
/// response with the least work (status line, `Content-Length` or chunked framing): for the
/// cheap phases, where a full client (reqwest's pool and redirects, even hyper's connection
/// task) costs the generator more CPU than the faster server spends on the request, and so
/// caps what is measured. Both servers get the same client.
struct Raw {
    stream: tokio::net::TcpStream,
    request: Vec<u8>,
    buf: Vec<u8>,
}

impl Raw {
    /// A connection to `url`'s host that will GET `url` with an optional bearer token.
    async fn connect(base: &str, url: &str, bearer: Option<&str>) -> Raw {
        let host = base.trim_start_matches("http://");
        let path = url.split_once(host).map_or(url, |(_, p)| p);
        let stream = tokio::net::TcpStream::connect(host).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let auth = bearer.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
        let request = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\naccept: */*\r\n{auth}\r\n")
            .into_bytes();
        Raw {
            stream,
            request,
            buf: Vec::with_capacity(16 * 1024),
        }
    }

    /// Sends the request; the status, with the whole body read.
    async fn get(&mut self) -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        self.stream.write_all(&self.request).await.unwrap();
        self.buf.clear();
        loop {
            if let Some(len) = Self::complete(&self.buf) {
                let status = std::str::from_utf8(&self.buf[9..12])
                    .unwrap()
                    .parse()
                    .unwrap();
                assert_eq!(len, self.buf.len(), "one response at a time");
                return status;
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The length of the response in `buf` when it is all there.
    fn complete(buf: &[u8]) -> Option<usize> {
        let head = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let headers = std::str::from_utf8(&buf[..head])
            .unwrap()
            .to_ascii_lowercase();
        if let Some(v) = headers
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
        {
            let len: usize = v.trim().parse().unwrap();
            return (buf.len() >= head + len).then_some(head + len);
        }
        assert!(
            headers.contains("transfer-encoding: chunked"),
            "neither a length nor chunks: {headers}"
        );
        let mut at = head;
        loop {
            let line = buf[at..].windows(2).position(|w| w == b"\r\n")?;
            let size =
                usize::from_str_radix(std::str::from_utf8(&buf[at..at + line]).unwrap().trim(), 16)
                    .unwrap();
            at += line + 2 + size + 2;
            if buf.len() < at {
                return None;
            }
            if size == 0 {
                return Some(at);
            }
        }
    }
}

/// Runs `phase` against `p` from WORKERS workers for `secs` seconds.
async fn run(p: &Arc<Peer>, phase: Phase, secs: f64, carry: &mut [Tokens]) -> Run {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(WORKERS * 2)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = util::cpu_seconds(p.child.id());
    let t0 = Instant::now();
    let results = {
        let mut tasks = Vec::new();
        for (w, tokens) in carry.iter_mut().enumerate() {
            let (http, stop, p) = (http.clone(), stop.clone(), p.clone());
            let mut tokens = std::mem::take(tokens);
            tasks.push(tokio::spawn(async move {
                let mut raw = match phase {
                    Phase::Userinfo => {
                        Some(Raw::connect(&p.base, &p.userinfo, Some(&tokens.access)).await)
                    }
                    Phase::Discovery => Some(Raw::connect(&p.base, &p.discovery, None).await),
                    Phase::Jwks => Some(Raw::connect(&p.base, &p.jwks, None).await),
                    _ => None,
                };
                let mut lat = Vec::new();
                let mut i = w * 1_000_000;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    match phase {
                        Phase::Flow => tokens = flow(&http, &p, i).await,
                        Phase::Refresh => {
                            let v: Value = http
                                .post(&p.token)
                                .basic_auth(&p.client_id, Some(&p.secret))
                                .form(&[
                                    ("grant_type", "refresh_token"),
                                    ("refresh_token", tokens.refresh.as_str()),
                                ])
                                .send()
                                .await
                                .unwrap()
                                .json()
                                .await
                                .unwrap();
                            tokens.refresh = v["refresh_token"]
                                .as_str()
                                .unwrap_or_else(|| panic!("{}: {v}", p.name))
                                .to_string();
                            tokens.access = v["access_token"].as_str().unwrap().to_string();
                        }
                        Phase::Userinfo | Phase::Discovery | Phase::Jwks => {
                            let status = raw.as_mut().unwrap().get().await;
                            assert_eq!(status, 200, "{} {}", p.name, phase.name());
                        }
                    }
                    lat.push(t.elapsed().as_secs_f64() * 1000.0);
                    i += 1;
                }
                (lat, tokens)
            }));
        }
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        stop.store(true, Ordering::Relaxed);
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.unwrap());
        }
        out
    };
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = util::cpu_seconds(p.child.id()) - cpu0;
    let mut all = Vec::new();
    for (slot, (lat, tokens)) in carry.iter_mut().zip(results) {
        all.extend(lat);
        *slot = tokens;
    }
    all.sort_by(f64::total_cmp);
    let n = all.len().max(1);
    Run {
        rate: n as f64 / elapsed,
        p99_ms: all[((n - 1) as f64 * 0.99) as usize],
        cpu_ms_per_op: cpu * 1000.0 / n as f64,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn node_ready(dir: &Path) -> bool {
    if Command::new("node").arg("--version").output().is_err() {
        println!("peer_oidc: skipped (node is not installed)");
        return false;
    }
    if !dir.join("node_modules/oidc-provider").exists() {
        println!("installing node-oidc-provider from npm (benches/peer/node/package-lock.json)");
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!("peer_oidc: skipped (npm ci failed)");
            return false;
        }
    }
    true
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("peer_oidc bench: skipped (run with `cargo bench --bench peer_oidc`)");
        return;
    }
    let node_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/peer/node");
    if !node_ready(&node_dir) {
        return;
    }
    let secs: f64 = std::env::var("PEER_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let pictor = Arc::new(start_pictor(dir.path()).await);
        let node = Arc::new(start_node(&node_dir, &pictor.client_id, &pictor.secret).await);
        println!(
            "machine: {} cores, {}; {WORKERS} workers, {secs} s per phase, {ROUNDS} rounds, servers alternating",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            std::env::consts::ARCH
        );
        let peers = [pictor.clone(), node.clone()];
        let mut carry: Vec<Vec<Tokens>> = vec![vec![Tokens::default(); WORKERS]; 2];
        // runs[phase][peer] = one Run per round
        let mut runs: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); 2]; Phase::ALL.len()];
        // PEER_PHASES=flow,refresh,userinfo,discovery,jwks runs only those (the flow always runs
        // first when refresh or userinfo are asked for: they use its tokens).
        let only = std::env::var("PEER_PHASES").unwrap_or_default();
        let wanted = |phase: Phase| {
            only.is_empty()
                || only.split(',').any(|w| {
                    phase.name().to_lowercase().starts_with(&w.trim().to_lowercase())
                        || (phase == Phase::Flow
                            && (only.contains("refresh") || only.contains("userinfo")))
                })
        };
        for round in 0..ROUNDS {
            for (k, phase) in Phase::ALL.iter().enumerate() {
                if !wanted(*phase) {
                    continue;
                }
                // Alternate which server goes first.
                let order: [usize; 2] = if (round + k) % 2 == 0 { [0, 1] } else { [1, 0] };
                for j in order {
                    let r = run(&peers[j], *phase, secs, &mut carry[j]).await;
                    println!(
                        "round {round} {:<48} {:<20} {:>9.0}/s  p99 {:>6.2} ms  {:.3} CPU-ms/op",
                        phase.name(),
                        peers[j].name,
                        r.rate,
                        r.p99_ms,
                        r.cpu_ms_per_op
                    );
                    runs[k][j].push(r);
                }
            }
        }
        println!();
        println!("| phase | Pictor | node-oidc-provider | ratio |");
        println!("|---|---|---|---|");
        for (k, phase) in Phase::ALL.iter().enumerate() {
            if runs[k][0].is_empty() {
                continue;
            }
            let m = |j: usize, f: fn(&Run) -> f64| median(runs[k][j].iter().map(f).collect());
            let (a, b) = (m(0, |r| r.rate), m(1, |r| r.rate));
            println!(
                "| {} | {a:.0}/s, p99 {:.1} ms, {:.2} CPU-ms | {b:.0}/s, p99 {:.1} ms, {:.2} CPU-ms | **{:.2}×** |",
                phase.name(),
                m(0, |r| r.p99_ms),
                m(0, |r| r.cpu_ms_per_op),
                m(1, |r| r.p99_ms),
                m(1, |r| r.cpu_ms_per_op),
                a / b
            );
        }
        let (ra, rb) = (
            peak_rss_mb(pictor.child.id()),
            peak_rss_mb(node.child.id()),
        );
        println!(
            "| peak RSS | {ra:.0} MB | {rb:.0} MB | {:.2}× |",
            ra / rb.max(1.0)
        );
    });
}
