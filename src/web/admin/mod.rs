//! `/admin`: the operator's pages, for users with the admin flag. Register an OAuth client (its
//! `app_secret` is shown once, on the response page), list and remove clients, and manage users:
//! grant or remove credits, PRO on/off, ban/unban (a ban also ends the user's sessions).
//!
//! Not signed in → sign-in page; signed in without the admin flag → 403. Every POST checks the
//! CSRF field first. Changes redirect back to `GET /admin?done=…`; input errors are shown on the
//! page with a 4xx status.

mod console;
mod models;

use std::collections::HashMap;

use poem::http::StatusCode;
use poem::web::cookie::CookieJar;
use poem::web::{Data, Path, Query};
use poem::{Response, Route, get, handler, post};
use serde::Deserialize;

use super::account::date_of;
use super::server_error;
use crate::ops::{self, OpError};
use crate::state::AppState;
use crate::store::{StoreError, UserId, UserPatch, UserRecord};
use crate::web::extract::Empty;
use crate::web::{Admin, CheckedForm, SignedIn, csrf_token, page_with_status, redirect};

/// At most this many users are listed at once (narrow the list with the search box).
const MAX_LISTED_USERS: usize = 200;
/// At most this many redirect URIs per client.
const MAX_REDIRECT_URIS: usize = 20;

pub fn routes() -> Route {
    models::routes(Route::new())
        .at("/", get(admin_get))
        .at("/clients", post(add_client_post))
        .at("/clients/remove", post(remove_client_post))
        .at("/users/:id/credits", post(credits_post))
        .at("/users/:id/pro", post(pro_post))
        .at("/users/:id/admin", post(admin_post))
        .at("/users/:id/daily-limit", post(daily_limit_post))
        .at("/users/:id/key", post(key_post))
        .at("/users/:id/ban", post(ban_post))
        .at("/users/:id/reset-link", post(reset_link_post))
        .at("/users/:id/delete", post(delete_user_post))
        .at("/users", post(console::create_user_post))
        .at("/users/:id", get(console::user_get))
        .at("/users/:id/ledger.csv", get(console::user_ledger_csv))
        .at("/queue", get(console::queue_get))
        .at("/queue/cancel", post(console::queue_cancel_post))
        .at("/audit", get(console::audit_get))
        .at("/audit.csv", get(console::audit_csv))
        .at("/settings", post(console::settings_post))
}

struct ClientView {
    name: String,
    redirect_uris: Vec<String>,
    post_logout_redirect_uris: Vec<String>,
    /// Credits the app spent of people's credits: today, in all.
    spent: (u64, u64),
    created: String,
}

struct UserView {
    id: String,
    email: String,
    name: String,
    balance: i64,
    pro: bool,
    banned: bool,
    admin: bool,
    is_me: bool,
    /// The person's own daily limit ("" = the plan's).
    daily_limit: String,
    /// The plan's daily limit (what an empty field means).
    plan_limit: u32,
}

