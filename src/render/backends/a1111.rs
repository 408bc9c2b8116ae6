//! The AUTOMATIC1111 / Forge web API: `POST /sdapi/v1/txt2img` and `/sdapi/v1/img2img`, JSON
//! with base64 images in and out (`{"images": ["…"]}`).

use base64::Engine;
use image::RgbaImage;
use serde_json::json;

use super::http::CallError;
use super::http::{self, Body};
use super::{BackendConfig, png_bytes};
use crate::render::{EditSpec, GenerateSpec, RenderControl};

/// Stable Diffusion wants sides in multiples of 8; the answer is resized to the exact size.
fn round8(v: u32) -> u32 {
    (v.div_ceil(8) * 8).clamp(64, 2048)
}

fn common(cfg: &BackendConfig, prompt: &str, seed: u64, w: u32, h: u32) -> serde_json::Value {
    let mut body = json!({
        "prompt": prompt,
        "negative_prompt": cfg.negative_prompt.clone().unwrap_or_default(),
        "seed": seed as i64 & 0xFFFF_FFFF,
        "width": round8(w),
        "height": round8(h),
        "steps": cfg.steps.unwrap_or(25),
        "batch_size": 1,
        "n_iter": 1,
    });
    if let Some(model) = &cfg.model {
        body["override_settings"] = json!({ "sd_model_checkpoint": model });
    }
    body
}

pub fn txt2img(
    cfg: &BackendConfig,
    base: &str,
    spec: &GenerateSpec,
    w: u32,
    h: u32,
    control: &RenderControl,
) -> Result<Vec<u8>, CallError> {
    let body = common(cfg, &spec.prompt, spec.seed, w, h);
    let answer = http::post(cfg, base, "/sdapi/v1/txt2img", &Body::Json(body), control)?;
    http::b64_image(&answer, "/images/0")
}

pub fn img2img(
    cfg: &BackendConfig,
    base: &str,
    spec: &EditSpec,
    source: &RgbaImage,
    control: &RenderControl,
) -> Result<Vec<u8>, CallError> {
    let png = png_bytes(source)?;
    let mut body = common(
        cfg,
        &spec.instruction,
        spec.seed,
        source.width(),
        source.height(),
    );
    body["init_images"] = json!([base64::engine::general_purpose::STANDARD.encode(png)]);
    body["denoising_strength"] = json!(cfg.denoising_strength.unwrap_or(0.55));
    let answer = http::post(cfg, base, "/sdapi/v1/img2img", &Body::Json(body), control)?;
    http::b64_image(&answer, "/images/0")
}
