//! One error type for the pages, rendered in one place: every refusal a page handler or a page
//! extractor makes is a [`PageError`], and [`PageError::render`] turns it into the page (or, for
//! a browser that is not signed in, the redirect to the sign-in page).

use std::borrow::Cow;

use poem::error::ResponseError;
use poem::http::StatusCode;
use poem::{IntoResponse, Response};

use super::{i18n, page_with_status, query_escape, redirect};
use crate::state::AppState;

/// Why a page could not be served.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// Not signed in: to the sign-in page, and back to `return_to` afterwards.
    #[error("not signed in")]
    SignIn { return_to: String },
    /// The form's CSRF token (or its `Origin`) does not check out: an old page, or a post from
    /// another site.
    #[error("the form expired")]
    FormExpired,
    /// Signed in, but the page is for administrators.
    #[error("the page is for administrators only")]
    AdminOnly,
    /// The request cannot be served as sent; the page says why. `oauth`: the request came from
    /// an application (authorize, sign-out), so the page says nothing was sent back to it.
    #[error("{title}: {message}")]
    Refused {
        status: StatusCode,
        title: Cow<'static, str>,
        message: Cow<'static, str>,
        oauth: bool,
    },
    /// A fault on our side: logged where it happened ([`PageError::server`]); the browser gets a
    /// generic page.
    #[error("server error")]
    Server,
}

impl PageError {
    /// A refusal on one of Pictor's own pages.
    pub fn refused(
        status: StatusCode,
        title: impl Into<Cow<'static, str>>,
        message: impl Into<Cow<'static, str>>,
    ) -> PageError {
        PageError::Refused {
            status,
            title: title.into(),
            message: message.into(),
            oauth: false,
        }
    }

    /// A refusal of a request an application sent the browser with (authorize, sign-out).
    pub fn oauth(
        status: StatusCode,
        title: impl Into<Cow<'static, str>>,
        message: impl Into<Cow<'static, str>>,
    ) -> PageError {
        PageError::Refused {
            status,
            title: title.into(),
            message: message.into(),
            oauth: true,
        }
    }

    /// An application's form (consent, sign-out confirmation) whose CSRF token does not check out.
    pub fn oauth_form_expired() -> PageError {
        PageError::oauth(
            StatusCode::FORBIDDEN,
            "Form expired",
            "The form was not sent from this page. Go back, reload it and try again.",
        )
    }

    /// An address with nothing behind it, opened in a browser.
    pub fn not_found() -> PageError {
        PageError::refused(
            StatusCode::NOT_FOUND,
            i18n::tr("error.not_found.title"),
            i18n::tr("error.not_found.message"),
        )
    }

    /// A server fault: the detail goes to the log (never to the browser).
    pub fn server(what: &str, e: impl std::fmt::Display) -> PageError {
        tracing::error!(error = %e, "{what}");
        PageError::Server
    }

    pub fn status(&self) -> StatusCode {
        match self {
            PageError::SignIn { .. } => StatusCode::SEE_OTHER,
            PageError::FormExpired | PageError::AdminOnly => StatusCode::FORBIDDEN,
            PageError::Refused { status, .. } => *status,
            PageError::Server => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The response: the one place a page error becomes a page.
    pub fn render(&self) -> Response {
        let (title, message, oauth): (&str, &str, bool) = match self {
            PageError::SignIn { return_to } => {
                // `/` needs no escape in a query and keeps the address readable.
                let back = query_escape(return_to).replace("%2F", "/");
                return redirect(&format!("/login?return_to={back}"));
            }
            PageError::FormExpired => (
                i18n::tr("error.form_expired.title"),
                i18n::tr("error.form_expired.message"),
                false,
            ),
            PageError::AdminOnly => (
                i18n::tr("error.admin_only.title"),
                i18n::tr("error.admin_only.message"),
                false,
            ),
            PageError::Refused {
                title,
                message,
                oauth,
                ..
            } => (title, message, *oauth),
            PageError::Server => (
                i18n::tr("error.server.title"),
                i18n::tr("error.server.message"),
                false,
            ),
        };
        page_with_status(
            &ErrorPage {
                title,
                message,
                oauth,
            },
            self.status(),
        )
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        self.render()
    }
}

impl ResponseError for PageError {
    fn status(&self) -> StatusCode {
        PageError::status(self)
    }

    fn as_response(&self) -> Response {
        self.render()
    }
}

#[derive(askama::Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    title: &'a str,
    message: &'a str,
    oauth: bool,
}

/// A refusal on one of Pictor's own pages, as a response.
pub fn error_page(_state: &AppState, status: StatusCode, title: &str, message: &str) -> Response {
    error_page_plain(status, title, message)
}

/// A refusal of a request an application sent the browser with (authorize, sign-out), as a
/// response: the page says nothing was sent back to the application.
pub fn oauth_error_page(
    _state: &AppState,
    status: StatusCode,
    title: &str,
    message: &str,
) -> Response {
    PageError::oauth(status, title.to_string(), message.to_string()).render()
}

/// A store or admin-operation message ("only administrator…") as a sentence on a page: first
/// letter capital, a full stop at the end.
pub fn sentence(m: &str) -> String {
    let m = m.trim().trim_end_matches('.');
    let mut c = m.chars();
    match c.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), c.as_str()),
        None => String::new(),
    }
}

/// [`error_page`] for middleware that runs before the app's state is at hand.
pub fn error_page_plain(status: StatusCode, title: &str, message: &str) -> Response {
    PageError::refused(status, title.to_string(), message.to_string()).render()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(resp: Response) -> String {
        resp.into_body().into_string().await.unwrap()
    }

    #[tokio::test]
    async fn each_error_renders_with_its_status_and_wording() {
        let r = PageError::SignIn {
            return_to: "/account?x=1&y=2".into(),
        }
        .render();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        assert_eq!(
            r.headers()["location"],
            "/login?return_to=/account%3Fx%3D1%26y%3D2"
        );

        let r = PageError::FormExpired.render();
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let html = body(r).await;
        assert!(html.contains("Form expired"), "{html}");
        assert!(!html.contains("application"), "no OAuth wording: {html}");
        assert!(
            html.contains("href=\"/account\""),
            "the site's navigation: {html}"
        );

        let html =
            body(PageError::oauth(StatusCode::BAD_REQUEST, "Unknown app", "x").render()).await;
        assert!(
            html.contains("Nothing was sent to the application"),
            "{html}"
        );

        let r = PageError::server("test", "disk on fire");
        let html = body(r.render()).await;
        assert!(!html.contains("disk on fire"), "{html}");
    }
}
