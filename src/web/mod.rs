//! The web pages people use: sign in (with the TOTP step), register, the account, admin,
//! first-start setup, the playground, and the avatar pictures — one module per page, the
//! account's split by feature. The OAuth/OpenID protocol lives in [`crate::idp`]; its consent and
//! sign-out pages use the helpers here.
//!
//! What every page shares is here: security headers, rendering, the page extractors
//! ([`extract`]: a signed-in member, an administrator, a form whose CSRF token checks out) and one
//! page error type rendered in one place ([`error::PageError`]). Sessions and CSRF tokens are
//! credentials and live in [`crate::auth::session`] (re-exported here for the pages).

pub mod account;
pub mod admin;
pub mod avatar;
pub mod error;
pub mod extract;
pub mod forgot;
pub mod i18n;
pub mod login;
pub mod playground;
pub mod register;
pub mod reset;
pub mod setup;
pub mod throttle;

pub use error::{PageError, error_page, error_page_plain, oauth_error_page};
pub use extract::{Admin, CheckedForm, Member};
pub use throttle::{Throttle, Verdict};

use std::net::IpAddr;

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::{Html, Redirect};
use poem::{IntoResponse, Request, Response};

use crate::state::AppState;

pub use crate::auth::session::*;

/// Adds the pages' security headers.
pub fn secure_page(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    // `same-origin`, not `no-referrer`: under `no-referrer` browsers send `Origin: null` on the
    // pages' own form posts, and the CSRF check refuses `null` (what sandboxed frames and data:
    // pages send). No referrer ever leaves for another site either way.
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The page's security policy, with images allowed from `origin` too (an app's logo).
pub fn allow_images_from(mut resp: Response, origin: &str) -> Response {
    let policy = format!(
        "default-src 'self'; img-src 'self' data: {origin}; style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    );
    if let Ok(v) = HeaderValue::from_str(&policy) {
        resp.headers_mut().insert("content-security-policy", v);
    }
    resp
}

/// Renders an askama template as a page with the security headers.
pub fn page<T: askama::Template>(t: &T) -> Response {
    page_with_status(t, StatusCode::OK)
}

pub fn page_with_status<T: askama::Template>(t: &T, status: StatusCode) -> Response {
    match t.render() {
        Ok(html) => {
            let mut resp = Html(html).into_response();
            resp.set_status(status);
            secure_page(resp)
        }
        Err(e) => {
            tracing::error!(error = %e, "template error");
            secure_page((StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response())
        }
    }
}

pub fn redirect(to: &str) -> Response {
    secure_page(Redirect::see_other(to).into_response())
}

/// The client address for throttling: the socket peer, or the client a trusted reverse proxy
/// names in `Forwarded`/`X-Forwarded-For` (config `trusted_proxies`; see `net::client_ip`).
pub fn client_ip(state: &AppState, req: &Request) -> Option<IpAddr> {
    crate::net::client_ip(
        req.remote_addr().as_socket_addr().map(|a| a.ip()),
        req.headers(),
        &state.config.trusted_proxies,
    )
}

/// Whether first-start setup is done: an administrator exists (made with the setup link or the
/// CLI). Until then the setup link stays valid and public registration is closed.
pub fn setup_done(state: &AppState) -> bool {
    use std::sync::atomic::Ordering;
    // Once seen, remembered: unauthenticated pages do not scan the users table every time.
    if state.idp.admin_seen.load(Ordering::Relaxed) {
        return true;
    }
    let done = state.store.has_admin().unwrap_or(true);
    if done {
        state.idp.admin_seen.store(true, Ordering::Relaxed);
    }
    done
}

/// The page for a form whose CSRF token (or Origin) does not check out.
pub fn csrf_refused(_state: &AppState) -> Response {
    PageError::FormExpired.render()
}

/// A server fault on a page: the detail goes to the log, the browser gets a generic page.
pub fn server_error(_state: &AppState, what: &str, e: impl std::fmt::Display) -> Response {
    PageError::server(what, e).render()
}

/// A `return_to` we are willing to send the browser to after sign-in: a path on this origin.
pub fn safe_return_to(value: Option<&str>) -> String {
    match value {
        Some(v)
            if v.starts_with('/')
                && !v.starts_with("//")
                && !v.starts_with("/\\")
                && !v.chars().any(|c| c.is_control() || c == '\\') =>
        {
            v.to_string()
        }
        _ => "/account".to_string(),
    }
}

pub fn query_escape(v: &str) -> String {
    serde_urlencoded::to_string([("x", v)])
        .unwrap_or_default()
        .trim_start_matches("x=")
        .to_string()
}

/// The pages' routes and their static files (the app nests them at `/`, beside the identity
/// provider's, inside a `CookieJarManager`).
pub fn routes() -> poem::Route {
    use poem::{get, post};
    poem::Route::new()
        .at("/", get(account::home))
        .nest("/account", account::routes())
        .nest("/admin", admin::routes())
        .nest("/setup", setup::routes())
        .nest("/playground", playground::routes())
        .at("/login", get(login::login_get).post(login::login_post))
        .at("/login/totp", get(login::totp_get).post(login::totp_post))
        .at("/logout", post(login::logout_post))
        .at(
            "/register",
            get(register::register_get).post(register::register_post),
        )
        .at("/reset", get(reset::reset_get).post(reset::reset_post))
        .at("/forgot", get(forgot::forgot_get).post(forgot::forgot_post))
        .at("/lang", get(switch_language))
        .at("/avatars/:name", get(avatar::avatar))
        .at(
            "/static/pictor.css",
            static_text(CSS, "text/css; charset=utf-8"),
        )
        .at("/static/icon.svg", static_text(ICON, "image/svg+xml"))
        .at(
            "/static/pow.js",
            static_text(
                include_str!("../../assets/static/pow.js"),
                "text/javascript; charset=utf-8",
            ),
        )
        .at(
            "/static/account.js",
            static_text(
                include_str!("../../assets/static/account.js"),
                "text/javascript; charset=utf-8",
            ),
        )
        .at(
            "/static/playground.js",
            static_text(
                include_str!("../../assets/static/playground.js"),
                "text/javascript; charset=utf-8",
            ),
        )
        .at(
            "/static/models.js",
            static_text(
                include_str!("../../assets/static/models.js"),
                "text/javascript; charset=utf-8",
            ),
        )
}

/// What a page says when a new password is refused by the policy, in the page's language.
pub fn password_rule() -> String {
    i18n::tr2(
        "password.length",
        crate::auth::password::MIN_LEN,
        crate::auth::password::MAX_LEN,
    )
}

/// `GET /lang?to=ru&back=/account`: saves the language choice in a cookie (a year) and, for a
/// signed-in person, on the account (so it follows them to other browsers), then goes back to
/// the page (a path on this site only). A link, not a form: the worst a forged one can do is
/// switch someone's language, which the same switcher switches back.
#[poem::handler]
async fn switch_language(
    state: poem::web::Data<&AppState>,
    jar: &poem::web::cookie::CookieJar,
    poem::web::Query(q): poem::web::Query<std::collections::HashMap<String, String>>,
) -> Response {
    let back = safe_return_to(q.get("back").map(String::as_str));
    if let Some(lang) = q.get("to").and_then(|t| i18n::Lang::parse(t)) {
        set_language_cookie(&state, jar, lang);
        if let Some(s) = signed_in(&state, jar)
            && s.user.lang.as_deref() != Some(lang.code())
        {
            let uid = s.user.id;
            let result = state
                .store
                .call(move |st| {
                    st.modify_user(uid, |u| {
                        u.lang = Some(lang.code().to_owned());
                        Ok(())
                    })
                })
                .await;
            if let Err(e) = result {
                tracing::warn!(error = %e, "saving the language on the account");
            }
        }
    }
    redirect(&back)
}

/// The preference cookie (a year; the account keeps the choice too, see [`switch_language`]).
pub fn set_language_cookie(state: &AppState, jar: &poem::web::cookie::CookieJar, lang: i18n::Lang) {
    let mut c = poem::web::cookie::Cookie::new_with_str(i18n::LANG_COOKIE, lang.code());
    c.set_path("/");
    c.set_same_site(poem::web::cookie::SameSite::Lax);
    c.set_http_only(true);
    c.set_secure(state.public_url.starts_with("https://"));
    c.set_max_age(std::time::Duration::from_secs(365 * 86_400));
    jar.add(c);
}

/// At sign-in: the language saved on the account becomes this browser's.
pub fn restore_language(
    state: &AppState,
    jar: &poem::web::cookie::CookieJar,
    user: &crate::store::UserRecord,
) {
    if let Some(lang) = user.lang.as_deref().and_then(i18n::Lang::parse) {
        set_language_cookie(state, jar, lang);
    }
}

const CSS: &str = include_str!("../../assets/static/pictor.css");
const ICON: &str = include_str!("../../assets/static/icon.svg");

/// A static text file, cacheable for an hour (the SDK is loaded from other origins too).
pub fn static_text(
    body: &'static str,
    content_type: &'static str,
) -> impl poem::Endpoint<Output = Response> {
    poem::endpoint::make_sync(move |_| {
        let mut resp = body.into_response();
        let h = resp.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=3600"),
        );
        h.insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
        resp
    })
}

#[cfg(test)]
mod tests {
    use super::safe_return_to;

    #[test]
    fn return_to_stays_on_this_origin() {
        assert_eq!(
            safe_return_to(Some("/oauth/authorize?x=1")),
            "/oauth/authorize?x=1"
        );
        for bad in [
            "//evil.example",
            "https://evil.example",
            "/\\evil.example",
            "javascript:alert(1)",
            "",
        ] {
            assert_eq!(safe_return_to(Some(bad)), "/account", "{bad}");
        }
        assert_eq!(safe_return_to(None), "/account");
    }
}
