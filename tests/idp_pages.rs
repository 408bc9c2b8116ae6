//! The server-rendered pages of the identity provider, driven over HTTP with a cookie jar:
//! first-start setup, registration, the account cabinet (API key, password, TOTP, authorized
//! apps, profile picture) and the admin pages, plus CSRF, security headers and session fixation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use pictor::ops::AdminRequest;
use serde_json::Value;

const REDIRECT: &str = "http://127.0.0.1:9/callback";

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The text of the element with `id="…"` (up to the next `<`), unescaped.
fn text_of_id(html: &str, id: &str) -> Option<String> {
    let key = format!("id=\"{id}\">");
    let start = html.find(&key)? + key.len();
    let end = html[start..].find('<')? + start;
    Some(html_unescape(html[start..end].trim()))
}

fn csrf_of(html: &str) -> String {
    form_fields(html, "/logout")
        .into_iter()
        .find(|(k, _)| k == "csrf")
        .map(|(_, v)| v)
        .expect("a csrf field")
}

async fn sign_in(s: &TestServer, b: &mut Browser, email: &str, password: &str) -> Page {
    b.sign_in(&s.base, email, password).await
}

async fn signed_in_browser(s: &TestServer, email: &str, password: &str) -> Browser {
    let mut b = Browser::new();
    let r = sign_in(s, &mut b, email, password).await;
    assert_eq!(r.status, 303, "sign-in failed: {}", r.body);
    b
}

async fn account(s: &TestServer, b: &mut Browser) -> Page {
    let page = b.get(&s.url("/account")).await;
    assert_eq!(page.status, 200, "{:?} {}", page.location, page.body);
    page
}

/// Submits the first form with `action` on `page`, after applying `changes`.
async fn submit(
    s: &TestServer,
    b: &mut Browser,
    page: &Page,
    action: &str,
    changes: &[(&str, &str)],
) -> Page {
    b.submit(&s.base, page, action, changes).await
}

async fn sign_out(s: &TestServer, b: &mut Browser) {
    let page = account(s, b).await;
    let r = submit(s, b, &page, "/logout", &[]).await;
    assert_eq!(r.status, 303);
    assert!(
        b.get(&s.url("/account"))
            .await
            .location
            .unwrap()
            .starts_with("/login")
    );
}

fn user_record(s: &TestServer, email: &str) -> pictor::store::UserRecord {
    s.store().user_by_email(email).unwrap().unwrap()
}

fn admin_person(s: &TestServer, email: &str, password: &str) {
    let hash = pictor::auth::password::hash(password).unwrap();
    s.admin(AdminRequest::UserAdd {
        email: email.into(),
        name: Some("The Admin".into()),
        password_hash: Some(hash),
        admin: true,
        pro: false,
        credits: 0,
    });
}

fn state(s: &TestServer) -> &pictor::state::AppState {
    &s.handle.as_ref().unwrap().state
}

/// Authorize + sign in + consent with raw parameters; returns the code sent back to the client.
async fn code_for(s: &TestServer, b: &mut Browser, app: &str, email: &str, pw: &str) -> String {
    let params = [
        ("response_type", "code"),
        ("client_id", app),
        ("redirect_uri", REDIRECT),
        ("state", "st-1"),
        ("scope", "openid profile email"),
    ];
    let url = format!(
        "{}/oauth/authorize?{}",
        s.base,
        serde_urlencoded::to_string(params).unwrap()
    );
    let back = s.sign_in_and_consent(b, &url, email, pw).await;
    query_of(&back)
        .get("code")
        .cloned()
        .unwrap_or_else(|| panic!("no code: {back}"))
}