#[derive(askama::Template)]
#[template(path = "admin.html")]
struct AdminPage {
    csrf: String,
    is_admin: bool,
    current: &'static str,
    notice: Option<&'static str>,
    error: Option<(&'static str, String)>,
    /// (app_name, app_secret) of a client registered by this request.
    new_client: Option<(String, String)>,
    /// (e-mail, link) of a password-reset link made by this request, shown once.
    reset_link: Option<(String, String)>,
    /// (e-mail, key) of an API key issued by this request, shown once.
    issued_key: Option<(String, String)>,
    form_name: String,
    form_uris: String,
    form_logout_uris: String,
    clients: Vec<ClientView>,
    q: String,
    users: Vec<UserView>,
    total_users: usize,
    tab: &'static str,
    /// Every setting, as the form shows it.
    settings: Vec<SettingRow>,
    /// No diffusion model installed: the first-run card pointing at the models page.
    first_run: bool,
}

impl AdminPage {
    fn error_in(&self, section: &str) -> Option<&str> {
        self.error
            .as_ref()
            .filter(|(s, _)| *s == section)
            .map(|(_, m)| m.as_str())
    }
}

#[derive(Default)]
struct Extras {
    notice: Option<&'static str>,
    error: Option<(&'static str, String)>,
    new_client: Option<(String, String)>,
    reset_link: Option<(String, String)>,
    issued_key: Option<(String, String)>,
    form_name: String,
    form_uris: String,
    form_logout_uris: String,
    q: String,
}

impl Extras {
    fn error(section: &'static str, message: impl Into<String>) -> Extras {
        Extras {
            error: Some((section, message.into())),
            ..Extras::default()
        }
    }
}

fn render(
    state: &AppState,
    jar: &CookieJar,
    me: &UserRecord,
    extras: Extras,
    status: StatusCode,
) -> Response {
    let spend = state
        .store
        .app_spend_by_client(crate::clock::day_of(state.clock.now()))
        .unwrap_or_default();
    let mut clients: Vec<ClientView> = match state.store.clients() {
        Ok(list) => list
            .into_iter()
            .map(|c| ClientView {
                spent: spend
                    .iter()
                    .find(|(name, _, _)| *name == c.name)
                    .map_or((0, 0), |(_, d, t)| (*d, *t)),
                name: c.name,
                redirect_uris: c.redirect_uris,
                post_logout_redirect_uris: c.post_logout_redirect_uris,
                created: date_of(c.created_at),
            })
            .collect(),
        Err(e) => {
            tracing::error!(error = %e, "listing clients");
            Vec::new()
        }
    };
    clients.sort_by(|a, b| a.name.cmp(&b.name));
    let mut all = match state.store.users() {
        Ok(u) => u,
        Err(e) => {
            tracing::error!(error = %e, "listing users");
            Vec::new()
        }
    };
    let total_users = all.len();
    all.sort_by(|a, b| a.email.cmp(&b.email));
    let plans = state.store.settings().unwrap_or_default();
    let needle = extras.q.trim().to_lowercase();
    let users = all
        .into_iter()
        .filter(|u| {
            needle.is_empty()
                || u.email.contains(&needle)
                || u.name.to_lowercase().contains(&needle)
                || u.user_id().to_string() == needle
        })
        .take(MAX_LISTED_USERS)
        .map(|u| UserView {
            id: u.user_id().to_string(),
            is_me: u.id == me.id,
            daily_limit: u.daily_limit.map(|l| l.to_string()).unwrap_or_default(),
            plan_limit: plans.daily_limit_for(u.pro, None),
            email: u.email,
            name: u.name,
            balance: u.balance,
            pro: u.pro,
            banned: u.banned,
            admin: u.admin,
        })
        .collect();
    page_with_status(
        &AdminPage {
            csrf: csrf_token(state, jar),
            is_admin: true,
            current: "admin",
            notice: extras.notice,
            error: extras.error,
            new_client: extras.new_client,
            reset_link: extras.reset_link,
            issued_key: extras.issued_key,
            form_name: extras.form_name,
            form_uris: extras.form_uris,
            form_logout_uris: extras.form_logout_uris,
            clients,
            q: extras.q,
            users,
            total_users,
            tab: "users",
            first_run: state
                .store
                .models()
                .is_ok_and(|m| m.iter().all(|r| r.kind != crate::models::Kind::Pipeline)),
            settings: state
                .store
                .settings()
                .map(|s| {
                    s.entries()
                        .into_iter()
                        .map(|(k, v)| SettingRow::of(k, v))
                        .collect()
                })
                .unwrap_or_default(),
        },
        status,
    )
}

/// One setting on the form: labelled with what it means, its key as a hint; a switch for the
/// on/off ones, a number with its unit and bounds for the rest.
struct SettingRow {
    key: String,
    value: u32,
    label: String,
    /// The unit after the number ("credits", "bits, 8–28"); empty for a switch.
    unit: String,
    switch: bool,
    min: u32,
    max: u32,
}

impl SettingRow {
    fn of(key: String, value: u32) -> SettingRow {
        use crate::store::settings::Rule;
        use crate::web::i18n::{current, tr, tr2};
        let label = match key
            .strip_prefix("prices.")
            .and_then(crate::render::Model::parse)
        {
            Some(m) => {
                crate::web::i18n::tr1("admin.setting.price_of", crate::web::i18n::model_name(m))
            }
            None => setting_help(current(), &key).to_owned(),
        };
        let rule = crate::store::settings::rule(&key).unwrap_or(Rule::Range {
            min: 0,
            max: u32::MAX,
        });
        let (unit, switch, min, max) = match rule {
            Rule::Flag => (String::new(), true, 0, 1),
            Rule::Credits { min, max } => (tr("admin.unit.credits").to_owned(), false, min, max),
            Rule::Range { min, max } if key == "challenge_bits" => {
                (tr2("admin.unit.bits", min, max), false, min, max)
            }
            Rule::Range { min, max } if key == "signup_credits" => {
                (tr("admin.unit.credits").to_owned(), false, min, max)
            }
            Rule::Range { min, max } if key.starts_with("limits.") => {
                (tr("admin.unit.pictures").to_owned(), false, min, max)
            }
            Rule::Range { min, max } => (String::new(), false, min, max),
        };
        SettingRow {
            key,
            value,
            label,
            unit,
            switch,
            min,
            max,
        }
    }
}

/// What a setting does, in a few words, in `lang` (the settings form). The English is the
/// store's [`describe`](crate::store::settings::describe), which a test keeps equal.
fn setting_help(lang: crate::web::i18n::Lang, key: &str) -> &'static str {
    match key {
        "prices.edit" => crate::web::i18n::tr_in(lang, "admin.setting.prices.edit"),
        "limits.daily" => crate::web::i18n::tr_in(lang, "admin.setting.limits.daily"),
        "limits.daily_pro" => crate::web::i18n::tr_in(lang, "admin.setting.limits.daily_pro"),
        "signup_credits" => crate::web::i18n::tr_in(lang, "admin.setting.signup_credits"),
        "registration_open" => crate::web::i18n::tr_in(lang, "admin.setting.registration_open"),
        "signup_approval" => crate::web::i18n::tr_in(lang, "admin.setting.signup_approval"),
        "challenge_bits" => crate::web::i18n::tr_in(lang, "admin.setting.challenge_bits"),
        "app_daily_cap" => crate::web::i18n::tr_in(lang, "admin.setting.app_daily_cap"),
        k if k.starts_with("prices.") => {
            crate::web::i18n::tr_in(lang, "admin.setting.prices.model")
        }
        // A setting newer than this list: its English description.
        k => crate::store::settings::describe(k),
    }
}

fn notice_for(done: Option<&str>) -> Option<&'static str> {
    Some(match done? {
        "client-removed" => crate::web::i18n::tr("admin.notice.client_removed"),
        "credits" => crate::web::i18n::tr("admin.notice.credits"),
        "pro" => crate::web::i18n::tr("admin.notice.pro"),
        "admin" => crate::web::i18n::tr("admin.notice.admin"),
        "limit" => crate::web::i18n::tr("admin.notice.limit"),
        "banned" => crate::web::i18n::tr("admin.notice.banned"),
        "unbanned" => crate::web::i18n::tr("admin.notice.unbanned"),
        "deleted" => crate::web::i18n::tr("admin.notice.deleted"),
        "settings" => crate::web::i18n::tr("admin.notice.settings"),
        _ => return None,
    })
}

