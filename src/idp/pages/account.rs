//! `/account`: the cabinet of a signed-in user — profile (name, picture), password, TOTP
//! two-factor with recovery codes, the apps they have authorized, and the image API key with
//! balance, PRO flag and daily limit. Also the home page `/`, which sends the browser to the
//! playground or to sign-in.
//!
//! Every form posts the CSRF field and every POST checks it before anything else. Changes
//! redirect back to `GET /account?done=…` (POST-redirect-GET); the pages that show a secret once
//! (a new API key, the TOTP enrolment, recovery codes) are the POST response itself, which is
//! `Cache-Control: no-store` like every page.

use std::collections::HashMap;

use poem::http::StatusCode;
use poem::web::cookie::CookieJar;
use poem::web::{Data, Form, Multipart, Query};
use poem::{Request, Response, Route, get, handler, post};
use rand::RngExt;
use serde::Deserialize;

use super::{csrf_refused, server_error};
use crate::auth::{apikey, password};
use crate::clock::Millis;
use crate::idp::web::{client_ip, csrf_ok, csrf_token, page_with_status, redirect, signed_in};
use crate::idp::{scope_description, totp};
use crate::state::AppState;
use crate::store::{StoreError, UserRecord};

/// Largest avatar upload accepted ("5 MB" on the page: 5 MiB).
pub const MAX_AVATAR_BYTES: usize = 5 * 1024 * 1024;
/// How long a TOTP enrolment (QR code shown, not yet confirmed) stays valid.
const TOTP_ENROL_TTL_MS: Millis = 30 * 60 * 1000;

pub fn routes() -> Route {
    Route::new()
        .at("/", get(account_get))
        .at("/profile", post(profile_post))
        .at("/avatar", post(avatar_post))
        .at("/avatar/remove", post(avatar_remove_post))
        .at("/password", post(password_post))
        .at("/totp/start", post(totp_start_post))
        .at("/totp/confirm", post(totp_confirm_post))
        .at("/totp/disable", post(totp_disable_post))
        .at("/key", post(issue_key_post))
        .at("/webhook-secret", post(webhook_secret_post))
        .at("/apps/revoke", post(revoke_app_post))
        .at("/apps/limits", post(app_limits_post))
}

/// `GET /`: the playground when signed in, the sign-in page otherwise.
#[handler]
pub async fn home(state: Data<&AppState>, jar: &CookieJar) -> Response {
    if signed_in(&state, jar).is_some() {
        redirect("/playground")
    } else {
        redirect("/login")
    }
}

struct TotpSetup {
    qr_svg: String,
    secret_b32: String,
    sealed: String,
}

struct AppView {
    client: String,
    scopes: Vec<&'static str>,
    since: String,
    /// For apps allowed to make pictures: what they spent and the limits set.
    spending: Option<SpendingView>,
}

struct SpendingView {
    today: u64,
    total: u64,
    /// The limits as the form shows them (empty: none).
    cap_daily: String,
    cap_total: String,
}

