//! Configuration: defaults < TOML file < `PICTOR_*` environment < command-line flags, with the
//! source of every effective value recorded for `pictor config show`.
//!
//! Every key is declared once in [`KEYS`]; the file is flattened to dotted keys (`prices.fast`),
//! unknown keys are an error naming the key, and `[backends.*]` tables are passed to the
//! renderer's backend configuration as they are.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Everything the server needs to start.
#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// Base of every URL Pictor hands out (poll_url, photo_url) and the OIDC issuer.
    /// `None` means `http://<listen address>`.
    pub public_url: Option<String>,
    /// Renders that may run at once (the blocking pool's size).
    pub render_workers: usize,
    /// Jobs that may wait for a render slot; beyond that a job fails with `tokens_exhausted`.
    pub queue_size: usize,
    /// How long a job may wait for a render slot before it fails with `tokens_exhausted`.
    pub queue_timeout: Duration,
    /// Uploads decoded at once when an edit is created.
    pub decode_workers: usize,
    /// A connection with no traffic for this long is closed (slow-header and idle-socket
    /// defence). Must exceed the 90 s long-poll, during which a connection is silent by design.
    pub idle_timeout: Duration,
    /// Pictures older than this many days are deleted (`None`: kept forever).
    pub retention_days: Option<u32>,
    /// Store settings (prices, limits, signup credits) set by the configuration; applied to the
    /// store at start, so they win over `pictor settings set` until removed from the config.
    pub settings_overrides: Vec<(&'static str, u32)>,
    /// The `[backends]` table of the file, for the renderer's model backends.
    pub backends: Option<toml::Table>,
    /// The `[diffusion]` table of the file: Pictor's model ids mapped to installed diffusion
    /// models (see docs/models.md).
    pub diffusion: Option<toml::Table>,
    /// Reverse proxies whose `Forwarded`/`X-Forwarded-For` headers name the client (see
    /// docs/administration.md). Empty: the socket peer is the client.
    pub trusted_proxies: crate::net::TrustedProxies,
    /// Bearer token `GET /metrics` requires; `None`: `/metrics` is not served on the public
    /// listener (it stays on the loopback admin channel).
    pub metrics_token: Option<String>,
    /// The tier each of OpenAI's model names draws with on `/openai/v1` (`[openai]`).
    pub openai_models: [(&'static str, crate::catalog::Model); 3],
    /// Job notifications (`webhook_url`).
    pub webhooks: WebhookOptions,
    /// Outgoing mail (password-reset links); `None` unless `smtp.host` is set.
    pub smtp: Option<crate::mail::SmtpOptions>,
}

/// How job notifications are delivered (see docs/api.md, "Webhooks").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookOptions {
    /// Whether `webhook_url` may point at loopback, private, link-local and other non-public
    /// addresses (off: such URLs are refused, when a job is created and again at each delivery).
    pub allow_private: bool,
    /// Attempts before a notification is given up.
    pub max_attempts: u32,
    /// Wait before the first retry; doubled for each further one (at most an hour).
    pub retry_base: Duration,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            allow_private: false,
            max_attempts: 10,
            retry_base: Duration::from_secs(10),
        }
    }
}

impl Config {
    pub fn new(data_dir: PathBuf) -> Config {
        Config {
            data_dir,
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public_url: None,
            render_workers: default_render_workers(),
            queue_size: 64,
            queue_timeout: Duration::from_secs(600),
            decode_workers: 2,
            idle_timeout: Duration::from_secs(120),
            retention_days: None,
            settings_overrides: Vec::new(),
            backends: None,
            diffusion: None,
            trusted_proxies: crate::net::TrustedProxies::default(),
            metrics_token: None,
            openai_models: OPENAI_MODELS,
            webhooks: WebhookOptions::default(),
            smtp: None,
        }
    }

    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join("pictor.redb")
    }

    pub fn images_dir(&self) -> PathBuf {
        self.data_dir.join("images")
    }

    pub fn sources_dir(&self) -> PathBuf {
        self.data_dir.join("sources")
    }

    pub fn admin_file(&self) -> PathBuf {
        admin_file(&self.data_dir)
    }
}

/// Where the running server writes the admin channel's address and token (mode 0600).
pub fn admin_file(data_dir: &Path) -> PathBuf {
    data_dir.join("admin.json")
}

/// One render slot per core, leaving one core for the HTTP side (at least one slot).
pub fn default_render_workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1))
        .unwrap_or(1)
        .max(1)
}

fn project_dirs() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "pictor")
}

