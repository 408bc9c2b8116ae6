//! PNG encoding of finished pictures: fast deflate, RGB when fully opaque, and the
//! AUTOMATIC1111-style `parameters` text chunk that records how a picture was made.

use std::io::Cursor;

use super::infotext::Infotext;
use super::{PngParameters, RenderError};

/// Keyword of the text chunk, as written by AUTOMATIC1111 and read by most image tools.
pub const PARAMETERS_KEYWORD: &str = "parameters";

/// Encodes `img` as an 8-bit PNG with a `parameters` text chunk.
///
/// Uses `Compression::Fast` (fdeflate): about 40x faster than the default level for a few percent
/// more bytes, which matters because encoding sits on every job's critical path.
pub fn png_with_parameters(
    img: &image::RgbaImage,
    params: &PngParameters,
) -> Result<Vec<u8>, RenderError> {
    let (width, height) = img.dimensions();
    let raw = img.as_raw();
    let opaque = raw.chunks_exact(4).all(|px| px[3] == 255);

    let mut out = Vec::with_capacity(raw.len() / 3 + 4096);
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    encoder.set_color(if opaque {
        png::ColorType::Rgb
    } else {
        png::ColorType::Rgba
    });

    let text = parameters_text(params, width, height);
    let chunk = if is_latin1(&text) {
        encoder.add_text_chunk(PARAMETERS_KEYWORD.to_owned(), text)
    } else {
        // tEXt is Latin-1 only; iTXt carries UTF-8 under the same keyword.
        encoder.add_itxt_chunk(PARAMETERS_KEYWORD.to_owned(), text)
    };
    chunk.map_err(encode_failed)?;

    let mut writer = encoder.write_header().map_err(encode_failed)?;
    if opaque {
        let rgb: Vec<u8> = raw
            .chunks_exact(4)
            .flat_map(|px| [px[0], px[1], px[2]])
            .collect();
        writer.write_image_data(&rgb).map_err(encode_failed)?;
    } else {
        writer.write_image_data(raw).map_err(encode_failed)?;
    }
    writer.finish().map_err(encode_failed)?;
    Ok(out)
}

/// The `parameters` text in AUTOMATIC1111's format (see [`super::infotext`]): the prompt, the
/// negative prompt, then the settings A1111 writes, in its order, and Pictor's own after them.
pub fn parameters_text(params: &PngParameters, width: u32, height: u32) -> String {
    // NUL is not allowed in PNG text; other control characters are harmless.
    let clean = |s: &str| s.replace('\0', " ");
    let mut t = Infotext {
        prompt: clean(&params.prompt),
        ..Infotext::default()
    };
    let mut kv = |k: &str, v: String| t.params.push((k.to_owned(), v));
    match &params.details {
        None => {
            kv("Steps", "1".into());
            kv("Sampler", "procedural".into());
            kv("Seed", params.seed.to_string());
            kv("Size", format!("{width}x{height}"));
            kv("Model", params.model.clone());
        }
        Some(d) => {
            kv("Steps", d.steps.to_string());
            kv("Sampler", d.sampler.clone());
            kv("Schedule type", d.schedule.into());
            kv("CFG scale", d.guidance.to_string());
            if let Some(g) = d.distilled_guidance {
                kv("Distilled CFG Scale", g.to_string());
            }
            kv("Seed", params.seed.to_string());
            kv("Size", format!("{}x{}", d.size.0, d.size.1));
            if !d.model_hash.is_empty() {
                kv("Model hash", d.model_hash.clone());
            }
            kv("Model", d.model_name.clone());
            if !d.loras.is_empty() {
                // AUTOMATIC1111: `Lora hashes: "name: 0123456789ab, …"` (12 hex digits of the
                // addnet hash; names without ':' and ','; quoted by the infotext writer).
                let hashes: Vec<String> = d
                    .loras
                    .iter()
                    .map(|(name, hash)| {
                        let name = name.replace([':', ','], "");
                        format!("{name}: {}", hash.get(..12).unwrap_or(hash))
                    })
                    .collect();
                kv("Lora hashes", hashes.join(", "));
            }
            if let Some(s) = d.strength {
                kv("Denoising strength", s.to_string());
            }
            if let Some(g) = d.image_guidance {
                kv("Image CFG scale", g.to_string());
            }
            if let Some(m) = d.edit_mode {
                kv("Edit mode", m.into());
            }
            if !d.exact.is_empty() {
                kv("Exact edits", d.exact.join(", "));
            }
            kv("RNG", d.rng.into());
            kv("Noise source", d.noise.into());
            if (d.size.0, d.size.1) != (width, height) {
                kv("Output size", format!("{width}x{height}"));
            }
            if params.model != d.model_name {
                kv("Pictor model", params.model.clone());
            }
        }
    }
    if params.kind.eq_ignore_ascii_case("edit") {
        kv("Edit", "yes".into());
    }
    // What the built-in painter drew of the prompt and what it could not draw.
    if let Some(scene) = &params.scene {
        if !scene.drawn.is_empty() {
            kv("Drawn", scene.drawn.join(", "));
        }
        if !scene.not_drawn.is_empty() {
            kv("Not drawn", scene.not_drawn.join(", "));
        }
    }
    kv(
        "Version",
        concat!("pictor ", env!("CARGO_PKG_VERSION")).into(),
    );
    if let Some(d) = &params.details
        && !d.negative_prompt.is_empty()
    {
        t.negative_prompt = clean(&d.negative_prompt);
    }
    t.render()
}