#[derive(askama::Template)]
#[template(path = "account.html")]
struct AccountPage {
    csrf: String,
    is_admin: bool,
    current: &'static str,
    notice: Option<&'static str>,
    error: Option<(&'static str, String)>,
    user_id: String,
    name: String,
    email: String,
    avatar_src: String,
    has_avatar: bool,
    balance: i64,
    /// Sign-up credits held back, and whether an administrator must release them.
    pending_credits: u32,
    pending_by_approval: bool,
    pro: bool,
    daily_limit: u32,
    daily_used: u32,
    has_key: bool,
    new_key: Option<String>,
    /// The webhook signing secret (decrypted for its owner), if one was made.
    webhook_secret: Option<String>,
    /// Just made or rotated: shown open.
    webhook_fresh: bool,
    /// Date-time (UTC) until which the previous secret also signs.
    webhook_prev_until: Option<String>,
    totp_enabled: bool,
    recovery_left: usize,
    totp_setup: Option<TotpSetup>,
    recovery_codes: Option<Vec<String>>,
    apps: Vec<AppView>,
}

impl AccountPage {
    /// The error message to show in `section`, if the error belongs there.
    fn error_in(&self, section: &str) -> Option<&str> {
        self.error
            .as_ref()
            .filter(|(s, _)| *s == section)
            .map(|(_, m)| m.as_str())
    }
}

/// What a response adds to the plain cabinet.
#[derive(Default)]
struct Extras {
    notice: Option<&'static str>,
    /// (section, message)
    error: Option<(&'static str, String)>,
    new_key: Option<String>,
    webhook_fresh: bool,
    totp_setup: Option<TotpSetup>,
    recovery_codes: Option<Vec<String>>,
}

impl Extras {
    fn error(section: &'static str, message: impl Into<String>) -> Extras {
        Extras {
            error: Some((section, message.into())),
            ..Extras::default()
        }
    }
}

/// `YYYY-MM-DD` (UTC) of a timestamp.
pub(crate) fn date_of(ms: Millis) -> String {
    // Howard Hinnant's days-to-civil algorithm.
    let z = (ms / crate::clock::DAY_MS) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The apps the user has authorized: live grants, one entry per app (newest first), with every
/// scope granted, then apps with a remembered consent but no live grant.
fn apps_of(state: &AppState, user_id: u64, now: Millis) -> Vec<AppView> {
    let grants = match state.store.user_grants(user_id, now) {
        Ok(g) => g,
        Err(e) => {
            tracing::error!(error = %e, "reading a user's grants");
            Vec::new()
        }
    };
    let mut apps: Vec<(AppView, Millis)> = Vec::new();
    for fam in grants {
        let idx = match apps.iter().position(|(a, _)| a.client == fam.client) {
            Some(i) => i,
            None => {
                apps.push((
                    AppView {
                        client: fam.client.clone(),
                        scopes: Vec::new(),
                        since: String::new(),
                        spending: None,
                    },
                    fam.created_at,
                ));
                apps.len() - 1
            }
        };
        let (app, since) = &mut apps[idx];
        *since = (*since).min(fam.created_at);
        for scope in fam.scope.split(' ').filter(|s| !s.is_empty()) {
            let words = scope_description(scope);
            if !app.scopes.contains(&words) {
                app.scopes.push(words);
            }
        }
    }
    // Apps consented to whose code was never exchanged have no grant yet, but their consent is
    // remembered: list them too, so that it can be withdrawn.
    for client in state.store.clients().unwrap_or_default() {
        if apps.iter().any(|(a, _)| a.client == client.name) {
            continue;
        }
        if let Ok(Some(consent)) = state.store.consent(user_id, &client.name) {
            let mut scopes: Vec<&'static str> = Vec::new();
            for scope in &consent.scopes {
                let words = scope_description(scope);
                if !scopes.contains(&words) {
                    scopes.push(words);
                }
            }
            apps.push((
                AppView {
                    client: client.name,
                    scopes,
                    since: String::new(),
                    spending: None,
                },
                consent.granted_at,
            ));
        }
    }
    let spent = state.store.app_spend(user_id).unwrap_or_default();
    let day = crate::clock::day_of(now);
    apps.into_iter()
        .map(|(mut app, since)| {
            app.since = date_of(since);
            let consent = state.store.consent(user_id, &app.client).ok().flatten();
            if let Some(consent) =
                consent.filter(|c| c.scopes.iter().any(|s| s == "images:generate"))
            {
                let spend = spent
                    .iter()
                    .find(|(c, _)| *c == app.client)
                    .map(|(_, s)| *s)
                    .unwrap_or_default();
                let shown = |v: Option<u32>| v.map(|n| n.to_string()).unwrap_or_default();
                app.spending = Some(SpendingView {
                    today: spend.today_on(day),
                    total: spend.total,
                    cap_daily: shown(consent.caps.daily),
                    cap_total: shown(consent.caps.total),
                });
            }
            app
        })
        .collect()
}

fn render(
    state: &AppState,
    jar: &CookieJar,
    user: &UserRecord,
    extras: Extras,
    status: StatusCode,
) -> Response {
    let now = state.clock.now();
    let daily_limit = state
        .store
        .settings()
        .map(|s| s.daily_limit_for(user.pro, user.daily_limit))
        .unwrap_or(0);
    let daily_used = state.store.daily_used(user.id, now).unwrap_or(0);
    let version = user
        .avatar
        .as_deref()
        .map(|t| &t[..8.min(t.len())])
        .unwrap_or("0");
    page_with_status(
        &AccountPage {
            csrf: csrf_token(state, jar),
            is_admin: user.admin,
            current: "account",
            notice: extras.notice,
            error: extras.error,
            user_id: user.user_id().to_string(),
            name: user.name.clone(),
            email: user.email.clone(),
            avatar_src: format!("/avatars/{}.png?v={version}", user.user_id()),
            has_avatar: user.avatar.is_some(),
            balance: user.balance,
            pending_credits: user.pending_credits,
            pending_by_approval: state
                .store
                .settings()
                .map(|s| s.signup_approval == 1)
                .unwrap_or(false),
            pro: user.pro,
            daily_limit,
            daily_used,
            has_key: user.api_key_hash.is_some(),
            new_key: extras.new_key,
            webhook_secret: user
                .webhook_secret_enc
                .as_deref()
                .and_then(|s| crate::jobs::webhooks::open_secret(&state.idp.secrets, s)),
            webhook_fresh: extras.webhook_fresh,
            webhook_prev_until: user
                .webhook_secret_prev_until
                .filter(|t| *t > now)
                .map(|t| {
                    let minutes = (t % crate::clock::DAY_MS) / 60_000;
                    format!("{} {:02}:{:02}", date_of(t), minutes / 60, minutes % 60)
                }),
            totp_enabled: user.totp_secret_enc.is_some(),
            recovery_left: user.recovery_codes.len(),
            totp_setup: extras.totp_setup,
            recovery_codes: extras.recovery_codes,
            apps: apps_of(state, user.id, now),
        },
        status,
    )
}

fn login_redirect() -> Response {
    redirect("/login?return_to=/account")
}

/// Messages for `GET /account?done=…` (fixed texts: nothing from the query is echoed).
fn notice_for(done: Option<&str>) -> Option<&'static str> {
    Some(match done? {
        "name" => "Your name was saved.",
        "avatar" => "Your profile picture was updated.",
        "avatar-removed" => "Your profile picture was removed.",
        "password" => {
            "Your password was changed. Other devices were signed out, and apps you signed in to must ask you to sign in again."
        }
        "totp-off" => "Two-factor authentication is off.",
        "revoked" => "The app's access was revoked.",
        "limits" => "The app's spending limits were saved.",
        _ => return None,
    })
}

#[handler]
pub async fn account_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    let extras = Extras {
        notice: notice_for(q.get("done").map(String::as_str)),
        ..Extras::default()
    };
    render(&state, jar, &s.user, extras, StatusCode::OK)
}

#[derive(Deserialize)]
pub struct CsrfOnly {
    #[serde(default)]
    csrf: String,
}

#[derive(Deserialize)]
pub struct ProfileForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
}

