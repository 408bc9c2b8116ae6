//! `/playground`: the web playground, the first page a signed-in person sees. They type a prompt
//! (or upload a photo with an instruction), watch the job go queued → running → done, and keep a
//! gallery of their pictures.
//!
//! The page is server-rendered (prices, balance and limits are visible before any script runs);
//! `assets/static/playground.js` drives it through the JSON endpoints under `/playground/api/`.
//! Those authenticate with the session cookie instead of an API key, and otherwise are the image
//! API: unlike the rest of `idp`, this file calls into `crate::api` on purpose, so validation,
//! prices, credits, limits, the job engine and the `{ok:false,error_code,error}` error bodies are
//! the very same code, not a copy that could drift.
//!
//! State-changing endpoints need the page's CSRF token in an `X-CSRF-Token` header (the double
//! submit of the pages: it must equal the HttpOnly CSRF cookie) and refuse foreign origins.

use poem::http::{HeaderValue, StatusCode, header};
use poem::web::cookie::CookieJar;
use poem::web::{Data, Multipart, Path, Query};
use poem::{Body, IntoResponse, Request, Response, Route, get, handler, post};
use poem_openapi::Object;
use poem_openapi::payload::Json;
use serde::Deserialize;

use crate::api::MAX_BODY_BYTES;
use crate::api::account::profile;
use crate::api::body::{FromJsonBody, is_json_content_type, json_object};
use crate::api::error::{ApiError, codes};
use crate::api::images::{GenerateInput, JobCreated, check_upload_size, edit_prompt, no_photo};
use crate::api::jobs::{JobView, job_for_user, job_view};
use crate::api::{MAX_IMAGE_BYTES, MAX_PROMPT_CHARS};
use crate::jobs::service::{self, Snapshot};
use crate::render::{Model, Ratio};
use crate::state::AppState;
use crate::store::{JobId, JobRecord, JobStatus, UserRecord};
use crate::web::i18n::{self, Plural};
use crate::web::{csrf_matches, csrf_token, origin_ok, page};

/// Pictures per gallery page unless the page asks for another count.
const GALLERY_PAGE: usize = 60;
/// Most pictures one gallery request may ask for.
const GALLERY_MAX: usize = 100;
/// Largest JSON body of a generate request: a 4000-character prompt fully `\u`-escaped
/// (12 bytes for a character outside the BMP) plus the other fields fits well under this.
const MAX_JSON_BYTES: usize = 64 * 1024;

pub fn routes() -> Route {
    Route::new()
        .at("/", get(playground_get))
        .at("/api/me", get(me_get))
        .at("/api/gallery", get(gallery_get))
        .at("/api/jobs/:job_id", get(job_get))
        .at("/api/jobs/:job_id/cancel", post(cancel_post))
        .at("/api/generate", post(generate_post))
        .at("/api/edit", post(edit_post))
}

struct ModelOption {
    id: &'static str,
    name: &'static str,
    price: u32,
    /// "credits" for the price, in the page's language.
    unit: &'static str,
    long_side: u32,
    /// What draws it, in words ("SD-Turbo", "built-in painter").
    engine: String,
}

struct RatioOption {
    id: &'static str,
    label: &'static str,
}

#[derive(askama::Template)]
#[template(path = "playground.html")]
struct PlaygroundPage {
    csrf: String,
    is_admin: bool,
    current: &'static str,
    models: Vec<ModelOption>,
    ratios: Vec<RatioOption>,
    edit_price: u32,
    balance: i64,
    pro: bool,
    daily_limit: u32,
    daily_used: u32,
    active_job: String,
    max_prompt: usize,
    /// The words after the numbers ("credits", "pictures"), agreeing with them.
    balance_unit: &'static str,
    gen_unit: &'static str,
    edit_unit: &'static str,
    daily_unit: &'static str,
    /// An administrator of a server where every tier is the painter: the first-run card, with
    /// the model recommended for this build.
    first_run: Option<String>,
    /// The texts of the script, as a JSON object (the page's `data-texts`, escaped as any
    /// attribute).
    texts: String,
}

