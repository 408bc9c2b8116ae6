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

/// One inference server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    pub kind: BackendKind,
    /// Base URL, e.g. `http://127.0.0.1:7860` (a trailing `/v1` is accepted for OpenAI).
    pub url: String,
    /// Name of the environment variable holding the API key (sent as `Authorization: Bearer`;
    /// for AUTOMATIC1111 a `user:password` value is sent as HTTP basic auth).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The server's model name (`model` for OpenAI, `sd_model_checkpoint` for AUTOMATIC1111).
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
        check(&cfg, &format!("models.{name}"))?;
        if out.models.insert(model.id().to_owned(), cfg).is_some() {
            return Err(format!(
                "model `{}` is configured twice in [models]",
                model.id()
            ));
        }
    }
    if let Some(cfg) = raw.edit {
        check(&cfg, "edit")?;
        out.edit = Some(cfg);
    }
    Ok(out)
}

fn check(cfg: &BackendConfig, at: &str) -> Result<(), String> {
    let url = cfg.url.trim();
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
        return Err(format!(
            "{at}.url must be an http:// or https:// URL, got `{url}`"
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
    Ok(())
}

pub(crate) fn parse_size(s: &str) -> Option<(u32, u32)> {
    let (w, h) = s.split_once('x')?;
    let (w, h) = (w.trim().parse().ok()?, h.trim().parse().ok()?);
    ((1..=8192).contains(&w) && (1..=8192).contains(&h)).then_some((w, h))
}