/// Reads the `parameters` text back from a PNG (tEXt, zTXt or iTXt), if present.
///
/// Only the chunks before the image data are read; no pixels are decoded.
pub fn read_parameters(png: &[u8]) -> Option<String> {
    let decoder = png::Decoder::new(Cursor::new(png));
    let reader = decoder.read_info().ok()?;
    let info = reader.info();
    if let Some(chunk) = info
        .uncompressed_latin1_text
        .iter()
        .find(|c| c.keyword == PARAMETERS_KEYWORD)
    {
        return Some(chunk.text.clone());
    }
    if let Some(chunk) = info
        .utf8_text
        .iter()
        .find(|c| c.keyword == PARAMETERS_KEYWORD)
    {
        return chunk.get_text().ok();
    }
    info.compressed_latin1_text
        .iter()
        .find(|c| c.keyword == PARAMETERS_KEYWORD)
        .and_then(|c| c.get_text().ok())
}

fn is_latin1(text: &str) -> bool {
    text.chars().all(|c| (c as u32) <= 0xFF)
}

fn encode_failed(e: png::EncodingError) -> RenderError {
    RenderError::Failed(format!("PNG encoding failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(prompt: &str, kind: &'static str) -> PngParameters {
        PngParameters {
            prompt: prompt.to_owned(),
            seed: 123,
            model: "fast".to_owned(),
            kind,
            details: None,
            scene: None,
        }
    }

    fn gradient(w: u32, h: u32, alpha: u8) -> image::RgbaImage {
        image::RgbaImage::from_fn(w, h, |x, y| image::Rgba([x as u8, y as u8, 77, alpha]))
    }

    #[test]
    fn latin1_prompt_round_trips_in_text_chunk() {
        let img = gradient(16, 8, 255);
        let png = png_with_parameters(&img, &params("a red fox, café", "generate")).unwrap();
        let text = read_parameters(&png).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("a red fox, café"));
        let settings = lines.next().unwrap();
        assert!(settings.starts_with("Steps: 1, Sampler: procedural, Seed: 123, Size: 16x8"));
        assert!(settings.contains("Model: fast"));
        assert!(settings.ends_with(concat!("Version: pictor ", env!("CARGO_PKG_VERSION"))));
        assert!(!settings.contains("Edit"));
        // A tEXt chunk, not iTXt.
        assert!(png.windows(4).any(|w| w == b"tEXt"));
        assert!(!png.windows(4).any(|w| w == b"iTXt"));
    }

    #[test]
    fn russian_prompt_round_trips_in_itxt_chunk() {
        let img = gradient(8, 8, 255);
        let png = png_with_parameters(&img, &params("закат над морем", "edit")).unwrap();
        let text = read_parameters(&png).unwrap();
        assert!(text.starts_with("закат над морем\n"));
        assert!(text.contains("Edit: yes"));
        assert!(png.windows(4).any(|w| w == b"iTXt"));
    }

    #[test]
    fn opaque_is_rgb_and_translucent_is_rgba() {
        for (alpha, expected) in [
            (255, image::ColorType::Rgb8),
            (128, image::ColorType::Rgba8),
        ] {
            let img = gradient(10, 6, alpha);
            let png = png_with_parameters(&img, &params("x", "generate")).unwrap();
            let decoded = image::load_from_memory(&png).unwrap();
            assert_eq!(decoded.color(), expected);
            assert_eq!(decoded.to_rgba8(), img);
        }
    }

    #[test]
    fn nul_in_prompt_is_replaced() {
        let img = gradient(4, 4, 255);
        let png = png_with_parameters(&img, &params("a\0b", "generate")).unwrap();
        assert!(read_parameters(&png).unwrap().starts_with("a b\n"));
    }

    #[test]
    fn garbage_has_no_parameters() {
        assert_eq!(read_parameters(b"not a png"), None);
    }
}
