//! `/account`: the cabinet of a signed-in user — profile (name, picture), password, TOTP
//! two-factor with recovery codes, the apps they have authorized, and the image API key with
//! balance, PRO flag and daily limit. Also the home page `/`, which sends the browser to the
//! playground or to sign-in.
//!
//! Every form posts the CSRF field and every POST checks it before anything else. Changes
//! redirect back to `GET /account?done=…` (POST-redirect-GET); the pages that show a secret once
//! (a new API key, the TOTP enrolment, recovery codes) are the POST response itself, which is
//! `Cache-Control: no-store` like every page.

mod apps;
mod close;
mod keys;
mod password;
mod profile;
mod two_factor;

use std::collections::HashMap;

use poem::http::StatusCode;
use poem::web::cookie::CookieJar;
use poem::web::{Data, Query};
use poem::{Request, Response, Route, get, handler, post};

use crate::clock::Millis;
use crate::state::AppState;
use crate::store::UserRecord;
use crate::web::{client_ip, csrf_token, page_with_status, redirect, signed_in};

use crate::web::Member;
use apps::apps_of;
pub use apps::{app_limits_post, revoke_app_post};
pub use keys::{issue_key_post, named_key_post, revoke_key_post, webhook_secret_post};
pub use password::password_post;
pub use profile::{avatar_post, avatar_remove_post, profile_post};
pub use two_factor::{totp_confirm_post, totp_disable_post, totp_start_post};

/// Largest avatar upload accepted ("5 MB" on the page: 5 MiB).
pub const MAX_AVATAR_BYTES: usize = 5 * 1024 * 1024;

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
        .at("/keys", post(named_key_post))
        .at("/keys/revoke", post(revoke_key_post))
        .at("/webhook-secret", post(webhook_secret_post))
        .at("/apps/revoke", post(revoke_app_post))
        .at("/apps/limits", post(app_limits_post))
        .at("/delete", post(close::delete_post))
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
    /// The default key's fingerprint and dates, when there is one.
    default_key: Option<KeyView>,
    /// Named keys, oldest first.
    keys: Vec<KeyView>,
    new_key: Option<NewKey>,
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

struct SpendingView {
    today: u64,
    total: u64,
    /// The limits as the form shows them (empty: none).
    cap_daily: String,
    cap_total: String,
}

struct AppView {
    client: String,
    scopes: Vec<&'static str>,
    since: String,
    /// For apps allowed to make pictures: what they spent and the limits set.
    spending: Option<SpendingView>,
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

/// A key just made, shown once.
pub(super) struct NewKey {
    /// `None` for the default key.
    pub label: Option<String>,
    pub plaintext: String,
}

/// An API key as the page lists it.
struct KeyView {
    id: String,
    label: String,
    fingerprint: String,
    created: String,
    last_used: String,
}

impl KeyView {
    fn of(id: &str, label: &str, meta: Option<&crate::store::KeyMeta>) -> KeyView {
        KeyView {
            id: id.to_string(),
            label: label.to_string(),
            fingerprint: meta
                .map(|m| m.fingerprint())
                .unwrap_or_else(|| "vx_…".into()),
            created: meta
                .map(|m| date_of(m.created_at))
                .unwrap_or_else(|| crate::web::i18n::tr("keys.unknown").into()),
            last_used: meta
                .and_then(|m| m.last_used)
                .map(date_of)
                .unwrap_or_else(|| crate::web::i18n::tr("keys.never").into()),
        }
    }
}

/// What a response adds to the plain cabinet.
#[derive(Default)]
struct Extras {
    notice: Option<&'static str>,
    /// (section, message)
    error: Option<(&'static str, String)>,
    new_key: Option<NewKey>,
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
            default_key: user.api_key_hash.as_ref().map(|_| {
                KeyView::of(
                    "default",
                    crate::web::i18n::tr("keys.default_label"),
                    user.api_key_meta.as_ref(),
                )
            }),
            keys: user
                .api_keys
                .iter()
                .map(|k| KeyView::of(&k.id, &k.label, Some(&k.meta)))
                .collect(),
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

/// Messages for `GET /account?done=…` (fixed texts: nothing from the query is echoed).
fn notice_for(done: Option<&str>) -> Option<&'static str> {
    Some(match done? {
        "name" => crate::web::i18n::tr("notice.name"),
        "avatar" => crate::web::i18n::tr("notice.avatar"),
        "avatar-removed" => crate::web::i18n::tr("notice.avatar_removed"),
        "password" => crate::web::i18n::tr("notice.password"),
        "totp-off" => crate::web::i18n::tr("notice.totp_off"),
        "key-revoked" => crate::web::i18n::tr("notice.key_revoked"),
        "revoked" => crate::web::i18n::tr("notice.app_revoked"),
        "limits" => crate::web::i18n::tr("notice.limits"),
        _ => return None,
    })
}

#[handler]
pub async fn account_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Query(q): Query<HashMap<String, String>>,
    Member(s): Member,
) -> Response {
    let extras = Extras {
        notice: notice_for(q.get("done").map(String::as_str)),
        ..Extras::default()
    };
    render(&state, jar, &s.user, extras, StatusCode::OK)
}

pub use crate::web::extract::Empty;

/// Counts a password/code check against the sign-in throttle; `Some(response)` when refused.
pub(super) fn throttled(
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
        crate::web::Verdict::Allowed { .. } => None,
        crate::web::Verdict::Limited(secs) => Some(render(
            state,
            jar,
            user,
            Extras::error(section, crate::web::i18n::tr1("account.too_many", secs)),
            StatusCode::TOO_MANY_REQUESTS,
        )),
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
