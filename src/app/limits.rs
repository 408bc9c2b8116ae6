//! One request-body limit for every route of the app, enforced on the bytes as they stream in
//! (a `Content-Length` over the limit is refused before reading; a chunked body is cut off at the
//! limit), so no endpoint ever holds more than its family's limit in memory.
//!
//! | family | paths | limit | over the limit |
//! |---|---|---|---|
//! | image API | `/api/pictor/…` | 20 MiB + framing | the API's JSON 413 (its own guard, `api::routes`) |
//! | playground API | `/playground/api/…` | 20 MiB + framing | the API's JSON 413 |
//! | OAuth endpoints | `/oauth/token`, `/oauth/revoke`, `/oauth/userinfo` | 64 KiB | RFC 6749 JSON `invalid_request` |
//! | avatar form | `/account/avatar` | 6 MiB | the pages' error page |
//! | every other route (pages, consent, setup, …) | | 64 KiB | the pages' error page |
//!
//! After refusing a body that is still arriving, up to [`DRAIN_CAP`] more bytes are read and
//! thrown away (never kept) for at most [`DRAIN_TIME`], so a client that is still sending can read
//! the answer; then the connection is closed.

use std::time::Duration;

use futures_util::StreamExt;
use poem::http::{HeaderValue, StatusCode, header};
use poem::{Body, Endpoint, IntoResponse, Request, Response};

use crate::api::MAX_BODY_BYTES;

/// Forms, OAuth endpoints and everything without a larger limit of its own.
pub const FORM_BODY_LIMIT: usize = 64 * 1024;
/// The avatar upload form: the 5 MiB picture plus multipart framing and the CSRF field.
pub const AVATAR_BODY_LIMIT: usize = 6 * 1024 * 1024;
/// Bytes read and discarded after a refusal so the client can read the answer.
pub const DRAIN_CAP: u64 = 4 * 1024 * 1024;
/// How long a refused body is drained at most.
pub const DRAIN_TIME: Duration = Duration::from_secs(2);
/// A body that sends nothing for this long is abandoned (slow-body defence).
const BODY_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Which error shape a route family answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// The image API and the playground's JSON endpoints: `{ok:false, error_code, …}`.
    Api,
    /// RFC 6749 §5.2 JSON.
    OAuth,
    /// An HTML error page.
    Page,
}

/// The limit and error shape of a path. `None`: the route enforces the limit itself (the image
/// API's guard reads with the same streaming cap).
pub fn family_of(path: &str) -> Option<(Family, usize)> {
    // The OpenAI-compatible alias (`/openai/v1/…`) is the image API too.
    if path == crate::api::PREFIX
        || path.starts_with("/api/pictor/")
        || path.starts_with("/openai/v1/")
    {
        return None;
    }
    Some(match path {
        "/oauth/token" | "/oauth/revoke" | "/oauth/userinfo" => (Family::OAuth, FORM_BODY_LIMIT),
        "/account/avatar" => (Family::Page, AVATAR_BODY_LIMIT),
        p if p.starts_with("/playground/api/") => (Family::Api, MAX_BODY_BYTES),
        _ => (Family::Page, FORM_BODY_LIMIT),
    })
}

fn human(limit: usize) -> String {
    if limit >= 1024 * 1024 {
        format!("{} MiB", limit / (1024 * 1024))
    } else {
        format!("{} KiB", limit / 1024)
    }
}

/// The family's answer to a body over `limit`, with `Connection: close`.
pub fn too_large(family: Family, limit: usize) -> Response {
    let what = format!("the request body is over {}", human(limit));
    let mut resp = match family {
        Family::Api => {
            crate::api::error::json_response(crate::api::error::codes::IMAGE_TOO_LARGE, &what)
        }
        Family::OAuth => {
            let mut r = crate::idp::error::OAuthError::InvalidRequest(what).into_response();
            r.set_status(StatusCode::PAYLOAD_TOO_LARGE);
            crate::idp::error::no_store(r)
        }
        Family::Page => crate::web::error_page_plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Too much data",
            &format!("{what}. Nothing was saved."),
        ),
    };
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// The outcome of reading a body with a cap.
pub enum BodyRead {
    Ok(Vec<u8>),
    /// Over the limit; what was read is already dropped.
    TooLarge,
    /// The body broke off or stalled.
    Failed(String),
}

/// Reads `body` keeping at most `limit` bytes. Past the limit the rest is discarded (not kept)
/// up to [`DRAIN_CAP`] bytes or [`DRAIN_TIME`], whichever comes first.
pub async fn read_capped(body: Body, limit: usize) -> BodyRead {
    read_capped_draining(body, limit, DRAIN_CAP, DRAIN_TIME).await
}

