//! Operator settings kept in the store: model prices, the edit price and daily photo limits.
//! Changed with `pictor settings set KEY VALUE`; read by every job creation.

use redb::{ReadableDatabase, ReadableTable};
use serde::{Deserialize, Serialize};

use super::tables::SETTINGS;
use super::{Store, StoreError, codec};
use crate::render::Model;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub price_fast: u32,
    pub price_artist: u32,
    pub price_plus: u32,
    pub price_edit: u32,
    /// Generations per UTC day for non-PRO users (unless set per user).
    pub daily_limit: u32,
    /// Generations per UTC day for PRO users (unless set per user).
    pub daily_limit_pro: u32,
    /// Credits given to accounts created on the registration page (held until the account's
    /// first sign-in, or until an administrator approves it; see `signup_approval`).
    pub signup_credits: u32,
    /// Whether `/register` is open once setup is done (1) or only administrators add people (0).
    /// Before an administrator exists it is always closed.
    pub registration_open: u32,
    /// 0: sign-up credits are released at the account's first sign-in on `/login`;
    /// 1: only when an administrator approves the account (`pictor user update --approve`).
    pub signup_approval: u32,
    /// Difficulty of the proof-of-work bot check, in leading zero bits (2^n hashes on average).
    pub challenge_bits: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            price_fast: Model::Fast.default_price(),
            price_artist: Model::Artist.default_price(),
            price_plus: Model::Plus.default_price(),
            price_edit: 2,
            daily_limit: 25,
            daily_limit_pro: 250,
            signup_credits: 20,
            registration_open: 1,
            signup_approval: 0,
            challenge_bits: 18,
        }
    }
}

/// Setting names as the CLI and docs spell them.
pub const SETTING_KEYS: [&str; 10] = [
    "price.fast",
    "price.artist",
    "price.0.2plus",
    "price.edit",
    "daily_limit",
    "daily_limit_pro",
    "signup_credits",
    "registration_open",
    "signup_approval",
    "challenge_bits",
];

impl Settings {
    pub fn price(&self, model: Model) -> u32 {
        match model {
            Model::Fast => self.price_fast,
            Model::Artist => self.price_artist,
            Model::Plus => self.price_plus,
        }
    }

    /// The daily generation limit for a user with the given PRO flag and override.
    pub fn daily_limit_for(&self, pro: bool, per_user: Option<u32>) -> u32 {
        per_user.unwrap_or(if pro {
            self.daily_limit_pro
        } else {
            self.daily_limit
        })
    }

    fn slot(&mut self, key: &str) -> Option<&mut u32> {
        Some(match key {
            "price.fast" => &mut self.price_fast,
            "price.artist" => &mut self.price_artist,
            "price.0.2plus" => &mut self.price_plus,
            "price.edit" => &mut self.price_edit,
            "daily_limit" => &mut self.daily_limit,
            "daily_limit_pro" => &mut self.daily_limit_pro,
            "signup_credits" => &mut self.signup_credits,
            "registration_open" => &mut self.registration_open,
            "signup_approval" => &mut self.signup_approval,
            "challenge_bits" => &mut self.challenge_bits,
            _ => return None,
        })
    }

    /// `(key, value)` pairs in [`SETTING_KEYS`] order.
    pub fn entries(&self) -> Vec<(&'static str, u32)> {
        let mut copy = self.clone();
        SETTING_KEYS
            .iter()
            .map(|k| (*k, copy.slot(k).map(|v| *v).unwrap_or(0)))
            .collect()
    }
}

impl Store {
    pub fn settings(&self) -> Result<Settings, StoreError> {
        let txn = self.db().begin_read()?;
        let table = txn.open_table(SETTINGS)?;
        match table.get("settings")? {
            Some(v) => codec::decode(v.value()),
            None => Ok(Settings::default()),
        }
    }

    /// Sets one named setting; unknown names and values out of range are refused.
    pub fn set_setting(&self, key: &str, value: u32) -> Result<Settings, StoreError> {
        if key.starts_with("price.") && !(1..=1_000_000).contains(&value) {
            return Err(StoreError::Invalid(format!(
                "{key} must be between 1 and 1000000 credits"
            )));
        }
        if matches!(key, "registration_open" | "signup_approval") && value > 1 {
            return Err(StoreError::Invalid(format!("{key} must be 0 or 1")));
        }
        if key == "challenge_bits"
            && !(crate::idp::pow::MIN_BITS..=crate::idp::pow::MAX_BITS).contains(&value)
        {
            return Err(StoreError::Invalid(format!(
                "{key} must be between {} and {}",
                crate::idp::pow::MIN_BITS,
                crate::idp::pow::MAX_BITS
            )));
        }
        if value > 1_000_000 {
            return Err(StoreError::Invalid(format!(
                "{key} must be at most 1000000"
            )));
        }
        let txn = self.db().begin_write()?;
        let settings = {
            let mut table = txn.open_table(SETTINGS)?;
            let mut settings: Settings = match table.get("settings")? {
                Some(v) => codec::decode(v.value())?,
                None => Settings::default(),
            };
            let slot = settings.slot(key).ok_or_else(|| {
                StoreError::Invalid(format!(
                    "unknown setting {key:?}; known settings: {}",
                    SETTING_KEYS.join(", ")
                ))
            })?;
            *slot = value;
            table.insert("settings", codec::encode(&settings)?.as_slice())?;
            settings
        };
        txn.commit()?;
        Ok(settings)
    }
}
