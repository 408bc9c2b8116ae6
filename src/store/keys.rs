//! API keys: the account's default key (replaced by `pictor api-key issue` and the account page's
//! quick button: the seed's "issuing a key revokes the previous one") and named keys beside it,
//! each revoked on its own. Only SHA-256 hashes are stored; `USERS_BY_KEY` maps every live key's
//! hash to its user, and a key stops working in the transaction that removes its hash.

use rand::RngExt;
use redb::ReadableTable;

use super::tables::*;
use super::users::{KeyMeta, NamedKey, UserRecord};
use super::{Store, StoreError, codec};
use crate::clock::Millis;

/// Named keys an account may hold (besides the default key).
pub const MAX_NAMED_KEYS: usize = 20;
/// How stale a key's "last used" may get before a use writes it again.
pub const LAST_USED_GRANULARITY_MS: Millis = 60 * 60 * 1000;

/// Which of a user's keys a presented key is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyRef {
    Default,
    Named(String),
}

impl UserRecord {
    /// The key of this user whose hash is `hash`, compared in constant time against each.
    pub fn key_matching(&self, hash: &[u8; 32]) -> Option<KeyRef> {
        let eq = |stored: &str| {
            let stored = hex::decode(stored).unwrap_or_default();
            crate::auth::secret::ct_eq(&stored, hash)
        };
        let mut found = None;
        // Every key is compared (no early exit), so the time does not say which one matched.
        if self.api_key_hash.as_deref().is_some_and(eq) {
            found = Some(KeyRef::Default);
        }
        for k in &self.api_keys {
            if eq(&k.hash) {
                found = Some(KeyRef::Named(k.id.clone()));
            }
        }
        found
    }

    /// The metadata of one of the user's keys.
    pub fn key_meta(&self, key: &KeyRef) -> Option<&KeyMeta> {
        match key {
            KeyRef::Default => self.api_key_meta.as_ref(),
            KeyRef::Named(id) => self.api_keys.iter().find(|k| &k.id == id).map(|k| &k.meta),
        }
    }
}

/// A key's label: 1 to 64 characters, no control characters, trimmed.
pub fn check_label(label: &str) -> Result<String, StoreError> {
    let label = label.trim();
    if label.is_empty() || label.chars().count() > 64 || label.chars().any(char::is_control) {
        return Err(StoreError::Invalid(
            "a key's name must be 1 to 64 characters".into(),
        ));
    }
    Ok(label.to_string())
}

fn read_user(users: &redb::Table<u64, &[u8]>, user_id: u64) -> Result<UserRecord, StoreError> {
    match users.get(user_id)? {
        Some(v) => codec::decode(v.value()),
        None => Err(StoreError::NotFound("no such user".into())),
    }
}

impl Store {
    /// Makes `key_hash` the user's default API key: the previous default key's hash is removed
    /// in the same transaction, so it stops working the moment this commits. Named keys stay.
    pub fn set_api_key(
        &self,
        user_id: u64,
        key_hash: [u8; 32],
        tail: &str,
        now: Millis,
    ) -> Result<UserRecord, StoreError> {
        let txn = self.begin_write()?;
        let user = {
            let mut users = txn.open_table(USERS)?;
            let mut user = read_user(&users, user_id)?;
            let mut by_key = txn.open_table(USERS_BY_KEY)?;
            if let Some(old) = user
                .api_key_hash
                .as_deref()
                .and_then(|h| hex::decode(h).ok())
            {
                by_key.remove(old.as_slice())?;
            }
            by_key.insert(key_hash.as_slice(), user_id)?;
            user.api_key_hash = Some(hex::encode(key_hash));
            user.api_key_meta = Some(KeyMeta {
                tail: tail.to_string(),
                created_at: now,
                last_used: None,
            });
            users.insert(user_id, codec::encode(&user)?.as_slice())?;
            user
        };
        self.commit(txn)?;
        Ok(user)
    }

