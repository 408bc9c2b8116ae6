//! Every redb table of Pictor, declared once. Table-name strings never change; a change of key or
//! value type needs a step in `migrate`. Rows are JSON bytes decoded through `codec`.

use redb::TableDefinition;

/// Bumped when a migration step is added.
pub const SCHEMA_VERSION: u64 = 1;

/// Counters and schema version: `schema_version`, `ledger_seq`.
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Operator settings (prices, daily limits), JSON values.
pub const SETTINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("settings");

/// user id → `UserRecord`.
pub const USERS: TableDefinition<u64, &[u8]> = TableDefinition::new("users");
/// lower-cased e-mail → user id.
pub const USERS_BY_EMAIL: TableDefinition<&str, u64> = TableDefinition::new("users_by_email");
/// SHA-256 of every live `vx_` key (each user's default key and named keys) → user id.
pub const USERS_BY_KEY: TableDefinition<&[u8], u64> = TableDefinition::new("users_by_key");

/// (user id, ledger sequence) → `LedgerEntry`. Append-only.
pub const LEDGER: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("ledger");
/// (user id, UTC day) → photos charged that day.
pub const DAILY_USAGE: TableDefinition<(u64, u32), u32> = TableDefinition::new("daily_usage");

/// job id (UUIDv7, sorts by time) → `JobRecord`.
pub const JOBS: TableDefinition<u128, &[u8]> = TableDefinition::new("jobs");
/// (user id, job id) → (): a user's jobs in time order.
pub const JOBS_BY_USER: TableDefinition<(u64, u128), ()> = TableDefinition::new("jobs_by_user");
/// user id → their active (queued or running) job. At most one row per user.
pub const ACTIVE_BY_USER: TableDefinition<u64, u128> = TableDefinition::new("active_by_user");
/// job id → (): every job not yet done or failed; scanned at start to resume work.
pub const PENDING_JOBS: TableDefinition<u128, ()> = TableDefinition::new("pending_jobs");

/// job id → when its webhook delivery is next due (Unix ms): the durable outbox of job
/// notifications (`store::webhooks`). Rows leave when delivered or given up.
pub const WEBHOOK_OUTBOX: TableDefinition<u128, u64> = TableDefinition::new("webhook_outbox");

/// client id (`app_name`) → `ClientRecord` (secret stored as a SHA-256).
pub const CLIENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("oauth_clients");
/// SHA-256 of an authorization code → `CodeRecord` (kept after use to detect replays).
pub const AUTH_CODES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("oauth_codes");
/// grant family id → `FamilyRecord`: everything issued from one authorization.
pub const TOKEN_FAMILIES: TableDefinition<u128, &[u8]> = TableDefinition::new("oauth_families");
/// (user id, family id) → (): a user's grants, for the account page.
pub const FAMILIES_BY_USER: TableDefinition<(u64, u128), ()> =
    TableDefinition::new("oauth_families_by_user");
/// SHA-256 of a refresh token → `RefreshRecord`.
pub const REFRESH_TOKENS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("oauth_refresh_tokens");
/// SHA-256 of an access token → `AccessRecord`.
pub const ACCESS_TOKENS: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new("oauth_access_tokens");
/// (user id, client id) → `ConsentRecord`.
pub const CONSENTS: TableDefinition<(u64, &str), &[u8]> = TableDefinition::new("oauth_consents");
/// (user id, client id) → `AppSpend`: what an app spent of the user's credits.
pub const APP_SPEND: TableDefinition<(u64, &str), &[u8]> = TableDefinition::new("app_spend");
/// kid → `SigningKeyRecord` (RS256 keys; private part as PKCS#8).
pub const SIGNING_KEYS: TableDefinition<&str, &[u8]> = TableDefinition::new("oauth_signing_keys");
/// model name → `ModelRecord` (installed diffusion models).
pub const MODELS: TableDefinition<&str, &[u8]> = TableDefinition::new("models");
/// tier (`fast`, `artist`, `0.2plus`, `edit`) → `TierMapping`: the installed model that draws it
/// and how (set from the console or `pictor models map`; the config file's `[diffusion.*]` wins).
pub const TIERS: TableDefinition<&str, &[u8]> = TableDefinition::new("tiers");
/// model name → `PullRecord`: a download the server runs (resumed at the next start until it
/// finishes, fails or is cancelled).
pub const PULLS: TableDefinition<&str, &[u8]> = TableDefinition::new("model_pulls");
/// SHA-256 of a session id → `SessionRecord`.
pub const SESSIONS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("web_sessions");
/// audit sequence → `AuditEntry`: what administrators changed (`store::audit`).
pub const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit");
/// SHA-256 of a password-reset token → `ResetRecord` (one live link per user; used once).
pub const PASSWORD_RESETS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("password_resets");

/// Copies every table from a read snapshot into `dst` (backups). Keep in step with the tables
/// above: a table missing here is missing from backups (`tests/backup.rs` checks the round trip).
pub(crate) fn copy_all(
    src: &redb::ReadTransaction,
    dst: &redb::WriteTransaction,
) -> Result<(), super::StoreError> {
    copy(src, dst, META)?;
    copy(src, dst, SETTINGS)?;
    copy(src, dst, USERS)?;
    copy(src, dst, USERS_BY_EMAIL)?;
    copy(src, dst, USERS_BY_KEY)?;
    copy(src, dst, LEDGER)?;
    copy(src, dst, DAILY_USAGE)?;
    copy(src, dst, JOBS)?;
    copy(src, dst, JOBS_BY_USER)?;
    copy(src, dst, ACTIVE_BY_USER)?;
    copy(src, dst, PENDING_JOBS)?;
    copy(src, dst, WEBHOOK_OUTBOX)?;
    copy(src, dst, CLIENTS)?;
    copy(src, dst, AUTH_CODES)?;
    copy(src, dst, TOKEN_FAMILIES)?;
    copy(src, dst, FAMILIES_BY_USER)?;
    copy(src, dst, REFRESH_TOKENS)?;
    copy(src, dst, ACCESS_TOKENS)?;
    copy(src, dst, CONSENTS)?;
    copy(src, dst, APP_SPEND)?;
    copy(src, dst, MODELS)?;
    copy(src, dst, TIERS)?;
    copy(src, dst, PULLS)?;
    copy(src, dst, SIGNING_KEYS)?;
    copy(src, dst, SESSIONS)?;
    copy(src, dst, PASSWORD_RESETS)?;
    copy(src, dst, AUDIT)?;
    Ok(())
}

fn copy<K: redb::Key + 'static, V: redb::Value + 'static>(
    src: &redb::ReadTransaction,
    dst: &redb::WriteTransaction,
    def: TableDefinition<K, V>,
) -> Result<(), super::StoreError> {
    use redb::ReadableTable;
    // A backup made before a table existed simply has none of its rows.
    let from = match src.open_table(def) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let mut to = dst.open_table(def)?;
    for row in from.iter()? {
        let (k, v) = row?;
        to.insert(k.value(), v.value())?;
    }
    Ok(())
}