#[handler]
pub async fn profile_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<ProfileForm>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    let name = f.name.trim().to_string();
    if name.is_empty() || name.chars().count() > 100 || name.chars().any(char::is_control) {
        return render(
            &state,
            jar,
            &s.user,
            Extras::error("profile", "The name must be 1 to 100 characters."),
            StatusCode::BAD_REQUEST,
        );
    }
    let uid = s.user.id;
    match state
        .store
        .call(move |st| {
            st.modify_user(uid, |u| {
                u.name = name;
                Ok(())
            })
        })
        .await
    {
        Ok(_) => redirect("/account?done=name"),
        Err(e) => server_error(&state, "saving a name", e),
    }
}

/// Reads at most `limit` bytes of a multipart field; `None` when it is longer.
async fn read_field(
    field: poem::web::Field,
    limit: usize,
) -> Result<Option<Vec<u8>>, std::io::Error> {
    use tokio::io::AsyncReadExt;
    let reader = field.into_async_read();
    tokio::pin!(reader);
    let mut buf = Vec::new();
    reader.take(limit as u64 + 1).read_to_end(&mut buf).await?;
    Ok((buf.len() <= limit).then_some(buf))
}

enum AvatarUpload {
    Parsed { csrf: String, file: Option<Vec<u8>> },
    TooLarge { csrf: String },
    Broken,
}

