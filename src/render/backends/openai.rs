//! The OpenAI-compatible images API: `POST /v1/images/generations` (JSON) and
//! `POST /v1/images/edits` (multipart), both answered with `{"data": [{"b64_json": …}]}`.

use image::RgbaImage;
use serde_json::json;

use super::config::parse_size;
use super::http::{self, Body};
use super::{BackendConfig, png_bytes};
use crate::render::{EditSpec, GenerateSpec, RenderControl, RenderError};

fn size(cfg: &BackendConfig, w: u32, h: u32) -> String {
    match &cfg.size {
        Some(s) if s == "auto" || parse_size(s).is_some() => s.clone(),
        _ => format!("{w}x{h}"),
    }
}

pub fn generate(
    cfg: &BackendConfig,
    spec: &GenerateSpec,
    w: u32,
    h: u32,
    control: &RenderControl,
) -> Result<Vec<u8>, RenderError> {
    let mut body = json!({
        "prompt": spec.prompt,
        "n": 1,
        "size": size(cfg, w, h),
        "response_format": "b64_json",
        "seed": spec.seed,
    });
    if let Some(model) = &cfg.model {
        body["model"] = json!(model);
    }
    let url = format!("{}/v1/images/generations", http::base(&cfg.url));
    let answer = http::post(cfg, &url, &Body::Json(body), control)?;
    http::b64_image(&answer, "/data/0/b64_json")
}

pub fn edit(
    cfg: &BackendConfig,
    spec: &EditSpec,
    source: &RgbaImage,
    control: &RenderControl,
) -> Result<Vec<u8>, RenderError> {
    let png = png_bytes(source)?;
    let mut fields = vec![
        ("prompt".to_owned(), spec.instruction.clone()),
        ("n".to_owned(), "1".to_owned()),
        ("response_format".to_owned(), "b64_json".to_owned()),
        (
            "size".to_owned(),
            size(cfg, source.width(), source.height()),
        ),
    ];
    if let Some(model) = &cfg.model {
        fields.push(("model".to_owned(), model.clone()));
    }
    let body = Body::Multipart {
        fields,
        file: (
            "image".to_owned(),
            "image.png".to_owned(),
            "image/png".to_owned(),
            png,
        ),
    };
    let url = format!("{}/v1/images/edits", http::base(&cfg.url));
    let answer = http::post(cfg, &url, &body, control)?;
    http::b64_image(&answer, "/data/0/b64_json")
}
