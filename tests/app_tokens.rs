//! Apps that make pictures for their users: an app's OAuth access token on the image API, with
//! the scopes `images:read` and `images:generate` (never granted by default), 403
//! `insufficient_scope` with RFC 6750's challenge, jobs attributed to the app, and everything an
//! app must not do (another user's jobs, the webhook secret, a revoked token).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use serde_json::Value;

const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// Signs `email` in to `app` with `scope` (None: the default) and returns the token response.
async fn token_for(
    s: &TestServer,
    app: &str,
    secret: &str,
    email: &str,
    password: &str,
    scope: Option<&str>,
) -> Value {
    let mut params = vec![
        ("response_type", "code"),
        ("client_id", app),
        ("redirect_uri", REDIRECT),
        ("state", "st"),
    ];
    if let Some(scope) = scope {
        params.push(("scope", scope));
    }
    let url = format!(
        "{}/oauth/authorize?{}",
        s.base,
        serde_urlencoded::to_string(&params).unwrap()
    );
    let mut browser = Browser::new();
    let back = s
        .sign_in_and_consent(&mut browser, &url, email, password)
        .await;
    let code = query_of(&back)["code"].clone();
    reqwest::Client::new()
        .post(s.url("/oauth/token"))
        .basic_auth(app, Some(secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A request with a bearer token: (status, body, WWW-Authenticate).
async fn call(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value, String) {
    let mut req = reqwest::Client::new()
        .request(method, s.url(path))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.unwrap();
    let challenge = r
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let (status, v) = status_json(r).await;
    (status, v, challenge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_read_and_generate_only_with_the_scopes_the_user_gave() {
    let s = TestServer::start().await;
    s.finish_setup();
    s.person("bob@example.com", "bob's long password");
    s.person("eve@example.com", "eve's long password");
    let (app, secret) = s.oauth_client("painter-app", &[REDIRECT]);
    let bob_key = s.admin(pictor::ops::AdminRequest::KeyIssue {
        email: "bob@example.com".into(),
    })["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let balance0 = s.me(&bob_key).await["balance"].as_i64().unwrap();
    use reqwest::Method;

    // 1. No scope asked: sign-in scopes only, and the image API refuses with the scope needed.
    let t = token_for(
        &s,
        &app,
        &secret,
        "bob@example.com",
        "bob's long password",
        None,
    )
    .await;
    assert_eq!(t["scope"], "openid profile email", "{t}");
    let plain = t["access_token"].as_str().unwrap().to_string();
    let (st, v, ch) = call(&s, Method::GET, "/api/pictor/v1/me", &plain, None).await;
    assert_eq!(
        (st, v["error_code"].as_str()),
        (403, Some("insufficient_scope"))
    );
    assert!(
        ch.contains("error=\"insufficient_scope\"") && ch.contains("scope=\"images:read\""),
        "{ch}"
    );
    let (st, v, ch) = call(
        &s,
        Method::POST,
        "/api/pictor/v1/generate",
        &plain,
        Some(serde_json::json!({"prompt": "a red boat"})),
    )
    .await;
    assert_eq!(
        (st, v["error_code"].as_str()),
        (403, Some("insufficient_scope"))
    );
    assert!(ch.contains("scope=\"images:generate\""), "{ch}");
    assert_eq!(s.me(&bob_key).await["balance"].as_i64().unwrap(), balance0);

    // 2. Read only: the profile and jobs, but no new job.
    let t = token_for(
        &s,
        &app,
        &secret,
        "bob@example.com",
        "bob's long password",
        Some("openid images:read"),
    )
    .await;
    let reader = t["access_token"].as_str().unwrap().to_string();
    let (st, me, _) = call(&s, Method::GET, "/api/pictor/v1/me", &reader, None).await;
    assert_eq!(st, 200, "{me}");
    assert_eq!(me["balance"].as_i64().unwrap(), balance0);
    let (st, _, _) = call(&s, Method::GET, "/api/pictor/v1/jobs", &reader, None).await;
    assert_eq!(st, 200);
    let (st, v, _) = call(
        &s,
        Method::POST,
        "/api/pictor/v1/generate",
        &reader,
        Some(serde_json::json!({"prompt": "a red boat"})),
    )
    .await;
    assert_eq!(
        (st, v["error_code"].as_str()),
        (403, Some("insufficient_scope"))
    );

    // 3. Both scopes, asked for by name; the consent page says what they mean.
    let mut browser = Browser::new();
    let url = format!(
        "{}/oauth/authorize?{}",
        s.base,
        serde_urlencoded::to_string([
            ("response_type", "code"),
            ("client_id", app.as_str()),
            ("redirect_uri", REDIRECT),
            ("state", "st"),
            ("scope", "openid images:read images:generate"),
            ("prompt", "consent"),
        ])
        .unwrap()
    );
    let page = browser.get(&url).await;
    let page = browser.follow(&s.base, page).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", "bob@example.com");
    set_field(&mut fields, "password", "bob's long password");
    let r = browser.post(&s.url("/login"), &fields).await;
    let consent = browser.follow(&s.base, r).await;
    assert!(
        consent
            .body
            .contains("Make pictures for you, paid with your credits")
            && consent.body.contains("See your credit balance"),
        "{}",
        consent.body
    );
    let t = token_for(
        &s,
        &app,
        &secret,
        "bob@example.com",
        "bob's long password",
        Some("openid images:read images:generate"),
    )
    .await;
    assert_eq!(t["scope"], "openid images:read images:generate");
    let painter = t["access_token"].as_str().unwrap().to_string();
    let (st, created, _) = call(
        &s,
        Method::POST,
        "/api/pictor/v1/generate",
        &painter,
        Some(serde_json::json!({"prompt": "a red boat on a lake"})),
    )
    .await;
    assert_eq!(st, 202, "{created}");
    let job_id = created["job_id"].as_str().unwrap().to_string();
    let done = s.finish(&painter, &job_id).await;
    assert_eq!(done["status"], "done", "{done}");
    assert_eq!(done["client"], "painter-app", "attributed to the app");
    let cost = done["cost"].as_i64().unwrap();
    assert_eq!(
        s.me(&bob_key).await["balance"].as_i64().unwrap(),
        balance0 - cost,
        "paid with Bob's credits"
    );
    // The same job read with Bob's own key shows who made it; his own jobs carry no client.
    let (st, v) = s
        .get(&bob_key, &format!("/api/pictor/v1/jobs/{job_id}"))
        .await;
    assert_eq!((st, v["client"].as_str()), (200, Some("painter-app")));
    let (st, own) = s
        .generate(&bob_key, serde_json::json!({"prompt": "a cat"}))
        .await;
    assert_eq!(st, 202);
    let own = s.finish(&bob_key, own["job_id"].as_str().unwrap()).await;
    assert!(
        own.get("client").is_none() || own["client"].is_null(),
        "{own}"
    );
    // The reader can see the app's job too (the user's jobs).
    let (st, _, _) = call(
        &s,
        Method::GET,
        &format!("/api/pictor/v1/jobs/{job_id}"),
        &reader,
        None,
    )
    .await;
    assert_eq!(st, 200);

    // 4. The webhook secret is for the user's own key only.
    let (st, v, _) = call(
        &s,
        Method::GET,
        "/api/pictor/v1/webhook-secret",
        &painter,
        None,
    )
    .await;
    assert_eq!(
        (st, v["error_code"].as_str()),
        (403, Some("insufficient_scope"))
    );
    let (st, _) = s.get(&bob_key, "/api/pictor/v1/webhook-secret").await;
    assert_eq!(st, 200);

    // 5. Another user's token (same app) cannot read Bob's job.
    let t = token_for(
        &s,
        &app,
        &secret,
        "eve@example.com",
        "eve's long password",
        Some("images:read images:generate"),
    )
    .await;
    let eve = t["access_token"].as_str().unwrap().to_string();
    let (st, v, _) = call(
        &s,
        Method::GET,
        &format!("/api/pictor/v1/jobs/{job_id}"),
        &eve,
        None,
    )
    .await;
    assert_eq!((st, v["error_code"].as_str()), (404, Some("job_not_found")));

    // 6. Unknown and revoked tokens: 401 with `invalid_token`.
    let (st, v, ch) = call(&s, Method::GET, "/api/pictor/v1/me", "not-a-token", None).await;
    assert_eq!((st, v["error_code"].as_str()), (401, Some("unauthorized")));
    assert!(ch.contains("error=\"invalid_token\""), "{ch}");
    let r = reqwest::Client::new()
        .post(s.url("/oauth/revoke"))
        .basic_auth(&app, Some(&secret))
        .form(&[("token", painter.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (st, _, ch) = call(&s, Method::GET, "/api/pictor/v1/me", &painter, None).await;
    assert_eq!(st, 401);
    assert!(ch.contains("invalid_token"));
    // No credential at all: the challenge without an error (RFC 6750 §3.1).
    let r = reqwest::get(s.url("/api/pictor/v1/me")).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer realm=\"pictor\"");

    // 7. Banning a user revokes the tokens of their apps.
    s.admin(pictor::ops::AdminRequest::UserUpdate {
        email: "eve@example.com".into(),
        pro: None,
        banned: Some(true),
        daily_limit: None,
        admin: None,
        approve: false,
    });
    let (st, v, _) = call(&s, Method::GET, "/api/pictor/v1/me", &eve, None).await;
    assert!(
        st == 401 || (st, v["error_code"].as_str()) == (403, Some("banned")),
        "{st} {v}"
    );
    s.assert_books_balanced();
    s.stop().await;
}

/// The OpenAPI document publishes the app scheme with its scopes, on the operations apps may
/// use and not on the webhook secret.
#[test]
fn the_document_publishes_the_app_scheme() {
    let doc: Value =
        serde_json::from_str(&pictor::api::spec("http://127.0.0.1:8080", true)).unwrap();
    let scheme = &doc["components"]["securitySchemes"]["AppToken"];
    assert_eq!(scheme["type"], "oauth2", "{scheme}");
    let flow = &scheme["flows"]["authorizationCode"];
    assert_eq!(flow["authorizationUrl"], "/oauth/authorize");
    assert_eq!(flow["tokenUrl"], "/oauth/token");
    assert!(
        flow["scopes"]["images:read"].is_string() && flow["scopes"]["images:generate"].is_string()
    );
    let uses_app = |path: &str, method: &str| {
        doc["paths"][path][method]["security"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.get("AppToken").is_some())
    };
    for (path, method) in [
        ("/v1/generate", "post"),
        ("/v1/edit", "post"),
        ("/v1/edit/raw", "post"),
        ("/v1/me", "get"),
        ("/v1/jobs", "get"),
        ("/v1/jobs/{job_id}", "get"),
        ("/v1/jobs/{job_id}/cancel", "post"),
    ] {
        assert!(uses_app(path, method), "{method} {path}");
        let text = doc["paths"][path][method]["description"].as_str().unwrap();
        assert!(text.contains("`images:"), "{method} {path} names its scope");
    }
    assert!(!uses_app("/v1/webhook-secret", "get"));
    assert!(!uses_app("/v1/webhook-secret/rotate", "post"));
}
