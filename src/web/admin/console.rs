//! The operator console beside the admin overview: the live queue (queued and running jobs,
//! with cancel), a person's page (ledger and audit entries, CSV export), the audit log (CSV
//! export), the settings form and creating an account.

use std::collections::HashMap;

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::cookie::CookieJar;
use poem::web::{Data, Path};
use poem::{IntoResponse, Response, handler};
use serde::Deserialize;

use super::{Extras, audit, render};
use crate::clock::Millis;
use crate::ops::{AdminRequest, OpError};
use crate::state::AppState;
use crate::store::audit::AuditEntry;
use crate::store::{LedgerEntry, StoreError, UserId, UserRecord};
use crate::web::account::date_of;
use crate::web::i18n::Lang;
use crate::web::{
    Admin, CheckedForm, PageError, csrf_token, page_with_status, redirect, server_error,
};

/// Rows a page shows (the CSV export has them all).
const PAGE_ROWS: usize = 200;

/// `YYYY-MM-DD HH:MM:SS` (UTC).
pub(super) fn datetime(ms: Millis) -> String {
    let secs = (ms % crate::clock::DAY_MS) / 1000;
    format!(
        "{} {:02}:{:02}:{:02}",
        date_of(ms),
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// `4 s`, `3 min`, `2 h`.
fn age(ms: Millis) -> String {
    let s = ms / 1000;
    match s {
        0..60 => crate::web::i18n::tr1("admin.age.s", s),
        60..3600 => crate::web::i18n::tr1("admin.age.min", s / 60),
        _ => crate::web::i18n::tr1("admin.age.h", s / 3600),
    }
}

/// A job's kind, for the queue page.
fn kind_text(kind: crate::store::jobs::JobKind) -> &'static str {
    use crate::store::jobs::JobKind;
    match kind {
        JobKind::Generate => crate::web::i18n::tr("admin.queue.kind.generate"),
        JobKind::Edit => crate::web::i18n::tr("admin.queue.kind.edit"),
    }
}

/// A job's status, for the queue page.
fn status_text(status: crate::store::jobs::JobStatus) -> &'static str {
    use crate::store::jobs::JobStatus;
    match status {
        JobStatus::Queued => crate::web::i18n::tr("admin.queue.status.queued"),
        JobStatus::Running => crate::web::i18n::tr("admin.queue.status.running"),
        JobStatus::Done => crate::web::i18n::tr("admin.queue.status.done"),
        JobStatus::Failed => crate::web::i18n::tr("admin.queue.status.failed"),
    }
}

/// A ledger row's reason, for the person's page (the CSV keeps the stored name).
fn reason_text(reason: crate::store::LedgerReason) -> &'static str {
    use crate::store::LedgerReason;
    match reason {
        LedgerReason::Grant => crate::web::i18n::tr("admin.ledger.grant"),
        LedgerReason::Charge => crate::web::i18n::tr("admin.ledger.charge"),
        LedgerReason::Refund => crate::web::i18n::tr("admin.ledger.refund"),
        LedgerReason::Closed => crate::web::i18n::tr("admin.ledger.closed"),
    }
}

struct QueueRow {
    id: String,
    user: String,
    kind: &'static str,
    model: &'static str,
    status: &'static str,
    age: String,
    place: String,
}

#[derive(askama::Template)]
#[template(path = "admin_queue.html")]
struct QueuePage {
    csrf: String,
    is_admin: bool,
    current: &'static str,
    tab: &'static str,
    notice: Option<&'static str>,
    rows: Vec<QueueRow>,
    workers: usize,
    paused: bool,
}

/// `GET /admin/queue`: jobs queued or running, oldest first (the page refreshes itself).
#[handler]
pub async fn queue_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    poem::web::Query(q): poem::web::Query<HashMap<String, String>>,
    Admin(_me): Admin,
) -> Result<Response, PageError> {
    let store = state.store.clone();
    // The page refreshes every few seconds: only the owners of the listed jobs are read.
    let (jobs, email) = store
        .call(|s| {
            let jobs = s.pending_jobs()?;
            let email = emails_of(s, jobs.iter().map(|j| j.user_id))?;
            Ok::<_, StoreError>((jobs, email))
        })
        .await
        .map_err(|e| PageError::server("reading the queue", e))?;
    let now = state.clock.now();
    let rows = jobs
        .into_iter()
        .map(|j| {
            let id = crate::store::jobs::JobId(j.id);
            let place = state
                .jobs
                .live_status(id)
                .and_then(|l| l.queue_position)
                .map(|p| p.to_string())
                .unwrap_or_default();
            QueueRow {
                id: id.to_string(),
                user: email.get(&j.user_id).cloned().unwrap_or_else(|| "?".into()),
                kind: kind_text(j.kind),
                model: j.model.id(),
                status: status_text(j.status),
                age: age(now.saturating_sub(j.created_at)),
                place,
            }
        })
        .collect();
    let stats = state.jobs.stats();
    Ok(page_with_status(
        &QueuePage {
            csrf: csrf_token(&state, jar),
            is_admin: true,
            current: "admin",
            tab: "queue",
            notice: (q.get("done").map(String::as_str) == Some("cancelled"))
                .then(|| crate::web::i18n::tr("admin.queue.cancelled")),
            rows,
            workers: stats.workers,
            paused: state.jobs.is_paused(),
        },
        StatusCode::OK,
    ))
}

