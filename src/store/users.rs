//! Users, their API key hashes and operator changes (PRO, ban, daily limit, credits).

use std::fmt;

use rand::RngExt;
use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use super::ledger::{self, LedgerReason};
use super::tables::*;
use super::{Store, StoreError, codec};
use crate::clock::{self, Millis};

/// A user's id; shown as `usr_` + 16 hex digits (also the OIDC subject).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UserId(pub u64);

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "usr_{:016x}", self.0)
    }
}

impl UserId {
    pub fn parse(s: &str) -> Option<UserId> {
        let hex = s.strip_prefix("usr_")?;
        if hex.len() != 16 {
            return None;
        }
        u64::from_str_radix(hex, 16).ok().map(UserId)
    }
}

#[derive(Clone, Serialize, Deserialize)]
pub struct UserRecord {
    pub id: u64,
    pub email: String,
    pub name: String,
    /// Argon2id PHC string; `None` for accounts that cannot sign in with a password.
    #[serde(default)]
    pub password_hash: Option<String>,
    #[serde(default)]
    pub admin: bool,
    #[serde(default)]
    pub pro: bool,
    #[serde(default)]
    pub banned: bool,
    /// Per-user daily generation limit; `None` uses the setting for PRO / non-PRO users.
    #[serde(default)]
    pub daily_limit: Option<u32>,
    pub balance: i64,
    /// Hex SHA-256 of the default API key (the one `pictor api-key issue` and the account
    /// page's quick button replace).
    #[serde(default)]
    pub api_key_hash: Option<String>,
    /// When the default key was issued, its fingerprint and when it was last used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_meta: Option<KeyMeta>,
    /// Named keys beside the default one, each revoked on its own (see `store::keys`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_keys: Vec<NamedKey>,
    pub created_at: Millis,
    /// TOTP secret, encrypted with the data folder's secret key (see `idp::crypto`).
    #[serde(default)]
    pub totp_secret_enc: Option<String>,
    /// The last TOTP time step accepted (a code is good once, RFC 6238 §5.2).
    #[serde(default)]
    pub totp_last_step: Option<u64>,
    /// Hex SHA-256 of each unused recovery code.
    #[serde(default)]
    pub recovery_codes: Vec<String>,
    /// Token of an uploaded avatar (`<data>/avatars/<token>.png`); `None` = generated avatar.
    #[serde(default)]
    pub avatar: Option<String>,
    /// Hash scheme to upgrade at the next sign-in (imported pbkdf2 hashes).
    #[serde(default)]
    pub password_needs_rehash: bool,
    /// Sign-up credits not yet given: released (with a ledger row) at the first sign-in or on
    /// an administrator's approval, depending on the `signup_approval` setting.
    #[serde(default)]
    pub pending_credits: u32,
    /// The key that signs this user's webhook deliveries (`whsec_…`), encrypted like the TOTP
    /// secret; made on first use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret_enc: Option<String>,
    /// The key it replaced, still signing (beside the new one) until `webhook_secret_prev_until`,
    /// so receivers can switch keys without dropping deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret_prev_enc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_secret_prev_until: Option<Millis>,
    /// The pages' language the person chose (`en`, `ru`), saved when they switch languages while
    /// signed in and restored at sign-in on any browser; also the language of mail sent to them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
}

/// What is shown of an API key besides its name: a fingerprint (`vx_…` and its last four
/// characters: enough to tell keys apart, useless to an attacker), when it was made and when it
/// was last used (updated at most once an hour, so a busy key costs no write per request).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct KeyMeta {
    pub tail: String,
    pub created_at: Millis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used: Option<Millis>,
}

impl KeyMeta {
    pub fn fingerprint(&self) -> String {
        format!("vx_…{}", self.tail)
    }
}

/// A named API key.
#[derive(Clone, Serialize, Deserialize)]
pub struct NamedKey {
    /// Public id (`key_` + 12 hex digits), used to revoke it.
    pub id: String,
    pub label: String,
    /// Hex SHA-256 of the key.
    pub hash: String,
    #[serde(flatten)]
    pub meta: KeyMeta,
}

impl fmt::Debug for NamedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamedKey")
            .field("id", &self.id)
            .field("label", &self.label)
            .field("meta", &self.meta)
            .finish()
    }
}

// Hashes stay out of logs and Debug output.
impl fmt::Debug for UserRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserRecord")
            .field("id", &UserId(self.id))
            .field("email", &self.email)
            .field("admin", &self.admin)
            .field("pro", &self.pro)
            .field("banned", &self.banned)
            .field("balance", &self.balance)
            .field(
                "password_hash",
                &self.password_hash.as_ref().map(|_| "<hidden>"),
            )
            .field(
                "api_key_hash",
                &self.api_key_hash.as_ref().map(|_| "<hidden>"),
            )
            .finish()
    }
}