async fn read_avatar_upload(mut multipart: Multipart) -> AvatarUpload {
    let mut csrf = String::new();
    let mut file = None;
    // A browser sends two fields; a few more are tolerated and skipped.
    for _ in 0..16 {
        let field = match multipart.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => return AvatarUpload::Parsed { csrf, file },
            Err(_) => return AvatarUpload::Broken,
        };
        match field.name().unwrap_or_default() {
            "csrf" => match read_field(field, 256).await {
                Ok(Some(b)) => csrf = String::from_utf8(b).unwrap_or_default(),
                _ => return AvatarUpload::Broken,
            },
            "avatar" | "image" | "file" => match read_field(field, MAX_AVATAR_BYTES).await {
                Ok(Some(b)) => file = Some(b),
                Ok(None) => return AvatarUpload::TooLarge { csrf },
                Err(_) => return AvatarUpload::Broken,
            },
            _ => drop(field),
        }
    }
    AvatarUpload::Parsed { csrf, file }
}

#[handler]
pub async fn avatar_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    multipart: poem::Result<Multipart>,
) -> Response {
    // Signed-out browsers and foreign origins are turned away before the upload is read.
    if signed_in(&state, jar).is_none() {
        return login_redirect();
    }
    if !crate::idp::web::origin_ok(&state, req) {
        return csrf_refused(&state);
    }
    let upload = match multipart {
        Ok(m) => read_avatar_upload(m).await,
        Err(_) => AvatarUpload::Broken,
    };
    let (csrf, file) = match upload {
        AvatarUpload::Parsed { csrf, file } => (csrf, Ok(file)),
        AvatarUpload::TooLarge { csrf } => (csrf, Err(StatusCode::PAYLOAD_TOO_LARGE)),
        AvatarUpload::Broken => (String::new(), Err(StatusCode::BAD_REQUEST)),
    };
    if !csrf_ok(&state, req, jar, &csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    let refuse =
        |msg: &str, status| render(&state, jar, &s.user, Extras::error("avatar", msg), status);
    let bytes = match file {
        Ok(Some(b)) if !b.is_empty() => b,
        Ok(_) => return refuse("Choose a picture to upload.", StatusCode::BAD_REQUEST),
        Err(StatusCode::PAYLOAD_TOO_LARGE) => {
            return refuse(
                "The picture is larger than 5 MB. Choose a smaller one.",
                StatusCode::PAYLOAD_TOO_LARGE,
            );
        }
        Err(status) => return refuse("The upload could not be read. Try again.", status),
    };
    let png = match state
        .decode_pool
        .spawn(move || crate::render::avatar::avatar_png(&bytes))
        .await
    {
        Ok(Ok(png)) => png,
        Ok(Err(crate::render::RenderError::InvalidImage(m))) => {
            return refuse(
                &format!("That picture cannot be used: {m}."),
                StatusCode::BAD_REQUEST,
            );
        }
        Ok(Err(e)) => return server_error(&state, "resizing an avatar", e),
        Err(e) => return server_error(&state, "resizing an avatar", e),
    };
    let dir = state.config.data_dir.join("avatars");
    let token = hex::encode(rand::rng().random::<[u8; 16]>());
    let path = dir.join(format!("{token}.png"));
    let written = async {
        tokio::fs::create_dir_all(&dir).await?;
        tokio::fs::write(&path, &png).await
    }
    .await;
    if let Err(e) = written {
        return server_error(&state, "writing an avatar", e);
    }
    let uid = s.user.id;
    let new_token = token.clone();
    let old = state
        .store
        .call(move |st| {
            let mut old = None;
            st.modify_user(uid, |u| {
                old = u.avatar.replace(new_token);
                Ok(())
            })?;
            Ok::<_, StoreError>(old)
        })
        .await;
    match old {
        Ok(old) => {
            remove_avatar_file(&state, old).await;
            redirect("/account?done=avatar")
        }
        Err(e) => {
            let _ = tokio::fs::remove_file(&path).await;
            server_error(&state, "saving an avatar", e)
        }
    }
}

async fn remove_avatar_file(state: &AppState, token: Option<String>) {
    if let Some(t) = token.filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit())) {
        let path = state
            .config
            .data_dir
            .join("avatars")
            .join(format!("{t}.png"));
        if let Err(e) = tokio::fs::remove_file(&path).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(error = %e, "removing an old avatar");
        }
    }
}

