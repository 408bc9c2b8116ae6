//! Admin operations shared by the CLI's two paths: run directly on the store file when the
//! server is stopped, or sent to the running server over its admin channel. Both call
//! [`execute`], so they behave the same.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::apikey;
use crate::clock::Millis;
use crate::store::{NewUser, Store, StoreError, UserPatch, UserRecord};

/// Adds `reset_url` (the public URL + `reset_path`) to an answer that has a reset path.
pub fn complete_urls(value: &mut Value, public_url: &str) {
    if let Some(path) = value.get("reset_path").and_then(Value::as_str) {
        let url = format!("{}{path}", public_url.trim_end_matches('/'));
        value["reset_url"] = json!(url);
    }
}

/// One admin command. Passwords travel only as Argon2id hashes (hashed by the CLI).
#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum AdminRequest {
    UserAdd {
        email: String,
        name: Option<String>,
        password_hash: Option<String>,
        admin: bool,
        pro: bool,
        credits: u32,
    },
    UserUpdate {
        email: String,
        pro: Option<bool>,
        banned: Option<bool>,
        daily_limit: Option<u32>,
        admin: Option<bool>,
        /// Release the account's held sign-up credits.
        #[serde(default)]
        approve: bool,
    },
    UserShow {
        email: String,
    },
    UserList,
    CreditsGrant {
        email: String,
        amount: i64,
    },
    KeyIssue {
        email: String,
    },
    /// A one-time password-reset link (valid 24 hours) for the person; the answer carries its
    /// path (`reset_path`), and its full address (`reset_url`) once the caller knows the public URL.
    UserResetLink {
        email: String,
    },
    /// Deletes an account and its pictures (see `store::erase`).
    UserRemove {
        email: String,
    },
    /// Sets a person's password (an Argon2id hash made by the CLI): their sessions end and the
    /// apps they signed in to must ask them again.
    UserPasswd {
        email: String,
        password_hash: String,
    },
    SettingsList,
    SettingsSet {
        key: String,
        value: u32,
    },
    ClientAdd {
        name: String,
        redirect_uris: Vec<String>,
        #[serde(default)]
        post_logout_redirect_uris: Vec<String>,
        #[serde(default)]
        profile: crate::store::oauth::ClientProfile,
    },
    /// Replaces a client's post-logout redirect URIs (none: logout ends on Pictor's page).
    ClientLogoutUris {
        name: String,
        post_logout_redirect_uris: Vec<String>,
    },
    ClientList,
    UserImport {
        records: Vec<crate::auth::import::ImportRecord>,
    },
    ClientRemove {
        name: String,
    },
    KeysRotate,
    /// Registers a diffusion model (an absolute path to a diffusers folder or a checkpoint).
    ModelAdd {
        name: String,
        path: String,
        #[serde(default)]
        source: Option<String>,
        /// SHA-256 of a single-file checkpoint (hex), hashed by the caller (a LoRA's addnet
        /// hash).
        #[serde(default)]
        sha256: Option<String>,
        /// The architecture a LoRA is for, when its file does not tell (`--for`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lora_for: Option<crate::models::Arch>,
    },
    ModelList,
    ModelRemove {
        name: String,
    },
    /// Maps a tier (`fast`, `artist`, `0.2plus`, `edit`) to an installed model; settings not
    /// given come from the model's family preset.
    ModelMap {
        tier: String,
        mapping: Box<crate::store::models::TierMapping>,
    },
    ModelUnmap {
        tier: String,
    },
    /// Starts a download in the running server (`models::pulls`); the CLI pulls by itself when
    /// no server runs.
    ModelPull {
        repo: String,
        revision: String,
        #[serde(default)]
        variant: Option<String>,
        name: String,
    },
    /// The running server's downloads.
    PullList,
    /// Stops a running server's download.
    PullCancel {
        name: String,
    },
    /// The stored tier mappings (the running server's view, config file included, is in
    /// `GET /api/pictor/v1/models` and the console).
    TierList,
}