impl UserRecord {
    pub fn user_id(&self) -> UserId {
        UserId(self.id)
    }
}

#[derive(Clone, Default)]
pub struct NewUser {
    pub email: String,
    pub name: Option<String>,
    pub password_hash: Option<String>,
    pub admin: bool,
    pub pro: bool,
    pub credits: u32,
    /// Credits held back until the first sign-in or an approval (see `UserRecord::pending_credits`).
    pub pending_credits: u32,
}

#[derive(Debug, Clone, Default)]
pub struct UserPatch {
    pub pro: Option<bool>,
    pub banned: Option<bool>,
    /// `Some(None)` clears the per-user limit.
    pub daily_limit: Option<Option<u32>>,
    pub name: Option<String>,
    pub admin: Option<bool>,
    /// Releases the account's held sign-up credits (with a ledger row).
    pub approve: bool,
}

/// Lower-cases and checks an e-mail address (one `@`, something on both sides, no spaces).
pub fn normalize_email(email: &str) -> Result<String, StoreError> {
    let e = email.trim().to_lowercase();
    let valid = e.len() <= 254
        && !e.chars().any(|c| c.is_whitespace() || c.is_control())
        && matches!(e.split_once('@'), Some((l, d)) if !l.is_empty() && !d.is_empty() && !d.contains('@'));
    if valid {
        Ok(e)
    } else {
        Err(StoreError::Invalid(format!(
            "not a valid e-mail address: {email:?}"
        )))
    }
}

