//! The OAuth request parsers: authorize/token/revoke parameters (repeats refused), API-key and
//! import-file parsing.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = pictor::idp::authorize::parse_params(text);
        let _ = pictor::idp::crypto::pkce_s256_matches(text, text);
        let _ = pictor::auth::apikey::parse_and_hash(text);
        let _ = pictor::auth::import::parse(text);
        let _ = pictor::store::JobId::parse(text);
        let _ = pictor::store::UserId::parse(text);
    }
});