fn ratio_label(r: Ratio) -> &'static str {
    match r.as_str() {
        "1:1" => i18n::tr("playground.ratio.square"),
        "16:9" => i18n::tr("playground.ratio.wide"),
        "9:16" => i18n::tr("playground.ratio.tall"),
        "3:2" => i18n::tr("playground.ratio.landscape_3_2"),
        "2:3" => i18n::tr("playground.ratio.portrait_2_3"),
        "4:3" => i18n::tr("playground.ratio.landscape_4_3"),
        "3:4" => i18n::tr("playground.ratio.portrait_3_4"),
        "auto" => i18n::tr("playground.ratio.auto"),
        other => other,
    }
}

/// "picture" or "pictures" after "of `n`".
fn pictures_of_word(n: i64) -> &'static str {
    match i18n::plural(n) {
        Plural::One => i18n::tr("playground.js.pictures_of.one"),
        Plural::Few => i18n::tr("playground.js.pictures_of.few"),
        Plural::Many => i18n::tr("playground.js.pictures_of.many"),
    }
}

/// The catalogue's `playground.js.*` texts in the request's language, keyed without the
/// prefix, as a JSON object. The page carries it in an attribute rather than a
/// `<script type="application/json">`: the page has no inline script elements at all.
fn script_texts() -> String {
    const PREFIX: &str = "playground.js.";
    let lang = i18n::current();
    let texts: serde_json::Map<String, serde_json::Value> = i18n::entries()
        .filter_map(|(key, _, _)| {
            let short = key.strip_prefix(PREFIX)?;
            Some((short.to_owned(), i18n::tr_in(lang, key).into()))
        })
        .collect();
    serde_json::Value::Object(texts).to_string()
}

/// `GET /playground`: the page, or sign-in first.
#[handler]
pub async fn playground_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    super::Member(s): super::Member,
) -> Response {
    let user = s.user;
    let now = state.clock.now();
    let (settings, daily_used, active) = match (
        state.store.settings(),
        state.store.daily_used(user.id, now),
        state.store.active_job(user.id),
    ) {
        (Ok(s), Ok(d), Ok(a)) => (s, d, a),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            return super::server_error(&state, "reading the playground's settings", e);
        }
    };
    let daily_limit = settings.daily_limit_for(user.pro, user.daily_limit);
    page(&PlaygroundPage {
        csrf: csrf_token(&state, jar),
        is_admin: user.admin,
        current: "playground",
        models: Model::ALL
            .into_iter()
            .map(|m| {
                let engine = state.jobs.engine_for(m);
                ModelOption {
                    id: m.id(),
                    name: i18n::model_name(m),
                    price: settings.price(m),
                    unit: i18n::credits(settings.price(m)),
                    long_side: m.long_side(),
                    engine: match engine.as_str() {
                        "procedural" => i18n::tr("playground.engine.painter").to_string(),
                        other => state.tiers.engine_name(m.id(), other),
                    },
                }
            })
            .collect(),
        first_run: (user.admin
            && Model::ALL
                .into_iter()
                .all(|m| state.jobs.engine_for(m) == "procedural"))
        .then(|| {
            i18n::tr("playground.firstrun.text")
                .replace("{}", crate::render::tiers::recommended_title())
        }),
        ratios: Ratio::ALL
            .into_iter()
            .map(|r| RatioOption {
                id: r.as_str(),
                label: ratio_label(r),
            })
            .collect(),
        edit_price: settings.price_edit,
        balance: user.balance,
        pro: user.pro,
        daily_limit,
        daily_used,
        active_job: active.map(|j| j.to_string()).unwrap_or_default(),
        max_prompt: MAX_PROMPT_CHARS,
        balance_unit: i18n::credits(user.balance),
        gen_unit: i18n::credits(Model::ALL.first().map_or(0, |m| settings.price(*m))),
        edit_unit: i18n::credits(settings.price_edit),
        daily_unit: pictures_of_word(daily_limit.into()),
        texts: script_texts(),
    })
}

