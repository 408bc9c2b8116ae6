//! The edit-instruction parser (English and Russian): any text gives operations or
//! `EditNotUnderstood`, and the operations are applied, one by one, to a small picture: each
//! keeps the picture within the output bounds, colour-only operations keep its size, a
//! quarter-turn swaps its sides, and black-and-white leaves no colour. (Once a resize has made
//! the picture larger than a megapixel, the remaining operations are only parsed, to keep each
//! run short.)
#![no_main]
use libfuzzer_sys::fuzz_target;
use pictor::render::edit::{
    EditOp, MAX_OPS, MAX_PIXELS, MAX_SIDE, apply_seeded, parse_instruction,
};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(ops) = parse_instruction(text) else {
        return;
    };
    assert!(!ops.is_empty() && ops.len() <= MAX_OPS, "{} ops", ops.len());
    let mut img = image::RgbaImage::from_fn(40, 24, |x, y| {
        image::Rgba([(x * 6) as u8, (y * 10) as u8, ((x + y) * 3) as u8, 255])
    });
    for op in &ops {
        if u64::from(img.width()) * u64::from(img.height()) > 1_000_000 {
            break;
        }
        let before = img.dimensions();
        img = apply_seeded(img, std::slice::from_ref(op), data.len() as u32);
        let (w, h) = img.dimensions();
        assert!(
            w >= 1 && h >= 1 && w <= MAX_SIDE && h <= MAX_SIDE,
            "{op:?}: {w}x{h}"
        );
        assert!(u64::from(w) * u64::from(h) <= MAX_PIXELS, "{op:?}: {w}x{h}");
        match op {
            EditOp::Rotate(90 | 270) => assert_eq!((h, w), before, "{op:?}"),
            EditOp::Crop(..) | EditOp::Resize(_) | EditOp::Border(..) | EditOp::Restyle(_) => {}
            _ => assert_eq!((w, h), before, "{op:?} changed the size"),
        }
        if *op == EditOp::Grayscale {
            assert!(
                img.pixels().all(|p| p[0] == p[1] && p[1] == p[2]),
                "colour left after {op:?}"
            );
        }
    }
});
