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
    let url = authorize_url(&s.base, &params);
    let mut browser = Browser::new();
    let back = s
        .sign_in_and_consent(&mut browser, &url, email, password)
        .await;
    let code = query_of(&back)["code"].clone();
    exchange_code(&s.base, app, secret, REDIRECT, &code).await
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
    let url = authorize_url(
        &s.base,
        &[
            ("response_type", "code"),
            ("client_id", app.as_str()),
            ("redirect_uri", REDIRECT),
            ("state", "st"),
            ("scope", "openid images:read images:generate"),
            ("prompt", "consent"),
        ],
    );
    let consent = browser
        .through_login(&s.base, &url, "bob@example.com", "bob's long password")
        .await;
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

/// Authorizes `app` for Bob with `images:generate` through the consent form, setting the
/// spending limits there; returns the access token (None when the form was refused, with the
/// page's status).
async fn consent_with_caps(
    s: &TestServer,
    browser: &mut Browser,
    app: &str,
    secret: &str,
    caps: &[(&str, &str)],
) -> Result<String, (u16, String)> {
    let url = authorize_url(
        &s.base,
        &[
            ("response_type", "code"),
            ("client_id", app),
            ("redirect_uri", REDIRECT),
            ("state", "st"),
            ("scope", "openid images:read images:generate"),
            ("prompt", "consent"),
        ],
    );
    let page = browser
        .through_login(&s.base, &url, "bob@example.com", "bob's long password")
        .await;
    assert!(page.body.contains("How much may"), "{}", page.body);
    let mut fields = form_fields(&page.body, "/oauth/authorize");
    set_field(&mut fields, "decision", "allow");
    for (k, v) in caps {
        set_field(&mut fields, k, v);
    }
    let r = browser.post(&s.url("/oauth/authorize"), &fields).await;
    if r.status != 303 {
        return Err((r.status, r.body));
    }
    let code = query_of(r.location.as_deref().unwrap())["code"].clone();
    let t: Value = exchange_code(&s.base, app, secret, REDIRECT, &code).await;
    Ok(t["access_token"].as_str().unwrap().to_string())
}

