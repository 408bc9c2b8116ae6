//! Upload decoding with the limits: any bytes give a picture or `invalid_image`, never a panic or
//! an unbounded allocation.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pictor::render::decode::{DecodeLimits, inspect};

fuzz_target!(|data: &[u8]| {
    let limits = DecodeLimits {
        max_pixels: 4_000_000,
        max_side: 4096,
        max_alloc: 64 * 1024 * 1024,
    };
    let _ = inspect(data, &limits);
});