/// The OS data folder (`~/.local/share/pictor` on Linux, `~/Library/Application Support/pictor`
/// on macOS, `%APPDATA%\pictor\data` on Windows).
pub fn default_data_dir() -> Option<PathBuf> {
    project_dirs().map(|d| d.data_dir().to_path_buf())
}

/// The default config file (`~/.config/pictor/config.toml` on Linux,
/// `~/Library/Application Support/pictor/config.toml` on macOS, `%APPDATA%\pictor\config\config.toml`).
pub fn default_config_file() -> Option<PathBuf> {
    project_dirs().map(|d| d.config_dir().join("config.toml"))
}

/// Where an effective value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Default,
    File,
    Env,
    Flag,
    /// A stored setting (`pictor settings`, the admin page), shown by `config show`.
    Store,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Default => "default",
            Source::File => "config file",
            Source::Env => "environment",
            Source::Flag => "command line",
            Source::Store => "store (pictor settings)",
        })
    }
}

/// OpenAI's model names and the tiers they draw with by default: the cheapest, the better
/// one, the best.
pub const OPENAI_MODELS: [(&str, crate::catalog::Model); 3] = [
    ("dall-e-2", crate::catalog::Model::Fast),
    ("dall-e-3", crate::catalog::Model::Artist),
    ("gpt-image-1", crate::catalog::Model::Plus),
];

impl Config {
    /// The tier OpenAI's model `name` draws with here.
    pub fn openai_tier(&self, name: &str) -> crate::catalog::Model {
        self.openai_models
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(crate::catalog::Model::Fast, |(_, m)| *m)
    }
}

/// A configuration key.
pub struct Key {
    /// Dotted name as in the file and in `--set`.
    pub name: &'static str,
    /// Environment variable.
    pub env: &'static str,
    pub help: &'static str,
}

