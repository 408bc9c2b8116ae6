//! Page extractors: the prologue every page handler used to write out — check the form's CSRF
//! token, find the signed-in person, refuse who may not — written once. Each refuses with a
//! [`PageError`], rendered in one place.
//!
//! Put [`CheckedForm`] before [`Member`]/[`Admin`] in a handler's arguments: a post from another
//! site is refused as such before anything looks at the session.

use poem::http::Method;
use poem::{FromRequest, Request, RequestBody};
use serde::de::DeserializeOwned;

use super::error::PageError;
use super::{SignedIn, csrf_ok, signed_in};
use crate::state::AppState;

fn state(req: &Request) -> Result<&AppState, PageError> {
    req.data::<AppState>()
        .ok_or_else(|| PageError::server("a page", "served without the app's state"))
}

/// Where to come back after signing in: the page itself for a `GET`, the page a form was on
/// (its first path segment, e.g. `/account`) for a post.
fn come_back_to(req: &Request) -> String {
    let uri = req.original_uri();
    if req.method() == Method::GET {
        return uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
    }
    let first = uri.path().split('/').nth(1).unwrap_or_default();
    format!("/{first}")
}

/// The signed-in person (second factor done, not banned); otherwise the browser is sent to the
/// sign-in page and back here.
pub struct Member(pub SignedIn);

impl<'a> FromRequest<'a> for Member {
    async fn from_request(req: &'a Request, _body: &mut RequestBody) -> poem::Result<Self> {
        match signed_in(state(req)?, req.cookie()) {
            Some(s) => Ok(Member(s)),
            None => Err(PageError::SignIn {
                return_to: come_back_to(req),
            }
            .into()),
        }
    }
}

/// A signed-in administrator; others signed in are refused (403), the signed-out are sent to
/// sign in.
pub struct Admin(pub SignedIn);

impl<'a> FromRequest<'a> for Admin {
    async fn from_request(req: &'a Request, body: &mut RequestBody) -> poem::Result<Self> {
        let Member(s) = Member::from_request(req, body).await?;
        if !s.user.admin {
            return Err(PageError::AdminOnly.into());
        }
        Ok(Admin(s))
    }
}

/// An `application/x-www-form-urlencoded` form whose `csrf` field is this browser's token and
/// whose request comes from our own origin ([`csrf_ok`]); the rest of it deserialized into `T`
/// (`T` need not name the `csrf` field). A form that does not parse is a 400 page.
pub struct CheckedForm<T>(pub T);

impl<'a, T: DeserializeOwned> FromRequest<'a> for CheckedForm<T> {
    async fn from_request(req: &'a Request, body: &mut RequestBody) -> poem::Result<Self> {
        // The body's size is bounded by the app's body limit before it gets here.
        let bytes = body.take()?.into_vec().await?;
        let is_form = req
            .content_type()
            .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
        let csrf = url::form_urlencoded::parse(&bytes)
            .find(|(k, _)| k == "csrf")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        if !is_form || !csrf_ok(state(req)?, req, req.cookie(), &csrf) {
            return Err(PageError::FormExpired.into());
        }
        serde_urlencoded::from_bytes(&bytes)
            .map(CheckedForm)
            .map_err(|e| {
                PageError::refused(
                    poem::http::StatusCode::BAD_REQUEST,
                    crate::web::i18n::tr("error.malformed_form.title"),
                    crate::web::i18n::tr1("error.malformed_form.message", e),
                )
                .into()
            })
    }
}

/// A form with nothing but its CSRF field: `CheckedForm(Empty {}): CheckedForm<Empty>`.
#[derive(serde::Deserialize)]
pub struct Empty {}
