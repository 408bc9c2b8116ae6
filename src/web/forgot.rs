//! `/forgot`: "Forgot password?" — only when outgoing mail is configured (`smtp.host`). A person
//! gives their e-mail; if an account uses it, a one-time reset link (the same kind an
//! administrator issues, `store::recovery`) is mailed to it, in the language saved on the
//! account.
//!
//! The page answers the same whether or not the account exists, and the mail is sent after the
//! answer (so neither the words nor the timing tell who has an account). Every request passes
//! the bot check and counts against the sender's attempts; one address gets at most one mail
//! per five minutes. A mailed link is added beside the person's live links (at most three), so
//! asking for someone's address does not kill the link they have; using one ends them all.

use poem::http::StatusCode;
use poem::web::Data;
use poem::web::cookie::CookieJar;
use poem::{Request, Response, handler};
use serde::Deserialize;

use super::i18n::{self, Lang};
use super::{CheckedForm, PageError, Verdict, client_ip, csrf_token, page_with_status};
use crate::state::AppState;

#[derive(askama::Template)]
#[template(path = "forgot.html")]
struct ForgotPage {
    csrf: String,
    email: String,
    error: Option<String>,
    sent: bool,
    challenge: crate::idp::pow::Challenge,
}

fn page(
    state: &AppState,
    jar: &CookieJar,
    email: &str,
    error: Option<String>,
    sent: bool,
    status: StatusCode,
) -> Response {
    page_with_status(
        &ForgotPage {
            csrf: csrf_token(state, jar),
            email: email.to_owned(),
            error,
            sent,
            challenge: super::login::new_challenge(state),
        },
        status,
    )
}

/// Without mail there is nothing to send: the page does not exist.
fn no_mail() -> PageError {
    PageError::refused(
        StatusCode::NOT_FOUND,
        i18n::tr("forgot.no_mail.title"),
        i18n::tr("forgot.no_mail.message"),
    )
}

#[handler]
pub async fn forgot_get(state: Data<&AppState>, jar: &CookieJar) -> Result<Response, PageError> {
    if state.mailer.is_none() {
        return Err(no_mail());
    }
    Ok(page(&state, jar, "", None, false, StatusCode::OK))
}

#[derive(Deserialize)]
pub struct ForgotForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    pow_challenge: String,
    #[serde(default)]
    pow_nonce: String,
}

#[handler]
pub async fn forgot_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<ForgotForm>,
) -> Result<Response, PageError> {
    let Some(mailer) = state.mailer.clone() else {
        return Err(no_mail());
    };
    let now = state.clock.now();
    let ip = client_ip(&state, req);
    let email = f.email.trim().to_lowercase();
    let again = |msg: String, status| Ok(page(&state, jar, &email, Some(msg), false, status));
    // Every request counts as a failed attempt of this address: a script asking for many
    // addresses from one place is slowed down like one guessing passwords.
    if let Verdict::Limited(secs) = state.idp.throttle.attempt(ip, "forgot:", now) {
        return again(
            i18n::tr1("account.too_many", secs),
            StatusCode::TOO_MANY_REQUESTS,
        );
    }
    if !state
        .idp
        .challenges
        .verify(&state.idp.secrets, &f.pow_challenge, &f.pow_nonce, now)
    {
        return again(
            i18n::tr("forgot.pow_missing").to_owned(),
            StatusCode::BAD_REQUEST,
        );
    }
    if crate::store::users::normalize_email(&email).is_err() {
        return again(
            i18n::tr("register.bad_email").to_owned(),
            StatusCode::BAD_REQUEST,
        );
    }
    if mailer.may_send_reset(&email, now) {
        let (state, lang, to) = ((*state).clone(), i18n::current(), email.clone());
        tokio::spawn(async move { send_reset_mail(state, mailer, to, lang).await });
    }
    Ok(page(&state, jar, &email, None, true, StatusCode::OK))
}

/// Issues a reset link for the account using `email` (if any, and not blocked) and mails it.
/// Runs after the page has answered; the outcome goes to the log only (without the address).
async fn send_reset_mail(
    state: AppState,
    mailer: std::sync::Arc<crate::mail::Mailer>,
    email: String,
    page_lang: Lang,
) {
    let now = state.clock.now();
    let token = crate::auth::secret::random_token("");
    let hash = crate::auth::secret::sha256(&token);
    let lookup = email.clone();
    let issued = state
        .store
        .call(move |s| {
            let Some(user) = s.user_by_email(&lookup)? else {
                return Ok(None);
            };
            if user.banned {
                return Ok(None);
            }
            // Beside the person's live links: a stranger asking for this address must not
            // be able to kill the link they already have.
            let record = s.add_password_reset(user.id, hash, now)?;
            Ok::<_, crate::store::StoreError>(Some((user, record)))
        })
        .await;
    let (user, _) = match issued {
        Ok(Some(found)) => found,
        Ok(None) => {
            tracing::info!("password-reset mail asked for an address with no account; none sent");
            return;
        }
        Err(e) => {
            tracing::error!(error = %e, "issuing a password-reset link");
            return;
        }
    };
    let lang = user
        .lang
        .as_deref()
        .and_then(Lang::parse)
        .unwrap_or(page_lang);
    let url = format!(
        "{}/reset?token={token}",
        state.public_url.trim_end_matches('/')
    );
    let (subject, body) = reset_mail(lang, &user.email, &url);
    match mailer.send(&user.email, &subject, body).await {
        Ok(()) => tracing::info!(user = %user.user_id(), "password-reset mail sent"),
        Err(e) => {
            tracing::warn!(user = %user.user_id(), error = %e, "password-reset mail not sent")
        }
    }
}

/// The reset mail's subject and plain-text body in `lang`.
pub fn reset_mail(lang: Lang, email: &str, url: &str) -> (String, String) {
    let subject = i18n::tr_in(lang, "mail.reset.subject").to_owned();
    let body = format!(
        "{}\n\n{}\n{url}\n\n{}\n\n-- \nPictor\n",
        i18n::tr_in(lang, "mail.reset.asked").replacen("{}", email, 1),
        i18n::tr_in(lang, "mail.reset.link"),
        i18n::tr_in(lang, "mail.reset.not_you"),
    );
    (subject, body)
}