/// Every configuration key.
pub const KEYS: &[Key] = &[
    Key {
        name: "data_dir",
        env: "PICTOR_DATA_DIR",
        help: "data folder (store file, pictures, uploads)",
    },
    Key {
        name: "listen",
        env: "PICTOR_LISTEN",
        help: "address to listen on",
    },
    Key {
        name: "public_url",
        env: "PICTOR_PUBLIC_URL",
        help: "base URL handed out and OIDC issuer",
    },
    Key {
        name: "render_workers",
        env: "PICTOR_RENDER_WORKERS",
        help: "renders at once",
    },
    Key {
        name: "queue_size",
        env: "PICTOR_QUEUE_SIZE",
        help: "jobs waiting for a render slot before tokens_exhausted",
    },
    Key {
        name: "queue_timeout",
        env: "PICTOR_QUEUE_TIMEOUT",
        help: "seconds a job may wait for a render slot",
    },
    Key {
        name: "trusted_proxies",
        env: "PICTOR_TRUSTED_PROXIES",
        help: "reverse proxies (IPs/CIDRs) whose X-Forwarded-For/Forwarded are believed",
    },
    Key {
        name: "forwarded_header",
        env: "PICTOR_FORWARDED_HEADER",
        help: "the header trusted proxies write: x-forwarded-for (default) or forwarded",
    },
    Key {
        name: "metrics_token",
        env: "PICTOR_METRICS_TOKEN",
        help: "bearer token for GET /metrics (unset: /metrics only on the admin channel)",
    },
    Key {
        name: "openai.dall-e-2",
        env: "PICTOR_OPENAI_DALL_E_2",
        help: "the tier OpenAI's dall-e-2 draws with on /openai/v1 (fast, artist or 0.2plus; default fast)",
    },
    Key {
        name: "openai.dall-e-3",
        env: "PICTOR_OPENAI_DALL_E_3",
        help: "the tier OpenAI's dall-e-3 draws with on /openai/v1 (default artist)",
    },
    Key {
        name: "openai.gpt-image-1",
        env: "PICTOR_OPENAI_GPT_IMAGE_1",
        help: "the tier OpenAI's gpt-image-1 draws with on /openai/v1 (default 0.2plus)",
    },
    Key {
        name: "webhooks.allow_private",
        env: "PICTOR_WEBHOOKS_ALLOW_PRIVATE",
        help: "let webhook_url point at loopback/private/link-local addresses (true/false)",
    },
    Key {
        name: "webhooks.max_attempts",
        env: "PICTOR_WEBHOOKS_MAX_ATTEMPTS",
        help: "delivery attempts before a job notification is given up",
    },
    Key {
        name: "webhooks.retry_ms",
        env: "PICTOR_WEBHOOKS_RETRY_MS",
        help: "milliseconds before the first webhook retry (doubled each time, at most 1 h)",
    },
    Key {
        name: "smtp.host",
        env: "PICTOR_SMTP_HOST",
        help: "mail server for password-reset mail (unset: no mail; admins hand out reset links)",
    },
    Key {
        name: "smtp.port",
        env: "PICTOR_SMTP_PORT",
        help: "mail server port (default 587 for starttls, 465 for tls, 25 for none)",
    },
    Key {
        name: "smtp.security",
        env: "PICTOR_SMTP_SECURITY",
        help: "starttls (default), tls, or none (a relay on this machine only)",
    },
    Key {
        name: "smtp.username",
        env: "PICTOR_SMTP_USERNAME",
        help: "mail server login (unset: no authentication)",
    },
    Key {
        name: "smtp.password",
        env: "PICTOR_SMTP_PASSWORD",
        help: "mail server password (never shown or logged)",
    },
    Key {
        name: "smtp.from",
        env: "PICTOR_SMTP_FROM",
        help: "sender of Pictor's mail, e.g. \"Pictor <pictor@example.org>\" (required with smtp.host)",
    },
    Key {
        name: "retention_days",
        env: "PICTOR_RETENTION_DAYS",
        help: "delete pictures older than this (0 = keep)",
    },
    Key {
        name: "signup_credits",
        env: "PICTOR_SIGNUP_CREDITS",
        help: "credits for accounts created on /register",
    },
    Key {
        name: "prices.fast",
        env: "PICTOR_PRICES_FAST",
        help: "credits per fast generation",
    },
    Key {
        name: "prices.artist",
        env: "PICTOR_PRICES_ARTIST",
        help: "credits per artist generation",
    },
    Key {
        name: "prices.0.2plus",
        env: "PICTOR_PRICES_0_2PLUS",
        help: "credits per 0.2plus generation",
    },
    Key {
        name: "prices.edit",
        env: "PICTOR_PRICES_EDIT",
        help: "credits per edit",
    },
    Key {
        name: "limits.daily",
        env: "PICTOR_LIMITS_DAILY",
        help: "generations per UTC day, non-PRO",
    },
    Key {
        name: "limits.daily_pro",
        env: "PICTOR_LIMITS_DAILY_PRO",
        help: "generations per UTC day, PRO",
    },
    Key {
        name: "registration_open",
        env: "PICTOR_REGISTRATION_OPEN",
        help: "1: anyone may register on /register; 0: accounts are made by an administrator",
    },
    Key {
        name: "signup_approval",
        env: "PICTOR_SIGNUP_APPROVAL",
        help: "1: sign-up credits wait for an administrator's approval",
    },
    Key {
        name: "challenge_bits",
        env: "PICTOR_CHALLENGE_BITS",
        help: "difficulty of the sign-up/sign-in proof-of-work check",
    },
    Key {
        name: "app_daily_cap",
        env: "PICTOR_APP_DAILY_CAP",
        help: "credits a day proposed as an app's spending limit on the consent page",
    },
];

/// The stored setting a key sets at every start (the same name; see `store::settings`).
pub fn setting_for(key: &str) -> Option<&'static str> {
    Some(match key {
        "signup_credits" => "signup_credits",
        "prices.fast" => "prices.fast",
        "prices.artist" => "prices.artist",
        "prices.0.2plus" => "prices.0.2plus",
        "prices.edit" => "prices.edit",
        "limits.daily" => "limits.daily",
        "limits.daily_pro" => "limits.daily_pro",
        "registration_open" => "registration_open",
        "signup_approval" => "signup_approval",
        "challenge_bits" => "challenge_bits",
        "app_daily_cap" => "app_daily_cap",
        _ => return None,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, not a regular file, over its 1 MiB cap); the
    /// message names it.
    #[error("cannot read the config file: {0}")]
    Read(crate::bounded::FileError),
    #[error("config file {0}: {1}")]
    Parse(PathBuf, String),
    #[error("unknown configuration key `{key}` ({origin}); known keys: {known}")]
    UnknownKey {
        key: String,
        origin: String,
        known: String,
    },
    #[error("{key} = {value:?} (from the {origin}): {reason}")]
    Invalid {
        key: String,
        value: String,
        origin: Source,
        reason: String,
    },
    #[error("no home folder: pass --data-dir or set PICTOR_DATA_DIR")]
    NoDataDir,
}

