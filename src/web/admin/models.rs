//! The models page of the operator console (`/admin/models`): what draws each tier and the
//! form to change it (family presets, applied without a restart), the installed models
//! (remove, check their files), the downloads the server runs (live progress, cancel), the
//! catalogue of models known to work (licence accepted with a tick where it forbids commercial
//! use; the estimated seconds per picture on this server) and adding a model already on the
//! server's disk. Every change is an admin operation, audited as the CLI's are.

use std::collections::HashMap;

use poem::http::StatusCode;
use poem::web::cookie::CookieJar;
use poem::web::{Data, Json, Query};
use poem::{IntoResponse, Response, handler};
use serde::Deserialize;

use super::run_as;
use crate::models::{Family, Kind, KnownModel, known_models};
use crate::ops::{AdminRequest, OpError};
use crate::render::tiers::{Origin, TierState, estimate_for, estimate_seconds};
use crate::state::AppState;
use crate::store::models::{ModelRecord, PullRecord, TierMapping};
use crate::web::i18n::{tr, tr1};
use crate::web::{Admin, CheckedForm, PageError, csrf_token, page_with_status, redirect};

pub fn routes(route: poem::Route) -> poem::Route {
    use poem::{get, post};
    route
        .at("/models", get(models_get))
        .at("/models/pulls.json", get(pulls_json))
        .at("/models/pull", post(pull_post))
        .at("/models/pull/cancel", post(pull_cancel_post))
        .at("/models/map", post(map_post))
        .at("/models/unmap", post(unmap_post))
        .at("/models/remove", post(remove_post))
        .at("/models/add", post(add_post))
        .at("/models/check", post(check_post))
        .at("/models/repair", post(repair_post))
}

struct TierRow {
    tier: &'static str,
    label: String,
    /// What draws it, in words.
    drawn_by: String,
    origin: &'static str,
    from_config: bool,
    mapped: bool,
    settings: String,
    estimate: String,
    problem: Option<String>,
    /// The stored mapping's own values (the form's fields; empty: the preset's).
    form: TierMapping,
    /// The preset's values, shown as the form's placeholders.
    placeholder: HashMap<&'static str, String>,
}

struct InstalledRow {
    name: String,
    title: String,
    kind: String,
    size: String,
    source: String,
    licence: Option<(String, String)>,
    tiers: String,
    loaded: String,
    last_used: String,
    pulled: bool,
}

struct CatalogueRow {
    id: &'static str,
    title: &'static str,
    summary: &'static str,
    repo: &'static str,
    kind: String,
    download: String,
    ram: String,
    licence: &'static str,
    licence_url: &'static str,
    commercial: bool,
    estimate: String,
    installed: bool,
    downloading: bool,
    recommended: bool,
}

#[derive(askama::Template)]
#[template(path = "admin_models.html")]
struct ModelsPage {
    csrf: String,
    is_admin: bool,
    current: &'static str,
    tab: &'static str,
    notice: Option<String>,
    error: Option<String>,
    first_run: bool,
    tiers: Vec<TierRow>,
    installed: Vec<InstalledRow>,
    /// Pipelines (name, architecture) and tiny decoders, for the mapping form.
    pipelines: Vec<(String, &'static str)>,
    decoders: Vec<String>,
    catalogue: Vec<CatalogueRow>,
    pulls: bool,
    /// A download was running when the page was drawn: the script reloads the page when it
    /// ends, even if it ended before the script's first look.
    downloading: bool,
    models_dir: String,
    estimates: bool,
    /// Where the engine computes ("the CPU", or the GPU with its memory in use).
    device: String,
}

fn size_text(n: u64) -> String {
    crate::bounded::size_text(n)
}

/// `12 s`, `4 min`, `1.1 h`.
fn seconds_text(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.1} s")
    } else if s < 90.0 {
        format!("{s:.0} s")
    } else if s < 5400.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

fn estimate_text(s: Option<f64>) -> String {
    match s {
        Some(s) => tr1("admin.models.estimate", seconds_text(s)),
        None => tr("admin.models.no_estimate").to_string(),
    }
}

fn tier_label(tier: &str) -> String {
    match crate::render::Model::parse(tier) {
        Some(m) => format!("{} ({})", crate::web::i18n::model_name(m), m.id()),
        None => tr("admin.models.tier.edit").to_string(),
    }
}

fn licence_of(r: &ModelRecord) -> Option<KnownModel> {
    let repo = r.source.as_deref()?.split('@').next()?;
    crate::models::known(repo)
}

