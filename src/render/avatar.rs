//! Profile pictures: an uploaded PNG/JPEG/WebP becomes a 256×256 PNG, cropped to the centre
//! square. Synchronous and CPU-bound: callers run it on the blocking pool.

use image::imageops::{self, FilterType};

use super::RenderError;
use super::decode::{self, DecodeLimits};

/// Width and height of every stored avatar.
pub const AVATAR_SIDE: u32 = 256;

/// Limits of an avatar upload, tighter than the image API's: one upload decodes within about
/// 100 MiB (the decoder's buffer plus the RGBA copy), so a few at once stay far under 1 GB.
pub const AVATAR_LIMITS: DecodeLimits = DecodeLimits {
    max_pixels: 12_000_000,
    max_side: 8192,
    max_alloc: 100 * 1024 * 1024,
};

/// Decodes `bytes` (within [`AVATAR_LIMITS`]), crops the centre square, resizes it to 256×256
/// with a Lanczos filter and encodes it as PNG.
pub fn avatar_png(bytes: &[u8]) -> Result<Vec<u8>, RenderError> {
    let img = decode::decode(bytes, &AVATAR_LIMITS)?;
    let (w, h) = img.dimensions();
    let side = w.min(h);
    // A view of the centre square: no copy of the (possibly 12-megapixel) picture.
    let square = imageops::crop_imm(&img, (w - side) / 2, (h - side) / 2, side, side);
    let resized = if side == AVATAR_SIDE {
        square.to_image()
    } else {
        // Lanczos3 keeps edges sharp when shrinking large photos and is smooth when enlarging
        // small ones; at 256×256 its cost is negligible.
        imageops::resize(&*square, AVATAR_SIDE, AVATAR_SIDE, FilterType::Lanczos3)
    };
    drop(img);
    let raw = resized.as_raw();
    let opaque = raw.chunks_exact(4).all(|px| px[3] == 255);
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, AVATAR_SIDE, AVATAR_SIDE);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_color(if opaque {
        png::ColorType::Rgb
    } else {
        png::ColorType::Rgba
    });
    let failed = |e: png::EncodingError| RenderError::Failed(format!("encoding the avatar: {e}"));
    let mut writer = encoder.write_header().map_err(failed)?;
    if opaque {
        let rgb: Vec<u8> = raw
            .chunks_exact(4)
            .flat_map(|px| [px[0], px[1], px[2]])
            .collect();
        writer.write_image_data(&rgb).map_err(failed)?;
    } else {
        writer.write_image_data(raw).map_err(failed)?;
    }
    writer.finish().map_err(failed)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_png(img: &image::RgbaImage) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn crops_the_centre_and_resizes() {
        // 600×300: left and right quarters red, middle square blue.
        let img = image::RgbaImage::from_fn(600, 300, |x, _| {
            if (150..450).contains(&x) {
                image::Rgba([0, 0, 255, 255])
            } else {
                image::Rgba([255, 0, 0, 255])
            }
        });
        let png = avatar_png(&encode_png(&img)).unwrap();
        let out = image::load_from_memory(&png).unwrap().to_rgba8();
        assert_eq!(out.dimensions(), (256, 256));
        for (x, y) in [(0, 0), (255, 255), (128, 128), (0, 255)] {
            let px = out.get_pixel(x, y);
            assert!(px[2] > 200 && px[0] < 40, "{x},{y}: {px:?}");
        }
    }

    #[test]
    fn refuses_what_is_not_an_image() {
        assert!(matches!(
            avatar_png(b"GIF89a not supported"),
            Err(RenderError::InvalidImage(_))
        ));
    }
}
