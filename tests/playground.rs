//! The web playground over HTTP: the page and its session-authenticated JSON endpoints under
//! `/playground/api/`. They need a session (an API key is not enough), state-changing ones need
//! the page's CSRF token and a same-origin request, and otherwise they are the image API: same
//! validation and error bodies, same prices, credits and daily limit, same jobs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::*;
use pictor::ops::AdminRequest;
use serde_json::{Value, json};

const PASSWORD: &str = "a long enough password";

/// A signed-in browser session plus the page's CSRF token.
struct Session {
    b: Browser,
    base: String,
    csrf: String,
}

/// The `content` of `<meta name="csrf-token" content="…">`.
fn meta_csrf(html: &str) -> String {
    let key = "<meta name=\"csrf-token\" content=\"";
    let start = html.find(key).expect("a csrf-token meta") + key.len();
    let end = html[start..].find('"').unwrap() + start;
    html_unescape(&html[start..end])
}

impl Session {
    /// A person with `credits` who signs in through /login (arriving on the playground) and opens it.
    async fn new(s: &TestServer, email: &str, credits: i64) -> Session {
        s.person(email, PASSWORD);
        // `person` starts with 5 credits.
        if credits != 5 {
            s.admin(AdminRequest::CreditsGrant {
                email: email.into(),
                amount: credits - 5,
            });
        }
        let mut b = Browser::new();
        let page = b.get(&s.url("/playground")).await;
        assert_eq!(
            (page.status, page.location.as_deref()),
            (303, Some("/login?return_to=/playground"))
        );
        let page = b.follow(&s.base, page).await;
        let mut fields = form_fields(&page.body, "/login");
        set_field(&mut fields, "email", email);
        set_field(&mut fields, "password", PASSWORD);
        let r = b.post(&s.url("/login"), &fields).await;
        assert_eq!(
            (r.status, r.location.as_deref()),
            (303, Some("/playground")),
            "sign-in lands on the playground: {}",
            r.body
        );
        let page = b.get(&s.url("/playground")).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let csrf = meta_csrf(&page.body);
        // The token is bound to the session (an HMAC of it), not a copy of a cookie.
        assert_ne!(b.cookies.get("pictor_csrf"), Some(&csrf));
        Session {
            b,
            base: s.base.clone(),
            csrf,
        }
    }

    fn cookie(&self) -> String {
        self.b
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .b
            .http
            .get(format!("{}{path}", self.base))
            .header("cookie", self.cookie())
            .send()
            .await
            .unwrap();
        if r.status() == 200 {
            assert_eq!(r.headers()["cache-control"], "no-store", "{path}");
        }
        status_json(r).await
    }

