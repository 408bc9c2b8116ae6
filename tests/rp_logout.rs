//! RP-initiated logout (`end_session_endpoint`, OpenID Connect RP-Initiated Logout 1.0): a real
//! server, a browser session made through the sign-in and consent pages, an id_token from the
//! code exchange; then every way an app can ask Pictor to sign its user out, and every way such
//! a request can be bad (which must change nothing).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use pictor::ops::AdminRequest;
use serde_json::Value;

const REDIRECT: &str = "http://127.0.0.1:9/callback";
const BYE: &str = "http://127.0.0.1:9/signed-out?from=pictor";
const EMAIL: &str = "bob@example.com";
const PASSWORD: &str = "bob's long password";

/// Signs `browser` in through an authorize request of `app`; the id_token of the code exchange.
async fn sign_in(s: &TestServer, browser: &mut Browser, app: &str, secret: &str) -> String {
    let url = authorize_url(
        &s.base,
        &[
            ("response_type", "code"),
            ("client_id", app),
            ("redirect_uri", REDIRECT),
            ("scope", "openid profile"),
            ("state", "st"),
        ],
    );
    let back = s.sign_in_and_consent(browser, &url, EMAIL, PASSWORD).await;
    let code = query_of(&back)["code"].clone();
    let v: Value = exchange_code(&s.base, app, secret, REDIRECT, &code).await;
    v["id_token"].as_str().expect("an id_token").to_string()
}

async fn signed_in(s: &TestServer, browser: &mut Browser) -> bool {
    browser.get(&s.url("/account")).await.status == 200
}

