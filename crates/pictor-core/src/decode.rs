//! Decoding of uploaded images (PNG, JPEG, WebP) behind size limits.
//!
//! The format is recognised by magic bytes only, the header is read and checked against the
//! limits before any pixel buffer is allocated (decompression-bomb defence), and only then is the
//! image decoded, with `image::Limits` still in force. Every failure is
//! `RenderError::InvalidImage` with a message that can be shown to the client.

use std::io::Cursor;

use image::{DynamicImage, ImageDecoder, ImageError, ImageFormat, ImageReader};

use super::RenderError;

/// Upper bounds for an uploaded image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Maximum width × height.
    pub max_pixels: u64,
    /// Maximum width and maximum height.
    pub max_side: u32,
    /// Maximum bytes the decoder may allocate (decoded buffer plus the RGBA copy).
    pub max_alloc: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_pixels: 50_000_000,
            max_side: 16_384,
            max_alloc: 512 * 1024 * 1024,
        }
    }
}

/// What an upload is, as far as its header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceInfo {
    /// `"png"`, `"jpeg"` or `"webp"`.
    pub format: &'static str,
    pub width: u32,
    pub height: u32,
}

/// Recognises PNG, JPEG and WebP by their magic bytes. Anything else (GIF, BMP, text…) is `None`.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("jpeg")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("webp")
    } else {
        None
    }
}

/// Checks that `bytes` is a decodable PNG/JPEG/WebP within `limits` and returns its format and size.
///
/// The whole image is decoded (then dropped) to prove that the file is not broken.
pub fn inspect(bytes: &[u8], limits: &DecodeLimits) -> Result<SourceInfo, RenderError> {
    let (info, decoder) = open(bytes, limits)?;
    DynamicImage::from_decoder(decoder).map_err(|e| decode_error(info.format, e, limits))?;
    Ok(info)
}

/// Decodes `bytes` to RGBA within `limits`, applying the EXIF orientation when there is one.
pub fn decode(bytes: &[u8], limits: &DecodeLimits) -> Result<image::RgbaImage, RenderError> {
    let (info, mut decoder) = open(bytes, limits)?;
    // A missing or unreadable EXIF block is not an error: the picture is shown as stored.
    let orientation = decoder
        .orientation()
        .unwrap_or(image::metadata::Orientation::NoTransforms);
    let mut img =
        DynamicImage::from_decoder(decoder).map_err(|e| decode_error(info.format, e, limits))?;
    img.apply_orientation(orientation);
    Ok(img.into_rgba8())
}

/// Sniffs the format and reads the header; refuses before allocating if the image is too large.
fn open<'a>(
    bytes: &'a [u8],
    limits: &DecodeLimits,
) -> Result<(SourceInfo, impl ImageDecoder + 'a), RenderError> {
    let format = sniff(bytes).ok_or_else(|| {
        RenderError::InvalidImage("the file is not a PNG, JPEG or WebP image".to_owned())
    })?;
    let image_format = match format {
        "png" => ImageFormat::Png,
        "jpeg" => ImageFormat::Jpeg,
        _ => ImageFormat::WebP,
    };

    let mut image_limits = image::Limits::default();
    image_limits.max_image_width = Some(limits.max_side);
    image_limits.max_image_height = Some(limits.max_side);
    image_limits.max_alloc = Some(limits.max_alloc);

    let mut reader = ImageReader::with_format(Cursor::new(bytes), image_format);
    reader.limits(image_limits);
    // Builds the format's decoder, which reads only the header and checks the dimensions
    // against `image_limits` before allocating anything for the pixels.
    let decoder = reader
        .into_decoder()
        .map_err(|e| decode_error(format, e, limits))?;

    let (width, height) = decoder.dimensions();
    if width == 0 || height == 0 {
        return Err(RenderError::InvalidImage(format!(
            "the {} image has no pixels ({width}x{height})",
            format.to_uppercase()
        )));
    }
    check_size(width, height, limits)?;

    // The decoded buffer plus, unless it already is RGBA8, the RGBA copy made from it.
    let rgba = u64::from(width) * u64::from(height) * 4;
    let needed =
        decoder
            .total_bytes()
            .saturating_add(if decoder.color_type() == image::ColorType::Rgba8 {
                0
            } else {
                rgba
            });
    if needed > limits.max_alloc {
        return Err(RenderError::InvalidImage(format!(
            "the image ({width}x{height}) needs {} MiB to decode, more than the limit of {} MiB",
            needed.div_ceil(1 << 20),
            limits.max_alloc >> 20
        )));
    }

    Ok((
        SourceInfo {
            format,
            width,
            height,
        },
        decoder,
    ))
}