async fn page(
    state: &AppState,
    jar: &CookieJar,
    notice: Option<String>,
    error: Option<String>,
    status: StatusCode,
) -> Result<Response, PageError> {
    let store = state.store.clone();
    let (installed, stored) = store
        .call(|s| Ok::<_, crate::store::StoreError>((s.models()?, s.tiers()?)))
        .await
        .map_err(|e| PageError::server("reading the models", e))?;
    let states = state.tiers.states();
    let loaded = state.tiers.loaded();
    let used = state.tiers.last_used();
    let timed = state.tiers.last_seconds();
    let pulls = state.pulls.views();
    let recommended = crate::render::tiers::recommended();
    // The estimates measure this machine once (a few milliseconds), off the async threads;
    // the texts are made here, in the request's language.
    tokio::task::spawn_blocking(|| estimate_seconds(crate::models::Arch::Sd1, 1, 0.0, 512, true))
        .await
        .map_err(|e| PageError::server("estimating", e))?;
    let rows: Vec<TierRow> = states
        .iter()
        .map(|s| {
            let mut row = tier_row(s, &stored, &installed);
            // A picture drawn here says more than the estimate.
            if let Some(secs) = s.model.as_ref().and_then(|m| timed.get(m))
                && s.problem.is_none()
            {
                row.estimate = tr1("admin.models.measured", seconds_text(*secs));
            }
            row
        })
        .collect();
    let catalogue: Vec<CatalogueRow> = known_models()
        .into_iter()
        .map(|k| catalogue_row(k, &installed, &pulls, recommended))
        .collect();
    let installed_rows = installed
        .iter()
        .map(|r| {
            let licence = licence_of(r);
            let in_tiers: Vec<String> = states
                .iter()
                .filter(|s| s.model.as_deref() == Some(&r.name) && s.problem.is_none())
                .map(|s| tier_label(s.tier))
                .collect();
            let held: u64 = loaded
                .iter()
                .filter(|(n, _, _)| *n == r.name)
                .map(|(_, b, _)| *b)
                .sum();
            let on_gpu = loaded
                .iter()
                .any(|(n, _, d)| *n == r.name && d.starts_with("cuda"));
            InstalledRow {
                name: r.name.clone(),
                title: r.title(),
                kind: match (r.kind, r.family()) {
                    (Kind::TinyDecoder, _) => tr1(
                        "admin.models.kind.decoder",
                        match r.arch {
                            crate::models::Arch::Sdxl => "SDXL",
                            _ => "SD 1.x / 2.x",
                        },
                    ),
                    (Kind::Lora, _) => tr1("admin.models.kind.lora", r.arch.title()),
                    (_, Some(f)) => match r.role {
                        crate::models::Role::Instruct => format!("{} · InstructPix2Pix", f.title()),
                        crate::models::Role::Inpaint => {
                            format!("{} · {}", f.title(), tr("admin.models.kind.inpaint"))
                        }
                        crate::models::Role::Text => f.title().to_string(),
                    },
                    _ => r.arch.as_str().to_string(),
                },
                size: size_text(r.weight_bytes),
                // `owner/name@` and the commit's first 10 digits, as git shows them.
                source: match r.source.as_deref().and_then(|s| s.split_once('@')) {
                    Some((repo, commit)) => {
                        format!("{repo}@{}", commit.chars().take(10).collect::<String>())
                    }
                    None => r.source.clone().unwrap_or_else(|| r.path.clone()),
                },
                licence: licence.map(|k| (k.licence.name.to_string(), k.licence.url.to_string())),
                tiers: if in_tiers.is_empty() {
                    "—".into()
                } else {
                    in_tiers.join(", ")
                },
                loaded: if held > 0 && on_gpu {
                    tr1("admin.models.loaded_gpu", size_text(held))
                } else if held > 0 {
                    tr1("admin.models.loaded", size_text(held))
                } else {
                    tr("admin.models.not_loaded").to_string()
                },
                last_used: used
                    .get(&r.name)
                    .map(|ms| super::console::datetime(*ms))
                    .unwrap_or_else(|| "—".into()),
                pulled: r.source.is_some(),
            }
        })
        .collect();
    let first_run = installed.iter().all(|r| r.kind != Kind::Pipeline);
    Ok(page_with_status(
        &ModelsPage {
            csrf: csrf_token(state, jar),
            is_admin: true,
            current: "admin",
            tab: "models",
            notice,
            error,
            first_run,
            tiers: rows,
            installed: installed_rows,
            pipelines: installed
                .iter()
                .filter(|r| r.kind == Kind::Pipeline)
                .map(|r| (r.name.clone(), r.arch.as_str()))
                .collect(),
            decoders: installed
                .iter()
                .filter(|r| r.kind == Kind::TinyDecoder)
                .map(|r| r.name.clone())
                .collect(),
            catalogue,
            pulls: !pulls.is_empty(),
            downloading: pulls
                .iter()
                .any(|p| p.status == crate::models::pulls::PullStatus::Running),
            models_dir: state.config.data_dir.join("models").display().to_string(),
            estimates: estimate_seconds(crate::models::Arch::Sd1, 1, 0.0, 512, true).is_some(),
            device: device_text(&state.tiers.device()),
        },
        status,
    ))
}