#[handler]
pub async fn avatar_remove_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<CsrfOnly>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    let uid = s.user.id;
    let old = state
        .store
        .call(move |st| {
            let mut old = None;
            st.modify_user(uid, |u| {
                old = u.avatar.take();
                Ok(())
            })?;
            Ok::<_, StoreError>(old)
        })
        .await;
    match old {
        Ok(old) => {
            remove_avatar_file(&state, old).await;
            redirect("/account?done=avatar-removed")
        }
        Err(e) => server_error(&state, "removing an avatar", e),
    }
}

#[derive(Deserialize)]
pub struct PasswordForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    current_password: String,
    #[serde(default)]
    new_password: String,
    #[serde(default)]
    new_password2: String,
}

/// Counts a password/code check against the sign-in throttle; `Some(response)` when refused.
fn throttled(
    state: &AppState,
    req: &Request,
    jar: &CookieJar,
    user: &UserRecord,
    section: &'static str,
) -> Option<Response> {
    let now = state.clock.now();
    match state
        .idp
        .throttle
        .attempt(client_ip(state, req), &user.email, now)
    {
        crate::idp::web::Verdict::Allowed { .. } => None,
        crate::idp::web::Verdict::Limited(secs) => Some(render(
            state,
            jar,
            user,
            Extras::error(
                section,
                format!("Too many attempts. Try again in {secs} seconds."),
            ),
            StatusCode::TOO_MANY_REQUESTS,
        )),
    }
}

#[handler]
pub async fn password_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<PasswordForm>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    let refuse =
        |msg: &str, status| render(&state, jar, &s.user, Extras::error("password", msg), status);
    if let Some(r) = throttled(&state, req, jar, &s.user, "password") {
        return r;
    }
    let Some(current_hash) = s.user.password_hash.clone() else {
        return refuse(
            "This account has no password to change.",
            StatusCode::BAD_REQUEST,
        );
    };
    if !password::verify_async(f.current_password.clone(), current_hash).await {
        return refuse(
            "The current password is not right.",
            StatusCode::UNAUTHORIZED,
        );
    }
    state
        .idp
        .throttle
        .succeed(client_ip(&state, req), &s.user.email);
    if f.new_password != f.new_password2 {
        return refuse(
            "The two new passwords are different.",
            StatusCode::BAD_REQUEST,
        );
    }
    if let Err(e) = password::check_policy(&f.new_password) {
        return refuse(
            &format!("The new password is not accepted: {e}."),
            StatusCode::BAD_REQUEST,
        );
    }
    let hash = match password::hash_async(f.new_password.clone()).await {
        Ok(h) => h,
        Err(e) => return server_error(&state, "hashing a password", e),
    };
    let uid = s.user.id;
    let keep = s.session_hash;
    let now = state.clock.now();
    let result = state
        .store
        .call(move |st| {
            st.modify_user(uid, |u| {
                u.password_hash = Some(hash);
                u.password_needs_rehash = false;
                Ok(())
            })?;
            // Apps signed in with the old password lose their refresh tokens too.
            let grants = st.revoke_user_grants(uid, "password changed", now)?;
            Ok::<_, crate::store::StoreError>((st.delete_user_sessions(uid, Some(&keep))?, grants))
        })
        .await;
    match result {
        Ok((ended, grants)) => {
            tracing::info!(user = %s.user.user_id(), ended, grants, "password changed");
            redirect("/account?done=password")
        }
        Err(e) => server_error(&state, "changing a password", e),
    }
}

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
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<CsrfOnly>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    if s.user.totp_secret_enc.is_some() {
        return render(
            &state,
            jar,
            &s.user,
            Extras::error("totp", "Two-factor authentication is already on."),
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
    csrf: String,
    #[serde(default)]
    pending: String,
    #[serde(default)]
    code: String,
}

#[handler]
pub async fn totp_confirm_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<TotpConfirmForm>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    let now = state.clock.now();
    if s.user.totp_secret_enc.is_some() {
        return render(
            &state,
            jar,
            &s.user,
            Extras::error("totp", "Two-factor authentication is already on."),
            StatusCode::CONFLICT,
        );
    }
    let Some(secret) = open_pending(&state, s.user.id, &f.pending, now) else {
        return render(
            &state,
            jar,
            &s.user,
            Extras::error(
                "totp",
                "The set-up expired. Start again and scan the new code.",
            ),
            StatusCode::BAD_REQUEST,
        );
    };
    let code: String = f.code.chars().filter(|c| !c.is_whitespace()).collect();
    let step = totp::totp(secret.clone(), &s.user.email).and_then(|t| t.check(&code, now / 1000));
    let Some(step) = step else {
        let extras = Extras {
            error: Some((
                "totp",
                "That code is not right. Enter the code the app shows now.".to_string(),
            )),
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
    csrf: String,
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
    Form(f): Form<TotpDisableForm>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
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
            Extras::error(
                "totp",
                "Enter your current password or a current code to turn two-factor off.",
            ),
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

#[handler]
pub async fn issue_key_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<CsrfOnly>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    let key = apikey::mint();
    let hash = key.hash;
    let uid = s.user.id;
    match state.store.call(move |st| st.set_api_key(uid, hash)).await {
        Ok(user) => {
            tracing::info!(user = %user.user_id(), "API key issued from the account page");
            let extras = Extras {
                new_key: Some(key.plaintext),
                ..Extras::default()
            };
            render(&state, jar, &user, extras, StatusCode::OK)
        }
        Err(e) => server_error(&state, "issuing an API key", e),
    }
}

/// Makes the webhook signing secret, or rotates it (the old one signs beside it for a day).
#[handler]
pub async fn webhook_secret_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<CsrfOnly>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    let (uid, now, secrets) = (s.user.id, state.clock.now(), state.idp.secrets.clone());
    let made = state
        .store
        .call(move |st| {
            crate::jobs::webhooks::rotate(st, &secrets, uid, now)?;
            st.user(uid)
        })
        .await;
    match made {
        Ok(Some(user)) => {
            tracing::info!(user = %user.user_id(), "webhook secret rotated from the account page");
            let extras = Extras {
                webhook_fresh: true,
                ..Extras::default()
            };
            render(&state, jar, &user, extras, StatusCode::OK)
        }
        Ok(None) => login_redirect(),
        Err(e) => server_error(&state, "rotating the webhook secret", e),
    }
}

#[derive(Deserialize)]
pub struct RevokeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    client: String,
}

