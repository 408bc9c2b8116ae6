//! Job webhooks against a real receiver (an HTTP server in this test): signed deliveries checked
//! with an independent HMAC, retries after 500s, giving up, secret rotation, cancelled jobs, the
//! SSRF guard, and delivery after a SIGKILL of the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use poem::listener::{Acceptor, Listener};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Hit {
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
    answered: u16,
}

/// A webhook receiver: answers from `script` first, then `default`.
#[derive(Clone)]
struct Receiver {
    url: String,
    hits: Arc<Mutex<Vec<Hit>>>,
    script: Arc<Mutex<VecDeque<u16>>>,
    default: Arc<AtomicU16>,
}

#[poem::handler]
async fn hook(
    req: &poem::Request,
    body: Vec<u8>,
    rx: poem::web::Data<&Receiver>,
) -> poem::Response {
    let answered = rx
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| rx.default.load(Ordering::SeqCst));
    rx.hits.lock().unwrap().push(Hit {
        path: req.uri().to_string(),
        headers: req
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
        body,
        answered,
    });
    poem::Response::builder()
        .status(poem::http::StatusCode::from_u16(answered).unwrap())
        .body("ok")
}

async fn receiver(script: &[u16], default: u16) -> Receiver {
    let acceptor = poem::listener::TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .unwrap();
    let addr = acceptor.local_addr()[0].as_socket_addr().copied().unwrap();
    let rx = Receiver {
        url: format!("http://{addr}"),
        hits: Arc::default(),
        script: Arc::new(Mutex::new(script.iter().copied().collect())),
        default: Arc::new(AtomicU16::new(default)),
    };
    let app = poem::EndpointExt::data(
        poem::Route::new().at("/*path", poem::post(hook)),
        rx.clone(),
    );
    tokio::spawn(poem::Server::new_with_acceptor(acceptor).run(app));
    rx
}