/// The page's "Runs on" line: the CPU, or the GPU with its memory in use.
fn device_text(d: &pictor_core::gpu::EngineDevice) -> String {
    match &d.gpu {
        Some(g) => tr1(
            "admin.models.device.gpu",
            format!(
                "{} — {} / {}",
                g.describe(),
                size_text(g.memory_used),
                size_text(g.memory_total)
            ),
        ),
        None => tr("admin.models.device.cpu").to_string(),
    }
}

fn tier_row(s: &TierState, stored: &[(String, TierMapping)], installed: &[ModelRecord]) -> TierRow {
    let settings: Option<toml::Table> = serde_json::from_value(s.settings.clone()).ok();
    let record = s
        .model
        .as_ref()
        .and_then(|m| installed.iter().find(|r| &r.name == m));
    let text = settings
        .as_ref()
        .map(|t| {
            t.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "model" | "preset" | "tiny_vae"))
                .map(|(k, v)| match v {
                    toml::Value::String(s) => format!("{k} {s}"),
                    other => format!("{k} {other}"),
                })
                .chain(
                    t.contains_key("tiny_vae")
                        .then(|| tr("admin.models.with_decoder").to_string()),
                )
                .collect::<Vec<_>>()
                .join(" · ")
        })
        .unwrap_or_default();
    let estimate = match (&settings, record) {
        (Some(t), Some(r)) if s.problem.is_none() => estimate_text(estimate_for(t, r)),
        _ => String::new(),
    };
    let form = stored
        .iter()
        .find(|(t, _)| t == s.tier)
        .map(|(_, m)| m.clone())
        .unwrap_or_default();
    let mut placeholder = HashMap::new();
    if let Some(t) = &settings {
        for k in [
            "steps",
            "guidance",
            "sampler",
            "schedule",
            "size",
            "negative_prompt",
            "strength",
            "image_guidance",
        ] {
            if let Some(v) = t.get(k) {
                placeholder.insert(
                    k,
                    match v {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    },
                );
            }
        }
    }
    TierRow {
        tier: s.tier,
        label: tier_label(s.tier),
        drawn_by: match (&s.title, &s.problem) {
            (Some(t), None) => t.clone(),
            _ => tr("playground.engine.painter").to_string(),
        },
        origin: match s.origin {
            Origin::ConfigFile => tr("admin.models.origin.config"),
            Origin::Console => tr("admin.models.origin.console"),
            Origin::None => tr("admin.models.origin.none"),
        },
        from_config: s.origin == Origin::ConfigFile,
        mapped: s.origin == Origin::Console,
        settings: text,
        estimate,
        problem: s.problem.clone(),
        form,
        placeholder,
    }
}

fn catalogue_row(
    k: KnownModel,
    installed: &[ModelRecord],
    pulls: &[crate::models::pulls::PullView],
    recommended: &str,
) -> CatalogueRow {
    let estimate = match k.family {
        Some(f) => {
            let p = f.preset();
            estimate_text(estimate_seconds(
                f.arch(),
                p.steps,
                p.guidance,
                p.size,
                p.tiny_decoder,
            ))
        }
        None => String::new(),
    };
    CatalogueRow {
        id: k.id,
        title: k.title,
        summary: k.summary,
        repo: k.repo,
        kind: match k.family {
            Some(f) => f.title().to_string(),
            None => tr("admin.models.kind.tiny").to_string(),
        },
        download: size_text(k.download_bytes),
        ram: size_text(k.ram_bytes),
        licence: k.licence.name,
        licence_url: k.licence.url,
        commercial: k.licence.commercial,
        estimate,
        installed: installed.iter().any(|r| {
            r.name == k.id
                || r.source
                    .as_deref()
                    .is_some_and(|s| s.split('@').next() == Some(k.repo))
        }),
        downloading: pulls
            .iter()
            .any(|p| p.name == k.id && p.status == crate::models::pulls::PullStatus::Running),
        recommended: k.id == recommended,
    }
}