/// The raw layers before resolution.
#[derive(Default)]
pub struct Layers {
    /// Values given on the command line (dedicated flags and `--set key=value`).
    pub flags: BTreeMap<String, String>,
    /// Values from the environment.
    pub env: BTreeMap<String, String>,
    /// Values from the file (flattened), and the file's `[backends]` table.
    pub file: BTreeMap<String, String>,
    pub backends: Option<toml::Table>,
    pub diffusion: Option<toml::Table>,
    /// The file read, if any.
    pub file_path: Option<PathBuf>,
}

fn flatten(
    prefix: &str,
    table: &toml::Table,
    out: &mut BTreeMap<String, String>,
    backends: &mut Option<toml::Table>,
    diffusion: &mut Option<toml::Table>,
) -> Result<(), String> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) if key == "backends" => *backends = Some(t.clone()),
            toml::Value::Table(t) if key == "diffusion" => *diffusion = Some(t.clone()),
            toml::Value::Table(t) => flatten(&key, t, out, backends, diffusion)?,
            toml::Value::String(s) => {
                out.insert(key, s.clone());
            }
            toml::Value::Integer(i) => {
                out.insert(key, i.to_string());
            }
            toml::Value::Boolean(b) => {
                out.insert(key, b.to_string());
            }
            other => return Err(format!("`{key}` has an unsupported value {other}")),
        }
    }
    Ok(())
}

fn known_keys() -> String {
    KEYS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
}

fn check_known(key: &str, origin: &str) -> Result<(), ConfigError> {
    if KEYS.iter().any(|k| k.name == key) {
        Ok(())
    } else {
        Err(ConfigError::UnknownKey {
            key: key.to_string(),
            origin: origin.to_string(),
            known: known_keys(),
        })
    }
}

impl Layers {
    /// Reads the file (`explicit` path, else the default one if it exists) and the environment.
    pub fn load(explicit_file: Option<&Path>) -> Result<Layers, ConfigError> {
        let mut layers = Layers::default();
        let path = explicit_file
            .map(Path::to_path_buf)
            .or_else(|| default_config_file().filter(|p| p.exists()));
        if let Some(path) = path {
            let text = crate::bounded::read_text(
                &path,
                crate::bounded::CONFIG_FILE_MAX,
                "a configuration file",
            )
            .map_err(ConfigError::Read)?;
            layers.read_file_text(&path, &text)?;
        }
        for key in KEYS {
            if let Ok(v) = std::env::var(key.env) {
                layers.env.insert(key.name.to_string(), v);
            }
        }
        Ok(layers)
    }

    pub fn read_file_text(&mut self, path: &Path, text: &str) -> Result<(), ConfigError> {
        let table: toml::Table = toml::from_str(text)
            .map_err(|e| ConfigError::Parse(path.to_path_buf(), e.message().to_string()))?;
        let mut flat = BTreeMap::new();
        flatten(
            "",
            &table,
            &mut flat,
            &mut self.backends,
            &mut self.diffusion,
        )
        .map_err(|e| ConfigError::Parse(path.to_path_buf(), e))?;
        for key in flat.keys() {
            check_known(key, &format!("in {}", path.display()))?;
        }
        self.file = flat;
        self.file_path = Some(path.to_path_buf());
        Ok(())
    }

    /// Adds `--set key=value` flags.
    pub fn set_flags(&mut self, sets: &[String]) -> Result<(), ConfigError> {
        for s in sets {
            let (k, v) = s.split_once('=').ok_or_else(|| ConfigError::Invalid {
                key: s.clone(),
                value: String::new(),
                origin: Source::Flag,
                reason: "--set takes key=value".into(),
            })?;
            let k = k.trim();
            // `--set diffusion.fast.model=sd-turbo`: a key of the config file's [diffusion]
            // table (a TOML value, or else a string).
            if let Some(path) = k.strip_prefix("diffusion.") {
                let bad = |reason: &str| ConfigError::Invalid {
                    key: k.to_string(),
                    value: v.to_string(),
                    origin: Source::Flag,
                    reason: reason.into(),
                };
                let value = toml::from_str::<toml::Table>(&format!("v = {}", v.trim()))
                    .ok()
                    .and_then(|mut t| t.remove("v"))
                    .unwrap_or_else(|| toml::Value::String(v.trim().to_string()));
                let table = self.diffusion.get_or_insert_with(toml::Table::new);
                match path.split_once('.') {
                    Some((tier, field))
                        if !tier.is_empty() && !field.is_empty() && !field.contains('.') =>
                    {
                        let entry = table
                            .entry(tier.trim_matches('"').to_string())
                            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                        match entry {
                            toml::Value::Table(t) => {
                                t.insert(field.to_string(), value);
                            }
                            _ => return Err(bad("not a table in the config file")),
                        }
                    }
                    None if path == "memory_budget_mb" => {
                        table.insert(path.to_string(), value);
                    }
                    _ => {
                        return Err(bad(
                            "use diffusion.<tier>.<setting>=value (tier: fast, artist, 0.2plus, edit) or diffusion.memory_budget_mb=N",
                        ));
                    }
                }
                continue;
            }
            check_known(k, "given with --set")?;
            self.flags
                .insert(k.trim().to_string(), v.trim().to_string());
        }
        Ok(())
    }