impl Receiver {
    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    async fn wait_hits(&self, n: usize, pred: impl Fn(&Hit) -> bool) -> Vec<Hit> {
        for _ in 0..400 {
            let hits = self.hits();
            if hits.iter().filter(|h| pred(h)).count() >= n {
                return hits;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the receiver got {:?}", self.hits());
    }
}

/// HMAC-SHA256 written out from RFC 2104 (independent of the server's aws-lc HMAC).
fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(msg);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// Checks `Pictor-Signature` as a receiver would; returns how many `v1` values `secret` matches.
fn verify(hit: &Hit, secret: &str) -> usize {
    let header = &hit.headers["pictor-signature"];
    let mut t = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        let (k, v) = part.split_once('=').unwrap();
        match k {
            "t" => t = Some(v.parse::<u64>().unwrap()),
            "v1" => sigs.push(v.to_string()),
            other => panic!("unknown signature part {other}"),
        }
    }
    let t = t.expect("no t=");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(t.abs_diff(now) < 300, "stale timestamp {t}");
    let mut msg = format!("{t}.").into_bytes();
    msg.extend_from_slice(&hit.body);
    let want = hex(&hmac_sha256(secret.as_bytes(), &msg));
    sigs.iter().filter(|s| **s == want).count()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn quick_retries(c: &mut pictor::config::Config) {
    c.webhooks.allow_private = true;
    c.webhooks.retry_base = Duration::from_millis(50);
    c.webhooks.max_attempts = 4;
}

async fn secret(s: &TestServer, key: &str) -> String {
    let (st, v) = s.get(key, "/api/pictor/v1/webhook-secret").await;
    assert_eq!(st, 200, "{v}");
    v["secret"].as_str().unwrap().to_string()
}

async fn wait_webhook(s: &TestServer, key: &str, job: &str, want: &str) -> Value {
    for _ in 0..400 {
        let (_, v) = s.get(key, &format!("/api/pictor/v1/jobs/{job}")).await;
        if v["webhook"]["status"] == want {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the webhook of {job} never became {want}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_delivery_retried_after_500s() {
    let rx = receiver(&[500, 503], 200).await;
    let s = TestServer::start_with(Options {
        tweak: quick_retries,
        ..Options::default()
    })
    .await;
    let (_, key) = s.user("hook@example.com", 20, false);
    let secret = secret(&s, &key).await;
    assert!(
        secret.starts_with("whsec_") && secret.len() == 49,
        "{secret}"
    );
    assert_eq!(secret, self::secret(&s, &key).await, "the secret is stable");
    // The secret is stored encrypted, not in the clear.
    let user = s
        .store()
        .user_by_email("hook@example.com")
        .unwrap()
        .unwrap();
    assert!(
        !user
            .webhook_secret_enc
            .as_deref()
            .unwrap()
            .contains(&secret[6..])
    );

    let url = format!("{}/hooks/pictor?token=abc", rx.url);
    let (st, c) = s
        .generate(&key, json!({"prompt": "a red kite", "webhook_url": url}))
        .await;
    assert_eq!(st, 202, "{c}");
    let id = c["job_id"].as_str().unwrap();
    let done = s.finish(&key, id).await;
    assert_eq!(done["status"], "done");
    assert_eq!(done["webhook"]["url"], url);

    let v = wait_webhook(&s, &key, id, "delivered").await;
    assert_eq!(v["webhook"]["attempts"], 3, "{v}");
    assert_eq!(v["webhook"]["last_error"], "HTTP 503", "{v}");
    assert!(v["webhook"]["delivered_at"].as_u64().is_some());
    let hits = rx.hits();
    assert_eq!(hits.len(), 3, "{hits:?}");
    assert_eq!(
        hits.iter().map(|h| h.answered).collect::<Vec<_>>(),
        [500, 503, 200]
    );
    for (n, hit) in hits.iter().enumerate() {
        assert_eq!(hit.path, "/hooks/pictor?token=abc");
        assert_eq!(
            hit.headers["pictor-webhook-id"], id,
            "same id on every attempt"
        );
        assert_eq!(hit.headers["pictor-delivery-attempt"], (n + 1).to_string());
        assert_eq!(hit.headers["pictor-event"], "job.finished");
        assert_eq!(hit.headers["content-type"], "application/json");
        assert_eq!(verify(hit, &secret), 1, "signature of attempt {}", n + 1);
        assert_eq!(verify(hit, "whsec_wrong"), 0);
        let body: Value = serde_json::from_slice(&hit.body).unwrap();
        assert_eq!(body["job_id"], id);
        assert_eq!(body["status"], "done");
        assert_eq!(body["ok"], true);
        assert!(body["photo_url"].as_str().unwrap().ends_with(".png"));
        assert!(body.get("webhook").is_none(), "{body}");
        assert_eq!(body["cost"], done["cost"]);
    }
    // A body changed in transit no longer verifies.
    let mut forged = hits[2].clone();
    forged.body = forged.body.replace_first(b"done", b"fail");
    assert_eq!(verify(&forged, &secret), 0);
    assert_eq!(s.store().webhooks_pending().unwrap(), 0);
    let metrics = s.handle.as_ref().unwrap().state.metrics.encode();
    assert!(
        metrics.contains("pictor_webhook_attempts_total{result=\"retry\"} 2"),
        "{metrics}"
    );
    s.assert_books_balanced();
    s.stop().await;
}

trait ReplaceFirst {
    fn replace_first(self, from: &[u8], to: &[u8]) -> Vec<u8>;
}

impl ReplaceFirst for Vec<u8> {
    fn replace_first(mut self, from: &[u8], to: &[u8]) -> Vec<u8> {
        let at = self
            .windows(from.len())
            .position(|w| w == from)
            .expect("pattern");
        self.splice(at..at + from.len(), to.iter().copied());
        self
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gives_up_after_the_last_attempt() {
    let rx = receiver(&[], 500).await;
    let s = TestServer::start_with(Options {
        tweak: quick_retries,
        ..Options::default()
    })
    .await;
    let (_, key) = s.user("down@example.com", 20, false);
    let (st, c) = s
        .generate(&key, json!({"prompt": "a boat", "webhook_url": rx.url}))
        .await;
    assert_eq!(st, 202);
    let id = c["job_id"].as_str().unwrap();
    let v = wait_webhook(&s, &key, id, "failed").await;
    assert_eq!(v["webhook"]["attempts"], 4, "max_attempts = 4: {v}");
    assert_eq!(v["webhook"]["last_error"], "HTTP 500");
    assert!(v["webhook"].get("next_attempt_at").is_none());
    assert_eq!(rx.hits().len(), 4);
    assert_eq!(s.store().webhooks_pending().unwrap(), 0);
    // The job itself is unaffected.
    assert_eq!(v["status"], "done");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_is_announced_once() {
    let rx = receiver(&[], 200).await;
    let gate = Gate::default();
    let s = TestServer::start_with(Options {
        renderer: Arc::new(gate.clone()),
        tweak: quick_retries,
        ..Options::default()
    })
    .await;
    let (_, key) = s.user("cancel@example.com", 20, false);
    let secret = secret(&s, &key).await;
    let (_, c) = s
        .generate(&key, json!({"prompt": "slow", "webhook_url": rx.url}))
        .await;
    let id = c["job_id"].as_str().unwrap().to_string();
    // Running (charged), then cancelled: announced once, as failed/cancelled.
    for _ in 0..200 {
        if s.get(&key, &format!("/api/pictor/v1/jobs/{id}")).await.1["status"] == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = s
        .client
        .post(s.url(&format!("/api/pictor/v1/jobs/{id}/cancel")))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let hits = rx.wait_hits(1, |_| true).await;
    let body: Value = serde_json::from_slice(&hits[0].body).unwrap();
    assert_eq!(body["status"], "failed");
    assert_eq!(body["error_code"], "cancelled");
    assert_eq!(verify(&hits[0], &secret), 1);
    // The render then stops; its end does not announce the job a second time.
    gate.open();
    wait_webhook(&s, &key, &id, "delivered").await;
    for _ in 0..100 {
        if s.me(&key).await["active_job"].is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(rx.hits().len(), 1, "{:?}", rx.hits());

    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_signs_with_both_secrets_for_a_day() {
    let rx = receiver(&[], 200).await;
    let s = TestServer::start_with(Options {
        tweak: quick_retries,
        ..Options::default()
    })
    .await;
    let (_, key) = s.user("rotate@example.com", 20, false);
    let old = secret(&s, &key).await;
    let r = s
        .client
        .post(s.url("/api/pictor/v1/webhook-secret/rotate"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let (st, v) = status_json(r).await;
    assert_eq!(st, 200, "{v}");
    let new = v["secret"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    let until = v["previous_valid_until"].as_u64().unwrap();
    let now = s.clock.now();
    assert!(until > now + 23 * 3_600_000 && until <= now + 24 * 3_600_000 + 1000);
    assert_eq!(secret(&s, &key).await, new);

    let (_, c) = s
        .generate(&key, json!({"prompt": "a kite", "webhook_url": rx.url}))
        .await;
    let id = c["job_id"].as_str().unwrap();
    wait_webhook(&s, &key, id, "delivered").await;
    let hit = &rx.hits()[0];
    assert_eq!(hit.headers["pictor-signature"].matches("v1=").count(), 2);
    assert_eq!(verify(hit, &new), 1);
    assert_eq!(verify(hit, &old), 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_urls_are_refused_and_change_nothing() {
    let s = TestServer::start().await;
    let (_, key) = s.user("ssrf@example.com", 20, false);
    let long = format!("https://example.com/{}", "a".repeat(2100));
    for url in [
        json!("http://127.0.0.1:9/hook"),
        json!("http://localhost:8080/"),
        json!("http://10.0.0.7/"),
        json!("http://192.168.1.10/"),
        json!("http://169.254.169.254/latest/meta-data/"),
        json!("http://[::1]/"),
        json!("http://[::ffff:7f00:1]/"),
        json!("http://2130706433/"),
        json!("http://intranet/"),
        json!("ftp://example.com/"),
        json!("file:///etc/passwd"),
        json!("https://user:pass@example.com/"),
        json!("not a url"),
        json!(""),
        json!(42),
        json!({"url": "https://example.com"}),
        json!(long),
    ] {
        let got = s
            .generate(&key, json!({"prompt": "a cat", "webhook_url": url}))
            .await;
        assert_error(&got, 400, "invalid_request");
    }
    // An edit with an unsafe URL is refused before its upload is stored.
    let form = reqwest::multipart::Form::new()
        .text("prompt", "make it blue")
        .text("webhook_url", "http://127.0.0.1/x")
        .part(
            "image",
            reqwest::multipart::Part::bytes(png_bytes(64, 64))
                .file_name("a.png")
                .mime_str("image/png")
                .unwrap(),
        );
    let r = s
        .client
        .post(s.url("/api/pictor/v1/edit"))
        .bearer_auth(&key)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_request");

    let me = s.me(&key).await;
    assert_eq!(me["balance"], 20);
    assert!(me["active_job"].is_null());
    let (_, list) = s.get(&key, "/api/pictor/v1/jobs").await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 0, "{list}");
    assert_eq!(
        std::fs::read_dir(s.data_dir().join("sources"))
            .map(|d| d.count())
            .unwrap_or(0),
        0
    );
    // A public URL is accepted (the delivery itself is tried later).
    let (st, c) = s
        .generate(
            &key,
            json!({"prompt": "a cat", "webhook_url": "https://hooks.example.com/p?x=1"}),
        )
        .await;
    assert_eq!(st, 202, "{c}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivered_after_sigkill_and_restart() {
    let rx = receiver(&[], 500).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = cli_user_key(d, "k@example.com", 20);
    let env = [
        ("PICTOR_WEBHOOKS_ALLOW_PRIVATE", "true"),
        ("PICTOR_WEBHOOKS_RETRY_MS", "300"),
        ("PICTOR_WEBHOOKS_MAX_ATTEMPTS", "100"),
    ];
    let client = reqwest::Client::new();
    let server = spawn_server(d, &env);
    let r = client
        .get(format!("{}/api/pictor/v1/webhook-secret", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let secret = status_json(r).await.1["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let (st, c) = server
        .generate(
            &key,
            json!({"prompt": "a lighthouse", "webhook_url": format!("{}/k", rx.url)}),
        )
        .await;
    assert_eq!(st, 202, "{c}");
    let id = c["job_id"].as_str().unwrap().to_string();
    // The receiver is down (500s): Pictor is retrying when it is killed.
    rx.wait_hits(2, |h| h.answered == 500).await;
    server.kill9();
    rx.default.store(200, Ordering::SeqCst);
    let failed_before = rx.hits().len();

    let server = spawn_server(d, &env);
    let hits = rx.wait_hits(1, |h| h.answered == 200).await;
    let ok = hits.iter().find(|h| h.answered == 200).unwrap();
    assert_eq!(ok.headers["pictor-webhook-id"], id);
    assert_eq!(verify(ok, &secret), 1, "the secret survives the restart");
    // Attempts recorded before the kill count on (the last one may have been sent but not
    // recorded when the process died: it is made again under the same number).
    let n: usize = ok.headers["pictor-delivery-attempt"].parse().unwrap();
    assert!(
        n >= 2 && n + 1 >= failed_before,
        "attempt {n} after {failed_before} hits"
    );
    let body: Value = serde_json::from_slice(&ok.body).unwrap();
    assert_eq!(body["status"], "done");
    // Recorded as delivered, and not sent again.
    let mut view = Value::Null;
    for _ in 0..100 {
        let r = client
            .get(format!("{}/api/pictor/v1/jobs/{id}", server.base))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        view = status_json(r).await.1;
        if view["webhook"]["status"] == "delivered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(view["webhook"]["status"], "delivered", "{view}");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        rx.hits().iter().filter(|h| h.answered == 200).count(),
        1,
        "delivered once"
    );
    drop(server);
}
