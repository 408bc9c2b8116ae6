//! The command line: `pictor [serve]` and the admin commands. Admin commands run through the
//! running server's admin channel when the store is locked by it, and directly on the file
//! otherwise; both paths call `ops::execute`.

mod remote;
pub mod render;
pub mod serve;

use std::io::BufRead;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use serde_json::Value;

use crate::clock::Clock;
use crate::config::{self, Config, Effective, Layers};
use crate::ops::{self, AdminRequest, OpError};
use crate::store::{Store, StoreError};

/// The heading the options every command takes are listed under, after the command's own.
const GLOBAL: &str = "Global options";

#[derive(Parser, Debug)]
#[command(
    name = "pictor",
    version,
    about = "Self-hosted image generation service and sign-in provider"
)]
pub struct Cli {
    /// Data folder (the store file, pictures, uploads). Env PICTOR_DATA_DIR; default: the OS data folder.
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub data_dir: Option<PathBuf>,

    /// Config file. Env PICTOR_CONFIG; default: config.toml in the OS config folder, if it exists.
    #[arg(long, env = "PICTOR_CONFIG", hide_env = true, global = true, help_heading = GLOBAL)]
    pub config: Option<PathBuf>,

    /// Set any configuration key for this run, e.g. `--set prices.fast=2` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", global = true, help_heading = GLOBAL)]
    pub set: Vec<String>,

    /// Create an empty store in the data folder when there is none. Without it, commands that
    /// change or read the store refuse, naming the folder (only `serve` creates one by itself).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub init: bool,