impl AdminRequest {
    /// Whether a running server must re-read its tier mappings after this request.
    pub fn changes_tiers(&self) -> bool {
        matches!(
            self,
            AdminRequest::ModelAdd { .. }
                | AdminRequest::ModelRemove { .. }
                | AdminRequest::ModelMap { .. }
                | AdminRequest::ModelUnmap { .. }
        )
    }
}

impl std::fmt::Debug for AdminRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names the operation only: requests may carry password hashes.
        let v = serde_json::to_value(self).ok();
        let op = v
            .as_ref()
            .and_then(|v| v.get("op"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        write!(f, "AdminRequest({op})")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// Bad input: unknown e-mail, duplicate user, value out of range.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Store(StoreError),
}

impl From<StoreError> for OpError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(m) | StoreError::Conflict(m) | StoreError::Invalid(m) => {
                OpError::Invalid(m)
            }
            other => OpError::Store(other),
        }
    }
}

pub fn user_json(u: &UserRecord, store: &Store, now: Millis) -> Result<Value, StoreError> {
    let settings = store.settings()?;
    Ok(json!({
        "user_id": u.user_id().to_string(),
        "email": u.email,
        "name": u.name,
        "admin": u.admin,
        "pro": u.pro,
        "banned": u.banned,
        "balance": u.balance,
        "daily_limit": settings.daily_limit_for(u.pro, u.daily_limit),
        "daily_used": store.daily_used(u.id, now)?,
        "has_api_key": u.api_key_hash.is_some(),
        "pending_credits": u.pending_credits,
    }))
}

/// Runs one admin command against the store. Returns the JSON object the CLI prints.
/// Runs `req` as the command line (`cli`): see [`execute_as`].
pub fn execute(
    store: &Store,
    secrets: &crate::idp::crypto::SecretBox,
    req: AdminRequest,
    now: Millis,
) -> Result<Value, OpError> {
    execute_as(store, secrets, req, now, "cli")
}

/// What a change is called in the audit log, whom it is about (by e-mail), and its detail.
/// `None` for requests that change nothing.
fn audit_of(req: &AdminRequest, store: &Store) -> Option<(&'static str, Option<String>, String)> {
    let on = |e: &str| Some(e.to_string());
    Some(match req {
        AdminRequest::UserAdd {
            email,
            admin,
            pro,
            credits,
            ..
        } => (
            "user.add",
            on(email),
            format!("admin {admin}, PRO {pro}, {credits} credits"),
        ),
        AdminRequest::UserUpdate {
            email,
            pro,
            banned,
            daily_limit,
            admin,
            approve,
        } => {
            let mut parts = Vec::new();
            if let Some(v) = pro {
                parts.push(format!("PRO {v}"));
            }
            if let Some(v) = banned {
                parts.push(format!("banned {v}"));
            }
            if let Some(v) = admin {
                parts.push(format!("admin {v}"));
            }
            if let Some(v) = daily_limit {
                parts.push(format!("daily limit {v}"));
            }
            if *approve {
                parts.push("approved".into());
            }
            ("user.update", on(email), parts.join(", "))
        }
        AdminRequest::CreditsGrant { email, amount } => {
            ("credits.grant", on(email), format!("{amount:+} credits"))
        }
        AdminRequest::KeyIssue { email } => {
            ("api_key.issue", on(email), "default key replaced".into())
        }
        AdminRequest::UserResetLink { email } => (
            "user.reset_link",
            on(email),
            "password-reset link made".into(),
        ),
        AdminRequest::UserPasswd { email, .. } => ("user.passwd", on(email), "password set".into()),
        AdminRequest::UserRemove { email } => ("user.remove", on(email), "account deleted".into()),
        AdminRequest::SettingsSet { key, value } => {
            let key = crate::store::settings::canonical_key(key);
            let old = store
                .settings()
                .ok()
                .and_then(|s| s.entries().into_iter().find(|(k, _)| *k == key))
                .map(|(_, v)| v.to_string())
                .unwrap_or_else(|| "?".into());
            ("settings.set", None, format!("{key} {old} → {value}"))
        }
        AdminRequest::ClientAdd { name, .. } => ("client.add", None, name.clone()),
        AdminRequest::ClientLogoutUris { name, .. } => ("client.logout_uris", None, name.clone()),
        AdminRequest::ClientRemove { name } => ("client.remove", None, name.clone()),
        AdminRequest::UserImport { records } => {
            ("user.import", None, format!("{} accounts", records.len()))
        }
        AdminRequest::KeysRotate => ("signing_key.rotate", None, String::new()),
        AdminRequest::ModelAdd { name, path, .. } => ("model.add", None, format!("{name} {path}")),
        AdminRequest::ModelRemove { name } => ("model.remove", None, name.clone()),
        AdminRequest::ModelMap { tier, mapping } => (
            "model.map",
            None,
            format!(
                "{tier} → {} {}",
                mapping.model,
                serde_json::to_string(&crate::render::tiers::mapping_table(mapping))
                    .unwrap_or_default()
            ),
        ),
        AdminRequest::ModelUnmap { tier } => ("model.unmap", None, tier.clone()),
        AdminRequest::TierList
        | AdminRequest::ModelPull { .. }
        | AdminRequest::PullList
        | AdminRequest::PullCancel { .. } => return None,
        AdminRequest::UserShow { .. }
        | AdminRequest::UserList
        | AdminRequest::SettingsList
        | AdminRequest::ClientList
        | AdminRequest::ModelList => return None,
    })
}