fn no_such_job() -> PageError {
    PageError::refused(
        StatusCode::NOT_FOUND,
        crate::web::i18n::tr("admin.no_such_job"),
        crate::web::i18n::tr("admin.no_such_job.message"),
    )
}

#[derive(Deserialize)]
pub struct JobForm {
    #[serde(default)]
    job: String,
}

/// `POST /admin/queue/cancel`: cancels any person's queued or running job (refunded).
#[handler]
pub async fn queue_cancel_post(
    state: Data<&AppState>,
    CheckedForm(f): CheckedForm<JobForm>,
    Admin(me): Admin,
) -> Result<Response, PageError> {
    let id = crate::store::jobs::JobId::parse(&f.job).ok_or_else(no_such_job)?;
    let store = state.store.clone();
    let job = store
        .call(move |s| s.job(id))
        .await
        .map_err(|e| PageError::server("reading a job", e))?
        .ok_or_else(no_such_job)?;
    state
        .jobs
        .cancel(id)
        .await
        .map_err(|e| PageError::server("cancelling a job", e))?;
    tracing::info!(admin = %me.user.user_id(), job = %id, "job cancelled from the admin queue");
    audit(
        &state,
        &me.user,
        "job.cancel",
        Some(job.user_id),
        id.to_string(),
    )
    .await;
    Ok(redirect("/admin/queue?done=cancelled"))
}

struct LedgerRow {
    at: String,
    reason: String,
    delta: String,
    balance_after: i64,
    job: String,
    app: String,
}

struct AuditRow {
    at: String,
    actor: String,
    action: String,
    user: String,
    detail: String,
}

/// The rows of `entries`; `lang` names deleted people (English in the CSV).
fn audit_rows(lang: Lang, entries: &[AuditEntry], email: &HashMap<u64, String>) -> Vec<AuditRow> {
    entries
        .iter()
        .map(|e| AuditRow {
            at: datetime(e.at),
            actor: e.actor.clone(),
            action: e.action.clone(),
            user: e
                .user_id
                .map(|id| {
                    email.get(&id).cloned().unwrap_or_else(|| {
                        crate::web::i18n::tr_in(lang, "admin.audit.deleted").replacen(
                            "{}",
                            &UserId(id).to_string(),
                            1,
                        )
                    })
                })
                .unwrap_or_default(),
            detail: e.detail.clone(),
        })
        .collect()
}

#[derive(askama::Template)]
#[template(path = "admin_user.html")]
struct UserPage {
    notice: Option<&'static str>,
    csrf: String,
    is_admin: bool,
    current: &'static str,
    tab: &'static str,
    id: String,
    email: String,
    name: String,
    balance: i64,
    pro: bool,
    banned: bool,
    admin: bool,
    created: String,
    keys: usize,
    totals: (i64, i64, i64),
    ledger: Vec<LedgerRow>,
    ledger_total: usize,
    audit: Vec<AuditRow>,
}

fn find_user(state: &AppState, id: &str) -> Result<UserRecord, PageError> {
    UserId::parse(id)
        .and_then(|uid| state.store.user(uid.0).ok().flatten())
        .ok_or_else(|| {
            PageError::refused(
                StatusCode::NOT_FOUND,
                crate::web::i18n::tr("admin.no_such_user.title"),
                crate::web::i18n::tr("admin.no_such_user.message"),
            )
        })
}

