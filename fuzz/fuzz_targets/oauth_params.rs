//! The OAuth request parsers: authorize/token/revoke parameters (repeats refused), API-key and
//! import-file parsing, trusted-proxy lists and forwarding headers, bot-check answers.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = pictor::idp::authorize::parse_params(text);
        // PKCE: a verifier matches the challenge made from it exactly when its syntax is right
        // (RFC 7636: 43–128 unreserved characters), and an arbitrary challenge only if it is
        // that one.
        let (verifier, challenge) = text.split_once('\n').unwrap_or((text, ""));
        let made = pictor::idp::crypto::b64url(&pictor::idp::crypto::sha256(verifier));
        let syntax_ok = (43..=128).contains(&verifier.len())
            && verifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
        assert_eq!(
            pictor::idp::crypto::pkce_s256_matches(verifier, &made),
            syntax_ok
        );
        assert_eq!(
            pictor::idp::crypto::pkce_s256_matches(verifier, challenge),
            syntax_ok && challenge == made
        );
        let _ = pictor::auth::apikey::parse_and_hash(text);
        let _ = pictor::auth::import::parse(text);
        let _ = pictor::store::JobId::parse(text);
        let _ = pictor::store::UserId::parse(text);
        // Trusted-proxy lists and forwarding headers (RFC 7239 and X-Forwarded-For).
        let _ = pictor::net::TrustedProxies::parse(text);
        if let Ok(v) = poem::http::HeaderValue::from_str(text) {
            let trusted = pictor::net::TrustedProxies::parse("127.0.0.1, ::1").unwrap_or_default();
            for name in ["forwarded", "x-forwarded-for"] {
                let mut h = poem::http::HeaderMap::new();
                h.insert(name, v.clone());
                let _ = pictor::net::client_ip(Some([127, 0, 0, 1].into()), &h, &trusted);
            }
        }
        let _ = pictor::idp::pow::solves(text, text, 8);
    }
});
