//! Web sign-in sessions. The cookie carries a random id; only its SHA-256 is stored.

use serde::{Deserialize, Serialize};

use super::tables::SESSIONS;
use super::{Store, StoreError, codec};
use crate::clock::Millis;

pub const SESSION_TTL_MS: u64 = 14 * 24 * 60 * 60 * 1000;
/// A session waiting for its second factor lives only this long.
pub const PENDING_TTL_MS: u64 = 10 * 60 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStage {
    /// Password accepted; the TOTP code is still due.
    PendingTotp,
    /// Fully signed in.
    Active,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionRecord {
    pub user_id: u64,
    pub stage: SessionStage,
    pub created_at: Millis,
    pub expires_at: Millis,
    /// When the user last proved who they are (OIDC `auth_time`).
    pub auth_time: Millis,
}

impl Store {
    pub fn create_session(&self, hash: [u8; 32], record: SessionRecord) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        txn.open_table(SESSIONS)?
            .insert(hash.as_slice(), codec::encode(&record)?.as_slice())?;
        self.commit(txn)?;
        Ok(())
    }

    /// A live session (not expired).
    pub fn session(
        &self,
        hash: &[u8; 32],
        now: Millis,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(SESSIONS)?;
        let rec: Option<SessionRecord> = t
            .get(hash.as_slice())?
            .map(|v| codec::decode(v.value()))
            .transpose()?;
        Ok(rec.filter(|r| now < r.expires_at))
    }

    pub fn delete_session(&self, hash: &[u8; 32]) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        txn.open_table(SESSIONS)?.remove(hash.as_slice())?;
        self.commit(txn)?;
        Ok(())
    }

    /// Ends every session of a user except `keep` (after a password change, ban or TOTP change).
    pub fn delete_user_sessions(
        &self,
        user_id: u64,
        keep: Option<&[u8; 32]>,
    ) -> Result<usize, StoreError> {
        let txn = self.begin_write()?;
        let n = {
            let mut t = txn.open_table(SESSIONS)?;
            t.extract_if(|k, v| {
                keep.is_none_or(|keep| k != keep.as_slice())
                    && codec::decode::<SessionRecord>(v)
                        .map(|r| r.user_id == user_id)
                        .unwrap_or(false)
            })?
            .count()
        };
        self.commit(txn)?;
        Ok(n)
    }

    pub fn purge_sessions(&self, now: Millis) -> Result<usize, StoreError> {
        let txn = self.begin_write()?;
        let n = {
            let mut t = txn.open_table(SESSIONS)?;
            t.extract_if(|_, v| {
                codec::decode::<SessionRecord>(v)
                    .map(|r| now >= r.expires_at)
                    .unwrap_or(true)
            })?
            .count()
        };
        self.commit(txn)?;
        Ok(n)
    }
}
