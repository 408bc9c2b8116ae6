//! The operators' audit log: every change an administrator makes (settings, credits, flags,
//! bans, deletions, reset links, apps, new accounts) with who made it, when, whom it was about
//! and what changed. Append-only, numbered; the admin page shows it per person and for
//! everything, and exports it as CSV.

use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use super::tables::*;
use super::{Store, StoreError, codec, next_counter};
use crate::clock::Millis;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub seq: u64,
    pub at: Millis,
    /// Who: `usr_…` (e-mail) of an administrator on the admin page, or `cli` (the admin
    /// command line, on the store or through the server's admin channel).
    pub actor: String,
    /// What: `settings.set`, `credits.grant`, `user.pro`, `user.ban`, `user.remove`, …
    pub action: String,
    /// The account it was about, when it was about one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<u64>,
    /// Human-readable detail: `prices.fast 1 → 2`, `+50 credits`, …
    pub detail: String,
}

/// Oldest entries kept: the log is trimmed to this many.
pub const MAX_AUDIT_ENTRIES: u64 = 100_000;

/// Appends one entry inside `txn`: the change and its record commit together.
pub(super) fn append_audit(
    txn: &redb::WriteTransaction,
    actor: &str,
    action: &str,
    user_id: Option<u64>,
    detail: &str,
    now: Millis,
) -> Result<(), StoreError> {
    let seq = next_counter(txn, "audit_seq")?;
    let entry = AuditEntry {
        seq,
        at: now,
        actor: actor.to_string(),
        action: action.to_string(),
        user_id,
        detail: detail.to_string(),
    };
    let mut t = txn.open_table(AUDIT)?;
    t.insert(seq, codec::encode(&entry)?.as_slice())?;
    if seq > MAX_AUDIT_ENTRIES {
        t.remove(seq - MAX_AUDIT_ENTRIES)?;
    }
    Ok(())
}

impl Store {
    /// Appends one entry (its own commit: written after the change it records succeeded).
    pub fn audit(
        &self,
        actor: &str,
        action: &str,
        user_id: Option<u64>,
        detail: &str,
        now: Millis,
    ) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        append_audit(&txn, actor, action, user_id, detail, now)?;
        self.commit(txn)
    }

    /// Entries, newest first: all, or those about one account; at most `limit`.
    pub fn audit_log(
        &self,
        user_id: Option<u64>,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(AUDIT)?;
        let mut out = Vec::new();
        for row in t.iter()?.rev() {
            let (_, v) = row?;
            let e: AuditEntry = codec::decode(v.value())?;
            if user_id.is_none() || e.user_id == user_id {
                out.push(e);
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
    }
}
