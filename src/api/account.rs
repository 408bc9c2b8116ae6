//! `GET /v1/me`, `GET /v1/models` and the interface map `GET /`.

use poem_openapi::payload::Json;
use poem_openapi::{Object, OpenApi};

use super::ApiTags;
use super::error::{AccountErrors, ApiError, Errors, RotateErrors, ServerErrors};
use super::security::{ApiAuth, KeyAuth};
use crate::render::{Model, Ratio};
use crate::state::AppState;
use crate::store::UserRecord;

/// The caller's profile.
#[derive(Object, Debug)]
pub struct Profile {
    pub ok: bool,
    /// `usr_` + 16 hex digits.
    pub user_id: String,
    pub email: String,
    pub name: String,
    /// Credit balance.
    pub balance: i64,
    /// PRO users get pictures without a watermark.
    pub pro: bool,
    /// Generations allowed per UTC day.
    pub daily_limit: u32,
    /// Generations charged today (UTC).
    pub daily_used: u32,
    /// The active (queued or running) job, or `null`.
    #[oai(nullable)]
    pub active_job: Option<String>,
}

/// One model with its current price.
#[derive(Object, Debug)]
pub struct ModelView {
    /// Id to send as `model`.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Names accepted for this model (case-insensitive).
    pub aliases: Vec<String>,
    /// Credits per generation.
    pub price: u32,
    /// Long side of the output in pixels.
    pub long_side: u32,
    /// What renders this model on this server: `procedural` (the built-in painter, no model
    /// weights), `diffusion:<installed model>` (the built-in Stable Diffusion engine), or
    /// `a1111`/`openai`/`comfyui` (configured inference servers).
    pub engine: String,
    /// The same in words, for people: the model's name ("SD-Turbo"), "built-in painter", or the
    /// inference server's kind.
    pub engine_name: String,
    /// What a picker shows: the display name and what draws it ("Standard · SD-Turbo").
    pub label: String,
    /// Where it is computed: `cpu`, `cuda:N` (an NVIDIA GPU, the built-in engine of the NVIDIA
    /// build), or `remote` (an inference server).
    pub device: String,
    /// Bytes of the model's weights held in memory now (on `device`); null when it is not loaded
    /// (or is not the built-in engine's).
    #[oai(nullable)]
    pub memory_bytes: Option<u64>,
    /// *(added)* The installed LoRAs a generation with this model may ask for (`loras`, or
    /// `<lora:name:weight>` in the prompt): those of its diffusion model's architecture; empty
    /// for the built-in painter and inference servers.
    pub loras: Vec<String>,
}

#[derive(Object, Debug)]
pub struct ModelList {
    pub ok: bool,
    pub models: Vec<ModelView>,
    /// Credits per edit.
    pub edit_price: u32,
    /// Accepted values of `ratio`.
    pub ratios: Vec<String>,
    /// What does edits the instruction filters cannot do exactly: `procedural` or
    /// `diffusion:<installed model>` (img2img), or an inference server.
    pub edit_engine: String,
    /// The same in words.
    pub edit_engine_name: String,
}

/// One operation of the interface.
#[derive(Object, Debug, Clone)]
pub struct EndpointInfo {
    pub method: String,
    /// Absolute path, e.g. `/api/pictor/v1/generate`.
    pub path: String,
    pub summary: String,
    /// Whether an API key is required.
    pub auth: bool,
}

/// Map of the interface.
#[derive(Object, Debug, Clone)]
pub struct ApiMap {
    pub ok: bool,
    pub name: String,
    pub version: String,
    /// The OpenAPI document.
    pub openapi_url: String,
    /// The interactive documentation page.
    pub docs_url: String,
    pub endpoints: Vec<EndpointInfo>,
}

/// The key that signs your job notifications.
#[derive(Object, Debug)]
#[oai(skip_serializing_if_is_none)]
pub struct WebhookSecret {
    pub ok: bool,
    /// `whsec_` + 43 characters. Verify a delivery by computing HMAC-SHA256 with this string as
    /// the key over `<t>.<raw body>` (`t` from `Pictor-Signature: t=…,v1=…`) and comparing the
    /// hex digest with a `v1` value in constant time; reject old `t`s to stop replays.
    pub secret: String,
    /// After a rotation: until when (Unix ms) deliveries also carry a `v1` made with the
    /// previous secret.
    pub previous_valid_until: Option<u64>,
}

pub struct AccountApi {
    pub map: ApiMap,
}

#[OpenApi(tag = "ApiTags::Account")]
impl AccountApi {
    /// Your profile
    ///
    /// Balance, PRO flag, daily photo limit and usage, and the active job.
    /// An app's access token needs the `images:read` scope.
    #[oai(path = "/v1/me", method = "get", operation_id = "me")]
    async fn me(
        &self,
        auth: ApiAuth,
        state: poem::web::Data<&AppState>,
    ) -> Result<Json<Profile>, Errors<AccountErrors>> {
        Ok(Json(profile(&state, &auth.0.user)?))
    }

