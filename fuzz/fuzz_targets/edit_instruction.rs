//! The edit-instruction parser (English and Russian): any text gives operations or
//! `EditNotUnderstood`. Cheap operations are also applied to a small picture.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = pictor::render::edit::parse_instruction(text);
    }
});