#[handler]
pub async fn admin_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Query(q): Query<HashMap<String, String>>,
    Admin(me): Admin,
) -> Response {
    let me = me.user;
    let extras = Extras {
        notice: notice_for(q.get("done").map(String::as_str)),
        q: q.get("q")
            .map(|s| s.chars().take(200).collect())
            .unwrap_or_default(),
        ..Extras::default()
    };
    render(&state, jar, &me, extras, StatusCode::OK)
}

#[derive(Deserialize)]
pub struct ClientForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    redirect_uris: String,
    #[serde(default)]
    post_logout_redirect_uris: String,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    logo_uri: String,
    #[serde(default)]
    homepage: String,
}

#[handler]
pub async fn add_client_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<ClientForm>,
    Admin(me): Admin,
) -> Response {
    let me = me.user;
    let name = f.name.trim().to_string();
    let uris: Vec<String> = f
        .redirect_uris
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let logout_uris: Vec<String> = f
        .post_logout_redirect_uris
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    let refuse = |msg: String, status| {
        let extras = Extras {
            error: Some(("client", msg)),
            form_name: name.chars().take(64).collect(),
            form_uris: f.redirect_uris.chars().take(20_000).collect(),
            form_logout_uris: f.post_logout_redirect_uris.chars().take(20_000).collect(),
            ..Extras::default()
        };
        render(&state, jar, &me, extras, status)
    };
    if uris.is_empty() {
        return refuse(
            crate::web::i18n::tr("admin.client.no_uris").into(),
            StatusCode::BAD_REQUEST,
        );
    }
    if uris.len() > MAX_REDIRECT_URIS {
        return refuse(
            crate::web::i18n::tr1("admin.client.too_many_uris", MAX_REDIRECT_URIS),
            StatusCode::BAD_REQUEST,
        );
    }
    let now = state.clock.now();
    let profile = crate::store::oauth::ClientProfile {
        display_name: Some(f.display_name.chars().take(200).collect()),
        logo_uri: Some(f.logo_uri.chars().take(2_100).collect()),
        homepage: Some(f.homepage.chars().take(2_100).collect()),
    };
    let (n, u) = (name.clone(), uris.clone());
    match state
        .store
        .call(move |st| ops::add_client(st, &n, &u, &logout_uris, profile, now))
        .await
    {
        Ok(secret) => {
            tracing::info!(client = %name, "client registered from the admin page");
            audit(&state, &me, "client.add", None, name.clone()).await;
            let extras = Extras {
                new_client: Some((name.clone(), secret)),
                ..Extras::default()
            };
            render(&state, jar, &me, extras, StatusCode::OK)
        }
        Err(OpError::Invalid(m)) => refuse(m, StatusCode::BAD_REQUEST),
        Err(OpError::Store(e)) => server_error(&state, "registering a client", e),
    }
}

