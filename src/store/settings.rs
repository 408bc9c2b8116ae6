//! Operator settings kept in the store: model prices, the edit price and daily photo limits.
//! Changed with `pictor settings set KEY VALUE`; read by every job creation.

use std::collections::BTreeMap;

use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use super::tables::SETTINGS;
use super::{Store, StoreError, codec};
use crate::catalog::Model;
use crate::clock::Millis;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Price of one generation per model id (`fast`, `artist`, `0.2plus`…). A model of the
    /// catalogue without an entry costs its default price.
    prices: BTreeMap<String, u32>,
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
    /// The daily spending limit (credits) the consent page proposes when an app asks to make
    /// pictures (`images:generate`); the person may change or clear it. 0: no limit proposed.
    pub app_daily_cap: u32,
    // Data files written before prices were keyed by model id: read, never written, and
    // superseded by `prices` once a price is set.
    #[serde(skip_serializing, rename = "price_fast")]
    legacy_fast: Option<u32>,
    #[serde(skip_serializing, rename = "price_artist")]
    legacy_artist: Option<u32>,
    #[serde(skip_serializing, rename = "price_plus")]
    legacy_plus: Option<u32>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            prices: BTreeMap::new(),
            price_edit: 2,
            daily_limit: 25,
            daily_limit_pro: 250,
            signup_credits: 20,
            registration_open: 1,
            signup_approval: 0,
            challenge_bits: 18,
            app_daily_cap: 10,
            legacy_fast: None,
            legacy_artist: None,
            legacy_plus: None,
        }
    }
}

/// Setting names other than the per-model prices. One spelling everywhere: the config file,
/// `pictor settings` and the admin page (older spellings are accepted, see [`canonical_key`]).
const OTHER_KEYS: [&str; 8] = [
    "prices.edit",
    "limits.daily",
    "limits.daily_pro",
    "signup_credits",
    "registration_open",
    "signup_approval",
    "challenge_bits",
    "app_daily_cap",
];

/// Setting names as the CLI and docs spell them: `prices.<model id>` for every model of the
/// catalogue, then the others.
pub fn setting_keys() -> Vec<String> {
    Model::ALL
        .into_iter()
        .map(price_key)
        .chain(OTHER_KEYS.iter().map(|k| k.to_string()))
        .collect()
}

/// The setting that holds a model's price.
pub fn price_key(model: Model) -> String {
    format!("prices.{}", model.id())
}

/// What a setting means, in a few words (the admin page's form labels it so, the key as a
/// hint; its unit comes from its [`Rule`]).
pub fn describe(key: &str) -> &'static str {
    match key {
        "prices.edit" => "Price of an edit",
        "limits.daily" => "Pictures a day (UTC) for standard accounts",
        "limits.daily_pro" => "Pictures a day (UTC) for PRO accounts",
        "signup_credits" => "Credits for a new account made on /register",
        "registration_open" => "Anyone may register (off: only administrators make accounts)",
        "signup_approval" => "Sign-up credits wait for an administrator's approval",
        "challenge_bits" => "Difficulty of the bot check",
        "app_daily_cap" => "Daily credit limit proposed to an app at consent (0: none)",
        k if k.starts_with("prices.") => "Price of a picture with this model",
        _ => "",
    }
}

/// A setting's one spelling: the older ones (`price.fast`, `daily_limit`, `daily_limit_pro`,
/// from before the names were unified with the config file's) are still understood.
pub fn canonical_key(key: &str) -> String {
    let key = key.trim();
    if let Some(rest) = key.strip_prefix("price.") {
        return format!("prices.{rest}");
    }
    match key {
        "daily_limit" => "limits.daily".into(),
        "daily_limit_pro" => "limits.daily_pro".into(),
        other => other.into(),
    }
}

impl Settings {
    pub fn price(&self, model: Model) -> u32 {
        if let Some(p) = self.prices.get(model.id()) {
            return *p;
        }
        let legacy = match model {
            Model::Fast => self.legacy_fast,
            Model::Artist => self.legacy_artist,
            Model::Plus => self.legacy_plus,
        };
        legacy.unwrap_or(model.default_price())
    }

    /// The daily generation limit for a user with the given PRO flag and override.
    pub fn daily_limit_for(&self, pro: bool, per_user: Option<u32>) -> u32 {
        per_user.unwrap_or(if pro {
            self.daily_limit_pro
        } else {
            self.daily_limit
        })
    }

