//! Installed diffusion models: a name (as used by `pictor models …` and the configuration) →
//! where the model is and what inspection found. The files themselves stay where they are (or
//! under `<data>/models/` when pulled from the hub).

use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use super::tables::MODELS;
use super::{Store, StoreError, codec};
use crate::clock::Millis;
use crate::models::{Arch, Layout};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRecord {
    pub name: String,
    /// Absolute path of the diffusers folder or the single `.safetensors` file.
    pub path: String,
    pub layout: Layout,
    pub arch: Arch,
    #[serde(default)]
    pub prediction: Option<String>,
    pub weight_bytes: u64,
    pub added_at: Millis,
    /// `owner/name@commit` for models pulled from the hub.
    #[serde(default)]
    pub source: Option<String>,
    /// SHA-256 of a single-file checkpoint (hex): its first 10 digits are AUTOMATIC1111's
    /// "Model hash".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl Store {
    /// Registers a model; a name in use is a conflict.
    pub fn add_model(&self, record: ModelRecord) -> Result<(), StoreError> {
        let txn = self.begin_write()?;
        {
            let mut t = txn.open_table(MODELS)?;
            if t.get(record.name.as_str())?.is_some() {
                return Err(StoreError::Conflict(format!(
                    "a model named {:?} is already installed",
                    record.name
                )));
            }
            t.insert(record.name.as_str(), codec::encode(&record)?.as_slice())?;
        }
        self.commit(txn)?;
        Ok(())
    }

    pub fn models(&self) -> Result<Vec<ModelRecord>, StoreError> {
        let txn = self.begin_read()?;
        let t = txn.open_table(MODELS)?;
        let mut out = Vec::new();
        for row in t.iter()? {
            out.push(codec::decode(row?.1.value())?);
        }
        Ok(out)
    }

    /// Unregisters a model and returns what it was (its files are the caller's business).
    pub fn remove_model(&self, name: &str) -> Result<ModelRecord, StoreError> {
        let txn = self.begin_write()?;
        let record = {
            let mut t = txn.open_table(MODELS)?;
            let removed = t.remove(name)?;
            match removed {
                Some(v) => codec::decode(v.value())?,
                None => return Err(StoreError::NotFound(format!("no model named {name:?}"))),
            }
        };
        self.commit(txn)?;
        Ok(record)
    }
}