/// The JSON answer of an endpoint: the value, or the image API's error body. Never cached (it is
/// one person's data).
fn reply<T: IntoResponse>(result: Result<T, ApiError>) -> Response {
    let mut resp = match result {
        Ok(v) => v.into_response(),
        Err(e) => e.into_response(),
    };
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// The signed-in user, or 401 `unauthorized` (the session is the credential here: a
/// [`crate::auth::Principal`] of kind `Session`, which may do what the person may).
fn session_user(state: &AppState, jar: &CookieJar) -> Result<UserRecord, ApiError> {
    crate::auth::session::principal(state, jar)
        .map(|p| p.user)
        .ok_or_else(|| {
            ApiError::new(
                codes::UNAUTHORIZED,
                "not signed in: sign in at /login (scripts use an API key with /api/pictor/)",
            )
        })
}

/// CSRF defence of the state-changing endpoints: a request from another site is refused by its
/// `Origin` (exact match, `null` refused) and `Sec-Fetch-Site`, and the page's token must come
/// back in `X-CSRF-Token`: the session-bound token of the pages (`web::csrf_token`). A foreign
/// page can neither read the token nor set the header without a CORS preflight, which Pictor
/// never grants.
fn check_csrf(state: &AppState, req: &Request, jar: &CookieJar) -> Result<(), ApiError> {
    let refuse = |m: &str| ApiError::new(codes::CSRF_FAILED, m);
    if !origin_ok(state, req) {
        return Err(refuse("cross-origin request refused"));
    }
    let sent = req.header("x-csrf-token").unwrap_or_default();
    if csrf_matches(state, jar, sent) {
        Ok(())
    } else {
        Err(refuse(
            "missing or wrong CSRF token: reload the page and try again",
        ))
    }
}

/// 202 with the image API's creation body; `poll_url` is the playground's own job endpoint.
fn created(state: &AppState, job: &JobRecord) -> impl IntoResponse + use<> {
    let id = job.job_id();
    (
        StatusCode::ACCEPTED,
        Json(JobCreated {
            ok: true,
            job_id: id.to_string(),
            status: job.status.as_str().to_string(),
            cost: job.cost,
            poll_url: format!("{}/playground/api/jobs/{id}", state.public_url),
        }),
    )
}

/// `GET /playground/api/me`: the profile, as `GET /api/pictor/v1/me`.
#[handler]
async fn me_get(state: Data<&AppState>, jar: &CookieJar) -> Response {
    reply(session_user(&state, jar).and_then(|u| profile(&state, &u).map(Json)))
}

#[derive(Deserialize)]
struct WaitQuery {
    wait: Option<String>,
    wait_for: Option<String>,
    since: Option<String>,
}

/// `POST /playground/api/jobs/{job_id}/cancel`: as `POST /api/pictor/v1/jobs/{id}/cancel`.
#[handler]
async fn cancel_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(job_id): Path<String>,
) -> Response {
    let result = async {
        let user = session_user(&state, jar)?;
        check_csrf(&state, req, jar)?;
        let snap = service::cancel(&state, user.id, &job_id).await?;
        Ok(Json(job_view(&state, &snap)))
    }
    .await;
    reply(result)
}

/// `GET /playground/api/jobs/{job_id}?wait=1..90&wait_for=finish|progress&since=…`: the job, as
/// `GET /api/pictor/v1/jobs/{id}`.
#[handler]
async fn job_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Path(job_id): Path<String>,
    Query(q): Query<WaitQuery>,
) -> Response {
    let result = async {
        let user = session_user(&state, jar)?;
        job_for_user(
            &state,
            user.id,
            &job_id,
            q.wait.as_deref(),
            q.wait_for.as_deref(),
            q.since.map(|s| s.chars().take(64).collect()),
        )
        .await
        .map(Json)
    }
    .await;
    reply(result)
}

/// `POST /playground/api/generate`: the JSON body of `POST /api/pictor/v1/generate`, validated
/// and charged by the same code.
#[handler]
async fn generate_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    body: Body,
) -> Response {
    let result = async {
        let user = session_user(&state, jar)?;
        check_csrf(&state, req, jar)?;
        if !req.content_type().is_some_and(is_json_content_type) {
            return Err(ApiError::new(
                codes::INVALID_REQUEST,
                "send the body as JSON with `Content-Type: application/json`",
            ));
        }
        let bytes = body
            .into_bytes_limit(MAX_JSON_BYTES)
            .await
            .map_err(|e| match e {
                poem::error::ReadBodyError::PayloadTooLarge => ApiError::new(
                    codes::INVALID_PROMPT,
                    format!("the body is over {MAX_JSON_BYTES} bytes; a prompt is at most {MAX_PROMPT_CHARS} characters"),
                ),
                other => ApiError::new(
                    codes::INVALID_REQUEST,
                    format!("could not read the request body: {other}"),
                ),
            })?;
        let input = GenerateInput::from_json_body(&json_object(&bytes)?)?;
        let job = service::create_generate(&state, user.id, None, input.0).await?;
        Ok(created(&state, &job))
    }
    .await;
    reply(result)
}