    fn pick(&self, key: &str) -> Option<(String, Source)> {
        if let Some(v) = self.flags.get(key) {
            return Some((v.clone(), Source::Flag));
        }
        if let Some(v) = self.env.get(key) {
            return Some((v.clone(), Source::Env));
        }
        self.file.get(key).map(|v| (v.clone(), Source::File))
    }
}

/// One effective value and its source.
#[derive(Debug, Clone)]
pub struct Effective {
    pub key: &'static str,
    pub value: String,
    pub source: Source,
}

fn parse<T: std::str::FromStr>(
    key: &str,
    value: &str,
    source: Source,
    check: impl Fn(&T) -> Result<(), String>,
) -> Result<T, ConfigError>
where
    T::Err: fmt::Display,
{
    let parsed: T = value
        .trim()
        .parse()
        .map_err(|e: T::Err| ConfigError::Invalid {
            key: key.to_string(),
            value: value.to_string(),
            origin: source,
            reason: e.to_string(),
        })?;
    check(&parsed).map_err(|reason| ConfigError::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        origin: source,
        reason,
    })?;
    Ok(parsed)
}

fn range(lo: u64, hi: u64) -> impl Fn(&u64) -> Result<(), String> {
    move |v| {
        if (lo..=hi).contains(v) {
            Ok(())
        } else {
            Err(format!("must be between {lo} and {hi}"))
        }
    }
}

/// The `smtp.*` values while they are read, checked together at the end.
struct SmtpParts {
    host: Option<String>,
    port: Option<u16>,
    security: crate::mail::Security,
    username: Option<String>,
    password: Option<String>,
    from: Option<String>,
}

impl SmtpParts {
    fn finish(self) -> Result<Option<crate::mail::SmtpOptions>, ConfigError> {
        let Some(host) = self.host else {
            return Ok(None);
        };
        let from = self.from.ok_or_else(|| ConfigError::Invalid {
            key: "smtp.from".into(),
            value: String::new(),
            origin: Source::Default,
            reason: "required when smtp.host is set (the sender of reset mail)".into(),
        })?;
        if self.password.is_some() && self.username.is_none() {
            return Err(ConfigError::Invalid {
                key: "smtp.username".into(),
                value: String::new(),
                origin: Source::Default,
                reason: "smtp.password is set without smtp.username".into(),
            });
        }
        Ok(Some(crate::mail::SmtpOptions {
            host,
            port: self.port,
            security: self.security,
            username: self.username,
            password: self.password,
            from,
        }))
    }
}