#[derive(Deserialize)]
pub struct RemoveClientForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    confirm: String,
}

/// The refusal of a destructive form sent without its confirmation box ticked.
fn unconfirmed(
    state: &AppState,
    jar: &CookieJar,
    me: &UserRecord,
    section: &'static str,
) -> Response {
    render(
        state,
        jar,
        me,
        Extras::error(section, crate::web::i18n::tr("admin.unconfirmed")),
        StatusCode::BAD_REQUEST,
    )
}

#[handler]
pub async fn remove_client_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<RemoveClientForm>,
    Admin(me): Admin,
) -> Response {
    let me = me.user;
    if f.confirm != "yes" {
        return unconfirmed(&state, jar, &me, "client");
    }
    let now = state.clock.now();
    let name = f.name.clone();
    match state
        .store
        .call(move |st| st.remove_client(&name, now))
        .await
    {
        Ok(()) => {
            tracing::info!(client = %f.name, "client removed from the admin page");
            audit(&state, &me, "client.remove", None, f.name.clone()).await;
            redirect("/admin?done=client-removed")
        }
        Err(StoreError::NotFound(m)) => render(
            &state,
            jar,
            &me,
            Extras::error("client", m),
            StatusCode::NOT_FOUND,
        ),
        Err(e) => server_error(&state, "removing a client", e),
    }
}

/// How the audit log names an administrator acting on the admin page.
fn actor_of(me: &UserRecord) -> String {
    format!("{} ({})", me.user_id(), me.email)
}

/// Runs an admin operation on the store (off the async threads) as the CLI would, audited in
/// `me`'s name.
async fn run_as(
    state: &AppState,
    me: &UserRecord,
    req: ops::AdminRequest,
) -> Result<serde_json::Value, OpError> {
    let (now, secrets, actor) = (state.clock.now(), state.idp.secrets.clone(), actor_of(me));
    let tiers = req.changes_tiers();
    let out = state
        .store
        .call(move |s| Ok::<_, StoreError>(ops::execute_as(s, &secrets, req, now, &actor)))
        .await
        .unwrap_or_else(|e| Err(OpError::Store(e)));
    if tiers && out.is_ok() {
        state.reload_tiers().await;
    }
    out
}