/// [`read_capped`] with its own drain bounds (the image API lets a 20–64 MiB upload finish
/// sending so the client reads the JSON 413 instead of a broken pipe).
pub async fn read_capped_draining(
    body: Body,
    limit: usize,
    drain_cap: u64,
    drain_time: Duration,
) -> BodyRead {
    let mut stream = std::pin::pin!(body.into_bytes_stream());
    let mut buf = Vec::new();
    loop {
        let next = match tokio::time::timeout(BODY_IDLE_TIMEOUT, stream.next()).await {
            Ok(next) => next,
            Err(_) => {
                return BodyRead::Failed(
                    "the request body stalled (nothing received for 30 s)".into(),
                );
            }
        };
        let Some(chunk) = next else { break };
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => return BodyRead::Failed(format!("could not read the request body: {e}")),
        };
        if buf.len() + chunk.len() > limit {
            let seen = (buf.len() + chunk.len()) as u64;
            drop(buf);
            drain(&mut stream, seen, drain_cap, drain_time).await;
            return BodyRead::TooLarge;
        }
        buf.extend_from_slice(&chunk);
    }
    BodyRead::Ok(buf)
}

async fn drain<S>(stream: &mut S, mut seen: u64, cap: u64, time: Duration)
where
    S: futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Unpin,
{
    let deadline = tokio::time::Instant::now() + time;
    while seen < cap {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(chunk))) => seen += chunk.len() as u64,
            _ => return,
        }
    }
}

/// A body stream that fails once more than `limit` bytes have passed (for routes that parse
/// their body as it streams, such as multipart uploads).
fn capped_stream(body: Body, limit: usize) -> Body {
    let mut seen = 0usize;
    let stream = body.into_bytes_stream().map(move |chunk| {
        let chunk = chunk?;
        seen += chunk.len();
        if seen > limit {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the request body is over {}", human(limit)),
            ));
        }
        Ok(chunk)
    });
    Body::from_bytes_stream(stream)
}

/// The declared `Content-Length`, if any.
pub fn declared_length(req: &Request) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// Middleware: applies the family limit of the request's path to its body.
pub async fn limit_body<E: Endpoint>(
    ep: std::sync::Arc<E>,
    mut req: Request,
) -> poem::Result<Response> {
    // Every method, GET and HEAD included: a body nobody reads is still capped.
    let Some((family, limit)) = family_of(req.uri().path()) else {
        return ep.call(req).await.map(IntoResponse::into_response);
    };
    if declared_length(&req).is_some_and(|n| n > limit as u64) {
        return Ok(too_large(family, limit));
    }
    if limit > FORM_BODY_LIMIT {
        // Large uploads are parsed as they stream; the cap makes the parser fail past the limit.
        let body = req.take_body();
        req.set_body(capped_stream(body, limit));
        return ep.call(req).await.map(IntoResponse::into_response);
    }
    match read_capped(req.take_body(), limit).await {
        BodyRead::Ok(bytes) => {
            req.set_body(bytes);
            ep.call(req).await.map(IntoResponse::into_response)
        }
        BodyRead::TooLarge => Ok(too_large(family, limit)),
        BodyRead::Failed(message) => Ok(match family {
            Family::OAuth => crate::idp::error::OAuthError::InvalidRequest(message).into_response(),
            Family::Api => crate::api::error::json_response(
                crate::api::error::codes::INVALID_REQUEST,
                &message,
            ),
            Family::Page => crate::web::error_page_plain(
                StatusCode::BAD_REQUEST,
                "Request not readable",
                &message,
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families() {
        assert_eq!(family_of("/api/pictor/v1/edit"), None);
        assert_eq!(
            family_of("/oauth/token"),
            Some((Family::OAuth, FORM_BODY_LIMIT))
        );
        assert_eq!(
            family_of("/oauth/authorize"),
            Some((Family::Page, FORM_BODY_LIMIT))
        );
        assert_eq!(
            family_of("/account/avatar"),
            Some((Family::Page, AVATAR_BODY_LIMIT))
        );
        assert_eq!(
            family_of("/playground/api/edit"),
            Some((Family::Api, MAX_BODY_BYTES))
        );
        assert_eq!(family_of("/login"), Some((Family::Page, FORM_BODY_LIMIT)));
    }

    #[tokio::test]
    async fn read_capped_keeps_at_most_the_limit() {
        let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = (0..100)
            .map(|_| Ok(bytes::Bytes::from(vec![b'a'; 1024])))
            .collect();
        let body = Body::from_bytes_stream(futures_util::stream::iter(chunks));
        assert!(matches!(
            read_capped(body, 64 * 1024).await,
            BodyRead::TooLarge
        ));
        let body = Body::from(vec![b'a'; 1000]);
        assert!(matches!(read_capped(body, 1000).await, BodyRead::Ok(b) if b.len() == 1000));
    }
}
