//! Sign-in security: CSRF on the sign-in forms, session fixation, throttling and the bot check
//! under a brute-force loop, security headers, no secrets in the store file in plain text.

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
        ("referrer-policy", "same-origin"),
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
    let page = b.get(&s.url("/login?force=1")).await;
    let mut fields = form_fields(&page.body, "/login");
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
    s.finish_setup();
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

async fn try_login(
    s: &TestServer,
    b: &mut Browser,
    email: &str,
    password: &str,
    solve: bool,
) -> Page {
    let page = b.get(&s.url("/login")).await;
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", email);
    set_field(&mut fields, "password", password);
    let r = b.post(&s.url("/login"), &fields).await;
    if solve && r.status == 400 && r.body.contains("pow_challenge") {
        // The page asks for the bot check: solve it and send the form again.
        let mut fields = form_fields(&r.body, "/login");
        set_field(&mut fields, "password", password);
        solve_bot_check(&r.body, &mut fields).unwrap();
        return b.post(&s.url("/login"), &fields).await;
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brute_force_is_throttled_but_the_owner_still_gets_in() {
    let s = TestServer::start().await;
    let checks = || {
        s.handle
            .as_ref()
            .unwrap()
            .state
            .idp
            .password_checks
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    // A script that does not solve the bot check, from one address: 3 passwords checked, then
    // the challenge and no password is checked any more (not even the right one), then 429 once
    // the address has made its 20 attempts of the minute.
    s.person("dora@example.com", "dora's password!");
    let mut script = Browser::from_ip("127.0.0.10");
    let mut statuses = Vec::new();
    for i in 0..25 {
        let guess = if i == 10 {
            "dora's password!".to_string()
        } else {
            format!("guess {i}")
        };
        let before = checks();
        let r = try_login(&s, &mut script, "dora@example.com", &guess, false).await;
        let checked = checks() - before;
        match i {
            0..3 => assert_eq!((r.status, checked), (401, 1), "guess {i}: {}", r.body),
            3..20 => {
                assert_eq!((r.status, checked), (400, 0), "guess {i}: {}", r.body);
                assert!(r.body.contains("name=\"pow_challenge\""), "guess {i}");
            }
            _ => assert_eq!((r.status, checked), (429, 0), "guess {i}: {}", r.body),
        }
        statuses.push(r.status);
    }
    let count = |st: u16| statuses.iter().filter(|x| **x == st).count();
    println!(
        "brute force without the bot check: 25 rapid guesses → {} passwords checked, {} refused for the bot check, {} × 429",
        count(401),
        count(400),
        count(429)
    );

    // One attacker that solves every challenge (it only costs it the work): a challenge after
    // 3 failures, growing delays after 5, at most 20 attempts a minute.
    s.person("erin@example.com", "erin's password!");
    let mut attacker = Browser::from_ip("127.0.0.11");
    let mut statuses = Vec::new();
    let mut challenge_from = None;
    let before = checks();
    for i in 0..25 {
        let guess = format!("guess {i}");
        let r = try_login(&s, &mut attacker, "erin@example.com", &guess, true).await;
        if challenge_from.is_none() && r.body.contains("name=\"pow_challenge\"") {
            challenge_from = Some(i);
        }
        statuses.push(r.status);
    }
    let checked = statuses.iter().filter(|s| **s == 401).count();
    println!(
        "brute force solving the bot check: {checked} of 25 rapid guesses had their password checked; challenge from attempt {challenge_from:?}"
    );
    assert_eq!(
        checks() - before,
        checked as u64,
        "every checked password answered 401, no other"
    );
    assert!(statuses.contains(&429), "never throttled: {statuses:?}");
    // 5 before the delays start; a 6th when solving a challenge outlasts the first 1 s delay.
    assert!((5..=6).contains(&checked), "{statuses:?}");
    assert_eq!(challenge_from, Some(2), "challenge after 3 failures");
    // Spaced out past each delay, the attacker's delays keep doubling (8 failures: 8 s).
    for i in 0..3 {
        s.clock.advance(61_000);
        let guess = format!("slow guess {i}");
        let r = try_login(&s, &mut attacker, "erin@example.com", &guess, true).await;
        assert_eq!(r.status, 401, "{}", r.body);
    }
    // The attacker's own address stays slowed down, even with the right password.
    let r = try_login(
        &s,
        &mut attacker,
        "erin@example.com",
        "erin's password!",
        true,
    )
    .await;
    assert_eq!(r.status, 429, "{}", r.body);
    // More attackers, from other addresses, push the account past 10 failures in all.
    for ip in ["127.0.0.12", "127.0.0.13"] {
        let mut b = Browser::from_ip(ip);
        for i in 0..5 {
            let guess = format!("{ip} {i}");
            let r = try_login(&s, &mut b, "erin@example.com", &guess, true).await;
            assert!(matches!(r.status, 401 | 429), "{}", r.status);
        }
    }
    // The owner, from their own address, with the right password and the bot check: in.
    let mut owner = Browser::from_ip("127.0.0.2");
    let r = try_login(
        &s,
        &mut owner,
        "erin@example.com",
        "erin's password!",
        false,
    )
    .await;
    assert_eq!(
        r.status, 400,
        "after many failures everyone solves the challenge first"
    );
    assert!(r.body.contains("name=\"pow_challenge\""));
    let r = try_login(&s, &mut owner, "erin@example.com", "erin's password!", true).await;
    assert_eq!(r.status, 303, "{}", r.body);
    // After the window the attacker's address may try again (and still needs the password).
    s.clock.advance(16 * 60 * 1000);
    let r = try_login(
        &s,
        &mut attacker,
        "erin@example.com",
        "erin's password!",
        true,
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.body);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_needs_the_bot_check_and_setup() {
    let s = TestServer::start().await;
    let mut b = Browser::new();
    // Before an administrator exists, registration is closed.
    let page = b.get(&s.url("/register")).await;
    assert_eq!(page.status, 403);
    assert!(page.body.contains("setup link"), "{}", page.body);
    s.finish_setup();
    let page = b.get(&s.url("/register")).await;
    assert_eq!(page.status, 200);
    let mut fields = form_fields(&page.body, "/register");
    set_field(&mut fields, "name", "Frank");
    set_field(&mut fields, "email", "frank@example.com");
    set_field(&mut fields, "password", "frank's password");
    // No work done: refused, nothing created.
    let r = b.post(&s.url("/register"), &fields).await;
    assert_eq!(r.status, 400);
    assert!(
        s.store()
            .user_by_email("frank@example.com")
            .unwrap()
            .is_none()
    );
    let mut fields = form_fields(&r.body, "/register");
    set_field(&mut fields, "password", "frank's password");
    solve_bot_check(&r.body, &mut fields).unwrap();
    let replay = fields.clone();
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
    // The same solution twice: refused (a challenge is good once).
    let mut again = Browser::new();
    let page = again.get(&s.url("/register")).await;
    let mut fields = form_fields(&page.body, "/register");
    for (k, v) in &replay {
        if k == "pow_challenge" || k == "pow_nonce" {
            set_field(&mut fields, k, v);
        }
    }
    set_field(&mut fields, "email", "frank2@example.com");
    set_field(&mut fields, "password", "frank's password");
    assert_eq!(again.post(&s.url("/register"), &fields).await.status, 400);
    // Closed by the setting.
    s.store().set_setting("registration_open", 0).unwrap();
    assert_eq!(Browser::new().get(&s.url("/register")).await.status, 403);
    s.stop().await;
}

/// After failed sign-ins from an address, a freshly loaded sign-in form (no account typed yet)
/// already carries the bot check, so the owner's next attempt — solved on that page — is not
/// spent on being told to wait for it; other addresses see no check.
#[tokio::test]
async fn a_fresh_sign_in_form_carries_the_bot_check_its_address_needs() {
    let s = TestServer::start().await;
    s.person("fay@example.com", "fay's real password");
    let mut b = Browser::from_ip("127.0.0.20");
    for i in 0..3 {
        let r = try_login(&s, &mut b, "fay@example.com", &format!("wrong {i}"), false).await;
        assert_eq!(r.status, 401, "{}", r.body);
    }
    let mut fresh = Browser::from_ip("127.0.0.20");
    let page = fresh.get(&s.url("/login")).await;
    assert!(
        page.body.contains("name=\"pow_challenge\""),
        "the fresh form has the check: {}",
        page.body
    );
    let mut fields = form_fields(&page.body, "/login");
    set_field(&mut fields, "email", "fay@example.com");
    set_field(&mut fields, "password", "fay's real password");
    solve_bot_check(&page.body, &mut fields).unwrap();
    let r = fresh.post(&s.url("/login"), &fields).await;
    assert_eq!(r.status, 303, "signed in at the first attempt: {}", r.body);
    // Elsewhere, nothing to solve; without mail the form says whom to ask for a reset link.
    let other = Browser::from_ip("127.0.0.21").get(&s.url("/login")).await;
    assert!(!other.body.contains("name=\"pow_challenge\""));
    assert!(
        other.body.contains("id=\"forgot-note\"")
            && other
                .body
                .contains("Ask your administrator for a reset link"),
        "{}",
        other.body
    );
    s.stop().await;
}
