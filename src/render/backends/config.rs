//! The backends' configuration: which model (or edits) an inference server serves, and how to
//! talk to it. Parsed from TOML with unknown keys refused by name.
//!
//! ```toml
//! [models.artist]            # a model id or alias: fast, artist, 0.2plus, pro, premium…
//! kind = "a1111"             # "openai" (OpenAI-compatible images API) or "a1111" (AUTOMATIC1111/Forge)
//! url = "http://gpu-box:7860"
//! model = "sdxl_base_1.0"    # the server's own model name (optional)
//! timeout_secs = 180
//! retries = 2
//! backoff_ms = 1000
//!
//! [edit]
//! kind = "openai"
//! url = "http://127.0.0.1:8000"
//! api_key_env = "OPENAI_API_KEY"   # the key is read from this environment variable
//! model = "gpt-image-1"
//!
//! [models."0.2plus"]
//! kind = "comfyui"
//! urls = ["http://gpu1:8188", "http://gpu2:8188"]   # a pool: least busy healthy one
//! model = "sd_xl_base_1.0.safetensors"               # ckpt_name of the bundled workflow
//! workflow = "/etc/pictor/sdxl-api.json"             # or an exported API-format workflow
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::render::Model;

/// The protocol a backend speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum BackendKind {
    /// `POST /v1/images/generations` (JSON, `b64_json`) and `POST /v1/images/edits` (multipart).
    #[serde(rename = "openai", alias = "open_ai", alias = "openai-compatible")]
    OpenAi,
    /// `POST /sdapi/v1/txt2img` and `/sdapi/v1/img2img` (AUTOMATIC1111, Forge, SD.Next).
    #[serde(
        rename = "a1111",
        alias = "automatic1111",
        alias = "forge",
        alias = "sdapi"
    )]
    A1111,
    /// `POST /prompt` with an API-format workflow, `/ws` progress, `/history`, `/view` (ComfyUI).
    #[serde(rename = "comfyui", alias = "comfy")]
    ComfyUi,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::OpenAi => "openai",
            BackendKind::A1111 => "a1111",
            BackendKind::ComfyUi => "comfyui",
        }
    }
}

fn default_timeout() -> u64 {
    120
}
fn default_retries() -> u32 {
    2
}
fn default_backoff() -> u64 {
    500
}
fn default_down_after() -> u32 {
    1
}
fn default_probe() -> u64 {
    15
}

/// One inference server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    pub kind: BackendKind,
    /// Base URL, e.g. `http://127.0.0.1:7860` (a trailing `/v1` is accepted for OpenAI).
    #[serde(default)]
    pub url: String,
    /// Several servers of the same kind instead of `url`: a pool (see `pool`).
    #[serde(default)]
    pub urls: Vec<String>,
    /// Pools: failed calls in a row before an endpoint is marked down.
    #[serde(default = "default_down_after")]
    pub down_after: u32,
    /// Pools: seconds a down endpoint rests before it is probed again.
    #[serde(default = "default_probe")]
    pub probe_secs: u64,
    /// ComfyUI: an API-format workflow file with placeholders (see `comfyui`); by default the
    /// bundled txt2img (models) or img2img (edits) graph.
    #[serde(default)]
    pub workflow: Option<String>,
    /// The workflow file's document, read when the configuration is parsed.
    #[serde(skip)]
    pub workflow_doc: Option<std::sync::Arc<serde_json::Value>>,
    /// Name of the environment variable holding the API key (sent as `Authorization: Bearer`;
    /// for AUTOMATIC1111 a `user:password` value is sent as HTTP basic auth).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The server's model name (`model` for OpenAI, `sd_model_checkpoint` for AUTOMATIC1111,
    /// the checkpoint's file name — `ckpt_name`, `{{model}}` — for ComfyUI).
    #[serde(default)]
    pub model: Option<String>,
    /// Seconds one attempt may take.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Further attempts after a timeout, a connection error, a 5xx or an overload answer.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// Wait before the first retry; doubled for each further one (at most 30 s).
    #[serde(default = "default_backoff")]
    pub backoff_ms: u64,
    /// AUTOMATIC1111: sampling steps.
    #[serde(default)]
    pub steps: Option<u32>,
    /// AUTOMATIC1111: negative prompt.
    #[serde(default)]
    pub negative_prompt: Option<String>,
    /// AUTOMATIC1111 img2img: how far an edit may move from the source (0..1, default 0.55).
    #[serde(default)]
    pub denoising_strength: Option<f32>,
    /// OpenAI: the `size` to ask for (e.g. "1024x1024"); by default the exact output size.
    #[serde(default)]
    pub size: Option<String>,
}

/// Which backend serves what. Models not listed use the built-in renderer.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendsConfig {
    /// By model id (aliases are accepted and normalised to the id).
    #[serde(default)]
    pub models: BTreeMap<String, BackendConfig>,
    /// Edits.
    #[serde(default)]
    pub edit: Option<BackendConfig>,
}

impl BackendConfig {
    /// The servers: `urls`, or `url` alone.
    pub fn endpoints(&self) -> Vec<String> {
        if self.urls.is_empty() {
            vec![self.url.clone()]
        } else {
            self.urls.clone()
        }
    }
}