async fn token_call(s: &TestServer, fields: &[(&str, &str)]) -> (u16, Value) {
    let r = http()
        .post(s.url("/oauth/token"))
        .form(fields)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn exchange(s: &TestServer, app: &str, secret: &str, code: &str) -> (u16, Value) {
    token_call(
        s,
        &[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("client_id", app),
            ("client_secret", secret),
        ],
    )
    .await
}

fn totp_code(base32: &str, email: &str, now_ms: u64) -> String {
    let secret = totp_rs::Secret::try_from_base32(base32)
        .unwrap()
        .as_bytes()
        .to_vec();
    pictor::idp::totp::totp(secret, email)
        .unwrap()
        .generate(now_ms / 1000)
        .to_string()
}

/// Posts a multipart form with the browser's cookies (redirects not followed).
async fn post_multipart(
    b: &Browser,
    url: &str,
    form: reqwest::multipart::Form,
) -> (u16, Option<String>, String) {
    let cookie = b
        .cookies
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ");
    let r = b
        .http
        .post(url)
        .header("cookie", cookie)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let location = r
        .headers()
        .get("location")
        .map(|v| v.to_str().unwrap().to_string());
    (status, location, r.text().await.unwrap())
}

fn png_part(bytes: Vec<u8>) -> reqwest::multipart::Part {
    reqwest::multipart::Part::bytes(bytes)
        .file_name("me.png")
        .mime_str("image/png")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_link_creates_the_admin_once_then_is_dead() {
    let s = TestServer::start().await;
    let setup_url = s.handle.as_ref().unwrap().setup_url.clone().unwrap();
    assert!(setup_url.starts_with(&s.url("/setup?token=")));

    let mut stranger = Browser::new();
    // Before setup the sign-in page says it is pending and offers no registration.
    let login = stranger.get(&s.url("/login")).await;
    assert!(
        login.body.contains("id=\"setup-pending\""),
        "{}",
        login.body
    );
    assert!(!login.body.contains("href=\"/register"), "{}", login.body);
    // A stale link (from before a restart) with nobody set up: the console has the new one, and
    // the commands are code, not text with backticks.
    let bad = stranger.get(&s.url("/setup?token=not-the-token")).await;
    assert_eq!(bad.status, 404);
    assert!(bad.body.contains("not the current one"), "{}", bad.body);
    assert!(
        bad.body
            .contains("<code>pictor user add --email E --admin --password-stdin</code>"),
        "{}",
        bad.body
    );
    assert!(!bad.body.contains('`'), "{}", bad.body);
    assert_eq!(stranger.get(&s.url("/setup")).await.status, 404);

    let mut b = Browser::new();
    let page = b.get(&setup_url).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("no watermark"),
        "the page says the account is PRO"
    );
    // A too-short password is refused on the page; the link stays valid.
    let r = submit(
        &s,
        &mut b,
        &page,
        "/setup",
        &[("email", "boss@example.com"), ("password", "short")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("role=\"alert\""));
    let r = submit(
        &s,
        &mut b,
        &page,
        "/setup",
        &[
            ("name", "Boss"),
            ("email", "Boss@Example.com"),
            ("password", "the boss's password"),
        ],
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location.as_deref(), Some("/account"));
    let page = account(&s, &mut b).await;
    assert!(page.body.contains("boss@example.com"));
    assert!(page.body.contains("href=\"/admin\""), "admin nav link");
    assert_eq!(text_of_id(&page.body, "balance").unwrap(), "100");
    let boss = user_record(&s, "boss@example.com");
    assert!(boss.admin);
    assert!(boss.pro, "the owner's pictures are not watermarked");
    assert_eq!(b.get(&s.url("/admin")).await.status, 200);

    // Dead afterwards: the GET and a replayed POST.
    let again = Browser::new().get(&setup_url).await;
    assert_eq!(again.status, 404);
    assert!(
        again
            .body
            .contains("This setup link was already used: this Pictor has its administrator")
    );
    assert!(
        again.body.contains(
            "<a class=\"button primary\" href=\"/login\" id=\"sign-in-instead\">Sign in</a>"
        ),
        "{}",
        again.body
    );
    let login = Browser::new().get(&s.url("/login")).await;
    assert!(!login.body.contains("setup-pending") && login.body.contains("href=\"/register"));
    let mut fields = form_fields(&page.body, "/logout");
    fields.extend([
        ("token".to_string(), query_of(&setup_url)["token"].clone()),
        ("email".to_string(), "second@example.com".to_string()),
        ("password".to_string(), "another long password".to_string()),
    ]);
    let r = b.post(&s.url("/setup"), &fields).await;
    assert_eq!(r.status, 404);
    assert!(
        s.store()
            .user_by_email("second@example.com")
            .unwrap()
            .is_none()
    );
    assert_eq!(s.store().users().unwrap().len(), 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_with_the_bot_check_then_credits_at_first_sign_in() {
    let s = TestServer::start().await;
    s.finish_setup();
    let mut b = Browser::new();
    let page = b.get(&s.url("/register")).await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("/static/pow.js"),
        "the page runs the bot check"
    );
    let fill = |page: &Page, nonce: Option<&str>| {
        let mut f = form_fields(&page.body, "/register");
        set_field(&mut f, "name", "Carol");
        set_field(&mut f, "email", "carol@example.com");
        set_field(&mut f, "password", "carol's long password");
        match nonce {
            Some(n) => set_field(&mut f, "pow_nonce", n),
            None => {
                solve_bot_check(&page.body, &mut f).unwrap();
            }
        }
        f
    };
    let r = b
        .post(&s.url("/register"), &fill(&page, Some("12345")))
        .await;
    assert_eq!(r.status, 400, "an unsolved bot check is refused");
    assert!(r.body.contains("role=\"alert\""));
    assert!(
        s.store()
            .user_by_email("carol@example.com")
            .unwrap()
            .is_none()
    );
    let r = b.post(&s.url("/register"), &fill(&r, None)).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let credits = state(&s).store.settings().unwrap().signup_credits;
    // Signed in, but the welcome credits wait for a first real sign-in.
    let page = account(&s, &mut b).await;
    assert!(page.body.contains("carol@example.com"));
    assert_eq!(text_of_id(&page.body, "balance").unwrap(), "0");
    assert!(
        page.body.contains("id=\"pending-credits\""),
        "{}",
        page.body
    );
    let page = account(&s, &mut b).await;
    let fields = form_fields(&page.body, "/logout");
    assert_eq!(b.post(&s.url("/logout"), &fields).await.status, 303);
    let page = b.get(&s.url("/login")).await;
    let mut f = form_fields(&page.body, "/login");
    set_field(&mut f, "email", "carol@example.com");
    set_field(&mut f, "password", "carol's long password");
    assert_eq!(b.post(&s.url("/login"), &f).await.status, 303);
    let page = account(&s, &mut b).await;
    assert_eq!(
        text_of_id(&page.body, "balance").unwrap(),
        credits.to_string()
    );
    assert!(!page.body.contains("id=\"pending-credits\""));
    // Released once: the ledger has exactly one grant and the books balance.
    let user = s
        .store()
        .user_by_email("carol@example.com")
        .unwrap()
        .unwrap();
    let ledger = s.store().ledger(user.id).unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].delta, i64::from(credits));
    assert!(page.body.contains("Pictures today (UTC): 0 of 25"));
    assert!(!page.body.contains("href=\"/admin\""), "no admin link");
    assert!(page.body.contains("href=\"/api/pictor/docs\""));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn account_and_admin_need_a_session() {
    let s = TestServer::start().await;
    let mut b = Browser::new();
    let r = b.get(&s.url("/account")).await;
    assert_eq!(r.status, 303);
    assert_eq!(r.location.as_deref(), Some("/login?return_to=/account"));
    let r = b.get(&s.url("/admin")).await;
    assert_eq!(r.status, 303);
    assert_eq!(r.location.as_deref(), Some("/login?return_to=/admin"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn home_page_goes_to_the_playground_or_to_sign_in() {
    let s = TestServer::start().await;
    s.person("dan@example.com", "dan's long password");
    let mut b = Browser::new();
    let r = b.get(&s.url("/")).await;
    assert_eq!((r.status, r.location.as_deref()), (303, Some("/login")));
    let mut b = signed_in_browser(&s, "dan@example.com", "dan's long password").await;
    let r = b.get(&s.url("/")).await;
    assert_eq!(
        (r.status, r.location.as_deref()),
        (303, Some("/playground"))
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_is_shown_once_and_replaces_the_old_one() {
    let s = TestServer::start().await;
    s.person("erin@example.com", "erin's long password");
    let mut b = signed_in_browser(&s, "erin@example.com", "erin's long password").await;
    let page = account(&s, &mut b).await;
    assert!(page.body.contains("No keys yet"), "{}", page.body);
    let r = submit(&s, &mut b, &page, "/account/key", &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["cache-control"], "no-store");
    let key = text_of_id(&r.body, "new-api-key").expect("key shown");
    assert!(key.starts_with("vx_") && key.len() == 67, "{key}");
    let me = s.me(&key).await;
    assert_eq!(me["email"], "erin@example.com");

    let page = account(&s, &mut b).await;
    assert!(!page.body.contains(&key), "shown only once");
    assert!(text_of_id(&page.body, "new-api-key").is_none());
    // Listed by its fingerprint (the last four characters), made today.
    assert!(
        page.body.contains(&format!("vx_…{}", &key[63..])),
        "{}",
        page.body
    );

    // Replacing the default key needs the confirmation; without it nothing changes.
    let r = submit(&s, &mut b, &page, "/account/key", &[]).await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("Tick the box"), "{}", r.body);
    assert_eq!(s.me(&key).await["balance"], 5, "still works");
    let r = submit(&s, &mut b, &page, "/account/key", &[("confirm", "yes")]).await;
    let key2 = text_of_id(&r.body, "new-api-key").unwrap();
    assert_ne!(key, key2);
    let (status, _) = s.get(&key, "/api/pictor/v1/me").await;
    assert_eq!(status, 401, "the old key stops working");
    assert_eq!(s.me(&key2).await["balance"], 5);
    s.stop().await;
}

/// Named keys: several at once, each with its name, fingerprint, dates; revoking one stops only
/// it; replacing the default key leaves them alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_api_keys_live_side_by_side_and_are_revoked_one_by_one() {
    let s = TestServer::start().await;
    s.person("nia@example.com", "nia's long password");
    let mut b = signed_in_browser(&s, "nia@example.com", "nia's long password").await;
    let mut made = Vec::new();
    for label in ["laptop script", "CI runner"] {
        let page = account(&s, &mut b).await;
        let r = submit(&s, &mut b, &page, "/account/keys", &[("label", label)]).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(
            r.body.contains(&format!("Your new key “{label}”")),
            "{}",
            r.body
        );
        made.push(text_of_id(&r.body, "new-api-key").unwrap());
    }
    for key in &made {
        assert_eq!(s.me(key).await["email"], "nia@example.com");
    }
    // Refused: the same name again (any case), no name, a name too long; nothing is made.
    for bad in ["ci RUNNER", "   ", &"x".repeat(65)] {
        let page = account(&s, &mut b).await;
        let r = submit(&s, &mut b, &page, "/account/keys", &[("label", bad)]).await;
        assert_eq!(r.status, 400, "{bad:?}");
        assert!(text_of_id(&r.body, "new-api-key").is_none());
    }
    let user = user_record(&s, "nia@example.com");
    assert_eq!(user.api_keys.len(), 2);
    // A use is recorded (off the request's path, at most once an hour).
    let mut used = false;
    for _ in 0..50 {
        if user_record(&s, "nia@example.com").api_keys[0]
            .meta
            .last_used
            .is_some()
        {
            used = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(used, "last use recorded");
    let page = account(&s, &mut b).await;
    assert!(page.body.contains("laptop script") && page.body.contains("CI runner"));
    assert!(page.body.contains(&format!("vx_…{}", &made[1][63..])));

    // The quick button (default key) leaves the named keys working.
    let r = submit(&s, &mut b, &page, "/account/key", &[]).await;
    let default = text_of_id(&r.body, "new-api-key").unwrap();
    for key in made.iter().chain([&default]) {
        assert_eq!(s.me(key).await["email"], "nia@example.com");
    }

    // Revoke the laptop's key: it is refused at once, the others still work.
    let id = user_record(&s, "nia@example.com").api_keys[0].id.clone();
    let page = account(&s, &mut b).await;
    let r = submit(&s, &mut b, &page, "/account/keys/revoke", &[("id", &id)]).await;
    assert_eq!(r.status, 303);
    assert_eq!(r.location.as_deref(), Some("/account?done=key-revoked"));
    assert_eq!(s.get(&made[0], "/api/pictor/v1/me").await.0, 401);
    assert_eq!(s.me(&made[1]).await["email"], "nia@example.com");
    assert_eq!(s.me(&default).await["email"], "nia@example.com");
    // Another person's key id revokes nothing of theirs.
    s.person("oli@example.com", "oli's long password");
    let mut other = signed_in_browser(&s, "oli@example.com", "oli's long password").await;
    let id = user_record(&s, "nia@example.com").api_keys[0].id.clone();
    let page = account(&s, &mut other).await;
    let fields = vec![
        ("csrf".to_string(), csrf_of(&page.body)),
        ("id".to_string(), id),
    ];
    let r = other.post(&s.url("/account/keys/revoke"), &fields).await;
    assert_eq!(r.status, 303);
    assert_eq!(s.me(&made[1]).await["email"], "nia@example.com");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_secret_is_made_shown_and_rotated_on_the_account_page() {
    let s = TestServer::start().await;
    s.person("wen@example.com", "wen's long password");
    let mut b = signed_in_browser(&s, "wen@example.com", "wen's long password").await;
    let page = account(&s, &mut b).await;
    assert!(page.body.contains("No secret yet"), "{}", page.body);
    assert!(text_of_id(&page.body, "webhook-secret").is_none());
    // Viewing the page made nothing.
    assert!(
        user_record(&s, "wen@example.com")
            .webhook_secret_enc
            .is_none()
    );

    let r = submit(&s, &mut b, &page, "/account/webhook-secret", &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["cache-control"], "no-store");
    let first = text_of_id(&r.body, "webhook-secret").expect("secret shown");
    assert!(first.starts_with("whsec_"), "{first}");
    assert!(
        text_of_id(&r.body, "webhook-overlap").is_none(),
        "nothing replaced yet"
    );
    // The API shows the same secret to the same person.
    let key = s.admin(AdminRequest::KeyIssue {
        email: "wen@example.com".into(),
    })["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, v) = s.get(&key, "/api/pictor/v1/webhook-secret").await;
    assert_eq!(v["secret"], first.as_str());

    let page = account(&s, &mut b).await;
    assert_eq!(
        text_of_id(&page.body, "webhook-secret").as_deref(),
        Some(first.as_str())
    );
    assert!(page.body.contains("Rotate the secret"));
    let r = submit(&s, &mut b, &page, "/account/webhook-secret", &[]).await;
    let second = text_of_id(&r.body, "webhook-secret").unwrap();
    assert_ne!(first, second);
    assert!(
        text_of_id(&r.body, "webhook-overlap").is_some(),
        "{}",
        r.body
    );
    let (_, v) = s.get(&key, "/api/pictor/v1/webhook-secret").await;
    assert_eq!(v["secret"], second.as_str());
    assert!(v["previous_valid_until"].as_u64().is_some());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_password_ends_other_sessions() {
    let s = TestServer::start().await;
    let (email, old_pw, new_pw) = (
        "fay@example.com",
        "fay's old long password",
        "fay's new long password",
    );
    s.person(email, old_pw);
    let mut a = signed_in_browser(&s, email, old_pw).await;
    let mut other = signed_in_browser(&s, email, old_pw).await;
    account(&s, &mut other).await;

    let page = account(&s, &mut a).await;
    let r = submit(
        &s,
        &mut a,
        &page,
        "/account/password",
        &[
            ("current_password", "not my password"),
            ("new_password", new_pw),
            ("new_password2", new_pw),
        ],
    )
    .await;
    assert_eq!(r.status, 401);
    assert!(r.body.contains("current password is not right"));
    let r = submit(
        &s,
        &mut a,
        &page,
        "/account/password",
        &[
            ("current_password", old_pw),
            ("new_password", new_pw),
            ("new_password2", "something else entirely"),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    let r = submit(
        &s,
        &mut a,
        &page,
        "/account/password",
        &[
            ("current_password", old_pw),
            ("new_password", "short"),
            ("new_password2", "short"),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    account(&s, &mut other).await;

    let r = submit(
        &s,
        &mut a,
        &page,
        "/account/password",
        &[
            ("current_password", old_pw),
            ("new_password", new_pw),
            ("new_password2", new_pw),
        ],
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location.as_deref(), Some("/account?done=password"));
    let page = a.follow(&s.base, r).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Your password was changed"));
    let r = other.get(&s.url("/account")).await;
    assert_eq!(r.status, 303, "the other session ended");

    let mut fresh = Browser::new();
    assert_eq!(sign_in(&s, &mut fresh, email, old_pw).await.status, 401);
    assert_eq!(sign_in(&s, &mut fresh, email, new_pw).await.status, 303);
    s.stop().await;
}

/// Recovery without a mail server: an administrator's one-time link (admin page or the admin
/// command) sets a new password, ends every session, works once, for 24 hours, and a newer link
/// replaces an older one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_link_sets_a_new_password_once() {
    let s = TestServer::start().await;
    admin_person(&s, "kim@example.com", "kim's long password");
    let (email, old_pw, new_pw) = (
        "hal@example.com",
        "hal's forgotten password",
        "hal's new long password",
    );
    s.person(email, old_pw);
    let mut elsewhere = signed_in_browser(&s, email, old_pw).await;
    let hal = user_record(&s, email).user_id().to_string();

    // The admin makes the link on the admin page; it is shown once.
    let mut admin = signed_in_browser(&s, "kim@example.com", "kim's long password").await;
    let page = admin.get(&s.url("/admin")).await;
    let action = format!("/admin/users/{hal}/reset-link");
    let r = submit(&s, &mut admin, &page, &action, &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let link = text_of_id(&r.body, "reset-link").expect("link shown");
    assert!(link.starts_with(&s.url("/reset?token=")), "{link}");
    assert!(
        !admin.get(&s.url("/admin")).await.body.contains(&link),
        "shown once"
    );

    // The person opens it.
    let mut b = Browser::new();
    let page = b.get(&link).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(email), "{}", page.body);
    // Refused, nothing changes: passwords that differ, a password too short, a stale form.
    let r = submit(
        &s,
        &mut b,
        &page,
        "/reset",
        &[
            ("new_password", new_pw),
            ("new_password2", "another one entirely"),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    let r = submit(
        &s,
        &mut b,
        &page,
        "/reset",
        &[("new_password", "short"), ("new_password2", "short")],
    )
    .await;
    assert_eq!(r.status, 400);
    let r = submit(
        &s,
        &mut b,
        &page,
        "/reset",
        &[
            ("csrf", "stale"),
            ("new_password", new_pw),
            ("new_password2", new_pw),
        ],
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        sign_in(&s, &mut Browser::new(), email, old_pw).await.status,
        303,
        "old password still good"
    );

    let r = submit(
        &s,
        &mut b,
        &page,
        "/reset",
        &[("new_password", new_pw), ("new_password2", new_pw)],
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location.as_deref(), Some("/login?done=reset"));
    let page = b.follow(&s.base, r).await;
    assert!(
        page.body.contains("Your password was changed"),
        "{}",
        page.body
    );
    assert_eq!(
        elsewhere.get(&s.url("/account")).await.status,
        303,
        "other sessions ended"
    );
    assert_eq!(
        sign_in(&s, &mut Browser::new(), email, old_pw).await.status,
        401
    );
    assert_eq!(
        sign_in(&s, &mut Browser::new(), email, new_pw).await.status,
        303
    );

    // Once only.
    let r = b.get(&link).await;
    assert_eq!(r.status, 410);
    assert!(
        r.body.contains("This link does not work") && r.body.contains("href=\"/account\""),
        "{}",
        r.body
    );

    // A newer link replaces an older one; a link lasts 24 hours.
    let make = || {
        let v = s.admin(AdminRequest::UserResetLink {
            email: email.into(),
        });
        s.url(v["reset_path"].as_str().unwrap())
    };
    let (first, second) = (make(), make());
    assert_eq!(b.get(&first).await.status, 410, "replaced");
    assert_eq!(b.get(&second).await.status, 200);
    s.clock.advance(24 * 3600 * 1000 + 1);
    assert_eq!(b.get(&second).await.status, 410, "expired");
    // Unknown and empty tokens.
    assert_eq!(b.get(&s.url("/reset?token=nope")).await.status, 410);
    assert_eq!(b.get(&s.url("/reset")).await.status, 410);
    s.stop().await;
}

/// Deleting an account: the owner with their password and a ticked box (not while a picture is
/// being made), an administrator on the admin page or with `user remove`. Everything of the
/// person goes — profile, keys, sessions, jobs, pictures — and the ledger keeps its rows by
/// account number, with one `closed` row that writes the balance off, so they still add up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_is_deleted_with_its_pictures_and_the_books_still_balance() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(std::sync::Arc::new(gate.clone())).await;
    admin_person(&s, "root@example.com", "root's long password");
    let (email, pw) = ("dee@example.com", "dee's long password");
    s.person(email, pw);
    let key = s.admin(AdminRequest::KeyIssue {
        email: email.into(),
    })["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let mut b = signed_in_browser(&s, email, pw).await;
    let page = account(&s, &mut b).await;
    let r = submit(&s, &mut b, &page, "/account/keys", &[("label", "script")]).await;
    let named = text_of_id(&r.body, "new-api-key").unwrap();

    // One picture made; a second one in the making.
    gate.open();
    let (st, job) = s
        .generate(&key, serde_json::json!({"prompt": "a lighthouse"}))
        .await;
    assert_eq!(st, 202, "{job}");
    let poll = format!(
        "/api/pictor/v1/jobs/{}?wait=30",
        job["job_id"].as_str().unwrap()
    );
    let (_, done) = s.get(&key, &poll).await;
    assert_eq!(done["status"], "done", "{done}");
    let picture = s
        .dir
        .path()
        .join("data")
        .join("images")
        .read_dir()
        .unwrap()
        .count();
    assert_eq!(picture, 1);
    gate.close();
    let (st, running) = s
        .generate(&key, serde_json::json!({"prompt": "a second one"}))
        .await;
    assert_eq!(st, 202, "{running}");
    let id = user_record(&s, email).id;

    // Refused, nothing changes: no confirmation, a wrong password, a picture in the making.
    let page = account(&s, &mut b).await;
    let r = submit(&s, &mut b, &page, "/account/delete", &[("password", pw)]).await;
    assert_eq!(r.status, 400);
    let r = submit(
        &s,
        &mut b,
        &page,
        "/account/delete",
        &[("password", "not it"), ("confirm", "yes")],
    )
    .await;
    assert_eq!(r.status, 401);
    let r = submit(
        &s,
        &mut b,
        &page,
        "/account/delete",
        &[("password", pw), ("confirm", "yes")],
    )
    .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("still being made"), "{}", r.body);
    assert_eq!(s.me(&key).await["email"], email);

    gate.open();
    let poll = format!(
        "/api/pictor/v1/jobs/{}?wait=30",
        running["job_id"].as_str().unwrap()
    );
    assert_eq!(s.get(&key, &poll).await.1["status"], "done");
    let balance = user_record(&s, email).balance;
    assert!(balance > 0);
    let r = submit(
        &s,
        &mut b,
        &page,
        "/account/delete",
        &[("password", pw), ("confirm", "yes")],
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location.as_deref(), Some("/login?done=deleted"));
    let page = b.follow(&s.base, r).await;
    assert!(
        page.body.contains("Your account was deleted"),
        "{}",
        page.body
    );

    // Gone: the profile, both keys, the session, the jobs, the pictures.
    assert!(s.store().user_by_email(email).unwrap().is_none());
    assert!(s.store().user(id).unwrap().is_none());
    for k in [&key, &named] {
        assert_eq!(s.get(k, "/api/pictor/v1/me").await.0, 401);
    }
    assert_eq!(b.get(&s.url("/account")).await.status, 303);
    assert_eq!(
        s.dir
            .path()
            .join("data")
            .join("images")
            .read_dir()
            .unwrap()
            .count(),
        0
    );
    assert_eq!(
        sign_in(&s, &mut Browser::new(), email, pw).await.status,
        401
    );
    // The books: the account number's rows add up to zero, the last one writing the balance off.
    let rows = s.store().ledger(id).unwrap();
    assert_eq!(rows.iter().map(|r| r.delta).sum::<i64>(), 0, "{rows:?}");
    let last = rows.last().unwrap();
    assert_eq!((last.delta, last.balance_after), (-balance, 0));
    assert_eq!(serde_json::to_value(last.reason).unwrap(), "closed");
    // The address is free again.
    s.person(email, "a brand new password");

    // An administrator deletes another account on the admin page (confirmation first), never
    // their own there, and never the only administrator anywhere.
    s.person("eve@example.com", "eve's long password");
    let eve = user_record(&s, "eve@example.com").user_id().to_string();
    let mut root = signed_in_browser(&s, "root@example.com", "root's long password").await;
    let page = root.get(&s.url("/admin")).await;
    let action = format!("/admin/users/{eve}/delete");
    let r = submit(&s, &mut root, &page, &action, &[]).await;
    assert_eq!(r.status, 400);
    let r = submit(&s, &mut root, &page, &action, &[("confirm", "yes")]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(
        s.store()
            .user_by_email("eve@example.com")
            .unwrap()
            .is_none()
    );
    let me = user_record(&s, "root@example.com");
    let fields = vec![
        ("csrf".to_string(), csrf_of(&page.body)),
        ("confirm".to_string(), "yes".to_string()),
    ];
    let r = root
        .post(
            &s.url(&format!("/admin/users/{}/delete", me.user_id())),
            &fields,
        )
        .await;
    assert_eq!(r.status, 400);
    let page = account(&s, &mut root).await;
    let r = submit(
        &s,
        &mut root,
        &page,
        "/account/delete",
        &[("password", "root's long password"), ("confirm", "yes")],
    )
    .await;
    assert_eq!(r.status, 409);
    assert!(r.body.contains("only administrator"), "{}", r.body);
    assert!(s.store().user(me.id).unwrap().is_some());
    s.stop().await;
}

/// The operator console: settings saved together (all or none) and audited; an account made on
/// the admin page; the live queue with cancel; a person's ledger and its CSV; the audit log with
/// who and when, and its CSV.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_change_settings_watch_the_queue_and_read_the_audit_log() {
    let gate = Gate::default();
    let s = TestServer::with_renderer(std::sync::Arc::new(gate.clone())).await;
    admin_person(&s, "op@example.com", "the operator's password");
    let mut op = signed_in_browser(&s, "op@example.com", "the operator's password").await;

    // Settings: a bad value anywhere changes nothing; good ones are saved and audited.
    let page = op.get(&s.url("/admin")).await;
    assert!(
        page.body.contains("id=\"set-prices.fast\""),
        "{}",
        page.body
    );
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/settings",
        &[("prices.fast", "3"), ("prices.edit", "0")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(
        r.body.contains("Nothing was changed") && r.body.contains("prices.edit"),
        "{}",
        r.body
    );
    assert_eq!(s.admin(AdminRequest::SettingsList)["prices.fast"], 1);
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/settings",
        &[("prices.fast", "3"), ("limits.daily", "9")],
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.body);
    let v = s.admin(AdminRequest::SettingsList);
    assert_eq!(
        (v["prices.fast"].as_u64(), v["limits.daily"].as_u64()),
        (Some(3), Some(9))
    );
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/settings",
        &[("prices.fast", "abc")],
    )
    .await;
    assert_eq!(r.status, 400);
    // A switch that is off is not sent: the form names its switches, and an absent one is 0.
    assert!(
        page.body.contains("role=\"switch\"") && page.body.contains("name=\"switches\""),
        "{}",
        page.body
    );
    let page = op.get(&s.url("/admin")).await;
    let mut fields = form_fields(&page.body, "/admin/settings");
    assert!(
        fields.contains(&("registration_open".into(), "1".into())),
        "{fields:?}"
    );
    fields.retain(|(k, _)| k != "registration_open" && k != "limits.daily");
    set_field(&mut fields, "signup_approval", "1");
    // Naming a number among the switches does not zero it.
    set_field(
        &mut fields,
        "switches",
        "registration_open signup_approval limits.daily",
    );
    let r = op.post(&s.url("/admin/settings"), &fields).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let v = s.admin(AdminRequest::SettingsList);
    assert_eq!(
        (
            v["registration_open"].as_u64(),
            v["signup_approval"].as_u64()
        ),
        (Some(0), Some(1))
    );
    assert_eq!(v["limits.daily"].as_u64(), Some(9));

    // An account made on the page, with credits; its page follows.
    let page = op.get(&s.url("/admin")).await;
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/users",
        &[
            ("email", "new@example.com"),
            ("credits", "12"),
            ("pro", "yes"),
        ],
    )
    .await;
    // No password given: the answer shows the link that lets the person choose one.
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("It has no password yet"), "{}", r.body);
    let link = text_of_id(&r.body, "reset-link").unwrap();
    assert!(link.starts_with(&s.url("/reset?token=")), "{link}");
    let new = user_record(&s, "new@example.com");
    assert!(new.pro && new.balance == 12);

    // Administrator rights, a daily limit and an API key, from the page.
    let id = new.user_id().to_string();
    let users = op.get(&s.url("/admin")).await;
    let me = user_record(&s, "op@example.com").user_id().to_string();
    let path = |what: &str| format!("/admin/users/{id}/{what}");
    let r = submit(&s, &mut op, &users, &path("admin"), &[]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(user_record(&s, "new@example.com").admin);
    let users = op.get(&s.url("/admin")).await;
    assert!(users.body.contains("Remove administrator"));
    let r = submit(&s, &mut op, &users, &path("admin"), &[]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(!user_record(&s, "new@example.com").admin);
    // One's own rights are not removed here (so one is always left).
    let mut fields = form_fields(&users.body, &path("admin"));
    set_field(&mut fields, "value", "false");
    let r = op
        .post(&s.url(&format!("/admin/users/{me}/admin")), &fields)
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(user_record(&s, "op@example.com").admin);
    let r = submit(&s, &mut op, &users, &path("daily-limit"), &[("limit", "7")]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(user_record(&s, "new@example.com").daily_limit, Some(7));
    let r = submit(
        &s,
        &mut op,
        &users,
        &path("daily-limit"),
        &[("limit", "many")],
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("whole number"), "{}", r.body);
    let r = submit(&s, &mut op, &users, &path("daily-limit"), &[("limit", "")]).await;
    assert_eq!(r.status, 303);
    assert_eq!(
        user_record(&s, "new@example.com").daily_limit,
        None,
        "the plan's again"
    );
    let r = submit(&s, &mut op, &users, &path("key"), &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let issued = text_of_id(&r.body, "issued-key").unwrap();
    assert!(issued.starts_with("vx_"), "{issued}");
    let (status, me_json) = s.get(&issued, "/api/pictor/v1/me").await;
    assert_eq!(status, 200, "the key works: {me_json}");
    assert_eq!(me_json["email"], "new@example.com");
    let r = submit(
        &s,
        &mut op,
        &page,
        "/admin/users",
        &[("email", "new@example.com")],
    )
    .await;
    assert_eq!(r.status, 400, "a duplicate");

    // The queue: a job in the making, with its person; cancelled from here, refunded.
    let key = s.admin(AdminRequest::KeyIssue {
        email: "new@example.com".into(),
    })["api_key"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, job) = s
        .generate(&key, serde_json::json!({"prompt": "a boat"}))
        .await;
    let job_id = job["job_id"].as_str().unwrap().to_string();
    let page = op.get(&s.url("/admin/queue")).await;
    assert!(
        page.body.contains(&job_id) && page.body.contains("new@example.com"),
        "{}",
        page.body
    );
    assert!(page.body.contains("http-equiv=\"refresh\""));
    let r = submit(&s, &mut op, &page, "/admin/queue/cancel", &[]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let (_, v) = s.get(&key, &format!("/api/pictor/v1/jobs/{job_id}")).await;
    assert_eq!(v["error_code"], "cancelled", "{v}");
    assert_eq!(user_record(&s, "new@example.com").balance, 12, "refunded");
    gate.open();
    assert!(
        op.get(&s.url("/admin/queue"))
            .await
            .body
            .contains("Nothing is waiting")
    );

    // The person's page: ledger rows and totals; the CSV has every row.
    s.admin(AdminRequest::CreditsGrant {
        email: "new@example.com".into(),
        amount: -2,
    });
    let page = op
        .get(&s.url(&format!("/admin/users/{}", new.user_id())))
        .await;
    assert_eq!(page.status, 200);
    assert_eq!(text_of_id(&page.body, "balance").as_deref(), Some("10"));
    assert!(
        page.body.contains("charge") && page.body.contains("refund"),
        "{}",
        page.body
    );
    let r = op
        .get(&s.url(&format!("/admin/users/{}/ledger.csv", new.user_id())))
        .await;
    assert_eq!(r.status, 200);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let lines: Vec<&str> = r.body.lines().collect();
    assert_eq!(lines[0], "seq,at_utc,reason,delta,balance_after,job_id,app");
    assert_eq!(
        lines.len(),
        1 + s.store().ledger(new.id).unwrap().len(),
        "{}",
        r.body
    );
    assert!(
        lines.iter().any(|l| l.contains(",grant,-2,10,")),
        "{}",
        r.body
    );

    // The audit log: who, what, about whom.
    let page = op.get(&s.url("/admin/audit")).await;
    for needle in [
        "settings.set",
        "prices.fast 1 → 3",
        "limits.daily 25 → 9",
        "user.add",
        "job.cancel",
        "credits.grant",
        "-2 credits",
        "op@example.com",
        "cli",
    ] {
        assert!(page.body.contains(needle), "{needle}: {}", page.body);
    }
    assert!(
        !page.body.contains("prices.edit"),
        "the refused change is not logged"
    );
    let csv = op.get(&s.url("/admin/audit.csv")).await;
    assert!(
        csv.body
            .starts_with("seq,at_utc,actor,action,user,detail\r\n"),
        "{}",
        csv.body
    );
    // Only administrators.
    s.person("plain@example.com", "a plain long password");
    let mut plain = signed_in_browser(&s, "plain@example.com", "a plain long password").await;
    for path in [
        "/admin/queue",
        "/admin/audit",
        "/admin/audit.csv",
        &format!("/admin/users/{}", new.user_id()),
    ] {
        assert_eq!(plain.get(&s.url(path)).await.status, 403, "{path}");
    }
    s.stop().await;
}

/// The pages speak Russian to a browser that asks for it (Accept-Language) or chose it with the
/// switcher (a cookie, which wins); the `lang` attribute follows; error pages too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_follow_the_language_asked_for_and_the_switcher() {
    let s = TestServer::start().await;
    // Set up (before that the sign-in page offers no registration).
    s.finish_setup();
    let get = |lang: Option<&'static str>, cookie: Option<&'static str>, path: &'static str| {
        let (client, url) = (s.client.clone(), s.url(path));
        async move {
            let mut r = client.get(url);
            if let Some(l) = lang {
                r = r.header("accept-language", l);
            }
            if let Some(c) = cookie {
                r = r.header("cookie", c);
            }
            r.send().await.unwrap().text().await.unwrap()
        }
    };
    let en = get(None, None, "/login").await;
    assert!(
        en.contains(r#"<html lang="en">"#) && en.contains("<h1>Sign in</h1>"),
        "{en}"
    );
    assert!(
        en.contains(r#"href="/lang?to=ru&#38;back=/login""#) && en.contains("Русский"),
        "{en}"
    );
    let ru = get(Some("ru-RU,ru;q=0.9,en;q=0.8"), None, "/login").await;
    assert!(
        ru.contains(r#"<html lang="ru">"#) && ru.contains("<h1>Вход</h1>"),
        "{ru}"
    );
    assert!(
        ru.contains("Эл. почта") && ru.contains("Нет учётной записи?"),
        "{ru}"
    );
    assert!(ru.contains(r#"href="/lang?to=en&#38;back=/login""#) && ru.contains("English"));
    // The saved choice wins over the browser's.
    let chosen = get(Some("ru"), Some("pictor_lang=en"), "/login").await;
    assert!(chosen.contains(r#"<html lang="en">"#) && chosen.contains("<h1>Sign in</h1>"));
    let r = get(None, Some("pictor_lang=ru"), "/reset?token=nope").await;
    assert!(
        r.contains("Эта ссылка не работает") && r.contains("Кабинет"),
        "{r}"
    );

    // The switcher saves the choice and comes back (to this site only).
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = http
        .get(s.url("/lang?to=ru&back=/register"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/register");
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.starts_with("pictor_lang=ru") && cookie.contains("Max-Age="),
        "{cookie}"
    );
    for bad in ["//evil.example", "https://evil.example/x"] {
        let r = http
            .get(s.url(&format!("/lang?to=ru&back={bad}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["location"], "/account", "{bad}");
    }
    let r = http
        .get(s.url("/lang?to=xx&back=/login"))
        .send()
        .await
        .unwrap();
    assert!(
        r.headers().get("set-cookie").is_none(),
        "an unknown language is not saved"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn totp_enable_then_sign_in_needs_a_code_and_recovery_codes_work_once() {
    let s = TestServer::start().await;
    let (email, pw) = ("gus@example.com", "gus's long password");
    s.person(email, pw);
    let mut b = signed_in_browser(&s, email, pw).await;
    let page = account(&s, &mut b).await;
    let setup = submit(&s, &mut b, &page, "/account/totp/start", &[]).await;
    assert_eq!(setup.status, 200);
    assert_eq!(setup.headers["cache-control"], "no-store");
    assert!(setup.body.contains("<svg"), "QR code inline");
    let secret = text_of_id(&setup.body, "totp-secret").unwrap();
    assert!(
        user_record(&s, email).totp_secret_enc.is_none(),
        "not before confirming"
    );

    // A wrong code (none of the codes of the accepted window) is refused; the same secret is
    // offered again.
    let now = s.clock.now();
    let window: Vec<String> = [now - 30_000, now, now + 30_000]
        .iter()
        .map(|t| totp_code(&secret, email, *t))
        .collect();
    let wrong = ["000000", "111111", "222222", "333333"]
        .into_iter()
        .find(|c| !window.iter().any(|w| w == c))
        .unwrap();
    let r = submit(
        &s,
        &mut b,
        &setup,
        "/account/totp/confirm",
        &[("code", wrong)],
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("role=\"alert\""));
    assert_eq!(
        text_of_id(&r.body, "totp-secret").unwrap(),
        secret,
        "same secret offered again"
    );
    // A tampered pending field is refused.
    let code = totp_code(&secret, email, s.clock.now());
    let t = submit(
        &s,
        &mut b,
        &setup,
        "/account/totp/confirm",
        &[("code", &code), ("pending", "AAAA")],
    )
    .await;
    assert_eq!(t.status, 400);
    assert!(user_record(&s, email).totp_secret_enc.is_none());

    let done = submit(
        &s,
        &mut b,
        &setup,
        "/account/totp/confirm",
        &[("code", &code)],
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    let codes_html = &done.body[done.body.find("id=\"recovery-codes\"").unwrap()..];
    let codes_html = &codes_html[..codes_html.find("</ul>").unwrap()];
    let codes: Vec<String> = codes_html
        .split("<li class=\"mono\">")
        .skip(1)
        .map(|c| c[..c.find('<').unwrap()].to_string())
        .collect();
    assert_eq!(codes.len(), 10, "{codes_html}");
    let user = user_record(&s, email);
    assert!(user.totp_secret_enc.is_some());
    assert_eq!(user.recovery_codes.len(), 10);
    let page = account(&s, &mut b).await;
    assert!(!page.body.contains(&codes[0]), "recovery codes shown once");
    assert!(page.body.contains("10 recovery codes left"));

    // Sign out, sign in: the password alone leaves a pending session that is not signed in.
    sign_out(&s, &mut b).await;
    let r = sign_in(&s, &mut b, email, pw).await;
    assert_eq!(r.status, 303);
    assert!(r.location.as_deref().unwrap().starts_with("/login/totp"));
    let pending_id = b.cookies["pictor_session"].clone();
    let r = b.get(&s.url("/account")).await;
    assert_eq!(r.status, 303, "a pending session is not signed in");
    let step = b.get(&s.url("/login/totp")).await;
    assert_eq!(step.status, 200);
    // The code used to confirm cannot be replayed; the next step's code works.
    let r = submit(&s, &mut b, &step, "/login/totp", &[("code", &code)]).await;
    assert_eq!(r.status, 401);
    s.clock.advance(30_000);
    let next = totp_code(&secret, email, s.clock.now());
    let r = submit(&s, &mut b, &step, "/login/totp", &[("code", &next)]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_ne!(
        b.cookies["pictor_session"], pending_id,
        "new session id after the second factor"
    );
    account(&s, &mut b).await;

    // A recovery code works once.
    for (attempt, expected) in [(1, 303), (2, 401)] {
        sign_out(&s, &mut b).await;
        assert_eq!(sign_in(&s, &mut b, email, pw).await.status, 303);
        let step = b.get(&s.url("/login/totp")).await;
        let r = submit(&s, &mut b, &step, "/login/totp", &[("code", &codes[3])]).await;
        assert_eq!(r.status, expected, "recovery code use #{attempt}");
    }
    assert_eq!(user_record(&s, email).recovery_codes.len(), 9);

    // Turning it off needs the password (or a code).
    let mut b = Browser::new();
    assert_eq!(sign_in(&s, &mut b, email, pw).await.status, 303);
    let step = b.get(&s.url("/login/totp")).await;
    let r = submit(&s, &mut b, &step, "/login/totp", &[("code", &codes[5])]).await;
    assert_eq!(r.status, 303);
    let page = account(&s, &mut b).await;
    let r = submit(
        &s,
        &mut b,
        &page,
        "/account/totp/disable",
        &[("password", "wrong one!")],
    )
    .await;
    assert_eq!(r.status, 401);
    assert!(user_record(&s, email).totp_secret_enc.is_some());
    let r = submit(
        &s,
        &mut b,
        &page,
        "/account/totp/disable",
        &[("password", pw)],
    )
    .await;
    assert_eq!(r.status, 303);
    let user = user_record(&s, email);
    assert!(user.totp_secret_enc.is_none() && user.recovery_codes.is_empty());
    sign_out(&s, &mut b).await;
    let r = sign_in(&s, &mut b, email, pw).await;
    assert_eq!(
        r.location.as_deref(),
        Some("/account"),
        "no code asked any more"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorized_apps_are_listed_and_revoke_ends_their_refresh_tokens() {
    let s = TestServer::start().await;
    let (email, pw) = ("hal@example.com", "hal's long password");
    s.person(email, pw);
    let (app, secret) = s.oauth_client("photo-gallery", &[REDIRECT]);
    let mut b = Browser::new();
    let code = code_for(&s, &mut b, &app, email, pw).await;
    let (status, tokens) = exchange(&s, &app, &secret, &code).await;
    assert_eq!(status, 200, "{tokens}");
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();
    let access = tokens["access_token"].as_str().unwrap().to_string();

    // A second app is consented to but its code never exchanged: listed too (its consent is
    // remembered).
    let (app2, _) = s.oauth_client("zine", &[REDIRECT]);
    code_for(&s, &mut b, &app2, email, pw).await;

    let page = account(&s, &mut b).await;
    assert!(page.body.contains("photo-gallery"));
    assert!(page.body.contains("zine"));
    assert!(page.body.contains("See your e-mail address"));
    let fields = form_fields(&page.body, "/account/apps/revoke");
    assert!(
        fields.contains(&("client".to_string(), app.clone())),
        "{fields:?}"
    );
    let r = submit(&s, &mut b, &page, "/account/apps/revoke", &[]).await;
    assert_eq!(r.status, 303);
    let page = b.follow(&s.base, r).await;
    assert_eq!(page.status, 200);
    assert!(!page.body.contains("photo-gallery"), "{}", page.body);
    assert!(page.body.contains("access was revoked"));
    assert!(page.body.contains("zine"));
    let r = submit(&s, &mut b, &page, "/account/apps/revoke", &[]).await;
    assert_eq!(r.status, 303);
    let uid = user_record(&s, email).id;
    assert!(s.store().consent(uid, "zine").unwrap().is_none());
    let page = account(&s, &mut b).await;
    assert!(!page.body.contains("zine"));
    assert!(
        s.store()
            .user_grants(user_record(&s, email).id, s.clock.now())
            .unwrap()
            .is_empty()
    );

    let (status, v) = token_call(
        &s,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &refresh),
            ("client_id", &app),
            ("client_secret", &secret),
        ],
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"], "invalid_grant");
    let r = http()
        .get(s.url("/oauth/userinfo"))
        .bearer_auth(&access)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "its access token ended too");
    // The consent is forgotten: authorizing again asks again.
    let url = authorize_url(
        &s.base,
        &[
            ("response_type", "code"),
            ("client_id", app.as_str()),
            ("redirect_uri", REDIRECT),
            ("state", "st-2"),
        ],
    );
    let r = b.get(&url).await;
    assert_eq!(r.status, 200, "consent page again: {:?}", r.location);
    assert!(r.body.contains("action=\"/oauth/authorize\""));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_pages_clients_and_users() {
    let s = TestServer::start().await;
    admin_person(&s, "root@example.com", "root's long password");
    s.person("ivy@example.com", "ivy's long password");

    let mut ivy = signed_in_browser(&s, "ivy@example.com", "ivy's long password").await;
    let r = ivy.get(&s.url("/admin")).await;
    assert_eq!(r.status, 403, "not for non-admins");
    let ivy_page = account(&s, &mut ivy).await;
    let mut fields = form_fields(&ivy_page.body, "/logout");
    fields.push(("name".into(), "sneaky".into()));
    fields.push(("redirect_uris".into(), REDIRECT.into()));
    assert_eq!(
        ivy.post(&s.url("/admin/clients"), &fields).await.status,
        403
    );
    assert!(s.store().client("sneaky").unwrap().is_none());

    let mut root = signed_in_browser(&s, "root@example.com", "root's long password").await;
    let page = root.get(&s.url("/admin")).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("ivy@example.com"));

    // Client registration: validation errors on the page, then the secret once.
    let r = submit(
        &s,
        &mut root,
        &page,
        "/admin/clients",
        &[("name", "bad name!"), ("redirect_uris", REDIRECT)],
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("role=\"alert\""));
    let r = submit(
        &s,
        &mut root,
        &page,
        "/admin/clients",
        &[
            ("name", "notes"),
            ("redirect_uris", "https://good@evil.example/cb"),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("user information"));
    // A bad post-logout URI refuses the whole registration (nothing half made).
    let r = submit(
        &s,
        &mut root,
        &page,
        "/admin/clients",
        &[
            ("name", "notes"),
            ("redirect_uris", REDIRECT),
            ("post_logout_redirect_uris", "javascript:alert(1)"),
        ],
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("http or https"), "{}", r.body);
    assert!(s.store().client("notes").unwrap().is_none());
    let r = submit(
        &s,
        &mut root,
        &page,
        "/admin/clients",
        &[
            ("name", "notes"),
            (
                "redirect_uris",
                &format!("{REDIRECT}\r\n\r\nhttps://notes.example/cb\r\n"),
            ),
            ("post_logout_redirect_uris", "https://notes.example/bye\r\n"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let secret = text_of_id(&r.body, "new-app-secret").unwrap();
    assert!(secret.len() > 30);
    let client = s.store().client("notes").unwrap().unwrap();
    assert_eq!(
        client.redirect_uris,
        vec![REDIRECT, "https://notes.example/cb"]
    );
    assert_eq!(
        client.post_logout_redirect_uris,
        vec!["https://notes.example/bye"]
    );
    let page = root.get(&s.url("/admin")).await;
    assert!(!page.body.contains(&secret), "the secret is shown once");
    assert!(page.body.contains("https://notes.example/cb"));
    assert!(
        page.body.contains("After sign-out:") && page.body.contains("https://notes.example/bye")
    );
    let r = submit(
        &s,
        &mut root,
        &page,
        "/admin/clients",
        &[("name", "notes"), ("redirect_uris", REDIRECT)],
    )
    .await;
    assert_eq!(r.status, 400, "duplicate name");

    // The registered client works at the token endpoint.
    let mut ivy2 = Browser::new();
    let code = code_for(
        &s,
        &mut ivy2,
        "notes",
        "ivy@example.com",
        "ivy's long password",
    )
    .await;
    let (status, tokens) = exchange(&s, "notes", &secret, &code).await;
    assert_eq!(status, 200, "{tokens}");
    assert!(tokens["id_token"].is_string());

    // Users: credits (positive and negative, bad input refused), PRO, ban.
    let ivy_id = user_record(&s, "ivy@example.com").user_id().to_string();
    let credits = format!("/admin/users/{ivy_id}/credits");
    let r = submit(&s, &mut root, &page, &credits, &[("amount", "50")]).await;
    assert_eq!(r.status, 303);
    assert_eq!(user_record(&s, "ivy@example.com").balance, 55);
    let r = submit(&s, &mut root, &page, &credits, &[("amount", "-15")]).await;
    assert_eq!(r.status, 303);
    assert_eq!(user_record(&s, "ivy@example.com").balance, 40);
    for bad in ["ten", "", "0", "99999999999999"] {
        let r = submit(&s, &mut root, &page, &credits, &[("amount", bad)]).await;
        assert_eq!(r.status, 400, "amount {bad:?}");
        assert!(r.body.contains("role=\"alert\""));
    }
    assert_eq!(user_record(&s, "ivy@example.com").balance, 40);
    let mut fields = form_fields(&page.body, "/logout");
    fields.push(("amount".into(), "5".into()));
    let r = root
        .post(&s.url("/admin/users/usr_0000000000000000/credits"), &fields)
        .await;
    assert_eq!(r.status, 404);

    let pro = format!("/admin/users/{ivy_id}/pro");
    let r = submit(&s, &mut root, &page, &pro, &[]).await;
    assert_eq!(r.status, 303);
    assert!(user_record(&s, "ivy@example.com").pro);
    let page = root.get(&s.url("/admin")).await;
    assert!(page.body.contains("Remove PRO"));

    let ban = format!("/admin/users/{ivy_id}/ban");
    account(&s, &mut ivy).await;
    // A ban asks for its confirmation first.
    let r = submit(&s, &mut root, &page, &ban, &[]).await;
    assert_eq!(r.status, 400);
    assert!(r.body.contains("Tick the confirmation box"), "{}", r.body);
    assert!(!user_record(&s, "ivy@example.com").banned);
    let r = submit(&s, &mut root, &page, &ban, &[("confirm", "yes")]).await;
    assert_eq!(r.status, 303);
    assert!(user_record(&s, "ivy@example.com").banned);
    assert_eq!(
        ivy.get(&s.url("/account")).await.status,
        303,
        "ban ends the sessions"
    );
    assert_eq!(
        sign_in(
            &s,
            &mut Browser::new(),
            "ivy@example.com",
            "ivy's long password"
        )
        .await
        .status,
        403
    );
    let page = root.get(&s.url("/admin")).await;
    let r = submit(&s, &mut root, &page, &ban, &[]).await;
    assert_eq!(r.status, 303);
    assert!(!user_record(&s, "ivy@example.com").banned);
    // No self-ban.
    let root_id = user_record(&s, "root@example.com").user_id().to_string();
    let mut fields = form_fields(&page.body, "/logout");
    fields.push(("value".into(), "true".into()));
    let r = root
        .post(&s.url(&format!("/admin/users/{root_id}/ban")), &fields)
        .await;
    assert_eq!(r.status, 400);
    assert!(!user_record(&s, "root@example.com").banned);

    // Removing the client ends it (after its confirmation).
    let page = root.get(&s.url("/admin")).await;
    let r = submit(&s, &mut root, &page, "/admin/clients/remove", &[]).await;
    assert_eq!(r.status, 400);
    assert!(s.store().client("notes").unwrap().is_some());
    let r = submit(
        &s,
        &mut root,
        &page,
        "/admin/clients/remove",
        &[("confirm", "yes")],
    )
    .await;
    assert_eq!(r.status, 303);
    assert!(s.store().client("notes").unwrap().is_none());
    let (status, v) = token_call(
        &s,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
            ("client_id", "notes"),
            ("client_secret", &secret),
        ],
    )
    .await;
    assert_eq!(status, 401, "{v}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_name_and_avatar() {
    let s = TestServer::start().await;
    let (email, pw) = ("jo@example.com", "jo's long password");
    s.person(email, pw);
    let mut b = signed_in_browser(&s, email, pw).await;
    let page = account(&s, &mut b).await;
    let r = submit(&s, &mut b, &page, "/account/profile", &[("name", "   ")]).await;
    assert_eq!(r.status, 400);
    let r = submit(
        &s,
        &mut b,
        &page,
        "/account/profile",
        &[("name", " Jo <Smith> ")],
    )
    .await;
    assert_eq!(r.status, 303);
    assert_eq!(user_record(&s, email).name, "Jo <Smith>");
    let page = account(&s, &mut b).await;
    assert!(page.body.contains("Jo &#60;Smith&#62;") || page.body.contains("Jo &lt;Smith&gt;"));

    let csrf = csrf_of(&page.body);
    let form = |bytes: Vec<u8>| {
        reqwest::multipart::Form::new()
            .text("csrf", csrf.clone())
            .part("avatar", png_part(bytes))
    };
    let (status, _, body) = post_multipart(
        &b,
        &s.url("/account/avatar"),
        form(b"not an image".to_vec()),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains("cannot be used"));
    let (status, _, _) = post_multipart(
        &b,
        &s.url("/account/avatar"),
        form(vec![0x89; 5 * 1024 * 1024 + 1]),
    )
    .await;
    assert_eq!(status, 413);

    let (status, loc, body) =
        post_multipart(&b, &s.url("/account/avatar"), form(png_bytes(600, 300))).await;
    assert_eq!(status, 303, "{body}");
    assert_eq!(loc.as_deref(), Some("/account?done=avatar"));
    let user = user_record(&s, email);
    let token = user.avatar.clone().unwrap();
    assert_eq!(token.len(), 32);
    let file = s.data_dir().join("avatars").join(format!("{token}.png"));
    assert!(file.exists());
    let url = s.url(&format!("/avatars/{}.png", user.user_id()));
    let pic = s
        .client
        .get(&url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let img = image::load_from_memory_with_format(&pic, image::ImageFormat::Png).unwrap();
    assert_eq!((img.width(), img.height()), (256, 256));

    // A second upload replaces the file; removing goes back to the generated picture.
    let (status, _, _) =
        post_multipart(&b, &s.url("/account/avatar"), form(png_bytes(100, 140))).await;
    assert_eq!(status, 303);
    assert!(!file.exists(), "the old picture is deleted");
    let page = account(&s, &mut b).await;
    let r = submit(&s, &mut b, &page, "/account/avatar/remove", &[]).await;
    assert_eq!(r.status, 303);
    assert!(user_record(&s, email).avatar.is_none());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_form_refuses_a_post_without_csrf() {
    let s = TestServer::start().await;
    let setup_url = s.handle.as_ref().unwrap().setup_url.clone().unwrap();
    let token = query_of(&setup_url)["token"].clone();
    let mut anon = Browser::new();
    anon.get(&setup_url).await;
    let r = anon
        .post(
            &s.url("/setup"),
            &[
                ("token".into(), token.clone()),
                ("email".into(), "x@example.com".into()),
                ("password".into(), "a long password".into()),
            ],
        )
        .await;
    assert_eq!(r.status, 403, "/setup");
    assert!(s.store().users().unwrap().is_empty());

    admin_person(&s, "kim@example.com", "kim's long password");
    s.person("lee@example.com", "lee's long password");
    s.oauth_client("some-app", &[REDIRECT]);
    let lee = user_record(&s, "lee@example.com").user_id().to_string();
    let mut b = signed_in_browser(&s, "kim@example.com", "kim's long password").await;
    let page = account(&s, &mut b).await;
    let csrf = csrf_of(&page.body);
    let forms: Vec<(String, Vec<(&str, &str)>)> = vec![
        ("/account/profile".into(), vec![("name", "Changed")]),
        ("/account/avatar/remove".into(), vec![]),
        (
            "/account/password".into(),
            vec![
                ("current_password", "kim's long password"),
                ("new_password", "another long one"),
                ("new_password2", "another long one"),
            ],
        ),
        ("/account/totp/start".into(), vec![]),
        (
            "/account/totp/confirm".into(),
            vec![("pending", "x"), ("code", "123456")],
        ),
        (
            "/account/totp/disable".into(),
            vec![("password", "kim's long password")],
        ),
        ("/account/key".into(), vec![]),
        ("/account/webhook-secret".into(), vec![]),
        ("/account/apps/revoke".into(), vec![("client", "some-app")]),
        (
            "/account/apps/limits".into(),
            vec![("client", "some-app"), ("cap_daily", "1")],
        ),
        (
            "/admin/clients".into(),
            vec![("name", "csrf-app"), ("redirect_uris", REDIRECT)],
        ),
        ("/admin/clients/remove".into(), vec![("name", "some-app")]),
        (
            format!("/admin/users/{lee}/credits"),
            vec![("amount", "10")],
        ),
        (format!("/admin/users/{lee}/pro"), vec![("value", "true")]),
        (format!("/admin/users/{lee}/ban"), vec![("value", "true")]),
        ("/logout".into(), vec![]),
    ];
    for (path, fields) in &forms {
        let owned: Vec<(String, String)> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let r = b.post(&s.url(path), &owned).await;
        assert_eq!(r.status, 403, "{path} without csrf");
        // One error page for every form: the site's header and navigation, no OAuth wording.
        assert!(
            r.body.contains("Form expired")
                && r.body.contains("href=\"/playground\"")
                && !r.body.contains("application"),
            "{path}: {}",
            r.body
        );
        let mut wrong = owned.clone();
        wrong.push(("csrf".into(), "x".repeat(43)));
        let r = b.post(&s.url(path), &wrong).await;
        assert_eq!(r.status, 403, "{path} with a wrong csrf");
    }
    // The right token from another origin is refused too.
    let r = b
        .http
        .post(s.url("/account/key"))
        .header(
            "cookie",
            b.cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; "),
        )
        .header("origin", "https://evil.example")
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "cross-origin post");
    let (status, _, _) = post_multipart(
        &b,
        &s.url("/account/avatar"),
        reqwest::multipart::Form::new().part("avatar", png_part(png_bytes(10, 10))),
    )
    .await;
    assert_eq!(status, 403, "/account/avatar without csrf");

    // Nothing changed.
    let kim = user_record(&s, "kim@example.com");
    assert_eq!(kim.name, "The Admin");
    assert!(kim.api_key_hash.is_none() && kim.avatar.is_none() && kim.totp_secret_enc.is_none());
    let lee = user_record(&s, "lee@example.com");
    assert!(!lee.pro && !lee.banned && lee.balance == 5);
    assert!(s.store().client("some-app").unwrap().is_some());
    assert!(s.store().client("csrf-app").unwrap().is_none());
    account(&s, &mut b).await;
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_carry_security_headers_and_sign_in_rotates_the_session() {
    let s = TestServer::start().await;
    admin_person(&s, "max@example.com", "max's long password");
    let mut b = Browser::new();
    // A session id planted before sign-in is never adopted.
    b.cookies
        .insert("pictor_session".into(), "planted-by-an-attacker".into());
    let r = sign_in(&s, &mut b, "max@example.com", "max's long password").await;
    assert_eq!(r.status, 303);
    let first = b.cookies["pictor_session"].clone();
    assert_ne!(first, "planted-by-an-attacker");
    let set_cookie = r
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|c| c.starts_with("pictor_session="))
        .unwrap();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Lax"));

    for path in ["/account", "/admin", "/setup?token=nope", "/login"] {
        let page = b.get(&s.url(path)).await;
        let h = &page.headers;
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(csp.contains("default-src 'self'"), "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(h["referrer-policy"], "same-origin", "{path}");
        assert_eq!(h["cache-control"], "no-store", "{path}");
    }
    let page = account(&s, &mut b).await;
    let r = submit(&s, &mut b, &page, "/account/totp/start", &[]).await;
    assert!(r.headers["content-security-policy"].to_str().is_ok());

    // Signing in again (after signing out) gives another id.
    sign_out(&s, &mut b).await;
    assert_eq!(
        sign_in(&s, &mut b, "max@example.com", "max's long password")
            .await
            .status,
        303
    );
    assert_ne!(b.cookies["pictor_session"], first);
    s.stop().await;
}

/// The API documentation page runs "Try it out" as the signed-in person: it carries the
/// session's CSRF token, and the image API takes the session cookie only with that token in
/// `X-CSRF-Token` and from our own origin (a foreign page can send the cookie, never the
/// header). Signed out the page says how to sign in; the language follows the visitor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_page_tries_the_api_as_the_signed_in_person() {
    let s = TestServer::start().await;
    let mut anon = Browser::new();
    let page = anon.get(&s.url("/api/pictor/docs")).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("data-csrf=\"\""), "no token signed out");
    assert!(
        page.body.contains("/login?return_to=/api/pictor/docs"),
        "signed out, the page says how to sign in"
    );
    assert_eq!(page.headers["cache-control"], "no-store");

    s.person("docs@example.com", "a docs reader's password");
    let mut b = signed_in_browser(&s, "docs@example.com", "a docs reader's password").await;
    let page = b.get(&s.url("/api/pictor/docs")).await;
    assert!(
        page.body.contains("<strong>docs@example.com</strong>"),
        "{}",
        &page.body[..200]
    );
    let at = page.body.find("data-csrf=\"").unwrap() + "data-csrf=\"".len();
    let csrf = page.body[at..at + page.body[at..].find('"').unwrap()].to_string();
    assert!(csrf.len() > 20, "{csrf}");

    let http = reqwest::Client::new();
    let me = |headers: Vec<(&'static str, String)>| {
        let mut r = http.get(s.url("/api/pictor/v1/me"));
        for (k, v) in headers {
            r = r.header(k, v);
        }
        r.send()
    };
    let cookie = b.cookie_header();
    // The cookie alone, a wrong token, another origin: not a credential.
    for headers in [
        vec![("cookie", cookie.clone())],
        vec![("cookie", cookie.clone()), ("x-csrf-token", "wrong".into())],
        vec![
            ("cookie", cookie.clone()),
            ("x-csrf-token", csrf.clone()),
            ("origin", "https://evil.example".into()),
        ],
        vec![
            ("cookie", cookie.clone()),
            ("x-csrf-token", csrf.clone()),
            ("sec-fetch-site", "cross-site".into()),
        ],
        // Another browser's token.
        vec![("x-csrf-token", csrf.clone())],
    ] {
        let r = me(headers.clone()).await.unwrap();
        assert_eq!(r.status(), 401, "{headers:?}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error_code"], "unauthorized");
    }
    // The page's way: the cookie with its token, from our origin.
    let r = me(vec![
        ("cookie", cookie.clone()),
        ("x-csrf-token", csrf.clone()),
        ("origin", s.base.clone()),
    ])
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["email"], "docs@example.com");
    // And it makes jobs, charged to the person, which the job records as no app's.
    let r = http
        .post(s.url("/api/pictor/v1/generate"))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .json(&serde_json::json!({"prompt": "a red fox", "model": "fast"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let created: Value = r.json().await.unwrap();
    let job = http
        .get(format!("{}?wait=30", created["poll_url"].as_str().unwrap()))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(job["status"], "done", "{job}");
    assert!(job.get("client").is_none_or(Value::is_null), "{job}");
    // The webhook secret stays the API key's alone.
    let r = http
        .get(s.url("/api/pictor/v1/webhook-secret"))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Signed out, the session is gone: the token is worth nothing.
    sign_out(&s, &mut b).await;
    let r = me(vec![("cookie", cookie), ("x-csrf-token", csrf)])
        .await
        .unwrap();
    assert_eq!(r.status(), 401);

    // In Russian: the bar, the note, and a way back to English.
    anon.cookies.insert("pictor_lang".into(), "ru".into());
    let page = anon.get(&s.url("/api/pictor/docs")).await;
    for needle in [
        "API картинок",
        "Кабинет и ключи API",
        "Справочник ниже — на английском языке.",
        "/lang?to=en&amp;back=/api/pictor/docs",
    ] {
        assert!(page.body.contains(needle), "{needle}");
    }
    s.assert_books_balanced();
    s.stop().await;
}
