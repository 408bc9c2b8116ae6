//! Account recovery in a real headless chromium: an administrator makes a reset link with the
//! admin page's button, the person opens it, chooses a new password and signs in with it; then
//! "Forgot password?" on the sign-in page (the bot check solved by `/static/pow.js` in the
//! browser) mails a link, in Russian for a person who chose Russian, which works the same.
//! Screenshots go to the temp dir (`pictor-recovery-*.png`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::smtp::*;
use common::webdriver::Driver;
use common::*;

const ADMIN: &str = "olga@example.com";
const ADMIN_PW: &str = "olga's long admin password";
const EMAIL: &str = "pavel@example.com";

fn shot(name: &str) -> std::path::PathBuf {
    common::webdriver::shot("recovery", name)
}

async fn sign_in(s: &TestServer, d: &Driver, email: &str, password: &str) {
    d.goto(&s.url("/login?return_to=/account")).await;
    d.type_into("#email", email).await;
    d.type_into("#password", password).await;
    d.click("form[action=\"/login\"] button[type=submit]").await;
    assert!(
        d.wait_until("return location.pathname === '/account'", 20)
            .await,
        "landed on {}",
        d.current_url().await
    );
}

async fn sign_out(d: &Driver) {
    d.click("form[action=\"/logout\"] button[type=submit]")
        .await;
    assert!(
        d.wait_until("return location.pathname === '/login'", 20)
            .await
    );
}

/// Types the new password twice on a reset page and lands on the sign-in page.
async fn choose_password(d: &Driver, password: &str) {
    d.type_into("#new_password", password).await;
    d.type_into("#new_password2", password).await;
    d.click("form[action=\"/reset\"] button[type=submit]").await;
    assert!(
        d.wait_until("return location.search.includes('done=reset')", 20)
            .await,
        "landed on {}",
        d.current_url().await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_link_and_a_mailed_link_both_set_a_new_password() {
    let Some(d) = Driver::start().await else {
        return;
    };
    let (s, mut mails) = server_with_mail().await;
    s.admin(pictor::ops::AdminRequest::UserAdd {
        email: ADMIN.into(),
        name: Some("Olga".into()),
        password_hash: Some(pictor::auth::password::hash(ADMIN_PW).unwrap()),
        admin: true,
        pro: false,
        credits: 0,
    });
    s.person(EMAIL, "pavel's forgotten password");
    let pavel = s.store().user_by_email(EMAIL).unwrap().unwrap();

    // The administrator makes a link on the admin page.
    sign_in(&s, &d, ADMIN, ADMIN_PW).await;
    d.goto(&s.url("/admin")).await;
    d.click(&format!(
        "form[action=\"/admin/users/{}/reset-link\"] button[type=submit]",
        pavel.user_id()
    ))
    .await;
    // Wait for the answer's page itself: the click's page may still be the one on screen.
    d.wait_until(
        "const e = document.getElementById('reset-link'); return !!e && e.textContent.includes('/reset?token=');",
        20,
    )
    .await;
    let link = d.text("#reset-link").await;
    assert!(link.starts_with(&s.url("/reset?token=")), "{link}");
    sign_out(&d).await;

    // Pavel opens it and chooses a password.
    d.goto(&link).await;
    assert_eq!(d.text("h1").await, "Choose a new password");
    d.screenshot(&shot("reset")).await;
    choose_password(&d, "pavel's first new password").await;
    sign_in(&s, &d, EMAIL, "pavel's first new password").await;

    // He switches to Russian (saved on his account), signs out, and forgets again.
    d.click("nav.langs a[lang=ru]").await;
    d.wait_text("Ваш кабинет").await;
    sign_out(&d).await;
    d.click("#forgot-link").await;
    d.wait_for("form[action=\"/forgot\"]").await;
    d.type_into("#email", EMAIL).await;
    assert!(
        d.wait_until(
            "return document.querySelector('input[name=pow_nonce]').value !== ''",
            60
        )
        .await,
        "the bot check finishes in the browser"
    );
    assert_eq!(d.text(".pow-status").await, "Проверка на бота пройдена.");
    d.click("form[action=\"/forgot\"] button[type=submit]")
        .await;
    d.wait_for("#forgot-sent").await;
    assert!(d.text("#forgot-sent").await.contains(EMAIL));
    d.screenshot(&shot("forgot-sent")).await;

    let mail = next_mail(&mut mails).await;
    let body = body_text(&mail);
    assert!(body.contains("Выберите новый пароль"), "{body}");
    let link = body
        .lines()
        .find(|l| l.starts_with(&s.url("/reset?token=")))
        .expect("a link in the mail")
        .to_string();
    d.goto(&link).await;
    assert_eq!(d.text("h1").await, "Новый пароль");
    choose_password(&d, "pavel's second new password").await;
    sign_in(&s, &d, EMAIL, "pavel's second new password").await;
    s.stop().await;
}
