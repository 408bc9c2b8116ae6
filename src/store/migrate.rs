//! Creates tables and default settings on first start and upgrades older files.

use redb::{Database, ReadableTable};

use super::settings::Settings;
use super::tables::*;
use super::{StoreError, codec};

pub fn run(db: &Database) -> Result<(), StoreError> {
    let txn = db.begin_write()?;
    {
        // Opening a table in a write transaction creates it.
        txn.open_table(USERS)?;
        txn.open_table(USERS_BY_EMAIL)?;
        txn.open_table(USERS_BY_KEY)?;
        txn.open_table(LEDGER)?;
        txn.open_table(DAILY_USAGE)?;
        txn.open_table(JOBS)?;
        txn.open_table(JOBS_BY_USER)?;
        txn.open_table(ACTIVE_BY_USER)?;
        txn.open_table(PENDING_JOBS)?;
        txn.open_table(WEBHOOK_OUTBOX)?;
        txn.open_table(CLIENTS)?;
        txn.open_table(AUTH_CODES)?;
        txn.open_table(TOKEN_FAMILIES)?;
        txn.open_table(FAMILIES_BY_USER)?;
        txn.open_table(REFRESH_TOKENS)?;
        txn.open_table(ACCESS_TOKENS)?;
        txn.open_table(CONSENTS)?;
        txn.open_table(APP_SPEND)?;
        txn.open_table(SIGNING_KEYS)?;
        txn.open_table(SESSIONS)?;
        txn.open_table(PASSWORD_RESETS)?;
        txn.open_table(AUDIT)?;
        txn.open_table(MODELS)?;
        txn.open_table(TIERS)?;
        txn.open_table(PULLS)?;
        let mut meta = txn.open_table(META)?;
        let version = meta.get("schema_version")?.map(|v| v.value());
        match version {
            None => {
                meta.insert("schema_version", SCHEMA_VERSION)?;
            }
            Some(v) if v > SCHEMA_VERSION => {
                return Err(StoreError::Invalid(format!(
                    "the data file has schema version {v}, newer than this Pictor ({SCHEMA_VERSION}); upgrade Pictor"
                )));
            }
            Some(_) => {}
        }
        let mut settings = txn.open_table(SETTINGS)?;
        if settings.get("settings")?.is_none() {
            settings.insert("settings", codec::encode(&Settings::default())?.as_slice())?;
        }
    }
    txn.commit()?;
    Ok(())
}
