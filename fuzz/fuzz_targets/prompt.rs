//! Prompt understanding and rule-based enhancement: any text, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = pictor::render::procedural::theme_summary(text);
        let _ = pictor::render::enhance::enhance(text, data.len() as u64);
        let _ = pictor::render::Ratio::Auto.resolve_auto(text);
    }
});