/// `GET /admin/models`.
#[handler]
pub async fn models_get(
    state: Data<&AppState>,
    jar: &CookieJar,
    Query(q): Query<HashMap<String, String>>,
    Admin(_me): Admin,
) -> Result<Response, PageError> {
    let notice = q.get("done").and_then(|d| {
        let key = match d.as_str() {
            "pull" => "admin.models.done.pull",
            "cancel" => "admin.models.done.cancel",
            "map" => "admin.models.done.map",
            "unmap" => "admin.models.done.unmap",
            "remove" => "admin.models.done.remove",
            "add" => "admin.models.done.add",
            "repair" => "admin.models.done.repair",
            "finished" => "admin.models.done.finished",
            _ => return None,
        };
        Some(tr(key).to_string())
    });
    page(&state, jar, notice, None, StatusCode::OK).await
}

/// `GET /admin/models/pulls.json`: the downloads, for the page's live progress.
#[handler]
pub async fn pulls_json(state: Data<&AppState>, Admin(_me): Admin) -> Response {
    let mut resp = Json(serde_json::json!({ "pulls": state.pulls.views() })).into_response();
    resp.headers_mut().insert(
        poem::http::header::CACHE_CONTROL,
        poem::http::HeaderValue::from_static("no-store"),
    );
    resp
}

async fn refuse(state: &AppState, jar: &CookieJar, m: String) -> Result<Response, PageError> {
    page(state, jar, None, Some(m), StatusCode::BAD_REQUEST).await
}

#[derive(Deserialize)]
pub struct PullForm {
    /// A catalogue id.
    #[serde(default)]
    id: String,
    #[serde(default)]
    accept_licence: Option<String>,
}

/// `POST /admin/models/pull`: downloads a catalogue model in the server.
#[handler]
pub async fn pull_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<PullForm>,
    Admin(me): Admin,
) -> Result<Response, PageError> {
    let Some(k) = crate::models::known(&f.id).filter(|k| k.id == f.id) else {
        return refuse(&state, jar, tr1("admin.models.unknown", &f.id)).await;
    };
    if !k.licence.commercial && f.accept_licence.is_none() {
        return refuse(
            &state,
            jar,
            tr1("admin.models.accept_first", k.licence.name),
        )
        .await;
    }
    let record = PullRecord {
        name: k.id.to_string(),
        repo: k.repo.to_string(),
        revision: "main".into(),
        variant: k.variant.map(str::to_string),
        started_at: state.clock.now(),
        actor: super::actor_of(&me.user),
    };
    match state.pulls.begin(&state, record).await {
        Ok(()) => Ok(redirect("/admin/models?done=pull#downloads")),
        Err(m) => refuse(&state, jar, m).await,
    }
}

#[derive(Deserialize)]
pub struct NameForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    delete_files: Option<String>,
}

/// `POST /admin/models/pull/cancel`.
#[handler]
pub async fn pull_cancel_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<NameForm>,
    Admin(_me): Admin,
) -> Result<Response, PageError> {
    if state.pulls.cancel(&f.name) {
        Ok(redirect("/admin/models?done=cancel#downloads"))
    } else {
        refuse(&state, jar, tr1("admin.models.no_pull", &f.name)).await
    }
}

#[derive(Deserialize)]
pub struct MapForm {
    #[serde(default)]
    tier: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    preset: String,
    #[serde(default)]
    steps: String,
    #[serde(default)]
    guidance: String,
    #[serde(default)]
    sampler: String,
    #[serde(default)]
    schedule: String,
    #[serde(default)]
    size: String,
    #[serde(default)]
    negative_prompt: String,
    #[serde(default)]
    tiny_vae: String,
    #[serde(default)]
    strength: String,
    #[serde(default)]
    image_guidance: String,
    #[serde(default)]
    text_weights: String,
    #[serde(default)]
    unet_weights: String,
    #[serde(default)]
    transformer: String,
    #[serde(default)]
    text_encoder_2: String,
}

/// A form field: empty is "the preset's"; otherwise it must parse.
fn field<T: std::str::FromStr>(name: &str, v: &str) -> Result<Option<T>, String> {
    let v = v.trim();
    if v.is_empty() {
        return Ok(None);
    }
    v.parse()
        .map(Some)
        .map_err(|_| tr1("admin.models.bad_number", format!("{name}: {v:?}")))
}

