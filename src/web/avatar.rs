//! `GET /avatars/{usr_id}.png`: the user's uploaded avatar, or a generated one (a symmetric 5×5
//! pattern in a colour derived from the id) for users who have not set theirs.

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::{Data, Path};
use poem::{IntoResponse, Response, handler};

use crate::state::AppState;
use crate::store::UserId;

#[handler]
pub async fn avatar(Path(name): Path<String>, state: Data<&AppState>) -> Response {
    let not_found = || StatusCode::NOT_FOUND.into_response();
    let Some(id) = name.strip_suffix(".png").and_then(UserId::parse) else {
        return not_found();
    };
    let Ok(Some(user)) = state.store.user(id.0) else {
        return not_found();
    };
    let bytes = match &user.avatar {
        Some(token) if token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()) => {
            match tokio::fs::read(
                state
                    .config
                    .data_dir
                    .join("avatars")
                    .join(format!("{token}.png")),
            )
            .await
            {
                Ok(b) => b,
                Err(_) => generated(id.0),
            }
        }
        _ => generated(id.0),
    };
    let mut resp = bytes.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("image/png"));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// A 160×160 identicon for a user id.
pub fn generated(id: u64) -> Vec<u8> {
    let bytes = id.to_le_bytes();
    let hue = (bytes[0] as f32 / 255.0) * 360.0;
    let (r, g, b) = hsl(hue, 0.55, 0.55);
    const CELL: usize = 32;
    const SIZE: usize = CELL * 5;
    let bits = id.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15;
    let mut px = vec![0u8; SIZE * SIZE * 3];
    for y in 0..SIZE {
        for x in 0..SIZE {
            let (cx, cy) = (x / CELL, y / CELL);
            let col = cx.min(4 - cx);
            let on = (bits >> (cy * 3 + col)) & 1 == 1;
            let c = if on { (r, g, b) } else { (240, 241, 245) };
            let i = (y * SIZE + x) * 3;
            px[i..i + 3].copy_from_slice(&[c.0, c.1, c.2]);
        }
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, SIZE as u32, SIZE as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        if let Ok(mut w) = enc.write_header() {
            let _ = w.write_image_data(&px);
        }
    }
    out
}

fn hsl(h: f32, s: f32, l: f32) -> (u8, u8, u8) {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = h / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    (
        ((r + m) * 255.0) as u8,
        ((g + m) * 255.0) as u8,
        ((b + m) * 255.0) as u8,
    )
}
