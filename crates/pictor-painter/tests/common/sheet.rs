//! Contact sheets of pictures with captions, for the gallery (`assets/gallery/`); written there
//! only with `PICTOR_WRITE_GALLERY` set, else to the temp folder.
#![allow(clippy::unwrap_used)]

use image::RgbaImage;

/// Lays `cells` (caption, picture) out `cols` to a row, each picture scaled to `w`×`h` with its
/// caption below it, and saves the sheet as `name`.
pub fn write(
    name: &str,
    cols: u32,
    (w, h, caption): (u32, u32, u32),
    cells: &[(String, RgbaImage)],
) {
    let rows = (cells.len() as u32).div_ceil(cols);
    let mut sheet = RgbaImage::from_pixel(
        w * cols,
        (h + caption) * rows,
        image::Rgba([250, 250, 248, 255]),
    );
    for (i, (label, img)) in cells.iter().enumerate() {
        let small = image::imageops::resize(img, w, h, image::imageops::FilterType::Triangle);
        let (x, y) = ((i as u32 % cols) * w, (i as u32 / cols) * (h + caption));
        image::imageops::overlay(&mut sheet, &small, i64::from(x), i64::from(y));
        pictor_painter::text::draw_in_box(
            &mut sheet,
            label,
            (
                x as f32 + 4.0,
                (y + h) as f32 + 3.0,
                w as f32 - 8.0,
                caption as f32 - 6.0,
            ),
            pictor_painter::text::Look::Ink,
        );
    }
    let path = if std::env::var("PICTOR_WRITE_GALLERY").is_ok() {
        std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("assets/gallery")
            .join(name)
    } else {
        std::env::temp_dir().join(name)
    };
    sheet.save(&path).unwrap();
    println!("wrote {}", path.display());
}