impl BackendsConfig {
    pub fn for_model(&self, model: Model) -> Option<&BackendConfig> {
        self.models.get(model.id())
    }

    pub fn is_empty(&self) -> bool {
        self.models.is_empty() && self.edit.is_none()
    }
}

/// Parses and checks a backends TOML document. Unknown keys, unknown models, bad URLs and
/// out-of-range numbers are refused with a message that names the key.
pub fn parse_backends_toml(text: &str) -> Result<BackendsConfig, String> {
    let raw: BackendsConfig = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut out = BackendsConfig {
        models: BTreeMap::new(),
        edit: None,
    };
    for (name, cfg) in raw.models {
        let model = Model::parse(&name).ok_or_else(|| {
            format!("unknown model `{name}` in [models]: use fast, artist or 0.2plus")
        })?;
        let cfg = check(cfg, &format!("models.{name}"), false)?;
        if out.models.insert(model.id().to_owned(), cfg).is_some() {
            return Err(format!(
                "model `{}` is configured twice in [models]",
                model.id()
            ));
        }
    }
    if let Some(cfg) = raw.edit {
        out.edit = Some(check(cfg, "edit", true)?);
    }
    Ok(out)
}

fn check(mut cfg: BackendConfig, at: &str, edit: bool) -> Result<BackendConfig, String> {
    match (cfg.url.trim().is_empty(), cfg.urls.is_empty()) {
        (true, true) => return Err(format!("{at} needs `url` (or `urls` for a pool)")),
        (false, false) => return Err(format!("{at}: give `url` or `urls`, not both")),
        _ => {}
    }
    let mut seen = std::collections::HashSet::new();
    for url in cfg.endpoints() {
        let url = url.trim();
        let key = if cfg.urls.is_empty() { "url" } else { "urls" };
        let parsed = url::Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
        let Some(parsed) = parsed else {
            return Err(format!(
                "{at}.{key} must be http:// or https:// URLs, got `{url}`"
            ));
        };
        if !parsed.username().is_empty() || parsed.password().is_some() {
            // It would show in logs, `backends status` and /metrics labels.
            return Err(format!(
                "{at}.{key}: put credentials in api_key_env (user:password for A1111), not in the URL"
            ));
        }
        if !seen.insert(super::http::base(url).to_owned()) {
            return Err(format!("{at}.urls lists {url} twice"));
        }
    }
    if cfg.urls.len() > 64 {
        return Err(format!("{at}.urls: at most 64 servers"));
    }
    if cfg.down_after == 0 || cfg.down_after > 100 {
        return Err(format!("{at}.down_after must be 1..=100"));
    }
    if cfg.probe_secs > 3600 {
        return Err(format!("{at}.probe_secs must be at most 3600"));
    }
    if let Some(path) = &cfg.workflow {
        if cfg.kind != BackendKind::ComfyUi {
            return Err(format!("{at}.workflow is for kind = \"comfyui\" only"));
        }
        let text = crate::bounded::read_text(
            std::path::Path::new(path),
            crate::bounded::WORKFLOW_MAX,
            "a ComfyUI workflow",
        )
        .map_err(|e| format!("{at}.workflow: cannot read it: {e}"))?;
        let doc: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{at}.workflow: {path} is not JSON: {e}"))?;
        super::comfyui::check_workflow(&doc, edit)
            .map_err(|e| format!("{at}.workflow: {path} {e}"))?;
        cfg.workflow_doc = Some(std::sync::Arc::new(doc));
    } else if cfg.kind == BackendKind::ComfyUi && cfg.model.as_deref().is_none_or(str::is_empty) {
        return Err(format!(
            "{at}.model must name the checkpoint file (ckpt_name) for the bundled ComfyUI workflow, or give a workflow file"
        ));
    }
    if cfg.timeout_secs == 0 || cfg.timeout_secs > 3600 {
        return Err(format!("{at}.timeout_secs must be 1..=3600"));
    }
    if cfg.retries > 10 {
        return Err(format!("{at}.retries must be at most 10"));
    }
    if cfg.backoff_ms > 60_000 {
        return Err(format!("{at}.backoff_ms must be at most 60000"));
    }
    if let Some(d) = cfg.denoising_strength
        && !(0.0..=1.0).contains(&d)
    {
        return Err(format!("{at}.denoising_strength must be between 0 and 1"));
    }
    if let Some(size) = &cfg.size
        && size != "auto"
        && parse_size(size).is_none()
    {
        return Err(format!("{at}.size must look like 1024x1024 or be \"auto\""));
    }
    if let Some(env) = &cfg.api_key_env
        && (env.is_empty() || env.contains('='))
    {
        return Err(format!(
            "{at}.api_key_env must be an environment variable name"
        ));
    }
    Ok(cfg)
}

pub(crate) fn parse_size(s: &str) -> Option<(u32, u32)> {
    let (w, h) = s.split_once('x')?;
    let (w, h) = (w.trim().parse().ok()?, h.trim().parse().ok()?);
    ((1..=8192).contains(&w) && (1..=8192).contains(&h)).then_some((w, h))
}
