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
/// SHA-256 of the current `vx_` key → user id. Only one key per user exists here at a time.
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