fn ledger_row(e: &LedgerEntry) -> LedgerRow {
    LedgerRow {
        at: datetime(e.at),
        reason: serde_json::to_value(e.reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        delta: format!("{:+}", e.delta),
        balance_after: e.balance_after,
        job: e
            .job_id
            .map(|j| crate::store::jobs::JobId(j).to_string())
            .unwrap_or_default(),
        app: e.client.clone().unwrap_or_default(),
    }
}

/// `GET /admin/users/{id}`: one person: facts, ledger (grants, charges, refunds) and the audit
/// entries about them.
#[handler]
pub async fn user_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(id): Path<String>,
    poem::web::Query(q): poem::web::Query<HashMap<String, String>>,
    Admin(_me): Admin,
) -> Result<Response, PageError> {
    let user = find_user(&state, &id)?;
    let uid = user.id;
    let store = state.store.clone();
    let (ledger, entries) = store
        .call(move |s| Ok::<_, StoreError>((s.ledger(uid)?, s.audit_log(Some(uid), PAGE_ROWS)?)))
        .await
        .map_err(|e| PageError::server("reading a ledger", e))?;
    let sum = |r: crate::store::LedgerReason| -> i64 {
        ledger
            .iter()
            .filter(|e| e.reason == r)
            .map(|e| e.delta)
            .sum()
    };
    let totals = (
        sum(crate::store::LedgerReason::Grant),
        -sum(crate::store::LedgerReason::Charge),
        sum(crate::store::LedgerReason::Refund),
    );
    let email: HashMap<u64, String> = [(user.id, user.email.clone())].into_iter().collect();
    Ok(page_with_status(
        &UserPage {
            notice: (q.get("done").map(String::as_str) == Some("created"))
                .then(|| crate::web::i18n::tr("admin.user.created")),
            csrf: csrf_token(&state, jar),
            is_admin: true,
            current: "admin",
            tab: "users",
            id: user.user_id().to_string(),
            email: user.email.clone(),
            name: user.name.clone(),
            balance: user.balance,
            pro: user.pro,
            banned: user.banned,
            admin: user.admin,
            created: date_of(user.created_at),
            keys: usize::from(user.api_key_hash.is_some()) + user.api_keys.len(),
            totals,
            ledger_total: ledger.len(),
            ledger: ledger
                .iter()
                .rev()
                .take(PAGE_ROWS)
                .map(|e| LedgerRow {
                    reason: reason_text(e.reason).to_string(),
                    ..ledger_row(e)
                })
                .collect(),
            audit: audit_rows(crate::web::i18n::current(), &entries, &email),
        },
        StatusCode::OK,
    ))
}

/// One CSV field: quoted when needed, and a leading `= + - @` defused (spreadsheet formula
/// injection) with a `'`.
fn csv_field(v: &str) -> String {
    let v = if v.starts_with(['=', '+', '-', '@', '\t', '\r']) && v.parse::<f64>().is_err() {
        format!("'{v}")
    } else {
        v.to_string()
    };
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v
    }
}