/// Runs one admin request for `actor` (`cli`, or `usr_… (e-mail)` of an administrator on the
/// admin page); a change that succeeded is written to the audit log.
pub fn execute_as(
    store: &Store,
    secrets: &crate::idp::crypto::SecretBox,
    req: AdminRequest,
    now: Millis,
    actor: &str,
) -> Result<Value, OpError> {
    let audit = audit_of(&req, store).map(|(action, email, detail)| {
        // Looked up before the change: a removed account cannot be found after it.
        let user_id = email
            .and_then(|e| store.user_by_email(&e).ok().flatten())
            .map(|u| u.id);
        (action, user_id, detail)
    });
    let result = run(store, secrets, req, now)?;
    if let Some((action, mut user_id, detail)) = audit {
        if user_id.is_none() && action == "user.add" {
            user_id = result["user_id"]
                .as_str()
                .and_then(crate::store::UserId::parse)
                .map(|u| u.0);
        }
        if let Err(e) = store.audit(actor, action, user_id, &detail, now) {
            tracing::warn!(error = %e, action, "writing the audit log");
        }
    }
    Ok(result)
}

fn run(
    store: &Store,
    secrets: &crate::idp::crypto::SecretBox,
    req: AdminRequest,
    now: Millis,
) -> Result<Value, OpError> {
    match req {
        AdminRequest::UserAdd {
            email,
            name,
            password_hash,
            admin,
            pro,
            credits,
        } => {
            let user = store.create_user(
                NewUser {
                    email,
                    name,
                    password_hash,
                    admin,
                    pro,
                    credits,
                    pending_credits: 0,
                },
                now,
            )?;
            Ok(user_json(&user, store, now)?)
        }
        AdminRequest::UserUpdate {
            email,
            pro,
            banned,
            daily_limit,
            admin,
            approve,
        } => {
            if pro.is_none()
                && banned.is_none()
                && daily_limit.is_none()
                && admin.is_none()
                && !approve
            {
                return Err(OpError::Invalid(
                    "nothing to change: give --pro, --banned, --daily-limit, --admin or --approve"
                        .into(),
                ));
            }
            let patch = UserPatch {
                pro,
                banned,
                daily_limit: daily_limit.map(Some),
                name: None,
                admin,
                approve,
            };
            let user = store.update_user(&email, patch, now)?;
            Ok(user_json(&user, store, now)?)
        }
        AdminRequest::UserShow { email } => {
            let user = store.require_user(&email)?;
            Ok(user_json(&user, store, now)?)
        }
        AdminRequest::UserList => {
            let users = store.users()?;
            let list = users
                .iter()
                .map(|u| user_json(u, store, now))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(json!({ "users": list }))
        }
        AdminRequest::CreditsGrant { email, amount } => {
            let user = store.grant_credits(&email, amount, now)?;
            Ok(json!({ "email": user.email, "balance": user.balance }))
        }
        AdminRequest::UserResetLink { email } => {
            let user = store.require_user(&email)?;
            let token = crate::auth::secret::random_token("");
            let record =
                store.issue_password_reset(user.id, crate::auth::secret::sha256(&token), now)?;
            tracing::info!(user = %user.user_id(), "password-reset link issued");
            Ok(json!({
                "email": user.email,
                "reset_path": format!("/reset?token={token}"),
                "expires_at": record.expires_at,
            }))
        }
        AdminRequest::UserRemove { email } => {
            let user = store.require_user(&email)?;
            let erased = store.erase_user(user.id, now)?;
            let files = crate::store::erase::remove_files(store.folder(), &erased);
            tracing::info!(user = %user.user_id(), jobs = erased.jobs, files, "account deleted");
            Ok(json!({
                "email": erased.email,
                "user_id": user.user_id().to_string(),
                "jobs_removed": erased.jobs,
                "files_removed": files,
                "sessions_ended": erased.sessions,
                "grants_revoked": erased.grants,
                "balance_written_off": erased.balance_written_off,
            }))
        }
        AdminRequest::UserPasswd {
            email,
            password_hash,
        } => {
            let user = store.require_user(&email)?;
            store.modify_user(user.id, |u| {
                u.password_hash = Some(password_hash);
                u.password_needs_rehash = false;
                Ok(())
            })?;
            let grants =
                store.revoke_user_grants(user.id, "password set by an administrator", now)?;
            let sessions = store.delete_user_sessions(user.id, None)?;
            tracing::info!(user = %user.user_id(), sessions, grants, "password set by an administrator");
            Ok(json!({"email": user.email, "sessions_ended": sessions, "grants_revoked": grants}))
        }
        AdminRequest::KeyIssue { email } => {
            let user = store.require_user(&email)?;
            let key = apikey::mint();
            store.set_api_key(user.id, key.hash, apikey::tail(&key.plaintext), now)?;
            Ok(json!({ "api_key": key.plaintext }))
        }
        AdminRequest::SettingsList => {
            let settings = store.settings()?;
            let map: serde_json::Map<String, Value> = settings
                .entries()
                .into_iter()
                .map(|(k, v)| (k, json!(v)))
                .collect();
            Ok(Value::Object(map))
        }
        AdminRequest::SettingsSet { key, value } => {
            store.set_setting(&key, value)?;
            Ok(json!({ "key": key, "value": value }))
        }
        AdminRequest::ClientAdd {
            name,
            redirect_uris,
            post_logout_redirect_uris,
            profile,
        } => {
            let secret = add_client(
                store,
                &name,
                &redirect_uris,
                &post_logout_redirect_uris,
                profile,
                now,
            )?;
            Ok(json!({ "app_name": name, "app_secret": secret }))
        }
        AdminRequest::ClientLogoutUris {
            name,
            post_logout_redirect_uris,
        } => {
            set_logout_uris(store, &name, post_logout_redirect_uris.clone())?;
            Ok(json!({ "app_name": name, "post_logout_redirect_uris": post_logout_redirect_uris }))
        }
        AdminRequest::UserImport { records } => {
            let (mut imported, mut skipped, mut refused) = (0usize, Vec::new(), Vec::new());
            for r in records {
                let email = r.email.clone();
                let new = NewUser {
                    email: r.email,
                    name: r.name,
                    password_hash: r.password_hash,
                    admin: false,
                    pro: false,
                    credits: 0,
                    pending_credits: 0,
                };
                match store.create_user(new, now) {
                    Ok(_) => imported += 1,
                    Err(StoreError::Conflict(_)) => skipped.push(email),
                    Err(StoreError::Invalid(m)) => refused.push(json!({"at": email, "reason": m})),
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(json!({"imported": imported, "skipped": skipped, "refused": refused}))
        }
        AdminRequest::ClientList => {
            let clients: Vec<Value> = store
                .clients()?
                .into_iter()
                .map(|c| json!({ "app_name": c.name, "display_name": c.profile.display_name, "logo_uri": c.profile.logo_uri, "homepage": c.profile.homepage, "redirect_uris": c.redirect_uris, "post_logout_redirect_uris": c.post_logout_redirect_uris, "created_at": c.created_at }))
                .collect();
            Ok(json!({ "clients": clients }))
        }
        AdminRequest::ClientRemove { name } => {
            store.remove_client(&name, now)?;
            Ok(json!({ "removed": name }))
        }
        AdminRequest::KeysRotate => {
            let key = crate::idp::keys::generate(now, secrets)
                .map_err(|e| OpError::Invalid(e.to_string()))?;
            let kid = key.kid.clone();
            store.add_signing_key(key, now)?;
            Ok(json!({ "kid": kid }))
        }
        AdminRequest::ModelAdd {
            name,
            path,
            source,
            sha256,
            lora_for,
        } => {
            if let Some(h) = &sha256
                && (h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                return Err(OpError::Invalid("sha256 must be 64 hex digits".into()));
            }
            crate::models::check_name(&name).map_err(|e| OpError::Invalid(e.to_string()))?;
            let p = std::path::Path::new(&path);
            if !p.is_absolute() {
                return Err(OpError::Invalid(format!("{path} is not an absolute path")));
            }
            let info = crate::models::inspect_as(p, lora_for)
                .map_err(|e| OpError::Invalid(e.to_string()))?;
            let (arch, family) = match info.kind {
                crate::models::Kind::TinyDecoder => (
                    crate::models::tiny_decoder_arch(&name, source.as_deref()),
                    None,
                ),
                crate::models::Kind::Pipeline => (
                    info.arch,
                    Some(crate::models::family_of(&info, &name, source.as_deref())),
                ),
                crate::models::Kind::Lora => (info.arch, None),
            };
            let record = crate::store::models::ModelRecord {
                kind: info.kind,
                role: info.role,
                family,
                name,
                path,
                layout: info.layout,
                arch,
                prediction: info.prediction,
                weight_bytes: info.weight_bytes,
                added_at: now,
                source,
                sha256: sha256.map(|h| h.to_ascii_lowercase()),
            };
            store.add_model(record.clone())?;
            Ok(json!({ "model": record, "tensors": info.tensors }))
        }
        AdminRequest::ModelList => Ok(json!({ "models": store.models()? })),
        AdminRequest::ModelRemove { name } => {
            let record = store.remove_model(&name)?;
            Ok(json!({ "removed": record }))
        }
        AdminRequest::ModelMap { tier, mut mapping } => {
            let installed = store.models()?;
            crate::render::tiers::check(&tier, &mapping, &installed).map_err(OpError::Invalid)?;
            mapping.updated_at = now;
            let replaced = store.map_tier(&tier, &mapping)?;
            let settings = crate::render::tiers::effective(
                &tier,
                &crate::render::tiers::mapping_table(&mapping),
                &installed,
            )
            .map_err(OpError::Invalid)?;
            Ok(
                json!({ "tier": tier, "mapping": mapping, "settings": settings, "replaced": replaced }),
            )
        }
        AdminRequest::ModelUnmap { tier } => {
            if !crate::store::models::TIER_NAMES.contains(&tier.as_str()) {
                return Err(OpError::Invalid(format!(
                    "{tier:?} is not a tier: use fast, artist, 0.2plus or edit"
                )));
            }
            let old = store.unmap_tier(&tier)?;
            Ok(json!({ "tier": tier, "removed": old }))
        }
        AdminRequest::ModelPull { .. } | AdminRequest::PullList | AdminRequest::PullCancel { .. } => {
            Err(OpError::Invalid(
                "downloads run in the server: start it, or use `pictor models pull` while it is stopped".into(),
            ))
        }
        AdminRequest::TierList => {
            let tiers: serde_json::Map<String, Value> = store
                .tiers()?
                .into_iter()
                .map(|(t, m)| (t, json!(m)))
                .collect();
            Ok(json!({ "tiers": tiers }))
        }
    }
}

/// Checks a redirect URI for registration: absolute http(s), a host, no user-info (the
/// `https://good@evil` trick), no fragment, at most 2000 characters.
pub fn check_redirect_uri(uri: &str) -> Result<(), String> {
    if uri.len() > 2000 || uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "redirect URI {uri:?} is too long or contains spaces"
        ));
    }
    let parsed = url::Url::parse(uri)
        .map_err(|e| format!("redirect URI {uri:?} is not an absolute URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("redirect URI {uri:?} must use http or https"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("redirect URI {uri:?} has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "redirect URI {uri:?} must not contain user information"
        ));
    }
    if parsed.fragment().is_some() {
        return Err(format!("redirect URI {uri:?} must not contain a fragment"));
    }
    Ok(())
}

