//! The OpenAI-compatible images API: `POST /v1/images/generations` (JSON) and
//! `POST /v1/images/edits` (multipart), both answered with `{"data": [{"b64_json": …}]}`.

use image::RgbaImage;
use serde_json::json;

use super::config::parse_size;
use super::http::CallError;
use super::http::{self, Body};
use super::{BackendConfig, png_bytes};
use crate::render::{EditSpec, GenerateSpec, RenderControl};

fn size(cfg: &BackendConfig, w: u32, h: u32) -> String {
    match &cfg.size {
        Some(s) if s == "auto" || parse_size(s).is_some() => s.clone(),
        _ => format!("{w}x{h}"),
    }
}

pub fn generate(
    cfg: &BackendConfig,
    base: &str,
    spec: &GenerateSpec,
    w: u32,
    h: u32,
    control: &RenderControl,
) -> Result<Vec<u8>, CallError> {
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
    let answer = http::post(
        cfg,
        base,
        "/v1/images/generations",
        &Body::Json(body),
        control,
    )?;
    http::b64_image(&answer, "/data/0/b64_json")
}

pub fn edit(
    cfg: &BackendConfig,
    base: &str,
    spec: &EditSpec,
    source: &RgbaImage,
    control: &RenderControl,
) -> Result<Vec<u8>, CallError> {
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
    let answer = http::post(cfg, base, "/v1/images/edits", &body, control)?;
    http::b64_image(&answer, "/data/0/b64_json")
}