    /// Your webhook signing secret
    ///
    /// The secret that signs the notifications of jobs created with a `webhook_url` (made on
    /// first use; the same for all your jobs). Stored encrypted on the server. Only with your API
    /// key: an app's access token gets 403 `insufficient_scope`.
    #[oai(
        path = "/v1/webhook-secret",
        method = "get",
        operation_id = "webhook_secret"
    )]
    async fn webhook_secret(
        &self,
        auth: KeyAuth,
        state: poem::web::Data<&AppState>,
    ) -> Result<Json<WebhookSecret>, Errors<AccountErrors>> {
        let (secrets, id) = (state.idp.secrets.clone(), auth.0.user.id);
        let secret = state
            .store
            .call(move |s| crate::jobs::webhooks::secret(s, &secrets, id))
            .await?;
        Ok(Json(secret_view(&state, id, secret)?))
    }

    /// Rotate your webhook signing secret
    ///
    /// Makes a new secret and returns it. For 24 hours deliveries are signed with both (two
    /// `v1=` values), so a receiver can switch without rejecting any. Only with your API key.
    #[oai(
        path = "/v1/webhook-secret/rotate",
        method = "post",
        operation_id = "rotate_webhook_secret"
    )]
    async fn rotate_webhook_secret(
        &self,
        auth: KeyAuth,
        state: poem::web::Data<&AppState>,
    ) -> Result<Json<WebhookSecret>, Errors<RotateErrors>> {
        let (secrets, id) = (state.idp.secrets.clone(), auth.0.user.id);
        let now = state.clock.now();
        let secret = state
            .store
            .call(move |s| crate::jobs::webhooks::rotate(s, &secrets, id, now))
            .await?;
        Ok(Json(secret_view(&state, id, secret)?))
    }

    /// Models and prices
    ///
    /// The three models with their display names, aliases and current prices. No key needed.
    #[oai(path = "/v1/models", method = "get", operation_id = "models")]
    async fn models(
        &self,
        state: poem::web::Data<&AppState>,
    ) -> Result<Json<ModelList>, Errors<ServerErrors>> {
        Ok(Json(model_list(&state)?))
    }

    /// Map of the interface
    ///
    /// Every endpoint with its method, path and summary, plus links to the OpenAPI document and
    /// the documentation page. No key needed.
    #[oai(path = "/", method = "get", operation_id = "index")]
    async fn index(&self) -> Json<ApiMap> {
        Json(self.map.clone())
    }
}

fn secret_view(state: &AppState, user_id: u64, secret: String) -> Result<WebhookSecret, ApiError> {
    let now = state.clock.now();
    let until = state
        .store
        .user(user_id)?
        .and_then(|u| u.webhook_secret_prev_until)
        .filter(|t| *t > now);
    Ok(WebhookSecret {
        ok: true,
        secret,
        previous_valid_until: until,
    })
}

/// A user's profile (shared by the API and the playground).
pub(crate) fn profile(state: &AppState, user: &UserRecord) -> Result<Profile, ApiError> {
    let now = state.clock.now();
    let settings = state.store.settings()?;
    let daily_used = state.store.daily_used(user.id, now)?;
    let active_job = state.store.active_job(user.id)?;
    Ok(Profile {
        ok: true,
        user_id: user.user_id().to_string(),
        email: user.email.clone(),
        name: user.name.clone(),
        balance: user.balance,
        pro: user.pro,
        daily_limit: settings.daily_limit_for(user.pro, user.daily_limit),
        daily_used,
        active_job: active_job.map(|j| j.to_string()),
    })
}

/// The models with their current prices (shared by the API and the playground).
pub(crate) fn model_list(state: &AppState) -> Result<ModelList, ApiError> {
    let settings = state.store.settings()?;
    let device = state.tiers.device().id;
    let loaded = state.tiers.loaded();
    let where_ = |engine: &str| -> (String, Option<u64>) {
        match engine.strip_prefix("diffusion:") {
            Some(name) => (
                device.clone(),
                loaded
                    .iter()
                    .find(|(n, _, _)| n == name)
                    .map(|(_, bytes, _)| *bytes),
            ),
            None if engine == "procedural" => ("cpu".to_string(), None),
            None => ("remote".to_string(), None),
        }
    };
    let installed = state.store.models().map_err(ApiError::internal)?;
    // The LoRAs of the architecture of the installed model an engine names.
    let loras_for = |engine: &str| -> Vec<String> {
        let arch = engine
            .strip_prefix("diffusion:")
            .and_then(|name| installed.iter().find(|r| r.name == name))
            .map(|r| r.arch);
        installed
            .iter()
            .filter(|r| r.kind == crate::models::Kind::Lora && Some(r.arch) == arch)
            .map(|r| r.name.clone())
            .collect()
    };
    Ok(ModelList {
        ok: true,
        models: Model::ALL
            .into_iter()
            .map(|m| {
                let engine = state.jobs.engine_for(m);
                let engine_name = state.tiers.engine_name(m.id(), &engine);
                let (device, memory_bytes) = where_(&engine);
                let loras = loras_for(&engine);
                ModelView {
                    id: m.id().into(),
                    name: m.display_name().into(),
                    aliases: m.aliases().iter().map(|a| a.to_string()).collect(),
                    price: settings.price(m),
                    long_side: m.long_side(),
                    label: format!("{} · {engine_name}", m.display_name()),
                    engine,
                    engine_name,
                    device,
                    memory_bytes,
                    loras,
                }
            })
            .collect(),
        edit_price: settings.price_edit,
        ratios: Ratio::ALL.iter().map(|r| r.as_str().to_string()).collect(),
        edit_engine: state.tiers.edit_engine(),
        edit_engine_name: state.tiers.engine_name("edit", &state.tiers.edit_engine()),
    })
}
