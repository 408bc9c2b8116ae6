//! TOTP two-factor authentication: enrolment with a QR code, confirmation with a code (recovery
//! codes shown once), and turning it off with the password or a code.

use poem::http::StatusCode;
use poem::web::Data;
use poem::web::cookie::CookieJar;
use poem::{Request, Response, handler};
use serde::Deserialize;

use crate::auth::password;
use crate::clock::Millis;
use crate::idp::totp;
use crate::state::AppState;
use crate::store::StoreError;
use crate::web::server_error;
use crate::web::{client_ip, redirect};

use super::{Empty, Extras, TotpSetup, render, throttled};
use crate::web::{CheckedForm, Member};

/// How long a TOTP enrolment (QR code shown, not yet confirmed) stays valid.
const TOTP_ENROL_TTL_MS: Millis = 30 * 60 * 1000;

/// Seals a pending TOTP secret for the hidden form field: bound to the user and to the time it
/// was made, so it cannot be replayed for another account or much later.
fn seal_pending(state: &AppState, user_id: u64, secret: &[u8], now: Millis) -> Option<String> {
    let mut plain = Vec::with_capacity(16 + secret.len());
    plain.extend_from_slice(&user_id.to_le_bytes());
    plain.extend_from_slice(&now.to_le_bytes());
    plain.extend_from_slice(secret);
    state.idp.secrets.seal(&plain)
}

fn open_pending(state: &AppState, user_id: u64, sealed: &str, now: Millis) -> Option<Vec<u8>> {
    let plain = state.idp.secrets.open(sealed)?;
    if plain.len() < 16 + 10 {
        return None;
    }
    let (uid, rest) = plain.split_at(8);
    let (made, secret) = rest.split_at(8);
    let uid = u64::from_le_bytes(uid.try_into().ok()?);
    let made = u64::from_le_bytes(made.try_into().ok()?);
    (uid == user_id && now.saturating_sub(made) < TOTP_ENROL_TTL_MS).then(|| secret.to_vec())
}

fn totp_setup(secret: &[u8], sealed: String, account: &str) -> Option<TotpSetup> {
    let (_url, svg, secret_b32) = totp::enrolment(secret, account)?;
    // Inline in HTML: the XML prolog is not wanted there.
    let qr_svg = svg.find("<svg").map(|i| svg[i..].to_string())?;
    Some(TotpSetup {
        qr_svg,
        secret_b32,
        sealed,
    })
}

#[handler]
pub async fn totp_start_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(Empty {}): CheckedForm<Empty>,
    Member(s): Member,
) -> Response {
    if s.user.totp_secret_enc.is_some() {
        return render(
            &state,
            jar,
            &s.user,
            Extras::error("totp", crate::web::i18n::tr("tfa.already_on")),
            StatusCode::CONFLICT,
        );
    }
    let secret = totp::new_secret();
    let setup = seal_pending(&state, s.user.id, &secret, state.clock.now())
        .and_then(|sealed| totp_setup(&secret, sealed, &s.user.email));
    let Some(setup) = setup else {
        return server_error(&state, "starting TOTP enrolment", "cannot seal or encode");
    };
    let extras = Extras {
        totp_setup: Some(setup),
        ..Extras::default()
    };
    render(&state, jar, &s.user, extras, StatusCode::OK)
}

#[derive(Deserialize)]
pub struct TotpConfirmForm {
    #[serde(default)]
    pending: String,
    #[serde(default)]
    code: String,
}

