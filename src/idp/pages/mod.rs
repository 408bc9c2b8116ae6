//! Server-rendered pages: sign in (with the TOTP step), register, the account cabinet, admin,
//! first-start setup, plus the avatar pictures. One file per page.

pub mod account;
pub mod admin;
pub mod avatar;
pub mod login;
pub mod playground;
pub mod register;
pub mod setup;

use poem::Response;
use poem::http::StatusCode;

use super::web::page_with_status;
use crate::state::AppState;

#[derive(askama::Template)]
#[template(path = "error.html")]
pub struct ErrorPage<'a> {
    pub title: &'a str,
    pub message: &'a str,
}

pub fn error_page(_state: &AppState, status: StatusCode, title: &str, message: &str) -> Response {
    error_page_plain(status, title, message)
}

/// The error page, for middleware that runs before the app's state is at hand.
pub fn error_page_plain(status: StatusCode, title: &str, message: &str) -> Response {
    page_with_status(&ErrorPage { title, message }, status)
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
pub fn csrf_refused(state: &AppState) -> Response {
    error_page(
        state,
        StatusCode::FORBIDDEN,
        "Form expired",
        "Reload the page and try again.",
    )
}

/// A server fault on a page: the detail goes to the log, the browser gets a generic page.
pub fn server_error(state: &AppState, what: &str, e: impl std::fmt::Display) -> Response {
    tracing::error!(error = %e, "{what}");
    error_page(
        state,
        StatusCode::INTERNAL_SERVER_ERROR,
        "Server error",
        "Something went wrong on our side. Please try again.",
    )
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