fn check_size(width: u32, height: u32, limits: &DecodeLimits) -> Result<(), RenderError> {
    if width > limits.max_side || height > limits.max_side {
        return Err(RenderError::InvalidImage(format!(
            "the image is {width}x{height}; each side may be at most {} pixels",
            limits.max_side
        )));
    }
    let pixels = u64::from(width) * u64::from(height);
    if pixels > limits.max_pixels {
        return Err(RenderError::InvalidImage(format!(
            "the image is {width}x{height} ({:.1} megapixels); the limit is {:.1} megapixels",
            pixels as f64 / 1e6,
            limits.max_pixels as f64 / 1e6
        )));
    }
    Ok(())
}

fn decode_error(format: &str, e: ImageError, limits: &DecodeLimits) -> RenderError {
    let name = format.to_uppercase();
    let msg = match e {
        ImageError::Limits(_) => format!(
            "the {name} image is too large (at most {} pixels per side, {:.1} megapixels)",
            limits.max_side,
            limits.max_pixels as f64 / 1e6
        ),
        ImageError::Unsupported(e) => format!("unsupported {name} variant: {e}"),
        ImageError::IoError(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            format!("the {name} file is truncated")
        }
        e => format!("the {name} file is damaged: {e}"),
    };
    RenderError::InvalidImage(msg)
}

/// An edit's mask, one byte a pixel of the source (255 = change, 0 = keep), from an upload
/// (PNG, JPEG or WebP, within `limits`) of exactly `width`×`height` (the source as decoded, its
/// EXIF orientation applied): where it has transparency, its transparent pixels (alpha below
/// half) are the area to change, as OpenAI's `/images/edits` reads masks; otherwise its light
/// pixels (luma at least half), as diffusers and AUTOMATIC1111 read black-and-white masks.
/// Refused when the size differs or it marks nothing.
pub fn mask(
    bytes: &[u8],
    width: u32,
    height: u32,
    limits: &DecodeLimits,
) -> Result<image::GrayImage, RenderError> {
    let bad = |m: String| RenderError::InvalidImage(format!("the mask: {m}"));
    let img = decode(bytes, limits).map_err(|e| match e {
        RenderError::InvalidImage(m) => bad(m),
        other => other,
    })?;
    if img.dimensions() != (width, height) {
        return Err(bad(format!(
            "it is {}×{} pixels, the photo {width}×{height}; it must be the photo's size",
            img.width(),
            img.height()
        )));
    }
    let alpha = img.pixels().any(|p| p[3] < 255);
    let out = image::GrayImage::from_fn(width, height, |x, y| {
        let [r, g, b, a] = img.get_pixel(x, y).0;
        let change = if alpha {
            a < 128
        } else {
            // Rec. 601 luma, as PIL's convert("L").
            (299 * u32::from(r) + 587 * u32::from(g) + 114 * u32::from(b)) / 1000 >= 128
        };
        image::Luma([if change { 255 } else { 0 }])
    });
    if !out.pixels().any(|p| p[0] == 255) {
        return Err(bad(
            "it marks nothing to change (transparent or white pixels mark the area to change)"
                .to_owned(),
        ));
    }
    Ok(out)
}

