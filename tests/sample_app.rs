//! The runnable sample app (`cargo run --example sample-app`) end to end in a real headless
//! chromium: sign in with Pictor, consent with a spending limit of 1 credit a day, make a
//! picture on the person's behalf (their balance moves, the picture shows), be refused the second
//! one by the limit (`app_limit`, nothing charged), sign out of the app and of Pictor.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "../examples/sample-app/app.rs"]
#[allow(dead_code)]
mod sample;

use common::webdriver::Driver;
use common::*;
use poem::listener::{Acceptor, Listener, TcpListener};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_app_signs_in_generates_within_the_limit_and_signs_out() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let s = TestServer::start().await;
    s.finish_setup();
    s.person("grace@example.com", "grace's password");
    let acceptor = TcpListener::bind("127.0.0.1:0")
        .into_acceptor()
        .await
        .unwrap();
    let base = format!(
        "http://{}",
        acceptor.local_addr()[0].as_socket_addr().unwrap()
    );
    let (client, secret) = s.oauth_client("sample", &[&format!("{base}/callback")]);
    s.admin(pictor::ops::AdminRequest::ClientLogoutUris {
        name: client.clone(),
        post_logout_redirect_uris: vec![format!("{base}/signed-out")],
    });
    let app = sample::SampleApp::new(&s.base, &client, &secret, &base)
        .await
        .unwrap();
    tokio::spawn(async move {
        poem::Server::new_with_acceptor(acceptor)
            .run(sample::routes(app))
            .await
    });

    driver.goto(&base).await;
    driver.wait_text("Not signed in").await;
    driver.click("#sign-in").await;
    driver.wait_for("#email").await;
    driver.type_into("#email", "grace@example.com").await;
    driver.type_into("#password", "grace's password").await;
    driver.click("button[type=submit]").await;
    // Consent: the app asks to make pictures; Grace allows 1 credit a day.
    driver
        .wait_text("Make pictures for you, paid with your credits")
        .await;
    driver
        .execute(
            "document.getElementById('cap_daily').value = '1'; return true;",
            vec![],
        )
        .await;
    driver.click("button[value=allow]").await;
    driver.wait_text("Signed in as Test Person").await;
    assert!(
        driver
            .source()
            .await
            .contains("<strong id=\"balance\">5</strong>")
    );

    // One picture: made, shown, paid for.
    driver.click("#generate").await;
    driver.wait_for("#picture").await;
    assert!(
        driver
            .wait_until(
                "const i = document.getElementById('picture'); return !!i && i.complete && i.naturalWidth > 0;",
                30
            )
            .await,
        "the picture loads"
    );
    assert!(
        driver
            .source()
            .await
            .contains("<strong id=\"balance\">4</strong>")
    );
    let shot = std::env::temp_dir().join("pictor-sample-app.png");
    driver.screenshot(&shot).await;
    println!("screenshot: {}", shot.display());

    // The second goes past the limit Grace set: refused, nothing charged.
    driver.click("#generate").await;
    driver.wait_text("app_limit").await;
    assert!(
        driver
            .source()
            .await
            .contains("<strong id=\"balance\">4</strong>")
    );

    // Sign out: the app forgets Grace, Pictor ends its session and sends her back.
    driver.click("#sign-out").await;
    driver
        .wait_text("Signed out of the sample app and of Pictor")
        .await;
    driver.goto(&format!("{}/account", s.base)).await;
    driver.wait_for("#email").await;
    s.stop().await;
}
