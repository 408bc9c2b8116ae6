//! The browser SDK in a real headless chromium: the sample client page (assets/) renders the
//! "Sign in with Pictor" button; a click opens the popup, the user signs in and consents, the
//! sample's server exchanges the code with its secret and PKCE verifier, the callback page closes
//! the popup and reloads the opener, which now shows the signed-in user. Its "Sign out" button
//! (the SDK's `signOut` with the id_token as the hint) ends the Pictor session and comes back to
//! the app's registered post-logout URI with the state.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use common::webdriver::Driver;
use common::*;
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::web::{Data, Html, Query};
use poem::{EndpointExt, Route, get, handler};
use serde_json::Value;

/// The sample relying party: the page from assets/, and a server-side callback.
#[derive(Clone)]
struct Rp {
    issuer: String,
    app: String,
    secret: String,
    base: Arc<Mutex<String>>,
    /// (state, PKCE verifier) of the sign-in in progress; the signed-in user's name.
    pending: Arc<Mutex<Option<(String, String)>>>,
    user: Arc<Mutex<Option<String>>>,
    /// The signed-in user's id_token (the logout hint).
    id_token: Arc<Mutex<Option<String>>>,
    /// The `state` that came back to /signed-out.
    signed_out_state: Arc<Mutex<Option<String>>>,
}

#[handler]
async fn rp_home(rp: Data<&Rp>) -> Html<String> {
    let state = pictor::idp::crypto::random_token("st_");
    let verifier = pictor::idp::crypto::random_token("");
    let challenge = pictor::idp::crypto::b64url(&pictor::idp::crypto::sha256(&verifier));
    *rp.pending.lock().unwrap() = Some((state.clone(), verifier));
    let who = match rp.user.lock().unwrap().clone() {
        Some(name) => format!("Signed in as {name}"),
        None => "Not signed in".to_string(),
    };
    let base = rp.base.lock().unwrap().clone();
    Html(
        include_str!("../assets/sample-client.html")
            .replace("{{WHO}}", &who)
            .replace("{{ISSUER}}", &rp.issuer)
            .replace("{{APP_NAME}}", &rp.app)
            .replace("{{REDIRECT_URI}}", &format!("{base}/callback"))
            .replace("{{STATE}}", &state)
            .replace("{{CHALLENGE}}", &challenge)
            .replace(
                "{{ID_TOKEN}}",
                &rp.id_token.lock().unwrap().clone().unwrap_or_default(),
            )
            .replace("{{SIGNED_OUT_URI}}", &format!("{base}/signed-out")),
    )
}