/// Sets a client's post-logout redirect URIs, each checked like a redirect URI.
pub fn set_logout_uris(store: &Store, name: &str, uris: Vec<String>) -> Result<(), OpError> {
    check_logout_uris(&uris)?;
    store.set_client_logout_uris(name, uris)?;
    Ok(())
}

/// Trims an app's profile (blank fields are none) and checks it: a display name of at most 64
/// printable characters, a logo and a homepage that are absolute http(s) URLs.
fn check_profile(
    p: crate::store::oauth::ClientProfile,
) -> Result<crate::store::oauth::ClientProfile, OpError> {
    let clean = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let display_name = clean(p.display_name);
    if let Some(n) = &display_name
        && (n.chars().count() > 64 || n.chars().any(char::is_control))
    {
        return Err(OpError::Invalid(
            "the display name must be at most 64 characters, without control characters".into(),
        ));
    }
    let url = |v: Option<String>, what: &str| -> Result<Option<String>, OpError> {
        match clean(v) {
            None => Ok(None),
            Some(u) => check_redirect_uri(&u)
                .map(|()| Some(u))
                .map_err(|e| OpError::Invalid(e.replace("redirect URI", what))),
        }
    };
    Ok(crate::store::oauth::ClientProfile {
        display_name,
        logo_uri: url(p.logo_uri, "logo URI")?,
        homepage: url(p.homepage, "homepage")?,
    })
}