fn csv(header: &[&str], rows: impl Iterator<Item = Vec<String>>, filename: &str) -> Response {
    let mut out = header.join(",");
    out.push_str("\r\n");
    for row in rows {
        let line: Vec<String> = row.iter().map(|f| csv_field(f)).collect();
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    let mut resp = out.into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{filename}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// `GET /admin/users/{id}/ledger.csv`: every ledger row of the person.
#[handler]
pub async fn user_ledger_csv(
    state: Data<&AppState>,
    Path(id): Path<String>,
    Admin(_me): Admin,
) -> Result<Response, PageError> {
    let user = find_user(&state, &id)?;
    let uid = user.id;
    let store = state.store.clone();
    let ledger = store
        .call(move |s| s.ledger(uid))
        .await
        .map_err(|e| PageError::server("reading a ledger", e))?;
    Ok(csv(
        &[
            "seq",
            "at_utc",
            "reason",
            "delta",
            "balance_after",
            "job_id",
            "app",
        ],
        ledger.iter().map(|e| {
            let r = ledger_row(e);
            vec![
                e.seq.to_string(),
                r.at,
                r.reason,
                e.delta.to_string(),
                r.balance_after.to_string(),
                r.job,
                r.app,
            ]
        }),
        &format!("pictor-ledger-{}.csv", user.user_id()),
    ))
}

#[derive(askama::Template)]
#[template(path = "admin_audit.html")]
struct AuditPage {
    csrf: String,
    is_admin: bool,
    current: &'static str,
    tab: &'static str,
    rows: Vec<AuditRow>,
}

async fn audit_data(
    state: &AppState,
    limit: usize,
) -> Result<(Vec<AuditEntry>, HashMap<u64, String>), PageError> {
    let store = state.store.clone();
    store
        .call(move |s| {
            let entries = s.audit_log(None, limit)?;
            let email = emails_of(s, entries.iter().filter_map(|e| e.user_id))?;
            Ok::<_, StoreError>((entries, email))
        })
        .await
        .map_err(|e| PageError::server("reading the audit log", e))
}

/// The e-mails of the accounts `ids` (each read once; deleted accounts are left out).
fn emails_of(
    store: &crate::store::Store,
    ids: impl Iterator<Item = u64>,
) -> Result<HashMap<u64, String>, StoreError> {
    let mut email = HashMap::new();
    for id in ids {
        if let std::collections::hash_map::Entry::Vacant(slot) = email.entry(id)
            && let Some(u) = store.user(id)?
        {
            slot.insert(u.email);
        }
    }
    Ok(email)
}

/// `GET /admin/audit`: the newest changes administrators made.
#[handler]
pub async fn audit_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Admin(_me): Admin,
) -> Result<Response, PageError> {
    let (entries, email) = audit_data(&state, PAGE_ROWS).await?;
    Ok(page_with_status(
        &AuditPage {
            csrf: csrf_token(&state, jar),
            is_admin: true,
            current: "admin",
            tab: "audit",
            rows: audit_rows(crate::web::i18n::current(), &entries, &email),
        },
        StatusCode::OK,
    ))
}

/// `GET /admin/audit.csv`: the whole audit log.
#[handler]
pub async fn audit_csv(state: Data<&AppState>, Admin(_me): Admin) -> Result<Response, PageError> {
    let (entries, email) = audit_data(&state, usize::MAX).await?;
    let rows = audit_rows(Lang::En, &entries, &email);
    Ok(csv(
        &["seq", "at_utc", "actor", "action", "user", "detail"],
        entries
            .iter()
            .zip(rows)
            .map(|(e, r)| vec![e.seq.to_string(), r.at, r.actor, r.action, r.user, r.detail]),
        "pictor-audit.csv",
    ))
}

/// `POST /admin/settings`: every setting of the form at once, all or none; each change goes to
/// the audit log.
#[handler]
pub async fn settings_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(form): CheckedForm<HashMap<String, String>>,
    Admin(me): Admin,
) -> Response {
    let me = me.user;
    let current = match state.store.settings() {
        Ok(s) => s.entries(),
        Err(e) => return server_error(&state, "reading settings", e),
    };
    let refuse = |m: String| {
        render(
            &state,
            jar,
            &me,
            Extras::error("settings", m),
            StatusCode::BAD_REQUEST,
        )
    };
    let mut changes = Vec::new();
    // A switch that is off is not sent at all: the form names its switches.
    let switches: Vec<&str> = form
        .get("switches")
        .map(|s| s.split_whitespace().collect())
        .unwrap_or_default();
    for (key, old) in &current {
        let raw = match form.get(key) {
            Some(raw) => raw.as_str(),
            // Only an on/off setting can be left out to mean off.
            None if switches.contains(&key.as_str())
                && crate::store::settings::rule(key)
                    == Some(crate::store::settings::Rule::Flag) =>
            {
                "0"
            }
            None => continue,
        };
        let Ok(value) = raw.trim().parse::<u32>() else {
            let shown = match crate::web::i18n::current() {
                Lang::En => format!("{raw:?}"),
                Lang::Ru => format!("«{raw}»"),
            };
            return refuse(crate::web::i18n::tr2(
                "admin.settings.not_number",
                key,
                shown,
            ));
        };
        // Checked here first so the refusal is worded in the page's language (the store checks
        // again, with the same rule, and would refuse in English).
        if let Some(rule) = crate::store::settings::rule(key)
            && !rule.allows(value)
        {
            return refuse(crate::web::i18n::tr1(
                "admin.settings.unchanged",
                setting_refusal(key, rule),
            ));
        }
        if value != *old {
            changes.push((key.clone(), value));
        }
    }
    let pairs: Vec<(String, u32)> = changes;
    let (actor, now) = (super::actor_of(&me), state.clock.now());
    let store = state.store.clone();
    // The values and their audit entries commit together.
    match store
        .call(move |s| s.set_settings_as(&pairs, Some((&actor, now))))
        .await
    {
        Ok(_) => redirect("/admin?done=settings#settings"),
        Err(StoreError::Invalid(m)) => refuse(crate::web::i18n::tr1("admin.settings.unchanged", m)),
        Err(e) => server_error(&state, "saving settings", e),
    }
}