    /// POST with the session cookie, the CSRF header (when given) and extra headers.
    fn post(
        &self,
        path: &str,
        csrf: Option<&str>,
        headers: &[(&str, &str)],
    ) -> reqwest::RequestBuilder {
        let mut req = self
            .b
            .http
            .post(format!("{}{path}", self.base))
            .header("cookie", self.cookie());
        if let Some(t) = csrf {
            req = req.header("x-csrf-token", t);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req
    }

    async fn generate(&self, body: Value) -> (u16, Value) {
        let r = self
            .post(
                "/playground/api/generate",
                Some(&self.csrf),
                &[("origin", &self.base)],
            )
            .json(&body)
            .send()
            .await
            .unwrap();
        status_json(r).await
    }

    async fn edit(&self, form: reqwest::multipart::Form) -> (u16, Value) {
        let r = self
            .post(
                "/playground/api/edit",
                Some(&self.csrf),
                &[("origin", &self.base)],
            )
            .multipart(form)
            .send()
            .await
            .unwrap();
        status_json(r).await
    }

    async fn me(&self) -> Value {
        let (s, v) = self.get("/playground/api/me").await;
        assert_eq!(s, 200, "{v}");
        v
    }

    /// Long-polls the playground's job endpoint until the job is done or failed.
    async fn finish(&self, job_id: &str) -> Value {
        for _ in 0..60 {
            let (s, v) = self
                .get(&format!("/playground/api/jobs/{job_id}?wait=30"))
                .await;
            assert_eq!(s, 200, "{v}");
            if v["status"] == "done" || v["status"] == "failed" {
                return v;
            }
        }
        panic!("job {job_id} did not finish");
    }
}

fn key_of(s: &TestServer, email: &str) -> String {
    s.admin(AdminRequest::KeyIssue {
        email: email.into(),
    })["api_key"]
        .as_str()
        .unwrap()
        .to_string()
}

fn photo_form(bytes: Vec<u8>, prompt: Option<&str>) -> reqwest::multipart::Form {
    let mut form = reqwest::multipart::Form::new().part(
        "image",
        reqwest::multipart::Part::bytes(bytes)
            .file_name("photo.png")
            .mime_str("image/png")
            .unwrap(),
    );
    if let Some(p) = prompt {
        form = form.text("prompt", p.to_string());
    }
    form
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_needs_a_session_not_an_api_key() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let (_, key) = s.user("robot@example.com", 50, false);
    let anon = Browser::new();
    let r = anon.http.get(s.url("/playground")).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/login?return_to=/playground");
    for path in [
        "/playground/api/me",
        "/playground/api/gallery",
        "/playground/api/jobs/job_0123456789abcdef0123456789abcdef",
    ] {
        let r = anon.http.get(s.url(path)).send().await.unwrap();
        assert_error(&status_json(r).await, 401, "unauthorized");
        // The API key is the API's credential, not the playground's.
        let r = anon
            .http
            .get(s.url(path))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_error(&status_json(r).await, 401, "unauthorized");
    }
    let r = anon
        .http
        .post(s.url("/playground/api/generate"))
        .bearer_auth(&key)
        .json(&json!({"prompt": "a cat"}))
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 401, "unauthorized");
    let r = anon
        .http
        .post(s.url("/playground/api/edit"))
        .multipart(photo_form(png_bytes(8, 8), Some("blur")))
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 401, "unauthorized");
    // And the other way round: the session cookie does not open the image API.
    let p = Session::new(&s, "person@example.com", 5).await;
    let r =
        p.b.http
            .get(s.url("/api/pictor/v1/me"))
            .header("cookie", p.cookie())
            .send()
            .await
            .unwrap();
    assert_error(&status_json(r).await, 401, "unauthorized");
    assert_eq!(s.store().all_jobs().unwrap().len(), 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_prices_balance_and_limits_before_anything_is_sent() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    s.admin(AdminRequest::SettingsSet {
        key: "price.artist".into(),
        value: 7,
    });
    let mut p = Session::new(&s, "viewer@example.com", 12).await;
    // `/` now leads signed-in people to the playground.
    let r = p.b.get(&s.url("/")).await;
    assert_eq!(
        (r.status, r.location.as_deref()),
        (303, Some("/playground"))
    );

    let page = p.b.get(&s.url("/playground")).await;
    let html = &page.body;
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(html.contains("<script src=\"/static/playground.js\" defer></script>"));
    assert_eq!(
        html.matches("<script").count(),
        1,
        "no inline scripts: the CSP would block them"
    );
    assert!(!html.contains("style=\""), "no inline styles");
    assert!(
        html.contains("<a href=\"/playground\" aria-current=\"page\">Playground</a>"),
        "nav link"
    );
    // Current prices (price.artist was changed to 7), display names, every ratio.
    assert!(
        html.contains(">Standard · built-in painter · 1 credit</option>"),
        "{html}"
    );
    assert!(
        html.contains(">PRO · built-in painter · 7 credits</option>"),
        "{html}"
    );
    assert!(
        html.contains(">Premium · built-in painter · 10 credits</option>"),
        "{html}"
    );
    assert!(html.contains("value=\"artist\" data-price=\"7\""), "{html}");
    // Not an administrator: no first-run card (that is for whoever can install a model).
    assert!(!html.contains("id=\"first-run\""), "{html}");
    for ratio in ["1:1", "16:9", "9:16", "3:2", "2:3", "4:3", "3:4", "auto"] {
        assert!(
            html.contains(&format!("<option value=\"{ratio}\">")),
            "ratio {ratio}"
        );
    }
    assert!(html.contains("id=\"pg-balance\">12</strong>"));
    assert!(html.contains("id=\"pg-daily-used\">0</span>"));
    assert!(html.contains("id=\"pg-daily-limit\">25</span>"));
    assert!(html.contains("id=\"edit-price\">2</strong>"));
    assert!(html.contains("id=\"gen-enhance\" name=\"enhance\" checked"));
    assert!(html.contains("maxlength=\"4000\""));
    assert!(
        html.contains("aria-live=\"polite\""),
        "live region for the job"
    );
    for id in [
        "gen-prompt",
        "gen-model",
        "gen-ratio",
        "gen-seed",
        "gen-enhance",
        "edit-file",
        "edit-prompt",
    ] {
        assert!(
            html.contains(&format!("<label for=\"{id}\"")),
            "label for {id}"
        );
    }

    let js = p.b.get(&s.url("/static/playground.js")).await;
    assert_eq!(js.status, 200);
    assert!(
        js.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(js.body.contains("/playground/api/generate"));
    let css = p.b.get(&s.url("/static/pictor.css")).await;
    assert!(css.body.contains(".pg-gallery-list"));
    assert!(css.body.contains("prefers-color-scheme: dark"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_changing_endpoints_need_the_csrf_token_and_our_origin() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let p = Session::new(&s, "csrf@example.com", 20).await;
    let body = json!({"prompt": "a lighthouse"});
    let wrong = "0".repeat(p.csrf.len());
    let evil = "http://evil.example";
    type Case<'a> = (Option<&'a str>, Vec<(&'a str, &'a str)>, &'a str);
    let cases: Vec<Case> = vec![
        (None, vec![], "no token"),
        (Some(""), vec![], "empty token"),
        (Some(wrong.as_str()), vec![], "wrong token"),
        (
            Some(p.csrf.as_str()),
            vec![("origin", evil)],
            "foreign origin",
        ),
        (
            Some(p.csrf.as_str()),
            vec![("origin", "null")],
            "opaque origin",
        ),
        (
            Some(p.csrf.as_str()),
            vec![("sec-fetch-site", "cross-site")],
            "cross-site fetch",
        ),
        (
            Some(p.csrf.as_str()),
            vec![("sec-fetch-site", "same-site")],
            "sibling site",
        ),
    ];
    for (token, headers, what) in &cases {
        let r = p
            .post("/playground/api/generate", *token, headers)
            .json(&body)
            .send()
            .await
            .unwrap();
        let got = status_json(r).await;
        assert_error(&got, 403, "csrf_failed");
        let r = p
            .post("/playground/api/edit", *token, headers)
            .multipart(photo_form(png_bytes(8, 8), Some("blur")))
            .send()
            .await
            .unwrap();
        let got_edit = status_json(r).await;
        assert_error(&got_edit, 403, "csrf_failed");
        eprintln!("refused: {what}");
    }
    // The token of another browser does not fit this browser's cookie.
    let other = Session::new(&s, "other@example.com", 20).await;
    let r = p
        .post("/playground/api/generate", Some(&other.csrf), &[])
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 403, "csrf_failed");
    assert_eq!(
        s.store().all_jobs().unwrap().len(),
        0,
        "nothing was created"
    );
    assert_eq!(p.me().await["balance"], json!(20));

    // With the token (and our own origin, or no Origin at all, or a same-origin fetch) it works.
    let (st, v) = p.generate(body.clone()).await;
    assert_eq!(st, 202, "{v}");
    p.finish(v["job_id"].as_str().unwrap()).await;
    let r = p
        .post(
            "/playground/api/generate",
            Some(&p.csrf),
            &[("sec-fetch-site", "same-origin")],
        )
        .json(&body)
        .send()
        .await
        .unwrap();
    let (st, v) = status_json(r).await;
    assert_eq!(st, 202, "{v}");
    p.finish(v["job_id"].as_str().unwrap()).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_charges_like_the_api_and_the_picture_joins_the_gallery() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let p = Session::new(&s, "maker@example.com", 20).await;
    let key = key_of(&s, "maker@example.com");
    let me = p.me().await;
    assert_eq!(me, s.me(&key).await, "the same profile as GET /v1/me");
    assert_eq!(me["balance"], json!(20));
    assert_eq!(me["daily_used"], json!(0));

    let (st, created) = p
        .generate(json!({"prompt": "a castle at night", "model": "pro", "ratio": "16:9", "seed": 7, "enhance": false}))
        .await;
    assert_eq!(st, 202, "{created}");
    assert_eq!(created["ok"], json!(true));
    assert_eq!(created["status"], json!("queued"));
    assert_eq!(created["cost"], json!(5), "the PRO model's price");
    let id = created["job_id"].as_str().unwrap().to_string();
    assert_eq!(
        created["poll_url"],
        json!(s.url(&format!("/playground/api/jobs/{id}")))
    );
    let done = p.finish(&id).await;
    assert_eq!(done["ok"], json!(true), "{done}");
    assert_eq!(done["status"], json!("done"));
    assert_eq!(done["model"], json!("artist"));
    assert_eq!(
        (done["width"].clone(), done["height"].clone()),
        (json!(1536), json!(864))
    );
    assert_eq!(done["seed"], json!(7));
    assert_eq!(done["balance"], json!(15));
    assert_eq!(done["enhanced_prompt"], Value::Null);
    let img = s.download(done["photo_url"].as_str().unwrap()).await;
    assert_eq!(img.dimensions(), (1536, 864));

    // The very job the image API shows.
    let (st, via_api) = s.get(&key, &format!("/api/pictor/v1/jobs/{id}")).await;
    assert_eq!(st, 200);
    assert_eq!(via_api, done);
    let me = p.me().await;
    assert_eq!(
        (me["balance"].clone(), me["daily_used"].clone()),
        (json!(15), json!(1))
    );

    // The API charges the same for the same request; both jobs are in the gallery, newest first.
    let (st, v) = s
        .generate(
            &key,
            json!({"prompt": "a cat", "model": "artist", "enhance": true}),
        )
        .await;
    assert_eq!((st, v["cost"].clone()), (202, json!(5)));
    let api_job = s.finish(&key, v["job_id"].as_str().unwrap()).await;
    assert_eq!(api_job["balance"], json!(10));
    let (st, gallery) = p.get("/playground/api/gallery").await;
    assert_eq!(st, 200, "{gallery}");
    assert_eq!(gallery["ok"], json!(true));
    let ids: Vec<&str> = gallery["pictures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![api_job["job_id"].as_str().unwrap(), id.as_str()]);
    assert_eq!(gallery["pictures"][1]["photo_url"], done["photo_url"]);
    assert_eq!(gallery["next_before"], Value::Null);
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_the_image_apis_for_the_same_input() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let p = Session::new(&s, "strict@example.com", 3).await;
    let key = key_of(&s, "strict@example.com");
    let long = "x".repeat(4001);
    let bodies = [
        json!({}),
        json!({"prompt": ""}),
        json!({"prompt": "   "}),
        json!({"prompt": long}),
        json!({"prompt": 5}),
        json!({"prompt": "a\u{7}bell"}),
        json!({"prompt": "a cat", "model": "dalle"}),
        json!({"prompt": "a cat", "model": 3}),
        json!({"prompt": "a cat", "ratio": "5:4"}),
        json!({"prompt": "a cat", "enhance": "yes"}),
        json!({"prompt": "a cat", "seed": -5}),
        json!({"prompt": "a cat", "seed": 4294967296u64}),
        json!({"prompt": "a cat", "seed": "7"}),
        json!(["a cat"]),
        // 10 credits with a balance of 3.
        json!({"prompt": "a cat", "model": "premium"}),
    ];
    for body in bodies {
        let got = p.generate(body.clone()).await;
        let want = s.generate(&key, body.clone()).await;
        assert_eq!(got, want, "same answer for {body}");
        assert!(
            got.0 >= 400 && got.1["ok"] == json!(false),
            "{body}: {got:?}"
        );
    }
    // Bodies that are not JSON objects.
    for (ct, raw) in [
        ("application/json", "{not json"),
        ("application/json", ""),
        ("text/plain", "{\"prompt\":\"a cat\"}"),
    ] {
        let r = p
            .post(
                "/playground/api/generate",
                Some(&p.csrf),
                &[("content-type", ct)],
            )
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_error(&status_json(r).await, 400, "invalid_request");
    }
    let r = p
        .post(
            "/playground/api/generate",
            Some(&p.csrf),
            &[("content-type", "application/json")],
        )
        .body(format!("{{\"prompt\":\"{}\"}}", "y".repeat(70_000)))
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_prompt");

    // One active job at a time (the render is held at the gate): 409 job_busy, as in the API.
    let (st, v) = p.generate(json!({"prompt": "a cat"})).await;
    assert_eq!(st, 202, "{v}");
    let id = v["job_id"].as_str().unwrap().to_string();
    let busy = p.generate(json!({"prompt": "a dog"})).await;
    assert_error(&busy, 409, "job_busy");
    assert_eq!(busy, s.generate(&key, json!({"prompt": "a dog"})).await);
    let busy_edit = p.edit(photo_form(png_bytes(16, 16), Some("blur"))).await;
    assert_error(&busy_edit, 409, "job_busy");
    // A short wait on an unfinished job returns it unfinished.
    let (st, v) = p.get(&format!("/playground/api/jobs/{id}?wait=1")).await;
    assert_eq!(st, 200);
    assert!(v["status"] == "queued" || v["status"] == "running", "{v}");
    gate.open();
    p.finish(&id).await;

    // Jobs: unknown, another user's, a bad wait.
    let other = Session::new(&s, "nosy@example.com", 5).await;
    for path in [
        format!("/playground/api/jobs/{id}"),
        "/playground/api/jobs/job_0123456789abcdef0123456789abcdef".to_string(),
        "/playground/api/jobs/nope".to_string(),
    ] {
        assert_error(&other.get(&path).await, 404, "job_not_found");
    }
    for wait in ["0", "91", "abc", "-1"] {
        let got = p
            .get(&format!("/playground/api/jobs/{id}?wait={wait}"))
            .await;
        assert_error(&got, 400, "invalid_request");
        let want = s
            .get(&key, &format!("/api/pictor/v1/jobs/{id}?wait={wait}"))
            .await;
        assert_error(&want, 400, "invalid_request");
    }
    // Gallery parameters.
    for q in ["limit=0", "limit=101", "limit=x", "before=job_nope"] {
        assert_error(
            &p.get(&format!("/playground/api/gallery?{q}")).await,
            400,
            "invalid_request",
        );
    }
    // Unknown routes and methods answer with the same JSON body.
    assert_error(&p.get("/playground/api/nope").await, 404, "not_found");
    assert_error(
        &p.get("/playground/api/generate").await,
        405,
        "method_not_allowed",
    );
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_an_upload_or_a_picture_from_the_gallery() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let p = Session::new(&s, "editor@example.com", 10).await;

    // An uploaded photo.
    let (st, v) = p
        .edit(photo_form(
            png_bytes(64, 48),
            Some("make it black and white"),
        ))
        .await;
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["cost"], json!(2), "the edit price");
    let edited = p.finish(v["job_id"].as_str().unwrap()).await;
    assert_eq!(edited["status"], json!("done"), "{edited}");
    assert_eq!(edited["kind"], json!("edit"));
    assert_eq!(
        (edited["width"].clone(), edited["height"].clone()),
        (json!(64), json!(48))
    );
    assert_eq!(edited["balance"], json!(8));

    // "Edit this": a finished picture of the user, by its job id, no upload.
    let (st, v) = p
        .generate(json!({"prompt": "a lighthouse", "ratio": "1:1"}))
        .await;
    assert_eq!(st, 202, "{v}");
    let source = p.finish(v["job_id"].as_str().unwrap()).await;
    assert_eq!(source["balance"], json!(7));
    let form = reqwest::multipart::Form::new()
        .text("source_job", source["job_id"].as_str().unwrap().to_string())
        .text("prompt", "crop it to 16:9");
    let (st, v) = p.edit(form).await;
    assert_eq!(st, 202, "{v}");
    let edited = p.finish(v["job_id"].as_str().unwrap()).await;
    assert_eq!(edited["status"], json!("done"), "{edited}");
    assert_eq!(
        (edited["width"].clone(), edited["height"].clone()),
        (json!(1024), json!(576))
    );
    assert_eq!(edited["balance"], json!(5));
    let img = s.download(edited["photo_url"].as_str().unwrap()).await;
    assert_eq!(img.dimensions(), (1024, 576));
    // An empty file part (a file input left empty) next to source_job is no upload.
    let form = reqwest::multipart::Form::new()
        .part(
            "image",
            reqwest::multipart::Part::bytes(Vec::new())
                .file_name("")
                .mime_str("application/octet-stream")
                .unwrap(),
        )
        .text("source_job", source["job_id"].as_str().unwrap().to_string())
        .text("prompt", "rotate 90 degrees");
    let (st, v) = p.edit(form).await;
    assert_eq!(st, 202, "{v}");
    let edited = p.finish(v["job_id"].as_str().unwrap()).await;
    assert_eq!(edited["status"], json!("done"), "{edited}");
    assert_eq!(edited["balance"], json!(3));

    // Errors, in the API's shape.
    let other = Session::new(&s, "thief@example.com", 10).await;
    let stolen = reqwest::multipart::Form::new()
        .text("source_job", source["job_id"].as_str().unwrap().to_string())
        .text("prompt", "make it sepia");
    assert_error(&other.edit(stolen).await, 404, "job_not_found");
    let junk = reqwest::multipart::Form::new()
        .text("source_job", "job_zz")
        .text("prompt", "make it sepia");
    assert_error(&p.edit(junk).await, 404, "job_not_found");
    let no_photo = reqwest::multipart::Form::new().text("prompt", "make it sepia");
    assert_error(&p.edit(no_photo).await, 400, "invalid_image");
    assert_error(
        &p.edit(photo_form(png_bytes(8, 8), None)).await,
        400,
        "invalid_prompt",
    );
    assert_error(
        &p.edit(photo_form(b"not a picture".to_vec(), Some("blur")))
            .await,
        400,
        "invalid_image",
    );
    let r = p
        .post("/playground/api/edit", Some(&p.csrf), &[])
        .json(&json!({"prompt": "blur"}))
        .send()
        .await
        .unwrap();
    assert_error(&status_json(r).await, 400, "invalid_image");
    let big = vec![0u8; 20 * 1024 * 1024 + 1];
    assert_error(
        &p.edit(photo_form(big, Some("blur"))).await,
        413,
        "image_too_large",
    );
    // 3 credits left, an edit costs 2: one more works, then 402.
    let (st, v) = p.edit(photo_form(png_bytes(8, 8), Some("blur"))).await;
    assert_eq!(st, 202, "{v}");
    p.finish(v["job_id"].as_str().unwrap()).await;
    assert_error(
        &p.edit(photo_form(png_bytes(8, 8), Some("blur"))).await,
        402,
        "insufficient_credits",
    );
    assert_eq!(p.me().await["balance"], json!(1));
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_render_returns_the_credits() {
    let gate = Gate {
        fail: true,
        ..Gate::default()
    };
    gate.open();
    let s = TestServer::with_renderer(Arc::new(gate)).await;
    let p = Session::new(&s, "unlucky@example.com", 5).await;
    let (st, v) = p
        .generate(json!({"prompt": "a cat", "model": "artist"}))
        .await;
    assert_eq!(st, 202, "{v}");
    let failed = p.finish(v["job_id"].as_str().unwrap()).await;
    assert_eq!(failed["ok"], json!(false));
    assert_eq!(failed["status"], json!("failed"));
    assert_eq!(failed["error_code"], json!("generation_failed"));
    assert!(failed["error"].as_str().unwrap().contains("on purpose"));
    assert_eq!(failed["balance"], json!(5), "credits returned");
    assert_eq!(p.me().await["daily_used"], json!(0), "the daily slot too");
    let (_, gallery) = p.get("/playground/api/gallery").await;
    assert_eq!(
        gallery["pictures"],
        json!([]),
        "no picture, nothing in the gallery"
    );
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gallery_pages_newest_first_and_only_shows_your_pictures() {
    let s = TestServer::with_renderer(Arc::new(open_gate())).await;
    let p = Session::new(&s, "many@example.com", 10).await;
    let q = Session::new(&s, "neighbour@example.com", 10).await;
    let mut made = Vec::new();
    for i in 0..5 {
        let (st, v) = p.generate(json!({"prompt": format!("picture {i}")})).await;
        assert_eq!(st, 202, "{v}");
        made.push(p.finish(v["job_id"].as_str().unwrap()).await["job_id"].clone());
        let (st, v) = q.generate(json!({"prompt": format!("theirs {i}")})).await;
        assert_eq!(st, 202, "{v}");
        q.finish(v["job_id"].as_str().unwrap()).await;
    }
    made.reverse();
    let mut seen = Vec::new();
    let mut path = "/playground/api/gallery?limit=2".to_string();
    let mut pages = 0;
    loop {
        let (st, page) = p.get(&path).await;
        assert_eq!(st, 200, "{page}");
        pages += 1;
        let pics = page["pictures"].as_array().unwrap();
        assert!(pics.len() <= 2);
        for pic in pics {
            assert!(
                pic["prompt"].as_str().unwrap().starts_with("picture "),
                "{pic}"
            );
            assert!(pic["photo_url"].is_string());
            seen.push(pic["job_id"].clone());
        }
        match page["next_before"].as_str() {
            Some(next) => path = format!("/playground/api/gallery?limit=2&before={next}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, made, "newest first, each once");
    let (_, all) = p.get("/playground/api/gallery").await;
    assert_eq!(all["pictures"].as_array().unwrap().len(), 5);
    s.stop().await;
}

/// The playground's cancel is a state change like generate: it needs the CSRF token and our
/// origin; refused, the job goes on; with them, it is cancelled and the credits come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_needs_the_csrf_token_and_our_origin() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(Arc::new(gate.clone())).await;
    let p = Session::new(&s, "cancel@example.com", 20).await;
    let (st, v) = p.generate(json!({"prompt": "a lighthouse"})).await;
    assert_eq!(st, 202, "{v}");
    let id = v["job_id"].as_str().unwrap().to_string();
    let path = format!("/playground/api/jobs/{id}/cancel");
    let wrong = "0".repeat(p.csrf.len());
    type Case<'a> = (Option<&'a str>, &'a [(&'a str, &'a str)]);
    let cases: [Case; 4] = [
        (None, &[]),
        (Some(wrong.as_str()), &[]),
        (Some(p.csrf.as_str()), &[("origin", "http://evil.example")]),
        (Some(p.csrf.as_str()), &[("sec-fetch-site", "cross-site")]),
    ];
    for (token, headers) in cases {
        let r = p.post(&path, token, headers).send().await.unwrap();
        assert_error(&status_json(r).await, 403, "csrf_failed");
        let (_, job) = p.get(&format!("/playground/api/jobs/{id}")).await;
        assert!(
            job["status"] == "queued" || job["status"] == "running",
            "{job}"
        );
    }
    let r = p.post(&path, Some(&p.csrf), &[]).send().await.unwrap();
    let (st, job) = status_json(r).await;
    assert_eq!(st, 200, "{job}");
    assert_eq!(job["error_code"], "cancelled", "{job}");
    gate.open();
    assert_eq!(p.me().await["balance"], json!(20));
    // A cancelled render keeps its user's active slot until it stops: wait for that (the gate
    // is open now) before the audit, which checks that nobody is left with an active job.
    let store = s.store();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while store
        .users()
        .unwrap()
        .iter()
        .any(|u| store.active_job(u.id).unwrap().is_some())
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the render never stopped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    s.assert_books_balanced();
    s.stop().await;
}