fn check_logout_uris(uris: &[String]) -> Result<(), OpError> {
    if uris.len() > 20 {
        return Err(OpError::Invalid(
            "give at most 20 post-logout redirect URIs".into(),
        ));
    }
    for uri in uris {
        check_redirect_uri(uri).map_err(OpError::Invalid)?;
    }
    Ok(())
}

/// Registers a client and returns its secret (shown once; stored as a SHA-256).
pub fn add_client(
    store: &Store,
    name: &str,
    redirect_uris: &[String],
    post_logout_redirect_uris: &[String],
    profile: crate::store::oauth::ClientProfile,
    now: Millis,
) -> Result<String, OpError> {
    let valid_name = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !valid_name {
        return Err(OpError::Invalid(
            "the client name must be 1-64 characters of letters, digits, '.', '_' or '-'".into(),
        ));
    }
    if redirect_uris.is_empty() {
        return Err(OpError::Invalid("give at least one --redirect-uri".into()));
    }
    for uri in redirect_uris {
        check_redirect_uri(uri).map_err(OpError::Invalid)?;
    }
    check_logout_uris(post_logout_redirect_uris)?;
    let profile = check_profile(profile)?;
    let secret = crate::idp::crypto::random_token("pcs_");
    let record = crate::store::oauth::ClientRecord {
        name: name.to_string(),
        secret_hash: crate::idp::crypto::sha256_hex(&secret),
        redirect_uris: redirect_uris.to_vec(),
        created_at: now,
        uid: loop {
            let uid: u128 = rand::RngExt::random(&mut rand::rng());
            if uid != 0 {
                break uid;
            }
        },
        post_logout_redirect_uris: post_logout_redirect_uris.to_vec(),
        profile,
    };
    store.add_client(record)?;
    Ok(secret)
}
