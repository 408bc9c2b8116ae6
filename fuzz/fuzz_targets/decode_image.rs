//! Upload decoding exactly as the server does it: the production limits
//! (`DecodeLimits::default()`), the check made when an upload arrives (`inspect`) and the decode
//! a render makes (`decode`, EXIF orientation applied). Any bytes give a picture or
//! `invalid_image`, never a panic or an allocation past the limits; and the two agree: what the
//! upload check accepts, the render can decode, at the same size (sides swapped by a quarter-turn
//! orientation).
#![no_main]
use libfuzzer_sys::fuzz_target;
use pictor::render::RenderError;
use pictor::render::decode::{DecodeLimits, decode, inspect};

fuzz_target!(|data: &[u8]| {
    let limits = DecodeLimits::default();
    let checked = inspect(data, &limits);
    let decoded = decode(data, &limits);
    match (&checked, &decoded) {
        (Ok(info), Ok(img)) => {
            let (w, h) = img.dimensions();
            assert!(
                (w, h) == (info.width, info.height) || (w, h) == (info.height, info.width),
                "inspect says {}x{}, decode gives {w}x{h}",
                info.width,
                info.height
            );
            assert!(w <= limits.max_side && h <= limits.max_side);
            assert!(u64::from(w) * u64::from(h) <= limits.max_pixels);
            assert_eq!(img.as_raw().len() as u64, u64::from(w) * u64::from(h) * 4);
        }
        (Err(RenderError::InvalidImage(_)), Err(RenderError::InvalidImage(_))) => {}
        _ => panic!(
            "inspect and decode disagree: {checked:?} / {:?}",
            decoded.map(|i| i.dimensions())
        ),
    }
});