/// `result` with the source's own pixels outside `mask` (255 = changed), when all three are the
/// same size (a masked edit changes nothing else, as AUTOMATIC1111 pastes the original back).
pub fn keep_outside_mask(
    mut result: image::RgbaImage,
    source: &image::RgbaImage,
    mask: &image::GrayImage,
) -> image::RgbaImage {
    if result.dimensions() != source.dimensions() || result.dimensions() != mask.dimensions() {
        return result;
    }
    for ((out, src), m) in result.pixels_mut().zip(source.pixels()).zip(mask.pixels()) {
        if m[0] < 128 {
            *out = *src;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bitwise CRC-32 (IEEE), as used by PNG chunks.
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFFu32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
        let mut out = (data.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let mut crc_input = kind.to_vec();
        crc_input.extend_from_slice(data);
        out.extend_from_slice(&crc32(&crc_input).to_be_bytes());
        out
    }

    /// A PNG whose header declares `w`x`h` RGBA8 but whose data is a few bytes.
    fn lying_png(w: u32, h: u32) -> Vec<u8> {
        let mut ihdr = w.to_be_bytes().to_vec();
        ihdr.extend_from_slice(&h.to_be_bytes());
        ihdr.extend_from_slice(&[8, 6, 0, 0, 0]); // 8-bit RGBA, deflate, no interlace
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.extend(chunk(b"IHDR", &ihdr));
        // A tiny zlib stream (stored, empty) in place of gigabytes of pixels.
        png.extend(chunk(
            b"IDAT",
            &[0x78, 0x01, 0x01, 0x00, 0x00, 0xFF, 0xFF, 0, 0, 0, 1],
        ));
        png.extend(chunk(b"IEND", &[]));
        png
    }

    fn encode(img: &DynamicImage, format: ImageFormat) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    fn sample() -> DynamicImage {
        DynamicImage::ImageRgb8(image::RgbImage::from_fn(40, 30, |x, y| {
            image::Rgb([(x * 6) as u8, (y * 8) as u8, 100])
        }))
    }

    #[test]
    fn crc32_matches_known_value() {
        // The IEND chunk's CRC is famous: AE 42 60 82.
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
    }

    #[test]
    fn sniff_recognises_only_png_jpeg_webp() {
        let img = sample();
        assert_eq!(sniff(&encode(&img, ImageFormat::Png)), Some("png"));
        assert_eq!(sniff(&encode(&img, ImageFormat::Jpeg)), Some("jpeg"));
        assert_eq!(sniff(&encode(&img, ImageFormat::WebP)), Some("webp"));
        assert_eq!(sniff(b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"), None);
        assert_eq!(sniff(b"BM\x3a\x00\x00\x00\x00\x00\x00\x00"), None);
        assert_eq!(sniff(b"hello, world"), None);
        assert_eq!(sniff(b"RIFF\x00\x00\x00\x00WAVEfmt "), None);
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn inspect_reports_format_and_size() {
        let img = sample();
        for (format, name) in [
            (ImageFormat::Png, "png"),
            (ImageFormat::Jpeg, "jpeg"),
            (ImageFormat::WebP, "webp"),
        ] {
            let info = inspect(&encode(&img, format), &DecodeLimits::default()).unwrap();
            assert_eq!(
                info,
                SourceInfo {
                    format: name,
                    width: 40,
                    height: 30
                }
            );
        }
    }

    #[test]
    fn inspect_refuses_a_decompression_bomb_header() {
        let png = lying_png(100_000, 100_000);
        assert!(png.len() < 100);
        let err = inspect(&png, &DecodeLimits::default()).unwrap_err();
        assert!(matches!(err, RenderError::InvalidImage(_)), "{err:?}");
        let err = decode(&png, &DecodeLimits::default()).unwrap_err();
        assert!(
            matches!(err, RenderError::InvalidImage(ref m) if m.contains("too large")),
            "{err:?}"
        );
    }

    #[test]
    fn pixel_and_alloc_limits_apply_below_the_side_limit() {
        let png = lying_png(10_000, 10_000);
        let err = inspect(&png, &DecodeLimits::default()).unwrap_err();
        assert!(
            matches!(err, RenderError::InvalidImage(ref m) if m.contains("megapixels")),
            "{err:?}"
        );

        let img = encode(&sample(), ImageFormat::Png);
        let tight = DecodeLimits {
            max_alloc: 1000,
            ..DecodeLimits::default()
        };
        let err = inspect(&img, &tight).unwrap_err();
        assert!(matches!(err, RenderError::InvalidImage(_)), "{err:?}");
    }

    #[test]
    fn broken_and_foreign_files_are_invalid() {
        let limits = DecodeLimits::default();
        let mut png = encode(&sample(), ImageFormat::Png);
        png.truncate(png.len() / 2);
        assert!(matches!(
            inspect(&png, &limits),
            Err(RenderError::InvalidImage(_))
        ));
        // Header valid, data empty.
        assert!(matches!(
            inspect(&lying_png(4, 4), &limits),
            Err(RenderError::InvalidImage(_))
        ));
        assert!(matches!(
            inspect(b"GIF89a....", &limits),
            Err(RenderError::InvalidImage(m)) if m.contains("not a PNG")
        ));
        assert!(matches!(
            inspect(b"\xFF\xD8\xFF garbage", &limits),
            Err(RenderError::InvalidImage(_))
        ));
    }

    /// Inserts an EXIF APP1 segment with the given orientation right after the JPEG's SOI.
    fn with_exif_orientation(jpeg: &[u8], orientation: u16) -> Vec<u8> {
        let mut tiff = b"II*\0".to_vec();
        tiff.extend_from_slice(&8u32.to_le_bytes()); // first IFD right after the header
        tiff.extend_from_slice(&1u16.to_le_bytes()); // one entry
        tiff.extend_from_slice(&0x0112u16.to_le_bytes()); // Orientation
        tiff.extend_from_slice(&3u16.to_le_bytes()); // SHORT
        tiff.extend_from_slice(&1u32.to_le_bytes());
        tiff.extend_from_slice(&orientation.to_le_bytes());
        tiff.extend_from_slice(&[0, 0]);
        tiff.extend_from_slice(&0u32.to_le_bytes()); // no next IFD
        let mut exif = b"Exif\0\0".to_vec();
        exif.extend(tiff);
        let mut out = jpeg[..2].to_vec();
        out.extend_from_slice(&[0xFF, 0xE1]);
        out.extend_from_slice(&((exif.len() + 2) as u16).to_be_bytes());
        out.extend(exif);
        out.extend_from_slice(&jpeg[2..]);
        out
    }

    #[test]
    fn exif_orientation_is_applied() {
        let jpeg = encode(&sample(), ImageFormat::Jpeg);
        let limits = DecodeLimits::default();
        assert_eq!(decode(&jpeg, &limits).unwrap().dimensions(), (40, 30));
        // 6 = "rotate 90° clockwise to display".
        let rotated = with_exif_orientation(&jpeg, 6);
        assert_eq!(decode(&rotated, &limits).unwrap().dimensions(), (30, 40));
        // inspect reports the stored size.
        assert_eq!(inspect(&rotated, &limits).unwrap().width, 40);
    }

    #[test]
    fn decode_returns_rgba_pixels() {
        let img = sample();
        let decoded = decode(&encode(&img, ImageFormat::Png), &DecodeLimits::default()).unwrap();
        assert_eq!(decoded.dimensions(), (40, 30));
        assert_eq!(decoded.get_pixel(5, 3).0, [30, 24, 100, 255]);
    }

    fn png(img: image::DynamicImage) -> Vec<u8> {
        let mut out = Vec::new();
        img.write_to(&mut std::io::Cursor::new(&mut out), ImageFormat::Png)
            .unwrap();
        out
    }

    #[test]
    fn masks_read_transparency_or_light_and_must_fit() {
        let limits = DecodeLimits::default();
        // Transparent left half (OpenAI's convention), whatever the colours.
        let rgba = image::RgbaImage::from_fn(8, 4, |x, _| {
            image::Rgba([255, 255, 255, if x < 4 { 0 } else { 255 }])
        });
        let m = mask(&png(DynamicImage::ImageRgba8(rgba)), 8, 4, &limits).unwrap();
        assert!(
            m.enumerate_pixels()
                .all(|(x, _, p)| (p[0] == 255) == (x < 4))
        );
        // No transparency: white marks the area (diffusers, A1111).
        let grey =
            image::GrayImage::from_fn(8, 4, |_, y| image::Luma([if y >= 2 { 200 } else { 90 }]));
        let m = mask(&png(DynamicImage::ImageLuma8(grey)), 8, 4, &limits).unwrap();
        assert!(
            m.enumerate_pixels()
                .all(|(_, y, p)| (p[0] == 255) == (y >= 2))
        );
        // Another size, or nothing marked: refused, naming the mask.
        let black = png(DynamicImage::ImageLuma8(image::GrayImage::new(8, 4)));
        for (bytes, w) in [(black.clone(), 4), (black, 8)] {
            let e = mask(&bytes, w, 4, &limits).unwrap_err().to_string();
            assert!(e.contains("the mask"), "{e}");
        }
        // Outside the mask the source's pixels come back; a resized result is left alone.
        let src = image::RgbaImage::from_pixel(8, 4, image::Rgba([1, 2, 3, 255]));
        let out = image::RgbaImage::from_pixel(8, 4, image::Rgba([9, 9, 9, 255]));
        let m = image::GrayImage::from_fn(8, 4, |x, _| image::Luma([if x < 4 { 255 } else { 0 }]));
        let kept = keep_outside_mask(out.clone(), &src, &m);
        assert!(
            kept.enumerate_pixels()
                .all(|(x, _, p)| p[0] == if x < 4 { 9 } else { 1 })
        );
        let small = image::RgbaImage::new(4, 8);
        assert_eq!(keep_outside_mask(small.clone(), &src, &m), small);
    }
}