fn text(v: &str) -> Option<String> {
    let v = v.trim();
    (!v.is_empty()).then(|| v.to_string())
}

/// `POST /admin/models/map`: what draws a tier (checked as the CLI's `models map` is).
#[handler]
pub async fn map_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<MapForm>,
    Admin(me): Admin,
) -> Result<Response, PageError> {
    // The form's one T5 field is text_encoder_2 in a FLUX folder, text_encoder_3 in an SD3 one.
    let sd3 = installed_model(&state, f.model.trim())
        .await?
        .is_some_and(|r| r.arch == crate::models::Arch::Sd3);
    let mapping = (|| -> Result<TierMapping, String> {
        Ok(TierMapping {
            model: f.model.trim().to_string(),
            preset: text(&f.preset),
            steps: field("steps", &f.steps)?,
            guidance: field("guidance", &f.guidance)?,
            sampler: text(&f.sampler),
            schedule: text(&f.schedule),
            size: field("size", &f.size)?,
            negative_prompt: text(&f.negative_prompt),
            tiny_vae: text(&f.tiny_vae),
            strength: field("strength", &f.strength)?,
            image_guidance: field("image_guidance", &f.image_guidance)?,
            timestep_spacing: None,
            text_weights: text(&f.text_weights),
            unet_weights: text(&f.unet_weights),
            transformer: text(&f.transformer),
            text_encoder_2: text(&f.text_encoder_2).filter(|_| !sd3),
            text_encoder_3: text(&f.text_encoder_2).filter(|_| sd3),
            updated_at: 0,
        })
    })();
    let mapping = match mapping {
        Ok(m) => m,
        Err(e) => return refuse(&state, jar, e).await,
    };
    if mapping.guidance.is_some_and(|g: f64| !g.is_finite())
        || mapping.strength.is_some_and(|g: f64| !g.is_finite())
        || mapping.image_guidance.is_some_and(|g: f64| !g.is_finite())
    {
        return refuse(&state, jar, tr1("admin.models.bad_number", "NaN")).await;
    }
    let req = AdminRequest::ModelMap {
        tier: f.tier.clone(),
        mapping: Box::new(mapping),
    };
    match run_as(&state, &me.user, req).await {
        Ok(_) => Ok(redirect("/admin/models?done=map")),
        Err(OpError::Invalid(m)) => refuse(&state, jar, m).await,
        Err(OpError::Store(e)) => Err(PageError::server("mapping a tier", e)),
    }
}

#[derive(Deserialize)]
pub struct TierForm {
    #[serde(default)]
    tier: String,
}

/// `POST /admin/models/unmap`.
#[handler]
pub async fn unmap_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<TierForm>,
    Admin(me): Admin,
) -> Result<Response, PageError> {
    match run_as(&state, &me.user, AdminRequest::ModelUnmap { tier: f.tier }).await {
        Ok(_) => Ok(redirect("/admin/models?done=unmap")),
        Err(OpError::Invalid(m)) => refuse(&state, jar, m).await,
        Err(OpError::Store(e)) => Err(PageError::server("unmapping a tier", e)),
    }
}

/// `POST /admin/models/remove`: unregisters a model; with `delete_files`, deletes the files of
/// one downloaded into the data folder.
#[handler]
pub async fn remove_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<NameForm>,
    Admin(me): Admin,
) -> Result<Response, PageError> {
    let removed = match run_as(
        &state,
        &me.user,
        AdminRequest::ModelRemove {
            name: f.name.clone(),
        },
    )
    .await
    {
        Ok(v) => v,
        Err(OpError::Invalid(m)) => return refuse(&state, jar, m).await,
        Err(OpError::Store(e)) => return Err(PageError::server("removing a model", e)),
    };
    if f.delete_files.is_some() {
        let path =
            std::path::PathBuf::from(removed["removed"]["path"].as_str().unwrap_or_default());
        let root = std::fs::canonicalize(state.config.data_dir.join("models")).ok();
        let inside = root
            .as_ref()
            .is_some_and(|r| path.starts_with(r) && path != *r);
        if inside {
            let p = path.clone();
            let deleted = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&p)).await;
            if !matches!(deleted, Ok(Ok(()))) {
                tracing::warn!(path = %path.display(), "could not delete a removed model's files");
            }
        }
    }
    Ok(redirect("/admin/models?done=remove"))
}

