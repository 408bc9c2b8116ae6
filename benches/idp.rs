//! Identity-provider benchmarks (`cargo bench --bench idp`): code exchanges/s and refresh
//! grants/s at the token endpoint, userinfo req/s, and GET /api/pictor/v1/me latency while 20
//! sign-ins per second run (argon2 must not stall other requests). In-process server, real HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pictor::app::Server;
use pictor::clock::Clock;
use pictor::config::Config;
use pictor::idp::crypto::{random_token, sha256};
use pictor::ops::{self, AdminRequest};
use pictor::render::ProceduralRenderer;
use pictor::store::oauth::{CODE_TTL_MS, CodeRecord};
use serde_json::Value;

const REDIRECT: &str = "http://127.0.0.1:9/cb";

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Runs `f` from `conc` tasks until `n` calls are done; returns calls per second.
async fn rate<F, Fut>(n: usize, conc: usize, f: F) -> f64
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let next = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conc {
        let (f, next) = (f.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                if i >= n {
                    break;
                }
                f(i).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

async fn me_latencies(client: &reqwest::Client, url: &str, key: &str, secs: u64) -> Vec<f64> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (client, url, key, stop) = (
            client.clone(),
            url.to_string(),
            key.to_string(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let r = client.get(&url).bearer_auth(&key).send().await.unwrap();
                assert_eq!(r.status(), 200);
                r.bytes().await.unwrap();
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            lat
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_by(f64::total_cmp);
    all
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("idp bench: skipped (run with `cargo bench --bench idp`)");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::new(dir.path().to_path_buf());
        config.listen = "127.0.0.1:0".parse().unwrap();
        let clock = Clock::default();
        let h = Server::start(config, Arc::new(ProceduralRenderer), clock.clone()).await.unwrap();
        let store = h.state.store.clone();
        let hash = pictor::auth::password::hash("bench password 123").unwrap();
        let user = ops::execute(&store, &h.state.idp.secrets, AdminRequest::UserAdd { email: "b@example.com".into(), name: None, password_hash: Some(hash), admin: false, pro: false, credits: 10 }, clock.now()).unwrap();
        let user_id = pictor::store::UserId::parse(user["user_id"].as_str().unwrap()).unwrap().0;
        let key = ops::execute(&store, &h.state.idp.secrets, AdminRequest::KeyIssue { email: "b@example.com".into() }, clock.now()).unwrap()["api_key"].as_str().unwrap().to_string();
        let client_v = ops::execute(&store, &h.state.idp.secrets, AdminRequest::ClientAdd { name: "bench".into(), redirect_uris: vec![REDIRECT.into()], post_logout_redirect_uris: Vec::new(), profile: Default::default() }, clock.now()).unwrap();
        let secret = client_v["app_secret"].as_str().unwrap().to_string();
        let http = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
        let base = h.base_url.clone();
        println!("machine: {} cores; {}", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), std::env::consts::ARCH);

        // Code exchanges: codes minted straight into the store, exchanged over HTTP.
        let n = 2000;
        let codes: Vec<String> = (0..n)
            .map(|_| {
                let code = random_token("pc_");
                let now = clock.now();
                store
                    .store_code(sha256(&code), CodeRecord { client: "bench".into(), user_id, redirect_uri: REDIRECT.into(), scope: "openid profile email".into(), nonce: None, challenge: None, auth_time: now, expires_at: now + CODE_TTL_MS * 100, used_at: None, family: None })
                    .unwrap();
                code
            })
            .collect();
        let codes = Arc::new(codes);
        let refresh_tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
        let access_tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
        let exchanges = {
            let (http, base, secret, codes, rts, ats) = (http.clone(), base.clone(), secret.clone(), codes.clone(), refresh_tokens.clone(), access_tokens.clone());
            rate(n, 8, move |i| {
                let (http, base, secret, codes, rts, ats) = (http.clone(), base.clone(), secret.clone(), codes.clone(), rts.clone(), ats.clone());
                async move {
                    let v: Value = http.post(format!("{base}/oauth/token")).basic_auth("bench", Some(&secret)).form(&[("grant_type", "authorization_code"), ("code", codes[i].as_str()), ("redirect_uri", REDIRECT)]).send().await.unwrap().json().await.unwrap();
                    rts.lock().unwrap().push(v["refresh_token"].as_str().expect("token").to_string());
                    ats.lock().unwrap().push(v["access_token"].as_str().unwrap().to_string());
                }
            })
            .await
        };
        println!("code exchanges (with RS256 id_token), 8 concurrent: {exchanges:.0}/s");

        let rts: Arc<Vec<String>> = Arc::new(refresh_tokens.lock().unwrap().clone());
        let refreshes = {
            let (http, base, secret, rts) = (http.clone(), base.clone(), secret.clone(), rts.clone());
            rate(rts.len(), 8, move |i| {
                let (http, base, secret, rts) = (http.clone(), base.clone(), secret.clone(), rts.clone());
                async move {
                    let v: Value = http.post(format!("{base}/oauth/token")).basic_auth("bench", Some(&secret)).form(&[("grant_type", "refresh_token"), ("refresh_token", rts[i].as_str())]).send().await.unwrap().json().await.unwrap();
                    assert!(v["refresh_token"].is_string(), "{v}");
                }
            })
            .await
        };
        println!("refresh grants (rotation + id_token), 8 concurrent: {refreshes:.0}/s");

        // Userinfo with valid access tokens (refresh rotation leaves earlier access tokens valid).
        let ats: Arc<Vec<String>> = Arc::new(access_tokens.lock().unwrap().clone());
        let total = 20_000;
        let userinfo = {
            let (http, base, ats) = (http.clone(), base.clone(), ats.clone());
            rate(total, 64, move |i| {
                let (http, base, ats) = (http.clone(), base.clone(), ats.clone());
                async move {
                    let r = http.get(format!("{base}/oauth/userinfo")).bearer_auth(&ats[i % ats.len()]).send().await.unwrap();
                    assert_eq!(r.status(), 200);
                    r.bytes().await.unwrap();
                }
            })
            .await
        };
        println!("userinfo, 64 concurrent: {userinfo:.0} req/s");

        // GET /me latency alone, then with 20 sign-ins/s (argon2) running beside it.
        let me = format!("{base}/api/pictor/v1/me");
        let quiet = me_latencies(&http, &me, &key, 5).await;
        let stop = Arc::new(AtomicBool::new(false));
        let signed_in = Arc::new(AtomicU64::new(0));
        let signer = {
            let (base, stop, signed_in) = (base.clone(), stop.clone(), signed_in.clone());
            tokio::spawn(async move {
                // Sign-ins come from 100 loopback addresses so the per-IP throttle (20/min) is not what is measured.
                let clients: Vec<reqwest::Client> = (1..=100u8)
                    .map(|i| reqwest::Client::builder().local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 1, i))).redirect(reqwest::redirect::Policy::none()).build().unwrap())
                    .collect();
                let mut tick = tokio::time::interval(Duration::from_millis(50));
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    tick.tick().await;
                    let (c, base, signed_in) = (clients[i % clients.len()].clone(), base.clone(), signed_in.clone());
                    i += 1;
                    tokio::spawn(async move {
                        // The form's CSRF token is bound to this browser's pre-session cookie.
                        let page = c.get(format!("{base}/login")).send().await.unwrap();
                        let cookie = page.headers().get_all("set-cookie").iter().find_map(|v| v.to_str().ok()?.strip_prefix("pictor_csrf=")?.split(';').next().map(str::to_string)).unwrap();
                        let body = page.text().await.unwrap();
                        let csrf = body.split("name=\"csrf\" value=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
                        let r = c.post(format!("{base}/login")).header("cookie", format!("pictor_csrf={cookie}")).form(&[("csrf", csrf.as_str()), ("email", "b@example.com"), ("password", "bench password 123"), ("return_to", "/account")]).send().await.unwrap();
                        if r.status() == 303 {
                            signed_in.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                }
            })
        };
        let t = Instant::now();
        let busy = me_latencies(&http, &me, &key, 8).await;
        stop.store(true, Ordering::Relaxed);
        signer.await.unwrap();
        let rate_in = signed_in.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64();
        println!(
            "GET /me, 16 connections: alone p50 {:.2} ms p99 {:.2} ms; with {rate_in:.1} sign-ins/s: p50 {:.2} ms p99 {:.2} ms",
            percentile(&quiet, 0.5),
            percentile(&quiet, 0.99),
            percentile(&busy, 0.5),
            percentile(&busy, 0.99)
        );
        h.shutdown().await;
    });
}