/// Why `key` refused its value, in the page's language.
fn setting_refusal(key: &str, rule: crate::store::settings::Rule) -> String {
    use crate::store::settings::Rule;
    match rule {
        Rule::Credits { min, max } => crate::web::i18n::tr1("admin.settings.range_credits", key)
            .replacen("{}", &min.to_string(), 1)
            .replacen("{}", &max.to_string(), 1),
        Rule::Range { min, max } => crate::web::i18n::tr1("admin.settings.range", key)
            .replacen("{}", &min.to_string(), 1)
            .replacen("{}", &max.to_string(), 1),
        Rule::Flag => crate::web::i18n::tr1("admin.settings.zero_or_one", key),
    }
}

#[derive(Deserialize)]
pub struct NewUserForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    credits: String,
    #[serde(default)]
    admin: String,
    #[serde(default)]
    pro: String,
}

/// `POST /admin/users`: creates an account (with a password, or without one: then send the
/// person a reset link to choose it).
#[handler]
pub async fn create_user_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<NewUserForm>,
    Admin(me): Admin,
) -> Response {
    let me = me.user;
    let refuse = |m: String| {
        render(
            &state,
            jar,
            &me,
            Extras::error("create", m),
            StatusCode::BAD_REQUEST,
        )
    };
    let credits = match f.credits.trim() {
        "" => 0,
        c => match c.parse::<u32>() {
            Ok(n) if n <= 1_000_000 => n,
            _ => return refuse(crate::web::i18n::tr("admin.create.bad_credits").into()),
        },
    };
    let password_hash = if f.password.is_empty() {
        None
    } else {
        if crate::auth::password::check_policy(&f.password).is_err() {
            return refuse(crate::web::password_rule());
        }
        match crate::auth::password::hash_async(f.password.clone()).await {
            Ok(h) => Some(h),
            Err(e) => return server_error(&state, "hashing a password", e),
        }
    };
    let no_password = password_hash.is_none();
    let req = AdminRequest::UserAdd {
        email: f.email.trim().to_string(),
        name: Some(f.name.trim().to_string()).filter(|n| !n.is_empty()),
        password_hash,
        admin: f.admin == "yes",
        pro: f.pro == "yes",
        credits,
    };
    match super::run_as(&state, &me, req).await {
        // Without a password the person needs a link to choose one: made right away and shown
        // once, with the account.
        Ok(v) if no_password => {
            let email = v["email"].as_str().unwrap_or_default().to_string();
            let req = AdminRequest::UserResetLink {
                email: email.clone(),
            };
            match super::run_as(&state, &me, req).await {
                Ok(mut link) => {
                    crate::ops::complete_urls(&mut link, &state.public_url);
                    let url = link["reset_url"].as_str().unwrap_or_default().to_string();
                    super::created_with_link(&state, jar, &me, email, url)
                }
                Err(e) => server_error(&state, "making a reset link", e),
            }
        }
        Ok(v) => redirect(&format!(
            "/admin/users/{}?done=created",
            v["user_id"].as_str().unwrap_or_default()
        )),
        Err(OpError::Invalid(m)) => refuse(crate::web::error::sentence(&m)),
        Err(OpError::Store(e)) => server_error(&state, "creating an account", e),
    }
}

#[cfg(test)]
mod tests {
    use super::{Lang, csv_field, setting_refusal};

    /// The refusals read as the store's in English and are put in Russian.
    #[test]
    fn setting_refusals_are_translated() {
        use crate::store::settings::rule;
        let en = |key: &str| {
            let r = rule(key).unwrap();
            crate::web::i18n::scope_sync(Lang::En, || setting_refusal(key, r))
        };
        let ru = |key: &str| {
            let r = rule(key).unwrap();
            crate::web::i18n::scope_sync(Lang::Ru, || setting_refusal(key, r))
        };
        for key in [
            "prices.edit",
            "app_daily_cap",
            "signup_approval",
            "challenge_bits",
            "limits.daily",
        ] {
            assert_eq!(en(key), format!("{key} must be {}", rule(key).unwrap()));
        }
        assert_eq!(
            ru("challenge_bits"),
            "значение challenge_bits должно быть от 8 до 28"
        );
        assert_eq!(
            ru("prices.edit"),
            "значение prices.edit должно быть от 1 до 1000000 кредитов"
        );
        assert_eq!(
            ru("signup_approval"),
            "значение signup_approval должно быть 0 или 1"
        );
    }

    #[test]
    fn csv_fields_are_quoted_and_formulas_defused() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_field("-5"), "-5", "numbers stay numbers");
        assert_eq!(csv_field("+50"), "+50");
    }
}