    /// Adds a named key. Refused: a label already used by another of the user's keys (names
    /// tell keys apart), more than [`MAX_NAMED_KEYS`].
    pub fn add_named_key(
        &self,
        user_id: u64,
        label: &str,
        key_hash: [u8; 32],
        tail: &str,
        now: Millis,
    ) -> Result<(UserRecord, NamedKey), StoreError> {
        let label = check_label(label)?;
        let txn = self.begin_write()?;
        let (user, key) = {
            let mut users = txn.open_table(USERS)?;
            let mut user = read_user(&users, user_id)?;
            if user.api_keys.len() >= MAX_NAMED_KEYS {
                return Err(StoreError::Invalid(format!(
                    "an account holds at most {MAX_NAMED_KEYS} named keys; revoke one first"
                )));
            }
            if user
                .api_keys
                .iter()
                .any(|k| k.label.to_lowercase() == label.to_lowercase())
            {
                return Err(StoreError::Conflict(format!(
                    "you already have a key named {label:?}"
                )));
            }
            let key = NamedKey {
                id: format!("key_{}", hex::encode(rand::rng().random::<[u8; 6]>())),
                label,
                hash: hex::encode(key_hash),
                meta: KeyMeta {
                    tail: tail.to_string(),
                    created_at: now,
                    last_used: None,
                },
            };
            txn.open_table(USERS_BY_KEY)?
                .insert(key_hash.as_slice(), user_id)?;
            user.api_keys.push(key.clone());
            users.insert(user_id, codec::encode(&user)?.as_slice())?;
            (user, key)
        };
        self.commit(txn)?;
        Ok((user, key))
    }

    /// Revokes one named key (it stops working when this returns); `None` when the user has no
    /// key with that id.
    pub fn revoke_named_key(
        &self,
        user_id: u64,
        key_id: &str,
    ) -> Result<Option<NamedKey>, StoreError> {
        let txn = self.begin_write()?;
        let removed = {
            let mut users = txn.open_table(USERS)?;
            let mut user = read_user(&users, user_id)?;
            let Some(i) = user.api_keys.iter().position(|k| k.id == key_id) else {
                return Ok(None);
            };
            let key = user.api_keys.remove(i);
            if let Ok(hash) = hex::decode(&key.hash) {
                txn.open_table(USERS_BY_KEY)?.remove(hash.as_slice())?;
            }
            users.insert(user_id, codec::encode(&user)?.as_slice())?;
            key
        };
        self.commit(txn)?;
        Ok(Some(removed))
    }

    /// Records that a key was used at `now` (callers do so at most once an hour per key).
    pub fn touch_api_key(&self, user_id: u64, key: &KeyRef, now: Millis) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut users = txn.open_table(USERS)?;
            let mut user = read_user(&users, user_id)?;
            let meta = match key {
                KeyRef::Default => user.api_key_meta.as_mut(),
                KeyRef::Named(id) => user
                    .api_keys
                    .iter_mut()
                    .find(|k| &k.id == id)
                    .map(|k| &mut k.meta),
            };
            let Some(meta) = meta else {
                return Ok(());
            };
            meta.last_used = Some(meta.last_used.map_or(now, |t| t.max(now)));
            users.insert(user_id, codec::encode(&user)?.as_slice())?;
        }
        self.commit(txn)
    }

    /// The user one of whose live keys hashes to `key_hash`.
    pub fn user_by_key_hash(&self, key_hash: &[u8; 32]) -> Result<Option<UserRecord>, StoreError> {
        let txn = self.begin_read()?;
        let by_key = txn.open_table(USERS_BY_KEY)?;
        let Some(id) = by_key.get(key_hash.as_slice())?.map(|v| v.value()) else {
            return Ok(None);
        };
        let users = txn.open_table(USERS)?;
        users.get(id)?.map(|v| codec::decode(v.value())).transpose()
    }
}