impl Store {
    pub fn create_user(&self, new: NewUser, now: Millis) -> Result<UserRecord, StoreError> {
        let email = normalize_email(&new.email)?;
        let name = new
            .name
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| email.split('@').next().unwrap_or_default().to_string());
        let txn = self.begin_write()?;
        let user = {
            let mut by_email = txn.open_table(USERS_BY_EMAIL)?;
            if by_email.get(email.as_str())?.is_some() {
                return Err(StoreError::Conflict(format!(
                    "a user with e-mail {email} already exists"
                )));
            }
            let mut users = txn.open_table(USERS)?;
            let mut rng = rand::rng();
            let id = loop {
                let id: u64 = rng.random();
                if id != 0 && users.get(id)?.is_none() {
                    break id;
                }
            };
            let user = UserRecord {
                id,
                email: email.clone(),
                name,
                password_hash: new.password_hash,
                admin: new.admin,
                pro: new.pro,
                banned: false,
                daily_limit: None,
                balance: 0,
                api_key_hash: None,
                api_key_meta: None,
                api_keys: Vec::new(),
                created_at: now,
                totp_secret_enc: None,
                totp_last_step: None,
                recovery_codes: Vec::new(),
                avatar: None,
                password_needs_rehash: false,
                pending_credits: new.pending_credits,
                webhook_secret_enc: None,
                webhook_secret_prev_enc: None,
                webhook_secret_prev_until: None,
                lang: None,
            };
            users.insert(id, codec::encode(&user)?.as_slice())?;
            by_email.insert(email.as_str(), id)?;
            user
        };
        let mut user = user;
        if new.credits > 0 {
            ledger::apply(
                &txn,
                &mut user,
                new.credits as i64,
                LedgerReason::Grant,
                None,
                now,
            )?;
        }
        self.commit(txn)?;
        Ok(user)
    }

    pub fn user(&self, id: u64) -> Result<Option<UserRecord>, StoreError> {
        let txn = self.begin_read()?;
        let users = txn.open_table(USERS)?;
        users.get(id)?.map(|v| codec::decode(v.value())).transpose()
    }

    pub fn user_by_email(&self, email: &str) -> Result<Option<UserRecord>, StoreError> {
        let Ok(email) = normalize_email(email) else {
            return Ok(None);
        };
        let txn = self.begin_read()?;
        let by_email = txn.open_table(USERS_BY_EMAIL)?;
        let Some(id) = by_email.get(email.as_str())?.map(|v| v.value()) else {
            return Ok(None);
        };
        let users = txn.open_table(USERS)?;
        users.get(id)?.map(|v| codec::decode(v.value())).transpose()
    }

    /// Like [`Store::user_by_email`] but an unknown address is an error naming it.
    pub fn require_user(&self, email: &str) -> Result<UserRecord, StoreError> {
        self.user_by_email(email)?
            .ok_or_else(|| StoreError::NotFound(format!("no user with e-mail {:?}", email.trim())))
    }

    /// Whether an administrator who is not banned exists (first-start setup is done).
    pub fn has_admin(&self) -> Result<bool, StoreError> {
        Ok(self.users()?.iter().any(|u| u.admin && !u.banned))
    }

    pub fn users(&self) -> Result<Vec<UserRecord>, StoreError> {
        let txn = self.begin_read()?;
        let users = txn.open_table(USERS)?;
        let mut out = Vec::new();
        for row in users.iter()? {
            out.push(codec::decode(row?.1.value())?);
        }
        Ok(out)
    }

    pub fn update_user(
        &self,
        email: &str,
        patch: UserPatch,
        now: Millis,
    ) -> Result<UserRecord, StoreError> {
        if let Some(Some(limit)) = patch.daily_limit
            && limit > 1_000_000
        {
            return Err(StoreError::Invalid(
                "daily limit must be at most 1000000".into(),
            ));
        }
        let id = self.require_user(email)?.id;
        let txn = self.begin_write()?;
        let user = {
            let mut users = txn.open_table(USERS)?;
            let mut user: UserRecord = match users.get(id)? {
                Some(v) => codec::decode(v.value())?,
                None => {
                    return Err(StoreError::NotFound(format!(
                        "no user with e-mail {email:?}"
                    )));
                }
            };
            if let Some(pro) = patch.pro {
                user.pro = pro;
            }
            if let Some(banned) = patch.banned {
                user.banned = banned;
            }
            if let Some(limit) = patch.daily_limit {
                user.daily_limit = limit;
            }
            if let Some(name) = patch.name {
                user.name = name;
            }
            if let Some(admin) = patch.admin {
                user.admin = admin;
            }
            users.insert(id, codec::encode(&user)?.as_slice())?;
            user
        };
        let mut user = user;
        if patch.approve && user.pending_credits > 0 {
            let amount = i64::from(user.pending_credits);
            user.pending_credits = 0;
            ledger::apply(&txn, &mut user, amount, LedgerReason::Grant, None, now)?;
        }
        // A ban ends every app's access at once (sessions already end: banned users have none).
        if patch.banned == Some(true) {
            super::oauth::revoke_user_families_in(&txn, id, "account banned", now)?;
        }
        self.commit(txn)?;
        Ok(user)
    }

    /// Gives the account its held sign-up credits, once (the first sign-in). Returns how many.
    pub fn release_pending_credits(&self, user_id: u64, now: Millis) -> Result<u32, StoreError> {
        let txn = self.begin_write()?;
        let mut user: UserRecord = {
            let users = txn.open_table(USERS)?;
            let row = users.get(user_id)?;
            match row {
                Some(v) => codec::decode(v.value())?,
                None => return Err(StoreError::NotFound("no such user".into())),
            }
        };
        let amount = user.pending_credits;
        if amount == 0 {
            return Ok(0);
        }
        user.pending_credits = 0;
        ledger::apply(
            &txn,
            &mut user,
            i64::from(amount),
            LedgerReason::Grant,
            None,
            now,
        )?;
        self.commit(txn)?;
        Ok(amount)
    }

    /// Applies `f` to the user's record in one write transaction and returns the new record.
    pub fn modify_user<F>(&self, user_id: u64, f: F) -> Result<UserRecord, StoreError>
    where
        F: FnOnce(&mut UserRecord) -> Result<(), StoreError>,
    {
        let txn = self.begin_write()?;
        let user = {
            let mut users = txn.open_table(USERS)?;
            let mut user: UserRecord = match users.get(user_id)? {
                Some(v) => codec::decode(v.value())?,
                None => return Err(StoreError::NotFound("no such user".into())),
            };
            f(&mut user)?;
            users.insert(user_id, codec::encode(&user)?.as_slice())?;
            user
        };
        self.commit(txn)?;
        Ok(user)
    }

    /// Adds (or with a negative amount, removes) credits, with a ledger row. Returns the user.
    pub fn grant_credits(
        &self,
        email: &str,
        amount: i64,
        now: Millis,
    ) -> Result<UserRecord, StoreError> {
        if amount == 0 || amount.unsigned_abs() > 1_000_000_000 {
            return Err(StoreError::Invalid(
                "amount must be a non-zero integer between -1000000000 and 1000000000".into(),
            ));
        }
        let id = self.require_user(email)?.id;
        let txn = self.begin_write()?;
        let mut user: UserRecord = {
            let users = txn.open_table(USERS)?;
            let row = users.get(id)?;
            match row {
                Some(v) => codec::decode(v.value())?,
                None => {
                    return Err(StoreError::NotFound(format!(
                        "no user with e-mail {email:?}"
                    )));
                }
            }
        };
        ledger::apply(&txn, &mut user, amount, LedgerReason::Grant, None, now)?;
        self.commit(txn)?;
        Ok(user)
    }

    /// Generations charged to the user on the UTC day of `now`.
    pub fn daily_used(&self, user_id: u64, now: Millis) -> Result<u32, StoreError> {
        let txn = self.begin_read()?;
        let usage = txn.open_table(DAILY_USAGE)?;
        Ok(usage
            .get((user_id, clock::day_of(now)))?
            .map(|v| v.value())
            .unwrap_or(0))
    }
}
