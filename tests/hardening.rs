//! Regression tests of the security review (issue "shut the doors"): throttles that cannot lock
//! out the legitimate user, forwarding headers only from trusted proxies, the proof-of-work bot
//! check with sign-up limits and held credits, session-bound CSRF with exact origins, OAuth
//! clean-up on client removal, prompt=login/max_age, grants ended by a password change or a ban,
//! the setup link that survives until an administrator exists, and /metrics behind a token.
//! Real server, real HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use base64::Engine;
use common::*;
use pictor::ops::AdminRequest;
use serde_json::Value;

const REDIRECT: &str = "http://127.0.0.1:9/callback";

fn authorize_url(s: &TestServer, client: &str, extra: &str) -> String {
    s.url(&format!(
        "/oauth/authorize?response_type=code&client_id={client}&redirect_uri={}&scope=openid%20profile&state=st{extra}",
        urlencode(REDIRECT)
    ))
}

fn urlencode(v: &str) -> String {
    serde_urlencoded::to_string([("", v)]).unwrap()[1..].to_string()
}

async fn token(s: &TestServer, client: &str, secret: &str, form: &[(&str, &str)]) -> (u16, Value) {
    let r = s
        .client
        .post(s.url("/oauth/token"))
        .basic_auth(client, Some(secret))
        .form(form)
        .send()
        .await
        .unwrap();
    status_json(r).await
}

