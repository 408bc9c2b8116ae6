//! `GET /files/{token}.png`: finished pictures by their unguessable name, no key needed.

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::{Data, Path, StaticFileRequest};
use poem::{IntoResponse, Response, handler};

use crate::api::error::{codes, json_response};
use crate::state::AppState;

#[handler]
pub async fn get_file(
    Path(name): Path<String>,
    state: Data<&AppState>,
    req: StaticFileRequest,
) -> Response {
    let not_found = || {
        let mut r = json_response(codes::NOT_FOUND, "no such picture");
        r.set_status(StatusCode::NOT_FOUND);
        r
    };
    // Only names we generate: 32 hex digits + ".png". Nothing else can reach the filesystem.
    let Some(token) = name.strip_suffix(".png") else {
        return not_found();
    };
    if token.len() != 32
        || !token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return not_found();
    }
    let path = state.config.images_dir().join(&name);
    match req.create_response(&path, false, false) {
        Ok(resp) => {
            let mut resp = resp.into_response();
            let h = resp.headers_mut();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
            h.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            );
            h.insert(
                "x-content-type-options",
                HeaderValue::from_static("nosniff"),
            );
            resp
        }
        Err(_) => not_found(),
    }
}
