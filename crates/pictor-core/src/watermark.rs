//! The visible "Pictor" watermark in the bottom-right corner.
//!
//! The mark is an embedded white-on-transparent PNG (`assets/watermark.png`), decoded once, scaled
//! to about 18% of the picture width and drawn over a soft dark shadow so it reads on light and
//! dark pictures alike. Only the corner region is touched.

use std::sync::OnceLock;

use image::{GrayImage, Luma, RgbaImage, imageops};

static ASSET: &[u8] = include_bytes!("../../../assets/watermark.png");

/// Width of the mark as a fraction of the picture width.
const WIDTH_FRACTION: f32 = 0.18;
/// The mark is never narrower than this (unless the picture itself is tiny).
const MIN_WIDTH: u32 = 96;
/// Distance from the corner as a fraction of the picture's short side.
const MARGIN_FRACTION: f32 = 0.02;
/// Opacity of the white mark and of its shadow.
const MARK_OPACITY: f32 = 0.92;
const SHADOW_OPACITY: f32 = 0.62;

/// The decoded asset; `None` if it failed to decode (then a plain bar is drawn instead).
fn asset() -> Option<&'static RgbaImage> {
    static MARK: OnceLock<Option<RgbaImage>> = OnceLock::new();
    MARK.get_or_init(|| {
        image::load_from_memory_with_format(ASSET, image::ImageFormat::Png)
            .ok()
            .map(|img| img.into_rgba8())
    })
    .as_ref()
}

/// Draws the watermark into the bottom-right corner of `img`.
pub fn apply(img: &mut RgbaImage) {
    let (w, h) = img.dimensions();
    if w < 8 || h < 8 {
        return;
    }
    let mark = match asset() {
        Some(asset) => scaled_mark(asset, w, h),
        None => fallback_mark(w, h),
    };
    let (mw, mh) = mark.dimensions();
    if mw == 0 || mh == 0 {
        return;
    }
    let margin = ((w.min(h) as f32 * MARGIN_FRACTION).round() as u32).max(2);
    let x0 = w.saturating_sub(mw + margin);
    let y0 = h.saturating_sub(mh + margin);

    // Shadow: the mark's alpha, spread and blurred, drawn black under the mark and offset a
    // little downwards, so white text stays readable on white skies.
    let sigma = (mh as f32 * 0.09).max(1.0);
    let pad = (sigma * 2.5).ceil() as u32;
    let mut mask = GrayImage::new(mw + 2 * pad, mh + 2 * pad);
    for (x, y, px) in mark.enumerate_pixels() {
        mask.put_pixel(x + pad, y + pad, Luma([px[3]]));
    }
    let shadow = imageops::fast_blur(&mask, sigma);
    let offset = (mh as f32 * 0.03).round() as i64;
    for (sx, sy, a) in shadow.enumerate_pixels() {
        let a = (f32::from(a[0]) / 255.0 * 2.2).min(1.0) * SHADOW_OPACITY;
        let x = i64::from(x0) + i64::from(sx) - i64::from(pad);
        let y = i64::from(y0) + i64::from(sy) - i64::from(pad) + offset;
        blend(img, x, y, [0.0, 0.0, 0.0], a);
    }

    for (mx, my, px) in mark.enumerate_pixels() {
        let a = f32::from(px[3]) / 255.0 * MARK_OPACITY;
        let color = [
            f32::from(px[0]) / 255.0,
            f32::from(px[1]) / 255.0,
            f32::from(px[2]) / 255.0,
        ];
        blend(img, i64::from(x0 + mx), i64::from(y0 + my), color, a);
    }
}

/// The asset resized for a `w`x`h` picture.
fn scaled_mark(asset: &RgbaImage, w: u32, h: u32) -> RgbaImage {
    let (aw, ah) = asset.dimensions();
    let mw = mark_width(w, h);
    let mh = ((u64::from(mw) * u64::from(ah)) / u64::from(aw.max(1))).max(1) as u32;
    imageops::resize(asset, mw, mh, imageops::FilterType::Triangle)
}

fn mark_width(w: u32, h: u32) -> u32 {
    let wanted = ((w as f32 * WIDTH_FRACTION).round() as u32).max(MIN_WIDTH);
    // On tiny pictures keep the mark inside, and not taller than a third of the height.
    wanted.min(w * 6 / 10).min(h * 4 / 3).max(1)
}

