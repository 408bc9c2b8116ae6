//! "Forgot password?" with outgoing mail: the sign-in page offers it only when `smtp.host` is
//! set; the reset link goes by SMTP (to a small SMTP server in this test that speaks the real
//! protocol: greeting, EHLO, MAIL, RCPT, DATA, QUIT), in the language saved on the account; the
//! page answers the same for unknown addresses and sends nothing then; one address gets one
//! mail per five minutes; the link sets a new password once. Also: switching languages while
//! signed in saves the choice on the account, and signing in elsewhere brings it back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::smtp::*;
use common::*;

async fn sign_in(s: &TestServer, b: &mut Browser, email: &str, password: &str) -> Page {
    b.sign_in(&s.base, email, password).await
}

/// Asks for a reset mail on `/forgot` (bot check solved) and returns the answer page.
async fn ask_for_link(s: &TestServer, b: &mut Browser, email: &str) -> Page {
    let page = b.get(&s.url("/forgot")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let mut fields = form_fields(&page.body, "/forgot");
    set_field(&mut fields, "email", email);
    solve_bot_check(&page.body, &mut fields).expect("the form has a bot check");
    b.post(&s.url("/forgot"), &fields).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgot_password_mails_a_link_in_the_accounts_language() {
    let (s, mut mails) = server_with_mail().await;
    let (email, old_pw, new_pw) = ("ivan@example.com", "старый пароль 123", "новый пароль 456");
    s.person(email, old_pw);

    // Ivan switches to Russian while signed in: saved on the account.
    let mut b = Browser::new();
    assert_eq!(sign_in(&s, &mut b, email, old_pw).await.status, 303);
    let r = b.get(&s.url("/lang?to=ru&back=/account")).await;
    assert_eq!(r.status, 303);
    let user = s.store().user_by_email(email).unwrap().unwrap();
    assert_eq!(user.lang.as_deref(), Some("ru"), "saved on the account");
    // Another browser (English by its headers) gets Russian once he signs in there.
    let mut other = Browser::new();
    let login = other.get(&s.url("/login")).await;
    assert!(login.body.contains("Sign in"), "English before sign-in");
    assert_eq!(sign_in(&s, &mut other, email, old_pw).await.status, 303);
    let page = other.get(&s.url("/account")).await;
    assert!(page.body.contains("lang=\"ru\""), "{}", &page.body[..300]);

    // The sign-in page offers "Forgot password?" (mail is configured).
    let mut stranger = Browser::new();
    let login = stranger.get(&s.url("/login")).await;
    assert!(login.body.contains("href=\"/forgot\""), "{}", login.body);

    // An address with no account: the same answer, no mail.
    let r = ask_for_link(&s, &mut stranger, "nobody@example.com").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("id=\"forgot-sent\""), "{}", r.body);
    let unknown_answer = r.body.replace("nobody@example.com", "X");

    // An administrator already gave Ivan a link; a stranger asking for his address by mail
    // must not kill it.
    let admin_link = s.url(
        s.admin(pictor::ops::AdminRequest::UserResetLink {
            email: email.into(),
        })["reset_path"]
            .as_str()
            .unwrap(),
    );

    // Ivan's address: the same page, and a mail in Russian with the link.
    let r = ask_for_link(&s, &mut stranger, email).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        strip_tokens(&r.body.replace(email, "X")),
        strip_tokens(&unknown_answer),
        "the answer does not tell whether the account exists"
    );
    let mail = next_mail(&mut mails).await;
    assert_eq!(mail.from, "<pictor@mail.test>");
    assert_eq!(mail.to, vec![format!("<{email}>")]);
    let text = body_text(&mail);
    assert!(text.contains("Кто-то (надеемся, вы)"), "in Russian: {text}");
    assert!(
        mail.data.contains("Subject: =?utf-8?") || mail.data.contains("Subject: Новый"),
        "{}",
        mail.data
    );
    let link = text
        .lines()
        .find(|l| l.starts_with(&s.url("/reset?token=")))
        .expect("the link")
        .to_string();
    // Nothing else was sent (the unknown address got no mail).
    assert!(mails.try_recv().is_err());

    // A second request within five minutes sends nothing more.
    let r = ask_for_link(&s, &mut stranger, email).await;
    assert!(r.body.contains("id=\"forgot-sent\""));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(mails.try_recv().is_err(), "one mail per address per 5 min");

    assert_eq!(
        Browser::new().get(&admin_link).await.status,
        200,
        "the administrator's link still works beside the mailed one"
    );

    // The link works once, ends the sessions and the person's other links.
    let mut c = Browser::new();
    let page = c.get(&link).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let mut fields = form_fields(&page.body, "/reset");
    set_field(&mut fields, "new_password", new_pw);
    set_field(&mut fields, "new_password2", new_pw);
    let r = c.post(&s.url("/reset"), &fields).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(c.get(&link).await.status, 410, "used once");
    assert_eq!(
        c.get(&admin_link).await.status,
        410,
        "the other link ended with it"
    );
    assert_eq!(b.get(&s.url("/account")).await.status, 303, "signed out");
    assert_eq!(
        sign_in(&s, &mut Browser::new(), email, new_pw).await.status,
        303
    );
    assert_eq!(
        sign_in(&s, &mut Browser::new(), email, old_pw).await.status,
        401
    );

    // Refusals change nothing: a stale form, a missing bot check, a malformed address.
    let page = stranger.get(&s.url("/forgot")).await;
    let mut fields = form_fields(&page.body, "/forgot");
    set_field(&mut fields, "email", email);
    let r = stranger.post(&s.url("/forgot"), &fields).await;
    assert_eq!(r.status, 400, "no bot check");
    set_field(&mut fields, "csrf", "stale");
    assert_eq!(stranger.post(&s.url("/forgot"), &fields).await.status, 403);
    let r = ask_for_link(&s, &mut stranger, "not an address").await;
    assert_eq!(r.status, 400);
    assert!(mails.try_recv().is_err());
    s.stop().await;
}

/// The per-request tokens (CSRF, bot-check challenge) differ between two answers.
fn strip_tokens(html: &str) -> String {
    html.split("value=\"")
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_string()
            } else {
                part.split_once('"')
                    .map(|(_, rest)| rest)
                    .unwrap_or(part)
                    .to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("value=\"")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_mail_there_is_no_forgot_page() {
    let s = TestServer::start().await;
    let mut b = Browser::new();
    let login = b.get(&s.url("/login")).await;
    assert!(!login.body.contains("/forgot"), "no link without smtp.host");
    let r = b.get(&s.url("/forgot")).await;
    assert_eq!(r.status, 404);
    assert!(r.body.contains("reset link"), "{}", r.body);
    s.stop().await;
}