enum Source {
    Upload(Vec<u8>),
    Job(String),
}

/// What an edit form carried.
#[derive(Default)]
struct EditParts {
    prompt: Option<String>,
    /// The uploaded photo, `Err(size read)` when it was over the limit.
    upload: Option<Result<Vec<u8>, usize>>,
    /// A finished job of the user whose picture is to be edited, instead of an upload.
    source_job: Option<String>,
}

/// Reads one multipart field, keeping at most `limit` bytes: `Ok(Err(n))` when it is longer.
async fn read_field(
    field: poem::web::Field,
    limit: usize,
) -> std::io::Result<Result<Vec<u8>, usize>> {
    use tokio::io::AsyncReadExt;
    let reader = field.into_async_read();
    tokio::pin!(reader);
    let mut buf = Vec::new();
    reader.take(limit as u64 + 1).read_to_end(&mut buf).await?;
    Ok(if buf.len() > limit {
        Err(buf.len())
    } else {
        Ok(buf)
    })
}

async fn read_edit_form(mut multipart: Multipart) -> Result<EditParts, ApiError> {
    let broken = |e: &dyn std::fmt::Display| {
        ApiError::new(
            codes::INVALID_IMAGE,
            format!("could not read the multipart body: {e}"),
        )
    };
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).map_err(|e| broken(&e));
    let mut parts = EditParts::default();
    // A browser sends three fields; a few more are tolerated and skipped.
    for _ in 0..16 {
        let Some(field) = multipart.next_field().await.map_err(|e| broken(&e))? else {
            return Ok(parts);
        };
        match field.name().unwrap_or_default() {
            "image" | "photo" | "file" if parts.upload.is_none() => {
                // A file input left empty is sent as a part with an empty file name.
                let named = field.file_name().is_some_and(|n| !n.is_empty());
                let read = read_field(field, MAX_IMAGE_BYTES)
                    .await
                    .map_err(|e| broken(&e))?;
                if named || read.as_ref().map_or(true, |b| !b.is_empty()) {
                    parts.upload = Some(read);
                }
            }
            "prompt" => match read_field(field, 4 * MAX_PROMPT_CHARS)
                .await
                .map_err(|e| broken(&e))?
            {
                Ok(b) => parts.prompt = Some(text(b)?),
                Err(_) => {
                    return Err(ApiError::new(
                        codes::INVALID_PROMPT,
                        format!("`prompt` is over {MAX_PROMPT_CHARS} characters"),
                    ));
                }
            },
            "source_job" => {
                if let Ok(b) = read_field(field, 64).await.map_err(|e| broken(&e))? {
                    let id = text(b)?.trim().to_string();
                    parts.source_job = (!id.is_empty()).then_some(id);
                }
            }
            _ => drop(field),
        }
    }
    Ok(parts)
}