/// Where Pictor sends the browser after signing out: the app forgets its user too.
#[handler]
async fn rp_signed_out(
    rp: Data<&Rp>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Html<String> {
    *rp.user.lock().unwrap() = None;
    *rp.id_token.lock().unwrap() = None;
    *rp.signed_out_state.lock().unwrap() = q.get("state").cloned();
    Html(
        "<!doctype html><title>Signed out</title><p id=\"bye\">Signed out of the sample app</p>"
            .into(),
    )
}

#[handler]
async fn rp_callback(
    rp: Data<&Rp>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Html<String> {
    let (state, verifier) = rp
        .pending
        .lock()
        .unwrap()
        .clone()
        .expect("a sign-in in progress");
    assert_eq!(q.get("state"), Some(&state), "state checked by the client");
    let base = rp.base.lock().unwrap().clone();
    // Server to server: the code, the secret and the PKCE verifier never touch the browser script.
    let tokens: Value = reqwest::Client::new()
        .post(format!("{}/oauth/token", rp.issuer))
        .basic_auth(&rp.app, Some(&rp.secret))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", q["code"].as_str()),
            ("redirect_uri", &format!("{base}/callback")),
            ("code_verifier", &verifier),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let info: Value = reqwest::Client::new()
        .get(format!("{}/oauth/userinfo", rp.issuer))
        .bearer_auth(tokens["access_token"].as_str().expect("access token"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let name = info["name"].as_str().unwrap().to_string();
    *rp.user.lock().unwrap() = Some(name.clone());
    *rp.id_token.lock().unwrap() = tokens["id_token"].as_str().map(str::to_string);
    Html(
        include_str!("../assets/sample-callback.html")
            .replace("{{MESSAGE}}", &format!("Signed in as {name}"))
            .replace("{{ISSUER}}", &rp.issuer),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_popup_sign_in_in_a_real_browser() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let s = TestServer::start().await;
    s.person("grace@example.com", "grace's password");

    // The sample app's server.
    let acceptor = TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .unwrap();
    let rp_base = format!(
        "http://{}",
        acceptor.local_addr()[0].as_socket_addr().unwrap()
    );
    let (app, secret) = s.oauth_client("sample", &[&format!("{rp_base}/callback")]);
    s.admin(pictor::ops::AdminRequest::ClientLogoutUris {
        name: app.clone(),
        post_logout_redirect_uris: vec![format!("{rp_base}/signed-out")],
    });
    let rp = Rp {
        issuer: s.base.clone(),
        app,
        secret,
        base: Arc::new(Mutex::new(rp_base.clone())),
        pending: Default::default(),
        user: Default::default(),
        id_token: Default::default(),
        signed_out_state: Default::default(),
    };
    let routes = Route::new()
        .at("/", get(rp_home))
        .at("/callback", get(rp_callback))
        .at("/signed-out", get(rp_signed_out))
        .data(rp.clone());
    tokio::spawn(async move { poem::Server::new_with_acceptor(acceptor).run(routes).await });

    driver.goto(&rp_base).await;
    driver.wait_text("Not signed in").await;
    let main = driver.window().await;
    driver.click("[data-pictor-login]").await;
    // The popup.
    let mut popup = None;
    for _ in 0..100 {
        popup = driver.windows().await.into_iter().find(|h| *h != main);
        if popup.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let popup = popup.expect("the SDK opened a popup");
    driver.switch_to(&popup).await;
    driver.wait_for("#email").await;
    assert!(
        driver
            .current_url()
            .await
            .starts_with(&format!("{}/login", s.base))
    );
    driver.type_into("#email", "grace@example.com").await;
    driver.type_into("#password", "grace's password").await;
    driver.click("button[type=submit]").await;
    driver.wait_text("Allow <strong>sample</strong>").await;
    driver.click("button[value=allow]").await;
    // The callback page closes the popup and reloads the opener.
    for _ in 0..100 {
        if driver.windows().await.len() == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(driver.windows().await, vec![main.clone()], "popup closed");
    driver.switch_to(&main).await;
    driver.wait_text("Signed in as Test Person").await;
    let shot = std::env::temp_dir().join("pictor-sdk-popup.png");
    driver.screenshot(&shot).await;
    println!("screenshot: {}", shot.display());

    // Signed in at Pictor too: its account page opens.
    driver.goto(&format!("{}/account", s.base)).await;
    driver.wait_for("form[action='/logout']").await;
    // The sample's "Sign out": RP-initiated logout with the id_token as the hint, straight back
    // to the sample (no question asked), and Pictor's session is over.
    driver.goto(&rp_base).await;
    driver.wait_text("Signed in as Test Person").await;
    let state_on_page = rp.pending.lock().unwrap().clone().unwrap().0;
    driver.click("#sign-out").await;
    driver.wait_text("Signed out of the sample app").await;
    assert_eq!(
        rp.signed_out_state.lock().unwrap().clone(),
        Some(state_on_page),
        "the state came back"
    );
    driver.goto(&format!("{}/account", s.base)).await;
    driver.wait_for("#email").await;
    assert!(
        driver
            .current_url()
            .await
            .starts_with(&format!("{}/login", s.base)),
        "Pictor's session ended"
    );
    s.stop().await;
}