#[handler]
pub async fn revoke_app_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Form(f): Form<RevokeForm>,
) -> Response {
    if !csrf_ok(&state, req, jar, &f.csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    let uid = s.user.id;
    let now = state.clock.now();
    let client = f.client.clone();
    match state
        .store
        .call(move |st| st.revoke_client_for_user(uid, &client, now))
        .await
    {
        Ok(n) => {
            tracing::info!(user = %s.user.user_id(), client = %f.client, grants = n, "app revoked by the user");
            redirect("/account?done=revoked")
        }
        Err(e) => server_error(&state, "revoking an app", e),
    }
}

/// `POST /account/apps/limits`: the person changes an app's spending limits (empty: none).
#[handler]
pub async fn app_limits_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    body: String,
) -> Response {
    let params = match crate::idp::authorize::parse_params(&body) {
        Ok(p) => p,
        Err(_) => return csrf_refused(&state),
    };
    let csrf = params.get("csrf").map(String::as_str).unwrap_or_default();
    if !csrf_ok(&state, req, jar, csrf) {
        return csrf_refused(&state);
    }
    let Some(s) = signed_in(&state, jar) else {
        return login_redirect();
    };
    let caps = match crate::idp::authorize::spend_caps(&params) {
        Ok(c) => c,
        Err(message) => {
            return render(
                &state,
                jar,
                &s.user,
                Extras::error("apps", message),
                StatusCode::BAD_REQUEST,
            );
        }
    };
    let client = params.get("client").cloned().unwrap_or_default();
    let uid = s.user.id;
    match state
        .store
        .call(move |st| st.set_app_caps(uid, &client, caps))
        .await
    {
        Ok(()) => redirect("/account?done=limits"),
        Err(StoreError::NotFound(_)) => render(
            &state,
            jar,
            &s.user,
            Extras::error("apps", "That app does not have access to your account."),
            StatusCode::NOT_FOUND,
        ),
        Err(e) => server_error(&state, "saving an app's limits", e),
    }
}

#[cfg(test)]
mod tests {
    use super::date_of;

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(951_782_400_000), "2000-02-29");
        assert_eq!(date_of(1_767_225_599_000), "2025-12-31");
    }
}