/// Writes an admin page's change to the audit log (after the change succeeded).
async fn audit(
    state: &AppState,
    me: &UserRecord,
    action: &'static str,
    user_id: Option<u64>,
    detail: String,
) {
    let (actor, now) = (actor_of(me), state.clock.now());
    if let Err(e) = state
        .store
        .call(move |s| s.audit(&actor, action, user_id, &detail, now))
        .await
    {
        tracing::warn!(error = %e, action, "writing the audit log");
    }
}

/// The admin and the user a `/admin/users/{id}/…` form is about, or the response to send.
fn target_user(
    state: &AppState,
    jar: &CookieJar,
    me: SignedIn,
    id: &str,
) -> Result<(UserRecord, UserRecord), Box<Response>> {
    let me = me.user;
    let found = UserId::parse(id).and_then(|uid| state.store.user(uid.0).ok().flatten());
    match found {
        Some(target) => Ok((me, target)),
        None => Err(Box::new(render(
            state,
            jar,
            &me,
            Extras::error("users", crate::web::i18n::tr("admin.no_such_user")),
            StatusCode::NOT_FOUND,
        ))),
    }
}

#[derive(Deserialize)]
pub struct CreditsForm {
    #[serde(default)]
    amount: String,
}

#[handler]
pub async fn credits_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(id): Path<String>,
    CheckedForm(f): CheckedForm<CreditsForm>,
    Admin(me): Admin,
) -> Response {
    let (me, target) = match target_user(&state, jar, me, &id) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let refuse =
        |msg: String, status| render(&state, jar, &me, Extras::error("users", msg), status);
    let Ok(amount) = f.amount.trim().trim_start_matches('+').parse::<i64>() else {
        return refuse(
            crate::web::i18n::tr1("admin.bad_amount", &target.email),
            StatusCode::BAD_REQUEST,
        );
    };
    let now = state.clock.now();
    let email = target.email.clone();
    match state
        .store
        .call(move |st| st.grant_credits(&email, amount, now))
        .await
    {
        Ok(user) => {
            tracing::info!(user = %user.user_id(), amount, "credits granted from the admin page");
            audit(
                &state,
                &me,
                "credits.grant",
                Some(user.id),
                format!("{amount:+} credits"),
            )
            .await;
            redirect(&format!("/admin?done=credits#{}", user.user_id()))
        }
        Err(StoreError::Invalid(m) | StoreError::NotFound(m)) => {
            refuse(format!("{}: {m}", target.email), StatusCode::BAD_REQUEST)
        }
        Err(e) => server_error(&state, "granting credits", e),
    }
}

#[derive(Deserialize)]
pub struct FlagForm {
    #[serde(default)]
    value: String,
    #[serde(default)]
    confirm: String,
}

