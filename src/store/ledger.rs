//! The append-only credit ledger. Every balance change writes one row here in the same
//! transaction as the change itself, so a user's balance always equals the sum of their rows.

use redb::WriteTransaction;
use serde::{Deserialize, Serialize};

use super::tables::{LEDGER, USERS};
use super::users::UserRecord;
use super::{Store, StoreError, codec, next_counter};
use crate::clock::Millis;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerReason {
    /// Credits given by an operator (`pictor credits grant`, `user add --credits`).
    Grant,
    /// A job's price, taken when it starts.
    Charge,
    /// A failed job's price, returned.
    Refund,
    /// The account was deleted: its balance written off (the rows stay, without the person).
    Closed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    pub seq: u64,
    pub user_id: u64,
    pub delta: i64,
    pub balance_after: i64,
    pub reason: LedgerReason,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub job_id: Option<u128>,
    /// The app (OAuth client) that made the job charged or refunded, for jobs made with the
    /// person's access token.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub client: Option<String>,
    pub at: Millis,
}

/// Changes a user's balance by `delta` and appends the ledger row, inside `txn`.
/// Refuses to take the balance below zero.
pub(crate) fn apply(
    txn: &WriteTransaction,
    user: &mut UserRecord,
    delta: i64,
    reason: LedgerReason,
    job_id: Option<u128>,
    now: Millis,
) -> Result<LedgerEntry, StoreError> {
    apply_for(txn, user, delta, reason, job_id, None, now)
}

/// [`apply`] for a job an app made: the row names the app too.
pub(crate) fn apply_for(
    txn: &WriteTransaction,
    user: &mut UserRecord,
    delta: i64,
    reason: LedgerReason,
    job_id: Option<u128>,
    client: Option<&str>,
    now: Millis,
) -> Result<LedgerEntry, StoreError> {
    let balance_after = user
        .balance
        .checked_add(delta)
        .ok_or_else(|| StoreError::Invalid("balance overflow".into()))?;
    if balance_after < 0 {
        return Err(StoreError::Invalid(format!(
            "the balance would become negative ({balance_after})"
        )));
    }
    let seq = next_counter(txn, "ledger_seq")?;
    let entry = LedgerEntry {
        seq,
        user_id: user.id,
        delta,
        balance_after,
        reason,
        job_id,
        client: client.map(str::to_string),
        at: now,
    };
    txn.open_table(LEDGER)?
        .insert((user.id, seq), codec::encode(&entry)?.as_slice())?;
    user.balance = balance_after;
    txn.open_table(USERS)?
        .insert(user.id, codec::encode(&*user)?.as_slice())?;
    Ok(entry)
}

impl Store {
    /// A user's ledger rows, oldest first.
    pub fn ledger(&self, user_id: u64) -> Result<Vec<LedgerEntry>, StoreError> {
        let txn = self.begin_read()?;
        let table = txn.open_table(LEDGER)?;
        let mut out = Vec::new();
        for row in table.range((user_id, 0)..=(user_id, u64::MAX))? {
            let (_, v) = row?;
            out.push(codec::decode(v.value())?);
        }
        Ok(out)
    }
}
