//! TOTP two-factor authentication (RFC 6238: SHA-1, 6 digits, 30 s, ±1 step) with recovery codes.
//! The secret is stored encrypted (`SecretBox`); each code is accepted once.

use rand::RngExt;
use totp_rs::{Builder, Totp};

use super::crypto::{ct_eq, sha256_hex};
use crate::clock::Millis;
use crate::state::AppState;
use crate::store::{StoreError, UserRecord};

pub fn new_secret() -> Vec<u8> {
    rand::rng().random::<[u8; 20]>().to_vec()
}

pub fn totp(secret: Vec<u8>, account: &str) -> Option<Totp> {
    Builder::new()
        .with_secret(secret)
        .with_account_name(account)
        .with_issuer(Some("Pictor"))
        .build()
        .ok()
}

/// The `otpauth://` URL and its QR code as inline SVG.
pub fn enrolment(secret: &[u8], account: &str) -> Option<(String, String, String)> {
    let t = totp(secret.to_vec(), account)?;
    let url = t.to_url().ok()?;
    let code = qrcode::QrCode::new(url.as_bytes()).ok()?;
    let svg = code
        .render::<qrcode::render::svg::Color>()
        .min_dimensions(200, 200)
        .build();
    Some((url, svg, totp_rs::Secret::from(secret.to_vec()).to_base32()))
}

/// Ten recovery codes like `4f3a-91c2-77de` (plaintext, shown once) and their hashes.
pub fn recovery_codes() -> (Vec<String>, Vec<String>) {
    let mut rng = rand::rng();
    let codes: Vec<String> = (0..10)
        .map(|_| {
            let b: [u8; 6] = rng.random();
            let h = hex::encode(b);
            format!("{}-{}-{}", &h[0..4], &h[4..8], &h[8..12])
        })
        .collect();
    let hashes = codes.iter().map(|c| sha256_hex(c)).collect();
    (codes, hashes)
}

/// Checks a TOTP code at `now`, or a recovery code (which is then used up).
pub async fn verify_code(state: &AppState, user: &UserRecord, code: &str, now: Millis) -> bool {
    let code = code.trim().replace(' ', "").to_lowercase();
    let Some(sealed) = user.totp_secret_enc.clone() else {
        return false;
    };
    if code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()) {
        let Some(secret) = state.idp.secrets.open(&sealed) else {
            tracing::error!(
                "cannot decrypt a TOTP secret: is secret.key the one it was made with?"
            );
            return false;
        };
        let Some(t) = totp(secret, &user.email) else {
            return false;
        };
        let Some(step) = t.check(&code, now / 1000) else {
            return false;
        };
        // Each step once: refuse a replay of the same (or an older) code.
        let uid = user.id;
        let result = state
            .store
            .call(move |s| {
                let mut accepted = false;
                s.modify_user(uid, |u| {
                    if u.totp_last_step.is_none_or(|last| step > last) {
                        u.totp_last_step = Some(step);
                        accepted = true;
                    }
                    Ok(())
                })?;
                Ok::<_, StoreError>(accepted)
            })
            .await;
        return result.unwrap_or(false);
    }
    let hash = sha256_hex(&code);
    let uid = user.id;
    state
        .store
        .call(move |s| {
            let mut used = false;
            s.modify_user(uid, |u| {
                if let Some(i) = u
                    .recovery_codes
                    .iter()
                    .position(|h| ct_eq(h.as_bytes(), hash.as_bytes()))
                {
                    u.recovery_codes.remove(i);
                    used = true;
                }
                Ok(())
            })?;
            Ok::<_, StoreError>(used)
        })
        .await
        .unwrap_or(false)
}