fn parse_flag(value: &str) -> Option<bool> {
    match value {
        "true" | "on" | "1" => Some(true),
        "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

#[handler]
pub async fn pro_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(id): Path<String>,
    CheckedForm(f): CheckedForm<FlagForm>,
    Admin(me): Admin,
) -> Response {
    let (me, target) = match target_user(&state, jar, me, &id) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let Some(pro) = parse_flag(&f.value) else {
        return render(
            &state,
            jar,
            &me,
            Extras::error("users", crate::web::i18n::tr("admin.pro_choice")),
            StatusCode::BAD_REQUEST,
        );
    };
    let patch = UserPatch {
        pro: Some(pro),
        ..UserPatch::default()
    };
    patch_user(&state, &me, &target, patch, format!("PRO {pro}"), "pro").await
}

/// The users page after an account was created without a password: its reset link, shown once.
fn created_with_link(
    state: &AppState,
    jar: &CookieJar,
    me: &UserRecord,
    email: String,
    link: String,
) -> Response {
    let extras = Extras {
        notice: Some(crate::web::i18n::tr("admin.notice.created_link")),
        reset_link: Some((email, link)),
        ..Extras::default()
    };
    render(state, jar, me, extras, StatusCode::OK)
}

/// Applies `patch` to `target` from the admin page: audited as `user.update` with `detail`,
/// then back to the list with the `done` notice.
async fn patch_user(
    state: &AppState,
    me: &UserRecord,
    target: &UserRecord,
    patch: UserPatch,
    detail: String,
    done: &str,
) -> Response {
    let email = target.email.clone();
    let now = state.clock.now();
    match state
        .store
        .call(move |st| st.update_user(&email, patch, now))
        .await
    {
        Ok(user) => {
            tracing::info!(user = %user.user_id(), change = %detail, "account changed from the admin page");
            audit(state, me, "user.update", Some(user.id), detail).await;
            redirect(&format!("/admin?done={done}#{}", user.user_id()))
        }
        Err(e) => server_error(state, "changing an account", e),
    }
}

/// `POST /admin/users/{id}/admin`: makes the person an administrator, or not (never oneself:
/// so there is always one left, and nobody locks themselves out by a click).
#[handler]
pub async fn admin_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(id): Path<String>,
    CheckedForm(f): CheckedForm<FlagForm>,
    Admin(me): Admin,
) -> Response {
    let (me, target) = match target_user(&state, jar, me, &id) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let refuse = |msg: &str| {
        render(
            &state,
            jar,
            &me,
            Extras::error("users", msg),
            StatusCode::BAD_REQUEST,
        )
    };
    let Some(admin) = parse_flag(&f.value) else {
        return refuse(crate::web::i18n::tr("admin.pro_choice"));
    };
    if !admin && target.id == me.id {
        return refuse(crate::web::i18n::tr("admin.admin_self"));
    }
    let patch = UserPatch {
        admin: Some(admin),
        ..UserPatch::default()
    };
    patch_user(
        &state,
        &me,
        &target,
        patch,
        format!("admin {admin}"),
        "admin",
    )
    .await
}

#[derive(Deserialize)]
pub struct LimitForm {
    #[serde(default)]
    limit: String,
}

/// `POST /admin/users/{id}/daily-limit`: the person's own generations per day (empty: the
/// plan's).
#[handler]
pub async fn daily_limit_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(id): Path<String>,
    CheckedForm(f): CheckedForm<LimitForm>,
    Admin(me): Admin,
) -> Response {
    let (me, target) = match target_user(&state, jar, me, &id) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let limit = match f.limit.trim() {
        "" => None,
        v => match v.parse::<u32>() {
            Ok(n) if n <= 1_000_000 => Some(n),
            _ => {
                return render(
                    &state,
                    jar,
                    &me,
                    Extras::error("users", crate::web::i18n::tr("admin.limit_bad")),
                    StatusCode::BAD_REQUEST,
                );
            }
        },
    };
    let patch = UserPatch {
        daily_limit: Some(limit),
        ..UserPatch::default()
    };
    let shown = limit.map_or_else(|| "the plan's".to_owned(), |l| l.to_string());
    patch_user(
        &state,
        &me,
        &target,
        patch,
        format!("daily limit {shown}"),
        "limit",
    )
    .await
}

/// `POST /admin/users/{id}/key`: a new API key for the person (replacing theirs), shown once on
/// the response page.
#[handler]
pub async fn key_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(id): Path<String>,
    CheckedForm(Empty {}): CheckedForm<Empty>,
    Admin(me): Admin,
) -> Response {
    let (me, target) = match target_user(&state, jar, me, &id) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let email = target.email.clone();
    match run_as(&state, &me, ops::AdminRequest::KeyIssue { email }).await {
        Ok(v) => {
            let key = v["api_key"].as_str().unwrap_or_default().to_string();
            let extras = Extras {
                issued_key: Some((target.email, key)),
                ..Extras::default()
            };
            render(&state, jar, &me, extras, StatusCode::OK)
        }
        Err(e) => server_error(&state, "issuing an API key", e),
    }
}