#[handler]
pub async fn totp_confirm_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<TotpConfirmForm>,
    Member(s): Member,
) -> Response {
    let now = state.clock.now();
    if s.user.totp_secret_enc.is_some() {
        return render(
            &state,
            jar,
            &s.user,
            Extras::error("totp", crate::web::i18n::tr("tfa.already_on")),
            StatusCode::CONFLICT,
        );
    }
    let Some(secret) = open_pending(&state, s.user.id, &f.pending, now) else {
        return render(
            &state,
            jar,
            &s.user,
            Extras::error("totp", crate::web::i18n::tr("tfa.expired")),
            StatusCode::BAD_REQUEST,
        );
    };
    let code: String = f.code.chars().filter(|c| !c.is_whitespace()).collect();
    let step = totp::totp(secret.clone(), &s.user.email).and_then(|t| t.check(&code, now / 1000));
    let Some(step) = step else {
        let extras = Extras {
            error: Some(("totp", crate::web::i18n::tr("tfa.wrong_code").to_string())),
            totp_setup: totp_setup(&secret, f.pending.clone(), &s.user.email),
            ..Extras::default()
        };
        return render(&state, jar, &s.user, extras, StatusCode::BAD_REQUEST);
    };
    // Stored under its own (fresh) nonce, without the enrolment binding.
    let Some(sealed) = state.idp.secrets.seal(&secret) else {
        return server_error(&state, "sealing a TOTP secret", "seal failed");
    };
    let (codes, hashes) = totp::recovery_codes();
    let uid = s.user.id;
    let keep = s.session_hash;
    let result = state
        .store
        .call(move |st| {
            let user = st.modify_user(uid, |u| {
                if u.totp_secret_enc.is_some() {
                    return Err(StoreError::Conflict(
                        "two-factor authentication is already on".into(),
                    ));
                }
                u.totp_secret_enc = Some(sealed);
                // The code just used counts as used (RFC 6238 §5.2).
                u.totp_last_step = Some(step);
                u.recovery_codes = hashes;
                Ok(())
            })?;
            // Sessions that never proved the new second factor end.
            st.delete_user_sessions(uid, Some(&keep))?;
            Ok::<_, StoreError>(user)
        })
        .await;
    match result {
        Ok(user) => {
            tracing::info!(user = %user.user_id(), "two-factor authentication enabled");
            let extras = Extras {
                recovery_codes: Some(codes),
                ..Extras::default()
            };
            render(&state, jar, &user, extras, StatusCode::OK)
        }
        Err(StoreError::Conflict(m)) => render(
            &state,
            jar,
            &s.user,
            Extras::error("totp", m),
            StatusCode::CONFLICT,
        ),
        Err(e) => server_error(&state, "enabling TOTP", e),
    }
}

#[derive(Deserialize)]
pub struct TotpDisableForm {
    #[serde(default)]
    password: String,
    #[serde(default)]
    code: String,
}

#[handler]
pub async fn totp_disable_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<TotpDisableForm>,
    Member(s): Member,
) -> Response {
    if s.user.totp_secret_enc.is_none() {
        return redirect("/account?done=totp-off");
    }
    if let Some(r) = throttled(&state, req, jar, &s.user, "totp") {
        return r;
    }
    let now = state.clock.now();
    let proven = if !f.password.is_empty() {
        match s.user.password_hash.clone() {
            Some(h) => password::verify_async(f.password.clone(), h).await,
            None => false,
        }
    } else if !f.code.trim().is_empty() {
        totp::verify_code(&state, &s.user, &f.code, now).await
    } else {
        false
    };
    if !proven {
        return render(
            &state,
            jar,
            &s.user,
            Extras::error("totp", crate::web::i18n::tr("tfa.off_needs")),
            StatusCode::UNAUTHORIZED,
        );
    }
    state
        .idp
        .throttle
        .succeed(client_ip(&state, req), &s.user.email);
    let uid = s.user.id;
    let keep = s.session_hash;
    let result = state
        .store
        .call(move |st| {
            st.modify_user(uid, |u| {
                u.totp_secret_enc = None;
                u.totp_last_step = None;
                u.recovery_codes.clear();
                Ok(())
            })?;
            st.delete_user_sessions(uid, Some(&keep))
        })
        .await;
    match result {
        Ok(_) => {
            tracing::info!(user = %s.user.user_id(), "two-factor authentication disabled");
            redirect("/account?done=totp-off")
        }
        Err(e) => server_error(&state, "disabling TOTP", e),
    }
}