#[derive(Deserialize)]
pub struct AddForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    path: String,
}

/// `POST /admin/models/add`: registers a folder or `.safetensors` file on the server's disk.
#[handler]
pub async fn add_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<AddForm>,
    Admin(me): Admin,
) -> Result<Response, PageError> {
    let raw = f.path.trim().to_string();
    let path = match tokio::task::spawn_blocking(move || std::fs::canonicalize(&raw)).await {
        Ok(Ok(p)) => p,
        _ => return refuse(&state, jar, tr1("admin.models.no_path", f.path.trim())).await,
    };
    // A single file's hash as AUTOMATIC1111 records it (a checkpoint's SHA-256, a LoRA's
    // addnet hash), as `pictor models add` takes it.
    let sha256 = if path.is_file() {
        let p = path.clone();
        tokio::task::spawn_blocking(move || crate::models::a1111_hash(&p))
            .await
            .ok()
            .and_then(Result::ok)
    } else {
        None
    };
    let req = AdminRequest::ModelAdd {
        name: f.name.trim().to_string(),
        path: path.display().to_string(),
        source: None,
        sha256,
        lora_for: None,
    };
    match run_as(&state, &me.user, req).await {
        Ok(_) => Ok(redirect("/admin/models?done=add")),
        Err(OpError::Invalid(m)) => refuse(&state, jar, m).await,
        Err(OpError::Store(e)) => Err(PageError::server("adding a model", e)),
    }
}

/// The installed model named `name`, if any.
async fn installed_model(state: &AppState, name: &str) -> Result<Option<ModelRecord>, PageError> {
    let name = name.to_owned();
    let models = state
        .store
        .call(|s| s.models())
        .await
        .map_err(|e| PageError::server("reading the models", e))?;
    Ok(models.into_iter().find(|r| r.name == name))
}

/// `POST /admin/models/check`: re-verifies a downloaded model's files against the checksums
/// recorded when it was pulled (SHA-256 of LFS files, git blob ids of the others).
#[handler]
pub async fn check_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<NameForm>,
    Admin(_me): Admin,
) -> Result<Response, PageError> {
    let Some(record) = installed_model(&state, &f.name).await? else {
        return refuse(&state, jar, tr1("admin.models.unknown", &f.name)).await;
    };
    let dir = std::path::PathBuf::from(&record.path);
    let result = tokio::task::spawn_blocking(move || crate::models::hub::verify(&dir))
        .await
        .map_err(|e| PageError::server("checking files", e))?;
    match result {
        Ok(n) => {
            page(
                &state,
                jar,
                Some(tr1(
                    "admin.models.check.ok",
                    format!("{} ({n})", record.name),
                )),
                None,
                StatusCode::OK,
            )
            .await
        }
        Err(m) => refuse(&state, jar, m).await,
    }
}

/// `POST /admin/models/repair`: downloads again what no longer matches its checksum.
#[handler]
pub async fn repair_post(
    state: Data<&AppState>,
    jar: &CookieJar,
    CheckedForm(f): CheckedForm<NameForm>,
    Admin(me): Admin,
) -> Result<Response, PageError> {
    let Some(record) = installed_model(&state, &f.name).await? else {
        return refuse(&state, jar, tr1("admin.models.unknown", &f.name)).await;
    };
    match state
        .pulls
        .repair(&state, &record, super::actor_of(&me.user))
        .await
    {
        Ok(()) => Ok(redirect("/admin/models?done=repair#downloads")),
        Err(m) => refuse(&state, jar, m).await,
    }
}

/// The family presets offered by the mapping form.
pub fn presets() -> Vec<(&'static str, &'static str)> {
    Family::ALL.iter().map(|f| (f.id(), f.title())).collect()
}

/// The live-progress script's texts in the page's language, as a JSON object (the list's
/// `data-texts`).
pub fn script_texts() -> String {
    let keys = [
        ("cancel", "admin.models.js.cancel"),
        ("running", "admin.models.js.running"),
        ("done", "admin.models.js.done"),
        ("failed", "admin.models.js.failed"),
        ("cancelled", "admin.models.js.cancelled"),
        ("left", "admin.models.js.left"),
        ("starting", "admin.models.js.starting"),
    ];
    let map: serde_json::Map<String, serde_json::Value> = keys
        .into_iter()
        .map(|(k, key)| (k.to_string(), tr(key).into()))
        .collect();
    serde_json::Value::Object(map).to_string()
}