#[handler]
pub async fn ban_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(id): Path<String>,
    CheckedForm(f): CheckedForm<FlagForm>,
    Admin(me): Admin,
) -> Response {
    let (me, target) = match target_user(&state, jar, me, &id) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let refuse = |msg: &str, status| render(&state, jar, &me, Extras::error("users", msg), status);
    let Some(banned) = parse_flag(&f.value) else {
        return refuse(
            crate::web::i18n::tr("admin.ban_choice"),
            StatusCode::BAD_REQUEST,
        );
    };
    if banned && target.id == me.id {
        return refuse(
            crate::web::i18n::tr("admin.ban_self"),
            StatusCode::BAD_REQUEST,
        );
    }
    if banned && f.confirm != "yes" {
        return unconfirmed(&state, jar, &me, "users");
    }
    let email = target.email.clone();
    let uid = target.id;
    let now = state.clock.now();
    let result = state
        .store
        .call(move |st| {
            let user = st.update_user(
                &email,
                UserPatch {
                    banned: Some(banned),
                    ..UserPatch::default()
                },
                now,
            )?;
            let ended = if banned {
                st.delete_user_sessions(uid, None)?
            } else {
                0
            };
            Ok::<_, StoreError>((user, ended))
        })
        .await;
    match result {
        Ok((user, ended)) => {
            tracing::info!(user = %user.user_id(), banned, sessions_ended = ended, "ban changed from the admin page");
            audit(
                &state,
                &me,
                "user.update",
                Some(user.id),
                format!("banned {banned}"),
            )
            .await;
            let done = if banned { "banned" } else { "unbanned" };
            redirect(&format!("/admin?done={done}#{}", user.user_id()))
        }
        Err(e) => server_error(&state, "changing a ban", e),
    }
}

/// `POST /admin/users/{id}/reset-link`: a one-time password-reset link for the person (valid
/// 24 hours, replacing an earlier one), shown once on the response page.
#[handler]
pub async fn reset_link_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(id): Path<String>,
    CheckedForm(Empty {}): CheckedForm<Empty>,
    Admin(me): Admin,
) -> Response {
    let (me, target) = match target_user(&state, jar, me, &id) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    let email = target.email.clone();
    match run_as(&state, &me, ops::AdminRequest::UserResetLink { email }).await {
        Ok(mut v) => {
            ops::complete_urls(&mut v, &state.public_url);
            let link = v["reset_url"].as_str().unwrap_or_default().to_string();
            let extras = Extras {
                reset_link: Some((target.email, link)),
                ..Extras::default()
            };
            render(&state, jar, &me, extras, StatusCode::OK)
        }
        Err(e) => server_error(&state, "making a reset link", e),
    }
}

#[derive(Deserialize)]
pub struct ConfirmForm {
    #[serde(default)]
    confirm: String,
}

/// `POST /admin/users/{id}/delete`: deletes the account (with the box ticked; not one's own —
/// that is on the account page).
#[handler]
pub async fn delete_user_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(id): Path<String>,
    CheckedForm(f): CheckedForm<ConfirmForm>,
    Admin(me): Admin,
) -> Response {
    let (me, target) = match target_user(&state, jar, me, &id) {
        Ok(t) => t,
        Err(r) => return *r,
    };
    if target.id == me.id {
        return render(
            &state,
            jar,
            &me,
            Extras::error("users", crate::web::i18n::tr("admin.delete_self")),
            StatusCode::BAD_REQUEST,
        );
    }
    if f.confirm != "yes" {
        return unconfirmed(&state, jar, &me, "users");
    }
    let email = target.email.clone();
    match run_as(&state, &me, ops::AdminRequest::UserRemove { email }).await {
        Ok(_) => {
            tracing::info!(admin = %me.user_id(), user = %target.user_id(), "account deleted from the admin page");
            redirect("/admin?done=deleted")
        }
        Err(OpError::Invalid(m)) => render(
            &state,
            jar,
            &me,
            Extras::error("users", crate::web::error::sentence(&m)),
            StatusCode::CONFLICT,
        ),
        Err(e) => server_error(&state, "deleting an account", e),
    }
}

#[cfg(test)]
mod tests {
    use crate::web::i18n::Lang;

    /// The settings form's English is the store's own description of every setting.
    #[test]
    fn setting_help_in_english_is_the_stores_description() {
        for key in crate::store::settings::setting_keys() {
            assert_eq!(
                super::setting_help(Lang::En, &key),
                crate::store::settings::describe(&key),
                "{key}"
            );
            assert_ne!(
                super::setting_help(Lang::Ru, &key),
                super::setting_help(Lang::En, &key)
            );
        }
    }
}