/// The picture of one of the user's finished jobs, as the source of an edit.
async fn source_picture(state: &AppState, user_id: u64, job_id: &str) -> Result<Vec<u8>, ApiError> {
    let not_found = || {
        ApiError::new(
            codes::JOB_NOT_FOUND,
            "no such picture: `source_job` must be one of your finished jobs whose picture is kept",
        )
    };
    let id = JobId::parse(job_id).ok_or_else(not_found)?;
    let job = state
        .store
        .job(id)?
        .filter(|j| j.user_id == user_id && has_picture(j))
        .ok_or_else(not_found)?;
    let token = job
        .photo_token
        .filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(not_found)?;
    let path = state.config.images_dir().join(format!("{token}.png"));
    match tokio::fs::read(&path).await {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(not_found()),
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// `POST /playground/api/edit`: the multipart form of `POST /api/pictor/v1/edit`, plus
/// `source_job` (one of the user's finished jobs) in place of an upload, for "Edit this".
#[handler]
async fn edit_post(
    req: &Request,
    state: Data<&AppState>,
    jar: &CookieJar,
    multipart: poem::Result<Multipart>,
) -> Response {
    let result = async {
        let user = session_user(&state, jar)?;
        check_csrf(&state, req, jar)?;
        let declared = req
            .header(header::CONTENT_LENGTH)
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return Err(ApiError::new(
                codes::IMAGE_TOO_LARGE,
                "the request body is over 20 MiB",
            ));
        }
        let multipart = multipart.map_err(|_| {
            ApiError::new(
                codes::INVALID_IMAGE,
                "send the photo as multipart/form-data (field `image`, `photo` or `file`, or `source_job`) with a `prompt` field",
            )
        })?;
        let EditParts {
            prompt,
            upload,
            source_job,
        } = read_edit_form(multipart).await?;
        let prompt = edit_prompt(prompt.as_deref())?;
        let source = match (upload, source_job) {
            (Some(Ok(bytes)), _) => Source::Upload(bytes),
            (Some(Err(_)), _) => {
                return Err(ApiError::new(
                    codes::IMAGE_TOO_LARGE,
                    format!("the photo is over 20 MiB ({MAX_IMAGE_BYTES} bytes)"),
                ));
            }
            (None, Some(id)) => Source::Job(id),
            (None, None) => return Err(no_photo()),
        };
        // Cheap checks first, so a busy or broke user does not make us decode 20 MB.
        service::precheck_edit(&state, &user)?;
        let bytes = match source {
            Source::Upload(bytes) => bytes,
            Source::Job(id) => source_picture(&state, user.id, &id).await?,
        };
        check_upload_size(bytes.len())?;
        let job = service::create_edit(&state, user.id, None, prompt, bytes, None, None).await?;
        Ok(created(&state, &job))
    }
    .await;
    let mut resp = reply(result);
    if resp.status() == StatusCode::PAYLOAD_TOO_LARGE {
        // The rest of the body may still be in flight: this connection cannot be reused.
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

fn has_picture(job: &JobRecord) -> bool {
    job.status == JobStatus::Done && job.photo_token.is_some() && job.photo_deleted_at.is_none()
}

/// One page of the gallery.
#[derive(Object)]
struct GalleryPage {
    ok: bool,
    /// The user's finished pictures, newest first (the image API's job view).
    pictures: Vec<JobView>,
    /// Pass as `before` to get the next (older) page; absent on the last page.
    next_before: Option<String>,
}

#[derive(Deserialize)]
struct GalleryQuery {
    before: Option<String>,
    limit: Option<String>,
}

/// `GET /playground/api/gallery?before=job_…&limit=1..100`: the user's pictures, newest first.
#[handler]
async fn gallery_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Query(q): Query<GalleryQuery>,
) -> Response {
    let result = async {
        let user = session_user(&state, jar)?;
        let limit = match q.limit.as_deref() {
            None => GALLERY_PAGE,
            Some(l) => match l.trim().parse::<usize>() {
                Ok(n @ 1..=GALLERY_MAX) => n,
                _ => {
                    return Err(ApiError::new(
                        codes::INVALID_REQUEST,
                        format!("`limit` must be an integer from 1 to {GALLERY_MAX}"),
                    ));
                }
            },
        };
        let before = match q.before.as_deref().filter(|b| !b.is_empty()) {
            None => None,
            Some(b) => Some(JobId::parse(b).ok_or_else(|| {
                ApiError::new(
                    codes::INVALID_REQUEST,
                    "`before` must be a job id from `next_before`",
                )
            })?),
        };
        let uid = user.id;
        let (jobs, more) = state
            .store
            .call(move |s| s.user_jobs_page(uid, before, limit, has_picture))
            .await?;
        let balance = state.store.user(uid)?.map_or(user.balance, |u| u.balance);
        let next_before = more
            .then(|| jobs.last().map(|j| j.job_id().to_string()))
            .flatten();
        Ok(Json(GalleryPage {
            ok: true,
            pictures: jobs
                .into_iter()
                .map(|job| {
                    job_view(
                        &state,
                        &Snapshot {
                            job,
                            balance,
                            live: None,
                        },
                    )
                })
                .collect(),
            next_before,
        }))
    }
    .await;
    reply(result)
}