async fn exchange(s: &TestServer, client: &str, secret: &str, back: &str) -> Value {
    let code = query_of(back)["code"].clone();
    let (status, body) = token(
        s,
        client,
        secret,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
        ],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

fn id_token_claims(tokens: &Value) -> Value {
    let jwt = tokens["id_token"].as_str().unwrap();
    let payload = jwt.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap()
}

async fn refresh(s: &TestServer, client: &str, secret: &str, rt: &str) -> (u16, Value) {
    token(
        s,
        client,
        secret,
        &[("grant_type", "refresh_token"), ("refresh_token", rt)],
    )
    .await
}

/// A person who signed in through a new client and allowed it: (browser, client id, client
/// secret, the token response).
async fn granted(
    s: &TestServer,
    email: &str,
    password: &str,
    client: &str,
) -> (Browser, String, String, Value) {
    s.person(email, password);
    let (app, secret) = s.oauth_client(client, &[REDIRECT]);
    let mut b = Browser::new();
    let back = s
        .sign_in_and_consent(&mut b, &authorize_url(s, &app, ""), email, password)
        .await;
    let tokens = exchange(s, &app, &secret, &back).await;
    (b, app, secret, tokens)
}

async fn sign_in(s: &TestServer, b: &mut Browser, email: &str, password: &str) {
    let page = b.get(&s.url("/login")).await;
    let mut f = form_fields(&page.body, "/login");
    set_field(&mut f, "email", email);
    set_field(&mut f, "password", password);
    let r = b.post(&s.url("/login"), &f).await;
    assert_eq!(r.status, 303, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_endpoint_never_refuses_the_right_secret() {
    let s = TestServer::start().await;
    let (app, secret) = s.oauth_client("victim-app", &[REDIRECT]);
    // An attacker floods the client id with wrong secrets from one address.
    let mut statuses = Vec::new();
    for i in 0..35 {
        let (status, body) = token(
            &s,
            &app,
            &format!("wrong-{i}"),
            &[("grant_type", "refresh_token"), ("refresh_token", "x")],
        )
        .await;
        assert!(matches!(status, 401 | 429), "{status} {body}");
        statuses.push(status);
    }
    assert_eq!(statuses.iter().filter(|s| **s == 401).count(), 30);
    assert_eq!(
        statuses.last(),
        Some(&429),
        "the attacker's address is slowed"
    );
    // The real client, even from the attacker's own address, is authenticated: its grant is
    // judged on its merits (here: an unknown refresh token).
    let (status, body) = token(
        &s,
        &app,
        &secret,
        &[("grant_type", "refresh_token"), ("refresh_token", "x")],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    s.stop().await;
}

/// A sign-in sent through a proxy that says the client is `xff`.
async fn login_via(s: &TestServer, xff: &str, password: &str) -> u16 {
    let mut b = Browser::new();
    let page = b.get(&s.url("/login")).await;
    let mut f = form_fields(&page.body, "/login");
    set_field(&mut f, "email", "gina@example.com");
    set_field(&mut f, "password", password);
    let r = b
        .http
        .post(s.url("/login"))
        .header("x-forwarded-for", xff)
        .header("cookie", b.cookie_header())
        .form(&f)
        .send()
        .await
        .unwrap();
    r.status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_headers_count_only_from_trusted_proxies() {
    // Behind a proxy on 127.0.0.1: each client is throttled on its own address.
    let s = TestServer::start_with(Options {
        tweak: |c| {
            c.trusted_proxies = pictor::net::TrustedProxies::parse("127.0.0.1").unwrap();
        },
        ..Options::default()
    })
    .await;
    s.person("gina@example.com", "gina's password!");
    let mut attacker = Vec::new();
    for _ in 0..22 {
        attacker.push(login_via(&s, "203.0.113.5", "wrong password").await);
    }
    assert!(attacker.contains(&429), "{attacker:?}");
    // Gina, behind the same proxy, is another client.
    assert_eq!(login_via(&s, "198.51.100.7", "gina's password!").await, 303);
    // A `Forwarded` header the client made up is not read (the proxy writes X-Forwarded-For
    // and passes `Forwarded` through): all of these are the proxy itself.
    let mut statuses = Vec::new();
    for i in 0..22 {
        let mut b = Browser::new();
        let page = b.get(&s.url("/login")).await;
        let mut f = form_fields(&page.body, "/login");
        set_field(&mut f, "email", "gina@example.com");
        set_field(&mut f, "password", "wrong password");
        let r = b
            .http
            .post(s.url("/login"))
            .header("forwarded", format!("for=192.0.2.{i}"))
            .header("cookie", b.cookie_header())
            .form(&f)
            .send()
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    s.stop().await;

    // Without trusted proxies, a spoofed X-Forwarded-For changes nothing.
    let s = TestServer::start().await;
    s.person("gina@example.com", "gina's password!");
    let spoofed = [
        "203.0.113.1",
        "203.0.113.2",
        "203.0.113.3",
        "203.0.113.4",
        "203.0.113.5",
        "203.0.113.6",
        "203.0.113.7",
        "203.0.113.8",
    ];
    let mut statuses = Vec::new();
    for xff in spoofed.iter().cycle().take(22) {
        statuses.push(login_via(&s, xff, "wrong password").await);
    }
    assert!(
        statuses.contains(&429),
        "spoofed addresses evaded the throttle: {statuses:?}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_script_gets_few_accounts_and_no_credits() {
    let s = TestServer::start().await;
    s.finish_setup();
    let bits = s.store().settings().unwrap().challenge_bits;
    let mut hashes = 0u64;
    // The script does everything the page does: fetch the form, solve the check, post.
    let register = |ip: &'static str, n: usize| {
        let s = &s;
        async move {
            let mut b = Browser::from_ip(ip);
            let page = b.get(&s.url("/register")).await;
            let mut f = form_fields(&page.body, "/register");
            set_field(&mut f, "email", &format!("bot{n}@example.com"));
            set_field(&mut f, "password", "bot password 123");
            let work = solve_bot_check(&page.body, &mut f).unwrap();
            (b.post(&s.url("/register"), &f).await.status, work)
        }
    };
    let mut made = 0;
    let mut n = 0;
    // One address: 3 accounts an hour.
    for _ in 0..4 {
        let (status, work) = register("127.0.0.31", n).await;
        n += 1;
        hashes += work;
        if status == 303 {
            made += 1;
        } else {
            assert_eq!(status, 429);
        }
    }
    assert_eq!(made, 3, "one address");
    // Its /24: 10 accounts an hour, whatever the addresses.
    for ip in ["127.0.0.32", "127.0.0.33", "127.0.0.34", "127.0.0.35"] {
        for _ in 0..3 {
            let (status, work) = register(ip, n).await;
            n += 1;
            hashes += work;
            if status == 303 {
                made += 1;
            } else {
                assert_eq!(status, 429);
            }
        }
    }
    assert_eq!(made, 10, "one subnet");
    println!(
        "bot script: {made} accounts from {n} tries, {hashes} SHA-256 evaluations at {bits} bits (expected about {} per account)",
        1u64 << bits
    );
    // None of them has anything to spend until a real sign-in (or an approval).
    for i in 0..n {
        if let Some(u) = s
            .store()
            .user_by_email(&format!("bot{i}@example.com"))
            .unwrap()
        {
            assert_eq!(u.balance, 0);
            assert_eq!(
                u.pending_credits,
                s.store().settings().unwrap().signup_credits
            );
        }
    }
    // A nonce that does less work than asked is refused.
    let mut b = Browser::from_ip("127.0.1.9");
    let page = b.get(&s.url("/register")).await;
    let mut f = form_fields(&page.body, "/register");
    let challenge = f
        .iter()
        .find(|(k, _)| k == "pow_challenge")
        .unwrap()
        .1
        .clone();
    let weak = (0u64..)
        .find(|n| {
            use sha2::{Digest, Sha256};
            let d = Sha256::digest(format!("{challenge}:{n}").as_bytes());
            let z = pictor::idp::pow::leading_zero_bits(&d);
            z >= bits - 4 && z < bits
        })
        .unwrap();
    set_field(&mut f, "pow_nonce", &weak.to_string());
    set_field(&mut f, "email", "weak@example.com");
    set_field(&mut f, "password", "bot password 123");
    assert_eq!(b.post(&s.url("/register"), &f).await.status, 400);
    assert!(
        s.store()
            .user_by_email("weak@example.com")
            .unwrap()
            .is_none()
    );

    // With approval required, signing in gives nothing; the administrator's approval does.
    s.store().set_setting("signup_approval", 1).unwrap();
    let mut person = Browser::from_ip("127.0.2.1");
    let page = person.get(&s.url("/register")).await;
    let mut f = form_fields(&page.body, "/register");
    set_field(&mut f, "email", "real@example.com");
    set_field(&mut f, "password", "a real password");
    solve_bot_check(&page.body, &mut f).unwrap();
    assert_eq!(person.post(&s.url("/register"), &f).await.status, 303);
    let mut again = Browser::from_ip("127.0.2.1");
    sign_in(&s, &mut again, "real@example.com", "a real password").await;
    let user = s
        .store()
        .user_by_email("real@example.com")
        .unwrap()
        .unwrap();
    assert_eq!((user.balance, user.pending_credits), (0, 20));
    let v = s.admin(AdminRequest::UserUpdate {
        email: "real@example.com".into(),
        pro: None,
        banned: None,
        daily_limit: None,
        admin: None,
        approve: true,
    });
    assert_eq!(
        (v["balance"].as_i64(), v["pending_credits"].as_u64()),
        (Some(20), Some(0))
    );
    s.assert_books_balanced();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_bursts_cannot_slip_past_the_limits() {
    let s = TestServer::start().await;
    s.finish_setup();
    s.person("pat@example.com", "pat's password!!");
    // 20 sign-ups at once from one address, every bot check solved: 3 accounts.
    let mut forms = Vec::new();
    for i in 0..20 {
        let mut b = Browser::from_ip("127.0.0.41");
        let page = b.get(&s.url("/register")).await;
        let mut f = form_fields(&page.body, "/register");
        set_field(&mut f, "email", &format!("burst{i}@example.com"));
        set_field(&mut f, "password", "burst password 1");
        solve_bot_check(&page.body, &mut f).unwrap();
        forms.push((b, f));
    }
    let statuses = futures_util::future::join_all(forms.into_iter().map(|(mut b, f)| {
        let url = s.url("/register");
        async move { b.post(&url, &f).await.status }
    }))
    .await;
    assert_eq!(
        statuses.iter().filter(|s| **s == 303).count(),
        3,
        "{statuses:?}"
    );
    // 20 wrong passwords at once from one address: at most 3 are checked before the bot check
    // and the delays apply.
    let mut forms = Vec::new();
    for i in 0..20 {
        let mut b = Browser::from_ip("127.0.0.42");
        let page = b.get(&s.url("/login")).await;
        let mut f = form_fields(&page.body, "/login");
        set_field(&mut f, "email", "pat@example.com");
        set_field(&mut f, "password", &format!("guess {i}"));
        forms.push((b, f));
    }
    let statuses = futures_util::future::join_all(forms.into_iter().map(|(mut b, f)| {
        let url = s.url("/login");
        async move { b.post(&url, &f).await.status }
    }))
    .await;
    let checked = statuses.iter().filter(|s| **s == 401).count();
    assert!(checked <= 3, "{checked} passwords checked: {statuses:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csrf_tokens_are_bound_to_the_session_and_the_exact_origin() {
    let s = TestServer::start().await;
    s.person("hana@example.com", "hana's password!");
    let mut victim = Browser::new();
    sign_in(&s, &mut victim, "hana@example.com", "hana's password!").await;
    let page = victim.get(&s.url("/account")).await;
    let mut good = form_fields(&page.body, "/account/key");
    // Replacing an existing default key needs its box ticked (every post after the first).
    good.push(("confirm".into(), "yes".into()));
    let token = good.iter().find(|(k, _)| k == "csrf").unwrap().1.clone();
    let post =
        |b: &Browser, fields: Vec<(String, String)>, headers: Vec<(&'static str, String)>| {
            let mut req = b
                .http
                .post(s.url("/account/key"))
                .header("cookie", b.cookie_header());
            for (k, v) in headers {
                req = req.header(k, v);
            }
            async move { req.form(&fields).send().await.unwrap().status().as_u16() }
        };
    // Cookie tossing: the attacker gets a valid (cookie, token) pair of their own and plants
    // the cookie in the victim's browser. The token is bound to the victim's session: refused.
    let mut attacker = Browser::new();
    let page = attacker.get(&s.url("/login")).await;
    let attacker_token = form_fields(&page.body, "/login")
        .into_iter()
        .find(|(k, _)| k == "csrf")
        .unwrap()
        .1;
    let mut tossed = Browser::new();
    tossed.cookies = victim.cookies.clone();
    tossed.cookies.insert(
        "pictor_csrf".into(),
        attacker.cookies["pictor_csrf"].clone(),
    );
    let mut f = good.clone();
    set_field(&mut f, "csrf", &attacker_token);
    assert_eq!(post(&tossed, f, vec![]).await, 403, "tossed cookie");
    // The old double submit (token = cookie value) is no longer a token.
    let mut f = good.clone();
    set_field(&mut f, "csrf", &tossed.cookies["pictor_csrf"].clone());
    assert_eq!(post(&tossed, f, vec![]).await, 403, "cookie as token");
    // Origins: exact equality only.
    let own = s.base.clone();
    let port_less = own.rsplit_once(':').unwrap().0.to_string();
    for (origin, want) in [
        ("null".to_string(), 403),
        (port_less, 403),
        (format!("{own}.evil.example"), 403),
        ("https://evil.example".to_string(), 403),
        (own.clone(), 200),
    ] {
        let got = post(&victim, good.clone(), vec![("origin", origin.clone())]).await;
        assert_eq!(got, want, "Origin: {origin}");
    }
    for (site, want) in [
        ("cross-site", 403),
        ("same-site", 403),
        ("same-origin", 200),
    ] {
        let got = post(
            &victim,
            good.clone(),
            vec![("sec-fetch-site", site.to_string())],
        )
        .await;
        assert_eq!(got, want, "Sec-Fetch-Site: {site}");
    }
    // A short planted pre-session cookie is replaced, not adopted.
    let mut fresh = Browser::new();
    fresh.cookies.insert("pictor_csrf".into(), "short".into());
    fresh.get(&s.url("/login")).await;
    assert!(fresh.cookies["pictor_csrf"].len() >= 43);
    assert_eq!(token.len(), 43);
    s.stop().await;

    // Over https the cookies are __Host- prefixed and Secure.
    let s = TestServer::start_with(Options {
        tweak: |c| c.public_url = Some("https://pictor.example".into()),
        ..Options::default()
    })
    .await;
    let local = s.handle.as_ref().unwrap().local_addr;
    let r = s
        .client
        .get(format!("http://{local}/login"))
        .send()
        .await
        .unwrap();
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.contains("pictor_csrf"))
        .unwrap();
    assert!(cookie.starts_with("__Host-pictor_csrf="), "{cookie}");
    assert!(
        cookie.contains("Secure") && cookie.contains("Path=/"),
        "{cookie}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_client_forgets_its_consents_codes_and_tokens() {
    let s = TestServer::start().await;
    let (mut b, app, _secret, tokens) =
        granted(&s, "ivy@example.com", "ivy's password!!", "zine").await;
    // A second code, left pending.
    let page = b.get(&authorize_url(&s, &app, "")).await;
    let pending = page.location.unwrap();
    assert!(pending.contains("code="), "consent remembered: {pending}");
    s.admin(AdminRequest::ClientRemove { name: app.clone() });
    let uid = s
        .store()
        .user_by_email("ivy@example.com")
        .unwrap()
        .unwrap()
        .id;
    assert!(s.store().consent(uid, &app).unwrap().is_none());
    // Someone registers a new client under the same name: it inherits nothing.
    let (app2, secret2) = s.oauth_client("zine", &[REDIRECT]);
    let page = b.get(&authorize_url(&s, &app2, "")).await;
    assert_eq!(page.status, 200, "consent asked again: {:?}", page.location);
    assert!(page.body.contains("action=\"/oauth/authorize\""));
    let code = query_of(&pending)["code"].clone();
    let (status, body) = token(
        &s,
        &app2,
        &secret2,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", REDIRECT),
        ],
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let rt = tokens["refresh_token"].as_str().unwrap();
    let (status, _) = refresh(&s, &app2, &secret2, rt).await;
    assert_eq!(status, 400);
    let r = s
        .client
        .get(s.url("/oauth/userinfo"))
        .bearer_auth(tokens["access_token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_login_and_max_age_force_a_fresh_sign_in() {
    let s = TestServer::start().await;
    let (mut b, app, secret, tokens) =
        granted(&s, "jo@example.com", "jo's password!!!", "fresh").await;
    let first = id_token_claims(&tokens)["auth_time"].as_u64().unwrap();
    s.clock.advance(120_000);
    // max_age=3600: the sign-in is recent enough, straight back with a code.
    let page = b.get(&authorize_url(&s, &app, "&max_age=3600")).await;
    assert!(page.location.as_deref().unwrap().starts_with(REDIRECT));
    // prompt=none with max_age=60: too old, and no page may be shown.
    let page = b
        .get(&authorize_url(&s, &app, "&prompt=none&max_age=60"))
        .await;
    assert_eq!(
        query_of(page.location.as_deref().unwrap())["error"],
        "login_required"
    );
    // max_age=60: sign in again.
    let page = b.get(&authorize_url(&s, &app, "&max_age=60")).await;
    let loc = page.location.unwrap();
    assert!(
        loc.starts_with("/login?") && loc.contains("force=1"),
        "{loc}"
    );
    // prompt=login: sign in again even though the session is valid, once (no loop).
    let page = b.get(&authorize_url(&s, &app, "&prompt=login")).await;
    let loc = page.location.unwrap();
    assert!(loc.starts_with("/login?"), "{loc}");
    let page = b.get(&s.url(&loc)).await;
    assert_eq!(page.status, 200, "the sign-in form, although signed in");
    let mut f = form_fields(&page.body, "/login");
    set_field(&mut f, "email", "jo@example.com");
    set_field(&mut f, "password", "jo's password!!!");
    let r = b.post(&s.url("/login"), &f).await;
    assert_eq!(r.status, 303);
    let r = b.follow(&s.base, r).await;
    let back = r.location.unwrap();
    assert!(back.starts_with(REDIRECT), "{back}");
    let fresh = id_token_claims(&exchange(&s, &app, &secret, &back).await)["auth_time"]
        .as_u64()
        .unwrap();
    assert!(fresh >= first + 120, "auth_time {first} -> {fresh}");
    // max_age=0 on the real clock: one sign-in, then back to the client (no loop).
    let page = b.get(&authorize_url(&s, &app, "&max_age=0")).await;
    let loc = page.location.unwrap();
    assert!(loc.contains("force=1"), "{loc}");
    let page = b.get(&s.url(&loc)).await;
    let mut f = form_fields(&page.body, "/login");
    set_field(&mut f, "email", "jo@example.com");
    set_field(&mut f, "password", "jo's password!!!");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let r = b.post(&s.url("/login"), &f).await;
    let r = b.follow(&s.base, r).await;
    assert!(
        r.location
            .as_deref()
            .is_some_and(|l| l.starts_with(REDIRECT)),
        "{:?} {}",
        r.location,
        r.status
    );
    // prompt="login consent": after the fresh sign-in, consent is still asked.
    let page = b
        .get(&authorize_url(&s, &app, "&prompt=login%20consent"))
        .await;
    let loc = page.location.unwrap();
    let page = b.get(&s.url(&loc)).await;
    let mut f = form_fields(&page.body, "/login");
    set_field(&mut f, "email", "jo@example.com");
    set_field(&mut f, "password", "jo's password!!!");
    let r = b.post(&s.url("/login"), &f).await;
    let r = b.follow(&s.base, r).await;
    assert_eq!(r.status, 200, "{:?}", r.location);
    assert!(
        r.body.contains("action=\"/oauth/authorize\""),
        "consent page"
    );
    // A bad max_age goes back to the client as invalid_request.
    let page = b.get(&authorize_url(&s, &app, "&max_age=soon")).await;
    assert_eq!(
        query_of(page.location.as_deref().unwrap())["error"],
        "invalid_request"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_change_or_a_ban_ends_app_grants() {
    let s = TestServer::start().await;
    let (mut b, app, secret, tokens) =
        granted(&s, "kim@example.com", "kim's password!!", "grants").await;
    let page = b.get(&s.url("/account")).await;
    let mut f = form_fields(&page.body, "/account/password");
    set_field(&mut f, "current_password", "kim's password!!");
    set_field(&mut f, "new_password", "kim's new password");
    set_field(&mut f, "new_password2", "kim's new password");
    let r = b.post(&s.url("/account/password"), &f).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let page = b.get(&s.url("/account?done=password")).await;
    assert!(
        page.body
            .contains("apps you signed in to must ask you to sign in again")
    );
    let (status, body) =
        refresh(&s, &app, &secret, tokens["refresh_token"].as_str().unwrap()).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );

    // A new grant, then a ban.
    let page = b.get(&authorize_url(&s, &app, "")).await;
    let tokens = exchange(&s, &app, &secret, page.location.as_deref().unwrap()).await;
    s.admin(AdminRequest::UserUpdate {
        email: "kim@example.com".into(),
        pro: None,
        banned: Some(true),
        daily_limit: None,
        admin: None,
        approve: false,
    });
    // Unbanned at once: the grant stays ended.
    s.admin(AdminRequest::UserUpdate {
        email: "kim@example.com".into(),
        pro: None,
        banned: Some(false),
        daily_limit: None,
        admin: None,
        approve: false,
    });
    let (status, _) = refresh(&s, &app, &secret, tokens["refresh_token"].as_str().unwrap()).await;
    assert_eq!(status, 400);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_setup_link_stays_valid_until_an_administrator_exists() {
    let s = TestServer::start().await;
    let link = s.handle.as_ref().unwrap().setup_url.clone().unwrap();
    let path = link.strip_prefix(&s.base).unwrap().to_string();
    // Nobody can register first.
    assert_eq!(Browser::new().get(&s.url("/register")).await.status, 403);
    // An ordinary account made meanwhile (e.g. by the CLI) does not kill the link.
    s.person("someone@example.com", "someone's password");
    let mut owner = Browser::new();
    let page = owner.get(&s.url(&path)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("pictor user update"),
        "the CLI alternative is explained"
    );
    let mut f = form_fields(&page.body, "/setup");
    set_field(&mut f, "name", "Owner");
    set_field(&mut f, "email", "owner@example.com");
    set_field(&mut f, "password", "the owner's password");
    let r = owner.post(&s.url("/setup"), &f).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(
        s.store()
            .user_by_email("owner@example.com")
            .unwrap()
            .unwrap()
            .admin
    );
    // Used up; registration opens (setting registration_open = 1 by default).
    assert_eq!(Browser::new().get(&s.url(&path)).await.status, 404);
    assert_eq!(Browser::new().get(&s.url("/register")).await.status, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_their_token() {
    let s = TestServer::start().await;
    let r = s.client.get(s.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 404, "not served without a metrics_token");
    s.stop().await;
    let s = TestServer::start_with(Options {
        tweak: |c| c.metrics_token = Some("a-long-metrics-token-123".into()),
        ..Options::default()
    })
    .await;
    let get = |auth: Option<&'static str>| {
        let mut req = s.client.get(s.url("/metrics"));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(get(None).await, 401);
    assert_eq!(get(Some("Bearer wrong")).await, 401);
    assert_eq!(get(Some("Bearer a-long-metrics-token-123")).await, 200);
    // The admin channel serves it too, with the admin token.
    let admin: Value =
        serde_json::from_slice(&std::fs::read(s.data_dir().join("admin.json")).unwrap()).unwrap();
    let url = format!("{}/metrics", admin["url"].as_str().unwrap());
    let r = s.client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = s
        .client
        .get(&url)
        .bearer_auth(admin["token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("pictor_"));
    s.stop().await;
}