/// Resolves the layers into a `Config` and the list of effective values with their sources.
pub fn resolve(layers: &Layers) -> Result<(Config, Vec<Effective>), ConfigError> {
    let mut effective = Vec::new();
    let data_dir = match layers.pick("data_dir") {
        Some((v, source)) => {
            effective.push(Effective {
                key: "data_dir",
                value: v.clone(),
                source,
            });
            PathBuf::from(v)
        }
        None => {
            let d = default_data_dir().ok_or(ConfigError::NoDataDir)?;
            effective.push(Effective {
                key: "data_dir",
                value: d.display().to_string(),
                source: Source::Default,
            });
            d
        }
    };
    let mut config = Config::new(data_dir);
    let mut smtp = SmtpParts {
        host: None,
        port: None,
        security: crate::mail::Security::StartTls,
        username: None,
        password: None,
        from: None,
    };
    for key in KEYS.iter().skip(1) {
        let picked = layers.pick(key.name);
        let source = picked.as_ref().map(|p| p.1).unwrap_or(Source::Default);
        let shown = match (key.name, picked) {
            ("listen", Some((v, s))) => {
                config.listen = parse::<SocketAddr>(key.name, &v, s, |_| Ok(()))?;
                v
            }
            ("listen", None) => config.listen.to_string(),
            ("public_url", Some((v, s))) => {
                let url = v.trim().trim_end_matches('/').to_string();
                let ok = url::Url::parse(&url).is_ok_and(|u| {
                    matches!(u.scheme(), "http" | "https") && u.host_str().is_some()
                });
                if !ok {
                    return Err(ConfigError::Invalid {
                        key: key.name.into(),
                        value: v,
                        origin: s,
                        reason: "must be an http:// or https:// URL".into(),
                    });
                }
                config.public_url = Some(url.clone());
                url
            }
            ("public_url", None) => format!("http://{} (from listen)", config.listen),
            ("render_workers", Some((v, s))) => {
                config.render_workers = parse::<u64>(key.name, &v, s, range(1, 256))? as usize;
                v
            }
            ("render_workers", None) => config.render_workers.to_string(),
            ("queue_size", Some((v, s))) => {
                config.queue_size = parse::<u64>(key.name, &v, s, range(1, 100_000))? as usize;
                v
            }
            ("queue_size", None) => config.queue_size.to_string(),
            ("queue_timeout", Some((v, s))) => {
                config.queue_timeout =
                    Duration::from_secs(parse::<u64>(key.name, &v, s, range(1, 86_400))?);
                v
            }
            ("queue_timeout", None) => config.queue_timeout.as_secs().to_string(),
            ("idle_timeout", Some((v, s))) => {
                config.idle_timeout =
                    Duration::from_secs(parse::<u64>(key.name, &v, s, range(95, 3600))?);
                v
            }
            ("idle_timeout", None) => config.idle_timeout.as_secs().to_string(),
            ("retention_days", Some((v, s))) => {
                let days = parse::<u64>(key.name, &v, s, range(0, 36_500))? as u32;
                config.retention_days = (days > 0).then_some(days);
                v
            }
            ("retention_days", None) => "0 (keep forever)".to_string(),
            ("trusted_proxies", Some((v, s))) => {
                config.trusted_proxies =
                    crate::net::TrustedProxies::parse(&v).map_err(|reason| {
                        ConfigError::Invalid {
                            key: key.name.into(),
                            value: v.clone(),
                            origin: s,
                            reason,
                        }
                    })?;
                config.trusted_proxies.describe()
            }
            ("trusted_proxies", None) => "(none: the socket peer is the client)".to_string(),
            ("forwarded_header", Some((v, s))) => {
                config.trusted_proxies.header =
                    crate::net::ForwardedHeader::parse(&v).map_err(|reason| {
                        ConfigError::Invalid {
                            key: key.name.into(),
                            value: v.clone(),
                            origin: s,
                            reason,
                        }
                    })?;
                v
            }
            ("forwarded_header", None) => "x-forwarded-for".to_string(),
            ("metrics_token", Some((v, s))) => {
                let token = v.trim().to_string();
                if token.len() < 16 {
                    return Err(ConfigError::Invalid {
                        key: key.name.into(),
                        value: "(hidden)".into(),
                        origin: s,
                        reason: "must be at least 16 characters".into(),
                    });
                }
                config.metrics_token = Some(token);
                "(set, hidden)".to_string()
            }
            ("metrics_token", None) => "(unset: /metrics only on the admin channel)".to_string(),
            (name, Some((v, s))) if name.starts_with("openai.") => {
                let tier =
                    crate::catalog::Model::parse(&v).ok_or_else(|| ConfigError::Invalid {
                        key: key.name.into(),
                        value: v.clone(),
                        origin: s,
                        reason:
                            "a tier: fast, artist or 0.2plus (or an alias: standard, pro, premium)"
                                .into(),
                    })?;
                let openai = &name["openai.".len()..];
                for slot in config.openai_models.iter_mut() {
                    if slot.0 == openai {
                        slot.1 = tier;
                    }
                }
                tier.id().to_string()
            }
            (name, None) if name.starts_with("openai.") => config
                .openai_tier(&name["openai.".len()..])
                .id()
                .to_string(),
            ("webhooks.allow_private", Some((v, s))) => {
                config.webhooks.allow_private = parse::<bool>(key.name, &v, s, |_| Ok(()))?;
                v
            }
            ("webhooks.allow_private", None) => "false".to_string(),
            ("webhooks.max_attempts", Some((v, s))) => {
                config.webhooks.max_attempts = parse::<u64>(key.name, &v, s, range(1, 100))? as u32;
                v
            }
            ("webhooks.max_attempts", None) => config.webhooks.max_attempts.to_string(),
            ("webhooks.retry_ms", Some((v, s))) => {
                config.webhooks.retry_base =
                    Duration::from_millis(parse::<u64>(key.name, &v, s, range(10, 3_600_000))?);
                v
            }
            ("webhooks.retry_ms", None) => config.webhooks.retry_base.as_millis().to_string(),
            ("smtp.host", Some((v, _))) => {
                smtp.host = Some(v.trim().to_owned()).filter(|h| !h.is_empty());
                v
            }
            ("smtp.host", None) => "(unset: no mail; administrators hand out reset links)".into(),
            ("smtp.port", Some((v, s))) => {
                smtp.port = Some(parse::<u16>(key.name, &v, s, |p| {
                    if *p == 0 {
                        Err("must be a port number".into())
                    } else {
                        Ok(())
                    }
                })?);
                v
            }
            ("smtp.security", Some((v, s))) => {
                smtp.security =
                    crate::mail::Security::parse(&v).map_err(|reason| ConfigError::Invalid {
                        key: key.name.into(),
                        value: v.clone(),
                        origin: s,
                        reason,
                    })?;
                v
            }
            ("smtp.security", None) => "starttls".into(),
            ("smtp.username", Some((v, _))) => {
                smtp.username = Some(v.clone()).filter(|u| !u.is_empty());
                v
            }
            ("smtp.password", Some((v, _))) => {
                smtp.password = Some(v);
                "(set, hidden)".into()
            }
            ("smtp.from", Some((v, s))) => {
                crate::mail::parse_mailbox(&v).map_err(|reason| ConfigError::Invalid {
                    key: key.name.into(),
                    value: v.clone(),
                    origin: s,
                    reason,
                })?;
                smtp.from = Some(v.clone());
                v
            }
            ("smtp.port" | "smtp.username" | "smtp.password" | "smtp.from", None) => {
                "(unset)".into()
            }
            (name, Some((v, s))) => {
                let n = parse::<u64>(name, &v, s, range(0, 1_000_000))? as u32;
                if let Some(setting) = setting_for(name) {
                    config.settings_overrides.push((setting, n));
                }
                v
            }
            (_, None) => "(stored setting; see `pictor settings list`)".to_string(),
        };
        effective.push(Effective {
            key: key.name,
            value: shown,
            source,
        });
    }
    config.backends = layers.backends.clone();
    config.diffusion = layers.diffusion.clone();
    config.smtp = smtp.finish()?;
    Ok((config, effective))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smtp_needs_a_sender_and_hides_its_password() {
        let mut layers = Layers::default();
        layers
            .read_file_text(
                Path::new("c.toml"),
                "data_dir = \"/d\"\n[smtp]\nhost = \"mail.example.org\"\nusername = \"u\"\npassword = \"s3cret-pass\"\n",
            )
            .unwrap();
        let Err(err) = resolve(&layers) else {
            panic!("smtp.from is required");
        };
        let err = err.to_string();
        assert!(err.contains("smtp.from"), "{err}");
        layers
            .set_flags(&[
                "smtp.from=Pictor <p@example.org>".into(),
                "smtp.security=tls".into(),
            ])
            .unwrap();
        let (config, eff) = resolve(&layers).unwrap();
        let smtp = config.smtp.expect("mail configured");
        assert_eq!(smtp.security, crate::mail::Security::Tls);
        assert_eq!(smtp.password.as_deref(), Some("s3cret-pass"));
        assert!(!format!("{smtp:?}").contains("s3cret"), "Debug hides it");
        let shown: Vec<String> = eff
            .iter()
            .map(|e| format!("{} {}", e.key, e.value))
            .collect();
        assert!(
            shown.contains(&"smtp.password (set, hidden)".to_string()),
            "{shown:?}"
        );
        assert!(!shown.iter().any(|l| l.contains("s3cret")), "{shown:?}");
        layers
            .set_flags(&["smtp.from=not an address".into()])
            .unwrap();
        assert!(
            resolve(&layers).is_err(),
            "a bad sender is refused at start"
        );
        layers
            .set_flags(&[
                "smtp.from=p@example.org".into(),
                "smtp.security=ssl3".into(),
            ])
            .unwrap();
        assert!(resolve(&layers).is_err());
        // No host: no mail, whatever else is set.
        let mut plain = Layers::default();
        plain
            .read_file_text(Path::new("c.toml"), "data_dir = \"/d\"\n")
            .unwrap();
        assert!(resolve(&plain).unwrap().0.smtp.is_none());
    }

    #[test]
    fn flags_beat_env_beat_file_beat_defaults() {
        let mut layers = Layers::default();
        layers
            .read_file_text(Path::new("c.toml"), "data_dir = \"/d\"\nlisten = \"127.0.0.1:1\"\nqueue_size = 5\n[prices]\nfast = 3\n[limits]\ndaily = 7\n")
            .unwrap();
        layers.env.insert("listen".into(), "127.0.0.1:2".into());
        layers.env.insert("queue_size".into(), "6".into());
        layers.set_flags(&["listen=127.0.0.1:3".into()]).unwrap();
        let (config, eff) = resolve(&layers).unwrap();
        assert_eq!(config.listen.port(), 3);
        assert_eq!(config.queue_size, 6);
        assert_eq!(config.data_dir, PathBuf::from("/d"));
        assert!(config.settings_overrides.contains(&("prices.fast", 3)));
        assert!(config.settings_overrides.contains(&("limits.daily", 7)));
        let src = |k: &str| eff.iter().find(|e| e.key == k).unwrap().source;
        assert_eq!(src("listen"), Source::Flag);
        assert_eq!(src("queue_size"), Source::Env);
        assert_eq!(src("data_dir"), Source::File);
        assert_eq!(src("render_workers"), Source::Default);
    }

    #[test]
    fn openai_names_draw_with_the_tiers_the_operator_sets() {
        let mut layers = Layers::default();
        layers
            .read_file_text(
                Path::new("c.toml"),
                "data_dir = \"/d\"\n[openai]\n\"dall-e-3\" = \"standard\"\n",
            )
            .unwrap();
        layers
            .env
            .insert("openai.gpt-image-1".into(), "artist".into());
        let (config, eff) = resolve(&layers).unwrap();
        use crate::catalog::Model;
        assert_eq!(config.openai_tier("dall-e-2"), Model::Fast);
        assert_eq!(config.openai_tier("dall-e-3"), Model::Fast);
        assert_eq!(config.openai_tier("gpt-image-1"), Model::Artist);
        let shown = eff.iter().find(|e| e.key == "openai.dall-e-3").unwrap();
        assert_eq!((shown.value.as_str(), shown.source), ("fast", Source::File));
        layers
            .env
            .insert("openai.dall-e-2".into(), "midjourney".into());
        let Err(e) = resolve(&layers) else {
            panic!("an unknown tier is refused");
        };
        assert!(e.to_string().contains("openai.dall-e-2"), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let mut layers = Layers::default();
        let e = layers
            .read_file_text(Path::new("c.toml"), "[prices]\nturbo = 3\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("prices.turbo"), "{e}");
        let e = layers
            .read_file_text(Path::new("c.toml"), "lissten = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lissten"), "{e}");
        let mut layers = Layers::default();
        layers
            .read_file_text(Path::new("c.toml"), "data_dir = \"/d\"\nqueue_size = 0\n")
            .unwrap();
        let e = resolve(&layers).unwrap_err().to_string();
        assert!(e.contains("queue_size") && e.contains("config file"), "{e}");
        assert!(Layers::default().set_flags(&["nope=1".into()]).is_err());
        // `--set diffusion.TIER.KEY=V` sets one key of the [diffusion] table, a TOML value or a
        // string.
        let mut layers = Layers::default();
        layers
            .set_flags(&[
                "diffusion.fast.model=sd-turbo".into(),
                "diffusion.fast.steps=2".into(),
                "diffusion.memory_budget_mb=8000".into(),
            ])
            .unwrap();
        let d = layers.diffusion.unwrap();
        assert_eq!(d["fast"]["model"].as_str(), Some("sd-turbo"));
        assert_eq!(d["fast"]["steps"].as_integer(), Some(2));
        assert_eq!(d["memory_budget_mb"].as_integer(), Some(8000));
        for bad in ["diffusion.fast=1", "diffusion.fast.a.b=1", "diffusion.=1"] {
            assert!(Layers::default().set_flags(&[bad.into()]).is_err(), "{bad}");
        }
    }

    #[test]
    fn backends_table_passes_through() {
        let mut layers = Layers::default();
        layers.read_file_text(Path::new("c.toml"), "data_dir = \"/d\"\n[backends.artist]\nkind = \"a1111\"\nurl = \"http://gpu:7860\"\n").unwrap();
        let (config, _) = resolve(&layers).unwrap();
        assert!(config.backends.unwrap().contains_key("artist"));
    }
}