/// A plain white bar with a dark outline, used only if the asset could not be decoded, so the
/// watermark is never silently missing.
fn fallback_mark(w: u32, h: u32) -> RgbaImage {
    let mw = mark_width(w, h);
    let mh = (mw / 4).max(2);
    let border = (mh / 8).max(1);
    RgbaImage::from_fn(mw, mh, |x, y| {
        let edge = x < border || y < border || x >= mw - border || y >= mh - border;
        if edge {
            image::Rgba([40, 40, 40, 255])
        } else {
            image::Rgba([255, 255, 255, 255])
        }
    })
}

/// Source-over compositing of one straight-alpha colour onto one pixel; outside is ignored.
fn blend(img: &mut RgbaImage, x: i64, y: i64, color: [f32; 3], alpha: f32) {
    if alpha <= 0.0 || x < 0 || y < 0 || x >= i64::from(img.width()) || y >= i64::from(img.height())
    {
        return;
    }
    let px = img.get_pixel_mut(x as u32, y as u32);
    let da = f32::from(px[3]) / 255.0;
    let out_a = alpha + da * (1.0 - alpha);
    if out_a <= 0.0 {
        return;
    }
    for (c, &s) in px.0.iter_mut().take(3).zip(color.iter()) {
        let d = f32::from(*c) / 255.0;
        let v = (s * alpha + d * da * (1.0 - alpha)) / out_a;
        *c = (v * 255.0 + 0.5).clamp(0.0, 255.0) as u8;
    }
    px[3] = (out_a * 255.0 + 0.5).clamp(0.0, 255.0) as u8;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asset_decodes() {
        let mark = asset().unwrap();
        assert!(mark.width() > 300 && mark.height() >= 100);
        // White on transparent: some opaque pixels, some transparent ones.
        assert!(mark.pixels().any(|p| p[3] == 255 && p[0] == 255));
        assert!(mark.pixels().any(|p| p[3] == 0));
    }

    #[test]
    fn only_the_bottom_right_region_changes() {
        let (w, h) = (1024, 768);
        let original = RgbaImage::from_pixel(w, h, image::Rgba([120, 140, 160, 255]));
        let mut img = original.clone();
        apply(&mut img);
        let mut changed = 0;
        for (x, y, px) in img.enumerate_pixels() {
            if px != original.get_pixel(x, y) {
                changed += 1;
                assert!(x >= w * 3 / 4 && y >= h * 3 / 4, "pixel {x},{y} changed");
            }
        }
        assert!(changed > 1000, "only {changed} pixels changed");
        // Something bright (the mark) and something darker (the shadow) were drawn.
        assert!(img.pixels().any(|p| p[0] > 220));
        assert!(img.pixels().any(|p| p[0] < 80));
    }

    #[test]
    fn readable_on_white_and_black() {
        for value in [0u8, 255] {
            let mut img = RgbaImage::from_pixel(512, 512, image::Rgba([value, value, value, 255]));
            apply(&mut img);
            let min = img.pixels().map(|p| p[0]).min().unwrap();
            let max = img.pixels().map(|p| p[0]).max().unwrap();
            assert!(max - min > 120, "contrast {min}..{max} on {value}");
        }
    }

    #[test]
    fn width_follows_the_picture() {
        assert_eq!(mark_width(1000, 1000), 180);
        assert_eq!(mark_width(300, 300), 96);
        assert!(mark_width(40, 40) <= 24);
        assert_eq!(mark_width(2048, 1152), 369);
    }

    #[test]
    fn tiny_and_transparent_pictures_are_handled() {
        for (w, h) in [(1, 1), (8, 8), (30, 10), (10, 300)] {
            let mut img = RgbaImage::new(w, h);
            apply(&mut img);
        }
        let mut img = RgbaImage::new(400, 400);
        apply(&mut img);
        // The mark makes transparent corner pixels visible.
        assert!(img.pixels().any(|p| p[3] > 200));
    }

    #[test]
    fn fallback_is_visible() {
        let bar = fallback_mark(1000, 1000);
        assert_eq!(bar.width(), 180);
        assert!(bar.pixels().all(|p| p[3] == 255));
    }
}