    fn get(&self, key: &str) -> Option<u32> {
        if let Some(model) = key.strip_prefix("prices.").and_then(model_of_key) {
            return Some(self.price(model));
        }
        Some(match key {
            "prices.edit" => self.price_edit,
            "limits.daily" => self.daily_limit,
            "limits.daily_pro" => self.daily_limit_pro,
            "signup_credits" => self.signup_credits,
            "registration_open" => self.registration_open,
            "signup_approval" => self.signup_approval,
            "challenge_bits" => self.challenge_bits,
            "app_daily_cap" => self.app_daily_cap,
            _ => return None,
        })
    }

    fn set(&mut self, key: &str, value: u32) -> Option<()> {
        // Prices of an older file move into the map before it is written back.
        for model in Model::ALL {
            if !self.prices.contains_key(model.id()) {
                let legacy = match model {
                    Model::Fast => self.legacy_fast.take(),
                    Model::Artist => self.legacy_artist.take(),
                    Model::Plus => self.legacy_plus.take(),
                };
                if let Some(p) = legacy {
                    self.prices.insert(model.id().to_string(), p);
                }
            }
        }
        if let Some(model) = key.strip_prefix("prices.").and_then(model_of_key) {
            self.prices.insert(model.id().to_string(), value);
            return Some(());
        }
        *match key {
            "prices.edit" => &mut self.price_edit,
            "limits.daily" => &mut self.daily_limit,
            "limits.daily_pro" => &mut self.daily_limit_pro,
            "signup_credits" => &mut self.signup_credits,
            "registration_open" => &mut self.registration_open,
            "signup_approval" => &mut self.signup_approval,
            "challenge_bits" => &mut self.challenge_bits,
            "app_daily_cap" => &mut self.app_daily_cap,
            _ => return None,
        } = value;
        Some(())
    }

    /// `(key, value)` pairs in [`setting_keys`] order.
    pub fn entries(&self) -> Vec<(String, u32)> {
        setting_keys()
            .into_iter()
            .map(|k| {
                let v = self.get(&k).unwrap_or(0);
                (k, v)
            })
            .collect()
    }
}

/// The model a `prices.<id>` key names (by its id exactly, not an alias).
fn model_of_key(id: &str) -> Option<Model> {
    Model::ALL.into_iter().find(|m| m.id() == id)
}

/// What values a setting takes: the store checks it, and pages word their refusal from it in
/// their own language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Credits from `min` to `max`.
    Credits { min: u32, max: u32 },
    /// 0 (off) or 1 (on).
    Flag,
    /// A number from `min` to `max`.
    Range { min: u32, max: u32 },
}

impl Rule {
    pub fn allows(self, value: u32) -> bool {
        match self {
            Rule::Credits { min, max } | Rule::Range { min, max } => (min..=max).contains(&value),
            Rule::Flag => value <= 1,
        }
    }
}

impl std::fmt::Display for Rule {
    /// The English wording after "KEY must be".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::Credits { min, max } => write!(f, "between {min} and {max} credits"),
            Rule::Flag => f.write_str("0 or 1"),
            Rule::Range { min, max } => write!(f, "between {min} and {max}"),
        }
    }
}

/// The rule of a known setting (its canonical name); `None` for an unknown one.
pub fn rule(key: &str) -> Option<Rule> {
    if !setting_keys().iter().any(|k| k == key) {
        return None;
    }
    Some(match key {
        k if k.starts_with("prices.") => Rule::Credits {
            min: 1,
            max: 1_000_000,
        },
        "app_daily_cap" => Rule::Credits {
            min: 0,
            max: 1_000_000,
        },
        "registration_open" | "signup_approval" => Rule::Flag,
        "challenge_bits" => Rule::Range {
            min: crate::idp::pow::MIN_BITS,
            max: crate::idp::pow::MAX_BITS,
        },
        _ => Rule::Range {
            min: 0,
            max: 1_000_000,
        },
    })
}

/// The range check of one setting (its canonical name).
fn check_setting(key: &str, value: u32) -> Result<(), StoreError> {
    let Some(rule) = rule(key) else {
        return Err(StoreError::Invalid(format!(
            "unknown setting {key:?}; known settings: {}",
            setting_keys().join(", ")
        )));
    };
    if rule.allows(value) {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!("{key} must be {rule}")))
    }
}

