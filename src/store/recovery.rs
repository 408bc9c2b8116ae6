//! Account recovery without a mail server: an administrator issues a one-time password-reset
//! link (`pictor user reset-link`, the admin page). Only the token's SHA-256 is stored; a link
//! lasts [`RESET_TTL_MS`], works once, and a newer link for the same person replaces the older
//! (by mail: joins them, up to [`MAX_LIVE_LINKS`]); using one ends them all.

use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use super::tables::*;
use super::users::UserRecord;
use super::{Store, StoreError, codec};
use crate::clock::Millis;

/// How long a reset link works.
pub const RESET_TTL_MS: Millis = 24 * 60 * 60 * 1000;

/// Live links one person may have at once when they come by mail (see
/// [`Store::add_password_reset`]).
pub const MAX_LIVE_LINKS: usize = 3;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ResetRecord {
    pub user_id: u64,
    pub created_at: Millis,
    pub expires_at: Millis,
}

impl Store {
    /// Stores a reset link's token hash for `user_id`, replacing any earlier link of theirs.
    pub fn issue_password_reset(
        &self,
        user_id: u64,
        token_hash: [u8; 32],
        now: Millis,
    ) -> Result<ResetRecord, StoreError> {
        self.store_password_reset(user_id, token_hash, 0, now)
    }

    /// Adds a reset link for `user_id` beside the live ones (the person's newest
    /// [`MAX_LIVE_LINKS`]), for links anyone can ask for by mail: asking again must not kill a
    /// link the person already has (one an administrator gave them, or the previous mail).
    /// Using any of them ends all of them.
    pub fn add_password_reset(
        &self,
        user_id: u64,
        token_hash: [u8; 32],
        now: Millis,
    ) -> Result<ResetRecord, StoreError> {
        self.store_password_reset(user_id, token_hash, MAX_LIVE_LINKS - 1, now)
    }

    /// Stores a new link for `user_id`, keeping at most `keep` of the person's newest live links
    /// beside it; expired links of anyone go in the same transaction.
    fn store_password_reset(
        &self,
        user_id: u64,
        token_hash: [u8; 32],
        keep: usize,
        now: Millis,
    ) -> Result<ResetRecord, StoreError> {
        let txn = self.begin_write()?;
        let record = {
            if txn.open_table(USERS)?.get(user_id)?.is_none() {
                return Err(StoreError::NotFound("no such user".into()));
            }
            let mut resets = txn.open_table(PASSWORD_RESETS)?;
            let mut stale = Vec::new();
            let mut live = Vec::new();
            for row in resets.iter()? {
                let (k, v) = row?;
                let r: ResetRecord = codec::decode(v.value())?;
                if r.expires_at <= now {
                    stale.push(k.value().to_vec());
                } else if r.user_id == user_id {
                    live.push((r.created_at, k.value().to_vec()));
                }
            }
            // Oldest first: those beyond the newest `keep` go.
            live.sort();
            let excess = live.len().saturating_sub(keep);
            stale.extend(live.into_iter().take(excess).map(|(_, k)| k));
            for k in stale {
                resets.remove(k.as_slice())?;
            }
            let record = ResetRecord {
                user_id,
                created_at: now,
                expires_at: now + RESET_TTL_MS,
            };
            resets.insert(token_hash.as_slice(), codec::encode(&record)?.as_slice())?;
            record
        };
        self.commit(txn)?;
        Ok(record)
    }

    /// The person a live reset link belongs to (banned people have none).
    pub fn password_reset(
        &self,
        token_hash: &[u8; 32],
        now: Millis,
    ) -> Result<Option<UserRecord>, StoreError> {
        let txn = self.begin_read()?;
        let Some(record) = txn
            .open_table(PASSWORD_RESETS)?
            .get(token_hash.as_slice())?
            .map(|v| codec::decode::<ResetRecord>(v.value()))
            .transpose()?
        else {
            return Ok(None);
        };
        if record.expires_at <= now {
            return Ok(None);
        }
        let user: Option<UserRecord> = txn
            .open_table(USERS)?
            .get(record.user_id)?
            .map(|v| codec::decode(v.value()))
            .transpose()?;
        Ok(user.filter(|u| !u.banned))
    }

    /// Uses a reset link: in one transaction the link is deleted and the new password hash set.
    /// `None` when the link is unknown, used, expired or its person banned (nothing changes).
    pub fn use_password_reset(
        &self,
        token_hash: &[u8; 32],
        password_hash: String,
        now: Millis,
    ) -> Result<Option<UserRecord>, StoreError> {
        let txn = self.begin_write()?;
        let user = {
            let mut resets = txn.open_table(PASSWORD_RESETS)?;
            let Some(record) = resets
                .remove(token_hash.as_slice())?
                .map(|v| codec::decode::<ResetRecord>(v.value()))
                .transpose()?
            else {
                return Ok(None);
            };
            if record.expires_at <= now {
                // Expired: removed all the same (the caller sees it as unknown); committed below.
                None
            } else {
                let mut users = txn.open_table(USERS)?;
                let user: Option<UserRecord> = users
                    .get(record.user_id)?
                    .map(|v| codec::decode(v.value()))
                    .transpose()?;
                match user.filter(|u| !u.banned) {
                    Some(mut u) => {
                        u.password_hash = Some(password_hash);
                        u.password_needs_rehash = false;
                        users.insert(u.id, codec::encode(&u)?.as_slice())?;
                        // The person's other links die with this one.
                        let mut others = Vec::new();
                        for row in resets.iter()? {
                            let (k, v) = row?;
                            if codec::decode::<ResetRecord>(v.value())?.user_id == u.id {
                                others.push(k.value().to_vec());
                            }
                        }
                        for k in others {
                            resets.remove(k.as_slice())?;
                        }
                        Some(u)
                    }
                    None => None,
                }
            }
        };
        self.commit(txn)?;
        Ok(user)
    }
}
