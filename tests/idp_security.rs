//! Sign-in security: CSRF on the sign-in forms, session fixation, throttling and captcha under a
//! brute-force loop, security headers, no secrets in the store file in plain text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;

async fn login(s: &TestServer, b: &mut Browser, email: &str, password: &str) -> Page {
    let page = b.get(&s.url("/login")).await;
    assert_eq!(page.status, 200);
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", email);
    set_field(&mut fields, "password", password);
    b.post(&s.url("/login"), &fields).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_sets_a_fresh_session_and_pages_are_hardened() {
    let s = TestServer::start().await;
    s.person("carol@example.com", "carol's password!");
    let mut b = Browser::new();
    // A session id planted before sign-in is never adopted.
    b.cookies
        .insert("pictor_session".into(), "attacker-chosen-id".into());
    let page = b.get(&s.url("/login")).await;
    for (h, want) in [
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("x-content-type-options", "nosniff"),
    ] {
        assert_eq!(page.headers[h], want);
    }
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("default-src 'self'"));
    let r = login(&s, &mut b, "carol@example.com", "carol's password!").await;
    assert_eq!(r.status, 303, "{}", r.body);
    let set_cookie: Vec<String> = r
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let session_cookie = set_cookie
        .iter()
        .find(|c| c.starts_with("pictor_session="))
        .unwrap();
    assert!(
        session_cookie.contains("HttpOnly") && session_cookie.contains("SameSite=Lax"),
        "{session_cookie}"
    );
    assert!(
        !session_cookie.contains("Secure"),
        "http public URL: no Secure flag"
    );
    let new_id = b.cookies["pictor_session"].clone();
    assert_ne!(new_id, "attacker-chosen-id");
    // Signing in again (re-posting the form while signed in) gives yet another id.
    let page = Browser::new().get(&s.url("/login")).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "csrf", &b.cookies["pictor_csrf"].clone());
    set_field(&mut fields, "email", "carol@example.com");
    set_field(&mut fields, "password", "carol's password!");
    let r = b.post(&s.url("/login"), &fields).await;
    assert_eq!(r.status, 303);
    assert_ne!(b.cookies["pictor_session"], new_id);
    // The raw store file holds no session id, password, captcha or secret in plain text.
    let raw = std::fs::read(s.data_dir().join("pictor.redb")).unwrap();
    for secret in [b.cookies["pictor_session"].as_str(), "carol's password!"] {
        assert!(
            !raw.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "plaintext secret in the store"
        );
    }
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forms_refuse_missing_or_foreign_csrf() {
    let s = TestServer::start().await;
    s.person("dan@example.com", "dan's password!!");
    let mut b = Browser::new();
    let page = b.get(&s.url("/login")).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", "dan@example.com");
    set_field(&mut fields, "password", "dan's password!!");
    // Wrong token.
    let mut bad = fields.clone();
    set_field(&mut bad, "csrf", "forged");
    assert_eq!(b.post(&s.url("/login"), &bad).await.status, 403);
    // No cookie (a cross-site form): refused even with a token.
    let mut stranger = Browser::new();
    assert_eq!(stranger.post(&s.url("/login"), &fields).await.status, 403);
    // Foreign Origin header.
    let r = b
        .http
        .post(s.url("/login"))
        .header("origin", "https://evil.example")
        .header(
            "cookie",
            format!("pictor_csrf={}", b.cookies["pictor_csrf"]),
        )
        .form(&fields)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Register and logout forms too.
    let page = b.get(&s.url("/register")).await;
    let mut reg = form_fields(&page.body, "/register");
    set_field(&mut reg, "csrf", "forged");
    assert_eq!(b.post(&s.url("/register"), &reg).await.status, 403);
    assert_eq!(
        b.post(&s.url("/logout"), &[("csrf".into(), "forged".into())])
            .await
            .status,
        403
    );
    // With the right token it works.
    assert_eq!(b.post(&s.url("/login"), &fields).await.status, 303);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brute_force_is_throttled_and_needs_the_captcha() {
    let s = TestServer::start().await;
    s.person("erin@example.com", "erin's password!");
    let mut b = Browser::new();
    let mut statuses = Vec::new();
    let mut captcha_seen_at = None;
    for i in 0..25 {
        let page = b.get(&s.url("/login")).await;
        let mut fields = form_fields(&page.body, "/login");
        set_field(&mut fields, "email", "erin@example.com");
        set_field(&mut fields, "password", &format!("guess {i}"));
        let r = b.post(&s.url("/login"), &fields).await;
        if captcha_seen_at.is_none() && r.body.contains("name=\"captcha_id\"") {
            captcha_seen_at = Some(i);
        }
        statuses.push(r.status);
    }
    let allowed = statuses.iter().filter(|s| **s != 429).count();
    println!(
        "brute force: {allowed} of 25 attempts in a minute were let through; captcha from attempt {captcha_seen_at:?}"
    );
    assert!(statuses.contains(&429), "never throttled: {statuses:?}");
    assert!(allowed <= 20, "{statuses:?}");
    assert_eq!(captcha_seen_at, Some(2), "captcha after 3 failures");
    // Even the right password is refused while locked.
    let page = b.get(&s.url("/login")).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", "erin@example.com");
    set_field(&mut fields, "password", "erin's password!");
    assert_ne!(b.post(&s.url("/login"), &fields).await.status, 303);
    // After the window the account signs in again (with the captcha answered).
    s.clock.advance(16 * 60 * 1000);
    let page = b.get(&s.url("/login")).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", "erin@example.com");
    set_field(&mut fields, "password", "erin's password!");
    let r = b.post(&s.url("/login"), &fields).await;
    assert_eq!(r.status, 303, "{}", r.body);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_needs_the_captcha() {
    let s = TestServer::start().await;
    let mut b = Browser::new();
    let page = b.get(&s.url("/register")).await;
    assert!(page.body.contains("/captcha/"));
    let mut fields = form_fields(&page.body, "/register");
    let id = fields
        .iter()
        .find(|(k, _)| k == "captcha_id")
        .unwrap()
        .1
        .clone();
    let img = b.get(&s.url(&format!("/captcha/{id}.png"))).await;
    assert_eq!(img.status, 200);
    set_field(&mut fields, "name", "Frank");
    set_field(&mut fields, "email", "frank@example.com");
    set_field(&mut fields, "password", "frank's password");
    set_field(&mut fields, "captcha", "WRONG");
    let r = b.post(&s.url("/register"), &fields).await;
    assert_eq!(r.status, 400);
    assert!(
        s.store()
            .user_by_email("frank@example.com")
            .unwrap()
            .is_none()
    );
    let mut fields = form_fields(&r.body, "/register");
    let id = fields
        .iter()
        .find(|(k, _)| k == "captcha_id")
        .unwrap()
        .1
        .clone();
    let answer = s
        .handle
        .as_ref()
        .unwrap()
        .state
        .idp
        .captchas
        .answer_for_tests(&id)
        .unwrap();
    set_field(&mut fields, "password", "frank's password");
    set_field(&mut fields, "captcha", &answer);
    let r = b.post(&s.url("/register"), &fields).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let user = s
        .store()
        .user_by_email("frank@example.com")
        .unwrap()
        .unwrap();
    assert_eq!(user.name, "Frank");
    assert!(user.password_hash.unwrap().starts_with("$argon2id$"));
    assert!(
        b.cookies.contains_key("pictor_session"),
        "signed in after registering"
    );
    s.stop().await;
}