impl Store {
    pub fn settings(&self) -> Result<Settings, StoreError> {
        let txn = self.begin_read()?;
        let table = txn.open_table(SETTINGS)?;
        match table.get("settings")? {
            Some(v) => codec::decode(v.value()),
            None => Ok(Settings::default()),
        }
    }

    /// Sets one named setting; unknown names and values out of range are refused.
    pub fn set_setting(&self, key: &str, value: u32) -> Result<Settings, StoreError> {
        self.set_settings(&[(key.to_string(), value)])
    }

    /// Sets several settings at once, all or none: every name and value is checked first.
    pub fn set_settings(&self, changes: &[(String, u32)]) -> Result<Settings, StoreError> {
        self.set_settings_as(changes, None)
    }

    /// [`Store::set_settings`], and, when `audit` names who did it and when, one audit entry
    /// per changed value (`KEY old → new`) in the same transaction.
    pub fn set_settings_as(
        &self,
        changes: &[(String, u32)],
        audit: Option<(&str, Millis)>,
    ) -> Result<Settings, StoreError> {
        let changes: Vec<(String, u32)> = changes
            .iter()
            .map(|(k, v)| {
                let key = canonical_key(k);
                check_setting(&key, *v)?;
                Ok((key, *v))
            })
            .collect::<Result<_, StoreError>>()?;
        let txn = self.begin_write()?;
        let settings = {
            let mut table = txn.open_table(SETTINGS)?;
            let mut settings: Settings = match table.get("settings")? {
                Some(v) => codec::decode(v.value())?,
                None => Settings::default(),
            };
            for (key, value) in &changes {
                let old = settings.get(key);
                settings.set(key, *value).ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "unknown setting {key:?}; known settings: {}",
                        setting_keys().join(", ")
                    ))
                })?;
                if let (Some((actor, now)), Some(old)) = (audit, old)
                    && old != *value
                {
                    super::audit::append_audit(
                        &txn,
                        actor,
                        "settings.set",
                        None,
                        &format!("{key} {old} → {value}"),
                        now,
                    )?;
                }
            }
            table.insert("settings", codec::encode(&settings)?.as_slice())?;
            settings
        };
        self.commit(txn)?;
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The admin page's save: every value and its audit entry in one commit; a refused value
    /// leaves both unchanged.
    #[test]
    fn audited_settings_commit_with_their_entries() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s.redb")).unwrap();
        let before = store.settings().unwrap();
        let bad = [
            ("prices.fast".to_string(), 5),
            ("registration_open".to_string(), 7),
        ];
        assert!(
            store
                .set_settings_as(&bad, Some(("usr_x (a@b)", 1)))
                .is_err()
        );
        assert_eq!(store.settings().unwrap().entries(), before.entries());
        assert!(store.audit_log(None, 10).unwrap().is_empty());
        let old = before.price(Model::Fast);
        let good = [
            ("prices.fast".to_string(), old + 1),
            ("limits.daily".to_string(), before.daily_limit),
        ];
        store
            .set_settings_as(&good, Some(("usr_x (a@b)", 2)))
            .unwrap();
        let log = store.audit_log(None, 10).unwrap();
        assert_eq!(log.len(), 1, "only the value that changed: {log:?}");
        assert_eq!(log[0].detail, format!("prices.fast {old} → {}", old + 1));
        assert_eq!((log[0].actor.as_str(), log[0].at), ("usr_x (a@b)", 2));
    }

    #[test]
    fn prices_written_before_the_map_are_still_read() {
        let old = r#"{"price_fast":3,"price_artist":7,"price_plus":12,"price_edit":4}"#;
        let mut s: Settings = serde_json::from_str(old).unwrap_or_default();
        assert_eq!(s.price(Model::Fast), 3);
        assert_eq!(s.price(Model::Plus), 12);
        assert_eq!(s.price_edit, 4);
        assert!(s.set("prices.fast", 9).is_some());
        assert_eq!(s.price(Model::Fast), 9);
        assert_eq!(s.price(Model::Artist), 7);
        assert!(s.set("prices.pro", 9).is_none(), "aliases are not keys");
        let written = serde_json::to_string(&s).unwrap_or_default();
        assert!(!written.contains("price_fast"), "{written}");
        let back: Settings = serde_json::from_str(&written).unwrap_or_default();
        assert_eq!(back.price(Model::Artist), 7, "{written}");
        assert_eq!(back.price(Model::Plus), 12, "{written}");
        assert_eq!(Settings::default().price(Model::Artist), 5);
    }
}