    /// Where the built-in engine computes: `auto` (an NVIDIA GPU when the NVIDIA build can use
    /// one, else the CPU), `cpu`, or `cuda` (a GPU or an error). Env PICTOR_DEVICE.
    #[arg(
        long,
        env = "PICTOR_DEVICE",
        hide_env = true,
        global = true,
        help_heading = GLOBAL,
        value_enum,
        default_value_t
    )]
    pub device: crate::gpu::DeviceChoice,

    #[command(subcommand)]
    pub command: Option<Command>,

    /// Serve options, when no subcommand is given (`pictor` = `pictor serve`).
    #[command(flatten)]
    pub serve: serve::ServeArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the server (the default).
    Serve(serve::ServeArgs),
    /// Manage users.
    #[command(subcommand)]
    User(UserCommand),
    /// Manage credits.
    #[command(subcommand)]
    Credits(CreditsCommand),
    /// Issue API keys (`vx_…`) for the image API. Old spelling: `key`.
    #[command(subcommand, name = "api-key", alias = "key")]
    Key(KeyCommand),
    /// Show or change operator settings (prices, daily limits).
    #[command(subcommand)]
    Settings(SettingsCommand),
    /// Manage OAuth clients (applications that sign people in with Pictor).
    #[command(subcommand)]
    Client(ClientCommand),
    /// Rotate the key that signs id_tokens (published in the JWKS). Old spelling: `keys`.
    #[command(subcommand, name = "signing-key", alias = "keys")]
    Keys(KeysCommand),
    /// Install, list and remove diffusion models (diffusers folders or single-file checkpoints).
    #[command(subcommand)]
    Models(Box<ModelsCommand>),
    /// Render one picture to a file with the built-in renderer (no server needed).
    Render(Box<render::RenderArgs>),
    /// Inference servers (model backends) of the running server.
    #[command(subcommand)]
    Backends(BackendsCommand),
    /// Write a consistent backup (store snapshot + pictures) to one file; works while the server runs.
    Backup {
        /// The file to write (it must not exist).
        #[arg(long)]
        to: PathBuf,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Restore a backup into an empty (or new) data folder.
    Restore {
        /// The file to read.
        #[arg(long)]
        from: PathBuf,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// The NVIDIA GPUs this build can compute on, and its kernels' architecture; exits 1 when it
    /// can use none (a CPU build, no driver, no GPU), saying why.
    Gpu {
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show the effective configuration and where each value comes from.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print the OpenAPI document of the image API.
    Openapi {
        /// Base URL to put in the document's `servers`.
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        public_url: String,
        /// Leave out the operation with a multipart body (`POST /v1/edit`), for client
        /// generators that cannot send forms, such as progenitor (served as
        /// `openapi.json?multipart=false`).
        #[arg(long)]
        no_multipart: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Create a user.
    Add {
        /// The account's e-mail address.
        #[arg(long)]
        email: String,
        /// Display name.
        #[arg(long)]
        name: Option<String>,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
        /// Make the account an administrator.
        #[arg(long)]
        admin: bool,
        /// Make the account PRO (no watermark, the PRO daily limit).
        #[arg(long)]
        pro: bool,
        /// Starting credits.
        #[arg(long, default_value_t = 0)]
        credits: u32,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Change a user's PRO flag, ban, admin flag or daily limit.
    Update {
        /// The account's e-mail address.
        #[arg(long)]
        email: String,
        /// Set or clear the PRO flag (true/false).
        #[arg(long)]
        pro: Option<bool>,
        /// Ban (true) or unban (false); a ban signs the person out everywhere.
        #[arg(long)]
        banned: Option<bool>,
        /// Grant (true) or withdraw (false) administrator rights.
        #[arg(long)]
        admin: Option<bool>,
        /// Generations per UTC day for this user.
        #[arg(long)]
        daily_limit: Option<u32>,
        /// Approve the account: give it the sign-up credits held back (setting signup_approval).
        #[arg(long)]
        approve: bool,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a one-time link (valid 24 hours) with which the person sets a new password; a
    /// newer link replaces an older one. For installs without a mail server.
    ResetLink {
        /// The account's e-mail address.
        #[arg(long)]
        email: String,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Delete an account: profile, keys, sessions, app grants, jobs, pictures and uploads. The
    /// ledger keeps its rows (by account number only) and writes the balance off.
    Remove {
        /// The account's e-mail address.
        #[arg(long)]
        email: String,
        /// Confirm: the deletion cannot be undone.
        #[arg(long)]
        yes: bool,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Set a person's password (read from the first line of standard input); their sessions
    /// end and apps they signed in to must ask them again.
    Passwd {
        /// The account's e-mail address.
        #[arg(long)]
        email: String,
        /// Read the password from the first line of standard input (required: a password is
        /// never taken from the command line, where other users could see it).
        #[arg(long, required = true)]
        password_stdin: bool,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show one user.
    Show {
        /// The account's e-mail address.
        #[arg(long)]
        email: String,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Import accounts from a Keycloak realm export (JSON) or a CSV `email,name,hash`
    /// (Django `pbkdf2_sha256$iterations$salt$hash`). Old passwords keep working.
    Import {
        /// The file to read.
        #[arg(long)]
        from: PathBuf,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List users.
    List {
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum CreditsCommand {
    /// Add credits to a user (a negative amount removes them).
    Grant {
        /// The account's e-mail address.
        #[arg(long)]
        email: String,
        /// Credits to add; negative to take away.
        #[arg(long, allow_negative_numbers = true)]
        amount: i64,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Issue a new API key for a user; the old key stops working. The key is shown once.
    Issue {
        /// The account's e-mail address.
        #[arg(long)]
        email: String,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Print every configuration key, its effective value and its source.
    Show {
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum ClientCommand {
    /// Register a client; prints its app_name and app_secret (shown once).
    Add {
        /// The app's name (its client_id).
        #[arg(long)]
        name: String,
        /// An allowed redirect URI (exact match); repeat for several.
        #[arg(long = "redirect-uri", required = true)]
        redirect_uris: Vec<String>,
        /// Where the app may send the browser after RP-initiated logout (`/oauth/logout`,
        /// exact match); repeat for several. Without one, logout ends on Pictor's own page.
        #[arg(long = "post-logout-redirect-uri")]
        post_logout_redirect_uris: Vec<String>,
        /// The app's name as people should see it on the consent page (at most 64 characters).
        #[arg(long)]
        display_name: Option<String>,
        /// The app's logo (http/https URL); the consent page links it, Pictor never fetches it.
        #[arg(long)]
        logo_uri: Option<String>,
        /// The app's homepage (http/https URL), linked on the consent page.
        #[arg(long)]
        homepage: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Replace a client's post-logout redirect URIs (none given: clears them).
    LogoutUris {
        /// The client's app_name.
        #[arg(long)]
        name: String,
        /// A post-logout redirect URI (exact match); repeat for several.
        #[arg(long = "post-logout-redirect-uri")]
        post_logout_redirect_uris: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List clients.
    List {
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove a client and revoke everything issued to it.
    Remove {
        /// The app's name (its client_id).
        #[arg(long)]
        name: String,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum BackendsCommand {
    /// Each endpoint's health, requests in flight and latency, as the running server sees them.
    Status {
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

// Parsed once per command line: `Map`'s many settings cost nothing worth boxing for.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum ModelsCommand {
    /// Register a model already on disk: a diffusers folder or a single-file .safetensors
    /// checkpoint (it stays where it is).
    Add {
        /// Name to use in the configuration (lower-case letters, digits, '.', '_', '-').
        name: String,
        /// A diffusers folder or a .safetensors file (a checkpoint, or a LoRA).
        path: PathBuf,
        /// For a LoRA whose file does not tell: the model family it is for (sd1, sd2, sdxl,
        /// flux, sd3).
        #[arg(long = "for", value_name = "ARCH")]
        lora_for: Option<String>,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List installed models.
    List {
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Unregister a model.
    Remove {
        /// The app's name (its client_id).
        name: String,
        /// Also delete its files (only for models pulled into the data folder).
        #[arg(long)]
        delete_files: bool,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Choose the installed model that draws a tier (fast, artist, 0.2plus or edit). Settings
    /// not given come from the model's family preset (Turbo: 1 step, guidance 0, Euler a,
    /// trailing timesteps, the tiny decoder when installed; SD 1.5: 25 steps DPM++ 2M Karras,
    /// CFG 7; SDXL: 30 steps…). Applied at once by a running server; the config file's
    /// [diffusion.TIER] still wins.
    Map {
        /// fast, artist, 0.2plus or edit.
        tier: String,
        /// An installed model's name (`pictor models list`).
        model: String,
        /// Start from another family's preset: sd1, sd2, sd-turbo, sdxl, sdxl-turbo, flux-schnell,
        /// flux-dev (default: the model's own).
        #[arg(long)]
        preset: Option<String>,
        /// Denoising steps, 1 to 150.
        #[arg(long)]
        steps: Option<u32>,
        /// Classifier-free guidance (CFG scale), 0 to 30; 1 or less turns it off.
        #[arg(long)]
        guidance: Option<f64>,
        /// euler, euler_a, ddim, dpm++_2m, heun, lms (A1111 names too).
        #[arg(long)]
        sampler: Option<String>,
        /// automatic (the model's sigmas), karras or uniform.
        #[arg(long)]
        schedule: Option<String>,
        /// Long side rendered, a multiple of 64 (default: the model's native size).
        #[arg(long)]
        size: Option<u32>,
        /// What the pictures must not show.
        #[arg(long)]
        negative_prompt: Option<String>,
        /// An installed tiny decoder (TAESD) to decode with, or `none`.
        #[arg(long)]
        tiny_vae: Option<String>,
        /// img2img strength for edits when the instruction does not say, (0, 1].
        #[arg(long)]
        strength: Option<f64>,
        /// InstructPix2Pix models: how closely edits keep the source (1–2 usual; 1.5 preset).
        #[arg(long)]
        image_guidance: Option<f64>,
        /// leading, trailing or linspace (overrides the model's scheduler).
        #[arg(long)]
        timestep_spacing: Option<String>,
        /// The text encoders' weights: float32 (as the files) or int8 (8-bit blocks on the CPU:
        /// a quarter of their memory, about 1.6x faster, a looser match; docs/models.md).
        #[arg(long)]
        text_weights: Option<String>,
        /// SD 1.x, 2.x and SDXL: the UNet's transformer layers in float32 (as the files) or int8
        /// (8 bits, multiplied in integers on CPUs with AVX-512 VNNI: a quarter of their memory,
        /// a UNet step about 1.2-1.65x faster, a looser match; docs/models.md).
        #[arg(long)]
        unet_weights: Option<String>,
        /// FLUX and SD 3: the transformer as one file (ComfyUI's flux1-*.safetensors, Stability
        /// AI's sd3.5_medium.safetensors, or a GGUF such as flux1-schnell-Q4_K_S.gguf) in place
        /// of the folder's transformer/.
        #[arg(long)]
        transformer: Option<String>,
        /// FLUX: the T5 encoder as one file (a GGUF such as t5-v1_1-xxl-encoder-Q8_0.gguf) in
        /// place of the folder's text_encoder_2/.
        #[arg(long)]
        text_encoder_2: Option<String>,
        /// SD 3: the T5 encoder as one file (a GGUF or safetensors) in place of the folder's
        /// text_encoder_3/.
        #[arg(long)]
        text_encoder_3: Option<String>,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Give a tier back to the built-in painter (or its inference server).
    Unmap {
        /// fast, artist, 0.2plus or edit.
        tier: String,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Download a diffusers repository from the Hugging Face hub into the data folder and
    /// register it (resumable; every file checked against the hub's SHA-256). Honours
    /// HF_ENDPOINT and HF_TOKEN. You accept the model's licence.
    Pull {
        /// `owner/name` on the hub, e.g. stabilityai/sd-turbo, or a catalogue name: sd-turbo,
        /// sdxl-turbo, sd15, dreamshaper-8, sdxl-base, taesd, taesdxl (its repository and
        /// weight variant).
        repo: String,
        /// Download without asking, whatever the size (asked above 1 GB on a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
        /// Branch, tag or commit.
        #[arg(long, default_value = "main")]
        revision: String,
        /// Weight variant to fetch (e.g. fp16); default: the plain weights.
        #[arg(long)]
        variant: Option<String>,
        /// Name to register it under (default: the repository's name).
        #[arg(long)]
        name: Option<String>,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Make a new signing key; the old public key stays in the JWKS until its tokens expire.
    Rotate {
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum SettingsCommand {
    /// Show all settings.
    List {
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Change a setting: prices.fast, prices.artist, prices.0.2plus, prices.edit, limits.daily,
    /// limits.daily_pro, signup_credits, registration_open, signup_approval, challenge_bits,
    /// app_daily_cap (the config file's names; older spellings such as price.fast still work).
    Set {
        /// The setting (see `pictor settings list`).
        key: String,
        /// The new value.
        value: u32,
        /// Print JSON (for scripts) instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Resolves the configuration: defaults < file < environment < flags (`serve` flags and `--set`).
pub fn load_config(
    cli: &Cli,
    serve: Option<&serve::ServeArgs>,
) -> anyhow::Result<(Config, Vec<Effective>, Layers)> {
    let mut layers = Layers::load(cli.config.as_deref())?;
    if let Some(d) = &cli.data_dir {
        layers
            .flags
            .insert("data_dir".into(), d.display().to_string());
    }
    if let Some(args) = serve {
        args.add_flags(&mut layers.flags);
    }
    layers.set_flags(&cli.set)?;
    let (config, effective) = config::resolve(&layers)?;
    if let Some(table) = &config.backends {
        serve::backends_config(table)?;
    }
    Ok((config, effective, layers))
}

pub fn data_dir(cli: &Cli) -> anyhow::Result<PathBuf> {
    Ok(load_config(cli, None)?.0.data_dir)
}

/// The line on stderr that says where a command worked when no server holds the store (the
/// admin channel's own line says which server it was otherwise).
fn note_direct(data_dir: &std::path::Path) {
    eprintln!(
        "pictor: data folder {} (no server running; the store was opened directly)",
        data_dir.display()
    );
}

/// Runs an admin request: through the server when it holds the store, else on the file.
pub async fn run_admin(data_dir: PathBuf, req: AdminRequest) -> anyhow::Result<Value> {
    let db_path = data_dir.join("pictor.redb");
    if !db_path.exists() {
        crate::store::private_dir(&data_dir)
            .with_context(|| format!("cannot create {}", data_dir.display()))?;
    }
    let opened = tokio::task::spawn_blocking(move || Store::open(&db_path)).await?;
    match opened {
        Ok(store) => {
            note_direct(&data_dir);
            let now = Clock::default().now();
            let secrets = crate::idp::crypto::SecretBox::open_or_create(&data_dir)?;
            let result =
                tokio::task::spawn_blocking(move || ops::execute(&store, &secrets, req, now))
                    .await?;
            match result {
                Ok(v) => Ok(v),
                Err(OpError::Invalid(m)) => bail!(m),
                Err(OpError::Store(e)) => Err(e.into()),
            }
        }
        Err(StoreError::AlreadyOpen) => remote::execute(&data_dir, &req).await,
        Err(e) => Err(e.into()),
    }
}

fn read_password_line() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the password from stdin")?;
    let pw = line.trim_end_matches(['\n', '\r']).to_string();
    if pw.is_empty() {
        bail!("no password on standard input");
    }
    Ok(pw)
}

fn print(value: &Value, json: bool, human: impl FnOnce(&Value) -> String) {
    if json {
        println!("{value}");
    } else {
        println!("{}", human(value));
    }
}

fn describe_backends(v: &Value) -> String {
    let list = v.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        return "no inference servers are configured (every model renders in Pictor)".into();
    }
    let mut out = format!(
        "{:<32} {:<8} {:<5} {:>9} {:>6} {:>6} {:>10}  serves / last error",
        "endpoint", "kind", "up", "in flight", "ok", "failed", "latency"
    );
    for e in list {
        let latency = e["latency_ms"]
            .as_u64()
            .map_or("-".to_string(), |ms| format!("{ms} ms"));
        let up = if e["up"] == true {
            "up".to_string()
        } else {
            format!("down ({}s)", e["down_for_secs"].as_u64().unwrap_or(0))
        };
        let serves: Vec<&str> = e["serves"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push_str(&format!(
            "\n{:<32} {:<8} {:<5} {:>9} {:>6} {:>6} {:>10}  {}{}",
            e["url"].as_str().unwrap_or_default(),
            e["kind"].as_str().unwrap_or_default(),
            up,
            e["in_flight"],
            e["requests_ok"],
            e["requests_failed"],
            latency,
            serves.join(", "),
            e["last_error"]
                .as_str()
                .map_or(String::new(), |m| format!(" / {m}"))
        ));
    }
    out
}

fn describe_user(v: &Value) -> String {
    format!(
        "{} {} balance={} pro={} banned={} admin={} daily_limit={} (used today: {})",
        v["user_id"].as_str().unwrap_or_default(),
        v["email"].as_str().unwrap_or_default(),
        v["balance"],
        v["pro"],
        v["banned"],
        v["admin"],
        v["daily_limit"],
        v["daily_used"],
    )
}

fn describe_model(m: &Value) -> String {
    format!(
        "{:<20} {:<5} {:<12} {:>8.1} GiB  {}{}",
        m["name"].as_str().unwrap_or_default(),
        m["arch"].as_str().unwrap_or_default(),
        m["layout"].as_str().unwrap_or_default(),
        m["weight_bytes"].as_u64().unwrap_or(0) as f64 / (1u64 << 30) as f64,
        m["path"].as_str().unwrap_or_default(),
        m["source"]
            .as_str()
            .map(|s| format!("  (from {s})"))
            .unwrap_or_default(),
    ) + &match (m["kind"].as_str(), m["role"].as_str()) {
        (Some("lora"), _) => format!(
            "  [LoRA: <lora:{}:1> in a prompt]",
            m["name"].as_str().unwrap_or_default()
        ),
        (Some("tiny_decoder"), _) => "  [tiny decoder]".to_owned(),
        (_, Some("instruct")) => "  [edits: InstructPix2Pix]".to_owned(),
        (_, Some("inpaint")) => "  [edits: inpainting]".to_owned(),
        _ => String::new(),
    } + &match (m["loaded_bytes"].as_u64(), m["loaded_on"].as_str()) {
        (Some(b), Some(d)) => format!("  [loaded: {} on {d}]", crate::bounded::size_text(b)),
        _ => String::new(),
    }
}

/// "the CPU" or the GPU and its memory, from the running server's `device`.
fn describe_device(d: &Value) -> Option<String> {
    let d: pictor_core::gpu::EngineDevice = serde_json::from_value(d.clone()).ok()?;
    Some(match &d.gpu {
        Some(g) => format!(
            "{} — {} of {} in use",
            g.describe(),
            crate::bounded::size_text(g.memory_used),
            crate::bounded::size_text(g.memory_total)
        ),
        None => d.describe(),
    })
}

/// `pictor gpu`: this build's GPUs (or why none), and in a CPU build what the NVIDIA build
/// beside it sees. Exits 1 when neither can compute on a GPU.
async fn gpu_command(json: bool) -> anyhow::Result<()> {
    let mut v = tokio::task::spawn_blocking(crate::gpu::report).await?;
    let mut usable = v["gpus"].as_array().is_some_and(|g| !g.is_empty());
    if !crate::gpu::cuda_built()
        && let Some(bin) = crate::gpu::cuda_binary()
    {
        let probe = {
            let bin = bin.clone();
            tokio::task::spawn_blocking(move || crate::gpu::probe_binary(&bin)).await?
        };
        usable |= probe.is_ok();
        v["nvidia_build"] = serde_json::json!({
            "path": bin,
            "gpus": probe.as_ref().ok(),
            "error": probe.as_ref().err(),
        });
    }
    print(&v, json, |v| {
        let mut lines = Vec::new();
        if v["cuda_built"].as_bool() == Some(true) {
            lines.push("this build: NVIDIA (cargo feature `cuda`)".to_string());
            if let Some(a) = v["kernels_built_for"].as_str() {
                lines.push(format!("kernels: {a}"));
            }
        } else {
            lines.push("this build: CPU only".to_string());
        }
        let gpu_lines = |gpus: &Value| -> Vec<String> {
            gpus.as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| serde_json::from_value::<crate::gpu::GpuInfo>(g.clone()).ok())
                .map(|g| {
                    format!(
                        "  {}: {} of {} in use",
                        g.describe(),
                        crate::bounded::size_text(g.memory_used),
                        crate::bounded::size_text(g.memory_total)
                    )
                })
                .collect()
        };
        lines.extend(gpu_lines(&v["gpus"]));
        if let Some(e) = v["error"].as_str() {
            lines.push(format!("  no GPU: {e}"));
        }
        if let Some(n) = v.get("nvidia_build") {
            lines.push(format!(
                "the NVIDIA build beside it: {}",
                n["path"].as_str().unwrap_or_default()
            ));
            lines.extend(gpu_lines(&n["gpus"]));
            if let Some(e) = n["error"].as_str() {
                lines.push(format!("  cannot use a GPU: {e}"));
            }
        }
        lines.join("\n")
    });
    if !usable {
        bail!("no NVIDIA GPU can be used here (see above)");
    }
    Ok(())
}

/// A default model name from a hub repository id: `stabilityai/SD-Turbo` → `sd-turbo`.
fn name_from_repo(repo: &str) -> String {
    let last = repo.rsplit('/').next().unwrap_or(repo).to_ascii_lowercase();
    let cleaned: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    cleaned.trim_start_matches('.').chars().take(64).collect()
}

async fn models_command(dir: PathBuf, cmd: &ModelsCommand) -> anyhow::Result<()> {
    match cmd {
        ModelsCommand::Add {
            name,
            path,
            lora_for,
            json,
        } => {
            let lora_for = lora_for
                .as_deref()
                .map(|a| {
                    crate::models::Arch::parse(a)
                        .with_context(|| format!("--for {a}: use sd1, sd2, sdxl, flux or sd3"))
                })
                .transpose()?;
            let path = std::fs::canonicalize(path)
                .with_context(|| format!("cannot find {}", path.display()))?;
            // A single file's hash, once, as AUTOMATIC1111 records it ("Model hash" of a
            // checkpoint, "Lora hashes" of a LoRA).
            let sha256 = if path.is_file() {
                if !*json {
                    eprintln!("hashing {} (AUTOMATIC1111's hash)…", path.display());
                }
                let p = path.clone();
                Some(tokio::task::spawn_blocking(move || crate::models::a1111_hash(&p)).await??)
            } else {
                None
            };
            let v = run_admin(
                dir,
                AdminRequest::ModelAdd {
                    name: name.clone(),
                    path: path.display().to_string(),
                    source: None,
                    sha256,
                    lora_for,
                },
            )
            .await?;
            print(&v, *json, |v| {
                format!("installed {}", describe_model(&v["model"]))
            });
            Ok(())
        }
        ModelsCommand::List { json } => {
            let v = run_admin(dir, AdminRequest::ModelList).await?;
            print(&v, *json, |v| {
                let models = v["models"].as_array().cloned().unwrap_or_default();
                // Known when the server runs: where its engine computes.
                let device = describe_device(&v["device"])
                    .map(|d| format!("the running server's engine computes on {d}\n"))
                    .unwrap_or_default();
                if models.is_empty() {
                    format!(
                        "{device}no models installed (pictor models add NAME PATH, or pictor models pull OWNER/NAME)"
                    )
                } else {
                    device
                        + &models
                            .iter()
                            .map(describe_model)
                            .collect::<Vec<_>>()
                            .join("\n")
                }
            });
            Ok(())
        }
        ModelsCommand::Remove {
            name,
            delete_files,
            json,
        } => {
            let v = run_admin(
                dir.clone(),
                AdminRequest::ModelRemove { name: name.clone() },
            )
            .await?;
            let path = PathBuf::from(v["removed"]["path"].as_str().unwrap_or_default());
            let mut deleted = false;
            if *delete_files {
                let root = std::fs::canonicalize(dir.join("models")).ok();
                let inside = root
                    .as_ref()
                    .is_some_and(|r| path.starts_with(r) && path != *r);
                if !inside {
                    bail!(
                        "unregistered {name}, but did not delete {}: only models pulled into the data folder's models/ are deleted",
                        path.display()
                    );
                }
                std::fs::remove_dir_all(&path)
                    .with_context(|| format!("cannot delete {}", path.display()))?;
                deleted = true;
            }
            let mut v = v;
            v["deleted_files"] = Value::Bool(deleted);
            print(&v, *json, |v| {
                format!(
                    "removed {}{}",
                    v["removed"]["name"].as_str().unwrap_or_default(),
                    if deleted { " and its files" } else { "" }
                )
            });
            Ok(())
        }
        ModelsCommand::Map {
            tier,
            model,
            preset,
            steps,
            guidance,
            sampler,
            schedule,
            size,
            negative_prompt,
            tiny_vae,
            strength,
            image_guidance,
            timestep_spacing,
            text_weights,
            unet_weights,
            transformer,
            text_encoder_2,
            text_encoder_3,
            json,
        } => {
            // Files are stored by absolute path (the server may run from another folder).
            let absolute = |p: &Option<String>| {
                p.as_ref().map(|p| {
                    std::path::absolute(p).map_or_else(|_| p.clone(), |a| a.display().to_string())
                })
            };
            let mapping = crate::store::models::TierMapping {
                model: model.clone(),
                preset: preset.clone(),
                steps: *steps,
                guidance: *guidance,
                sampler: sampler.clone(),
                schedule: schedule.clone(),
                size: *size,
                negative_prompt: negative_prompt.clone(),
                tiny_vae: tiny_vae.clone(),
                strength: *strength,
                image_guidance: *image_guidance,
                timestep_spacing: timestep_spacing.clone(),
                text_weights: text_weights.clone(),
                unet_weights: unet_weights.clone(),
                transformer: absolute(transformer),
                text_encoder_2: absolute(text_encoder_2),
                text_encoder_3: absolute(text_encoder_3),
                updated_at: 0,
            };
            let v = run_admin(
                dir,
                AdminRequest::ModelMap {
                    tier: tier.clone(),
                    mapping: Box::new(mapping),
                },
            )
            .await?;
            print(&v, *json, |v| {
                let settings = settings_text(&v["settings"]);
                format!(
                    "{} is drawn by {} ({settings})",
                    v["tier"].as_str().unwrap_or_default(),
                    v["mapping"]["model"].as_str().unwrap_or_default()
                )
            });
            Ok(())
        }
        ModelsCommand::Unmap { tier, json } => {
            let v = run_admin(dir, AdminRequest::ModelUnmap { tier: tier.clone() }).await?;
            print(&v, *json, |v| {
                format!(
                    "{} is drawn by the built-in painter again (was {})",
                    v["tier"].as_str().unwrap_or_default(),
                    v["removed"]["model"].as_str().unwrap_or_default()
                )
            });
            Ok(())
        }
        ModelsCommand::Pull {
            repo,
            yes,
            revision,
            variant,
            name,
            json,
        } => {
            // A catalogue name: its repository, variant and name.
            let known = (!repo.contains('/'))
                .then(|| crate::models::known(repo))
                .flatten();
            let (repo, variant, name) = match &known {
                Some(k) => (
                    k.repo.to_string(),
                    variant.clone().or(k.variant.map(str::to_string)),
                    name.clone().unwrap_or_else(|| k.id.to_string()),
                ),
                None => (
                    repo.clone(),
                    variant.clone(),
                    name.clone().unwrap_or_else(|| name_from_repo(repo)),
                ),
            };
            if let Some(k) = &known
                && !*json
            {
                eprintln!(
                    "{}: {} ({}). Licence: {} — {}{}",
                    k.id,
                    k.title,
                    k.repo,
                    k.licence.name,
                    k.licence.url,
                    if k.licence.commercial {
                        ""
                    } else {
                        " (non-commercial: pictures may not be used commercially)"
                    }
                );
            }
            let interactive = {
                use std::io::IsTerminal;
                !*json && !*yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
            };
            let quiet = *json;
            let approve = std::sync::Arc::new(move |bytes: u64, files: usize| {
                if !quiet {
                    eprintln!(
                        "{files} files, {} to download",
                        crate::bounded::size_text(bytes)
                    );
                }
                if !interactive || bytes <= 1 << 30 {
                    return true;
                }
                eprint!("Download {}? [y/N] ", crate::bounded::size_text(bytes));
                let mut answer = String::new();
                let _ = std::io::stdin().read_line(&mut answer);
                matches!(answer.trim(), "y" | "Y" | "yes" | "Yes")
            });
            let repo = &repo;
            let variant = &variant;
            crate::models::check_name(&name)?;
            if server_running(&dir).await {
                return pull_in_server(&dir, repo, revision, variant.clone(), &name, *json).await;
            }
            let models_dir = dir.join("models");
            crate::store::private_dir(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            std::fs::create_dir_all(&models_dir)
                .with_context(|| format!("cannot create {}", models_dir.display()))?;
            let pull = crate::models::hub::Pull {
                endpoint: std::env::var("HF_ENDPOINT")
                    .ok()
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| crate::models::hub::DEFAULT_ENDPOINT.to_string()),
                token: std::env::var("HF_TOKEN").ok(),
                repo: repo.clone(),
                revision: revision.clone(),
                variant: variant.clone(),
                dest: models_dir.join(&name),
                progress: !*json,
                approve: Some(approve),
                sink: None,
                extras: crate::models::hub::extras_for(repo),
            };
            let report = crate::models::hub::pull(&pull).await?;
            let source = format!("{}@{}", report.repo, report.commit);
            let registered = run_admin(
                dir,
                AdminRequest::ModelAdd {
                    name: name.clone(),
                    path: std::fs::canonicalize(&report.path)?.display().to_string(),
                    source: Some(source),
                    sha256: None,
                    lora_for: None,
                },
            )
            .await?;
            let v = serde_json::json!({"pull": report, "model": registered["model"]});
            print(&v, *json, |v| {
                format!(
                    "pulled {} files ({:.1} MiB, {:.1} MiB resumed) and installed {}",
                    v["pull"]["files"],
                    v["pull"]["bytes"].as_u64().unwrap_or(0) as f64 / 1048576.0,
                    v["pull"]["resumed_bytes"].as_u64().unwrap_or(0) as f64 / 1048576.0,
                    describe_model(&v["model"])
                )
            });
            Ok(())
        }
    }
}

/// A tier's settings on one line (`steps = 1, guidance = 0.0, …`), the model apart.
fn settings_text(settings: &Value) -> String {
    settings
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| *k != "model")
                .map(|(k, v)| format!("{k} = {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// Whether a server has the store of `dir` open now.
async fn server_running(dir: &std::path::Path) -> bool {
    let db = dir.join("pictor.redb");
    if !db.exists() {
        return false;
    }
    matches!(
        tokio::task::spawn_blocking(move || Store::open(&db)).await,
        Ok(Err(StoreError::AlreadyOpen))
    )
}

/// `models pull` while the server runs: the server downloads (so the console shows it, and a
/// restart resumes it); this follows its progress until it ends. Interrupting this command
/// leaves the download running in the server.
async fn pull_in_server(
    dir: &std::path::Path,
    repo: &str,
    revision: &str,
    variant: Option<String>,
    name: &str,
    json: bool,
) -> anyhow::Result<()> {
    let req = AdminRequest::ModelPull {
        repo: repo.to_string(),
        revision: revision.to_string(),
        variant,
        name: name.to_string(),
    };
    remote::execute(dir, &req).await?;
    if !json {
        eprintln!(
            "the running server is downloading {repo} as {name} (Ctrl+C leaves it running; the console shows it too)"
        );
    }
    let mut last = String::new();
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let list = remote::execute(dir, &AdminRequest::PullList).await?;
        let Some(p) = list["pulls"]
            .as_array()
            .and_then(|a| a.iter().find(|p| p["name"] == name))
            .cloned()
        else {
            bail!("the server no longer lists the download of {name}");
        };
        let (done, total) = (
            p["bytes_done"].as_u64().unwrap_or(0),
            p["bytes_total"].as_u64().unwrap_or(0),
        );
        if !json {
            let line = format!(
                "{} / {}  {}/s  {}",
                crate::bounded::size_text(done),
                crate::bounded::size_text(total),
                crate::bounded::size_text(p["rate"].as_u64().unwrap_or(0)),
                p["eta_seconds"]
                    .as_u64()
                    .map(|s| format!("{s} s left"))
                    .unwrap_or_default()
            );
            if line != last {
                use std::io::IsTerminal;
                if std::io::stderr().is_terminal() {
                    eprint!("\r{line}\x1b[K");
                } else {
                    eprintln!("{line}");
                }
                last = line;
            }
        }
        match p["status"].as_str() {
            Some("running") => continue,
            Some("done") => {
                let models = run_admin(dir.to_path_buf(), AdminRequest::ModelList).await?;
                let model = models["models"]
                    .as_array()
                    .and_then(|a| a.iter().find(|m| m["name"] == name))
                    .cloned()
                    .unwrap_or_default();
                let v = serde_json::json!({"pull": p, "model": model});
                print(&v, json, |v| {
                    format!("\ninstalled {}", describe_model(&v["model"]))
                });
                return Ok(());
            }
            Some("cancelled") => bail!("the download of {name} was cancelled"),
            _ => bail!(
                "the download of {name} failed: {}",
                p["error"].as_str().unwrap_or("?")
            ),
        }
    }
}

/// What draws each tier, for `config show`: the config file's `[diffusion.<tier>]` first, then
/// the stored mapping, else the painter; settings with the family preset filled in.
pub(crate) async fn tier_lines(
    dir: &std::path::Path,
    has_store: bool,
    config: Option<&toml::Table>,
) -> Vec<Value> {
    use crate::store::models::{ModelRecord, TIER_NAMES, TierMapping};
    let (mut installed, mut stored) = (Vec::<ModelRecord>::new(), serde_json::Map::new());
    if has_store {
        if let Ok(v) = run_admin(dir.to_path_buf(), AdminRequest::ModelList).await {
            installed = serde_json::from_value(v["models"].clone()).unwrap_or_default();
        }
        if let Ok(v) = run_admin(dir.to_path_buf(), AdminRequest::TierList).await {
            stored = v["tiers"].as_object().cloned().unwrap_or_default();
        }
    }
    let from_config = |tier: &str| {
        config?.iter().find_map(|(k, v)| {
            let id = match k.as_str() {
                "edit" => "edit",
                k => crate::render::Model::parse(k)?.id(),
            };
            (id == tier).then(|| v.as_table().cloned()).flatten()
        })
    };
    TIER_NAMES
        .iter()
        .map(|tier| {
            let (source, given) = match from_config(tier) {
                Some(t) => ("config file", Some(t)),
                None => match stored
                    .get(*tier)
                    .and_then(|v| serde_json::from_value::<TierMapping>(v.clone()).ok())
                {
                    Some(m) => ("console", Some(crate::render::tiers::mapping_table(&m))),
                    None => ("default", None),
                },
            };
            let Some(given) = given else {
                return serde_json::json!({"tier": tier, "source": source, "model": null});
            };
            let model = given.get("model").and_then(toml::Value::as_str);
            match crate::render::tiers::effective(tier, &given, &installed) {
                Ok(t) => serde_json::json!({"tier": tier, "source": source, "model": model, "settings": t}),
                Err(e) => serde_json::json!({"tier": tier, "source": source, "model": model, "problem": e}),
            }
        })
        .collect()
}

/// Whether the command works on the store (and so must not make a new, empty one by mistake).
fn uses_store(command: &Command) -> bool {
    !matches!(
        command,
        Command::Serve(_)
            | Command::Render(_)
            | Command::Restore { .. }
            | Command::Config(_)
            | Command::Openapi { .. }
            | Command::Gpu { .. }
    )
}

/// Runs a non-serve command.
pub async fn run_command(cli: &Cli, command: &Command) -> anyhow::Result<()> {
    // Needs no data folder or configuration (the CPU build's probe runs it).
    if let Command::Gpu { json } = command {
        return gpu_command(*json).await;
    }
    let dir = data_dir(cli)?;
    if uses_store(command) && !cli.init && !dir.join("pictor.redb").exists() {
        bail!(
            "there is no Pictor store in {} (the data folder). Give the folder you meant with \
             --data-dir or PICTOR_DATA_DIR, start the server there once (`pictor serve`), or pass \
             --init to create an empty store in this one",
            dir.display()
        );
    }
    match command {
        Command::Serve(_) => unreachable_serve(),
        Command::Gpu { json } => gpu_command(*json).await,
        Command::Render(args) => {
            // The config file's [diffusion] mappings, for `--model fast` and the like.
            let diffusion = load_config(cli, None)
                .ok()
                .and_then(|(_, _, l)| l.diffusion);
            render::run(args, dir, diffusion).await
        }
        Command::Backup { to, json } => {
            let to =
                std::path::absolute(to).with_context(|| format!("bad path {}", to.display()))?;
            let db_path = dir.join("pictor.redb");
            if !db_path.exists() {
                bail!("no Pictor data in {}", dir.display());
            }
            let opened = tokio::task::spawn_blocking(move || Store::open(&db_path)).await?;
            let v = match opened {
                Ok(store) => {
                    note_direct(&dir);
                    let d = dir.clone();
                    tokio::task::spawn_blocking(move || crate::backup::backup(&store, &d, &to))
                        .await??
                }
                Err(StoreError::AlreadyOpen) => remote::backup(&dir, &to).await?,
                Err(e) => return Err(e.into()),
            };
            print(&v, *json, |v| {
                format!(
                    "backup written to {} ({} bytes, {} files, {} users, {} jobs)",
                    v["backup"].as_str().unwrap_or_default(),
                    v["bytes"],
                    v["files"],
                    v["users"],
                    v["jobs"]
                )
            });
            Ok(())
        }
        Command::Restore { from, json } => {
            let (from, d) = (from.clone(), dir.clone());
            let v =
                tokio::task::spawn_blocking(move || crate::backup::restore(&from, &d)).await??;
            print(&v, *json, |v| {
                format!(
                    "restored into {} ({} files, {} users, {} jobs)",
                    v["restored"].as_str().unwrap_or_default(),
                    v["files"],
                    v["users"],
                    v["jobs"]
                )
            });
            Ok(())
        }
        Command::Config(ConfigCommand::Show { json }) => {
            let (_, mut effective, layers) = load_config(cli, None)?;
            // Settings not given in the configuration are the stored ones (or the defaults a
            // new store starts with): show those values, not a pointer elsewhere.
            let stored = if dir.join("pictor.redb").exists() {
                run_admin(dir.clone(), AdminRequest::SettingsList).await?
            } else {
                let entries = crate::store::Settings::default().entries();
                Value::Object(entries.into_iter().map(|(k, v)| (k, v.into())).collect())
            };
            let has_store = dir.join("pictor.redb").exists();
            for e in effective.iter_mut() {
                if e.source == config::Source::Default
                    && let Some(setting) = config::setting_for(e.key)
                    && let Some(v) = stored.get(setting)
                {
                    e.value = v.to_string();
                    if has_store {
                        e.source = config::Source::Store;
                    }
                }
            }
            let file = layers.file_path.as_ref().map(|p| p.display().to_string());
            let tiers = tier_lines(&dir, has_store, layers.diffusion.as_ref()).await;
            if *json {
                let values: serde_json::Map<String, Value> = effective
                    .iter()
                    .map(|e| {
                        (
                            e.key.to_string(),
                            serde_json::json!({"value": e.value, "source": e.source.to_string()}),
                        )
                    })
                    .collect();
                let backends: Vec<String> = layers
                    .backends
                    .as_ref()
                    .map(|b| b.keys().cloned().collect())
                    .unwrap_or_default();
                println!(
                    "{}",
                    serde_json::json!({"config_file": file, "values": values, "backends": backends, "tiers": tiers})
                );
            } else {
                match &file {
                    Some(f) => println!("# config file: {f}"),
                    None => println!(
                        "# no config file (create {} or pass --config)",
                        config::default_config_file()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default()
                    ),
                }
                let width = effective.iter().map(|e| e.key.len()).max().unwrap_or(0);
                for e in &effective {
                    println!("{:width$} = {}    # {}", e.key, e.value, e.source);
                }
                if let Some(b) = &layers.backends {
                    for model in b.keys() {
                        println!("backends.{model} = (table)    # config file");
                    }
                }
                for t in &tiers {
                    let name = format!("tiers.{}", t["tier"].as_str().unwrap_or_default());
                    let origin = t["source"].as_str().unwrap_or_default();
                    match t["model"].as_str() {
                        None => println!("{name:width$} = built-in painter    # {origin}"),
                        Some(model) => {
                            let settings = settings_text(&t["settings"]);
                            let problem = t["problem"]
                                .as_str()
                                .map(|p| format!(" — NOT APPLIED: {p}"))
                                .unwrap_or_default();
                            println!("{name:width$} = {model} ({settings})    # {origin}{problem}");
                        }
                    }
                }
            }
            Ok(())
        }
        Command::Openapi {
            public_url,
            no_multipart,
        } => {
            let url = public_url.trim_end_matches('/');
            println!("{}", crate::api::spec(url, !no_multipart));
            Ok(())
        }
        Command::User(UserCommand::Add {
            email,
            name,
            password_stdin,
            admin,
            pro,
            credits,
            json,
        }) => {
            let password_hash = if *password_stdin {
                let pw = read_password_line()?;
                Some(crate::auth::password::hash_async(pw).await?)
            } else {
                None
            };
            let req = AdminRequest::UserAdd {
                email: email.clone(),
                name: name.clone(),
                password_hash,
                admin: *admin,
                pro: *pro,
                credits: *credits,
            };
            let v = run_admin(dir, req).await?;
            print(&v, *json, |v| format!("created {}", describe_user(v)));
            Ok(())
        }
        Command::User(UserCommand::Update {
            email,
            pro,
            banned,
            admin,
            daily_limit,
            approve,
            json,
        }) => {
            let req = AdminRequest::UserUpdate {
                email: email.clone(),
                pro: *pro,
                banned: *banned,
                daily_limit: *daily_limit,
                admin: *admin,
                approve: *approve,
            };
            let v = run_admin(dir, req).await?;
            print(&v, *json, |v| format!("updated {}", describe_user(v)));
            Ok(())
        }
        Command::User(UserCommand::ResetLink { email, json }) => {
            let mut v = run_admin(
                dir,
                AdminRequest::UserResetLink {
                    email: email.clone(),
                },
            )
            .await?;
            if v.get("reset_url").is_none() {
                // Opened directly: the address the server will answer on.
                let config = load_config(cli, None)?.0;
                let base = config
                    .public_url
                    .clone()
                    .unwrap_or_else(|| format!("http://{}", config.listen));
                crate::ops::complete_urls(&mut v, &base);
            }
            print(&v, *json, |v| {
                format!(
                    "{}\n(works once, for 24 hours; give it to {} over a channel you trust)",
                    v["reset_url"].as_str().unwrap_or_default(),
                    v["email"].as_str().unwrap_or_default()
                )
            });
            Ok(())
        }
        Command::User(UserCommand::Remove { email, yes, json }) => {
            if !yes {
                bail!(
                    "this deletes {email}'s account, pictures and keys for good; run it again with --yes"
                );
            }
            let v = run_admin(
                dir,
                AdminRequest::UserRemove {
                    email: email.clone(),
                },
            )
            .await?;
            print(&v, *json, |v| {
                format!(
                    "deleted {} ({}): {} jobs, {} files, {} credits written off",
                    v["email"].as_str().unwrap_or_default(),
                    v["user_id"].as_str().unwrap_or_default(),
                    v["jobs_removed"],
                    v["files_removed"],
                    v["balance_written_off"]
                )
            });
            Ok(())
        }
        Command::User(UserCommand::Passwd { email, json, .. }) => {
            let pw = read_password_line()?;
            crate::auth::password::check_policy(&pw)
                .map_err(|e| anyhow::anyhow!("the password is not accepted: {e}"))?;
            let password_hash = crate::auth::password::hash_async(pw).await?;
            let v = run_admin(
                dir,
                AdminRequest::UserPasswd {
                    email: email.clone(),
                    password_hash,
                },
            )
            .await?;
            print(&v, *json, |v| {
                format!(
                    "password set for {}; {} session(s) ended, {} app grant(s) revoked",
                    v["email"].as_str().unwrap_or_default(),
                    v["sessions_ended"],
                    v["grants_revoked"]
                )
            });
            Ok(())
        }
        Command::User(UserCommand::Show { email, json }) => {
            let v = run_admin(
                dir,
                AdminRequest::UserShow {
                    email: email.clone(),
                },
            )
            .await?;
            print(&v, *json, describe_user);
            Ok(())
        }
        Command::User(UserCommand::Import { from, json }) => {
            let text = std::fs::read_to_string(from)
                .with_context(|| format!("cannot read {}", from.display()))?;
            let parsed = crate::auth::import::parse(&text).map_err(anyhow::Error::msg)?;
            let mut v = run_admin(
                dir,
                AdminRequest::UserImport {
                    records: parsed.records,
                },
            )
            .await?;
            let mut refused: Vec<Value> = parsed
                .refused
                .iter()
                .map(|r| serde_json::json!({"at": r.at, "reason": r.reason}))
                .collect();
            if let Some(more) = v["refused"].as_array() {
                refused.extend(more.iter().cloned());
            }
            v["refused"] = Value::Array(refused);
            print(&v, *json, |v| {
                let mut lines = vec![format!(
                    "imported {}, skipped {} (already present), refused {}",
                    v["imported"],
                    v["skipped"].as_array().map(Vec::len).unwrap_or(0),
                    v["refused"].as_array().map(Vec::len).unwrap_or(0)
                )];
                for s in v["skipped"].as_array().into_iter().flatten() {
                    lines.push(format!("  skipped {}", s.as_str().unwrap_or_default()));
                }
                for r in v["refused"].as_array().into_iter().flatten() {
                    lines.push(format!(
                        "  refused {}: {}",
                        r["at"].as_str().unwrap_or_default(),
                        r["reason"].as_str().unwrap_or_default()
                    ));
                }
                lines.join("\n")
            });
            Ok(())
        }
        Command::User(UserCommand::List { json }) => {
            let v = run_admin(dir, AdminRequest::UserList).await?;
            print(&v, *json, |v| {
                v["users"]
                    .as_array()
                    .map(|a| a.iter().map(describe_user).collect::<Vec<_>>().join("\n"))
                    .unwrap_or_default()
            });
            Ok(())
        }
        Command::Credits(CreditsCommand::Grant {
            email,
            amount,
            json,
        }) => {
            let v = run_admin(
                dir,
                AdminRequest::CreditsGrant {
                    email: email.clone(),
                    amount: *amount,
                },
            )
            .await?;
            print(&v, *json, |v| {
                format!(
                    "{} balance={}",
                    v["email"].as_str().unwrap_or_default(),
                    v["balance"]
                )
            });
            Ok(())
        }
        Command::Key(KeyCommand::Issue { email, json }) => {
            let v = run_admin(
                dir,
                AdminRequest::KeyIssue {
                    email: email.clone(),
                },
            )
            .await?;
            if !*json {
                eprintln!(
                    "New API key for {} (shown once; the previous key no longer works):",
                    email.trim()
                );
            }
            print(&v, *json, |v| {
                v["api_key"].as_str().unwrap_or_default().to_string()
            });
            Ok(())
        }
        Command::Client(ClientCommand::LogoutUris {
            name,
            post_logout_redirect_uris,
            json,
        }) => {
            let req = AdminRequest::ClientLogoutUris {
                name: name.clone(),
                post_logout_redirect_uris: post_logout_redirect_uris.clone(),
            };
            let v = run_admin(dir, req).await?;
            print(&v, *json, |v| {
                format!(
                    "{}: post-logout redirect URIs {}",
                    v["app_name"].as_str().unwrap_or_default(),
                    v["post_logout_redirect_uris"]
                )
            });
            Ok(())
        }
        Command::Client(ClientCommand::Add {
            name,
            redirect_uris,
            post_logout_redirect_uris,
            display_name,
            logo_uri,
            homepage,
            json,
        }) => {
            let req = AdminRequest::ClientAdd {
                name: name.clone(),
                redirect_uris: redirect_uris.clone(),
                post_logout_redirect_uris: post_logout_redirect_uris.clone(),
                profile: crate::store::oauth::ClientProfile {
                    display_name: display_name.clone(),
                    logo_uri: logo_uri.clone(),
                    homepage: homepage.clone(),
                },
            };
            let v = run_admin(dir, req).await?;
            if !*json {
                eprintln!("Client registered. Keep the secret on your server; it is shown once.");
            }
            print(&v, *json, |v| {
                format!(
                    "app_name:   {}\napp_secret: {}",
                    v["app_name"].as_str().unwrap_or_default(),
                    v["app_secret"].as_str().unwrap_or_default()
                )
            });
            Ok(())
        }
        Command::Client(ClientCommand::List { json }) => {
            let v = run_admin(dir, AdminRequest::ClientList).await?;
            print(&v, *json, |v| {
                v["clients"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|c| {
                                format!(
                                    "{}  {}",
                                    c["app_name"].as_str().unwrap_or_default(),
                                    c["redirect_uris"]
                                )
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default()
            });
            Ok(())
        }
        Command::Client(ClientCommand::Remove { name, json }) => {
            let v = run_admin(dir, AdminRequest::ClientRemove { name: name.clone() }).await?;
            print(&v, *json, |v| {
                format!("removed {}", v["removed"].as_str().unwrap_or_default())
            });
            Ok(())
        }
        Command::Models(cmd) => models_command(dir, cmd).await,
        Command::Backends(BackendsCommand::Status { json }) => {
            // Endpoint health lives in the running server, reached through its admin channel
            // (the store is not opened: that could race a server starting up).
            if !crate::config::admin_file(&dir).exists() {
                bail!(
                    "the server is not running (for {}): endpoint health lives in the running server",
                    dir.display()
                );
            }
            let v = remote::backends(&dir).await.map_err(|e| {
                anyhow::anyhow!("the server is not running (for {}): {e}", dir.display())
            })?;
            print(&v, *json, describe_backends);
            Ok(())
        }
        Command::Keys(KeysCommand::Rotate { json }) => {
            let v = run_admin(dir, AdminRequest::KeysRotate).await?;
            print(&v, *json, |v| {
                format!("new signing key {}", v["kid"].as_str().unwrap_or_default())
            });
            Ok(())
        }
        Command::Settings(SettingsCommand::List { json }) => {
            let v = run_admin(dir, AdminRequest::SettingsList).await?;
            print(&v, *json, |v| {
                v.as_object()
                    .map(|o| {
                        o.iter()
                            .map(|(k, v)| format!("{k} = {v}"))
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default()
            });
            Ok(())
        }
        Command::Settings(SettingsCommand::Set { key, value, json }) => {
            let v = run_admin(
                dir,
                AdminRequest::SettingsSet {
                    key: key.clone(),
                    value: *value,
                },
            )
            .await?;
            print(&v, *json, |v| {
                format!("{} = {}", v["key"].as_str().unwrap_or_default(), v["value"])
            });
            Ok(())
        }
    }
}

fn unreachable_serve() -> anyhow::Result<()> {
    bail!("serve is handled by main")
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every flag and argument of every command says what it is for.
    #[test]
    fn every_flag_has_help_text() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") || arg.is_hide_set() {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} --{id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "pictor", &mut missing);
        assert!(missing.is_empty(), "flags without help: {missing:?}");
    }
}