/// One job made by the app, waited for: its final body.
async fn app_job(s: &TestServer, token: &str) -> Value {
    let (st, v, _) = call(
        s,
        reqwest::Method::POST,
        "/api/pictor/v1/generate",
        token,
        Some(serde_json::json!({"prompt": "a small red boat"})),
    )
    .await;
    assert_eq!(st, 202, "{v}");
    s.finish(token, v["job_id"].as_str().unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spending_limits_set_at_consent_are_enforced_in_the_charge() {
    let s = TestServer::start().await;
    s.finish_setup();
    s.person("bob@example.com", "bob's long password");
    s.admin(pictor::ops::AdminRequest::CreditsGrant {
        email: "bob@example.com".into(),
        amount: 100,
    });
    let (app, secret) = s.oauth_client("painter-app", &[REDIRECT]);
    let bob_key = s.admin(pictor::ops::AdminRequest::KeyIssue {
        email: "bob@example.com".into(),
    })["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let mut browser = Browser::new();

    // A limit that is not a number is refused, and nothing is granted.
    let refused = consent_with_caps(&s, &mut browser, &app, &secret, &[("cap_daily", "lots")])
        .await
        .unwrap_err();
    assert_eq!(refused.0, 400);
    assert!(
        refused.1.contains("whole number of credits"),
        "{}",
        refused.1
    );
    let page = browser.get(&s.url("/account")).await;
    assert!(!page.body.contains("painter-app"), "no app was allowed");

    // The consent page proposes the operator's default (10 a day); Bob sets 3 a day.
    let token = consent_with_caps(
        &s,
        &mut browser,
        &app,
        &secret,
        &[("cap_daily", "3"), ("cap_total", "")],
    )
    .await
    .unwrap();
    let price = s.me(&bob_key).await;
    let balance0 = price["balance"].as_i64().unwrap();
    // The fast model costs 1 credit: three jobs, and the fourth is refused at its start.
    let mut spent = 0;
    for _ in 0..3 {
        let job = app_job(&s, &token).await;
        assert_eq!(
            (job["status"].as_str(), job["cost"].as_i64()),
            (Some("done"), Some(1)),
            "{job}"
        );
        spent += 1;
    }
    let job = app_job(&s, &token).await;
    assert_eq!(job["error_code"], "app_limit", "{job}");
    assert!(
        job["error"]
            .as_str()
            .unwrap()
            .contains("daily spending limit")
    );
    assert_eq!(
        s.me(&bob_key).await["balance"].as_i64().unwrap(),
        balance0 - spent,
        "the refused job cost nothing"
    );
    // Bob's own key is not limited by the app's cap.
    let (st, own) = s
        .generate(&bob_key, serde_json::json!({"prompt": "a cat"}))
        .await;
    assert_eq!(st, 202);
    assert_eq!(
        s.finish(&bob_key, own["job_id"].as_str().unwrap()).await["status"],
        "done"
    );

    // The account page shows the spend and the limit; Bob lifts the daily limit and sets an
    // overall one instead.
    let page = browser.get(&s.url("/account")).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(&format!(
            "Spent <strong>{spent}</strong> credits today of 3"
        )),
        "{}",
        page.body
    );
    let mut fields = form_fields(&page.body, "/account/apps/limits");
    set_field(&mut fields, "cap_daily", "");
    set_field(&mut fields, "cap_total", &(spent + 1).to_string());
    let r = browser.post(&s.url("/account/apps/limits"), &fields).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let job = app_job(&s, &token).await;
    assert_eq!(job["status"], "done", "{job}");
    let job = app_job(&s, &token).await;
    assert_eq!(job["error_code"], "app_limit", "{job}");
    assert!(job["error"].as_str().unwrap().contains("in all"));
    // A bad limit on the account page: an error there, nothing changed.
    let page = browser.get(&s.url("/account")).await;
    let mut fields = form_fields(&page.body, "/account/apps/limits");
    set_field(&mut fields, "cap_total", "-5");
    let r = browser.post(&s.url("/account/apps/limits"), &fields).await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("role=\"alert\""));

    // 20 creates at once by the app with no room left under its cap: whichever is accepted (one
    // active job per person) fails `app_limit` at its start, so nothing more is charged.
    let page = browser.get(&s.url("/account")).await;
    let mut fields = form_fields(&page.body, "/account/apps/limits");
    let spent_now: i64 = {
        let v = s.get(&bob_key, "/api/pictor/v1/jobs?limit=100").await.1;
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["client"] == "painter-app" && j["status"] == "done")
            .map(|j| j["cost"].as_i64().unwrap())
            .sum()
    };
    set_field(&mut fields, "cap_total", &spent_now.to_string());
    let r = browser.post(&s.url("/account/apps/limits"), &fields).await;
    assert_eq!(r.status, 303);
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (url, token) = (s.url("/api/pictor/v1/generate"), token.clone());
        tasks.push(tokio::spawn(async move {
            let r = reqwest::Client::new()
                .post(url)
                .bearer_auth(token)
                .json(&serde_json::json!({"prompt": "a dog"}))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        let (st, v) = t.await.unwrap();
        assert!(st == 202 || st == 409, "{st} {v}");
        if st == 202 {
            ids.push(v["job_id"].as_str().unwrap().to_string());
        }
    }
    assert!(!ids.is_empty(), "one of them is accepted");
    for id in ids {
        let job = s.finish(&token, &id).await;
        assert_eq!(job["error_code"], "app_limit", "{job}");
    }
    let v = s.get(&bob_key, "/api/pictor/v1/jobs?limit=100").await.1;
    let charged: i64 = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["client"] == "painter-app" && j["status"] == "done")
        .map(|j| j["cost"].as_i64().unwrap())
        .sum();
    assert_eq!(charged, spent_now, "nothing charged past the cap");

    // The ledger names the app on its charges (and only there); the admin page shows its spend.
    let bob = s.store().user_by_email("bob@example.com").unwrap().unwrap();
    let rows = s.store().ledger(bob.id).unwrap();
    let by_app: i64 = rows
        .iter()
        .filter(|r| r.client.as_deref() == Some("painter-app"))
        .map(|r| -r.delta)
        .sum();
    assert_eq!(
        by_app, charged,
        "the app's ledger rows add up to what it spent"
    );
    assert!(
        rows.iter()
            .any(|r| r.delta < 0 && r.job_id.is_some() && r.client.is_none()),
        "Bob's own job is charged without an app"
    );
    let hash = pictor::auth::password::hash("root's long password").unwrap();
    s.admin(pictor::ops::AdminRequest::UserAdd {
        email: "root@example.com".into(),
        name: None,
        password_hash: Some(hash),
        admin: true,
        pro: false,
        credits: 0,
    });
    let mut root = Browser::new();
    let page = root.get(&s.url("/login")).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", "root@example.com");
    set_field(&mut fields, "password", "root's long password");
    assert_eq!(root.post(&s.url("/login"), &fields).await.status, 303);
    let admin = root.get(&s.url("/admin")).await;
    assert!(
        admin
            .body
            .contains(&format!("Spent {charged} credits today, {charged} in all")),
        "{}",
        admin.body
    );
    s.assert_books_balanced();
    s.stop().await;
}

/// The consent page presents the app by its display name, with its homepage and its logo (the
/// page's policy lets the browser load that one image from the app's origin); bad profiles are
/// refused at registration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consent_page_shows_the_apps_profile() {
    use pictor::ops::AdminRequest;
    use pictor::store::oauth::ClientProfile;
    let s = TestServer::start().await;
    s.finish_setup();
    s.person("bob@example.com", "bob's long password");
    let profile = |name: &str, logo: &str, home: &str| ClientProfile {
        display_name: Some(name.into()),
        logo_uri: Some(logo.into()),
        homepage: Some(home.into()),
    };
    let add = |name: &str, p: ClientProfile| {
        let state = &s.handle.as_ref().unwrap().state;
        pictor::ops::execute(
            &state.store,
            &state.idp.secrets,
            AdminRequest::ClientAdd {
                name: name.into(),
                redirect_uris: vec![REDIRECT.into()],
                post_logout_redirect_uris: Vec::new(),
                profile: p,
            },
            s.clock.now(),
        )
    };
    for (what, p) in [
        (
            "a script logo",
            profile("Painter", "javascript:alert(1)", "https://painter.example/"),
        ),
        (
            "a control character",
            profile(
                "Pain\u{7}ter",
                "https://cdn.painter.example/l.png",
                "https://painter.example/",
            ),
        ),
        (
            "a long name",
            profile(
                &"x".repeat(65),
                "https://cdn.painter.example/l.png",
                "https://painter.example/",
            ),
        ),
        (
            "a homepage with a fragment",
            profile(
                "Painter",
                "https://cdn.painter.example/l.png",
                "https://painter.example/#x",
            ),
        ),
    ] {
        assert!(add("bad-app", p).is_err(), "{what} is refused");
    }
    assert!(s.store().client("bad-app").unwrap().is_none());
    let v = add(
        "painter-app",
        profile(
            "Painter App",
            "https://cdn.painter.example/logo.png",
            "https://painter.example/",
        ),
    )
    .unwrap();
    assert_eq!(v["app_name"], "painter-app");

    let mut browser = Browser::new();
    let url = authorize_url(
        &s.base,
        &[
            ("response_type", "code"),
            ("client_id", "painter-app"),
            ("redirect_uri", REDIRECT),
            ("state", "st"),
            ("scope", "openid images:generate"),
        ],
    );
    let consent = browser
        .through_login(&s.base, &url, "bob@example.com", "bob's long password")
        .await;
    assert_eq!(consent.status, 200);
    let body = &consent.body;
    assert!(
        body.contains("Allow <strong>Painter App</strong>"),
        "{body}"
    );
    assert!(
        body.contains("<code>painter-app</code>"),
        "the app id is shown too"
    );
    assert!(body.contains("href=\"https://painter.example/\""));
    assert!(body.contains("src=\"https://cdn.painter.example/logo.png\""));
    assert!(body.contains("How much may Painter App spend"));
    let csp = consent.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("img-src 'self' data: https://cdn.painter.example;"),
        "{csp}"
    );
    s.stop().await;
}