fn logout_url(s: &TestServer, params: &[(&str, &str)]) -> String {
    format!(
        "{}/oauth/logout?{}",
        s.base,
        serde_urlencoded::to_string(params).unwrap()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_sign_their_user_out_and_bad_requests_change_nothing() {
    let s = TestServer::start().await;
    s.finish_setup();
    s.person(EMAIL, PASSWORD);
    s.person("eve@example.com", "eve's long password");
    let (app, secret) = s.oauth_client("app-one", &[REDIRECT]);
    let (other, other_secret) = s.oauth_client("app-two", &[REDIRECT]);
    // Post-logout URIs are registered per app (and checked like redirect URIs).
    let v = s.admin(AdminRequest::ClientLogoutUris {
        name: app.clone(),
        post_logout_redirect_uris: vec![BYE.into()],
    });
    assert_eq!(v["post_logout_redirect_uris"][0], BYE);
    let listed = s.admin(AdminRequest::ClientList);
    assert!(listed.to_string().contains("signed-out?from=pictor"));

    // The discovery document names the endpoint.
    let doc: Value = reqwest::get(s.url("/.well-known/openid-configuration"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        doc["end_session_endpoint"].as_str().unwrap(),
        s.url("/oauth/logout")
    );

    // 1. The app's id_token as the hint, a registered URI, a state: signed out at once, back
    //    to the app with its state (the URI's own query kept).
    let mut browser = Browser::new();
    let id_token = sign_in(&s, &mut browser, &app, &secret).await;
    assert!(signed_in(&s, &mut browser).await);
    let page = browser
        .get(&logout_url(
            &s,
            &[
                ("id_token_hint", &id_token),
                ("post_logout_redirect_uri", BYE),
                ("state", "s-42"),
            ],
        ))
        .await;
    assert_eq!(page.status, 303, "{}", page.body);
    let to = page.location.unwrap();
    assert!(to.starts_with("http://127.0.0.1:9/signed-out?"), "{to}");
    let q = query_of(&to);
    assert_eq!(
        (q["from"].as_str(), q["state"].as_str()),
        ("pictor", "s-42")
    );
    assert!(!signed_in(&s, &mut browser).await, "the session ended");

    // 2. Bad requests: an error page, and the session stays.
    let id_token = sign_in(&s, &mut browser, &app, &secret).await;
    let mut tampered = id_token.clone();
    tampered.replace_range(tampered.len() - 6.., "AAAAAA");
    let (header, rest) = id_token.split_once('.').unwrap();
    let unsigned = format!("{header}.{}", rest.split_once('.').unwrap().0);
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);
    let bad: Vec<Case> = vec![
        (
            "a forged signature",
            vec![("id_token_hint", &tampered)],
            "not an id_token Pictor issued",
        ),
        (
            "no signature",
            vec![("id_token_hint", &unsigned)],
            "not an id_token Pictor issued",
        ),
        (
            "garbage",
            vec![("id_token_hint", "not.a.token")],
            "not an id_token Pictor issued",
        ),
        (
            "an unregistered URI",
            vec![
                ("id_token_hint", &id_token),
                ("post_logout_redirect_uri", "https://evil.example/"),
            ],
            "not one the app registered",
        ),
        (
            "a prefix of the registered URI",
            vec![
                ("id_token_hint", &id_token),
                ("post_logout_redirect_uri", "http://127.0.0.1:9/signed-out"),
            ],
            "not one the app registered",
        ),
        (
            "another app's registration",
            vec![("client_id", &other), ("post_logout_redirect_uri", BYE)],
            "not one the app registered",
        ),
        (
            "a URI without the app",
            vec![("post_logout_redirect_uri", BYE)],
            "needs the app",
        ),
        (
            "a client_id that is not the hint's",
            vec![("id_token_hint", &id_token), ("client_id", &other)],
            "not the app the id_token_hint was issued to",
        ),
        (
            "an unknown app",
            vec![("client_id", "nobody")],
            "No app is registered",
        ),
    ];
    for (what, params, says) in bad {
        let page = browser.get(&logout_url(&s, &params)).await;
        assert_eq!(page.status, 400, "{what}: {}", page.body);
        assert!(page.location.is_none(), "{what}: no redirect");
        assert!(page.body.contains(says), "{what}: {}", page.body);
        assert!(signed_in(&s, &mut browser).await, "{what}: still signed in");
    }
    // A parameter given twice is refused too.
    let page = browser
        .get(&format!("{}/oauth/logout?state=a&state=b", s.base))
        .await;
    assert_eq!(page.status, 400);
    assert!(signed_in(&s, &mut browser).await);

    // 3. No hint (a plain link from anywhere): Pictor asks first. Only the form with its CSRF
    //    token signs out; a forged confirmation does not.
    let page = browser
        .get(&logout_url(
            &s,
            &[
                ("client_id", &app),
                ("post_logout_redirect_uri", BYE),
                ("state", "s-7"),
            ],
        ))
        .await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Sign out of Pictor?") && page.body.contains("app-one"));
    assert!(
        signed_in(&s, &mut browser).await,
        "asking is not signing out"
    );
    let forged = browser
        .post(
            &s.url("/oauth/logout"),
            &[
                ("client_id".into(), app.clone()),
                ("confirm".into(), "yes".into()),
                ("csrf".into(), "made-up".into()),
            ],
        )
        .await;
    assert_eq!(forged.status, 403);
    assert!(signed_in(&s, &mut browser).await);
    let mut fields = form_fields(&page.body, "/oauth/logout");
    set_field(&mut fields, "confirm", "yes");
    let done = browser.post(&s.url("/oauth/logout"), &fields).await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(
        query_of(done.location.as_deref().unwrap())["state"],
        "s-7",
        "the state came through the form"
    );
    assert!(!signed_in(&s, &mut browser).await);

    // 4. A hint for somebody else (Eve's token, Bob's browser) asks too; an expired-looking or
    //    old hint is still a hint. A POST from the app works like the GET.
    let mut eve = Browser::new();
    let url = authorize_url(
        &s.base,
        &[
            ("response_type", "code"),
            ("client_id", other.as_str()),
            ("redirect_uri", REDIRECT),
            ("scope", "openid"),
            ("state", "st"),
        ],
    );
    let back = s
        .sign_in_and_consent(&mut eve, &url, "eve@example.com", "eve's long password")
        .await;
    let code = query_of(&back)["code"].clone();
    let v: Value = exchange_code(&s.base, &other, &other_secret, REDIRECT, &code).await;
    let eves_token = v["id_token"].as_str().unwrap().to_string();
    sign_in(&s, &mut browser, &app, &secret).await;
    let page = browser
        .post(
            &s.url("/oauth/logout"),
            &[("id_token_hint".into(), eves_token.clone())],
        )
        .await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Sign out of Pictor?"), "{}", page.body);
    assert!(signed_in(&s, &mut browser).await, "Bob stays signed in");
    // Eve's own hint signs Eve out, with no page to confirm, ending on Pictor's page.
    let page = eve
        .post(
            &s.url("/oauth/logout"),
            &[("id_token_hint".into(), eves_token)],
        )
        .await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("You are signed out"), "{}", page.body);
    assert!(!signed_in(&s, &mut eve).await);
    assert!(signed_in(&s, &mut browser).await, "Bob is not affected");

    // 5. Nobody signed in: nothing to ask, straight back to the app.
    let mut stranger = Browser::new();
    let page = stranger
        .get(&logout_url(
            &s,
            &[("client_id", &app), ("post_logout_redirect_uri", BYE)],
        ))
        .await;
    assert_eq!(page.status, 303);
    assert_eq!(page.location.as_deref(), Some(BYE));
    s.stop().await;
}

/// The CLI registers post-logout URIs with the client and replaces them later; bad ones are
/// refused like bad redirect URIs.
#[test]
fn the_cli_registers_post_logout_uris() {
    let dir = tempfile::tempdir().unwrap();
    let v = cli_json(
        dir.path(),
        &[
            "client",
            "add",
            "--name",
            "web",
            "--redirect-uri",
            REDIRECT,
            "--post-logout-redirect-uri",
            BYE,
            "--display-name",
            "Web App",
            "--homepage",
            "https://web.example/",
            "--json",
        ],
        None,
    );
    assert!(v["app_secret"].as_str().unwrap().starts_with("pcs_"));
    let list = cli_json(dir.path(), &["client", "list", "--json"], None);
    assert_eq!(list["clients"][0]["post_logout_redirect_uris"][0], BYE);
    assert_eq!(list["clients"][0]["display_name"], "Web App");
    assert_eq!(list["clients"][0]["homepage"], "https://web.example/");
    assert!(list["clients"][0]["logo_uri"].is_null());
    let (code, _, err) = run_cli(
        dir.path(),
        &[
            "client",
            "logout-uris",
            "--name",
            "web",
            "--post-logout-redirect-uri",
            "javascript:alert(1)",
        ],
        None,
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("http or https") || err.contains("not an absolute URL"),
        "{err}"
    );
    let v = cli_json(
        dir.path(),
        &["client", "logout-uris", "--name", "web", "--json"],
        None,
    );
    assert_eq!(v["post_logout_redirect_uris"], serde_json::json!([]));
    let (code, _, err) = run_cli(
        dir.path(),
        &["client", "logout-uris", "--name", "nobody", "--json"],
        None,
    );
    assert_ne!(code, 0);
    assert!(err.contains("nobody"), "{err}");
}
